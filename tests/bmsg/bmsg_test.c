/*
 * The shared byte-message reader and writer (protocols/bmsg.h): every
 * read and write kind against hand-built bytes, bit-exact round trips of
 * every coordinate and angle size from random raw values, truncation at
 * every offset, writer overflow at every capacity, the string rules, and
 * two real files: the block headers of a NetQuake demo and the challenge
 * reply of a QuakeWorld capture ($SG_TESTDATA).
 */
#include "protocols/bmsg.h"

#include "tests/q3/pcap_udp.h"
#include "tests/unit.h"

#include <math.h>

/* ---- every plain kind ---- */

static void case_ints(void)
{
    static const uint8_t want[] = {
        0xfe,                   /* u8 254 */
        0x80,                   /* s8 -128 */
        0x34, 0x12,             /* u16 0x1234 */
        0xfe, 0xff,             /* s16 -2 */
        0x78, 0x56, 0x34, 0x12, /* u32 */
        0xff, 0xff, 0xff, 0x7f, /* s32 max */
        0x12, 0x34,             /* be16 */
        0x12, 0x34, 0x56, 0x78, /* be32 */
        0x00, 0x00, 0xc0, 0x3f, /* float 1.5 */
        'a',  'b',  'c',        /* data */
        0x07,                   /* skipped */
        0x09,                   /* peeked, then read */
    };
    uint8_t buf[64], data[3];
    struct sg_bmsg_writer w;
    struct sg_bmsg_reader r;

    sg_bmsg_writer_init(&w, buf, sizeof(buf));
    CHECK(sg_bmsg_write_u8(&w, 254) == 0);
    CHECK(sg_bmsg_write_u8(&w, (unsigned)-128) == 0);
    CHECK(sg_bmsg_write_u16(&w, 0x1234) == 0);
    CHECK(sg_bmsg_write_u16(&w, (unsigned)-2) == 0);
    CHECK(sg_bmsg_write_u32(&w, 0x12345678) == 0);
    CHECK(sg_bmsg_write_s32(&w, INT32_MAX) == 0);
    CHECK(sg_bmsg_write_be16(&w, 0x1234) == 0);
    CHECK(sg_bmsg_write_be32(&w, 0x12345678) == 0);
    CHECK(sg_bmsg_write_float(&w, 1.5f) == 0);
    CHECK(sg_bmsg_write_data(&w, "abc", 3) == 0);
    CHECK(sg_bmsg_write_u8(&w, 7) == 0);
    CHECK(sg_bmsg_write_u8(&w, 9) == 0);
    CHECK(!w.overflowed);
    CHECK_EQ(w.len, sizeof(want));
    CHECK(memcmp(buf, want, sizeof(want)) == 0);

    sg_bmsg_reader_init(&r, want, sizeof(want));
    CHECK_EQ(sg_bmsg_read_u8(&r), 254);
    CHECK_EQ(sg_bmsg_read_s8(&r), -128);
    CHECK_EQ(sg_bmsg_read_u16(&r), 0x1234);
    CHECK_EQ(sg_bmsg_read_s16(&r), -2);
    CHECK_EQ(sg_bmsg_read_u32(&r), 0x12345678);
    CHECK_EQ(sg_bmsg_read_s32(&r), INT32_MAX);
    CHECK_EQ(sg_bmsg_read_be16(&r), 0x1234);
    CHECK_EQ(sg_bmsg_read_be32(&r), 0x12345678);
    CHECK(sg_bmsg_read_float(&r) == 1.5f);
    CHECK(sg_bmsg_read_data(&r, data, 3) == 0 && memcmp(data, "abc", 3) == 0);
    CHECK(sg_bmsg_skip(&r, 1) == 0);
    CHECK_EQ(sg_bmsg_peek_u8(&r), 9);
    CHECK_EQ(sg_bmsg_remaining(&r), 1);
    CHECK_EQ(sg_bmsg_read_u8(&r), 9);
    CHECK_EQ(sg_bmsg_peek_u8(&r), -1);
    CHECK(!r.overflowed); /* peeking at the end does not mark */
    CHECK_EQ(r.pos, sizeof(want));

    /* past the end: the games' error values, and the mark */
    CHECK_EQ(sg_bmsg_read_u8(&r), -1);
    CHECK(r.overflowed);
    CHECK_EQ(sg_bmsg_read_u16(&r), -1);
    CHECK_EQ(sg_bmsg_read_s16(&r), -1);
    CHECK_EQ(sg_bmsg_read_s8(&r), -1);
    CHECK_EQ(sg_bmsg_read_u32(&r), 0xffffffffu);
    CHECK_EQ(sg_bmsg_read_be16(&r), -1);
    CHECK(sg_bmsg_read_float(&r) == -1.0f);
    CHECK(sg_bmsg_read_data(&r, data, 1) == SG_E_OVERFLOW);
    CHECK(sg_bmsg_skip(&r, 1) == SG_E_OVERFLOW);
    CHECK(sg_bmsg_read_data(&r, data, 0) == SG_E_OVERFLOW); /* even nothing */
    CHECK(sg_bmsg_take(&r, 0) == NULL);
    CHECK_EQ(r.pos, sizeof(want));

    /* a reader over nothing */
    sg_bmsg_reader_init(&r, NULL, 0);
    CHECK_EQ(sg_bmsg_remaining(&r), 0);
    CHECK(sg_bmsg_read_data(&r, data, 0) == 0 && !r.overflowed);
    CHECK_EQ(sg_bmsg_read_u8(&r), -1);
    CHECK(r.overflowed);
}

