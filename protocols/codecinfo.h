/* What every game's codec says of a session: its first error, its description's tail, its info (player, netchan loss). */
#ifndef SG_PROTOCOLS_CODECINFO_H
#define SG_PROTOCOLS_CODECINFO_H

#include <stddef.h>
#include <stdint.h>

#include "protocols/codec.h"

/* An error counted in `stats`; the first one kept in `first` ("WHAT: the
 * error's name", `cap` bytes). */
void sg_codec_note_error(struct sg_codec_stats *stats, char *first, size_t cap, int err,
                         const char *what);

/* A game message that did not parse (`err`), in direction `dir`: noted as
 * above ("server message" / "client message"); returns `err`. */
int sg_codec_unparsed(struct sg_codec_stats *stats, char *first, size_t cap, enum sg_dir dir,
                      int err);

/* The tail of a description whose first `n` bytes `buf` (`cap`) holds:
 * ", relayed undecoded: opcode N" when `unsupported_op` >= 0, then
 * ", first error: ..." when `first` is not empty.  Nothing when `n` says
 * the head did not fit. */
void sg_codec_describe_tail(char *buf, size_t cap, int n, int unsupported_op, const char *first);

/* `out` cleared, then the player's name and the netchan's loss per
 * direction (`lost`, `sequenced`: two each) filled in. */
void sg_codec_info_net(struct sg_codec_info *out, const char *player, const uint64_t *lost,
                       const uint64_t *sequenced);

#endif
