/*
 * Tests of the Quake 3 bit reader and writer (protocols/q3/msg.c).
 *
 * Usage: q3_msg_test CASE   (one meson test per case)
 *
 * Expected values follow ioquake3's MSG_ReadBits / MSG_WriteBits,
 * including their quirks (see msg.h).  The demo cases read real demos
 * from $SG_TESTDATA and fail when it is missing.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/q3/huffman.h"
#include "tests/unit.h"
#include "protocols/q3/msg.h"

static uint64_t rng_state = 0x853c49e6748fea9bull;

static uint32_t rng(void)
{
    return unit_rng(&rng_state);
}

#define exact_copy unit_exact_copy

/*
 * What the game's reader returns for `value` written with `bits`: the
 * value masked to its width; for a signed width W the sign comes from bit
 * W - (W & 7) - 1, and there is none when that is below bit 0 or W is 32.
 */
static int32_t expected(int32_t value, int bits)
{
    int w = bits < 0 ? -bits : bits, n = w - (w & 7);
    uint32_t v = (uint32_t)value & (0xffffffffu >> (32 - w));

    if (bits < 0 && n > 0 && n < 32 && (v >> (n - 1)) & 1)
        v |= ~0u << n;
    return (int32_t)v;
}

/* ------------------------------------------------------------------ */
/* Bits                                                                 */

/* Every width from -32 to 32, many values, at every alignment. */
static void test_bits_roundtrip(void)
{
    enum { OPS = 20000 };
    static int32_t values[OPS];
    static int widths[OPS];
    static uint8_t buf[OPS * 6];
    struct sg_q3_msg w, r;
    uint8_t *exact;
    size_t n = 0;

    /* Each width with its edge values, then a random mix. */
    for (int bits = -32; bits <= 32; bits++) {
        int wd = bits < 0 ? -bits : bits;
        uint32_t top = wd ? 1u << (wd - 1) : 0;
        const uint32_t edges[] = {0, 1, top, top - 1, ~0u, top | 1, rng(), rng()};

        for (size_t k = 0; bits != 0 && k < sizeof(edges) / sizeof(edges[0]); k++) {
            widths[n] = bits;
            values[n++] = (int32_t)edges[k];
        }
    }
    while (n < OPS) {
        int bits = (int)(rng() % 65) - 32;

        if (bits == 0)
            continue;
        widths[n] = bits;
        values[n++] = (int32_t)rng();
    }

    sg_q3_msg_init_write(&w, buf, sizeof(buf));
    for (size_t i = 0; i < n; i++)
        sg_q3_msg_write_bits(&w, values[i], widths[i]);
    CHECK(!w.overflowed);
    CHECK_EQ(sg_q3_msg_bytes(&w), (w.bit >> 3) + 1);

    exact = exact_copy(buf, sg_q3_msg_bytes(&w));
    sg_q3_msg_init_read(&r, exact, sg_q3_msg_bytes(&w));
    for (size_t i = 0; i < n && !failures; i++) {
        int32_t got = sg_q3_msg_read_bits(&r, widths[i]);

        if (got != expected(values[i], widths[i])) {
            fprintf(stderr, "op %zu: %d bits of 0x%08x read as 0x%08x, expected 0x%08x\n", i,
                    widths[i], (unsigned)values[i], (unsigned)got,
                    (unsigned)expected(values[i], widths[i]));
            failures++;
        }
    }
    CHECK_EQ(r.bit, w.bit);
    CHECK(!r.overflowed);
    CHECK_EQ(r.readcount, r.size);
    free(exact);
}

