/*
 * The 'record' filter (filters/record.c) against fake frames and a fake
 * demo writer: file names from the template, one demo per level or one for
 * the session, max_size parts, the end marker, empty files removed, a write
 * error logged once, frames that must not be recorded, bad settings.
 *
 * The fake demo writer writes "G\n" when it sees a new FILE* (the codec's
 * gamestate), "M<sequence>\n" per message and "E\n" as the end marker, so
 * the files read back say exactly what the filter asked of the codec.
 */
#include "tests/filters/fake.h"
#include "tests/unit.h"

#include "filters/sign.h"

#include "protocols/error.h"

#include "protocols/byteorder.h"
#include "protocols/codec.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <sys/mount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* What the record filter's slot wrote, through its hooks (filters/filter.h). */
static bool slot_summary(const struct sg_filter_impl *impl, const void *slot, uint32_t *demos,
                         const char **last)
{
    struct sg_filter_figures fig = {0};

    if (!impl->figures || !slot)
        return false;
    impl->figures(slot, &fig);
    *demos = fig.files;
    *last = fig.last;
    return true;
}

static bool slot_bytes(const struct sg_filter_impl *impl, const void *slot, uint64_t *bytes)
{
    struct sg_filter_figures fig = {0};

    if (!impl->figures || !slot)
        return false;
    impl->figures(slot, &fig);
    *bytes = fig.bytes;
    return true;
}

static void slot_finish(const struct sg_filter_impl *impl, void *slot,
                        const struct sg_filter_session *session)
{
    if (impl->finish && slot)
        impl->finish(slot, session);
}

/* ---- the fake demo writer ---- */

#define BLOCK 1000 /* mode 3: every block (gamestate, message, end) is this long */

struct writer {
    FILE *out; /* the demo being written */
    int mode;  /* 0 write, 1 skip (waiting for a start), 2 fail, 3 BLOCK-byte blocks */
    bool unplayable; /* record_end says nothing in the demo can be played */
    int records, ends, news;
    bool demo_ext; /* offer a demo writer at all */
};

static const char *w_ext(void *state)
{
    (void)state;
    return "dm_test";
}

static int w_record(void *state, const struct sg_frame *f, FILE *out)
{
    struct writer *w = state;

    w->records++;
    if (w->mode == 1)
        return 0;
    if (w->mode == 2)
        return -ENOSPC;
    if (w->mode == 3) {
        char b[BLOCK];

        memset(b, '.', sizeof(b));
        b[BLOCK - 1] = '\n';
        if (out != w->out) {
            w->out = out;
            w->news++;
            b[0] = 'G';
            if (fwrite(b, 1, sizeof(b), out) != sizeof(b))
                return sg_write_error();
        }
        b[0] = 'M';
        return fwrite(b, 1, sizeof(b), out) == sizeof(b) ? 1 : sg_write_error();
    }
    if (out != w->out) {
        w->out = out;
        w->news++;
        fputs("G\n", out);
    }
    fprintf(out, "M%d\n", (int)f->sequence);
    return 1;
}

static int w_record_end(void *state, FILE *out)
{
    struct writer *w = state;

    if (out != w->out)
        return 0;
    if (w->mode == 3) {
        char b[BLOCK];

        memset(b, '.', sizeof(b));
        b[0] = 'E';
        b[BLOCK - 1] = '\n';
        fwrite(b, 1, sizeof(b), out);
    } else {
        fputs("E\n", out);
    }
    w->out = NULL;
    w->ends++;
    if (fflush(out) != 0)
        return -errno;
    return w->unplayable ? 1 : 0;
}

static const struct sg_codec writer_codec = {
    .name = "fakedemo",
    .demo_ext = w_ext,
    .record = w_record,
    .record_end = w_record_end,
};
static const struct sg_codec no_writer_codec = {.name = "nodemo"};

/* ---- helpers ---- */

static char dir[64];
static struct writer w;

static void make_dir(void)
{
    snprintf(dir, sizeof(dir), "/tmp/sg-record-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
}

/* The files in `d`, sorted, joined by ' '; returns how many. */
static int list_dir(const char *d, char *out, size_t cap)
{
    struct dirent **names;
    int n = scandir(d, &names, NULL, alphasort), count = 0;

    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.') {
            size_t len = strlen(out);
            snprintf(out + len, cap - len, "%s%s", count ? " " : "", names[i]->d_name);
            count++;
        }
        free(names[i]);
    }
    free(names);
    return count;
}

static void remove_tree(const char *d);

/* After a case: its directory goes. */
static void cleanup(void)
{
    remove_tree(dir);
}

static void remove_tree(const char *d)
{
    struct dirent **names;
    int n = scandir(d, &names, NULL, alphasort);
    char path[512];

    for (int i = 0; i < n; i++) {
        if (strcmp(names[i]->d_name, ".") && strcmp(names[i]->d_name, "..")) {
            snprintf(path, sizeof(path), "%s/%s", d, names[i]->d_name);
            if (unlink(path) != 0)
                remove_tree(path);
        }
        free(names[i]);
    }
    free(names);
    rmdir(d);
}

static void read_file(const char *path, char *out, size_t cap)
{
    FILE *f = fopen(path, "r");
    size_t n = 0;

    out[0] = '\0';
    if (!f) {
        fprintf(stderr, "cannot read %s\n", path);
        failures++;
        return;
    }
    n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    fclose(f);
}

/* Open a record filter writing into `dir` with extra settings. */
static int open_rec(struct fake_chain *c, const char *extra)
{
    char text[1024];
    int rc;

    snprintf(text, sizeof(text), "directory %s\n%s", dir, extra ? extra : "");
    rc = fake_chain_open(c, "record", text, NULL, 0);
    if (rc < 0)
        return rc;
    memset(&w, 0, sizeof(w));
    c->session.codec = &writer_codec;
    c->session.codec_state = &w;
    return 0;
}

