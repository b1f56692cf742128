/*
 * Quake 3 client messages: decode as SV_ExecuteClientMessage / SV_UserMove
 * read them, encode as CL_WritePacket writes them (layout in clmsg.h).
 */
#include "protocols/q3/clmsg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/error.h"

/* Usercmd fields in wire order, with their widths. */
static const struct {
    const char *name;
    int bits;
} ucmd_fields[SG_Q3_USERCMD_FIELDS] = {
    {"angles[0]", 16}, {"angles[1]", 16}, {"angles[2]", 16}, {"forwardmove", 8},
    {"rightmove", 8},  {"upmove", 8},     {"buttons", 16},   {"weapon", 8},
};

const char *sg_q3_usercmd_field_name(int field)
{
    if (field < 0 || field >= SG_Q3_USERCMD_FIELDS)
        return "?";
    return ucmd_fields[field].name;
}

/* ---- reliable command rings and keys ---- */

int sg_q3_ring_store(struct sg_q3_reliable_ring *ring, int32_t seq, const char *text)
{
    unsigned i = (unsigned)seq & (SG_Q3_MAX_RELIABLE_COMMANDS - 1);
    size_t len = strlen(text);

    /* never let an old command overwrite a newer one in its slot */
    if ((int64_t)ring->highest - seq >= SG_Q3_MAX_RELIABLE_COMMANDS)
        return 0;
    if (len > SG_Q3_MAX_STRING_CHARS - 1)
        len = SG_Q3_MAX_STRING_CHARS - 1;
    if (len + 1 > ring->cap[i]) {
        size_t cap = (len + 64) & ~(size_t)63; /* 64-byte steps, at most 1024 */
        char *p = realloc(ring->cmd[i], cap);

        if (!p) {
            if (ring->cmd[i])
                ring->cmd[i][0] = '\0';
            ring->hash[i] = 0;
            return -ENOMEM;
        }
        ring->cmd[i] = p;
        ring->cap[i] = (uint16_t)cap;
    }
    memcpy(ring->cmd[i], text, len);
    ring->cmd[i][len] = '\0';
    ring->hash[i] = sg_q3_hash_key(ring->cmd[i], 32); /* once, not per message keyed with it */
    if (seq > ring->highest)
        ring->highest = seq;
    return 0;
}

const char *sg_q3_ring_get(const struct sg_q3_reliable_ring *ring, int32_t seq)
{
    const char *s;

    if (!ring)
        return "";
    s = ring->cmd[(unsigned)seq & (SG_Q3_MAX_RELIABLE_COMMANDS - 1)];
    return s ? s : "";
}

int32_t sg_q3_ring_hash(const struct sg_q3_reliable_ring *ring, int32_t seq)
{
    return ring ? ring->hash[(unsigned)seq & (SG_Q3_MAX_RELIABLE_COMMANDS - 1)] : 0;
}

void sg_q3_ring_finish(struct sg_q3_reliable_ring *ring)
{
    if (!ring)
        return;
    for (int i = 0; i < SG_Q3_MAX_RELIABLE_COMMANDS; i++)
        free(ring->cmd[i]);
    memset(ring, 0, sizeof(*ring));
}

int32_t sg_q3_hash_key(const char *s, int maxlen)
{
    int32_t hash = 0;

    for (int i = 0; i < maxlen && s[i] != '\0'; i++) {
        unsigned char c = (unsigned char)s[i];

        /* MSG_HashKey counts '%' and bytes > 127 as '.', as the reader stores them */
        if ((c & 0x80) || c == '%')
            c = '.';
        hash += (int32_t)c * (119 + i);
    }
    return hash ^ (hash >> 10) ^ (hash >> 20);
}

int32_t sg_q3_clmsg_key(int32_t checksum_feed, int32_t message_ack, const char *acked_cmd)
{
    return checksum_feed ^ message_ack ^ sg_q3_hash_key(acked_cmd, 32);
}

/* ---- raw bit copies for the tail ---- */

static void copy_bits(uint8_t *dst, size_t dst_bit, const uint8_t *src, size_t src_bit,
                      size_t nbits)
{
    for (size_t i = 0; i < nbits; i++) {
        size_t s = src_bit + i, d = dst_bit + i;
        unsigned v = (src[s >> 3] >> (s & 7)) & 1u;

        dst[d >> 3] = (uint8_t)((dst[d >> 3] & ~(1u << (d & 7))) | (v << (d & 7)));
    }
}

