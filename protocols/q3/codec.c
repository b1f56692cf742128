/*
 * The Quake 3 codec: the netchan (netchan.h), the server message layer
 * (svmsg.h, state.h), client messages (clmsg.h) and the demo recorder
 * (demo.h) behind the generic codec table (protocols/codec.h).
 *
 * decode(): netchan first (fragments, checksum, XOR, sequence rules); a
 * whole server message is then parsed completely against the tracked
 * state, a client message is already decoded by the netchan.
 * encode(): the message is written again from its decoded form (server:
 * sg_q3_write_server_message; client: sg_q3_clmsg_encode keyed with the
 * server's view), then framed by the netchan for its receiver.  Comparing
 * the result with what arrived is how `reencode always` proves the encoder
 * against real traffic.
 */
#include "protocols/codec.h"
#include "protocols/byteorder.h"

#include "protocols/error.h"
#include "protocols/q3/demo.h"
#include "protocols/q3/huffman.h"
#include "protocols/q3/inspect.h"
#include "protocols/q3/netchan.h"
#include "protocols/q3/oob.h"
#include "protocols/q3/proto.h"
#include "protocols/q3/renum.h"
#include "protocols/q3/spectate.h"
#include "protocols/q3/state.h"
#include "protocols/q3/svmsg.h"
#include "protocols/seqwin.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct q3c {
    struct sg_q3_netchan nc;
    struct sg_q3_frame qf;
    struct sg_q3_state *st;
    struct sg_q3_svmsg sv;
    int parse_err; /* of the last server message */
    struct sg_frame frame;
    struct sg_codec_stats stats;
    char first_error[200];
    char describe[320];
    char level[64];           /* the map name of the server info, as of level_changes: */
    uint32_t level_changes;   /* the state's cs_changes when `level` was read */
    bool level_read;
    struct sg_codec_info game; /* the last server name, level and player name known (q3_info) */
    uint64_t headers_only; /* datagrams of a protocol not decoded, relayed with the header read */
    bool noticed;          /* take_notice() has said that the protocol is relayed headers only */

    /* admission: the server treats the client as connected (a connectResponse,
     * or sequenced traffic, which a server sends only to connected clients);
     * established once the client's own sequenced traffic followed */
    bool server_in_game, established;

    /* the datagram decoded last, to compare a rebuilt one against */
    size_t last_len;
    uint8_t last[SG_Q3_MAX_MSGLEN + 64];

    /* rebuilding */
    uint8_t buf[SG_Q3_MAX_MSGLEN];
    struct sg_q3_datagrams dg;

    /* recording */
    FILE *rec_out;
    struct sg_q3_demo_writer writer;
    struct sg_q3_recorder rec;
    const uint8_t *out_msg; /* the message as it went out (rebuilt, or as received) */
    size_t out_len;

    /* filters: the frame's messages, and reliable numbering for both sides */
    struct sg_msg *msgs;
    int32_t *msg_seq; /* reliable sequence of msgs[i] (sender's numbers), or -1 */
    int32_t *msg_ref; /* svmsg gamestate item of a configstring, or -1 */
    unsigned nmsgs, cap_msgs;
    char *arena; /* texts of msgs (offsets while building) */
    size_t arena_len, arena_cap;
    char *changed[128]; /* texts filters set during this frame, and injected ones it carried */
    int nchanged;
    struct sg_q3_renum sc; /* server commands: server -> client */
    struct sg_q3_renum cc; /* client commands: client -> server */
    bool translating;      /* numbering or texts differ between the two sides */
    int32_t ack_out;       /* the frame's reliable acknowledgement, in the receiver's numbers */
    int32_t gs_seq_out;    /* a gamestate's commandSequence in the client's numbers */
    char (*cmd_copies)[SG_Q3_MAX_STRING_CHARS]; /* scratch for translating client commands */
};

static bool q3_probe(const uint8_t *d, size_t n)
{
    static const char gc[] = "\xff\xff\xff\xffgetchallenge";
    static const char cn[] = "\xff\xff\xff\xff"
                             "connect ";

    /* Quake 3's getchallenge has no newline (QuakeWorld's and Quake 2's do). */
    if (n >= sizeof(gc) - 1 && memcmp(d, gc, sizeof(gc) - 1) == 0)
        return n == sizeof(gc) - 1 || d[sizeof(gc) - 1] == ' ';
    /*
     * Its connect carries Huffman-coded userinfo after a 16-bit big-endian
     * length of the plain text (under 8 KiB, so the first byte is a control
     * character); QuakeWorld's and Quake 2's go on in text ("connect 28 ...").
     * Quake 3 1.11-1.16 (protocol 43) sent it plain: the quoted userinfo.
     */
    return n > sizeof(cn) + 2 && memcmp(d, cn, sizeof(cn) - 1) == 0 &&
           (d[sizeof(cn) - 1] < 0x20 || d[sizeof(cn) - 1] == '"');
}

/* A client's in-game datagram: sequence, then its 16-bit qport (netchan.h). */
/* The relay hooks' state: the client's sequence (NAT rebinding). */
struct q3_rs {
    struct sg_seqwin seq;
};

_Static_assert(sizeof(struct q3_rs) <= sizeof(union sg_relay_state), "q3_rs fits");

#define Q3_SEQ_MASK 0x7fffffffu /* the fragment bit removed */

static int q3_client_qport(union sg_relay_state *rs, const uint8_t *d, size_t n, bool learn)
{
    struct q3_rs *st = (struct q3_rs *)rs->bytes;
    static const char cn[] = "\xff\xff\xff\xff"
                             "connect";

    if (learn && n >= sizeof(cn) - 1 && memcmp(d, cn, sizeof(cn) - 1) == 0)
        sg_seqwin_reset(&st->seq); /* a new connection: sequences restart */
    if (n < 6 || sg_q3_oob_is(d, n))
        return -1;
    if (learn)
        sg_seqwin_learn(&st->seq, sg_le32(d), Q3_SEQ_MASK);
    return sg_le16(d + 4);
}

/*
 * A move needs what the server's netchan would accept from the client: a
 * sequence newer than the last one accepted and within the window, and on
 * ioquake3 71 a checksum made with the session's challenge.  Without a
 * decoder (or before it knows the wire), the sequence the relay hook saw.
 */
