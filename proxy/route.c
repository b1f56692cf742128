/*
 * Routes: the listening socket, the session table, per-source limits and
 * the idle sweep.  See route.h for ownership rules.
 */
#include "proxy/route.h"

#include "proxy/addr.h"
#include "proxy/table.h"
#include "filters/anon.h"
#include "filters/sign.h"

#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <stdarg.h>

/* The outbox tag of the route's own datagrams (route_by prx answers, pings). */
#define SG_RB_TAG 0xff
static void outbox_sent(void *ctx, uint8_t tag, const uint8_t *data, size_t len, int err,
                        int64_t resid_ns);
static int rb_start(struct sg_route *r, const struct sg_route_conf *rc);
static void rb_free(struct sg_route *r);
static int rb_load(struct sg_route *r, const struct sg_route_conf *rc, struct sg_addr_rule **out,
                   size_t *nout);
static void rb_pings_set(struct sg_route *r);
static void rb_ping_tick(struct sg_route *r, uint64_t now);

#define ENDED_MAX  100000 /* ended-session summaries kept for --stats */
#define REBIND_QUIET_MS 1000 /* a session's address this quiet lets an older one take it back */
#define MOVE_INTERVAL_MS 1000 /* at most one qport move per session in this time */

const char *const sg_drop_names[SG_DROP__COUNT] = {
#define SG__DROP_NAME(id, name, desc) name,
    SG_DROP_MAP(SG__DROP_NAME)
#undef SG__DROP_NAME
};


/* The session table's hooks (struct sg_relay_hooks). */
void sg_route__session_stage(struct sg_route *r, struct sg_session *s, enum sg_session_stage st)
{
    sg_table_stage(&r->table, s, st);
}

void sg_route__session_insert(struct sg_route *r, struct sg_session *s)
{
    sg_table_insert(&r->table, s);
}

void sg_route__session_remove(struct sg_route *r, struct sg_session *s)
{
    sg_table_remove(&r->table, s);
    sg_admit_slot_give(r); /* taken by sg_admit() */
}

/*
 * NAT rebinding (DESIGN.md rule 8): the games that carry a qport match a
 * new source port of the same host to the player's session, as their
 * servers do.  The session's game reads the qport (the codec table's
 * client_qport); the session keeps its upstream socket, decoder, filters
 * and recording, and the listener answers the new address from now on.
 * A late datagram from the address the session just left goes into the
 * session without moving it back, unless the new address has been quiet
 * for REBIND_QUIET_MS.  Two players behind one NAT have different qports;
 * where they drew the same one and a datagram continues both streams,
 * neither session moves.
 *
 * The qport alone is not enough: anyone sending from the player's IP (the
 * same NAT, or a spoofer) could take the session away.  The game's
 * client_follows hook wants a datagram that continues the client's stream
 * (sequence window; the Quake 3 71 checksum), and a session moves at most
 * once per MOVE_INTERVAL_MS.  A refused move drops the datagram (drop
 * reason `rebind`, a rate-limited warning) and the session stays.
 */
static void refuse_move(struct sg_route *r, struct sg_session *s, const struct sockaddr *from,
                        const char *why, uint64_t now)
{
    char a[SG_ADDR_STRLEN];
    uint64_t n;

    r->counters.drops[SG_DROP_REBIND]++;
    sg_route__client_name(r, from, a, sizeof(a));
    sg_log_at(r->ctx->log, SG_LOG_DEBUG, r->conf.name, s->sum.id,
              "client move from %s to %s (qport %d) refused: %s", s->sum.client, a, (int)s->qport,
              why);
    if ((n = sg_warn_count(&r->warn_rebind, now)))
        sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, s->sum.id,
               "%llu datagram(s) with a player's qport from another port of their host dropped "
               "(a forged or stale move); the last from %s for %s (qport %d): %s; repeated at "
               "most every %d s",
               (unsigned long long)n, a, s->sum.client, (int)s->qport, why,
               SG_WARN_INTERVAL_MS / 1000);
}

struct sg_session *sg_route__session_rebind(struct sg_route *r, const struct sockaddr *from,
                                            const uint8_t *data, size_t len, bool *refused)
{
    char was[SG_ADDR_STRLEN], why[160];
    struct sg_session *s = sg_table_host_chain(&r->table, from), *no = NULL, *take = NULL;
    uint64_t now = uv_now(r->ctx->loop);

    *refused = false;
    for (; s; s = s->host_next) {
        if (s->closing || s->qport < 0 || !s->game || !s->game->client_qport ||
            !sg_table_same_host((struct sockaddr *)&s->client, from) ||
            s->game->client_qport(&s->gstate, data, len, false) != s->qport)
            continue;
        if (s->prev_client.ss_family && sg_addr_equal((struct sockaddr *)&s->prev_client, from) &&
            now - s->client_seen < REBIND_QUIET_MS)
            return s; /* late, from where the player was */
        /* Refused: another session of the host with that qport may still take it. */
        if (s->moved_ms && now - s->moved_ms < MOVE_INTERVAL_MS) {
            snprintf(why, sizeof(why), "the session moved less than %d ms ago", MOVE_INTERVAL_MS);
            no = s;
            continue;
        }
        if (s->game->client_follows &&
            !s->game->client_follows(&s->gstate, s->codec == s->game ? s->cstate : NULL, data, len,
                                     why, sizeof(why))) {
            no = s;
            continue;
        }
        if (take) {
            /* Two players of one host with one qport, and the datagram continues
             * both streams: which one moved cannot be told, and a wrong guess
             * would send one player's game to the other.  Neither moves. */
            snprintf(why, sizeof(why),
                     "it would continue two sessions of that host with qport %d (sessions %llu "
                     "and %llu)",
                     (int)take->qport, (unsigned long long)take->sum.id,
                     (unsigned long long)s->sum.id);
            refuse_move(r, take, from, why, now);
            *refused = true;
            return NULL;
        }
        take = s;
    }
    if (take) {
        /* Re-key the session under its new address. */
        s = take;
        memcpy(&s->prev_client, &s->client, sizeof(s->prev_client));
        sg_table_rekey(&r->table, s, from);
        snprintf(was, sizeof(was), "%s", s->sum.client);
        sg_route__client_name(r, from, s->sum.client, sizeof(s->sum.client));
        if (r->anon_key)
            sg_anon_addr(r->anon_key, from, &s->client_anon);
        s->client_seen = now;
        s->moved_ms = now;
        r->client_moves++;
        sg_log_at(r->ctx->log, SG_LOG_INFO, r->conf.name, s->sum.id,
                  "client moved from %s to %s (qport %d)", was, s->sum.client, (int)s->qport);
        return s;
    }
    if (no) {
        refuse_move(r, no, from, why, now); /* `why` is the last refusal's */
        *refused = true;
    }
    return NULL;
}

void sg_codec_stats_add(struct sg_codec_stats *to, const struct sg_codec_stats *c)
{
    to->decoded += c->decoded;
    to->messages += c->messages;
    to->errors += c->errors;
    to->oob += c->oob;
    to->rejected += c->rejected;
    to->reencoded += c->reencoded;
    to->reencode_identical += c->reencode_identical;
    to->reencode_errors += c->reencode_errors;
}

/* An ended session's summary was not kept: add its decode and demo counts to
 * r->omitted, so that /metrics counters never go back. */
static void session_omitted(struct sg_route *r, const struct sg_session_summary *sum)
{
    r->omitted.demos += sum->demos;
    r->omitted.demo_bytes += sum->demo_bytes;
    if (!sum->codec)
        return;
    for (int i = 0; i < SG_ROUTE_OMITTED_CODECS; i++) {
        if (!r->omitted.codec[i] || strcmp(r->omitted.codec[i], sum->codec) == 0) {
            r->omitted.codec[i] = sum->codec; /* a static name (the codec table's) */
            sg_codec_stats_add(&r->omitted.cstats[i], &sum->cstats);
            return;
        }
    }
}

void sg_route__session_ended(struct sg_route *r, const struct sg_session_summary *sum)
{
    if (r->nended == r->ended_cap) {
        size_t cap = r->ended_cap ? r->ended_cap * 2 : 64;
        struct sg_session_summary *e;
        if (cap > ENDED_MAX || !(e = realloc(r->ended, cap * sizeof(*e)))) {
            r->ended_omitted++;
            session_omitted(r, sum);
            return;
        }
        r->ended = e;
        r->ended_cap = cap;
    }
    r->ended[r->nended++] = *sum;
}

/* ---- route_by prx: client-directed routing ---- */

static void outbox_sent(void *ctx, uint8_t tag, const uint8_t *data, size_t len, int err,
                        int64_t resid_ns)
{
    if (tag == SG_RB_TAG) /* the route's own answer or ping: no session counts it */
        return;
    sg_session_sent(ctx, tag, data, len, err, resid_ns);
}

static void rb_send(struct sg_route *r, const struct sockaddr *to, const uint8_t *data, size_t len)
{
    struct sockaddr_storage *slot = &r->rb->reply_to[r->rb->reply_next++ % SG_OUTBOX_ENTRIES];

    memcpy(slot, to, sg_addr_len(to));
    sg_outbox_push(&r->outbox, &r->listener, (struct sockaddr *)slot, data, len, r, SG_RB_TAG);
}

