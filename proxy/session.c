/*
 * Sessions: one client address on one route, with its own upstream socket.
 *
 *   client --> listener --> session --> upstream socket --> server
 *   client <-- listener <-- session <-- upstream socket <-- server
 *
 * Only the configured server may talk to the upstream socket: anything else
 * is dropped (never an open relay).  A session is freed from the close
 * callback of its upstream socket, after it is out of the route's table.
 */
#include "proxy/addr.h"
#include "proxy/master.h"
#include "proxy/session.h"
#include "protocols/error.h"
#include "filters/anon.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t sg_warn_count(struct sg_warn_limit *w, uint64_t now)
{
    uint64_t n;

    w->count++;
    if (w->logged && now - w->last_ms < SG_WARN_INTERVAL_MS)
        return 0;
    n = w->count;
    w->logged = true;
    w->last_ms = now;
    w->count = 0;
    return n;
}

char *sg_relay_client_name(const struct sg_relay *r, const struct sockaddr *sa, char *buf,
                           size_t cap)
{
    if (r->anon_key)
        return sg_anon_name(r->anon_key, sa, buf, cap);
    return sg_addr_format(sa, buf, cap);
}

/* Count a failed send once per session in the log, every time in counters. */
static void count_send_error(struct sg_session *s, int err, const char *dir)
{
    struct sg_relay *r = s->relay;
    enum sg_drop why = err == -ENOBUFS       ? SG_DROP_QUEUE_FULL
                       : err == -ECONNREFUSED ? SG_DROP_UNREACHABLE
                                              : SG_DROP_SEND_ERROR;

    s->sum.counters.drops[why]++;
    r->counters.drops[why]++;
    if (why == SG_DROP_UNREACHABLE)
        return; /* logged by server_refused() */
    if (sg_counters_drops(&s->sum.counters) == 1)
        sg_log_at(r->ctx->log, SG_LOG_WARN, r->conf.name, s->sum.id, "send %s failed: %s", dir,
                  strerror(-err));
}

/* The server's host answered "port unreachable": say so once per session,
 * and for the route at most every SG_WARN_INTERVAL_MS (a flood of new
 * sources towards a server that is down would say it for each). */
static void server_refused(struct sg_session *s)
{
    struct sg_relay *r = s->relay;
    uint64_t n;

    if (s->refused_logged)
        return;
    s->refused_logged = true;
    if (!(n = sg_warn_count(&r->warn_unreachable, uv_now(r->ctx->loop))))
        return;
    sg_log_at(r->ctx->log, SG_LOG_WARN, r->conf.name, s->sum.id,
              "server %s unreachable: nothing listens on that port (ICMP port unreachable); "
              "relaying goes on in case it starts (%llu session(s) met it since the last report; "
              "said at most every %d s)",
              s->server_str, (unsigned long long)n, SG_WARN_INTERVAL_MS / 1000);
}

/* ---- sending, either way ---- */

/* The four legs as datagram taps see them. */
static void tap_datagram(struct sg_session *s, enum sg_leg leg, const uint8_t *data, size_t len)
{
    struct sg_relay *r = s->relay;
    struct sg_filter_call call = {.session = &s->fsess,
                                  .data = data,
                                  .len = len,
                                  .now_ms = uv_now(r->ctx->loop)};
    const struct sockaddr *client = (struct sockaddr *)&s->client;
    const struct sockaddr *listen = (struct sockaddr *)&r->listen_addr;
    const struct sockaddr *up = (struct sockaddr *)&s->upstream_local;
    const struct sockaddr *server = (struct sockaddr *)&s->server;

    switch (leg) {
    case SG_LEG_CLIENT_IN:
        sg_chain_datagram(r->chain, s->slots, &call, leg, data, len, client, listen);
        break;
    case SG_LEG_CLIENT_OUT:
        sg_chain_datagram(r->chain, s->slots, &call, leg, data, len, listen, client);
        break;
    case SG_LEG_SERVER_IN:
        sg_chain_datagram(r->chain, s->slots, &call, leg, data, len, server, up);
        break;
    case SG_LEG_SERVER_OUT:
        sg_chain_datagram(r->chain, s->slots, &call, leg, data, len, up, server);
        break;
    }
}

/* Hand a datagram to the route's outbox; sg_session_sent reports on it. */
static void send_dir(struct sg_session *s, enum sg_dir dir, const uint8_t *data, size_t len)
{
    struct sg_relay *r = s->relay;

    if (dir == SG_DIR_C2S)
        sg_outbox_push(&r->outbox, &s->upstream,
                       s->upstream.connected ? NULL : (struct sockaddr *)&s->server, data, len, s,
                       (uint8_t)dir);
    else
        sg_outbox_push(&r->outbox, &r->listener, (struct sockaddr *)&s->client, data, len, s,
                       (uint8_t)dir);
}

void sg_session_sent(void *session, uint8_t dir, const uint8_t *data, size_t len, int err,
                     int64_t resid_ns)
{
    struct sg_session *s = session;
    struct sg_relay *r = s->relay;

    if (err < 0) {
        if (err == -ECONNREFUSED)
            server_refused(s);
        count_send_error(s, err, dir == SG_DIR_C2S ? "to server" : "to client");
        return;
    }
    /* relayed (sent, or queued while the kernel would block): its residence */
    if (resid_ns >= 0)
        sg_hist_add(dir == SG_DIR_C2S ? &r->resid[SG_DIR_C2S] : &r->resid[SG_DIR_S2C],
                    (uint64_t)resid_ns);
    if (dir == SG_DIR_C2S) {
        s->sum.counters.c2s_packets++;
        s->sum.counters.c2s_bytes += len;
        r->counters.c2s_packets++;
        r->counters.c2s_bytes += len;
    } else {
        s->sum.counters.s2c_packets++;
        s->sum.counters.s2c_bytes += len;
        r->counters.s2c_packets++;
        r->counters.s2c_bytes += len;
    }
    if (r->chain && r->chain->has_datagram_taps)
        tap_datagram(s, dir == SG_DIR_C2S ? SG_LEG_SERVER_OUT : SG_LEG_CLIENT_OUT, data, len);
}

void sg_session_send_delayed(struct sg_session *s, enum sg_dir dir, const uint8_t *data,
                             size_t len)
{
    if (!s->closing)
        send_dir(s, dir, data, len);
}

/* How the datagrams of one frame go out: now or later, once or more. */
struct emit_ctx {
    struct sg_session *s;
    enum sg_dir dir;
    uint32_t delay_ms;
    uint8_t copies;
};

/* Never fails: what the kernel refuses is counted when the outbox is flushed. */
static int emit(void *ctx, const uint8_t *data, size_t len)
{
    struct emit_ctx *e = ctx;
    struct sg_relay *r = e->s->relay;

    for (int i = 0; i <= e->copies; i++) {
        if (e->delay_ms == 0 || sg_delay_push(&r->delay, uv_now(r->ctx->loop), e->delay_ms,
                                              e->s, e->dir, data, len) < 0)
            send_dir(e->s, e->dir, data, len);
    }
    return 0;
}

