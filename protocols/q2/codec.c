/*
 * The Quake 2 codec: the registry entry (the relay hooks of relay.c),
 * per-session state, connectionless packets, the netchans, decode /
 * encode, the cross-game message view for filters, the inspector's dump
 * and the capture decoder (`slipgate pcap decode`).
 *
 * Connectionless packets teach the session the protocol (34, 35, 36), the
 * qport and its width, the minor version, the netchan type (Q2PRO's `nc`)
 * and zlib.  In-game datagrams pass the receiver's rule (PROTOCOLS.md A1:
 * a sequence not above the last accepted one is dropped; Q2PRO's new
 * netchan reassembles fragments in order and delivers on the last) and
 * their payload is parsed with the layout the serverdata negotiated
 * (parse.c).  encode() writes the header and every message back from its
 * fields; a fragmented message whose payload came out the same goes out as
 * the fragments that came, a changed one is cut again at the same size.
 */
#include "protocols/q2/q2.h"

#include "protocols/byteorder.h"
#include "protocols/demofile.h"
#include "protocols/error.h"
#include "protocols/info.h"
#include "protocols/relinject.h"
#include "protocols/text.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DGRAM  (SG_Q2_MAX_MSGLEN + 64)
#define TEXT_POOL  (2 * SG_Q2_MAX_MSGLEN + SG_Q2_MAX_MSGS)
#define MAX_PIECES 64

#define SG_Q2_CS_OLD 2080      /* configstrings of protocol 34 */
#define SG_Q2_EDICTS_OLD 1024  /* entities of protocol 34 */
#define INJECT_LIMIT 1400 /* a datagram carrying injections stays within the old MAX_MSGLEN */

#define REL_BIT 0x80000000u
#define FRG_BIT 0x40000000u
#define OLD_MASK 0x7fffffffu
#define NEW_MASK 0x3fffffffu

struct chan {
    bool started;
    uint32_t incoming; /* highest sequence accepted */
    /* new netchan: the message being reassembled */
    bool assembling;
    uint32_t frag_seq;
    uint8_t *frag; /* SG_Q2_MAX_MSGLEN */
    size_t frag_len;
    /* the datagrams it came in (for an unchanged rebuild) */
    uint8_t *pieces; /* MAX_DGRAM * ... : concatenated */
    size_t pieces_len;
    uint32_t piece_len[MAX_PIECES];
    unsigned npieces;
    size_t piece_payload; /* the first fragment's payload size (the sender's cut) */
};

struct hdr {
    uint32_t w1, w2;   /* the words as they came (bits the receiver ignores kept) */
    uint32_t seq, ack; /* masked */
    bool reliable, ack_reliable, fragment, more;
    uint32_t offset;
    bool has_qport;
    int qport_width; /* 0, 1, 2 */
    uint32_t qport;
};

struct q2c {
    struct sg_codec_stats stats;
    struct sg_relinj inj; /* injected texts riding on reliable datagrams */
    int protocol;    /* from the connect (0 unknown) */
    bool kex;        /* a rerelease (KEX) connect (2022/2023): relayed, not decoded */
    int minor;       /* R1Q2 / Q2PRO minor from the connect */
    int qport;       /* from the connect, -1 unknown */
    int nctype;      /* 1: Q2PRO's new netchan */
    bool zlib;
    int32_t challenge;
    bool accepted, established;
    struct sg_q2_variant sv; /* S2C layout (serverdata) */
    struct sg_q2_variant cv; /* C2S layout (connect) */
    struct chan chan[2];
    int unsupported_op;
    char first_error[160];
    /* The status page's (q2_info): the userinfo's name (the connect's, then
     * the client's clc_userinfo), and the netchan's loss per direction. */
    char player[64];
    uint64_t lost[2], sequenced[2];

    /* The datagram decoded last. */
    struct sg_frame frame;
    struct hdr hdr;
    const char *oob_name;
    const char *why;
    struct sg_q2_parsed parsed;
    /* Per parsed message, msgs_cap long (grown with the parsed list,
     * msgs with room for the injections after them). */
    struct sg_msg *msgs;
    int *msg_index;
    bool *dropped;
    bool *rec_dropped;
    uint32_t msgs_cap;
    uint8_t copy[MAX_DGRAM];
    size_t copy_len;
    const uint8_t *payload; /* the message (copy + header, or the reassembled one) */
    size_t payload_len;
    size_t header_len;
    char pool[TEXT_POOL];
    struct sg_textpool text; /* over pool */
    uint8_t out[MAX_DGRAM + 2048];
    uint8_t body[SG_Q2_MAX_MSGLEN + 2048];
    char describe[256];

    /* Recording (.dm2, protocol 34 sessions): the demo being written. */
    FILE *rec_out;
    bool rec_started; /* its serverdata is written */
    bool want_nodelta; /* a recording waits for a non-delta frame: ask the server for one */
    /* 35/36 sessions: the client's state, their demos transcoded to 34
     * (transcode.c; made at the first 35/36 server message). */
    struct sg_q2_trans *trans;

    /* The level as the client knows it (S2C, protocol 34): what a demo that
     * starts mid-level is given first. */
    struct level {
        bool have;
        int32_t servercount;
        char gamedir[64], levelname[128];
        int32_t playernum;
        char *cs[SG_Q2_CS_OLD]; /* configstrings (NULL: empty) */
        uint8_t *base[SG_Q2_EDICTS_OLD]; /* spawnbaseline messages as written (NULL: none) */
        uint16_t base_len[SG_Q2_EDICTS_OLD];
    } lvl;
};

/* ---- state ---- */

static void level_clear(struct level *l)
{
    for (int i = 0; i < SG_Q2_CS_OLD; i++)
        free(l->cs[i]);
    for (int i = 0; i < SG_Q2_EDICTS_OLD; i++)
        free(l->base[i]);
    memset(l, 0, sizeof(*l));
}

static void copy_field(char *out, size_t cap, const struct sg_field *f)
{
    size_t n = f->len < cap - 1 ? f->len : cap - 1;

    memcpy(out, f->ptr, n);
    out[n] = 0;
}

/* Follow the level from the messages the client accepted (protocol 34 only:
 * a 34 demo is what is written). */
