/*
 * The load generator (client side, on the calling thread) and the sink (a
 * game-server stand-in, on a thread of its own), replaying scripts of real
 * Quake 3 sessions (bench.h, shape.c).
 *
 * Generator: N client sockets, each connected to the relay (or straight to
 * the sink), so each one is a session; session i replays script i % S.
 * Client datagrams are paced to the step's rate (epoll_pwait2 with a 1 ns
 * timer slack between slots) and sent with sendmmsg, spread round-robin
 * over the sessions, each going on through its script; a generator that
 * falls more than 2 ms behind skips slots rather than bursting, and says
 * so.  Like a real client, a session sends a client datagram only once it
 * has received the server datagrams that come before it in the capture
 * (its acknowledgements and, for protocol 68, its XOR key depend on them);
 * one lost on the way is given up after HOLD_NS.  At the end of its script a session waits (at most
 * HOLD_NS) for the server datagrams still on their way before it reconnects, so that no datagram of
 * one connection arrives after the next one began.  Replies are read with recvmmsg on whichever
 * sockets epoll reports.
 *
 * Sink: one socket; recvmmsg, then for every client datagram the server
 * datagrams that follow it in the script, sent with sendmmsg to the
 * sender's address.  The sink knows a session by its source port: learned
 * from the hello, or, when sessions open with the real handshake, from the
 * first datagram of an unknown port while the generator opens that session
 * (sessions open one at a time).
 *
 * NetQuake (scripts marked `nq`): the server's accept moves the client to
 * another port of the server.  The sink has a second socket for that (the
 * game port): the accept it sends names it (the script's accept, its port
 * filled in), and a datagram is answered from the socket it came to.  With
 * a relay that follows the accept (`follow`: slipgate, whose NetQuake hook
 * moves its upstream socket to the named port before it relays the accept),
 * the server datagrams that the capture's server sent from its new port in
 * answer to the connect are held until the client has the accept, then sent
 * from the game port (by the generator's thread, under `mu`): sent at once,
 * they would come to the relay before it moved and be lost (its upstream
 * socket is connected to the control port), as on a real network.  Without
 * (direct, minrelay) every datagram stays on the control port.
 *
 * Latency is one-way and per datagram: the sender stores each datagram's
 * send time and step (epoch) under (session, script index) in `ts`; the
 * receiver finds the script index from the datagram's key.  Both ends
 * share CLOCK_MONOTONIC.  Loss is counted per step, after a drain.  The
 * harness's own socket overflows are counted apart (SO_RXQ_OVFL), so a
 * harness that cannot keep up is not blamed on the relay.
 *
 * Threading: the sink's counters and histogram are under `mu`, which the
 * sink holds while it handles one received batch (replies included) and
 * the generator takes only to start a step and to read the counters; `ts`
 * and `opening` are atomics.
 */
#include "tests/bench/bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAGIC 0x5347u /* "SG" */

enum kind {
    KIND_HELLO = 1, /* opens a session; answered once */
    KIND_HELLO_ACK,
    KIND_C2S, /* a client datagram of the current step */
    KIND_S2C, /* a server datagram */
};

#define BATCH            64          /* datagrams per recvmmsg */
#define SEND_PER_SESSION 32          /* datagrams per sendmmsg on one session */
#define SEND_CAP         1024        /* datagrams per pacing slot, so replies get read */
#define MAX_REPLIES      (BATCH * 4) /* replies per sendmmsg of the sink */
#define RX_BUF           SG_BENCH_MAX_DGRAM
#define CTRL_LEN         CMSG_SPACE(sizeof(uint32_t))
#define SINK_RCVBUF      (8 << 20)
#define SINK_TIMEOUT_US  20000        /* the sink checks for stop this often */
#define BEHIND_NS        2000000ull   /* at most this much catching up, in one burst */
#define HOLD_NS          250000000ull /* most a session waits for replies (then: lost) */
#define STALL_NS         100000ull    /* a pause when every session waits */
#define DRAIN_QUIET_NS   200000000ull
#define DRAIN_MAX_NS     2000000000ull
#define TS_BITS          48
#define TS_MASK          ((1ull << TS_BITS) - 1)

struct hdr {
    uint16_t magic, epoch, session, kind;
    uint64_t ts;
};

_Static_assert(sizeof(struct hdr) == SG_BENCH_HDR_LEN, "the header is 16 bytes");

/* Buffers of one recvmmsg call. */
struct rxbatch {
    struct mmsghdr msg[BATCH];
    struct iovec iov[BATCH];
    struct sockaddr_in from[BATCH];
    union {
        size_t align; /* as struct cmsghdr, whose flexible member rules it out here */
        unsigned char buf[CTRL_LEN];
    } ctrl[BATCH];
    unsigned char data[BATCH][RX_BUF];
};