static bool q3_client_follows(const union sg_relay_state *rs, const void *state, const uint8_t *d,
                              size_t n, char *why, size_t whylen)
{
    const struct q3_rs *st = (const struct q3_rs *)rs->bytes;
    const struct q3c *c = state;
    uint32_t seq, last;
    bool have;

    if (n < 6 || sg_q3_oob_is(d, n)) {
        snprintf(why, whylen, "not a sequenced datagram");
        return false;
    }
    seq = sg_le32(d) & Q3_SEQ_MASK;
    have = st->seq.have;
    last = st->seq.last;
    if (c && c->nc.wire != SG_Q3_WIRE_UNKNOWN && c->nc.rx[SG_Q3_C2S].incoming_sequence > 0) {
        have = true;
        last = (uint32_t)c->nc.rx[SG_Q3_C2S].incoming_sequence;
    }
    if (!sg_seqwin_follows(have, last, seq, Q3_SEQ_MASK, why, whylen))
        return false;
    if (c && sg_q3_wire_checksum(c->nc.wire)) {
        if (n < 10 || !c->nc.have_challenge ||
            sg_le32(d + 6) != sg_q3_netchan_checksum(c->nc.challenge, (int32_t)seq)) {
            snprintf(why, whylen, "its checksum does not match the session's challenge");
            return false;
        }
    }
    return true;
}

static int q3_create(void **state)
{
    struct q3c *c = calloc(1, sizeof(*c));

    if (!c)
        return -ENOMEM;
    sg_q3_netchan_init(&c->nc);
    sg_q3_svmsg_init(&c->sv);
    sg_q3_renum_init(&c->sc);
    sg_q3_renum_init(&c->cc);
    c->st = sg_q3_state_create(68);
    if (!c->st) {
        free(c);
        return -ENOMEM;
    }
    *state = c;
    return 0;
}

static void q3_destroy(void *state)
{
    struct q3c *c = state;

    if (!c)
        return;
    sg_q3_recorder_finish(&c->rec);
    sg_q3_svmsg_finish(&c->sv);
    sg_q3_state_destroy(c->st);
    sg_q3_netchan_finish(&c->nc);
    sg_q3_renum_finish(&c->sc);
    sg_q3_renum_finish(&c->cc);
    for (int i = 0; i < c->nchanged; i++)
        free(c->changed[i]);
    free(c->msgs);
    free(c->msg_seq);
    free(c->msg_ref);
    free(c->arena);
    free(c->cmd_copies);
    free(c);
}

static void note_error(struct q3c *c, int err, const char *what)
{
    c->stats.errors++;
    if (!c->first_error[0])
        snprintf(c->first_error, sizeof(c->first_error), "%s: %s", what, sg_strerror(err));
}

/* ---- the message list filters see ---- */

static void msgs_reset(struct q3c *c)
{
    c->nmsgs = 0;
    c->arena_len = 0;
    for (int i = 0; i < c->nchanged; i++)
        free(c->changed[i]);
    c->nchanged = 0;
}

/* Keep `len` bytes (then a NUL) in the arena; returns the offset, or -1. */
static long arena_put(struct q3c *c, const char *text, size_t len)
{
    size_t off = c->arena_len;

    if (c->arena_len + len + 1 > c->arena_cap) {
        size_t cap = c->arena_cap ? c->arena_cap : 4096;
        while (cap < c->arena_len + len + 1)
            cap *= 2;
        char *a = realloc(c->arena, cap);
        if (!a)
            return -1;
        c->arena = a;
        c->arena_cap = cap;
    }
    memcpy(c->arena + off, text, len);
    c->arena[off + len] = '\0';
    c->arena_len += len + 1;
    return (long)off;
}

/* Room for one more message; false when out of memory. */
static bool msgs_grow(struct q3c *c)
{
    unsigned cap;
    struct sg_msg *ms;
    int32_t *sq, *rf;

    if (c->nmsgs < c->cap_msgs)
        return true;
    cap = c->cap_msgs ? 2 * c->cap_msgs : 64;
    ms = realloc(c->msgs, cap * sizeof(*ms));
    sq = ms ? realloc(c->msg_seq, cap * sizeof(*sq)) : NULL;
    rf = sq ? realloc(c->msg_ref, cap * sizeof(*rf)) : NULL;
    if (ms)
        c->msgs = ms;
    if (sq)
        c->msg_seq = sq;
    if (rf)
        c->msg_ref = rf;
    if (!ms || !sq || !rf)
        return false;
    c->cap_msgs = cap;
    return true;
}

/* Append a message; text and command become arena offsets (fixed up by msgs_done). */
static struct sg_msg *msg_add(struct q3c *c, enum sg_msg_kind kind, const char *name,
                              int32_t number, const char *text, size_t len, const char *command,
                              int32_t seq, int32_t ref)
{
    struct sg_msg *m;
    long t = -1, cmd = -1;

    if (!msgs_grow(c))
        return NULL;
    if (text && (t = arena_put(c, text, len)) < 0)
        return NULL;
    if (command && (cmd = arena_put(c, command, strlen(command))) < 0)
        return NULL;
    m = &c->msgs[c->nmsgs];
    memset(m, 0, sizeof(*m));
    m->kind = kind;
    m->name = name;
    m->number = number;
    m->text = (const char *)(intptr_t)t;
    m->text_len = text ? len : 0;
    m->command = (const char *)(intptr_t)cmd;
    c->msg_seq[c->nmsgs] = seq;
    c->msg_ref[c->nmsgs] = ref;
    c->nmsgs++;
    return m;
}

static void msgs_done(struct q3c *c, struct sg_frame *f)
{
    for (unsigned i = 0; i < c->nmsgs; i++) {
        intptr_t t = (intptr_t)c->msgs[i].text, cmd = (intptr_t)c->msgs[i].command;
        c->msgs[i].text = t < 0 ? NULL : c->arena + t;
        c->msgs[i].command = cmd < 0 ? c->msgs[i].text : c->arena + cmd;
    }
    f->msgs = c->msgs;
    f->nmsgs = c->nmsgs;
}

/* The first word of a command and where its argument text starts. */
static size_t verb_of(const char *cmd, char *verb, size_t cap)
{
    size_t n = 0;

    while (cmd[n] == ' ')
        n++;
    size_t start = n, k = 0;
    while (cmd[n] && cmd[n] != ' ' && cmd[n] != '\n') {
        if (k + 1 < cap)
            verb[k++] = cmd[n];
        n++;
    }
    verb[k] = '\0';
    (void)start;
    while (cmd[n] == ' ')
        n++;
    return n;
}

