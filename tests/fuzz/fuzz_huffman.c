/*
 * fuzz_huffman: the two Quake 3 Huffman coders (protocols/q3/huffman.h)
 * and the bounded bit reader (protocols/q3/msg.h).
 *
 * Input: any bytes, used three ways.
 *
 *  1. The whole input as a fixed-Huffman bit stream: decoded symbol by
 *     symbol (get_sym and decode_sym must agree up to the first NYT code),
 *     in bulk (sg_q3_huff_decode must stop at the same bit with the same
 *     bytes), then the symbols are encoded again (put_sym and the bulk
 *     encoder) and must give back exactly the bits they came from; an
 *     encode into a short buffer must stop cleanly at a code boundary.
 *  2. The whole input as the adaptive-Huffman body of a `connect` packet
 *     (decompressed, bounded by the game's buffer), and as plain bytes
 *     that the adaptive compressor packs and the decompressor must give
 *     back unchanged.
 *  3. A bit-reader program:
 *
 *         u8  P                program length
 *         u8  flags            bit 0: start in OOB (byte) mode
 *         P   program bytes    one op each; read_bits takes a second byte
 *         ... data             what the reader reads
 *
 *     op = byte & 15, arg = byte >> 4:
 *       0 read_bits: next byte w, width (w & 31) + 1, signed if w & 0x20,
 *         w >= 0xc0 an invalid width (0, 33 or -33)
 *       1 read_byte  2 read_char  3 read_short  4 read_long  5 read_float
 *       6 peek_byte  7 read_string  8 read_string_line (cap from arg)
 *       9 read_data of arg * 5 bytes  10 OOB on  11 OOB off  12 bits_left
 *       13-15 read_bits of width arg + 17 (17..32), signed when odd
 *     The reader's invariants are checked after every op, and a padded
 *     reader (junk after the data) running the same program must agree
 *     with it at every step.  Every value
 *     read before the first mode switch, cut string or read past the end
 *     is then written with the writer in the same mode (into a malloc'd
 *     buffer: the writer zeroes as it goes, so the bits after the last one
 *     written must be zero) and read back: the values must agree (in their
 *     width; the NYT code may spill a bit above it).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "protocols/error.h"
#include "protocols/q3/huffman.h"
#include "protocols/q3/msg.h"

/* ------------------------------------------------------------------ */
/* 1. The fixed coder                                                   */

/* The bit `i` of `p`. */
static unsigned bit_at(const uint8_t *p, size_t i)
{
    return (p[i >> 3] >> (i & 7)) & 1u;
}

