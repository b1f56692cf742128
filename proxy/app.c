/*
 * The running proxy: start the routes, handle signals, reload on SIGHUP,
 * shut down cleanly on SIGINT/SIGTERM (a second one exits at once) and
 * write --stats at the end.
 */
#include "proxy/app.h"
#include "proxy/stats.h"

#include "proxy/addr.h"
#include "proxy/http.h"
#include "proxy/preflight.h"
#include "protocols/error.h"
#include "sg_version.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/*
 * What a run holds beyond struct sg_app: the `stats_interval` timer.  The
 * app is the first member, so the app's callbacks find it (run_of).
 */
struct app_run {
    struct sg_app app;
    uv_timer_t stats_timer;
    bool stats_timer_open;
};

/* What goes to standard error before the logger runs is an error: to
 * journald, priority 3 (log.h). */
static const char *err_prefix(void)
{
    return sg_log_is_journal(STDERR_FILENO) ? "<3>" : "";
}

static struct app_run *run_of(struct sg_app *app)
{
    return (struct app_run *)(void *)((char *)app - offsetof(struct app_run, app));
}

/* ---- the periodic stats line ---- */

/* One line per route: packets, sessions, and each filter's counters; with
 * worker loops, worker 0 writes it for the same-named routes of every loop
 * together (read while the other loops are paused: sg_app_workers_pause). */
static void log_stats(struct sg_app *app)
{
    char line[4096];
    bool paused = sg_app_workers_pause(app);

    for (struct sg_route *r = app->routes; r; r = r->next) {
        struct sg_route *g[SG_CONF_MAX_WORKERS];
        struct sg_counters c = {0};
        uint64_t total = 0, kdrops = 0;
        size_t active = 0;
        int n, ng = 0;

        g[ng++] = r;
        for (int i = 1; paused && app->workers && i < app->nworkers; i++)
            for (struct sg_route *o = app->workers[i] ? app->workers[i]->routes : NULL; o;
                 o = o->next)
                if (strcmp(o->conf.name, r->conf.name) == 0 && ng < SG_CONF_MAX_WORKERS)
                    g[ng++] = o;
        for (int k = 0; k < ng; k++) {
            sg_route_poll_kernel_drops(g[k]);
            active += g[k]->nsessions;
            total += g[k]->sessions_total;
            kdrops += g[k]->kernel_drops;
            c.c2s_packets += g[k]->counters.c2s_packets;
            c.c2s_bytes += g[k]->counters.c2s_bytes;
            c.s2c_packets += g[k]->counters.s2c_packets;
            c.s2c_bytes += g[k]->counters.s2c_bytes;
            for (int d = 0; d < SG_DROP__COUNT; d++)
                c.drops[d] += g[k]->counters.drops[d];
        }
        n = snprintf(line, sizeof(line),
                     "stats: sessions_active=%zu sessions_total=%llu c2s_packets=%llu "
                     "c2s_bytes=%llu s2c_packets=%llu s2c_bytes=%llu drops=%llu kernel_drops=%llu",
                     active, (unsigned long long)total, (unsigned long long)c.c2s_packets,
                     (unsigned long long)c.c2s_bytes, (unsigned long long)c.s2c_packets,
                     (unsigned long long)c.s2c_bytes, (unsigned long long)sg_counters_drops(&c),
                     (unsigned long long)kdrops);

        for (int i = 0; r->chain && i < r->chain->n && n > 0 && n < (int)sizeof(line); i++) {
            struct sg_filter_counters f = r->chain->f[i].counters;
            for (int k = 1; k < ng; k++) {
                const struct sg_chain *o = g[k]->chain;
                if (!o || o->n != r->chain->n)
                    continue;
                sg_filter_counters_add(&f, &o->f[i].counters);
            }
            n += snprintf(line + n, sizeof(line) - (size_t)n,
                          " | %s: seen=%llu passed=%llu dropped=%llu changed=%llu injected=%llu "
                          "errors=%llu",
                          r->chain->f[i].fc->label, (unsigned long long)f.seen,
                          (unsigned long long)f.passed, (unsigned long long)f.dropped,
                          (unsigned long long)f.changed, (unsigned long long)f.injected,
                          (unsigned long long)f.errors);
        }
        sg_log(&app->log, SG_LOG_INFO, r->conf.name, 0, "%s", line);
    }
    if (paused)
        sg_app_workers_resume(app);
}

static void on_stats_timer(uv_timer_t *t)
{
    log_stats(t->data);
}

/* (Re)arm the timer from the configuration in force; it never keeps the loop alive. */
static void stats_timer_start(struct sg_app *app)
{
    struct app_run *run = run_of(app);
    uint64_t iv = (uint64_t)app->conf->stats_interval_ms;

    if (app->worker > 0)
        return; /* worker 0 writes every loop's line */
    if (!run->stats_timer_open) {
        if (iv == 0 || uv_timer_init(&app->loop, &run->stats_timer) < 0)
            return;
        run->stats_timer.data = app;
        run->stats_timer_open = true;
        uv_unref((uv_handle_t *)&run->stats_timer);
    }
    uv_timer_stop(&run->stats_timer);
    if (iv > 0 && !app->stopping)
        uv_timer_start(&run->stats_timer, on_stats_timer, iv, iv);
}

/* ---- loop turns ---- */

/* Just before the poll: the turn since the last one, less the time it spent blocked. */
static void on_turn_prepare(uv_prepare_t *h)
{
    struct sg_app *app = h->data;
    uint64_t now = uv_hrtime(), idle = uv_metrics_idle_time(&app->loop), busy;

    if (app->turn_last_ns) {
        busy = now - app->turn_last_ns - (idle - app->turn_last_idle_ns);
        app->turns++;
        if (busy > app->turn_max_ns)
            app->turn_max_ns = busy;
        if (busy > 1000000)
            app->turns_over_1ms++;
        sg_hist_add(&app->turn_hist, busy);
    }
    app->turn_last_ns = now;
    app->turn_last_idle_ns = idle;
}

/* /live's heartbeat: the loop turned at least this lately. */
static void on_beat(uv_timer_t *t)
{
    struct sg_app *app = t->data;

    atomic_store_explicit(&app->beat_ns, uv_hrtime(), memory_order_relaxed);
}

static void turns_start(struct sg_app *app)
{
    atomic_store_explicit(&app->beat_ns, uv_hrtime(), memory_order_relaxed);
    if (uv_timer_init(&app->loop, &app->beat) == 0) {
        app->beat.data = app;
        app->beat_open = true;
        uv_timer_start(&app->beat, on_beat, SG_APP_BEAT_MS, SG_APP_BEAT_MS);
        uv_unref((uv_handle_t *)&app->beat);
    }
    if (uv_prepare_init(&app->loop, &app->turn_prep) < 0)
        return;
    app->turn_prep.data = app;
    app->turn_prep_open = true;
    uv_prepare_start(&app->turn_prep, on_turn_prepare);
    uv_unref((uv_handle_t *)&app->turn_prep);
}

