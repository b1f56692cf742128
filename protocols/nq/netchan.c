/*
 * NetQuake netchan: datagrams decoded into frames (the receivers' rules,
 * the reliable pieces) and frames encoded again, injections riding on
 * them; NetQuake's rules for the filters' view (msglist.c).
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
    sg_relinj_restart(&c->v.inj);
    c->running = false;
    sg_nq_proto_set(&c->proto, SG_NQ_PROTOCOL_NETQUAKE, 0);
}

/* ---- the cross-game view ---- */

static void add_msg(struct nqc *c, int pi)
{
    const struct sg_fmsg *pm = &c->parsed.msgs[pi];
    struct sg_msg *m = sg_fview_add(
        &c->v, pi, c->v.frame.dir == SG_DIR_S2C ? sg_nq_svc_name(pm->op) : sg_nq_clc_name(pm->op),
        c->is_reliable ? (int32_t)c->seq : -1);

    m->repeat = c->is_resend;
    if (m->kind != SG_MSG_DISCONNECT)
        sg_fview_add_text(&c->v, m, pm);
}

/* ---- decode ---- */

static void reset_frame(struct nqc *c, enum sg_dir dir)
{
    sg_fview_reset(&c->v, dir, &c->parsed);
    c->is_reliable = c->is_resend = false;
    c->out_sent = false;
}

int sg_nq__grow(struct nqc *c, size_t msg_len)
{
    size_t pool = msg_len * 2 + TEXT_RESERVE;

    if (pool > c->v.text.cap) {
        char *p = realloc(c->v.text.buf, pool);
        if (!p)
            return -ENOMEM;
        c->v.text.buf = p;
        c->v.text.cap = pool;
    }
    if (c->parsed.msgs_cap + SG_RELINJ_MAX > c->v.msgs_cap)
        return sg_fview_room(&c->v, c->parsed.msgs_cap + SG_RELINJ_MAX);
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
        c->v.frame.new_level = !c->is_resend;
        snprintf(c->v.frame.level, sizeof(c->v.frame.level), "%s", c->parsed.level);
    }
    if (c->parsed.unsupported_op >= 0 && c->unsupported_op < 0)
        c->unsupported_op = c->parsed.unsupported_op;
    c->csqc_raw += c->parsed.csqc_raw;
    if (err < 0) {
        sg_nq__note_error(c, err, dir == SG_DIR_S2C ? "server message" : "client message");
        c->v.frame.kind = SG_FRAME_RAW;
        c->v.frame.nmsgs = 0;
        return err;
    }
    c->v.carrier = c->is_reliable;
    c->v.seq = c->seq;
    sg_fview_parsed(&c->v, c->parsed.fields, c->parsed.msgs, c->parsed.nmsgs);
    for (uint32_t i = 0; i < c->parsed.nmsgs; i++)
        add_msg(c, (int)i);
    for (unsigned i = 0; dir == SG_DIR_C2S && i < c->v.frame.nmsgs; i++)
        if (c->v.msgs[i].kind == SG_MSG_CLIENT_COMMAND && c->v.msgs[i].command)
            take_name(c, c->v.msgs[i].command);
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
    c->v.frame.msg = d;
    c->v.frame.msg_len = len;
    c->v.frame.kind = SG_FRAME_MESSAGE;
    c->v.frame.undecoded = c->parsed.unsupported_op >= 0; /* a part relayed as raw bytes */
    c->v.frame.disconnect = dir == SG_DIR_C2S && c->parsed.disconnect;
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
    *frame = &c->v.frame;
    c->stats.decoded++;
    if (len > MAX_DGRAM) {
        sg_nq__note_error(c, SG_E_TOOBIG, "datagram");
        return SG_E_TOOBIG;
    }
    memcpy(c->copy, data, len);
    c->copy_len = len;
    if (len < 4)
        return sg_fview_reject(&c->v, &c->stats, "runt (shorter than the header)");
    c->flags = sg_be32(data) & ~NETFLAG_LENGTH_MASK;
    if (c->flags & NETFLAG_CTL)
        return sg_nq__decode_ctl(c, dir);

    if (dir == SG_DIR_C2S && c->accepted)
        c->established = true;
    if (dir == SG_DIR_S2C && c->accepted && len >= 8)
        c->running = true;
    if (len < 8 || (sg_be32(data) & NETFLAG_LENGTH_MASK) != len) {
        /* "wrong length": the receiver drops it */
        return sg_fview_reject(&c->v, &c->stats,
                               len < 8 ? "runt (shorter than the header)"
                                       : "its length word is not its length");
    }
    c->seq = sg_be32(data + 4);
    c->v.frame.sequence = (int32_t)c->seq;
    payload = len - 8;

    if (c->flags & NETFLAG_ACK) {
        /* The receiver of the other direction acknowledges a piece. */
        enum sg_dir towards = dir == SG_DIR_C2S ? SG_DIR_S2C : SG_DIR_C2S;
        c->v.frame.ack = (int32_t)c->seq;
        if (c->v.inj.q[towards].in_flight && c->v.inj.q[towards].carrier == c->seq) {
            c->v.inj.q[towards].in_flight = false;
            sg_relinj_settle(&c->v.inj, towards, true); /* delivered */
        }
        return 0;
    }
    if (c->flags & NETFLAG_UNRELIABLE) {
        if (ur->known && c->seq < ur->next)
            return sg_fview_reject(&c->v, &c->stats, "stale unreliable sequence");
        if (ur->known && c->seq > ur->next)
            c->lost[dir] += c->seq - ur->next; /* skipped: lost on the way here */
        c->sequenced[dir]++;
        ur->known = true;
        ur->next = c->seq + 1;
        sg_relinj_waited(&c->v.inj, dir, INJECT_PATIENCE);
        c->v.frame.pieces = 1;
        return decode_message(c, dir, c->copy + 8, payload);
    }
    if (!(c->flags & NETFLAG_DATA))
        return sg_fview_reject(&c->v, &c->stats, "no DATA, ACK or UNRELIABLE flag");

    /* A reliable piece (the reassembly buffer comes with the first one: a
     * flood of sessions that never get there costs little). */
    if (!rl->buf && !(rl->buf = malloc(MAX_MESSAGE))) {
        sg_nq__note_error(c, -ENOMEM, "reliable message");
        return -ENOMEM;
    }
    c->is_reliable = true;
    c->v.frame.ack_wanted = (int32_t)c->seq; /* the receiver acknowledges every piece */
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
            c->v.frame.kind = SG_FRAME_RAW;
            return SG_E_TOOBIG;
        }
        rl->last_at = rl->len;
        memcpy(rl->buf + rl->len, c->copy + 8, payload);
        rl->len += payload;
        rl->pieces++;
        if (c->v.inj.q[dir].in_flight && c->v.inj.q[dir].carrier != c->seq) {
            /* A new piece: the sender had the carrier acknowledged (by a way we did not see). */
            c->v.inj.q[dir].in_flight = false;
            sg_relinj_settle(&c->v.inj, dir, true);
        }
        if (!(c->flags & NETFLAG_EOM)) {
            c->v.frame.kind = SG_FRAME_RAW; /* relayed now: its sender waits for the ack */
            c->v.frame.pieces = 0;
            return 0;
        }
        rl->complete = true;
    } else if (c->seq + 1 == rl->next) {
        /* A resend of the last piece (its ack may have been lost, or the piece). */
        c->is_resend = true;
        if (!rl->complete || !(c->flags & NETFLAG_EOM) || rl->len - rl->last_at != payload ||
            memcmp(rl->buf + rl->last_at, c->copy + 8, payload) != 0) {
            c->v.frame.kind = SG_FRAME_RAW;
            return 0;
        }
        sg_relinj_unsent(&c->v.inj, dir, c->seq); /* carry the injections again */
    } else {
        return sg_fview_reject(&c->v, &c->stats, "not the receiver's next reliable sequence");
    }
    c->v.frame.pieces = rl->pieces;
    return decode_message(c, dir, rl->buf, rl->len);
}