/* A quoted argument's inside (or the rest of the line); returns its length. */
static size_t unquote(const char *arg, const char **out)
{
    if (arg[0] == '"') {
        const char *end = strchr(arg + 1, '"');
        *out = arg + 1;
        return end ? (size_t)(end - arg - 1) : strlen(arg + 1);
    }
    *out = arg;
    return strlen(arg);
}

/* What a server command is, as a cross-game message: kind, number, text. */
static void classify_server_command(const char *cmd, enum sg_msg_kind *kind, int32_t *number,
                                    const char **text, size_t *len)
{
    char verb[32];
    size_t at = verb_of(cmd, verb, sizeof(verb));
    const char *t = cmd + at;

    *kind = SG_MSG_SERVER_COMMAND;
    if (strcmp(verb, "print") == 0)
        *kind = SG_MSG_PRINT;
    else if (strcmp(verb, "cp") == 0)
        *kind = SG_MSG_CENTERPRINT;
    else if (strcmp(verb, "chat") == 0 || strcmp(verb, "tchat") == 0)
        *kind = SG_MSG_CHAT;
    else if (strcmp(verb, "disconnect") == 0)
        *kind = SG_MSG_DISCONNECT;
    else if (strcmp(verb, "cs") == 0) {
        char *end;
        long idx = strtol(t, &end, 10);
        if (end != t) {
            *kind = SG_MSG_CONFIGSTRING;
            *number = (int32_t)idx;
            t = end;
            while (*t == ' ')
                t++;
        }
    }
    if (*kind == SG_MSG_SERVER_COMMAND) {
        *text = cmd;
        *len = strlen(cmd);
    } else {
        *len = unquote(t, text);
    }
}

/* A server command as a cross-game message. */
static void add_server_command(struct q3c *c, const char *cmd, int32_t seq, bool repeat)
{
    enum sg_msg_kind kind;
    int32_t number = seq;
    const char *text;
    size_t len;
    struct sg_msg *m;

    classify_server_command(cmd, &kind, &number, &text, &len);
    m = msg_add(c, kind, "svc_serverCommand", number, text, len, cmd, seq, -1);
    if (m)
        m->repeat = repeat;
}

/* What a client command is, as a cross-game message: kind and text. */
static void classify_client_command(const char *cmd, enum sg_msg_kind *kind, const char **text,
                                    size_t *len)
{
    char verb[32];
    size_t at = verb_of(cmd, verb, sizeof(verb));

    *kind = SG_MSG_CLIENT_COMMAND;
    *text = cmd;
    *len = strlen(cmd);
    if (strcmp(verb, "say") == 0 || strcmp(verb, "say_team") == 0) {
        *kind = SG_MSG_CHAT;
        *len = unquote(cmd + at, text);
    } else if (strcmp(verb, "tell") == 0) {
        const char *rest = cmd + at;
        while (*rest && *rest != ' ')
            rest++;
        while (*rest == ' ')
            rest++;
        *kind = SG_MSG_CHAT;
        *len = unquote(rest, text);
    }
}

/* A client command as a cross-game message. */
static void add_client_command(struct q3c *c, const char *cmd, int32_t seq, bool repeat)
{
    enum sg_msg_kind kind;
    const char *text;
    size_t len;
    struct sg_msg *m;

    classify_client_command(cmd, &kind, &text, &len);
    m = msg_add(c, kind, "clc_clientCommand", seq, text, len, cmd, seq, -1);
    if (m)
        m->repeat = repeat;
}

/* The messages of a server message; new reliable commands are numbered for the client. */
static void list_server_message(struct q3c *c)
{
    const struct sg_q3_svmsg *sv = &c->sv;

    c->ack_out = sg_q3_renum_ack(&c->cc, sv->reliable_ack);
    c->gs_seq_out = -1;
    for (uint32_t i = 0; i < sv->num_ops; i++) {
        const struct sg_q3_op *op = &sv->ops[i];

        switch (op->type) {
        case SG_Q3_SVC_SERVERCOMMAND: {
            int32_t seq = op->u.cmd.sequence;
            bool fresh = sg_q3_renum_is_new(&c->sc, seq);
            if (fresh)
                sg_q3_renum_add(&c->sc, seq);
            add_server_command(c, sg_q3_svmsg_str(sv, op->u.cmd.text), seq, !fresh);
            break;
        }
        case SG_Q3_SVC_GAMESTATE:
            c->gs_seq_out = sg_q3_renum_gamestate(&c->sc, op->u.gamestate.command_seq);
            for (uint32_t k = 0; k < op->u.gamestate.num_items; k++) {
                const struct sg_q3_gs_item *it = &sv->items[op->u.gamestate.first_item + k];
                const char *t;
                if (it->op != SG_Q3_SVC_CONFIGSTRING)
                    continue;
                t = sg_q3_svmsg_str(sv, it->text);
                msg_add(c, SG_MSG_CONFIGSTRING, "svc_configstring", it->index, t, it->text.len,
                        NULL, -1, (int32_t)(op->u.gamestate.first_item + k));
            }
            msg_add(c, SG_MSG_GAME, "svc_gamestate", op->u.gamestate.command_seq, NULL, 0, NULL,
                    -1, -1);
            break;
        case SG_Q3_SVC_SNAPSHOT:
            msg_add(c, SG_MSG_GAME, "svc_snapshot", sv->snaps[op->u.snap].server_time, NULL, 0,
                    NULL, -1, -1);
            break;
        case SG_Q3_SVC_DOWNLOAD:
            msg_add(c, SG_MSG_GAME, "svc_download", op->u.download.block, NULL, 0, NULL, -1, -1);
            break;
        case SG_Q3_SVC_VOIP_SPEEX:
        case SG_Q3_SVC_VOIP_OPUS:
            msg_add(c, SG_MSG_GAME, "svc_voip", op->u.voip.sequence, NULL, 0, NULL, -1, -1);
            break;
        default:
            break;
        }
    }
}

