/*
 * The QuakeWorld codec's entry in the registry: the table of its hooks
 * (relay.c's connect probe and qport, netchan.c's decode / encode, the
 * filters' view rules, record.c, inspect.c, capture.c, offline.c,
 * status.c, prx.c), the per-session state's life and its lists' room, the
 * session's counters and description.
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
int sg_qw__lists_room(struct qwc *c, uint32_t fields, uint32_t pmsgs)
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
    if (sg_qw__lists_room(c, QW_FIELDS_START, QW_MSGS_START) < 0) {
        qw_destroy(c);
        return -ENOMEM;
    }
    sg_qw_variant_of(&c->active, &c->var);
    *state = c;
    return 0;
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
    .decode = sg_qw__decode,
    .encode = sg_qw__encode,
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
