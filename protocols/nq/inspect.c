/*
 * NetQuake frames for the inspector and the golden files (the codec
 * table's dump hook): the frame, its messages, their fields, as text or
 * JSON lines.
 */
#include "protocols/nq/session.h"

#include "protocols/byteorder.h"
#include "protocols/error.h"
#include "protocols/text.h"

#include <stdio.h>
#include <string.h>

/* The parsed message behind the frame's message `i` (none for an injected
 * one, or when the frame is not the one decoded last). */
static const struct sg_fmsg *parsed_msg(const struct nqc *c, const struct sg_frame *frame,
                                          unsigned i)
{
    int pi;

    if (frame != &c->v.frame || frame->kind != SG_FRAME_MESSAGE || frame->msgs[i].injected)
        return NULL;
    pi = c->v.msg_index[i];
    return pi >= 0 && (uint32_t)pi < c->parsed.nmsgs ? &c->parsed.msgs[pi] : NULL;
}

int sg_nq__dump(void *state, const struct sg_frame *frame, enum sg_dump_level level, bool json,
                FILE *out)
{
    static const char *const kinds[] = {"raw", "oob", "partial", "message", "rejected"};
    struct nqc *c = state;
    const struct sg_fmsg *pm;
    long start = ftell(out);

    if (json) {
        fprintf(out, "{\"kind\":\"%s\",\"seq\":%d,\"flags\":\"0x%08x\",\"msgs\":[",
                kinds[frame->kind], (int)frame->sequence, (unsigned)c->flags);
        for (unsigned i = 0; level >= SG_DUMP_MESSAGES && i < frame->nmsgs; i++) {
            const struct sg_msg *m = &frame->msgs[i];
            fprintf(out, "%s{\"name\":\"%s\",\"kind\":\"%s\"", i ? "," : "", m->name,
                    sg_msg_kind_name(m->kind));
            if (m->text) {
                fputs(",\"text\":\"", out);
                sg_put_escaped(out, (const uint8_t *)m->text, m->text_len, true);
                fputc('"', out);
            }
            if (level >= SG_DUMP_FIELDS && (pm = parsed_msg(c, frame, i))) {
                fputs(",\"fields\":[", out);
                for (uint32_t k = 0; k < pm->count; k++) {
                    if (k)
                        fputc(',', out);
                    sg_field_put(out, &c->parsed.fields[pm->first + k], true, &sg_nq_field_style);
                }
                fputc(']', out);
            }
            fprintf(out, "%s%s}", m->dropped ? ",\"dropped\":true" : "",
                    m->injected ? ",\"injected\":true" : "");
        }
        fputs("]", out);
        if (level >= SG_DUMP_FIELDS && frame->kind == SG_FRAME_OOB && c->ctl_name &&
            strcmp(c->ctl_name, "CCREP_ACCEPT") == 0)
            fprintf(out, ",\"port\":%d", c->accept_port);
        fputs("}", out);
    } else {
        fprintf(out, "%s seq=%d flags=0x%08x%s%s%s\n", kinds[frame->kind], (int)frame->sequence,
                (unsigned)c->flags, c->v.why ? " (" : "", c->v.why ? c->v.why : "",
                c->v.why ? ")" : "");
        for (unsigned i = 0; level >= SG_DUMP_MESSAGES && i < frame->nmsgs; i++) {
            const struct sg_msg *m = &frame->msgs[i];
            sg_fview_put_msg(out, m);
            if (level >= SG_DUMP_FIELDS && (pm = parsed_msg(c, frame, i)))
                for (uint32_t k = 0; k < pm->count; k++)
                    sg_field_put(out, &c->parsed.fields[pm->first + k], false, &sg_nq_field_style);
            if (level >= SG_DUMP_FIELDS && frame->kind == SG_FRAME_OOB && c->ctl_name &&
                strcmp(c->ctl_name, "CCREP_ACCEPT") == 0)
                fprintf(out, " port=%d", c->accept_port);
            fputc('\n', out);
        }
    }
    return start >= 0 ? (int)(ftell(out) - start) : 0;
}
