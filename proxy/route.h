/*
 * Routes and sessions: the relay.
 *
 * A route is one `listen -> server` pair.  It owns the listening socket,
 * the table of live sessions keyed by client address, the per-source rate
 * buckets and a sweep timer that ends idle sessions.
 *
 * A session (proxy/session.h) is one client address on one route.
 * The route's files: route.c (sockets, sweep, reloads), admit.c (who may
 * open a session), door.c (bans, admin_from), and below them table.c (the
 * session table) and session.c, which report back through struct
 * sg_relay_hooks only.
 *
 * Sockets are read in batches (one recvmmsg per readiness) into the route's
 * batch buffer; what goes out is copied into the route's outbox and leaves
 * in one sendmmsg per socket at the end of the loop turn (proxy/udp.h).
 */
#ifndef SG_PROXY_ROUTE_H
#define SG_PROXY_ROUTE_H

#include "proxy/addr.h"
#include "proxy/conf.h"
#include "proxy/counters.h"
#include "proxy/ctx.h"
#include "proxy/delay.h"
#include "proxy/hist.h"
#include "proxy/log.h"
#include "proxy/master.h"
#include "proxy/session.h"
#include "proxy/spectate.h"
#include "proxy/table.h"
#include "proxy/udp.h"
#include "protocols/codec.h"
#include "filters/chain.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

struct sg_route;
struct sg_anon_key; /* filters/anon.h */

/*
 * What --stats keeps of a route once it is retired (removed by a reload, or
 * failed to start) and freed: its identity, totals and why it went.  The
 * summaries of its sessions are not kept (sessions_dropped counts them).
 */
struct sg_route_summary {
    char name[128];
    char listen[272], server[272]; /* as configured (clipped) */
    char listen_addr[64];          /* as resolved, or "" */
    int protocol;                  /* enum sg_protocol */
    const char *reason;            /* static string */
    uint64_t retired_ms;           /* wall clock, ms since the epoch */
    uint64_t sessions_total;
    uint64_t sessions_dropped; /* ended-session summaries not kept */
    struct sg_counters counters;
    int rcvbuf, sndbuf;
    uint64_t kernel_drops;
};

#define SG_ROUTE_OMITTED_CODECS 8

struct sg_rate_bucket {
    unsigned char key[16];
    uint8_t keylen;
    double tokens;
    uint64_t stamp; /* uv_now() of the last refill */
};


/*
 * slipgate's upstream sockets, every loop's, by local port.  A port is one
 * socket's: `used` claims it (sg_route__own_claim) before the socket binds
 * it, whatever the family, so sockets bound to given addresses
 * (`upstream_source`), where the kernel may give two of them one port, do
 * not share one; the later one binds another.  The IPv4 ones with the
 * address they are connected from (0 while not connected: they send from
 * any), the IPv6 ones by port, and whether they are not connected
 * (`v6_any`: then they may send from an IPv4 address too).
 * Worker 0's app owns it; every loop writes and reads it with relaxed
 * atomics.
 */
struct sg_own_sockets {
    _Atomic uint64_t v4[65536 / 64], v6[65536 / 64], v6_any[65536 / 64];
    _Atomic uint64_t used[65536 / 64]; /* claimed by one upstream socket */
    _Atomic uint32_t v4_host[65536];
};

/* route_by prx: what one source did lately (new chains, the last refusal logged). */
struct sg_rb_source {
    unsigned char key[16];
    uint8_t keylen;
    uint64_t window; /* uv_now() when its minute began */
    uint32_t chains; /* new chains in it */
    uint64_t logged; /* uv_now() of the last refusal logged (0: none) */
    uint32_t queries; /* pingstatus answers in its minute (SG_RB_QUERIES at most) */
};
#define SG_RB_QUERIES 60 /* pingstatus answers a minute per source IP (no reflection flood) */
#define SG_RB_SOURCES 256 /* sources remembered (open addressing; the oldest gives way) */
#define SG_RB_PINGS   64  /* servers pinged at most (pingstatus) */

struct sg_route_by_state {
    struct sg_addr_rule *rules; /* the allow-list: inline, then the file's */
    size_t nrules;
    unsigned char key[16]; /* the challenges the route gives: a keyed hash of the source */
    struct sg_rb_source sources[SG_RB_SOURCES];
    struct {
        struct sockaddr_storage addr;
        int ms;           /* the last measured ping, -1: none yet or no answer */
        uint64_t sent;    /* uv_now() of the ping in flight (0: none) */
    } pings[SG_RB_PINGS];
    size_t npings, ping_next;
    uint64_t ping_last; /* uv_now() of the last ping sent */
    struct sg_udp ping;     /* the pings' own socket (answers come back to this loop) */
    bool ping_open, ping_failed;
    /* Where the route's own answers go, until the outbox sent them (it
     * borrows the address; it holds at most SG_OUTBOX_ENTRIES). */
    struct sockaddr_storage reply_to[SG_OUTBOX_ENTRIES];
    size_t reply_next;
};

