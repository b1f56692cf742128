/*
 * The load generator (client side, on the calling thread) and the sink (a
 * game-server stand-in, on a thread of its own).
 *
 * Generator: N client sockets, each connected to the relay (or straight to
 * the sink), so each one is a session.  Datagrams are paced to the step's
 * rate (epoll_pwait2 with a 1 ns timer slack between slots) and sent with
 * sendmmsg, spread round-robin over the sessions; a generator that falls
 * more than 2 ms behind skips slots rather than bursting, and says so.
 * Replies are read with recvmmsg on whichever sockets epoll reports.
 *
 * Sink: one socket; recvmmsg, then for every client datagram of the current
 * step, s2c_per_c2s server-shaped replies on average (sizes in capture
 * order), stamped just before one sendmmsg to the senders' addresses.
 *
 * Latency is one-way and per datagram: the sink measures client->server
 * datagrams, the generator server->client ones; both ends share
 * CLOCK_MONOTONIC.  Loss is counted per step (epoch), after a drain.  The
 * harness's own socket overflows are counted apart (SO_RXQ_OVFL), so a
 * harness that cannot keep up is not blamed on the relay.
 *
 * Threading: the sink's counters and histogram are under `mu`, which the
 * sink holds while it handles one received batch (replies included) and
 * the generator takes only to start a step and to read the counters.
 */
#include "tests/bench/bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
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
#define MAX_REPLIES      (BATCH * 9) /* replies to one batch: ratio <= 8, plus hellos */
#define RX_BUF           2048
#define CTRL_LEN         CMSG_SPACE(sizeof(uint32_t))
#define SINK_RCVBUF      (8 << 20)
#define SINK_TIMEOUT_US  20000      /* the sink checks for stop this often */
#define BEHIND_NS        2000000ull /* at most this much catching up, in one burst */
#define DRAIN_QUIET_NS   200000000ull
#define DRAIN_MAX_NS     2000000000ull

struct hdr {
    uint16_t magic, epoch, session, kind;
    uint64_t ts;
};

_Static_assert(sizeof(struct hdr) == SG_BENCH_HDR_LEN, "the header is 16 bytes");

static const unsigned char zeros[SG_BENCH_MAX_PAYLOAD];

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

/* Buffers of one sendmmsg call: a header each, padding from `zeros`. */
struct txbatch {
    struct mmsghdr msg[MAX_REPLIES];
    struct iovec iov[MAX_REPLIES][2];
    unsigned char hdr[MAX_REPLIES][SG_BENCH_HDR_LEN];
};

struct client {
    int fd;
    uint16_t id;
    bool connected, open;
    size_t cursor;  /* next size in shape->c2s */
    uint32_t drops; /* the socket's overflow count, last seen */
};

struct reply {
    int src; /* the received datagram answered */
    uint16_t kind, epoch, session, size;
};

struct sink {
    int fd;
    pthread_t thread;
    bool started;
    atomic_bool stop;
    pthread_mutex_t mu;

    /* Under mu. */
    int error; /* negated errno that ended the thread */
    uint16_t epoch;
    uint64_t c2s_rcvd, s2c_sent, s2c_fail, drops;
    struct sg_bench_hist hist;

    /* The sink thread's own. */
    uint32_t ovfl;
    size_t cursor; /* next size in shape->s2c */
    double credit; /* replies owed */
    struct rxbatch *rx;
    struct txbatch *tx;
    struct reply rep[MAX_REPLIES];
};

struct sg_bench_load {
    const struct sg_bench_shape *shape;
    unsigned n, rr;
    struct client *clients;
    int ep;
    bool no_pwait2;
    uint16_t epoch;
    uint64_t drops; /* overflows of the client sockets, all time */
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

/* Fill message `j` of `tx`: header, then zeros up to `size`. */
static void tx_build(struct txbatch *tx, unsigned j, const struct hdr *h, unsigned size,
                     struct sockaddr_in *to)
{
    struct msghdr *m = &tx->msg[j].msg_hdr;

