/*
 * The codec interface: one game protocol behind one table of function
 * pointers (the wlroots backend_impl model).  A codec turns datagrams into
 * decoded frames and back, and writes the game's demo files; offline it
 * reads them and decodes captured sessions (`slipgate demo`, `slipgate
 * pcap decode`).  It does no socket I/O and knows nothing of libuv; the
 * proxy owns the sockets and the files.
 *
 * Per session the proxy calls create() once, decode() for every datagram in
 * either direction (the codec keeps both sides' views: client and server
 * may come to know different things, and each is encoded for its receiver),
 * and encode() when a frame must be rebuilt (a filter changed it, or the
 * route says `reencode always`).  Datagrams a codec cannot decode are still
 * relayed by the proxy, as they came: decode() then returns a negative
 * error and marks the frame SG_FRAME_RAW.
 */
#ifndef SG_PROTOCOLS_CODEC_H
#define SG_PROTOCOLS_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum sg_dir {
    SG_DIR_C2S, /* client to server */
    SG_DIR_S2C, /* server to client */
};

/* What the proxy should do with a decoded datagram. */
enum sg_frame_kind {
    SG_FRAME_RAW,      /* nothing to rebuild: relay the datagram as it came */
    SG_FRAME_OOB,      /* an out-of-band (connectionless) packet: relay */
    SG_FRAME_PARTIAL,  /* one piece of a message still incomplete */
    SG_FRAME_MESSAGE,  /* a whole message, ready to rebuild or record */
    SG_FRAME_REJECTED, /* the receiver will drop it (old, duplicate, bad checksum): relay */
};

/*
 * Cross-game message kinds: every codec maps its messages onto these where
 * it can, so one filter works for every game.  Text kinds carry a text.
 */
enum sg_msg_kind {
    SG_MSG_PRINT,          /* text shown in the console / notify area */
    SG_MSG_CENTERPRINT,    /* text in the middle of the screen */
    SG_MSG_CHAT,           /* a chat line (S2C) or a say command (C2S) */
    SG_MSG_SERVER_COMMAND, /* any other command from the server */
    SG_MSG_CLIENT_COMMAND, /* any other command from the client */
    SG_MSG_STUFFTEXT,      /* console text the server makes the client execute */
    SG_MSG_CONFIGSTRING,   /* a configstring (number = index) */
    SG_MSG_DISCONNECT,     /* the server ends the connection (text: reason, may be empty) */
    SG_MSG_GAME,           /* anything else (snapshots, moves, ...): no text */
    SG_MSG_KIND_COUNT
};

/* "print", "centerprint", "chat", "servercmd", "clientcmd", "stufftext",
 * "configstring", "disconnect", "game"; static. */
const char *sg_msg_kind_name(enum sg_msg_kind kind);
/* The kind called `name` (as above), or -1. */
int sg_msg_kind_parse(const char *name);

/* One message of a frame, as filters see it (codec-owned). */
struct sg_msg {
    enum sg_msg_kind kind;
    const char *name; /* the game's own name: "svc_serverCommand", "clc_move", ... */
    int32_t number;   /* reliable sequence, configstring index, ...; -1 when none */
    const char *text; /* text kinds: NUL-terminated (raw bytes, may be > 127); else NULL */
    size_t text_len;
    const char *command; /* text kinds: the whole command as the game reads it ("print \"hi\n\""),
                            or the same as text */
    bool repeat;   /* a resend of a reliable message already shown: its first verdict applies */
    bool dropped;  /* a filter removed it */
    bool changed;  /* a filter changed its text */
    bool injected; /* a filter's injection the codec added when it rebuilt the frame (taps) */
};

