/*
 * Quake 2 session state, what a recording needs (record.c): the level as
 * the client knows it (protocol 34), what a demo that starts mid-level is
 * given first; and the state a 35/36 session's client keeps, from which
 * its demos are written as 34.
 *
 * Quake 2: protocol 35 (R1Q2) and 36 (Q2PRO) sessions recorded as
 * protocol 34 .dm2 demos, the way Q2PRO's client records its own demos of
 * such games (src/client/demo.c: it writes its current state, it does not
 * copy the wire bytes; PROTOCOLS.md A11).  A 35/36 svc_frame is not legal
 * inside a 34 demo (its frame word, its enhanced player state, its long
 * solids), so the frames are rebuilt.
 *
 * Tracking (every accepted server message, recording or not): the state
 * the client keeps, as Q2PRO's client keeps it (src/client/parse.c):
 * the serverdata, the configstrings, the baselines, and the last 16
 * frames by frame number (player state, areabits, entity states in one
 * ring), each frame delta-decoded from the frame it names, or marked
 * invalid when that frame is gone (then it is not written, as the
 * client does not emit it).  Values are kept in their wire integers
 * (coordinates * 8, angles as 16-bit shorts), never as floats.
 */
#include "protocols/q2/session.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void sg_q2__level_clear(struct level *l)
{
    for (int i = 0; i < SG_Q2_CS_OLD; i++)
        free(l->cs[i]);
    for (int i = 0; i < SG_Q2_EDICTS_OLD; i++)
        free(l->base[i]);
    memset(l, 0, sizeof(*l));
}

static void copy_field(char *out, size_t cap, const struct sg_field *f)
{
    size_t n = f->len < cap - 1 ? f->len : cap - 1;

    memcpy(out, f->ptr, n);
    out[n] = 0;
}

/* Follow the level from the messages the client accepted (protocol 34 only:
 * a 34 demo is what is written). */
void sg_q2__level_track(struct level *l, const struct sg_q2_parsed *p, const bool *dropped)
{
    uint8_t tmp[512];

    for (uint32_t i = 0; i < p->nmsgs; i++) {
        const struct sg_fmsg *m = &p->msgs[i];
        const struct sg_field *f = m->count ? &p->fields[m->first] : NULL;
        if (m->unparsed || (dropped && dropped[i]))
            continue;
        if (m->op == SG_Q2_SVC_SERVERDATA && m->count >= 6) {
            sg_q2__level_clear(l);
            if ((int32_t)f[0].raw != 34)
                continue;
            l->have = true;
            l->servercount = (int32_t)f[1].raw;
            copy_field(l->gamedir, sizeof(l->gamedir), &f[3]);
            l->playernum = (int16_t)f[4].raw;
            copy_field(l->levelname, sizeof(l->levelname), &f[5]);
        } else if (l->have && m->op == SG_Q2_SVC_CONFIGSTRING && m->count == 2 &&
                   f[0].raw < SG_Q2_CS_OLD) {
            char *s = malloc(f[1].len + 1);
            if (!s)
                continue;
            memcpy(s, f[1].ptr, f[1].len);
            s[f[1].len] = 0;
            free(l->cs[f[0].raw]);
            l->cs[f[0].raw] = s;
        } else if (l->have && m->op == SG_Q2_SVC_SPAWNBASELINE) {
            /* the message as written, and its entity number */
            struct sg_q2_parsed one = *p;
            struct sg_fmsg mm = *m;
            struct sg_bmsg_writer w;
            uint32_t num = 0;
            mm.parent = -1;
            one.msgs = &mm;
            one.nmsgs = 1;
            for (uint32_t k = 0; k < m->count; k++)
                if (strcmp(f[k].name, "number") == 0) {
                    num = f[k].raw;
                    break;
                }
            sg_bmsg_writer_init(&w, tmp, sizeof(tmp));
            if (num == 0 || num >= SG_Q2_EDICTS_OLD || sg_q2_write(&one, NULL, &w) < 0)
                continue;
            uint8_t *b = malloc(w.len);
            if (!b)
                continue;
            memcpy(b, tmp, w.len);
            free(l->base[num]);
            l->base[num] = b;
            l->base_len[num] = (uint16_t)w.len;
        }
    }
}

