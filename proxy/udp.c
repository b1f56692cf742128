/*
 * The relay's UDP sockets and its outbox (udp.h).
 *
 *   poll readable ──▶ sg_udp_recv: one recvmmsg ──▶ owner relays each datagram
 *                                                      │ sg_outbox_push (copy)
 *   loop turn ends (uv_check) ──▶ sg_outbox_flush ◀────┘
 *        per socket with entries: sendmmsg, 64 at a time
 *        the kernel would block ──▶ the socket's queue ──▶ poll writable ──▶ sendmsg
 *
 * Order is kept per socket: while copies wait in a socket's queue, every
 * newer datagram for it goes behind them.
 */
#include "proxy/udp.h"

#include "proxy/addr.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SEND_CHUNK 64 /* datagrams per sendmmsg */

struct sg_udp_queued {
    struct sg_udp_queued *next;
    struct sockaddr_storage to;
    socklen_t tolen;
    size_t len;
    uint8_t data[];
};

/* ---- receive batches ---- */

int sg_udp_batch_init(struct sg_udp_batch *b)
{
    memset(b, 0, sizeof(*b));
    b->buf = malloc((size_t)SG_RECV_BATCH * SG_MAX_DATAGRAM);
    if (!b->buf)
        return -ENOMEM;
    for (int i = 0; i < SG_RECV_BATCH; i++) {
        b->iov[i].iov_base = b->buf + (size_t)i * SG_MAX_DATAGRAM;
        b->msg[i].msg_hdr.msg_iov = &b->iov[i];
        b->msg[i].msg_hdr.msg_iovlen = 1;
        b->msg[i].msg_hdr.msg_name = &b->from[i];
        b->msg[i].msg_hdr.msg_control = b->ctrl[i];
    }
    b->dirty = SG_RECV_BATCH; /* the lengths are set before the first receive */
    return 0;
}

/* The kernel's receive time of a received message (SO_TIMESTAMPNS), 0 without one. */
static uint64_t receive_time(struct msghdr *mh)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS &&
            c->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
            struct timespec ts;

            memcpy(&ts, CMSG_DATA(c), sizeof(ts));
            return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        }
    }
    return 0;
}

/* Receive times on (they order a session's two sockets: session.c); best effort. */
static void want_times(int fd)
{
    int on = 1;

    (void)setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on));
}

void sg_udp_batch_finish(struct sg_udp_batch *b)
{
    free(b->buf);
    b->buf = NULL;
}

/* ---- the socket ---- */

static void on_poll(uv_poll_t *p, int status, int events);

static void watch(struct sg_udp *u)
{
    uv_poll_start(&u->poll, u->events, on_poll);
}

/* The residence of a datagram received at `at`, handed over at `now` (-1: not measured). */
static int64_t residence(uint64_t at, uint64_t now)
{
    if (!at)
        return -1;
    /* the clock may have been stepped back since */
    return now > at ? (int64_t)(now - at) : 0;
}

/* Copies waiting for the kernel: send what it takes now. */
static void drain(struct sg_udp *u)
{
    while (u->qhead) {
        struct sg_udp_queued *q = u->qhead;
        ssize_t n = u->connected ? send(u->fd, q->data, q->len, MSG_DONTWAIT)
                                 : sendto(u->fd, q->data, q->len, MSG_DONTWAIT,
                                          (struct sockaddr *)&q->to, q->tolen);

        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        /* Sent, or refused for good: either way it leaves the queue (it was
         * counted when it was queued). */
        u->qhead = q->next;
        if (!u->qhead)
            u->qtail = NULL;
        u->queued--;
        free(q);
    }
    if (u->events & UV_WRITABLE) {
        u->events &= ~UV_WRITABLE;
        if (u->open)
            watch(u);
    }
}

