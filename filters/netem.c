/*
 * The 'netem' filter: network emulation per direction, for testing games
 * and the proxy under bad networks (loss, delay, jitter, duplication,
 * reordering), like Linux's netem qdisc but per route and reproducible.
 *
 * Every frame of the route's sessions is looked at, decoded or not
 * (SG_FRAME_RAW frames of sessions nobody decodes too).  Per frame and
 * direction, four independent draws decide:
 *
 *   loss       the frame is dropped (SG_FILTER_DROP: the receiver sees loss)
 *   delay      it is held `delay` ms, plus a uniform jitter in
 *              [-jitter, +jitter] ms (the sum is never below 0)
 *   reorder    it is held `reorder_delay` ms more, so later ones overtake it
 *   duplicate  one extra copy is sent (call->copies)
 *
 * The proxy applies delay and copies (proxy/session.c emit()); what earlier
 * filters asked for is added to, not replaced.
 *
 * Randomness: one splitmix64 stream per session and direction, seeded from
 * the route's `seed` (or a random one), the session id and the direction,
 * so a run with `seed N` makes the same decisions for the same sequence of
 * datagrams each way, however the two directions interleave.  No global
 * state, no rand().
 */
#include "filters/chain.h"
#include "filters/filter.h"

#include "protocols/error.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define PPM 1000000u /* a probability is kept in parts per million: 100% = PPM */

/* Where a setting applies: both directions, or one (the directive's suffix). */
enum scope { SCOPE_BOTH, SCOPE_TO_CLIENT, SCOPE_TO_SERVER, SCOPE_COUNT };
static const char *const scope_suffix[SCOPE_COUNT] = {"", "_to_client", "_to_server"};

enum pct { PCT_LOSS, PCT_DUPLICATE, PCT_REORDER, PCT_COUNT };
static const char *const pct_name[PCT_COUNT] = {"loss", "duplicate", "reorder"};

enum dur { DUR_DELAY, DUR_JITTER, DUR_REORDER_DELAY, DUR_COUNT };

#define REORDER_DELAY_DEFAULT 50    /* ms */
#define DURATION_MAX          60000 /* ms, per setting */

/* What one direction does, resolved from the settings. */
struct netem_eff {
    uint32_t pct[PCT_COUNT]; /* ppm */
    uint32_t dur[DUR_COUNT]; /* ms */
};

struct netem_conf {
    char *pct[SCOPE_COUNT][PCT_COUNT];   /* "10", "10%", "0.5%"; NULL: not given */
    int64_t dur[SCOPE_COUNT][DUR_COUNT]; /* ms; -1: not given */
    int64_t seed;                        /* -1: not given (random per route) */
    /* from conf_check, indexed by enum sg_dir */
    struct netem_eff eff[2];
};

struct netem_route {
    uint64_t seed;
    bool random_seed;
};

struct netem_counts {
    uint64_t seen, lost, duplicated, reordered;
};

struct netem_slot {
    uint64_t rng[2]; /* per enum sg_dir */
    struct netem_counts n[2];
    struct sg_chain *chain; /* for the log line at session end */
    int index;
};

/* ---- randomness ---- */

/* splitmix64 (Steele, Lea, Flood 2014): one 64-bit state, full period. */
static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));

    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* A uniform integer in [0, n) (n > 0); the modulo bias is below 2^-40 for n <= 2^24. */
static uint64_t rng_below(uint64_t *state, uint64_t n)
{
    return rng_next(state) % n;
}

static uint64_t stream_seed(uint64_t seed, uint64_t session, enum sg_dir dir)
{
    uint64_t s = seed;
    uint64_t a = rng_next(&s);

    s = a ^ (session * UINT64_C(0xD1B54A32D192ED03)) ^ ((uint64_t)dir + 1);
    return rng_next(&s);
}

/* ---- configuration ---- */

static void conf_init(void *p)
{
    struct netem_conf *c = p;

    for (int s = 0; s < SCOPE_COUNT; s++)
        for (int d = 0; d < DUR_COUNT; d++)
            c->dur[s][d] = -1;
    c->seed = -1;
}

