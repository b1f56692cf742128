/*
 * Live actions through the HTTP API (admin.h): list players, kick, unban,
 * mute.  Every loop's routes are read and changed with the other loops
 * paused; what must run on a session's own loop (ending it) is left to its
 * route's sweep.
 */
#include "proxy/admin.h"

#include "proxy/addr.h"
#include "proxy/ban.h"
#include "proxy/route.h"
#include "proxy/stats.h"
#include "protocols/json.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool sg_admin_is_action(const char *url)
{
    return strcmp(url, "/api/kick") == 0 || strcmp(url, "/api/unban") == 0 ||
           strcmp(url, "/api/mute") == 0;
}

bool sg_admin_is_list(const char *url)
{
    return strcmp(url, "/api/players") == 0;
}

static void reply_text(struct sg_admin_reply *out, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void reply_text(struct sg_admin_reply *out, unsigned status, const char *fmt, ...)
{
    va_list ap;
    char buf[512];
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    out->status = status;
    out->json = false;
    out->body = strdup(buf);
    out->len = out->body ? (size_t)(n < (int)sizeof(buf) ? n : (int)sizeof(buf) - 1) : 0;
}

/* Answer with an error and change nothing. */
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        reply_text(out, __VA_ARGS__);                                                              \
        return;                                                                                    \
    } while (0)

static const char *arg(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
}

/* A decimal number in [lo, hi] from `text`; false when it is not one. */
static bool number(const char *text, unsigned long long lo, unsigned long long hi,
                   unsigned long long *v)
{
    char *end;

    if (!text || !*text || *text == '-' || *text == '+')
        return false;
    errno = 0;
    *v = strtoull(text, &end, 10);
    return !errno && !*end && *v >= lo && *v <= hi;
}

/* The live session numbered `id` (any loop), and its route; NULL when none. */
static struct sg_session *find_session(const struct sg_stats_view *v, uint64_t id,
                                       struct sg_route **route)
{
    for (int k = 0; k < v->nworkers && k < SG_CONF_MAX_WORKERS; k++) {
        if (!v->loop[k].present)
            continue;
        for (struct sg_route *r = v->loop[k].routes; r; r = r->next)
            for (struct sg_session *s = r->sessions; s; s = s->next)
                if (s->sum.id == id && !s->closing) {
                    *route = r;
                    return s;
                }
    }
    return NULL;
}

/* ---- the actions ---- */

static void players(const struct sg_stats_view *v, FILE *f)
{
    bool first = true;

    fputs("{\"players\": [", f);
    for (int k = 0; k < v->nworkers && k < SG_CONF_MAX_WORKERS; k++) {
        if (!v->loop[k].present)
            continue;
        for (struct sg_route *r = v->loop[k].routes; r; r = r->next) {
            for (struct sg_session *s = r->sessions; s; s = s->next) {
                char a[SG_ADDR_STRLEN];
                struct sg_codec_info gi;
                if (s->closing)
                    continue;
                fprintf(f, "%s\n  {\"session\": %llu, \"route\": ", first ? "" : ",",
                        (unsigned long long)s->sum.id);
                sg_json_cstr(f, r->conf.name);
                fputs(", \"client\": ", f);
                sg_json_cstr(f, sg_route__client_name(r, (const struct sockaddr *)&s->client, a,
                                                      sizeof(a)));
                fprintf(f, ", \"game\": ");
                if (s->game)
                    sg_json_cstr(f, s->game->name);
                else
                    fputs("null", f);
                sg_session_game_info(s, &gi);
                fputs(", \"name\": ", f);
                sg_json_cstr(f, gi.player);
                if (sg_session_ping_ms(&s->sum) >= 0)
                    fprintf(f, ", \"ping_ms\": %ld", (long)sg_session_ping_ms(&s->sum));
                else
                    fputs(", \"ping_ms\": null", f);
                fprintf(f,
                        ", \"lost\": {\"c2s\": %llu, \"s2c\": %llu}, "
                        "\"sequenced\": {\"c2s\": %llu, \"s2c\": %llu}",
                        (unsigned long long)gi.lost[SG_DIR_C2S],
                        (unsigned long long)gi.lost[SG_DIR_S2C],
                        (unsigned long long)gi.sequenced[SG_DIR_C2S],
                        (unsigned long long)gi.sequenced[SG_DIR_S2C]);
                fprintf(f, ", \"established\": %s, \"muted\": %s}",
                        s->stage == SG_STAGE_ESTABLISHED ? "true" : "false",
                        s->muted ? "true" : "false");
                first = false;
            }
        }
    }
    fputs(first ? "]}\n" : "\n]}\n", f);
}

