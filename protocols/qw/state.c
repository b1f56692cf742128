/*
 * What the client knows of the level, tracked from the server's messages
 * as the client got them, so that a recording that starts mid-level (a
 * reload turned it on, a size limit started a new part) can begin with a
 * connection preamble of its own (as ezQuake's `record` writes one):
 *
 *   - the level's state messages, in the order they came: the serverdata,
 *     then what the client got until it entered the game (sound and model
 *     lists, baselines, static entities and sounds, the signon's
 *     stufftexts: fullserverinfo, skins ...), then the later changes of
 *     lasting state (light styles, player names, frags, pings, stats,
 *     serverinfo, setinfo, ...).  A message that a newer one replaces (the
 *     same light style, the same player's frags, the same stat) is
 *     forgotten.  Kept in a bounded pool; a level whose state outgrows it
 *     cannot be joined mid-way (the recording then waits for a new level);
 *   - the entities: the baselines, and the packet entities of the last
 *     UPDATE_BACKUP (64) frames, by server sequence, in a bounded ring (the
 *     client's CL_ParsePacketEntities rules), so any recorded frame can be
 *     written whole (a svc_packetentities from the baselines) when its
 *     delta base is not in the file.
 */
#include "protocols/qw/qw.h"
#include "protocols/qw/bits.h"

#include "protocols/byteorder.h"
#include "protocols/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define POOL_BYTES   (64 * 1024)
#define MAX_ENTRIES  2048
#define MAX_BASELINE 1024 /* entity numbers tracked (ENTITYDBL2 reaches further: untracked) */
#define FRAMES       64   /* UPDATE_BACKUP */
#define PARSE_ENTS   (FRAMES * 32)
#define MAX_FRAME_ENTS 512
#define PREAMBLE_MSG 1400 /* payload bytes of one preamble datagram */

struct qent {
    uint16_t number;
    uint8_t model, frame, colormap, skin, effects, trans;
    float origin[3], angles[3];
};

struct entry {
    uint32_t key; /* 0: kept always; else op << 16 | index: the newest of a key is kept */
    uint32_t at, len;
    bool dead;
};

struct qframe {
    uint32_t seq;
    uint32_t first; /* into ents (mod PARSE_ENTS) */
    uint32_t count;
    bool valid;
};

struct sg_qw_track {
    bool level;    /* a serverdata was seen */
    bool active;   /* the client got its first packet entities */
    bool overflow; /* the level's state outgrew the pool */
    bool ents_bad; /* entities outside what is tracked: no whole frames */
    struct sg_qw_variant var;

    uint8_t pool[POOL_BYTES];
    uint32_t pool_used;
    struct entry entries[MAX_ENTRIES];
    uint32_t nentries;

    struct qent baselines[MAX_BASELINE];
    struct qframe frames[FRAMES];
    struct qent ents[PARSE_ENTS];
    uint32_t ents_next; /* total written into the ring */
};

int sg_qw_track_create(struct sg_qw_track **t)
{
    *t = calloc(1, sizeof(**t));
    return *t ? 0 : -ENOMEM;
}

void sg_qw_track_destroy(struct sg_qw_track *t)
{
    free(t);
}

void sg_qw_track_reset(struct sg_qw_track *t)
{
    t->level = t->active = t->overflow = t->ents_bad = false;
    t->pool_used = 0;
    t->nentries = 0;
    memset(t->baselines, 0, sizeof(t->baselines));
    memset(t->frames, 0, sizeof(t->frames));
    t->ents_next = 0;
}

/* ---- the state messages ---- */

/* Drop the forgotten messages from the pool. */
static void compact(struct sg_qw_track *t)
{
    uint32_t n = 0, used = 0;

    for (uint32_t i = 0; i < t->nentries; i++) {
        struct entry e = t->entries[i];
        if (e.dead)
            continue;
        memmove(t->pool + used, t->pool + e.at, e.len);
        e.at = used;
        used += e.len;
        t->entries[n++] = e;
    }
    t->nentries = n;
    t->pool_used = used;
}

