/*
 * Configuration reader: drives the lexer over a file, line by line, cuts
 * each line into directives (at ';', after a '{' and around a '}') and
 * applies each directive to the object of the innermost open block.
 *
 * The reader keeps a stack of open blocks.  Each frame has a section (the
 * directives allowed inside; NULL when the block itself was unknown, so its
 * inside is skipped) and an object (NULL when the block could not be opened:
 * its inside is still checked, only nothing is stored).  Thus one mistake
 * gives one error, and every line of the file is still looked at:
 *
 * - an error in a directive skips the rest of that directive only (a
 *   lexical error, the rest of its line);
 * - a bad block line still pushes a frame, so its '}' closes it;
 * - a block line without '{' followed by a line starting with '{' opens
 *   the block without a second error;
 * - a block with more after its '{' on the same line (`filter f { x 1 }`)
 *   must close on that line; if it does not, that is one error and the
 *   block is closed there;
 * - blocks still open at the end of the file are reported at the last line.
 *
 * Non-block directives (except CUSTOM) may be given once per object.
 */
#include "config/internal.h"

#include "protocols/error.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH     16
#define MAX_FILE_SIZE (16 << 20)
#define MAX_NAME      64 /* longest name sg_conf_suggest() compares */

/* One open block. */
struct frame {
    const struct sg_conf_section *section; /* NULL: unknown block, skip its inside */
    void *obj;                             /* NULL: check only */
    char name[48];                         /* the block's directive, for messages */
    int line;                              /* where it was opened */
    int brace_col;                         /* > 0: a one-line block, its '{' column */
    int seen_start;                        /* its first entry in parser.seen */
};

/* A non-repeatable directive already given in an open block. */
struct seen {
    const struct sg_conf_directive *d;
    int line;
};

struct parser {
    const char *file;
    struct sg_conf_diag *diag;
    struct sg_conf__lexer lx;
    struct frame frames[MAX_DEPTH];
    int depth;  /* frames in use, the top level included */
    int excess; /* blocks open beyond MAX_DEPTH, only counted */
    struct seen *seen;
    int nseen, seencap;
    const struct sg_conf_directive *pending; /* block line that lacked its '{' */
    bool oom;
};

void sg_conf_diag_init(struct sg_conf_diag *diag)
{
    if (diag)
        memset(diag, 0, sizeof(*diag));
}

void sg_conf_diag_error(struct sg_conf_diag *diag, const char *file, int line, int col,
                        const char *fmt, ...)
{
    if (!diag || diag->count < 0)
        return;
    int slot = diag->count;
    if (diag->count < INT_MAX)
        diag->count++;
    if (slot >= SG_CONF_MAX_DIAGS)
        return;

    /* "FILE:LINE:COL: ", "FILE:LINE: " or "FILE: ", then the text. */
    char *m = diag->msgs[slot];
    size_t cap = sizeof(diag->msgs[slot]);
    int n;
    if (!file)
        file = "config";
    if (line > 0 && col > 0)
        n = snprintf(m, cap, "%s:%d:%d: error: ", file, line, col);
    else if (line > 0)
        n = snprintf(m, cap, "%s:%d: error: ", file, line);
    else
        n = snprintf(m, cap, "%s: error: ", file);
    if (n < 0 || (size_t)n >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m + n, cap - (size_t)n, fmt, ap);
    va_end(ap);
}

/* Reports at an argument's position. */
__attribute__((format(printf, 3, 4))) static void
error_at(struct parser *p, const struct sg_conf_arg *at, const char *fmt, ...)
{
    char text[320];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    sg_conf_diag_error(p->diag, p->file, at->line, at->col, "%s", text);
}

/* Is `a` the unquoted structural word `mark` ('{', '}' or ';')? */
static bool is_mark(const struct sg_conf_arg *a, char mark)
{
    return !a->quoted && a->text[0] == mark && a->text[1] == '\0';
}

/* Opens a frame; past MAX_DEPTH only counts it. */
static void push_frame(struct parser *p, const struct sg_conf_section *section, void *obj,
                       const struct sg_conf_arg *name)
{
    if (p->depth == MAX_DEPTH) {
        error_at(p, name, "blocks are nested too deeply (at most %d levels)", MAX_DEPTH - 1);
        p->excess = 1;
        return;
    }
    struct frame *f = &p->frames[p->depth++];
    f->section = section;
    f->obj = obj;
    sg_conf__clip(name->text, f->name, sizeof(f->name));
    f->line = name->line;
    f->brace_col = 0;
    f->seen_start = p->nseen;
}

