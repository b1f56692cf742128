/*
 * The 'guard' filter (filters/guard.c) against fake frames: dangerous
 * server commands are removed and logged, allow wins over deny, the
 * commands real Quake servers send pass, bad settings are explained.
 */
#include "tests/filters/fake.h"
#include "tests/unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Open the filter with `conf`: 0, or -1 counted as a failure. */
static int open_or_fail(struct fake_chain *fc, const char *conf)
{
    int rc = fake_chain_open(fc, "guard", conf, NULL, 0);

    CHECKF(rc == 0, "cannot open guard with: %s", conf);
    return rc < 0 ? -1 : 0;
}

/* One S2C message of `kind` through a guard configured with `conf`; returns the verdict. */
static int one(struct fake_chain *fc, enum sg_msg_kind kind, const char *text)
{
    fake_frame(&fc->codec, SG_DIR_S2C, SG_FRAME_MESSAGE);
    fake_msg(&fc->codec, kind, text);
    return fake_chain_run(fc, 1000, NULL);
}

static void case_blocks_and_logs(void)
{
    struct fake_chain fc;

    if (open_or_fail(&fc, "") < 0)
        return;
    fake_frame(&fc.codec, SG_DIR_S2C, SG_FRAME_MESSAGE);
    fake_msg(&fc.codec, SG_MSG_PRINT, "hello\n");
    fake_msg(&fc.codec, SG_MSG_SERVER_COMMAND, "bind mouse1 \"quit\"");
    fake_msg(&fc.codec, SG_MSG_SERVER_COMMAND, "scores 3 0 0 7000");
    CHECK(fake_chain_run(&fc, 1000, NULL) == SG_FILTER_CHANGED);
    CHECK(!fc.codec.msgs[0].dropped);
    CHECK(fc.codec.msgs[1].dropped);
    CHECK(!fc.codec.msgs[2].dropped);
    CHECK(fc.codec.drop_calls == 1);
    CHECK(strstr(fc.log, "guard: blocked 'bind' in a servercmd from the server to "
                         "127.0.0.1:50000: \"bind mouse1 \"quit\"\"\n") != NULL);
    if (failures)
        fprintf(stderr, "log: %s", fc.log);
    fake_chain_close(&fc);
}

static void case_stufftext_split(void)
{
    static const struct {
        const char *text;
        const char *verb; /* NULL: passes */
    } t[] = {
        {"echo hi; exec evil.cfg\n", "'exec'"},
        {"echo \"a;quit\"\n", NULL},    /* ';' inside quotes does not split */
        {"echo \"a\nquit\"", "'quit'"}, /* a newline always does */
        {"  BIND x y\n", "'BIND'"},     /* commands ignore case */
        {"/seta cl_allowDownload 1", "'seta'"},
        {"echo one\recho two\r", NULL},
        {"echo x //; connect 10.0.0.1", "'connect'"}, /* comments do not hide */
        {"\"unbindall\"", "'unbindall'"},
        {"", NULL},
        {";;;\n\n", NULL},
    };

    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        struct fake_chain fc;
        char want[64];
        int v;

        if (open_or_fail(&fc, "") < 0)
            return;
        v = one(&fc, SG_MSG_STUFFTEXT, t[i].text);
        if (t[i].verb) {
            snprintf(want, sizeof(want), "blocked %s in a stufftext", t[i].verb);
            CHECK(v == SG_FILTER_CHANGED && fc.codec.msgs[0].dropped);
            CHECK(strstr(fc.log, want) != NULL);
        } else {
            CHECK(v == SG_FILTER_PASS && !fc.codec.msgs[0].dropped && fc.log[0] == '\0');
        }
        if (failures) {
            fprintf(stderr, "text %zu: verdict %d log: %s\n", i, v, fc.log);
            fake_chain_close(&fc);
            return;
        }
        fake_chain_close(&fc);
    }
}

static void case_allow_overrides(void)
{
    struct fake_chain fc;

    if (open_or_fail(&fc, "deny kill record\nallow bind\nallow kill") < 0)
        return;
    CHECK(one(&fc, SG_MSG_SERVER_COMMAND, "bind x +attack") == SG_FILTER_PASS);
    CHECK(one(&fc, SG_MSG_SERVER_COMMAND, "kill") == SG_FILTER_PASS); /* allow wins */
    CHECK(one(&fc, SG_MSG_SERVER_COMMAND, "record cheat") == SG_FILTER_CHANGED);
    CHECK(fc.codec.msgs[0].dropped);
    CHECK(one(&fc, SG_MSG_SERVER_COMMAND, "exec x") == SG_FILTER_CHANGED); /* defaults kept */
    fake_chain_close(&fc);

    /* without the defaults only what is denied */
    if (open_or_fail(&fc, "default_deny no\ndeny record") < 0)
        return;
    CHECK(one(&fc, SG_MSG_SERVER_COMMAND, "exec x") == SG_FILTER_PASS);
    CHECK(one(&fc, SG_MSG_SERVER_COMMAND, "record x") == SG_FILTER_CHANGED);
    fake_chain_close(&fc);
}

