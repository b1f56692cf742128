/*
 * q3_svmsg: server-message ops the test demos do not carry (downloads,
 * VoIP, over-long strings, nops, trailing bytes), configstring updates by
 * server command, and the decoder's refusals.  argv[1] = case.
 */
#include <string.h>

#include "protocols/error.h"
#include "protocols/q3/msg.h"
#include "protocols/q3/state.h"
#include "protocols/q3/svmsg.h"
#include "q3_util.h"

static uint8_t buf[SG_Q3_MAX_MSGLEN], again[SG_Q3_MAX_MSGLEN];

/* Encode `msg`, decode it with `st`, encode again: all equal. */
static int roundtrip(struct sg_q3_state *st, const struct sg_q3_svmsg *msg,
                     struct sg_q3_svmsg *back)
{
    int n = sg_q3_write_server_message(msg, buf, sizeof(buf));
    int m;

    CHECK(n > 0);
    CHECK(sg_q3_parse_server_message(st, 10, buf, (size_t)n, back) == 0);
    m = sg_q3_write_server_message(back, again, sizeof(again));
    CHECK(m == n && memcmp(buf, again, (size_t)n) == 0);
    return 0;
}

/* Add a server command op. */
static int add_command(struct sg_q3_svmsg *msg, int32_t seq, const char *text)
{
    int i = sg_q3_svmsg_add_op(msg, SG_Q3_SVC_SERVERCOMMAND);

    CHECK(i >= 0);
    msg->ops[i].u.cmd.sequence = seq;
    return sg_q3_svmsg_add_bytes(msg, text, strlen(text), &msg->ops[i].u.cmd.text);
}

/* svc_download: first block with size, a middle block, the end, an error. */
static int download(void)
{
    struct sg_q3_state *st = sg_q3_state_create(68);
    struct sg_q3_svmsg msg, back;
    static uint8_t chunk[2048];
    int i;

    sg_q3_svmsg_init(&msg);
    sg_q3_svmsg_init(&back);
    for (size_t k = 0; k < sizeof(chunk); k++)
        chunk[k] = (uint8_t)(k * 7);
    i = sg_q3_svmsg_add_op(&msg, SG_Q3_SVC_DOWNLOAD);
    msg.ops[i].u.download.block = 0;
    msg.ops[i].u.download.has_size = true;
    msg.ops[i].u.download.size = 5000;
    CHECK(sg_q3_svmsg_add_bytes(&msg, chunk, sizeof(chunk), &msg.ops[i].u.download.data) == 0);
    i = sg_q3_svmsg_add_op(&msg, SG_Q3_SVC_NOP);
    i = sg_q3_svmsg_add_op(&msg, SG_Q3_SVC_DOWNLOAD);
    msg.ops[i].u.download.block = 2;
    CHECK(sg_q3_svmsg_add_bytes(&msg, chunk, 0, &msg.ops[i].u.download.data) == 0);
    CHECK(roundtrip(st, &msg, &back) == 0);
    CHECK(back.num_ops == 3 && back.ops[0].u.download.size == 5000);
    CHECK(back.ops[0].u.download.data.len == sizeof(chunk));
    CHECK(memcmp(sg_q3_svmsg_bytes(&back, back.ops[0].u.download.data), chunk, sizeof(chunk)) == 0);
    CHECK(!back.ops[2].u.download.has_size && back.ops[2].u.download.data.len == 0);

    /* the server's refusal: block 0, size -1, a message, nothing else */
    sg_q3_svmsg_reset(&msg);
    i = sg_q3_svmsg_add_op(&msg, SG_Q3_SVC_DOWNLOAD);
    msg.ops[i].u.download.has_size = true;
    msg.ops[i].u.download.size = -1;
    CHECK(sg_q3_svmsg_add_bytes(&msg, "no such file", 12, &msg.ops[i].u.download.error) == 0);
    CHECK(add_command(&msg, 1, "print \"after\"") == 0);
    CHECK(roundtrip(st, &msg, &back) == 0);
    CHECK(back.num_ops == 2 && back.ops[0].u.download.size == -1);
    CHECK(strcmp(sg_q3_svmsg_str(&back, back.ops[0].u.download.error), "no such file") == 0);
    sg_q3_svmsg_finish(&msg);
    sg_q3_svmsg_finish(&back);
    sg_q3_state_destroy(st);
    return 0;
}

