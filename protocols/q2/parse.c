/*
 * Quake 2 messages, both directions, into field lists (q2.h).  Read order
 * and widths as the receivers read them: Q2PRO's client (src/client/parse.c,
 * src/common/msg.c) for svc_*, its server (src/server/user.c) for clc_*;
 * layouts in PROTOCOLS.md §A3-A10 and the DM2 seed §3.
 */
#include "protocols/q2/q2.h"
#include "protocols/q2/bits.h"

#include "protocols/error.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

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

#define CS_END_OLD 2080
#define CS_END_NEW 13630

void sg_q2_variant_init(struct sg_q2_variant *v, int protocol, int minor)
{
    memset(v, 0, sizeof(*v));
    v->protocol = protocol;
    v->wire = protocol;
    v->minor = minor;
    v->cs_end = CS_END_OLD;
    v->known = true;
    if (protocol == 2022 || protocol == 2023) {
        /* Rerelease (KEX) demos: their own reads (kex_*); 36-bit entity
         * bits, 32-bit solid, 12448 configstrings. */
        v->kex = protocol;
        v->cs_end = 12448;
        v->es = SG_Q2_ES_LONGSOLID | SG_Q2_ES_EXTENSIONS;
        if (protocol == 2023)
            v->es |= SG_Q2_ES_KEX_FLOAT;
    } else if (protocol >= 3434 && protocol <= 3436) {
        /* Q2PRO's extended demos: protocol 34 layout with the extensions. */
        v->protocol = 34;
        v->extended = true;
        v->cs_end = CS_END_NEW;
        v->es = SG_Q2_ES_LONGSOLID | SG_Q2_ES_SHORTANGLES | SG_Q2_ES_EXTENSIONS;
        v->ps = SG_Q2_PS_EXTENSIONS;
        if (protocol >= 3435) {
            v->es |= SG_Q2_ES_EXTENSIONS_2;
            v->ps |= SG_Q2_PS_EXTENSIONS_2;
        }
        if (protocol >= 3436)
            v->ps |= SG_Q2_PS_MOREBITS;
    } else if (protocol == 35) {
        if (minor >= 1905)
            v->es |= SG_Q2_ES_LONGSOLID;
    } else if (protocol == 36) {
        v->es |= SG_Q2_ES_LONGSOLID;
        if (minor >= 1018)
            v->es |= SG_Q2_ES_SHORTANGLES;
    }
}

int sg_q2_parsed_init(struct sg_q2_parsed *p)
{
    memset(p, 0, sizeof(*p));
    /* Not cleared: the parser writes each field and message whole before
     * anyone reads it.  The lists start at a datagram's usual worth and
     * grow as a stream needs (field_room(), msg_room()), up to the caps. */
    p->fields = malloc(SG_Q2_FIELDS_START * sizeof(*p->fields));
    p->fields_cap = SG_Q2_FIELDS_START;
    p->msgs = malloc(SG_Q2_MSGS_START * sizeof(*p->msgs));
    p->msgs_cap = SG_Q2_MSGS_START;
    p->zpool = malloc(SG_Q2_ZPOOL);
    if (!p->fields || !p->msgs || !p->zpool) {
        sg_q2_parsed_free(p);
        return -ENOMEM;
    }
    return 0;
}

/* The download's inflate stream: the client's (Q2PRO cls.download.z). */
struct sg_q2_zdl {
    z_stream z;
    bool live; /* inflateInit2 done */
    uint8_t out[16384];
};

static void zdl_reset(struct sg_q2_zdl *d)
{
    if (d && d->live)
        inflateReset(&d->z);
}

void sg_q2_parsed_free(struct sg_q2_parsed *p)
{
    if (p->inflater) {
        inflateEnd(p->inflater);
        free(p->inflater);
    }
    if (p->zdl) {
        if (p->zdl->live)
            inflateEnd(&p->zdl->z);
        free(p->zdl);
    }
    free(p->fields);
    free(p->msgs);
    free(p->zpool);
    free(p->kex_solid);
    memset(p, 0, sizeof(*p));
}

/* Room in *arr (*cap elements of `size`) for element `used`: 0, or the
 * array doubled (at most to `max`), SG_E_TOOBIG at `max`, -ENOMEM. */
static int room(void **arr, uint32_t *cap, uint32_t used, uint32_t max, size_t size)
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

static void fail(struct ctx *c, int err)
{
    if (!c->err)
        c->err = err;
    sg_bmsg_reader_fail(&c->r);
}

/* Room for one more field / message (SG_E_TOOBIG at the cap, -ENOMEM).
 * Either may move its array: no pointer into one is kept across a call. */
static int field_room(struct ctx *c)
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

static int msg_room(struct sg_q2_parsed *o)
{
    void *a = o->msgs;
    int err;

    if (o->nmsgs < o->msgs_cap)
        return 0;
    err = room(&a, &o->msgs_cap, o->nmsgs, SG_Q2_MAX_MSGS, sizeof(*o->msgs));
    o->msgs = a;
    return err;
}

static struct sg_field *push(struct ctx *c, const char *name, uint8_t type)
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

static int32_t snum(struct ctx *c, const char *name, uint8_t kind)
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

/* A string as Q2PRO reads it: bytes up to a 0 (consumed), or up to the end
 * of the message (then `end` is SG_BMSG_STR_END: written back without the 0). */
static const uint8_t *str(struct ctx *c, const char *name, uint32_t *len)
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

static const uint8_t *data(struct ctx *c, const char *name, size_t n)
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

static void value(struct ctx *c, const char *name, int32_t v)
{
    struct sg_field *f = push(c, name, SG_FIELD_VALUE);

    if (f)
        f->raw = (uint32_t)v;
}

/* ---- positions ---- */

/* MSG_ReadExtCoord / MSG_ReadDeltaCoord / MSG_ReadDeltaInt23: a word, and
 * a byte when its bit 0 is set. */
static void ext_coord(struct ctx *c, const char *name)
{
    if (num(c, name, SG_BMSG_U16) & 1)
        num(c, "hi", SG_BMSG_U8);
}

static void coord(struct ctx *c, const char *name, bool ext)
{
    if (ext)
        ext_coord(c, name);
    else
        num(c, name, SG_BMSG_COORD16);
}

static const char *const xyz[3] = {"x", "y", "z"};

static void pos(struct ctx *c, const char *const *names)
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

static const char *const pos2n[3] = {"x2", "y2", "z2"};
static const char *const offn[3] = {"ox", "oy", "oz"};

/* ---- entities ---- */

#define U_ANGLE16   (1ull << 13)
#define U_MODEL16   (1ull << 28)
#define U_MOREFX8   (1ull << 29)
#define U_ALPHA     (1ull << 30)
#define U_MOREBITS4 (1ull << 31)
#define U_SCALE     (1ull << 32)
#define U_MOREFX16  (1ull << 33)

/* MSG_ParseEntityBits: the bits and the number (0 ends a list). */
static int entity_bits(struct ctx *c, uint64_t *bits)
{
    uint64_t b = num(c, "bits", SG_BMSG_U8);

    if (b & U_MOREBITS1)
        b |= (uint64_t)num(c, "bits1", SG_BMSG_U8) << 8;
    if (b & U_MOREBITS2)
        b |= (uint64_t)num(c, "bits2", SG_BMSG_U8) << 16;
    if (b & U_MOREBITS3)
        b |= (uint64_t)num(c, "bits3", SG_BMSG_U8) << 24;
    if ((c->v->es & SG_Q2_ES_EXTENSIONS) && (b & U_MOREBITS4))
        b |= (uint64_t)num(c, "bits4", SG_BMSG_U8) << 32;
    *bits = b;
    if (b & U_NUMBER16)
        return (int)num(c, "number", SG_BMSG_U16);
    return (int)num(c, "number", SG_BMSG_U8);
}

/* One of byte / word / long chosen by two bits (skin, effects, renderfx, morefx). */
static void sized(struct ctx *c, const char *name, uint64_t bits, uint64_t b8, uint64_t b16)
{
    if ((bits & (b8 | b16)) == (b8 | b16))
        num(c, name, SG_BMSG_S32);
    else if (bits & b8)
        num(c, name, SG_BMSG_U8);
    else if (bits & b16)
        num(c, name, SG_BMSG_U16);
}