/* The game's sign-extension quirk and the value layout, pinned. */
static void test_bits_quirks(void)
{
    uint8_t buf[64];
    struct sg_q3_msg w, r;

    sg_q3_msg_init_write(&w, buf, sizeof(buf));
    sg_q3_msg_write_bits(&w, -1, -5);     /* 5 raw bits: not extended */
    sg_q3_msg_write_bits(&w, 0x080, -12); /* extended from bit 7 */
    sg_q3_msg_write_bits(&w, 0x800, -12); /* bit 11 set, bit 7 clear: positive */
    sg_q3_msg_write_bits(&w, -2, -16);
    sg_q3_msg_write_bits(&w, -3, -32);
    sg_q3_msg_write_bits(&w, 0x1ff, 9);
    CHECK(!w.overflowed);

    sg_q3_msg_init_read(&r, buf, sg_q3_msg_bytes(&w));
    CHECK_EQ(sg_q3_msg_read_bits(&r, -5), 31);
    CHECK_EQ(sg_q3_msg_read_bits(&r, -12), -128);
    CHECK_EQ(sg_q3_msg_read_bits(&r, -12), 0x800);
    CHECK_EQ(sg_q3_msg_read_bits(&r, -16), -2);
    CHECK_EQ(sg_q3_msg_read_bits(&r, -32), -3);
    CHECK_EQ(sg_q3_msg_read_bits(&r, 9), 0x1ff);
    CHECK(!r.overflowed);

    /* Bad widths are errors. */
    sg_q3_msg_init_read(&r, buf, sizeof(buf));
    CHECK_EQ(sg_q3_msg_read_bits(&r, 0), 0);
    CHECK(r.overflowed);
    sg_q3_msg_init_write(&w, buf, sizeof(buf));
    sg_q3_msg_write_bits(&w, 1, 33);
    CHECK(w.overflowed);
}

/* The exact bytes of small messages, and the game's cursize. */
static void test_bits_layout(void)
{
    uint8_t buf[16];
    struct sg_q3_msg w;

    /* Byte 0 is the 2-bit code "0, 1": four of them fill one byte. */
    sg_q3_msg_init_write(&w, buf, sizeof(buf));
    for (int i = 0; i < 4; i++)
        sg_q3_msg_write_byte(&w, 0);
    CHECK_EQ(w.bit, 8);
    CHECK_EQ(buf[0], 0xaa);
    CHECK_EQ(buf[1], 0x00);
    CHECK_EQ(sg_q3_msg_bytes(&w), 2); /* the game sends a byte more */

    /* Raw bits go first, LSB first; then the code of the high byte. */
    sg_q3_msg_init_write(&w, buf, sizeof(buf));
    sg_q3_msg_write_bits(&w, 0x005, 11); /* raw 101, then byte 0 */
    CHECK_EQ(w.bit, 5);
    CHECK_EQ(buf[0], 0x15); /* 1,0,1 then 0,1 */
    CHECK_EQ(sg_q3_msg_bytes(&w), 1);
    sg_q3_msg_write_bits(&w, 0, 1);
    CHECK_EQ(buf[0], 0x15);
    sg_q3_msg_write_bits(&w, 3, 2);
    CHECK_EQ(buf[0], 0xd5);
    CHECK_EQ(w.bit, 8);
    CHECK_EQ(sg_q3_msg_bytes(&w), 2);
}

/* ------------------------------------------------------------------ */
/* OOB mode                                                             */