/* The messages of a client message. */
static void list_client_message(struct q3c *c)
{
    const struct sg_q3_clmsg *cm = &c->qf.u.cl;

    c->ack_out = sg_q3_renum_ack(&c->sc, cm->reliable_ack);
    for (int i = 0; i < cm->num_commands; i++) {
        int32_t seq = cm->commands[i].sequence;
        bool fresh = sg_q3_renum_is_new(&c->cc, seq);
        if (fresh)
            sg_q3_renum_add(&c->cc, seq);
        if (fresh && !c->translating)
            c->frame.ack_wanted = seq; /* the server's next reliable_ack (numbering kept) */
        add_client_command(c, cm->commands[i].text, seq, !fresh);
    }
    if (cm->move_op)
        msg_add(c, SG_MSG_GAME, cm->move_op == SG_Q3_CLC_MOVE ? "clc_move" : "clc_moveNoDelta",
                cm->num_cmds, NULL, 0, NULL, -1, -1);
}

/* The server's name and level (server info) and the player's own name (its
 * player configstring, clientNum from the gamestate), read when the
 * configstrings changed; what was known stays when they are cleared (the
 * client left), so that a finished session still names them. */
static void game_info_update(struct q3c *c)
{
    const char *si, *pl;
    char v[64];

    if (!c->st->have_gamestate)
        return;
    si = sg_q3_state_configstring(c->st, SG_Q3_CS_SERVERINFO);
    if (si && *si) {
        if (sg_q3_info_value(si, "sv_hostname", v, sizeof(v)))
            memcpy(c->game.hostname, v, sizeof(v));
        if (sg_q3_info_value(si, "mapname", v, sizeof(v)))
            memcpy(c->game.map, v, sizeof(v));
    }
    if (c->st->client_num < 0 || c->st->client_num >= SG_Q3_MAX_CLIENTS)
        return;
    pl = sg_q3_state_configstring(c->st, SG_Q3_CS_PLAYERS + c->st->client_num);
    if (pl && *pl && sg_q3_info_value(pl, "n", v, sizeof(v)))
        memcpy(c->game.player, v, sizeof(v));
}

/* A whole server message: parse it all; notice a new level. */
static void server_message(struct q3c *c, struct sg_frame *f)
{
    const char *info;

    c->st->protocol = c->nc.protocol ? c->nc.protocol : c->st->protocol;
    c->parse_err =
        sg_q3_parse_server_message(c->st, c->qf.sequence, c->qf.msg, c->qf.msg_len, &c->sv);
    if (c->parse_err < 0)
        note_error(c, c->parse_err, "server message");
    f->new_level = sg_q3_svmsg_count(&c->sv, SG_Q3_SVC_GAMESTATE) > 0;
    /* The map name: read from the server info again only when a
     * configstring changed (scanning it on every server message cost ~7 %
     * of a Quake 3 datagram's decoding instructions). */
    if (!c->level_read || c->level_changes != c->st->cs_changes) {
        info = sg_q3_state_configstring(c->st, SG_Q3_CS_SERVERINFO);
        if (!info || !sg_q3_info_value(info, "mapname", c->level, sizeof(c->level)))
            snprintf(c->level, sizeof(c->level), "unknown");
        c->level_changes = c->st->cs_changes;
        c->level_read = true;
        game_info_update(c);
    }
    _Static_assert(sizeof(c->level) == sizeof(f->level), "the frame's level holds the cache's");
    memcpy(f->level, c->level, sizeof(f->level));
}

/*
 * Admission (sg_codec.established): a server sends connectResponse only to
 * the address whose connect carried the challenge it gave that address, and
 * sequenced (netchan) datagrams only to connected clients; a spoofing sender
 * never sees either.  The session is in game once, after that, the client
 * sends sequenced datagrams of its own.
 */
static void note_in_game(struct q3c *c, enum sg_dir dir, const uint8_t *data, size_t len)
{
    bool oob = len >= 4 && memcmp(data, "\xff\xff\xff\xff", 4) == 0;

    if (dir == SG_DIR_S2C) {
        if (oob ? c->qf.rx == SG_Q3_RX_OOB && c->qf.u.oob.kind == SG_Q3_OOB_CONNECT_RESPONSE
                : len >= 4)
            c->server_in_game = true;
    } else if (c->server_in_game && !oob && len >= 6) {
        c->established = true;
    }
}

static bool q3_established(void *state)
{
    const struct q3c *c = state;
    return c->established;
}

static int q3_decode(void *state, enum sg_dir dir, const uint8_t *data, size_t len,
                     const struct sg_frame **out)
{
    struct q3c *c = state;
    struct sg_frame *f = &c->frame;
    enum sg_q3_dir qd = dir == SG_DIR_C2S ? SG_Q3_C2S : SG_Q3_S2C;
    int err;

    /* The netchan: what the receiving game does with the datagram. */
    memset(f, 0, sizeof(*f));
    f->dir = dir;
    f->game = &c->qf;
    f->ack = f->reliable_ack = f->ack_wanted = -1;
    msgs_reset(c);
    c->out_msg = NULL;
    c->out_len = 0;
    c->stats.decoded++;
    c->last_len = len <= sizeof(c->last) ? len : 0;
    if (c->last_len)
        memcpy(c->last, data, len);
    err = sg_q3_netchan_decode(&c->nc, qd, data, len, &c->qf);
    if (err < 0)
        note_error(c, err, dir == SG_DIR_C2S ? "client datagram" : "server datagram");
    f->sequence = c->qf.sequence;
    *out = f;
    note_in_game(c, dir, data, len);

    switch (c->qf.rx) {
    case SG_Q3_RX_OOB:
        f->kind = SG_FRAME_OOB;
        c->stats.oob++;
        msg_add(c, SG_MSG_GAME, sg_q3_oob_kind_name(c->qf.u.oob.kind), -1, NULL, 0, NULL, -1, -1);
        msgs_done(c, f);
        if (c->qf.u.oob.kind == SG_Q3_OOB_CONNECT && dir == SG_DIR_C2S) {
            /* a new connection: numbering starts again on both sides */
            sg_q3_renum_finish(&c->sc);
            sg_q3_renum_finish(&c->cc);
            c->translating = false;
            c->nc.split_views = false;
        }
        return err;
    case SG_Q3_RX_FRAGMENT:
        f->kind = SG_FRAME_PARTIAL;
        return err;
    case SG_Q3_RX_MESSAGE:
        c->game.sequenced[dir]++;
        if (c->qf.dropped > 0)
            c->game.lost[dir] += (uint64_t)c->qf.dropped;
        break;
    case SG_Q3_RX_HEADERS:
        /* a protocol not decoded: relayed as it came, no message view */
        f->kind = SG_FRAME_RAW;
        f->undecoded = true;
        c->headers_only++;
        return 0;
    case SG_Q3_RX_OLD:
    case SG_Q3_RX_GAP:
    case SG_Q3_RX_BAD_FRAGMENT:
    case SG_Q3_RX_BAD_CHECKSUM:
        f->kind = SG_FRAME_REJECTED;
        c->stats.rejected++;
        return err;
    default:
        f->kind = SG_FRAME_RAW;
        return err;
    }

    /* A whole message. */
    f->kind = SG_FRAME_MESSAGE;
    f->pieces = c->qf.pieces;
    f->msg = c->qf.msg;
    f->msg_len = c->qf.msg_len;
    c->out_msg = c->qf.msg;
    c->out_len = c->qf.msg_len;
    c->stats.messages++;
    if (dir == SG_DIR_S2C) {
        f->ack_wanted = f->sequence; /* the client's next message_ack */
        server_message(c, f);
        f->reliable_ack = c->sv.reliable_ack;
        list_server_message(c);
    } else if (c->qf.content_err >= 0) {
        f->ack = c->qf.u.cl.message_ack;
        f->reliable_ack = c->qf.u.cl.reliable_ack;
        f->disconnect = sg_q3_clmsg_disconnects(&c->qf.u.cl);
        list_client_message(c);
    }
    msgs_done(c, f);
    return err < 0 ? err : c->parse_err < 0 && dir == SG_DIR_S2C ? c->parse_err : 0;
}

