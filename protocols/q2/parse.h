/*
 * The Quake 2 message parser's inside, shared by its files and no one
 * else: parse.c (the stream, the server's messages), delta.c (entities
 * and the player state), kex.c (the rerelease demos' messages), clmsg.c
 * (the client's messages), zlib.c (the inflate streams).  The field
 * readers are inline here, as they were in the one file: every message
 * reads through them.
 */
#ifndef SG_PROTOCOLS_Q2_PARSE_H
#define SG_PROTOCOLS_Q2_PARSE_H

#include "protocols/q2/q2.h"
#include "protocols/q2/bits.h"

#include "protocols/byteorder.h"
#include "protocols/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The readers are the one file's static functions they were (the compiler
 * weighs them as it did); a file that uses only some keeps no warning. */
#define SG_Q2__READER __attribute__((unused))

struct ctx {
    struct sg_bmsg_reader r;
    struct sg_q2_variant *v;
    struct sg_q2_parsed *out;
    enum sg_dir dir;
    int err;
    int parent; /* zpacket message index, or -1 */
    /* bit reader (Q2PRO batched moves) */
    uint32_t bits_buf, bits_left;
};

/* Room in *arr (*cap elements of `size`) for element `used`: 0, or the
 * array doubled (at most to `max`), SG_E_TOOBIG at `max`, -ENOMEM. */
static SG_Q2__READER int room(void **arr, uint32_t *cap, uint32_t used, uint32_t max, size_t size)
{
    uint32_t n = *cap ? *cap : 1;
    void *p;

    if (used < *cap)
        return 0;
    if (used >= max)
        return SG_E_TOOBIG;
    while (n <= used)
        n = n > max / 2 ? max : 2 * n;
    p = realloc(*arr, (size_t)n * size);
    if (!p)
        return -ENOMEM;
    *arr = p;
    *cap = n;
    return 0;
}

/* ---- fields ---- */

static SG_Q2__READER void fail(struct ctx *c, int err)
{
    if (!c->err)
        c->err = err;
    sg_bmsg_reader_fail(&c->r);
}

/* Room for one more field / message (SG_E_TOOBIG at the cap, -ENOMEM).
 * Either may move its array: no pointer into one is kept across a call. */
static SG_Q2__READER int field_room(struct ctx *c)
{
    struct sg_q2_parsed *o = c->out;
    void *a = o->fields;
    int err;

    if (o->nfields < o->fields_cap)
        return 0;
    err = room(&a, &o->fields_cap, o->nfields, SG_Q2_MAX_FIELDS, sizeof(*o->fields));
    o->fields = a;
    return err;
}

static SG_Q2__READER int msg_room(struct sg_q2_parsed *o)
{
    void *a = o->msgs;
    int err;

    if (o->nmsgs < o->msgs_cap)
        return 0;
    err = room(&a, &o->msgs_cap, o->nmsgs, SG_Q2_MAX_MSGS, sizeof(*o->msgs));
    o->msgs = a;
    return err;
}

static SG_Q2__READER struct sg_field *push(struct ctx *c, const char *name, uint8_t type)
{
    struct sg_field *f;
    int err = field_room(c);

    if (err < 0) {
        fail(c, err);
        return NULL;
    }
    f = &c->out->fields[c->out->nfields++];
    *f = (struct sg_field){.name = name, .type = type};
    return f;
}

/* A number of `kind` (its raw value, 0 on failure).  The one check on the
 * fast path covers a failed reader too: a failure leaves no byte to read. */
static inline uint32_t num(struct ctx *c, const char *name, uint8_t kind)
{
    size_t n = sg_bmsg_num_size(kind);
    const uint8_t *p;
    uint32_t raw;

    if (c->r.end - c->r.pos < n || n == 0 || c->out->nfields >= c->out->fields_cap) {
        int err = n == 0 || c->r.end - c->r.pos < n ? SG_E_OVERFLOW : field_room(c);
        if (err < 0) {
            if (!c->r.overflowed)
                fail(c, err);
            return 0;
        }
    }
    p = c->r.data + c->r.pos;
    c->r.pos += n;
    switch (n) {
    case 1:
        raw = p[0];
        break;
    case 2:
        raw = sg_le16(p);
        break;
    case 3:
        raw = (uint32_t)sg_le16(p) | (uint32_t)p[2] << 16;
        break;
    default:
        raw = sg_le32(p);
        break;
    }
    c->out->fields[c->out->nfields++] =
        (struct sg_field){.name = name, .type = SG_FIELD_NUM, .num = kind, .raw = raw};
    return raw;
}