static void level_track(struct level *l, const struct sg_q2_parsed *p, const bool *dropped)
{
    uint8_t tmp[512];

    for (uint32_t i = 0; i < p->nmsgs; i++) {
        const struct sg_fmsg *m = &p->msgs[i];
        const struct sg_field *f = m->count ? &p->fields[m->first] : NULL;
        if (m->unparsed || (dropped && dropped[i]))
            continue;
        if (m->op == SG_Q2_SVC_SERVERDATA && m->count >= 6) {
            level_clear(l);
            if ((int32_t)f[0].raw != 34)
                continue;
            l->have = true;
            l->servercount = (int32_t)f[1].raw;
            copy_field(l->gamedir, sizeof(l->gamedir), &f[3]);
            l->playernum = (int16_t)f[4].raw;
            copy_field(l->levelname, sizeof(l->levelname), &f[5]);
        } else if (l->have && m->op == SG_Q2_SVC_CONFIGSTRING && m->count == 2 &&
                   f[0].raw < SG_Q2_CS_OLD) {
            char *s = malloc(f[1].len + 1);
            if (!s)
                continue;
            memcpy(s, f[1].ptr, f[1].len);
            s[f[1].len] = 0;
            free(l->cs[f[0].raw]);
            l->cs[f[0].raw] = s;
        } else if (l->have && m->op == SG_Q2_SVC_SPAWNBASELINE) {
            /* the message as written, and its entity number */
            struct sg_q2_parsed one = *p;
            struct sg_fmsg mm = *m;
            struct sg_bmsg_writer w;
            uint32_t num = 0;
            mm.parent = -1;
            one.msgs = &mm;
            one.nmsgs = 1;
            for (uint32_t k = 0; k < m->count; k++)
                if (strcmp(f[k].name, "number") == 0) {
                    num = f[k].raw;
                    break;
                }
            sg_bmsg_writer_init(&w, tmp, sizeof(tmp));
            if (num == 0 || num >= SG_Q2_EDICTS_OLD || sg_q2_write(&one, NULL, &w) < 0)
                continue;
            uint8_t *b = malloc(w.len);
            if (!b)
                continue;
            memcpy(b, tmp, w.len);
            free(l->base[num]);
            l->base[num] = b;
            l->base_len[num] = (uint16_t)w.len;
        }
    }
}

static void q2_destroy(void *state)
{
    struct q2c *c = state;

    if (!c)
        return;
    level_clear(&c->lvl);
    sg_q2_trans_destroy(c->trans);
    for (int d = 0; d < 2; d++) {
        free(c->chan[d].frag);
        free(c->chan[d].pieces);
    }
    sg_q2_parsed_free(&c->parsed);
    free(c->msgs);
    free(c->msg_index);
    free(c->dropped);
    free(c->rec_dropped);
    free(c);
}

/* Room for `n` parsed messages (and the injections after them) in the
 * per-message arrays: they grow with the parsed list and keep their size. */
static int msgs_room(struct q2c *c, uint32_t n)
{
    uint32_t cap = c->msgs_cap, want = n + SG_RELINJ_MAX;
    void *p;

    if (want <= cap)
        return 0;
    while (cap < want)
        cap = cap ? 2 * cap : want;
    if (cap > SG_Q2_MAX_MSGS + SG_RELINJ_MAX)
        cap = SG_Q2_MAX_MSGS + SG_RELINJ_MAX;
    if (!(p = realloc(c->msgs, cap * sizeof(*c->msgs))))
        return -ENOMEM;
    c->msgs = p;
    c->frame.msgs = c->msgs;
    if (!(p = realloc(c->msg_index, cap * sizeof(*c->msg_index))))
        return -ENOMEM;
    c->msg_index = p;
    if (!(p = realloc(c->dropped, cap * sizeof(*c->dropped))))
        return -ENOMEM;
    c->dropped = p;
    if (!(p = realloc(c->rec_dropped, cap * sizeof(*c->rec_dropped))))
        return -ENOMEM;
    c->rec_dropped = p;
    c->msgs_cap = cap;
    return 0;
}

static int q2_create(void **state)
{
    struct q2c *c = calloc(1, sizeof(*c));

    if (!c)
        return -ENOMEM;
    c->qport = -1;
    c->unsupported_op = -1;
    c->text = (struct sg_textpool){.buf = c->pool, .cap = TEXT_POOL};
    sg_q2_variant_init(&c->sv, 34, 0);
    sg_q2_variant_init(&c->cv, 34, 0);
    c->sv.known = c->cv.known = false;
    for (int d = 0; d < 2; d++) {
        c->chan[d].frag = malloc(SG_Q2_MAX_MSGLEN);
        c->chan[d].pieces = malloc(MAX_DGRAM * 4);
    }
    if (sg_q2_parsed_init(&c->parsed) < 0 || msgs_room(c, SG_Q2_MSGS_START) < 0 ||
        !c->chan[0].frag || !c->chan[1].frag || !c->chan[0].pieces || !c->chan[1].pieces) {
        q2_destroy(c);
        return -ENOMEM;
    }
    *state = c;
    return 0;
}

static void note_error(struct q2c *c, int err, const char *what)
{
    c->stats.errors++;
    if (!c->first_error[0])
        snprintf(c->first_error, sizeof(c->first_error), "%s: %s", what, sg_strerror(err));
}

/* ---- connectionless packets ---- */

/* The n-th space-separated token of `s` (quotes group), copied into out. */
static bool token(const char *s, int n, char *out, size_t cap)
{
    for (int i = 0;; i++) {
        size_t k = 0;
        while (*s == ' ' || *s == '\n')
            s++;
        if (!*s)
            return false;
        bool q = *s == '"';
        if (q)
            s++;
        while (*s && (q ? *s != '"' : (*s != ' ' && *s != '\n'))) {
            if (i == n && k + 1 < cap)
                out[k++] = *s;
            s++;
        }
        if (q && *s == '"')
            s++;
        if (i == n) {
            out[k] = 0;
            return true;
        }
    }
}

static int tokint(const char *s, int n, int dflt)
{
    char t[32];

    if (!token(s, n, t, sizeof(t)) || !(isdigit((unsigned char)t[0]) || t[0] == '-'))
        return dflt;
    return atoi(t);
}

/* The userinfo's name (`info`, `len`) as the player's, when it has one. */
static void take_name(struct q2c *c, const char *info, size_t len)
{
    const char *v;
    size_t vl;

    if (sg_info_get(info, len, "name", 4, &v, &vl) && v)
        snprintf(c->player, sizeof(c->player), "%.*s",
                 (int)(vl < sizeof(c->player) ? vl : sizeof(c->player) - 1), v);
}

static void new_connection(struct q2c *c)
{
    for (int d = 0; d < 2; d++) {
        c->chan[d].started = false;
        c->chan[d].assembling = false;
        c->chan[d].npieces = 0;
    }
    sg_relinj_restart(&c->inj);
    c->accepted = false;
}

