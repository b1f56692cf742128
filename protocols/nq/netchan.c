/*
 * NetQuake netchan: datagrams decoded into frames (the receivers' rules,
 * the reliable pieces, the cross-game message view for filters) and
 * frames encoded again, injections riding on them.
 *
 * Datagrams (WinQuake net_dgrm.c): a big-endian word of flags and length,
 * then for the netchan a big-endian sequence.  NETFLAG_CTL packets are the
 * connection's control packets (CCREQ_* / CCREP_*), decoded as OOB frames.
 * A reliable message goes in pieces (NETFLAG_DATA, the last with
 * NETFLAG_EOM), one in flight at a time: the sender waits for the
 * receiver's NETFLAG_ACK of each piece and resends it until then; the
 * receiver takes only the piece numbered receiveSequence and acknowledges
 * (and drops) any other.  Unreliable datagrams (NETFLAG_UNRELIABLE) carry
 * a whole message with their own sequence; the receiver drops one older
 * than the last it took.
 *
 * The codec models each receiver from what passes through: a piece is new
 * when it carries the next number, a resend when it repeats the number of
 * the last piece (decoded again, `repeat`, so filters treat it the same),
 * else the receiver drops it (REJECTED).  Pieces before a message's last
 * are relayed as they came (the sender would wait forever for an
 * acknowledgement of a piece held back); the last piece's frame is the
 * whole message, and encode() rebuilds only that piece, so a filter may
 * change only what lies in it.  Numbers never change: a dropped message
 * leaves an svc_nop / clc_nop, and injections ride on the sender's next
 * reliable message (appended to its last piece, again on a resend, until
 * the receiver acknowledges that piece), as the qw codec does.
 */
#include "protocols/nq/session.h"

#include "protocols/byteorder.h"
#include "protocols/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* After this many unreliable datagrams without a reliable message to ride
 * on, an injection goes on an unreliable one (best effort: a lost datagram
 * loses it; NetQuake servers send reliable messages only when something
 * happens, clients only with a typed command). */
#define INJECT_PATIENCE 20

void sg_nq__reset_netchan(struct nqc *c)
{
    for (int d = 0; d < 2; d++) {
        c->rel[d].known = false;
        c->rel[d].len = 0;
        c->rel[d].complete = false;
        c->unrel[d].known = false;
    }
    sg_relinj_restart(&c->inj);
    c->running = false;
    sg_nq_proto_set(&c->proto, SG_NQ_PROTOCOL_NETQUAKE, 0);
}

/* ---- the cross-game view ---- */

static void add_msg(struct nqc *c, int pi)
{
    const struct sg_fmsg *pm = &c->parsed.msgs[pi];
    bool s2c = c->frame.dir == SG_DIR_S2C;
    const struct sg_field *tf =
        pm->text >= 0 && (uint32_t)pm->text < pm->count ? &c->parsed.fields[pm->first + (uint32_t)pm->text]
                                                        : NULL;
    struct sg_msg *m = sg_fview_add(&c->frame, c->msg_index, pi,
                                    s2c ? sg_nq_svc_name(pm->op) : sg_nq_clc_name(pm->op),
                                    c->is_reliable ? (int32_t)c->seq : -1);

    m->repeat = c->is_resend;
    if (s2c && pm->op == 2) {
        m->kind = SG_MSG_DISCONNECT;
        m->text = m->command = "";
        return;
    }
    if (!tf || tf->type != SG_FIELD_STRING)
        return;
    if (!sg_fview_text(&c->text, m, tf))
        return;
    if (s2c) {
        if (pm->op == 8) /* a chat line starts with byte 1 (SV_ClientPrintf of say) */
            m->kind = tf->len > 0 && tf->ptr[0] == 1 ? SG_MSG_CHAT : SG_MSG_PRINT;
        else
            m->kind = pm->op == 26 ? SG_MSG_CENTERPRINT : SG_MSG_STUFFTEXT;
        return;
    }
    sg_fview_client_command(&c->text, m, tf->len);
}

/* ---- decode ---- */

static void reset_frame(struct nqc *c, enum sg_dir dir)
{
    sg_fview_reset(&c->frame, dir, c->msgs, &c->parsed, &c->text);
    c->why = NULL;
    c->is_reliable = c->is_resend = false;
    c->out_sent = false;
}

