/*
 * The Quake 2 netchan: the header of an in-game datagram read and written
 * (id's, R1Q2's one-byte qport, Q2PRO's new netchan with its fragment
 * bits) and the datagrams a fragmented message came in, kept for an
 * unchanged rebuild.
 */
#include "protocols/q2/session.h"

#include "protocols/byteorder.h"
#include "protocols/error.h"

#include <string.h>

int sg_q2__read_header(struct q2c *c, enum sg_dir dir, const uint8_t *d, size_t n, struct hdr *h)
{
    size_t at = 8;
    bool nc = c->nctype == 1 && c->protocol == 36;
    uint32_t w1, w2;

    memset(h, 0, sizeof(*h));
    if (n < 8)
        return SG_E_TRUNCATED;
    w1 = sg_le32(d);
    w2 = sg_le32(d + 4);
    h->w1 = w1;
    h->w2 = w2;
    h->reliable = (w1 & REL_BIT) != 0;
    h->ack_reliable = (w2 & REL_BIT) != 0;
    h->seq = w1 & (nc ? NEW_MASK : OLD_MASK);
    h->ack = w2 & (nc ? NEW_MASK : OLD_MASK);
    h->fragment = nc && (w1 & FRG_BIT);
    if (dir == SG_DIR_C2S) {
        if (c->protocol == 35 || c->protocol == 36)
            h->qport_width = c->qport >= 0 && (c->qport & 0xff) ? 1 : 0;
        else
            h->qport_width = 2;
        if (n < at + (size_t)h->qport_width)
            return SG_E_TRUNCATED;
        if (h->qport_width == 2)
            h->qport = sg_le16(d + at);
        else if (h->qport_width == 1)
            h->qport = d[at];
        h->has_qport = h->qport_width > 0;
        at += (size_t)h->qport_width;
    }
    if (h->fragment) {
        uint32_t w;
        if (n < at + 2)
            return SG_E_TRUNCATED;
        w = sg_le16(d + at);
        h->more = (w & 0x8000) != 0;
        h->offset = w & 0x7fff;
        at += 2;
    }
    return (int)at;
}

void sg_q2__write_header(const struct q2c *c, const struct hdr *h, bool fragment, bool more,
                         uint32_t offset, struct sg_bmsg_writer *w)
{
    uint32_t w1 = fragment ? h->w1 | FRG_BIT : h->w1;

    (void)c;
    sg_bmsg_write_u32(w, w1);
    sg_bmsg_write_u32(w, h->w2);
    if (h->qport_width == 2)
        sg_bmsg_write_u16(w, h->qport);
    else if (h->qport_width == 1)
        sg_bmsg_write_u8(w, h->qport);
    if (fragment)
        sg_bmsg_write_u16(w, offset | (more ? 0x8000u : 0));
}

void sg_q2__keep_piece(struct chan *ch, const uint8_t *d, size_t n)
{
    if (ch->npieces >= MAX_PIECES || ch->pieces_len + n > MAX_DGRAM * 4) {
        ch->npieces = MAX_PIECES + 1; /* too many to keep: rebuild by cutting */
        return;
    }
    memcpy(ch->pieces + ch->pieces_len, d, n);
    ch->pieces_len += n;
    ch->piece_len[ch->npieces++] = (uint32_t)n;
}
