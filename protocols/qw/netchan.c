/*
 * The QuakeWorld netchan (mvdsv net_chan.c): its rules for the header it
 * shares with Quake 2 (protocols/qnetchan.h), both directions:
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

#include "protocols/error.h"

int sg_qw_header_read(enum sg_dir dir, const uint8_t *data, size_t len, struct sg_qnc_header *h)
{
    static const struct sg_qnc_rules rules[2] = {
        [SG_DIR_C2S] = {.mask = SG_QNC_OLD_MASK, .qport_width = 2},
        [SG_DIR_S2C] = {.mask = SG_QNC_OLD_MASK},
    };

    return sg_qnc_read(data, len, &rules[dir], h);
}

int sg_qw_header_write(const struct sg_qnc_header *h, struct sg_bmsg_writer *w)
{
    sg_qnc_write(h, false, false, 0, w);
    return w->overflowed ? SG_E_OVERFLOW : 0;
}
