/*
 * Sessions: one client address on one route.
 *
 * A session owns an upstream UDP socket of its own, connected to the
 * server, so the server sees one source port per client.  It is freed only
 * from the close callback of that socket (STYLE.md).  Its route (proxy/route.h)
 * keeps the table of live sessions; a session reports back to it.
 */
#ifndef SG_PROXY_SESSION_H
#define SG_PROXY_SESSION_H

#include "proxy/conf.h"
#include "proxy/counters.h"
#include "proxy/ctx.h"
#include "proxy/delay.h"
#include "proxy/hist.h"
#include "proxy/udp.h"
#include "protocols/codec.h"
#include "filters/chain.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

struct sg_route;
struct sg_session;
struct sg_anon_key;      /* filters/anon.h */
struct sg_sign_key;      /* filters/sign.h */
struct sg_master;        /* proxy/master.h */
struct sg_spectate;      /* proxy/spectate.h */
struct sg_codec_route_by; /* protocols/codec.h */
struct sg_deferred;

/* What is kept of a session after it ends, for --stats. */
struct sg_session_summary {
    uint64_t id;
    char client[64];
    int upstream_port;
    uint64_t started_ms, ended_ms; /* wall clock, ms since the epoch */
    const char *end_reason;        /* static string; NULL while active */
    struct sg_counters counters;
    const char *codec;            /* codec name, NULL when not decoding */
    struct sg_codec_stats cstats; /* the codec's counters at the end */
    char first_error[200];        /* the codec's first error, "" if none */
    uint32_t demos;               /* demo files written */
    uint64_t demo_bytes;          /* the bytes of those finished (closed) */
    char demo[256];               /* the last demo file */
    char decode_info[200];        /* the codec's description of the session, "" if none */
    struct sg_codec_info game;    /* server name, level, player name ("" = not known) */
    /* The round trips slipgate times, smoothed, in ms, by leg: [SG_DIR_S2C]
     * to the client and back (a server datagram relayed until the client's
     * datagram acknowledging it), [SG_DIR_C2S] to the server and back; -1
     * while not measured (a game or leg whose netchan acknowledges nothing). */
    int32_t rtt_ms[2];
};

/* A round trip being timed: a datagram relayed one way whose number the
 * other way's acknowledgement will name (sg_frame.ack_wanted). */
struct sg_rtt_probe {
    int32_t seq;
    uint64_t sent_ms; /* uv_now() when it came; 0: none awaited */
    uint64_t next_ms; /* no new probe before this uv_now() (SG_RTT_EVERY_MS after the last) */
};
#define SG_RTT_EVERY_MS 100 /* one probe per direction at most this often: few samples, cheap */

/*
 * How far a session has come in proving it is a real player (admission).
 * UNANSWERED: the server never answered it.  ANSWERED: it did, but the
 * codec does not yet say the game's handshake completed.  ESTABLISHED:
 * the server answered and (when a codec with an `established` hook decodes
 * it) the handshake completed; for good.  Sessions short of ESTABLISHED end
 * after handshake_timeout and, when the table is full, make room for a
 * newcomer: UNANSWERED ones first, then ANSWERED ones, oldest first.
 */
enum sg_session_stage {
    SG_STAGE_UNANSWERED,
    SG_STAGE_ANSWERED,
    SG_STAGE_ESTABLISHED,
};

/* A warning repeated at most once per SG_WARN_INTERVAL_MS, with a count. */
#define SG_WARN_INTERVAL_MS 10000
/* A session whose client left (its disconnect decoded, nothing new from it
 * since) ends once this long passes with no datagram either way, not at
 * idle_timeout: what the server still sends (its "zombie" seconds) is
 * relayed to the end, and a reconnect from the same port keeps it.  Five
 * seconds: a stream with a hole in it (loss, a replay's lock-step wait) is
 * not taken for its end. */
#define SG_SESSION_LEFT_MS 5000
struct sg_warn_limit {
    bool logged;      /* a warning went out */
    uint64_t last_ms; /* uv_now() when it did */
    uint64_t count;   /* events since then */
};


/*
 * What the same-named routes of every worker loop share: the count of their
 * sessions, against the route's max_sessions (exact across loops).  A slot
 * is taken by compare-and-swap before a session is made and given back when
 * it ends.  One per route name, kept by worker 0's app for the whole run
 * (sg_route__share; a route removed and added again by reloads reuses it).
 */
