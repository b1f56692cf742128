/*
 * The Quake 2 rerelease (KEX) demos' messages, protocols 2022 and 2023:
 * the opcodes and layouts that differ from Q2PRO's, read into the parse's
 * fields (parse.h).
 */
#include "protocols/q2/parse.h"

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

    entity_models(c, bits, mk);
    if (bits & U_FRAME8)
        num(c, "frame", SG_BMSG_U8);
    else if (bits & U_FRAME16)
        num(c, "frame16", SG_BMSG_U16);
    sg_q2__sized(c, "skin", bits, U_SKIN8, U_SKIN16);
    if (bits & U_KEX_EFFECTS64)
        num(c, "effects_lo", SG_BMSG_S32);
    sg_q2__sized(c, "effects", bits, U_EFFECTS8, U_EFFECTS16);
    sg_q2__sized(c, "renderfx", bits, U_RENDERFX8, U_RENDERFX16);
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
    if (bits & U_SOUND)
        sound_loop(c);
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
        sg_q2__three(c, "viewoffset0", "viewoffset1", "viewoffset2", SG_BMSG_S16); /* 1/16 units */
        num(c, "viewheight", SG_BMSG_S8); /* q2proto: present in 2022 demos too */
    }
    if (flags & PS_VIEWANGLES)
        kex_pos(c, an, true);
    if (flags & PS_KICKANGLES)
        sg_q2__three(c, "kick_angle0", "kick_angle1", "kick_angle2", SG_BMSG_S16); /* 1/1024 */
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
        sg_q2__blend(c);
    if (flags & PS_FOV)
        num(c, "fov", SG_BMSG_U8);
    if (flags & PS_RDFLAGS)
        num(c, "rdflags", SG_BMSG_U8);
    for (int half = 0; half < 2; half++) {
        sb = num(c, half ? "statbits2" : "statbits", SG_BMSG_S32);
        for (; sb; sb &= sb - 1)
            num(c, sg_q2__stat_names[32 * half + __builtin_ctz(sb)], SG_BMSG_S16);
    }
    if (flags & PS_KEX_DAMAGE_BLEND) {
        static const char *const names[4] = {"damage_blend0", "damage_blend1", "damage_blend2",
                                             "damage_blend3"};
        rgba(c, names);
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
    /* entchan: the channel in the low 3 bits; SND_KEX_LARGE_ENT, a 29-bit entity */
    sound_opts(c, flags, (flags & 0x40) ? SG_BMSG_S32 : SG_BMSG_U16);
    if (flags & 0x04)
        kex_pos(c, NULL, c->v->kex != 2022);
}

/* The contents of a configblast / baselineblast: zlib-wrapped deflate
 * (RFC 1950, zlib's `uncompress`), inflated into the stream's pool with
 * the header's uncompressed length as the bound, then read as messages of
 * their own (svc_configstring / svc_spawnbaseline) that name the blast. */
static void kex_blast(struct ctx *c, int op, int self)
{
    struct sg_q2_parsed *o = c->out;
    struct ctx sub;

    if (!sg_q2__inflated(c, self, true, UINT32_MAX, &sub))
        return;
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
        static const struct flagged t[] = {
            {0x01, "density", SG_BMSG_FLOAT},
            {0x01, "skyfactor", SG_BMSG_U8},
            {0x02, "r", SG_BMSG_U8},
            {0x04, "g", SG_BMSG_U8},
            {0x08, "b", SG_BMSG_U8},
            {0x10, "time", SG_BMSG_U16},
            {0x20, "heightfog_falloff", SG_BMSG_FLOAT},
            {0x40, "heightfog_density", SG_BMSG_FLOAT},
            {0x100, "heightfog_start_r", SG_BMSG_U8},
            {0x200, "heightfog_start_g", SG_BMSG_U8},
            {0x400, "heightfog_start_b", SG_BMSG_U8},
            {0x800, "heightfog_start_dist", SG_BMSG_S32},
            {0x1000, "heightfog_end_r", SG_BMSG_U8},
            {0x2000, "heightfog_end_g", SG_BMSG_U8},
            {0x4000, "heightfog_end_b", SG_BMSG_U8},
            {0x8000, "heightfog_end_dist", SG_BMSG_S32},
        };
        uint32_t b = num(c, "fogbits", SG_BMSG_U8);
        if (b & 0x80)
            b |= num(c, "fogbits2", SG_BMSG_U8) << 8;
        flagged(c, b, t, sizeof(t) / sizeof(t[0]));
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

/* ---- for the parser's other files (parse.h) ---- */

void sg_q2__kex_serverdata(struct ctx *c, int protocol)
{
    kex_serverdata(c, protocol);
}

void sg_q2__kex_sound(struct ctx *c)
{
    kex_sound(c);
}

void sg_q2__kex_svc(struct ctx *c, int op, int self)
{
    kex_svc(c, op, self);
}
