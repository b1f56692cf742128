/*
 * Quake 2 recording (.dm2): a protocol 34 session's demo written from the
 * stream the client accepted; a 35/36 session's written as 34 from the
 * state its client keeps (state.c).
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
#include "protocols/q2/session.h"

#include "protocols/byteorder.h"
#include "protocols/error.h"

#include <stdlib.h>
#include <string.h>

/*
 * A protocol 34 session's demo is the stream as the client accepted it
 * (after the filters), one block per message, from a serverdata on: the
 * messages before the first serverdata of a demo are left out, so the
 * file starts as the players' demos do, and the sign-on is written as the
 * client's own `record` writes it: the serverdata says attractloop 1
 * ("demos are always attract loops"), `precache <spawncount>` is the plain
 * `precache` and the sign-on's `cmd configstrings|baselines` requests are
 * left out (sg_q2_demo_stufftext: a player takes them for a connection's,
 * downloads, or restarts the demo).  A recording that starts mid-level
 * writes a synthesized start, then waits for a non-delta frame.  35 and 36
 * frames are not legal in a 34 demo: those sessions are transcoded to 34
 * from the client's state (state.c), as Q2PRO's client records them;
 * Q2PRO's extended sessions are refused.
 */
const char *sg_q2__demo_ext(void *state)
{
    (void)state;
    return "dm2";
}

/* One block of a demo. */
static int put_block(FILE *out, const uint8_t *d, size_t n)
{
    uint8_t h[4];

    sg_put_le32(h, (uint32_t)n);
    return fwrite(h, 1, 4, out) == 4 && fwrite(d, 1, n, out) == n ? 0 : sg_write_error();
}

/*
 * The start of a demo when recording begins mid-level (as id's `record`
 * writes it): serverdata (attractloop 1), every non-empty configstring,
 * every baseline, `precache`, in blocks of at most SG_Q2_DEMO_BLOCK bytes.
 */
static int write_preamble(struct q2c *c, FILE *out)
{
    struct level *l = &c->lvl;
    uint8_t *buf = c->body;
    struct sg_bmsg_writer w;
    int err;

    sg_bmsg_writer_init(&w, buf, SG_Q2_DEMO_BLOCK);
    sg_bmsg_write_u8(&w, SG_Q2_SVC_SERVERDATA);
    sg_bmsg_write_s32(&w, 34);
    sg_bmsg_write_s32(&w, l->servercount);
    sg_bmsg_write_u8(&w, 1);
    sg_bmsg_write_data(&w, l->gamedir, strlen(l->gamedir) + 1);
    sg_bmsg_write_u16(&w, (unsigned)l->playernum);
    sg_bmsg_write_data(&w, l->levelname, strlen(l->levelname) + 1);
    for (int i = 0; i < SG_Q2_CS_OLD + SG_Q2_EDICTS_OLD + 1; i++) {
        uint8_t one[1100];
        struct sg_bmsg_writer m;
        sg_bmsg_writer_init(&m, one, sizeof(one));
        if (i < SG_Q2_CS_OLD) {
            if (!l->cs[i] || !l->cs[i][0])
                continue;
            sg_bmsg_write_u8(&m, SG_Q2_SVC_CONFIGSTRING);
            sg_bmsg_write_u16(&m, (unsigned)i);
            sg_bmsg_write_data(&m, l->cs[i], strlen(l->cs[i]) + 1);
        } else if (i < SG_Q2_CS_OLD + SG_Q2_EDICTS_OLD) {
            int k = i - SG_Q2_CS_OLD;
            if (!l->base[k])
                continue;
            sg_bmsg_write_data(&m, l->base[k], l->base_len[k]);
        } else {
            sg_bmsg_write_u8(&m, SG_Q2_SVC_STUFFTEXT);
            sg_bmsg_write_data(&m, "precache\n", 10);
        }
        if (m.overflowed)
            continue; /* longer than a configstring can be: left out */
        if (w.len + m.len > SG_Q2_DEMO_BLOCK) {
            if ((err = put_block(out, buf, w.len)) < 0)
                return err;
            sg_bmsg_writer_init(&w, buf, SG_Q2_DEMO_BLOCK);
        }
        sg_bmsg_write_data(&w, one, m.len);
    }
    return put_block(out, buf, w.len);
}

/*
 * The message's messages a 34 demo keeps (not rec_dropped), the sign-on
 * as the client's own demo has it: a serverdata's attractloop 1, the
 * sign-on's stufftexts by sg_q2_demo_stufftext; the rest as it came.
 */
