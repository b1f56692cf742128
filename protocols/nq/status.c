/*
 * NetQuake status query, for `slipgate doctor` and the readiness probe
 * (oob.c reads the answer for the route's page): the control packet
 * CCREQ_SERVER_INFO (header NETFLAG_CTL | length, command 0x02, "QUAKE",
 * NUL, net protocol version 3); the server answers CCREP_SERVER_INFO
 * (0x83: its address, host name, map, players, maximum, version)
 * (WinQuake net_dgrm.c, _Datagram_CheckNewConnections).
 */
#include "protocols/byteorder.h"
#include "protocols/codec.h"
#include "protocols/nq/oob.h"

#include <errno.h>
#include <string.h>

#define CCREQ_SERVER_INFO 0x02
#define CCREP_SERVER_INFO 0x83
#define QUERY_LEN         12 /* header, command, "QUAKE\0", version */

static int nq_status_query(uint8_t *out, size_t cap)
{
    if (cap < QUERY_LEN)
        return -ENOSPC;
    sg_put_be32(out, SG_NQ_NETFLAG_CTL | QUERY_LEN);
    out[4] = CCREQ_SERVER_INFO;
    memcpy(out + 5, "QUAKE", 6);
    out[11] = 3;
    return QUERY_LEN;
}

static bool nq_status_is_reply(const uint8_t *data, size_t len)
{
    if (len < 5 || len > 0xffff)
        return false;
    uint32_t head = sg_be32(data);
    return (head & 0xffff0000u) == SG_NQ_NETFLAG_CTL && (head & 0xffffu) == len &&
           data[4] == CCREP_SERVER_INFO;
}

const struct sg_codec_status sg_nq_status = {
    .what = "CCREQ_SERVER_INFO",
    .query = nq_status_query,
    .is_reply = nq_status_is_reply,
    .parse = sg_nq_server_info_parse,
};

/*
 * Master servers: id's NetQuake has none.  DarkPlaces (the NetQuake-family
 * server that has one) speaks the dpmaster protocol: "heartbeat
 * DarkPlaces\n" every sv_heartbeatperiod (120 s by default; DarkPlaces
 * netconn.c), answered by the master's "getinfo CHALLENGE", which
 * DarkPlaces answers as a Quake 3 server does.  No shutdown message: the
 * master drops a server that stops answering.
 */
static const char dp_heartbeat[] = "\xff\xff\xff\xffheartbeat DarkPlaces\n";

const struct sg_codec_master sg_nq_master = {
    .what = "heartbeat DarkPlaces",
    .interval_ms = 120 * 1000,
    .heartbeat_text = dp_heartbeat,
};
