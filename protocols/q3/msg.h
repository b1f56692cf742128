/*
 * Quake 3 message buffer: bounded bit reader and writer.
 *
 * Exact game semantics (ioquake3 msg.c MSG_ReadBits / MSG_WriteBits):
 *  - Huffman mode (the default for message content): a read or write of
 *    N bits first moves the low (N & 7) bits raw, LSB first, then each
 *    remaining group of 8 bits as one fixed-Huffman symbol.
 *  - OOB mode (sg_q3_msg_oob): 8/16/32-bit values are plain little-endian
 *    bytes at `readcount` (reader) or `size` (writer); used for netchan
 *    headers and out-of-band packets.  A 16-bit OOB read is sign-extended
 *    even when unsigned (the game reads it into a short).  Other widths are
 *    an error in the game (it drops the connection); here they set the
 *    overflow flag.
 *  - Negative `bits` means signed, with the game's quirk in Huffman mode:
 *    the sign is taken from bit (W - (W & 7) - 1) of a W-bit value, i.e.
 *    from the top of the whole bytes only.  So -8, -16, -24 and -32 behave
 *    as expected, -1..-7 are not sign-extended at all, and e.g. a -12 read
 *    extends bit 7 over bits 8..31.  -32 returns the 32 bits unchanged.
 *  - A Huffman code that decodes to NYT (only in corrupt data) contributes
 *    the value 256, i.e. sets the lowest bit of the next byte of the result.
 *
 * End of the buffer (reader; the game checks `readcount > cursize`):
 *  - No byte at or past `size` is ever read.
 *  - Huffman mode: a read whose raw bits would pass bit `size * 8`, or one
 *    of whose codes would need a bit at or past it, fails: it returns 0,
 *    sets `readcount` to size + 1 and `overflowed`.  After a successful
 *    read `readcount` is (bit >> 3) + 1, so a read that consumes the very
 *    last bit returns its value but also sets `overflowed` (the game counts
 *    the byte after the bit position as read; its writers always emit that
 *    extra byte, see sg_q3_msg_bytes).
 *  - OOB mode: a read that would pass `size` fails the same way.
 *  - Once `readcount` > `size` every read returns 0 without touching the
 *    buffer, and the typed readers return -1 (read_float: -1.0f,
 *    read_data: 0xff bytes, strings: end there), as in the game.
 *  `overflowed` is sticky and is exactly "readcount > size" for a reader;
 *  the codec checks it once per message.
 *
 * Writer: stops at `cap` bytes and sets the sticky `overflowed` flag;
 * after it nothing more is written.  A Huffman-mode write must also leave
 * room for the byte the game counts after the last bit (see
 * sg_q3_msg_bytes), so the bit position may reach at most cap * 8 - 1.
 *
 * The struct is caller-owned; `data` is borrowed for the buffer's lifetime.
 * The functions use only the shared, immutable fixed Huffman coder and are
 * safe to call from several threads on different buffers.
 */
#ifndef SG_PROTOCOLS_Q3_MSG_H
#define SG_PROTOCOLS_Q3_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocols/byteorder.h"
#include "protocols/q3/huffman.h"

#define SG_Q3_MAX_MSGLEN       16384 /* MAX_MSGLEN */
#define SG_Q3_MAX_STRING_CHARS 1024
#define SG_Q3_BIG_INFO_STRING  8192

