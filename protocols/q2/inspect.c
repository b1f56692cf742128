/*
 * Quake 2 frames for the inspector: the datagram decoded last as a dump
 * line (and its messages) or a JSON object.
 */
#include "protocols/q2/session.h"

#include <errno.h>

int sg_q2__dump(void *state, const struct sg_frame *frame, enum sg_dump_level level, bool json,
                   FILE *out)
{
    struct q2c *c = state;
    long start = ftell(out);

    if (frame != &c->v.frame)
        return SG_E_STATE;
    /* (the qport of the header read last, as on an OOB frame after it) */
    sg_qnc_dump_head(out, frame, c->copy_len, &c->hdr, c->hdr.has_qport, json);
    if (json) {
        if (c->v.why)
            fprintf(out, ",\"why\":\"%s\"", c->v.why);
        if (frame->kind == SG_FRAME_OOB)
            fprintf(out, ",\"oob\":{\"type\":\"%s\"}", c->oob_name ? c->oob_name : "other");
        if (frame->kind == SG_FRAME_MESSAGE)
            fprintf(out, ",\"messages\":%u", c->parsed.nmsgs);
        if (level >= SG_DUMP_FIELDS && frame->kind == SG_FRAME_MESSAGE) {
            fputs(",\"ops\":[", out);
            for (uint32_t i = 0; i < c->parsed.nmsgs; i++) {
                if (i)
                    fputc(',', out);
                sg_q2_dump_msg(out, &c->parsed, i, frame->dir, true, c->v.dropped[i]);
            }
            fputc(']', out);
        }
        fputc('}', out);
    } else {
        if (frame->kind == SG_FRAME_OOB)
            fprintf(out, " %s", c->oob_name ? c->oob_name : "other");
        if (c->v.why)
            fprintf(out, " (%s)", c->v.why);
        fputc('\n', out);
        if (level >= SG_DUMP_MESSAGES && frame->kind == SG_FRAME_MESSAGE) {
            for (uint32_t i = 0; i < c->parsed.nmsgs; i++) {
                fputs("  ", out);
                if (c->v.dropped[i])
                    fputs("(dropped) ", out);
                if (level >= SG_DUMP_FIELDS) {
                    sg_q2_dump_msg(out, &c->parsed, i, frame->dir, false, false);
                } else {
                    const struct sg_fmsg *pm = &c->parsed.msgs[i];
                    fprintf(out, "%s (%u fields)\n",
                            frame->dir == SG_DIR_S2C ? sg_q2_svc_name(pm->op)
                                                     : sg_q2_clc_name(pm->op),
                            (unsigned)pm->count);
                }
            }
        }
    }
    if (ferror(out))
        return -EIO;
    long end = ftell(out);
    return start >= 0 && end >= start ? (int)(end - start) : 0;
}
