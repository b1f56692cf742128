/*
 * Quake 2 demo files (.dm2) for the offline tools (`slipgate demo info|
 * dump|reencode`), behind the codec table's demo reader (codec.h, struct
 * sg_demo_impl).
 *
 * The container's blocks come from demo.c; each block's messages are
 * read with the layout the file's serverdata names: 34 (and 26, 3.05's),
 * Q2PRO's extended demo protocols 3434..3436, or a raw 35/36 stream.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/byteorder.h"
#include "protocols/error.h"
#include "protocols/q2/demo.h"
#include "protocols/q2/q2.h"
#include "protocols/text.h"

struct walk {
    struct sg_q2_parsed p;
    struct sg_q2_variant v;
    uint8_t *buf, *out;
    uint64_t blocks, messages, errors, identical, frames, serverdatas, zpackets, unsupported;
    int32_t first_frame, last_frame;
    int wire_protocol;
    int fps; /* server frames a second: 10, or a rerelease serverdata's server_fps */
    char level[64];
    char gamedir[64];
    int end; /* 0: the end marker; else the error that ended the file */
};

static int walk_init(struct walk *w)
{
    memset(w, 0, sizeof(*w));
    w->first_frame = w->last_frame = -1;
    w->fps = 10;
    w->buf = malloc(SG_Q2_MAX_MSGLEN);
    w->out = malloc(SG_Q2_MAX_MSGLEN + 64);
    sg_q2_variant_init(&w->v, 34, 0);
    w->v.known = false;
    if (!w->buf || !w->out || sg_q2_parsed_init(&w->p) < 0) {
        free(w->buf);
        free(w->out);
        return -ENOMEM;
    }
    return 0;
}

static void walk_free(struct walk *w)
{
    sg_q2_parsed_free(&w->p);
    free(w->buf);
    free(w->out);
}

/* Parse one block; note what it says.  Returns the parse result. */
static int walk_block(struct walk *w, size_t len)
{
    int err = sg_q2_parse(SG_DIR_S2C, &w->v, w->buf, len, &w->p);

    w->blocks++;
    w->errors += err < 0;
    w->unsupported += err == SG_E_UNSUPPORTED;
    for (uint32_t i = 0; i < w->p.nmsgs; i++) {
        const struct sg_fmsg *m = &w->p.msgs[i];
        w->messages++;
        if (!w->p.kex && (m->op & 0x1f) == SG_Q2_SVC_ZPACKET)
            w->zpackets++;
        if (m->op == SG_Q2_SVC_SERVERDATA && !m->unparsed) {
            w->serverdatas++;
            w->wire_protocol = (int)w->p.fields[m->first].raw;
            w->fps = 10;
            if (w->p.kex && m->count > 4 && w->p.fields[m->first + 3].raw > 0)
                w->fps = (int)w->p.fields[m->first + 3].raw;
            if (m->count > 3 + (w->p.kex ? 1u : 0u)) {
                const struct sg_field *g = &w->p.fields[m->first + 3 + (w->p.kex ? 1 : 0)];
                size_t n = g->len < sizeof(w->gamedir) - 1 ? g->len : sizeof(w->gamedir) - 1;
                memcpy(w->gamedir, g->ptr, n);
                w->gamedir[n] = 0;
            }
        }
    }
    if (w->p.serverdata)
        memcpy(w->level, w->p.level, sizeof(w->level));
    if (w->p.frames) {
        w->frames += (uint64_t)w->p.frames;
        if (w->first_frame < 0)
            w->first_frame = w->p.frame;
        w->last_frame = w->p.frame;
    }
    return err;
}

/* ---- info ---- */

