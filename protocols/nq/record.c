/*
 * NetQuake demo recording (.dem) from the live codec: each server message
 * the client takes becomes a block; a demo started mid-level begins with
 * the level's start synthesized from what state.c kept.
 */
#include "protocols/nq/session.h"

#include "protocols/byteorder.h"
#include "protocols/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One .dem block: length, the three view angles, the message (`head`
 * then `tail`); flushed. */
static int write_block2(struct nqc *c, FILE *out, const uint8_t *head, size_t head_len,
                        const uint8_t *tail, size_t tail_len)
{
    uint8_t hdr[16];

    sg_put_le32(hdr, (uint32_t)(head_len + tail_len));
    for (int k = 0; k < 3; k++)
        sg_put_le32(hdr + 4 + 4 * k, c->view[k]);
    if (fwrite(hdr, 1, 16, out) != 16 || (head_len && fwrite(head, 1, head_len, out) != head_len) ||
        (tail_len && fwrite(tail, 1, tail_len, out) != tail_len) || fflush(out) != 0)
        return sg_write_error(); /* -ENOSPC on a full disk */
    return 1;
}

static int write_block(struct nqc *c, FILE *out, const uint8_t *msg, size_t len)
{
    return write_block2(c, out, msg, len, NULL, 0);
}

/* Blocks of at most 8000 bytes (WinQuake's MAX_MSGLEN) cut at message
 * boundaries; for a DarkPlaces server 65536 (its NET_MAXMESSAGE: its
 * serverinfo alone may pass 8000 bytes, and its client reads demo blocks up
 * to that size). */
struct synth {
    struct nqc *c;
    FILE *out;
    uint8_t buf[65536];
    size_t cap;
    size_t len;
    int err;
};

static void synth_flush(struct synth *y)
{
    if (y->len && y->err >= 0) {
        int e = write_block(y->c, y->out, y->buf, y->len);
        if (e < 0)
            y->err = e;
    }
    y->len = 0;
}

static void synth_msg(struct synth *y, const uint8_t *b, size_t n)
{
    if (n > y->cap)
        return; /* no such message comes from a NetQuake server */
    if (y->len + n > y->cap)
        synth_flush(y);
    memcpy(y->buf + y->len, b, n);
    y->len += n;
}

/* The messages in `buf` (whole, as tracked) one by one. */
static void synth_stream(struct synth *y, const uint8_t *buf, size_t len)
{
    struct sg_nq_proto p = y->c->proto;
    struct sg_nq_parsed parsed = {0};

    if (sg_nq_parse(SG_DIR_S2C, &p, buf, len, &parsed) == 0)
        for (uint32_t i = 0; i < parsed.nmsgs; i++) {
            size_t at = parsed.msgs[i].at;
            size_t end = i + 1 < parsed.nmsgs ? parsed.msgs[i + 1].at : len;
            synth_msg(y, buf + at, end - at);
        }
    else
        y->err = SG_E_MALFORMED;
    sg_nq_parsed_free(&parsed);
}

static void synth_signon(struct synth *y, uint8_t n)
{
    uint8_t m[2] = {25, n};

    synth_msg(y, m, 2);
    synth_flush(y);
}

/*
 * A demo started mid-level begins as the client's own would: the
 * serverinfo (signon 1), the baselines and static entities and sounds
 * (signon 2), the light styles, players and stats (signon 3); the game's
 * own messages follow.
 */
static int synthesize(struct nqc *c, FILE *out)
{
    struct level *lv = c->lv;
    struct synth *y = calloc(1, sizeof(*y));
    int err;

    if (!y)
        return -ENOMEM;
    y->c = c;
    y->out = out;
    y->cap = c->proto.dp ? sizeof(y->buf) : 8000;
    synth_stream(y, lv->info, lv->info_len);
    synth_signon(y, 1);
    synth_stream(y, lv->signon, lv->signon_len);
    synth_signon(y, 2);
    if (lv->time.len)
        synth_msg(y, lv->time.b, lv->time.len);
    for (int i = 0; i < 256; i++) {
        const struct lvmsg *m[5] = {&lv->style[i], &lv->name[i], &lv->frags[i], &lv->colors[i],
                                    &lv->stat[i]};
        for (int k = 0; k < 5; k++)
            if (m[k]->len)
                synth_msg(y, m[k]->b, m[k]->len);
    }
    synth_signon(y, 3);
    err = y->err;
    free(y);
    return err;
}

const char *sg_nq__demo_ext(void *state)
{
    (void)state;
    return "dem";
}

/*
 * A server message the client takes (a whole reliable message, or an
 * unreliable datagram) becomes one block, as the player's own `record`
 * writes them: as the client got it (rebuilt by encode() when it went out
 * rebuilt: the filters' changes, removals and injections are in it; a
 * reliable message's earlier pieces went out as they came), once (a resend
 * of its last piece, which the client drops, is not written again).  A
 * new demo starts at a serverinfo (a level's start) with the cd-track line
 * ("-1": no track forced); until then it waits.  A resend of the message
 * that carried the serverinfo is that message again: not a new demo.
 */
int sg_nq_record(void *state, const struct sg_frame *frame, FILE *out)
{
    struct nqc *c = state;
    int err;
    bool rebuilt = frame == &c->v.frame && c->out_sent;
    size_t head = rebuilt && c->is_reliable ? c->rel[frame->dir].last_at : 0;
    size_t len = rebuilt ? head + (c->out_len - 8) : frame->msg_len;

    if (frame->dir != SG_DIR_S2C || frame->kind != SG_FRAME_MESSAGE || !frame->msg ||
        (frame == &c->v.frame && c->is_resend))
        return 0;
    if (out != c->rec_out || !c->rec_started) {
        /* (not on DP5-DP7: their entity frames are deltas against what
         * the client acknowledged, which a demo started here lacks) */
        bool synth = !frame->new_level && c->lv && c->lv->valid && !c->proto.dpn;
        if (!frame->new_level && !synth) {
            c->rec_waited = c->rec_waited || c->proto.dpn;
            return 0; /* mid-level, nothing known of the level: wait for its serverinfo */
        }
        c->rec_out = out;
        c->rec_started = true;
        c->rec_signon = synth; /* the synthesized start ends with signon 3 */
        c->rec_game = false;
        if (fputs("-1\n", out) < 0)
            return sg_write_error();
        if (synth && (err = synthesize(c, out)) < 0)
            return err;
    }
    if (len > SG_NQ_DEM_MAX_BLOCK)
        return SG_E_TOOBIG;
    if (rebuilt)
        err = write_block2(c, out, frame->msg, head, c->out + 8, c->out_len - 8);
    else
        err = write_block(c, out, frame->msg, frame->msg_len);
    if (err > 0) {
        c->rec_game = c->rec_game || c->rec_signon;
        if (frame->msg == c->v.frame.msg && c->parsed.signon >= 3)
            c->rec_signon = true;
    }
    return err;
}

/*
 * The end as the player's `stop` writes it: a block holding svc_disconnect.
 * 1 when the demo holds nothing a player can play (nothing, or the sign-on
 * alone: quakespasm and DarkPlaces take an empty .dem for an invalid demo
 * and hang), which the caller removes.
 */
int sg_nq_record_end(void *state, FILE *out)
{
    struct nqc *c = state;
    static const uint8_t disconnect = 2;
    bool started = c->rec_out == out && c->rec_started;
    int err = 0;

    if (started)
        err = write_block(c, out, &disconnect, 1);
    c->rec_out = NULL;
    c->rec_started = false;
    if (err < 0)
        return err;
    return started && c->rec_game ? 0 : 1;
}
