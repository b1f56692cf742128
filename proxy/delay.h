/*
 * Datagrams held back for later (network emulation: delay, jitter,
 * reordering).  One queue per route, ordered by due time (a binary heap),
 * driven by one timer.  A session that ends takes its datagrams with it.
 */
#ifndef SG_PROXY_DELAY_H
#define SG_PROXY_DELAY_H

#include "protocols/codec.h"

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct sg_session;

struct sg_delayed {
    uint64_t due;  /* uv_now() when it goes out */
    uint64_t seq;  /* insertion order: equal due times keep it */
    struct sg_session *s;
    enum sg_dir dir;
    size_t len;
    uint8_t data[];
};

struct sg_delay_queue {
    uv_timer_t timer;
    bool open;
    struct sg_delayed **heap;
    size_t n, cap;
    uint64_t seq;
    size_t bytes;     /* held now */
    size_t max_bytes; /* beyond this, new datagrams are sent at once */
    void (*send)(struct sg_session *s, enum sg_dir dir, const uint8_t *data, size_t len);
};

/* Start the queue's timer on `loop`; `send` delivers a due datagram. */
int sg_delay_init(struct sg_delay_queue *q, uv_loop_t *loop,
                  void (*send)(struct sg_session *, enum sg_dir, const uint8_t *, size_t));
/* Hold a copy of the datagram for `ms`.  Returns 0, or -ENOMEM / -ENOBUFS (caller sends now). */
int sg_delay_push(struct sg_delay_queue *q, uint64_t now, uint32_t ms, struct sg_session *s,
                  enum sg_dir dir, const uint8_t *data, size_t len);
/* Forget the datagrams of one session (it is ending). */
void sg_delay_forget(struct sg_delay_queue *q, struct sg_session *s);
/* Free everything and close the timer (close_cb gets the timer handle). */
void sg_delay_close(struct sg_delay_queue *q, uv_close_cb close_cb);

#endif
