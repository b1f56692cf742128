/*
 * Quake 3's relay hooks (codec.c puts them in the registry entry): the
 * probe that knows a Quake 3 client's first packet, and the qport that
 * names a player across NAT rebinding, with the sequence a move must
 * continue (seqwin.h).
 */
#include "protocols/q3/session.h"

#include "protocols/byteorder.h"
#include "protocols/q3/oob.h"
#include "protocols/seqwin.h"

#include <stdio.h>
#include <string.h>

bool sg_q3__probe(const uint8_t *d, size_t n)
{
    static const char gc[] = "\xff\xff\xff\xffgetchallenge";
    static const char cn[] = "\xff\xff\xff\xff"
                             "connect ";

    /* Quake 3's getchallenge has no newline (QuakeWorld's and Quake 2's do). */
    if (n >= sizeof(gc) - 1 && memcmp(d, gc, sizeof(gc) - 1) == 0)
        return n == sizeof(gc) - 1 || d[sizeof(gc) - 1] == ' ';
    /*
     * Its connect carries Huffman-coded userinfo after a 16-bit big-endian
     * length of the plain text (under 8 KiB, so the first byte is a control
     * character); QuakeWorld's and Quake 2's go on in text ("connect 28 ...").
     * Quake 3 1.11-1.16 (protocol 43) sent it plain: the quoted userinfo.
     */
    return n > sizeof(cn) + 2 && memcmp(d, cn, sizeof(cn) - 1) == 0 &&
           (d[sizeof(cn) - 1] < 0x20 || d[sizeof(cn) - 1] == '"');
}

/* A client's in-game datagram: sequence, then its 16-bit qport (netchan.h). */
/* The relay hooks' state: the client's sequence (NAT rebinding). */
struct q3_rs {
    struct sg_seqwin seq;
};

_Static_assert(sizeof(struct q3_rs) <= sizeof(union sg_relay_state), "q3_rs fits");

#define Q3_SEQ_MASK 0x7fffffffu /* the fragment bit removed */

int sg_q3__client_qport(union sg_relay_state *rs, const uint8_t *d, size_t n, bool learn)
{
    struct q3_rs *st = (struct q3_rs *)rs->bytes;
    static const char cn[] = "\xff\xff\xff\xff"
                             "connect";

    if (learn && n >= sizeof(cn) - 1 && memcmp(d, cn, sizeof(cn) - 1) == 0)
        sg_seqwin_reset(&st->seq); /* a new connection: sequences restart */
    if (n < 6 || sg_q3_oob_is(d, n))
        return -1;
    if (learn)
        sg_seqwin_learn(&st->seq, sg_le32(d), Q3_SEQ_MASK);
    return sg_le16(d + 4);
}

/*
 * A move needs what the server's netchan would accept from the client: a
 * sequence newer than the last one accepted and within the window, and on
 * ioquake3 71 a checksum made with the session's challenge.  Without a
 * decoder (or before it knows the wire), the sequence the relay hook saw.
 */
bool sg_q3__client_follows(const union sg_relay_state *rs, const void *state, const uint8_t *d,
                           size_t n, char *why, size_t whylen)
{
    const struct q3_rs *st = (const struct q3_rs *)rs->bytes;
    const struct q3c *c = state;
    uint32_t seq, last;
    bool have;

    if (n < 6 || sg_q3_oob_is(d, n)) {
        snprintf(why, whylen, "not a sequenced datagram");
        return false;
    }
    seq = sg_le32(d) & Q3_SEQ_MASK;
    have = st->seq.have;
    last = st->seq.last;
    if (c && c->nc.wire != SG_Q3_WIRE_UNKNOWN && c->nc.rx[SG_Q3_C2S].incoming_sequence > 0) {
        have = true;
        last = (uint32_t)c->nc.rx[SG_Q3_C2S].incoming_sequence;
    }
    if (!sg_seqwin_follows(have, last, seq, Q3_SEQ_MASK, why, whylen))
        return false;
    if (c && sg_q3_wire_checksum(c->nc.wire)) {
        if (n < 10 || !c->nc.have_challenge ||
            sg_le32(d + 6) != sg_q3_netchan_checksum(c->nc.challenge, (int32_t)seq)) {
            snprintf(why, whylen, "its checksum does not match the session's challenge");
            return false;
        }
    }
    return true;
}