/* A '}': closes the innermost block. */
static void close_block(struct parser *p, const struct sg_conf_arg *brace)
{
    if (p->depth == 1) {
        error_at(p, brace, "unexpected '}'");
        return;
    }
    p->nseen = p->frames[--p->depth].seen_start;
}

/* A line that failed to lex but visibly ends with '{' still opens a (skipped) block. */
static void lex_failed(struct parser *p, const char *text, size_t len, int line)
{
    while (len > 0 && strchr(" \t\r\v\f", text[len - 1]))
        len--;
    if (len == 0 || text[len - 1] != '{' || (len > 1 && !strchr(" \t\v\f", text[len - 2])))
        return;
    struct sg_conf_arg at = {.text = p->lx.nargs > 0 ? p->lx.args[0].text : "{",
                             .line = line,
                             .col = p->lx.nargs > 0 ? p->lx.args[0].col : (int)len};
    if (p->excess > 0)
        p->excess++;
    else
        push_frame(p, NULL, NULL, &at);
}

/* The words of an unknown directive's message: "at top level" or "in route block". */
static void report_unknown(struct parser *p, const struct sg_conf_arg *name)
{
    const struct frame *f = &p->frames[p->depth - 1];
    const char *what = f->section->name ? f->section->name : p->depth == 1 ? "top level" : f->name;
    const char *near = sg_conf_suggest(f->section, name->text);
    char got[64];

    sg_conf__clip(name->text, got, sizeof(got));
    if (near)
        error_at(p, name, "unknown directive '%s' %s %s%s; did you mean '%s'?", got,
                 p->depth == 1 ? "at" : "in", what, p->depth == 1 ? "" : " block", near);
    else
        error_at(p, name, "unknown directive '%s' %s %s%s", got, p->depth == 1 ? "at" : "in", what,
                 p->depth == 1 ? "" : " block");
}

/* A BLOCK directive: open its child object and push it. */
static void open_block(struct parser *p, const struct sg_conf_directive *d,
                       const struct sg_conf_arg *args, int nvals, bool brace)
{
    const struct frame *f = &p->frames[p->depth - 1];
    void *child = NULL;

    if (!brace) {
        error_at(p, &args[0], "'%s' is a block; expected '{' at end of line", d->name);
        p->pending = d;
        return;
    }
    if (f->obj && !d->open) {
        child = f->obj;
    } else if (f->obj) {
        int before = p->diag->count;
        child = d->open(f->obj, d, args + 1, nvals, p->diag, p->file);
        if (!child && p->diag->count == before)
            error_at(p, &args[0], "cannot open block '%s'", d->name);
    }
    const struct sg_conf_section *section = d->child;
    if (child && d->child_section && d->child_section(child))
        section = d->child_section(child);
    push_frame(p, section, child, &args[0]);
}

/* A CUSTOM directive: the table's setter does all the work. */
static void call_custom(struct parser *p, const struct sg_conf_directive *d,
                        const struct sg_conf_arg *args, int nvals)
{
    const struct frame *f = &p->frames[p->depth - 1];

    if (!f->obj || !d->set)
        return;
    int before = p->diag->count;
    int rc = d->set(f->obj, d, args + 1, nvals, p->diag, p->file);
    if (rc == -ENOMEM)
        p->oom = true;
    if (rc < 0 && p->diag->count == before)
        error_at(p, &args[0], "'%s' failed: %s", d->name, sg_strerror(rc));
}

void sg_conf_list_free(struct sg_conf_list *list)
{
    if (!list)
        return;
    for (int i = 0; i < list->count; i++) {
        for (int j = 0; j < list->items[i].argc; j++)
            free(list->items[i].argv[j]);
        free(list->items[i].argv);
    }
    free(list->items);
    list->items = NULL;
    list->count = 0;
}

