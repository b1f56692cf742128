/*
 * Micro-benchmark of the Quake 3 message layer on real demos (built, not a
 * test).
 *
 * Usage: q3_msg_bench [-t seconds] [--only decode|encode|demo] [directory]
 *
 * Loads every demo (*.dm_NN) under `directory` (default $SG_TESTDATA/q3,
 * else the test data beside the source tree) into memory once, then
 * measures, each for a third of the time budget (default 5 s in all):
 *
 *   decode     every message through sg_q3_parse_server_message, a fresh
 *              state per demo and pass (created and freed outside the
 *              timed part; its first touch is inside);
 *   re-encode  the decoded messages through sg_q3_write_server_message
 *              (the decoded messages are kept; outputs are compared with
 *              the demo bytes afterwards and mismatches counted);
 *   demo       decode + re-encode + compare of whole demos, as `slipgate
 *              demo reencode` does without the file I/O: state creation
 *              included.
 *
 * Rates are MB/s of demo message bytes (the Huffman-coded messages, block
 * headers not counted).  A repetition is a batch of whole passes over all
 * demos; the best batch counts, the median shows how noisy the machine was.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "protocols/error.h"
#include "protocols/q3/demo.h"
#include "protocols/q3/msg.h"
#include "protocols/q3/state.h"
#include "protocols/q3/svmsg.h"

#ifndef SG_TESTDATA_DEFAULT
#define SG_TESTDATA_DEFAULT "../shared/testdata"
#endif

#define MIN_REPS 3
#define MAX_REPS 1000

struct bench_msg {
    int32_t seq;
    uint32_t off; /* in bench.data */
    uint32_t len;
};

struct bench_demo {
    char *path;
    int protocol;
    size_t first, count; /* msgs[first .. first + count) */
    int end;             /* 0, or the reader's end error */
};

struct bench {
    struct bench_demo *demos;
    size_t num_demos;
    struct bench_msg *msgs;
    size_t num_msgs;
    uint8_t *data;
    size_t num_data, cap_data;

    struct sg_q3_state **states; /* one per demo, for the decode pass */
    struct sg_q3_svmsg scratch;  /* reused by the decode and demo passes */
    struct sg_q3_svmsg *decoded; /* one per message, for the re-encode pass */
    uint8_t *out;                /* re-encode output: num_data + one message of slack */
    int *out_len;                /* re-encode result per message */

    uint64_t decode_errors, mismatches, demo_mismatches;
};

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* --- loading --- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Append to `*list` the demo files under `dir`, recursively.  0 or -errno. */
static int find_demos(const char *dir, char ***list, size_t *count)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int err = 0;

    if (!d)
        return -errno;
    while (err == 0 && (e = readdir(d)) != NULL) {
        char path[4096];
        struct stat sb;

        if (e->d_name[0] == '.')
            continue;
        if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path) ||
            stat(path, &sb) != 0)
            continue;
        if (S_ISDIR(sb.st_mode)) {
            err = find_demos(path, list, count);
        } else if (S_ISREG(sb.st_mode) && sg_q3_demo_protocol_from_name(path) > 0) {
            char **l = realloc(*list, (*count + 1) * sizeof(*l));

            if (!l || !(l[*count] = strdup(path))) {
                if (l)
                    *list = l;
                err = -ENOMEM;
                break;
            }
            *list = l;
            (*count)++;
        }
    }
    closedir(d);
    return err;
}

/* Read every message of demo `path` into the bench's pools.  0 or a negative error. */
static int load_demo(struct bench *b, char *path)
{
    static uint8_t buf[SG_Q3_MAX_MSGLEN];
    struct sg_q3_demo_reader r;
    struct bench_demo *d;
    int err;

    d = realloc(b->demos, (b->num_demos + 1) * sizeof(*d));
    if (!d)
        return -ENOMEM;
    b->demos = d;
    d = &b->demos[b->num_demos];
    memset(d, 0, sizeof(*d));
    d->path = path;
    d->first = b->num_msgs;
    err = sg_q3_demo_reader_open(&r, path);
    if (err < 0)
        return err;
    d->protocol = r.protocol;
    for (;;) {
        struct bench_msg *m;
        int32_t seq;
        size_t len;

        err = sg_q3_demo_read(&r, &seq, buf, &len);
        if (err <= 0)
            break;
        if (b->num_data + len > b->cap_data) {
            size_t cap = b->cap_data ? b->cap_data * 2 : 1 << 20;
            uint8_t *p;

            while (cap < b->num_data + len)
                cap *= 2;
            p = realloc(b->data, cap);
            if (!p) {
                err = -ENOMEM;
                break;
            }
            b->data = p;
            b->cap_data = cap;
        }
        m = realloc(b->msgs, (b->num_msgs + 1) * sizeof(*m));
        if (!m) {
            err = -ENOMEM;
            break;
        }
        b->msgs = m;
        m = &b->msgs[b->num_msgs++];
        m->seq = seq;
        m->off = (uint32_t)b->num_data;
        m->len = (uint32_t)len;
        memcpy(b->data + b->num_data, buf, len);
        b->num_data += len;
    }
    sg_q3_demo_reader_finish(&r);
    d->count = b->num_msgs - d->first;
    d->end = err;
    b->num_demos++;
    /* a truncated file still gives its whole messages */
    return err == 0 || err == SG_E_TRUNCATED ? 0 : err;
}

