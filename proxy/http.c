/*
 * The `http` server (proxy/http.h): libmicrohttpd driven from the libuv
 * loop, the request router, the token check and the live stream.  The
 * metrics text is proxy/metrics.c; the JSON documents are --stats' own
 * writers (proxy/stats.c); the page is compiled in from doc/web/.
 *
 * The stream: each /api/stream client has a ring of SG_HTTP_STREAM_BUF
 * bytes.  A frame's event goes into the ring of every client it concerns,
 * or, when the ring has no room (a client that reads slowly or not at
 * all), is dropped and counted.  The response's reader empties the ring
 * into the socket and suspends the connection when nothing is left; the
 * next event resumes it.  So the relay never waits and the memory per
 * client is bounded.
 *
 * Worker loops (README "Worker loops"): the server runs on worker 0's
 * loop; the other loops' sessions put their frames into the rings too,
 * under `lock` (which guards the stream list, the rings, the event buffers
 * and the stream counters), and wake worker 0 (`wake`) to resume the
 * connections: libmicrohttpd is only ever called from worker 0.  The
 * documents (/metrics, /api/...) are written while the other loops are
 * paused (the owner's pause hook), from the view the owner gives (stats.h).  With worker
 * loops the server is freed by sg_http_free, once the threads are joined.
 */
#include "proxy/http.h"

#include "filters/inspect.h"
#include "filters/text.h"
#include "proxy/addr.h"
#include "proxy/admin.h"
#include "proxy/demos.h"
#include "proxy/metrics.h"
#include "proxy/route.h"
#include "proxy/stats.h"
#include "proxy/web_assets.h"

#include <arpa/inet.h>
#include <stdatomic.h>
#include <errno.h>
#include <microhttpd.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TICK_MS          500   /* loop-lag sample, stream keepalives */
#define KEEPALIVE_TICKS  30    /* a comment line every 15 s to idle streams */
#define STREAM_EVENT_MAX 65536 /* a longer event is dropped */
#define COOKIE_NAME      "slipgate_token"
/* The last messages, for a page that opens (GET /api/recent): the kinds the
 * page shows by default, at most RECENT_MAX events of RECENT_EVENT_MAX bytes. */
#define RECENT_MAX       100
#define RECENT_EVENT_MAX 4096
#define RECENT_KINDS                                                                               \
    (SG_KIND_BIT(SG_MSG_CHAT) | SG_KIND_BIT(SG_MSG_PRINT) | SG_KIND_BIT(SG_MSG_CENTERPRINT) |     \
     SG_KIND_BIT(SG_MSG_DISCONNECT))

struct stream {
    struct sg_http *h;
    struct MHD_Connection *conn;
    struct stream *prev, *next;
    char route[128];  /* "" = every route */
    uint64_t session; /* 0 = every session */
    uint32_t kinds;
    bool suspended;
    bool want_resume; /* an event came while suspended: worker 0 resumes it */
    bool hangup;      /* the client closed its end: the response ends */
    bool gone;        /* the connection ended (free callback ran) */
    uint64_t events, dropped;
    size_t head, len; /* ring: `len` bytes from `head` */
    char ring[SG_HTTP_STREAM_BUF];
};

/*
 * One HTTP connection, from MHD's connection notifier.  `busy` from the
 * request's first call to its completion (a stream stays busy); otherwise
 * the connection is idle: waiting for a request, or between two.
 */
struct conn {
    struct conn *prev, *next;
    int fd;
    bool busy;
    bool prodded;        /* shut down by us: MHD closes it at its next read */
    uint64_t idle_since; /* uv_now() */
};

struct sg_http {
    struct sockaddr_storage bound; /* where it listens, the port the kernel gave included */
    struct sg_http_owner owner;
    struct MHD_Daemon *d;
    uv_poll_t poll;
    uv_poll_t listen_poll; /* the listening socket, while the connections are all taken */
    int listen_fd;
    bool listen_watched;
    struct conn *conns;
    int nconns;
    uint64_t nclosed; /* connections MHD closed, ever */
    uv_timer_t timer; /* MHD's timeout */
    uv_timer_t tick;  /* loop lag, keepalives */
    uv_async_t wake;  /* another loop put events: resume their connections */
    uv_mutex_t lock;
    bool keep;   /* worker loops: freed by sg_http_free, not when the handles close */
    bool closed; /* every handle closed */
    int open_handles;
    bool stopping;
    bool has_token;
    unsigned char token_hash[crypto_generichash_BYTES];
    struct stream *streams;
    int nstreams;
    atomic_int nstreams_any; /* nstreams, read without the lock by sg_http_frame */
    struct sg_http_stats st;
    uint64_t tick_due; /* uv_hrtime() the tick should fire at */
    unsigned ticks;
    char *dump_buf; /* the codec's dump, for sg_inspect_json */
    size_t dump_size;
    char *ev_buf; /* one frame's JSON line */
    size_t ev_size;
    /* The ring of the last messages (under `lock`): JSON lines, oldest at
     * recent_head when full. */
    char *recent[RECENT_MAX];
    size_t recent_len[RECENT_MAX];
    unsigned recent_head, nrecent;
    struct sg_warn_limit warn_mhd;
};

