/*
 * fuzz_q3_message: the Quake 3 server message decoder with its stream
 * state (protocols/q3/svmsg.h sg_q3_parse_server_message, state.h), the
 * encoder (sg_q3_write_server_message), the dump and the recorder's
 * gamestate and snapshot synthesis.
 *
 * Input: messages of one stream, each
 *
 *     le32 sequence   le16 length   length bytes (fewer at the end of the input)
 *
 * all parsed in order with one state (A), so gamestates, configstrings,
 * commands and delta snapshots carry from one message to the next.
 *
 * Properties:
 *  - decoding never reads out of bounds and fails only with the
 *    documented errors;
 *  - round trip: a message that decodes is encoded again, and a mirror
 *    state (B), fed the re-encoded bytes (the original bytes when a
 *    message did not decode), must decode it without error to the same
 *    message, state-derived fields included.  The encoding must be the
 *    input itself, or, when the input used the Huffman NYT code (which
 *    the game decodes as the value 256 added in and no writer emits; see
 *    tests/q3/q3_fuzz.c), canonical: the mirror's decode encodes to it
 *    byte for byte;
 *  - at the end, the gamestate synthesized from A decodes in a fresh state
 *    (or is refused for exceeding MAX_GAMESTATE_CHARS, as in the game);
 *    then A's latest frame, synthesized as a delta from an older frame of
 *    A (sent first without delta) or without delta, decodes in that state
 *    to the same frame.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "protocols/error.h"
#include "protocols/q3/demo.h"
#include "protocols/q3/dump.h"
#include "protocols/q3/state.h"
#include "protocols/q3/svmsg.h"

#define OUT_CAP (2 * SG_Q3_MAX_MSGLEN)

struct ctx {
    struct sg_q3_state *a, *b;
    struct sg_q3_svmsg ma, mb, mc;
    FILE *null;
    uint8_t out[OUT_CAP], again[OUT_CAP];
};

/* The error codes sg_q3_parse_server_message documents. */
static bool parse_error_ok(int err)
{
    return err == SG_E_OVERFLOW || err == SG_E_MALFORMED || err == SG_E_TOOBIG;
}

/* One message through A, then through the mirror B. */
static void one_message(struct ctx *c, int32_t seq, const uint8_t *data, size_t len)
{
    int err = sg_q3_parse_server_message(c->a, seq, data, len, &c->ma);
    int n, errb;

    sg_q3_dump_message(c->null, SG_Q3_DUMP_TEXT, &c->ma, len, err);
    sg_q3_dump_message(c->null, SG_Q3_DUMP_JSON, &c->ma, len, err);
    if (err < 0) {
        FUZZ_CHECK(parse_error_ok(err));
        errb = sg_q3_parse_server_message(c->b, seq, data, len, &c->mb);
        FUZZ_CHECK(errb == err && c->mb.num_ops == c->ma.num_ops);
        return;
    }

    /* decoded: it must encode, and the encoding must decode to the same message */
    n = sg_q3_write_server_message(&c->ma, c->out, sizeof(c->out));
    FUZZ_CHECK(n > 0);
    if (n > SG_Q3_MAX_MSGLEN) {
        /* only a canonicalized NYT input can grow; keep the mirror in step */
        FUZZ_CHECK((size_t)n != len || memcmp(c->out, data, len) != 0);
        FUZZ_CHECK(sg_q3_parse_server_message(c->b, seq, data, len, &c->mb) == 0);
        return;
    }
    errb = sg_q3_parse_server_message(c->b, seq, c->out, (size_t)n, &c->mb);
    FUZZ_CHECK(errb == 0);
    FUZZ_CHECK(fuzz_same_svmsg(&c->ma, &c->mb, true));
    if ((size_t)n == len && memcmp(c->out, data, len) == 0)
        return;

    /* not the input's bytes: then canonical */
    FUZZ_CHECK(sg_q3_write_server_message(&c->mb, c->again, sizeof(c->again)) == n);
    FUZZ_CHECK(memcmp(c->again, c->out, (size_t)n) == 0);
}

/* The same frame in two states? */
static bool same_frame(const struct sg_q3_state *sa, const struct sg_q3_snapshot *x,
                       const struct sg_q3_state *sb, const struct sg_q3_snapshot *y)
{
    if (x->server_time != y->server_time || x->snap_flags != y->snap_flags ||
        x->areamask_len != y->areamask_len ||
        memcmp(x->areamask, y->areamask, x->areamask_len) != 0 ||
        memcmp(&x->ps, &y->ps, sizeof(x->ps)) != 0 || x->num_entities != y->num_entities)
        return false;
    for (int i = 0; i < x->num_entities; i++)
        if (memcmp(sg_q3_state_entity(sa, x, i), sg_q3_state_entity(sb, y, i),
                   sizeof(struct sg_q3_entity)) != 0)
            return false;
    return true;
}

