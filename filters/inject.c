/*
 * The 'inject' filter: sends a text message of its own to the client (or
 * the server) of every session, once or on a schedule.
 *
 * The schedule of a session starts at its first decoded message (a
 * MESSAGE frame either way): the first injection is due `after` later,
 * the next ones `every` apart, at most `count` in all.  An injection is
 * made on the first message frame going the right way once it is due
 * (the codec carries it in that message and translates reliable numbering
 * for the rest of the session).  When the codec refuses (for example a
 * Quake 3 client not yet in the game), it is tried again on the next frame;
 * the first refusal of a session is logged at INFO.
 *
 * Placeholders in the text: %client% %server% %session% %time% (UTC,
 * ISO-8601) and %% for a '%'.  A print gets a trailing newline when it has
 * none, as the games print a line.
 */
#include "filters/filter.h"
#include "filters/text.h"

#include "protocols/error.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INJECT_MAX_TEXT 1000 /* a Quake 3 command is at most 1024 bytes with its quoting */

static const char *const kind_choices[] = {"print",     "centerprint", "chat",
                                           "servercmd", "clientcmd",   NULL};
static const enum sg_msg_kind kind_of[] = {SG_MSG_PRINT, SG_MSG_CENTERPRINT, SG_MSG_CHAT,
                                           SG_MSG_SERVER_COMMAND, SG_MSG_CLIENT_COMMAND};
static const char *const dir_choices[] = {"to_client", "to_server", NULL};

struct inject_conf {
    char *text;
    int kind;      /* index into kind_choices */
    int direction; /* 0 to_client, 1 to_server */
    int64_t every, after, count;
};

struct inject_slot {
    bool started;
    bool refused; /* a refusal was logged */
    uint64_t next_ms;
    int64_t done;
};

static int conf_check(void *p, char *err, size_t errlen)
{
    struct inject_conf *c = p;
    enum sg_msg_kind k = kind_of[c->kind];

    if (!c->text) {
        snprintf(err, errlen, "needs 'text \"...\"' (the message to send)");
        return SG_E_CONFIG;
    }
    if (!c->text[0]) {
        snprintf(err, errlen, "'text' is empty");
        return SG_E_CONFIG;
    }
    if (strlen(c->text) > INJECT_MAX_TEXT) {
        snprintf(err, errlen, "'text' is %zu bytes long; at most %d", strlen(c->text),
                 INJECT_MAX_TEXT);
        return SG_E_CONFIG;
    }
    if (c->direction == 0 && k == SG_MSG_CLIENT_COMMAND) {
        snprintf(err, errlen,
                 "'kind clientcmd' goes to the server: add 'direction to_server' (to the client, "
                 "use print, centerprint, chat or servercmd)");
        return SG_E_CONFIG;
    }
    if (c->direction == 1 && k != SG_MSG_CHAT && k != SG_MSG_CLIENT_COMMAND) {
        snprintf(err, errlen,
                 "'kind %s' cannot go to the server: towards the server, use chat or clientcmd",
                 kind_choices[c->kind]);
        return SG_E_CONFIG;
    }
    return 0;
}

/* The text with its placeholders filled in; returns its length. */
static size_t expand(const struct inject_conf *c, const struct sg_filter_call *call, char *out,
                     size_t cap)
{
    const struct sg_filter_session *s = call->session;
    const char *t = c->text;
    size_t n = 0;

    out[0] = '\0';
    while (*t && n + 1 < cap) {
        char val[64];
        const char *v = NULL;
        size_t skip = 0;

        if (t[0] == '%') {
            if (strncmp(t, "%client%", 8) == 0)
                v = s->client ? s->client : "", skip = 8;
            else if (strncmp(t, "%server%", 8) == 0)
                v = s->server ? s->server : "", skip = 8;
            else if (strncmp(t, "%session%", 9) == 0) {
                snprintf(val, sizeof(val), "%llu", (unsigned long long)s->id);
                v = val, skip = 9;
            } else if (strncmp(t, "%time%", 6) == 0) {
                sg_filter__timestamp(val, sizeof(val));
                v = val, skip = 6;
            } else if (t[1] == '%') {
                v = "%", skip = 2;
            }
        }
        if (v) {
            size_t l = strlen(v);
            if (l > cap - 1 - n)
                l = cap - 1 - n;
            memcpy(out + n, v, l);
            n += l;
            t += skip;
        } else {
            out[n++] = *t++;
        }
    }
    if (kind_of[c->kind] == SG_MSG_PRINT && n > 0 && out[n - 1] != '\n' && n + 1 < cap)
        out[n++] = '\n';
    out[n] = '\0';
    return n;
}

