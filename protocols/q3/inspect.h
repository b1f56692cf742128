/*
 * Quake 3 frames for the inspector (the codec's dump hook, codec.h): one
 * decoded datagram as text lines or as one JSON object, at three levels.
 * The formats are documented in doc/inspect.md ("q3" object).
 *
 * Text, one line per item, each ending in '\n':
 *
 *   packets   q3 <rx> seq=<n> len=<datagram bytes> [frag=<start>+<length>]
 *                [qport=<n>] [checksum=0x<hex>] [dropped=<n>] ...
 *             then per rx: message: msg=<bytes> pieces=<n> and the
 *             acknowledgements; oob: the command word and its numbers
 *   messages  + one line per message: "  msg <i> <kind> <name> #<number> <text>"
 *             (frame->msgs when the codec filled them, else derived from
 *             the parsed message)
 *   fields    + everything: the server message as dump.h prints it, each
 *             usercmd and client command, the whole out-of-band text
 *
 * JSON: {"rx":"message","seq":..,...,"msgs":[...],"sv":{dump.h object},
 * "cl":{...},"oob":{...}} without a newline; strings are the raw bytes,
 * control characters and bytes >= 0x7f as \u00XX.
 */
#ifndef SG_PROTOCOLS_Q3_INSPECT_H
#define SG_PROTOCOLS_Q3_INSPECT_H

#include <stdbool.h>
#include <stdio.h>

#include "protocols/codec.h"
#include "protocols/q3/netchan.h"
#include "protocols/q3/svmsg.h"

/*
 * Write frame `f` (its codec-neutral part; may be NULL) decoded as `qf`
 * to `out` at `level`, as text lines or one JSON object.  `sv` is the
 * parsed server message for an S2C MESSAGE frame (else NULL) and
 * `sv_parse_err` its parse status.  Everything is borrowed for the call.
 * Returns the number of bytes written, or -ENOMEM / -EIO.
 */
int sg_q3_inspect_dump(FILE *out, const struct sg_frame *f, const struct sg_q3_frame *qf,
                       const struct sg_q3_svmsg *sv, int sv_parse_err, enum sg_dump_level level,
                       bool json);

#endif
