/*
 * q3_fuzz: robustness of the server-message decoder, encoder, dump and
 * gamestate synthesis on hostile input (run it under ASan/UBSan).
 * Properties: nothing crashes or reads out of bounds; a message that
 * decodes without error re-encodes to exactly its own bytes.
 *   random          random buffers (and random buffers after a real gamestate)
 *   mutate DEMO     every message of a real demo with bit flips, truncations,
 *                   and spliced bytes, fed through one stream state
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/error.h"
#include "protocols/q3/huffman.h"
#include "protocols/q3/demo.h"
#include "protocols/q3/dump.h"
#include "q3_util.h"

static uint32_t rng = 0x9e3779b9u;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

struct fuzz {
    struct sg_q3_state *st;
    struct sg_q3_svmsg msg;
    FILE *null;
    uint8_t out[SG_Q3_MAX_MSGLEN];
    uint64_t ok, failed, canonicalized;
};

/* Same bytes behind two references? */
static bool same_bytes(const struct sg_q3_svmsg *a, struct sg_q3_bytes ra,
                       const struct sg_q3_svmsg *b, struct sg_q3_bytes rb)
{
    return ra.len == rb.len && ra.cut == rb.cut &&
           memcmp(sg_q3_svmsg_bytes(a, ra), sg_q3_svmsg_bytes(b, rb), ra.len) == 0;
}

/* Same snapshot on the wire (fields the stream state does not decide). */
static bool same_snap(const struct sg_q3_svmsg *a, const struct sg_q3_snap *x,
                      const struct sg_q3_svmsg *b, const struct sg_q3_snap *y)
{
    if (x->server_time != y->server_time || x->delta_num != y->delta_num ||
        x->snap_flags != y->snap_flags || x->areamask_len != y->areamask_len ||
        memcmp(x->areamask, y->areamask, x->areamask_len) != 0 ||
        memcmp(&x->ps, &y->ps, sizeof(x->ps)) != 0 || x->num_ents != y->num_ents)
        return false;
    for (uint32_t i = 0; i < x->num_ents; i++)
        if (memcmp(&a->ents[x->first_ent + i], &b->ents[y->first_ent + i], sizeof(a->ents[0])))
            return false;
    return true;
}

/* Same gamestate items. */
static bool same_items(const struct sg_q3_svmsg *a, const struct sg_q3_op *x,
                       const struct sg_q3_svmsg *b, const struct sg_q3_op *y)
{
    if (x->u.gamestate.command_seq != y->u.gamestate.command_seq ||
        x->u.gamestate.client_num != y->u.gamestate.client_num ||
        x->u.gamestate.checksum_feed != y->u.gamestate.checksum_feed ||
        x->u.gamestate.num_items != y->u.gamestate.num_items)
        return false;
    for (uint32_t i = 0; i < x->u.gamestate.num_items; i++) {
        const struct sg_q3_gs_item *p = &a->items[x->u.gamestate.first_item + i];
        const struct sg_q3_gs_item *q = &b->items[y->u.gamestate.first_item + i];

        if (p->op != q->op || p->index != q->index)
            return false;
        if (p->op == SG_Q3_SVC_CONFIGSTRING
                ? !same_bytes(a, p->text, b, q->text)
                : memcmp(&a->ents[p->ent], &b->ents[q->ent], sizeof(a->ents[0])) != 0)
            return false;
    }
    return true;
}

