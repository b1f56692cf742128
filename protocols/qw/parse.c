/*
 * QuakeWorld messages, both directions, into field lists (qw.h): one field
 * table per fixed message, one bit-conditional table for entity deltas,
 * player info and user commands, and short paragraphs for the messages
 * whose shape depends on a value (sound, temp entities, downloads, lists).
 * Layouts: the QWD seed §5, PROTOCOLS.md §C3-C6; read order as ezQuake's
 * cl_parse.c / cl_ents.c / com_msg.c read them (the receiver's view).
 */
#include "protocols/qw/qw.h"
#include "protocols/qw/bits.h"

#include "protocols/error.h"
#include "protocols/fieldread.h"

#include <string.h>

/* Pseudo-kinds resolved through the variant. */
enum {
    K_COORD = SG_FK_COORD,
    K_ANGLE = SG_FK_ANGLE,
    K_ORIGIN = SG_FK_ORIGIN,
    K_STRING = SG_FK_STRING,
    K_END = SG_FK_END,
};

struct bdesc {
    uint32_t bit;
    const char *name;
    uint8_t kind;
};

struct ctx {
    struct sg_bmsg_reader r;
    struct sg_qw_variant v;
    struct sg_qw_parsed *out;
    enum sg_dir dir;
    int err;
    uint32_t max_fields;
};

void sg_qw_variant_of(const struct sg_qw_ext *ext, struct sg_qw_variant *v)
{
    struct sg_bmsg_sizes s = sg_bmsg_sizes_qw(ext->fte);

    v->coord = s.coord;
    v->angle = s.angle;
    v->ent_origin = (ext->mvd1 & SG_QW_MVD1_FLOATCOORDS) ? SG_BMSG_COORD_FLOAT : s.coord;
    v->fte = ext->fte != 0;
    v->trans = (ext->fte & SG_QW_FTE_TRANS) != 0;
    v->chunked = (ext->fte & SG_QW_FTE_CHUNKEDDOWNLOADS) != 0;
    v->setangle_byte = (ext->mvd1 & SG_QW_MVD1_HIGHLAGTELEPORT) != 0;
    v->mvd = false;
}

/* ---- fields ---- */

/* The next field's place in the list (the caller's room, max_fields), or
 * NULL when it is full (the reader failed, c->err set). */
static struct sg_field *room(struct ctx *c)
{
    if (c->out->nfields >= c->max_fields) {
        sg_bmsg_reader_fail(&c->r);
        c->err = SG_E_TOOBIG;
        return NULL;
    }
    return &c->out->fields[c->out->nfields++];
}

/* Keep field *f, read by a shared step, as `name`: false when the list is full. */
static bool keep(struct ctx *c, const char *name, const struct sg_field *f)
{
    struct sg_field *k = room(c);

    if (k)
        sg_field_keep(k, name, f);
    return k != NULL;
}

static uint8_t resolve(const struct ctx *c, uint8_t kind)
{
    switch (kind) {
    case K_COORD:
        return c->v.coord;
    case K_ANGLE:
        return c->v.angle;
    case K_ORIGIN:
        return c->v.ent_origin;
    default:
        return kind;
    }
}

/* A number: its raw value (0 when the read failed).  QuakeWorld's own, like
 * Quake 2's: read, then kept, member by member (through the shared step
 * its decode was 4-5 % slower). */
static uint32_t num(struct ctx *c, const char *name, uint8_t kind)
{
    struct sg_field *f;
    uint32_t raw;

    if (c->r.overflowed)
        return 0;
    kind = resolve(c, kind);
    if (sg_bmsg_read_num(&c->r, kind, &raw) < 0 || !(f = room(c)))
        return 0;
    memset(f, 0, sizeof(*f));
    f->name = name;
    f->type = SG_FIELD_NUM;
    f->num = kind;
    f->raw = raw;
    return raw;
}

/* A string as ezQuake reads it: its length (0 when the read failed). */
static size_t str(struct ctx *c, const char *name)
{
    struct sg_field f;

    return sg_fread_str(&c->r, &f) && keep(c, name, &f) ? f.len : 0;
}

