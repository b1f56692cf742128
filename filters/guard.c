/*
 * The 'guard' filter: removes server-to-client messages that would make the
 * player's client run dangerous console commands (bind keys, set cvars,
 * connect elsewhere, quit, ...).
 *
 * A message of a guarded kind (stufftext and server commands by default)
 * is split into commands as a Quake console buffer does: at newlines, and
 * at ';' outside double quotes (comments are not honoured, so nothing can
 * hide behind "//").  The first word of each command (leading '/' or '\'
 * removed, compared without case, as the console looks commands up) is the
 * verb.  The message is removed when a verb is denied and not allowed, or
 * when a command matches a deny_pattern and its verb is not allowed.  Each
 * removal is logged at WARN.
 */
#include "filters/filter.h"
#include "filters/text.h"

#include "protocols/error.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Denied unless `default_deny no`: what lets a server take a client over. */
static const char *const default_deny[] = {
    "alias",        "bind",       "unbind",         "unbindall",    "exec",          "writeconfig",
    "cvar_restart", "set",        "seta",           "sets",         "setu",          "reset",
    "toggle",       "vstr",       "rcon",           "rconpassword", "rcon_password", "connect",
    "quit",         "screenshot", "screenshotjpeg", NULL,
};

#define GUARD_MAX_VERB 64

struct guard_conf {
    struct sg_conf_list kinds, deny, allow, deny_pattern;
    bool default_deny;
    /* from conf_check */
    uint32_t mask;
    char **denied; /* verbs, NULL-terminated: defaults + deny, minus allow */
    char **allowed;
    struct sg_filter__regexes patterns;
};

static void conf_init(void *p)
{
    struct guard_conf *c = p;
    c->default_deny = true;
}

static void conf_free(void *p)
{
    struct guard_conf *c = p;

    for (char **v = c->denied; v && *v; v++)
        free(*v);
    free(c->denied);
    for (char **v = c->allowed; v && *v; v++)
        free(*v);
    free(c->allowed);
    c->denied = c->allowed = NULL;
    sg_filter__regexes_free(&c->patterns);
}

static bool in_set(char *const *set, const char *verb)
{
    for (; set && *set; set++)
        if (strcasecmp(*set, verb) == 0)
            return true;
    return false;
}

