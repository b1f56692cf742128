/*
 * Spectators on a route's spectator port (spectate.h): the socket, the
 * table by address, admission (challenge, password, max_spectators), the
 * idle timeout and which session each spectator watches.  Everything the
 * game does is behind the codec's spectate hooks.
 */
#include "proxy/spectate.h"

#include "proxy/addr.h"
#include "proxy/log.h"
#include "protocols/error.h"
#include "protocols/json.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SWEEP_MS     1000
#define READS_PER_CB 64 /* datagrams read per readiness, so a flood cannot hold the loop */
#define REPLY_CAP    1400

struct emit_ctx {
    struct sg_spectate *sp;
    struct sg_spectator *who; /* NULL: an address that is no spectator */
    const struct sockaddr *to;
};

/* The only destination: the address that wrote to the socket. */
static int emit(void *ctx, const uint8_t *data, size_t len)
{
    struct emit_ctx *e = ctx;
    int err = sg_udp_send(&e->sp->sock, data, len, e->to);

    if (err < 0)
        return err;
    e->sp->stats.datagrams_out++;
    e->sp->stats.bytes_out += len;
    if (e->who)
        e->who->datagrams_out++;
    return 0;
}

/* ---- delayed streams (spectate_delay) ---- */

#define DELAY_TICK_MS 10

struct dq_item {
    struct dq_item *next;
    uint64_t at; /* uv_now() when it came */
    int32_t sequence;
    uint32_t len;
    uint8_t data[];
};

/* One session's server messages, waiting out the delay, and its delayed stream. */
struct sg_spect_delayq {
    struct sg_spect_delayq *next;
    uint64_t sid;
    void *stream;
    struct dq_item *head, *tail;
    size_t bytes;
    bool left; /* the player left: forgotten once played out */
};

static struct sg_spect_delayq *dq_find(const struct sg_spectate *sp, uint64_t sid)
{
    for (struct sg_spect_delayq *q = sp->delayqs; q && sid; q = q->next)
        if (q->sid == sid)
            return q;
    return NULL;
}

static void dq_pop(struct sg_spect_delayq *q)
{
    struct dq_item *it = q->head;

    q->head = it->next;
    if (!q->head)
        q->tail = NULL;
    q->bytes -= it->len;
    free(it);
}

static void dq_free(const struct sg_spectate *sp, struct sg_spect_delayq *q)
{
    while (q->head)
        dq_pop(q);
    sp->hooks->stream_destroy(q->stream);
    free(q);
}

/* Keep frame `f` of session `sid` until the delay has passed. */
static void dq_push(struct sg_spectate *sp, uint64_t sid, const struct sg_frame *f, uint64_t now)
{
    struct sg_spect_delayq *q = dq_find(sp, sid);
    struct dq_item *it;

    if (!f->msg || f->msg_len == 0 || f->msg_len > SG_SPECT_DELAY_BYTES)
        return;
    if (!q) {
        if (!(q = calloc(1, sizeof(*q))))
            return;
        if (sp->hooks->stream_create(&q->stream) < 0) {
            free(q);
            return;
        }
        q->sid = sid;
        q->next = sp->delayqs;
        sp->delayqs = q;
    }
    /* bounded: the oldest go (the delayed stream then lacks them, as after loss) */
    while (q->head && q->bytes + f->msg_len > SG_SPECT_DELAY_BYTES) {
        dq_pop(q);
        sp->stats.delay_dropped++;
    }
    if (!(it = malloc(sizeof(*it) + f->msg_len)))
        return;
    it->next = NULL;
    it->at = now;
    it->sequence = f->sequence;
    it->len = (uint32_t)f->msg_len;
    memcpy(it->data, f->msg, f->msg_len);
    if (q->tail)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    q->bytes += f->msg_len;
}

static bool session_alive(const struct sg_spectate *sp, uint64_t id)
{
    for (struct sg_session *s = *sp->owner.sessions; s; s = s->next)
        if (s->sum.id == id)
            return true;
    return false;
}

/* ---- sessions to watch ---- */

static bool has_left(const struct sg_spectate *sp, uint64_t id)
{
    for (unsigned i = 0; i < sizeof(sp->left) / sizeof(sp->left[0]); i++)
        if (sp->left[i] == id && id)
            return true;
    return false;
}

