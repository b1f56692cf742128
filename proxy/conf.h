/*
 * The proxy's configuration: the top-level settings and one block per
 * route.  The directive tables live beside the structs they fill
 * (proxy/conf.c); the generic reader is config/config.h.
 */
#ifndef SG_PROXY_CONF_H
#define SG_PROXY_CONF_H

#include "config/config.h"
#include "filters/chain.h"
#include "proxy/ban.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

struct sg_codec;

/*
 * A route's `protocol`: SG_PROTO_AUTO, or 1 + the game's index in the codec
 * registry (protocols/codec.c, the one list of games).
 */
enum { SG_PROTO_AUTO = 0 };
/* "auto" or the game's name; `protocol` as above. */
const char *sg_protocol_name(int protocol);
/* The game a route's `protocol` names, or NULL for auto. */
const struct sg_codec *sg_protocol_codec(int protocol);
/* The i-th name `protocol` accepts ("auto", then the registry's games), NULL past the last. */
const char *sg_protocol_choice(int i);

#define SG_DEFAULT_LISTEN "0.0.0.0:27960"
#define SG_CONF_MAX_WORKERS 64 /* `workers` at most */
#define SG_WORKERS_DEFAULT_MAX 8 /* the default (one loop per CPU) at most */
/* upstream source addresses */
#define SG_UPSTREAM_SOURCES_MAX 64 /* `upstream_source` addresses a route may have */

enum sg_reencode {
    SG_REENCODE_CHANGED, /* only frames a filter changed (default) */
    SG_REENCODE_ALWAYS,  /* every decoded message: proves the encoder on real traffic */
};
extern const char *const sg_reencode_names[];

/* Where a route's sessions go: its `server`, or where the client's chain says. */
enum sg_route_by {
    SG_ROUTE_BY_FIXED,
    SG_ROUTE_BY_PRX,
};
extern const char *const sg_route_by_names[];

/* What a route does with a datagram its codec cannot decode whole. */
enum sg_undecodable {
    SG_UNDECODABLE_RELAY, /* relay it as it came (rule 1, the default) */
    SG_UNDECODABLE_DROP,  /* drop it: no filter is bypassed by what it cannot read (fail closed) */
};
extern const char *const sg_undecodable_names[];

/* Master servers: one `master` address, where the config gave it. */
struct sg_master_conf {
    char *addr; /* HOST:PORT */
    int line, col;
};

/* One `route NAME { ... }` block: listen -> server. */
struct sg_route_conf {
    char *name;
    char *listen; /* ADDR */
    char *server; /* ADDR */
    int protocol; /* enum sg_protocol */
    int64_t idle_timeout_ms;
    int64_t handshake_timeout_ms; /* a session not yet established ends after this long */
    int64_t max_sessions;
    int64_t new_sessions_per_source; /* per second, per source IP */
    int64_t source_prefix_v6;        /* an IPv6 source is its first this many bits */
    int64_t socket_buffer;           /* listener's SO_RCVBUF/SO_SNDBUF; 0 = the system's */
    int reencode;                    /* enum sg_reencode */
    int undecodable;                 /* enum sg_undecodable */
    int nq_accept_low, nq_accept_high; /* ports a NetQuake accept may move a session to */
    char *record;                    /* directory for network-side demos, or NULL */
    int record_line;                 /* where `record` was given (0: command line) */
    char *sign_key;                  /* secret key signing recordings (or the top level's), or NULL */
    int64_t sign_interval_ms;        /* checkpoints this often (0: the top level's, or 10 s) */
    int sign_key_line;               /* where sign_key was given (0: top level or command line) */
    int anonymize;                   /* 1: client pseudonyms (filters/anon.h); -1 until validated: the top level's */
    char *anonymize_key;             /* the pseudonyms' key file (or the top level's, or the default) */
    int anonymize_key_line;          /* where anonymize_key was given (0: top level or command line) */
    /* residence times */
    int residence_off;               /* `residence off`: 1; -1 until validated: the top level's */
    /* readiness probe */
    int ready_probe;                 /* `ready_probe on`: 1; -1 until validated: the top level's */
    bool page_probe;                 /* `http` is on: a server whose traffic does not name it is
                                        asked its status for the page (set at validation) */
    int64_t ready_probe_timeout_ms;  /* the top level's (set at validation) */
    struct sg_filter_list *filters;  /* `filter` blocks in order (a reference), or NULL */
    /* bans and admin controls (proxy/ban.h) */
    struct sg_ban_list *bans;        /* `ban` lines, then the `ban_file`s' (a reference), or NULL */
    struct sg_conf_list ban_files;   /* `ban_file FILE` lines, read at validation */
    struct sg_ban_list *admin_from;  /* where remote administration may come from; NULL: anywhere */
    /* upstream source addresses: each new session's upstream socket binds
     * the next address (port 0) of the server's family, in turn */
    struct sockaddr_storage upstream_source[SG_UPSTREAM_SOURCES_MAX];
    int nupstream_source;
    struct sg_conf *top;             /* the configuration it belongs to */
    int line;                        /* where the block opens (0: command line) */
    int listen_line, listen_col;     /* where `listen` was given (0: default or command line) */
    int server_line, server_col;     /* where `server` was given (0: command line) */
    /* route_by prx (client-directed routing, QuakeWorld proxy chains) */
    int route_by;                  /* enum sg_route_by */
    struct sg_conf_list prx_allow; /* allow-list entries given inline */
    char *prx_allow_file;          /* allow-list file (one entry a line), or NULL */
    int64_t prx_max_hops;          /* chains naming more hops are refused */
    int64_t prx_chains_per_minute; /* new chains one source IP may start a minute */
    int64_t prx_ping_interval_ms;  /* each allowed server pinged this often (0: never) */
    /* Master servers */
    struct sg_master_conf *masters;  /* `master HOST:PORT ...`, in order */
    int nmasters;
    int64_t master_interval_ms;      /* heartbeats this often; 0: the game's own period */
    /* spectators */
    char *spectate;                  /* `spectate ADDR:PORT`: the spectator port, or NULL */
    int spectate_line, spectate_col; /* where it was given */
    int64_t spectate_delay_ms;       /* every spectator sees the game this late (0: live) */
    char *spectate_password;         /* the spectators' password (userinfo `password`), or NULL */
    int64_t max_spectators;          /* spectators at once on the port */
    struct sg_route_conf *next;
};