/* One server message with `seq`, starting a level when `map` is not NULL. */
static void message(struct fake_chain *c, int seq, const char *map, const char *level)
{
    fake_frame(&c->codec, SG_DIR_S2C, SG_FRAME_MESSAGE);
    c->codec.frame.sequence = seq;
    c->codec.frame.new_level = map != NULL;
    snprintf(c->codec.frame.level, sizeof(c->codec.frame.level), "%s",
             map     ? map
             : level ? level
                     : "");
    fake_chain_run(c, (uint64_t)seq, NULL);
}

static bool has_name(const char *names, const char *pattern_start, const char *end)
{
    const char *p = strstr(names, pattern_start);
    return p && strstr(p, end);
}

/* ---- cases ---- */

/* Default name: MAP-YYYYmmdd-HHMMSS-CLIENT.EXT; flushed per message; end marker at session end. */
static void test_default_name(void)
{
    struct fake_chain c;
    char names[1024], path[600], body[256], stamp[32];
    time_t now = time(NULL);
    struct tm tm;

    CHECK(open_rec(&c, NULL) == 0);
    message(&c, 10, "q3dm17", NULL);
    message(&c, 11, NULL, "q3dm17");
    CHECK(list_dir(dir, names, sizeof(names)) == 1);
    localtime_r(&now, &tm);
    strftime(stamp, sizeof(stamp), "q3dm17-%Y%m%d-", &tm);
    CHECK(strncmp(names, stamp, strlen(stamp)) == 0);
    CHECK(strlen(names) == strlen("q3dm17-20261122-041500-127.0.0.1_50000.dm_test"));
    CHECK(has_name(names, "-127.0.0.1_50000", ".dm_test"));
    snprintf(path, sizeof(path), "%s/%s", dir, names);
    read_file(path, body, sizeof(body)); /* flushed: readable before the end */
    CHECK(strcmp(body, "G\nM10\nM11\n") == 0);
    CHECK(strstr(c.log, "record: recording to ") != NULL);
    CHECK(c.chain->f[0].counters.seen == 2 && c.chain->f[0].counters.errors == 0);
    {
        uint32_t demos = 0;
        uint64_t bytes = 1;
        const char *last = NULL;
        CHECK(slot_summary(c.chain->f[0].fc->impl, c.slots[0], &demos, &last));
        CHECK(slot_bytes(c.chain->f[0].fc->impl, c.slots[0], &bytes));
        CHECK(demos == 1 && last && strcmp(last, path) == 0);
        CHECK(bytes == 0); /* the file is not finished yet */
        CHECK(!slot_summary(c.chain->f[0].fc->impl, NULL, &demos, &last));
        CHECK(!slot_bytes(c.chain->f[0].fc->impl, NULL, &bytes));
    }
    fake_chain_close(&c);
    read_file(path, body, sizeof(body));
    CHECK(strcmp(body, "G\nM10\nM11\nE\n") == 0);
    CHECK(strstr(c.log, "finished (2 messages") != NULL);
    CHECK(w.ends == 1);
}

/* One demo per level by default; `split_on_map_change no` keeps one for the session. */
static void test_map_change(void)
{
    struct fake_chain c;
    char names[1024], path[600], body[256], sub[96];

    CHECK(open_rec(&c, "name %map%\n") == 0);
    message(&c, 1, "oa_dm1", NULL);
    message(&c, 2, NULL, "oa_dm1");
    message(&c, 3, "oa_dm2", NULL);
    message(&c, 4, NULL, "oa_dm2");
    fake_chain_close(&c);
    CHECK(list_dir(dir, names, sizeof(names)) == 2);
    CHECK(strcmp(names, "oa_dm1.dm_test oa_dm2.dm_test") == 0);
    snprintf(path, sizeof(path), "%s/oa_dm1.dm_test", dir);
    read_file(path, body, sizeof(body));
    CHECK(strcmp(body, "G\nM1\nM2\nE\n") == 0);
    snprintf(path, sizeof(path), "%s/oa_dm2.dm_test", dir);
    read_file(path, body, sizeof(body));
    CHECK(strcmp(body, "G\nM3\nM4\nE\n") == 0);

    snprintf(sub, sizeof(sub), "%s/one", dir);
    {
        char text[256];
        snprintf(text, sizeof(text), "directory %s\nname %%map%%\nsplit_on_map_change no\n", sub);
        CHECK(fake_chain_open(&c, "record", text, NULL, 0) == 0);
        memset(&w, 0, sizeof(w));
        c.session.codec = &writer_codec;
        c.session.codec_state = &w;
    }
    message(&c, 1, "oa_dm1", NULL);
    message(&c, 2, "oa_dm2", NULL);
    message(&c, 3, NULL, "oa_dm2");
    fake_chain_close(&c);
    CHECK(list_dir(sub, names, sizeof(names)) == 1);
    CHECK(strcmp(names, "oa_dm1.dm_test") == 0);
    snprintf(path, sizeof(path), "%s/oa_dm1.dm_test", sub);
    read_file(path, body, sizeof(body));
    CHECK(strcmp(body, "G\nM1\nM2\nM3\nE\n") == 0);
}

/* max_size: past it, the demo ends and the next message starts part 2 on a new FILE*. */
static void test_max_size_next(void)
{
    struct fake_chain c;
    char names[1024], path[600], body[256];

    /* "G\nM1\n" is 5 bytes, each "Mn\n" 3 more: 10 bytes end a part after its third message */
    CHECK(open_rec(&c, "name %map%\nmax_size 10\n") == 0);
    for (int i = 1; i <= 7; i++)
        message(&c, i, i == 1 ? "dm" : NULL, "dm");
    fake_chain_close(&c);
    CHECK(list_dir(dir, names, sizeof(names)) == 3);
    CHECK(strcmp(names, "dm-part2.dm_test dm-part3.dm_test dm.dm_test") == 0);
    snprintf(path, sizeof(path), "%s/dm.dm_test", dir);
    read_file(path, body, sizeof(body));
    CHECK(strcmp(body, "G\nM1\nM2\nM3\nE\n") == 0);
    snprintf(path, sizeof(path), "%s/dm-part2.dm_test", dir);
    read_file(path, body, sizeof(body));
    CHECK(strcmp(body, "G\nM4\nM5\nM6\nE\n") == 0);
    snprintf(path, sizeof(path), "%s/dm-part3.dm_test", dir);
    read_file(path, body, sizeof(body));
    CHECK(strcmp(body, "G\nM7\nE\n") == 0);
    CHECK(w.news == 3 && w.ends == 3);

    /* %part% in the template numbers every part, the first too */
    CHECK(open_rec(&c, "name %map%_%part%\nmax_size 10\n") == 0);
    for (int i = 1; i <= 4; i++)
        message(&c, i, i == 1 ? "x" : NULL, "x");
    fake_chain_close(&c);
    CHECK(list_dir(dir, names, sizeof(names)) == 5);
    CHECK(strstr(names, "x_1.dm_test") && strstr(names, "x_2.dm_test"));
}

