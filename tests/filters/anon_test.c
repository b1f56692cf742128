/*
 * Client pseudonyms (filters/anon.c): the key file (made on first use,
 * 0600, refused when others may read it or when it is not a key), and the
 * keyed hashes: stable for one key, unrelated for another, distinct for
 * distinct addresses, the port left out of the name, the pseudonymous
 * addresses in their documentation ranges.
 */
#include "filters/anon.h"
#include "protocols/error.h"
#include "tests/unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        CHECKF(a_ &&b_ &&strcmp(a_, b_) == 0, "'%s' != '%s'", a_ ? a_ : "(null)",                  \
               b_ ? b_ : "(null)");                                                                \
    } while (0)

static char dir[] = "/tmp/sg_anon_test_XXXXXX";

static void setup(void)
{
    CHECK(mkdtemp(dir) != NULL);
}

static void teardown(void)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

static struct sockaddr_storage v4(const char *ip, int port)
{
    struct sockaddr_storage ss;
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;

    memset(&ss, 0, sizeof(ss));
    in->sin_family = AF_INET;
    in->sin_port = htons((uint16_t)port);
    CHECK(inet_pton(AF_INET, ip, &in->sin_addr) == 1);
    return ss;
}

static struct sockaddr_storage v6(const char *ip, int port)
{
    struct sockaddr_storage ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

    memset(&ss, 0, sizeof(ss));
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons((uint16_t)port);
    CHECK(inet_pton(AF_INET6, ip, &in6->sin6_addr) == 1);
    return ss;
}

static void fixed_key(struct sg_anon_key *k, uint8_t seed)
{
    for (unsigned i = 0; i < sizeof(k->k); i++)
        k->k[i] = (uint8_t)(seed * 37 + i);
}

#define SA(ss) ((const struct sockaddr *)(struct sockaddr_storage[1]){ss})

static const char *name(const struct sg_anon_key *k, struct sockaddr_storage ss, char *buf)
{
    return sg_anon_name(k, SA(ss), buf, SG_ANON_NAME_LEN + 1);
}

/* One key, one client: one pseudonym, "anon-" and 8 hex digits, whatever the port. */
static void case_stable(void)
{
    struct sg_anon_key k;
    char a[32], b[32], c[32], d[32];

    fixed_key(&k, 1);
    name(&k, v4("127.0.0.1", 27961), a);
    name(&k, v4("127.0.0.1", 27961), b);
    name(&k, v4("127.0.0.1", 40000), c);    /* a NAT port change */
    name(&k, v6("::ffff:127.0.0.1", 5), d); /* the dual-stack listener's form */
    CHECK_STR(a, b);
    CHECK_STR(a, c);
    CHECK_STR(a, d);
    CHECK_EQ(strlen(a), SG_ANON_NAME_LEN);
    CHECK(strncmp(a, "anon-", 5) == 0);
    CHECK(strspn(a + 5, "0123456789abcdef") == 8);
    /* Another family is not an address: no crash, a fixed word. */
    {
        struct sockaddr_storage u;
        memset(&u, 0, sizeof(u));
        u.ss_family = AF_UNIX;
        CHECK_STR(name(&k, u, a), "anon-unknown");
    }
}

/* Another key: other pseudonyms (for every one of 200 addresses). */
static void case_keyed(void)
{
    struct sg_anon_key k1, k2;
    char a[32], b[32], ip[32];
    struct sockaddr_storage pa, pb;

    fixed_key(&k1, 1);
    fixed_key(&k2, 2);
    for (int i = 0; i < 200; i++) {
        snprintf(ip, sizeof(ip), "10.0.%d.%d", i / 250, i % 250 + 1);
        name(&k1, v4(ip, 27960), a);
        name(&k2, v4(ip, 27960), b);
        CHECKF(strcmp(a, b) != 0, "%s: %s under both keys", ip, a);
        CHECK_EQ(sg_anon_addr(&k1, SA(v4(ip, 27960)), &pa), 0);
        CHECK_EQ(sg_anon_addr(&k2, SA(v4(ip, 27960)), &pb), 0);
        CHECK(memcmp(&pa, &pb, sizeof(pa)) != 0);
    }
    /* One bit of the key is enough. */
    k2 = k1;
    k2.k[31] ^= 1;
    CHECK(strcmp(name(&k1, v4("192.0.2.7", 1), a), name(&k2, v4("192.0.2.7", 1), b)) != 0);
}

