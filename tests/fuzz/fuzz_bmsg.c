/*
 * fuzz_bmsg: the byte-message reader and writer shared by QuakeWorld,
 * NetQuake and Quake 2 (protocols/bmsg.h), and info strings
 * (protocols/info.h).
 *
 * Input:
 *
 *     u8  P                program length (0: a default program)
 *     P   program bytes    one typed read each, repeated until the data ends
 *     ... data             what the reader reads
 *
 * op = byte & 15, arg = byte >> 4:
 *   0..12  sg_bmsg_read_num of that kind (enum sg_bmsg_num order)
 *   13     sg_bmsg_read_string: flags = arg & 3 (STOP_FF, STOP_NL),
 *          cap = {1, 3, 64, 2048}[arg >> 2]
 *   14     sg_bmsg_read_data of arg bytes (0..15)
 *   15     arg & 1 ? read_be16 : read_be32; arg & 2: a peek first
 *
 * Properties:
 *  - after every op: pos <= end <= len, remaining() == end - pos, and the
 *    reader is marked exactly when an op failed (a read that does not
 *    fit, or a string that meets the end of the data), after which every
 *    op fails without moving;
 *  - everything read, written back with the writer in the same order,
 *    gives exactly data[0, pos): every number from its raw form, every
 *    string with the terminator it ended with;
 *  - read again from those bytes, the same items come back and the new
 *    reader is marked exactly when the last item was a string cut by the
 *    end of the data;
 *  - a writer one byte short stops, marks itself, and holds a prefix.
 *  - the data as an info string: set, get and remove agree, and setting
 *    a key to the value it has changes no byte.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "protocols/bmsg.h"
#include "protocols/error.h"
#include "protocols/info.h"

#define MAX_OPS 8192

struct item {
    uint8_t op;      /* as in the program (op & 15 decides) */
    uint8_t str_end; /* strings: enum sg_bmsg_str_end */
    unsigned flags;  /* strings: the flags they were read with */
    size_t cap;      /* strings: the cap they were read with */
    uint32_t raw;    /* numbers, be16/be32 */
    size_t off, n;   /* strings and data: bytes in the input */
};

static const size_t caps[4] = {1, 3, 64, 2048};
static const uint8_t default_program[] = {0x00, 0x02, 0x06, 0x0a, 0x07, 0x0b, 0x0d, 0x09, 0x05,
                                          0x0c, 0x08, 0x04, 0x4e, 0x1f, 0x0f, 0x3d, 0x2d, 0xcd};

