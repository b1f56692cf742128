/*
 * NetQuake messages, both directions, into field lists (nq.h): one field
 * table per fixed message, short paragraphs for the messages whose shape
 * depends on a value (sound, client data, fast entity updates, baselines,
 * temp entities, serverinfo).  Layouts: the DEM seed §6, PROTOCOLS.md; the
 * read order and the extensions of 666 / 999 as QuakeSpasm's client and
 * server read them (the receiver's view).  On 15, DarkPlaces' own messages
 * (the opcodes id's protocol leaves unused: 35, 36, 50-62 and the client's
 * 50, 51; its temp entity types past id's; its sound speed bit) as
 * DarkPlaces' client reads them with the Quake protocol's sizes.
 */
#include "protocols/nq/nq.h"
#include "protocols/nq/parse.h"

#include "protocols/error.h"

#include <stdlib.h>
#include <string.h>

/* Pseudo-kinds resolved through the protocol. */
enum {
    K_COORD = SG_NQ__COORD,
    K_ANGLE = SG_NQ__ANGLE,
    K_STRING = SG_FK_STRING,
    K_END = SG_FK_END,
};

void sg_nq_parsed_free(struct sg_nq_parsed *p)
{
    free(p->fields);
    free(p->msgs);
    p->fields = NULL;
    p->msgs = NULL;
    p->nfields = p->fields_cap = p->nmsgs = p->msgs_cap = 0;
}

/* ---- fields ---- */

/* Keep *f as field `name` (the list grown, up to SG_NQ_MAX_FIELDS): its
 * place in the list, or NULL (the reader failed, c->err set). */
static struct sg_field *keep(struct sg_nq__ctx *c, const char *name, const struct sg_field *f)
{
    struct sg_nq_parsed *o = c->out;
    struct sg_field *k;

    if (o->nfields >= o->fields_cap) {
        uint32_t cap = o->fields_cap ? o->fields_cap * 2 : 256;
        void *n;
        if (o->fields_cap >= SG_NQ_MAX_FIELDS) {
            sg_bmsg_reader_fail(&c->r);
            c->err = SG_E_TOOBIG;
            return NULL;
        }
        n = realloc(o->fields, cap * sizeof(*o->fields));
        if (!n) {
            sg_bmsg_reader_fail(&c->r);
            c->err = -ENOMEM;
            return NULL;
        }
        o->fields = n;
        o->fields_cap = cap;
    }
    k = &o->fields[o->nfields++];
    sg_field_keep(k, name, f);
    return k;
}

static uint8_t resolve(const struct sg_nq__ctx *c, uint8_t kind)
{
    if (kind == K_COORD)
        return c->p->coord;
    if (kind == K_ANGLE)
        return c->p->angle;
    return kind;
}

static uint32_t num(struct sg_nq__ctx *c, const char *name, uint8_t kind)
{
    struct sg_field f;

    if (!sg_fread_num(&c->r, resolve(c, kind), &f) || !keep(c, name, &f))
        return 0;
    return f.raw;
}

/* A string as QuakeSpasm reads it.  Returns its field, or NULL. */
static struct sg_field *str(struct sg_nq__ctx *c, const char *name)
{
    struct sg_field f;

    return sg_fread_str(&c->r, &f) ? keep(c, name, &f) : NULL;
}

static void data(struct sg_nq__ctx *c, const char *name, size_t n)
{
    struct sg_field f;

    if (sg_fread_data(&c->r, n, &f))
        keep(c, name, &f);
}

uint32_t sg_nq__num(struct sg_nq__ctx *c, const char *name, uint8_t kind)
{
    return num(c, name, kind);
}

struct sg_field *sg_nq__str(struct sg_nq__ctx *c, const char *name)
{
    return str(c, name);
}

void sg_nq__data(struct sg_nq__ctx *c, const char *name, size_t n)
{
    data(c, name, n);
}

/* A fixed message's fields. */
static void table(struct sg_nq__ctx *c, const struct sg_fdesc *t)
{
    for (; t->kind != K_END; t++)
        t->kind == K_STRING ? (void)str(c, t->name) : (void)num(c, t->name, t->kind);
}

static void coords(struct sg_nq__ctx *c, const char *n0, const char *n1, const char *n2)
{
    num(c, n0, K_COORD);
    num(c, n1, K_COORD);
    num(c, n2, K_COORD);
}

/* ---- fixed messages ---- */

static const struct sg_fdesc f_none[] = {{NULL, K_END}};
static const struct sg_fdesc f_updatestat[] = {
    {"stat", SG_BMSG_U8}, {"value", SG_BMSG_S32}, {NULL, K_END}};
