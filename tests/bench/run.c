/*
 * Running the modes.
 *
 * Every mode gets its own generator and sink (load.c) and its own relay
 * process, all set up first; then the measurements take turns, so that a
 * burst of other work on the machine falls on every mode alike:
 *
 *   set up    each mode: start the relay, open the first session (RSS),
 *             then the others (RSS)
 *   latency   rounds of 1-second chunks at --rate, one chunk per mode per
 *             round, until each mode has had --duration seconds; the chunks
 *             of a mode are pooled (counters and histogram)
 *   memory    each relay's RSS
 *   throughput  rounds of one step per mode, each mode with its own search:
 *             double the rate from --rate until a step fails, then bisect
 *   finish    each mode: SIGTERM the relay (anything but exit 0 fails the
 *             mode), read slipgate's --stats
 *
 * The order of the modes rotates from round to round.  Idle relays wait in
 * epoll and cost nothing while another mode is measured.
 */
#include "tests/bench/bench.h"

#include "proxy/hist.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define START_TIMEOUT 5.0 /* seconds for a relay to bind its port */
#define STOP_GRACE    3.0 /* seconds between SIGTERM and SIGKILL */
#define OPEN_TIMEOUT  5.0 /* seconds to open the sessions */
#define CHUNK_S       1.0 /* latency chunk length, at most */

struct relay_proc {
    pid_t pid;
    uint16_t port;
    uint16_t http_port; /* slipgate's `http` (every slipgate mode): its /api/routes, or 0 */
    char log[PATH_MAX], stats[PATH_MAX];
    struct sg_bench_scraper scraper; /* slipgate-http: polls /metrics while it runs */
};

/* One mode while it runs. */
struct mode_run {
    struct sg_bench_result *m;
    struct relay_proc rp;
    struct sg_bench_load *load;
    bool active; /* set up, and no error since */

    /* Latency: CPU and wall time over the chunks. */
    double lat_relay_ns, lat_wall_ns;

    /* Throughput search. */
    double lo, hi, rate;
    bool searching;

    /* Other processes' CPU while this mode was measured. */
    double others_ns, others_wall_ns;

    /* slipgate's residence (both directions) and loop-turn histograms, read
     * before the latency run [0], after its first round [1], at its end [2]. */
    struct sg_hist res[3], turn[3];
    bool snap[3];
};

/* What one step cost, besides its figures. */
struct usage {
    double wall_ns;
    double relay_ns;  /* NAN without a relay */
    double others_ns; /* NAN if /proc/stat cannot be read */
};

/* ---- errors ---- */

static void set_error(struct sg_bench_result *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void set_error(struct sg_bench_result *m, const char *fmt, ...)
{
    va_list ap;

    if (m->status == SG_BENCH_ERROR)
        return; /* keep the first */
    va_start(ap, fmt);
    vsnprintf(m->error, sizeof(m->error), fmt, ap);
    va_end(ap);
    m->status = SG_BENCH_ERROR;
}

static void describe_status(int status, char *buf, size_t len)
{
    if (status < 0)
        snprintf(buf, len, "unknown status (%s)", strerror(-status));
    else if (WIFEXITED(status))
        snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "wait status %d", status);
}