static void test_max_size_stop(void)
{
    struct fake_chain c;
    char names[1024], path[600], body[256];

    CHECK(open_rec(&c, "name %map%\nmax_size 10\nat_max_size stop\n") == 0);
    for (int i = 1; i <= 6; i++)
        message(&c, i, i == 1 ? "dm" : NULL, "dm");
    message(&c, 7, "dm2", NULL); /* not even a new level starts again */
    fake_chain_close(&c);
    CHECK(list_dir(dir, names, sizeof(names)) == 1);
    snprintf(path, sizeof(path), "%s/dm.dm_test", dir);
    read_file(path, body, sizeof(body));
    CHECK(strcmp(body, "G\nM1\nM2\nM3\nE\n") == 0);
    CHECK(w.records == 3);
    CHECK(strstr(c.log, "reached max_size") != NULL);
}

/* A file that never got a message (the codec waits for a start) is removed. */
static void test_empty_removed(void)
{
    struct fake_chain c;
    char names[1024];

    CHECK(open_rec(&c, NULL) == 0);
    w.mode = 1;
    message(&c, 1, NULL, "dm");
    message(&c, 2, NULL, "dm");
    CHECK(list_dir(dir, names, sizeof(names)) == 1); /* open while waiting */
    fake_chain_close(&c);
    CHECK(list_dir(dir, names, sizeof(names)) == 0);
    CHECK(w.records == 2);
    CHECK(strstr(c.log, "recording to") == NULL);
}

/* A demo the codec says no player can play (the sign-on alone) is removed when it ends. */
static void test_unplayable_removed(void)
{
    struct fake_chain c;
    char names[1024];

    CHECK(open_rec(&c, NULL) == 0);
    w.unplayable = true;
    message(&c, 1, "dm", NULL);
    message(&c, 2, NULL, "dm");
    CHECK(list_dir(dir, names, sizeof(names)) == 1);
    fake_chain_close(&c);
    CHECKF(list_dir(dir, names, sizeof(names)) == 0, "left: %s", names);
    CHECKF(strstr(c.log, "nothing in it to play") != NULL, "%s", c.log);
}

/* ---- a full disk ---- */

/*
 * `dir` becomes a tmpfs of `kib` KiB in a mount namespace of this process
 * alone (a user namespace too when not root): a real full disk, where a
 * write goes out in part and then fails with ENOSPC.  When that cannot be
 * set up the case fails (it never skips).
 */
static bool small_disk(unsigned kib)
{
    char opt[32];
    uid_t uid = geteuid();
    gid_t gid = getegid();

    if (unshare(uid == 0 ? CLONE_NEWNS : CLONE_NEWUSER | CLONE_NEWNS) != 0) {
        fprintf(stderr, "unshare: %s (a private mount namespace is needed)\n", strerror(errno));
        return false;
    }
    if (uid != 0) {
        char map[64];
        FILE *f;

        if ((f = fopen("/proc/self/setgroups", "w"))) {
            fputs("deny", f);
            fclose(f);
        }
        snprintf(map, sizeof(map), "%u %u 1", (unsigned)uid, (unsigned)uid);
        if (!(f = fopen("/proc/self/uid_map", "w")) || fputs(map, f) < 0 || fclose(f) != 0) {
            fprintf(stderr, "uid_map: %s\n", strerror(errno));
            return false;
        }
        snprintf(map, sizeof(map), "%u %u 1", (unsigned)gid, (unsigned)gid);
        if (!(f = fopen("/proc/self/gid_map", "w")) || fputs(map, f) < 0 || fclose(f) != 0) {
            fprintf(stderr, "gid_map: %s\n", strerror(errno));
            return false;
        }
    }
    snprintf(opt, sizeof(opt), "size=%uk", kib);
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", dir, "tmpfs", 0, opt) != 0) {
        fprintf(stderr, "mount tmpfs on %s: %s\n", dir, strerror(errno));
        return false;
    }
    return true;
}

/* The tmpfs goes (its files with it) before the case's directory is removed. */
static void small_disk_done(void)
{
    remove_tree(dir);
    umount2(dir, MNT_DETACH);
}

/* The one demo file in `dir` (not its .sig), read whole; its length, or -1. */
static long read_demo(char *out, size_t cap)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    long len = -1;

    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        size_t nl = strlen(name);

        if (name[0] != '.' && len < 0 && !(nl > 4 && strcmp(name + nl - 4, ".sig") == 0)) {
            char path[600];
            FILE *f;

            snprintf(path, sizeof(path), "%s/%s", dir, name);
            if ((f = fopen(path, "rb"))) {
                len = (long)fread(out, 1, cap, f);
                fclose(f);
            }
        }
        free(names[i]);
    }
    free(names);
    return len;
}

/*
 * A full disk: the message that does not fit went out in part; the demo is
 * cut back to its last whole block (the game's players read a demo to its
 * last whole block and take a part of one for a broken file), recording
 * stops, and the log says there is no space left.  Signed too: the .sig's
 * checkpoints then cover exactly the file that is left.
 */
