/*
 * Quake 2's relay hooks (codec.c puts them in the registry entry): the
 * qport that names a player across NAT rebinding.
 *
 * A client's in-game datagram (q2pro chan.c, NetchanOld/New_Transmit):
 *   0       4       8
 *   | seq   | ack   | qport | message ...
 * protocol 34: the qport is a little-endian 16-bit number, always there;
 * R1Q2 (35) and Q2PRO (36): one byte, qport & 0xff, left out entirely
 * when that byte is 0.  Both ends decide from the qport in the client's
 * connect, "connect <protocol> <qport> <challenge> \"<userinfo>\"...", so
 * the width is learnt from it; before a connect is seen only 34 is read.
 * The server matches base IP and qport, then follows a new source port;
 * slipgate also wants a sequence that continues the client's (seqwin.h).
 */
#include "protocols/codec.h"
#include "protocols/q2/q2.h"
#include "protocols/byteorder.h"
#include "protocols/seqwin.h"

#include <string.h>

struct q2_rs {
    int protocol; /* from the connect: 34, 35, 36; 0 unknown */
    int qport;    /* from the connect */
    struct sg_seqwin seq; /* the client's sequence (NAT rebinding) */
};

/* Bit 31: reliable data; bit 30: a fragment (Q2PRO's new netchan). */
#define Q2_SEQ_MASK 0x3fffffffu

_Static_assert(sizeof(struct q2_rs) <= sizeof(union sg_relay_state), "q2_rs fits");

static const char cn[] = "\xff\xff\xff\xff"
                         "connect ";

/* A decimal number at d[*i] (at most 9 digits), then a space; -1 if none. */
static long number(const uint8_t *d, size_t n, size_t *i)
{
    long v = 0;
    size_t start = *i;

    while (*i < n && *i - start < 9 && d[*i] >= '0' && d[*i] <= '9')
        v = v * 10 + (d[(*i)++] - '0');
    if (*i == start || *i >= n || d[*i] != ' ')
        return -1;
    (*i)++;
    return v;
}

/* The protocol and qport of a Quake 2 connect (34, 35, 36), or false. */
static bool parse_connect(const uint8_t *d, size_t n, int *protocol, int *qport)
{
    size_t i = sizeof(cn) - 1;
    long p, q;

    if (n < i || memcmp(d, cn, i) != 0)
        return false;
    p = number(d, n, &i);
    if (p == 2022 || p == 2023) {
        /* rerelease (KEX): `connect {protocol} {num split} ...`, no qport;
         * its transport is not public (PROTOCOLS.md B): relayed as it comes */
        *protocol = (int)p;
        *qport = -1;
        return true;
    }
    if (p < 34 || p > 36)
        return false;
    q = number(d, n, &i);
    if (q < 0 || q > 65535)
        return false;
    *protocol = (int)p;
    *qport = (int)q;
    return true;
}

bool sg_q2_is_connect(const uint8_t *d, size_t n)
{
    int p, q;

    return parse_connect(d, n, &p, &q);
}

int sg_q2_client_qport(union sg_relay_state *rs, const uint8_t *d, size_t n, bool learn)
{
    struct q2_rs *st = (struct q2_rs *)rs->bytes;
    int p, q;

    if (n >= 4 && sg_le32(d) == 0xffffffffu) {
        if (learn && parse_connect(d, n, &p, &q)) {
            st->protocol = p;
            st->qport = q;
            sg_seqwin_reset(&st->seq); /* a new connection: sequences restart */
        }
        return -1;
    }
    if (st->protocol == 2022 || st->protocol == 2023)
        return -1; /* KEX: no known header, no qport */
    if (learn && n >= 8)
        sg_seqwin_learn(&st->seq, sg_le32(d), Q2_SEQ_MASK);
    if (st->protocol == 35 || st->protocol == 36)
        return (st->qport & 0xff) != 0 && n >= 9 ? d[8] : -1;
    return n >= 10 ? sg_le16(d + 8) : -1;
}

/* A move needs the sequence window (seqwin.h). */
bool sg_q2_client_follows(const union sg_relay_state *rs, const void *state, const uint8_t *d,
                              size_t n, char *why, size_t whylen)
{
    const struct q2_rs *st = (const struct q2_rs *)rs->bytes;

    (void)state;
    if (st->protocol == 2022 || st->protocol == 2023) {
        snprintf(why, whylen, "rerelease (KEX) transport not known");
        return false;
    }
    if (n < 8 || sg_le32(d) == 0xffffffffu) {
        snprintf(why, whylen, "not a sequenced datagram");
        return false;
    }
    return sg_seqwin_follows(st->seq.have, st->seq.last, sg_le32(d), Q2_SEQ_MASK, why, whylen);
}
