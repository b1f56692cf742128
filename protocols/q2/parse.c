/*
 * Quake 2 messages, both directions, into field lists (q2.h).  Read order
 * and widths as the receivers read them: Q2PRO's client (src/client/parse.c,
 * src/common/msg.c) for svc_*, its server (src/server/user.c) for clc_*;
 * layouts in PROTOCOLS.md §A3-A10 and the DM2 seed §3.
 */
#include "protocols/q2/parse.h"

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

void sg_q2_parsed_free(struct sg_q2_parsed *p)
{
    sg_q2__zlib_free(p);
    free(p->fields);
    free(p->msgs);
    free(p->zpool);
    free(p->kex_solid);
    memset(p, 0, sizeof(*p));
}

static const char *const pos2n[3] = {"x2", "y2", "z2"};
static const char *const offn[3] = {"ox", "oy", "oz"};

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
    sg_q2__playerstate(c, c->v->protocol > 34, extra);
    if (c->v->protocol == 36 && (extra & EPS_CLIENTNUM))
        num(c, "clientnum", c->v->minor >= 1022 ? SG_BMSG_S16 : SG_BMSG_U8);
    if (c->v->protocol <= 34 && num(c, "svc_packetentities", SG_BMSG_U8) !=
                                    SG_Q2_SVC_PACKETENTITIES &&
        !c->r.overflowed)
        fail(c, SG_E_MALFORMED);
    sg_q2__entity_list(c, true);
}

/* ---- serverdata ---- */

void sg_q2__kex_serverdata(struct ctx *c, int protocol);

static void serverdata(struct ctx *c)
{
    uint8_t tmp[64];
    int protocol = snum(c, "protocol", SG_BMSG_S32);
    uint32_t n, minor = 0, pf = 0;
    const uint8_t *s;
    struct sg_q2_variant nv;

    sg_q2__zdl_reset(c->out->zdl); /* a new level: no download goes on */
    c->out->kex = false;
    if (protocol == 2022 || protocol == 2023) {
        sg_q2__kex_serverdata(c, protocol);
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
    sound_opts(c, flags, SG_BMSG_U16);
    if (flags & 0x04)
        pos(c, NULL);
}

static void download(struct ctx *c, bool z)
{
    int32_t size = snum(c, "size", SG_BMSG_S16);
    uint32_t percent = num(c, "percent", SG_BMSG_U8);
    const uint8_t *d;
    int64_t got;

    if (size == -1 || c->r.overflowed) {
        sg_q2__zdl_reset(c->out->zdl); /* the download ended: the client starts its stream again */
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
        got = sg_q2__zdl_inflate(c->out, d, (size_t)size);
        if (got < 0) {
            fail(c, (int)got);
            return;
        }
        value(c, "inflated", (int32_t)got);
    }
    if (percent == 100)
        sg_q2__zdl_reset(c->out->zdl); /* the last chunk */
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
        sg_q2__entity_list(c, false);
}

static int parse_stream(struct ctx *c);

static void zpacket(struct ctx *c, int self)
{
    struct ctx sub;

    if (!sg_q2__inflated(c, self, false, SG_Q2_MAX_MSGLEN, &sub))
        return;
    /* The contents, as messages of their own. */
    if (parse_stream(&sub) < 0)
        fail(c, sub.err ? sub.err : SG_E_MALFORMED);
}

/* ---- one svc message ---- */

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
            sg_q2__kex_sound(c);
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

static void svc(struct ctx *c, int op, int self)
{
    int cmd = op & 0x1f;
    int proto = c->v->protocol;

    if (c->v->kex) {
        if (!common_svc(c, op))
            sg_q2__kex_svc(c, op, self);
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
        sg_q2__entity_bits(c, &bits);
        sg_q2__entity_delta(c, bits);
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
            sg_q2__clc(c, op);
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