/* ---- open files ---- */

/*
 * Every session holds one descriptor (its upstream socket), two when its
 * route records demos; each route a listener.  The rest of the process (the
 * loop, signals, logs, --stats, pcap files, plugins) gets a margin, and the
 * `http` endpoint its listener and connections.
 */
#define FD_MARGIN 32

static int64_t fd_reserve(const struct sg_app *app)
{
    return FD_MARGIN + (app->conf && app->conf->http ? 1 + SG_HTTP_MAX_CONNECTIONS : 0);
}

static int64_t route_fds_per_session(const struct sg_route *r)
{
    bool records = r->conf.record != NULL;

    for (int i = 0; r->chain && i < r->chain->n && !records; i++)
        records = strcmp(r->chain->f[i].fc->impl->name, "record") == 0;
    return records ? 2 : 1;
}

/*
 * Raise the soft RLIMIT_NOFILE to what the routes' max_sessions need (up to
 * the hard limit), at start and after a reload; say once per route (per
 * max_sessions value) when the limit keeps max_sessions out of reach.  Such
 * a route's table is then full at what the limit leaves room for (its
 * share's fd_cap), so that a full table's eviction rule applies there too.
 */
static void fit_open_files(struct sg_app *app)
{
    struct rlimit rl;
    int64_t need = fd_reserve(app), room;

    /* max_sessions counts every loop's sessions; each loop has a listener. */
    for (struct sg_route *r = app->routes; r; r = r->next)
        need += app->nworkers + r->conf.max_sessions * route_fds_per_session(r);
    for (struct sg_route *r = app->routes; r; r = r->next)
        atomic_store_explicit(&r->share->fd_cap, 0, memory_order_relaxed);
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return;
    if (rl.rlim_cur != RLIM_INFINITY && (int64_t)rl.rlim_cur < need) {
        struct rlimit want = rl;
        bool enough = rl.rlim_max == RLIM_INFINITY || (int64_t)rl.rlim_max >= need;
        want.rlim_cur = enough ? (rlim_t)need : rl.rlim_max;
        if (want.rlim_cur > rl.rlim_cur && setrlimit(RLIMIT_NOFILE, &want) == 0) {
            sg_log(&app->log, SG_LOG_INFO, NULL, 0,
                   "open files limit raised from %llu to %llu for the routes' max_sessions",
                   (unsigned long long)rl.rlim_cur, (unsigned long long)want.rlim_cur);
            rl = want;
        }
    }
    if (rl.rlim_cur == RLIM_INFINITY)
        return;

    /* What is left after the reserve goes to the routes in order. */
    room = (int64_t)rl.rlim_cur - fd_reserve(app);
    for (struct sg_route *r = app->routes; r; r = r->next) {
        int64_t per = route_fds_per_session(r);
        int64_t fit = room > app->nworkers ? (room - app->nworkers) / per : 0;
        room -= app->nworkers + r->conf.max_sessions * per;
        if (fit >= r->conf.max_sessions) {
            r->nofile_warned_for = 0;
            continue;
        }
        if (fit < 1)
            fit = 1;
        atomic_store_explicit(&r->share->fd_cap, fit, memory_order_relaxed);
        if (r->nofile_warned_for == r->conf.max_sessions)
            continue;
        r->nofile_warned_for = r->conf.max_sessions;
        sg_log(&app->log, SG_LOG_WARN, r->conf.name, 0,
               "max_sessions %lld cannot be reached: the open files limit (RLIMIT_NOFILE %llu, "
               "hard limit %llu) leaves room for about %lld sessions on this route; the session "
               "table is full at %lld (a newcomer then ends the oldest session not yet "
               "established, as at max_sessions); raise the limit (ulimit -n, systemd "
               "LimitNOFILE=) or lower max_sessions",
               (long long)r->conf.max_sessions, (unsigned long long)rl.rlim_cur,
               (unsigned long long)rl.rlim_max, (long long)fit, (long long)fit);
    }
}

/* ---- shutdown ---- */

static void stop_phase_set(int phase);
static long long sessions_now(const struct sg_app *app);

static void stop(struct sg_app *app, const char *why)
{
    if (app->stopping)
        return;
    app->stopping = true;
    app->ready = false;
    if (app->drain_timer_open)
        uv_close((uv_handle_t *)&app->drain_timer, NULL);
    app->drain_timer_open = false;
    if (app->worker == 0) {
        stop_phase_set(2); /* a stop signal from now on ends the process at once */
        sg_log(&app->log, SG_LOG_INFO, NULL, 0, "%s: shutting down", why);
        sg_notify_send(&app->notify, "STOPPING=1\nSTATUS=%s: shutting down", why);
    }
    for (struct sg_route *r = app->routes; r; r = r->next)
        sg_route_close(r, "shutdown");
    if (app->worker > 0) {
        /* A worker loop ends once its routes have closed. */
        if (app->wake_open)
            uv_close((uv_handle_t *)&app->wake, NULL);
        app->wake_open = false;
        if (run_of(app)->stats_timer_open)
            uv_timer_stop(&run_of(app)->stats_timer);
        return;
    }
    for (int i = 1; i <= app->nstarted; i++) {
        atomic_store(&app->workers[i]->want_stop, true);
        uv_async_send(&app->workers[i]->wake);
    }
    sg_http_stop(app->http);
    app->http = NULL;
    /* The stop handler stays armed for a second, forceful stop. */
    uv_unref((uv_handle_t *)&app->stop_async);
    uv_unref((uv_handle_t *)&app->sig_hup);
    if (run_of(app)->stats_timer_open)
        uv_timer_stop(&run_of(app)->stats_timer);
}

static void append_route(struct sg_route **list, struct sg_route *r);

/* ---- retired routes ---- */

/*
 * A route removed by a reload, or one that failed to start, is closed and
 * put on app->retired until the close callbacks of its handles and of its
 * sessions' sockets have run; then sg_app__route_closed keeps a summary of
 * it (the last SG_APP_RETIRED_KEEP, older ones only counted) and frees it.
 * So a reload that keeps failing costs no memory.
 */
static void retire(struct sg_app *app, struct sg_route *r, const char *why)
{
    sg_route_close(r, why);
    r->retired = true;
    r->retired_reason = why;
    r->retired_ms = sg_now_wall_ms();
    append_route(&app->retired, r);
    if (r->open_handles == 0)
        sg_app__route_closed(app, r); /* nothing left to wait for */
}

/* The owner hooks of this loop's routes. */
static void route_closed(void *data, struct sg_route *r)
{
    sg_app__route_closed(data, r);
}

static int route_take_listener(void *data, const char *name)
{
    return sg_app_take_listener(data, name);
}