static const struct sg_fdesc f_long[] = {{"version", SG_BMSG_S32}, {NULL, K_END}};
static const struct sg_fdesc f_entity[] = {{"entity", SG_BMSG_S16}, {NULL, K_END}};
static const struct sg_fdesc f_time[] = {{"time", SG_BMSG_FLOAT}, {NULL, K_END}};
static const struct sg_fdesc f_text[] = {{"text", K_STRING}, {NULL, K_END}};
static const struct sg_fdesc f_angles[] = {
    {"angle0", K_ANGLE}, {"angle1", K_ANGLE}, {"angle2", K_ANGLE}, {NULL, K_END}};
static const struct sg_fdesc f_lightstyle[] = {
    {"style", SG_BMSG_U8}, {"map", K_STRING}, {NULL, K_END}};
static const struct sg_fdesc f_updatename[] = {
    {"player", SG_BMSG_U8}, {"name", K_STRING}, {NULL, K_END}};
static const struct sg_fdesc f_updatefrags[] = {
    {"player", SG_BMSG_U8}, {"frags", SG_BMSG_S16}, {NULL, K_END}};
static const struct sg_fdesc f_stopsound[] = {{"channel", SG_BMSG_U16}, {NULL, K_END}};
static const struct sg_fdesc f_updatecolors[] = {
    {"player", SG_BMSG_U8}, {"colors", SG_BMSG_U8}, {NULL, K_END}};
static const struct sg_fdesc f_particle[] = {
    {"origin0", K_COORD}, {"origin1", K_COORD}, {"origin2", K_COORD}, {"dir0", SG_BMSG_S8},
    {"dir1", SG_BMSG_S8}, {"dir2", SG_BMSG_S8}, {"count", SG_BMSG_U8}, {"color", SG_BMSG_U8},
    {NULL, K_END}};
static const struct sg_fdesc f_damage[] = {
    {"armor", SG_BMSG_U8}, {"blood", SG_BMSG_U8}, {"origin0", K_COORD},
    {"origin1", K_COORD},  {"origin2", K_COORD},  {NULL, K_END}};
static const struct sg_fdesc f_byte[] = {{"value", SG_BMSG_U8}, {NULL, K_END}};
static const struct sg_fdesc f_staticsound[] = {
    {"origin0", K_COORD}, {"origin1", K_COORD}, {"origin2", K_COORD}, {"sound", SG_BMSG_U8},
    {"volume", SG_BMSG_U8}, {"attenuation", SG_BMSG_U8}, {NULL, K_END}};
static const struct sg_fdesc f_staticsound2[] = {
    {"origin0", K_COORD}, {"origin1", K_COORD}, {"origin2", K_COORD}, {"sound", SG_BMSG_U16},
    {"volume", SG_BMSG_U8}, {"attenuation", SG_BMSG_U8}, {NULL, K_END}};
static const struct sg_fdesc f_cdtrack[] = {
    {"track", SG_BMSG_U8}, {"loop", SG_BMSG_U8}, {NULL, K_END}};
static const struct sg_fdesc f_fog[] = {
    {"density", SG_BMSG_U8}, {"red", SG_BMSG_U8}, {"green", SG_BMSG_U8}, {"blue", SG_BMSG_U8},
    {"time", SG_BMSG_S16}, {NULL, K_END}};

/* DarkPlaces' messages on 15 (cl_parse.c, the Quake protocol's sizes). */
static const struct sg_fdesc f_showlmp[] = {
    {"slot", K_STRING}, {"picture", K_STRING}, {"x", SG_BMSG_S16}, {"y", SG_BMSG_S16},
    {NULL, K_END}};
static const struct sg_fdesc f_statubyte[] = {
    {"stat", SG_BMSG_U8}, {"value", SG_BMSG_U8}, {NULL, K_END}};
static const struct sg_fdesc f_effect[] = {
    {"origin0", K_COORD}, {"origin1", K_COORD}, {"origin2", K_COORD}, {"model", SG_BMSG_U8},
    {"startframe", SG_BMSG_U8}, {"framecount", SG_BMSG_U8}, {"framerate", SG_BMSG_U8},
    {NULL, K_END}};
static const struct sg_fdesc f_effect2[] = {
    {"origin0", K_COORD}, {"origin1", K_COORD}, {"origin2", K_COORD}, {"model", SG_BMSG_U16},
    {"startframe", SG_BMSG_U16}, {"framecount", SG_BMSG_U8}, {"framerate", SG_BMSG_U8},
    {NULL, K_END}};
static const struct sg_fdesc f_precache[] = {
    {"index", SG_BMSG_U16}, {"name", K_STRING}, {NULL, K_END}};
