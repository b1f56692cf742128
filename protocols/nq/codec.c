/*
 * The NetQuake codec: the registry entry (the relay hooks of relay.c: the
 * connect probe and the accept's port move), per-session state, decode /
 * encode, the cross-game message view for filters.
 *
 * Datagrams (WinQuake net_dgrm.c): a big-endian word of flags and length,
 * then for the netchan a big-endian sequence.  NETFLAG_CTL packets are the
 * connection's control packets (CCREQ_* / CCREP_*), decoded as OOB frames.
 * A reliable message goes in pieces (NETFLAG_DATA, the last with
 * NETFLAG_EOM), one in flight at a time: the sender waits for the
 * receiver's NETFLAG_ACK of each piece and resends it until then; the
 * receiver takes only the piece numbered receiveSequence and acknowledges
 * (and drops) any other.  Unreliable datagrams (NETFLAG_UNRELIABLE) carry
 * a whole message with their own sequence; the receiver drops one older
 * than the last it took.
 *
 * The codec models each receiver from what passes through: a piece is new
 * when it carries the next number, a resend when it repeats the number of
 * the last piece (decoded again, `repeat`, so filters treat it the same),
 * else the receiver drops it (REJECTED).  Pieces before a message's last
 * are relayed as they came (the sender would wait forever for an
 * acknowledgement of a piece held back); the last piece's frame is the
 * whole message, and encode() rebuilds only that piece, so a filter may
 * change only what lies in it.  Numbers never change: a dropped message
 * leaves an svc_nop / clc_nop, and injections ride on the sender's next
 * reliable message (appended to its last piece, again on a resend, until
 * the receiver acknowledges that piece), as the qw codec does.
 */
#include "protocols/nq/nq.h"

#include "protocols/byteorder.h"
#include "protocols/error.h"
#include "protocols/nq/oob.h"
#include "protocols/relinject.h"
#include "protocols/text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NETFLAG_LENGTH_MASK 0x0000ffffu
#define NETFLAG_DATA        0x00010000u
#define NETFLAG_ACK         0x00020000u
#define NETFLAG_NAK         0x00040000u
#define NETFLAG_EOM         0x00080000u
#define NETFLAG_UNRELIABLE  0x00100000u
#define NETFLAG_CTL         0x80000000u

#define MAX_DGRAM   65535         /* the length field's reach */
#define MAX_MESSAGE (1u << 16)    /* a reassembled reliable message (QuakeSpasm 64000, DarkPlaces 65536) */
#define TEXT_RESERVE (SG_RELINJ_MAX * 1100 + 8 * 2100)

/* After this many unreliable datagrams without a reliable message to ride
 * on, an injection goes on an unreliable one (best effort: a lost datagram
 * loses it; NetQuake servers send reliable messages only when something
 * happens, clients only with a typed command). */
#define INJECT_PATIENCE 20

/* One direction's reliable stream, as its receiver takes it. */
struct rel {
    bool known;
    uint32_t next;          /* the receiver's receiveSequence */
    uint8_t *buf;           /* the message being assembled (MAX_MESSAGE) */
    size_t len;
    size_t last_at;         /* where the last piece taken starts */
    int pieces;             /* pieces taken of the message */
    bool complete;          /* its EOM piece was taken */
};

struct unrel {
    bool known;
    uint32_t next;
};

struct nqc {
    struct sg_codec_stats stats;
    struct sg_nq_proto proto;
    struct rel rel[2];     /* by direction */
    struct unrel unrel[2];
    bool connect_seen, accepted, established;
    bool running; /* the server's netchan has sent since the accept (no disconnect since) */
    int accept_port;
    int unsupported_op;
    uint64_t csqc_raw;  /* DP5-DP7: game-defined bodies kept raw (nq.h) */
    bool rec_waited;    /* DP5-DP7: a recording waited for a level's start */
    char first_error[160];
    /* The status page's (nq_info): the player's name (the client's last
     * `name` command), and the unreliable netchan's loss per direction. */
    char player[64];
    uint64_t lost[2], sequenced[2];

    /* The datagram decoded last. */
    struct sg_frame frame;
    uint32_t flags, seq;
    bool is_reliable;       /* a DATA piece (the frame is its whole message) */
    bool is_resend;
    const char *why;
    const char *ctl_name;
    struct sg_nq_parsed parsed;
    struct sg_msg *msgs;
    unsigned msgs_cap;
    int *msg_index;
    bool *dropped;
    uint8_t copy[MAX_DGRAM];
    size_t copy_len;
    struct sg_textpool text; /* the frame's texts (grown with the message) */

    struct sg_relinj inj;   /* injections ride on piece inj.q[dir].carrier when in flight */

    uint8_t out[MAX_DGRAM + 8];
    size_t out_len;
    bool out_sent;          /* the datagram decoded last went out rebuilt, as `out` */
    char describe[512];

    /* Recording (.dem): the client's latest view angles (its last clc_move),
     * as the float bits the player's own demo writes, and the demo written. */
    uint32_t view[3];
    FILE *rec_out;   /* the demo being written, or NULL */
    bool rec_started;
    bool rec_signon; /* the demo holds the whole sign-on (svc_signonnum 3) */
    bool rec_game;   /* and a block after it: something a player can play */
    struct level *lv; /* what a demo started mid-level needs (see track()) */
};

/* ---- state ---- */

struct level;
static void level_free(struct level *lv);

static int nq_create(void **state)
{
    struct nqc *c = calloc(1, sizeof(*c));

    if (!c)
        return -ENOMEM;
    c->unsupported_op = -1;
    c->accept_port = -1;
    sg_nq_proto_set(&c->proto, SG_NQ_PROTOCOL_NETQUAKE, 0);
    *state = c;
    return 0;
}

static void nq_destroy(void *state)
{
    struct nqc *c = state;

    if (!c)
        return;
    free(c->rel[0].buf);
    free(c->rel[1].buf);
    sg_nq_parsed_free(&c->parsed);
    level_free(c->lv);
    free(c->msgs);
    free(c->msg_index);
    free(c->dropped);
    free(c->text.buf);
    free(c);
}

static void note_error(struct nqc *c, int err, const char *what)
{
    c->stats.errors++;
    if (!c->first_error[0])
        snprintf(c->first_error, sizeof(c->first_error), "%s: %s", what, sg_strerror(err));
}

