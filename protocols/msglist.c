/* The idTech 1/2 field and message lists: the field writer, the text pool, the text view. */
#include "protocols/msglist.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "protocols/error.h"
#include "protocols/text.h"

void sg_fields_write(const struct sg_field *fields, uint32_t first, uint32_t n,
                     struct sg_bmsg_writer *w)
{
    for (uint32_t k = first; k < first + n; k++) {
        const struct sg_field *f = &fields[k];
        switch (f->type) {
        case SG_FIELD_NUM:
            sg_bmsg_write_num(w, f->num, f->raw);
            break;
        case SG_FIELD_STRING:
            sg_bmsg_write_string(w, f->ptr, f->len, f->end);
            break;
        case SG_FIELD_DATA:
            sg_bmsg_write_data(w, f->ptr, f->len);
            break;
        default:
            break; /* values: their bytes are in a DATA field */
        }
    }
}

void sg_field_put_num(FILE *out, const struct sg_field *f, bool json)
{
    switch (f->num) {
    case SG_BMSG_FLOAT:
    case SG_BMSG_COORD_FLOAT:
    case SG_BMSG_ANGLE_FLOAT:
    case SG_BMSG_COORD16:
    case SG_BMSG_COORD24:
    case SG_BMSG_COORD32:
    case SG_BMSG_ANGLE8:
    case SG_BMSG_ANGLE16: {
        float v = sg_bmsg_num_value(f->num, f->raw);
        if (v != v || v - v != 0) /* NaN or infinity: not JSON numbers */
            fprintf(out, json ? "\"0x%08x\"" : "0x%08x", (unsigned)f->raw);
        else
            fprintf(out, "%.9g", (double)v);
        break;
    }
    case SG_BMSG_S8: /* from the bits: a float holds 24 of them, and not INT32_MAX */
        fprintf(out, "%d", (int)(int8_t)f->raw);
        break;
    case SG_BMSG_S16:
        fprintf(out, "%d", (int)(int16_t)f->raw);
        break;
    case SG_BMSG_S32:
        fprintf(out, "%ld", (long)(int32_t)f->raw);
        break;
    default:
        fprintf(out, "%u", (unsigned)f->raw);
        break;
    }
}

void sg_field_put(FILE *out, const struct sg_field *f, bool json, const struct sg_field_style *st)
{
    if (json)
        fprintf(out, "[\"%s\",", f->name);
    else
        fprintf(out, "%s%s=", st->lead, f->name);
    switch (f->type) {
    case SG_FIELD_NUM:
        (st->put_num ? st->put_num : sg_field_put_num)(out, f, json);
        break;
    case SG_FIELD_VALUE:
        fprintf(out, "%d", (int)(int32_t)f->raw);
        break;
    case SG_FIELD_STRING:
        fputc('"', out);
        sg_put_escaped(out, f->ptr, f->len, json);
        fputc('"', out);
        break;
    default:
        if (!json)
            fprintf(out, "<%u bytes>", (unsigned)f->len);
        else
            fprintf(out, st->data_text ? "\"%u bytes\"" : "%u", (unsigned)f->len);
        break;
    }
    if (json)
        fputc(']', out);
}

void sg_fview_client_command(struct sg_textpool *pool, struct sg_msg *m, size_t len)
{
    const char *t;
    size_t n;

    m->kind = SG_MSG_CLIENT_COMMAND;
    if (!sg_text_say(m->command, len, &t, &n))
        return;
    m->kind = SG_MSG_CHAT;
    m->text = sg_textpool_keep(pool, t, n);
    m->text_len = m->text ? n : 0;
    if (!m->text) {
        m->text = m->command;
        m->text_len = len;
    }
}