static const struct sg_fdesc f_static_large[] = {
    {"model", SG_BMSG_U16}, {"frame", SG_BMSG_U16}, {"colormap", SG_BMSG_U8},
    {"skin", SG_BMSG_U8},   {"origin0", K_COORD},   {"angle0", K_ANGLE},
    {"origin1", K_COORD},   {"angle1", K_ANGLE},    {"origin2", K_COORD},
    {"angle2", K_ANGLE},    {NULL, K_END}};
static const struct sg_fdesc f_baseline_large[] = {
    {"entity", SG_BMSG_U16}, {"model", SG_BMSG_U16}, {"frame", SG_BMSG_U16},
    {"colormap", SG_BMSG_U8}, {"skin", SG_BMSG_U8},  {"origin0", K_COORD},
    {"angle0", K_ANGLE},     {"origin1", K_COORD},   {"angle1", K_ANGLE},
    {"origin2", K_COORD},    {"angle2", K_ANGLE},    {NULL, K_END}};
static const struct sg_fdesc f_trailparticles[] = {
    {"entity", SG_BMSG_S16}, {"effect", SG_BMSG_S16}, {"start0", K_COORD}, {"start1", K_COORD},
    {"start2", K_COORD},     {"end0", K_COORD},       {"end1", K_COORD},   {"end2", K_COORD},
    {NULL, K_END}};
static const struct sg_fdesc f_pointparticles[] = {
    {"effect", SG_BMSG_S16}, {"origin0", K_COORD},   {"origin1", K_COORD},
    {"origin2", K_COORD},    {"velocity0", K_COORD}, {"velocity1", K_COORD},
    {"velocity2", K_COORD},  {"count", SG_BMSG_S16}, {NULL, K_END}};
static const struct sg_fdesc f_pointparticles1[] = {
    {"effect", SG_BMSG_S16}, {"origin0", K_COORD}, {"origin1", K_COORD}, {"origin2", K_COORD},
    {NULL, K_END}};

/* DarkPlaces' opcodes on 15 (none of them is a message of id's 15, 666 or
 * 999); 50 (downloaddata) and 58 (csqcentities) are paragraphs below. */
static const struct sg_fdesc *const svc_dp_tables[] = {
    [35] = f_showlmp,      [36] = f_text,          [51] = f_statubyte,
    [52] = f_effect,       [53] = f_effect2,       [54] = f_precache,
    [55] = f_baseline_large, [56] = f_static_large, [59] = f_staticsound2,
    [60] = f_trailparticles, [61] = f_pointparticles, [62] = f_pointparticles1,
};

/* Indexed by svc opcode; NULL: a paragraph below or not a message. */
static const struct sg_fdesc *const svc_tables[] = {
    [1] = f_none,         [3] = f_updatestat,    [4] = f_long,         [5] = f_entity,
    [7] = f_time,         [8] = f_text,          [9] = f_text,         [10] = f_angles,
    [12] = f_lightstyle,  [13] = f_updatename,   [14] = f_updatefrags, [16] = f_stopsound,
    [17] = f_updatecolors, [18] = f_particle,    [19] = f_damage,      [24] = f_byte,
    [25] = f_byte,        [26] = f_text,         [27] = f_none,        [28] = f_none,
    [29] = f_staticsound, [30] = f_none,         [31] = f_text,        [32] = f_cdtrack,
    [33] = f_none,        [34] = f_text,         [37] = f_text,        [40] = f_none,
    [41] = f_fog,         [44] = f_staticsound2,
};

#define N(t) (sizeof(t) / sizeof((t)[0]))

/* ---- sound ---- */

#define SND_VOLUME      (1u << 0)
#define SND_ATTENUATION (1u << 1)
#define SND_LARGEENTITY (1u << 3)
#define SND_LARGESOUND  (1u << 4)
#define SND_SPEEDUSHORT4000 (1u << 5) /* DarkPlaces (15): speed * 4000 */

static void svc_sound(struct sg_nq__ctx *c)
{
    uint32_t mask = num(c, "mask", SG_BMSG_U8);

    if (mask & SND_VOLUME)
        num(c, "volume", SG_BMSG_U8);
    if (mask & SND_ATTENUATION)
        num(c, "attenuation", SG_BMSG_U8);
    if ((mask & SND_SPEEDUSHORT4000) && !c->p->fitz)
        num(c, "speed", SG_BMSG_U16);
    if (mask & SND_LARGEENTITY) {
        num(c, "entity", SG_BMSG_U16);
        num(c, "channel", SG_BMSG_U8);
    } else {
        num(c, "channel", SG_BMSG_U16); /* entity << 3 | channel */
    }
    num(c, "sound", (mask & SND_LARGESOUND) ? SG_BMSG_U16 : SG_BMSG_U8);
    coords(c, "origin0", "origin1", "origin2");
}

/* ---- client data ---- */

