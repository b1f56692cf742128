/*
 * fuzz_q3_client: the Quake 3 client message decoder and encoder
 * (protocols/q3/clmsg.h sg_q3_clmsg_decode / sg_q3_clmsg_encode).
 *
 * Input:
 *
 *     le32 checksumFeed
 *     u8   N                      server commands the sender knows
 *     N x { le32 sequence, u8 length, length bytes }
 *     ...  the message (Huffman coded, XOR removed), to the end of the input
 *
 * Properties:
 *  - decoding never reads out of bounds (the message is copied into a
 *    buffer of its own size) and fails only with the documented errors;
 *    what it fills stays within its arrays;
 *  - a message that decodes encodes with the same key to its own bytes,
 *    or, when the input used the Huffman NYT code, to a canonical form
 *    that decodes to the same message and encodes to itself;
 *  - encoded with another checksumFeed and decoded with it, the moves
 *    come back the same (the key only scrambles the wire).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "protocols/error.h"
#include "protocols/q3/clmsg.h"

#define OUT_CAP (2 * SG_Q3_MAX_MSGLEN + 64)

/* The messages are allocations of their own, so that ASan sees a write past one. */
struct ctx {
    struct sg_q3_reliable_ring ring;
    struct sg_q3_clmsg *a, *b;
    uint8_t out[OUT_CAP], again[OUT_CAP];
};

static bool same_usercmd(const struct sg_q3_usercmd *x, const struct sg_q3_usercmd *y)
{
    return x->server_time == y->server_time && x->angles[0] == y->angles[0] &&
           x->angles[1] == y->angles[1] && x->angles[2] == y->angles[2] &&
           x->buttons == y->buttons && x->weapon == y->weapon && x->forwardmove == y->forwardmove &&
           x->rightmove == y->rightmove && x->upmove == y->upmove;
}

static bool same_wire(const struct sg_q3_usercmd_wire *x, const struct sg_q3_usercmd_wire *y)
{
    return x->time_delta == y->time_delta && x->time == y->time && x->changed == y->changed &&
           x->sent == y->sent && memcmp(x->value, y->value, sizeof(x->value)) == 0;
}

/*
 * Same message, `y` decoded from an encoding of `x`.  With `with_key` it
 * was encoded with the key `x` was read with.  The tail is the raw bits
 * after the last op, padding included: when the bits before it changed
 * length (another key, or canonical codes for NYT), `y`'s tail is `x`'s
 * followed by up to 15 zero bits of new padding.
 */
static bool same_clmsg(const struct sg_q3_clmsg *x, const struct sg_q3_clmsg *y, bool with_key)
{
    if (x->server_id != y->server_id || x->message_ack != y->message_ack ||
        x->reliable_ack != y->reliable_ack || x->num_commands != y->num_commands ||
        x->move_op != y->move_op || x->num_cmds != y->num_cmds || x->eof != y->eof ||
        x->stop_op != y->stop_op || (with_key && x->key != y->key))
        return false;
    if (y->tail_bits < x->tail_bits || y->tail_bits - x->tail_bits > 15)
        return false;
    for (size_t i = x->tail_bits; i < y->tail_bits; i++)
        if ((y->tail[i >> 3] >> (i & 7)) & 1)
            return false;
    for (int i = 0; i < x->num_commands; i++)
        if (x->commands[i].sequence != y->commands[i].sequence ||
            x->commands[i].len != y->commands[i].len ||
            memcmp(x->commands[i].text, y->commands[i].text, x->commands[i].len) != 0)
            return false;
    for (int i = 0; i < x->num_cmds; i++)
        if (!same_usercmd(&x->cmds[i], &y->cmds[i]) || !same_wire(&x->wire[i], &y->wire[i]))
            return false;
    for (size_t i = 0; i < x->tail_bits; i++)
        if (((x->tail[i >> 3] ^ y->tail[i >> 3]) >> (i & 7)) & 1)
            return false;
    return true;
}

/* What a decode filled must lie within its arrays, whatever it returned. */
static void check_bounds(const struct sg_q3_clmsg *cm, size_t len)
{
    FUZZ_CHECK(cm->num_commands >= 0 && cm->num_commands <= SG_Q3_MAX_RELIABLE_COMMANDS);
    FUZZ_CHECK(cm->num_cmds >= 0 && cm->num_cmds <= SG_Q3_MAX_PACKET_USERCMDS);
    FUZZ_CHECK(cm->tail_bits <= len * 8 && cm->tail_bits <= sizeof(cm->tail) * 8);
    for (int i = 0; i < cm->num_commands; i++)
        FUZZ_CHECK(cm->commands[i].len < SG_Q3_MAX_STRING_CHARS &&
                   strlen(cm->commands[i].text) == cm->commands[i].len);
}

static void fuzz_message(struct ctx *c, int32_t feed, const uint8_t *msg, size_t len)
{
    int err = sg_q3_clmsg_decode(msg, len, feed, &c->ring, c->a);
    int n, m;

    check_bounds(c->a, len);
    FUZZ_CHECK(err == 0 || err == SG_E_OVERFLOW || err == SG_E_MALFORMED || err == SG_E_TOOBIG);
    if (err < 0)
        return;

    /* the same key: its own bytes, or a canonical form */
    n = sg_q3_clmsg_encode(c->a, feed, &c->ring, c->out, sizeof(c->out));
    FUZZ_CHECK(n > 0);
    if ((size_t)n != len || memcmp(c->out, msg, len) != 0) {
        FUZZ_CHECK(sg_q3_clmsg_decode(c->out, (size_t)n, feed, &c->ring, c->b) == 0);
        FUZZ_CHECK(same_clmsg(c->a, c->b, true));
        m = sg_q3_clmsg_encode(c->b, feed, &c->ring, c->again, sizeof(c->again));
        FUZZ_CHECK(m == n && memcmp(c->again, c->out, (size_t)n) == 0);
    }

    /* another key: other bytes, the same moves */
    feed ^= 0x5a5a5a5a;
    n = sg_q3_clmsg_encode(c->a, feed, &c->ring, c->out, sizeof(c->out));
    FUZZ_CHECK(n > 0);
    FUZZ_CHECK(sg_q3_clmsg_decode(c->out, (size_t)n, feed, &c->ring, c->b) == 0);
    FUZZ_CHECK(same_clmsg(c->a, c->b, false));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ctx *c = calloc(1, sizeof(*c));
    struct fuzz_in in;
    int32_t feed;
    int count;
    size_t len;
    const uint8_t *msg;
    uint8_t *copy;

    FUZZ_CHECK(c != NULL);
    c->a = malloc(sizeof(*c->a));
    c->b = malloc(sizeof(*c->b));
    FUZZ_CHECK(c->a && c->b);
    fuzz_in_init(&in, data, size);
    feed = (int32_t)fuzz_le32(&in);
    count = fuzz_u8(&in);
    for (int i = 0; i < count && in.left > 0; i++) {
        char text[256];
        int32_t seq = (int32_t)fuzz_le32(&in);
        size_t n = fuzz_u8(&in);
        const uint8_t *p = fuzz_bytes(&in, n, &n);

        memcpy(text, p, n);
        text[n] = '\0';
        sg_q3_ring_store(&c->ring, seq, text);
    }
    msg = fuzz_bytes(&in, in.left, &len);
    copy = malloc(len ? len : 1);
    FUZZ_CHECK(copy != NULL);
    memcpy(copy, msg, len);
    fuzz_message(c, feed, copy, len);
    free(copy);
    sg_q3_ring_finish(&c->ring);
    free(c->a);
    free(c->b);
    free(c);
    return 0;
}