static void test_oob(void)
{
    uint8_t buf[16], *exact;
    struct sg_q3_msg w, r;
    float f;

    sg_q3_msg_init_write(&w, buf, sizeof(buf));
    sg_q3_msg_oob(&w, true);
    sg_q3_msg_write_long(&w, 0x12345678);
    sg_q3_msg_write_short(&w, -2);
    sg_q3_msg_write_byte(&w, 0xab);
    CHECK_EQ(sg_q3_msg_bytes(&w), 7);
    CHECK_EQ(w.bit, 56);
    CHECK(memcmp(buf, "\x78\x56\x34\x12\xfe\xff\xab", 7) == 0);
    /* Then the bit stream, from bit 56. */
    sg_q3_msg_oob(&w, false);
    sg_q3_msg_write_byte(&w, 0);
    CHECK_EQ(buf[7], 0x02);
    CHECK_EQ(sg_q3_msg_bytes(&w), 8);
    sg_q3_msg_write_bits(&w, 1, 12);
    CHECK(!w.overflowed);
    /* Odd widths are not OOB values. */
    sg_q3_msg_oob(&w, true);
    sg_q3_msg_write_bits(&w, 1, 12);
    CHECK(w.overflowed);

    sg_q3_msg_init_read(&r, buf, 7 + 1);
    sg_q3_msg_oob(&r, true);
    CHECK_EQ(sg_q3_msg_read_long(&r), 0x12345678);
    CHECK_EQ(sg_q3_msg_read_bits(&r, 16), -2); /* unsigned 16 bits, read into a short */
    r.readcount -= 2;
    r.bit -= 16;
    CHECK_EQ(sg_q3_msg_read_short(&r), -2);
    CHECK_EQ(sg_q3_msg_read_bits(&r, -8), (int8_t)0xab);
    CHECK_EQ(r.readcount, 7);
    CHECK_EQ(r.bit, 56);
    sg_q3_msg_oob(&r, false);
    CHECK_EQ(sg_q3_msg_read_byte(&r), 0);
    CHECK_EQ(r.readcount, 8);
    CHECK(!r.overflowed);

    /* Past the end, and odd widths. */
    exact = exact_copy((const uint8_t *)"\x01\x80\xff", 3);
    sg_q3_msg_init_read(&r, exact, 3);
    sg_q3_msg_oob(&r, true);
    CHECK_EQ(sg_q3_msg_read_byte(&r), 1);
    CHECK_EQ(sg_q3_msg_read_bits(&r, 12), 0);
    CHECK(r.overflowed);
    CHECK_EQ(r.readcount, 4);
    sg_q3_msg_init_read(&r, exact, 3);
    sg_q3_msg_oob(&r, true);
    CHECK_EQ(sg_q3_msg_read_byte(&r), 1);
    CHECK_EQ(sg_q3_msg_read_char(&r), -128);
    CHECK_EQ(sg_q3_msg_read_short(&r), -1);
    CHECK(r.overflowed);
    CHECK_EQ(sg_q3_msg_read_byte(&r), -1); /* sticky, though a byte is left */
    sg_q3_msg_init_read(&r, exact, 3);
    sg_q3_msg_oob(&r, true);
    CHECK_EQ(sg_q3_msg_read_long(&r), -1);
    f = sg_q3_msg_read_float(&r);
    CHECK(f == -1.0f);
    free(exact);

    /* Writer capacity. */
    exact = exact_copy((const uint8_t *)"\0\0\0", 3);
    sg_q3_msg_init_write(&w, exact, 3);
    sg_q3_msg_oob(&w, true);
    sg_q3_msg_write_short(&w, 7);
    sg_q3_msg_write_short(&w, 7);
    CHECK(w.overflowed);
    CHECK_EQ(sg_q3_msg_bytes(&w), 2);
    sg_q3_msg_write_byte(&w, 7); /* would fit, but the flag is sticky */
    CHECK_EQ(sg_q3_msg_bytes(&w), 2);
    free(exact);
}

/* ------------------------------------------------------------------ */
/* Strings                                                              */