static void case_pattern(void)
{
    struct fake_chain fc;

    if (open_or_fail(&fc, "deny_pattern \"^[[:space:]]*[+-]\"\nallow +scores") < 0)
        return;
    CHECK(one(&fc, SG_MSG_STUFFTEXT, "+attack\n") == SG_FILTER_CHANGED);
    CHECK(strstr(fc.log, "blocked '+attack' (deny_pattern '^[[:space:]]*[+-]')") != NULL);
    CHECK(one(&fc, SG_MSG_STUFFTEXT, "echo a; -forward\n") == SG_FILTER_CHANGED);
    CHECK(one(&fc, SG_MSG_STUFFTEXT, "+scores\n") == SG_FILTER_PASS); /* allow wins */
    CHECK(one(&fc, SG_MSG_STUFFTEXT, "echo +a\n") == SG_FILTER_PASS);
    fake_chain_close(&fc);
}

/* What real Quake 3 servers (and Q2/QW/NQ stufftext) send must pass. */
static void case_legit_q3(void)
{
    static const char *const q3[] = {
        "cs 5 \"x\"",
        "bcs0 20 \"abc",
        "bcs1 20 \"def",
        "bcs2 20 \"ghi\"",
        "print \"peers^7 entered the game\n\"",
        "cp \"Fight!\"",
        "chat \"a: hi\"",
        "tchat \"b: hello\"",
        "scores 3 0 0 7000 0 0 0 0 0 0 0 0 0 0 0 0",
        "tinfo 1 2 3 4 5 6",
        "map_restart",
        "disconnect \"disconnected\"",
        "remapShader textures/a textures/b 0.0",
        "loaddefered",
        "respawn 23858",
        "clientLevelShot",
        "cs 544 \"\"\n",
    };
    static const char *const stuff[] = {
        "cmd spawn 1 0\n",
        "reconnect\n",
        "changing\n",
        "precache 1\n",
        "skins\n",
        "fullserverinfo \"\\\\maxfps\\\\77\"\n",
        "bf\n",
        "cmd pext\n",
    };
    struct fake_chain fc;

    if (open_or_fail(&fc, "") < 0)
        return;
    fake_frame(&fc.codec, SG_DIR_S2C, SG_FRAME_MESSAGE);
    for (size_t i = 0; i < sizeof(q3) / sizeof(q3[0]) && i < FAKE_MAX_MSGS; i++)
        fake_msg(&fc.codec, SG_MSG_SERVER_COMMAND, q3[i]);
    CHECK(fake_chain_run(&fc, 1000, NULL) == SG_FILTER_PASS);
    CHECK(fc.codec.drop_calls == 0);
    fake_frame(&fc.codec, SG_DIR_S2C, SG_FRAME_MESSAGE);
    for (size_t i = 0; i < sizeof(stuff) / sizeof(stuff[0]); i++)
        fake_msg(&fc.codec, SG_MSG_STUFFTEXT, stuff[i]);
    CHECK(fake_chain_run(&fc, 1000, NULL) == SG_FILTER_PASS);
    CHECK(fc.codec.drop_calls == 0);
    CHECK(fc.log[0] == '\0');
    fake_chain_close(&fc);
}

static void case_skips(void)
{
    struct fake_chain fc;
    unsigned i;

    if (open_or_fail(&fc, "") < 0)
        return;
    /* a resend: the codec applies the first verdict */
    fake_frame(&fc.codec, SG_DIR_S2C, SG_FRAME_MESSAGE);
    i = fake_msg(&fc.codec, SG_MSG_SERVER_COMMAND, "bind x quit");
    fc.codec.msgs[i].repeat = true;
    CHECK(fake_chain_run(&fc, 1000, NULL) == SG_FILTER_PASS);
    /* client to server: not the guard's business */
    fake_frame(&fc.codec, SG_DIR_C2S, SG_FRAME_MESSAGE);
    fake_msg(&fc.codec, SG_MSG_CLIENT_COMMAND, "bind x quit");
    CHECK(fake_chain_run(&fc, 1000, NULL) == SG_FILTER_PASS);
    /* prints are not guarded by default */
    CHECK(one(&fc, SG_MSG_PRINT, "quit") == SG_FILTER_PASS);
    CHECK(fc.codec.drop_calls == 0 && fc.log[0] == '\0');
    fake_chain_close(&fc);

    if (open_or_fail(&fc, "kinds print,stufftext") < 0)
        return;
    CHECK(one(&fc, SG_MSG_PRINT, "quit") == SG_FILTER_CHANGED);
    CHECK(one(&fc, SG_MSG_SERVER_COMMAND, "quit") == SG_FILTER_PASS);
    fake_chain_close(&fc);
}

#define expect_error(conf, want) CHECK(fake_config_refused("guard", (conf), (want)))

static void case_bad_config(void)
{
    expect_error("kinds print,prnt",
                 "test.conf:1: error: filter 'guard': 'kinds' on line 2: unknown message kind "
                 "'prnt'; kinds are print,");
    expect_error("deny_pattern \"(\"",
                 "test.conf:1: error: filter 'guard': 'deny_pattern' on line 2: bad regular "
                 "expression '(':");
    expect_error("default_deny no",
                 "filter 'guard': nothing to guard against: the deny list is empty and there is "
                 "no deny_pattern");
    expect_error("deny \"a;b\"", "'deny' on line 2: 'a;b' is not a command name");
    expect_error("kinds game", "'kinds': 'game' messages carry no text to guard");
    expect_error("deny", "test.conf:2:1: error: 'deny' takes 1 to 64 values, got 0");
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"blocks_and_logs", case_blocks_and_logs},
        {"stufftext_split", case_stufftext_split},
        {"allow_overrides", case_allow_overrides},
        {"pattern", case_pattern},
        {"legit_q3", case_legit_q3},
        {"skips", case_skips},
        {"bad_config", case_bad_config},
    };

    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