/* ---- decoding ---- */

static void fill_filter_session(struct sg_session *s);

/* The session takes `game` (NULL: none): its relay state starts afresh, and
 * its decoder when it has one. */
static void set_game(struct sg_session *s, const struct sg_codec *game)
{
    struct sg_relay *r = s->relay;
    int err;

    if (s->codec) {
        s->codec->destroy(s->cstate);
        s->codec = NULL;
        s->cstate = NULL;
    }
    s->game = game;
    memset(&s->gstate, 0, sizeof(s->gstate));
    s->qport = -1;
    if (!sg_codec_decodes(game))
        return;
    err = game->create(&s->cstate);
    if (err < 0) {
        sg_log(r->ctx->log, SG_LOG_ERROR, r->conf.name, s->sum.id,
               "cannot start the %s decoder: %s; relaying without decoding", game->name,
               sg_strerror(err));
        return;
    }
    s->codec = game;
    sg_log_at(r->ctx->log, SG_LOG_DEBUG, r->conf.name, s->sum.id, "decoding as %s", game->name);
}

/* The game of a new session: the route's, or (auto) whoever claims the first datagram. */
static void pick_game(struct sg_session *s, enum sg_dir dir, const uint8_t *data, size_t len)
{
    struct sg_relay *r = s->relay;
    const struct sg_codec *game;

    game = r->conf.protocol != SG_PROTO_AUTO ? r->game
           : dir == SG_DIR_C2S               ? sg_codec_probe(data, len)
                                             : NULL;
    /*
     * With protocol auto, keep looking while only connectionless packets
     * (0xFFFFFFFF...) pass: a client may ask for the server's info from its
     * game port before it connects.  The client's in-game traffic ends the
     * search; what the server sends never decides.
     */
    if (!game && r->conf.protocol == SG_PROTO_AUTO &&
        (dir == SG_DIR_S2C || (len >= 4 && memcmp(data, "\xff\xff\xff\xff", 4) == 0)))
        return;
    s->probed = true;
    if (game)
        set_game(s, game);
}

/*
 * Protocol auto: a client's connect request of another game decides
 * again.  DarkPlaces clients open with a bare getchallenge, which is
 * Quake 3's form too; their NetQuake connect request says otherwise.
 */
static void recheck_game(struct sg_session *s, const uint8_t *data, size_t len)
{
    struct sg_relay *r = s->relay;
    const struct sg_codec *game = sg_codec_connect(data, len, s->game);

    if (!game)
        return;
    if (s->codec)
        sg_log_at(r->ctx->log, SG_LOG_DEBUG, r->conf.name, s->sum.id,
                  "a %s connect request: not %s; %s", game->name, s->codec->name,
                  sg_codec_decodes(game) ? "decoding again" : "relaying without decoding");
    set_game(s, game);
    s->probed = true;
    fill_filter_session(s);
}

/* The session as filters see it; refreshed when the codec is decided. */
static void fill_filter_session(struct sg_session *s)
{
    struct sg_relay *r = s->relay;

    s->fsess.id = s->sum.id;
    s->fsess.route = r->conf.name;
    s->fsess.client = s->sum.client;
    s->fsess.server = s->server_str;
    s->fsess.client_addr = r->anon_key ? (struct sockaddr *)&s->client_anon
                                       : (struct sockaddr *)&s->client;
    s->fsess.client_anon = r->anon_key ? (struct sockaddr *)&s->client_anon : NULL;
    s->fsess.listen_addr = (struct sockaddr *)&r->listen_addr;
    s->fsess.upstream_addr = (struct sockaddr *)&s->upstream_local;
    s->fsess.server_addr = (struct sockaddr *)&s->server;
    s->fsess.started_ms = s->sum.started_ms;
    s->fsess.codec = s->codec;
    s->fsess.codec_state = s->cstate;
    s->fsess.sign_key = r->sign_key;
    s->fsess.sign_interval_ms = r->conf.sign_interval_ms;
}

/* The session's slots of `chain` end: recordings finish first, so that the
 * summary counts every file's bytes, then each filter's session_end. */
static void slots_end(struct sg_session *s, struct sg_chain *chain)
{
    for (int i = 0; i < chain->n; i++) {
        const struct sg_filter_impl *tail = sg_filter_conf_tail(chain->f[i].fc);

        if (tail && tail->finish && s->slots[i])
            tail->finish(s->slots[i], &s->fsess);
    }
    sg_session_record_summary(s, chain, &s->sum);
    sg_chain_session_end(chain, s->slots, &s->fsess);
}

int sg_session_chain_changed(struct sg_session *s, struct sg_chain *old, struct sg_chain *now)
{
    void **slots = NULL;

    if (old && s->slots)
        slots_end(s, old);
    if (now && !(slots = calloc((size_t)now->n, sizeof(*slots))))
        return UV_ENOMEM;
    free(s->slots);
    s->slots = slots;
    return 0;
}

bool sg_session_slot_figures(const struct sg_session *s, const struct sg_chain *chain, int i,
                             struct sg_filter_figures *out)
{
    const struct sg_filter_impl *impl = sg_filter_conf_tail(chain->f[i].fc);

    memset(out, 0, sizeof(*out));
    if (!impl || !impl->figures || !s->slots || !s->slots[i])
        return false;
    impl->figures(s->slots[i], out);
    return true;
}

/* Demo recording: what the filters of `chain` wrote for this session. */
void sg_session_record_summary(const struct sg_session *s, const struct sg_chain *chain,
                               struct sg_session_summary *sum)
{
    for (int i = 0; chain && s->slots && i < chain->n; i++) {
        struct sg_filter_figures fig;

        if (!sg_session_slot_figures(s, chain, i, &fig))
            continue;
        sum->demos += fig.files;
        sum->demo_bytes += fig.bytes;
        if (fig.last &&
            snprintf(sum->demo, sizeof(sum->demo), "%s", fig.last) >= (int)sizeof(sum->demo))
            memcpy(sum->demo + sizeof(sum->demo) - 4, "...", 4);
    }
}

/*
 * Point the upstream socket at the server's address and port, or leave it
 * without a peer while a handshake waits (`connect` false); on failure the
 * session stays as it was.
 */
