/*
 * Quake 2 entity and player-state deltas, as Q2PRO's client reads them
 * (MSG_ParseDeltaEntity, MSG_ParseDeltaPlayerstate), into the parse's
 * fields (parse.h).
 */
#include "protocols/q2/parse.h"

/* ---- entities ---- */


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
    entity_models(c, bits, mk);
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
        if (es & SG_Q2_ES_EXTENSIONS)
            sound_loop(c);
        else
            num(c, "sound", SG_BMSG_U8);
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

const char *const sg_q2__stat_names[64] = {
    "stat0",  "stat1",  "stat2",  "stat3",  "stat4",  "stat5",  "stat6",  "stat7",
    "stat8",  "stat9",  "stat10", "stat11", "stat12", "stat13", "stat14", "stat15",
    "stat16", "stat17", "stat18", "stat19", "stat20", "stat21", "stat22", "stat23",
    "stat24", "stat25", "stat26", "stat27", "stat28", "stat29", "stat30", "stat31",
    "stat32", "stat33", "stat34", "stat35", "stat36", "stat37", "stat38", "stat39",
    "stat40", "stat41", "stat42", "stat43", "stat44", "stat45", "stat46", "stat47",
    "stat48", "stat49", "stat50", "stat51", "stat52", "stat53", "stat54", "stat55",
    "stat56", "stat57", "stat58", "stat59", "stat60", "stat61", "stat62", "stat63",
};

static void stats(struct ctx *c)
{
    uint64_t statbits = 0;
    int n = 32;

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
        num(c, sg_q2__stat_names[__builtin_ctzll(statbits)], SG_BMSG_S16);
}

static void blend(struct ctx *c)
{
    if (c->v->ps & SG_Q2_PS_EXTENSIONS_2) {
        uint32_t b = num(c, "blendbits", SG_BMSG_U8);
        for (int i = 0; i < 8; i++)
            if (b & (1u << i))
                num(c, i < 4 ? "blend" : "damage_blend", SG_BMSG_U8);
    } else {
        static const char *const names[4] = {"blend0", "blend1", "blend2", "blend3"};
        rgba(c, names);
    }
}

/* MSG_ReadFog. */
static void fog(struct ctx *c)
{
    static const struct flagged t[] = {
        {0x01, "fog_r", SG_BMSG_U8},
        {0x01, "fog_g", SG_BMSG_U8},
        {0x01, "fog_b", SG_BMSG_U8},
        {0x02, "fog_density", SG_BMSG_U16},
        {0x02, "fog_sky_factor", SG_BMSG_U16},
        {0x04, "heightfog_density", SG_BMSG_U16},
        {0x08, "heightfog_falloff", SG_BMSG_U16},
        {0x10, "heightfog_start_r", SG_BMSG_U8},
        {0x10, "heightfog_start_g", SG_BMSG_U8},
        {0x10, "heightfog_start_b", SG_BMSG_U8},
        {0x20, "heightfog_end_r", SG_BMSG_U8},
        {0x20, "heightfog_end_g", SG_BMSG_U8},
        {0x20, "heightfog_end_b", SG_BMSG_U8},
    };
    uint32_t b = num(c, "fogbits", SG_BMSG_U8);

    flagged(c, b, t, sizeof(t) / sizeof(t[0]));
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

/* ---- for the parser's other files (parse.h) ---- */

int sg_q2__entity_bits(struct ctx *c, uint64_t *bits)
{
    return entity_bits(c, bits);
}

void sg_q2__sized(struct ctx *c, const char *name, uint64_t bits, uint64_t b8, uint64_t b16)
{
    sized(c, name, bits, b8, b16);
}

void sg_q2__entity_delta(struct ctx *c, uint64_t bits)
{
    entity_delta(c, bits);
}

void sg_q2__entity_list(struct ctx *c, bool removes)
{
    entity_list(c, removes);
}

void sg_q2__three(struct ctx *c, const char *a, const char *b, const char *d, uint8_t kind)
{
    three(c, a, b, d, kind);
}

void sg_q2__blend(struct ctx *c)
{
    blend(c);
}

void sg_q2__playerstate(struct ctx *c, bool enhanced, uint32_t extra)
{
    playerstate(c, enhanced, extra);
}
