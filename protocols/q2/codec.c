/*
 * The Quake 2 codec's entry in the registry: the table of its hooks
 * (relay.c's connect probe and qport, netchan.c's decode / encode, the
 * filters' view rules, record.c, inspect.c, capture.c, offline.c,
 * status.c), the per-session state's life and its lists' room, the
 * session's counters and description.
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
int sg_q2__msgs_room(struct q2c *c, uint32_t n)
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
    if (sg_q2_parsed_init(&c->parsed) < 0 || sg_q2__msgs_room(c, SG_Q2_MSGS_START) < 0 ||
        !c->chan[0].frag || !c->chan[1].frag || !c->chan[0].pieces || !c->chan[1].pieces) {
        sg_q2__destroy(c);
        return -ENOMEM;
    }
    *state = c;
    return 0;
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
    .must_encode = sg_q2__must_encode,
    .dump = sg_q2__dump,
    .stats = q2_stats,
    .info = q2_info,
    .describe = sg_q2__describe,
    .established = q2_established,
    .status = &sg_q2_status,
    .master = &sg_q2_master,
};