/* A host address as sg_addr_host_key gives it (4 or 16 bytes). */
struct sg_host_key {
    uint8_t len;
    unsigned char key[16];
};

/*
 * The route's owner (the app), given at creation: the loop's context, and
 * the hooks through which the route reports up.  `take_listener` (may be
 * NULL; only asked with several loops): the listening socket bound for
 * route `name`, -1 (the route binds its own), or another negative errno.
 * `closed`: the route is closing and the close callbacks of all its
 * handles have run; it may free the route.
 */
struct sg_route_owner {
    const struct sg_ctx *ctx;
    void *data;
    int (*take_listener)(void *data, const char *name);
    void (*closed)(void *data, struct sg_route *r);
};

struct sg_route {
    /* What its sessions see of it (struct sg_relay, proxy/session.h), by name. */
    union {
        struct sg_relay relay;
        struct { SG_RELAY_FIELDS };
    };
    struct sg_route_owner owner;
    struct sg_route *next;
    const struct sg_codec *codec; /* `game` when it decodes, else NULL */
    uv_timer_t sweep;
    bool listener_open, sweep_open; /* handles initialised and not yet closed */
    bool closing;
    bool retired;               /* retired by its owner: freed once closed (owner.closed) */
    const char *retired_reason; /* static string */
    uint64_t retired_ms;

    /* The session table (proxy/table.h): these fields by name. */
    union {
        struct sg_table table;
        struct { SG_TABLE_FIELDS };
    };

    /* Per-source new-session buckets (open addressing, bounded). */
    struct sg_rate_bucket *rates;
    size_t nrates;

    /* Counters and the summaries of ended sessions. */
    uint64_t sessions_evicted; /* ended for a newcomer when the table was full */
    /* What the last sg_route_update could not apply and kept of the old
     * settings ("server, masters"), "" when it applied everything. */
    char reload_kept[128];
    /* route_by prx: what the route answered itself, by SG_ROUTE_BY_* kind
     * (challenge requests, pingstatus, status, pings). */
    uint64_t rb_answers[SG_ROUTE_BY_PING + 1];
    uint64_t client_moves; /* sessions that followed their client to a new address (qport) */
    struct sg_session_summary *ended;
    size_t nended, ended_cap;
    uint64_t ended_omitted;
    /* What the omitted ones decoded and recorded, so /metrics counters never
     * go back (route.c; proxy/metrics.c reads them). */
    struct {
        const char *codec[SG_ROUTE_OMITTED_CODECS];
        struct sg_codec_stats cstats[SG_ROUTE_OMITTED_CODECS];
        uint64_t demos;
        uint64_t demo_bytes;
    } omitted;

    /* Admission: rate-limited warnings, the one-time loop warning, and the
     * max_sessions the descriptor limit was last found short for. */
    struct sg_warn_limit warn_rebind;      /* refused qport moves */
    bool loop_logged;
    int64_t nofile_warned_for;
    /* The machine's own addresses when the route started (getifaddrs;
     * loopback counts without them): a datagram from one of them with the
     * port of one of slipgate's sockets came from slipgate itself. */
    struct sg_host_key *locals;
    size_t nlocals;

    /* The listener's kernel drops (full receive buffer): since the route
     * opened, as last read, and when the last warning went out; and its
     * buffers when last read. */
    int rcvbuf, sndbuf;
    uint64_t kernel_drops;
    uint32_t kernel_drops_raw;
    uint64_t kernel_drops_warned, kernel_drops_warned_ms;

    /* The door (proxy/door.c): this loop's kicks (temporary bans from the
     * HTTP API; owned, or NULL), per address when it was last answered and
     * logged (a small table, NULL until a ban first matches), and the
     * banned replies sent in the current second. */
    struct sg_ban_list *kicks;
    bool door_dirty; /* kicks changed from another thread: the sweep ends the sessions */
    struct sg_door_seen *door_seen;
    uint64_t door_second, door_replies;
    struct sg_warn_limit warn_admin;