    memcpy(tx->hdr[j], h, SG_BENCH_HDR_LEN);
    tx->iov[j][0].iov_base = tx->hdr[j];
    tx->iov[j][0].iov_len = SG_BENCH_HDR_LEN;
    tx->iov[j][1].iov_base = (void *)(uintptr_t)zeros;
    tx->iov[j][1].iov_len = size > SG_BENCH_HDR_LEN ? size - SG_BENCH_HDR_LEN : 0;
    memset(m, 0, sizeof(*m));
    m->msg_iov = tx->iov[j];
    m->msg_iovlen = size > SG_BENCH_HDR_LEN ? 2 : 1;
    m->msg_name = to;
    m->msg_namelen = to ? sizeof(*to) : 0;
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

static int udp_socket(int flags, int rcvbuf, uint16_t *port)
{
    struct sockaddr_in sin = {.sin_family = AF_INET};
    socklen_t len = sizeof(sin);
    int one = 1, fd, err;

    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | flags, 0);
    if (fd < 0)
        return -errno;
    set_buffers(fd, rcvbuf, 1 << 20);
    setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one));
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
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

/* Answer one received batch (under mu). */
static void sink_answer(struct sg_bench_load *l, int r, uint64_t now)
{
    struct sink *k = &l->sink;
    const struct sg_bench_shape *sh = l->shape;
    unsigned nrep = 0;
    uint64_t ts;

    /* Count, measure, and decide the replies. */
    for (int i = 0; i < r; i++) {
        struct mmsghdr *m = &k->rx->msg[i];
        struct hdr h;

        note_drops(&m->msg_hdr, &k->ovfl, &k->drops);
        if (m->msg_len < SG_BENCH_HDR_LEN)
            continue;
        memcpy(&h, k->rx->data[i], sizeof(h));
        if (h.magic != MAGIC)
            continue;
        if (h.kind == KIND_HELLO) {
            if (nrep < MAX_REPLIES)
                k->rep[nrep++] = (struct reply){i, KIND_HELLO_ACK, 0, h.session, SG_BENCH_HDR_LEN};
            continue;
        }
        if (h.kind != KIND_C2S || h.epoch != k->epoch)
            continue;
        k->c2s_rcvd++;
        sg_bench_hist_add(&k->hist, now > h.ts ? now - h.ts : 0);
        k->credit += sh->s2c_per_c2s;
        while (k->credit >= 1.0 && nrep < MAX_REPLIES) {
            uint16_t size = sh->s2c[k->cursor];

            k->cursor = (k->cursor + 1) % sh->n_s2c;
            k->rep[nrep++] = (struct reply){i, KIND_S2C, h.epoch, h.session, size};
            k->credit -= 1.0;
        }
    }
    if (nrep == 0)
        return;

    /* Stamp and send them all at once. */
    ts = sg_bench_now_ns();
    for (unsigned j = 0; j < nrep; j++) {
        const struct reply *p = &k->rep[j];
        struct hdr h = {MAGIC, p->epoch, p->session, p->kind, ts};

        tx_build(k->tx, j, &h, p->size, &k->rx->from[p->src]);
    }
    send_all(k->fd, k->tx->msg, nrep, &k->s2c_sent, &k->s2c_fail);
}

static void *sink_main(void *arg)
{
    struct sg_bench_load *l = arg;
    struct sink *k = &l->sink;

    while (!atomic_load(&k->stop)) {
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
        sink_answer(l, r, sg_bench_now_ns());
        pthread_mutex_unlock(&k->mu);
    }
    return NULL;
}

/* ---- the generator ---- */

