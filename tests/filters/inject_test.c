/*
 * The 'inject' filter (filters/inject.c) against fake frames with a fake
 * clock: once, after, every and count, direction, placeholders, a codec
 * that refuses, bad settings.
 */
#include "tests/filters/fake.h"
#include "tests/unit.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Open the filter with `conf`: 0, or -1 counted as a failure. */
static int open_or_fail(struct fake_chain *fc, const char *conf)
{
    int rc = fake_chain_open(fc, "inject", conf, NULL, 0);

    CHECKF(rc == 0, "cannot open inject with: %s", conf);
    return rc < 0 ? -1 : 0;
}

/* One frame of one game message at `now`; returns the verdict. */
static int tick(struct fake_chain *fc, enum sg_dir dir, enum sg_frame_kind kind, uint64_t now)
{
    fake_frame(&fc->codec, dir, kind);
    fake_msg(&fc->codec, SG_MSG_GAME, NULL);
    return fake_chain_run(fc, now, NULL);
}

/*
 * Frames both ways every 50 ms from `start` to `end`; writes the times of
 * the injections into `at` (at most `cap`) and returns how many.
 */
static int run(struct fake_chain *fc, uint64_t start, uint64_t end, uint64_t *at, int cap)
{
    int n = 0;

    for (uint64_t t = start; t <= end; t += 50) {
        for (int d = 0; d < 2; d++) {
            int before = fc->codec.ninj;
            int v = tick(fc, d ? SG_DIR_C2S : SG_DIR_S2C, SG_FRAME_MESSAGE, t);
            CHECK((v == SG_FILTER_CHANGED) == (fc->codec.ninj > before));
            if (fc->codec.ninj > before && n < cap)
                at[n++] = t;
        }
    }
    return n;
}

static void case_once(void)
{
    struct fake_chain fc;
    uint64_t at[8];

    if (open_or_fail(&fc, "text \"hello %client%\"") < 0)
        return;
    CHECK(run(&fc, 1000, 5000, at, 8) == 1);
    CHECK(at[0] == 1000);
    CHECK(fc.codec.ninj == 1);
    CHECK(fc.codec.inj[0].dir == SG_DIR_S2C && fc.codec.inj[0].kind == SG_MSG_PRINT);
    CHECK(strcmp(fc.codec.inj[0].text, "hello 127.0.0.1:50000\n") == 0); /* a print ends a line */
    fake_chain_close(&fc);
}

static void case_after(void)
{
    struct fake_chain fc;
    uint64_t at[8];

    if (open_or_fail(&fc, "text hi\nafter 2s\nkind centerprint") < 0)
        return;
    /* raw and partial frames do not start the clock */
    CHECK(tick(&fc, SG_DIR_S2C, SG_FRAME_RAW, 0) == SG_FILTER_PASS);
    CHECK(tick(&fc, SG_DIR_S2C, SG_FRAME_PARTIAL, 500) == SG_FILTER_PASS);
    CHECK(run(&fc, 1000, 6000, at, 8) == 1);
    CHECK(at[0] == 3000);
    CHECK(fc.codec.inj[0].kind == SG_MSG_CENTERPRINT && strcmp(fc.codec.inj[0].text, "hi") == 0);
    fake_chain_close(&fc);
}

static void case_every_count(void)
{
    struct fake_chain fc;
    uint64_t at[16];
    int n;

    if (open_or_fail(&fc, "text tick\nevery 2s\nafter 500ms\ncount 3") < 0)
        return;
    n = run(&fc, 10000, 30000, at, 16);
    CHECK(n == 3);
    CHECK(at[0] == 10500 && at[1] == 12500 && at[2] == 14500);
    fake_chain_close(&fc);

    /* no count: every 2 s until the session ends */
    if (open_or_fail(&fc, "text tick\nevery 2s") < 0)
        return;
    n = run(&fc, 0, 9999, at, 16);
    CHECK(n == 5);
    CHECK(at[0] == 0 && at[4] == 8000);
    fake_chain_close(&fc);
}

