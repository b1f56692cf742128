/*
 * `slipgate doctor`: what will go wrong, before it does.
 *
 * One line per check, "ok", "warn" or "fail" first:
 *
 * - the configuration loads (every error of it is a "fail" line);
 * - everything --check-config checks (proxy/preflight.h, one set of checks):
 *   every listen address and `http` can be bound now (a port in use names
 *   the process that holds it when /proc tells), every host resolves, the
 *   stats file, recording directories and textlog/pcap/inspect files can
 *   be written or made, signing keys are private; each line names where
 *   it was configured (FILE:LINE);
 * - recording directories have at least --min-free bytes (1 GiB) and 5 %
 *   of their filesystem free;
 * - each route's server answers a status query within --timeout: the
 *   game's own query, from the codec table (all games' for protocol auto);
 *   an ICMP port unreachable is a refusal;
 * - each `socket_buffer` is within net.core.rmem_max and wmem_max.
 *
 * Exit status: 0 when nothing failed (warnings allowed), 1 otherwise, 2 for
 * a usage error.  Datagrams go only to the configured servers.
 */
#include "filters/chain.h"
#include "protocols/codec.h"
#include "proxy/addr.h"
#include "proxy/cli/commands.h"
#include "proxy/conf.h"
#include "proxy/preflight.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#define DEFAULT_TIMEOUT_MS 1000
#define DEFAULT_MIN_FREE   (1LL << 30)
#define MAX_REPLIES        64 /* datagrams read per server before giving up */

static const char doctor_usage[] =
    "Usage: slipgate doctor [-c FILE] [OPTIONS] [+set NAME VALUE]...\n"
    "Check what would go wrong before it does, one line per check (ok, warn or\n"
    "fail): the config loads, what --check-config checks (every listen and http\n"
    "address can be bound, a port in use naming its holder; hosts resolve; the\n"
    "stats file, recording directories and textlog/pcap/inspect files can be\n"
    "written; signing keys are private), every server answers a status query,\n"
    "every recording directory has room, socket_buffer is within the kernel's\n"
    "caps.  Exit 0 when nothing fails, 1 otherwise.\n"
    "\n"
    "  -c, --config FILE        the configuration to check\n"
    "  -l, --listen ADDR:PORT   as for slipgate\n"
    "  -s, --server HOST:PORT   as for slipgate\n"
    "  -p, --protocol PROTO     as for slipgate\n"
    "      --record DIR         as for slipgate\n"
    "      --timeout DURATION   wait this long for each server's answer (default 1s)\n"
    "      --min-free SIZE      warn when a recording directory has less free\n"
    "                           (default 1G; below 5 % of the disk warns too)\n"
    "  -h, --help               print this help and exit\n";

enum verdict { OK, WARN, FAIL };

struct doctor {
    int count[3];
    int64_t timeout_ms;
    int64_t min_free;
};

