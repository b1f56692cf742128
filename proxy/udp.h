/*
 * The relay's UDP sockets and its outbox.
 *
 * A struct sg_udp is a non-blocking datagram socket of our own, watched by a
 * uv_poll_t, so that the relay decides its system calls itself:
 *
 *   receive   one recvmmsg of up to SG_RECV_BATCH datagrams per readiness
 *             event into a caller-owned batch (epoll is level-triggered:
 *             what is left is reported again on the next loop turn);
 *   send      datagrams are copied into the route's outbox and leave in one
 *             sendmmsg per socket when the outbox is flushed: once per loop
 *             turn, after every ready socket was read (uv_check), so the
 *             datagrams that many upstream sockets received for their
 *             clients leave the listener together; when the kernel would
 *             block, the rest waits in the socket's own queue (copies, at
 *             most SG_MAX_QUEUED_SENDS) and leaves when it is writable;
 *   residence each entry keeps the receive time it was pushed with
 *             (sg_outbox.at), and one clock read just before a socket's
 *             sendmmsg gives `done` each datagram's time inside the relay.
 *
 * An upstream socket is connected to its server: the kernel then keeps the
 * route, takes datagrams only from that address, and reports an ICMP
 * "port unreachable" as ECONNREFUSED on the next receive.
 *
 * Ownership: struct sg_udp and struct sg_outbox are caller-owned and must
 * stay put until their close callbacks ran.  Data handed to
 * sg_outbox_push is copied; `to` and `ctx` are borrowed until the entry is
 * flushed (the owner flushes before it frees them).
 */
#ifndef SG_PROXY_UDP_H
#define SG_PROXY_UDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>
#include <uv.h>

#define SG_MAX_DATAGRAM     65536
#define SG_RECV_BATCH       32           /* datagrams per receive call */
#define SG_MAX_QUEUED_SENDS 256          /* per socket, while the kernel would block */
#define SG_OUTBOX_ENTRIES   512          /* datagrams per flush, at most */
#define SG_OUTBOX_BYTES     (512 * 1024) /* their bytes, at most */

struct sg_udp;
struct sg_udp_queued;

/* Readable (or an error is pending: the next sg_udp_recv returns it). */
typedef void (*sg_udp_read_cb)(struct sg_udp *u);

struct sg_udp {
    uv_poll_t poll;
    int fd;          /* -1 once closed */
    bool open;       /* watched and not closing */
    bool connected;  /* sends go to the connected peer (`to` is ignored) */
    int pending_err; /* a socket error cleared at POLLERR, for the next receive */
    int events;      /* UV_READABLE, plus UV_WRITABLE while copies wait */
    sg_udp_read_cb on_read;
    void *data; /* the owner's */

    /* Copies waiting for the kernel (it would block), oldest first. */
    struct sg_udp_queued *qhead, *qtail;
    unsigned queued;

    /* The outbox's entries for this socket, in the flush being built. */
    int32_t ob_head, ob_tail;
    struct sg_udp *ob_next;
    bool ob_listed;
};

/* One receive call's datagrams; caller-owned, reused (sg_udp_batch_init). */
/* Control space for a receive time (SO_TIMESTAMPNS: a struct timespec). */
#define SG_UDP_CTRL 64

struct sg_udp_batch {
    struct mmsghdr msg[SG_RECV_BATCH];
    struct iovec iov[SG_RECV_BATCH];
    struct sockaddr_storage from[SG_RECV_BATCH];
    uint64_t at[SG_RECV_BATCH]; /* the kernel's receive time (ns, CLOCK_REALTIME); 0: unknown */
    uint8_t ctrl[SG_RECV_BATCH][SG_UDP_CTRL];
    uint8_t *buf; /* SG_RECV_BATCH slots of SG_MAX_DATAGRAM bytes */
    int dirty;    /* entries [0, dirty) whose lengths the last receive changed */
};

/* Allocate the batch's buffer; 0 or -ENOMEM.  _finish accepts a zeroed batch. */
int sg_udp_batch_init(struct sg_udp_batch *b);
void sg_udp_batch_finish(struct sg_udp_batch *b);

/*
 * Open a socket of `local`'s family bound to `local` (an IPv6 wildcard
 * stays dual-stack), connected to `peer` when it is not NULL, and start
 * watching it on `loop`: `on_read` is called when it is readable.  Returns
 * 0 or a negative errno; on failure nothing is left open and `u->fd` is -1.
 */
int sg_udp_open(struct sg_udp *u, uv_loop_t *loop, const struct sockaddr *local,
                const struct sockaddr *peer, sg_udp_read_cb on_read, void *data);

