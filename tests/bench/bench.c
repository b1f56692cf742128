/*
 * slipgate-bench: main, the command line and the table of modes.
 *
 *   slipgate-bench [--sessions N] [--rate R] [--duration S] [--modes LIST]
 *                  [--slipgate PATH] [--json] [--quick] ...
 *
 * Each mode measures, with its own relay process and its own generator and
 * sink, the one-way latency at a fixed rate, the relay's RSS per session,
 * and the highest rate with < 0.1 % loss; the modes take turns (run.c).
 * Figures are reported next to the minimal relay's (ratios) and the direct
 * path's (added latency) from the same run (report.c).  Performance is
 * reported, never asserted: the exit status is 0 when every mode ran, 1 when
 * one failed, 2 on a usage error.
 */
#include "tests/bench/bench.h"

#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#ifndef SG_BENCH_SLIPGATE
#define SG_BENCH_SLIPGATE "slipgate"
#endif
#ifndef SG_BENCH_CAPTURES
#define SG_BENCH_CAPTURES "../shared/testdata/q3/sessions"
#endif
#ifndef SG_BENCH_QW_CAPTURES
#define SG_BENCH_QW_CAPTURES "../shared/testdata/qw/sessions"
#endif
#ifndef SG_BENCH_NQ_CAPTURES
#define SG_BENCH_NQ_CAPTURES "../shared/testdata/nq/sessions"
#endif
#ifndef SG_BENCH_Q2_CAPTURES
#define SG_BENCH_Q2_CAPTURES "../shared/testdata/q2/sessions"
#endif

/* ---- the modes ---- */

const struct sg_bench_mode sg_bench_modes[] = {
    {"direct",
     SG_BENCH_RELAY_NONE,
     {NULL},
     false,
     false,
     NULL,
     "no relay: the harness's own ceiling and latency floor"},
    {"minrelay",
     SG_BENCH_RELAY_MINRELAY,
     {NULL},
     false,
     false,
     NULL,
     "the minimal relay in this program: the floor"},
    /* Sessions open with the bench's hello, which no codec claims: `-p auto`
     * then relays the Quake 3 traffic after it without decoding. */
    {"slipgate",
     SG_BENCH_RELAY_SLIPGATE,
     {"-p", "auto", NULL},
     false,
     false,
     NULL,
     "slipgate, pass-through (no decoding)"},
    /* The modes below open each session with the real handshake, so that
     * slipgate's Quake 3 codec follows every connection. */
    {"slipgate-decode",
     SG_BENCH_RELAY_SLIPGATE,
     {"-p", "q3", NULL},
     true,
     false,
     NULL,
     "slipgate decoding every datagram (full decode)"},
    {"slipgate-reencode",
     SG_BENCH_RELAY_SLIPGATE,
     {"-p", "q3", "+set", "reencode", "always", NULL},
     true,
     false,
     NULL,
     "slipgate re-encoding every message (reencode always)"},
    {"slipgate-record",
     SG_BENCH_RELAY_SLIPGATE,
     {"-p", "q3", NULL},
     true,
     true,
     NULL,
     "slipgate decoding and recording demos (record DIR)"},
    {"slipgate-http",
     SG_BENCH_RELAY_SLIPGATE,
     {"-p", "q3", NULL},
     true,
     false,
     NULL,
     "slipgate decoding, with `http` on and /metrics scraped every 100 ms",
     true,
     false},
    {"slipgate-signed",
     SG_BENCH_RELAY_SLIPGATE,
     {"-p", "q3", NULL},
     true,
     true,
     NULL,
     "slipgate recording signed demos (record DIR, sign_key KEY: hashing and checkpoints)",
     false,
     true},
    /* What the residence times cost: slipgate-decode without them (named only). */
    {"slipgate-untimed",
     SG_BENCH_RELAY_SLIPGATE,
     {"-p", "q3", "+set", "residence", "off", NULL},
     true,
     false,
     NULL,
     "slipgate decoding with `residence off` (what measuring the residence times costs)",
     false,
     false,
     true},
/* Worker loops (`-w N`): decoding, as slipgate-decode; picked by --workers. */
#define SG_BENCH_WORKERS_MODE(n)                                                                   \
    {                                                                                              \
        "slipgate-w" #n, SG_BENCH_RELAY_SLIPGATE, {"-p", "q3", "-w", #n, NULL}, true, false, NULL, \
            "slipgate decoding with " #n " worker loop(s) (-w " #n "; --workers)", false, false,   \
            true                                                                                   \
    }
    SG_BENCH_WORKERS_MODE(1),
    SG_BENCH_WORKERS_MODE(2),
    SG_BENCH_WORKERS_MODE(4),
    SG_BENCH_WORKERS_MODE(8),
#undef SG_BENCH_WORKERS_MODE
};