int sg_nq__grow(struct nqc *c, size_t msg_len)
{
    size_t pool = msg_len * 2 + TEXT_RESERVE;

    if (pool > c->text.cap) {
        char *p = realloc(c->text.buf, pool);
        if (!p)
            return -ENOMEM;
        c->text.buf = p;
        c->text.cap = pool;
    }
    if (c->parsed.msgs_cap + SG_RELINJ_MAX > c->msgs_cap) {
        unsigned cap = c->parsed.msgs_cap + SG_RELINJ_MAX;
        struct sg_msg *m = realloc(c->msgs, cap * sizeof(*m));
        int *ix;
        bool *dr;
        if (!m)
            return -ENOMEM;
        c->msgs = m;
        ix = realloc(c->msg_index, cap * sizeof(*ix));
        if (!ix)
            return -ENOMEM;
        c->msg_index = ix;
        dr = realloc(c->dropped, cap * sizeof(*dr));
        if (!dr)
            return -ENOMEM;
        c->dropped = dr;
        c->msgs_cap = cap;
        c->frame.msgs = c->msgs;
    }
    return 0;
}

/* A client's `name NEW` command (NEW quoted, or the rest of the line), as the player's name. */
static void take_name(struct nqc *c, const char *cmd)
{
    const char *v, *end;

    if (strncmp(cmd, "name", 4) != 0 || (cmd[4] != ' ' && cmd[4] != '\t'))
        return;
    for (v = cmd + 5; *v == ' ' || *v == '\t';)
        v++;
    if (*v == '"')
        end = strchr(++v, '"');
    else
        end = NULL;
    if (!end)
        for (end = v + strlen(v); end > v && (end[-1] == '\n' || end[-1] == ' ');)
            end--;
    if (end > v)
        snprintf(c->player, sizeof(c->player), "%.*s", (int)(end - v), v);
}

/* Parse `len` bytes of message at `d` into the frame's messages. */
static int decode_message(struct nqc *c, enum sg_dir dir, const uint8_t *d, size_t len)
{
    int err = sg_nq_parse(dir, &c->proto, d, len, &c->parsed);

    if (err == -ENOMEM || sg_nq__grow(c, len) < 0)
        return -ENOMEM;
    if (c->parsed.serverinfo) {
        /* A resend of the reliable message that carried it is the same
         * message (the client's copy was lost): no new level. */
        c->frame.new_level = !c->is_resend;
        snprintf(c->frame.level, sizeof(c->frame.level), "%s", c->parsed.level);
    }
    if (c->parsed.unsupported_op >= 0 && c->unsupported_op < 0)
        c->unsupported_op = c->parsed.unsupported_op;
    c->csqc_raw += c->parsed.csqc_raw;
    if (err < 0) {
        sg_nq__note_error(c, err, dir == SG_DIR_S2C ? "server message" : "client message");
        c->frame.kind = SG_FRAME_RAW;
        c->frame.nmsgs = 0;
        return err;
    }
    memset(c->dropped, 0, sizeof(bool) * c->parsed.nmsgs);
    for (uint32_t i = 0; i < c->parsed.nmsgs; i++)
        add_msg(c, (int)i);
    for (unsigned i = 0; dir == SG_DIR_C2S && i < c->frame.nmsgs; i++)
        if (c->msgs[i].kind == SG_MSG_CLIENT_COMMAND && c->msgs[i].command)
            take_name(c, c->msgs[i].command);
    if (dir == SG_DIR_C2S)
        for (uint32_t i = 0; i < c->parsed.nmsgs; i++) {
            const struct sg_fmsg *pm = &c->parsed.msgs[i];
            uint32_t a = c->proto.dpn >= 7 ? 2 : 1; /* (DP7: the move's sequence first) */
            if (pm->op != 3 || pm->count < a + 3 || pm->unparsed)
                continue;
            for (int k = 0; k < 3; k++) {
                const struct sg_field *f = &c->parsed.fields[pm->first + a + (uint32_t)k];
                float v = sg_bmsg_num_value(f->num, f->raw);
                memcpy(&c->view[k], &v, sizeof(v));
            }
        }
    if (dir == SG_DIR_S2C && !c->is_resend)
        sg_nq__track(c, d, len);
    c->frame.msg = d;
    c->frame.msg_len = len;
    c->frame.kind = SG_FRAME_MESSAGE;
    c->frame.undecoded = c->parsed.unsupported_op >= 0; /* a part relayed as raw bytes */
    c->frame.disconnect = dir == SG_DIR_C2S && c->parsed.disconnect;
    if (c->parsed.disconnect)
        c->running = false; /* the next accept starts a new connection */
    c->stats.messages++;
    return 0;
}

