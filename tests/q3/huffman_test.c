/*
 * Tests of the Quake 3 Huffman coders (protocols/q3/huffman.c).
 *
 * Usage: q3_huffman_test CASE   (one meson test per case)
 *
 * The pinned codes were checked against real traffic: every demo in the
 * test data decodes with them, and the connect packets of the captured
 * sessions decompress and recompress to the same bytes.  Cases that need
 * the test data read it from $SG_TESTDATA and fail when it is missing.
 */
#include <pcap/pcap.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/error.h"
#include "tests/unit.h"
#include "protocols/q3/huffman.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint32_t rng(void)
{
    return unit_rng(&rng_state);
}

#define exact_copy unit_exact_copy

/* ------------------------------------------------------------------ */
/* Fixed coder                                                          */

/* Every byte value, at every bit alignment, alone and between others. */
static void test_fixed_roundtrip(void)
{
    const struct sg_q3_huff *h = sg_q3_huff_fixed();

    CHECK(h == sg_q3_huff_fixed());
    for (int shift = 0; shift < 8; shift++) {
        uint8_t buf[4096] = {0};
        size_t bit = (size_t)shift, rbit = (size_t)shift;

        for (int s = 0; s < 256; s++)
            CHECK_EQ(sg_q3_huff_put_sym(h, buf, sizeof(buf), &bit, (uint8_t)s), 0);
        for (int s = 0; s < 256; s++) {
            uint8_t got = 0;

            CHECK_EQ(sg_q3_huff_get_sym(h, buf, sizeof(buf), &rbit, &got), 0);
            CHECK_EQ(got, s);
        }
        CHECK_EQ(rbit, bit);
    }

    /* Each symbol alone in a minimal buffer (ASan checks the bounds). */
    for (int s = 0; s < 256; s++) {
        uint32_t code;
        int len = sg_q3_huff_code(h, s, &code);
        size_t bytes = ((size_t)len + 7) / 8, bit = 0;
        uint8_t *buf = calloc(bytes, 1);
        uint8_t got = 0;

        CHECK(len > 0);
        CHECK_EQ(sg_q3_huff_put_sym(h, buf, bytes, &bit, (uint8_t)s), 0);
        CHECK_EQ(bit, len);
        bit = 0;
        CHECK_EQ(sg_q3_huff_get_sym(h, buf, bytes, &bit, &got), 0);
        CHECK_EQ(got, s);
        CHECK_EQ(bit, len);
        free(buf);
    }
}

/* Codes of the game's fixed tree, checked against real traffic. */
static void test_fixed_codes(void)
{
    static const struct {
        int sym, len;
        uint32_t code; /* first bit sent in bit 0 */
    } known[] = {
        {0, 2, 0x2},    {1, 5, 0x1b},   {2, 7, 0x48},   {3, 7, 0x6c},
        {' ', 6, 0x37}, {'a', 8, 0x3c}, {255, 6, 0x24}, {SG_Q3_HUFF_NYT, 11, 0x100},
    };
    const struct sg_q3_huff *h = sg_q3_huff_fixed();
    uint64_t kraft = 0;
    int longest = 0;

    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        uint32_t code = 0;

        CHECK_EQ(sg_q3_huff_code(h, known[i].sym, &code), known[i].len);
        CHECK_EQ(code, known[i].code);
    }

    /* A complete prefix code: Kraft sum exactly 1, longest code 11 bits. */
    for (int s = 0; s <= SG_Q3_HUFF_NYT; s++) {
        int len = sg_q3_huff_code(h, s, NULL);

        CHECK(len >= 1 && len <= 32);
        if (len > longest)
            longest = len;
        kraft += (uint64_t)1 << (32 - len);
    }
    CHECK_EQ(kraft, (uint64_t)1 << 32);
    CHECK_EQ(longest, 11);
    CHECK_EQ(sg_q3_huff_code(h, -1, NULL), SG_E_MALFORMED);
    CHECK_EQ(sg_q3_huff_code(h, 257, NULL), SG_E_MALFORMED);

    /* Each code, padded with any bits, decodes to its own symbol. */
    for (int s = 0; s <= SG_Q3_HUFF_NYT; s++) {
        uint32_t code;
        int len = sg_q3_huff_code(h, s, &code);

        for (int k = 0; k < 16; k++) {
            uint32_t v = code | (rng() << len);
            uint8_t buf[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
                              (uint8_t)(v >> 24)};
            size_t bit = 0;

            CHECK_EQ(sg_q3_huff_decode_sym(h, buf, sizeof(buf), &bit), s);
            CHECK_EQ(bit, len);
        }
    }
}