struct sg_route_share {
    struct sg_route_share *next;
    char name[128];
    _Atomic int64_t nsessions;
    /* The sessions (every loop's) the open files limit leaves room for when
     * that is fewer than max_sessions, else 0: the table is full there, and
     * a full table's eviction rule applies (worker 0 sets it: app.c). */
    _Atomic int64_t fd_cap;
    /* upstream source addresses: the next session's (every loop's), in turn */
    _Atomic uint32_t next_source;
};

/*
 * What a session sees of its route: the relay (proxy/route.h holds these
 * fields by name in struct sg_route, a union with this struct, so the two
 * views are one memory), and the hooks through which a session reports to
 * the route's table and admission.  session.c never names struct sg_route's
 * other fields nor calls route.c directly: route.c calls down into
 * session.c, and session.c back only through `hooks`.
 */
struct sg_relay_hooks {
    /* The session table (route.c): add, take out, move between the waiting lists. */
    void (*insert)(struct sg_route *r, struct sg_session *s);
    void (*remove)(struct sg_route *r, struct sg_session *s);
    void (*stage)(struct sg_route *r, struct sg_session *s, enum sg_session_stage st);
    /* Admission: out of descriptors, end the session a full table would end
     * for a newcomer; false when there is none. */
    bool (*make_room)(struct sg_route *r);
    /* An ended session's summary, for --stats. */
    void (*ended)(struct sg_route *r, const struct sg_session_summary *sum);
    /* slipgate's own sockets: record or forget an upstream socket's local
     * address; claim a port for a new one (false: another one holds it);
     * is `a` one of them? */
    void (*own_port)(struct sg_route *r, const struct sockaddr *local, bool add);
    bool (*own_claim)(struct sg_route *r, int port);
    bool (*own_socket)(const struct sg_route *r, const struct sockaddr *a);
    /* Relay the listener's datagrams received before `at` (a decoding
     * session's server datagram waits for them). */
    void (*clients_before)(struct sg_route *r, uint64_t at);
    /* The close callback of a session's upstream socket ran (counted in
     * open_handles); may free the route: the last thing a session does. */
    void (*handle_closed)(struct sg_route *r);
    /* A decoded frame of a session the route's spectators may watch (only
     * when `spect` is set), after the datagram is on its way. */
    void (*spectate)(struct sg_route *r, struct sg_session *s, const struct sg_frame *f,
                     uint64_t now_ms);
};

/*
 * The relay's fields.  resid: residence times (session.c, sg_session_sent),
 * from each relayed datagram's receive time to the clock read just before
 * the sendmmsg that hands it to the kernel, by direction ([SG_DIR_C2S],
 * [SG_DIR_S2C]), this loop's own, summed by the readers; resid_untimed:
 * datagrams the kernel gave no receive time (off with `residence off`).
 * batch, outbox: shared by the route's sockets, one receive batch and the
 * outbox every datagram leaves through.  drain_buf, drain_cbuf: one
 * datagram each, a decoding session's waiting server datagrams read before
 * its client datagram and the listener's read before a server datagram
 * (server_first).  send_first, dq_*: send-first, the chain only watches (or
 * there is none) and `reencode` is `changed`, so datagrams leave before
 * they are decoded; their decoding waits in arrival order and runs after
 * the turn's flush, SG_DEFER_BUDGET_NS of it per loop turn.  rb_hooks:
 * route_by prx's game hooks (NULL on a fixed route).
 */