/* ---- driving libmicrohttpd from the loop ---- */

static void on_mhd_timer(uv_timer_t *t);
static void watch_listen(struct sg_http *h);

/*
 * Make MHD close connection `k` at its next look: shut the socket down
 * (MHD still owns the descriptor).  The shutdown wakes MHD's epoll, MHD
 * reads end of file and closes it.
 */
static void prod(struct conn *k)
{
    k->prodded = true;
    shutdown(k->fd, SHUT_RDWR);
}

/*
 * MHD watches its connections edge-triggered and stops reading a request
 * after a short read: a peer whose request bytes and end of file came
 * together (a connection that waited in the accept queue, a client that
 * sends half a request and closes) is never seen to close, and would hold
 * its slot until the idle timeout.  Peek at every idle connection: end of
 * file or an error (and nothing left to read) closes it now.
 */
static void reap_closed(struct sg_http *h)
{
    for (struct conn *k = h->conns; k; k = k->next) {
        char c;
        ssize_t n;

        if (k->busy || k->prodded)
            continue;
        n = recv(k->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            prod(k);
    }
}

/* Let MHD work, then wait for its descriptor or its next timeout. */
static void run_mhd(struct sg_http *h)
{
    MHD_UNSIGNED_LONG_LONG to = 0;
    uint64_t ms = 1000, closed;

    if (!h->d)
        return;
    closed = h->nclosed;
    MHD_run(h->d);
    reap_closed(h);
    if (MHD_get_timeout(h->d, &to) == MHD_YES)
        ms = to < 1000 ? (uint64_t)to : 1000;
    /* Connections closed: MHD takes new ones (it listens again) at its next run. */
    if (h->nclosed != closed && !h->stopping)
        ms = 0;
    uv_timer_start(&h->timer, on_mhd_timer, ms, 0);
    watch_listen(h);
}

/*
 * With every connection taken, MHD stops accepting, and an idle client
 * (one that never finishes its request, or keeps a connection open
 * between requests) would keep everyone else out.  While the connections
 * are all taken, slipgate watches the listening socket itself: when a
 * new client waits, the connection idle the longest is closed for it, one
 * at a time.  A connection that is answering a request (a stream) is
 * never closed for another.
 */
static struct conn *idlest(struct sg_http *h)
{
    struct conn *best = NULL;

    for (struct conn *k = h->conns; k; k = k->next) {
        if (k->prodded) /* one eviction at a time: wait for it to close */
            return NULL;
        if (!k->busy && (!best || k->idle_since < best->idle_since))
            best = k;
    }
    return best;
}

static void on_listen_readable(uv_poll_t *p, int status, int events)
{
    struct sg_http *h = p->data;
    struct conn *k;

    if (h->nconns >= SG_HTTP_MAX_CONNECTIONS && (k = idlest(h)) != NULL) {
        prod(k);
        h->st.evicted++;
    }
    watch_listen(h);
}

static void watch_listen(struct sg_http *h)
{
    bool want = h->d && !h->stopping && h->listen_fd >= 0 && h->nconns >= SG_HTTP_MAX_CONNECTIONS &&
                idlest(h) != NULL;

    if (want == h->listen_watched)
        return;
    h->listen_watched = want;
    if (want)
        uv_poll_start(&h->listen_poll, UV_READABLE, on_listen_readable);
    else
        uv_poll_stop(&h->listen_poll);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct sg_http *h = cls;
    struct conn *k = *socket_context;

    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        k = calloc(1, sizeof(*k));
        if (!k || !ci) { /* not tracked: MHD's own timeout still closes it */
            free(k);
            return;
        }
        k->fd = ci->connect_fd;
        k->idle_since = uv_now(h->owner.ctx->loop);
        k->next = h->conns;
        if (h->conns)
            h->conns->prev = k;
        h->conns = k;
        h->nconns++;
        *socket_context = k;
        return;
    }
    h->nclosed++;
    if (!k)
        return;
    if (k->prev)
        k->prev->next = k->next;
    else
        h->conns = k->next;
    if (k->next)
        k->next->prev = k->prev;
    h->nconns--;
    free(k);
    *socket_context = NULL;
}

static struct conn *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

    return ci ? ci->socket_context : NULL;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **ctx,
                         enum MHD_RequestTerminationCode code)
{
    struct sg_http *h = cls;
    struct conn *k = conn_of(c);

    if (k) {
        k->busy = false;
        k->idle_since = uv_now(h->owner.ctx->loop);
    }
}

static void on_mhd_timer(uv_timer_t *t)
{
    run_mhd(t->data);
}

static void on_mhd_readable(uv_poll_t *p, int status, int events)
{
    run_mhd(p->data);
}

static void http_free(struct sg_http *h)
{
    uv_mutex_destroy(&h->lock);
    free(h->dump_buf);
    free(h->ev_buf);
    for (unsigned i = 0; i < RECENT_MAX; i++)
        free(h->recent[i]);
    free(h);
}