static void reset_netchan(struct nqc *c)
{
    for (int d = 0; d < 2; d++) {
        c->rel[d].known = false;
        c->rel[d].len = 0;
        c->rel[d].complete = false;
        c->unrel[d].known = false;
    }
    sg_relinj_restart(&c->inj);
    c->running = false;
    sg_nq_proto_set(&c->proto, SG_NQ_PROTOCOL_NETQUAKE, 0);
}

/* ---- control packets ---- */

static const char *ctl_name(int cmd)
{
    switch (cmd) {
    case 0x01: return "CCREQ_CONNECT";
    case 0x02: return "CCREQ_SERVER_INFO";
    case 0x03: return "CCREQ_PLAYER_INFO";
    case 0x04: return "CCREQ_RULE_INFO";
    case 0x05: return "CCREQ_RCON";
    case 0x81: return "CCREP_ACCEPT";
    case 0x82: return "CCREP_REJECT";
    case 0x83: return "CCREP_SERVER_INFO";
    case 0x84: return "CCREP_PLAYER_INFO";
    case 0x85: return "CCREP_RULE_INFO";
    case 0x86: return "CCREP_RCON";
    default: return "CCREQ_unknown";
    }
}

/* Read a control packet's body the way its receiver does; 0 or SG_E_MALFORMED. */
static int parse_ctl(struct nqc *c, const uint8_t *d, size_t n, int *cmd_out, const char **text,
                     size_t *text_len)
{
    struct sg_bmsg_reader r;
    char s[2048];
    int cmd;

    *text = NULL;
    *text_len = 0;
    sg_bmsg_reader_init(&r, d + 4, n - 4);
    cmd = sg_bmsg_read_u8(&r);
    *cmd_out = cmd;
    switch (cmd) {
    case 0x01: /* "QUAKE", version (NET_PROTOCOL_VERSION 3), engines add more */
        sg_bmsg_read_string(&r, s, sizeof(s), 0, NULL);
        sg_bmsg_read_u8(&r);
        break;
    case 0x02: /* game, version */
        sg_bmsg_read_string(&r, s, sizeof(s), 0, NULL);
        sg_bmsg_read_u8(&r);
        break;
    case 0x03:
        sg_bmsg_read_u8(&r);
        break;
    case 0x04:
    case 0x05:
    case 0x86:
        sg_bmsg_read_string(&r, s, sizeof(s), 0, NULL);
        break;
    case 0x81:
        c->accept_port = (int)sg_bmsg_read_s32(&r);
        break;
    case 0x82: { /* the reason */
        size_t at = r.pos;
        size_t len = sg_bmsg_read_string(&r, s, sizeof(s), 0, NULL);
        *text = (const char *)d + 4 + at;
        *text_len = len;
        break;
    }
    case 0x83: /* address, hostname, level, players, max, protocol */
        for (int i = 0; i < 3; i++)
            sg_bmsg_read_string(&r, s, sizeof(s), 0, NULL);
        sg_bmsg_skip(&r, 3);
        break;
    case 0x84: /* number, name, colors, frags, time, address */
        sg_bmsg_read_u8(&r);
        sg_bmsg_read_string(&r, s, sizeof(s), 0, NULL);
        sg_bmsg_skip(&r, 12);
        sg_bmsg_read_string(&r, s, sizeof(s), 0, NULL);
        break;
    case 0x85: /* rule, value; an empty body ends the list */
        if (sg_bmsg_remaining(&r) > 0) {
            sg_bmsg_read_string(&r, s, sizeof(s), 0, NULL);
            sg_bmsg_read_string(&r, s, sizeof(s), 0, NULL);
        }
        break;
    default:
        return SG_E_MALFORMED;
    }
    return r.overflowed ? SG_E_MALFORMED : 0;
}

/* ---- the cross-game view ---- */

static void add_msg(struct nqc *c, int pi)
{
    const struct sg_fmsg *pm = &c->parsed.msgs[pi];
    bool s2c = c->frame.dir == SG_DIR_S2C;
    const struct sg_field *tf =
        pm->text >= 0 && (uint32_t)pm->text < pm->count ? &c->parsed.fields[pm->first + (uint32_t)pm->text]
                                                        : NULL;
    struct sg_msg *m = sg_fview_add(&c->frame, c->msg_index, pi,
                                    s2c ? sg_nq_svc_name(pm->op) : sg_nq_clc_name(pm->op),
                                    c->is_reliable ? (int32_t)c->seq : -1);

    m->repeat = c->is_resend;
    if (s2c && pm->op == 2) {
        m->kind = SG_MSG_DISCONNECT;
        m->text = m->command = "";
        return;
    }
    if (!tf || tf->type != SG_FIELD_STRING)
        return;
    if (!sg_fview_text(&c->text, m, tf))
        return;
    if (s2c) {
        if (pm->op == 8) /* a chat line starts with byte 1 (SV_ClientPrintf of say) */
            m->kind = tf->len > 0 && tf->ptr[0] == 1 ? SG_MSG_CHAT : SG_MSG_PRINT;
        else
            m->kind = pm->op == 26 ? SG_MSG_CENTERPRINT : SG_MSG_STUFFTEXT;
        return;
    }
    sg_fview_client_command(&c->text, m, tf->len);
}

/* ---- decode ---- */

static void reset_frame(struct nqc *c, enum sg_dir dir)
{
    sg_fview_reset(&c->frame, dir, c->msgs, &c->parsed, &c->text);
    c->why = NULL;
    c->is_reliable = c->is_resend = false;
    c->out_sent = false;
}

static int grow(struct nqc *c, size_t msg_len)
{
    size_t pool = msg_len * 2 + TEXT_RESERVE;

    if (pool > c->text.cap) {
        char *p = realloc(c->text.buf, pool);
        if (!p)
            return -ENOMEM;
        c->text.buf = p;
        c->text.cap = pool;
    }
    if (c->parsed.msgs_cap + SG_RELINJ_MAX > c->msgs_cap) {
        unsigned cap = c->parsed.msgs_cap + SG_RELINJ_MAX;
        struct sg_msg *m = realloc(c->msgs, cap * sizeof(*m));
        int *ix;
        bool *dr;
        if (!m)
            return -ENOMEM;
        c->msgs = m;
        ix = realloc(c->msg_index, cap * sizeof(*ix));
        if (!ix)
            return -ENOMEM;
        c->msg_index = ix;
        dr = realloc(c->dropped, cap * sizeof(*dr));
        if (!dr)
            return -ENOMEM;
        c->dropped = dr;
        c->msgs_cap = cap;
        c->frame.msgs = c->msgs;
    }
    return 0;
}

