/*
 * The --stats document: every route's and session's counters as JSON,
 * written at exit (and read by the HTTP API).  A read-only view of the
 * routes and sessions of every worker loop.
 */
#ifndef SG_PROXY_STATS_H
#define SG_PROXY_STATS_H

#include "proxy/conf.h"
#include "proxy/hist.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct sg_logger;
struct sg_route;
struct sg_route_summary;
struct sg_session;
struct sg_session_summary;

/* How many freed retired routes a loop's ring keeps (older ones only counted). */
#define SG_STATS_RETIRED_KEEP 64

/* One loop as --stats reads it (taken with the other loops paused or joined). */
struct sg_stats_loop {
    bool present;                              /* the loop exists */
    struct sg_route *routes;                   /* serving */
    const struct sg_route *retired;            /* retired, still closing */
    const struct sg_route_summary *retired_log; /* ring of SG_STATS_RETIRED_KEEP, or NULL */
    uint64_t nretired_log;                     /* routes ever summarised into it */
    uint64_t turns, turn_max_ns, turns_over_1ms;
    const struct sg_hist *turn_hist; /* the loop's turns (hist.h), or NULL */
};

/* Every loop, as their owner (the app) gives them to stats, metrics and the
 * HTTP API: a read-only view, no call back up. */
struct sg_stats_view {
    struct sg_logger *log;
    uint64_t started_wall_ms;
    int nworkers;
    bool reload_ok;                     /* the last reload (SIGHUP) was applied */
    uint64_t reload_ok_ms;              /* when the configuration in force was loaded */
    uint64_t reloads_applied, reloads_refused;
    bool draining;                      /* SIGTERM's drain is on (/metrics) */
    struct sg_stats_loop loop[SG_CONF_MAX_WORKERS]; /* [0]: worker 0 */
};

/*
 * Can the --stats file be written at exit?  Creates and removes PATH.tmp
 * (the file is written there and renamed over PATH).  Returns 0, or a
 * negative errno with the reason, naming the path, in `why`.
 */
int sg_stats_check_path(const char *path, char *why, size_t whycap);

/* Worker 0's route `r` and the same-named serving routes of the other loops
 * into `g` (SG_CONF_MAX_WORKERS entries; `r` first): how many.  Read them
 * only with the other loops paused or joined. */
int sg_stats_route_group(const struct sg_stats_view *v, const struct sg_route *r,
                         const struct sg_route **g);

/* The --stats document (every route; with `sessions`, every session too) to `f`. */
void sg_stats_json(FILE *f, const struct sg_stats_view *v, bool sessions);
/* {"sessions": [...]}: the live sessions (with `ended`, the ended ones first), each with
 * its route's name, fields as in --stats. */
void sg_stats_json_sessions(FILE *f, const struct sg_stats_view *v, bool ended);
/* What --stats says of live session `s` now (codec counters and demos included). */
void sg_stats_live_summary(const struct sg_session *s, struct sg_session_summary *out);

/* Write the --stats JSON for every route and session to `path`. */
int sg_stats_write(const struct sg_stats_view *v, const char *path);

#endif