const size_t sg_bench_nmodes = sizeof(sg_bench_modes) / sizeof(sg_bench_modes[0]);

#define NMODES (sizeof(sg_bench_modes) / sizeof(sg_bench_modes[0]))

/* ---- clean-up on every way out ---- */

/* Paths a signal handler may have to remove (async-signal-safe clean-up). */
/* per mode: log, stats; the signing key and its .pub; the record folders, the folder */
static char cleanup_paths[2 * NMODES + 5][PATH_MAX];
static volatile sig_atomic_t keep_tmp;

static void cleanup_files(void)
{
    if (keep_tmp)
        return;
    for (size_t i = 0; i < 2 * NMODES + 5; i++) {
        if (!cleanup_paths[i][0])
            continue;
        if (i >= 2 * NMODES + 2)
            rmdir(cleanup_paths[i]);
        else
            unlink(cleanup_paths[i]);
    }
}

static void on_exit_cleanup(void)
{
    sg_bench_child_kill_all();
    cleanup_files();
}

static void on_signal(int sig)
{
    sg_bench_child_kill_all();
    cleanup_files();
    _exit(128 + sig);
}

void sg_bench_say(const struct sg_bench_opts *o, bool verbose_only, const char *fmt, ...)
{
    va_list ap;

    if (verbose_only && !o->verbose)
        return;
    fputs("slipgate-bench: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* ---- command line ---- */

static const char usage_head[] =
    "Usage: slipgate-bench [OPTIONS]\n"
    "       slipgate-bench spectate [OPTIONS]   (spectators on one watched session:\n"
    "                                            slipgate-bench spectate --help)\n"
    "\n"
    "Measure slipgate against a direct path and a minimal relay, in the same run,\n"
    "on 127.0.0.1: throughput (highest rate with < 0.1% loss), one-way latency\n"
    "at a fixed rate, and the relay's RSS per session.  See tests/bench/README.md.\n"
    "\n"
    "Options:\n"
    "  --sessions N      client sessions (default 32; --quick 8)\n"
    "  --rate R          datagrams/s, both directions together, for the latency run\n"
    "                    and the first throughput step (default 20000; --quick 5000)\n"
    "  --duration S      seconds of the latency run per mode (default 5; --quick 0.3)\n"
    "  --steps K         throughput steps per mode (default 10; --quick 3)\n"
    "  --step-ms MS      length of one throughput step (default 1000; --quick 150)\n"
    "  --workers LIST    worker loop counts (1,2,4,8): adds slipgate-wN (decoding\n"
    "                    with -w N) after --modes (default then: minrelay only)\n"
    "  --modes LIST      comma-separated, run in that order (default: all but the\n"
    "                    slipgate-wN modes):\n";

static const char usage_tail[] =
    "  --slipgate PATH   the slipgate binary (default: the one built beside)\n"
    "  --captures DIR    Quake 3 captures: DIR/*/capture.pcap (default: the project's)\n"
    "  --game GAME       q3, qw, nq or q2: the game of the captures; the decoding\n"
    "                    modes run -p GAME\n"
    "                    (qw: QuakeWorld, default captures the project's qw/sessions;\n"
    "                    nq: NetQuake, nq/sessions, the accept's port move followed;\n"
    "                    q2: Quake 2, q2/sessions: protocols 34, 35 and 36)\n"
    "  --shape builtin   netchan-shaped placeholders instead of the captures (the\n"
    "                    decoding modes are then n/a)\n"
    "  --json            print one JSON object instead of the table\n"
    "  --quick           a tiny run for smoke testing (a few seconds)\n"
    "  --keep-logs       keep the relays' logs (their folder is printed)\n"
    "  --pin             each relay on CPUs of its own (the last ones, one per loop),\n"
    "                    the generator and the sink on the others; needs more CPUs\n"
    "                    than the most loops of any mode\n"
    "  -v, --verbose     print every step on stderr\n"
    "  -h, --help        print this help\n"
    "\n"
    "Exit status: 0 when every mode ran, 1 when a mode failed, 2 on a usage error.\n";

static void usage(FILE *f)
{
    fputs(usage_head, f);
    for (size_t i = 0; i < NMODES; i++)
        fprintf(f, "                      %-18s %s%s%s\n", sg_bench_modes[i].name,
                sg_bench_modes[i].what, sg_bench_modes[i].unavailable ? "; n/a: " : "",
                sg_bench_modes[i].unavailable ? sg_bench_modes[i].unavailable : "");
    fputs(usage_tail, f);
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return -EINVAL;
    *out = v;
    return 0;
}

/* Canonical, de-duplicated mode list; -EINVAL on an unknown name. */
static int parse_modes(const char *list, char *out, size_t len)
{
    char buf[256], *save = NULL;
    bool seen[NMODES] = {false};
    size_t off = 0;

    if (strcmp(list, "all") == 0) {
        buf[0] = '\0';
        for (size_t i = 0, o = 0; i < NMODES && o < sizeof(buf); i++)
            if (!sg_bench_modes[i].by_workers)
                o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s", o ? "," : "",
                                      sg_bench_modes[i].name);
    } else {
        snprintf(buf, sizeof(buf), "%s", list);
    }
    out[0] = '\0';
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        size_t i;

        for (i = 0; i < NMODES && strcmp(sg_bench_modes[i].name, tok) != 0; i++)
            ;
        if (i == NMODES) {
            fprintf(stderr, "slipgate-bench: unknown mode '%s'\n", tok);
            return -EINVAL;
        }
        if (seen[i])
            continue;
        seen[i] = true;
        off += (size_t)snprintf(out + off, len - off, "%s%s", off ? "," : "", tok);
        if (off >= len)
            return -EINVAL;
    }
    return off ? 0 : -EINVAL;
}

