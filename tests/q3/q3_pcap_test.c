/*
 * Quake 3 netchan against real captures (tests/q3/meson.build: q3_pcap@CASE).
 *
 *   decode_<s>     every datagram of the game session decodes with no error,
 *                  the wire format is the expected one, the server messages
 *                  equal the client's own demo (same sequences) and parse
 *                  fully, the client messages decode completely
 *   roundtrip_<s>  re-encoding every decoded message gives back the
 *                  original datagrams (both directions, out-of-band ones
 *                  included), and the client and server message encoders
 *                  give back the message bytes
 *   tool_<s>       `slipgate pcap decode --json --record DIR` exits 0 and
 *                  writes a demo whose messages are those of the capture,
 *                  ending where the client's own demo ends (the capture
 *                  ends with the client quitting)
 *
 * <s> is ioq68, ioq71 or oa71 under $SG_TESTDATA/q3/sessions.  The client
 * demo's first record is a gamestate the client synthesizes itself when it
 * starts recording, filed under an earlier sequence (CL_Record): it has no
 * datagram of its own and is checked only for being a gamestate that
 * precedes the rest; every later record must match a message.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pcap_udp.h"
#include "protocols/error.h"
#include "protocols/q3/netchan.h"
#include "protocols/q3/state.h"
#include "protocols/q3/svmsg.h"
#include "proxy/cli/commands.h"
#include "q3_util.h"

#define CLIENT_PORT 27961
#define SERVER_PORT 27960

struct stored {
    int32_t seq;
    size_t len;
    uint8_t *data;
};

struct run {
    struct sg_q3_netchan *nc;
    struct sg_q3_frame *f;
    bool roundtrip;
    int failures;
    uint64_t strays, datagrams[2], messages[2], moves, commands[2];
    uint64_t rebuilt; /* datagrams rebuilt and compared */
    /* server messages by sequence */
    struct stored *s2c;
    size_t ns2c;
    /* datagrams since the last whole message, per direction (the pieces) */
    uint8_t pend[2][SG_Q3_MAX_FRAGMENTS + 1][SG_Q3_MAX_PACKETLEN];
    size_t pend_len[2][SG_Q3_MAX_FRAGMENTS + 1];
    int npend[2];
    struct sg_q3_state *st;
    struct sg_q3_svmsg sv;
    struct sg_q3_datagrams dg;
    uint8_t buf[SG_Q3_MAX_MSGLEN];
};

#define FAIL(r, u, ...)                                                                            \
    do {                                                                                           \
        fprintf(stderr, "frame %llu: ", (unsigned long long)(u)->frame);                           \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        if (++(r)->failures > 20)                                                                  \
            return 1;                                                                              \
    } while (0)

/* Re-encode the message in r->f and compare with the datagrams that carried it. */
static int check_roundtrip(struct run *r, const struct pcap_udp *u, enum sg_q3_dir dir)
{
    struct sg_q3_frame *f = r->f;
    int n = sg_q3_netchan_encode(r->nc, dir, f->sequence, f->msg, f->msg_len, &r->dg);

    if (n < 0) {
        FAIL(r, u, "encode: %s", sg_errname(n));
        return 0;
    }
    if (n != r->npend[dir]) {
        FAIL(r, u, "encode gave %d datagrams, the capture has %d", n, r->npend[dir]);
        return 0;
    }
    r->rebuilt += (uint64_t)n;
    for (int i = 0; i < n; i++)
        if (r->dg.len[i] != r->pend_len[dir][i] ||
            memcmp(r->dg.data[i], r->pend[dir][i], r->dg.len[i]) != 0)
            FAIL(r, u, "%s seq %d piece %d: re-encoded datagram differs",
                 dir == SG_Q3_S2C ? "s2c" : "c2s", f->sequence, i);

    /* the message encoders, bit-exact */
    if (dir == SG_Q3_C2S && f->rx == SG_Q3_RX_MESSAGE) {
        const struct sg_q3_view *v = sg_q3_netchan_view(r->nc, SG_Q3_SIDE_SERVER);
        int len =
            sg_q3_clmsg_encode(&f->u.cl, v->checksum_feed, &v->server_cmds, r->buf, sizeof(r->buf));

        if (len != (int)f->msg_len || memcmp(r->buf, f->msg, f->msg_len) != 0)
            FAIL(r, u, "c2s seq %d: client message re-encodes differently (%d vs %zu)", f->sequence,
                 len, f->msg_len);
    }
    if (dir == SG_Q3_S2C && f->rx == SG_Q3_RX_MESSAGE) {
        int len = sg_q3_write_server_message(&r->sv, r->buf, sizeof(r->buf));

        if (len != (int)f->msg_len || memcmp(r->buf, f->msg, f->msg_len) != 0)
            FAIL(r, u, "s2c seq %d: server message re-encodes differently (%d vs %zu)", f->sequence,
                 len, f->msg_len);
    }
    return 0;
}