/* Run one op on `r`; log it into *it; returns 0 if it succeeded. */
static int run_op(struct sg_bmsg_reader *r, uint8_t op, struct item *it, char *s)
{
    int kind = op & 15, arg = op >> 4;
    size_t pos = r->pos;
    bool was = r->overflowed;
    int ok;

    it->op = op;
    it->off = pos;
    it->n = 0;
    it->raw = 0;
    if (kind <= 12) {
        int err = sg_bmsg_read_num(r, (enum sg_bmsg_num)kind, &it->raw);

        FUZZ_CHECK(err == 0 || err == SG_E_OVERFLOW);
        ok = err == 0;
        FUZZ_CHECK(ok ? r->pos == pos + sg_bmsg_num_size((enum sg_bmsg_num)kind)
                      : r->pos == pos && it->raw == 0);
    } else if (kind == 13) {
        enum sg_bmsg_str_end end;
        size_t n;

        it->flags = (unsigned)arg & 3;
        it->cap = caps[arg >> 2];
        n = sg_bmsg_read_string(r, s, it->cap, it->flags, &end);
        it->str_end = (uint8_t)end;
        it->n = n;
        FUZZ_CHECK(n < it->cap && s[n] == '\0' && memcmp(s, r->data + pos, n) == 0);
        for (size_t i = 0; i < n; i++) {
            uint8_t c = (uint8_t)s[i];

            FUZZ_CHECK(c != 0 && !(c == 0xff && (it->flags & SG_BMSG_STR_STOP_FF)) &&
                       !(c == '\n' && (it->flags & SG_BMSG_STR_STOP_NL)));
        }
        switch (end) {
        case SG_BMSG_STR_NUL:
        case SG_BMSG_STR_FF:
        case SG_BMSG_STR_NL:
            FUZZ_CHECK(r->pos == pos + n + 1 && !r->overflowed);
            FUZZ_CHECK(r->data[pos + n] == (end == SG_BMSG_STR_NUL  ? 0
                                            : end == SG_BMSG_STR_FF ? 0xff
                                                                    : '\n'));
            break;
        case SG_BMSG_STR_CUT:
            FUZZ_CHECK(n == it->cap - 1 && r->pos == pos + n && r->overflowed == was);
            break;
        case SG_BMSG_STR_END:
            FUZZ_CHECK(r->pos == r->len || was);
            FUZZ_CHECK(r->overflowed && r->pos == pos + n);
            break;
        }
        /* a string that met the end is logged (its bytes were read) but fails */
        ok = end != SG_BMSG_STR_END;
        if (!ok && !was)
            return 2;
    } else if (kind == 14) {
        uint8_t tmp[16];
        int err = sg_bmsg_read_data(r, tmp, (size_t)arg);

        ok = err == 0;
        FUZZ_CHECK(ok ? r->pos == pos + (size_t)arg && memcmp(tmp, r->data + pos, (size_t)arg) == 0
                      : r->pos == pos && err == SG_E_OVERFLOW);
        it->n = (size_t)arg;
    } else {
        int peek = arg & 2 ? sg_bmsg_peek_u8(r) : -2;

        if (arg & 2)
            FUZZ_CHECK(peek == (pos < r->end ? r->data[pos] : -1) && r->overflowed == was);
        if (arg & 1) {
            int v = sg_bmsg_read_be16(r);

            ok = !r->overflowed;
            FUZZ_CHECK(ok ? v >= 0 && v <= 0xffff : v == -1);
            it->raw = ok ? (uint32_t)v : 0;
        } else {
            it->raw = sg_bmsg_read_be32(r);
            ok = !r->overflowed;
            FUZZ_CHECK(ok || it->raw == 0xffffffffu);
        }
        FUZZ_CHECK(ok ? r->pos > pos : r->pos == pos);
    }
    /* once failed, always failed; failing means being marked */
    if (was)
        FUZZ_CHECK(!ok && r->pos == pos);
    FUZZ_CHECK(r->overflowed == (was || !ok));
    return ok ? 0 : 1;
}

static void check_reader(const struct sg_bmsg_reader *r)
{
    FUZZ_CHECK(r->pos <= r->end && r->end <= r->len);
    FUZZ_CHECK(sg_bmsg_remaining(r) == r->end - r->pos);
    if (r->overflowed)
        FUZZ_CHECK(r->end == r->pos);
    else
        FUZZ_CHECK(r->end == r->len);
}

/* Write the logged items; returns 0 or the first error. */
static int write_items(struct sg_bmsg_writer *w, const struct item *items, size_t n,
                       const uint8_t *data)
{
    int err = 0;

    for (size_t i = 0; i < n && err == 0; i++) {
        const struct item *it = &items[i];
        int kind = it->op & 15;

        if (kind <= 12)
            err = sg_bmsg_write_num(w, (enum sg_bmsg_num)kind, it->raw);
        else if (kind == 13)
            err = sg_bmsg_write_string(w, data + it->off, it->n, (enum sg_bmsg_str_end)it->str_end);
        else if (kind == 14)
            err = sg_bmsg_write_data(w, data + it->off, it->n);
        else if ((it->op >> 4) & 1)
            err = sg_bmsg_write_be16(w, it->raw);
        else
            err = sg_bmsg_write_be32(w, it->raw);
    }
    return err;
}