static void on_handle_closed(uv_handle_t *hd)
{
    struct sg_http *h = hd->data;

    if (--h->open_handles > 0)
        return;
    h->closed = true;
    if (!h->keep)
        http_free(h);
}

void sg_http_free(struct sg_http *h)
{
    if (h && h->keep && h->closed)
        http_free(h);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    struct sg_http *h = cls;
    char line[512];

    /* libmicrohttpd's own format string */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    vsnprintf(line, sizeof(line), fmt, ap);
#pragma GCC diagnostic pop
    line[strcspn(line, "\n")] = '\0';
    if (sg_warn_count(&h->warn_mhd, uv_now(h->owner.ctx->loop)))
        sg_log(h->owner.ctx->log, SG_LOG_DEBUG, NULL, 0, "http: %s", line);
}

/* ---- the stream ---- */

static void stream_unlink(struct stream *s)
{
    struct sg_http *h = s->h;

    if (s->prev)
        s->prev->next = s->next;
    else
        h->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    h->nstreams--;
    atomic_store_explicit(&h->nstreams_any, h->nstreams, memory_order_relaxed);
}

static void stream_resume(struct stream *s)
{
    if (s->suspended && !s->gone) {
        s->suspended = false;
        MHD_resume_connection(s->conn);
        /* MHD picks it up at its next run: soon, not in the middle of the relay */
        if (!s->h->stopping)
            uv_timer_start(&s->h->timer, on_mhd_timer, 0, 0);
    }
}

/* Append one whole event; false (and counted) when the ring has no room. */
static bool stream_put(struct stream *s, const char *a, size_t alen, const char *b, size_t blen)
{
    size_t need = alen + blen, tail;

    if (need > sizeof(s->ring) - s->len) {
        s->dropped++;
        s->h->st.stream_dropped++;
        return false;
    }
    for (int part = 0; part < 2; part++) {
        const char *p = part ? b : a;
        size_t n = part ? blen : alen;
        while (n > 0) {
            size_t at = (s->head + s->len) % sizeof(s->ring);
            tail = sizeof(s->ring) - at;
            if (tail > n)
                tail = n;
            memcpy(s->ring + at, p, tail);
            s->len += tail;
            p += tail;
            n -= tail;
        }
    }
    s->events++;
    s->h->st.stream_events++;
    s->want_resume = true; /* resume_marked, on worker 0 */
    return true;
}

/* Resume the connections that got events while suspended (worker 0, lock held). */
static void resume_marked(struct sg_http *h)
{
    for (struct stream *s = h->streams; s; s = s->next) {
        if (s->want_resume)
            stream_resume(s);
        s->want_resume = false;
    }
}

static void on_wake(uv_async_t *a)
{
    struct sg_http *h = a->data;

    uv_mutex_lock(&h->lock);
    if (!h->stopping)
        resume_marked(h);
    uv_mutex_unlock(&h->lock);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct stream *s = cls;
    struct sg_http *h = s->h;
    size_t n = 0;

    uv_mutex_lock(&h->lock);
    if (h->stopping || s->hangup) {
        uv_mutex_unlock(&h->lock);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (s->len == 0) {
        s->suspended = true;
        s->want_resume = false;
        MHD_suspend_connection(s->conn);
        uv_mutex_unlock(&h->lock);
        return 0;
    }
    while (n < max && s->len > 0) {
        size_t run = sizeof(s->ring) - s->head;
        if (run > s->len)
            run = s->len;
        if (run > max - n)
            run = max - n;
        memcpy(buf + n, s->ring + s->head, run);
        s->head = (s->head + run) % sizeof(s->ring);
        s->len -= run;
        n += run;
    }
    uv_mutex_unlock(&h->lock);
    return (ssize_t)n;
}

static void stream_free(void *cls)
{
    struct stream *s = cls;
    struct sg_http *h = s->h;

    uv_mutex_lock(&h->lock);
    s->gone = true;
    stream_unlink(s);
    free(s);
    uv_mutex_unlock(&h->lock);
}

void sg_http_tap(void *data, struct sg_session *s, const struct sg_filter_call *call)
{
    sg_http_frame(*(struct sg_http **)data, s, call);
}

/* Keep the frame's line of the RECENT_KINDS messages in the ring (under `lock`). */
static void recent_put(struct sg_http *h, const struct sg_filter_call *call)
{
    char *line = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&line, &len);
    int ok;
    unsigned at;

    if (!m)
        return;
    ok = sg_inspect_json(m, call, RECENT_KINDS, &h->dump_buf, &h->dump_size);
    if (fclose(m) != 0 || ok <= 0 || !line || len < 2 || len > RECENT_EVENT_MAX) {
        free(line);
        return;
    }
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        len--;
    at = (h->recent_head + h->nrecent) % RECENT_MAX;
    if (h->nrecent == RECENT_MAX) {
        at = h->recent_head;
        h->recent_head = (h->recent_head + 1) % RECENT_MAX;
    } else {
        h->nrecent++;
    }
    free(h->recent[at]);
    h->recent[at] = line;
    h->recent_len[at] = len;
}