/* Keep the bits from `bit` to the end of the message as the tail. */
static void save_tail(struct sg_q3_clmsg *out, const uint8_t *data, size_t len, size_t bit)
{
    size_t total = len * 8;

    out->tail_bits = bit < total ? total - bit : 0;
    memset(out->tail, 0, (out->tail_bits + 7) / 8);
    copy_bits(out->tail, 0, data, bit, out->tail_bits);
}

/* ---- usercmds ---- */

void sg_q3_usercmd_make_wire(const struct sg_q3_usercmd *from, const struct sg_q3_usercmd *to,
                             struct sg_q3_usercmd_wire *w)
{
    int32_t f[SG_Q3_USERCMD_FIELDS] = {from->angles[0],   from->angles[1], from->angles[2],
                                       from->forwardmove, from->rightmove, from->upmove,
                                       from->buttons,     from->weapon};
    int32_t t[SG_Q3_USERCMD_FIELDS] = {to->angles[0], to->angles[1], to->angles[2], to->forwardmove,
                                       to->rightmove, to->upmove,    to->buttons,   to->weapon};

    memset(w, 0, sizeof(*w));
    /* MSG_WriteDeltaUsercmdKey: the 8-bit form when the difference is below 256 */
    w->time_delta = (int64_t)to->server_time - from->server_time < 256;
    w->time = w->time_delta ? (uint32_t)(to->server_time - from->server_time) & 0xff
                            : (uint32_t)to->server_time;
    for (int i = 0; i < SG_Q3_USERCMD_FIELDS; i++) {
        uint32_t mask = (1u << ucmd_fields[i].bits) - 1;

        w->value[i] = (uint32_t)t[i] & mask;
        if (f[i] != t[i])
            w->changed = true;
    }
    if (!w->changed)
        return;
    /* with any change, every field that differs is sent */
    for (int i = 0; i < SG_Q3_USERCMD_FIELDS; i++)
        if (f[i] != t[i])
            w->sent |= (uint8_t)(1u << i);
}

/* ---- decode ---- */

/* One usercmd delta from `from` (MSG_ReadDeltaUsercmdKey). */
static void read_usercmd(struct sg_q3_msg *m, int32_t key, const struct sg_q3_usercmd *from,
                         struct sg_q3_usercmd *to, struct sg_q3_usercmd_wire *w)
{
    int32_t v[SG_Q3_USERCMD_FIELDS];

    memset(w, 0, sizeof(*w));
    w->time_delta = sg_q3_msg_read_bits(m, 1) != 0;
    w->time = (uint32_t)sg_q3_msg_read_bits(m, w->time_delta ? 8 : 32);
    to->server_time =
        w->time_delta ? (int32_t)((uint32_t)from->server_time + w->time) : (int32_t)w->time;
    /* a delta of 256 (the NYT code) has no 8-bit form: keep the time as 32 bits */
    if (w->time_delta && w->time > 0xff) {
        w->time_delta = false;
        w->time = (uint32_t)to->server_time;
    }

    /* unchanged fields come from the previous command */
    v[0] = from->angles[0];
    v[1] = from->angles[1];
    v[2] = from->angles[2];
    v[3] = from->forwardmove;
    v[4] = from->rightmove;
    v[5] = from->upmove;
    v[6] = from->buttons;
    v[7] = from->weapon;

    w->changed = sg_q3_msg_read_bits(m, 1) != 0;
    if (w->changed) {
        int32_t k = key ^ to->server_time;

        for (int f = 0; f < SG_Q3_USERCMD_FIELDS; f++) {
            uint32_t mask =
                ucmd_fields[f].bits == 32 ? 0xffffffffu : (1u << ucmd_fields[f].bits) - 1;

            if (!sg_q3_msg_read_bits(m, 1))
                continue;
            w->sent |= (uint8_t)(1u << f);
            w->value[f] =
                ((uint32_t)sg_q3_msg_read_bits(m, ucmd_fields[f].bits) ^ ((uint32_t)k & mask)) &
                mask;
            v[f] = (int32_t)w->value[f];
        }
    }