/* One decoded datagram; owned by the codec state, valid until its next call. */
struct sg_frame {
    enum sg_dir dir;
    enum sg_frame_kind kind;
    int32_t sequence;   /* netchan sequence, when there is one */
    int32_t ack;        /* the sequence it acknowledges, -1 when none */
    int32_t reliable_ack; /* the last reliable command of the receiver it acknowledges, or -1 */
    int pieces;         /* datagrams the message came in (MESSAGE) */
    const uint8_t *msg; /* the message as a demo records it (MESSAGE) */
    size_t msg_len;
    bool new_level; /* S2C: this message starts a level (a gamestate) */
    char level[64]; /* with new_level: the map name, for file names */
    /* The messages in it (MESSAGE; OOB: one).  When encode() carried injected
     * messages, it appends them, marked injected, for the taps to see. */
    struct sg_msg *msgs;
    unsigned nmsgs;
    void *game;     /* the codec's own decoded form */
    /*
     * C2S MESSAGE: the client leaves the game with this message (Quake 3:
     * a `disconnect` command, sent after its own demo has ended).  Set on
     * every copy the client sends.  Recorders end the demo here and record
     * nothing more of the connection: a recording ends where the player's own
 * demo would.  Appended last:
     * plugins built against the older layout read the fields above.
     */
    bool disconnect;
    /*
     * Part of the datagram was left undecoded (an extension slipgate cannot
     * read, relayed as raw bytes): messages in that part are not in `msgs`
     * and no filter saw them.  A route with `undecodable drop` drops such
     * datagrams as it drops those decode() failed on.  Appended after
     * disconnect.
     */
    bool undecoded;
    /*
     * The number the other side's `ack` (where a frame has none, its
     * `reliable_ack`) names once this datagram reached it, or -1: none
     * will (a NetQuake unreliable datagram).  A Quake 3 client's datagram
     * names its newest new reliable command (its server acknowledges no
     * sequence, only commands), or -1.  The proxy times the round trip
     * between the two (a player's ping).  Appended last.
     */
    int32_t ack_wanted;
};

/* A session's game as the status page shows it (sg_codec.info): "" = not known. */
struct sg_codec_info {
    char hostname[64];
    char map[64];
    char player[64];
    /* The netchan's loss, per direction (enum sg_dir): the sequence numbers
     * skipped (`lost`) among those that arrived in order (`sequenced`);
     * both 0 where the codec does not count them. */
    uint64_t lost[2], sequenced[2];
};

/* How much of a frame a codec's dump() shows. */
enum sg_dump_level {
    SG_DUMP_PACKETS,  /* one line per datagram */
    SG_DUMP_MESSAGES, /* plus one line per message */
    SG_DUMP_FIELDS,   /* plus every field of every message */
};

/* Receives each rebuilt datagram; returns 0 or a negative error. */
typedef int (*sg_emit_fn)(void *ctx, const uint8_t *data, size_t len);

/* Counters a codec keeps per session (for logs and --stats). */
struct sg_codec_stats {
    uint64_t decoded, errors, messages, reencoded, reencode_identical, reencode_errors;
    uint64_t rejected, oob;
};

/* Per session, per game: what the relay hooks remember (zeroed at start). */
union sg_relay_state {
    uint64_t align;
    unsigned char bytes[32];
};

/* What a handshake hook knows of the session's sockets. */
struct sg_relay_ctx {
    int listen_port;           /* slipgate's port the client talks to */
    int server_port;           /* the server port the session talks to now */
    int port_low, port_high;   /* the ports a server may move a session to (nq_accept_ports) */
    /* Is `port` of the server's host one of slipgate's own sockets (a
     * listener's or a session's)?  A move there would loop through slipgate
     * itself.  NULL: none is. */
    bool (*own_port)(const void *opaque, int port);
    const void *opaque;
};

/*
 * What a handshake hook asks of the proxy: first point the session's
 * upstream socket at `server_port` of the server's host (when > 0), then
 * relay `data` (hook-owned, valid until its next call; NULL: the datagram as
 * it came).  `label` names the step for the log ("NetQuake accept"); with
 * `moved` the proxy logs the move at info; `refused` says why the hook did
 * not follow a move to `refused_port` (the proxy logs it once per session).
 */
struct sg_relay_move {
    int server_port;
    const uint8_t *data;
    size_t len;
    const char *label;
    bool moved;
    /* A connect request is out: the answer may be followed by the server's
     * first datagrams from the port it names, so the proxy must not let
     * the kernel drop them before it has seen the answer. */
    bool awaiting;
    const char *refused;
    int refused_port;
};

/*
 * Offline tools (`slipgate demo`, `slipgate pcap decode`): what a game
 * offers for its demo files and its captured sessions.  The proxy finds a
 * file's game and a capture flow's game through the codec table, opens the
 * files and reads the capture; these hooks do everything game-specific and
 * print their own report lines to the streams they are given.
 */

/* Probe answers: a file's first bytes are this game's demo, are not, or are too few to tell. */
#define SG_DEMO_PROBE_NO      0
#define SG_DEMO_PROBE_YES     1
#define SG_DEMO_PROBE_UNKNOWN (-1)
/* How many first bytes of a file the probes are given (fewer when the file is shorter). */
#define SG_DEMO_HEAD_MAX 65536

