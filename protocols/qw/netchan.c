/*
 * The QuakeWorld netchan (mvdsv net_chan.c): its rules for the header it
 * shares with Quake 2 (protocols/qnetchan.h), both directions:
 *
 *   0                   31 32                  63 64          79
 *   | sequence      |R| | ack              |A| | qport (C2S) | message...
 *   R: the datagram carries the sender's reliable message
 *   A: the reliable sequence bit of the last reliable message the sender got
 *   both words little-endian; 0xffffffff as first word: connectionless.
 *
 * Receive rule (Netchan_Process): a datagram shorter than the header is a
 * runt and ignored; a sequence not above the last one accepted is stale or
 * a duplicate and dropped; anything above is accepted (the gap counts as
 * dropped datagrams).
 *
 * Then the session's datagrams, decoded and encoded (codec.c puts them in
 * the registry entry): connectionless packets are parsed into fields and
 * teach the session the extensions offered (challenge tail) and chosen
 * (connect lines, userinfo *z_ext); in-game datagrams pass the receiver's
 * rule and their payload is parsed with the sizes the negotiated
 * extensions select (serverdata is the source of truth once seen).  Encode
 * writes the header and every message back from its fields.
 */
#include "protocols/qw/session.h"

#include "protocols/codecinfo.h"
#include "protocols/error.h"
#include "protocols/info.h"

#include <stdio.h>
#include <string.h>

int sg_qw_header_read(enum sg_dir dir, const uint8_t *data, size_t len, struct sg_qnc_header *h)
{
    static const struct sg_qnc_rules rules[2] = {
        [SG_DIR_C2S] = {.mask = SG_QNC_OLD_MASK, .qport_width = 2},
        [SG_DIR_S2C] = {.mask = SG_QNC_OLD_MASK},
    };

    return sg_qnc_read(data, len, &rules[dir], h);
}

int sg_qw_header_write(const struct sg_qnc_header *h, struct sg_bmsg_writer *w)
{
    sg_qnc_write(h, false, false, 0, w);
    return w->overflowed ? SG_E_OVERFLOW : 0;
}

/* ---- a session's datagrams ---- */

/* The stream into c->parsed, as sg_qw_parse with the lists at their caps
 * would: a list that runs out doubles (both do) and the stream is read
 * again, so only the caps stop it (SG_E_TOOBIG); -ENOMEM. */
static int parse(struct qwc *c, enum sg_dir dir, const uint8_t *d, size_t len)
{
    struct sg_qw_ext ext = c->parsed.ext; /* what a serverdata in it changes */
    int err;

    for (;;) {
        c->parsed.ext = ext;
        err = sg_qw_parse_n(dir, &c->var, d, len, &c->parsed, c->fields_cap, c->pmsgs_cap);
        if (err == 0) /* each message's view too (after a growth that failed half way) */
            return sg_qw__lists_room(c, 0, 0);
        if (err != SG_E_TOOBIG ||
            (c->fields_cap >= SG_QW_MAX_FIELDS && c->pmsgs_cap >= SG_QW_MAX_MSGS))
            return err;
        if ((err = sg_qw__lists_room(c, 2 * c->fields_cap, 2 * c->pmsgs_cap)) < 0)
            return err;
    }
}

static int note_error(struct qwc *c, int err, const char *what)
{
    sg_codec_note_error(&c->stats, c->first_error, sizeof(c->first_error), err, what);
    return err;
}

/* The extensions the decoder uses: serverdata's, else the client's choice. */
static void settle_variant(struct qwc *c)
{
    const struct sg_qw_ext *e = c->have_serverdata ? &c->active : &c->chosen;

    sg_qw_variant_of(e, &c->var);
}

/* ---- the cross-game view ---- */

/* The value of `key` in the info string (`info`, `len`; it may end at a
 * closing quote) into `out`, "" when absent. */
static void copy_info_value(const char *info, size_t len, const char *key, char *out, size_t cap)
{
    const char *v, *q;
    size_t vl;

    out[0] = '\0';
    if (!info)
        return;
    q = memchr(info, '"', len);
    if (q)
        len = (size_t)(q - info);
    if (sg_info_get(info, len, key, strlen(key), &v, &vl) && v)
        snprintf(out, cap, "%.*s", (int)(vl < cap ? vl : cap - 1), v);
}

static void add_msg(struct qwc *c, int pi)
{
    const struct sg_fmsg *pm = &c->pmsgs[pi];
    bool s2c = c->v.frame.dir == SG_DIR_S2C;
    struct sg_msg *m =
        sg_fview_add(&c->v, pi, s2c ? sg_qw_svc_name(pm->op) : sg_qw_clc_name(pm->op), -1);
    const struct sg_field *tf =
        m->kind == SG_MSG_DISCONNECT ? NULL : sg_fview_add_text(&c->v, m, pm);

    if (tf && s2c && pm->op == 9 && tf->len > 16 && memcmp(tf->ptr, "fullserverinfo \"", 16) == 0)
        copy_info_value((const char *)tf->ptr + 16, tf->len - 16, "hostname", c->hostname,
                        sizeof(c->hostname));
}

/* ---- decode ---- */