/* ---- 35/36 sessions ---- */

int sg_q2_trans_create(struct sg_q2_trans **out)
{
    *out = calloc(1, sizeof(**out));
    return *out ? 0 : -ENOMEM;
}

static void level_reset(struct sg_q2_trans *t)
{
    for (int i = 0; i < CS_COUNT; i++) {
        free(t->cs[i]);
        t->cs[i] = NULL;
    }
    memset(t->have_base, 0, sizeof(t->have_base));
    memset(t->frames, 0, sizeof(t->frames));
    t->have = t->extended = false;
    t->nents = 0;
}

void sg_q2_trans_destroy(struct sg_q2_trans *t)
{
    if (!t)
        return;
    level_reset(t);
    free(t);
}

/* ---- reading the parser's fields ---- */

/* (The first letters compared inline: most names differ there, and the
 * chains below ask about many names per field.) */
static inline bool is(const struct sg_field *f, const char *name)
{
    return f->name[0] == name[0] && strcmp(f->name, name) == 0;
}

/* "x0".."x2" -> 0..2 when `f` is named prefix + digit, else -1. */
static inline int idx3(const struct sg_field *f, const char *prefix)
{
    size_t n = strlen(prefix);

    if (f->name[0] != prefix[0] || strncmp(f->name, prefix, n) != 0 || f->name[n] < '0' || f->name[n] > '2' || f->name[n + 1])
        return -1;
    return f->name[n] - '0';
}

/* An entity's header: bits (bits1..bits4) and number; the next field. */
uint32_t sg_q2__ent_header(const struct sg_field *f, uint32_t k, uint32_t n, uint64_t *bits,
                           int *num)
{
    *bits = 0;
    *num = -1;
    if (k >= n || !is(&f[k], "bits"))
        return n + 1;
    *bits = f[k++].raw;
    for (int s = 1; s <= 4 && k < n; s++) {
        char nm[8] = "bits0";
        nm[4] = (char)('0' + s);
        if (!is(&f[k], nm))
            break;
        *bits |= (uint64_t)f[k++].raw << (8 * s);
    }
    if (k >= n || !is(&f[k], "number"))
        return n + 1;
    *num = (int)f[k++].raw;
    return k;
}

static int32_t coord_of(const struct sg_field *f)
{
    return f->num == SG_BMSG_COORD16 ? (int16_t)f->raw : (int32_t)f->raw;
}

/* MSG_ParseDeltaEntity over the fields from k up to the next entity; the next field. */
static uint32_t ent_apply(const struct sg_field *f, uint32_t k, uint32_t n, uint64_t bits,
                          struct es *e)
{
    int i;

    e->event = 0;
    for (; k < n && !is(&f[k], "bits"); k++) {
        const struct sg_field *x = &f[k];
        if (is(x, "model"))
            e->model[0] = (uint16_t)x->raw;
        else if (is(x, "model2"))
            e->model[1] = (uint16_t)x->raw;
        else if (is(x, "model3"))
            e->model[2] = (uint16_t)x->raw;
        else if (is(x, "model4"))
            e->model[3] = (uint16_t)x->raw;
        else if (is(x, "frame") || is(x, "frame16"))
            e->frame = (uint16_t)x->raw;
        else if (is(x, "skin"))
            e->skin = x->raw;
        else if (is(x, "effects"))
            e->effects = x->raw;
        else if (is(x, "renderfx"))
            e->renderfx = x->raw;
        else if ((i = idx3(x, "origin")) >= 0)
            e->origin[i] = coord_of(x);
        else if ((i = idx3(x, "angle")) >= 0)
            e->angles[i] = (uint16_t)(x->num == SG_BMSG_ANGLE8 ? x->raw << 8 : x->raw);
        else if ((i = idx3(x, "oldorigin")) >= 0)
            e->old_origin[i] = coord_of(x);
        else if (is(x, "sound"))
            e->sound = (uint16_t)(x->num == SG_BMSG_U16 ? x->raw & 0x3fff : x->raw);
        else if (is(x, "event"))
            e->event = (uint8_t)x->raw;
        else if (is(x, "solid"))
            e->solid = x->raw;
        /* morefx, alpha, scale, loop sound: extended sessions only */
    }
    (void)bits;
    return k;
}