/* One allow-list entry from `text` ("" and "# ..." lines are none): 1, 0, or -EINVAL. */
static int rb_rule_add(struct sg_addr_rule **rules, size_t *n, size_t *cap, const char *text,
                       char *why, size_t whycap)
{
    struct sg_addr_rule rule;

    if (sg_addr_rule_parse(text, &rule, why, whycap) < 0)
        return -EINVAL;
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        struct sg_addr_rule *g = realloc(*rules, nc * sizeof(*g));
        if (!g)
            return -ENOMEM;
        *rules = g;
        *cap = nc;
    }
    (*rules)[(*n)++] = rule;
    return 1;
}

/* The allow-list: `prx_allow` lines, then the file's; every bad line is named. */
static int rb_load(struct sg_route *r, const struct sg_route_conf *rc, struct sg_addr_rule **out,
                   size_t *nout)
{
    struct sg_addr_rule *rules = NULL;
    size_t n = 0, cap = 0;
    char why[192], line[512];
    int bad = 0, err = 0, lineno = 0;
    FILE *f;

    for (int i = 0; i < rc->prx_allow.count && err >= 0; i++)
        for (int j = 0; j < rc->prx_allow.items[i].argc && err >= 0; j++)
            if ((err = rb_rule_add(&rules, &n, &cap, rc->prx_allow.items[i].argv[j], why,
                                   sizeof(why))) == -EINVAL) {
                sg_log(r->ctx->log, SG_LOG_ERROR, r->conf.name, 0, "prx_allow (line %d): %s",
                       rc->prx_allow.items[i].line, why);
                bad++;
                err = 0;
            }
    if (err >= 0 && rc->prx_allow_file) {
        if (!(f = fopen(rc->prx_allow_file, "r"))) {
            sg_log(r->ctx->log, SG_LOG_ERROR, r->conf.name, 0, "prx_allow_file %s: %s",
                   rc->prx_allow_file, strerror(errno));
            bad++;
        } else {
            while (err >= 0 && fgets(line, sizeof(line), f)) {
                char *p = line, *e;
                lineno++;
                line[strcspn(line, "#\r\n")] = 0;
                while (*p == ' ' || *p == '\t')
                    p++;
                for (e = p + strlen(p); e > p && (e[-1] == ' ' || e[-1] == '\t'); e--)
                    ;
                *e = 0;
                if (!*p)
                    continue;
                if ((err = rb_rule_add(&rules, &n, &cap, p, why, sizeof(why))) == -EINVAL) {
                    sg_log(r->ctx->log, SG_LOG_ERROR, r->conf.name, 0, "%s:%d: %s",
                           rc->prx_allow_file, lineno, why);
                    bad++;
                    err = 0;
                }
            }
            fclose(f);
        }
    }
    if (err < 0 || bad) {
        free(rules);
        return err < 0 ? UV_ENOMEM : UV_EINVAL;
    }
    *out = rules;
    *nout = n;
    return 0;
}

/* The servers pingstatus reports: the entries naming one IPv4 address and one port. */
static void rb_pings_set(struct sg_route *r)
{
    struct sg_route_by_state *rb = r->rb;

    rb->npings = rb->ping_next = 0;
    for (size_t i = 0; i < rb->nrules && rb->npings < SG_RB_PINGS; i++) {
        const struct sg_addr_rule *u = &rb->rules[i];
        struct sockaddr_in *a = (struct sockaddr_in *)&rb->pings[rb->npings].addr;
        if (u->keylen != 4 || u->bits != 32 || u->port_low != u->port_high)
            continue;
        memset(&rb->pings[rb->npings], 0, sizeof(rb->pings[0]));
        a->sin_family = AF_INET;
        memcpy(&a->sin_addr, u->key, 4);
        a->sin_port = htons((uint16_t)u->port_low);
        rb->pings[rb->npings].ms = -1;
        rb->npings++;
    }
}

static int rb_start(struct sg_route *r, const struct sg_route_conf *rc)
{
    const struct sg_codec *game = sg_protocol_codec(rc->protocol);
    int err;

    if (!game || !game->route_by)
        return UV_EINVAL; /* the configuration check says why */
    if (!(r->rb = calloc(1, sizeof(*r->rb))))
        return UV_ENOMEM;
    r->rb_hooks = game->route_by;
    randombytes_buf(r->rb->key, sizeof(r->rb->key));
    if ((err = rb_load(r, rc, &r->rb->rules, &r->rb->nrules)) < 0)
        return err;
    rb_pings_set(r);
    return 0;
}

static void rb_free(struct sg_route *r)
{
    if (r->rb)
        free(r->rb->rules);
    free(r->rb);
    r->rb = NULL;
}

/* The challenge the route gives `from`: a keyed hash of its address and port. */
static int32_t rb_challenge(const struct sg_route *r, const struct sockaddr *from)
{
    unsigned char k[18], h[crypto_shorthash_BYTES];
    size_t n = sg_addr_host_key(from, k);
    int port = sg_addr_port(from);
    uint32_t v;

    k[n] = (unsigned char)(port >> 8);
    k[n + 1] = (unsigned char)port;
    crypto_shorthash(h, k, n + 2, r->rb->key);
    memcpy(&v, h, sizeof(v));
    return (int32_t)(v & 0x7fffffff);
}

/* The source's entry (made, the oldest giving way, when it has none). */
static struct sg_rb_source *rb_source(struct sg_route *r, const struct sockaddr *from,
                                      uint64_t now)
{
    unsigned char key[16], h[crypto_shorthash_BYTES];
    size_t keylen = sg_addr_source_key(from, (int)r->conf.source_prefix_v6, key), start;
    struct sg_rb_source *victim = NULL;

    crypto_shorthash(h, key, keylen, r->hash_key);
    memcpy(&start, h, sizeof(start));
    for (size_t i = 0; i < 8; i++) {
        struct sg_rb_source *c = &r->rb->sources[(start + i) % SG_RB_SOURCES];
        if (c->keylen == keylen && memcmp(c->key, key, keylen) == 0)
            return c;
        if (!victim || c->keylen == 0 ||
            (victim->keylen && c->window + 60000 <= now && c->window < victim->window))
            victim = c;
    }
    memset(victim, 0, sizeof(*victim));
    memcpy(victim->key, key, keylen);
    victim->keylen = (uint8_t)keylen;
    victim->window = now;
    return victim;
}

/* Refuse a chain: count it, tell the client why, log once per source a minute. */
static void rb_refuse(struct sg_route *r, const struct sockaddr *from, enum sg_drop why,
                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void rb_refuse(struct sg_route *r, const struct sockaddr *from, enum sg_drop why,
                      const char *fmt, ...)
{
    uint64_t now = uv_now(r->ctx->loop);
    struct sg_rb_source *src = rb_source(r, from, now);
    char text[256], a[SG_ADDR_STRLEN];
    uint8_t out[320];
    va_list ap;
    int n;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    r->counters.drops[why]++;
    if ((n = r->rb_hooks->print(text, out, sizeof(out))) > 0)
        rb_send(r, from, out, (size_t)n);
    if (!src->logged || now - src->logged >= 60000) {
        src->logged = now;
        sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, 0,
               "chain from %s refused (%s): %s; this source's refusals are logged at most once "
               "a minute (counted as drops.%s)",
               sg_route__client_name(r, from, a, sizeof(a)), sg_drop_names[why], text,
               sg_drop_names[why]);
    }
}

static bool rb_allowed(const struct sg_route *r, const struct sockaddr *to)
{
    for (size_t i = 0; i < r->rb->nrules; i++)
        if (sg_addr_rule_match(&r->rb->rules[i], to))
            return true;
    return false;
}

