/*
 * slipgate-bench spectate: what spectators cost the watched player.
 *
 *   slipgate-bench spectate [--spectators 0,1,8,32] [--seconds S] [--rate PPS]
 *                           [--loss P] [--reorder P] [--flood PORTS]
 *                           [--max-spectators M] [--capture NAME] [--json]
 *
 * For each spectator count N, a fresh slipgate with one Quake 3 route and
 * its spectator port: the load generator and sink (load.c) replay one real
 * session of the captures through the route (the watched player), and N
 * scripted spectators connect to the spectator port as a game client does
 * (getchallenge, the Huffman-coded connect, then client messages through
 * the real netchan: messageAcknowledge, reliableAcknowledge and a move,
 * protocol 68 and 71 in turn), each losing and reordering a share of its
 * datagrams both ways.  Once every spectator is shown snapshots, one step of
 * --seconds is measured: slipgate's CPU time, its RSS against before the
 * spectators came, the spectators' datagrams, and slipgate's own residence
 * histogram of the watched player's datagrams (/api/routes).
 *
 * --flood K adds, during the measured step, K sockets (source ports of
 * 127.0.0.1) that send getchallenge and connects (right and wrong
 * challenges) as fast as the step allows, bounded in count; what the
 * player's traffic, the spectators and the server's socket saw is reported
 * (loss, unknown datagrams at the sink, refused, active).
 *
 * Figures are reported, never judged here (tests/bench/spect_check.py
 * checks that they exist and are sane).
 */
#include "tests/bench/bench.h"

#include "proxy/hist.h"
#include "protocols/q3/clmsg.h"
#include "protocols/q3/netchan.h"
#include "protocols/q3/oob.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef SG_BENCH_SLIPGATE
#define SG_BENCH_SLIPGATE "slipgate"
#endif
#ifndef SG_BENCH_CAPTURES
#define SG_BENCH_CAPTURES "../shared/testdata/q3/sessions"
#endif

#define MAX_SPECT   256
#define MAX_COUNTS  16
#define MAX_FLOOD   1024
#define RETRY_NS    300000000ull /* a handshake step sent again after this */
#define ACTIVE_WAIT 15.0         /* seconds for every spectator to be shown snapshots */
#define FLOOD_CAP   200000       /* flood datagrams at most, per step */
#define FLOOD_RATE  50000.0      /* flood datagrams per second, at most */

struct sopts {
    unsigned counts[MAX_COUNTS], ncounts, flood, max_spect;
    double seconds, rate, loss, reorder;
    const char *slipgate, *captures, *capture;
    bool json, verbose, keep;
};

enum { ST_CHALLENGE, ST_CONNECT, ST_CONNECTED };

/* One scripted spectator: a game client's side of the netchan. */
struct spec {
    int fd;
    int stage;
    int protocol;
    uint16_t qport;
    int32_t challenge, out_seq, server_time;
    uint64_t next_try, rng;
    struct sg_q3_netchan *nc;
    /* reordering: one datagram held each way */
    uint8_t held_in[SG_BENCH_MAX_DGRAM], held_out[SG_Q3_MAX_PACKETLEN];
    size_t held_in_len, held_out_len;
    /* counters (the thread's; read once it stopped or under `mu`) */
    uint64_t rcvd, dropped, msgs, snaps, gamestates, sent, decode_errors;
    uint64_t last_rx_ns, max_gap_ns, last_tx_ns;
};

struct crowd {
    struct spec *s;
    unsigned n;
    uint16_t port; /* the spectator port */
    double loss, reorder;
    struct sg_q3_frame *f;
    struct sg_q3_clmsg *cm;
    pthread_t thread;
    bool running;
    atomic_bool stop, measuring;
    pthread_mutex_t mu;
};

struct flood {
    int fd[MAX_FLOOD];
    bool seat[MAX_FLOOD]; /* that port was accepted as a spectator */
    unsigned n;
    uint16_t port;
    pthread_t thread;
    bool running;
    atomic_bool stop;
    uint64_t sent, answers, challenges, accepted, full, bad_challenge;
    uint64_t
        stranger_answers; /* challenges, "full" and bad-challenge answers to ports with no seat */
    double seconds;       /* how long it ran */
};

struct srun {
    unsigned n;
    int status; /* 0 ok, -1 failed */
    char error[1400];
    double cpu_ns, seconds;
    uint64_t relayed, lost, unknown, c2s, s2c;
    long rss_before, rss_after;
    struct sg_bench_resid res;
    uint64_t spec_rcvd, spec_snaps, spec_gamestates, spec_dropped, spec_sent, spec_errors;
    double max_gap_ms;
    long long m_active, m_total, m_refused, m_out, m_limited;
    struct flood fl;
};

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static bool chance(uint64_t *s, double p)
{
    return p > 0 && (double)(rnd(s) % 1000000) < p * 1e6;
}

/* A socket bound to `host` (127.0.0.1, or another loopback address: a source of its own). */
static int udp_open(uint32_t host)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(host)};
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -errno;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

static void send_to(int fd, uint16_t port, const void *data, size_t len)
{
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

    (void)sendto(fd, data, len, 0, (struct sockaddr *)&a, sizeof(a));
}

