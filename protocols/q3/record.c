/*
 * Quake 3 demo recording from any point of a stream (see demo.h):
 * gamestate synthesis from tracked state (as CL_Record writes it: the
 * set configstrings in index order as svc_configstring + short + bigstring,
 * every received baseline as svc_baseline + a forced delta from the zero
 * entity, svc_EOF, clientNum, checksumFeed), non-delta snapshots (the
 * playerstate from zero, entities from their baselines with force, as
 * SV_EmitPacketEntities does for a client without an acknowledged frame),
 * and the recorder that keeps every snapshot in the file decodable.
 */
#include "protocols/q3/demo.h"

#include <errno.h>
#include <string.h>

#include "protocols/error.h"

int sg_q3_record_gamestate(const struct sg_q3_state *st, int32_t command_seq,
                           struct sg_q3_svmsg *out)
{
    static const struct sg_q3_entity null_entity;
    const struct sg_q3_variant *v = st->variant;
    int opi = sg_q3_svmsg_add_op(out, SG_Q3_SVC_GAMESTATE);
    uint32_t first = out->num_items;
    int err = 0;

    if (opi < 0)
        return opi;
    out->variant = v;

    /* configstrings, then baselines */
    for (int i = 0; i < v->max_configstrings && !err; i++) {
        int it;

        if (!st->cs[i])
            continue;
        it = sg_q3_svmsg_add_item(out);
        if (it < 0)
            return it;
        out->items[it].op = SG_Q3_SVC_CONFIGSTRING;
        out->items[it].index = (uint16_t)i;
        err = sg_q3_svmsg_add_bytes(out, st->cs[i], strlen(st->cs[i]), &out->items[it].text);
    }
    for (int n = 0; n < v->max_gentities && !err; n++) {
        int it, ei;

        if (!sg_q3_state_baseline_used(st, n))
            continue;
        it = sg_q3_svmsg_add_item(out);
        ei = it < 0 ? it : sg_q3_svmsg_add_ent(out);
        if (ei < 0)
            return ei;
        out->items[it].op = SG_Q3_SVC_BASELINE;
        out->items[it].index = (uint16_t)n;
        out->items[it].ent = (uint32_t)ei;
        sg_q3_delta_entity_make(v, &null_entity, &st->baselines[n], true, &out->ents[ei]);
        out->ents[ei].number = (uint16_t)n;
    }
    if (err)
        return err;

    out->ops[opi].u.gamestate.command_seq = command_seq;
    out->ops[opi].u.gamestate.first_item = first;
    out->ops[opi].u.gamestate.num_items = out->num_items - first;
    out->ops[opi].u.gamestate.client_num = st->client_num;
    out->ops[opi].u.gamestate.checksum_feed = st->checksum_feed;
    return 0;
}

/* Entity updates from `base`'s list to `snap`'s, merged by number (SV_EmitPacketEntities). */
static int emit_entities(const struct sg_q3_state *st, const struct sg_q3_snapshot *snap,
                         const struct sg_q3_snapshot *base, struct sg_q3_svmsg *out)
{
    const struct sg_q3_variant *v = st->variant;
    int ni = 0, oi = 0;
    int nn = snap->num_entities, on = base ? base->num_entities : 0;

    while (ni < nn || oi < on) {
        const struct sg_q3_entity *ne = ni < nn ? sg_q3_state_entity(st, snap, ni) : NULL;
        const struct sg_q3_entity *oe = oi < on ? sg_q3_state_entity(st, base, oi) : NULL;
        int newnum = ne ? ne->number : 9999, oldnum = oe ? oe->number : 9999;
        struct sg_q3_entity_delta rec;
        bool emit;

        /* same entity: delta if changed; new: from its baseline; gone: remove */
        if (newnum == oldnum) {
            emit = sg_q3_delta_entity_make(v, oe, ne, false, &rec);
            ni++;
            oi++;
        } else if (newnum < oldnum) {
            emit = sg_q3_delta_entity_make(v, &st->baselines[newnum & (v->max_gentities - 1)], ne,
                                           true, &rec);
            ni++;
        } else {
            sg_q3_delta_entity_make_remove(v, oldnum, &rec);
            emit = true;
            oi++;
        }
        if (emit) {
            int ei = sg_q3_svmsg_add_ent(out);

            if (ei < 0)
                return ei;
            out->ents[ei] = rec;
        }
    }
    return 0;
}

