/*
 * JSON strings: the one writer of JSON text for every output of slipgate
 * (`--stats`, the `/api/` documents, the inspector and `/api/stream`, `demo dump --json`,
 * `pcap decode --json`, `filters --json`, `demo verify --json`).  The rest
 * of a document (braces, keys, numbers) is plain ASCII its writer prints.
 *
 * The one rule for bytes.  A string's bytes are read as UTF-8: every
 * well-formed UTF-8 sequence (shortest form, no surrogate, at most
 * U+10FFFF) is written as it is, so a file name `dé` reads `dé`; every
 * other byte is the character of the same number, its Latin-1 reading,
 * written as the escape \u00XX (0x80..0xff).  Quake's high-bit ("bronze")
 * game text is rarely well-formed UTF-8 and so keeps one \u00XX per byte,
 * as the dumps have always shown it.  `"` and `\` are escaped with a
 * backslash, newline, tab and carriage return as \n \t \r, every other
 * byte below 0x20 and 0x7f as \u00XX.  The output is therefore valid JSON
 * and valid UTF-8 for any input bytes (tests/fuzz/fuzz_json.c).
 */
#ifndef SG_PROTOCOLS_JSON_H
#define SG_PROTOCOLS_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The length of the well-formed UTF-8 sequence at `s` (`n` bytes left, n > 0):
 * 1 for ASCII, 2 to 4, or 0 where the byte at `s` begins none. */
size_t sg_utf8_seq(const uint8_t *s, size_t n);

/* The `n` bytes at `s` (borrowed) as the inside of a JSON string, without quotes. */
void sg_json_chars(FILE *f, const void *s, size_t n);

/* The `n` bytes at `s` (borrowed) as a JSON string, quotes included. */
void sg_json_str(FILE *f, const void *s, size_t n);

/* The NUL-terminated `s` as a JSON string; NULL is written as "". */
void sg_json_cstr(FILE *f, const char *s);

#endif
