/*
 * The QuakeWorld codec: the registry entry (its relay hooks: relay.c),
 * the glue that fills the codec table, session create /
 * destroy, decode / encode and QuakeWorld's rules for the filters' view
 * (msglist.c); the session's state: session.h; the inspector's dump:
 * inspect.c.
 *
 * Per datagram: connectionless packets are parsed into fields and teach the
 * session the extensions offered (challenge tail) and chosen (connect lines,
 * userinfo *z_ext); in-game datagrams pass the receiver's sequence rule
 * (netchan.c) and their payload is parsed with the sizes the negotiated
 * extensions select (serverdata is the source of truth once seen).  encode()
 * writes the header and every message back from its fields.
 */
#include "protocols/qw/session.h"

#include "protocols/byteorder.h"
#include "protocols/codecinfo.h"
#include "protocols/relinject.h"
#include "protocols/error.h"
#include "protocols/info.h"
#include "protocols/text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- state ---- */

#define QW_MSGS_START   256
#define QW_FIELDS_START 1024

/* *a (*cap elements of `size`) doubled until it holds `want` (at most
 * `max`); -ENOMEM leaves it as it was. */
static int room(void **a, uint32_t *cap, uint32_t want, uint32_t max, size_t size)
{
    uint32_t n = *cap ? *cap : want;
    void *p;

    if (want > max)
        want = max;
    if (want <= *cap)
        return 0;
    while (n < want)
        n = n > max / 2 ? max : 2 * n;
    if (!(p = realloc(*a, (size_t)n * size)))
        return -ENOMEM;
    *a = p;
    *cap = n;
    return 0;
}

/* Room for `fields` fields and `pmsgs` messages in the parsed lists, and
 * for each message's view beside them. */
static int lists_room(struct qwc *c, uint32_t fields, uint32_t pmsgs)
{
    void *a;
    int err;

    a = c->fields;
    err = room(&a, &c->fields_cap, fields, SG_QW_MAX_FIELDS, sizeof(*c->fields));
    c->parsed.fields = c->fields = a;
    if (err < 0)
        return err;
    a = c->pmsgs;
    err = room(&a, &c->pmsgs_cap, pmsgs, SG_QW_MAX_MSGS, sizeof(*c->pmsgs));
    c->parsed.msgs = c->pmsgs = a;
    if (err < 0)
        return err;
    if (c->v.msgs_cap >= c->pmsgs_cap + SG_RELINJ_MAX)
        return 0;
    return sg_fview_room(&c->v, c->pmsgs_cap + SG_RELINJ_MAX);
}

static void qw_destroy(void *state)
{
    struct qwc *c = state;

    if (!c)
        return;
    sg_qw_track_destroy(c->track);
    free(c->fields);
    free(c->pmsgs);
    sg_fview_free(&c->v);
    free(c);
}

/* The filters' view: QuakeWorld's text opcodes; its netchan's reliable bit
 * settles what rode on a reliable datagram. */
static const struct sg_fview_rules view_rules = {
    .ops = {.print = 8, .centerprint = 26, .stufftext = 9, .stringcmd = 4, .print_level = true},
    .disconnect = 2,
    .other_text = SG_MSG_STUFFTEXT,
    .leave_verb = "drop", /* ezQuake's disconnect, sent three times */
};

static int qw_create(void **state)
{
    struct qwc *c = calloc(1, sizeof(*c));

    if (!c)
        return -ENOMEM;
    if (sg_qw_track_create(&c->track) < 0) {
        free(c);
        return -ENOMEM;
    }
    c->v.rules = &view_rules;
    c->qport = -1;
    c->unsupported_op = -1;
    c->v.text = (struct sg_textpool){.buf = c->pool, .cap = TEXT_POOL};
    if (lists_room(c, QW_FIELDS_START, QW_MSGS_START) < 0) {
        qw_destroy(c);
        return -ENOMEM;
    }
    sg_qw_variant_of(&c->active, &c->var);
    *state = c;
    return 0;
}

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
            return lists_room(c, 0, 0);
        if (err != SG_E_TOOBIG ||
            (c->fields_cap >= SG_QW_MAX_FIELDS && c->pmsgs_cap >= SG_QW_MAX_MSGS))
            return err;
        if ((err = lists_room(c, 2 * c->fields_cap, 2 * c->pmsgs_cap)) < 0)
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

