/*
 * The Quake 2 codec: the glue that fills the codec table (the relay hooks
 * of relay.c, the rooms of session.h), session create / destroy, decode /
 * encode and Quake 2's rules for the filters' view (msglist.c).
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
#include "protocols/q2/session.h"

#include "protocols/byteorder.h"
#include "protocols/codecinfo.h"
#include "protocols/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void sg_q2__destroy(void *state)
{
    struct q2c *c = state;

    if (!c)
        return;
    sg_q2__level_clear(&c->lvl);
    sg_q2_trans_destroy(c->trans);
    for (int d = 0; d < 2; d++) {
        free(c->chan[d].frag);
        free(c->chan[d].pieces);
    }
    sg_q2_parsed_free(&c->parsed);
    sg_fview_free(&c->v);
    free(c->rec_dropped);
    free(c);
}

/* Room for `n` parsed messages (and the injections after them) in the
 * per-message arrays: they grow with the parsed list and keep their size. */
static int msgs_room(struct q2c *c, uint32_t n)
{
    uint32_t cap = c->v.msgs_cap, want = n + SG_RELINJ_MAX;
    void *p;

    if (want <= cap)
        return 0;
    while (cap < want)
        cap = cap ? 2 * cap : want;
    if (cap > SG_Q2_MAX_MSGS + SG_RELINJ_MAX)
        cap = SG_Q2_MAX_MSGS + SG_RELINJ_MAX;
    if (!(p = realloc(c->rec_dropped, cap * sizeof(*c->rec_dropped))))
        return -ENOMEM;
    c->rec_dropped = p;
    return sg_fview_room(&c->v, cap);
}

/* The filters' view: Quake 2's text opcodes; its netchan's reliable bit
 * settles what rode on a reliable, unfragmented datagram. */
static const struct sg_fview_rules view_rules = {
    .ops = {.print = SG_Q2_SVC_PRINT,
            .centerprint = SG_Q2_SVC_CENTERPRINT,
            .stufftext = SG_Q2_SVC_STUFFTEXT,
            .stringcmd = SG_Q2_CLC_STRINGCMD,
            .print_level = true},
    .disconnect = SG_Q2_SVC_DISCONNECT,
    .other_text = SG_MSG_SERVER_COMMAND, /* svc_layout */
    .leave_verb = "disconnect",
    .keep_end = true,
};

int sg_q2__create(void **state)
{
    struct q2c *c = calloc(1, sizeof(*c));

    if (!c)
        return -ENOMEM;
    c->v.rules = &view_rules;
    c->qport = -1;
    c->unsupported_op = -1;
    c->v.text = (struct sg_textpool){.buf = c->pool, .cap = TEXT_POOL};
    sg_q2_variant_init(&c->sv, 34, 0);
    sg_q2_variant_init(&c->cv, 34, 0);
    c->sv.known = c->cv.known = false;
    for (int d = 0; d < 2; d++) {
        c->chan[d].frag = malloc(SG_Q2_MAX_MSGLEN);
        c->chan[d].pieces = malloc(MAX_DGRAM * 4);
    }
    if (sg_q2_parsed_init(&c->parsed) < 0 || msgs_room(c, SG_Q2_MSGS_START) < 0 ||
        !c->chan[0].frag || !c->chan[1].frag || !c->chan[0].pieces || !c->chan[1].pieces) {
        sg_q2__destroy(c);
        return -ENOMEM;
    }
    *state = c;
    return 0;
}

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
        err = msgs_room(c, c->parsed.nmsgs);
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
static bool q2_must_encode(void *state, const struct sg_frame *frame)
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

/* ---- dump ---- *//* ---- counters, description, admission ---- */

static const struct sg_codec_stats *q2_stats(void *state)
{
    return &((struct q2c *)state)->stats;
}

/* The player's name and the netchan's loss; the level comes from the frames
 * (new_level), the server's name from no datagram of a game. */
static void q2_info(void *state, struct sg_codec_info *out)
{
    const struct q2c *c = state;

    sg_codec_info_net(out, c->player, c->lost, c->sequenced);
}

const char *sg_q2__describe(void *state)
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
    sg_codec_describe_tail(c->describe, sizeof(c->describe), n, c->unsupported_op, c->first_error);
    return c->describe;
}

static bool q2_established(void *state)
{
    return ((struct q2c *)state)->established;
}

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
    .create = sg_q2__create,
    .destroy = sg_q2__destroy,
    .decode = sg_q2__decode,
    .encode = sg_q2__encode,
    .demo_ext = sg_q2__demo_ext,
    .record = sg_q2__record,
    .record_end = sg_q2__record_end,
    .demo_reader = &sg_q2_demo_impl,
    .capture = &sg_q2_capture_impl,
    SG_FVIEW_FILTER_HOOKS,
    .must_encode = q2_must_encode,
    .dump = sg_q2__dump,
    .stats = q2_stats,
    .info = q2_info,
    .describe = sg_q2__describe,
    .established = q2_established,
    .status = &sg_q2_status,
    .master = &sg_q2_master,
};