/* The whole file. */
struct sg_conf {
    int log_level; /* enum sg_log_level */
    char *stats_file;
    int stats_file_line; /* where `stats_file` was given (0: command line) */
    int64_t stats_interval_ms; /* a `stats` log line per route this often; 0 = never */
    char *http;                /* `http ADDR:PORT`: the web page and /metrics, or NULL (off) */
    int http_line, http_col;   /* where `http` was given (0: command line) */
    char *http_token;          /* required from HTTP clients when set */
    int64_t http_idle_timeout_ms; /* idle HTTP connections closed after this (0: 30 s) */
    char *file; /* the file it came from, or NULL */
    struct sg_route_conf *routes;
    int nroutes;
    struct sg_plugin *plugins; /* `plugin PATH` lines, in order (references) */
    char *sign_key;            /* every route's, unless the route sets its own */
    int64_t sign_interval_ms;  /* 0: SG_SIGN_DEFAULT_INTERVAL_MS */
    int sign_key_line;
    int anonymize;             /* every route's, unless the route sets its own (0: no) */
    char *anonymize_key;       /* every route's, unless the route sets its own */
    int anonymize_key_line;
    /* residence times */
    int residence_off; /* `residence off` (every route that sets none): 1 */
    int64_t workers; /* `workers N`: worker loops; 0 = not set (SLIPGATE_WORKERS, else 1) */
    /* Health and draining: SIGTERM drains for at most this long (0: stops at once). */
    int64_t drain_timeout_ms;
    /* Ports from the kernel (`listen`/`http` port 0). */
    char *ports_file; /* `ports_file FILE`: every listener's real address, or NULL */
    /* readiness probe: /ready also needs each route's server to answer a status query */
    int ready_probe;                /* `ready_probe on` (every route that sets none): 1 */
    int64_t ready_probe_timeout_ms; /* an answer within this long (0: SG_READY_PROBE_TIMEOUT_MS) */
};

/* readiness probe */
#define SG_READY_PROBE_TIMEOUT_MS 10000

/* Command-line settings layered over the file (owned by the caller). */
struct sg_conf_overrides {
    const char *listen, *server, *protocol; /* -l -s -p, NULL when absent */
    const char *record;                     /* --record DIR: every route */
    int nsets;
    const char *const *sets; /* 2 * nsets strings: NAME, VALUE pairs from +set */
    int verbosity;           /* -v minus -q */
    int workers;             /* -w N, 0 when absent */
};

/*
 * Take `+set NAME VALUE` triples out of argv (getopt would see them as
 * operands): argv keeps argv[0] and the rest in order, NULL-terminated;
 * `*sets` (heap, free it) gets the NAME, VALUE pairs.  Another `+word` or a
 * `+set` short of its two words is a usage error, told on stderr as `prog`
 * ("slipgate", "slipgate doctor"): returns -1.
 */
int sg_conf_extract_sets(const char *prog, int *argc, char **argv, const char ***sets,
                         int *nsets);

extern const struct sg_conf_section sg_conf_top_section;
extern const struct sg_conf_section sg_conf_route_section;

/*
 * Build a configuration from `path` (may be NULL) and the command line.
 * On success returns 0 and a heap conf in `*out` (free with
 * sg_conf_destroy); on failure returns SG_E_CONFIG with every problem in
 * `diag`.
 */
int sg_conf_load(const char *path, const struct sg_conf_overrides *ov, struct sg_conf **out,
                 struct sg_conf_diag *diag);
void sg_conf_destroy(struct sg_conf *conf);

/* Copy `n` master entries (strings too) into a new array; NULL with n > 0: no memory. */
struct sg_master_conf *sg_master_conf_copy(const struct sg_master_conf *m, int n);
void sg_master_conf_free(struct sg_master_conf *m, int n);

/* The route named `name`, or NULL. */
struct sg_route_conf *sg_conf_route(struct sg_conf *conf, const char *name);

#endif