static int decode_ctl(struct nqc *c, enum sg_dir dir)
{
    struct sg_msg *m;
    const char *text;
    size_t text_len;
    int cmd = -1, err;

    c->stats.oob++;
    c->frame.kind = SG_FRAME_OOB;
    if (grow(c, c->copy_len) < 0)
        return -ENOMEM;
    m = &c->msgs[0];
    memset(m, 0, sizeof(*m));
    m->kind = SG_MSG_GAME;
    m->number = -1;
    c->frame.nmsgs = 1;
    if (c->copy_len >= 4 && sg_be32(c->copy) == 0xffffffffu) {
        /* DarkPlaces' connectionless packets (getchallenge first, to any
         * server).  A DarkPlaces server (Nexuiz) answers its client's
         * "connect" with "accept" there, not with CCREP_ACCEPT: the
         * connection starts over at that accept (netconn.c).  A duplicate
         * (the client sent both connects; it answers the second with
         * "accept" once the netchan runs) changes nothing: the server keeps
         * its netchan and the connected client ignores it. */
        static const char accept[] = "accept";
        m->name = "connectionless";
        if (dir == SG_DIR_C2S && c->copy_len >= 11 && memcmp(c->copy + 4, "connect", 7) == 0) {
            c->connect_seen = true;
        } else if (dir == SG_DIR_S2C && c->copy_len >= 4 + sizeof(accept) - 1 &&
                   memcmp(c->copy + 4, accept, sizeof(accept) - 1) == 0) {
            c->accepted = true;
            if (!c->running)
                reset_netchan(c);
        }
        return 0;
    }
    if ((sg_be32(c->copy) & NETFLAG_LENGTH_MASK) != c->copy_len || c->copy_len < 5) {
        m->name = "CCREQ_malformed";
        note_error(c, SG_E_MALFORMED, "control packet");
        return SG_E_MALFORMED;
    }
    err = parse_ctl(c, c->copy, c->copy_len, &cmd, &text, &text_len);
    m->name = ctl_name(cmd);
    c->ctl_name = m->name;
    if (cmd == 0x82 && text) {
        m->kind = SG_MSG_DISCONNECT;
        m->text = m->command = sg_textpool_keep(&c->text, text, text_len);
        m->text_len = m->text ? text_len : 0;
    }
    if (dir == SG_DIR_C2S && cmd == 0x01) {
        /* Clients repeat their request until an accept comes (and one may
         * arrive after it): the connection starts over at the accept only. */
        c->connect_seen = true;
    } else if (dir == SG_DIR_S2C && cmd == 0x81 && err == 0) {
        c->accepted = true;
        reset_netchan(c);
    }
    if (err < 0)
        note_error(c, err, "control packet");
    return err;
}

/*
 * The level as the client knows it, for a demo that starts mid-level: the
 * serverinfo message (with the cd track and the view entity), the signon's
 * baselines, static entities and sounds in their order, and the latest
 * light styles, player names, frags, colours and stats.  Reset at each
 * serverinfo; kept from the server messages the client takes (a resend
 * once).
 */
#define LV_SIGNON_MAX (1u << 20)

struct lvmsg {
    uint8_t len;
    uint8_t b[67]; /* lightstyle: op, style, up to 64 bytes, NUL */
};

struct level {
    bool valid;
    uint8_t *info;      /* serverinfo, cdtrack, setview messages */
    size_t info_len, info_cap;
    uint8_t *pre;       /* a DarkPlaces server's CSQC stufftext lines since the last serverinfo */
    size_t pre_len, pre_cap;
    uint8_t *signon;    /* baselines, static entities and sounds */
    size_t signon_len, signon_cap;
    struct lvmsg style[256], name[256], frags[256], colors[256], stat[256];
    struct lvmsg time;
};

static int lv_append(uint8_t **buf, size_t *len, size_t *cap, const uint8_t *d, size_t n)
{
    if (*len + n > LV_SIGNON_MAX)
        return SG_E_TOOBIG;
    if (*len + n > *cap) {
        size_t nc = (*len + n) * 2;
        uint8_t *b = realloc(*buf, nc);
        if (!b)
            return -ENOMEM;
        *buf = b;
        *cap = nc;
    }
    memcpy(*buf + *len, d, n);
    *len += n;
    return 0;
}

static void lv_keep(struct lvmsg *m, const uint8_t *d, size_t n)
{
    if (n <= sizeof(m->b)) {
        memcpy(m->b, d, n);
        m->len = (uint8_t)n;
    }
}