/* CL_ParseDeltaEntity: a state from `old` and a delta. */
static uint32_t ent_delta(const struct sg_field *f, uint32_t k, uint32_t n, uint64_t bits,
                          int num, const struct es *old, struct es *e)
{
    *e = *old;
    e->number = (uint16_t)num;
    k = ent_apply(f, k, n, bits, e);
    if (!(bits & U_OLDORIGIN) && !(e->renderfx & RF_BEAM))
        memcpy(e->old_origin, old->origin, sizeof(e->old_origin));
    e->renderfx &= RF_SHELL_LITE_GREEN - 1; /* non-extended: high bits masked */
    if (e->renderfx & RF_BEAM)
        e->renderfx &= ~RF_GLOW;
    return k;
}

/* A baseline list (spawnbaseline, gamestate, baselinestream) from field k. */
static void baselines(struct sg_q2_trans *t, const struct sg_field *f, uint32_t k, uint32_t n)
{
    static const struct es null_es;

    while (k < n) {
        uint64_t bits;
        int num;
        struct es e;
        k = sg_q2__ent_header(f, k, n, &bits, &num);
        if (k > n || num <= 0 || num >= MAX_EDICTS)
            return;
        k = ent_delta(f, k, n, bits, num, &null_es, &e);
        t->base[num] = e;
        t->have_base[num] = true;
    }
}

static void set_cs(struct sg_q2_trans *t, uint32_t idx, const struct sg_field *s)
{
    char *c;

    if (idx >= CS_COUNT || s->type != SG_FIELD_STRING)
        return;
    c = malloc(s->len + 1);
    if (!c)
        return;
    memcpy(c, s->ptr, s->len);
    c[s->len] = 0;
    free(t->cs[idx]);
    t->cs[idx] = c;
}

/* MSG_ParseDeltaPlayerstate_Enhanced over the fields from k; the next field. */
static uint32_t ps_apply(const struct sg_field *f, uint32_t k, uint32_t n, struct ps *p)
{
    int i;

    for (; k < n && !is(&f[k], "bits") && !is(&f[k], "clientnum"); k++) {
        const struct sg_field *x = &f[k];
        if (is(x, "pm_type"))
            p->pm_type = (uint8_t)x->raw;
        else if ((i = idx3(x, "origin")) >= 0)
            p->origin[i] = (int16_t)x->raw;
        else if ((i = idx3(x, "velocity")) >= 0)
            p->velocity[i] = (int16_t)x->raw;
        else if (is(x, "pm_time"))
            p->pm_time = (uint16_t)x->raw;
        else if (is(x, "pm_flags"))
            p->pm_flags = (uint16_t)x->raw;
        else if (is(x, "gravity"))
            p->gravity = (int16_t)x->raw;
        else if ((i = idx3(x, "delta_angle")) >= 0)
            p->delta_angles[i] = (int16_t)x->raw;
        else if ((i = idx3(x, "viewoffset")) >= 0)
            p->viewoffset[i] = (int8_t)x->raw;
        else if ((i = idx3(x, "viewangle")) >= 0)
            p->viewangles[i] = (uint16_t)x->raw;
        else if ((i = idx3(x, "kick_angle")) >= 0)
            p->kick[i] = (int8_t)x->raw;
        else if (is(x, "gunindex"))
            p->gunindex = (uint16_t)x->raw;
        else if (is(x, "gunframe"))
            p->gunframe = (uint8_t)x->raw;
        else if ((i = idx3(x, "gunoffset")) >= 0)
            p->gunoffset[i] = (int8_t)x->raw;
        else if ((i = idx3(x, "gunangle")) >= 0)
            p->gunangles[i] = (int8_t)x->raw;
        else if (x->name[0] == 'b' && strncmp(x->name, "blend", 5) == 0 && x->name[5] >= '0' && x->name[5] <= '3')
            p->blend[x->name[5] - '0'] = (uint8_t)x->raw;
        else if (is(x, "fov"))
            p->fov = (uint8_t)x->raw;
        else if (is(x, "rdflags"))
            p->rdflags = (uint8_t)x->raw;
        else if (x->name[0] == 's' && strncmp(x->name, "stat", 4) == 0 && x->name[4] >= '0' && x->name[4] <= '9') {
            int s = atoi(x->name + 4);
            if (s >= 0 && s < 32)
                p->stats[s] = (int16_t)x->raw;
        }
    }
    return k;
}

