/*
 * slipgate configuration reader.
 *
 * The reader is generic: it knows the file syntax and the value types, and
 * nothing of routes or filters.  Each module declares a table of its
 * directives (name, type, offset into the object it configures, help text);
 * a section is a list of such tables, so a later module adds directives to
 * a section without touching the reader (the nginx ngx_command_t model).
 *
 * Syntax: one directive per line, or several separated by ';':
 *
 *     # comment            // comment too
 *     name value ...       values are words or "quoted strings" with \" \\ \n \t
 *     name [args] {        opens a block (a directive of type SG_CONF_BLOCK)
 *         ...
 *     }
 *     name [args] { a 1; b 2 }   a block on one line (may nest); it must
 *                                close on the line it opens on
 *
 * Values: INT (decimal, optional k/M/G suffix for SIZE), DURATION
 * ("60", "60s", "500ms", "2m", "1h"; stored in milliseconds), BOOL
 * (yes/no, on/off, true/false, 1/0), ENUM (one of `choices`, stored as its
 * index), STRING, PATH, ADDR ("host:port", "[v6addr]:port", "*:port").
 * BOOL and ENUM words match in any case; directive names match exactly;
 * a PATH may not be empty.
 *
 * Lexical details: a directive may not continue onto the next line; CRLF
 * line ends are accepted; an unquoted ';' always ends a directive (write
 * ";" for a semicolon value), and a trailing or doubled ';' is harmless.  '#' and '//' start a comment only where a value
 * could start (line start, after a blank or a closing quote), so `a#b` and
 * `http://x` are plain words.  Only an unquoted `{` or `}` word is
 * structural: `{` ends a block's directive and opens it (a lone `{` may
 * open the block a line without one named), `}` closes the innermost
 * block; write "{" to pass a brace as a value.  Lines and columns count from 1;
 * a column counts bytes (a tab is one column).  Blocks nest at most 15 deep.
 *
 * Every diagnostic names file, line and column and what was expected; an
 * unknown directive suggests the closest known name of that section.  All
 * errors of a file are reported: an error skips the rest of its line only,
 * and the inside of a block that could not be opened is still checked.
 * A non-block, non-CUSTOM, non-LIST directive may be given once per object.
 */
#ifndef SG_CONFIG_CONFIG_H
#define SG_CONFIG_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sg_conf_type {
    SG_CONF_STRING,   /* char * (heap, owned by the object; NULL when unset) */
    SG_CONF_PATH,     /* char *, as STRING */
    SG_CONF_ADDR,     /* char *, syntax-checked host:port, port 1-65535 (0 with .port0) */
    SG_CONF_INT,      /* int64_t */
    SG_CONF_SIZE,     /* int64_t bytes, k/M/G suffixes (powers of 1024) */
    SG_CONF_DURATION, /* int64_t milliseconds */
    SG_CONF_BOOL,     /* bool */
    SG_CONF_ENUM,     /* int: index into choices */
    SG_CONF_CUSTOM,   /* handled entirely by `set` (any number of args) */
    SG_CONF_BLOCK,    /* `name [args] { ... }`: `open` makes the child object */
    SG_CONF_LIST,     /* struct sg_conf_list: repeatable; each line appends its args
                         (between min and max of them; both 0 = exactly 1) */
};

/* What a LIST directive collects: one item per line, in file order. */
struct sg_conf_list_item {
    int argc;
    char **argv; /* argc unescaped strings */
    int line;    /* where it was given (0: command line) */
};
struct sg_conf_list {
    int count;
    struct sg_conf_list_item *items;
};
/* Free a list's items and zero it. */
void sg_conf_list_free(struct sg_conf_list *list);
/* Append one item (strings copied).  0 or -ENOMEM. */
int sg_conf_list_append(struct sg_conf_list *list, const char *const *argv, int argc, int line);

struct sg_conf_section;
struct sg_conf_diag;

/* One parsed argument of a directive line. */
struct sg_conf_arg {
    const char *text; /* unquoted, escapes resolved; valid for the call */
    int line, col;    /* where it starts */
    bool quoted;
};

struct sg_conf_directive {
    const char *name;
    enum sg_conf_type type;
    size_t offset;               /* into the section object (not for CUSTOM/BLOCK) */
    const char *const *choices;  /* ENUM: NULL-terminated */
    /* ENUM without `choices`: the i-th choice from 0, NULL past the last (a list kept elsewhere) */
    const char *(*choice_at)(int i);
    int64_t min, max;            /* INT/SIZE/DURATION bounds, inclusive; both 0 = none */
    bool port0;                  /* ADDR: port 0 allowed (a listener the kernel gives a port) */
    const char *argname;         /* for help: "ADDR:PORT", "SECONDS", ... */
    const char *help;            /* one line */
    /*
     * CUSTOM: called with all args; returns 0 or a negative error after
     * reporting through sg_conf_diag_error().  `obj` is the section object.
     * For `set` and `open`, args[-1] is the directive's own name, so an
     * error about a missing argument can point at it.
     */
    int (*set)(void *obj, const struct sg_conf_directive *d, const struct sg_conf_arg *args,
               int nargs, struct sg_conf_diag *diag, const char *file);
    /*
     * BLOCK: returns the child object that the block's directives fill
     * (owned by the parent object), or NULL after reporting an error (the
     * block's inside is then checked, not stored).  A NULL `open` makes the
     * block fill the parent object itself.
     */
    void *(*open)(void *obj, const struct sg_conf_directive *d, const struct sg_conf_arg *args,
                  int nargs, struct sg_conf_diag *diag, const char *file);
    const struct sg_conf_section *child; /* BLOCK: the child's section */
    /*
     * BLOCK, optional: the section for the object `open` returned, when it
     * depends on the block's arguments (a filter's own directives).  NULL
     * from it, or a failed `open`, falls back to `child`.
     */
    const struct sg_conf_section *(*child_section)(void *child);
    /*
     * STRING/PATH/ADDR, optional: called after a value was stored into
     * `obj`, with the argument it came from (line 0: the command line), so
     * a later check can point at it.
     */
    void (*stored)(void *obj, const struct sg_conf_directive *d, const struct sg_conf_arg *arg);
};

