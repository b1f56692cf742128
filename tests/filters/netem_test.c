/*
 * Unit tests of the 'netem' filter (filters/netem.c) through the one-filter
 * chain of fake.h.  Statistical checks use bounds of 5 standard deviations
 * of the binomial (or uniform) distribution, computed below; with a fixed
 * seed the outcome is also fixed, so they cannot flicker.
 *
 *     filter_netem_test CASE
 */
#include "tests/filters/fake.h"
#include "tests/unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 20000

/* Square root and absolute value without libm (Newton's method, plenty for bounds). */
static double root(double x)
{
    double r = x > 1 ? x : 1;

    for (int i = 0; i < 100 && x > 0; i++)
        r = 0.5 * (r + x / r);
    return x > 0 ? r : 0;
}

static double absd(double x)
{
    return x < 0 ? -x : x;
}

static int open_chain(struct fake_chain *fc, const char *conf)
{
    int rc = fake_chain_open(fc, "netem", conf, NULL, 0);
    CHECKF(rc == 0, "cannot configure netem with:\n%s", conf);
    return rc;
}

/* Run n frames in `dir`; record each verdict in `out` (may be NULL), return the drops. */
struct tally {
    unsigned dropped, duplicated, seen;
    uint32_t min_delay, max_delay;
    double delay_sum;
    unsigned delay_hist[512];
};

static void run(struct fake_chain *fc, enum sg_dir dir, enum sg_frame_kind kind, int n,
                struct tally *t, unsigned char *verdicts)
{
    memset(t, 0, sizeof(*t));
    t->min_delay = UINT32_MAX;
    for (int i = 0; i < n; i++) {
        struct sg_chain_result res;
        int v;

        fake_frame(&fc->codec, dir, kind);
        v = fake_chain_run(fc, (uint64_t)i, &res);
        t->seen++;
        if (verdicts)
            verdicts[i] = (unsigned char)v;
        if (v == SG_FILTER_DROP) {
            t->dropped++;
            continue;
        }
        CHECKF(v == SG_FILTER_PASS, "netem changed a frame (verdict %d)", v);
        CHECKF(res.copies <= 1, "%u copies of one frame", (unsigned)res.copies);
        t->duplicated += res.copies;
        t->min_delay = res.delay_ms < t->min_delay ? res.delay_ms : t->min_delay;
        t->max_delay = res.delay_ms > t->max_delay ? res.delay_ms : t->max_delay;
        t->delay_sum += res.delay_ms;
        if (res.delay_ms < 512)
            t->delay_hist[res.delay_ms]++;
    }
}

/* Is `k` of `n` trials within 5 sigma of probability p? */
static bool binomial_ok(unsigned k, unsigned n, double p, const char *what)
{
    double mean = n * p, sigma = root(n * p * (1 - p));
    bool ok = absd(k - mean) <= 5 * sigma;

    if (!ok)
        fprintf(stderr, "%s: %u of %u, expected %.1f +- %.1f (5 sigma)\n", what, k, n, mean,
                5 * sigma);
    return ok;
}

/* ---- cases ---- */

