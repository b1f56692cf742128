/*
 * Master servers: a route's heartbeats.  See master.h.
 */
#include "proxy/master.h"

#include "proxy/addr.h"
#include "proxy/log.h"
#include "proxy/udp.h"
#include "protocols/error.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <uv.h>

#define STATUS_WAIT_MS 1000 /* how long a status query may take */
#define HEARTBEAT_MAX  2048 /* a heartbeat's bytes at most (Quake 2's carries the status) */

struct sg_master {
    struct sg_master_owner owner;
    const struct sg_codec *game;
    const struct sg_codec_master *hb;
    char name[128];
    int listen_fd, listen_family;
    struct sockaddr_storage server;
    struct sockaddr_storage *addrs; /* resolved, in the listener's family */
    char **specs;                   /* as configured, for the log */
    int n;
    int64_t interval_ms;
    uint32_t sequence; /* heartbeats sent */
    char level[64];    /* the level last announced, "" until then */
    bool waiting;      /* a status query is out */
    bool unanswered;   /* the last one went unanswered (told once) */
    bool closing;
    bool drained; /* the shutdown message went: no more heartbeats */
    uv_timer_t tick, wait;
    uv_udp_t status;
    bool status_open;
    uint8_t rbuf[SG_MAX_DATAGRAM];
};

/* ---- resolving ---- */

int sg_master_resolve(const char *spec, int listen_family, struct sockaddr_storage *out, char *why,
                      size_t whycap)
{
    char host[256], port[16];
    struct addrinfo hints, *res = NULL;
    int err;

    if (sg_conf_split_addr(spec, host, sizeof(host), port, sizeof(port)) < 0 || !host[0] ||
        strcmp(host, "*") == 0) {
        snprintf(why, whycap, "master '%s' is not HOST:PORT", spec);
        return -EINVAL;
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = listen_family == AF_INET ? AF_INET : AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    hints.ai_flags = AI_NUMERICSERV;
    err = getaddrinfo(host, port, &hints, &res);
    if (err != 0 || !res) {
        if (err == EAI_ADDRFAMILY || err == EAI_NONAME) {
            /* An IPv6 master for an IPv4 listener: say which. */
            struct addrinfo any = hints, *r6 = NULL;
            any.ai_family = AF_UNSPEC;
            if (listen_family == AF_INET && getaddrinfo(host, port, &any, &r6) == 0) {
                freeaddrinfo(r6);
                snprintf(why, whycap,
                         "master '%s' has only IPv6 addresses and the route listens on IPv4: "
                         "listen on [::]:PORT to reach it",
                         spec);
                return -EAFNOSUPPORT;
            }
        }
        snprintf(why, whycap, "cannot resolve master '%s': %s", spec,
                 err == EAI_SYSTEM ? strerror(errno) : gai_strerror(err));
        return SG_E_RESOLVE;
    }
    memset(out, 0, sizeof(*out));
    if (listen_family == AF_INET6 && res->ai_family == AF_INET) {
        /* The dual-stack listener sends to IPv4 through a v4-mapped address. */
        struct sockaddr_in6 *m = (struct sockaddr_in6 *)out;
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)res->ai_addr;
        m->sin6_family = AF_INET6;
        m->sin6_port = v4->sin_port;
        m->sin6_addr.s6_addr[10] = 0xff;
        m->sin6_addr.s6_addr[11] = 0xff;
        memcpy(&m->sin6_addr.s6_addr[12], &v4->sin_addr, 4);
    } else {
        memcpy(out, res->ai_addr, res->ai_addrlen);
    }
    freeaddrinfo(res);
    return 0;
}

static void free_list(struct sockaddr_storage *addrs, char **specs, int n)
{
    for (int i = 0; specs && i < n; i++)
        free(specs[i]);
    free(specs);
    free(addrs);
}

/* Resolve `rc`'s masters into new arrays; on failure returns the error, told with file:line
 * when `say`. */
static int resolve_all(struct sg_master *m, const struct sg_route_conf *rc, const char *file,
                       bool say, struct sockaddr_storage **addrs, char ***specs)
{
    char why[512];
    int err;

    *addrs = NULL;
    *specs = NULL;
    if (rc->nmasters == 0)
        return 0;
    *addrs = calloc((size_t)rc->nmasters, sizeof(**addrs));
    *specs = calloc((size_t)rc->nmasters, sizeof(**specs));
    if (!*addrs || !*specs) {
        free_list(*addrs, *specs, 0);
        return -ENOMEM;
    }
    for (int i = 0; i < rc->nmasters; i++) {
        const struct sg_master_conf *mc = &rc->masters[i];
        err = sg_master_resolve(mc->addr, m->listen_family, &(*addrs)[i], why, sizeof(why));
        if (err == 0 && !((*specs)[i] = strdup(mc->addr)))
            err = -ENOMEM;
        if (err < 0 && say) {
            if (mc->line)
                sg_log(m->owner.ctx->log, SG_LOG_ERROR, m->name, 0, "%s:%d:%d: %s",
                       file ? file : "config", mc->line, mc->col, why);
            else
                sg_log(m->owner.ctx->log, SG_LOG_ERROR, m->name, 0, "command line: %s", why);
        }
        if (err < 0) {
            free_list(*addrs, *specs, rc->nmasters);
            *addrs = NULL;
            *specs = NULL;
            return err;
        }
    }
    return 0;
}

