/*
 * NetQuake control packets: what counts as a connect request and an
 * accept, and the accept's port rewritten in place.  The bytes are built
 * here from the layout (WinQuake net_dgrm.c), then read from a real
 * quakespasm/DarkPlaces capture ($SG_TESTDATA); the live handshake through
 * slipgate is proven by tests/peers/relay_peers.py.
 */
#include "protocols/nq/oob.h"

#include "tests/q3/pcap_udp.h"
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

struct capture_scan {
    int connects;       /* client CCREQ_CONNECTs */
    uint16_t control;   /* the server port they went to */
    int accepts;        /* server CCREP_ACCEPTs from there */
    int moved_to;       /* the port the (last) accept named */
    int from_moved;     /* server datagrams from that port, after the accept */
    int control_others; /* other datagrams the parsers took for either */
};

static int scan(const struct pcap_udp *u, void *arg)
{
    struct capture_scan *c = arg;
    int port = sg_nq_accept_port(u->data, u->len);

    if (sg_nq_is_connect_request(u->data, u->len)) {
        c->connects++;
        c->control = u->dport;
    } else if (port > 0) {
        if (c->connects && u->sport == c->control) {
            c->accepts++;
            c->moved_to = port;
        } else {
            c->control_others++;
        }
    } else if (c->moved_to && u->sport == c->moved_to) {
        c->from_moved++;
    }
    return 0;
}

/* The real handshake: one connect request, the accept names a new port,
 * and the game then comes from that port. */
static void test_capture(void)
{
    const char *root = getenv("SG_TESTDATA");
    char path[4096];
    struct capture_scan c = {0};

    if (!root) {
        fprintf(stderr, "SG_TESTDATA is not set\n");
        failures++;
        return;
    }
    snprintf(path, sizeof(path), "%s/nq/sessions/quakespasm_darkplaces/capture.pcap", root);
    CHECK(pcap_udp_foreach(path, scan, &c) == 0);
    CHECKF(c.connects >= 1, "%d connect requests", c.connects);
    CHECKF(c.accepts >= 1, "%d accepts", c.accepts);
    CHECKF(c.moved_to > 0 && c.moved_to != c.control, "moved from %u to %d", c.control,
           c.moved_to);
    CHECKF(c.from_moved > 100, "%d server datagrams from the new port", c.from_moved);
    CHECKF(c.control_others == 0, "%d other datagrams taken for an accept", c.control_others);
    printf("connects %d to port %u, accepts %d -> port %d, %d datagrams from there\n", c.connects,
           c.control, c.accepts, c.moved_to, c.from_moved);
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"connect_request", test_connect_request},
        {"accept", test_accept},
        {"capture", test_capture},
    };
    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
