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
 * an address that is no spectator: hello(); bit 5: the bytes as a notice).
 * The spectators start from a
 * connect the harness builds (the game's Huffman-coded form).
 *
 * Properties: nothing crashes, leaks or reads out of bounds; every datagram
 * sent to a spectator fits the game's packet size; hello() answers only
 * within the room given.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "protocols/codec.h"
#include "protocols/q3/netchan.h"
#include "protocols/q3/oob.h"

extern const struct sg_codec sg_q3_codec;

#define CHALLENGE 123456789

static int emit(void *ctx, const uint8_t *data, size_t len)
{
    FUZZ_CHECK(len > 0 && len <= SG_Q3_MAX_PACKETLEN + 16);
    (void)data;
    ++*(unsigned *)ctx;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct sg_codec_spectate *h = sg_q3_codec.spectate;
    struct fuzz_in in;
    uint8_t connect[512], out[1400];
    char text[256];
    void *session = NULL, *live = NULL, *late = NULL, *stream = NULL;
    unsigned sent = 0;
    uint64_t now = 1;
    int n;

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
    if (sg_q3_codec.create(&session) < 0 || h->stream_create(&stream) < 0 ||
        h->create(&live, connect, (size_t)n, emit, &sent) < 0 ||
        h->create(&late, connect, (size_t)n, emit, &sent) < 0)
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
                (void)h->feed(live, &src, f, now, emit, &sent);
                if (f->kind == SG_FRAME_MESSAGE && f->msg) {
                    const struct sg_frame *g = NULL;
                    struct sg_spect_src dsrc = {stream, true};

                    (void)h->stream_feed(stream, f->sequence, f->msg, f->msg_len, &g);
                    if (g)
                        (void)h->feed(late, &dsrc, g, now, emit, &sent);
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
        } else {
            struct sg_spect_src src = {session, false};

            (void)h->input(kind & 8 ? late : live, kind & 16 ? NULL : &src, now, copy, got, emit,
                           &sent, &req);
            FUZZ_CHECK(req.ask >= SG_SPECT_ASK_NONE && req.ask <= SG_SPECT_ASK_FOLLOW);
            FUZZ_CHECK(memchr(req.arg, 0, sizeof(req.arg)) != NULL || req.ask == SG_SPECT_ASK_NONE);
        }
        free(copy);
    }
done:
    h->destroy(live);
    h->destroy(late);
    h->stream_destroy(stream);
    sg_q3_codec.destroy(session);
    return 0;
}