__attribute__((format(printf, 3, 4))) static void say(struct doctor *dr, enum verdict v,
                                                      const char *fmt, ...)
{
    static const char *const tags[] = {"ok  ", "warn", "fail"};
    va_list ap;

    dr->count[v]++;
    printf("%s ", tags[v]);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

/* A finding of the shared checks: its verdict, where it was configured, what. */
static void doctor_said(void *ctx, enum sg_preflight_verdict v, const char *file, int line,
                        int col, const char *text)
{
    struct doctor *dr = ctx;
    enum verdict mine = v == SG_PREFLIGHT_FAIL ? FAIL : v == SG_PREFLIGHT_WARN ? WARN : OK;

    if (line && col)
        say(dr, mine, "%s:%d:%d: %s", file, line, col, text);
    else if (line)
        say(dr, mine, "%s:%d: %s", file, line, text);
    else
        say(dr, mine, "%s: %s", file, text);
}

/* SIZE: digits with an optional k, M, G or T (powers of 1024). */
static int parse_size(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    int shift = 0;

    if (errno || end == s || v < 0)
        return -EINVAL;
    switch (*end) {
    case '\0':
        break;
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'M':
        shift = 20;
        break;
    case 'G':
        shift = 30;
        break;
    case 'T':
        shift = 40;
        break;
    default:
        return -EINVAL;
    }
    if (shift && end[1] != '\0')
        return -EINVAL;
    if (v > (INT64_MAX >> shift))
        return -ERANGE;
    *out = (int64_t)v << shift;
    return 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- server: does it answer its game's status query ---- */

static void check_server(struct doctor *dr, uv_loop_t *loop, const struct sg_route_conf *r)
{
    const struct sg_codec *games[16];
    struct sockaddr_storage ss;
    char why[256], a[SG_ADDR_STRLEN], asked[160] = "";
    int ngames = 0, fd;

    if (sg_addr_resolve(loop, r->server, false, &ss, why, sizeof(why)) < 0)
        return; /* told by the shared checks */
    sg_addr_format((struct sockaddr *)&ss, a, sizeof(a));

    /* The route's game, or every game that has a status query. */
    const struct sg_codec *only = sg_protocol_codec(r->protocol);
    for (int i = 0; sg_codecs[i] && ngames < 16; i++) {
        if (sg_codecs[i]->status && (!only || sg_codecs[i] == only))
            games[ngames++] = sg_codecs[i];
    }
    if (ngames == 0) {
        say(dr, WARN, "route %s: server %s resolves; no status query is known for protocol %s",
            r->name, a, sg_protocol_name(r->protocol));
        return;
    }

    fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&ss, sg_addr_len((struct sockaddr *)&ss)) < 0) {
        say(dr, FAIL, "route %s: server %s: cannot open a socket to it: %s", r->name, a,
            strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }

    /* One datagram per distinct query (QuakeWorld's and Quake 2's are the same bytes). */
    uint8_t sent[16][64];
    int sent_len[16], nsent = 0;
    for (int g = 0; g < ngames; g++) {
        uint8_t q[64];
        int n = sg_codec_status_query(games[g]->status, q, sizeof(q));
        bool dup = false;
        if (n <= 0)
            continue;
        for (int i = 0; i < nsent; i++)
            dup = dup || (sent_len[i] == n && memcmp(sent[i], q, (size_t)n) == 0);
        size_t used = strlen(asked);
        snprintf(asked + used, sizeof(asked) - used, "%s%s %s", used ? ", " : "", games[g]->name,
                 games[g]->status->what);
        if (dup)
            continue;
        memcpy(sent[nsent], q, (size_t)n);
        sent_len[nsent++] = n;
        (void)send(fd, q, (size_t)n, 0);
    }

    /* Wait for an answer that one of the games recognises. */
    int64_t start = now_ms(), left = dr->timeout_ms;
    int other = 0, refused = 0;
    for (int reads = 0; reads < MAX_REPLIES && left > 0;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, (int)(left > INT_MAX ? INT_MAX : left)) <= 0)
            break;
        uint8_t buf[2048];
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        left = dr->timeout_ms - (now_ms() - start);
        if (n < 0) {
            refused += errno == ECONNREFUSED;
            if (errno == ECONNREFUSED || errno == EAGAIN || errno == EINTR)
                continue;
            break;
        }
        reads++;
        for (int g = 0; g < ngames; g++) {
            if (sg_codec_status_is_reply(games[g]->status, buf, (size_t)n)) {
                say(dr, OK, "route %s: server %s answered a %s status query (%s) in %lld ms",
                    r->name, a, games[g]->name, games[g]->status->what,
                    (long long)(now_ms() - start));
                close(fd);
                return;
            }
        }
        other++;
    }
    close(fd);
    if (other)
        say(dr, WARN,
            "route %s: server %s answered %d datagram%s, but not as a status reply (asked: %s)",
            r->name, a, other, other == 1 ? "" : "s", asked);
    else if (refused)
        say(dr, FAIL,
            "route %s: server %s refused the status query: nothing listens there (ICMP port "
            "unreachable; asked: %s)",
            r->name, a, asked);
    else
        say(dr, FAIL,
            "route %s: server %s did not answer a status query within %lld ms (asked: %s)", r->name,
            a, (long long)dr->timeout_ms, asked);
}

/* ---- kernel buffer caps ---- */