static int route_create(struct sg_app *app, const struct sg_route_conf *rc, struct sg_route **out)
{
    const struct sg_route_owner owner = {.ctx = &app->ctx,
                                         .data = app,
                                         .take_listener = route_take_listener,
                                         .closed = route_closed};

    return sg_route_create(&owner, rc, out);
}

/* What the loop's routes and sessions see of `app`; `main` is worker 0's
 * (`app` itself for worker 0).  After worker and nworkers are set. */
static void app_ctx_init(struct sg_app *app, struct sg_app *main)
{
    app->ctx = (struct sg_ctx){.loop = &app->loop,
                               .log = &app->log,
                               .worker = app->worker,
                               .nworkers = app->nworkers,
                               .next_session_id = &app->next_session_id,
                               .stopping = &app->stopping,
                               .draining = &main->draining,
                               .routes = &app->routes,
                               .shares = &main->shares,
                               .own = &main->own,
                               .taps = &app->taps};
}

/* What stats, metrics and the HTTP API read of every loop (proxy/stats.h):
 * read with the other loops paused or joined. */
static void stats_view(struct sg_app *app, struct sg_stats_view *v)
{
    memset(v, 0, sizeof(*v));
    v->log = &app->log;
    v->started_wall_ms = app->started_wall_ms;
    v->nworkers = app->nworkers;
    v->reload_ok = app->reload_ok;
    v->reload_ok_ms = app->reload_ok_ms;
    v->reloads_applied = app->reloads_applied;
    v->reloads_refused = app->reloads_refused;
    v->draining = atomic_load(&app->draining);
    for (int k = 0; k < app->nworkers && k < SG_CONF_MAX_WORKERS; k++) {
        const struct sg_app *w = k == 0 ? app : app->workers ? app->workers[k] : NULL;
        struct sg_stats_loop *l = &v->loop[k];

        if (!w)
            continue;
        l->present = true;
        l->routes = w->routes;
        l->retired = w->retired;
        l->retired_log = w->retired_log;
        l->nretired_log = w->nretired_log;
        l->turns = w->turns;
        l->turn_max_ns = w->turn_max_ns;
        l->turns_over_1ms = w->turns_over_1ms;
        l->turn_hist = &w->turn_hist;
    }
}

/* The HTTP server's owner hooks. */
static void http_view(void *data, struct sg_stats_view *out)
{
    stats_view(data, out);
}

static bool http_pause(void *data)
{
    return sg_app_workers_pause(data);
}

static void http_resume(void *data)
{
    sg_app_workers_resume(data);
}

/* /live: every loop's heartbeat is recent.  /ready: serving, every route
 * bound, not draining. */
static unsigned http_health(void *data, bool ready, char *buf, size_t len)
{
    struct sg_app *app = data;
    uint64_t now = uv_hrtime();

    if (!ready) {
        for (int k = 0; k < app->nworkers; k++) {
            const struct sg_app *w =
                k == 0 ? app : app->workers && k <= app->nstarted ? app->workers[k] : NULL;
            uint64_t beat = w ? atomic_load_explicit(&w->beat_ns, memory_order_relaxed) : now;

            if (now > beat && now - beat > (uint64_t)SG_APP_LIVE_STALE_MS * 1000000u) {
                snprintf(buf, len, "not live: worker loop %d has not turned for %llu ms", k,
                         (unsigned long long)((now - beat) / 1000000u));
                return 503;
            }
        }
        snprintf(buf, len, "live");
        return 200;
    }
    if (app->stopping) {
        snprintf(buf, len, "not ready: stopping");
        return 503;
    }
    if (atomic_load(&app->draining)) {
        long long n = sessions_now(app);
        snprintf(buf, len, "not ready: draining, %lld session%s left", n, n == 1 ? "" : "s");
        return 503;
    }
    if (!app->ready) {
        snprintf(buf, len, "not ready: starting");
        return 503;
    }
    /* readiness probe: worker 0's routes (this loop's) hold the answers */
    for (const struct sg_route *r = app->routes; r; r = r->next) {
        char why[300];
        if (!sg_route_probe_ready(r, why, sizeof(why))) {
            snprintf(buf, len, "not ready: %s", why);
            return 503;
        }
    }
    snprintf(buf, len, "ready");
    return 200;
}

/* The --stats file at exit (the other loops joined). */
static int write_stats(struct sg_app *app, const char *path)
{
    struct sg_stats_view v;

    stats_view(app, &v);
    return sg_stats_write(&v, path);
}

/* The live stream (proxy/http.c) sees this loop's frames while app->http is set. */
static void http_tap_add(struct sg_app *app)
{
    app->http_tap = (struct sg_frame_tap){.frame = sg_http_tap, .data = &app->http};
    sg_frame_tap_add(&app->taps, &app->http_tap);
}

void sg_app__route_closed(struct sg_app *app, struct sg_route *r)
{
    struct sg_route **pp;

    if (!r->retired)
        return; /* a serving route closed at shutdown: --stats reads it at exit */
    for (pp = &app->retired; *pp && *pp != r; pp = &(*pp)->next)
        ;
    if (*pp)
        *pp = r->next;
    if (!app->retired_log)
        app->retired_log = calloc(SG_APP_RETIRED_KEEP, sizeof(*app->retired_log));
    if (app->retired_log)
        sg_route_summarize(r, &app->retired_log[app->nretired_log % SG_APP_RETIRED_KEEP]);
    app->nretired_log++; /* without the ring, it counts as omitted */
    sg_app_conf_lock(app);
    sg_route_destroy(r);
    sg_app_conf_unlock(app);
}

/* ---- reload ---- */