static void fuzz_fixed(const uint8_t *data, size_t size)
{
    const struct sg_q3_huff *h = sg_q3_huff_fixed();
    size_t max_syms = size * 8 + 1, nsyms = 0, bit = 0, bit2 = 0, bulk_bit = 0, total = 0;
    uint8_t *syms = malloc(max_syms), *bulk = malloc(max_syms), *out = calloc(1, size + 1);
    uint8_t *out2 = calloc(1, size + 1);
    int n;

    FUZZ_CHECK(syms && bulk && out && out2);

    /* symbol by symbol: get_sym stops at NYT, decode_sym returns it */
    for (;;) {
        size_t before = bit, b2 = bit2;
        uint8_t sym;
        int s = sg_q3_huff_decode_sym(h, data, size, &bit2);
        int err = sg_q3_huff_get_sym(h, data, size, &bit, &sym);

        FUZZ_CHECK(b2 == before);
        if (err < 0) {
            FUZZ_CHECK(err == SG_E_HUFFMAN && bit == before);
            FUZZ_CHECK(s == SG_Q3_HUFF_NYT ? bit2 > before && bit2 <= size * 8
                                           : s == SG_E_HUFFMAN && bit2 == before);
            break;
        }
        FUZZ_CHECK(s == sym && bit2 == bit && bit > before && bit <= size * 8);
        FUZZ_CHECK(nsyms < max_syms);
        syms[nsyms++] = sym;
    }

    /* in bulk: the same bytes, stopping at the same bit */
    n = sg_q3_huff_decode(h, data, size, &bulk_bit, bulk, nsyms);
    FUZZ_CHECK(n == (int)nsyms && bulk_bit == bit && memcmp(bulk, syms, nsyms) == 0);
    bulk_bit = 0;
    n = sg_q3_huff_decode(h, data, size, &bulk_bit, bulk, nsyms + 1);
    FUZZ_CHECK(n == SG_E_HUFFMAN && bulk_bit == bit && memcmp(bulk, syms, nsyms) == 0);

    /* encoded again, one by one and in bulk: exactly the input's bits */
    for (size_t i = 0; i < nsyms; i++) {
        uint32_t code;
        int len = sg_q3_huff_code(h, syms[i], &code);

        FUZZ_CHECK(len > 0 && len <= 32);
        total += (size_t)len;
    }
    FUZZ_CHECK(total == bit);
    bit2 = 0;
    for (size_t i = 0; i < nsyms; i++)
        FUZZ_CHECK(sg_q3_huff_put_sym(h, out, size, &bit2, syms[i]) == 0);
    FUZZ_CHECK(bit2 == bit);
    bit2 = 0;
    FUZZ_CHECK(sg_q3_huff_encode(h, out2, size, &bit2, syms, nsyms) == (int)nsyms);
    FUZZ_CHECK(bit2 == bit);
    for (size_t i = 0; i < bit; i++)
        FUZZ_CHECK(bit_at(out, i) == bit_at(data, i) && bit_at(out2, i) == bit_at(data, i));
    for (size_t i = bit; i < size * 8; i++)
        FUZZ_CHECK(bit_at(out, i) == 0 && bit_at(out2, i) == 0);

    /* into half the room: stops after the last whole code that fits */
    if (nsyms > 0) {
        size_t cap = size / 2, half_bit = 0, got = 0, check_bit = 0;

        memset(out2, 0, size + 1);
        n = sg_q3_huff_encode(h, out2, cap, &half_bit, syms, nsyms);
        FUZZ_CHECK(n == (int)nsyms || n == SG_E_OVERFLOW);
        FUZZ_CHECK(half_bit <= cap * 8);
        while (check_bit < half_bit) {
            uint8_t sym;

            FUZZ_CHECK(sg_q3_huff_get_sym(h, out2, cap, &check_bit, &sym) == 0);
            FUZZ_CHECK(got < nsyms && sym == syms[got]);
            got++;
        }
        FUZZ_CHECK(check_bit == half_bit);
        FUZZ_CHECK(n == SG_E_OVERFLOW ? got < nsyms : got == nsyms);
    }
    free(syms);
    free(bulk);
    free(out);
    free(out2);
}

/* ------------------------------------------------------------------ */
/* 2. The adaptive coder                                                */

static void fuzz_adaptive(const uint8_t *data, size_t size)
{
    size_t game_cap = SG_Q3_MAX_MSGLEN - 12; /* what oob.c passes */
    size_t cap = 16 + 4 * size;              /* under 32 bits a symbol, tree path included */
    uint8_t *plain = malloc(game_cap), *packed = malloc(cap), *back = malloc(size + 1);
    int n, m;

    FUZZ_CHECK(plain && packed && back);

    /* the input as a compressed body */
    n = sg_q3_huff_adaptive_decompress(data, size, plain, game_cap);
    if (size == 1) {
        FUZZ_CHECK(n == SG_E_TRUNCATED);
    } else {
        size_t want = size ? (size_t)data[0] << 8 | data[1] : 0;

        FUZZ_CHECK(n == (int)(want < game_cap ? want : game_cap));
    }

    /* the input as plain bytes: compress, then decompress */
    n = sg_q3_huff_adaptive_compress(data, size, packed, cap);
    if (size > 65535) {
        FUZZ_CHECK(n == SG_E_TOOBIG);
    } else {
        FUZZ_CHECK(n >= 0 && (size_t)n <= cap);
        FUZZ_CHECK(size == 0 ? n == 0 : n >= 3);
        m = sg_q3_huff_adaptive_decompress(packed, (size_t)n, back, size);
        FUZZ_CHECK(m == (int)size && memcmp(back, data, size) == 0);
    }
    free(plain);
    free(packed);
    free(back);
}