/*
 * A game's demo reader.  `name` is the file's name (some formats take
 * their protocol from it); `in` is open for reading at offset 0 and
 * borrowed for the call, as is `out` (the file to write) and `report`
 * (stdout for the lines the command prints).  Each hook returns the number
 * of problems it found in the demo (0: clean; > 0: the command exits 1),
 * or a negative error that stopped it (I/O, memory), which the caller
 * reports.  `cut` may be NULL (a game whose demos cannot be cut yet).
 */
struct sg_demo_impl {
    /* The file name endings it reads, without the dot; NULL-terminated. */
    const char *const *extensions;
    /*
     * Do the first `len` bytes of a file start this format?  `len` is the
     * file's size when under SG_DEMO_HEAD_MAX.  Returns SG_DEMO_PROBE_*.
     */
    int (*probe)(const uint8_t *head, size_t len);
    int (*info)(FILE *in, const char *name, FILE *report);            /* `demo info` */
    int (*dump)(FILE *in, const char *name, bool json, FILE *report); /* `demo dump` */
    int (*reencode)(FILE *in, const char *name, FILE *out, FILE *report);
    int (*cut)(FILE *in, const char *name, FILE *out, int32_t from_ms, int32_t to_ms, FILE *report);
};

/* What a server's status answer says of it (sg_codec_status.parse). */
struct sg_codec_server {
    char hostname[64]; /* wire text, cut to fit, NUL terminated; "": the answer has none */
    char map[64];
    int players;     /* the players it lists or counts; -1: not said */
    int max_players; /* its player slots; -1: not said */
};

/*
 * A game's connectionless status query, for `slipgate doctor` and a
 * route's readiness probe (no state, no I/O).  Most games' query is fixed
 * text and their answer starts with fixed text: `query_text` and
 * `reply_text` say so.  A game whose query is binary gives `query` and
 * `is_reply` instead: `query` writes the datagram into `out` (`cap` bytes)
 * and returns its length, or -ENOSPC; `is_reply` tells whether a datagram
 * from the server is this game's answer to it.  Callers use
 * sg_codec_status_query() and sg_codec_status_is_reply(), which take either.
 */
struct sg_codec_status {
    const char *what; /* "getstatus", "status", "CCREQ_SERVER_INFO": for messages */
    int (*query)(uint8_t *out, size_t cap);
    bool (*is_reply)(const uint8_t *data, size_t len);
    const char *query_text; /* "\xff\xff\xff\xffstatus\n", with query NULL */
    const char *reply_text; /* what an answer starts with, with is_reply NULL */
    /*
     * Read an answer `is_reply` accepted (`data` borrowed for the call):
     * 0 with *out filled in, or SG_E_MALFORMED (an answer cut short or not
     * in the game's form; *out is then zeroed with both counts -1).  NULL:
     * the game's answer is not read (the proxy learns the server's name
     * from its sessions' traffic).  Appended last.
     */
    int (*parse)(const uint8_t *data, size_t len, struct sg_codec_server *out);
};

/*
 * A game's capture decoder: the proxy splits a capture's UDP datagrams
 * into flows (client address, server address) and feeds each flow's
 * datagrams, in capture order, to one flow object of its game.
 */
struct sg_capture_impl {
    const char *title; /* "Quake 3": the summary's "N not Quake 3 UDP" */
    /* Does this datagram's sender act as a client (1), a server (0), or can it not tell (-1)? */
    int (*role)(const uint8_t *data, size_t len);
    /*
     * A new flow; with `record_base` non-NULL ("DIR/127.0.0.1-27960",
     * borrowed for the call) it records the server's messages into
     * record_base + "." + the game's demo extension.  0 or -ENOMEM.
     */
    int (*create)(void **flow, const char *record_base);
    /*
     * Decode one datagram in `dir` and print the rest of its line to
     * `report` (after the proxy's "#frame time session dir len=" prefix,
     * newline included; JSON: the object's further members and its '}').
     * Returns the number of errors to count (decode, recording), never
     * negative; failures are told on stderr.
     */
    int (*datagram)(void *flow, enum sg_dir dir, const uint8_t *data, size_t len, bool json,
                    FILE *report);
    /* End the flow's recording (the capture is over).  Returns the number of errors. */
    int (*finish)(void *flow);
    /* Print the rest of the flow's summary line (after "session N: C -> S: "), newline included. */
    void (*summary)(void *flow, FILE *out);
    void (*destroy)(void *flow); /* accepts NULL */
};