static void data(struct ctx *c, const char *name, size_t n)
{
    struct sg_field f;

    if (sg_fread_data(&c->r, n, &f))
        keep(c, name, &f);
}

/* A fixed message's fields. */
static void table(struct ctx *c, const struct sg_fdesc *t)
{
    for (; t->kind != K_END; t++)
        t->kind == K_STRING ? (void)str(c, t->name) : (void)num(c, t->name, t->kind);
}

static void bits_table(struct ctx *c, const struct bdesc *t, size_t n, uint32_t bits)
{
    for (size_t i = 0; i < n; i++)
        if (bits & t[i].bit)
            num(c, t[i].name, t[i].kind);
}

#define N(t) (sizeof(t) / sizeof((t)[0]))

/* ---- entity deltas, player info, user commands ---- */

/* CL_ParseDelta's read order (origins and angles interleaved). */
static const struct bdesc entity_fields[] = {
    {U_MODEL, "model", SG_BMSG_U8},      {U_FRAME, "frame", SG_BMSG_U8},
    {U_COLORMAP, "colormap", SG_BMSG_U8}, {U_SKIN, "skin", SG_BMSG_U8},
    {U_EFFECTS, "effects", SG_BMSG_U8},   {U_ORIGIN1, "origin0", K_ORIGIN},
    {U_ANGLE1, "angle0", K_ANGLE},        {U_ORIGIN2, "origin1", K_ORIGIN},
    {U_ANGLE2, "angle1", K_ANGLE},        {U_ORIGIN3, "origin2", K_ORIGIN},
    {U_ANGLE3, "angle2", K_ANGLE},
};

/* After the word (number and high bits) was read as a field. */
static void entity_delta(struct ctx *c, uint32_t bits)
{
    uint32_t more = 0;

    if (bits & U_MOREBITS)
        bits |= num(c, "morebits", SG_BMSG_U8);
    if ((bits & U_EVENMORE) && c->v.fte) {
        more = num(c, "evenmore", SG_BMSG_U8);
        if (more & U_FTE_YETMORE)
            more |= num(c, "yetmore", SG_BMSG_U8) << 8;
    }
    bits_table(c, entity_fields, N(entity_fields), bits);
    if ((more & U_FTE_TRANS) && c->v.trans)
        num(c, "trans", SG_BMSG_U8);
}

static void entity_list(struct ctx *c)
{
    for (;;) {
        uint32_t word = num(c, "entity", SG_BMSG_U16);
        if (c->r.overflowed || word == 0)
            return;
        entity_delta(c, word & ~511u);
    }
}

static const struct bdesc usercmd_fields[] = {
    {0x01, "angle0", SG_BMSG_ANGLE16}, {0x80, "angle1", SG_BMSG_ANGLE16},
    {0x02, "angle2", SG_BMSG_ANGLE16}, {0x04, "forward", SG_BMSG_S16},
    {0x08, "side", SG_BMSG_S16},       {0x10, "up", SG_BMSG_S16},
    {0x20, "buttons", SG_BMSG_U8},     {0x40, "impulse", SG_BMSG_U8},
};

/* MSG_ReadDeltaUsercmd, protocol 28: msec always. */
static void usercmd(struct ctx *c)
{
    uint32_t bits = num(c, "cmdbits", SG_BMSG_U8);

    bits_table(c, usercmd_fields, N(usercmd_fields), bits);
    num(c, "msec", SG_BMSG_U8);
}

#define PF_MSEC    0x0001u
#define PF_COMMAND 0x0002u

static const struct bdesc player_fields[] = {
    {0x0004, "velocity0", SG_BMSG_S16}, {0x0008, "velocity1", SG_BMSG_S16},
    {0x0010, "velocity2", SG_BMSG_S16}, {0x0020, "model", SG_BMSG_U8},
    {0x0040, "skin", SG_BMSG_U8},       {0x0080, "effects", SG_BMSG_U8},
    {0x0100, "weaponframe", SG_BMSG_U8},
};

