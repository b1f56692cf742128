/*
 * QuakeWorld proxy chains (the qwfwd convention, QW-Group/qwfwd svc.c and
 * ezQuake cl_main.c CL_Connect_f):
 *
 *   - ezQuake with `cl_proxyaddr "p1:port@p2:port"` sends its challenge
 *     request and its connect to p1, with `prx "p2:port@server:port"` in the
 *     userinfo: the chain's first entry is the next hop, the last the server.
 *   - A node answers the challenge request itself ('c' and a number), reads
 *     `prx` from the connect, passes `prx` minus its first entry on (or
 *     removes the key at the chain's end), stamps `*qwfwd` so a server can
 *     tell a proxied client, asks the next hop for a challenge
 *     ("getchallenge\n") and sends it the connect with that challenge.
 *   - A hop without ":port" means 27500.
 *   - A node pings servers with "k\n" out of band; they answer the single
 *     byte 'l'.
 *   - "pingstatus" (ezQuake's best-route search, EX_browser_pathfind.c) is
 *     answered with 'n' and 8 bytes a server: its IPv4 address as on the
 *     wire, its port and its ping in ms as little-endian shorts (0xffff: no
 *     answer, which ezQuake skips).
 *   - A node answers "status" itself, with its own serverinfo: ezQuake's
 *     server browser takes an entry whose `*version` begins with "qwfwd"
 *     for a node (EX_browser_net.c SB_IsServerQWfwd), and only such
 *     entries are asked "pingstatus"; it answers a ping ('k', "ping") to
 *     itself with 'l' (the first hop's ping, the direct edge of the
 *     best-route search).
 *
 * Refusals are told with 'n' (A2C_PRINT), which ezQuake prints.
 */
#include "protocols/byteorder.h"
#include "protocols/codec.h"
#include "protocols/door.h"
#include "protocols/error.h"
#include "protocols/info.h"
#include "protocols/qw/qw.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool has_prefix(const uint8_t *p, size_t n, const char *s)
{
    size_t l = strlen(s);

    return n >= l && memcmp(p, s, l) == 0;
}

/* `s` as the whole first word: the datagram ends there, or a space, a line
 * end or a NUL follows (as qwfwd's tokenizer reads the command). */
static bool word(const uint8_t *p, size_t n, const char *s)
{
    size_t l = strlen(s);

    return has_prefix(p, n, s) &&
           (n == l || p[l] == ' ' || p[l] == '\n' || p[l] == '\0' || p[l] == '\t');
}

static int prx_classify(const uint8_t *data, size_t len)
{
    const uint8_t *p = data + 4;
    size_t n;

    if (len < 5 || sg_le32(data) != 0xffffffffu)
        return SG_ROUTE_BY_OTHER;
    n = len - 4;
    if (has_prefix(p, n, "getchallenge"))
        return SG_ROUTE_BY_GETCHALLENGE;
    if (has_prefix(p, n, "connect ") || has_prefix(p, n, "connect\t"))
        return SG_ROUTE_BY_CONNECT;
    if (has_prefix(p, n, "pingstatus"))
        return SG_ROUTE_BY_PINGSTATUS;
    if (word(p, n, "status"))
        return SG_ROUTE_BY_STATUS;
    if (word(p, n, "k") || word(p, n, "ping"))
        return SG_ROUTE_BY_PING;
    return SG_ROUTE_BY_OTHER;
}

static int prx_challenge_reply(int32_t challenge, uint8_t *out, size_t cap)
{
    return sg_door_oob_printf(out, cap, "c%ld", (long)challenge); /* the NUL ends the number */
}

/* One decimal number (atoi-like, optional sign), skipping spaces first. */
static bool read_int(const uint8_t **p, const uint8_t *end, long long *out)
{
    long long v = 0;
    bool neg = false, any = false;

    while (*p < end && (**p == ' ' || **p == '\t'))
        (*p)++;
    if (*p < end && (**p == '-' || **p == '+'))
        neg = *(*p)++ == '-';
    while (*p < end && **p >= '0' && **p <= '9') {
        if (v < 1000000000000LL)
            v = v * 10 + (**p - '0');
        (*p)++;
        any = true;
    }
    if (!any || (*p < end && **p != ' ' && **p != '\t' && **p != '"' && **p != '\n'))
        return false;
    *out = neg ? -v : v;
    return true;
}

