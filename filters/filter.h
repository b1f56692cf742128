/*
 * The filter interface: what every built-in filter and every plugin
 * implements (the nginx filter-module model, without global chain
 * pointers).  This header is installed for plugin authors; it depends only
 * on protocols/codec.h and config/config.h.
 *
 * A route holds a chain of filter instances in config order:
 *
 *     route main {
 *         server 127.0.0.1:27960
 *         filter rewrite {               # filter NAME [LABEL] { directives }
 *             replace "badword" "*****"
 *         }
 *         filter inspect { level messages }
 *     }
 *
 * For every datagram of every session, in either direction, the proxy asks
 * the session's codec to decode it into a frame (protocols/codec.h), then
 * calls each filter's on_frame() in chain order.  A filter answers:
 *
 *   SG_FILTER_PASS     nothing to do with this frame
 *   SG_FILTER_CHANGED  it changed a message (through sg_filter_set_text /
 *                      sg_filter_drop_msg) or injected one; the frame is
 *                      re-encoded before it is sent
 *   SG_FILTER_DROP     the datagram is not sent; the receiver sees loss
 *                      (no renumbering: a dropped datagram looks like network
 *                      loss to the game); later filters do not see it
 *   < 0                an error: counted against the filter, the frame
 *                      goes on as if the filter had passed
 *
 * Filters with `tap` set only watch: they are called after the chain and
 * after re-encoding, in config order, with the frame as it was sent (or
 * marked dropped), and their verdict is ignored.  Recorders, capture
 * writers and the inspector are taps.
 *
 * Every filter starts by deciding whether a frame concerns it and passes
 * otherwise.  Frames of sessions the proxy cannot decode arrive too, as
 * SG_FRAME_RAW with no messages: rate limiters and network emulators act
 * on them, text filters pass.
 *
 * Per-session state lives in a slot (call->slot) the filter fills when it
 * first acts; session_end() is called at the end of a session for every
 * filter whose slot is not NULL.  Per-route state comes from create().
 * Nothing is global: every piece of state hangs off a route or a session,
 * so that routes and worker loops never share mutable state.
 *
 * Plugins: a shared object exporting
 *
 *     const struct sg_filter_plugin *slipgate_filter_plugin(void);
 *
 * returning a table whose abi is SG_FILTER_ABI.  Loaded with
 * `plugin PATH` at the top of the config file; a different abi is refused
 * at start-up with a message naming the file and both versions.
 */
#ifndef SG_FILTERS_FILTER_H
#define SG_FILTERS_FILTER_H

#include "config/config.h"
#include "protocols/codec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Bumped whenever this header changes incompatibly. */
#define SG_FILTER_ABI 1

enum sg_filter_verdict {
    SG_FILTER_PASS = 0,
    SG_FILTER_CHANGED = 1,
    SG_FILTER_DROP = 2,
};

/* One leg of the relay, for taps that see datagrams (pcap, inspect packets). */
enum sg_leg {
    SG_LEG_CLIENT_IN,  /* client -> proxy (received on the listener) */
    SG_LEG_SERVER_OUT, /* proxy -> server (sent on the session's upstream socket) */
    SG_LEG_SERVER_IN,  /* server -> proxy */
    SG_LEG_CLIENT_OUT, /* proxy -> client */
};

/* What a filter knows of the session a frame belongs to (owned by the proxy). */
struct sg_filter_session {
    uint64_t id;                   /* session number, unique in the process */
    const char *route;             /* route name */
    const char *client;            /* "127.0.0.1:51234" or "[::1]:51234" */
    const char *server;            /* the server's address, same form */
    const struct sockaddr *client_addr;
    const struct sockaddr *listen_addr; /* the proxy's listening address */
    const struct sockaddr *upstream_addr; /* the session's own socket towards the server */
    const struct sockaddr *server_addr;
    uint64_t started_ms;           /* wall clock, ms since the epoch */
    const struct sg_codec *codec;  /* decoding this session, or NULL */
    void *codec_state;             /* for codec calls (demo writer, dump), or NULL */
    /* Signed recordings (filters/sign.h): the route's key, or NULL; checkpoint interval. */
    const struct sg_sign_key *sign_key; /* valid for the session's life */
    int64_t sign_interval_ms;
    /*
     * `anonymize yes` (filters/anon.h): the client's pseudonymous address,
     * or NULL.  `client` and `client_addr` are then the pseudonym's too;
     * on_datagram's from/to still carry the real address (where datagrams
     * go), which a tap that writes addresses replaces with this one.
     */
    const struct sockaddr *client_anon;
};

struct sg_filter_proxy; /* the proxy's side of a call: opaque */
struct sg_sign_key;     /* filters/sign.h */

/* One call of on_frame. */
struct sg_filter_call {
    const struct sg_filter_session *session;
    const struct sg_frame *frame; /* decoded, or SG_FRAME_RAW with only the bytes */
    const uint8_t *data;          /* the datagram as it arrived */
    size_t len;
    uint64_t now_ms;              /* the loop's monotonic clock */
    void **slot;                  /* this filter's per-session state (NULL until it acts) */
    void *route_state;            /* what create() returned */
    const void *conf;             /* the filter's parsed configuration */

    /* taps only: what happened to the frame */
    bool dropped;      /* a filter dropped it (not sent) */
    bool reencoded;    /* the datagrams sent were rebuilt from the decoded form */
    int drop_filter;   /* index in the chain of the filter that dropped it, or -1 */