#define SU_VIEWHEIGHT   (1u << 0)
#define SU_IDEALPITCH   (1u << 1)
#define SU_PUNCH1       (1u << 2)
#define SU_VELOCITY1    (1u << 5)
#define SU_WEAPONFRAME  (1u << 12)
#define SU_ARMOR        (1u << 13)
#define SU_WEAPON       (1u << 14)
#define SU_EXTEND1      (1u << 15)
#define SU_EXTEND2      (1u << 23)

/* 666 / 999: one byte each, bits 16..22 then 24, 25. */
static const struct {
    uint32_t bit;
    const char *name;
} su_fitz[] = {
    {1u << 16, "weapon2"},  {1u << 17, "armor2"},   {1u << 18, "ammo2"},
    {1u << 19, "shells2"},  {1u << 20, "nails2"},   {1u << 21, "rockets2"},
    {1u << 22, "cells2"},   {1u << 24, "weaponframe2"}, {1u << 25, "weaponalpha"},
};

static void svc_clientdata(struct sg_nq__ctx *c)
{
    static const char *const punch[3] = {"punch0", "punch1", "punch2"};
    static const char *const vel[3] = {"velocity0", "velocity1", "velocity2"};
    static const char *const ammo[6] = {"ammo", "shells", "nails", "rockets", "cells",
                                        "activeweapon"};
    uint32_t bits = num(c, "bits", SG_BMSG_U16);

    if (bits & SU_EXTEND1)
        bits |= num(c, "extend1", SG_BMSG_U8) << 16;
    if (bits & SU_EXTEND2)
        bits |= num(c, "extend2", SG_BMSG_U8) << 24;
    if (bits & SU_VIEWHEIGHT)
        num(c, "viewheight", SG_BMSG_S8);
    if (bits & SU_IDEALPITCH)
        num(c, "idealpitch", SG_BMSG_S8);
    for (int i = 0; i < 3; i++) {
        if (bits & (SU_PUNCH1 << i))
            num(c, punch[i], SG_BMSG_S8);
        if (bits & (SU_VELOCITY1 << i))
            num(c, vel[i], SG_BMSG_S8);
    }
    num(c, "items", SG_BMSG_S32); /* always sent (the client reads it whatever SU_ITEMS says) */
    if (bits & SU_WEAPONFRAME)
        num(c, "weaponframe", SG_BMSG_U8);
    if (bits & SU_ARMOR)
        num(c, "armor", SG_BMSG_U8);
    if (bits & SU_WEAPON)
        num(c, "weapon", SG_BMSG_U8);
    num(c, "health", SG_BMSG_S16);
    for (int i = 0; i < 6; i++)
        num(c, ammo[i], SG_BMSG_U8);
    for (size_t i = 0; i < N(su_fitz); i++)
        if (bits & su_fitz[i].bit)
            num(c, su_fitz[i].name, SG_BMSG_U8);
}

/* ---- fast entity updates ---- */

#define U_MOREBITS   (1u << 0)
#define U_ORIGIN1    (1u << 1)
#define U_ORIGIN2    (1u << 2)
#define U_ORIGIN3    (1u << 3)
#define U_ANGLE2     (1u << 4)
#define U_FRAME      (1u << 6)
#define U_ANGLE1     (1u << 8)
#define U_ANGLE3     (1u << 9)
#define U_MODEL      (1u << 10)
#define U_COLORMAP   (1u << 11)
#define U_SKIN       (1u << 12)
#define U_EFFECTS    (1u << 13)
#define U_LONGENTITY (1u << 14)
#define U_EXTEND1    (1u << 15)
#define U_ALPHA      (1u << 16)
#define U_FRAME2     (1u << 17)
#define U_MODEL2     (1u << 18)
#define U_LERPFINISH (1u << 19)
#define U_SCALE      (1u << 20)
#define U_EXTEND2    (1u << 23)

