/*
 * Quake 3 sessions of a capture, decoded as the live proxy decodes them:
 * the capture decoder behind the codec table (codec.h, struct
 * sg_capture_impl) that `slipgate pcap decode` feeds with each flow.
 *
 * Per datagram the rest of one line: the netchan header (sequence,
 * fragment, what the receiver does with it) and a summary of the decoded
 * message; with JSON the members of one object.  Queries and their answers
 * (getinfo, getstatus, rcon ...) need no netchan: a flow made only of them
 * keeps no session state.  With a record base each game flow's server
 * messages go to <base>.dm_<protocol>, starting at the gamestate and ending
 * where the client's own demo ends (as the live recorder, filters/record.c):
 * before the client's `disconnect`, or after a server message carrying the
 * server's `disconnect`.  A reconnect on the same flow (a new gamestate)
 * goes into <base>-2.dm_<protocol>, and so on.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "protocols/codec.h"
#include "protocols/demofile.h"
#include "protocols/error.h"
#include "protocols/q3/demo.h"
#include "protocols/q3/netchan.h"
#include "protocols/q3/state.h"
#include "protocols/q3/svmsg.h"
#include "protocols/text.h"

#define TEXT_MAX 60 /* characters of a command shown in text lines */

struct flow {
    struct sg_q3_netchan *nc;   /* allocated at the first netchan datagram */
    struct sg_q3_frame *f;      /* with nc */
    struct sg_q3_state *st;     /* the client's view of the server stream */
    struct sg_q3_svmsg sv;      /* the last server message */
    char *record_base;          /* NULL: not recording */
    struct sg_q3_demo_writer w; /* --record */
    struct sg_q3_recorder rec;
    bool recording, record_failed, recorded;
    uint64_t whole; /* the demo's bytes up to its last whole block */
    bool ended;     /* the connection ended: record again from a new gamestate */
    unsigned demos; /* files started */
    uint64_t datagrams, oob, errors;
};

/* ---- output helpers ---- */

/* `len` bytes of `s` as a quoted string: JSON (\uXXXX) or text (\xNN). */
static void put_string(FILE *out, const char *s, size_t len, bool json, size_t max)
{
    fputc('"', out);
    sg_put_escaped(out, (const uint8_t *)s, len < max ? len : max, json);
    if (len > max)
        fputs("...", out);
    fputc('"', out);
}

/* Is the first word of an out-of-band datagram one of `words`? */
static bool oob_word_in(const uint8_t *data, size_t len, const char *const *words, size_t count)
{
    size_t n;

    if (!sg_q3_oob_is(data, len))
        return false;
    for (n = 4; n < len && data[n] > ' '; n++)
        ;
    n -= 4;
    for (size_t i = 0; i < count; i++)
        if (n == strlen(words[i]) && strncasecmp((const char *)data + 4, words[i], n) == 0)
            return true;
    return false;
}

static void print_oob(FILE *out, const struct sg_q3_oob *o, bool json)
{
    if (json) {
        fprintf(out, ",\"oob\":\"%s\",\"command\":", sg_q3_oob_kind_name(o->kind));
        put_string(out, o->command, strlen(o->command), true, SIZE_MAX);
        if (o->has_challenge)
            fprintf(out, ",\"challenge\":%" PRId32, o->challenge);
        if (o->has_client_challenge)
            fprintf(out, ",\"client_challenge\":%" PRId32, o->client_challenge);
        if (o->has_protocol)
            fprintf(out, ",\"protocol\":%d", o->protocol);
        if (o->has_qport)
            fprintf(out, ",\"qport\":%u", o->qport);
        if (o->kind == SG_Q3_OOB_CONNECT) {
            fputs(",\"userinfo\":", out);
            put_string(out, o->userinfo, strlen(o->userinfo), true, SIZE_MAX);
        }
        fprintf(out, ",\"text_len\":%zu", o->text_len);
        return;
    }
    fprintf(out, " oob %s", o->kind ? sg_q3_oob_kind_name(o->kind) : o->command);
    if (o->has_challenge)
        fprintf(out, " challenge=%" PRId32, o->challenge);
    if (o->has_client_challenge)
        fprintf(out, " client_challenge=%" PRId32, o->client_challenge);
    if (o->has_protocol)
        fprintf(out, " protocol=%d", o->protocol);
    if (o->has_qport)
        fprintf(out, " qport=%u", o->qport);
    if (o->game[0])
        fprintf(out, " game=%s", o->game);
    fprintf(out, " len=%zu", o->text_len);
}