/* ------------------------------------------------------------------ */
/* 3. The bit reader                                                    */

enum op_kind {
    OP_BITS,
    OP_BYTE,
    OP_CHAR,
    OP_SHORT,
    OP_LONG,
    OP_FLOAT,
    OP_PEEK,
    OP_STRING,
    OP_LINE,
    OP_DATA,
    OP_OOB_ON,
    OP_OOB_OFF,
    OP_BITS_LEFT,
};

/* One value read, kept for the write-and-read-back check. */
struct logged {
    uint8_t kind;
    int width;     /* OP_BITS: as passed; strings: cap */
    uint32_t v;    /* numbers; floats as bits */
    size_t off, n; /* strings and data: bytes in the pool */
};

struct program {
    struct sg_q3_msg m;
    struct logged log[256];
    int nlog;
    bool logging; /* still recording: no mode switch, cut string or overflow yet */
    uint8_t *pool;
    size_t pool_len, pool_cap;
    char out[SG_Q3_BIG_INFO_STRING], raw[SG_Q3_BIG_INFO_STRING];
};

static const size_t string_caps[16] = {0,   1,   2,    3,    4,    8,    16,   64,
                                       255, 256, 1023, 1024, 1025, 4096, 8191, 8192};

static uint32_t width_mask(int bits)
{
    unsigned n = bits < 0 ? 0u - (unsigned)bits : (unsigned)bits;

    return n >= 32 ? 0xffffffffu : (1u << n) - 1;
}

/* Record a value read (while still logging). */
static struct logged *log_value(struct program *pg, int kind, int width, uint32_t v)
{
    struct logged *l;

    if (!pg->logging || pg->m.overflowed)
        return NULL;
    FUZZ_CHECK(pg->nlog < (int)(sizeof(pg->log) / sizeof(pg->log[0])));
    l = &pg->log[pg->nlog++];
    l->kind = (uint8_t)kind;
    l->width = width;
    l->v = v;
    l->off = l->n = 0;
    return l;
}

/* Record bytes (a string's raw bytes or a data block). */
static void log_bytes(struct program *pg, int kind, int width, const void *p, size_t n)
{
    struct logged *l = log_value(pg, kind, width, 0);

    if (!l)
        return;
    FUZZ_CHECK(pg->pool_len + n <= pg->pool_cap);
    memcpy(pg->pool + pg->pool_len, p, n);
    l->off = pg->pool_len;
    l->n = n;
    pg->pool_len += n;
}

/* A string read: the game's view is clean, the raw view is what came. */
static void check_string(struct program *pg, size_t cap, size_t len, int stop)
{
    if (cap == 0) {
        FUZZ_CHECK(len == 0);
        return;
    }
    FUZZ_CHECK(len < cap && pg->out[len] == '\0' && pg->raw[len] == '\0');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)pg->out[i], r = (unsigned char)pg->raw[i];

        FUZZ_CHECK(c != 0 && c != '%' && c <= 127 && r != 0 && r != stop);
        FUZZ_CHECK(c == r || (c == '.' && (r == '%' || r > 127)));
    }
}