/* The most recent frame before `snap` that a delta could start from, or NULL. */
static const struct sg_q3_snapshot *delta_base(const struct sg_q3_state *st,
                                               const struct sg_q3_snapshot *snap)
{
    for (int k = 1; k < SG_Q3_PACKET_BACKUP; k++) {
        const struct sg_q3_snapshot *s =
            sg_q3_state_snapshot(st, sg_q3_seqadd(snap->message_num, -k));

        if (s && s->message_num != snap->message_num)
            return s;
    }
    return NULL;
}

/*
 * Synthesize snapshot `snap` of A (from `base`, or without delta), encode
 * it, decode it in `f`: `f` must then hold the same frame.  Returns false
 * when the recorder refuses the frame (its entities left A's ring).
 */
static bool synth_snapshot(struct ctx *c, struct sg_q3_state *f, const struct sg_q3_snapshot *snap,
                           const struct sg_q3_snapshot *base)
{
    int n, err;

    sg_q3_svmsg_reset(&c->mc);
    err = sg_q3_record_snapshot(c->a, snap, base, &c->mc);
    FUZZ_CHECK(err == 0 || err == -EINVAL);
    if (err < 0)
        return false;
    c->mc.reliable_ack = c->a->reliable_ack;
    n = sg_q3_write_server_message(&c->mc, c->out, sizeof(c->out));
    FUZZ_CHECK(n > 0);
    if (n > SG_Q3_MAX_MSGLEN)
        return false;
    FUZZ_CHECK(sg_q3_parse_server_message(f, snap->message_num, c->out, (size_t)n, &c->mb) == 0);
    FUZZ_CHECK(sg_q3_state_latest(f) && sg_q3_state_latest(f)->message_num == snap->message_num);
    FUZZ_CHECK(same_frame(c->a, snap, f, sg_q3_state_latest(f)));
    return true;
}

/*
 * What the recorder builds from A, decoded in a fresh state: the
 * gamestate, then A's latest frame, without delta or, when A still has
 * an older frame, as a delta from that one (sent first without delta).
 */
static void synth_check(struct ctx *c)
{
    struct sg_q3_state *f = sg_q3_state_create(68);
    const struct sg_q3_snapshot *snap = sg_q3_state_latest(c->a);
    const struct sg_q3_snapshot *base = snap ? delta_base(c->a, snap) : NULL;
    int32_t seq = base ? base->message_num : snap ? snap->message_num : 2;
    int n, err;

    FUZZ_CHECK(f != NULL);
    sg_q3_svmsg_reset(&c->mc);
    FUZZ_CHECK(sg_q3_record_gamestate(c->a, c->a->server_command_seq, &c->mc) == 0);
    n = sg_q3_write_server_message(&c->mc, c->out, sizeof(c->out));
    FUZZ_CHECK(n > 0 || n == SG_E_OVERFLOW);
    if (n <= 0 || n > SG_Q3_MAX_MSGLEN)
        goto done;
    err = sg_q3_parse_server_message(f, sg_q3_seqadd(seq, -1), c->out, (size_t)n, &c->mb);
    /* over MAX_GAMESTATE_CHARS of configstrings, refused as by the game */
    FUZZ_CHECK(err == 0 || err == SG_E_MALFORMED);
    if (err < 0 || !snap)
        goto done;
    FUZZ_CHECK(f->checksum_feed == c->a->checksum_feed && f->client_num == c->a->client_num);

    if (base && synth_snapshot(c, f, base, NULL))
        synth_snapshot(c, f, snap, base);
    else
        synth_snapshot(c, f, snap, NULL);
done:
    sg_q3_state_destroy(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ctx *c = malloc(sizeof(*c));
    struct fuzz_in in;

    FUZZ_CHECK(c != NULL);
    c->a = sg_q3_state_create(68);
    c->b = sg_q3_state_create(68);
    c->null = fuzz_null_file();
    FUZZ_CHECK(c->a && c->b && c->null);
    sg_q3_svmsg_init(&c->ma);
    sg_q3_svmsg_init(&c->mb);
    sg_q3_svmsg_init(&c->mc);

    fuzz_in_init(&in, data, size);
    while (in.left >= 6) {
        int32_t seq = (int32_t)fuzz_le32(&in);
        size_t len = fuzz_le16(&in);
        const uint8_t *msg = fuzz_bytes(&in, len, &len);
        /* in a buffer of its own size, so that ASan sees a read past its end */
        uint8_t *copy = malloc(len ? len : 1);

        FUZZ_CHECK(copy != NULL);
        memcpy(copy, msg, len);
        one_message(c, seq, copy, len);
        free(copy);
    }
    synth_check(c);

    sg_q3_svmsg_finish(&c->ma);
    sg_q3_svmsg_finish(&c->mb);
    sg_q3_svmsg_finish(&c->mc);
    sg_q3_state_destroy(c->a);
    sg_q3_state_destroy(c->b);
    fclose(c->null);
    free(c);
    return 0;
}