static int aim_upstream(struct sg_session *s, int port, bool connect)
{
    struct sockaddr_storage to = s->server, now;
    int err = 0;

    sg_addr_set_port((struct sockaddr *)&to, port);
    /* What waits in the outbox goes out as it was queued (no address while
     * connected, the server's address while not). */
    sg_outbox_flush(&s->relay->outbox);
    if (connect)
        err = sg_udp_reconnect(&s->upstream, (struct sockaddr *)&to);
    else if (s->upstream.connected)
        err = sg_udp_disconnect(&s->upstream);
    if (err < 0)
        return err;
    /* Where the socket now sends from, for the loop check (route.c). */
    if (sg_udp_local(&s->upstream, &now) == 0)
        s->relay->hooks->own_port(s->route, (struct sockaddr *)&now, true);
    if (port != sg_addr_port((struct sockaddr *)&s->server)) {
        s->server = to;
        sg_addr_format((struct sockaddr *)&s->server, s->server_str, sizeof(s->server_str));
    }
    return 0;
}

/* The relay context's own_port: `port` of the server's host is one of slipgate's sockets. */
static bool server_port_is_own(const void *opaque, int port)
{
    const struct sg_session *s = opaque;
    struct sockaddr_storage to = s->server;

    sg_addr_set_port((struct sockaddr *)&to, port);
    return s->relay->hooks->own_socket(s->route, (struct sockaddr *)&to);
}

/*
 * A handshake that moves the server's port (NetQuake's accept): the
 * game's hook decides (protocols/nq/relay.c); this only moves the socket
 * and logs.  Returns the datagram to relay, with its length in *len.
 *
 * While a connect request waits for its answer the upstream socket has no
 * peer, so that the server's first datagrams from the port the answer names
 * (they come right behind it) are not dropped by the kernel before the
 * answer is seen; on_server_readable relays only the server's address and
 * port meanwhile.  The socket is connected again at the answer.
 */
static const uint8_t *handshake(struct sg_session *s, enum sg_dir dir, const uint8_t *data,
                                size_t *len)
{
    struct sg_relay *r = s->relay;
    struct sg_relay_ctx ctx = {
        .listen_port = sg_addr_port((struct sockaddr *)&r->listen_addr),
        .server_port = sg_addr_port((struct sockaddr *)&s->server),
        .port_low = r->conf.nq_accept_low,
        .port_high = r->conf.nq_accept_high,
        .own_port = server_port_is_own,
        .opaque = s,
    };
    struct sg_relay_move m;
    bool moves;
    int err;

    if (s->hs->handshake(&s->hs_state, &ctx, dir, data, *len, &m) < 0)
        return data;
    if (m.refused && !s->hs_refused_logged) {
        s->hs_refused_logged = true;
        sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, s->sum.id,
               "%s naming port %d refused: %s; relayed as it came, the session stays on %s",
               m.label, m.refused_port, m.refused, s->server_str);
    }
    moves = m.server_port > 0 && m.server_port != ctx.server_port;
    if (moves || m.awaiting == s->upstream.connected) {
        err = aim_upstream(s, moves ? m.server_port : ctx.server_port, !m.awaiting);
        if (err < 0 && moves) {
            sg_log(r->ctx->log, SG_LOG_ERROR, r->conf.name, s->sum.id,
                   "%s: cannot move to the server's port %d: %s; relaying it as it came",
                   m.label, m.server_port, strerror(-err));
            return data;
        }
        if (err < 0)
            sg_log_at(r->ctx->log, SG_LOG_DEBUG, r->conf.name, s->sum.id,
                      "upstream: cannot %s: %s", m.awaiting ? "dissolve its peer" : "connect",
                      strerror(-err));
        else if (moves && m.moved)
            sg_log(r->ctx->log, SG_LOG_INFO, r->conf.name, s->sum.id,
                   "%s: the server moved this client to %s; the client stays on port %d",
                   m.label, s->server_str, ctx.listen_port);
    }
    if (!m.data)
        return data;
    *len = m.len;
    return m.data;
}

/* What the codec has to say about the session (sg_codec.take_notice), at info. */
static void say_notice(struct sg_session *s)
{
    const char *notice;

    if (s->codec && s->cstate && s->codec->take_notice &&
        (notice = s->codec->take_notice(s->cstate)) != NULL)
        sg_log(s->relay->ctx->log, SG_LOG_INFO, s->relay->conf.name, s->sum.id, "%s", notice);
}

/*
 * "session start": at debug when the session opens, at info (the same
 * fields) once the server first answers it, so that a flood of spoofed
 * sources the server never answers does not flood the log; the codec's
 * notice waits for it too.
 */
static void log_start(struct sg_session *s, enum sg_log_level level)
{
    struct sg_relay *r = s->relay;
    char a[SG_ADDR_STRLEN];

    sg_log_at(r->ctx->log, level, r->conf.name, s->sum.id,
              "session start client=%s upstream_port=%d server=%s", s->sum.client,
              s->sum.upstream_port, sg_addr_format((struct sockaddr *)&s->server, a, sizeof(a)));
    if (level == SG_LOG_INFO)
        say_notice(s);
}

/*
 * Admission (route.h, enum sg_session_stage): the server's first answer
 * moves a session to ANSWERED; it is ESTABLISHED once, in addition, the
 * codec says the game's handshake completed.  A session whose codec is not
 * decided yet (protocol auto, only connectionless packets so far: servers
 * answer those to anyone, spoofed sources too) waits for the decision;
 * without a codec, or with one that has no `established` hook, the server's
 * answer is enough.
 */
static void update_stage(struct sg_session *s, enum sg_dir dir)
{
    struct sg_relay *r = s->relay;

    if (dir == SG_DIR_S2C && s->stage == SG_STAGE_UNANSWERED) {
        r->hooks->stage(r->route, s, SG_STAGE_ANSWERED);
        log_start(s, SG_LOG_INFO);
    }
    if (s->stage != SG_STAGE_ANSWERED || !s->probed)
        return;
    if (!s->codec || !s->codec->established || s->codec->established(s->cstate))
        r->hooks->stage(r->route, s, SG_STAGE_ESTABLISHED);
}

/* The web page's live stream (proxy/http.c) sees each frame as the taps do,
 * whether or not the route has filters. */
static void stream_frame(struct sg_session *s, struct sg_filter_call *call,
                         const struct sg_frame *f, const uint8_t *data, size_t len,
                         const struct sg_chain_result *res)
{
    const struct sg_frame_tap *t = *s->relay->ctx->taps;

    /* A new level: the masters hear of it (proxy/master.h). */
    if (f && f->new_level && f->dir == SG_DIR_S2C)
        sg_master_level(s->relay->master, f->level);
    if (!t || !f)
        return;
    call->session = &s->fsess;
    call->frame = f;
    call->data = data;
    call->len = len;
    call->dropped = res->drop;
    call->drop_filter = res->drop_filter;
    for (; t; t = t->next)
        t->frame(t->data, s, call);
}

/*
 * One datagram either way, after the relay's own bookkeeping: decode it,
 * run the filters, and send the original bytes, or the message rebuilt
 * from its decoded form when a filter changed it, the codec needs it
 * (numbering translated), or the route says `reencode always`.  Whatever
 * cannot be decoded or rebuilt is relayed as it came (rule 1).  Taps see
 * the frame as it went out.  `sent`: the send-first path already sent the
 * original bytes (the chain only watches), so nothing is sent here.
 */
