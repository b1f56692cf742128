/*
 * NetQuake control packets (NETFLAG_CTL, see oob.h): recognising a
 * connect request, building the proxy's own replies (banned, full), and
 * what the codec reads of the control packets that pass.
 */
#include "protocols/nq/oob.h"

#include "protocols/byteorder.h"
#include "protocols/door.h"
#include "protocols/error.h"
#include "protocols/nq/session.h"

#include <string.h>

/* The header's flags and length agree with what arrived. */
static bool is_control(const uint8_t *d, size_t n, size_t min)
{
    uint32_t head;

    if (n < min)
        return false;
    head = sg_be32(d);
    return (head & 0xffff0000u) == SG_NQ_NETFLAG_CTL && (head & 0xffffu) == n;
}

bool sg_nq_is_connect_request(const uint8_t *d, size_t n)
{
    static const char game[] = "QUAKE"; /* with its NUL */

    return is_control(d, n, 5 + sizeof(game)) && d[4] == SG_NQ_CCREQ_CONNECT &&
           memcmp(d + 5, game, sizeof(game)) == 0;
}

int sg_nq_accept_port(const uint8_t *d, size_t n)
{
    uint32_t port;

    if (n != SG_NQ_ACCEPT_LEN || !is_control(d, n, SG_NQ_ACCEPT_LEN) ||
        d[4] != SG_NQ_CCREP_ACCEPT)
        return -1;
    port = sg_le32(d + 5);
    return port >= 1 && port <= 65535 ? (int)port : -1;
}

void sg_nq_set_accept_port(uint8_t *d, int port)
{
    sg_put_le32(d + 5, (uint32_t)port);
}

/* ---- the door ---- */

/* A CCREP_REJECT holding the first of `texts` that fits in `cap`, or 0. */
static size_t reject(const char *const *texts, uint8_t *out, size_t cap)
{
    for (int i = 0; texts[i]; i++) {
        size_t t = strlen(texts[i]), n = 4 + 1 + t + 1;
        if (n > cap)
            continue;
        sg_put_be32(out, SG_NQ_NETFLAG_CTL | (uint32_t)n);
        out[4] = SG_NQ_CCREP_REJECT;
        memcpy(out + 5, texts[i], t + 1);
        return n;
    }
    return 0;
}

size_t sg_nq_banned_reply(const uint8_t *data, size_t len, uint8_t *out, size_t cap)
{
    static const char *const texts[] = {"You have been banned.\n", "Banned.\n", "Banned", NULL};

    if (!sg_nq_is_connect_request(data, len))
        return 0;
    return reject(texts, out, cap);
}

/* NetQuake (net_dgrm.c) rejects a connect request with no free slot so;
 * a plain 12-byte request (the answer is never longer) gets "Full.". */
size_t sg_nq_full_reply(const uint8_t *data, size_t len, uint8_t *out, size_t cap)
{
    static const char *const texts[] = {"Server is full.\n", "Full.\n", NULL};

    if (!sg_nq_is_connect_request(data, len))
        return 0;
    return reject(texts, out, cap);
}

bool sg_nq_is_admin(const uint8_t *data, size_t len)
{
    return (is_control(data, len, 5) && data[4] == SG_NQ_CCREQ_RCON) ||
           sg_door_oob_is(data, len, "rcon", false) || sg_door_oob_is(data, len, "srcon", false);
}

/* ---- a server's CCREP_SERVER_INFO (the route's readiness probe) ---- */

/* A NUL-terminated string at d[*at] (before n): its bytes cut into out
 * (`cap`), *at past its NUL.  False when no NUL ends it. */
static bool info_string(const uint8_t *d, size_t n, size_t *at, char *out, size_t cap)
{
    const uint8_t *z = memchr(d + *at, 0, n - *at);
    size_t len;

    if (!z)
        return false;
    len = (size_t)(z - (d + *at));
    if (out) {
        size_t k = len < cap - 1 ? len : cap - 1;
        memcpy(out, d + *at, k);
        out[k] = 0;
    }
    *at += len + 1;
    return true;
}

int sg_nq_server_info_parse(const uint8_t *d, size_t n, struct sg_codec_server *out)
{
    size_t at = 5;

    memset(out, 0, sizeof(*out));
    out->players = out->max_players = -1;
    if (!is_control(d, n, 5) || d[4] != SG_NQ_CCREP_SERVER_INFO)
        return SG_E_MALFORMED;
    /* address, host name, level: three strings; then players, maximum and
     * the net protocol version, a byte each (anything after: ignored). */
    if (!info_string(d, n, &at, NULL, 0) ||
        !info_string(d, n, &at, out->hostname, sizeof(out->hostname)) ||
        !info_string(d, n, &at, out->map, sizeof(out->map)) || n - at < 3) {
        memset(out, 0, sizeof(*out));
        out->players = out->max_players = -1;
        return SG_E_MALFORMED;
    }
    out->players = d[at];
    out->max_players = d[at + 1];
    return 0;
}

/* ---- the codec's decoding of the control packets that pass ---- */

static const char *ctl_name(int cmd)
{
    switch (cmd) {
    case 0x01: return "CCREQ_CONNECT";
    case 0x02: return "CCREQ_SERVER_INFO";
    case 0x03: return "CCREQ_PLAYER_INFO";
    case 0x04: return "CCREQ_RULE_INFO";
    case 0x05: return "CCREQ_RCON";
    case 0x81: return "CCREP_ACCEPT";
    case 0x82: return "CCREP_REJECT";
    case 0x83: return "CCREP_SERVER_INFO";
    case 0x84: return "CCREP_PLAYER_INFO";
    case 0x85: return "CCREP_RULE_INFO";
    case 0x86: return "CCREP_RCON";
    default: return "CCREQ_unknown";
    }
}