static SG_Q2__READER int32_t snum(struct ctx *c, const char *name, uint8_t kind)
{
    uint32_t raw = num(c, name, kind);

    switch (kind) {
    case SG_BMSG_S8:
        return (int8_t)raw;
    case SG_BMSG_S16:
    case SG_BMSG_COORD16:
    case SG_BMSG_ANGLE16:
        return (int16_t)raw;
    default:
        return (int32_t)raw;
    }
}

/* ---- what the classic and the rerelease entity / player deltas share ---- */

/* An entity's models (model, model2..4 by their bits), each of `kind`. */
static SG_Q2__READER void entity_models(struct ctx *c, uint64_t bits, uint8_t kind)
{
    if (bits & U_MODEL)
        num(c, "model", kind);
    if (bits & U_MODEL2)
        num(c, "model2", kind);
    if (bits & U_MODEL3)
        num(c, "model3", kind);
    if (bits & U_MODEL4)
        num(c, "model4", kind);
}

/* A 16-bit sound word with the looping sound's bytes it announces (Q2PRO's
 * extensions and the rerelease): 0x4000 a volume, 0x8000 an attenuation. */
static SG_Q2__READER void sound_loop(struct ctx *c)
{
    uint32_t w = num(c, "sound", SG_BMSG_U16);

    if (w & 0x4000)
        num(c, "loop_volume", SG_BMSG_U8);
    if (w & 0x8000)
        num(c, "loop_attenuation", SG_BMSG_U8);
}

/* svc_sound after its flags and index: volume (0x01), attenuation (0x02),
 * offset (0x10) and the entity and channel (0x08) as `entchan` of
 * `entchan_kind`; the position (0x04) is each protocol's own. */
static SG_Q2__READER void sound_opts(struct ctx *c, uint32_t flags, uint8_t entchan_kind)
{
    if (flags & 0x01)
        num(c, "volume", SG_BMSG_U8);
    if (flags & 0x02)
        num(c, "attenuation", SG_BMSG_U8);
    if (flags & 0x10)
        num(c, "offset", SG_BMSG_U8);
    if (flags & 0x08)
        num(c, "entchan", entchan_kind);
}

/* Four bytes: a colour and its alpha (the player's blend, the rerelease's
 * damage blend), as names[0..3]. */
static SG_Q2__READER void rgba(struct ctx *c, const char *const names[4])
{
    for (int i = 0; i < 4; i++)
        num(c, names[i], SG_BMSG_U8);
}

/* A number read when its bit is set: a message's optional fields as a table. */
struct flagged {
    uint32_t bit;
    const char *name;
    uint8_t kind;
};

/* The fields of table t[0..n) whose bit is in `bits`, in the table's order. */
static SG_Q2__READER void flagged(struct ctx *c, uint32_t bits, const struct flagged *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (bits & t[i].bit)
            num(c, t[i].name, t[i].kind);
}

/* The stats' field names, stat0..stat63 (delta.c). */
extern const char *const sg_q2__stat_names[64];

/* A string as Q2PRO reads it: bytes up to a 0 (consumed), or up to the end
 * of the message (then `end` is SG_BMSG_STR_END: written back without the 0). */
static SG_Q2__READER const uint8_t *str(struct ctx *c, const char *name, uint32_t *len)
{
    const uint8_t *p, *z;
    struct sg_field *f;

    if (len)
        *len = 0;
    if (c->r.overflowed)
        return NULL;
    p = c->r.data + c->r.pos;
    z = memchr(p, 0, c->r.end - c->r.pos);
    if (!z && c->r.pos >= c->r.end) {
        fail(c, SG_E_OVERFLOW);
        return NULL;
    }
    f = push(c, name, SG_FIELD_STRING);
    if (!f)
        return NULL;
    f->ptr = p;
    if (z) {
        f->len = (uint32_t)(z - p);
        c->r.pos += f->len + 1u;
    } else {
        /* The message ends first: the receivers take the bytes read (id's
         * client sends "disconnect" so, without its 0). */
        f->len = (uint32_t)(c->r.end - c->r.pos);
        f->end = SG_BMSG_STR_END;
        c->r.pos = c->r.end;
    }
    if (len)
        *len = f->len;
    return p;
}

static SG_Q2__READER const uint8_t *data(struct ctx *c, const char *name, size_t n)
{
    size_t at = c->r.pos;
    struct sg_field *f;

    if (c->r.overflowed)
        return NULL;
    if (sg_bmsg_skip(&c->r, n) < 0) {
        fail(c, SG_E_OVERFLOW);
        return NULL;
    }
    f = push(c, name, SG_FIELD_DATA);
    if (!f)
        return NULL;
    f->ptr = c->r.data + at;
    f->len = (uint32_t)n;
    return f->ptr;
}

