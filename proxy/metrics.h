/*
 * The Prometheus text exposition of /metrics, and the /api/recordings
 * document (README, "Watching slipgate", lists the metrics).
 */
#ifndef SG_PROXY_METRICS_H
#define SG_PROXY_METRICS_H

#include <stdint.h>
#include <stdio.h>

struct sg_stats_view;

/* What the HTTP server itself counts. */
struct sg_http_stats {
    uint64_t stream_clients; /* connected now */
    uint64_t stream_events;  /* events queued to stream clients */
    uint64_t stream_dropped; /* events a slow stream client lost */
    uint64_t evicted;        /* idle connections closed for a new client (all were taken) */
    double loop_lag_s;       /* how late the last tick of the loop's timer ran */
};

/* Every metric of every serving route, in text format 0.0.4, to `f`. */
void sg_metrics_write(FILE *f, const struct sg_stats_view *v, const struct sg_http_stats *st);

/* {"recordings": [...]}: the demo files being written now. */
void sg_metrics_recordings_json(FILE *f, const struct sg_stats_view *v);

#endif