/* Buffers of one sendmmsg call: script bytes, or a hello header. */
struct txbatch {
    struct mmsghdr msg[MAX_REPLIES];
    struct iovec iov[MAX_REPLIES];
    unsigned char hdr[MAX_REPLIES][SG_BENCH_HDR_LEN];
    struct sockaddr_in to[MAX_REPLIES];
};

struct client {
    int fd;
    uint16_t id;
    bool connected, open;
    const struct sg_bench_script *sc;
    size_t pos;          /* next client datagram: sc->c2s[pos] */
    size_t pass_s2c;     /* server datagrams received since this pass began (or given up) */
    uint64_t hold_until; /* waiting at the end of the script until then, or 0 */
    uint64_t wait_since; /* waiting for the replies before c2s[pos] since then, or 0 */
    uint32_t drops;      /* the socket's overflow count, last seen */
};

/* NetQuake: the server datagrams held for one session until its client has the accept. */
struct held {
    struct sockaddr_in to;
    uint32_t first, n; /* script indices */
};

struct sink {
    int fd;
    int gfd;        /* NetQuake: the game port's socket (the accept names it), or -1 */
    uint16_t gport; /* its port */
    pthread_t thread;
    bool started;
    atomic_bool stop;
    pthread_mutex_t mu;

    /* Under mu. */
    int error; /* negated errno that ended the thread */
    uint16_t epoch;
    uint64_t c2s_rcvd, s2c_sent, s2c_fail, drops, unknown;
    struct sg_bench_hist hist;
    struct held *held; /* [session], NetQuake with `follow` */

    /* The sink thread's own. */
    uint32_t ovfl;
    int32_t *port_session; /* [source port]: session, or -1 */
    struct rxbatch *rx;
    struct txbatch *tx;
    unsigned ntx;
};

struct sg_bench_load {
    const struct sg_bench_shape *shape;
    unsigned n, rr;
    bool hello, follow;
    struct client *clients;
    int ep;
    bool no_pwait2;
    uint16_t epoch;
    uint64_t drops;       /* overflows of the client sockets, all time */
    uint64_t t0;          /* base of the times in ts */
    _Atomic uint64_t *ts; /* [session * shape->max_len + index]: epoch << 48 | time */
    atomic_int opening;   /* the session being opened, or -1 */
    struct rxbatch *rx;
    struct txbatch *tx;
    struct epoll_event ev[BATCH];
    struct sink sink;
};

/* ---- shared helpers ---- */

static void rx_prepare(struct rxbatch *rb, bool want_name)
{
    for (int i = 0; i < BATCH; i++) {
        struct msghdr *h = &rb->msg[i].msg_hdr;

        rb->iov[i].iov_base = rb->data[i];
        rb->iov[i].iov_len = RX_BUF;
        h->msg_iov = &rb->iov[i];
        h->msg_iovlen = 1;
        h->msg_name = want_name ? &rb->from[i] : NULL;
        h->msg_namelen = want_name ? sizeof(rb->from[i]) : 0;
        h->msg_control = rb->ctrl[i].buf;
        h->msg_controllen = CTRL_LEN;
        h->msg_flags = 0;
        rb->msg[i].msg_len = 0;
    }
}

/* Add the overflows the socket reported since `*last` to `*total`. */
static void note_drops(struct msghdr *h, uint32_t *last, uint64_t *total)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c)) {
        uint32_t v;

        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SO_RXQ_OVFL)
            continue;
        memcpy(&v, CMSG_DATA(c), sizeof(v));
        if (v != *last) {
            *total += (uint32_t)(v - *last);
            *last = v;
        }
    }
}

/* Fill message `j` of `tx` with `len` bytes at `data` (borrowed until sent). */
static void tx_build(struct txbatch *tx, unsigned j, const void *data, size_t len,
                     const struct sockaddr_in *to)
{
    struct msghdr *m = &tx->msg[j].msg_hdr;

    tx->iov[j].iov_base = (void *)(uintptr_t)data;
    tx->iov[j].iov_len = len;
    memset(m, 0, sizeof(*m));
    m->msg_iov = &tx->iov[j];
    m->msg_iovlen = 1;
    if (to) {
        tx->to[j] = *to;
        m->msg_name = &tx->to[j];
        m->msg_namelen = sizeof(*to);
    }
}

/* A time and a step, as kept in `ts`. */
static uint64_t ts_pack(const struct sg_bench_load *l, uint16_t epoch, uint64_t now)
{
    return (uint64_t)epoch << TS_BITS | ((now - l->t0) & TS_MASK);
}