/* MSG_ParseDeltaEntity. */
static void entity_delta(struct ctx *c, uint64_t bits)
{
    unsigned es = c->v->es;
    uint8_t mk = (es & SG_Q2_ES_EXTENSIONS) && (bits & U_MODEL16) ? SG_BMSG_U16 : SG_BMSG_U8;
    uint8_t ak = (es & SG_Q2_ES_SHORTANGLES) && (bits & U_ANGLE16) ? SG_BMSG_ANGLE16
                                                                     : SG_BMSG_ANGLE8;
    bool ext2 = (es & SG_Q2_ES_EXTENSIONS_2) != 0;

    if (!bits)
        return;
    if (bits & U_MODEL)
        num(c, "model", mk);
    if (bits & U_MODEL2)
        num(c, "model2", mk);
    if (bits & U_MODEL3)
        num(c, "model3", mk);
    if (bits & U_MODEL4)
        num(c, "model4", mk);
    if (bits & U_FRAME8)
        num(c, "frame", SG_BMSG_U8);
    if (bits & U_FRAME16)
        num(c, "frame16", SG_BMSG_U16);
    sized(c, "skin", bits, U_SKIN8, U_SKIN16);
    sized(c, "effects", bits, U_EFFECTS8, U_EFFECTS16);
    sized(c, "renderfx", bits, U_RENDERFX8, U_RENDERFX16);
    if (bits & U_ORIGIN1)
        coord(c, "origin0", ext2);
    if (bits & U_ORIGIN2)
        coord(c, "origin1", ext2);
    if (bits & U_ORIGIN3)
        coord(c, "origin2", ext2);
    if (bits & U_ANGLE1)
        num(c, "angle0", ak);
    if (bits & U_ANGLE2)
        num(c, "angle1", ak);
    if (bits & U_ANGLE3)
        num(c, "angle2", ak);
    if (bits & U_OLDORIGIN) {
        static const char *const on[3] = {"oldorigin0", "oldorigin1", "oldorigin2"};
        pos(c, on);
    }
    if (bits & U_SOUND) {
        if (es & SG_Q2_ES_EXTENSIONS) {
            uint32_t w = num(c, "sound", SG_BMSG_U16);
            if (w & 0x4000)
                num(c, "loop_volume", SG_BMSG_U8);
            if (w & 0x8000)
                num(c, "loop_attenuation", SG_BMSG_U8);
        } else {
            num(c, "sound", SG_BMSG_U8);
        }
    }
    if (bits & U_EVENT)
        num(c, "event", SG_BMSG_U8);
    if (bits & U_SOLID)
        num(c, "solid", (es & SG_Q2_ES_LONGSOLID) ? SG_BMSG_S32 : SG_BMSG_U16);
    if (es & SG_Q2_ES_EXTENSIONS) {
        sized(c, "morefx", bits, U_MOREFX8, U_MOREFX16);
        if (bits & U_ALPHA)
            num(c, "alpha", SG_BMSG_U8);
        if (bits & U_SCALE)
            num(c, "scale", SG_BMSG_U8);
    }
}

/* A list of entity deltas up to number 0 (packetentities, baseline streams). */
static void entity_list(struct ctx *c, bool removes)
{
    for (int guard = 0; guard < 65536 && !c->r.overflowed; guard++) {
        uint64_t bits;
        int n = entity_bits(c, &bits);
        if (c->r.overflowed || n == 0)
            return;
        if (removes && (bits & U_REMOVE))
            continue;
        entity_delta(c, bits);
    }
}

/* ---- player state ---- */

#define PS_MOREBITS       (1u << 15)
#define PS_FOG            (1u << 16)

#define EPS_GUNOFFSET   (1u << 0)
#define EPS_GUNANGLES   (1u << 1)
#define EPS_M_VELOCITY2 (1u << 2)
#define EPS_M_ORIGIN2   (1u << 3)
#define EPS_VIEWANGLE2  (1u << 4)
#define EPS_STATS       (1u << 5)
#define EPS_CLIENTNUM   (1u << 6)

static void int23_or_short(struct ctx *c, const char *name)
{
    if (c->v->ps & SG_Q2_PS_EXTENSIONS_2)
        ext_coord(c, name);
    else
        num(c, name, SG_BMSG_S16);
}

static void three(struct ctx *c, const char *a, const char *b, const char *d, uint8_t kind)
{
    num(c, a, kind);
    num(c, b, kind);
    num(c, d, kind);
}

static void stats(struct ctx *c)
{
    uint64_t statbits = 0;
    int n = 32;
    static const char *const sn[64] = {
        "stat0",  "stat1",  "stat2",  "stat3",  "stat4",  "stat5",  "stat6",  "stat7",
        "stat8",  "stat9",  "stat10", "stat11", "stat12", "stat13", "stat14", "stat15",
        "stat16", "stat17", "stat18", "stat19", "stat20", "stat21", "stat22", "stat23",
        "stat24", "stat25", "stat26", "stat27", "stat28", "stat29", "stat30", "stat31",
        "stat32", "stat33", "stat34", "stat35", "stat36", "stat37", "stat38", "stat39",
        "stat40", "stat41", "stat42", "stat43", "stat44", "stat45", "stat46", "stat47",
        "stat48", "stat49", "stat50", "stat51", "stat52", "stat53", "stat54", "stat55",
        "stat56", "stat57", "stat58", "stat59", "stat60", "stat61", "stat62", "stat63",
    };

    if (c->v->ps & SG_Q2_PS_EXTENSIONS_2) {
        /* MSG_ReadVarInt64: 7 bits a byte, at most 10 bytes. */
        const uint8_t *p;
        size_t k = 0;
        int b;
        n = 64;
        do {
            if (c->r.pos + k >= c->r.end) {
                fail(c, SG_E_OVERFLOW);
                return;
            }
            b = c->r.data[c->r.pos + k];
            if (k < 10)
                statbits |= (uint64_t)(b & 0x7f) << (7 * k);
            k++;
        } while ((b & 0x80) && 7 * k < 64);
        p = data(c, "statbits", k);
        (void)p;
    } else {
        statbits = num(c, "statbits", SG_BMSG_S32);
    }
    if (n < 64)
        statbits &= (1ull << n) - 1;
    for (; statbits; statbits &= statbits - 1) /* the set bits, lowest first */
        num(c, sn[__builtin_ctzll(statbits)], SG_BMSG_S16);
}

static void blend(struct ctx *c)
{
    if (c->v->ps & SG_Q2_PS_EXTENSIONS_2) {
        uint32_t b = num(c, "blendbits", SG_BMSG_U8);
        for (int i = 0; i < 8; i++)
            if (b & (1u << i))
                num(c, i < 4 ? "blend" : "damage_blend", SG_BMSG_U8);
    } else {
        num(c, "blend0", SG_BMSG_U8);
        num(c, "blend1", SG_BMSG_U8);
        num(c, "blend2", SG_BMSG_U8);
        num(c, "blend3", SG_BMSG_U8);
    }
}

/* MSG_ReadFog. */
static void fog(struct ctx *c)
{
    uint32_t b = num(c, "fogbits", SG_BMSG_U8);

    if (b & 0x01)
        three(c, "fog_r", "fog_g", "fog_b", SG_BMSG_U8);
    if (b & 0x02) {
        num(c, "fog_density", SG_BMSG_U16);
        num(c, "fog_sky_factor", SG_BMSG_U16);
    }
    if (b & 0x04)
        num(c, "heightfog_density", SG_BMSG_U16);
    if (b & 0x08)
        num(c, "heightfog_falloff", SG_BMSG_U16);
    if (b & 0x10)
        three(c, "heightfog_start_r", "heightfog_start_g", "heightfog_start_b", SG_BMSG_U8);
    if (b & 0x20)
        three(c, "heightfog_end_r", "heightfog_end_g", "heightfog_end_b", SG_BMSG_U8);
    if (b & 0x40)
        ext_coord(c, "heightfog_start_dist");
    if (b & 0x80)
        ext_coord(c, "heightfog_end_dist");
}

/* MSG_ParseDeltaPlayerstate_Default (enhanced = false) or _Enhanced. */
static void playerstate(struct ctx *c, bool enhanced, uint32_t extra)
{
    uint32_t flags = num(c, "psflags", SG_BMSG_U16);
    bool ext2 = (c->v->ps & SG_Q2_PS_EXTENSIONS_2) != 0;

    if ((c->v->ps & SG_Q2_PS_MOREBITS) && (flags & PS_MOREBITS))
        flags |= num(c, "psflags2", SG_BMSG_U8) << 16;
    if (!enhanced)
        extra = EPS_M_ORIGIN2 | EPS_M_VELOCITY2 | EPS_VIEWANGLE2 | EPS_STATS;
    if (flags & PS_M_TYPE)
        num(c, "pm_type", SG_BMSG_U8);
    if (flags & PS_M_ORIGIN) {
        int23_or_short(c, "origin0");
        int23_or_short(c, "origin1");
    }
    if ((!enhanced && (flags & PS_M_ORIGIN)) || (enhanced && (extra & EPS_M_ORIGIN2)))
        int23_or_short(c, "origin2");
    if (flags & PS_M_VELOCITY) {
        int23_or_short(c, "velocity0");
        int23_or_short(c, "velocity1");
    }
    if ((!enhanced && (flags & PS_M_VELOCITY)) || (enhanced && (extra & EPS_M_VELOCITY2)))
        int23_or_short(c, "velocity2");
    if (flags & PS_M_TIME)
        num(c, "pm_time", ext2 ? SG_BMSG_U16 : SG_BMSG_U8);
    if (flags & PS_M_FLAGS)
        num(c, "pm_flags", ext2 ? SG_BMSG_U16 : SG_BMSG_U8);
    if (flags & PS_M_GRAVITY)
        num(c, "gravity", SG_BMSG_S16);
    if (flags & PS_M_DELTA_ANGLES)
        three(c, "delta_angle0", "delta_angle1", "delta_angle2", SG_BMSG_S16);
    if (flags & PS_VIEWOFFSET)
        three(c, "viewoffset0", "viewoffset1", "viewoffset2", SG_BMSG_S8);
    if (flags & PS_VIEWANGLES) {
        num(c, "viewangle0", SG_BMSG_ANGLE16);
        num(c, "viewangle1", SG_BMSG_ANGLE16);
    }
    if ((!enhanced && (flags & PS_VIEWANGLES)) || (enhanced && (extra & EPS_VIEWANGLE2)))
        num(c, "viewangle2", SG_BMSG_ANGLE16);
    if (flags & PS_KICKANGLES)
        three(c, "kick_angle0", "kick_angle1", "kick_angle2", SG_BMSG_S8);
    if (flags & PS_WEAPONINDEX)
        num(c, "gunindex", (c->v->ps & SG_Q2_PS_EXTENSIONS) ? SG_BMSG_U16 : SG_BMSG_U8);
    if (flags & PS_WEAPONFRAME)
        num(c, "gunframe", SG_BMSG_U8);
    if ((!enhanced && (flags & PS_WEAPONFRAME)) || (enhanced && (extra & EPS_GUNOFFSET)))
        three(c, "gunoffset0", "gunoffset1", "gunoffset2", SG_BMSG_S8);
    if ((!enhanced && (flags & PS_WEAPONFRAME)) || (enhanced && (extra & EPS_GUNANGLES)))
        three(c, "gunangle0", "gunangle1", "gunangle2", SG_BMSG_S8);
    if (flags & PS_BLEND)
        blend(c);
    if (flags & PS_FOG)
        fog(c);
    if (flags & PS_FOV)
        num(c, "fov", SG_BMSG_U8);
    if (flags & PS_RDFLAGS)
        num(c, "rdflags", SG_BMSG_U8);
    if (extra & EPS_STATS)
        stats(c);
}