static void track(struct nqc *c, const uint8_t *d, size_t len)
{
    struct level *lv = c->lv;

    if (!lv && !(lv = c->lv = calloc(1, sizeof(*lv))))
        return;
    for (uint32_t i = 0; i < c->parsed.nmsgs; i++) {
        const struct sg_fmsg *pm = &c->parsed.msgs[i];
        size_t at = pm->at, end = i + 1 < c->parsed.nmsgs ? c->parsed.msgs[i + 1].at : len;
        const uint8_t *b = d + at;
        size_t n = end - at;
        uint32_t first = pm->count ? c->parsed.fields[pm->first].raw & 0xff : 0;
        if (pm->unparsed)
            continue;
        switch (pm->op) {
        case 9: /* what a DarkPlaces server says before its serverinfo: the CSQC program */
            if (c->proto.dp && pm->count == 1 && !c->proto.fitz) {
                const struct sg_field *f = &c->parsed.fields[pm->first];
                if ((f->len >= 10 && memcmp(f->ptr, "csqc_prog", 9) == 0) ||
                    (f->len >= 28 && memcmp(f->ptr, "cl_serverextension_download", 27) == 0))
                    if (lv_append(&lv->pre, &lv->pre_len, &lv->pre_cap, b, n) < 0)
                        lv->pre_len = 0;
            }
            break;
        case 11: /* a new level */
            lv->valid = sg_nq_protocol_known(c->proto.protocol);
            lv->info_len = lv->signon_len = 0;
            /* (its CSQC lines lead it, as the server sent them) */
            if (lv->pre_len && lv_append(&lv->info, &lv->info_len, &lv->info_cap, lv->pre,
                                         lv->pre_len) < 0)
                lv->valid = false;
            lv->pre_len = 0;
            memset(lv->style, 0, sizeof(lv->style));
            memset(lv->name, 0, sizeof(lv->name));
            memset(lv->frags, 0, sizeof(lv->frags));
            memset(lv->colors, 0, sizeof(lv->colors));
            memset(lv->stat, 0, sizeof(lv->stat));
            lv->time.len = 0;
            /* fall through */
        case 32: /* cdtrack */
        case 5:  /* setview */
            if (lv_append(&lv->info, &lv->info_len, &lv->info_cap, b, n) < 0)
                lv->valid = false;
            break;
        case 20: case 22: case 29: case 42: case 43: case 44: case 55: case 56: case 59:
            if (lv_append(&lv->signon, &lv->signon_len, &lv->signon_cap, b, n) < 0)
                lv->valid = false;
            break;
        case 12:
            lv_keep(&lv->style[first], b, n);
            break;
        case 13:
            lv_keep(&lv->name[first], b, n);
            break;
        case 14:
            lv_keep(&lv->frags[first], b, n);
            break;
        case 17:
            lv_keep(&lv->colors[first], b, n);
            break;
        case 3:
            lv_keep(&lv->stat[first], b, n);
            break;
        case 7:
            lv_keep(&lv->time, b, n);
            break;
        default:
            break;
        }
    }
}

static void level_free(struct level *lv)
{
    if (!lv)
        return;
    free(lv->info);
    free(lv->pre);
    free(lv->signon);
    free(lv);
}

/* A client's `name NEW` command (NEW quoted, or the rest of the line), as the player's name. */
static void take_name(struct nqc *c, const char *cmd)
{
    const char *v, *end;

    if (strncmp(cmd, "name", 4) != 0 || (cmd[4] != ' ' && cmd[4] != '\t'))
        return;
    for (v = cmd + 5; *v == ' ' || *v == '\t';)
        v++;
    if (*v == '"')
        end = strchr(++v, '"');
    else
        end = NULL;
    if (!end)
        for (end = v + strlen(v); end > v && (end[-1] == '\n' || end[-1] == ' ');)
            end--;
    if (end > v)
        snprintf(c->player, sizeof(c->player), "%.*s", (int)(end - v), v);
}

/* Parse `len` bytes of message at `d` into the frame's messages. */
static int decode_message(struct nqc *c, enum sg_dir dir, const uint8_t *d, size_t len)
{
    int err = sg_nq_parse(dir, &c->proto, d, len, &c->parsed);

    if (err == -ENOMEM || grow(c, len) < 0)
        return -ENOMEM;
    if (c->parsed.serverinfo) {
        /* A resend of the reliable message that carried it is the same
         * message (the client's copy was lost): no new level. */
        c->frame.new_level = !c->is_resend;
        snprintf(c->frame.level, sizeof(c->frame.level), "%s", c->parsed.level);
    }
    if (c->parsed.unsupported_op >= 0 && c->unsupported_op < 0)
        c->unsupported_op = c->parsed.unsupported_op;
    c->csqc_raw += c->parsed.csqc_raw;
    if (err < 0) {
        note_error(c, err, dir == SG_DIR_S2C ? "server message" : "client message");
        c->frame.kind = SG_FRAME_RAW;
        c->frame.nmsgs = 0;
        return err;
    }
    memset(c->dropped, 0, sizeof(bool) * c->parsed.nmsgs);
    for (uint32_t i = 0; i < c->parsed.nmsgs; i++)
        add_msg(c, (int)i);
    for (unsigned i = 0; dir == SG_DIR_C2S && i < c->frame.nmsgs; i++)
        if (c->msgs[i].kind == SG_MSG_CLIENT_COMMAND && c->msgs[i].command)
            take_name(c, c->msgs[i].command);
    if (dir == SG_DIR_C2S)
        for (uint32_t i = 0; i < c->parsed.nmsgs; i++) {
            const struct sg_fmsg *pm = &c->parsed.msgs[i];
            uint32_t a = c->proto.dpn >= 7 ? 2 : 1; /* (DP7: the move's sequence first) */
            if (pm->op != 3 || pm->count < a + 3 || pm->unparsed)
                continue;
            for (int k = 0; k < 3; k++) {
                const struct sg_field *f = &c->parsed.fields[pm->first + a + (uint32_t)k];
                float v = sg_bmsg_num_value(f->num, f->raw);
                memcpy(&c->view[k], &v, sizeof(v));
            }
        }
    if (dir == SG_DIR_S2C && !c->is_resend)
        track(c, d, len);
    c->frame.msg = d;
    c->frame.msg_len = len;
    c->frame.kind = SG_FRAME_MESSAGE;
    c->frame.undecoded = c->parsed.unsupported_op >= 0; /* a part relayed as raw bytes */
    c->frame.disconnect = dir == SG_DIR_C2S && c->parsed.disconnect;
    if (c->parsed.disconnect)
        c->running = false; /* the next accept starts a new connection */
    c->stats.messages++;
    return 0;
}