static void on_poll(uv_poll_t *p, int status, int events)
{
    struct sg_udp *u = p->data;

    /*
     * libuv stops the handle and reports UV_EBADF on POLLERR: a socket error
     * is pending (an ICMP unreachable on a connected socket).  Clear it,
     * keep it for the owner's next receive, and watch again.
     */
    if (status < 0) {
        int soerr = 0;
        socklen_t len = sizeof(soerr);

        if (getsockopt(u->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr)
            u->pending_err = -soerr;
        if (u->open)
            watch(u);
        events = UV_READABLE;
    }
    if (events & UV_WRITABLE)
        drain(u);
    if ((events & UV_READABLE) && u->open)
        u->on_read(u);
}

static int udp_open(struct sg_udp *u, uv_loop_t *loop, const struct sockaddr *local,
                    const struct sockaddr *peer, sg_udp_read_cb on_read, void *data, bool reuseport)
{
    int fd, err, off = 0, on = 1;

    memset(u, 0, sizeof(*u));
    u->fd = -1;
    u->ob_head = u->ob_tail = -1;
    u->on_read = on_read;
    u->data = data;

    fd = socket(local->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    /* [::] takes IPv4 clients too, whatever the system default. */
    if (local->sa_family == AF_INET6)
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)) < 0) {
        err = -errno;
        goto err_fd;
    }
    if (bind(fd, local, sg_addr_len(local)) < 0 ||
        (peer && connect(fd, peer, sg_addr_len(peer)) < 0)) {
        err = -errno;
        goto err_fd;
    }
    want_times(fd);
    err = uv_poll_init_socket(loop, &u->poll, fd);
    if (err < 0)
        goto err_fd;
    u->poll.data = u;
    u->fd = fd;
    u->open = true;
    u->connected = peer != NULL;
    u->events = UV_READABLE;
    err = uv_poll_start(&u->poll, u->events, on_poll);
    if (err < 0) {
        u->open = false;
        return err; /* the handle is initialised: the caller closes it */
    }
    return 0;

err_fd:
    close(fd);
    return err;
}

int sg_udp_open(struct sg_udp *u, uv_loop_t *loop, const struct sockaddr *local,
                const struct sockaddr *peer, sg_udp_read_cb on_read, void *data)
{
    return udp_open(u, loop, local, peer, on_read, data, false);
}

int sg_udp_bind_shared(const struct sockaddr *local)
{
    int fd = socket(local->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), err;
    int off = 0, on = 1;

    if (fd < 0)
        return -errno;
    if (local->sa_family == AF_INET6)
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)) < 0 ||
        bind(fd, local, sg_addr_len(local)) < 0) {
        err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

/*
 * The reuseport group's socket for a datagram, from its source address
 * alone (classic BPF; man 7 socket, SO_ATTACH_REUSEPORT_CBPF).  The program
 * runs with the packet's data at the UDP payload; the IP header is read
 * through SKF_NET_OFF.  The source address (IPv4: 4 bytes at 12; IPv6: its
 * first 8 bytes at 8, the /64, folded by XOR into one word, so that the
 * addresses of one /64 share a loop as they share a per-source limit) is
 * mixed (xor-shift, multiply, xor-shift) and taken modulo the number of
 * sockets.  Anything else returns an index past the group, and the kernel
 * picks by its own hash.
 */
int sg_udp_steer_by_source(int fd, unsigned n)
{
#define NET(off) ((uint32_t)(SKF_NET_OFF + (off)))
    struct sock_filter code[] = {
        /* 0 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, NET(0)),
        /* 1 */ BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 4),
        /* 2 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 6, 3, 0),  /* IPv6: to 6 */
        /* 3 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 4, 0, 15), /* not IPv4: to 19 */
        /* 4 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NET(12)),
        /* 5 */ BPF_JUMP(BPF_JMP | BPF_JA, 4, 0, 0), /* to 10 */
        /* 6 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NET(8)),
        /* 7 */ BPF_STMT(BPF_MISC | BPF_TAX, 0),
        /* 8 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NET(12)),
        /* 9 */ BPF_STMT(BPF_ALU | BPF_XOR | BPF_X, 0),
        /* 10 */ BPF_STMT(BPF_MISC | BPF_TAX, 0),
        /* 11 */ BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 16),
        /* 12 */ BPF_STMT(BPF_ALU | BPF_XOR | BPF_X, 0),
        /* 13 */ BPF_STMT(BPF_ALU | BPF_MUL | BPF_K, 0x45d9f3b),
        /* 14 */ BPF_STMT(BPF_MISC | BPF_TAX, 0),
        /* 15 */ BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 16),
        /* 16 */ BPF_STMT(BPF_ALU | BPF_XOR | BPF_X, 0),
        /* 17 */ BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, n),
        /* 18 */ BPF_STMT(BPF_RET | BPF_A, 0),
        /* 19 */ BPF_STMT(BPF_RET | BPF_K, 0xffffffffu),
    };