static int qw_decode(void *state, enum sg_dir dir, const uint8_t *data, size_t len,
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

static int qw_encode(void *state, const struct sg_frame *frame, sg_emit_fn emit, void *ctx,
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

/* ---- demos ---- */

static const char *qw_demo_ext(void *state)
{
    (void)state;
    return "qwd";
}

/* A server message as the client got it (rebuilt when it went out rebuilt). */
static int qw_record(void *state, const struct sg_frame *f, FILE *out)
{
    struct qwc *c = state;

    if (f != &c->v.frame || f->dir != SG_DIR_S2C || f->kind != SG_FRAME_MESSAGE)
        return 0;
    if (out != c->rec_out) {
        if (c->rec_out)
            sg_qw_rec_end(&c->rec);
        sg_qw_rec_start(&c->rec, out);
        c->rec_out = out;
    }
    return sg_qw_rec_server(&c->rec, c->track, f->new_level, c->hdr.seq,
                            c->out_sent ? c->out : c->copy, c->out_sent ? c->out_len : c->copy_len,
                            &c->parsed, c->v.dropped);
}

static int qw_record_end(void *state, FILE *out)
{
    struct qwc *c = state;

    if (out != c->rec_out)
        return 0;
    c->rec_out = NULL;
    return sg_qw_rec_end(&c->rec);
}

/* ---- counters, description, admission ---- */

static const struct sg_codec_stats *qw_stats(void *state)
{
    return &((struct qwc *)state)->stats;
}

static void qw_info(void *state, struct sg_codec_info *out)
{
    struct qwc *c = state;

    sg_codec_info_net(out, c->player, c->lost, c->sequenced);
    snprintf(out->hostname, sizeof(out->hostname), "%s", c->hostname);
    snprintf(out->map, sizeof(out->map), "%s", c->level);
}

static const char *qw_describe(void *state)
{
    struct qwc *c = state;
    const struct sg_qw_ext *e = c->have_serverdata ? &c->active : &c->chosen;
    int n = snprintf(c->describe, sizeof(c->describe),
                     "QuakeWorld 28, qport %d, FTE 0x%x FTE2 0x%x MVD1 0x%x z_ext %u", c->qport,
                     (unsigned)e->fte, (unsigned)e->fte2, (unsigned)e->mvd1, (unsigned)c->chosen.z_ext);
    sg_codec_describe_tail(c->describe, sizeof(c->describe), n, c->unsupported_op, c->first_error);
    return c->describe;
}

static bool qw_established(void *state)
{
    return ((struct qwc *)state)->established;
}

extern const struct sg_demo_impl sg_qw_demo_impl; /* offline.c */
extern const struct sg_codec_status sg_qw_status; /* status.c */
extern const struct sg_codec_master sg_qw_master;  /* status.c */
extern const struct sg_capture_impl sg_qw_capture_impl; /* capture.c */
extern const struct sg_codec_route_by sg_qw_route_by; /* prx.c */

const struct sg_codec sg_qw_codec = {
    .name = "qw",
    .description = "QuakeWorld (protocol 28, FTE/MVD extensions): decoded, re-encoded, filtered",
    .probe = sg_qw_is_connect,
    .is_connect = sg_qw_is_connect,
    .banned_reply = sg_qw_banned_reply,
    .full_reply = sg_qw_full_reply,
    .is_admin = sg_qw_is_admin,
    .client_qport = sg_qw_client_qport,
    .client_follows = sg_qw_client_follows,
    .create = qw_create,
    .destroy = qw_destroy,
    .decode = qw_decode,
    .encode = qw_encode,
    .demo_ext = qw_demo_ext,
    .record = qw_record,
    .record_end = qw_record_end,
    .capture = &sg_qw_capture_impl,
    SG_FVIEW_FILTER_HOOKS,
    .must_encode = sg_fview_must_encode,
    .dump = sg_qw__dump,
    .stats = qw_stats,
    .describe = qw_describe,
    .established = qw_established,
    .info = qw_info,
    .demo_reader = &sg_qw_demo_impl,
    .status = &sg_qw_status,
    .route_by = &sg_qw_route_by,
    .master = &sg_qw_master,
};