static void print_command(FILE *out, const char *op, int32_t seq, const char *text, size_t len,
                          bool json)
{
    if (json) {
        fprintf(out, "{\"op\":\"%s\",\"seq\":%" PRId32 ",\"text\":", op, seq);
        put_string(out, text, len, true, SIZE_MAX);
        fputc('}', out);
    } else {
        fprintf(out, " %" PRId32 " ", seq);
        put_string(out, text, len, false, TEXT_MAX);
    }
}

/* A client message: acks, commands, moves. */
static void print_client(FILE *out, const struct sg_q3_clmsg *cl, bool json)
{
    const char *mv = cl->move_op ? sg_q3_clc_name(cl->move_op) : NULL;

    if (json) {
        fprintf(out,
                ",\"server_id\":%" PRId32 ",\"message_ack\":%" PRId32 ",\"reliable_ack\":%" PRId32
                ",\"commands\":[",
                cl->server_id, cl->message_ack, cl->reliable_ack);
        for (int i = 0; i < cl->num_commands; i++) {
            if (i)
                fputc(',', out);
            print_command(out, "clc_clientCommand", cl->commands[i].sequence, cl->commands[i].text,
                          cl->commands[i].len, true);
        }
        fputc(']', out);
        if (mv) {
            fprintf(out, ",\"move\":\"%s\",\"usercmds\":[", mv);
            for (int i = 0; i < cl->num_cmds; i++) {
                const struct sg_q3_usercmd *u = &cl->cmds[i];

                fprintf(out,
                        "%s{\"time\":%" PRId32 ",\"angles\":[%" PRId32 ",%" PRId32 ",%" PRId32
                        "],\"forward\":%d,\"right\":%d,\"up\":%d,\"buttons\":%" PRId32
                        ",\"weapon\":%u}",
                        i ? "," : "", u->server_time, u->angles[0], u->angles[1], u->angles[2],
                        u->forwardmove, u->rightmove, u->upmove, u->buttons, u->weapon);
            }
            fputc(']', out);
        }
        fprintf(out, ",\"eof\":%s", cl->eof ? "true" : "false");
        return;
    }
    fprintf(out, " sid=%" PRId32 " mack=%" PRId32 " rack=%" PRId32, cl->server_id, cl->message_ack,
            cl->reliable_ack);
    for (int i = 0; i < cl->num_commands; i++) {
        fputs(" | clc_clientCommand", out);
        print_command(out, NULL, cl->commands[i].sequence, cl->commands[i].text,
                      cl->commands[i].len, false);
    }
    if (mv) {
        const struct sg_q3_usercmd *u = &cl->cmds[cl->num_cmds - 1];

        fprintf(out,
                " | %s %d t=%" PRId32 " ang=%" PRId32 ",%" PRId32 " mv=%d,%d,%d b=%" PRId32 " w=%u",
                mv, cl->num_cmds, u->server_time, u->angles[0], u->angles[1], u->forwardmove,
                u->rightmove, u->upmove, u->buttons, u->weapon);
    }
    if (cl->eof)
        fputs(" | clc_EOF", out);
}

/* A server message, from the full parse. */
static void print_server(FILE *out, const struct sg_q3_svmsg *sv, bool json)
{
    if (json)
        fprintf(out, ",\"reliable_ack\":%" PRId32 ",\"ops\":[", sv->reliable_ack);
    else
        fprintf(out, " rack=%" PRId32, sv->reliable_ack);
    for (uint32_t i = 0; i < sv->num_ops; i++) {
        const struct sg_q3_op *op = &sv->ops[i];
        const char *name = sg_q3_svc_name(op->type);

        if (json)
            fprintf(out, "%s", i ? "," : "");
        else
            fprintf(out, " | %s", name);
        switch (op->type) {
        case SG_Q3_SVC_SERVERCOMMAND: {
            const char *s = sg_q3_svmsg_str(sv, op->u.cmd.text);

            if (json) {
                print_command(out, name, op->u.cmd.sequence, s, op->u.cmd.text.len, true);
                continue;
            }
            print_command(out, name, op->u.cmd.sequence, s, op->u.cmd.text.len, false);
            break;
        }
        case SG_Q3_SVC_GAMESTATE:
            fprintf(out,
                    json ? "{\"op\":\"%s\",\"command_seq\":%" PRId32 ",\"items\":%" PRIu32
                           ",\"client_num\":%" PRId32 ",\"checksum_feed\":%" PRId32 "}"
                         : "%.0s cmdseq=%" PRId32 " items=%" PRIu32 " client=%" PRId32
                           " feed=%" PRId32,
                    name, op->u.gamestate.command_seq, op->u.gamestate.num_items,
                    op->u.gamestate.client_num, op->u.gamestate.checksum_feed);
            break;
        case SG_Q3_SVC_SNAPSHOT: {
            const struct sg_q3_snap *sn = &sv->snaps[op->u.snap];

            fprintf(out,
                    json ? "{\"op\":\"%s\",\"server_time\":%" PRId32
                           ",\"delta\":%u,\"flags\":%u,\"entities\":%" PRIu32 "}"
                         : "%.0s t=%" PRId32 " delta=%u flags=%u ents=%" PRIu32,
                    name, sn->server_time, sn->delta_num, sn->snap_flags, sn->num_ents);
            break;
        }
        case SG_Q3_SVC_DOWNLOAD:
            fprintf(out, json ? "{\"op\":\"%s\",\"block\":%u}" : "%.0s block=%u", name,
                    op->u.download.block);
            break;
        default:
            if (json)
                fprintf(out, "{\"op\":\"%s\"}", name);
            break;
        }
    }
    if (json)
        fputc(']', out);
}