/* The latency of a received datagram whose entry is `e`, if it belongs to step `epoch`. */
static bool ts_match(const struct sg_bench_load *l, uint64_t e, uint16_t epoch, uint64_t now,
                     uint64_t *ns)
{
    uint64_t sent = l->t0 + (e & TS_MASK);

    if (epoch == 0 || (uint16_t)(e >> TS_BITS) != epoch)
        return false;
    *ns = now > sent ? now - sent : 0;
    return true;
}

static _Atomic uint64_t *ts_slot(struct sg_bench_load *l, unsigned session, size_t idx)
{
    return &l->ts[(size_t)session * l->shape->max_len + idx];
}

/* Send `n` messages, counting what went and what the kernel refused.  A
 * refused datagram is skipped, never retried (the next step would see it). */
static void send_all(int fd, struct mmsghdr *msg, unsigned n, uint64_t *sent, uint64_t *fail)
{
    unsigned done = 0;

    for (unsigned tries = 0; done < n && tries < n + 8; tries++) {
        int r = sendmmsg(fd, msg + done, n - done, MSG_DONTWAIT);

        if (r > 0) {
            done += (unsigned)r;
            *sent += (unsigned)r;
        } else if (r < 0 && errno == EINTR) {
            continue;
        } else {
            done++;
            (*fail)++;
        }
    }
    *fail += n - done;
}

static void set_buffers(int fd, int rcv, int snd)
{
    /* Past rmem_max when allowed (CAP_NET_ADMIN), else as far as it goes. */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof(rcv)) < 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &snd, sizeof(snd)) < 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, sizeof(snd));
}

/* `host`: the low 24 bits of a 127.x.y.z address to bind (1: 127.0.0.1). */
static int udp_socket(int flags, int rcvbuf, uint16_t *port, uint32_t host)
{
    struct sockaddr_in sin = {.sin_family = AF_INET};
    socklen_t len = sizeof(sin);
    int one = 1, fd, err;

    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | flags, 0);
    if (fd < 0)
        return -errno;
    set_buffers(fd, rcvbuf, 1 << 20);
    setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one));
    sin.sin_addr.s_addr = htonl(0x7f000000u | (host & 0xffffffu));
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
        getsockname(fd, (struct sockaddr *)&sin, &len) < 0) {
        err = -errno;
        close(fd);
        return err;
    }
    if (port)
        *port = ntohs(sin.sin_port);
    return fd;
}

/* ---- the sink ---- */

static void sink_flush(struct sg_bench_load *l, int fd)
{
    struct sink *k = &l->sink;

    if (k->ntx)
        send_all(fd, k->tx->msg, k->ntx, &k->s2c_sent, &k->s2c_fail);
    k->ntx = 0;
}

/* The session of a client datagram from `port`, or -1. */
static int sink_session(struct sg_bench_load *l, uint16_t port)
{
    struct sink *k = &l->sink;
    int s = k->port_session[port];

    if (s < 0 && !l->hello) {
        s = atomic_load(&l->opening);
        if (s >= 0)
            k->port_session[port] = s;
    }
    return s;
}