/* A connect from a source with no session: check the chain, then begin it. */
static void rb_connect(struct sg_route *r, const uint8_t *data, size_t len,
                       const struct sockaddr *from)
{
    const struct sg_codec_route_by *rb = r->rb_hooks;
    struct sg_route_by_req *req = malloc(sizeof(*req));
    struct sockaddr_storage to;
    const struct sockaddr *dest = NULL;
    struct sg_rb_source *src;
    struct sg_session *s;
    uint64_t now = uv_now(r->ctx->loop);
    int err;

    if (!req)
        return;
    err = rb->connect_parse(data, len, req);
    if (err < 0) {
        rb_refuse(r, from, SG_DROP_PRX_INVALID, "slipgate: malformed connect or %s chain",
                  rb->key);
        goto out;
    }
    if (req->challenge != rb_challenge(r, from)) {
        rb_refuse(r, from, SG_DROP_PRX_INVALID, "slipgate: bad challenge (ask for one first)");
        goto out;
    }
    if (req->hops) {
        if (req->hops > (unsigned)r->conf.prx_max_hops) {
            rb_refuse(r, from, SG_DROP_PRX_HOPS,
                      "slipgate: the %s chain names %u hops, at most %lld are allowed here",
                      rb->key, req->hops, (long long)r->conf.prx_max_hops);
            goto out;
        }
        if (sg_addr_parse_numeric(req->next, 27500, &to) < 0) {
            rb_refuse(r, from, SG_DROP_PRX_INVALID,
                      "slipgate: next hop \"%s\" is not a numeric address[:port]", req->next);
            goto out;
        }
        dest = (const struct sockaddr *)&to;
        if (sg_route__own_socket(r, dest)) {
            rb_refuse(r, from, SG_DROP_PRX_SELF,
                      "slipgate: the %s chain names this proxy itself (%s)", rb->key, req->next);
            goto out;
        }
        if (!rb_allowed(r, dest)) {
            rb_refuse(r, from, SG_DROP_PRX_NOT_ALLOWED,
                      "slipgate: %s is not a destination this proxy relays to", req->next);
            goto out;
        }
    }
    src = rb_source(r, from, now);
    if (now - src->window >= 60000) {
        src->window = now;
        src->chains = src->queries = 0;
    }
    if (src->chains >= (uint64_t)r->conf.prx_chains_per_minute) {
        rb_refuse(r, from, SG_DROP_PRX_RATE,
                  "slipgate: too many new connections from your address, wait a minute");
        goto out;
    }
    src->chains++;
    if ((err = rb->connect_rewrite(req, "*qwfwd", "slipgate")) < 0) {
        rb_refuse(r, from, SG_DROP_PRX_INVALID, "slipgate: userinfo too long to forward");
        goto out;
    }
    if (r->ctx->draining && atomic_load_explicit(r->ctx->draining, memory_order_relaxed)) {
        r->counters.drops[SG_DROP_SHUTDOWN]++; /* draining: no new session */
        sg_route__door_draining(r, data, len, from);
        goto out;
    }
    if (!(s = sg_admit(r, from, dest)))
        goto out;
    {
        char a[SG_ADDR_STRLEN];
        sg_log(r->ctx->log, SG_LOG_INFO, r->conf.name, s->sum.id,
               "%s chain: %s -> %s (%u hop%s named)", rb->key, s->sum.client,
               sg_addr_format((struct sockaddr *)&s->server, a, sizeof(a)), req->hops,
               req->hops == 1 ? "" : "s");
    }
    sg_session_route_by_start(s, req);
    return;
out:
    free(req);
}

/* pingstatus: the pings measured so far (IPv4 servers only, as the convention carries). */
/* A query whose answer is larger than the question (pingstatus, status): a
 * source gets SG_RB_QUERIES answers a minute, so a spoofed one gets few. */
static bool rb_query_allowed(struct sg_route *r, const struct sockaddr *from)
{
    uint64_t now = uv_now(r->ctx->loop);
    struct sg_rb_source *src = rb_source(r, from, now);

    if (now - src->window >= 60000) {
        src->window = now;
        src->chains = src->queries = 0;
    }
    if (src->queries >= SG_RB_QUERIES) {
        r->counters.drops[SG_DROP_PRX_RATE]++;
        return false;
    }
    src->queries++;
    return true;
}

/* Answer a pingstatus: true when an answer went out (not refused by the rate). */
static bool rb_pingstatus(struct sg_route *r, const struct sockaddr *from)
{
    struct sg_route_by_state *rb = r->rb;
    struct sg_route_by_ping p[SG_RB_PINGS];
    uint8_t out[5 + 8 * SG_RB_PINGS];
    size_t n = 0;
    int len;

    if (!rb_query_allowed(r, from))
        return false;
    for (size_t i = 0; i < rb->npings; i++) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&rb->pings[i].addr;
        memcpy(p[n].ip4, &a->sin_addr, 4);
        p[n].port = ntohs(a->sin_port);
        p[n].ms = rb->pings[i].ms;
        n++;
    }
    if ((len = r->rb_hooks->pingstatus_reply(p, n, out, sizeof(out))) <= 0)
        return false;
    rb_send(r, from, out, (size_t)len);
    return true;
}

/* A ping answer from a server the route pinged: true when taken. */
static bool rb_ping_reply(struct sg_route *r, const uint8_t *data, size_t len,
                          const struct sockaddr *from)
{
    struct sg_route_by_state *rb = r->rb;

    if (!r->rb_hooks->is_ping_reply(data, len))
        return false;
    for (size_t i = 0; i < rb->npings; i++) {
        if (rb->pings[i].sent && sg_addr_equal(from, (struct sockaddr *)&rb->pings[i].addr)) {
            uint64_t ms = uv_now(r->ctx->loop) - rb->pings[i].sent;
            rb->pings[i].ms = ms > 0x7ffe ? -1 : (int)ms;
            rb->pings[i].sent = 0;
            return true;
        }
    }
    return false;
}

static void on_ping_readable(struct sg_udp *u)
{
    struct sg_route *r = u->data;
    struct sg_udp_batch *b = &r->batch;
    int n = sg_udp_recv(u, b);

    if (n < 0) /* an ICMP error first: the datagrams come with the next call */
        n = sg_udp_recv(u, b);
    for (int i = 0; i < n; i++)
        if (!(b->msg[i].msg_hdr.msg_flags & MSG_TRUNC))
            rb_ping_reply(r, b->iov[i].iov_base, b->msg[i].msg_len,
                          (struct sockaddr *)&b->from[i]);
}

/* On the sweep: at most one ping a tick, each server once per prx_ping_interval. */
static void rb_ping_tick(struct sg_route *r, uint64_t now)
{
    struct sg_route_by_state *rb = r->rb;
    uint64_t every = (uint64_t)r->conf.prx_ping_interval_ms;
    uint8_t q[16];
    int n;

    if (!every || !rb->npings || !r->listener_open || rb->ping_failed)
        return;
    if (!rb->ping_open) { /* IPv4 only, as pingstatus carries */
        struct sockaddr_in any = {.sin_family = AF_INET};
        int err = sg_udp_open(&rb->ping, r->ctx->loop, (struct sockaddr *)&any, NULL,
                              on_ping_readable, r);
        if (rb->ping.fd >= 0)
            r->open_handles++; /* until on_route_handle_closed */
        rb->ping_open = rb->ping.fd >= 0;
        if (err < 0) {
            sg_log(r->ctx->log, SG_LOG_ERROR, r->conf.name, 0,
                   "cannot open the socket for pingstatus pings: %s", strerror(-err));
            rb->ping_failed = true;
            return;
        }
    }
    for (size_t i = 0; i < rb->npings; i++) /* unanswered for 5 s: no answer */
        if (rb->pings[i].sent && now - rb->pings[i].sent >= 5000) {
            rb->pings[i].sent = 0;
            rb->pings[i].ms = -1;
        }
    if (rb->ping_last && now - rb->ping_last < every / rb->npings)
        return;
    if (rb->ping_next >= rb->npings)
        rb->ping_next = 0;
    if ((n = r->rb_hooks->ping_query(q, sizeof(q))) <= 0)
        return;
    rb->pings[rb->ping_next].sent = now ? now : 1;
    sg_udp_send(&rb->ping, q, (size_t)n, (struct sockaddr *)&rb->pings[rb->ping_next].addr);
    rb->ping_next++;
    rb->ping_last = now ? now : 1;
}

/*
 * A client datagram on a `route_by prx` route, before the usual path: the
 * route answers challenge requests, pingstatus, and (from a source with no
 * session) status and pings itself, as a node does, and begins a
 * session at a chain's connect; a challenge request from a client that has
 * a session ends it (a reconnect names its chain again).  True when taken.
 */
static bool rb_from_client(struct sg_route *r, const uint8_t *data, size_t len,
                           const struct sockaddr *from, struct sg_session **sp)
{
    const struct sg_codec_route_by *rb = r->rb_hooks;
    uint8_t out[160];
    int kind, n;

    kind = rb->classify(data, len);
    if (*sp) {
        if (kind != SG_ROUTE_BY_GETCHALLENGE || (*sp)->rb_req)
            return false;
        sg_session_close(*sp, "reconnect");
        *sp = NULL;
    }
    switch (kind) {
    case SG_ROUTE_BY_GETCHALLENGE:
        if ((n = rb->challenge_reply(rb_challenge(r, from), out, sizeof(out))) > 0) {
            rb_send(r, from, out, (size_t)n);
            r->rb_answers[kind]++;
        }
        return true;
    case SG_ROUTE_BY_PINGSTATUS:
        if (rb_pingstatus(r, from))
            r->rb_answers[kind]++;
        return true;
    case SG_ROUTE_BY_STATUS: /* the node's own: a browser tells a proxy node by it */
        if (rb_query_allowed(r, from) &&
            (n = rb->status_reply(r->conf.name, out, sizeof(out))) > 0) {
            rb_send(r, from, out, (size_t)n);
            r->rb_answers[kind]++;
        }
        return true;
    case SG_ROUTE_BY_PING: /* no larger than the question */
        if ((n = rb->ping_reply(out, sizeof(out))) > 0) {
            rb_send(r, from, out, (size_t)n);
            r->rb_answers[kind]++;
        }
        return true;
    case SG_ROUTE_BY_CONNECT:
        rb_connect(r, data, len, from);
        return true;
    default:
        return false;
    }
}