static long long read_sysctl(const char *path)
{
    FILE *f = fopen(path, "r");
    long long v = -1;

    if (f) {
        if (fscanf(f, "%lld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static void check_buffer(struct doctor *dr, const struct sg_route_conf *r)
{
    long long rmem = read_sysctl("/proc/sys/net/core/rmem_max");
    long long wmem = read_sysctl("/proc/sys/net/core/wmem_max");
    long long want = (long long)r->socket_buffer;

    if (want <= 0)
        return;
    if (rmem < 0 || wmem < 0) {
        say(dr, WARN, "route %s: socket_buffer %lld: cannot read net.core.rmem_max/wmem_max",
            r->name, want);
        return;
    }
    if (want > rmem || want > wmem)
        say(dr, WARN,
            "route %s: socket_buffer %lld is above the kernel's cap (net.core.rmem_max %lld, "
            "wmem_max %lld): without CAP_NET_ADMIN the socket gets the cap; raise it with "
            "sysctl -w net.core.rmem_max=%lld net.core.wmem_max=%lld",
            r->name, want, rmem, wmem, want, want);
    else
        say(dr, OK,
            "route %s: socket_buffer %lld is within net.core.rmem_max %lld and wmem_max %lld",
            r->name, want, rmem, wmem);
}

/* ---- the command ---- */

enum { OPT_RECORD = 256, OPT_TIMEOUT, OPT_MIN_FREE };

int sg_cmd_doctor(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},
        {"listen", required_argument, NULL, 'l'},
        {"server", required_argument, NULL, 's'},
        {"protocol", required_argument, NULL, 'p'},
        {"record", required_argument, NULL, OPT_RECORD},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"min-free", required_argument, NULL, OPT_MIN_FREE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct doctor dr = {.timeout_ms = DEFAULT_TIMEOUT_MS, .min_free = DEFAULT_MIN_FREE};
    struct sg_conf_overrides ov = {0};
    const char *config = NULL;
    const char **sets = NULL;
    int opt;

    /* +set NAME VALUE out first, as for the proxy. */
    if (sg_conf_extract_sets("slipgate doctor", &argc, argv, &sets, &ov.nsets) < 0)
        return 2;
    ov.sets = sets;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "c:l:s:p:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            config = optarg;
            break;
        case 'l':
            ov.listen = optarg;
            break;
        case 's':
            ov.server = optarg;
            break;
        case 'p':
            ov.protocol = optarg;
            break;
        case OPT_RECORD:
            ov.record = optarg;
            break;
        case OPT_TIMEOUT:
            if (sg_conf_parse_duration(optarg, &dr.timeout_ms) < 0 || dr.timeout_ms < 1 ||
                dr.timeout_ms > 60000) {
                fprintf(stderr, "slipgate doctor: --timeout wants a duration from 1ms to 60s\n");
                free(sets);
                return 2;
            }
            break;
        case OPT_MIN_FREE:
            if (parse_size(optarg, &dr.min_free) < 0) {
                fprintf(stderr, "slipgate doctor: --min-free wants a size (512M, 2G, ...)\n");
                free(sets);
                return 2;
            }
            break;
        case 'h':
            fputs(doctor_usage, stdout);
            free(sets);
            return 0;
        default:
            fputs("Try 'slipgate doctor --help' for more information.\n", stderr);
            free(sets);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "slipgate doctor: unexpected argument '%s'\n", argv[optind]);
        free(sets);
        return 2;
    }

    /* The configuration: nothing else can be checked without it. */
    struct sg_conf_diag diag;
    struct sg_conf *conf = NULL;
    const char *name = config ? config : "command line";
    sg_conf_diag_init(&diag);
    if (sg_conf_load(config, &ov, &conf, &diag) < 0) {
        if (diag.count == 0)
            say(&dr, FAIL, "config %s: out of memory", name);
        for (int i = 0; i < diag.count && i < SG_CONF_MAX_DIAGS; i++)
            say(&dr, FAIL, "config %s", diag.msgs[i]);
        printf("doctor: the configuration must load before anything else can be checked\n");
        free(sets);
        return 1;
    }
    say(&dr, OK, "config %s loads (%d route%s)", name, conf->nroutes,
        conf->nroutes == 1 ? "" : "s");

    /* What --check-config checks too (proxy/preflight.h), then the doctor's own. */
    const struct sg_preflight_opts opts = {.what = SG_PREFLIGHT_ALL, .min_free = dr.min_free};
    uv_loop_t loop;
    sg_preflight(conf, &opts, doctor_said, &dr);
    if (uv_loop_init(&loop) < 0) {
        fprintf(stderr, "slipgate doctor: cannot start an event loop\n");
        sg_conf_destroy(conf);
        free(sets);
        return 1;
    }
    for (const struct sg_route_conf *r = conf->routes; r; r = r->next)
        check_server(&dr, &loop, r);
    for (const struct sg_route_conf *r = conf->routes; r; r = r->next)
        check_buffer(&dr, r);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    sg_conf_destroy(conf);
    free(sets);

    printf("doctor: %d ok, %d warning%s, %d failed\n", dr.count[OK], dr.count[WARN],
           dr.count[WARN] == 1 ? "" : "s", dr.count[FAIL]);
    return dr.count[FAIL] ? 1 : (ferror(stdout) || fflush(stdout) != 0);
}
