/*
 * `slipgate doctor`: what will go wrong, before it does.
 *
 * One line per check, "ok", "warn" or "fail" first:
 *
 * - the configuration loads (every error of it is a "fail" line);
 * - each route's listen address can be bound now; a port in use names the
 *   process that holds it when /proc tells (its socket's inode in
 *   /proc/net/udp{,6}, then the /proc/PID/fd link to it);
 * - each route's server resolves and answers a status query within
 *   --timeout: the game's own query, from the codec table (all games'
 *   for protocol auto); an ICMP port unreachable is a refusal;
 * - each recording directory (`record DIR`, --record, a record filter's
 *   `directory`) exists or can be created, can be written (a file is
 *   created and removed), and has at least --min-free bytes (1 GiB) and
 *   5 % of its filesystem free;
 * - each `socket_buffer` is within net.core.rmem_max and wmem_max;
 * - each signing key is a regular file that only its owner can read.
 *
 * Exit status: 0 when nothing failed (warnings allowed), 1 otherwise, 2 for
 * a usage error.  Datagrams go only to the configured servers.
 */
#include "filters/chain.h"
#include "protocols/codec.h"
#include "proxy/addr.h"
#include "proxy/commands.h"
#include "proxy/conf.h"

#include <dirent.h>
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
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#define DEFAULT_TIMEOUT_MS 1000
#define DEFAULT_MIN_FREE   (1LL << 30)
#define MIN_FREE_PERCENT   5
#define MAX_REPLIES        64 /* datagrams read per server before giving up */

static const char doctor_usage[] =
    "Usage: slipgate doctor [-c FILE] [OPTIONS] [+set NAME VALUE]...\n"
    "Check what would go wrong before it does, one line per check (ok, warn or\n"
    "fail): the config loads, every listen address can be bound (a port in use\n"
    "names its holder), every server answers a status query, every recording\n"
    "directory can be written and has room, socket_buffer is within the kernel's\n"
    "caps, signing keys are private.  Exit 0 when nothing fails, 1 otherwise.\n"
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