static void test_strings(void)
{
    uint8_t buf[256];
    char out[64], raw[64];
    struct sg_q3_msg w, r;

    sg_q3_msg_init_write(&w, buf, sizeof(buf));
    sg_q3_msg_write_string(&w,
                           "a%b\x80\xff"
                           "c",
                           6);
    sg_q3_msg_write_string(&w, "line1\nline2", 11);
    sg_q3_msg_write_string(&w, "abcdefghij", 10);
    sg_q3_msg_write_string(&w, "", 0);
    sg_q3_msg_write_string(&w, "\x7f~", 2);
    CHECK(!w.overflowed);

    sg_q3_msg_init_read(&r, buf, sg_q3_msg_bytes(&w));
    /* Substitutions, and the raw bytes beside them. */
    CHECK_EQ(sg_q3_msg_read_string(&r, out, sizeof(out), raw), 6);
    CHECK(strcmp(out, "a.b..c") == 0);
    CHECK(memcmp(raw,
                 "a%b\x80\xff"
                 "c",
                 7) == 0);
    /* Line reads stop at the newline, which is consumed. */
    CHECK_EQ(sg_q3_msg_read_string_line(&r, out, sizeof(out), NULL), 5);
    CHECK(strcmp(out, "line1") == 0);
    CHECK_EQ(sg_q3_msg_read_string_line(&r, out, sizeof(out), NULL), 5);
    CHECK(strcmp(out, "line2") == 0);
    /* Too long: cap - 1 stored, one more byte consumed and lost. */
    CHECK_EQ(sg_q3_msg_read_string(&r, out, 5, raw), 4);
    CHECK(strcmp(out, "abcd") == 0);
    CHECK(strcmp(raw, "abcd") == 0);
    CHECK_EQ(sg_q3_msg_read_string(&r, out, sizeof(out), NULL), 5);
    CHECK(strcmp(out, "fghij") == 0);
    CHECK_EQ(sg_q3_msg_read_string(&r, out, sizeof(out), NULL), 0);
    CHECK(strcmp(out, "") == 0);
    CHECK_EQ(sg_q3_msg_read_string(&r, out, sizeof(out), NULL), 2);
    CHECK(strcmp(out, "\x7f~") == 0);
    CHECK(!r.overflowed);
    /* At the end of the message a string just ends: the padding after the
     * last code never decodes (the all-zero code is 9 bits long). */
    CHECK_EQ(sg_q3_msg_read_string(&r, out, sizeof(out), NULL), 0);
    CHECK(r.overflowed);
    CHECK_EQ(sg_q3_msg_read_string(&r, out, 0, NULL), 0);
}

/* ------------------------------------------------------------------ */
/* Ends of buffers                                                      */

static void test_read_past_end(void)
{
    uint8_t buf[16], *exact;
    struct sg_q3_msg w, r;
    uint8_t data[4];

    /* Eight 5-bit codes (byte 1) end exactly on byte 5. */
    sg_q3_msg_init_write(&w, buf, sizeof(buf));
    for (int i = 0; i < 8; i++)
        sg_q3_msg_write_byte(&w, 1);
    CHECK_EQ(w.bit, 40);
    CHECK_EQ(sg_q3_msg_bytes(&w), 6);

    /* With the game's extra byte everything reads back. */
    exact = exact_copy(buf, 6);
    sg_q3_msg_init_read(&r, exact, 6);
    for (int i = 0; i < 8; i++)
        CHECK_EQ(sg_q3_msg_read_byte(&r), 1);
    CHECK(!r.overflowed);
    CHECK_EQ(r.readcount, 6);
    CHECK_EQ(sg_q3_msg_bits_left(&r), 8);
    free(exact);

    /* Without it the last code still decodes, but counts as past the end. */
    exact = exact_copy(buf, 5);
    sg_q3_msg_init_read(&r, exact, 5);
    for (int i = 0; i < 7; i++)
        CHECK_EQ(sg_q3_msg_read_byte(&r), 1);
    CHECK(!r.overflowed);
    CHECK_EQ(sg_q3_msg_peek_byte(&r), -1);
    CHECK(!r.overflowed);
    CHECK_EQ(r.bit, 35);
    CHECK_EQ(sg_q3_msg_read_bits(&r, 8), 1);
    CHECK(r.overflowed);
    CHECK_EQ(r.readcount, 6);
    CHECK_EQ(sg_q3_msg_bits_left(&r), 0);
    CHECK_EQ(sg_q3_msg_read_bits(&r, 8), 0);
    CHECK_EQ(sg_q3_msg_read_byte(&r), -1);
    CHECK_EQ(sg_q3_msg_read_long(&r), -1);
    CHECK(sg_q3_msg_read_float(&r) == -1.0f);
    sg_q3_msg_read_data(&r, data, sizeof(data));
    CHECK(memcmp(data, "\xff\xff\xff\xff", 4) == 0);
    free(exact);

    /* A code that needs bits past the end fails as a whole. */
    exact = exact_copy(buf, 4);
    sg_q3_msg_init_read(&r, exact, 4);
    for (int i = 0; i < 6; i++)
        CHECK_EQ(sg_q3_msg_read_byte(&r), 1);
    CHECK_EQ(sg_q3_msg_read_short(&r), -1); /* bits 30..39 needed */
    CHECK(r.overflowed);
    CHECK_EQ(r.readcount, 5);
    CHECK_EQ(r.bit, 33);
    free(exact);

    /* Raw bits past the end. */
    exact = exact_copy((const uint8_t *)"\xff", 1);
    sg_q3_msg_init_read(&r, exact, 1);
    CHECK_EQ(sg_q3_msg_read_bits(&r, 5), 31);
    CHECK_EQ(sg_q3_msg_read_bits(&r, 4), 0);
    CHECK(r.overflowed);
    CHECK_EQ(r.readcount, 2);
    CHECK_EQ(r.bit, 5);
    free(exact);

    /* An empty message. */
    sg_q3_msg_init_read(&r, buf, 0);
    CHECK_EQ(sg_q3_msg_read_byte(&r), -1);
    CHECK(r.overflowed);
}