static void keep_msg(struct sg_qw_track *t, uint32_t key, const struct sg_qw_parsed *p, uint32_t i)
{
    uint8_t buf[4096];
    struct sg_bmsg_writer w;
    struct entry *e;

    if (t->overflow)
        return;
    sg_bmsg_writer_init(&w, buf, sizeof(buf));
    sg_qw_write_msg(p, i, &w);
    if (w.overflowed) {
        t->overflow = true;
        return;
    }
    if (key)
        for (uint32_t k = 0; k < t->nentries; k++)
            if (t->entries[k].key == key)
                t->entries[k].dead = true;
    if (t->nentries == MAX_ENTRIES || POOL_BYTES - t->pool_used < w.len)
        compact(t);
    if (t->nentries == MAX_ENTRIES || POOL_BYTES - t->pool_used < w.len) {
        t->overflow = true;
        return;
    }
    e = &t->entries[t->nentries++];
    e->key = key;
    e->at = t->pool_used;
    e->len = (uint32_t)w.len;
    e->dead = false;
    memcpy(t->pool + t->pool_used, buf, w.len);
    t->pool_used += (uint32_t)w.len;
}

/* Which key a lasting state message has (see the header), or -1: not kept. */
static int64_t state_key(const struct sg_qw_track *t, const struct sg_qw_parsed *p,
                         const struct sg_fmsg *m)
{
    uint32_t first = m->count ? p->fields[m->first].raw : 0;
    uint32_t op = (uint32_t)m->op;

    switch (m->op) {
    case 11: /* serverdata */
    case 45: /* modellist */
    case 46: /* soundlist */
    case 60: /* fte_modellistshort */
    case 20: /* spawnstatic */
    case 21: /* fte_spawnstatic2 */
    case 29: /* spawnstaticsound */
    case 51: /* setinfo */
    case 52: /* serverinfo */
        return 0;
    case 9: /* stufftext: the signon's only (fullserverinfo, skins, ...) */
        return t->active ? -1 : 0;
    case 22: /* spawnbaseline */
    case 66: /* fte_spawnbaseline2 */
        return (int64_t)(22u << 16 | (first & (m->op == 66 ? 511u : 0xffffu)));
    case 12: /* lightstyle */
    case 14: /* updatefrags */
    case 36: /* updateping */
    case 37: /* updateentertime */
    case 40: /* updateuserinfo */
    case 53: /* updatepl */
        return (int64_t)(op << 16 | (first & 0xffu));
    case 3:  /* updatestat */
    case 38: /* updatestatlong: the same stat */
        return (int64_t)(3u << 16 | (first & 0xffu));
    case 24: /* setpause */
    case 32: /* cdtrack */
    case 49: /* maxspeed */
    case 50: /* entgravity */
        return (int64_t)(op << 16);
    default:
        return -1;
    }
}

/* ---- entities ---- */

/* Apply a delta's fields [*at, n) (after its word / number) onto `e`; false when untracked. */
static bool apply_delta(const struct sg_field *f, uint32_t n, uint32_t *at, struct qent *e)
{
    uint32_t i = *at;

    /* parse.c's entity field names: the first two letters tell them apart. */
    for (; i < n; i++) {
        const char *name = f[i].name;
        uint32_t raw = f[i].raw;

        switch (name[0]) {
        case 'e':
            if (name[1] == 'n' && name[2] == 't') { /* entity: the next one */
                *at = i;
                return true;
            }
            if (name[1] == 'v') { /* evenmore */
                if (raw & ~(U_FTE_TRANS | U_FTE_YETMORE))
                    return false; /* scale, model / entity number extensions: not tracked */
            } else {
                e->effects = (uint8_t)raw;
            }
            break;
        case 'y': /* yetmore */
            if (raw & 0xffu)
                return false;
            break;
        case 'm':
            if (name[1] == 'o' && name[2] == 'd')
                e->model = (uint8_t)raw;
            break; /* morebits */
        case 'o':
            e->origin[(name[6] - '0') % 3] = sg_bmsg_num_value(f[i].num, raw);
            break;
        case 'a':
            e->angles[(name[5] - '0') % 3] = sg_bmsg_num_value(f[i].num, raw);
            break;
        case 'f':
            e->frame = (uint8_t)raw;
            break;
        case 'c':
            e->colormap = (uint8_t)raw;
            break;
        case 's':
            e->skin = (uint8_t)raw;
            break;
        case 't':
            e->trans = (uint8_t)raw;
            break;
        default:
            break;
        }
    }
    *at = i;
    return true;
}

static void baseline(struct sg_qw_track *t, const struct sg_qw_parsed *p, const struct sg_fmsg *m)
{
    uint32_t num, at = 1;
    struct qent e;

    if (!m->count)
        return;
    num = p->fields[m->first].raw & (m->op == 66 ? 511u : 0xffffu);
    if (num >= MAX_BASELINE) {
        t->ents_bad = true;
        return;
    }
    memset(&e, 0, sizeof(e));
    if (!apply_delta(p->fields + m->first, m->count, &at, &e)) {
        t->ents_bad = true;
        return;
    }
    e.number = (uint16_t)num;
    t->baselines[num] = e;
}