/* One datagram from a client: find or make its session, then relay. */
static void from_client(struct sg_route *r, const uint8_t *data, size_t len, int flags,
                        const struct sockaddr *from, uint64_t at)
{
    struct sg_session *s;
    const char *what;
    bool refused;

    if (flags & MSG_TRUNC) {
        r->counters.drops[SG_DROP_TRUNCATED]++;
        return;
    }
    if (r->closing || *r->ctx->stopping) {
        r->counters.drops[SG_DROP_SHUTDOWN]++;
        return;
    }
    if (sg_route__door_refuses(r, data, len, from))
        return; /* bans and admin controls: counted (and logged) there */
    s = sg_table_find(&r->table, from);
    if (r->rb && rb_from_client(r, data, len, from, &s))
        return; /* answered here (challenge, pingstatus, a refusal), or a chain begun */
    /* A new port of a known player (never one of slipgate's own addresses or
     * a server's: sg_admit() drops those). */
    if (!s && !sg_admit_loop_source(r, from, &what)) {
        s = sg_route__session_rebind(r, from, data, len, &refused);
        if (refused)
            return; /* counted and logged; the session stays */
    }
    if (!s && r->ctx->draining &&
        atomic_load_explicit(r->ctx->draining, memory_order_relaxed)) {
        /* Draining (SIGTERM): the sessions there go on, a newcomer gets none
         * (only the game's "server is full", where it has one). */
        r->counters.drops[SG_DROP_SHUTDOWN]++;
        sg_route__door_draining(r, data, len, from);
        return;
    }
    if (!s && !(s = sg_admit(r, from, NULL)))
        return;
    if (sg_addr_equal((struct sockaddr *)&s->client, from))
        s->client_seen = uv_now(r->ctx->loop);
    sg_session_forward_to_server(s, data, len, at);
}

static void on_client_readable(struct sg_udp *u)
{
    struct sg_route *r = u->data;
    struct sg_udp_batch *b = &r->batch;
    int n = sg_udp_recv(u, b);

    if (n < 0) {
        sg_log_at(r->ctx->log, SG_LOG_DEBUG, r->conf.name, 0, "receive error: %s",
                  strerror(-n));
        return;
    }
    for (int i = 0; i < n && r->listener.open; i++)
        from_client(r, b->iov[i].iov_base, b->msg[i].msg_len, b->msg[i].msg_hdr.msg_flags,
                    (const struct sockaddr *)&b->from[i], b->at[i]);
}

void sg_route_clients_before(struct sg_route *r, uint64_t at)
{
    for (int i = 0; i < SG_RECV_BATCH && r->listener.open && at; i++) {
        struct sockaddr_storage from;
        uint64_t t;
        int flags, n = sg_udp_peek_time(&r->listener, &t);

        if (n <= 0 || !t || t >= at)
            return; /* none, an error (the poll's receive reports it), or not earlier */
        n = sg_udp_recv_one(&r->listener, r->drain_cbuf, SG_MAX_DATAGRAM, &from, &flags, &t);
        if (n < 0)
            return;
        from_client(r, r->drain_cbuf, (size_t)n, flags, (const struct sockaddr *)&from, t);
    }
}

/* ---- the idle sweep ---- */

static const char *format_size(int64_t bytes, char *buf, size_t size)
{
    if (bytes > 0 && bytes % (1024 * 1024) == 0)
        snprintf(buf, size, "%lld MiB", (long long)(bytes / (1024 * 1024)));
    else if (bytes > 0 && bytes % 1024 == 0)
        snprintf(buf, size, "%lld KiB", (long long)(bytes / 1024));
    else
        snprintf(buf, size, "%lld bytes", (long long)bytes);
    return buf;
}

void sg_route_poll_kernel_drops(struct sg_route *r)
{
    struct sg_udp_info info;

    if (!r->listener_open || sg_udp_info(&r->listener, &info) < 0)
        return;
    r->kernel_drops += (uint32_t)(info.drops - r->kernel_drops_raw);
    r->kernel_drops_raw = info.drops;
    r->rcvbuf = info.rcvbuf;
    r->sndbuf = info.sndbuf;
}

/* Datagrams the kernel dropped at the listener never reach slipgate's own
 * counters: say so, at most once a minute, with what helps. */
static void check_kernel_drops(struct sg_route *r, uint64_t now)
{
    char size[32];

    sg_route_poll_kernel_drops(r);
    if (r->kernel_drops == r->kernel_drops_warned ||
        (r->kernel_drops_warned_ms && now - r->kernel_drops_warned_ms < 60000))
        return;
    sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, 0,
           "the kernel dropped %llu datagrams at the listener (%llu in all): its receive buffer "
           "(%s) was full; raise socket_buffer",
           (unsigned long long)(r->kernel_drops - r->kernel_drops_warned),
           (unsigned long long)r->kernel_drops, format_size(r->rcvbuf, size, sizeof(size)));
    r->kernel_drops_warned = r->kernel_drops;
    r->kernel_drops_warned_ms = now;
}

/* ---- the readiness probe ---- */

/* The status query for the page alone (`http` on, no `ready_probe`): for a
 * route whose game reads its server's answer, as its traffic does not name
 * the server (Quake 2, NetQuake); one query every SG_PAGE_PROBE_MS. */
#define SG_PAGE_PROBE_MS 10000

static bool probe_for_page(const struct sg_route *r)
{
    return r->conf.page_probe && r->game && r->game->status && r->game->status->parse;
}

static bool probe_wanted(const struct sg_route *r)
{
    return (r->conf.ready_probe > 0 || probe_for_page(r)) && r->ctx->worker == 0 && !r->rb;
}

/* The status hooks of the game whose answer this is (the route's game, or
 * any for protocol auto), or NULL: not a status answer. */
static const struct sg_codec_status *probe_reply_of(const struct sg_route *r, const uint8_t *data,
                                                    size_t len)
{
    if (r->game)
        return r->game->status && sg_codec_status_is_reply(r->game->status, data, len)
                   ? r->game->status
                   : NULL;
    for (int i = 0; sg_codecs[i]; i++)
        if (sg_codecs[i]->status && sg_codec_status_is_reply(sg_codecs[i]->status, data, len))
            return sg_codecs[i]->status;
    return NULL;
}

/* What an answer says of the server, where the game reads it: kept for
 * /api/routes; one that does not read is counted and ignored. */
static void probe_read(struct sg_route *r, const struct sg_codec_status *st, const uint8_t *data,
                       size_t len, uint64_t now)
{
    struct sg_codec_server sv;
    char a[SG_ADDR_STRLEN];
    uint64_t n;

    r->probe_answers++;
    if (!st->parse)
        return;
    if (st->parse(data, len, &sv) == 0) {
        r->probe_server = sv;
        r->probe_server_ms = now;
        return;
    }
    r->probe_malformed++;
    if (!(n = sg_warn_count(&r->warn_probe, now)))
        return;
    sg_addr_format((const struct sockaddr *)&r->server_addr, a, sizeof(a));
    sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, 0,
           "status query: server %s answered %s with %zu bytes that do not read as its status; "
           "ignored (%llu such answer(s) since the last report; said at most every %d s)",
           a, st->what, len, (unsigned long long)n, SG_WARN_INTERVAL_MS / 1000);
}

/* Only the configured server's answer counts. */
static void on_probe_readable(struct sg_udp *u)
{
    struct sg_route *r = u->data;
    struct sg_udp_batch *b = &r->batch;
    int n = sg_udp_recv(u, b);
    const struct sg_codec_status *st;

    for (int i = 0; i < n; i++)
        if (!(b->msg[i].msg_hdr.msg_flags & MSG_TRUNC) &&
            sg_addr_equal((struct sockaddr *)&b->from[i], (struct sockaddr *)&r->server_addr) &&
            (st = probe_reply_of(r, b->iov[i].iov_base, b->msg[i].msg_len))) {
            uint64_t now = uv_now(r->ctx->loop);
            r->probe_answer_ms = now ? now : 1;
            probe_read(r, st, b->iov[i].iov_base, b->msg[i].msg_len, r->probe_answer_ms);
        }
}

/* The query's interval: a fifth of ready_probe_timeout, 200 ms to 2 s (the page's alone: 10 s). */
static uint64_t probe_every(const struct sg_route *r)
{
    uint64_t t = (uint64_t)r->conf.ready_probe_timeout_ms / 5;

    if (r->conf.ready_probe <= 0)
        return SG_PAGE_PROBE_MS;
    return t < 200 ? 200 : t > 2000 ? 2000 : t;
}

