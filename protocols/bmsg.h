/*
 * Byte messages of the idTech 1 and 2 games: QuakeWorld, NetQuake (15,
 * FitzQuake 666, RMQ 999, DarkPlaces) and Quake 2 all write their messages
 * as plain little-endian bytes, shorts, longs, floats, NUL-terminated
 * strings, and coordinates and angles whose size an extension or protocol
 * flag selects.  One bounded reader and one bounded writer serve all three
 * games' parsers and writers (DESIGN.md; STYLE.md "Parsing").
 *
 * Reader (struct sg_bmsg_reader over a borrowed buffer):
 *  - No byte at or past `len` is ever read.
 *  - A read that does not fit fails as a whole: it consumes nothing,
 *    returns the games' error value (-1, -1.0f, 0xffffffff, or a negative
 *    SG_E_OVERFLOW for the int-returning readers) and marks the reader:
 *    `overflowed` is set and stays set, and every later read fails too.
 *    `pos` is then the offset where decoding stopped.  The codec checks
 *    `overflowed` once per message.  (The games set their msg_badread and
 *    drop the message; for signed values -1 is also a valid value, so the
 *    flag is the only reliable signal.)
 *  - Strings: see sg_bmsg_read_string.
 *
 * Writer (struct sg_bmsg_writer into a caller buffer):
 *  - A write that does not fit writes nothing, returns SG_E_OVERFLOW and
 *    sets the sticky `overflowed` flag; every later write is refused too,
 *    so the bytes written are always a prefix of what was asked for.
 *    (Never the games' "clear and write on".)
 *
 * Numbers (enum sg_bmsg_num) are kept in their wire form: `raw` is the
 * field's bytes read as a little-endian unsigned integer (1 to 4 bytes,
 * zero-extended), floats included as their bit pattern.  Writing the raw
 * value back gives the same bytes whatever the value was (NaN payloads,
 * negative zero, the FitzQuake 24-bit fraction byte 255), which is what a
 * byte-for-byte re-encoder needs; sg_bmsg_num_value() gives the number the
 * game computes from it, sg_bmsg_num_quantize() the raw form of a new
 * value.
 *
 * No global state: the functions touch only the structs they are given.
 */
#ifndef SG_PROTOCOLS_BMSG_H
#define SG_PROTOCOLS_BMSG_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "protocols/byteorder.h"
#include "protocols/error.h"

/* ------------------------------------------------------------------ */
/* Number kinds: plain integers and floats, coordinates, angles          */

enum sg_bmsg_num {
    SG_BMSG_U8,          /* byte */
    SG_BMSG_S8,          /* char */
    SG_BMSG_U16,         /* word */
    SG_BMSG_S16,         /* short */
    SG_BMSG_S32,         /* long */
    SG_BMSG_FLOAT,       /* float, IEEE single */
    SG_BMSG_COORD16,     /* short / 8: QW, NQ 15/666, Q2 (13.3 fixed point) */
    SG_BMSG_COORD24,     /* short + byte / 255: RMQ PRFL_24BITCOORD; raw = short | frac << 16 */
    SG_BMSG_COORD32,     /* long / 16: RMQ PRFL_INT32COORD */
    SG_BMSG_COORD_FLOAT, /* float: FTE_PEXT_FLOATCOORDS, MVD1 floatcoords, RMQ, DarkPlaces, KEX */
    SG_BMSG_ANGLE8,      /* char * 360 / 256 */
    SG_BMSG_ANGLE16,     /* short * 360 / 65536 */
    SG_BMSG_ANGLE_FLOAT, /* float degrees: RMQ PRFL_FLOATANGLE, DarkPlaces */
    SG_BMSG_NUM_COUNT
};

/* Bytes on the wire of each kind (1 to 4); 0 for a kind out of range. */
static inline size_t sg_bmsg_num_size(enum sg_bmsg_num kind)
{
    static const uint8_t sizes[SG_BMSG_NUM_COUNT] = {1, 1, 2, 2, 4, 4, 2, 3, 4, 4, 1, 2, 4};

    return (unsigned)kind < SG_BMSG_NUM_COUNT ? sizes[kind] : 0;
}

