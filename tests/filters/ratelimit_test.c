/*
 * Unit tests of the 'ratelimit' filter (filters/ratelimit.c) through the
 * one-filter chain of fake.h.  The clock is the test's (now_ms), so every
 * count is exact; the fake chain's datagrams are 4 bytes long.
 *
 *     filter_ratelimit_test CASE
 */
#include "tests/filters/fake.h"
#include "tests/unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int open_chain(struct fake_chain *fc, const char *conf)
{
    int rc = fake_chain_open(fc, "ratelimit", conf, NULL, 0);
    CHECKF(rc == 0, "cannot configure ratelimit with:\n%s", conf);
    return rc;
}

/* Send n frames at time `now` in `dir`; return how many passed. */
static int burst_at(struct fake_chain *fc, enum sg_dir dir, uint64_t now, int n)
{
    int passed = 0;

    for (int i = 0; i < n; i++) {
        int v;
        fake_frame(&fc->codec, dir, SG_FRAME_MESSAGE);
        v = fake_chain_run(fc, now, NULL);
        CHECKF(v == SG_FILTER_PASS || v == SG_FILTER_DROP, "verdict %d", v);
        passed += v == SG_FILTER_PASS;
    }
    return passed;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

/* ---- cases ---- */

static void packet_cap(void)
{
    struct fake_chain fc;
    int passed = 0, got;

    if (open_chain(&fc, "packets_per_second 10\nburst 5") < 0)
        return;
    /* A full bucket: 5 at once, then nothing. */
    got = burst_at(&fc, SG_DIR_C2S, 0, 20);
    CHECKF(got == 5, "burst: %d of 20 passed, expected 5", got);
    /* 100 ms later: one token (10 per second). */
    got = burst_at(&fc, SG_DIR_C2S, 99, 3);
    CHECKF(got == 0, "99 ms: %d passed, expected 0", got);
    got = burst_at(&fc, SG_DIR_C2S, 100, 3);
    CHECKF(got == 1, "100 ms: %d passed, expected 1", got);
    /* A long pause refills to the burst, not beyond. */
    got = burst_at(&fc, SG_DIR_C2S, 60100, 20);
    CHECKF(got == 5, "after 60 s: %d passed, expected 5 (burst)", got);
    fake_chain_close(&fc);

    /*
     * One every 50 ms for 10 s from a full bucket of 5: tokens before
     * frame k are 5 - k/2 while frames pass, so frames 0..8 pass, then
     * every other one (10, 12, .. 198): 9 + 95 = 104.
     */
    if (open_chain(&fc, "packets_per_second 10\nburst 5") < 0)
        return;
    for (int k = 0; k < 200; k++)
        passed += burst_at(&fc, SG_DIR_C2S, (uint64_t)k * 50, 1);
    CHECKF(passed == 104, "steady 20/s against 10/s: %d of 200 passed, expected 104", passed);
    fake_chain_close(&fc);

    /* The default burst is one second's worth. */
    if (open_chain(&fc, "packets_per_second 30") < 0)
        return;
    got = burst_at(&fc, SG_DIR_S2C, 5, 100);
    CHECKF(got == 30, "default burst: %d passed, expected 30", got);
    fake_chain_close(&fc);
}

static void byte_cap(void)
{
    struct fake_chain fc;
    int got;

    /* 1000 bytes/s, 4-byte datagrams: 250 at once, then 1 per 4 ms. */
    if (open_chain(&fc, "bytes_per_second 1000") < 0)
        return;
    got = burst_at(&fc, SG_DIR_C2S, 0, 300);
    CHECKF(got == 250, "burst_bytes 1000: %d of 300 passed, expected 250", got);
    got = burst_at(&fc, SG_DIR_C2S, 3, 1);
    CHECKF(got == 0, "3 ms refill (3 bytes): %d passed, expected 0", got);
    got = burst_at(&fc, SG_DIR_C2S, 4, 2);
    CHECKF(got == 1, "4 ms refill (4 bytes): %d passed, expected 1", got);
    got = burst_at(&fc, SG_DIR_C2S, 1004, 300);
    CHECKF(got == 250, "after 1 s: %d passed, expected 250", got);
    fake_chain_close(&fc);

    /* SIZE units and burst_bytes. */
    if (open_chain(&fc, "bytes_per_second 1k\nburst_bytes 40") < 0)
        return;
    got = burst_at(&fc, SG_DIR_S2C, 0, 50);
    CHECKF(got == 10, "burst_bytes 40: %d passed, expected 10", got);
    got = burst_at(&fc, SG_DIR_S2C, 1000, 50);
    CHECKF(got == 10, "refill capped at burst_bytes: %d passed, expected 10", got);
    fake_chain_close(&fc);
}

static void both_caps(void)
{
    struct fake_chain fc;
    int got;

    /* The tighter cap wins: bytes (10 datagrams) before packets (100). */
    if (open_chain(&fc, "packets_per_second 100\nbytes_per_second 400\nburst_bytes 40") < 0)
        return;
    got = burst_at(&fc, SG_DIR_C2S, 0, 50);
    CHECKF(got == 10, "%d passed, expected 10 (byte cap)", got);
    fake_chain_close(&fc);

    /* Packets tighter than bytes; a dropped datagram takes no bytes. */
    if (open_chain(&fc, "packets_per_second 3\nbytes_per_second 40") < 0)
        return;
    got = burst_at(&fc, SG_DIR_C2S, 0, 50);
    CHECKF(got == 3, "%d passed, expected 3 (packet cap)", got);
    /* 1 s later: 3 packets again, bytes never ran out (28 of 40 left + refill). */
    got = burst_at(&fc, SG_DIR_C2S, 1000, 50);
    CHECKF(got == 3, "%d passed, expected 3", got);
    fake_chain_close(&fc);
}

static void direction(void)
{
    struct fake_chain fc;
    int got;

    if (open_chain(&fc, "packets_per_second 5\ndirection to_server") < 0)
        return;
    got = burst_at(&fc, SG_DIR_C2S, 0, 20);
    CHECKF(got == 5, "to_server: %d passed, expected 5", got);
    got = burst_at(&fc, SG_DIR_S2C, 0, 20);
    CHECKF(got == 20, "to_client not limited: %d passed, expected 20", got);
    fake_chain_close(&fc);

    if (open_chain(&fc, "packets_per_second 5\ndirection to_client") < 0)
        return;
    got = burst_at(&fc, SG_DIR_C2S, 0, 20);
    CHECKF(got == 20, "to_server not limited: %d passed, expected 20", got);
    got = burst_at(&fc, SG_DIR_S2C, 0, 20);
    CHECKF(got == 5, "to_client: %d passed, expected 5", got);
    fake_chain_close(&fc);

    /* both: one bucket each way, a flood one way leaves the other alone. */
    if (open_chain(&fc, "packets_per_second 5") < 0)
        return;
    got = burst_at(&fc, SG_DIR_C2S, 0, 100);
    CHECKF(got == 5, "both, to_server: %d passed, expected 5", got);
    got = burst_at(&fc, SG_DIR_S2C, 0, 20);
    CHECKF(got == 5, "both, to_client: %d passed, expected 5", got);
    fake_chain_close(&fc);
}

static void raw_frames(void)
{
    struct fake_chain fc;
    int passed = 0;

    if (open_chain(&fc, "packets_per_second 7") < 0)
        return;
    fc.session.codec = NULL;
    fc.session.codec_state = NULL;
    for (int i = 0; i < 20; i++) {
        fake_frame(&fc.codec, SG_DIR_C2S, SG_FRAME_RAW);
        passed += fake_chain_run(&fc, 0, NULL) == SG_FILTER_PASS;
    }
    CHECKF(passed == 7, "raw frames: %d passed, expected 7", passed);
    fake_chain_close(&fc);
}

static void logging(void)
{
    struct fake_chain fc;
    int got;

    if (open_chain(&fc, "packets_per_second 10\nburst 5") < 0)
        return;
    got = burst_at(&fc, SG_DIR_C2S, 0, 5);
    CHECKF(got == 5 && fc.log[0] == '\0', "logged before limiting: %s", fc.log);
    burst_at(&fc, SG_DIR_C2S, 0, 15);
    burst_at(&fc, SG_DIR_S2C, 0, 12); /* 5 pass, 7 dropped */
    CHECKF(count(fc.log, "limiting") == 1, "'limiting' logged %d times:\n%s",
          count(fc.log, "limiting"), fc.log);
    CHECKF(strstr(fc.log, "limiting to_server: over 10 packets/s (burst 5)") != NULL, "log: %s",
          fc.log);
    sg_chain_session_end(fc.chain, fc.slots, &fc.session);
    CHECKF(strstr(fc.log, "session end: dropped to_server 15 of 20 datagrams (60 bytes), "
                         "to_client 7 of 12 datagrams (28 bytes)") != NULL,
          "session end counts missing:\n%s", fc.log);

    /* A new session starts with full buckets and its own "limiting" line. */
    got = burst_at(&fc, SG_DIR_C2S, 0, 8);
    CHECKF(got == 5, "new session: %d passed, expected 5", got);
    CHECKF(count(fc.log, "limiting") == 2, "'limiting' logged %d times in two sessions",
          count(fc.log, "limiting"));
    fake_chain_close(&fc);
}

static void config_errors(void)
{
    static const struct {
        const char *conf, *want;
    } bad[] = {
        {"", "sets no cap"},
        {"direction to_server", "sets no cap"},
        {"bytes_per_second 1k\nburst 3", "'burst' sizes the packet cap"},
        {"packets_per_second 5\nburst_bytes 3k", "'burst_bytes' sizes the byte cap"},
        {"packets_per_second -1", "packets_per_second"},
        {"packets_per_second 5\nburst 0", "burst"},
        {"packets_per_second lots", "packets_per_second"},
        {"packets_per_second 5\ndirection sideways", "direction"},
        {"bytes_per_second 12q", "bytes_per_second"},
    };
    char err[512];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct fake_chain fc;
        int rc = fake_chain_open(&fc, "ratelimit", bad[i].conf, err, sizeof(err));

        CHECKF(rc < 0, "'%s' was accepted", bad[i].conf);
        if (rc < 0)
            CHECKF(strstr(err, bad[i].want) != NULL, "'%s': message '%s' lacks '%s'", bad[i].conf,
                  err, bad[i].want);
        else
            fake_chain_close(&fc);
    }
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"packet_cap", packet_cap},       {"byte_cap", byte_cap},     {"both_caps", both_caps},
        {"direction", direction},         {"raw_frames", raw_frames}, {"logging", logging},
        {"config_errors", config_errors},
    };

    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
