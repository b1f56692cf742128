/*
 * Quake 3 Huffman coding: the fixed coder, derived from the adaptive tree
 * (hufftree.c, which also holds the adaptive coder of the `connect`
 * packet).
 *
 * The fixed coder
 * ---------------
 * The game builds its in-game tree by adding each byte value i exactly
 * msg_hData[i] times, i = 0..255 in order, to an empty adaptive tree, and
 * never changes it again.  sg_q3_huff_fixed() does the same once
 * (call_once) and turns the result into tables: a (code, length) pair per
 * symbol for encoding, and a 2^LUT_BITS-entry table indexed by the next
 * LUT_BITS input bits that gives symbol and length at once.  The longest
 * code is 11 bits, so the default 11-bit table decodes every code in one
 * lookup; with a smaller table (a build option used by the tests) an entry
 * for a longer code names the node reached after LUT_BITS bits, and the
 * decoder walks the tree from there.  The bulk decoder uses a second table
 * over the same index that gives up to two whole codes per lookup, and
 * feeds it from a 64-bit bit register.  NYT stays in the fixed tree
 * (weight 0, an 11-bit code), so a decoder can meet it in corrupt data; the
 * game then yields the value 256.
 */
#include "protocols/q3/huffman.h"
#include "protocols/q3/hufftree.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "protocols/byteorder.h"
#include "protocols/error.h"

#ifndef SG_Q3_HUFF_LUT_BITS
#define SG_Q3_HUFF_LUT_BITS 11 /* decoder lookahead; every fixed code fits (the longest is 11) */
#endif
#define LUT_BITS     SG_Q3_HUFF_LUT_BITS
#define MAX_CODE_LEN 11 /* of the fixed tree; checked when it is built */
#define LUT_LONG     SG_Q3_HUFF_LUT_LONG

/*
 * Byte frequencies the game's fixed tree is built from (msg_hData in
 * msg.c, identical to the count table in the demo-format document).
 */
/* clang-format off */
static const int msg_hdata[256] = {
    250315,  41193,   6292,   7106,   3730,   3750,   6110,  23283,
     33317,   6950,   7838,   9714,   9257,  17259,   3949,   1778,
      8288,   1604,   1590,   1663,   1100,   1213,   1238,   1134,
      1749,   1059,   1246,   1149,   1273,   4486,   2805,   3472,
     21819,   1159,   1670,   1066,   1043,   1012,   1053,   1070,
      1726,    888,   1180,    850,    960,    780,   1752,   3296,
     10630,   4514,   5881,   2685,   4650,   3837,   2093,   1867,
      2584,   1949,   1972,    940,   1134,   1788,   1670,   1206,
      5719,   6128,   7222,   6654,   3710,   3795,   1492,   1524,
      2215,   1140,   1355,    971,   2180,   1248,   1328,   1195,
      1770,   1078,   1264,   1266,   1168,    965,   1155,   1186,
      1347,   1228,   1529,   1600,   2617,   2048,   2546,   3275,
      2410,   3585,   2504,   2800,   2675,   6146,   3663,   2840,
     14253,   3164,   2221,   1687,   3208,   2739,   3512,   4796,
      4091,   3515,   5288,   4016,   7937,   6031,   5360,   3924,
      4892,   3743,   4566,   4807,   5852,   6400,   6225,   8291,
     23243,   7838,   7073,   8935,   5437,   4483,   3641,   5256,
      5312,   5328,   5370,   3492,   2458,   1694,   1821,   2121,
      1916,   1149,   1516,   1367,   1236,   1029,   1258,   1104,
      1245,   1006,   1149,   1025,   1241,    952,   1287,    997,
      1713,   1009,   1187,    879,   1099,    929,   1078,    951,
      1656,    930,   1153,   1030,   1262,   1062,   1214,   1060,
      1621,    930,   1106,    912,   1034,    892,   1158,    990,
      1175,    850,   1121,    903,   1087,    920,   1144,   1056,
      3462,   2240,   4397,  12136,   7758,   1345,   1307,   3278,
      1950,    886,   1023,   1112,   1077,   1042,   1061,   1071,
      1484,   1001,   1096,    915,   1052,    995,   1070,    876,
      1111,    851,   1059,    805,   1112,    923,   1103,    817,
      1899,   1872,    976,    841,   1127,    956,   1159,    950,
      7791,    954,   1289,    933,   1127,   3207,   1020,    927,
      1355,    768,   1040,    745,    952,    805,   1073,    740,
      1013,    805,   1008,    796,    996,   1057,  11457,  13504,
};
/* clang-format on */

