/*
 * Quake 3 demo files for the offline tools (`slipgate demo info|dump|
 * reencode|cut`), behind the codec table's demo reader (codec.h, struct
 * sg_demo_impl).  The proxy picks the file's game and opens the files;
 * everything here reads and writes Quake 3 bytes with the same message
 * layer the proxy runs live.
 *
 *   info      protocol, map, game, server, players, duration, counts, errors
 *   dump      every message decoded, one line each (text or JSON, dump.h)
 *   reencode  decode + encode every message; how many came out byte-identical
 *   cut       the span of server time [from, to] as a playable demo
 *             (synthesized gamestate + non-delta first snapshot)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/byteorder.h"
#include "protocols/codec.h"
#include "protocols/error.h"
#include "protocols/q3/demo.h"
#include "protocols/q3/variant.h"
#include "protocols/q3/dump.h"
#include "protocols/q3/state.h"
#include "protocols/q3/svmsg.h"

/*
 * A demo's first block: int32 sequence, int32 length up to MAX_MSGLEN (or
 * the end marker's -1), then the next block's header: the end marker or a
 * later sequence with a length the game accepts.  (A file that ends inside
 * its first message is not taken for a demo.)
 */
static int q3_demo_probe(const uint8_t *head, size_t len)
{
    int32_t seq, length, seq2, length2;

    if (len < 8)
        return SG_DEMO_PROBE_UNKNOWN;
    seq = (int32_t)sg_le32(head);
    length = (int32_t)sg_le32(head + 4);
    if (length == -1)
        return SG_DEMO_PROBE_YES;
    if (length < 0 || length > SG_Q3_MAX_MSGLEN)
        return SG_DEMO_PROBE_NO;
    /* (`len` < SG_DEMO_HEAD_MAX: the whole file, which the first block must fit in) */
    if (len < 8 + (size_t)length)
        return len < SG_DEMO_HEAD_MAX ? SG_DEMO_PROBE_NO : SG_DEMO_PROBE_UNKNOWN;
    if (len < 8 + (size_t)length + 8)
        return SG_DEMO_PROBE_YES; /* one message, then a cut: a crashed recording */
    seq2 = (int32_t)sg_le32(head + 8 + length);
    length2 = (int32_t)sg_le32(head + 8 + length + 4);
    if (length2 == -1)
        return SG_DEMO_PROBE_YES;
    return seq2 > seq && length2 >= 0 && length2 <= SG_Q3_MAX_MSGLEN ? SG_DEMO_PROBE_YES
                                                                     : SG_DEMO_PROBE_NO;
}

/* Everything `info` reports about one file. */
struct info {
    struct sg_q3_dump_stats n; /* messages, snapshots, errors, how the file ended */
    int32_t first_time, last_time;
    bool have_time;
    size_t partial;
};

/* Copy `s` without Quake color codes (^X). */
static void clean_name(const char *s, char *out, size_t cap)
{
    size_t n = 0;

    for (; *s && n + 1 < cap; s++) {
        if (s[0] == '^' && s[1]) {
            s++;
            continue;
        }
        out[n++] = *s;
    }
    out[n] = 0;
}

/* Decode a whole file through one state, gathering counts and times. */
static int scan(struct sg_q3_demo_reader *r, struct sg_q3_state *st, struct info *in)
{
    uint8_t *buf = malloc(SG_Q3_MAX_MSGLEN);
    struct sg_q3_svmsg msg;
    int err;

    memset(in, 0, sizeof(*in));
    if (!buf)
        return -ENOMEM;
    sg_q3_svmsg_init(&msg);
    for (;;) {
        size_t len;
        int perr;

        err = sg_q3_dump_next(r, st, buf, &len, &msg, &perr, &in->n);
        if (err <= 0)
            break;
        for (uint32_t i = 0; i < msg.num_snaps; i++) {
            const struct sg_q3_snap *s = &msg.snaps[i];

            if (!in->have_time)
                in->first_time = s->server_time;
            in->last_time = s->server_time;
            in->have_time = true;
        }
    }
    in->partial = r->partial;
    sg_q3_svmsg_finish(&msg);
    free(buf);
    return err == -ENOMEM ? err : 0;
}

/* The players named in the configstrings at the end of the file. */
static void print_players(const struct sg_q3_state *st, FILE *out)
{
    int count = 0;

    fprintf(out, "players:      ");
    for (int i = 0; i < SG_Q3_MAX_CLIENTS; i++) {
        char name[64], clean[64];

        if (!sg_q3_info_value(sg_q3_state_configstring(st, SG_Q3_CS_PLAYERS + i), "n", name,
                              sizeof(name)))
            continue;
        clean_name(name, clean, sizeof(clean));
        fprintf(out, "%s%d:%s", count++ ? ", " : "", i, clean);
    }
    fprintf(out, "%s\n", count ? "" : "(none)");
}