/* ---- svc_frame ---- */

static void frame(struct ctx *c, int op)
{
    uint32_t extra = 0;
    int32_t cur, delta;

    if (c->v->protocol > 34) {
        uint32_t w = num(c, "framebits", SG_BMSG_S32);
        uint32_t off = w >> 27;
        cur = (int32_t)(w & 0x7ffffffu);
        delta = off == 31 ? -1 : cur - (int32_t)off;
        extra = num(c, "suppress", SG_BMSG_U8);
        extra = ((uint32_t)op >> 5) << 4 | extra >> 4;
    } else {
        cur = snum(c, "serverframe", SG_BMSG_S32);
        delta = snum(c, "deltaframe", SG_BMSG_S32);
        if (c->v->protocol != 26)
            num(c, "suppress", SG_BMSG_U8);
    }
    c->out->frames++;
    c->out->frame = cur;
    c->out->deltaframe = delta;
    data(c, "areabits", num(c, "areabytes", SG_BMSG_U8));
    if (c->v->protocol <= 34 && num(c, "svc_playerinfo", SG_BMSG_U8) != SG_Q2_SVC_PLAYERINFO &&
        !c->r.overflowed)
        fail(c, SG_E_MALFORMED);
    playerstate(c, c->v->protocol > 34, extra);
    if (c->v->protocol == 36 && (extra & EPS_CLIENTNUM))
        num(c, "clientnum", c->v->minor >= 1022 ? SG_BMSG_S16 : SG_BMSG_U8);
    if (c->v->protocol <= 34 && num(c, "svc_packetentities", SG_BMSG_U8) !=
                                    SG_Q2_SVC_PACKETENTITIES &&
        !c->r.overflowed)
        fail(c, SG_E_MALFORMED);
    entity_list(c, true);
}

/* ---- serverdata ---- */

static void kex_serverdata(struct ctx *c, int protocol);

static void serverdata(struct ctx *c)
{
    uint8_t tmp[64];
    int protocol = snum(c, "protocol", SG_BMSG_S32);
    uint32_t n, minor = 0, pf = 0;
    const uint8_t *s;
    struct sg_q2_variant nv;

    zdl_reset(c->out->zdl); /* a new level: no download goes on */
    c->out->kex = false;
    if (protocol == 2022 || protocol == 2023) {
        kex_serverdata(c, protocol);
        return;
    }
    num(c, "servercount", SG_BMSG_S32);
    num(c, "attractloop", SG_BMSG_U8);
    str(c, "gamedir", NULL);
    num(c, "playernum", SG_BMSG_S16);
    s = str(c, "levelname", &n);
    if (s) {
        n = n < sizeof(tmp) - 1 ? n : (uint32_t)sizeof(tmp) - 1;
        memcpy(tmp, s, n);
        tmp[n] = 0;
        memcpy(c->out->level, tmp, n + 1);
    }
    if (protocol == 35) {
        num(c, "enhanced", SG_BMSG_U8);
        minor = num(c, "minor", SG_BMSG_U16);
        num(c, "advanced_deltas", SG_BMSG_U8);
        num(c, "strafehack", SG_BMSG_U8);
        if (minor < 1903)
            minor = 1903;
        if (minor > 1905)
            minor = 1905;
    } else if (protocol == 36) {
        minor = num(c, "minor", SG_BMSG_U16);
        num(c, "server_state", SG_BMSG_U8);
        if (minor >= 1024) {
            pf = num(c, "flags", SG_BMSG_U16);
        } else {
            num(c, "strafehack", SG_BMSG_U8);
            num(c, "qwmode", SG_BMSG_U8);
            num(c, "waterjump", SG_BMSG_U8);
        }
    } else if (protocol != 26 && protocol != 34 && !(protocol >= 3434 && protocol <= 3436)) {
        fail(c, SG_E_UNSUPPORTED);
        return;
    }
    if (c->r.overflowed)
        return;
    sg_q2_variant_init(&nv, protocol, (int)minor);
    if (protocol == 36 && (pf & 0x8)) { /* Q2PRO_PF_EXTENSIONS */
        nv.extended = true;
        nv.cs_end = CS_END_NEW;
        nv.es |= SG_Q2_ES_LONGSOLID | SG_Q2_ES_SHORTANGLES | SG_Q2_ES_EXTENSIONS;
        nv.ps |= SG_Q2_PS_EXTENSIONS;
        if (minor >= 1025 && (pf & 0x10)) {
            nv.es |= SG_Q2_ES_EXTENSIONS_2;
            nv.ps |= SG_Q2_PS_EXTENSIONS_2;
            if (minor >= 1026)
                nv.ps |= SG_Q2_PS_MOREBITS;
        }
    }
    *c->v = nv;
    c->out->serverdata = true;
}

/* ---- temp entities ---- */

static void temp_entity(struct ctx *c)
{
    uint32_t type = num(c, "type", SG_BMSG_U8);

    switch (type) {
    case 0: case 1: case 2: case 4: case 9: case 12: case 13: case 14: case 26: case 30:
    case 42: case 43: case 44: case 46: case 55: case 56: case 58:
        pos(c, NULL);
        num(c, "dir", SG_BMSG_U8);
        break;
    case 10: case 15: case 25: case 29:
        num(c, "count", SG_BMSG_U8);
        pos(c, NULL);
        num(c, "dir", SG_BMSG_U8);
        num(c, "color", SG_BMSG_U8);
        break;
    case 3: case 11: case 23: case 27: case 31: case 34: case 41: case 57:
        pos(c, NULL);
        pos(c, pos2n);
        break;
    case 5: case 6: case 7: case 8: case 17: case 18: case 20: case 21: case 22: case 28:
    case 35: case 45: case 47: case 48: case 49: case 51: case 52: case 53: case 54: case 62:
    case 63:
        pos(c, NULL);
        break;
    case 16: case 19: case 38: case 39: case 59: case 61:
        num(c, "entity", SG_BMSG_S16);
        pos(c, NULL);
        pos(c, pos2n);
        break;
    case 24:
        num(c, "entity", SG_BMSG_S16);
        pos(c, NULL);
        pos(c, pos2n);
        pos(c, offn);
        break;
    case 33:
        num(c, "entity", SG_BMSG_S16);
        num(c, "entity2", SG_BMSG_S16);
        pos(c, NULL);
        pos(c, pos2n);
        break;
    case 36:
        pos(c, NULL);
        num(c, "entity", SG_BMSG_S16);
        break;
    case 37:
        pos(c, NULL);
        pos(c, pos2n);
        num(c, "color", SG_BMSG_U8);
        break;
    case 40: {
        int32_t id = snum(c, "nextid", SG_BMSG_S16);
        num(c, "count", SG_BMSG_U8);
        pos(c, NULL);
        num(c, "dir", SG_BMSG_U8);
        num(c, "color", SG_BMSG_U8);
        num(c, "sounds", SG_BMSG_S16);
        if (id != -1)
            num(c, "wait", SG_BMSG_S32);
        break;
    }
    case 50:
        num(c, "entity", SG_BMSG_S16);
        pos(c, NULL);
        break;
    case 60:
        num(c, "entity", SG_BMSG_S16);
        num(c, "count", SG_BMSG_U8);
        break;
    case 64:
        num(c, "count", SG_BMSG_S16);
        break;
    default:
        if (!c->r.overflowed)
            fail(c, SG_E_MALFORMED);
        break;
    }
}

static void sound(struct ctx *c)
{
    uint32_t flags = num(c, "flags", SG_BMSG_U8);

    num(c, "index", c->v->extended && (flags & 0x20) ? SG_BMSG_U16 : SG_BMSG_U8);
    if (flags & 0x01)
        num(c, "volume", SG_BMSG_U8);
    if (flags & 0x02)
        num(c, "attenuation", SG_BMSG_U8);
    if (flags & 0x10)
        num(c, "offset", SG_BMSG_U8);
    if (flags & 0x08)
        num(c, "entchan", SG_BMSG_U16);
    if (flags & 0x04)
        pos(c, NULL);
}

