/*
 * The service manager's notification protocol (systemd's sd_notify,
 * man sd_notify): readiness, reloads, a status line and watchdog pings as
 * one datagram each to the AF_UNIX socket named by $NOTIFY_SOCKET ("/path"
 * or "@abstract").  Written here rather than linked from libsystemd: the
 * protocol is small and documented as stable, and slipgate then needs no
 * library (and no systemd) to build, run or test it.  Without
 * $NOTIFY_SOCKET every call is a no-op.
 *
 * Caller-owned; one per process (the app's), the way the environment is.
 */
#ifndef SG_PROXY_NOTIFY_H
#define SG_PROXY_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <uv.h>

struct sg_notify {
    bool on; /* there is a service manager to tell */
    int fd;
    struct sockaddr_un addr;
    socklen_t addrlen;
    uint64_t watchdog_usec; /* WATCHDOG_USEC for this process, else 0 */
    uv_timer_t timer;       /* the watchdog ping and the status line's refresh */
    bool timer_open;
    /* The status line, asked for at each tick (the app's); NULL: none. */
    void (*status)(void *ctx, char *buf, size_t len);
    void *status_ctx;
    char last_status[512]; /* the STATUS= sent last */
    /* $RUNTIME_DIRECTORY/reload-status (systemd's RuntimeDirectory=), or "":
     * what the units' ExecReload helper waits for (sg_notify_outcome). */
    char outcome_path[512];
    uint64_t generation; /* outcomes written */
};

/*
 * Read $NOTIFY_SOCKET, $WATCHDOG_USEC and $WATCHDOG_PID and open the
 * socket: 1 when there is a manager to tell, 0 when there is none, negative
 * errno when $NOTIFY_SOCKET is set but unusable (the struct is then inert;
 * `why` says what, for the log).
 */
int sg_notify_init(struct sg_notify *n, char *why, size_t whylen);
/* Close the socket.  Accepts a zeroed struct (and one whose timer the loop
 * closed: uv_close is the loop owner's). */
void sg_notify_finish(struct sg_notify *n);

static inline bool sg_notify_active(const struct sg_notify *n)
{
    return n->on;
}

/*
 * One notification, "KEY=VALUE" lines joined by '\n' (printf-like).  0, or
 * negative errno (the datagram was not sent; the socket is non-blocking, so
 * a full manager queue is -EAGAIN, never a wait).
 */
int sg_notify_send(struct sg_notify *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* RELOADING=1 with MONOTONIC_USEC=<CLOCK_MONOTONIC now> (systemd 253's
 * notify-reload wants the clock; older ones ignore it), then `fmt`'s lines. */
int sg_notify_reloading(struct sg_notify *n, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* How often the status line is refreshed when there is no watchdog. */
#define SG_NOTIFY_STATUS_MS 10000

/*
 * From `loop`, every watchdog_usec / 2 (else SG_NOTIFY_STATUS_MS): ping
 * WATCHDOG=1 when there is a watchdog, and send STATUS= from `status`
 * (called with a buffer to fill; NULL: none) when it changed.  The timer
 * does not keep the loop alive; the loop's owner closes it with the loop's
 * other handles.  0 or negative errno; a no-op without a manager.
 */
int sg_notify_timer_start(struct sg_notify *n, uv_loop_t *loop,
                          void (*status)(void *ctx, char *buf, size_t len), void *ctx);

/*
 * With $RUNTIME_DIRECTORY set (its first directory), replace
 * DIR/reload-status with one line, "GENERATION started", "GENERATION
 * applied" or "GENERATION refused: WHY" (GENERATION counts up from 0 at
 * the start), so that a reload helper (dist/systemd/slipgate-reload) that
 * sent SIGHUP learns the outcome and fails `systemctl reload` on a refusal:
 * systemd 252 has no notification that fails a reload.  0, negative errno,
 * or 0 without the directory.  `why` is borrowed for the call.
 */
int sg_notify_outcome(struct sg_notify *n, const char *what, const char *why);

/* STATUS= from the `status` hook now (after a start or a reload). */
void sg_notify_status(struct sg_notify *n);

#endif
