/*
 * sd_notify's datagram protocol, from its documentation (man sd_notify,
 * "Notes"): the manager's AF_UNIX SOCK_DGRAM socket is $NOTIFY_SOCKET, a
 * path or, with a leading '@', a name in the abstract namespace (the '@'
 * becomes a NUL byte); each notification is one datagram of newline-joined
 * KEY=VALUE assignments; the manager learns the sender from the socket's
 * credentials.  $WATCHDOG_USEC asks for WATCHDOG=1 within that many
 * microseconds; $WATCHDOG_PID, when set, says which process it is for.
 * See notify.h.
 */
#include "proxy/notify.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A non-negative decimal number that fits, else -1. */
static int64_t env_number(const char *name)
{
    const char *s = getenv(name);
    char *end;
    unsigned long long v;

    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || *end != '\0' || v > (unsigned long long)INT64_MAX)
        return -1;
    return (int64_t)v;
}

int sg_notify_init(struct sg_notify *n, char *why, size_t whylen)
{
    const char *path = getenv("NOTIFY_SOCKET");
    int64_t usec, pid;
    size_t len;

    memset(n, 0, sizeof(*n));
    n->fd = -1;
    if (why && whylen)
        why[0] = '\0';

    /* RuntimeDirectory=: the first of its directories. */
    {
        const char *rd = getenv("RUNTIME_DIRECTORY");
        size_t dl = rd ? strcspn(rd, ":") : 0;
        if (rd && rd[0] == '/' && dl + sizeof("/reload-status") <= sizeof(n->outcome_path))
            snprintf(n->outcome_path, sizeof(n->outcome_path), "%.*s/reload-status", (int)dl, rd);
    }
    if (!path || !*path)
        return 0;

    /* The address: "/path" or "@abstract" (vsock: addresses are not for us). */
    len = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || len < 2 || len > sizeof(n->addr.sun_path)) {
        if (why && whylen)
            snprintf(why, whylen, "NOTIFY_SOCKET '%s' is not an AF_UNIX socket path", path);
        return -EAFNOSUPPORT;
    }
    n->addr.sun_family = AF_UNIX;
    memcpy(n->addr.sun_path, path, len);
    if (path[0] == '@')
        n->addr.sun_path[0] = '\0';
    /* A path's length counts its NUL where it fits; an abstract name's does not. */
    n->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
                             (path[0] == '/' && len < sizeof(n->addr.sun_path) ? 1 : 0));

    n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (n->fd < 0) {
        int err = -errno;
        if (why && whylen)
            snprintf(why, whylen, "NOTIFY_SOCKET: socket: %s", strerror(-err));
        return err;
    }
    n->on = true;

    /* The watchdog, when it is this process's. */
    usec = env_number("WATCHDOG_USEC");
    pid = env_number("WATCHDOG_PID");
    if (usec > 0 && (pid < 0 || pid == (int64_t)getpid()))
        n->watchdog_usec = (uint64_t)usec;
    return 1;
}

void sg_notify_finish(struct sg_notify *n)
{
    if (n->on)
        close(n->fd);
    n->on = false;
    n->fd = -1;
}

static int send_text(struct sg_notify *n, const char *text, size_t len)
{
    if (!n->on)
        return 0;
    if (sendto(n->fd, text, len, MSG_NOSIGNAL, (const struct sockaddr *)&n->addr, n->addrlen) < 0)
        return -errno;
    return 0;
}

static int vsend(struct sg_notify *n, const char *head, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static int vsend(struct sg_notify *n, const char *head, const char *fmt, va_list ap)
{
    char msg[1024];
    int k = 0, m;

    if (!n->on)
        return 0;
    if (head)
        k = snprintf(msg, sizeof(msg), "%s", head);
    m = vsnprintf(msg + k, sizeof(msg) - (size_t)k, fmt, ap);
    if (m < 0)
        return -EINVAL;
    if ((size_t)k + (size_t)m >= sizeof(msg))
        m = (int)(sizeof(msg) - 1 - (size_t)k); /* cut: a status line is only shown */
    return send_text(n, msg, (size_t)k + (size_t)m);
}

int sg_notify_send(struct sg_notify *n, const char *fmt, ...)
{
    va_list ap;
    int err;

    va_start(ap, fmt);
    err = vsend(n, NULL, fmt, ap);
    va_end(ap);
    return err;
}

int sg_notify_reloading(struct sg_notify *n, const char *fmt, ...)
{
    struct timespec ts;
    char head[80];
    va_list ap;
    int err;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(head, sizeof(head), "RELOADING=1\nMONOTONIC_USEC=%llu\n",
             (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000);
    va_start(ap, fmt);
    err = vsend(n, head, fmt, ap);
    va_end(ap);
    return err;
}

void sg_notify_status(struct sg_notify *n)
{
    char line[sizeof(n->last_status)];

    if (!n->on || !n->status)
        return;
    line[0] = '\0';
    n->status(n->status_ctx, line, sizeof(line));
    if (strcmp(line, n->last_status) == 0)
        return;
    if (sg_notify_send(n, "STATUS=%s", line) == 0)
        memcpy(n->last_status, line, sizeof(line));
}

static void on_tick(uv_timer_t *t)
{
    struct sg_notify *n = t->data;

    if (n->watchdog_usec)
        send_text(n, "WATCHDOG=1", 10);
    sg_notify_status(n);
}

int sg_notify_timer_start(struct sg_notify *n, uv_loop_t *loop,
                          void (*status)(void *ctx, char *buf, size_t len), void *ctx)
{
    uint64_t ms;
    int err;

    n->status = status;
    n->status_ctx = ctx;
    if (!n->on)
        return 0;
    /* Half the watchdog's interval (at least 1 ms), else the status refresh. */
    ms = n->watchdog_usec ? n->watchdog_usec / 2000 : SG_NOTIFY_STATUS_MS;
    if (ms == 0)
        ms = 1;
    if (!n->timer_open) {
        if ((err = uv_timer_init(loop, &n->timer)) < 0)
            return err;
        n->timer.data = n;
        n->timer_open = true;
        uv_unref((uv_handle_t *)&n->timer);
    }
    return uv_timer_start(&n->timer, on_tick, ms, ms);
}

int sg_notify_outcome(struct sg_notify *n, const char *what, const char *why)
{
    char tmp[sizeof(n->outcome_path) + 8], line[600];
    int fd, len, err = 0;

    if (!n->outcome_path[0])
        return 0;
    len = snprintf(line, sizeof(line), "%llu %s%s%s\n", (unsigned long long)n->generation++, what,
                   why ? ": " : "", why ? why : "");
    if (len < 0 || (size_t)len >= sizeof(line))
        len = (int)sizeof(line) - 1, line[len - 1] = '\n';
    /* Whole or not at all: a new file renamed over the old one. */
    snprintf(tmp, sizeof(tmp), "%s.new", n->outcome_path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    if (write(fd, line, (size_t)len) != len)
        err = errno ? -errno : -EIO;
    if (close(fd) < 0 && err == 0)
        err = -errno;
    if (err == 0 && rename(tmp, n->outcome_path) < 0)
        err = -errno;
    if (err < 0)
        unlink(tmp);
    return err;
}