/*
 * Client-directed routing (`route_by prx`): a game whose clients name their
 * route in the connect request (QuakeWorld's proxy chains, the qwfwd
 * convention: `prx "hop2:port@server:port"` in the userinfo).  The proxy
 * answers the client's challenge request itself (the destination is not
 * known before the connect), reads the chain from the connect, asks the next
 * hop for its own challenge and sends it the connect with the chain's rest.
 * No state, no I/O: every hook works on the bytes it is given.
 */
#define SG_ROUTE_BY_HOP_MAX      128  /* one hop "host:port", NUL included */
#define SG_ROUTE_BY_USERINFO_MAX 1024 /* the rewritten userinfo, NUL included */
#define SG_ROUTE_BY_TAIL_MAX     512  /* what follows the userinfo (extension lines) */

enum sg_route_by_kind {
    SG_ROUTE_BY_OTHER = 0,    /* anything else (relayed as on a fixed route) */
    SG_ROUTE_BY_GETCHALLENGE, /* the client asks for a challenge */
    SG_ROUTE_BY_CONNECT,      /* the client's connect request */
    SG_ROUTE_BY_PINGSTATUS,   /* a route probe: the proxy's pings to servers */
    SG_ROUTE_BY_STATUS,       /* a browser's status query: the proxy answers as a node */
    SG_ROUTE_BY_PING,         /* a ping to the proxy itself */
};

/* A client's connect request as the hooks read it. */
struct sg_route_by_req {
    int protocol, qport;
    int32_t challenge;               /* the one the proxy gave */
    char next[SG_ROUTE_BY_HOP_MAX];  /* the chain's first hop, "" without a chain */
    unsigned hops;                   /* hops the chain names (0: no chain) */
    char userinfo[SG_ROUTE_BY_USERINFO_MAX];
    size_t userinfo_len;
    uint8_t tail[SG_ROUTE_BY_TAIL_MAX];
    size_t tail_len;
};

/* One server the proxy measured (pingstatus): IPv4 only, as the convention carries. */
struct sg_route_by_ping {
    uint8_t ip4[4];
    uint16_t port;
    int ms; /* < 0: no answer */
};

struct sg_codec_route_by {
    const char *key; /* "prx" */
    int (*classify)(const uint8_t *data, size_t len); /* enum sg_route_by_kind */
    /* The answer to a challenge request; its length or -ENOSPC. */
    int (*challenge_reply)(int32_t challenge, uint8_t *out, size_t cap);
    /* Read a connect request: 0, SG_E_MALFORMED, or SG_E_TOOBIG (a field over its room). */
    int (*connect_parse)(const uint8_t *data, size_t len, struct sg_route_by_req *req);
    /* Give the next hop the chain's rest (or drop the key at its end) and set
     * the stamp `stamp_key` = `stamp` servers tell proxied clients by: 0 or an error. */
    int (*connect_rewrite)(struct sg_route_by_req *req, const char *stamp_key, const char *stamp);
    /* The proxy's own challenge request to the next hop. */
    int (*getchallenge)(uint8_t *out, size_t cap);
    /* Is this the next hop's challenge reply?  1 and *challenge, else 0. */
    int (*challenge_parse)(const uint8_t *data, size_t len, int32_t *challenge);
    /* The connect request for the next hop with its challenge: length or -ENOSPC. */
    int (*connect_build)(const struct sg_route_by_req *req, int32_t challenge, uint8_t *out,
                         size_t cap);
    /* A line printed on the client's console (a refusal): length or -ENOSPC. */
    int (*print)(const char *text, uint8_t *out, size_t cap);
    /* The pingstatus answer: length or -ENOSPC. */
    int (*pingstatus_reply)(const struct sg_route_by_ping *pings, size_t n, uint8_t *out,
                            size_t cap);
    /* The proxy's ping to a server, and whether a datagram answers it. */
    int (*ping_query)(uint8_t *out, size_t cap);
    bool (*is_ping_reply)(const uint8_t *data, size_t len);
    /* The node's own status answer (its serverinfo names it a proxy node,
     * `name` its hostname) and its answer to a ping: length or -ENOSPC. */
    int (*status_reply)(const char *name, uint8_t *out, size_t cap);
    int (*ping_reply)(uint8_t *out, size_t cap);
};

