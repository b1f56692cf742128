/* What every game's codec says of a session: its first error, its description's tail, its info (player, netchan loss). */
#include "protocols/codecinfo.h"

#include "protocols/error.h"

#include <stdio.h>
#include <string.h>

void sg_codec_note_error(struct sg_codec_stats *stats, char *first, size_t cap, int err,
                         const char *what)
{
    stats->errors++;
    if (!first[0])
        snprintf(first, cap, "%s: %s", what, sg_strerror(err));
}

int sg_codec_unparsed(struct sg_codec_stats *stats, char *first, size_t cap, enum sg_dir dir,
                      int err)
{
    sg_codec_note_error(stats, first, cap, err,
                        dir == SG_DIR_S2C ? "server message" : "client message");
    return err;
}

void sg_codec_describe_tail(char *buf, size_t cap, int n, int unsupported_op, const char *first)
{
    if (unsupported_op >= 0 && n > 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, ", relayed undecoded: opcode %d", unsupported_op);
    if (first[0] && n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, ", first error: %s", first);
}

void sg_codec_info_net(struct sg_codec_info *out, const char *player, const uint64_t *lost,
                       const uint64_t *sequenced)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->player, sizeof(out->player), "%s", player);
    for (int d = 0; d < 2; d++) {
        out->lost[d] = lost[d];
        out->sequenced[d] = sequenced[d];
    }
}
