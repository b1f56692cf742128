/*
 * The door: bans and admin controls in front of a route's sessions.
 *
 * Every client datagram passes here before it finds or makes a session:
 *
 *   - a banned address (the route's `ban` and `ban_file` rules, or a kick
 *     of this loop) is dropped and counted (drops.banned); the game's own
 *     "banned" answer goes back when the game has one (codec hook
 *     banned_reply), never longer than what the client sent and at most
 *     once a second per address (and SG_DOOR_REPLIES a second per route),
 *     so slipgate amplifies nothing; one log line per address a minute
 *     (an IPv6 address: per source_prefix_v6 prefix, as every per-source limit);
 *   - while the proxy drains (SIGTERM with drain_timeout), a new client's
 *     first handshake datagrams get the game's "server is full" answer
 *     (codec hook full_reply) under the same rules (sg_route__door_draining);
 *   - remote administration (codec hook is_admin: rcon...) from an address
 *     `admin_from` does not list is dropped and counted (drops.admin).
 *
 * Expiry is read from the wall clock at each match: an expired ban stops
 * matching without a reload.
 */
#include "proxy/route.h"

#include "proxy/addr.h"
#include "protocols/codec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SG_DOOR_SEEN 512       /* addresses remembered per route and loop; a power of two */
#define SG_DOOR_REPLIES 100    /* banned replies per second per route and loop, at most */
#define SG_DOOR_REPLY_MS 1000  /* one banned reply per address this often */
#define SG_DOOR_LOG_MS 60000   /* one log line per address this often */

struct sg_door_seen {
    uint8_t key[16];
    bool used;
    uint64_t reply_ms, log_ms; /* uv_now() of the last reply and log line */
};

static size_t seen_slot(const struct sg_route *r, const uint8_t key[16])
{
    uint64_t h = 1469598103934665603ull;

    for (int i = 0; i < 16; i++)
        h = (h ^ (uint8_t)(key[i] ^ r->hash_key[i])) * 1099511628211ull;
    return (size_t)(h ^ (h >> 29)) & (SG_DOOR_SEEN - 1);
}

/* The source's entry (a colliding older one is taken over), or NULL without memory. */
static struct sg_door_seen *seen(struct sg_route *r, const struct sockaddr *from)
{
    struct sg_door_seen *e;
    uint8_t key[16] = {0};
    size_t n;

    if (!r->door_seen && !(r->door_seen = calloc(SG_DOOR_SEEN, sizeof(*r->door_seen))))
        return NULL;
    /* an IPv6 source is its prefix (source_prefix_v6): a banned /64 that
     * changes address at will still gets one answer a second and one log
     * line a minute; IPv4 in its mapped form, apart from every IPv6 key */
    if ((n = sg_addr_source_key(from, (int)r->conf.source_prefix_v6, key)) == 0)
        return NULL;
    if (n == 4) {
        memmove(key + 12, key, 4);
        memset(key, 0, 4);
        key[10] = key[11] = 0xff;
    }
    e = &r->door_seen[seen_slot(r, key)];
    if (!e->used || memcmp(e->key, key, 16) != 0) {
        memset(e, 0, sizeof(*e));
        memcpy(e->key, key, 16);
        e->used = true;
    }
    return e;
}

/* The game whose answer a banned client gets: the route's, or (auto) the one claiming it. */
static const struct sg_codec *answering_game(const struct sg_route *r, const uint8_t *data,
                                             size_t len)
{
    if (r->game)
        return r->game;
    for (int i = 0; sg_codecs[i]; i++)
        if (sg_codecs[i]->probe && sg_codecs[i]->probe(data, len))
            return sg_codecs[i];
    return NULL;
}

static void describe_rule(const struct sg_ban_rule *b, char *buf, size_t cap)
{
    char cidr[80], until[40] = "";
    time_t t;
    struct tm tm;

    sg_ban_rule_format(b, cidr, sizeof(cidr));
    if (b->until_ms) {
        t = (time_t)(b->until_ms / 1000);
        gmtime_r(&t, &tm);
        strftime(until, sizeof(until), " until %Y-%m-%dT%H:%M:%SZ", &tm);
    }
    if (b->file)
        snprintf(buf, cap, "%s%s (%s:%d)%s%s", cidr, until, b->file, b->line,
                 b->reason[0] ? ": " : "", b->reason);
    else
        snprintf(buf, cap, "%s%s%s%s", cidr, until, b->reason[0] ? ": " : "", b->reason);
}

typedef size_t (*door_reply_fn)(const uint8_t *data, size_t len, uint8_t *out, size_t cap);

/*
 * Send the game's answer `fn` writes for `data` to `from` (entry `e`): no
 * longer than the request, one a second per address and SG_DOOR_REPLIES a
 * second per route; nothing when the game has none.
 */
static void reply(struct sg_route *r, struct sg_door_seen *e, door_reply_fn fn, const uint8_t *data,
                  size_t len, const struct sockaddr *from)
{
    uint64_t now = uv_now(r->ctx->loop);
    uint8_t out[128];
    size_t n;

    if (!e || !fn || (e->reply_ms && now - e->reply_ms < SG_DOOR_REPLY_MS) ||
        r->listener.open == false)
        return;
    if (now / 1000 != r->door_second) {
        r->door_second = now / 1000;
        r->door_replies = 0;
    }
    if (r->door_replies >= SG_DOOR_REPLIES)
        return;
    n = fn(data, len, out, len < sizeof(out) ? len : sizeof(out));
    if (n == 0 || n > len)
        return;
    e->reply_ms = now;
    r->door_replies++;
    (void)sg_udp_send(&r->listener, out, n, from); /* a lost answer is silence */
}

