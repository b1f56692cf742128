/* Held-back datagrams (proxy/delay.h). */
#include "proxy/delay.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool before(const struct sg_delayed *a, const struct sg_delayed *b)
{
    return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static void sift_up(struct sg_delay_queue *q, size_t i)
{
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(q->heap[i], q->heap[parent]))
            break;
        struct sg_delayed *t = q->heap[i];
        q->heap[i] = q->heap[parent];
        q->heap[parent] = t;
        i = parent;
    }
}

static void sift_down(struct sg_delay_queue *q, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < q->n && before(q->heap[l], q->heap[m]))
            m = l;
        if (r < q->n && before(q->heap[r], q->heap[m]))
            m = r;
        if (m == i)
            break;
        struct sg_delayed *t = q->heap[i];
        q->heap[i] = q->heap[m];
        q->heap[m] = t;
        i = m;
    }
}

static struct sg_delayed *pop(struct sg_delay_queue *q)
{
    struct sg_delayed *d = q->heap[0];

    q->heap[0] = q->heap[--q->n];
    if (q->n)
        sift_down(q, 0);
    q->bytes -= d->len;
    return d;
}

static void on_timer(uv_timer_t *t)
{
    struct sg_delay_queue *q = t->data;
    uint64_t now = uv_now(t->loop);

    while (q->n && q->heap[0]->due <= now) {
        struct sg_delayed *d = pop(q);
        q->send(d->s, d->dir, d->data, d->len);
        free(d);
    }
    if (q->n)
        uv_timer_start(&q->timer, on_timer, q->heap[0]->due - now, 0);
}

int sg_delay_init(struct sg_delay_queue *q, uv_loop_t *loop,
                  void (*send)(struct sg_session *, enum sg_dir, const uint8_t *, size_t))
{
    int err;

    memset(q, 0, sizeof(*q));
    q->send = send;
    q->max_bytes = 64u << 20;
    err = uv_timer_init(loop, &q->timer);
    if (err < 0)
        return err;
    q->timer.data = q;
    q->open = true;
    return 0;
}

int sg_delay_push(struct sg_delay_queue *q, uint64_t now, uint32_t ms, struct sg_session *s,
                  enum sg_dir dir, const uint8_t *data, size_t len)
{
    struct sg_delayed *d;

    if (!q->open || q->bytes + len > q->max_bytes)
        return -ENOBUFS;
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 256;
        struct sg_delayed **h = realloc(q->heap, cap * sizeof(*h));
        if (!h)
            return -ENOMEM;
        q->heap = h;
        q->cap = cap;
    }
    d = malloc(sizeof(*d) + len);
    if (!d)
        return -ENOMEM;
    d->due = now + ms;
    d->seq = q->seq++;
    d->s = s;
    d->dir = dir;
    d->len = len;
    memcpy(d->data, data, len);
    q->heap[q->n++] = d;
    q->bytes += len;
    sift_up(q, q->n - 1);
    if (q->heap[0] == d)
        uv_timer_start(&q->timer, on_timer, ms, 0);
    return 0;
}

void sg_delay_forget(struct sg_delay_queue *q, struct sg_session *s)
{
    size_t j = 0;

    for (size_t i = 0; i < q->n; i++) {
        if (q->heap[i]->s == s) {
            q->bytes -= q->heap[i]->len;
            free(q->heap[i]);
        } else {
            q->heap[j++] = q->heap[i];
        }
    }
    q->n = j;
    /* rebuild the heap order */
    for (size_t i = q->n / 2; i-- > 0;)
        sift_down(q, i);
    if (q->open && q->n == 0)
        uv_timer_stop(&q->timer);
}

void sg_delay_close(struct sg_delay_queue *q, uv_close_cb close_cb)
{
    for (size_t i = 0; i < q->n; i++)
        free(q->heap[i]);
    free(q->heap);
    q->heap = NULL;
    q->n = q->cap = 0;
    q->bytes = 0;
    if (q->open) {
        q->open = false;
        uv_close((uv_handle_t *)&q->timer, close_cb);
    }
}
