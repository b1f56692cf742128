/*
 * The 'ratelimit' filter: caps each session's datagrams per second and/or
 * bytes per second, one way or both, with token buckets; a datagram over
 * the cap is dropped (SG_FILTER_DROP: the receiver sees loss).
 *
 * Every frame counts, decoded or not (SG_FRAME_RAW too), at the size of the
 * datagram as it arrived.  Each direction has its own buckets, so a flood
 * one way never starves the other.  A bucket holds at most `burst` packets
 * (`burst_bytes` bytes), starts full, and refills at the configured rate
 * from the loop's clock (call->now_ms).  A datagram passes only when both
 * buckets of its direction hold enough; it then takes from both.
 *
 * Tokens are kept in thousandths, so the refill is exact in whole
 * milliseconds: N per second is N thousandths per millisecond.
 */
#include "filters/chain.h"
#include "filters/filter.h"

#include "protocols/error.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define MILLI    1000u
#define RATE_MAX (INT64_C(1) << 32) /* per second: packets, or bytes (4 GiB/s) */

enum direction { DIR_BOTH, DIR_TO_CLIENT, DIR_TO_SERVER };
static const char *const direction_choices[] = {"both", "to_client", "to_server", NULL};

struct ratelimit_conf {
    int64_t packets_per_second, bytes_per_second; /* 0: no cap */
    int64_t burst, burst_bytes;                   /* -1: one second's worth */
    int direction;
};

/* One token bucket; tokens and capacity in thousandths of a packet or byte. */
struct bucket {
    uint64_t tokens, cap, rate; /* rate: thousandths per millisecond = units per second */
};

struct ratelimit_dir {
    struct bucket packets, bytes;
    uint64_t last_ms;
    uint64_t passed, dropped, dropped_bytes;
};

struct ratelimit_slot {
    struct ratelimit_dir d[2]; /* per enum sg_dir */
    bool said;                 /* the "limiting" line was logged */
    struct sg_chain *chain;    /* for the log line at session end */
    int index;
};

static void conf_init(void *p)
{
    struct ratelimit_conf *c = p;

    c->burst = c->burst_bytes = -1;
    c->direction = DIR_BOTH;
}

static int conf_check(void *p, char *err, size_t errlen)
{
    struct ratelimit_conf *c = p;

    if (c->packets_per_second == 0 && c->bytes_per_second == 0) {
        snprintf(err, errlen,
                 "sets no cap: give 'packets_per_second N' and/or "
                 "'bytes_per_second SIZE'");
        return SG_E_CONFIG;
    }
    if (c->burst >= 0 && c->packets_per_second == 0) {
        snprintf(err, errlen, "'burst' sizes the packet cap, but 'packets_per_second' is not set");
        return SG_E_CONFIG;
    }
    if (c->burst_bytes >= 0 && c->bytes_per_second == 0) {
        snprintf(err, errlen,
                 "'burst_bytes' sizes the byte cap, but 'bytes_per_second' is not set");
        return SG_E_CONFIG;
    }
    if (c->burst < 0)
        c->burst = c->packets_per_second;
    if (c->burst_bytes < 0)
        c->burst_bytes = c->bytes_per_second;
    return 0;
}

/* ---- buckets ---- */

static void bucket_init(struct bucket *b, int64_t per_second, int64_t burst)
{
    b->rate = (uint64_t)per_second;
    b->cap = (uint64_t)burst * MILLI;
    b->tokens = b->cap;
}

static void bucket_refill(struct bucket *b, uint64_t elapsed_ms)
{
    if (b->rate == 0)
        return;
    /* elapsed * rate could overflow only long after the bucket is full */
    if (elapsed_ms >= (b->cap - b->tokens) / b->rate + 1)
        b->tokens = b->cap;
    else
        b->tokens += elapsed_ms * b->rate;
}

static bool bucket_has(const struct bucket *b, uint64_t cost)
{
    return b->rate == 0 || b->tokens >= cost;
}

static void bucket_take(struct bucket *b, uint64_t cost)
{
    if (b->rate != 0)
        b->tokens -= cost;
}

/* ---- per frame ---- */

static bool applies(int direction, enum sg_dir dir)
{
    return direction == DIR_BOTH || (direction == DIR_TO_CLIENT && dir == SG_DIR_S2C) ||
           (direction == DIR_TO_SERVER && dir == SG_DIR_C2S);
}

static const char *dir_name(enum sg_dir dir)
{
    return dir == SG_DIR_S2C ? "to_client" : "to_server";
}

static struct ratelimit_slot *slot_open(struct sg_filter_call *call)
{
    const struct ratelimit_conf *c = call->conf;
    struct ratelimit_slot *s = calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    for (int dir = 0; dir < 2; dir++) {
        bucket_init(&s->d[dir].packets, c->packets_per_second, c->burst);
        bucket_init(&s->d[dir].bytes, c->bytes_per_second, c->burst_bytes);
        s->d[dir].last_ms = call->now_ms;
    }
    s->index = -1;
    if (call->proxy) {
        s->chain = call->proxy->chain;
        s->index = call->proxy->index;
    }
    *call->slot = s;
    return s;
}

