/*
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
 *
 * Writing: a demo starts at the first valid frame with a preamble from
 * the state (serverdata with protocol 34 and attractloop 1, every
 * non-empty configstring, every baseline in 34 form, `precache`); then
 * one block per accepted server message (continued in another block where
 * it would pass the 1390 bytes every player reads, SG_Q2_DEMO_BLOCK; a
 * message larger than that alone is left out, as Q2PRO's client does), in
 * which:
 *  - svc_frame is written as a 34 frame numbered by the demo (1, 2, ...:
 *    Q2PRO's FRAME_CUR), delta from the frame written before (or from
 *    nothing for the first), player state and entities delta-coded with
 *    34's encodings; an invalid frame is left out;
 *  - svc_spawnbaseline is written again in 34 form;
 *  - svc_zpacket is replaced by its inflated messages (each by these rules);
 *  - left out: svc_serverdata (written by the preamble at a level start),
 *    svc_gamestate / svc_configstringstream / svc_baselinestream (the
 *    preamble holds them), svc_setting, svc_download / svc_zdownload (as
 *    Q2PRO's client), svc_disconnect / svc_reconnect (a client never
 *    records them), messages a filter dropped, and an unparsed message;
 *  - the sign-on's stufftexts as the client's own demo has them
 *    (sg_q2_demo_stufftext: plain `precache`, no `cmd configstrings`);
 *  - everything else (prints, sounds, temp entities, muzzle flashes,
 *    configstrings, layouts, inventory, stufftext, nop) is copied from its
 *    fields, which have the same layout in 34 for a non-extended session.
 * Q2PRO's extended sessions (larger limits, protocol 3434+ demos) are not
 * transcoded: recording them is refused.
 */
#include "protocols/q2/q2.h"
#include "protocols/q2/bits.h"

#include "protocols/byteorder.h"
#include "protocols/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CS_COUNT       2080 /* non-extended configstrings */
#define CS_NAME        0
#define CS_MAXCLIENTS  30
#define MAX_EDICTS     1024
#define UPDATE_BACKUP  16
#define UPDATE_MASK    (UPDATE_BACKUP - 1)
#define RING           4096 /* entity states of the kept frames */
#define RING_MASK      (RING - 1)
#define MAX_PKT_FRAMES 8    /* frames remembered per server message */
#define BLOCK_SOFT     SG_Q2_DEMO_BLOCK /* what every player reads in a block */
#define PACKED_BSP     31

#define RF_FRAMELERP        (1u << 6)
#define RF_BEAM             (1u << 7)
#define RF_GLOW             (1u << 9)
#define RF_SHELL_LITE_GREEN (1u << 19)

/* U_* and PS_*: protocols/q2/bits.h */

struct es {
    uint16_t number;
    int32_t origin[3], old_origin[3]; /* coordinates * 8 */
    uint16_t angles[3];               /* 16-bit angles (an 8-bit one << 8) */
    uint16_t model[4];
    uint16_t frame;
    uint32_t skin, effects, renderfx, solid;
    uint16_t sound;
    uint8_t event;
};

struct ps {
    uint8_t pm_type;
    int32_t origin[3], velocity[3];
    uint16_t pm_time, pm_flags;
    int16_t gravity, delta_angles[3];
    int8_t viewoffset[3], kick[3], gunoffset[3], gunangles[3];
    uint16_t viewangles[3];
    uint16_t gunindex;
    uint8_t gunframe, blend[4], fov, rdflags;
    int16_t stats[32];
};

struct frame {
    bool valid;
    int32_t number;
    uint8_t suppress; /* the 34 suppress count */
    uint8_t areabytes, areabits[32];
    struct ps ps;
    uint32_t first, num; /* entity states in the ring */
};

