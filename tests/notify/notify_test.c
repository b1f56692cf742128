/*
 * proxy/notify.c in-process: the test binds the manager's socket, sets
 * the environment a service manager would, and reads the datagrams.
 *   notify_test CASE
 */
#include "proxy/notify.h"
#include "tests/unit.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static char dir[] = "/tmp/sg-notify-test-XXXXXX";
static char sock_path[256];

/* The manager's socket at `name` ("/path" or "@abstract"), non-blocking reads. */
static int manager(const char *name)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(name);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    if (fd < 0 || len >= sizeof(sa.sun_path))
        abort();
    memcpy(sa.sun_path, name, len);
    if (name[0] == '@')
        sa.sun_path[0] = '\0';
    if (bind(fd, (struct sockaddr *)&sa,
             (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (name[0] == '/'))) < 0)
        abort();
    return fd;
}

/* The next datagram within `ms`, NUL-terminated, or "" on none. */
static const char *next(int fd, int ms)
{
    static char buf[2048];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    ssize_t n;

    buf[0] = '\0';
    if (poll(&p, 1, ms) == 1 && (n = recv(fd, buf, sizeof(buf) - 1, 0)) >= 0)
        buf[n] = '\0';
    return buf;
}

static void setup(void)
{
    if (!mkdtemp(dir))
        abort();
    snprintf(sock_path, sizeof(sock_path), "%s/notify", dir);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    unsetenv("RUNTIME_DIRECTORY");
}

static void teardown(void)
{
    char p[300];

    snprintf(p, sizeof(p), "%s/reload-status", dir);
    unlink(p);
    unlink(sock_path);
    rmdir(dir);
}

/* No NOTIFY_SOCKET: inert, every call a no-op that succeeds. */
static void case_none(void)
{
    struct sg_notify n;

    CHECK_EQ(sg_notify_init(&n, NULL, 0), 0);
    CHECK(!sg_notify_active(&n));
    CHECK_EQ(sg_notify_send(&n, "READY=1"), 0);
    CHECK_EQ(sg_notify_outcome(&n, "started", NULL), 0);
    sg_notify_finish(&n);
    sg_notify_finish(&n); /* twice: still fine */
}

static void case_path(void)
{
    struct sg_notify n;
    int m = manager(sock_path);

    setenv("NOTIFY_SOCKET", sock_path, 1);
    CHECK_EQ(sg_notify_init(&n, NULL, 0), 1);
    CHECK_EQ(sg_notify_send(&n, "READY=1\nSTATUS=%d routes", 2), 0);
    CHECKF(strcmp(next(m, 1000), "READY=1\nSTATUS=2 routes") == 0, "got '%s'", next(m, 0));
    CHECK_EQ(sg_notify_reloading(&n, "STATUS=x"), 0);
    {
        const char *d = next(m, 1000);
        CHECKF(strncmp(d, "RELOADING=1\nMONOTONIC_USEC=", 27) == 0 && strstr(d, "\nSTATUS=x"),
               "got '%s'", d);
    }
    sg_notify_finish(&n);
    close(m);
}

static void case_abstract(void)
{
    struct sg_notify n;
    char name[64];
    int m;

    snprintf(name, sizeof(name), "@sg-notify-test-%d", (int)getpid());
    m = manager(name);
    setenv("NOTIFY_SOCKET", name, 1);
    CHECK_EQ(sg_notify_init(&n, NULL, 0), 1);
    CHECK_EQ(sg_notify_send(&n, "READY=1"), 0);
    CHECKF(strcmp(next(m, 1000), "READY=1") == 0, "got '%s'", next(m, 0));
    sg_notify_finish(&n);
    close(m);
}

/* Addresses that are not AF_UNIX paths: refused with a reason, inert. */
static void case_bad_address(void)
{
    static const char *const bad[] = {"vsock:2:1234", "relative/path", "@", "/"};
    char why[200], longp[200];
    struct sg_notify n;

    for (size_t i = 0; i < UNIT_COUNT(bad); i++) {
        setenv("NOTIFY_SOCKET", bad[i], 1);
        CHECKF(sg_notify_init(&n, why, sizeof(why)) == -EAFNOSUPPORT, "%s", bad[i]);
        CHECKF(strstr(why, bad[i]) != NULL, "why: %s", why);
        CHECK(!sg_notify_active(&n));
        CHECK_EQ(sg_notify_send(&n, "READY=1"), 0);
        sg_notify_finish(&n);
    }
    memset(longp, 'a', sizeof(longp) - 1);
    longp[0] = '/';
    longp[sizeof(longp) - 1] = '\0';
    setenv("NOTIFY_SOCKET", longp, 1);
    CHECK_EQ(sg_notify_init(&n, why, sizeof(why)), -EAFNOSUPPORT);
    sg_notify_finish(&n);
}