static const struct qframe *find_frame(const struct sg_qw_track *t, uint32_t seq)
{
    const struct qframe *fr = &t->frames[seq % FRAMES];

    if (!fr->valid || fr->seq != seq || t->ents_next - fr->first > PARSE_ENTS - MAX_FRAME_ENTS)
        return NULL;
    return fr;
}

/* A frame whose sequence has this low byte among the last ones (the delta's `from`). */
static const struct qframe *from_frame(const struct sg_qw_track *t, uint32_t seq, uint32_t from)
{
    for (uint32_t back = 1; back < FRAMES; back++)
        if (((seq - back) & 0xffu) == (from & 0xffu))
            return find_frame(t, seq - back);
    return NULL;
}

static struct qent *ent_at(struct sg_qw_track *t, uint32_t i)
{
    return &t->ents[i % PARSE_ENTS];
}

/* CL_ParsePacketEntities into the frame of `seq`. */
static void packet_entities(struct sg_qw_track *t, const struct sg_qw_parsed *p,
                            const struct sg_fmsg *m, uint32_t seq)
{
    const struct sg_field *f = p->fields + m->first;
    struct qframe *fr = &t->frames[seq % FRAMES];
    const struct qframe *old = NULL;
    uint32_t at = 0, oi = 0, on = 0, count = 0, first = t->ents_next;
    bool delta = m->op == 48;

    fr->valid = false;
    if (t->ents_bad)
        return;
    if (delta) {
        old = m->count ? from_frame(t, seq, f[0].raw) : NULL;
        if (!old)
            return; /* the base is gone: this frame cannot be known either */
        on = old->count;
        at = 1;
    }
    while (at < m->count) {
        uint32_t word = f[at].raw, num = word & 511u;
        struct qent e;

        at++;
        if (word == 0)
            break;
        /* Older entities before this number go on unchanged. */
        while (oi < on && ent_at(t, old->first + oi)->number < num) {
            if (count == MAX_FRAME_ENTS)
                return;
            *ent_at(t, first + count++) = *ent_at(t, old->first + oi++);
        }
        if (word & U_REMOVE) {
            if (oi < on && ent_at(t, old->first + oi)->number == num)
                oi++;
            /* skip its fields (a remove carries none but its bits) */
            memset(&e, 0, sizeof(e));
            apply_delta(f, m->count, &at, &e);
            continue;
        }
        if (oi < on && ent_at(t, old->first + oi)->number == num)
            e = *ent_at(t, old->first + oi++);
        else if (num < MAX_BASELINE)
            e = t->baselines[num];
        else
            return;
        if (!apply_delta(f, m->count, &at, &e))
            return; /* this frame (and those on it) unknown */
        e.number = (uint16_t)num;
        if (count == MAX_FRAME_ENTS)
            return;
        *ent_at(t, first + count++) = e;
    }
    while (oi < on) {
        if (count == MAX_FRAME_ENTS)
            return;
        *ent_at(t, first + count++) = *ent_at(t, old->first + oi++);
    }
    fr->seq = seq;
    fr->first = first;
    fr->count = count;
    fr->valid = true;
    t->ents_next = first + count;
}

/* ---- learning ---- */

void sg_qw_track_server(struct sg_qw_track *t, const struct sg_qw_variant *v,
                        const struct sg_qw_parsed *p, uint32_t seq)
{
    for (uint32_t i = 0; i < p->nmsgs; i++) {
        const struct sg_fmsg *m = &p->msgs[i];
        int64_t key;

        if (m->unparsed)
            continue;
        if (m->op == 11) { /* a new level: start over */
            sg_qw_track_reset(t);
            t->level = true;
        }
        if (!t->level)
            continue;
        if (m->op == 47 || m->op == 48) {
            t->active = true;
            packet_entities(t, p, m, seq);
            continue;
        }
        if (m->op == 22 || m->op == 66)
            baseline(t, p, m);
        key = state_key(t, p, m);
        if (key >= 0)
            keep_msg(t, (uint32_t)key, p, i);
    }
    t->var = *v;
}

bool sg_qw_track_ready(const struct sg_qw_track *t)
{
    return t->level && t->active && !t->overflow && t->nentries > 0;
}

bool sg_qw_track_has_frame(const struct sg_qw_track *t, uint32_t seq)
{
    return !t->ents_bad && find_frame(t, seq) != NULL;
}

