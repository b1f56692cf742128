/*
 * The Quake 3 codec: the glue that fills the codec table (protocols/codec.h)
 * with the netchan (netchan.h), the server message layer (svmsg.h,
 * state.h), client messages (clmsg.h), the demo recorder (demo.h), the
 * filters' view (view.c) and the relay hooks (relay.c): session create and
 * destroy, decode, encode, recording, the session's description.
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
#include "protocols/q3/session.h"

#include "protocols/codecinfo.h"
#include "protocols/error.h"
#include "protocols/q3/huffman.h"
#include "protocols/q3/inspect.h"
#include "protocols/q3/oob.h"
#include "protocols/q3/proto.h"
#include "protocols/q3/spectate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    sg_codec_note_error(&c->stats, c->first_error, sizeof(c->first_error), err, what);
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
    sg_q3_state_set_variant(c->st, sg_q3_variant_of(c->nc.wire)); /* the netchan's choice */
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
    sg_q3__msgs_reset(c);
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
        sg_q3__msg_add(c, SG_MSG_GAME, sg_q3_oob_kind_name(c->qf.u.oob.kind), -1, NULL, 0, NULL, -1,
                       -1);
        sg_q3__msgs_done(c, f);
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
        sg_q3__list_server_message(c);
    } else if (c->qf.content_err >= 0) {
        f->ack = c->qf.u.cl.message_ack;
        f->reliable_ack = c->qf.u.cl.reliable_ack;
        f->disconnect = sg_q3_clmsg_disconnects(&c->qf.u.cl);
        sg_q3__list_client_message(c);
    }
    sg_q3__msgs_done(c, f);
    return err < 0 ? err : c->parse_err < 0 && dir == SG_DIR_S2C ? c->parse_err : 0;
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
    n = sg_q3__rewrite_message(c, f->dir);
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
extern const struct sg_codec_master sg_q3_master; /* status.c */

const struct sg_codec sg_q3_codec = {
    .name = "q3",
    .description = "Quake 3 (protocols 66-68, ioquake3 71, OpenArena 71)",
    .probe = sg_q3__probe,
    .banned_reply = sg_q3_banned_reply,
    .full_reply = sg_q3_full_reply,
    .is_admin = sg_q3_is_admin,
    .client_qport = sg_q3__client_qport,
    .client_follows = sg_q3__client_follows,
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
    .set_text = sg_q3__set_text,
    .drop_msg = sg_q3__drop_msg,
    .inject = sg_q3__inject,
    .must_encode = sg_q3__must_encode,
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
