/*
 * fuzz_q3_netchan: one Quake 3 session's datagrams through the netchan
 * (protocols/q3/netchan.h: sequences, fragments, protocol-68 XOR,
 * ioquake3-71 checksums, wire detection) and the out-of-band parser
 * (oob.h), as the proxy feeds them.
 *
 * Input:
 *
 *     u8   mode       bits 0-1: 0 cold start (everything from the datagrams),
 *                     1 protocol 68, 2 ioquake3 71, 3 OpenArena 71;
 *                     bit 2: with 2 or 3, let the first datagram decide
 *                     the wire format instead of fixing it
 *     le32 challenge  } modes 1-3: a `connect` with this challenge, qport
 *     le16 qport      } and protocol, and a `connectResponse`, go first
 *     { u8 flags, le16 length, length bytes } ...   datagrams in arrival order;
 *                     flags bit 0: 0 client to server, 1 server to client
 *
 * Properties:
 *  - no datagram makes the netchan read or write out of bounds (each is
 *    copied into a buffer of its own size); what it reports stays within
 *    the frame: message length within MAX_MSGLEN, header within the
 *    datagram;
 *  - an out-of-band packet that parses is rebuilt (sg_q3_oob_write) and
 *    parses again to the same text and fields;
 *  - a whole message, encoded again on a copy of the session
 *    (sg_q3_netchan_encode: XOR with the receiver's view, header, checksum,
 *    fragments), decodes on that copy to the same bytes.  With the XOR
 *    this needs the longs that key it to lie in the unscrambled head of
 *    the message, as they do in every message a game writes; otherwise
 *    the sender and the receiver read different keys, in the game too.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "protocols/error.h"
#include "protocols/q3/msg.h"
#include "protocols/q3/netchan.h"
#include "protocols/q3/oob.h"

#define OOB_CAP (4 * SG_Q3_OOB_MAX_TEXT + 64)

/* The session and frame structs are allocations of their own, so that ASan
 * sees a write past one of them. */
struct ctx {
    struct sg_q3_netchan *nc, *scratch;
    struct sg_q3_frame *f, *g;
    struct sg_q3_oob oob;
    struct sg_q3_datagrams dg;
    uint8_t buf[OOB_CAP];
};

/* Decode one datagram from a buffer of exactly its size. */
static int decode(struct sg_q3_netchan *nc, enum sg_q3_dir dir, const uint8_t *data, size_t len,
                  struct sg_q3_frame *f)
{
    uint8_t *copy = malloc(len ? len : 1);
    int err;

    FUZZ_CHECK(copy != NULL);
    memcpy(copy, data, len);
    err = sg_q3_netchan_decode(nc, dir, copy, len, f);
    free(copy);

    FUZZ_CHECK(err == 0 || (err > SG__E_FIRST && err < SG__E_LAST));
    FUZZ_CHECK(f->dir == dir && f->datagram_len == len);
    FUZZ_CHECK(f->rx >= SG_Q3_RX_NONE && f->rx <= SG_Q3_RX_HEADERS);
    /* a protocol not decoded: every sequenced datagram has its header read, nothing more */
    FUZZ_CHECK((f->rx == SG_Q3_RX_HEADERS) ==
               (nc->wire == SG_Q3_WIRE_HEADERS && !sg_q3_oob_is(data, len)));
    FUZZ_CHECK(f->msg_len <= sizeof(f->msg));
    FUZZ_CHECK(f->rx == SG_Q3_RX_OOB || f->header_len <= len);
    FUZZ_CHECK(f->rx != SG_Q3_RX_MESSAGE || (f->pieces >= 1 && f->sequence > 0));
    return err;
}

/* A parsed out-of-band packet, rebuilt and parsed again. */
static void oob_roundtrip(struct ctx *c, enum sg_q3_dir dir)
{
    const struct sg_q3_oob *a = &c->f->u.oob, *b = &c->oob;
    bool from_client = dir == SG_Q3_C2S;
    int n = sg_q3_oob_write(a, from_client, c->buf, sizeof(c->buf));

    FUZZ_CHECK(n >= 4);
    FUZZ_CHECK(sg_q3_oob_parse(c->buf, (size_t)n, from_client, &c->oob) == 0);
    FUZZ_CHECK(a->kind == b->kind && strcmp(a->command, b->command) == 0);
    FUZZ_CHECK(a->text_len == b->text_len && memcmp(a->text, b->text, a->text_len) == 0);
    FUZZ_CHECK(a->body_offset == b->body_offset);
    FUZZ_CHECK(a->has_challenge == b->has_challenge && a->challenge == b->challenge);
    FUZZ_CHECK(a->has_client_challenge == b->has_client_challenge &&
               a->client_challenge == b->client_challenge);
    FUZZ_CHECK(a->has_protocol == b->has_protocol && a->protocol == b->protocol);
    FUZZ_CHECK(a->has_qport == b->has_qport && a->qport == b->qport);
    FUZZ_CHECK(strcmp(a->game, b->game) == 0 && strcmp(a->userinfo, b->userinfo) == 0);
}

/* Do the longs that key the XOR of this message end before the scrambled part? */
static bool keys_in_head(enum sg_q3_dir dir, const uint8_t *msg, size_t len)
{
    int longs = dir == SG_Q3_S2C ? 1 : 3;
    struct sg_q3_msg m;

    sg_q3_msg_init_read(&m, msg, len);
    for (int i = 0; i < longs; i++)
        sg_q3_msg_read_long(&m);
    return !m.overflowed && m.bit <= (size_t)longs * 32;
}