/* ------------------------------------------------------------------ */
/* The fixed coder                                                      */

struct sg_q3_huff {
    uint32_t lut[1u << LUT_BITS];  /* sym | len << 16, or node | LUT_LONG */
    uint32_t pair[1u << LUT_BITS]; /* the bulk decoder's: see pair_entry() */
    uint32_t code[NYT + 1];        /* LSB = first bit sent */
    uint8_t len[NYT + 1];
    int16_t child[NODES][2];
    int16_t sym[NODES]; /* symbol of a leaf, INTERNAL otherwise */
};

/*
 * An entry of the bulk decoder's table: the one or two codes that fit
 * entirely in the LUT_BITS bits `idx` (total length in bits 0..5, first
 * symbol in bits 8..15, second in 16..23, count in 24..25), or PAIR_SLOW
 * when the first code is longer or is NYT.  A second code is left out when
 * it is longer than the bits left, or is NYT.
 */
#define PAIR_SLOW 0x80000000u

static uint32_t pair_entry(const struct sg_q3_huff *h, uint32_t idx)
{
    uint32_t first = h->lut[idx], second, len1, len2;

    if ((first & LUT_LONG) || (first & 0xffff) == NYT)
        return PAIR_SLOW;
    len1 = first >> 16;
    second = h->lut[idx >> len1];
    len2 = second >> 16;
    if ((second & LUT_LONG) || (second & 0xffff) == NYT || len2 > LUT_BITS - len1)
        return len1 | (first & 0xff) << 8 | 1u << 24;
    return (len1 + len2) | (first & 0xff) << 8 | (second & 0xff) << 16 | 2u << 24;
}

static struct sg_q3_huff fixed_coder;
static once_flag fixed_once = ONCE_FLAG_INIT;

static void fixed_build(void)
{
    struct sg_q3_huff *h = &fixed_coder;
    struct atree t;
    uint8_t bits[NODES];

    sg_q3__atree_init(&t);
    for (int ch = 0; ch < 256; ch++)
        for (int k = 0; k < msg_hdata[ch]; k++)
            sg_q3__atree_add(&t, ch);

    for (int i = 0; i < t.nodes; i++) {
        h->child[i][0] = t.n[i].left;
        h->child[i][1] = t.n[i].right;
        h->sym[i] = t.n[i].sym;
    }
    for (int s = 0; s <= NYT; s++) {
        int len = sg_q3__atree_path(&t, t.leaf[s], bits);
        uint32_t code = 0;

        for (int k = 0; k < len; k++)
            code |= (uint32_t)bits[k] << k;
        h->code[s] = code;
        h->len[s] = (uint8_t)len;
        if (len > MAX_CODE_LEN) /* the counts are constants: cannot happen */
            abort();
    }
    for (uint32_t idx = 0; idx < (1u << LUT_BITS); idx++) {
        int node = t.root, depth = 0;

        while (h->sym[node] == INTERNAL && depth < LUT_BITS)
            node = h->child[node][(idx >> depth++) & 1];
        if (h->sym[node] == INTERNAL)
            h->lut[idx] = (uint32_t)node | LUT_LONG;
        else
            h->lut[idx] = (uint32_t)h->sym[node] | (uint32_t)depth << 16;
    }
    for (uint32_t idx = 0; idx < (1u << LUT_BITS); idx++)
        h->pair[idx] = pair_entry(h, idx);
}

const uint32_t *sg_q3_huff_lut(const struct sg_q3_huff *h, uint32_t *mask)
{
    *mask = (1u << LUT_BITS) - 1;
    return h->lut;
}

