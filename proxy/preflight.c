/*
 * The checks --check-config, `slipgate doctor` and the start share
 * (proxy/preflight.h).
 */
#include "proxy/preflight.h"

#include "filters/chain.h"
#include "proxy/addr.h"
#include "proxy/master.h"
#include "proxy/stats.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <uv.h>

#define MIN_FREE_PERCENT 5

struct pf {
    const struct sg_conf *conf;
    const struct sg_preflight_opts *opts;
    sg_preflight_say say;
    void *ctx;
    int failed;
};

__attribute__((format(printf, 6, 7))) static void tell(struct pf *pf,
                                                       enum sg_preflight_verdict v,
                                                       const char *file, int line, int col,
                                                       const char *fmt, ...)
{
    char text[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    pf->failed += v == SG_PREFLIGHT_FAIL;
    pf->say(pf->ctx, v, file ? file : "command line", file ? line : 0, file ? col : 0, text);
}

/* The file a line of the configuration belongs to: the file, or NULL for the command line. */
static const char *in_file(const struct pf *pf, int line)
{
    return line && pf->conf->file ? pf->conf->file : NULL;
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

/* ---- ports: who holds one ---- */

/* Does a /proc/net/{udp,tcp}{,6} local address (hex, as the kernel prints it) cover `sa`? */
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

/*
 * The socket inode and owner of the port `sa` wants, from /proc/net/udp{,6}
 * (or tcp{,6}: then only a listening socket, state 0A); 0 if unseen.
 */
static unsigned long port_inode(const struct sockaddr *sa, bool tcp, unsigned *uid)
{
    static const char *const udp[] = {"/proc/net/udp", "/proc/net/udp6"};
    static const char *const tcps[] = {"/proc/net/tcp", "/proc/net/tcp6"};
    const char *const *files = tcp ? tcps : udp;
    int port = sa->sa_family == AF_INET6 ? ntohs(((const struct sockaddr_in6 *)sa)->sin6_port)
                                         : ntohs(((const struct sockaddr_in *)sa)->sin_port);

    for (size_t f = 0; f < 2; f++) {
        FILE *in = fopen(files[f], "r");
        char line[512], hex[40];
        unsigned lport, u, state;
        unsigned long inode;

        if (!in)
            continue;
        while (fgets(line, sizeof(line), in)) {
            if (sscanf(line, " %*d: %39[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %u %*u %lu", hex, &lport,
                       &state, &u, &inode) == 5 &&
                (int)lport == port && inode != 0 && (!tcp || state == 0x0A) &&
                proc_addr_covers(hex, sa)) {
                fclose(in);
                *uid = u;
                return inode;
            }
        }
        fclose(in);
    }
    return 0;
}

/* The process with a descriptor on socket `inode`: "NAME (pid N)" into `out`; false if none seen. */
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

/*
 * Why a port is in use, for the end of an error line: the earlier route of
 * this file that holds it (its socket among `fds`), or the process /proc
 * names, or a guess.
 */
static void in_use_by(const struct sockaddr *sa, bool tcp, const int *fds, char *const *owners,
                      int nfds, char *out, size_t cap)
{
    char who[160];
    unsigned uid = 0;
    unsigned long inode = port_inode(sa, tcp, &uid);

    for (int i = 0; inode && i < nfds; i++) {
        struct stat st;
        if (fstat(fds[i], &st) == 0 && (unsigned long)st.st_ino == inode) {
            snprintf(out, cap, " by route '%s': two routes cannot share a port", owners[i]);
            return;
        }
    }
    if (inode && inode_owner(inode, who, sizeof(who)))
        snprintf(out, cap, " by %s", who);
    else if (inode)
        snprintf(out, cap, " by a process of uid %u (not visible here)", uid);
    else
        snprintf(out, cap, " (another program, perhaps another slipgate, has it)");
}

/* ---- network: resolve, bind ---- */

/* Spectators: the spectator port resolves and can be bound (held like the listeners). */
static void check_spectate(struct pf *pf, uv_loop_t *loop, const struct sg_route_conf *r, int *fds,
                           char **owners, int *nfds)
{
    struct sockaddr_storage ss;
    char why[256], a[SG_ADDR_STRLEN], by[256];
    int line = r->spectate_line ? r->spectate_line : r->line, col = r->spectate_col, err;

    if (!r->spectate)
        return;
    if (sg_addr_resolve(loop, r->spectate, true, &ss, why, sizeof(why)) < 0) {
        tell(pf, SG_PREFLIGHT_FAIL, in_file(pf, line), line, col, "route '%s': spectate: %s",
             r->name, why);
        return;
    }
    sg_addr_format((struct sockaddr *)&ss, a, sizeof(a));
    err = sg_addr_try_bind((struct sockaddr *)&ss);
    if (err >= 0) {
        owners[*nfds] = r->name;
        fds[(*nfds)++] = err;
        tell(pf, SG_PREFLIGHT_OK, in_file(pf, line), line, col,
             "route '%s': spectator port %s can be bound", r->name, a);
        return;
    }
    by[0] = '\0';
    if (err == -EADDRINUSE)
        in_use_by((struct sockaddr *)&ss, false, fds, owners, *nfds, by, sizeof(by));
    tell(pf, SG_PREFLIGHT_FAIL, in_file(pf, line), line, col,
         "route '%s': cannot bind the spectator port %s: %s%s", r->name, a, strerror(-err), by);
}

static void check_net(struct pf *pf)
{
    const struct sg_conf *conf = pf->conf;
    struct sockaddr_storage ss;
    char why[256], a[SG_ADDR_STRLEN], by[256];
    int nfds = 0, err;
    /* a listener and a spectator port per route, at most */
    int *fds = calloc(2 * (size_t)conf->nroutes + 1, sizeof(*fds));
    char **owners = calloc(2 * (size_t)conf->nroutes + 1, sizeof(*owners));
    uv_loop_t loop;

    if (!fds || !owners || uv_loop_init(&loop) < 0) {
        free(fds);
        free(owners);
        tell(pf, SG_PREFLIGHT_FAIL, "slipgate", 0, 0, "cannot start an event loop to resolve names");
        return;
    }
    for (const struct sg_route_conf *r = conf->routes; r; r = r->next) {
        int sl = r->server_line ? r->server_line : r->line, sc = r->server_line ? r->server_col : 0;
        int ll = r->listen_line ? r->listen_line : r->line, lc = r->listen_line ? r->listen_col : 0;

        if (sg_addr_resolve(&loop, r->server, false, &ss, why, sizeof(why)) < 0)
            tell(pf, SG_PREFLIGHT_FAIL, in_file(pf, sl), sl, sc, "route '%s': server: %s", r->name,
                 why);
        else
            tell(pf, SG_PREFLIGHT_OK, in_file(pf, sl), sl, sc, "route '%s': server %s resolves to %s",
                 r->name, r->server, sg_addr_format((struct sockaddr *)&ss, a, sizeof(a)));
        if (sg_addr_resolve(&loop, r->listen, true, &ss, why, sizeof(why)) < 0) {
            tell(pf, SG_PREFLIGHT_FAIL, in_file(pf, ll), ll, lc, "route '%s': listen: %s", r->name,
                 why);
            continue;
        }
        /* Master servers: each resolves, in a family the listener can send to. */
        for (int i = 0; i < r->nmasters; i++) {
            const struct sg_master_conf *mc = &r->masters[i];
            struct sockaddr_storage ms;
            char ma[SG_ADDR_STRLEN];
            if (sg_master_resolve(mc->addr, ss.ss_family, &ms, why, sizeof(why)) < 0)
                tell(pf, SG_PREFLIGHT_FAIL, in_file(pf, mc->line), mc->line, mc->col,
                     "route '%s': %s", r->name, why);
            else
                tell(pf, SG_PREFLIGHT_OK, in_file(pf, mc->line), mc->line, mc->col,
                     "route '%s': master %s resolves to %s", r->name, mc->addr,
                     sg_addr_format((struct sockaddr *)&ms, ma, sizeof(ma)));
        }
        check_spectate(pf, &loop, r, fds, owners, &nfds);
        sg_addr_format((struct sockaddr *)&ss, a, sizeof(a));
        /* Held until every route is bound: two routes must not need one port. */
        err = sg_addr_try_bind((struct sockaddr *)&ss);
        if (err >= 0 && nfds < 2 * conf->nroutes) {
            owners[nfds] = r->name;
            fds[nfds++] = err;
            tell(pf, SG_PREFLIGHT_OK, in_file(pf, ll), ll, lc, "route '%s': listen %s can be bound",
                 r->name, a);
            continue;
        }
        if (err >= 0) {
            close(err);
            continue;
        }
        by[0] = '\0';
        if (err == -EADDRINUSE)
            in_use_by((struct sockaddr *)&ss, false, fds, owners, nfds, by, sizeof(by));
        tell(pf, SG_PREFLIGHT_FAIL, in_file(pf, ll), ll, lc, "route '%s': cannot listen on %s: %s%s",
             r->name, a, strerror(-err), by);
    }

    /* `http`: its TCP address, with SO_REUSEADDR as libmicrohttpd binds it. */
    if (conf->http) {
        const char *hf = in_file(pf, conf->http_line);
        int fd = -1, on = 1, off = 0;

        err = 0;
        if (sg_addr_resolve(&loop, conf->http, true, &ss, why, sizeof(why)) < 0) {
            tell(pf, SG_PREFLIGHT_FAIL, hf, conf->http_line, conf->http_col, "http: %s", why);
        } else {
            fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd < 0)
                err = -errno;
            if (fd >= 0 && ss.ss_family == AF_INET6)
                (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
            if (fd >= 0 &&
                (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) < 0 ||
                 bind(fd, (struct sockaddr *)&ss, sg_addr_len((struct sockaddr *)&ss)) < 0 ||
                 listen(fd, 1) < 0))
                err = -errno;
            if (fd >= 0)
                close(fd);
            sg_addr_format((struct sockaddr *)&ss, a, sizeof(a));
            by[0] = '\0';
            if (err == -EADDRINUSE)
                in_use_by((struct sockaddr *)&ss, true, NULL, NULL, 0, by, sizeof(by));
            if (err < 0)
                tell(pf, SG_PREFLIGHT_FAIL, hf, conf->http_line, conf->http_col,
                     "http: cannot listen on %s: %s%s", a, strerror(-err), by);
            else
                tell(pf, SG_PREFLIGHT_OK, hf, conf->http_line, conf->http_col,
                     "http: %s can be listened on", a);
        }
    }
    while (nfds > 0)
        close(fds[--nfds]);
    free(fds);
    free(owners);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
}

/* ---- files ---- */

/* Can a file be created in `dir`?  0 or a negative errno (the probe is removed). */
static int can_create_in(const char *dir)
{
    char path[PATH_MAX];

    if (snprintf(path, sizeof(path), "%s/.slipgate-check-XXXXXX", dir) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    int fd = mkstemp(path);
    if (fd < 0)
        return -errno;
    close(fd);
    unlink(path);
    return 0;
}

/* The directory `path` is in ("." for a bare name, "/" for "/x"), into `out`. */
static void parent_of(const char *path, char *out, size_t cap)
{
    size_t n;
    char *slash;

    snprintf(out, cap, "%s", path);
    n = strlen(out);
    while (n > 1 && out[n - 1] == '/')
        out[--n] = '\0';
    slash = strrchr(out, '/');
    if (!slash)
        snprintf(out, cap, ".");
    else
        slash[slash == out ? 1 : 0] = '\0';
}

/* A recording directory: a directory that can be written, or one the recorder can make. */
static void check_record_dir(struct pf *pf, const char *who, const char *dir, const char *file,
                             int line)
{
    char parent[PATH_MAX], freebuf[32], minbuf[32];
    const char *probe = dir;
    struct stat st;
    struct statvfs vfs;
    bool missing = false;
    int err;

    if (stat(dir, &st) != 0) {
        err = errno;
        parent_of(dir, parent, sizeof(parent));
        if (err == ENOTDIR) {
            tell(pf, SG_PREFLIGHT_FAIL, file, line, 0,
                 "%s %s cannot be made: a part of %s is not a directory", who, dir, parent);
            return;
        }
        if (err != ENOENT) {
            tell(pf, SG_PREFLIGHT_FAIL, file, line, 0, "%s %s: %s", who, dir, strerror(err));
            return;
        }
        /* The recorder makes the directory itself, one level deep. */
        if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode)) {
            tell(pf, SG_PREFLIGHT_FAIL, file, line, 0,
                 "%s %s is missing, and so is %s: the recorder makes only the last one", who, dir,
                 parent);
            return;
        }
        missing = true;
        probe = parent;
    } else if (!S_ISDIR(st.st_mode)) {
        tell(pf, SG_PREFLIGHT_FAIL, file, line, 0, "%s %s is not a directory", who, dir);
        return;
    }
    err = can_create_in(probe);
    if (err < 0) {
        if (missing)
            tell(pf, SG_PREFLIGHT_FAIL, file, line, 0,
                 "%s %s is missing and cannot be made in %s: %s", who, dir, probe, strerror(-err));
        else
            tell(pf, SG_PREFLIGHT_FAIL, file, line, 0, "%s %s is not writable: %s", who, dir,
                 strerror(-err));
        return;
    }
    if (pf->opts->min_free <= 0 || statvfs(probe, &vfs) != 0) {
        tell(pf, SG_PREFLIGHT_OK, file, line, 0,
             missing ? "%s %s does not exist yet: the first recording makes it" : "%s %s is writable",
             who, dir);
        return;
    }
    uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    uint64_t total = (uint64_t)vfs.f_blocks * vfs.f_frsize;
    double pct = total ? 100.0 * (double)avail / (double)total : 0;
    bool low_bytes = avail < (uint64_t)pf->opts->min_free, low_pct = pct < MIN_FREE_PERCENT;
    human(avail, freebuf, sizeof(freebuf));
    human((uint64_t)pf->opts->min_free, minbuf, sizeof(minbuf));
    if (low_bytes || low_pct)
        tell(pf, SG_PREFLIGHT_WARN, file, line, 0,
             "%s %s is nearly full: %s free%s%s, %.1f %% of its filesystem%s", who, dir, freebuf,
             low_bytes ? ", under " : "", low_bytes ? minbuf : "", pct,
             low_pct ? ", under 5 %" : "");
    else if (missing)
        tell(pf, SG_PREFLIGHT_WARN, file, line, 0,
             "%s %s does not exist yet (the first recording makes it in %s: %s free)", who, dir,
             probe, freebuf);
    else
        tell(pf, SG_PREFLIGHT_OK, file, line, 0, "%s %s is writable, %s free (%.1f %%)", who, dir,
             freebuf, pct);
}