static void run_op(struct program *pg, struct fuzz_in *prog)
{
    struct sg_q3_msg *m = &pg->m;
    uint8_t b = fuzz_u8(prog);
    int op = b & 15, arg = b >> 4;
    int width, v;
    size_t cap, len;
    float f;
    uint32_t u;

    switch (op) {
    case OP_BITS: {
        uint8_t w = fuzz_u8(prog);

        if (w >= 0xc0) {
            static const int bad[4] = {0, 33, -33, 0};

            width = bad[w & 3];
            FUZZ_CHECK(sg_q3_msg_read_bits(m, width) == 0 && m->overflowed);
            pg->logging = false;
            break;
        }
        width = (w & 31) + 1;
        if (w & 0x20)
            width = -width;
        u = (uint32_t)sg_q3_msg_read_bits(m, width);
        log_value(pg, OP_BITS, width, u);
        break;
    }
    case 13:
    case 14:
    case 15:
        width = arg + 17;
        if (arg & 1)
            width = -width;
        u = (uint32_t)sg_q3_msg_read_bits(m, width);
        log_value(pg, OP_BITS, width, u);
        break;
    case OP_BYTE:
        v = sg_q3_msg_read_byte(m);
        FUZZ_CHECK(v >= -1 && v <= 255 && (v == -1) == m->overflowed);
        log_value(pg, OP_BYTE, 8, (uint32_t)v);
        break;
    case OP_CHAR:
        v = sg_q3_msg_read_char(m);
        FUZZ_CHECK(v >= -128 && v <= 127 && (!m->overflowed || v == -1));
        log_value(pg, OP_CHAR, 8, (uint32_t)v);
        break;
    case OP_SHORT:
        v = sg_q3_msg_read_short(m);
        FUZZ_CHECK(v >= -32768 && v <= 32767 && (!m->overflowed || v == -1));
        log_value(pg, OP_SHORT, 16, (uint32_t)v);
        break;
    case OP_LONG:
        u = (uint32_t)sg_q3_msg_read_long(m);
        FUZZ_CHECK(!m->overflowed || u == 0xffffffffu);
        log_value(pg, OP_LONG, 32, u);
        break;
    case OP_FLOAT:
        f = sg_q3_msg_read_float(m);
        memcpy(&u, &f, sizeof(u));
        FUZZ_CHECK(!m->overflowed || f == -1.0f);
        log_value(pg, OP_FLOAT, 32, u);
        break;
    case OP_PEEK: {
        struct sg_q3_msg before = *m;
        struct sg_q3_msg probe = *m;

        v = sg_q3_msg_peek_byte(m);
        FUZZ_CHECK(memcmp(&before, m, sizeof(before)) == 0);
        FUZZ_CHECK(v == sg_q3_msg_read_byte(&probe));
        break;
    }
    case OP_STRING:
    case OP_LINE:
        cap = string_caps[arg];
        len = op == OP_STRING ? sg_q3_msg_read_string(m, pg->out, cap, pg->raw)
                              : sg_q3_msg_read_string_line(m, pg->out, cap, pg->raw);
        check_string(pg, cap, len, op == OP_STRING ? 0 : '\n');
        /* a string that filled its room may have been cut: its bytes differ from a re-read */
        if (cap == 0 || len + 1 >= cap)
            pg->logging = false;
        else
            log_bytes(pg, op, (int)cap, pg->raw, len);
        break;
    case OP_DATA: {
        uint8_t buf[15 * 5];

        len = (size_t)arg * 5;
        sg_q3_msg_read_data(m, buf, len);
        log_bytes(pg, OP_DATA, 0, buf, len);
        break;
    }
    case OP_OOB_ON:
    case OP_OOB_OFF:
        sg_q3_msg_oob(m, op == OP_OOB_ON);
        pg->logging = false; /* the writer's mode switches place bytes differently */
        break;
    case OP_BITS_LEFT:
        FUZZ_CHECK(sg_q3_msg_bits_left(m) <= m->size * 8);
        break;
    default:
        break;
    }
    if (m->overflowed)
        pg->logging = false;
}

