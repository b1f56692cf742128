/*
 * What the games share at the door (proxy/ban.h): recognising an
 * out-of-band text command (0xFFFFFFFF, then a word) and writing the
 * connectionless print a game's server sends a client it refuses; the
 * fixed packets and the printed answers the codecs build (status queries,
 * heartbeats, QuakeWorld's proxy answers).
 */
#ifndef SG_PROTOCOLS_DOOR_H
#define SG_PROTOCOLS_DOOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Is `d` (`n` bytes) an out-of-band packet whose first word is `word`
 * (followed by a blank, a newline, a NUL or the end)?  `icase`: the word
 * in any case (Quake 3 compares with Q_stricmp).
 */
bool sg_door_oob_is(const uint8_t *d, size_t n, const char *word, bool icase);

/*
 * Write 0xFFFFFFFF, `head` and the first of `texts` (NULL-terminated,
 * longest first) that fits in `cap` bytes, into `out`.  Returns the length,
 * or 0 when none fits.  `nul`: a NUL ends the text too.
 */
size_t sg_door_oob_print(uint8_t *out, size_t cap, const char *head, const char *const *texts,
                         bool nul);

/* The `n` bytes of `bytes` put at `out`: n, or -ENOSPC when `cap` is smaller. */
int sg_door_put(uint8_t *out, size_t cap, const void *bytes, size_t n);

/* Do the `len` bytes at `d` start with the `n` bytes of `prefix`? */
bool sg_door_starts(const uint8_t *d, size_t len, const void *prefix, size_t n);

/*
 * 0xFFFFFFFF, then the text `fmt` prints and a NUL (as servers end their
 * answers), at `out`: its length, or -ENOSPC when it does not fit `cap`.
 */
int sg_door_oob_printf(uint8_t *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