/* Codes that run past the end are rejected without reading past it. */
static void test_fixed_bounds(void)
{
    const struct sg_q3_huff *h = sg_q3_huff_fixed();
    uint32_t code;
    int len = sg_q3_huff_code(h, 'a', &code); /* 8 bits */
    uint8_t full[2] = {0};
    size_t bit = 3;
    uint8_t *one, sym = 0x55;

    /* 'a' at bit 3 needs bits 3..10: two bytes, not one. */
    CHECK_EQ(len, 8);
    CHECK_EQ(sg_q3_huff_put_sym(h, full, 2, &bit, 'a'), 0);
    CHECK_EQ(bit, 11);
    one = exact_copy(full, 1);
    bit = 3;
    CHECK_EQ(sg_q3_huff_get_sym(h, one, 1, &bit, &sym), SG_E_HUFFMAN);
    CHECK_EQ(bit, 3);
    CHECK_EQ(sym, 0x55);
    CHECK_EQ(sg_q3_huff_decode_sym(h, one, 1, &bit), SG_E_HUFFMAN);
    CHECK_EQ(bit, 3);
    bit = 3;
    CHECK_EQ(sg_q3_huff_get_sym(h, full, 2, &bit, &sym), 0);
    CHECK_EQ(sym, 'a');

    /* The writer: the same code does not fit one byte from bit 3. */
    bit = 3;
    one[0] = 0x07;
    CHECK_EQ(sg_q3_huff_put_sym(h, one, 1, &bit, 'a'), SG_E_OVERFLOW);
    CHECK_EQ(bit, 3);
    CHECK_EQ(one[0], 0x07);
    free(one);

    /* Empty buffers, and positions past the end. */
    bit = 0;
    CHECK_EQ(sg_q3_huff_get_sym(h, full, 0, &bit, &sym), SG_E_HUFFMAN);
    bit = 100;
    CHECK_EQ(sg_q3_huff_get_sym(h, full, 2, &bit, &sym), SG_E_HUFFMAN);
    CHECK_EQ(sg_q3_huff_put_sym(h, full, 2, &bit, 0), SG_E_OVERFLOW);

    /* put_sym sets exactly the code's bits and keeps the others. */
    {
        uint8_t ones[16];
        size_t b = 5;

        memset(ones, 0xff, sizeof(ones));
        CHECK_EQ(sg_q3_huff_put_sym(h, ones, sizeof(ones), &b, 0), 0); /* code 10 */
        CHECK_EQ(ones[0], 0xff & ~(1u << 5));
        for (size_t i = 1; i < sizeof(ones); i++)
            CHECK_EQ(ones[i], 0xff);
    }
}

/* NYT is in the fixed tree; get_sym refuses it, decode_sym reports it. */
static void test_fixed_nyt(void)
{
    const struct sg_q3_huff *h = sg_q3_huff_fixed();
    uint32_t code;
    int len = sg_q3_huff_code(h, SG_Q3_HUFF_NYT, &code);
    uint8_t buf[2] = {(uint8_t)code, (uint8_t)(code >> 8)};
    size_t bit = 0;
    uint8_t sym;

    CHECK_EQ(sg_q3_huff_get_sym(h, buf, 2, &bit, &sym), SG_E_HUFFMAN);
    CHECK_EQ(bit, 0);
    CHECK_EQ(sg_q3_huff_decode_sym(h, buf, 2, &bit), SG_Q3_HUFF_NYT);
    CHECK_EQ(bit, len);
    bit = 0;
    CHECK_EQ(sg_q3_huff_decode(h, buf, 2, &bit, &sym, 1), SG_E_HUFFMAN);
    CHECK_EQ(bit, 0);
}

