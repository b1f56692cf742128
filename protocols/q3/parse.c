/*
 * Quake 3 server message decoder (CL_ParseServerMessage and what it calls:
 * CL_ParseGamestate, CL_ParseCommandString, CL_ParseSnapshot,
 * CL_ParsePacketEntities, CL_ParseDownload, CL_ParseVoip).  The wire
 * layout is drawn in svmsg.h, the delta records in delta.h.
 *
 * Rules enforced, as the game does:
 *  - the message ends with svc_EOF read strictly before the last byte
 *    (the reader's overflow flag), else SG_E_OVERFLOW;
 *  - unknown ops, svc_configstring / svc_baseline outside a gamestate,
 *    configstring index outside the variant's (0..1023 in 68), more than MAX_GAMESTATE_CHARS of
 *    configstrings, an areamask over 32 bytes, lc beyond a field table and
 *    a download chunk over MAX_MSGLEN are SG_E_MALFORMED;
 *  - strings stop at the game's limits (1024 / 8192 bytes, the last one
 *    read and dropped) and keep their raw bytes for the writer;
 *  - a snapshot delta'd from a frame the client no longer has (invalid,
 *    overwritten, or whose entities left the parse ring) is decoded
 *    against the stale frame like the game does, flagged SG_E_NODELTA,
 *    and not stored.
 * One rule is ours: entity numbers in a snapshot must increase (servers
 * always send them sorted); otherwise SG_E_MALFORMED.
 */
#include "protocols/q3/svmsg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/error.h"
#include "protocols/q3/msg.h"
#include "protocols/q3/state.h"

/* Parsing context for one message; kept by the state between messages. */
struct parse {
    struct sg_q3_state *st;
    const struct sg_q3_variant *v; /* the state's, for this message */
    struct sg_q3_msg m;
    struct sg_q3_svmsg *out;
    uint8_t str[SG_Q3_MAX_MSGLEN + 1]; /* raw bytes of the string being read */
    uint8_t msg[SG_Q3_MAX_MSGLEN + 8]; /* the message, padded for the bit reader */
};

/*
 * Read a string as MSG_ReadString does: bytes up to 0, at most cap - 1
 * kept; with no terminator in sight the game reads one more byte, drops it
 * and stops, which we record as `cut` with that byte kept in the raw copy.
 */
static int read_string(struct parse *p, size_t cap, struct sg_q3_bytes *ref)
{
    bool ended;
    size_t len = sg_q3_msg_read_run(&p->m, p->str, cap, 0, &ended);
    bool cut = len >= cap;
    int err;

    /* the rest (near the end of the message) byte by byte */
    while (!ended && !cut) {
        int c = sg_q3_msg_read_byte(&p->m);

        if (c == -1 || c == 0)
            break;
        p->str[len++] = (uint8_t)c;
        if (len >= cap) {
            cut = true;
            break;
        }
    }
    err = sg_q3_svmsg_add_bytes(p->out, p->str, len, ref);
    ref->cut = cut;
    return err;
}

/* Read `len` raw bytes into the byte pool. */
static int read_blob(struct parse *p, size_t len, struct sg_q3_bytes *ref)
{
    if (len > sizeof(p->str))
        return SG_E_MALFORMED;
    sg_q3_msg_read_data(&p->m, p->str, len);
    return sg_q3_svmsg_add_bytes(p->out, p->str, len, ref);
}

/* svc_serverCommand: long sequence, string; stored in the state if newer. */
static int parse_command(struct parse *p, int opi)
{
    char text[SG_Q3_MAX_STRING_CHARS];
    struct sg_q3_bytes ref;
    int32_t seq = sg_q3_msg_read_long(&p->m);
    int err = read_string(p, SG_Q3_MAX_STRING_CHARS, &ref);

    if (err < 0)
        return err;
    p->out->ops[opi].u.cmd.sequence = seq;
    p->out->ops[opi].u.cmd.text = ref;
    if (p->m.overflowed)
        return SG_E_OVERFLOW;
    sg_q3_game_string(sg_q3_svmsg_bytes(p->out, ref), ref.len - ref.cut, text, sizeof(text));
    err = sg_q3_state_server_command(p->st, seq, text);
    if (err < 0)
        return err;
    p->out->ops[opi].u.cmd.fresh = err == 1;
    return 0;
}