static void test_disk_full(void)
{
    static char data[65536];
    struct fake_chain c;
    struct sg_sign_key key;
    long len;

    CHECK(small_disk(16));
    CHECK_EQ(sg_sign_keygen(&key), 0);
    for (int signed_demo = 0; signed_demo < 2; signed_demo++) {
        char sig[16384];
        struct sg_sign_result res;
        char line[512];

        CHECK(open_rec(&c, NULL) == 0);
        w.mode = 3;
        if (signed_demo) {
            c.session.sign_key = &key;
            c.session.sign_interval_ms = 1000000;
        }
        for (int seq = 1; seq <= 40; seq++) /* 40 000 bytes into 16 KiB */
            message(&c, seq, seq == 1 ? "dm" : NULL, "dm");
        CHECK(c.chain->f[0].counters.errors == 1);
        fake_chain_close(&c);
        len = read_demo(data, sizeof(data));
        CHECKF(len >= 8 * BLOCK && len % BLOCK == 0, "signed %d: the demo ends on a whole "
               "block: %ld bytes", signed_demo, len);
        for (long at = 0; at + BLOCK <= len; at += BLOCK)
            CHECKF(strchr("GME", data[at]) && data[at + BLOCK - 1] == '\n', "block at %ld", at);
        CHECKF(strstr(c.log, "recording stopped") && strstr(c.log, sg_strerror(-ENOSPC)),
               "signed %d: the log says no space left: %s", signed_demo, c.log);
        if (signed_demo && len > 0) {
            char path[1200], sigpath[1220], names[1024];

            list_dir(dir, names, sizeof(names));
            snprintf(path, sizeof(path), "%s/%s", dir, names);
            CHECKF(strchr(path, ' ') != NULL, "the demo and its .sig: %s", names);
            if (strchr(path, ' '))
                *strchr(path, ' ') = '\0'; /* "NAME NAME.sig" */
            snprintf(sigpath, sizeof(sigpath), "%s.sig", path);
            read_file(sigpath, sig, sizeof(sig));
            sg_sign_verify_mem((const uint8_t *)sig, strlen(sig), (const uint8_t *)data,
                               (size_t)len, key.pk, &res);
            sg_sign_result_line(&res, line, sizeof(line));
            CHECKF(res.verdict == SG_SIGN_WHOLE || res.verdict == SG_SIGN_PARTIAL, "%s", line);
        }
        remove_tree(dir);
        mkdir(dir, 0700);
    }
    small_disk_done();
}

/* The same with the real NetQuake codec: its error is "no space left", not an I/O error. */
static void test_disk_full_nq(void)
{
    static const uint8_t info[] = {11, 15, 0, 0, 0, 1, 0, 'x', 0, 'm', 'a', 'p', 's', '/',
                                   'b', '.', 'b', 's', 'p', 0, 0, 0, 25, 1};
    static uint8_t data[65536], dg[1200];
    const struct sg_codec *nq = sg_codec_find("nq");
    struct fake_chain c;
    void *st = NULL;
    long len, at;
    int blocks = 0;

    CHECK(small_disk(16));
    CHECK(nq && nq->create(&st) == 0);
    if (!nq || !st)
        return;
    CHECK(open_rec(&c, NULL) == 0);
    c.session.codec = nq;
    c.session.codec_state = st;
    for (uint32_t seq = 0; seq < 40; seq++) {
        const struct sg_frame *f = NULL;
        size_t n;

        if (seq == 0) { /* the serverinfo, reliable */
            n = sizeof(info);
            memcpy(dg + 8, info, n);
            sg_put_be32(dg, 0x00090000u | (uint32_t)(n + 8));
        } else if (seq == 1) { /* the sign-on's end, reliable */
            n = 2;
            dg[8] = 25;
            dg[9] = 3;
            sg_put_be32(dg, 0x00090000u | (uint32_t)(n + 8));
        } else { /* svc_print of 900 bytes, unreliable */
            dg[8] = 8;
            memset(dg + 9, 'a', 900);
            dg[9 + 900] = 0;
            n = 1 + 901;
            sg_put_be32(dg, 0x00100000u | (uint32_t)(n + 8));
        }
        sg_put_be32(dg + 4, seq);
        CHECK(nq->decode(st, SG_DIR_S2C, dg, n + 8, &f) == 0 && f->kind == SG_FRAME_MESSAGE);
        c.codec.frame = *f;
        fake_chain_run(&c, seq, NULL);
    }
    fake_chain_close(&c);
    len = read_demo((char *)data, sizeof(data));
    CHECKF(len > 3 && memcmp(data, "-1\n", 3) == 0, "a demo: %ld bytes", len);
    for (at = 3; len > 0 && at + 16 <= len; blocks++)
        at += 16 + (long)sg_le32(data + at);
    CHECKF(at == len && blocks >= 10, "the demo ends on a whole block: %ld of %ld bytes, %d blocks",
           at, len, blocks);
    CHECKF(strstr(c.log, "recording stopped") && strstr(c.log, sg_strerror(-ENOSPC)) &&
           !strstr(c.log, sg_strerror(-EIO)), "the log says no space left: %s", c.log);
    nq->destroy(st);
    small_disk_done();
}

/*
 * NetQuake through the record filter: a server that resends the reliable
 * message carrying svc_serverinfo (the client's copies were lost) makes
 * one demo, not one per resend, and a client that leaves after the
 * serverinfo leaves none (the sign-on alone: nothing to play).
 */
static void nq_feed(struct fake_chain *c, const struct sg_codec *nq, void *st, uint32_t flags,
                    uint32_t seq, const uint8_t *p, size_t n)
{
    uint8_t dg[512];
    const struct sg_frame *f = NULL;

    sg_put_be32(dg, flags | (uint32_t)(n + 8));
    sg_put_be32(dg + 4, seq);
    memcpy(dg + 8, p, n);
    nq->decode(st, SG_DIR_S2C, dg, n + 8, &f);
    if (f->kind != SG_FRAME_MESSAGE)
        return;
    c->codec.frame = *f;
    fake_chain_run(c, seq, NULL);
}