/* The kind's name ("coord16", "angle8", ...), static; "?" out of range. */
const char *sg_bmsg_num_name(enum sg_bmsg_num kind);

/* The value the games compute from `raw` (bits above the kind's size ignored). */
float sg_bmsg_num_value(enum sg_bmsg_num kind, uint32_t raw);

/*
 * The raw form of `value`, rounded to the nearest step (QuakeSpasm's
 * Q_rint rule; other writers truncate, which is why a re-encoder writes
 * the raw value it read instead of quantizing the float again).  Integers
 * and coordinates are clamped to their range, angles wrap, NaN gives 0,
 * float kinds keep the value's bits.
 */
uint32_t sg_bmsg_num_quantize(enum sg_bmsg_num kind, float value);

/*
 * The coordinate and angle kinds of one protocol variant, worked out once
 * (STYLE.md "Work out the variant once").  Quake 2 (34/35/36) and plain
 * QuakeWorld and NetQuake 15/666 use SG_BMSG_SIZES_CLASSIC; per-field
 * exceptions (Q2PRO short angles, FitzQuake clc_move angle16, MVD1 float
 * origins) stay with the game's field tables.
 */
struct sg_bmsg_sizes {
    uint8_t coord; /* enum sg_bmsg_num */
    uint8_t angle; /* enum sg_bmsg_num */
};

#define SG_BMSG_SIZES_CLASSIC ((struct sg_bmsg_sizes){SG_BMSG_COORD16, SG_BMSG_ANGLE8})

/* RMQ (999) protocol flags, as in serverinfo's second long. */
#define SG_BMSG_PRFL_SHORTANGLE 0x02u
#define SG_BMSG_PRFL_FLOATANGLE 0x04u
#define SG_BMSG_PRFL_24BITCOORD 0x08u
#define SG_BMSG_PRFL_FLOATCOORD 0x10u
#define SG_BMSG_PRFL_INT32COORD 0x80u
/* FTE_PEXT_FLOATCOORDS (QuakeWorld serverdata, FTE extension bits). */
#define SG_BMSG_FTE_FLOATCOORDS 0x8000u

/* NetQuake by RMQ flags (0 for 15 and 666): float coords win over int32,
 * int32 over 24-bit; float angles over short ones (QuakeSpasm common.c). */
struct sg_bmsg_sizes sg_bmsg_sizes_nq(uint32_t prfl_flags);
/* QuakeWorld by FTE extension bits: FLOATCOORDS makes every coord a float
 * and every angle an angle16 (ezQuake com_msg.c). */
struct sg_bmsg_sizes sg_bmsg_sizes_qw(uint32_t fte_ext);

/* ------------------------------------------------------------------ */
/* Reader                                                                */

struct sg_bmsg_reader {
    const uint8_t *data; /* borrowed for the reader's use */
    size_t len;          /* bytes in data */
    size_t pos;          /* next byte to read; where decoding stopped after a failure */
    size_t end;          /* len; pos once a read failed, so nothing more is read */
    bool overflowed;     /* sticky: a read did not fit */
};

/* A reader over `len` bytes at `data` (borrowed, not modified; may be
 * NULL when `len` is 0). */
static inline void sg_bmsg_reader_init(struct sg_bmsg_reader *r, const void *data, size_t len)
{
    r->data = data ? (const uint8_t *)data : (const uint8_t *)"";
    r->len = len;
    r->pos = 0;
    r->end = len;
    r->overflowed = false;
}

/* Bytes left to read (0 once the reader failed). */
static inline size_t sg_bmsg_remaining(const struct sg_bmsg_reader *r)
{
    return r->end - r->pos;
}

/* Mark the reader failed at its position (also for a codec's own checks). */
static inline void sg_bmsg_reader_fail(struct sg_bmsg_reader *r)
{
    r->end = r->pos;
    r->overflowed = true;
}

/* The next `n` bytes (consumed), or NULL and the reader marked (also for
 * n == 0 on a reader already marked: every read fails after a failure). */