int sg_conf_list_append(struct sg_conf_list *list, const char *const *argv, int argc, int line)
{
    struct sg_conf_list_item *items, *it;

    items = realloc(list->items, (size_t)(list->count + 1) * sizeof(*items));
    if (!items)
        return -ENOMEM;
    list->items = items;
    it = &items[list->count];
    it->argc = 0;
    it->line = line;
    it->argv = calloc((size_t)(argc > 0 ? argc : 1), sizeof(char *));
    if (!it->argv)
        return -ENOMEM;
    list->count++;
    for (int i = 0; i < argc; i++) {
        it->argv[i] = strdup(argv[i]);
        if (!it->argv[i])
            return -ENOMEM;
        it->argc++;
    }
    return 0;
}

/* The number of values a LIST directive takes: [lo, hi]. */
static void list_arity(const struct sg_conf_directive *d, int *lo, int *hi)
{
    *lo = d->min || d->max ? (int)d->min : 1;
    *hi = d->min || d->max ? (int)d->max : 1;
}

/* Check the count of values and append them to the list at d->offset. */
static int list_add_args(const struct sg_conf_directive *d, void *obj,
                         const struct sg_conf_arg *vals, int nvals, const struct sg_conf_arg *name,
                         const char *file, struct sg_conf_diag *diag)
{
    const char *argv[16];
    int lo, hi;

    list_arity(d, &lo, &hi);
    if (nvals < lo || nvals > hi || nvals > 16) {
        if (lo == hi)
            sg_conf_diag_error(diag, file, name->line, name->col, "'%s' takes %d value%s, got %d",
                               d->name, lo, lo == 1 ? "" : "s", nvals);
        else
            sg_conf_diag_error(diag, file, name->line, name->col,
                               "'%s' takes %d to %d values, got %d", d->name, lo, hi, nvals);
        return SG_E_CONFIG;
    }
    if (!obj)
        return 0;
    for (int i = 0; i < nvals; i++)
        argv[i] = vals[i].text;
    if (sg_conf_list_append((struct sg_conf_list *)((char *)obj + d->offset), argv, nvals,
                            name->line) < 0) {
        sg_conf_diag_error(diag, file, name->line, name->col, "out of memory");
        return -ENOMEM;
    }
    return 0;
}

/* A LIST directive line. */
static void add_list(struct parser *p, const struct sg_conf_directive *d,
                     const struct sg_conf_arg *args, int nvals)
{
    if (list_add_args(d, p->frames[p->depth - 1].obj, args + 1, nvals, &args[0], p->file,
                      p->diag) == -ENOMEM)
        p->oom = true;
}

/* Remembers `d` in the innermost block; reports it if it was already there. */
static int check_once(struct parser *p, const struct sg_conf_directive *d,
                      const struct sg_conf_arg *name)
{
    for (int i = p->frames[p->depth - 1].seen_start; i < p->nseen; i++) {
        if (p->seen[i].d == d) {
            error_at(p, name, "'%s' given twice (first at line %d)", d->name, p->seen[i].line);
            return SG_E_CONFIG;
        }
    }
    if (p->nseen == p->seencap) {
        int cap = p->seencap ? 2 * p->seencap : 32;
        struct seen *seen = realloc(p->seen, (size_t)cap * sizeof(*seen));
        if (!seen)
            return -ENOMEM;
        p->seen = seen;
        p->seencap = cap;
    }
    p->seen[p->nseen++] = (struct seen){.d = d, .line = name->line};
    return 0;
}

/* A one-value directive: count the values, then check and store the value. */
static int set_single(struct parser *p, const struct sg_conf_directive *d,
                      const struct sg_conf_arg *args, int nvals)
{
    int rc = check_once(p, d, &args[0]);

    if (rc < 0)
        return rc == -ENOMEM ? rc : 0;
    if (nvals == 0) {
        error_at(p, &args[0], "missing value for '%s'", d->name);
        return 0;
    }
    if (nvals > 1) {
        error_at(p, &args[2], "'%s' takes 1 value, got %d", d->name, nvals);
        return 0;
    }
    rc = sg_conf__set_value(d, p->frames[p->depth - 1].obj, &args[1], p->file, p->diag);
    if (rc == -ENOMEM)
        p->oom = true;
    return 0;
}