/* One svc_configstring inside a gamestate: short index, bigstring. */
static int parse_gs_configstring(struct parse *p, int item, int *data_count)
{
    char text[SG_Q3_BIG_INFO_STRING];
    struct sg_q3_bytes ref;
    int index = sg_q3_msg_read_short(&p->m);
    size_t len;
    int err;

    if (p->m.overflowed)
        return SG_E_OVERFLOW;
    if (index < 0 || index >= p->v->max_configstrings)
        return SG_E_MALFORMED;
    err = read_string(p, SG_Q3_BIG_INFO_STRING, &ref);
    if (err < 0)
        return err;
    p->out->items[item].index = (uint16_t)index;
    p->out->items[item].text = ref;

    /* the game appends every string to one 16000-byte buffer */
    len = sg_q3_game_string(sg_q3_svmsg_bytes(p->out, ref), ref.len - ref.cut, text, sizeof(text));
    if ((int)len + 1 + *data_count > SG_Q3_MAX_GAMESTATE_CHARS)
        return SG_E_MALFORMED;
    *data_count += (int)len + 1;
    return sg_q3_state_set_configstring(p->st, index, text, len);
}

/* One svc_baseline inside a gamestate: number, then a delta from the zero entity. */
static int parse_gs_baseline(struct parse *p, int item)
{
    static const struct sg_q3_entity null_entity;
    struct sg_q3_state *st = p->st;
    int number = sg_q3_msg_read_bits(&p->m, p->v->gentitynum_bits);
    int ei;
    int err;

    /* The NYT escape makes a "10-bit" read return up to 1027: bound it. */
    if (number < 0 || number >= p->v->max_gentities)
        return p->m.overflowed ? SG_E_OVERFLOW : SG_E_MALFORMED;
    ei = sg_q3_svmsg_add_ent(p->out);
    if (ei < 0)
        return ei;
    err = sg_q3_delta_entity_read(&p->m, p->v, number, &p->out->ents[ei]);
    if (err < 0)
        return err;
    p->out->items[item].index = (uint16_t)number;
    p->out->items[item].ent = (uint32_t)ei;
    sg_q3_delta_entity_apply(p->v, &null_entity, &p->out->ents[ei], &st->baselines[number]);
    st->baseline_used[number >> 3] |= (uint8_t)(1u << (number & 7));
    return 0;
}

/* svc_gamestate: wipes the client state, then configstrings and baselines. */
static int parse_gamestate(struct parse *p, int opi)
{
    struct sg_q3_state *st = p->st;
    uint32_t first = p->out->num_items;
    int data_count = 1;
    int err = 0;

    sg_q3_state_clear_gamestate(st);
    p->out->ops[opi].u.gamestate.command_seq = sg_q3_msg_read_long(&p->m);
    p->out->ops[opi].u.gamestate.first_item = first;
    st->server_command_seq = p->out->ops[opi].u.gamestate.command_seq;

    /* items until svc_EOF (kept as they come, so a broken gamestate still shows) */
    while (!err) {
        int cmd = sg_q3_msg_read_byte(&p->m);
        int item;

        if (p->m.overflowed)
            return SG_E_OVERFLOW;
        if (cmd == SG_Q3_SVC_EOF)
            break;
        if (cmd != SG_Q3_SVC_CONFIGSTRING && cmd != SG_Q3_SVC_BASELINE)
            return SG_E_MALFORMED;
        item = sg_q3_svmsg_add_item(p->out);
        if (item < 0)
            return item;
        p->out->items[item].op = (uint8_t)cmd;
        p->out->ops[opi].u.gamestate.num_items = p->out->num_items - first;
        if (cmd == SG_Q3_SVC_CONFIGSTRING)
            err = parse_gs_configstring(p, item, &data_count);
        else
            err = parse_gs_baseline(p, item);
    }
    if (err)
        return err;

    /* then clientNum and checksumFeed */
    st->client_num = p->out->ops[opi].u.gamestate.client_num = sg_q3_msg_read_long(&p->m);
    st->checksum_feed = p->out->ops[opi].u.gamestate.checksum_feed = sg_q3_msg_read_long(&p->m);
    if (p->m.overflowed)
        return SG_E_OVERFLOW;
    st->have_gamestate = true;
    st->gamestates++;
    return 0;
}

/* The old frame's entity `index`: its ring slot; false past its end. */
static bool old_slot(const struct sg_q3_state *st, const struct sg_q3_snapshot *old, int index,
                     struct sg_q3_parse_slot *slot)
{
    if (!old || index >= old->num_entities)
        return false;
    *slot = sg_q3__state_slot(st, old, index);
    return true;
}