#undef NET
    struct sock_fprog prog = {.len = (unsigned short)(sizeof(code) / sizeof(code[0])),
                              .filter = code};

    if (n < 1)
        return -EINVAL;
    if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog)) < 0)
        return -errno;
    return 0;
}

int sg_udp_bind_probe(const struct sockaddr *local)
{
    int fd = socket(local->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0), err = 0;
    int off = 0;

    if (fd < 0)
        return -errno;
    if (local->sa_family == AF_INET6)
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    if (bind(fd, local, sg_addr_len(local)) < 0)
        err = -errno;
    close(fd);
    return err;
}

int sg_udp_pick_port(struct sockaddr *local)
{
    int fd = socket(local->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0), err = 0;
    struct sockaddr_storage got;
    socklen_t len = sizeof(got);
    int off = 0;

    if (fd < 0)
        return -errno;
    if (local->sa_family == AF_INET6)
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    if (bind(fd, local, sg_addr_len(local)) < 0 ||
        getsockname(fd, (struct sockaddr *)&got, &len) < 0)
        err = -errno;
    else
        sg_addr_set_port(local, sg_addr_port((struct sockaddr *)&got));
    close(fd);
    return err;
}

int sg_udp_adopt(struct sg_udp *u, uv_loop_t *loop, int fd, sg_udp_read_cb on_read, void *data)
{
    int err;

    memset(u, 0, sizeof(*u));
    u->fd = -1;
    u->ob_head = u->ob_tail = -1;
    u->on_read = on_read;
    u->data = data;
    want_times(fd);
    err = uv_poll_init_socket(loop, &u->poll, fd);
    if (err < 0) {
        close(fd);
        return err;
    }
    u->poll.data = u;
    u->fd = fd;
    u->open = true;
    u->events = UV_READABLE;
    err = uv_poll_start(&u->poll, u->events, on_poll);
    if (err < 0) {
        u->open = false;
        return err; /* the handle is initialised: the caller closes it */
    }
    return 0;
}

int sg_udp_open_shared(struct sg_udp *u, uv_loop_t *loop, const struct sockaddr *local,
                       sg_udp_read_cb on_read, void *data)
{
    return udp_open(u, loop, local, NULL, on_read, data, true);
}

/* One buffer: the forcing option first (it ignores the sysctl cap but
 * needs CAP_NET_ADMIN), then the plain one; the size read back is halved. */
static int set_buffer(int fd, int force_opt, int opt, int bytes, int *got)
{
    int err = 0, v = 0;
    socklen_t len = sizeof(v);

    if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof(bytes)) < 0 &&
        setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes)) < 0)
        err = -errno;
    *got = getsockopt(fd, SOL_SOCKET, opt, &v, &len) == 0 ? v / 2 : 0;
    return err;
}

int sg_udp_set_buffers(struct sg_udp *u, int bytes, int *rcv, int *snd)
{
    int err = set_buffer(u->fd, SO_RCVBUFFORCE, SO_RCVBUF, bytes, rcv);
    int err2 = set_buffer(u->fd, SO_SNDBUFFORCE, SO_SNDBUF, bytes, snd);

    return err < 0 ? err : err2;
}