static bool watchable(const struct sg_spectate *sp, const struct sg_session *s)
{
    return !s->closing && s->codec == sp->game && s->cstate && s->stage == SG_STAGE_ESTABLISHED &&
           !has_left(sp, s->sum.id);
}

static struct sg_session *session_by_id(const struct sg_spectate *sp, uint64_t id)
{
    for (struct sg_session *s = *sp->owner.sessions; s && id; s = s->next)
        if (s->sum.id == id)
            return watchable(sp, s) ? s : NULL;
    return NULL;
}

/* The next watchable session after `from` (or the first), `step` +1 or -1, wrapping. */
static struct sg_session *session_step(const struct sg_spectate *sp, uint64_t from, int step)
{
    struct sg_session *first = NULL, *last = NULL, *before = NULL, *after = NULL;
    bool seen = false;

    for (struct sg_session *s = *sp->owner.sessions; s; s = s->next) {
        if (s->sum.id == from && from) {
            seen = true;
            continue;
        }
        if (!watchable(sp, s))
            continue;
        if (!first)
            first = s;
        last = s;
        if (!seen)
            before = s;
        else if (!after)
            after = s;
    }
    if (step > 0)
        return after ? after : first;
    return before ? before : last;
}

/* `follow NAME|N`: the session whose player has that name (colours ignored) or slot. */
static struct sg_session *session_named(const struct sg_spectate *sp, const char *arg)
{
    char name[64], plain[64];
    char *end;
    long slot = strtol(arg, &end, 10);
    bool number = end != arg && *end == 0;

    for (struct sg_session *s = *sp->owner.sessions; s; s = s->next) {
        int n;
        size_t k = 0;

        if (!watchable(sp, s))
            continue;
        n = sp->hooks->player(s->cstate, name, sizeof(name));
        if (number && n == slot)
            return s;
        for (const char *p = name; *p && k + 1 < sizeof(plain); p++) {
            if (*p == '^' && p[1]) {
                p++;
                continue;
            }
            plain[k++] = *p;
        }
        plain[k] = 0;
        if (!number && (strcasecmp(plain, arg) == 0 || strcasecmp(name, arg) == 0))
            return s;
    }
    return NULL;
}

/* What spectator `v` is shown now: the live session, or its delayed stream. */
static bool src_of(const struct sg_spectate *sp, const struct sg_spectator *v,
                   struct sg_spect_src *out)
{
    const struct sg_spect_delayq *q;
    const struct sg_session *s;

    if (sp->delay_ms > 0) {
        if (!(q = dq_find(sp, v->watched)))
            return false;
        *out = (struct sg_spect_src){q->stream, true};
        return true;
    }
    if (!(s = session_by_id(sp, v->watched)))
        return false;
    *out = (struct sg_spect_src){s->cstate, false};
    return true;
}

static void watch(struct sg_spectate *sp, struct sg_spectator *v, struct sg_session *s)
{
    struct sg_spect_src src;
    char who[64];
    int slot;

    v->watched = s ? s->sum.id : 0;
    sp->hooks->watch(v->spec, src_of(sp, v, &src) ? &src : NULL);
    if (!s)
        return;
    slot = sp->hooks->player(s->cstate, who, sizeof(who));
    sg_log_at(sp->owner.ctx->log, SG_LOG_INFO, sp->owner.name, s->sum.id,
              "spectator %llu (%s) watches session %llu (player %d, %s)", (unsigned long long)v->id,
              sp->hooks->name(v->spec), (unsigned long long)s->sum.id, slot, who);
}

/* ---- the table ---- */

static struct sg_spectator *find(struct sg_spectate *sp, const struct sockaddr *from)
{
    for (struct sg_spectator *v = sp->list; v; v = v->next)
        if (sg_addr_equal((const struct sockaddr *)&v->addr, from))
            return v;
    return NULL;
}

