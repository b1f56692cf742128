/*
 * What a NetQuake recording started mid-level needs (struct level in
 * session.h), kept from the server messages the client takes.
 */
#include "protocols/nq/session.h"

#include "protocols/byteorder.h"
#include "protocols/error.h"

#include <stdlib.h>
#include <string.h>

#define LV_SIGNON_MAX (1u << 20)

static int lv_append(uint8_t **buf, size_t *len, size_t *cap, const uint8_t *d, size_t n)
{
    if (*len + n > LV_SIGNON_MAX)
        return SG_E_TOOBIG;
    if (*len + n > *cap) {
        size_t nc = (*len + n) * 2;
        uint8_t *b = realloc(*buf, nc);
        if (!b)
            return -ENOMEM;
        *buf = b;
        *cap = nc;
    }
    memcpy(*buf + *len, d, n);
    *len += n;
    return 0;
}

static void lv_keep(struct lvmsg *m, const uint8_t *d, size_t n)
{
    if (n <= sizeof(m->b)) {
        memcpy(m->b, d, n);
        m->len = (uint8_t)n;
    }
}

void sg_nq__track(struct nqc *c, const uint8_t *d, size_t len)
{
    struct level *lv = c->lv;

    if (!lv && !(lv = c->lv = calloc(1, sizeof(*lv))))
        return;
    for (uint32_t i = 0; i < c->parsed.nmsgs; i++) {
        const struct sg_fmsg *pm = &c->parsed.msgs[i];
        size_t at = pm->at, end = i + 1 < c->parsed.nmsgs ? c->parsed.msgs[i + 1].at : len;
        const uint8_t *b = d + at;
        size_t n = end - at;
        uint32_t first = pm->count ? c->parsed.fields[pm->first].raw & 0xff : 0;
        if (pm->unparsed)
            continue;
        switch (pm->op) {
        case 9: /* what a DarkPlaces server says before its serverinfo: the CSQC program */
            if (c->proto.dp && pm->count == 1 && !c->proto.fitz) {
                const struct sg_field *f = &c->parsed.fields[pm->first];
                if ((f->len >= 10 && memcmp(f->ptr, "csqc_prog", 9) == 0) ||
                    (f->len >= 28 && memcmp(f->ptr, "cl_serverextension_download", 27) == 0))
                    if (lv_append(&lv->pre, &lv->pre_len, &lv->pre_cap, b, n) < 0)
                        lv->pre_len = 0;
            }
            break;
        case 11: /* a new level */
            lv->valid = sg_nq_protocol_known(c->proto.protocol);
            lv->info_len = lv->signon_len = 0;
            /* (its CSQC lines lead it, as the server sent them) */
            if (lv->pre_len && lv_append(&lv->info, &lv->info_len, &lv->info_cap, lv->pre,
                                         lv->pre_len) < 0)
                lv->valid = false;
            lv->pre_len = 0;
            memset(lv->style, 0, sizeof(lv->style));
            memset(lv->name, 0, sizeof(lv->name));
            memset(lv->frags, 0, sizeof(lv->frags));
            memset(lv->colors, 0, sizeof(lv->colors));
            memset(lv->stat, 0, sizeof(lv->stat));
            lv->time.len = 0;
            __attribute__((fallthrough));
        case 32: /* cdtrack */
        case 5:  /* setview */
            if (lv_append(&lv->info, &lv->info_len, &lv->info_cap, b, n) < 0)
                lv->valid = false;
            break;
        case 20: case 22: case 29: case 42: case 43: case 44: case 55: case 56: case 59:
            if (lv_append(&lv->signon, &lv->signon_len, &lv->signon_cap, b, n) < 0)
                lv->valid = false;
            break;
        case 12:
            lv_keep(&lv->style[first], b, n);
            break;
        case 13:
            lv_keep(&lv->name[first], b, n);
            break;
        case 14:
            lv_keep(&lv->frags[first], b, n);
            break;
        case 17:
            lv_keep(&lv->colors[first], b, n);
            break;
        case 3:
            lv_keep(&lv->stat[first], b, n);
            break;
        case 7:
            lv_keep(&lv->time, b, n);
            break;
        default:
            break;
        }
    }
}

void sg_nq__level_free(struct level *lv)
{
    if (!lv)
        return;
    free(lv->info);
    free(lv->pre);
    free(lv->signon);
    free(lv);
}