static bool has_recent_kinds(const struct sg_frame *f)
{
    for (unsigned i = 0; i < f->nmsgs; i++)
        if (sg_filter__kind_in(RECENT_KINDS, f->msgs[i].kind))
            return true;
    return false;
}

void sg_http_frame(struct sg_http *h, struct sg_session *ses, const struct sg_filter_call *call)
{
    const struct sg_frame *f = call->frame;
    uint32_t done[SG_HTTP_MAX_STREAMS];
    int ndone = 0;

    bool mine, put = false;

    if (!h || !f)
        return;
    if (f->new_level)
        snprintf(ses->map, sizeof(ses->map), "%.*s", (int)strnlen(f->level, sizeof(f->level)),
                 f->level);
    if (has_recent_kinds(f)) {
        uv_mutex_lock(&h->lock);
        if (!h->stopping)
            recent_put(h, call);
        uv_mutex_unlock(&h->lock);
    }
    if (atomic_load_explicit(&h->nstreams_any, memory_order_relaxed) == 0)
        return;
    mine = ses->route->ctx == h->owner.ctx; /* worker 0's session: MHD may be called */
    uv_mutex_lock(&h->lock);
    if (h->stopping) {
        uv_mutex_unlock(&h->lock);
        return;
    }

    /* One line per distinct kinds mask among the clients this frame concerns. */
    for (struct stream *s = h->streams; s; s = s->next) {
        FILE *m;
        int ok;
        bool seen = false;

        if ((s->route[0] && strcmp(s->route, ses->route->conf.name) != 0) ||
            (s->session && s->session != ses->sum.id))
            continue;
        for (int i = 0; i < ndone; i++)
            seen = seen || done[i] == s->kinds;
        if (seen)
            continue;
        if (ndone < SG_HTTP_MAX_STREAMS)
            done[ndone++] = s->kinds;
        free(h->ev_buf); /* a memstream makes a buffer of its own each time */
        h->ev_buf = NULL;
        h->ev_size = 0;
        m = open_memstream(&h->ev_buf, &h->ev_size);
        if (!m)
            break;
        fputs("data: ", m); /* the JSON line has no newline inside: one data: field */
        ok = sg_inspect_json(m, call, s->kinds, &h->dump_buf, &h->dump_size);
        fputc('\n', m); /* after the line's own: the event's end */
        if (fclose(m) != 0 || ok <= 0 || h->ev_size < 8 || h->ev_size > STREAM_EVENT_MAX) {
            if (ok > 0) /* too long for an event */
                h->st.stream_dropped++;
            continue;
        }
        /* Every client with the same mask (this one and those after it). */
        for (struct stream *t = s; t; t = t->next) {
            if (t->kinds != s->kinds || (t->route[0] && strcmp(t->route, ses->route->conf.name)) ||
                (t->session && t->session != ses->sum.id))
                continue;
            put = stream_put(t, h->ev_buf, h->ev_size, NULL, 0) || put;
        }
    }
    if (put && mine)
        resume_marked(h);
    else if (put) /* under the lock: sg_http_stop closes `wake` only after it */
        uv_async_send(&h->wake);
    uv_mutex_unlock(&h->lock);
}

/* ---- answers ---- */

static enum MHD_Result send_buf(struct MHD_Connection *c, unsigned status, const char *type,
                                char *buf, size_t len, bool must_free)
{
    struct MHD_Response *r;
    enum MHD_Result ret;

    r = MHD_create_response_from_buffer(len, buf,
                                        must_free ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        if (must_free)
            free(buf);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    if (strncmp(type, "text/html", 9) == 0)
        MHD_add_response_header(r, "Content-Security-Policy",
                                "default-src 'none'; script-src 'self'; style-src 'self'; "
                                "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
                                "form-action 'none'; frame-ancestors 'none'");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, "Allow", strcmp(buf, "only POST\n") == 0 ? "POST" : "GET");
    if (status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(r, "WWW-Authenticate", "Bearer realm=\"slipgate\"");
    ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *text)
{
    return send_buf(c, status, "text/plain; charset=utf-8", (char *)(uintptr_t)text, strlen(text),
                    false);
}

/* A document written by `fn` into memory. */
static enum MHD_Result send_doc(struct MHD_Connection *c, const char *type,
                                void (*fn)(FILE *f, struct sg_http *h,
                                           const struct sg_stats_view *v,
                                           struct MHD_Connection *c),
                                struct sg_http *h)
{
    struct sg_stats_view *v = malloc(sizeof(*v));
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    bool paused;

    if (!m || !v) {
        if (m)
            fclose(m);
        free(buf);
        free(v);
        return send_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    }
    /* Every loop's routes and sessions, read while the other loops wait. */
    paused = h->owner.pause(h->owner.data);
    h->owner.view(h->owner.data, v);
    fn(m, h, v, c);
    if (paused)
        h->owner.resume(h->owner.data);
    free(v);
    if (fclose(m) != 0 || !buf) {
        free(buf);
        return send_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    }
    return send_buf(c, MHD_HTTP_OK, type, buf, len, true);
}

static void doc_metrics(FILE *f, struct sg_http *h, const struct sg_stats_view *v,
                        struct MHD_Connection *c)
{
    struct sg_http_stats st;

    uv_mutex_lock(&h->lock);
    h->st.stream_clients = (uint64_t)h->nstreams;
    st = h->st;
    uv_mutex_unlock(&h->lock);
    sg_metrics_write(f, v, &st);
}

static void doc_routes(FILE *f, struct sg_http *h, const struct sg_stats_view *v,
                       struct MHD_Connection *c)
{
    sg_stats_json(f, v, false);
}

static void doc_sessions(FILE *f, struct sg_http *h, const struct sg_stats_view *v,
                         struct MHD_Connection *c)
{
    const char *all = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "ended");

    sg_stats_json_sessions(f, v, all && strcmp(all, "1") == 0);
}

