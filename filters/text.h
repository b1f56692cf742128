/*
 * Helpers shared by the text filters (guard, rewrite, drop, textlog,
 * inject): message-kind lists ("print,chat"), the direction setting,
 * compiled POSIX extended regular expressions and escaping text for logs.
 * Internal to filters/ (not installed).
 */
#ifndef SG_FILTERS_TEXT_H
#define SG_FILTERS_TEXT_H

#include "config/config.h"
#include "protocols/codec.h"

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A set of message kinds: bit (1u << kind). */
#define SG_KIND_BIT(k) (1u << (unsigned)(k))
/* Every kind that carries text. */
#define SG_KINDS_TEXT (((1u << SG_MSG_KIND_COUNT) - 1) & ~SG_KIND_BIT(SG_MSG_GAME))

/*
 * Read a `kinds` list (words and/or comma-separated words, over any number
 * of lines: "print,chat", "print chat"; "text" means every text kind, "all"
 * every kind) into *mask.  An empty list leaves *mask as it is.  Returns 0,
 * or SG_E_CONFIG with a message naming the bad word, its line and the
 * valid names in `err`.
 */
int sg_filter__kinds_parse(const struct sg_conf_list *list, const char *directive, uint32_t *mask,
                           char *err, size_t errlen);
static inline bool sg_filter__kind_in(uint32_t mask, enum sg_msg_kind k)
{
    return (unsigned)k < SG_MSG_KIND_COUNT && (mask & SG_KIND_BIT(k));
}

/* The `direction` setting: an ENUM directive with these choices (index = value). */
enum sg_filter_direction {
    SG_FILTER_DIR_BOTH,
    SG_FILTER_DIR_TO_CLIENT,
    SG_FILTER_DIR_TO_SERVER,
};
extern const char *const sg_filter__direction_choices[]; /* "both", "to_client", "to_server" */
static inline bool sg_filter__dir_matches(int direction, enum sg_dir dir)
{
    return direction == SG_FILTER_DIR_BOTH ||
           (direction == SG_FILTER_DIR_TO_CLIENT && dir == SG_DIR_S2C) ||
           (direction == SG_FILTER_DIR_TO_SERVER && dir == SG_DIR_C2S);
}
/* "to_client" or "to_server": how logs name a frame's direction. */
static inline const char *sg_filter__dir_name(enum sg_dir dir)
{
    return dir == SG_DIR_S2C ? "to_client" : "to_server";
}

/* Compiled patterns of a LIST directive: item i's argv[0], with its other args kept. */
struct sg_filter__regex {
    regex_t re;
    bool compiled;
    const char *source; /* borrowed from the list item */
    const char *arg1;   /* the item's second argument (a replacement), or NULL */
    int line;
};
struct sg_filter__regexes {
    int n;
    struct sg_filter__regex *v;
};

/*
 * Compile every item of `list` (REG_EXTENDED, plus `cflags`).  The list
 * must outlive the result.  Returns 0, or SG_E_CONFIG / -ENOMEM with
 * "'DIRECTIVE' on line N: bad regular expression 'X': why" in `err`
 * (nothing is left allocated).
 */
int sg_filter__regexes_compile(struct sg_filter__regexes *out, const struct sg_conf_list *list,
                               const char *directive, int cflags, char *err, size_t errlen);
void sg_filter__regexes_free(struct sg_filter__regexes *rx); /* accepts a zeroed struct */
/* The index of the first pattern matching `text`, or -1. */
int sg_filter__regexes_match(const struct sg_filter__regexes *rx, const char *text);

/*
 * Write `text` (`len` bytes) into `out` (capacity `cap`, always
 * NUL-terminated) for a one-line log: backslash, control characters and
 * bytes above 126 escaped (\\ \n \r \t \xHH), Quake 3 colour codes (^ and
 * a letter or digit) removed when `strip_colors`, at most `clip` bytes of
 * input read (an ellipsis "..." marks a clipped text).  Returns the
 * length written.
 */
size_t sg_filter__escape(char *out, size_t cap, const char *text, size_t len, size_t clip,
                         bool strip_colors);

/* An ISO-8601 UTC timestamp with milliseconds, "2026-11-22T07:49:32.123Z", of the wall clock. */
void sg_filter__timestamp(char *out, size_t cap);

#endif