/* svc_voipOpus with data, and one whose negative sender means no data. */
static int voip(void)
{
    struct sg_q3_state *st = sg_q3_state_create(71);
    struct sg_q3_svmsg msg, back;
    int i;

    sg_q3_svmsg_init(&msg);
    sg_q3_svmsg_init(&back);
    i = sg_q3_svmsg_add_op(&msg, SG_Q3_SVC_VOIP_OPUS);
    msg.ops[i].u.voip.sender = 3;
    msg.ops[i].u.voip.generation = 9;
    msg.ops[i].u.voip.sequence = 1234;
    msg.ops[i].u.voip.frames = 2;
    msg.ops[i].u.voip.size = 5;
    msg.ops[i].u.voip.flags = 3;
    CHECK(sg_q3_svmsg_add_bytes(&msg, "\x01\x02\x03\x04\x05", 5, &msg.ops[i].u.voip.data) == 0);
    i = sg_q3_svmsg_add_op(&msg, SG_Q3_SVC_VOIP_SPEEX);
    msg.ops[i].u.voip.sender = -2;
    msg.ops[i].u.voip.size = 100; /* not read: the game stops at the negative sender */
    CHECK(roundtrip(st, &msg, &back) == 0);
    CHECK(back.num_ops == 2 && back.ops[0].u.voip.data.len == 5 && back.ops[0].u.voip.flags == 3);
    CHECK(back.ops[1].u.voip.sender == -2 && back.ops[1].u.voip.data.len == 0);
    sg_q3_svmsg_finish(&msg);
    sg_q3_svmsg_finish(&back);
    sg_q3_state_destroy(st);
    return 0;
}

/* A 1500-byte command: the game keeps 1023 bytes and reads one more; the rest is ops. */
static int long_string(void)
{
    struct sg_q3_state *st = sg_q3_state_create(68);
    struct sg_q3_svmsg msg, back;
    static char text[1500];
    struct sg_q3_msg m;
    int n;

    sg_q3_svmsg_init(&back);
    memset(text, 'a', sizeof(text));
    sg_q3_msg_init_write(&m, buf, sizeof(buf));
    sg_q3_msg_write_long(&m, 0);
    sg_q3_msg_write_byte(&m, SG_Q3_SVC_SERVERCOMMAND);
    sg_q3_msg_write_long(&m, 1);
    sg_q3_msg_write_data(&m, (const uint8_t *)text, 1024);
    sg_q3_msg_write_byte(&m, SG_Q3_SVC_NOP); /* what the game reads next */
    sg_q3_msg_write_byte(&m, SG_Q3_SVC_EOF);
    n = (int)m.size;
    CHECK(sg_q3_parse_server_message(st, 5, buf, (size_t)n, &back) == 0);
    CHECK(back.num_ops == 2 && back.ops[1].type == SG_Q3_SVC_NOP);
    CHECK(back.ops[0].u.cmd.text.cut && back.ops[0].u.cmd.text.len == 1024);
    CHECK(strlen(sg_q3_state_command(st, 1)) == 1023);
    CHECK(sg_q3_write_server_message(&back, again, sizeof(again)) == n);
    CHECK(memcmp(buf, again, (size_t)n) == 0);

    /* '%' and bytes > 127 reach the state as '.', the wire keeps them */
    sg_q3_svmsg_init(&msg);
    CHECK(add_command(&msg, 2, "print \"100% \xe9t\xe9\"") == 0);
    CHECK(roundtrip(st, &msg, &back) == 0);
    CHECK(strcmp(sg_q3_state_command(st, 2), "print \"100. .t.\"") == 0);
    CHECK(strcmp(sg_q3_svmsg_str(&back, back.ops[0].u.cmd.text), "print \"100% \xe9t\xe9\"") == 0);
    sg_q3_svmsg_finish(&msg);
    sg_q3_svmsg_finish(&back);
    sg_q3_state_destroy(st);
    return 0;
}

/* cs and bcs0/1/2 update configstrings; old commands are ignored. */
static int configstrings(void)
{
    struct sg_q3_state *st = sg_q3_state_create(68);
    char v[64];

    CHECK(sg_q3_state_server_command(st, 1, "cs 5 \"hello world\"") == 1);
    CHECK(strcmp(sg_q3_state_configstring(st, 5), "hello world") == 0);
    CHECK(sg_q3_state_server_command(st, 2, "cs 6 a b  c") == 1);
    CHECK(strcmp(sg_q3_state_configstring(st, 6), "a b c") == 0);
    CHECK(sg_q3_state_server_command(st, 2, "cs 6 again") == 0); /* not newer */
    CHECK(strcmp(sg_q3_state_configstring(st, 6), "a b c") == 0);
    CHECK(sg_q3_state_server_command(st, 3, "bcs0 7 \"\\n\\Big") == 1);
    CHECK(sg_q3_state_server_command(st, 4, "bcs1 7 \"Config") == 1);
    CHECK(sg_q3_state_configstring(st, 7)[0] == 0);
    CHECK(sg_q3_state_server_command(st, 5, "bcs2 7 \"String\\t\\1\"") == 1);
    CHECK(strcmp(sg_q3_state_configstring(st, 7), "\\n\\BigConfigString\\t\\1") == 0);
    CHECK(sg_q3_info_value(sg_q3_state_configstring(st, 7), "N", v, sizeof(v)));
    CHECK(strcmp(v, "BigConfigString") == 0);
    CHECK(!sg_q3_info_value(sg_q3_state_configstring(st, 7), "x", v, sizeof(v)));
    CHECK(sg_q3_state_server_command(st, 6, "cs 2000 x") == 1); /* bad index: kept as is */
    CHECK(sg_q3_state_server_command(st, 7, "cs 8 \"x\" // comment") == 1);
    CHECK(strcmp(sg_q3_state_configstring(st, 8), "x") == 0);
    CHECK(strcmp(sg_q3_state_command(st, 7), "cs 8 \"x\" // comment") == 0);
    CHECK(sg_q3_state_command(st, 7 + SG_Q3_MAX_RELIABLE_COMMANDS) == NULL);
    sg_q3_state_destroy(st);
    return 0;
}