/* The first decode error of a session: a warning of its own once the server
 * has answered, else one rate-limited line for the route. */
static void decode_error_warn(struct sg_session *s, enum sg_dir dir)
{
    struct sg_relay *r = s->relay;
    const char *way = dir == SG_DIR_C2S ? "client to server" : "server to client";
    uint64_t n;

    if (s->stage != SG_STAGE_UNANSWERED || dir == SG_DIR_S2C) {
        sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, s->sum.id,
               "first decode error (%s); the traffic is still relayed: %s", way,
               s->codec->describe(s->cstate));
        return;
    }
    if ((n = sg_warn_count(&r->warn_undecoded, uv_now(r->ctx->loop))))
        sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, s->sum.id,
               "%llu session(s) the server has not answered sent what does not decode (the "
               "last: client %s: %s); still relayed; repeated at most every %d s, each at debug",
               (unsigned long long)n, s->sum.client, s->codec->describe(s->cstate),
               SG_WARN_INTERVAL_MS / 1000);
    else
        sg_log_at(r->ctx->log, SG_LOG_DEBUG, r->conf.name, s->sum.id,
                  "first decode error (%s) before the server answered; still relayed: %s", way,
                  s->codec->describe(s->cstate));
}

/* What the filters of `s` get for frame `f` of datagram `data`. */
static void fill_call(struct sg_session *s, struct sg_filter_call *call,
                      struct sg_filter_proxy *proxy, const struct sg_frame *f, const uint8_t *data,
                      size_t len, uint64_t now_ms)
{
    call->session = &s->fsess;
    call->frame = f;
    call->data = data;
    call->len = len;
    call->now_ms = now_ms;
    proxy->codec = s->codec;
    proxy->codec_state = s->cstate;
    proxy->session_id = s->sum.id;
}

/*
 * The player's ping, timed from the traffic: a datagram one way that names
 * a number (ack_wanted) starts a probe of its direction when none is
 * awaited and SG_RTT_EVERY_MS have passed since the last began (a resend
 * of the same number restarts it; one unanswered for 5 s gives way); the
 * first datagram the other way whose `ack` reaches the number ends it, and
 * is a sample when it names that very number (a later one means the
 * datagram was lost or overtaken: no sample; but a Quake 3 server's
 * `reliable_ack`, for a frame without `ack`, acknowledges every command up
 * to it: a later one is a sample too).  Between probes a decoded
 * datagram costs a few comparisons; both times are arrival times (a
 * deferred decoding keeps its datagram's).
 */
static void rtt_note(struct sg_session *s, const struct sg_frame *f, uint64_t now)
{
    struct sg_rtt_probe *p = &s->rtt[f->dir == SG_DIR_C2S ? SG_DIR_S2C : SG_DIR_C2S];
    /* Quake 3's server acknowledges commands, all up to one at once: a
     * later one acknowledged means the probe's arrived with it or before. */
    bool cumulative = f->ack < 0;
    int32_t ack = cumulative ? f->reliable_ack : f->ack;

    if (ack >= 0 && p->sent_ms && f->kind != SG_FRAME_REJECTED) {
        int32_t ahead = (int32_t)((uint32_t)ack - (uint32_t)p->seq);
        if (ahead == 0 || (cumulative && ahead > 0 && ahead < 64)) {
            int dir = f->dir == SG_DIR_C2S ? SG_DIR_S2C : SG_DIR_C2S;
            uint64_t ms = now - p->sent_ms;
            int32_t *avg = &s->sum.rtt_ms[dir];
            if (ms < 60000) {
                *avg = *avg < 0 ? (int32_t)ms : (int32_t)((3 * (int64_t)*avg + (int64_t)ms) / 4);
                s->relay->rtt_samples[dir]++;
                s->relay->rtt_sum_ms[dir] += ms;
            }
        }
        if (ahead >= 0)
            p->sent_ms = 0;
    }
    if (f->ack_wanted >= 0) {
        p = &s->rtt[f->dir];
        if (p->sent_ms ? p->seq == f->ack_wanted || now - p->sent_ms > 5000 : now >= p->next_ms) {
            p->seq = f->ack_wanted;
            p->sent_ms = now ? now : 1;
            p->next_ms = now + SG_RTT_EVERY_MS;
        }
    }
}

int32_t sg_session_ping_ms(const struct sg_session_summary *sum)
{
    int32_t a = sum->rtt_ms[SG_DIR_C2S], b = sum->rtt_ms[SG_DIR_S2C];

    if (a < 0 && b < 0)
        return -1;
    return (a > 0 ? a : 0) + (b > 0 ? b : 0);
}

