/*
 * A tiny JSON reader for tests (objects, arrays, strings, numbers,
 * literals): enough to check that a line is exactly one JSON object and
 * to look its fields up.  \u escapes above 0xff are refused (the
 * inspector writes only \u00XX).  Header-only: every function is static.
 */
#ifndef SG_TESTS_Q3_JSON_MINI_H
#define SG_TESTS_Q3_JSON_MINI_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jval {
    enum jtype type;
    double num;
    bool b;
    char *str;   /* J_STR: decoded (\u00XX kept as one byte) */
    int n;       /* J_ARR / J_OBJ: members */
    char **keys; /* J_OBJ */
    struct jval **items;
};

struct jparse {
    const char *s;
    bool bad;
};

static inline void jfree(struct jval *v)
{
    if (!v)
        return;
    for (int i = 0; i < v->n; i++) {
        if (v->keys)
            free(v->keys[i]);
        jfree(v->items[i]);
    }
    free(v->keys);
    free(v->items);
    free(v->str);
    free(v);
}

static inline void jws(struct jparse *p)
{
    while (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')
        p->s++;
}

static inline char *jstring(struct jparse *p)
{
    size_t cap = 64, n = 0;
    char *out = malloc(cap);

    if (!out || *p->s != '"') {
        p->bad = true;
        free(out);
        return NULL;
    }
    p->s++;
    for (int guard = 0; guard < 1 << 22; guard++) {
        char c = *p->s++;
        if (c == '\0' || (unsigned char)c < 0x20) {
            p->bad = true;
            break;
        }
        if (c == '"')
            break;
        if (c == '\\') {
            char e = *p->s++;
            if (e == 'n')
                c = '\n';
            else if (e == 't')
                c = '\t';
            else if (e == 'r')
                c = '\r';
            else if (e == '"' || e == '\\' || e == '/')
                c = e;
            else if (e == 'u') {
                unsigned v;
                if (sscanf(p->s, "%4x", &v) != 1 || v > 0xff) {
                    p->bad = true;
                    break;
                }
                p->s += 4;
                c = (char)v;
            } else {
                p->bad = true;
                break;
            }
        }
        if (n + 2 > cap) {
            char *g = realloc(out, cap *= 2);
            if (!g) {
                p->bad = true;
                break;
            }
            out = g;
        }
        out[n++] = c;
    }
    out[n] = '\0';
    return out;
}

static inline struct jval *jvalue(struct jparse *p, int depth);

static inline int jappend(struct jval *v, char *key, struct jval *item)
{
    char **k = v->type == J_OBJ ? realloc(v->keys, (size_t)(v->n + 1) * sizeof(*k)) : NULL;
    struct jval **it;

    if (v->type == J_OBJ) {
        if (!k)
            return -1;
        v->keys = k;
        v->keys[v->n] = key;
    }
    it = realloc(v->items, (size_t)(v->n + 1) * sizeof(*it));
    if (!it)
        return -1;
    v->items = it;
    v->items[v->n++] = item;
    return 0;
}

static inline struct jval *jvalue(struct jparse *p, int depth)
{
    struct jval *v = calloc(1, sizeof(*v));

    jws(p);
    if (!v || depth > 32) {
        p->bad = true;
        free(v);
        return NULL;
    }
    if (*p->s == '{' || *p->s == '[') {
        bool obj = *p->s == '{';
        v->type = obj ? J_OBJ : J_ARR;
        p->s++;
        jws(p);
        if (*p->s == (obj ? '}' : ']')) {
            p->s++;
            return v;
        }
        for (int guard = 0; guard < 100000 && !p->bad; guard++) {
            char *key = NULL;
            struct jval *item;
            jws(p);
            if (obj) {
                key = jstring(p);
                jws(p);
                if (*p->s++ != ':')
                    p->bad = true;
            }
            item = jvalue(p, depth + 1);
            if (p->bad || jappend(v, key, item) < 0) {
                free(key);
                jfree(item);
                p->bad = true;
                break;
            }
            jws(p);
            if (*p->s == ',') {
                p->s++;
                continue;
            }
            if (*p->s++ != (obj ? '}' : ']'))
                p->bad = true;
            break;
        }
        return v;
    }
    if (*p->s == '"') {
        v->type = J_STR;
        v->str = jstring(p);
    } else if (strncmp(p->s, "true", 4) == 0 || strncmp(p->s, "false", 5) == 0) {
        v->type = J_BOOL;
        v->b = p->s[0] == 't';
        p->s += v->b ? 4 : 5;
    } else if (strncmp(p->s, "null", 4) == 0) {
        p->s += 4;
    } else {
        char *end;
        v->type = J_NUM;
        v->num = strtod(p->s, &end);
        if (end == p->s)
            p->bad = true;
        p->s = end;
    }
    return v;
}

/* Parse one whole line; NULL if it is not exactly one JSON object. */
static inline struct jval *jparse_line(const char *line)
{
    struct jparse p = {line, false};
    struct jval *v = jvalue(&p, 0);

    jws(&p);
    if (p.bad || *p.s || !v || v->type != J_OBJ) {
        fprintf(stderr, "not one JSON object (near '%.40s'): %s\n", p.s, line);
        jfree(v);
        return NULL;
    }
    return v;
}

static inline const struct jval *jget(const struct jval *o, const char *key)
{
    for (int i = 0; o && o->type == J_OBJ && i < o->n; i++)
        if (strcmp(o->keys[i], key) == 0)
            return o->items[i];
    return NULL;
}

static inline bool jis_num(const struct jval *o, const char *key, double want)
{
    const struct jval *v = jget(o, key);
    return v && v->type == J_NUM && v->num == want;
}

static inline bool jis_str(const struct jval *o, const char *key, const char *want)
{
    const struct jval *v = jget(o, key);
    return v && v->type == J_STR && strcmp(v->str, want) == 0;
}

static inline bool jis_bool(const struct jval *o, const char *key, bool want)
{
    const struct jval *v = jget(o, key);
    return v && v->type == J_BOOL && v->b == want;
}

#endif
