/* The idTech 1/2 field and message lists: the field writer, the text pool, the filters' view. */
#include "protocols/msglist.h"

#include <errno.h>
#include <stdlib.h>
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

/* ---- the filters' view ---- */

void sg_fview_put_msg(FILE *out, const struct sg_msg *m)
{
    fprintf(out, "  %s%s%s", m->name, m->dropped ? " (dropped)" : "",
            m->injected ? " (injected)" : "");
    if (m->text) {
        fputs(" \"", out);
        sg_put_escaped(out, (const uint8_t *)m->text, m->text_len, false);
        fputc('"', out);
    }
}

int sg_fview_room(struct sg_fview *v, uint32_t cap)
{
    void *p;

    if (!(p = realloc(v->msgs, cap * sizeof(*v->msgs))))
        return -ENOMEM;
    v->frame.msgs = v->msgs = p;
    if (!(p = realloc(v->msg_index, cap * sizeof(*v->msg_index))))
        return -ENOMEM;
    v->msg_index = p;
    if (!(p = realloc(v->dropped, cap * sizeof(*v->dropped))))
        return -ENOMEM;
    v->dropped = p;
    v->msgs_cap = cap;
    return 0;
}

void sg_fview_free(struct sg_fview *v)
{
    free(v->msgs);
    free(v->msg_index);
    free(v->dropped);
}

int sg_fview_reject(struct sg_fview *v, struct sg_codec_stats *stats, const char *why)
{
    v->frame.kind = SG_FRAME_REJECTED;
    v->why = why;
    stats->rejected++;
    return 0;
}

/* The string field `tf` as the view message's command and text (kept in
 * the pool): false when the pool is full (then the message stays GAME). */
static bool take_text(struct sg_textpool *pool, struct sg_msg *m, const struct sg_field *tf)
{
    m->command = sg_textpool_keep(pool, tf->ptr, tf->len);
    if (!m->command)
        return false;
    m->text = m->command;
    m->text_len = tf->len;
    return true;
}

const struct sg_field *sg_fview_take_text(struct sg_fview *v, struct sg_msg *m,
                                          const struct sg_fmsg *pm, const struct sg_field *tf)
{
    const struct sg_fview_rules *r = v->rules;

    if (v->frame.dir == SG_DIR_C2S && r->leave_verb) {
        char verb[32];
        sg_text_verb((const char *)tf->ptr, tf->len, verb, sizeof(verb));
        if (strcmp(verb, r->leave_verb) == 0)
            v->frame.disconnect = true;
    }
    if (!take_text(&v->text, m, tf))
        return NULL;
    if (v->frame.dir == SG_DIR_C2S) {
        sg_fview_client_command(&v->text, m, tf->len);
        return tf;
    }
    if (pm->op == r->ops.print && r->ops.print_level) {
        uint32_t level = v->fields[pm->first].raw;
        m->number = (int32_t)level;
        m->kind = level == 3 ? SG_MSG_CHAT : SG_MSG_PRINT; /* PRINT_CHAT */
    } else if (pm->op == r->ops.print) {
        /* no level: a chat line starts with byte 1 (NetQuake's SV_ClientPrintf of say) */
        m->kind = tf->len > 0 && tf->ptr[0] == 1 ? SG_MSG_CHAT : SG_MSG_PRINT;
    } else if (pm->op == r->ops.centerprint) {
        m->kind = SG_MSG_CENTERPRINT;
    } else if (pm->op == r->ops.stufftext) {
        m->kind = SG_MSG_STUFFTEXT;
    } else {
        m->kind = r->other_text;
    }
    return tf;
}

/* May message `i` be changed or dropped, by the game's rule? */
static bool changeable(const struct sg_fview *v, unsigned i)
{
    return !v->rules->changeable || v->rules->changeable(v, i);
}

int sg_fview_set_text(void *state, unsigned i, const char *text, size_t len)
{
    struct sg_fview *v = state;
    int err;

    if (!changeable(v, i))
        return SG_E_UNSUPPORTED;
    if (v->frame.kind == SG_FRAME_MESSAGE && i < v->frame.nmsgs &&
        v->msgs[i].kind == SG_MSG_CONFIGSTRING)
        return SG_E_UNSUPPORTED;
    err = sg_fmsg_set_text(&v->text, &v->frame, i, v->fields, v->pmsgs, v->msg_index,
                           v->rules->keep_end, text, len);
    if (err == 0)
        v->pmsgs[v->msg_index[i]].changed = true;
    return err;
}

int sg_fview_drop_msg(void *state, unsigned i)
{
    struct sg_fview *v = state;

    if (!changeable(v, i))
        return SG_E_UNSUPPORTED;
    return sg_fmsg_drop(&v->frame, v->dropped, v->msg_index, i);
}

int sg_fview_inject(void *state, enum sg_dir dir, enum sg_msg_kind kind, const char *text,
                    size_t len)
{
    struct sg_fview *v = state;
    struct sg_relinj_item *j;
    int err = sg_relinj_add(&v->inj, dir, kind, text, len);

    if (err < 0 || v->rules->ops.print_level || dir != SG_DIR_S2C || kind != SG_MSG_CHAT)
        return err;
    /* A chat line marked with a leading 1 byte (the check left room for it). */
    j = &v->inj.item[v->inj.n - 1];
    memmove(j->text + 1, j->text, j->len + 1);
    j->text[0] = '\001';
    j->len++;
    return 0;
}

/* May the view's datagram carry injections towards `dir` now? */
static bool may_carry(const struct sg_fview *v, enum sg_dir dir)
{
    if (!v->carrier)
        return v->rules->patience > 0;
    if (v->rules->patience)
        return !v->inj.q[dir].in_flight;
    return sg_relinj_can_carry(&v->inj, dir);
}

bool sg_fview_must_encode(void *state, const struct sg_frame *frame)
{
    const struct sg_fview *v = state;

    if (frame != &v->frame || frame->kind != SG_FRAME_MESSAGE || !may_carry(v, frame->dir))
        return false;
    return sg_relinj_ready(&v->inj, frame->dir, v->carrier ? 0 : v->rules->patience);
}

void sg_fview_inject_write_any(struct sg_fview *v, struct sg_bmsg_writer *w, size_t limit)
{
    const struct sg_fview_rules *r = v->rules;
    enum sg_dir dir = v->frame.dir;
    size_t over = r->ops.print_level ? 3 : 2; /* the opcode, the level, the string's 0 */
    unsigned wait = v->carrier ? 0 : r->patience;
    bool any = false;

    if (!may_carry(v, dir))
        return;
    for (unsigned i = 0; i < v->inj.n; i++) {
        struct sg_relinj_item *j = &v->inj.item[i];
        const char *name;
        if (j->dir != dir || j->attached || w->len + j->len + over > limit ||
            v->frame.nmsgs >= v->msgs_cap || j->waited < wait)
            continue;
        j->attached = any = true;
        name = sg_text_op_write(w, &r->ops, j->dir, j->kind);
        sg_fmsg_injected(&v->text, &v->msgs[v->frame.nmsgs++], w, j->kind, name,
                         r->number_injected ? (int32_t)v->seq : -1, j->text, j->len);
    }
    if (any && v->carrier)
        sg_relinj_carried(&v->inj, dir, v->seq);
}

void sg_fview_sent(struct sg_fview *v, bool sent)
{
    if (!v->carrier && v->rules->patience)
        sg_relinj_settle(&v->inj, v->frame.dir, sent); /* sent: done with; else wait again */
    else if (!sent) /* not sent: what rode on it waits for the next carrier */
        sg_relinj_unsent(&v->inj, v->frame.dir, v->seq);
}