int sg_q3_record_snapshot(const struct sg_q3_state *st, const struct sg_q3_snapshot *snap,
                          const struct sg_q3_snapshot *base, struct sg_q3_svmsg *out)
{
    int32_t delta = base ? sg_q3_seqdiff(snap->message_num, base->message_num) : 0;
    int opi, si, err;
    struct sg_q3_snap *s;

    /* the game reads a delta from message number 0 or below as no delta
     * (CL_ParseSnapshot: deltaNum <= 0 is an uncompressed frame) */
    if (base && (delta <= 0 || delta >= st->variant->packet_backup || base->message_num <= 0 ||
                 st->parse_entities_num - base->parse_entities_num >
                     (uint32_t)(SG_Q3_MAX_PARSE_ENTITIES - SG_Q3_MAX_SNAPSHOT_ENTITIES)))
        return -EINVAL;
    if (st->parse_entities_num - snap->parse_entities_num > (uint32_t)SG_Q3_MAX_PARSE_ENTITIES)
        return -EINVAL; /* its entities were overwritten */
    opi = sg_q3_svmsg_add_op(out, SG_Q3_SVC_SNAPSHOT);
    si = opi < 0 ? opi : sg_q3_svmsg_add_snap(out);
    if (si < 0)
        return si;
    out->ops[opi].u.snap = (uint32_t)si;
    out->variant = st->variant;
    s = &out->snaps[si];

    /* header and playerstate */
    s->server_time = snap->server_time;
    s->delta_num = (uint8_t)delta;
    s->snap_flags = snap->snap_flags;
    s->areamask_len = snap->areamask_len;
    memcpy(s->areamask, snap->areamask, sizeof(s->areamask));
    s->message_num = snap->message_num;
    s->delta_message_num = base ? base->message_num : -1;
    sg_q3_delta_player_make(st->variant, base ? &base->ps : NULL, &snap->ps, &s->ps);
    s->first_ent = out->num_ents;

    /* the entities */
    err = emit_entities(st, snap, base, out);
    if (err < 0)
        return err;
    s = &out->snaps[si];
    s->num_ents = out->num_ents - s->first_ent;
    s->num_entities = (uint32_t)snap->num_entities;
    return 0;
}

/* Copy a byte reference from one message's pool to another's. */
static int copy_bytes(struct sg_q3_svmsg *dst, const struct sg_q3_svmsg *src,
                      struct sg_q3_bytes *ref)
{
    struct sg_q3_bytes in = *ref;
    int err = sg_q3_svmsg_add_bytes(dst, sg_q3_svmsg_bytes(src, in), in.len, ref);

    ref->cut = in.cut;
    return err;
}

/* Copy one non-snapshot, non-gamestate op (commands, nop, download, voip). */
static int copy_op(struct sg_q3_svmsg *dst, const struct sg_q3_svmsg *src,
                   const struct sg_q3_op *op)
{
    int i = sg_q3_svmsg_add_op(dst, op->type);
    struct sg_q3_op *d;
    int err = 0;

    if (i < 0)
        return i;
    d = &dst->ops[i];
    *d = *op;
    if (op->type == SG_Q3_SVC_SERVERCOMMAND) {
        err = copy_bytes(dst, src, &dst->ops[i].u.cmd.text);
    } else if (op->type == SG_Q3_SVC_DOWNLOAD) {
        err = copy_bytes(dst, src, &dst->ops[i].u.download.error);
        if (!err)
            err = copy_bytes(dst, src, &dst->ops[i].u.download.data);
    } else if (op->type == SG_Q3_SVC_VOIP_SPEEX || op->type == SG_Q3_SVC_VOIP_OPUS) {
        err = copy_bytes(dst, src, &dst->ops[i].u.voip.data);
    }
    return err;
}

/* Rebuild `msg` with its snapshot made non-delta from tracked frame `frame`. */
static int rebuild(struct sg_q3_recorder *rec, const struct sg_q3_state *st,
                   const struct sg_q3_svmsg *msg, const struct sg_q3_snapshot *frame)
{
    struct sg_q3_svmsg *out = &rec->scratch;
    int err = 0;

    sg_q3_svmsg_reset(out);
    out->variant = st->variant;
    out->sequence = msg->sequence;
    out->reliable_ack = msg->reliable_ack;
    for (uint32_t i = 0; i < msg->num_ops && !err; i++) {
        const struct sg_q3_op *op = &msg->ops[i];

        if (op->type == SG_Q3_SVC_SNAPSHOT)
            err = sg_q3_record_snapshot(st, frame, NULL, out);
        else if (op->type != SG_Q3_SVC_GAMESTATE)
            err = copy_op(out, msg, op);
    }
    if (err)
        return err;
    err = sg_q3_write_server_message(out, rec->buf, sizeof(rec->buf));
    if (err < 0)
        return err;
    return sg_q3_demo_write(rec->w, msg->sequence, rec->buf, (size_t)err);
}