/* Out to slipgate, with the spectator's loss and reordering. */
static void spec_out(struct crowd *c, struct spec *s, const uint8_t *data, size_t len)
{
    if (chance(&s->rng, c->loss)) {
        s->dropped++;
        return;
    }
    if (!s->held_out_len && len <= sizeof(s->held_out) && chance(&s->rng, c->reorder)) {
        memcpy(s->held_out, data, len);
        s->held_out_len = len;
        return;
    }
    send_to(s->fd, c->port, data, len);
    s->sent++;
    if (s->held_out_len) {
        send_to(s->fd, c->port, s->held_out, s->held_out_len);
        s->held_out_len = 0;
        s->sent++;
    }
}

static void spec_hello(struct crowd *c, struct spec *s, uint64_t now)
{
    uint8_t pkt[1024];
    char text[512];
    int n;

    s->next_try = now + RETRY_NS;
    if (s->stage == ST_CHALLENGE) {
        n = snprintf(text, sizeof(text), "getchallenge %u", (unsigned)(rnd(&s->rng) & 0xffffff));
        n = sg_q3_oob_build(text, (size_t)n, true, pkt, sizeof(pkt));
    } else {
        n = snprintf(text, sizeof(text),
                     "connect \"\\name\\bench%u\\protocol\\%d\\qport\\%u\\challenge\\%d"
                     "\\rate\\25000\\snaps\\40\"",
                     s->qport, s->protocol, s->qport, s->challenge);
        n = sg_q3_oob_build(text, (size_t)n, true, pkt, sizeof(pkt));
        /* the client's own netchan learns protocol, challenge and qport from it */
        if (n > 0)
            (void)sg_q3_netchan_decode(s->nc, SG_Q3_C2S, pkt, (size_t)n, c->f);
        /* 71 is ioquake3's (checksummed) or OpenArena's wire: this client is ioquake3 */
        if (s->protocol == 71)
            s->nc->wire = SG_Q3_WIRE_IOQ3_71;
    }
    if (n > 0) {
        send_to(s->fd, c->port, pkt, (size_t)n); /* the handshake is not lost on purpose */
        s->sent++;
    }
}

/* The client's message after each server message (CL_WritePacket). */
static void spec_move(struct crowd *c, struct spec *s, uint64_t now)
{
    struct sg_q3_clmsg *cm = c->cm;
    const struct sg_q3_view *sv = sg_q3_netchan_view(s->nc, SG_Q3_SIDE_SERVER);
    const struct sg_q3_view *cv = sg_q3_netchan_view(s->nc, SG_Q3_SIDE_CLIENT);
    struct sg_q3_usercmd zero = {0}, cmd = {0};
    struct sg_q3_datagrams *dg = malloc(sizeof(*dg));
    uint8_t buf[256];
    int len, n;

    if (!dg)
        return;
    s->last_tx_ns = now;
    cm->server_id = 0;
    cm->message_ack = s->nc->rx[SG_Q3_S2C].incoming_sequence;
    cm->reliable_ack = cv->server_cmds.highest;
    cm->num_commands = 0;
    cm->move_op = SG_Q3_CLC_MOVE;
    cm->num_cmds = 1;
    s->server_time += 25;
    cmd.server_time = s->server_time;
    cmd.angles[1] = (int32_t)(rnd(&s->rng) & 0xffff);
    cm->cmds[0] = cmd;
    sg_q3_usercmd_make_wire(&zero, &cmd, &cm->wire[0]);
    cm->eof = true;
    cm->stop_op = -1;
    cm->tail_bits = 0;
    len = sg_q3_clmsg_encode(cm, sv->checksum_feed, &sv->server_cmds, buf, sizeof(buf));
    if (len > 0 &&
        (n = sg_q3_netchan_encode(s->nc, SG_Q3_C2S, ++s->out_seq, buf, (size_t)len, dg)) > 0)
        for (int i = 0; i < n; i++)
            spec_out(c, s, dg->data[i], dg->len[i]);
    free(dg);
}

static void spec_in(struct crowd *c, struct spec *s, const uint8_t *data, size_t len, uint64_t now)
{
    struct sg_q3_frame *f = c->f;
    int err = sg_q3_netchan_decode(s->nc, SG_Q3_S2C, data, len, f);

    if (f->rx == SG_Q3_RX_OOB) {
        const struct sg_q3_oob *o = &f->u.oob;

        if (o->kind == SG_Q3_OOB_CHALLENGE_RESPONSE && o->has_challenge &&
            s->stage == ST_CHALLENGE) {
            s->challenge = o->challenge;
            s->stage = ST_CONNECT;
            spec_hello(c, s, now);
        } else if (o->kind == SG_Q3_OOB_CONNECT_RESPONSE && s->stage == ST_CONNECT) {
            s->stage = ST_CONNECTED;
            spec_move(c, s, now); /* CA_CONNECTED: the client's first message */
        }
        return;
    }
    if (err < 0)
        s->decode_errors++;
    if (f->rx != SG_Q3_RX_MESSAGE || s->stage != ST_CONNECTED)
        return;
    if (atomic_load(&c->measuring)) {
        pthread_mutex_lock(&c->mu);
        s->msgs++;
        if (f->u.sv.gamestate)
            s->gamestates++;
        if (f->u.sv.snapshot)
            s->snaps++;
        pthread_mutex_unlock(&c->mu);
    } else if (f->u.sv.snapshot) {
        s->snaps++; /* before the step: only whether it is shown snapshots */
    }
    spec_move(c, s, now);
}