static bool str_same(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* Apply `conf` to this loop's routes: update, retire the removed, start the new. */
static void apply_routes(struct sg_app *app, struct sg_conf *conf)
{
    struct sg_route **pp, *r, *created;

    /* Routes that went away close; the others take the new settings. */
    for (pp = &app->routes; (r = *pp);) {
        struct sg_route_conf *rc = sg_conf_route(conf, r->conf.name);
        if (rc) {
            sg_route_update(r, rc);
            pp = &r->next;
            continue;
        }
        sg_log(&app->log, app->worker ? SG_LOG_DEBUG : SG_LOG_INFO, r->conf.name, 0,
               "route removed by reload");
        *pp = r->next;
        retire(app, r, "route removed");
    }

    /* New routes start. */
    for (struct sg_route_conf *rc = conf->routes; rc; rc = rc->next) {
        bool known = false;
        for (r = app->routes; r; r = r->next)
            known = known || strcmp(r->conf.name, rc->name) == 0;
        if (known)
            continue;
        if (route_create(app, rc, &created) < 0) {
            if (created)
                retire(app, created, "startup failed");
            continue;
        }
        append_route(&app->routes, created);
    }
}

/* A worker loop's share of a reload (its wake-up); worker 0 waits for it. */
static void worker_apply(struct sg_app *app, struct sg_conf *conf)
{
    sg_app_conf_lock(app);
    app->log.level = conf->log_level;
    apply_routes(app, conf);
    app->conf = conf; /* worker 0's, read-only; it outlives this loop's use */
    sg_app_conf_unlock(app);
    stats_timer_start(app);
}

static void prebind(struct sg_app *app, const struct sg_conf *conf);
static void prebound_clear(struct sg_app *app);

/*
 * `ports_file`: one line per open route, "NAME ADDR:PORT", then "http
 * ADDR:PORT" when the web page is on, with the ports the kernel gave for
 * port 0.  Written to a temporary file and renamed over the old one, so a
 * reader sees the old list or the new one, whole.
 */
static void write_ports_file(struct sg_app *app)
{
    const char *path = app->conf->ports_file;
    char tmp[4096], a[SG_ADDR_STRLEN];
    FILE *f;
    int bad;

    if (!path)
        return;
    snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
    if (!(f = fopen(tmp, "w"))) {
        sg_log(&app->log, SG_LOG_ERROR, NULL, 0, "ports_file %s: %s", tmp, strerror(errno));
        return;
    }
    for (const struct sg_route *r = app->routes; r; r = r->next)
        if (!r->closing)
            fprintf(f, "%s %s\n", r->conf.name,
                    sg_addr_format((const struct sockaddr *)&r->listen_addr, a, sizeof(a)));
    if (app->http)
        fprintf(f, "http %s\n", sg_addr_format(sg_http_address(app->http), a, sizeof(a)));
    bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) < 0) {
        sg_log(&app->log, SG_LOG_ERROR, NULL, 0, "ports_file %s: %s", path,
               strerror(errno ? errno : EIO));
        unlink(tmp);
    }
}

/* 0, or -EINVAL when the file is refused (the old configuration stays;
 * app->reload_error says why). */
static int reload(struct sg_app *app)
{
    struct sg_conf_diag diag;
    struct sg_conf *conf;

    /* Read everything again; a bad file changes nothing. */
    sg_conf_diag_init(&diag);
    if (sg_conf_load(app->config_path, app->ov, &conf, &diag) < 0) {
        for (int i = 0; i < diag.count && i < SG_CONF_MAX_DIAGS; i++)
            sg_log(&app->log, SG_LOG_ERROR, NULL, 0, "reload: %s", diag.msgs[i]);
        sg_log(&app->log, SG_LOG_ERROR, NULL, 0, "reload failed; the old configuration stays");
        snprintf(app->reload_error, sizeof(app->reload_error), "%s",
                 diag.count > 0 ? diag.msgs[0] : "out of memory");
        return -EINVAL;
    }
    app->log.level = conf->log_level;
    if ((conf->stats_file == NULL) != (app->conf->stats_file == NULL) ||
        (conf->stats_file && strcmp(conf->stats_file, app->conf->stats_file) != 0))
        sg_log(&app->log, SG_LOG_WARN, NULL, 0,
               "stats_file changed: restart slipgate to apply it (the stats go to %s)",
               app->stats_path ? app->stats_path : "no file");

    if (!str_same(conf->http, app->conf->http) ||
        !str_same(conf->http_token, app->conf->http_token) ||
        conf->http_idle_timeout_ms != app->conf->http_idle_timeout_ms)
        sg_log(&app->log, SG_LOG_WARN, NULL, 0,
               "http, http_token or http_idle_timeout changed: restart slipgate to apply it");
    if (conf->workers != app->conf->workers)
        sg_log(&app->log, SG_LOG_WARN, NULL, 0,
               "workers changed: restart slipgate to apply it (%d worker loops run)",
               app->nworkers);

    /* The worker threads first (each in its own loop; they wait for nothing),
     * then this loop; the old configuration goes once none uses it. */
    prebind(app, conf);
    for (int i = 1; i < app->nworkers; i++) {
        atomic_store(&app->workers[i]->want_conf, conf);
        uv_async_send(&app->workers[i]->wake);
    }
    for (int i = 1; i < app->nworkers; i++)
        uv_sem_wait(&app->done);
    sg_app_conf_lock(app);
    apply_routes(app, conf);
    prebound_clear(app);
    sg_conf_destroy(app->conf);
    app->conf = conf;
    sg_app_conf_unlock(app);
    fit_open_files(app);
    stats_timer_start(app);
    write_ports_file(app);
    {
        /* A part a route could not apply (told above) is said, not "reloaded". */
        char kept[512] = "";
        size_t n = 0;
        for (const struct sg_route *r = app->routes; r; r = r->next)
            if (r->reload_kept[0] && n < sizeof(kept))
                n += (size_t)snprintf(kept + n, sizeof(kept) - n, "%s[%s] kept the old %s",
                                      n ? "; " : "", r->conf.name, r->reload_kept);
        if (kept[0])
            sg_log(&app->log, SG_LOG_WARN, NULL, 0,
                   "configuration reloaded in part (see the errors above): %s", kept);
        else
            sg_log(&app->log, SG_LOG_INFO, NULL, 0, "configuration reloaded");
    }
    app->reload_error[0] = '\0';
    return 0;
}

/* ---- signals ---- */

/*
 * SIGINT and SIGTERM get a plain handler rather than a uv_signal_t: the
 * last one must end the process even when the loop is stuck (a blocked
 * log write, say), so it cannot wait for the loop.  The handler only
 * touches async-signal-safe things: the phase, uv_async_send and _exit.
 * This is the one piece of process-wide state, as signal dispositions are.
 *
 * The phases: 0 serving; 1 draining (SIGTERM with a drain_timeout: no new
 * session, the others go on); 2 stopping (every session ends now, the
 * recordings are closed).  SIGTERM moves 0 to 1 when `drain_on_term`, else
 * to 2; SIGINT moves 0 to 2; any stop signal moves 1 to 2; in phase 2 a
 * stop signal ends the process at once (exit status 128 + the signal).
 */
static volatile sig_atomic_t stop_phase;
static volatile sig_atomic_t drain_on_term; /* drain_timeout > 0 */
static volatile sig_atomic_t last_stop_signal;
static uv_async_t *volatile stop_async;

static void stop_phase_set(int phase)
{
    if (stop_phase < phase)
        stop_phase = phase;
}

static void on_stop_signal(int signum)
{
    last_stop_signal = signum;
    /* No message: stderr may be the very thing that is blocked. */
    if (stop_phase >= 2)
        _exit(128 + signum);
    stop_phase = stop_phase == 0 && signum == SIGTERM && drain_on_term ? 1 : 2;
    if (stop_async)
        uv_async_send(stop_async);
}

/* Every loop's sessions (the shares count them all). */
static long long sessions_now(const struct sg_app *app)
{
    long long n = 0;

    for (const struct sg_route_share *sh = app->shares; sh; sh = sh->next)
        n += atomic_load_explicit(&sh->nsessions, memory_order_relaxed);
    return n;
}