/* Answer one received batch (under mu), from `fd`, where it came. */
static void sink_answer(struct sg_bench_load *l, int fd, int r, uint64_t now)
{
    struct sink *k = &l->sink;

    for (int i = 0; i < r; i++) {
        struct mmsghdr *m = &k->rx->msg[i];
        const uint8_t *data = k->rx->data[i];
        uint16_t port = ntohs(k->rx->from[i].sin_port);
        const struct sg_bench_script *sc;
        const struct sg_bench_dgram *d;
        uint64_t ns;
        long idx;
        int s;

        note_drops(&m->msg_hdr, &k->ovfl, &k->drops);

        /* The bench's hello: learn the port, answer it. */
        if (m->msg_len == SG_BENCH_HDR_LEN) {
            struct hdr h;

            memcpy(&h, data, sizeof(h));
            if (h.magic == MAGIC && h.kind == KIND_HELLO && h.session < l->n) {
                k->port_session[port] = h.session;
                h.kind = KIND_HELLO_ACK;
                if (k->ntx == MAX_REPLIES)
                    sink_flush(l, fd);
                memcpy(k->tx->hdr[k->ntx], &h, sizeof(h));
                tx_build(k->tx, k->ntx, k->tx->hdr[k->ntx], sizeof(h), &k->rx->from[i]);
                k->ntx++;
                continue;
            }
        }

        /* A client datagram of a script: count it, answer with what follows it. */
        s = sink_session(l, port);
        if (s < 0 || (unsigned)s >= l->n) {
            k->unknown++;
            continue;
        }
        sc = l->clients[s].sc;
        idx = sg_bench_script_find(sc, false, data, m->msg_len);
        if (idx < 0) {
            k->unknown++;
            continue;
        }
        if (ts_match(
                l, atomic_load_explicit(ts_slot(l, (unsigned)s, (size_t)idx), memory_order_relaxed),
                k->epoch, now, &ns)) {
            k->c2s_rcvd++;
            sg_bench_hist_add(&k->hist, ns);
        }
        d = &sc->d[idx];
        for (uint32_t j = 0, held = 0; j < d->nreplies; j++) {
            const struct sg_bench_dgram *rep = &sc->d[d->next + j];

            /* NetQuake, a relay that follows the accept: the new port's datagrams
             * wait (a connect sent again replaces what the last one held). */
            if (k->held && rep->moved && fd == k->fd) {
                if (held++ == 0)
                    k->held[s] = (struct held){k->rx->from[i], d->next + j, 0};
                k->held[s].n++;
                continue;
            }
            if (k->ntx == MAX_REPLIES)
                sink_flush(l, fd);
            atomic_store_explicit(ts_slot(l, (unsigned)s, d->next + j),
                                  ts_pack(l, k->epoch, sg_bench_now_ns()), memory_order_relaxed);
            if (rep->port_at && k->gfd >= 0 && rep->port_at + 4u <= rep->len &&
                rep->len <= SG_BENCH_HDR_LEN) {
                /* the accept names the game port */
                uint8_t *copy = k->tx->hdr[k->ntx];

                memcpy(copy, rep->data, rep->len);
                copy[rep->port_at] = (uint8_t)k->gport;
                copy[rep->port_at + 1] = (uint8_t)(k->gport >> 8);
                copy[rep->port_at + 2] = copy[rep->port_at + 3] = 0;
                tx_build(k->tx, k->ntx++, copy, rep->len, &k->rx->from[i]);
            } else {
                tx_build(k->tx, k->ntx++, rep->data, rep->len, &k->rx->from[i]);
            }
        }
    }
    sink_flush(l, fd);
}

/* NetQuake: session `s`'s client has the accept, so the relay has moved to
 * the game port: send what the sink held (generator's thread). */
static void sink_release(struct sg_bench_load *l, unsigned s)
{
    struct sink *k = &l->sink;
    struct held *h;
    unsigned n = 0;

    pthread_mutex_lock(&k->mu);
    h = &k->held[s];
    for (uint32_t j = 0; j < h->n && n < MAX_REPLIES; j++) {
        const struct sg_bench_dgram *rep = &l->clients[s].sc->d[h->first + j];

        atomic_store_explicit(ts_slot(l, s, h->first + j), ts_pack(l, k->epoch, sg_bench_now_ns()),
                              memory_order_relaxed);
        tx_build(l->tx, n++, rep->data, rep->len, &h->to);
    }
    if (n)
        send_all(k->gfd, l->tx->msg, n, &k->s2c_sent, &k->s2c_fail);
    h->n = 0;
    pthread_mutex_unlock(&k->mu);
}

/* Read and answer what `fd` holds, without waiting; false when the thread must end. */
static bool sink_drain_fd(struct sg_bench_load *l, int fd)
{
    struct sink *k = &l->sink;

    for (int round = 0; round < 16; round++) {
        int r;

        rx_prepare(k->rx, true);
        r = recvmmsg(fd, k->rx->msg, BATCH, MSG_DONTWAIT, NULL);
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return true;
            pthread_mutex_lock(&k->mu);
            k->error = -errno;
            pthread_mutex_unlock(&k->mu);
            return false;
        }
        pthread_mutex_lock(&k->mu);
        sink_answer(l, fd, r, sg_bench_now_ns());
        pthread_mutex_unlock(&k->mu);
        if (r < BATCH)
            return true;
    }
    return true;
}

static void *sink_main(void *arg)
{
    struct sg_bench_load *l = arg;
    struct sink *k = &l->sink;

    /* NetQuake: two sockets, the control port and the game port. */
    while (k->gfd >= 0 && !atomic_load(&k->stop)) {
        struct pollfd pfd[2] = {{k->fd, POLLIN, 0}, {k->gfd, POLLIN, 0}};
        int n = poll(pfd, 2, SINK_TIMEOUT_US / 1000);

        if (n < 0 && errno != EINTR) {
            pthread_mutex_lock(&k->mu);
            k->error = -errno;
            pthread_mutex_unlock(&k->mu);
            break;
        }
        if (n > 0 && (((pfd[1].revents & POLLIN) && !sink_drain_fd(l, k->gfd)) ||
                      ((pfd[0].revents & POLLIN) && !sink_drain_fd(l, k->fd))))
            break;
    }
    while (k->gfd < 0 && !atomic_load(&k->stop)) {
        int r;

        rx_prepare(k->rx, true);
        r = recvmmsg(k->fd, k->rx->msg, BATCH, MSG_WAITFORONE, NULL);
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                continue; /* the receive timeout: look at `stop` again */
            pthread_mutex_lock(&k->mu);
            k->error = -errno;
            pthread_mutex_unlock(&k->mu);
            break;
        }
        pthread_mutex_lock(&k->mu);
        sink_answer(l, k->fd, r, sg_bench_now_ns());
        pthread_mutex_unlock(&k->mu);
    }
    return NULL;
}