/* A scope: the top level, or the inside of one kind of block. */
struct sg_conf_section {
    const char *name;                            /* "top level", "route", ... */
    const struct sg_conf_directive *const *tables; /* NULL-terminated; each ends with {NULL} */
};

/*
 * Collected diagnostics, caller-owned.  Each message is
 * "FILE:LINE:COL: error: TEXT", or "FILE:LINE: error: TEXT" when the column
 * is 0, or "ORIGIN: error: TEXT" when the line is 0 (sg_conf_set, an
 * unreadable file).  TEXT quotes names and values in '...', clipped to 63
 * bytes, control characters shown as '?'.
 */
#define SG_CONF_MAX_DIAGS 32
struct sg_conf_diag {
    int count;                        /* errors reported (may exceed the stored ones) */
    char msgs[SG_CONF_MAX_DIAGS][320];
};

void sg_conf_diag_init(struct sg_conf_diag *diag);
/* Records one error; format like printf; `file` NULL reads "config"; `diag` NULL is ignored. */
void sg_conf_diag_error(struct sg_conf_diag *diag, const char *file, int line, int col,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/*
 * Parse `text` (`len` bytes, named `file` in diagnostics) into `obj`
 * according to `root`.  Returns 0 when no error was reported, else
 * SG_E_CONFIG (-ENOMEM if memory ran out, -EINVAL for NULL `root`); all
 * errors found (not just the first) are in `diag` (NULL: not kept).
 * STRING/PATH/ADDR members of `obj` must be NULL or heap strings: a new
 * value frees the old one.  `text` is borrowed for the call.
 */
int sg_conf_parse_text(const char *file, const char *text, size_t len,
                       const struct sg_conf_section *root, void *obj, struct sg_conf_diag *diag);
/*
 * Reads the file and parses it.  An unreadable file is one diagnostic
 * ("PATH: error: cannot open file: No such file or directory") and returns
 * the negated errno; otherwise returns as sg_conf_parse_text().
 */
int sg_conf_parse_file(const char *path, const struct sg_conf_section *root, void *obj,
                       struct sg_conf_diag *diag);

/*
 * Set one directive of `section` on `obj` from a single textual value, as
 * `+set NAME VALUE` does.  `origin` names the source in diagnostics
 * (NULL reads "command line"), which look like "command line: error:
 * 'max_sessions' expects an integer between 1 and 100000, got 'lots'".
 * Returns 0, -ENOENT when `section` has no such directive (no diagnostic),
 * or SG_E_CONFIG after reporting an error (-ENOMEM when out of memory).
 * A CUSTOM directive's `set` gets `value` as its only argument, at line 0.
 * With `obj` NULL the value is only checked.
 */
int sg_conf_set(const struct sg_conf_section *section, void *obj, const char *name,
                const char *value, const char *origin, struct sg_conf_diag *diag);

/* Look up a directive by name in a section; NULL if none. */
const struct sg_conf_directive *sg_conf_find(const struct sg_conf_section *section,
                                             const char *name);
/*
 * The known name closest to `name` (edit distance with transpositions,
 * ignoring case), or NULL if none is within max(2, len/3) edits (and fewer
 * than len edits).  Returns a name from the tables (static).
 */
const char *sg_conf_suggest(const struct sg_conf_section *section, const char *name);

/* Free the STRING/PATH/ADDR members of `obj` and set them NULL (not BLOCK children). */
void sg_conf_free_strings(const struct sg_conf_section *section, void *obj);

/*
 * Parse helpers shared with the command line: return 0, -EINVAL for bad
 * syntax, -ERANGE for a number that does not fit.
 */
int sg_conf_parse_duration(const char *s, int64_t *ms);
int sg_conf_parse_bool(const char *s, bool *out);
/*
 * Split "host:port", "[v6]:port" or "*:port"; host/port written
 * NUL-terminated, the brackets removed, "*" (any address) kept as "*".
 * A host is a name or IPv4 address (letters, digits, '.', '-', '_') or, in
 * brackets, an IPv6 address with an optional %zone; the port is 0-65535.
 * Returns -ERANGE for a port above 65535, -ENOSPC when a buffer is short.
 */
int sg_conf_split_addr(const char *s, char *host, size_t hostcap, char *port, size_t portcap);

#endif