/* Split the chain: its first entry into req->next, the count into req->hops. */
static int split_chain(const char *v, size_t vl, struct sg_route_by_req *req)
{
    const char *at = memchr(v, '@', vl);
    size_t first = at ? (size_t)(at - v) : vl;
    size_t i, hop = 0;

    req->hops = 1;
    for (i = 0; i < vl; i++) {
        if ((unsigned char)v[i] < 0x21 || (unsigned char)v[i] > 0x7e)
            return SG_E_MALFORMED;
        if (v[i] == '@') {
            req->hops++;
            hop = 0;
            if (i + 1 == vl || v[i + 1] == '@')
                return SG_E_MALFORMED; /* "a@", "a@@b": an empty hop */
        } else if (++hop >= sizeof(req->next)) {
            return SG_E_TOOBIG; /* every hop must fit the next node's room too */
        }
    }
    if (first == 0 || first >= sizeof(req->next))
        return first == 0 ? SG_E_MALFORMED : SG_E_TOOBIG;
    memcpy(req->next, v, first);
    req->next[first] = 0;
    return 0;
}

static int prx_connect_parse(const uint8_t *data, size_t len, struct sg_route_by_req *req)
{
    const uint8_t *p, *end = data + len, *q;
    const char *v;
    size_t vl;
    long long x;

    memset(req, 0, sizeof(*req));
    if (prx_classify(data, len) != SG_ROUTE_BY_CONNECT)
        return SG_E_MALFORMED;
    p = data + 4 + strlen("connect");
    if (!read_int(&p, end, &x) || x < 0 || x > 0xffff)
        return SG_E_MALFORMED;
    req->protocol = (int)x;
    if (!read_int(&p, end, &x) || x < 0 || x > 0xffff)
        return SG_E_MALFORMED;
    req->qport = (int)x;
    if (!read_int(&p, end, &x) || x < INT32_MIN || x > INT32_MAX)
        return SG_E_MALFORMED;
    req->challenge = (int32_t)x;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p >= end || *p != '"')
        return SG_E_MALFORMED;
    if (!(q = memchr(p + 1, '"', (size_t)(end - p - 1))))
        return SG_E_MALFORMED;
    if ((size_t)(q - p - 1) >= sizeof(req->userinfo))
        return SG_E_TOOBIG;
    if (memchr(p + 1, 0, (size_t)(q - p - 1)))
        return SG_E_MALFORMED;
    req->userinfo_len = (size_t)(q - p - 1);
    memcpy(req->userinfo, p + 1, req->userinfo_len);
    req->userinfo[req->userinfo_len] = 0;
    q++;
    if ((size_t)(end - q) > sizeof(req->tail))
        return SG_E_TOOBIG;
    req->tail_len = (size_t)(end - q);
    memcpy(req->tail, q, req->tail_len);
    if (sg_info_get(req->userinfo, req->userinfo_len, "prx", 3, &v, &vl) && v && vl > 0)
        return split_chain(v, vl, req);
    return 0;
}

static int prx_connect_rewrite(struct sg_route_by_req *req, const char *stamp_key,
                               const char *stamp)
{
    char *u = req->userinfo;
    size_t len = req->userinfo_len, cap = sizeof(req->userinfo);
    const char *v, *at = NULL;
    size_t vl, restl = 0;
    char rest[SG_ROUTE_BY_USERINFO_MAX];
    int err;

    if (sg_info_get(u, len, "prx", 3, &v, &vl) && v && (at = memchr(v, '@', vl))) {
        restl = vl - (size_t)(at + 1 - v);
        memcpy(rest, at + 1, restl);
    }
    sg_info_remove(u, &len, "prx", 3);
    err = sg_info_set(u, &len, cap, stamp_key, strlen(stamp_key), stamp, strlen(stamp));
    if (err < 0)
        return err;
    if (restl) { /* longer than an ordinary value may be: written here, as qwfwd does */
        if (len + 5 + restl + 1 > cap)
            return SG_E_TOOBIG;
        memcpy(u + len, "\\prx\\", 5);
        memcpy(u + len + 5, rest, restl);
        len += 5 + restl;
        u[len] = 0;
    }
    req->userinfo_len = len;
    return 0;
}

static int prx_getchallenge(uint8_t *out, size_t cap)
{
    static const char q[] = "\xff\xff\xff\xffgetchallenge\n";

    return sg_door_put(out, cap, q, sizeof(q) - 1);
}