static void end(struct sg_spectate *sp, struct sg_spectator *v, const char *reason, uint64_t now)
{
    char a[SG_ADDR_STRLEN];

    for (struct sg_spectator **p = &sp->list; *p; p = &(*p)->next) {
        if (*p != v)
            continue;
        *p = v->next;
        break;
    }
    sp->n--;
    sp->stats.ended++;
    sg_log(sp->owner.ctx->log, SG_LOG_INFO, sp->owner.name, 0,
           "spectator %llu (%s) from %s ended: %s (%.1f s, %llu datagrams in, %llu out)",
           (unsigned long long)v->id, sp->hooks->name(v->spec),
           sg_addr_format((const struct sockaddr *)&v->addr, a, sizeof(a)), reason,
           (double)(now - v->started_ms) / 1000.0, (unsigned long long)v->datagrams_in,
           (unsigned long long)v->datagrams_out);
    sp->hooks->destroy(v->spec);
    free(v);
}

/* The refusals not logged one by one since the window began, in one line. */
static void refusals_flush(struct sg_spectate *sp, uint64_t now)
{
    if (sp->refusals_quiet)
        sg_log(sp->owner.ctx->log, SG_LOG_INFO, sp->owner.name, 0,
               "%llu more spectator refusals in the last %.0f s (logged one by one: the first "
               "%d of a window)",
               (unsigned long long)sp->refusals_quiet,
               (double)(now - sp->refusals_since_ms) / 1000.0, SG_SPECT_REFUSALS_LOGGED);
    sp->refusals_quiet = 0;
    sp->refusals_logged = 0;
    sp->refusals_since_ms = now;
}

/* Count a refusal; true when it is logged one by one. */
static bool refusal(struct sg_spectate *sp, uint64_t now)
{
    sp->stats.refused++;
    if (now - sp->refusals_since_ms >= SG_SPECT_REFUSALS_WINDOW_MS)
        refusals_flush(sp, now);
    if (sp->refusals_logged < SG_SPECT_REFUSALS_LOGGED) {
        sp->refusals_logged++;
        return true;
    }
    sp->refusals_quiet++;
    return false;
}

/* The challenge an address gets: the same every time, unguessable elsewhere. */
static int32_t challenge_of(const struct sg_spectate *sp, const struct sockaddr *from)
{
    unsigned char key[16], h[crypto_shorthash_BYTES];
    size_t n = sg_addr_host_key(from, key);
    unsigned char msg[18];
    int32_t c;

    memcpy(msg, key, n);
    msg[n] = (unsigned char)(sg_addr_port(from) >> 8);
    msg[n + 1] = (unsigned char)sg_addr_port(from);
    crypto_shorthash(h, msg, n + 2, sp->key);
    memcpy(&c, h, sizeof(c));
    return c & 0x7fffffff;
}

/* The bucket of source address `from` (its host, any port), reset each second.
 * Addresses whose hashes share a bucket share its answers (never more). */
static struct sg_spect_bucket *bucket_of(struct sg_spectate *sp, const struct sockaddr *from,
                                         uint64_t now)
{
    unsigned char key[16], h[crypto_shorthash_BYTES];
    size_t n = sg_addr_source_key(from, sp->prefix6, key);
    struct sg_spect_bucket *b;
    uint64_t who;

    crypto_shorthash(h, key, n, sp->key);
    memcpy(&who, h, sizeof(who));
    b = &sp->buckets[who % SG_SPECT_BUCKETS];
    if (now - b->since_ms >= 1000)
        *b = (struct sg_spect_bucket){.since_ms = now};
    return b;
}