/* The schedule starts at the first message either way; injections go only the chosen way. */
static void case_direction(void)
{
    struct fake_chain fc;

    if (open_or_fail(&fc, "text \"hi there\"\nkind chat\ndirection to_server\nafter 1s") < 0)
        return;
    CHECK(tick(&fc, SG_DIR_S2C, SG_FRAME_MESSAGE, 100) == SG_FILTER_PASS); /* starts the clock */
    CHECK(tick(&fc, SG_DIR_S2C, SG_FRAME_MESSAGE, 1200) == SG_FILTER_PASS);
    CHECK(fc.codec.ninj == 0);
    CHECK(tick(&fc, SG_DIR_C2S, SG_FRAME_MESSAGE, 1200) == SG_FILTER_CHANGED);
    CHECK(fc.codec.ninj == 1 && fc.codec.inj[0].dir == SG_DIR_C2S &&
          fc.codec.inj[0].kind == SG_MSG_CHAT && strcmp(fc.codec.inj[0].text, "hi there") == 0);
    fake_chain_close(&fc);

    if (open_or_fail(&fc, "text \"score\"\nkind clientcmd\ndirection to_server") < 0)
        return;
    CHECK(tick(&fc, SG_DIR_C2S, SG_FRAME_MESSAGE, 100) == SG_FILTER_CHANGED);
    CHECK(fc.codec.inj[0].kind == SG_MSG_CLIENT_COMMAND);
    fake_chain_close(&fc);
}

static void case_placeholders(void)
{
    struct fake_chain fc;
    regex_t re;

    if (open_or_fail(&fc, "text \"%session% %server% 100%% %time% %nope% %\"\nkind servercmd") < 0)
        return;
    fc.session.id = 42;
    CHECK(tick(&fc, SG_DIR_S2C, SG_FRAME_MESSAGE, 0) == SG_FILTER_CHANGED);
    CHECK(fc.codec.inj[0].kind == SG_MSG_SERVER_COMMAND);
    regcomp(&re,
            "^42 127\\.0\\.0\\.1:27960 100% [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
            "\\.[0-9]{3}Z %nope% %$",
            REG_EXTENDED);
    if (regexec(&re, fc.codec.inj[0].text, 0, NULL, 0) != 0) {
        fprintf(stderr, "expanded: '%s'\n", fc.codec.inj[0].text);
        failures++;
    }
    regfree(&re);
    fake_chain_close(&fc);
}

/* The fake codec takes 16 injections, then refuses: logged once, no verdict change. */
static void case_refused(void)
{
    struct fake_chain fc;
    const char *p;
    int n = 0;

    if (open_or_fail(&fc, "text x\nevery 10ms") < 0)
        return;
    for (int t = 0; t < 40; t++)
        tick(&fc, SG_DIR_S2C, SG_FRAME_MESSAGE, (uint64_t)t * 20);
    CHECK(fc.codec.ninj == 16);
    for (p = fc.log; (p = strstr(p, "refused")); p++)
        n++;
    CHECK(n == 1);
    CHECK(strstr(fc.log, "inject: the codec refused the print for now (message too large); "
                         "trying again on the next message\n") != NULL);
    if (failures)
        fprintf(stderr, "log: %s", fc.log);
    fake_chain_close(&fc);
}

#define expect_error(conf, want) CHECK(fake_config_refused("inject", (conf), (want)))

static void case_bad_config(void)
{
    expect_error("every 5s", "test.conf:1: error: filter 'inject': needs 'text \"...\"'");
    expect_error("text \"\"", "filter 'inject': 'text' is empty");
    expect_error("text x\nkind clientcmd",
                 "'kind clientcmd' goes to the server: add 'direction to_server'");
    expect_error("text x\ndirection to_server",
                 "'kind print' cannot go to the server: towards the server, use chat or "
                 "clientcmd");
    expect_error("text x\nkind shout", "test.conf:3:");
    expect_error("text x\nevery soon", "test.conf:3:");
    expect_error("text x\ncount -1", "test.conf:3:");
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"once", case_once},
        {"after", case_after},
        {"every_count", case_every_count},
        {"direction", case_direction},
        {"placeholders", case_placeholders},
        {"refused", case_refused},
        {"bad_config", case_bad_config},
    };

    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
