/*
 * Admission: who may open a session on a route (proxy/route.h).
 */
#include "proxy/route.h"

#include "proxy/addr.h"
#include "filters/anon.h"

#include <errno.h>
#include <ifaddrs.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RATE_PROBE 16 /* slots probed before the table counts as full */

/* ---- max_sessions, shared by the worker loops ---- */

struct sg_route_share *sg_route__share(struct sg_route_share **shares, const char *name)
{
    struct sg_route_share *sh;

    for (sh = *shares; sh; sh = sh->next)
        if (strcmp(sh->name, name) == 0)
            return sh;
    if (!(sh = calloc(1, sizeof(*sh))))
        return NULL;
    snprintf(sh->name, sizeof(sh->name), "%s", name);
    atomic_init(&sh->nsessions, 0);
    sh->next = *shares;
    *shares = sh;
    return sh;
}

void sg_route__shares_free(struct sg_route_share **shares)
{
    while (*shares) {
        struct sg_route_share *next = (*shares)->next;
        free(*shares);
        *shares = next;
    }
}

/* The sessions the route holds at once (every loop's): max_sessions, or
 * fewer when the open files limit leaves room for fewer (app.c). */
static int64_t table_limit(const struct sg_route *r)
{
    int64_t cap = atomic_load_explicit(&r->share->fd_cap, memory_order_relaxed);

    return cap > 0 && cap < r->conf.max_sessions ? cap : r->conf.max_sessions;
}

/* Take one of the table's slots for a new session: false when every loop's
 * sessions together fill them. */
static bool slot_take(struct sg_route *r)
{
    int64_t n = atomic_load_explicit(&r->share->nsessions, memory_order_relaxed);
    int64_t limit = table_limit(r);

    do {
        if (n >= limit)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(&r->share->nsessions, &n, n + 1,
                                                    memory_order_relaxed, memory_order_relaxed));
    return true;
}

void sg_admit_slot_give(struct sg_route *r)
{
    atomic_fetch_sub_explicit(&r->share->nsessions, 1, memory_order_relaxed);
}

/* ---- per-source rate of new sessions (token buckets) ---- */

/* Returns true when the source may open one more session now. */
static bool rate_allow(struct sg_route *r, const struct sockaddr *sa)
{
    unsigned char key[16];
    size_t keylen = sg_addr_source_key(sa, (int)r->conf.source_prefix_v6, key);
    double rate = (double)r->conf.new_sessions_per_source;
    uint64_t now = uv_now(r->ctx->loop);
    unsigned char h[crypto_shorthash_BYTES];
    struct sg_rate_bucket *b = NULL, *victim = NULL;
    size_t start;

    /* Find the source's bucket, or a free or stale slot for it. */
    crypto_shorthash(h, key, keylen, r->hash_key);
    memcpy(&start, h, sizeof(start));
    for (size_t i = 0; i < RATE_PROBE; i++) {
        struct sg_rate_bucket *c = &r->rates[(start + i) & (SG_RATE_SLOTS - 1)];
        if (c->keylen == keylen && memcmp(c->key, key, keylen) == 0) {
            b = c;
            break;
        }
        /* A bucket idle long enough to be full again is as good as free. */
        if (!victim && (c->keylen == 0 || (double)(now - c->stamp) / 1000.0 * rate >= rate))
            victim = c;
    }
    if (!b) {
        if (!victim)
            return false; /* a flood of distinct sources filled the table */
        b = victim;
        memcpy(b->key, key, keylen);
        b->keylen = (uint8_t)keylen;
        b->tokens = rate;
        b->stamp = now;
    }

    /* Refill, then take one token. */
    b->tokens += (double)(now - b->stamp) / 1000.0 * rate;
    if (b->tokens > rate)
        b->tokens = rate;
    b->stamp = now;
    if (b->tokens < 1.0)
        return false;
    b->tokens -= 1.0;
    return true;
}

/* ---- rate-limited warnings ---- */


/* Events counted since the last warning, once the interval has passed (the sweep reports them). */
uint64_t sg_admit_warn_flush(struct sg_warn_limit *w, uint64_t now)
{
    uint64_t n = w->count;

    if (n == 0 || now - w->last_ms < SG_WARN_INTERVAL_MS)
        return 0;
    w->last_ms = now;
    w->count = 0;
    return n;
}

