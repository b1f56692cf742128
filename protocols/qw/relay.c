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
 * A new port moves the session only with a sequence that continues the
 * client's (seqwin.h).
 */
#include "protocols/codec.h"
#include "protocols/byteorder.h"
#include "protocols/seqwin.h"

#include <string.h>

static bool qw_is_connect(const uint8_t *d, size_t n)
{
    static const char cn[] = "\xff\xff\xff\xff"
                             "connect 28 ";

    return n >= sizeof(cn) - 1 && memcmp(d, cn, sizeof(cn) - 1) == 0;
}

/* The relay hooks' state: the client's sequence (NAT rebinding). */
struct qw_rs {
    struct sg_seqwin seq;
};

_Static_assert(sizeof(struct qw_rs) <= sizeof(union sg_relay_state), "qw_rs fits");

#define QW_SEQ_MASK 0x7fffffffu /* bit 31: the datagram carries reliable data */

static int qw_client_qport(union sg_relay_state *rs, const uint8_t *d, size_t n, bool learn)
{
    struct qw_rs *st = (struct qw_rs *)rs->bytes;

    if (learn && qw_is_connect(d, n))
        sg_seqwin_reset(&st->seq); /* a new connection: sequences restart */
    if (n < 10 || sg_le32(d) == 0xffffffffu)
        return -1;
    if (learn)
        sg_seqwin_learn(&st->seq, sg_le32(d), QW_SEQ_MASK);
    return sg_le16(d + 8);
}

/* No decoder: a move needs the sequence window (seqwin.h). */
static bool qw_client_follows(const union sg_relay_state *rs, const void *state, const uint8_t *d,
                              size_t n, char *why, size_t whylen)
{
    const struct qw_rs *st = (const struct qw_rs *)rs->bytes;

    (void)state;
    if (n < 10 || sg_le32(d) == 0xffffffffu) {
        snprintf(why, whylen, "not a sequenced datagram");
        return false;
    }
    return sg_seqwin_follows(st->seq.have, st->seq.last, sg_le32(d), QW_SEQ_MASK, why, whylen);
}

const struct sg_codec sg_qw_relay = {
    .name = "qw",
    .description = "QuakeWorld (protocol 28): relayed, not decoded yet",
    .probe = qw_is_connect,
    .is_connect = qw_is_connect,
    .client_qport = qw_client_qport,
    .client_follows = qw_client_follows,
};