static void kick(const struct sg_admin_access *owner, const struct sg_stats_view *v,
                 struct MHD_Connection *c, const char *peer, struct sg_admin_reply *out, FILE *f)
{
    const char *reason = arg(c, "reason"), *min = arg(c, "minutes");
    unsigned long long id, minutes = SG_ADMIN_KICK_MINUTES;
    struct sg_route *r = NULL;
    struct sg_session *s;
    struct sockaddr_storage client;
    char a[SG_ADDR_STRLEN];
    int err = 0;

    if (!number(arg(c, "session"), 1, UINT64_MAX, &id))
        FAIL(MHD_HTTP_BAD_REQUEST, "session: a session number (/api/players)\n");
    if (min && !number(min, 1, SG_ADMIN_KICK_MAX_MINUTES, &minutes))
        FAIL(MHD_HTTP_BAD_REQUEST, "minutes: a whole number from 1 to %d\n",
                          SG_ADMIN_KICK_MAX_MINUTES);
    if (reason) {
        size_t n = strlen(reason);
        if (n >= SG_BAN_REASON_MAX)
            FAIL(MHD_HTTP_BAD_REQUEST, "reason: at most %d bytes\n",
                              SG_BAN_REASON_MAX - 1);
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)reason[i] < 0x20 || (unsigned char)reason[i] > 0x7e)
                FAIL(MHD_HTTP_BAD_REQUEST, "reason: printable ASCII only\n");
    }
    if (!(s = find_session(v, id, &r)))
        FAIL(MHD_HTTP_NOT_FOUND, "no live session %llu\n", id);
    client = s->client;
    /* Every loop's route of that name refuses the address (a new port may land on any). */
    for (int k = 0; k < v->nworkers && k < SG_CONF_MAX_WORKERS && err == 0; k++)
        for (struct sg_route *o = v->loop[k].present ? v->loop[k].routes : NULL; o && err == 0;
             o = o->next)
            if (strcmp(o->conf.name, r->conf.name) == 0)
                err = sg_route_kick_ban(o, (const struct sockaddr *)&client, (int64_t)minutes,
                                        reason);
    if (err < 0)
        FAIL(MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    sg_route__client_name(r, (const struct sockaddr *)&client, a, sizeof(a));
    sg_log(owner->log, SG_LOG_WARN, r->conf.name, id,
           "kicked by %s over HTTP: %s refused for %llu minute%s%s%s", peer, a, minutes,
           minutes == 1 ? "" : "s", reason ? ": " : "", reason ? reason : "");
    fprintf(f, "{\"action\": \"kick\", \"session\": %llu, \"route\": ", id);
    sg_json_cstr(f, r->conf.name);
    fputs(", \"client\": ", f);
    sg_json_cstr(f, a);
    fprintf(f, ", \"minutes\": %llu}\n", minutes);
}

static void unban(const struct sg_admin_access *owner, const struct sg_stats_view *v,
                  struct MHD_Connection *c, const char *peer, struct sg_admin_reply *out, FILE *f)
{
    const char *addr = arg(c, "addr"), *route = arg(c, "route");
    struct sg_ban_rule rule;
    char why[200], cidr[80];
    const struct sg_ban_rule *conf = NULL;
    bool route_found = false;
    int gone = 0, n;