/* Write every logged value with the writer, then read them back. */
static void write_back(struct program *pg, bool oob, size_t data_len)
{
    size_t cap = 2 * data_len + 64;
    uint8_t *buf = malloc(cap);
    struct sg_q3_msg w, r;

    FUZZ_CHECK(buf != NULL);
    sg_q3_msg_init_write(&w, buf, cap);
    sg_q3_msg_oob(&w, oob);
    for (int i = 0; i < pg->nlog; i++) {
        const struct logged *l = &pg->log[i];
        float f;

        switch (l->kind) {
        case OP_BITS:
            sg_q3_msg_write_bits(&w, (int32_t)l->v, l->width);
            break;
        case OP_BYTE:
        case OP_CHAR:
            sg_q3_msg_write_byte(&w, (int)l->v);
            break;
        case OP_SHORT:
            sg_q3_msg_write_short(&w, (int)l->v);
            break;
        case OP_LONG:
            sg_q3_msg_write_long(&w, (int32_t)l->v);
            break;
        case OP_FLOAT:
            memcpy(&f, &l->v, sizeof(f));
            sg_q3_msg_write_float(&w, f);
            break;
        case OP_STRING:
        case OP_LINE:
            sg_q3_msg_write_string(&w, (const char *)pg->pool + l->off, l->n);
            break;
        case OP_DATA:
            sg_q3_msg_write_data(&w, pg->pool + l->off, l->n);
            break;
        default:
            break;
        }
    }
    FUZZ_CHECK(!w.overflowed);
    /* the writer zeroes as it goes (the buffer came from malloc): every bit
     * after the last one written, up to the byte count, is zero */
    for (size_t b = w.bit; b < sg_q3_msg_bytes(&w) * 8; b++)
        FUZZ_CHECK(bit_at(buf, b) == 0);

    sg_q3_msg_init_read(&r, buf, sg_q3_msg_bytes(&w));
    sg_q3_msg_oob(&r, oob);
    for (int i = 0; i < pg->nlog; i++) {
        const struct logged *l = &pg->log[i];
        uint32_t u;
        float f;
        size_t len;
        uint8_t data[15 * 5];

        switch (l->kind) {
        case OP_BITS:
            u = (uint32_t)sg_q3_msg_read_bits(&r, l->width);
            FUZZ_CHECK(((u ^ l->v) & width_mask(l->width)) == 0);
            break;
        case OP_BYTE:
            FUZZ_CHECK(sg_q3_msg_read_byte(&r) == (int)l->v);
            break;
        case OP_CHAR:
            FUZZ_CHECK(sg_q3_msg_read_char(&r) == (int)l->v);
            break;
        case OP_SHORT:
            FUZZ_CHECK(sg_q3_msg_read_short(&r) == (int)l->v);
            break;
        case OP_LONG:
            FUZZ_CHECK((uint32_t)sg_q3_msg_read_long(&r) == l->v);
            break;
        case OP_FLOAT:
            f = sg_q3_msg_read_float(&r);
            memcpy(&u, &f, sizeof(u));
            FUZZ_CHECK(u == l->v);
            break;
        case OP_STRING:
        case OP_LINE:
            len = l->kind == OP_STRING
                      ? sg_q3_msg_read_string(&r, pg->out, (size_t)l->width, pg->raw)
                      : sg_q3_msg_read_string_line(&r, pg->out, (size_t)l->width, pg->raw);
            FUZZ_CHECK(len == l->n && memcmp(pg->raw, pg->pool + l->off, len) == 0);
            break;
        case OP_DATA:
            sg_q3_msg_read_data(&r, data, l->n);
            FUZZ_CHECK(memcmp(data, pg->pool + l->off, l->n) == 0);
            break;
        default:
            break;
        }
        FUZZ_CHECK(!r.overflowed);
    }
    free(buf);
}

