/*
 * The --stats file: one JSON object with every route and every session
 * (live and ended) and their counters.  Written to FILE.tmp and renamed,
 * so a reader never sees half a file.
 */
#include "proxy/stats.h"
#include "proxy/addr.h"
#include "protocols/json.h"
#include "proxy/route.h"
#include "proxy/spectate.h"
#include "sg_version.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void json_string(FILE *f, const char *s)
{
    sg_json_cstr(f, s);
}

static void json_counters(FILE *f, const struct sg_counters *c)
{
    fprintf(f,
            "{\"c2s_packets\": %llu, \"c2s_bytes\": %llu, \"s2c_packets\": %llu, "
            "\"s2c_bytes\": %llu, \"drops\": {",
            (unsigned long long)c->c2s_packets, (unsigned long long)c->c2s_bytes,
            (unsigned long long)c->s2c_packets, (unsigned long long)c->s2c_bytes);
    for (int i = 0; i < SG_DROP__COUNT; i++)
        fprintf(f, "%s\"%s\": %llu", i ? ", " : "", sg_drop_names[i],
                (unsigned long long)c->drops[i]);
    fputs("}}", f);
}

/* `label` then a time in ms, or null when negative (not measured). */
static void json_ms(FILE *f, const char *label, int32_t ms)
{
    fputs(label, f);
    if (ms < 0)
        fputs("null", f);
    else
        fprintf(f, "%ld", (long)ms);
}

/* One session; `route` (the API's flat list) adds its route's name. */
static void json_session(FILE *f, const struct sg_session_summary *s, const char *route,
                         bool *first)
{
    fprintf(f, "%s\n        {\"id\": %llu, ", *first ? "" : ",", (unsigned long long)s->id);
    if (route) {
        fputs("\"route\": ", f);
        json_string(f, route);
        fputs(", ", f);
    }
    fputs("\"client\": ", f);
    json_string(f, s->client);
    fprintf(f, ", \"upstream_port\": %d, \"state\": \"%s\", \"started_ms\": %llu", s->upstream_port,
            s->end_reason ? "ended" : "active", (unsigned long long)s->started_ms);
    if (s->end_reason) {
        fprintf(f, ", \"ended_ms\": %llu, \"end_reason\": ", (unsigned long long)s->ended_ms);
        json_string(f, s->end_reason);
    }
    fputs(", \"counters\": ", f);
    json_counters(f, &s->counters);
    if (s->codec) {
        const struct sg_codec_stats *c = &s->cstats;
        fprintf(
            f,
            ",\n         \"codec\": \"%s\", \"decode\": {\"datagrams\": %llu, \"messages\": %llu, "
            "\"oob\": %llu, \"rejected\": %llu, \"errors\": %llu, \"reencoded\": %llu, "
            "\"reencode_identical\": %llu, \"reencode_errors\": %llu}, \"first_error\": ",
            s->codec, (unsigned long long)c->decoded, (unsigned long long)c->messages,
            (unsigned long long)c->oob, (unsigned long long)c->rejected,
            (unsigned long long)c->errors, (unsigned long long)c->reencoded,
            (unsigned long long)c->reencode_identical, (unsigned long long)c->reencode_errors);
        json_string(f, s->first_error);
        fputs(", \"decode_info\": ", f);
        json_string(f, s->decode_info);
        fprintf(f, ", \"demos\": %u, \"demo_bytes\": %llu, \"demo\": ", s->demos,
                (unsigned long long)s->demo_bytes);
        json_string(f, s->demo);
        fputs(",\n         \"hostname\": ", f);
        json_string(f, s->game.hostname);
        fputs(", \"map\": ", f);
        json_string(f, s->game.map);
        fputs(", \"player\": ", f);
        json_string(f, s->game.player);
        fprintf(f,
                ", \"lost\": {\"c2s\": %llu, \"s2c\": %llu}, "
                "\"sequenced\": {\"c2s\": %llu, \"s2c\": %llu}",
                (unsigned long long)s->game.lost[SG_DIR_C2S],
                (unsigned long long)s->game.lost[SG_DIR_S2C],
                (unsigned long long)s->game.sequenced[SG_DIR_C2S],
                (unsigned long long)s->game.sequenced[SG_DIR_S2C]);
        json_ms(f, ", \"ping_ms\": ", sg_session_ping_ms(s));
        json_ms(f, ", \"rtt_ms\": {\"client\": ", s->rtt_ms[SG_DIR_S2C]);
        json_ms(f, ", \"server\": ", s->rtt_ms[SG_DIR_C2S]);
        fputc('}', f);
    }
    fputc('}', f);
    *first = false;
}