/* ---- sending ---- */

static void send_all(struct sg_master *m, const uint8_t *data, size_t len, const char *what)
{
    char a[SG_ADDR_STRLEN];

    for (int i = 0; i < m->n; i++) {
        const struct sockaddr *to = (const struct sockaddr *)&m->addrs[i];
        ssize_t n = sendto(m->listen_fd, data, len, 0, to, sg_addr_len(to));
        if (n < 0)
            sg_log(m->owner.ctx->log, SG_LOG_WARN, m->name, 0,
                   "cannot send the %s to master %s: %s", what, m->specs[i], strerror(errno));
        else
            sg_log(m->owner.ctx->log, SG_LOG_DEBUG, m->name, 0, "%s sent to master %s (%s)", what,
                   m->specs[i], sg_addr_format(to, a, sizeof(a)));
    }
}

static void heartbeat(struct sg_master *m, const uint8_t *status, size_t status_len)
{
    uint8_t out[HEARTBEAT_MAX];
    int n = sg_codec_heartbeat(m->hb, out, sizeof(out), status, status_len, m->sequence + 1);

    if (n < 0) {
        sg_log(m->owner.ctx->log, SG_LOG_WARN, m->name, 0,
               "no master heartbeat: the server's status answer cannot be used (%s)",
               sg_strerror(n));
        return;
    }
    m->sequence++;
    send_all(m, out, (size_t)n, m->hb->what);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct sg_master *m = h->data;

    (void)suggested;
    *buf = uv_buf_init((char *)m->rbuf, sizeof(m->rbuf));
}

static bool from_server(const struct sg_master *m, const struct sockaddr *from)
{
    return from && sg_addr_equal(from, (const struct sockaddr *)&m->server);
}

static void on_status(uv_udp_t *u, ssize_t nread, const uv_buf_t *buf, const struct sockaddr *from,
                      unsigned flags)
{
    struct sg_master *m = u->data;

    (void)flags;
    if (nread <= 0 || !m->waiting || m->closing || !from_server(m, from) ||
        !sg_codec_status_is_reply(m->game->status, (const uint8_t *)buf->base, (size_t)nread))
        return;
    m->waiting = false;
    uv_timer_stop(&m->wait);
    if (m->unanswered)
        sg_log(m->owner.ctx->log, SG_LOG_INFO, m->name, 0,
               "the server answers status queries again: master heartbeats resume");
    m->unanswered = false;
    heartbeat(m, (const uint8_t *)buf->base, (size_t)nread);
}

static void on_handle_closed(uv_handle_t *h)
{
    struct sg_master *m = h->data;

    m->owner.closed(m->owner.data);
}

static int open_status(struct sg_master *m)
{
    struct sockaddr_storage any;
    int err;

    memset(&any, 0, sizeof(any));
    any.ss_family = m->server.ss_family;
    err = uv_udp_init(m->owner.ctx->loop, &m->status);
    if (err < 0)
        return err;
    m->status.data = m;
    m->status_open = true;
    m->owner.opened(m->owner.data);
    err = uv_udp_bind(&m->status, (const struct sockaddr *)&any, 0);
    if (err == 0)
        err = uv_udp_recv_start(&m->status, on_alloc, on_status);
    return err;
}

static void on_wait(uv_timer_t *t);

/* Send the heartbeat now; for a game whose heartbeat carries the status, ask the server first. */
static void beat(struct sg_master *m)
{
    uint8_t q[64];
    uv_buf_t b;
    int n, err;

    if (m->n == 0 || m->closing || m->drained)
        return;
    if (!m->hb->needs_status || !m->game->status) {
        heartbeat(m, NULL, 0);
        return;
    }
    if (m->waiting) /* one query at a time: its answer sends the heartbeat */
        return;
    err = m->status_open ? 0 : open_status(m);
    n = err < 0 ? err : sg_codec_status_query(m->game->status, q, sizeof(q));
    if (n >= 0) {
        b = uv_buf_init((char *)q, (unsigned)n);
        err = uv_udp_try_send(&m->status, &b, 1, (const struct sockaddr *)&m->server);
    }
    if (n < 0 || err < 0) {
        sg_log(m->owner.ctx->log, SG_LOG_WARN, m->name, 0,
               "cannot ask the server for the master heartbeat's status: %s",
               n < 0 ? sg_strerror(n) : uv_strerror(err));
        return;
    }
    m->waiting = true;
    uv_timer_start(&m->wait, on_wait, STATUS_WAIT_MS, 0);
}