#define SG_RELAY_FIELDS \
    const struct sg_ctx *ctx;   /* = owner.ctx */                                                        \
    struct sg_route_conf conf;    /* private copy (strings owned) */                                     \
    const struct sg_codec *game;  /* from `protocol`; NULL: probe each session (auto) */                 \
    const struct sg_codec *handshake; /* whose handshake hook runs on every session, or NULL */          \
    struct sockaddr_storage listen_addr;                                                                 \
    struct sockaddr_storage server_addr;                                                                 \
    struct sg_udp listener;                                                                              \
    struct sg_chain *chain;         /* the filters, or NULL */                                           \
    struct sg_sign_key *sign_key;   /* signs recordings (`sign_key`), or NULL; the route's life */       \
    struct sg_anon_key *anon_key;   /* client pseudonyms (`anonymize yes`), or NULL; the route's life */ \
    struct sg_delay_queue delay;    /* datagrams filters hold back */                                    \
    struct sg_master *master;       /* heartbeats (`master`), or NULL: a game without them */            \
    struct sg_spectate *spect;      /* the spectator port (`spectate`, worker 0), or NULL */             \
    int open_handles; /* handles (its own and its sessions' sockets) whose close                         \
                         callback is pending or due */                                                   \
    struct sg_counters counters;                                                                         \
    uint64_t sessions_total;                                                                             \
    struct sg_warn_limit warn_session_limit, warn_rate_limit, warn_no_socket, warn_evicted;              \
    struct sg_warn_limit warn_unanswered;  /* sessions ended never answered */                           \
    struct sg_warn_limit warn_undecoded;   /* unanswered sessions whose first datagram failed */         \
    struct sg_warn_limit warn_unreachable; /* sessions told port unreachable */                          \
    struct sg_hist resid[2];                                                                             \
    uint64_t resid_untimed;                                                                              \
    struct sg_udp_batch batch;                                                                           \
    struct sg_outbox outbox;                                                                             \
    uint8_t *drain_buf, *drain_cbuf;                                                                     \
    bool send_first;                                                                                     \
    struct sg_deferred *dq_head, *dq_tail;                                                               \
    size_t dq_n, dq_bytes;                                                                               \
    size_t dq_limit;       /* its bound in datagrams: SG_DEFER_MAX (in-process tests lower it) */        \
    uint64_t dq_max;       /* the longest the queue has been */                                          \
    uint64_t dq_overflows; /* datagrams decoded at once because the queue was full */                    \
    struct sg_deferred *dq_spares; /* decoded entries kept for reuse (SG_DEFER_SPARES) */                \
    unsigned dq_nspare;            /* entries of the spare size alive: queued or kept */                 \
    struct sg_route_share *share; /* this loop's sessions count in share->nsessions */                   \
    uint64_t rtt_samples[2], rtt_sum_ms[2]; /* round trips timed, by leg (rtt_ms) */                     \
    const struct sg_codec_route_by *rb_hooks;                                                            \
    struct sg_route *route;              /* the route these fields are of */ \
    const struct sg_relay_hooks *hooks; /* the route's hooks (route.c) */

struct sg_relay {
    SG_RELAY_FIELDS
};

/* Count one event of `w`; returns the events to report now (0: stay quiet). */
uint64_t sg_warn_count(struct sg_warn_limit *w, uint64_t now);
/*
 * A client address as slipgate writes it: "1.2.3.4:5678", or its pseudonym
 * "anon-XXXXXXXX" on a route with `anonymize yes`.  Returns `buf`.
 */
char *sg_relay_client_name(const struct sg_relay *r, const struct sockaddr *sa, char *buf,
                           size_t cap);

struct sg_session {
    struct sg_route *route;
    struct sg_relay *relay; /* = what the session sees of `route` */
    struct sg_session *hnext;       /* hash chain */
    struct sg_session *prev, *next; /* route's list of live sessions */
    struct sockaddr_storage client;
    struct sockaddr_storage server; /* the server this session talks to */
    struct sg_udp upstream; /* connected to `server` */
    uint64_t last_active;   /* uv_now() of the last datagram either way */
    uint64_t left_ms;       /* uv_now() of the client's decoded disconnect; 0: none since */
    uint64_t created;       /* uv_now() when it started */
    enum sg_session_stage stage;
    struct sg_session *wprev, *wnext; /* the route's waiting list of its stage (not ESTABLISHED) */
    bool closing;
    bool refused_logged; /* the server's "port unreachable" was reported */
    bool probed;                  /* the game is decided (auto: probing ended) */
    const struct sg_codec *game;  /* the session's game (relay hooks), or NULL */
    union sg_relay_state gstate;  /* its relay hooks' state */
    int32_t qport;                /* the client's qport (its own datagrams), or -1 */
    const struct sg_codec *hs;    /* whose handshake hook runs on this session, or NULL */
    union sg_relay_state hs_state;
    bool hs_refused_logged;       /* a refused handshake move was reported */
    struct sg_session *host_next;           /* the route's chain of sessions of one host */
    struct sockaddr_storage prev_client;    /* the address before a qport move (family 0: none) */
    uint64_t client_seen;                   /* uv_now() of the last datagram from `client` */
    struct sockaddr_storage client_anon;    /* `client`'s pseudonymous address (anonymize yes) */
    uint64_t moved_ms;                      /* uv_now() of its last qport move (0: none) */
    const struct sg_codec *codec; /* decoding this session (game with a decoder), or NULL */
    void *cstate;                 /* the codec's per-session state */
    uint64_t decode_errors;       /* reported once in the log */
    void **slots;                 /* one per filter of the route's chain, or NULL */
    struct sg_filter_session fsess; /* what filters see of this session */
    struct sockaddr_storage upstream_local; /* the upstream socket's own address */
    char server_str[64];
    struct sg_frame raw_frame; /* for datagrams no codec decodes */
    struct sg_session_summary sum;
    char map[64]; /* the level the server last announced, "" until then (proxy/http.c) */
    bool sync_only; /* a changing filter saw its frames: never send-first again (codec numbering) */
    /* Muted from the HTTP API: the client's chat is removed before it reaches
     * the server (set with the loops paused; read by the session's loop). */
    bool muted;
    uint64_t muted_msgs; /* chat messages removed */
    /* route_by prx: the client's connect, held until the next hop's challenge
     * comes (then sent with it and freed), or NULL. */
    struct sg_route_by_req *rb_req;
    uint64_t rb_asked; /* uv_now() of the last challenge request to the next hop */
    struct sg_rtt_probe rtt[2]; /* by the probe's direction (sum.rtt_ms) */
};