    /* readiness probe (worker 0's route only): the game's status query to
     * the server from a socket of its own; /ready reads probe_answer_ms. */
    struct sg_udp probe;
    uv_timer_t probe_timer;
    bool probe_open, probe_failed, probe_timer_open;
    uint64_t probe_sent_ms, probe_answer_ms; /* uv_now() of the last query and answer (0: none) */
    /* What the answers say of the server (games whose status hook reads
     * them: sg_codec_status.parse): the last answer read and when
     * (uv_now(), 0: none yet); the answers that came, and those that did
     * not read (malformed: counted and ignored, warned about at most every
     * SG_WARN_INTERVAL_MS).  /api/routes shows them. */
    struct sg_codec_server probe_server;
    uint64_t probe_server_ms, probe_answers, probe_malformed;
    struct sg_warn_limit warn_probe;
    /* route_by prx (client-directed routing): what the route keeps for it
     * (route.c); the game's hooks are rb_hooks. */
    struct sg_route_by_state *rb;
};

/*
 * The door (proxy/door.c): may the client datagram `data` from `from`
 * pass?  A banned address's datagram is dropped (counted, logged at most
 * once a minute per address) and may get the game's own "banned" answer
 * (never longer than `data`, at most one a second per address); remote
 * administration from an address `admin_from` does not list is dropped
 * (counted).  Returns true when the datagram is refused.
 */
bool sg_route__door_refuses(struct sg_route *r, const uint8_t *data, size_t len,
                            const struct sockaddr *from);
/* Bans or admin_from changed (a reload, a kick): end the sessions now banned. */
void sg_route__door_enforce(struct sg_route *r);

/*
 * The door while the proxy drains: a datagram from `from`, which has no
 * session, gets the game's "server is full" answer (codec hook
 * full_reply) when the game has one: never longer than `len`, at most once
 * a second per address.  The caller counts the drop (drops.shutdown).
 */
/*
 * The readiness probe (`ready_probe on`, worker 0's route): has the route's
 * server answered a status query within ready_probe_timeout?  True when
 * the route needs no probe; else false with what to say in `why`.
 */
bool sg_route_probe_ready(const struct sg_route *r, char *why, size_t cap);
/*
 * The server's last status answer the probe read (Quake 2, NetQuake), or
 * NULL when it read none; `*age_ms` is how long ago, `*fresh` whether
 * within ready_probe_timeout.  Valid until the route's loop runs again.
 */
const struct sg_codec_server *sg_route_probe_server(const struct sg_route *r, uint64_t *age_ms,
                                                    bool *fresh);

void sg_route__door_draining(struct sg_route *r, const uint8_t *data, size_t len,
                             const struct sockaddr *from);
/*
 * Kick: refuse `from`'s host for `minutes` (this loop's kicks), with
 * `reason` (may be NULL); the route's next sweep (its own loop, within a
 * second) ends its sessions.  Call it from the route's loop, or with that
 * loop paused.  0 or -ENOMEM.
 */
int sg_route_kick_ban(struct sg_route *r, const struct sockaddr *from, int64_t minutes,
                      const char *reason);
/* Lift this loop's kicks inside `rule`'s range (configured bans change by
 * editing the config and reloading).  Returns how many went. */
int sg_route_unban(struct sg_route *r, const struct sg_ban_rule *rule);
/* Free the door's state (route destruction). */
void sg_route__door_finish(struct sg_route *r);

/*
 * Create a route from `rc` (copied) and start listening.  On failure
 * returns a negative libuv error with the reason logged.
 */
int sg_route_create(const struct sg_route_owner *owner, const struct sg_route_conf *rc,
                    struct sg_route **out);
/* Apply settings that can change while running (timeouts, caps, server for
 * new sessions).  Returns 0, or a negative error if `rc` cannot apply. */
int sg_route_update(struct sg_route *r, const struct sg_route_conf *rc);
/* End every session with `reason` and close the route's handles; the route
 * stays allocated until sg_route_destroy (a serving one for --stats at exit;
 * a retired one is destroyed by its owner's `closed` hook once its handles closed). */
void sg_route_close(struct sg_route *r, const char *reason);

/* Bring r->kernel_drops up to date from the listener (when it is open). */
void sg_route_poll_kernel_drops(struct sg_route *r);
/* Free a closed route (after the loop has run its close callbacks). */
void sg_route_destroy(struct sg_route *r);
/* What --stats keeps of `r` once it is freed. */
void sg_route_summarize(const struct sg_route *r, struct sg_route_summary *out);

/* Relay the listening socket's datagrams that reached it before `at` (a
 * receive time; 0: none), for a server datagram about to be decoded. */
void sg_route_clients_before(struct sg_route *r, uint64_t at);