int sg_nq__decode(void *state, enum sg_dir dir, const uint8_t *data, size_t len,
                  const struct sg_frame **frame)
{
    struct nqc *c = state;
    struct rel *rl = &c->rel[dir];
    struct unrel *ur = &c->unrel[dir];
    size_t payload;

    reset_frame(c, dir);
    *frame = &c->frame;
    c->stats.decoded++;
    if (len > MAX_DGRAM) {
        sg_nq__note_error(c, SG_E_TOOBIG, "datagram");
        return SG_E_TOOBIG;
    }
    memcpy(c->copy, data, len);
    c->copy_len = len;
    if (len < 4) {
        c->frame.kind = SG_FRAME_REJECTED;
        c->why = "runt (shorter than the header)";
        c->stats.rejected++;
        return 0;
    }
    c->flags = sg_be32(data) & ~NETFLAG_LENGTH_MASK;
    if (c->flags & NETFLAG_CTL)
        return sg_nq__decode_ctl(c, dir);

    if (dir == SG_DIR_C2S && c->accepted)
        c->established = true;
    if (dir == SG_DIR_S2C && c->accepted && len >= 8)
        c->running = true;
    if (len < 8 || (sg_be32(data) & NETFLAG_LENGTH_MASK) != len) {
        c->frame.kind = SG_FRAME_REJECTED; /* "wrong length": the receiver drops it */
        c->why = len < 8 ? "runt (shorter than the header)" : "its length word is not its length";
        c->stats.rejected++;
        return 0;
    }
    c->seq = sg_be32(data + 4);
    c->frame.sequence = (int32_t)c->seq;
    payload = len - 8;

    if (c->flags & NETFLAG_ACK) {
        /* The receiver of the other direction acknowledges a piece. */
        enum sg_dir towards = dir == SG_DIR_C2S ? SG_DIR_S2C : SG_DIR_C2S;
        c->frame.ack = (int32_t)c->seq;
        if (c->inj.q[towards].in_flight && c->inj.q[towards].carrier == c->seq) {
            c->inj.q[towards].in_flight = false;
            sg_relinj_settle(&c->inj, towards, true); /* delivered */
        }
        return 0;
    }
    if (c->flags & NETFLAG_UNRELIABLE) {
        if (ur->known && c->seq < ur->next) {
            c->frame.kind = SG_FRAME_REJECTED;
            c->why = "stale unreliable sequence";
            c->stats.rejected++;
            return 0;
        }
        if (ur->known && c->seq > ur->next)
            c->lost[dir] += c->seq - ur->next; /* skipped: lost on the way here */
        c->sequenced[dir]++;
        ur->known = true;
        ur->next = c->seq + 1;
        sg_relinj_waited(&c->inj, dir, INJECT_PATIENCE);
        c->frame.pieces = 1;
        return decode_message(c, dir, c->copy + 8, payload);
    }
    if (!(c->flags & NETFLAG_DATA)) {
        c->frame.kind = SG_FRAME_REJECTED;
        c->why = "no DATA, ACK or UNRELIABLE flag";
        c->stats.rejected++;
        return 0;
    }

    /* A reliable piece (the reassembly buffer comes with the first one: a
     * flood of sessions that never get there costs little). */
    if (!rl->buf && !(rl->buf = malloc(MAX_MESSAGE))) {
        sg_nq__note_error(c, -ENOMEM, "reliable message");
        return -ENOMEM;
    }
    c->is_reliable = true;
    c->frame.ack_wanted = (int32_t)c->seq; /* the receiver acknowledges every piece */
    if (!rl->known || c->seq == rl->next) {
        if (rl->complete || !rl->known) {
            rl->len = 0;
            rl->pieces = 0;
            rl->complete = false;
        }
        rl->known = true;
        rl->next = c->seq + 1;
        if (rl->len + payload > MAX_MESSAGE) {
            rl->len = 0; /* the receiver would fail on it: start over */
            sg_nq__note_error(c, SG_E_TOOBIG, "reliable message");
            c->frame.kind = SG_FRAME_RAW;
            return SG_E_TOOBIG;
        }
        rl->last_at = rl->len;
        memcpy(rl->buf + rl->len, c->copy + 8, payload);
        rl->len += payload;
        rl->pieces++;
        if (c->inj.q[dir].in_flight && c->inj.q[dir].carrier != c->seq) {
            /* A new piece: the sender had the carrier acknowledged (by a way we did not see). */
            c->inj.q[dir].in_flight = false;
            sg_relinj_settle(&c->inj, dir, true);
        }
        if (!(c->flags & NETFLAG_EOM)) {
            c->frame.kind = SG_FRAME_RAW; /* relayed now: its sender waits for the ack */
            c->frame.pieces = 0;
            return 0;
        }
        rl->complete = true;
    } else if (c->seq + 1 == rl->next) {
        /* A resend of the last piece (its ack may have been lost, or the piece). */
        c->is_resend = true;
        if (!rl->complete || !(c->flags & NETFLAG_EOM) || rl->len - rl->last_at != payload ||
            memcmp(rl->buf + rl->last_at, c->copy + 8, payload) != 0) {
            c->frame.kind = SG_FRAME_RAW;
            return 0;
        }
        sg_relinj_unsent(&c->inj, dir, c->seq); /* carry the injections again */
    } else {
        c->frame.kind = SG_FRAME_REJECTED;
        c->why = "not the receiver's next reliable sequence";
        c->stats.rejected++;
        return 0;
    }
    c->frame.pieces = rl->pieces;
    return decode_message(c, dir, rl->buf, rl->len);
}