/* Distinct addresses, distinct pseudonyms (4096 IPv4, 256 IPv6, no collision). */
static void case_distinct(void)
{
    enum { N4 = 4096, N6 = 256 };
    static char names[N4 + N6][SG_ANON_NAME_LEN + 1];
    struct sg_anon_key k;
    char ip[64];

    fixed_key(&k, 3);
    for (int i = 0; i < N4; i++) {
        snprintf(ip, sizeof(ip), "172.16.%d.%d", i / 256, i % 256);
        name(&k, v4(ip, 27960), names[i]);
    }
    for (int i = 0; i < N6; i++) {
        snprintf(ip, sizeof(ip), "2001:db8:1::%x", i);
        name(&k, v6(ip, 27960), names[N4 + i]);
    }
    for (int i = 0; i < N4 + N6; i++)
        for (int j = i + 1; j < N4 + N6; j++)
            CHECKF(strcmp(names[i], names[j]) != 0, "%d and %d: %s", i, j, names[i]);
}

/* The pseudonymous address: documentation ranges, a port of its own, stable. */
static void case_address(void)
{
    struct sg_anon_key k;
    struct sockaddr_storage a, b, c;
    const struct sockaddr_in *in = (const struct sockaddr_in *)&a;
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&a;
    int distinct_ports = 0;

    fixed_key(&k, 4);
    CHECK_EQ(sg_anon_addr(&k, SA(v4("127.0.0.1", 27961)), &a), 0);
    CHECK_EQ(a.ss_family, AF_INET);
    CHECK_EQ(ntohl(in->sin_addr.s_addr) >> 17, (198u << 24 | 18u << 16) >> 17);
    CHECK(ntohs(in->sin_port) >= 1024);
    CHECK_EQ(sg_anon_addr(&k, SA(v4("127.0.0.1", 27961)), &b), 0);
    CHECK(memcmp(&a, &b, sizeof(a)) == 0);
    /* Another port of the host: the same address, (almost always) another port. */
    for (int p = 1; p <= 64; p++) {
        CHECK_EQ(sg_anon_addr(&k, SA(v4("127.0.0.1", 27961 + p)), &c), 0);
        CHECK(((struct sockaddr_in *)&c)->sin_addr.s_addr == in->sin_addr.s_addr);
        distinct_ports += ((struct sockaddr_in *)&c)->sin_port != in->sin_port;
    }
    CHECK(distinct_ports >= 60);

    /* IPv6: 2001:db8::/32. */
    CHECK_EQ(sg_anon_addr(&k, SA(v6("2a00:1450::1", 27960)), &a), 0);
    CHECK_EQ(a.ss_family, AF_INET6);
    CHECK(memcmp(in6->sin6_addr.s6_addr, "\x20\x01\x0d\xb8", 4) == 0);
    /* IPv4-mapped stays mapped, with the IPv4 client's pseudonymous address. */
    CHECK_EQ(sg_anon_addr(&k, SA(v4("127.0.0.1", 27961)), &b), 0);
    CHECK_EQ(sg_anon_addr(&k, SA(v6("::ffff:127.0.0.1", 27961)), &a), 0);
    CHECK_EQ(a.ss_family, AF_INET6);
    CHECK(memcmp(in6->sin6_addr.s6_addr, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0);
    CHECK(memcmp(in6->sin6_addr.s6_addr + 12, &((struct sockaddr_in *)&b)->sin_addr, 4) == 0);
    CHECK(in6->sin6_port == ((struct sockaddr_in *)&b)->sin_port);
    {
        struct sockaddr_storage u;
        memset(&u, 0, sizeof(u));
        u.ss_family = AF_UNIX;
        CHECK_EQ(sg_anon_addr(&k, SA(u), &a), -EAFNOSUPPORT);
    }
}

/* The key file: made on first use (0600, directories too), the same key when read again. */
static void case_key_file(void)
{
    char path[256], a[32], b[32];
    struct sg_anon_key k1, k2, k3;
    struct stat st;
    bool created;
    char why[512];

    snprintf(path, sizeof(path), "%s/state/slipgate/anonymize.key", dir);
    CHECKF(sg_anon_key_load(path, &k1, &created, why, sizeof(why)) == 0, "%s", why);
    CHECK(created);
    CHECK(stat(path, &st) == 0);
    CHECK_EQ(st.st_mode & 0777, 0600);
    CHECKF(sg_anon_key_load(path, &k2, &created, why, sizeof(why)) == 0, "%s", why);
    CHECK(!created);
    CHECK(memcmp(k1.k, k2.k, sizeof(k1.k)) == 0);
    CHECK_STR(name(&k1, v4("127.0.0.1", 1), a), name(&k2, v4("127.0.0.1", 2), b));

    /* Another file: another key, other pseudonyms. */
    snprintf(path, sizeof(path), "%s/other.key", dir);
    CHECKF(sg_anon_key_load(path, &k3, &created, why, sizeof(why)) == 0, "%s", why);
    CHECK(created);
    CHECK(strcmp(name(&k1, v4("127.0.0.1", 1), a), name(&k3, v4("127.0.0.1", 1), b)) != 0);
    sg_anon_key_wipe(&k3);
    for (unsigned i = 0; i < sizeof(k3.k); i++)
        CHECK_EQ(k3.k[i], 0);
    sg_anon_key_wipe(NULL);
}

/* Refused: readable by others, not a key, not a file, cannot be made. */
static void case_key_refused(void)
{
    char path[256], why[512];
    struct sg_anon_key k;
    int fd;

    snprintf(path, sizeof(path), "%s/k", dir);
    CHECK_EQ(sg_anon_key_load(path, &k, NULL, why, sizeof(why)), 0);
    CHECK(chmod(path, 0644) == 0);
    CHECK_EQ(sg_anon_key_load(path, &k, NULL, why, sizeof(why)), SG_E_CONFIG);
    CHECKF(strstr(why, "is readable or writable by group or others (mode 0644)") &&
               strstr(why, path),
           "%s", why);
    CHECK(chmod(path, 0620) == 0);
    CHECK_EQ(sg_anon_key_load(path, &k, NULL, why, sizeof(why)), SG_E_CONFIG);

    snprintf(path, sizeof(path), "%s/bad", dir);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, "slipgate-anonymize-key 1\nshort\n", 31) == 31);
    close(fd);
    CHECK_EQ(sg_anon_key_load(path, &k, NULL, why, sizeof(why)), SG_E_CONFIG);
    CHECKF(strstr(why, "is not a slipgate anonymize key") && strstr(why, path), "%s", why);

    CHECK_EQ(sg_anon_key_load(dir, &k, NULL, why, sizeof(why)), SG_E_CONFIG); /* a directory */
    CHECKF(strstr(why, "is not a regular file"), "%s", why);

    snprintf(path, sizeof(path), "%s/bad/under/a/file.key", dir);
    CHECK(sg_anon_key_load(path, &k, NULL, why, sizeof(why)) == -ENOTDIR);
    CHECKF(strstr(why, "Not a directory") && strstr(why, path), "%s", why);
    snprintf(path, sizeof(path), "/proc/sg_anon_test/file.key"); /* cannot be made */
    CHECK(sg_anon_key_load(path, &k, NULL, why, sizeof(why)) < 0);
    CHECKF(strstr(why, "cannot create it") && strstr(why, path), "%s", why);
}