static void playerinfo(struct ctx *c)
{
    uint32_t flags;

    num(c, "player", SG_BMSG_U8);
    flags = num(c, "flags", SG_BMSG_U16);
    num(c, "origin0", K_ORIGIN);
    num(c, "origin1", K_ORIGIN);
    num(c, "origin2", K_ORIGIN);
    num(c, "frame", SG_BMSG_U8);
    if (flags & PF_MSEC)
        num(c, "msec", SG_BMSG_U8);
    if (flags & PF_COMMAND)
        usercmd(c);
    bits_table(c, player_fields, N(player_fields), flags);
    /* ezQuake reads flags as a signed short: bit 15 also sets PF_TRANS_Z. */
    if ((flags & 0x8000u) && c->v.trans)
        num(c, "alpha", SG_BMSG_U8);
}

/* An .mvd's svc_playerinfo (mvdsv's DF_* delta flags): frame always, then
 * only the origins, angles and bytes whose flag is set; DF_DEAD (0x100)
 * and DF_GIB (0x200) carry no data. */
#define DF_ORIGIN      0x0001u /* << 0..2 */
#define DF_ANGLES      0x0008u /* << 0..2 */
#define DF_EFFECTS     0x0040u
#define DF_SKINNUM     0x0080u
#define DF_WEAPONFRAME 0x0400u
#define DF_MODEL       0x0800u

static const struct bdesc mvd_player_fields[] = {
    {DF_ORIGIN, "origin0", K_ORIGIN},         {DF_ORIGIN << 1, "origin1", K_ORIGIN},
    {DF_ORIGIN << 2, "origin2", K_ORIGIN},    {DF_ANGLES, "angle0", SG_BMSG_ANGLE16},
    {DF_ANGLES << 1, "angle1", SG_BMSG_ANGLE16}, {DF_ANGLES << 2, "angle2", SG_BMSG_ANGLE16},
    {DF_MODEL, "model", SG_BMSG_U8},          {DF_SKINNUM, "skin", SG_BMSG_U8},
    {DF_EFFECTS, "effects", SG_BMSG_U8},      {DF_WEAPONFRAME, "weaponframe", SG_BMSG_U8},
};

static void playerinfo_mvd(struct ctx *c)
{
    uint32_t flags;

    num(c, "player", SG_BMSG_U8);
    flags = num(c, "flags", SG_BMSG_U16);
    num(c, "frame", SG_BMSG_U8);
    bits_table(c, mvd_player_fields, N(mvd_player_fields), flags);
}

/* ---- messages with a fixed layout ---- */

static const struct sg_fdesc f_none[] = {{NULL, K_END}};
static const struct sg_fdesc f_updatestat[] = {
    {"stat", SG_BMSG_U8}, {"value", SG_BMSG_U8}, {NULL, K_END}};
static const struct sg_fdesc f_print[] = {{"level", SG_BMSG_U8}, {"text", K_STRING}, {NULL, K_END}};
static const struct sg_fdesc f_text[] = {{"text", K_STRING}, {NULL, K_END}};
static const struct sg_fdesc f_lightstyle[] = {
    {"style", SG_BMSG_U8}, {"map", K_STRING}, {NULL, K_END}};
static const struct sg_fdesc f_updatefrags[] = {
    {"player", SG_BMSG_U8}, {"frags", SG_BMSG_S16}, {NULL, K_END}};
static const struct sg_fdesc f_short[] = {{"value", SG_BMSG_S16}, {NULL, K_END}};
static const struct sg_fdesc f_byte[] = {{"value", SG_BMSG_U8}, {NULL, K_END}};
static const struct sg_fdesc f_float[] = {{"value", SG_BMSG_FLOAT}, {NULL, K_END}};
static const struct sg_fdesc f_damage[] = {
    {"armor", SG_BMSG_U8}, {"blood", SG_BMSG_U8}, {"x", K_COORD}, {"y", K_COORD}, {"z", K_COORD},
    {NULL, K_END}};