/* ---- numbers: sizes, values, bit-exact round trips ---- */

static const enum sg_bmsg_num all_kinds[] = {
    SG_BMSG_U8,     SG_BMSG_S8,      SG_BMSG_U16,         SG_BMSG_S16,     SG_BMSG_S32,
    SG_BMSG_FLOAT,  SG_BMSG_COORD16, SG_BMSG_COORD24,     SG_BMSG_COORD32, SG_BMSG_COORD_FLOAT,
    SG_BMSG_ANGLE8, SG_BMSG_ANGLE16, SG_BMSG_ANGLE_FLOAT,
};
#define NKINDS (sizeof(all_kinds) / sizeof(all_kinds[0]))

static uint32_t size_mask(size_t n)
{
    return n >= 4 ? 0xffffffffu : (1u << (8 * n)) - 1;
}

static void case_num_roundtrip(void)
{
    uint64_t rng = 0x5eed0001;

    CHECK_EQ(NKINDS, SG_BMSG_NUM_COUNT);
    for (size_t k = 0; k < NKINDS; k++) {
        enum sg_bmsg_num kind = all_kinds[k];
        size_t n = sg_bmsg_num_size(kind);
        uint8_t buf[4 * 512 + 1];
        uint32_t raws[512];
        struct sg_bmsg_writer w;
        struct sg_bmsg_reader r;

        CHECK(n >= 1 && n <= 4);
        CHECK(strcmp(sg_bmsg_num_name(kind), "?") != 0);

        /* random raw values (extremes included), written back to back */
        sg_bmsg_writer_init(&w, buf, sizeof(buf));
        for (size_t i = 0; i < 512; i++) {
            uint32_t v = unit_rng(&rng) ^ (unit_rng(&rng) << 16);

            if (i < 4)
                v = (uint32_t[]){0, 0xffffffffu, 0x80808080u, 0x7f7f7f7fu}[i];
            raws[i] = v & size_mask(n);
            /* bits above the size are ignored by the writer */
            CHECK(sg_bmsg_write_num(&w, kind, v) == 0);
        }
        CHECK_EQ(w.len, 512 * n);
        for (size_t i = 0; i < 512; i++) {
            /* the wire bytes are the raw value, little-endian */
            for (size_t b = 0; b < n; b++)
                CHECK_EQ(buf[i * n + b], (raws[i] >> (8 * b)) & 0xff);
        }

        /* read back: the same raw values, the game's values */
        sg_bmsg_reader_init(&r, buf, w.len);
        for (size_t i = 0; i < 512; i++) {
            uint32_t raw = 1;
            float v = 0, want = sg_bmsg_num_value(kind, raws[i]);

            CHECK(sg_bmsg_read_numf(&r, kind, &raw, &v) == 0);
            CHECK_EQ(raw, raws[i]);
            CHECK(memcmp(&v, &want, sizeof(v)) == 0);
        }
        CHECK(!r.overflowed && sg_bmsg_remaining(&r) == 0);
    }

    /* a kind out of range is refused by both ends */
    {
        uint8_t b[8] = {0};
        uint32_t raw;
        struct sg_bmsg_reader r;
        struct sg_bmsg_writer w;

        sg_bmsg_reader_init(&r, b, sizeof(b));
        CHECK(sg_bmsg_read_num(&r, SG_BMSG_NUM_COUNT, &raw) == -EINVAL && r.overflowed);
        sg_bmsg_writer_init(&w, b, sizeof(b));
        CHECK(sg_bmsg_write_num(&w, SG_BMSG_NUM_COUNT, 0) == -EINVAL && w.overflowed);
        CHECK_EQ(sg_bmsg_num_size(SG_BMSG_NUM_COUNT), 0);
    }
}

static int near(float a, float b)
{
    return fabsf(a - b) <= 1e-4f * (1.0f + fabsf(b));
}

