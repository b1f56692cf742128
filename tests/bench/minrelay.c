/*
 * minrelay: the floor slipgate is measured against.
 *
 *   client --> listening socket --> session's upstream socket (connected) --> server
 *   client <-- listening socket <-- session's upstream socket             <-- server
 *
 * The same model as slipgate's pass-through relay: one listening socket,
 * one upstream socket per client address, so the server sees one source port
 * per client.  Nothing else: no timeouts, limits, counters or logs; default
 * socket buffers (as slipgate); one thread; epoll, then one recvmmsg batch
 * per ready socket and one sendmmsg per destination socket.  A datagram the
 * kernel will not take is dropped, never queued.
 *
 * It runs as a child process (slipgate-bench --serve-minrelay LISTEN SERVER),
 * like slipgate, so both pay the same scheduling and can be measured the same
 * way.
 */
#include "tests/bench/bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BATCH        64
#define BUF          2048
#define MAX_SESSIONS (1u << 20)
#define NONE         UINT32_MAX

struct session {
    int fd;
    uint64_t key;
    struct sockaddr_in client;
};

struct relay {
    int lfd, ep;
    struct sockaddr_in server;

    /* Sessions, and an open-addressing table of index + 1 keyed by address. */
    struct session *s;
    size_t n, cap;
    uint32_t *table;
    size_t tsize; /* a power of two, at least twice n */

    /* One batch in, and the messages that send it on. */
    struct mmsghdr msg[BATCH], out[BATCH];
    struct iovec iov[BATCH];
    struct sockaddr_in from[BATCH];
    uint32_t sess_of[BATCH];
    unsigned char data[BATCH][BUF];
};

static volatile sig_atomic_t stop_flag;

static void on_stop(int sig)
{
    (void)sig;
    stop_flag = 1;
}

/* ---- the session table ---- */

static uint64_t key_of(const struct sockaddr_in *sin)
{
    return (uint64_t)sin->sin_addr.s_addr << 16 | sin->sin_port;
}

static size_t slot_of(uint64_t key, size_t tsize)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (tsize - 1);
}

static int table_grow(struct relay *r)
{
    size_t tsize = r->tsize ? r->tsize * 2 : 1024;
    uint32_t *t = calloc(tsize, sizeof(*t));

    if (!t)
        return -ENOMEM;
    for (size_t i = 0; i < r->n; i++) {
        size_t j = slot_of(r->s[i].key, tsize);

        while (t[j])
            j = (j + 1) & (tsize - 1);
        t[j] = (uint32_t)i + 1;
    }
    free(r->table);
    r->table = t;
    r->tsize = tsize;
    return 0;
}

/* A new session: an upstream socket connected to the server. */
static uint32_t session_create(struct relay *r, const struct sockaddr_in *client, size_t slot)
{
    struct epoll_event ev = {.events = EPOLLIN};
    struct session *s;
    int fd;

    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        struct session *ns = realloc(r->s, cap * sizeof(*ns));

        if (!ns)
            return NONE;
        r->s = ns;
        r->cap = cap;
    }
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return NONE;
    ev.data.u32 = (uint32_t)r->n + 1;
    if (connect(fd, (const struct sockaddr *)&r->server, sizeof(r->server)) < 0 ||
        epoll_ctl(r->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
        close(fd);
        return NONE;
    }
    s = &r->s[r->n];
    s->fd = fd;
    s->key = key_of(client);
    s->client = *client;
    r->table[slot] = (uint32_t)r->n + 1;
    return (uint32_t)r->n++;
}

static uint32_t session_find(struct relay *r, const struct sockaddr_in *client)
{
    uint64_t key = key_of(client);
    size_t j;

    for (j = slot_of(key, r->tsize); r->table[j]; j = (j + 1) & (r->tsize - 1))
        if (r->s[r->table[j] - 1].key == key)
            return r->table[j] - 1;

    /* A new client: keep the table at most half full. */
    if (r->n >= MAX_SESSIONS)
        return NONE;
    if (2 * (r->n + 1) > r->tsize) {
        if (table_grow(r) < 0)
            return NONE;
        for (j = slot_of(key, r->tsize); r->table[j]; j = (j + 1) & (r->tsize - 1))
            ;
    }
    return session_create(r, client, j);
}

/* ---- relaying ---- */