/* Two decoded messages say the same thing on the wire. */
static bool same_message(const struct sg_q3_svmsg *a, const struct sg_q3_svmsg *b)
{
    if (a->reliable_ack != b->reliable_ack || a->num_ops != b->num_ops)
        return false;
    for (uint32_t i = 0; i < a->num_ops; i++) {
        const struct sg_q3_op *x = &a->ops[i], *y = &b->ops[i];

        if (x->type != y->type)
            return false;
        switch (x->type) {
        case SG_Q3_SVC_SERVERCOMMAND:
            if (x->u.cmd.sequence != y->u.cmd.sequence ||
                !same_bytes(a, x->u.cmd.text, b, y->u.cmd.text))
                return false;
            break;
        case SG_Q3_SVC_SNAPSHOT:
            if (!same_snap(a, &a->snaps[x->u.snap], b, &b->snaps[y->u.snap]))
                return false;
            break;
        case SG_Q3_SVC_GAMESTATE:
            if (!same_items(a, x, b, y))
                return false;
            break;
        case SG_Q3_SVC_DOWNLOAD:
            if (x->u.download.block != y->u.download.block ||
                x->u.download.has_size != y->u.download.has_size ||
                x->u.download.size != y->u.download.size ||
                !same_bytes(a, x->u.download.error, b, y->u.download.error) ||
                !same_bytes(a, x->u.download.data, b, y->u.download.data))
                return false;
            break;
        case SG_Q3_SVC_VOIP_SPEEX:
        case SG_Q3_SVC_VOIP_OPUS:
            if (x->u.voip.sender != y->u.voip.sender || x->u.voip.sequence != y->u.voip.sequence ||
                x->u.voip.size != y->u.voip.size || x->u.voip.flags != y->u.voip.flags ||
                x->u.voip.frames != y->u.voip.frames ||
                x->u.voip.generation != y->u.voip.generation ||
                !same_bytes(a, x->u.voip.data, b, y->u.voip.data))
                return false;
            break;
        default:
            break;
        }
    }
    return true;
}

/*
 * The output differs from the input: acceptable only when the input used
 * the Huffman NYT code, which the game decodes (as the value 256 added in)
 * but no writer ever emits.  Then the output must be canonical: it decodes
 * to the same message and encodes to itself.
 */
static int check_canonical(struct fuzz *z, int32_t seq, int n)
{
    static uint8_t again[SG_Q3_MAX_MSGLEN];
    struct sg_q3_state *scratch = sg_q3_state_create(68);
    struct sg_q3_svmsg back;
    int err, m;

    CHECK(scratch != NULL && n > 0);
    sg_q3_svmsg_init(&back);
    err = sg_q3_parse_server_message(scratch, seq, z->out, (size_t)n, &back);
    CHECK(err == 0 || err == SG_E_MALFORMED); /* a gamestate needs no state; snapshots decode */
    if (err == 0) {
        CHECK(same_message(&z->msg, &back));
        m = sg_q3_write_server_message(&back, again, sizeof(again));
        CHECK(m == n && memcmp(again, z->out, (size_t)n) == 0);
    }
    sg_q3_svmsg_finish(&back);
    sg_q3_state_destroy(scratch);
    z->canonicalized++;
    return 0;
}

/* Parse one buffer; if it decodes, it must encode back to itself (or canonically). */
static int try_one(struct fuzz *z, int32_t seq, const uint8_t *data, size_t len)
{
    int err = sg_q3_parse_server_message(z->st, seq, data, len, &z->msg);
    int n;

    sg_q3_dump_message(z->null, SG_Q3_DUMP_TEXT, &z->msg, len, err);
    sg_q3_dump_message(z->null, SG_Q3_DUMP_JSON, &z->msg, len, err);
    if (err < 0) {
        CHECK(err != -ENOMEM);
        z->failed++;
        return 0;
    }
    z->ok++;
    n = sg_q3_write_server_message(&z->msg, z->out, sizeof(z->out));
    if (n == (int)len && memcmp(z->out, data, len) == 0)
        return 0;
    return check_canonical(z, seq, n);
}

