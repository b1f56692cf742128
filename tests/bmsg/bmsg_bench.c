/*
 * Micro-benchmark of the byte-message reader (protocols/bmsg.h), built but
 * not a test.
 *
 * Usage: bmsg_bench [seconds]   (default 3)
 *
 * Builds 4 MB of messages shaped like NetQuake/QuakeWorld server traffic
 * from a fixed seed: entity updates (bits bytes, a short entity number,
 * model/frame bytes, three coordinates with their angles, in each
 * coordinate/angle size), client data (shorts, bytes, a long), prints
 * (strings of 10..60 bytes) and floats (svc_time).  The items are read
 * back the way a field-table walker reads them: one sg_bmsg_read_num per
 * field from a kind list, sg_bmsg_read_string for strings, the overflow
 * flag checked once per message.  Rates are MB/s of message bytes; the
 * best of the repetitions counts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "protocols/bmsg.h"

#define DATA_BYTES (4u << 20)
#define MSG_MAX    1400
#define STRING_OP  0xff /* in the op list: a string, not a number kind */

struct bench {
    uint8_t *data;
    size_t len;
    uint8_t *ops; /* kinds, or STRING_OP */
    size_t nops, cap_ops;
    uint32_t *msg_end; /* end offset of each message */
    uint32_t *msg_ops; /* first op of each message */
    size_t nmsgs;
};

static uint64_t rng_state = 0x5eedbe4c;

static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void op(struct bench *b, struct sg_bmsg_writer *w, int kind)
{
    if (b->nops == b->cap_ops) {
        b->cap_ops = b->cap_ops ? 2 * b->cap_ops : 1 << 16;
        b->ops = realloc(b->ops, b->cap_ops);
        if (!b->ops)
            abort();
    }
    b->ops[b->nops++] = (uint8_t)kind;
    if (kind == STRING_OP) {
        char s[64];
        size_t n = 10 + rnd() % 51;

        for (size_t i = 0; i < n; i++)
            s[i] = (char)(32 + rnd() % 95);
        sg_bmsg_write_string(w, s, n, SG_BMSG_STR_NUL);
    } else {
        sg_bmsg_write_num(w, (enum sg_bmsg_num)kind, rnd() ^ rnd() << 16);
    }
}

/* One message: mostly entity updates, some client data, prints, time. */
static void build_message(struct bench *b, struct sg_bmsg_writer *w, struct sg_bmsg_sizes sz)
{
    op(b, w, SG_BMSG_U8); /* svc_time */
    op(b, w, SG_BMSG_FLOAT);
    if (rnd() % 4 == 0) { /* clientdata */
        op(b, w, SG_BMSG_U8);
        op(b, w, SG_BMSG_S16);
        op(b, w, SG_BMSG_S32);
        for (int i = 0; i < 6; i++)
            op(b, w, SG_BMSG_S8);
        op(b, w, SG_BMSG_S16);
        for (int i = 0; i < 6; i++)
            op(b, w, SG_BMSG_U8);
    }
    if (rnd() % 8 == 0) { /* a print */
        op(b, w, SG_BMSG_U8);
        op(b, w, STRING_OP);
    }
    while (w->len + 40 < MSG_MAX && rnd() % 24) { /* entity updates */
        op(b, w, SG_BMSG_U8);
        op(b, w, SG_BMSG_U8);
        op(b, w, SG_BMSG_S16);
        op(b, w, SG_BMSG_U8);
        op(b, w, SG_BMSG_U8);
        for (int i = 0; i < 3; i++) {
            op(b, w, sz.coord);
            op(b, w, sz.angle);
        }
    }
}

static void build(struct bench *b)
{
    static const struct sg_bmsg_sizes variants[3] = {
        {SG_BMSG_COORD16, SG_BMSG_ANGLE8},
        {SG_BMSG_COORD_FLOAT, SG_BMSG_ANGLE16},
        {SG_BMSG_COORD24, SG_BMSG_ANGLE16},
    };
    size_t cap_msgs = DATA_BYTES / 64;

    b->data = malloc(DATA_BYTES);
    b->msg_end = malloc(cap_msgs * sizeof(*b->msg_end));
    b->msg_ops = malloc(cap_msgs * sizeof(*b->msg_ops));
    if (!b->data || !b->msg_end || !b->msg_ops)
        abort();
    while (b->len + MSG_MAX <= DATA_BYTES && b->nmsgs < cap_msgs) {
        struct sg_bmsg_writer w;

        sg_bmsg_writer_init(&w, b->data + b->len, MSG_MAX);
        b->msg_ops[b->nmsgs] = (uint32_t)b->nops;
        /* mostly the classic sizes, some FTE floats and RMQ 24-bit */
        build_message(b, &w, variants[rnd() % 8 < 6 ? 0 : 1 + rnd() % 2]);
        if (w.overflowed)
            abort();
        b->len += w.len;
        b->msg_end[b->nmsgs++] = (uint32_t)b->len;
    }
}

/* Read every message; returns a checksum so nothing is optimised away. */
static uint64_t read_all(const struct bench *b, size_t *bad)
{
    uint64_t sum = 0;
    size_t start = 0;
    char s[2048];

    for (size_t m = 0; m < b->nmsgs; m++) {
        struct sg_bmsg_reader r;
        size_t o = b->msg_ops[m], o_end = m + 1 < b->nmsgs ? b->msg_ops[m + 1] : b->nops;

        sg_bmsg_reader_init(&r, b->data + start, b->msg_end[m] - start);
        for (; o < o_end; o++) {
            uint32_t raw;

            if (b->ops[o] == STRING_OP) {
                enum sg_bmsg_str_end end;

                sum += sg_bmsg_read_string(&r, s, sizeof(s), 0, &end);
            } else {
                sg_bmsg_read_num(&r, (enum sg_bmsg_num)b->ops[o], &raw);
                sum += raw;
            }
        }
        if (r.overflowed || sg_bmsg_remaining(&r) != 0) /* once per message */
            (*bad)++;
        start = b->msg_end[m];
    }
    return sum;
}

int main(int argc, char **argv)
{
    struct bench b = {0};
    double budget = argc > 1 ? atof(argv[1]) : 3.0, best = 0, t0;
    size_t bad = 0, reps = 0;
    uint64_t sum = 0;

    if (budget <= 0)
        budget = 3.0;
    build(&b);
    printf("bmsg_bench: %zu messages, %.1f MB, %zu fields (%.1f bytes a field)\n", b.nmsgs,
           (double)b.len / 1e6, b.nops, (double)b.len / (double)b.nops);
    t0 = now();
    while (now() - t0 < budget || reps < 3) {
        double t = now(), dt;

        sum += read_all(&b, &bad);
        dt = now() - t;
        if (dt > 0 && (double)b.len / dt / 1e6 > best)
            best = (double)b.len / dt / 1e6;
        reps++;
    }
    printf("read: best %.0f MB/s (%.0f M fields/s) over %zu passes; checksum %llx\n", best,
           best * 1e6 / ((double)b.len / (double)b.nops) / 1e6, reps, (unsigned long long)sum);
    if (bad) {
        printf("bmsg_bench: %zu messages did not read back cleanly\n", bad);
        return 1;
    }
    free(b.data);
    free(b.ops);
    free(b.msg_end);
    free(b.msg_ops);
    return 0;
}