/*
 * A compressed download's chunk through the download's inflate stream, as
 * Q2PRO's client runs it (inflate_udp_download): Z_SYNC_FLUSH until the
 * output stops filling, the stream reset at its end.  Returns the bytes it
 * gave, or a negative error (a broken stream, more than SG_Q2_ZDL_MAX),
 * after which the stream starts again.
 */
static int64_t zdl_inflate(struct ctx *c, const uint8_t *in, size_t n)
{
    struct sg_q2_parsed *o = c->out;
    struct sg_q2_zdl *d = o->zdl;
    int64_t total = 0;
    int ret;

    if (!d) {
        if (!(d = o->zdl = calloc(1, sizeof(*d))))
            return -ENOMEM;
    }
    if (!d->live) {
        if (inflateInit2(&d->z, -MAX_WBITS) != Z_OK)
            return -ENOMEM;
        d->live = true;
    }
    if (n == 0)
        return 0;
    d->z.next_in = (Bytef *)(uintptr_t)in;
    d->z.avail_in = (uInt)n;
    do {
        d->z.next_out = d->out;
        d->z.avail_out = sizeof(d->out);
        ret = inflate(&d->z, Z_SYNC_FLUSH);
        if (ret != Z_OK && ret != Z_STREAM_END && ret != Z_BUF_ERROR) {
            zdl_reset(d);
            return SG_E_INFLATE;
        }
        total += (int64_t)(sizeof(d->out) - d->z.avail_out);
        if (total > SG_Q2_ZDL_MAX) {
            zdl_reset(d);
            return SG_E_TOOBIG;
        }
    } while (d->z.avail_out == 0 && ret != Z_STREAM_END);
    if (ret == Z_STREAM_END)
        zdl_reset(d);
    return total;
}

static void download(struct ctx *c, bool z)
{
    int32_t size = snum(c, "size", SG_BMSG_S16);
    uint32_t percent = num(c, "percent", SG_BMSG_U8);
    const uint8_t *d;
    int64_t got;

    if (size == -1 || c->r.overflowed) {
        zdl_reset(c->out->zdl); /* the download ended: the client starts its stream again */
        return;
    }
    if (z && c->v->protocol == 35)
        num(c, "uncompressed", SG_BMSG_S16);
    if (size < 0) {
        fail(c, SG_E_MALFORMED);
        return;
    }
    d = data(c, "data", (size_t)size);
    if (!d)
        return;
    if (z) {
        got = zdl_inflate(c, d, (size_t)size);
        if (got < 0) {
            fail(c, (int)got);
            return;
        }
        value(c, "inflated", (int32_t)got);
    }
    if (percent == 100)
        zdl_reset(c->out->zdl); /* the last chunk */
}

static void gamestate(struct ctx *c, int op)
{
    if (op == SG_Q2_SVC_GAMESTATE || op == SG_Q2_SVC_CONFIGSTRINGSTREAM) {
        for (int guard = 0; guard < 65536 && !c->r.overflowed; guard++) {
            uint32_t idx = num(c, "index", SG_BMSG_U16);
            if (c->r.overflowed || (int)idx == c->v->cs_end)
                break;
            if ((int)idx > c->v->cs_end) {
                fail(c, SG_E_MALFORMED);
                return;
            }
            str(c, "string", NULL);
        }
    }
    if (op == SG_Q2_SVC_GAMESTATE || op == SG_Q2_SVC_BASELINESTREAM)
        entity_list(c, false);
}

static int parse_stream(struct ctx *c);

static void zpacket(struct ctx *c, int self)
{
    uint32_t inlen = num(c, "compressed", SG_BMSG_U16);
    uint32_t outlen = num(c, "uncompressed", SG_BMSG_U16);
    const uint8_t *in = data(c, "deflated", inlen);
    struct sg_q2_parsed *o = c->out;
    z_stream *z;
    uint8_t *dst;
    int ret;
    struct ctx sub;

    if (!in)
        return;
    if (c->parent >= 0 || outlen > SG_Q2_MAX_MSGLEN) {
        fail(c, SG_E_MALFORMED); /* recursively entered, or too large */
        return;
    }
    if (SG_Q2_ZPOOL - o->zpool_len < outlen) {
        fail(c, SG_E_TOOBIG);
        return;
    }
    dst = o->zpool + o->zpool_len;
    /* One raw-deflate stream per parsed stream, set up on the first zpacket
     * and reset for each later one (its window is allocated once). */
    if (!o->inflater) {
        z = calloc(1, sizeof(*z));
        if (!z || inflateInit2(z, -MAX_WBITS) != Z_OK) {
            free(z);
            fail(c, -ENOMEM);
            return;
        }
        o->inflater = z;
    } else {
        z = o->inflater;
        if (inflateReset(z) != Z_OK) {
            fail(c, SG_E_INFLATE);
            return;
        }
    }
    z->next_in = (Bytef *)(uintptr_t)in;
    z->avail_in = inlen;
    z->next_out = dst;
    z->avail_out = outlen; /* bounded: no more than the header says (<= 32 KiB) */
    ret = inflate(z, Z_FINISH);
    if (ret != Z_STREAM_END) {
        fail(c, SG_E_INFLATE);
        return;
    }
    o->zpool_len += outlen;
    /* The contents, as messages of their own. */
    memset(&sub, 0, sizeof(sub));
    sg_bmsg_reader_init(&sub.r, dst, outlen);
    sub.v = c->v;
    sub.out = o;
    sub.dir = c->dir;
    sub.parent = self;
    if (parse_stream(&sub) < 0)
        fail(c, sub.err ? sub.err : SG_E_MALFORMED);
}

/* ---- rerelease (KEX) demos: protocols 2022 / 2023 ----
 *
 * Layouts per PROTOCOLS.md B (seed:Q2RR protocol section; res2k/q2proto
 * src/q2proto_proto_kex.c for the reads the seed leaves implicit).  Only
 * the demo form is read: the live KEX transport is not public.  What the
 * sources do not lay out (svc_waitingforplayers, svc_bot_chat, splitscreen
 * serverdata) stops the block with SG_E_UNSUPPORTED. */

#define SVC_KEX_SPLITCLIENT 21
#define SVC_KEX_CONFIGBLAST 22
#define SVC_KEX_BASELINEBLAST 23
#define SVC_KEX_LEVEL_RESTART 24
#define SVC_KEX_DAMAGE 25
#define SVC_KEX_LOCPRINT 26
#define SVC_KEX_FOG 27
#define SVC_KEX_WAITINGFORPLAYERS 28
#define SVC_KEX_BOT_CHAT 29
#define SVC_KEX_POI 30
#define SVC_KEX_HELP_PATH 31
#define SVC_KEX_MUZZLEFLASH3 32
#define SVC_KEX_ACHIEVEMENT 33

#define U_KEX_EFFECTS64 (1ull << 29)
#define U_KEX_INSTANCE  (1ull << 33)
#define U_KEX_OWNER     (1ull << 34)
#define U_KEX_OLDFRAME  (1ull << 35)

#define PS_KEX_DAMAGE_BLEND (1u << 16)
#define PS_KEX_TEAM_ID      (1u << 17)

static bool kex_bit(const struct ctx *c, int base, int n)
{
    const uint8_t *b = c->out->kex_solid;
    unsigned i = (unsigned)(base + n);

    return b && (b[i >> 3] >> (i & 7)) & 1;
}

static void kex_set(struct ctx *c, int base, int n, bool on)
{
    unsigned i = (unsigned)(base + n);

    if (!c->out->kex_solid && !on)
        return;
    if (!c->out->kex_solid && !(c->out->kex_solid = calloc(1, 2 * SG_Q2_KEX_EDICTS / 8))) {
        fail(c, -ENOMEM);
        return;
    }
    if (on)
        c->out->kex_solid[i >> 3] |= (uint8_t)(1u << (i & 7));
    else
        c->out->kex_solid[i >> 3] &= (uint8_t)~(1u << (i & 7));
}

/* A position: floats (2023, and 2022 when `hi`), else shorts / 8. */
static void kex_pos(struct ctx *c, const char *const *names, bool hi)
{
    for (int i = 0; i < 3; i++)
        num(c, names ? names[i] : xyz[i], hi ? SG_BMSG_FLOAT : SG_BMSG_COORD16);
}

/* The bits and number of one entity (36 bits: U_MOREBITS4 reads a 5th byte). */
static int kex_entity_bits(struct ctx *c, uint64_t *bits)
{
    uint64_t b = num(c, "bits", SG_BMSG_U8);
    uint32_t n;

    if (b & U_MOREBITS1)
        b |= (uint64_t)num(c, "bits1", SG_BMSG_U8) << 8;
    if (b & U_MOREBITS2)
        b |= (uint64_t)num(c, "bits2", SG_BMSG_U8) << 16;
    if (b & U_MOREBITS3)
        b |= (uint64_t)num(c, "bits3", SG_BMSG_U8) << 24;
    if (b & U_MOREBITS4)
        b |= (uint64_t)num(c, "bits4", SG_BMSG_U8) << 32;
    *bits = b;
    n = num(c, "number", (b & U_NUMBER16) ? SG_BMSG_U16 : SG_BMSG_U8);
    if (n >= SG_Q2_KEX_EDICTS && !c->r.overflowed)
        fail(c, SG_E_MALFORMED);
    return (int)n;
}