static int decode_oob(struct q2c *c, enum sg_dir dir)
{
    char text[1024];
    size_t n = c->copy_len - 4 < sizeof(text) - 1 ? c->copy_len - 4 : sizeof(text) - 1;
    char verb[32];
    struct sg_msg *m = &c->msgs[0];

    memcpy(text, c->copy + 4, n);
    text[n] = 0;
    for (size_t i = 0; i < n; i++)
        if (!text[i])
            text[i] = ' ';
    c->stats.oob++;
    c->frame.kind = SG_FRAME_OOB;
    if (!token(text, 0, verb, sizeof(verb)))
        verb[0] = 0;
    c->oob_name = "other";
    if (dir == SG_DIR_C2S && strcmp(verb, "getchallenge") == 0) {
        c->oob_name = "getchallenge";
    } else if (dir == SG_DIR_S2C && strcmp(verb, "challenge") == 0) {
        c->oob_name = "challenge";
        c->challenge = tokint(text, 1, 0);
    } else if (dir == SG_DIR_C2S && strcmp(verb, "connect") == 0) {
        int p = tokint(text, 1, 0);
        c->oob_name = "connect";
        if (p == 2022 || p == 2023) {
            /* The rerelease's transport below the connect is not public
             * (PROTOCOLS.md B): the session is relayed as it comes. */
            c->protocol = p;
            c->kex = true;
            c->qport = -1;
            c->minor = 0;
            c->nctype = 0;
            c->zlib = false;
            new_connection(c);
        } else if (p >= 34 && p <= 36) {
            c->kex = false;
            c->protocol = p;
            c->qport = tokint(text, 2, -1);
            c->challenge = tokint(text, 3, 0);
            c->minor = 0;
            c->nctype = 0;
            c->zlib = false;
            if (p == 35) {
                c->minor = tokint(text, 6, 1903);
            } else if (p == 36) {
                c->nctype = tokint(text, 6, 0);
                c->zlib = tokint(text, 7, 0) != 0;
                c->minor = tokint(text, 8, 1015);
            }
            if (p == 35 && c->minor > 1905)
                c->minor = 1905;
            sg_q2_variant_init(&c->cv, p, c->minor);
            sg_q2_variant_init(&c->sv, p, c->minor);
            c->sv.known = false; /* until its serverdata */
            new_connection(c);
            {
                char ui[SG_INFO_Q2];
                if (token(text, 4, ui, sizeof(ui)))
                    take_name(c, ui, strlen(ui));
            }
        }
    } else if (dir == SG_DIR_S2C && strcmp(verb, "client_connect") == 0) {
        c->oob_name = "client_connect";
        c->accepted = true;
        for (int i = 1; i < 8; i++) {
            char t[64];
            if (!token(text, i, t, sizeof(t)))
                break;
            if (strncmp(t, "nc=", 3) == 0)
                c->nctype = atoi(t + 3);
        }
    } else if (strcmp(verb, "print") == 0) {
        c->oob_name = "print";
    } else if (strcmp(verb, "info") == 0) {
        c->oob_name = "info";
    } else if (strcmp(verb, "status") == 0) {
        c->oob_name = "status";
    } else if (strcmp(verb, "ping") == 0 || strcmp(verb, "ack") == 0) {
        c->oob_name = verb[0] == 'p' ? "ping" : "ack";
    }
    memset(m, 0, sizeof(*m));
    m->kind = SG_MSG_GAME;
    m->name = c->oob_name;
    m->number = -1;
    c->frame.nmsgs = 1;
    return 0;
}

/* ---- netchan ---- */

static int read_header(struct q2c *c, enum sg_dir dir, const uint8_t *d, size_t n, struct hdr *h)
{
    size_t at = 8;
    bool nc = c->nctype == 1 && c->protocol == 36;
    uint32_t w1, w2;

    memset(h, 0, sizeof(*h));
    if (n < 8)
        return SG_E_TRUNCATED;
    w1 = sg_le32(d);
    w2 = sg_le32(d + 4);
    h->w1 = w1;
    h->w2 = w2;
    h->reliable = (w1 & REL_BIT) != 0;
    h->ack_reliable = (w2 & REL_BIT) != 0;
    h->seq = w1 & (nc ? NEW_MASK : OLD_MASK);
    h->ack = w2 & (nc ? NEW_MASK : OLD_MASK);
    h->fragment = nc && (w1 & FRG_BIT);
    if (dir == SG_DIR_C2S) {
        if (c->protocol == 35 || c->protocol == 36)
            h->qport_width = c->qport >= 0 && (c->qport & 0xff) ? 1 : 0;
        else
            h->qport_width = 2;
        if (n < at + (size_t)h->qport_width)
            return SG_E_TRUNCATED;
        if (h->qport_width == 2)
            h->qport = sg_le16(d + at);
        else if (h->qport_width == 1)
            h->qport = d[at];
        h->has_qport = h->qport_width > 0;
        at += (size_t)h->qport_width;
    }
    if (h->fragment) {
        uint32_t w;
        if (n < at + 2)
            return SG_E_TRUNCATED;
        w = sg_le16(d + at);
        h->more = (w & 0x8000) != 0;
        h->offset = w & 0x7fff;
        at += 2;
    }
    return (int)at;
}

static void write_header(const struct q2c *c, const struct hdr *h, bool fragment, bool more,
                         uint32_t offset, struct sg_bmsg_writer *w)
{
    uint32_t w1 = fragment ? h->w1 | FRG_BIT : h->w1;

    (void)c;
    sg_bmsg_write_u32(w, w1);
    sg_bmsg_write_u32(w, h->w2);
    if (h->qport_width == 2)
        sg_bmsg_write_u16(w, h->qport);
    else if (h->qport_width == 1)
        sg_bmsg_write_u8(w, h->qport);
    if (fragment)
        sg_bmsg_write_u16(w, offset | (more ? 0x8000u : 0));
}

/* ---- the cross-game view ---- */

static void add_msg(struct q2c *c, int pi)
{
    const struct sg_fmsg *pm = &c->parsed.msgs[pi];
    bool s2c = c->frame.dir == SG_DIR_S2C;
    const struct sg_field *tf =
        pm->text >= 0 && (uint32_t)pm->text < pm->count ? &c->parsed.fields[pm->first + (uint32_t)pm->text]
                                                        : NULL;
    struct sg_msg *m = sg_fview_add(&c->frame, c->msg_index, pi,
                                    !s2c             ? sg_q2_clc_name(pm->op)
                                    : c->parsed.kex ? sg_q2_svc_name_kex(pm->op)
                                                    : sg_q2_svc_name(pm->op),
                                    -1);

    if (s2c && pm->op == SG_Q2_SVC_DISCONNECT) {
        m->kind = SG_MSG_DISCONNECT;
        m->text = m->command = "";
        return;
    }
    if (s2c && pm->op == SG_Q2_SVC_CONFIGSTRING && pm->count >= 2) {
        const struct sg_field *sf = &c->parsed.fields[pm->first + 1];
        m->kind = SG_MSG_CONFIGSTRING;
        m->number = (int32_t)c->parsed.fields[pm->first].raw;
        m->text = m->command = sg_textpool_keep(&c->text, sf->ptr, sf->len);
        m->text_len = m->text ? sf->len : 0;
        if (!m->text)
            m->kind = SG_MSG_GAME;
        return;
    }
    if (!s2c && pm->op == SG_Q2_CLC_USERINFO && pm->count >= 1 &&
        c->parsed.fields[pm->first].type == SG_FIELD_STRING) /* the player's new userinfo */
        take_name(c, (const char *)c->parsed.fields[pm->first].ptr,
                  c->parsed.fields[pm->first].len);
    if (!tf || tf->type != SG_FIELD_STRING)
        return;
    if (!sg_fview_text(&c->text, m, tf))
        return;
    if (s2c) {
        switch (pm->op) {
        case SG_Q2_SVC_PRINT: {
            uint32_t level = c->parsed.fields[pm->first].raw;
            m->number = (int32_t)level;
            m->kind = level == SG_Q2_PRINT_CHAT ? SG_MSG_CHAT : SG_MSG_PRINT;
            break;
        }
        case SG_Q2_SVC_CENTERPRINT:
            m->kind = SG_MSG_CENTERPRINT;
            break;
        case SG_Q2_SVC_STUFFTEXT:
            m->kind = SG_MSG_STUFFTEXT;
            break;
        default: /* layout */
            m->kind = SG_MSG_SERVER_COMMAND;
            break;
        }
        return;
    }
    sg_fview_client_command(&c->text, m, tf->len);
    if (m->kind != SG_MSG_CHAT) {
        char verb[32];
        sg_text_verb(m->command, tf->len, verb, sizeof(verb));
        if (strcmp(verb, "disconnect") == 0)
            c->frame.disconnect = true;
    }
}