/* While draining: stop once no session is left, or at drain_timeout. */
static void on_drain_timer(uv_timer_t *t)
{
    struct sg_app *app = t->data;
    long long n = sessions_now(app);
    char why[120];

    if (n == 0) {
        stop(app, "drained (no session left)");
    } else if (uv_hrtime() >= app->drain_deadline_ns) {
        snprintf(why, sizeof(why), "drain_timeout passed, %lld session%s left", n,
                 n == 1 ? "" : "s");
        stop(app, why);
    }
}

/* SIGTERM with a drain_timeout: no new session, /ready says no, the
 * sessions there go on until they end or the timeout passes. */
static void drain_start(struct sg_app *app, const char *why)
{
    long long n = sessions_now(app);

    atomic_store(&app->draining, true);
    app->ready = false;
    sg_log(&app->log, SG_LOG_INFO, NULL, 0,
           "%s: draining: no new session; %lld session%s go%s on until %s or drain_timeout "
           "(%lld ms) passes; SIGTERM or SIGINT again ends %s now",
           why, n, n == 1 ? "" : "s", n == 1 ? "es" : "", n == 1 ? "it ends" : "they end",
           (long long)app->conf->drain_timeout_ms, n == 1 ? "it" : "them");
    sg_notify_send(&app->notify, "STOPPING=1\nSTATUS=%s: draining, %lld session%s left", why, n,
                   n == 1 ? "" : "s");
    app->drain_deadline_ns = uv_hrtime() + (uint64_t)app->conf->drain_timeout_ms * 1000000u;
    if (uv_timer_init(&app->loop, &app->drain_timer) < 0) {
        stop(app, why);
        return;
    }
    app->drain_timer.data = app;
    app->drain_timer_open = true;
    uv_timer_start(&app->drain_timer, on_drain_timer, 0, SG_APP_DRAIN_CHECK_MS);
}

static void on_stop_async(uv_async_t *h)
{
    struct sg_app *app = h->data;
    const char *why = strsignal(last_stop_signal ? last_stop_signal : SIGTERM);

    if (app->stopping)
        return;
    if (stop_phase == 1 && !atomic_load(&app->draining))
        drain_start(app, why);
    else if (stop_phase >= 2)
        stop(app, why);
}

static void on_hup(uv_signal_t *h, int signum)
{
    struct sg_app *app = h->data;

    if (app->stopping)
        return;
    if (atomic_load(&app->draining)) {
        sg_log(&app->log, SG_LOG_WARN, NULL, 0, "SIGHUP while draining: nothing reloaded");
        return;
    }
    if (!app->config_path) {
        sg_log(&app->log, SG_LOG_WARN, NULL, 0, "SIGHUP: no config file to reload");
        /* Two datagrams: the manager reads RELOADING=1 and READY=1 in one as either. */
        sg_notify_reloading(&app->notify, "STATUS=SIGHUP: no config file to reload");
        sg_notify_outcome(&app->notify, "refused", "no config file to reload");
        sg_notify_send(&app->notify, "READY=1\nERRNO=%d", ENOENT);
        return;
    }
    sg_log(&app->log, SG_LOG_INFO, NULL, 0, "SIGHUP: reloading %s", app->config_path);
    sg_notify_reloading(&app->notify, "STATUS=reloading %s", app->config_path);
    if (reload(app) < 0) {
        app->reload_ok = false;
        app->reloads_refused++;
        /* Ready again, on the old configuration; the status line and the
         * errno say the reload was refused (systemctl status shows them). */
        sg_notify_outcome(&app->notify, "refused", app->reload_error);
        sg_notify_send(&app->notify, "READY=1\nSTATUS=reload refused, the old configuration "
                                     "stays: %s\nERRNO=%d",
                       app->reload_error, EINVAL);
        app->notify.last_status[0] = '\0';
    } else {
        app->reload_ok = true;
        app->reload_ok_ms = sg_now_wall_ms();
        drain_on_term = app->conf->drain_timeout_ms > 0;
        app->reloads_applied++;
        sg_notify_outcome(&app->notify, "applied", NULL);
        sg_notify_send(&app->notify, "READY=1");
        app->notify.last_status[0] = '\0';
        sg_notify_status(&app->notify);
    }
}

/* The service manager's status line: what serves, and a refused reload. */
static void notify_status(void *ctx, char *buf, size_t len)
{
    struct sg_app *app = ctx;
    long long sessions = 0;
    int routes = 0, k;

    for (struct sg_route *r = app->routes; r; r = r->next) {
        routes++;
        sessions += atomic_load_explicit(&r->share->nsessions, memory_order_relaxed);
    }
    k = snprintf(buf, len, "%d route%s, %lld session%s", routes, routes == 1 ? "" : "s", sessions,
                 sessions == 1 ? "" : "s");
    if (app->reload_error[0] && k > 0 && (size_t)k < len)
        snprintf(buf + k, len - (size_t)k, "; last reload refused: %s", app->reload_error);
}

static int start_signals(struct sg_app *app)
{
    struct sigaction sa;
    int err;

    /* SIGHUP through the loop. */
    err = uv_signal_init(&app->loop, &app->sig_hup);
    if (err < 0)
        return err;
    app->sig_hup.data = app;
    err = uv_signal_start(&app->sig_hup, on_hup, SIGHUP);
    if (err < 0)
        return err;

    /* SIGINT / SIGTERM through the plain handler and an async wake-up. */
    err = uv_async_init(&app->loop, &app->stop_async, on_stop_async);
    if (err < 0)
        return err;
    app->stop_async.data = app;
    stop_async = &app->stop_async;
    drain_on_term = app->conf->drain_timeout_ms > 0;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0)
        return -errno;
    return 0;
}

static void stop_signals_off(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    stop_async = NULL;
}

/* ---- worker loops ---- */

void sg_app_conf_lock(struct sg_app *app)
{
    if (app->nworkers > 1 && app->lock_depth++ == 0)
        uv_mutex_lock(&app->main_app->conf_lock);
}

void sg_app_conf_unlock(struct sg_app *app)
{
    if (app->nworkers > 1 && --app->lock_depth == 0)
        uv_mutex_unlock(&app->main_app->conf_lock);
}

/*
 * Each client address on one loop whatever its port (sg_udp_steer_by_source):
 * a client behind a NAT that rebinds, and all the sessions of one host
 * (new_sessions_per_source), stay on the loop that knows them.  Where the
 * kernel refuses the program, it keeps hashing address and port: said once.
 */
