/*
 * The Quake 3 inspector dump (protocols/q3/inspect.h) against real
 * captures (tests/q3/meson.build: q3_inspect@<s>).
 *
 * Every datagram of the game session in $SG_TESTDATA/q3/sessions/<s>/
 * capture.pcap is decoded twice in step: through the netchan and the
 * server-message parser (what the dump's fields come from) and through
 * the codec (its frame carries the message list).  Each datagram is then
 * dumped at the three levels in text and JSON, and checked:
 *
 *   - the return value is the byte count written;
 *   - text: the packet line names the receive status, length and
 *     sequence; messages adds exactly one line per message of the codec's
 *     list; fields adds the server message line (its sequence and length),
 *     one line per usercmd and per client command;
 *   - JSON: exactly one object without a newline, which parses; rx, len,
 *     seq as decoded; msgs has one entry per message with kind, name and
 *     number equal to the codec's; fields carry "sv" (seq, ops count),
 *     "cl" (usercmds and commands, serverTime of each) or the OOB text.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pcap_udp.h"
#include "protocols/codec.h"
#include "protocols/error.h"
#include "protocols/q3/inspect.h"
#include "protocols/q3/netchan.h"
#include "protocols/q3/state.h"
#include "protocols/q3/svmsg.h"
#include "q3_util.h"
#include "tests/q3/json_mini.h"

#define CLIENT_PORT 27961
#define SERVER_PORT 27960

struct run {
    struct sg_q3_netchan *nc;
    struct sg_q3_frame *qf;
    struct sg_q3_state *st;
    struct sg_q3_svmsg sv;
    const struct sg_codec *codec;
    void *cstate;
    int failures;
    uint64_t datagrams, messages[2], oob, msg_lines, usercmds, commands, sv_ops, json_lines;
};

#define FAIL(r, u, ...)                                                                            \
    do {                                                                                           \
        fprintf(stderr, "frame %llu: ", (unsigned long long)(u)->frame);                           \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        if (++(r)->failures > 20)                                                                  \
            return 1;                                                                              \
    } while (0)

/* Dump into a string; returns it (caller frees) and checks the byte count. */
static char *dump(struct run *r, const struct pcap_udp *u, const struct sg_frame *f,
                  enum sg_dump_level level, bool json, int parse_err)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *m = open_memstream(&buf, &size);
    const struct sg_q3_svmsg *sv =
        r->qf->dir == SG_Q3_S2C && r->qf->rx == SG_Q3_RX_MESSAGE ? &r->sv : NULL;
    int n;

    if (!m)
        return NULL;
    n = sg_q3_inspect_dump(m, f, r->qf, sv, parse_err, level, json);
    fclose(m);
    if (n < 0 || (size_t)n != size) {
        fprintf(stderr, "frame %llu: dump returned %d, wrote %zu bytes\n",
                (unsigned long long)u->frame, n, size);
        r->failures++;
        free(buf);
        return NULL;
    }
    return buf;
}

static int count_lines(const char *s, const char *start)
{
    int n = 0;

    for (const char *p = s; p && *p;) {
        const char *nl = strchr(p, '\n');
        if (strncmp(p, start, strlen(start)) == 0)
            n++;
        if (!nl)
            break;
        p = nl + 1;
    }
    return n;
}

static int check_text(struct run *r, const struct pcap_udp *u, const struct sg_frame *f,
                      int parse_err)
{
    const struct sg_q3_frame *qf = r->qf;
    char want[96];
    char *t;
    int lines;

    /* packets: one line */
    t = dump(r, u, f, SG_DUMP_PACKETS, false, parse_err);
    if (!t)
        return 0;
    snprintf(want, sizeof(want), "q3 %s len=%zu", sg_q3_rx_name(qf->rx), qf->datagram_len);
    if (strncmp(t, want, strlen(want)) != 0 || count_lines(t, "") != 1)
        FAIL(r, u, "packet line %s, expected '%s...'", t, want);
    snprintf(want, sizeof(want), " seq=%d", qf->sequence);
    if (qf->rx != SG_Q3_RX_OOB && !strstr(t, want))
        FAIL(r, u, "packet line without%s: %s", want, t);
    free(t);

    /* messages: one more line per message */
    t = dump(r, u, f, SG_DUMP_MESSAGES, false, parse_err);
    if (!t)
        return 0;
    lines = count_lines(t, "  msg ");
    if (lines != (int)f->nmsgs || count_lines(t, "") != 1 + lines)
        FAIL(r, u, "%d message lines for %u messages:\n%s", lines, f->nmsgs, t);
    r->msg_lines += (uint64_t)lines;
    free(t);

    /* fields */
    t = dump(r, u, f, SG_DUMP_FIELDS, false, parse_err);
    if (!t)
        return 0;
    if (qf->rx == SG_Q3_RX_MESSAGE && qf->dir == SG_Q3_S2C) {
        snprintf(want, sizeof(want), "\n  sv %d len=%zu ack=%d", qf->sequence, qf->msg_len,
                 r->sv.reliable_ack);
        if (!strstr(t, want))
            FAIL(r, u, "no server message line '%s'", want + 1);
    } else if (qf->rx == SG_Q3_RX_MESSAGE) {
        int n = count_lines(t, "  usercmd "), c = count_lines(t, "  command ");
        if (n != (qf->u.cl.move_op ? qf->u.cl.num_cmds : 0) || c != qf->u.cl.num_commands)
            FAIL(r, u, "%d usercmd lines (%d moves), %d command lines (%d)", n, qf->u.cl.num_cmds,
                 c, qf->u.cl.num_commands);
    } else if (qf->rx == SG_Q3_RX_OOB) {
        if (count_lines(t, "  text ") != 1)
            FAIL(r, u, "no out-of-band text line");
    }
    free(t);
    return 0;
}