static inline const uint8_t *sg_bmsg_take(struct sg_bmsg_reader *r, size_t n)
{
    const uint8_t *p;

    if (r->end - r->pos < n || (n == 0 && r->overflowed)) {
        sg_bmsg_reader_fail(r);
        return NULL;
    }
    p = r->data + r->pos;
    r->pos += n;
    return p;
}

/* 0..255, or -1 (marked). */
static inline int sg_bmsg_read_u8(struct sg_bmsg_reader *r)
{
    const uint8_t *p = sg_bmsg_take(r, 1);

    return p ? p[0] : -1;
}
/* -128..127, or -1 (marked). */
static inline int sg_bmsg_read_s8(struct sg_bmsg_reader *r)
{
    const uint8_t *p = sg_bmsg_take(r, 1);

    return p ? (int)(int8_t)p[0] : -1;
}
/* 0..65535, or -1 (marked). */
static inline int sg_bmsg_read_u16(struct sg_bmsg_reader *r)
{
    const uint8_t *p = sg_bmsg_take(r, 2);

    return p ? sg_le16(p) : -1;
}
/* -32768..32767, or -1 (marked). */
static inline int sg_bmsg_read_s16(struct sg_bmsg_reader *r)
{
    const uint8_t *p = sg_bmsg_take(r, 2);

    return p ? (int)(int16_t)sg_le16(p) : -1;
}
/* The 32 bits, or 0xffffffff (marked). */
static inline uint32_t sg_bmsg_read_u32(struct sg_bmsg_reader *r)
{
    const uint8_t *p = sg_bmsg_take(r, 4);

    return p ? sg_le32(p) : 0xffffffffu;
}
static inline int32_t sg_bmsg_read_s32(struct sg_bmsg_reader *r)
{
    return (int32_t)sg_bmsg_read_u32(r);
}
/* Big-endian (NetQuake's datagram header). */
static inline int sg_bmsg_read_be16(struct sg_bmsg_reader *r)
{
    const uint8_t *p = sg_bmsg_take(r, 2);

    return p ? sg_be16(p) : -1;
}
static inline uint32_t sg_bmsg_read_be32(struct sg_bmsg_reader *r)
{
    const uint8_t *p = sg_bmsg_take(r, 4);

    return p ? sg_be32(p) : 0xffffffffu;
}
/* A float as the games read it, or -1.0f (marked).  Keep
 * sg_bmsg_read_u32 bits when the value is to be written back. */
static inline float sg_bmsg_read_float(struct sg_bmsg_reader *r)
{
    const uint8_t *p = sg_bmsg_take(r, 4);
    uint32_t u;
    float f;

    if (!p)
        return -1.0f;
    u = sg_le32(p);
    memcpy(&f, &u, sizeof(f));
    return f;
}

/*
 * A number of `kind`: its raw form into *raw (0 on failure).  Returns 0,
 * or SG_E_OVERFLOW (marked), or -EINVAL for a kind out of range (marked:
 * a field table that names no kind is a bug the codec must see).
 */
static inline int sg_bmsg_read_num(struct sg_bmsg_reader *r, enum sg_bmsg_num kind, uint32_t *raw)
{
    size_t n = sg_bmsg_num_size(kind);
    const uint8_t *p;

    *raw = 0;
    if (n == 0) {
        sg_bmsg_reader_fail(r);
        return -EINVAL;
    }
    p = sg_bmsg_take(r, n);
    if (!p)
        return SG_E_OVERFLOW;
    switch (n) {
    case 1:
        *raw = p[0];
        break;
    case 2:
        *raw = sg_le16(p);
        break;
    case 3:
        *raw = (uint32_t)sg_le16(p) | (uint32_t)p[2] << 16;
        break;
    default:
        *raw = sg_le32(p);
        break;
    }
    return 0;
}

/* The same with the value too (`value` may be NULL); 0.0f on failure. */
static inline int sg_bmsg_read_numf(struct sg_bmsg_reader *r, enum sg_bmsg_num kind, uint32_t *raw,
                                    float *value)
{
    int err = sg_bmsg_read_num(r, kind, raw);

    if (value)
        *value = err < 0 ? 0.0f : sg_bmsg_num_value(kind, *raw);
    return err;
}