/* The bulk coder against the one-symbol coder, many lengths and offsets. */
static void test_fixed_bulk(void)
{
    const struct sg_q3_huff *h = sg_q3_huff_fixed();
    static uint8_t plain[5000], a[8000], b[8000], back[5000];

    for (int round = 0; round < 200; round++) {
        size_t n = rng() % sizeof(plain), start = rng() % 13, abit = start, bbit = start;
        size_t rbit = start, end;
        uint8_t *exact;

        for (size_t i = 0; i < n; i++)
            plain[i] = (uint8_t)(round & 1 ? rng() : rng() % 24);
        memset(a, 0, sizeof(a));
        memset(b, 0, sizeof(b));
        CHECK_EQ(sg_q3_huff_encode(h, a, sizeof(a), &abit, plain, n), n);
        for (size_t i = 0; i < n; i++)
            CHECK_EQ(sg_q3_huff_put_sym(h, b, sizeof(b), &bbit, plain[i]), 0);
        CHECK_EQ(abit, bbit);
        CHECK(memcmp(a, b, sizeof(a)) == 0);

        /* Decode from a buffer of exactly the coded length. */
        end = (abit + 7) / 8;
        exact = exact_copy(a, end);
        memset(back, 0xee, sizeof(back));
        CHECK_EQ(sg_q3_huff_decode(h, exact, end, &rbit, back, n), n);
        CHECK_EQ(rbit, abit);
        CHECK(memcmp(back, plain, n) == 0);

        /* One symbol more than is there: an error, never a read past it. */
        rbit = start;
        if (abit % 8 == 0 || n == 0) {
            free(exact);
            continue;
        }
        CHECK(sg_q3_huff_decode(h, exact, end, &rbit, back, n + 1) != (int)n + 1);
        free(exact);
    }

    /* The encoder stops at the capacity and reports where. */
    {
        uint8_t small[3] = {0};
        size_t bit = 0;

        memset(plain, 'a', 10); /* 8 bits each */
        CHECK_EQ(sg_q3_huff_encode(h, small, sizeof(small), &bit, plain, 10), SG_E_OVERFLOW);
        CHECK_EQ(bit, 24);
    }
}

/* ------------------------------------------------------------------ */
/* Adaptive coder                                                       */

static int adaptive_roundtrip(const uint8_t *in, size_t n)
{
    size_t cap = n * 2 + 16;
    uint8_t *z = malloc(cap), *back = malloc(n + 1), *exact;
    int zn, bn, ok;

    zn = sg_q3_huff_adaptive_compress(in, n, z, cap);
    if (zn < 0) {
        fprintf(stderr, "compress of %zu bytes: %s\n", n, sg_strerror(zn));
        free(z);
        free(back);
        return 0;
    }
    exact = exact_copy(z, (size_t)zn);
    bn = sg_q3_huff_adaptive_decompress(exact, (size_t)zn, back, n + 1);
    ok = bn == (int)n && (n == 0 || memcmp(back, in, n) == 0);
    if (n == 0)
        ok = ok && zn == 0;
    else
        ok = ok && zn >= 3 && exact[0] == (uint8_t)(n >> 8) && exact[1] == (uint8_t)n;
    if (!ok)
        fprintf(stderr, "adaptive round trip of %zu bytes: %d -> %d\n", n, zn, bn);
    free(exact);
    free(z);
    free(back);
    return ok;
}

/* Random data of many lengths and alphabets round-trips. */
static void test_adaptive_random(void)
{
    static const size_t lens[] = {0, 1, 2, 3, 17, 255, 256, 1000, 4000, 16372, 65535};
    static uint8_t buf[65535];

    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        for (int alpha = 1; alpha <= 256; alpha *= 4) {
            for (size_t k = 0; k < lens[i]; k++)
                buf[k] = (uint8_t)(rng() % (unsigned)alpha);
            CHECK(adaptive_roundtrip(buf, lens[i]));
        }
        for (size_t k = 0; k < lens[i]; k++)
            buf[k] = (uint8_t)rng();
        CHECK(adaptive_roundtrip(buf, lens[i]));
    }
    CHECK_EQ(sg_q3_huff_adaptive_compress(buf, 65536, buf, 0), SG_E_TOOBIG);
}