#define BASELINE                                                                                   \
    {"model", SG_BMSG_U8}, {"frame", SG_BMSG_U8}, {"colormap", SG_BMSG_U8}, {"skin", SG_BMSG_U8}, \
        {"origin0", K_COORD}, {"angle0", K_ANGLE}, {"origin1", K_COORD}, {"angle1", K_ANGLE},     \
        {"origin2", K_COORD}, {"angle2", K_ANGLE}
static const struct sg_fdesc f_spawnstatic[] = {BASELINE, {NULL, K_END}};
static const struct sg_fdesc f_spawnbaseline[] = {{"entity", SG_BMSG_U16}, BASELINE, {NULL, K_END}};
static const struct sg_fdesc f_staticsound[] = {
    {"x", K_COORD}, {"y", K_COORD}, {"z", K_COORD}, {"sound", SG_BMSG_U8},
    {"volume", SG_BMSG_U8}, {"attenuation", SG_BMSG_U8}, {NULL, K_END}};
static const struct sg_fdesc f_intermission[] = {
    {"x", K_COORD}, {"y", K_COORD}, {"z", K_COORD}, {"pitch", K_ANGLE}, {"yaw", K_ANGLE},
    {"roll", K_ANGLE}, {NULL, K_END}};
static const struct sg_fdesc f_updateping[] = {
    {"player", SG_BMSG_U8}, {"ping", SG_BMSG_S16}, {NULL, K_END}};
static const struct sg_fdesc f_entertime[] = {
    {"player", SG_BMSG_U8}, {"seconds", SG_BMSG_FLOAT}, {NULL, K_END}};
static const struct sg_fdesc f_statlong[] = {
    {"stat", SG_BMSG_U8}, {"value", SG_BMSG_S32}, {NULL, K_END}};
static const struct sg_fdesc f_userinfo[] = {
    {"player", SG_BMSG_U8}, {"userid", SG_BMSG_S32}, {"userinfo", K_STRING}, {NULL, K_END}};
static const struct sg_fdesc f_setinfo[] = {
    {"player", SG_BMSG_U8}, {"key", K_STRING}, {"value", K_STRING}, {NULL, K_END}};
static const struct sg_fdesc f_serverinfo[] = {
    {"key", K_STRING}, {"value", K_STRING}, {NULL, K_END}};
static const struct sg_fdesc f_updatepl[] = {
    {"player", SG_BMSG_U8}, {"loss", SG_BMSG_U8}, {NULL, K_END}};
static const struct sg_fdesc f_coords[] = {
    {"x", K_COORD}, {"y", K_COORD}, {"z", K_COORD}, {NULL, K_END}};
static const struct sg_fdesc f_setangle[] = {
    {"pitch", K_ANGLE}, {"yaw", K_ANGLE}, {"roll", K_ANGLE}, {NULL, K_END}};

static const struct sg_fdesc *const svc_tables[] = {
    [1] = f_none,            [3] = f_updatestat,   [8] = f_print,         [9] = f_text,
    [12] = f_lightstyle,     [14] = f_updatefrags, [16] = f_short,        [19] = f_damage,
    [20] = f_spawnstatic,    [22] = f_spawnbaseline, [24] = f_byte,       [26] = f_text,
    [27] = f_none,           [28] = f_none,        [29] = f_staticsound,  [30] = f_intermission,
    [31] = f_text,           [32] = f_byte,        [33] = f_none,         [34] = f_none,
    [35] = f_none,           [36] = f_updateping,  [37] = f_entertime,    [38] = f_statlong,
    [39] = f_short,          [40] = f_userinfo,    [44] = f_byte,         [49] = f_float,
    [50] = f_float,          [51] = f_setinfo,     [52] = f_serverinfo,   [53] = f_updatepl,
};

/* ---- messages whose shape depends on a value ---- */

static void svc_sound(struct ctx *c)
{
    uint32_t ch = num(c, "channel", SG_BMSG_U16);

    if (ch & 0x8000u)
        num(c, "volume", SG_BMSG_U8);
    if (ch & 0x4000u)
        num(c, "attenuation", SG_BMSG_U8);
    num(c, "sound", SG_BMSG_U8);
    table(c, f_coords);
}