/* ---- translating for the receiver (filters changed the stream) ---- */

/* One reliable command of a rebuilt message. */
struct out_cmd {
    int32_t seq;
    const char *text;       /* a text that stays put (renum's, or the caller's copy) */
    struct sg_q3_bytes ref; /* or, when has_ref, the original in the message's byte pool */
    bool has_ref;
    bool injected, resend;  /* a filter's injection; sent before */
};

static const char *keep_text(struct q3c *c, const char *text, size_t len);
static void classify_server_command(const char *cmd, enum sg_msg_kind *kind, int32_t *number,
                                    const char **text, size_t *len);
static void classify_client_command(const char *cmd, enum sg_msg_kind *kind, const char **text,
                                    size_t *len);

/*
 * The injected commands a rebuilt message carries, appended to the frame's
 * messages (after msgs_done: texts are kept copies) so that the taps show
 * what was sent.  Resends until acknowledged are marked repeat.
 */
static void note_injected(struct q3c *c, const struct out_cmd *cmds, int k)
{
    struct sg_frame *f = &c->frame;

    for (int i = 0; i < k; i++) {
        enum sg_msg_kind kind;
        int32_t number = cmds[i].seq;
        const char *text, *cmd;
        size_t len;
        struct sg_msg *m;

        if (!cmds[i].injected || !(cmd = keep_text(c, cmds[i].text, strlen(cmds[i].text))))
            continue;
        if (f->dir == SG_DIR_S2C)
            classify_server_command(cmd, &kind, &number, &text, &len);
        else
            classify_client_command(cmd, &kind, &text, &len);
        if (!(text = keep_text(c, text, len)) || !msgs_grow(c))
            continue;
        m = &c->msgs[c->nmsgs];
        memset(m, 0, sizeof(*m));
        m->kind = kind;
        m->name = f->dir == SG_DIR_S2C ? "svc_serverCommand" : "clc_clientCommand";
        m->number = number;
        m->text = text;
        m->text_len = len;
        m->command = cmd;
        m->injected = true;
        m->repeat = cmds[i].resend;
        c->msg_seq[c->nmsgs] = -1;
        c->msg_ref[c->nmsgs] = -1;
        c->nmsgs++;
        f->msgs = c->msgs;
        f->nmsgs = c->nmsgs;
    }
}