struct sg_q2_trans {
    /* the level */
    bool have;      /* a non-extended 35/36 serverdata was seen */
    bool extended;  /* an extended one: refused */
    bool longsolid; /* 32-bit solids on the wire (repacked to 16 bits) */
    int protocol;
    int32_t servercount, playernum;
    char gamedir[64];
    char *cs[CS_COUNT];
    bool have_base[MAX_EDICTS];
    struct es base[MAX_EDICTS];
    struct frame frames[UPDATE_BACKUP];
    struct es ring[RING];
    uint32_t nents;
    /* the frames of the message tracked last: its message index, frame slot */
    struct {
        uint32_t msg;
        int32_t number;
    } pkt[MAX_PKT_FRAMES];
    unsigned npkt;
    /* the demo being written */
    FILE *out;
    bool started;
    bool have_last;
    struct ps last_ps;
    struct es last_ents[MAX_EDICTS];
    uint32_t last_num;
    int32_t frames_written;
    uint32_t frames_dropped, others_dropped;
    uint8_t block[SG_Q2_MAX_MSGLEN];
    uint8_t one[SG_Q2_MAX_MSGLEN]; /* one message, before it joins the block */
};

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
static uint32_t ent_header(const struct sg_field *f, uint32_t k, uint32_t n, uint64_t *bits,
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
        k = ent_header(f, k, n, &bits, &num);
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
        k = ent_header(f, k, n, &bits, &num);
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

/* ---- a server's stufftext in a demo ---- */

/* The next word of text[*at..len) (spaces and tabs before it skipped). */
static size_t next_word(const uint8_t *text, size_t len, size_t *at, const uint8_t **word)
{
    size_t n = 0;

    while (*at < len && (text[*at] == ' ' || text[*at] == '\t'))
        (*at)++;
    *word = text + *at;
    while (*at < len && text[*at] != ' ' && text[*at] != '\t' && text[*at] != '\n') {
        (*at)++;
        n++;
    }
    return n;
}

static bool word_is(const uint8_t *w, size_t n, const char *name)
{
    size_t k = strlen(name);

    if (n != k)
        return false;
    for (size_t i = 0; i < k; i++)
        if ((w[i] | 0x20) != name[i]) /* commands are matched without case */
            return false;
    return true;
}

/*
 * The sign-on's stufftexts, as a client's own demo holds them: the
 * client's `record` writes the plain `precache` (no spawn count), and a
 * player takes the spawn count's form for a connection's (Yamagi Quake II
 * checks and downloads every missing file first, over a demo: the map is
 * never loaded).  `cmd configstrings|baselines <spawncount> <n>` asks the
 * server for the rest of the sign-on: played back, the request goes to the
 * player's local demo server, which takes another spawn count for a new
 * connection and restarts the demo.  Only a text that is that one
 * command (one line, no `;`) is recognised.
 */
enum sg_q2_demo_stuff sg_q2_demo_stufftext(const uint8_t *text, size_t len)
{
    const uint8_t *w;
    size_t at = 0, n;

    for (size_t i = 0; i < len; i++)
        if (text[i] == ';' || text[i] == '"' || (text[i] == '\n' && i + 1 != len) || !text[i])
            return SG_Q2_STUFF_KEEP;
    n = next_word(text, len, &at, &w);
    if (word_is(w, n, "precache"))
        return next_word(text, len, &at, &w) ? SG_Q2_STUFF_PRECACHE : SG_Q2_STUFF_KEEP;
    if (!word_is(w, n, "cmd"))
        return SG_Q2_STUFF_KEEP;
    n = next_word(text, len, &at, &w);
    return word_is(w, n, "configstrings") || word_is(w, n, "baselines") ? SG_Q2_STUFF_LEAVE
                                                                        : SG_Q2_STUFF_KEEP;
}

/* ---- writing 34 ---- */

/* CL_PackEntity for a non-extended demo: a 32-bit solid back to 16 bits. */
static uint32_t solid16(const struct sg_q2_trans *t, uint32_t s)
{
    int x, zd, zu;

    if (!t->longsolid || !s || s == PACKED_BSP)
        return s;
    x = (int)(s & 255) / 8;
    zd = (int)((s >> 8) & 255) / 8;
    zu = ((int)((s >> 16) & 65535) - 32768 + 32) / 8;
    x = x < 1 ? 1 : x > 31 ? 31 : x;
    zd = zd < 1 ? 1 : zd > 31 ? 31 : zd;
    zu = zu < 1 ? 1 : zu > 63 ? 63 : zu;
    return (uint32_t)(zu << 10 | zd << 5 | x);
}

/* MSG_WriteDeltaEntity with 34's flags (no extensions, the 0xffff8000 mask). */
static void write_entity(const struct sg_q2_trans *t, const struct es *from, const struct es *to,
                         bool force, bool newent, struct sg_bmsg_writer *w)
{
    static const struct es null_es;
    const uint32_t mask = 0xffff8000u;
    uint32_t bits = 0, fsolid, tsolid;

    if (!to) {
        bits = U_REMOVE;
        if (from->number & 0xff00)
            bits |= U_NUMBER16 | U_MOREBITS1;
        sg_bmsg_write_u8(w, bits & 255);
        if (bits & 0xff00)
            sg_bmsg_write_u8(w, (bits >> 8) & 255);
        if (bits & U_NUMBER16)
            sg_bmsg_write_u16(w, from->number);
        else
            sg_bmsg_write_u8(w, from->number);
        return;
    }
    if (!from)
        from = &null_es;
    fsolid = solid16(t, from->solid);
    tsolid = solid16(t, to->solid);
    if (to->origin[0] != from->origin[0])
        bits |= U_ORIGIN1;
    if (to->origin[1] != from->origin[1])
        bits |= U_ORIGIN2;
    if (to->origin[2] != from->origin[2])
        bits |= U_ORIGIN3;
    if ((to->angles[0] ^ from->angles[0]) & 0xff00)
        bits |= U_ANGLE1;
    if ((to->angles[1] ^ from->angles[1]) & 0xff00)
        bits |= U_ANGLE2;
    if ((to->angles[2] ^ from->angles[2]) & 0xff00)
        bits |= U_ANGLE3;
    if (newent && memcmp(to->old_origin, from->origin, sizeof(to->old_origin)) != 0)
        bits |= U_OLDORIGIN;
    if (to->skin != from->skin)
        bits |= (to->skin & mask) ? U_SKIN8 | U_SKIN16 : (to->skin & 0xff00) ? U_SKIN16 : U_SKIN8;
    if (to->frame != from->frame)
        bits |= (to->frame & 0xff00) ? U_FRAME16 : U_FRAME8;
    if (to->effects != from->effects)
        bits |= (to->effects & mask)     ? U_EFFECTS8 | U_EFFECTS16
                : (to->effects & 0xff00) ? U_EFFECTS16
                                         : U_EFFECTS8;
    if (to->renderfx != from->renderfx)
        bits |= (to->renderfx & mask)     ? U_RENDERFX8 | U_RENDERFX16
                : (to->renderfx & 0xff00) ? U_RENDERFX16
                                          : U_RENDERFX8;
    if (tsolid != fsolid)
        bits |= U_SOLID;
    if (to->event)
        bits |= U_EVENT;
    if (to->model[0] != from->model[0])
        bits |= U_MODEL;
    if (to->model[1] != from->model[1])
        bits |= U_MODEL2;
    if (to->model[2] != from->model[2])
        bits |= U_MODEL3;
    if (to->model[3] != from->model[3])
        bits |= U_MODEL4;
    if (to->sound != from->sound)
        bits |= U_SOUND;
    if (to->renderfx & RF_FRAMELERP) {
        if (memcmp(to->old_origin, from->origin, sizeof(to->old_origin)) != 0)
            bits |= U_OLDORIGIN;
    } else if (to->renderfx & RF_BEAM) {
        bits |= U_OLDORIGIN;
    }
    if (!bits && !force)
        return;
    if (to->number & 0xff00)
        bits |= U_NUMBER16;
    if (bits & 0xff000000u)
        bits |= U_MOREBITS3 | U_MOREBITS2 | U_MOREBITS1;
    else if (bits & 0x00ff0000u)
        bits |= U_MOREBITS2 | U_MOREBITS1;
    else if (bits & 0x0000ff00u)
        bits |= U_MOREBITS1;
    sg_bmsg_write_u8(w, bits & 255);
    if (bits & U_MOREBITS1)
        sg_bmsg_write_u8(w, (bits >> 8) & 255);
    if (bits & U_MOREBITS2)
        sg_bmsg_write_u8(w, (bits >> 16) & 255);
    if (bits & U_MOREBITS3)
        sg_bmsg_write_u8(w, (bits >> 24) & 255);
    if (bits & U_NUMBER16)
        sg_bmsg_write_u16(w, to->number);
    else
        sg_bmsg_write_u8(w, to->number);
    for (int i = 0; i < 4; i++)
        if (bits & (i ? U_MODEL2 << (i - 1) : U_MODEL))
            sg_bmsg_write_u8(w, to->model[i] & 255);
    if (bits & U_FRAME8)
        sg_bmsg_write_u8(w, to->frame & 255);
    else if (bits & U_FRAME16)
        sg_bmsg_write_u16(w, to->frame);
#define SIZED(v, b8, b16)                                                                          \
    do {                                                                                           \
        if ((bits & ((b8) | (b16))) == ((b8) | (b16)))                                             \
            sg_bmsg_write_u32(w, (v));                                                             \
        else if (bits & (b8))                                                                      \
            sg_bmsg_write_u8(w, (v)&255);                                                          \
        else if (bits & (b16))                                                                     \
            sg_bmsg_write_u16(w, (v)&0xffff);                                                      \
    } while (0)
    SIZED(to->skin, U_SKIN8, U_SKIN16);
    SIZED(to->effects, U_EFFECTS8, U_EFFECTS16);
    SIZED(to->renderfx, U_RENDERFX8, U_RENDERFX16);
#undef SIZED
    if (bits & U_ORIGIN1)
        sg_bmsg_write_u16(w, (uint16_t)to->origin[0]);
    if (bits & U_ORIGIN2)
        sg_bmsg_write_u16(w, (uint16_t)to->origin[1]);
    if (bits & U_ORIGIN3)
        sg_bmsg_write_u16(w, (uint16_t)to->origin[2]);
    if (bits & U_ANGLE1)
        sg_bmsg_write_u8(w, to->angles[0] >> 8);
    if (bits & U_ANGLE2)
        sg_bmsg_write_u8(w, to->angles[1] >> 8);
    if (bits & U_ANGLE3)
        sg_bmsg_write_u8(w, to->angles[2] >> 8);
    if (bits & U_OLDORIGIN)
        for (int i = 0; i < 3; i++)
            sg_bmsg_write_u16(w, (uint16_t)to->old_origin[i]);
    if (bits & U_SOUND)
        sg_bmsg_write_u8(w, to->sound & 255);
    if (bits & U_EVENT)
        sg_bmsg_write_u8(w, to->event);
    if (bits & U_SOLID)
        sg_bmsg_write_u16(w, tsolid & 0xffff);
}

/* MSG_WriteDeltaPlayerstate_Default (34). */
static void write_ps(const struct ps *from, const struct ps *to, struct sg_bmsg_writer *w)
{
    static const struct ps null_ps;
    uint32_t pf = 0, statbits = 0;

    if (!from)
        from = &null_ps;
    if (to->pm_type != from->pm_type)
        pf |= PS_M_TYPE;
    if (memcmp(to->origin, from->origin, sizeof(to->origin)))
        pf |= PS_M_ORIGIN;
    if (memcmp(to->velocity, from->velocity, sizeof(to->velocity)))
        pf |= PS_M_VELOCITY;
    if (to->pm_time != from->pm_time)
        pf |= PS_M_TIME;
    if (to->pm_flags != from->pm_flags)
        pf |= PS_M_FLAGS;
    if (to->gravity != from->gravity)
        pf |= PS_M_GRAVITY;
    if (memcmp(to->delta_angles, from->delta_angles, sizeof(to->delta_angles)))
        pf |= PS_M_DELTA_ANGLES;
    if (memcmp(to->viewoffset, from->viewoffset, 3))
        pf |= PS_VIEWOFFSET;
    if (memcmp(to->viewangles, from->viewangles, sizeof(to->viewangles)))
        pf |= PS_VIEWANGLES;
    if (memcmp(to->kick, from->kick, 3))
        pf |= PS_KICKANGLES;
    if (memcmp(to->blend, from->blend, 4))
        pf |= PS_BLEND;
    if (to->fov != from->fov)
        pf |= PS_FOV;
    if (to->rdflags != from->rdflags)
        pf |= PS_RDFLAGS;
    if (to->gunframe != from->gunframe || memcmp(to->gunoffset, from->gunoffset, 3) ||
        memcmp(to->gunangles, from->gunangles, 3))
        pf |= PS_WEAPONFRAME;
    if (to->gunindex != from->gunindex)
        pf |= PS_WEAPONINDEX;
    sg_bmsg_write_u16(w, pf);
    if (pf & PS_M_TYPE)
        sg_bmsg_write_u8(w, to->pm_type);
    if (pf & PS_M_ORIGIN)
        for (int i = 0; i < 3; i++)
            sg_bmsg_write_u16(w, (uint16_t)to->origin[i]);
    if (pf & PS_M_VELOCITY)
        for (int i = 0; i < 3; i++)
            sg_bmsg_write_u16(w, (uint16_t)to->velocity[i]);
    if (pf & PS_M_TIME)
        sg_bmsg_write_u8(w, to->pm_time & 255);
    if (pf & PS_M_FLAGS)
        sg_bmsg_write_u8(w, to->pm_flags & 255);
    if (pf & PS_M_GRAVITY)
        sg_bmsg_write_u16(w, (uint16_t)to->gravity);
    if (pf & PS_M_DELTA_ANGLES)
        for (int i = 0; i < 3; i++)
            sg_bmsg_write_u16(w, (uint16_t)to->delta_angles[i]);
    if (pf & PS_VIEWOFFSET)
        sg_bmsg_write_data(w, to->viewoffset, 3);
    if (pf & PS_VIEWANGLES)
        for (int i = 0; i < 3; i++)
            sg_bmsg_write_u16(w, to->viewangles[i]);
    if (pf & PS_KICKANGLES)
        sg_bmsg_write_data(w, to->kick, 3);
    if (pf & PS_WEAPONINDEX)
        sg_bmsg_write_u8(w, to->gunindex & 255);
    if (pf & PS_WEAPONFRAME) {
        sg_bmsg_write_u8(w, to->gunframe);
        sg_bmsg_write_data(w, to->gunoffset, 3);
        sg_bmsg_write_data(w, to->gunangles, 3);
    }
    if (pf & PS_BLEND)
        sg_bmsg_write_data(w, to->blend, 4);
    if (pf & PS_FOV)
        sg_bmsg_write_u8(w, to->fov);
    if (pf & PS_RDFLAGS)
        sg_bmsg_write_u8(w, to->rdflags);
    for (int i = 0; i < 32; i++)
        if (to->stats[i] != from->stats[i])
            statbits |= 1u << i;
    sg_bmsg_write_u32(w, statbits);
    for (int i = 0; i < 32; i++)
        if (statbits & (1u << i))
            sg_bmsg_write_u16(w, (uint16_t)to->stats[i]);
}

static int maxclients(const struct sg_q2_trans *t)
{
    return t->cs[CS_MAXCLIENTS] ? atoi(t->cs[CS_MAXCLIENTS]) : 0;
}

/* emit_delta_frame: frame `fr` as a 34 svc_frame, from the frame written last. */
static void write_frame(struct sg_q2_trans *t, const struct frame *fr, struct sg_bmsg_writer *w)
{
    const struct es *to = NULL;
    uint32_t oi = 0, ni = 0, on = t->have_last ? t->last_num : 0;
    int mc = maxclients(t);

    sg_bmsg_write_u8(w, SG_Q2_SVC_FRAME);
    sg_bmsg_write_s32(w, t->frames_written + 1);
    sg_bmsg_write_s32(w, t->have_last ? t->frames_written : -1);
    sg_bmsg_write_u8(w, fr->suppress);
    sg_bmsg_write_u8(w, fr->areabytes);
    sg_bmsg_write_data(w, fr->areabits, fr->areabytes);
    sg_bmsg_write_u8(w, SG_Q2_SVC_PLAYERINFO);
    write_ps(t->have_last ? &t->last_ps : NULL, &fr->ps, w);
    sg_bmsg_write_u8(w, SG_Q2_SVC_PACKETENTITIES);
    while (ni < fr->num || oi < on) {
        int newnum = MAX_EDICTS, oldnum = MAX_EDICTS;
        const struct es *from = NULL;
        if (ni < fr->num) {
            to = &t->ring[(fr->first + ni) & RING_MASK];
            newnum = to->number;
        }
        if (oi < on) {
            from = &t->last_ents[oi];
            oldnum = from->number;
        }
        if (newnum == oldnum) {
            write_entity(t, from, to, false, newnum <= mc, w);
            oi++;
            ni++;
        } else if (newnum < oldnum) {
            write_entity(t, &t->base[newnum], to, true, true, w);
            ni++;
        } else {
            write_entity(t, from, NULL, true, false, w);
            oi++;
        }
    }
    sg_bmsg_write_u16(w, 0);
}

/* The frame is written: it is the base of the next. */
static void frame_written(struct sg_q2_trans *t, const struct frame *fr)
{
    t->last_ps = fr->ps;
    t->last_num = fr->num;
    for (uint32_t i = 0; i < fr->num; i++)
        t->last_ents[i] = t->ring[(fr->first + i) & RING_MASK];
    t->have_last = true;
    t->frames_written++;
}

static int put_block(FILE *out, const uint8_t *d, size_t n)
{
    uint8_t h[4];

    sg_put_le32(h, (uint32_t)n);
    return fwrite(h, 1, 4, out) == 4 && fwrite(d, 1, n, out) == n ? 0 : sg_write_error();
}

/* CL_Record_f's startup blocks, from the state. */
static int write_preamble(struct sg_q2_trans *t, FILE *out)
{
    uint8_t *one = t->one;
    struct sg_bmsg_writer w;
    const char *name = t->cs[CS_NAME] ? t->cs[CS_NAME] : "";
    int err;

    sg_bmsg_writer_init(&w, t->block, BLOCK_SOFT);
    sg_bmsg_write_u8(&w, SG_Q2_SVC_SERVERDATA);
    sg_bmsg_write_s32(&w, 34);
    sg_bmsg_write_s32(&w, t->servercount);
    sg_bmsg_write_u8(&w, 1); /* demos are attract loops */
    sg_bmsg_write_data(&w, t->gamedir, strlen(t->gamedir) + 1);
    sg_bmsg_write_u16(&w, (uint16_t)t->playernum);
    sg_bmsg_write_data(&w, name, strlen(name) + 1);
    for (int i = 0; i < CS_COUNT + MAX_EDICTS + 1; i++) {
        struct sg_bmsg_writer m;
        sg_bmsg_writer_init(&m, one, BLOCK_SOFT);
        if (i < CS_COUNT) {
            if (!t->cs[i] || !t->cs[i][0])
                continue;
            sg_bmsg_write_u8(&m, SG_Q2_SVC_CONFIGSTRING);
            sg_bmsg_write_u16(&m, (unsigned)i);
            sg_bmsg_write_data(&m, t->cs[i], strlen(t->cs[i]) + 1);
        } else if (i < CS_COUNT + MAX_EDICTS) {
            int k = i - CS_COUNT;
            if (!t->have_base[k])
                continue;
            sg_bmsg_write_u8(&m, SG_Q2_SVC_SPAWNBASELINE);
            write_entity(t, NULL, &t->base[k], true, false, &m);
        } else {
            sg_bmsg_write_u8(&m, SG_Q2_SVC_STUFFTEXT);
            sg_bmsg_write_data(&m, "precache\n", 10);
        }
        if (m.overflowed)
            continue;
        if (w.len + m.len > BLOCK_SOFT) {
            if ((err = put_block(out, t->block, w.len)) < 0)
                return err;
            sg_bmsg_writer_init(&w, t->block, BLOCK_SOFT);
        }
        sg_bmsg_write_data(&w, one, m.len);
    }
    return put_block(out, t->block, w.len);
}

/* The frame parsed from message `mi` of the message tracked last, or NULL. */
static const struct frame *frame_of(const struct sg_q2_trans *t, uint32_t mi)
{
    for (unsigned i = 0; i < t->npkt; i++)
        if (t->pkt[i].msg == mi) {
            const struct frame *fr;
            if (t->pkt[i].number < 0)
                return NULL;
            fr = &t->frames[t->pkt[i].number & UPDATE_MASK];
            return fr->valid && fr->number == t->pkt[i].number ? fr : NULL;
        }
    return NULL;
}

/* One message written alone from its fields (a zpacket's message too). */
static void copy_msg(const struct sg_q2_parsed *p, uint32_t i, struct sg_bmsg_writer *w)
{
    struct sg_q2_parsed one = *p;
    struct sg_fmsg m = p->msgs[i];

    m.parent = -1;
    one.msgs = &m;
    one.nmsgs = 1;
    sg_q2_write(&one, NULL, w);
}

int sg_q2_trans_record(struct sg_q2_trans *t, const struct sg_q2_parsed *p, const bool *dropped,
                       FILE *out)
{
    struct sg_bmsg_writer w;
    bool any_frame = false;
    int err, written = 0;

    if (t->extended)
        return SG_E_UNSUPPORTED;
    if (out != t->out) {
        t->out = out;
        t->started = false;
    }
    if (!t->have)
        return 0;
    if (!t->started) {
        for (unsigned i = 0; i < t->npkt && !any_frame; i++)
            any_frame = frame_of(t, t->pkt[i].msg) != NULL;
        if (!any_frame)
            return 0; /* a demo starts at a frame the player can read */
        if ((err = write_preamble(t, out)) < 0)
            return err;
        t->started = true;
        t->have_last = false;
        t->frames_written = 0;
    }
    sg_bmsg_writer_init(&w, t->block, sizeof(t->block));
    for (uint32_t i = 0; i < p->nmsgs; i++) {
        const struct sg_fmsg *m = &p->msgs[i];
        const struct frame *fr = NULL;
        struct sg_bmsg_writer mw;
        int op = m->op & 0x1f;
        if (m->unparsed)
            break;
        if ((dropped && dropped[i]) || (m->parent >= 0 && dropped && dropped[m->parent]))
            continue;
        sg_bmsg_writer_init(&mw, t->one, sizeof(t->one));
        switch (op) {
        case SG_Q2_SVC_FRAME:
            fr = frame_of(t, i);
            if (fr)
                write_frame(t, fr, &mw);
            break;
        case SG_Q2_SVC_SPAWNBASELINE: {
            uint64_t bits;
            int num;
            ent_header(&p->fields[m->first], 0, m->count, &bits, &num);
            if (num > 0 && num < MAX_EDICTS && t->have_base[num]) {
                sg_bmsg_write_u8(&mw, SG_Q2_SVC_SPAWNBASELINE);
                write_entity(t, NULL, &t->base[num], true, false, &mw);
            }
            break;
        }
        case SG_Q2_SVC_SERVERDATA:
        case SG_Q2_SVC_ZPACKET:
        case SG_Q2_SVC_ZDOWNLOAD:
        case SG_Q2_SVC_DOWNLOAD:
        case SG_Q2_SVC_GAMESTATE:
        case SG_Q2_SVC_CONFIGSTRINGSTREAM:
        case SG_Q2_SVC_BASELINESTREAM:
        case SG_Q2_SVC_SETTING:
        case SG_Q2_SVC_DISCONNECT:
        case SG_Q2_SVC_RECONNECT:
            break;
        case SG_Q2_SVC_STUFFTEXT: {
            const struct sg_field *x = &p->fields[m->first];
            enum sg_q2_demo_stuff how = m->count == 1 && x->type == SG_FIELD_STRING
                                            ? sg_q2_demo_stufftext(x->ptr, x->len)
                                            : SG_Q2_STUFF_KEEP;
            if (how == SG_Q2_STUFF_PRECACHE) {
                sg_bmsg_write_u8(&mw, SG_Q2_SVC_STUFFTEXT);
                sg_bmsg_write_data(&mw, "precache\n", 10);
            } else if (how == SG_Q2_STUFF_KEEP && !(m->op & ~0x1f)) {
                copy_msg(p, i, &mw);
            }
            break;
        }
        default:
            if (!(m->op & ~0x1f))
                copy_msg(p, i, &mw);
            break;
        }
        if (mw.overflowed || mw.len > BLOCK_SOFT) {
            /* larger than a demo block can be: left out */
            if (op == SG_Q2_SVC_FRAME)
                t->frames_dropped++;
            else
                t->others_dropped++;
            continue;
        }
        if (mw.len == 0)
            continue;
        /* A block stays within what every player reads: what does not fit
         * goes on in a block of its own. */
        if (w.len && w.len + mw.len > BLOCK_SOFT) {
            if ((err = put_block(out, t->block, w.len)) < 0)
                return err;
            written = 1;
            sg_bmsg_writer_init(&w, t->block, sizeof(t->block));
        }
        sg_bmsg_write_data(&w, t->one, mw.len);
        if (fr)
            frame_written(t, fr);
    }
    if (w.len == 0)
        return written;
    if ((err = put_block(out, t->block, w.len)) < 0)
        return err;
    return 1;
}

void sg_q2_trans_record_end(struct sg_q2_trans *t, FILE *out)
{
    if (t->out == out) {
        t->out = NULL;
        t->started = false;
    }
}

int32_t sg_q2_trans_frames_written(const struct sg_q2_trans *t)
{
    return t->frames_written;
}