/* "10", "10%", "2.5", "0.125%" -> ppm; 0..100 with up to 4 decimals. */
static int parse_percent(const char *text, uint32_t *ppm)
{
    const char *p = text;
    uint64_t whole = 0, frac = 0;
    int digits = 0, decimals = 0;

    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        whole = whole * 10 + (uint64_t)(*p - '0');
        if (whole > 100)
            return -ERANGE;
    }
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++, decimals++) {
            if (decimals == 4)
                return -EINVAL;
            frac = frac * 10 + (uint64_t)(*p - '0');
        }
        if (decimals == 0)
            return -EINVAL;
    }
    if (*p == '%')
        p++;
    if (*p || digits == 0)
        return -EINVAL;
    for (int i = decimals; i < 4; i++)
        frac *= 10;
    whole = whole * 10000 + frac; /* in 1/10000 percent = ppm */
    if (whole > PPM)
        return -ERANGE;
    *ppm = (uint32_t)whole;
    return 0;
}

static int conf_check(void *p, char *err, size_t errlen)
{
    struct netem_conf *c = p;
    bool any = false;
    uint32_t pct[SCOPE_COUNT][PCT_COUNT] = {{0}};

    /* The percentages, as given. */
    for (int s = 0; s < SCOPE_COUNT; s++) {
        for (int k = 0; k < PCT_COUNT; k++) {
            if (!c->pct[s][k])
                continue;
            any = true;
            if (parse_percent(c->pct[s][k], &pct[s][k]) < 0) {
                snprintf(err, errlen,
                         "'%s%s' expects a percentage from 0 to 100 (\"10\", \"10%%\", "
                         "\"0.5%%\"; at most 4 decimals), got '%s'",
                         pct_name[k], scope_suffix[s], c->pct[s][k]);
                return SG_E_CONFIG;
            }
        }
        for (int k = 0; k < DUR_COUNT; k++)
            any |= c->dur[s][k] >= 0;
    }
    if (!any) {
        snprintf(err, errlen,
                 "sets nothing: give at least one of 'loss', 'delay', 'jitter', 'duplicate' or "
                 "'reorder' (or their _to_client / _to_server forms)");
        return SG_E_CONFIG;
    }

    /* Each direction: its own setting, else the one for both, else the default. */
    for (int dir = 0; dir < 2; dir++) {
        int own = dir == SG_DIR_S2C ? SCOPE_TO_CLIENT : SCOPE_TO_SERVER;
        struct netem_eff *e = &c->eff[dir];

        for (int k = 0; k < PCT_COUNT; k++)
            e->pct[k] = c->pct[own][k] ? pct[own][k] : pct[SCOPE_BOTH][k];
        for (int k = 0; k < DUR_COUNT; k++) {
            int64_t v = c->dur[own][k] >= 0 ? c->dur[own][k] : c->dur[SCOPE_BOTH][k];
            if (v < 0)
                v = k == DUR_REORDER_DELAY ? REORDER_DELAY_DEFAULT : 0;
            e->dur[k] = (uint32_t)v;
        }
    }
    return 0;
}

/* ---- per route ---- */