static int check_json_msgs(struct run *r, const struct pcap_udp *u, const struct sg_frame *f,
                           const struct jval *v)
{
    const struct jval *msgs = jget(v, "msgs");

    if (!msgs || msgs->type != J_ARR || msgs->n != (int)f->nmsgs)
        FAIL(r, u, "msgs: %d entries for %u messages", msgs ? msgs->n : -1, f->nmsgs);
    for (int i = 0; msgs && i < msgs->n && i < (int)f->nmsgs; i++) {
        const struct jval *m = msgs->items[i];
        const struct sg_msg *sm = &f->msgs[i];
        if (!jis_num(m, "i", i) || !jis_str(m, "kind", sg_msg_kind_name(sm->kind)) ||
            !jis_str(m, "name", sm->name) || !jis_num(m, "num", sm->number) ||
            (sm->text && !jis_str(m, "text", sm->text)))
            FAIL(r, u, "msgs[%d] differs from the codec's %s %s #%d", i, sg_msg_kind_name(sm->kind),
                 sm->name, sm->number);
    }
    return 0;
}

static int check_json_fields(struct run *r, const struct pcap_udp *u, const struct jval *v)
{
    const struct sg_q3_frame *qf = r->qf;

    if (qf->rx == SG_Q3_RX_MESSAGE && qf->dir == SG_Q3_S2C) {
        const struct jval *sv = jget(v, "sv"), *ops = jget(sv, "ops");
        if (!sv || !jis_num(sv, "seq", qf->sequence) || !jis_num(sv, "len", (double)qf->msg_len) ||
            !ops || ops->type != J_ARR || ops->n != (int)r->sv.num_ops)
            FAIL(r, u, "sv: missing or differs (ops %d of %u)", ops ? ops->n : -1, r->sv.num_ops);
        r->sv_ops += r->sv.num_ops;
    } else if (qf->rx == SG_Q3_RX_MESSAGE) {
        const struct jval *cl = jget(v, "cl"), *cmds = jget(cl, "usercmds"),
                          *texts = jget(cl, "commands");
        int want = qf->u.cl.move_op ? qf->u.cl.num_cmds : 0;
        if (!cl || !jis_num(cl, "message_ack", qf->u.cl.message_ack) || !cmds || cmds->n != want ||
            !texts || texts->n != qf->u.cl.num_commands)
            FAIL(r, u, "cl: missing or differs");
        for (int i = 0; cmds && i < cmds->n && i < want; i++)
            if (!jis_num(cmds->items[i], "serverTime", qf->u.cl.cmds[i].server_time) ||
                jget(cmds->items[i], "angles") == NULL || jget(cmds->items[i], "angles")->n != 3)
                FAIL(r, u, "usercmd %d differs", i);
        for (int i = 0; texts && i < texts->n && i < qf->u.cl.num_commands; i++)
            if (!jis_num(texts->items[i], "seq", qf->u.cl.commands[i].sequence) ||
                !jis_str(texts->items[i], "text", qf->u.cl.commands[i].text))
                FAIL(r, u, "client command %d differs", i);
        r->usercmds += (uint64_t)want;
        r->commands += (uint64_t)qf->u.cl.num_commands;
    } else if (qf->rx == SG_Q3_RX_OOB) {
        const struct jval *t = jget(v, "oob_text");
        if (!t || t->type != J_STR || strlen(t->str) > qf->u.oob.text_len)
            FAIL(r, u, "oob_text missing");
    }
    return 0;
}