/* ---- flows ---- */

/* Does the sender of this datagram act as a client? (-1: cannot tell) */
static int q3_capture_role(const uint8_t *data, size_t len)
{
    static const char *const requests[] = {"getchallenge", "connect", "getinfo", "getstatus",
                                           "rcon"};
    static const char *const responses[] = {"challengeResponse", "connectResponse", "infoResponse",
                                            "statusResponse",    "print",           "disconnect"};

    if (oob_word_in(data, len, responses, sizeof(responses) / sizeof(responses[0])))
        return 0;
    if (oob_word_in(data, len, requests, sizeof(requests) / sizeof(requests[0])))
        return 1;
    return -1;
}

/* Does this datagram need the session's netchan (anything but a query and its answer)? */
static bool needs_netchan(const uint8_t *data, size_t len)
{
    static const char *const queries[] = {"getinfo",        "getstatus", "infoResponse",
                                          "statusResponse", "print",     "rcon"};

    return !oob_word_in(data, len, queries, sizeof(queries) / sizeof(queries[0]));
}

static int q3_capture_create(void **flow, const char *record_base)
{
    struct flow *fl = calloc(1, sizeof(*fl));

    if (!fl)
        return -ENOMEM;
    if (record_base && !(fl->record_base = strdup(record_base))) {
        free(fl);
        return -ENOMEM;
    }
    sg_q3_svmsg_init(&fl->sv);
    *flow = fl;
    return 0;
}

/* The end marker; the file is closed.  The number of errors. */
static int stop_recording(struct flow *fl)
{
    FILE *f = fl->w.f;
    int errors = 0;

    if (!fl->recording)
        return 0;
    fl->w.own = false; /* closed here, cut back first if need be */
    if (sg_q3_demo_writer_finish(&fl->w) < 0) {
        /* a full disk: the demo ends at its last whole block */
        if (f)
            sg_demo_file_cut(f, fl->whole);
        fprintf(stderr, "slipgate pcap: %s.dm_%d: demo write failed\n", fl->record_base,
                fl->nc->protocol ? fl->nc->protocol : SG_Q3_PROTOCOL_68);
        errors++;
    }
    if (f && fclose(f) != 0)
        errors++;
    sg_q3_recorder_finish(&fl->rec);
    fl->recording = false;
    return errors;
}

static int q3_capture_finish(void *flow)
{
    return stop_recording(flow);
}

static void q3_capture_destroy(void *flow)
{
    struct flow *fl = flow;

    if (!fl)
        return;
    if (fl->recording) {
        sg_q3_recorder_finish(&fl->rec);
        sg_q3_demo_writer_finish(&fl->w);
    }
    sg_q3_state_destroy(fl->st);
    sg_q3_netchan_finish(fl->nc);
    free(fl->nc);
    free(fl->f);
    sg_q3_svmsg_finish(&fl->sv);
    free(fl->record_base);
    free(fl);
}