static int nq_decode(void *state, enum sg_dir dir, const uint8_t *data, size_t len,
                     const struct sg_frame **frame)
{
    struct nqc *c = state;
    struct rel *rl = &c->rel[dir];
    struct unrel *ur = &c->unrel[dir];
    size_t payload;

    reset_frame(c, dir);
    *frame = &c->frame;
    c->stats.decoded++;
    if (len > MAX_DGRAM) {
        note_error(c, SG_E_TOOBIG, "datagram");
        return SG_E_TOOBIG;
    }
    memcpy(c->copy, data, len);
    c->copy_len = len;
    if (len < 4) {
        c->frame.kind = SG_FRAME_REJECTED;
        c->why = "runt (shorter than the header)";
        c->stats.rejected++;
        return 0;
    }
    c->flags = sg_be32(data) & ~NETFLAG_LENGTH_MASK;
    if (c->flags & NETFLAG_CTL)
        return decode_ctl(c, dir);

    if (dir == SG_DIR_C2S && c->accepted)
        c->established = true;
    if (dir == SG_DIR_S2C && c->accepted && len >= 8)
        c->running = true;
    if (len < 8 || (sg_be32(data) & NETFLAG_LENGTH_MASK) != len) {
        c->frame.kind = SG_FRAME_REJECTED; /* "wrong length": the receiver drops it */
        c->why = len < 8 ? "runt (shorter than the header)" : "its length word is not its length";
        c->stats.rejected++;
        return 0;
    }
    c->seq = sg_be32(data + 4);
    c->frame.sequence = (int32_t)c->seq;
    payload = len - 8;

    if (c->flags & NETFLAG_ACK) {
        /* The receiver of the other direction acknowledges a piece. */
        enum sg_dir towards = dir == SG_DIR_C2S ? SG_DIR_S2C : SG_DIR_C2S;
        c->frame.ack = (int32_t)c->seq;
        if (c->inj.q[towards].in_flight && c->inj.q[towards].carrier == c->seq) {
            c->inj.q[towards].in_flight = false;
            sg_relinj_settle(&c->inj, towards, true); /* delivered */
        }
        return 0;
    }
    if (c->flags & NETFLAG_UNRELIABLE) {
        if (ur->known && c->seq < ur->next) {
            c->frame.kind = SG_FRAME_REJECTED;
            c->why = "stale unreliable sequence";
            c->stats.rejected++;
            return 0;
        }
        if (ur->known && c->seq > ur->next)
            c->lost[dir] += c->seq - ur->next; /* skipped: lost on the way here */
        c->sequenced[dir]++;
        ur->known = true;
        ur->next = c->seq + 1;
        sg_relinj_waited(&c->inj, dir, INJECT_PATIENCE);
        c->frame.pieces = 1;
        return decode_message(c, dir, c->copy + 8, payload);
    }
    if (!(c->flags & NETFLAG_DATA)) {
        c->frame.kind = SG_FRAME_REJECTED;
        c->why = "no DATA, ACK or UNRELIABLE flag";
        c->stats.rejected++;
        return 0;
    }

    /* A reliable piece (the reassembly buffer comes with the first one: a
     * flood of sessions that never get there costs little). */
    if (!rl->buf && !(rl->buf = malloc(MAX_MESSAGE))) {
        note_error(c, -ENOMEM, "reliable message");
        return -ENOMEM;
    }
    c->is_reliable = true;
    c->frame.ack_wanted = (int32_t)c->seq; /* the receiver acknowledges every piece */
    if (!rl->known || c->seq == rl->next) {
        if (rl->complete || !rl->known) {
            rl->len = 0;
            rl->pieces = 0;
            rl->complete = false;
        }
        rl->known = true;
        rl->next = c->seq + 1;
        if (rl->len + payload > MAX_MESSAGE) {
            rl->len = 0; /* the receiver would fail on it: start over */
            note_error(c, SG_E_TOOBIG, "reliable message");
            c->frame.kind = SG_FRAME_RAW;
            return SG_E_TOOBIG;
        }
        rl->last_at = rl->len;
        memcpy(rl->buf + rl->len, c->copy + 8, payload);
        rl->len += payload;
        rl->pieces++;
        if (c->inj.q[dir].in_flight && c->inj.q[dir].carrier != c->seq) {
            /* A new piece: the sender had the carrier acknowledged (by a way we did not see). */
            c->inj.q[dir].in_flight = false;
            sg_relinj_settle(&c->inj, dir, true);
        }
        if (!(c->flags & NETFLAG_EOM)) {
            c->frame.kind = SG_FRAME_RAW; /* relayed now: its sender waits for the ack */
            c->frame.pieces = 0;
            return 0;
        }
        rl->complete = true;
    } else if (c->seq + 1 == rl->next) {
        /* A resend of the last piece (its ack may have been lost, or the piece). */
        c->is_resend = true;
        if (!rl->complete || !(c->flags & NETFLAG_EOM) || rl->len - rl->last_at != payload ||
            memcmp(rl->buf + rl->last_at, c->copy + 8, payload) != 0) {
            c->frame.kind = SG_FRAME_RAW;
            return 0;
        }
        sg_relinj_unsent(&c->inj, dir, c->seq); /* carry the injections again */
    } else {
        c->frame.kind = SG_FRAME_REJECTED;
        c->why = "not the receiver's next reliable sequence";
        c->stats.rejected++;
        return 0;
    }
    c->frame.pieces = rl->pieces;
    return decode_message(c, dir, rl->buf, rl->len);
}

/* ---- filters ---- */

/* May message `i` of the frame be changed (it lies in the piece encode() rebuilds)? */
static bool changeable(const struct nqc *c, unsigned i)
{
    if (c->frame.kind != SG_FRAME_MESSAGE || i >= c->frame.nmsgs || c->msgs[i].injected)
        return false;
    if (!c->is_reliable)
        return true;
    return c->parsed.msgs[c->msg_index[i]].at >= c->rel[c->frame.dir].last_at;
}

static int nq_set_text(void *state, unsigned i, const char *text, size_t len)
{
    struct nqc *c = state;

    if (!changeable(c, i))
        return SG_E_UNSUPPORTED;
    return sg_fmsg_set_text(&c->text, &c->frame, i, c->parsed.fields, c->parsed.msgs, c->msg_index,
                            false, text, len);
}

static int nq_drop_msg(void *state, unsigned i)
{
    struct nqc *c = state;

    if (!changeable(c, i))
        return SG_E_UNSUPPORTED;
    return sg_fmsg_drop(&c->frame, c->dropped, c->msg_index, i);
}

static int nq_inject(void *state, enum sg_dir dir, enum sg_msg_kind kind, const char *text,
                     size_t len)
{
    struct nqc *c = state;
    struct sg_relinj_item *j;
    int err = sg_relinj_add(&c->inj, dir, kind, text, len);

    if (err < 0)
        return err;
    j = &c->inj.item[c->inj.n - 1];
    if (dir == SG_DIR_S2C && kind == SG_MSG_CHAT) {
        /* NetQuake marks a chat line with a leading 1 byte (the check left room for it). */
        memmove(j->text + 1, j->text, j->len + 1);
        j->text[0] = '\001';
        j->len++;
    }
    return 0;
}