/* ---- reliable injections ---- */

/* ---- decode ---- */

static void reset_frame(struct q2c *c, enum sg_dir dir)
{
    sg_fview_reset(&c->frame, dir, c->msgs, &c->parsed, &c->text);
    c->why = NULL;
    c->oob_name = NULL;
    c->parsed.nmsgs = 0;
    c->parsed.nfields = 0;
}

static void keep_piece(struct chan *ch, const uint8_t *d, size_t n)
{
    if (ch->npieces >= MAX_PIECES || ch->pieces_len + n > MAX_DGRAM * 4) {
        ch->npieces = MAX_PIECES + 1; /* too many to keep: rebuild by cutting */
        return;
    }
    memcpy(ch->pieces + ch->pieces_len, d, n);
    ch->pieces_len += n;
    ch->piece_len[ch->npieces++] = (uint32_t)n;
}

static int q2_decode(void *state, enum sg_dir dir, const uint8_t *data, size_t len,
                     const struct sg_frame **frame)
{
    struct q2c *c = state;
    struct chan *ch = &c->chan[dir];
    struct sg_q2_variant *v;
    int n, err;

    reset_frame(c, dir);
    *frame = &c->frame;
    c->stats.decoded++;
    if (len > MAX_DGRAM) {
        note_error(c, SG_E_TOOBIG, "datagram");
        return SG_E_TOOBIG;
    }
    memcpy(c->copy, data, len);
    c->copy_len = len;
    c->frame.msg = c->copy;
    c->frame.msg_len = len;
    if (len >= 4 && sg_le32(data) == 0xffffffffu)
        return decode_oob(c, dir);
    if (dir == SG_DIR_C2S && c->accepted)
        c->established = true;
    if (c->kex)
        return 0; /* rerelease (KEX): relayed untouched, not decoded (no error) */

    n = read_header(c, dir, c->copy, len, &c->hdr);
    if (n < 0) {
        c->frame.kind = SG_FRAME_REJECTED;
        c->why = "runt (shorter than the header)";
        c->stats.rejected++;
        return 0;
    }
    c->header_len = (size_t)n;
    c->frame.sequence = (int32_t)c->hdr.seq;
    c->frame.ack = (int32_t)c->hdr.ack;
    if (ch->started && c->hdr.seq <= ch->incoming) {
        c->frame.kind = SG_FRAME_REJECTED;
        c->why = "stale or duplicate sequence";
        c->stats.rejected++;
        return 0;
    }
    sg_relinj_ack(&c->inj, dir, c->hdr.ack, c->hdr.ack_reliable);
    c->frame.ack_wanted = (int32_t)c->hdr.seq; /* the receiver's incoming_sequence */
    c->payload = c->copy + n;
    c->payload_len = len - (size_t)n;
    c->frame.pieces = 1;
    if (c->hdr.fragment) {
        if (!ch->assembling || ch->frag_seq != c->hdr.seq) {
            ch->assembling = true;
            ch->frag_seq = c->hdr.seq;
            ch->frag_len = 0;
            ch->npieces = 0;
            ch->pieces_len = 0;
            ch->piece_payload = 0;
        }
        if (c->hdr.offset != ch->frag_len) {
            c->frame.kind = SG_FRAME_REJECTED;
            c->why = c->hdr.offset < ch->frag_len ? "out of order fragment" : "dropped fragment";
            c->stats.rejected++;
            return 0;
        }
        if (c->payload_len > SG_Q2_MAX_MSGLEN - ch->frag_len) {
            c->frame.kind = SG_FRAME_REJECTED;
            c->why = "oversize fragment";
            c->stats.rejected++;
            return 0;
        }
        memcpy(ch->frag + ch->frag_len, c->payload, c->payload_len);
        ch->frag_len += c->payload_len;
        if (ch->npieces == 0)
            ch->piece_payload = c->payload_len;
        keep_piece(ch, c->copy, len);
        if (c->hdr.more) {
            c->frame.kind = SG_FRAME_PARTIAL;
            return 0;
        }
        ch->assembling = false;
        c->payload = ch->frag;
        c->payload_len = ch->frag_len;
        c->frame.pieces = (int)(ch->npieces <= MAX_PIECES ? ch->npieces : MAX_PIECES);
    } else {
        ch->npieces = 0;
    }
    if (ch->started && c->hdr.seq - ch->incoming > 1)
        c->lost[dir] += c->hdr.seq - ch->incoming - 1; /* skipped: lost on the way here */
    c->sequenced[dir]++;
    ch->started = true;
    ch->incoming = c->hdr.seq;
    c->frame.msg = c->payload;
    c->frame.msg_len = c->payload_len;

    v = dir == SG_DIR_S2C ? &c->sv : &c->cv;
    c->parsed.sequence = c->hdr.seq;
    err = sg_q2_parse(dir, v, c->payload, c->payload_len, &c->parsed);
    if (err == 0)
        err = msgs_room(c, c->parsed.nmsgs);
    if (c->parsed.serverdata) {
        c->frame.new_level = true;
        snprintf(c->frame.level, sizeof(c->frame.level), "%s", c->parsed.level);
    }
    if (c->parsed.unsupported_op >= 0 && c->unsupported_op < 0)
        c->unsupported_op = c->parsed.unsupported_op;
    if (err < 0) {
        note_error(c, err, dir == SG_DIR_S2C ? "server message" : "client message");
        c->frame.kind = SG_FRAME_RAW;
        return err;
    }
    memset(c->dropped, 0, sizeof(bool) * c->parsed.nmsgs);
    for (uint32_t i = 0; i < c->parsed.nmsgs; i++)
        add_msg(c, (int)i);
    c->frame.kind = SG_FRAME_MESSAGE;
    c->stats.messages++;
    if (dir == SG_DIR_S2C && (c->sv.protocol == 34 || c->parsed.serverdata))
        level_track(&c->lvl, &c->parsed, NULL);
    if (dir == SG_DIR_S2C && (c->sv.protocol == 35 || c->sv.protocol == 36)) {
        if (!c->trans && sg_q2_trans_create(&c->trans) < 0)
            note_error(c, -ENOMEM, "35/36 demo state");
        if (c->trans)
            sg_q2_trans_track(c->trans, &c->parsed, &c->sv);
    }
    return 0;
}

/* ---- filters ---- */

static int q2_set_text(void *state, unsigned i, const char *text, size_t len)
{
    struct q2c *c = state;
    int err;

    if (c->frame.kind == SG_FRAME_MESSAGE && i < c->frame.nmsgs &&
        c->msgs[i].kind == SG_MSG_CONFIGSTRING)
        return SG_E_UNSUPPORTED;
    err = sg_fmsg_set_text(&c->text, &c->frame, i, c->parsed.fields, c->parsed.msgs, c->msg_index,
                           true, text, len);
    if (err == 0)
        c->parsed.msgs[c->msg_index[i]].changed = true;
    return err;
}