/* What bounds the table: "max_sessions N", or the open files limit. */
static const char *limit_source(const struct sg_route *r, char *buf, size_t cap)
{
    int64_t limit = table_limit(r);

    if (limit < r->conf.max_sessions)
        snprintf(buf, cap,
                 "%lld sessions, what the open files limit leaves room for; "
                 "max_sessions %lld",
                 (long long)limit, (long long)r->conf.max_sessions);
    else
        snprintf(buf, cap, "max_sessions %lld", (long long)limit);
    return buf;
}

void sg_admit_warn_session_limit(struct sg_route *r, uint64_t n, const char *last)
{
    sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, 0,
           "session limit (%lld) reached and every session is established: %llu datagram(s) "
           "from new clients dropped%s%s",
           (long long)table_limit(r), (unsigned long long)n, last ? "; the last from " : "",
           last ? last : "");
}

void sg_admit_warn_rate_limit(struct sg_route *r, uint64_t n, const char *last)
{
    sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, 0,
           "new-session rate limit (%lld per second per source, an IPv6 source being its "
           "/%lld): %llu datagram(s) from new clients dropped%s%s",
           (long long)r->conf.new_sessions_per_source, (long long)r->conf.source_prefix_v6,
           (unsigned long long)n,
           last ? "; the last from " : "", last ? last : "");
}

void sg_admit_warn_evicted(struct sg_route *r, uint64_t n)
{
    char why[128];

    sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, 0,
           "session table full (%s): %llu session(s) not yet established were ended "
           "(reason=evicted) to admit new clients",
           limit_source(r, why, sizeof(why)), (unsigned long long)n);
}

/* ---- receiving from clients ---- */

/* Is `a` (host and port) the address `b`, where a wildcard `b` stands for
 * any loopback address with its port? */
static bool same_endpoint(const struct sockaddr *a, const struct sockaddr *b)
{
    static const unsigned char zero[16], v6_loop[16] = {[15] = 1};
    unsigned char ka[16], kb[16];
    size_t na, nb;

    if (sg_addr_port(a) != sg_addr_port(b))
        return false;
    na = sg_addr_host_key(a, ka);
    nb = sg_addr_host_key(b, kb);
    if (na == nb && memcmp(ka, kb, na) == 0)
        return true;
    if (nb == 0 || memcmp(kb, zero, nb) != 0)
        return false;
    /* a wildcard listener: dual-stack [::] receives IPv4 clients too */
    return (na == 4 && ka[0] == 127) || (na == 16 && memcmp(ka, v6_loop, 16) == 0);
}

/* ---- slipgate's own sockets ---- */

static bool is_zero(const unsigned char *k, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (k[i])
            return false;
    return true;
}

/* An address of this machine: loopback, or one the route found at its start. */
static bool local_host(const struct sg_route *r, const unsigned char *k, size_t n)
{
    static const unsigned char v6_loop[16] = {[15] = 1};

    if ((n == 4 && k[0] == 127) || (n == 16 && memcmp(k, v6_loop, 16) == 0))
        return true;
    for (size_t i = 0; i < r->nlocals; i++)
        if (r->locals[i].len == n && memcmp(r->locals[i].key, k, n) == 0)
            return true;
    return false;
}