static int on_datagram(const struct pcap_udp *u, void *arg)
{
    struct run *r = arg;
    struct sg_q3_frame *f = r->f;
    enum sg_q3_dir dir;
    int err;

    /* Only the game session; other ports are a status tool's queries. */
    if (u->sport == CLIENT_PORT && u->dport == SERVER_PORT)
        dir = SG_Q3_C2S;
    else if (u->sport == SERVER_PORT && u->dport == CLIENT_PORT)
        dir = SG_Q3_S2C;
    else {
        r->strays++;
        return 0;
    }
    r->datagrams[dir]++;
    if (r->npend[dir] <= SG_Q3_MAX_FRAGMENTS && u->len <= SG_Q3_MAX_PACKETLEN) {
        memcpy(r->pend[dir][r->npend[dir]], u->data, u->len);
        r->pend_len[dir][r->npend[dir]++] = u->len;
    }

    err = sg_q3_netchan_decode(r->nc, dir, u->data, u->len, f);
    if (err < 0)
        FAIL(r, u, "decode: %s (rx %s)", sg_errname(err), sg_q3_rx_name(f->rx));
    switch (f->rx) {
    case SG_Q3_RX_OOB:
        if (r->roundtrip) {
            int n = sg_q3_oob_write(&f->u.oob, dir == SG_Q3_C2S, r->buf, sizeof(r->buf));

            if (n != (int)u->len || memcmp(r->buf, u->data, u->len) != 0)
                FAIL(r, u, "oob %s rebuilds differently", sg_q3_oob_kind_name(f->u.oob.kind));
            r->rebuilt++;
        }
        r->npend[dir] = 0;
        return 0;
    case SG_Q3_RX_FRAGMENT:
        return 0;
    case SG_Q3_RX_MESSAGE:
        break;
    default:
        FAIL(r, u, "unexpected receive status %s", sg_q3_rx_name(f->rx));
        r->npend[dir] = 0;
        return 0;
    }
    r->messages[dir]++;

    /* Server messages: keep them, and parse them fully as the client does. */
    if (dir == SG_Q3_S2C) {
        struct stored *s = realloc(r->s2c, (r->ns2c + 1) * sizeof(*s));

        if (!s)
            return 1;
        r->s2c = s;
        s[r->ns2c].seq = f->sequence;
        s[r->ns2c].len = f->msg_len;
        s[r->ns2c].data = malloc(f->msg_len);
        if (!s[r->ns2c].data)
            return 1;
        memcpy(s[r->ns2c].data, f->msg, f->msg_len);
        r->ns2c++;
        r->commands[dir] += (uint64_t)f->u.sv.num_commands;
        err = sg_q3_parse_server_message(r->st, f->sequence, f->msg, f->msg_len, &r->sv);
        if (err < 0 && err != SG_E_NODELTA)
            FAIL(r, u, "s2c seq %d: full parse: %s", f->sequence, sg_errname(err));
    } else {
        /* Client messages: whole, with sane acknowledgements. */
        if (!f->u.cl.eof)
            FAIL(r, u, "c2s seq %d: no clc_EOF", f->sequence);
        if (f->u.cl.message_ack < 0 || f->u.cl.message_ack > f->sequence + 1000)
            FAIL(r, u, "c2s seq %d: odd messageAcknowledge %d", f->sequence, f->u.cl.message_ack);
        r->commands[dir] += (uint64_t)f->u.cl.num_commands;
        r->moves += f->u.cl.move_op ? 1 : 0;
    }
    if (r->roundtrip)
        check_roundtrip(r, u, dir);
    r->npend[dir] = 0;
    return 0;
}