static void spec_recv(struct crowd *c, struct spec *s, uint64_t now)
{
    uint8_t buf[SG_BENCH_MAX_DGRAM];

    for (int k = 0; k < 64; k++) {
        ssize_t r = recv(s->fd, buf, sizeof(buf), 0);

        if (r < 0)
            break;
        if (atomic_load(&c->measuring)) {
            pthread_mutex_lock(&c->mu);
            s->rcvd++;
            if (s->last_rx_ns && now - s->last_rx_ns > s->max_gap_ns)
                s->max_gap_ns = now - s->last_rx_ns;
            s->last_rx_ns = now;
            pthread_mutex_unlock(&c->mu);
        }
        if (s->stage == ST_CONNECTED && chance(&s->rng, c->loss)) {
            s->dropped++;
            continue;
        }
        if (s->stage == ST_CONNECTED && !s->held_in_len && chance(&s->rng, c->reorder)) {
            memcpy(s->held_in, buf, (size_t)r);
            s->held_in_len = (size_t)r;
            continue;
        }
        spec_in(c, s, buf, (size_t)r, now);
        if (s->held_in_len) {
            uint8_t late[SG_BENCH_MAX_DGRAM];
            size_t n = s->held_in_len;

            memcpy(late, s->held_in, n);
            s->held_in_len = 0;
            spec_in(c, s, late, n, now); /* older: the netchan drops it, as the game does */
        }
    }
}

static void *crowd_main(void *arg)
{
    struct crowd *c = arg;
    struct pollfd *p = calloc(c->n ? c->n : 1, sizeof(*p));

    if (!p)
        return NULL;
    for (unsigned i = 0; i < c->n; i++)
        p[i] = (struct pollfd){.fd = c->s[i].fd, .events = POLLIN};
    while (!atomic_load(&c->stop)) {
        uint64_t now = sg_bench_now_ns();

        for (unsigned i = 0; i < c->n; i++) {
            struct spec *s = &c->s[i];

            if (s->stage != ST_CONNECTED && now >= s->next_try)
                spec_hello(c, s, now);
            /* a client with nothing to answer still sends once a second */
            else if (s->stage == ST_CONNECTED && now - s->last_tx_ns >= 1000000000ull)
                spec_move(c, s, now);
        }
        if (poll(p, c->n, 5) <= 0)
            continue;
        now = sg_bench_now_ns();
        for (unsigned i = 0; i < c->n; i++)
            if (p[i].revents & POLLIN)
                spec_recv(c, &c->s[i], now);
    }
    free(p);
    return NULL;
}

static void crowd_stop(struct crowd *c)
{
    if (c->running) {
        atomic_store(&c->stop, true);
        pthread_join(c->thread, NULL);
        c->running = false;
    }
    for (unsigned i = 0; i < c->n; i++) {
        if (c->s[i].fd >= 0)
            close(c->s[i].fd);
        if (c->s[i].nc) {
            sg_q3_netchan_finish(c->s[i].nc);
            free(c->s[i].nc);
        }
    }
    free(c->s);
    free(c->f);
    free(c->cm);
    pthread_mutex_destroy(&c->mu);
    memset(c, 0, sizeof(*c));
}

static int crowd_start(struct crowd *c, unsigned n, uint16_t port, const struct sopts *o)
{
    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->mu, NULL);
    c->n = n;
    c->port = port;
    c->loss = o->loss;
    c->reorder = o->reorder;
    c->s = calloc(n ? n : 1, sizeof(*c->s));
    c->f = malloc(sizeof(*c->f));
    c->cm = calloc(1, sizeof(*c->cm));
    if (!c->s || !c->f || !c->cm)
        return -ENOMEM;
    for (unsigned i = 0; i < n; i++) {
        struct spec *s = &c->s[i];

        s->fd = -1;
        if (!(s->nc = malloc(sizeof(*s->nc))))
            return -ENOMEM;
        sg_q3_netchan_init(s->nc);
        /* each from an address of its own (127.0.1.x: loopback, this host), as
         * spectators on the Internet are: slipgate limits handshakes per address */
        if ((s->fd = udp_open(0x7f000101u + i)) < 0)
            return s->fd;
        s->protocol = i % 2 ? 71 : 68;
        s->qport = (uint16_t)(1000 + i);
        s->rng = 0x9e3779b97f4a7c15ull * (i + 1);
    }
    if (pthread_create(&c->thread, NULL, crowd_main, c) != 0)
        return -EAGAIN;
    c->running = true;
    return 0;
}

/* How many spectators are shown snapshots. */
static unsigned crowd_active(struct crowd *c)
{
    unsigned k = 0;

    pthread_mutex_lock(&c->mu);
    for (unsigned i = 0; i < c->n; i++)
        k += c->s[i].snaps > 0;
    pthread_mutex_unlock(&c->mu);
    return k;
}

/* ---- the flood ---- */