static int q2_drop_msg(void *state, unsigned i)
{
    struct q2c *c = state;

    return sg_fmsg_drop(&c->frame, c->dropped, c->msg_index, i);
}

/*
 * Injection, reliable without touching the netchan (as for QuakeWorld): the
 * text rides on the sender's next reliable, unfragmented datagram towards
 * `dir`, appended after its messages.  The receiver flips its reliable bit
 * for that datagram anyway, so neither peer's sequences or bits change; if
 * the datagram is lost, the receiver's acknowledgement says so and the
 * sender's resend carries the text again; it is dropped once acknowledged.
 */
static int q2_inject(void *state, enum sg_dir dir, enum sg_msg_kind kind, const char *text,
                     size_t len)
{
    struct q2c *c = state;

    return sg_relinj_add(&c->inj, dir, kind, text, len);
}

static bool can_carry(const struct q2c *c, enum sg_dir dir)
{
    return c->hdr.reliable && !c->hdr.fragment && sg_relinj_can_carry(&c->inj, dir);
}

static bool q2_must_encode(void *state, const struct sg_frame *frame)
{
    const struct q2c *c = state;

    if (frame == &c->frame && frame->kind == SG_FRAME_MESSAGE && frame->dir == SG_DIR_C2S &&
        c->want_nodelta && c->cv.protocol == 34)
        for (uint32_t i = 0; i < c->parsed.nmsgs; i++)
            if (c->parsed.msgs[i].op == SG_Q2_CLC_MOVE && !c->parsed.msgs[i].unparsed)
                return true;
    if (frame != &c->frame || frame->kind != SG_FRAME_MESSAGE || !can_carry(c, frame->dir))
        return false;
    return sg_relinj_waiting(&c->inj, frame->dir);
}

/* Attach the injections waiting for this direction that fit the datagram. */
static void write_injections(struct q2c *c, struct sg_bmsg_writer *w)
{
    static const struct sg_text_ops ops = {.print = SG_Q2_SVC_PRINT,
                                           .centerprint = SG_Q2_SVC_CENTERPRINT,
                                           .stufftext = SG_Q2_SVC_STUFFTEXT,
                                           .stringcmd = SG_Q2_CLC_STRINGCMD,
                                           .print_level = true};

    if (!can_carry(c, c->frame.dir))
        return;
    if (sg_relinj_attach(&c->inj, &c->frame, c->msgs_cap, w, INJECT_LIMIT, &ops, &c->text))
        sg_relinj_carried(&c->inj, c->frame.dir, c->hdr.seq);
}

/* ---- encode ---- */

static int q2_encode(void *state, const struct sg_frame *frame, sg_emit_fn emit, void *ctx,
                     bool *identical)
{
    struct q2c *c = state;
    struct chan *ch = &c->chan[frame->dir];
    struct sg_bmsg_writer w;
    int err, sent = 0;

    *identical = false;
    if (frame != &c->frame || frame->kind != SG_FRAME_MESSAGE)
        return SG_E_STATE;
    /* A recording waits for a non-delta frame: the client's move asks for one
     * (lastframe -1, as a client does when it starts recording; the 34
     * checksum is recomputed by the writer when it matched). */
    if (frame->dir == SG_DIR_C2S && c->want_nodelta && c->cv.protocol == 34)
        for (uint32_t i = 0; i < c->parsed.nmsgs; i++) {
            struct sg_fmsg *m = &c->parsed.msgs[i];
            if (m->op == SG_Q2_CLC_MOVE && !m->unparsed && m->count >= 2) {
                c->parsed.fields[m->first + 1].raw = 0xffffffffu;
                m->changed = true;
            }
        }
    /* The message. */
    sg_bmsg_writer_init(&w, c->body, sizeof(c->body));
    sg_q2_write(&c->parsed, c->dropped, &w);
    if (w.overflowed || w.len > SG_Q2_MAX_MSGLEN) {
        c->stats.reencode_errors++;
        return SG_E_OVERFLOW;
    }
    c->stats.reencoded++;
    if (!c->hdr.fragment) {
        struct sg_bmsg_writer o;
        sg_bmsg_writer_init(&o, c->out, sizeof(c->out));
        write_header(c, &c->hdr, false, false, 0, &o);
        sg_bmsg_write_data(&o, c->body, w.len);
        write_injections(c, &o);
        if (o.overflowed) {
            c->stats.reencode_errors++;
            return SG_E_OVERFLOW;
        }
        *identical = o.len == c->copy_len && memcmp(c->out, c->copy, o.len) == 0;
        if (*identical)
            c->stats.reencode_identical++;
        err = emit(ctx, c->out, o.len);
        if (err < 0) /* not sent: what rode on it waits for the next reliable datagram */
            sg_relinj_unsent(&c->inj, frame->dir, c->hdr.seq);
        return err < 0 ? err : 1;
    }
    /* A fragmented message: the same pieces when the payload came out the same. */
    if (w.len == c->payload_len && memcmp(c->body, c->payload, w.len) == 0 &&
        ch->npieces <= MAX_PIECES) {
        size_t at = 0;
        *identical = true;
        c->stats.reencode_identical++;
        for (unsigned i = 0; i < ch->npieces; i++) {
            err = emit(ctx, ch->pieces + at, ch->piece_len[i]);
            if (err < 0)
                return err;
            at += ch->piece_len[i];
            sent++;
        }
        return sent;
    }
    /* Changed: cut again at the sender's size. */
    size_t cut = ch->piece_payload ? ch->piece_payload : 1024;
    for (size_t off = 0; off < w.len || off == 0; off += cut) {
        struct sg_bmsg_writer o;
        size_t nb = w.len - off < cut ? w.len - off : cut;
        bool more = off + nb < w.len;
        sg_bmsg_writer_init(&o, c->out, sizeof(c->out));
        write_header(c, &c->hdr, true, more, (uint32_t)off, &o);
        sg_bmsg_write_data(&o, c->body + off, nb);
        if (o.overflowed || off > 0x7fff)
            return SG_E_OVERFLOW;
        err = emit(ctx, c->out, o.len);
        if (err < 0)
            return err;
        sent++;
        if (!more)
            break;
    }
    return sent;
}

/* ---- dump ---- */