static void case_num_values(void)
{
    uint32_t nan_bits = 0x7fc01234u, negzero = 0x80000000u;
    float f;

    /* the games' formulas at known points */
    CHECK(sg_bmsg_num_value(SG_BMSG_COORD16, 0xfff8) == -1.0f);
    CHECK(sg_bmsg_num_value(SG_BMSG_COORD16, 0x7fff) == 4095.875f);
    CHECK(sg_bmsg_num_value(SG_BMSG_COORD16, 0x8000) == -4096.0f);
    CHECK(sg_bmsg_num_value(SG_BMSG_COORD24, 0x800000 | 0x0010) == 16.0f + 128.0f / 255);
    CHECK(sg_bmsg_num_value(SG_BMSG_COORD24, 0xff0000 | 0xfffe) == -1.0f); /* -2 + 255/255 */
    CHECK(sg_bmsg_num_value(SG_BMSG_COORD32, 16) == 1.0f);
    CHECK(sg_bmsg_num_value(SG_BMSG_COORD32, 0xfffffff8u) == -0.5f);
    CHECK(sg_bmsg_num_value(SG_BMSG_ANGLE8, 0x40) == 90.0f);
    CHECK(sg_bmsg_num_value(SG_BMSG_ANGLE8, 0x80) == -180.0f); /* a signed char */
    CHECK(sg_bmsg_num_value(SG_BMSG_ANGLE16, 0x4000) == 90.0f);
    CHECK(sg_bmsg_num_value(SG_BMSG_ANGLE16, 0xc000) == -90.0f);
    CHECK(sg_bmsg_num_value(SG_BMSG_S8, 0xff) == -1.0f);
    CHECK(sg_bmsg_num_value(SG_BMSG_U8, 0xff) == 255.0f);
    CHECK(sg_bmsg_num_value(SG_BMSG_S16, 0x8000) == -32768.0f);
    CHECK(sg_bmsg_num_value(SG_BMSG_U16, 0x8000) == 32768.0f);
    CHECK(sg_bmsg_num_value(SG_BMSG_FLOAT, 0x3fc00000u) == 1.5f);
    CHECK(isnan(sg_bmsg_num_value(SG_BMSG_COORD_FLOAT, nan_bits)));

    /* quantize: nearest step, clamped or wrapped */
    CHECK_EQ(sg_bmsg_num_quantize(SG_BMSG_COORD16, -1.0f), 0xfff8);
    CHECK_EQ(sg_bmsg_num_quantize(SG_BMSG_COORD16, 0.06f), 0);
    CHECK_EQ(sg_bmsg_num_quantize(SG_BMSG_COORD16, 0.07f), 1);
    CHECK_EQ(sg_bmsg_num_quantize(SG_BMSG_COORD16, 1e9f), 0x7fff);
    CHECK_EQ(sg_bmsg_num_quantize(SG_BMSG_COORD16, -1e9f), 0x8000);
    CHECK_EQ(sg_bmsg_num_quantize(SG_BMSG_COORD16, NAN), 0);
    CHECK_EQ(sg_bmsg_num_quantize(SG_BMSG_ANGLE8, 90.0f), 0x40);
    CHECK_EQ(sg_bmsg_num_quantize(SG_BMSG_ANGLE8, 450.0f), 0x40);
    CHECK_EQ(sg_bmsg_num_quantize(SG_BMSG_ANGLE8, -90.0f), 0xc0);
    CHECK_EQ(sg_bmsg_num_quantize(SG_BMSG_ANGLE16, 359.999f), 0);
    CHECK_EQ(sg_bmsg_num_quantize(SG_BMSG_ANGLE16, INFINITY), 0);
    CHECK_EQ(sg_bmsg_num_quantize(SG_BMSG_U8, 300.0f), 255);
    CHECK_EQ(sg_bmsg_num_quantize(SG_BMSG_S8, -300.0f), 0x80);
    CHECK_EQ(sg_bmsg_num_quantize(SG_BMSG_S32, 3e9f), 0x7fffffff);
    CHECK_EQ(sg_bmsg_num_quantize(SG_BMSG_COORD32, -1.0f), 0xfffffff0u);
    CHECK_EQ(sg_bmsg_num_quantize(SG_BMSG_COORD24, -1.0f), 0xffff); /* floor -1, fraction 0 */
    CHECK_EQ(sg_bmsg_num_quantize(SG_BMSG_COORD24, 2.5f), 0x800002);
    CHECK_EQ(sg_bmsg_num_quantize(SG_BMSG_COORD24, 2.999f), 0x000003);
    memcpy(&f, &negzero, sizeof(f));
    CHECK_EQ(sg_bmsg_num_quantize(SG_BMSG_FLOAT, f), negzero);

    /* value -> quantize gives the raw form back for the fixed-point
     * kinds, except where the wire has two spellings of one value: the
     * reason a re-encoder keeps raw values */
    {
        uint64_t rng = 0x5eed0002;

        for (int i = 0; i < 20000; i++) {
            uint32_t u = unit_rng(&rng) ^ (unit_rng(&rng) << 16);
            static const enum sg_bmsg_num exact[] = {
                SG_BMSG_U8,      SG_BMSG_S8,     SG_BMSG_U16,     SG_BMSG_S16,
                SG_BMSG_COORD16, SG_BMSG_ANGLE8, SG_BMSG_ANGLE16, SG_BMSG_FLOAT};

            for (size_t k = 0; k < sizeof(exact) / sizeof(exact[0]); k++) {
                uint32_t raw = u & size_mask(sg_bmsg_num_size(exact[k]));

                if (exact[k] == SG_BMSG_FLOAT && isnan(sg_bmsg_num_value(exact[k], raw)))
                    continue;
                CHECKF(sg_bmsg_num_quantize(exact[k], sg_bmsg_num_value(exact[k], raw)) == raw,
                       "%s raw 0x%x", sg_bmsg_num_name(exact[k]), raw);
            }
            /* 24-bit: the same value; fraction 255 is spelled again as +1 */
            {
                uint32_t raw = u & 0xffffff, q;
                float v = sg_bmsg_num_value(SG_BMSG_COORD24, raw);

                q = sg_bmsg_num_quantize(SG_BMSG_COORD24, v);
                CHECKF(near(sg_bmsg_num_value(SG_BMSG_COORD24, q), v), "coord24 0x%x", raw);
                if ((raw >> 16) < 255)
                    CHECK_EQ(q, raw);
            }
        }
    }
    /* the two spellings of -1.0 in 24-bit coordinates */
    CHECK(sg_bmsg_num_value(SG_BMSG_COORD24, 0xff0000 | 0xfffe) ==
          sg_bmsg_num_value(SG_BMSG_COORD24, 0x00ffff));
}