static void svc_serverdata(struct ctx *c)
{
    struct sg_qw_ext ext = {0};

    for (;;) {
        uint32_t v = num(c, "protocol", SG_BMSG_S32);
        if (c->r.overflowed)
            return;
        if (v == SG_QW_MAGIC_FTE)
            ext.fte = num(c, "fte_extensions", SG_BMSG_S32);
        else if (v == SG_QW_MAGIC_FTE2)
            ext.fte2 = num(c, "fte2_extensions", SG_BMSG_S32);
        else if (v == SG_QW_MAGIC_MVD1)
            ext.mvd1 = num(c, "mvd1_extensions", SG_BMSG_S32);
        else if (v == SG_QW_PROTOCOL)
            break;
        else {
            c->err = SG_E_VERSION;
            sg_bmsg_reader_fail(&c->r);
            return;
        }
    }
    num(c, "servercount", SG_BMSG_S32);
    str(c, "gamedir");
    if (c->v.mvd)
        num(c, "demotime", SG_BMSG_FLOAT);
    else
        num(c, "playernum", SG_BMSG_U8);
    {
        uint32_t before = c->out->nfields;
        size_t n = str(c, "levelname");
        if (c->out->nfields > before) {
            if (n >= sizeof(c->out->level))
                n = sizeof(c->out->level) - 1;
            memcpy(c->out->level, c->out->fields[before].ptr, n);
            c->out->level[n] = 0;
        }
    }
    static const char *const movevars[] = {"gravity", "stopspeed", "maxspeed", "spectatormaxspeed",
                                           "accelerate", "airaccelerate", "wateraccelerate",
                                           "friction", "waterfriction", "entgravity"};
    for (size_t i = 0; i < N(movevars); i++)
        num(c, movevars[i], SG_BMSG_FLOAT);
    if (c->r.overflowed)
        return;
    /* The serverdata's extensions rule from here on, in this datagram too. */
    ext.known = true;
    ext.z_ext = c->out->ext.z_ext;
    c->out->serverdata = true;
    c->out->ext = ext;
    {
        bool mvd = c->v.mvd;
        sg_qw_variant_of(&ext, &c->v);
        c->v.mvd = mvd;
    }
}

static void svc_setangle(struct ctx *c)
{
    if (c->v.mvd)
        num(c, "player", SG_BMSG_U8);
    if (c->v.setangle_byte)
        num(c, "player", SG_BMSG_U8);
    table(c, f_setangle);
}

static void svc_temp_entity(struct ctx *c)
{
    uint32_t type = num(c, "type", SG_BMSG_U8);

    switch (type) {
    case 5: /* TE_LIGHTNING1..3: entity, start, end */
    case 6:
    case 9:
        num(c, "entity", SG_BMSG_S16);
        table(c, f_coords);
        num(c, "x2", K_COORD);
        num(c, "y2", K_COORD);
        num(c, "z2", K_COORD);
        break;
    case 2:  /* TE_GUNSHOT */
    case 12: /* TE_BLOOD */
        num(c, "count", SG_BMSG_U8);
        table(c, f_coords);
        break;
    default:
        table(c, f_coords);
        break;
    }
}

static void svc_download(struct ctx *c)
{
    if (c->v.chunked) {
        int32_t chunk = (int32_t)num(c, "chunk", SG_BMSG_S32);
        if (chunk < 0) {
            num(c, "totalsize", SG_BMSG_S32);
            str(c, "name");
        } else {
            data(c, "block", 1024); /* DLBLOCKSIZE */
        }
        return;
    }
    int16_t size = (int16_t)num(c, "size", SG_BMSG_S16);
    num(c, "percent", SG_BMSG_U8);
    if (size > 0)
        data(c, "data", (size_t)size);
}

