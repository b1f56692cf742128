/*
 * proxy/ in-process: a real route on a real libuv loop, real UDP sockets on
 * 127.0.0.1 for the clients and the servers, no app (the route gets a loop
 * context and owner hooks of the test's own).  One behaviour per case
 * (argv[1]); each counts callbacks, waits on conditions (never a fixed
 * time: a 5 s deadline fails the case) and ends with uv_loop_close() == 0,
 * so a leaked handle fails.
 */
#include "proxy/conf.h"
#include "proxy/ctx.h"
#include "proxy/route.h"
#include "proxy/session.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);                  \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define DEADLINE_MS 5000

/* A UDP endpoint of the test: a client or a server. */
struct peer {
    uv_udp_t h;
    int port;
    int got;                        /* datagrams received */
    struct sockaddr_in last_from;   /* where the last one came from */
    char last[64];                  /* its bytes (a string) */
    bool echo;                      /* a server answers "re:" + what it got */
};

struct fx {
    uv_loop_t loop;
    struct sg_logger log;
    uint64_t next_id;
    bool stopping;
    struct sg_route *routes; /* the loop's routes (ctx.routes) */
    struct sg_route_share *shares;
    struct sg_own_sockets *own;
    struct sg_frame_tap *taps, tap;
    struct sg_ctx ctx;
    struct sg_route_owner owner;
    struct sg_conf *conf;
    struct sg_route_conf rc;
    char server[64];
    struct sg_route *r;
    int route_port;
    int closed;  /* the owner's `closed` hook ran */
    int frames;  /* the frame tap saw this many */
    uv_timer_t deadline;
    bool late;
};

/* A route's `protocol` for the game called `name` (its place in the
 * registry's list of choices, "auto" first). */
static int protocol_named(const char *name)
{
    const char *c;

    for (int i = 0; (c = sg_protocol_choice(i)); i++)
        if (strcmp(c, name) == 0)
            return i;
    fprintf(stderr, "no game %s\n", name);
    abort();
}

static void on_alloc(uv_handle_t *h, size_t want, uv_buf_t *buf)
{
    static char mem[2048]; /* the loop is single-threaded: one read at a time */
    (void)h;
    (void)want;
    *buf = uv_buf_init(mem, sizeof(mem));
}

static void on_sent(uv_udp_send_t *req, int status)
{
    CHECK(status == 0);
    free(req);
}

static void send_to(struct peer *p, int port, const char *text)
{
    uv_udp_send_t *req = malloc(sizeof(*req) + 64);
    char *copy = (char *)(req + 1);
    struct sockaddr_in to;
    uv_buf_t b;

    CHECK(req);
    snprintf(copy, 64, "%s", text);
    b = uv_buf_init(copy, (unsigned)strlen(copy));
    uv_ip4_addr("127.0.0.1", port, &to);
    CHECK(uv_udp_send(req, &p->h, &b, 1, (const struct sockaddr *)&to, on_sent) == 0);
}

static void send_bytes(struct peer *p, int port, const uint8_t *data, size_t len)
{
    uv_udp_send_t *req = malloc(sizeof(*req) + len);
    uint8_t *copy = (uint8_t *)(req + 1);
    struct sockaddr_in to;
    uv_buf_t b;

    CHECK(req);
    memcpy(copy, data, len);
    b = uv_buf_init((char *)copy, (unsigned)len);
    uv_ip4_addr("127.0.0.1", port, &to);
    CHECK(uv_udp_send(req, &p->h, &b, 1, (const struct sockaddr *)&to, on_sent) == 0);
}

/* A QuakeWorld client's sequenced datagram: sequence, acknowledge, qport, a nop. */
static void send_qw(struct peer *p, int port, uint32_t seq, uint16_t qport)
{
    uint8_t d[11] = {(uint8_t)seq, (uint8_t)(seq >> 8), (uint8_t)(seq >> 16), (uint8_t)(seq >> 24),
                     0, 0, 0, 0, (uint8_t)qport, (uint8_t)(qport >> 8), 1 /* clc_nop */};
    send_bytes(p, port, d, sizeof(d));
}