static void case_sizes(void)
{
    struct sg_bmsg_sizes s = sg_bmsg_sizes_nq(0);

    CHECK(s.coord == SG_BMSG_COORD16 && s.angle == SG_BMSG_ANGLE8);
    s = sg_bmsg_sizes_nq(SG_BMSG_PRFL_24BITCOORD | SG_BMSG_PRFL_SHORTANGLE);
    CHECK(s.coord == SG_BMSG_COORD24 && s.angle == SG_BMSG_ANGLE16);
    s = sg_bmsg_sizes_nq(SG_BMSG_PRFL_24BITCOORD | SG_BMSG_PRFL_INT32COORD);
    CHECK(s.coord == SG_BMSG_COORD32);
    s = sg_bmsg_sizes_nq(0xff); /* every flag: floats win */
    CHECK(s.coord == SG_BMSG_COORD_FLOAT && s.angle == SG_BMSG_ANGLE_FLOAT);
    s = sg_bmsg_sizes_qw(0);
    CHECK(s.coord == SG_BMSG_COORD16 && s.angle == SG_BMSG_ANGLE8);
    s = sg_bmsg_sizes_qw(0x2140f040); /* mvdsv's offer: FLOATCOORDS among others */
    CHECK(s.coord == SG_BMSG_COORD_FLOAT && s.angle == SG_BMSG_ANGLE16);
}

/* ---- truncation and overflow ---- */

/* A message of one item of every kind, with a string in the middle. */
struct item {
    int kind; /* an enum sg_bmsg_num, or -1 for the string */
    uint32_t raw;
    size_t off; /* offset in the message */
};

static size_t build_items(struct item *items, uint8_t *buf, size_t cap)
{
    struct sg_bmsg_writer w;
    size_t n = 0;
    uint64_t rng = 0x5eed0003;

    sg_bmsg_writer_init(&w, buf, cap);
    for (int round = 0; round < 2; round++) {
        for (size_t k = 0; k < NKINDS; k++) {
            items[n].kind = (int)all_kinds[k];
            items[n].raw = unit_rng(&rng) & size_mask(sg_bmsg_num_size(all_kinds[k]));
            items[n].off = w.len;
            CHECK(sg_bmsg_write_num(&w, all_kinds[k], items[n].raw) == 0);
            n++;
            if (k == 5) {
                items[n].kind = -1;
                items[n].off = w.len;
                CHECK(sg_bmsg_write_string(&w, "say \xe8i", 6, SG_BMSG_STR_NUL) == 0);
                n++;
            }
        }
    }
    items[n].off = w.len; /* the end */
    CHECK(!w.overflowed);
    return n;
}

