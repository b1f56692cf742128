/*
 * proxy/ban.c: the rule parser, the ban file reader and the CIDR matcher;
 * and proxy/addr.c's source key, the other prefix the proxy cuts addresses to.
 */
#include "proxy/addr.h"
#include "proxy/ban.h"

#include "protocols/codec.h"
#include "protocols/error.h"
#include "tests/unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <unistd.h>

static struct sockaddr_storage v4(const char *a)
{
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *s = (struct sockaddr_in *)&ss;

    s->sin_family = AF_INET;
    s->sin_port = htons(27960);
    CHECK(inet_pton(AF_INET, a, &s->sin_addr) == 1);
    return ss;
}

static struct sockaddr_storage v6(const char *a)
{
    struct sockaddr_storage ss = {0};
    struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;

    s->sin6_family = AF_INET6;
    s->sin6_port = htons(27960);
    CHECK(inet_pton(AF_INET6, a, &s->sin6_addr) == 1);
    return ss;
}

static struct sg_ban_list *list_of(const char *const *rules)
{
    struct sg_ban_list *l = sg_ban_list_create();
    struct sg_ban_rule r;
    char why[200];

    for (int i = 0; rules[i]; i++) {
        CHECKF(sg_ban_rule_parse(rules[i], true, &r, why, sizeof(why)) == 0, "%s: %s", rules[i],
               why);
        CHECK(sg_ban_list_add(l, &r) == 0);
    }
    return l;
}

#define MATCHES(l, ss, now) (sg_ban_list_match((l), (const struct sockaddr *)&(ss), (now)) != NULL)

/* Addresses and ranges of both families; IPv4-mapped clients match IPv4 rules. */
static void case_cidr(void)
{
    static const char *const rules[] = {"203.0.113.0/24", "198.51.100.7", "2001:db8::/32",
                                        "10.1.2.3/8", NULL};
    struct sg_ban_list *l = list_of(rules);
    struct sockaddr_storage a;
    char buf[80];

    a = v4("203.0.113.200");
    CHECK(MATCHES(l, a, 0));
    a = v4("203.0.114.1");
    CHECK(!MATCHES(l, a, 0));
    a = v4("198.51.100.7");
    CHECK(MATCHES(l, a, 0));
    a = v4("198.51.100.8");
    CHECK(!MATCHES(l, a, 0));
    a = v4("10.200.0.1"); /* 10.1.2.3/8 is 10.0.0.0/8 */
    CHECK(MATCHES(l, a, 0));
    a = v6("::ffff:203.0.113.9");
    CHECK(MATCHES(l, a, 0));
    a = v6("::ffff:203.0.112.9");
    CHECK(!MATCHES(l, a, 0));
    a = v6("2001:db8:ffff::1");
    CHECK(MATCHES(l, a, 0));
    a = v6("2001:db9::1");
    CHECK(!MATCHES(l, a, 0));
    a = v6("::1");
    CHECK(!MATCHES(l, a, 0));
    sg_ban_rule_format(&l->rules[0], buf, sizeof(buf));
    CHECK(strcmp(buf, "203.0.113.0/24") == 0);
    sg_ban_rule_format(&l->rules[1], buf, sizeof(buf));
    CHECK(strcmp(buf, "198.51.100.7") == 0);
    sg_ban_rule_format(&l->rules[2], buf, sizeof(buf));
    CHECK(strcmp(buf, "2001:db8::/32") == 0);
    sg_ban_rule_format(&l->rules[3], buf, sizeof(buf));
    CHECK(strcmp(buf, "10.0.0.0/8") == 0);
    sg_ban_list_unref(l);

    /* Prefix boundaries: /0 covers all, odd prefix lengths. */
    static const char *const edge[] = {"192.168.0.0/17", NULL};
    l = list_of(edge);
    a = v4("192.168.127.255");
    CHECK(MATCHES(l, a, 0));
    a = v4("192.168.128.0");
    CHECK(!MATCHES(l, a, 0));
    sg_ban_list_unref(l);
    static const char *const all[] = {"::/0", NULL};
    l = list_of(all);
    a = v4("1.2.3.4");
    CHECK(MATCHES(l, a, 0));
    sg_ban_list_unref(l);
}

