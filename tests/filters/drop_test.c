/*
 * The 'drop' filter (filters/drop.c) against fake frames: by kind, by
 * text, both, one way, whole datagrams, resends, bad settings.
 */
#include "tests/filters/fake.h"
#include "tests/unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Open the filter with `conf`: 0, or -1 counted as a failure. */
static int open_or_fail(struct fake_chain *fc, const char *conf)
{
    int rc = fake_chain_open(fc, "drop", conf, NULL, 0);

    CHECKF(rc == 0, "cannot open drop with: %s", conf);
    return rc < 0 ? -1 : 0;
}

/* A frame of four messages: print, chat, servercmd, game. */
static void frame4(struct fake_chain *fc, enum sg_dir dir)
{
    fake_frame(&fc->codec, dir, SG_FRAME_MESSAGE);
    fake_msg(&fc->codec, SG_MSG_PRINT, "buy SPAM now\n");
    fake_msg(&fc->codec, SG_MSG_CHAT, "Tom: hello");
    fake_msg(&fc->codec, SG_MSG_SERVER_COMMAND, "scores 1 spam");
    fake_msg(&fc->codec, SG_MSG_GAME, NULL);
}

/* Which of the four were removed, as "1010". */
static const char *dropped(const struct fake_chain *fc)
{
    static char s[8];
    for (int i = 0; i < 4; i++)
        s[i] = fc->codec.msgs[i].dropped ? '1' : '0';
    s[4] = '\0';
    return s;
}

static void expect(const char *conf, enum sg_dir dir, int verdict, const char *which)
{
    struct fake_chain fc;
    int v;

    if (open_or_fail(&fc, conf) < 0)
        return;
    frame4(&fc, dir);
    v = fake_chain_run(&fc, 1000, NULL);
    if (v != verdict || strcmp(dropped(&fc), which) != 0) {
        fprintf(stderr, "conf [%s] dir %d: verdict %d removed %s, want %d %s\n", conf, dir, v,
                dropped(&fc), verdict, which);
        failures++;
    }
    fake_chain_close(&fc);
}

static void case_by_kind(void)
{
    expect("kinds chat", SG_DIR_S2C, SG_FILTER_CHANGED, "0100");
    expect("kinds chat,servercmd", SG_DIR_S2C, SG_FILTER_CHANGED, "0110");
    expect("kinds chat\nkinds print", SG_DIR_S2C, SG_FILTER_CHANGED, "1100");
    expect("kinds centerprint", SG_DIR_S2C, SG_FILTER_PASS, "0000");
    expect("kinds text", SG_DIR_S2C, SG_FILTER_CHANGED, "1110");
}

static void case_by_regex(void)
{
    expect("match spam", SG_DIR_S2C, SG_FILTER_CHANGED, "0010");
    expect("match spam\nicase yes", SG_DIR_S2C, SG_FILTER_CHANGED, "1010");
    expect("match spam\nicase yes\nkinds print", SG_DIR_S2C, SG_FILTER_CHANGED, "1000");
    expect("match \"^Tom:\"\nmatch nothing", SG_DIR_S2C, SG_FILTER_CHANGED, "0100");
    expect("match \"^hello\"", SG_DIR_S2C, SG_FILTER_PASS, "0000");
}

static void case_direction(void)
{
    expect("kinds chat\ndirection to_server", SG_DIR_S2C, SG_FILTER_PASS, "0000");
    expect("kinds chat\ndirection to_server", SG_DIR_C2S, SG_FILTER_CHANGED, "0100");
    expect("kinds chat\ndirection to_client", SG_DIR_C2S, SG_FILTER_PASS, "0000");
    expect("kinds chat", SG_DIR_C2S, SG_FILTER_CHANGED, "0100");
}

static void case_whole_datagram(void)
{
    struct fake_chain fc;
    struct sg_chain_result res;

    expect("match Tom\nwhole_datagram yes", SG_DIR_S2C, SG_FILTER_DROP, "0000");
    expect("match nobody\nwhole_datagram yes", SG_DIR_S2C, SG_FILTER_PASS, "0000");
    if (open_or_fail(&fc, "kinds game\nwhole_datagram yes") < 0)
        return;
    frame4(&fc, SG_DIR_S2C);
    CHECK(fake_chain_run(&fc, 1000, &res) == SG_FILTER_DROP);
    CHECK(res.drop && res.drop_filter == 0);
    CHECK(fc.codec.drop_calls == 0);
    /* a frame still in pieces is not looked at */
    frame4(&fc, SG_DIR_S2C);
    fc.codec.frame.kind = SG_FRAME_PARTIAL;
    CHECK(fake_chain_run(&fc, 1000, &res) == SG_FILTER_PASS && !res.drop);
    fake_chain_close(&fc);
}

static void case_repeats(void)
{
    struct fake_chain fc;

    if (open_or_fail(&fc, "kinds chat") < 0)
        return;
    frame4(&fc, SG_DIR_S2C);
    fc.codec.msgs[1].repeat = true;
    CHECK(fake_chain_run(&fc, 1000, NULL) == SG_FILTER_PASS);
    CHECK(fc.codec.drop_calls == 0);
    fake_chain_close(&fc);
    if (open_or_fail(&fc, "kinds chat\nwhole_datagram yes") < 0)
        return;
    frame4(&fc, SG_DIR_S2C);
    fc.codec.msgs[1].repeat = true;
    CHECK(fake_chain_run(&fc, 1000, NULL) == SG_FILTER_PASS);
    fake_chain_close(&fc);
}

#define expect_error(conf, want) CHECK(fake_config_refused("drop", (conf), (want)))

static void case_bad_config(void)
{
    expect_error("whole_datagram yes",
                 "test.conf:1: error: filter 'drop': says nothing to drop: give 'kinds KIND,...' "
                 "and/or 'match REGEX'");
    expect_error("kinds game\nmatch x", "'match' looks at text, but 'kinds' names only 'game'");
    expect_error("match \"[z-a]\"", "'match' on line 2: bad regular expression '[z-a]':");
    expect_error("kinds chatt", "'kinds' on line 2: unknown message kind 'chatt'");
    expect_error("kinds ,", "'kinds' names no message kind");
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"by_kind", case_by_kind},     {"by_regex", case_by_regex},
        {"direction", case_direction}, {"whole_datagram", case_whole_datagram},
        {"repeats", case_repeats},     {"bad_config", case_bad_config},
    };

    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