/*
 * Master servers: a game's heartbeat, for a route with `master` (no state,
 * no I/O).  The proxy sends the heartbeat from the route's listening socket
 * every `interval_ms` (the game's own period), once at start and when the
 * level changes; the master's queries then reach the server through
 * slipgate like any client's.  A game whose heartbeat carries the server's
 * status (`needs_status`) gets the server's answer to the codec's status
 * query (struct sg_codec_status) in `status`; the others get NULL.  A
 * heartbeat or a shutdown message that is fixed text is the game's data
 * (`heartbeat_text`, `shutdown_text`); callers use sg_codec_heartbeat() and
 * sg_codec_master_shutdown(), which take either form.
 */
struct sg_codec_master {
    const char *what;    /* "heartbeat QuakeArena-1": for messages */
    int64_t interval_ms; /* the game server's own heartbeat period */
    bool needs_status;
    /*
     * Write the heartbeat into `out` (`cap` bytes): `sequence` counts the
     * heartbeats sent before it (1 for the first).  Returns its length,
     * -ENOSPC, or SG_E_MALFORMED when `status` is not a status answer.
     */
    int (*heartbeat)(uint8_t *out, size_t cap, const uint8_t *status, size_t status_len,
                     uint32_t sequence);
    /* The game's "going down" message to its masters; NULL: none. */
    int (*shutdown)(uint8_t *out, size_t cap);
    const char *heartbeat_text; /* the heartbeat, with heartbeat NULL */
    const char *shutdown_text;  /* the "going down" message, with shutdown NULL (both NULL: none) */
};


/*
 * Spectators (a route's `spectate` port): slipgate answers a real game
 * client there as a server would, and shows it the view of one of the
 * route's sessions.  The proxy owns the socket, the table of spectators by
 * address, the limits and timeouts, and picks the session watched; these
 * hooks do everything game-specific.  No I/O: answers go through `emit`
 * (to the spectator's own address only).  Nothing a spectator sends ever
 * reaches the game server.
 */
enum sg_spect_hello {
    SG_SPECT_IGNORE = 0,  /* no answer */
    SG_SPECT_REPLY = 1,   /* the answer is in `out` */
    SG_SPECT_CONNECT = 2, /* a connect with the right challenge and password: admit it */
    SG_SPECT_REFUSE = 3,  /* a refused connect: the game's refusal is in `out` */
};

/* What a spectator asked for in a datagram (its console commands). */
enum sg_spect_ask {
    SG_SPECT_ASK_NONE = 0,
    SG_SPECT_ASK_END,    /* it left (disconnect) */
    SG_SPECT_ASK_NEXT,   /* follownext */
    SG_SPECT_ASK_PREV,   /* followprev */
    SG_SPECT_ASK_FOLLOW, /* follow NAME|N: `arg` */
};

struct sg_spect_ask_req {
    enum sg_spect_ask ask;
    char arg[64];
};

/*
 * What a spectator is shown: a session's codec state (live), or a delayed
 * copy of its server stream (`spectate_delay`: a stream object of the
 * hooks below, fed the session's messages that long after they came).
 */
struct sg_spect_src {
    const void *state;
    bool delayed;
};