/* The route's chain: one object per filter with its counters (since the chain was built),
 * summed over the worker loops' copies of the route (`g`, `n`). */
static void json_filters(FILE *f, const struct sg_route *const *g, int n)
{
    const struct sg_chain *chain = g[0]->chain;

    fputs(",\n      \"filters\": [", f);
    for (int i = 0; chain && i < chain->n; i++) {
        const struct sg_chain_filter *cf = &chain->f[i];
        struct sg_filter_counters sum = cf->counters;
        const struct sg_filter_counters *c = &sum;

        for (int k = 1; k < n; k++) {
            const struct sg_chain *o = g[k]->chain;
            if (!o || o->n != chain->n)
                continue;
            sg_filter_counters_add(&sum, &o->f[i].counters);
        }

        fputs(i ? ",\n        {\"label\": " : "\n        {\"label\": ", f);
        json_string(f, cf->fc->label);
        fputs(", \"name\": ", f);
        json_string(f, cf->fc->impl->name);
        fprintf(f,
                ", \"tap\": %s, \"seen\": %llu, \"passed\": %llu, \"dropped\": %llu, "
                "\"changed\": %llu, \"injected\": %llu, \"errors\": %llu}",
                cf->fc->impl->tap ? "true" : "false", (unsigned long long)c->seen,
                (unsigned long long)c->passed, (unsigned long long)c->dropped,
                (unsigned long long)c->changed, (unsigned long long)c->injected,
                (unsigned long long)c->errors);
    }
    fputs(chain && chain->n ? "\n      ]" : "]", f);
}

void sg_stats_live_summary(const struct sg_session *s, struct sg_session_summary *out)
{
    *out = s->sum;
    if (s->route->chain && s->slots)
        sg_session_record_summary(s, s->route->chain, out); /* demos still being written */
    if (s->codec && s->cstate) {
        const struct sg_codec_stats *cs = s->codec->stats(s->cstate);
        out->codec = s->codec->name;
        out->cstats = *cs;
        snprintf(out->first_error, sizeof(out->first_error), "%s",
                 cs->errors ? s->codec->describe(s->cstate) : "");
        snprintf(out->decode_info, sizeof(out->decode_info), "%s",
                 s->codec->describe(s->cstate));
        sg_session_game_info(s, &out->game);
    }
}

/* An int that is -1 when not known: the number or null. */
static void json_count(FILE *f, int v)
{
    if (v < 0)
        fputs("null", f);
    else
        fprintf(f, "%d", v);
}

/*
 * The game behind the route, as its live sessions decoded it: the server's
 * name and level from the newest session that knows them, else from the
 * server's own status answer to the readiness probe while fresh ("" when
 * neither says: the page says unknown), and the players (established
 * sessions).  Then "probe": what the server's status answers said.
 */