static void steer(struct sg_app *app, const char *route, int err)
{
    if (err >= 0 || app->steer_warned)
        return;
    app->steer_warned = true;
    sg_log(&app->log, SG_LOG_WARN, route, 0,
           "cannot keep each client address on one worker loop (SO_ATTACH_REUSEPORT_CBPF: %s): "
           "the kernel spreads clients by address and port, so a client whose port changes "
           "(NAT rebinding) may reach a loop that does not know its session, and "
           "new_sessions_per_source applies per loop",
           strerror(-err));
}

/*
 * SO_REUSEPORT remaps clients whenever a socket joins the group: the
 * listening sockets of every loop for the routes about to start (all of
 * them at start, the new ones at a reload) are bound here, one after the
 * other, before any loop starts its routes; each loop's route takes its
 * own (sg_app_take_listener).  A route whose address cannot be bound here
 * binds (and fails) on its own.
 */
static void prebind(struct sg_app *app, const struct sg_conf *conf)
{
    int n = 0;

    for (const struct sg_route_conf *rc = conf->routes; rc; rc = rc->next)
        n++;
    if (app->nworkers < 2 || n == 0 || !(app->prebound = calloc((size_t)n, sizeof(*app->prebound))))
        return;
    for (const struct sg_route_conf *rc = conf->routes; rc; rc = rc->next) {
        struct sg_app_prebound *p = &app->prebound[app->nprebound];
        struct sockaddr_storage addr, want;
        char why[256];
        bool known = false, kernel;
        int busy;

        for (const struct sg_route *r = app->routes; r; r = r->next)
            known = known || strcmp(r->conf.name, rc->name) == 0;
        if (known || sg_addr_resolve(&app->loop, rc->listen, true, &addr, why, sizeof(why)) < 0)
            continue;
        snprintf(p->name, sizeof(p->name), "%s", rc->name);
        app->nprebound++;
        /* SO_REUSEPORT would let the loops join another process's sockets on
         * the address (another slipgate with worker loops): a plain bind
         * first says whether anyone has it, as with one loop.  Port 0: that
         * plain bind is where the kernel gives the port (sg_udp_pick_port),
         * and the loops' sockets are bound on it; one taken by someone in
         * between is asked for again, a few times. */
        kernel = sg_addr_port((struct sockaddr *)&addr) == 0;
        want = addr;
        busy = kernel ? sg_udp_pick_port((struct sockaddr *)&addr)
                      : sg_udp_bind_probe((struct sockaddr *)&addr);
        if (busy < 0) {
            for (int w = 0; w < app->nworkers; w++)
                p->fd[w] = busy; /* the route fails with it (sg_app_take_listener) */
            continue;
        }
        p->fd[0] = sg_udp_bind_shared((struct sockaddr *)&addr);
        for (int tries = 1; kernel && p->fd[0] == -EADDRINUSE && tries < 8; tries++) {
            addr = want;
            busy = sg_udp_pick_port((struct sockaddr *)&addr);
            p->fd[0] = busy < 0 ? busy : sg_udp_bind_shared((struct sockaddr *)&addr);
        }
        for (int w = 1; w < app->nworkers; w++)
            p->fd[w] = p->fd[0] >= 0 ? sg_udp_bind_shared((struct sockaddr *)&addr) : p->fd[0];
        steer(app, rc->name,
              p->fd[0] >= 0 ? sg_udp_steer_by_source(p->fd[0], (unsigned)app->nworkers) : p->fd[0]);
    }
}

/* What no route took (it failed, or was not started) is closed. */
static void prebound_clear(struct sg_app *app)
{
    for (int i = 0; i < app->nprebound; i++)
        for (int w = 0; w < app->nworkers; w++)
            if (app->prebound[i].fd[w] >= 0)
                close(app->prebound[i].fd[w]);
    free(app->prebound);
    app->prebound = NULL;
    app->nprebound = 0;
}

int sg_app_take_listener(struct sg_app *app, const char *name)
{
    struct sg_app *m = app->main_app;
    int fd;

    for (int i = 0; m && i < m->nprebound; i++) {
        if (strcmp(m->prebound[i].name, name) != 0)
            continue;
        fd = m->prebound[i].fd[app->worker];
        if (fd >= 0)
            m->prebound[i].fd[app->worker] = -1;
        return fd;
    }
    return -1;
}

bool sg_app_workers_pause(struct sg_app *app)
{
    if (app->nworkers < 2)
        return true; /* nothing else runs */
    if (app->worker != 0 || app->stopping || !app->workers || app->nstarted != app->nworkers - 1)
        return false;
    for (int i = 1; i < app->nworkers; i++) {
        atomic_store(&app->workers[i]->want_pause, true);
        uv_async_send(&app->workers[i]->wake);
    }
    for (int i = 1; i < app->nworkers; i++)
        uv_sem_wait(&app->done);
    return true;
}

void sg_app_workers_resume(struct sg_app *app)
{
    for (int i = 1; i < app->nworkers; i++)
        uv_sem_post(&app->resume);
}

/* `workers N`, -w N, else SLIPGATE_WORKERS, else the CPUs (at most
 * SG_WORKERS_DEFAULT_MAX); 0 when the environment's is bad.  `*chosen`:
 * the number was asked for. */
static int workers_wanted(const struct sg_conf *conf, bool *chosen)
{
    const char *env = getenv("SLIPGATE_WORKERS");
    unsigned cpus;
    char *end;
    long n;

    *chosen = true;
    if (conf->workers > 0)
        return (int)conf->workers;
    if (!env || !*env) {
        *chosen = false;
        cpus = uv_available_parallelism();
        return cpus < 1 ? 1 : cpus > SG_WORKERS_DEFAULT_MAX ? SG_WORKERS_DEFAULT_MAX : (int)cpus;
    }
    n = strtol(env, &end, 10);
    if (*end != '\0' || n < 1 || n > SG_CONF_MAX_WORKERS) {
        fprintf(stderr, "%sslipgate: SLIPGATE_WORKERS: a number from 1 to %d, got '%s'\n",
                err_prefix(), SG_CONF_MAX_WORKERS, env);
        return 0;
    }
    return (int)n;
}

static void stop(struct sg_app *app, const char *why);

/* Worker 0 asks for a reload or a stop. */
static void on_wake(uv_async_t *h)
{
    struct sg_app *app = h->data;
    struct sg_conf *conf = atomic_exchange(&app->want_conf, NULL);

    if (conf) {
        if (!app->stopping)
            worker_apply(app, conf);
        uv_sem_post(&app->main_app->done);
    }
    if (atomic_exchange(&app->want_pause, false)) {
        /* Worker 0 reads this loop's routes until it lets go. */
        uv_sem_post(&app->main_app->done);
        uv_sem_wait(&app->main_app->resume);
    }
    if (atomic_load(&app->want_stop))
        stop(app, NULL);
}

static void close_walk(uv_handle_t *h, void *arg);
static int start_routes(struct sg_app *app);