static void case_truncated(void)
{
    struct item items[64];
    uint8_t full[256];
    size_t nitems = build_items(items, full, sizeof(full)), total = items[nitems].off;

    for (size_t cut = 0; cut <= total; cut++) {
        uint8_t *copy = unit_exact_copy(full, cut); /* ASan sees any byte past `cut` */
        struct sg_bmsg_reader r;
        size_t ok = 0;

        sg_bmsg_reader_init(&r, copy, cut);
        for (size_t i = 0; i < nitems; i++) {
            int fits = items[i + 1].off <= cut;

            if (items[i].kind < 0) {
                char s[64];
                enum sg_bmsg_str_end end;
                size_t n = sg_bmsg_read_string(&r, s, sizeof(s), 0, &end);

                if (fits) {
                    CHECK(n == 6 && end == SG_BMSG_STR_NUL && memcmp(s, "say \xe8i", 7) == 0);
                } else {
                    /* the bytes that came, then the end of the message */
                    CHECK(end == SG_BMSG_STR_END && r.overflowed);
                    CHECK_EQ(n, cut - items[i].off);
                }
            } else {
                uint32_t raw = 7;
                int err = sg_bmsg_read_num(&r, (enum sg_bmsg_num)items[i].kind, &raw);

                if (fits) {
                    CHECK(err == 0 && raw == items[i].raw);
                } else {
                    CHECK(err == SG_E_OVERFLOW && raw == 0 && r.overflowed);
                }
            }
            if (fits)
                ok = i + 1;
            CHECK(r.overflowed == !fits);
            if (!fits)
                break;
        }
        /* every read after the failure fails too, without moving */
        if (cut < total) {
            size_t pos = r.pos;

            CHECK(r.overflowed);
            CHECK_EQ(sg_bmsg_read_u8(&r), -1);
            CHECK_EQ(sg_bmsg_remaining(&r), 0);
            CHECK_EQ(r.pos, pos);
            /* decoding stopped at the failed item (a string consumes what came) */
            if (items[ok].kind >= 0)
                CHECK_EQ(r.pos, items[ok].off);
            else
                CHECK_EQ(r.pos, cut);
        } else {
            CHECK(!r.overflowed && ok == nitems && r.pos == total);
        }
        free(copy);
    }
}

static void case_writer_overflow(void)
{
    struct item items[64];
    uint8_t full[256];
    size_t nitems = build_items(items, full, sizeof(full)), total = items[nitems].off;

    for (size_t cap = 0; cap <= total; cap++) {
        uint8_t buf[256 + 8];
        struct sg_bmsg_writer w;
        size_t fitted = 0;

        memset(buf, 0xa5, sizeof(buf));
        sg_bmsg_writer_init(&w, buf, cap);
        for (size_t i = 0; i < nitems; i++) {
            int err = items[i].kind < 0
                          ? sg_bmsg_write_string(&w, "say \xe8i", 6, SG_BMSG_STR_NUL)
                          : sg_bmsg_write_num(&w, (enum sg_bmsg_num)items[i].kind, items[i].raw);
            int fits = items[i + 1].off <= cap; /* the items before it end earlier */

            if (err == 0)
                fitted = i + 1;
            CHECKF(err == (fits ? 0 : SG_E_OVERFLOW), "cap %zu item %zu: %d", cap, i, err);
        }
        /* the whole items that fitted, nothing of the first that did not */
        CHECK_EQ(w.len, items[fitted].off);
        CHECK(w.overflowed == (cap < total));
        CHECK(memcmp(buf, full, w.len) == 0);
        for (size_t i = w.len; i < sizeof(buf); i++)
            CHECK(buf[i] == 0xa5);
        /* sticky: even a byte that would fit is refused now */
        if (w.overflowed) {
            size_t len = w.len;

            CHECK(sg_bmsg_write_data(&w, "", 0) == SG_E_OVERFLOW || w.len == len);
            CHECK(sg_bmsg_write_u8(&w, 1) == SG_E_OVERFLOW);
            CHECK_EQ(w.len, len);
        }
    }

    /* a writer over nothing */
    {
        struct sg_bmsg_writer w;

        sg_bmsg_writer_init(&w, NULL, 0);
        CHECK(sg_bmsg_write_u8(&w, 1) == SG_E_OVERFLOW && w.overflowed && w.len == 0);
    }
}

/* ---- strings ---- */