static void test_nq_resent_signon(void)
{
    static const uint8_t info[] = {11, 15, 0, 0, 0, 1, 0, 'x', 0, 'm', 'a', 'p', 's', '/',
                                   'b', '.', 'b', 's', 'p', 0, 0, 0, 25, 1};
    static const uint8_t signon3[] = {25, 3}, frame[] = {7, 0, 0, 128, 63, 1};
    const struct sg_codec *nq = sg_codec_find("nq");
    char names[1024];
    struct fake_chain c;
    void *st = NULL;

    for (int quitter = 0; quitter < 2; quitter++) {
        CHECK(nq && nq->create(&st) == 0);
        if (!nq || !st)
            return;
        CHECK(open_rec(&c, NULL) == 0);
        c.session.codec = nq;
        c.session.codec_state = st;
        for (int k = 0; k < 4; k++) /* the first and three resends */
            nq_feed(&c, nq, st, 0x00090000u, 0, info, sizeof(info));
        if (!quitter) {
            nq_feed(&c, nq, st, 0x00090000u, 1, signon3, sizeof(signon3));
            for (uint32_t u = 0; u < 3; u++)
                nq_feed(&c, nq, st, 0x00100000u, u, frame, sizeof(frame));
        }
        fake_chain_close(&c);
        nq->destroy(st);
        st = NULL;
        CHECKF(list_dir(dir, names, sizeof(names)) == (quitter ? 0 : 1), "%s: %s",
               quitter ? "the sign-on alone: no file" : "one demo", names);
        remove_tree(dir);
        mkdir(dir, 0700);
    }
}

/* A write error stops this session's recording, logged once; frames still pass. */
static void test_write_error(void)
{
    struct fake_chain c;
    struct sg_chain_result res;
    char names[1024];
    int v = -1;

    CHECK(open_rec(&c, NULL) == 0);
    w.mode = 2;
    message(&c, 1, "dm", NULL);
    fake_frame(&c.codec, SG_DIR_S2C, SG_FRAME_MESSAGE);
    c.codec.frame.sequence = 2;
    v = fake_chain_run(&c, 2, &res);
    CHECK(v == SG_FILTER_PASS && !res.drop);
    message(&c, 3, NULL, "dm");
    CHECK(w.records == 1);
    CHECK(c.chain->f[0].counters.errors == 1);
    {
        const char *p = strstr(c.log, "recording stopped: writing ");
        CHECK(p && strstr(p, sg_strerror(-ENOSPC)));
        CHECK(p && !strstr(p + 1, "recording stopped"));
    }
    fake_chain_close(&c);
    CHECK(list_dir(dir, names, sizeof(names)) == 0); /* nothing was written: removed */
}

/* Placeholders and sanitizing: every value becomes letters, digits, '-', '_', '.'. */
static void test_template(void)
{
    struct fake_chain c;
    char names[1024];

    CHECK(open_rec(&c, "name \"%route% %session% %server% %client% %map%\"\n") == 0);
    c.session.client = "[::1]:5";
    c.session.id = 42;
    message(&c, 1, "../evil/map", NULL);
    fake_chain_close(&c);
    CHECK(list_dir(dir, names, sizeof(names)) == 1);
    CHECK(strcmp(names, "test_42_127.0.0.1_27960____1__5_.._evil_map.dm_test") == 0);

    /* a name taken already gets -2 rather than overwriting */
    CHECK(open_rec(&c, "name fixed\n") == 0);
    message(&c, 1, "a", NULL);
    fake_chain_close(&c);
    CHECK(open_rec(&c, "name fixed\n") == 0);
    message(&c, 1, "a", NULL);
    fake_chain_close(&c);
    CHECK(list_dir(dir, names, sizeof(names)) == 3);
    CHECK(strstr(names, "fixed-2.dm_test ") && strstr(names, "fixed.dm_test"));

    /* a leading '.' never makes a hidden file */
    CHECK(open_rec(&c, "name %map%\n") == 0);
    message(&c, 1, ".hidden", NULL);
    fake_chain_close(&c);
    CHECK(list_dir(dir, names, sizeof(names)) == 4);
    CHECK(strstr(names, "_hidden.dm_test") != NULL);
}

/* What is not a server message as it went out is not recorded. */
static void test_not_recorded(void)
{
    struct fake_chain c;
    char names[1024];

    CHECK(open_rec(&c, NULL) == 0);
    fake_frame(&c.codec, SG_DIR_C2S, SG_FRAME_MESSAGE);
    fake_chain_run(&c, 1, NULL);
    fake_frame(&c.codec, SG_DIR_S2C, SG_FRAME_PARTIAL);
    fake_chain_run(&c, 2, NULL);
    fake_frame(&c.codec, SG_DIR_S2C, SG_FRAME_OOB);
    fake_chain_run(&c, 3, NULL);
    CHECK(w.records == 0 && c.slots[0] == NULL);

    /* a codec without a demo writer */
    c.session.codec = &no_writer_codec;
    message(&c, 4, "dm", NULL);
    CHECK(c.slots[0] == NULL);
    /* no codec */
    c.session.codec = NULL;
    message(&c, 5, "dm", NULL);
    CHECK(c.slots[0] == NULL);
    fake_chain_close(&c);
    CHECK(list_dir(dir, names, sizeof(names)) == 0);
}

/* A frame another filter dropped never reached the client: not recorded. */
static void test_dropped(void)
{
    struct fake_chain c;
    struct sg_filter_call call = {0};
    struct sg_filter_proxy proxy = {0};
    struct sg_chain_result res = {.drop = true, .drop_filter = 0};
    char names[1024];

    CHECK(open_rec(&c, NULL) == 0);
    fake_frame(&c.codec, SG_DIR_S2C, SG_FRAME_MESSAGE);
    c.codec.frame.new_level = true;
    call.session = &c.session;
    call.frame = &c.codec.frame;
    sg_chain_taps(c.chain, c.slots, &call, &proxy, &res);
    CHECK(w.records == 0);
    res.drop = false;
    sg_chain_taps(c.chain, c.slots, &call, &proxy, &res);
    CHECK(w.records == 1);
    fake_chain_close(&c);
    CHECK(list_dir(dir, names, sizeof(names)) == 1);
}

