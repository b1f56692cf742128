/*
 * Quake 2 client messages (clc_*), as Q2PRO's server reads them
 * (src/server/user.c), into the parse's fields (parse.h).
 */
#include "protocols/q2/parse.h"

/* ---- clc ---- */

static void usercmd(struct ctx *c, bool hacked)
{
    uint32_t bits = num(c, "cmdbits", SG_BMSG_U8);
    uint32_t buttons = 0;

    if (hacked && (bits & 0x40))
        buttons = num(c, "buttons", SG_BMSG_U8);
    if (bits & 0x01)
        num(c, "angle0", (buttons & 0x20) ? SG_BMSG_S8 : SG_BMSG_S16);
    if (bits & 0x02)
        num(c, "angle1", (buttons & 0x40) ? SG_BMSG_S8 : SG_BMSG_S16);
    if (bits & 0x04)
        num(c, "angle2", SG_BMSG_S16);
    if (bits & 0x08)
        num(c, "forward", (buttons & 0x04) ? SG_BMSG_S8 : SG_BMSG_S16);
    if (bits & 0x10)
        num(c, "side", (buttons & 0x08) ? SG_BMSG_S8 : SG_BMSG_S16);
    if (bits & 0x20)
        num(c, "up", (buttons & 0x10) ? SG_BMSG_S8 : SG_BMSG_S16);
    if (!hacked && (bits & 0x40))
        num(c, "buttons", SG_BMSG_U8);
    if (bits & 0x80)
        num(c, "impulse", SG_BMSG_U8);
    num(c, "msec", SG_BMSG_U8);
    num(c, "lightlevel", SG_BMSG_U8);
}

/* MSG_ReadBits: LSB first, bytes pulled as needed; negative = signed. */
static int32_t rbits(struct ctx *c, int n)
{
    bool sgn = n < 0;
    uint32_t v;

    if (sgn)
        n = -n;
    while ((uint32_t)n > c->bits_left) {
        int b = sg_bmsg_peek_u8(&c->r);
        if (b < 0) {
            fail(c, SG_E_OVERFLOW);
            return 0;
        }
        c->r.pos++;
        c->bits_buf |= (uint32_t)b << c->bits_left;
        c->bits_left += 8;
    }
    v = c->bits_buf & ((1u << n) - 1);
    c->bits_buf >>= n;
    c->bits_left -= (uint32_t)n;
    if (sgn && (v & (1u << (n - 1))))
        return (int32_t)(v | ~((1u << n) - 1));
    return (int32_t)v;
}

static void enhanced_cmd(struct ctx *c)
{
    int32_t bits;

    if (!rbits(c, 1)) {
        value(c, "changed", 0);
        return;
    }
    bits = rbits(c, 8);
    value(c, "cmdbits", bits);
    if (bits & 0x01) {
        if (rbits(c, 1))
            value(c, "angle0_delta", rbits(c, -8));
        else
            value(c, "angle0", rbits(c, -16));
    }
    if (bits & 0x02) {
        if (rbits(c, 1))
            value(c, "angle1_delta", rbits(c, -8));
        else
            value(c, "angle1", rbits(c, -16));
    }
    if (bits & 0x04)
        value(c, "angle2", rbits(c, -16));
    if (bits & 0x08)
        value(c, "forward", rbits(c, -10));
    if (bits & 0x10)
        value(c, "side", rbits(c, -10));
    if (bits & 0x20)
        value(c, "up", rbits(c, -10));
    if (bits & 0x40)
        value(c, "buttons", rbits(c, 3));
    if (bits & 0x80)
        value(c, "msec", rbits(c, 8));
}

/* Q2PRO's clc_move_batched / clc_move_nodelta: the bit stream is kept as
 * its bytes (one DATA field), its commands as values. */
static void batched_move(struct ctx *c, int op)
{
    int dups = op >> 5;
    size_t at;
    uint32_t first;

    if ((op & 0x1f) == SG_Q2_CLC_MOVE_BATCHED)
        num(c, "lastframe", SG_BMSG_S32);
    num(c, "lightlevel", SG_BMSG_U8);
    if (c->r.overflowed)
        return;
    at = c->r.pos;
    first = c->out->nfields;
    push(c, "cmds", SG_FIELD_DATA);
    c->bits_buf = 0;
    c->bits_left = 0;
    for (int i = 0; i <= dups && !c->r.overflowed; i++) {
        int32_t n = rbits(c, 5);
        value(c, "numcmds", n);
        if (n >= 16) { /* MAX_PACKET_USERCMDS */
            fail(c, SG_E_MALFORMED);
            return;
        }
        for (int j = 0; j < n && !c->r.overflowed; j++)
            enhanced_cmd(c);
    }
    if (first < c->out->nfields) {
        c->out->fields[first].ptr = c->r.data + at;
        c->out->fields[first].len = (uint32_t)(c->r.pos - at);
    }
    c->out->moves++;
}

static void clc(struct ctx *c, int op)
{
    int proto = c->v->protocol;

    if (proto == 36 && ((op & 0x1f) == SG_Q2_CLC_MOVE_NODELTA ||
                        (op & 0x1f) == SG_Q2_CLC_MOVE_BATCHED)) {
        batched_move(c, op);
        return;
    }
    switch (op) {
    case SG_Q2_CLC_NOP:
        break;
    case SG_Q2_CLC_MOVE: {
        bool hacked = proto == 35 && c->v->minor >= 1904;
        uint32_t first = c->out->nfields;
        size_t at = c->r.pos;
        if (proto <= 34)
            num(c, "checksum", SG_BMSG_U8);
        num(c, "lastframe", SG_BMSG_S32);
        usercmd(c, hacked);
        usercmd(c, hacked);
        usercmd(c, hacked);
        c->out->moves++;
        if (proto <= 34 && !c->r.overflowed && first < c->out->nfields) {
            uint8_t sum = sg_q2_move_checksum(c->r.data + at + 1, c->r.pos - at - 1,
                                              c->out->sequence);
            if (sum == c->out->fields[first].raw)
                c->out->msgs[c->out->nmsgs - 1].sum_ok = true;
            else
                c->out->moves_bad++;
        }
        break;
    }
    case SG_Q2_CLC_USERINFO:
    case SG_Q2_CLC_STRINGCMD:
        str(c, "text", NULL);
        break;
    case SG_Q2_CLC_SETTING:
        if (proto < 35)
            goto bad;
        num(c, "index", SG_BMSG_S16);
        num(c, "value", SG_BMSG_S16);
        break;
    case SG_Q2_CLC_USERINFO_DELTA:
        if (proto != 36)
            goto bad;
        str(c, "key", NULL);
        str(c, "value", NULL);
        break;
    default:
    bad:
        fail(c, SG_E_MALFORMED);
        break;
    }
}

/* ---- for the parser's other files (parse.h) ---- */

void sg_q2__clc(struct ctx *c, int op)
{
    clc(c, op);
}
