/*
 * Micro-benchmark of the Quake 3 fixed Huffman coder (built, not a test).
 *
 * Usage: q3_huffman_bench [megabytes]
 *
 * The input is random bytes drawn with probability 2^-len(code), the
 * distribution the fixed tree is optimal for and close to real message
 * content.  Prints MB/s of uncompressed bytes for the bulk encoder and
 * decoder, for one-symbol-at-a-time decoding, and for the message reader;
 * each figure is the best of REPS runs, to keep other load out of it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "protocols/q3/huffman.h"
#include "protocols/q3/msg.h"

#define CHUNK 16000 /* about one message */
#define REPS  7

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* A byte drawn with probability 2^-len(code): walk random bits down the codes. */
static uint8_t draw(const uint32_t *code, const int *len)
{
    for (;;) {
        uint32_t r = (uint32_t)rng();
        int best = -1;

        for (int s = 0; s < 256; s++) {
            uint32_t mask = (uint32_t)((1ull << len[s]) - 1);

            if ((r & mask) == code[s]) {
                best = s;
                break;
            }
        }
        if (best >= 0)
            return (uint8_t)best;
        /* the NYT code was drawn: draw again */
    }
}

static void report(const char *what, size_t bytes, double secs)
{
    printf("%-28s %8.1f MB/s\n", what, (double)bytes / secs / 1e6);
}

int main(int argc, char **argv)
{
    const struct sg_q3_huff *h = sg_q3_huff_fixed();
    size_t total = (size_t)(argc > 1 ? atoi(argv[1]) : 16) << 20;
    size_t chunks = total / CHUNK;
    double best[4] = {1e9, 1e9, 1e9, 1e9};
    uint32_t code[256];
    int len[256];
    uint8_t *plain, *coded, *back;
    size_t *bits;
    volatile unsigned sink = 0;

    if (chunks == 0)
        chunks = 1;
    for (int s = 0; s < 256; s++)
        len[s] = sg_q3_huff_code(h, s, &code[s]);
    plain = malloc(CHUNK);
    coded = calloc(chunks, CHUNK);
    back = malloc(CHUNK);
    bits = calloc(chunks, sizeof(*bits));
    if (!plain || !coded || !back || !bits)
        return 1;
    for (size_t i = 0; i < CHUNK; i++)
        plain[i] = draw(code, len);

    for (int rep = 0; rep < REPS; rep++) {
        double t;

        /* Bulk encode: one message-sized chunk per call. */
        t = now();
        for (size_t c = 0; c < chunks; c++) {
            size_t bit = 0;

            if (sg_q3_huff_encode(h, coded + c * CHUNK, CHUNK, &bit, plain, CHUNK) < 0)
                return 1;
            bits[c] = bit;
        }
        t = now() - t;
        best[0] = t < best[0] ? t : best[0];

        /* Bulk decode. */
        t = now();
        for (size_t c = 0; c < chunks; c++) {
            size_t bit = 0;

            if (sg_q3_huff_decode(h, coded + c * CHUNK, CHUNK, &bit, back, CHUNK) < 0)
                return 1;
            sink += back[c % CHUNK];
        }
        t = now() - t;
        best[1] = t < best[1] ? t : best[1];
        if (memcmp(back, plain, CHUNK) != 0) {
            fputs("decode mismatch\n", stderr);
            return 1;
        }

        /* One symbol per call, as a parser reading bytes would. */
        t = now();
        for (size_t c = 0; c < chunks; c++) {
            size_t bit = 0;
            uint8_t sym;

            for (size_t i = 0; i < CHUNK; i++) {
                if (sg_q3_huff_get_sym(h, coded + c * CHUNK, CHUNK, &bit, &sym) < 0)
                    return 1;
                sink += sym;
            }
        }
        t = now() - t;
        best[2] = t < best[2] ? t : best[2];

        /* The message reader: read_byte, with all its bookkeeping. */
        t = now();
        for (size_t c = 0; c < chunks; c++) {
            struct sg_q3_msg m;

            sg_q3_msg_init_read(&m, coded + c * CHUNK, CHUNK);
            for (size_t i = 0; i < CHUNK; i++)
                sink += (unsigned)sg_q3_msg_read_byte(&m);
            if (m.overflowed)
                return 1;
        }
        t = now() - t;
        best[3] = t < best[3] ? t : best[3];
    }

    printf("%-28s %8.3f bits/byte\n", "compressed size", (double)bits[0] / CHUNK);
    report("encode (bulk)", chunks * CHUNK, best[0]);
    report("decode (bulk)", chunks * CHUNK, best[1]);
    report("decode (get_sym)", chunks * CHUNK, best[2]);
    report("decode (msg_read_byte)", chunks * CHUNK, best[3]);

    (void)sink;
    free(plain);
    free(coded);
    free(back);
    free(bits);
    return 0;
}
