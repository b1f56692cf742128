/*
 * The 'rewrite' filter (filters/rewrite.c) against fake frames:
 * replacements in order, every match, backreferences, case, resends,
 * direction and kinds, and the explanations of bad settings.
 */
#include "tests/filters/fake.h"
#include "tests/unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_STR(got, want)                                                                       \
    do {                                                                                           \
        if (strcmp((got), (want)) != 0) {                                                          \
            fprintf(stderr, "%s:%d: got '%s', want '%s'\n", __FILE__, __LINE__, (got), (want));    \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/*
 * Rewrite one S2C message of `kind` with `conf`; returns the verdict and
 * leaves the message's text in `out`.
 */
static int rw(const char *conf, enum sg_dir dir, enum sg_msg_kind kind, const char *text, char *out,
              size_t cap)
{
    struct fake_chain fc;
    int v;

    if (fake_chain_open(&fc, "rewrite", conf, NULL, 0) < 0) {
        fprintf(stderr, "cannot open rewrite with: %s\n", conf);
        failures++;
        snprintf(out, cap, "(no filter)");
        return -1;
    }
    fake_frame(&fc.codec, dir, SG_FRAME_MESSAGE);
    fake_msg(&fc.codec, kind, text);
    v = fake_chain_run(&fc, 1000, NULL);
    snprintf(out, cap, "%s", fc.codec.msgs[0].text ? fc.codec.msgs[0].text : "(none)");
    CHECK((v == SG_FILTER_CHANGED) == (fc.codec.set_text_calls == 1));
    CHECK(fc.codec.set_text_calls <= 1);
    fake_chain_close(&fc);
    return v;
}

static void case_replaces(void)
{
    char out[256];

    CHECK(rw("replace world there", SG_DIR_S2C, SG_MSG_PRINT, "hello world\n", out, sizeof(out)) ==
          SG_FILTER_CHANGED);
    CHECK_STR(out, "hello there\n");
    /* every match, rules in order on the previous rule's output */
    CHECK(rw("replace a b\nreplace b c", SG_DIR_S2C, SG_MSG_CHAT, "aab xa", out, sizeof(out)) ==
          SG_FILTER_CHANGED);
    CHECK_STR(out, "ccc xc");
    /* deleting text; anchors only at the start */
    CHECK(rw("replace \"^x\" \"\"", SG_DIR_S2C, SG_MSG_PRINT, "xxy", out, sizeof(out)) ==
          SG_FILTER_CHANGED);
    CHECK_STR(out, "xy");
    /* an empty match between every character, as sed s/x*\/-/g does */
    CHECK(rw("replace \"x*\" -", SG_DIR_S2C, SG_MSG_PRINT, "ab", out, sizeof(out)) ==
          SG_FILTER_CHANGED);
    CHECK_STR(out, "-a-b-");
    /* no match, or a match that changes nothing: not changed */
    CHECK(rw("replace zzz y", SG_DIR_S2C, SG_MSG_PRINT, "hello", out, sizeof(out)) ==
          SG_FILTER_PASS);
    CHECK_STR(out, "hello");
    CHECK(rw("replace l l", SG_DIR_S2C, SG_MSG_PRINT, "hello", out, sizeof(out)) == SG_FILTER_PASS);
    /* bytes above 127 go through untouched */
    CHECK(rw("replace b B", SG_DIR_S2C, SG_MSG_PRINT,
             "\xe9"
             "b\xff",
             out, sizeof(out)) == SG_FILTER_CHANGED);
    CHECK_STR(out, "\xe9"
                   "B\xff");
}

static void case_backrefs(void)
{
    char out[256];

    CHECK(rw("replace \"([a-z]+)@([a-z]+)\" \"\\\\2 at \\\\1\"", SG_DIR_S2C, SG_MSG_CHAT,
             "me@host and x@y!", out, sizeof(out)) == SG_FILTER_CHANGED);
    CHECK_STR(out, "host at me and y at x!");
    CHECK(rw("replace \"[0-9]+\" \"<\\\\0>\"", SG_DIR_S2C, SG_MSG_PRINT, "a1b22", out,
             sizeof(out)) == SG_FILTER_CHANGED);
    CHECK_STR(out, "a<1>b<22>");
    /* a literal backslash, and an optional group that did not take part */
    CHECK(rw("replace \"(x)?y\" \"[\\\\1]\\\\\\\\\"", SG_DIR_S2C, SG_MSG_PRINT, "y xy", out,
             sizeof(out)) == SG_FILTER_CHANGED);
    CHECK_STR(out, "[]\\ [x]\\");
}

static void case_icase(void)
{
    char out[256];

    CHECK(rw("replace bad \"***\"", SG_DIR_S2C, SG_MSG_CHAT, "bad Bad BAD", out, sizeof(out)) ==
          SG_FILTER_CHANGED);
    CHECK_STR(out, "*** Bad BAD");
    CHECK(rw("replace bad \"***\"\nicase yes", SG_DIR_S2C, SG_MSG_CHAT, "bad Bad BAD", out,
             sizeof(out)) == SG_FILTER_CHANGED);
    CHECK_STR(out, "*** *** ***");
}

static void case_repeats(void)
{
    struct fake_chain fc;
    unsigned i;

    if (fake_chain_open(&fc, "rewrite", "replace a b", NULL, 0) < 0) {
        failures++;
        return;
    }
    fake_frame(&fc.codec, SG_DIR_S2C, SG_FRAME_MESSAGE);
    i = fake_msg(&fc.codec, SG_MSG_PRINT, "aaa");
    fc.codec.msgs[i].repeat = true;
    fake_msg(&fc.codec, SG_MSG_PRINT, "a");
    CHECK(fake_chain_run(&fc, 1000, NULL) == SG_FILTER_CHANGED);
    CHECK_STR(fc.codec.msgs[0].text, "aaa");
    CHECK(!fc.codec.msgs[0].changed);
    CHECK_STR(fc.codec.msgs[1].text, "b");
    CHECK(fc.codec.set_text_calls == 1);
    fake_chain_close(&fc);
}

static void case_direction_kinds(void)
{
    char out[256];

    /* both ways by default */
    CHECK(rw("replace a b", SG_DIR_C2S, SG_MSG_CHAT, "a", out, sizeof(out)) == SG_FILTER_CHANGED);
    CHECK(rw("replace a b\ndirection to_server", SG_DIR_S2C, SG_MSG_CHAT, "a", out, sizeof(out)) ==
          SG_FILTER_PASS);
    CHECK(rw("replace a b\ndirection to_server", SG_DIR_C2S, SG_MSG_CHAT, "a", out, sizeof(out)) ==
          SG_FILTER_CHANGED);
    CHECK(rw("replace a b\ndirection to_client", SG_DIR_C2S, SG_MSG_CHAT, "a", out, sizeof(out)) ==
          SG_FILTER_PASS);
    /* default kinds: chat, print, centerprint */
    CHECK(rw("replace a b", SG_DIR_S2C, SG_MSG_CENTERPRINT, "a", out, sizeof(out)) ==
          SG_FILTER_CHANGED);
    CHECK(rw("replace a b", SG_DIR_S2C, SG_MSG_SERVER_COMMAND, "a", out, sizeof(out)) ==
          SG_FILTER_PASS);
    CHECK(rw("replace a b", SG_DIR_S2C, SG_MSG_CONFIGSTRING, "a", out, sizeof(out)) ==
          SG_FILTER_PASS);
    CHECK(rw("replace a b\nkinds servercmd configstring", SG_DIR_S2C, SG_MSG_CONFIGSTRING, "a", out,
             sizeof(out)) == SG_FILTER_CHANGED);
    CHECK(rw("replace a b\nkinds servercmd", SG_DIR_S2C, SG_MSG_CHAT, "a", out, sizeof(out)) ==
          SG_FILTER_PASS);
    /* messages without text */
    CHECK(rw("replace a b\nkinds text", SG_DIR_S2C, SG_MSG_GAME, NULL, out, sizeof(out)) ==
          SG_FILTER_PASS);
}

#define expect_error(conf, want) CHECK(fake_config_refused("rewrite", (conf), (want)))

static void case_bad_config(void)
{
    expect_error("icase yes", "test.conf:1: error: filter 'rewrite': needs at least one 'replace "
                              "REGEX REPLACEMENT'");
    expect_error("replace \"a(\" b",
                 "filter 'rewrite': 'replace' on line 2: bad regular expression 'a(':");
    expect_error("replace a b\nreplace \"(a)\" \"\\\\2\"",
                 "filter 'rewrite': 'replace' on line 3: the replacement uses \\2 but '(a)' has 1 "
                 "group(s)");
    expect_error("replace a \"\\\\q\"",
                 "'replace' on line 2: a '\\' in the replacement must be followed by a digit");
    expect_error("replace a b\nkinds chat,game", "'game' messages carry no text to rewrite");
    expect_error("replace a b\ndirection sideways", "test.conf:3:");
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"replaces", case_replaces},
        {"backrefs", case_backrefs},
        {"icase", case_icase},
        {"repeats", case_repeats},
        {"direction_kinds", case_direction_kinds},
        {"bad_config", case_bad_config},
    };

    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