static void doc_recordings(FILE *f, struct sg_http *h, const struct sg_stats_view *v,
                           struct MHD_Connection *c)
{
    sg_metrics_recordings_json(f, v);
}

/* GET /api/recent: {"events": [...]}, the last messages' events, oldest first. */
static void doc_recent(FILE *f, struct sg_http *h, const struct sg_stats_view *v,
                       struct MHD_Connection *c)
{
    (void)v, (void)c;
    fputs("{\"events\": [", f);
    uv_mutex_lock(&h->lock);
    for (unsigned i = 0; i < h->nrecent; i++) {
        unsigned at = (h->recent_head + i) % RECENT_MAX;
        fputs(i ? ",\n  " : "\n  ", f);
        fwrite(h->recent[at], 1, h->recent_len[at], f);
    }
    fputs(h->nrecent ? "\n]}\n" : "]}\n", f);
    uv_mutex_unlock(&h->lock);
}

static void doc_demos(FILE *f, struct sg_http *h, const struct sg_stats_view *v,
                      struct MHD_Connection *c)
{
    (void)h, (void)c;
    sg_demos_json(f, v);
}

/* GET /api/demo?path=PATH: a finished demo of /api/demos, as a download. */
static enum MHD_Result demo_download(struct sg_http *h, struct MHD_Connection *c)
{
    const char *path = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "path");
    struct sg_stats_view *v = malloc(sizeof(*v));
    struct sg_demo_dirs *d = malloc(sizeof(*d));
    struct MHD_Response *r;
    enum MHD_Result ret;
    char why[160], disp[300];
    const char *name;
    uint64_t size = 0;
    bool paused;
    int fd;

    if (!v || !d) {
        free(v);
        free(d);
        return send_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    }
    paused = h->owner.pause(h->owner.data);
    h->owner.view(h->owner.data, v);
    sg_demos_dirs(v, d);
    if (paused)
        h->owner.resume(h->owner.data);
    free(v);
    fd = sg_demos_open(d, path, &size, why, sizeof(why));
    free(d);
    if (fd < 0) {
        char msg[200];
        snprintf(msg, sizeof(msg), "%s\n", why);
        return send_text(c, fd == -ENOENT ? MHD_HTTP_NOT_FOUND
                            : fd == -EINVAL ? MHD_HTTP_BAD_REQUEST
                                            : MHD_HTTP_FORBIDDEN,
                         msg);
    }
    r = MHD_create_response_from_fd64(size, fd); /* closes fd with the response */
    if (!r) {
        close(fd);
        return MHD_NO;
    }
    /* The file's name for the browser: the characters of a plain name only. */
    name = strrchr(path, '/') + 1;
    {
        size_t o = 0;
        o += (size_t)snprintf(disp, sizeof(disp), "attachment; filename=\"");
        for (const char *p = name; *p && o < sizeof(disp) - 3; p++)
            disp[o++] = (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\') ? *p : '_';
        disp[o++] = '"';
        disp[o] = '\0';
    }
    MHD_add_response_header(r, "Content-Type", "application/octet-stream");
    MHD_add_response_header(r, "Content-Disposition", disp);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* GET /api/stream?route=NAME&session=ID&kinds=chat,print */
static enum MHD_Result start_stream(struct sg_http *h, struct MHD_Connection *c)
{
    const char *route = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "route");
    const char *session = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "session");
    const char *kinds = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "kinds");
    struct MHD_Response *r;
    struct stream *s;
    enum MHD_Result ret;
    static const char hello[] = "retry: 2000\n: slipgate live stream (doc/inspect.md)\n\n";

    if (atomic_load(&h->nstreams_any) >= SG_HTTP_MAX_STREAMS)
        return send_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "too many stream clients\n");
    s = calloc(1, sizeof(*s));
    if (!s)
        return send_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    s->h = h;
    s->conn = c;
    s->kinds = SG_KINDS_TEXT | SG_KIND_BIT(SG_MSG_GAME);
    if (route && *route) {
        if (strlen(route) >= sizeof(s->route)) {
            free(s);
            return send_text(c, MHD_HTTP_BAD_REQUEST, "route: too long\n");
        }
        snprintf(s->route, sizeof(s->route), "%s", route);
    }
    if (session && *session) {
        char *end;
        errno = 0;
        s->session = strtoull(session, &end, 10);
        if (errno || *end || s->session == 0) {
            free(s);
            return send_text(c, MHD_HTTP_BAD_REQUEST, "session: a session number\n");
        }
    }
    if (kinds && *kinds) {
        char word[32];
        const char *p = kinds;
        s->kinds = 0;
        while (*p) {
            size_t n = strcspn(p, ",");
            int k = -1;
            if (n > 0 && n < sizeof(word)) {
                memcpy(word, p, n);
                word[n] = '\0';
                for (int i = 0; i < SG_MSG_KIND_COUNT && k < 0; i++)
                    if (strcmp(sg_msg_kind_name((enum sg_msg_kind)i), word) == 0)
                        k = i;
                if (k < 0 && strcmp(word, "text") == 0) {
                    s->kinds |= SG_KINDS_TEXT;
                    k = SG_MSG_KIND_COUNT;
                }
            }
            if (k < 0) {
                free(s);
                return send_text(c, MHD_HTTP_BAD_REQUEST,
                                 "kinds: a comma-separated list of message kinds "
                                 "(doc/inspect.md), or text\n");
            }
            if (k < SG_MSG_KIND_COUNT)
                s->kinds |= SG_KIND_BIT(k);
            p += n;
            if (*p == ',' && *++p == '\0') { /* "chat," : an empty last word */
                free(s);
                return send_text(c, MHD_HTTP_BAD_REQUEST, "kinds: an empty kind\n");
            }
        }
    }
    r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, s, stream_free);
    if (!r) {
        free(s);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    uv_mutex_lock(&h->lock);
    s->next = h->streams;
    if (h->streams)
        h->streams->prev = s;
    h->streams = s;
    h->nstreams++;
    atomic_store_explicit(&h->nstreams_any, h->nstreams, memory_order_relaxed);
    stream_put(s, hello, sizeof(hello) - 1, NULL, 0);
    s->want_resume = false; /* not suspended yet */
    uv_mutex_unlock(&h->lock);
    ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r); /* the connection holds it; stream_free runs when it ends */
    return ret;
}