/* ---- filters ---- */

/* May message `i` of the frame be changed (it lies in the piece encode() rebuilds)? */
static bool changeable(const struct nqc *c, unsigned i)
{
    if (c->frame.kind != SG_FRAME_MESSAGE || i >= c->frame.nmsgs || c->msgs[i].injected)
        return false;
    if (!c->is_reliable)
        return true;
    return c->parsed.msgs[c->msg_index[i]].at >= c->rel[c->frame.dir].last_at;
}

int sg_nq__set_text(void *state, unsigned i, const char *text, size_t len)
{
    struct nqc *c = state;

    if (!changeable(c, i))
        return SG_E_UNSUPPORTED;
    return sg_fmsg_set_text(&c->text, &c->frame, i, c->parsed.fields, c->parsed.msgs, c->msg_index,
                            false, text, len);
}

int sg_nq__drop_msg(void *state, unsigned i)
{
    struct nqc *c = state;

    if (!changeable(c, i))
        return SG_E_UNSUPPORTED;
    return sg_fmsg_drop(&c->frame, c->dropped, c->msg_index, i);
}

int sg_nq__inject(void *state, enum sg_dir dir, enum sg_msg_kind kind, const char *text,
                  size_t len)
{
    struct nqc *c = state;
    struct sg_relinj_item *j;
    int err = sg_relinj_add(&c->inj, dir, kind, text, len);

    if (err < 0)
        return err;
    j = &c->inj.item[c->inj.n - 1];
    if (dir == SG_DIR_S2C && kind == SG_MSG_CHAT) {
        /* NetQuake marks a chat line with a leading 1 byte (the check left room for it). */
        memmove(j->text + 1, j->text, j->len + 1);
        j->text[0] = '\001';
        j->len++;
    }
    return 0;
}

bool sg_nq__must_encode(void *state, const struct sg_frame *frame)
{
    const struct nqc *c = state;

    if (frame != &c->frame || frame->kind != SG_FRAME_MESSAGE)
        return false;
    if (!c->is_reliable)
        return sg_relinj_ready(&c->inj, frame->dir, INJECT_PATIENCE);
    return !c->inj.q[frame->dir].in_flight && sg_relinj_ready(&c->inj, frame->dir, 0);
}