/* --- the passes: each returns the seconds of its timed part --- */

/* Decode every message, a fresh state per demo. */
static double pass_decode(struct bench *b)
{
    double t;

    for (size_t i = 0; i < b->num_demos; i++) {
        b->states[i] = sg_q3_state_create(b->demos[i].protocol);
        if (!b->states[i]) {
            fputs("out of memory\n", stderr);
            exit(1);
        }
    }
    b->decode_errors = 0;
    t = now();
    for (size_t i = 0; i < b->num_demos; i++) {
        const struct bench_demo *d = &b->demos[i];

        for (size_t k = d->first; k < d->first + d->count; k++) {
            const struct bench_msg *m = &b->msgs[k];

            if (sg_q3_parse_server_message(b->states[i], m->seq, b->data + m->off, m->len,
                                           &b->scratch) < 0)
                b->decode_errors++;
        }
    }
    t = now() - t;
    for (size_t i = 0; i < b->num_demos; i++) {
        sg_q3_state_destroy(b->states[i]);
        b->states[i] = NULL;
    }
    return t;
}

/* Encode every decoded message back to back into b->out, then compare. */
static double pass_encode(struct bench *b)
{
    size_t off = 0;
    double t;

    t = now();
    for (size_t k = 0; k < b->num_msgs; k++) {
        int n = sg_q3_write_server_message(&b->decoded[k], b->out + off, SG_Q3_MAX_MSGLEN);

        b->out_len[k] = n;
        if (n > 0)
            off += (size_t)n;
    }
    t = now() - t;

    /* outside the timed part: each output against its demo message */
    b->mismatches = 0;
    off = 0;
    for (size_t k = 0; k < b->num_msgs; k++) {
        const struct bench_msg *m = &b->msgs[k];
        int n = b->out_len[k];

        if (n != (int)m->len || memcmp(b->out + off, b->data + m->off, m->len) != 0)
            b->mismatches++;
        if (n > 0)
            off += (size_t)n;
    }
    return t;
}

/* Whole demos: state, decode, encode, compare, as a demo re-encode does. */
static double pass_demo(struct bench *b)
{
    static uint8_t buf[SG_Q3_MAX_MSGLEN];
    double t = now();

    b->demo_mismatches = 0;
    for (size_t i = 0; i < b->num_demos; i++) {
        const struct bench_demo *d = &b->demos[i];
        struct sg_q3_state *st = sg_q3_state_create(d->protocol);

        if (!st) {
            fputs("out of memory\n", stderr);
            exit(1);
        }
        for (size_t k = d->first; k < d->first + d->count; k++) {
            const struct bench_msg *m = &b->msgs[k];
            int n = -1;

            if (sg_q3_parse_server_message(st, m->seq, b->data + m->off, m->len, &b->scratch) == 0)
                n = sg_q3_write_server_message(&b->scratch, buf, sizeof(buf));
            if (n != (int)m->len || memcmp(buf, b->data + m->off, m->len) != 0)
                b->demo_mismatches++;
        }
        sg_q3_state_destroy(st);
    }
    return now() - t;
}

/* --- timing --- */

