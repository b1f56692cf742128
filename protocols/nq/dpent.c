/*
 * DarkPlaces' entity messages on DP5-DP7 (protocol.c
 * EntityFrame5_CL_ReadFrame, EntityState5_ReadUpdate; csprogs.c
 * CSQC_ReadEntities), as the client reads them.
 *
 * svc_entities (57):
 *     long   frame          the number the client acknowledges (clc_ackframe)
 *     long   movesequence   DP7 only: the last clc_move the server applied
 *     { u16 number; bit 15: removed, else an update } ...   u16 0x8000 ends
 * An update: a byte of E5_ bits, bit 7 adds bits 8-15, bit 15 bits 16-23,
 * bit 23 bits 24-31; then the fields of the bits set, in the order of the
 * table below (origin: coord16 or float by E5_ORIGIN32; angles: angle8 or
 * angle16 by E5_ANGLES16; model, frame by E5_MODEL16, E5_FRAME16; effects
 * byte, short or long by E5_EFFECTS16/32), then the complex animation (a
 * type byte and its frames, times and lerps, or a model's bone poses).
 * The header bits are kept as they came, so a frame is rebuilt byte for
 * byte; what the deltas are against (the client's acknowledged frames) is
 * not needed to read them.
 *
 * The CSQC section and CSQC temp entities are the same on 15 when the
 * server is a DarkPlaces one (parse.c): there the section comes before
 * the fast entity updates.
 *
 * svc_csqcentities (58): { u16 number; bit 15: removed, else an update
 * whose body the server's QuakeC wrote (SendEntity) and the client's reads
 * (CSQC_Ent_Update) } ... u16 0 ends.  Nothing on the wire says where a
 * body ends: the bodies are kept as raw bytes, from the first update to
 * the first u16 0 after which the rest of the datagram parses (the
 * server writes the section just before the stats and svc_entities, in
 * the same datagram).  A
 * CSQC temp entity (a type the engine does not know, read by the game's
 * CSQC_Parse_TempEntity) is kept the same way up to where the rest parses.
 */
#include "protocols/nq/parse.h"

#include <string.h>

#define E5_FULLUPDATE       (1u << 0)
#define E5_ORIGIN           (1u << 1)
#define E5_ANGLES           (1u << 2)
#define E5_MODEL            (1u << 3)
#define E5_FRAME            (1u << 4)
#define E5_SKIN             (1u << 5)
#define E5_EFFECTS          (1u << 6)
#define E5_EXTEND1          (1u << 7)
#define E5_FLAGS            (1u << 8)
#define E5_ALPHA            (1u << 9)
#define E5_SCALE            (1u << 10)
#define E5_ORIGIN32         (1u << 11)
#define E5_ANGLES16         (1u << 12)
#define E5_MODEL16          (1u << 13)
#define E5_COLORMAP         (1u << 14)
#define E5_EXTEND2          (1u << 15)
#define E5_ATTACHMENT       (1u << 16)
#define E5_LIGHT            (1u << 17)
#define E5_GLOW             (1u << 18)
#define E5_EFFECTS16        (1u << 19)
#define E5_EFFECTS32        (1u << 20)
#define E5_FRAME16          (1u << 21)
#define E5_COLORMOD         (1u << 22)
#define E5_EXTEND3          (1u << 23)
#define E5_GLOWMOD          (1u << 24)
#define E5_COMPLEXANIMATION (1u << 25)
#define E5_TRAILEFFECTNUM   (1u << 26)

/* Width selectors of the table. */
enum {
    W_BYTE,
    W_SHORT,
    W_ORIGIN,  /* coord16, float with E5_ORIGIN32 */
    W_ANGLE,   /* angle8, angle16 with E5_ANGLES16 */
    W_MODEL,   /* byte, short with E5_MODEL16 */
    W_FRAME,   /* byte, short with E5_FRAME16 */
    W_EFFECTS, /* byte, short with E5_EFFECTS16, long with E5_EFFECTS32 */
};