/* A gamestate synthesized from whatever the state holds must decode. */
static int synth_check(struct fuzz *z)
{
    struct sg_q3_svmsg gs;
    struct sg_q3_state *fresh = sg_q3_state_create(68);
    int n;

    CHECK(fresh != NULL);
    sg_q3_svmsg_init(&gs);
    CHECK(sg_q3_record_gamestate(z->st, z->st->server_command_seq, &gs) == 0);
    n = sg_q3_write_server_message(&gs, z->out, sizeof(z->out));
    if (n > 0) {
        struct sg_q3_svmsg back;

        sg_q3_svmsg_init(&back);
        /* a gamestate over MAX_GAMESTATE_CHARS is refused, as by the game */
        n = sg_q3_parse_server_message(fresh, 1, z->out, (size_t)n, &back);
        CHECK(n == 0 || n == SG_E_MALFORMED);
        sg_q3_svmsg_finish(&back);
    }
    sg_q3_svmsg_finish(&gs);
    sg_q3_state_destroy(fresh);
    return 0;
}

static int fuzz_init(struct fuzz *z)
{
    memset(z, 0, sizeof(*z));
    z->st = sg_q3_state_create(68);
    z->null = fopen("/dev/null", "w");
    sg_q3_svmsg_init(&z->msg);
    return z->st && z->null ? 0 : 1;
}

static void fuzz_finish(struct fuzz *z, const char *name)
{
    printf("%s: %llu decoded (%llu of them used the NYT code and came back canonical), "
           "%llu rejected\n",
           name, (unsigned long long)z->ok, (unsigned long long)z->canonicalized,
           (unsigned long long)z->failed);
    sg_q3_svmsg_finish(&z->msg);
    sg_q3_state_destroy(z->st);
    fclose(z->null);
}

/* Random buffers, first with an empty state, then after a real gamestate. */
static int random_input(void)
{
    static uint8_t buf[SG_Q3_MAX_MSGLEN + 16];
    char path[4096];
    struct q3_demo d;
    struct fuzz z;

    CHECK(fuzz_init(&z) == 0);
    CHECK(q3_testdata("q3/demos/cpma_one_frag.dm_68", path, sizeof(path)));
    CHECK(q3_demo_load(path, &d) == 0 && d.count > 2);
    for (int iter = 0; iter < 40000; iter++) {
        size_t len = iter % 1000 == 999 ? SG_Q3_MAX_MSGLEN + 1 - rnd() % 4 : rnd() % 300;

        if (iter == 20000)
            CHECK(try_one(&z, d.msgs[0].seq, d.msgs[0].data, d.msgs[0].len) == 0);
        for (size_t i = 0; i < len; i++)
            buf[i] = (uint8_t)rnd();
        /* bias towards plausible starts: small ack, a known op */
        if (len > 5 && rnd() % 2) {
            buf[0] = buf[1] = buf[2] = buf[3] = 0;
            buf[4] = (uint8_t)(rnd() % 12);
        }
        CHECK(try_one(&z, (int32_t)(d.msgs[0].seq + 1 + iter % 40), buf, len) == 0);
    }
    CHECK(synth_check(&z) == 0);
    fuzz_finish(&z, "random");
    q3_demo_free(&d);
    return 0;
}

/* One mutated copy of `m` into buf; returns its length. */
static size_t mutate(const struct q3_demo_msg *m, uint8_t *buf, size_t cap)
{
    size_t len = m->len;

    memcpy(buf, m->data, len);
    switch (rnd() % 4) {
    case 0: /* a few bit flips */
        for (int k = 1 + rnd() % 4; k > 0 && len; k--)
            buf[rnd() % len] ^= (uint8_t)(1u << (rnd() % 8));
        break;
    case 1: /* truncation */
        len = len ? rnd() % len : 0;
        break;
    case 2: /* a flip in the last bytes, where the padding is */
        if (len)
            buf[len - 1 - rnd() % (len < 3 ? len : 3)] ^= (uint8_t)(1u << (rnd() % 8));
        break;
    default: /* spliced: a slice copied over another place, or extended */
        if (len > 4) {
            size_t a = rnd() % len, b = rnd() % len, n = 1 + rnd() % 16;
            if (a + n > len)
                n = len - a;
            if (b + n > cap)
                n = cap - b;
            memmove(buf + b, buf + a, n);
            if (b + n > len)
                len = b + n;
        }
        break;
    }
    return len;
}

