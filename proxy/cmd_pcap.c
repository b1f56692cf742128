/*
 * `slipgate pcap decode FILE [--json] [--record DIR]`: the Quake 3 sessions
 * of a capture, decoded as the live proxy decodes them.
 *
 * The capture (pcap or pcapng, read with libpcap; Ethernet, Linux cooked
 * v1/v2, BSD loopback or raw IP; IPv4 and IPv6) is split into sessions by
 * (client address, server address); the client is the side that sends
 * requests (getchallenge, connect, getinfo, getstatus, rcon) or, for a
 * capture that starts mid-game, the side with the higher port.  Queries
 * from other client ports are therefore sessions of their own.
 *
 * One line per datagram: frame number, time, session, direction, then the
 * netchan header (sequence, fragment, what the receiver does with it) and a
 * summary of the decoded message; with --json one JSON object per line.
 * --record DIR writes each game session's server messages into
 * DIR/<client address>-<port>.dm_<protocol>, starting at the gamestate and
 * ending where the client's own demo ends (as the live recorder,
 * filters/record.c): before the client's `disconnect`, or after a server
 * message carrying the server's `disconnect`.  A reconnect on the same
 * client port (a new gamestate) goes into <client address>-<port>-2.dm_...
 * A summary per session goes to stderr.  Exit status: 0 when everything
 * decoded, 1 when something did not (or a file failed), 2 usage.
 */
#include "proxy/commands.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <pcap/pcap.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "protocols/byteorder.h"
#include "protocols/error.h"
#include "protocols/q3/demo.h"
#include "protocols/q3/netchan.h"
#include "protocols/q3/state.h"
#include "protocols/q3/svmsg.h"

#define EXIT_ERRORS  1
#define EXIT_USAGE   2
#define MAX_SESSIONS 4096
#define TEXT_MAX     60 /* characters of a command shown in text lines */

static const char usage_text[] =
    "usage: slipgate pcap decode FILE.pcap[ng] [--json] [--record DIR]\n"
    "  --json        one JSON object per datagram instead of text\n"
    "  --record DIR  write each game session's server messages as a demo in DIR\n";

struct endpoint {
    int family; /* 4 or 6 */
    uint8_t addr[16];
    uint16_t port;
};

struct session {
    unsigned id;
    struct endpoint client, server;
    struct sg_q3_netchan *nc;   /* allocated at the first netchan datagram */
    struct sg_q3_state *st;     /* the client's view of the server stream */
    struct sg_q3_demo_writer w; /* --record */
    struct sg_q3_recorder rec;
    bool recording, record_failed, recorded;
    bool ended;     /* the connection ended: record again from a new gamestate */
    unsigned demos; /* files started */
    uint64_t datagrams, oob, errors;
};

struct tool {
    bool json;
    const char *record_dir;
    struct session *sessions[MAX_SESSIONS];
    unsigned nsessions;
    struct sg_q3_frame *f;
    struct sg_q3_svmsg sv;
    uint64_t frames, skipped, errors;
    double t0;
    bool have_t0;
};

/* Print a usage error and return the usage exit code. */
__attribute__((format(printf, 1, 2))) static int usage(const char *fmt, ...);

static int usage(const char *fmt, ...)
{
    va_list ap;

    fputs("slipgate pcap: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n", stderr);
    fputs(usage_text, stderr);
    return EXIT_USAGE;
}

/* ---- output helpers ---- */

/* `len` bytes of `s` as a quoted string: JSON (\uXXXX) or text (\xNN). */
static void put_string(const char *s, size_t len, bool json, size_t max)
{
    putchar('"');
    for (size_t i = 0; i < len && i < max; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c == '\n')
            fputs("\\n", stdout);
        else if (c < 0x20 || c >= 0x7f)
            printf(json ? "\\u%04x" : "\\x%02x", c);
        else
            putchar(c);
    }
    if (len > max)
        fputs("...", stdout);
    putchar('"');
}