/* ---- the generator ---- */

/* Read what one client socket holds; the first answer opens the session. */
static int client_recv(struct sg_bench_load *l, struct client *c, struct sg_bench_step *st)
{
    for (int round = 0; round < 4; round++) {
        uint64_t now;
        int r;

        rx_prepare(l->rx, false);
        r = recvmmsg(c->fd, l->rx->msg, BATCH, MSG_DONTWAIT, NULL);
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return 0;
            if (errno == ECONNREFUSED) /* an ICMP error from before the relay was up */
                continue;
            return -errno;
        }
        now = sg_bench_now_ns();
        for (int i = 0; i < r; i++) {
            const uint8_t *data = l->rx->data[i];
            size_t len = l->rx->msg[i].msg_len;
            uint64_t ns;
            long idx;

            note_drops(&l->rx->msg[i].msg_hdr, &c->drops, &l->drops);
            if (len == SG_BENCH_HDR_LEN && l->hello) {
                struct hdr h;

                memcpy(&h, data, sizeof(h));
                if (h.magic == MAGIC && h.kind == KIND_HELLO_ACK && h.session == c->id) {
                    c->open = true;
                    continue;
                }
            }
            idx = sg_bench_script_find(c->sc, true, data, len);
            if (idx < 0) {
                st->unknown++;
                continue;
            }
            if (!l->hello)
                c->open = true;
            c->pass_s2c++;
            if (c->sc->d[idx].port_at && l->sink.held)
                sink_release(l, c->id);
            if (ts_match(l,
                         atomic_load_explicit(ts_slot(l, c->id, (size_t)idx), memory_order_relaxed),
                         l->epoch, now, &ns)) {
                st->s2c_rcvd++;
                sg_bench_hist_add(&st->hist, ns);
            }
        }
        if (r < BATCH)
            return 0;
    }
    return 0;
}

/* Wait up to `wait_ns` for replies and read them. */
static int client_poll(struct sg_bench_load *l, uint64_t wait_ns, struct sg_bench_step *st)
{
    struct timespec ts = {(time_t)(wait_ns / 1000000000u), (long)(wait_ns % 1000000000u)};
    int n = -1;

    if (!l->no_pwait2) {
        n = epoll_pwait2(l->ep, l->ev, BATCH, &ts, NULL);
        if (n < 0 && errno == ENOSYS)
            l->no_pwait2 = true; /* before Linux 5.11: millisecond sleeps */
    }
    if (l->no_pwait2)
        n = epoll_wait(l->ep, l->ev, BATCH, (int)((wait_ns + 999999) / 1000000));
    if (n < 0)
        return errno == EINTR ? 0 : -errno;
    for (int i = 0; i < n; i++) {
        int err = client_recv(l, &l->clients[l->ev[i].data.u32], st);

        if (err < 0)
            return err;
    }
    return 0;
}

/* May session `c` send now?  Not before the server datagrams that precede
 * its next client datagram have come (or HOLD_NS passed: they were lost).
 * At the end of its script it waits likewise for the rest, then starts
 * again. */
static bool client_ready(struct client *c, uint64_t now, struct sg_bench_step *st)
{
    size_t need = c->hold_until ? c->sc->n_s2c : c->sc->d[c->sc->c2s[c->pos]].after;

    if (c->pass_s2c < need) {
        if (c->wait_since == 0)
            c->wait_since = now;
        if (now - c->wait_since < HOLD_NS)
            return false;
        st->forgiven += need - c->pass_s2c;
        c->pass_s2c = need;
    }
    c->wait_since = 0;
    if (c->hold_until) {
        c->hold_until = 0;
        c->pass_s2c = 0;
        c->pos = 0;
        st->held++;
    }
    return true;
}

/* Send up to `count` client datagrams, a few per session, round-robin;
 * returns how many went out or were refused (not those held back). */