static void worker_thread(void *arg)
{
    struct sg_app *app = arg;

    app->start_err = start_routes(app);
    if (app->start_err == 0)
        stats_timer_start(app);
    uv_sem_post(&app->main_app->done);
    uv_run(&app->loop, UV_RUN_DEFAULT);
    uv_walk(&app->loop, close_walk, NULL);
    uv_run(&app->loop, UV_RUN_DEFAULT);
}

/* Start workers 1..N-1, each with its routes open, before worker 0 opens its
 * own (whose "listening on" lines then say every socket is in place). */
static int workers_start(struct sg_app *app)
{
    int started = 0, err = 0;

    if (uv_sem_init(&app->done, 0) < 0 || uv_sem_init(&app->resume, 0) < 0 ||
        uv_mutex_init(&app->conf_lock) < 0 ||
        !(app->workers = calloc((size_t)app->nworkers, sizeof(*app->workers))))
        return UV_ENOMEM;
    for (int i = 1; i < app->nworkers; i++) {
        struct app_run *run = calloc(1, sizeof(*run));
        struct sg_app *w = run ? &run->app : NULL;

        if (!w || uv_loop_init(&w->loop) < 0) {
            free(run);
            err = UV_ENOMEM;
            break;
        }
        app->workers[i] = w;
        w->log = app->log;
        w->log.restore_flags = -1;
        w->log.dropped = 0;
        w->conf = app->conf;
        w->config_path = app->config_path;
        w->ov = app->ov;
        w->started_wall_ms = app->started_wall_ms;
        w->started_loop_ms = uv_now(&w->loop);
        w->worker = i;
        w->nworkers = app->nworkers;
        w->main_app = app;
        w->http = app->http; /* its sessions' frames go to the stream (http.c) */
        if (w->http)
            http_tap_add(w);
        w->next_session_id = (uint64_t)i + 1 - (uint64_t)app->nworkers;
        app_ctx_init(w, app);
        uv_loop_configure(&w->loop, UV_METRICS_IDLE_TIME);
        turns_start(w);
        if (uv_async_init(&w->loop, &w->wake, on_wake) < 0) {
            err = UV_ENOMEM;
            break;
        }
        w->wake.data = w;
        w->wake_open = true;
        if ((err = uv_thread_create(&w->thread, worker_thread, w)) < 0) {
            uv_close((uv_handle_t *)&w->wake, NULL);
            w->wake_open = false;
            break;
        }
        started++;
    }
    for (int i = 0; i < started; i++)
        uv_sem_wait(&app->done);
    for (int i = 1; i <= started; i++)
        if (app->workers[i]->start_err < 0)
            err = app->workers[i]->start_err;
    app->nstarted = started;
    return err;
}

/* After worker 0's loop ended (it told them to stop): join the threads. */
static void workers_join(struct sg_app *app)
{
    for (int i = 1; i <= app->nstarted; i++)
        uv_thread_join(&app->workers[i]->thread);
}

static void free_routes(struct sg_route *r);

static int workers_free(struct sg_app *app)
{
    int status = 0;

    for (int i = 1; app->workers && i < app->nworkers; i++) {
        struct sg_app *w = app->workers[i];

        if (!w)
            continue;
        if (i > app->nstarted) /* never ran: close what was opened on its loop */
            uv_walk(&w->loop, close_walk, NULL), uv_run(&w->loop, UV_RUN_DEFAULT);
        if (uv_loop_close(&w->loop) != 0) {
            sg_log(&app->log, SG_LOG_ERROR, NULL, 0,
                   "internal error: handles left open at exit (worker %d)", i);
            status = 1;
        }
        free_routes(w->routes);
        free_routes(w->retired);
        free(w->retired_log);
        free(run_of(w));
    }
    free(app->workers);
    app->workers = NULL;
    if (app->nworkers > 1) {
        uv_sem_destroy(&app->done);
        uv_sem_destroy(&app->resume);
        uv_mutex_destroy(&app->conf_lock);
    }
    return status;
}

/* ---- the whole run ---- */

static void close_walk(uv_handle_t *h, void *arg)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void free_routes(struct sg_route *r)
{
    while (r) {
        struct sg_route *next = r->next;
        sg_route_destroy(r);
        r = next;
    }
}

static void append_route(struct sg_route **list, struct sg_route *r)
{
    while (*list)
        list = &(*list)->next;
    r->next = NULL;
    *list = r;
}

static int start_routes(struct sg_app *app)
{
    struct sg_route *r;
    int failed = 0;

    sg_app_conf_lock(app);
    for (struct sg_route_conf *rc = app->conf->routes; rc; rc = rc->next) {
        int err = route_create(app, rc, &r);
        if (r && err < 0)
            retire(app, r, "startup failed");
        else if (r)
            append_route(&app->routes, r);
        if (err < 0)
            failed++;
    }
    sg_app_conf_unlock(app);
    return failed ? -1 : 0;
}

/* The start's own checks: only what fails is told (FILE:LINE: error: ...). */
static void start_said(void *ctx, enum sg_preflight_verdict v, const char *file, int line,
                       int col, const char *text)
{
    (void)ctx;
    if (v != SG_PREFLIGHT_FAIL)
        return;
    if (line && col)
        fprintf(stderr, "%sslipgate: %s:%d:%d: error: %s\n", err_prefix(), file, line, col, text);
    else if (line)
        fprintf(stderr, "%sslipgate: %s:%d: error: %s\n", err_prefix(), file, line, text);
    else
        fprintf(stderr, "%sslipgate: %s: error: %s\n", err_prefix(), file, text);
}

/* READY=1 with the status line, then the watchdog and the status refresh. */
static void notify_ready(struct sg_app *app)
{
    char line[sizeof(app->notify.last_status)];
    int err;

    if ((err = sg_notify_outcome(&app->notify, "started", NULL)) < 0)
        sg_log(&app->log, SG_LOG_WARN, NULL, 0, "cannot write %s: %s", app->notify.outcome_path,
               strerror(-err));
    if (!sg_notify_active(&app->notify))
        return;
    notify_status(app, line, sizeof(line));
    if ((err = sg_notify_send(&app->notify, "READY=1\nSTATUS=%s\nMAINPID=%d", line,
                              (int)getpid())) < 0)
        sg_log(&app->log, SG_LOG_WARN, NULL, 0, "cannot tell the service manager (READY=1): %s",
               strerror(-err));
    else
        memcpy(app->notify.last_status, line, sizeof(line));
    if ((err = sg_notify_timer_start(&app->notify, &app->loop, notify_status, app)) < 0)
        sg_log(&app->log, SG_LOG_WARN, NULL, 0, "no watchdog pings: %s", uv_strerror(err));
    else if (app->notify.watchdog_usec)
        sg_log(&app->log, SG_LOG_DEBUG, NULL, 0, "watchdog: WATCHDOG=1 every %llu ms",
               (unsigned long long)(app->notify.watchdog_usec / 2000));
}