static SG_Q2__READER void value(struct ctx *c, const char *name, int32_t v)
{
    struct sg_field *f = push(c, name, SG_FIELD_VALUE);

    if (f)
        f->raw = (uint32_t)v;
}

/* ---- positions ---- */

/* MSG_ReadExtCoord / MSG_ReadDeltaCoord / MSG_ReadDeltaInt23: a word, and
 * a byte when its bit 0 is set. */
static SG_Q2__READER void ext_coord(struct ctx *c, const char *name)
{
    if (num(c, name, SG_BMSG_U16) & 1)
        num(c, "hi", SG_BMSG_U8);
}

static SG_Q2__READER void coord(struct ctx *c, const char *name, bool ext)
{
    if (ext)
        ext_coord(c, name);
    else
        num(c, name, SG_BMSG_COORD16);
}

static const char *const xyz[3] = {"x", "y", "z"};

static SG_Q2__READER void pos(struct ctx *c, const char *const *names)
{
    bool ext = (c->v->es & SG_Q2_ES_EXTENSIONS_2) != 0;

    if (c->v->es & SG_Q2_ES_KEX_FLOAT) {
        for (int i = 0; i < 3; i++)
            num(c, names ? names[i] : xyz[i], SG_BMSG_FLOAT);
        return;
    }

    for (int i = 0; i < 3; i++)
        coord(c, names ? names[i] : xyz[i], ext);
}


#define U_ANGLE16   (1ull << 13)
#define U_MODEL16   (1ull << 28)
#define U_MOREFX8   (1ull << 29)
#define U_ALPHA     (1ull << 30)
#define U_MOREBITS4 (1ull << 31)
#define U_SCALE     (1ull << 32)
#define U_MOREFX16  (1ull << 33)

#define PS_MOREBITS       (1u << 15)
#define PS_FOG            (1u << 16)

#define EPS_GUNOFFSET   (1u << 0)
#define EPS_GUNANGLES   (1u << 1)
#define EPS_M_VELOCITY2 (1u << 2)
#define EPS_M_ORIGIN2   (1u << 3)
#define EPS_VIEWANGLE2  (1u << 4)
#define EPS_STATS       (1u << 5)
#define EPS_CLIENTNUM   (1u << 6)

/* delta.c */
int sg_q2__entity_bits(struct ctx *c, uint64_t *bits);
void sg_q2__sized(struct ctx *c, const char *name, uint64_t bits, uint64_t b8, uint64_t b16);
void sg_q2__entity_delta(struct ctx *c, uint64_t bits);
void sg_q2__entity_list(struct ctx *c, bool removes);
void sg_q2__three(struct ctx *c, const char *a, const char *b, const char *d, uint8_t kind);
void sg_q2__blend(struct ctx *c);
void sg_q2__playerstate(struct ctx *c, bool enhanced, uint32_t extra);

/* kex.c */
void sg_q2__kex_serverdata(struct ctx *c, int protocol);
void sg_q2__kex_sound(struct ctx *c);
void sg_q2__kex_svc(struct ctx *c, int op, int self);

/* clmsg.c */
void sg_q2__clc(struct ctx *c, int op);

/* ---- zlib (zlib.c) ---- */

/*
 * A compressed body at the reader (u16 compressed length, u16 uncompressed
 * length, the deflated bytes): a zpacket's raw deflate through the parsed
 * stream's one inflater (made on the first zpacket, reset for each later
 * one), or a rerelease blast's zlib-wrapped data (`wrapped`, zlib's
 * `uncompress`: exactly the uncompressed length), inflated into the
 * stream's pool, no more than the header's length and `most` bytes.  On
 * success `sub` reads the inflated bytes as a stream of message `self`;
 * false when it failed (c's error set: not in a compressed body, too
 * large, the pool full, a broken stream).
 */
bool sg_q2__inflated(struct ctx *c, int self, bool wrapped, uint32_t most, struct ctx *sub);
/*
 * A compressed download's chunk through the download's inflate stream, as
 * Q2PRO's client runs it (inflate_udp_download): Z_SYNC_FLUSH until the
 * output stops filling, the stream reset at its end.  Returns the bytes
 * it gave, or a negative error (a broken stream, more than SG_Q2_ZDL_MAX),
 * after which the stream starts again.
 */
int64_t sg_q2__zdl_inflate(struct sg_q2_parsed *o, const uint8_t *in, size_t n);
/* The download's stream starts again (a new level, the download's end);
 * `d` may be NULL. */
void sg_q2__zdl_reset(struct sg_q2_zdl *d);
/* The inflate streams of `p` ended and freed. */
void sg_q2__zlib_free(struct sg_q2_parsed *p);

#endif