static void process(struct sg_session *s, enum sg_dir dir, const uint8_t *data, size_t len,
                    uint64_t now_ms, bool sent)
{
    struct sg_relay *r = s->relay;
    struct sg_chain *chain = r->chain;
    const struct sg_frame *f = NULL;
    struct emit_ctx ctx = {s, dir, 0, 0};
    struct sg_filter_call call = {0};
    struct sg_filter_proxy proxy = {0};
    struct sg_chain_result res = {.drop_filter = -1};
    bool identical, rebuild, muted = false;
    int err;

    /* Decode; an error is counted and logged once per session.  In a session
     * the server has not answered (a flood of spoofed sources makes many) the
     * warning is the route's, rate-limited, with the count since the last. */
    if (s->codec) {
        err = s->codec->decode(s->cstate, dir, data, len, &f);
        if (err < 0 && s->decode_errors++ == 0)
            decode_error_warn(s, dir);
        rtt_note(s, f, now_ms);
        if (s->stage != SG_STAGE_UNANSWERED)
            say_notice(s); /* else with the start line, once the server answers */
        if (s->stage != SG_STAGE_ESTABLISHED)
            update_stage(s, dir);
        /* Fail closed where the route asks: what the filters cannot see
         * (not decoded, or a part left undecoded) does not go out. */
        if ((err < 0 || f->undecoded) && r->conf.undecodable == SG_UNDECODABLE_DROP && !sent) {
            s->sum.counters.drops[SG_DROP_UNDECODABLE]++;
            r->counters.drops[SG_DROP_UNDECODABLE]++;
            res.drop = true;
            if (chain) {
                fill_call(s, &call, &proxy, f, data, len, now_ms);
                sg_chain_taps(chain, s->slots, &call, &proxy, &res);
            }
            stream_frame(s, &call, f, data, len, &res);
            return;
        }
    } else {
        if (s->stage != SG_STAGE_ESTABLISHED)
            update_stage(s, dir);
        memset(&s->raw_frame, 0, sizeof(s->raw_frame));
        s->raw_frame.dir = dir;
        s->raw_frame.kind = SG_FRAME_RAW;
        s->raw_frame.sequence = s->raw_frame.ack = s->raw_frame.reliable_ack =
            s->raw_frame.ack_wanted = -1;
        f = &s->raw_frame;
    }

    /* The client leaves (its disconnect): the route's sweep ends the session
     * once SG_SESSION_LEFT_MS pass with no datagram either way, unless the
     * client says more first (a new message or a connectionless packet; a
     * copy of its last datagram, rejected as a duplicate, is not more). */
    if (dir == SG_DIR_C2S && f) {
        if (f->disconnect)
            s->left_ms = s->left_ms ? s->left_ms : now_ms;
        else if (f->kind == SG_FRAME_MESSAGE || f->kind == SG_FRAME_PARTIAL ||
                 f->kind == SG_FRAME_OOB)
            s->left_ms = 0;
    }

    /* Muted (HTTP API): the client's chat never reaches the server. */
    if (s->muted && dir == SG_DIR_C2S && !sent && s->codec && s->codec->drop_msg &&
        f->kind == SG_FRAME_MESSAGE) {
        for (unsigned i = 0; i < f->nmsgs; i++) {
            if (f->msgs[i].kind == SG_MSG_CHAT && !f->msgs[i].dropped &&
                s->codec->drop_msg(s->cstate, i) >= 0) {
                muted = true;
                s->muted_msgs++;
            }
        }
    }

    /* The filters. */
    if (chain) {
        fill_call(s, &call, &proxy, f, data, len, now_ms);
        if (!chain->only_taps)
            s->sync_only = true; /* a filter may inject: numbering is the codec's for good */
        sg_chain_run(chain, s->slots, &call, &proxy, &res);
        ctx.delay_ms = res.delay_ms;
        ctx.copies = res.copies;
        if (res.drop) {
            s->sum.counters.drops[SG_DROP_FILTER]++;
            r->counters.drops[SG_DROP_FILTER]++;
            sg_chain_taps(chain, s->slots, &call, &proxy, &res);
            stream_frame(s, &call, f, data, len, &res);
            return;
        }
    }

    /* Rebuild what changed, what the codec must, or everything when asked. */
    rebuild = !sent && s->codec &&
              (res.changed || muted || r->conf.reencode == SG_REENCODE_ALWAYS ||
               (s->codec->must_encode && s->codec->must_encode(s->cstate, f)));
    if (rebuild && f->kind == SG_FRAME_PARTIAL)
        return; /* pieces wait for their whole message */
    if (rebuild && f->kind == SG_FRAME_MESSAGE) {
        err = s->codec->encode(s->cstate, f, emit, &ctx, &identical);
        if (err >= 0) {
            sent = true;
            call.reencoded = true;
        } else {
            sg_log_at(r->ctx->log, SG_LOG_DEBUG, r->conf.name, s->sum.id,
                      "rebuild failed (%s): relaying the original", sg_strerror(err));
        }
    }
    if (!sent)
        emit(&ctx, data, len);
    if (chain)
        sg_chain_taps(chain, s->slots, &call, &proxy, &res);
    stream_frame(s, &call, f, data, len, &res);
    /* spectators: after the player's own datagram is on its way */
    if (r->spect && s->codec && (dir == SG_DIR_S2C || f->disconnect))
        r->hooks->spectate(s->route, s, f, now_ms);
}

/* ---- send-first: decoding after the send ---- */

/* Decode the oldest waiting datagram. */
static void deferred_one(struct sg_relay *r)
{
    struct sg_deferred *d = r->dq_head;

    r->dq_head = d->next;
    if (!r->dq_head)
        r->dq_tail = NULL;
    r->dq_n--;
    r->dq_bytes -= d->len;
    if (!d->s->closing)
        process(d->s, d->dir, d->data, d->len, d->now_ms, true);
    if (d->spare) {
        d->next = r->dq_spares;
        r->dq_spares = d;
    } else {
        free(d);
    }
}

void sg_route_deferred_drain(struct sg_relay *r)
{
    while (r->dq_head)
        deferred_one(r);
}

/* The outbox's after-flush hook: SG_DEFER_BUDGET_NS of decoding per loop
 * turn, in arrival order; true while some is left.  The budget starts at
 * the clock read of the flush just before (residence times), or at a read
 * of its own; a step of the wall clock ends it early (the rest waits for
 * the next turn). */
static bool deferred_run(void *ctx)
{
    struct sg_relay *r = ctx;
    uint64_t start;

    if (!r->dq_head)
        return false;
    start = r->outbox.sent_ns ? r->outbox.sent_ns : sg_udp_clock_ns();
    do
        deferred_one(r);
    while (r->dq_head && sg_udp_clock_ns() - start < SG_DEFER_BUDGET_NS);
    return r->dq_head != NULL;
}

void sg_route_send_first_update(struct sg_relay *r)
{
    sg_route_deferred_drain(r);
    r->send_first = r->conf.reencode == SG_REENCODE_CHANGED &&
                    r->conf.undecodable == SG_UNDECODABLE_RELAY &&
                    (!r->chain || r->chain->only_taps);
    sg_outbox_after(&r->outbox, r->send_first ? deferred_run : NULL, r);
}

/* Keep a copy of a datagram just sent, for its decoding after the flush. */
static void defer(struct sg_session *s, enum sg_dir dir, const uint8_t *data, size_t len)
{
    struct sg_relay *r = s->relay;
    struct sg_deferred *d;

    /* A full queue decodes its oldest now: memory stays bounded, this turn is longer. */
    while (r->dq_head && (r->dq_n >= r->dq_limit || r->dq_bytes + len > SG_DEFER_BYTES)) {
        deferred_one(r);
        r->dq_overflows++;
    }
    /* a spare entry when one is kept; a new one of the spare size while fewer are alive */
    if (len <= SG_DEFER_SPARE_LEN && r->dq_spares) {
        d = r->dq_spares;
        r->dq_spares = d->next;
    } else if (len <= SG_DEFER_SPARE_LEN && r->dq_nspare < SG_DEFER_SPARES &&
               (d = malloc(sizeof(*d) + SG_DEFER_SPARE_LEN))) {
        d->spare = true;
        r->dq_nspare++;
    } else if ((d = malloc(sizeof(*d) + len))) {
        d->spare = false;
    }
    if (!d) {
        sg_route_deferred_drain(r); /* keep the order */
        process(s, dir, data, len, s->last_active, true);
        return;
    }
    d->next = NULL;
    d->s = s;
    d->now_ms = s->last_active;
    d->len = (uint32_t)len;
    d->dir = (uint8_t)dir;
    memcpy(d->data, data, len);
    if (r->dq_tail)
        r->dq_tail->next = d;
    else
        r->dq_head = d;
    r->dq_tail = d;
    r->dq_n++;
    r->dq_bytes += len;
    if (r->dq_n > r->dq_max)
        r->dq_max = r->dq_n;
}

