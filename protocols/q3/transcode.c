/*
 * Whole-demo operations built on the message layer: re-encoding every
 * message (the proof that decode + encode is exact) and cutting a span of
 * server time into a new playable demo through the recorder (record.c).
 */
#include "protocols/q3/demo.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/error.h"

/* Buffers and state shared by both operations. */
struct work {
    struct sg_q3_state *st;
    struct sg_q3_svmsg msg;
    uint8_t in[SG_Q3_MAX_MSGLEN];
    uint8_t out[SG_Q3_MAX_MSGLEN];
};

/* Allocate the working set for reader `r`. */
static struct work *work_create(const struct sg_q3_demo_reader *r)
{
    struct work *w = malloc(sizeof(*w));

    if (!w)
        return NULL;
    w->st = sg_q3_state_create(r->protocol);
    if (!w->st) {
        free(w);
        return NULL;
    }
    sg_q3_svmsg_init(&w->msg);
    return w;
}

static void work_destroy(struct work *w)
{
    if (!w)
        return;
    sg_q3_svmsg_finish(&w->msg);
    sg_q3_state_destroy(w->st);
    free(w);
}

/* How the input ended: its own problems are reported, not failures. */
static int input_end(int err, struct sg_q3_demo_stats *stats)
{
    if (err == SG_E_TRUNCATED || err == SG_E_TOOBIG || err == SG_E_MALFORMED) {
        stats->end = err;
        return 0;
    }
    return err < 0 ? err : 0;
}

int sg_q3_demo_reencode(struct sg_q3_demo_reader *r, struct sg_q3_demo_writer *w,
                        struct sg_q3_demo_stats *stats)
{
    struct work *k = work_create(r);
    int err = 0;

    memset(stats, 0, sizeof(*stats));
    if (!k)
        return -ENOMEM;
    for (;;) {
        int32_t seq;
        size_t len;
        int n;

        err = sg_q3_demo_read(r, &seq, k->in, &len);
        if (err <= 0)
            break;
        stats->messages++;

        /* a message that does not decode is copied as it is */
        n = sg_q3_parse_server_message(k->st, seq, k->in, len, &k->msg);
        if (n == -ENOMEM) {
            err = n;
            break;
        }
        if (n < 0) {
            stats->decode_errors++;
            err = sg_q3_demo_write(w, seq, k->in, len);
        } else {
            n = sg_q3_write_server_message(&k->msg, k->out, sizeof(k->out));
            if (n < 0) {
                err = n;
                break;
            }
            stats->identical += (size_t)n == len && memcmp(k->in, k->out, len) == 0;
            err = sg_q3_demo_write(w, seq, k->out, (size_t)n);
        }
        if (err < 0)
            break;
        stats->written++;
    }
    work_destroy(k);
    return input_end(err, stats);
}

int sg_q3_demo_cut(struct sg_q3_demo_reader *r, struct sg_q3_demo_writer *w, int32_t from,
                   int32_t to, struct sg_q3_demo_stats *stats)
{
    struct work *k = work_create(r);
    struct sg_q3_recorder *rec = malloc(sizeof(*rec));
    int err = 0;

    memset(stats, 0, sizeof(*stats));
    if (!k || !rec) {
        work_destroy(k);
        free(rec);
        return -ENOMEM;
    }
    sg_q3_recorder_init(rec, w);
    for (;;) {
        const struct sg_q3_snap *s;
        int32_t seq;
        size_t len;
        int perr;

        err = sg_q3_demo_read(r, &seq, k->in, &len);
        if (err <= 0)
            break;
        stats->messages++;
        perr = sg_q3_parse_server_message(k->st, seq, k->in, len, &k->msg);
        if (perr == -ENOMEM) {
            err = perr;
            break;
        }
        stats->decode_errors += perr < 0;

        /* the span: from the first snapshot at `from` on, up to `to` */
        s = perr < 0 ? NULL : sg_q3_svmsg_snapshot(&k->msg);
        if (s && s->server_time > to)
            break;
        if (!rec->started && (!s || s->server_time < from))
            continue;
        err = sg_q3_recorder_feed(rec, k->st, &k->msg, perr, k->in, len);
        if (err < 0)
            break;
    }
    stats->written = rec->written;
    stats->rewritten = rec->rewritten;
    stats->started = rec->started;
    sg_q3_recorder_finish(rec);
    free(rec);
    work_destroy(k);
    return input_end(err, stats);
}