/* A directive line: `name values... [{]`. */
static int directive(struct parser *p, const struct sg_conf_arg *args, int n)
{
    const struct frame *f = &p->frames[p->depth - 1];
    bool brace = n > 1 && is_mark(&args[n - 1], '{');
    int nvals = n - 1 - brace;
    const struct sg_conf_directive *d;

    /* Inside an unknown block nothing can be checked; follow the nesting only. */
    if (!f->section) {
        if (brace)
            push_frame(p, NULL, NULL, &args[0]);
        return 0;
    }
    d = sg_conf_find(f->section, args[0].text);
    if (!d) {
        report_unknown(p, &args[0]);
        if (brace)
            push_frame(p, NULL, NULL, &args[0]);
        return 0;
    }
    if (d->type == SG_CONF_BLOCK) {
        open_block(p, d, args, nvals, brace);
        return 0;
    }
    if (brace) {
        error_at(p, &args[n - 1], "'%s' is not a block", d->name);
        push_frame(p, NULL, NULL, &args[0]);
        return 0;
    }
    if (d->type == SG_CONF_CUSTOM) {
        call_custom(p, d, args, nvals);
        return 0;
    }
    if (d->type == SG_CONF_LIST) {
        add_list(p, d, args, nvals);
        return 0;
    }
    return set_single(p, d, args, nvals);
}

/* A lone '{' opening a block: the one a block line without '{' left pending, or a stray one. */
static void lone_open(struct parser *p, const struct sg_conf_arg *brace,
                      const struct sg_conf_directive *pending)
{
    struct sg_conf_arg at = *brace;

    if (pending) {
        at.text = pending->name;
        push_frame(p, pending->child, NULL, &at);
        return;
    }
    error_at(p, brace, "unexpected '{'; a block opens with its name: NAME [ARGS] {");
    push_frame(p, NULL, NULL, brace); /* its '}' closes it */
}

/* Past MAX_DEPTH only the nesting is followed. */
static void skip_deep(struct parser *p, char term)
{
    if (term == '{')
        p->excess++;
    else if (term == '}')
        p->excess--;
}

/*
 * A block whose '{' has more on its line (a one-line block) must close on
 * that line: a missing '}' is reported at its '{', and the block is closed
 * so that the next lines land where the writer meant them.
 */
static void close_one_line_blocks(struct parser *p, int line)
{
    int k;

    for (k = 1; k < p->depth; k++) {
        if (p->frames[k].line == line && p->frames[k].brace_col > 0)
            break;
    }
    if (k >= p->depth)
        return;
    const struct frame *f = &p->frames[k];
    struct sg_conf_arg at = {.text = "{", .line = line, .col = f->brace_col};
    error_at(p, &at,
             "block '%s' has directives after its '{' but no '}' on the same line; a block "
             "written on one line must end on it",
             f->name);
    p->nseen = f->seen_start;
    p->depth = k;
    p->excess = 0;
}

/*
 * One line of the file: its directives, separated by ';', '{' (which opens
 * the block of the directive before it) and '}' (which closes the innermost
 * block, after the directive before it).
 */
static int parse_line(struct parser *p, const char *text, size_t len, int line)
{
    const struct sg_conf_directive *pending = p->pending;
    int n = sg_conf__lex_line(&p->lx, text, len, line, p->file, p->diag);
    const struct sg_conf_arg *args = p->lx.args;

    p->pending = NULL;
    if (n == -ENOMEM)
        return n;
    if (n < 0) {
        lex_failed(p, text, len, line);
        return 0;
    }
    if (n == 0) {
        p->pending = pending; /* blank lines may separate a block line and its '{' */
        return 0;
    }

    int start = 0;
    for (int i = 0; i <= n; i++) {
        char term = i == n                   ? '\n'
                    : is_mark(&args[i], '{') ? '{'
                    : is_mark(&args[i], '}') ? '}'
                    : is_mark(&args[i], ';') ? ';'
                                             : 0;
        if (!term)
            continue;
        int count = i - start;
        const struct sg_conf_arg *stmt = &args[start];
        start = i + 1;
        if (p->excess > 0) {
            skip_deep(p, term);
            continue;
        }
        if (term == '{') {
            int depth = p->depth;
            p->pending = NULL;
            if (count == 0)
                lone_open(p, &args[i], i == 0 ? pending : NULL);
            else
                directive(p, stmt, count + 1);
            if (p->depth > depth)
                p->frames[p->depth - 1].brace_col = i < n - 1 ? args[i].col : 0;
            continue;
        }
        if (count > 0) {
            p->pending = NULL;
            directive(p, stmt, count);
        }
        if (term == '}')
            close_block(p, &args[i]);
    }
    close_one_line_blocks(p, line);
    return 0;
}