/* A datagram from an address that is no spectator: the handshake's first steps. */
static void stranger(struct sg_spectate *sp, const struct sockaddr *from, const uint8_t *data,
                     size_t len, uint64_t now)
{
    struct emit_ctx e = {sp, NULL, from};
    uint8_t out[REPLY_CAP];
    size_t n = 0;
    struct sg_spect_bucket *b = bucket_of(sp, from, now);
    int32_t challenge;
    int verdict;
    struct sg_spectator *v;
    struct sg_session *s;
    char a[SG_ADDR_STRLEN];
    int err;

    /* its address had its answers this second: not even read */
    if (b->n >= SG_SPECT_HELLO_PER_SECOND) {
        sp->stats.limited++;
        return;
    }
    challenge = challenge_of(sp, from);
    verdict = sp->hooks->hello(data, len, challenge, sp->password, out, sizeof(out), &n);
    if (verdict != SG_SPECT_IGNORE)
        b->n++;

    if (verdict == SG_SPECT_REPLY || verdict == SG_SPECT_REFUSE) {
        (void)emit(&e, out, n);
        if (verdict == SG_SPECT_REFUSE && refusal(sp, now)) {
            sg_log_at(sp->owner.ctx->log, SG_LOG_INFO, sp->owner.name, 0,
                      "spectator from %s refused (%.*s)", sg_addr_format(from, a, sizeof(a)),
                      (int)strcspn((const char *)out + 10, "\n"), (const char *)out + 10);
        }
        return;
    }
    if (verdict != SG_SPECT_CONNECT)
        return;
    if ((int64_t)sp->n >= sp->max) {
        if (sp->game->full_reply && (n = sp->game->full_reply(data, len, out, sizeof(out))) > 0)
            (void)emit(&e, out, n);
        if (refusal(sp, now))
            sg_log_at(sp->owner.ctx->log, SG_LOG_INFO, sp->owner.name, 0,
                      "spectator from %s refused: max_spectators (%lld) are watching",
                      sg_addr_format(from, a, sizeof(a)), (long long)sp->max);
        return;
    }
    if (!(v = calloc(1, sizeof(*v))))
        return;
    memcpy(&v->addr, from, sg_addr_len(from));
    e.who = v;
    err = sp->hooks->create(&v->spec, data, len, emit, &e);
    if (err < 0) {
        sp->stats.errors++;
        free(v);
        return;
    }
    v->id = ++sp->next_id;
    v->started_ms = v->last_ms = now;
    v->datagrams_in = 1;
    v->next = sp->list;
    sp->list = v;
    sp->n++;
    sp->stats.started++;
    sg_log(sp->owner.ctx->log, SG_LOG_INFO, sp->owner.name, 0,
           "spectator %llu (%s) from %s started (%zu watching)", (unsigned long long)v->id,
           sp->hooks->name(v->spec), sg_addr_format(from, a, sizeof(a)), sp->n);
    if ((s = session_step(sp, 0, 1)))
        watch(sp, v, s);
}

/* Spectator `v` watched the player of `s`, who left: a notice, the next player. */
static void moved_on(struct sg_spectate *sp, struct sg_spectator *v, struct sg_session *s)
{
    char who[64], text[128];

    if (sp->hooks->player(s->cstate, who, sizeof(who)) < 0 || !who[0])
        snprintf(who, sizeof(who), "the player");
    snprintf(text, sizeof(text), "%s^7 left", who);
    if (sp->hooks->notice)
        sp->hooks->notice(v->spec, text);
    watch(sp, v, session_step(sp, s->sum.id, 1));
}

/* A spectator's datagram: acknowledgements and console commands. */
static void spectator_datagram(struct sg_spectate *sp, struct sg_spectator *v, const uint8_t *data,
                               size_t len, uint64_t now)
{
    struct emit_ctx e = {sp, v, (const struct sockaddr *)&v->addr};
    struct sg_spect_ask_req req = {0};
    struct sg_session *to = NULL;
    struct sg_spect_src src;
    bool have = src_of(sp, v, &src);
    int err;

    v->last_ms = now;
    v->datagrams_in++;
    /* none watched yet, or the session it watched is gone (with a delay:
     * and its stream played out): the next one */
    if (!have) {
        struct sg_session *s = session_step(sp, v->watched, 1), *old = NULL;

        for (struct sg_session *o = *sp->owner.sessions; o && v->watched; o = o->next)
            if (o->sum.id == v->watched)
                old = o;
        if (old && has_left(sp, v->watched) && old->cstate)
            moved_on(sp, v, old); /* with a delay: its stream played out */
        else if (s || v->watched)
            watch(sp, v, s);
        have = src_of(sp, v, &src);
    }
    err = sp->hooks->input(v->spec, have ? &src : NULL, now, data, len, emit, &e, &req);
    if (err < 0)
        sp->stats.errors++;
    switch (req.ask) {
    case SG_SPECT_ASK_END:
        end(sp, v, "disconnected", now);
        return;
    case SG_SPECT_ASK_NEXT:
        to = session_step(sp, v->watched, 1);
        break;
    case SG_SPECT_ASK_PREV:
        to = session_step(sp, v->watched, -1);
        break;
    case SG_SPECT_ASK_FOLLOW:
        to = session_named(sp, req.arg);
        break;
    default:
        break;
    }
    if (to && to->sum.id != v->watched)
        watch(sp, v, to);
}