static void test_write_overflow(void)
{
    struct sg_q3_msg w;
    uint8_t *buf = calloc(4, 1);

    /* 2-bit codes: 15 fit below bit 31; the 16th would make cursize 5. */
    sg_q3_msg_init_write(&w, buf, 4);
    for (int i = 0; i < 15; i++)
        sg_q3_msg_write_byte(&w, 0);
    CHECK(!w.overflowed);
    CHECK_EQ(sg_q3_msg_bytes(&w), 4);
    sg_q3_msg_write_byte(&w, 0);
    CHECK(w.overflowed);
    CHECK_EQ(sg_q3_msg_bytes(&w), 4);
    sg_q3_msg_write_bits(&w, 0, 1);
    CHECK_EQ(sg_q3_msg_bytes(&w), 4);
    free(buf);

    /* A code crossing the capacity. */
    buf = calloc(2, 1);
    sg_q3_msg_init_write(&w, buf, 2);
    sg_q3_msg_write_bits(&w, 0, 5);
    sg_q3_msg_write_byte(&w, 'a'); /* 8 bits: to bit 13 */
    CHECK(!w.overflowed);
    sg_q3_msg_write_byte(&w, 'a');
    CHECK(w.overflowed);
    CHECK_EQ(sg_q3_msg_bytes(&w), 2);
    free(buf);

    /* Raw bits crossing it. */
    buf = calloc(1, 1);
    sg_q3_msg_init_write(&w, buf, 1);
    sg_q3_msg_write_bits(&w, 0x7f, 7);
    CHECK(!w.overflowed);
    CHECK_EQ(buf[0], 0x7f);
    sg_q3_msg_write_bits(&w, 1, 2);
    CHECK(w.overflowed);
    free(buf);

    /* Nothing fits a zero-sized buffer. */
    sg_q3_msg_init_write(&w, NULL, 0);
    sg_q3_msg_write_bits(&w, 1, 1);
    CHECK(w.overflowed);
    CHECK_EQ(sg_q3_msg_bytes(&w), 0);
}