static int q2_demo_info(FILE *f, const char *path, FILE *out)
{
    struct walk w;
    size_t len;
    int r;
    uint64_t errors;

    if (walk_init(&w) < 0)
        return -ENOMEM;
    while ((r = sg_q2__dm2_block(f, w.buf, &len)) == SG_Q2__DM2_MSG)
        walk_block(&w, len);
    w.end = r;
    errors = w.errors + (w.end != 0);
    fprintf(out, "file:         %s\n", path);
    fprintf(out, "protocol:     %d", w.wire_protocol);
    if (w.v.kex)
        fprintf(out, " (Quake 2 rerelease (KEX) demo%s)",
                w.v.kex == 2022 ? "" : ", network protocol layout");
    else if (w.v.protocol != w.wire_protocol && w.v.known)
        fprintf(out, " (protocol %d layout%s)", w.v.protocol, w.v.extended ? ", extended" : "");
    else if (w.v.minor)
        fprintf(out, " (minor %d)", w.v.minor);
    fprintf(out, "\n");
    fprintf(out, "map:          %s\n", w.level[0] ? w.level : "?");
    fprintf(out, "game:         %s\n", w.gamedir[0] ? w.gamedir : "baseq2");
    if (w.first_frame >= 0)
        fprintf(out, "duration:     %.1f s (server frames %d .. %d)\n",
                (double)(w.last_frame - w.first_frame) / w.fps, w.first_frame, w.last_frame);
    else
        fprintf(out, "duration:     ? (no frames)\n");
    fprintf(out,
            "messages:     %" PRIu64 " in %" PRIu64 " blocks (%" PRIu64 " serverdata, %" PRIu64
            " frames, %" PRIu64 " zpackets)\n",
            w.messages, w.blocks, w.serverdatas, w.frames, w.zpackets);
    fprintf(out, "errors:       %" PRIu64, errors);
    if (w.errors)
        fprintf(out, ", %" PRIu64 " blocks failed to decode", w.errors);
    if (w.unsupported)
        fprintf(out, ", %" PRIu64 " stopped at an unsupported (undocumented) message",
                w.unsupported);
    if (w.end)
        fprintf(out, ", file ends without end marker (%s)", sg_errname(w.end));
    fprintf(out, "\n");
    walk_free(&w);
    return errors > INT32_MAX ? INT32_MAX : (int)errors;
}

/* ---- dump ---- */

/* A NUM field's value as Quake 2's dumps show it: a float as %g, the
 * 16-bit coordinates and angles as their signed raw value. */
static void put_num(FILE *out, const struct sg_field *f, bool json)
{
    if (f->num == SG_BMSG_FLOAT) {
        union {
            uint32_t u;
            float f;
        } fv = {.u = f->raw};
        if (isfinite(fv.f))
            fprintf(out, "%g", (double)fv.f);
        else /* JSON has no NaN: the raw bits, as the other games' dumps write them */
            fprintf(out, json ? "\"0x%08x\"" : "0x%08x", (unsigned)f->raw);
    } else if (f->num == SG_BMSG_S8 || f->num == SG_BMSG_S16 || f->num == SG_BMSG_S32 ||
               f->num == SG_BMSG_COORD16 || f->num == SG_BMSG_ANGLE16)
        fprintf(out, "%d", (int)(f->num == SG_BMSG_S8    ? (int8_t)f->raw
                                 : f->num == SG_BMSG_S32 ? (int32_t)f->raw
                                                         : (int16_t)f->raw));
    else
        fprintf(out, "%u", (unsigned)f->raw);
}

static const struct sg_field_style field_style = {
    .lead = " ", .data_text = true, .put_num = put_num};

void sg_q2_dump_msg(FILE *out, const struct sg_q2_parsed *p, uint32_t i, enum sg_dir dir,
                    bool json, bool removed)
{
    const struct sg_fmsg *m = &p->msgs[i];
    const char *(*svc_name)(int) = p->kex ? sg_q2_svc_name_kex : sg_q2_svc_name;
    const char *name = dir == SG_DIR_S2C ? svc_name(m->op) : sg_q2_clc_name(m->op);

    if (json)
        fprintf(out, "{\"msg\":\"%s\",\"op\":%d%s%s%s%s%s,\"fields\":[", name, m->op,
                m->parent >= 0 ? ",\"in\":\"" : "",
                m->parent >= 0 ? svc_name(p->msgs[m->parent].op) : "",
                m->parent >= 0 ? "\"" : "",
                m->unparsed ? ",\"unparsed\":true" : "", removed ? ",\"removed\":true" : "");
    else
        fprintf(out, "%s%s%s", m->parent >= 0 ? "  " : "", name, m->unparsed ? " (unparsed)" : "");
    for (uint32_t k = 0; k < m->count; k++) {
        const struct sg_field *f = &p->fields[m->first + k];
        if (json && k)
            fputc(',', out);
        sg_field_put(out, f, json, &field_style);
    }
    fputs(json ? "]}" : "\n", out);
}