struct sg_codec_spectate {
    /*
     * A datagram from an address that is no spectator yet: a challenge
     * request gets `challenge` (the proxy's, keyed to the address); a
     * connect is checked (that challenge, `password` when not NULL) and
     * either admitted (SG_SPECT_CONNECT) or refused with the game's own
     * message in `out`.  Returns enum sg_spect_hello; *out_len is set for
     * SG_SPECT_REPLY.
     */
    int (*hello)(const uint8_t *data, size_t len, int32_t challenge, const char *password,
                 uint8_t *out, size_t cap, size_t *out_len);
    /* A spectator from its admitted connect: stores it and emits the
     * game's accept.  0, -ENOMEM or SG_E_MALFORMED. */
    int (*create)(void **spec, const uint8_t *connect, size_t len, sg_emit_fn emit, void *ctx);
    void (*destroy)(void *spec); /* accepts NULL */
    /* The spectator now watches `watched` (NULL: nothing): it gets a new
     * start (the game's gamestate) when due. */
    void (*watch)(void *spec, const struct sg_spect_src *watched);
    /*
     * A datagram from the spectator, with the state of the session it
     * watches (or NULL): handshake repeats, acknowledgements, its console
     * commands (in `req`).  Returns 0 or a negative error (counted).
     */
    int (*input)(void *spec, const struct sg_spect_src *watched, uint64_t now_ms,
                 const uint8_t *data, size_t len, sg_emit_fn emit, void *ctx,
                 struct sg_spect_ask_req *req);
    /* `watched` just decoded server frame `f`: send the spectator its part
     * of it.  Returns datagrams sent or a negative error. */
    int (*feed)(void *spec, const struct sg_spect_src *watched, const struct sg_frame *f,
                uint64_t now_ms, sg_emit_fn emit, void *ctx);
    /* The spectator's name (its userinfo), "" when unknown. */
    const char *(*name)(const void *spec);
    /* A session's player's name and slot (for follow NAME|N), from its
     * codec state: "" and -1 when unknown. */
    int (*player)(const void *state, char *name, size_t cap);
    /*
     * Delayed streams (`spectate_delay`): a copy of one session's server
     * stream, fed the messages its codec decoded (struct sg_frame's `msg`
     * and `sequence`, as a demo records them) from the session's start,
     * each when the delay has passed.  stream_feed() decodes one and gives
     * the frame to feed spectators with (stream-owned, valid until the next
     * call); 0 or a negative error (counted; the stream goes on).
     */
    int (*stream_create)(void **stream);
    void (*stream_destroy)(void *stream); /* accepts NULL */
    int (*stream_feed)(void *stream, int32_t sequence, const uint8_t *msg, size_t len,
                       const struct sg_frame **f);
    /* A line shown to the spectator in the middle of its screen (the game's
     * centerprint) once it watches its next player ("NAME left"); NUL-terminated. */
    void (*notice)(void *spec, const char *text);
};

struct sg_codec {
    const char *name;        /* "q3" */
    const char *description; /* one line */

    /* Does a client's first datagram look like this game? (protocol auto) */
    bool (*probe)(const uint8_t *data, size_t len);

    /*
     * Relay hooks: the game's quirks the proxy acts on (the proxy itself
     * names no game: each quirk goes through the codec table).  Each may
     * be NULL.  `rs` is the session's relay state for this game (zeroed
     * when the session takes the game; the hooks own its contents).
     *
     * is_connect(): is this a client's connect request of this game?  Under
     * protocol auto it (re)decides a session's game: a DarkPlaces client
     * that opened with Quake 3's getchallenge, then connects as NetQuake.
     *
     * client_qport(): the qport of a client's in-game datagram, or -1 (none,
     * or not known for this session).  With `learn` the datagram is the
     * session's own and may teach the hook (Quake 2 35/36 learn the qport's
     * width from the connect); without it `rs` is only read (the datagram
     * comes from an unknown address, matched against this session).
     *
     * client_follows(): may a datagram from an unknown address, whose
     * qport matched this session, move the session there?  Only a plausible
     * continuation of the session's client stream may: its sequence newer
     * than the last one seen and at most SG_SEQWIN_AHEAD ahead (learnt by
     * client_qport with `learn`; protocols/seqwin.h), and for a session the
     * codec decodes (`state`, else NULL) what its netchan checks (Quake 3
     * 71: the checksum with the session's challenge).  Returns true, or
     * false with the reason in `why`.  NULL: the qport alone moves it.
     *
     * handshake(): a handshake that moves the server's port (NetQuake).
     * Called for every datagram of the session, either way, before
     * decoding; fills `out` (see struct sg_relay_move) and returns 0.
     */
    bool (*is_connect)(const uint8_t *data, size_t len);
    int (*client_qport)(union sg_relay_state *rs, const uint8_t *data, size_t len, bool learn);
    bool (*client_follows)(const union sg_relay_state *rs, const void *state, const uint8_t *data,
                           size_t len, char *why, size_t whylen);
    int (*handshake)(union sg_relay_state *rs, const struct sg_relay_ctx *ctx, enum sg_dir dir,
                     const uint8_t *data, size_t len, struct sg_relay_move *out);

    /*
     * The door (bans and admin controls; each may be NULL).
     *
     * banned_reply(): the answer this game's servers give a banned
     * address's datagram `data` (a connectionless print or reject), written
     * into `out` of `cap` bytes; returns its length, or 0 for silence (the
     * game answers nothing to this datagram, or no answer fits in `cap`).
     *
     * full_reply(): the answer this game's servers give a new client when
     * no slot is free ("Server is full."), for a client's first handshake
     * datagrams (getchallenge, connect) while the proxy drains; same
     * contract as banned_reply.
     *
     * is_admin(): is `data` an out-of-band remote administration command
     * (rcon and the like)?
     */
    size_t (*banned_reply)(const uint8_t *data, size_t len, uint8_t *out, size_t cap);
    size_t (*full_reply)(const uint8_t *data, size_t len, uint8_t *out, size_t cap);
    bool (*is_admin)(const uint8_t *data, size_t len);