static void on_recv(uv_udp_t *h, ssize_t n, const uv_buf_t *buf, const struct sockaddr *from,
                    unsigned flags)
{
    struct peer *p = h->data;
    (void)flags;
    if (n <= 0 || !from)
        return;
    p->got++;
    memcpy(&p->last_from, from, sizeof(p->last_from));
    snprintf(p->last, sizeof(p->last), "%.*s", (int)n, buf->base);
    if (p->echo) {
        char re[80];
        snprintf(re, sizeof(re), "re:%s", p->last);
        send_to(p, ntohs(p->last_from.sin_port), re);
    }
}

static void peer_open(struct fx *f, struct peer *p, bool echo)
{
    struct sockaddr_in a;
    struct sockaddr_storage got;
    int len = sizeof(got);

    memset(p, 0, sizeof(*p));
    p->echo = echo;
    uv_ip4_addr("127.0.0.1", 0, &a);
    CHECK(uv_udp_init(&f->loop, &p->h) == 0);
    p->h.data = p;
    CHECK(uv_udp_bind(&p->h, (const struct sockaddr *)&a, 0) == 0);
    CHECK(uv_udp_getsockname(&p->h, (struct sockaddr *)&got, &len) == 0);
    p->port = ntohs(((struct sockaddr_in *)&got)->sin_port);
    CHECK(uv_udp_recv_start(&p->h, on_alloc, on_recv) == 0);
}

static void peer_close(struct peer *p)
{
    uv_close((uv_handle_t *)&p->h, NULL);
}

/* ---- the route's owner ---- */

static void owner_closed(void *data, struct sg_route *r)
{
    struct fx *f = data;
    CHECK(r == f->r);
    f->closed++;
}

static void tap_frame(void *data, struct sg_session *s, const struct sg_filter_call *call)
{
    struct fx *f = data;
    CHECK(s && call && call->session == &s->fsess);
    f->frames++;
}

static void on_deadline(uv_timer_t *t)
{
    struct fx *f = t->data;
    f->late = true;
}