static int q2_dump(void *state, const struct sg_frame *frame, enum sg_dump_level level, bool json,
                   FILE *out)
{
    struct q2c *c = state;
    const char *dir = frame->dir == SG_DIR_C2S ? "c2s" : "s2c";
    static const char *const kinds[] = {"raw", "oob", "partial", "message", "rejected"};
    long start = ftell(out);

    if (frame != &c->frame)
        return SG_E_STATE;
    if (json) {
        fprintf(out, "{\"rx\":\"%s\",\"len\":%zu", kinds[frame->kind], c->copy_len);
        if (frame->sequence >= 0)
            fprintf(out, ",\"seq\":%d,\"reliable\":%s,\"ack\":%d,\"ack_reliable\":%s",
                    frame->sequence, c->hdr.reliable ? "true" : "false", frame->ack,
                    c->hdr.ack_reliable ? "true" : "false");
        if (c->hdr.has_qport)
            fprintf(out, ",\"qport\":%u", (unsigned)c->hdr.qport);
        if (c->why)
            fprintf(out, ",\"why\":\"%s\"", c->why);
        if (frame->kind == SG_FRAME_OOB)
            fprintf(out, ",\"oob\":{\"type\":\"%s\"}", c->oob_name ? c->oob_name : "other");
        if (frame->kind == SG_FRAME_MESSAGE)
            fprintf(out, ",\"messages\":%u", c->parsed.nmsgs);
        if (level >= SG_DUMP_FIELDS && frame->kind == SG_FRAME_MESSAGE) {
            fputs(",\"ops\":[", out);
            for (uint32_t i = 0; i < c->parsed.nmsgs; i++) {
                if (i)
                    fputc(',', out);
                sg_q2_dump_msg(out, &c->parsed, i, frame->dir, true, c->dropped[i]);
            }
            fputc(']', out);
        }
        fputc('}', out);
    } else {
        fprintf(out, "%s %s len=%zu", dir, kinds[frame->kind], c->copy_len);
        if (frame->sequence >= 0)
            fprintf(out, " seq=%d%s ack=%d%s", frame->sequence, c->hdr.reliable ? "r" : "",
                    frame->ack, c->hdr.ack_reliable ? "r" : "");
        if (frame->kind == SG_FRAME_OOB)
            fprintf(out, " %s", c->oob_name ? c->oob_name : "other");
        if (c->why)
            fprintf(out, " (%s)", c->why);
        fputc('\n', out);
        if (level >= SG_DUMP_MESSAGES && frame->kind == SG_FRAME_MESSAGE) {
            for (uint32_t i = 0; i < c->parsed.nmsgs; i++) {
                fputs("  ", out);
                if (c->dropped[i])
                    fputs("(dropped) ", out);
                if (level >= SG_DUMP_FIELDS) {
                    sg_q2_dump_msg(out, &c->parsed, i, frame->dir, false, false);
                } else {
                    const struct sg_fmsg *pm = &c->parsed.msgs[i];
                    fprintf(out, "%s (%u fields)\n",
                            frame->dir == SG_DIR_S2C ? sg_q2_svc_name(pm->op)
                                                     : sg_q2_clc_name(pm->op),
                            (unsigned)pm->count);
                }
            }
        }
    }
    if (ferror(out))
        return -EIO;
    long end = ftell(out);
    return start >= 0 && end >= start ? (int)(end - start) : 0;
}

/* ---- counters, description, admission ---- */

static const struct sg_codec_stats *q2_stats(void *state)
{
    return &((struct q2c *)state)->stats;
}

/* The player's name and the netchan's loss; the level comes from the frames
 * (new_level), the server's name from no datagram of a game. */
static void q2_info(void *state, struct sg_codec_info *out)
{
    const struct q2c *c = state;

    memset(out, 0, sizeof(*out));
    snprintf(out->player, sizeof(out->player), "%s", c->player);
    for (int d = 0; d < 2; d++) {
        out->lost[d] = c->lost[d];
        out->sequenced[d] = c->sequenced[d];
    }
}

static const char *q2_describe(void *state)
{
    struct q2c *c = state;
    int n;

    if (c->kex) {
        snprintf(c->describe, sizeof(c->describe),
                 "Quake 2 rerelease (KEX) protocol %d: relayed, not decoded", c->protocol);
        return c->describe;
    }
    n = snprintf(c->describe, sizeof(c->describe),
                     "Quake 2 protocol %d (minor %d), qport %d, netchan %s%s", c->protocol,
                     c->minor, c->qport, c->nctype == 1 ? "new" : "old",
                     c->zlib ? ", zlib" : "");

    if (c->unsupported_op >= 0 && n > 0 && (size_t)n < sizeof(c->describe))
        n += snprintf(c->describe + n, sizeof(c->describe) - (size_t)n,
                      ", relayed undecoded: opcode %d", c->unsupported_op);
    if (c->first_error[0] && n > 0 && (size_t)n < sizeof(c->describe))
        snprintf(c->describe + n, sizeof(c->describe) - (size_t)n, ", first error: %s",
                 c->first_error);
    return c->describe;
}

static bool q2_established(void *state)
{
    return ((struct q2c *)state)->established;
}

/* ---- recording (.dm2) ---- */

/*
 * A protocol 34 session's demo is the stream as the client accepted it
 * (after the filters), one block per message, from a serverdata on: the
 * messages before the first serverdata of a demo are left out, so the
 * file starts as the players' demos do, and the sign-on is written as the
 * client's own `record` writes it: the serverdata says attractloop 1
 * ("demos are always attract loops"), `precache <spawncount>` is the plain
 * `precache` and the sign-on's `cmd configstrings|baselines` requests are
 * left out (sg_q2_demo_stufftext: a player takes them for a connection's,
 * downloads, or restarts the demo).  A recording that starts mid-level
 * writes a synthesized start, then waits for a non-delta frame.  35 and 36
 * frames are not legal in a 34 demo: those sessions are transcoded to 34
 * from the client's state (transcode.c), as Q2PRO's client records them;
 * Q2PRO's extended sessions are refused.
 */
static const char *q2_demo_ext(void *state)
{
    (void)state;
    return "dm2";
}

/* One block of a demo. */
static int put_block(FILE *out, const uint8_t *d, size_t n)
{
    uint8_t h[4];

    sg_put_le32(h, (uint32_t)n);
    return fwrite(h, 1, 4, out) == 4 && fwrite(d, 1, n, out) == n ? 0 : sg_write_error();
}

/*
 * The start of a demo when recording begins mid-level (as id's `record`
 * writes it): serverdata (attractloop 1), every non-empty configstring,
 * every baseline, `precache`, in blocks of at most SG_Q2_DEMO_BLOCK bytes.
 */
static int write_preamble(struct q2c *c, FILE *out)
{
    struct level *l = &c->lvl;
    uint8_t *buf = c->body;
    struct sg_bmsg_writer w;
    int err;

    sg_bmsg_writer_init(&w, buf, SG_Q2_DEMO_BLOCK);
    sg_bmsg_write_u8(&w, SG_Q2_SVC_SERVERDATA);
    sg_bmsg_write_s32(&w, 34);
    sg_bmsg_write_s32(&w, l->servercount);
    sg_bmsg_write_u8(&w, 1);
    sg_bmsg_write_data(&w, l->gamedir, strlen(l->gamedir) + 1);
    sg_bmsg_write_u16(&w, (unsigned)l->playernum);
    sg_bmsg_write_data(&w, l->levelname, strlen(l->levelname) + 1);
    for (int i = 0; i < SG_Q2_CS_OLD + SG_Q2_EDICTS_OLD + 1; i++) {
        uint8_t one[1100];
        struct sg_bmsg_writer m;
        sg_bmsg_writer_init(&m, one, sizeof(one));
        if (i < SG_Q2_CS_OLD) {
            if (!l->cs[i] || !l->cs[i][0])
                continue;
            sg_bmsg_write_u8(&m, SG_Q2_SVC_CONFIGSTRING);
            sg_bmsg_write_u16(&m, (unsigned)i);
            sg_bmsg_write_data(&m, l->cs[i], strlen(l->cs[i]) + 1);
        } else if (i < SG_Q2_CS_OLD + SG_Q2_EDICTS_OLD) {
            int k = i - SG_Q2_CS_OLD;
            if (!l->base[k])
                continue;
            sg_bmsg_write_data(&m, l->base[k], l->base_len[k]);
        } else {
            sg_bmsg_write_u8(&m, SG_Q2_SVC_STUFFTEXT);
            sg_bmsg_write_data(&m, "precache\n", 10);
        }
        if (m.overflowed)
            continue; /* longer than a configstring can be: left out */
        if (w.len + m.len > SG_Q2_DEMO_BLOCK) {
            if ((err = put_block(out, buf, w.len)) < 0)
                return err;
            sg_bmsg_writer_init(&w, buf, SG_Q2_DEMO_BLOCK);
        }
        sg_bmsg_write_data(&w, one, m.len);
    }
    return put_block(out, buf, w.len);
}