/*
 * One datagram either way.  Routes whose chain only watches (or that have
 * none) with `reencode changed` take the send-first path: the original
 * bytes go to the outbox now and the decoding, the taps and the live
 * stream run after the turn's flush (defer); a session that ever met a
 * changing filter keeps the synchronous order (its codec may translate
 * numbering).  Elsewhere everything runs before the send (process), and
 * the outbox is flushed early when the turn's work has held a datagram in
 * it for SG_DEFER_BUDGET_NS.
 */
static void relay_now(struct sg_session *s, enum sg_dir dir, const uint8_t *data, size_t len)
{
    struct sg_relay *r = s->relay;
    struct sg_chain *chain = r->chain;

    s->last_active = uv_now(r->ctx->loop);
    if (chain && chain->has_datagram_taps)
        tap_datagram(s, dir == SG_DIR_C2S ? SG_LEG_CLIENT_IN : SG_LEG_SERVER_IN, data, len);
    if (s->hs)
        data = handshake(s, dir, data, &len);
    if (!s->probed) {
        pick_game(s, dir, data, len);
        fill_filter_session(s);
    } else if (dir == SG_DIR_C2S && r->conf.protocol == SG_PROTO_AUTO) {
        recheck_game(s, data, len);
    }
    /* The client's qport, for NAT rebinding (route.c); only from its own address. */
    if (dir == SG_DIR_C2S && s->game && s->game->client_qport) {
        int qport = s->game->client_qport(&s->gstate, data, len, true);
        if (qport >= 0)
            s->qport = qport;
    }
    if (!s->codec && !chain) {
        if (s->stage != SG_STAGE_ESTABLISHED)
            update_stage(s, dir);
        send_dir(s, dir, data, len);
        return;
    }
    if (s->muted && !s->sync_only) {
        /* Muted: its chat is removed before the send, in arrival order. */
        sg_route_deferred_drain(r);
        s->sync_only = true;
    }
    if (r->send_first && !s->sync_only) {
        send_dir(s, dir, data, len);
        defer(s, dir, data, len);
        return;
    }
    process(s, dir, data, len, s->last_active, false);
    if (sg_outbox_waited_ns(&r->outbox) >= SG_DEFER_BUDGET_NS)
        sg_outbox_flush(&r->outbox);
}

/*
 * relay_now with the datagram's receive time `at` (0: the kernel gave none)
 * on the route's outbox, so that what it sends carries it (the residence
 * time, sg_session_sent); the time it replaces is restored after (a
 * relayed datagram may relay others first: server_first).
 */
static void relay(struct sg_session *s, enum sg_dir dir, const uint8_t *data, size_t len,
                  uint64_t at)
{
    struct sg_relay *r = s->relay;
    uint64_t saved = r->outbox.at;

    if (r->conf.residence_off != 1) {
        if (!at) {
            at = sg_udp_clock_ns();
            r->resid_untimed++;
        }
        r->outbox.at = at;
    }
    relay_now(s, dir, data, len);
    r->outbox.at = saved;
}

/* ---- route_by prx: the next hop's challenge ---- */

static void route_by_ask(struct sg_session *s)
{
    const struct sg_codec_route_by *rb = s->relay->rb_hooks;
    uint8_t buf[64];
    int n = rb->getchallenge(buf, sizeof(buf));

    s->rb_asked = uv_now(s->relay->ctx->loop);
    if (n > 0)
        send_dir(s, SG_DIR_C2S, buf, (size_t)n);
}

void sg_session_route_by_start(struct sg_session *s, struct sg_route_by_req *req)
{
    free(s->rb_req);
    s->rb_req = req;
    route_by_ask(s);
}

/* A datagram from the next hop while the connect waits: its challenge
 * sends the connect (through the codec, as the client's; its residence counts
 * from the challenge's receive time `at`); true when taken. */
static bool route_by_answer(struct sg_session *s, const uint8_t *data, size_t len,
                            uint64_t at)
{
    const struct sg_codec_route_by *rb = s->relay->rb_hooks;
    uint8_t buf[SG_ROUTE_BY_USERINFO_MAX + SG_ROUTE_BY_TAIL_MAX + 128];
    struct sg_route_by_req *req = s->rb_req;
    int32_t challenge;
    int n;

    if (!rb->challenge_parse(data, len, &challenge))
        return false;
    s->last_active = uv_now(s->relay->ctx->loop);
    n = rb->connect_build(req, challenge, buf, sizeof(buf));
    s->rb_req = NULL;
    free(req);
    if (n > 0)
        relay(s, SG_DIR_C2S, buf, (size_t)n, at);
    return true;
}

/* ---- server -> client ---- */

/* One datagram that reached the upstream socket: only the server's are relayed. */
static void from_server(struct sg_session *s, const uint8_t *data, size_t len, int flags,
                        const struct sockaddr *from, uint64_t at)
{
    struct sg_relay *r = s->relay;

    if (flags & MSG_TRUNC) {
        s->sum.counters.drops[SG_DROP_TRUNCATED]++;
        r->counters.drops[SG_DROP_TRUNCATED]++;
        return;
    }
    if (!sg_addr_equal(from, (struct sockaddr *)&s->server)) {
        s->sum.counters.drops[SG_DROP_FOREIGN]++;
        r->counters.drops[SG_DROP_FOREIGN]++;
        return;
    }
    if (s->rb_req && route_by_answer(s, data, len, at))
        return;
    relay(s, SG_DIR_S2C, data, len, at);
}

static void on_server_readable(struct sg_udp *u)
{
    struct sg_session *s = u->data;
    struct sg_relay *r = s->relay;
    struct sg_udp_batch *b = &r->batch;
    int n = sg_udp_recv(u, b);

    /* An ICMP error is reported first; the datagrams come with the next call. */
    if (n < 0) {
        if (n == -ECONNREFUSED)
            server_refused(s);
        else
            sg_log_at(r->ctx->log, SG_LOG_DEBUG, r->conf.name, s->sum.id, "upstream: %s",
                      strerror(-n));
        n = sg_udp_recv(u, b);
    }
    /* Only the server's datagrams: a connected socket gets no others from
     * the kernel, one waiting for a handshake's answer (see handshake())
     * may, and so may its queue from before a (re)connect. */
    for (int i = 0; i < n && !s->closing; i++) {
        /* a decoding session's client datagrams that came earlier go first (server_first) */
        if (s->codec) {
            r->hooks->clients_before(r->route, b->at[i]);
            if (s->closing)
                break;
        }
        from_server(s, b->iov[i].iov_base, b->msg[i].msg_len, b->msg[i].msg_hdr.msg_flags,
                    (struct sockaddr *)&b->from[i], b->at[i]);
    }
}

