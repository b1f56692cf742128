/*
 * The 'rewrite' filter: regular-expression replacements in the text of
 * chat, prints and other text messages, either way.
 *
 * Every `replace REGEX REPLACEMENT` rule (POSIX extended) is applied in
 * config order to the text the previous rule produced, replacing every
 * match; \0 in REPLACEMENT is the whole match, \1..\9 its groups, \\ a
 * backslash.  A message whose text ends up different gets the new text
 * through the codec (sg_filter_set_text).  Resends of a reliable message
 * (`repeat`) are skipped: the codec applies the first verdict to them.
 */
#include "filters/filter.h"
#include "filters/text.h"

#include "protocols/error.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A rewritten text may not grow past this. */
#define REWRITE_MAX_TEXT 65536

struct rewrite_conf {
    struct sg_conf_list replace, kinds;
    int direction;
    bool icase;
    /* from conf_check */
    uint32_t mask;
    struct sg_filter__regexes rules;
};

/* Per session, made on the first problem only. */
struct rewrite_slot {
    bool warned;
};

static void conf_init(void *p)
{
    struct rewrite_conf *c = p;
    c->direction = SG_FILTER_DIR_BOTH;
}

static void conf_free(void *p)
{
    struct rewrite_conf *c = p;
    sg_filter__regexes_free(&c->rules);
}

/* The highest \N a replacement refers to, or -1 after writing why it is bad into err. */
static int max_backref(const char *repl, int line, char *err, size_t errlen)
{
    int max = 0;

    for (const char *s = repl; *s; s++) {
        if (*s != '\\')
            continue;
        if (s[1] >= '0' && s[1] <= '9') {
            if (s[1] - '0' > max)
                max = s[1] - '0';
            s++;
        } else if (s[1] == '\\') {
            s++;
        } else {
            snprintf(err, errlen,
                     "'replace' on line %d: a '\\' in the replacement must be followed by a digit "
                     "(\\0..\\9) or another '\\' (in a quoted value, write \"\\\\1\")",
                     line);
            return -1;
        }
    }
    return max;
}

static int check(struct rewrite_conf *c, char *err, size_t errlen)
{
    int rc;

    if (c->replace.count == 0) {
        snprintf(err, errlen, "needs at least one 'replace REGEX REPLACEMENT'");
        return SG_E_CONFIG;
    }
    c->mask =
        SG_KIND_BIT(SG_MSG_CHAT) | SG_KIND_BIT(SG_MSG_PRINT) | SG_KIND_BIT(SG_MSG_CENTERPRINT);
    if ((rc = sg_filter__kinds_parse(&c->kinds, "kinds", &c->mask, err, errlen)) < 0)
        return rc;
    if (c->mask & SG_KIND_BIT(SG_MSG_GAME)) {
        snprintf(err, errlen, "'kinds': 'game' messages carry no text to rewrite");
        return SG_E_CONFIG;
    }
    rc = sg_filter__regexes_compile(&c->rules, &c->replace, "replace", c->icase ? REG_ICASE : 0,
                                    err, errlen);
    if (rc < 0)
        return rc;
    for (int i = 0; i < c->rules.n; i++) {
        const struct sg_filter__regex *r = &c->rules.v[i];
        int max = max_backref(r->arg1, r->line, err, errlen);
        if (max < 0)
            return SG_E_CONFIG;
        if ((size_t)max > r->re.re_nsub) {
            snprintf(err, errlen,
                     "'replace' on line %d: the replacement uses \\%d but '%.60s' has %zu "
                     "group(s)",
                     r->line, max, r->source, (size_t)r->re.re_nsub);
            return SG_E_CONFIG;
        }
    }
    return 0;
}

static int conf_check(void *p, char *err, size_t errlen)
{
    int rc = check(p, err, errlen);

    if (rc < 0)
        conf_free(p);
    return rc;
}

/* A growing output text. */
struct out {
    char *p;
    size_t len, cap;
};

static int put(struct out *o, const char *s, size_t n)
{
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        char *p;
        while (cap < o->len + n + 1)
            cap *= 2;
        if (cap > REWRITE_MAX_TEXT)
            return SG_E_TOOBIG;
        if (!(p = realloc(o->p, cap)))
            return -ENOMEM;
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
    return 0;
}

/* One rule over `in` (NUL-terminated) into `o`; returns the number of matches or an error. */
static int apply(const struct sg_filter__regex *r, const char *in, size_t len, struct out *o)
{
    regmatch_t pm[10];
    size_t off = 0;
    int eflags = 0, n = 0, err;

    o->len = 0;
    if ((err = put(o, "", 0)) < 0)
        return err;
    while (off <= len && n < 100000) {
        size_t so, eo;

        if (regexec(&r->re, in + off, 10, pm, eflags) != 0)
            break;
        so = off + (size_t)pm[0].rm_so;
        eo = off + (size_t)pm[0].rm_eo;
        if ((err = put(o, in + off, so - off)) < 0)
            return err;
        for (const char *s = r->arg1; *s; s++) {
            if (s[0] == '\\' && s[1] >= '0' && s[1] <= '9') {
                const regmatch_t *g = &pm[s[1] - '0'];
                if (g->rm_so >= 0 &&
                    (err = put(o, in + off + g->rm_so, (size_t)(g->rm_eo - g->rm_so))) < 0)
                    return err;
                s++;
            } else {
                if (s[0] == '\\' && s[1] == '\\')
                    s++;
                if ((err = put(o, s, 1)) < 0)
                    return err;
            }
        }
        n++;
        if (eo == so) { /* an empty match: keep the next character and go past it */
            if (eo < len && (err = put(o, in + eo, 1)) < 0)
                return err;
            off = eo + 1;
        } else {
            off = eo;
        }
        eflags = REG_NOTBOL;
    }
    if (off < len && (err = put(o, in + off, len - off)) < 0)
        return err;
    return n;
}