static unsigned client_send(struct sg_bench_load *l, unsigned count, struct sg_bench_step *st)
{
    unsigned per = (count + l->n - 1) / l->n, done = 0, idle = 0;

    if (per > SEND_PER_SESSION)
        per = SEND_PER_SESSION;
    while (done < count && idle < l->n) {
        struct client *c = &l->clients[l->rr];
        unsigned k = count - done < per ? count - done : per, j;
        uint64_t now = sg_bench_now_ns();

        l->rr = (l->rr + 1) % l->n;
        if (!client_ready(c, now, st)) {
            idle++;
            continue;
        }
        for (j = 0; j < k && c->hold_until == 0; j++) {
            uint32_t idx = c->sc->c2s[c->pos];
            const struct sg_bench_dgram *d = &c->sc->d[idx];

            if (c->pass_s2c < d->after)
                break; /* its replies first */
            atomic_store_explicit(ts_slot(l, c->id, idx), ts_pack(l, l->epoch, now),
                                  memory_order_relaxed);
            tx_build(l->tx, j, d->data, d->len, NULL);
            if (++c->pos == c->sc->n_c2s)
                c->hold_until = now + HOLD_NS;
        }
        idle = j ? 0 : idle + 1;
        if (j)
            send_all(c->fd, l->tx->msg, j, &st->c2s_sent, &st->send_fail);
        done += j;
    }
    return done;
}

/* ---- public ---- */

int sg_bench_load_create(const struct sg_bench_shape *shape, unsigned sessions, bool hello,
                         bool follow, struct sg_bench_load **out)
{
    struct timeval tv = {0, SINK_TIMEOUT_US};
    struct sg_bench_load *l;
    sigset_t all, old;
    int rcvbuf, err;

    if (sessions == 0 || sessions > SG_BENCH_MAX_SESSIONS || !shape->nscripts || !shape->max_len)
        return -EINVAL;
    l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->shape = shape;
    l->n = sessions;
    l->hello = hello;
    l->follow = follow;
    l->t0 = sg_bench_now_ns();
    atomic_init(&l->opening, -1);
    l->ep = -1;
    l->sink.fd = l->sink.gfd = -1;
    pthread_mutex_init(&l->sink.mu, NULL);
    l->clients = calloc(sessions, sizeof(*l->clients));
    l->rx = calloc(1, sizeof(*l->rx));
    l->tx = calloc(1, sizeof(*l->tx));
    l->sink.rx = calloc(1, sizeof(*l->sink.rx));
    l->sink.tx = calloc(1, sizeof(*l->sink.tx));
    l->sink.port_session = malloc(65536 * sizeof(*l->sink.port_session));
    l->ts = calloc((size_t)sessions * shape->max_len, sizeof(*l->ts));
    if (!l->clients || !l->rx || !l->tx || !l->sink.rx || !l->sink.tx || !l->sink.port_session ||
        !l->ts) {
        err = -ENOMEM;
        goto err;
    }
    for (unsigned i = 0; i < sessions; i++)
        l->clients[i].fd = -1;
    for (unsigned i = 0; i < 65536; i++)
        l->sink.port_session[i] = -1;

    /* The sink: blocking, with a receive timeout so that it can be stopped. */
    l->sink.fd = udp_socket(0, SINK_RCVBUF, NULL, 1);
    if (l->sink.fd < 0) {
        err = l->sink.fd;
        goto err;
    }
    setsockopt(l->sink.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

    /* NetQuake: the game port, where the accept moves the sessions. */
    if (shape->scripts[0].nq) {
        l->sink.gfd = udp_socket(0, SINK_RCVBUF, &l->sink.gport, 1);
        if (l->sink.gfd < 0) {
            err = l->sink.gfd;
            goto err;
        }
        if (follow && !(l->sink.held = calloc(sessions, sizeof(*l->sink.held)))) {
            err = -ENOMEM;
            goto err;
        }
    }

    /* The clients, each its own session. */
    l->ep = epoll_create1(EPOLL_CLOEXEC);
    if (l->ep < 0) {
        err = -errno;
        goto err;
    }
    rcvbuf = (32 << 20) / (int)sessions;
    rcvbuf = rcvbuf > (1 << 20) ? 1 << 20 : rcvbuf < (64 << 10) ? 64 << 10 : rcvbuf;
    for (unsigned i = 0; i < sessions; i++) {
        struct client *c = &l->clients[i];
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};

        /* Each client from a loopback address of its own (127.0.0.2, ...), as
         * players come from hosts of their own: slipgate's worker loops share
         * the clients by source address. */
        c->fd = udp_socket(SOCK_NONBLOCK, rcvbuf, NULL, 2 + i);
        if (c->fd < 0) {
            err = c->fd;
            goto err;
        }
        c->id = (uint16_t)i;
        c->sc = &shape->scripts[i % shape->nscripts];
        if (epoll_ctl(l->ep, EPOLL_CTL_ADD, c->fd, &ev) < 0) {
            err = -errno;
            goto err;
        }
    }

    /* Sleep between slots to the nanosecond, not the default 50 us. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);

    /* The sink thread takes no signal: they all come to this thread. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    err = -pthread_create(&l->sink.thread, NULL, sink_main, l);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err < 0)
        goto err;
    l->sink.started = true;
    *out = l;
    return 0;

err:
    sg_bench_load_destroy(l);
    return err;
}

uint16_t sg_bench_load_sink_port(const struct sg_bench_load *l)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);

    if (getsockname(l->sink.fd, (struct sockaddr *)&sin, &len) < 0)
        return 0;
    return ntohs(sin.sin_port);
}

int sg_bench_load_open(struct sg_bench_load *l, uint16_t port, unsigned count, double timeout_s,
                       unsigned *open)
{
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(port)};
    uint64_t deadline = sg_bench_now_ns() + (uint64_t)(timeout_s * 1e9);
    struct sg_bench_step *scratch;
    unsigned nopen = 0;
    int err = 0;

    scratch = calloc(1, sizeof(*scratch));
    if (!scratch)
        return -ENOMEM;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (count > l->n)
        count = l->n;
    for (unsigned i = 0; i < count; i++) {
        if (l->clients[i].connected)
            continue;
        if (connect(l->clients[i].fd, (struct sockaddr *)&to, sizeof(to)) < 0) {
            err = -errno;
            goto out;
        }
        l->clients[i].connected = true;
    }

    /* One session after the other (the sink learns its port meanwhile): the
     * hello, or the script's first datagram (getchallenge), every 100 ms
     * until the answer. */
    for (unsigned i = 0; i < count; i++) {
        struct client *c = &l->clients[i];

        if (c->open) {
            nopen++;
            continue;
        }
        atomic_store(&l->opening, (int)i);
        for (int attempt = 0; attempt < 100 && !c->open; attempt++) {
            const struct sg_bench_dgram *d = &c->sc->d[c->sc->c2s[0]];
            struct hdr h = {MAGIC, 0, c->id, KIND_HELLO, sg_bench_now_ns()};
            uint64_t until = sg_bench_now_ns() + 100000000u;
            ssize_t r;

            if (sg_bench_now_ns() >= deadline)
                break;
            r = l->hello ? send(c->fd, &h, sizeof(h), MSG_DONTWAIT)
                         : send(c->fd, d->data, d->len, MSG_DONTWAIT);
            if (r < 0 && errno != EAGAIN && errno != ECONNREFUSED && errno != EINTR) {
                err = -errno;
                goto out;
            }
            for (int w = 0; w < 100 && !c->open && sg_bench_now_ns() < until; w++)
                if ((err = client_poll(l, 5000000u, scratch)) < 0)
                    goto out;
        }
        if (!c->open) {
            err = -ETIMEDOUT;
            goto out;
        }
        /* The script goes on after what opened it. */
        c->pos = l->hello ? 0 : 1;
        nopen++;
    }
out:
    atomic_store(&l->opening, -1);
    if (open)
        *open = nopen;
    free(scratch);
    return err;
}

