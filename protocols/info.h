/*
 * Info strings: `\key\value\key\value...`, the userinfo and serverinfo of
 * QuakeWorld and Quake 2 (connect packets, svc_serverdata, setinfo) and the
 * key lists some challenge replies carry.
 *
 * How the games read them (QuakeWorld and Quake 2 Info_ValueForKey): a
 * leading backslash is optional; keys and values run to the next
 * backslash or the end; the first key that matches (byte for byte, case
 * sensitive) wins; a key with no value at the very end is not a pair.
 * Their writers (Info_SetValueForKey) refuse keys and values with a
 * backslash or a double quote (Quake 2 also ';'), keys or values of 64
 * bytes or more, and a result longer than the string's limit
 * (QuakeWorld userinfo 196, serverinfo 512; Quake 2 512, all counting
 * the terminating NUL); an empty value removes the key.
 *
 * Here the string is a byte range (`s`, `len`; no NUL needed, no NUL
 * allowed inside).  Nothing is allocated and no state is kept.  Edits
 * work in place in a caller buffer and change only the bytes they must:
 * setting a key to the value it has, or removing a key that is not there,
 * leaves every byte as it was.
 */
#ifndef SG_PROTOCOLS_INFO_H
#define SG_PROTOCOLS_INFO_H

#include <stddef.h>

#define SG_INFO_MAX_KEY   64  /* keys and values must be shorter (MAX_INFO_KEY) */
#define SG_INFO_QW_USER   196 /* QuakeWorld MAX_INFO_STRING, NUL included */
#define SG_INFO_QW_SERVER 512 /* QuakeWorld MAX_SERVERINFO_STRING */
#define SG_INFO_Q2        512 /* Quake 2 MAX_INFO_STRING */

struct sg_info_pair {
    const char *key; /* points into the string */
    size_t key_len;
    const char *value; /* NULL: a key with no value at the end (not a pair for the games) */
    size_t value_len;
    size_t start; /* offset of the pair's leading backslash (or of its key if none) */
    size_t end;   /* offset just past its value */
};

struct sg_info_iter {
    const char *s; /* borrowed for the iteration */
    size_t len;
    size_t pos;
};

void sg_info_iter_init(struct sg_info_iter *it, const char *s, size_t len);

/* The next pair: 1 (pair filled in), or 0 at the end.  A lone key at the
 * end is returned once with `value` NULL. */
int sg_info_next(struct sg_info_iter *it, struct sg_info_pair *pair);

/* The value of the first `key` (length `key_len`) as the games find it:
 * 1 and *value / *value_len set (pointing into `s`), or 0 if absent. */
int sg_info_get(const char *s, size_t len, const char *key, size_t key_len, const char **value,
                size_t *value_len);

/* Is `text` (length `n`) acceptable as a key or value for the games'
 * writers: shorter than SG_INFO_MAX_KEY, no '\\', '"', ';' or NUL. */
int sg_info_valid(const char *text, size_t n);

/*
 * Remove every pair with `key` from `s` (in place; *len updated).
 * Returns the number removed; the bytes are unchanged when it is 0, and a
 * NUL follows the shorter string otherwise.
 */
int sg_info_remove(char *s, size_t *len, const char *key, size_t key_len);

/*
 * Set `key` to `value` in `s` (in place, `cap` bytes of room, *len
 * updated; `cap` is the game's limit: the result plus a NUL must fit, and
 * a NUL is written after it when it does).  The first pair with the key
 * keeps its place and gets the new value; later duplicates are removed;
 * a new key is appended as `\key\value`.  An empty value removes the key.
 * Returns 0 when the bytes did not need to change, 1 when they changed,
 * -EINVAL for a key or value sg_info_valid refuses (or an empty key),
 * SG_E_TOOBIG when the result would not fit; on an error nothing changes.
 */
int sg_info_set(char *s, size_t *len, size_t cap, const char *key, size_t key_len,
                const char *value, size_t value_len);

#endif