enum {
    OPT_SESSIONS = 256,
    OPT_RATE,
    OPT_DURATION,
    OPT_STEPS,
    OPT_STEP_MS,
    OPT_MODES,
    OPT_SLIPGATE,
    OPT_CAPTURES,
    OPT_SHAPE,
    OPT_JSON,
    OPT_QUICK,
    OPT_KEEP,
    OPT_GAME,
    OPT_WORKERS,
    OPT_PIN,
};

/* --workers 1,2,...: the modes slipgate-wN after `modes` (minrelay when none were named). */
static int workers_modes(const char *list, const char *modes, bool named, char *out, size_t len)
{
    char buf[128], *save = NULL;
    size_t off = (size_t)snprintf(out, len, "%s", named ? modes : "minrelay");

    snprintf(buf, sizeof(buf), "%s", list);
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, "1") && strcmp(tok, "2") && strcmp(tok, "4") && strcmp(tok, "8")) {
            fprintf(stderr, "slipgate-bench: --workers: 1, 2, 4 or 8, got '%s'\n", tok);
            return -EINVAL;
        }
        off += (size_t)snprintf(out + off, len > off ? len - off : 0, ",slipgate-w%s", tok);
    }
    return off < len ? 0 : -EINVAL;
}

static int parse_args(int argc, char **argv, struct sg_bench_opts *o)
{
    static const struct option longopts[] = {
        {"sessions", required_argument, NULL, OPT_SESSIONS},
        {"rate", required_argument, NULL, OPT_RATE},
        {"duration", required_argument, NULL, OPT_DURATION},
        {"steps", required_argument, NULL, OPT_STEPS},
        {"step-ms", required_argument, NULL, OPT_STEP_MS},
        {"modes", required_argument, NULL, OPT_MODES},
        {"slipgate", required_argument, NULL, OPT_SLIPGATE},
        {"captures", required_argument, NULL, OPT_CAPTURES},
        {"shape", required_argument, NULL, OPT_SHAPE},
        {"json", no_argument, NULL, OPT_JSON},
        {"quick", no_argument, NULL, OPT_QUICK},
        {"keep-logs", no_argument, NULL, OPT_KEEP},
        {"game", required_argument, NULL, OPT_GAME},
        {"workers", required_argument, NULL, OPT_WORKERS},
        {"pin", no_argument, NULL, OPT_PIN},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    double sessions = 0, steps = 0, step_ms = 0;
    const char *modes = "all", *workers = NULL;
    char wmodes[256];
    int c;

    o->slipgate = SG_BENCH_SLIPGATE;
    o->captures = NULL;
    o->game = "q3";
    while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
        int err = 0;

        switch (c) {
        case OPT_SESSIONS:
            err = parse_double(optarg, 1, SG_BENCH_MAX_SESSIONS, &sessions);
            break;
        case OPT_RATE:
            err = parse_double(optarg, SG_BENCH_RATE_MIN, SG_BENCH_RATE_MAX, &o->rate);
            break;
        case OPT_DURATION:
            err = parse_double(optarg, 0.05, 600, &o->duration);
            break;
        case OPT_STEPS:
            err = parse_double(optarg, 1, SG_BENCH_MAX_STEPS, &steps);
            break;
        case OPT_STEP_MS:
            err = parse_double(optarg, 20, 60000, &step_ms);
            break;
        case OPT_MODES:
            modes = optarg;
            break;
        case OPT_SLIPGATE:
            o->slipgate = optarg;
            break;
        case OPT_CAPTURES:
            o->captures = optarg;
            break;
        case OPT_SHAPE:
            if (strcmp(optarg, "builtin") == 0)
                o->builtin_shape = true;
            else if (strcmp(optarg, "capture") != 0)
                err = -EINVAL;
            break;
        case OPT_JSON:
            o->json = true;
            break;
        case OPT_QUICK:
            o->quick = true;
            break;
        case OPT_KEEP:
            o->keep_logs = true;
            break;
        case OPT_PIN:
            o->pin = true;
            break;
        case OPT_GAME:
            if (strcmp(optarg, "q3") == 0 || strcmp(optarg, "qw") == 0 ||
                strcmp(optarg, "nq") == 0 || strcmp(optarg, "q2") == 0)
                o->game = optarg;
            else
                err = -EINVAL;
            break;
        case OPT_WORKERS:
            workers = optarg;
            break;
        case 'v':
            o->verbose = true;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            fputs("Try 'slipgate-bench --help'.\n", stderr);
            return -EINVAL;
        }
        if (err < 0) {
            fprintf(stderr, "slipgate-bench: bad value '%s' for --%s\n", optarg,
                    longopts[c - OPT_SESSIONS].name);
            return err;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "slipgate-bench: unexpected argument '%s'\n", argv[optind]);
        return -EINVAL;
    }
    if (workers) {
        if (workers_modes(workers, modes, strcmp(modes, "all") != 0, wmodes, sizeof(wmodes)) < 0)
            return -EINVAL;
        modes = wmodes;
    }
    if (parse_modes(modes, o->modes, sizeof(o->modes)) < 0)
        return -EINVAL;
    if (!o->captures)
        o->captures = strcmp(o->game, "qw") == 0   ? SG_BENCH_QW_CAPTURES
                      : strcmp(o->game, "nq") == 0 ? SG_BENCH_NQ_CAPTURES
                      : strcmp(o->game, "q2") == 0 ? SG_BENCH_Q2_CAPTURES
                                                   : SG_BENCH_CAPTURES;

    /* Defaults, smaller for --quick; whole numbers where they count things. */
    o->sessions = sessions > 0 ? (unsigned)sessions : o->quick ? 8 : 32;
    o->steps = steps > 0 ? (unsigned)steps : o->quick ? 3 : 10;
    o->step_s = step_ms > 0 ? step_ms / 1000 : o->quick ? 0.15 : 1.0;
    if (o->rate == 0)
        o->rate = o->quick ? 5000 : 20000;
    if (o->duration == 0)
        o->duration = o->quick ? 0.3 : 5;
    return 0;
}