struct sg_q3_msg {
    uint8_t *data;    /* bytes being read or written */
    size_t cap;       /* capacity of data, in bytes */
    size_t size;      /* reader: input length; writer: bytes used, the game's cursize */
    size_t bit;       /* current bit position */
    size_t readcount; /* reader: bytes consumed, (bit >> 3) + 1 in Huffman mode, as the game
                         counts; size + 1 after a read past the end */
    bool oob;         /* true: raw byte mode */
    bool padded;      /* reader: 8 readable bytes follow `size` (sg_q3_msg_init_read_padded) */
    bool overflowed;  /* sticky overflow flag */
    const struct sg_q3_huff *huff; /* the fixed coder, fetched once (NULL: fetched per use) */
    const uint32_t *lut;           /* its decode table (sg_q3_huff_lut), or NULL */
    uint32_t lut_mask;
    const uint32_t *codes;         /* writer: its encode tables (sg_q3_huff_codes), or NULL */
    const uint8_t *code_len;
    size_t zeroed; /* writer: bytes [0, zeroed) are zero or hold what was written */
};

/* Reader over `len` bytes at `data` (not modified; cast away for the struct). */
void sg_q3_msg_init_read(struct sg_q3_msg *m, const uint8_t *data, size_t len);
/* The same, when 8 more bytes after `len` may be read (their values never
 * matter): reads near the end then take the fast path too. */
void sg_q3_msg_init_read_padded(struct sg_q3_msg *m, const uint8_t *data, size_t len);
/* Writer into `buf` of `cap` bytes.  The buffer is zeroed as the writer
 * advances (a little ahead of it): the sg_q3_msg_bytes() bytes written are
 * the game's, padding bits zero; what lies further is left undefined. */
void sg_q3_msg_init_write(struct sg_q3_msg *m, uint8_t *buf, size_t cap);

/*
 * Switch modes (MSG_Bitstream / the OOB readers).  Nothing else changes, as
 * in the game: OOB reads continue at `readcount`, OOB writes at `size`,
 * Huffman reads and writes at `bit` (OOB reads and writes keep `bit` at
 * 8 * their byte position, so OOB then Huffman continues seamlessly).
 */
void sg_q3_msg_oob(struct sg_q3_msg *m, bool oob);

/* Core bit I/O.  |bits| in 1..32; negative = signed (see above).  A write
 * of -32 bits is written like 32 (the game's writer rejects it). */
static inline int32_t sg_q3_msg_read_bits(struct sg_q3_msg *m, int bits);
static inline void sg_q3_msg_write_bits(struct sg_q3_msg *m, int32_t value, int bits);

/* The reader for every case; sg_q3_msg_read_bits inlines the commonest. */
int32_t sg_q3__msg_read_bits(struct sg_q3_msg *m, int bits);
/* The writer for every case; sg_q3_msg_write_bits inlines the commonest. */
void sg_q3__msg_write_bits(struct sg_q3_msg *m, int32_t value, int bits);
/* The writer's zeroing before bits up to `end` are written (msg.c). */
void sg_q3__msg_zero_ahead(struct sg_q3_msg *m, size_t end);

/* Conveniences with the game's widths and signedness. */
static inline int sg_q3_msg_read_byte(struct sg_q3_msg *m);     /* 0..255, or -1 past the end (game behaviour) */
int sg_q3_msg_read_char(struct sg_q3_msg *m);                   /* -128..127, or -1 past the end */
static inline int sg_q3_msg_read_short(struct sg_q3_msg *m);    /* signed 16, or -1 past the end */
static inline int32_t sg_q3_msg_read_long(struct sg_q3_msg *m); /* 32, or -1 past the end */
float sg_q3_msg_read_float(struct sg_q3_msg *m);  /* the 32 bits as a float, or -1.0f */
static inline void sg_q3_msg_write_byte(struct sg_q3_msg *m, int c);
static inline void sg_q3_msg_write_short(struct sg_q3_msg *m, int c);
static inline void sg_q3_msg_write_long(struct sg_q3_msg *m, int32_t c);
void sg_q3_msg_write_float(struct sg_q3_msg *m, float f);

/* MSG_LookaheadByte: the next byte as read_byte would give it, without
 * consuming it (the position and the overflow flag are restored). */
int sg_q3_msg_peek_byte(struct sg_q3_msg *m);

/* Bits left to read in Huffman mode: size * 8 - bit, 0 past the end. */
size_t sg_q3_msg_bits_left(const struct sg_q3_msg *m);