static void svc_update(struct sg_nq__ctx *c, int op)
{
    static const struct {
        uint32_t bit;
        const char *name;
        uint8_t kind;
    } fields[] = {
        {U_MODEL, "model", SG_BMSG_U8},     {U_FRAME, "frame", SG_BMSG_U8},
        {U_COLORMAP, "colormap", SG_BMSG_U8}, {U_SKIN, "skin", SG_BMSG_U8},
        {U_EFFECTS, "effects", SG_BMSG_U8}, {U_ORIGIN1, "origin0", K_COORD},
        {U_ANGLE1, "angle0", K_ANGLE},      {U_ORIGIN2, "origin1", K_COORD},
        {U_ANGLE2, "angle1", K_ANGLE},      {U_ORIGIN3, "origin2", K_COORD},
        {U_ANGLE3, "angle2", K_ANGLE},      {U_ALPHA, "alpha", SG_BMSG_U8},
        {U_SCALE, "scale", SG_BMSG_U8},     {U_FRAME2, "frame2", SG_BMSG_U8},
        {U_MODEL2, "model2", SG_BMSG_U8},   {U_LERPFINISH, "lerpfinish", SG_BMSG_U8},
    };
    uint32_t bits = (uint32_t)op & 0x7fu;

    if (bits & U_MOREBITS)
        bits |= num(c, "morebits", SG_BMSG_U8) << 8;
    if (c->p->fitz) {
        if (bits & U_EXTEND1)
            bits |= num(c, "extend1", SG_BMSG_U8) << 16;
        if (bits & U_EXTEND2)
            bits |= num(c, "extend2", SG_BMSG_U8) << 24;
    } else {
        bits &= 0xffffu;
    }
    num(c, "entity", (bits & U_LONGENTITY) ? SG_BMSG_U16 : SG_BMSG_U8);
    for (size_t i = 0; i < N(fields); i++)
        if (bits & fields[i].bit)
            num(c, fields[i].name, fields[i].kind);
}

/* ---- baselines and static entities ---- */

#define B_LARGEMODEL (1u << 0)
#define B_LARGEFRAME (1u << 1)
#define B_ALPHA      (1u << 2)
#define B_SCALE      (1u << 3)

static void baseline(struct sg_nq__ctx *c, bool version2)
{
    uint32_t bits = version2 ? num(c, "bits", SG_BMSG_U8) : 0;

    num(c, "model", (bits & B_LARGEMODEL) ? SG_BMSG_U16 : SG_BMSG_U8);
    num(c, "frame", (bits & B_LARGEFRAME) ? SG_BMSG_U16 : SG_BMSG_U8);
    num(c, "colormap", SG_BMSG_U8);
    num(c, "skin", SG_BMSG_U8);
    num(c, "origin0", K_COORD);
    num(c, "angle0", K_ANGLE);
    num(c, "origin1", K_COORD);
    num(c, "angle1", K_ANGLE);
    num(c, "origin2", K_COORD);
    num(c, "angle2", K_ANGLE);
    if (bits & B_ALPHA)
        num(c, "alpha", SG_BMSG_U8);
    if (bits & B_SCALE)
        num(c, "scale", SG_BMSG_U8);
}

/* ---- temp entities ---- */

/* DarkPlaces' temp entity types past id's (15): false when not one. */
static bool te_dp(struct sg_nq__ctx *c, uint32_t type)
{
    switch (type) {
    case 16: /* explosion3: origin, colour as three coords */
        coords(c, "origin0", "origin1", "origin2");
        coords(c, "red", "green", "blue");
        return true;
    case 17: /* lightning4 (Nehahra): model, then a beam */
        str(c, "model");
        num(c, "entity", SG_BMSG_S16);
        coords(c, "start0", "start1", "start2");
        coords(c, "end0", "end1", "end2");
        return true;
    case 50: case 51: /* blood, spark */
        coords(c, "origin0", "origin1", "origin2");
        num(c, "velocity0", SG_BMSG_S8);
        num(c, "velocity1", SG_BMSG_S8);
        num(c, "velocity2", SG_BMSG_S8);
        num(c, "count", SG_BMSG_U8);
        return true;
    case 52: /* bloodshower */
        coords(c, "mins0", "mins1", "mins2");
        coords(c, "maxs0", "maxs1", "maxs2");
        num(c, "speed", K_COORD);
        num(c, "count", SG_BMSG_U16);
        return true;
    case 53: /* explosionrgb */
        coords(c, "origin0", "origin1", "origin2");
        num(c, "red", SG_BMSG_U8);
        num(c, "green", SG_BMSG_U8);
        num(c, "blue", SG_BMSG_U8);
        return true;
    case 54: case 55: case 56: /* particlecube, particlerain, particlesnow */
        coords(c, "mins0", "mins1", "mins2");
        coords(c, "maxs0", "maxs1", "maxs2");
        coords(c, "dir0", "dir1", "dir2");
        num(c, "count", SG_BMSG_U16);
        num(c, "color", SG_BMSG_U8);
        if (type == 54) {
            num(c, "gravity", SG_BMSG_U8);
            num(c, "randomvel", K_COORD);
        }
        return true;
    case 57: case 58: case 59: case 70: case 72: case 75: case 78:
        coords(c, "origin0", "origin1", "origin2");
        return true;
    case 73: /* customflash */
        coords(c, "origin0", "origin1", "origin2");
        num(c, "radius", SG_BMSG_U8);
        num(c, "lifetime", SG_BMSG_U8);
        num(c, "red", SG_BMSG_U8);
        num(c, "green", SG_BMSG_U8);
        num(c, "blue", SG_BMSG_U8);
        return true;
    case 74: case 77: case 79: /* flamejet, smoke, plasmahit: origin, dir, count */
        coords(c, "origin0", "origin1", "origin2");
        coords(c, "dir0", "dir1", "dir2");
        num(c, "count", SG_BMSG_U8);
        return true;
    case 76: /* tei g3 */
        coords(c, "start0", "start1", "start2");
        coords(c, "end0", "end1", "end2");
        coords(c, "angle0", "angle1", "angle2");
        return true;
    default:
        return false;
    }
}

