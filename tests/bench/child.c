/*
 * Child processes (the relays under test), free ports and memory figures.
 *
 * Every child is registered here from its fork to its reaping, so that a
 * signal or an early exit of the bench can end it by pid; a child also gets
 * SIGKILL from the kernel if the bench itself dies (PR_SET_PDEATHSIG).
 * Children are never reaped behind the caller's back: sg_bench_child_running
 * only peeks (WNOWAIT), so a pid cannot be reused while it is registered.
 */
#include "tests/bench/bench.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CHILDREN 8

static volatile sig_atomic_t children[MAX_CHILDREN];

uint64_t sg_bench_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(long ns)
{
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};

    nanosleep(&ts, NULL); /* async-signal-safe */
}

static void unregister(pid_t pid)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (children[i] == pid)
            children[i] = 0;
}

/* ---- starting ---- */

static void child_fail(const char *what)
{
    /* Only async-signal-safe calls between fork and exec. */
    ssize_t r = write(2, what, strlen(what));

    (void)r;
    _exit(127);
}

void sg_bench_child_cpus(pid_t pid, struct sg_bench_cpus *out)
{
    cpu_set_t set;

    out->n = 0;
    if (sched_getaffinity(pid, sizeof(set), &set) < 0)
        return;
    for (int c = 0; c < CPU_SETSIZE && out->n < SG_BENCH_MAX_CPUS; c++)
        if (CPU_ISSET(c, &set))
            out->cpu[out->n++] = c;
}

int sg_bench_child_spawn(char *const argv[], const char *log_path, const struct sg_bench_cpus *cpus,
                         pid_t *out)
{
    sigset_t block, old;
    int slot = -1, logfd, nullfd, err = 0;
    pid_t parent = getpid(), pid;

    for (int i = 0; i < MAX_CHILDREN && slot < 0; i++)
        if (children[i] == 0)
            slot = i;
    if (slot < 0)
        return -EAGAIN;

    logfd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (logfd < 0)
        return -errno;
    nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nullfd < 0) {
        err = -errno;
        goto err_log;
    }

    /* No signal between the fork and the registration (the sink thread
     * blocks every signal, so they come to this thread). */
    sigfillset(&block);
    sigprocmask(SIG_BLOCK, &block, &old);
    pid = fork();
    if (pid == 0) {
        sigset_t none;

        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
            child_fail("slipgate-bench: child: parent gone\n");
        if (dup2(nullfd, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0)
            child_fail("slipgate-bench: child: dup2 failed\n");
        if (cpus && cpus->n > 0) {
            cpu_set_t set;

            CPU_ZERO(&set);
            for (unsigned i = 0; i < cpus->n; i++)
                CPU_SET(cpus->cpu[i], &set);
            if (sched_setaffinity(0, sizeof(set), &set) < 0)
                child_fail("slipgate-bench: child: cannot pin to its CPUs\n");
        }
        close_range(3, ~0u, 0);
        execv(argv[0], argv);
        child_fail("slipgate-bench: child: exec failed\n");
    }
    if (pid < 0) {
        err = -errno;
    } else {
        children[slot] = pid;
        *out = pid;
    }
    sigprocmask(SIG_SETMASK, &old, NULL);

    close(nullfd);
err_log:
    close(logfd);
    return err;
}

/* ---- watching ---- */

bool sg_bench_child_running(pid_t pid, int *status)
{
    siginfo_t si;

    memset(&si, 0, sizeof(si));
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
        return false;
    if (si.si_pid == 0)
        return true;
    if (status)
        *status = si.si_code == CLD_EXITED ? (si.si_status & 0xff) << 8 : si.si_status & 0x7f;
    return false;
}

/* Is some socket bound to 127.0.0.1:port (UDP)?  /proc/net/udp is per
 * network namespace, which the child shares. */
static bool udp_bound(uint16_t port)
{
    unsigned want_addr = htonl(INADDR_LOOPBACK), addr, p;
    char line[512];
    bool found = false;
    FILE *f = fopen("/proc/net/udp", "re");

    if (!f)
        return false;
    while (!found && fgets(line, sizeof(line), f))
        if (sscanf(line, " %*u: %8X:%4X", &addr, &p) == 2 && p == port && addr == want_addr)
            found = true;
    fclose(f);
    return found;
}

int sg_bench_child_wait_udp(pid_t pid, uint16_t port, double timeout_s, int *status)
{
    uint64_t deadline = sg_bench_now_ns() + (uint64_t)(timeout_s * 1e9);

    do {
        if (udp_bound(port))
            return 0;
        if (!sg_bench_child_running(pid, status))
            return -ECHILD;
        sleep_ns(5000000);
    } while (sg_bench_now_ns() < deadline);
    return -ETIMEDOUT;
}

/* ---- stopping ---- */

/* Poll for the end of `pid` during `grace_ns`; returns its status or -1. */
static int reap_within(pid_t pid, long grace_ns)
{
    int status;

    for (long waited = 0; waited <= grace_ns; waited += 5000000) {
        pid_t r = waitpid(pid, &status, WNOHANG);

        if (r == pid)
            return status;
        if (r < 0 && errno != EINTR)
            return -2; /* not our child (any more) */
        sleep_ns(5000000);
    }
    return -1;
}