int sg_app_run(const char *config_path, const struct sg_conf_overrides *ov, const char *stats_path)
{
    struct app_run run;
    struct sg_conf_diag diag;
    int status = 0, err;
    bool chosen;
    struct sg_http *http;

    /* Configuration first: a bad one never starts the loop. */
    memset(&run, 0, sizeof(run));
    run.app.log.restore_flags = -1;
    sg_conf_diag_init(&diag);
    if (sg_conf_load(config_path, ov, &run.app.conf, &diag) < 0) {
        for (int i = 0; i < diag.count && i < SG_CONF_MAX_DIAGS; i++)
            fprintf(stderr, "%s%s\n", err_prefix(), diag.msgs[i]);
        return 1;
    }
    sg_log_init(&run.app.log, STDERR_FILENO, run.app.conf->log_level);
    run.app.config_path = config_path;
    run.app.ov = ov;
    run.app.started_wall_ms = sg_now_wall_ms();

    /* The stats file is written at exit: a path that cannot be written fails now,
     * not after the whole run.  Our own copy: a reload replaces the configuration. */
    if (stats_path || run.app.conf->stats_file) {
        char why[512];
        const char *p = stats_path ? stats_path : run.app.conf->stats_file;
        if (sg_stats_check_path(p, why, sizeof(why)) == 0 && !(run.app.stats_path = strdup(p)))
            snprintf(why, sizeof(why), "out of memory");
        if (!run.app.stats_path) {
            fprintf(stderr, "%sslipgate: %s\n", err_prefix(), why);
            sg_conf_destroy(run.app.conf);
            sg_log_finish(&run.app.log);
            return 1;
        }
    }

    /* What a session's first recording needs (recording directories, the
     * textlog/pcap/inspect files, signing keys): a path that cannot work
     * fails now, as --check-config and doctor say (proxy/preflight.h). */
    {
        const struct sg_preflight_opts opts = {.what = SG_PREFLIGHT_FILES};
        if (sg_preflight(run.app.conf, &opts, start_said, NULL) != 0) {
            sg_conf_destroy(run.app.conf);
            sg_log_finish(&run.app.log);
            free(run.app.stats_path);
            return 1;
        }
    }

    /* The loop, the signals, the routes. */
    err = uv_loop_init(&run.app.loop);
    if (err < 0) {
        fprintf(stderr, "%sslipgate: cannot start the event loop: %s\n", err_prefix(),
                uv_strerror(err));
        sg_conf_destroy(run.app.conf);
        sg_log_finish(&run.app.log);
        free(run.app.stats_path);
        return 1;
    }
    run.app.started_loop_ms = uv_now(&run.app.loop);
    run.app.reload_ok = true; /* the start's load counts as the last one (/metrics) */
    run.app.reload_ok_ms = run.app.started_wall_ms;
    {
        char why[200];
        if (sg_notify_init(&run.app.notify, why, sizeof(why)) < 0)
            sg_log(&run.app.log, SG_LOG_WARN, NULL, 0, "no service manager notifications: %s",
                   why);
    }
    sg_codecs_prepare(); /* once, before any loop turn (codec.h) */
    uv_loop_configure(&run.app.loop, UV_METRICS_IDLE_TIME);
    turns_start(&run.app);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN); /* a file-size limit is a write error (EFBIG), not death */
    run.app.main_app = &run.app;
    run.app.own = calloc(1, sizeof(*run.app.own)); /* NULL: no loop check by source port */
    run.app.nworkers = workers_wanted(run.app.conf, &chosen);
    if (run.app.nworkers == 0) {
        run.app.nworkers = 1;
        status = 1;
    }
    run.app.next_session_id = (uint64_t)1 - (uint64_t)run.app.nworkers;
    app_ctx_init(&run.app, &run.app);
    /* The http server first: the worker loops' sessions stream into it. */
    if (status == 0 && run.app.conf->http) {
        const struct sg_http_owner owner = {.ctx = &run.app.ctx,
                                            .idle_timeout_ms = run.app.conf->http_idle_timeout_ms,
                                            .data = &run.app,
                                            .view = http_view,
                                            .pause = http_pause,
                                            .resume = http_resume,
                                            .health = http_health};

        if (sg_http_start(&owner, run.app.conf->http, run.app.conf->http_token, &run.app.http) < 0)
            status = 1;
    }
    if (run.app.http)
        http_tap_add(&run.app);
    http = run.app.nworkers > 1 ? run.app.http : NULL; /* else it frees itself (http.c) */
    if (status == 0 && run.app.nworkers > 1) {
        prebind(&run.app, run.app.conf);
        if (workers_start(&run.app) < 0)
            status = 1;
        else
            sg_log(&run.app.log, SG_LOG_INFO, NULL, 0,
                   "%d worker loops%s, one socket per route each (SO_REUSEPORT)%s",
                   run.app.nworkers, chosen ? "" : " (one per CPU, the default)",
                   run.app.steer_warned ? "" : "; each client address stays on one loop");
    }
    if (status != 0) {
        stop(&run.app, "startup failed");
    } else if (start_signals(&run.app) < 0 || start_routes(&run.app) < 0) {
        status = 1;
        stop(&run.app, "startup failed");
    } else {
        fit_open_files(&run.app);
        write_ports_file(&run.app);
        sg_log(&run.app.log, SG_LOG_INFO, NULL, 0, "slipgate %s running (pid %d)", SG_VERSION,
               (int)getpid());
        stats_timer_start(&run.app);
        /* Every route's listener is bound (each loop's): ready. */
        notify_ready(&run.app);
        run.app.ready = true;
    }
    prebound_clear(&run.app);

    /* Serve until every route has closed (the workers' too). */
    uv_run(&run.app.loop, UV_RUN_DEFAULT);
    workers_join(&run.app);

    /* Close what is left (the signal handles) and account for it. */
    stop_signals_off();
    uv_walk(&run.app.loop, close_walk, NULL);
    uv_run(&run.app.loop, UV_RUN_DEFAULT);
    if (run.app.stats_path && write_stats(&run.app, run.app.stats_path) < 0)
        status = 1;
    if (uv_loop_close(&run.app.loop) != 0) {
        sg_log(&run.app.log, SG_LOG_ERROR, NULL, 0, "internal error: handles left open at exit");
        status = 1;
    }
    if (workers_free(&run.app) != 0)
        status = 1;
    sg_http_free(http); /* with worker loops, kept until no loop runs */
    sg_log(&run.app.log, SG_LOG_INFO, NULL, 0, "stopped");
    sg_notify_finish(&run.app.notify);
    sg_log_finish(&run.app.log);
    free_routes(run.app.routes);
    free_routes(run.app.retired);
    sg_route__shares_free(&run.app.shares);
    free(run.app.own);
    free(run.app.retired_log);
    free(run.app.stats_path);
    sg_conf_destroy(run.app.conf);
    return status;
}