/* One client message; `disconnect`: the client leaves with it; `dropped`: a filter dropped it. */
static void client_message(struct fake_chain *c, int seq, bool disconnect, bool dropped)
{
    struct sg_filter_call call = {0};
    struct sg_filter_proxy proxy = {0};
    struct sg_chain_result res = {.drop = dropped, .drop_filter = dropped ? 0 : -1};

    fake_frame(&c->codec, SG_DIR_C2S, SG_FRAME_MESSAGE);
    c->codec.frame.sequence = seq;
    c->codec.frame.disconnect = disconnect;
    call.session = &c->session;
    call.frame = &c->codec.frame;
    sg_chain_taps(c->chain, c->slots, &call, &proxy, &res);
}

/* The file `name` in the case's directory holds exactly `want`. */
static bool file_is(const char *name, const char *want)
{
    char path[600], body[256];

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    read_file(path, body, sizeof(body));
    if (strcmp(body, want) == 0)
        return true;
    fprintf(stderr, "%s holds \"%s\", expected \"%s\"\n", name, body, want);
    return false;
}

static int count_of(const char *hay, const char *needle)
{
    int n = 0;

    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/*
 * The client disconnects: the demo ends there (end marker at once), what
 * the server sends after it is not recorded, the resends of the client's
 * disconnect change nothing; a reconnect (a new level) starts a new file.
 */
static void test_client_disconnect(void)
{
    struct fake_chain c;
    char names[1024];
    uint32_t demos = 0;
    uint64_t bytes = 0;
    const char *last = NULL;

    CHECK(open_rec(&c, "name %map%\n") == 0);
    message(&c, 1, "dm", NULL);
    message(&c, 2, NULL, "dm");
    client_message(&c, 100, false, false); /* an ordinary client message: nothing */
    message(&c, 3, NULL, "dm");
    client_message(&c, 101, true, false);
    CHECK(w.ends == 1);
    CHECK(file_is("dm.dm_test", "G\nM1\nM2\nM3\nE\n")); /* ended now, not at session end */
    message(&c, 4, NULL, "dm"); /* the server's answer, snapshots in flight */
    client_message(&c, 102, true, false);
    message(&c, 5, NULL, "dm");
    CHECK(w.records == 3 && w.ends == 1);
    CHECK(list_dir(dir, names, sizeof(names)) == 1);
    CHECK(strstr(c.log, "demo ") && strstr(c.log, "/dm.dm_test finished (3 messages, ") &&
          strstr(c.log, "bytes); the client disconnected\n"));
    CHECK(count_of(c.log, "the client disconnected") == 1);

    /* the client comes back on the same session: a new gamestate, a new file */
    message(&c, 1, "dm", NULL);
    message(&c, 2, NULL, "dm");
    CHECK(slot_summary(c.chain->f[0].fc->impl, c.slots[0], &demos, &last));
    CHECK(slot_bytes(c.chain->f[0].fc->impl, c.slots[0], &bytes));
    CHECK(demos == 2 && last && strstr(last, "/dm-2.dm_test"));
    CHECK_EQ(bytes, strlen("G\nM1\nM2\nM3\nE\n")); /* the one the disconnect ended */
    fake_chain_close(&c);
    CHECK(list_dir(dir, names, sizeof(names)) == 2);
    CHECK(strcmp(names, "dm-2.dm_test dm.dm_test") == 0);
    CHECK(file_is("dm.dm_test", "G\nM1\nM2\nM3\nE\n"));
    CHECK(file_is("dm-2.dm_test", "G\nM1\nM2\nE\n"));
    CHECK(w.news == 2 && w.ends == 2);

    /* one demo for the session: a reconnect still starts a new file (a new connection) */
    CHECK(open_rec(&c, "name one\nsplit_on_map_change no\n") == 0);
    message(&c, 1, "dm", NULL);
    client_message(&c, 10, true, false);
    message(&c, 2, NULL, "dm");
    message(&c, 1, "dm", NULL);
    fake_chain_close(&c);
    CHECK(file_is("one.dm_test", "G\nM1\nE\n"));
    CHECK(file_is("one-2.dm_test", "G\nM1\nE\n"));
}

/*
 * The client's disconnect counts even when a filter dropped its datagram
 * (the client has left all the same), and before anything was recorded:
 * what the server sends after it never opens a demo.
 */
static void test_client_disconnect_dropped(void)
{
    struct fake_chain c;
    char names[1024];

    CHECK(open_rec(&c, "name %map%\n") == 0);
    message(&c, 1, "dm", NULL);
    client_message(&c, 100, true, true);
    message(&c, 2, NULL, "dm");
    fake_chain_close(&c);
    CHECK(list_dir(dir, names, sizeof(names)) == 1);
    CHECK(file_is("dm.dm_test", "G\nM1\nE\n"));
    cleanup();
    make_dir();

    CHECK(open_rec(&c, "name %map%\n") == 0);
    client_message(&c, 100, true, false);
    CHECK(c.slots[0] != NULL && w.records == 0);
    message(&c, 1, NULL, "dm");
    message(&c, 2, NULL, "dm");
    CHECK(w.records == 0 && list_dir(dir, names, sizeof(names)) == 0);
    fake_chain_close(&c);
    CHECK(list_dir(dir, names, sizeof(names)) == 0);
    CHECK(strstr(c.log, "recording to") == NULL);
}

/* One server message carrying the server's disconnect (repeat: a resend; removed: by a filter). */
static void kick_message(struct fake_chain *c, int seq, bool repeat, bool removed, bool dropped)
{
    struct sg_filter_call call = {0};
    struct sg_filter_proxy proxy = {0};
    struct sg_chain_result res = {.drop = dropped, .drop_filter = dropped ? 0 : -1};
    unsigned i;

    fake_frame(&c->codec, SG_DIR_S2C, SG_FRAME_MESSAGE);
    c->codec.frame.sequence = seq;
    snprintf(c->codec.frame.level, sizeof(c->codec.frame.level), "dm");
    fake_msg(&c->codec, SG_MSG_PRINT, "peers disconnected\n");
    i = fake_msg(&c->codec, SG_MSG_DISCONNECT, "kicked");
    c->codec.msgs[i].repeat = repeat;
    c->codec.msgs[i].dropped = removed;
    fake_msg(&c->codec, SG_MSG_GAME, NULL);
    call.session = &c->session;
    call.frame = &c->codec.frame;
    sg_chain_taps(c->chain, c->slots, &call, &proxy, &res);
}

/*
 * The server drops the client (a kick, a server shutdown): the game writes
 * the message carrying the server's disconnect into its own demo, then
 * ends it; so does the recorder.  A disconnect a filter removed ends
 * nothing; one whose datagram was dropped ends the demo at its resend.
 */
static void test_server_disconnect(void)
{
    struct fake_chain c;
    char names[1024];

    CHECK(open_rec(&c, "name %map%\n") == 0);
    message(&c, 1, "dm", NULL);
    kick_message(&c, 2, false, false, false);
    CHECK(w.ends == 1);
    kick_message(&c, 3, true, false, false); /* resent until the client acknowledges */
    message(&c, 4, NULL, "dm");
    fake_chain_close(&c);
    CHECK(list_dir(dir, names, sizeof(names)) == 1);
    CHECK(file_is("dm.dm_test", "G\nM1\nM2\nE\n"));
    CHECK(strstr(c.log, "finished (2 messages, ") &&
          strstr(c.log, "; the server disconnected the client\n"));
    cleanup();
    make_dir();

    CHECK(open_rec(&c, "name %map%\n") == 0);
    message(&c, 1, "dm", NULL);
    kick_message(&c, 2, false, true, false); /* removed by a filter: the client stays */
    kick_message(&c, 3, true, false, false); /* ... and is never resent (a stray repeat) */
    message(&c, 4, NULL, "dm");
    CHECK(w.ends == 0);
    kick_message(&c, 5, false, false, true); /* its datagram dropped: the client did not get it */
    message(&c, 6, NULL, "dm");
    CHECK(w.ends == 0);
    kick_message(&c, 7, true, false, false); /* the resend reaches it */
    message(&c, 8, NULL, "dm");
    fake_chain_close(&c);
    CHECK(file_is("dm.dm_test", "G\nM1\nM2\nM3\nM4\nM6\nM7\nE\n"));
    CHECK(w.ends == 1);
}

/* A directory that cannot be made: logged, the session is not recorded, nothing breaks. */
static void test_unwritable(void)
{
    struct fake_chain c;
    char text[256];

    snprintf(text, sizeof(text), "directory /proc/self/no/such/dir\n");
    CHECK(fake_chain_open(&c, "record", text, NULL, 0) == 0);
    memset(&w, 0, sizeof(w));
    c.session.codec = &writer_codec;
    c.session.codec_state = &w;
    message(&c, 1, "dm", NULL);
    message(&c, 2, NULL, "dm");
    CHECK(strstr(c.log, "cannot record to") && strstr(c.log, "not recording this session"));
    CHECK(w.records == 0 && c.chain->f[0].counters.errors == 1);
    fake_chain_close(&c);
}

static void test_bad_config(void)
{
    struct fake_chain c;
    char err[512];

    CHECK(fake_chain_open(&c, "record", "", err, sizeof(err)) < 0);
    CHECK(strstr(err, "needs 'directory DIR'") != NULL);
    CHECK(fake_chain_open(&c, "record", "directory d\nname %mapname%\n", err, sizeof(err)) < 0);
    CHECK(strstr(err, "unknown placeholder at '%mapname%'") != NULL);
    CHECK(fake_chain_open(&c, "record", "directory d\nname a/b\n", err, sizeof(err)) < 0);
    CHECK(strstr(err, "without '/'") != NULL);
    CHECK(fake_chain_open(&c, "record", "directory d\nmax_size lots\n", err, sizeof(err)) < 0);
    CHECK(fake_chain_open(&c, "record", "directory d\nat_max_size maybe\n", err, sizeof(err)) < 0);
    CHECK(fake_chain_open(&c, "record", "directory d\nsplit_on_map_change perhaps\n", err,
                          sizeof(err)) < 0);
}

/* Every demo file and its .sig in dir verify with `key`: returns how many demos; checkpoints out. */
static int verify_dir(const struct sg_sign_key *key, unsigned *checkpoints)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort), demos = 0;

    *checkpoints = 0;
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        size_t len = strlen(name);
        char path[600], sigpath[620], data[4096], sig[8192];
        struct sg_sign_result res;
        char line[512];

        if (name[0] != '.' && !(len > 4 && strcmp(name + len - 4, ".sig") == 0)) {
            snprintf(path, sizeof(path), "%s/%s", dir, name);
            snprintf(sigpath, sizeof(sigpath), "%s.sig", path);
            read_file(path, data, sizeof(data));
            read_file(sigpath, sig, sizeof(sig));
            sg_sign_verify_mem((const uint8_t *)sig, strlen(sig), (const uint8_t *)data,
                               strlen(data), key->pk, &res);
            sg_sign_result_line(&res, line, sizeof(line));
            CHECKF(res.verdict == SG_SIGN_WHOLE, "%s: %s", name, line);
            CHECKF(strstr(sig, "meta kind demo\n") && strstr(sig, "meta protocol "),
                   "%s.sig:\n%s", name, sig);
            *checkpoints += res.checkpoints;
            demos++;
        }
        free(names[i]);
    }
    free(names);
    return demos;
}