static bool nq_must_encode(void *state, const struct sg_frame *frame)
{
    const struct nqc *c = state;

    if (frame != &c->frame || frame->kind != SG_FRAME_MESSAGE)
        return false;
    if (!c->is_reliable)
        return sg_relinj_ready(&c->inj, frame->dir, INJECT_PATIENCE);
    return !c->inj.q[frame->dir].in_flight && sg_relinj_ready(&c->inj, frame->dir, 0);
}

static void write_injections(struct nqc *c, struct sg_bmsg_writer *w, size_t limit)
{
    static const struct sg_text_ops ops = {
        .print = 8, .centerprint = 26, .stufftext = 9, .stringcmd = 4, .print_level = false};
    bool any = false;

    if (c->is_reliable && c->inj.q[c->frame.dir].in_flight)
        return;
    for (unsigned i = 0; i < c->inj.n; i++) {
        struct sg_relinj_item *j = &c->inj.item[i];
        const char *name;
        if (j->dir != c->frame.dir || j->attached || w->len + j->len + 2 > limit ||
            c->frame.nmsgs >= c->msgs_cap || (!c->is_reliable && j->waited < INJECT_PATIENCE))
            continue;
        j->attached = any = true;
        name = sg_text_op_write(w, &ops, j->dir, j->kind);
        sg_fmsg_injected(&c->text, &c->msgs[c->frame.nmsgs++], w, j->kind, name, (int32_t)c->seq,
                         j->text, j->len);
    }
    if (any && c->is_reliable)
        sg_relinj_carried(&c->inj, c->frame.dir, c->seq);
}

/* ---- encode ---- */

static int nq_encode(void *state, const struct sg_frame *frame, sg_emit_fn emit, void *ctx,
                     bool *identical)
{
    struct nqc *c = state;
    struct sg_bmsg_writer w;
    size_t skip = 0, limit, body;
    uint8_t *msg;
    int err;

    *identical = false;
    if (frame != &c->frame || frame->kind != SG_FRAME_MESSAGE)
        return SG_E_STATE;
    /* The message rebuilt after the header's 8 bytes. */
    sg_bmsg_writer_init(&w, c->out + 8, sizeof(c->out) - 8);
    if (c->is_reliable) {
        skip = c->rel[frame->dir].last_at; /* earlier pieces: relayed already */
        if (skip > sizeof(c->out) - 8)
            return SG_E_TOOBIG;
    }
    sg_nq_write(&c->parsed, c->dropped, &w);
    /* Nothing left of a piece that had bytes (a filter dropped them all): a
     * nop keeps the piece (and its number).  A datagram that came empty
     * stays empty. */
    if (!w.overflowed && c->copy_len > 8 && w.len < skip + 1 && c->is_reliable)
        sg_bmsg_write_u8(&w, 1);
    else if (!w.overflowed && c->copy_len > 8 && w.len == 0)
        sg_bmsg_write_u8(&w, 1);
    /* A piece as big as the original, or 1024 bytes (MAX_DATAGRAM of 15), whichever is more. */
    limit = skip + (c->copy_len - 8 > 1024 ? c->copy_len - 8 : 1024);
    write_injections(c, &w, limit);
    if (w.overflowed) {
        c->stats.reencode_errors++;
        return SG_E_OVERFLOW;
    }
    msg = c->out + 8;
    if (skip && (w.len < skip || memcmp(msg, frame->msg, skip) != 0)) {
        c->stats.reencode_errors++;
        return SG_E_UNSUPPORTED; /* a change before this piece: too late */
    }
    body = w.len - skip;
    if (body + 8 > NETFLAG_LENGTH_MASK) {
        c->stats.reencode_errors++;
        return SG_E_TOOBIG;
    }
    if (skip)
        memmove(msg, msg + skip, body);
    sg_put_be32(c->out, (uint32_t)(body + 8) | c->flags);
    sg_put_be32(c->out + 4, c->seq);
    c->stats.reencoded++;
    *identical = body + 8 == c->copy_len && memcmp(c->out, c->copy, c->copy_len) == 0;
    if (*identical)
        c->stats.reencode_identical++;
    err = emit(ctx, c->out, body + 8);
    c->out_sent = err >= 0;
    c->out_len = body + 8;
    if (!c->is_reliable)
        sg_relinj_settle(&c->inj, frame->dir, err >= 0); /* sent: done with; else wait again */
    else if (err < 0)
        sg_relinj_unsent(&c->inj, frame->dir, c->seq);
    return err < 0 ? err : 1;
}

/* ---- dump ---- */

/* The parsed message behind the frame's message `i` (none for an injected
 * one, or when the frame is not the one decoded last). */
static const struct sg_fmsg *parsed_msg(const struct nqc *c, const struct sg_frame *frame,
                                          unsigned i)
{
    int pi;

    if (frame != &c->frame || frame->kind != SG_FRAME_MESSAGE || frame->msgs[i].injected)
        return NULL;
    pi = c->msg_index[i];
    return pi >= 0 && (uint32_t)pi < c->parsed.nmsgs ? &c->parsed.msgs[pi] : NULL;
}