/* Start the flow's demo file when its first server message arrives; the number of errors. */
static int start_recording(struct flow *fl)
{
    int proto = fl->nc->protocol ? fl->nc->protocol : SG_Q3_PROTOCOL_68;
    size_t cap = strlen(fl->record_base) + 32;
    char *path = malloc(cap);
    int err;

    if (!path) {
        fl->record_failed = true;
        fprintf(stderr, "slipgate pcap: out of memory\n");
        return 1;
    }
    if (fl->demos > 0)
        snprintf(path, cap, "%s-%u.dm_%d", fl->record_base, fl->demos + 1, proto);
    else
        snprintf(path, cap, "%s.dm_%d", fl->record_base, proto);
    err = sg_q3_demo_writer_open(&fl->w, path);
    if (err < 0) {
        fprintf(stderr, "slipgate pcap: %s: %s\n", path, sg_strerror(err));
        fl->record_failed = true;
        free(path);
        return 1;
    }
    free(path);
    sg_q3_recorder_init(&fl->rec, &fl->w);
    fl->recording = true;
    fl->recorded = true;
    fl->whole = 0;
    fl->demos++;
    return 0;
}

/* ---- one line per datagram ---- */

/* The rest of a datagram's line, after the proxy's prefix. */
static void print_frame(FILE *out, const struct flow *fl, enum sg_q3_dir dir,
                        const struct sg_q3_frame *f, const struct sg_q3_oob *oob, bool json,
                        int err, int parse_err)
{
    if (oob) {
        print_oob(out, oob, json);
    } else if (f->rx == SG_Q3_RX_OOB) {
        print_oob(out, &f->u.oob, json);
    } else if (json) {
        fprintf(out, ",\"rx\":\"%s\",\"seq\":%" PRId32, sg_q3_rx_name(f->rx), f->sequence);
        if (dir == SG_Q3_C2S)
            fprintf(out, ",\"qport\":%u", f->qport);
        if (f->fragmented)
            fprintf(out, ",\"fragment\":[%d,%d]", f->fragment_start, f->fragment_length);
        if (f->dropped)
            fprintf(out, ",\"dropped\":%" PRId32, f->dropped);
        if (f->rx == SG_Q3_RX_MESSAGE)
            fprintf(out, ",\"msg_len\":%zu,\"pieces\":%d", f->msg_len, f->pieces);
    } else {
        fprintf(out, " seq=%" PRId32, f->sequence);
        if (dir == SG_Q3_C2S)
            fprintf(out, " qport=%u", f->qport);
        if (f->fragmented)
            fprintf(out, " frag=%d+%d", f->fragment_start, f->fragment_length);
        if (f->dropped)
            fprintf(out, " dropped=%" PRId32, f->dropped);
        if (f->rx != SG_Q3_RX_MESSAGE)
            fprintf(out, " %s", sg_q3_rx_name(f->rx));
        else
            fprintf(out, " msg=%zu%s", f->msg_len, f->pieces > 1 ? "(reassembled)" : "");
    }
    if (!oob && f->rx == SG_Q3_RX_MESSAGE && dir == SG_Q3_C2S)
        print_client(out, &f->u.cl, json);
    else if (!oob && f->rx == SG_Q3_RX_MESSAGE)
        print_server(out, &fl->sv, json);
    if (err < 0 || parse_err < 0) {
        int e = err < 0 ? err : parse_err;

        fprintf(out, json ? ",\"error\":\"%s\"" : " | error=%s", sg_errname(e));
    }
    fputs(json ? "}\n" : "\n", out);
}

/* ---- per datagram ---- */

/* Out of memory: the line ends with the error (the datagram is not decoded); 1 error. */
static int no_memory(FILE *out, bool json)
{
    fprintf(stderr, "slipgate pcap: out of memory\n");
    fprintf(out, json ? ",\"error\":\"%s\"}\n" : " | error=%s\n", sg_errname(-ENOMEM));
    return 1;
}

/* A query or its answer, outside any netchan. */
static int query(struct flow *fl, enum sg_q3_dir dir, const uint8_t *data, size_t len, bool json,
                 FILE *out)
{
    struct sg_q3_oob *o = malloc(sizeof(*o));
    int err;

    if (!o)
        return no_memory(out, json);
    fl->oob++;
    err = sg_q3_oob_parse(data, len, dir == SG_Q3_C2S, o);
    if (err < 0)
        fl->errors++;
    print_frame(out, fl, dir, NULL, o, json, err, 0);
    free(o);
    return err < 0;
}

