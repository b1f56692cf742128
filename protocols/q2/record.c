/*
 * Quake 2 recording (.dm2): a protocol 34 session's demo written from the
 * stream the client accepted; 35/36 sessions go through transcode.c.
 */
#include "protocols/q2/session.h"

#include "protocols/byteorder.h"
#include "protocols/error.h"

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
 * from the client's state (transcode.c), as Q2PRO's client records them;
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

    if (frame != &c->frame || frame->kind != SG_FRAME_MESSAGE || frame->dir != SG_DIR_S2C)
        return 0;
    if (c->sv.protocol == 35 || c->sv.protocol == 36)
        return c->trans ? sg_q2_trans_record(c->trans, &c->parsed, c->dropped, out) : 0;
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
        c->rec_dropped[i] = c->dropped[i] || i < from ||
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