/* `until` and the reason; expiry is read at match time. */
static void case_until(void)
{
    struct sg_ban_rule r;
    struct sockaddr_storage a = v4("203.0.113.5");
    struct sg_ban_list *l = sg_ban_list_create();
    char why[200];

    CHECK(sg_ban_rule_parse("203.0.113.0/24 until 2026-12-31T00:00Z cheating  ", true, &r, why,
                            sizeof(why)) == 0);
    CHECK_EQ(r.until_ms, 1798675200000LL);
    CHECK(strcmp(r.reason, "cheating") == 0);
    CHECK(sg_ban_rule_parse("203.0.113.0/24 until 2026-12-31", true, &r, why, sizeof(why)) == 0);
    CHECK_EQ(r.until_ms, 1798675200000LL);
    CHECK(sg_ban_rule_parse("203.0.113.0/24 until 2026-12-31T00:00:30Z aim bot", true, &r, why,
                            sizeof(why)) == 0);
    CHECK_EQ(r.until_ms, 1798675230000LL);
    CHECK(strcmp(r.reason, "aim bot") == 0);
    CHECK(sg_ban_list_add(l, &r) == 0);
    CHECK(MATCHES(l, a, 1798675229999LL));
    CHECK(!MATCHES(l, a, 1798675230000LL));
    sg_ban_list_unref(l);
    CHECK(sg_ban_rule_parse("203.0.113.1 reason only", true, &r, why, sizeof(why)) == 0);
    CHECK(r.until_ms == 0 && strcmp(r.reason, "reason only") == 0);
}

/* What is refused, and why. */
static void case_bad(void)
{
    static const struct {
        const char *text, *why;
        bool extra;
    } bad[] = {
        {"", "no address", true},
        {"203.0.113.300", "is not an IPv4 or IPv6 address", true},
        {"203.0.113.0/33", "an IPv4 prefix is 0 to 32 bits", true},
        {"2001:db8::/129", "an IPv6 prefix is 0 to 128 bits", true},
        {"203.0.113.0/", "prefix length after '/' is not a number", true},
        {"203.0.113.0/-1", "prefix length after '/' is not a number", true},
        {"203.0.113.0/2x", "prefix length after '/' is not a number", true},
        {"host.example", "is not an IPv4 or IPv6 address", true},
        {"1.2.3.4 until", "ISO 8601", true},
        {"1.2.3.4 until 2026-13-01", "ISO 8601", true},
        {"1.2.3.4 until 2026-02-30", "ISO 8601", true},
        {"1.2.3.4 until 2026-12-31T25:00Z", "ISO 8601", true},
        {"1.2.3.4 until 2026-12-31T10:00", "ISO 8601", true},
        {"1.2.3.4 until 2026-12-31T10:00+01", "ISO 8601", true},
        {"1.2.3.4 until 1969-12-31", "ISO 8601", true},
        {"1.2.3.4 \x01 bell", "printable ASCII only", true},
        {"1.2.3.4 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
         "at most 63", true},
        {"1.2.3.4 reason", "one ADDR[/BITS] per entry", false},
    };
    struct sg_ban_rule r;
    char why[200];

    for (size_t i = 0; i < UNIT_COUNT(bad); i++) {
        why[0] = '\0';
        CHECKF(sg_ban_rule_parse(bad[i].text, bad[i].extra, &r, why, sizeof(why)) == -EINVAL,
               "accepted '%s'", bad[i].text);
        CHECKF(strstr(why, bad[i].why) != NULL, "'%s': why '%s', expected '%s'", bad[i].text,
               why, bad[i].why);
    }
}