int sg_bench_child_stop(pid_t pid, double grace_s)
{
    int status;

    if (pid <= 0)
        return -EINVAL;
    kill(pid, SIGTERM);
    status = reap_within(pid, (long)(grace_s * 1e9));
    if (status == -1) {
        kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0) {
            if (errno != EINTR) {
                status = -ECHILD;
                break;
            }
        }
    } else if (status == -2) {
        status = -ECHILD;
    }
    unregister(pid);
    return status;
}

void sg_bench_child_kill_all(void)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (children[i] > 0)
            kill(children[i], SIGTERM);
    for (int i = 0; i < MAX_CHILDREN; i++) {
        pid_t pid = children[i];

        if (pid <= 0)
            continue;
        if (reap_within(pid, 1000000000L) == -1) {
            kill(pid, SIGKILL);
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        }
        children[i] = 0;
    }
}

/* ---- CPU time, memory and ports ---- */

/* The first field of /proc/PID/task/TID/schedstat: nanoseconds on a CPU. */
static int64_t task_cpu_ns(pid_t pid, const char *tid)
{
    char path[128];
    unsigned long long ns;
    int64_t ret = -ENOENT;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%ld/task/%.32s/schedstat", (long)pid, tid);
    f = fopen(path, "re");
    if (!f)
        return -errno;
    if (fscanf(f, "%llu", &ns) == 1)
        ret = (int64_t)ns;
    fclose(f);
    return ret;
}

/* /proc/PID/stat into buf; the fields after the command name (the part
 * after its last ')', since the name may hold spaces and parentheses),
 * or NULL with errno set. */
static const char *stat_fields(pid_t pid, char *buf, size_t cap)
{
    char path[64], *p;
    size_t n;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    f = fopen(path, "re");
    if (!f)
        return NULL;
    n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    if (!p)
        errno = EINVAL;
    return p ? p + 1 : NULL;
}

/* utime + stime from /proc/PID/stat, at clock-tick resolution. */
static int64_t stat_cpu_ns(pid_t pid)
{
    char buf[1024];
    const char *p = stat_fields(pid, buf, sizeof(buf));
    unsigned long long utime, stime;
    long tck = sysconf(_SC_CLK_TCK);

    if (!p)
        return -errno;
    /* state, then fields 4..; utime is 14. */
    if (tck <= 0 ||
        sscanf(p, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
        return -EINVAL;
    return (int64_t)((utime + stime) * (1000000000ull / (unsigned long long)tck));
}

int64_t sg_bench_child_cpu_ns(pid_t pid)
{
    char path[64];
    int64_t sum = 0;
    struct dirent *d;
    DIR *dir;

    snprintf(path, sizeof(path), "/proc/%ld/task", (long)pid);
    dir = opendir(path);
    if (!dir)
        return -errno;
    for (int i = 0; i < 4096 && (d = readdir(dir)); i++) {
        int64_t ns;

        if (d->d_name[0] == '.')
            continue;
        ns = task_cpu_ns(pid, d->d_name);
        if (ns < 0) {
            sum = -1;
            break;
        }
        sum += ns;
    }
    closedir(dir);
    return sum >= 0 ? sum : stat_cpu_ns(pid);
}

int64_t sg_bench_sys_busy_ns(void)
{
    unsigned long long v[8] = {0};
    long tck = sysconf(_SC_CLK_TCK);
    FILE *f = fopen("/proc/stat", "re");
    int n;

    if (!f)
        return -errno;
    /* cpu  user nice system idle iowait irq softirq steal ... */
    n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6], &v[7]);
    fclose(f);
    if (n < 7 || tck <= 0)
        return -EINVAL;
    return (int64_t)((v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) *
                     (1000000000ull / (unsigned long long)tck));
}

/* ---- memory and ports ---- */

long sg_bench_child_rss_kib(pid_t pid)
{
    char path[64], line[256];
    long kib = -ENOENT;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
    f = fopen(path, "re");
    if (!f)
        return -errno;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

long long sg_bench_child_minflt(pid_t pid)
{
    char buf[1024];
    const char *p = stat_fields(pid, buf, sizeof(buf));
    unsigned long long minflt;

    if (!p)
        return -errno;
    /* state ppid pgrp session tty_nr tpgid flags minflt */
    if (sscanf(p, " %*c %*d %*d %*d %*d %*d %*u %llu", &minflt) != 1)
        return -EINVAL;
    return (long long)minflt;
}

int sg_bench_free_udp_port(void)
{
    struct sockaddr_in sin = {.sin_family = AF_INET};
    socklen_t len = sizeof(sin);
    int fd, port;

    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
        getsockname(fd, (struct sockaddr *)&sin, &len) < 0) {
        port = -errno;
    } else {
        port = ntohs(sin.sin_port);
    }
    close(fd);
    return port;
}