int sg_udp_info(const struct sg_udp *u, struct sg_udp_info *out)
{
    uint32_t mem[SK_MEMINFO_VARS];
    socklen_t len = sizeof(mem);

    memset(out, 0, sizeof(*out));
    memset(mem, 0, sizeof(mem));
    if (getsockopt(u->fd, SOL_SOCKET, SO_MEMINFO, mem, &len) < 0)
        return -errno;
    out->rcvbuf = (int)(mem[SK_MEMINFO_RCVBUF] / 2);
    out->sndbuf = (int)(mem[SK_MEMINFO_SNDBUF] / 2);
    out->drops = mem[SK_MEMINFO_DROPS];
    return 0;
}

int sg_udp_reconnect(struct sg_udp *u, const struct sockaddr *peer)
{
    if (connect(u->fd, peer, sg_addr_len(peer)) < 0)
        return -errno;
    u->connected = true;
    return 0;
}

int sg_udp_disconnect(struct sg_udp *u)
{
    struct sockaddr unspec = {.sa_family = AF_UNSPEC};
    struct sockaddr_storage local, now;
    socklen_t len = sizeof(local), nlen = sizeof(now);

    if (getsockname(u->fd, (struct sockaddr *)&local, &len) < 0)
        return -errno;
    if (connect(u->fd, &unspec, sizeof(unspec)) < 0)
        return -errno;
    u->connected = false;
    /*
     * A socket bound to port 0 loses its port with its peer (the kernel
     * unhashes it, and the next send would pick another): bind it again to
     * the same port, on any address, so the server keeps seeing one source.
     */
    if (getsockname(u->fd, (struct sockaddr *)&now, &nlen) < 0)
        return -errno;
    if (sg_addr_port((struct sockaddr *)&now) == 0) {
        int port = sg_addr_port((struct sockaddr *)&local);

        memset(&now, 0, sizeof(now));
        now.ss_family = local.ss_family;
        sg_addr_set_port((struct sockaddr *)&now, port);
        if (bind(u->fd, (struct sockaddr *)&now, sg_addr_len((struct sockaddr *)&now)) < 0)
            return -errno;
    }
    return 0;
}

int sg_udp_local(const struct sg_udp *u, struct sockaddr_storage *out)
{
    socklen_t len = sizeof(*out);

    return getsockname(u->fd, (struct sockaddr *)out, &len) < 0 ? -errno : 0;
}

int sg_udp_recv(struct sg_udp *u, struct sg_udp_batch *b)
{
    int n;

    if (u->pending_err) {
        n = u->pending_err;
        u->pending_err = 0;
        return n;
    }
    /* Only the entries the last receive filled had their lengths changed. */
    for (int i = 0; i < b->dirty; i++) {
        b->iov[i].iov_len = SG_MAX_DATAGRAM;
        b->msg[i].msg_hdr.msg_namelen = sizeof(b->from[i]);
        b->msg[i].msg_hdr.msg_controllen = SG_UDP_CTRL;
    }
    n = recvmmsg(u->fd, b->msg, SG_RECV_BATCH, MSG_DONTWAIT, NULL);
    /* the kernel writes an entry back only for a datagram it received;
     * the first one is reset after a failure all the same */
    b->dirty = n > 0 ? n : 1;
    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -errno;
    for (int i = 0; i < n; i++)
        b->at[i] = receive_time(&b->msg[i].msg_hdr);
    return n;
}

int sg_udp_recv_one(struct sg_udp *u, uint8_t *buf, size_t cap, struct sockaddr_storage *from,
                    int *flags, uint64_t *at)
{
    struct iovec iov = {buf, cap};
    struct msghdr mh = {0};
    uint8_t ctrl[SG_UDP_CTRL];
    ssize_t n;

    *flags = 0;
    *at = 0;
    if (u->pending_err) {
        int err = u->pending_err;

        u->pending_err = 0;
        return err;
    }
    mh.msg_name = from;
    mh.msg_namelen = sizeof(*from);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctrl;
    mh.msg_controllen = sizeof(ctrl);
    n = recvmsg(u->fd, &mh, MSG_DONTWAIT);
    if (n < 0)
        return errno == EWOULDBLOCK || errno == EINTR ? -EAGAIN : -errno;
    *flags = mh.msg_flags;
    *at = receive_time(&mh);
    return (int)n;
}