static int nq_dump(void *state, const struct sg_frame *frame, enum sg_dump_level level, bool json,
                   FILE *out)
{
    static const char *const kinds[] = {"raw", "oob", "partial", "message", "rejected"};
    struct nqc *c = state;
    const struct sg_fmsg *pm;
    long start = ftell(out);

    if (json) {
        fprintf(out, "{\"kind\":\"%s\",\"seq\":%d,\"flags\":\"0x%08x\",\"msgs\":[",
                kinds[frame->kind], (int)frame->sequence, (unsigned)c->flags);
        for (unsigned i = 0; level >= SG_DUMP_MESSAGES && i < frame->nmsgs; i++) {
            const struct sg_msg *m = &frame->msgs[i];
            fprintf(out, "%s{\"name\":\"%s\",\"kind\":\"%s\"", i ? "," : "", m->name,
                    sg_msg_kind_name(m->kind));
            if (m->text) {
                fputs(",\"text\":\"", out);
                sg_put_escaped(out, (const uint8_t *)m->text, m->text_len, true);
                fputc('"', out);
            }
            if (level >= SG_DUMP_FIELDS && (pm = parsed_msg(c, frame, i))) {
                fputs(",\"fields\":[", out);
                for (uint32_t k = 0; k < pm->count; k++) {
                    if (k)
                        fputc(',', out);
                    sg_field_put(out, &c->parsed.fields[pm->first + k], true, &sg_nq_field_style);
                }
                fputc(']', out);
            }
            fprintf(out, "%s%s}", m->dropped ? ",\"dropped\":true" : "",
                    m->injected ? ",\"injected\":true" : "");
        }
        fputs("]", out);
        if (level >= SG_DUMP_FIELDS && frame->kind == SG_FRAME_OOB && c->ctl_name &&
            strcmp(c->ctl_name, "CCREP_ACCEPT") == 0)
            fprintf(out, ",\"port\":%d", c->accept_port);
        fputs("}", out);
    } else {
        fprintf(out, "%s seq=%d flags=0x%08x%s%s%s\n", kinds[frame->kind], (int)frame->sequence,
                (unsigned)c->flags, c->why ? " (" : "", c->why ? c->why : "", c->why ? ")" : "");
        for (unsigned i = 0; level >= SG_DUMP_MESSAGES && i < frame->nmsgs; i++) {
            const struct sg_msg *m = &frame->msgs[i];
            fprintf(out, "  %s%s%s", m->name, m->dropped ? " (dropped)" : "",
                    m->injected ? " (injected)" : "");
            if (m->text) {
                fputs(" \"", out);
                sg_put_escaped(out, (const uint8_t *)m->text, m->text_len, false);
                fputc('"', out);
            }
            if (level >= SG_DUMP_FIELDS && (pm = parsed_msg(c, frame, i)))
                for (uint32_t k = 0; k < pm->count; k++)
                    sg_field_put(out, &c->parsed.fields[pm->first + k], false, &sg_nq_field_style);
            if (level >= SG_DUMP_FIELDS && frame->kind == SG_FRAME_OOB && c->ctl_name &&
                strcmp(c->ctl_name, "CCREP_ACCEPT") == 0)
                fprintf(out, " port=%d", c->accept_port);
            fputc('\n', out);
        }
    }
    return start >= 0 ? (int)(ftell(out) - start) : 0;
}

/* ---- recording ---- */

/* One .dem block: length, the three view angles, the message (`head`
 * then `tail`); flushed. */
static int write_block2(struct nqc *c, FILE *out, const uint8_t *head, size_t head_len,
                        const uint8_t *tail, size_t tail_len)
{
    uint8_t hdr[16];

    sg_put_le32(hdr, (uint32_t)(head_len + tail_len));
    for (int k = 0; k < 3; k++)
        sg_put_le32(hdr + 4 + 4 * k, c->view[k]);
    if (fwrite(hdr, 1, 16, out) != 16 || (head_len && fwrite(head, 1, head_len, out) != head_len) ||
        (tail_len && fwrite(tail, 1, tail_len, out) != tail_len) || fflush(out) != 0)
        return sg_write_error(); /* -ENOSPC on a full disk */
    return 1;
}

static int write_block(struct nqc *c, FILE *out, const uint8_t *msg, size_t len)
{
    return write_block2(c, out, msg, len, NULL, 0);
}

/* Blocks of at most 8000 bytes (WinQuake's MAX_MSGLEN) cut at message
 * boundaries; for a DarkPlaces server 65536 (its NET_MAXMESSAGE: its
 * serverinfo alone may pass 8000 bytes, and its client reads demo blocks up
 * to that size). */
struct synth {
    struct nqc *c;
    FILE *out;
    uint8_t buf[65536];
    size_t cap;
    size_t len;
    int err;
};

static void synth_flush(struct synth *y)
{
    if (y->len && y->err >= 0) {
        int e = write_block(y->c, y->out, y->buf, y->len);
        if (e < 0)
            y->err = e;
    }
    y->len = 0;
}

static void synth_msg(struct synth *y, const uint8_t *b, size_t n)
{
    if (n > y->cap)
        return; /* no such message comes from a NetQuake server */
    if (y->len + n > y->cap)
        synth_flush(y);
    memcpy(y->buf + y->len, b, n);
    y->len += n;
}

/* The messages in `buf` (whole, as tracked) one by one. */
static void synth_stream(struct synth *y, const uint8_t *buf, size_t len)
{
    struct sg_nq_proto p = y->c->proto;
    struct sg_nq_parsed parsed = {0};

    if (sg_nq_parse(SG_DIR_S2C, &p, buf, len, &parsed) == 0)
        for (uint32_t i = 0; i < parsed.nmsgs; i++) {
            size_t at = parsed.msgs[i].at;
            size_t end = i + 1 < parsed.nmsgs ? parsed.msgs[i + 1].at : len;
            synth_msg(y, buf + at, end - at);
        }
    else
        y->err = SG_E_MALFORMED;
    sg_nq_parsed_free(&parsed);
}

static void synth_signon(struct synth *y, uint8_t n)
{
    uint8_t m[2] = {25, n};

    synth_msg(y, m, 2);
    synth_flush(y);
}

/*
 * A demo started mid-level begins as the client's own would: the
 * serverinfo (signon 1), the baselines and static entities and sounds
 * (signon 2), the light styles, players and stats (signon 3); the game's
 * own messages follow.
 */
static int synthesize(struct nqc *c, FILE *out)
{
    struct level *lv = c->lv;
    struct synth *y = calloc(1, sizeof(*y));
    int err;

    if (!y)
        return -ENOMEM;
    y->c = c;
    y->out = out;
    y->cap = c->proto.dp ? sizeof(y->buf) : 8000;
    synth_stream(y, lv->info, lv->info_len);
    synth_signon(y, 1);
    synth_stream(y, lv->signon, lv->signon_len);
    synth_signon(y, 2);
    if (lv->time.len)
        synth_msg(y, lv->time.b, lv->time.len);
    for (int i = 0; i < 256; i++) {
        const struct lvmsg *m[5] = {&lv->style[i], &lv->name[i], &lv->frags[i], &lv->colors[i],
                                    &lv->stat[i]};
        for (int k = 0; k < 5; k++)
            if (m[k]->len)
                synth_msg(y, m[k]->b, m[k]->len);
    }
    synth_signon(y, 3);
    err = y->err;
    free(y);
    return err;
}

static const char *nq_demo_ext(void *state)
{
    (void)state;
    return "dem";
}