/* Read one string from `in` and write it back: the same bytes. */
static void string_roundtrip(const uint8_t *in, size_t n, size_t cap, unsigned flags,
                             size_t want_len, enum sg_bmsg_str_end want_end, size_t want_pos)
{
    uint8_t *copy = unit_exact_copy(in, n), out[64];
    char s[64];
    struct sg_bmsg_reader r;
    struct sg_bmsg_writer w;
    enum sg_bmsg_str_end end = (enum sg_bmsg_str_end)99; /* none */
    size_t len;

    sg_bmsg_reader_init(&r, copy, n);
    len = sg_bmsg_read_string(&r, s, cap, flags, &end);
    CHECKF(len == want_len && end == want_end && r.pos == want_pos,
           "len %zu end %d pos %zu (cap %zu)", len, (int)end, r.pos, cap);
    CHECK(r.overflowed == (want_end == SG_BMSG_STR_END));
    if (cap)
        CHECK(s[len] == '\0' && memcmp(s, in, len) == 0);
    sg_bmsg_writer_init(&w, out, sizeof(out));
    CHECK(sg_bmsg_write_string(&w, s, len, end) == 0);
    CHECK(w.len == r.pos && memcmp(out, in, w.len) == 0);
    free(copy);
}

static void case_strings(void)
{
    static const uint8_t hi[] = {'h', 0x80, 0xe9, 0xfe, 0xff, '!', 0, 'x'};

    /* terminated, then more */
    string_roundtrip((const uint8_t *)"hello\0x", 7, 64, 0, 5, SG_BMSG_STR_NUL, 6);
    /* empty */
    string_roundtrip((const uint8_t *)"\0", 1, 64, 0, 0, SG_BMSG_STR_NUL, 1);
    /* unterminated at the end of the message: kept, and the reader marked */
    string_roundtrip((const uint8_t *)"hello", 5, 64, 0, 5, SG_BMSG_STR_END, 5);
    string_roundtrip((const uint8_t *)"", 0, 64, 0, 0, SG_BMSG_STR_END, 0);
    /* high bytes are kept; 0xff too, unless the game stops there */
    string_roundtrip(hi, sizeof(hi), 64, 0, 6, SG_BMSG_STR_NUL, 7);
    string_roundtrip(hi, sizeof(hi), 64, SG_BMSG_STR_STOP_FF, 4, SG_BMSG_STR_FF, 5);
    /* lines */
    string_roundtrip((const uint8_t *)"0x1 0x2\n0x3", 11, 64, SG_BMSG_STR_STOP_NL, 7,
                     SG_BMSG_STR_NL, 8);
    string_roundtrip((const uint8_t *)"0x1 0x2\n0x3", 11, 64, 0, 11, SG_BMSG_STR_END, 11);
    /* the bound: cap - 1 bytes, the rest (even the terminator) stays */
    string_roundtrip((const uint8_t *)"abcdef\0", 7, 4, 0, 3, SG_BMSG_STR_CUT, 3);
    string_roundtrip((const uint8_t *)"abc\0", 4, 4, 0, 3, SG_BMSG_STR_CUT, 3);
    string_roundtrip((const uint8_t *)"abc\0", 4, 5, 0, 3, SG_BMSG_STR_NUL, 4);
    /* exactly cap - 1 bytes up to the end: cut, not a read past the end */
    string_roundtrip((const uint8_t *)"abc", 3, 4, 0, 3, SG_BMSG_STR_CUT, 3);
    string_roundtrip((const uint8_t *)"abc", 3, 4, SG_BMSG_STR_STOP_FF, 3, SG_BMSG_STR_CUT, 3);
    /* cap 1: nothing stored, nothing consumed */
    string_roundtrip((const uint8_t *)"abc\0", 4, 1, 0, 0, SG_BMSG_STR_CUT, 0);

    /* cap 0: nothing at all */
    {
        struct sg_bmsg_reader r;
        enum sg_bmsg_str_end end;

        sg_bmsg_reader_init(&r, "abc", 3);
        CHECK(sg_bmsg_read_string(&r, NULL, 0, 0, &end) == 0 && end == SG_BMSG_STR_CUT);
        CHECK(r.pos == 0 && !r.overflowed);
    }
    /* a failed reader gives the end, even to a string it could "cut" */
    {
        struct sg_bmsg_reader r;
        enum sg_bmsg_str_end end;
        char s1[1] = {'x'};

        sg_bmsg_reader_init(&r, "abc\0", 4);
        CHECK(sg_bmsg_read_u32(&r) == 0x00636261 && sg_bmsg_read_u8(&r) == -1);
        CHECK(sg_bmsg_read_string(&r, s1, sizeof(s1), 0, &end) == 0 && end == SG_BMSG_STR_END);
        CHECK(s1[0] == '\0' && r.overflowed && r.pos == 4);
    }
    /* the games' 2048-byte buffer: a 3000-byte string is read in two */
    {
        uint8_t *big = malloc(3001);
        char *s = malloc(2048);
        struct sg_bmsg_reader r;
        enum sg_bmsg_str_end end;

        CHECK(big && s);
        memset(big, 'q', 3000);
        big[3000] = 0;
        sg_bmsg_reader_init(&r, big, 3001);
        CHECK(sg_bmsg_read_string(&r, s, 2048, 0, &end) == 2047 && end == SG_BMSG_STR_CUT);
        CHECK(sg_bmsg_read_string(&r, s, 2048, 0, &end) == 953 && end == SG_BMSG_STR_NUL);
        CHECK(r.pos == 3001 && !r.overflowed);
        free(big);
        free(s);
    }
    /* a string that does not fit is not written at all */
    {
        uint8_t out[5];
        struct sg_bmsg_writer w;

        sg_bmsg_writer_init(&w, out, sizeof(out));
        CHECK(sg_bmsg_write_string(&w, "abcd", 4, SG_BMSG_STR_NUL) == 0);
        sg_bmsg_writer_init(&w, out, sizeof(out));
        CHECK(sg_bmsg_write_string(&w, "abcde", 5, SG_BMSG_STR_NUL) == SG_E_OVERFLOW);
        CHECK(w.len == 0 && w.overflowed);
        sg_bmsg_writer_init(&w, out, sizeof(out));
        CHECK(sg_bmsg_write_string(&w, "abcde", 5, SG_BMSG_STR_END) == 0 && w.len == 5);
    }
}