/*
 * An output file (textlog `file`, pcap `file`, inspect `output`): written
 * where it is, or created in an existing directory.  "-" is standard
 * output; a name with %...% fields is checked for its directory only, when
 * that has none.
 */
static void check_out_file(struct pf *pf, const char *who, const char *path, const char *file,
                           int line)
{
    char parent[PATH_MAX];
    struct stat st;
    int err, fd;

    if (strcmp(path, "-") == 0)
        return;
    parent_of(path, parent, sizeof(parent));
    if (strchr(path, '%')) {
        if (strchr(parent, '%'))
            return;
    } else if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            tell(pf, SG_PREFLIGHT_FAIL, file, line, 0, "%s %s is a directory", who, path);
            return;
        }
        if (!S_ISREG(st.st_mode)) { /* a FIFO, /dev/null: opened as it is */
            tell(pf, SG_PREFLIGHT_OK, file, line, 0, "%s %s exists (not a regular file)", who,
                 path);
            return;
        }
        /* Neither created nor truncated: only opened for writing. */
        fd = open(path, O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) {
            tell(pf, SG_PREFLIGHT_FAIL, file, line, 0, "%s %s cannot be written: %s", who, path,
                 strerror(errno));
            return;
        }
        close(fd);
        tell(pf, SG_PREFLIGHT_OK, file, line, 0, "%s %s can be written", who, path);
        return;
    } else if (errno != ENOENT) {
        tell(pf, SG_PREFLIGHT_FAIL, file, line, 0, "%s %s: %s", who, path, strerror(errno));
        return;
    }
    /* To be created: its directory must exist (nothing makes it) and be writable. */
    if (stat(parent, &st) != 0) {
        tell(pf, SG_PREFLIGHT_FAIL, file, line, 0, "%s %s: its directory %s: %s", who, path,
             parent, strerror(errno));
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        tell(pf, SG_PREFLIGHT_FAIL, file, line, 0, "%s %s: %s is not a directory", who, path,
             parent);
        return;
    }
    err = can_create_in(parent);
    if (err < 0)
        tell(pf, SG_PREFLIGHT_FAIL, file, line, 0, "%s %s cannot be created in %s: %s", who, path,
             parent, strerror(-err));
    else
        tell(pf, SG_PREFLIGHT_OK, file, line, 0, "%s %s can be created in %s", who, path, parent);
}