/* Append an entity to the ring as part of the new frame. */
static int keep_new(struct sg_q3_state *st, int num_none, struct sg_q3_snapshot *frame,
                    const struct sg_q3_entity *e)
{
    if (e->number == num_none)
        return 0; /* removed */
    if (sg_q3__state_push_new(st, e) < 0)
        return -ENOMEM;
    frame->num_entities++;
    return 0;
}

/* Append the old frame's state of an entity, shared. */
static void keep_old(struct sg_q3_state *st, struct sg_q3_snapshot *frame,
                     struct sg_q3_parse_slot slot)
{
    sg_q3__state_push_slot(st, slot);
    frame->num_entities++;
}

/*
 * Packet entities: updates in number order, merged with the old frame's
 * list.  Carried-over entities are appended by sharing their state (their
 * number is in the ring slot: the state is not read).  With a base far
 * enough back, appending reaches the old frame's own ring slots, as in the
 * game (whose "too old" check keeps real servers' frames out of reach): a
 * state may then be recycled while it is read and give garbage, never an
 * access out of bounds (the pool's records never move).
 */
static int parse_entities(struct parse *p, const struct sg_q3_snapshot *old,
                          struct sg_q3_snapshot *frame, uint32_t *num_ents)
{
    struct sg_q3_state *st = p->st;
    const struct sg_q3_variant *v = p->v;
    /* the limits in locals: the calls below could, for the compiler, change *v */
    const int num_bits = v->gentitynum_bits, num_none = v->entitynum_none;
    const int max_num = v->max_gentities;
    int oldindex = 0, last = -1;
    struct sg_q3_parse_slot os = {0, 0};
    bool have_old = old_slot(st, old, 0, &os);
    uint32_t first = p->out->num_ents;
    int err;

    frame->parse_entities_num = st->parse_entities_num;
    frame->num_entities = 0;
    for (;;) {
        struct sg_q3_entity to;
        int newnum = sg_q3_msg_read_bits(&p->m, num_bits);
        int ei;

        if (p->m.overflowed)
            return SG_E_OVERFLOW;
        if (newnum == num_none)
            break;
        /* The NYT escape makes a "10-bit" read return up to 1027: bound it. */
        if (newnum < 0 || newnum >= max_num || newnum <= last)
            return SG_E_MALFORMED;
        last = newnum;

        /* old entities below this number are carried over unchanged */
        while (have_old && os.number < newnum) {
            keep_old(st, frame, os);
            have_old = old_slot(st, old, ++oldindex, &os);
        }

        /* the update applies to the old frame's entity or to the baseline */
        ei = sg_q3_svmsg_add_ent(p->out);
        if (ei < 0)
            return ei;
        err = sg_q3_delta_entity_read(&p->m, v, newnum, &p->out->ents[ei]);
        if (err < 0)
            return err;
        if (have_old && os.number == newnum) {
            const struct sg_q3_entity *from = sg_q3__state_ref_entity(st, os.ref);

            sg_q3_delta_entity_apply(v, from, &p->out->ents[ei], &to);
            /* unchanged by the update: share the old state */
            if (to.number != num_none && memcmp(&to, from, sizeof(to)) == 0)
                keep_old(st, frame, os);
            else if ((err = keep_new(st, num_none, frame, &to)) < 0)
                return err;
            have_old = old_slot(st, old, ++oldindex, &os);
        } else {
            sg_q3_delta_entity_apply(v, &st->baselines[newnum], &p->out->ents[ei], &to);
            if ((err = keep_new(st, num_none, frame, &to)) < 0)
                return err;
        }
    }

    /* the rest of the old frame is unchanged */
    for (; have_old; have_old = old_slot(st, old, ++oldindex, &os))
        keep_old(st, frame, os);
    *num_ents = p->out->num_ents - first;
    return 0;
}

/* Is the frame a snapshot deltas from still usable?  (CL_ParseSnapshot's checks.) */
static bool base_usable(const struct sg_q3_state *st, const struct sg_q3_snapshot *old,
                        int32_t delta_num)
{
    if (!old->valid || old->message_num != delta_num)
        return false;
    return st->parse_entities_num - old->parse_entities_num <=
           (uint32_t)(SG_Q3_MAX_PARSE_ENTITIES - SG_Q3_MAX_SNAPSHOT_ENTITIES);
}

