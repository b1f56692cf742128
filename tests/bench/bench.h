/*
 * slipgate-bench: throughput, added latency and memory per session of
 * slipgate, measured against a direct path and a minimal relay in the same
 * run, so that every figure can be read as a ratio (README.md beside this).
 *
 *   load generator (N client sockets) ──▶ [relay] ──▶ sink (one "server" socket)
 *   load generator                    ◀── [relay] ◀── sink replies, server-shaped
 *
 * The relay is nothing (`direct`), the minimal relay of minrelay.c run as a
 * child process (`minrelay`), or the slipgate binary (`slipgate`).  All
 * traffic stays on 127.0.0.1.
 *
 * Files: bench.c (main, CLI, the modes), run.c (running them), report.c
 * (table and JSON), load.c (generator and sink), minrelay.c (the floor),
 * shape.c (datagram sizes from the captures), hist.c (latency histogram),
 * child.c (child processes, ports, CPU and RSS), json.c.
 */
#ifndef SG_BENCH_BENCH_H
#define SG_BENCH_BENCH_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* ---- the bench's traffic ----
 *
 * Every session replays a script: the datagrams of one real Quake 3 game
 * session (shape.c), in capture order, both directions, byte for byte:
 * the OOB handshake (getchallenge, challengeResponse, connect,
 * connectResponse), then the netchan traffic with its fragments.  The
 * generator sends the client datagrams; the sink answers each one with the
 * server datagrams that follow it in the capture.  At the end of the
 * script a session starts again from its getchallenge: a reconnect, which
 * a Quake 3 decoder handles as the game server does (a new netchan).
 *
 * Nothing is added to the payloads: a received datagram is recognised by
 * its key (netchan sequence word and fragment start, or a hash of an OOB
 * packet's start), which re-encoding keeps; the send time and the
 * measurement step of each (session, script datagram) are kept beside the
 * script (load.c).
 *
 * Modes that must not decode open each session with one datagram of the
 * bench's own (the hello below) that no codec claims, so that slipgate's
 * `-p auto` relays the session without decoding; the sink answers it.
 *
 *   0      2      4        6     8                 16
 *   +------+------+--------+-----+-----------------+
 *   |magic |  0   |session |kind | send time (ns)  |
 *   +------+------+--------+-----+-----------------+
 */
#define SG_BENCH_HDR_LEN      16
#define SG_BENCH_MAX_PAYLOAD  1472 /* one Ethernet-sized UDP payload */
#define SG_BENCH_MAX_SESSIONS 65535
#define SG_BENCH_MAX_DGRAM    2048 /* longest datagram a script may hold */

/* One datagram of a script. */
struct sg_bench_dgram {
    const uint8_t *data; /* into the script's bytes */
    uint16_t len;
    bool s2c;
    uint32_t next;     /* for a client datagram: its first reply (script index) */
    uint32_t nreplies; /* server datagrams up to the next client one */
    uint32_t after;    /* for a client datagram: server datagrams before it in the script */
    uint8_t port_at;   /* NetQuake accept: offset of the port the sink fills in; 0: none */
    bool moved;        /* NetQuake: the capture's server sent it from the port its accept named */
};

/* A key and the script index it names, sorted by key. */
struct sg_bench_keyidx {
    uint64_t key;
    uint32_t idx;
};

/* One session's datagrams, both directions, in capture order. */
struct sg_bench_script {
    char name[64];
    struct sg_bench_dgram *d;
    size_t n, n_c2s, n_s2c;
    uint32_t *c2s; /* script indices of the client datagrams, in order */
    bool checksum; /* ioquake3 71: a checksum after the sequence (keys skip it) */
    bool q3;       /* a real Quake 3 handshake and netchan: a decoder can follow it */
    bool qw;       /* ... a QuakeWorld one (keys: the whole first word, no fragments) */
    bool nq;       /* ... a NetQuake one (connect, accept moving the port; keys below) */
    bool q2;       /* ... a Quake 2 one (challenge, connect, client_connect; keys in shape.c) */
    uint8_t q2_qport; /* Quake 2: the client header's qport bytes (2 for 34, 1 or 0 for 35/36) */
    struct sg_bench_keyidx *keys[2]; /* [s2c]: keys of each direction */
    size_t nkeys[2], dup_keys;
    uint8_t *bytes;
};

/* The traffic: one script per capture (sessions take them in turn). */
struct sg_bench_shape {
    struct sg_bench_script *scripts;
    size_t nscripts, max_len; /* max_len: the longest script's n */
    size_t n_c2s, n_s2c;      /* over all scripts */
    double s2c_per_c2s;       /* server datagrams per client datagram */
    double c2s_mean, s2c_mean;
    size_t files; /* captures read; 0 for the built-in shape */
    bool q3;      /* every script is real Quake 3 traffic */
    char source[512];
};

/* Fill `shape` from every DIR/(name)/capture.pcap, or from the built-in
 * Quake 3 shape when `builtin` is set or no capture can be read (with a
 * warning on stderr).  Returns 0 or -ENOMEM; free with
 * sg_bench_shape_finish. */
int sg_bench_shape_load(struct sg_bench_shape *shape, const char *dir, bool builtin);
/* Free what sg_bench_shape_load allocated; accepts a zeroed struct. */
void sg_bench_shape_finish(struct sg_bench_shape *shape);
/* The script index of a received datagram (`s2c`: from the server), or -1
 * when the script has no datagram with its key. */
long sg_bench_script_find(const struct sg_bench_script *sc, bool s2c, const uint8_t *data,
                          size_t len);

/* ---- latency histogram (hist.c) ---- */

#define SG_BENCH_HIST_BUCKETS 1152 /* 32 + 32 * (40 - 5): up to 2^40 ns */

/* Log-linear buckets: exact below 32 ns, then 32 per power of two (≤ 3 %). */
struct sg_bench_hist {
    uint64_t n, max_ns;
    uint64_t b[SG_BENCH_HIST_BUCKETS];
};

void sg_bench_hist_reset(struct sg_bench_hist *h);
void sg_bench_hist_add(struct sg_bench_hist *h, uint64_t ns);
void sg_bench_hist_merge(struct sg_bench_hist *into, const struct sg_bench_hist *from);
/* The `q` quantile (0..1) in microseconds; 0 for an empty histogram. */
double sg_bench_hist_quantile_us(const struct sg_bench_hist *h, double q);

/* ---- load generator and sink (load.c) ---- */

struct sg_bench_load;

/* One measurement step at a fixed aggregate rate (both directions). */
struct sg_bench_step {
    /* in */
    double target_pps; /* client and server datagrams per second together */
    double seconds;
    /* out */
    double elapsed;                    /* seconds actually spent sending */
    uint64_t c2s_sent, c2s_rcvd;       /* generator -> sink */
    uint64_t s2c_sent, s2c_rcvd;       /* sink -> generator */
    uint64_t send_fail;                /* the harness could not send (EAGAIN, ...) */
    uint64_t skipped;                  /* generator fell behind and skipped slots */
    double gen_ratio;                  /* client datagrams sent / scheduled, 0..1 */
    uint64_t max_burst;                /* most client datagrams sent at once */
    uint64_t harness_drops;            /* overflows of the harness's own sockets */
    uint64_t unknown;                  /* received datagrams that match no script datagram */
    uint64_t held;                     /* sessions that waited at the end of their script */
    uint64_t waited;                   /* slots not sent: every session awaited replies */
    uint64_t forgiven;                 /* replies given up on (lost) to go on */
    double offered_pps, delivered_pps; /* sent and received, both directions */
    double loss;                       /* lost / sent, both directions, 0..1 */
    struct sg_bench_hist hist;         /* one-way latency of every received datagram */
};

/* Create `sessions` client sockets and the sink socket on 127.0.0.1 and
 * start the sink thread.  `shape` is borrowed until sg_bench_load_destroy.
 * `hello`: open each session with the bench's hello (modes that must not
 * decode) instead of the script's getchallenge.  `follow`: the relay
 * follows a NetQuake accept to the port it names (slipgate); the sink then
 * serves the moved sessions from its second socket (load.c).  Returns 0 or
 * a negated errno. */
int sg_bench_load_create(const struct sg_bench_shape *shape, unsigned sessions, bool hello,
                         bool follow, struct sg_bench_load **out);
/* The sink's UDP port (where a relay must send). */
uint16_t sg_bench_load_sink_port(const struct sg_bench_load *l);
/* Point the first `count` clients at 127.0.0.1:`port` (once per client) and
 * open a session for each one not yet open: send a hello and wait for the
 * sink's answer, within `timeout_s`.  Returns 0, -ETIMEDOUT (with the number
 * of open sessions among the first `count` in *open) or a negated errno. */
int sg_bench_load_open(struct sg_bench_load *l, uint16_t port, unsigned count, double timeout_s,
                       unsigned *open);
/* Run one step (send for st->seconds, then drain).  Returns 0 or a negated
 * errno; the figures are in `st`. */
int sg_bench_load_step(struct sg_bench_load *l, struct sg_bench_step *st);
/* Stop the sink thread, close every socket and free `l`; accepts NULL. */
void sg_bench_load_destroy(struct sg_bench_load *l);

/* ---- the minimal relay (minrelay.c) ---- */

/* Relay 127.0.0.1:`listen_port` to 127.0.0.1:`server_port`, one upstream
 * socket per client address, until SIGTERM or SIGINT.  Returns the exit
 * status for main (0 on a clean stop). */
int sg_bench_minrelay_serve(uint16_t listen_port, uint16_t server_port);

/* ---- child processes, ports, memory (child.c) ---- */

/* A set of CPUs to pin a process to (--pin); n == 0: not pinned. */
#define SG_BENCH_MAX_CPUS 1024
struct sg_bench_cpus {
    unsigned n;
    int cpu[SG_BENCH_MAX_CPUS];
};

/* Start argv[0] with `argv`, stdout and stderr to `log_path` (created),
 * stdin from /dev/null, no other inherited descriptor, and SIGKILL if this
 * process dies; pinned to `cpus` when given and not empty.  The child is
 * registered for sg_bench_child_kill_all.  Returns 0 and the pid in *pid,
 * or a negated errno. */
int sg_bench_child_spawn(char *const argv[], const char *log_path, const struct sg_bench_cpus *cpus,
                         pid_t *pid);
/* The CPUs `pid` may run on (empty when they cannot be read). */
void sg_bench_child_cpus(pid_t pid, struct sg_bench_cpus *out);
/* "0", "2-3", "0,2,5-7": a CPU list as taskset(1) writes it. */
void sg_bench_cpu_list(const struct sg_bench_cpus *c, char *out, size_t len);
/* Wait until someone has a UDP socket bound to 127.0.0.1:`port`, for at
 * most `timeout_s`.  Returns 0, -ETIMEDOUT, or -ECHILD when `pid` exited
 * first (its status in *status). */
int sg_bench_child_wait_udp(pid_t pid, uint16_t port, double timeout_s, int *status);
/* True while `pid` runs (reaps it, with its status in *status, once it has
 * exited). */
bool sg_bench_child_running(pid_t pid, int *status);
/* SIGTERM, then SIGKILL after `grace_s`; reaps and unregisters the child.
 * Returns the wait status (as waitpid) or a negated errno. */
int sg_bench_child_stop(pid_t pid, double grace_s);
/* Kill every registered child (SIGTERM, a short grace, SIGKILL) and reap
 * it.  Async-signal-safe: used from signal handlers and atexit. */
void sg_bench_child_kill_all(void);
/* CPU time used so far by every thread of `pid`, in nanoseconds
 * (schedstat; clock ticks where that is missing), or a negated errno. */
int64_t sg_bench_child_cpu_ns(pid_t pid);
/* CPU time all processes spent busy since boot, all CPUs (from /proc/stat,
 * clock-tick resolution), in nanoseconds, or a negated errno. */
int64_t sg_bench_sys_busy_ns(void);
/* VmRSS of `pid` in KiB, or a negated errno. */
long sg_bench_child_rss_kib(pid_t pid);
/* Minor page faults of the whole process so far (/proc/PID/stat), or -errno. */
long long sg_bench_child_minflt(pid_t pid);
/* A UDP port on 127.0.0.1 that was free a moment ago, or a negated errno. */
int sg_bench_free_udp_port(void);

/* ---- the modes, the run (run.c) and the report (report.c) ---- */

#define SG_BENCH_LOSS_MAX  0.001 /* a step passes below 0.1 % loss ... */
#define SG_BENCH_GEN_MIN   0.95  /* ... if the generator sent 95 % of its schedule */
#define SG_BENCH_MAX_STEPS 64
#define SG_BENCH_RATE_MIN  500.0
#define SG_BENCH_RATE_MAX  2e7
#define SG_BENCH_NEEDS_Q3  "needs real Quake 3 captures (not --shape builtin)"

enum sg_bench_relay { SG_BENCH_RELAY_NONE, SG_BENCH_RELAY_MINRELAY, SG_BENCH_RELAY_SLIPGATE };

/* One way to relay, as listed by --modes (the table is in bench.c). */
/* Figures of one of slipgate's duration histograms over part of a run (us). */
struct sg_bench_resid {
    bool have;
    unsigned long long count;
    double p50, p99, p999, max;
};

struct sg_bench_mode {
    const char *name;
    enum sg_bench_relay relay;
    const char *args[8];     /* slipgate arguments of the mode, NULL-terminated */
    bool decodes;            /* slipgate decodes: sessions open with the real handshake */
    bool record;             /* add `+set record DIR` (a folder of the run) */
    const char *unavailable; /* why the mode cannot run yet, or NULL */
    const char *what;        /* one line for --help */
    bool http;               /* add `+set http 127.0.0.1:PORT`, scraped every 100 ms */
    bool sign;               /* with record: `+set sign_key KEY` (made by `slipgate keygen`) */
    bool by_workers;         /* a worker-count mode or a comparison: only with --workers (or
                                named), not `all` */
};

extern const struct sg_bench_mode sg_bench_modes[];
extern const size_t sg_bench_nmodes;

struct sg_bench_opts {
    unsigned sessions, steps;
    double rate, duration, step_s;
    char modes[256]; /* canonical, comma-separated */
    const char *slipgate, *captures;
    bool builtin_shape, json, quick, verbose, keep_logs;
    bool pin; /* --pin: each relay on CPUs of its own, the harness on the others */
    const char *game; /* --game: the codec the decoding modes name (-p): "q3", "qw", "nq" or "q2" */
};

enum sg_bench_status { SG_BENCH_NA, SG_BENCH_OK, SG_BENCH_ERROR };

/* One throughput step as reported. */
struct sg_bench_steprec {
    double target, offered, delivered, loss, gen_ratio;
    double cpu; /* the relay's CPU time over the step's wall time (1 = one core) */
    double ns;  /* the relay's CPU time per relayed datagram */
    uint64_t harness_drops;
    uint64_t max_burst, skipped; /* the generator's largest burst, and slots it skipped */
    const char *verdict;         /* "ok", "loss", "harness", "generator" */
};

/* The figures of one mode; NAN or -1 where they do not apply. */
struct sg_bench_result {
    const struct sg_bench_mode *mode;
    enum sg_bench_status status;
    char error[512];
    unsigned long scrapes_ok, scrapes_failed; /* slipgate-http: /metrics scrapes */

    /* Throughput. */
    double tput_pps, tput_target;
    double tput_cpu, tput_ns; /* the relay's CPU share and CPU ns per datagram at that rate */
    const char *limit;        /* verdict of the lowest failing step above, or "steps" */
    struct sg_bench_steprec steps[SG_BENCH_MAX_STEPS];
    unsigned nsteps;

    /* Latency (all chunks of the latency run together). */
    struct sg_bench_step lat;
    double p50, p99, p999, pmax;
    /* Each round's own p99, in the order measured: the first round carries the
     * sessions' synchronized start, the others the steady state. */
    double round_p99[SG_BENCH_MAX_STEPS];
    /* The relay's minor page faults in each round (first writes to memory it
     * had not touched: a new session's state), -1 without a relay to read. */
    long long round_faults[SG_BENCH_MAX_STEPS];
    unsigned nrounds;
    double lat_cpu, ns_per_pkt; /* the relay's CPU share, and CPU ns per relayed datagram */

    /* Memory (KiB; -1 without a relay) and the relay's own account. */
    long rss_before, rss_first, rss_open, rss_load;
    double rss_per_session;
    long relay_sessions; /* sessions_total from slipgate --stats, or -1 */
    char relay_cpus[256]; /* the CPUs the relay could run on, read once it served ("" unknown) */
    /* slipgate's decoder, summed over the sessions of --stats (-1: none) */
    long long dec_datagrams, dec_messages, dec_errors, dec_reencoded, dec_identical,
        dec_reencode_errors, demos;
    long long demo_bytes;    /* bytes in the record folder at the end, or -1 */
    /* slipgate's loop (--stats "loop", the whole run): its longest turn's work and the
     * turns that worked over 1 ms (-1: not reported) */
    double loop_max_us;
    long long loop_over_1ms;
    /* slipgate's own residence times (receive timestamp to sendmmsg, both
     * directions) and loop turns, from its /api/routes before the latency
     * run, after its first round and at its end (run.c): `start` is the
     * first round (the sessions' synchronized start), `steady` the others,
     * `turn` the loop's turns over the whole latency run. */
    struct sg_bench_resid res_start, res_steady, turn;
    const char *unavailable; /* why this mode did not run (n/a), or NULL */

    /* CPU used by processes other than the bench and the relay while this
     * mode was measured, in cores: how much its figures may be disturbed. */
    double others;
};

struct sg_bench {
    struct sg_bench_opts o;
    struct sg_bench_shape shape;
    char self[PATH_MAX], tmpdir[PATH_MAX / 2];
    char slipgate[PATH_MAX], captures[PATH_MAX]; /* the options' paths, resolved */
    long ncpu;
    /* --pin: the CPUs this process may use, in order; the relays take the
     * last ones (as many as a mode has loops), the harness the others. */
    struct sg_bench_cpus allowed, harness;
    unsigned relay_loops_max; /* the most loops of any mode asked */
    char loadavg[64];            /* /proc/loadavg's first three fields, at the start */
    struct sg_bench_result *res; /* one per mode, in the order asked */
    size_t nres;
};

/* The CPUs of a relay with `loops` event loops under --pin: the last `loops`
 * of the allowed ones (empty without --pin). */
void sg_bench_relay_cpus(const struct sg_bench *b, unsigned loops, struct sg_bench_cpus *out);
/* How many event loops (threads relaying) a mode's relay runs: its -w N, else 1. */
unsigned sg_bench_mode_loops(const struct sg_bench_mode *m);

/* Run every mode of b->res, interleaved so that they share the machine's
 * conditions; a mode that fails is recorded as an error in its result and
 * the others go on. */
void sg_bench_run_all(struct sg_bench *b);

/* slipgate's residence histogram (both directions merged) and loop turns,
 * read from its /api/routes at 127.0.0.1:`http_port`; false if unreadable. */
struct sg_hist;
bool sg_bench_resid_read(uint16_t http_port, struct sg_hist *res, struct sg_hist *turn);
/* The figures of what histogram `to` counted after `from`. */
void sg_bench_resid_delta(const struct sg_hist *from, const struct sg_hist *to,
                          struct sg_bench_resid *out);

/* `slipgate-bench spectate ...` (spect.c): argv[0] is "spectate". */
int sg_bench_spectate_main(int argc, char **argv);

/* The report: the tables and targets, or the JSON object (checked before
 * it is printed on stdout; returns -EINVAL if it does not parse). */
void sg_bench_report_table(const struct sg_bench *b, FILE *f);
int sg_bench_report_json(const struct sg_bench *b);
/* The command line that reproduces the run. */
void sg_bench_report_command(const struct sg_bench *b, FILE *f);

/* A progress line on stderr ("slipgate-bench: ..."); `verbose_only` lines
 * only with -v. */
void sg_bench_say(const struct sg_bench_opts *o, bool verbose_only, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- the /metrics scraper of the slipgate-http mode (scrape.c) ---- */

struct sg_bench_scraper {
    pthread_t thread;
    bool running;
    atomic_bool stop;
    uint16_t port;
    atomic_ulong ok, failed; /* scrapes that answered 200 with the metrics, the others */
    char *buf;
};

/* A TCP port on 127.0.0.1 that was free a moment ago, or a negative errno. */
int sg_bench_free_tcp_port(void);
/* Fetch http://127.0.0.1:PORT/metrics every 100 ms on a thread until stopped. */
/* GET `path` from 127.0.0.1:`port` into `buf` (NUL-terminated): the body's
 * start, or NULL when no 200 answer came. */
const char *sg_bench_http_get(uint16_t port, const char *path, char *buf, size_t cap);
int sg_bench_scraper_start(struct sg_bench_scraper *s, uint16_t port);
void sg_bench_scraper_stop(struct sg_bench_scraper *s); /* accepts a zeroed struct */

/* ---- time ---- */

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t sg_bench_now_ns(void);

/* ---- JSON (json.c) ---- */

/* Write `s` as a JSON string literal (quoted, escaped) to `f`. */
void sg_bench_json_str(FILE *f, const char *s);
/* Check that `text` (`len` bytes) is exactly one valid JSON value.
 * Returns 0, or -EINVAL with the offset of the first error in *where. */
int sg_bench_json_check(const char *text, size_t len, size_t *where);

#endif