static void banned(struct sg_route *r, const struct sg_ban_rule *b, const uint8_t *data,
                   size_t len, const struct sockaddr *from, bool kick)
{
    uint64_t now = uv_now(r->ctx->loop);
    struct sg_door_seen *e = seen(r, from);
    const struct sg_codec *game;

    r->counters.drops[SG_DROP_BANNED]++;
    if (!e)
        return;

    /* One log line per address a minute. */
    if (!e->log_ms || now - e->log_ms >= SG_DOOR_LOG_MS) {
        char a[SG_ADDR_STRLEN], what[300];
        e->log_ms = now;
        describe_rule(b, what, sizeof(what));
        sg_log(r->ctx->log, SG_LOG_INFO, r->conf.name, 0,
               "refused %s: %s %s (its datagrams are dropped and counted as drops.banned; "
               "said once a minute)",
               sg_relay_client_name(&r->relay, from, a, sizeof(a)), kick ? "kicked" : "banned", what);
    }

    game = answering_game(r, data, len);
    reply(r, e, game ? game->banned_reply : NULL, data, len, from);
}

void sg_route__door_draining(struct sg_route *r, const uint8_t *data, size_t len,
                             const struct sockaddr *from)
{
    const struct sg_codec *game = answering_game(r, data, len);

    if (game && game->full_reply)
        reply(r, seen(r, from), game->full_reply, data, len, from);
}

static bool is_admin(const struct sg_route *r, const uint8_t *data, size_t len)
{
    if (r->game)
        return r->game->is_admin && r->game->is_admin(data, len);
    for (int i = 0; sg_codecs[i]; i++)
        if (sg_codecs[i]->is_admin && sg_codecs[i]->is_admin(data, len))
            return true;
    return false;
}

bool sg_route__door_refuses(struct sg_route *r, const uint8_t *data, size_t len,
                            const struct sockaddr *from)
{
    const struct sg_ban_rule *b;
    uint64_t n;

    if (r->conf.bans || r->kicks) {
        int64_t wall = (int64_t)sg_now_wall_ms();
        if ((b = sg_ban_list_match(r->conf.bans, from, wall))) {
            banned(r, b, data, len, from, false);
            return true;
        }
        if ((b = sg_ban_list_match(r->kicks, from, wall))) {
            banned(r, b, data, len, from, true);
            return true;
        }
    }
    if (r->conf.admin_from && is_admin(r, data, len) &&
        !sg_ban_list_match(r->conf.admin_from, from, 0)) {
        r->counters.drops[SG_DROP_ADMIN]++;
        if ((n = sg_warn_count(&r->warn_admin, uv_now(r->ctx->loop)))) {
            char a[SG_ADDR_STRLEN];
            sg_log(r->ctx->log, SG_LOG_WARN, r->conf.name, 0,
                   "remote administration from %s refused: not in admin_from (%llu such "
                   "datagrams since the last warning; counted as drops.admin)",
                   sg_relay_client_name(&r->relay, from, a, sizeof(a)), (unsigned long long)n);
        }
        return true;
    }
    return false;
}

void sg_route__door_enforce(struct sg_route *r)
{
    int64_t wall = (int64_t)sg_now_wall_ms();
    struct sg_session *s, *next;

    for (s = r->sessions; s; s = next) {
        const struct sockaddr *c = (const struct sockaddr *)&s->client;
        next = s->next;
        if (!s->closing && (sg_ban_list_match(r->conf.bans, c, wall) ||
                            sg_ban_list_match(r->kicks, c, wall)))
            sg_session_close(s, "banned");
    }
}

int sg_route_kick_ban(struct sg_route *r, const struct sockaddr *from, int64_t minutes,
                      const char *reason)
{
    struct sg_ban_rule rule = {0};
    struct sg_ban_list *l;

    if (!sg_ban_addr_key(from, rule.addr))
        return -EINVAL;
    rule.bits = 128;
    rule.until_ms = (int64_t)sg_now_wall_ms() + minutes * 60000;
    snprintf(rule.reason, sizeof(rule.reason), "%s", reason ? reason : "");
    /* Expired kicks go when a new one comes. */
    if (!(l = sg_ban_list_create()))
        return -ENOMEM;
    for (int i = 0; r->kicks && i < r->kicks->count; i++)
        if (r->kicks->rules[i].until_ms > (int64_t)sg_now_wall_ms() &&
            memcmp(r->kicks->rules[i].addr, rule.addr, 16) != 0 &&
            sg_ban_list_add(l, &r->kicks->rules[i]) < 0)
            goto err;
    if (sg_ban_list_add(l, &rule) < 0)
        goto err;
    sg_ban_list_unref(r->kicks);
    r->kicks = l;
    r->door_dirty = true; /* the route's own sweep ends the session (its loop's thread) */
    return 0;
err:
    sg_ban_list_unref(l);
    return -ENOMEM;
}

int sg_route_unban(struct sg_route *r, const struct sg_ban_rule *rule)
{
    int gone = 0, out = 0;

    for (int i = 0; r->kicks && i < r->kicks->count; i++) {
        const struct sg_ban_rule *k = &r->kicks->rules[i];
        if (k->bits >= rule->bits && sg_ban_rule_covers(rule, k->addr))
            gone++;
        else
            r->kicks->rules[out++] = *k;
    }
    if (r->kicks)
        r->kicks->count = out;
    return gone;
}

void sg_route__door_finish(struct sg_route *r)
{
    sg_ban_list_unref(r->kicks);
    r->kicks = NULL;
    free(r->door_seen);
    r->door_seen = NULL;
}