static int create(const void *conf, void **route_state, char *err, size_t errlen)
{
    const struct netem_conf *c = conf;
    struct netem_route *r = calloc(1, sizeof(*r));

    if (!r) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    if (c->seed >= 0) {
        r->seed = (uint64_t)c->seed;
    } else {
        /* A random seed, logged with each session so a run can be repeated. */
        struct timespec ts;
        if (getrandom(&r->seed, sizeof(r->seed), GRND_NONBLOCK) != (ssize_t)sizeof(r->seed)) {
            clock_gettime(CLOCK_REALTIME, &ts);
            r->seed = (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec ^
                      ((uint64_t)getpid() << 32);
        }
        r->seed &= (UINT64_C(1) << 62) - 1; /* fits the `seed` directive */
        r->random_seed = true;
    }
    *route_state = r;
    return 0;
}

static void destroy(void *route_state)
{
    free(route_state);
}

/* ---- per frame ---- */

static void describe_dir(char *out, size_t cap, const struct netem_eff *e)
{
    snprintf(out, cap,
             "loss %" PRIu32 ".%04" PRIu32 "%%, delay %" PRIu32 " ms, jitter %" PRIu32
             " ms, duplicate %" PRIu32 ".%04" PRIu32 "%%, reorder %" PRIu32 ".%04" PRIu32
             "%% (+%" PRIu32 " ms)",
             e->pct[PCT_LOSS] / 10000, e->pct[PCT_LOSS] % 10000, e->dur[DUR_DELAY],
             e->dur[DUR_JITTER], e->pct[PCT_DUPLICATE] / 10000, e->pct[PCT_DUPLICATE] % 10000,
             e->pct[PCT_REORDER] / 10000, e->pct[PCT_REORDER] % 10000, e->dur[DUR_REORDER_DELAY]);
}

static struct netem_slot *slot_open(struct sg_filter_call *call)
{
    const struct netem_conf *c = call->conf;
    const struct netem_route *r = call->route_state;
    struct netem_slot *s = calloc(1, sizeof(*s));
    char to_server[192], to_client[192];

    if (!s)
        return NULL;
    for (int dir = 0; dir < 2; dir++)
        s->rng[dir] = stream_seed(r->seed, call->session->id, (enum sg_dir)dir);
    if (call->proxy) {
        s->chain = call->proxy->chain;
        s->index = call->proxy->index;
    }
    *call->slot = s;
    describe_dir(to_server, sizeof(to_server), &c->eff[SG_DIR_C2S]);
    describe_dir(to_client, sizeof(to_client), &c->eff[SG_DIR_S2C]);
    sg_filter_log(call, SG_FILTER_LOG_INFO, "to_server: %s; to_client: %s; seed %" PRIu64 "%s",
                  to_server, to_client, r->seed,
                  r->random_seed ? " (random: add 'seed' with this value to repeat the run)" : "");
    return s;
}

static bool chance(uint64_t *rng, uint32_t ppm)
{
    /* Always draw, so each decision keeps its place in the stream. */
    uint64_t u = rng_below(rng, PPM);
    return u < ppm;
}

static int on_frame(struct sg_filter_call *call)
{
    const struct netem_conf *c = call->conf;
    struct netem_slot *s = *call->slot;
    enum sg_dir dir = call->frame ? call->frame->dir : SG_DIR_C2S;
    const struct netem_eff *e;
    struct netem_counts *n;
    uint64_t *rng;
    bool lost, reordered, duplicated;
    int64_t delay, total;
    uint32_t jitter;

    if (dir != SG_DIR_C2S && dir != SG_DIR_S2C)
        return SG_FILTER_PASS;
    if (!s && !(s = slot_open(call)))
        return -ENOMEM;
    e = &c->eff[dir];
    rng = &s->rng[dir];
    n = &s->n[dir];
    n->seen++;

    /* Four draws per frame, whatever the outcome (see the top comment). */
    lost = chance(rng, e->pct[PCT_LOSS]);
    jitter = e->dur[DUR_JITTER];
    delay = (int64_t)e->dur[DUR_DELAY] - (int64_t)jitter +
            (int64_t)rng_below(rng, 2 * (uint64_t)jitter + 1);
    reordered = chance(rng, e->pct[PCT_REORDER]);
    duplicated = chance(rng, e->pct[PCT_DUPLICATE]);

    if (lost) {
        n->lost++;
        return SG_FILTER_DROP;
    }
    if (delay < 0)
        delay = 0;
    if (reordered) {
        delay += e->dur[DUR_REORDER_DELAY];
        n->reordered++;
    }
    total = (int64_t)call->delay_ms + delay;
    call->delay_ms = total > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)total;
    if (duplicated) {
        n->duplicated++;
        if (call->copies < UINT8_MAX)
            call->copies++;
    }
    return SG_FILTER_PASS;
}

static void session_end(void *route_state, const struct sg_filter_session *session, void *slot)
{
    struct netem_slot *s = slot;
    const struct netem_counts *ts = &s->n[SG_DIR_C2S], *tc = &s->n[SG_DIR_S2C];
    char text[320];

    (void)route_state;
    /* The chain's logger (the interface gives session_end none of its own). */
    if (s->chain && s->chain->log && s->index >= 0 && s->index < s->chain->n) {
        snprintf(text, sizeof(text),
                 "session end: to_server %" PRIu64 " datagrams, %" PRIu64 " lost, %" PRIu64
                 " duplicated, %" PRIu64 " reordered; to_client %" PRIu64 " datagrams, %" PRIu64
                 " lost, %" PRIu64 " duplicated, %" PRIu64 " reordered",
                 ts->seen, ts->lost, ts->duplicated, ts->reordered, tc->seen, tc->lost,
                 tc->duplicated, tc->reordered);
        s->chain->log(s->chain->log_ctx, SG_FILTER_LOG_INFO, s->chain->f[s->index].fc->label,
                      session->id, text);
    }
    free(s);
}

/* ---- the directive table ---- */