/* "1.5 GiB", "812 MiB", "40 KiB", "12 bytes". */
static const char *human(uint64_t n, char *buf, size_t cap)
{
    if (n >= (1ULL << 30))
        snprintf(buf, cap, "%.1f GiB", (double)n / (1ULL << 30));
    else if (n >= (1ULL << 20))
        snprintf(buf, cap, "%.1f MiB", (double)n / (1ULL << 20));
    else if (n >= 1024)
        snprintf(buf, cap, "%.1f KiB", (double)n / 1024);
    else
        snprintf(buf, cap, "%" PRIu64 " bytes", n);
    return buf;
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

/* ---- listen: can it be bound, and who holds it if not ---- */

/* Does a /proc/net/udp{,6} local address (hex, as the kernel prints it) cover `sa`? */
static bool proc_addr_covers(const char *hex, const struct sockaddr *sa)
{
    uint32_t words[4] = {0};
    int nwords = strlen(hex) == 32 ? 4 : 1;
    bool any = true;

    for (int i = 0; i < nwords; i++) {
        char part[9];
        memcpy(part, hex + 8 * i, 8);
        part[8] = '\0';
        words[i] = (uint32_t)strtoul(part, NULL, 16);
        any = any && words[i] == 0;
    }
    if (any)
        return true;
    if (sa->sa_family == AF_INET && nwords == 1)
        return memcmp(&words[0], &((const struct sockaddr_in *)sa)->sin_addr, 4) == 0;
    if (sa->sa_family == AF_INET6 && nwords == 4)
        return memcmp(words, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16) == 0;
    /* An IPv4 socket holds a dual-stack port's IPv4 half, and the other way round. */
    return true;
}

/* The socket inode and owner of the UDP port `sa` wants, from /proc/net/udp{,6}; 0 if unseen. */
static unsigned long port_inode(const struct sockaddr *sa, unsigned *uid)
{
    static const char *const files[] = {"/proc/net/udp", "/proc/net/udp6"};
    int port = sa->sa_family == AF_INET6 ? ntohs(((const struct sockaddr_in6 *)sa)->sin6_port)
                                         : ntohs(((const struct sockaddr_in *)sa)->sin_port);

    for (size_t f = 0; f < 2; f++) {
        FILE *in = fopen(files[f], "r");
        char line[512], hex[40];
        unsigned lport, u;
        unsigned long inode;

        if (!in)
            continue;
        while (fgets(line, sizeof(line), in)) {
            if (sscanf(line, " %*d: %39[0-9A-Fa-f]:%x %*s %*s %*s %*s %*s %u %*u %lu", hex, &lport,
                       &u, &inode) == 4 &&
                (int)lport == port && inode != 0 && proc_addr_covers(hex, sa)) {
                fclose(in);
                *uid = u;
                return inode;
            }
        }
        fclose(in);
    }
    return 0;
}

/* The process with a descriptor on socket `inode`: "NAME (pid N)" into `out`; false if none seen.
 */
static bool inode_owner(unsigned long inode, char *out, size_t cap)
{
    char want[64], path[600], link[64];
    DIR *proc = opendir("/proc");
    struct dirent *p;
    bool found = false;

    if (!proc)
        return false;
    snprintf(want, sizeof(want), "socket:[%lu]", inode);
    while (!found && (p = readdir(proc))) {
        if (p->d_name[0] < '1' || p->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/fd", p->d_name);
        DIR *fds = opendir(path);
        struct dirent *fd;
        if (!fds)
            continue;
        while (!found && (fd = readdir(fds))) {
            if (fd->d_name[0] == '.')
                continue;
            int w = snprintf(path, sizeof(path), "/proc/%s/fd/%s", p->d_name, fd->d_name);
            if (w < 0 || (size_t)w >= sizeof(path))
                continue;
            ssize_t n = readlink(path, link, sizeof(link) - 1);
            if (n <= 0)
                continue;
            link[n] = '\0';
            if (strcmp(link, want) != 0)
                continue;
            char comm[64] = "?";
            snprintf(path, sizeof(path), "/proc/%s/comm", p->d_name);
            FILE *c = fopen(path, "r");
            if (c) {
                if (fgets(comm, sizeof(comm), c))
                    comm[strcspn(comm, "\n")] = '\0';
                fclose(c);
            }
            snprintf(out, cap, "%s (pid %ld)", comm, strtol(p->d_name, NULL, 10));
            found = true;
        }
        closedir(fds);
    }
    closedir(proc);
    return found;
}

/* Each route's listen address; the bound sockets are held in `fds` so two routes cannot share. */
static void check_listen(struct doctor *dr, uv_loop_t *loop, const struct sg_route_conf *r,
                         int *fds, const char **owners, int *nfds)
{
    struct sockaddr_storage ss;
    char why[256], a[SG_ADDR_STRLEN], who[128];

    if (sg_addr_resolve(loop, r->listen, true, &ss, why, sizeof(why)) < 0) {
        say(dr, FAIL, "route %s: listen %s: %s", r->name, r->listen, why);
        return;
    }
    sg_addr_format((struct sockaddr *)&ss, a, sizeof(a));
    int fd = sg_addr_try_bind((struct sockaddr *)&ss);
    if (fd >= 0) {
        fds[*nfds] = fd;
        owners[(*nfds)++] = r->name;
        say(dr, OK, "route %s: listen %s can be bound", r->name, a);
        return;
    }
    if (fd != -EADDRINUSE) {
        say(dr, FAIL, "route %s: cannot listen on %s: %s", r->name, a, strerror(-fd));
        return;
    }

    /* In use: by an earlier route of this file, or by whom /proc says. */
    unsigned uid = 0;
    unsigned long inode = port_inode((struct sockaddr *)&ss, &uid);
    for (int i = 0; inode && i < *nfds; i++) {
        struct stat st;
        if (fstat(fds[i], &st) == 0 && (unsigned long)st.st_ino == inode) {
            say(dr, FAIL, "route %s: listen %s is also route %s's: two routes cannot share a port",
                r->name, a, owners[i]);
            return;
        }
    }
    if (inode && inode_owner(inode, who, sizeof(who)))
        say(dr, FAIL, "route %s: listen %s is in use by %s", r->name, a, who);
    else if (inode)
        say(dr, FAIL, "route %s: listen %s is in use by a process of uid %u (not visible here)",
            r->name, a, uid);
    else
        say(dr, FAIL, "route %s: listen %s is in use (its holder is not visible here)", r->name, a);
}

/* ---- server: does it answer its game's status query ---- */

static void check_server(struct doctor *dr, uv_loop_t *loop, const struct sg_route_conf *r)
{
    const struct sg_codec *games[16];
    struct sockaddr_storage ss;
    char why[256], a[SG_ADDR_STRLEN], asked[160] = "";
    int ngames = 0, fd;

    if (sg_addr_resolve(loop, r->server, false, &ss, why, sizeof(why)) < 0) {
        say(dr, FAIL, "route %s: server %s: %s", r->name, r->server, why);
        return;
    }
    sg_addr_format((struct sockaddr *)&ss, a, sizeof(a));

    /* The route's game, or every game that has a status query. */
    const struct sg_codec *only =
        r->protocol != SG_PROTO_AUTO ? sg_codec_find(sg_protocol_names[r->protocol]) : NULL;
    for (int i = 0; sg_codecs[i] && ngames < 16; i++) {
        if (sg_codecs[i]->status && (!only || sg_codecs[i] == only))
            games[ngames++] = sg_codecs[i];
    }
    if (ngames == 0) {
        say(dr, WARN, "route %s: server %s resolves; no status query is known for protocol %s",
            r->name, a, sg_protocol_names[r->protocol]);
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
        int n = games[g]->status->query(q, sizeof(q));
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
            if (games[g]->status->is_reply(buf, (size_t)n)) {
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

/* ---- recording directories ---- */

/* Can a file be created in `dir`?  0 or a negative errno. */
static int can_write(const char *dir)
{
    char path[PATH_MAX];

    if (snprintf(path, sizeof(path), "%s/.slipgate-doctor-XXXXXX", dir) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    int fd = mkstemp(path);
    if (fd < 0)
        return -errno;
    close(fd);
    unlink(path);
    return 0;
}

static void check_dir(struct doctor *dr, const char *who, const char *dir)
{
    char parent[PATH_MAX], freebuf[32], minbuf[32];
    const char *probe = dir;
    struct stat st;
    struct statvfs vfs;
    bool missing = false;

    if (stat(dir, &st) != 0) {
        if (errno != ENOENT) {
            say(dr, FAIL, "%s %s: %s", who, dir, strerror(errno));
            return;
        }
        /* The recorder creates the directory itself, one level deep. */
        snprintf(parent, sizeof(parent), "%s", dir);
        size_t n = strlen(parent);
        while (n > 1 && parent[n - 1] == '/')
            parent[--n] = '\0';
        char *slash = strrchr(parent, '/');
        if (!slash)
            snprintf(parent, sizeof(parent), ".");
        else
            slash[slash == parent ? 1 : 0] = '\0';
        if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode)) {
            say(dr, FAIL, "%s %s is missing, and so is %s: the recorder cannot create it", who, dir,
                parent);
            return;
        }
        missing = true;
        probe = parent;
    } else if (!S_ISDIR(st.st_mode)) {
        say(dr, FAIL, "%s %s is not a directory", who, dir);
        return;
    }
    int err = can_write(probe);
    if (err < 0) {
        if (missing)
            say(dr, FAIL, "%s %s is missing and cannot be created in %s: %s", who, dir, probe,
                strerror(-err));
        else
            say(dr, FAIL, "%s %s is not writable: %s", who, dir, strerror(-err));
        return;
    }
    if (statvfs(probe, &vfs) != 0) {
        say(dr, WARN, "%s %s: cannot tell its free space: %s", who, dir, strerror(errno));
        return;
    }
    uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    uint64_t total = (uint64_t)vfs.f_blocks * vfs.f_frsize;
    double pct = total ? 100.0 * (double)avail / (double)total : 0;
    bool low_bytes = avail < (uint64_t)dr->min_free, low_pct = pct < MIN_FREE_PERCENT;
    human(avail, freebuf, sizeof(freebuf));
    human((uint64_t)dr->min_free, minbuf, sizeof(minbuf));
    if (low_bytes || low_pct)
        say(dr, WARN, "%s %s is nearly full: %s free%s%s, %.1f %% of its filesystem%s", who, dir,
            freebuf, low_bytes ? ", under " : "", low_bytes ? minbuf : "", pct,
            low_pct ? ", under 5 %" : "");
    else if (missing)
        say(dr, WARN, "%s %s does not exist yet (the first recording creates it in %s: %s free)",
            who, dir, probe, freebuf);
    else
        say(dr, OK, "%s %s is writable, %s free (%.1f %%)", who, dir, freebuf, pct);
}

/* Every filter of the route with a `directory` (the recorder, whatever set it up). */
static void check_dirs(struct doctor *dr, const struct sg_route_conf *r)
{
    char who[160];

    for (const struct sg_filter_conf *fc = r->filters ? r->filters->head : NULL; fc;
         fc = fc->next) {
        const struct sg_conf_directive *d = sg_conf_find(&fc->section, "directory");
        char *dir;
        if (!d || d->type != SG_CONF_PATH)
            continue;
        memcpy(&dir, fc->conf + d->offset, sizeof(dir));
        if (!dir)
            continue;
        snprintf(who, sizeof(who), "route %s: %s directory", r->name, fc->impl->name);
        check_dir(dr, who, dir);
    }
}

/* ---- kernel buffer caps, signing keys ---- */

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

static void check_key(struct doctor *dr, const char *path)
{
    struct stat st;

    if (stat(path, &st) != 0) {
        say(dr, FAIL, "sign_key %s: %s", path, strerror(errno));
        return;
    }
    if (!S_ISREG(st.st_mode))
        say(dr, FAIL, "sign_key %s is not a regular file", path);
    else if (st.st_mode & 077)
        say(dr, FAIL,
            "sign_key %s is readable or writable by group or others (mode %04o): chmod 600", path,
            (unsigned)(st.st_mode & 07777));
    else if (st.st_uid != geteuid())
        say(dr, WARN,
            "sign_key %s (mode %04o) belongs to uid %u, not to uid %u running this check: "
            "slipgate must run as its owner",
            path, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, (unsigned)geteuid());
    else
        say(dr, OK, "sign_key %s: mode %04o, only its owner can read it", path,
            (unsigned)(st.st_mode & 07777));
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

    uv_loop_t loop;
    int *fds = calloc((size_t)conf->nroutes + 1, sizeof(*fds));
    const char **owners = calloc((size_t)conf->nroutes + 1, sizeof(*owners));
    int nfds = 0;
    if (!fds || !owners || uv_loop_init(&loop) < 0) {
        fprintf(stderr, "slipgate doctor: out of memory\n");
        free(fds);
        free(owners);
        sg_conf_destroy(conf);
        free(sets);
        return 1;
    }
    for (const struct sg_route_conf *r = conf->routes; r; r = r->next)
        check_listen(&dr, &loop, r, fds, owners, &nfds);
    while (nfds > 0)
        close(fds[--nfds]);
    for (const struct sg_route_conf *r = conf->routes; r; r = r->next)
        check_server(&dr, &loop, r);
    for (const struct sg_route_conf *r = conf->routes; r; r = r->next) {
        check_dirs(&dr, r);
        check_buffer(&dr, r);
    }
    for (const struct sg_route_conf *r = conf->routes; r; r = r->next) {
        bool seen = false;
        for (const struct sg_route_conf *o = conf->routes; o != r && !seen; o = o->next)
            seen = o->sign_key && r->sign_key && strcmp(o->sign_key, r->sign_key) == 0;
        if (r->sign_key && !seen)
            check_key(&dr, r->sign_key);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    free(fds);
    free(owners);
    sg_conf_destroy(conf);
    free(sets);

    printf("doctor: %d ok, %d warning%s, %d failed\n", dr.count[OK], dr.count[WARN],
           dr.count[WARN] == 1 ? "" : "s", dr.count[FAIL]);
    return dr.count[FAIL] ? 1 : (ferror(stdout) || fflush(stdout) != 0);
}
