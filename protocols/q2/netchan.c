/*
 * The Quake 2 netchan: its rules for the shared header (qnetchan.h): id's
 * 16-bit qport, R1Q2's and Q2PRO's one-byte qport (none when its low byte
 * is 0), Q2PRO's new netchan with its fragment bits; and the datagrams a
 * fragmented message came in, kept for an unchanged rebuild.
 *
 * Then the session's datagrams, decoded and encoded (codec.c puts them in
 * the registry entry).  Connectionless packets teach the session the
 * protocol (34, 35, 36), the qport and its width, the minor version, the
 * netchan type (Q2PRO's `nc`) and zlib (oob.c).  In-game datagrams pass
 * the receiver's rule (PROTOCOLS.md A1: a sequence not above the last
 * accepted one is dropped; Q2PRO's new netchan reassembles fragments in
 * order and delivers on the last) and their payload is parsed with the
 * layout the serverdata negotiated (parse.c).  Encode writes the header and
 * every message back from its fields; a fragmented message whose payload
 * came out the same goes out as the fragments that came, a changed one is
 * cut again at the same size.
 */
#include "protocols/q2/session.h"

#include "protocols/codecinfo.h"
#include "protocols/error.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int sg_q2__read_header(struct q2c *c, enum sg_dir dir, const uint8_t *d, size_t n,
                       struct sg_qnc_header *h)
{
    bool nc = c->nctype == 1 && c->protocol == 36;
    struct sg_qnc_rules r = {.mask = nc ? SG_QNC_NEW_MASK : SG_QNC_OLD_MASK, .fragments = nc};

    if (dir == SG_DIR_C2S) {
        if (c->protocol == 35 || c->protocol == 36)
            r.qport_width = c->qport >= 0 && (c->qport & 0xff) ? 1 : 0;
        else
            r.qport_width = 2;
    }
    return sg_qnc_read(d, n, &r, h);
}

void sg_q2__keep_piece(struct chan *ch, const uint8_t *d, size_t n)
{
    if (ch->npieces >= MAX_PIECES || ch->pieces_len + n > MAX_DGRAM * 4) {
        ch->npieces = MAX_PIECES + 1; /* too many to keep: rebuild by cutting */
        return;
    }
    memcpy(ch->pieces + ch->pieces_len, d, n);
    ch->pieces_len += n;
    ch->piece_len[ch->npieces++] = (uint32_t)n;
}

/* ---- a session's datagrams ---- */

static int note_error(struct q2c *c, int err, const char *what)
{
    sg_codec_note_error(&c->stats, c->first_error, sizeof(c->first_error), err, what);
    return err;
}

/* ---- the cross-game view ---- */

static void add_msg(struct q2c *c, int pi)
{
    const struct sg_fmsg *pm = &c->parsed.msgs[pi];
    bool s2c = c->v.frame.dir == SG_DIR_S2C;
    struct sg_msg *m = sg_fview_add(&c->v, pi,
                                    !s2c            ? sg_q2_clc_name(pm->op)
                                    : c->parsed.kex ? sg_q2_svc_name_kex(pm->op)
                                                    : sg_q2_svc_name(pm->op),
                                    -1);

    if (m->kind == SG_MSG_DISCONNECT)
        return;
    if (s2c && pm->op == SG_Q2_SVC_CONFIGSTRING && pm->count >= 2) {
        const struct sg_field *sf = &c->parsed.fields[pm->first + 1];
        m->kind = SG_MSG_CONFIGSTRING;
        m->number = (int32_t)c->parsed.fields[pm->first].raw;
        m->text = m->command = sg_textpool_keep(&c->v.text, sf->ptr, sf->len);
        m->text_len = m->text ? sf->len : 0;
        if (!m->text)
            m->kind = SG_MSG_GAME;
        return;
    }
    if (!s2c && pm->op == SG_Q2_CLC_USERINFO && pm->count >= 1 &&
        c->parsed.fields[pm->first].type == SG_FIELD_STRING) /* the player's new userinfo */
        sg_q2__take_name(c, (const char *)c->parsed.fields[pm->first].ptr,
                         c->parsed.fields[pm->first].len);
    sg_fview_add_text(&c->v, m, pm);
}

/* ---- decode ---- */

