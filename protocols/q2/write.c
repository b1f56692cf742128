/*
 * Quake 2 messages written back from their fields (q2.h): each as it came,
 * a zpacket's deflated bytes as they came unless what it holds changed.
 */
#include "protocols/q2/q2.h"

#include "protocols/error.h"

#include <stdlib.h>
#include <string.h>

static void write_msg(const struct sg_q2_parsed *p, uint32_t i, struct sg_bmsg_writer *w)
{
    const struct sg_fmsg *m = &p->msgs[i];
    size_t at;

    sg_bmsg_write_u8(w, (unsigned)m->op);
    at = w->len;
    sg_fields_write(p->fields, m->first, m->count, w);
    if (m->op == SG_Q2_CLC_MOVE && m->sum_ok && (m->changed || p->sequence != p->sum_sequence) &&
        !w->overflowed && w->len > at)
        w->data[at] = sg_q2_move_checksum(w->data + at + 1, w->len - at - 1, p->sequence);
}

/* A zpacket whose contents changed: rebuild them and deflate them again. */
static void write_zpacket(const struct sg_q2_parsed *p, uint32_t zi, uint32_t end,
                          const bool *dropped, struct sg_bmsg_writer *w)
{
    uint8_t *plain = malloc(SG_Q2_MAX_MSGLEN), *packed = malloc(SG_Q2_MAX_MSGLEN + 1024);
    struct sg_bmsg_writer pw;
    size_t plen = 0;

    if (!plain || !packed) {
        w->overflowed = true;
        goto out;
    }
    sg_bmsg_writer_init(&pw, plain, SG_Q2_MAX_MSGLEN);
    for (uint32_t j = zi + 1; j < end; j++)
        if (!(dropped && dropped[j]))
            write_msg(p, j, &pw);
    if (pw.overflowed || sg_q2_deflate(plain, pw.len, packed, SG_Q2_MAX_MSGLEN + 1024, &plen) < 0 ||
        plen > 0xffff) {
        w->overflowed = true;
        goto out;
    }
    sg_bmsg_write_u8(w, (unsigned)p->msgs[zi].op);
    sg_bmsg_write_u16(w, (unsigned)plen);
    sg_bmsg_write_u16(w, (unsigned)pw.len);
    sg_bmsg_write_data(w, packed, plen);
out:
    free(plain);
    free(packed);
}

int sg_q2_write(const struct sg_q2_parsed *p, const bool *dropped, struct sg_bmsg_writer *w)
{
    for (uint32_t i = 0; i < p->nmsgs; i++) {
        const struct sg_fmsg *m = &p->msgs[i];
        if (m->parent >= 0)
            continue; /* written with (or inside) its zpacket */
        if (dropped && dropped[i])
            continue;
        if (!m->unparsed && !p->kex && (m->op & 0x1f) == SG_Q2_SVC_ZPACKET && m->count == 3 &&
            p->fields[m->first].num == SG_BMSG_U16) {
            uint32_t end = i + 1;
            bool dirty = false;
            while (end < p->nmsgs && p->msgs[end].parent == (int)i) {
                if ((dropped && dropped[end]) || p->msgs[end].changed)
                    dirty = true;
                end++;
            }
            if (dirty || m->changed) {
                write_zpacket(p, i, end, dropped, w);
                continue;
            }
        }
        write_msg(p, i, w);
    }
    return w->overflowed ? SG_E_OVERFLOW : 0;
}

