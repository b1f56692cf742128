/*
 * QuakeWorld's relay hooks (codec.c puts them in the registry entry): a
 * client's connect recognised, and the qport that names a player across
 * NAT rebinding.
 *
 * A client's in-game datagram (mvdsv / ezQuake netchan.c):
 *   0       4       8
 *   | seq   | ack   | qport | message ...
 * the qport a little-endian 16-bit number, always there.  The server
 * matches base IP and qport, then follows a new source port; slipgate also
 * wants a sequence that continues the client's (seqwin.h).
 */
#include "protocols/codec.h"
#include "protocols/qw/qw.h"
#include "protocols/byteorder.h"
#include "protocols/seqwin.h"

#include <stdio.h>
#include <string.h>

bool sg_qw_is_connect(const uint8_t *d, size_t n)
{
    static const char cn[] = "\xff\xff\xff\xff"
                             "connect 28 ";

    return n >= sizeof(cn) - 1 && memcmp(d, cn, sizeof(cn) - 1) == 0;
}

/* The relay hooks' state: the client's sequence (NAT rebinding, seqwin.h). */
struct qw_rs {
    struct sg_seqwin seq;
};

_Static_assert(sizeof(struct qw_rs) <= sizeof(union sg_relay_state), "qw_rs fits");

#define QW_SEQ_MASK 0x7fffffffu /* bit 31: the datagram carries reliable data */

int sg_qw_client_qport(union sg_relay_state *rs, const uint8_t *d, size_t n, bool learn)
{
    struct qw_rs *st = (struct qw_rs *)rs->bytes;

    if (learn && sg_qw_is_connect(d, n))
        sg_seqwin_reset(&st->seq); /* a new connection: sequences restart */
    if (n < 10 || sg_le32(d) == 0xffffffffu)
        return -1;
    if (learn)
        sg_seqwin_learn(&st->seq, sg_le32(d), QW_SEQ_MASK);
    return sg_le16(d + 8);
}

/* A new port moves the session only with a sequence that continues the client's. */
bool sg_qw_client_follows(const union sg_relay_state *rs, const void *state, const uint8_t *d,
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