/* ---- real data ---- */

static char *testdata_path(const char *rel)
{
    const char *root = getenv("SG_TESTDATA");
    char *p;

    if (!root)
        root = "../shared/testdata";
    p = malloc(strlen(root) + strlen(rel) + 2);
    if (!p)
        abort();
    sprintf(p, "%s/%s", root, rel);
    return p;
}

static uint8_t *load(const char *rel, size_t *len)
{
    char *path = testdata_path(rel);
    FILE *f = fopen(path, "rb");
    uint8_t *data = NULL;
    long n;

    CHECKF(f != NULL, "cannot open %s", path);
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
        data = malloc((size_t)n);
        if (data && fread(data, 1, (size_t)n, f) == (size_t)n) {
            *len = (size_t)n;
        } else {
            free(data);
            data = NULL;
        }
    }
    if (f)
        fclose(f);
    free(path);
    CHECK(data != NULL);
    return data;
}

/*
 * A NetQuake demo: the cd track line, then blocks of `long length, three
 * float view angles, message`.  Every header is read with the reader and
 * written again with the writer: the whole file comes back byte for byte,
 * and the walk ends exactly at the end of the file.
 */
static void nq_demo(const char *rel, const char *want_track, size_t min_blocks, bool nans)
{
    size_t len = 0, blocks = 0, biggest = 0, nonfinite = 0;
    uint8_t *file = load(rel, &len), *out;
    struct sg_bmsg_reader r;
    struct sg_bmsg_writer w;
    char track[16];
    enum sg_bmsg_str_end end;
    size_t n;

    if (!file)
        return;
    out = malloc(len);
    CHECK(out != NULL);
    sg_bmsg_reader_init(&r, file, len);
    sg_bmsg_writer_init(&w, out, len);

    n = sg_bmsg_read_string(&r, track, sizeof(track), SG_BMSG_STR_STOP_NL, &end);
    CHECK(end == SG_BMSG_STR_NL && strcmp(track, want_track) == 0);
    CHECK(sg_bmsg_write_string(&w, track, n, end) == 0);

    while (sg_bmsg_remaining(&r) > 0) {
        uint32_t angle[3];
        int32_t mlen = sg_bmsg_read_s32(&r);
        const uint8_t *msg;

        for (int i = 0; i < 3; i++) {
            float v;

            CHECK(sg_bmsg_read_numf(&r, SG_BMSG_ANGLE_FLOAT, &angle[i], &v) == 0);
            if (!isfinite(v))
                nonfinite++;
            else
                CHECKF(fabsf(v) <= 720.0f, "block %zu angle %d = %g", blocks, i, (double)v);
        }
        CHECKF(mlen > 0 && mlen <= 8000, "block %zu length %d", blocks, (int)mlen);
        if (r.overflowed || mlen <= 0 || mlen > 8000)
            break;
        msg = sg_bmsg_take(&r, (size_t)mlen);
        CHECK(msg != NULL);
        if (!msg)
            break;
        /* every message starts with a svc, never svc_bad */
        CHECK(msg[0] != 0);
        CHECK(sg_bmsg_write_s32(&w, mlen) == 0);
        for (int i = 0; i < 3; i++)
            CHECK(sg_bmsg_write_num(&w, SG_BMSG_ANGLE_FLOAT, angle[i]) == 0);
        CHECK(sg_bmsg_write_data(&w, msg, (size_t)mlen) == 0);
        blocks++;
        if ((size_t)mlen > biggest)
            biggest = (size_t)mlen;
    }
    CHECK(!r.overflowed && r.pos == len);
    CHECK(!w.overflowed && w.len == len && memcmp(out, file, len) == 0);
    CHECKF(blocks >= min_blocks, "%zu blocks", blocks);
    CHECKF((nonfinite > 0) == nans, "%zu angles are NaN", nonfinite);
    printf("%s: %zu blocks, largest message %zu bytes, %zu NaN angles\n", rel, blocks, biggest,
           nonfinite);
    free(out);
    free(file);
}

