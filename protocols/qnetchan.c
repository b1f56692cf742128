/*
 * The QuakeWorld / Quake 2 netchan header reader and writer (qnetchan.h).
 */
#include "protocols/qnetchan.h"

#include "protocols/byteorder.h"
#include "protocols/error.h"

#include <string.h>

int sg_qnc_read(const uint8_t *d, size_t n, const struct sg_qnc_rules *r, struct sg_qnc_header *h)
{
    size_t at = 8;
    uint32_t w1, w2;

    memset(h, 0, sizeof(*h));
    if (n < 8)
        return SG_E_TRUNCATED;
    w1 = sg_le32(d);
    w2 = sg_le32(d + 4);
    h->w1 = w1;
    h->w2 = w2;
    h->reliable = (w1 & SG_QNC_REL_BIT) != 0;
    h->ack_reliable = (w2 & SG_QNC_REL_BIT) != 0;
    h->seq = w1 & r->mask;
    h->ack = w2 & r->mask;
    h->fragment = r->fragments && (w1 & SG_QNC_FRG_BIT);
    h->qport_width = r->qport_width;
    if (n < at + (size_t)h->qport_width)
        return SG_E_TRUNCATED;
    if (h->qport_width == 2)
        h->qport = sg_le16(d + at);
    else if (h->qport_width == 1)
        h->qport = d[at];
    h->has_qport = h->qport_width > 0;
    at += (size_t)h->qport_width;
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

void sg_qnc_write(const struct sg_qnc_header *h, bool fragment, bool more, uint32_t offset,
                  struct sg_bmsg_writer *w)
{
    uint32_t w1 = fragment ? h->w1 | SG_QNC_FRG_BIT : h->w1;

    sg_bmsg_write_u32(w, w1);
    sg_bmsg_write_u32(w, h->w2);
    if (h->qport_width == 2)
        sg_bmsg_write_u16(w, h->qport);
    else if (h->qport_width == 1)
        sg_bmsg_write_u8(w, h->qport);
    if (fragment)
        sg_bmsg_write_u16(w, offset | (more ? 0x8000u : 0));
}

void sg_qnc_dump_head(FILE *out, const struct sg_frame *fr, size_t len,
                      const struct sg_qnc_header *h, bool qport, bool json)
{
    static const char *const kinds[] = {"raw", "oob", "partial", "message", "rejected"};

    if (json) {
        fprintf(out, "{\"rx\":\"%s\",\"len\":%zu", kinds[fr->kind], len);
        if (fr->sequence >= 0)
            fprintf(out, ",\"seq\":%d,\"reliable\":%s,\"ack\":%d,\"ack_reliable\":%s", fr->sequence,
                    h->reliable ? "true" : "false", fr->ack, h->ack_reliable ? "true" : "false");
        if (qport)
            fprintf(out, ",\"qport\":%u", (unsigned)h->qport);
        return;
    }
    fprintf(out, "%s %s len=%zu", fr->dir == SG_DIR_C2S ? "c2s" : "s2c", kinds[fr->kind], len);
    if (fr->sequence >= 0)
        fprintf(out, " seq=%d%s ack=%d%s", fr->sequence, h->reliable ? "r" : "", fr->ack,
                h->ack_reliable ? "r" : "");
}
