/*
 * QuakeWorld in the registry: no decoder yet, but the qport that names a
 * player across NAT rebinding.
 *
 * A client's in-game datagram (mvdsv net_chan.c):
 *   0       4       8       10
 *   | seq   | ack   | qport | message ...
 * both words little-endian, the qport a little-endian 16-bit number the
 * client picks once; the server matches base IP and qport, then follows a
 * new source port.  Connectionless packets start with 0xFFFFFFFF; the
 * client's connect is "connect 28 <qport> <challenge> \"<userinfo>\"".
 */
#include "protocols/codec.h"
#include "protocols/byteorder.h"

#include <string.h>

static bool qw_is_connect(const uint8_t *d, size_t n)
{
    static const char cn[] = "\xff\xff\xff\xff"
                             "connect 28 ";

    return n >= sizeof(cn) - 1 && memcmp(d, cn, sizeof(cn) - 1) == 0;
}

static int qw_client_qport(union sg_relay_state *rs, const uint8_t *d, size_t n, bool learn)
{
    (void)rs;
    (void)learn;
    if (n < 10 || sg_le32(d) == 0xffffffffu)
        return -1;
    return sg_le16(d + 8);
}

const struct sg_codec sg_qw_relay = {
    .name = "qw",
    .description = "QuakeWorld (protocol 28): relayed, not decoded yet",
    .probe = qw_is_connect,
    .is_connect = qw_is_connect,
    .client_qport = qw_client_qport,
};