static int on_frame(struct sg_filter_call *call)
{
    const struct ratelimit_conf *c = call->conf;
    struct ratelimit_slot *s = *call->slot;
    enum sg_dir dir;
    struct ratelimit_dir *d;
    uint64_t bytes_cost;

    if (!call->frame)
        return SG_FILTER_PASS;
    dir = call->frame->dir;
    if ((dir != SG_DIR_C2S && dir != SG_DIR_S2C) || !applies(c->direction, dir))
        return SG_FILTER_PASS;
    if (!s && !(s = slot_open(call)))
        return -ENOMEM;
    d = &s->d[dir];

    /* Refill for the time since this direction's last datagram. */
    if (call->now_ms > d->last_ms) {
        bucket_refill(&d->packets, call->now_ms - d->last_ms);
        bucket_refill(&d->bytes, call->now_ms - d->last_ms);
        d->last_ms = call->now_ms;
    }

    /* Both caps must have room; otherwise the datagram is dropped. */
    bytes_cost = (uint64_t)call->len * MILLI;
    if (bucket_has(&d->packets, MILLI) && bucket_has(&d->bytes, bytes_cost)) {
        bucket_take(&d->packets, MILLI);
        bucket_take(&d->bytes, bytes_cost);
        d->passed++;
        return SG_FILTER_PASS;
    }
    d->dropped++;
    d->dropped_bytes += call->len;
    if (!s->said) {
        s->said = true;
        sg_filter_log(call, SG_FILTER_LOG_WARN,
                      "limiting %s: over %" PRId64 " packets/s (burst %" PRId64 ") or %" PRId64
                      " bytes/s (burst %" PRId64
                      "; 0 = no cap); datagrams over the cap are dropped (said once per session, "
                      "counts at its end)",
                      dir_name(dir), c->packets_per_second, c->burst, c->bytes_per_second,
                      c->burst_bytes);
    }
    return SG_FILTER_DROP;
}

static void session_end(void *route_state, const struct sg_filter_session *session, void *slot)
{
    struct ratelimit_slot *s = slot;
    const struct ratelimit_dir *ts = &s->d[SG_DIR_C2S], *tc = &s->d[SG_DIR_S2C];
    char text[320];

    (void)route_state;
    /* The chain's logger (the interface gives session_end none of its own). */
    if (s->chain && s->chain->log && s->index >= 0 && s->index < s->chain->n) {
        snprintf(text, sizeof(text),
                 "session end: dropped to_server %" PRIu64 " of %" PRIu64 " datagrams (%" PRIu64
                 " bytes), to_client %" PRIu64 " of %" PRIu64 " datagrams (%" PRIu64 " bytes)",
                 ts->dropped, ts->dropped + ts->passed, ts->dropped_bytes, tc->dropped,
                 tc->dropped + tc->passed, tc->dropped_bytes);
        s->chain->log(s->chain->log_ctx,
                      ts->dropped || tc->dropped ? SG_FILTER_LOG_INFO : SG_FILTER_LOG_DEBUG,
                      s->chain->f[s->index].fc->label, session->id, text);
    }
    free(s);
}

static const struct sg_conf_directive directives[] = {
    {.name = "packets_per_second",
     .type = SG_CONF_INT,
     .offset = offsetof(struct ratelimit_conf, packets_per_second),
     .min = 0,
     .max = RATE_MAX,
     .argname = "N",
     .help = "datagrams per second and direction (default 0: no packet cap)"},
    {.name = "bytes_per_second",
     .type = SG_CONF_SIZE,
     .offset = offsetof(struct ratelimit_conf, bytes_per_second),
     .min = 0,
     .max = RATE_MAX,
     .argname = "SIZE",
     .help = "bytes per second and direction, k/M/G allowed (default 0: no "
             "byte cap)"},
    {.name = "burst",
     .type = SG_CONF_INT,
     .offset = offsetof(struct ratelimit_conf, burst),
     .min = 1,
     .max = RATE_MAX,
     .argname = "N",
     .help = "datagrams that may pass at once (default: packets_per_second)"},
    {.name = "burst_bytes",
     .type = SG_CONF_SIZE,
     .offset = offsetof(struct ratelimit_conf, burst_bytes),
     .min = 1,
     .max = RATE_MAX,
     .argname = "SIZE",
     .help = "bytes that may pass at once (default: bytes_per_second)"},
    {.name = "direction",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct ratelimit_conf, direction),
     .choices = direction_choices,
     .argname = "both|to_client|to_server",
     .help = "which way to limit (default both)"},
    {NULL},
};

const struct sg_filter_impl sg_builtin_ratelimit = {
    .name = "ratelimit",
    .description = "cap each session's datagrams and bytes per second (token buckets); drop "
                   "the excess",
    .example = "filter ratelimit {\n"
               "    packets_per_second 100\n"
               "    burst 20\n"
               "    bytes_per_second 64k\n"
               "    direction to_server\n"
               "}\n",
    .conf_size = sizeof(struct ratelimit_conf),
    .directives = directives,
    .conf_init = conf_init,
    .conf_check = conf_check,
    .on_frame = on_frame,
    .session_end = session_end,
};