int sg_udp_peek_time(struct sg_udp *u, uint64_t *at)
{
    uint8_t byte, ctrl[SG_UDP_CTRL];
    struct iovec iov = {&byte, 1};
    struct msghdr mh = {0};

    *at = 0;
    if (u->pending_err)
        return 1;
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctrl;
    mh.msg_controllen = sizeof(ctrl);
    if (recvmsg(u->fd, &mh, MSG_PEEK | MSG_DONTWAIT) < 0)
        return errno == EWOULDBLOCK || errno == EINTR ? 0 : -errno;
    *at = receive_time(&mh);
    return 1;
}

/* Behind the copies already waiting; the poll then watches for writable. */
static int enqueue(struct sg_udp *u, const uint8_t *data, size_t len, const struct sockaddr *to)
{
    struct sg_udp_queued *q;

    if (u->queued >= SG_MAX_QUEUED_SENDS)
        return -ENOBUFS;
    q = malloc(sizeof(*q) + len);
    if (!q)
        return -ENOMEM;
    q->next = NULL;
    q->len = len;
    q->tolen = 0;
    if (to && !u->connected) {
        q->tolen = sg_addr_len(to);
        memcpy(&q->to, to, q->tolen);
    }
    memcpy(q->data, data, len);
    if (u->qtail)
        u->qtail->next = q;
    else
        u->qhead = q;
    u->qtail = q;
    u->queued++;
    if (!(u->events & UV_WRITABLE)) {
        u->events |= UV_WRITABLE;
        watch(u);
    }
    return 0;
}

int sg_udp_send(struct sg_udp *u, const uint8_t *data, size_t len, const struct sockaddr *to)
{
    ssize_t n;

    if (!u->open)
        return -EBADF;
    if (u->queued)
        return enqueue(u, data, len, to);
    do {
        n = u->connected ? send(u->fd, data, len, MSG_DONTWAIT)
                         : sendto(u->fd, data, len, MSG_DONTWAIT, to, sg_addr_len(to));
    } while (n < 0 && errno == EINTR);
    if (n >= 0)
        return 0;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return enqueue(u, data, len, to);
    return -errno;
}

bool sg_udp_close(struct sg_udp *u, uv_close_cb cb)
{
    bool had_handle = u->fd >= 0;

    while (u->qhead) {
        struct sg_udp_queued *q = u->qhead;
        u->qhead = q->next;
        free(q);
    }
    u->qtail = NULL;
    u->queued = 0;
    u->open = false;
    if (!had_handle)
        return false;
    /* uv_close stops the watch at once, so the descriptor can go now. */
    uv_close((uv_handle_t *)&u->poll, cb);
    close(u->fd);
    u->fd = -1;
    return true;
}

/* ---- the outbox ---- */

static void on_idle(uv_idle_t *h);

static void idle_on(struct sg_outbox *ob)
{
    if (!ob->idle_on) {
        uv_idle_start(&ob->idle, on_idle);
        ob->idle_on = true;
    }
}

static void on_check(uv_check_t *h)
{
    struct sg_outbox *ob = h->data;

    ob->sent_ns = 0;
    sg_outbox_flush(ob);
    if (!ob->after)
        return;
    /* The owner's deferred work, once the turn's datagrams are out. */
    ob->after_more = ob->after(ob->after_ctx);
    sg_outbox_flush(ob);
    if (ob->after_more)
        idle_on(ob);
}

static void on_idle(uv_idle_t *h)
{
    struct sg_outbox *ob = h->data;

    sg_outbox_flush(ob);
    if (ob->idle_on && ob->n == 0 && !ob->after_more) {
        uv_idle_stop(&ob->idle);
        ob->idle_on = false;
    }
}