/* ---- writing ---- */

/* One entity from its baseline, always (MSG_WriteDeltaEntity with force). */
static void write_entity(const struct sg_qw_track *t, const struct qent *e,
                         struct sg_bmsg_writer *w)
{
    const struct qent *b = &t->baselines[e->number];
    const struct sg_qw_variant *v = &t->var;
    uint32_t bits = 0, more = 0;

    for (int i = 0; i < 3; i++)
        if (e->origin[i] != b->origin[i])
            bits |= U_ORIGIN1 << i;
    if (e->angles[0] != b->angles[0])
        bits |= U_ANGLE1;
    if (e->angles[1] != b->angles[1])
        bits |= U_ANGLE2;
    if (e->angles[2] != b->angles[2])
        bits |= U_ANGLE3;
    if (e->colormap != b->colormap)
        bits |= U_COLORMAP;
    if (e->skin != b->skin)
        bits |= U_SKIN;
    if (e->frame != b->frame)
        bits |= U_FRAME;
    if (e->effects != b->effects)
        bits |= U_EFFECTS;
    if (e->model != b->model)
        bits |= U_MODEL;
    if (v->trans && e->trans != b->trans)
        more |= U_FTE_TRANS;
    if (more)
        bits |= U_EVENMORE;
    if (bits & 0xffu)
        bits |= U_MOREBITS;
    sg_bmsg_write_num(w, SG_BMSG_U16, e->number | (bits & 0xfe00u));
    if (bits & U_MOREBITS)
        sg_bmsg_write_u8(w, bits & 0xffu);
    if (bits & U_EVENMORE)
        sg_bmsg_write_u8(w, more);
    if (bits & U_MODEL)
        sg_bmsg_write_u8(w, e->model);
    if (bits & U_FRAME)
        sg_bmsg_write_u8(w, e->frame);
    if (bits & U_COLORMAP)
        sg_bmsg_write_u8(w, e->colormap);
    if (bits & U_SKIN)
        sg_bmsg_write_u8(w, e->skin);
    if (bits & U_EFFECTS)
        sg_bmsg_write_u8(w, e->effects);
    for (int i = 0; i < 3; i++) {
        static const uint32_t abit[3] = {U_ANGLE1, U_ANGLE2, U_ANGLE3};
        if (bits & (U_ORIGIN1 << i))
            sg_bmsg_write_num(w, v->ent_origin, sg_bmsg_num_quantize(v->ent_origin, e->origin[i]));
        if (bits & abit[i])
            sg_bmsg_write_num(w, v->angle, sg_bmsg_num_quantize(v->angle, e->angles[i]));
    }
    if (more & U_FTE_TRANS)
        sg_bmsg_write_u8(w, e->trans);
}

int sg_qw_track_write_frame(const struct sg_qw_track *t, uint32_t seq, struct sg_bmsg_writer *w)
{
    const struct qframe *fr = t->ents_bad ? NULL : find_frame(t, seq);

    if (!fr)
        return SG_E_STATE;
    sg_bmsg_write_u8(w, 47); /* svc_packetentities: a whole frame */
    for (uint32_t i = 0; i < fr->count; i++)
        write_entity(t, &t->ents[(fr->first + i) % PARSE_ENTS], w);
    sg_bmsg_write_num(w, SG_BMSG_U16, 0);
    return w->overflowed ? SG_E_OVERFLOW : 0;
}

int sg_qw_track_preamble(const struct sg_qw_track *t, struct sg_qw_recorder *r, uint32_t seq)
{
    uint8_t buf[8 + 4096 + PREAMBLE_MSG];
    uint32_t n = 0, pseq = 1;
    int err;

    (void)seq;
    /* The state messages, packed into datagrams numbered 1, 2, ... as ezQuake's own. */
    for (uint32_t i = 0; i <= t->nentries; i++) {
        const struct entry *e = i < t->nentries ? &t->entries[i] : NULL;

        if (e && e->dead)
            continue;
        if (n > 8 && (!e || n + e->len > 8 + PREAMBLE_MSG)) {
            sg_put_le32(buf, pseq);
            sg_put_le32(buf + 4, pseq);
            err = sg_qw_rec_read(r, buf, n);
            if (err < 0)
                return err;
            pseq++;
            n = 0;
        }
        if (!e)
            break;
        if (n == 0)
            n = 8;
        memcpy(buf + n, t->pool + e->at, e->len);
        n += e->len;
    }
    return 0;
}