/* The default place: STATE_DIRECTORY, XDG_STATE_HOME, HOME, in that order. */
static void case_default_path(void)
{
    char buf[256];

    unsetenv("STATE_DIRECTORY");
    unsetenv("XDG_STATE_HOME");
    setenv("HOME", "/home/q", 1);
    CHECK_STR(sg_anon_default_path(buf, sizeof(buf)),
              "/home/q/.local/state/slipgate/anonymize.key");
    setenv("XDG_STATE_HOME", "/x/state", 1);
    CHECK_STR(sg_anon_default_path(buf, sizeof(buf)), "/x/state/slipgate/anonymize.key");
    setenv("STATE_DIRECTORY", "/var/lib/slipgate:/var/lib/other", 1);
    CHECK_STR(sg_anon_default_path(buf, sizeof(buf)), "/var/lib/slipgate/anonymize.key");
    unsetenv("STATE_DIRECTORY");
    unsetenv("XDG_STATE_HOME");
    unsetenv("HOME");
    CHECK(sg_anon_default_path(buf, sizeof(buf)) == NULL);
    setenv("HOME", "/home/q", 1);
    CHECK(sg_anon_default_path(buf, 10) == NULL); /* does not fit */
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"stable", case_stable},
        {"keyed", case_keyed},
        {"distinct", case_distinct},
        {"address", case_address},
        {"key_file", case_key_file},
        {"key_refused", case_key_refused},
        {"default_path", case_default_path},
    };
    return unit_main(argc, argv, cases, UNIT_COUNT(cases), setup, teardown);
}
