/*
 * Quake 3 message dumps, text and JSON lines (formats in dump.h).  Names
 * come from the opcode and field tables; nothing here touches the wire.
 */
#include "protocols/q3/dump.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "protocols/error.h"
#include "protocols/json.h"
#include "protocols/q3/fields.h"
#include "protocols/q3/state.h"

struct out {
    FILE *f;
    bool json;
    const struct sg_q3_variant *v; /* the message's: its field tables name the fields */
};

/* Raw bytes as a quoted string: JSON under json.h's rule, or C-escaped text. */
static void put_str(struct out *o, const uint8_t *s, size_t len)
{
    if (o->json) {
        sg_json_str(o->f, s, len);
        return;
    }
    fputc('"', o->f);
    for (size_t i = 0; i < len; i++) {
        uint8_t c = s[i];

        if (c == '"' || c == '\\')
            fprintf(o->f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", o->f);
        else if (c == '\t')
            fputs("\\t", o->f);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(o->f, "\\x%02x", c);
        else
            fputc(c, o->f);
    }
    fputc('"', o->f);
}

/* A byte reference of a message as a string. */
static void put_ref(struct out *o, const struct sg_q3_svmsg *msg, struct sg_q3_bytes ref)
{
    put_str(o, sg_q3_svmsg_bytes(msg, ref), ref.len);
}

/* A full float: nine digits, marked as non-integral when it looks integral. */
static void put_full_float(struct out *o, int32_t bits)
{
    float f = sg_q3_bits_to_float(bits);
    char buf[48];

    if (isnan(f) || isinf(f)) {
        snprintf(buf, sizeof(buf), isnan(f) ? "nan" : (f < 0 ? "-inf" : "inf"));
        if (o->json)
            fprintf(o->f, "\"%s\"", buf);
        else
            fputs(buf, o->f);
        return;
    }
    snprintf(buf, sizeof(buf), "%.9g", (double)f);
    if (!strpbrk(buf, ".e"))
        strcat(buf, ".0");
    fputs(buf, o->f);
}

/* One field value in its recorded form. */
static void put_value(struct out *o, int bits, uint8_t form, int32_t value)
{
    if (form == SG_Q3_FORM_ZERO)
        fputc('0', o->f);
    else if (bits == 0 && form == SG_Q3_FORM_FULL)
        put_full_float(o, value);
    else if (bits == 0 && fabsf(sg_q3_bits_to_float(value)) <= (float)SG_Q3_FLOAT_INT_BIAS)
        fprintf(o->f, "%d", (int)sg_q3_bits_to_float(value));
    else if (bits == 0)
        put_full_float(o, value); /* not a valid 13-bit value: the writer sends it in full */
    else
        fprintf(o->f, "%d", value);
}

/* Fields sent in a delta: name=value pairs (text) or an object (JSON). */
static void put_fields(struct out *o, const struct sg_q3_netfield *table, int count, int lc,
                       const uint8_t *form, const int32_t *value)
{
    bool first = true;

    if (lc > count)
        lc = count; /* the writer sends no more either */
    if (o->json)
        fputs(",\"fields\":{", o->f);
    for (int i = 0; i < lc; i++) {
        if (form[i] == SG_Q3_FORM_SAME)
            continue;
        if (o->json)
            fprintf(o->f, "%s\"%s\":", first ? "" : ",", table[i].name);
        else
            fprintf(o->f, " %s=", table[i].name);
        put_value(o, table[i].bits, form[i], value[i]);
        first = false;
    }
    if (o->json)
        fputc('}', o->f);
}

/* An entity update. */
static void put_entity(struct out *o, const struct sg_q3_entity_delta *e)
{
    const char *kind = e->kind == SG_Q3_ENT_REMOVE ? "remove" : "nochange";

    if (o->json) {
        fprintf(o->f, "{\"n\":%u", e->number);
        if (e->kind != SG_Q3_ENT_DELTA) {
            fprintf(o->f, ",\"%s\":true}", kind);
            return;
        }
        fprintf(o->f, ",\"lc\":%u", e->lc);
        put_fields(o, o->v->entity_fields, o->v->num_entity_fields, e->lc, e->form, e->value);
        fputc('}', o->f);
        return;
    }
    if (e->kind != SG_Q3_ENT_DELTA) {
        fprintf(o->f, " #%u{%s}", e->number, kind);
        return;
    }
    fprintf(o->f, " #%u{lc=%u", e->number, e->lc);
    put_fields(o, o->v->entity_fields, o->v->num_entity_fields, e->lc, e->form, e->value);
    fputc('}', o->f);
}

/* The playerstate arrays that were sent. */
static void put_arrays(struct out *o, const struct sg_q3_player_delta *ps)
{
    if (!ps->arrays)
        return;
    if (o->json)
        fputs(",\"arrays\":{", o->f);
    for (int a = 0, n = 0; a < SG_Q3_PS_NUM_ARRAYS; a++) {
        bool first = true;

        if (!ps->array_sent[a])
            continue;
        if (o->json)
            fprintf(o->f, "%s\"%s\":{", n++ ? "," : "", sg_q3_ps_array_name(a));
        else
            fprintf(o->f, " %s{", sg_q3_ps_array_name(a));
        for (int i = 0; i < SG_Q3_PS_ARRAY_LEN; i++) {
            if (!(ps->array_mask[a] & (1u << i)))
                continue;
            fprintf(o->f, o->json ? "%s\"%d\":%d" : "%s%d:%d", first ? "" : (o->json ? "," : " "),
                    i, ps->array_value[a][i]);
            first = false;
        }
        fputc('}', o->f);
    }
    if (o->json)
        fputc('}', o->f);
}

/* The playerstate update. */
static void put_player(struct out *o, const struct sg_q3_player_delta *ps)
{
    fprintf(o->f, o->json ? ",\"ps\":{\"lc\":%u" : " ps{lc=%u", ps->lc);
    put_fields(o, o->v->player_fields, o->v->num_player_fields, ps->lc, ps->form, ps->value);
    put_arrays(o, ps);
    fputc('}', o->f);
}

/* Areamask bytes as hex. */
static void put_areamask(struct out *o, const struct sg_q3_snap *s)
{
    fputs(o->json ? ",\"areamask\":\"" : " area=", o->f);
    for (int i = 0; i < s->areamask_len; i++)
        fprintf(o->f, "%02x", s->areamask[i]);
    if (o->json)
        fputc('"', o->f);
    else if (!s->areamask_len)
        fputc('-', o->f);
}

/* svc_snapshot. */
static void put_snapshot(struct out *o, const struct sg_q3_svmsg *msg, const struct sg_q3_snap *s)
{
    if (o->json)
        fprintf(o->f,
                ",\"serverTime\":%d,\"deltaNum\":%u,\"deltaMessage\":%d,\"flags\":%u,"
                "\"numEntities\":%u",
                s->server_time, s->delta_num, s->delta_message_num, s->snap_flags, s->num_entities);
    else
        fprintf(o->f, " time=%d delta=%u base=%d flags=0x%x ents=%u", s->server_time, s->delta_num,
                s->delta_message_num, s->snap_flags, s->num_entities);
    if (s->status)
        fprintf(o->f, o->json ? ",\"status\":\"%s\"" : " status=%s", sg_errname(s->status));
    put_areamask(o, s);
    put_player(o, &s->ps);
    if (o->json)
        fputs(",\"entities\":[", o->f);
    for (uint32_t i = 0; i < s->num_ents && s->first_ent + i < msg->num_ents; i++) {
        if (o->json && i)
            fputc(',', o->f);
        put_entity(o, &msg->ents[s->first_ent + i]);
    }
    if (o->json)
        fputc(']', o->f);
}

/* svc_gamestate. */
static void put_gamestate(struct out *o, const struct sg_q3_svmsg *msg, const struct sg_q3_op *op)
{
    fprintf(o->f,
            o->json ? ",\"commandSeq\":%d,\"clientNum\":%d,\"checksumFeed\":%d,\"items\":["
                    : " cmdseq=%d client=%d feed=%d",
            op->u.gamestate.command_seq, op->u.gamestate.client_num, op->u.gamestate.checksum_feed);
    for (uint32_t i = 0; i < op->u.gamestate.num_items; i++) {
        const struct sg_q3_gs_item *it = sg_q3_gs_item(msg, op, i);

        if (!it)
            break;
        if (o->json && i)
            fputc(',', o->f);
        if (it->op == SG_Q3_SVC_CONFIGSTRING) {
            fprintf(o->f, o->json ? "{\"cs\":%u,\"text\":" : " cs[%u]=", it->index);
            put_ref(o, msg, it->text);
            if (o->json)
                fputc('}', o->f);
        } else if (it->ent < msg->num_ents) {
            fputs(o->json ? "{\"baseline\":" : " baseline", o->f);
            put_entity(o, &msg->ents[it->ent]);
            if (o->json)
                fputc('}', o->f);
        }
    }
    if (o->json)
        fputc(']', o->f);
}

/* CRC-32 of a byte reference, for binary payloads. */
static unsigned long crc_of(const struct sg_q3_svmsg *msg, struct sg_q3_bytes ref)
{
    return crc32(crc32(0L, Z_NULL, 0), sg_q3_svmsg_bytes(msg, ref), ref.len);
}

/* svc_download and svc_voip*. */
static void put_binary(struct out *o, const struct sg_q3_svmsg *msg, const struct sg_q3_op *op)
{
    if (op->type == SG_Q3_SVC_DOWNLOAD) {
        fprintf(o->f, o->json ? ",\"block\":%u" : " block=%u", op->u.download.block);
        if (op->u.download.has_size)
            fprintf(o->f, o->json ? ",\"size\":%d" : " size=%d", op->u.download.size);
        if (op->u.download.has_size && op->u.download.size < 0) {
            fputs(o->json ? ",\"error\":" : " error=", o->f);
            put_ref(o, msg, op->u.download.error);
            return;
        }
        fprintf(o->f, o->json ? ",\"len\":%u,\"crc\":\"%08lx\"" : " len=%u crc=%08lx",
                op->u.download.data.len, crc_of(msg, op->u.download.data));
        return;
    }
    fprintf(o->f,
            o->json ? ",\"sender\":%d,\"generation\":%u,\"sequence\":%d,\"frames\":%u,"
                      "\"size\":%d,\"flags\":%u,\"crc\":\"%08lx\""
                    : " sender=%d gen=%u seq=%d frames=%u size=%d flags=%u crc=%08lx",
            op->u.voip.sender, op->u.voip.generation, op->u.voip.sequence, op->u.voip.frames,
            op->u.voip.size, op->u.voip.flags, crc_of(msg, op->u.voip.data));
}

/* One op. */
static void put_op(struct out *o, const struct sg_q3_svmsg *msg, const struct sg_q3_op *op)
{
    fprintf(o->f, o->json ? "{\"op\":\"%s\"" : " | %s", sg_q3_svc_name(op->type));
    switch (op->type) {
    case SG_Q3_SVC_SERVERCOMMAND:
        fprintf(o->f, o->json ? ",\"seq\":%d,\"text\":" : " %d ", op->u.cmd.sequence);
        put_ref(o, msg, op->u.cmd.text);
        if (op->u.cmd.text.cut)
            fputs(o->json ? ",\"cut\":true" : " cut", o->f);
        if (!op->u.cmd.fresh)
            fputs(o->json ? ",\"old\":true" : " old", o->f);
        break;
    case SG_Q3_SVC_GAMESTATE:
        put_gamestate(o, msg, op);
        break;
    case SG_Q3_SVC_SNAPSHOT:
        if (op->u.snap < msg->num_snaps)
            put_snapshot(o, msg, &msg->snaps[op->u.snap]);
        break;
    case SG_Q3_SVC_DOWNLOAD:
    case SG_Q3_SVC_VOIP_SPEEX:
    case SG_Q3_SVC_VOIP_OPUS:
        put_binary(o, msg, op);
        break;
    default:
        break;
    }
    if (o->json)
        fputc('}', o->f);
}

int sg_q3_dump_message(FILE *f, enum sg_q3_dump_format format, const struct sg_q3_svmsg *msg,
                       size_t len, int err)
{
    struct out o = {f, format == SG_Q3_DUMP_JSON, sg_q3_svmsg_variant(msg)};

    if (o.json)
        fprintf(f, "{\"seq\":%d,\"len\":%zu,\"ack\":%d,\"ops\":[", msg->sequence, len,
                msg->reliable_ack);
    else
        fprintf(f, "%d len=%zu ack=%d", msg->sequence, len, msg->reliable_ack);
    for (uint32_t i = 0; i < msg->num_ops; i++) {
        if (o.json && i)
            fputc(',', f);
        put_op(&o, msg, &msg->ops[i]);
    }
    if (o.json)
        fputc(']', f);
    if (err < 0)
        fprintf(f, o.json ? ",\"error\":\"%s\"" : " | error=%s", sg_errname(err));
    fputs(o.json ? "}\n" : "\n", f);
    return ferror(f) ? -EIO : 0;
}

/* The last line of a dump: how the file ended. */
static void put_end(FILE *f, bool json, const struct sg_q3_demo_reader *r, int end)
{
    if (end == 0)
        fputs(json ? "{\"end\":\"marker\"}\n" : "# end marker\n", f);
    else
        fprintf(f, json ? "{\"end\":\"%s\",\"partial\":%zu}\n" : "# end %s partial=%zu\n",
                sg_errname(end), r->partial);
}

int sg_q3_dump_next(struct sg_q3_demo_reader *r, struct sg_q3_state *st, uint8_t *buf,
                    size_t *len, struct sg_q3_svmsg *msg, int *perr,
                    struct sg_q3_dump_stats *stats)
{
    int32_t seq;
    int err = sg_q3_demo_read(r, &seq, buf, len);

    if (err <= 0) {
        stats->end = err;
        return err;
    }
    *perr = sg_q3_parse_server_message(st, seq, buf, *len, msg);
    if (*perr == -ENOMEM)
        return -ENOMEM;
    stats->messages++;
    stats->decode_errors += *perr < 0;
    stats->gamestates += sg_q3_svmsg_count(msg, SG_Q3_SVC_GAMESTATE);
    for (uint32_t i = 0; i < msg->num_snaps; i++) {
        stats->snapshots++;
        stats->nodelta += msg->snaps[i].status == SG_E_NODELTA;
    }
    return err;
}

int sg_q3_dump_demo(FILE *out, enum sg_q3_dump_format format, struct sg_q3_demo_reader *r,
                    struct sg_q3_dump_stats *stats)
{
    struct sg_q3_dump_stats local;
    struct sg_q3_state *st = sg_q3_state_create(r->protocol);
    uint8_t *buf = malloc(SG_Q3_MAX_MSGLEN);
    struct sg_q3_svmsg msg;
    int err = 0;

    if (!stats)
        stats = &local;
    memset(stats, 0, sizeof(*stats));
    sg_q3_svmsg_init(&msg);
    if (!st || !buf) {
        err = -ENOMEM;
        goto out;
    }

    /* every message, in file order, through one stream state */
    for (;;) {
        size_t len;
        int perr;

        err = sg_q3_dump_next(r, st, buf, &len, &msg, &perr, stats);
        if (err == -ENOMEM)
            goto out;
        if (err <= 0)
            break;
        if (sg_q3_dump_message(out, format, &msg, len, perr) < 0) {
            err = -EIO;
            goto out;
        }
    }
    put_end(out, format == SG_Q3_DUMP_JSON, r, err);
    err = ferror(out) ? -EIO : 0;
out:
    sg_q3_svmsg_finish(&msg);
    sg_q3_state_destroy(st);
    free(buf);
    return err;
}
