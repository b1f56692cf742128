/*
 * The NetQuake codec's entry in the registry: the table of its hooks
 * (relay.c's connect probe and accept, netchan.c's decode / encode and
 * filters, record.c, inspect.c, capture.c, offline.c), and the per-session
 * state's life.
 */
#include "protocols/nq/session.h"

#include "protocols/byteorder.h"
#include "protocols/codecinfo.h"
#include "protocols/error.h"
#include "protocols/nq/oob.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int nq_create(void **state)
{
    struct nqc *c = calloc(1, sizeof(*c));

    if (!c)
        return -ENOMEM;
    c->v.rules = &sg_nq__view_rules;
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
    sg_nq__level_free(c->lv);
    sg_fview_free(&c->v);
    free(c->v.text.buf);
    free(c);
}

void sg_nq__note_error(struct nqc *c, int err, const char *what)
{
    sg_codec_note_error(&c->stats, c->first_error, sizeof(c->first_error), err, what);
}

/* ---- the registry entry ---- */

static const struct sg_codec_stats *nq_stats(void *state)
{
    return &((struct nqc *)state)->stats;
}

/* The player's name and the unreliable netchan's loss; the level comes from
 * the frames (new_level), the server's name from no datagram of a game. */
static void nq_info(void *state, struct sg_codec_info *out)
{
    const struct nqc *c = state;

    sg_codec_info_net(out, c->player, c->lost, c->sequenced);
}

static const char *nq_describe(void *state)
{
    struct nqc *c = state;
    const char *name = sg_nq_dp_protocol_name(c->proto.protocol);
    char raw[160] = "", relayed[64] = "";

    if (c->csqc_raw)
        snprintf(raw, sizeof(raw), ", %llu CSQC bodies kept raw (game-defined)",
                 (unsigned long long)c->csqc_raw);
    if (c->rec_waited)
        snprintf(raw + strlen(raw), sizeof(raw) - strlen(raw),
                 ", recording waits for a level start");
    if (!sg_nq_protocol_known(c->proto.protocol))
        snprintf(relayed, sizeof(relayed), " (%s%snot decoded: relayed)", name ? name : "",
                 name ? ", " : "");
    snprintf(c->describe, sizeof(c->describe), "NetQuake protocol %d%s%s%s%s%s%s%s",
             (int)c->proto.protocol, c->proto.dpn ? " (DarkPlaces)" : "", relayed,
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
    .decode = sg_nq__decode,
    .encode = sg_nq__encode,
    .demo_ext = sg_nq__demo_ext,
    .record = sg_nq_record,
    .record_end = sg_nq_record_end,
    .capture = &sg_nq_capture_impl,
    .demo_reader = &sg_nq_demo_impl,
    SG_FVIEW_FILTER_HOOKS,
    .must_encode = sg_fview_must_encode,
    .dump = sg_nq__dump,
    .stats = nq_stats,
    .info = nq_info,
    .describe = nq_describe,
    .established = nq_established,
    .status = &sg_nq_status,
    .master = &sg_nq_master,
};