/*
 * Strings as ioquake3 reads them (MSG_ReadString / ReadBigString /
 * ReadStringLine, with `cap` = MAX_STRING_CHARS or BIG_INFO_STRING): bytes
 * are read with read_byte until 0 or the end of the message (or newline
 * for _line; the terminator is consumed and not stored); '%' becomes '.'
 * and bytes > 127 become '.'.  At most `cap - 1` are stored, always
 * NUL-terminated; when the string is longer, the game reads one more byte,
 * drops it and stops there, leaving the rest of the string in the message,
 * and so does this.  Returns the stored length (nothing is read when
 * `cap` is 0).  `raw`, when not NULL, receives the exact bytes stored
 * (before the substitutions, NUL-terminated) so an encoder can reproduce
 * them; it needs `cap` bytes too.
 */
size_t sg_q3_msg_read_string(struct sg_q3_msg *m, char *out, size_t cap, char *raw);
size_t sg_q3_msg_read_string_line(struct sg_q3_msg *m, char *out, size_t cap, char *raw);
/* Writes `len` bytes of `s` then a 0 byte, each as an 8-bit value, with no
 * substitution (the game's MSG_WriteString also turns '%' and bytes > 127
 * into '.' and writes "" for strings of MAX_STRING_CHARS or more). */
void sg_q3_msg_write_string(struct sg_q3_msg *m, const char *s, size_t len);

/*
 * The fast start of a string read: bytes as read_byte would return them,
 * up to `max` of them, stopping after one that is 0 or `stop` (consumed,
 * not stored; `*ended` set), for as long as every read is certain to
 * succeed (Huffman mode, far from the end).  Returns the bytes stored; the
 * caller goes on with read_byte from where it stopped.
 */
size_t sg_q3_msg_read_run(struct sg_q3_msg *m, uint8_t *out, size_t max, int stop, bool *ended);

/* `len` bytes, each as read_byte (0xff once past the end, as the game). */
void sg_q3_msg_read_data(struct sg_q3_msg *m, uint8_t *out, size_t len);
void sg_q3_msg_write_data(struct sg_q3_msg *m, const uint8_t *in, size_t len);

/*
 * Bytes the writer has produced so far: `size`, the game's cursize, which
 * after a Huffman-mode write is (bit >> 3) + 1: one byte more than the bits
 * need when they end on a byte boundary, exactly the length the game sends.
 */
size_t sg_q3_msg_bytes(const struct sg_q3_msg *m);

/*
 * Inline, the common case: an unsigned Huffman-mode read from one 8-byte
 * load (raw bits and at most four 11-bit codes fit in its 57 bits), taken
 * when every bit it used lies before the end, where the full reader
 * succeeds with readcount = (bit >> 3) + 1 <= size.  The load stays inside
 * the buffer: one 8-byte load at least 8 bytes before the end, or anywhere
 * before it when the buffer is padded; else the bytes left, one by one,
 * with zero bits after them (a code the reader decodes from them ends
 * before the end only if it used none of those zeros: the codes are a
 * prefix code).  Anything else (signed, OOB, past the end, a code
 * longer than the table) goes to sg_q3__msg_read_bits, which starts over.
 */
