/*
 * What a loop's routes and sessions see of the loop they run on: the libuv
 * loop, the logger, the worker's index, the session ids, and the frame taps
 * registered at start.  The app fills one per loop (proxy/app.c); the
 * fields that point into it stay valid while the loop runs.  A route or a
 * session reads it and never names the app (DESIGN.md rule 11); a test may
 * fill one of its own.
 */
#ifndef SG_PROXY_CTX_H
#define SG_PROXY_CTX_H

#include "proxy/log.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

struct sg_session;
struct sg_route;
struct sg_route_share;
struct sg_own_sockets;
struct sg_filter_call;

/*
 * A frame tap: `frame` is called for each frame of every session, as it
 * went out or was dropped (`call` as the filters' taps see it).  Taps are
 * registered at start, before any loop runs, and are never removed while a
 * loop runs; `frame` may be called from any loop's thread.
 */
struct sg_frame_tap {
    struct sg_frame_tap *next;
    void (*frame)(void *data, struct sg_session *s, const struct sg_filter_call *call);
    void *data;
};

struct sg_ctx {
    uv_loop_t *loop;
    struct sg_logger *log;
    int worker, nworkers;             /* this loop's index, and how many loops (>= 1) */
    uint64_t *next_session_id;        /* worker w of N numbers w+1, w+1+N, ... */
    const bool *stopping;             /* the loop is stopping: no new session */
    const atomic_bool *draining;      /* SIGTERM's drain (every loop's): no new session; may be NULL */
    struct sg_route *const *routes;   /* this loop's serving routes (a list) */
    struct sg_route_share **shares;   /* every loop's: one per route name (worker 0's lock) */
    struct sg_own_sockets *const *own; /* every loop's upstream sockets, or NULL */
    struct sg_frame_tap *const *taps; /* the taps (a list, fixed while loops run) */
};

/* Add `tap` to the list `*head` (at start, before any loop runs). */
static inline void sg_frame_tap_add(struct sg_frame_tap **head, struct sg_frame_tap *tap)
{
    tap->next = *head;
    *head = tap;
}

#endif
