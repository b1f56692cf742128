/*
 * NetQuake control packets: what counts as a connect request and an
 * accept, the accept's port rewritten in place, and the server's
 * CCREP_SERVER_INFO read for the route's page (good, cut, hostile).  The bytes are built
 * here from the layout (WinQuake net_dgrm.c), then read from a real
 * quakespasm/DarkPlaces capture ($SG_TESTDATA); the live handshake through
 * slipgate is proven by tests/peers/relay_peers.py.
 */
#include "protocols/nq/oob.h"

#include "protocols/codec.h"
#include "protocols/error.h"
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

/* ---- CCREP_SERVER_INFO, the answer the readiness probe reads ---- */

extern const struct sg_codec sg_nq_codec;

/* address, host name, level, players 3, maximum 16, version 3 */
static const char info_body[] = "\x83" "127.0.0.1:26000\0" "Slip Gate\0" "e1m1\0" "\x03\x10\x03";
#define INFO_BODY_LEN (sizeof(info_body) - 1)

static int read_info(const uint8_t *d, size_t n, struct sg_codec_server *sv)
{
    return sg_nq_codec.status->parse(d, n, sv);
}

static void check_info_refused(const uint8_t *d, size_t n, const char *what)
{
    struct sg_codec_server sv;
    int err = read_info(d, n, &sv);

    CHECKF(err == SG_E_MALFORMED, "%s: %d", what, err);
    CHECKF(!sv.hostname[0] && !sv.map[0] && sv.players == -1 && sv.max_players == -1,
           "%s: left %s / %s / %d / %d", what, sv.hostname, sv.map, sv.players, sv.max_players);
}

static void test_server_info_good(void)
{
    uint8_t d[512], q[64];
    struct sg_codec_server sv;
    size_t n = control(d, info_body, INFO_BODY_LEN);
    int k;

    /* The hooks: the query (header, command, "QUAKE", version 3), the answer recognised. */
    CHECK(sg_nq_codec.status->parse == sg_nq_server_info_parse);
    k = sg_codec_status_query(sg_nq_codec.status, q, sizeof(q));
    CHECK(k == 12 && memcmp(q, "\x80\x00\x00\x0c\x02QUAKE\0\x03", 12) == 0);
    CHECK(sg_codec_status_is_reply(sg_nq_codec.status, d, n));

    CHECK_EQ(read_info(d, n, &sv), 0);
    CHECK(strcmp(sv.hostname, "Slip Gate") == 0 && strcmp(sv.map, "e1m1") == 0);
    CHECK_EQ(sv.players, 3);
    CHECK_EQ(sv.max_players, 16);

    /* Bytes after the version: ignored. */
    {
        uint8_t body[INFO_BODY_LEN + 4];
        memcpy(body, info_body, INFO_BODY_LEN);
        memcpy(body + INFO_BODY_LEN, "more", 4);
        n = control(d, body, sizeof(body));
        CHECK_EQ(read_info(d, n, &sv), 0);
        CHECK_EQ(sv.max_players, 16);
    }
    /* Long strings are cut to the room, NUL-terminated; 255 players read as 255. */
    {
        uint8_t body[400];
        size_t at = 0;
        body[at++] = 0x83;
        body[at++] = 0; /* an empty address */
        memset(body + at, 'h', 150);
        at += 150;
        body[at++] = 0;
        memset(body + at, 'm', 100);
        at += 100;
        body[at++] = 0;
        body[at++] = 255;
        body[at++] = 255;
        body[at++] = 3;
        n = control(d, body, at);
        CHECK_EQ(read_info(d, n, &sv), 0);
        CHECK_EQ(strlen(sv.hostname), sizeof(sv.hostname) - 1);
        CHECK_EQ(strlen(sv.map), sizeof(sv.map) - 1);
        CHECK(sv.players == 255 && sv.max_players == 255);
    }
}

/* Every cut of the answer (its length word matching the cut): refused. */
static void test_server_info_truncated(void)
{
    uint8_t d[512];
    size_t n;

    for (size_t k = 0; k < INFO_BODY_LEN; k++) {
        char what[32];
        snprintf(what, sizeof(what), "cut at %zu", k);
        n = control(d, info_body, k);
        check_info_refused(d, n, what);
    }
    /* Whole, but the datagram shorter or longer than its length word. */
    n = control(d, info_body, INFO_BODY_LEN);
    check_info_refused(d, n - 1, "one byte short of its length");
    d[n] = 0;
    check_info_refused(d, n + 1, "one byte past its length");
    for (size_t k = 0; k < 4; k++)
        check_info_refused(d, k, "a header cut short");
}

static void test_server_info_hostile(void)
{
    uint8_t d[70000];
    size_t n;

    /* Another control packet, a data packet, a connectionless one. */
    n = control(d, "\x82Server is full.\n\0", 18);
    check_info_refused(d, n, "CCREP_REJECT");
    n = control(d, info_body, INFO_BODY_LEN);
    d[1] = 0x01; /* NETFLAG_DATA | CTL */
    check_info_refused(d, n, "other flags");
    n = control(d, info_body, INFO_BODY_LEN);
    memcpy(d, "\xff\xff\xff\xff", 4);
    check_info_refused(d, n, "0xFFFFFFFF");
    /* Strings that never end: no NUL after the address, the name, the level. */
    check_info_refused(d, control(d, "\x83" "127.0.0.1", 10), "no NUL after the address");
    check_info_refused(d, control(d, "\x83" "a\0Slip Gate", 12), "no NUL after the name");
    check_info_refused(d, control(d, "\x83" "a\0b\0e1m1", 9), "no NUL after the level");
    check_info_refused(d, control(d, "\x83" "a\0b\0c\0\x01\x02", 9), "the version missing");
    /* The longest a length word allows, all one string: refused, nothing read past it. */
    memset(d, 'x', sizeof(d));
    d[0] = 0x80;
    d[1] = 0;
    d[2] = d[3] = 0xff;
    d[4] = 0x83;
    check_info_refused(d, 0xffff, "65535 bytes without a NUL");
    /* Random bodies: read or refused, never past the data. */
    {
        uint64_t rng = 11;
        for (int round = 0; round < 3000; round++) {
            uint8_t body[64];
            struct sg_codec_server sv;
            size_t len = 1 + unit_rng(&rng) % sizeof(body);
            body[0] = 0x83;
            for (size_t i = 1; i < len; i++)
                body[i] = (uint8_t)(unit_rng(&rng) % 3 ? 'a' + unit_rng(&rng) % 3 : 0);
            n = control(d, body, len);
            int err = sg_nq_server_info_parse(d, n, &sv);
            CHECK(err == 0 || err == SG_E_MALFORMED);
            CHECK(memchr(sv.hostname, 0, sizeof(sv.hostname)) && memchr(sv.map, 0, sizeof(sv.map)));
            CHECK(sv.players >= -1 && sv.players <= 255 && sv.max_players <= 255);
        }
    }
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"connect_request", test_connect_request},
        {"accept", test_accept},
        {"capture", test_capture},
        {"server_info_good", test_server_info_good},
        {"server_info_truncated", test_server_info_truncated},
        {"server_info_hostile", test_server_info_hostile},
    };
    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