/* The rewritten text of `m` in *res (owned by the caller), or NULL when unchanged. */
static int rewrite_text(const struct rewrite_conf *c, const struct sg_msg *m, struct out *res)
{
    struct out a = {0}, b = {0};
    const char *cur = m->text;
    size_t curlen = m->text_len;
    bool any = false;
    int rc = 0;

    for (int i = 0; i < c->rules.n; i++) {
        struct out *dst = cur == a.p ? &b : &a;
        rc = apply(&c->rules.v[i], cur, curlen, dst);
        if (rc < 0)
            break;
        if (rc > 0) {
            any = true;
            cur = dst->p;
            curlen = dst->len;
        }
        rc = 0;
    }
    if (rc == 0 && any && (curlen != m->text_len || memcmp(cur, m->text, curlen) != 0)) {
        *res = cur == a.p ? a : b;
        free(cur == a.p ? b.p : a.p);
        return 1;
    }
    free(a.p);
    free(b.p);
    return rc;
}

static void warn_once(struct sg_filter_call *call, const struct sg_msg *m, int err)
{
    struct rewrite_slot *s = *call->slot;

    if (!s && !(s = *call->slot = calloc(1, sizeof(*s))))
        return;
    if (s->warned)
        return;
    s->warned = true;
    sg_filter_log(call, SG_FILTER_LOG_WARN,
                  "cannot rewrite a %s (%s): %s; it passes unchanged (said once per session)",
                  sg_msg_kind_name(m->kind), m->name ? m->name : "?", sg_strerror(err));
}

static int on_frame(struct sg_filter_call *call)
{
    const struct rewrite_conf *c = call->conf;
    const struct sg_frame *f = call->frame;
    int verdict = SG_FILTER_PASS;

    if (!f->msgs || !sg_filter__dir_matches(c->direction, f->dir))
        return SG_FILTER_PASS;
    for (unsigned i = 0; i < f->nmsgs; i++) {
        const struct sg_msg *m = &f->msgs[i];
        struct out res = {0};
        bool changed;
        int rc;

        if (m->repeat || m->dropped || !m->text || !sg_filter__kind_in(c->mask, m->kind))
            continue;
        rc = rewrite_text(c, m, &res);
        changed = rc > 0;
        if (changed)
            rc = sg_filter_set_text(call, i, res.p, res.len);
        free(res.p);
        if (rc < 0)
            warn_once(call, m, rc);
        else if (changed)
            verdict = SG_FILTER_CHANGED;
    }
    return verdict;
}

static void session_end(void *route_state, const struct sg_filter_session *session, void *slot)
{
    (void)route_state;
    (void)session;
    free(slot);
}

static const struct sg_conf_directive directives[] = {
    {.name = "replace",
     .type = SG_CONF_LIST,
     .offset = offsetof(struct rewrite_conf, replace),
     .min = 2,
     .max = 2,
     .argname = "REGEX REPLACEMENT",
     .help = "replace every match (POSIX extended; \\1..\\9 in REPLACEMENT); repeatable, in order"},
    {.name = "kinds",
     .type = SG_CONF_LIST,
     .offset = offsetof(struct rewrite_conf, kinds),
     .min = 1,
     .max = 16,
     .argname = "KIND[,KIND...]",
     .help = "message kinds to rewrite (default chat,print,centerprint)"},
    {.name = "direction",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct rewrite_conf, direction),
     .choices = sg_filter__direction_choices,
     .argname = "both|to_client|to_server",
     .help = "which way (default both)"},
    {.name = "icase",
     .type = SG_CONF_BOOL,
     .offset = offsetof(struct rewrite_conf, icase),
     .argname = "yes|no",
     .help = "match without regard to case (default no)"},
    {NULL},
};

const struct sg_filter_impl sg_builtin_rewrite = {
    .name = "rewrite",
    .description = "replace text in chat, prints and other messages with regular expressions",
    .example = "filter rewrite {\n"
               "    replace \"entered the game\" \"joined the fight\"\n"
               "    replace \"([a-z]+)@example\\\\.org\" \"\\\\1@example.net\"\n"
               "    icase yes\n"
               "}\n",
    .conf_size = sizeof(struct rewrite_conf),
    .directives = directives,
    .conf_init = conf_init,
    .conf_check = conf_check,
    .conf_free = conf_free,
    .on_frame = on_frame,
    .session_end = session_end,
};