/* One entity delta (kex_client_read_entity_delta's order). */
static void kex_entity_delta(struct ctx *c, int n, uint64_t bits, bool solid_nonzero)
{
    uint8_t mk = (bits & U_MODEL16) ? SG_BMSG_U16 : SG_BMSG_U8;
    bool hi;

    if (bits & U_MODEL)
        num(c, "model", mk);
    if (bits & U_MODEL2)
        num(c, "model2", mk);
    if (bits & U_MODEL3)
        num(c, "model3", mk);
    if (bits & U_MODEL4)
        num(c, "model4", mk);
    if (bits & U_FRAME8)
        num(c, "frame", SG_BMSG_U8);
    else if (bits & U_FRAME16)
        num(c, "frame16", SG_BMSG_U16);
    sized(c, "skin", bits, U_SKIN8, U_SKIN16);
    if (bits & U_KEX_EFFECTS64)
        num(c, "effects_lo", SG_BMSG_S32);
    sized(c, "effects", bits, U_EFFECTS8, U_EFFECTS16);
    sized(c, "renderfx", bits, U_RENDERFX8, U_RENDERFX16);
    if (bits & U_SOLID) {
        solid_nonzero = num(c, "solid", SG_BMSG_S32) != 0;
        kex_set(c, 0, n, solid_nonzero);
    }
    hi = c->v->kex != 2022 || solid_nonzero;
    if (bits & U_ORIGIN1)
        num(c, "origin0", hi ? SG_BMSG_FLOAT : SG_BMSG_COORD16);
    if (bits & U_ORIGIN2)
        num(c, "origin1", hi ? SG_BMSG_FLOAT : SG_BMSG_COORD16);
    if (bits & U_ORIGIN3)
        num(c, "origin2", hi ? SG_BMSG_FLOAT : SG_BMSG_COORD16);
    if (bits & U_OLDORIGIN) {
        static const char *const on[3] = {"oldorigin0", "oldorigin1", "oldorigin2"};
        kex_pos(c, on, hi);
    }
    if (bits & U_ANGLE1)
        num(c, "angle0", SG_BMSG_FLOAT);
    if (bits & U_ANGLE2)
        num(c, "angle1", SG_BMSG_FLOAT);
    if (bits & U_ANGLE3)
        num(c, "angle2", SG_BMSG_FLOAT);
    if (bits & U_SOUND) {
        uint32_t w = num(c, "sound", SG_BMSG_U16);
        if (w & 0x4000)
            num(c, "loop_volume", SG_BMSG_U8);
        if (w & 0x8000)
            num(c, "loop_attenuation", SG_BMSG_U8);
    }
    if (bits & U_EVENT)
        num(c, "event", SG_BMSG_U8);
    if (bits & U_ALPHA)
        num(c, "alpha", SG_BMSG_U8);
    if (bits & U_SCALE)
        num(c, "scale", SG_BMSG_U8);
    if (bits & U_KEX_INSTANCE)
        num(c, "instance", SG_BMSG_U8);
    if (bits & U_KEX_OWNER)
        num(c, "owner", SG_BMSG_S16);
    if (bits & U_KEX_OLDFRAME)
        num(c, "oldframe", SG_BMSG_U16);
}

/* svc_spawnbaseline (and each record of a baseline blast). */
static void kex_baseline(struct ctx *c)
{
    uint64_t bits;
    int n = kex_entity_bits(c, &bits);

    if (c->r.overflowed)
        return;
    kex_set(c, 0, n, false); /* a baseline starts from the null state */
    kex_entity_delta(c, n, bits, false);
    kex_set(c, SG_Q2_KEX_EDICTS, n, kex_bit(c, 0, n));
}

static void kex_playerstate(struct ctx *c)
{
    static const char *const on[3] = {"origin0", "origin1", "origin2"};
    static const char *const vn[3] = {"velocity0", "velocity1", "velocity2"};
    static const char *const dn[3] = {"delta_angle0", "delta_angle1", "delta_angle2"};
    static const char *const an[3] = {"viewangle0", "viewangle1", "viewangle2"};
    static const char *const gn[7] = {"gunoffset0", "gunoffset1", "gunoffset2", "gunangle0",
                                      "gunangle1",  "gunangle2"};
    uint32_t flags = num(c, "psflags", SG_BMSG_U16);
    uint32_t sb;

    if (flags & PS_MOREBITS)
        flags |= num(c, "psflags2", SG_BMSG_U16) << 16;
    if (flags & PS_M_TYPE)
        num(c, "pm_type", SG_BMSG_U8);
    if (flags & PS_M_ORIGIN)
        kex_pos(c, on, true);
    if (flags & PS_M_VELOCITY)
        kex_pos(c, vn, true);
    if (flags & PS_M_TIME)
        num(c, "pm_time", SG_BMSG_U16);
    if (flags & PS_M_FLAGS)
        num(c, "pm_flags", SG_BMSG_U16);
    if (flags & PS_M_GRAVITY)
        num(c, "gravity", SG_BMSG_S16);
    if (flags & PS_M_DELTA_ANGLES)
        kex_pos(c, dn, true);
    if (flags & PS_VIEWOFFSET) {
        three(c, "viewoffset0", "viewoffset1", "viewoffset2", SG_BMSG_S16); /* 1/16 units */
        num(c, "viewheight", SG_BMSG_S8); /* q2proto: present in 2022 demos too */
    }
    if (flags & PS_VIEWANGLES)
        kex_pos(c, an, true);
    if (flags & PS_KICKANGLES)
        three(c, "kick_angle0", "kick_angle1", "kick_angle2", SG_BMSG_S16); /* 1/1024 */
    if (flags & PS_WEAPONINDEX)
        num(c, "gunindex", SG_BMSG_U16); /* 13 bits, gunskin above */
    if (flags & PS_WEAPONFRAME) {
        uint32_t g = num(c, "gunframe", SG_BMSG_U16) >> 9; /* 9 bits, GUNBIT_* above */
        for (int i = 0; i < 6; i++)
            if (g & (1u << i))
                num(c, gn[i], SG_BMSG_FLOAT);
        if (g & 0x40)
            num(c, "gunrate", SG_BMSG_U8);
    }
    if (flags & PS_BLEND)
        blend(c);
    if (flags & PS_FOV)
        num(c, "fov", SG_BMSG_U8);
    if (flags & PS_RDFLAGS)
        num(c, "rdflags", SG_BMSG_U8);
    static const char *const sn[64] = {
        "stat0",  "stat1",  "stat2",  "stat3",  "stat4",  "stat5",  "stat6",  "stat7",
        "stat8",  "stat9",  "stat10", "stat11", "stat12", "stat13", "stat14", "stat15",
        "stat16", "stat17", "stat18", "stat19", "stat20", "stat21", "stat22", "stat23",
        "stat24", "stat25", "stat26", "stat27", "stat28", "stat29", "stat30", "stat31",
        "stat32", "stat33", "stat34", "stat35", "stat36", "stat37", "stat38", "stat39",
        "stat40", "stat41", "stat42", "stat43", "stat44", "stat45", "stat46", "stat47",
        "stat48", "stat49", "stat50", "stat51", "stat52", "stat53", "stat54", "stat55",
        "stat56", "stat57", "stat58", "stat59", "stat60", "stat61", "stat62", "stat63",
    };
    for (int half = 0; half < 2; half++) {
        sb = num(c, half ? "statbits2" : "statbits", SG_BMSG_S32);
        for (; sb; sb &= sb - 1)
            num(c, sn[32 * half + __builtin_ctz(sb)], SG_BMSG_S16);
    }
    if (flags & PS_KEX_DAMAGE_BLEND) {
        num(c, "damage_blend0", SG_BMSG_U8);
        num(c, "damage_blend1", SG_BMSG_U8);
        num(c, "damage_blend2", SG_BMSG_U8);
        num(c, "damage_blend3", SG_BMSG_U8);
    }
    if (flags & PS_KEX_TEAM_ID)
        num(c, "team_id", SG_BMSG_U8);
}

static void kex_frame(struct ctx *c)
{
    int32_t cur = snum(c, "serverframe", SG_BMSG_S32);
    int32_t delta = snum(c, "deltaframe", SG_BMSG_S32);

    num(c, "suppress", SG_BMSG_U8);
    c->out->frames++;
    c->out->frame = cur;
    c->out->deltaframe = delta;
    data(c, "areabits", num(c, "areabytes", SG_BMSG_U8));
    if (num(c, "svc_playerinfo", SG_BMSG_U8) != SG_Q2_SVC_PLAYERINFO && !c->r.overflowed)
        fail(c, SG_E_MALFORMED);
    kex_playerstate(c);
    if (num(c, "svc_packetentities", SG_BMSG_U8) != SG_Q2_SVC_PACKETENTITIES && !c->r.overflowed)
        fail(c, SG_E_MALFORMED);
    for (int guard = 0; guard < 65536 && !c->r.overflowed; guard++) {
        uint64_t bits;
        int n = kex_entity_bits(c, &bits);
        if (c->r.overflowed || n == 0)
            return;
        if (bits & U_REMOVE) {
            kex_set(c, 0, n, kex_bit(c, SG_Q2_KEX_EDICTS, n)); /* back to its baseline's */
            continue;
        }
        kex_entity_delta(c, n, bits, kex_bit(c, 0, n));
    }
}