static void case_watchdog_env(void)
{
    struct sg_notify n;
    char pid[32];
    int m = manager(sock_path);

    setenv("NOTIFY_SOCKET", sock_path, 1);
    setenv("WATCHDOG_USEC", "30000000", 1);
    sg_notify_init(&n, NULL, 0);
    CHECK_EQ(n.watchdog_usec, 30000000);
    sg_notify_finish(&n);
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    setenv("WATCHDOG_PID", pid, 1);
    sg_notify_init(&n, NULL, 0);
    CHECK_EQ(n.watchdog_usec, 30000000);
    sg_notify_finish(&n);
    setenv("WATCHDOG_PID", "1", 1); /* another process's */
    sg_notify_init(&n, NULL, 0);
    CHECK_EQ(n.watchdog_usec, 0);
    sg_notify_finish(&n);
    unsetenv("WATCHDOG_PID");
    static const char *const junk[] = {"", "-5", "12x", "99999999999999999999999"};
    for (size_t i = 0; i < UNIT_COUNT(junk); i++) {
        setenv("WATCHDOG_USEC", junk[i], 1);
        sg_notify_init(&n, NULL, 0);
        CHECKF(n.watchdog_usec == 0, "WATCHDOG_USEC='%s'", junk[i]);
        sg_notify_finish(&n);
    }
    close(m);
}

/* A long STATUS= is cut to one datagram, not refused. */
static void case_long_status(void)
{
    struct sg_notify n;
    char big[3000];
    int m = manager(sock_path);

    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    setenv("NOTIFY_SOCKET", sock_path, 1);
    sg_notify_init(&n, NULL, 0);
    CHECK_EQ(sg_notify_send(&n, "STATUS=%s", big), 0);
    {
        const char *d = next(m, 1000);
        CHECKF(strncmp(d, "STATUS=xxx", 10) == 0 && strlen(d) == 1023, "len %zu", strlen(d));
    }
    sg_notify_finish(&n);
    close(m);
}

static void case_outcome(void)
{
    struct sg_notify n;
    char path[300], *text;
    size_t len;

    setenv("RUNTIME_DIRECTORY", dir, 1);
    sg_notify_init(&n, NULL, 0);
    snprintf(path, sizeof(path), "%s/reload-status", dir);
    CHECK_EQ(sg_notify_outcome(&n, "started", NULL), 0);
    text = (char *)unit_slurp(path, &len);
    CHECKF(text && strcmp(text, "0 started\n") == 0, "'%s'", text ? text : "(none)");
    free(text);
    CHECK_EQ(sg_notify_outcome(&n, "refused", "f.conf:3:1: error: bad"), 0);
    text = (char *)unit_slurp(path, &len);
    CHECKF(text && strcmp(text, "1 refused: f.conf:3:1: error: bad\n") == 0, "'%s'",
           text ? text : "(none)");
    free(text);
    sg_notify_finish(&n);
    /* Several directories: the first. */
    {
        char two[600];
        snprintf(two, sizeof(two), "%s:/nonexistent", dir);
        setenv("RUNTIME_DIRECTORY", two, 1);
        sg_notify_init(&n, NULL, 0);
        CHECK(strcmp(n.outcome_path, path) == 0);
        sg_notify_finish(&n);
    }
}

static void on_stop_timer(uv_timer_t *t)
{
    uv_stop(t->loop);
}

static const char *status_text = "1 route, 0 sessions";

static void status_fill(void *ctx, char *buf, size_t len)
{
    (void)ctx;
    snprintf(buf, len, "%s", status_text);
}

/* WATCHDOG_USEC=100000: pings every 50 ms from the loop; STATUS= sent once
 * per change; the timer does not keep the loop alive. */
static void case_timer(void)
{
    struct sg_notify n;
    uv_loop_t loop;
    uv_timer_t stop;
    int m = manager(sock_path), pings = 0, statuses = 0;

    setenv("NOTIFY_SOCKET", sock_path, 1);
    setenv("WATCHDOG_USEC", "100000", 1);
    CHECK_EQ(uv_loop_init(&loop), 0);
    CHECK_EQ(sg_notify_init(&n, NULL, 0), 1);
    CHECK_EQ(sg_notify_timer_start(&n, &loop, status_fill, NULL), 0);
    /* Alone, the unreferenced timer lets the loop end at once. */
    CHECK_EQ(uv_run(&loop, UV_RUN_NOWAIT), 0);
    uv_timer_init(&loop, &stop);
    uv_timer_start(&stop, on_stop_timer, 330, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    for (const char *d; *(d = next(m, 0));) {
        pings += strcmp(d, "WATCHDOG=1") == 0;
        statuses += strcmp(d, "STATUS=1 route, 0 sessions") == 0;
    }
    CHECKF(pings >= 3 && pings <= 7, "%d pings in 330 ms at 50 ms", pings);
    CHECK_EQ(statuses, 1);
    uv_close((uv_handle_t *)&stop, NULL);
    uv_close((uv_handle_t *)&n.timer, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    sg_notify_finish(&n);
    close(m);
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"none", case_none},
        {"path", case_path},
        {"abstract", case_abstract},
        {"bad_address", case_bad_address},
        {"watchdog_env", case_watchdog_env},
        {"long_status", case_long_status},
        {"outcome", case_outcome},
        {"timer", case_timer},
    };
    return unit_main(argc, argv, cases, UNIT_COUNT(cases), setup, teardown);
}