/* Copy `src` into `dst` (`len` bytes), cut if it must be. */
static void copy_str(char *dst, size_t len, const char *src)
{
    size_t n = strlen(src);

    if (len == 0)
        return;
    if (n >= len)
        n = len - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* ": " and the last non-empty line of a log file, or "", for error messages. */
static void log_tail(const char *path, char *buf, size_t len)
{
    char chunk[1024];
    size_t n = 0;
    FILE *f = fopen(path, "re");

    buf[0] = '\0';
    if (!f || len < 3)
        return;
    if (fseek(f, -(long)(sizeof(chunk) - 1), SEEK_END) < 0)
        rewind(f);
    n = fread(chunk, 1, sizeof(chunk) - 1, f);
    fclose(f);
    chunk[n] = '\0';
    while (n > 0 && (chunk[n - 1] == '\n' || chunk[n - 1] == '\r'))
        chunk[--n] = '\0';
    if (n == 0)
        return;
    memcpy(buf, ": ", 3);
    copy_str(buf + 2, len - 2, strrchr(chunk, '\n') ? strrchr(chunk, '\n') + 1 : chunk);
}

/* The whole --stats file (NUL-terminated, to free), or NULL. */
static char *read_text(const char *path)
{
    FILE *f = fopen(path, "re");
    char *text = NULL;
    size_t len = 0, n;

    if (!f)
        return NULL;
    for (int i = 0; i < 4096; i++) { /* at most 256 MiB */
        char *t = realloc(text, len + 65536 + 1);

        if (!t) {
            free(text);
            fclose(f);
            return NULL;
        }
        text = t;
        n = fread(text + len, 1, 65536, f);
        len += n;
        if (n < 65536)
            break;
    }
    fclose(f);
    text[len] = '\0';
    return text;
}

/* The number after `"key": ` at or after `from` and before `end`, or 0. */
static long long field_after(const char *from, const char *end, const char *key)
{
    char pat[64];
    const char *p;

    snprintf(pat, sizeof(pat), "\"%s\": ", key);
    p = strstr(from, pat);
    if (!p || (end && p >= end))
        return 0;
    return strtoll(p + strlen(pat), NULL, 10);
}

/* slipgate's own account from its --stats file: sessions_total of the first
 * route, and the decoder's counters summed over every session listed. */
static void read_stats(const char *path, struct sg_bench_result *m)
{
    char *text = read_text(path);
    const char *p;

    if (!text)
        return;
    if ((p = strstr(text, "\"longest_turn_us\": ")))
        m->loop_max_us = strtod(p + strlen("\"longest_turn_us\": "), NULL);
    if ((p = strstr(text, "\"turns_over_1ms\": ")))
        m->loop_over_1ms = strtoll(p + strlen("\"turns_over_1ms\": "), NULL, 10);
    if ((p = strstr(text, "\"sessions_total\": ")))
        m->relay_sessions = strtol(p + strlen("\"sessions_total\": "), NULL, 10);
    for (p = strstr(text, "\"codec\": "); p; p = strstr(p + 1, "\"codec\": ")) {
        const char *end = strstr(p, "\"id\": ");

        if (m->dec_datagrams < 0)
            m->dec_datagrams = m->dec_messages = m->dec_errors = m->dec_reencoded =
                m->dec_identical = m->dec_reencode_errors = m->demos = 0;
        m->dec_datagrams += field_after(p, end, "datagrams");
        m->dec_messages += field_after(p, end, "messages");
        m->dec_errors += field_after(p, end, "errors");
        m->dec_reencoded += field_after(p, end, "reencoded");
        m->dec_identical += field_after(p, end, "reencode_identical");
        m->dec_reencode_errors += field_after(p, end, "reencode_errors");
        m->demos += field_after(p, end, "demos");
    }
    free(text);
}

/* Total size of the files in `dir`, which are then removed; -1 if it cannot be read. */
static long long record_dir_sweep(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    long long total = 0;

    if (!d)
        return -1;
    for (int i = 0; i < 1000000 && (e = readdir(d)); i++) {
        char path[PATH_MAX];
        struct stat st;

        if (e->d_name[0] == '.')
            continue;
        if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path))
            continue; /* cannot be one of ours */
        if (lstat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            total += st.st_size;
            unlink(path);
        }
    }
    closedir(d);
    return total;
}

/* ---- relays ---- */