int sg_q2__decode(void *state, enum sg_dir dir, const uint8_t *data, size_t len,
                  const struct sg_frame **frame)
{
    struct q2c *c = state;
    struct chan *ch = &c->chan[dir];
    struct sg_q2_variant *v;
    int n, err;

    c->oob_name = NULL;
    c->parsed.nmsgs = 0;
    c->parsed.nfields = 0;
    *frame = &c->v.frame;
    n = sg_qnc_open(&c->v, &c->stats, dir, &c->parsed, data, len, c->copy, sizeof(c->copy),
                    &c->copy_len);
    if (n != 0)
        return n < 0 ? note_error(c, n, "datagram") : sg_q2__decode_oob(c, dir);
    if (dir == SG_DIR_C2S && c->accepted)
        c->established = true;
    if (c->kex)
        return 0; /* rerelease (KEX): relayed untouched, not decoded (no error) */

    n = sg_q2__read_header(c, dir, c->copy, len, &c->hdr);
    /* injections ride on whole messages */
    if (!sg_qnc_view(&c->v, &c->stats, n, &ch->rx, &c->hdr, c->hdr.reliable && !c->hdr.fragment))
        return 0; /* a runt, a stale sequence: the receiver drops it */
    c->header_len = (size_t)n;
    c->payload = c->copy + n;
    c->payload_len = len - (size_t)n;
    c->v.frame.pieces = 1;
    if (c->hdr.fragment) {
        if (!ch->assembling || ch->frag_seq != c->hdr.seq) {
            ch->assembling = true;
            ch->frag_seq = c->hdr.seq;
            ch->frag_len = 0;
            ch->npieces = 0;
            ch->pieces_len = 0;
            ch->piece_payload = 0;
        }
        if (c->hdr.offset != ch->frag_len)
            return sg_fview_reject(&c->v, &c->stats,
                                   c->hdr.offset < ch->frag_len ? "out of order fragment"
                                                                : "dropped fragment");
        if (c->payload_len > SG_Q2_MAX_MSGLEN - ch->frag_len)
            return sg_fview_reject(&c->v, &c->stats, "oversize fragment");
        memcpy(ch->frag + ch->frag_len, c->payload, c->payload_len);
        ch->frag_len += c->payload_len;
        if (ch->npieces == 0)
            ch->piece_payload = c->payload_len;
        sg_q2__keep_piece(ch, c->copy, len);
        if (c->hdr.more) {
            c->v.frame.kind = SG_FRAME_PARTIAL;
            return 0;
        }
        ch->assembling = false;
        c->payload = ch->frag;
        c->payload_len = ch->frag_len;
        c->v.frame.pieces = (int)(ch->npieces <= MAX_PIECES ? ch->npieces : MAX_PIECES);
    } else {
        ch->npieces = 0;
    }
    sg_qnc_take(&ch->rx, c->hdr.seq, &c->lost[dir], &c->sequenced[dir]);
    c->v.frame.msg = c->payload;
    c->v.frame.msg_len = c->payload_len;

    v = dir == SG_DIR_S2C ? &c->sv : &c->cv;
    c->parsed.sequence = c->hdr.seq;
    err = sg_q2_parse(dir, v, c->payload, c->payload_len, &c->parsed);
    if (err == 0)
        err = sg_q2__msgs_room(c, c->parsed.nmsgs);
    if (c->parsed.serverdata) {
        c->v.frame.new_level = true;
        snprintf(c->v.frame.level, sizeof(c->v.frame.level), "%s", c->parsed.level);
    }
    if (c->parsed.unsupported_op >= 0 && c->unsupported_op < 0)
        c->unsupported_op = c->parsed.unsupported_op;
    if (err < 0) /* the frame stays RAW */
        return sg_codec_unparsed(&c->stats, c->first_error, sizeof(c->first_error), dir, err);
    sg_fview_parsed(&c->v, c->parsed.fields, c->parsed.msgs, c->parsed.nmsgs);
    for (uint32_t i = 0; i < c->parsed.nmsgs; i++)
        add_msg(c, (int)i);
    c->v.frame.kind = SG_FRAME_MESSAGE;
    c->stats.messages++;
    if (dir == SG_DIR_S2C && (c->sv.protocol == 34 || c->parsed.serverdata))
        sg_q2__level_track(&c->lvl, &c->parsed, NULL);
    if (dir == SG_DIR_S2C && (c->sv.protocol == 35 || c->sv.protocol == 36)) {
        if (!c->trans && sg_q2_trans_create(&c->trans) < 0)
            note_error(c, -ENOMEM, "35/36 demo state");
        if (c->trans)
            sg_q2_trans_track(c->trans, &c->parsed, &c->sv);
    }
    return 0;
}

/* ---- filters ---- */

/*
 * Filters (msglist.h): a configstring's text is not changed; injections
 * ride on the sender's next reliable, unfragmented datagram (as for
 * QuakeWorld).  A recording's wish for a non-delta frame encodes the
 * client's move too.
 */
bool sg_q2__must_encode(void *state, const struct sg_frame *frame)
{
    const struct q2c *c = state;

    if (frame == &c->v.frame && frame->kind == SG_FRAME_MESSAGE && frame->dir == SG_DIR_C2S &&
        c->want_nodelta && c->cv.protocol == 34)
        for (uint32_t i = 0; i < c->parsed.nmsgs; i++)
            if (c->parsed.msgs[i].op == SG_Q2_CLC_MOVE && !c->parsed.msgs[i].unparsed)
                return true;
    return sg_fview_must_encode(state, frame);
}

/* ---- encode ---- */

int sg_q2__encode(void *state, const struct sg_frame *frame, sg_emit_fn emit, void *ctx,
                  bool *identical)
{
    struct q2c *c = state;
    struct chan *ch = &c->chan[frame->dir];
    struct sg_bmsg_writer w;
    int err, sent = 0;

    *identical = false;
    if (frame != &c->v.frame || frame->kind != SG_FRAME_MESSAGE)
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
    sg_q2_write(&c->parsed, c->v.dropped, &w);
    if (w.overflowed || w.len > SG_Q2_MAX_MSGLEN) {
        c->stats.reencode_errors++;
        return SG_E_OVERFLOW;
    }
    c->stats.reencoded++;
    if (!c->hdr.fragment) {
        struct sg_bmsg_writer o;
        sg_bmsg_writer_init(&o, c->out, sizeof(c->out));
        sg_qnc_write(&c->hdr, false, false, 0, &o);
        sg_bmsg_write_data(&o, c->body, w.len);
        sg_fview_inject_write(&c->v, &o, INJECT_LIMIT);
        if (o.overflowed) {
            c->stats.reencode_errors++;
            return SG_E_OVERFLOW;
        }
        err = sg_fview_emit(&c->v, &c->stats, c->out, o.len, c->copy, c->copy_len, emit, ctx,
                            identical);
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
        sg_qnc_write(&c->hdr, true, more, (uint32_t)off, &o);
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