static void test_float_data(void)
{
    static const float floats[] = {0.0f, -0.0f, 3.5f, -1234.5678f, 1e30f};
    uint8_t buf[128], data[5] = {0, 1, 0x7f, 0x80, 0xff}, back[5];
    struct sg_q3_msg w, r;

    sg_q3_msg_init_write(&w, buf, sizeof(buf));
    for (size_t i = 0; i < 5; i++)
        sg_q3_msg_write_float(&w, floats[i]);
    sg_q3_msg_write_data(&w, data, sizeof(data));
    CHECK(!w.overflowed);
    sg_q3_msg_init_read(&r, buf, sg_q3_msg_bytes(&w));
    for (size_t i = 0; i < 5; i++) {
        float f = sg_q3_msg_read_float(&r);

        CHECK(memcmp(&f, &floats[i], sizeof(f)) == 0);
    }
    sg_q3_msg_read_data(&r, back, sizeof(back));
    CHECK(memcmp(back, data, sizeof(data)) == 0);
    CHECK(!r.overflowed);
}

/* ------------------------------------------------------------------ */
/* Real demos                                                           */

struct demo {
    const char *path;
    int messages; /* records before the end marker or the cut */
    bool ended;   /* has the -1/-1 end marker */
    int32_t seq, ack, cmdseq;
};

static const struct demo demos[] = {
    {"q3/demos/cpma_core_gameplay.dm_68", 72, true, 1013, 41, 23},
    {"q3/demos/cpma_one_frag.dm_68", 635, true, 315, 20, 23},
    {"q3/demos/osp_chat.dm_68", 533, true, 231, 4, 3},
    {"q3/demos/osp_team_chat.dm_68", 1644, true, 3758, 30, 145},
    {"q3/demos/truncated.dm_68", 238, false, 125691, 4453, 1270},
    {"q3/sessions/ioq68/client_demo.dm_68", 400, true, 22, 2, 3},
    {"q3/sessions/ioq71/client_demo.dm_71", 401, true, 22, 2, 3},
    {"q3/sessions/oa71/client_demo.dm_71", 393, true, 36, 2, 3},
};

static uint8_t *load(const char *rel, size_t *len)
{
    const char *root = getenv("SG_TESTDATA");
    char path[4096];
    uint8_t *data = NULL;
    long size;
    FILE *f;

    if (!root || !*root) {
        fprintf(stderr, "SG_TESTDATA is not set\n");
        return NULL;
    }
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
        data = malloc((size_t)size);
        if (data && fread(data, 1, (size_t)size, f) != (size_t)size) {
            free(data);
            data = NULL;
        }
        *len = (size_t)size;
    }
    fclose(f);
    if (!data)
        fprintf(stderr, "%s: cannot read\n", path);
    return data;
}

static int32_t le32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

/*
 * The first message of each demo is a gamestate: reliable acknowledge,
 * svc_gamestate, command sequence, the configstrings (the server info
 * first), then the baselines.  Writing the values read gives the very same
 * bits, which checks the encoder on real data.
 */