    /* the game's types: angles and buttons int, moves signed char (-128 read as -127) */
    to->angles[0] = v[0];
    to->angles[1] = v[1];
    to->angles[2] = v[2];
    to->forwardmove = (int8_t)(uint8_t)v[3];
    to->rightmove = (int8_t)(uint8_t)v[4];
    to->upmove = (int8_t)(uint8_t)v[5];
    if ((w->sent & 0x08) && to->forwardmove == -128)
        to->forwardmove = -127;
    if ((w->sent & 0x10) && to->rightmove == -128)
        to->rightmove = -127;
    if ((w->sent & 0x20) && to->upmove == -128)
        to->upmove = -127;
    to->buttons = v[6];
    to->weapon = (uint8_t)v[7];
}

/* The move op after its opcode: count, then the deltas. */
static int read_move(struct sg_q3_msg *m, struct sg_q3_clmsg *out)
{
    struct sg_q3_usercmd null_cmd = {0};
    const struct sg_q3_usercmd *from = &null_cmd;
    int count = sg_q3_msg_read_byte(m);

    if (count < 1 || count > SG_Q3_MAX_PACKET_USERCMDS)
        return SG_E_MALFORMED; /* SV_UserMove refuses it */
    for (int i = 0; i < count; i++) {
        read_usercmd(m, out->key, from, &out->cmds[i], &out->wire[i]);
        from = &out->cmds[i];
        out->num_cmds = i + 1;
    }
    return m->overflowed ? SG_E_OVERFLOW : 0;
}

int sg_q3_clmsg_decode(const uint8_t *data, size_t len, int32_t checksum_feed,
                       const struct sg_q3_reliable_ring *server_cmds, struct sg_q3_clmsg *out)
{
    char game[SG_Q3_MAX_STRING_CHARS]; /* the game's view of a command; we keep the raw bytes */
    uint8_t padded[SG_Q3_MAX_MSGLEN + 8]; /* the message and 8 zeros: every read takes one load */
    struct sg_q3_msg m;
    size_t mark;
    int op, err;

    /* only the counts and flags: the arrays are filled as far as they are read */
    out->num_commands = 0;
    out->move_op = 0;
    out->num_cmds = 0;
    out->key = 0;
    out->eof = false;
    out->stop_op = -1;
    out->tail_bits = 0;
    if (len > SG_Q3_MAX_MSGLEN)
        return SG_E_TOOBIG; /* more than the game's buffer, and than `tail` holds */
    if (len)
        memcpy(padded, data, len);
    memset(padded + len, 0, 8);
    sg_q3_msg_init_read_padded(&m, padded, len);

    /* The three longs every client message starts with. */
    out->server_id = sg_q3_msg_read_long(&m);
    out->message_ack = sg_q3_msg_read_long(&m);
    out->reliable_ack = sg_q3_msg_read_long(&m);
    if (m.overflowed)
        return SG_E_OVERFLOW;
    out->key = checksum_feed ^ out->message_ack ^ sg_q3_ring_hash(server_cmds, out->reliable_ack);

    /* Reliable commands, until another op. */
    for (;;) {
        struct sg_q3_reliable_cmd *c;

        mark = m.bit;
        op = sg_q3_msg_read_byte(&m);
        if (op != SG_Q3_CLC_CLIENTCOMMAND)
            break;
        if (out->num_commands == SG_Q3_MAX_RELIABLE_COMMANDS)
            return SG_E_MALFORMED; /* more than the client can have unacknowledged */
        c = &out->commands[out->num_commands];
        c->sequence = sg_q3_msg_read_long(&m);
        c->len = (uint16_t)sg_q3_msg_read_string(&m, game, sizeof(game), c->text);
        if (m.overflowed)
            return SG_E_OVERFLOW;
        out->num_commands++;
    }

    /* At most one move. */
    if (op == SG_Q3_CLC_MOVE || op == SG_Q3_CLC_MOVE_NODELTA) {
        out->move_op = op;
        err = read_move(&m, out);
        if (err < 0)
            return err;
        mark = m.bit;
        op = sg_q3_msg_read_byte(&m);
    }

    /* clc_EOF, or an op left for the tail. */
    if (op == SG_Q3_CLC_EOF) {
        out->eof = true;
        save_tail(out, data, len, m.bit);
        return 0;
    }
    out->stop_op = op;
    save_tail(out, data, len, mark);
    if (op == -1)
        return SG_E_OVERFLOW;
    if (op == SG_Q3_CLC_VOIP_SPEEX || op == SG_Q3_CLC_VOIP_OPUS)
        return 0; /* kept raw */
    return SG_E_MALFORMED;
}