static int receive(struct relay *r, int fd, bool want_name)
{
    int n;

    for (int i = 0; i < BATCH; i++) {
        struct msghdr *h = &r->msg[i].msg_hdr;

        r->iov[i].iov_base = r->data[i];
        r->iov[i].iov_len = BUF;
        memset(h, 0, sizeof(*h));
        h->msg_iov = &r->iov[i];
        h->msg_iovlen = 1;
        h->msg_name = want_name ? &r->from[i] : NULL;
        h->msg_namelen = want_name ? sizeof(r->from[i]) : 0;
    }
    n = recvmmsg(fd, r->msg, BATCH, MSG_DONTWAIT, NULL);
    for (int i = 0; i < n; i++)
        r->iov[i].iov_len = r->msg[i].msg_len; /* send exactly what came */
    return n;
}

/* Client datagrams: group by session, one sendmmsg per upstream socket.  Not
 * inlined: tests/bench/instructions.py counts the instructions from here on. */
__attribute__((noinline)) static void from_clients(struct relay *r)
{
    int n = receive(r, r->lfd, true);

    for (int i = 0; i < n; i++)
        r->sess_of[i] = r->from[i].sin_family == AF_INET ? session_find(r, &r->from[i]) : NONE;
    for (int i = 0; i < n; i++) {
        uint32_t s = r->sess_of[i];
        unsigned k = 0;

        if (s == NONE)
            continue;
        for (int j = i; j < n; j++) {
            if (r->sess_of[j] != s)
                continue;
            memset(&r->out[k], 0, sizeof(r->out[k]));
            r->out[k].msg_hdr.msg_iov = &r->iov[j];
            r->out[k].msg_hdr.msg_iovlen = 1;
            k++;
            r->sess_of[j] = NONE;
        }
        sendmmsg(r->s[s].fd, r->out, k, MSG_DONTWAIT);
    }
}

/* Server datagrams for one session: all to its client, in one sendmmsg (not
 * inlined, as from_clients). */
__attribute__((noinline)) static void from_server(struct relay *r, struct session *s)
{
    int n = receive(r, s->fd, false);

    for (int i = 0; i < n; i++) {
        memset(&r->out[i], 0, sizeof(r->out[i]));
        r->out[i].msg_hdr.msg_name = &s->client;
        r->out[i].msg_hdr.msg_namelen = sizeof(s->client);
        r->out[i].msg_hdr.msg_iov = &r->iov[i];
        r->out[i].msg_hdr.msg_iovlen = 1;
    }
    if (n > 0)
        sendmmsg(r->lfd, r->out, (unsigned)n, MSG_DONTWAIT);
}

int sg_bench_minrelay_serve(uint16_t listen_port, uint16_t server_port)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(listen_port)};
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 0}, evs[BATCH];
    struct sigaction sa;
    struct relay *r;
    int status = 1;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop; /* no SA_RESTART: epoll_wait returns EINTR */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    r = calloc(1, sizeof(*r));
    if (!r)
        return 1;
    /* Touched now, so that the RSS the bench reads grows with sessions only. */
    for (size_t off = 0; off < sizeof(*r); off += 1024)
        ((volatile unsigned char *)r)[off] = 0;
    r->ep = -1;
    r->server.sin_family = AF_INET;
    r->server.sin_port = htons(server_port);
    r->server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

    r->lfd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (r->lfd < 0 || bind(r->lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
        perror("minrelay: listen");
        goto err_sock;
    }
    r->ep = epoll_create1(EPOLL_CLOEXEC);
    if (r->ep < 0 || epoll_ctl(r->ep, EPOLL_CTL_ADD, r->lfd, &ev) < 0 || table_grow(r) < 0) {
        perror("minrelay: epoll");
        goto err_sock;
    }

    /* The loop: every ready socket gets one batch per turn. */
    while (!stop_flag) {
        int n = epoll_wait(r->ep, evs, BATCH, 100);

        if (n < 0 && errno != EINTR) {
            perror("minrelay: epoll_wait");
            goto err_sock;
        }
        for (int i = 0; i < n; i++) {
            uint32_t id = evs[i].data.u32;

            if (id == 0)
                from_clients(r);
            else
                from_server(r, &r->s[id - 1]);
        }
    }
    status = 0;

err_sock:
    for (size_t i = 0; i < r->n; i++)
        close(r->s[i].fd);
    if (r->ep >= 0)
        close(r->ep);
    if (r->lfd >= 0)
        close(r->lfd);
    free(r->table);
    free(r->s);
    free(r);
    return status;
}