/*
 * A decoding session's datagrams are decoded in the order they reached
 * slipgate, whichever of its two sockets the poll reports first: before
 * a client datagram, the server datagrams that reached the upstream socket
 * earlier (by the kernel's receive time; all waiting ones when it is not
 * known) are relayed first, and before a server datagram, the listening
 * socket's earlier datagrams (route.c, sg_route_clients_before).  The
 * decoding of one direction depends on the other: Quake 3 scrambles a
 * client message with the server command it acknowledges, and a server
 * message with the client command it acknowledges, so a client datagram
 * decoded before the server datagram it answers failed (issue 25 item 6).
 * At most one batch's worth at a time.
 */
static void server_first(struct sg_session *s, uint64_t before)
{
    struct sg_relay *r = s->relay;

    for (int i = 0; i < SG_RECV_BATCH && !s->closing && s->upstream.open; i++) {
        struct sockaddr_storage from;
        uint64_t at;
        int flags, n = sg_udp_peek_time(&s->upstream, &at);

        if (n == 0 || (n > 0 && at && before && at >= before))
            return;
        if (n > 0)
            n = sg_udp_recv_one(&s->upstream, r->drain_buf, SG_MAX_DATAGRAM, &from, &flags, &at);
        if (n == -EAGAIN)
            return;
        if (n == -ECONNREFUSED) {
            server_refused(s);
            continue;
        }
        if (n < 0) {
            sg_log_at(r->ctx->log, SG_LOG_DEBUG, r->conf.name, s->sum.id, "upstream: %s",
                      strerror(-n));
            return;
        }
        from_server(s, r->drain_buf, (size_t)n, flags, (struct sockaddr *)&from, at);
    }
}

/* ---- client -> server ---- */

void sg_session_forward_to_server(struct sg_session *s, const uint8_t *data, size_t len,
                                  uint64_t at)
{
    if (s->rb_req) {
        /* The connect waits for the next hop's challenge: a repeated one
         * asks again (at most once a second); nothing else goes yet. */
        uint64_t now = uv_now(s->relay->ctx->loop);
        if (s->relay->rb_hooks->classify(data, len) == SG_ROUTE_BY_CONNECT &&
            now - s->rb_asked >= 1000)
            route_by_ask(s);
        return;
    }
    if (s->codec && s->upstream.open) {
        server_first(s, at);
        if (s->closing)
            return;
    }
    relay(s, SG_DIR_C2S, data, len, at);
}

/* ---- life cycle ---- */

#define SG_CLAIM_TRIES 8 /* kernel picks tried for a port no other upstream socket holds */
#define SG_BIND_TRIES 3  /* ports claimed and bound in turn while another process takes them */

/*
 * An ephemeral port on `any`'s address for a new upstream socket, claimed
 * for it in slipgate's own-sockets table (sg_route__own_claim): the port the
 * kernel gives a socket bound there.  While that port is another upstream
 * socket's (bound to another address: `upstream_source`), the probe stays
 * bound and the kernel is asked again, SG_CLAIM_TRIES times at most, so that
 * one port stays one socket.  The socket then binds the port by number, and
 * so keeps it when it loses its peer (handshake()), where one bound to port 0
 * is unbound by the kernel.  Returns the port, or a negative errno
 * (-EADDRINUSE when every try was another's; -EMFILE out of descriptors).
 */
