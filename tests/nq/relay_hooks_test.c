/*
 * The relay hooks of the codec table (protocols/codec.h), called as the
 * proxy calls them: NetQuake's handshake hook (when an accept moves the
 * session, and when it must not) and the qport of Quake 3, QuakeWorld and
 * Quake 2 client datagrams, and whether one from a new port may move the
 * session (client_follows).  The proxy's use of them is proven by the
 * loopback cases nq_accept_* and qport_*, and fault@replay_ioq71_nat.
 */
#include "protocols/codec.h"

#include "tests/unit.h"

#include <stdio.h>
#include <string.h>

static const struct sg_relay_ctx ctx = {
    .listen_port = 26000, .server_port = 27500, .port_low = 1024, .port_high = 65535};

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

static size_t accept_of(uint8_t *out, int port)
{
    uint8_t body[5] = {0x81, (uint8_t)port, (uint8_t)(port >> 8), 0, 0};

    return control(out, body, sizeof(body));
}

static void step(const struct sg_codec *nq, union sg_relay_state *rs, enum sg_dir dir,
                 const uint8_t *d, size_t n, struct sg_relay_move *m)
{
    CHECK(nq->handshake(rs, &ctx, dir, d, n, m) == 0);
}

static void test_nq_handshake(void)
{
    const struct sg_codec *nq = sg_codec_find("nq");
    union sg_relay_state rs;
    struct sg_relay_move m;
    uint8_t conn[16], acc[16];
    size_t nc = control(conn, "\x01QUAKE\0\x03", 8), na = accept_of(acc, 40000);

    CHECK(nq && nq->handshake && sg_codec_decodes(nq));
    if (!nq || !nq->handshake)
        return;

    /* A genuine answer: rewritten to slipgate's port, the session moves. */
    memset(&rs, 0, sizeof(rs));
    step(nq, &rs, SG_DIR_C2S, conn, nc, &m);
    CHECK(m.server_port == 0 && !m.data);
    step(nq, &rs, SG_DIR_S2C, acc, na, &m);
    CHECK(m.server_port == 40000 && m.moved && !m.refused);
    CHECK(m.data && m.len == 9 && m.data[5] == (26000 & 0xff) && m.data[6] == (26000 >> 8));
    /* Once per connect: a second accept is relayed as it came. */
    step(nq, &rs, SG_DIR_S2C, acc, na, &m);
    CHECK(m.server_port == 0 && !m.data && !m.refused);
    /* Connecting again goes back to the control port first. */
    step(nq, &rs, SG_DIR_C2S, conn, nc, &m);
    CHECK(m.server_port == 27500);

    /* No connect request: not an answer. */
    memset(&rs, 0, sizeof(rs));
    step(nq, &rs, SG_DIR_S2C, acc, na, &m);
    CHECK(m.server_port == 0 && !m.data);

    /* The client sent an accept of its own (before or after its connect):
     * what comes back may be its echo. */
    for (int order = 0; order < 2; order++) {
        memset(&rs, 0, sizeof(rs));
        step(nq, &rs, SG_DIR_C2S, order ? acc : conn, order ? na : nc, &m);
        step(nq, &rs, SG_DIR_C2S, order ? conn : acc, order ? nc : na, &m);
        step(nq, &rs, SG_DIR_S2C, acc, na, &m);
        CHECK(m.server_port == 0 && !m.data && m.refused && m.refused_port == 40000);
    }

    /* Outside nq_accept_ports. */
    memset(&rs, 0, sizeof(rs));
    na = accept_of(acc, 22);
    step(nq, &rs, SG_DIR_C2S, conn, nc, &m);
    step(nq, &rs, SG_DIR_S2C, acc, na, &m);
    CHECK(m.server_port == 0 && !m.data && m.refused && m.refused_port == 22);

    /* Naming the port it came from: rewritten, nothing moves. */
    memset(&rs, 0, sizeof(rs));
    na = accept_of(acc, 27500);
    step(nq, &rs, SG_DIR_C2S, conn, nc, &m);
    step(nq, &rs, SG_DIR_S2C, acc, na, &m);
    CHECK(m.server_port == 0 && m.data && !m.moved && !m.refused);
}

/* The proxy's own_port: port 26000 of the server's host is slipgate's (a listener). */
static bool own_26000(const void *opaque, int port)
{
    (void)opaque;
    return port == 26000;
}