/* ---- main ---- */

static int setup(struct sg_bench *b)
{
    struct sigaction sa;
    struct rlimit rl;
    ssize_t n;

    /* Our own path, to start minrelay and to print the command. */
    n = readlink("/proc/self/exe", b->self, sizeof(b->self) - 1);
    if (n <= 0)
        return -errno;
    b->self[n] = '\0';

    /* The machine, to judge the figures by. */
    b->ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    {
        FILE *f = fopen("/proc/loadavg", "re");
        double l1, l5, l15;

        snprintf(b->loadavg, sizeof(b->loadavg), "unknown");
        if (f && fscanf(f, "%lf %lf %lf", &l1, &l5, &l15) == 3)
            snprintf(b->loadavg, sizeof(b->loadavg), "%.2f %.2f %.2f", l1, l5, l15);
        if (f)
            fclose(f);
    }

    /* Absolute paths, for the command that reproduces the run. */
    if (realpath(b->o.slipgate, b->slipgate))
        b->o.slipgate = b->slipgate;
    if (realpath(b->o.captures, b->captures))
        b->o.captures = b->captures;

    /* Two descriptors per session (client and relay side) and some. */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    /* A folder for the relays' logs and --stats files. */
    snprintf(b->tmpdir, sizeof(b->tmpdir), "%s/slipgate-bench-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(b->tmpdir))
        return -errno;
    for (size_t i = 0; i < NMODES; i++) {
        snprintf(cleanup_paths[2 * i], PATH_MAX, "%s/%s.log", b->tmpdir, sg_bench_modes[i].name);
        snprintf(cleanup_paths[2 * i + 1], PATH_MAX, "%s/%s-stats.json", b->tmpdir,
                 sg_bench_modes[i].name);
    }
    snprintf(cleanup_paths[2 * NMODES], PATH_MAX, "%s/sign.key", b->tmpdir);
    snprintf(cleanup_paths[2 * NMODES + 1], PATH_MAX, "%s/sign.key.pub", b->tmpdir);
    snprintf(cleanup_paths[2 * NMODES + 2], PATH_MAX, "%s/record", b->tmpdir);
    snprintf(cleanup_paths[2 * NMODES + 3], PATH_MAX, "%s/record-signed", b->tmpdir);
    snprintf(cleanup_paths[2 * NMODES + 4], PATH_MAX, "%s", b->tmpdir);
    keep_tmp = b->o.keep_logs;

    /* Children are killed on every way out. */
    atexit(on_exit_cleanup);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigfillset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    return 0;
}

unsigned sg_bench_mode_loops(const struct sg_bench_mode *m)
{
    for (int i = 0; m->args[i] && m->args[i + 1]; i++)
        if (strcmp(m->args[i], "-w") == 0)
            return (unsigned)atoi(m->args[i + 1]);
    return 1;
}

void sg_bench_relay_cpus(const struct sg_bench *b, unsigned loops, struct sg_bench_cpus *out)
{
    out->n = 0;
    if (!b->o.pin || loops == 0 || loops >= b->allowed.n)
        return;
    for (unsigned i = b->allowed.n - loops; i < b->allowed.n; i++)
        out->cpu[out->n++] = b->allowed.cpu[i];
}

/*
 * --pin: the relays take the last CPUs this process may use (as many as
 * the mode with the most loops has), the harness's threads (generator,
 * sink, scraper) every other one; set on this thread before any other
 * starts, so that they inherit it.  0, or -1 after saying why.
 */
static int pin_harness(struct sg_bench *b)
{
    cpu_set_t set;

    for (size_t i = 0; i < b->nres; i++) {
        unsigned loops = sg_bench_mode_loops(b->res[i].mode);

        b->relay_loops_max = loops > b->relay_loops_max ? loops : b->relay_loops_max;
    }
    if (!b->o.pin)
        return 0;
    if (sched_getaffinity(0, sizeof(set), &set) < 0) {
        fprintf(stderr, "slipgate-bench: --pin: cannot read this process's CPUs: %s\n",
                strerror(errno));
        return -1;
    }
    for (int c = 0; c < CPU_SETSIZE && b->allowed.n < SG_BENCH_MAX_CPUS; c++)
        if (CPU_ISSET(c, &set))
            b->allowed.cpu[b->allowed.n++] = c;
    if (b->allowed.n <= b->relay_loops_max) {
        fprintf(stderr,
                "slipgate-bench: --pin needs more CPUs than the most loops of any mode (%u): "
                "this process may use %u\n",
                b->relay_loops_max, b->allowed.n);
        return -1;
    }
    CPU_ZERO(&set);
    for (unsigned i = 0; i < b->allowed.n - b->relay_loops_max; i++) {
        b->harness.cpu[b->harness.n++] = b->allowed.cpu[i];
        CPU_SET(b->allowed.cpu[i], &set);
    }
    if (sched_setaffinity(0, sizeof(set), &set) < 0) {
        fprintf(stderr, "slipgate-bench: --pin: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct sg_bench b;
    char *save = NULL;
    int err, status = 0;

    /* The child side of the minrelay mode. */
    if (argc == 4 && strcmp(argv[1], "--serve-minrelay") == 0)
        return sg_bench_minrelay_serve((uint16_t)atoi(argv[2]), (uint16_t)atoi(argv[3]));
    /* Spectators on one watched session (spect.c). */
    if (argc >= 2 && strcmp(argv[1], "spectate") == 0)
        return sg_bench_spectate_main(argc - 1, argv + 1);

    memset(&b, 0, sizeof(b));
    if (parse_args(argc, argv, &b.o) < 0)
        return 2;
    if ((err = setup(&b)) < 0) {
        fprintf(stderr, "slipgate-bench: setup: %s\n", strerror(-err));
        return 1;
    }
    if ((err = sg_bench_shape_load(&b.shape, b.o.captures, b.o.builtin_shape)) < 0) {
        fprintf(stderr, "slipgate-bench: traffic shape: %s\n", strerror(-err));
        return 1;
    }

    /* Every mode in the order asked. */
    b.res = calloc(NMODES, sizeof(*b.res));
    if (!b.res) {
        sg_bench_shape_finish(&b.shape);
        return 1;
    }
    {
        char list[sizeof(b.o.modes)];

        memcpy(list, b.o.modes, sizeof(list));
        for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            for (size_t i = 0; i < NMODES; i++)
                if (strcmp(sg_bench_modes[i].name, tok) == 0)
                    b.res[b.nres++].mode = &sg_bench_modes[i];
        }
    }
    if (pin_harness(&b) < 0) {
        free(b.res);
        sg_bench_shape_finish(&b.shape);
        return 2;
    }
    sg_bench_run_all(&b);
    for (size_t i = 0; i < b.nres; i++)
        if (b.res[i].status == SG_BENCH_ERROR)
            status = 1;

    /* The report. */
    if (b.o.json) {
        if (sg_bench_report_json(&b) < 0)
            status = 1;
    } else {
        sg_bench_report_table(&b, stdout);
    }
    if (b.o.keep_logs)
        fprintf(stderr, "slipgate-bench: relay logs kept in %s\n", b.tmpdir);
    fflush(stdout);

    free(b.res);
    sg_bench_shape_finish(&b.shape);
    return status;
}
