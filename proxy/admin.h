/*
 * Live actions through the HTTP API (proxy/http.c routes them here):
 *
 *     GET  /api/players                              every live session
 *     POST /api/kick?session=ID[&minutes=N][&reason=TEXT]
 *     POST /api/unban?addr=ADDR[/BITS][&route=NAME]
 *     POST /api/mute?session=ID[&on=0|1]
 *
 * Actions need `http_token` to be set (and given: http.c checks it before
 * coming here).  Each action is logged with the HTTP peer that asked.  A
 * bad argument, an unknown session or nothing to unban is an HTTP error
 * and changes nothing.
 */
#ifndef SG_PROXY_ADMIN_H
#define SG_PROXY_ADMIN_H

#include "proxy/log.h"

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

#define SG_ADMIN_KICK_MINUTES 10          /* a kick's default */
#define SG_ADMIN_KICK_MAX_MINUTES 10080   /* a week */

/* What to answer: status, and a heap body (JSON or text) the caller sends and frees. */
struct sg_admin_reply {
    unsigned status;
    bool json;
    char *body;
    size_t len;
};

struct sg_stats_view;

/*
 * How the actions reach every loop (the HTTP server's owner hooks, see
 * proxy/http.h): the log, `view` of every loop, and `pause`/`resume` of the
 * other loops (pause false: only worker 0's may be read).
 */
struct sg_admin_access {
    struct sg_logger *log;
    void *data;
    void (*view)(void *data, struct sg_stats_view *out);
    bool (*pause)(void *data);
    void (*resume)(void *data);
};

/* Is `url` one of the actions (POST) or the players' list (GET)? */
bool sg_admin_is_action(const char *url);
bool sg_admin_is_list(const char *url);

/*
 * Answer `url` for connection `c` (its query arguments), from `peer` (the
 * HTTP client's address, for the log).  `has_token`: whether `http_token`
 * is set.  Reads and changes every loop's routes with the other loops
 * paused (owner->pause).  Always fills `out` (body NULL: out of memory).
 */
void sg_admin_handle(const struct sg_admin_access *owner, bool has_token, struct MHD_Connection *c,
                     const char *url, const char *peer, struct sg_admin_reply *out);

#endif