static void endpoint_str(const struct endpoint *e, char *buf, size_t cap)
{
    char a[INET6_ADDRSTRLEN];

    inet_ntop(e->family == 6 ? AF_INET6 : AF_INET, e->addr, a, sizeof(a));
    snprintf(buf, cap, e->family == 6 ? "[%s]:%u" : "%s:%u", a, e->port);
}

/* ---- sessions ---- */

static bool endpoint_eq(const struct endpoint *a, const struct endpoint *b)
{
    return a->family == b->family && a->port == b->port &&
           memcmp(a->addr, b->addr, a->family == 6 ? 16 : 4) == 0;
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

/* Does the sender of this datagram act as a client? (-1: cannot tell) */
static int sender_is_client(const uint8_t *data, size_t len)
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

/* The session of a datagram from `src` to `dst`, created on first sight; NULL when full. */
static struct session *find_session(struct tool *t, const struct endpoint *src,
                                    const struct endpoint *dst, const uint8_t *data, size_t len,
                                    enum sg_q3_dir *dir)
{
    struct session *s;
    int client;

    for (unsigned i = 0; i < t->nsessions; i++) {
        s = t->sessions[i];
        if (endpoint_eq(&s->client, src) && endpoint_eq(&s->server, dst)) {
            *dir = SG_Q3_C2S;
            return s;
        }
        if (endpoint_eq(&s->server, src) && endpoint_eq(&s->client, dst)) {
            *dir = SG_Q3_S2C;
            return s;
        }
    }
    if (t->nsessions == MAX_SESSIONS)
        return NULL;
    s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    client = sender_is_client(data, len);
    if (client < 0)
        client = src->port > dst->port; /* mid-game: servers usually sit on the lower port */
    s->client = client ? *src : *dst;
    s->server = client ? *dst : *src;
    *dir = client ? SG_Q3_C2S : SG_Q3_S2C;
    s->id = ++t->nsessions;
    t->sessions[s->id - 1] = s;
    return s;
}

static void session_destroy(struct session *s)
{
    if (!s)
        return;
    if (s->recording) {
        sg_q3_recorder_finish(&s->rec);
        sg_q3_demo_writer_finish(&s->w);
    }
    sg_q3_state_destroy(s->st);
    sg_q3_netchan_finish(s->nc);
    free(s->nc);
    free(s);
}

/* Start the session's demo file when its first server message arrives. */
static void start_recording(struct tool *t, struct session *s)
{
    char name[128], path[4096];
    int proto = s->nc->protocol ? s->nc->protocol : SG_Q3_PROTOCOL_68;
    int err;

    endpoint_str(&s->client, name, sizeof(name));
    for (char *p = name; *p; p++)
        if (*p == ':' && strchr(p + 1, ':') == NULL)
            *p = '-'; /* the port separator */
        else if (*p == ':' || *p == '[' || *p == ']')
            *p = '_';
    if (s->demos > 0)
        snprintf(path, sizeof(path), "%s/%s-%u.dm_%d", t->record_dir, name, s->demos + 1, proto);
    else
        snprintf(path, sizeof(path), "%s/%s.dm_%d", t->record_dir, name, proto);
    err = sg_q3_demo_writer_open(&s->w, path);
    if (err < 0) {
        fprintf(stderr, "slipgate pcap: %s: %s\n", path, sg_strerror(err));
        s->record_failed = true;
        t->errors++;
        return;
    }
    sg_q3_recorder_init(&s->rec, &s->w);
    s->recording = true;
    s->recorded = true;
    s->demos++;
}

/* The end marker; the file is closed. */
static void stop_recording(struct tool *t, struct session *s)
{
    if (!s->recording)
        return;
    if (sg_q3_demo_writer_finish(&s->w) < 0) {
        fprintf(stderr, "slipgate pcap: session %u: demo write failed\n", s->id);
        t->errors++;
    }
    sg_q3_recorder_finish(&s->rec);
    s->recording = false;
}

/* ---- one line per datagram ---- */

static void print_oob(const struct sg_q3_oob *o, bool json)
{
    if (json) {
        printf(",\"oob\":\"%s\",\"command\":", sg_q3_oob_kind_name(o->kind));
        put_string(o->command, strlen(o->command), true, SIZE_MAX);
        if (o->has_challenge)
            printf(",\"challenge\":%" PRId32, o->challenge);
        if (o->has_client_challenge)
            printf(",\"client_challenge\":%" PRId32, o->client_challenge);
        if (o->has_protocol)
            printf(",\"protocol\":%d", o->protocol);
        if (o->has_qport)
            printf(",\"qport\":%u", o->qport);
        if (o->kind == SG_Q3_OOB_CONNECT) {
            fputs(",\"userinfo\":", stdout);
            put_string(o->userinfo, strlen(o->userinfo), true, SIZE_MAX);
        }
        printf(",\"text_len\":%zu", o->text_len);
        return;
    }
    printf(" oob %s", o->kind ? sg_q3_oob_kind_name(o->kind) : o->command);
    if (o->has_challenge)
        printf(" challenge=%" PRId32, o->challenge);
    if (o->has_client_challenge)
        printf(" client_challenge=%" PRId32, o->client_challenge);
    if (o->has_protocol)
        printf(" protocol=%d", o->protocol);
    if (o->has_qport)
        printf(" qport=%u", o->qport);
    if (o->game[0])
        printf(" game=%s", o->game);
    printf(" len=%zu", o->text_len);
}

static void print_command(const char *op, int32_t seq, const char *text, size_t len, bool json)
{
    if (json) {
        printf("{\"op\":\"%s\",\"seq\":%" PRId32 ",\"text\":", op, seq);
        put_string(text, len, true, SIZE_MAX);
        putchar('}');
    } else {
        printf(" %" PRId32 " ", seq);
        put_string(text, len, false, TEXT_MAX);
    }
}

/* A client message: acks, commands, moves. */
static void print_client(const struct sg_q3_clmsg *cl, bool json)
{
    const char *mv = cl->move_op ? sg_q3_clc_name(cl->move_op) : NULL;

    if (json) {
        printf(",\"server_id\":%" PRId32 ",\"message_ack\":%" PRId32 ",\"reliable_ack\":%" PRId32
               ",\"commands\":[",
               cl->server_id, cl->message_ack, cl->reliable_ack);
        for (int i = 0; i < cl->num_commands; i++) {
            if (i)
                putchar(',');
            print_command("clc_clientCommand", cl->commands[i].sequence, cl->commands[i].text,
                          cl->commands[i].len, true);
        }
        putchar(']');
        if (mv) {
            printf(",\"move\":\"%s\",\"usercmds\":[", mv);
            for (int i = 0; i < cl->num_cmds; i++) {
                const struct sg_q3_usercmd *u = &cl->cmds[i];

                printf("%s{\"time\":%" PRId32 ",\"angles\":[%" PRId32 ",%" PRId32 ",%" PRId32
                       "],\"forward\":%d,\"right\":%d,\"up\":%d,\"buttons\":%" PRId32
                       ",\"weapon\":%u}",
                       i ? "," : "", u->server_time, u->angles[0], u->angles[1], u->angles[2],
                       u->forwardmove, u->rightmove, u->upmove, u->buttons, u->weapon);
            }
            putchar(']');
        }
        printf(",\"eof\":%s", cl->eof ? "true" : "false");
        return;
    }
    printf(" sid=%" PRId32 " mack=%" PRId32 " rack=%" PRId32, cl->server_id, cl->message_ack,
           cl->reliable_ack);
    for (int i = 0; i < cl->num_commands; i++) {
        fputs(" | clc_clientCommand", stdout);
        print_command(NULL, cl->commands[i].sequence, cl->commands[i].text, cl->commands[i].len,
                      false);
    }
    if (mv) {
        const struct sg_q3_usercmd *u = &cl->cmds[cl->num_cmds - 1];

        printf(" | %s %d t=%" PRId32 " ang=%" PRId32 ",%" PRId32 " mv=%d,%d,%d b=%" PRId32 " w=%u",
               mv, cl->num_cmds, u->server_time, u->angles[0], u->angles[1], u->forwardmove,
               u->rightmove, u->upmove, u->buttons, u->weapon);
    }
    if (cl->eof)
        fputs(" | clc_EOF", stdout);
}

/* A server message, from the full parse. */
static void print_server(const struct sg_q3_svmsg *sv, bool json)
{
    if (json)
        printf(",\"reliable_ack\":%" PRId32 ",\"ops\":[", sv->reliable_ack);
    else
        printf(" rack=%" PRId32, sv->reliable_ack);
    for (uint32_t i = 0; i < sv->num_ops; i++) {
        const struct sg_q3_op *op = &sv->ops[i];
        const char *name = sg_q3_svc_name(op->type);

        if (json)
            printf("%s", i ? "," : "");
        else
            printf(" | %s", name);
        switch (op->type) {
        case SG_Q3_SVC_SERVERCOMMAND: {
            const char *s = sg_q3_svmsg_str(sv, op->u.cmd.text);

            if (json) {
                print_command(name, op->u.cmd.sequence, s, op->u.cmd.text.len, true);
                continue;
            }
            print_command(name, op->u.cmd.sequence, s, op->u.cmd.text.len, false);
            break;
        }
        case SG_Q3_SVC_GAMESTATE:
            printf(json ? "{\"op\":\"%s\",\"command_seq\":%" PRId32 ",\"items\":%" PRIu32
                          ",\"client_num\":%" PRId32 ",\"checksum_feed\":%" PRId32 "}"
                        : "%.0s cmdseq=%" PRId32 " items=%" PRIu32 " client=%" PRId32
                          " feed=%" PRId32,
                   name, op->u.gamestate.command_seq, op->u.gamestate.num_items,
                   op->u.gamestate.client_num, op->u.gamestate.checksum_feed);
            break;
        case SG_Q3_SVC_SNAPSHOT: {
            const struct sg_q3_snap *sn = &sv->snaps[op->u.snap];

            printf(json ? "{\"op\":\"%s\",\"server_time\":%" PRId32
                          ",\"delta\":%u,\"flags\":%u,\"entities\":%" PRIu32 "}"
                        : "%.0s t=%" PRId32 " delta=%u flags=%u ents=%" PRIu32,
                   name, sn->server_time, sn->delta_num, sn->snap_flags, sn->num_ents);
            break;
        }
        case SG_Q3_SVC_DOWNLOAD:
            printf(json ? "{\"op\":\"%s\",\"block\":%u}" : "%.0s block=%u", name,
                   op->u.download.block);
            break;
        default:
            if (json)
                printf("{\"op\":\"%s\"}", name);
            break;
        }
    }
    if (json)
        putchar(']');
}

static void print_frame(struct tool *t, const struct session *s, enum sg_q3_dir dir, uint64_t frame,
                        double ts, const struct sg_q3_frame *f, int err, int parse_err)
{
    bool json = t->json;

    if (json)
        printf("{\"frame\":%" PRIu64 ",\"time\":%.6f,\"session\":%u,\"dir\":\"%s\",\"len\":%zu",
               frame, ts, s->id, dir == SG_Q3_C2S ? "c2s" : "s2c", f->datagram_len);
    else
        printf("#%" PRIu64 " %.3f s%u %s len=%zu", frame, ts, s->id,
               dir == SG_Q3_C2S ? "C>S" : "S>C", f->datagram_len);
    if (f->rx == SG_Q3_RX_OOB) {
        print_oob(&f->u.oob, json);
    } else if (json) {
        printf(",\"rx\":\"%s\",\"seq\":%" PRId32, sg_q3_rx_name(f->rx), f->sequence);
        if (dir == SG_Q3_C2S)
            printf(",\"qport\":%u", f->qport);
        if (f->fragmented)
            printf(",\"fragment\":[%d,%d]", f->fragment_start, f->fragment_length);
        if (f->dropped)
            printf(",\"dropped\":%" PRId32, f->dropped);
        if (f->rx == SG_Q3_RX_MESSAGE)
            printf(",\"msg_len\":%zu,\"pieces\":%d", f->msg_len, f->pieces);
    } else {
        printf(" seq=%" PRId32, f->sequence);
        if (dir == SG_Q3_C2S)
            printf(" qport=%u", f->qport);
        if (f->fragmented)
            printf(" frag=%d+%d", f->fragment_start, f->fragment_length);
        if (f->dropped)
            printf(" dropped=%" PRId32, f->dropped);
        if (f->rx != SG_Q3_RX_MESSAGE)
            printf(" %s", sg_q3_rx_name(f->rx));
        else
            printf(" msg=%zu%s", f->msg_len, f->pieces > 1 ? "(reassembled)" : "");
    }
    if (f->rx == SG_Q3_RX_MESSAGE && dir == SG_Q3_C2S)
        print_client(&f->u.cl, json);
    else if (f->rx == SG_Q3_RX_MESSAGE)
        print_server(&t->sv, json);
    if (err < 0 || parse_err < 0) {
        int e = err < 0 ? err : parse_err;

        printf(json ? ",\"error\":\"%s\"" : " | error=%s", sg_errname(e));
    }
    fputs(json ? "}\n" : "\n", stdout);
}

/* ---- per datagram ---- */

static void on_datagram(struct tool *t, const struct endpoint *src, const struct endpoint *dst,
                        const uint8_t *data, size_t len, uint64_t frame, double ts)
{
    struct sg_q3_frame *f = t->f;
    enum sg_q3_dir dir;
    struct session *s = find_session(t, src, dst, data, len, &dir);
    int err, parse_err = 0;

    if (!s) {
        t->skipped++;
        return;
    }
    s->datagrams++;

    /* Queries and their answers: no session state (a status tool may send thousands). */
    if (!s->nc && !needs_netchan(data, len)) {
        memset(f, 0, offsetof(struct sg_q3_frame, msg));
        f->dir = dir;
        f->datagram_len = len;
        f->rx = SG_Q3_RX_OOB;
        s->oob++;
        err = sg_q3_oob_parse(data, len, dir == SG_Q3_C2S, &f->u.oob);
        if (err < 0) {
            s->errors++;
            t->errors++;
        }
        print_frame(t, s, dir, frame, ts, f, err, 0);
        return;
    }
    if (!s->nc) {
        s->nc = malloc(sizeof(*s->nc));
        if (!s->nc) {
            fprintf(stderr, "slipgate pcap: out of memory\n");
            t->errors++;
            return;
        }
        sg_q3_netchan_init(s->nc);
    }
    err = sg_q3_netchan_decode(s->nc, dir, data, len, f);
    if (f->rx == SG_Q3_RX_BAD_CHECKSUM && err == 0)
        err = SG_E_MALFORMED;
    if (f->rx == SG_Q3_RX_OOB)
        s->oob++;
    if (f->rx == SG_Q3_RX_MESSAGE && dir == SG_Q3_S2C && !s->st &&
        !(s->st = sg_q3_state_create(0))) {
        fprintf(stderr, "slipgate pcap: out of memory\n");
        t->errors++;
        return;
    }

    /* Server messages: the full parse, as the client reads them, and the recording. */
    if (f->rx == SG_Q3_RX_MESSAGE && dir == SG_Q3_S2C) {
        s->st->protocol = s->nc->protocol;
        parse_err = sg_q3_parse_server_message(s->st, f->sequence, f->msg, f->msg_len, &t->sv);
        if (parse_err == SG_E_NODELTA)
            parse_err = 0;
        if (s->ended && sg_q3_svmsg_count(&t->sv, SG_Q3_SVC_GAMESTATE) > 0)
            s->ended = false; /* a reconnect */
        if (t->record_dir && !s->recording && !s->record_failed && !s->ended)
            start_recording(t, s);
        if (s->recording &&
            sg_q3_recorder_feed(&s->rec, s->st, &t->sv, parse_err, f->msg, f->msg_len) < 0) {
            fprintf(stderr, "slipgate pcap: session %u: demo write failed\n", s->id);
            t->errors++;
        }
        /* the server dropped the client: the client's own demo ends with this message */
        if (sg_q3_svmsg_disconnects(&t->sv)) {
            stop_recording(t, s);
            s->ended = true;
        }
    }

    /* The client leaves: its own demo ended before this message. */
    if (f->rx == SG_Q3_RX_MESSAGE && dir == SG_Q3_C2S && f->content_err >= 0 &&
        sg_q3_clmsg_disconnects(&f->u.cl)) {
        stop_recording(t, s);
        s->ended = true;
    }
    if (err < 0 || parse_err < 0) {
        s->errors++;
        t->errors++;
    }
    print_frame(t, s, dir, frame, ts, f, err, parse_err);
}

/* ---- the capture ---- */

/* Offset of the IP header for link type `dlt`; -1 when not IP. */
static long link_offset(int dlt, const uint8_t *p, size_t caplen)
{
    switch (dlt) {
    case DLT_EN10MB: {
        size_t off = 14;
        uint16_t type;

        if (caplen < 14)
            return -1;
        type = sg_be16(p + 12);
        while ((type == 0x8100 || type == 0x88a8) && caplen >= off + 4) {
            type = sg_be16(p + off + 2); /* VLAN tags */
            off += 4;
        }
        return type == 0x0800 || type == 0x86dd ? (long)off : -1;
    }
    case DLT_LINUX_SLL:
        return caplen >= 16 ? 16 : -1;
#ifdef DLT_LINUX_SLL2
    case DLT_LINUX_SLL2:
        return caplen >= 20 ? 20 : -1;
#endif
    case DLT_NULL:
    case DLT_LOOP:
        return caplen >= 4 ? 4 : -1;
    case DLT_RAW:
#ifdef DLT_IPV4
    case DLT_IPV4:
    case DLT_IPV6:
#endif
        return 0;
    default:
        return -1;
    }
}

/* One captured packet: find its UDP payload. */
static void on_packet(struct tool *t, int dlt, const struct pcap_pkthdr *h, const uint8_t *p)
{
    struct endpoint src = {0}, dst = {0};
    long off = link_offset(dlt, p, h->caplen);
    size_t caplen, ihl, ulen;
    const uint8_t *ip;
    uint8_t proto;
    double ts = (double)h->ts.tv_sec + (double)h->ts.tv_usec / 1e6;

    t->frames++;
    if (!t->have_t0) {
        t->t0 = ts;
        t->have_t0 = true;
    }
    if (off < 0)
        goto skip;
    ip = p + off;
    caplen = h->caplen - (size_t)off;
    if (caplen >= 20 && (ip[0] >> 4) == 4) {
        ihl = (size_t)(ip[0] & 15) * 4;
        if (ihl < 20 || (sg_be16(ip + 6) & 0x1fff) != 0)
            goto skip; /* a later IP fragment */
        proto = ip[9];
        src.family = dst.family = 4;
        memcpy(src.addr, ip + 12, 4);
        memcpy(dst.addr, ip + 16, 4);
    } else if (caplen >= 40 && (ip[0] >> 4) == 6) {
        ihl = 40; /* extension headers are not followed */
        proto = ip[6];
        src.family = dst.family = 6;
        memcpy(src.addr, ip + 8, 16);
        memcpy(dst.addr, ip + 24, 16);
    } else {
        goto skip;
    }
    if (proto != 17 || caplen < ihl + 8)
        goto skip;
    src.port = sg_be16(ip + ihl);
    dst.port = sg_be16(ip + ihl + 2);
    ulen = sg_be16(ip + ihl + 4);
    if (ulen < 8 || ihl + ulen > caplen)
        goto skip; /* truncated capture */
    on_datagram(t, &src, &dst, ip + ihl + 8, ulen - 8, t->frames, ts - t->t0);
    return;
skip:
    t->skipped++;
}

static void summary(const struct tool *t)
{
    for (unsigned i = 0; i < t->nsessions; i++) {
        const struct session *s = t->sessions[i];
        const struct sg_q3_netchan_stats *st;
        char c[80], sv[80];

        endpoint_str(&s->client, c, sizeof(c));
        endpoint_str(&s->server, sv, sizeof(sv));
        if (!s->nc || s->oob == s->datagrams) {
            fprintf(stderr,
                    "session %u: %s -> %s: %" PRIu64 " out-of-band datagrams only, errors %" PRIu64
                    "\n",
                    s->id, c, sv, s->datagrams, s->errors);
            continue;
        }
        st = &s->nc->stats;
        fprintf(stderr,
                "session %u: %s -> %s: %" PRIu64 " datagrams (%" PRIu64 " oob), wire %s, "
                "messages c2s %" PRIu64 " s2c %" PRIu64 ", dropped as old %" PRIu64
                ", errors %" PRIu64 "%s\n",
                s->id, c, sv, s->datagrams, s->oob, sg_q3_wire_name(s->nc->wire),
                st->messages[SG_Q3_C2S], st->messages[SG_Q3_S2C],
                st->old[SG_Q3_C2S] + st->old[SG_Q3_S2C], s->errors,
                s->recorded ? ", recorded" : "");
    }
    fprintf(stderr,
            "%" PRIu64 " frames, %" PRIu64 " not Quake 3 UDP, %u sessions, %" PRIu64 " errors\n",
            t->frames, t->skipped, t->nsessions, t->errors);
}

static int decode_file(const char *path, bool json, const char *record_dir)
{
    char errbuf[PCAP_ERRBUF_SIZE];
    struct tool *t = calloc(1, sizeof(*t));
    struct pcap_pkthdr *h;
    const u_char *p;
    pcap_t *pc;
    int dlt, rc, status;

    if (!t || !(t->f = malloc(sizeof(*t->f)))) {
        free(t);
        fprintf(stderr, "slipgate pcap: out of memory\n");
        return EXIT_ERRORS;
    }
    t->json = json;
    t->record_dir = record_dir;
    sg_q3_svmsg_init(&t->sv);
    pc = pcap_open_offline(path, errbuf);
    if (!pc) {
        fprintf(stderr, "slipgate pcap: %s\n", errbuf);
        status = EXIT_ERRORS;
        goto out;
    }
    dlt = pcap_datalink(pc);
    while ((rc = pcap_next_ex(pc, &h, &p)) == 1)
        on_packet(t, dlt, h, p);
    if (rc == PCAP_ERROR) {
        fprintf(stderr, "slipgate pcap: %s: %s\n", path, pcap_geterr(pc));
        t->errors++;
    }
    pcap_close(pc);
    fflush(stdout);
    for (unsigned i = 0; i < t->nsessions; i++) {
        struct session *s = t->sessions[i];

        stop_recording(t, s);
    }
    summary(t);
    status = t->errors ? EXIT_ERRORS : 0;
out:
    for (unsigned i = 0; i < t->nsessions; i++)
        session_destroy(t->sessions[i]);
    sg_q3_svmsg_finish(&t->sv);
    free(t->f);
    free(t);
    return status;
}

int sg_cmd_pcap(int argc, char **argv)
{
    const char *file = NULL, *record_dir = NULL;
    bool json = false;

    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(usage_text, argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : 0;
    }
    if (strcmp(argv[1], "decode") != 0)
        return usage("unknown command '%s'", argv[1]);
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (strcmp(argv[i], "--record") == 0 && i + 1 < argc)
            record_dir = argv[++i];
        else if (argv[i][0] == '-')
            return usage("unknown option '%s'", argv[i]);
        else if (!file)
            file = argv[i];
        else
            return usage("unexpected argument '%s'", argv[i]);
    }
    if (!file)
        return usage("decode needs a capture file");
    return decode_file(file, json, record_dir);
}