static void on_readable(struct sg_udp *u)
{
    struct sg_spectate *sp = u->data;
    uint64_t now = uv_now(sp->owner.ctx->loop);

    for (int i = 0; i < READS_PER_CB; i++) {
        struct sockaddr_storage from;
        int flags = 0;
        uint64_t at;
        int n = sg_udp_recv_one(u, sp->buf, sizeof(sp->buf), &from, &flags, &at);
        struct sg_spectator *v;

        if (n == -EAGAIN)
            break;
        if (n < 0 || (flags & MSG_TRUNC))
            continue;
        sp->stats.datagrams_in++;
        sp->stats.bytes_in += (uint64_t)n;
        if ((v = find(sp, (struct sockaddr *)&from)))
            spectator_datagram(sp, v, sp->buf, (size_t)n, now);
        else
            stranger(sp, (struct sockaddr *)&from, sp->buf, (size_t)n, now);
    }
}

/* Every spectator watching session `sid` (`s` when it is live and
 * watchable; unassigned spectators take it) gets its part of frame `f` of `src`. */
static void feed_all(struct sg_spectate *sp, struct sg_session *s, uint64_t sid,
                     const struct sg_spect_src *src, const struct sg_frame *f, uint64_t now_ms)
{
    struct sg_spectator *v, *next;

    for (v = sp->list; v; v = next) {
        struct emit_ctx e = {sp, v, (const struct sockaddr *)&v->addr};
        int err;

        next = v->next;
        if (!v->watched && s)
            watch(sp, v, s);
        if (v->watched != sid)
            continue;
        err = sp->hooks->feed(v->spec, src, f, now_ms, emit, &e);
        if (err < 0) {
            sp->stats.errors++;
            if (err == SG_E_STATE)
                end(sp, v, "too far behind (reliable commands overflowed)", now_ms);
        }
    }
}

/* The player of session `s` left the game: its spectators go to the next
 * one (with a delay, once its stream has played out). */
static void player_left(struct sg_spectate *sp, struct sg_session *s, uint64_t now_ms)
{
    struct sg_spect_delayq *q = dq_find(sp, s->sum.id);

    if (has_left(sp, s->sum.id))
        return;
    sp->left[sp->nleft++ % (sizeof(sp->left) / sizeof(sp->left[0]))] = s->sum.id;
    if (sp->delay_ms > 0) {
        if (q)
            q->left = true;
        return;
    }
    for (struct sg_spectator *v = sp->list; v; v = v->next)
        if (v->watched == s->sum.id)
            moved_on(sp, v, s);
    (void)now_ms;
}

void sg_spectate_feed(struct sg_spectate *sp, struct sg_session *s, const struct sg_frame *f,
                      uint64_t now_ms)
{
    struct sg_spect_src src = {s->cstate, false};

    if (sp && f->dir == SG_DIR_C2S && f->disconnect) {
        player_left(sp, s, now_ms);
        return;
    }
    if (!sp || f->dir != SG_DIR_S2C || f->kind != SG_FRAME_MESSAGE || s->codec != sp->game ||
        !s->cstate)
        return;
    /* with a delay, every session's stream from its start, for later */
    if (sp->delay_ms > 0) {
        dq_push(sp, s->sum.id, f, now_ms);
        return;
    }
    if (!watchable(sp, s))
        return;
    feed_all(sp, s, s->sum.id, &src, f, now_ms);
}