/* As sg_udp_open, with SO_REUSEPORT set before the bind (the worker loops'
 * listeners share one address; the kernel hashes each client to one). */
int sg_udp_open_shared(struct sg_udp *u, uv_loop_t *loop, const struct sockaddr *local,
                       sg_udp_read_cb on_read, void *data);

/* A non-blocking datagram socket bound to `local` with SO_REUSEPORT (not
 * watched yet): its descriptor, or a negative errno. */
int sg_udp_bind_shared(const struct sockaddr *local);
/* Can `local` be bound without SO_REUSEPORT (is no one on it)?  Binds a
 * socket and closes it: 0, or a negative errno (-EADDRINUSE). */
int sg_udp_bind_probe(const struct sockaddr *local);
/* A port nobody holds on `local`'s address (its port 0): a socket without
 * SO_REUSEPORT is bound there, the port the kernel gave written into
 * `local`, and closed.  (A bind(0) with SO_REUSEPORT may be given a port
 * where another process of this user has SO_REUSEPORT sockets, and join
 * them.)  0, or a negative errno. */
int sg_udp_pick_port(struct sockaddr *local);

/* Steer each datagram to the reuseport group's socket chosen from its source
 * address alone (not its port): a cBPF program attached to `fd`'s group of
 * `n` sockets (indexed in the order they were bound).  A client's datagrams
 * then reach the same socket whatever port its NAT gives it.  0, or a
 * negative errno (the kernel keeps hashing address and port). */
int sg_udp_steer_by_source(int fd, unsigned n);
/* Watch `fd` (from sg_udp_bind_shared; owned from now on, closed on failure)
 * as sg_udp_open does; 0 or a negative errno. */
int sg_udp_adopt(struct sg_udp *u, uv_loop_t *loop, int fd, sg_udp_read_cb on_read, void *data);

/*
 * Ask for `bytes` of kernel receive and send buffer (as root or with
 * CAP_NET_ADMIN past net.core.rmem_max/wmem_max, else up to them) and
 * report what the socket got, in the same units as asked (the kernel's own
 * figure counts its bookkeeping too and is twice that).  0 or a negative
 * errno; `*rcv` and `*snd` are set either way (0 when unknown).
 */
int sg_udp_set_buffers(struct sg_udp *u, int bytes, int *rcv, int *snd);

/* What the kernel says of a socket: its buffers (as sg_udp_set_buffers
 * reports them) and the datagrams it dropped, mostly for a full receive
 * buffer (SO_MEMINFO; `drops` wraps at 2^32). */
struct sg_udp_info {
    int rcvbuf, sndbuf;
    uint32_t drops;
};

/* 0 or a negative errno. */
int sg_udp_info(const struct sg_udp *u, struct sg_udp_info *out);

/* Connect an open socket to another peer (a datagram socket's connect
 * only sets the address); 0 or a negative errno. */
int sg_udp_reconnect(struct sg_udp *u, const struct sockaddr *peer);
/* Dissolve the socket's peer (connect AF_UNSPEC): datagrams from any
 * address are delivered and sends need a destination. */
int sg_udp_disconnect(struct sg_udp *u);

/* The socket's own address; 0 or a negative errno. */
int sg_udp_local(const struct sg_udp *u, struct sockaddr_storage *out);

/*
 * Receive up to SG_RECV_BATCH datagrams into `b`: returns how many (0 when
 * none is waiting), or a negative errno reported for the socket (for a
 * connected socket -ECONNREFUSED after an ICMP unreachable; call again
 * for the datagrams).  Datagram i is b->iov[i].iov_base, b->msg[i].msg_len
 * bytes, from b->from[i]; (b->msg[i].msg_hdr.msg_flags & MSG_TRUNC) marks
 * one longer than SG_MAX_DATAGRAM.
 */
int sg_udp_recv(struct sg_udp *u, struct sg_udp_batch *b);

/*
 * One waiting datagram into `buf` (`cap` bytes), without blocking: its
 * length, with MSG_TRUNC in *flags when it was cut, its source in `from`
 * and its receive time in *at; -EAGAIN when none waits, or a negative errno (a pending socket
 * error first, as sg_udp_recv).
 */
int sg_udp_recv_one(struct sg_udp *u, uint8_t *buf, size_t cap, struct sockaddr_storage *from,
                    int *flags, uint64_t *at);

/*
 * The receive time (as in struct sg_udp_batch) of the datagram waiting
 * first, left in place: 1 and *at when one waits (*at 0 when unknown, or
 * when a socket error is pending: the next receive returns it), 0 when
 * none waits, or a negative errno (a socket error, now cleared).
 */
int sg_udp_peek_time(struct sg_udp *u, uint64_t *at);

