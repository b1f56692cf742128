/*
 * The inspect filter's JSON line, for others than the filter (the web
 * page's live stream, proxy/http.c).  The format is doc/inspect.md's, at
 * level `messages`.
 */
#ifndef SG_FILTERS_INSPECT_H
#define SG_FILTERS_INSPECT_H

#include "filters/filter.h"

#include <stdint.h>
#include <stdio.h>

/*
 * Write one frame's JSON line (with its newline) to `f`, the messages of
 * kinds in `kinds` (SG_KIND_BIT set) listed; with fewer than every kind,
 * a frame with none of them is left out.  `*dump_buf`/`*dump_size` hold
 * the codec's dump between calls (caller frees *dump_buf).  Returns 1 when
 * a line was written, 0 when the frame is left out, or a negative error.
 */
int sg_inspect_json(FILE *f, const struct sg_filter_call *call, uint32_t kinds, char **dump_buf,
                    size_t *dump_size);

#endif
