/*
 * Quake 3 frames for the inspector (inspect.h; formats in doc/inspect.md).
 *
 * Everything is written into a memory stream first, so the caller gets
 * the exact byte count and a JSON object from dump.c (which ends its line)
 * can be embedded without its newline.
 */
#include "protocols/q3/inspect.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "protocols/error.h"
#include "protocols/json.h"
#include "protocols/q3/dump.h"

struct ictx {
    FILE *f;
    bool json;
    const struct sg_frame *frame;
    const struct sg_q3_frame *qf;
    const struct sg_q3_svmsg *sv;
    int sv_err;
};

/* ---- strings ---- */

/* Raw bytes as a JSON string (protocols/json.h). */
static void json_str(FILE *f, const char *s, size_t len)
{
    sg_json_str(f, s, len);
}

/* Raw bytes on one text line: backslash, control characters and bytes >= 0x7f escaped. */
static void text_str(FILE *f, const char *s, size_t len)
{
    for (size_t i = 0; s && i < len; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c == '\\')
            fputs("\\\\", f);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\r')
            fputs("\\r", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
}

/* `,"key":value` in JSON, ` key=value` in text. */
static void put_int(struct ictx *c, const char *key, long long v)
{
    fprintf(c->f, c->json ? ",\"%s\":%lld" : " %s=%lld", key, v);
}

static void put_string(struct ictx *c, const char *key, const char *s, size_t len)
{
    if (c->json) {
        fprintf(c->f, ",\"%s\":", key);
        json_str(c->f, s, len);
    } else {
        fprintf(c->f, " %s=", key);
        text_str(c->f, s, len);
    }
}

static void put_bool(struct ictx *c, const char *key, bool v)
{
    if (c->json)
        fprintf(c->f, ",\"%s\":%s", key, v ? "true" : "false");
    else if (v)
        fprintf(c->f, " %s", key);
}

/* ---- the packet line ---- */

static void packet_oob(struct ictx *c)
{
    const struct sg_q3_oob *o = &c->qf->u.oob;

    if (c->json) {
        fputs(",\"oob\":{\"type\":", c->f);
        json_str(c->f, sg_q3_oob_kind_name(o->kind), strlen(sg_q3_oob_kind_name(o->kind)));
        fputs(",\"command\":", c->f);
        json_str(c->f, o->command, strnlen(o->command, sizeof(o->command)));
    } else {
        fprintf(c->f, " oob=%s", sg_q3_oob_kind_name(o->kind));
        if (o->kind == SG_Q3_OOB_UNKNOWN)
            put_string(c, "command", o->command, strnlen(o->command, sizeof(o->command)));
    }
    if (o->has_challenge)
        put_int(c, "challenge", o->challenge);
    if (o->has_client_challenge)
        put_int(c, "client_challenge", o->client_challenge);
    if (o->has_protocol)
        put_int(c, "protocol", o->protocol);
    if (o->has_qport)
        put_int(c, "qport", o->qport);
    if (o->game[0])
        put_string(c, "game", o->game, strnlen(o->game, sizeof(o->game)));
    put_int(c, "text_len", (long long)o->text_len);
    if (c->json)
        fputc('}', c->f);
}

static void packet_message(struct ictx *c)
{
    const struct sg_q3_frame *qf = c->qf;

    put_int(c, "msg_len", (long long)qf->msg_len);
    put_int(c, "pieces", qf->pieces);
    if (qf->dir == SG_Q3_S2C) {
        int ncmd = 0;
        bool gs = false;
        const struct sg_q3_snap *snap = NULL;

        if (c->sv) {
            ncmd = (int)sg_q3_svmsg_count(c->sv, SG_Q3_SVC_SERVERCOMMAND);
            gs = sg_q3_svmsg_count(c->sv, SG_Q3_SVC_GAMESTATE) > 0;
            snap = sg_q3_svmsg_snapshot(c->sv);
            put_int(c, "reliable_ack", c->sv->reliable_ack);
        } else {
            ncmd = qf->u.sv.num_commands;
            gs = qf->u.sv.gamestate;
            put_int(c, "reliable_ack", qf->u.sv.reliable_ack);
        }
        put_int(c, "commands", ncmd);
        put_bool(c, "gamestate", gs);
        if (snap) {
            put_int(c, "server_time", snap->server_time);
            put_int(c, "delta_num", snap->delta_num);
        }
        if (c->sv_err < 0) {
            const char *e = sg_errname(c->sv_err);
            put_string(c, "parse_error", e, strlen(e));
        }
        return;
    }
    put_int(c, "server_id", qf->u.cl.server_id);
    put_int(c, "message_ack", qf->u.cl.message_ack);
    put_int(c, "reliable_ack", qf->u.cl.reliable_ack);
    put_int(c, "commands", qf->u.cl.num_commands);
    put_int(c, "usercmds", qf->u.cl.move_op ? qf->u.cl.num_cmds : 0);
    if (qf->content_err < 0) {
        const char *e = sg_errname(qf->content_err);
        put_string(c, "content_error", e, strlen(e));
    }
}

static void packet(struct ictx *c)
{
    const struct sg_q3_frame *qf = c->qf;
    const char *rx = sg_q3_rx_name(qf->rx);

    if (c->json) {
        fputs("{\"rx\":", c->f);
        json_str(c->f, rx, strlen(rx));
    } else {
        fprintf(c->f, "q3 %s", rx);
    }
    put_int(c, "len", (long long)qf->datagram_len);
    if (qf->rx != SG_Q3_RX_OOB && qf->rx != SG_Q3_RX_UNDECODABLE) {
        put_int(c, "seq", qf->sequence);
        if (qf->fragmented && qf->rx == SG_Q3_RX_HEADERS) {
            put_int(c, "fragment", 1); /* its fields are not read (headers only) */
        } else if (qf->fragmented) {
            if (c->json)
                fprintf(c->f, ",\"fragment\":{\"start\":%d,\"length\":%d}", qf->fragment_start,
                        qf->fragment_length);
            else
                fprintf(c->f, " frag=%d+%d", qf->fragment_start, qf->fragment_length);
        }
        if (qf->dir == SG_Q3_C2S && (qf->rx != SG_Q3_RX_HEADERS || qf->header_len >= 6))
            put_int(c, "qport", qf->qport);
        if (qf->has_checksum) {
            if (c->json)
                fprintf(c->f, ",\"checksum\":%u", (unsigned)qf->checksum);
            else
                fprintf(c->f, " checksum=0x%08x", (unsigned)qf->checksum);
        }
        if (qf->dropped > 0)
            put_int(c, "dropped", qf->dropped);
    }
    if (qf->rx == SG_Q3_RX_OOB)
        packet_oob(c);
    else if (qf->rx == SG_Q3_RX_MESSAGE)
        packet_message(c);
    if (c->frame && c->frame->new_level) {
        put_string(c, "level", c->frame->level, strnlen(c->frame->level, sizeof(c->frame->level)));
    }
    if (!c->json)
        fputc('\n', c->f);
}

/* ---- messages ---- */

/* One message line / object; `m` (NULL for a derived message) gives its marks. */
static void message(struct ictx *c, unsigned i, const char *kind, const char *name, int32_t num,
                    const char *text, size_t len, const struct sg_msg *m)
{
    bool repeat = m && m->repeat, changed = m && m->changed, dropped = m && m->dropped;
    bool injected = m && m->injected;

    if (c->json) {
        fprintf(c->f, "%s{\"i\":%u,\"kind\":\"%s\",\"name\":", i ? "," : "", i, kind);
        json_str(c->f, name, strlen(name));
        fprintf(c->f, ",\"num\":%d", num);
        if (text) {
            fputs(",\"text\":", c->f);
            json_str(c->f, text, len);
        }
        put_bool(c, "repeat", repeat);
        put_bool(c, "changed", changed);
        put_bool(c, "removed", dropped);
        put_bool(c, "injected", injected);
        fputc('}', c->f);
        return;
    }
    fprintf(c->f, "  msg %-3u %-12s %s", i, kind, name);
    if (text) {
        /* aligned columns when a text follows */
        fprintf(c->f, "%*s", strlen(name) < 18 ? (int)(18 - strlen(name)) : 0, "");
        if (num >= 0)
            fprintf(c->f, " #%-5d", num);
        else
            fputs("       ", c->f);
        fputc(' ', c->f);
        text_str(c->f, text, len);
    } else if (num >= 0) {
        fprintf(c->f, " #%d", num);
    }
    if (injected)
        fputs(" (injected)", c->f);
    if (repeat)
        fputs(" (repeat)", c->f);
    if (changed)
        fputs(" (changed)", c->f);
    if (dropped)
        fputs(" (removed)", c->f);
    fputc('\n', c->f);
}

/* The messages when the codec did not list them: from the decoded datagram. */
static void derived_messages(struct ictx *c)
{
    const struct sg_q3_frame *qf = c->qf;
    const char *kind_game = sg_msg_kind_name(SG_MSG_GAME);
    unsigned n = 0;

    if (qf->rx == SG_Q3_RX_OOB) {
        message(c, n++, kind_game, sg_q3_oob_kind_name(qf->u.oob.kind), -1, NULL, 0, NULL);
        return;
    }
    if (qf->rx != SG_Q3_RX_MESSAGE)
        return;
    if (qf->dir == SG_Q3_C2S) {
        const struct sg_q3_clmsg *cm = &qf->u.cl;
        for (int i = 0; i < cm->num_commands; i++)
            message(c, n++, sg_msg_kind_name(SG_MSG_CLIENT_COMMAND), "clc_clientCommand",
                    cm->commands[i].sequence, cm->commands[i].text,
                    strnlen(cm->commands[i].text, sizeof(cm->commands[i].text)), NULL);
        if (cm->move_op)
            message(c, n++, kind_game, sg_q3_clc_name(cm->move_op), cm->num_cmds, NULL, 0, NULL);
        return;
    }
    if (!c->sv)
        return;
    for (uint32_t i = 0; i < c->sv->num_ops; i++) {
        const struct sg_q3_op *op = &c->sv->ops[i];

        if (op->type == SG_Q3_SVC_SERVERCOMMAND) {
            const char *t = sg_q3_svmsg_str(c->sv, op->u.cmd.text);
            const struct sg_msg marks = {.repeat = !op->u.cmd.fresh};

            message(c, n++, sg_msg_kind_name(SG_MSG_SERVER_COMMAND), sg_q3_svc_name(op->type),
                    op->u.cmd.sequence, t, op->u.cmd.text.len, &marks);
        } else if (op->type == SG_Q3_SVC_SNAPSHOT && op->u.snap < c->sv->num_snaps) {
            message(c, n++, kind_game, sg_q3_svc_name(op->type),
                    c->sv->snaps[op->u.snap].server_time, NULL, 0, NULL);
        } else if (op->type != SG_Q3_SVC_NOP && op->type != SG_Q3_SVC_EOF) {
            message(c, n++, kind_game, sg_q3_svc_name(op->type), -1, NULL, 0, NULL);
        }
    }
}

static void messages(struct ictx *c)
{
    const struct sg_frame *f = c->frame;

    if (c->json)
        fputs(",\"msgs\":[", c->f);
    if (f && f->nmsgs > 0 && f->msgs) {
        for (unsigned i = 0; i < f->nmsgs; i++) {
            const struct sg_msg *m = &f->msgs[i];
            message(c, i, sg_msg_kind_name(m->kind), m->name ? m->name : "", m->number, m->text,
                    m->text_len, m);
        }
    } else {
        derived_messages(c);
    }
    if (c->json)
        fputc(']', c->f);
}

/* ---- fields ---- */

static void usercmd(struct ictx *c, int i, const struct sg_q3_usercmd *u)
{
    if (c->json) {
        fprintf(c->f,
                "%s{\"serverTime\":%d,\"angles\":[%d,%d,%d],\"forwardmove\":%d,"
                "\"rightmove\":%d,\"upmove\":%d,\"buttons\":%d,\"weapon\":%u}",
                i ? "," : "", u->server_time, u->angles[0], u->angles[1], u->angles[2],
                u->forwardmove, u->rightmove, u->upmove, u->buttons, u->weapon);
        return;
    }
    fprintf(c->f, "  usercmd %-2d time=%d angles=%d,%d,%d move=%d,%d,%d buttons=0x%x weapon=%u\n",
            i, u->server_time, u->angles[0], u->angles[1], u->angles[2], u->forwardmove,
            u->rightmove, u->upmove, (unsigned)u->buttons, u->weapon);
}

static void fields_client(struct ictx *c)
{
    const struct sg_q3_clmsg *cm = &c->qf->u.cl;
    const char *move = cm->move_op ? sg_q3_clc_name(cm->move_op) : "";

    if (c->json) {
        fprintf(c->f,
                ",\"cl\":{\"server_id\":%d,\"message_ack\":%d,\"reliable_ack\":%d,\"key\":%d,"
                "\"move\":",
                cm->server_id, cm->message_ack, cm->reliable_ack, cm->key);
        json_str(c->f, move, strlen(move));
        fprintf(c->f, ",\"eof\":%s,\"tail_bits\":%zu,\"commands\":[", cm->eof ? "true" : "false",
                cm->tail_bits);
        for (int i = 0; i < cm->num_commands; i++) {
            fprintf(c->f, "%s{\"seq\":%d,\"text\":", i ? "," : "", cm->commands[i].sequence);
            json_str(c->f, cm->commands[i].text,
                     strnlen(cm->commands[i].text, sizeof(cm->commands[i].text)));
            fputc('}', c->f);
        }
        fputs("],\"usercmds\":[", c->f);
        for (int i = 0; cm->move_op && i < cm->num_cmds && i < SG_Q3_MAX_PACKET_USERCMDS; i++)
            usercmd(c, i, &cm->cmds[i]);
        fputs("]}", c->f);
        return;
    }
    fprintf(c->f,
            "  cl server_id=%d message_ack=%d reliable_ack=%d key=0x%08x move=%s eof=%s "
            "tail_bits=%zu\n",
            cm->server_id, cm->message_ack, cm->reliable_ack, (unsigned)cm->key,
            cm->move_op ? move : "-", cm->eof ? "yes" : "no", cm->tail_bits);
    for (int i = 0; i < cm->num_commands; i++) {
        fprintf(c->f, "  command %d ", cm->commands[i].sequence);
        text_str(c->f, cm->commands[i].text,
                 strnlen(cm->commands[i].text, sizeof(cm->commands[i].text)));
        fputc('\n', c->f);
    }
    for (int i = 0; cm->move_op && i < cm->num_cmds && i < SG_Q3_MAX_PACKET_USERCMDS; i++)
        usercmd(c, i, &cm->cmds[i]);
}

static void fields_oob(struct ictx *c)
{
    const struct sg_q3_oob *o = &c->qf->u.oob;
    size_t len = o->text_len <= SG_Q3_OOB_MAX_TEXT ? o->text_len : SG_Q3_OOB_MAX_TEXT;

    if (c->json) {
        fputs(",\"oob_text\":", c->f);
        json_str(c->f, o->text, len);
        if (o->kind == SG_Q3_OOB_CONNECT) {
            fputs(",\"userinfo\":", c->f);
            json_str(c->f, o->userinfo, strnlen(o->userinfo, sizeof(o->userinfo)));
        }
        return;
    }
    fputs("  text ", c->f);
    text_str(c->f, o->text, len);
    fputc('\n', c->f);
    if (o->kind == SG_Q3_OOB_CONNECT) {
        fputs("  userinfo ", c->f);
        text_str(c->f, o->userinfo, strnlen(o->userinfo, sizeof(o->userinfo)));
        fputc('\n', c->f);
    }
}

/* The server message as dump.c writes it; in JSON without its newline. */
static int fields_server(struct ictx *c)
{
    int err;

    fputs(c->json ? ",\"sv\":" : "  sv ", c->f);
    err = sg_q3_dump_message(c->f, c->json ? SG_Q3_DUMP_JSON : SG_Q3_DUMP_TEXT, c->sv,
                             c->qf->msg_len, c->sv_err);
    if (err < 0)
        return err;
    if (c->json && fseeko(c->f, -1, SEEK_CUR) != 0) /* over the newline */
        return -EIO;
    return 0;
}

static int fields(struct ictx *c)
{
    const struct sg_q3_frame *qf = c->qf;

    if (qf->rx == SG_Q3_RX_OOB)
        fields_oob(c);
    else if (qf->rx == SG_Q3_RX_MESSAGE && qf->dir == SG_Q3_C2S)
        fields_client(c);
    else if (qf->rx == SG_Q3_RX_MESSAGE && c->sv)
        return fields_server(c);
    return 0;
}

int sg_q3_inspect_dump(FILE *out, const struct sg_frame *f, const struct sg_q3_frame *qf,
                       const struct sg_q3_svmsg *sv, int sv_parse_err, enum sg_dump_level level,
                       bool json)
{
    struct ictx c = {.json = json, .frame = f, .qf = qf, .sv = sv, .sv_err = sv_parse_err};
    char *buf = NULL;
    size_t size = 0;
    off_t len;
    int err = 0;

    if (!out || !qf)
        return -EINVAL;
    if (qf->dir != SG_Q3_S2C || qf->rx != SG_Q3_RX_MESSAGE)
        c.sv = NULL;
    c.f = open_memstream(&buf, &size);
    if (!c.f)
        return -ENOMEM;

    packet(&c);
    if (level >= SG_DUMP_MESSAGES)
        messages(&c);
    if (level >= SG_DUMP_FIELDS)
        err = fields(&c);
    if (json)
        fputc('}', c.f);

    if (fflush(c.f) != 0 || ferror(c.f))
        err = err < 0 ? err : -ENOMEM;
    len = ftello(c.f);
    if (err == 0 && len >= 0 && (size_t)len <= size &&
        fwrite(buf, 1, (size_t)len, out) != (size_t)len)
        err = -EIO;
    fclose(c.f);
    free(buf);
    if (err == 0 && len < 0)
        err = -EIO;
    return err < 0 ? err : (int)len;
}
