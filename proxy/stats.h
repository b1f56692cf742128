/*
 * The --stats document: every route's and session's counters as JSON,
 * written at exit (and read by the HTTP API).  A read-only view of the
 * routes and sessions of every worker loop.
 */
#ifndef SG_PROXY_STATS_H
#define SG_PROXY_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct sg_app;
struct sg_route;
struct sg_session;
struct sg_session_summary;

/*
 * Can the --stats file be written at exit?  Creates and removes PATH.tmp
 * (the file is written there and renamed over PATH).  Returns 0, or a
 * negative errno with the reason, naming the path, in `why`.
 */
int sg_stats_check_path(const char *path, char *why, size_t whycap);

/* Worker 0's route `r` and the same-named serving routes of the other loops
 * into `g` (SG_CONF_MAX_WORKERS entries; `r` first): how many.  Read them
 * only with the other loops paused or joined. */
int sg_stats_route_group(const struct sg_app *app, const struct sg_route *r,
                         const struct sg_route **g);

/* The --stats document (every route; with `sessions`, every session too) to `f`. */
void sg_stats_json(FILE *f, struct sg_app *app, bool sessions);
/* {"sessions": [...]}: the live sessions (with `ended`, the ended ones first), each with
 * its route's name, fields as in --stats. */
void sg_stats_json_sessions(FILE *f, struct sg_app *app, bool ended);
/* What --stats says of live session `s` now (codec counters and demos included). */
void sg_stats_live_summary(const struct sg_session *s, struct sg_session_summary *out);

/* Write the --stats JSON for every route and session to `path`. */
int sg_stats_write(struct sg_app *app, const char *path);

#endif