    /*
     * Build what the codec builds once per process (Quake 3's fixed Huffman
     * tables: about 35 ms), so that no session pays for it inside a loop
     * turn while other sessions' datagrams wait.  NULL when there is none;
     * the proxy calls sg_codecs_prepare() before its loops serve.
     */
    void (*prepare)(void);

    /* Per-session state: create returns 0 and stores it, or -ENOMEM. */
    int (*create)(void **state);
    void (*destroy)(void *state); /* accepts NULL */

    /*
     * Decode one datagram in `dir` into `*frame` (codec-owned).  Returns 0,
     * or a negative error that the proxy counts; the frame still says what
     * to do.  `data` is borrowed for the call.
     */
    int (*decode)(void *state, enum sg_dir dir, const uint8_t *data, size_t len,
                  const struct sg_frame **frame);

    /*
     * Rebuild the frame decoded last (kind MESSAGE, or OOB when changed)
     * for its receiver, re-encoding the message from its decoded form, and
     * hand each datagram to `emit`.  Sets *identical when the datagrams
     * equal the ones received.  Returns the number of datagrams or a
     * negative error (the proxy then relays the original bytes).
     */
    int (*encode)(void *state, const struct sg_frame *frame, sg_emit_fn emit, void *ctx,
                  bool *identical);

    /*
     * Demo files.  `demo_ext` is NULL for a game without a demo writer.
     * record() appends an S2C MESSAGE frame to the demo being written to
     * `out` (borrowed; a different `out` starts a new demo, which begins
     * with a gamestate: the frame's own, or one synthesized from tracked
     * state when recording starts mid-level).  Returns 1 written, 0 skipped
     * (waiting for a starting point), or a negative error (a write error:
     * recording should stop).  record_end() writes the end marker and
     * flushes; `out` stays open; it returns 0, or 1 when the demo holds
     * nothing a player can play (the sign-on alone: the caller removes the
     * file), or a negative error.  The caller ends the demo where the
     * player's own would: at a C2S frame marked `disconnect`, after an S2C
     * frame whose SG_MSG_DISCONNECT message reached the client, at a new
     * level, at session end.
     */
    const char *(*demo_ext)(void *state); /* "dm_68", known once the handshake is seen */
    int (*record)(void *state, const struct sg_frame *frame, FILE *out);
    int (*record_end)(void *state, FILE *out);

    /* Offline tools (see struct sg_demo_impl, sg_capture_impl); NULL when the game has none yet. */
    const struct sg_demo_impl *demo_reader;
    const struct sg_capture_impl *capture;

    /*
     * Filters (filters/filter.h).  All may be NULL for a codec without
     * them.  set_text() / drop_msg() change message `i` of the frame decoded
     * last; inject() queues a new text message towards `dir`'s receiver.
     * They return 0 or a negative error (SG_E_UNSUPPORTED).  must_encode()
     * says the frame must be rebuilt even though no filter changed it
     * (numbering is being translated, an injection waits): the proxy then
     * re-encodes it, holding PARTIAL pieces until the message is whole.
     */
    int (*set_text)(void *state, unsigned i, const char *text, size_t len);
    int (*drop_msg)(void *state, unsigned i);
    int (*inject)(void *state, enum sg_dir dir, enum sg_msg_kind kind, const char *text,
                  size_t len);
    bool (*must_encode)(void *state, const struct sg_frame *frame);

    /*
     * Write the frame decoded last (after filters: as rebuilt) for the
     * inspector: text (one or more lines, each ending in '\n') or JSON (one
     * object without a newline, the fields documented in doc/inspect.md),
     * at `level`.  Returns bytes written or a negative error.  May be NULL.
     */
    int (*dump)(void *state, const struct sg_frame *frame, enum sg_dump_level level, bool json,
                FILE *out);

    /* Counters and the first error's description. */
    const struct sg_codec_stats *(*stats)(void *state);
    const char *(*describe)(void *state); /* "ioquake3 71, challenge 0x..., qport 1234" */