/* EntityState5_ReadUpdate's fields in its order (before the animation). */
static const struct e5field {
    uint32_t bit;
    const char *name;
    uint8_t width;
} e5[] = {
    {E5_FLAGS, "flags", W_BYTE},           {E5_ORIGIN, "origin0", W_ORIGIN},
    {E5_ORIGIN, "origin1", W_ORIGIN},      {E5_ORIGIN, "origin2", W_ORIGIN},
    {E5_ANGLES, "angle0", W_ANGLE},        {E5_ANGLES, "angle1", W_ANGLE},
    {E5_ANGLES, "angle2", W_ANGLE},        {E5_MODEL, "model", W_MODEL},
    {E5_FRAME, "frame", W_FRAME},          {E5_SKIN, "skin", W_BYTE},
    {E5_EFFECTS, "effects", W_EFFECTS},    {E5_ALPHA, "alpha", W_BYTE},
    {E5_SCALE, "scale", W_BYTE},           {E5_COLORMAP, "colormap", W_BYTE},
    {E5_ATTACHMENT, "tagentity", W_SHORT}, {E5_ATTACHMENT, "tagindex", W_BYTE},
    {E5_LIGHT, "light0", W_SHORT},         {E5_LIGHT, "light1", W_SHORT},
    {E5_LIGHT, "light2", W_SHORT},         {E5_LIGHT, "light3", W_SHORT},
    {E5_LIGHT, "lightstyle", W_BYTE},      {E5_LIGHT, "lightpflags", W_BYTE},
    {E5_GLOW, "glowsize", W_BYTE},         {E5_GLOW, "glowcolor", W_BYTE},
    {E5_COLORMOD, "colormod0", W_BYTE},    {E5_COLORMOD, "colormod1", W_BYTE},
    {E5_COLORMOD, "colormod2", W_BYTE},    {E5_GLOWMOD, "glowmod0", W_BYTE},
    {E5_GLOWMOD, "glowmod1", W_BYTE},      {E5_GLOWMOD, "glowmod2", W_BYTE},
};

static uint8_t kind_of(uint8_t width, uint32_t bits)
{
    switch (width) {
    case W_SHORT:
        return SG_BMSG_U16;
    case W_ORIGIN:
        return (bits & E5_ORIGIN32) ? SG_BMSG_COORD_FLOAT : SG_BMSG_COORD16;
    case W_ANGLE:
        return (bits & E5_ANGLES16) ? SG_BMSG_ANGLE16 : SG_BMSG_ANGLE8;
    case W_MODEL:
        return (bits & E5_MODEL16) ? SG_BMSG_U16 : SG_BMSG_U8;
    case W_FRAME:
        return (bits & E5_FRAME16) ? SG_BMSG_U16 : SG_BMSG_U8;
    case W_EFFECTS:
        return (bits & E5_EFFECTS32)   ? SG_BMSG_S32
               : (bits & E5_EFFECTS16) ? SG_BMSG_U16
                                       : SG_BMSG_U8;
    default:
        return SG_BMSG_U8;
    }
}

/* E5_COMPLEXANIMATION: type 0-3 blend 1-4 frames (frames, start times in
 * ms, then lerps but for type 0); 4 a skeleton (model, bones, 7 shorts a
 * bone).  An unknown type: the client stops (Host_Error). */
static void animation(struct sg_nq__ctx *c)
{
    static const char *const frame[4] = {"anim_frame0", "anim_frame1", "anim_frame2",
                                         "anim_frame3"};
    static const char *const start[4] = {"anim_start0", "anim_start1", "anim_start2",
                                         "anim_start3"};
    static const char *const lerp[4] = {"anim_lerp0", "anim_lerp1", "anim_lerp2", "anim_lerp3"};
    uint32_t type = sg_nq__num(c, "anim_type", SG_BMSG_U8);

    if (c->r.overflowed)
        return;
    if (type <= 3) {
        for (uint32_t i = 0; i <= type; i++)
            sg_nq__num(c, frame[i], SG_BMSG_S16);
        for (uint32_t i = 0; i <= type; i++)
            sg_nq__num(c, start[i], SG_BMSG_U16);
        for (uint32_t i = 0; type > 0 && i <= type; i++)
            sg_nq__num(c, lerp[i], SG_BMSG_U8);
        return;
    }
    if (type == 4) {
        uint32_t bones;
        sg_nq__num(c, "anim_model", SG_BMSG_S16);
        bones = sg_nq__num(c, "anim_bones", SG_BMSG_U8);
        /* 7 shorts a bone, one field each bone */
        for (uint32_t i = 0; i < bones && !c->r.overflowed; i++)
            sg_nq__data(c, "anim_pose", 14);
        return;
    }
    sg_bmsg_reader_fail(&c->r);
    c->err = SG_E_MALFORMED;
}

static void update(struct sg_nq__ctx *c)
{
    uint32_t bits = sg_nq__num(c, "bits", SG_BMSG_U8);

    if (bits & E5_EXTEND1) {
        bits |= sg_nq__num(c, "bits1", SG_BMSG_U8) << 8;
        if (bits & E5_EXTEND2) {
            bits |= sg_nq__num(c, "bits2", SG_BMSG_U8) << 16;
            if (bits & E5_EXTEND3)
                bits |= sg_nq__num(c, "bits3", SG_BMSG_U8) << 24;
        }
    }
    for (size_t i = 0; i < sizeof(e5) / sizeof(e5[0]) && !c->r.overflowed; i++)
        if (bits & e5[i].bit)
            sg_nq__num(c, e5[i].name, kind_of(e5[i].width, bits));
    if (bits & E5_COMPLEXANIMATION)
        animation(c);
    if (bits & E5_TRAILEFFECTNUM)
        sg_nq__num(c, "traileffect", SG_BMSG_U16);
}