const uint32_t *sg_q3_huff_codes(const struct sg_q3_huff *h, const uint8_t **len)
{
    *len = h->len;
    return h->code;
}

const struct sg_q3_huff *sg_q3_huff_fixed(void)
{
    call_once(&fixed_once, fixed_build);
    return &fixed_coder;
}

/* ------------------------------------------------------------------ */
/* Bit access                                                           */

/* The bits from `bit` on, LSB first, zeros past the end; at least 57 of them. */
static inline uint64_t peek_bits(const uint8_t *data, size_t size, size_t bit)
{
    size_t byte = bit >> 3;
    uint64_t v = 0;

    if (byte + 8 <= size) {
        v = sg_le64(data + byte);
    } else {
        for (size_t k = 0; byte + k < size; k++)
            v |= (uint64_t)data[byte + k] << (8 * k);
    }
    return v >> (bit & 7);
}

/* Set bits [bit, bit + len) of `out` to `value`, leaving all others alone. */
static inline void poke_bits(uint8_t *out, size_t cap, size_t bit, uint64_t value, unsigned len)
{
    size_t byte = bit >> 3;
    unsigned shift = bit & 7;
    uint64_t mask = (((uint64_t)1 << len) - 1) << shift;

    value <<= shift;
    if (byte + 8 <= cap) {
        sg_put_le64(out + byte, (sg_le64(out + byte) & ~mask) | value);
        return;
    }
    for (unsigned k = 0; 8 * k < shift + len; k++) {
        uint8_t m = (uint8_t)(mask >> (8 * k));

        out[byte + k] = (uint8_t)((out[byte + k] & ~m) | ((value >> (8 * k)) & m));
    }
}

/* ------------------------------------------------------------------ */
/* Fixed coder: symbols                                                 */

/* Decode the code at the start of `win`; stores its length. */
static inline int fixed_decode(const struct sg_q3_huff *h, uint64_t win, unsigned *len)
{
    uint32_t e = h->lut[win & ((1u << LUT_BITS) - 1)];
    unsigned n = LUT_BITS;
    int node;

    if (!(e & LUT_LONG)) {
        *len = e >> 16;
        return (int)(e & 0xffff);
    }
    node = (int)(e & 0xffff);
    win >>= LUT_BITS;
    do {
        node = h->child[node][win & 1];
        win >>= 1;
        n++;
    } while (h->sym[node] == INTERNAL);
    *len = n;
    return h->sym[node];
}

int sg_q3_huff_decode_sym(const struct sg_q3_huff *h, const uint8_t *data, size_t size, size_t *bit)
{
    size_t end = size * 8;
    unsigned len;
    int sym;

    if (*bit >= end)
        return SG_E_HUFFMAN;
    sym = fixed_decode(h, peek_bits(data, size, *bit), &len);
    if (len > end - *bit)
        return SG_E_HUFFMAN;
    *bit += len;
    return sym;
}

int sg_q3_huff_read_value(const struct sg_q3_huff *h, const uint8_t *data, size_t size,
                          size_t *bit, unsigned raw, unsigned nsyms, uint32_t *value)
{
    size_t pos = *bit, end = size * 8;
    uint64_t win;
    uint32_t v;

    /* Far from the end (the usual case): one load, no bounds to check, as
     * the raw bits and four codes take at most 7 + 4 * 11 of its 57 bits. */
    if (pos + 64 <= end) {
        win = sg_le64(data + (pos >> 3)) >> (pos & 7);
        v = (uint32_t)win & ((1u << raw) - 1);
        win >>= raw;
        pos += raw;
        for (unsigned i = 0; i < nsyms; i++) {
            unsigned len;

            v |= (uint32_t)fixed_decode(h, win, &len) << (raw + 8 * i);
            win >>= len;
            pos += len;
        }
        *bit = pos;
        *value = v;
        return 0;
    }

    /* Near the end: every bit checked. */
    if (pos > end || raw > end - pos)
        return SG_E_OVERFLOW;
    win = peek_bits(data, size, pos);
    v = (uint32_t)win & ((1u << raw) - 1);
    win >>= raw;
    pos += raw;
    for (unsigned i = 0; i < nsyms; i++) {
        unsigned len;
        int s;

        if (pos >= end)
            return SG_E_HUFFMAN;
        s = fixed_decode(h, win, &len);
        if (len > end - pos)
            return SG_E_HUFFMAN;
        v |= (uint32_t)s << (raw + 8 * i);
        win >>= len;
        pos += len;
    }
    *bit = pos;
    *value = v;
    return 0;
}

