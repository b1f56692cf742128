/*
 * Game text in dumps: the bytes of a string as the inspector, `demo dump`
 * and `pcap decode` show them.
 */
#ifndef SG_PROTOCOLS_TEXT_H
#define SG_PROTOCOLS_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * Write the `n` bytes at `s` (borrowed for the call) to `out`, without
 * quotes: `"` and `\` escaped with a backslash, a newline as `\n`, any other
 * byte below 0x20 or above 0x7e as `\u00XX` (json) or `\xXX` (text), the
 * rest as they are.
 */
void sg_put_escaped(FILE *out, const uint8_t *s, size_t n, bool json);

#endif