/* Every built-in filter's path directive of a route: recording directories and output files. */
static void check_filter_paths(struct pf *pf, const struct sg_route_conf *r)
{
    char who[200];

    for (const struct sg_filter_conf *fc = r->filters ? r->filters->head : NULL; fc;
         fc = fc->next) {
        if (fc->plugin) /* a plugin's paths mean what the plugin says */
            continue;
        for (const struct sg_conf_directive *d = fc->impl->directives; d && d->name; d++) {
            const char *file = fc->line && fc->file && strcmp(fc->file, "command line") != 0
                                   ? fc->file
                                   : NULL;
            char *path;
            if (d->type != SG_CONF_PATH)
                continue;
            memcpy(&path, fc->conf + d->offset, sizeof(path));
            if (!path)
                continue;
            bool dir = strcmp(d->name, "directory") == 0;
            snprintf(who, sizeof(who), "route '%s': %s %s", r->name, fc->impl->name,
                     dir ? "directory" : d->name);
            if (dir)
                check_record_dir(pf, who, path, file, fc->line);
            else
                check_out_file(pf, who, path, file, fc->line);
        }
    }
}

/* A signing key: a regular file its owner alone can read (and this user can). */
static void check_key(struct pf *pf, const char *path, const char *file, int line)
{
    struct stat st;
    int fd;

    if (stat(path, &st) != 0) {
        tell(pf, SG_PREFLIGHT_FAIL, file, line, 0, "sign_key %s: %s", path, strerror(errno));
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        tell(pf, SG_PREFLIGHT_FAIL, file, line, 0, "sign_key %s is not a regular file", path);
        return;
    }
    if (st.st_mode & 077) {
        tell(pf, SG_PREFLIGHT_FAIL, file, line, 0,
             "sign_key %s is readable or writable by group or others (mode %04o): chmod 600", path,
             (unsigned)(st.st_mode & 07777));
        return;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        tell(pf, SG_PREFLIGHT_FAIL, file, line, 0, "sign_key %s cannot be read: %s", path,
             strerror(errno));
        return;
    }
    close(fd);
    if (st.st_uid != geteuid())
        tell(pf, SG_PREFLIGHT_WARN, file, line, 0,
             "sign_key %s (mode %04o) belongs to uid %u, not to uid %u running this check: "
             "slipgate must run as its owner",
             path, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, (unsigned)geteuid());
    else
        tell(pf, SG_PREFLIGHT_OK, file, line, 0, "sign_key %s: mode %04o, only its owner can read it",
             path, (unsigned)(st.st_mode & 07777));
}