/* CL_ParseFrame + CL_ParsePacketEntities (35/36). */
static void parse_frame(struct sg_q2_trans *t, const struct sg_q2_parsed *p, uint32_t mi)
{
    const struct sg_fmsg *m = &p->msgs[mi];
    const struct sg_field *f = &p->fields[m->first];
    uint32_t n = m->count, k = 0;
    struct frame fr;
    const struct frame *old = NULL;
    int32_t cur, delta;
    uint32_t off, oldi = 0;
    int oldnum;

    memset(&fr, 0, sizeof(fr));
    if (n < 4 || !is(&f[0], "framebits") || !is(&f[1], "suppress"))
        return;
    cur = (int32_t)(f[0].raw & 0x7ffffffu);
    off = f[0].raw >> 27;
    delta = off == 31 ? -1 : cur - (int32_t)off;
    fr.number = cur;
    fr.suppress = (uint8_t)(f[1].raw & 0x0f);
    if (t->protocol == 36)
        fr.suppress = (f[1].raw & 1) ? 1 : 0; /* FF_SUPPRESSED: Q2PRO's suppress_count 1 */
    k = 2;
    if (!is(&f[k], "areabytes"))
        return;
    fr.areabytes = (uint8_t)(f[k].raw <= 32 ? f[k].raw : 0);
    k++;
    if (k < n && is(&f[k], "areabits")) {
        if (f[k].len <= 32)
            memcpy(fr.areabits, f[k].ptr, f[k].len);
        k++;
    }
    if (delta > 0) {
        old = &t->frames[delta & UPDATE_MASK];
        if (delta == cur || old->number != delta || !old->valid ||
            t->nents - old->first > RING - MAX_EDICTS)
            old = NULL; /* the client cannot rebuild it: not written */
        else
            fr.valid = true;
        if (!fr.valid) {
            t->frames[cur & UPDATE_MASK] = fr;
            goto note;
        }
        fr.ps = old->ps;
    } else {
        fr.valid = true;
    }
    /* the player state */
    if (k >= n || !is(&f[k], "psflags"))
        goto bad;
    k = ps_apply(f, k + 1, n, &fr.ps);
    if (k < n && is(&f[k], "clientnum"))
        k++;
    /* the entities, merged by number with the old frame's */
    fr.first = t->nents;
    oldnum = old && old->num ? t->ring[old->first & RING_MASK].number : MAX_EDICTS;
#define NEXT_OLD()                                                                                 \
    do {                                                                                           \
        oldi++;                                                                                    \
        oldnum = oldi < old->num ? t->ring[(old->first + oldi) & RING_MASK].number : MAX_EDICTS;   \
    } while (0)
#define PUSH(src)                                                                                  \
    do {                                                                                           \
        if (fr.num >= MAX_EDICTS)                                                                  \
            goto bad;                                                                              \
        t->ring[t->nents++ & RING_MASK] = (src);                                                   \
        fr.num++;                                                                                  \
    } while (0)
    for (;;) {
        uint64_t bits;
        int num;
        struct es e;
        k = sg_q2__ent_header(f, k, n, &bits, &num);
        if (k > n || num < 0 || num >= MAX_EDICTS)
            goto bad;
        if (num == 0)
            break;
        while (oldnum < num) {
            struct es same = t->ring[(old->first + oldi) & RING_MASK];
            same.event = 0;
            if (!(same.renderfx & RF_BEAM))
                memcpy(same.old_origin, same.origin, sizeof(same.origin));
            PUSH(same);
            NEXT_OLD();
        }
        if (bits & U_REMOVE) {
            /* the old frame's next entity goes (Q2PRO's client skips it
             * even when its number is not this one) */
            if (!old)
                goto bad;
            NEXT_OLD();
            continue;
        }
        if (oldnum == num) {
            struct es o = t->ring[(old->first + oldi) & RING_MASK];
            k = ent_delta(f, k, n, bits, num, &o, &e);
            PUSH(e);
            NEXT_OLD();
            continue;
        }
        k = ent_delta(f, k, n, bits, num, &t->base[num], &e);
        PUSH(e);
    }
    while (oldnum != MAX_EDICTS) {
        struct es same = t->ring[(old->first + oldi) & RING_MASK];
        same.event = 0;
        if (!(same.renderfx & RF_BEAM))
            memcpy(same.old_origin, same.origin, sizeof(same.origin));
        PUSH(same);
        NEXT_OLD();
    }
#undef NEXT_OLD
#undef PUSH
    t->frames[cur & UPDATE_MASK] = fr;
note:
    if (t->npkt < MAX_PKT_FRAMES) {
        t->pkt[t->npkt].msg = mi;
        t->pkt[t->npkt].number = fr.valid ? cur : -1;
        t->npkt++;
    }
    return;
bad:
    fr.valid = false;
    t->frames[cur & UPDATE_MASK] = fr;
    goto note;
}