    if (!addr)
        FAIL(MHD_HTTP_BAD_REQUEST, "addr: ADDR or ADDR/BITS to unban\n");
    if (sg_ban_rule_parse(addr, false, &rule, why, sizeof(why)) < 0)
        FAIL(MHD_HTTP_BAD_REQUEST, "addr: %s\n", why);
    sg_ban_rule_format(&rule, cidr, sizeof(cidr));
    for (int k = 0; k < v->nworkers && k < SG_CONF_MAX_WORKERS; k++) {
        for (struct sg_route *r = v->loop[k].present ? v->loop[k].routes : NULL; r; r = r->next) {
            if (route && strcmp(route, r->conf.name) != 0)
                continue;
            route_found = true;
            n = sg_route_unban(r, &rule);
            if (k == 0) /* every loop holds the same kicks: count one loop's */
                gone += n;
            for (int i = 0; !conf && r->conf.bans && i < r->conf.bans->count; i++)
                if (sg_ban_rule_covers(&r->conf.bans->rules[i], rule.addr))
                    conf = &r->conf.bans->rules[i];
        }
    }
    if (route && !route_found)
        FAIL(MHD_HTTP_NOT_FOUND, "no route named '%.63s'\n", route);
    if (gone == 0 && conf)
        FAIL(MHD_HTTP_CONFLICT,
                          "%s is banned by the configuration%s%s: edit it and reload\n", cidr,
                          conf->file ? ", " : "", conf->file ? conf->file : "");
    if (gone == 0)
        FAIL(MHD_HTTP_NOT_FOUND, "no kick of %s to lift\n", cidr);
    sg_log(owner->log, SG_LOG_WARN, route, 0, "unbanned by %s over HTTP: %s (%d kick%s lifted)",
           peer, cidr, gone, gone == 1 ? "" : "s");
    fputs("{\"action\": \"unban\", \"addr\": ", f);
    sg_json_cstr(f, cidr);
    fprintf(f, ", \"lifted\": %d}\n", gone);
}

static void mute(const struct sg_admin_access *owner, const struct sg_stats_view *v,
                 struct MHD_Connection *c, const char *peer, struct sg_admin_reply *out, FILE *f)
{
    const char *on = arg(c, "on");
    unsigned long long id;
    struct sg_route *r = NULL;
    struct sg_session *s;
    char a[SG_ADDR_STRLEN];
    bool muted = true;

    if (!number(arg(c, "session"), 1, UINT64_MAX, &id))
        FAIL(MHD_HTTP_BAD_REQUEST, "session: a session number (/api/players)\n");
    if (on && strcmp(on, "1") != 0 && strcmp(on, "0") != 0)
        FAIL(MHD_HTTP_BAD_REQUEST, "on: 1 (mute, the default) or 0 (unmute)\n");
    if (on)
        muted = strcmp(on, "1") == 0;
    if (!(s = find_session(v, id, &r)))
        FAIL(MHD_HTTP_NOT_FOUND, "no live session %llu\n", id);
    if (muted && (!s->codec || !s->codec->drop_msg))
        FAIL(MHD_HTTP_CONFLICT,
                          "session %llu is not decoded (protocol auto, not yet known, or no "
                          "codec): its chat cannot be told apart\n",
                          id);
    s->muted = muted;
    sg_route__client_name(r, (const struct sockaddr *)&s->client, a, sizeof(a));
    sg_log(owner->log, SG_LOG_WARN, r->conf.name, id, "%s by %s over HTTP (%s)",
           muted ? "muted" : "unmuted", peer, a);
    fprintf(f, "{\"action\": \"mute\", \"session\": %llu, \"muted\": %s}\n", id,
            muted ? "true" : "false");
}

void sg_admin_handle(const struct sg_admin_access *owner, bool has_token, struct MHD_Connection *c,
                     const char *url, const char *peer, struct sg_admin_reply *out)
{
    struct sg_stats_view *v;
    char *buf = NULL;
    size_t len = 0;
    FILE *f;
    bool paused;

    memset(out, 0, sizeof(*out));
    if (sg_admin_is_action(url) && !has_token)
        FAIL(MHD_HTTP_FORBIDDEN,
                          "live actions need http_token to be set (doc/http.md)\n");
    v = malloc(sizeof(*v));
    f = open_memstream(&buf, &len);
    if (!v || !f) {
        if (f)
            fclose(f);
        free(buf);
        free(v);
        FAIL(MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    }
    paused = owner->pause(owner->data);
    owner->view(owner->data, v);
    if (sg_admin_is_list(url))
        players(v, f);
    else if (strcmp(url, "/api/kick") == 0)
        kick(owner, v, c, peer, out, f);
    else if (strcmp(url, "/api/unban") == 0)
        unban(owner, v, c, peer, out, f);
    else
        mute(owner, v, c, peer, out, f);
    if (paused)
        owner->resume(owner->data);
    free(v);
    if (fclose(f) != 0 || !buf) {
        free(buf);
        if (!out->body)
            reply_text(out, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
        return;
    }
    if (out->body) { /* an error was set: the document is not sent */
        free(buf);
        return;
    }
    out->status = MHD_HTTP_OK;
    out->json = true;
    out->body = buf;
    out->len = len;
}