static void svc_list(struct ctx *c, uint8_t start_kind)
{
    num(c, "start", start_kind);
    for (;;) {
        size_t before = c->out->nfields;
        size_t n = str(c, "name");
        if (c->r.overflowed || (n == 0 && c->out->nfields > before &&
                                c->out->fields[before].end == SG_BMSG_STR_NUL))
            break;
    }
    num(c, "next", SG_BMSG_U8);
}

static void svc_nails(struct ctx *c, size_t each)
{
    uint32_t n = num(c, "count", SG_BMSG_U8);

    data(c, "projectiles", n * each);
}

static void svc_voicechat(struct ctx *c)
{
    num(c, "sender", SG_BMSG_U8);
    num(c, "gen", SG_BMSG_U8);
    num(c, "seq", SG_BMSG_U8);
    data(c, "voice", num(c, "bytes", SG_BMSG_U16));
}

/* ---- one stream ---- */

/* The rest of the message as one DATA field. */
static void rest(struct ctx *c, const char *name)
{
    data(c, name, sg_bmsg_remaining(&c->r));
}

static void parse_svc(struct ctx *c, struct sg_fmsg *m)
{
    int op = m->op;

    if (op < (int)N(svc_tables) && svc_tables[op]) {
        table(c, svc_tables[op]);
        if (op == 8 || op == 9 || op == 26)
            m->text = op == 8 ? 1 : 0;
        return;
    }
    switch (op) {
    case 2: /* disconnect: the client stops reading here */
        rest(c, "rest");
        return;
    case 6:
        svc_sound(c);
        return;
    case 10:
        svc_setangle(c);
        return;
    case 11:
        svc_serverdata(c);
        return;
    case 21: /* fte_spawnstatic2 */
    case 66: /* fte_spawnbaseline2 */
        entity_delta(c, num(c, "entity", SG_BMSG_U16) & ~511u);
        return;
    case 23:
        svc_temp_entity(c);
        return;
    case 41:
        svc_download(c);
        return;
    case 42:
        if (c->v.mvd)
            playerinfo_mvd(c);
        else
            playerinfo(c);
        return;
    case 43:
        svc_nails(c, 6);
        return;
    case 54:
        svc_nails(c, 7);
        return;
    case 45:
    case 46:
        svc_list(c, SG_BMSG_U8);
        return;
    case 60: /* fte_modellistshort */
        svc_list(c, SG_BMSG_U16);
        return;
    case 47:
        entity_list(c);
        return;
    case 48:
        num(c, "from", SG_BMSG_U8);
        entity_list(c);
        return;
    case 84:
        svc_voicechat(c);
        return;
    default:
        break;
    }
    /* FTE's extension range (55..94): relayed, reported once per session. */
    if (op >= 55 && op <= 94) {
        m->unparsed = true;
        if (c->out->unsupported_op < 0)
            c->out->unsupported_op = op;
        rest(c, "unparsed");
        return;
    }
    rest(c, "unparsed");
    m->unparsed = true;
    c->err = SG_E_MALFORMED;
}

#define MVD_WEAPON_FORGET_RANKING 0x04u
#define MVD_WEAPON_FULL_IMPULSE   0x80u

/* flags, [age], then weapon bytes up to a 0 byte, or (packed two to a
 * byte) up to a byte with a zero half. */
static void clc_mvd_weapon(struct ctx *c)
{
    uint32_t flags = num(c, "flags", SG_BMSG_U8);

    if (flags & MVD_WEAPON_FORGET_RANKING)
        num(c, "age", SG_BMSG_U8);
    while (!c->r.overflowed) {
        uint32_t b = num(c, "weapons", SG_BMSG_U8);
        if (b == 0 || (!(flags & MVD_WEAPON_FULL_IMPULSE) && (!(b >> 4) || !(b & 15))))
            break;
    }
}