/* NetQuake 15 (vektar), FitzQuake 666 (vgio), DarkPlaces' own recording
 * of the quakespasm session (the three headers are the same layout).  The
 * vgio demo's writer put small negative integers where the angles go:
 * read as floats they are NaNs with payloads, and come back bit for bit. */
static void case_nq_demo(void)
{
    nq_demo("nq/demos/vektar_demo1.dem", "-1", 4788, false);
}
static void case_nq_demo_fitz(void)
{
    nq_demo("nq/demos/vgio_test.dem", "2", 168, true);
}
static void case_nq_demo_dp(void)
{
    nq_demo("nq/sessions/quakespasm_darkplaces/client_demo.dem", "-1", 394, false);
}

/*
 * The QuakeWorld capture: mvdsv's challenge reply, `-1 'c' challenge NUL`
 * then binary pairs `long magic, long bits` (FTEX, FTE2, MVD1), read with
 * the reader, written again identically; the FTE bits select float
 * coordinates.
 */
/* OOB header and S2C_CHALLENGE */
static const uint8_t CHALLENGE[5] = {0xff, 0xff, 0xff, 0xff, 'c'};

struct qw_found {
    int challenges;
};

static int qw_datagram(const struct pcap_udp *u, void *arg)
{
    struct qw_found *found = arg;
    struct sg_bmsg_reader r;
    struct sg_bmsg_writer w;
    uint8_t out[256];
    char num[32];
    enum sg_bmsg_str_end end;
    size_t n;
    uint32_t magic[4], bits[4];
    int pairs = 0;

    if (u->sport != 27500 || u->len < 6 || u->len > sizeof(out) ||
        memcmp(u->data, CHALLENGE, 5) != 0)
        return 0;
    sg_bmsg_reader_init(&r, u->data, u->len);
    sg_bmsg_writer_init(&w, out, sizeof(out));
    CHECK(sg_bmsg_read_u32(&r) == 0xffffffffu && sg_bmsg_read_u8(&r) == 'c');
    n = sg_bmsg_read_string(&r, num, sizeof(num), 0, &end);
    CHECK(end == SG_BMSG_STR_NUL && n > 0);
    while (sg_bmsg_remaining(&r) >= 8 && pairs < 4) {
        magic[pairs] = sg_bmsg_read_u32(&r);
        bits[pairs] = sg_bmsg_read_u32(&r);
        pairs++;
    }
    CHECK(!r.overflowed && sg_bmsg_remaining(&r) == 0);
    CHECK_EQ(pairs, 3);
    CHECK_EQ(magic[0], 0x58455446); /* FTEX */
    CHECK_EQ(magic[1], 0x32455446); /* FTE2 */
    CHECK_EQ(magic[2], 0x3144564d); /* MVD1 */
    CHECK(sg_bmsg_sizes_qw(bits[0]).coord == SG_BMSG_COORD_FLOAT);

    sg_bmsg_write_u32(&w, 0xffffffffu);
    sg_bmsg_write_u8(&w, 'c');
    sg_bmsg_write_string(&w, num, n, end);
    for (int i = 0; i < pairs; i++) {
        sg_bmsg_write_u32(&w, magic[i]);
        sg_bmsg_write_u32(&w, bits[i]);
    }
    CHECK(!w.overflowed && w.len == u->len && memcmp(out, u->data, u->len) == 0);
    found->challenges++;
    return 0;
}

static void case_qw_challenge(void)
{
    char *path = testdata_path("qw/sessions/ezquake_mvdsv/capture.pcap");
    struct qw_found found = {0};

    CHECK(pcap_udp_foreach(path, qw_datagram, &found) == 0);
    CHECKF(found.challenges >= 1, "%d challenge replies", found.challenges);
    free(path);
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"ints", case_ints},
        {"num_roundtrip", case_num_roundtrip},
        {"num_values", case_num_values},
        {"sizes", case_sizes},
        {"truncated", case_truncated},
        {"writer_overflow", case_writer_overflow},
        {"strings", case_strings},
        {"nq_demo", case_nq_demo},
        {"nq_demo_fitz", case_nq_demo_fitz},
        {"nq_demo_dp", case_nq_demo_dp},
        {"qw_challenge", case_qw_challenge},
    };
    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