/*
 * A server message the client takes (a whole reliable message, or an
 * unreliable datagram) becomes one block, as the player's own `record`
 * writes them: as the client got it (rebuilt by encode() when it went out
 * rebuilt: the filters' changes, removals and injections are in it; a
 * reliable message's earlier pieces went out as they came), once (a resend
 * of its last piece, which the client drops, is not written again).  A
 * new demo starts at a serverinfo (a level's start) with the cd-track line
 * ("-1": no track forced); until then it waits.  A resend of the message
 * that carried the serverinfo is that message again: not a new demo.
 */
int sg_nq_record(void *state, const struct sg_frame *frame, FILE *out)
{
    struct nqc *c = state;
    int err;
    bool rebuilt = frame == &c->frame && c->out_sent;
    size_t head = rebuilt && c->is_reliable ? c->rel[frame->dir].last_at : 0;
    size_t len = rebuilt ? head + (c->out_len - 8) : frame->msg_len;

    if (frame->dir != SG_DIR_S2C || frame->kind != SG_FRAME_MESSAGE || !frame->msg ||
        (frame == &c->frame && c->is_resend))
        return 0;
    if (out != c->rec_out || !c->rec_started) {
        /* (not on DP5-DP7: their entity frames are deltas against what
         * the client acknowledged, which a demo started here lacks) */
        bool synth = !frame->new_level && c->lv && c->lv->valid && !c->proto.dpn;
        if (!frame->new_level && !synth) {
            c->rec_waited = c->rec_waited || c->proto.dpn;
            return 0; /* mid-level, nothing known of the level: wait for its serverinfo */
        }
        c->rec_out = out;
        c->rec_started = true;
        c->rec_signon = synth; /* the synthesized start ends with signon 3 */
        c->rec_game = false;
        if (fputs("-1\n", out) < 0)
            return sg_write_error();
        if (synth && (err = synthesize(c, out)) < 0)
            return err;
    }
    if (len > SG_NQ_DEM_MAX_BLOCK)
        return SG_E_TOOBIG;
    if (rebuilt)
        err = write_block2(c, out, frame->msg, head, c->out + 8, c->out_len - 8);
    else
        err = write_block(c, out, frame->msg, frame->msg_len);
    if (err > 0) {
        c->rec_game = c->rec_game || c->rec_signon;
        if (frame->msg == c->frame.msg && c->parsed.signon >= 3)
            c->rec_signon = true;
    }
    return err;
}

/*
 * The end as the player's `stop` writes it: a block holding svc_disconnect.
 * 1 when the demo holds nothing a player can play (nothing, or the sign-on
 * alone: quakespasm and DarkPlaces take an empty .dem for an invalid demo
 * and hang), which the caller removes.
 */
int sg_nq_record_end(void *state, FILE *out)
{
    struct nqc *c = state;
    static const uint8_t disconnect = 2;
    bool started = c->rec_out == out && c->rec_started;
    int err = 0;

    if (started)
        err = write_block(c, out, &disconnect, 1);
    c->rec_out = NULL;
    c->rec_started = false;
    if (err < 0)
        return err;
    return started && c->rec_game ? 0 : 1;
}

/* ---- the rest ---- */

static const struct sg_codec_stats *nq_stats(void *state)
{
    return &((struct nqc *)state)->stats;
}

/* The player's name and the unreliable netchan's loss; the level comes from
 * the frames (new_level), the server's name from no datagram of a game. */
static void nq_info(void *state, struct sg_codec_info *out)
{
    const struct nqc *c = state;

    memset(out, 0, sizeof(*out));
    snprintf(out->player, sizeof(out->player), "%s", c->player);
    for (int d = 0; d < 2; d++) {
        out->lost[d] = c->lost[d];
        out->sequenced[d] = c->sequenced[d];
    }
}

static const char *nq_describe(void *state)
{
    struct nqc *c = state;

    char raw[160] = "";

    if (c->csqc_raw)
        snprintf(raw, sizeof(raw), ", %llu CSQC bodies kept raw (game-defined)",
                 (unsigned long long)c->csqc_raw);
    if (c->rec_waited)
        snprintf(raw + strlen(raw), sizeof(raw) - strlen(raw),
                 ", recording waits for a level start");
    snprintf(c->describe, sizeof(c->describe), "NetQuake protocol %d%s%s%s%s%s%s%s",
             (int)c->proto.protocol, c->proto.dpn ? " (DarkPlaces)" : "",
             sg_nq_protocol_known(c->proto.protocol) ? "" : " (not decoded: relayed)",
             c->unsupported_op >= 0 ? ", undecoded messages from opcode " : "",
             c->unsupported_op >= 0 ? sg_nq_svc_name(c->unsupported_op) : "", raw,
             c->first_error[0] ? ", first error: " : "", c->first_error);
    return c->describe;
}

static bool nq_established(void *state)
{
    return ((struct nqc *)state)->established;
}

extern const struct sg_codec_status sg_nq_status; /* status.c */
extern const struct sg_codec_master sg_nq_master;  /* status.c */

const struct sg_codec sg_nq_codec = {
    .name = "nq",
    .description = "NetQuake (protocol 15, FitzQuake 666, RMQ 999, DarkPlaces DP5-DP7): "
                   "decoded, re-encoded, filtered; other DarkPlaces protocols relayed",
    .probe = sg_nq_is_connect_request,
    .is_connect = sg_nq_is_connect_request,
    .banned_reply = sg_nq_banned_reply,
    .full_reply = sg_nq_full_reply,
    .is_admin = sg_nq_is_admin,
    .handshake = sg_nq_relay_handshake,
    .create = nq_create,
    .destroy = nq_destroy,
    .decode = nq_decode,
    .encode = nq_encode,
    .demo_ext = nq_demo_ext,
    .record = sg_nq_record,
    .record_end = sg_nq_record_end,
    .capture = &sg_nq_capture_impl,
    .demo_reader = &sg_nq_demo_impl,
    .set_text = nq_set_text,
    .drop_msg = nq_drop_msg,
    .inject = nq_inject,
    .must_encode = nq_must_encode,
    .dump = nq_dump,
    .stats = nq_stats,
    .info = nq_info,
    .describe = nq_describe,
    .established = nq_established,
    .status = &sg_nq_status,
    .master = &sg_nq_master,
};