/* ---- the token ---- */

static bool token_ok(struct sg_http *h, const char *given)
{
    unsigned char got[crypto_generichash_BYTES];

    if (!given)
        return false;
    /* Hash first: equal-length digests compare in constant time. */
    crypto_generichash(got, sizeof(got), (const unsigned char *)given, strlen(given), NULL, 0);
    return sodium_memcmp(got, h->token_hash, sizeof(got)) == 0;
}

static bool authorized(struct sg_http *h, struct MHD_Connection *c)
{
    const char *auth;

    if (!h->has_token)
        return true;
    auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (auth && strncmp(auth, "Bearer ", 7) == 0 && token_ok(h, auth + 7))
        return true;
    return token_ok(h, MHD_lookup_connection_value(c, MHD_COOKIE_KIND, COOKIE_NAME));
}

/* GET /?token=T: the browser's way in; the token goes into a cookie. */
static enum MHD_Result token_login(struct sg_http *h, struct MHD_Connection *c, const char *token)
{
    struct MHD_Response *r;
    enum MHD_Result ret;
    char cookie[400];

    if (!token_ok(h, token) || strlen(token) > 256 || strpbrk(token, ";\r\n"))
        return send_text(c, MHD_HTTP_UNAUTHORIZED, "wrong token\n");
    snprintf(cookie, sizeof(cookie), COOKIE_NAME "=%s; Path=/; HttpOnly; SameSite=Strict", token);
    r = MHD_create_response_from_buffer(0, (void *)(uintptr_t) "", MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Set-Cookie", cookie);
    MHD_add_response_header(r, "Location", "/");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    ret = MHD_queue_response(c, MHD_HTTP_SEE_OTHER, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- live actions (proxy/admin.h) ---- */

static enum MHD_Result admin_request(struct sg_http *h, struct MHD_Connection *c, const char *url)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    struct sg_admin_reply rep;
    char peer[SG_ADDR_STRLEN] = "?";
    struct sg_admin_access access = {.log = h->owner.ctx->log,
                                     .data = h->owner.data,
                                     .view = h->owner.view,
                                     .pause = h->owner.pause,
                                     .resume = h->owner.resume};

    if (ci && ci->client_addr)
        sg_addr_format(ci->client_addr, peer, sizeof(peer));
    sg_admin_handle(&access, h->has_token, c, url, peer, &rep);
    if (!rep.body)
        return send_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    return send_buf(c, rep.status, rep.json ? "application/json" : "text/plain; charset=utf-8",
                    rep.body, rep.len, true);
}

/* ---- the router ---- */

/* /live and /ready: the owner's answer, as a short text line. */
static enum MHD_Result health(struct sg_http *h, struct MHD_Connection *c, bool ready)
{
    char text[512] = "ok";
    unsigned status = MHD_HTTP_OK;
    char *copy;
    size_t n;

    if (h->owner.health)
        status = h->owner.health(h->owner.data, ready, text, sizeof(text) - 1);
    n = strnlen(text, sizeof(text) - 2);
    text[n] = '\n';
    text[n + 1] = '\0';
    if (!(copy = strdup(text))) /* MHD frees it with the response */
        return send_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    return send_buf(c, status, "text/plain; charset=utf-8", copy, n + 1, true);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **ctx)
{
    struct sg_http *h = cls;
    static int first_call;
    const char *token;

    /* Answer on the first call: a GET has no body, another method is refused. */
    if (*ctx == NULL) {
        struct conn *k = conn_of(c);
        *ctx = &first_call;
        if (k)
            k->busy = true;
        if (sg_admin_is_action(url) ? strcmp(method, MHD_HTTP_METHOD_POST) != 0
                                    : strcmp(method, MHD_HTTP_METHOD_GET) != 0)
            return send_text(c, MHD_HTTP_METHOD_NOT_ALLOWED,
                             sg_admin_is_action(url) ? "only POST\n" : "only GET\n");
    } else {
        *upload_data_size = 0; /* a GET with a body: ignore it */
        return MHD_YES;
    }
    if (h->stopping)
        return send_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "shutting down\n");

    /* Health: no token, as a probe has none; they reveal only up or not. */
    if (strcmp(url, "/live") == 0 || strcmp(url, "/ready") == 0)
        return health(h, c, url[1] == 'r');

    token = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token");
    if (h->has_token && token && strcmp(url, "/") == 0)
        return token_login(h, c, token);
    if (!authorized(h, c))
        return send_text(
            c, MHD_HTTP_UNAUTHORIZED,
            "a token is required: Authorization: Bearer TOKEN, or open /?token=TOKEN\n");

    for (size_t i = 0; i < sg_web_assets_count; i++)
        if (strcmp(url, sg_web_assets[i].path) == 0)
            return send_buf(c, MHD_HTTP_OK, sg_web_assets[i].type,
                            (char *)(uintptr_t)sg_web_assets[i].data, sg_web_assets[i].len, false);
    if (strcmp(url, "/metrics") == 0)
        return send_doc(c, "text/plain; version=0.0.4; charset=utf-8", doc_metrics, h);
    if (strcmp(url, "/api/routes") == 0)
        return send_doc(c, "application/json", doc_routes, h);
    if (strcmp(url, "/api/sessions") == 0)
        return send_doc(c, "application/json", doc_sessions, h);
    if (strcmp(url, "/api/recordings") == 0)
        return send_doc(c, "application/json", doc_recordings, h);
    if (strcmp(url, "/api/stream") == 0)
        return start_stream(h, c);
    if (strcmp(url, "/api/recent") == 0)
        return send_doc(c, "application/json", doc_recent, h);
    if (strcmp(url, "/api/demos") == 0)
        return send_doc(c, "application/json", doc_demos, h);
    if (strcmp(url, "/api/demo") == 0)
        return demo_download(h, c);
    if (sg_admin_is_action(url) || sg_admin_is_list(url))
        return admin_request(h, c, url);
    return send_text(c, MHD_HTTP_NOT_FOUND, "not found\n");
}

/* ---- loop lag and keepalives ---- */

/*
 * MHD does not watch a suspended connection: a stream client that went
 * away would keep its slot until the next event.  Peek at its socket: end
 * of file or an error ends the stream.
 */
static void reap_hangups(struct sg_http *h)
{
    for (struct stream *s = h->streams; s; s = s->next) {
        const union MHD_ConnectionInfo *ci;
        char c;
        ssize_t n;

        if (!s->suspended || s->hangup)
            continue;
        ci = MHD_get_connection_info(s->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!ci)
            continue;
        n = recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            s->hangup = true;
            stream_resume(s);
        }
    }
}