static void parse_clc(struct ctx *c, struct sg_fmsg *m)
{
    switch (m->op) {
    case 1: /* nop */
        return;
    case 3: { /* move */
        uint32_t sum = num(c, "checksum", SG_BMSG_U8);
        size_t from = c->r.pos;
        num(c, "lossage", SG_BMSG_U8);
        usercmd(c);
        usercmd(c);
        usercmd(c);
        if (c->r.overflowed)
            return;
        c->out->moves++;
        m->sum_ok = sum == sg_qw_move_checksum(c->r.data + from, c->r.pos - from,
                                               c->out->sequence);
        if (!m->sum_ok)
            c->out->moves_bad++;
        return;
    }
    case 4:
        str(c, "text");
        m->text = 0;
        return;
    case 5:
        num(c, "sequence", SG_BMSG_U8);
        return;
    case 6: /* tmove */
        table(c, f_coords);
        return;
    case 7: { /* upload */
        int16_t size = (int16_t)num(c, "size", SG_BMSG_S16);
        num(c, "percent", SG_BMSG_U8);
        if (size > 0)
            data(c, "data", (size_t)size);
        return;
    }
    case 200: /* clc_mvd_weapon (MVD1 server-side weapons), as mvdsv reads it */
        clc_mvd_weapon(c);
        return;
    case 83:  /* FTE voice chat */
    case 201: /* clc_mvd_debug */
        m->unparsed = true;
        if (c->out->unsupported_op < 0)
            c->out->unsupported_op = m->op;
        rest(c, "unparsed");
        return;
    default:
        m->unparsed = true;
        rest(c, "unparsed");
        c->err = SG_E_MALFORMED;
        return;
    }
}

int sg_qw_parse(enum sg_dir dir, const struct sg_qw_variant *v, const uint8_t *d, size_t len,
                struct sg_qw_parsed *out)
{
    return sg_qw_parse_n(dir, v, d, len, out, SG_QW_MAX_FIELDS, SG_QW_MAX_MSGS);
}

int sg_qw_parse_n(enum sg_dir dir, const struct sg_qw_variant *v, const uint8_t *d, size_t len,
                  struct sg_qw_parsed *out, uint32_t max_fields, uint32_t max_msgs)
{
    struct ctx c = {.v = *v, .out = out, .dir = dir, .max_fields = max_fields};

    sg_bmsg_reader_init(&c.r, d, len);
    out->nfields = 0;
    out->nmsgs = 0;
    out->serverdata = false;
    out->level[0] = 0;
    out->unsupported_op = -1;
    out->moves = out->moves_bad = 0;
    while (sg_bmsg_remaining(&c.r) > 0 && !c.r.overflowed) {
        struct sg_fmsg *m;
        if (out->nmsgs >= max_msgs)
            return SG_E_TOOBIG;
        m = &out->msgs[out->nmsgs++];
        m->op = sg_bmsg_read_u8(&c.r);
        m->first = out->nfields;
        m->text = -1;
        m->unparsed = false;
        m->sum_ok = false;
        if (dir == SG_DIR_S2C) {
            if (m->op == 0) { /* svc_bad */
                rest(&c, "unparsed");
                m->unparsed = true;
                c.err = SG_E_MALFORMED;
            } else {
                parse_svc(&c, m);
            }
        } else {
            parse_clc(&c, m);
        }
        m->count = out->nfields - m->first;
    }
    if (c.err < 0)
        return c.err;
    return c.r.overflowed ? SG_E_OVERFLOW : 0;
}

/* ---- the writer ---- */

void sg_qw_write_msg(const struct sg_qw_parsed *p, uint32_t i, struct sg_bmsg_writer *w)
{
    const struct sg_fmsg *m = &p->msgs[i];
    size_t at;

    sg_bmsg_write_u8(w, (unsigned)m->op);
    at = w->len;
    sg_fields_write(p->fields, m->first, m->count, w);
    if (m->op == 3 && m->sum_ok && !w->overflowed && w->len > at)
        w->data[at] = sg_qw_move_checksum(w->data + at + 1, w->len - at - 1, p->sequence);
}

int sg_qw_write(const struct sg_qw_parsed *p, const bool *dropped, struct sg_bmsg_writer *w)
{
    for (uint32_t i = 0; i < p->nmsgs; i++)
        if (!dropped || !dropped[i])
            sg_qw_write_msg(p, i, w);
    return w->overflowed ? SG_E_OVERFLOW : 0;
}