#define PCT_DIRECTIVE(k, s, nm, what)                                                              \
    {                                                                                              \
        .name = nm, .type = SG_CONF_STRING, .offset = offsetof(struct netem_conf, pct[s][k]),      \
        .argname = "PERCENT", .help = what                                                         \
    }
#define DUR_DIRECTIVE(k, s, nm, what)                                                              \
    {                                                                                              \
        .name = nm, .type = SG_CONF_DURATION, .offset = offsetof(struct netem_conf, dur[s][k]),    \
        .min = 0, .max = DURATION_MAX, .argname = "DURATION", .help = what                         \
    }

static const struct sg_conf_directive directives[] = {
    PCT_DIRECTIVE(PCT_LOSS, SCOPE_BOTH, "loss", "drop this share of datagrams, both ways (0)"),
    PCT_DIRECTIVE(PCT_LOSS, SCOPE_TO_CLIENT, "loss_to_client", "loss towards the client only"),
    PCT_DIRECTIVE(PCT_LOSS, SCOPE_TO_SERVER, "loss_to_server", "loss towards the server only"),
    DUR_DIRECTIVE(DUR_DELAY, SCOPE_BOTH, "delay", "hold every datagram this long (0)"),
    DUR_DIRECTIVE(DUR_DELAY, SCOPE_TO_CLIENT, "delay_to_client", "delay towards the client"),
    DUR_DIRECTIVE(DUR_DELAY, SCOPE_TO_SERVER, "delay_to_server", "delay towards the server"),
    DUR_DIRECTIVE(DUR_JITTER, SCOPE_BOTH, "jitter",
                  "add a uniform random -jitter..+jitter to the delay (0)"),
    DUR_DIRECTIVE(DUR_JITTER, SCOPE_TO_CLIENT, "jitter_to_client", "jitter towards the client"),
    DUR_DIRECTIVE(DUR_JITTER, SCOPE_TO_SERVER, "jitter_to_server", "jitter towards the server"),
    PCT_DIRECTIVE(PCT_DUPLICATE, SCOPE_BOTH, "duplicate", "send this share of datagrams twice (0)"),
    PCT_DIRECTIVE(PCT_DUPLICATE, SCOPE_TO_CLIENT, "duplicate_to_client",
                  "duplication towards the client"),
    PCT_DIRECTIVE(PCT_DUPLICATE, SCOPE_TO_SERVER, "duplicate_to_server",
                  "duplication towards the server"),
    PCT_DIRECTIVE(PCT_REORDER, SCOPE_BOTH, "reorder",
                  "hold this share of datagrams reorder_delay longer, so later ones overtake "
                  "them (0)"),
    PCT_DIRECTIVE(PCT_REORDER, SCOPE_TO_CLIENT, "reorder_to_client",
                  "reordering towards the client"),
    PCT_DIRECTIVE(PCT_REORDER, SCOPE_TO_SERVER, "reorder_to_server",
                  "reordering towards the server"),
    DUR_DIRECTIVE(DUR_REORDER_DELAY, SCOPE_BOTH, "reorder_delay",
                  "the extra delay of a reordered datagram (50ms)"),
    DUR_DIRECTIVE(DUR_REORDER_DELAY, SCOPE_TO_CLIENT, "reorder_delay_to_client",
                  "reorder_delay towards the client"),
    DUR_DIRECTIVE(DUR_REORDER_DELAY, SCOPE_TO_SERVER, "reorder_delay_to_server",
                  "reorder_delay towards the server"),
    {.name = "seed",
     .type = SG_CONF_INT,
     .offset = offsetof(struct netem_conf, seed),
     .min = 0,
     .max = INT64_MAX,
     .argname = "N",
     .help = "seed of the random decisions, for reproducible runs (default: random, logged)"},
    {NULL},
};

const struct sg_filter_impl sg_builtin_netem = {
    .name = "netem",
    .description = "network emulation per direction: loss, delay, jitter, duplication, reordering",
    .example = "filter netem {\n"
               "    loss 5%\n"
               "    loss_to_server 10%\n"
               "    delay 40ms\n"
               "    jitter 10ms\n"
               "    duplicate 1%\n"
               "    reorder 2%\n"
               "    seed 42\n"
               "}\n",
    .conf_size = sizeof(struct netem_conf),
    .directives = directives,
    .conf_init = conf_init,
    .conf_check = conf_check,
    .create = create,
    .destroy = destroy,
    .on_frame = on_frame,
    .session_end = session_end,
};
