/*
 * NetQuake's relay hook (codec.c puts it in the registry): the handshake
 * that moves the server's port.
 *
 * The server's CCREP_ACCEPT names a UDP port it opened for this client
 * alone (oob.h).  Relayed as it is, the client would leave slipgate and
 * talk to the server directly; so the accept the client gets names
 * slipgate's own port (where the session already is), and the proxy points
 * the session's upstream socket at the server's new port.
 *
 * That move is followed only for a genuine answer:
 *   - it answers a CCREQ_CONNECT this session forwarded, once per connect
 *     (a later accept without a new request is relayed as it came);
 *   - it came from the port the session talks to (the proxy relays only
 *     datagrams from the server's address and port), which a connect
 *     request always resets to the server's control port;
 *   - the client has never sent a server's control reply (CCREP_*) itself:
 *     a server that echoes (many do, for any unknown datagram) would hand
 *     it back as if it were the server's own accept;
 *   - the port is inside the route's nq_accept_ports;
 *   - the port is none of slipgate's own sockets on the server's host (a
 *     listener, or another session's upstream socket): the session would
 *     relay to slipgate itself.
 * A refused accept is relayed as it came, and the session stays.
 */
#include "protocols/codec.h"
#include "protocols/byteorder.h"
#include "protocols/nq/oob.h"
#include "protocols/nq/nq.h"

#include <string.h>

struct nq_hs {
    bool connecting;        /* a connect request went out; its accept not yet seen */
    bool client_replied;    /* the client sent a CCREP_* of its own */
    uint16_t control_port;  /* the server's port before an accept moved the session, or 0 */
    uint8_t accept[SG_NQ_ACCEPT_LEN]; /* the accept as the client gets it */
};

_Static_assert(sizeof(struct nq_hs) <= sizeof(union sg_relay_state), "nq_hs fits");

/* A control packet (its length word matching) whose command is a server's
 * reply (CCREP_*: bit 7 set). */
static bool is_reply(const uint8_t *d, size_t n)
{
    uint32_t head;

    if (n < 5)
        return false;
    head = sg_be32(d);
    return (head & 0xffff0000u) == SG_NQ_NETFLAG_CTL && (head & 0xffffu) == n &&
           (d[4] & 0x80) != 0;
}

int sg_nq_relay_handshake(union sg_relay_state *rs, const struct sg_relay_ctx *ctx,
                          enum sg_dir dir, const uint8_t *data, size_t len,
                          struct sg_relay_move *out)
{
    struct nq_hs *st = (struct nq_hs *)rs->bytes;
    int port;

    memset(out, 0, sizeof(*out));
    if (dir == SG_DIR_C2S) {
        out->awaiting = st->connecting || sg_nq_is_connect_request(data, len);
        if (sg_nq_is_connect_request(data, len)) {
            st->connecting = true;
            /* Connecting again after a move: the request belongs at the
             * server's control port, not the port it gave the last time. */
            if (st->control_port) {
                out->server_port = st->control_port;
                out->label = "NetQuake connect";
                st->control_port = 0;
            }
        } else if (is_reply(data, len)) {
            st->client_replied = true;
        }
        return 0;
    }

    out->awaiting = st->connecting;
    if (!st->connecting || (port = sg_nq_accept_port(data, len)) < 0)
        return 0;
    out->awaiting = false;
    st->connecting = false; /* once per connect */
    out->label = "NetQuake accept";
    if (st->client_replied) {
        out->refused = "the client itself sent server replies (CCREP) towards the server, so "
                       "this accept may be their echo";
        out->refused_port = port;
        return 0;
    }
    if (ctx->own_port && ctx->own_port(ctx->opaque, port)) {
        out->refused = "the port is one of slipgate's own sockets on the server's host (the "
                       "session would relay to slipgate itself)";
        out->refused_port = port;
        return 0;
    }
    if (port != ctx->server_port && (port < ctx->port_low || port > ctx->port_high)) {
        out->refused = "the port is outside nq_accept_ports";
        out->refused_port = port;
        return 0;
    }
    memcpy(st->accept, data, len);
    sg_nq_set_accept_port(st->accept, ctx->listen_port);
    out->data = st->accept;
    out->len = len;
    if (port == ctx->server_port)
        return 0;
    out->server_port = port;
    out->moved = true;
    st->control_port = (uint16_t)ctx->server_port;
    return 0;
}