/* A ban file: comments, blanks, a trailing comment; every bad line named by line. */
static void case_file(void)
{
    char path[] = "/tmp/slipgate-ban-test-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    struct sg_ban_list *l = sg_ban_list_create();
    struct sg_conf_diag diag;
    struct sockaddr_storage a;

    CHECK(f != NULL);
    if (!f)
        return;
    fputs("# bans\n"
          "\n"
          "203.0.113.0/24 until 2099-01-01 cheating # since the cup\n"
          "   2001:db8::1\t# one host\n"
          "198.51.100.0/40\n"
          "198.51.100.1 until soon\n"
          "192.0.2.1#no comment without a blank\n",
          f);
    fclose(f);
    sg_conf_diag_init(&diag);
    CHECK(sg_ban_file_load(l, path, &diag) == SG_E_CONFIG);
    CHECK_EQ(diag.count, 3);
    CHECKF(strstr(diag.msgs[0], ":5:1: error: '198.51.100.0/40': an IPv4 prefix") != NULL, "%s",
           diag.msgs[0]);
    CHECKF(strstr(diag.msgs[1], ":6:1: error: 'until soon'") != NULL, "%s", diag.msgs[1]);
    CHECKF(strstr(diag.msgs[2], ":7:1: error: '192.0.2.1#no'") != NULL, "%s", diag.msgs[2]);
    CHECK(strncmp(diag.msgs[0], path, strlen(path)) == 0);
    CHECK_EQ(l->count, 2);
    CHECK(l->count == 2 && strcmp(l->rules[0].reason, "cheating") == 0);
    CHECK(l->count == 2 && l->rules[0].line == 3 && l->rules[1].line == 4);
    CHECK(l->count == 2 && strcmp(l->rules[1].file, path) == 0);
    a = v6("2001:db8::1");
    CHECK(MATCHES(l, a, 0));
    a = v4("203.0.113.1");
    CHECK(MATCHES(l, a, 0));
    unlink(path);

    /* A missing file is one diagnostic with the path. */
    sg_conf_diag_init(&diag);
    CHECK(sg_ban_file_load(l, path, &diag) == -ENOENT);
    CHECK(diag.count == 1 && strstr(diag.msgs[0], "cannot open ban file") != NULL);
    sg_ban_list_unref(l);
}

/* Lists compare by rules; references. */
static void case_list(void)
{
    static const char *const a[] = {"1.2.3.4", "::1 until 2099-01-01 x", NULL};
    static const char *const b[] = {"1.2.3.4", "::1 until 2099-01-01 y", NULL};
    struct sg_ban_list *la = list_of(a), *lb = list_of(b), *la2 = list_of(a);

    CHECK(sg_ban_list_equal(la, la2));
    CHECK(!sg_ban_list_equal(la, lb));
    CHECK(!sg_ban_list_equal(la, NULL));
    struct sg_ban_list *empty = sg_ban_list_create();
    CHECK(sg_ban_list_equal(NULL, empty));
    sg_ban_list_unref(empty);
    CHECK(sg_ban_list_ref(la) == la);
    sg_ban_list_unref(la);
    sg_ban_list_unref(la);
    sg_ban_list_unref(lb);
    sg_ban_list_unref(la2);
    sg_ban_list_unref(NULL);
}