static void kex_sound(struct ctx *c)
{
    uint32_t flags = num(c, "flags", SG_BMSG_U8);

    num(c, "index", SG_BMSG_U16);
    if (flags & 0x01)
        num(c, "volume", SG_BMSG_U8);
    if (flags & 0x02)
        num(c, "attenuation", SG_BMSG_U8);
    if (flags & 0x10)
        num(c, "offset", SG_BMSG_U8);
    if (flags & 0x08) /* channel in the low 3 bits; SND_KEX_LARGE_ENT: a 29-bit entity */
        num(c, "entchan", (flags & 0x40) ? SG_BMSG_S32 : SG_BMSG_U16);
    if (flags & 0x04)
        kex_pos(c, NULL, c->v->kex != 2022);
}

/* The contents of a configblast / baselineblast: zlib-wrapped deflate
 * (RFC 1950, zlib's `uncompress`), inflated into the stream's pool with
 * the header's uncompressed length as the bound, then read as messages of
 * their own (svc_configstring / svc_spawnbaseline) that name the blast. */
static void kex_blast(struct ctx *c, int op, int self)
{
    uint32_t inlen = num(c, "compressed", SG_BMSG_U16);
    uint32_t outlen = num(c, "uncompressed", SG_BMSG_U16);
    const uint8_t *in = data(c, "deflated", inlen);
    struct sg_q2_parsed *o = c->out;
    z_stream z;
    uint8_t *dst;
    int ret;
    struct ctx sub;

    if (!in)
        return;
    if (c->parent >= 0) {
        fail(c, SG_E_MALFORMED);
        return;
    }
    if (SG_Q2_ZPOOL - o->zpool_len < outlen) {
        fail(c, SG_E_TOOBIG);
        return;
    }
    dst = o->zpool + o->zpool_len;
    memset(&z, 0, sizeof(z));
    if (inflateInit(&z) != Z_OK) {
        fail(c, -ENOMEM);
        return;
    }
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = inlen;
    z.next_out = dst;
    z.avail_out = outlen; /* bounded: no more than the header says (a bomb stops here) */
    ret = inflate(&z, Z_FINISH);
    inflateEnd(&z);
    if (ret != Z_STREAM_END || z.total_out != outlen) {
        fail(c, SG_E_INFLATE);
        return;
    }
    o->zpool_len += outlen;
    memset(&sub, 0, sizeof(sub));
    sg_bmsg_reader_init(&sub.r, dst, outlen);
    sub.v = c->v;
    sub.out = o;
    sub.dir = c->dir;
    sub.parent = self;
    while (sub.r.pos < sub.r.end && !sub.r.overflowed) {
        struct sg_fmsg *m;
        uint32_t k;
        int err = msg_room(o);
        if (err < 0) {
            fail(&sub, err);
            break;
        }
        k = o->nmsgs++;
        m = &o->msgs[k];
        memset(m, 0, sizeof(*m));
        m->first = o->nfields;
        m->parent = self;
        m->text = -1;
        if (op == SVC_KEX_CONFIGBLAST) {
            m->op = SG_Q2_SVC_CONFIGSTRING;
            num(&sub, "index", SG_BMSG_U16);
            str(&sub, "string", NULL);
        } else {
            m->op = SG_Q2_SVC_SPAWNBASELINE;
            kex_baseline(&sub);
        }
        m->count = o->nfields - m->first;
    }
    if (sub.r.overflowed)
        fail(c, sub.err ? sub.err : SG_E_MALFORMED);
    else
        o->msgs[self].count = 3; /* its own fields; the contents are the messages after it */
}

static void kex_serverdata(struct ctx *c, int protocol)
{
    uint8_t tmp[64];
    uint32_t n;
    int32_t clientnum;
    const uint8_t *s;
    struct sg_q2_variant nv;

    num(c, "servercount", SG_BMSG_S32);
    num(c, "attractloop", SG_BMSG_U8);
    num(c, "server_fps", SG_BMSG_U8);
    str(c, "gamedir", NULL);
    clientnum = snum(c, "clientnum", SG_BMSG_S16);
    if (clientnum == -2 && !c->r.overflowed) {
        /* splitscreen: PROTOCOLS.md B gives "short count + shorts", q2proto
         * refuses it; not read here. */
        fail(c, SG_E_UNSUPPORTED);
        return;
    }
    s = str(c, "levelname", &n);
    if (c->r.overflowed)
        return;
    n = n < sizeof(tmp) - 1 ? n : (uint32_t)sizeof(tmp) - 1;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    memcpy(c->out->level, tmp, n + 1);
    sg_q2_variant_init(&nv, protocol, 0);
    *c->v = nv;
    if (c->out->kex_solid)
        memset(c->out->kex_solid, 0, 2 * SG_Q2_KEX_EDICTS / 8);
    c->out->serverdata = true;
    c->out->kex = true;
}

/* The messages every protocol (34, 35, 36, the rerelease) lays out alike,
 * but for the sound's and the temp entity's positions (per c->v); false
 * for the others. */
static bool common_svc(struct ctx *c, int op)
{
    switch (op) {
    case SG_Q2_SVC_MUZZLEFLASH:
    case SG_Q2_SVC_MUZZLEFLASH2:
        num(c, "entity", SG_BMSG_U16);
        num(c, "weapon", SG_BMSG_U8);
        break;
    case SG_Q2_SVC_TEMP_ENTITY:
        temp_entity(c); /* positions per c->v: shorts in 2022, floats in 2023 */
        break;
    case SG_Q2_SVC_LAYOUT:
    case SG_Q2_SVC_STUFFTEXT:
    case SG_Q2_SVC_CENTERPRINT:
        str(c, "text", NULL);
        break;
    case SG_Q2_SVC_INVENTORY:
        for (int i = 0; i < 256; i++)
            num(c, "item", SG_BMSG_S16);
        break;
    case SG_Q2_SVC_NOP:
    case SG_Q2_SVC_DISCONNECT:
    case SG_Q2_SVC_RECONNECT:
        break;
    case SG_Q2_SVC_SOUND:
        if (c->v->kex)
            kex_sound(c);
        else
            sound(c);
        break;
    case SG_Q2_SVC_PRINT:
        num(c, "level", SG_BMSG_U8);
        str(c, "text", NULL);
        break;
    case SG_Q2_SVC_SERVERDATA:
        serverdata(c);
        break;
    case SG_Q2_SVC_CONFIGSTRING:
        num(c, "index", SG_BMSG_U16);
        str(c, "string", NULL);
        break;
    default:
        return false;
    }
    return true;
}

static void kex_svc(struct ctx *c, int op, int self)
{
    switch (op) {
    case SG_Q2_SVC_SPAWNBASELINE:
        kex_baseline(c);
        break;
    case SG_Q2_SVC_FRAME:
        kex_frame(c);
        break;
    case SVC_KEX_SPLITCLIENT:
        num(c, "isplit", SG_BMSG_U8);
        break;
    case SVC_KEX_CONFIGBLAST:
    case SVC_KEX_BASELINEBLAST:
        kex_blast(c, op, self);
        break;
    case SVC_KEX_LEVEL_RESTART:
        for (int guard = 0; guard < 65536 && !c->r.overflowed; guard++) {
            if (snum(c, "index", SG_BMSG_S16) == -1 || c->r.overflowed)
                break;
            str(c, "string", NULL);
        }
        break;
    case SVC_KEX_DAMAGE: {
        uint32_t n = num(c, "count", SG_BMSG_U8);
        for (uint32_t i = 0; i < n && !c->r.overflowed; i++) {
            num(c, "damage", SG_BMSG_U8);
            num(c, "dir", SG_BMSG_U8);
        }
        break;
    }
    case SVC_KEX_LOCPRINT: {
        uint32_t n;
        num(c, "flags", SG_BMSG_U8);
        str(c, "base", NULL);
        n = num(c, "nargs", SG_BMSG_U8);
        for (uint32_t i = 0; i < n && !c->r.overflowed; i++)
            str(c, "arg", NULL);
        break;
    }
    case SVC_KEX_FOG: {
        uint32_t b = num(c, "fogbits", SG_BMSG_U8);
        if (b & 0x80)
            b |= num(c, "fogbits2", SG_BMSG_U8) << 8;
        if (b & 0x01) {
            num(c, "density", SG_BMSG_FLOAT);
            num(c, "skyfactor", SG_BMSG_U8);
        }
        if (b & 0x02)
            num(c, "r", SG_BMSG_U8);
        if (b & 0x04)
            num(c, "g", SG_BMSG_U8);
        if (b & 0x08)
            num(c, "b", SG_BMSG_U8);
        if (b & 0x10)
            num(c, "time", SG_BMSG_U16);
        if (b & 0x20)
            num(c, "heightfog_falloff", SG_BMSG_FLOAT);
        if (b & 0x40)
            num(c, "heightfog_density", SG_BMSG_FLOAT);
        if (b & 0x100)
            num(c, "heightfog_start_r", SG_BMSG_U8);
        if (b & 0x200)
            num(c, "heightfog_start_g", SG_BMSG_U8);
        if (b & 0x400)
            num(c, "heightfog_start_b", SG_BMSG_U8);
        if (b & 0x800)
            num(c, "heightfog_start_dist", SG_BMSG_S32);
        if (b & 0x1000)
            num(c, "heightfog_end_r", SG_BMSG_U8);
        if (b & 0x2000)
            num(c, "heightfog_end_g", SG_BMSG_U8);
        if (b & 0x4000)
            num(c, "heightfog_end_b", SG_BMSG_U8);
        if (b & 0x8000)
            num(c, "heightfog_end_dist", SG_BMSG_S32);
        break;
    }
    case SVC_KEX_POI:
        num(c, "key", SG_BMSG_U16);
        num(c, "time", SG_BMSG_U16);
        kex_pos(c, NULL, true);
        num(c, "image", SG_BMSG_U16);
        num(c, "color", SG_BMSG_U8);
        num(c, "flags", SG_BMSG_U8);
        break;
    case SVC_KEX_HELP_PATH:
        num(c, "start", SG_BMSG_U8);
        kex_pos(c, NULL, true);
        num(c, "dir", SG_BMSG_U8);
        break;
    case SVC_KEX_MUZZLEFLASH3:
        num(c, "entity", SG_BMSG_S16);
        num(c, "weapon", SG_BMSG_U16);
        break;
    case SVC_KEX_ACHIEVEMENT:
        str(c, "id", NULL);
        break;
    case SVC_KEX_WAITINGFORPLAYERS:
    case SVC_KEX_BOT_CHAT:
        /* Named in the seed, no layout there or in q2proto. */
        fail(c, SG_E_UNSUPPORTED);
        break;
    default:
        fail(c, SG_E_MALFORMED);
        break;
    }
}

