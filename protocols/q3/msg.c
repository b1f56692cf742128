/*
 * Quake 3 message buffer: the bounded bit reader and writer of msg.h.
 *
 * A value of N bits travels in two parts.  In Huffman mode the low N & 7
 * bits go raw, one bit at a time from the value's LSB, then each further
 * byte of the value (low byte first) goes as one code of the fixed Huffman
 * tree:
 *
 *      value, N = 13:   [ bits 0..4 raw ][ code(bits 5..12) ]
 *      stream:           b0 b1 b2 b3 b4   c0 c1 ... ck        (LSB first)
 *
 * In OOB mode 8-, 16- and 32-bit values are whole little-endian bytes.
 *
 * The reader follows ioquake3's MSG_ReadBits to the bit: it never reads at
 * or past `size`, a failed read returns 0 and moves `readcount` past the
 * end, and `readcount` is the byte after the bit position, which is what
 * the game compares with the message length.  The sticky `overflowed` flag
 * mirrors that comparison.  The writer follows MSG_WriteBits and keeps the
 * game's cursize in `size`.
 */
#include "protocols/q3/msg.h"

#include <string.h>

#include "protocols/byteorder.h"
#include "protocols/error.h"
#include "protocols/q3/huffman.h"

/* ------------------------------------------------------------------ */
/* Setup                                                                */

void sg_q3_msg_init_read(struct sg_q3_msg *m, const uint8_t *data, size_t len)
{
    memset(m, 0, sizeof(*m));
    /* The reader never writes; the struct is shared with the writer. */
    m->data = (uint8_t *)(uintptr_t)data;
    m->cap = len;
    m->size = len;
    m->huff = sg_q3_huff_fixed();
    m->lut = sg_q3_huff_lut(m->huff, &m->lut_mask);
}

void sg_q3_msg_init_read_padded(struct sg_q3_msg *m, const uint8_t *data, size_t len)
{
    sg_q3_msg_init_read(m, data, len);
    m->padded = true;
}

void sg_q3_msg_init_write(struct sg_q3_msg *m, uint8_t *buf, size_t cap)
{
    memset(m, 0, sizeof(*m));
    m->data = buf;
    m->cap = cap;
    m->huff = sg_q3_huff_fixed();
    m->codes = sg_q3_huff_codes(m->huff, &m->code_len);
}

/*
 * Before bits up to bit `end` (exclusive) are written: the bytes they land
 * in and the byte after (which the game's cursize counts) must be zero or
 * written.  Zeroes a little further each time, so a message costs about
 * its own length in zeroing, not the buffer's.
 */
void sg_q3__msg_zero_ahead(struct sg_q3_msg *m, size_t end)
{
    size_t need = ((end + 7) >> 3) + 1, to;

    if (need <= m->zeroed)
        return;
    to = need + 64 < m->cap ? need + 64 : m->cap;
    if (to > m->zeroed) {
        memset(m->data + m->zeroed, 0, to - m->zeroed);
        m->zeroed = to;
    }
}

void sg_q3_msg_oob(struct sg_q3_msg *m, bool oob)
{
    m->oob = oob;
}

size_t sg_q3_msg_bytes(const struct sg_q3_msg *m)
{
    return m->size;
}

size_t sg_q3_msg_bits_left(const struct sg_q3_msg *m)
{
    size_t end = m->size * 8;

    return m->readcount > m->size || m->bit >= end ? 0 : end - m->bit;
}

/* ------------------------------------------------------------------ */
/* Bits                                                                 */

/* A read past the end: the game's "readcount = cursize + 1; return 0". */
static int32_t read_fail(struct sg_q3_msg *m)
{
    m->readcount = m->size + 1;
    m->overflowed = true;
    return 0;
}

static uint32_t read_oob(struct sg_q3_msg *m, unsigned bits, bool *ok)
{
    const uint8_t *p = m->data + m->readcount;
    size_t n = bits / 8;
    uint32_t v;

    *ok = false;
    if (bits != 8 && bits != 16 && bits != 32)
        return 0;
    if (n > m->size - m->readcount)
        return 0;
    if (bits == 8)
        v = p[0];
    else if (bits == 16)
        v = (uint32_t)(int32_t)(int16_t)sg_le16(p); /* read into a short */
    else
        v = sg_le32(p);
    m->readcount += n;
    m->bit += bits;
    *ok = true;
    return v;
}

