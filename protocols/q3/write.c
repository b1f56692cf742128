/*
 * Quake 3 server message encoder: writes a decoded message (svmsg.h) back
 * to the wire, op by op, exactly as recorded: the same ops in the same
 * order, entity and playerstate records with their lc, per-field forms and
 * masks (in the message's variant's field tables and entity number
 * width), strings with their raw bytes (and no terminator when the game had
 * cut them), then svc_EOF.  The length is the game's cursize, the byte
 * after the last bit; when the end bit is the one the message was decoded
 * with, the original tail (padding bits and any bytes after them) is put
 * back, so an unchanged message comes out byte for byte.
 */
#include "protocols/q3/svmsg.h"

#include <string.h>

#include "protocols/error.h"
#include "protocols/q3/msg.h"

/* A string: raw bytes, then 0 unless the original had none. */
static void write_string(struct sg_q3_msg *m, const struct sg_q3_svmsg *msg, struct sg_q3_bytes s)
{
    sg_q3_msg_write_data(m, sg_q3_svmsg_bytes(msg, s), s.len);
    if (!s.cut)
        sg_q3_msg_write_byte(m, 0);
}

/* svc_gamestate body: command sequence, items, svc_EOF, clientNum, checksumFeed. */
static void write_gamestate(struct sg_q3_msg *m, const struct sg_q3_variant *v,
                            const struct sg_q3_svmsg *msg, const struct sg_q3_op *op)
{
    sg_q3_msg_write_long(m, op->u.gamestate.command_seq);
    for (uint32_t i = 0; i < op->u.gamestate.num_items; i++) {
        const struct sg_q3_gs_item *it = sg_q3_gs_item(msg, op, i);

        if (!it)
            break;
        sg_q3_msg_write_byte(m, it->op);
        if (it->op == SG_Q3_SVC_CONFIGSTRING) {
            sg_q3_msg_write_short(m, it->index);
            write_string(m, msg, it->text);
        } else if (it->ent < msg->num_ents) {
            sg_q3_delta_entity_write(m, v, &msg->ents[it->ent]);
        }
    }
    sg_q3_msg_write_byte(m, SG_Q3_SVC_EOF);
    sg_q3_msg_write_long(m, op->u.gamestate.client_num);
    sg_q3_msg_write_long(m, op->u.gamestate.checksum_feed);
}

/* svc_snapshot body: header, areamask, playerstate, entities, end marker. */
static void write_snapshot(struct sg_q3_msg *m, const struct sg_q3_variant *v,
                           const struct sg_q3_svmsg *msg, const struct sg_q3_snap *s)
{
    sg_q3_msg_write_long(m, s->server_time);
    sg_q3_msg_write_byte(m, s->delta_num);
    sg_q3_msg_write_byte(m, s->snap_flags);
    sg_q3_msg_write_byte(m, s->areamask_len);
    sg_q3_msg_write_data(m, s->areamask, s->areamask_len);
    sg_q3_delta_player_write(m, v, &s->ps);
    for (uint32_t i = 0; i < s->num_ents && s->first_ent + i < msg->num_ents; i++)
        sg_q3_delta_entity_write(m, v, &msg->ents[s->first_ent + i]);
    sg_q3_msg_write_bits(m, v->entitynum_none, v->gentitynum_bits);
}

/* svc_download body. */
static void write_download(struct sg_q3_msg *m, const struct sg_q3_svmsg *msg,
                           const struct sg_q3_op *op)
{
    sg_q3_msg_write_short(m, op->u.download.block);
    if (op->u.download.has_size) {
        sg_q3_msg_write_long(m, op->u.download.size);
        if (op->u.download.size < 0) {
            write_string(m, msg, op->u.download.error);
            return;
        }
    }
    sg_q3_msg_write_short(m, (int)op->u.download.data.len);
    sg_q3_msg_write_data(m, sg_q3_svmsg_bytes(msg, op->u.download.data), op->u.download.data.len);
}

/* svc_voip* body. */
static void write_voip(struct sg_q3_msg *m, const struct sg_q3_svmsg *msg,
                       const struct sg_q3_op *op)
{
    sg_q3_msg_write_short(m, op->u.voip.sender);
    sg_q3_msg_write_byte(m, op->u.voip.generation);
    sg_q3_msg_write_long(m, op->u.voip.sequence);
    sg_q3_msg_write_byte(m, op->u.voip.frames);
    sg_q3_msg_write_short(m, op->u.voip.size);
    sg_q3_msg_write_bits(m, op->u.voip.flags, SG_Q3_VOIP_FLAGCNT);
    sg_q3_msg_write_data(m, sg_q3_svmsg_bytes(msg, op->u.voip.data), op->u.voip.data.len);
}

/* One op: its byte, then its body. */
static void write_op(struct sg_q3_msg *m, const struct sg_q3_variant *v,
                     const struct sg_q3_svmsg *msg, const struct sg_q3_op *op)
{
    sg_q3_msg_write_byte(m, op->type);
    switch (op->type) {
    case SG_Q3_SVC_SERVERCOMMAND:
        sg_q3_msg_write_long(m, op->u.cmd.sequence);
        write_string(m, msg, op->u.cmd.text);
        break;
    case SG_Q3_SVC_GAMESTATE:
        write_gamestate(m, v, msg, op);
        break;
    case SG_Q3_SVC_SNAPSHOT:
        if (op->u.snap < msg->num_snaps)
            write_snapshot(m, v, msg, &msg->snaps[op->u.snap]);
        break;
    case SG_Q3_SVC_DOWNLOAD:
        write_download(m, msg, op);
        break;
    case SG_Q3_SVC_VOIP_SPEEX:
    case SG_Q3_SVC_VOIP_OPUS:
        write_voip(m, msg, op);
        break;
    default:
        break;
    }
}

int sg_q3_write_server_message(const struct sg_q3_svmsg *msg, uint8_t *buf, size_t cap)
{
    const struct sg_q3_variant *v = sg_q3_svmsg_variant(msg);
    struct sg_q3_msg m;
    size_t len, start;
    const uint8_t *tail;

    /* reliableAcknowledge, the ops, svc_EOF */
    sg_q3_msg_init_write(&m, buf, cap);
    sg_q3_msg_write_long(&m, msg->reliable_ack);
    for (uint32_t i = 0; i < msg->num_ops; i++)
        write_op(&m, v, msg, &msg->ops[i]);
    sg_q3_msg_write_byte(&m, SG_Q3_SVC_EOF);
    if (m.overflowed)
        return SG_E_OVERFLOW;
    len = m.size;

    /* the original padding and trailing bytes, when the content ends at the same bit */
    if (!msg->has_tail || m.bit != msg->end_bit || msg->tail.len == 0)
        return (int)len;
    start = m.bit >> 3;
    if (start + msg->tail.len > cap)
        return SG_E_OVERFLOW;
    tail = sg_q3_svmsg_bytes(msg, msg->tail);
    /* merged into the last written byte; past what the writer zeroed, set */
    for (uint32_t i = 0; i < msg->tail.len; i++)
        buf[start + i] = (uint8_t)((start + i < m.zeroed ? buf[start + i] : 0) | tail[i]);
    return (int)(start + msg->tail.len);
}