static int cmp_out_cmd(const void *a, const void *b)
{
    const struct out_cmd *x = a, *y = b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * The reliable commands the receiver gets in this message: the sender's,
 * renumbered, without the dropped ones and with changed texts, plus the
 * injected ones it has not acknowledged yet, in number order.
 */
static int out_commands(struct sg_q3_renum *r, const int32_t *seqs, const char *const *texts,
                        const struct sg_q3_bytes *refs, int n, bool with_pending,
                        struct out_cmd *out, int cap)
{
    int k = 0;

    for (int i = 0; i < n && k < cap; i++) {
        int32_t to;
        const char *t;
        if (!sg_q3_renum_map(r, seqs[i], &to, &t))
            continue;
        memset(&out[k], 0, sizeof(out[k]));
        out[k].seq = to;
        out[k].text = t ? t : texts ? texts[i] : NULL;
        out[k].has_ref = !t && refs;
        if (out[k].has_ref)
            out[k].ref = refs[i];
        k++;
    }
    for (int i = 0; with_pending && i < r->npending && k < cap; i++) {
        if (r->pending[i].receiver <= r->receiver_ack)
            continue;
        memset(&out[k], 0, sizeof(out[k]));
        out[k].seq = r->pending[i].receiver;
        out[k].text = r->pending[i].text;
        out[k].injected = true;
        out[k++].resend = r->pending[i].sent;
        r->pending[i].sent = true;
    }
    qsort(out, (size_t)k, sizeof(*out), cmp_out_cmd);
    return k;
}

/* A server message for the client: acknowledgement, commands and gamestate renumbered. */
static int translate_server_message(struct q3c *c)
{
    struct sg_q3_svmsg *sv = &c->sv;
    int32_t seqs[SG_Q3_MAX_RELIABLE_COMMANDS * 2];
    struct sg_q3_bytes refs[SG_Q3_MAX_RELIABLE_COMMANDS * 2];
    struct out_cmd cmds[SG_Q3_MAX_RELIABLE_COMMANDS * 2 + SG_Q3_RENUM_PENDING];
    struct sg_q3_op *rest;
    uint32_t nrest = 0, first_cmd = UINT32_MAX;
    bool gamestate = false;
    int n = 0, k, err;

    sv->reliable_ack = c->ack_out;
    rest = malloc((sv->num_ops + 1) * sizeof(*rest));
    if (!rest)
        return -ENOMEM;
    for (uint32_t i = 0; i < sv->num_ops; i++) {
        struct sg_q3_op *op = &sv->ops[i];
        if (op->type == SG_Q3_SVC_SERVERCOMMAND && n < (int)(sizeof(seqs) / sizeof(seqs[0]))) {
            if (first_cmd == UINT32_MAX)
                first_cmd = nrest;
            seqs[n] = op->u.cmd.sequence;
            refs[n++] = op->u.cmd.text; /* not a pointer: the pool grows below */
            continue;
        }
        if (op->type == SG_Q3_SVC_GAMESTATE) {
            gamestate = true;
            if (c->gs_seq_out >= 0)
                op->u.gamestate.command_seq = c->gs_seq_out;
        }
        rest[nrest++] = *op;
    }
    if (first_cmd == UINT32_MAX)
        first_cmd = 0; /* commands lead a server message (SV_UpdateServerCommandsToClient) */
    /* injected commands wait for a message after the gamestate (renum_gamestate) */
    k = out_commands(&c->sc, seqs, NULL, refs, n, !gamestate, cmds,
                     (int)(sizeof(cmds) / sizeof(cmds[0])));

    /* The ops again: what came before the commands, the commands, the rest. */
    sv->num_ops = 0;
    for (uint32_t i = 0; i < first_cmd; i++) {
        if ((err = sg_q3_svmsg_add_op(sv, rest[i].type)) < 0)
            goto out;
        sv->ops[err] = rest[i];
    }
    note_injected(c, cmds, k);
    for (int i = 0; i < k; i++) {
        struct sg_q3_bytes ref = cmds[i].ref;
        int at = sg_q3_svmsg_add_op(sv, SG_Q3_SVC_SERVERCOMMAND);
        if ((err = at) < 0)
            goto out;
        if (!cmds[i].has_ref &&
            (err = sg_q3_svmsg_add_bytes(sv, cmds[i].text, strlen(cmds[i].text), &ref)) < 0)
            goto out;
        sv->ops[at].type = SG_Q3_SVC_SERVERCOMMAND;
        sv->ops[at].u.cmd.sequence = cmds[i].seq;
        sv->ops[at].u.cmd.text = ref;
        sv->ops[at].u.cmd.fresh = true;
    }
    for (uint32_t i = first_cmd; i < nrest; i++) {
        if ((err = sg_q3_svmsg_add_op(sv, rest[i].type)) < 0)
            goto out;
        sv->ops[err] = rest[i];
    }
    err = 0;
out:
    free(rest);
    return err;
}

/* A client message for the server: acknowledgement and commands renumbered. */
static void translate_client_message(struct q3c *c)
{
    struct sg_q3_clmsg *cm = &c->qf.u.cl;
    int32_t seqs[SG_Q3_MAX_RELIABLE_COMMANDS];
    const char *texts[SG_Q3_MAX_RELIABLE_COMMANDS];
    struct out_cmd cmds[SG_Q3_MAX_RELIABLE_COMMANDS + SG_Q3_RENUM_PENDING];
    int n = cm->num_commands, k;

    cm->reliable_ack = c->ack_out;
    if (!c->cmd_copies && !(c->cmd_copies = calloc(SG_Q3_MAX_RELIABLE_COMMANDS,
                                                    sizeof(*c->cmd_copies))))
        n = 0; /* out of memory: the commands go as they are */
    for (int i = 0; i < n; i++) {
        seqs[i] = cm->commands[i].sequence;
        snprintf(c->cmd_copies[i], sizeof(c->cmd_copies[i]), "%s", cm->commands[i].text);
        texts[i] = c->cmd_copies[i];
    }
    k = out_commands(&c->cc, seqs, texts, NULL, n, true, cmds,
                     (int)(sizeof(cmds) / sizeof(cmds[0])));
    if (k > SG_Q3_MAX_RELIABLE_COMMANDS)
        k = SG_Q3_MAX_RELIABLE_COMMANDS;
    note_injected(c, cmds, k);
    for (int i = 0; i < k; i++) {
        size_t len = strlen(cmds[i].text);
        if (len >= sizeof(cm->commands[i].text))
            len = sizeof(cm->commands[i].text) - 1;
        cm->commands[i].sequence = cmds[i].seq;
        memmove(cm->commands[i].text, cmds[i].text, len);
        cm->commands[i].text[len] = '\0';
        cm->commands[i].len = (uint16_t)len;
    }
    cm->num_commands = k;
}

/* Write the message again from its decoded form (translated when filters changed the stream). */
static int rewrite_message(struct q3c *c, enum sg_dir dir)
{
    const struct sg_q3_view *sv;
    int err;

    if (dir == SG_DIR_S2C) {
        if (c->parse_err < 0)
            return c->parse_err;
        if (c->translating && (err = translate_server_message(c)) < 0)
            return err;
        return sg_q3_write_server_message(&c->sv, c->buf, sizeof(c->buf));
    }
    if (c->qf.content_err < 0)
        return c->qf.content_err;
    if (c->translating)
        translate_client_message(c);
    sv = sg_q3_netchan_view(&c->nc, SG_Q3_SIDE_SERVER);
    return sg_q3_clmsg_encode(&c->qf.u.cl, sv->checksum_feed, &sv->server_cmds, c->buf,
                              sizeof(c->buf));
}

static int q3_encode(void *state, const struct sg_frame *f, sg_emit_fn emit, void *ctx,
                     bool *identical)
{
    struct q3c *c = state;
    enum sg_q3_dir qd = f->dir == SG_DIR_C2S ? SG_Q3_C2S : SG_Q3_S2C;
    const uint8_t *msg = c->buf;
    int n, count, err;

    *identical = false;
    if (f->kind != SG_FRAME_MESSAGE)
        return SG_E_STATE;

    /* The message from its decoded form; if that fails, the bytes as they came. */
    n = rewrite_message(c, f->dir);
    if (n < 0) {
        c->stats.reencode_errors++;
        msg = c->qf.msg;
        n = (int)c->qf.msg_len;
    }

    /* Framed for the receiver: XOR, checksum, fragments. */
    count = sg_q3_netchan_encode(&c->nc, qd, c->qf.sequence, msg, (size_t)n, &c->dg);
    if (count < 0) {
        c->stats.reencode_errors++;
        return count;
    }
    *identical = (size_t)n == c->qf.msg_len && memcmp(msg, c->qf.msg, (size_t)n) == 0 &&
                 (count > 1 || (c->dg.len[0] == c->last_len &&
                                memcmp(c->dg.data[0], c->last, c->last_len) == 0));
    c->out_msg = msg;
    c->out_len = (size_t)n;
    for (int i = 0; i < count; i++) {
        err = emit(ctx, c->dg.data[i], c->dg.len[i]);
        if (err < 0)
            return err;
    }
    c->stats.reencoded++;
    if (*identical)
        c->stats.reencode_identical++;
    return count;
}

static const char *q3_demo_ext(void *state)
{
    struct q3c *c = state;

    return sg_q3_variant_demo_ext(c->nc.protocol); /* the variant's; 68's by default */
}

static int q3_record(void *state, const struct sg_frame *f, FILE *out)
{
    struct q3c *c = state;

    if (f->dir != SG_DIR_S2C || f->kind != SG_FRAME_MESSAGE)
        return 0;
    /* A new file starts a new demo. */
    if (out != c->rec_out) {
        sg_q3_recorder_finish(&c->rec);
        sg_q3_demo_writer_init(&c->writer, out);
        sg_q3_recorder_init(&c->rec, &c->writer);
        c->rec_out = out;
    }
    return sg_q3_recorder_feed(&c->rec, c->st, &c->sv, c->parse_err,
                               c->out_msg ? c->out_msg : c->qf.msg,
                               c->out_msg ? c->out_len : c->qf.msg_len);
}

static int q3_record_end(void *state, FILE *out)
{
    struct q3c *c = state;
    int err;

    if (out != c->rec_out)
        return 0;
    err = sg_q3_demo_writer_finish(&c->writer);
    sg_q3_recorder_finish(&c->rec);
    memset(&c->rec, 0, sizeof(c->rec));
    c->rec_out = NULL;
    return err;
}

/* ---- filters ---- */

/* From now on both sides' numbering and views are kept apart. */
static void start_translating(struct q3c *c)
{
    c->translating = true;
    c->nc.split_views = true;
}

/* Keep a text a filter set for the rest of the frame. */
static const char *keep_text(struct q3c *c, const char *text, size_t len)
{
    char *copy;

    if (c->nchanged >= (int)(sizeof(c->changed) / sizeof(c->changed[0])) ||
        !(copy = strndup(text, len)))
        return NULL;
    c->changed[c->nchanged++] = copy;
    return copy;
}

/* Quake 3 ends a quoted argument at the next quote: the text may not hold one. */
static void put_quoted(char *out, size_t cap, const char *prefix, const char *text, size_t len,
                       const char *suffix)
{
    size_t n = (size_t)snprintf(out, cap, "%s\"", prefix);

    for (size_t i = 0; i < len && n + 3 < cap; i++)
        out[n++] = text[i] == '"' ? '\'' : text[i];
    snprintf(out + n, cap - n, "\"%s", suffix);
}

/* The command a message of `kind` carries `text` in, keeping the original's form. */
static int build_command(const struct sg_msg *orig, enum sg_dir dir, enum sg_msg_kind kind,
                         const char *text, size_t len, char *out, size_t cap)
{
    char verb[32] = "";

    if (orig && orig->command)
        verb_of(orig->command, verb, sizeof(verb));
    if (len >= SG_Q3_MAX_STRING_CHARS - 32)
        len = SG_Q3_MAX_STRING_CHARS - 32;
    if (dir == SG_DIR_C2S) {
        switch (kind) {
        case SG_MSG_CHAT:
            if (orig && strcmp(verb, "tell") == 0) {
                /* keep "tell N " */
                const char *p = orig->command + verb_of(orig->command, verb, sizeof(verb));
                size_t head = (size_t)(p - orig->command);
                while (p[0] && p[0] != ' ')
                    p++, head++;
                snprintf(out, cap, "%.*s %.*s", (int)head, orig->command, (int)len, text);
            } else {
                snprintf(out, cap, "%s %.*s", verb[0] ? verb : "say", (int)len, text);
            }
            return 0;
        case SG_MSG_CLIENT_COMMAND:
            snprintf(out, cap, "%.*s", (int)len, text);
            return 0;
        default:
            return SG_E_UNSUPPORTED;
        }
    }
    switch (kind) {
    case SG_MSG_PRINT:
        put_quoted(out, cap, "print ", text, len, "");
        return 0;
    case SG_MSG_CENTERPRINT:
        put_quoted(out, cap, "cp ", text, len, "");
        return 0;
    case SG_MSG_CHAT:
        put_quoted(out, cap, verb[0] && strcmp(verb, "tchat") == 0 ? "tchat " : "chat ", text, len,
                   "");
        return 0;
    case SG_MSG_DISCONNECT:
        put_quoted(out, cap, "disconnect ", text, len, "");
        return 0;
    case SG_MSG_CONFIGSTRING: {
        char prefix[32];
        if (!orig)
            return SG_E_UNSUPPORTED;
        snprintf(prefix, sizeof(prefix), "cs %d ", (int)orig->number);
        put_quoted(out, cap, prefix, text, len, "");
        return 0;
    }
    case SG_MSG_SERVER_COMMAND:
        snprintf(out, cap, "%.*s", (int)len, text);
        return 0;
    default:
        return SG_E_UNSUPPORTED;
    }
}

static int q3_set_text(void *state, unsigned i, const char *text, size_t len)
{
    struct q3c *c = state;
    struct sg_msg *m = &c->msgs[i];
    enum sg_dir dir = c->frame.dir;
    char cmd[SG_Q3_MAX_STRING_CHARS];
    int err;

    if (i >= c->nmsgs || m->kind == SG_MSG_GAME || m->repeat || m->dropped)
        return SG_E_UNSUPPORTED;

    /* A configstring of a gamestate: changed in place, no numbering involved. */
    if (c->msg_ref[i] >= 0) {
        struct sg_q3_gs_item *it;
        struct sg_q3_bytes ref;
        if ((err = sg_q3_svmsg_add_bytes(&c->sv, text, len, &ref)) < 0)
            return err;
        it = &c->sv.items[c->msg_ref[i]];
        it->text = ref;
        m->text = keep_text(c, text, len);
        m->command = m->text;
        m->text_len = len;
        m->changed = true;
        return m->text ? 0 : -ENOMEM;
    }
    if (c->msg_seq[i] < 0)
        return SG_E_UNSUPPORTED;
    if ((err = build_command(m, dir, m->kind, text, len, cmd, sizeof(cmd))) < 0)
        return err;
    err = sg_q3_renum_set_text(dir == SG_DIR_S2C ? &c->sc : &c->cc, c->msg_seq[i], cmd);
    if (err < 0)
        return err;
    start_translating(c);
    m->command = keep_text(c, cmd, strlen(cmd));
    m->text = keep_text(c, text, len);
    m->text_len = m->text ? strlen(m->text) : 0;
    m->changed = true;
    return 0;
}

static int q3_drop_msg(void *state, unsigned i)
{
    struct q3c *c = state;
    struct sg_msg *m = &c->msgs[i];
    int err;

    if (i >= c->nmsgs || m->repeat || c->msg_seq[i] < 0)
        return SG_E_UNSUPPORTED;
    if (m->dropped)
        return 0;
    err = sg_q3_renum_drop(c->frame.dir == SG_DIR_S2C ? &c->sc : &c->cc, c->msg_seq[i]);
    if (err < 0)
        return err;
    start_translating(c);
    m->dropped = true;
    return 0;
}

static int q3_inject(void *state, enum sg_dir dir, enum sg_msg_kind kind, const char *text,
                     size_t len)
{
    struct q3c *c = state;
    char cmd[SG_Q3_MAX_STRING_CHARS];
    int err;

    if (c->nc.wire == SG_Q3_WIRE_HEADERS)
        return SG_E_UNSUPPORTED; /* no message view of a protocol not decoded */
    if (!c->nc.connected && dir == SG_DIR_S2C)
        return SG_E_STATE;
    if ((err = build_command(NULL, dir, kind, text, len, cmd, sizeof(cmd))) < 0)
        return err;
    err = sg_q3_renum_inject(dir == SG_DIR_S2C ? &c->sc : &c->cc, cmd);
    if (err < 0)
        return err;
    start_translating(c);
    return 0;
}

static bool q3_must_encode(void *state, const struct sg_frame *f)
{
    struct q3c *c = state;

    return c->translating && (f->kind == SG_FRAME_MESSAGE || f->kind == SG_FRAME_PARTIAL);
}

static int q3_dump(void *state, const struct sg_frame *f, enum sg_dump_level level, bool json,
                   FILE *out)
{
    struct q3c *c = state;
    bool sv = f->dir == SG_DIR_S2C && f->kind == SG_FRAME_MESSAGE;

    return sg_q3_inspect_dump(out, f, &c->qf, sv ? &c->sv : NULL, c->parse_err, level, json);
}

static const struct sg_codec_stats *q3_stats(void *state)
{
    struct q3c *c = state;
    return &c->stats;
}

static const char *q3_describe(void *state)
{
    struct q3c *c = state;

    if (c->nc.wire == SG_Q3_WIRE_HEADERS) {
        const char *game = sg_q3_protocol_game(c->nc.protocol);

        snprintf(c->describe, sizeof(c->describe),
                 "Quake 3 protocol %d%s%s%s: relayed, headers only, %llu datagrams relayed "
                 "undecoded",
                 c->nc.protocol, game ? " (" : "", game ? game : "", game ? ")" : "",
                 (unsigned long long)c->headers_only);
        return c->describe;
    }
    snprintf(c->describe, sizeof(c->describe), "%s, protocol %d%s%s", sg_q3_wire_name(c->nc.wire),
             c->nc.protocol, c->first_error[0] ? ", first error: " : "", c->first_error);
    return c->describe;
}

static void q3_info(void *state, struct sg_codec_info *out)
{
    const struct q3c *c = state;
    *out = c->game;
}

/* What spectators of this session are shown (spectate.c). */
const struct sg_q3_state *sg_q3__codec_stream(const void *state, const struct sg_q3_svmsg **last,
                                              int *parse_err)
{
    const struct q3c *c = state;

    *last = &c->sv;
    *parse_err = c->parse_err;
    return c->st;
}

/* Once per session: the protocol is one slipgate relays with its headers read only. */
static const char *q3_take_notice(void *state)
{
    struct q3c *c = state;
    const char *game;

    if (c->noticed || c->nc.wire != SG_Q3_WIRE_HEADERS)
        return NULL;
    c->noticed = true;
    game = sg_q3_protocol_game(c->nc.protocol);
    snprintf(c->describe, sizeof(c->describe),
             "Quake 3 protocol %d%s%s%s: relayed, headers only (slipgate does not decode it)",
             c->nc.protocol, game ? " (" : "", game ? game : "", game ? ")" : "");
    return c->describe;
}

/* The fixed Huffman tables, built from the adaptive tree once per process. */
static void q3_prepare(void)
{
    (void)sg_q3_huff_fixed();
}

extern const struct sg_demo_impl sg_q3_demo_impl;       /* offline.c */
extern const struct sg_capture_impl sg_q3_capture_impl; /* capture.c */

extern const struct sg_codec_status sg_q3_status; /* status.c */
extern const struct sg_codec_master sg_q3_master;  /* status.c */

const struct sg_codec sg_q3_codec = {
    .name = "q3",
    .description = "Quake 3 (protocols 66-68, ioquake3 71, OpenArena 71)",
    .probe = q3_probe,
    .banned_reply = sg_q3_banned_reply,
    .full_reply = sg_q3_full_reply,
    .is_admin = sg_q3_is_admin,
    .client_qport = q3_client_qport,
    .client_follows = q3_client_follows,
    .prepare = q3_prepare,
    .create = q3_create,
    .destroy = q3_destroy,
    .decode = q3_decode,
    .encode = q3_encode,
    .demo_ext = q3_demo_ext,
    .record = q3_record,
    .record_end = q3_record_end,
    .demo_reader = &sg_q3_demo_impl,
    .capture = &sg_q3_capture_impl,
    .set_text = q3_set_text,
    .drop_msg = q3_drop_msg,
    .inject = q3_inject,
    .must_encode = q3_must_encode,
    .dump = q3_dump,
    .stats = q3_stats,
    .describe = q3_describe,
    .established = q3_established,
    .status = &sg_q3_status,
    .master = &sg_q3_master,
    .take_notice = q3_take_notice,
    .info = q3_info,
    .spectate = &sg_q3_spectate,
};