static void json_route_game(FILE *f, const struct sg_route *const *g, int n)
{
    struct sg_codec_info best = {{0}}, gi;
    uint64_t best_host = 0, best_map = 0, age = 0;
    unsigned players = 0;
    bool fresh = false;
    const struct sg_codec_server *sv = sg_route_probe_server(g[0], &age, &fresh);

    for (int k = 0; k < n; k++)
        for (const struct sg_session *s = g[k]->sessions; s; s = s->next) {
            if (s->closing)
                continue;
            if (s->stage == SG_STAGE_ESTABLISHED)
                players++;
            sg_session_game_info(s, &gi);
            if (gi.hostname[0] && s->sum.started_ms >= best_host) {
                best_host = s->sum.started_ms;
                memcpy(best.hostname, gi.hostname, sizeof(best.hostname));
            }
            if (gi.map[0] && s->sum.started_ms >= best_map) {
                best_map = s->sum.started_ms;
                memcpy(best.map, gi.map, sizeof(best.map));
            }
        }
    if (sv && fresh && !best.hostname[0])
        snprintf(best.hostname, sizeof(best.hostname), "%s", sv->hostname);
    if (sv && fresh && !best.map[0])
        snprintf(best.map, sizeof(best.map), "%s", sv->map);
    fputs(",\n      \"game\": {\"hostname\": ", f);
    json_string(f, best.hostname);
    fputs(", \"map\": ", f);
    json_string(f, best.map);
    fprintf(f, ", \"players\": %u}", players);

    fprintf(f, ",\n      \"probe\": {\"answers\": %llu, \"malformed\": %llu, \"age_ms\": ",
            (unsigned long long)g[0]->probe_answers, (unsigned long long)g[0]->probe_malformed);
    if (sv)
        fprintf(f, "%llu", (unsigned long long)age);
    else
        fputs("null", f);
    fprintf(f, ", \"fresh\": %s, \"hostname\": ", fresh ? "true" : "false");
    json_string(f, sv ? sv->hostname : "");
    fputs(", \"map\": ", f);
    json_string(f, sv ? sv->map : "");
    fputs(", \"players\": ", f);
    json_count(f, sv ? sv->players : -1);
    fputs(", \"max_players\": ", f);
    json_count(f, sv ? sv->max_players : -1);
    fputc('}', f);
}

/*
 * One route as --stats shows it: with worker loops, the same-named routes
 * of every loop (`g`, `n` of them, worker 0's first) as one, their counters
 * summed and their sessions listed together, and "workers" with each
 * loop's share.
 */
/* A duration histogram: count, sum, p50/p99/p99.9/max (us) and its non-empty
 * buckets as [upper edge in us (null: above the last), count]. */
static void json_hist(FILE *f, const struct sg_hist *h)
{
    bool first = true;

    fprintf(f,
            "{\"count\": %llu, \"sum_us\": %.3f, \"p50_us\": %.3f, \"p99_us\": %.3f, "
            "\"p999_us\": %.3f, \"max_us\": %.3f, \"buckets\": [",
            (unsigned long long)h->count, (double)h->sum_ns / 1e3,
            (double)sg_hist_quantile(h, 0.5) / 1e3, (double)sg_hist_quantile(h, 0.99) / 1e3,
            (double)sg_hist_quantile(h, 0.999) / 1e3, (double)h->max_ns / 1e3);
    for (unsigned i = 0; i < SG_HIST_BUCKETS; i++) {
        if (!h->b[i])
            continue;
        if (i < SG_HIST_EDGES)
            fprintf(f, "%s[%.2f, %llu]", first ? "" : ", ", (double)sg_hist_edges[i] / 1e3,
                    (unsigned long long)h->b[i]);
        else
            fprintf(f, "%s[null, %llu]", first ? "" : ", ", (unsigned long long)h->b[i]);
        first = false;
    }
    fputs("]}", f);
}