/*
 * The message's messages a 34 demo keeps (not rec_dropped), the sign-on
 * as the client's own demo has it: a serverdata's attractloop 1, the
 * sign-on's stufftexts by sg_q2_demo_stufftext; the rest as it came.
 */
static int record_msgs(struct q2c *c, struct sg_bmsg_writer *w)
{
    const struct sg_q2_parsed *p = &c->parsed;
    bool plain = true;

    for (uint32_t i = 0; i < p->nmsgs && plain; i++) {
        const struct sg_fmsg *m = &p->msgs[i];
        plain = c->rec_dropped[i] || m->unparsed || m->parent >= 0 ||
                (m->op != SG_Q2_SVC_SERVERDATA && m->op != SG_Q2_SVC_STUFFTEXT);
    }
    if (plain)
        return sg_q2_write(p, c->rec_dropped, w);
    for (uint32_t i = 0; i < p->nmsgs; i++) {
        const struct sg_fmsg *m = &p->msgs[i];
        const struct sg_field *f = &p->fields[m->first];
        struct sg_q2_parsed one = *p;
        struct sg_fmsg alone = *m;
        size_t at = w->len;
        if (c->rec_dropped[i] || m->parent >= 0)
            continue; /* (34 has no zpackets: nothing inside another message) */
        if (m->op == SG_Q2_SVC_STUFFTEXT && !m->unparsed && m->count == 1 &&
            f->type == SG_FIELD_STRING) {
            enum sg_q2_demo_stuff how = sg_q2_demo_stufftext(f->ptr, f->len);
            if (how == SG_Q2_STUFF_LEAVE)
                continue;
            if (how == SG_Q2_STUFF_PRECACHE) {
                sg_bmsg_write_u8(w, SG_Q2_SVC_STUFFTEXT);
                sg_bmsg_write_data(w, "precache\n", 10);
                continue;
            }
        }
        one.msgs = &alone;
        one.nmsgs = 1;
        if (sg_q2_write(&one, NULL, w) < 0)
            return SG_E_OVERFLOW;
        /* op, protocol, servercount, attractloop */
        if (m->op == SG_Q2_SVC_SERVERDATA && !m->unparsed && w->len >= at + 10)
            w->data[at + 9] = 1;
    }
    return w->overflowed ? SG_E_OVERFLOW : 0;
}

static int q2_record(void *state, const struct sg_frame *frame, FILE *out)
{
    struct q2c *c = state;
    struct sg_bmsg_writer w;
    uint32_t from = 0;
    int err;

    if (frame != &c->frame || frame->kind != SG_FRAME_MESSAGE || frame->dir != SG_DIR_S2C)
        return 0;
    if (c->sv.protocol == 35 || c->sv.protocol == 36)
        return c->trans ? sg_q2_trans_record(c->trans, &c->parsed, c->dropped, out) : 0;
    if (c->sv.protocol != 34 && c->sv.protocol != 26)
        return SG_E_UNSUPPORTED;
    if (out != c->rec_out) {
        c->rec_out = out;
        c->rec_started = false;
    }
    if (!c->rec_started) {
        while (from < c->parsed.nmsgs && c->parsed.msgs[from].op != SG_Q2_SVC_SERVERDATA)
            from++;
        if (from == c->parsed.nmsgs) {
            /* Mid-level: a synthesized start, then this message once it holds
             * a frame the player can read without a delta base. */
            if (!c->lvl.have || c->sv.protocol != 34)
                return 0;
            if (c->parsed.frames == 0 || c->parsed.deltaframe > 0) {
                c->want_nodelta = true;
                return 0;
            }
            if ((err = write_preamble(c, out)) < 0)
                return err;
            from = 0;
        }
        c->want_nodelta = false;
    }
    /* svc_disconnect / svc_reconnect end the client's connection before it
     * records them: its own demos never hold them, and a player stops at them. */
    for (uint32_t i = 0; i < c->parsed.nmsgs; i++)
        c->rec_dropped[i] = c->dropped[i] || i < from ||
                            c->parsed.msgs[i].op == SG_Q2_SVC_DISCONNECT ||
                            c->parsed.msgs[i].op == SG_Q2_SVC_RECONNECT;
    sg_bmsg_writer_init(&w, c->body, sizeof(c->body));
    if (record_msgs(c, &w) < 0 || w.len > SG_Q2_MAX_MSGLEN)
        return SG_E_OVERFLOW;
    if ((err = put_block(out, c->body, w.len)) < 0)
        return err;
    c->rec_started = true;
    return 1;
}

static int q2_record_end(void *state, FILE *out)
{
    struct q2c *c = state;
    static const uint8_t end[4] = {0xff, 0xff, 0xff, 0xff};

    if (out == c->rec_out)
        c->rec_out = NULL;
    if (c->trans)
        sg_q2_trans_record_end(c->trans, out);
    if (fwrite(end, 1, 4, out) != 4 || fflush(out) != 0)
        return sg_write_error();
    return 0;
}

/* ---- the capture decoder (`slipgate pcap decode`) ---- */

struct flow {
    void *st;
    uint64_t datagrams, messages, identical, errors, rejected, oob;
    char *record_path; /* --record: record_base + ".dm2" */
    FILE *rec;
    uint64_t whole; /* its bytes up to its last whole block */
    bool rec_failed;
};

static int capture_role(const uint8_t *d, size_t n)
{
    static const char *const client[] = {"getchallenge", "connect ", "info ", "status", "ping"};
    static const char *const server[] = {"challenge ", "client_connect", "print\n", "info\n"};

    if (n < 5 || sg_le32(d) != 0xffffffffu)
        return -1;
    for (size_t i = 0; i < sizeof(client) / sizeof(client[0]); i++)
        if (n - 4 >= strlen(client[i]) && memcmp(d + 4, client[i], strlen(client[i])) == 0)
            return 1;
    for (size_t i = 0; i < sizeof(server) / sizeof(server[0]); i++)
        if (n - 4 >= strlen(server[i]) && memcmp(d + 4, server[i], strlen(server[i])) == 0)
            return 0;
    return -1;
}

static void capture_destroy_early(struct flow *f)
{
    q2_destroy(f->st);
    free(f);
}

