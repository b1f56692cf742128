/*
 * Quake 3 decoded server messages as text: one line per message, either
 * a compact human-readable form or JSON (one object per line).  Used by
 * `slipgate demo dump`, the inspector and the golden-file tests.
 *
 * Text line:
 *     <seq> len=<bytes> ack=<reliableAck> | <op> <fields> | <op> ... [| error=<name>]
 * with entity updates as #<num>{lc=<n> <field>=<value> ...}, {remove} or
 * {nochange}, the playerstate as ps{lc=<n> ... stats{<i>:<v>}}.  Floats
 * sent in 13-bit integral form print as integers, full floats with nine
 * significant digits and always a '.', 'e', "nan" or "inf".  Strings print
 * their raw wire bytes, C-escaped.
 *
 * JSON line: {"seq":..,"len":..,"ack":..,"ops":[{"op":"svc_snapshot",...}],
 * "error":"SG_E_..."}; strings under protocols/json.h's rule; non-finite
 * floats as strings.
 */
#ifndef SG_PROTOCOLS_Q3_DUMP_H
#define SG_PROTOCOLS_Q3_DUMP_H

#include <stddef.h>
#include <stdio.h>

#include "protocols/q3/demo.h"
#include "protocols/q3/svmsg.h"

enum sg_q3_dump_format {
    SG_Q3_DUMP_TEXT,
    SG_Q3_DUMP_JSON,
};

/*
 * Print message `msg` (decoded from `len` bytes with parse status `err`)
 * as one line, newline included, to `out`.  Returns 0 or -EIO.
 */
int sg_q3_dump_message(FILE *out, enum sg_q3_dump_format format, const struct sg_q3_svmsg *msg,
                       size_t len, int err);

/* What a whole-demo dump found. */
struct sg_q3_dump_stats {
    uint64_t messages;
    uint64_t decode_errors; /* messages that failed to decode */
    uint64_t nodelta;       /* snapshots whose base frame was missing */
    uint64_t gamestates, snapshots;
    int end; /* 0: end marker; else the reader's error (SG_E_TRUNCATED ...) */
};

/*
 * Read the next message of `r` into `buf` (SG_Q3_MAX_MSGLEN bytes) and parse
 * it through `st` into `msg`, counted in `stats`: the reader's result (> 0 a
 * message, its length in *len and the parse's result in *perr; 0 the end
 * marker and < 0 what ended the file, both kept in stats->end), or -ENOMEM
 * (not counted) when the parse ran out of memory.
 */
int sg_q3_dump_next(struct sg_q3_demo_reader *r, struct sg_q3_state *st, uint8_t *buf,
                    size_t *len, struct sg_q3_svmsg *msg, int *perr,
                    struct sg_q3_dump_stats *stats);

/*
 * Decode every message of `r` with a fresh stream state and print one line
 * per message to `out`, then a last line for the end of the file: text
 * "# end marker" / "# end <error name> partial=<bytes>", JSON
 * {"end":"marker"} / {"end":"SG_E_TRUNCATED","partial":<bytes>}.  Fills
 * `stats` (may be NULL).  Returns 0 or a negative error (-ENOMEM, -EIO);
 * decode errors are not failures here, they are counted.
 */
int sg_q3_dump_demo(FILE *out, enum sg_q3_dump_format format, struct sg_q3_demo_reader *r,
                    struct sg_q3_dump_stats *stats);

#endif