static int claim_port(struct sg_session *s, const struct sockaddr *any)
{
    int fds[SG_CLAIM_TRIES], n = 0, port = -EADDRINUSE, off = 0;

    while (n < SG_CLAIM_TRIES) {
        struct sockaddr_storage got;
        socklen_t len = sizeof(got);
        int fd = socket(any->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0), p;

        if (fd < 0) {
            port = -errno;
            break;
        }
        fds[n++] = fd;
        if (any->sa_family == AF_INET6)
            (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
        if (bind(fd, any, sg_addr_len(any)) < 0 ||
            getsockname(fd, (struct sockaddr *)&got, &len) < 0) {
            port = -errno;
            break;
        }
        p = sg_addr_port((struct sockaddr *)&got);
        if (p > 0 && s->relay->hooks->own_claim(s->route, p)) {
            port = p;
            break;
        }
    }
    while (n > 0)
        close(fds[--n]);
    return port;
}

/*
 * The local address of a new upstream socket: with `upstream_source`, the
 * route's next address of the server's family, in turn over every loop's
 * sessions (port 0); else any.
 */
static void upstream_source(struct sg_relay *r, sa_family_t family, struct sockaddr_storage *out)
{
    int n = r->conf.nupstream_source;

    memset(out, 0, sizeof(*out));
    out->ss_family = family;
    for (int i = 0; i < n; i++) {
        uint32_t at = atomic_fetch_add_explicit(&r->share->next_source, 1, memory_order_relaxed);
        const struct sockaddr_storage *a = &r->conf.upstream_source[at % (uint32_t)n];
        if (a->ss_family == family) {
            *out = *a;
            return;
        }
    }
}

/* A socket of the server's family on an ephemeral port, connected to the server. */
static int open_upstream(struct sg_session *s)
{
    struct sockaddr_storage any;
    int err = -EADDRINUSE, port = 0;

    s->upstream.fd = -1; /* nothing open until sg_udp_open succeeds */
    upstream_source(s->relay, s->server.ss_family, &any);
    for (int i = 0; i < SG_BIND_TRIES; i++) {
        sg_addr_set_port((struct sockaddr *)&any, 0);
        if ((port = claim_port(s, (struct sockaddr *)&any)) <= 0) {
            err = port < 0 ? port : -EADDRINUSE;
            port = 0;
            break;
        }
        sg_addr_set_port((struct sockaddr *)&any, port);
        err = sg_udp_open(&s->upstream, s->relay->ctx->loop, (struct sockaddr *)&any,
                          (struct sockaddr *)&s->server, on_server_readable, s);
        if (s->upstream.fd >= 0)
            break;
        /* nothing holds the port: give the claim up (taken in between by
         * another process: another port then) */
        s->relay->hooks->own_port(s->route, (struct sockaddr *)&any, false);
        port = 0;
        if (err != -EADDRINUSE)
            break;
    }
    if (s->upstream.fd >= 0) {
        s->relay->open_handles++; /* until on_upstream_closed */
        /* the claim is given up when the session ends */
        s->upstream_local = any;
        s->sum.upstream_port = port;
    }
    if (err == 0 && sg_udp_local(&s->upstream, &s->upstream_local) == 0)
        s->relay->hooks->own_port(s->route, (struct sockaddr *)&s->upstream_local, true);
    return err;
}

static void on_upstream_closed(uv_handle_t *h)
{
    struct sg_session *s = ((struct sg_udp *)h->data)->data;
    struct sg_relay *r = s->relay;

    r->hooks->ended(r->route, &s->sum);
    free(s->rb_req);
    free(s->slots);
    free(s);
    r->hooks->handle_closed(r->route); /* last: a retired route may be freed */
}

int sg_session_create(struct sg_relay *r, const struct sockaddr *client, struct sg_session **out)
{
    return sg_session_create_to(r, client, NULL, out);
}

int sg_session_create_to(struct sg_relay *r, const struct sockaddr *client,
                         const struct sockaddr *server, struct sg_session **out)
{
    const struct sg_ctx *ctx = r->ctx;
    struct sg_session *s = calloc(1, sizeof(*s));
    int err;

    *out = NULL;
    if (!s)
        return UV_ENOMEM;
    s->route = r->route;
    s->relay = r;
    memcpy(&s->client, client, sg_addr_len(client));
    if (server)
        memcpy(&s->server, server, sg_addr_len(server));
    else
        s->server = r->server_addr;
    s->qport = -1;
    s->hs = r->handshake;
    s->client_seen = uv_now(ctx->loop);
    /* Unique across worker loops: worker w of N numbers w+1, w+1+N, ... */
    s->sum.id = *ctx->next_session_id += (uint64_t)(ctx->nworkers > 1 ? ctx->nworkers : 1);
    s->sum.started_ms = sg_now_wall_ms();
    s->sum.rtt_ms[SG_DIR_C2S] = s->sum.rtt_ms[SG_DIR_S2C] = -1;
    s->last_active = s->created = uv_now(ctx->loop);
    sg_relay_client_name(r, client, s->sum.client, sizeof(s->sum.client));
    if (r->anon_key)
        sg_anon_addr(r->anon_key, client, &s->client_anon);
    sg_addr_format((struct sockaddr *)&s->server, s->server_str, sizeof(s->server_str));
    if (r->chain && !(s->slots = calloc((size_t)r->chain->n, sizeof(*s->slots)))) {
        free(s);
        return UV_ENOMEM;
    }

    /* The upstream socket; on failure it still needs closing.  Out of
     * descriptors, a session a full table would end makes room (route.c). */
    err = open_upstream(s);
    if ((err == -EMFILE || err == -ENFILE) && s->upstream.fd < 0 && r->hooks->make_room(r->route))
        err = open_upstream(s);
    if (err < 0) {
        uint64_t n = sg_warn_count(&r->warn_no_socket, s->last_active);
        if (n)
            sg_log(ctx->log, SG_LOG_ERROR, r->conf.name, s->sum.id,
                   "cannot open a socket towards the server for %s: %s (%llu new client(s) "
                   "refused for this since the last report; repeated at most every %d s)%s",
                   s->sum.client, strerror(-err), (unsigned long long)n, SG_WARN_INTERVAL_MS / 1000,
                   err == -EMFILE || err == -ENFILE ? "; raise the open files limit (ulimit -n)"
                                                    : "");
        s->closing = true;
        s->sum.end_reason = "no socket";
        s->sum.ended_ms = s->sum.started_ms;
        if (!sg_udp_close(&s->upstream, on_upstream_closed)) {
            free(s->slots);
            free(s);
        }
        return err;
    }
    fill_filter_session(s);

    r->hooks->insert(r->route, s);
    r->sessions_total++;
    log_start(s, SG_LOG_DEBUG);
    *out = s;
    return 0;
}

void sg_session_close(struct sg_session *s, const char *reason)
{
    struct sg_relay *r = s->relay;
    const struct sg_counters *c = &s->sum.counters;
    uint64_t n;
    bool quiet;

    if (s->closing)
        return;
    /* What waits for decoding is decoded first (recordings end whole). */
    sg_route_deferred_drain(r);
    /* What the session relayed so far leaves before its socket closes. */
    sg_outbox_flush(&r->outbox);
    s->closing = true;
    s->sum.end_reason = reason;
    s->sum.ended_ms = sg_now_wall_ms();
    r->hooks->remove(r->route, s);

    /* Filters finish first (a recorder writes its end), then the decoder. */
    if (r->chain && s->slots)
        slots_end(s, r->chain);
    sg_delay_forget(&r->delay, s);
    if (s->codec) {
        const struct sg_codec_stats *cs = s->codec->stats(s->cstate);
        s->sum.codec = s->codec->name;
        s->sum.cstats = *cs;
        snprintf(s->sum.first_error, sizeof(s->sum.first_error), "%s",
                 cs->errors ? s->codec->describe(s->cstate) : "");
        snprintf(s->sum.decode_info, sizeof(s->sum.decode_info), "%s",
                 s->codec->describe(s->cstate));
        sg_session_game_info(s, &s->sum.game);
        sg_log_at(r->ctx->log, s->stage == SG_STAGE_UNANSWERED ? SG_LOG_DEBUG : SG_LOG_INFO,
                  r->conf.name, s->sum.id,
                  "%s: %llu datagrams decoded, %llu messages, %llu decode errors, %llu rebuilt "
                  "(%llu byte-identical)",
                  s->codec->describe(s->cstate), (unsigned long long)cs->decoded,
                  (unsigned long long)cs->messages, (unsigned long long)cs->errors,
                  (unsigned long long)cs->reencoded, (unsigned long long)cs->reencode_identical);
        s->codec->destroy(s->cstate);
        s->codec = NULL;
        s->cstate = NULL;
    }
    /* Sessions the server never answered (their start line was at debug too):
     * a flood of spoofed sources makes many; one rate-limited line counts them. */
    quiet = s->stage == SG_STAGE_UNANSWERED;
    if (quiet && (n = sg_warn_count(&r->warn_unanswered, uv_now(r->ctx->loop))))
        sg_log(r->ctx->log, SG_LOG_INFO, r->conf.name, s->sum.id,
               "%llu session(s) ended that server %s never answered (the last: client %s, "
               "reason %s); repeated at most every %d s, each at debug",
               (unsigned long long)n, s->server_str, s->sum.client, reason,
               SG_WARN_INTERVAL_MS / 1000);
    sg_log_at(r->ctx->log, quiet ? SG_LOG_DEBUG : SG_LOG_INFO, r->conf.name, s->sum.id,
              "session end reason=%s client=%s duration=%.1fs c2s=%llu/%lluB s2c=%llu/%lluB "
              "drops=%llu",
              reason, s->sum.client, (double)(s->sum.ended_ms - s->sum.started_ms) / 1000.0,
              (unsigned long long)c->c2s_packets, (unsigned long long)c->c2s_bytes,
              (unsigned long long)c->s2c_packets, (unsigned long long)c->s2c_bytes,
              (unsigned long long)sg_counters_drops(c));
    if (s->sum.upstream_port > 0)
        r->hooks->own_port(r->route, (struct sockaddr *)&s->upstream_local, false);
    sg_udp_close(&s->upstream, on_upstream_closed);
}

void sg_session_game_info(const struct sg_session *s, struct sg_codec_info *out)
{
    memset(out, 0, sizeof(*out));
    if (s->codec && s->cstate && s->codec->info)
        s->codec->info(s->cstate, out);
    if (!out->map[0])
        snprintf(out->map, sizeof(out->map), "%s", s->map);
}