static const char *session_demo(const char *name)
{
    return strcmp(name, "ioq68") == 0 ? "client_demo.dm_68" : "client_demo.dm_71";
}

static enum sg_q3_wire session_wire(const char *name)
{
    if (strcmp(name, "ioq68") == 0)
        return SG_Q3_WIRE_68;
    if (strcmp(name, "ioq71") == 0)
        return SG_Q3_WIRE_IOQ3_71;
    return SG_Q3_WIRE_OA_71;
}

/* Compare the client's demo with the server messages. */
static int check_demo(struct run *r, const char *name)
{
    char rel[256], path[1024];
    struct q3_demo d;
    struct sg_q3_svkeys *first = malloc(sizeof(*first));
    size_t matched = 0;

    CHECK(first);
    snprintf(rel, sizeof(rel), "q3/sessions/%s/%s", name, session_demo(name));
    CHECK(q3_testdata(rel, path, sizeof(path)));
    CHECK(q3_demo_load(path, &d) == 0);
    CHECK(d.count > 2);

    /* Record 0: the gamestate the client wrote itself, under an earlier sequence. */
    CHECK(sg_q3_svkeys_parse(d.msgs[0].data, d.msgs[0].len, first) == 0);
    CHECK(first->gamestate);
    CHECK(d.msgs[0].seq < d.msgs[1].seq);
    free(first);

    /* Every later record is a message of the capture, byte for byte. */
    for (size_t i = 1; i < d.count; i++) {
        const struct q3_demo_msg *dm = &d.msgs[i];
        bool found = false;

        for (size_t j = 0; j < r->ns2c; j++) {
            if (r->s2c[j].seq != dm->seq)
                continue;
            found = true;
            if (r->s2c[j].len != dm->len || memcmp(r->s2c[j].data, dm->data, dm->len) != 0) {
                fprintf(stderr, "demo seq %d: message differs (%zu vs %zu bytes)\n", dm->seq,
                        r->s2c[j].len, dm->len);
                r->failures++;
            } else {
                matched++;
            }
            break;
        }
        if (!found) {
            fprintf(stderr, "demo seq %d: no such message in the capture\n", dm->seq);
            r->failures++;
        }
    }
    printf("demo: %zu records, %zu matched (record 0 is the client's own gamestate)\n", d.count,
           matched);
    q3_demo_free(&d);
    return 0;
}

static int run_session(const char *name, bool roundtrip)
{
    char rel[256], path[1024];
    struct run *r = calloc(1, sizeof(*r));
    int rc;

    CHECK(r);
    r->nc = malloc(sizeof(*r->nc));
    r->f = malloc(sizeof(*r->f));
    r->st = sg_q3_state_create(0);
    CHECK(r->nc && r->f && r->st);
    sg_q3_netchan_init(r->nc);
    sg_q3_svmsg_init(&r->sv);
    r->roundtrip = roundtrip;

    snprintf(rel, sizeof(rel), "q3/sessions/%s/capture.pcap", name);
    CHECK(q3_testdata(rel, path, sizeof(path)));
    rc = pcap_udp_foreach(path, on_datagram, r);
    CHECK(rc == 0);
    printf("%s: wire %s (evidence 0x%x), c2s %llu datagrams %llu messages %llu moves, "
           "s2c %llu datagrams %llu messages, commands %llu/%llu, %llu stray\n",
           name, sg_q3_wire_name(r->nc->wire), r->nc->evidence, (unsigned long long)r->datagrams[0],
           (unsigned long long)r->messages[0], (unsigned long long)r->moves,
           (unsigned long long)r->datagrams[1], (unsigned long long)r->messages[1],
           (unsigned long long)r->commands[0], (unsigned long long)r->commands[1],
           (unsigned long long)r->strays);
    CHECK(r->failures == 0);
    CHECK(r->nc->wire == session_wire(name));
    CHECK(r->strays > 0);
    CHECK(r->messages[0] > 100 && r->messages[1] > 100 && r->moves > 100);
    CHECK(r->commands[0] > 0 && r->commands[1] > 0);
    if (roundtrip) {
        printf("%s: %llu of %llu datagrams rebuilt byte for byte\n", name,
               (unsigned long long)r->rebuilt,
               (unsigned long long)(r->datagrams[0] + r->datagrams[1]));
        CHECK(r->rebuilt == r->datagrams[0] + r->datagrams[1]);
    } else {
        CHECK(check_demo(r, name) == 0);
        CHECK(r->failures == 0);
    }

    for (size_t i = 0; i < r->ns2c; i++)
        free(r->s2c[i].data);
    free(r->s2c);
    sg_q3_svmsg_finish(&r->sv);
    sg_q3_state_destroy(r->st);
    sg_q3_netchan_finish(r->nc);
    free(r->nc);
    free(r->f);
    free(r);
    return 0;
}