static void loss_rate(void)
{
    struct fake_chain fc;
    struct tally ts, tcl;

    if (open_chain(&fc, "loss 10%\nseed 42") < 0)
        return;
    run(&fc, SG_DIR_C2S, SG_FRAME_MESSAGE, N, &ts, NULL);
    run(&fc, SG_DIR_S2C, SG_FRAME_MESSAGE, N, &tcl, NULL);
    CHECKF(binomial_ok(ts.dropped, N, 0.10, "to_server loss"), "loss 10%% to server");
    CHECKF(binomial_ok(tcl.dropped, N, 0.10, "to_client loss"), "loss 10%% to client");
    CHECKF(ts.duplicated == 0 && tcl.duplicated == 0, "duplicates without 'duplicate'");
    CHECKF(ts.max_delay == 0 && tcl.max_delay == 0, "a delay without 'delay'");
    fake_chain_close(&fc);

    /* Per-direction values win over the one for both, in any order. */
    if (open_chain(&fc, "loss_to_server 20\nloss 1.5%\nloss_to_client 5\nseed 7") < 0)
        return;
    run(&fc, SG_DIR_C2S, SG_FRAME_MESSAGE, N, &ts, NULL);
    run(&fc, SG_DIR_S2C, SG_FRAME_MESSAGE, N, &tcl, NULL);
    CHECKF(binomial_ok(ts.dropped, N, 0.20, "loss_to_server 20"), "per-direction loss");
    CHECKF(binomial_ok(tcl.dropped, N, 0.05, "loss_to_client 5"), "per-direction loss");
    fake_chain_close(&fc);

    /* A fractional percentage. */
    if (open_chain(&fc, "loss_to_client 0.5%\nseed 7") < 0)
        return;
    run(&fc, SG_DIR_S2C, SG_FRAME_MESSAGE, N, &tcl, NULL);
    run(&fc, SG_DIR_C2S, SG_FRAME_MESSAGE, N, &ts, NULL);
    CHECKF(binomial_ok(tcl.dropped, N, 0.005, "loss 0.5%"), "fractional loss");
    CHECKF(ts.dropped == 0, "to_server lost %u without a setting for it", ts.dropped);
    fake_chain_close(&fc);
}

static void extremes(void)
{
    struct fake_chain fc;
    struct tally t;

    if (open_chain(&fc, "loss_to_server 100%\nloss_to_client 0") < 0)
        return;
    run(&fc, SG_DIR_C2S, SG_FRAME_MESSAGE, 1000, &t, NULL);
    CHECKF(t.dropped == 1000, "loss 100%% dropped %u of 1000", t.dropped);
    run(&fc, SG_DIR_S2C, SG_FRAME_MESSAGE, 1000, &t, NULL);
    CHECKF(t.dropped == 0, "loss 0 dropped %u of 1000", t.dropped);
    fake_chain_close(&fc);
}

/* Sessions nobody decodes: raw frames, no messages, no codec. */
static void raw_frames(void)
{
    struct fake_chain fc;
    struct tally t;

    if (open_chain(&fc, "loss 50\nseed 3") < 0)
        return;
    fc.session.codec = NULL;
    fc.session.codec_state = NULL;
    run(&fc, SG_DIR_C2S, SG_FRAME_RAW, N, &t, NULL);
    CHECKF(binomial_ok(t.dropped, N, 0.5, "raw loss 50"), "raw frames");
    fake_chain_close(&fc);
}

static void reproducible(void)
{
    static unsigned char a[N], b[N], c[N], d[N], e[N];
    struct fake_chain fc;
    struct tally t;

    if (open_chain(&fc, "loss 10\nseed 1234") < 0)
        return;
    run(&fc, SG_DIR_C2S, SG_FRAME_MESSAGE, N, &t, a);
    fake_chain_close(&fc);

    /* The same seed and session: the same decisions, even with the other way interleaved. */
    if (open_chain(&fc, "loss 10\nseed 1234") < 0)
        return;
    for (int i = 0; i < N; i++) {
        struct tally other;
        run(&fc, SG_DIR_C2S, SG_FRAME_MESSAGE, 1, &t, &b[i]);
        if (i % 3 == 0)
            run(&fc, SG_DIR_S2C, SG_FRAME_MESSAGE, 1, &other, NULL);
    }
    fake_chain_close(&fc);
    CHECKF(memcmp(a, b, N) == 0, "seed 1234 gave different decisions in two runs");

    /* Another seed: other decisions. */
    if (open_chain(&fc, "loss 10\nseed 1235") < 0)
        return;
    run(&fc, SG_DIR_C2S, SG_FRAME_MESSAGE, N, &t, c);
    fake_chain_close(&fc);
    CHECKF(memcmp(a, c, N) != 0, "seeds 1234 and 1235 gave the same decisions");

    /* Another session with the same seed: other decisions too. */
    if (open_chain(&fc, "loss 10\nseed 1234") < 0)
        return;
    fc.session.id = 2;
    run(&fc, SG_DIR_C2S, SG_FRAME_MESSAGE, N, &t, d);
    fake_chain_close(&fc);
    CHECKF(memcmp(a, d, N) != 0, "sessions 1 and 2 gave the same decisions");

    /* No seed: a random one, logged; two routes differ. */
    if (open_chain(&fc, "loss 10") < 0)
        return;
    run(&fc, SG_DIR_C2S, SG_FRAME_MESSAGE, N, &t, e);
    CHECKF(strstr(fc.log, "(random: add 'seed'") != NULL, "random seed not logged: %s", fc.log);
    fake_chain_close(&fc);
    CHECKF(memcmp(a, e, N) != 0, "a random seed gave the decisions of seed 1234");
}