/* Read a control packet's body the way its receiver does; 0 or SG_E_MALFORMED. */
static int parse_ctl(struct nqc *c, const uint8_t *d, size_t n, int *cmd_out, const char **text,
                     size_t *text_len)
{
    struct sg_bmsg_reader r;
    char s[2048];
    int cmd;

    *text = NULL;
    *text_len = 0;
    sg_bmsg_reader_init(&r, d + 4, n - 4);
    cmd = sg_bmsg_read_u8(&r);
    *cmd_out = cmd;
    switch (cmd) {
    case 0x01: /* "QUAKE", version (NET_PROTOCOL_VERSION 3), engines add more */
        sg_bmsg_read_string(&r, s, sizeof(s), 0, NULL);
        sg_bmsg_read_u8(&r);
        break;
    case 0x02: /* game, version */
        sg_bmsg_read_string(&r, s, sizeof(s), 0, NULL);
        sg_bmsg_read_u8(&r);
        break;
    case 0x03:
        sg_bmsg_read_u8(&r);
        break;
    case 0x04:
    case 0x05:
    case 0x86:
        sg_bmsg_read_string(&r, s, sizeof(s), 0, NULL);
        break;
    case 0x81:
        c->accept_port = (int)sg_bmsg_read_s32(&r);
        break;
    case 0x82: { /* the reason */
        size_t at = r.pos;
        size_t len = sg_bmsg_read_string(&r, s, sizeof(s), 0, NULL);
        *text = (const char *)d + 4 + at;
        *text_len = len;
        break;
    }
    case 0x83: /* address, hostname, level, players, max, protocol */
        for (int i = 0; i < 3; i++)
            sg_bmsg_read_string(&r, s, sizeof(s), 0, NULL);
        sg_bmsg_skip(&r, 3);
        break;
    case 0x84: /* number, name, colors, frags, time, address */
        sg_bmsg_read_u8(&r);
        sg_bmsg_read_string(&r, s, sizeof(s), 0, NULL);
        sg_bmsg_skip(&r, 12);
        sg_bmsg_read_string(&r, s, sizeof(s), 0, NULL);
        break;
    case 0x85: /* rule, value; an empty body ends the list */
        if (sg_bmsg_remaining(&r) > 0) {
            sg_bmsg_read_string(&r, s, sizeof(s), 0, NULL);
            sg_bmsg_read_string(&r, s, sizeof(s), 0, NULL);
        }
        break;
    default:
        return SG_E_MALFORMED;
    }
    return r.overflowed ? SG_E_MALFORMED : 0;
}

int sg_nq__decode_ctl(struct nqc *c, enum sg_dir dir)
{
    struct sg_msg *m;
    const char *text;
    size_t text_len;
    int cmd = -1, err;

    c->stats.oob++;
    c->v.frame.kind = SG_FRAME_OOB;
    if (sg_nq__grow(c, c->copy_len) < 0)
        return -ENOMEM;
    m = &c->v.msgs[0];
    memset(m, 0, sizeof(*m));
    m->kind = SG_MSG_GAME;
    m->number = -1;
    c->v.frame.nmsgs = 1;
    if (c->copy_len >= 4 && sg_be32(c->copy) == 0xffffffffu) {
        /* DarkPlaces' connectionless packets (getchallenge first, to any
         * server).  A DarkPlaces server (Nexuiz) answers its client's
         * "connect" with "accept" there, not with CCREP_ACCEPT: the
         * connection starts over at that accept (netconn.c).  A duplicate
         * (the client sent both connects; it answers the second with
         * "accept" once the netchan runs) changes nothing: the server keeps
         * its netchan and the connected client ignores it. */
        static const char accept[] = "accept";
        m->name = "connectionless";
        if (dir == SG_DIR_C2S && c->copy_len >= 11 && memcmp(c->copy + 4, "connect", 7) == 0) {
            c->connect_seen = true;
        } else if (dir == SG_DIR_S2C && c->copy_len >= 4 + sizeof(accept) - 1 &&
                   memcmp(c->copy + 4, accept, sizeof(accept) - 1) == 0) {
            c->accepted = true;
            if (!c->running)
                sg_nq__reset_netchan(c);
        }
        return 0;
    }
    if ((sg_be32(c->copy) & NETFLAG_LENGTH_MASK) != c->copy_len || c->copy_len < 5) {
        m->name = "CCREQ_malformed";
        sg_nq__note_error(c, SG_E_MALFORMED, "control packet");
        return SG_E_MALFORMED;
    }
    err = parse_ctl(c, c->copy, c->copy_len, &cmd, &text, &text_len);
    m->name = ctl_name(cmd);
    c->ctl_name = m->name;
    if (cmd == 0x82 && text) {
        m->kind = SG_MSG_DISCONNECT;
        m->text = m->command = sg_textpool_keep(&c->v.text, text, text_len);
        m->text_len = m->text ? text_len : 0;
    }
    if (dir == SG_DIR_C2S && cmd == 0x01) {
        /* Clients repeat their request until an accept comes (and one may
         * arrive after it): the connection starts over at the accept only. */
        c->connect_seen = true;
    } else if (dir == SG_DIR_S2C && cmd == 0x81 && err == 0) {
        c->accepted = true;
        sg_nq__reset_netchan(c);
    }
    if (err < 0)
        sg_nq__note_error(c, err, "control packet");
    return err;
}