static void *flood_main(void *arg)
{
    struct flood *fl = arg;
    uint64_t t0 = sg_bench_now_ns();
    uint8_t pkt[1024], buf[2048];
    char text[512];

    for (uint64_t round = 0; !atomic_load(&fl->stop) && fl->sent < FLOOD_CAP; round++) {
        uint64_t due = t0 + (uint64_t)((double)fl->sent / FLOOD_RATE * 1e9),
                 now = sg_bench_now_ns();

        if (due > now) {
            struct timespec ts = {(time_t)((due - now) / 1000000000u),
                                  (long)((due - now) % 1000000000u)};
            nanosleep(&ts, NULL);
        }
        for (unsigned i = 0; i < fl->n && fl->sent < FLOOD_CAP; i++) {
            int n = snprintf(text, sizeof(text), "getchallenge %u", (unsigned)(round * 7 + i));

            n = sg_q3_oob_build(text, (size_t)n, true, pkt, sizeof(pkt));
            if (n > 0) {
                send_to(fl->fd[i], fl->port, pkt, (size_t)n);
                fl->sent++;
            }
            /* a connect with a challenge that is not this address's */
            n = snprintf(text, sizeof(text),
                         "connect \"\\name\\flood\\protocol\\68\\qport\\%u\\challenge\\%u\"", i,
                         (unsigned)(round * 131 + i));
            n = sg_q3_oob_build(text, (size_t)n, true, pkt, sizeof(pkt));
            if (n > 0) {
                send_to(fl->fd[i], fl->port, pkt, (size_t)n);
                fl->sent++;
            }
            for (int k = 0; k < 8; k++) {
                ssize_t r = recv(fl->fd[i], buf, sizeof(buf) - 1, 0);
                struct sg_q3_oob o;

                if (r < 0)
                    break;
                fl->answers++;
                if (sg_q3_oob_parse(buf, (size_t)r, false, &o) < 0)
                    continue;
                if (!fl->seat[i] &&
                    (o.kind == SG_Q3_OOB_CHALLENGE_RESPONSE || o.kind == SG_Q3_OOB_PRINT))
                    fl->stranger_answers++;
                if (o.kind == SG_Q3_OOB_CHALLENGE_RESPONSE && o.has_challenge) {
                    fl->challenges++;
                    /* the right challenge: a connect that asks for a seat */
                    n = snprintf(
                        text, sizeof(text),
                        "connect \"\\name\\flood\\protocol\\71\\qport\\%u\\challenge\\%d\"", i,
                        o.challenge);
                    n = sg_q3_oob_build(text, (size_t)n, true, pkt, sizeof(pkt));
                    if (n > 0) {
                        send_to(fl->fd[i], fl->port, pkt, (size_t)n);
                        fl->sent++;
                    }
                } else if (o.kind == SG_Q3_OOB_CONNECT_RESPONSE) {
                    fl->accepted++;
                    fl->seat[i] = true;
                } else if (o.kind == SG_Q3_OOB_PRINT && strstr(o.text, "full")) {
                    fl->full++;
                } else if (o.kind == SG_Q3_OOB_PRINT && strstr(o.text, "challenge")) {
                    fl->bad_challenge++;
                }
            }
        }
    }
    fl->seconds = (double)(sg_bench_now_ns() - t0) / 1e9;
    return NULL;
}

static int flood_start(struct flood *fl, unsigned n, uint16_t port)
{
    fl->n = 0;
    fl->port = port;
    for (unsigned i = 0; i < n && i < MAX_FLOOD; i++) {
        int fd = udp_open(INADDR_LOOPBACK);

        if (fd < 0)
            return fd;
        fl->fd[fl->n++] = fd;
    }
    if (pthread_create(&fl->thread, NULL, flood_main, fl) != 0)
        return -EAGAIN;
    fl->running = true;
    return 0;
}

static void flood_stop(struct flood *fl)
{
    if (fl->running) {
        atomic_store(&fl->stop, true);
        pthread_join(fl->thread, NULL);
        fl->running = false;
    }
    for (unsigned i = 0; i < fl->n; i++)
        close(fl->fd[i]);
    fl->n = 0;
}

/* ---- one run ---- */

static long long metric(uint16_t http, const char *name)
{
    static char buf[1 << 20];
    const char *body = sg_bench_http_get(http, "/metrics", buf, sizeof(buf)), *p;

    if (!body || !(p = strstr(body, name)))
        return -1;
    p += strlen(name);
    while (*p && *p != ' ')
        p++;
    return strtoll(p, NULL, 10);
}

static void fail(struct srun *r, const char *what, int err)
{
    r->status = -1;
    snprintf(r->error, sizeof(r->error), "%s%s%s", what, err ? ": " : "",
             err ? strerror(-err) : "");
}