/* ---- filters ---- */

/* May message `i` of the frame be changed (it lies in the piece encode() rebuilds)? */
static bool changeable(const struct sg_fview *v, unsigned i)
{
    const struct nqc *c = (const struct nqc *)v; /* its first member */

    if (c->v.frame.kind != SG_FRAME_MESSAGE || i >= c->v.frame.nmsgs || c->v.msgs[i].injected)
        return false;
    if (!c->is_reliable)
        return true;
    return c->parsed.msgs[c->v.msg_index[i]].at >= c->rel[c->v.frame.dir].last_at;
}

/* NetQuake's text opcodes (svc_print has no level: a chat line starts with
 * a 1 byte); injections ride on the sender's next reliable message (its
 * last piece, settled by the acknowledgement of that piece), or after
 * INJECT_PATIENCE unreliable datagrams on an unreliable one. */
const struct sg_fview_rules sg_nq__view_rules = {
    .ops = {.print = 8, .centerprint = 26, .stufftext = 9, .stringcmd = 4, .print_level = false},
    .disconnect = 2,
    .other_text = SG_MSG_STUFFTEXT,
    .number_injected = true,
    .patience = INJECT_PATIENCE,
    .changeable = changeable,
};

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
    if (frame != &c->v.frame || frame->kind != SG_FRAME_MESSAGE)
        return SG_E_STATE;
    /* The message rebuilt after the header's 8 bytes. */
    sg_bmsg_writer_init(&w, c->out + 8, sizeof(c->out) - 8);
    if (c->is_reliable) {
        skip = c->rel[frame->dir].last_at; /* earlier pieces: relayed already */
        if (skip > sizeof(c->out) - 8)
            return SG_E_TOOBIG;
    }
    sg_nq_write(&c->parsed, c->v.dropped, &w);
    /* Nothing left of a piece that had bytes (a filter dropped them all): a
     * nop keeps the piece (and its number).  A datagram that came empty
     * stays empty. */
    if (!w.overflowed && c->copy_len > 8 && w.len < skip + 1 && c->is_reliable)
        sg_bmsg_write_u8(&w, 1);
    else if (!w.overflowed && c->copy_len > 8 && w.len == 0)
        sg_bmsg_write_u8(&w, 1);
    /* A piece as big as the original, or 1024 bytes (MAX_DATAGRAM of 15), whichever is more. */
    limit = skip + (c->copy_len - 8 > 1024 ? c->copy_len - 8 : 1024);
    sg_fview_inject_write(&c->v, &w, limit);
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
    err = sg_fview_emit(&c->v, &c->stats, c->out, body + 8, c->copy, c->copy_len, emit, ctx,
                        identical);
    c->out_sent = err >= 0;
    c->out_len = body + 8;
    return err < 0 ? err : 1;
}