static void json_route(FILE *f, const struct sg_route *const *g, int n, bool retired, bool sessions)
{
    const struct sg_route *r = g[0];
    char a[SG_ADDR_STRLEN];
    bool first = true;
    struct sg_counters c = {0};
    uint64_t total = 0, omitted = 0, evicted = 0, moves = 0, kdrops = 0, dq_max = 0, dq_full = 0;
    size_t active = 0;
    struct sg_hist resid[2] = {{{0}}};
    uint64_t untimed = 0;

    for (int k = 0; k < n; k++) {
        const struct sg_route *x = g[k];
        c.c2s_packets += x->counters.c2s_packets;
        c.c2s_bytes += x->counters.c2s_bytes;
        c.s2c_packets += x->counters.s2c_packets;
        c.s2c_bytes += x->counters.s2c_bytes;
        for (int i = 0; i < SG_DROP__COUNT; i++)
            c.drops[i] += x->counters.drops[i];
        total += x->sessions_total;
        active += x->nsessions;
        omitted += x->ended_omitted;
        evicted += x->sessions_evicted;
        moves += x->client_moves;
        kdrops += x->kernel_drops;
        dq_max = x->dq_max > dq_max ? x->dq_max : dq_max;
        dq_full += x->dq_overflows;
        sg_hist_merge(&resid[SG_DIR_C2S], &x->resid[SG_DIR_C2S]);
        sg_hist_merge(&resid[SG_DIR_S2C], &x->resid[SG_DIR_S2C]);
        untimed += x->resid_untimed;
    }
    fputs("    {\"name\": ", f);
    json_string(f, r->conf.name);
    fputs(", \"listen\": ", f);
    json_string(f, r->conf.listen);
    fputs(", \"listen_addr\": ", f);
    json_string(f, sg_addr_format((const struct sockaddr *)&r->listen_addr, a, sizeof(a)));
    fputs(", \"server\": ", f);
    json_string(f, r->conf.server);
    fprintf(f,
            ", \"protocol\": \"%s\", \"retired\": %s, \"sessions_total\": %llu, "
            "\"sessions_active\": %zu, \"sessions_omitted\": %llu, \"sessions_evicted\": %llu,"
            " \"client_moves\": %llu,\n      \"counters\": ",
            sg_protocol_name(r->conf.protocol), retired ? "true" : "false",
            (unsigned long long)total, active, (unsigned long long)omitted,
            (unsigned long long)evicted, (unsigned long long)moves);
    json_counters(f, &c);
    fprintf(f, ",\n      \"listener\": {\"rcvbuf\": %d, \"sndbuf\": %d, \"kernel_drops\": %llu}",
            r->rcvbuf, r->sndbuf, (unsigned long long)kdrops);
    fprintf(f,
            ",\n      \"path\": \"%s\", \"deferred\": {\"max_waiting\": %llu, "
            "\"decoded_at_once\": %llu}",
            r->send_first ? "send-first" : "in-order", (unsigned long long)dq_max,
            (unsigned long long)dq_full);
    fprintf(f, ",\n      \"residence\": {\"on\": %s, \"untimed\": %llu, \"c2s\": ",
            r->conf.residence_off == 1 ? "false" : "true", (unsigned long long)untimed);
    json_hist(f, &resid[SG_DIR_C2S]);
    fputs(", \"s2c\": ", f);
    json_hist(f, &resid[SG_DIR_S2C]);
    fputc('}', f);
    json_route_game(f, g, n);
    for (int k = 0; k < n; k++) /* spectators: worker 0's route holds the port */
        if (g[k]->spect)
            sg_spectate_json(g[k]->spect, f, uv_now(g[k]->ctx->loop));
    if (n > 1 || r->ctx->nworkers > 1) {
        fputs(",\n      \"workers\": [", f);
        for (int k = 0; k < n; k++)
            fprintf(f,
                    "%s{\"worker\": %d, \"sessions_total\": %llu, \"sessions_active\": %zu, "
                    "\"c2s_packets\": %llu, \"s2c_packets\": %llu}",
                    k ? ", " : "", g[k]->ctx->worker, (unsigned long long)g[k]->sessions_total,
                    g[k]->nsessions, (unsigned long long)g[k]->counters.c2s_packets,
                    (unsigned long long)g[k]->counters.s2c_packets);
        fputc(']', f);
    }
    if (sessions) {
        fputs(",\n      \"sessions\": [", f);
        for (int k = 0; k < n; k++)
            for (size_t i = 0; i < g[k]->nended; i++)
                json_session(f, &g[k]->ended[i], NULL, &first);
        for (int k = 0; k < n; k++) {
            for (const struct sg_session *s = g[k]->sessions; s; s = s->next) {
                struct sg_session_summary sum;
                sg_stats_live_summary(s, &sum);
                json_session(f, &sum, NULL, &first);
            }
        }
        fputs(first ? "]" : "\n      ]", f);
    }
    json_filters(f, g, n);
    fputs("}", f);
}

int sg_stats_route_group(const struct sg_stats_view *v, const struct sg_route *r,
                         const struct sg_route **g)
{
    int n = 0;

    g[n++] = r;
    for (int i = 1; i < v->nworkers; i++) {
        if (!v->loop[i].present)
            continue;
        for (const struct sg_route *o = v->loop[i].routes; o; o = o->next)
            if (strcmp(o->conf.name, r->conf.name) == 0 && n < SG_CONF_MAX_WORKERS)
                g[n++] = o;
    }
    return n;
}