static void test_nq_accept_self(void)
{
    const struct sg_codec *nq = sg_codec_find("nq");
    struct sg_relay_ctx own = ctx;
    union sg_relay_state rs;
    struct sg_relay_move m;
    uint8_t conn[16], acc[16];
    size_t nc = control(conn, "\x01QUAKE\0\x03", 8), na = accept_of(acc, 26000);

    CHECK(nq && nq->handshake);
    if (!nq || !nq->handshake)
        return;
    own.own_port = own_26000;
    /* An accept naming one of slipgate's own sockets (inside nq_accept_ports):
     * refused, relayed as it came, nothing moves. */
    memset(&rs, 0, sizeof(rs));
    CHECK(nq->handshake(&rs, &own, SG_DIR_C2S, conn, nc, &m) == 0);
    CHECK(nq->handshake(&rs, &own, SG_DIR_S2C, acc, na, &m) == 0);
    CHECK(m.server_port == 0 && !m.data && !m.moved && m.refused && m.refused_port == 26000);
    CHECK(m.refused && strstr(m.refused, "slipgate's own") != NULL);
    /* Another port still moves the session. */
    na = accept_of(acc, 40000);
    CHECK(nq->handshake(&rs, &own, SG_DIR_C2S, conn, nc, &m) == 0);
    CHECK(nq->handshake(&rs, &own, SG_DIR_S2C, acc, na, &m) == 0);
    CHECK(m.server_port == 40000 && m.moved && !m.refused);
}

/* A QW / Q2 in-game header: seq, ack, then `qbytes` of qport. */
static size_t idnet(uint8_t *d, int qport, int qbytes)
{
    memset(d, 0, 16);
    d[0] = 7;
    d[4] = 6;
    d[8] = (uint8_t)qport;
    if (qbytes == 2)
        d[9] = (uint8_t)(qport >> 8);
    d[8 + qbytes] = 2; /* clc_move */
    return 8 + (size_t)qbytes + 5;
}

static void test_qport(void)
{
    const struct sg_codec *q3 = sg_codec_find("q3"), *qw = sg_codec_find("qw"),
                          *q2 = sg_codec_find("q2");
    static const char q2c35[] = "\xff\xff\xff\xff"
                                "connect 35 17 99 \"\\name\\x\"\n";
    static const char q2c36z[] = "\xff\xff\xff\xff"
                                 "connect 36 256 99 \"\\name\\x\"\n";
    static const char qwc[] = "\xff\xff\xff\xff"
                              "connect 28 4242 1 \"\\name\\x\"\n";
    union sg_relay_state rs;
    uint8_t d[32] = {1, 0, 0, 0, 0x39, 0x30, 9, 9};
    size_t n;

    CHECK(q3 && qw && q2 && q3->client_qport && qw->client_qport && q2->client_qport);
    if (!q3 || !qw || !q2 || !q3->client_qport || !qw->client_qport || !q2->client_qport)
        return;
    memset(&rs, 0, sizeof(rs));

    /* Quake 3: bytes 4-5; none in OOB packets or short ones. */
    CHECK_EQ(q3->client_qport(&rs, d, 8, false), 12345);
    CHECK_EQ(q3->client_qport(&rs, d, 5, false), -1);
    CHECK_EQ(q3->client_qport(&rs, (const uint8_t *)"\xff\xff\xff\xffgetinfo", 11, false), -1);

    /* QuakeWorld: bytes 8-9; its connect is its own. */
    n = idnet(d, 4242, 2);
    CHECK_EQ(qw->client_qport(&rs, d, n, false), 4242);
    CHECK(qw->is_connect((const uint8_t *)qwc, sizeof(qwc) - 1));
    CHECK(!q2->is_connect((const uint8_t *)qwc, sizeof(qwc) - 1));
    CHECK(sg_codec_probe((const uint8_t *)qwc, sizeof(qwc) - 1) == qw);

    /* Quake 2 34 (and before any connect): 16 bits at 8. */
    memset(&rs, 0, sizeof(rs));
    n = idnet(d, 1000, 2);
    CHECK_EQ(q2->client_qport(&rs, d, n, true), 1000);
    /* 35: one byte, learnt from the connect; without `learn` nothing is learnt. */
    CHECK_EQ(q2->client_qport(&rs, (const uint8_t *)q2c35, sizeof(q2c35) - 1, false), -1);
    n = idnet(d, 17, 1);
    CHECK(q2->client_qport(&rs, d, n, false) != 17);
    CHECK_EQ(q2->client_qport(&rs, (const uint8_t *)q2c35, sizeof(q2c35) - 1, true), -1);
    CHECK_EQ(q2->client_qport(&rs, d, n, true), 17);
    CHECK(sg_codec_probe((const uint8_t *)q2c35, sizeof(q2c35) - 1) == q2);
    /* 36 with a qport whose low byte is 0: no qport at all. */
    memset(&rs, 0, sizeof(rs));
    CHECK_EQ(q2->client_qport(&rs, (const uint8_t *)q2c36z, sizeof(q2c36z) - 1, true), -1);
    n = idnet(d, 0, 0);
    CHECK_EQ(q2->client_qport(&rs, d, n, true), -1);
    /* Not a Quake 2 connect: protocol out of range, garbage. */
    CHECK(!q2->is_connect((const uint8_t *)"\xff\xff\xff\xff"
                                           "connect 33 1 2 x",
                          20));
    CHECK(!q2->is_connect((const uint8_t *)"\xff\xff\xff\xff"
                                           "connect 35 ",
                          15));
}