static int q2_demo_dump(FILE *f, const char *path, bool json, FILE *out)
{
    struct walk w;
    size_t len;
    int r;

    (void)path;
    if (walk_init(&w) < 0)
        return -ENOMEM;
    while ((r = sg_q2__dm2_block(f, w.buf, &len)) == SG_Q2__DM2_MSG) {
        int err = walk_block(&w, len);
        if (json)
            fprintf(out, "{\"block\":%" PRIu64 ",\"len\":%zu%s}\n", w.blocks - 1, len,
                    err < 0 ? ",\"error\":true" : "");
        else
            fprintf(out, "#block %" PRIu64 " len=%zu%s%s\n", w.blocks - 1, len,
                    err < 0 ? " error=" : "", err < 0 ? sg_errname(err) : "");
        for (uint32_t i = 0; i < w.p.nmsgs; i++) {
            sg_q2_dump_msg(out, &w.p, i, SG_DIR_S2C, json, false);
            if (json)
                fputc('\n', out);
        }
    }
    w.end = r;
    if (r != SG_Q2__DM2_END)
        fprintf(out, json ? "{\"end\":\"%s\"}\n" : "#end %s\n", sg_errname(r));
    r = (w.errors || w.end) ? 1 : 0;
    walk_free(&w);
    return r;
}

/* ---- reencode ---- */

static int q2_demo_reencode(FILE *f, const char *path, FILE *outf, FILE *out)
{
    struct walk w;
    size_t len;
    int r, ret;
    uint8_t h[4];

    (void)path;
    if (walk_init(&w) < 0)
        return -ENOMEM;
    while ((r = sg_q2__dm2_block(f, w.buf, &len)) == SG_Q2__DM2_MSG) {
        struct sg_bmsg_writer wr;
        int err = walk_block(&w, len);

        if (w.v.kex) {
            fprintf(out, "rerelease (KEX) demo (protocol %d): re-encode unsupported (read only)\n",
                    w.wire_protocol);
            walk_free(&w);
            return SG_E_UNSUPPORTED;
        }
        sg_bmsg_writer_init(&wr, w.out, SG_Q2_MAX_MSGLEN);
        if (err < 0 || sg_q2_write(&w.p, NULL, &wr) < 0) {
            /* not decoded: the block goes out as it came */
            memcpy(w.out, w.buf, len);
            wr.len = len;
        } else if (wr.len == len && memcmp(w.out, w.buf, len) == 0) {
            w.identical++;
        }
        sg_put_le32(h, (uint32_t)wr.len);
        if (fwrite(h, 1, 4, outf) != 4 || fwrite(w.out, 1, wr.len, outf) != wr.len) {
            walk_free(&w);
            return -EIO;
        }
    }
    w.end = r;
    if (r == SG_Q2__DM2_END) {
        sg_put_le32(h, 0xffffffffu);
        if (fwrite(h, 1, 4, outf) != 4) {
            walk_free(&w);
            return -EIO;
        }
    }
    fprintf(out,
            "%" PRIu64 " blocks, %" PRIu64 " byte-identical, %" PRIu64 " failed to decode%s\n",
            w.blocks, w.identical, w.errors, w.end ? " (input ends without end marker)" : "");
    ret = w.identical == w.blocks && !w.end ? 0 : 1;
    walk_free(&w);
    return ret;
}

static const char *const q2_demo_exts[] = {"dm2", NULL};

const struct sg_demo_impl sg_q2_demo_impl = {
    .extensions = q2_demo_exts,
    .probe = sg_q2__dm2_probe,
    .info = q2_demo_info,
    .dump = q2_demo_dump,
    .reencode = q2_demo_reencode,
    .cut = NULL,
};