static void svc_temp_entity(struct sg_nq__ctx *c, struct sg_fmsg *m)
{
    uint32_t type = num(c, "type", SG_BMSG_U8);

    if (!c->p->fitz && type > 13 && te_dp(c, type))
        return;
    switch (type) {
    case 0: case 1: case 2: case 3: case 4: case 7: case 8: case 10: case 11:
        coords(c, "origin0", "origin1", "origin2");
        return;
    case 5: case 6: case 9: case 13: /* lightning 1-3, beam: entity, start, end */
        num(c, "entity", SG_BMSG_S16);
        coords(c, "start0", "start1", "start2");
        coords(c, "end0", "end1", "end2");
        return;
    case 12: /* explosion2 */
        coords(c, "origin0", "origin1", "origin2");
        num(c, "colorstart", SG_BMSG_U8);
        num(c, "colorlength", SG_BMSG_U8);
        return;
    default:
        if (c->r.overflowed)
            return;
        if (c->p->dpn || (c->p->dp && !c->p->fitz)) {
            /* DP5-DP7, or a DarkPlaces server on 15: a type of the
             * server's CSQC program (CSQC_Parse_TempEntity), its body up
             * to where the rest parses. */
            sg_nq__dp_opaque(c, (uint32_t)(m - c->out->msgs), "csqc");
            return;
        }
        /* CL_ParseTEnt: "bad type"; engines with more (DarkPlaces) relay them. */
        m->unparsed = true;
        data(c, "unparsed", sg_bmsg_remaining(&c->r));
        c->err = SG_E_MALFORMED;
        return;
    }
}

/* ---- serverinfo ---- */

/* Strings up to an empty one (the list's end), as one name each. */
static void name_list(struct sg_nq__ctx *c, const char *name, bool first_is_level)
{
    for (uint32_t i = 0; !c->r.overflowed; i++) {
        struct sg_field *f = str(c, name);
        if (!f || (f->len == 0 && f->end == SG_BMSG_STR_NUL))
            break;
        if (i == 0 && first_is_level) {
            /* "maps/start.bsp" -> "start" */
            const uint8_t *s = f->ptr, *e = f->ptr + f->len;
            size_t n;
            for (const uint8_t *q = f->ptr; q < e; q++)
                if (*q == '/')
                    s = q + 1;
            if (e - s > 4 && memcmp(e - 4, ".bsp", 4) == 0)
                e -= 4;
            n = (size_t)(e - s);
            if (n >= sizeof(c->out->level))
                n = sizeof(c->out->level) - 1;
            memcpy(c->out->level, s, n);
            c->out->level[n] = 0;
        }
    }
}

static void svc_serverinfo(struct sg_nq__ctx *c, struct sg_fmsg *m)
{
    int32_t protocol = (int32_t)num(c, "protocol", SG_BMSG_S32);
    uint32_t flags = 0;

    if (c->r.overflowed)
        return;
    bool dp = c->p->dp;

    if (protocol == SG_NQ_PROTOCOL_RMQ)
        flags = num(c, "flags", SG_BMSG_S32);
    sg_nq_proto_set(c->p, protocol, flags);
    c->p->dp = dp || c->p->dpn; /* said before serverinfo, for the connection */
    c->out->serverinfo = true;
    c->out->level[0] = 0;
    if (!sg_nq_protocol_known(protocol)) {
        /* A protocol slipgate does not decode (DarkPlaces' own): relayed. */
        m->unparsed = true;
        if (c->out->unsupported_op < 0)
            c->out->unsupported_op = 11;
        data(c, "unparsed", sg_bmsg_remaining(&c->r));
        return;
    }
    num(c, "maxclients", SG_BMSG_U8);
    num(c, "gametype", SG_BMSG_U8);
    str(c, "levelname");
    name_list(c, "model", true);
    name_list(c, "sound", false);
}

/* ---- one stream ---- */

static void rest(struct sg_nq__ctx *c, struct sg_fmsg *m)
{
    m->unparsed = true;
    data(c, "unparsed", sg_bmsg_remaining(&c->r));
}