static int check_json(struct run *r, const struct pcap_udp *u, const struct sg_frame *f,
                      int parse_err)
{
    const struct sg_q3_frame *qf = r->qf;

    for (int level = SG_DUMP_PACKETS; level <= SG_DUMP_FIELDS; level++) {
        char *t = dump(r, u, f, (enum sg_dump_level)level, true, parse_err);
        struct jval *v;

        if (!t)
            return 0;
        if (strchr(t, '\n'))
            FAIL(r, u, "JSON with a newline");
        v = jparse_line(t);
        free(t);
        if (!v)
            FAIL(r, u, "JSON does not parse (level %d)", level);
        if (!v)
            continue;
        r->json_lines++;
        if (!jis_str(v, "rx", sg_q3_rx_name(qf->rx)) ||
            !jis_num(v, "len", (double)qf->datagram_len) ||
            (qf->rx != SG_Q3_RX_OOB && !jis_num(v, "seq", qf->sequence)))
            FAIL(r, u, "JSON rx/len/seq differ");
        if (qf->rx == SG_Q3_RX_OOB &&
            !jis_str(jget(v, "oob"), "type", sg_q3_oob_kind_name(qf->u.oob.kind)))
            FAIL(r, u, "JSON oob type differs");
        if (qf->rx == SG_Q3_RX_MESSAGE && qf->dir == SG_Q3_C2S &&
            !jis_num(v, "message_ack", qf->u.cl.message_ack))
            FAIL(r, u, "JSON message_ack differs");
        if (level >= SG_DUMP_MESSAGES)
            check_json_msgs(r, u, f, v);
        else if (jget(v, "msgs"))
            FAIL(r, u, "msgs at packets level");
        if (level == SG_DUMP_FIELDS)
            check_json_fields(r, u, v);
        jfree(v);
    }
    return 0;
}

static int on_datagram(const struct pcap_udp *u, void *arg)
{
    struct run *r = arg;
    const struct sg_frame *f = NULL;
    enum sg_q3_dir dir;
    int err, parse_err = 0;

    if (u->sport == CLIENT_PORT && u->dport == SERVER_PORT)
        dir = SG_Q3_C2S;
    else if (u->sport == SERVER_PORT && u->dport == CLIENT_PORT)
        dir = SG_Q3_S2C;
    else
        return 0;
    r->datagrams++;

    /* the codec's frame (message list), and our own decode of the same datagram */
    r->codec->decode(r->cstate, dir == SG_Q3_C2S ? SG_DIR_C2S : SG_DIR_S2C, u->data, u->len, &f);
    err = sg_q3_netchan_decode(r->nc, dir, u->data, u->len, r->qf);
    if (err < 0)
        FAIL(r, u, "decode: %s", sg_errname(err));
    if (!f || ((const struct sg_q3_frame *)f->game)->sequence != r->qf->sequence ||
        ((const struct sg_q3_frame *)f->game)->rx != r->qf->rx)
        FAIL(r, u, "the codec and the netchan disagree");
    if (r->qf->rx == SG_Q3_RX_MESSAGE && dir == SG_Q3_S2C) {
        parse_err =
            sg_q3_parse_server_message(r->st, r->qf->sequence, r->qf->msg, r->qf->msg_len, &r->sv);
        if (parse_err < 0 && parse_err != SG_E_NODELTA)
            FAIL(r, u, "parse: %s", sg_errname(parse_err));
    }
    r->oob += r->qf->rx == SG_Q3_RX_OOB;
    if (r->qf->rx == SG_Q3_RX_MESSAGE)
        r->messages[dir]++;
    check_text(r, u, f, parse_err);
    check_json(r, u, f, parse_err);
    return 0;
}

static int run_session(const char *name)
{
    char rel[256], path[1024];
    struct run *r = calloc(1, sizeof(*r));

    CHECK(r);
    r->nc = malloc(sizeof(*r->nc));
    r->qf = malloc(sizeof(*r->qf));
    r->st = sg_q3_state_create(0);
    r->codec = sg_codec_find("q3");
    CHECK(r->nc && r->qf && r->st && r->codec);
    CHECK(r->codec->create(&r->cstate) == 0);
    sg_q3_netchan_init(r->nc);
    sg_q3_svmsg_init(&r->sv);

    snprintf(rel, sizeof(rel), "q3/sessions/%s/capture.pcap", name);
    CHECK(q3_testdata(rel, path, sizeof(path)));
    CHECK(pcap_udp_foreach(path, on_datagram, r) == 0);
    printf("%s: %llu datagrams (%llu oob), messages c2s %llu s2c %llu; %llu message lines, "
           "%llu usercmds, %llu client commands, %llu server ops, %llu JSON objects parsed\n",
           name, (unsigned long long)r->datagrams, (unsigned long long)r->oob,
           (unsigned long long)r->messages[0], (unsigned long long)r->messages[1],
           (unsigned long long)r->msg_lines, (unsigned long long)r->usercmds,
           (unsigned long long)r->commands, (unsigned long long)r->sv_ops,
           (unsigned long long)r->json_lines);
    CHECK(r->failures == 0);
    CHECK(r->messages[0] > 100 && r->messages[1] > 100 && r->oob > 0);
    CHECK(r->usercmds > 100 && r->commands > 0 && r->sv_ops > 100);
    CHECK(r->json_lines == 3 * r->datagrams);

    r->codec->destroy(r->cstate);
    sg_q3_svmsg_finish(&r->sv);
    sg_q3_state_destroy(r->st);
    sg_q3_netchan_finish(r->nc);
    free(r->nc);
    free(r->qf);
    free(r);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2 ||
        (strcmp(argv[1], "ioq68") && strcmp(argv[1], "ioq71") && strcmp(argv[1], "oa71"))) {
        fprintf(stderr, "usage: %s ioq68|ioq71|oa71\n", argv[0]);
        return 2;
    }
    return run_session(argv[1]);
}