/* Keep reading replies until every datagram of the step is accounted for,
 * or nothing moved for DRAIN_QUIET_NS (a relay descheduled by other work
 * still holds datagrams), or DRAIN_MAX_NS passed. */
static int drain(struct sg_bench_load *l, struct sg_bench_step *st)
{
    uint64_t start = sg_bench_now_ns(), moved = start, last = UINT64_MAX;

    for (int i = 0; i < 100000; i++) {
        uint64_t c2s_rcvd, s2c_sent, now;
        int err = client_poll(l, 2000000u, st);

        if (err < 0)
            return err;
        pthread_mutex_lock(&l->sink.mu);
        c2s_rcvd = l->sink.c2s_rcvd;
        s2c_sent = l->sink.s2c_sent;
        pthread_mutex_unlock(&l->sink.mu);
        if (c2s_rcvd >= st->c2s_sent && st->s2c_rcvd >= s2c_sent)
            return 0;
        now = sg_bench_now_ns();
        if (c2s_rcvd + s2c_sent + st->s2c_rcvd != last) {
            last = c2s_rcvd + s2c_sent + st->s2c_rcvd;
            moved = now;
        }
        if (now - moved > DRAIN_QUIET_NS || now - start > DRAIN_MAX_NS)
            return 0;
    }
    return 0;
}