int sg_fmsg_set_text(struct sg_textpool *pool, struct sg_frame *fr, unsigned i,
                     struct sg_field *fields, const struct sg_fmsg *pmsgs, const int *msg_index,
                     bool keep_end, const char *text, size_t len)
{
    const struct sg_fmsg *pm;
    struct sg_msg *m;
    struct sg_field *f;
    bool say = fr->dir == SG_DIR_C2S;
    char cmd[2048];
    const char *kept;
    size_t n;

    if (fr->kind != SG_FRAME_MESSAGE || i >= fr->nmsgs)
        return SG_E_UNSUPPORTED;
    m = &fr->msgs[i];
    if (m->injected || m->dropped || !m->text || m->kind == SG_MSG_DISCONNECT ||
        m->kind == SG_MSG_GAME)
        return SG_E_UNSUPPORTED;
    pm = &pmsgs[msg_index[i]];
    if (pm->text < 0)
        return SG_E_UNSUPPORTED;
    f = &fields[pm->first + (uint32_t)pm->text];
    say = say && m->kind == SG_MSG_CHAT;
    if (memchr(text, 0, len) || len > 1024)
        return -EINVAL;
    if (say) {
        char verb[32];
        sg_text_verb(m->command, strlen(m->command), verb, sizeof(verb));
        n = (size_t)snprintf(cmd, sizeof(cmd), "%s \"%.*s\"", verb, (int)len, text);
        for (size_t k = strlen(verb) + 2; k + 1 < n; k++)
            if (cmd[k] == '"')
                cmd[k] = '\'';
    } else {
        n = (size_t)snprintf(cmd, sizeof(cmd), "%.*s", (int)len, text);
    }
    kept = sg_textpool_keep(pool, cmd, n);
    if (!kept)
        return SG_E_TOOBIG;
    f->ptr = (const uint8_t *)kept;
    f->len = (uint32_t)n;
    if (!keep_end)
        f->end = SG_BMSG_STR_NUL;
    m->command = kept;
    m->text = say ? sg_textpool_keep(pool, text, len) : kept;
    if (!m->text)
        m->text = kept;
    m->text_len = strlen(m->text);
    m->changed = true;
    return 0;
}

int sg_fmsg_drop(struct sg_frame *fr, bool *dropped, const int *msg_index, unsigned i)
{
    if (fr->kind != SG_FRAME_MESSAGE || i >= fr->nmsgs || fr->msgs[i].injected)
        return SG_E_UNSUPPORTED;
    fr->msgs[i].dropped = true;
    dropped[msg_index[i]] = true;
    return 0;
}

void sg_fmsg_injected(struct sg_textpool *pool, struct sg_msg *m, struct sg_bmsg_writer *w,
                      enum sg_msg_kind kind, const char *name, int32_t number, const char *text,
                      size_t len)
{
    sg_bmsg_write_string(w, text, len, SG_BMSG_STR_NUL);
    memset(m, 0, sizeof(*m));
    m->kind = kind;
    m->name = name;
    m->number = number;
    m->injected = true;
    m->text = m->command = sg_textpool_keep(pool, text, len);
    m->text_len = m->text ? len : 0;
}

const char *sg_text_op_write(struct sg_bmsg_writer *w, const struct sg_text_ops *ops,
                             enum sg_dir dir, enum sg_msg_kind kind)
{
    if (dir == SG_DIR_C2S) {
        sg_bmsg_write_u8(w, ops->stringcmd);
        return "clc_stringcmd";
    }
    switch (kind) {
    case SG_MSG_CENTERPRINT:
        sg_bmsg_write_u8(w, ops->centerprint);
        return "svc_centerprint";
    case SG_MSG_STUFFTEXT:
        sg_bmsg_write_u8(w, ops->stufftext);
        return "svc_stufftext";
    default:
        sg_bmsg_write_u8(w, ops->print);
        if (ops->print_level)
            sg_bmsg_write_u8(w, kind == SG_MSG_CHAT ? 3 : 2);
        return "svc_print";
    }
}

bool sg_relinj_attach(struct sg_relinj *inj, struct sg_frame *fr, unsigned msgs_cap,
                      struct sg_bmsg_writer *w, size_t limit, const struct sg_text_ops *ops,
                      struct sg_textpool *pool)
{
    bool any = false;

    for (unsigned i = 0; i < inj->n; i++) {
        struct sg_relinj_item *j = &inj->item[i];
        const char *name;
        if (j->dir != fr->dir || w->len + j->len + 3 > limit || fr->nmsgs >= msgs_cap)
            continue;
        j->attached = any = true;
        name = sg_text_op_write(w, ops, j->dir, j->kind);
        sg_fmsg_injected(pool, &fr->msgs[fr->nmsgs++], w, j->kind, name, -1, j->text, j->len);
    }
    return any;
}