/* The stats file: --stats, else stats_file. */
static void check_stats(struct pf *pf)
{
    const struct sg_conf *conf = pf->conf;
    char why[512];

    if (pf->opts->stats) {
        if (sg_stats_check_path(pf->opts->stats, why, sizeof(why)) < 0)
            tell(pf, SG_PREFLIGHT_FAIL, "--stats", 0, 0, "%s", why);
    } else if (conf->stats_file) {
        const char *f = in_file(pf, conf->stats_file_line);
        if (sg_stats_check_path(conf->stats_file, why, sizeof(why)) < 0)
            tell(pf, SG_PREFLIGHT_FAIL, f, conf->stats_file_line, 0, "stats_file: %s", why);
        else
            tell(pf, SG_PREFLIGHT_OK, f, conf->stats_file_line, 0, "stats_file %s can be written",
                 conf->stats_file);
    }
}

static void check_files(struct pf *pf)
{
    const struct sg_conf *conf = pf->conf;

    for (const struct sg_route_conf *r = conf->routes; r; r = r->next)
        check_filter_paths(pf, r);
    for (const struct sg_route_conf *r = conf->routes; r; r = r->next) {
        bool seen = false;
        for (const struct sg_route_conf *o = conf->routes; o != r && !seen; o = o->next)
            seen = o->sign_key && r->sign_key && strcmp(o->sign_key, r->sign_key) == 0;
        if (!r->sign_key || seen)
            continue;
        int line = r->sign_key_line ? r->sign_key_line : conf->sign_key_line;
        check_key(pf, r->sign_key, in_file(pf, line), line);
    }
}

int sg_preflight(const struct sg_conf *conf, const struct sg_preflight_opts *opts,
                 sg_preflight_say say, void *ctx)
{
    struct pf pf = {.conf = conf, .opts = opts, .say = say, .ctx = ctx};

    if (opts->what & SG_PREFLIGHT_NET)
        check_net(&pf);
    if (opts->what & SG_PREFLIGHT_STATS)
        check_stats(&pf);
    if (opts->what & SG_PREFLIGHT_FILES)
        check_files(&pf);
    return pf.failed;
}