static void test_demo_gamestate(void)
{
    for (size_t d = 0; d < sizeof(demos) / sizeof(demos[0]); d++) {
        size_t len, msglen, count = 0;
        uint8_t *file = load(demos[d].path, &len), *msg, *out;
        struct sg_q3_msg r, w;
        char s[SG_Q3_BIG_INFO_STRING], raw[SG_Q3_BIG_INFO_STRING];
        int op;

        if (!file) {
            failures++;
            continue;
        }
        CHECK(len > 8);
        CHECK_EQ(le32(file), demos[d].seq);
        msglen = (size_t)le32(file + 4);
        CHECK(msglen > 0 && msglen < SG_Q3_MAX_MSGLEN && 8 + msglen <= len);
        msg = exact_copy(file + 8, msglen);
        out = malloc(SG_Q3_MAX_MSGLEN);

        sg_q3_msg_init_read(&r, msg, msglen);
        sg_q3_msg_init_write(&w, out, SG_Q3_MAX_MSGLEN);
        CHECK_EQ(sg_q3_msg_read_long(&r), demos[d].ack);
        CHECK_EQ(sg_q3_msg_read_byte(&r), 2); /* svc_gamestate */
        CHECK_EQ(sg_q3_msg_read_long(&r), demos[d].cmdseq);
        sg_q3_msg_write_long(&w, demos[d].ack);
        sg_q3_msg_write_byte(&w, 2);
        sg_q3_msg_write_long(&w, demos[d].cmdseq);

        while ((op = sg_q3_msg_read_byte(&r)) == 3) { /* svc_configstring */
            int index = sg_q3_msg_read_short(&r);
            size_t n = sg_q3_msg_read_string(&r, s, sizeof(s), raw);

            CHECK(index >= 0 && index < 1024);
            if (count == 0) {
                CHECK_EQ(index, 0);
                CHECK(s[0] == '\\' && strstr(s, "\\sv_hostname\\") != NULL);
            }
            sg_q3_msg_write_byte(&w, 3);
            sg_q3_msg_write_short(&w, index);
            sg_q3_msg_write_string(&w, raw, n);
            count++;
        }
        CHECK_EQ(op, 4); /* svc_baseline */
        sg_q3_msg_write_byte(&w, op);
        CHECK(count >= 2);
        CHECK(!r.overflowed);
        CHECK(!w.overflowed);

        /* Same bits up to here. */
        CHECK_EQ(w.bit, r.bit);
        CHECK(memcmp(out, msg, r.bit / 8) == 0);
        CHECK(((out[r.bit / 8] ^ msg[r.bit / 8]) & ((1u << (r.bit % 8)) - 1)) == 0);

        free(out);
        free(msg);
        free(file);
    }
}

/* Every record of each demo starts with a sane acknowledge and opcode. */
static void test_demo_walk(void)
{
    for (size_t d = 0; d < sizeof(demos) / sizeof(demos[0]); d++) {
        size_t len, off = 0;
        uint8_t *file = load(demos[d].path, &len);
        int messages = 0, gamestates = 0;
        bool ended = false;

        if (!file) {
            failures++;
            continue;
        }
        while (off + 8 <= len) {
            int32_t seq = le32(file + off), n = le32(file + off + 4);
            struct sg_q3_msg r;
            uint8_t *msg;
            int32_t ack;
            int op;

            if (seq == -1 && n == -1) {
                ended = true;
                break;
            }
            if (n <= 0 || (size_t)n > len - off - 8)
                break; /* cut short */
            msg = exact_copy(file + off + 8, (size_t)n);
            sg_q3_msg_init_read(&r, msg, (size_t)n);
            ack = sg_q3_msg_read_long(&r);
            op = sg_q3_msg_read_byte(&r);
            CHECK(!r.overflowed);
            CHECK(ack >= demos[d].ack && ack < demos[d].ack + 100000);
            /* svc_gamestate, svc_serverCommand or svc_snapshot */
            CHECK(op == 2 || op == 5 || op == 7);
            gamestates += op == 2;
            free(msg);
            off += 8 + (size_t)n;
            messages++;
        }
        CHECK_EQ(messages, demos[d].messages);
        CHECK_EQ(ended, demos[d].ended);
        CHECK_EQ(gamestates, 1);
        free(file);
    }
}

/* ------------------------------------------------------------------ */

static const struct unit_case cases[] = {
    {"bits_roundtrip", test_bits_roundtrip},
    {"bits_quirks", test_bits_quirks},
    {"bits_layout", test_bits_layout},
    {"oob", test_oob},
    {"strings", test_strings},
    {"read_past_end", test_read_past_end},
    {"write_overflow", test_write_overflow},
    {"float_data", test_float_data},
    {"demo_gamestate", test_demo_gamestate},
    {"demo_walk", test_demo_walk},
};

int main(int argc, char **argv)
{
    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