static inline int32_t sg_q3_msg_read_bits(struct sg_q3_msg *m, int bits)
{
    size_t end = m->size * 8;

    if (bits > 0 && bits <= 32 && !m->oob && m->lut && m->readcount <= m->size && m->bit < end) {
        const uint8_t *p = m->data + (m->bit >> 3);
        uint64_t w;
        unsigned raw = (unsigned)bits & 7, used = raw;
        uint32_t v;

        if (m->bit + 64 <= end || m->padded) {
            w = sg_le64(p);
        } else {
            /* The last (at most 8) bytes, zeros after them: a code that
             * would use one of those bits fails the check below. */
            w = 0;
            for (size_t k = m->size - (m->bit >> 3); k-- > 0;)
                w = (w << 8) | p[k];
        }
        w >>= m->bit & 7;
        v = (uint32_t)w & ((1u << raw) - 1);
        w >>= raw;
        for (unsigned i = 0; i < (unsigned)bits >> 3; i++) {
            uint32_t e = m->lut[w & m->lut_mask];

            if (e & SG_Q3_HUFF_LUT_LONG)
                return sg_q3__msg_read_bits(m, bits);
            v |= (e & 0xffff) << (raw + 8 * i); /* NYT (256) spills over, as in the game */
            w >>= e >> 16;
            used += e >> 16;
        }
        if (m->bit + used < end) {
            m->bit += used;
            m->readcount = (m->bit >> 3) + 1;
            return (int32_t)v;
        }
    }
    return sg_q3__msg_read_bits(m, bits);
}

/*
 * Inline, the common case of a write: Huffman mode with the encode tables,
 * well inside the buffer.  The raw bits and the codes (at most 7 + 4 * 11
 * bits, shifted by at most 7) are gathered in one register and merged into
 * the buffer with one 8-byte read-modify-write; the last byte touched and
 * the one the game counts after it lie inside the 8 bytes, so inside `cap`.
 * Anything else (OOB, near the end, overflowed, a bad width) goes to
 * sg_q3__msg_write_bits.
 */
static inline void sg_q3_msg_write_bits(struct sg_q3_msg *m, int32_t value, int bits)
{
    unsigned n = bits < 0 ? 0u - (unsigned)bits : (unsigned)bits;

    if (n - 1 < 32 && !m->oob && !m->overflowed && m->codes && (m->bit >> 3) + 8 <= m->cap) {
        uint32_t v = (uint32_t)value & (0xffffffffu >> (32 - n));
        unsigned raw = n & 7, len = raw, shift = m->bit & 7;
        uint64_t acc = v & ((1u << raw) - 1), mask;
        uint8_t *p = m->data + (m->bit >> 3);
        size_t end;

        v >>= raw;
        for (unsigned i = raw; i < n; i += 8, v >>= 8) {
            acc |= (uint64_t)m->codes[v & 0xff] << len;
            len += m->code_len[v & 0xff];
        }
        end = m->bit + len;
        if (((end + 7) >> 3) + 1 > m->zeroed)
            sg_q3__msg_zero_ahead(m, end);
        mask = (((uint64_t)1 << len) - 1) << shift;
        sg_put_le64(p, (sg_le64(p) & ~mask) | (acc << shift));
        m->bit = end;
        m->size = (end >> 3) + 1;
        return;
    }
    sg_q3__msg_write_bits(m, value, bits);
}

static inline void sg_q3_msg_write_byte(struct sg_q3_msg *m, int c)
{
    sg_q3_msg_write_bits(m, c, 8);
}

static inline void sg_q3_msg_write_short(struct sg_q3_msg *m, int c)
{
    sg_q3_msg_write_bits(m, c, 16);
}

static inline void sg_q3_msg_write_long(struct sg_q3_msg *m, int32_t c)
{
    sg_q3_msg_write_bits(m, c, 32);
}

static inline int sg_q3_msg_read_byte(struct sg_q3_msg *m)
{
    int c = (uint8_t)sg_q3_msg_read_bits(m, 8);

    return m->readcount > m->size ? -1 : c;
}

static inline int sg_q3_msg_read_short(struct sg_q3_msg *m)
{
    int c = (int16_t)(uint16_t)sg_q3_msg_read_bits(m, 16);

    return m->readcount > m->size ? -1 : c;
}

static inline int32_t sg_q3_msg_read_long(struct sg_q3_msg *m)
{
    int32_t c = sg_q3_msg_read_bits(m, 32);

    return m->readcount > m->size ? -1 : c;
}

#endif
