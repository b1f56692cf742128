/*
 * QuakeWorld frames for the inspector: the datagram decoded last as a dump
 * line (and its messages, their fields) or a JSON object.
 */
#include "protocols/qw/session.h"

#include "protocols/error.h"

#include <errno.h>
#include <string.h>

/* ---- dump ---- */

/* The live dumps' fields: `name=value` (the caller leads with the space). */
static const struct sg_field_style dump_style = {.lead = "", .data_text = false};

int sg_qw__dump(void *state, const struct sg_frame *frame, enum sg_dump_level level, bool json,
                FILE *out)
{
    struct qwc *c = state;
    long start = ftell(out);

    if (frame != &c->v.frame)
        return SG_E_STATE;
    /* The header view (doc/inspect.md, QuakeWorld). */
    sg_qnc_dump_head(out, frame, c->copy_len, &c->hdr, frame->sequence >= 0 && c->hdr.has_qport,
                     json);
    if (json) {
        if (c->v.why)
            fprintf(out, ",\"why\":\"%s\"", c->v.why);
        if (frame->kind == SG_FRAME_OOB) {
            fprintf(out, ",\"oob\":{\"type\":\"%s\"", c->oob.name);
            if (c->oob.kind == SG_QW_OOB_CHALLENGE || c->oob.kind == SG_QW_OOB_CONNECT)
                fprintf(out, ",\"challenge\":%d", (int)c->oob.challenge);
            if (c->oob.kind == SG_QW_OOB_CONNECT)
                fprintf(out, ",\"protocol\":%d,\"qport\":%d", c->oob.protocol, c->oob.qport);
            if (c->oob.ext.known)
                fprintf(out, ",\"fte\":%u,\"fte2\":%u,\"mvd1\":%u,\"z_ext\":%u",
                        (unsigned)c->oob.ext.fte, (unsigned)c->oob.ext.fte2,
                        (unsigned)c->oob.ext.mvd1, (unsigned)c->oob.ext.z_ext);
            fputc('}', out);
        }
        if (frame->kind == SG_FRAME_MESSAGE) {
            fprintf(out, ",\"messages\":%u", c->parsed.nmsgs);
            if (frame->new_level) {
                fputs(",\"level\":\"", out);
                sg_put_escaped(out, (const uint8_t *)frame->level, strlen(frame->level), true);
                fputc('"', out);
            }
        }
        if (level >= SG_DUMP_FIELDS && frame->kind == SG_FRAME_MESSAGE) {
            fputs(",\"ops\":[", out);
            for (uint32_t i = 0; i < c->parsed.nmsgs; i++) {
                const struct sg_fmsg *pm = &c->pmsgs[i];
                fprintf(out, "%s{\"op\":\"%s\"", i ? "," : "",
                        frame->dir == SG_DIR_S2C ? sg_qw_svc_name(pm->op) : sg_qw_clc_name(pm->op));
                if (c->v.dropped[i])
                    fputs(",\"removed\":true", out);
                fputs(",\"fields\":[", out);
                for (uint32_t k = 0; k < pm->count; k++) {
                    if (k)
                        fputc(',', out);
                    sg_field_put(out, &c->fields[pm->first + k], true, &dump_style);
                }
                fputs("]}", out);
            }
            fputc(']', out);
        }
        fputc('}', out);
    } else {
        if (frame->kind == SG_FRAME_OOB)
            fprintf(out, " %s", c->oob.name);
        if (c->v.why)
            fprintf(out, " (%s)", c->v.why);
        fputc('\n', out);
        if (level >= SG_DUMP_MESSAGES && frame->kind == SG_FRAME_MESSAGE) {
            for (unsigned i = 0; i < frame->nmsgs; i++) {
                const struct sg_msg *m = &frame->msgs[i];
                sg_fview_put_msg(out, m);
                if (!m->injected) {
                    const struct sg_fmsg *pm = &c->pmsgs[c->v.msg_index[i]];
                    if (level >= SG_DUMP_FIELDS) {
                        for (uint32_t k = 0; k < pm->count; k++) {
                            fputc(' ', out);
                            sg_field_put(out, &c->fields[pm->first + k], false, &dump_style);
                        }
                    } else {
                        fprintf(out, " (%u fields)", (unsigned)pm->count);
                    }
                }
                fputc('\n', out);
            }
        }
    }
    if (ferror(out))
        return -EIO;
    long end = ftell(out);
    return start >= 0 && end >= start ? (int)(end - start) : 0;
}