/* With the session's sign_key: each demo (per level, per max_size part) gets a .sig that
 * verifies whole, with a checkpoint per interval and a final one; the size limit still works
 * through the signing stream (ftell). */
static void test_signed(void)
{
    struct fake_chain c;
    struct sg_sign_key key;
    char names[1024];
    unsigned cps;

    CHECK_EQ(sg_sign_keygen(&key), 0);
    CHECK_EQ(open_rec(&c, NULL), 0);
    c.session.sign_key = &key;
    c.session.sign_interval_ms = 1000;
    message(&c, 1000, "q3dm1", NULL);
    message(&c, 1500, NULL, "q3dm1");
    message(&c, 2100, NULL, "q3dm1"); /* a checkpoint (1100 ms since the first) */
    message(&c, 3200, NULL, "q3dm1"); /* another */
    message(&c, 4000, "q3dm2", NULL); /* a new file */
    message(&c, 4100, NULL, "q3dm2");
    fake_chain_close(&c);
    CHECK_EQ(list_dir(dir, names, sizeof(names)), 4);
    CHECKF(verify_dir(&key, &cps) == 2, "%s", names);
    CHECKF(cps == 2 + 2, "checkpoints %u (two periodic, two final)", cps);
    cleanup();
    make_dir();

    CHECK_EQ(open_rec(&c, "max_size 12\n"), 0);
    c.session.sign_key = &key;
    c.session.sign_interval_ms = 1000;
    message(&c, 1000, "q3dm1", NULL); /* "G\nM1000\n": 8 bytes */
    message(&c, 1001, NULL, "q3dm1"); /* 14 > 12: the part ends */
    message(&c, 1002, NULL, "q3dm1"); /* part 2 */
    fake_chain_close(&c);
    CHECK_EQ(list_dir(dir, names, sizeof(names)), 4);
    CHECKF(verify_dir(&key, &cps) == 2, "%s", names);
    CHECKF(strstr(names, "-part2.dm_test.sig") != NULL, "%s", names);
}