/* Write a message by hand: ack, then `body` bytes as ops. */
static size_t handmade(const int *body, size_t n)
{
    struct sg_q3_msg m;

    sg_q3_msg_init_write(&m, buf, sizeof(buf));
    sg_q3_msg_write_long(&m, 0);
    for (size_t i = 0; i < n; i++)
        sg_q3_msg_write_byte(&m, body[i]);
    return m.size;
}

/* What the game refuses, the decoder refuses. */
static int refusals(void)
{
    struct sg_q3_state *st = sg_q3_state_create(68);
    struct sg_q3_svmsg msg;
    static const int top_cs[] = {SG_Q3_SVC_CONFIGSTRING, 0, 0, 'x', 0, SG_Q3_SVC_EOF};
    static const int unknown[] = {42, SG_Q3_SVC_EOF};
    static const int no_eof[] = {SG_Q3_SVC_NOP, SG_Q3_SVC_NOP};
    static const int bad_index[] = {SG_Q3_SVC_GAMESTATE,
                                    0,
                                    0,
                                    0,
                                    0,
                                    SG_Q3_SVC_CONFIGSTRING,
                                    0x00,
                                    0x04,
                                    'x',
                                    0,
                                    SG_Q3_SVC_EOF,
                                    0,
                                    0,
                                    0,
                                    0,
                                    0,
                                    0,
                                    0,
                                    0,
                                    SG_Q3_SVC_EOF};
    size_t n;

    sg_q3_svmsg_init(&msg);
    n = handmade(top_cs, 6);
    CHECK(sg_q3_parse_server_message(st, 1, buf, n, &msg) == SG_E_MALFORMED);
    n = handmade(unknown, 2);
    CHECK(sg_q3_parse_server_message(st, 1, buf, n, &msg) == SG_E_MALFORMED);
    n = handmade(no_eof, 2);
    CHECK(sg_q3_parse_server_message(st, 1, buf, n, &msg) == SG_E_OVERFLOW);
    CHECK(msg.num_ops == 2); /* what came before the end is kept */
    n = handmade(bad_index, sizeof(bad_index) / sizeof(bad_index[0]));
    CHECK(sg_q3_parse_server_message(st, 1, buf, n, &msg) == SG_E_MALFORMED);
    CHECK(sg_q3_parse_server_message(st, 1, buf, SG_Q3_MAX_MSGLEN + 1, &msg) == SG_E_TOOBIG);
    CHECK(sg_q3_parse_server_message(st, 1, buf, 0, &msg) == SG_E_OVERFLOW);
    CHECK(st->errors == 6);
    sg_q3_svmsg_finish(&msg);
    sg_q3_state_destroy(st);
    return 0;
}

/* Bytes after svc_EOF and set padding bits come back; an edit drops them. */
static int tail(void)
{
    struct sg_q3_state *st = sg_q3_state_create(68);
    struct sg_q3_svmsg msg;
    static const int body[] = {SG_Q3_SVC_NOP, SG_Q3_SVC_EOF};
    size_t n = handmade(body, 2);
    int m;

    sg_q3_svmsg_init(&msg);
    buf[n - 1] |= 0x80; /* a stray bit in the padding */
    buf[n] = 0xaa;      /* and a byte after it */
    buf[n + 1] = 0x55;
    CHECK(sg_q3_parse_server_message(st, 1, buf, n + 2, &msg) == 0);
    m = sg_q3_write_server_message(&msg, again, sizeof(again));
    CHECK(m == (int)n + 2 && memcmp(buf, again, n + 2) == 0);

    /* another op: the end moves, the writer gives the canonical length */
    CHECK(sg_q3_svmsg_add_op(&msg, SG_Q3_SVC_NOP) >= 0);
    m = sg_q3_write_server_message(&msg, again, sizeof(again));
    CHECK(m > 0 && m <= (int)n + 1);
    sg_q3_svmsg_finish(&msg);
    sg_q3_state_destroy(st);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(void);
    } cases[] = {
        {"download", download},           {"voip", voip},         {"long_string", long_string},
        {"configstrings", configstrings}, {"refusals", refusals}, {"tail", tail},
    };

    for (size_t i = 0; argc > 1 && i < sizeof(cases) / sizeof(cases[0]); i++)
        if (strcmp(argv[1], cases[i].name) == 0)
            return cases[i].fn();
    fprintf(stderr, "unknown case\n");
    return 1;
}
