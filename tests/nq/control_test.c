/*
 * NetQuake control packets: what counts as a connect request and an
 * accept, and the accept's port rewritten in place.  The bytes are built
 * here from the layout (WinQuake net_dgrm.c); the real handshake is proven
 * by tests/peers/nq_peers.py.
 */
#include "protocols/nq/control.h"

#include "tests/unit.h"

#include <stdio.h>
#include <string.h>

/* A control packet: NETFLAG_CTL | length (big-endian), then body. */
static size_t control(uint8_t *out, const void *body, size_t n)
{
    size_t len = 4 + n;

    out[0] = 0x80;
    out[1] = 0;
    out[2] = (uint8_t)(len >> 8);
    out[3] = (uint8_t)len;
    memcpy(out + 4, body, n);
    return len;
}

static void test_connect_request(void)
{
    uint8_t d[64];
    size_t n = control(d, "\x01QUAKE\0\x03", 8);

    CHECK(sg_nq_is_connect_request(d, n));
    /* Bytes after the version do not matter. */
    n = control(d, "\x01QUAKE\0\x03\x05\x06", 10);
    CHECK(sg_nq_is_connect_request(d, n));
    /* The length word must match what arrived. */
    CHECK(!sg_nq_is_connect_request(d, n - 1));
    d[3]++;
    CHECK(!sg_nq_is_connect_request(d, n));
    /* Another game, another command, a data packet, or cut short. */
    n = control(d, "\x01QUAKF\0\x03", 8);
    CHECK(!sg_nq_is_connect_request(d, n));
    n = control(d, "\x02QUAKE\0\x03", 8);
    CHECK(!sg_nq_is_connect_request(d, n));
    n = control(d, "\x01QUAKE\0\x03", 8);
    d[0] = 0x00;
    d[1] = 0x10; /* NETFLAG_UNRELIABLE */
    CHECK(!sg_nq_is_connect_request(d, n));
    n = control(d, "\x01QUAK", 5);
    CHECK(!sg_nq_is_connect_request(d, n));
    /* A Quake 3 connectionless packet never is one. */
    CHECK(!sg_nq_is_connect_request((const uint8_t *)"\xff\xff\xff\xffgetchallenge", 16));
}

static void test_accept(void)
{
    uint8_t d[16];
    size_t n = control(d, "\x81\x39\x6d\x00\x00", 5); /* port 27961, little-endian */

    CHECK_EQ(n, (size_t)SG_NQ_ACCEPT_LEN);
    CHECK_EQ(sg_nq_accept_port(d, n), 27961);
    sg_nq_set_accept_port(d, 26020);
    CHECK_EQ(sg_nq_accept_port(d, n), 26020);
    CHECK(memcmp(d, "\x80\x00\x00\x09\x81\xa4\x65\x00\x00", 9) == 0);
    /* Ports outside 1..65535, a reject, a wrong length. */
    n = control(d, "\x81\x00\x00\x00\x00", 5);
    CHECK_EQ(sg_nq_accept_port(d, n), -1);
    n = control(d, "\x81\x00\x00\x01\x00", 5);
    CHECK_EQ(sg_nq_accept_port(d, n), -1);
    n = control(d, "\x82\x39\x6d\x00\x00", 5); /* CCREP_REJECT */
    CHECK_EQ(sg_nq_accept_port(d, n), -1);
    n = control(d, "\x81\x39\x6d\x00\x00\x00", 6);
    CHECK_EQ(sg_nq_accept_port(d, n), -1);
    n = control(d, "\x81\x39\x6d\x00\x00", 5);
    CHECK_EQ(sg_nq_accept_port(d, n - 1), -1);
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"connect_request", test_connect_request},
        {"accept", test_accept},
    };
    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