/* On the probe's timer: the game's status query (each game's, for protocol auto) to the server. */
static void probe_tick(struct sg_route *r, uint64_t now)
{
    uint8_t q[64];
    int n;

    if (!probe_wanted(r) || !r->listener_open || r->probe_failed || r->closing)
        return;
    if (!r->probe_open) {
        struct sockaddr_storage any = {.ss_family = r->server_addr.ss_family};
        int err = sg_udp_open(&r->probe, r->ctx->loop, (struct sockaddr *)&any, NULL,
                              on_probe_readable, r);
        if (r->probe.fd >= 0)
            r->open_handles++; /* until on_route_handle_closed */
        r->probe_open = r->probe.fd >= 0;
        if (err < 0) {
            sg_log(r->ctx->log, SG_LOG_ERROR, r->conf.name, 0,
                   "status query: cannot open its socket: %s", strerror(-err));
            r->probe_failed = true;
            return;
        }
    }
    if (r->probe_sent_ms && now - r->probe_sent_ms < probe_every(r))
        return;
    r->probe_sent_ms = now ? now : 1;
    for (int i = 0; sg_codecs[i]; i++) {
        const struct sg_codec *c = sg_codecs[i];
        if (!c->status || (r->game && c != r->game))
            continue;
        if ((n = sg_codec_status_query(c->status, q, sizeof(q))) > 0)
            (void)sg_udp_send(&r->probe, q, (size_t)n, (struct sockaddr *)&r->server_addr);
    }
}

static void on_probe_timer(uv_timer_t *t)
{
    struct sg_route *r = t->data;

    probe_tick(r, uv_now(r->ctx->loop));
}

/* Start or stop the probe's timer as `ready_probe` says (creation, reload). */
static void probe_schedule(struct sg_route *r)
{
    if (!r->probe_timer_open)
        return;
    if (probe_wanted(r))
        uv_timer_start(&r->probe_timer, on_probe_timer, 0, probe_every(r));
    else
        uv_timer_stop(&r->probe_timer);
}

bool sg_route_probe_ready(const struct sg_route *r, char *why, size_t cap)
{
    uint64_t now = uv_now(r->ctx->loop), limit = (uint64_t)r->conf.ready_probe_timeout_ms;
    char a[SG_ADDR_STRLEN];

    if (r->conf.ready_probe <= 0 || !probe_wanted(r) || r->closing)
        return true;
    if (r->game && !r->game->status) /* a game with no status query: nothing to ask */
        return true;
    if (r->probe_answer_ms && now - r->probe_answer_ms <= limit)
        return true;
    sg_addr_format((const struct sockaddr *)&r->server_addr, a, sizeof(a));
    if (r->probe_answer_ms)
        snprintf(why, cap, "route %s: server %s has not answered a status query for %llu ms",
                 r->conf.name, a, (unsigned long long)(now - r->probe_answer_ms));
    else
        snprintf(why, cap, "route %s: server %s has not answered a status query yet", r->conf.name,
                 a);
    return false;
}

const struct sg_codec_server *sg_route_probe_server(const struct sg_route *r, uint64_t *age_ms,
                                                    bool *fresh)
{
    uint64_t now = uv_now(r->ctx->loop);

    *age_ms = 0;
    *fresh = false;
    if (!r->probe_server_ms)
        return NULL;
    *age_ms = now > r->probe_server_ms ? now - r->probe_server_ms : 0;
    /* fresh: within ready_probe_timeout, or three of the page's queries */
    *fresh = *age_ms <= (r->conf.ready_probe > 0 ? (uint64_t)r->conf.ready_probe_timeout_ms
                                                 : 3 * (uint64_t)SG_PAGE_PROBE_MS);
    return &r->probe_server;
}

static void on_sweep(uv_timer_t *t)
{
    struct sg_route *r = t->data;
    uint64_t now = uv_now(r->ctx->loop), n;
    struct sg_session *s, *next;

    check_kernel_drops(r, now);
    if (r->door_dirty) { /* a kick from the HTTP API */
        r->door_dirty = false;
        sg_route__door_enforce(r);
    }
    if (r->rb)
        rb_ping_tick(r, now);
    /* Draining: the masters stop listing the route now, not when it closes. */
    if (r->ctx->draining && atomic_load_explicit(r->ctx->draining, memory_order_relaxed))
        sg_master_drain(r->master);

    for (s = r->sessions; s; s = next) {
        next = s->next;
        if (s->closing)
            continue;
        if (s->left_ms && now - s->last_active >= SG_SESSION_LEFT_MS)
            sg_session_close(s, "client left");
        else if (now - s->last_active >= (uint64_t)r->conf.idle_timeout_ms)
            sg_session_close(s, "idle");
        else if (s->stage != SG_STAGE_ESTABLISHED &&
                 now - s->created >= (uint64_t)r->conf.handshake_timeout_ms)
            sg_session_close(s, "handshake timeout");
    }
    sg_chain_flush(r->chain);

    /* What the rate-limited warnings counted since they last spoke. */
    if ((n = sg_admit_warn_flush(&r->warn_session_limit, now)))
        sg_admit_warn_session_limit(r, n, NULL);
    if ((n = sg_admit_warn_flush(&r->warn_rate_limit, now)))
        sg_admit_warn_rate_limit(r, n, NULL);
    if ((n = sg_admit_warn_flush(&r->warn_evicted, now)))
        sg_admit_warn_evicted(r, n);
    if ((n = sg_admit_warn_flush(&r->warn_no_socket, now)))
        sg_log(r->ctx->log, SG_LOG_ERROR, r->conf.name, 0,
               "cannot open sockets towards the server: %llu new client(s) refused since the "
               "last report (drops.no_socket)",
               (unsigned long long)n);
    if ((n = sg_admit_warn_flush(&r->warn_unanswered, now)))
        sg_log(r->ctx->log, SG_LOG_INFO, r->conf.name, 0,
               "%llu more session(s) ended that the server never answered, since the last report",
               (unsigned long long)n);
    if ((n = sg_admit_warn_flush(&r->warn_rebind, now)))
        sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, 0,
               "%llu more datagram(s) with a player's qport from another port of their host "
               "dropped since the last report (drops.rebind)",
               (unsigned long long)n);
}

static uint64_t sweep_interval(const struct sg_route_conf *rc)
{
    int64_t t = rc->handshake_timeout_ms < rc->idle_timeout_ms ? rc->handshake_timeout_ms
                                                               : rc->idle_timeout_ms;
    uint64_t iv = (uint64_t)t / 4;
    return iv < 50 ? 50 : iv > 1000 ? 1000 : iv;
}

/* ---- life cycle ---- */

static int copy_conf(struct sg_route_conf *dst, const struct sg_route_conf *src)
{
    *dst = *src;
    dst->next = NULL;
    dst->name = strdup(src->name);
    dst->listen = strdup(src->listen);
    dst->server = strdup(src->server);
    dst->record = src->record ? strdup(src->record) : NULL;
    dst->sign_key = src->sign_key ? strdup(src->sign_key) : NULL;
    dst->anonymize_key = src->anonymize_key ? strdup(src->anonymize_key) : NULL;
    dst->prx_allow_file = src->prx_allow_file ? strdup(src->prx_allow_file) : NULL;
    dst->spectate = src->spectate ? strdup(src->spectate) : NULL; /* spectators */
    dst->spectate_password = src->spectate_password ? strdup(src->spectate_password) : NULL;
    memset(&dst->prx_allow, 0, sizeof(dst->prx_allow)); /* read into r->rb at start and reload */
    dst->top = NULL; /* the configuration may be replaced by a reload */
    dst->masters = sg_master_conf_copy(src->masters, src->nmasters);
    if (src->nmasters > 0 && !dst->masters)
        dst->nmasters = 0;
    sg_filter_list_ref(dst->filters);
    sg_ban_list_ref(dst->bans);
    sg_ban_list_ref(dst->admin_from);
    memset(&dst->ban_files, 0, sizeof(dst->ban_files)); /* read already: the file's */
    if (!dst->name || !dst->listen || !dst->server || (src->record && !dst->record) ||
        (src->sign_key && !dst->sign_key) || (src->anonymize_key && !dst->anonymize_key) ||
        (src->prx_allow_file && !dst->prx_allow_file) || (src->spectate && !dst->spectate) ||
        (src->spectate_password && !dst->spectate_password) ||
        (src->nmasters > 0 && !dst->masters))
        return UV_ENOMEM;
    return 0;
}

static void free_conf(struct sg_route_conf *c)
{
    free(c->name);
    free(c->listen);
    free(c->server);
    free(c->record);
    free(c->sign_key);
    free(c->anonymize_key);
    free(c->prx_allow_file);
    free(c->spectate); /* spectators */
    free(c->spectate_password);
    sg_master_conf_free(c->masters, c->nmasters);
    sg_filter_list_unref(c->filters);
    sg_ban_list_unref(c->bans);
    sg_ban_list_unref(c->admin_from);
    memset(c, 0, sizeof(*c));
}