/* ---- encode ---- */

/* One usercmd from its wire record; `*time` is the previous command's serverTime, then this one's.
 */
static void write_usercmd(struct sg_q3_msg *m, int32_t key, int32_t *time,
                          const struct sg_q3_usercmd_wire *w)
{
    *time = w->time_delta ? (int32_t)((uint32_t)*time + (w->time & 0xff)) : (int32_t)w->time;
    sg_q3_msg_write_bits(m, w->time_delta ? 1 : 0, 1);
    sg_q3_msg_write_bits(m, (int32_t)w->time, w->time_delta ? 8 : 32);
    sg_q3_msg_write_bits(m, w->changed ? 1 : 0, 1);
    if (!w->changed)
        return;
    key ^= *time;
    for (int f = 0; f < SG_Q3_USERCMD_FIELDS; f++) {
        if (!(w->sent & (1u << f))) {
            sg_q3_msg_write_bits(m, 0, 1);
            continue;
        }
        sg_q3_msg_write_bits(m, 1, 1);
        sg_q3_msg_write_bits(m, (int32_t)(w->value[f] ^ (uint32_t)key), ucmd_fields[f].bits);
    }
}

int sg_q3_clmsg_encode(const struct sg_q3_clmsg *cm, int32_t checksum_feed,
                       const struct sg_q3_reliable_ring *server_cmds, uint8_t *buf, size_t cap)
{
    struct sg_q3_msg m;
    size_t bytes;
    int32_t key;

    sg_q3_msg_init_write(&m, buf, cap);
    sg_q3_msg_write_long(&m, cm->server_id);
    sg_q3_msg_write_long(&m, cm->message_ack);
    sg_q3_msg_write_long(&m, cm->reliable_ack);

    /* Reliable commands: raw bytes, as they travelled. */
    for (int i = 0; i < cm->num_commands; i++) {
        const struct sg_q3_reliable_cmd *c = &cm->commands[i];

        sg_q3_msg_write_byte(&m, SG_Q3_CLC_CLIENTCOMMAND);
        sg_q3_msg_write_long(&m, c->sequence);
        sg_q3_msg_write_string(&m, c->text, c->len);
    }

    /* The move, keyed with the receiver's view. */
    if (cm->move_op) {
        key = checksum_feed ^ cm->message_ack ^ sg_q3_ring_hash(server_cmds, cm->reliable_ack);
        int32_t time = 0;

        sg_q3_msg_write_byte(&m, cm->move_op);
        sg_q3_msg_write_byte(&m, cm->num_cmds);
        for (int i = 0; i < cm->num_cmds; i++)
            write_usercmd(&m, key, &time, &cm->wire[i]);
    }
    if (cm->eof)
        sg_q3_msg_write_byte(&m, SG_Q3_CLC_EOF);
    if (m.overflowed)
        return SG_E_OVERFLOW;

    /* The tail bits follow the last bit written; at least the game's length, (bit >> 3) + 1. */
    bytes = (m.bit + cm->tail_bits + 7) / 8;
    if (bytes < (m.bit >> 3) + 1)
        bytes = (m.bit >> 3) + 1;
    if (bytes > cap)
        return SG_E_OVERFLOW;
    if (bytes > (m.bit + 7) / 8)
        memset(buf + (m.bit + 7) / 8, 0, bytes - (m.bit + 7) / 8);
    copy_bits(buf, m.bit, cm->tail, 0, cm->tail_bits);
    return (int)bytes;
}

bool sg_q3_clmsg_disconnects(const struct sg_q3_clmsg *cm)
{
    for (int i = 0; i < cm->num_commands && i < SG_Q3_MAX_RELIABLE_COMMANDS; i++)
        if (sg_q3_command_is(cm->commands[i].text, "disconnect"))
            return true;
    return false;
}