int32_t sg_q3__msg_read_bits(struct sg_q3_msg *m, int bits)
{
    unsigned n = bits < 0 ? 0u - (unsigned)bits : (unsigned)bits;
    bool sgn = bits < 0;
    uint32_t v = 0;

    if (m->readcount > m->size)
        return 0;
    if (n == 0 || n > 32)
        return read_fail(m);

    if (m->oob) {
        bool ok;

        v = read_oob(m, n, &ok);
        if (!ok)
            return read_fail(m);
    } else {
        unsigned raw = n & 7;

        if (n < 8) {
            /* Raw bits only (the delta fields' 1-bit flags, mostly): within
             * two bytes, both inside the message once the bound holds. */
            size_t byte = m->bit >> 3;
            unsigned shift = m->bit & 7;
            uint32_t w;

            if (m->bit > m->size * 8 || raw > m->size * 8 - m->bit)
                return read_fail(m);
            w = m->data[byte];
            if (shift + raw > 8)
                w |= (uint32_t)m->data[byte + 1] << 8;
            v = (w >> shift) & ((1u << raw) - 1);
            m->bit += raw;
        } else {
            /* The odd bits raw, then one code per byte (NYT spills into the next). */
            const struct sg_q3_huff *h = m->huff ? m->huff : sg_q3_huff_fixed();
            int err = sg_q3_huff_read_value(h, m->data, m->size, &m->bit, raw, n >> 3, &v);

            if (err < 0) {
                if (err == SG_E_HUFFMAN)
                    m->bit = m->size * 8 + 1;
                return read_fail(m);
            }
        }
        n -= raw;
        m->readcount = (m->bit >> 3) + 1;
        if (m->readcount > m->size)
            m->overflowed = true;
    }

    /* Sign extension looks at `n`, which lost the raw bits above. */
    if (sgn && n > 0 && n < 32 && (v >> (n - 1)) & 1)
        v |= ~0u << n;
    return (int32_t)v;
}

void sg_q3__msg_write_bits(struct sg_q3_msg *m, int32_t value, int bits)
{
    unsigned n = bits < 0 ? 0u - (unsigned)bits : (unsigned)bits;
    uint32_t v = (uint32_t)value;
    const struct sg_q3_huff *h;
    unsigned raw;

    if (m->overflowed)
        return;
    if (n == 0 || n > 32)
        goto overflow;

    if (m->oob) {
        uint8_t *p = m->data + m->size;

        if ((n != 8 && n != 16 && n != 32) || n / 8 > m->cap - m->size)
            goto overflow;
        if (n == 8)
            p[0] = (uint8_t)v;
        else if (n == 16)
            sg_put_le16(p, (uint16_t)v);
        else
            sg_put_le32(p, v);
        m->size += n / 8;
        m->bit += n;
        if (m->zeroed < m->size)
            m->zeroed = m->size; /* written whole: nothing to zero there */
        return;
    }

    h = m->huff ? m->huff : sg_q3_huff_fixed();
    v &= 0xffffffffu >> (32 - n);
    raw = n & 7;

    /*
     * The common case: raw bits and codes gathered in one register (at most
     * 7 + 4 * 11 bits) and merged into the buffer with one 8-byte
     * read-modify-write, well inside the buffer.
     */
    if (m->codes && (m->bit >> 3) + 8 <= m->cap) {
        uint64_t acc = v & ((1u << raw) - 1), mask;
        unsigned len = raw, shift = m->bit & 7;
        uint8_t *p = m->data + (m->bit >> 3);

        v >>= raw;
        for (unsigned i = raw; i < n; i += 8, v >>= 8) {
            acc |= (uint64_t)m->codes[v & 0xff] << len;
            len += m->code_len[v & 0xff];
        }
        sg_q3__msg_zero_ahead(m, m->bit + len);
        mask = (len < 64 ? ((uint64_t)1 << len) - 1 : ~(uint64_t)0) << shift;
        sg_put_le64(p, (sg_le64(p) & ~mask) | (acc << shift));
        m->bit += len;
        m->size = (m->bit >> 3) + 1;
        return;
    }
    sg_q3__msg_zero_ahead(m, m->bit + raw + 11 * (n >> 3));
    if (raw) {
        if (m->bit > m->cap * 8 || raw > m->cap * 8 - m->bit)
            goto overflow;
        for (unsigned i = 0; i < raw; i++, m->bit++) {
            uint8_t *p = &m->data[m->bit >> 3];
            uint8_t mask = (uint8_t)(1u << (m->bit & 7));

            *p = (uint8_t)((v >> i) & 1 ? *p | mask : *p & ~mask);
        }
        v >>= raw;
        n -= raw;
    }
    for (unsigned i = 0; i < n; i += 8, v >>= 8)
        if (sg_q3_huff_put_sym(h, m->data, m->cap, &m->bit, (uint8_t)v) < 0)
            goto overflow;
    /* The game's cursize counts the byte after the bit position. */
    if ((m->bit >> 3) >= m->cap)
        goto overflow;
    m->size = (m->bit >> 3) + 1;
    return;

overflow:
    m->overflowed = true;
}

/* ------------------------------------------------------------------ */
/* Typed values                                                         */

int sg_q3_msg_read_char(struct sg_q3_msg *m)
{
    int c = (int8_t)(uint8_t)sg_q3_msg_read_bits(m, 8);

    return m->readcount > m->size ? -1 : c;
}