static void run_one(const struct sopts *o, const struct sg_bench_shape *shape, const char *dir,
                    unsigned n, struct srun *r)
{
    char conf[PATH_MAX], log[PATH_MAX], text[1024];
    struct sg_bench_load *load = NULL;
    struct crowd crowd = {0};
    struct sg_bench_step st;
    struct sg_hist h0, h1, t0, t1;
    pid_t pid = -1;
    int lport = sg_bench_free_udp_port(), sport = sg_bench_free_udp_port();
    int hport = sg_bench_free_tcp_port(), err, status = 0;
    int64_t c0, c1;
    unsigned open = 0;
    FILE *f;

    memset(r, 0, sizeof(*r));
    r->n = n;
    pthread_mutex_init(&crowd.mu, NULL);
    if (lport < 0 || sport < 0 || hport < 0 || lport == sport) {
        fail(r, "no free port", lport < 0 ? lport : sport < 0 ? sport : hport);
        return;
    }
    if ((err = sg_bench_load_create(shape, 1, false, false, &load)) < 0) {
        fail(r, "cannot create the load", err);
        return;
    }
    snprintf(conf, sizeof(conf), "%s/spectate-%u.conf", dir, n);
    snprintf(log, sizeof(log), "%s/spectate-%u.log", dir, n);
    if (!(f = fopen(conf, "w"))) {
        fail(r, "cannot write the configuration", -errno);
        goto out;
    }
    fprintf(f,
            "http 127.0.0.1:%d\n"
            "route watched {\n"
            "    listen 127.0.0.1:%d\n"
            "    server 127.0.0.1:%u\n"
            "    protocol q3\n"
            "    idle_timeout 1h\n"
            "    handshake_timeout 1h\n"
            "    spectate 127.0.0.1:%d\n"
            "    max_spectators %u\n"
            "}\n",
            hport, lport, sg_bench_load_sink_port(load), sport, o->max_spect);
    fclose(f);
    {
        /* one loop: the spectator port sees the sessions of worker 0's loop only */
        char exe[PATH_MAX], dash_c[] = "-c", dash_w[] = "-w", one[] = "1";
        char *argv[] = {exe, dash_c, conf, dash_w, one, NULL};

        snprintf(exe, sizeof(exe), "%s", o->slipgate);

        if ((err = sg_bench_child_spawn(argv, log, NULL, &pid)) < 0) {
            fail(r, "cannot start slipgate", err);
            goto out;
        }
    }
    if ((err = sg_bench_child_wait_udp(pid, (uint16_t)lport, 5.0, &status)) < 0 ||
        (err = sg_bench_child_wait_udp(pid, (uint16_t)sport, 5.0, &status)) < 0) {
        fail(r, "slipgate did not bind its ports (see its log)", err);
        goto out;
    }
    /* the watched player: its handshake and gamestate, then play */
    if ((err = sg_bench_load_open(load, (uint16_t)lport, 1, 5.0, &open)) < 0) {
        fail(r, "the watched session did not open", err);
        goto out;
    }
    st = (struct sg_bench_step){.target_pps = o->rate, .seconds = 1.0};
    if ((err = sg_bench_load_step(load, &st)) < 0) {
        fail(r, "warm-up", err);
        goto out;
    }
    r->rss_before = sg_bench_child_rss_kib(pid);

    /* the spectators, until each one is shown snapshots */
    if ((err = crowd_start(&crowd, n, (uint16_t)sport, o)) < 0) {
        fail(r, "cannot start the spectators", err);
        goto out;
    }
    for (double waited = 0; crowd_active(&crowd) < n; waited += 0.5) {
        if (waited >= ACTIVE_WAIT) {
            snprintf(text, sizeof(text), "only %u of %u spectators were shown snapshots",
                     crowd_active(&crowd), n);
            fail(r, text, 0);
            goto out;
        }
        st = (struct sg_bench_step){.target_pps = o->rate, .seconds = 0.5};
        if ((err = sg_bench_load_step(load, &st)) < 0) {
            fail(r, "spectators' start", err);
            goto out;
        }
    }

    /* the measured step */
    if (!sg_bench_resid_read((uint16_t)hport, &h0, &t0)) {
        fail(r, "cannot read slipgate's residence times (/api/routes)", 0);
        goto out;
    }
    pthread_mutex_lock(&crowd.mu);
    for (unsigned i = 0; i < n; i++) {
        crowd.s[i].snaps = crowd.s[i].dropped = crowd.s[i].sent = 0;
        crowd.s[i].last_rx_ns = sg_bench_now_ns();
    }
    atomic_store(&crowd.measuring, true);
    pthread_mutex_unlock(&crowd.mu);
    if (o->flood && (err = flood_start(&r->fl, o->flood, (uint16_t)sport)) < 0) {
        fail(r, "cannot start the flood", err);
        goto out;
    }
    c0 = sg_bench_child_cpu_ns(pid);
    st = (struct sg_bench_step){.target_pps = o->rate, .seconds = o->seconds};
    err = sg_bench_load_step(load, &st);
    c1 = sg_bench_child_cpu_ns(pid);
    flood_stop(&r->fl);
    atomic_store(&crowd.measuring, false);
    if (err < 0) {
        fail(r, "the measured step", err);
        goto out;
    }
    r->seconds = st.elapsed;
    r->cpu_ns = c0 >= 0 && c1 >= c0 ? (double)(c1 - c0) : NAN;
    r->c2s = st.c2s_sent;
    r->s2c = st.s2c_sent;
    r->relayed = st.c2s_rcvd + st.s2c_rcvd;
    r->lost = st.c2s_sent + st.s2c_sent -
              (r->relayed < st.c2s_sent + st.s2c_sent ? r->relayed : st.c2s_sent + st.s2c_sent);
    r->unknown = st.unknown;
    if (sg_bench_resid_read((uint16_t)hport, &h1, &t1))
        sg_bench_resid_delta(&h0, &h1, &r->res);
    r->rss_after = sg_bench_child_rss_kib(pid);
    pthread_mutex_lock(&crowd.mu);
    for (unsigned i = 0; i < n; i++) {
        struct spec *s = &crowd.s[i];
        r->spec_rcvd += s->rcvd;
        r->spec_snaps += s->snaps;
        r->spec_gamestates += s->gamestates;
        r->spec_dropped += s->dropped;
        r->spec_sent += s->sent;
        r->spec_errors += s->decode_errors;
        if ((double)s->max_gap_ns / 1e6 > r->max_gap_ms)
            r->max_gap_ms = (double)s->max_gap_ns / 1e6;
    }
    pthread_mutex_unlock(&crowd.mu);
    /* the flood's last datagrams, still in the socket's queue, handled first */
    for (int k = 0, same = 0; k < 40 && same < 2; k++) {
        long long was = r->m_refused;
        struct timespec ts = {0, 50000000};

        r->m_refused = metric((uint16_t)hport, "slipgate_spectators_refused_total{");
        same = r->m_refused == was ? same + 1 : 0;
        nanosleep(&ts, NULL);
    }
    r->m_active = metric((uint16_t)hport, "slipgate_spectators_active{");
    r->m_limited = metric((uint16_t)hport, "slipgate_spectator_handshakes_limited_total{");
    r->m_total = metric((uint16_t)hport, "slipgate_spectators_total{");
    r->m_refused = metric((uint16_t)hport, "slipgate_spectators_refused_total{");
    r->m_out = metric((uint16_t)hport, "slipgate_spectator_datagrams_total{route=\"watched\","
                                       "direction=\"out\"}");
    if (!sg_bench_child_running(pid, &status))
        fail(r, "slipgate exited during the run", 0);
out:
    flood_stop(&r->fl);
    crowd_stop(&crowd);
    if (pid > 0) {
        status = sg_bench_child_stop(pid, 3.0);
        if (r->status == 0 && status != 0)
            fail(r, "slipgate did not exit 0 on SIGTERM", 0);
    }
    sg_bench_load_destroy(load);
    if (r->status == 0 && !o->keep) {
        unlink(conf);
        unlink(log);
    }
}