/* The games' answers to a banned client, never longer than the request, and their rcon words. */
static void case_games(void)
{
    static const uint8_t q3c[] = "\xff\xff\xff\xff"
                                 "connect \x01\x02xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
    static const uint8_t q2c[] = "\xff\xff\xff\xff"
                                 "connect 34 12345 678 \"\\name\\player\\rate\\25000\\msg\\1\\hand\\2\\skin\\male/grunt\\fov\\90\"\n";
    static const uint8_t qwp[] = "\xff\xff\xff\xffgetchallenge\n";
    /* NetQuake CCREQ_CONNECT: 12 bytes, "QUAKE", version 3. */
    static const uint8_t nqc[] = {0x80, 0x00, 0x00, 0x0c, 0x01, 'Q', 'U', 'A', 'K', 'E', 0, 3};
    static const uint8_t nqr[] = {0x80, 0x00, 0x00, 0x06, 0x05, 0};
    const struct sg_codec *q3 = sg_codec_find("q3"), *qw = sg_codec_find("qw"),
                          *q2 = sg_codec_find("q2"), *nq = sg_codec_find("nq");
    uint8_t out[128];
    size_t n;

    CHECK(q3 && qw && q2 && nq);
    if (!q3 || !qw || !q2 || !nq)
        return;
    n = q3->banned_reply(q3c, sizeof(q3c) - 1, out, sizeof(q3c) - 1);
    CHECK(n == 43 && memcmp(out, "\xff\xff\xff\xffprint\nYou are banned from this server.\n", n) == 0);
    CHECK(q3->banned_reply(q3c, sizeof(q3c) - 1, out, 42) == 0); /* never longer than the request */
    CHECK(q3->banned_reply(qwp, sizeof(qwp) - 1, out, sizeof(out)) == 0); /* not a connect */
    n = qw->banned_reply(qwp, sizeof(qwp) - 1, out, sizeof(qwp) - 1);
    CHECK(n == 14 && memcmp(out, "\xff\xff\xff\xffn\nbanned.\n", n) == 0);
    n = q2->banned_reply(q2c, sizeof(q2c) - 1, out, sizeof(q2c) - 1);
    CHECK(n > 10 && memcmp(out + 4, "print\nYour IP address is banned", 31) == 0);
    n = nq->banned_reply(nqc, sizeof(nqc), out, sizeof(nqc));
    CHECK(n == 12 && out[0] == 0x80 && out[3] == 12 && out[4] == 0x82 &&
          memcmp(out + 5, "Banned", 7) == 0);
    n = nq->banned_reply(nqc, sizeof(nqc), out, sizeof(out));
    CHECK(n == 28 && out[3] == 28 && memcmp(out + 5, "You have been banned.\n", 23) == 0);

    CHECK(q3->is_admin((const uint8_t *)"\xff\xff\xff\xffRCON pw status", 18));
    CHECK(!q3->is_admin((const uint8_t *)"\xff\xff\xff\xffrconx", 9));
    CHECK(qw->is_admin((const uint8_t *)"\xff\xff\xff\xffrcon pw status\n", 19));
    CHECK(!qw->is_admin((const uint8_t *)"\xff\xff\xff\xffstatus\n", 11));
    CHECK(q2->is_admin((const uint8_t *)"\xff\xff\xff\xffrcon pw status", 18));
    CHECK(nq->is_admin(nqr, sizeof(nqr)));
    CHECK(nq->is_admin((const uint8_t *)"\xff\xff\xff\xffsrcon HMAC-MD4 TIME x", 29));
    CHECK(!nq->is_admin(nqc, sizeof(nqc)));
}