/* At the end of the file: every block still open is an error, innermost first. */
static void report_unclosed(struct parser *p, int line, int col)
{
    struct sg_conf_arg at = {.text = "", .line = line, .col = col};

    if (p->excess > 0)
        error_at(p, &at, "%d blocks nested too deeply are not closed", p->excess);
    while (p->depth > 1) {
        const struct frame *f = &p->frames[--p->depth];
        error_at(p, &at, "block '%s' opened at line %d is not closed", f->name, f->line);
    }
}

int sg_conf_parse_text(const char *file, const char *text, size_t len,
                       const struct sg_conf_section *root, void *obj, struct sg_conf_diag *diag)
{
    struct sg_conf_diag local;
    struct parser p = {.file = file ? file : "config", .diag = diag, .depth = 1};
    size_t pos = 0;
    int line = 0, last_col = 1, rc = 0;

    if (!diag)
        sg_conf_diag_init(p.diag = &local);
    if ((!text && len > 0) || !root)
        return -EINVAL;
    int start = p.diag->count;
    p.frames[0] = (struct frame){.section = root, .obj = obj, .name = "top level"};

    /* Line by line; a UTF-8 byte order mark is skipped. */
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
        pos = 3;
    while (pos < len && rc == 0) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
        if (line < INT_MAX)
            line++;
        rc = parse_line(&p, text + pos, n, line);
        size_t shown = n;
        while (shown > 0 && text[pos + shown - 1] == '\r')
            shown--;
        last_col = shown >= INT_MAX ? INT_MAX : (int)shown + 1;
        pos += n + (nl ? 1 : 0);
    }

    if (rc == -ENOMEM)
        sg_conf_diag_error(p.diag, p.file, line, 0, "out of memory");
    else
        report_unclosed(&p, line, last_col);
    sg_conf__lexer_finish(&p.lx);
    free(p.seen);
    if (rc == -ENOMEM || p.oom)
        return -ENOMEM;
    return p.diag->count != start ? SG_E_CONFIG : 0;
}

/* Reads all of `f` into a NUL-terminated heap buffer; returns 0 or -errno. */
static int read_all(FILE *f, char **out, size_t *outlen)
{
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);

    if (!buf)
        return -ENOMEM;
    for (;;) {
        len += fread(buf + len, 1, cap - len, f);
        if (ferror(f)) {
            int err = errno ? errno : EIO;
            free(buf);
            return -err;
        }
        if (feof(f))
            break;
        if (cap >= MAX_FILE_SIZE) {
            free(buf);
            return -EFBIG;
        }
        char *bigger = realloc(buf, cap * 2);
        if (!bigger) {
            free(buf);
            return -ENOMEM;
        }
        buf = bigger;
        cap *= 2;
    }
    *out = buf;
    *outlen = len;
    return 0;
}

int sg_conf_parse_file(const char *path, const struct sg_conf_section *root, void *obj,
                       struct sg_conf_diag *diag)
{
    char *text = NULL;
    size_t len = 0;
    char ebuf[128];
    int rc;

    if (!path)
        return -EINVAL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        rc = -errno;
        sg_conf_diag_error(diag, path, 0, 0, "cannot open file: %s",
                           strerror_r(-rc, ebuf, sizeof(ebuf)));
        return rc;
    }
    errno = 0;
    rc = read_all(f, &text, &len);
    fclose(f);
    if (rc == -EFBIG) {
        sg_conf_diag_error(diag, path, 0, 0, "file is larger than %d MiB", MAX_FILE_SIZE >> 20);
        return rc;
    }
    if (rc < 0) {
        sg_conf_diag_error(diag, path, 0, 0, "cannot read file: %s",
                           strerror_r(-rc, ebuf, sizeof(ebuf)));
        return rc;
    }
    rc = sg_conf_parse_text(path, text, len, root, obj, diag);
    free(text);
    return rc;
}