/* ---- the report ---- */

static double per(double a, double b)
{
    return b > 0 ? a / b : NAN;
}

static void num(FILE *f, const char *key, double v, bool comma)
{
    if (isnan(v) || isinf(v))
        fprintf(f, "\"%s\": null%s", key, comma ? ", " : "");
    else
        fprintf(f, "\"%s\": %.3f%s", key, v, comma ? ", " : "");
}

static void report(const struct sopts *o, const struct sg_bench_script *sc, const struct srun *runs,
                   unsigned nr, const char *dir)
{
    const struct srun *base = NULL;

    for (unsigned i = 0; i < nr; i++)
        if (runs[i].n == 0 && runs[i].status == 0)
            base = &runs[i];
    if (o->json) {
        printf("{\"spectate\": {\"capture\": ");
        sg_bench_json_str(stdout, sc->name);
        printf(", \"logs\": ");
        sg_bench_json_str(stdout, o->keep ? dir : "");
        printf(", \"seconds\": %.3f, \"rate\": %.1f, \"loss\": %.4f, \"reorder\": %.4f, "
               "\"flood\": %u, \"max_spectators\": %u, \"runs\": [",
               o->seconds, o->rate, o->loss, o->reorder, o->flood, o->max_spect);
        for (unsigned i = 0; i < nr; i++) {
            const struct srun *r = &runs[i];
            double extra = base && r->n ? r->cpu_ns - base->cpu_ns : NAN;

            printf("%s\n  {\"spectators\": %u, \"ok\": %s, \"error\": ", i ? "," : "", r->n,
                   r->status == 0 ? "true" : "false");
            sg_bench_json_str(stdout, r->error);
            printf(
                ", \"seconds\": %.3f, \"c2s_sent\": %llu, \"s2c_sent\": %llu, \"relayed\": %llu, "
                "\"lost\": %llu, \"unknown_at_server\": %llu, ",
                r->seconds, (unsigned long long)r->c2s, (unsigned long long)r->s2c,
                (unsigned long long)r->relayed, (unsigned long long)r->lost,
                (unsigned long long)r->unknown);
            num(stdout, "cpu_ms", r->cpu_ns / 1e6, true);
            num(stdout, "cpu_ns_per_relayed", per(r->cpu_ns, (double)r->relayed), true);
            num(stdout, "cpu_ns_per_datagram",
                per(r->cpu_ns, (double)r->relayed + (double)r->spec_rcvd), true);
            num(stdout, "extra_cpu_ns_per_spectator_datagram", per(extra, (double)r->spec_rcvd),
                true);
            num(stdout, "extra_cpu_share_per_spectator", per(per(extra, r->seconds * 1e9), r->n),
                true);
            printf("\"rss_before_kib\": %ld, \"rss_after_kib\": %ld, ", r->rss_before,
                   r->rss_after);
            num(stdout, "rss_per_spectator_kib",
                r->n ? per((double)(r->rss_after - r->rss_before), r->n) : NAN, true);
            printf("\"spectator_datagrams\": %llu, \"spectator_snapshots\": %llu, "
                   "\"spectator_gamestates\": %llu, \"spectator_sent\": %llu, "
                   "\"spectator_dropped\": %llu, \"spectator_decode_errors\": %llu, ",
                   (unsigned long long)r->spec_rcvd, (unsigned long long)r->spec_snaps,
                   (unsigned long long)r->spec_gamestates, (unsigned long long)r->spec_sent,
                   (unsigned long long)r->spec_dropped, (unsigned long long)r->spec_errors);
            num(stdout, "spectator_max_gap_ms", r->n ? r->max_gap_ms : NAN, true);
            printf("\"residence_count\": %llu, ", r->res.count);
            num(stdout, "residence_p50_us", r->res.have ? r->res.p50 : NAN, true);
            num(stdout, "residence_p99_us", r->res.have ? r->res.p99 : NAN, true);
            num(stdout, "residence_p50_vs_none",
                base && r->res.have && base->res.have ? r->res.p50 / base->res.p50 : NAN, true);
            num(stdout, "residence_p99_vs_none",
                base && r->res.have && base->res.have ? r->res.p99 / base->res.p99 : NAN, true);
            printf("\"metrics\": {\"active\": %lld, \"total\": %lld, \"refused\": %lld, "
                   "\"datagrams_out\": %lld, \"limited\": %lld}, ",
                   r->m_active, r->m_total, r->m_refused, r->m_out, r->m_limited);
            printf(
                "\"flood_sent\": %llu, \"flood_answers\": %llu, \"flood_accepted\": %llu, "
                "\"flood_full\": %llu, \"flood_bad_challenge\": %llu, \"flood_challenges\": %llu, "
                "\"flood_seconds\": %.3f, \"flood_stranger_answers\": %llu}",
                (unsigned long long)r->fl.sent, (unsigned long long)r->fl.answers,
                (unsigned long long)r->fl.accepted, (unsigned long long)r->fl.full,
                (unsigned long long)r->fl.bad_challenge, (unsigned long long)r->fl.challenges,
                r->fl.seconds, (unsigned long long)r->fl.stranger_answers);
        }
        printf("\n]}}\n");
        return;
    }
    printf("spectators on one watched session (capture %s, %.0f datagrams/s, %.1f s a step, "
           "spectator loss %.1f %%, reordered %.1f %%%s)\n",
           sc->name, o->rate, o->seconds, o->loss * 100, o->reorder * 100,
           o->flood ? ", with a handshake flood" : "");
    printf("%5s %8s %6s %9s %9s %10s %8s %9s %9s %8s %8s %8s %8s\n", "N", "relayed", "lost",
           "cpu ms", "ns/dgram", "spect dg", "snaps", "ns/sp.dg", "%core/sp", "KiB/sp", "res p50",
           "res p99", "p99/N=0");
    for (unsigned i = 0; i < nr; i++) {
        const struct srun *r = &runs[i];
        double extra = base && r->n ? r->cpu_ns - base->cpu_ns : NAN;

        if (r->status != 0) {
            printf("%5u error: %s\n", r->n, r->error);
            continue;
        }
        printf("%5u %8llu %6llu %9.1f %9.0f %10llu %8llu %9.0f %9.2f %8.0f %8.1f %8.1f %8.2f\n",
               r->n, (unsigned long long)r->relayed, (unsigned long long)r->lost, r->cpu_ns / 1e6,
               per(r->cpu_ns, (double)r->relayed + (double)r->spec_rcvd),
               (unsigned long long)r->spec_rcvd, (unsigned long long)r->spec_snaps,
               per(extra, (double)r->spec_rcvd), per(per(extra, r->seconds * 1e9), r->n) * 100,
               r->n ? per((double)(r->rss_after - r->rss_before), r->n) : NAN, r->res.p50,
               r->res.p99, base && base->res.have ? r->res.p99 / base->res.p99 : NAN);
        if (o->flood)
            printf("      flood: %llu sent in %.1f s; %llu answers to its ports without a seat; "
                   "in all %llu challenges, %llu \"full\", %llu bad challenge, %llu accepts; "
                   "slipgate: refused %lld, limited %lld, active %lld; unknown at the "
                   "server %llu\n",
                   (unsigned long long)r->fl.sent, r->fl.seconds,
                   (unsigned long long)r->fl.stranger_answers, (unsigned long long)r->fl.challenges,
                   (unsigned long long)r->fl.full, (unsigned long long)r->fl.bad_challenge,
                   (unsigned long long)r->fl.accepted, r->m_refused, r->m_limited, r->m_active,
                   (unsigned long long)r->unknown);
    }
    printf("ns/dgram: slipgate's CPU per datagram it sent (the player's both ways and the "
           "spectators'); ns/sp.dg and %%core/sp: the CPU over the N=0 run's, per spectator "
           "datagram and per spectator; KiB/sp: RSS growth once the spectators came; res: "
           "slipgate's residence time of the player's datagrams, us\n");
}