static int q3_capture_datagram(void *flow, enum sg_dir sdir, const uint8_t *data, size_t len,
                               bool json, FILE *out)
{
    struct flow *fl = flow;
    enum sg_q3_dir dir = sdir == SG_DIR_C2S ? SG_Q3_C2S : SG_Q3_S2C;
    struct sg_q3_frame *f;
    int err, parse_err = 0, errors = 0;

    fl->datagrams++;

    /* Queries and their answers: no session state (a status tool may send thousands). */
    if (!fl->nc && !needs_netchan(data, len))
        return query(fl, dir, data, len, json, out);
    if (!fl->nc) {
        fl->nc = malloc(sizeof(*fl->nc));
        fl->f = malloc(sizeof(*fl->f));
        if (!fl->nc || !fl->f) {
            free(fl->nc);
            free(fl->f);
            fl->nc = NULL;
            fl->f = NULL;
            return no_memory(out, json);
        }
        sg_q3_netchan_init(fl->nc);
    }
    f = fl->f;
    err = sg_q3_netchan_decode(fl->nc, dir, data, len, f);
    if (f->rx == SG_Q3_RX_BAD_CHECKSUM && err == 0)
        err = SG_E_MALFORMED;
    if (f->rx == SG_Q3_RX_OOB)
        fl->oob++;
    if (f->rx == SG_Q3_RX_MESSAGE && dir == SG_Q3_S2C && !fl->st &&
        !(fl->st = sg_q3_state_create(0)))
        return no_memory(out, json);

    /* Server messages: the full parse, as the client reads them, and the recording. */
    if (f->rx == SG_Q3_RX_MESSAGE && dir == SG_Q3_S2C) {
        fl->st->protocol = fl->nc->protocol;
        sg_q3_state_set_variant(fl->st, sg_q3_variant_of(fl->nc->wire));
        parse_err = sg_q3_parse_server_message(fl->st, f->sequence, f->msg, f->msg_len, &fl->sv);
        if (parse_err == SG_E_NODELTA)
            parse_err = 0;
        if (fl->ended && sg_q3_svmsg_count(&fl->sv, SG_Q3_SVC_GAMESTATE) > 0)
            fl->ended = false; /* a reconnect */
        if (fl->record_base && !fl->recording && !fl->record_failed && !fl->ended)
            errors += start_recording(fl);
        if (fl->recording) {
            int r = sg_q3_recorder_feed(&fl->rec, fl->st, &fl->sv, parse_err, f->msg, f->msg_len);
            if (r >= 0)
                r = sg_demo_file_whole(fl->w.f, &fl->whole);
            if (r < 0) {
                fprintf(stderr, "slipgate pcap: %s: demo write failed: %s; it ends at its last "
                        "whole block\n", fl->record_base, sg_strerror(r));
                sg_demo_file_cut(fl->w.f, fl->whole);
                fl->w.error = 0; /* the end marker is tried once more */
                fl->record_failed = true;
                errors += 1 + stop_recording(fl);
            }
        }
        /* the server dropped the client: the client's own demo ends with this message */
        if (sg_q3_svmsg_disconnects(&fl->sv)) {
            errors += stop_recording(fl);
            fl->ended = true;
        }
    }

    /* The client leaves: its own demo ended before this message. */
    if (f->rx == SG_Q3_RX_MESSAGE && dir == SG_Q3_C2S && f->content_err >= 0 &&
        sg_q3_clmsg_disconnects(&f->u.cl)) {
        errors += stop_recording(fl);
        fl->ended = true;
    }
    if (err < 0 || parse_err < 0) {
        fl->errors++;
        errors++;
    }
    print_frame(out, fl, dir, f, NULL, json, err, parse_err);
    return errors;
}

static void q3_capture_summary(void *flow, FILE *out)
{
    const struct flow *fl = flow;
    const struct sg_q3_netchan_stats *st;

    if (!fl->nc || fl->oob == fl->datagrams) {
        fprintf(out, "%" PRIu64 " out-of-band datagrams only, errors %" PRIu64 "\n", fl->datagrams,
                fl->errors);
        return;
    }
    st = &fl->nc->stats;
    fprintf(out,
            "%" PRIu64 " datagrams (%" PRIu64 " oob), wire %s, "
            "messages c2s %" PRIu64 " s2c %" PRIu64 ", dropped as old %" PRIu64 ", errors %" PRIu64
            "%s\n",
            fl->datagrams, fl->oob, sg_q3_wire_name(fl->nc->wire), st->messages[SG_Q3_C2S],
            st->messages[SG_Q3_S2C], st->old[SG_Q3_C2S] + st->old[SG_Q3_S2C], fl->errors,
            fl->recorded ? ", recorded" : "");
}

const struct sg_capture_impl sg_q3_capture_impl = {
    .title = "Quake 3",
    .role = q3_capture_role,
    .create = q3_capture_create,
    .datagram = q3_capture_datagram,
    .finish = q3_capture_finish,
    .summary = q3_capture_summary,
    .destroy = q3_capture_destroy,
};