/* The delayed streams' clock: each message whose delay has passed. */
static void on_tick(uv_timer_t *t)
{
    struct sg_spectate *sp = t->data;
    uint64_t now = uv_now(sp->owner.ctx->loop);
    struct sg_spect_delayq **pq = &sp->delayqs, *q;

    while ((q = *pq)) {
        while (q->head && q->head->at + (uint64_t)sp->delay_ms <= now) {
            struct sg_spect_src src = {q->stream, true};
            const struct sg_frame *f = NULL;
            struct dq_item *it = q->head;

            if (sp->hooks->stream_feed(q->stream, it->sequence, it->data, it->len, &f) < 0)
                sp->stats.errors++;
            if (f)
                feed_all(sp, session_by_id(sp, q->sid), q->sid, &src, f, now);
            dq_pop(q);
        }
        /* a session gone (or its player left), its stream played out: forgotten */
        if (!q->head && (q->left || !session_alive(sp, q->sid))) {
            *pq = q->next;
            dq_free(sp, q);
            continue;
        }
        pq = &q->next;
    }
}

/* Spectators that went quiet. */
static void on_sweep(uv_timer_t *t)
{
    struct sg_spectate *sp = t->data;
    uint64_t now = uv_now(sp->owner.ctx->loop);
    struct sg_spectator *v, *next;

    for (v = sp->list; v; v = next) {
        next = v->next;
        if (now - v->last_ms >= (uint64_t)sp->timeout_ms)
            end(sp, v, "timed out", now);
    }
    if (sp->refusals_quiet && now - sp->refusals_since_ms >= SG_SPECT_REFUSALS_WINDOW_MS)
        refusals_flush(sp, now);
}

static void on_closed(uv_handle_t *h)
{
    struct sg_spectate *sp = h->data;

    sp->owner.closed(sp->owner.data);
}

int sg_spectate_update(struct sg_spectate *sp, const struct sg_route_conf *rc)
{
    char *pw = NULL;
    bool same_pw;

    if (!sp)
        return 0;
    same_pw = (sp->password == NULL) == (rc->spectate_password == NULL) &&
              (!sp->password || strcmp(sp->password, rc->spectate_password) == 0);
    sp->timeout_ms = rc->idle_timeout_ms;
    if (same_pw && sp->max == rc->max_spectators)
        return 0;
    if (!same_pw && rc->spectate_password && !(pw = strdup(rc->spectate_password)))
        return -ENOMEM;
    if (!same_pw) {
        free(sp->password);
        sp->password = pw;
    }
    sp->max = rc->max_spectators;
    sp->prefix6 = (int)rc->source_prefix_v6;
    sg_log(sp->owner.ctx->log, SG_LOG_INFO, sp->owner.name, 0,
           "spectators reloaded: %lld at most, %s (%zu watching stay)", (long long)sp->max,
           sp->password ? "password" : "no password", sp->n);
    return 0;
}

int sg_spectate_create(const struct sg_spectate_owner *owner, const struct sg_codec *game,
                       const struct sg_route_conf *rc, struct sg_spectate **out)
{
    struct sg_spectate *sp;
    char why[256], a[SG_ADDR_STRLEN];
    int err;

    *out = NULL;
    if (!game || !game->spectate)
        return SG_E_UNSUPPORTED;
    if (!(sp = calloc(1, sizeof(*sp))))
        return -ENOMEM;
    sp->owner = *owner;
    sp->game = game;
    sp->hooks = game->spectate;
    sp->max = rc->max_spectators;
    sp->timeout_ms = rc->idle_timeout_ms;
    sp->delay_ms = rc->spectate_delay_ms;
    sp->prefix6 = (int)rc->source_prefix_v6;
    randombytes_buf(sp->key, sizeof(sp->key));
    if (rc->spectate_password && !(sp->password = strdup(rc->spectate_password))) {
        free(sp);
        return -ENOMEM;
    }
    err = sg_addr_resolve(owner->ctx->loop, rc->spectate, true, &sp->addr, why, sizeof(why));
    if (err < 0) {
        sg_log(owner->ctx->log, SG_LOG_ERROR, owner->name, 0, "spectate: %s", why);
        goto err_free;
    }
    err = uv_timer_init(owner->ctx->loop, &sp->timer);
    if (err < 0)
        goto err_free;
    sp->timer.data = sp;
    sp->timer_open = true;
    owner->opened(owner->data);
    err = sg_udp_open(&sp->sock, owner->ctx->loop, (struct sockaddr *)&sp->addr, NULL, on_readable,
                      sp);
    if (err < 0) {
        sg_log(owner->ctx->log, SG_LOG_ERROR, owner->name, 0, "spectate: cannot bind %s: %s",
               rc->spectate, strerror(-err));
        *out = sp; /* the timer closes with the route */
        return err;
    }
    sp->sock_open = true;
    owner->opened(owner->data);
    if (sg_addr_port((struct sockaddr *)&sp->addr) == 0) {
        socklen_t len = sizeof(sp->addr);
        (void)getsockname(sp->sock.fd, (struct sockaddr *)&sp->addr, &len);
    }
    uv_timer_start(&sp->timer, on_sweep, SWEEP_MS, SWEEP_MS);
    if (sp->delay_ms > 0) {
        err = uv_timer_init(owner->ctx->loop, &sp->tick);
        if (err < 0) {
            *out = sp;
            return err;
        }
        sp->tick.data = sp;
        sp->tick_open = true;
        owner->opened(owner->data);
        uv_timer_start(&sp->tick, on_tick, DELAY_TICK_MS, DELAY_TICK_MS);
    }
    sg_log(owner->ctx->log, SG_LOG_INFO, owner->name, 0, "spectators on %s (%lld at most%s)",
           sg_addr_format((struct sockaddr *)&sp->addr, a, sizeof(a)), (long long)sp->max,
           sp->password ? ", password" : "");
    *out = sp;
    return 0;

err_free:
    free(sp->password);
    free(sp);
    return err;
}