/*
 * The same program on a padded reader (sg_q3_msg_init_read_padded: 8 bytes
 * of junk after the data, which its fast path may load but never use)
 * must give the same values and leave the reader in the same state after
 * every op.
 */
static void same_reader(const struct program *a, const struct program *b)
{
    FUZZ_CHECK(a->m.bit == b->m.bit && a->m.readcount == b->m.readcount &&
               a->m.overflowed == b->m.overflowed && a->m.oob == b->m.oob);
    FUZZ_CHECK(a->nlog == b->nlog && a->pool_len == b->pool_len);
    if (a->nlog > 0) {
        const struct logged *x = &a->log[a->nlog - 1], *y = &b->log[b->nlog - 1];

        FUZZ_CHECK(x->kind == y->kind && x->width == y->width && x->v == y->v && x->n == y->n);
        FUZZ_CHECK(memcmp(a->pool + x->off, b->pool + y->off, x->n) == 0);
    }
}

static void fuzz_reader(const uint8_t *data, size_t size)
{
    struct fuzz_in in, prog, prog2;
    struct program *pg = malloc(sizeof(*pg)), *pg2 = malloc(sizeof(*pg2));
    size_t plen, dlen;
    const uint8_t *p, *d;
    bool oob, was_overflowed = false;
    uint8_t *padded;

    FUZZ_CHECK(pg != NULL && pg2 != NULL);
    fuzz_in_init(&in, data, size);
    plen = fuzz_u8(&in);
    oob = fuzz_u8(&in) & 1;
    p = fuzz_bytes(&in, plen, &plen);
    d = fuzz_bytes(&in, in.left, &dlen);

    /* the data in a buffer of its exact size, so ASan sees any byte read past it */
    uint8_t *copy = malloc(dlen ? dlen : 1);
    FUZZ_CHECK(copy != NULL);
    memcpy(copy, d, dlen);
    pg->pool_cap = 8 * dlen + 16 * 5 * 16;
    pg->pool = malloc(pg->pool_cap);
    FUZZ_CHECK(pg->pool != NULL);
    pg->pool_len = 0;
    pg->nlog = 0;
    pg->logging = true;
    sg_q3_msg_init_read(&pg->m, copy, dlen);
    sg_q3_msg_oob(&pg->m, oob);

    /* the padded twin: junk after the data (a byte pattern that decodes) */
    padded = malloc(dlen + 8);
    FUZZ_CHECK(padded != NULL);
    memcpy(padded, d, dlen);
    memset(padded + dlen, 0xa5, 8);
    pg2->pool_cap = pg->pool_cap;
    pg2->pool = malloc(pg2->pool_cap);
    FUZZ_CHECK(pg2->pool != NULL);
    pg2->pool_len = 0;
    pg2->nlog = 0;
    pg2->logging = true;
    sg_q3_msg_init_read_padded(&pg2->m, padded, dlen);
    sg_q3_msg_oob(&pg2->m, oob);

    fuzz_in_init(&prog, p, plen);
    fuzz_in_init(&prog2, p, plen);
    while (prog.left > 0) {
        size_t bit = pg->m.bit;

        run_op(pg, &prog);
        run_op(pg2, &prog2);
        same_reader(pg, pg2);
        /* the overflow flag is exactly "readcount > size", and sticky */
        FUZZ_CHECK(pg->m.overflowed == (pg->m.readcount > pg->m.size));
        FUZZ_CHECK(!was_overflowed || pg->m.overflowed);
        FUZZ_CHECK(pg->m.overflowed || pg->m.bit >= bit);
        FUZZ_CHECK(sg_q3_msg_bits_left(&pg->m) <= dlen * 8);
        was_overflowed = pg->m.overflowed;
    }
    write_back(pg, oob, dlen);
    free(pg->pool);
    free(pg);
    free(pg2->pool);
    free(pg2);
    free(padded);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_fixed(data, size);
    fuzz_adaptive(data, size);
    fuzz_reader(data, size);
    return 0;
}