/* `socket_buffer`: ask, then say what the kernel gave, and why when less. */
static void apply_socket_buffer(struct sg_route *r, int64_t bytes)
{
    char want[32], rs[32], ss[32];
    int rcv, snd, err = sg_udp_set_buffers(&r->listener, (int)bytes, &rcv, &snd);

    format_size(bytes, want, sizeof(want));
    format_size(rcv, rs, sizeof(rs));
    format_size(snd, ss, sizeof(ss));
    if (err < 0)
        sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, 0,
               "socket_buffer %s: %s; the listener has receive %s, send %s", want, strerror(-err),
               rs, ss);
    else if (rcv < bytes || snd < bytes)
        sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, 0,
               "socket_buffer %s: the kernel capped the listener at receive %s, send %s; raise "
               "net.core.rmem_max and net.core.wmem_max (sysctl) or run with CAP_NET_ADMIN",
               want, rs, ss);
    else if (r->ctx->worker == 0) /* the other loops' listeners are alike */
        sg_log(r->ctx->log, SG_LOG_INFO, r->conf.name, 0, "listener buffers: receive %s, send %s",
               rs, ss);
}

static int open_listener(struct sg_route *r)
{
    char why[256], a[SG_ADDR_STRLEN];
    int err, fd;

    /* Resolve both ends. */
    err = sg_addr_resolve(r->ctx->loop, r->conf.listen, true, &r->listen_addr, why, sizeof(why));
    if (err == 0)
        err = sg_addr_resolve(r->ctx->loop, r->conf.server, false, &r->server_addr, why,
                              sizeof(why));
    if (err < 0) {
        sg_log(r->ctx->log, SG_LOG_ERROR, r->conf.name, 0, "%s", why);
        return err;
    }

    /* Bind; an IPv6 wildcard is dual-stack; worker loops share the address. */
    fd = r->ctx->nworkers > 1 && r->owner.take_listener
             ? r->owner.take_listener(r->owner.data, r->conf.name)
             : -1;
    if (fd >= 0)
        err = sg_udp_adopt(&r->listener, r->ctx->loop, fd, on_client_readable, r);
    else if (fd < -1) { /* the address is taken (app.c's plain bind said so) */
        r->listener.fd = -1;
        err = fd;
    } else if (r->ctx->nworkers > 1)
        err = sg_udp_open_shared(&r->listener, r->ctx->loop, (struct sockaddr *)&r->listen_addr,
                                 on_client_readable, r);
    else
        err = sg_udp_open(&r->listener, r->ctx->loop, (struct sockaddr *)&r->listen_addr, NULL,
                          on_client_readable, r);
    if (r->listener.fd >= 0) {
        r->listener_open = true;
        r->open_handles++;
    }
    if (err < 0) {
        sg_log(r->ctx->log, SG_LOG_ERROR, r->conf.name, 0, "cannot listen on %s: %s%s",
               sg_addr_format((struct sockaddr *)&r->listen_addr, a, sizeof(a)), strerror(-err),
               err == -EADDRINUSE ? " (another program, perhaps another slipgate, has it)" : "");
        return err;
    }
    /* Port 0: the port the kernel gave (every loop's socket has it, app.c). */
    if (sg_addr_port((struct sockaddr *)&r->listen_addr) == 0) {
        socklen_t len = sizeof(r->listen_addr);
        if (getsockname(r->listener.fd, (struct sockaddr *)&r->listen_addr, &len) < 0)
            return -errno;
    }
    if (r->conf.socket_buffer > 0)
        apply_socket_buffer(r, r->conf.socket_buffer);
    return 0;
}

void sg_route__handle_closed(struct sg_route *r)
{
    r->open_handles--;
    if (r->closing && r->open_handles == 0)
        r->owner.closed(r->owner.data, r); /* may free r */
}

static void on_route_handle_closed(uv_handle_t *h)
{
    sg_route__handle_closed(h->data);
}

/* Filters log through the proxy's log, with the filter's label. */
static void chain_log(void *ctx, enum sg_filter_log_level level, const char *filter,
                      uint64_t session, const char *text)
{
    static const enum sg_log_level map[] = {SG_LOG_ERROR, SG_LOG_WARN, SG_LOG_INFO, SG_LOG_DEBUG};
    struct sg_route *r = ctx;

    sg_log_at(r->ctx->log, map[level <= SG_FILTER_LOG_DEBUG ? level : SG_FILTER_LOG_DEBUG],
              r->conf.name, session, "%s: %s", filter, text);
}

static int make_chain(struct sg_route *r, struct sg_filter_list *list, struct sg_chain **out)
{
    char why[512];
    int err = sg_chain_create(list, chain_log, r, out, why, sizeof(why));

    if (err < 0)
        sg_log(r->ctx->log, SG_LOG_ERROR, r->conf.name, 0, "%s", why);
    return err;
}

/* The route's signing key (checked at load already; read again for this route's own copy). */
static int load_sign_key(struct sg_route *r)
{
    char why[512];
    int err;

    if (!(r->sign_key = calloc(1, sizeof(*r->sign_key))))
        return UV_ENOMEM;
    err = sg_sign_key_load(r->conf.sign_key, r->sign_key, why, sizeof(why));
    if (err < 0) {
        sg_log(r->ctx->log, SG_LOG_ERROR, r->conf.name, 0, "%s", why);
        return UV_EINVAL;
    }
    if (r->ctx->worker == 0) /* said once, by worker 0 */
        sg_log(r->ctx->log, SG_LOG_INFO, r->conf.name, 0,
               "signing recordings with key %s (checkpoints every %lld ms)", r->sign_key->id,
               (long long)r->conf.sign_interval_ms);
    return 0;
}

static void free_sign_key(struct sg_route *r)
{
    sg_sign_key_wipe(r->sign_key);
    free(r->sign_key);
    r->sign_key = NULL;
}

/* The route's pseudonym key (checked, or made, at load already; read again for this route). */
static int load_anon_key(struct sg_route *r)
{
    char why[PATH_MAX + 200];
    bool created;
    int err;

    if (!(r->anon_key = calloc(1, sizeof(*r->anon_key))))
        return UV_ENOMEM;
    err = sg_anon_key_load(r->conf.anonymize_key, r->anon_key, &created, why, sizeof(why));
    if (err < 0) {
        sg_log(r->ctx->log, SG_LOG_ERROR, r->conf.name, 0, "%s", why);
        return UV_EINVAL;
    }
    sg_log(r->ctx->log, SG_LOG_INFO, r->conf.name, 0,
           "anonymize: clients are named by a keyed hash of their address (key %s%s)",
           r->conf.anonymize_key, created ? ", made now" : "");
    return 0;
}

static void free_anon_key(struct sg_route *r)
{
    sg_anon_key_wipe(r->anon_key);
    free(r->anon_key);
    r->anon_key = NULL;
}

char *sg_route__client_name(const struct sg_route *r, const struct sockaddr *sa, char *buf,
                            size_t cap)
{
    return sg_relay_client_name(&r->relay, sa, buf, cap);
}

static void spectate_feed(struct sg_route *r, struct sg_session *s, const struct sg_frame *f,
                          uint64_t now_ms)
{
    sg_spectate_feed(r->spect, s, f, now_ms);
}

/* The heartbeat engine's and the spectator port's handles count among the route's. */
static void master_opened(void *data)
{
    ((struct sg_route *)data)->open_handles++;
}

static void master_closed(void *data)
{
    sg_route__handle_closed(data);
}

static const char *conf_file(const struct sg_route_conf *rc)
{
    return rc->top && rc->top->file ? rc->top->file : NULL;
}

/* What the route's sessions call back (proxy/session.h). */
static const struct sg_relay_hooks relay_hooks = {
    .insert = sg_route__session_insert,
    .remove = sg_route__session_remove,
    .stage = sg_route__session_stage,
    .make_room = sg_route__make_room,
    .ended = sg_route__session_ended,
    .own_port = sg_route__own_port,
    .own_claim = sg_route__own_claim,
    .own_socket = sg_route__own_socket,
    .clients_before = sg_route_clients_before,
    .handle_closed = sg_route__handle_closed,
    .spectate = spectate_feed,
};

int sg_route_create(const struct sg_route_owner *owner, const struct sg_route_conf *rc,
                    struct sg_route **out)
{
    struct sg_route *r = calloc(1, sizeof(*r));
    char la[SG_ADDR_STRLEN], sa[SG_ADDR_STRLEN];
    int err;

    *out = NULL;
    if (!r)
        return UV_ENOMEM;
    r->owner = *owner;
    r->ctx = owner->ctx;
    r->route = r;
    r->hooks = &relay_hooks;
    sg_admit_load_locals(r);
    r->dq_limit = SG_DEFER_MAX;
    err = sg_table_init(&r->table);
    r->rates = calloc(SG_RATE_SLOTS, sizeof(*r->rates));
    r->drain_buf = malloc(SG_MAX_DATAGRAM);
    r->drain_cbuf = malloc(SG_MAX_DATAGRAM);
    err = (err == 0 && r->rates && r->drain_buf && r->drain_cbuf)
              ? sg_udp_batch_init(&r->batch)
              : UV_ENOMEM;
    if (err == 0)
        err = copy_conf(&r->conf, rc);
    if (err == 0 && !(r->share = sg_route__share(r->ctx->shares, rc->name)))
        err = UV_ENOMEM;
    if (err == 0 && r->conf.sign_key)
        err = load_sign_key(r);
    if (err == 0 && r->conf.anonymize > 0)
        err = load_anon_key(r);
    if (err == 0 && rc->route_by == SG_ROUTE_BY_PRX)
        err = rb_start(r, rc);
    if (err < 0)
        goto err_route;