/* Every message of a demo, mutated several times, through one state. */
static int mutate_demo(const char *rel)
{
    static uint8_t buf[SG_Q3_MAX_MSGLEN];
    char path[4096];
    struct q3_demo d;
    struct fuzz z;

    CHECK(fuzz_init(&z) == 0);
    CHECK(q3_testdata(rel, path, sizeof(path)));
    CHECK(q3_demo_load(path, &d) == 0 && d.count > 0);
    for (size_t i = 0; i < d.count; i++) {
        const struct q3_demo_msg *m = &d.msgs[i];
        int rounds = i == 0 ? 200 : 12;

        for (int k = 0; k < rounds; k++) {
            size_t len = mutate(m, buf, sizeof(buf));
            CHECK(try_one(&z, m->seq, buf, len) == 0);
            /* put the good gamestate back so later messages keep decoding */
            if (i == 0)
                CHECK(try_one(&z, m->seq, m->data, m->len) == 0);
        }
        CHECK(try_one(&z, m->seq, m->data, m->len) == 0);
        if (i % 50 == 0)
            CHECK(synth_check(&z) == 0);
    }
    fuzz_finish(&z, rel);
    q3_demo_free(&d);
    return 0;
}

/* Append `n` bits of `code` (first bit in the LSB) at *bit. */
static void put_code(uint8_t *buf, size_t *bit, uint32_t code, int n)
{
    for (int i = 0; i < n; i++, (*bit)++)
        if ((code >> i) & 1)
            buf[*bit >> 3] |= (uint8_t)(1u << (*bit & 7));
}

/*
 * Why a decodable message may not come back bit for bit: the fixed tree
 * keeps a code for NYT that no writer emits, and the game's reader turns
 * it into the value 256 added at that byte.  A hand-made message whose
 * reliableAcknowledge starts with NYT decodes (ack = 0x100 + ...), and the
 * encoder writes the canonical codes for that value: different bytes, the
 * same message.
 */
static int nyt(void)
{
    const struct sg_q3_huff *h = sg_q3_huff_fixed();
    static uint8_t buf[64], out[64];
    struct sg_q3_state *st = sg_q3_state_create(68);
    struct sg_q3_svmsg msg;
    static const int syms[] = {SG_Q3_HUFF_NYT, 0x12, 0x00, 0x00, SG_Q3_SVC_EOF};
    size_t bit = 0, len;
    uint32_t code;
    int n;

    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        n = sg_q3_huff_code(h, syms[i], &code);
        CHECK(n > 0);
        put_code(buf, &bit, code, n);
    }
    len = (bit >> 3) + 1;
    sg_q3_svmsg_init(&msg);
    CHECK(sg_q3_parse_server_message(st, 1, buf, len, &msg) == 0);
    CHECK(msg.reliable_ack == 0x1200 + 0x100); /* NYT adds 256: into the next byte */
    CHECK(msg.num_ops == 0);
    n = sg_q3_write_server_message(&msg, out, sizeof(out));
    CHECK(n > 0 && !((size_t)n == len && memcmp(out, buf, len) == 0));
    {
        struct fuzz z;

        CHECK(fuzz_init(&z) == 0);
        CHECK(sg_q3_parse_server_message(z.st, 1, buf, len, &z.msg) == 0);
        z.ok++;
        memcpy(z.out, out, (size_t)n);
        CHECK(check_canonical(&z, 1, n) == 0);
        fuzz_finish(&z, "nyt");
    }
    sg_q3_svmsg_finish(&msg);
    sg_q3_state_destroy(st);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "nyt") == 0)
        return nyt();
    if (argc > 1 && strcmp(argv[1], "random") == 0)
        return random_input();
    if (argc > 2 && strcmp(argv[1], "mutate") == 0)
        return mutate_demo(argv[2]);
    fprintf(stderr, "unknown case\n");
    return 1;
}