/* A datagram with sequence `seq` (bytes 0-3) and the qport of idnet(). */
static size_t seq_of(uint8_t *d, uint32_t seq, int qport, int qbytes)
{
    size_t n = idnet(d, qport, qbytes);

    d[0] = (uint8_t)seq;
    d[1] = (uint8_t)(seq >> 8);
    d[2] = (uint8_t)(seq >> 16);
    d[3] = (uint8_t)(seq >> 24);
    return n;
}

/*
 * client_follows (NAT rebinding): only a sequence newer than the client's
 * last one and at most 500 ahead moves a session; flag bits do not count;
 * a connect restarts the sequence; nothing before a sequence was seen.
 */
static void test_follows(void)
{
    static const char qwc[] = "\xff\xff\xff\xff"
                              "connect 28 4242 1 \"\\name\\x\"\n";
    static const char q2c36[] = "\xff\xff\xff\xff"
                                "connect 36 200 99 \"\\name\\x\"\n";
    const struct sg_codec *games[] = {sg_codec_find("qw"), sg_codec_find("q2")};
    const char *connects[] = {qwc, q2c36};
    union sg_relay_state rs;
    uint8_t d[32];
    char why[160];
    size_t n;

    for (int g = 0; g < 2; g++) {
        const struct sg_codec *c = games[g];
        int qbytes = g == 0 ? 2 : 1, qport = g == 0 ? 4242 : 200;

        CHECK(c && c->client_follows);
        if (!c || !c->client_follows)
            return;
        memset(&rs, 0, sizeof(rs));
        n = seq_of(d, 1000, qport, qbytes);
        CHECK(!c->client_follows(&rs, NULL, d, n, why, sizeof(why)));
        CHECK(strstr(why, "no client sequence") != NULL);
        CHECK_EQ(c->client_qport(&rs, (const uint8_t *)connects[g], strlen(connects[g]), true), -1);
        CHECK_EQ(c->client_qport(&rs, d, n, true), qport);
        /* Newer by 1 and by 500 (with the reliable bit): yes. */
        n = seq_of(d, 1001, qport, qbytes);
        CHECK(c->client_follows(&rs, NULL, d, n, why, sizeof(why)));
        n = seq_of(d, 0x80000000u | 1500, qport, qbytes);
        CHECK(c->client_follows(&rs, NULL, d, n, why, sizeof(why)));
        /* The same, older, 501 ahead, far behind (wrapped): no. */
        n = seq_of(d, 1000, qport, qbytes);
        CHECK(!c->client_follows(&rs, NULL, d, n, why, sizeof(why)));
        CHECK(strstr(why, "not newer") != NULL);
        n = seq_of(d, 999, qport, qbytes);
        CHECK(!c->client_follows(&rs, NULL, d, n, why, sizeof(why)));
        n = seq_of(d, 1501, qport, qbytes);
        CHECK(!c->client_follows(&rs, NULL, d, n, why, sizeof(why)));
        CHECK(strstr(why, "ahead") != NULL);
        n = seq_of(d, 0x30000000u, qport, qbytes);
        CHECK(!c->client_follows(&rs, NULL, d, n, why, sizeof(why)));
        /* Reading does not learn; an older datagram of its own does not go back. */
        n = seq_of(d, 1200, qport, qbytes);
        CHECK_EQ(c->client_qport(&rs, d, n, false), qport);
        n = seq_of(d, 1701, qport, qbytes);
        CHECK(!c->client_follows(&rs, NULL, d, n, why, sizeof(why)));
        n = seq_of(d, 1200, qport, qbytes);
        CHECK_EQ(c->client_qport(&rs, d, n, true), qport);
        n = seq_of(d, 1100, qport, qbytes);
        CHECK_EQ(c->client_qport(&rs, d, n, true), qport);
        n = seq_of(d, 1700, qport, qbytes);
        CHECK(c->client_follows(&rs, NULL, d, n, why, sizeof(why)));
        /* A reconnect: the sequence restarts. */
        CHECK_EQ(c->client_qport(&rs, (const uint8_t *)connects[g], strlen(connects[g]), true), -1);
        n = seq_of(d, 1, qport, qbytes);
        CHECK(!c->client_follows(&rs, NULL, d, n, why, sizeof(why)));
        CHECK_EQ(c->client_qport(&rs, d, n, true), qport);
        n = seq_of(d, 2, qport, qbytes);
        CHECK(c->client_follows(&rs, NULL, d, n, why, sizeof(why)));
        /* Connectionless packets never move a session. */
        CHECK(!c->client_follows(&rs, NULL, (const uint8_t *)connects[g], strlen(connects[g]), why,
                                 sizeof(why)));
    }
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"nq_handshake", test_nq_handshake},
        {"nq_accept_self", test_nq_accept_self},
        {"qport", test_qport},
        {"follows", test_follows},
    };
    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
