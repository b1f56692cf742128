/*
 * The 'textlog' filter (filters/textlog.c) against fake frames: the lines
 * written to a temporary file, read back; kinds, colours, an unopenable
 * path and a full disk (/dev/full).
 */
#include "tests/filters/fake.h"
#include "tests/unit.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof(dir), "/tmp/sg-textlog-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
}

static void remove_dir(const char *file)
{
    if (file)
        unlink(file);
    rmdir(dir);
}

/* The file's lines with the leading timestamp checked and removed, joined by '\n'. */
static void read_back(const char *path, char *out, size_t cap)
{
    regex_t ts;
    char line[4096];
    size_t n = 0;
    FILE *f = fopen(path, "r");

    out[0] = '\0';
    if (!f) {
        fprintf(stderr, "cannot read %s back\n", path);
        failures++;
        return;
    }
    regcomp(&ts, "^[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]\\.[0-9]{3}Z ",
            REG_EXTENDED);
    while (fgets(line, sizeof(line), f)) {
        regmatch_t m;
        if (regexec(&ts, line, 1, &m, 0) != 0) {
            fprintf(stderr, "line without an ISO-8601 UTC timestamp: %s", line);
            failures++;
            continue;
        }
        n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s", line + m.rm_eo);
    }
    regfree(&ts);
    fclose(f);
}

static int open_log(struct fake_chain *fc, const char *path, const char *extra)
{
    char conf[512];

    snprintf(conf, sizeof(conf), "file \"%s\"\n%s", path, extra);
    if (fake_chain_open(fc, "textlog", conf, NULL, 0) < 0) {
        fprintf(stderr, "cannot open textlog with: %s\n", conf);
        failures++;
        return -1;
    }
    return 0;
}

/* Two frames of every sort of message. */
static void traffic(struct fake_chain *fc)
{
    unsigned i;

    fake_frame(&fc->codec, SG_DIR_S2C, SG_FRAME_MESSAGE);
    fake_msg(&fc->codec, SG_MSG_PRINT, "peers^7 entered the game\n");
    fake_msg(&fc->codec, SG_MSG_GAME, NULL);
    fake_msg(&fc->codec, SG_MSG_CHAT, "Tom^1: a\\b\tc\x01\xe9");
    i = fake_msg(&fc->codec, SG_MSG_PRINT, "a resend\n");
    fc->codec.msgs[i].repeat = true;
    i = fake_msg(&fc->codec, SG_MSG_PRINT, "removed by a filter\n");
    fc->codec.msgs[i].dropped = true;
    fake_msg(&fc->codec, SG_MSG_CONFIGSTRING, "a configstring");
    fake_msg(&fc->codec, SG_MSG_CENTERPRINT, "Fight!");
    fake_chain_run(fc, 1000, NULL);
    fake_frame(&fc->codec, SG_DIR_C2S, SG_FRAME_MESSAGE);
    fake_msg(&fc->codec, SG_MSG_CLIENT_COMMAND, "userinfo \"\\name\\peers\"");
    fake_msg(&fc->codec, SG_MSG_CHAT, "gg");
    fake_chain_run(fc, 1100, NULL);
}

static void case_writes_lines(void)
{
    struct fake_chain fc;
    char path[128], got[8192];

    make_dir();
    snprintf(path, sizeof(path), "%s/text.log", dir);
    if (open_log(&fc, path, "") == 0) {
        traffic(&fc);
        fake_chain_close(&fc); /* flushes */
        read_back(path, got, sizeof(got));
        const char *want = "s1 127.0.0.1:50000 to_client print peers^7 entered the game\n"
                           "s1 127.0.0.1:50000 to_client chat Tom^1: a\\\\b\\tc\\x01\\xe9\n"
                           "s1 127.0.0.1:50000 to_client centerprint Fight!\n"
                           "s1 127.0.0.1:50000 to_server clientcmd userinfo \"\\\\name\\\\peers\"\n"
                           "s1 127.0.0.1:50000 to_server chat gg\n";
        if (strcmp(got, want) != 0) {
            fprintf(stderr, "got:\n%s\nwant:\n%s\n", got, want);
            failures++;
        }
        /* appended to, not truncated, by the next route (or a reload) */
        if (open_log(&fc, path, "kinds chat\nstrip_colors yes\ndirection to_client") == 0) {
            traffic(&fc);
            fake_chain_close(&fc);
            read_back(path, got, sizeof(got));
            CHECK(strncmp(got, want, strlen(want)) == 0);
            CHECK(strcmp(got + strlen(want),
                         "s1 127.0.0.1:50000 to_client chat Tom: a\\\\b\\tc\\x01\\xe9\n") == 0);
        }
    }
    remove_dir(path);
}