/*
 * NAT rebinding: a client datagram from `from`, which has no session, may
 * belong to a live session of the same host whose game carries a qport.
 * Returns that session, moved to `from` (or, for a late datagram from the
 * address it just left, not moved), or NULL.  NULL with *refused set: the
 * qport matched but the move was refused (counted and logged; the caller
 * drops the datagram).  `data` is borrowed.
 */
struct sg_session *sg_route__session_rebind(struct sg_route *r, const struct sockaddr *from,
                                            const uint8_t *data, size_t len, bool *refused);

/* The share of route `name` in the list `*shares` (created when missing;
 * worker 0's conf_lock held). */
struct sg_route_share *sg_route__share(struct sg_route_share **shares, const char *name);
/* Free every share of the list (at exit, once no route is left). */
void sg_route__shares_free(struct sg_route_share **shares);

/*
 * slipgate's own sockets.  sg_route__own_port records (`add`) or forgets the
 * local address of a session's upstream socket (again after it connects
 * elsewhere), for every loop; forgetting it also gives its port's claim up.
 * sg_route__own_claim: claim `port` for a new upstream socket, before it
 * binds it; false when another upstream socket holds it.
 * sg_route__own_socket: is `a` (host and port) one of slipgate's sockets, a
 * listener of any route or a session's upstream socket, on an address of
 * this machine?  No session is opened from one, and no handshake moves a
 * session onto one (it would relay to slipgate itself).
 */
void sg_route__own_port(struct sg_route *r, const struct sockaddr *local, bool add);
bool sg_route__own_claim(struct sg_route *r, int port);
bool sg_route__own_socket(const struct sg_route *r, const struct sockaddr *a);
/*
 * Out of descriptors: end the session a full table would end for a
 * newcomer (the oldest the server never answered, else the oldest not yet
 * established), so that its descriptors serve the newcomer.  False when
 * there is none (every session is established).
 */
bool sg_route__make_room(struct sg_route *r);

/* Session table internals shared by route.c and session.c. */
void sg_route__session_stage(struct sg_route *r, struct sg_session *s, enum sg_session_stage st);
/*
 * A client address as slipgate writes it: "1.2.3.4:5678", or its pseudonym
 * "anon-XXXXXXXX" on a route with `anonymize yes`.  Returns `buf`.
 */
char *sg_route__client_name(const struct sg_route *r, const struct sockaddr *sa, char *buf,
                            size_t cap);
void sg_route__session_insert(struct sg_route *r, struct sg_session *s);
void sg_route__session_remove(struct sg_route *r, struct sg_session *s);
void sg_route__session_ended(struct sg_route *r, const struct sg_session_summary *sum);
/* Add codec counters `c` to `to`. */
void sg_codec_stats_add(struct sg_codec_stats *to, const struct sg_codec_stats *c);
/*
 * The close callback of one of the route's handles (or of a session's
 * upstream socket, counted in open_handles from sg_udp_open) has run.  When
 * the route is closing and none is left, the owner's `closed` hook may free `r`:
 * the caller must not touch it after this call.
 */
void sg_route__handle_closed(struct sg_route *r);

/*
 * Admission (proxy/admit.c): who may open a session on a route.  The
 * max_sessions slots every worker loop's route of one name shares, the
 * per-source rate of new sessions, the sources no session may have (a
 * configured server, one of slipgate's own sockets), the eviction rule of a
 * full table, and their rate-limited warnings.  Part of the route (it reads
 * and writes struct sg_route, as door.c does); route.c calls it, never the
 * other way.
 */
#define SG_RATE_SLOTS 4096 /* per-source buckets per route; a power of two */

/*
 * A datagram from `from`, which has no session yet: a new session towards
 * `server` (NULL: the route's), or NULL when it is refused (counted and
 * logged; a full table follows the eviction rule).
 */
struct sg_session *sg_admit(struct sg_route *r, const struct sockaddr *from,
                            const struct sockaddr *server);
/* A session left the table: give its max_sessions slot back. */
void sg_admit_slot_give(struct sg_route *r);
/* A source no session may have; *what says which. */
bool sg_admit_loop_source(const struct sg_route *r, const struct sockaddr *from, const char **what);
/* The machine's own addresses, once, when the route starts (getifaddrs). */
void sg_admit_load_locals(struct sg_route *r);
/* Events counted since the last warning, once the interval has passed. */
uint64_t sg_admit_warn_flush(struct sg_warn_limit *w, uint64_t now);
/* The warnings the sweep flushes: refused for the limit, for the rate, evictions. */
void sg_admit_warn_session_limit(struct sg_route *r, uint64_t n, const char *last);
void sg_admit_warn_rate_limit(struct sg_route *r, uint64_t n, const char *last);
void sg_admit_warn_evicted(struct sg_route *r, uint64_t n);


#endif
