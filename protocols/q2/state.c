/*
 * Quake 2 session state: the level as the client knows it (protocol 34),
 * what a demo that starts mid-level is given first (record.c).
 */
#include "protocols/q2/session.h"

#include <stdlib.h>
#include <string.h>

void sg_q2__level_clear(struct level *l)
{
    for (int i = 0; i < SG_Q2_CS_OLD; i++)
        free(l->cs[i]);
    for (int i = 0; i < SG_Q2_EDICTS_OLD; i++)
        free(l->base[i]);
    memset(l, 0, sizeof(*l));
}

static void copy_field(char *out, size_t cap, const struct sg_field *f)
{
    size_t n = f->len < cap - 1 ? f->len : cap - 1;

    memcpy(out, f->ptr, n);
    out[n] = 0;
}

/* Follow the level from the messages the client accepted (protocol 34 only:
 * a 34 demo is what is written). */
void sg_q2__level_track(struct level *l, const struct sg_q2_parsed *p, const bool *dropped)
{
    uint8_t tmp[512];

    for (uint32_t i = 0; i < p->nmsgs; i++) {
        const struct sg_fmsg *m = &p->msgs[i];
        const struct sg_field *f = m->count ? &p->fields[m->first] : NULL;
        if (m->unparsed || (dropped && dropped[i]))
            continue;
        if (m->op == SG_Q2_SVC_SERVERDATA && m->count >= 6) {
            sg_q2__level_clear(l);
            if ((int32_t)f[0].raw != 34)
                continue;
            l->have = true;
            l->servercount = (int32_t)f[1].raw;
            copy_field(l->gamedir, sizeof(l->gamedir), &f[3]);
            l->playernum = (int16_t)f[4].raw;
            copy_field(l->levelname, sizeof(l->levelname), &f[5]);
        } else if (l->have && m->op == SG_Q2_SVC_CONFIGSTRING && m->count == 2 &&
                   f[0].raw < SG_Q2_CS_OLD) {
            char *s = malloc(f[1].len + 1);
            if (!s)
                continue;
            memcpy(s, f[1].ptr, f[1].len);
            s[f[1].len] = 0;
            free(l->cs[f[0].raw]);
            l->cs[f[0].raw] = s;
        } else if (l->have && m->op == SG_Q2_SVC_SPAWNBASELINE) {
            /* the message as written, and its entity number */
            struct sg_q2_parsed one = *p;
            struct sg_fmsg mm = *m;
            struct sg_bmsg_writer w;
            uint32_t num = 0;
            mm.parent = -1;
            one.msgs = &mm;
            one.nmsgs = 1;
            for (uint32_t k = 0; k < m->count; k++)
                if (strcmp(f[k].name, "number") == 0) {
                    num = f[k].raw;
                    break;
                }
            sg_bmsg_writer_init(&w, tmp, sizeof(tmp));
            if (num == 0 || num >= SG_Q2_EDICTS_OLD || sg_q2_write(&one, NULL, &w) < 0)
                continue;
            uint8_t *b = malloc(w.len);
            if (!b)
                continue;
            memcpy(b, tmp, w.len);
            free(l->base[num]);
            l->base[num] = b;
            l->base_len[num] = (uint16_t)w.len;
        }
    }
}
