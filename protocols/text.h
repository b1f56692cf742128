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
 * quotes: as the inside of a JSON string under json.h's rule (json), or as
 * text with `"` and `\` escaped with a backslash, a newline as `\n`, any
 * other byte below 0x20 or above 0x7e as `\xXX` and the rest as they are.
 */
void sg_put_escaped(FILE *out, const uint8_t *s, size_t n, bool json);

/*
 * The first word of the command `s` (`n` bytes, borrowed), after leading
 * spaces, into `verb` (at most `cap` - 1 bytes kept, NUL-terminated);
 * returns the offset of what follows it and its spaces.
 */
size_t sg_text_verb(const char *s, size_t n, char *verb, size_t cap);

/* `s` without its trailing newlines and spaces, then without the quotes
 * around it if it has both: `*t` points into `s`. */
void sg_text_unquoted(const char *s, size_t n, const char **t, size_t *len);

/* Is the client command `s` a `say` or `say_team`?  Then `*t` (into `s`)
 * and `*len` are the chat text, unquoted. */
bool sg_text_say(const char *s, size_t n, const char **t, size_t *len);

#endif