    /* set by a filter (network emulation); applied to every datagram of the frame */
    uint32_t delay_ms; /* hold the datagrams this long before sending */
    uint8_t copies;    /* extra copies to send (duplication) */

    struct sg_filter_proxy *proxy; /* for the helper functions below */
};

/* Logging, with the filter's name and the session prefixed. */
enum sg_filter_log_level { SG_FILTER_LOG_ERROR, SG_FILTER_LOG_WARN, SG_FILTER_LOG_INFO, SG_FILTER_LOG_DEBUG };

/* What a filter's slot wrote for its session (files such as demos), for
 * --stats, /metrics and the session's summary (the `figures` hook). */
struct sg_filter_figures {
    uint32_t files;        /* files written */
    uint64_t bytes;        /* the bytes of those finished (closed) */
    const char *last;      /* the last file's path, or NULL; valid until session_end */
    const char *open_path; /* the file being written now, or NULL */
    uint64_t open_bytes;   /* its size so far */
    uint64_t opened_ms;    /* when it was opened (wall clock, ms) */
};

struct sg_filter_impl {
    const char *name;        /* "rewrite": what `filter NAME { }` names */
    const char *description; /* one line for `slipgate filters` */
    const char *example;     /* a working config snippet (the block), for docs; may be NULL */
    bool tap;                /* watches only: called after the chain (see above) */

    /* Configuration: an object of conf_size bytes filled by the directives. */
    size_t conf_size;
    const struct sg_conf_directive *directives; /* ends with {NULL}; may be NULL */
    void (*conf_init)(void *conf);              /* defaults; may be NULL (all zero) */
    /*
     * Called once the block is read: check the settings together and
     * prepare derived data (compile patterns).  Return 0, or a negative
     * error after writing a message into err (the proxy adds file:line).
     */
    int (*conf_check)(void *conf, char *err, size_t errlen);
    void (*conf_free)(void *conf); /* frees what conf_check made; lists and strings are freed for it */

    /* Per route (each route of the config gets its own instance). */
    int (*create)(const void *conf, void **route_state, char *err, size_t errlen);
    void (*destroy)(void *route_state);

    /* Every frame of the route's sessions; see the verdicts above. */
    int (*on_frame)(struct sg_filter_call *call);
    /* Taps that want every datagram on each leg (after it was sent or received); may be NULL. */
    void (*on_datagram)(struct sg_filter_call *call, enum sg_leg leg, const uint8_t *data,
                        size_t len, const struct sockaddr *from, const struct sockaddr *to);
    /* The session ended; free the slot.  Called only when *slot != NULL. */
    void (*session_end)(void *route_state, const struct sg_filter_session *session, void *slot);
    /* Flush buffered output (periodically, and before the process exits); may be NULL. */
    void (*flush)(void *route_state);

    /* Added at the end, so that the layout above stays the plugins' (ABI 1):
     * slipgate reads these two of built-in filters only, never of a
     * plugin's table (one built on an older filter.h ends at `flush`). */
    /* What the slot wrote so far (`out` zeroed by the caller); may be NULL. */
    void (*figures)(const void *slot, struct sg_filter_figures *out);
    /* The session is ending: finish what the slot is writing, as its
     * session_end would, so that the figures taken next count it (then
     * session_end runs as ever).  May be NULL. */
    void (*finish)(void *slot, const struct sg_filter_session *session);
};

/* What a plugin's entry point returns. */
struct sg_filter_plugin {
    unsigned abi;                              /* SG_FILTER_ABI the plugin was built with */
    const char *name;                          /* the plugin's own name, for messages */
    const struct sg_filter_impl *const *filters; /* NULL-terminated */
};
typedef const struct sg_filter_plugin *(*sg_filter_plugin_entry)(void);
#define SG_FILTER_PLUGIN_ENTRY "slipgate_filter_plugin"

/* ---- what a filter may ask of the proxy during on_frame ---- */

/*
 * Replace the text of message `i` of the frame (a text kind, not a repeat).
 * The codec re-quotes it as the game needs.  Return 0, or a negative error
 * (SG_E_UNSUPPORTED when the codec cannot change that message).  The
 * filter then returns SG_FILTER_CHANGED.
 */
int sg_filter_set_text(struct sg_filter_call *call, unsigned i, const char *text, size_t len);

/* Remove message `i` from the frame (reliable numbering is translated). */
int sg_filter_drop_msg(struct sg_filter_call *call, unsigned i);

/*
 * Send a new text message towards `dir`'s receiver (for example
 * SG_DIR_S2C, SG_MSG_PRINT, "recording started\n").  It travels in the
 * next message the codec sends that way; numbering is translated for the
 * rest of the session.  Return 0, or a negative error (no codec, the codec
 * cannot inject that kind, too many pending).
 */
int sg_filter_inject(struct sg_filter_call *call, enum sg_dir dir, enum sg_msg_kind kind,
                     const char *text, size_t len);

/* Log a line with the filter's name and the session. */
void sg_filter_log(struct sg_filter_call *call, enum sg_filter_log_level level, const char *fmt,
                   ...) __attribute__((format(printf, 3, 4)));

/* ---- for filters that work on text ---- */

/* Message kinds a text filter acts on by default: every text kind. */
static inline bool sg_msg_kind_is_text(enum sg_msg_kind k)
{
    return k != SG_MSG_GAME;
}

#endif