static int record_msgs(struct q2c *c, struct sg_bmsg_writer *w)
{
    const struct sg_q2_parsed *p = &c->parsed;
    bool plain = true;

    for (uint32_t i = 0; i < p->nmsgs && plain; i++) {
        const struct sg_fmsg *m = &p->msgs[i];
        plain = c->rec_dropped[i] || m->unparsed || m->parent >= 0 ||
                (m->op != SG_Q2_SVC_SERVERDATA && m->op != SG_Q2_SVC_STUFFTEXT);
    }
    if (plain)
        return sg_q2_write(p, c->rec_dropped, w);
    for (uint32_t i = 0; i < p->nmsgs; i++) {
        const struct sg_fmsg *m = &p->msgs[i];
        const struct sg_field *f = &p->fields[m->first];
        struct sg_q2_parsed one = *p;
        struct sg_fmsg alone = *m;
        size_t at = w->len;
        if (c->rec_dropped[i] || m->parent >= 0)
            continue; /* (34 has no zpackets: nothing inside another message) */
        if (m->op == SG_Q2_SVC_STUFFTEXT && !m->unparsed && m->count == 1 &&
            f->type == SG_FIELD_STRING) {
            enum sg_q2_demo_stuff how = sg_q2_demo_stufftext(f->ptr, f->len);
            if (how == SG_Q2_STUFF_LEAVE)
                continue;
            if (how == SG_Q2_STUFF_PRECACHE) {
                sg_bmsg_write_u8(w, SG_Q2_SVC_STUFFTEXT);
                sg_bmsg_write_data(w, "precache\n", 10);
                continue;
            }
        }
        one.msgs = &alone;
        one.nmsgs = 1;
        if (sg_q2_write(&one, NULL, w) < 0)
            return SG_E_OVERFLOW;
        /* op, protocol, servercount, attractloop */
        if (m->op == SG_Q2_SVC_SERVERDATA && !m->unparsed && w->len >= at + 10)
            w->data[at + 9] = 1;
    }
    return w->overflowed ? SG_E_OVERFLOW : 0;
}

int sg_q2__record(void *state, const struct sg_frame *frame, FILE *out)
{
    struct q2c *c = state;
    struct sg_bmsg_writer w;
    uint32_t from = 0;
    int err;

    if (frame != &c->v.frame || frame->kind != SG_FRAME_MESSAGE || frame->dir != SG_DIR_S2C)
        return 0;
    if (c->sv.protocol == 35 || c->sv.protocol == 36)
        return c->trans ? sg_q2_trans_record(c->trans, &c->parsed, c->v.dropped, out) : 0;
    if (c->sv.protocol != 34 && c->sv.protocol != 26)
        return SG_E_UNSUPPORTED;
    if (out != c->rec_out) {
        c->rec_out = out;
        c->rec_started = false;
    }
    if (!c->rec_started) {
        while (from < c->parsed.nmsgs && c->parsed.msgs[from].op != SG_Q2_SVC_SERVERDATA)
            from++;
        if (from == c->parsed.nmsgs) {
            /* Mid-level: a synthesized start, then this message once it holds
             * a frame the player can read without a delta base. */
            if (!c->lvl.have || c->sv.protocol != 34)
                return 0;
            if (c->parsed.frames == 0 || c->parsed.deltaframe > 0) {
                c->want_nodelta = true;
                return 0;
            }
            if ((err = write_preamble(c, out)) < 0)
                return err;
            from = 0;
        }
        c->want_nodelta = false;
    }
    /* svc_disconnect / svc_reconnect end the client's connection before it
     * records them: its own demos never hold them, and a player stops at them. */
    for (uint32_t i = 0; i < c->parsed.nmsgs; i++)
        c->rec_dropped[i] = c->v.dropped[i] || i < from ||
                            c->parsed.msgs[i].op == SG_Q2_SVC_DISCONNECT ||
                            c->parsed.msgs[i].op == SG_Q2_SVC_RECONNECT;
    sg_bmsg_writer_init(&w, c->body, sizeof(c->body));
    if (record_msgs(c, &w) < 0 || w.len > SG_Q2_MAX_MSGLEN)
        return SG_E_OVERFLOW;
    if ((err = put_block(out, c->body, w.len)) < 0)
        return err;
    c->rec_started = true;
    return 1;
}

int sg_q2__record_end(void *state, FILE *out)
{
    struct q2c *c = state;
    static const uint8_t end[4] = {0xff, 0xff, 0xff, 0xff};

    if (out == c->rec_out)
        c->rec_out = NULL;
    if (c->trans)
        sg_q2_trans_record_end(c->trans, out);
    if (fwrite(end, 1, 4, out) != 4 || fflush(out) != 0)
        return sg_write_error();
    return 0;
}

/* ---- 35/36 sessions written as 34 ---- */

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

/* CL_Record_f's startup blocks, from the state. */
static int trans_preamble(struct sg_q2_trans *t, FILE *out)
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
        if ((err = trans_preamble(t, out)) < 0)
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
            sg_q2__ent_header(&p->fields[m->first], 0, m->count, &bits, &num);
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