/* Append a copy of `verb` to the NULL-terminated *set (no duplicates); 0 or -ENOMEM. */
static int set_add(char ***set, size_t *n, const char *verb)
{
    char **v;

    if (in_set(*set, verb))
        return 0;
    v = realloc(*set, (*n + 2) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    *set = v;
    if (!(v[*n] = strdup(verb)))
        return -ENOMEM;
    v[++*n] = NULL;
    return 0;
}

/* A verb as the config gives it: a word without blanks, quotes or ';'. */
static int check_verb(const char *directive, const struct sg_conf_list_item *it, const char *verb,
                      char *err, size_t errlen)
{
    size_t n = strlen(verb);

    if (n == 0 || n >= GUARD_MAX_VERB || strpbrk(verb, " \t\r\n\";")) {
        snprintf(err, errlen,
                 "'%s' on line %d: '%.40s' is not a command name (one word, no quotes or ';', "
                 "under %d characters)",
                 directive, it->line, verb, GUARD_MAX_VERB);
        return SG_E_CONFIG;
    }
    return 0;
}

static int check(struct guard_conf *c, char *err, size_t errlen)
{
    size_t nd = 0, na = 0;
    int rc;

    c->mask = SG_KIND_BIT(SG_MSG_STUFFTEXT) | SG_KIND_BIT(SG_MSG_SERVER_COMMAND);
    if ((rc = sg_filter__kinds_parse(&c->kinds, "kinds", &c->mask, err, errlen)) < 0)
        return rc;
    if (c->mask & SG_KIND_BIT(SG_MSG_GAME)) {
        snprintf(err, errlen, "'kinds': 'game' messages carry no text to guard");
        return SG_E_CONFIG;
    }
    for (int i = 0; i < c->allow.count; i++)
        for (int a = 0; a < c->allow.items[i].argc; a++) {
            const char *verb = c->allow.items[i].argv[a];
            if ((rc = check_verb("allow", &c->allow.items[i], verb, err, errlen)) < 0)
                return rc;
            if (set_add(&c->allowed, &na, verb) < 0)
                goto nomem;
        }
    for (int i = 0; c->default_deny && default_deny[i]; i++)
        if (!in_set(c->allowed, default_deny[i]) && set_add(&c->denied, &nd, default_deny[i]) < 0)
            goto nomem;
    for (int i = 0; i < c->deny.count; i++)
        for (int a = 0; a < c->deny.items[i].argc; a++) {
            const char *verb = c->deny.items[i].argv[a];
            if ((rc = check_verb("deny", &c->deny.items[i], verb, err, errlen)) < 0)
                return rc;
            if (!in_set(c->allowed, verb) && set_add(&c->denied, &nd, verb) < 0)
                goto nomem;
        }
    rc = sg_filter__regexes_compile(&c->patterns, &c->deny_pattern, "deny_pattern", REG_ICASE, err,
                                    errlen);
    if (rc < 0)
        return rc;
    if (!c->denied && c->patterns.n == 0) {
        snprintf(err, errlen,
                 "nothing to guard against: the deny list is empty and there is no "
                 "deny_pattern");
        return SG_E_CONFIG;
    }
    return 0;
nomem:
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
}

static int conf_check(void *p, char *err, size_t errlen)
{
    int rc = check(p, err, errlen);

    if (rc < 0)
        conf_free(p); /* conf_free is due only after a successful check */
    return rc;
}

/*
 * The next command of `text` from *pos: sets [*start, *end) and returns
 * true, or false at the end.  Newlines always end a command, ';' only
 * outside quotes.
 */
static bool next_command(const char *text, size_t len, size_t *pos, size_t *start, size_t *end)
{
    bool quoted = false;
    size_t i = *pos;

    if (i >= len)
        return false;
    *start = i;
    for (; i < len; i++) {
        char ch = text[i];
        if (ch == '\n' || ch == '\r' || (ch == ';' && !quoted))
            break;
        if (ch == '"')
            quoted = !quoted;
    }
    *end = i;
    *pos = i + 1;
    return true;
}

/* The first word of a command, without a leading '/' or '\'. */
static void verb_of(const char *cmd, size_t len, char *verb, size_t cap)
{
    size_t i = 0, k = 0;

    while (i < len && (unsigned char)cmd[i] <= ' ')
        i++;
    if (i < len && cmd[i] == '"') { /* a quoted command name */
        for (i++; i < len && cmd[i] != '"'; i++)
            if (k + 1 < cap)
                verb[k++] = cmd[i];
    } else {
        while (i < len && (cmd[i] == '/' || cmd[i] == '\\'))
            i++;
        for (; i < len && (unsigned char)cmd[i] > ' ' && cmd[i] != '"'; i++)
            if (k + 1 < cap)
                verb[k++] = cmd[i];
    }
    verb[k] = '\0';
}

/* Why message `text` must go ("bind", "pattern '...'"), or NULL when it may pass. */
static bool offending(const struct guard_conf *c, const char *text, size_t len, char *why,
                      size_t cap)
{
    size_t pos = 0, s, e;

    for (int guard = 0; guard < 100000 && next_command(text, len, &pos, &s, &e); guard++) {
        char verb[GUARD_MAX_VERB], cmd[1024];
        size_t n = e - s;

        verb_of(text + s, n, verb, sizeof(verb));
        if (!verb[0] || in_set(c->allowed, verb))
            continue;
        if (in_set(c->denied, verb)) {
            snprintf(why, cap, "'%s'", verb);
            return true;
        }
        if (c->patterns.n) {
            int hit;
            if (n >= sizeof(cmd))
                n = sizeof(cmd) - 1;
            memcpy(cmd, text + s, n);
            cmd[n] = '\0';
            hit = sg_filter__regexes_match(&c->patterns, cmd);
            if (hit >= 0) {
                snprintf(why, cap, "'%.63s' (deny_pattern '%.60s')", verb,
                         c->patterns.v[hit].source);
                return true;
            }
        }
    }
    return false;
}

static int on_frame(struct sg_filter_call *call)
{
    const struct guard_conf *c = call->conf;
    const struct sg_frame *f = call->frame;
    int verdict = SG_FILTER_PASS;

    if (f->dir != SG_DIR_S2C || !f->msgs)
        return SG_FILTER_PASS;
    for (unsigned i = 0; i < f->nmsgs; i++) {
        const struct sg_msg *m = &f->msgs[i];
        char why[192], shown[200];
        int err;

        if (m->repeat || m->dropped || !m->text || !sg_filter__kind_in(c->mask, m->kind))
            continue;
        if (!offending(c, m->text, m->text_len, why, sizeof(why)))
            continue;
        sg_filter__escape(shown, sizeof(shown), m->text, m->text_len, 120, false);
        err = sg_filter_drop_msg(call, i);
        if (err < 0) {
            sg_filter_log(call, SG_FILTER_LOG_WARN,
                          "blocked %s in a %s from the server to %s: \"%s\"; the message "
                          "cannot be removed alone (%s), so the whole datagram is dropped",
                          why, sg_msg_kind_name(m->kind), call->session->client, shown,
                          sg_strerror(err));
            return SG_FILTER_DROP;
        }
        sg_filter_log(call, SG_FILTER_LOG_WARN, "blocked %s in a %s from the server to %s: \"%s\"",
                      why, sg_msg_kind_name(m->kind), call->session->client, shown);
        verdict = SG_FILTER_CHANGED;
    }
    return verdict;
}

static const struct sg_conf_directive directives[] = {
    {.name = "kinds",
     .type = SG_CONF_LIST,
     .offset = offsetof(struct guard_conf, kinds),
     .min = 1,
     .max = 16,
     .argname = "KIND[,KIND...]",
     .help = "message kinds to guard (default stufftext,servercmd)"},
    {.name = "deny",
     .type = SG_CONF_LIST,
     .offset = offsetof(struct guard_conf, deny),
     .min = 1,
     .max = 64,
     .argname = "VERB...",
     .help = "more command names to block"},
    {.name = "allow",
     .type = SG_CONF_LIST,
     .offset = offsetof(struct guard_conf, allow),
     .min = 1,
     .max = 64,
     .argname = "VERB...",
     .help = "command names never blocked (wins over deny and deny_pattern)"},
    {.name = "deny_pattern",
     .type = SG_CONF_LIST,
     .offset = offsetof(struct guard_conf, deny_pattern),
     .argname = "REGEX",
     .help = "block commands matching this POSIX extended regex (no case)"},
    {.name = "default_deny",
     .type = SG_CONF_BOOL,
     .offset = offsetof(struct guard_conf, default_deny),
     .argname = "yes|no",
     .help = "start from the built-in deny list (default yes)"},
    {NULL},
};

const struct sg_filter_impl sg_builtin_guard = {
    .name = "guard",
    .description = "remove server commands that would take over the client (bind, exec, set, "
                   "connect, quit, ...)",
    .example = "filter guard {\n"
               "    deny kill\n"
               "    allow toggle\n"
               "    deny_pattern \"^[[:space:]]*[+-]\"\n"
               "}\n",
    .conf_size = sizeof(struct guard_conf),
    .directives = directives,
    .conf_init = conf_init,
    .conf_check = conf_check,
    .conf_free = conf_free,
    .on_frame = on_frame,
};