struct result {
    const char *name;
    double best, median; /* seconds per pass */
    int reps, passes;
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/*
 * Repeat batches of passes for about `budget` seconds of wall time (at
 * least MIN_REPS batches); a batch lasts about a tenth of the budget.
 */
static void run(struct bench *b, double (*pass)(struct bench *), double budget, struct result *res)
{
    static double per_pass[MAX_REPS];
    double start = now(), batch = budget / 10;
    int reps = 0, passes = 0;

    pass(b); /* warm the caches and the allocator */
    while (reps < MAX_REPS && (reps < MIN_REPS || now() - start < budget)) {
        double timed = 0;
        int n = 0;

        while (n == 0 || timed < batch) {
            timed += pass(b);
            n++;
        }
        per_pass[reps++] = timed / n;
        passes += n;
    }
    qsort(per_pass, (size_t)reps, sizeof(per_pass[0]), cmp_double);
    res->best = per_pass[0];
    res->median = per_pass[reps / 2];
    res->reps = reps;
    res->passes = passes;
}

static void report(const struct bench *b, const struct result *r, uint64_t bad)
{
    printf("%-26s %9.1f %9.1f %10.0f %7d %7d %9llu\n", r->name, (double)b->num_data / r->best / 1e6,
           (double)b->num_data / r->median / 1e6, (double)b->num_msgs / r->best, r->reps, r->passes,
           (unsigned long long)bad);
}

/* --- main --- */

static int usage(void)
{
    fputs("usage: q3_msg_bench [-t seconds] [--only decode|encode|demo] [directory]\n", stderr);
    return 2;
}

int main(int argc, char **argv)
{
    struct bench b = {0};
    struct result res[3] = {{.name = "decode (parse)"},
                            {.name = "re-encode (write)"},
                            {.name = "demo decode+re-encode"}};
    char root[PATH_MAX], rel[PATH_MAX];
    const char *dir = NULL, *only = NULL;
    double seconds = 5;
    char **files = NULL;
    size_t num_files = 0;
    int err;

    /* arguments */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) {
            seconds = atof(argv[++i]);
            if (!(seconds > 0))
                return usage();
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
            if (strcmp(only, "decode") != 0 && strcmp(only, "encode") != 0 &&
                strcmp(only, "demo") != 0)
                return usage();
        } else if (argv[i][0] == '-' || dir) {
            return usage();
        } else {
            dir = argv[i];
        }
    }
    if (!dir) {
        const char *env = getenv("SG_TESTDATA");

        snprintf(rel, sizeof(rel), "%s/q3", env && *env ? env : SG_TESTDATA_DEFAULT);
        dir = realpath(rel, root) ? root : rel;
    }

    /* load every demo once, in name order */
    err = find_demos(dir, &files, &num_files);
    if (err < 0 || num_files == 0) {
        fprintf(stderr, "%s: %s\n", dir, err < 0 ? sg_strerror(err) : "no demo files");
        return 1;
    }
    qsort(files, num_files, sizeof(*files), cmp_str);
    for (size_t i = 0; i < num_files; i++) {
        err = load_demo(&b, files[i]);
        if (err < 0) {
            fprintf(stderr, "%s: %s\n", files[i], sg_strerror(err));
            return 1;
        }
    }
    b.states = calloc(b.num_demos, sizeof(*b.states));
    b.decoded = calloc(b.num_msgs ? b.num_msgs : 1, sizeof(*b.decoded));
    b.out = malloc(b.num_data + SG_Q3_MAX_MSGLEN);
    b.out_len = calloc(b.num_msgs ? b.num_msgs : 1, sizeof(*b.out_len));
    if (!b.states || !b.decoded || !b.out || !b.out_len)
        return 1;
    sg_q3_svmsg_init(&b.scratch);

    /* keep one decoded message per demo message for the re-encode pass */
    for (size_t i = 0; i < b.num_demos; i++) {
        const struct bench_demo *d = &b.demos[i];
        struct sg_q3_state *st = sg_q3_state_create(d->protocol);

        if (!st)
            return 1;
        for (size_t k = d->first; k < d->first + d->count; k++) {
            const struct bench_msg *m = &b.msgs[k];

            sg_q3_svmsg_init(&b.decoded[k]);
            err = sg_q3_parse_server_message(st, m->seq, b.data + m->off, m->len, &b.decoded[k]);
            if (err < 0)
                fprintf(stderr, "%s: message %zu (seq %d): %s\n", d->path, k - d->first, m->seq,
                        sg_errname(err));
        }
        sg_q3_state_destroy(st);
    }

    /* header: what was loaded, and how to run it again */
    printf("q3_msg_bench: %zu demos, %zu messages, %zu message bytes (%.1f bytes/message)\n",
           b.num_demos, b.num_msgs, b.num_data,
           b.num_msgs ? (double)b.num_data / (double)b.num_msgs : 0.0);
    for (size_t i = 0; i < b.num_demos; i++)
        printf("  %-60s proto %d %6zu messages%s\n", b.demos[i].path, b.demos[i].protocol,
               b.demos[i].count, b.demos[i].end ? " (truncated)" : "");
    printf("reproduce: %s -t %g%s%s %s\n\n", argv[0], seconds, only ? " --only " : "",
           only ? only : "", dir);
    fflush(stdout);

    /* each pass gets a third of the time, or all of it with --only */
    {
        double (*const passes[3])(struct bench *) = {pass_decode, pass_encode, pass_demo};
        static const char *const names[3] = {"decode", "encode", "demo"};

        for (int i = 0; i < 3; i++)
            if (!only || strcmp(only, names[i]) == 0)
                run(&b, passes[i], only ? seconds : seconds / 3, &res[i]);
    }

    printf("%-26s %9s %9s %10s %7s %7s %9s\n", "", "best", "median", "best", "", "", "errors/");
    printf("%-26s %9s %9s %10s %7s %7s %9s\n", "what", "MB/s", "MB/s", "msg/s", "reps", "passes",
           "mismatch");
    if (res[0].reps)
        report(&b, &res[0], b.decode_errors);
    if (res[1].reps)
        report(&b, &res[1], b.mismatches);
    if (res[2].reps)
        report(&b, &res[2], b.demo_mismatches);

    /* clean up */
    for (size_t k = 0; k < b.num_msgs; k++)
        sg_q3_svmsg_finish(&b.decoded[k]);
    sg_q3_svmsg_finish(&b.scratch);
    for (size_t i = 0; i < num_files; i++)
        free(files[i]);
    free(files);
    free(b.decoded);
    free(b.states);
    free(b.out);
    free(b.out_len);
    free(b.msgs);
    free(b.data);
    free(b.demos);
    return b.decode_errors || b.mismatches || b.demo_mismatches ? 1 : 0;
}