void sg_nq__dp_entities(struct sg_nq__ctx *c)
{
    sg_nq__num(c, "frame", SG_BMSG_S32);
    if (c->p->dpn >= 7)
        sg_nq__num(c, "movesequence", SG_BMSG_S32);
    while (!c->r.overflowed) {
        uint32_t n = sg_nq__num(c, "entity", SG_BMSG_U16);
        if (c->r.overflowed || n == 0x8000)
            return; /* (the terminator) */
        if (!(n & 0x8000))
            update(c);
    }
}

/* Can a server message start with `op` (cl_parse.c's opcodes)?  On 15 a
 * DarkPlaces server also sends id's fast entity updates (128-255). */
static bool svc_op(const struct sg_nq__ctx *c, uint8_t op)
{
    return (op >= 1 && op <= 37 && op != 21) || (op >= 50 && op <= 62) ||
           (!c->p->dpn && op >= 128);
}

/* Close message `mi` (its fields so far) before a tried rest adds more. */
static void close_msg(struct sg_nq__ctx *c, uint32_t mi)
{
    struct sg_fmsg *m = &c->out->msgs[mi];

    m->count = c->out->nfields - m->first;
}

/*
 * Try message `mi` as ending at `q`: its bytes from the reader's position
 * as one field `name` (with `end_word`, then the u16 0 that ends a CSQC
 * update list), the rest of the datagram parsed from there.  1: kept; 0:
 * the rest did not parse, all undone, try a later end; -1: stop trying
 * (out of memory, or the trials spent).
 */
static int try_end(struct sg_nq__ctx *c, uint32_t mi, const char *name, size_t q, bool end_word)
{
    size_t save = c->r.pos;
    uint32_t nf = c->out->nfields;

    sg_nq__data(c, name, q - save);
    if (end_word) {
        sg_nq__num(c, "end", SG_BMSG_U16);
        q += 2;
    }
    close_msg(c, mi);
    if ((!end_word && q == c->r.end) || sg_nq__try_rest(c, q)) {
        c->out->csqc_raw++;
        return 1;
    }
    c->out->nfields = nf;
    c->r.pos = save;
    return c->err == -ENOMEM || c->out->trials >= SG_NQ__TRIALS ? -1 : 0;
}

void sg_nq__dp_csqc(struct sg_nq__ctx *c, uint32_t mi)
{
    const uint8_t *d = c->r.data;
    int r;

    for (;;) {
        size_t at = c->r.pos;
        uint32_t n = sg_nq__num(c, "entity", SG_BMSG_U16);
        if (c->r.overflowed || n == 0)
            return;
        if (n & 0x8000)
            continue; /* removed: nothing follows */
        /* An update: its body and those after it, up to a u16 0 after
         * which the rest parses. */
        for (size_t q = at + 2; q + 2 <= c->r.end && !c->r.overflowed; q++) {
            if (d[q] != 0 || d[q + 1] != 0 || (q + 2 < c->r.end && !svc_op(c, d[q + 2])))
                continue;
            r = try_end(c, mi, "updates", q, true);
            if (r > 0)
                return;
            if (r < 0)
                break;
        }
        break;
    }
    /* No end found: the rest as one field, undecoded. */
    c->out->msgs[mi].unparsed = true;
    if (c->out->unsupported_op < 0)
        c->out->unsupported_op = 58;
    sg_nq__data(c, "unparsed", sg_bmsg_remaining(&c->r));
}

void sg_nq__dp_opaque(struct sg_nq__ctx *c, uint32_t mi, const char *name)
{
    int r;

    for (size_t q = c->r.pos; q <= c->r.end && !c->r.overflowed; q++) {
        if (q < c->r.end && (c->dir != SG_DIR_S2C || !svc_op(c, c->r.data[q])))
            continue;
        r = try_end(c, mi, name, q, false);
        if (r > 0)
            return;
        if (r < 0)
            break;
    }
    c->out->msgs[mi].unparsed = true;
    if (c->out->unsupported_op < 0)
        c->out->unsupported_op = c->out->msgs[mi].op;
    sg_nq__data(c, "unparsed", sg_bmsg_remaining(&c->r));
}