/* The stufftext lines only a DarkPlaces server sends before its serverinfo. */
static void note_dp(struct sg_nq__ctx *c, const struct sg_fmsg *m)
{
    static const char *const lines[] = {"cl_serverextension_download ", "csqc_progname "};
    const struct sg_field *f;

    if (m->count < 1)
        return;
    f = &c->out->fields[m->first];
    for (size_t i = 0; i < N(lines); i++)
        if (f->len >= strlen(lines[i]) && memcmp(f->ptr, lines[i], strlen(lines[i])) == 0)
            c->p->dp = true;
}

static void svc_downloaddata(struct sg_nq__ctx *c)
{
    num(c, "start", SG_BMSG_S32);
    data(c, "data", num(c, "size", SG_BMSG_U16));
}

static void parse_svc(struct sg_nq__ctx *c, struct sg_fmsg *m)
{
    int op = m->op;

    if (op >= 128) {
        svc_update(c, op);
        return;
    }
    if (op < (int)N(svc_tables) && svc_tables[op] && !(c->p->dpn && op >= 38 && op < 50)) {
        table(c, svc_tables[op]);
        if (op == 8 || op == 9 || op == 26)
            m->text = 0;
        if (op == 9) {
            m->count = c->out->nfields - m->first;
            note_dp(c, m);
        }
        return;
    }
    if (!c->p->fitz && op < (int)N(svc_dp_tables) && svc_dp_tables[op]) {
        table(c, svc_dp_tables[op]);
        return;
    }
    if (!c->p->fitz && op == 50) {
        svc_downloaddata(c);
        return;
    }
    if (!c->p->fitz && op == 58 && c->p->dp) {
        /* A DarkPlaces server on 15: its CSQC section (dpent.c). */
        sg_nq__dp_csqc(c, (uint32_t)(m - c->out->msgs));
        return;
    }
    switch (op) {
    case 2: /* disconnect: the client stops reading here */
        c->out->disconnect = true;
        if (sg_bmsg_remaining(&c->r) > 0)
            rest(c, m);
        return;
    case 6:
        svc_sound(c);
        return;
    case 11:
        svc_serverinfo(c, m);
        return;
    case 15:
        svc_clientdata(c);
        return;
    case 20: /* spawnstatic */
        baseline(c, false);
        return;
    case 22:
        num(c, "entity", SG_BMSG_S16);
        baseline(c, false);
        return;
    case 23:
        svc_temp_entity(c, m);
        return;
    case 42:
        num(c, "entity", SG_BMSG_S16);
        baseline(c, true);
        return;
    case 43:
        baseline(c, true);
        return;
    default:
        break;
    }
    /* svc_bad, svc_spawnbinary (obsolete), an opcode no engine here reads. */
    rest(c, m);
    c->err = SG_E_MALFORMED;
}

static void parse_clc(struct sg_nq__ctx *c, struct sg_fmsg *m)
{
    switch (m->op) {
    case 1: /* nop */
        return;
    case 2:
        c->out->disconnect = true;
        return;
    case 3:
        num(c, "time", SG_BMSG_FLOAT);
        num(c, "angle0", c->p->move_angle);
        num(c, "angle1", c->p->move_angle);
        num(c, "angle2", c->p->move_angle);
        num(c, "forward", SG_BMSG_S16);
        num(c, "side", SG_BMSG_S16);
        num(c, "up", SG_BMSG_S16);
        num(c, "buttons", SG_BMSG_U8);
        num(c, "impulse", SG_BMSG_U8);
        return;
    case 4:
        str(c, "text");
        m->text = 0;
        return;
    case 50: /* DarkPlaces (15): ackframe */
    case 51: /* ackdownloaddata: the start and size it echoes */
        if (c->p->fitz)
            break;
        num(c, m->op == 50 ? "frame" : "start", SG_BMSG_S32);
        if (m->op == 51)
            num(c, "size", SG_BMSG_U16);
        return;
    default:
        break;
    }
    rest(c, m);
    c->err = SG_E_MALFORMED;
}

/* Room for one more message in c->out; its index, or -1 (c->err set). */
static int64_t new_msg(struct sg_nq__ctx *c)
{
    struct sg_nq_parsed *out = c->out;
    struct sg_fmsg *m;

    if (out->nmsgs >= out->msgs_cap) {
        uint32_t cap = out->msgs_cap ? out->msgs_cap * 2 : 64;
        void *n;
        if (out->msgs_cap >= SG_NQ_MAX_MSGS) {
            c->err = SG_E_TOOBIG;
            return -1;
        }
        n = realloc(out->msgs, cap * sizeof(*out->msgs));
        if (!n) {
            c->err = -ENOMEM;
            return -1;
        }
        out->msgs = n;
        out->msgs_cap = cap;
    }
    m = &out->msgs[out->nmsgs];
    memset(m, 0, sizeof(*m));
    m->at = (uint32_t)(c->base + c->r.pos);
    m->first = out->nfields;
    m->text = -1;
    m->parent = -1;
    return out->nmsgs++;
}

