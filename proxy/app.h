/*
 * The running proxy: one libuv loop, the logger, the configuration, the
 * routes and the signal handlers.  Caller-owned; one per process in
 * practice, but nothing in it is global.
 */
#ifndef SG_PROXY_APP_H
#define SG_PROXY_APP_H

#include "proxy/conf.h"
#include "proxy/ctx.h"
#include "proxy/log.h"
#include "proxy/notify.h"
#include "proxy/route.h"
#include "proxy/stats.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <uv.h>

/* /live: every loop stamps its heartbeat this often, and is live while its
 * last stamp is at most SG_APP_LIVE_STALE_MS old.  A drain checks for its
 * end this often. */
#define SG_APP_BEAT_MS        1000
#define SG_APP_LIVE_STALE_MS  5000
#define SG_APP_DRAIN_CHECK_MS 100

/* How many retired routes --stats lists (the older ones are only counted). */
#define SG_APP_RETIRED_KEEP SG_STATS_RETIRED_KEEP

struct sg_app {
    uv_loop_t loop;
    struct sg_logger log;
    struct sg_conf *conf;               /* the configuration in force */
    const char *config_path;            /* -c FILE, or NULL */
    const struct sg_conf_overrides *ov; /* the command line, re-applied on reload */
    char *stats_path;         /* --stats FILE, else stats_file at start (owned; kept on reload) */
    struct sg_route *routes;  /* serving */
    struct sg_route *retired; /* removed by a reload or failed to start: closing */
    struct sg_route_summary *retired_log; /* ring of the last SG_APP_RETIRED_KEEP freed */
    uint64_t nretired_log;                /* routes ever summarised into it */
    uv_signal_t sig_hup;
    uv_async_t stop_async; /* woken by the SIGINT/SIGTERM handler */
    bool stopping;
    uint64_t next_session_id;
    uint64_t started_wall_ms;
    uint64_t started_loop_ms;
    struct sg_http *http; /* the `http` server (proxy/http.c), or NULL */
    struct sg_ctx ctx;    /* what this loop's routes and sessions see of it (app_ctx_init) */
    struct sg_frame_tap *taps;    /* this loop's frame taps (ctx.taps) */
    struct sg_frame_tap http_tap; /* the live stream's: sg_http_tap on &http */

    /* Worker 0's: the service manager (sd_notify: readiness, reloads, the
     * status line, the watchdog; proxy/notify.h), inert without one. */
    struct sg_notify notify;
    /* Worker 0's: the last reload's outcome (/metrics): whether it was
     * applied, when the configuration in force was loaded (the start counts),
     * the reloads applied and refused, and the refusal's first error. */
    bool reload_ok;
    uint64_t reload_ok_ms;
    uint64_t reloads_applied, reloads_refused;
    char reload_error[320];

    /* Health and draining (/live, /ready, SIGTERM; README "Draining").
     * Every loop's `beat` timer stamps beat_ns (uv_hrtime) each second: /live
     * asks that every loop stamped lately.  Worker 0's: `ready` once every
     * route is bound; `draining` (read by every loop's routes: no new session)
     * from SIGTERM until the stop, the drain timer checking for the end. */
    uv_timer_t beat;
    bool beat_open;
    _Atomic uint64_t beat_ns;
    bool ready;
    atomic_bool draining;
    uv_timer_t drain_timer;
    bool drain_timer_open;
    uint64_t drain_deadline_ns;

    /* Loop turns (--stats "loop"): the work of each turn, the time blocked in
     * the poll left out (uv_metrics_idle_time), measured at every uv_prepare. */
    uv_prepare_t turn_prep;
    bool turn_prep_open;
    uint64_t turn_last_ns, turn_last_idle_ns;
    uint64_t turns, turn_max_ns, turns_over_1ms;
    struct sg_hist turn_hist; /* each turn's work (on_turn_prepare) */

    /*
     * Worker loops (`workers N`; README "Worker loops").  Worker 0 is the
     * process's own loop: signals, reload, http, --stats.  Workers 1..N-1
     * are threads, each with an app of its own (its loop, routes, sessions,
     * logger copy), told to reload or stop through `wake`.  What they share
     * is read-only (the configuration, while they apply it) or taken under
     * worker 0's conf_lock (creating and freeing routes: filter lists and
     * plugins are reference counted), never on the datagram path.
     */
    int worker, nworkers;    /* this loop's index, and how many there are (>= 1) */
    struct sg_app *main_app; /* worker 0's app */
    struct sg_app **workers; /* worker 0 only: the threads' apps [1..nworkers-1] */
    uv_thread_t thread;
    uv_async_t wake;
    bool wake_open;
    atomic_bool want_stop;
    struct sg_conf *_Atomic want_conf; /* a configuration to apply (worker 0's, read-only) */
    int start_err;                     /* a thread's start: 0 or negative */
    uv_sem_t done;                     /* worker 0's: a thread started, applied a conf or paused */
    uv_sem_t resume;                   /* worker 0's: paused threads go on */
    atomic_bool want_pause;            /* worker 0 reads this loop's routes: wait */
    uv_mutex_t conf_lock;              /* worker 0's */
    int lock_depth;                    /* this loop's nesting of sg_app_conf_lock */
    int nstarted;                      /* worker 0's: threads started */
    /* Worker 0's: every loop's listening socket of each route about to start,
     * bound together before any loop starts it, so that the kernel's
     * SO_REUSEPORT group is whole before a client is hashed to it. */
    struct sg_app_prebound *prebound;
    int nprebound;
    bool steer_warned;             /* worker 0's: source-address steering failed (said once) */
    struct sg_route_share *shares; /* worker 0's: one per route name (sg_route__share) */
    /* Worker 0's: every loop's upstream sockets by local port (route.h,
     * sg_route__own_port), or NULL (none is recorded). */
    struct sg_own_sockets *own;
};

struct sg_app_prebound {
    char name[128];
    int fd[SG_CONF_MAX_WORKERS]; /* -1 once taken */
};

/* The listening socket bound for route `name` on this loop, -1 (then the
 * route binds its own), or another negative errno: the address is taken
 * (the route fails with it).  Called with the conf_lock held (route creation). */
int sg_app_take_listener(struct sg_app *app, const char *name);

/*
 * Worker 0 only: stop every other loop between two of its callbacks, so
 * that worker 0 may read their routes and sessions (the merged stats line);
 * true when they are paused (or there are none), false when they cannot be
 * (stopping or starting: read only worker 0's).  Resume soon: their
 * datagrams wait meanwhile.
 */
bool sg_app_workers_pause(struct sg_app *app);
void sg_app_workers_resume(struct sg_app *app);

/* Take and release worker 0's conf_lock (no-ops with one worker). */
void sg_app_conf_lock(struct sg_app *app);
void sg_app_conf_unlock(struct sg_app *app);

/* Run the proxy until a stop signal; returns the process exit status. */
int sg_app_run(const char *config_path, const struct sg_conf_overrides *ov, const char *stats_path);

/*
 * Route `r` is closing and the close callbacks of all its handles have run.
 * A retired route is summarised into retired_log and freed here; a serving
 * one (closed at shutdown) stays for --stats.
 */
void sg_app__route_closed(struct sg_app *app, struct sg_route *r);

#endif