static int capture_create(void **flow, const char *record_base)
{
    struct flow *f = calloc(1, sizeof(*f));

    if (!f || q2_create(&f->st) < 0) {
        free(f);
        return -ENOMEM;
    }
    if (record_base) {
        size_t n = strlen(record_base) + 5;
        f->record_path = malloc(n);
        if (!f->record_path) {
            capture_destroy_early(f);
            return -ENOMEM;
        }
        snprintf(f->record_path, n, "%s.dm2", record_base);
    }
    *flow = f;
    return 0;
}

struct collect {
    uint8_t buf[MAX_DGRAM * 4];
    size_t len;
    int n;
};

static int collect_emit(void *ctx, const uint8_t *d, size_t n)
{
    struct collect *k = ctx;

    if (sizeof(k->buf) - k->len < n)
        return -ENOSPC;
    memcpy(k->buf + k->len, d, n);
    k->len += n;
    k->n++;
    return 0;
}

static int capture_datagram(void *flow, enum sg_dir dir, const uint8_t *data, size_t len,
                            bool json, FILE *report)
{
    struct flow *f = flow;
    const struct sg_frame *fr;
    int err, errors = 0;
    bool identical = false, rebuilt = false;
    static const char *const kinds[] = {"raw", "oob", "partial", "message", "rejected"};

    f->datagrams++;
    err = q2_decode(f->st, dir, data, len, &fr);
    if (err < 0)
        errors++;
    if (fr->kind == SG_FRAME_OOB)
        f->oob++;
    if (fr->kind == SG_FRAME_REJECTED)
        f->rejected++;
    if (fr->kind == SG_FRAME_MESSAGE) {
        struct collect *k = malloc(sizeof(*k));
        f->messages++;
        if (!k)
            return errors + 1;
        k->len = 0;
        k->n = 0;
        if (q2_encode(f->st, fr, collect_emit, k, &identical) < 0)
            errors++;
        rebuilt = true;
        if (identical)
            f->identical++;
        else
            errors++;
        free(k);
        if (dir == SG_DIR_S2C && f->record_path && !f->rec_failed) {
            struct q2c *c = f->st;
            if (!f->rec && c->parsed.serverdata && !c->sv.extended &&
                (c->sv.protocol == 26 || (c->sv.protocol >= 34 && c->sv.protocol <= 36))) {
                f->rec = fopen(f->record_path, "wb");
                if (!f->rec) {
                    fprintf(stderr, "slipgate pcap: %s: %s\n", f->record_path, strerror(errno));
                    f->rec_failed = true;
                    errors++;
                }
            }
            if (f->rec) {
                int r = q2_record(f->st, fr, f->rec);
                if (r >= 0)
                    r = sg_demo_file_whole(f->rec, &f->whole);
                if (r < 0) {
                    fprintf(stderr, "slipgate pcap: %s: demo write failed: %s; it ends at its "
                            "last whole block\n", f->record_path, sg_strerror(r));
                    sg_demo_file_cut(f->rec, f->whole);
                    f->rec_failed = true;
                    errors++;
                }
            }
        }
    }
    f->errors += (uint64_t)errors;
    if (json) {
        fprintf(report, ",\"rx\":\"%s\"", kinds[fr->kind]);
        if (fr->sequence >= 0)
            fprintf(report, ",\"seq\":%d,\"ack\":%d", fr->sequence, fr->ack);
        if (fr->kind == SG_FRAME_MESSAGE)
            fprintf(report, ",\"messages\":%u,\"identical\":%s", fr->nmsgs,
                    identical ? "true" : "false");
        if (err < 0)
            fprintf(report, ",\"error\":\"%s\"", sg_errname(err));
        fputs("}\n", report);
    } else {
        fprintf(report, " %s", kinds[fr->kind]);
        if (fr->sequence >= 0)
            fprintf(report, " seq=%d ack=%d", fr->sequence, fr->ack);
        if (fr->kind == SG_FRAME_OOB && fr->nmsgs)
            fprintf(report, " %s", fr->msgs[0].name);
        if (fr->kind == SG_FRAME_MESSAGE) {
            fprintf(report, " msgs=%u", fr->nmsgs);
            for (unsigned i = 0; i < fr->nmsgs && i < 6; i++)
                fprintf(report, "%s%s", i ? "," : " ", fr->msgs[i].name);
            if (fr->nmsgs > 6)
                fputs(",...", report);
        }
        if (rebuilt)
            fprintf(report, " %s", identical ? "identical" : "CHANGED");
        if (err < 0)
            fprintf(report, " error=%s", sg_errname(err));
        fputc('\n', report);
    }
    return errors;
}

static int capture_finish(void *flow)
{
    struct flow *f = flow;
    int errors = 0;

    if (f->rec) {
        if (q2_record_end(f->st, f->rec) < 0) { /* a full disk: the demo ends at its last whole block */
            sg_demo_file_cut(f->rec, f->whole);
            errors++;
        }
        errors += fclose(f->rec) != 0;
        f->rec = NULL;
    }
    return errors;
}

static void capture_summary(void *flow, FILE *out)
{
    struct flow *f = flow;

    fprintf(out,
            "%s; %llu datagrams, %llu out of band, %llu rejected by the receiver, %llu messages, "
            "%llu rebuilt identical, %llu errors\n",
            q2_describe(f->st), (unsigned long long)f->datagrams, (unsigned long long)f->oob,
            (unsigned long long)f->rejected, (unsigned long long)f->messages,
            (unsigned long long)f->identical, (unsigned long long)f->errors);
}

static void capture_destroy(void *flow)
{
    struct flow *f = flow;

    if (!f)
        return;
    if (f->rec)
        fclose(f->rec);
    free(f->record_path);
    q2_destroy(f->st);
    free(f);
}

static const struct sg_capture_impl q2_capture_impl = {
    .title = "Quake 2",
    .role = capture_role,
    .create = capture_create,
    .datagram = capture_datagram,
    .finish = capture_finish,
    .summary = capture_summary,
    .destroy = capture_destroy,
};

extern const struct sg_codec_status sg_q2_status; /* status.c */
extern const struct sg_codec_master sg_q2_master;  /* status.c */

const struct sg_codec sg_q2_codec = {
    .name = "q2",
    .description = "Quake 2 (protocols 34, 35, 36): decoded, re-encoded, filtered",
    .probe = sg_q2_is_connect,
    .is_connect = sg_q2_is_connect,
    .banned_reply = sg_q2_banned_reply,
    .full_reply = sg_q2_full_reply,
    .is_admin = sg_q2_is_admin,
    .client_qport = sg_q2_client_qport,
    .client_follows = sg_q2_client_follows,
    .create = q2_create,
    .destroy = q2_destroy,
    .decode = q2_decode,
    .encode = q2_encode,
    .demo_ext = q2_demo_ext,
    .record = q2_record,
    .record_end = q2_record_end,
    .demo_reader = &sg_q2_demo_impl,
    .capture = &q2_capture_impl,
    .set_text = q2_set_text,
    .drop_msg = q2_drop_msg,
    .inject = q2_inject,
    .must_encode = q2_must_encode,
    .dump = q2_dump,
    .stats = q2_stats,
    .info = q2_info,
    .describe = q2_describe,
    .established = q2_established,
    .status = &sg_q2_status,
    .master = &sg_q2_master,
};