/* ---- the command line ---- */

static int parse(int argc, char **argv, struct sopts *o)
{
    static const struct option longopts[] = {
        {"spectators", required_argument, NULL, 'n'},
        {"seconds", required_argument, NULL, 's'},
        {"rate", required_argument, NULL, 'r'},
        {"loss", required_argument, NULL, 'l'},
        {"reorder", required_argument, NULL, 'o'},
        {"flood", required_argument, NULL, 'f'},
        {"max-spectators", required_argument, NULL, 'm'},
        {"slipgate", required_argument, NULL, 'S'},
        {"captures", required_argument, NULL, 'C'},
        {"capture", required_argument, NULL, 'c'},
        {"json", no_argument, NULL, 'j'},
        {"keep-logs", no_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *list = "0,1,8,32";
    char buf[256], *save = NULL, *end;
    int c;

    *o = (struct sopts){.seconds = 5,
                        .rate = 200,
                        .loss = 0.05,
                        .reorder = 0.02,
                        .slipgate = SG_BENCH_SLIPGATE,
                        .captures = SG_BENCH_CAPTURES};
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'n':
            list = optarg;
            break;
        case 's':
            o->seconds = strtod(optarg, NULL);
            break;
        case 'r':
            o->rate = strtod(optarg, NULL);
            break;
        case 'l':
            o->loss = strtod(optarg, NULL);
            break;
        case 'o':
            o->reorder = strtod(optarg, NULL);
            break;
        case 'f':
            o->flood = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'm':
            o->max_spect = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'S':
            o->slipgate = optarg;
            break;
        case 'C':
            o->captures = optarg;
            break;
        case 'c':
            o->capture = optarg;
            break;
        case 'j':
            o->json = true;
            break;
        case 'k':
            o->keep = true;
            break;
        case 'h':
            printf("usage: slipgate-bench spectate [--spectators 0,1,8,32] [--seconds 5] "
                   "[--rate 200]\n"
                   "       [--loss 0.05] [--reorder 0.02] [--flood PORTS] [--max-spectators M]\n"
                   "       [--capture NAME] [--captures DIR] [--slipgate PATH] [--json] "
                   "[--keep-logs]\n"
                   "One watched Quake 3 session replayed through slipgate while N scripted\n"
                   "spectators watch it on the route's spectator port; per N: slipgate's CPU,\n"
                   "RSS per spectator, the spectators' datagrams and the player's residence.\n");
            exit(0);
        default:
            return -1;
        }
    }
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        unsigned long v = strtoul(t, &end, 10);

        if (*end || end == t || v > MAX_SPECT || o->ncounts == MAX_COUNTS) {
            fprintf(stderr, "slipgate-bench spectate: --spectators: up to %d counts of 0..%d\n",
                    MAX_COUNTS, MAX_SPECT);
            return -1;
        }
        o->counts[o->ncounts++] = (unsigned)v;
    }
    if (!o->max_spect) {
        for (unsigned i = 0; i < o->ncounts; i++)
            if (o->counts[i] + 1 > o->max_spect)
                o->max_spect = o->counts[i] + 1;
    }
    if (o->ncounts == 0 || !(o->seconds > 0 && o->seconds <= 600) || !(o->rate >= 10) ||
        !(o->loss >= 0 && o->loss < 1) || !(o->reorder >= 0 && o->reorder < 1) ||
        o->flood > MAX_FLOOD) {
        fprintf(stderr, "slipgate-bench spectate: a bad option value (see --help)\n");
        return -1;
    }
    return 0;
}