/* `demo info` for one file. */
static int q3_demo_info(FILE *f, const char *path, FILE *out)
{
    struct sg_q3_demo_reader r;
    struct sg_q3_state *st;
    struct info in;
    char map[256], game[256], version[256], proto[32], fsgame[256];
    const char *serverinfo;
    uint64_t errors;

    sg_q3_demo_reader_init(&r, f, sg_q3_demo_protocol_from_name(path));
    st = sg_q3_state_create(r.protocol);
    if (!st || scan(&r, st, &in) < 0) {
        sg_q3_state_destroy(st);
        return -ENOMEM;
    }

    /* what the configstrings say */
    serverinfo = sg_q3_state_configstring(st, SG_Q3_CS_SERVERINFO);
    sg_q3_info_value(serverinfo, "mapname", map, sizeof(map));
    sg_q3_info_value(serverinfo, "gamename", game, sizeof(game));
    sg_q3_info_value(serverinfo, "version", version, sizeof(version));
    if (!sg_q3_info_value(serverinfo, "protocol", proto, sizeof(proto)))
        sg_q3_info_value(serverinfo, "com_protocol", proto, sizeof(proto)); /* ioquake3 */
    sg_q3_info_value(sg_q3_state_configstring(st, SG_Q3_CS_SYSTEMINFO), "fs_game", fsgame,
                     sizeof(fsgame));
    errors = in.n.decode_errors + in.n.nodelta + (in.n.end != 0);

    fprintf(out, "file:         %s\n", path);
    fprintf(out, "protocol:     %s (file name: %d)\n", proto[0] ? proto : "?", r.protocol);
    fprintf(out, "map:          %s\n", map[0] ? map : "?");
    fprintf(out, "game:         %s%s%s\n", game[0] ? game : "?", fsgame[0] ? ", fs_game " : "",
            fsgame);
    fprintf(out, "server:       %s\n", version[0] ? version : "?");
    print_players(st, out);
    if (in.have_time)
        fprintf(out, "duration:     %.3f s (server time %d .. %d)\n",
                ((double)in.last_time - (double)in.first_time) / 1000.0, in.first_time,
                in.last_time);
    else
        fprintf(out, "duration:     ? (no snapshots)\n");
    fprintf(out, "messages:     %" PRIu64 " (%" PRIu64 " gamestates, %" PRIu64 " snapshots)\n",
            in.n.messages, in.n.gamestates, in.n.snapshots);
    fprintf(out, "errors:       %" PRIu64, errors);
    if (in.n.decode_errors)
        fprintf(out, ", %" PRIu64 " messages failed to decode", in.n.decode_errors);
    if (in.n.nodelta)
        fprintf(out, ", %" PRIu64 " snapshots with a missing delta base", in.n.nodelta);
    if (in.n.end)
        fprintf(out, ", file ends without end marker (%s, %zu stray bytes)", sg_errname(in.n.end),
                in.partial);
    fprintf(out, "\n");

    sg_q3_state_destroy(st);
    return errors > INT32_MAX ? INT32_MAX : (int)errors;
}

/* `demo dump`: every message, one line each. */
static int q3_demo_dump(FILE *f, const char *path, bool json, FILE *out)
{
    struct sg_q3_demo_reader r;
    struct sg_q3_dump_stats stats;
    int err;

    sg_q3_demo_reader_init(&r, f, sg_q3_demo_protocol_from_name(path));
    err = sg_q3_dump_demo(out, json ? SG_Q3_DUMP_JSON : SG_Q3_DUMP_TEXT, &r, &stats);
    if (err < 0)
        return err;
    return (stats.decode_errors || stats.nodelta || stats.end) ? 1 : 0;
}

/* Decode and encode every message of `f` into `outf`, or with `span` only
 * the server time [span[0], span[1]]: 0, or the error; the counts in *cs. */
static int transcode(FILE *f, const char *path, FILE *outf, const int32_t *span,
                     struct sg_q3_demo_stats *cs)
{
    struct sg_q3_demo_reader r;
    struct sg_q3_demo_writer w;
    int err, ferr;

    sg_q3_demo_reader_init(&r, f, sg_q3_demo_protocol_from_name(path));
    sg_q3_demo_writer_init(&w, outf);
    err = span ? sg_q3_demo_cut(&r, &w, span[0], span[1], cs) : sg_q3_demo_reencode(&r, &w, cs);
    ferr = sg_q3_demo_writer_finish(&w);
    if (err < 0 || ferr < 0)
        return err < 0 ? err : ferr;
    return 0;
}

/* `demo reencode`: decode + encode every message into `outf`. */
static int q3_demo_reencode(FILE *f, const char *path, FILE *outf, FILE *out)
{
    struct sg_q3_demo_stats cs;
    int err = transcode(f, path, outf, NULL, &cs);

    if (err < 0)
        return err;
    fprintf(out,
            "%" PRIu64 " messages, %" PRIu64 " byte-identical, %" PRIu64 " failed to decode%s\n",
            cs.messages, cs.identical, cs.decode_errors,
            cs.end ? " (input ends without end marker)" : "");
    return cs.identical == cs.messages && !cs.end ? 0 : 1;
}

/* `demo cut`: the span [from, to] of server time as a playable demo. */
static int q3_demo_cut(FILE *f, const char *path, FILE *outf, int32_t from, int32_t to, FILE *out)
{
    struct sg_q3_demo_stats cs;
    int32_t span[2] = {from, to};
    int err = transcode(f, path, outf, span, &cs);

    if (err < 0)
        return err;
    fprintf(out, "wrote %" PRIu64 " messages (%" PRIu64 " re-encoded) from %" PRIu64 " read%s\n",
            cs.written, cs.rewritten, cs.messages, cs.started ? "" : "; no snapshot in that span");
    return !cs.started || cs.decode_errors ? 1 : 0;
}

const struct sg_demo_impl sg_q3_demo_impl = {
    .extensions = sg_q3_variant_read_exts,
    .probe = q3_demo_probe,
    .info = q3_demo_info,
    .dump = q3_demo_dump,
    .reencode = q3_demo_reencode,
    .cut = q3_demo_cut,
};