    /* Every datagram leaves through the outbox. */
    err = sg_outbox_init(&r->outbox, r->ctx->loop, outbox_sent);
    if (err < 0)
        goto err_route;
    r->open_handles += 2;

    /* The idle sweep. */
    err = uv_timer_init(r->ctx->loop, &r->sweep);
    if (err < 0)
        goto err_route;
    r->sweep.data = r;
    r->sweep_open = true;
    r->open_handles++;
    uv_timer_start(&r->sweep, on_sweep, sweep_interval(&r->conf), sweep_interval(&r->conf));

    /* The readiness probe's timer (worker 0's route asks the server). */
    if (r->ctx->worker == 0) {
        err = uv_timer_init(r->ctx->loop, &r->probe_timer);
        if (err < 0)
            goto err_handles;
        r->probe_timer.data = r;
        r->probe_timer_open = true;
        r->open_handles++;
    }

    /* Held-back datagrams (network emulation). */
    err = sg_delay_init(&r->delay, r->ctx->loop, sg_session_send_delayed);
    if (err < 0)
        goto err_handles;
    r->delay.timer.data = &r->delay;
    r->open_handles++;

    /* The filters, then the listening socket. */
    err = make_chain(r, r->conf.filters, &r->chain);
    if (err < 0)
        goto err_handles;
    err = open_listener(r);
    if (err < 0)
        goto err_handles;
    sg_route_send_first_update(&r->relay);

    r->game = sg_protocol_codec(r->conf.protocol);
    r->codec = sg_codec_decodes(r->game) ? r->game : NULL;
    r->handshake = r->conf.protocol == SG_PROTO_AUTO ? sg_codec_handshaker()
                   : r->game && r->game->handshake  ? r->game
                                                    : NULL;
    if (r->game && r->game->master) {
        const struct sg_master_owner mo = {.ctx = r->ctx,
                                           .name = r->conf.name,
                                           .data = r,
                                           .opened = master_opened,
                                           .closed = master_closed};
        err = sg_master_create(&mo, r->game, rc, conf_file(rc), r->listener.fd,
                               (struct sockaddr *)&r->listen_addr,
                               (struct sockaddr *)&r->server_addr, &r->master);
        if (err < 0)
            goto err_handles;
    }
    if (r->conf.spectate && r->ctx->worker == 0) { /* spectators */
        const struct sg_spectate_owner so = {.ctx = r->ctx,
                                             .name = r->conf.name,
                                             .data = r,
                                             .sessions = &r->sessions,
                                             .opened = master_opened,
                                             .closed = master_closed};
        err = sg_spectate_create(&so, r->game, &r->conf, &r->spect);
        if (err < 0)
            goto err_handles;
        if (r->ctx->nworkers > 1)
            sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, 0,
                   "spectate: the spectator port sees only worker loop 0's sessions "
                   "(about 1 player in %d with %d worker loops); set 'workers 1' for "
                   "spectators to see every player",
                   r->ctx->nworkers, r->ctx->nworkers);
    }
    if (r->ctx->worker == 0) /* said once every loop's socket is in place (app.c) */
        sg_log(r->ctx->log, SG_LOG_INFO, r->conf.name, 0,
               "listening on %s, relaying to %s (%s%s)%s%s",
               sg_addr_format((struct sockaddr *)&r->listen_addr, la, sizeof(la)),
               sg_addr_format((struct sockaddr *)&r->server_addr, sa, sizeof(sa)),
               sg_protocol_name(r->conf.protocol),
               r->conf.reencode == SG_REENCODE_ALWAYS ? ", reencode always" : "",
               r->conf.record ? ", recording into " : "", r->conf.record ? r->conf.record : "");
    if (r->conf.protocol != SG_PROTO_AUTO && !r->codec && r->ctx->worker == 0)
        sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, 0,
               "no %s codec in this build yet: relaying without decoding",
               sg_protocol_name(r->conf.protocol));
    probe_schedule(r); /* readiness probe */
    *out = r;
    return 0;

err_handles:
    /* The caller runs the loop to finish closing, then destroys. */
    sg_route_close(r, "startup failed");
    *out = r;
    return err;
err_route:
    rb_free(r);
    free_sign_key(r);
    free_anon_key(r);
    sg_route__door_finish(r);
    free_conf(&r->conf);
    sg_udp_batch_finish(&r->batch);
    free(r->drain_buf);
    free(r->drain_cbuf);
    sg_table_free(&r->table);
    free(r->rates);
    free(r->locals);
    free(r);
    return err;
}

/* A part of a reload that did not apply: the old one stays (said with the reload's end). */
static void reload_kept(struct sg_route *r, const char *what)
{
    size_t n = strlen(r->reload_kept);

    snprintf(r->reload_kept + n, sizeof(r->reload_kept) - n, "%s%s", n ? ", " : "", what);
}

