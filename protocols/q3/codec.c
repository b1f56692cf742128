/*
 * The Quake 3 codec: the netchan (netchan.h), the server message layer
 * (svmsg.h, state.h), client messages (clmsg.h) and the demo recorder
 * (demo.h) behind the generic codec table (protocols/codec.h).
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
#include "protocols/codec.h"

#include "protocols/error.h"
#include "protocols/q3/demo.h"
#include "protocols/q3/netchan.h"
#include "protocols/q3/state.h"
#include "protocols/q3/svmsg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct q3c {
    struct sg_q3_netchan nc;
    struct sg_q3_frame qf;
    struct sg_q3_state *st;
    struct sg_q3_svmsg sv;
    int parse_err; /* of the last server message */
    struct sg_frame frame;
    struct sg_codec_stats stats;
    char first_error[200];
    char describe[320];

    /* the datagram decoded last, to compare a rebuilt one against */
    size_t last_len;
    uint8_t last[SG_Q3_MAX_MSGLEN + 64];

    /* rebuilding */
    uint8_t buf[SG_Q3_MAX_MSGLEN];
    struct sg_q3_datagrams dg;

    /* recording */
    FILE *rec_out;
    struct sg_q3_demo_writer writer;
    struct sg_q3_recorder rec;
};

static bool q3_probe(const uint8_t *d, size_t n)
{
    static const char gc[] = "\xff\xff\xff\xffgetchallenge";
    static const char cn[] = "\xff\xff\xff\xff"
                             "connect ";

    /* Quake 3's getchallenge has no newline (QuakeWorld's and Quake 2's do). */
    if (n >= sizeof(gc) - 1 && memcmp(d, gc, sizeof(gc) - 1) == 0)
        return n == sizeof(gc) - 1 || d[sizeof(gc) - 1] == ' ';
    /* Its connect carries Huffman-coded userinfo, not a quoted string. */
    return n > sizeof(cn) + 2 && memcmp(d, cn, sizeof(cn) - 1) == 0 && d[sizeof(cn) - 1] != '"';
}

static int q3_create(void **state)
{
    struct q3c *c = calloc(1, sizeof(*c));

    if (!c)
        return -ENOMEM;
    sg_q3_netchan_init(&c->nc);
    sg_q3_svmsg_init(&c->sv);
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
    free(c);
}

static void note_error(struct q3c *c, int err, const char *what)
{
    c->stats.errors++;
    if (!c->first_error[0])
        snprintf(c->first_error, sizeof(c->first_error), "%s: %s", what, sg_strerror(err));
}

/* A whole server message: parse it all; notice a new level. */
static void server_message(struct q3c *c, struct sg_frame *f)
{
    const char *info;

    c->st->protocol = c->nc.protocol ? c->nc.protocol : c->st->protocol;
    c->parse_err =
        sg_q3_parse_server_message(c->st, c->qf.sequence, c->qf.msg, c->qf.msg_len, &c->sv);
    if (c->parse_err < 0)
        note_error(c, c->parse_err, "server message");
    f->new_level = sg_q3_svmsg_count(&c->sv, SG_Q3_SVC_GAMESTATE) > 0;
    info = sg_q3_state_configstring(c->st, SG_Q3_CS_SERVERINFO);
    if (!info || !sg_q3_info_value(info, "mapname", f->level, sizeof(f->level)))
        snprintf(f->level, sizeof(f->level), "unknown");
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
    c->stats.decoded++;
    c->last_len = len <= sizeof(c->last) ? len : 0;
    if (c->last_len)
        memcpy(c->last, data, len);
    err = sg_q3_netchan_decode(&c->nc, qd, data, len, &c->qf);
    if (err < 0)
        note_error(c, err, dir == SG_DIR_C2S ? "client datagram" : "server datagram");
    f->sequence = c->qf.sequence;
    *out = f;

    switch (c->qf.rx) {
    case SG_Q3_RX_OOB:
        f->kind = SG_FRAME_OOB;
        c->stats.oob++;
        return err;
    case SG_Q3_RX_FRAGMENT:
        f->kind = SG_FRAME_PARTIAL;
        return err;
    case SG_Q3_RX_MESSAGE:
        break;
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
    c->stats.messages++;
    if (dir == SG_DIR_S2C)
        server_message(c, f);
    return err < 0 ? err : c->parse_err < 0 && dir == SG_DIR_S2C ? c->parse_err : 0;
}

/* Write the message again from its decoded form. */
static int rewrite_message(struct q3c *c, enum sg_dir dir)
{
    const struct sg_q3_view *sv;

    if (dir == SG_DIR_S2C) {
        if (c->parse_err < 0)
            return c->parse_err;
        return sg_q3_write_server_message(&c->sv, c->buf, sizeof(c->buf));
    }
    if (c->qf.content_err < 0)
        return c->qf.content_err;
    sv = sg_q3_netchan_view(&c->nc, SG_Q3_SIDE_SERVER);
    return sg_q3_clmsg_encode(&c->qf.u.cl, sv->checksum_feed, &sv->server_cmds, c->buf,
                              sizeof(c->buf));
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
    n = rewrite_message(c, f->dir);
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
    static const char *const exts[] = {"dm_66", "dm_67", "dm_68", "dm_69", "dm_70", "dm_71"};
    struct q3c *c = state;
    int p = c->nc.protocol;

    return p >= 66 && p <= 71 ? exts[p - 66] : "dm_68";
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
    return sg_q3_recorder_feed(&c->rec, c->st, &c->sv, c->parse_err, c->qf.msg, c->qf.msg_len);
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

static const struct sg_codec_stats *q3_stats(void *state)
{
    struct q3c *c = state;
    return &c->stats;
}

static const char *q3_describe(void *state)
{
    struct q3c *c = state;

    snprintf(c->describe, sizeof(c->describe), "%s, protocol %d%s%s", sg_q3_wire_name(c->nc.wire),
             c->nc.protocol, c->first_error[0] ? ", first error: " : "", c->first_error);
    return c->describe;
}

const struct sg_codec sg_q3_codec = {
    .name = "q3",
    .description = "Quake 3 (protocols 66-68, ioquake3 71, OpenArena 71)",
    .probe = q3_probe,
    .create = q3_create,
    .destroy = q3_destroy,
    .decode = q3_decode,
    .encode = q3_encode,
    .demo_ext = q3_demo_ext,
    .record = q3_record,
    .record_end = q3_record_end,
    .stats = q3_stats,
    .describe = q3_describe,
};