static int prx_challenge_parse(const uint8_t *data, size_t len, int32_t *challenge)
{
    const uint8_t *p = data + 5, *end = data + len;
    long long v = 0;
    bool neg = false, any = false;

    if (len < 6 || sg_le32(data) != 0xffffffffu || data[4] != 'c')
        return 0;
    if (p < end && *p == '-')
        neg = *p++ == '-';
    while (p < end && *p >= '0' && *p <= '9') {
        if (v < 10000000000LL)
            v = v * 10 + (*p - '0');
        p++;
        any = true;
    }
    if (!any || (p < end && *p != 0 && *p != '\n'))
        return 0;
    v = neg ? -v : v;
    if (v < INT32_MIN || v > INT32_MAX)
        return 0;
    *challenge = (int32_t)v;
    return 1;
}

static int prx_connect_build(const struct sg_route_by_req *req, int32_t challenge, uint8_t *out,
                             size_t cap)
{
    int n;
    size_t len;

    if (cap < 4)
        return -ENOSPC;
    memcpy(out, "\xff\xff\xff\xff", 4);
    n = snprintf((char *)out + 4, cap - 4, "connect %d %d %ld \"%s\"", req->protocol, req->qport,
                 (long)challenge, req->userinfo);
    if (n < 0 || (size_t)n >= cap - 4)
        return -ENOSPC;
    len = 4 + (size_t)n;
    if (len + req->tail_len > cap)
        return -ENOSPC;
    memcpy(out + len, req->tail, req->tail_len);
    return (int)(len + req->tail_len);
}

static int prx_print(const char *text, uint8_t *out, size_t cap)
{
    return sg_door_oob_printf(out, cap, "n%s\n", text);
}

static int prx_pingstatus_reply(const struct sg_route_by_ping *pings, size_t n, uint8_t *out,
                                size_t cap)
{
    size_t i, len = 5;

    if (cap < 5 || n > (cap - 5) / 8)
        return -ENOSPC;
    memcpy(out, "\xff\xff\xff\xffn", 5);
    for (i = 0; i < n; i++, len += 8) {
        int ms = pings[i].ms < 0 || pings[i].ms > 0x7fff ? 0xffff : pings[i].ms;
        memcpy(out + len, pings[i].ip4, 4);
        out[len + 4] = (uint8_t)(pings[i].port & 0xff);
        out[len + 5] = (uint8_t)(pings[i].port >> 8);
        out[len + 6] = (uint8_t)(ms & 0xff);
        out[len + 7] = (uint8_t)((unsigned)ms >> 8);
    }
    return (int)len;
}

static int prx_ping_query(uint8_t *out, size_t cap)
{
    static const char q[] = "\xff\xff\xff\xffk\n";

    return sg_door_put(out, cap, q, sizeof(q) - 1);
}

/* A server answers 'k' with the one byte 'l' (A2A_ACK, mvdsv SVC_Ping; qwfwd
 * reads exactly that); the out-of-band form is taken too. */
static bool prx_is_ping_reply(const uint8_t *data, size_t len)
{
    return (len == 1 && data[0] == 'l') ||
           (len >= 5 && sg_le32(data) == 0xffffffffu && data[4] == 'l');
}

/* 'n' (A2C_PRINT) with the node's serverinfo and no players, as qwfwd's SVC_Status. */
static int prx_status_reply(const char *name, uint8_t *out, size_t cap)
{
    char host[64];
    size_t i;

    /* The route's name as the hostname, without the separators infostrings forbid. */
    for (i = 0; name[i] && i < sizeof(host) - 1; i++)
        host[i] = name[i] == '\\' || name[i] == '"' || name[i] == '\n' ? '_' : name[i];
    host[i] = '\0';
    return sg_door_oob_printf(out, cap, "n\\*version\\qwfwd slipgate\\hostname\\%s\n", host);
}

static int prx_ping_reply(uint8_t *out, size_t cap)
{
    if (cap < 1)
        return -ENOSPC;
    out[0] = 'l'; /* A2A_ACK, as qwfwd's SVC_Ping */
    return 1;
}

const struct sg_codec_route_by sg_qw_route_by = {
    .key = "prx",
    .classify = prx_classify,
    .challenge_reply = prx_challenge_reply,
    .connect_parse = prx_connect_parse,
    .connect_rewrite = prx_connect_rewrite,
    .getchallenge = prx_getchallenge,
    .challenge_parse = prx_challenge_parse,
    .connect_build = prx_connect_build,
    .print = prx_print,
    .pingstatus_reply = prx_pingstatus_reply,
    .ping_query = prx_ping_query,
    .is_ping_reply = prx_is_ping_reply,
    .status_reply = prx_status_reply,
    .ping_reply = prx_ping_reply,
};