int sg_bench_spectate_main(int argc, char **argv)
{
    struct sopts o;
    struct sg_bench_shape shape = {0}, one;
    struct srun *runs;
    char dir[] = "/tmp/slipgate-bench-spectate.XXXXXX";
    size_t pick = 0;
    int status = 0;

    if (parse(argc, argv, &o) < 0)
        return 2;
    if (access(o.slipgate, X_OK) < 0) {
        fprintf(stderr, "slipgate-bench spectate: no slipgate at %s (--slipgate PATH)\n",
                o.slipgate);
        return 1;
    }
    if (sg_bench_shape_load(&shape, o.captures, false) < 0 || !shape.q3 || !shape.nscripts) {
        fprintf(stderr, "slipgate-bench spectate: %s\n", SG_BENCH_NEEDS_Q3);
        sg_bench_shape_finish(&shape);
        return 1;
    }
    for (size_t i = 0; o.capture && i < shape.nscripts; i++)
        if (strstr(shape.scripts[i].name, o.capture)) {
            pick = i;
            break;
        }
    one = shape;
    one.scripts = &shape.scripts[pick];
    one.nscripts = 1;
    if (!mkdtemp(dir) || !(runs = calloc(o.ncounts, sizeof(*runs)))) {
        sg_bench_shape_finish(&shape);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    for (unsigned i = 0; i < o.ncounts; i++) {
        run_one(&o, &one, dir, o.counts[i], &runs[i]);
        if (runs[i].status != 0) {
            fprintf(stderr, "slipgate-bench spectate: N=%u: %s (logs kept in %s)\n", o.counts[i],
                    runs[i].error, dir);
            status = 1;
        }
    }
    report(&o, one.scripts, runs, o.ncounts, dir);
    if (o.keep)
        fprintf(stderr, "slipgate-bench spectate: logs kept in %s\n", dir);
    else if (status == 0)
        rmdir(dir);
    free(runs);
    sg_bench_shape_finish(&shape);
    return status;
}