static void delay_jitter(void)
{
    struct fake_chain fc;
    struct tally t;
    double mean, sd_mean;
    int missing = 0;

    if (open_chain(&fc, "delay 100ms\njitter 20ms\nseed 9") < 0)
        return;
    run(&fc, SG_DIR_S2C, SG_FRAME_MESSAGE, N, &t, NULL);
    CHECKF(t.dropped == 0 && t.duplicated == 0, "loss or duplicates without asking");
    CHECKF(t.min_delay == 80 && t.max_delay == 120, "delay range %u..%u, expected 80..120",
          t.min_delay, t.max_delay);
    for (int ms = 80; ms <= 120; ms++)
        missing += t.delay_hist[ms] == 0;
    CHECKF(missing == 0, "%d delay values of 80..120 never drawn", missing);
    /* The mean of a uniform over 41 values: 100, sd root((41^2-1)/12). */
    mean = t.delay_sum / N;
    sd_mean = root((41.0 * 41.0 - 1) / 12) / root(N);
    CHECKF(absd(mean - 100) <= 5 * sd_mean, "mean delay %.3f, expected 100 +- %.3f", mean,
          5 * sd_mean);
    fake_chain_close(&fc);

    /* Jitter larger than the delay: never below 0. */
    if (open_chain(&fc, "delay_to_server 5ms\njitter_to_server 20ms\nseed 9") < 0)
        return;
    run(&fc, SG_DIR_C2S, SG_FRAME_MESSAGE, N, &t, NULL);
    CHECKF(t.min_delay == 0 && t.max_delay == 25, "delay range %u..%u, expected 0..25", t.min_delay,
          t.max_delay);
    /* P(0) = 16/41 (every draw of -20..-5 clips to 0). */
    CHECKF(binomial_ok(t.delay_hist[0], N, 16.0 / 41, "clipped to 0"), "clipping at 0");
    run(&fc, SG_DIR_S2C, SG_FRAME_MESSAGE, 1000, &t, NULL);
    CHECKF(t.max_delay == 0, "to_client delayed %u ms by a to_server setting", t.max_delay);
    fake_chain_close(&fc);
}

static void duplicate(void)
{
    struct fake_chain fc;
    struct tally t;

    if (open_chain(&fc, "duplicate 25%\nseed 11") < 0)
        return;
    run(&fc, SG_DIR_C2S, SG_FRAME_MESSAGE, N, &t, NULL);
    CHECKF(binomial_ok(t.duplicated, N, 0.25, "duplicate 25%"), "duplication rate");
    CHECKF(t.dropped == 0, "dropped %u without loss", t.dropped);
    fake_chain_close(&fc);

    if (open_chain(&fc, "duplicate_to_client 100\nseed 11") < 0)
        return;
    run(&fc, SG_DIR_S2C, SG_FRAME_MESSAGE, 500, &t, NULL);
    CHECKF(t.duplicated == 500, "duplicate 100: %u of 500", t.duplicated);
    run(&fc, SG_DIR_C2S, SG_FRAME_MESSAGE, 500, &t, NULL);
    CHECKF(t.duplicated == 0, "to_server duplicated %u", t.duplicated);
    fake_chain_close(&fc);
}