/* The games' "server is full" answers (a new client while draining): only to a handshake. */
static void case_full(void)
{
    static const uint8_t q3g[] = "\xff\xff\xff\xffgetchallenge 12345678 Quake3Arena";
    static const uint8_t q3c[] = "\xff\xff\xff\xff"
                                 "connect \x01\x02xxxxxxxxxxxxxxxxxxxx";
    static const uint8_t qwc[] = "\xff\xff\xff\xff"
                                 "connect 28 1234 5678 \"\\name\\player\"\n";
    static const uint8_t q2c[] = "\xff\xff\xff\xff"
                                 "connect 34 12345 678 \"\\name\\player\"\n";
    static const uint8_t st[] = "\xff\xff\xff\xffgetstatus xxxxxxxxxxxxxxxxxxxxxxx";
    static const uint8_t nqc[] = {0x80, 0x00, 0x00, 0x0c, 0x01, 'Q', 'U', 'A', 'K', 'E', 0, 3};
    static const char q3full[] = "\xff\xff\xff\xffprint\nServer is full.\n";
    const struct sg_codec *q3 = sg_codec_find("q3"), *qw = sg_codec_find("qw"),
                          *q2 = sg_codec_find("q2"), *nq = sg_codec_find("nq");
    uint8_t out[128], big[64];
    size_t n;

    CHECK(q3 && qw && q2 && nq && q3->full_reply && qw->full_reply && q2->full_reply &&
          nq->full_reply);
    if (!q3 || !qw || !q2 || !nq || !q3->full_reply || !qw->full_reply || !q2->full_reply ||
        !nq->full_reply)
        return;
    n = q3->full_reply(q3g, sizeof(q3g) - 1, out, sizeof(q3g) - 1);
    CHECK(n == sizeof(q3full) - 1 && memcmp(out, q3full, n) == 0);
    n = q3->full_reply(q3c, sizeof(q3c) - 1, out, sizeof(q3c) - 1);
    CHECK(n == sizeof(q3full) - 1 && memcmp(out, q3full, n) == 0);
    CHECK(q3->full_reply(q3c, sizeof(q3c) - 1, out, n - 1) == 0);     /* never longer than cap */
    CHECK(q3->full_reply(st, sizeof(st) - 1, out, sizeof(out)) == 0); /* a query: no */
    n = qw->full_reply(qwc, sizeof(qwc) - 1, out, sizeof(qwc) - 1);
    CHECK(n == 22 && memcmp(out, "\xff\xff\xff\xffn\nserver is full\n\n", n) == 0);
    CHECK(qw->full_reply(st, sizeof(st) - 1, out, sizeof(out)) == 0);
    n = q2->full_reply(q2c, sizeof(q2c) - 1, out, sizeof(q2c) - 1);
    CHECK(n == sizeof(q3full) - 1 && memcmp(out, q3full, n) == 0);
    /* NetQuake: CCREP_REJECT "Server is full.\n" (22 bytes) is longer than a
     * 12-byte CCREQ_CONNECT, so a plain connect gets the short "Full.\n";
     * a longer one (a ProQuake connect) the whole text. */
    n = nq->full_reply(nqc, sizeof(nqc), out, sizeof(nqc));
    CHECK(n == 12 && memcmp(out, "\x80\x00\x00\x0c\x82" "Full.\n", 12) == 0);
    CHECK(nq->full_reply(nqc, sizeof(nqc), out, sizeof(nqc) - 1) == 0);
    memset(big, 0, sizeof(big));
    memcpy(big, nqc, sizeof(nqc));
    big[3] = sizeof(big);
    n = nq->full_reply(big, sizeof(big), out, sizeof(big));
    CHECK(n == 22 && out[3] == 22 && out[4] == 0x82 &&
          memcmp(out + 5, "Server is full.\n", 17) == 0);
}

/* Every game's status query and master messages in whichever form it gives
 * them (fixed text or a function): each one whole, and the fixed ones as
 * the game's servers send them. */
static void case_status_master(void)
{
    static const struct {
        const char *game, *query, *reply, *heartbeat, *shutdown;
    } want[] = {
        {"q3", "\xff\xff\xff\xffgetstatus\n", "\xff\xff\xff\xffstatusResponse\n\\x\\y\n",
         "\xff\xff\xff\xffheartbeat QuakeArena-1\n", "\xff\xff\xff\xffheartbeat QuakeArena-1\n"},
        {"qw", "\xff\xff\xff\xffstatus\n", "\xff\xff\xff\xffn\\x\\y\n", NULL, "C\n"},
        {"q2", "\xff\xff\xff\xffstatus\n", "\xff\xff\xff\xffprint\n\\x\\y\n", NULL,
         "\xff\xff\xff\xffshutdown"},
        {"nq", NULL, NULL, "\xff\xff\xff\xffheartbeat DarkPlaces\n", ""},
    };
    uint8_t out[256];
    int n;

    for (int i = 0; sg_codecs[i]; i++) {
        const struct sg_codec_status *st = sg_codecs[i]->status;
        const struct sg_codec_master *m = sg_codecs[i]->master;
        if (st) {
            CHECKF((st->query != NULL) != (st->query_text != NULL), "%s: one query form",
                   sg_codecs[i]->name);
            CHECKF((st->is_reply != NULL) != (st->reply_text != NULL), "%s: one reply form",
                   sg_codecs[i]->name);
        }
        if (m)
            CHECKF((m->heartbeat != NULL) != (m->heartbeat_text != NULL),
                   "%s: one heartbeat form", sg_codecs[i]->name);
    }
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const struct sg_codec *c = sg_codec_find(want[i].game);
        CHECK(c && c->status && c->master);
        if (!c || !c->status || !c->master)
            continue;
        if (want[i].query) {
            size_t q = strlen(want[i].query), r = strlen(want[i].reply);
            n = sg_codec_status_query(c->status, out, sizeof(out));
            CHECKF(n == (int)q && memcmp(out, want[i].query, q) == 0, "%s: query", c->name);
            CHECKF(sg_codec_status_query(c->status, out, q - 1) == -ENOSPC, "%s: query room",
                   c->name);
            CHECKF(sg_codec_status_is_reply(c->status, (const uint8_t *)want[i].reply, r),
                   "%s: reply", c->name);
            CHECKF(!sg_codec_status_is_reply(c->status, (const uint8_t *)want[i].query, 5),
                   "%s: a query is no reply", c->name);
        }
        if (want[i].heartbeat) {
            size_t h = strlen(want[i].heartbeat);
            n = sg_codec_heartbeat(c->master, out, sizeof(out), NULL, 0, 1);
            CHECKF(n == (int)h && memcmp(out, want[i].heartbeat, h) == 0, "%s: heartbeat",
                   c->name);
        }
        n = sg_codec_master_shutdown(c->master, out, sizeof(out));
        CHECKF(n == (int)strlen(want[i].shutdown) && memcmp(out, want[i].shutdown, (size_t)n) == 0,
               "%s: shutdown (%d bytes)", c->name, n);
    }
}

