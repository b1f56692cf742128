/*
 * The Quake 2 netchan: its rules for the shared header (qnetchan.h): id's
 * 16-bit qport, R1Q2's and Q2PRO's one-byte qport (none when its low byte
 * is 0), Q2PRO's new netchan with its fragment bits; and the datagrams a
 * fragmented message came in, kept for an unchanged rebuild.
 */
#include "protocols/q2/session.h"

#include <string.h>

int sg_q2__read_header(struct q2c *c, enum sg_dir dir, const uint8_t *d, size_t n,
                       struct sg_qnc_header *h)
{
    bool nc = c->nctype == 1 && c->protocol == 36;
    struct sg_qnc_rules r = {.mask = nc ? SG_QNC_NEW_MASK : SG_QNC_OLD_MASK, .fragments = nc};

    if (dir == SG_DIR_C2S) {
        if (c->protocol == 35 || c->protocol == 36)
            r.qport_width = c->qport >= 0 && (c->qport & 0xff) ? 1 : 0;
        else
            r.qport_width = 2;
    }
    return sg_qnc_read(d, n, &r, h);
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