/* ---- one svc message ---- */

static void svc(struct ctx *c, int op, int self)
{
    int cmd = op & 0x1f;
    int proto = c->v->protocol;

    if (c->v->kex) {
        if (!common_svc(c, op))
            kex_svc(c, op, self);
        return;
    }
    if ((op & ~0x1f) && (proto < 35 || cmd != SG_Q2_SVC_FRAME)) {
        fail(c, SG_E_MALFORMED);
        return;
    }
    if (common_svc(c, cmd))
        return;
    switch (cmd) {
    case SG_Q2_SVC_SPAWNBASELINE: {
        uint64_t bits;
        entity_bits(c, &bits);
        entity_delta(c, bits);
        break;
    }
    case SG_Q2_SVC_DOWNLOAD:
        download(c, false);
        break;
    case SG_Q2_SVC_FRAME:
        frame(c, op);
        break;
    case SG_Q2_SVC_ZPACKET:
        if (proto < 35)
            goto bad;
        zpacket(c, self);
        break;
    case SG_Q2_SVC_ZDOWNLOAD:
        if (proto < 35)
            goto bad;
        download(c, true);
        break;
    case SG_Q2_SVC_GAMESTATE:
    case SG_Q2_SVC_CONFIGSTRINGSTREAM:
    case SG_Q2_SVC_BASELINESTREAM:
        if (proto != 36)
            goto bad;
        gamestate(c, cmd);
        break;
    case SG_Q2_SVC_SETTING:
        if (proto < 35)
            goto bad;
        num(c, "index", SG_BMSG_S32);
        num(c, "value", SG_BMSG_S32);
        break;
    default:
    bad:
        fail(c, SG_E_MALFORMED);
        break;
    }
}

/* ---- clc ---- */

static void usercmd(struct ctx *c, bool hacked)
{
    uint32_t bits = num(c, "cmdbits", SG_BMSG_U8);
    uint32_t buttons = 0;

    if (hacked && (bits & 0x40))
        buttons = num(c, "buttons", SG_BMSG_U8);
    if (bits & 0x01)
        num(c, "angle0", (buttons & 0x20) ? SG_BMSG_S8 : SG_BMSG_S16);
    if (bits & 0x02)
        num(c, "angle1", (buttons & 0x40) ? SG_BMSG_S8 : SG_BMSG_S16);
    if (bits & 0x04)
        num(c, "angle2", SG_BMSG_S16);
    if (bits & 0x08)
        num(c, "forward", (buttons & 0x04) ? SG_BMSG_S8 : SG_BMSG_S16);
    if (bits & 0x10)
        num(c, "side", (buttons & 0x08) ? SG_BMSG_S8 : SG_BMSG_S16);
    if (bits & 0x20)
        num(c, "up", (buttons & 0x10) ? SG_BMSG_S8 : SG_BMSG_S16);
    if (!hacked && (bits & 0x40))
        num(c, "buttons", SG_BMSG_U8);
    if (bits & 0x80)
        num(c, "impulse", SG_BMSG_U8);
    num(c, "msec", SG_BMSG_U8);
    num(c, "lightlevel", SG_BMSG_U8);
}

/* MSG_ReadBits: LSB first, bytes pulled as needed; negative = signed. */
static int32_t rbits(struct ctx *c, int n)
{
    bool sgn = n < 0;
    uint32_t v;

    if (sgn)
        n = -n;
    while ((uint32_t)n > c->bits_left) {
        int b = sg_bmsg_peek_u8(&c->r);
        if (b < 0) {
            fail(c, SG_E_OVERFLOW);
            return 0;
        }
        c->r.pos++;
        c->bits_buf |= (uint32_t)b << c->bits_left;
        c->bits_left += 8;
    }
    v = c->bits_buf & ((1u << n) - 1);
    c->bits_buf >>= n;
    c->bits_left -= (uint32_t)n;
    if (sgn && (v & (1u << (n - 1))))
        return (int32_t)(v | ~((1u << n) - 1));
    return (int32_t)v;
}

static void enhanced_cmd(struct ctx *c)
{
    int32_t bits;

    if (!rbits(c, 1)) {
        value(c, "changed", 0);
        return;
    }
    bits = rbits(c, 8);
    value(c, "cmdbits", bits);
    if (bits & 0x01) {
        if (rbits(c, 1))
            value(c, "angle0_delta", rbits(c, -8));
        else
            value(c, "angle0", rbits(c, -16));
    }
    if (bits & 0x02) {
        if (rbits(c, 1))
            value(c, "angle1_delta", rbits(c, -8));
        else
            value(c, "angle1", rbits(c, -16));
    }
    if (bits & 0x04)
        value(c, "angle2", rbits(c, -16));
    if (bits & 0x08)
        value(c, "forward", rbits(c, -10));
    if (bits & 0x10)
        value(c, "side", rbits(c, -10));
    if (bits & 0x20)
        value(c, "up", rbits(c, -10));
    if (bits & 0x40)
        value(c, "buttons", rbits(c, 3));
    if (bits & 0x80)
        value(c, "msec", rbits(c, 8));
}

/* Q2PRO's clc_move_batched / clc_move_nodelta: the bit stream is kept as
 * its bytes (one DATA field), its commands as values. */
static void batched_move(struct ctx *c, int op)
{
    int dups = op >> 5;
    size_t at;
    uint32_t first;

    if ((op & 0x1f) == SG_Q2_CLC_MOVE_BATCHED)
        num(c, "lastframe", SG_BMSG_S32);
    num(c, "lightlevel", SG_BMSG_U8);
    if (c->r.overflowed)
        return;
    at = c->r.pos;
    first = c->out->nfields;
    push(c, "cmds", SG_FIELD_DATA);
    c->bits_buf = 0;
    c->bits_left = 0;
    for (int i = 0; i <= dups && !c->r.overflowed; i++) {
        int32_t n = rbits(c, 5);
        value(c, "numcmds", n);
        if (n >= 16) { /* MAX_PACKET_USERCMDS */
            fail(c, SG_E_MALFORMED);
            return;
        }
        for (int j = 0; j < n && !c->r.overflowed; j++)
            enhanced_cmd(c);
    }
    if (first < c->out->nfields) {
        c->out->fields[first].ptr = c->r.data + at;
        c->out->fields[first].len = (uint32_t)(c->r.pos - at);
    }
    c->out->moves++;
}

static void clc(struct ctx *c, int op)
{
    int proto = c->v->protocol;

    if (proto == 36 && ((op & 0x1f) == SG_Q2_CLC_MOVE_NODELTA ||
                        (op & 0x1f) == SG_Q2_CLC_MOVE_BATCHED)) {
        batched_move(c, op);
        return;
    }
    switch (op) {
    case SG_Q2_CLC_NOP:
        break;
    case SG_Q2_CLC_MOVE: {
        bool hacked = proto == 35 && c->v->minor >= 1904;
        uint32_t first = c->out->nfields;
        size_t at = c->r.pos;
        if (proto <= 34)
            num(c, "checksum", SG_BMSG_U8);
        num(c, "lastframe", SG_BMSG_S32);
        usercmd(c, hacked);
        usercmd(c, hacked);
        usercmd(c, hacked);
        c->out->moves++;
        if (proto <= 34 && !c->r.overflowed && first < c->out->nfields) {
            uint8_t sum = sg_q2_move_checksum(c->r.data + at + 1, c->r.pos - at - 1,
                                              c->out->sequence);
            if (sum == c->out->fields[first].raw)
                c->out->msgs[c->out->nmsgs - 1].sum_ok = true;
            else
                c->out->moves_bad++;
        }
        break;
    }
    case SG_Q2_CLC_USERINFO:
    case SG_Q2_CLC_STRINGCMD:
        str(c, "text", NULL);
        break;
    case SG_Q2_CLC_SETTING:
        if (proto < 35)
            goto bad;
        num(c, "index", SG_BMSG_S16);
        num(c, "value", SG_BMSG_S16);
        break;
    case SG_Q2_CLC_USERINFO_DELTA:
        if (proto != 36)
            goto bad;
        str(c, "key", NULL);
        str(c, "value", NULL);
        break;
    default:
    bad:
        fail(c, SG_E_MALFORMED);
        break;
    }
}

/* ---- streams ---- */