/* Write the synthesized gamestate that opens a mid-stream recording. */
static int write_gamestate(struct sg_q3_recorder *rec, const struct sg_q3_state *st,
                           const struct sg_q3_svmsg *msg)
{
    int32_t command_seq = st->server_command_seq;
    int err;

    /* the player must still run this message's new commands */
    for (uint32_t i = 0; i < msg->num_ops; i++) {
        const struct sg_q3_op *op = &msg->ops[i];

        if (op->type == SG_Q3_SVC_SERVERCOMMAND && op->u.cmd.fresh &&
            sg_q3_seqdiff(op->u.cmd.sequence, command_seq) <= 0)
            command_seq = sg_q3_seqadd(op->u.cmd.sequence, -1);
    }
    sg_q3_svmsg_reset(&rec->scratch);
    rec->scratch.reliable_ack = msg->reliable_ack;
    err = sg_q3_record_gamestate(st, command_seq, &rec->scratch);
    if (err < 0)
        return err;
    err = sg_q3_write_server_message(&rec->scratch, rec->buf, sizeof(rec->buf));
    if (err < 0)
        return err;
    return sg_q3_demo_write(rec->w, sg_q3_seqadd(msg->sequence, -1), rec->buf, (size_t)err);
}

void sg_q3_recorder_init(struct sg_q3_recorder *rec, struct sg_q3_demo_writer *w)
{
    memset(rec, 0, sizeof(*rec));
    rec->w = w;
    sg_q3_svmsg_init(&rec->scratch);
}

void sg_q3_recorder_finish(struct sg_q3_recorder *rec)
{
    if (!rec)
        return;
    sg_q3_svmsg_finish(&rec->scratch);
}

/* Remember that the file now holds frame `num` (a ring of the variant's packet backup). */
static void mark(struct sg_q3_recorder *rec, const struct sg_q3_state *st, int32_t num)
{
    int32_t mask = st->variant->packet_backup - 1;

    rec->have[num & mask] = num;
    rec->have_valid[num & mask] = true;
}

/* Does the file hold frame `num`? */
static bool holds(const struct sg_q3_recorder *rec, const struct sg_q3_state *st, int32_t num)
{
    int32_t mask = st->variant->packet_backup - 1;

    return rec->have_valid[num & mask] && rec->have[num & mask] == num;
}

int sg_q3_recorder_feed(struct sg_q3_recorder *rec, const struct sg_q3_state *st,
                        const struct sg_q3_svmsg *msg, int parse_err, const uint8_t *raw,
                        size_t len)
{
    const struct sg_q3_snap *s = parse_err < 0 ? NULL : sg_q3_svmsg_snapshot(msg);
    const struct sg_q3_snapshot *frame = s ? sg_q3_state_snapshot(st, s->message_num) : NULL;
    bool gamestate = parse_err >= 0 && sg_q3_svmsg_count(msg, SG_Q3_SVC_GAMESTATE) > 0;
    int err;

    /* a gamestate restarts everything; the message goes out as it is */
    if (gamestate) {
        memset(rec->have_valid, 0, sizeof(rec->have_valid));
        rec->started = true;
        if (frame && s->status == 0)
            mark(rec, st, s->message_num);
        err = sg_q3_demo_write(rec->w, msg->sequence, raw, len);
        rec->written += err == 0;
        return err < 0 ? err : 1;
    }

    /* not started: wait for a valid snapshot, then gamestate + non-delta snapshot */
    if (!rec->started) {
        if (!frame || s->status != 0 || !st->have_gamestate)
            return 0;
        err = write_gamestate(rec, st, msg);
        if (!err)
            err = rebuild(rec, st, msg, frame);
        if (err < 0)
            return err;
        rec->started = true;
        rec->written += 2;
        rec->rewritten++;
        mark(rec, st, s->message_num);
        return 1;
    }

    /* started: raw, unless the snapshot's base is not in the file */
    if (frame && s->delta_num != 0 && !holds(rec, st, s->delta_message_num)) {
        err = rebuild(rec, st, msg, frame);
        rec->rewritten += err == 0;
    } else {
        err = sg_q3_demo_write(rec->w, msg->sequence, raw, len);
    }
    if (err < 0)
        return err;
    rec->written++;
    if (frame && s->status == 0)
        mark(rec, st, s->message_num);
    return 1;
}