/* A retired route that was freed: what its summary kept (no sessions, no filters). */
static void json_route_summary(FILE *f, const struct sg_route_summary *r, bool sessions)
{
    fputs("    {\"name\": ", f);
    json_string(f, r->name);
    fputs(", \"listen\": ", f);
    json_string(f, r->listen);
    fputs(", \"listen_addr\": ", f);
    json_string(f, r->listen_addr);
    fputs(", \"server\": ", f);
    json_string(f, r->server);
    fprintf(f,
            ", \"protocol\": \"%s\", \"retired\": true, \"retired_ms\": %llu, "
            "\"retired_reason\": ",
            sg_protocol_name(r->protocol), (unsigned long long)r->retired_ms);
    json_string(f, r->reason ? r->reason : "");
    fprintf(f,
            ", \"sessions_total\": %llu, \"sessions_active\": 0, \"sessions_omitted\": %llu,"
            "\n      \"counters\": ",
            (unsigned long long)r->sessions_total, (unsigned long long)r->sessions_dropped);
    json_counters(f, &r->counters);
    fprintf(f,
            ",\n      \"listener\": {\"rcvbuf\": %d, \"sndbuf\": %d, \"kernel_drops\": %llu},"
            "%s\n      \"filters\": []}",
            r->rcvbuf, r->sndbuf, (unsigned long long)r->kernel_drops,
            sessions ? "\n      \"sessions\": []," : "");
}

int sg_stats_check_path(const char *path, char *why, size_t whycap)
{
    char tmp[4096];
    struct stat st;
    int fd, err;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
        snprintf(why, whycap, "the stats file path is too long: %.64s...", path);
        return -ENAMETOOLONG;
    }
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(why, whycap, "cannot write the stats file %s: it is a directory", path);
        return -EISDIR;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) /* left by a run that was killed: ours to replace */
        fd = open(tmp, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        err = -errno;
        snprintf(why, whycap, "cannot write the stats file %s (through %s): %s", path, tmp,
                 strerror(errno));
        return err;
    }
    close(fd);
    unlink(tmp);
    return 0;
}

/*
 * The other loops' summaries of retired route `i`: every loop applies the
 * same reloads in the same order, so their rings line up; a loop whose
 * count differs (a route failed on one loop only) is left out.
 */
static void retired_merge(const struct sg_stats_view *v, uint64_t i, struct sg_route_summary *sum)
{
    for (int k = 1; k < v->nworkers; k++) {
        const struct sg_stats_loop *w = &v->loop[k];
        const struct sg_route_summary *o;

        if (!w->present || !w->retired_log || w->nretired_log != v->loop[0].nretired_log)
            continue;
        o = &w->retired_log[i % SG_STATS_RETIRED_KEEP];
        if (strcmp(o->name, sum->name) != 0)
            continue;
        sum->sessions_total += o->sessions_total;
        sum->sessions_dropped += o->sessions_dropped;
        sum->kernel_drops += o->kernel_drops;
        sum->counters.c2s_packets += o->counters.c2s_packets;
        sum->counters.c2s_bytes += o->counters.c2s_bytes;
        sum->counters.s2c_packets += o->counters.s2c_packets;
        sum->counters.s2c_bytes += o->counters.s2c_bytes;
        for (int d = 0; d < SG_DROP__COUNT; d++)
            sum->counters.drops[d] += o->counters.drops[d];
    }
}

