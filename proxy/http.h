/*
 * The `http ADDR:PORT` server: the orchestrator's /live and /ready (no
 * token asked: they say nothing but up or not), Prometheus /metrics, the JSON API
 * (/api/routes, /api/sessions, /api/recordings), the live stream of
 * decoded messages (/api/stream, Server-Sent Events) and the web page (/),
 * for every worker loop's routes and sessions (it runs on worker 0's loop).
 *
 * GNU libmicrohttpd parses HTTP; it runs without threads of its own, from
 * the relay's libuv loop: its epoll descriptor is watched by a uv_poll_t
 * and a timer follows MHD_get_timeout.  Nothing it does blocks the loop.
 */
#ifndef SG_PROXY_HTTP_H
#define SG_PROXY_HTTP_H

#include "filters/filter.h"
#include "proxy/ctx.h"

struct sg_session;
struct sg_http;
struct sg_stats_view;

/*
 * The server's owner (the app), given at start: worker 0's loop context,
 * the `http_idle_timeout`, and hooks.  `view` fills the view of every loop that stats and metrics
 * read; `pause` stops the other loops so that they may be read (false when
 * they cannot be: read only worker 0's) and `resume` lets them go on.
 */
struct sg_http_owner {
    const struct sg_ctx *ctx;
    int64_t idle_timeout_ms; /* idle connections closed after this (<= 0: the default) */
    void *data;
    void (*view)(void *data, struct sg_stats_view *out);
    bool (*pause)(void *data);
    void (*resume)(void *data);
    /* /live (`ready` false) and /ready (true): the HTTP status (200 or 503)
     * and a one-line text in `buf`; NULL: both answer 200. */
    unsigned (*health)(void *data, bool ready, char *buf, size_t len);
};

/* Limits (README, "Watching slipgate"). */
#define SG_HTTP_MAX_CONNECTIONS 32           /* at once; then the idlest makes room */
#define SG_HTTP_MAX_STREAMS     8            /* /api/stream clients at once */
#define SG_HTTP_REQUEST_MAX     16384        /* bytes of request line and headers */
#define SG_HTTP_IDLE_TIMEOUT_S  30           /* default `http_idle_timeout` */
#define SG_HTTP_STREAM_BUF      (256 * 1024) /* events waiting per stream client */

/*
 * Start serving on `addr` ("host:port") from the owner's loop; `token` (may
 * be NULL) is then required of every request.  Returns 0 and the server in
 * `*out`, or a negative error after logging why.
 */
int sg_http_start(const struct sg_http_owner *owner, const char *addr, const char *token,
                  struct sg_http **out);

/* Close every connection and the server's handles; the server frees itself
 * once their close callbacks ran.  Accepts NULL. */
void sg_http_stop(struct sg_http *h);

/* Where the server listens, with the port the kernel gave for port 0. */
const struct sockaddr *sg_http_address(const struct sg_http *h);

/* With worker loops, the server outlives its handles (other loops' sessions
 * may still call sg_http_frame): free it once the threads are joined and
 * its handles closed.  Accepts NULL; only for a server started with worker
 * loops (with one, the server frees itself once its handles closed). */
void sg_http_free(struct sg_http *h);

/* A frame of session `s` went out or was dropped (`call` as the taps see it):
 * the live stream's clients get its JSON line.  Cheap when none listens. */
void sg_http_frame(struct sg_http *h, struct sg_session *s, const struct sg_filter_call *call);
/* The same as a frame tap (proxy/ctx.h): `data` is a `struct sg_http **`,
 * read at each frame (NULL once the server stopped: nothing). */
void sg_http_tap(void *data, struct sg_session *s, const struct sg_filter_call *call);

#endif