/* `n` bytes copied into `out`: 0, or SG_E_OVERFLOW (nothing copied, marked). */
static inline int sg_bmsg_read_data(struct sg_bmsg_reader *r, void *out, size_t n)
{
    const uint8_t *p = sg_bmsg_take(r, n);

    if (!p)
        return SG_E_OVERFLOW;
    if (n)
        memcpy(out, p, n);
    return 0;
}

/* Skip `n` bytes: 0, or SG_E_OVERFLOW (marked). */
static inline int sg_bmsg_skip(struct sg_bmsg_reader *r, size_t n)
{
    return sg_bmsg_take(r, n) ? 0 : SG_E_OVERFLOW;
}

/* The next byte without consuming it, or -1 at the end (the reader is
 * not marked: looking is not reading). */
static inline int sg_bmsg_peek_u8(const struct sg_bmsg_reader *r)
{
    return r->pos < r->end ? r->data[r->pos] : -1;
}

/*
 * Strings.  The games read bytes until a terminator, storing at most their
 * buffer size minus one (NetQuake, QuakeWorld and Quake 2: 2048), and
 * what ended the string decides how to write it back:
 */
enum sg_bmsg_str_end {
    SG_BMSG_STR_NUL, /* a 0 byte, consumed */
    SG_BMSG_STR_FF,  /* a 0xff byte, consumed (SG_BMSG_STR_STOP_FF) */
    SG_BMSG_STR_NL,  /* a '\n', consumed (SG_BMSG_STR_STOP_NL) */
    SG_BMSG_STR_CUT, /* `cap - 1` bytes stored: the rest stays in the message */
    SG_BMSG_STR_END, /* the message ended first: the reader is marked */
};

/* WinQuake, id's QuakeWorld and Quake 2 read strings with MSG_ReadChar,
 * whose -1 for a 0xff byte ends the string as a 0 does (consumed);
 * QuakeSpasm, ezQuake and Q2PRO read bytes and keep 0xff. */
#define SG_BMSG_STR_STOP_FF 0x1u
/* MSG_ReadStringLine (QuakeWorld's connect lines): '\n' ends it too. */
#define SG_BMSG_STR_STOP_NL 0x2u

/*
 * Read a string into `out` (`cap` bytes, cap >= 1; always NUL-terminated):
 * bytes are stored until a terminator (consumed, not stored: 0, and 0xff
 * or '\n' when `flags` ask for them), until `cap - 1` are stored (nothing
 * more is consumed, even a terminator that follows: as the games do), or
 * until the end of the message, which the games count as a read past it:
 * the bytes are kept but the reader is marked.  Returns the bytes stored;
 * `*end` (may be NULL) says which case it was.  Bytes 1..255 other than
 * the terminators are stored as they came.  cap == 0 reads nothing
 * (returns 0, SG_BMSG_STR_CUT); a reader already marked reads nothing
 * either (returns 0, SG_BMSG_STR_END).
 */
size_t sg_bmsg_read_string(struct sg_bmsg_reader *r, char *out, size_t cap, unsigned flags,
                           enum sg_bmsg_str_end *end);

/* ------------------------------------------------------------------ */
/* Writer                                                                */

struct sg_bmsg_writer {
    uint8_t *data;   /* borrowed for the writer's use */
    size_t cap;      /* room in data */
    size_t len;      /* bytes written */
    size_t limit;    /* cap; len once a write failed, so nothing more is written */
    bool overflowed; /* sticky: a write did not fit */
};

/* A writer into `cap` bytes at `buf` (borrowed; may be NULL when `cap`
 * is 0: nothing is ever stored there then). */
static inline void sg_bmsg_writer_init(struct sg_bmsg_writer *w, void *buf, size_t cap)
{
    w->data = buf ? (uint8_t *)buf : (uint8_t *)"";
    w->cap = cap;
    w->len = 0;
    w->limit = cap;
    w->overflowed = false;
}