    /*
     * Has the game's handshake completed, so that the client is known to
     * receive what the server sends (a blind, spoofing sender never sees
     * the server's challenge)?  Once true, stays true.  The proxy asks it
     * after each decoded datagram to tell real players from floods
     * (`handshake_timeout`, eviction when the session table is full).  May
     * be NULL: the server's first answer is then enough.
     */
    bool (*established)(void *state);

    /*
     * How `slipgate doctor` asks a server of this game whether it answers
     * (the status query a server browser sends).  May be NULL.
     */
    const struct sg_codec_status *status;

    /* Client-directed routing (`route_by prx`), or NULL. */
    const struct sg_codec_route_by *route_by;

    /*
     * Something about the session that became known and that its user
     * should read when it happens, not only at its end (Quake 3: a protocol
     * relayed with its headers read only): a line the proxy logs once, or
     * NULL.  Each line is returned once; the proxy asks after each decoded
     * datagram of a session the server has answered (and with the session's
     * start line), so that spoofed sources do not fill the log.  May be NULL.
     */
    const char *(*take_notice)(void *state);

    /*
     * How a server of this game registers with its master servers (a
     * route's `master`), or NULL for a game without a master protocol.
     * Appended after take_notice (the table grows only at its end).
     */
    const struct sg_codec_master *master;

    /*
     * What the session shows of the game, for the status page: the server's
     * name, the level and the player's own name, each "" where this codec
     * has not decoded it (yet).  Wire text, copied as it came (bounded, NUL
     * terminated; the page shows it as text).  May be NULL.  Appended last.
     */
    void (*info)(void *state, struct sg_codec_info *out);

    /* Spectators on a route's `spectate` port, or NULL (the game has none yet).  Appended last. */
    const struct sg_codec_spectate *spectate;
};

/*
 * The registry: every game, NULL-terminated.  A game without a decoder
 * yet (decode NULL: "relay only") still answers the relay hooks; create,
 * destroy, decode, stats and describe are set exactly when decode is.
 */
extern const struct sg_codec *const sg_codecs[];

/* The game called `name`, or NULL. */
const struct sg_codec *sg_codec_find(const char *name);
/* Every codec's prepare(), once, before the proxy's loops serve. */
void sg_codecs_prepare(void);
/* The first game whose probe() claims a client's first datagram, or NULL. */
const struct sg_codec *sg_codec_probe(const uint8_t *data, size_t len);
/* The first game other than `not` whose is_connect() claims a client's datagram, or NULL. */
const struct sg_codec *sg_codec_connect(const uint8_t *data, size_t len, const struct sg_codec *not);
/* The first game with a handshake hook (protocol auto runs it on every session), or NULL. */
const struct sg_codec *sg_codec_handshaker(void);
/* The first game whose demo reader reads files ending in `.ext` (no dot in `ext`), or NULL. */
const struct sg_codec *sg_codec_demo_ext(const char *ext);
/*
 * The game whose demo files end in `.ext` although its codec has no demo
 * reader yet ("qw" for "qwd"), or NULL; with `exts` set to its extensions
 * (".qwd, .mvd").
 */
const char *sg_codec_demo_unreadable(const char *ext, const char **exts);
/* The same list walked: the i-th such game from 0 (and `*exts`), NULL past its end. */
const char *sg_codec_demo_unreadable_at(int i, const char **exts);
/* The first game with a capture decoder (what an unclaimed capture flow is decoded as), or NULL. */
const struct sg_codec *sg_codec_capture_default(void);

/* The status query of `st` written into `out` (`cap` bytes): its length, or -ENOSPC. */
int sg_codec_status_query(const struct sg_codec_status *st, uint8_t *out, size_t cap);
/* Is `data` (`len` bytes, from the server) the answer to the status query of `st`? */
bool sg_codec_status_is_reply(const struct sg_codec_status *st, const uint8_t *data, size_t len);

/* The heartbeat of `m` written into `out` (as sg_codec_master.heartbeat). */
int sg_codec_heartbeat(const struct sg_codec_master *m, uint8_t *out, size_t cap,
                       const uint8_t *status, size_t status_len, uint32_t sequence);
/* The "going down" message of `m` written into `out`: its length, 0 when
 * the game has none, or -ENOSPC. */
int sg_codec_master_shutdown(const struct sg_codec_master *m, uint8_t *out, size_t cap);

/* Does `c` decode (or only relay)? */
static inline bool sg_codec_decodes(const struct sg_codec *c)
{
    return c && c->decode;
}

#endif