/* Keep a valid frame: forget skipped message numbers, store it in the ring. */
static void commit_snapshot(struct sg_q3_state *st, int backup, const struct sg_q3_snapshot *frame)
{
    int32_t n = sg_q3_seqadd(st->snap_message_num, 1);

    if (sg_q3_seqdiff(frame->message_num, n) >= backup)
        n = sg_q3_seqadd(frame->message_num, -(backup - 1));
    for (int k = 1; k < backup && sg_q3_seqdiff(n, frame->message_num) < 0;
         k++, n = sg_q3_seqadd(n, 1))
        st->snapshots[n & (backup - 1)].valid = false;
    st->snap_valid = true;
    st->snap_message_num = frame->message_num;
    st->snapshots[frame->message_num & (backup - 1)] = *frame;
    st->snapshots_valid++;
}

/* svc_snapshot header, areamask, playerstate and entities. */
static int parse_snapshot(struct parse *p, int opi)
{
    struct sg_q3_state *st = p->st;
    const struct sg_q3_snapshot *old = NULL;
    struct sg_q3_snapshot frame;
    struct sg_q3_snap *s;
    int si = sg_q3_svmsg_add_snap(p->out);
    int len, err;
    bool valid = true;

    if (si < 0)
        return si;
    p->out->ops[opi].u.snap = (uint32_t)si;
    s = &p->out->snaps[si];
    memset(&frame, 0, sizeof(frame));

    /* serverTime, deltaNum, snapFlags; find the base frame */
    frame.server_command_num = st->server_command_seq;
    frame.server_time = s->server_time = sg_q3_msg_read_long(&p->m);
    frame.message_num = s->message_num = st->server_message_seq;
    s->delta_num = (uint8_t)sg_q3_msg_read_byte(&p->m);
    frame.delta_num = s->delta_num ? sg_q3_seqadd(frame.message_num, -s->delta_num) : -1;
    s->delta_message_num = s->delta_num ? frame.delta_num : -1;
    frame.snap_flags = s->snap_flags = (uint8_t)sg_q3_msg_read_byte(&p->m);
    if (frame.delta_num > 0) {
        old = &st->snapshots[frame.delta_num & (p->v->packet_backup - 1)];
        valid = base_usable(st, old, frame.delta_num);
    }

    /* areamask */
    len = sg_q3_msg_read_byte(&p->m);
    if (p->m.overflowed)
        return SG_E_OVERFLOW;
    if (len < 0 || len > SG_Q3_MAX_MAP_AREA_BYTES)
        return SG_E_MALFORMED;
    frame.areamask_len = s->areamask_len = (uint8_t)len;
    sg_q3_msg_read_data(&p->m, s->areamask, (size_t)len);
    memcpy(frame.areamask, s->areamask, (size_t)len);

    /* playerstate, then the entities */
    err = sg_q3_delta_player_read(&p->m, p->v, &s->ps);
    if (err < 0)
        return err;
    sg_q3_delta_player_apply(p->v, old ? &old->ps : NULL, &s->ps, &frame.ps);
    s->first_ent = p->out->num_ents;
    err = parse_entities(p, old, &frame, &p->out->snaps[si].num_ents);
    s = &p->out->snaps[si];
    if (err < 0)
        return err;
    if (p->m.overflowed)
        return SG_E_OVERFLOW;
    s->num_entities = (uint32_t)frame.num_entities;

    /* keep it, or report the missing base */
    frame.valid = valid;
    if (!valid) {
        s->status = SG_E_NODELTA;
        st->snapshots_nodelta++;
        return 0;
    }
    commit_snapshot(st, p->v->packet_backup, &frame);
    return 0;
}

/* svc_download: block, [size, [error]], chunk. */
static int parse_download(struct parse *p, int opi)
{
    struct sg_q3_op *op = &p->out->ops[opi];
    int len, err;

    op->u.download.block = (uint16_t)sg_q3_msg_read_short(&p->m);
    if (op->u.download.block == 0) {
        op->u.download.has_size = true;
        op->u.download.size = sg_q3_msg_read_long(&p->m);
        if (op->u.download.size < 0) {
            struct sg_q3_bytes ref;

            err = read_string(p, SG_Q3_MAX_STRING_CHARS, &ref);
            p->out->ops[opi].u.download.error = ref;
            return err;
        }
    }
    len = sg_q3_msg_read_short(&p->m);
    if (p->m.overflowed)
        return SG_E_OVERFLOW;
    if (len < 0 || len > SG_Q3_MAX_MSGLEN)
        return SG_E_MALFORMED;
    return read_blob(p, (size_t)len, &p->out->ops[opi].u.download.data);
}