static void fuzz_info(const uint8_t *data, size_t size)
{
    size_t len = 0, cap = size + 80;
    char *s = malloc(cap), *copy;
    const char *v;
    size_t vn;
    int r;

    FUZZ_CHECK(s != NULL);
    for (size_t i = 0; i < size && len < 400; i++)
        if (data[i]) /* no NUL inside an info string */
            s[len++] = (char)data[i];
    copy = malloc(cap);
    FUZZ_CHECK(copy != NULL);
    memcpy(copy, s, len);

    /* a lone key at the end refuses an append; anything else works */
    r = sg_info_set(s, &len, cap, "name", 4, "fuzz", 4);
    FUZZ_CHECK(r == 0 || r == 1 || r == SG_E_MALFORMED);
    if (r == SG_E_MALFORMED) {
        FUZZ_CHECK(memcmp(s, copy, len) == 0);
    } else {
        size_t before = len;

        FUZZ_CHECK(sg_info_get(s, len, "name", 4, &v, &vn) == 1 && vn == 4 &&
                   memcmp(v, "fuzz", 4) == 0);
        /* the same again: not a byte changes */
        memcpy(copy, s, len);
        FUZZ_CHECK(sg_info_set(s, &len, cap, "name", 4, "fuzz", 4) == 0);
        FUZZ_CHECK(len == before && memcmp(s, copy, len) == 0);
        FUZZ_CHECK(sg_info_remove(s, &len, "name", 4) == 1);
        FUZZ_CHECK(sg_info_get(s, len, "name", 4, &v, &vn) == 0);
    }
    free(copy);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_in in;
    size_t plen, got, nitems = 0, size_data;
    const uint8_t *prog, *d;
    struct item *items = malloc(MAX_OPS * sizeof(*items));
    char *s = malloc(2048);
    struct sg_bmsg_reader r, r2;
    struct sg_bmsg_writer w;
    uint8_t *out;
    bool last_end = false;

    FUZZ_CHECK(items && s);
    fuzz_in_init(&in, data, size);
    plen = fuzz_u8(&in);
    prog = fuzz_bytes(&in, plen, &got);
    plen = got;
    if (plen == 0) {
        prog = default_program;
        plen = sizeof(default_program);
    }
    d = fuzz_bytes(&in, in.left, &size_data);

    /* read: the program over and over until it fails or the data ends */
    sg_bmsg_reader_init(&r, d, size_data);
    for (size_t i = 0; i < MAX_OPS; i++) {
        int res = run_op(&r, prog[i % plen], &items[nitems], s);

        check_reader(&r);
        if (res == 0 || res == 2) {
            last_end = res == 2;
            nitems++;
        }
        if (res != 0) {
            /* and every op after it fails in place */
            size_t pos = r.pos;
            struct item junk;

            for (size_t k = 0; k < plen && k < 32; k++)
                FUZZ_CHECK(run_op(&r, prog[k], &junk, s) == 1 && r.pos == pos);
            break;
        }
    }

    /* written back: exactly the bytes read */
    out = malloc(r.pos + 1);
    FUZZ_CHECK(out != NULL);
    sg_bmsg_writer_init(&w, out, r.pos);
    FUZZ_CHECK(write_items(&w, items, nitems, d) == 0);
    FUZZ_CHECK(!w.overflowed && w.len == r.pos && memcmp(out, d, r.pos) == 0);

    /* read again from those bytes: the same items, the same end */
    sg_bmsg_reader_init(&r2, out, w.len);
    for (size_t i = 0; i < nitems; i++) {
        struct item again;
        int res = run_op(&r2, items[i].op, &again, s);

        FUZZ_CHECK(res == (i + 1 == nitems && last_end ? 2 : 0));
        FUZZ_CHECK(again.raw == items[i].raw && again.off == items[i].off && again.n == items[i].n);
        if ((items[i].op & 15) == 13)
            FUZZ_CHECK(again.str_end == items[i].str_end);
    }
    FUZZ_CHECK(r2.pos == w.len && r2.overflowed == last_end);

    /* one byte short: stops, says so, keeps a prefix */
    if (r.pos > 0) {
        sg_bmsg_writer_init(&w, out, r.pos - 1);
        FUZZ_CHECK(write_items(&w, items, nitems, d) == SG_E_OVERFLOW);
        FUZZ_CHECK(w.overflowed && w.len < r.pos && memcmp(out, d, w.len) == 0);
    }

    fuzz_info(d, size_data);
    free(out);
    free(items);
    free(s);
    return 0;
}