static void reorder(void)
{
    struct fake_chain fc;
    struct tally t;

    if (open_chain(&fc, "delay 10ms\nreorder 10%\nreorder_delay 200ms\nseed 5") < 0)
        return;
    run(&fc, SG_DIR_C2S, SG_FRAME_MESSAGE, N, &t, NULL);
    CHECKF(t.delay_hist[10] + t.delay_hist[210] == N, "delays other than 10 and 210 ms");
    CHECKF(binomial_ok(t.delay_hist[210], N, 0.10, "reorder 10%"), "reorder rate");
    fake_chain_close(&fc);

    /* The default extra delay is 50 ms. */
    if (open_chain(&fc, "reorder 100\nseed 5") < 0)
        return;
    run(&fc, SG_DIR_S2C, SG_FRAME_MESSAGE, 100, &t, NULL);
    CHECKF(t.min_delay == 50 && t.max_delay == 50, "reorder_delay default: %u..%u ms", t.min_delay,
          t.max_delay);
    fake_chain_close(&fc);
}

static void session_log(void)
{
    struct fake_chain fc;
    struct tally ts, tcl;
    char want[256];

    if (open_chain(&fc, "loss 30\nduplicate 10\nseed 77") < 0)
        return;
    run(&fc, SG_DIR_C2S, SG_FRAME_MESSAGE, 1000, &ts, NULL);
    run(&fc, SG_DIR_S2C, SG_FRAME_MESSAGE, 700, &tcl, NULL);
    CHECKF(strstr(fc.log, "seed 77") != NULL, "no seed in the log: %s", fc.log);
    CHECKF(strstr(fc.log, "loss 30.0000%") != NULL, "settings not logged: %s", fc.log);
    sg_chain_session_end(fc.chain, fc.slots, &fc.session);
    snprintf(want, sizeof(want),
             "to_server 1000 datagrams, %u lost, %u duplicated, 0 reordered; to_client 700 "
             "datagrams, %u lost, %u duplicated",
             ts.dropped, ts.duplicated, tcl.dropped, tcl.duplicated);
    CHECKF(strstr(fc.log, want) != NULL, "session end line missing '%s' in:\n%s", want, fc.log);
    fake_chain_close(&fc);
}

static void config_errors(void)
{
    static const struct {
        const char *conf, *want;
    } bad[] = {
        {"", "sets nothing"},
        {"loss 101", "'loss' expects a percentage"},
        {"loss -1", "'loss' expects a percentage"},
        {"loss_to_client ten", "'loss_to_client' expects a percentage"},
        {"duplicate 1.23456%", "'duplicate' expects a percentage"},
        {"reorder 5%%", "'reorder' expects a percentage"},
        {"loss .5", "'loss' expects a percentage"},
        {"delay 2m", "delay"},
        {"delay soon", "delay"},
        {"seed -3", "seed"},
        {"los 10", "los"},
    };
    char err[512];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct fake_chain fc;
        int rc = fake_chain_open(&fc, "netem", bad[i].conf, err, sizeof(err));

        CHECKF(rc < 0, "'%s' was accepted", bad[i].conf);
        if (rc < 0)
            CHECKF(strstr(err, bad[i].want) != NULL, "'%s': message '%s' lacks '%s'", bad[i].conf,
                  err, bad[i].want);
        else
            fake_chain_close(&fc);
    }
    /* And accepted forms. */
    {
        static const char *const good[] = {"loss 0",           "loss 100%", "loss 2.5",
                                           "loss 0.0001%",     "delay 0",   "jitter 1s",
                                           "reorder_delay 60s"};
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
            struct fake_chain fc;
            int rc = fake_chain_open(&fc, "netem", good[i], err, sizeof(err));
            CHECKF(rc == 0, "'%s' refused: %s", good[i], err);
            if (rc == 0)
                fake_chain_close(&fc);
        }
    }
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"loss_rate", loss_rate},
        {"extremes", extremes},
        {"raw_frames", raw_frames},
        {"reproducible", reproducible},
        {"delay_jitter", delay_jitter},
        {"duplicate", duplicate},
        {"reorder", reorder},
        {"session_log", session_log},
        {"config_errors", config_errors},
    };

    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