void sg_spectate_json(const struct sg_spectate *sp, FILE *f, uint64_t now_ms)
{
    char a[SG_ADDR_STRLEN], who[64];

    fputs(",\n      \"spectators\": {\"port\": ", f);
    sg_json_cstr(f, sg_addr_format((const struct sockaddr *)&sp->addr, a, sizeof(a)));
    fprintf(f, ", \"delay_ms\": %lld, \"max\": %lld, \"list\": [", (long long)sp->delay_ms,
            (long long)sp->max);
    for (const struct sg_spectator *v = sp->list; v; v = v->next) {
        const struct sg_session *s = session_by_id(sp, v->watched);
        int slot = s ? sp->hooks->player(s->cstate, who, sizeof(who)) : -1;

        if (!s)
            who[0] = 0;
        fprintf(f, "%s{\"id\": %llu, \"name\": ", v == sp->list ? "" : ", ",
                (unsigned long long)v->id);
        sg_json_cstr(f, sp->hooks->name(v->spec));
        fputs(", \"address\": ", f);
        sg_json_cstr(f, sg_addr_format((const struct sockaddr *)&v->addr, a, sizeof(a)));
        fprintf(f,
                ", \"session\": %llu, \"slot\": %d, \"player\": ", (unsigned long long)v->watched,
                slot);
        sg_json_cstr(f, who);
        fprintf(f, ", \"seconds\": %llu, \"datagrams_in\": %llu, \"datagrams_out\": %llu}",
                (unsigned long long)((now_ms - v->started_ms) / 1000),
                (unsigned long long)v->datagrams_in, (unsigned long long)v->datagrams_out);
    }
    fputs("]}", f);
}

void sg_spectate_close(struct sg_spectate *sp, const char *reason)
{
    uint64_t now;

    if (!sp)
        return;
    now = uv_now(sp->owner.ctx->loop);
    refusals_flush(sp, now);
    while (sp->list)
        end(sp, sp->list, reason, now);
    if (sp->sock_open && sg_udp_close(&sp->sock, on_closed))
        sp->sock.poll.data = sp;
    if (sp->timer_open)
        uv_close((uv_handle_t *)&sp->timer, on_closed);
    if (sp->tick_open)
        uv_close((uv_handle_t *)&sp->tick, on_closed);
    sp->sock_open = sp->timer_open = sp->tick_open = false;
}

void sg_spectate_destroy(struct sg_spectate *sp)
{
    if (!sp)
        return;
    while (sp->list) { /* none once closed */
        struct sg_spectator *v = sp->list;
        sp->list = v->next;
        sp->hooks->destroy(v->spec);
        free(v);
    }
    while (sp->delayqs) {
        struct sg_spect_delayq *q = sp->delayqs;
        sp->delayqs = q->next;
        dq_free(sp, q);
    }
    free(sp->password);
    free(sp);
}