/*
 * Send one datagram now (no outbox): straight to the kernel, or behind the
 * copies already waiting.  0 (sent or queued), -ENOBUFS (queue full) or a
 * negative errno.
 */
int sg_udp_send(struct sg_udp *u, const uint8_t *data, size_t len, const struct sockaddr *to);

/* Stop watching, drop the waiting copies and close; `cb` gets &u->poll.
 * Accepts a socket that never opened (then `cb` is not called: returns false). */
bool sg_udp_close(struct sg_udp *u, uv_close_cb cb);

/* ---- the outbox ---- */

/*
 * What became of one pushed datagram: 0 sent (or queued), or a negative
 * errno; `resid_ns` is its residence time, from the receive time it was
 * pushed with (sg_outbox.at) to the clock read just before the sendmmsg (or
 * send) that handed it to the kernel, or -1 when it was pushed without one.
 */
typedef void (*sg_outbox_done_cb)(void *ctx, uint8_t tag, const uint8_t *data, size_t len, int err,
                                  int64_t resid_ns);

struct sg_outbox_entry {
    struct sg_udp *u;
    const struct sockaddr *to;
    void *ctx;
    uint32_t off, len;
    int32_t next; /* the socket's next entry, or -1 */
    uint8_t tag;
    uint64_t at; /* sg_outbox.at when it was pushed */
};

struct sg_outbox {
    uv_check_t check; /* flushes after the poll phase of every loop turn */
    uv_idle_t idle;   /* keeps the poll from blocking while entries wait */
    bool open, idle_on, flushing;
    sg_outbox_done_cb done;
    struct sg_outbox_entry *e;
    unsigned n;
    uint8_t *arena;
    size_t used;
    struct sg_udp *socks, *socks_tail; /* sockets with entries, first come first */
    uint64_t first_ns;                 /* sg_udp_mono_ns() when the oldest waiting entry was pushed */
    /* The owner's work after the turn's flush (sg_outbox_after); true: more is left. */
    bool (*after)(void *ctx);
    void *after_ctx;
    bool after_more; /* the last `after` left work: the poll must not block */
    /* The receive time (ns, CLOCK_REALTIME, as struct sg_udp_batch's) of
     * the datagram being relayed, set by the owner around its relaying: the
     * datagrams pushed meanwhile carry it, and their residence is reported
     * to `done`.  0: none (they are not measured). */
    uint64_t at;
    /* The clock read (sg_udp_clock_ns) just before the last send of the
     * loop turn's flush, for the `after` work's own timing (one clock read
     * serves both); 0 when that flush sent no measured datagram. */
    uint64_t sent_ns;
};

/* The clock the receive times are read with (CLOCK_REALTIME), in ns;
 * inline: it is read once per batch of sent datagrams. */
static inline uint64_t sg_udp_clock_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* uv_hrtime()'s clock (CLOCK_MONOTONIC), in ns, read without libuv's call. */
static inline uint64_t sg_udp_mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Initialise and start the outbox on `loop`; 0 or a negative errno. */
int sg_outbox_init(struct sg_outbox *ob, uv_loop_t *loop, sg_outbox_done_cb done);

/*
 * Queue a copy of `len` bytes for `u` (to `to` unless it is connected);
 * `done(ctx, tag, ...)` reports what became of it when it is flushed.
 * Flushes first when the outbox is full.
 */
void sg_outbox_push(struct sg_outbox *ob, struct sg_udp *u, const struct sockaddr *to,
                    const uint8_t *data, size_t len, void *ctx, uint8_t tag);

/*
 * Run `after(ctx)` once per loop turn, after the turn's flush (uv_check):
 * work that must not delay the datagrams already pushed (send-first
 * decoding, session.c).  When it returns true (work is left), the loop
 * polls without blocking and calls it again next turn.  NULL stops it.
 */
void sg_outbox_after(struct sg_outbox *ob, bool (*after)(void *ctx), void *ctx);

/* Nanoseconds the oldest waiting entry has waited (0 when none waits). */
static inline uint64_t sg_outbox_waited_ns(const struct sg_outbox *ob)
{
    return ob->n ? sg_udp_mono_ns() - ob->first_ns : 0;
}

/* Send everything queued, one sendmmsg per socket. */
void sg_outbox_flush(struct sg_outbox *ob);

/* Flush, stop and close both handles; `cb` is called for each of the two
 * (returns how many close callbacks are due: 0 or 2). */
int sg_outbox_close(struct sg_outbox *ob, uv_close_cb cb);
/* Free the buffers once both handles are closed; accepts a zeroed outbox. */
void sg_outbox_finish(struct sg_outbox *ob);

#endif