void sg_outbox_after(struct sg_outbox *ob, bool (*after)(void *ctx), void *ctx)
{
    ob->after = after;
    ob->after_ctx = ctx;
    ob->after_more = false;
}

int sg_outbox_init(struct sg_outbox *ob, uv_loop_t *loop, sg_outbox_done_cb done)
{
    int err;

    memset(ob, 0, sizeof(*ob));
    ob->done = done;
    ob->e = malloc(SG_OUTBOX_ENTRIES * sizeof(*ob->e));
    ob->arena = malloc(SG_OUTBOX_BYTES);
    if (!ob->e || !ob->arena) {
        err = -ENOMEM;
        goto err_mem;
    }
    err = uv_check_init(loop, &ob->check);
    if (err < 0)
        goto err_mem;
    err = uv_idle_init(loop, &ob->idle);
    if (err < 0) {
        uv_close((uv_handle_t *)&ob->check, NULL);
        goto err_mem;
    }
    ob->check.data = ob->idle.data = ob;
    uv_check_start(&ob->check, on_check);
    /* Neither keeps the loop alive by itself. */
    uv_unref((uv_handle_t *)&ob->check);
    uv_unref((uv_handle_t *)&ob->idle);
    ob->open = true;
    return 0;

err_mem:
    free(ob->e);
    free(ob->arena);
    ob->e = NULL;
    ob->arena = NULL;
    return err;
}

/* One socket's entries, `k` of them at `idx`, in order. */
static void send_group(struct sg_outbox *ob, struct sg_udp *u, const int32_t *idx, unsigned k)
{
    struct mmsghdr mm[SEND_CHUNK];
    struct iovec iov[SEND_CHUNK];
    unsigned sent = 0;
    uint64_t now = 0;
    bool timed = false;

    /* One clock read for the group, just before it is handed over. */
    for (unsigned j = 0; j < k && !timed; j++)
        timed = ob->e[idx[j]].at != 0;
    if (timed) {
        now = sg_udp_clock_ns();
        ob->sent_ns = now;
    }

    /* A closed socket, or one with copies waiting: no direct send. */
    if (!u->open || u->queued) {
        for (unsigned j = 0; j < k; j++) {
            const struct sg_outbox_entry *e = &ob->e[idx[j]];
            int err = u->open ? enqueue(u, ob->arena + e->off, e->len, e->to) : -EBADF;

            ob->done(e->ctx, e->tag, ob->arena + e->off, e->len, err, residence(e->at, now));
        }
        return;
    }

    memset(mm, 0, k * sizeof(mm[0]));
    for (unsigned j = 0; j < k; j++) {
        const struct sg_outbox_entry *e = &ob->e[idx[j]];

        iov[j].iov_base = ob->arena + e->off;
        iov[j].iov_len = e->len;
        mm[j].msg_hdr.msg_iov = &iov[j];
        mm[j].msg_hdr.msg_iovlen = 1;
        if (!u->connected) {
            mm[j].msg_hdr.msg_name = (void *)(uintptr_t)e->to;
            mm[j].msg_hdr.msg_namelen = sg_addr_len(e->to);
        }
    }
    while (sent < k) {
        int r = sendmmsg(u->fd, mm + sent, k - sent, MSG_DONTWAIT);
        int err = r < 0 ? errno : 0;

        if (r > 0) {
            for (unsigned j = sent; j < sent + (unsigned)r; j++) {
                const struct sg_outbox_entry *e = &ob->e[idx[j]];
                ob->done(e->ctx, e->tag, ob->arena + e->off, e->len, 0, residence(e->at, now));
            }
            sent += (unsigned)r;
            continue;
        }
        if (err == EINTR)
            continue;
        if (err == EAGAIN || err == EWOULDBLOCK) {
            /* The rest waits in the socket's queue, in order. */
            for (; sent < k; sent++) {
                const struct sg_outbox_entry *e = &ob->e[idx[sent]];
                ob->done(e->ctx, e->tag, ob->arena + e->off, e->len,
                         enqueue(u, ob->arena + e->off, e->len, e->to), residence(e->at, now));
            }
            return;
        }
        /* This one was refused (e.g. ECONNREFUSED after an ICMP error): skip it. */
        {
            const struct sg_outbox_entry *e = &ob->e[idx[sent]];
            ob->done(e->ctx, e->tag, ob->arena + e->off, e->len, -err, residence(e->at, now));
            sent++;
        }
    }
}