/* The per-source limits' key: IPv4 (and IPv4-mapped) whole, IPv6 cut to its prefix. */
static void case_source_key(void)
{
    static const struct {
        const char *a, *b;
        int prefix;
        bool same;
    } t[] = {
        {"2001:db8:1:2::1", "2001:db8:1:2:ffff:eeee:dddd:cccc", 64, true},
        {"2001:db8:1:2::1", "2001:db8:1:3::1", 64, false},
        {"2001:db8:1:2::1", "2001:db8:1:3::1", 56, true},
        {"2001:db8:1:2::1", "2001:db8:1:102::1", 56, false},
        {"2001:db8:1:2::1", "2001:db8:1:f::1", 60, true}, /* a nibble: byte 7 cut in half */
        {"2001:db8:1:2::1", "2001:db8:1:12::1", 60, false},
        {"2001:db8:1:2::1", "2001:db8:1:2::2", 128, false},
        {"2001:db8:1:2::1", "2001:db8:1:2::1", 128, true},
        {"::ffff:10.0.0.1", "::ffff:10.0.0.2", 64, false}, /* IPv4-mapped: one address */
    };
    unsigned char ka[16], kb[16];

    for (size_t i = 0; i < UNIT_COUNT(t); i++) {
        struct sockaddr_storage a = v6(t[i].a), b = v6(t[i].b);
        size_t na = sg_addr_source_key((struct sockaddr *)&a, t[i].prefix, ka);
        size_t nb = sg_addr_source_key((struct sockaddr *)&b, t[i].prefix, kb);
        bool same = na == nb && memcmp(ka, kb, na) == 0;
        CHECKF(same == t[i].same, "%s ~ %s /%d: %s", t[i].a, t[i].b, t[i].prefix,
               same ? "one source" : "two sources");
    }
    /* The key is the prefix itself, the rest zero; IPv4 is its 4 bytes. */
    struct sockaddr_storage a = v6("2001:db8:1:2:3:4:5:6"), b = v4("10.1.2.3");
    static const unsigned char want[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2};
    CHECK(sg_addr_source_key((struct sockaddr *)&a, 64, ka) == 16);
    CHECK(memcmp(ka, want, 16) == 0);
    CHECK(sg_addr_source_key((struct sockaddr *)&b, 64, kb) == 4);
    CHECK(kb[0] == 10 && kb[1] == 1 && kb[2] == 2 && kb[3] == 3);
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"cidr", case_cidr}, {"until", case_until}, {"bad", case_bad},   {"file", case_file},
        {"list", case_list}, {"games", case_games}, {"full", case_full},
        {"status_master", case_status_master}, {"source_key", case_source_key},
    };
    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
