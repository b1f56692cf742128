/*
 * Spectators: a route's `spectate ADDR:PORT` port, where slipgate answers a
 * real game client as a server would and shows it one session of the
 * route as that player sees it (the game's follow mode).
 *
 * The layer is generic: its own UDP socket per route (worker 0's loop
 * only), a table of spectators by address, `max_spectators`, the idle
 * timeout, one log line per spectator start and end, counters, and with
 * `spectate_delay` a buffer per session of the server messages its codec
 * decoded (bounded: SG_SPECT_DELAY_BYTES each), fed to a delayed copy of
 * the session's stream once the delay has passed; the game's
 * side goes through the codec's spectate hooks (protocols/codec.h).  It
 * only ever answers the address that wrote to it, and nothing that
 * arrives there is relayed anywhere: the game server never hears of a
 * spectator.
 */
#ifndef SG_PROXY_SPECTATE_H
#define SG_PROXY_SPECTATE_H

#include "proxy/conf.h"
#include "proxy/ctx.h"
#include "proxy/session.h"
#include "proxy/udp.h"
#include "protocols/codec.h"

#define SG_SPECT_DELAY_BYTES (16u << 20) /* the most one session's delay buffer holds */

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

/*
 * The spectator port's owner (the route), given at creation: the loop's
 * context, the route's name for log lines, its list of live sessions
 * (read only, on the same loop), and hooks counting the layer's handles
 * among the route's (`opened` once per handle, `closed` from each close
 * callback).
 */
struct sg_spectate_owner {
    const struct sg_ctx *ctx;
    const char *name;
    void *data;
    struct sg_session *const *sessions;
    void (*opened)(void *data);
    void (*closed)(void *data);
};

/* Totals for /metrics and --stats. */
/* Answers to one address's handshake datagrams (getchallenge, connect) a
 * second, as ioquake3 answers getchallenge (SVC_RateLimitAddress); the
 * rest are dropped unread.  A spectator's own datagrams are not counted. */
#define SG_SPECT_HELLO_PER_SECOND 10
#define SG_SPECT_BUCKETS          256

struct sg_spectate_stats {
    uint64_t started, ended, refused; /* spectators admitted, gone, connects refused */
    uint64_t limited; /* handshake datagrams dropped: their address was answered enough */
    uint64_t datagrams_in, datagrams_out, bytes_in, bytes_out;
    uint64_t errors;        /* datagrams the game's side could not take or build */
    uint64_t delay_dropped; /* messages a full delay buffer dropped */
};

struct sg_spectator {
    struct sg_spectator *next;
    struct sockaddr_storage addr;
    void *spec;       /* the game's spectator state */
    uint64_t id;      /* 1, 2, ... per route, for log lines */
    uint64_t watched; /* the session id it watches, 0: none */
    uint64_t started_ms, last_ms;
    uint64_t datagrams_in, datagrams_out;
};

struct sg_spect_delayq; /* spectate.c: one session's delayed stream */

struct sg_spectate {
    struct sg_spectate_owner owner;
    const struct sg_codec *game;
    const struct sg_codec_spectate *hooks;
    struct sg_udp sock;
    uv_timer_t timer, tick; /* the idle sweep; the delayed streams' clock (spectate_delay) */
    bool sock_open, timer_open, tick_open;
    struct sockaddr_storage addr; /* the spectator port, as bound */
    char *password;               /* `spectate_password`, or NULL */
    int64_t max, timeout_ms;
    int64_t delay_ms;                /* spectate_delay: 0 live */
    int prefix6;                     /* source_prefix_v6: the buckets' IPv6 sources */
    struct sg_spect_delayq *delayqs; /* with a delay: every decoding session's stream, kept */
    unsigned char key[16];           /* the challenges it gives: a keyed hash of the address */
    uint64_t left[16];               /* sessions whose player left (a ring): never watched again */
    unsigned nleft;
    struct sg_spectator *list;
    size_t n;
    uint64_t next_id;
    struct sg_spectate_stats stats;
    /* refusals logged one by one in the window since `refusals_since_ms`;
     * past SG_SPECT_REFUSALS_LOGGED, counted in `refusals_quiet` and summed
     * up in one line when the window ends (a flood must not flood the log) */
    uint64_t refusals_since_ms, refusals_quiet;
    unsigned refusals_logged;
    /* handshake answers per source address (IP, any port; IPv6 by its
     * first `prefix6` bits) in the current second, by a keyed hash of the
     * address (SG_SPECT_HELLO_PER_SECOND) */
    struct sg_spect_bucket {
        uint64_t since_ms;
        uint32_t n;
    } buckets[SG_SPECT_BUCKETS];
    uint8_t buf[SG_MAX_DATAGRAM];
};

#define SG_SPECT_REFUSALS_LOGGED    10 /* refusals logged one by one per window */
#define SG_SPECT_REFUSALS_WINDOW_MS 10000

/*
 * Open route `rc`'s spectator port for game `game` (its codec has spectate
 * hooks: checked when the configuration was read): 0 and *out, or a
 * negative error (logged) with *out NULL.  Close it with
 * sg_spectate_close, then free it with sg_spectate_destroy once `closed`
 * ran for every handle.
 */
int sg_spectate_create(const struct sg_spectate_owner *owner, const struct sg_codec *game,
                       const struct sg_route_conf *rc, struct sg_spectate **out);

/*
 * A reload: `spectate_password` and `max_spectators` apply at once (live
 * spectators stay, even past a lower max), and the idle timeout; the port's
 * address and `spectate_delay` need a restart (the route warns).  0, or
 * -ENOMEM with the old settings kept.  Accepts NULL.
 */
int sg_spectate_update(struct sg_spectate *sp, const struct sg_route_conf *rc);

/* Session `s` decoded frame `f`: its spectators get their part (server
 * frames); a client frame marked `disconnect` (the player leaves) moves
 * them to the next player (live), or once its delayed stream played out. */
void sg_spectate_feed(struct sg_spectate *sp, struct sg_session *s, const struct sg_frame *f,
                      uint64_t now_ms);

/*
 * The route's spectators for the JSON API (/api/routes), as a member
 * `,\n      "spectators": {...}`: the port, and per spectator its number,
 * name, address, the session and player it watches, how long it has
 * watched and its datagrams each way.  On the spectator port's loop.
 */
void sg_spectate_json(const struct sg_spectate *sp, FILE *f, uint64_t now_ms);

/* End every spectator (one log line each) and close the handles.  Accepts NULL. */
void sg_spectate_close(struct sg_spectate *sp, const char *reason);

/* Free what is left after the close callbacks.  Accepts NULL. */
void sg_spectate_destroy(struct sg_spectate *sp);

#endif