static void write_injections(struct nqc *c, struct sg_bmsg_writer *w, size_t limit)
{
    static const struct sg_text_ops ops = {
        .print = 8, .centerprint = 26, .stufftext = 9, .stringcmd = 4, .print_level = false};
    bool any = false;

    if (c->is_reliable && c->inj.q[c->frame.dir].in_flight)
        return;
    for (unsigned i = 0; i < c->inj.n; i++) {
        struct sg_relinj_item *j = &c->inj.item[i];
        const char *name;
        if (j->dir != c->frame.dir || j->attached || w->len + j->len + 2 > limit ||
            c->frame.nmsgs >= c->msgs_cap || (!c->is_reliable && j->waited < INJECT_PATIENCE))
            continue;
        j->attached = any = true;
        name = sg_text_op_write(w, &ops, j->dir, j->kind);
        sg_fmsg_injected(&c->text, &c->msgs[c->frame.nmsgs++], w, j->kind, name, (int32_t)c->seq,
                         j->text, j->len);
    }
    if (any && c->is_reliable)
        sg_relinj_carried(&c->inj, c->frame.dir, c->seq);
}

/* ---- encode ---- */

int sg_nq__encode(void *state, const struct sg_frame *frame, sg_emit_fn emit, void *ctx,
                  bool *identical)
{
    struct nqc *c = state;
    struct sg_bmsg_writer w;
    size_t skip = 0, limit, body;
    uint8_t *msg;
    int err;

    *identical = false;
    if (frame != &c->frame || frame->kind != SG_FRAME_MESSAGE)
        return SG_E_STATE;
    /* The message rebuilt after the header's 8 bytes. */
    sg_bmsg_writer_init(&w, c->out + 8, sizeof(c->out) - 8);
    if (c->is_reliable) {
        skip = c->rel[frame->dir].last_at; /* earlier pieces: relayed already */
        if (skip > sizeof(c->out) - 8)
            return SG_E_TOOBIG;
    }
    sg_nq_write(&c->parsed, c->dropped, &w);
    /* Nothing left of a piece that had bytes (a filter dropped them all): a
     * nop keeps the piece (and its number).  A datagram that came empty
     * stays empty. */
    if (!w.overflowed && c->copy_len > 8 && w.len < skip + 1 && c->is_reliable)
        sg_bmsg_write_u8(&w, 1);
    else if (!w.overflowed && c->copy_len > 8 && w.len == 0)
        sg_bmsg_write_u8(&w, 1);
    /* A piece as big as the original, or 1024 bytes (MAX_DATAGRAM of 15), whichever is more. */
    limit = skip + (c->copy_len - 8 > 1024 ? c->copy_len - 8 : 1024);
    write_injections(c, &w, limit);
    if (w.overflowed) {
        c->stats.reencode_errors++;
        return SG_E_OVERFLOW;
    }
    msg = c->out + 8;
    if (skip && (w.len < skip || memcmp(msg, frame->msg, skip) != 0)) {
        c->stats.reencode_errors++;
        return SG_E_UNSUPPORTED; /* a change before this piece: too late */
    }
    body = w.len - skip;
    if (body + 8 > NETFLAG_LENGTH_MASK) {
        c->stats.reencode_errors++;
        return SG_E_TOOBIG;
    }
    if (skip)
        memmove(msg, msg + skip, body);
    sg_put_be32(c->out, (uint32_t)(body + 8) | c->flags);
    sg_put_be32(c->out + 4, c->seq);
    c->stats.reencoded++;
    *identical = body + 8 == c->copy_len && memcmp(c->out, c->copy, c->copy_len) == 0;
    if (*identical)
        c->stats.reencode_identical++;
    err = emit(ctx, c->out, body + 8);
    c->out_sent = err >= 0;
    c->out_len = body + 8;
    if (!c->is_reliable)
        sg_relinj_settle(&c->inj, frame->dir, err >= 0); /* sent: done with; else wait again */
    else if (err < 0)
        sg_relinj_unsent(&c->inj, frame->dir, c->seq);
    return err < 0 ? err : 1;
}
