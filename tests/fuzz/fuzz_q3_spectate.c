/*
 * fuzz_q3_spectate: the Quake 3 spectator hooks (protocols/q3/spectate.c)
 * between a watched session, decoded by the real Quake 3 codec, and one
 * spectator, live and through a delayed stream.
 *
 * Input:
 *
 *     u8   flags                 bit 0: the spectator connects with protocol 71 (else 68)
 *     le16 qport
 *     { u8 kind, le16 length, length bytes } ...   to the end of the input
 *
 * kind bit 0: a datagram of the watched session (bit 1: from the server,
 * else from its client), decoded by the session codec, each server frame
 * fed to the spectator (live) and to a delayed stream whose frames are fed
 * to a second spectator; else a datagram from the spectator (bit 2: from
 * an address that is no spectator: hello(); bit 5: the bytes as a notice;
 * bit 6: a client message the harness builds, see below).  The spectators
 * start from a connect the harness builds (the game's Huffman-coded form).
 *
 * Each spectator has a game client's netchan in the harness, which decodes
 * every datagram sent to it.  A kind with bit 6 makes that client write its
 * next message through the real netchan, so that the spectator's
 * acknowledgements are the ones a client sends and its snapshots are
 * delta-coded and fed as the game's: the record's bytes are
 *
 *     u8  back      the message acknowledged is the last received - (back & 3)
 *     u8  how       bit 0: clc_moveNoDelta; bit 1: a reliable command follows;
 *                   bit 2: the command reuses the last number (a resend)
 *     ...           the command's text (the rest, at most 200 bytes)
 *
 * Properties: nothing crashes, leaks or reads out of bounds; every datagram
 * sent to a spectator fits the game's packet size; hello() answers only
 * within the room given.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "protocols/codec.h"
#include "protocols/q3/clmsg.h"
#include "protocols/q3/netchan.h"
#include "protocols/q3/oob.h"

extern const struct sg_codec sg_q3_codec;

#define CHALLENGE 123456789

/* A spectator's game client, as the harness plays it. */
struct client {
    struct sg_q3_netchan nc;
    struct sg_q3_frame frame;
    int32_t out_seq, rel_seq, server_time;
    unsigned sent, gamestates, snapshots;
};

static int emit(void *ctx, const uint8_t *data, size_t len)
{
    struct client *c = ctx;

    FUZZ_CHECK(len > 0 && len <= SG_Q3_MAX_PACKETLEN + 16);
    c->sent++;
    if (sg_q3_netchan_decode(&c->nc, SG_Q3_S2C, data, len, &c->frame) >= 0 &&
        c->frame.rx == SG_Q3_RX_MESSAGE) {
        c->gamestates += c->frame.u.sv.gamestate;
        c->snapshots += c->frame.u.sv.snapshot;
    }
    return 0;
}

/* The client's next message (CL_WritePacket), from a record's bytes (bit 6). */
static int client_message(struct client *c, const uint8_t *d, size_t got, struct sg_q3_clmsg *cm,
                          struct sg_q3_datagrams *dg)
{
    const struct sg_q3_view *sv = sg_q3_netchan_view(&c->nc, SG_Q3_SIDE_SERVER);
    const struct sg_q3_view *cv = sg_q3_netchan_view(&c->nc, SG_Q3_SIDE_CLIENT);
    struct sg_q3_usercmd zero = {0};
    uint8_t buf[512];
    int len;