/* A datagram sent before it was decoded, waiting for its decoding (session.c). */
struct sg_deferred {
    struct sg_deferred *next;
    struct sg_session *s;
    uint64_t now_ms; /* uv_now() when it arrived */
    uint32_t len;
    uint8_t dir;
    bool spare; /* holds SG_DEFER_SPARE_LEN bytes: kept for reuse when decoded */
    uint8_t data[];
};

/* Send-first decoding: at most this much of it per loop turn; the queue's bounds. */
#define SG_DEFER_BUDGET_NS (200 * 1000)
#define SG_DEFER_MAX       4096
#define SG_DEFER_BYTES     (4 * 1024 * 1024)
/* Up to SG_DEFER_SPARES queue entries of SG_DEFER_SPARE_LEN bytes (a game
 * datagram's size) are reused instead of freed, so that the send-first
 * path calls no malloc or free per datagram. */
#define SG_DEFER_SPARES    16
#define SG_DEFER_SPARE_LEN 1536

/* Sessions (proxy/session.c). */
/* Recompute r->send_first (the chain or `reencode` changed); drains the queue first. */
void sg_route_send_first_update(struct sg_relay *r);
/* Decode every datagram waiting in the send-first queue, in arrival order. */
void sg_route_deferred_drain(struct sg_relay *r);
/* A new session for `client` (0, *out set), or a negative errno: no socket
 * towards the server could be opened (counted and logged here). */
int sg_session_create(struct sg_relay *r, const struct sockaddr *client, struct sg_session **out);
/* The same towards `server` (NULL: the route's). */
int sg_session_create_to(struct sg_relay *r, const struct sockaddr *client,
                         const struct sockaddr *server, struct sg_session **out);
/* route_by prx: hold `req` (taken, heap) and ask the next hop for its challenge. */
void sg_session_route_by_start(struct sg_session *s, struct sg_route_by_req *req);
/* A client's datagram for its session; `at`: its receive time (struct sg_udp_batch), 0 unknown. */
void sg_session_forward_to_server(struct sg_session *s, const uint8_t *data, size_t len,
                                  uint64_t at);
/* What became of a datagram the route's outbox sent for a session (sg_outbox_done_cb). */
void sg_session_sent(void *session, uint8_t dir, const uint8_t *data, size_t len, int err,
                     int64_t resid_ns);
void sg_session_close(struct sg_session *s, const char *reason);
/* The route's chain is being replaced: end the session's filter state for `old`. */
int sg_session_chain_changed(struct sg_session *s, struct sg_chain *old, struct sg_chain *now);
/* Send a datagram the delay queue releases. */
void sg_session_send_delayed(struct sg_session *s, enum sg_dir dir, const uint8_t *data,
                             size_t len);

/*
 * What filter `i` of `chain` (the session's slots belong to it) wrote for
 * the session, through its `figures` hook (filters/filter.h): false when it
 * has none or no slot.  sg_session_record_summary adds the figures of every
 * filter of `chain` to `sum` (demos added, demo replaced by the last one);
 * when the session's slots end, each filter's `finish` hook runs first, so
 * that the summary counts the file being written.
 */
bool sg_session_slot_figures(const struct sg_session *s, const struct sg_chain *chain, int i,
                             struct sg_filter_figures *out);
void sg_session_record_summary(const struct sg_session *s, const struct sg_chain *chain,
                               struct sg_session_summary *sum);
/* What the session's codec decoded of the game (sg_codec.info; "" where not
 * known), the level falling back to the one its frames announced. */
void sg_session_game_info(const struct sg_session *s, struct sg_codec_info *out);
/* The player's ping as slipgate measures it: the sum of the legs known
 * (sum.rtt_ms), or -1 when none is. */
int32_t sg_session_ping_ms(const struct sg_session_summary *sum);

#endif