/* ---- tracking ---- */

static void serverdata(struct sg_q2_trans *t, const struct sg_q2_parsed *p, uint32_t mi,
                       const struct sg_q2_variant *v)
{
    const struct sg_fmsg *m = &p->msgs[mi];
    const struct sg_field *f = &p->fields[m->first];
    int32_t proto;

    level_reset(t);
    if (m->count < 6)
        return;
    proto = (int32_t)f[0].raw;
    if (proto != 35 && proto != 36)
        return;
    if (v->extended) {
        t->extended = true;
        return;
    }
    t->have = true;
    t->protocol = proto;
    t->longsolid = (v->es & SG_Q2_ES_LONGSOLID) != 0;
    t->servercount = (int32_t)f[1].raw;
    t->playernum = (int16_t)f[4].raw;
    size_t gl = f[3].len < sizeof(t->gamedir) - 1 ? f[3].len : sizeof(t->gamedir) - 1;
    memcpy(t->gamedir, f[3].ptr, gl);
    t->gamedir[gl] = 0;
}

void sg_q2_trans_track(struct sg_q2_trans *t, const struct sg_q2_parsed *p,
                       const struct sg_q2_variant *v)
{
    t->npkt = 0;
    if (p->kex) { /* a rerelease serverdata: its frames have no 34 form here */
        t->extended = true;
        return;
    }
    for (uint32_t i = 0; i < p->nmsgs; i++) {
        const struct sg_fmsg *m = &p->msgs[i];
        const struct sg_field *f = &p->fields[m->first];
        int op = m->op & 0x1f;
        if (m->unparsed)
            break;
        if (op == SG_Q2_SVC_SERVERDATA && (m->op & ~0x1f) == 0) {
            serverdata(t, p, i, v);
            continue;
        }
        if (!t->have)
            continue;
        switch (op) {
        case SG_Q2_SVC_CONFIGSTRING:
            if (m->count == 2)
                set_cs(t, f[0].raw, &f[1]);
            break;
        case SG_Q2_SVC_SPAWNBASELINE:
        case SG_Q2_SVC_BASELINESTREAM:
            baselines(t, f, 0, m->count);
            break;
        case SG_Q2_SVC_GAMESTATE:
        case SG_Q2_SVC_CONFIGSTRINGSTREAM: {
            uint32_t k = 0;
            while (k + 1 < m->count && is(&f[k], "index") && is(&f[k + 1], "string")) {
                set_cs(t, f[k].raw, &f[k + 1]);
                k += 2;
            }
            if (k < m->count && is(&f[k], "index"))
                k++; /* the end index */
            if (op == SG_Q2_SVC_GAMESTATE)
                baselines(t, f, k, m->count);
            break;
        }
        case SG_Q2_SVC_FRAME:
            parse_frame(t, p, i);
            break;
        default:
            break;
        }
    }
}

bool sg_q2_trans_refused(const struct sg_q2_trans *t)
{
    return t->extended;
}