/* svc_voipSpeex / svc_voipOpus: header, then the data unless a field is negative. */
static int parse_voip(struct parse *p, int opi)
{
    struct sg_q3_op *op = &p->out->ops[opi];
    int sender = sg_q3_msg_read_short(&p->m);
    int generation = sg_q3_msg_read_byte(&p->m);
    int32_t sequence = sg_q3_msg_read_long(&p->m);
    int frames = sg_q3_msg_read_byte(&p->m);
    int size = sg_q3_msg_read_short(&p->m);

    op->u.voip.flags = (uint8_t)sg_q3_msg_read_bits(&p->m, SG_Q3_VOIP_FLAGCNT);
    op->u.voip.sender = (int16_t)sender;
    op->u.voip.generation = (uint8_t)generation;
    op->u.voip.sequence = sequence;
    op->u.voip.frames = (uint8_t)frames;
    op->u.voip.size = (int16_t)size;
    if (p->m.overflowed)
        return SG_E_OVERFLOW;
    if (sender < 0 || sequence < 0 || size < 0)
        return 0; /* the game stops here and reads no data */
    return read_blob(p, (size_t)size, &p->out->ops[opi].u.voip.data);
}

/* One op after its byte. */
static int parse_op(struct parse *p, int cmd)
{
    int opi = sg_q3_svmsg_add_op(p->out, cmd);

    if (opi < 0)
        return opi;
    switch (cmd) {
    case SG_Q3_SVC_NOP:
        return 0;
    case SG_Q3_SVC_SERVERCOMMAND:
        return parse_command(p, opi);
    case SG_Q3_SVC_GAMESTATE:
        return parse_gamestate(p, opi);
    case SG_Q3_SVC_SNAPSHOT:
        return parse_snapshot(p, opi);
    case SG_Q3_SVC_DOWNLOAD:
        return parse_download(p, opi);
    case SG_Q3_SVC_VOIP_SPEEX:
    case SG_Q3_SVC_VOIP_OPUS:
        return parse_voip(p, opi);
    default:
        return SG_E_MALFORMED;
    }
}

/* Keep the bytes from the one holding the bit after svc_EOF to the end. */
static int keep_tail(struct parse *p, const uint8_t *data, size_t len)
{
    size_t start = p->m.bit >> 3;
    uint8_t first;
    int err;

    p->out->end_bit = (uint32_t)p->m.bit;
    err = sg_q3_svmsg_add_bytes(p->out, data + start, len - start, &p->out->tail);
    if (err < 0)
        return err;
    first = (uint8_t)(data[start] & ~((1u << (p->m.bit & 7)) - 1));
    p->out->bytes[p->out->tail.off] = first;
    p->out->has_tail = true;
    return 0;
}

int sg_q3_parse_server_message(struct sg_q3_state *st, int32_t sequence, const uint8_t *data,
                               size_t len, struct sg_q3_svmsg *out)
{
    struct parse *p;
    int err = 0;

    sg_q3_svmsg_reset(out);
    out->variant = st->variant;
    out->sequence = sequence;
    st->messages++;
    if (len > SG_Q3_MAX_MSGLEN) {
        st->errors++;
        return SG_E_TOOBIG;
    }
    if (!st->parse_scratch && !(st->parse_scratch = malloc(sizeof(*p))))
        return -ENOMEM;
    p = st->parse_scratch;
    p->st = st;
    p->v = st->variant;
    p->out = out;
    memcpy(p->msg, data, len);
    memset(p->msg + len, 0, 8);
    sg_q3_msg_init_read_padded(&p->m, p->msg, len);
    st->server_message_seq = sequence;

    /* reliableAcknowledge, then ops until svc_EOF */
    out->reliable_ack = sg_q3_msg_read_long(&p->m);
    st->reliable_ack = out->reliable_ack;
    while (!err) {
        int cmd;

        if (p->m.overflowed) {
            err = SG_E_OVERFLOW;
            break;
        }
        cmd = sg_q3_msg_read_byte(&p->m);
        if (p->m.overflowed) {
            err = SG_E_OVERFLOW;
            break;
        }
        if (cmd == SG_Q3_SVC_EOF) {
            err = keep_tail(p, data, len);
            break;
        }
        err = parse_op(p, cmd);
    }
    if (err < 0)
        st->errors++;
    return err < 0 ? err : 0;
}