static int on_frame(struct sg_filter_call *call)
{
    const struct inject_conf *c = call->conf;
    const struct sg_frame *f = call->frame;
    enum sg_dir dir = c->direction == 0 ? SG_DIR_S2C : SG_DIR_C2S;
    struct inject_slot *s = *call->slot;
    char text[INJECT_MAX_TEXT + 128];
    size_t len;
    int err;

    if (f->kind != SG_FRAME_MESSAGE)
        return SG_FILTER_PASS;
    if (!s) {
        if (!(s = *call->slot = calloc(1, sizeof(*s))))
            return -ENOMEM;
        s->started = true;
        s->next_ms = call->now_ms + (uint64_t)c->after;
    }
    if (f->dir != dir || call->now_ms < s->next_ms)
        return SG_FILTER_PASS;
    if ((c->count > 0 && s->done >= c->count) || (c->every == 0 && s->done >= 1))
        return SG_FILTER_PASS;
    len = expand(c, call, text, sizeof(text));
    err = sg_filter_inject(call, dir, kind_of[c->kind], text, len);
    if (err < 0) {
        if (!s->refused) {
            s->refused = true;
            sg_filter_log(call, SG_FILTER_LOG_INFO,
                          "the codec refused the %s for now (%s); trying again on the next "
                          "message",
                          kind_choices[c->kind], sg_strerror(err));
        }
        return SG_FILTER_PASS;
    }
    s->done++;
    s->next_ms = call->now_ms + (uint64_t)c->every;
    sg_filter_log(call, SG_FILTER_LOG_DEBUG, "injected %s #%lld %s", kind_choices[c->kind],
                  (long long)s->done, sg_filter__dir_name(dir));
    return SG_FILTER_CHANGED;
}

static void session_end(void *route_state, const struct sg_filter_session *session, void *slot)
{
    (void)route_state;
    (void)session;
    free(slot);
}

static const struct sg_conf_directive directives[] = {
    {.name = "text",
     .type = SG_CONF_STRING,
     .offset = offsetof(struct inject_conf, text),
     .argname = "TEXT",
     .help = "the message; %client% %server% %session% %time% are filled in (required)"},
    {.name = "kind",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct inject_conf, kind),
     .choices = kind_choices,
     .argname = "print|centerprint|chat|servercmd|clientcmd",
     .help = "what to send (default print)"},
    {.name = "direction",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct inject_conf, direction),
     .choices = dir_choices,
     .argname = "to_client|to_server",
     .help = "to whom (default to_client)"},
    {.name = "every",
     .type = SG_CONF_DURATION,
     .offset = offsetof(struct inject_conf, every),
     .min = 0,
     .max = 7 * 24 * 3600 * 1000LL,
     .argname = "DURATION",
     .help = "time between injections; 0 = once (default 0)"},
    {.name = "after",
     .type = SG_CONF_DURATION,
     .offset = offsetof(struct inject_conf, after),
     .min = 0,
     .max = 7 * 24 * 3600 * 1000LL,
     .argname = "DURATION",
     .help = "delay after the session's first decoded message (default 0)"},
    {.name = "count",
     .type = SG_CONF_INT,
     .offset = offsetof(struct inject_conf, count),
     .min = 0,
     .max = 1000000000,
     .argname = "N",
     .help = "injections per session at most; 0 = no limit (default 0)"},
    {NULL},
};

const struct sg_filter_impl sg_builtin_inject = {
    .name = "inject",
    .description = "send a text message of its own to the client or server, once or on a "
                   "schedule",
    .example = "filter inject {\n"
               "    text \"^3This game goes through slipgate (session %session%)\"\n"
               "    every 2s\n"
               "    after 1s\n"
               "    count 5\n"
               "}\n",
    .conf_size = sizeof(struct inject_conf),
    .directives = directives,
    .conf_check = conf_check,
    .on_frame = on_frame,
    .session_end = session_end,
};