static int decode_oob(struct qwc *c, enum sg_dir dir)
{
    struct sg_msg *m = &c->v.msgs[0];
    int err = sg_qw_oob_parse(dir, c->copy, c->copy_len, &c->oob);

    c->stats.oob++;
    c->v.frame.kind = SG_FRAME_OOB;
    memset(m, 0, sizeof(*m));
    m->kind = SG_MSG_GAME;
    m->name = c->oob.name;
    m->number = -1;
    c->v.frame.nmsgs = 1;
    switch (c->oob.kind) {
    case SG_QW_OOB_CHALLENGE:
        c->challenge = c->oob.challenge;
        if (c->oob.ext.known)
            c->offered = c->oob.ext;
        break;
    case SG_QW_OOB_CONNECT:
        c->challenge = c->oob.challenge;
        c->qport = c->oob.qport;
        c->chosen = c->oob.ext;
        c->chosen.known = true;
        c->have_serverdata = false;
        copy_info_value(c->oob.userinfo, c->oob.userinfo_len, "name", c->player,
                        sizeof(c->player));
        settle_variant(c);
        sg_qw_track_reset(c->track);
        /* A new connection: the receivers start over, injections wait again. */
        memset(c->chan, 0, sizeof(c->chan));
        sg_relinj_restart(&c->v.inj);
        c->accepted = false;
        break;
    case SG_QW_OOB_ACCEPT:
        c->accepted = true;
        break;
    default:
        break;
    }
    return err < 0 ? note_error(c, err, "connectionless packet") : err;
}

int sg_qw__decode(void *state, enum sg_dir dir, const uint8_t *data, size_t len,
                  const struct sg_frame **frame)
{
    struct qwc *c = state;
    int n, err;

    c->out_sent = false;
    c->parsed.nmsgs = 0;
    c->parsed.nfields = 0;
    *frame = &c->v.frame;
    n = sg_qnc_open(&c->v, &c->stats, dir, &c->parsed, data, len, c->copy, sizeof(c->copy),
                    &c->copy_len);
    if (n != 0)
        return n < 0 ? note_error(c, n, "datagram") : decode_oob(c, dir);

    /* Admission: sequenced traffic from the client after the server's accept. */
    if (dir == SG_DIR_C2S && c->accepted)
        c->established = true;

    /* The header, and the receiver's rule (a runt, a stale sequence: dropped). */
    n = sg_qw_header_read(dir, c->copy, len, &c->hdr);
    if (!sg_qnc_view(&c->v, &c->stats, n, &c->chan[dir], &c->hdr, c->hdr.reliable))
        return 0;
    c->payload_at = (size_t)n;
    sg_qnc_take(&c->chan[dir], c->hdr.seq, &c->lost[dir], &c->sequenced[dir]);

    /* The messages. */
    c->parsed.ext = c->have_serverdata ? c->active : c->chosen;
    c->parsed.sequence = c->hdr.seq;
    err = parse(c, dir, c->copy + n, len - (size_t)n);
    if (c->parsed.serverdata) {
        c->active = c->parsed.ext;
        c->active.z_ext = c->chosen.z_ext;
        c->have_serverdata = true;
        settle_variant(c);
        c->v.frame.new_level = true;
        snprintf(c->level, sizeof(c->level), "%s", c->parsed.level);
    }
    /* The level's name on every server message: a recording may start mid-level. */
    if (dir == SG_DIR_S2C && c->level[0])
        memcpy(c->v.frame.level, c->level, sizeof(c->level));
    if (c->parsed.unsupported_op >= 0 && c->unsupported_op < 0)
        c->unsupported_op = c->parsed.unsupported_op;
    if (err < 0) /* the frame stays RAW */
        return sg_codec_unparsed(&c->stats, c->first_error, sizeof(c->first_error), dir, err);
    sg_fview_parsed(&c->v, c->fields, c->pmsgs, c->parsed.nmsgs);
    for (uint32_t i = 0; i < c->parsed.nmsgs; i++)
        add_msg(c, (int)i);
    c->v.frame.kind = SG_FRAME_MESSAGE;
    c->v.frame.undecoded = c->parsed.unsupported_op >= 0; /* an extension relayed as raw bytes */
    c->v.frame.pieces = 1;
    c->stats.messages++;
    /* What recording needs: the client's commands and clock, the level's state. */
    if (dir == SG_DIR_C2S)
        sg_qw_rec_client(&c->rec, &c->parsed, c->hdr.seq);
    else
        sg_qw_track_server(c->track, &c->var, &c->parsed, c->hdr.seq);
    return 0;
}

/*
 * Filters (msglist.h).  Injection, reliable without touching the netchan:
 * the text rides on the sender's next reliable datagram towards `dir` (a
 * QuakeWorld sender keeps one reliable message in flight and sends a new
 * one, or resends it, only with the reliable bit set), appended after its
 * messages.  The receiver flips its reliable bit for that datagram anyway,
 * so neither peer's sequences or bits change; if the datagram is lost, the
 * receiver's acknowledgement says so and the sender's resend carries the
 * text again; it is dropped once acknowledged.  Until the sender sends a
 * reliable datagram the text waits (the server sends them all the time; a
 * client with each command it types).
 */

/* ---- encode ---- */

int sg_qw__encode(void *state, const struct sg_frame *frame, sg_emit_fn emit, void *ctx,
                  bool *identical)
{
    struct qwc *c = state;
    struct sg_bmsg_writer w;
    int err;

    *identical = false;
    if (frame != &c->v.frame || frame->kind != SG_FRAME_MESSAGE)
        return SG_E_STATE;
    sg_bmsg_writer_init(&w, c->out, sizeof(c->out));
    sg_qw_header_write(&c->hdr, &w);
    sg_qw_write(&c->parsed, c->v.dropped, &w);
    /* A client's move checksum covers its move only: text filters never change it. */
    sg_fview_inject_write(&c->v, &w, SG_QW_MAX_MSGLEN);
    if (w.overflowed) {
        c->stats.reencode_errors++;
        return SG_E_OVERFLOW;
    }
    c->stats.reencoded++;
    err = sg_fview_emit(&c->v, &c->stats, c->out, w.len, c->copy, c->copy_len, emit, ctx,
                        identical);
    c->out_len = w.len;
    c->out_sent = err >= 0;
    return err < 0 ? err : 1;
}