/* Room for `n` more bytes (claimed), or NULL and the writer marked. */
static inline uint8_t *sg_bmsg_room(struct sg_bmsg_writer *w, size_t n)
{
    uint8_t *p;

    if (w->limit - w->len < n) {
        w->limit = w->len;
        w->overflowed = true;
        return NULL;
    }
    p = w->data + w->len;
    w->len += n;
    return p;
}

/* Each write returns 0, or SG_E_OVERFLOW having written nothing (marked). */
static inline int sg_bmsg_write_u8(struct sg_bmsg_writer *w, unsigned v)
{
    uint8_t *p = sg_bmsg_room(w, 1);

    if (!p)
        return SG_E_OVERFLOW;
    p[0] = (uint8_t)v;
    return 0;
}
/* Low 16 bits of `v` (so shorts and words alike). */
static inline int sg_bmsg_write_u16(struct sg_bmsg_writer *w, unsigned v)
{
    uint8_t *p = sg_bmsg_room(w, 2);

    if (!p)
        return SG_E_OVERFLOW;
    sg_put_le16(p, (uint16_t)v);
    return 0;
}
static inline int sg_bmsg_write_u32(struct sg_bmsg_writer *w, uint32_t v)
{
    uint8_t *p = sg_bmsg_room(w, 4);

    if (!p)
        return SG_E_OVERFLOW;
    sg_put_le32(p, v);
    return 0;
}
static inline int sg_bmsg_write_s32(struct sg_bmsg_writer *w, int32_t v)
{
    return sg_bmsg_write_u32(w, (uint32_t)v);
}
static inline int sg_bmsg_write_be16(struct sg_bmsg_writer *w, unsigned v)
{
    uint8_t *p = sg_bmsg_room(w, 2);

    if (!p)
        return SG_E_OVERFLOW;
    sg_put_be16(p, (uint16_t)v);
    return 0;
}
static inline int sg_bmsg_write_be32(struct sg_bmsg_writer *w, uint32_t v)
{
    uint8_t *p = sg_bmsg_room(w, 4);

    if (!p)
        return SG_E_OVERFLOW;
    sg_put_be32(p, v);
    return 0;
}
static inline int sg_bmsg_write_float(struct sg_bmsg_writer *w, float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return sg_bmsg_write_u32(w, u);
}

/* A number of `kind` from its raw form (bits above its size ignored);
 * -EINVAL for a kind out of range (marked). */
static inline int sg_bmsg_write_num(struct sg_bmsg_writer *w, enum sg_bmsg_num kind, uint32_t raw)
{
    size_t n = sg_bmsg_num_size(kind);
    uint8_t *p;

    if (n == 0) {
        w->limit = w->len;
        w->overflowed = true;
        return -EINVAL;
    }
    p = sg_bmsg_room(w, n);
    if (!p)
        return SG_E_OVERFLOW;
    p[0] = (uint8_t)raw;
    if (n > 1)
        p[1] = (uint8_t)(raw >> 8);
    if (n > 2)
        p[2] = (uint8_t)(raw >> 16);
    if (n > 3)
        p[3] = (uint8_t)(raw >> 24);
    return 0;
}

static inline int sg_bmsg_write_data(struct sg_bmsg_writer *w, const void *in, size_t n)
{
    uint8_t *p = sg_bmsg_room(w, n);

    if (!p)
        return SG_E_OVERFLOW;
    if (n)
        memcpy(p, in, n);
    return 0;
}

/*
 * `len` bytes of `s`, then the terminator `end` names (0, 0xff or '\n';
 * none for SG_BMSG_STR_CUT and SG_BMSG_STR_END), all or nothing: the
 * exact bytes sg_bmsg_read_string consumed.  `s` should hold no byte that
 * ends a string for the receiver (0, and 0xff or '\n' where it stops at
 * them): the writer does not look.
 */
int sg_bmsg_write_string(struct sg_bmsg_writer *w, const void *s, size_t len,
                         enum sg_bmsg_str_end end);

#endif