void sg_nq__stream(struct sg_nq__ctx *c)
{
    struct sg_nq_parsed *out = c->out;
    struct sg_nq_proto *proto = c->p;

    while (sg_bmsg_remaining(&c->r) > 0 && !c->r.overflowed) {
        int64_t n = new_msg(c);
        uint32_t mi;
        struct sg_fmsg *m;
        bool known = sg_nq_protocol_known(proto->protocol) || proto->protocol == 0;
        if (n < 0) {
            sg_bmsg_reader_fail(&c->r);
            return;
        }
        mi = (uint32_t)n;
        m = &out->msgs[mi];
        m->op = sg_bmsg_read_u8(&c->r);
        if (c->dir == SG_DIR_S2C) {
            if (!known && m->op != 11 && m->op != 1 && m->op != 8 && m->op != 9 && m->op != 26) {
                /* A protocol not decoded: its text messages are read
                 * where they lead, the rest is relayed whole. */
                if (out->unsupported_op < 0)
                    out->unsupported_op = m->op;
                rest(c, m);
            } else if (!(proto->dpn && sg_nq__dp_svc(c, mi))) {
                parse_svc(c, m);
            }
        } else if (!known && m->op != 1 && m->op != 2 && m->op != 4) {
            if (out->unsupported_op < 0)
                out->unsupported_op = m->op;
            rest(c, m);
        } else if (!(proto->dpn && sg_nq__dp_clc(c, mi))) {
            parse_clc(c, m);
        }
        m = &out->msgs[mi]; /* (a tried rest may have moved the array) */
        if (mi + 1 == out->nmsgs) /* (else the message set its count before the rest) */
            m->count = out->nfields - m->first;
        if (c->dir == SG_DIR_S2C && m->op == 25 && m->count == 1)
            out->signon = (int)out->fields[m->first].raw;
    }
}

bool sg_nq__try_rest(struct sg_nq__ctx *c, size_t at)
{
    struct sg_nq_parsed *o = c->out;
    struct sg_nq_proto saved_proto = *c->p;
    struct sg_nq_parsed saved = *o; /* the lists' lengths and all the parser learnt */
    uint32_t nm = o->nmsgs;
    struct sg_nq__ctx t = {.p = c->p, .out = o, .dir = c->dir, .base = c->base + at};

    if (o->trials >= SG_NQ__TRIALS || at > c->r.end)
        return false;
    o->trials++;
    sg_bmsg_reader_init(&t.r, c->r.data + at, c->r.end - at);
    sg_nq__stream(&t);
    if (t.err == 0 && !t.r.overflowed && o->unsupported_op == saved.unsupported_op) {
        uint32_t i = nm;
        while (i < o->nmsgs && !o->msgs[i].unparsed)
            i++;
        if (i == o->nmsgs) { /* (none unread: not a disconnect's trailing bytes either) */
            c->r.pos = c->r.end;
            return true;
        }
    }
    if (t.err == -ENOMEM)
        c->err = -ENOMEM;
    /* All back as it was, but the lists' storage (the try may have moved
     * it) and the count of tries. */
    *c->p = saved_proto;
    saved.fields = o->fields;
    saved.fields_cap = o->fields_cap;
    saved.msgs = o->msgs;
    saved.msgs_cap = o->msgs_cap;
    saved.trials = o->trials;
    *o = saved;
    return false;
}

int sg_nq_parse(enum sg_dir dir, struct sg_nq_proto *proto, const uint8_t *d, size_t len,
                struct sg_nq_parsed *out)
{
    struct sg_nq__ctx c = {.p = proto, .out = out, .dir = dir};

    sg_bmsg_reader_init(&c.r, d, len);
    out->nfields = 0;
    out->nmsgs = 0;
    out->serverinfo = false;
    out->level[0] = 0;
    out->signon = -1;
    out->disconnect = false;
    out->unsupported_op = -1;
    out->csqc_raw = 0;
    out->trials = 0;
    sg_nq__stream(&c);
    if (c.err < 0)
        return c.err;
    return c.r.overflowed ? SG_E_OVERFLOW : 0;
}

/* ---- the writer ---- */

int sg_nq_write(const struct sg_nq_parsed *p, const bool *dropped, struct sg_bmsg_writer *w)
{
    for (uint32_t i = 0; i < p->nmsgs; i++) {
        const struct sg_fmsg *m = &p->msgs[i];
        if (dropped && dropped[i])
            continue;
        sg_bmsg_write_u8(w, (unsigned)m->op);
        sg_fields_write(p->fields, m->first, m->count, w);
    }
    return w->overflowed ? SG_E_OVERFLOW : 0;
}