void sg_stats_json(FILE *f, const struct sg_stats_view *v, bool sessions)
{
    const struct sg_stats_loop *app = &v->loop[0];
    bool first = true;
    uint64_t kept;

    kept = app->retired_log ? app->nretired_log : 0;
    if (kept > SG_STATS_RETIRED_KEEP)
        kept = SG_STATS_RETIRED_KEEP;
    fprintf(f,
            "{\"version\": \"%s\", \"started_ms\": %llu, \"uptime_ms\": %llu, "
            "\"retired_routes_omitted\": %llu,\n",
            SG_VERSION, (unsigned long long)v->started_wall_ms,
            (unsigned long long)(sg_now_wall_ms() - v->started_wall_ms),
            (unsigned long long)(app->nretired_log - kept));
    {
        /* Every worker loop's turns together (the longest of them). */
        uint64_t turns = app->turns, max_ns = app->turn_max_ns, over = app->turns_over_1ms;
        struct sg_hist th = {{0}};

        if (app->turn_hist)
            sg_hist_merge(&th, app->turn_hist);
        for (int k = 1; k < v->nworkers; k++) {
            const struct sg_stats_loop *w = &v->loop[k];
            if (!w->present)
                continue;
            if (w->turn_hist)
                sg_hist_merge(&th, w->turn_hist);
            turns += w->turns;
            over += w->turns_over_1ms;
            max_ns = w->turn_max_ns > max_ns ? w->turn_max_ns : max_ns;
        }
        fprintf(f,
                "  \"loop\": {\"turns\": %llu, \"longest_turn_us\": %.1f, "
                "\"turns_over_1ms\": %llu, \"turn\": ",
                (unsigned long long)turns, (double)max_ns / 1000.0, (unsigned long long)over);
        json_hist(f, &th);
        fputs("},\n", f);
    }
    fputs("  \"routes\": [\n", f);
    for (struct sg_route *r = app->routes; r; r = r->next, first = false) {
        const struct sg_route *g[SG_CONF_MAX_WORKERS];
        int n = sg_stats_route_group(v, r, g);
        sg_route_poll_kernel_drops(r);
        fputs(first ? "" : ",\n", f);
        json_route(f, g, n, false, sessions);
    }
    /* Retired routes: the freed ones, oldest first, then those still closing. */
    for (uint64_t i = app->nretired_log - kept; i < app->nretired_log; i++, first = false) {
        struct sg_route_summary sum = app->retired_log[i % SG_STATS_RETIRED_KEEP];
        fputs(first ? "" : ",\n", f);
        retired_merge(v, i, &sum);
        json_route_summary(f, &sum, sessions);
    }
    for (const struct sg_route *r = app->retired; r; r = r->next, first = false) {
        fputs(first ? "" : ",\n", f);
        json_route(f, &r, 1, true, sessions);
    }
    fputs("\n  ]\n}\n", f);
}

void sg_stats_json_sessions(FILE *f, const struct sg_stats_view *v, bool ended)
{
    bool first = true;

    fputs("{\"sessions\": [", f);
    for (const struct sg_route *r0 = v->loop[0].routes; r0; r0 = r0->next) {
        const struct sg_route *g[SG_CONF_MAX_WORKERS];
        int n = sg_stats_route_group(v, r0, g); /* every loop's (workers paused) */

        for (int k = 0; k < n; k++) {
            const struct sg_route *r = g[k];
            for (size_t i = 0; ended && i < r->nended; i++)
                json_session(f, &r->ended[i], r->conf.name, &first);
        }
        for (int k = 0; k < n; k++)
            for (const struct sg_session *s = g[k]->sessions; s; s = s->next) {
                struct sg_session_summary sum;
                sg_stats_live_summary(s, &sum);
                json_session(f, &sum, g[k]->conf.name, &first);
            }
    }
    fputs(first ? "]}\n" : "\n  ]}\n", f);
}

int sg_stats_write(const struct sg_stats_view *v, const char *path)
{
    char tmp[4096];
    FILE *f;
    int err = 0;

    /* Write beside the target, then rename over it. */
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
        sg_log(v->log, SG_LOG_ERROR, NULL, 0, "stats: path too long: %s", path);
        return -ENAMETOOLONG;
    }
    f = fopen(tmp, "w");
    if (!f) {
        err = -errno;
        sg_log(v->log, SG_LOG_ERROR, NULL, 0, "stats: cannot write %s: %s", tmp,
               strerror(errno));
        return err;
    }
    sg_stats_json(f, v, true);

    /* A full disk shows up at flush or close: report it and keep the old file. */
    if (ferror(f) || fflush(f) != 0)
        err = -(errno ? errno : EIO);
    if (fclose(f) != 0 && err == 0)
        err = -errno;
    if (err == 0 && rename(tmp, path) != 0)
        err = -errno;
    if (err < 0) {
        sg_log(v->log, SG_LOG_ERROR, NULL, 0, "stats: cannot write %s: %s", path,
               strerror(-err));
        remove(tmp);
        return err;
    }
    sg_log(v->log, SG_LOG_INFO, NULL, 0, "stats written to %s", path);
    return 0;
}