static int text_field(enum sg_dir dir, int op)
{
    if (dir == SG_DIR_S2C) {
        switch (op) {
        case SG_Q2_SVC_PRINT:
            return 1;
        case SG_Q2_SVC_LAYOUT:
        case SG_Q2_SVC_STUFFTEXT:
        case SG_Q2_SVC_CENTERPRINT:
            return 0;
        default:
            return -1;
        }
    }
    return op == SG_Q2_CLC_STRINGCMD ? 0 : -1;
}

static int parse_stream(struct ctx *c)
{
    struct sg_q2_parsed *o = c->out;

    while (c->r.pos < c->r.end) {
        size_t at = c->r.pos;
        int op = c->r.data[c->r.pos++];
        uint32_t self;
        struct sg_fmsg *m;
        int err = msg_room(o);

        if (err < 0) {
            /* Never a shorter list reported as the whole: the rest would
             * pass the filters unseen and a rebuild would cut it. */
            c->r.pos = at;
            fail(c, err);
            return c->err;
        }
        self = o->nmsgs++;
        m = &o->msgs[self];
        memset(m, 0, sizeof(*m));
        m->op = op;
        m->first = o->nfields;
        m->parent = c->parent;
        m->text = text_field(c->dir, op);
        if (c->dir == SG_DIR_S2C)
            svc(c, op, (int)self);
        else
            clc(c, op);
        m = &o->msgs[self]; /* a zpacket's contents may have moved the list */
        if (c->r.overflowed) {
            /* Undo what it read: the rest of the stream is one DATA field. */
            struct sg_field *f;
            /* A zpacket's messages after it are dropped too. */
            o->nmsgs = self + 1;
            o->nfields = m->first;
            m->unparsed = true;
            m->text = -1;
            if (o->unsupported_op < 0)
                o->unsupported_op = op;
            if (field_room(c) == 0) { /* it held at least as many before */
                f = &o->fields[o->nfields++];
                memset(f, 0, sizeof(*f));
                f->name = "unparsed";
                f->type = SG_FIELD_DATA;
                f->ptr = c->r.data + at + 1;
                f->len = (uint32_t)(c->r.end - at - 1);
            }
            m->count = o->nfields - m->first;
            if (!c->err)
                c->err = SG_E_MALFORMED;
            return c->err;
        }
        /* A zpacket's count covers its own fields only (its contents are later messages). */
        if (m->count == 0)
            m->count = o->nfields - m->first;
        if (c->dir == SG_DIR_S2C && !o->kex && (op & 0x1f) == SG_Q2_SVC_ZPACKET)
            m->count = 3; /* (21 is svc_splitclient in the rerelease) */
    }
    return 0;
}

int sg_q2_parse(enum sg_dir dir, struct sg_q2_variant *v, const uint8_t *data, size_t len,
                struct sg_q2_parsed *out)
{
    struct ctx c;
    int ret;

    out->nfields = 0;
    out->nmsgs = 0;
    out->zpool_len = 0;
    out->serverdata = false;
    out->level[0] = 0;
    out->frames = 0;
    out->frame = out->deltaframe = -1;
    out->moves = out->moves_bad = 0;
    out->unsupported_op = -1;
    out->sum_sequence = out->sequence;
    memset(&c, 0, sizeof(c));
    sg_bmsg_reader_init(&c.r, data, len);
    c.v = v;
    c.out = out;
    c.dir = dir;
    c.parent = -1;
    out->kex = v->kex != 0;
    ret = parse_stream(&c);
    if (v->kex)
        out->kex = true;
    return ret;
}

/* ---- writer ---- */

int sg_q2_deflate(const uint8_t *in, size_t inlen, uint8_t *out, size_t cap, size_t *outlen)
{
    z_stream z;
    int ret;

    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 9, Z_DEFAULT_STRATEGY) !=
        Z_OK)
        return -ENOMEM;
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)inlen;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    ret = deflate(&z, Z_FINISH);
    *outlen = cap - z.avail_out;
    deflateEnd(&z);
    return ret == Z_STREAM_END ? 0 : SG_E_OVERFLOW;
}

static void write_msg(const struct sg_q2_parsed *p, uint32_t i, struct sg_bmsg_writer *w)
{
    const struct sg_fmsg *m = &p->msgs[i];
    size_t at;

    sg_bmsg_write_u8(w, (unsigned)m->op);
    at = w->len;
    sg_fields_write(p->fields, m->first, m->count, w);
    if (m->op == SG_Q2_CLC_MOVE && m->sum_ok && (m->changed || p->sequence != p->sum_sequence) &&
        !w->overflowed && w->len > at)
        w->data[at] = sg_q2_move_checksum(w->data + at + 1, w->len - at - 1, p->sequence);
}

/* A zpacket whose contents changed: rebuild them and deflate them again. */
static void write_zpacket(const struct sg_q2_parsed *p, uint32_t zi, uint32_t end,
                          const bool *dropped, struct sg_bmsg_writer *w)
{
    uint8_t *plain = malloc(SG_Q2_MAX_MSGLEN), *packed = malloc(SG_Q2_MAX_MSGLEN + 1024);
    struct sg_bmsg_writer pw;
    size_t plen = 0;

    if (!plain || !packed) {
        w->overflowed = true;
        goto out;
    }
    sg_bmsg_writer_init(&pw, plain, SG_Q2_MAX_MSGLEN);
    for (uint32_t j = zi + 1; j < end; j++)
        if (!(dropped && dropped[j]))
            write_msg(p, j, &pw);
    if (pw.overflowed || sg_q2_deflate(plain, pw.len, packed, SG_Q2_MAX_MSGLEN + 1024, &plen) < 0 ||
        plen > 0xffff) {
        w->overflowed = true;
        goto out;
    }
    sg_bmsg_write_u8(w, (unsigned)p->msgs[zi].op);
    sg_bmsg_write_u16(w, (unsigned)plen);
    sg_bmsg_write_u16(w, (unsigned)pw.len);
    sg_bmsg_write_data(w, packed, plen);
out:
    free(plain);
    free(packed);
}

int sg_q2_write(const struct sg_q2_parsed *p, const bool *dropped, struct sg_bmsg_writer *w)
{
    for (uint32_t i = 0; i < p->nmsgs; i++) {
        const struct sg_fmsg *m = &p->msgs[i];
        if (m->parent >= 0)
            continue; /* written with (or inside) its zpacket */
        if (dropped && dropped[i])
            continue;
        if (!m->unparsed && !p->kex && (m->op & 0x1f) == SG_Q2_SVC_ZPACKET && m->count == 3 &&
            p->fields[m->first].num == SG_BMSG_U16) {
            uint32_t end = i + 1;
            bool dirty = false;
            while (end < p->nmsgs && p->msgs[end].parent == (int)i) {
                if ((dropped && dropped[end]) || p->msgs[end].changed)
                    dirty = true;
                end++;
            }
            if (dirty || m->changed) {
                write_zpacket(p, i, end, dropped, w);
                continue;
            }
        }
        write_msg(p, i, w);
    }
    return w->overflowed ? SG_E_OVERFLOW : 0;
}

/* ---- names ---- */

static const char *const svc_names[SG_Q2_SVC_COUNT] = {
    "svc_bad",          "svc_muzzleflash",   "svc_muzzleflash2",  "svc_temp_entity",
    "svc_layout",       "svc_inventory",     "svc_nop",           "svc_disconnect",
    "svc_reconnect",    "svc_sound",         "svc_print",         "svc_stufftext",
    "svc_serverdata",   "svc_configstring",  "svc_spawnbaseline", "svc_centerprint",
    "svc_download",     "svc_playerinfo",    "svc_packetentities", "svc_deltapacketentities",
    "svc_frame",        "svc_zpacket",       "svc_zdownload",     "svc_gamestate",
    "svc_setting",      "svc_configstringstream", "svc_baselinestream",
};

const char *sg_q2_svc_name(int op)
{
    op &= 0xff;
    if ((op & 0x1f) == SG_Q2_SVC_FRAME)
        return "svc_frame";
    return op < SG_Q2_SVC_COUNT ? svc_names[op] : "svc_unknown";
}

const char *sg_q2_svc_name_kex(int op)
{
    static const char *const kex[] = {
        "svc_splitclient",  "svc_configblast", "svc_spawnbaselineblast", "svc_level_restart",
        "svc_damage",       "svc_locprint",    "svc_fog",                "svc_waitingforplayers",
        "svc_bot_chat",     "svc_poi",         "svc_help_path",          "svc_muzzleflash3",
        "svc_achievement",
    };

    op &= 0xff;
    if (op >= 21 && op <= 33)
        return kex[op - 21];
    return op < 21 ? svc_names[op] : "svc_unknown";
}

const char *sg_q2_clc_name(int op)
{
    static const char *const names[SG_Q2_CLC_COUNT] = {
        "clc_bad", "clc_nop", "clc_move", "clc_userinfo", "clc_stringcmd", "clc_setting",
        NULL, NULL, NULL, NULL, "clc_move_nodelta", "clc_move_batched", "clc_userinfo_delta",
    };
    int o = op & 0xff;

    if ((o & 0x1f) == SG_Q2_CLC_MOVE_NODELTA || (o & 0x1f) == SG_Q2_CLC_MOVE_BATCHED)
        o &= 0x1f;
    return o < SG_Q2_CLC_COUNT && names[o] ? names[o] : "clc_unknown";
}