/* The bytes of the files in `dir` (the demos; a test without .sig files). */
static uint64_t dir_bytes(void)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    uint64_t total = 0;

    for (int i = 0; i < n; i++) {
        char path[600];
        struct stat st;

        snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
        if (names[i]->d_name[0] != '.' && stat(path, &st) == 0)
            total += (uint64_t)st.st_size;
        free(names[i]);
    }
    free(names);
    return total;
}

/*
 * The summary's bytes: every finished file counts, whatever ended it (two
 * max_size parts, a level change, the client's disconnect, the session's
 * end through the finish hook), and the file being written does not
 * until then.
 */
static void test_demo_bytes(void)
{
    struct fake_chain c;
    const struct sg_filter_impl *impl;
    char names[1024];
    uint32_t demos = 0;
    uint64_t bytes = 0;
    const char *last = NULL;

    /* "G\nM1\n" is 5 bytes, each "Mn\n" 3 more: 10 bytes end a part after its third message */
    CHECK_EQ(open_rec(&c, "name %map%\nmax_size 10\n"), 0);
    impl = c.chain->f[0].fc->impl;
    for (int i = 1; i <= 5; i++)
        message(&c, i, i == 1 ? "dm" : NULL, "dm");
    CHECK(slot_summary(impl, c.slots[0], &demos, &last));
    CHECK(slot_bytes(impl, c.slots[0], &bytes));
    CHECK_EQ(demos, 2);
    CHECK_EQ(bytes, strlen("G\nM1\nM2\nM3\nE\n")); /* part 1; part 2 is being written */
    message(&c, 6, NULL, "dm");
    CHECK(slot_summary(impl, c.slots[0], &demos, &last));
    CHECK(slot_bytes(impl, c.slots[0], &bytes));
    CHECK_EQ(bytes, strlen("G\nM1\nM2\nM3\nE\n") + strlen("G\nM4\nM5\nM6\nE\n"));
    CHECK_EQ(list_dir(dir, names, sizeof(names)), 2);
    CHECKF(strcmp(names, "dm-part2.dm_test dm.dm_test") == 0, "%s", names);
    CHECK_EQ(bytes, dir_bytes());

    /* part 3, ended by a level change; the next level's file by the client's disconnect */
    message(&c, 7, NULL, "dm");
    message(&c, 8, "dm2", "dm2");
    message(&c, 9, NULL, "dm2");
    client_message(&c, 100, true, false);
    CHECK(slot_summary(impl, c.slots[0], &demos, &last));
    CHECK(slot_bytes(impl, c.slots[0], &bytes));
    CHECK_EQ(demos, 4);
    CHECK_EQ(list_dir(dir, names, sizeof(names)), 4);
    CHECK_EQ(bytes, dir_bytes());

    /* a reconnect's file, finished as the session ends (before its summary) */
    message(&c, 1, "dm3", NULL);
    CHECK(slot_summary(impl, c.slots[0], &demos, &last));
    CHECK(slot_bytes(impl, c.slots[0], &bytes));
    CHECK_EQ(demos, 5);
    CHECK(bytes < dir_bytes()); /* "G\nM1\n" written, not finished */
    slot_finish(impl, c.slots[0], &c.session);
    slot_finish(impl, NULL, &c.session); /* no slot: nothing */
    CHECK(slot_summary(impl, c.slots[0], &demos, &last));
    CHECK(slot_bytes(impl, c.slots[0], &bytes));
    CHECK_EQ(demos, 5);
    CHECK_EQ(bytes, dir_bytes());
    CHECK(file_is("dm3.dm_test", "G\nM1\nE\n"));
    fake_chain_close(&c); /* the slot's session_end: the file is not finished twice */
    CHECK_EQ(w.ends, 5);
    CHECK_EQ(list_dir(dir, names, sizeof(names)), 5);
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"default_name", test_default_name},
        {"map_change", test_map_change},
        {"max_size_next", test_max_size_next},
        {"max_size_stop", test_max_size_stop},
        {"empty_removed", test_empty_removed},
        {"write_error", test_write_error},
        {"unplayable_removed", test_unplayable_removed},
        {"nq_resent_signon", test_nq_resent_signon},
        {"disk_full", test_disk_full},
        {"disk_full_nq", test_disk_full_nq},
        {"template", test_template},
        {"not_recorded", test_not_recorded},
        {"dropped", test_dropped},
        {"unwritable", test_unwritable},
        {"client_disconnect", test_client_disconnect},
        {"client_disconnect_dropped", test_client_disconnect_dropped},
        {"server_disconnect", test_server_disconnect},
        {"bad_config", test_bad_config},
        {"signed", test_signed},
        {"demo_bytes", test_demo_bytes},
    };

    return unit_main(argc, argv, cases, UNIT_COUNT(cases), make_dir, cleanup);
}