/* Small inputs whose bytes follow from the algorithm by hand. */
static void test_adaptive_vectors(void)
{
    uint8_t out[16];
    uint8_t back[16];

    /* "a": length 1, then NYT (empty code: the tree is NYT alone) + 0x61
     * MSB first = bits 1,0,0,0,0,1,1,0 LSB-first in byte 2 -> 0x86, then the
     * game's extra byte. */
    CHECK_EQ(sg_q3_huff_adaptive_compress((const uint8_t *)"a", 1, out, sizeof(out)), 4);
    CHECK_EQ(out[0], 0);
    CHECK_EQ(out[1], 1);
    CHECK_EQ(out[2], 0x86);
    CHECK_EQ(out[3], 0);

    /* "aa": the second 'a' is the right child of the root: one bit 1. */
    CHECK_EQ(sg_q3_huff_adaptive_compress((const uint8_t *)"aa", 2, out, sizeof(out)), 4);
    CHECK_EQ(out[2], 0x86);
    CHECK_EQ(out[3], 0x01);

    /* "ab": 'b' is NYT (left of root: bit 0) then 0x62 MSB first, 33 bits. */
    CHECK_EQ(sg_q3_huff_adaptive_compress((const uint8_t *)"ab", 2, out, sizeof(out)), 5);
    CHECK_EQ(out[2], 0x86);
    CHECK_EQ(out[3], 0x8c); /* 0, then 0,1,1,0,0,0,1 */
    CHECK_EQ(out[4], 0x00); /* the last 0 */

    /* Too small an output buffer (the byte after the last bit counts). */
    CHECK_EQ(sg_q3_huff_adaptive_compress((const uint8_t *)"ab", 2, out, 4), SG_E_OVERFLOW);
    CHECK_EQ(sg_q3_huff_adaptive_compress((const uint8_t *)"ab", 2, out, 3), SG_E_OVERFLOW);
    CHECK_EQ(sg_q3_huff_adaptive_compress((const uint8_t *)"ab", 2, out, 1), SG_E_OVERFLOW);

    /* Decompression: empty, 1 byte, clamped to the capacity. */
    CHECK_EQ(sg_q3_huff_adaptive_decompress(out, 0, back, sizeof(back)), 0);
    CHECK_EQ(sg_q3_huff_adaptive_decompress(out, 1, back, sizeof(back)), SG_E_TRUNCATED);
    {
        const uint8_t ab[5] = {0, 2, 0x86, 0x8c, 0x00};

        CHECK_EQ(sg_q3_huff_adaptive_decompress(ab, 5, back, sizeof(back)), 2);
        CHECK(memcmp(back, "ab", 2) == 0);
        CHECK_EQ(sg_q3_huff_adaptive_decompress(ab, 5, back, 1), 1);
        CHECK_EQ(back[0], 'a');
    }
}

/* Input that ends early: the declared length comes back, zero-filled. */
static void test_adaptive_truncated(void)
{
    static uint8_t text[600], z[1400], back[700];
    size_t last_good = 0;
    int zn;

    for (size_t i = 0; i < sizeof(text); i++)
        text[i] = (uint8_t)("\\name\\player\\rate\\25000"[i % 23]);
    zn = sg_q3_huff_adaptive_compress(text, sizeof(text), z, sizeof(z));
    CHECK(zn > 10);
    for (int cut = 2; cut < zn; cut += 7) {
        uint8_t *exact = exact_copy(z, (size_t)cut);
        int bn;
        size_t good = 0, tail = 0;

        memset(back, 0xee, sizeof(back));
        bn = sg_q3_huff_adaptive_decompress(exact, (size_t)cut, back, sizeof(back));
        CHECK_EQ(bn, sizeof(text));
        while (good < sizeof(text) && back[good] == text[good])
            good++;
        while (tail < sizeof(text) && back[sizeof(text) - 1 - tail] == 0)
            tail++;
        /* A correct prefix, a few symbols decoded from the up to 8 bits
         * read as zeros past the end, then zeros only. */
        CHECK(good < sizeof(text));
        CHECK(good + 9 >= sizeof(text) - tail);
        CHECK(good + 9 >= last_good);
        if (cut >= 4)
            CHECK(good >= 1);
        last_good = good;
        free(exact);
    }
    /* The last cut misses under 7 bytes, so under 56 symbols. */
    CHECK(last_good + 56 + 9 >= sizeof(text));
}

