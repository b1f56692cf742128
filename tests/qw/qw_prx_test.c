/*
 * QuakeWorld proxy chains (protocols/qw/prx.c): the connect reader, the
 * userinfo rewrite, the connect writer, and the small datagrams a node
 * sends and reads (challenge, print, pingstatus, ping).
 */
#include "tests/unit.h"

#include "protocols/codec.h"
#include "protocols/error.h"

#include <errno.h>

extern const struct sg_codec_route_by sg_qw_route_by;
#define RB (&sg_qw_route_by)

static int parse(const char *text, struct sg_route_by_req *req)
{
    return RB->connect_parse((const uint8_t *)text, strlen(text), req);
}

static void case_parse(void)
{
    struct sg_route_by_req req;

    /* ezQuake's two-proxy chain: the first entry is the next hop. */
    CHECK_EQ(parse("\xff\xff\xff\xff"
                   "connect 28 4321 -77 \"\\name\\p\\prx\\10.0.0.2:30000@"
                   "10.0.0.1:27500\\team\\red\"\n",
                   &req),
             0);
    CHECK_EQ(req.protocol, 28);
    CHECK_EQ(req.qport, 4321);
    CHECK_EQ(req.challenge, -77);
    CHECK_EQ(req.hops, 2);
    CHECK(strcmp(req.next, "10.0.0.2:30000") == 0);
    CHECK_EQ(req.tail_len, 1);
    /* One hop, no port; IPv6 in brackets; no chain at all. */
    CHECK_EQ(parse("\xff\xff\xff\xff"
                   "connect 28 1 2 \"\\prx\\10.0.0.1\"",
                   &req),
             0);
    CHECK_EQ(req.hops, 1);
    CHECK(strcmp(req.next, "10.0.0.1") == 0);
    CHECK_EQ(parse("\xff\xff\xff\xff"
                   "connect 28 1 2 \"\\prx\\[::1]:5@1.2.3.4\"",
                   &req),
             0);
    CHECK(strcmp(req.next, "[::1]:5") == 0);
    CHECK_EQ(req.hops, 2);
    CHECK_EQ(parse("\xff\xff\xff\xff"
                   "connect 28 1 2 \"\\name\\p\"",
                   &req),
             0);
    CHECK_EQ(req.hops, 0);
    CHECK(req.next[0] == 0);
    /* Malformed: empty hops, no quotes, no numbers, control bytes. */
    CHECK_EQ(parse("\xff\xff\xff\xff"
                   "connect 28 1 2 \"\\prx\\@1.2.3.4\"",
                   &req),
             SG_E_MALFORMED);
    CHECK_EQ(parse("\xff\xff\xff\xff"
                   "connect 28 1 2 \"\\prx\\1.2.3.4@\"",
                   &req),
             SG_E_MALFORMED);
    CHECK_EQ(parse("\xff\xff\xff\xff"
                   "connect 28 1 2 \"\\prx\\1.2.3.4@5.6.7.8@\"",
                   &req),
             SG_E_MALFORMED);
    CHECK_EQ(parse("\xff\xff\xff\xff"
                   "connect 28 1 2 \"\\prx\\1.2.3.4@@5.6.7.8\"",
                   &req),
             SG_E_MALFORMED);
    CHECK_EQ(parse("\xff\xff\xff\xff"
                   "connect 28 1 2 \\name\\p",
                   &req),
             SG_E_MALFORMED);
    CHECK_EQ(parse("\xff\xff\xff\xff"
                   "connect 28 x 2 \"\"",
                   &req),
             SG_E_MALFORMED);
    CHECK_EQ(parse("\xff\xff\xff\xff"
                   "connect 28 1 2 \"\\prx\\1.2\x01.3.4\"",
                   &req),
             SG_E_MALFORMED);
    CHECK_EQ(parse("\xff\xff\xff\xff"
                   "getchallenge\n",
                   &req),
             SG_E_MALFORMED);
    {
        /* A hop longer than its room. */
        char big[400];
        snprintf(big, sizeof(big),
                 "\xff\xff\xff\xff"
                 "connect 28 1 2 \"\\prx\\%0200d\"",
                 1);
        CHECK_EQ(parse(big, &req), SG_E_TOOBIG);
        /* A later hop too: the next node could not read it. */
        snprintf(big, sizeof(big),
                 "\xff\xff\xff\xff"
                 "connect 28 1 2 \"\\prx\\1.2.3.4@%0200d\"",
                 1);
        CHECK_EQ(parse(big, &req), SG_E_TOOBIG);
    }
}