/* Read what one client socket holds; hello answers open the session. */
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
            struct hdr h;

            note_drops(&l->rx->msg[i].msg_hdr, &c->drops, &l->drops);
            if (l->rx->msg[i].msg_len < SG_BENCH_HDR_LEN)
                continue;
            memcpy(&h, l->rx->data[i], sizeof(h));
            if (h.magic != MAGIC || h.session != c->id)
                continue;
            if (h.kind == KIND_HELLO_ACK) {
                c->open = true;
            } else if (h.kind == KIND_S2C && h.epoch == l->epoch) {
                st->s2c_rcvd++;
                sg_bench_hist_add(&st->hist, now > h.ts ? now - h.ts : 0);
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

/* Send `count` client datagrams, a few per session, round-robin. */
static void client_send(struct sg_bench_load *l, unsigned count, struct sg_bench_step *st)
{
    const struct sg_bench_shape *sh = l->shape;
    unsigned per = (count + l->n - 1) / l->n;

    if (per > SEND_PER_SESSION)
        per = SEND_PER_SESSION;
    while (count > 0) {
        struct client *c = &l->clients[l->rr];
        unsigned k = count < per ? count : per;
        uint64_t ts = sg_bench_now_ns();

        l->rr = (l->rr + 1) % l->n;
        for (unsigned j = 0; j < k; j++) {
            struct hdr h = {MAGIC, l->epoch, c->id, KIND_C2S, ts};

            tx_build(l->tx, j, &h, sh->c2s[c->cursor], NULL);
            c->cursor = (c->cursor + 1) % sh->n_c2s;
        }
        send_all(c->fd, l->tx->msg, k, &st->c2s_sent, &st->send_fail);
        count -= k;
    }
}

/* ---- public ---- */

int sg_bench_load_create(const struct sg_bench_shape *shape, unsigned sessions,
                         struct sg_bench_load **out)
{
    struct timeval tv = {0, SINK_TIMEOUT_US};
    struct sg_bench_load *l;
    sigset_t all, old;
    int rcvbuf, err;

    if (sessions == 0 || sessions > SG_BENCH_MAX_SESSIONS || !shape->n_c2s || !shape->n_s2c)
        return -EINVAL;
    l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->shape = shape;
    l->n = sessions;
    l->ep = -1;
    l->sink.fd = -1;
    pthread_mutex_init(&l->sink.mu, NULL);
    l->clients = calloc(sessions, sizeof(*l->clients));
    l->rx = calloc(1, sizeof(*l->rx));
    l->tx = calloc(1, sizeof(*l->tx));
    l->sink.rx = calloc(1, sizeof(*l->sink.rx));
    l->sink.tx = calloc(1, sizeof(*l->sink.tx));
    if (!l->clients || !l->rx || !l->tx || !l->sink.rx || !l->sink.tx) {
        err = -ENOMEM;
        goto err;
    }
    for (unsigned i = 0; i < sessions; i++)
        l->clients[i].fd = -1;

    /* The sink: blocking, with a receive timeout so that it can be stopped. */
    l->sink.fd = udp_socket(0, SINK_RCVBUF, NULL);
    if (l->sink.fd < 0) {
        err = l->sink.fd;
        goto err;
    }
    setsockopt(l->sink.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

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

        c->fd = udp_socket(SOCK_NONBLOCK, rcvbuf, NULL);
        if (c->fd < 0) {
            err = c->fd;
            goto err;
        }
        c->id = (uint16_t)i;
        c->cursor = (size_t)((uint64_t)i * shape->n_c2s / sessions);
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

    /* Hello from every session not yet answered, every 100 ms. */
    for (int attempt = 0; attempt < 100 && sg_bench_now_ns() < deadline; attempt++) {
        uint64_t until = sg_bench_now_ns() + 100000000u;

        for (unsigned i = 0; i < count; i++) {
            struct hdr h = {MAGIC, 0, l->clients[i].id, KIND_HELLO, sg_bench_now_ns()};

            if (!l->clients[i].open && send(l->clients[i].fd, &h, sizeof(h), MSG_DONTWAIT) < 0 &&
                errno != EAGAIN && errno != ECONNREFUSED && errno != EINTR) {
                err = -errno;
                goto out;
            }
        }
        for (int w = 0; w < 100 && sg_bench_now_ns() < until; w++) {
            if ((err = client_poll(l, 5000000u, scratch)) < 0)
                goto out;
            nopen = 0;
            for (unsigned i = 0; i < count; i++)
                nopen += l->clients[i].open;
            if (nopen == count)
                goto out;
        }
    }
    err = -ETIMEDOUT;
out:
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
    l->sink.c2s_rcvd = l->sink.s2c_sent = l->sink.s2c_fail = 0;
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
            client_send(l, (unsigned)owed, st);
            slots += owed;
        }
        next = t0 + (uint64_t)((double)slots * 1e9 / c2s_pps);
        now = sg_bench_now_ns();
        next = next < t_end ? next : t_end;
        err = client_poll(l, next > now ? next - now : 0, st);
    }
    st->elapsed = (double)(now - t0) / 1e9;
    scheduled = slots;
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
    for (unsigned i = 0; l->clients && i < l->n; i++)
        if (l->clients[i].fd >= 0)
            close(l->clients[i].fd);
    if (l->ep >= 0)
        close(l->ep);
    pthread_mutex_destroy(&l->sink.mu);
    free(l->sink.rx);
    free(l->sink.tx);
    free(l->rx);
    free(l->tx);
    free(l->clients);
    free(l);
}