/* The machine's addresses now (getifaddrs); none on failure (loopback still counts). */
void sg_admit_load_locals(struct sg_route *r)
{
    struct ifaddrs *ifa, *i;
    size_t n = 0;

    if (getifaddrs(&ifa) < 0)
        return;
    for (i = ifa; i; i = i->ifa_next)
        n += i->ifa_addr &&
             (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6);
    if (n && (r->locals = calloc(n, sizeof(*r->locals)))) {
        for (i = ifa; i; i = i->ifa_next) {
            if (!i->ifa_addr ||
                (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
                continue;
            r->locals[r->nlocals].len =
                (uint8_t)sg_addr_host_key(i->ifa_addr, r->locals[r->nlocals].key);
            r->nlocals++;
        }
    }
    freeifaddrs(ifa);
}

void sg_route__own_port(struct sg_route *r, const struct sockaddr *local, bool add)
{
    struct sg_own_sockets *own = *r->ctx->own;
    int port = sg_addr_port(local);
    uint64_t bit = (uint64_t)1 << (port % 64);
    _Atomic uint64_t *w;
    unsigned char k[16];

    if (!own || port <= 0)
        return;
    w = local->sa_family == AF_INET ? &own->v4[port / 64] : &own->v6[port / 64];
    if (!add) {
        atomic_fetch_and_explicit(w, ~bit, memory_order_relaxed);
        atomic_fetch_and_explicit(&own->v6_any[port / 64], ~bit, memory_order_relaxed);
        atomic_fetch_and_explicit(&own->used[port / 64], ~bit, memory_order_relaxed);
        return;
    }
    if (local->sa_family == AF_INET) {
        uint32_t host;
        sg_addr_host_key(local, k);
        memcpy(&host, k, 4);
        atomic_store_explicit(&own->v4_host[port], host, memory_order_relaxed);
    } else if (is_zero(k, sg_addr_host_key(local, k))) {
        atomic_fetch_or_explicit(&own->v6_any[port / 64], bit, memory_order_relaxed);
    } else {
        atomic_fetch_and_explicit(&own->v6_any[port / 64], ~bit, memory_order_relaxed);
    }
    atomic_fetch_or_explicit(w, bit, memory_order_relaxed);
}

bool sg_route__own_claim(struct sg_route *r, int port)
{
    struct sg_own_sockets *own = *r->ctx->own;
    uint64_t bit = (uint64_t)1 << (port % 64);

    if (!own || port <= 0 || port > 65535)
        return true;
    return !(atomic_fetch_or_explicit(&own->used[port / 64], bit, memory_order_relaxed) & bit);
}

/* Is `a` (a local address) one of the upstream sockets? */
static bool own_upstream(const struct sg_route *r, const struct sockaddr *a, const unsigned char *k,
                         size_t n)
{
    const struct sg_own_sockets *own = *r->ctx->own;
    int port = sg_addr_port(a);
    uint64_t bit = (uint64_t)1 << (port % 64);
    uint32_t host;

    if (!own)
        return false;
    if (atomic_load_explicit(&own->v6[port / 64], memory_order_relaxed) & bit)
        return n == 16 || (atomic_load_explicit(&own->v6_any[port / 64], memory_order_relaxed) &
                           bit); /* not connected, dual-stack: IPv4 sources too */
    if (n != 4 || !(atomic_load_explicit(&own->v4[port / 64], memory_order_relaxed) & bit))
        return false;
    host = atomic_load_explicit(&own->v4_host[port], memory_order_relaxed);
    return host == 0 || memcmp(&host, k, 4) == 0;
}

/* Is `a` route `o`'s listening address, a wildcard one standing for every
 * address of this machine (the caller checked that `a` is one)? */
static bool listener_of(const struct sg_route *o, const struct sockaddr *a, const unsigned char *k,
                        size_t n)
{
    const struct sockaddr *l = (const struct sockaddr *)&o->listen_addr;
    unsigned char kl[16];
    size_t nl;

    if (l->sa_family == 0 || sg_addr_port(l) != sg_addr_port(a))
        return false;
    nl = sg_addr_host_key(l, kl);
    return is_zero(kl, nl) || (nl == n && memcmp(kl, k, n) == 0);
}

bool sg_route__own_socket(const struct sg_route *r, const struct sockaddr *a)
{
    unsigned char k[16];
    size_t n = sg_addr_host_key(a, k);
    int port = sg_addr_port(a);

    if (port <= 0 || !local_host(r, k, n))
        return false;
    if (own_upstream(r, a, k, n))
        return true;
    if (listener_of(r, a, k, n))
        return true;
    for (const struct sg_route *o = *r->ctx->routes; o; o = o->next)
        if (listener_of(o, a, k, n))
            return true;
    return false;
}

/* Is `from` a local address with one of the upstream sockets' ports? */
static bool own_upstream_source(const struct sg_route *r, const struct sockaddr *from)
{
    unsigned char k[16];
    size_t n = sg_addr_host_key(from, k);

    return local_host(r, k, n) && own_upstream(r, from, k, n);
}

/*
 * Can an upstream socket send to this route's listener?  A session's socket
 * is connected to its route's server (a NetQuake accept naming one of
 * slipgate's own sockets is refused), so only when a route's server is this
 * listener.  Otherwise a local client whose port an upstream socket took
 * after the client closed (its datagram still queued) is no loop.
 */
static bool server_listens(const struct sg_route *r)
{
    for (const struct sg_route *o = *r->ctx->routes; o; o = o->next) {
        const struct sockaddr *srv = (const struct sockaddr *)&o->server_addr;
        unsigned char k[16];
        size_t n = sg_addr_host_key(srv, k);

        if (local_host(r, k, n) && listener_of(r, srv, k, n))
            return true;
    }
    return false;
}

/* A source no session may have: a configured server (the session would
 * relay to itself) or one of slipgate's own sockets (a listener, or a
 * session's socket towards its server). */
bool sg_admit_loop_source(const struct sg_route *r, const struct sockaddr *from, const char **what)
{
    for (const struct sg_route *o = *r->ctx->routes; o; o = o->next) {
        if (same_endpoint(from, (const struct sockaddr *)&o->server_addr)) {
            *what = o == r ? "this route's server" : "the server of another route";
            return true;
        }
        if (same_endpoint(from, (const struct sockaddr *)&o->listen_addr)) {
            *what = "slipgate's own listener";
            return true;
        }
    }
    if (same_endpoint(from, (const struct sockaddr *)&r->server_addr) ||
        same_endpoint(from, (const struct sockaddr *)&r->listen_addr)) {
        *what = "this route's own address"; /* the route is not (or no longer) listed */
        return true;
    }
    if (sg_route__own_socket(r, from) && (!own_upstream_source(r, from) || server_listens(r))) {
        *what = "one of slipgate's own sockets";
        return true;
    }
    return false;
}

/* A newcomer refused: the table is full of sessions this loop may not end. */
static void session_limit(struct sg_route *r, const struct sockaddr *from, uint64_t now)
{
    char a[SG_ADDR_STRLEN];
    uint64_t n;

    r->counters.drops[SG_DROP_SESSION_LIMIT]++;
    if ((n = sg_warn_count(&r->warn_session_limit, now)))
        sg_admit_warn_session_limit(r, n, sg_relay_client_name(&r->relay, from, a, sizeof(a)));
}

/*
 * The eviction rule: a full table makes room by ending the oldest session
 * the server never answered, then the oldest one whose handshake has not
 * completed; established sessions are never ended for a newcomer.  The
 * table is full at max_sessions, at what the open files limit leaves room
 * for (table_limit), and whenever no descriptor is left (make_room).
 */
static struct sg_session *eviction_victim(struct sg_route *r)
{
    sg_route_deferred_drain(&r->relay); /* the stages as the datagrams so far make them */
    return r->waiting[SG_STAGE_UNANSWERED] ? r->waiting[SG_STAGE_UNANSWERED]
                                           : r->waiting[SG_STAGE_ANSWERED];
}

static void evict(struct sg_route *r, struct sg_session *victim, uint64_t now)
{
    uint64_t n;

    r->sessions_evicted++;
    sg_session_close(victim, "evicted"); /* gives its slot back */
    if ((n = sg_warn_count(&r->warn_evicted, now)))
        sg_admit_warn_evicted(r, n);
}

bool sg_route__make_room(struct sg_route *r)
{
    struct sg_session *victim = eviction_victim(r);

    if (!victim)
        return false;
    evict(r, victim, uv_now(r->ctx->loop));
    return true;
}

/* A datagram from a client that has no session yet: admit it or drop it
 * (a full table follows the eviction rule above). */
struct sg_session *sg_admit(struct sg_route *r, const struct sockaddr *from,
                           const struct sockaddr *server)
{
    char a[SG_ADDR_STRLEN];
    uint64_t now = uv_now(r->ctx->loop), n;
    struct sg_session *s, *victim = NULL;
    const char *what;
    bool reserved;

    if (sg_admit_loop_source(r, from, &what)) {
        r->counters.drops[SG_DROP_LOOP]++;
        if (!r->loop_logged)
            sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, 0,
                   "datagram from %s, %s: no session is opened for it (it would relay to "
                   "itself); such datagrams are dropped and counted as drops.loop",
                   sg_relay_client_name(&r->relay, from, a, sizeof(a)), what);
        r->loop_logged = true;
        return NULL;
    }
    /* A slot of max_sessions (every loop's sessions count), or a victim
     * of this loop's whose slot the newcomer takes. */
    if (!(reserved = slot_take(r))) {
        if (!(victim = eviction_victim(r))) {
            session_limit(r, from, now);
            return NULL;
        }
    }
    if (!rate_allow(r, from)) {
        if (reserved)
            sg_admit_slot_give(r);
        r->counters.drops[SG_DROP_RATE_LIMIT]++;
        sg_relay_client_name(&r->relay, from, a, sizeof(a));
        sg_log_at(r->ctx->log, SG_LOG_DEBUG, r->conf.name, 0,
                  "drop from %s: new-session rate limit", a);
        if ((n = sg_warn_count(&r->warn_rate_limit, now)))
            sg_admit_warn_rate_limit(r, n, a);
        return NULL;
    }
    if (victim) {
        evict(r, victim, now);
        if (!slot_take(r)) { /* another loop's newcomer took it first */
            session_limit(r, from, now);
            return NULL;
        }
    }
    if (sg_session_create_to(&r->relay, from, server, &s) < 0) {
        sg_admit_slot_give(r);
        r->counters.drops[SG_DROP_NO_SOCKET]++;
        return NULL;
    }
    return s;
}