float sg_q3_msg_read_float(struct sg_q3_msg *m)
{
    uint32_t u = (uint32_t)sg_q3_msg_read_bits(m, 32);
    float f;

    if (m->readcount > m->size)
        return -1.0f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

int sg_q3_msg_peek_byte(struct sg_q3_msg *m)
{
    size_t bit = m->bit, readcount = m->readcount;
    bool overflowed = m->overflowed;
    int c = sg_q3_msg_read_byte(m);

    m->bit = bit;
    m->readcount = readcount;
    m->overflowed = overflowed;
    return c;
}

void sg_q3_msg_write_float(struct sg_q3_msg *m, float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    sg_q3_msg_write_bits(m, (int32_t)u, 32);
}

/* ------------------------------------------------------------------ */
/* Strings and blocks                                                   */

size_t sg_q3_msg_read_run(struct sg_q3_msg *m, uint8_t *out, size_t max, int stop, bool *ended)
{
    const struct sg_q3_huff *h = m->huff ? m->huff : sg_q3_huff_fixed();
    size_t start = m->bit, n;

    *ended = false;
    if (m->oob || m->readcount > m->size)
        return 0;
    n = sg_q3_huff_decode_string(h, m->data, m->size, &m->bit, out, max, stop, ended);
    if (m->bit != start)
        m->readcount = (m->bit >> 3) + 1;
    return n;
}

static size_t read_string_until(struct sg_q3_msg *m, char *out, size_t cap, char *raw, int stop)
{
    size_t len = 0;

    if (cap == 0)
        return 0;

    /* Far from the end, runs of codes at once: the bytes the loop would read. */
    if (cap > 1) {
        uint8_t *dst = (uint8_t *)(raw ? raw : out);
        bool ended;

        len = sg_q3_msg_read_run(m, dst, cap - 1, stop, &ended);
        for (size_t i = 0; i < len; i++) {
            uint8_t c = dst[i];
            out[i] = (char)(c == '%' || c > 127 ? '.' : c);
        }
        if (ended)
            goto done;
    }

    /* Then byte by byte, with the game's end-of-message rules. */
    for (;;) {
        int c = sg_q3_msg_read_byte(m);

        if (c == -1 || c == 0 || c == stop)
            break;
        /* Full: the game has consumed this byte and drops it. */
        if (len >= cap - 1)
            break;
        if (raw)
            raw[len] = (char)c;
        out[len++] = (char)(c == '%' || c > 127 ? '.' : c);
    }
done:
    out[len] = '\0';
    if (raw)
        raw[len] = '\0';
    return len;
}

size_t sg_q3_msg_read_string(struct sg_q3_msg *m, char *out, size_t cap, char *raw)
{
    return read_string_until(m, out, cap, raw, 0);
}

size_t sg_q3_msg_read_string_line(struct sg_q3_msg *m, char *out, size_t cap, char *raw)
{
    return read_string_until(m, out, cap, raw, '\n');
}

void sg_q3_msg_write_string(struct sg_q3_msg *m, const char *s, size_t len)
{
    sg_q3_msg_write_data(m, (const uint8_t *)s, len);
    sg_q3_msg_write_bits(m, 0, 8);
}

void sg_q3_msg_read_data(struct sg_q3_msg *m, uint8_t *out, size_t len)
{
    for (size_t i = 0; i < len; i++)
        out[i] = (uint8_t)sg_q3_msg_read_byte(m);
}

void sg_q3_msg_write_data(struct sg_q3_msg *m, const uint8_t *in, size_t len)
{
    size_t i = 0;

    /*
     * Well inside the buffer, as many codes as fit in one register (each at
     * most 11 bits, after a shift of at most 7) go with one 8-byte
     * read-modify-write: what byte-by-byte writes would leave, in fewer
     * steps.  The rest, near the end, byte by byte.
     */
    while (len - i >= 5 && !m->oob && !m->overflowed && m->codes &&
           (m->bit >> 3) + 8 <= m->cap) {
        unsigned shift = m->bit & 7, n = 0;
        uint64_t acc = 0, mask;
        uint8_t *p = m->data + (m->bit >> 3);
        size_t end;

        for (unsigned k = 0; k < 5; k++, i++) {
            acc |= (uint64_t)m->codes[in[i]] << n;
            n += m->code_len[in[i]];
        }
        end = m->bit + n;
        if (((end + 7) >> 3) + 1 > m->zeroed)
            sg_q3__msg_zero_ahead(m, end);
        mask = (((uint64_t)1 << n) - 1) << shift;
        sg_put_le64(p, (sg_le64(p) & ~mask) | (acc << shift));
        m->bit = end;
        m->size = (end >> 3) + 1;
    }
    for (; i < len; i++)
        sg_q3_msg_write_bits(m, in[i], 8);
}
