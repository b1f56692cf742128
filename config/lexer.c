/*
 * Configuration lexer: one line in, a list of arguments out.
 *
 * A line is split at blanks (space, tab, CR, VT, FF) into words and
 * "quoted strings".  A quoted string resolves the escapes \" \\ \n \t and
 * must end on the same line, followed by a blank, ';', a comment or the
 * end of the line.  A word is any run of non-blank bytes without '"' or
 * ';'.  An unquoted ';' is an argument of its own (it ends a directive,
 * config.c), so `listen a:1; server b:2` is five arguments.  '#' and
 * '//' start a comment where an argument could start (at the start of the
 * line, after a blank or after a closing quote), so `http://x` and `a#b` are
 * plain words.  Columns count bytes from 1; a tab is one column.
 */
#include "config/internal.h"

#include "protocols/error.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Cursor over one line; `out` appends unescaped text to lx->buf. */
struct cursor {
    const char *text;
    size_t len, i;
    int line;
    char *out;
    const char *file;
    struct sg_conf_diag *diag;
};

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* True when a comment starts at position i. */
static bool at_comment(const struct cursor *c, size_t i)
{
    if (i >= c->len)
        return false;
    if (c->text[i] == '#')
        return true;
    return c->text[i] == '/' && i + 1 < c->len && c->text[i + 1] == '/';
}

static int col_of(size_t i)
{
    return i >= (size_t)INT_MAX ? INT_MAX : (int)i + 1;
}

/* Room for every argument text of a line: each needs at most its raw bytes plus a NUL. */
static int reserve(struct sg_conf__lexer *lx, size_t len)
{
    size_t need = 2 * len + 2;

    if (lx->bufcap >= need)
        return 0;
    char *buf = realloc(lx->buf, need);
    if (!buf)
        return -ENOMEM;
    lx->buf = buf;
    lx->bufcap = need;
    return 0;
}

/* Appends one argument record starting at byte `start` of the line. */
static int push_arg(struct sg_conf__lexer *lx, const char *text, const struct cursor *c,
                    size_t start, bool quoted)
{
    if (lx->nargs == lx->argcap) {
        int cap = lx->argcap ? 2 * lx->argcap : 16;
        struct sg_conf_arg *args = realloc(lx->args, (size_t)cap * sizeof(*args));
        if (!args)
            return -ENOMEM;
        lx->args = args;
        lx->argcap = cap;
    }
    lx->args[lx->nargs++] = (struct sg_conf_arg){
        .text = text,
        .line = c->line,
        .col = col_of(start),
        .quoted = quoted,
    };
    return 0;
}

/* Reads a bare word; stops at a blank, a ';' or the end of the line (a lone ';' is one word). */
static int lex_word(struct cursor *c)
{
    if (c->text[c->i] == ';') {
        *c->out++ = ';';
        *c->out++ = '\0';
        c->i++;
        return 0;
    }
    while (c->i < c->len && !is_blank(c->text[c->i]) && c->text[c->i] != ';') {
        char ch = c->text[c->i];
        if (ch == '"') {
            sg_conf_diag_error(c->diag, c->file, c->line, col_of(c->i),
                               "unexpected '\"' inside a word; quote the whole value");
            return SG_E_CONFIG;
        }
        if (ch == '\0') {
            sg_conf_diag_error(c->diag, c->file, c->line, col_of(c->i), "unexpected NUL byte");
            return SG_E_CONFIG;
        }
        *c->out++ = ch;
        c->i++;
    }
    *c->out++ = '\0';
    return 0;
}

/* Resolves the escape whose backslash is at c->i; returns the byte, or -1 after reporting. */
static int lex_escape(struct cursor *c)
{
    char e = c->text[c->i + 1];

    switch (e) {
    case '"':
    case '\\':
        return e;
    case 'n':
        return '\n';
    case 't':
        return '\t';
    default:
        break;
    }
    char shown[8];
    sg_conf__clip((char[]){e, '\0'}, shown, sizeof(shown));
    sg_conf_diag_error(c->diag, c->file, c->line, col_of(c->i),
                       "unknown escape '\\%s' in quoted string; use \\\", \\\\, \\n or \\t", shown);
    return -1;
}

/* Reads a quoted string whose opening quote is at c->i. */
static int lex_quoted(struct cursor *c)
{
    size_t open = c->i++;

    for (;;) {
        if (c->i >= c->len || (c->text[c->i] == '\\' && c->i + 1 >= c->len)) {
            sg_conf_diag_error(c->diag, c->file, c->line, col_of(open),
                               "unterminated quoted string");
            return SG_E_CONFIG;
        }
        char ch = c->text[c->i];
        if (ch == '"')
            break;
        if (ch == '\0') {
            sg_conf_diag_error(c->diag, c->file, c->line, col_of(c->i), "unexpected NUL byte");
            return SG_E_CONFIG;
        }
        if (ch == '\\') {
            int e = lex_escape(c);
            if (e < 0)
                return SG_E_CONFIG;
            ch = (char)e;
            c->i++;
        }
        *c->out++ = ch;
        c->i++;
    }
    *c->out++ = '\0';
    c->i++;

    /* The closing quote must end the argument. */
    if (c->i < c->len && !is_blank(c->text[c->i]) && c->text[c->i] != ';' && !at_comment(c, c->i)) {
        sg_conf_diag_error(c->diag, c->file, c->line, col_of(c->i),
                           "expected a blank or the end of the line after the closing quote");
        return SG_E_CONFIG;
    }
    return 0;
}

int sg_conf__lex_line(struct sg_conf__lexer *lx, const char *text, size_t len, int line,
                      const char *file, struct sg_conf_diag *diag)
{
    struct cursor c = {.text = text, .len = len, .line = line, .file = file, .diag = diag};

    lx->nargs = 0;
    if (reserve(lx, len) < 0)
        return -ENOMEM;
    c.out = lx->buf;

    for (;;) {
        while (c.i < c.len && is_blank(c.text[c.i]))
            c.i++;
        if (c.i >= c.len || at_comment(&c, c.i))
            return lx->nargs;

        /* One argument: record it, then read its text. */
        size_t start = c.i;
        bool quoted = c.text[c.i] == '"';
        if (push_arg(lx, c.out, &c, start, quoted) < 0)
            return -ENOMEM;
        int rc = quoted ? lex_quoted(&c) : lex_word(&c);
        if (rc < 0) {
            lx->nargs--;
            return rc;
        }
    }
}

void sg_conf__lexer_finish(struct sg_conf__lexer *lx)
{
    if (!lx)
        return;
    free(lx->buf);
    free(lx->args);
    *lx = (struct sg_conf__lexer){0};
}
