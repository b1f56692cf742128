/*
 * Packet counters kept per session and per route, with one slot per drop
 * reason.  The reason names appear in logs and in the --stats JSON.
 */
#ifndef SG_PROXY_COUNTERS_H
#define SG_PROXY_COUNTERS_H

#include <stdint.h>

#define SG_DROP_MAP(XX)                                                                            \
    XX(SESSION_LIMIT, "session_limit", "the route already has max_sessions sessions")              \
    XX(RATE_LIMIT, "rate_limit", "the source opened new sessions too fast")                        \
    XX(SEND_ERROR, "send_error", "the kernel refused the datagram")                                \
    XX(UNREACHABLE, "unreachable", "the server's host said nothing listens on its port (ICMP)")   \
    XX(QUEUE_FULL, "queue_full", "too many datagrams waiting for the socket")                      \
    XX(TRUNCATED, "truncated", "a datagram larger than the receive buffer")                        \
    XX(NO_SOCKET, "no_socket", "the session's upstream socket could not be opened")                \
    XX(SHUTDOWN, "shutdown", "the proxy is shutting down")                                         \
    XX(FILTER, "filter", "a filter dropped it (drop, guard, netem loss, ratelimit...)")            \
    XX(LOOP, "loop", "from a configured server or slipgate's own listener: it would loop")         \
    XX(REBIND, "rebind", "a player's qport from a new port, not continuing their stream (NAT)")    \
    XX(FOREIGN, "foreign",                                                                         \
       "at a session's upstream socket from another address than its server's")                    \
    XX(UNDECODABLE, "undecodable", "not decoded whole, on a route with `undecodable drop`")       \
    XX(BANNED, "banned", "from a banned address (`ban`, `ban_file`, a kick)")                      \
    XX(ADMIN, "admin", "remote administration (rcon) from an address `admin_from` does not list") \
    XX(PRX_NOT_ALLOWED, "prx_not_allowed",                                                         \
       "route_by prx: a chain whose next hop is not in the allow-list")                            \
    XX(PRX_HOPS, "prx_hops", "route_by prx: a chain longer than prx_max_hops")                     \
    XX(PRX_SELF, "prx_self", "route_by prx: a chain naming slipgate's own address")                \
    XX(PRX_RATE, "prx_rate",                                                                       \
       "route_by prx: a source starting chains (or asking pingstatus) too fast")                   \
    XX(PRX_INVALID, "prx_invalid",                                                                 \
       "route_by prx: a malformed connect or chain, or a challenge slipgate did not give")

enum sg_drop {
#define SG__DROP_ENUM(id, name, desc) SG_DROP_##id,
    SG_DROP_MAP(SG__DROP_ENUM)
#undef SG__DROP_ENUM
        SG_DROP__COUNT
};

extern const char *const sg_drop_names[SG_DROP__COUNT];

struct sg_counters {
    uint64_t c2s_packets, c2s_bytes; /* client -> server, forwarded */
    uint64_t s2c_packets, s2c_bytes; /* server -> client, forwarded */
    uint64_t drops[SG_DROP__COUNT];
};

static inline uint64_t sg_counters_drops(const struct sg_counters *c)
{
    uint64_t n = 0;
    for (int i = 0; i < SG_DROP__COUNT; i++)
        n += c->drops[i];
    return n;
}

#endif