/* The tool end to end: exit status 0 and a recorded demo of the session. */
static int run_tool(const char *name)
{
    char rel[256], path[1024], dir[] = "/tmp/sg_q3_pcap_XXXXXX", demo[1200];
    char *argv[6];
    struct q3_demo d, cd;
    FILE *devnull;
    int status, saved;

    snprintf(rel, sizeof(rel), "q3/sessions/%s/capture.pcap", name);
    CHECK(q3_testdata(rel, path, sizeof(path)));
    CHECK(mkdtemp(dir));
    argv[0] = "pcap";
    argv[1] = "decode";
    argv[2] = path;
    argv[3] = "--json";
    argv[4] = "--record";
    argv[5] = dir;

    /* the JSON lines go to /dev/null */
    fflush(stdout);
    saved = dup(1);
    devnull = fopen("/dev/null", "w");
    CHECK(saved >= 0 && devnull);
    dup2(fileno(devnull), 1);
    status = sg_cmd_pcap(6, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    fclose(devnull);
    CHECK(status == 0);

    /* one demo: the game session from its gamestate on, as received */
    snprintf(demo, sizeof(demo), "%s/127.0.0.1-%d.dm_%s", dir, CLIENT_PORT,
             strcmp(name, "ioq68") == 0 ? "68" : "71");
    CHECK(q3_demo_load(demo, &d) == 0);
    printf("%s: %zu messages\n", demo, d.count);
    CHECK(d.count > 100);
    CHECK(d.end == 0);

    /* every record of the client's own demo but its first is in ours, byte for byte */
    snprintf(rel, sizeof(rel), "q3/sessions/%s/%s", name, session_demo(name));
    CHECK(q3_testdata(rel, path, sizeof(path)));
    CHECK(q3_demo_load(path, &cd) == 0);
    for (size_t i = 1; i < cd.count; i++) {
        bool same = false;

        for (size_t j = 0; j < d.count && !same; j++)
            same = d.msgs[j].seq == cd.msgs[i].seq && d.msgs[j].len == cd.msgs[i].len &&
                   memcmp(d.msgs[j].data, cd.msgs[i].data, d.msgs[j].len) == 0;
        CHECK(same);
    }
    /* ... and ours ends where the client's own ends: at its disconnect, before the server's
     * answer (DESIGN.md rule 9) */
    printf("last message %d, the client's own demo's %d\n", d.msgs[d.count - 1].seq,
           cd.msgs[cd.count - 1].seq);
    CHECK(d.msgs[d.count - 1].seq == cd.msgs[cd.count - 1].seq);
    q3_demo_free(&cd);
    q3_demo_free(&d);
    unlink(demo);
    rmdir(dir);
    return 0;
}

int main(int argc, char **argv)
{
    static const char *const sessions[] = {"ioq68", "ioq71", "oa71"};

    if (argc != 2) {
        fprintf(stderr, "usage: %s decode_<s>|roundtrip_<s>|tool_<s>\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < sizeof(sessions) / sizeof(sessions[0]); i++) {
        char name[64];

        snprintf(name, sizeof(name), "decode_%s", sessions[i]);
        if (strcmp(argv[1], name) == 0)
            return run_session(sessions[i], false);
        snprintf(name, sizeof(name), "roundtrip_%s", sessions[i]);
        if (strcmp(argv[1], name) == 0)
            return run_session(sessions[i], true);
        snprintf(name, sizeof(name), "tool_%s", sessions[i]);
        if (strcmp(argv[1], name) == 0)
            return run_tool(sessions[i]);
    }
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
}