static void on_tick(uv_timer_t *t)
{
    struct sg_http *h = t->data;
    uint64_t now = uv_hrtime();
    static const char ka[] = ": keepalive\n\n";

    uv_mutex_lock(&h->lock);
    h->st.loop_lag_s = now > h->tick_due ? (double)(now - h->tick_due) / 1e9 : 0.0;
    h->tick_due = now + (uint64_t)TICK_MS * 1000000u;
    reap_hangups(h);
    reap_closed(h);
    if (++h->ticks % KEEPALIVE_TICKS == 0)
        for (struct stream *s = h->streams; s; s = s->next)
            if (s->len == 0)
                stream_put(s, ka, sizeof(ka) - 1, NULL, 0);
    resume_marked(h);
    uv_mutex_unlock(&h->lock);
}

/* ---- start and stop ---- */

static bool is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss->ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return false;
}

int sg_http_start(const struct sg_http_owner *owner, const char *addr, const char *token,
                  struct sg_http **out)
{
    const struct sg_ctx *ctx = owner->ctx;
    struct sockaddr_storage ss;
    char bound[SG_ADDR_STRLEN];
    const union MHD_DaemonInfo *info;
    struct sg_http *h;
    char why[256];
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    unsigned idle_s = owner->idle_timeout_ms > 0 ? (unsigned)(owner->idle_timeout_ms / 1000)
                                                 : SG_HTTP_IDLE_TIMEOUT_S;
    int err;

