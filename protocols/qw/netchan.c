/*
 * The QuakeWorld netchan (mvdsv net_chan.c), one header reader for both
 * directions:
 *
 *   0                   31 32                  63 64          79
 *   | sequence      |R| | ack              |A| | qport (C2S) | message...
 *   R: the datagram carries the sender's reliable message
 *   A: the reliable sequence bit of the last reliable message the sender got
 *   both words little-endian; 0xffffffff as first word: connectionless.
 *
 * Receive rule (Netchan_Process): a datagram shorter than the header is a
 * runt and ignored; a sequence not above the last one accepted is stale or
 * a duplicate and dropped; anything above is accepted (the gap counts as
 * dropped datagrams).
 */
#include "protocols/qw/qw.h"

#include "protocols/byteorder.h"
#include "protocols/error.h"

int sg_qw_header_read(enum sg_dir dir, const uint8_t *data, size_t len, struct sg_qw_header *h)
{
    size_t need = dir == SG_DIR_C2S ? 10 : 8;
    uint32_t w1, w2;

    if (len < need)
        return SG_E_TRUNCATED;
    w1 = sg_le32(data);
    w2 = sg_le32(data + 4);
    h->seq = w1 & 0x7fffffffu;
    h->reliable = w1 >> 31;
    h->ack = w2 & 0x7fffffffu;
    h->ack_reliable = w2 >> 31;
    h->has_qport = dir == SG_DIR_C2S;
    h->qport = h->has_qport ? sg_le16(data + 8) : 0;
    return (int)need;
}

int sg_qw_header_write(const struct sg_qw_header *h, struct sg_bmsg_writer *w)
{
    sg_bmsg_write_u32(w, (h->seq & 0x7fffffffu) | (uint32_t)h->reliable << 31);
    sg_bmsg_write_u32(w, (h->ack & 0x7fffffffu) | (uint32_t)h->ack_reliable << 31);
    if (h->has_qport)
        sg_bmsg_write_u16(w, h->qport);
    return w->overflowed ? SG_E_OVERFLOW : 0;
}

bool sg_qw_chan_accept(struct sg_qw_chan *c, const struct sg_qw_header *h)
{
    if (c->started && h->seq <= c->incoming)
        return false;
    c->started = true;
    c->incoming = h->seq;
    return true;
}