    memset(cm, 0, offsetof(struct sg_q3_clmsg, tail));
    cm->message_ack = c->nc.rx[SG_Q3_S2C].incoming_sequence - (got > 0 ? (d[0] & 3) : 0);
    cm->reliable_ack = cv->server_cmds.highest;
    if (got > 1 && (d[1] & 2)) {
        size_t n = got - 2 < 200 ? got - 2 : 200;

        c->rel_seq += (d[1] & 4) && c->rel_seq > 0 ? 0 : 1;
        cm->num_commands = 1;
        cm->commands[0].sequence = c->rel_seq;
        memcpy(cm->commands[0].text, d + 2, n);
        cm->commands[0].text[n] = '\0';
        cm->commands[0].len = (uint16_t)strlen(cm->commands[0].text);
    }
    cm->move_op = got > 1 && (d[1] & 1) ? SG_Q3_CLC_MOVE_NODELTA : SG_Q3_CLC_MOVE;
    cm->num_cmds = 1;
    c->server_time += 25;
    cm->cmds[0].server_time = c->server_time;
    sg_q3_usercmd_make_wire(&zero, &cm->cmds[0], &cm->wire[0]);
    cm->eof = true;
    cm->stop_op = -1;
    len = sg_q3_clmsg_encode(cm, sv->checksum_feed, &sv->server_cmds, buf, sizeof(buf));
    if (len <= 0)
        return 0;
    return sg_q3_netchan_encode(&c->nc, SG_Q3_C2S, ++c->out_seq, buf, (size_t)len, dg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct sg_codec_spectate *h = sg_q3_codec.spectate;
    struct fuzz_in in;
    uint8_t connect[512], out[1400];
    char text[256];
    void *session = NULL, *live = NULL, *late = NULL, *stream = NULL;
    struct client *cl = calloc(2, sizeof(*cl)); /* live's and late's */
    struct sg_q3_clmsg *cm = malloc(sizeof(*cm));
    struct sg_q3_datagrams *dg = malloc(sizeof(*dg));
    uint64_t now = 1;
    int n;

    if (!cl || !cm || !dg)
        goto out;
    sg_q3_netchan_init(&cl[0].nc);
    sg_q3_netchan_init(&cl[1].nc);

    fuzz_in_init(&in, data, size);
    uint8_t flags = fuzz_u8(&in);
    uint16_t qport = fuzz_le16(&in);
    n = snprintf(text, sizeof(text),
                 "connect \"\\name\\fuzz\\protocol\\%d\\qport\\%u\\challenge\\%d\"",
                 flags & 1 ? 71 : 68, qport, CHALLENGE);
    n = sg_q3_oob_build(text, (size_t)n, true, connect, sizeof(connect));
    FUZZ_CHECK(n > 0);
    size_t olen = 0;
    FUZZ_CHECK(h->hello(connect, (size_t)n, CHALLENGE, NULL, out, sizeof(out), &olen) ==
               SG_SPECT_CONNECT);
    for (int i = 0; i < 2; i++) {
        /* the client's netchan learns protocol, challenge and qport from its connect */
        (void)sg_q3_netchan_decode(&cl[i].nc, SG_Q3_C2S, connect, (size_t)n, &cl[i].frame);
        if (flags & 1)
            cl[i].nc.wire = SG_Q3_WIRE_IOQ3_71; /* the 71 of ioquake3's client */
    }
    if (sg_q3_codec.create(&session) < 0 || h->stream_create(&stream) < 0 ||
        h->create(&live, connect, (size_t)n, emit, &cl[0]) < 0 ||
        h->create(&late, connect, (size_t)n, emit, &cl[1]) < 0)
        goto done;

    while (in.left > 0) {
        uint8_t kind = fuzz_u8(&in);
        size_t len = fuzz_le16(&in), got;
        const uint8_t *d = fuzz_bytes(&in, len, &got);
        uint8_t *copy = malloc(got ? got : 1); /* its own allocation: ASan sees overreads */
        struct sg_spect_ask_req req = {0};

        if (!copy)
            break;
        memcpy(copy, d, got);
        now += 50;
        if (kind & 1) {
            const struct sg_frame *f = NULL;
            enum sg_dir dir = kind & 2 ? SG_DIR_S2C : SG_DIR_C2S;
            struct sg_spect_src src = {session, false};

            (void)sg_q3_codec.decode(session, dir, copy, got, &f);
            if (f && dir == SG_DIR_S2C) {
                (void)h->feed(live, &src, f, now, emit, &cl[0]);
                if (f->kind == SG_FRAME_MESSAGE && f->msg) {
                    const struct sg_frame *g = NULL;
                    struct sg_spect_src dsrc = {stream, true};

                    (void)h->stream_feed(stream, f->sequence, f->msg, f->msg_len, &g);
                    if (g)
                        (void)h->feed(late, &dsrc, g, now, emit, &cl[1]);
                }
            }
        } else if (kind & 32) {
            char note[200];

            snprintf(note, sizeof(note), "%.*s", (int)(got < 199 ? got : 199), (const char *)copy);
            h->notice(kind & 8 ? late : live, note);
        } else if (kind & 4) {
            size_t rlen = 0;
            int v =
                h->hello(copy, got, CHALLENGE, (kind & 8) ? "pw" : NULL, out, sizeof(out), &rlen);
            FUZZ_CHECK(v >= SG_SPECT_IGNORE && v <= SG_SPECT_REFUSE);
            if (v == SG_SPECT_REPLY || v == SG_SPECT_REFUSE)
                FUZZ_CHECK(rlen > 4 && rlen <= sizeof(out));
        } else if (kind & 64) {
            struct client *c = &cl[kind & 8 ? 1 : 0];
            /* the delayed spectator watches the delayed stream */
            struct sg_spect_src src = kind & 8 ? (struct sg_spect_src){stream, true}
                                               : (struct sg_spect_src){session, false};
            int k = client_message(c, copy, got, cm, dg);

            for (int i = 0; i < k; i++) {
                (void)h->input(kind & 8 ? late : live, kind & 16 ? NULL : &src, now, dg->data[i],
                               dg->len[i], emit, c, &req);
                FUZZ_CHECK(req.ask >= SG_SPECT_ASK_NONE && req.ask <= SG_SPECT_ASK_FOLLOW);
            }
        } else {
            struct sg_spect_src src = kind & 8 ? (struct sg_spect_src){stream, true}
                                               : (struct sg_spect_src){session, false};

            (void)h->input(kind & 8 ? late : live, kind & 16 ? NULL : &src, now, copy, got, emit,
                           &cl[kind & 8 ? 1 : 0], &req);
            FUZZ_CHECK(req.ask >= SG_SPECT_ASK_NONE && req.ask <= SG_SPECT_ASK_FOLLOW);
            FUZZ_CHECK(memchr(req.arg, 0, sizeof(req.arg)) != NULL || req.ask == SG_SPECT_ASK_NONE);
        }
        free(copy);
    }
done:
    if (getenv("FUZZ_SPECTATE_VERBOSE")) /* how far the spectators got (seeds, by hand) */
        fprintf(stderr, "spectators: live %u datagrams, %u gamestates, %u snapshots; "
                        "delayed %u, %u, %u\n", cl[0].sent, cl[0].gamestates, cl[0].snapshots,
                cl[1].sent, cl[1].gamestates, cl[1].snapshots);
    h->destroy(live);
    h->destroy(late);
    h->stream_destroy(stream);
    sg_q3_codec.destroy(session);
    sg_q3_netchan_finish(&cl[0].nc);
    sg_q3_netchan_finish(&cl[1].nc);
out:
    free(cl);
    free(cm);
    free(dg);
    return 0;
}