/* `slipgate keygen --out KEY` once per run (the signed mode); 0 or a negative error. */
static int make_sign_key(struct sg_bench *b, const char *key, struct sg_bench_result *m)
{
    const char *argv[] = {b->o.slipgate, "keygen", "--out", key, NULL};
    char log[PATH_MAX];
    int status = 0;
    pid_t pid;
    int err;

    if (access(key, R_OK) == 0)
        return 0;
    snprintf(log, sizeof(log), "%s/keygen.log", b->tmpdir);
    err = sg_bench_child_spawn((char *const *)(uintptr_t)argv, log, NULL, &pid);
    /* It ends by itself (bounded: 10 s); then reaped and unregistered. */
    for (int i = 0; err == 0 && i < 1000 && sg_bench_child_running(pid, NULL); i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (err == 0)
        status = sg_bench_child_stop(pid, 0.5);
    unlink(log);
    if (err < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        set_error(m, "slipgate keygen --out %s failed", key);
        return err < 0 ? err : -EIO;
    }
    return 0;
}

static int relay_start(struct sg_bench *b, const struct sg_bench_mode *def, uint16_t sink_port,
                       struct relay_proc *rp, struct sg_bench_result *m)
{
    char listen[32], server[32], lport[16], sport[16], why[256], tail[256], record[PATH_MAX];
    char http[32];
    int http_port = 0;
    char key[PATH_MAX];
    const char *argv[40];
    struct sg_bench_cpus cpus;
    int status = 0, err = -EINVAL;

    if (def->relay == SG_BENCH_RELAY_SLIPGATE && access(b->o.slipgate, X_OK) < 0) {
        set_error(m, "no slipgate executable at %s (build it, or pass --slipgate PATH)",
                  b->o.slipgate);
        return -ENOENT;
    }

    /* A port that was free a moment ago can be taken meanwhile: try three. */
    for (int attempt = 0; attempt < 3; attempt++) {
        int port = sg_bench_free_udp_port(), argc = 0;

        if (port < 0) {
            set_error(m, "no free UDP port: %s", strerror(-port));
            return port;
        }
        rp->port = (uint16_t)port;
        snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
        snprintf(server, sizeof(server), "127.0.0.1:%u", (unsigned)sink_port);
        snprintf(lport, sizeof(lport), "%d", port);
        snprintf(sport, sizeof(sport), "%u", (unsigned)sink_port);
        snprintf(rp->log, sizeof(rp->log), "%s/%s.log", b->tmpdir, def->name);
        snprintf(rp->stats, sizeof(rp->stats), "%s/%s-stats.json", b->tmpdir, def->name);
        unlink(rp->stats);

        if (def->relay == SG_BENCH_RELAY_MINRELAY) {
            argv[argc++] = b->self;
            argv[argc++] = "--serve-minrelay";
            argv[argc++] = lport;
            argv[argc++] = sport;
        } else {
            argv[argc++] = b->o.slipgate;
            argv[argc++] = "-l";
            argv[argc++] = listen;
            argv[argc++] = "-s";
            argv[argc++] = server;
            argv[argc++] = "-q";
            argv[argc++] = "--stats";
            argv[argc++] = rp->stats;
            /* the decoding modes name the game of the captures (--game) */
            for (int i = 0; def->args[i]; i++)
                argv[argc++] = i > 0 && strcmp(def->args[i - 1], "-p") == 0 &&
                                       strcmp(def->args[i], "q3") == 0
                                   ? b->o.game
                                   : def->args[i];
            /* One loop unless the mode says (slipgate-wN): the default is
             * the machine's CPU count, and the modes compare one loop each. */
            bool wset = false;
            for (int i = 0; def->args[i]; i++)
                wset = wset || strcmp(def->args[i], "-w") == 0;
            if (!wset) {
                argv[argc++] = "-w";
                argv[argc++] = "1";
            }
            argv[argc++] = "+set";
            argv[argc++] = "max_sessions";
            argv[argc++] = "100000";
            argv[argc++] = "+set";
            argv[argc++] = "new_sessions_per_source";
            argv[argc++] = "100000";
            /* No session may time out while other modes take their turns. */
            argv[argc++] = "+set";
            argv[argc++] = "idle_timeout";
            argv[argc++] = "1h";
            /* A session is established by its in-game traffic, which the
             * first latency chunk brings: the modes set up before it wait
             * for the others' set-up, longer than the default 5 s. */
            argv[argc++] = "+set";
            argv[argc++] = "handshake_timeout";
            argv[argc++] = "1h";
            if (def->record) {
                snprintf(record, sizeof(record), "%s/%s", b->tmpdir,
                         def->sign ? "record-signed" : "record");
                if (mkdir(record, 0700) < 0 && errno != EEXIST) {
                    set_error(m, "cannot create %s: %s", record, strerror(errno));
                    return -errno;
                }
                argv[argc++] = "+set";
                argv[argc++] = "record";
                argv[argc++] = record;
            }
            /* every slipgate has `http` on: the bench reads its residence
             * times from /api/routes (three requests a run; slipgate-http
             * is scraped every 100 ms besides) */
            {
                http_port = sg_bench_free_tcp_port();
                if (http_port < 0) {
                    set_error(m, "no free TCP port: %s", strerror(-http_port));
                    return http_port;
                }
                snprintf(http, sizeof(http), "127.0.0.1:%d", http_port);
                argv[argc++] = "+set";
                argv[argc++] = "http";
                argv[argc++] = http;
            }
            if (def->sign) {
                snprintf(key, sizeof(key), "%s/sign.key", b->tmpdir);
                if ((err = make_sign_key(b, key, m)) < 0)
                    return err;
                argv[argc++] = "+set";
                argv[argc++] = "sign_key";
                argv[argc++] = key;
            }
        }
        argv[argc] = NULL;

        sg_bench_relay_cpus(b, sg_bench_mode_loops(def), &cpus);
        err = sg_bench_child_spawn((char *const *)(uintptr_t)argv, rp->log, &cpus, &rp->pid);
        if (err < 0) {
            set_error(m, "cannot start %s: %s", argv[0], strerror(-err));
            return err;
        }
        err = sg_bench_child_wait_udp(rp->pid, rp->port, START_TIMEOUT, &status);
        rp->http_port = (uint16_t)(http_port > 0 ? http_port : 0);
        if (err == 0 && http_port > 0 && def->http &&
            (err = sg_bench_scraper_start(&rp->scraper, (uint16_t)http_port)) < 0)
            set_error(m, "cannot start the /metrics scraper: %s", strerror(-err));
        if (err == 0) {
            sg_bench_child_cpus(rp->pid, &cpus);
            sg_bench_cpu_list(&cpus, m->relay_cpus, sizeof(m->relay_cpus));
            return 0;
        }
        status = sg_bench_child_stop(rp->pid, 0.5);
        rp->pid = 0;
        sg_bench_say(&b->o, true, "%s: start attempt %d failed", def->name, attempt + 1);
    }
    describe_status(status, why, sizeof(why));
    log_tail(rp->log, tail, sizeof(tail));
    if (err == -ECHILD)
        set_error(m, "%s exited at start (%s)%s", def->name, why, tail);
    else
        set_error(m, "%s did not bind 127.0.0.1:%u within %.0f s", def->name, (unsigned)rp->port,
                  START_TIMEOUT);
    return err;
}

/* Stop the relay; anything but a clean exit 0 is an error of the mode. */
static void relay_stop(struct relay_proc *rp, struct sg_bench_result *m)
{
    char why[256], tail[256];
    int status;

    sg_bench_scraper_stop(&rp->scraper);
    if (rp->pid <= 0)
        return;
    status = sg_bench_child_stop(rp->pid, STOP_GRACE);
    rp->pid = 0;
    if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return;
    describe_status(status, why, sizeof(why));
    log_tail(rp->log, tail, sizeof(tail));
    set_error(m, "%s ended with %s on SIGTERM%s", m->mode->name, why, tail);
}

static bool relay_alive(struct relay_proc *rp, struct sg_bench_result *m)
{
    char why[256], tail[256];
    int status = -ECHILD;

    if (rp->pid <= 0 || sg_bench_child_running(rp->pid, &status))
        return true;
    describe_status(status, why, sizeof(why));
    log_tail(rp->log, tail, sizeof(tail));
    set_error(m, "%s died during the run (%s)%s", m->mode->name, why, tail);
    return false;
}

/* ---- one measured step ---- */

static uint64_t own_cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Run one step of `r`, and say what it cost the relay and everyone else. */
static int measured_step(struct mode_run *r, struct sg_bench_step *st, struct usage *u)
{
    pid_t relay = r->rp.pid;
    int64_t c0 = relay > 0 ? sg_bench_child_cpu_ns(relay) : -1, c1;
    int64_t s0 = sg_bench_sys_busy_ns(), s1;
    uint64_t o0 = own_cpu_ns(), w0 = sg_bench_now_ns(), o1, w1;
    int err = sg_bench_load_step(r->load, st);

    w1 = sg_bench_now_ns();
    o1 = own_cpu_ns();
    s1 = sg_bench_sys_busy_ns();
    c1 = relay > 0 ? sg_bench_child_cpu_ns(relay) : -1;

    u->wall_ns = (double)(w1 - w0);
    u->relay_ns = c0 >= 0 && c1 >= c0 ? (double)(c1 - c0) : NAN;
    u->others_ns = NAN;
    if (s0 >= 0 && s1 >= s0) {
        double others =
            (double)(s1 - s0) - (double)(o1 - o0) - (isnan(u->relay_ns) ? 0 : u->relay_ns);

        u->others_ns = others > 0 ? others : 0;
    }
    if (!isnan(u->others_ns)) {
        r->others_ns += u->others_ns;
        r->others_wall_ns += u->wall_ns;
    }
    if (err < 0)
        return err;
    if (!relay_alive(&r->rp, r->m))
        return -ECHILD;
    return 0;
}

static const char *verdict(const struct sg_bench_step *st)
{
    if (st->loss >= SG_BENCH_LOSS_MAX) {
        double lost = st->loss * (double)(st->c2s_sent + st->s2c_sent);

        return (double)st->harness_drops >= lost / 2 ? "harness" : "loss";
    }
    if (st->gen_ratio < SG_BENCH_GEN_MIN)
        return st->waited ? "replies" : "generator";
    return "ok";
}

/* Add one latency chunk to the mode's pooled figures. */
static void chunk_add(struct sg_bench_step *sum, const struct sg_bench_step *c)
{
    double el = sum->elapsed + c->elapsed;

    sum->gen_ratio = el > 0 ? (sum->gen_ratio * sum->elapsed + c->gen_ratio * c->elapsed) / el : 0;
    sum->elapsed = el;
    sum->seconds += c->seconds;
    sum->target_pps = c->target_pps;
    sum->c2s_sent += c->c2s_sent;
    sum->c2s_rcvd += c->c2s_rcvd;
    sum->s2c_sent += c->s2c_sent;
    sum->s2c_rcvd += c->s2c_rcvd;
    sum->send_fail += c->send_fail;
    sum->skipped += c->skipped;
    sum->harness_drops += c->harness_drops;
    sum->unknown += c->unknown;
    sum->held += c->held;
    sum->waited += c->waited;
    sum->forgiven += c->forgiven;
    sg_bench_hist_merge(&sum->hist, &c->hist);
    {
        uint64_t sent = sum->c2s_sent + sum->s2c_sent, rcvd = sum->c2s_rcvd + sum->s2c_rcvd;

        sum->offered_pps = el > 0 ? (double)sent / el : 0;
        sum->delivered_pps = el > 0 ? (double)rcvd / el : 0;
        sum->loss = sent > rcvd ? (double)(sent - rcvd) / (double)sent : 0;
    }
}

/* ---- the phases ---- */

static void mode_fail(struct mode_run *r)
{
    relay_stop(&r->rp, r->m);
    sg_bench_load_destroy(r->load);
    r->load = NULL;
    r->active = false;
    r->searching = false;
}

/* ---- slipgate's residence times ---- */

#define API_BUF (4 << 20)

/* One histogram object of /api/routes at `p` ({"count": .., "max_us": ..,
 * "buckets": [[le_us, n], ...]}) into `h`; false if it cannot be read. */
static bool parse_hist(const char *p, struct sg_hist *h)
{
    const char *q;

    memset(h, 0, sizeof(*h));
    if (!p || !(q = strstr(p, "\"count\": ")))
        return false;
    h->count = strtoull(q + 9, NULL, 10);
    if (!(q = strstr(p, "\"sum_us\": ")))
        return false;
    h->sum_ns = (uint64_t)(strtod(q + 10, NULL) * 1e3);
    if (!(q = strstr(p, "\"max_us\": ")))
        return false;
    h->max_ns = (uint64_t)(strtod(q + 10, NULL) * 1e3 + 0.5);
    if (!(q = strstr(p, "\"buckets\": [")))
        return false;
    q += 12;
    for (int k = 0; k < SG_HIST_BUCKETS + 1; k++) {
        char *end;
        double le_us;
        unsigned idx = SG_HIST_EDGES;

        while (*q == ' ' || *q == ',')
            q++;
        if (*q != '[')
            break;
        q++;
        if (strncmp(q, "null", 4) == 0) {
            q += 4;
        } else {
            le_us = strtod(q, &end);
            q = end;
            idx = sg_hist_bucket((uint64_t)(le_us * 1e3 + 0.5));
        }
        while (*q == ' ' || *q == ',')
            q++;
        h->b[idx] += strtoull(q, &end, 10);
        q = end;
        if (*q != ']')
            return false;
        q++;
    }
    return true;
}

bool sg_bench_resid_read(uint16_t http_port, struct sg_hist *res, struct sg_hist *turn)
{
    char *buf;
    const char *body, *p;
    struct sg_hist c2s, s2c;
    bool ok = false;

    if (!http_port || !(buf = malloc(API_BUF)))
        return false;
    body = sg_bench_http_get(http_port, "/api/routes", buf, API_BUF);
    p = body ? strstr(body, "\"residence\": {") : NULL;
    if (p && parse_hist(strstr(p, "\"c2s\": "), &c2s) && parse_hist(strstr(p, "\"s2c\": "), &s2c) &&
        parse_hist(strstr(body, "\"turn\": "), turn)) {
        *res = c2s;
        sg_hist_merge(res, &s2c);
        ok = true;
    }
    free(buf);
    return ok;
}

/* Read slipgate's histograms into snapshot `k`. */
static void resid_snap(struct mode_run *r, int k)
{
    r->snap[k] = sg_bench_resid_read(r->rp.http_port, &r->res[k], &r->turn[k]);
}

/* The figures of what `to` counted after `from`.  Its max is the upper edge
 * of the highest bucket that grew (the exact max of the whole when that
 * bucket holds it). */
void sg_bench_resid_delta(const struct sg_hist *from, const struct sg_hist *to,
                          struct sg_bench_resid *out)
{
    struct sg_hist d = {{0}};
    int top = -1;

    for (unsigned i = 0; i < SG_HIST_BUCKETS; i++) {
        d.b[i] = to->b[i] >= from->b[i] ? to->b[i] - from->b[i] : 0;
        d.count += d.b[i];
        if (d.b[i])
            top = (int)i;
    }
    d.max_ns = top < 0 ? 0 : top < SG_HIST_EDGES && sg_hist_edges[top] < to->max_ns
                                 ? sg_hist_edges[top]
                                 : to->max_ns;
    out->have = d.count > 0; /* none: a run of one round has no steady state */
    out->count = d.count;
    out->p50 = (double)sg_hist_quantile(&d, 0.5) / 1e3;
    out->p99 = (double)sg_hist_quantile(&d, 0.99) / 1e3;
    out->p999 = (double)sg_hist_quantile(&d, 0.999) / 1e3;
    out->max = (double)d.max_ns / 1e3;
}

static void set_up(struct sg_bench *b, struct mode_run *r)
{
    struct sg_bench_result *m = r->m;
    const struct sg_bench_opts *o = &b->o;
    unsigned open = 0;
    uint16_t port;
    int err;

    /* The sink and the clients, then the relay between them. */
    /* slipgate's NetQuake hook follows an accept to the port it names (with
     * -p auto too: it runs on every session); the others stay on one port. */
    if ((err = sg_bench_load_create(&b->shape, o->sessions, !m->mode->decodes,
                                    m->mode->relay == SG_BENCH_RELAY_SLIPGATE, &r->load)) < 0) {
        set_error(m, "cannot create the load: %s", strerror(-err));
        return;
    }
    port = sg_bench_load_sink_port(r->load);
    if (m->mode->relay != SG_BENCH_RELAY_NONE) {
        if (relay_start(b, m->mode, port, &r->rp, m) < 0) {
            mode_fail(r);
            return;
        }
        port = r->rp.port;
        m->rss_before = sg_bench_child_rss_kib(r->rp.pid);
    }

    /* The first session alone (the relay's one-time costs), then the rest. */
    err = sg_bench_load_open(r->load, port, 1, OPEN_TIMEOUT, &open);
    if (err == 0 && r->rp.pid > 0)
        m->rss_first = sg_bench_child_rss_kib(r->rp.pid);
    if (err == 0)
        err = sg_bench_load_open(r->load, port, o->sessions, OPEN_TIMEOUT, &open);
    if (err < 0) {
        relay_alive(&r->rp, m);
        set_error(m, "only %u of %u sessions opened: %s", open, o->sessions, strerror(-err));
        mode_fail(r);
        return;
    }
    if (r->rp.pid > 0)
        m->rss_open = sg_bench_child_rss_kib(r->rp.pid);
    r->active = true;
    resid_snap(r, 0);
}

static void latency_chunk(struct sg_bench *b, struct mode_run *r, double seconds,
                          struct sg_bench_step *chunk)
{
    struct usage u;
    long long f0 = r->rp.pid > 0 ? sg_bench_child_minflt(r->rp.pid) : -1, f1;
    int err;

    chunk->target_pps = b->o.rate;
    chunk->seconds = seconds;
    if ((err = measured_step(r, chunk, &u)) < 0) {
        set_error(r->m, "latency run: %s", strerror(-err));
        mode_fail(r);
        return;
    }
    f1 = r->rp.pid > 0 ? sg_bench_child_minflt(r->rp.pid) : -1;
    chunk_add(&r->m->lat, chunk);
    if (r->m->nrounds < SG_BENCH_MAX_STEPS) {
        r->m->round_faults[r->m->nrounds] = f0 >= 0 && f1 >= f0 ? f1 - f0 : -1;
        r->m->round_p99[r->m->nrounds++] = sg_bench_hist_quantile_us(&chunk->hist, 0.99);
    }
    if (r->m->nrounds == 1)
        resid_snap(r, 1); /* the start burst is over */
    r->lat_wall_ns += u.wall_ns;
    r->lat_relay_ns += isnan(u.relay_ns) ? 0 : u.relay_ns;
}

static void latency_done(struct sg_bench *b, struct mode_run *r)
{
    struct sg_bench_result *m = r->m;
    uint64_t relayed = m->lat.c2s_rcvd + m->lat.s2c_rcvd;

    m->p50 = sg_bench_hist_quantile_us(&m->lat.hist, 0.50);
    m->p99 = sg_bench_hist_quantile_us(&m->lat.hist, 0.99);
    m->p999 = sg_bench_hist_quantile_us(&m->lat.hist, 0.999);
    m->pmax = sg_bench_hist_quantile_us(&m->lat.hist, 1.0);
    resid_snap(r, 2);
    if (r->snap[0] && r->snap[1] && r->snap[2]) {
        sg_bench_resid_delta(&r->res[0], &r->res[1], &m->res_start);
        sg_bench_resid_delta(&r->res[1], &r->res[2], &m->res_steady);
        sg_bench_resid_delta(&r->turn[0], &r->turn[2], &m->turn);
    }
    if (r->rp.pid > 0 && r->lat_wall_ns > 0) {
        m->lat_cpu = r->lat_relay_ns / r->lat_wall_ns;
        if (relayed)
            m->ns_per_pkt = r->lat_relay_ns / (double)relayed;
    }
    sg_bench_say(&b->o, true,
                 "%s: latency at %.0f pkt/s: p50 %.1f p99 %.1f p99.9 %.1f us, loss %.4f%%",
                 m->mode->name, b->o.rate, m->p50, m->p99, m->p999, m->lat.loss * 100);

    /* Memory per session, with the sessions open and used: the growth past
     * the first session over the other N - 1 (with N = 1, since the start). */
    if (r->rp.pid > 0) {
        m->rss_load = sg_bench_child_rss_kib(r->rp.pid);
        if (b->o.sessions > 1 && m->rss_first >= 0 && m->rss_load >= 0)
            m->rss_per_session = (double)(m->rss_load - m->rss_first) / (b->o.sessions - 1);
        else if (m->rss_before >= 0 && m->rss_load >= 0)
            m->rss_per_session = (double)(m->rss_load - m->rss_before);
        else
            m->rss_load = -1;
    }
}

/* One step of the throughput search of `r`: double until a failure, then bisect. */
static void throughput_step(struct sg_bench *b, struct mode_run *r, struct sg_bench_step *st)
{
    struct sg_bench_result *m = r->m;
    struct sg_bench_steprec *rec = &m->steps[m->nsteps];
    struct usage u;
    int err;

    st->target_pps = r->rate;
    st->seconds = b->o.step_s;
    if ((err = measured_step(r, st, &u)) < 0) {
        set_error(m, "throughput step at %.0f pkt/s: %s", r->rate, strerror(-err));
        mode_fail(r);
        return;
    }
    *rec = (struct sg_bench_steprec){
        .target = r->rate,
        .offered = st->offered_pps,
        .delivered = st->delivered_pps,
        .loss = st->loss,
        .gen_ratio = st->gen_ratio,
        .cpu = u.relay_ns / u.wall_ns,
        .ns =
            st->c2s_rcvd + st->s2c_rcvd ? u.relay_ns / (double)(st->c2s_rcvd + st->s2c_rcvd) : NAN,
        .harness_drops = st->harness_drops,
        .max_burst = st->max_burst,
        .skipped = st->skipped,
        .verdict = verdict(st),
    };
    m->nsteps++;
    sg_bench_say(&b->o, true,
                 "%s: step %u: %.0f pkt/s offered %.0f delivered %.0f loss %.4f%% %s "
                 "(burst %llu, skipped %llu, relay CPU %.0f%%)",
                 m->mode->name, m->nsteps, r->rate, rec->offered, rec->delivered, rec->loss * 100,
                 rec->verdict, (unsigned long long)st->max_burst, (unsigned long long)st->skipped,
                 isnan(rec->cpu) ? 0.0 : rec->cpu * 100);

    /* The next rate. */
    if (strcmp(rec->verdict, "ok") == 0) {
        r->lo = r->rate;
        if (r->rate >= m->tput_target) {
            m->tput_target = r->rate;
            m->tput_pps = rec->delivered;
            m->tput_cpu = rec->cpu;
            m->tput_ns = rec->ns;
        }
    } else {
        r->hi = r->rate;
        m->limit = rec->verdict;
    }
    if (r->hi == 0)
        r->rate = r->lo * 2;
    else if (r->lo == 0)
        r->rate = r->hi / 2;
    else
        r->rate = (r->lo + r->hi) / 2;
    if (r->rate < SG_BENCH_RATE_MIN || r->rate > SG_BENCH_RATE_MAX ||
        (r->hi > 0 && r->lo > 0 && (r->hi - r->lo) / r->lo < 0.02))
        r->searching = false;
}

static void finish(struct sg_bench *b, struct mode_run *r)
{
    struct sg_bench_result *m = r->m;

    if (r->others_wall_ns > 0)
        m->others = r->others_ns / r->others_wall_ns;
    relay_stop(&r->rp, m);
    if (m->mode->http) {
        m->scrapes_ok = atomic_load(&r->rp.scraper.ok);
        m->scrapes_failed = atomic_load(&r->rp.scraper.failed);
        sg_bench_say(&b->o, false, "%s: %lu scrapes of /metrics answered, %lu failed",
                     m->mode->name, m->scrapes_ok, m->scrapes_failed);
    }
    if (m->mode->relay == SG_BENCH_RELAY_SLIPGATE && r->rp.stats[0])
        read_stats(r->rp.stats, m);
    if (m->mode->record) {
        char dir[PATH_MAX];

        snprintf(dir, sizeof(dir), "%s/%s", b->tmpdir,
                 m->mode->sign ? "record-signed" : "record");
        m->demo_bytes = record_dir_sweep(dir);
        rmdir(dir);
    }
    sg_bench_load_destroy(r->load);
    r->load = NULL;
    r->active = false;
}

/* ---- all together ---- */

void sg_bench_run_all(struct sg_bench *b)
{
    const struct sg_bench_opts *o = &b->o;
    size_t n = b->nres;
    struct mode_run *runs = calloc(n ? n : 1, sizeof(*runs));
    struct sg_bench_step *step = calloc(1, sizeof(*step));
    unsigned chunks;
    double chunk_s;

    /* Every result starts out "does not apply". */
    for (size_t i = 0; i < n; i++) {
        struct sg_bench_result *m = &b->res[i];

        m->unavailable = m->mode->unavailable;
        if (!m->unavailable && m->mode->decodes && !b->shape.q3)
            m->unavailable = SG_BENCH_NEEDS_Q3;
        m->status = m->unavailable ? SG_BENCH_NA : SG_BENCH_OK;
        m->dec_datagrams = m->dec_messages = m->dec_errors = m->dec_reencoded = -1;
        m->dec_identical = m->dec_reencode_errors = m->demos = m->demo_bytes = -1;
        m->rss_before = m->rss_first = m->rss_open = m->rss_load = -1;
        m->relay_sessions = -1;
        m->loop_max_us = NAN;
        m->loop_over_1ms = -1;
        m->tput_pps = m->tput_cpu = m->tput_ns = m->lat_cpu = m->ns_per_pkt = m->others = NAN;
        m->rss_per_session = NAN;
        m->limit = "steps";
    }
    if (!runs || !step) {
        for (size_t i = 0; i < n; i++)
            if (b->res[i].status == SG_BENCH_OK)
                set_error(&b->res[i], "out of memory");
        goto out;
    }

    /* Set up. */
    for (size_t i = 0; i < n; i++) {
        struct mode_run *r = &runs[i];

        r->m = &b->res[i];
        if (r->m->status != SG_BENCH_OK)
            continue;
        sg_bench_say(o, false, "%s: setting up", r->m->mode->name);
        set_up(b, r);
        r->rate = o->rate > SG_BENCH_RATE_MIN ? o->rate : SG_BENCH_RATE_MIN;
        r->searching = r->active;
    }

    /* Latency, in chunks taking turns. */
    chunks = (unsigned)ceil(o->duration / CHUNK_S - 1e-9);
    chunks = chunks ? chunks : 1;
    chunk_s = o->duration / chunks;
    sg_bench_say(o, false, "latency: %u round(s) of %.2f s per mode", chunks, chunk_s);
    for (unsigned c = 0; c < chunks; c++)
        for (size_t k = 0; k < n; k++) {
            struct mode_run *r = &runs[(c + k) % n];

            if (r->active)
                latency_chunk(b, r, chunk_s, step);
        }
    for (size_t i = 0; i < n; i++)
        if (runs[i].active)
            latency_done(b, &runs[i]);

    /* Throughput, one step per mode per round. */
    sg_bench_say(o, false, "throughput: up to %u round(s) of %.2f s per mode", o->steps, o->step_s);
    for (unsigned s = 0; s < o->steps && s < SG_BENCH_MAX_STEPS; s++)
        for (size_t k = 0; k < n; k++) {
            struct mode_run *r = &runs[(s + k) % n];

            if (r->active && r->searching)
                throughput_step(b, r, step);
        }

    /* Finish. */
    for (size_t i = 0; i < n; i++) {
        struct sg_bench_result *m = &b->res[i];

        if (runs[i].active)
            finish(b, &runs[i]);
        if (m->status == SG_BENCH_ERROR)
            sg_bench_say(o, false, "%s: error: %s", m->mode->name, m->error);
        else if (m->status == SG_BENCH_OK)
            sg_bench_say(o, false, "%s: %.0f pkt/s (%s), p99 %.1f us", m->mode->name, m->tput_pps,
                         m->limit, m->p99);
    }
out:
    free(step);
    free(runs);
}