/* Run the loop until `cond` holds; a DEADLINE_MS wait fails the case. */
#define RUN_UNTIL(f, cond)                                                                         \
    do {                                                                                           \
        (f)->late = false;                                                                         \
        uv_timer_start(&(f)->deadline, on_deadline, DEADLINE_MS, 0);                               \
        while (!(cond) && !(f)->late)                                                              \
            uv_run(&(f)->loop, UV_RUN_ONCE);                                                       \
        uv_timer_stop(&(f)->deadline);                                                             \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: not within %d ms: %s\n", __FILE__, __LINE__, DEADLINE_MS,     \
                    #cond);                                                                        \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void fx_init(struct fx *f)
{
    memset(f, 0, sizeof(*f));
    CHECK(uv_loop_init(&f->loop) == 0);
    sg_log_init(&f->log, 2, getenv("SG_TEST_VERBOSE") ? SG_LOG_DEBUG : SG_LOG_ERROR);
    f->tap = (struct sg_frame_tap){.frame = tap_frame, .data = f};
    sg_frame_tap_add(&f->taps, &f->tap);
    f->ctx = (struct sg_ctx){.loop = &f->loop,
                             .log = &f->log,
                             .worker = 0,
                             .nworkers = 1,
                             .next_session_id = &f->next_id,
                             .stopping = &f->stopping,
                             .routes = &f->routes,
                             .shares = &f->shares,
                             .own = &f->own,
                             .taps = &f->taps};
    f->owner = (struct sg_route_owner){.ctx = &f->ctx, .data = f, .closed = owner_closed};
    CHECK(uv_timer_init(&f->loop, &f->deadline) == 0);
    f->deadline.data = f;
}

/* The defaults of a command-line route towards 127.0.0.1:server_port; the
 * case then changes f->rc. */
static void fx_conf(struct fx *f, int server_port)
{
    struct sg_conf_overrides ov = {0};
    struct sg_conf_diag diag;

    /* The defaults of a command-line route, then the case's settings. */
    snprintf(f->server, sizeof(f->server), "127.0.0.1:%d", server_port);
    ov.listen = "127.0.0.1:27999";
    ov.server = f->server;
    ov.protocol = "auto";
    memset(&diag, 0, sizeof(diag));
    CHECK(sg_conf_load(NULL, &ov, &f->conf, &diag) == 0);
    CHECK(f->conf->routes);
    f->rc = *f->conf->routes;
    f->rc.listen = "127.0.0.1:0"; /* the kernel's port (copied by the route) */
    f->rc.next = NULL;
}

static void fx_start(struct fx *f)
{
    struct sockaddr_storage a;
    socklen_t len = sizeof(a);

    CHECK(sg_route_create(&f->owner, &f->rc, &f->r) == 0);
    f->routes = f->r;
    CHECK(getsockname(f->r->listener.fd, (struct sockaddr *)&a, &len) == 0);
    f->route_port = ntohs(((struct sockaddr_in *)&a)->sin_port);
    CHECK(f->route_port > 0);
}

/* Close the route (its sessions end), wait for the owner's hook, free it;
 * then nothing may be left on the loop. */
static void fx_finish(struct fx *f, struct peer *peers, int npeers)
{
    sg_route_close(f->r, "test over");
    RUN_UNTIL(f, f->closed == 1);
    f->routes = NULL;
    sg_route_destroy(f->r);
    sg_route__shares_free(&f->shares);
    for (int i = 0; i < npeers; i++)
        peer_close(&peers[i]);
    uv_close((uv_handle_t *)&f->deadline, NULL);
    CHECK(uv_run(&f->loop, UV_RUN_DEFAULT) == 0);
    CHECK(uv_loop_close(&f->loop) == 0);
    sg_conf_destroy(f->conf);
    CHECK(f->closed == 1);
}

/* ---- the cases ---- */

/* Two clients get two sessions, each with its own upstream port, and each
 * gets the server's answers to its own datagrams; the frame tap sees every
 * frame (the session table, the tap hook). */
static void case_table(void)
{
    struct fx f;
    struct peer p[3]; /* server, client a, client b */

    fx_init(&f);
    peer_open(&f, &p[0], true);
    peer_open(&f, &p[1], false);
    peer_open(&f, &p[2], false);
    fx_conf(&f, p[0].port);
    fx_start(&f);

    send_to(&p[1], f.route_port, "a1");
    RUN_UNTIL(&f, p[1].got == 1);
    CHECK(strcmp(p[1].last, "re:a1") == 0);
    int port_a = ntohs(p[0].last_from.sin_port);
    send_to(&p[2], f.route_port, "b1");
    RUN_UNTIL(&f, p[2].got == 1);
    CHECK(strcmp(p[2].last, "re:b1") == 0);
    int port_b = ntohs(p[0].last_from.sin_port);
    CHECK(port_a != port_b && port_a != f.route_port && port_b != f.route_port);
    send_to(&p[1], f.route_port, "a2");
    RUN_UNTIL(&f, p[1].got == 2);
    CHECK(strcmp(p[1].last, "re:a2") == 0);
    CHECK(ntohs(p[0].last_from.sin_port) == port_a); /* a's session, found again */
    CHECK(p[2].got == 1);
    CHECK(f.r->nsessions == 2 && f.r->sessions_total == 2);
    CHECK(f.frames == 0); /* auto, no codec claimed them: no decoded frame to tap */
    fx_finish(&f, p, 3);
}

/* On a route that decodes (qw), the frame tap registered in the loop's
 * context sees each datagram either way as a decoded frame. */
static void case_tap(void)
{
    struct fx f;
    struct peer p[2];

    fx_init(&f);
    peer_open(&f, &p[0], true);
    peer_open(&f, &p[1], false);
    fx_conf(&f, p[0].port);
    f.rc.protocol = protocol_named("qw");
    fx_start(&f);

    send_to(&p[1], f.route_port, "\xff\xff\xff\xffstatus\n"); /* out of band */
    RUN_UNTIL(&f, p[1].got == 1);
    send_to(&p[1], f.route_port, "\xff\xff\xff\xffping\n");
    RUN_UNTIL(&f, p[1].got == 2);
    CHECK(f.frames == 4);
    fx_finish(&f, p, 2);
}

/* NAT rebinding: the player's qport from a new port of the same host moves
 * its session there (same upstream socket; answers go to the new port); a
 * second move within a second is refused and dropped; another qport is
 * another player (the session table by host and qport). */
static void case_rebind(void)
{
    struct fx f;
    struct peer p[4]; /* server, the player's first port, its second, a third */
    int upstream;

    fx_init(&f);
    peer_open(&f, &p[0], false);
    for (int i = 1; i < 4; i++)
        peer_open(&f, &p[i], false);
    fx_conf(&f, p[0].port);
    f.rc.protocol = protocol_named("qw");
    fx_start(&f);

    send_qw(&p[1], f.route_port, 1, 1234);
    RUN_UNTIL(&f, p[0].got == 1);
    upstream = ntohs(p[0].last_from.sin_port);
    CHECK(f.r->nsessions == 1 && f.r->sessions->qport == 1234);
    send_qw(&p[2], f.route_port, 2, 1234); /* the NAT gave the player a new port */
    RUN_UNTIL(&f, p[0].got == 2);
    CHECK(ntohs(p[0].last_from.sin_port) == upstream);
    CHECK(f.r->nsessions == 1 && f.r->client_moves == 1);
    send_to(&p[0], upstream, "hello"); /* the answer goes to where the player is now */
    RUN_UNTIL(&f, p[2].got == 1);
    CHECK(p[1].got == 0);

    send_qw(&p[3], f.route_port, 3, 1234); /* moved less than a second ago: refused */
    RUN_UNTIL(&f, f.r->counters.drops[SG_DROP_REBIND] == 1);
    CHECK(f.r->nsessions == 1 && f.r->client_moves == 1 && p[0].got == 2);
    send_qw(&p[3], f.route_port, 1, 999); /* another player behind the same address */
    RUN_UNTIL(&f, p[0].got == 3);
    CHECK(ntohs(p[0].last_from.sin_port) != upstream);
    CHECK(f.r->nsessions == 2 && f.r->client_moves == 1);
    fx_finish(&f, p, 4);
}

/* Send-first (reencode changed, no changing filter): the datagram leaves
 * before it is decoded, its decoding waits in the route's queue and runs
 * after the flush.  In order (reencode always): decoded, rebuilt, then
 * sent; nothing waits.  Both decode every datagram and the tap sees it. */
static void send_first_or_in_order(int reencode)
{
    struct fx f;
    struct peer p[2];
    const struct sg_codec_stats *st;

    fx_init(&f);
    peer_open(&f, &p[0], false);
    peer_open(&f, &p[1], false);
    fx_conf(&f, p[0].port);
    f.rc.protocol = protocol_named("qw");
    f.rc.reencode = reencode;
    fx_start(&f);
    CHECK(f.r->send_first == (reencode == SG_REENCODE_CHANGED));

    send_qw(&p[1], f.route_port, 1, 77);
    send_qw(&p[1], f.route_port, 2, 77);
    RUN_UNTIL(&f, p[0].got == 2 && f.frames == 2);
    CHECK(f.r->dq_n == 0 && f.r->sessions && f.r->sessions->codec);
    st = f.r->sessions->codec->stats(f.r->sessions->cstate);
    CHECK(st->decoded == 2 && st->errors == 0);
    if (reencode == SG_REENCODE_CHANGED) {
        CHECK(f.r->dq_max >= 1); /* decoding waited for the flush */
        CHECK(st->reencoded == 0);
    } else {
        CHECK(f.r->dq_max == 0); /* nothing waited */
        CHECK(st->reencoded == 2);
    }
    fx_finish(&f, p, 2);
}

static void case_send_first(void)
{
    send_first_or_in_order(SG_REENCODE_CHANGED);
}

static void case_in_order(void)
{
    send_first_or_in_order(SG_REENCODE_ALWAYS);
}

/* Send-first's waiting decodes are bounded: with the queue's bound lowered
 * to 3, a burst of 20 datagrams read in one turn keeps at most 3 waiting
 * (the oldest decoded at once when full), and every one is still relayed
 * and decoded, in order. */
static void case_deferred(void)
{
    struct fx f;
    struct peer p[2];
    const struct sg_codec_stats *st;

    fx_init(&f);
    peer_open(&f, &p[0], false);
    peer_open(&f, &p[1], false);
    fx_conf(&f, p[0].port);
    f.rc.protocol = protocol_named("qw");
    f.rc.reencode = SG_REENCODE_CHANGED;
    fx_start(&f);
    CHECK(f.r->send_first);
    f.r->dq_limit = 3;

    for (uint32_t seq = 1; seq <= 20; seq++) /* in the route's socket before it reads */
        send_qw(&p[1], f.route_port, seq, 77);
    RUN_UNTIL(&f, p[0].got == 20 && f.frames == 20);
    CHECK(f.r->dq_n == 0 && f.r->dq_max <= 3);
    CHECK(f.r->dq_overflows >= 1);
    st = f.r->sessions->codec->stats(f.r->sessions->cstate);
    CHECK(st->decoded == 20 && st->errors == 0);
    fx_finish(&f, p, 2);
}

/* A full table (max_sessions 2) ends the oldest session the server never
 * answered for a newcomer; answered (established) ones are kept and the
 * newcomer is refused (admission and eviction). */
static void case_evict(void)
{
    struct fx f;
    struct peer p[5]; /* silent server, clients a b c d */

    fx_init(&f);
    peer_open(&f, &p[0], false);
    for (int i = 1; i < 5; i++)
        peer_open(&f, &p[i], false);
    fx_conf(&f, p[0].port);
    f.rc.max_sessions = 2;
    f.rc.handshake_timeout_ms = 60000;
    fx_start(&f);

    send_to(&p[1], f.route_port, "a");
    RUN_UNTIL(&f, p[0].got == 1);
    send_to(&p[2], f.route_port, "b");
    RUN_UNTIL(&f, p[0].got == 2);
    CHECK(f.r->nsessions == 2 && f.r->sessions_evicted == 0);
    send_to(&p[3], f.route_port, "c"); /* the table is full: a (oldest, unanswered) makes room */
    RUN_UNTIL(&f, p[0].got == 3);
    CHECK(strcmp(p[0].last, "c") == 0);
    CHECK(f.r->nsessions == 2 && f.r->sessions_evicted == 1 && f.r->sessions_total == 3);
    CHECK(f.r->nended == 1 && f.r->ended[0].id == 1);

    /* The server answers b and c: they are established, nobody makes room. */
    p[0].echo = true;
    send_to(&p[2], f.route_port, "b2");
    send_to(&p[3], f.route_port, "c2");
    RUN_UNTIL(&f, p[2].got == 1 && p[3].got == 1);
    CHECK(f.r->sessions[0].stage == SG_STAGE_ESTABLISHED);
    send_to(&p[4], f.route_port, "d");
    RUN_UNTIL(&f, f.r->counters.drops[SG_DROP_SESSION_LIMIT] == 1);
    CHECK(f.r->nsessions == 2 && f.r->sessions_evicted == 1 && p[0].got == 5);
    fx_finish(&f, p, 5);
}

/* A session without traffic for idle_timeout ends "idle", not sooner. */
static void case_idle(void)
{
    struct fx f;
    struct peer p[2];
    uint64_t t0;

    fx_init(&f);
    peer_open(&f, &p[0], true);
    peer_open(&f, &p[1], false);
    fx_conf(&f, p[0].port);
    f.rc.idle_timeout_ms = 100;
    f.rc.handshake_timeout_ms = 60000;
    fx_start(&f);

    send_to(&p[1], f.route_port, "x");
    RUN_UNTIL(&f, p[1].got == 1);
    t0 = uv_now(&f.loop);
    CHECK(f.r->nsessions == 1);
    RUN_UNTIL(&f, f.r->nended == 1);
    CHECK(uv_now(&f.loop) - t0 >= 90); /* the answer came a little after last_active */
    CHECK(f.r->nsessions == 0);
    CHECK(strcmp(f.r->ended[0].end_reason, "idle") == 0);
    fx_finish(&f, p, 2);
}

/* A session the server never answered ends "handshake timeout" after
 * handshake_timeout; an answered (established) one on the same route stays. */
static void case_handshake(void)
{
    struct fx f;
    struct peer p[3]; /* server, client a (answered), client b (not) */
    uint64_t t0;

    fx_init(&f);
    peer_open(&f, &p[0], true);
    peer_open(&f, &p[1], false);
    peer_open(&f, &p[2], false);
    fx_conf(&f, p[0].port);
    f.rc.idle_timeout_ms = 60000;
    f.rc.handshake_timeout_ms = 100;
    fx_start(&f);

    send_to(&p[1], f.route_port, "a");
    RUN_UNTIL(&f, p[1].got == 1);
    CHECK(f.r->sessions && f.r->sessions->stage == SG_STAGE_ESTABLISHED);
    p[0].echo = false; /* b is never answered */
    send_to(&p[2], f.route_port, "b");
    RUN_UNTIL(&f, p[0].got == 2);
    t0 = uv_now(&f.loop);
    CHECK(f.r->nsessions == 2);
    RUN_UNTIL(&f, f.r->nended == 1);
    CHECK(uv_now(&f.loop) - t0 >= 90);
    CHECK(strcmp(f.r->ended[0].end_reason, "handshake timeout") == 0);
    CHECK(f.r->ended[0].id == 2);
    CHECK(f.r->nsessions == 1 && f.r->sessions->stage == SG_STAGE_ESTABLISHED);
    fx_finish(&f, p, 3);
}

/* A reload (sg_route_update) moves the route to a new server: the live
 * session keeps its own, a new one goes to the new server. */
static void case_reload(void)
{
    struct fx f;
    struct peer p[4]; /* server 1, server 2, client a, client b */
    struct sg_route_conf rc2;
    char server2[64];

    fx_init(&f);
    peer_open(&f, &p[0], true);
    peer_open(&f, &p[1], true);
    peer_open(&f, &p[2], false);
    peer_open(&f, &p[3], false);
    fx_conf(&f, p[0].port);
    fx_start(&f);

    send_to(&p[2], f.route_port, "a1");
    RUN_UNTIL(&f, p[2].got == 1);
    CHECK(p[0].got == 1);
    rc2 = f.rc;
    snprintf(server2, sizeof(server2), "127.0.0.1:%d", p[1].port);
    rc2.server = server2;
    rc2.idle_timeout_ms = 30000;
    CHECK(sg_route_update(f.r, &rc2) == 0);
    CHECK(f.r->conf.idle_timeout_ms == 30000);
    send_to(&p[2], f.route_port, "a2");
    RUN_UNTIL(&f, p[2].got == 2);
    CHECK(p[0].got == 2 && p[1].got == 0); /* the live session kept its server */
    send_to(&p[3], f.route_port, "b1");
    RUN_UNTIL(&f, p[3].got == 1);
    CHECK(p[1].got == 1 && p[0].got == 2 && strcmp(p[3].last, "re:b1") == 0);
    CHECK(f.r->nsessions == 2);
    fx_finish(&f, p, 4);
}

/* A reload's new idle_timeout applies to the sessions already live: the
 * session made under 30 s is kept through the reload, then ends "idle"
 * under the new 200 ms (within the case's deadline, far below 30 s). */
static void case_reload_idle(void)
{
    struct fx f;
    struct peer p[2]; /* server, client */
    struct sg_route_conf rc2;

    fx_init(&f);
    peer_open(&f, &p[0], true);
    peer_open(&f, &p[1], false);
    fx_conf(&f, p[0].port);
    f.rc.idle_timeout_ms = 30000;
    fx_start(&f);

    send_to(&p[1], f.route_port, "a1");
    RUN_UNTIL(&f, p[1].got == 1);
    rc2 = f.rc;
    rc2.idle_timeout_ms = 200;
    CHECK(sg_route_update(f.r, &rc2) == 0);
    CHECK(f.r->nsessions == 1 && f.r->sessions->sum.id == 1); /* kept */
    send_to(&p[1], f.route_port, "a2");
    RUN_UNTIL(&f, p[1].got == 2);
    CHECK(f.r->sessions_total == 1); /* the same session answered */
    uint64_t t0 = uv_now(&f.loop);
    RUN_UNTIL(&f, f.r->nended == 1);
    CHECK(uv_now(&f.loop) - t0 >= 150);
    CHECK(f.r->nsessions == 0 && strcmp(f.r->ended[0].end_reason, "idle") == 0);
    fx_finish(&f, p, 2);
}

/* Two worker loops' routes of one name share max_sessions (1 here): the
 * first loop's session fills the table for the second, whose newcomer is
 * refused; when that session ends (idle) its slot passes to the second
 * loop, whose next newcomer is admitted.  Both loops run on this thread,
 * one at a time. */
static void case_workers(void)
{
    struct fx a, b;
    struct peer pa[2], pb[2]; /* each loop's server and client */

    fx_init(&a);
    fx_init(&b);
    a.ctx.nworkers = b.ctx.nworkers = 2;
    b.ctx.worker = 1;
    b.ctx.shares = &a.shares; /* worker 0's, as app.c shares them */
    b.ctx.own = &a.own;
    b.ctx.next_session_id = &a.next_id;
    peer_open(&a, &pa[0], true);
    peer_open(&a, &pa[1], false);
    peer_open(&b, &pb[0], true);
    peer_open(&b, &pb[1], false);
    fx_conf(&a, pa[0].port);
    fx_conf(&b, pb[0].port);
    a.rc.max_sessions = b.rc.max_sessions = 1;
    a.rc.idle_timeout_ms = b.rc.idle_timeout_ms = 300;
    fx_start(&a);
    fx_start(&b);
    CHECK(a.r->share && a.r->share == b.r->share);

    send_to(&pa[1], a.route_port, "a1");
    RUN_UNTIL(&a, pa[1].got == 1);
    CHECK(atomic_load(&a.r->share->nsessions) == 1);
    send_to(&pb[1], b.route_port, "b1");
    RUN_UNTIL(&b, b.r->counters.drops[SG_DROP_SESSION_LIMIT] == 1);
    CHECK(b.r->nsessions == 0 && pb[0].got == 0);
    RUN_UNTIL(&a, a.r->nended == 1);
    CHECK(a.r->nsessions == 0 && strcmp(a.r->ended[0].end_reason, "idle") == 0);
    CHECK(atomic_load(&a.r->share->nsessions) == 0);
    send_to(&pb[1], b.route_port, "b2");
    RUN_UNTIL(&b, pb[1].got == 1);
    CHECK(strcmp(pb[1].last, "re:b2") == 0 && b.r->nsessions == 1 && pb[0].got == 1);
    CHECK(b.r->counters.drops[SG_DROP_SESSION_LIMIT] == 1);
    fx_finish(&b, pb, 2); /* gives its slot back before worker 0 frees the shares */
    CHECK(atomic_load(&a.r->share->nsessions) == 0);
    fx_finish(&a, pa, 2);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } cases[] = {
        {"table", case_table},
        {"tap", case_tap},
        {"rebind", case_rebind},
        {"send_first", case_send_first},
        {"in_order", case_in_order},
        {"deferred", case_deferred},
        {"evict", case_evict},
        {"idle", case_idle},
        {"handshake", case_handshake},
        {"reload", case_reload},
        {"reload_idle", case_reload_idle},
        {"workers", case_workers},
    };

    if (argc != 2) {
        fprintf(stderr, "usage: %s CASE\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (strcmp(argv[1], cases[i].name) == 0) {
            cases[i].fn();
            return 0;
        }
    fprintf(stderr, "no case %s\n", argv[1]);
    return 2;
}