/* A whole message, encoded again on a copy of the session, and decoded there. */
static void message_roundtrip(struct ctx *c, enum sg_q3_dir dir)
{
    const struct sg_q3_frame *f = c->f;
    int n;

    if (sg_q3_wire_xor(c->nc->wire) && !keys_in_head(dir, f->msg, f->msg_len))
        return;
    memcpy(c->scratch, c->nc, sizeof(*c->scratch));
    n = sg_q3_netchan_encode(c->scratch, dir, f->sequence, f->msg, f->msg_len, &c->dg);
    /* Fragments of sequence 0x7fffffff would carry the out-of-band marker
     * 0xffffffff as their header: the encoder refuses them. */
    if (f->msg_len >= SG_Q3_FRAGMENT_SIZE && (uint32_t)f->sequence == 0x7fffffffu) {
        FUZZ_CHECK(n == SG_E_UNSUPPORTED && c->dg.count == 0);
        return;
    }
    FUZZ_CHECK(n >= 1 && n <= SG_Q3_MAX_FRAGMENTS && n == c->dg.count);

    c->scratch->rx[dir].incoming_sequence = f->sequence - 1;
    c->scratch->rx[dir].fragment_length = 0;
    for (int i = 0; i < n; i++) {
        FUZZ_CHECK(c->dg.len[i] <= SG_Q3_MAX_PACKETLEN);
        decode(c->scratch, dir, c->dg.data[i], c->dg.len[i], c->g);
        FUZZ_CHECK(c->g->rx == (i == n - 1 ? SG_Q3_RX_MESSAGE : SG_Q3_RX_FRAGMENT));
    }
    FUZZ_CHECK(c->g->sequence == f->sequence && c->g->msg_len == f->msg_len);
    FUZZ_CHECK(memcmp(c->g->msg, f->msg, f->msg_len) == 0);
    FUZZ_CHECK(c->g->content_err == f->content_err);
}

static void datagram(struct ctx *c, enum sg_q3_dir dir, const uint8_t *data, size_t len)
{
    int err = decode(c->nc, dir, data, len, c->f);

    if (c->f->rx == SG_Q3_RX_OOB && err == 0)
        oob_roundtrip(c, dir);
    else if (c->f->rx == SG_Q3_RX_MESSAGE)
        message_roundtrip(c, dir);
}

/* Modes 1-3: the handshake a real session starts with. */
static void handshake(struct ctx *c, int mode, int32_t challenge, uint16_t qport)
{
    static const int protocols[4] = {0, 68, 71, 71};
    char text[256];
    int len, n;

    len = snprintf(text, sizeof(text),
                   "connect \"\\challenge\\%d\\qport\\%u\\protocol\\%d\\name\\fuzz\"", challenge,
                   qport, protocols[mode & 3]);
    n = sg_q3_oob_build(text, (size_t)len, true, c->buf, sizeof(c->buf));
    FUZZ_CHECK(n > 0);
    datagram(c, SG_Q3_C2S, c->buf, (size_t)n);
    FUZZ_CHECK(c->f->u.oob.kind == SG_Q3_OOB_CONNECT && c->nc->challenge == challenge);

    len = snprintf(text, sizeof(text), "connectResponse %d", challenge);
    n = sg_q3_oob_build(text, (size_t)len, false, c->buf, sizeof(c->buf));
    FUZZ_CHECK(n > 0);
    datagram(c, SG_Q3_S2C, c->buf, (size_t)n);
    FUZZ_CHECK(c->nc->connected);

    if (mode & 4)
        return;
    if ((mode & 3) == 2)
        c->nc->wire = SG_Q3_WIRE_IOQ3_71;
    else if ((mode & 3) == 3)
        c->nc->wire = SG_Q3_WIRE_OA_71;
    FUZZ_CHECK(c->nc->wire != SG_Q3_WIRE_UNKNOWN);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ctx *c = malloc(sizeof(*c));
    struct fuzz_in in;
    int mode;
    int32_t challenge;
    uint16_t qport;

    FUZZ_CHECK(c != NULL);
    c->nc = malloc(sizeof(*c->nc));
    c->scratch = malloc(sizeof(*c->scratch));
    c->f = malloc(sizeof(*c->f));
    c->g = malloc(sizeof(*c->g));
    FUZZ_CHECK(c->nc && c->scratch && c->f && c->g);
    sg_q3_netchan_init(c->nc);
    fuzz_in_init(&in, data, size);
    mode = fuzz_u8(&in);
    challenge = (int32_t)fuzz_le32(&in);
    qport = fuzz_le16(&in);
    if (mode & 3)
        handshake(c, mode, challenge, qport);

    while (in.left >= 3) {
        enum sg_q3_dir dir = fuzz_u8(&in) & 1 ? SG_Q3_S2C : SG_Q3_C2S;
        size_t len = fuzz_le16(&in);
        const uint8_t *p = fuzz_bytes(&in, len, &len);

        datagram(c, dir, p, len);
    }
    sg_q3_netchan_finish(c->nc);
    free(c->nc);
    free(c->scratch);
    free(c->f);
    free(c->g);
    free(c);
    return 0;
}