int sg_q3_huff_get_sym(const struct sg_q3_huff *h, const uint8_t *data, size_t size, size_t *bit,
                       uint8_t *sym)
{
    size_t pos = *bit;
    int s = sg_q3_huff_decode_sym(h, data, size, &pos);

    if (s < 0 || s == NYT)
        return SG_E_HUFFMAN;
    *sym = (uint8_t)s;
    *bit = pos;
    return 0;
}

int sg_q3_huff_put_sym(const struct sg_q3_huff *h, uint8_t *out, size_t cap, size_t *bit,
                       uint8_t sym)
{
    unsigned len = h->len[sym];

    if (*bit > cap * 8 || len > cap * 8 - *bit)
        return SG_E_OVERFLOW;
    poke_bits(out, cap, *bit, h->code[sym], len);
    *bit += len;
    return 0;
}

int sg_q3_huff_code(const struct sg_q3_huff *h, int sym, uint32_t *code)
{
    if (sym < 0 || sym > NYT)
        return SG_E_MALFORMED;
    if (code)
        *code = h->code[sym];
    return h->len[sym];
}

/* ------------------------------------------------------------------ */
/* Fixed coder: runs of bytes                                           */

/*
 * The bulk decoder keeps the next bits in a 64-bit register: bit k of `bb`
 * is stream bit `pos + k` for k < `cnt`, and the bits above are 0 or the
 * stream's own bits, so reloading bytes into them is harmless.  A refill
 * tops `cnt` up to 56..63 with one unaligned load, enough for
 * SYMS_PER_REFILL codes, so the loop's critical path is just the table
 * lookup and the shift.
 */
#define SYMS_PER_REFILL (56 / MAX_CODE_LEN)

/* One code from the register; returns its symbol. */
static inline int take_code(const struct sg_q3_huff *h, uint64_t *bb, unsigned *cnt)
{
    uint32_t e = h->lut[*bb & ((1u << LUT_BITS) - 1)];
    int node;

    if (!(e & LUT_LONG)) {
        *bb >>= e >> 16;
        *cnt -= e >> 16;
        return (int)(e & 0xffff);
    }
    node = (int)(e & 0xffff);
    *bb >>= LUT_BITS;
    *cnt -= LUT_BITS;
    do {
        node = h->child[node][*bb & 1];
        *bb >>= 1;
        *cnt -= 1;
    } while (h->sym[node] == INTERNAL);
    return h->sym[node];
}

int sg_q3_huff_decode(const struct sg_q3_huff *h, const uint8_t *data, size_t size, size_t *bit,
                      uint8_t *out, size_t n)
{
    size_t pos = *bit, i = 0;

    if (n > INT_MAX)
        return -EINVAL;

    /*
     * Register-fed loop while an 8-byte load stays inside the buffer and
     * room is left for two symbols per lookup.  One lookup takes at most
     * MAX_CODE_LEN bits.
     */
    if (n >= 2 * SYMS_PER_REFILL && (pos >> 3) + 8 <= size) {
        const uint8_t *p = data + (pos >> 3), *last = data + size - 8;
        uint64_t bb = sg_le64(p) >> (pos & 7);
        unsigned cnt = 56 - (pos & 7);

        p += 7;
        while (n - i >= 2 * SYMS_PER_REFILL && p <= last) {
            bb |= sg_le64(p) << cnt;
            p += (63 - cnt) >> 3;
            cnt |= 56;
            for (int k = 0; k < SYMS_PER_REFILL; k++) {
                uint32_t e = h->pair[bb & ((1u << LUT_BITS) - 1)];

                if (e & PAIR_SLOW) {
                    unsigned before = cnt;
                    int s = take_code(h, &bb, &cnt);

                    if (s == NYT) { /* report the position of the NYT code */
                        pos = (size_t)(p - data) * 8 - before;
                        goto bad;
                    }
                    out[i++] = (uint8_t)s;
                    continue;
                }
                out[i] = (uint8_t)(e >> 8);
                out[i + 1] = (uint8_t)(e >> 16);
                i += (e >> 24) & 3;
                bb >>= e & 63;
                cnt -= e & 63;
            }
        }
        pos = (size_t)(p - data) * 8 - cnt;
    }

    /* The rest, one bounded code at a time. */
    for (; i < n; i++) {
        size_t next = pos;
        int s = sg_q3_huff_decode_sym(h, data, size, &next);

        if (s < 0 || s == NYT)
            goto bad;
        out[i] = (uint8_t)s;
        pos = next;
    }
    *bit = pos;
    return (int)n;

bad:
    *bit = pos;
    return SG_E_HUFFMAN;
}