/* Lines are written at flush(), not only at the end. */
static void case_flush(void)
{
    struct fake_chain fc;
    char path[128], got[8192];

    make_dir();
    snprintf(path, sizeof(path), "%s/text.log", dir);
    if (open_log(&fc, path, "kinds centerprint") == 0) {
        traffic(&fc);
        read_back(path, got, sizeof(got));
        CHECK(got[0] == '\0'); /* still buffered */
        sg_chain_flush(fc.chain);
        read_back(path, got, sizeof(got));
        CHECK(strcmp(got, "s1 127.0.0.1:50000 to_client centerprint Fight!\n") == 0);
        fake_chain_close(&fc);
    }
    remove_dir(path);
}

static void case_unwritable(void)
{
    struct fake_chain fc;
    char err[512] = "", conf[256];

    make_dir();
    snprintf(conf, sizeof(conf), "file %s/no/such/dir.log", dir);
    CHECK(fake_chain_open(&fc, "textlog", conf, err, sizeof(err)) < 0);
    char want[256];
    snprintf(want, sizeof(want),
             "filter 'textlog' (test.conf:1): cannot open the log file '%s/no/such/dir.log' for "
             "appending: No such file or directory",
             dir);
    if (strcmp(err, want) != 0) {
        fprintf(stderr, "error: %s\nwanted: %s\n", err, want);
        failures++;
    }
    snprintf(conf, sizeof(conf), "file %s", dir); /* a directory */
    CHECK(fake_chain_open(&fc, "textlog", conf, err, sizeof(err)) < 0);
    CHECK(strstr(err, "for appending: Is a directory") != NULL);
    remove_dir(NULL);
}

/* A full disk: lines are lost and counted, the error is logged once, nothing stops. */
static void case_disk_full(void)
{
    struct fake_chain fc;
    const char *p;
    int n = 0;

    if (access("/dev/full", W_OK) != 0) {
        fprintf(stderr, "no writable /dev/full here\n");
        exit(77);
    }
    if (open_log(&fc, "/dev/full", "") < 0)
        return;
    for (int round = 0; round < 5; round++) {
        traffic(&fc);
        sg_chain_flush(fc.chain);
    }
    traffic(&fc);
    for (p = fc.log; (p = strstr(p, "cannot write")); p++)
        n++;
    CHECK(n == 1);
    CHECK(strstr(fc.log, "textlog: cannot write to the log file '/dev/full': No space left on "
                         "device; lines are lost until writing works again (said once)\n") != NULL);
    if (failures)
        fprintf(stderr, "log: %s", fc.log);
    fake_chain_close(&fc);
}

static void case_bad_config(void)
{
    struct fake_chain fc;
    char err[512] = "";

    CHECK(fake_chain_open(&fc, "textlog", "strip_colors yes", err, sizeof(err)) < 0);
    CHECK(strcmp(err, "test.conf:1: error: filter 'textlog': needs 'file PATH' (the log file, or - "
                      "for standard output)") == 0);
    CHECK(fake_chain_open(&fc, "textlog", "file x\nkinds prints", err, sizeof(err)) < 0);
    CHECK(strstr(err, "'kinds' on line 3: unknown message kind 'prints'") != NULL);
    CHECK(fake_chain_open(&fc, "textlog", "file \"\"", err, sizeof(err)) < 0);
    if (failures)
        fprintf(stderr, "last error: %s\n", err);
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"writes_lines", case_writes_lines}, {"flush", case_flush},
        {"unwritable", case_unwritable},     {"disk_full", case_disk_full},
        {"bad_config", case_bad_config},
    };

    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