static void on_wait(uv_timer_t *t)
{
    struct sg_master *m = t->data;

    if (!m->waiting)
        return;
    m->waiting = false;
    if (!m->unanswered)
        sg_log(m->owner.ctx->log, SG_LOG_WARN, m->name, 0,
               "the server did not answer the status query within %d ms: no master heartbeat "
               "(told once until it answers)",
               STATUS_WAIT_MS);
    m->unanswered = true;
}

static void on_tick(uv_timer_t *t)
{
    beat(t->data);
}

/* ---- life cycle ---- */

int sg_master_create(const struct sg_master_owner *owner, const struct sg_codec *game,
                     const struct sg_route_conf *rc, const char *file, int listen_fd,
                     const struct sockaddr *listen_addr, const struct sockaddr *server,
                     struct sg_master **out)
{
    struct sg_master *m = calloc(1, sizeof(*m));
    int err;

    *out = NULL;
    if (!m)
        return -ENOMEM;
    m->owner = *owner;
    m->game = game;
    m->hb = game->master;
    snprintf(m->name, sizeof(m->name), "%s", owner->name);
    m->listen_fd = listen_fd;
    m->listen_family = listen_addr->sa_family;
    memcpy(&m->server, server, sg_addr_len(server));
    m->interval_ms = rc->master_interval_ms ? rc->master_interval_ms : m->hb->interval_ms;
    err = resolve_all(m, rc, file, true, &m->addrs, &m->specs);
    if (err < 0) {
        free(m);
        return err;
    }
    m->n = rc->nmasters;
    uv_timer_init(owner->ctx->loop, &m->tick);
    uv_timer_init(owner->ctx->loop, &m->wait);
    m->tick.data = m->wait.data = m;
    owner->opened(owner->data);
    owner->opened(owner->data);
    /* Worker 0 keeps the schedule, starting now; every loop tells level changes. */
    if (owner->ctx->worker == 0)
        uv_timer_start(&m->tick, on_tick, 0, (uint64_t)m->interval_ms);
    *out = m;
    return 0;
}

int sg_master_update(struct sg_master *m, const struct sg_route_conf *rc, const char *file,
                     const struct sockaddr *server)
{
    struct sockaddr_storage *addrs;
    char **specs;
    int64_t iv = rc->master_interval_ms ? rc->master_interval_ms : m->hb->interval_ms;
    bool added;
    /* Every loop resolves the same list on a reload: worker 0 alone says why. */
    int err = resolve_all(m, rc, file, m->owner.ctx->worker == 0, &addrs, &specs);

    if (err < 0) {
        if (m->owner.ctx->worker == 0)
            sg_log(m->owner.ctx->log, SG_LOG_ERROR, m->name, 0, "reload: keeping the old masters");
        return err;
    }
    added = rc->nmasters > 0 && m->n == 0;
    free_list(m->addrs, m->specs, m->n);
    m->addrs = addrs;
    m->specs = specs;
    m->n = rc->nmasters;
    memcpy(&m->server, server, sg_addr_len(server));
    if (m->owner.ctx->worker == 0 && (iv != m->interval_ms || added))
        uv_timer_start(&m->tick, on_tick, added ? 0 : (uint64_t)iv, (uint64_t)iv);
    m->interval_ms = iv;
    return 0;
}

void sg_master_level(struct sg_master *m, const char *level)
{
    bool changed;

    if (!m || !level || !level[0] || m->closing)
        return;
    changed = m->level[0] && strncmp(m->level, level, sizeof(m->level) - 1) != 0;
    snprintf(m->level, sizeof(m->level), "%s", level);
    if (changed) {
        sg_log(m->owner.ctx->log, SG_LOG_DEBUG, m->name, 0,
               "the server changed level to %s: master heartbeat", m->level);
        beat(m);
    }
}

static void say_shutdown(struct sg_master *m)
{
    uint8_t out[64];
    int n;

    if (m->owner.ctx->worker == 0 && m->n > 0 &&
        (n = sg_codec_master_shutdown(m->hb, out, sizeof(out))) > 0)
        send_all(m, out, (size_t)n, "shutdown message");
}

void sg_master_drain(struct sg_master *m)
{
    if (!m || m->closing || m->drained)
        return;
    m->drained = true;
    uv_timer_stop(&m->tick);
    say_shutdown(m);
}

void sg_master_close(struct sg_master *m, bool shutdown)
{
    if (!m || m->closing)
        return;
    if (shutdown && !m->drained)
        say_shutdown(m);
    m->closing = true;
    uv_close((uv_handle_t *)&m->tick, on_handle_closed);
    uv_close((uv_handle_t *)&m->wait, on_handle_closed);
    if (m->status_open)
        uv_close((uv_handle_t *)&m->status, on_handle_closed);
}

void sg_master_destroy(struct sg_master *m)
{
    if (!m)
        return;
    free_list(m->addrs, m->specs, m->n);
    free(m);
}