int sg_route_update(struct sg_route *r, const struct sg_route_conf *rc)
{
    struct sockaddr_storage server;
    char why[256];
    char *name;
    int err;

    r->reload_kept[0] = '\0';

    /* Datagrams already sent are decoded under the settings they were sent with. */
    sg_route_deferred_drain(&r->relay);

    /* What needs a restart is reported, not applied. */
    if (strcmp(rc->listen, r->conf.listen) != 0)
        sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, 0,
               "listen changed to %s: restart slipgate to apply it", rc->listen);
    if (rc->protocol != r->conf.protocol)
        sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, 0,
               "protocol changed to %s: applies to new sessions after a restart",
               sg_protocol_name(rc->protocol));
    if ((rc->sign_key == NULL) != (r->conf.sign_key == NULL) ||
        (rc->sign_key && strcmp(rc->sign_key, r->conf.sign_key) != 0))
        sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, 0,
               "sign_key changed: applies after a restart");
    if ((rc->anonymize > 0) != (r->conf.anonymize > 0) ||
        (rc->anonymize > 0 && strcmp(rc->anonymize_key, r->conf.anonymize_key) != 0))
        sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, 0,
               "anonymize or anonymize_key changed: applies after a restart");

    /* A new server applies to new sessions; live ones keep theirs. */
    if (strcmp(rc->server, r->conf.server) != 0) {
        err = sg_addr_resolve(r->ctx->loop, rc->server, false, &server, why, sizeof(why));
        if (err < 0) {
            sg_log(r->ctx->log, SG_LOG_ERROR, r->conf.name, 0, "reload: %s; keeping %s", why,
                   r->conf.server);
            reload_kept(r, "server (and every other setting of the route)");
            return err;
        }
        if (!(name = strdup(rc->server)))
            return UV_ENOMEM;
        free(r->conf.server);
        r->conf.server = name;
        r->server_addr = server;
        r->probe_server_ms = 0; /* the old server's status answer says nothing of the new one */
        sg_log(r->ctx->log, SG_LOG_INFO, r->conf.name, 0, "new sessions go to %s", name);
    }

    /* Recording starts or stops for live sessions too (session.c checks). */
    if ((rc->record == NULL) != (r->conf.record == NULL) ||
        (rc->record && strcmp(rc->record, r->conf.record) != 0)) {
        char *dir = rc->record ? strdup(rc->record) : NULL;
        if (rc->record && !dir)
            return UV_ENOMEM;
        free(r->conf.record);
        r->conf.record = dir;
        sg_log(r->ctx->log, SG_LOG_INFO, r->conf.name, 0, "recording %s%s", dir ? "into " : "off",
               dir ? dir : "");
    }
    /* Master servers: resolved again; a name that does not resolve keeps the old list. */
    if (r->master &&
        sg_master_update(r->master, rc, conf_file(rc), (struct sockaddr *)&r->server_addr) < 0)
        reload_kept(r, "masters");
    r->conf.reencode = rc->reencode;
    /* upstream source addresses: new sessions bind the new ones. */
    if (rc->nupstream_source != r->conf.nupstream_source ||
        memcmp(rc->upstream_source, r->conf.upstream_source,
               (size_t)rc->nupstream_source * sizeof(rc->upstream_source[0])) != 0) {
        memcpy(r->conf.upstream_source, rc->upstream_source, sizeof(rc->upstream_source));
        r->conf.nupstream_source = rc->nupstream_source;
        sg_log(r->ctx->log, SG_LOG_INFO, r->conf.name, 0,
               "upstream_source reloaded: %d address(es)", rc->nupstream_source);
    }
    r->conf.nq_accept_low = rc->nq_accept_low;
    r->conf.nq_accept_high = rc->nq_accept_high;

    /* Changed filters replace the chain, for live sessions too. */
    if (!sg_filter_list_equal(rc->filters, r->conf.filters)) {
        struct sg_chain *chain, *old = r->chain;
        err = make_chain(r, rc->filters, &chain);
        if (err < 0) {
            sg_log(r->ctx->log, SG_LOG_ERROR, r->conf.name, 0,
                   "reload: keeping the old filters");
            reload_kept(r, "filters");
        } else {
            for (struct sg_session *s = r->sessions; s; s = s->next)
                sg_session_chain_changed(s, old, chain);
            r->chain = chain;
            sg_chain_destroy(old);
            sg_filter_list_ref(rc->filters);
            sg_filter_list_unref(r->conf.filters);
            r->conf.filters = rc->filters;
            sg_log(r->ctx->log, SG_LOG_INFO, r->conf.name, 0, "filters reloaded (%d in the chain)",
                   chain ? chain->n : 0);
        }
    }

    /* bans and admin controls: at once, for live sessions too. */
    if (!sg_ban_list_equal(rc->bans, r->conf.bans) ||
        !sg_ban_list_equal(rc->admin_from, r->conf.admin_from)) {
        struct sg_ban_list *bans = r->conf.bans, *admin = r->conf.admin_from;
        r->conf.bans = sg_ban_list_ref(rc->bans);
        r->conf.admin_from = sg_ban_list_ref(rc->admin_from);
        sg_ban_list_unref(bans);
        sg_ban_list_unref(admin);
        sg_log(r->ctx->log, SG_LOG_INFO, r->conf.name, 0,
               "bans reloaded: %d ban rules, admin_from %s", rc->bans ? rc->bans->count : 0,
               rc->admin_from ? "set" : "unset (anyone)");
        sg_route__door_enforce(r);
    }

    /* The listener's buffers change at once; the system's default needs a new socket. */
    if (rc->socket_buffer != r->conf.socket_buffer) {
        if (rc->socket_buffer > 0 && r->listener_open)
            apply_socket_buffer(r, rc->socket_buffer);
        else if (rc->socket_buffer == 0)
            sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, 0,
                   "socket_buffer 0: the listener keeps its buffers until slipgate restarts");
        r->conf.socket_buffer = rc->socket_buffer;
    }

    /* route_by prx: the allow-list (file included) is read again; limits apply at once. */
    if (r->rb && rc->route_by == SG_ROUTE_BY_PRX) {
        struct sg_addr_rule *rules;
        size_t nrules;
        char *file = rc->prx_allow_file ? strdup(rc->prx_allow_file) : NULL;
        if (rc->prx_allow_file && !file)
            return UV_ENOMEM;
        if (rb_load(r, rc, &rules, &nrules) < 0) {
            free(file);
            sg_log(r->ctx->log, SG_LOG_ERROR, r->conf.name, 0,
                   "reload: keeping the old prx allow-list (%zu entries)", r->rb->nrules);
            reload_kept(r, "prx allow-list");
        } else {
            free(r->rb->rules);
            r->rb->rules = rules;
            r->rb->nrules = nrules;
            free(r->conf.prx_allow_file);
            r->conf.prx_allow_file = file;
            rb_pings_set(r);
            sg_log(r->ctx->log, SG_LOG_INFO, r->conf.name, 0,
                   "prx allow-list reloaded (%zu entries)", nrules);
        }
        r->conf.prx_max_hops = rc->prx_max_hops;
        r->conf.prx_chains_per_minute = rc->prx_chains_per_minute;
        r->conf.prx_ping_interval_ms = rc->prx_ping_interval_ms;
    } else if ((r->rb != NULL) != (rc->route_by == SG_ROUTE_BY_PRX)) {
        sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, 0,
               "route_by changed: applies after a restart");
    }

    /* spectators: the password and max_spectators at once (live spectators
     * stay); the port and the delay need a restart. */
    if (r->ctx->worker == 0) {
        if ((rc->spectate == NULL) != (r->conf.spectate == NULL) ||
            (rc->spectate && strcmp(rc->spectate, r->conf.spectate) != 0))
            sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, 0,
                   "spectate %s%s: restart slipgate to apply it",
                   rc->spectate ? "changed to " : "removed", rc->spectate ? rc->spectate : "");
        if (r->spect && rc->spectate && rc->spectate_delay_ms != r->conf.spectate_delay_ms)
            sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, 0,
                   "spectate_delay changed to %.1f s: restart slipgate to apply it",
                   (double)rc->spectate_delay_ms / 1000.0);
        /* without `spectate` now, the port keeps its settings until the restart */
        if (rc->spectate && sg_spectate_update(r->spect, rc) < 0)
            reload_kept(r, "spectate_password and max_spectators");
    }

    /* Limits and timeouts apply at once, to live sessions too. */
    r->conf.idle_timeout_ms = rc->idle_timeout_ms;
    r->conf.handshake_timeout_ms = rc->handshake_timeout_ms;
    r->conf.max_sessions = rc->max_sessions;
    r->conf.new_sessions_per_source = rc->new_sessions_per_source;
    r->conf.source_prefix_v6 = rc->source_prefix_v6;
    r->conf.ready_probe = rc->ready_probe; /* readiness probe */
    r->conf.ready_probe_timeout_ms = rc->ready_probe_timeout_ms;
    r->conf.page_probe = rc->page_probe;
    probe_schedule(r);
    sg_route_send_first_update(&r->relay);
    uv_timer_start(&r->sweep, on_sweep, sweep_interval(&r->conf), sweep_interval(&r->conf));
    return 0;
}

void sg_route_close(struct sg_route *r, const char *reason)
{
    struct sg_session *s, *next;

    if (r->closing)
        return;
    r->closing = true;
    for (s = r->sessions; s; s = next) {
        next = s->next;
        sg_session_close(s, reason);
    }
    if (r->warn_unanswered.count)
        sg_log(r->ctx->log, SG_LOG_INFO, r->conf.name, 0,
               "%llu more session(s) ended that the server never answered, since the last report",
               (unsigned long long)r->warn_unanswered.count);
    r->warn_unanswered.count = 0;
    if (r->sweep_open)
        uv_close((uv_handle_t *)&r->sweep, on_route_handle_closed);
    /* The masters hear that the route goes (from the listener, still open). */
    sg_master_close(r->master, strcmp(reason, "startup failed") != 0);
    sg_spectate_close(r->spect, "the route closed"); /* spectators */
    /* The sessions' datagrams are out (each close flushed); then the
     * outbox and the listener.  Their close callbacks find the route. */
    if (sg_outbox_close(&r->outbox, on_route_handle_closed))
        r->outbox.check.data = r->outbox.idle.data = r;
    sg_route_poll_kernel_drops(r);
    if (r->listener_open && sg_udp_close(&r->listener, on_route_handle_closed))
        r->listener.poll.data = r;
    if (r->rb && r->rb->ping_open && sg_udp_close(&r->rb->ping, on_route_handle_closed))
        r->rb->ping.poll.data = r;
    if (r->rb)
        r->rb->ping_open = false;
    if (r->probe_open && sg_udp_close(&r->probe, on_route_handle_closed))
        r->probe.poll.data = r;
    if (r->probe_timer_open)
        uv_close((uv_handle_t *)&r->probe_timer, on_route_handle_closed);
    r->probe_open = r->probe_timer_open = false;
    r->sweep_open = r->listener_open = false;
    sg_chain_flush(r->chain);
    if (r->delay.open) {
        r->delay.timer.data = r;
        sg_delay_close(&r->delay, on_route_handle_closed);
    }
}

static void clip(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

void sg_route_summarize(const struct sg_route *r, struct sg_route_summary *out)
{
    memset(out, 0, sizeof(*out));
    clip(out->name, sizeof(out->name), r->conf.name);
    clip(out->listen, sizeof(out->listen), r->conf.listen);
    clip(out->server, sizeof(out->server), r->conf.server);
    if (r->listen_addr.ss_family != 0)
        sg_addr_format((const struct sockaddr *)&r->listen_addr, out->listen_addr,
                       sizeof(out->listen_addr));
    out->protocol = r->conf.protocol;
    out->reason = r->retired_reason;
    out->retired_ms = r->retired_ms;
    out->sessions_total = r->sessions_total;
    out->sessions_dropped = r->nended + r->ended_omitted;
    out->counters = r->counters;
    out->rcvbuf = r->rcvbuf;
    out->sndbuf = r->sndbuf;
    out->kernel_drops = r->kernel_drops;
}

void sg_route_destroy(struct sg_route *r)
{
    if (!r)
        return;
    while (r->dq_head) { /* none is left once the sessions closed */
        struct sg_deferred *d = r->dq_head;
        r->dq_head = d->next;
        free(d);
    }
    while (r->dq_spares) {
        struct sg_deferred *d = r->dq_spares;
        r->dq_spares = d->next;
        free(d);
    }
    sg_chain_destroy(r->chain);
    r->chain = NULL;
    rb_free(r);
    free_sign_key(r);
    free_anon_key(r);
    sg_route__door_finish(r);
    sg_master_destroy(r->master);
    r->master = NULL;
    sg_spectate_destroy(r->spect); /* spectators */
    r->spect = NULL;
    free_conf(&r->conf);
    sg_udp_batch_finish(&r->batch);
    free(r->drain_buf);
    free(r->drain_cbuf);
    sg_outbox_finish(&r->outbox);
    sg_table_free(&r->table);
    free(r->rates);
    free(r->ended);
    free(r->locals);
    free(r);
}