void sg_outbox_flush(struct sg_outbox *ob)
{
    struct sg_udp *u, *next;
    int32_t idx[SEND_CHUNK];

    if (ob->flushing || ob->n == 0)
        return;
    ob->flushing = true;
    for (u = ob->socks; u; u = next) {
        int32_t i = u->ob_head;

        next = u->ob_next;
        u->ob_head = u->ob_tail = -1;
        u->ob_next = NULL;
        u->ob_listed = false;
        while (i >= 0) {
            unsigned k = 0;

            for (; i >= 0 && k < SEND_CHUNK; i = ob->e[i].next)
                idx[k++] = i;
            send_group(ob, u, idx, k);
        }
    }
    ob->socks = ob->socks_tail = NULL;
    ob->n = 0;
    ob->used = 0;
    ob->flushing = false;
    if (ob->idle_on && !ob->after_more) {
        uv_idle_stop(&ob->idle);
        ob->idle_on = false;
    }
}

void sg_outbox_push(struct sg_outbox *ob, struct sg_udp *u, const struct sockaddr *to,
                    const uint8_t *data, size_t len, void *ctx, uint8_t tag)
{
    struct sg_outbox_entry *e;

    /* Closed, or pushed from a done callback: straight to the socket. */
    if (!ob->open || ob->flushing) {
        uint64_t now = ob->at ? sg_udp_clock_ns() : 0;

        ob->done(ctx, tag, data, len, sg_udp_send(u, data, len, to), residence(ob->at, now));
        return;
    }
    if (ob->n == SG_OUTBOX_ENTRIES || len > SG_OUTBOX_BYTES - ob->used)
        sg_outbox_flush(ob);

    if (ob->n == 0)
        ob->first_ns = sg_udp_mono_ns();
    e = &ob->e[ob->n];
    e->u = u;
    e->to = to;
    e->ctx = ctx;
    e->off = (uint32_t)ob->used;
    e->len = (uint32_t)len;
    e->next = -1;
    e->tag = tag;
    e->at = ob->at;
    memcpy(ob->arena + ob->used, data, len);
    ob->used += (len + 15) & ~(size_t)15;
    if (ob->used > SG_OUTBOX_BYTES)
        ob->used = SG_OUTBOX_BYTES;

    /* Onto the socket's list, and the socket onto the flush's. */
    if (u->ob_tail >= 0)
        ob->e[u->ob_tail].next = (int32_t)ob->n;
    else
        u->ob_head = (int32_t)ob->n;
    u->ob_tail = (int32_t)ob->n;
    if (!u->ob_listed) {
        u->ob_listed = true;
        u->ob_next = NULL;
        if (ob->socks_tail)
            ob->socks_tail->ob_next = u;
        else
            ob->socks = u;
        ob->socks_tail = u;
    }
    ob->n++;

    /* Entries pushed outside the poll phase (timers) must not wait for I/O. */
    idle_on(ob);
}

int sg_outbox_close(struct sg_outbox *ob, uv_close_cb cb)
{
    if (!ob->open)
        return 0;
    sg_outbox_flush(ob);
    ob->open = false;
    uv_close((uv_handle_t *)&ob->check, cb);
    uv_close((uv_handle_t *)&ob->idle, cb);
    return 2;
}

void sg_outbox_finish(struct sg_outbox *ob)
{
    free(ob->e);
    free(ob->arena);
    ob->e = NULL;
    ob->arena = NULL;
}