    *out = NULL;
    err = sg_addr_resolve(ctx->loop, addr, true, &ss, why, sizeof(why));
    if (err < 0) {
        sg_log(ctx->log, SG_LOG_ERROR, NULL, 0, "http %s: %s", addr, why);
        return err;
    }
    h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    if (uv_mutex_init(&h->lock) < 0) {
        free(h);
        return -ENOMEM;
    }
    h->owner = *owner;
    h->keep = ctx->nworkers > 1;
    if (token) {
        h->has_token = true;
        crypto_generichash(h->token_hash, sizeof(h->token_hash), (const unsigned char *)token,
                           strlen(token), NULL, 0);
    }
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(flags, (uint16_t)sg_addr_port((struct sockaddr *)&ss), NULL, NULL,
                            on_request, h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)SG_HTTP_MAX_CONNECTIONS,
                            MHD_OPTION_CONNECTION_TIMEOUT, idle_s,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SG_HTTP_REQUEST_MAX + 4096,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h, MHD_OPTION_END);
    if (!h->d) {
        err = errno ? -errno : -EADDRINUSE;
        sg_log(ctx->log, SG_LOG_ERROR, NULL, 0, "http %s: cannot listen: %s", addr,
               strerror(-err));
        uv_mutex_destroy(&h->lock);
        free(h);
        return err;
    }
    info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_EPOLL_FD);
    if (!info || uv_poll_init(ctx->loop, &h->poll, info->epoll_fd) < 0) {
        MHD_stop_daemon(h->d);
        uv_mutex_destroy(&h->lock);
        free(h);
        sg_log(ctx->log, SG_LOG_ERROR, NULL, 0, "http %s: cannot watch its descriptor", addr);
        return -EIO;
    }
    h->poll.data = h;
    h->open_handles++;
    /* Without it (it cannot fail on a listening socket) idle clients are not evicted. */
    info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_LISTEN_FD);
    h->listen_fd = info ? info->listen_fd : -1;
    if (h->listen_fd >= 0 && uv_poll_init_socket(ctx->loop, &h->listen_poll, h->listen_fd) < 0)
        h->listen_fd = -1;
    if (h->listen_fd >= 0) {
        h->listen_poll.data = h;
        h->open_handles++;
    }
    uv_timer_init(ctx->loop, &h->timer);
    h->timer.data = h;
    h->open_handles++;
    uv_timer_init(ctx->loop, &h->tick);
    h->tick.data = h;
    h->open_handles++;
    uv_async_init(ctx->loop, &h->wake, on_wake);
    h->wake.data = h;
    h->open_handles++;
    uv_poll_start(&h->poll, UV_READABLE, on_mhd_readable);
    h->tick_due = uv_hrtime() + (uint64_t)TICK_MS * 1000000u;
    uv_timer_start(&h->tick, on_tick, TICK_MS, TICK_MS);
    run_mhd(h);
    if (!is_loopback(&ss) && !token)
        sg_log(ctx->log, SG_LOG_WARN, NULL, 0,
               "http %s is not a loopback address and no http_token is set: anyone who can "
               "reach it sees every session and message",
               addr);
    h->bound = ss;
    info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    if (info && info->port)
        sg_addr_set_port((struct sockaddr *)&h->bound, info->port);
    sg_log(ctx->log, SG_LOG_INFO, NULL, 0, "http: serving on http://%s/%s",
           sg_addr_format((struct sockaddr *)&h->bound, bound, sizeof(bound)),
           token ? " (token required)" : "");
    *out = h;
    return 0;
}

const struct sockaddr *sg_http_address(const struct sg_http *h)
{
    return (const struct sockaddr *)&h->bound;
}

void sg_http_stop(struct sg_http *h)
{
    if (!h || h->stopping)
        return;
    uv_mutex_lock(&h->lock);
    h->stopping = true; /* no loop puts events (or wakes) from now on */
    /* Suspended streams come back to end; then every connection closes. */
    for (struct stream *s = h->streams; s; s = s->next)
        stream_resume(s);
    uv_mutex_unlock(&h->lock);
    /* before MHD closes the listening socket */
    if (h->listen_fd >= 0)
        uv_close((uv_handle_t *)&h->listen_poll, on_handle_closed);
    MHD_run(h->d);
    MHD_stop_daemon(h->d);
    h->d = NULL;
    uv_close((uv_handle_t *)&h->poll, on_handle_closed);
    uv_close((uv_handle_t *)&h->timer, on_handle_closed);
    uv_close((uv_handle_t *)&h->tick, on_handle_closed);
    uv_close((uv_handle_t *)&h->wake, on_handle_closed);
}