/* Connect packets of real clients: text, and the same bytes back. */
static void test_adaptive_connect(void)
{
    static const struct {
        const char *session;
        const char *protocol;
    } sessions[] = {
        {"ioq68", "\\protocol\\68\\"}, {"ioq71", "\\protocol\\71\\"}, {"oa71", "\\protocol\\71\\"}};
    const char *root = getenv("SG_TESTDATA");

    if (!root || !*root) {
        fprintf(stderr, "SG_TESTDATA is not set\n");
        failures++;
        return;
    }
    for (size_t i = 0; i < sizeof(sessions) / sizeof(sessions[0]); i++) {
        char path[4096], err[PCAP_ERRBUF_SIZE];
        struct pcap_pkthdr *hdr;
        const uint8_t *frame;
        int found = 0;
        pcap_t *p;

        snprintf(path, sizeof(path), "%s/q3/sessions/%s/capture.pcap", root, sessions[i].session);
        p = pcap_open_offline(path, err);
        if (!p) {
            fprintf(stderr, "%s: %s\n", path, err);
            failures++;
            continue;
        }
        CHECK_EQ(pcap_datalink(p), DLT_EN10MB);
        while (pcap_next_ex(p, &hdr, &frame) == 1) {
            const uint8_t *ip = frame + 14, *udp, *body;
            size_t ihl, len;
            uint8_t text[16384], again[16384], *exact;
            int n, zn;

            if (hdr->caplen < 14 + 20 + 8 || frame[12] != 0x08 || frame[13] != 0x00 || ip[9] != 17)
                continue;
            ihl = (size_t)(ip[0] & 15) * 4;
            udp = ip + ihl;
            len = (size_t)(udp[4] << 8 | udp[5]);
            if (len < 8 + 12 || 14 + ihl + len > hdr->caplen)
                continue;
            body = udp + 8;
            len -= 8;
            if (memcmp(body,
                       "\xff\xff\xff\xff"
                       "connect ",
                       12) != 0)
                continue;
            found++;

            exact = exact_copy(body + 12, len - 12);
            n = sg_q3_huff_adaptive_decompress(exact, len - 12, text, 16384 - 12);
            CHECK(n > 100);
            if (n <= 0) {
                free(exact);
                continue;
            }
            CHECK_EQ(n, exact[0] << 8 | exact[1]);
            text[n < 16383 ? n : 16383] = 0;
            CHECK(memmem(text, (size_t)n, "\\challenge\\", 11) != NULL);
            CHECK(memmem(text, (size_t)n, "\\qport\\", 7) != NULL);
            CHECK(memmem(text, (size_t)n, sessions[i].protocol, strlen(sessions[i].protocol)));
            CHECK(memmem(text, (size_t)n, "\\name\\peers\\", 12) != NULL);

            zn = sg_q3_huff_adaptive_compress(text, (size_t)n, again, sizeof(again));
            CHECK_EQ(zn, len - 12);
            CHECK(zn == (int)(len - 12) && memcmp(again, exact, (size_t)zn) == 0);
            free(exact);
        }
        CHECK_EQ(found, 1);
        pcap_close(p);
    }
}

/* ------------------------------------------------------------------ */

static const struct unit_case cases[] = {
    {"fixed_roundtrip", test_fixed_roundtrip},
    {"fixed_codes", test_fixed_codes},
    {"fixed_bounds", test_fixed_bounds},
    {"fixed_nyt", test_fixed_nyt},
    {"fixed_bulk", test_fixed_bulk},
    {"adaptive_random", test_adaptive_random},
    {"adaptive_vectors", test_adaptive_vectors},
    {"adaptive_truncated", test_adaptive_truncated},
    {"adaptive_connect", test_adaptive_connect},
};

int main(int argc, char **argv)
{
    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