static void case_rewrite(void)
{
    struct sg_route_by_req req;
    uint8_t out[2048];
    int n;

    CHECK_EQ(parse("\xff\xff\xff\xff"
                   "connect 28 4321 9 \"\\name\\p\\prx\\10.0.0.2:30000@"
                   "10.0.0.1:27500\\team\\red\"\n0x58455446 0x2\n",
                   &req),
             0);
    CHECK_EQ(RB->connect_rewrite(&req, "*qwfwd", "slipgate"), 0);
    CHECKF(strcmp(req.userinfo, "\\name\\p\\team\\red\\*qwfwd\\slipgate\\prx\\10.0.0.1:27500") == 0,
           "%s", req.userinfo);
    n = RB->connect_build(&req, 555, out, sizeof(out));
    CHECK(n > 0);
    CHECKF(n > 0 && memcmp(out,
                           "\xff\xff\xff\xff"
                           "connect 28 4321 555 \"\\name\\p\\team\\red\\"
                           "*qwfwd\\slipgate\\prx\\10.0.0.1:27500\"\n0x58455446 0x2\n",
                           (size_t)n) == 0,
           "%.*s", n, (const char *)out);
    /* The chain's end: the key goes. */
    CHECK_EQ(parse("\xff\xff\xff\xff"
                   "connect 28 1 2 \"\\prx\\10.0.0.1:27500\\name\\p\"",
                   &req),
             0);
    CHECK_EQ(RB->connect_rewrite(&req, "*qwfwd", "slipgate"), 0);
    CHECKF(strcmp(req.userinfo, "\\name\\p\\*qwfwd\\slipgate") == 0, "%s", req.userinfo);
    /* A chain's rest longer than an ordinary value (64) is passed on whole. */
    {
        char text[700], rest[600] = "";
        for (int i = 2; i < 12; i++)
            snprintf(rest + strlen(rest), sizeof(rest) - strlen(rest), "%s10.0.0.%d:27500",
                     i > 2 ? "@" : "", i);
        snprintf(text, sizeof(text),
                 "\xff\xff\xff\xff"
                 "connect 28 1 2 \"\\prx\\10.0.0.1@%s\"",
                 rest);
        CHECK_EQ(parse(text, &req), 0);
        CHECK_EQ(req.hops, 11);
        CHECK_EQ(RB->connect_rewrite(&req, "*qwfwd", "slipgate"), 0);
        CHECK(strstr(req.userinfo, rest) != NULL);
    }
}

static void case_small(void)
{
    uint8_t out[256];
    int32_t ch = 0;
    int n;
    struct sg_route_by_ping p[2] = {{{127, 0, 0, 1}, 27500, 12}, {{10, 1, 2, 3}, 28000, -1}};

    n = RB->challenge_reply(-5, out, sizeof(out));
    CHECK(n == 8 && memcmp(out,
                           "\xff\xff\xff\xff"
                           "c-5\0",
                           8) == 0);
    CHECK_EQ(RB->challenge_parse(out, (size_t)n, &ch), 1);
    CHECK_EQ(ch, -5);
    CHECK_EQ(RB->challenge_parse((const uint8_t *)"\xff\xff\xff\xff"
                                                  "c12x",
                                 8, &ch),
             0);
    CHECK_EQ(RB->challenge_parse((const uint8_t *)"\xff\xff\xff\xff"
                                                  "c",
                                 5, &ch),
             0);
    CHECK_EQ(RB->challenge_reply(1, out, 6), -ENOSPC);
    n = RB->print("no way", out, sizeof(out));
    CHECK(n == 13 && memcmp(out,
                            "\xff\xff\xff\xff"
                            "nno way\n\0",
                            13) == 0);
    n = RB->pingstatus_reply(p, 2, out, sizeof(out));
    CHECK_EQ(n, 21);
    CHECK(memcmp(out, "\xff\xff\xff\xffn\x7f\0\0\x01\x6c\x6b\x0c\0\x0a\x01\x02\x03\x60\x6d\xff\xff",
                 21) == 0);
    CHECK_EQ(RB->pingstatus_reply(p, 2, out, 20), -ENOSPC);
    n = RB->ping_query(out, sizeof(out));
    CHECK(n == 6 && memcmp(out, "\xff\xff\xff\xffk\n", 6) == 0);
    CHECK(RB->is_ping_reply((const uint8_t *)"l", 1));
    CHECK(!RB->is_ping_reply((const uint8_t *)"k", 1));
    CHECK_EQ(RB->classify((const uint8_t *)"\xff\xff\xff\xffpingstatus", 14),
             SG_ROUTE_BY_PINGSTATUS);
    CHECK_EQ(RB->classify((const uint8_t *)"\xff\xff\xff\xffgetchallenge\n", 17),
             SG_ROUTE_BY_GETCHALLENGE);
    /* A browser's status and a ping are the node's own to answer. */
    CHECK_EQ(RB->classify((const uint8_t *)"\xff\xff\xff\xffstatus 23\n", 14), SG_ROUTE_BY_STATUS);
    CHECK_EQ(RB->classify((const uint8_t *)"\xff\xff\xff\xffstatus", 10), SG_ROUTE_BY_STATUS);
    CHECK_EQ(RB->classify((const uint8_t *)"\xff\xff\xff\xffstatusx", 11), SG_ROUTE_BY_OTHER);
    CHECK_EQ(RB->classify((const uint8_t *)"\xff\xff\xff\xffk\n", 6), SG_ROUTE_BY_PING);
    CHECK_EQ(RB->classify((const uint8_t *)"\xff\xff\xff\xffping", 8), SG_ROUTE_BY_PING);
    CHECK_EQ(RB->classify((const uint8_t *)"\xff\xff\xff\xffkick", 8), SG_ROUTE_BY_OTHER);
    n = RB->status_reply("node\\1", out, sizeof(out));
    CHECK(n == 47 && memcmp(out,
                            "\xff\xff\xff\xff"
                            "n\\*version\\qwfwd slipgate\\hostname\\node_1\n\0",
                            47) == 0);
    CHECK_EQ(RB->status_reply("node", out, 20), -ENOSPC);
    n = RB->ping_reply(out, sizeof(out));
    CHECK(n == 1 && out[0] == 'l');
    CHECK_EQ(RB->classify((const uint8_t *)"\x01\0\0\0connect ", 12), SG_ROUTE_BY_OTHER);
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"parse", case_parse}, {"rewrite", case_rewrite}, {"small", case_small}};
    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