size_t sg_q3_huff_decode_string(const struct sg_q3_huff *h, const uint8_t *data, size_t size,
                                size_t *bit, uint8_t *out, size_t max, int stop, bool *ended)
{
    size_t pos = *bit, i = 0;

    /*
     * The register of sg_q3_huff_decode: loads never pass `size`, and at
     * most 55 of the 56+ bits loaded are taken between refills, so every
     * code ends at least one bit before the end of the loaded bytes, where
     * the game's byte read succeeds.
     */
    *ended = false;
    if (max == 0 || (pos >> 3) + 8 > size)
        return 0;
    {
        const uint8_t *p = data + (pos >> 3), *last = data + size - 8;
        uint64_t bb = sg_le64(p) >> (pos & 7);
        unsigned cnt = 56 - (pos & 7);

        p += 7;
        while (i < max && p <= last) {
            bb |= sg_le64(p) << cnt;
            p += (63 - cnt) >> 3;
            cnt |= 56;
            for (int k = 0; k < SYMS_PER_REFILL && i < max; k++) {
                int c = take_code(h, &bb, &cnt) & 0xff; /* NYT (256) reads as 0 */

                if (c == 0 || c == stop) {
                    *ended = true;
                    goto done;
                }
                out[i++] = (uint8_t)c;
            }
        }
    done:
        pos = (size_t)(p - data) * 8 - cnt;
    }
    *bit = pos;
    return i;
}

static inline void store_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/*
 * The bulk encoder gathers codes in a 64-bit accumulator, seeded with the
 * bits below the start position in its byte, and stores 32 bits at a time;
 * at the end it merges the last partial byte into what is there.
 */
int sg_q3_huff_encode(const struct sg_q3_huff *h, uint8_t *out, size_t cap, size_t *bit,
                      const uint8_t *in, size_t n)
{
    size_t pos = *bit, end = cap * 8, byte = pos >> 3, i;
    unsigned nb = pos & 7;
    uint64_t acc;
    int ret = (int)n;

    if (n > INT_MAX)
        return -EINVAL;
    if (pos > end)
        return SG_E_OVERFLOW;
    acc = nb ? out[byte] & ((1u << nb) - 1) : 0;

    for (i = 0; i < n; i++) {
        unsigned len = h->len[in[i]];

        if (len > end - pos) {
            ret = SG_E_OVERFLOW;
            break;
        }
        acc |= (uint64_t)h->code[in[i]] << nb;
        nb += len;
        pos += len;
        if (nb >= 32) { /* these 32 bits lie below pos <= end */
            store_le32(out + byte, (uint32_t)acc);
            acc >>= 32;
            nb -= 32;
            byte += 4;
        }
    }

    /* Whole bytes left, then the low bits of a last partial byte. */
    for (; nb >= 8; nb -= 8, acc >>= 8)
        out[byte++] = (uint8_t)acc;
    if (nb) {
        uint8_t mask = (uint8_t)((1u << nb) - 1);

        out[byte] = (uint8_t)((out[byte] & ~mask) | (acc & mask));
    }
    *bit = pos;
    return ret;
}