int sg_conf_set(const struct sg_conf_section *section, void *obj, const char *name,
                const char *value, const char *origin, struct sg_conf_diag *diag)
{
    struct sg_conf_diag local;
    const struct sg_conf_arg args[2] = {{.text = name ? name : ""}, {.text = value ? value : ""}};
    const struct sg_conf_directive *d = sg_conf_find(section, name);

    if (!diag)
        sg_conf_diag_init(diag = &local);
    if (!origin)
        origin = "command line";
    if (!d)
        return -ENOENT;

    /* Blocks have no single value; CUSTOM gets the value as its one argument. */
    if (d->type == SG_CONF_BLOCK) {
        sg_conf_diag_error(diag, origin, 0, 0, "'%s' is a block and cannot be given one value",
                           d->name);
        return SG_E_CONFIG;
    }
    if (!value) {
        sg_conf_diag_error(diag, origin, 0, 0, "missing value for '%s'", d->name);
        return SG_E_CONFIG;
    }
    if (d->type == SG_CONF_LIST) {
        struct sg_conf_arg at = {.text = d->name};
        return list_add_args(d, obj, &args[1], 1, &at, origin, diag);
    }
    if (d->type == SG_CONF_CUSTOM) {
        if (!obj || !d->set)
            return 0;
        int before = diag->count;
        int rc = d->set(obj, d, &args[1], 1, diag, origin);
        if (rc < 0 && diag->count == before)
            sg_conf_diag_error(diag, origin, 0, 0, "'%s' failed: %s", d->name, sg_strerror(rc));
        return rc < 0 ? (rc == -ENOMEM ? rc : SG_E_CONFIG) : 0;
    }
    return sg_conf__set_value(d, obj, &args[1], origin, diag);
}

const struct sg_conf_directive *sg_conf_find(const struct sg_conf_section *section,
                                             const char *name)
{
    if (!section || !section->tables || !name)
        return NULL;
    for (int t = 0; section->tables[t]; t++) {
        for (const struct sg_conf_directive *d = section->tables[t]; d->name; d++) {
            if (strcmp(d->name, name) == 0)
                return d;
        }
    }
    return NULL;
}

/* Optimal string alignment distance (Damerau-Levenshtein without re-edits), ignoring case. */
static int distance(const char *a, size_t an, const char *b, size_t bn)
{
    int rows[3][MAX_NAME + 1];
    int *prev2 = rows[0], *prev = rows[1], *cur = rows[2];

    for (size_t j = 0; j <= bn; j++)
        prev[j] = (int)j;
    for (size_t i = 1; i <= an; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= bn; j++) {
            int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            int best = prev[j - 1] + (ca != cb);
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == cb && prev2[j - 2] + 1 < best)
                best = prev2[j - 2] + 1;
            cur[j] = best;
        }
        int *t = prev2;
        prev2 = prev, prev = cur, cur = t;
    }
    return prev[bn];
}

const char *sg_conf_suggest(const struct sg_conf_section *section, const char *name)
{
    size_t len = name ? strlen(name) : 0;
    int limit = (int)len / 3 > 2 ? (int)len / 3 : 2;
    const char *best = NULL;

    if (!section || !section->tables || len == 0 || len > MAX_NAME)
        return NULL;
    if (limit > (int)len - 1)
        limit = (int)len - 1; /* never suggest a name that shares nothing */
    for (int t = 0; section->tables[t]; t++) {
        for (const struct sg_conf_directive *d = section->tables[t]; d->name; d++) {
            size_t dn = strlen(d->name);
            if (dn > MAX_NAME || strcmp(d->name, name) == 0)
                continue;
            int dist = distance(name, len, d->name, dn);
            if (dist <= limit) {
                limit = dist - 1;
                best = d->name;
            }
        }
    }
    return best;
}

void sg_conf_free_strings(const struct sg_conf_section *section, void *obj)
{
    if (!section || !section->tables || !obj)
        return;
    for (int t = 0; section->tables[t]; t++) {
        for (const struct sg_conf_directive *d = section->tables[t]; d->name; d++) {
            if (d->type == SG_CONF_LIST) {
                sg_conf_list_free((struct sg_conf_list *)((char *)obj + d->offset));
                continue;
            }
            if (d->type != SG_CONF_STRING && d->type != SG_CONF_PATH && d->type != SG_CONF_ADDR)
                continue;
            char *s;
            memcpy(&s, (char *)obj + d->offset, sizeof(s));
            free(s);
            s = NULL;
            memcpy((char *)obj + d->offset, &s, sizeof(s));
        }
    }
}
