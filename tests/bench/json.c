/*
 * JSON for --json: a string writer, and a strict checker (RFC 8259) that the
 * bench runs over its own output before printing it, so the smoke test fails
 * on malformed JSON instead of a reader downstream.
 */
#include "tests/bench/bench.h"

#include <errno.h>
#include <string.h>

void sg_bench_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

/* ---- the checker: recursive descent with a depth bound ---- */

struct reader {
    const char *s;
    size_t len, pos;
};

#define MAX_DEPTH 64

static int value(struct reader *r, int depth);

static void skip_ws(struct reader *r)
{
    while (r->pos < r->len && strchr(" \t\r\n", r->s[r->pos]) && r->s[r->pos] != '\0')
        r->pos++;
}

static int peek(const struct reader *r)
{
    return r->pos < r->len ? (unsigned char)r->s[r->pos] : -1;
}

static int literal(struct reader *r, const char *word)
{
    size_t n = strlen(word);

    if (r->len - r->pos < n || memcmp(r->s + r->pos, word, n) != 0)
        return -EINVAL;
    r->pos += n;
    return 0;
}

static int is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static int number(struct reader *r)
{
    if (peek(r) == '-')
        r->pos++;
    if (peek(r) == '0') {
        r->pos++;
    } else if (is_digit(peek(r))) {
        while (is_digit(peek(r)))
            r->pos++;
    } else {
        return -EINVAL;
    }
    if (peek(r) == '.') {
        r->pos++;
        if (!is_digit(peek(r)))
            return -EINVAL;
        while (is_digit(peek(r)))
            r->pos++;
    }
    if (peek(r) == 'e' || peek(r) == 'E') {
        r->pos++;
        if (peek(r) == '+' || peek(r) == '-')
            r->pos++;
        if (!is_digit(peek(r)))
            return -EINVAL;
        while (is_digit(peek(r)))
            r->pos++;
    }
    return 0;
}

static int string(struct reader *r)
{
    if (peek(r) != '"')
        return -EINVAL;
    r->pos++;
    for (;;) {
        int c = peek(r);

        if (c < 0x20)
            return -EINVAL;
        r->pos++;
        if (c == '"')
            return 0;
        if (c != '\\')
            continue;
        c = peek(r);
        r->pos++;
        if (c == 'u') {
            for (int i = 0; i < 4; i++, r->pos++)
                if (!strchr("0123456789abcdefABCDEF", peek(r)) || peek(r) <= 0)
                    return -EINVAL;
        } else if (c <= 0 || !strchr("\"\\/bfnrt", c)) {
            return -EINVAL;
        }
    }
}

/* `close` is ']' or '}'; members of an object are "key": value. */
static int container(struct reader *r, int close, int depth)
{
    int err;

    r->pos++;
    skip_ws(r);
    if (peek(r) == close) {
        r->pos++;
        return 0;
    }
    for (;;) {
        skip_ws(r);
        if (close == '}') {
            if ((err = string(r)) < 0)
                return err;
            skip_ws(r);
            if (peek(r) != ':')
                return -EINVAL;
            r->pos++;
        }
        if ((err = value(r, depth + 1)) < 0)
            return err;
        skip_ws(r);
        if (peek(r) == ',') {
            r->pos++;
            continue;
        }
        if (peek(r) != close)
            return -EINVAL;
        r->pos++;
        return 0;
    }
}

static int value(struct reader *r, int depth)
{
    if (depth > MAX_DEPTH)
        return -EINVAL;
    skip_ws(r);
    switch (peek(r)) {
    case '{':
        return container(r, '}', depth);
    case '[':
        return container(r, ']', depth);
    case '"':
        return string(r);
    case 't':
        return literal(r, "true");
    case 'f':
        return literal(r, "false");
    case 'n':
        return literal(r, "null");
    default:
        return number(r);
    }
}

int sg_bench_json_check(const char *text, size_t len, size_t *where)
{
    struct reader r = {text, len, 0};
    int err = value(&r, 0);

    if (err == 0) {
        skip_ws(&r);
        if (r.pos != r.len)
            err = -EINVAL;
    }
    if (where)
        *where = r.pos;
    return err;
}