int sg_bench_load_step(struct sg_bench_load *l, struct sg_bench_step *st)
{
    double c2s_pps = st->target_pps / (1.0 + l->shape->s2c_per_c2s);
    uint64_t t0, t_end, now, slots = 0, backlog, drops0, sink_drops0, scheduled;
    uint64_t max_iters = (uint64_t)(st->seconds * 2e7) + 1000;
    double target = st->target_pps, seconds = st->seconds;
    int err = 0;

    if (!(c2s_pps > 0) || !(seconds > 0))
        return -EINVAL;
    memset(st, 0, sizeof(*st));
    st->target_pps = target;
    st->seconds = seconds;

    /* A new epoch: the sink counts afresh, late datagrams of the last step are ignored. */
    l->epoch = (uint16_t)(l->epoch + 1);
    if (l->epoch == 0)
        l->epoch = 1; /* 0 is for hellos */
    pthread_mutex_lock(&l->sink.mu);
    err = l->sink.error;
    l->sink.epoch = l->epoch;
    l->sink.c2s_rcvd = l->sink.s2c_sent = l->sink.s2c_fail = l->sink.unknown = 0;
    sg_bench_hist_reset(&l->sink.hist);
    sink_drops0 = l->sink.drops;
    pthread_mutex_unlock(&l->sink.mu);
    if (err < 0)
        return err;
    drops0 = l->drops;

    /* Send on schedule, reading replies between slots. */
    backlog = (uint64_t)(c2s_pps * (double)BEHIND_NS / 1e9) + BATCH;
    t0 = now = sg_bench_now_ns();
    t_end = t0 + (uint64_t)(seconds * 1e9);
    for (uint64_t it = 0; it < max_iters && err == 0; it++) {
        uint64_t due, next;
        unsigned sent = 0;

        now = sg_bench_now_ns();
        if (now >= t_end)
            break;
        due = (uint64_t)((double)(now - t0) * c2s_pps / 1e9) + 1;
        if (due > slots) {
            uint64_t owed = due - slots;

            if (owed > backlog) {
                st->skipped += owed - backlog;
                slots += owed - backlog;
                owed = backlog;
            }
            if (owed > SEND_CAP)
                owed = SEND_CAP;
            if (owed > st->max_burst)
                st->max_burst = owed;
            sent = client_send(l, (unsigned)owed, st);
            slots += sent;
        }
        next = t0 + (uint64_t)((double)slots * 1e9 / c2s_pps);
        now = sg_bench_now_ns();
        if (sent == 0 && due > slots) {
            next = now + STALL_NS; /* every session waits for replies */
            st->waited++;
        }
        next = next < t_end ? next : t_end;
        err = client_poll(l, next > now ? next - now : 0, st);
    }
    st->elapsed = (double)(now - t0) / 1e9;
    scheduled = (uint64_t)((double)(now - t0) * c2s_pps / 1e9);
    scheduled = scheduled > slots ? scheduled : slots;
    if (err == 0)
        err = drain(l, st);
    if (err < 0)
        return err;

    /* Read the sink's side of the step. */
    pthread_mutex_lock(&l->sink.mu);
    st->c2s_rcvd = l->sink.c2s_rcvd;
    st->s2c_sent = l->sink.s2c_sent;
    st->send_fail += l->sink.s2c_fail;
    st->harness_drops = l->sink.drops - sink_drops0;
    st->unknown += l->sink.unknown;
    sg_bench_hist_merge(&st->hist, &l->sink.hist);
    err = l->sink.error;
    pthread_mutex_unlock(&l->sink.mu);
    st->harness_drops += l->drops - drops0;

    /* Rates and loss over both directions. */
    {
        uint64_t sent = st->c2s_sent + st->s2c_sent, rcvd = st->c2s_rcvd + st->s2c_rcvd;
        double el = st->elapsed > 0 ? st->elapsed : 1e-9;

        st->offered_pps = (double)sent / el;
        st->delivered_pps = (double)rcvd / el;
        st->loss = sent > rcvd ? (double)(sent - rcvd) / (double)sent : 0.0;
        st->gen_ratio = scheduled ? (double)st->c2s_sent / (double)scheduled : 0.0;
    }
    return err;
}

void sg_bench_load_destroy(struct sg_bench_load *l)
{
    if (!l)
        return;
    if (l->sink.started) {
        atomic_store(&l->sink.stop, true);
        pthread_join(l->sink.thread, NULL);
    }
    if (l->sink.fd >= 0)
        close(l->sink.fd);
    if (l->sink.gfd >= 0)
        close(l->sink.gfd);
    free(l->sink.held);
    for (unsigned i = 0; l->clients && i < l->n; i++)
        if (l->clients[i].fd >= 0)
            close(l->clients[i].fd);
    if (l->ep >= 0)
        close(l->ep);
    pthread_mutex_destroy(&l->sink.mu);
    free(l->sink.rx);
    free(l->sink.tx);
    free(l->sink.port_session);
    free(l->ts);
    free(l->rx);
    free(l->tx);
    free(l->clients);
    free(l);
}
