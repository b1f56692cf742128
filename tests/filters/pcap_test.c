/*
 * Unit tests of the 'pcap' filter (filters/pcap.c): datagrams go in through
 * the chain's datagram taps (sg_chain_datagram, as proxy/session.c calls
 * them) and the file is read back with libpcap's pcap_open_offline, which
 * reads both pcap and pcapng; each packet's IP and UDP headers are parsed
 * here and checked against what was sent (addresses, ports, lengths,
 * checksums, payload).
 *
 *     filter_pcap_test CASE
 */
#include "tests/filters/fake.h"
#include "tests/unit.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- a scratch directory ---- */

static char dir[256];

static void make_dir(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/sg-pcap-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
}

static void remove_dir(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[600];

    for (int i = 0; d && i < 10000 && (e = readdir(d)); i++) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

static int files_in_dir(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    for (int i = 0; d && i < 10000 && (e = readdir(d)); i++)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* ---- addresses and datagrams ---- */

static struct sockaddr_storage v4(const char *ip, int port)
{
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;

    in->sin_family = AF_INET;
    in->sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, ip, &in->sin_addr);
    return ss;
}

static struct sockaddr_storage v6(const char *ip, int port)
{
    struct sockaddr_storage ss = {0};
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons((uint16_t)port);
    inet_pton(AF_INET6, ip, &in6->sin6_addr);
    return ss;
}

static void send_dg(struct fake_chain *fc, enum sg_leg leg, const struct sockaddr_storage *from,
                    const struct sockaddr_storage *to, const uint8_t *data, size_t len)
{
    struct sg_filter_call call = {.session = &fc->session, .data = data, .len = len};

    sg_chain_datagram(fc->chain, fc->slots, &call, leg, data, len, (const struct sockaddr *)from,
                      (const struct sockaddr *)to);
}

static void payload(uint8_t *buf, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)(seed * 31 + i * 7);
}

/* ---- reading back ---- */

struct pkt {
    int family;
    char src[64], dst[64];
    int sport, dport;
    uint32_t caplen, len;
    uint8_t data[70000];
    size_t data_len; /* payload bytes captured */
    size_t udp_len;  /* from the UDP header */
    bool cksum_ok, ipck_ok;
};

static uint32_t sum16(uint32_t s, const uint8_t *p, size_t n)
{
    for (; n > 1; p += 2, n -= 2)
        s += (uint32_t)p[0] << 8 | p[1];
    if (n)
        s += (uint32_t)p[0] << 8;
    return s;
}

static uint16_t folded(uint32_t s)
{
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return (uint16_t)s;
}

/* Parse one raw-IP packet; returns 0, or -1 if it is not IP+UDP. */
static int parse(const struct pcap_pkthdr *h, const uint8_t *b, struct pkt *p)
{
    size_t ihl;
    const uint8_t *udp;
    uint32_t s;

    memset(p, 0, offsetof(struct pkt, data));
    p->caplen = h->caplen;
    p->len = h->len;
    if (h->caplen < 28)
        return -1;
    if ((b[0] >> 4) == 4) {
        ihl = (size_t)(b[0] & 15) * 4;
        if (b[9] != 17 || ihl != 20)
            return -1;
        p->family = AF_INET;
        inet_ntop(AF_INET, b + 12, p->src, sizeof(p->src));
        inet_ntop(AF_INET, b + 16, p->dst, sizeof(p->dst));
        p->ipck_ok = folded(sum16(0, b, 20)) == 0xffff;
        CHECKF((size_t)(b[2] << 8 | b[3]) == h->len, "IPv4 total length %d, packet %u",
              b[2] << 8 | b[3], h->len);
        s = sum16(17, b + 12, 8);
    } else if ((b[0] >> 4) == 6) {
        ihl = 40;
        if (h->caplen < 48 || b[6] != 17)
            return -1;
        p->family = AF_INET6;
        inet_ntop(AF_INET6, b + 8, p->src, sizeof(p->src));
        inet_ntop(AF_INET6, b + 24, p->dst, sizeof(p->dst));
        p->ipck_ok = true;
        CHECKF((size_t)(b[4] << 8 | b[5]) + 40 == h->len, "IPv6 payload length %d, packet %u",
              b[4] << 8 | b[5], h->len);
        s = sum16(17, b + 8, 32);
    } else {
        return -1;
    }
    udp = b + ihl;
    p->sport = udp[0] << 8 | udp[1];
    p->dport = udp[2] << 8 | udp[3];
    p->udp_len = (size_t)(udp[4] << 8 | udp[5]);
    p->data_len = h->caplen - ihl - 8;
    memcpy(p->data, udp + 8, p->data_len);
    /* The checksum can be verified only over a whole payload. */
    if (h->caplen == h->len) {
        s += (uint32_t)p->udp_len;
        s = sum16(s, udp, p->udp_len);
        p->cksum_ok = folded(s) == 0xffff && !(udp[6] == 0 && udp[7] == 0);
    } else {
        p->cksum_ok = true;
    }
    return 0;
}

/* Read the whole file; returns the packet count (or -1), packets into `out` (max n). */
static int read_file(const char *path, struct pkt *out, int n, int *linktype)
{
    char err[PCAP_ERRBUF_SIZE];
    pcap_t *p = pcap_open_offline(path, err);
    struct pcap_pkthdr *h;
    const u_char *b;
    int count = 0, rc = 0;

    if (!p) {
        fprintf(stderr, "pcap_open_offline %s: %s\n", path, err);
        return -1;
    }
    if (linktype)
        *linktype = pcap_datalink(p);
    for (int i = 0; i < 100000 && (rc = pcap_next_ex(p, &h, &b)) == 1; i++) {
        if (count < n)
            CHECKF(parse(h, b, &out[count]) == 0, "packet %d is not IP/UDP", count + 1);
        count++;
    }
    CHECKF(rc == -2, "reading %s ended with %d: %s", path, rc, pcap_geterr(p));
    pcap_close(p);
    return count;
}

static struct pkt pkts[64];

static bool pkt_is(const struct pkt *p, int family, const char *src, int sport, const char *dst,
                   int dport, const uint8_t *data, size_t len)
{
    bool ok = p->family == family && strcmp(p->src, src) == 0 && strcmp(p->dst, dst) == 0 &&
              p->sport == sport && p->dport == dport && p->udp_len == len + 8 &&
              p->data_len == len && memcmp(p->data, data, len) == 0 && p->cksum_ok && p->ipck_ok;

    if (!ok)
        fprintf(stderr,
                "packet: family %d %s:%d -> %s:%d udp_len %zu captured %zu cksum %d ipck %d; "
                "wanted family %d %s:%d -> %s:%d, %zu bytes\n",
                p->family, p->src, p->sport, p->dst, p->dport, p->udp_len, p->data_len, p->cksum_ok,
                p->ipck_ok, family, src, sport, dst, dport, len);
    return ok;
}

static int open_chain(struct fake_chain *fc, const char *conf)
{
    char err[512];
    int rc = fake_chain_open(fc, "pcap", conf, err, sizeof(err));
    CHECKF(rc == 0, "cannot configure pcap with:\n%s\n%s", conf, err);
    return rc;
}

/* ---- cases ---- */

/* A v4 session and a v6 session into one file, all four legs each. */
static void both_families(const char *format)
{
    struct fake_chain fc;
    char conf[600], path[400];
    uint8_t a[100], b[1300], c[1], d[512];
    int linktype = -1, n;
    struct sockaddr_storage cl4 = v4("127.0.0.1", 50001), ls4 = v4("127.0.0.2", 27960),
                            up4 = v4("127.0.0.1", 40001), sv4 = v4("127.0.0.3", 27961);
    struct sockaddr_storage cl6 = v6("::1", 50002), ls6 = v6("fe80::1", 27970),
                            up6 = v6("::1", 40002), sv6 = v6("2001:db8::7", 27971);

    snprintf(path, sizeof(path), "%s/both.%s", dir, format);
    snprintf(conf, sizeof(conf), "file \"%s\"\nformat %s", path, format);
    if (open_chain(&fc, conf) < 0)
        return;
    payload(a, sizeof(a), 1);
    payload(b, sizeof(b), 2);
    payload(c, sizeof(c), 3);
    payload(d, sizeof(d), 4);
    send_dg(&fc, SG_LEG_CLIENT_IN, &cl4, &ls4, a, sizeof(a));
    send_dg(&fc, SG_LEG_SERVER_OUT, &up4, &sv4, a, sizeof(a));
    send_dg(&fc, SG_LEG_SERVER_IN, &sv4, &up4, b, sizeof(b));
    send_dg(&fc, SG_LEG_CLIENT_OUT, &ls4, &cl4, b, sizeof(b));
    fc.session.id = 2;
    send_dg(&fc, SG_LEG_CLIENT_IN, &cl6, &ls6, c, sizeof(c));
    send_dg(&fc, SG_LEG_SERVER_OUT, &up6, &sv6, c, sizeof(c));
    send_dg(&fc, SG_LEG_SERVER_IN, &sv6, &up6, d, sizeof(d));
    send_dg(&fc, SG_LEG_CLIENT_OUT, &ls6, &cl6, d, 0); /* an empty datagram */
    /* The tap's frame verdict: always pass. */
    CHECKF(fake_chain_run(&fc, 0, NULL) == SG_FILTER_PASS, "on_frame did not pass");
    sg_chain_flush(fc.chain);

    /* Flushed: readable while the route still runs. */
    n = read_file(path, pkts, 64, &linktype);
    CHECKF(n == 8, "%d packets after flush, expected 8", n);
    fake_chain_close(&fc);

    n = read_file(path, pkts, 64, &linktype);
    CHECKF(n == 8, "%d packets, expected 8", n);
    CHECKF(linktype == DLT_RAW, "link type %d, expected DLT_RAW (%d)", linktype, DLT_RAW);
    if (n != 8)
        return;
    CHECKF(pkt_is(&pkts[0], AF_INET, "127.0.0.1", 50001, "127.0.0.2", 27960, a, sizeof(a)), "1");
    CHECKF(pkt_is(&pkts[1], AF_INET, "127.0.0.1", 40001, "127.0.0.3", 27961, a, sizeof(a)), "2");
    CHECKF(pkt_is(&pkts[2], AF_INET, "127.0.0.3", 27961, "127.0.0.1", 40001, b, sizeof(b)), "3");
    CHECKF(pkt_is(&pkts[3], AF_INET, "127.0.0.2", 27960, "127.0.0.1", 50001, b, sizeof(b)), "4");
    CHECKF(pkt_is(&pkts[4], AF_INET6, "::1", 50002, "fe80::1", 27970, c, sizeof(c)), "5");
    CHECKF(pkt_is(&pkts[5], AF_INET6, "::1", 40002, "2001:db8::7", 27971, c, sizeof(c)), "6");
    CHECKF(pkt_is(&pkts[6], AF_INET6, "2001:db8::7", 27971, "::1", 40002, d, sizeof(d)), "7");
    CHECKF(pkt_is(&pkts[7], AF_INET6, "fe80::1", 27970, "::1", 50002, d, 0), "8");
}

static void pcap_format(void)
{
    both_families("pcap");
}

static void pcapng_format(void)
{
    char path[400];
    FILE *f;
    static char bytes[65536];
    size_t n;

    both_families("pcapng");
    /* Our own blocks: the section header first, the comments naming session and leg. */
    snprintf(path, sizeof(path), "%s/both.pcapng", dir);
    f = fopen(path, "rb");
    CHECKF(f != NULL, "cannot open %s", path);
    if (!f)
        return;
    n = fread(bytes, 1, sizeof(bytes) - 1, f);
    fclose(f);
    bytes[n] = '\0';
    CHECKF(n > 4 && memcmp(bytes, "\x0a\x0d\x0d\x0a", 4) == 0, "no section header block");
    CHECKF(memmem(bytes, n, "session 1 client->proxy", 23) != NULL, "no leg comment");
    CHECKF(memmem(bytes, n, "session 2 proxy->client", 23) != NULL, "no leg comment");
    CHECKF(memmem(bytes, n, "slipgate", 8) != NULL, "no interface name");
}

/* A leg between different families is IPv6 with a mapped address; two mapped ones are IPv4. */
static void mixed_families(void)
{
    struct fake_chain fc;
    char conf[600], path[400];
    uint8_t a[10];
    int n;
    struct sockaddr_storage c4 = v4("127.0.0.1", 5000), l6 = v6("::", 27960),
                            m1 = v6("::ffff:127.0.0.1", 5001), m2 = v6("::ffff:10.0.0.9", 27961);

    snprintf(path, sizeof(path), "%s/mixed.pcap", dir);
    snprintf(conf, sizeof(conf), "file \"%s\"", path);
    if (open_chain(&fc, conf) < 0)
        return;
    payload(a, sizeof(a), 5);
    send_dg(&fc, SG_LEG_CLIENT_IN, &c4, &l6, a, sizeof(a));
    send_dg(&fc, SG_LEG_CLIENT_OUT, &l6, &c4, a, sizeof(a));
    send_dg(&fc, SG_LEG_CLIENT_IN, &m1, &m2, a, sizeof(a));
    fake_chain_close(&fc);
    n = read_file(path, pkts, 64, NULL);
    CHECKF(n == 3, "%d packets, expected 3", n);
    if (n != 3)
        return;
    CHECKF(pkt_is(&pkts[0], AF_INET6, "::ffff:127.0.0.1", 5000, "::", 27960, a, sizeof(a)), "1");
    CHECKF(pkt_is(&pkts[1], AF_INET6, "::", 27960, "::ffff:127.0.0.1", 5000, a, sizeof(a)), "2");
    CHECKF(pkt_is(&pkts[2], AF_INET, "127.0.0.1", 5001, "10.0.0.9", 27961, a, sizeof(a)), "3");
}

/* The proxy's wildcard addresses become the address the kernel uses towards the peer. */
static void wildcard(void)
{
    struct fake_chain fc;
    char conf[600], path[400];
    uint8_t a[10];
    int n;
    struct sockaddr_storage c4 = v4("127.0.0.1", 5000), l4 = v4("0.0.0.0", 27960),
                            s4 = v4("127.0.0.5", 27961), c6 = v6("::1", 5001), l6 = v6("::", 27970),
                            u6 = v6("::", 40000), s6 = v6("::1", 27971);

    snprintf(path, sizeof(path), "%s/wild.pcap", dir);
    snprintf(conf, sizeof(conf), "file \"%s\"", path);
    if (open_chain(&fc, conf) < 0)
        return;
    payload(a, sizeof(a), 5);
    send_dg(&fc, SG_LEG_CLIENT_IN, &c4, &l4, a, sizeof(a));
    send_dg(&fc, SG_LEG_SERVER_OUT, &l4, &s4, a, sizeof(a));
    send_dg(&fc, SG_LEG_CLIENT_OUT, &l6, &c6, a, sizeof(a));
    send_dg(&fc, SG_LEG_SERVER_IN, &s6, &u6, a, sizeof(a));
    fake_chain_close(&fc);
    n = read_file(path, pkts, 64, NULL);
    CHECKF(n == 4, "%d packets, expected 4", n);
    if (n != 4)
        return;
    CHECKF(pkt_is(&pkts[0], AF_INET, "127.0.0.1", 5000, "127.0.0.1", 27960, a, sizeof(a)), "1");
    CHECKF(pkt_is(&pkts[1], AF_INET, "127.0.0.1", 27960, "127.0.0.5", 27961, a, sizeof(a)), "2");
    CHECKF(pkt_is(&pkts[2], AF_INET6, "::1", 27970, "::1", 5001, a, sizeof(a)), "3");
    CHECKF(pkt_is(&pkts[3], AF_INET6, "::1", 27971, "::1", 40000, a, sizeof(a)), "4");
}

static void snaplen(void)
{
    struct fake_chain fc;
    char conf[600], path[400];
    uint8_t a[100];
    int n;
    struct sockaddr_storage c = v4("127.0.0.1", 1), s = v4("127.0.0.1", 2);
    struct sockaddr_storage c6 = v6("::1", 1), s6 = v6("::1", 2);

    for (int ng = 0; ng < 2; ng++) {
        snprintf(path, sizeof(path), "%s/snap%d.pcap", dir, ng);
        snprintf(conf, sizeof(conf), "file \"%s\"\nsnaplen 60\nformat %s", path,
                 ng ? "pcapng" : "pcap");
        if (open_chain(&fc, conf) < 0)
            return;
        payload(a, sizeof(a), 6);
        send_dg(&fc, SG_LEG_SERVER_IN, &s, &c, a, sizeof(a));
        send_dg(&fc, SG_LEG_SERVER_IN, &s6, &c6, a, sizeof(a));
        send_dg(&fc, SG_LEG_SERVER_IN, &s, &c, a, 10);
        fake_chain_close(&fc);
        n = read_file(path, pkts, 64, NULL);
        CHECKF(n == 3, "%d packets, expected 3", n);
        if (n != 3)
            return;
        CHECKF(pkts[0].caplen == 60 && pkts[0].len == 128, "v4: caplen %u len %u, expected 60 128",
              pkts[0].caplen, pkts[0].len);
        CHECKF(pkts[0].data_len == 32 && memcmp(pkts[0].data, a, 32) == 0, "v4 payload cut");
        CHECKF(pkts[0].udp_len == 108, "UDP length %zu, expected 108", pkts[0].udp_len);
        CHECKF(pkts[1].caplen == 60 && pkts[1].len == 148, "v6: caplen %u len %u, expected 60 148",
              pkts[1].caplen, pkts[1].len);
        CHECKF(pkts[1].data_len == 12 && memcmp(pkts[1].data, a, 12) == 0, "v6 payload cut");
        CHECKF(pkts[2].caplen == 38 && pkts[2].len == 38 && pkts[2].cksum_ok,
              "short: caplen %u len %u", pkts[2].caplen, pkts[2].len);
    }
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* max_size with the next part: every file within the size, nothing lost, order kept. */
static void max_size_next(void)
{
    struct fake_chain fc;
    char conf[600], path[400];
    uint8_t a[100];
    int total = 0, parts = 0;
    struct sockaddr_storage c = v4("127.0.0.1", 1), s = v4("127.0.0.1", 2);

    for (int ng = 0; ng < 2; ng++) {
        const char *ext = ng ? "pcapng" : "pcap";
        snprintf(conf, sizeof(conf), "file \"%s/next-%s.%s\"\nsnaplen 200\nmax_size 4k\nformat %s",
                 dir, ext, ext, ext);
        if (open_chain(&fc, conf) < 0)
            return;
        for (int i = 0; i < 100; i++) {
            payload(a, sizeof(a), (unsigned)i);
            send_dg(&fc, SG_LEG_CLIENT_IN, &c, &s, a, sizeof(a));
        }
        fake_chain_close(&fc);
        total = parts = 0;
        for (int part = 1; part < 50; part++) {
            int n;
            if (part == 1)
                snprintf(path, sizeof(path), "%s/next-%s.%s", dir, ext, ext);
            else
                snprintf(path, sizeof(path), "%s/next-%s-part%d.%s", dir, ext, part, ext);
            if (file_size(path) < 0)
                break;
            parts++;
            CHECKF(file_size(path) <= 4096, "%s is %ld bytes, over max_size 4096", path,
                  file_size(path));
            n = read_file(path, pkts, 64, NULL);
            CHECKF(n > 0, "%s holds %d packets", path, n);
            for (int i = 0; i < n && i < 64; i++) {
                payload(a, sizeof(a), (unsigned)(total + i));
                CHECKF(pkts[i].data_len == 100 && memcmp(pkts[i].data, a, 100) == 0,
                      "%s packet %d is not datagram %d", path, i + 1, total + i + 1);
            }
            total += n > 0 ? n : 0;
        }
        CHECKF(total == 100, "%s: %d packets in %d parts, expected 100", ext, total, parts);
        CHECKF(parts >= 3, "%s: only %d parts for ~14 kB in 4 kB files", ext, parts);
        CHECKF(strstr(fc.log, "reached max_size") && strstr(fc.log, "continuing in"),
              "no rotation logged: %s", fc.log);
    }

    /* With %part% in the name. */
    snprintf(conf, sizeof(conf), "file \"%s/p%%part%%.pcap\"\nsnaplen 200\nmax_size 4k", dir);
    if (open_chain(&fc, conf) < 0)
        return;
    for (int i = 0; i < 40; i++)
        send_dg(&fc, SG_LEG_CLIENT_IN, &c, &s, a, sizeof(a));
    fake_chain_close(&fc);
    snprintf(path, sizeof(path), "%s/p1.pcap", dir);
    total = read_file(path, pkts, 64, NULL);
    snprintf(path, sizeof(path), "%s/p2.pcap", dir);
    total += read_file(path, pkts, 64, NULL);
    CHECKF(total == 40, "%%part%%: %d packets in p1 + p2, expected 40", total);
}

static void max_size_stop(void)
{
    struct fake_chain fc;
    char conf[600], path[400];
    uint8_t a[100];
    int n;
    struct sockaddr_storage c = v4("127.0.0.1", 1), s = v4("127.0.0.1", 2);

    snprintf(path, sizeof(path), "%s/stop.pcap", dir);
    snprintf(conf, sizeof(conf), "file \"%s\"\nsnaplen 200\nmax_size 4k\nat_max_size stop", path);
    if (open_chain(&fc, conf) < 0)
        return;
    payload(a, sizeof(a), 1);
    for (int i = 0; i < 100; i++)
        send_dg(&fc, SG_LEG_CLIENT_IN, &c, &s, a, sizeof(a));
    /* (4096 - 24) / (16 + 128) = 28 records fit. */
    n = read_file(path, pkts, 64, NULL);
    CHECKF(n == 28, "%d packets, expected 28", n);
    CHECKF(file_size(path) == 24 + 28 * 144, "size %ld", file_size(path));
    CHECKF(files_in_dir() == 1, "%d files, expected only stop.pcap", files_in_dir());
    CHECKF(strstr(fc.log, "reached max_size (4056 bytes): the capture is stopped") != NULL,
          "log: %s", fc.log);
    fake_chain_close(&fc);
    CHECKF(read_file(path, pkts, 64, NULL) == 28, "the file changed after it was stopped");
}

/* Disk full: one error line, no more writing, nothing else breaks. */
static void disk_full(void)
{
    struct fake_chain fc;
    uint8_t a[1000];
    int lines = 0;
    struct sockaddr_storage c = v4("127.0.0.1", 1), s = v4("127.0.0.1", 2);

    if (access("/dev/full", W_OK) != 0) {
        CHECKF(0, "/dev/full is needed to simulate a full disk (Linux); not writable here");
        return;
    }
    if (open_chain(&fc, "file /dev/full") < 0)
        return;
    payload(a, sizeof(a), 1);
    for (int i = 0; i < 200; i++) {
        send_dg(&fc, SG_LEG_CLIENT_IN, &c, &s, a, sizeof(a));
        if (i % 20 == 0)
            sg_chain_flush(fc.chain);
    }
    for (const char *p = fc.log; (p = strstr(p, "/dev/full' failed: No space left on device")); p++)
        lines++;
    CHECKF(lines == 1, "the write error was logged %d times:\n%s", lines, fc.log);
    CHECKF(strstr(fc.log, "the capture is stopped") != NULL, "log: %s", fc.log);
    CHECKF(fake_chain_run(&fc, 0, NULL) == SG_FILTER_PASS, "the tap stopped passing frames");
    fake_chain_close(&fc);
}

static void name_template(void)
{
    struct fake_chain fc;
    char conf[600], path[400], day[16], err[512];
    uint8_t a[20];
    struct sockaddr_storage c = v4("127.0.0.1", 1), s = v4("127.0.0.1", 2);
    time_t now = time(NULL);
    struct tm tm;
    int n;

    snprintf(conf, sizeof(conf), "file \"%s/%%route%%-%%date%%.pcap\"", dir);
    if (open_chain(&fc, conf) < 0)
        return;
    CHECKF(files_in_dir() == 0, "a %%route%% file was opened before the first datagram");
    payload(a, sizeof(a), 1);
    send_dg(&fc, SG_LEG_CLIENT_IN, &c, &s, a, sizeof(a));
    fake_chain_close(&fc);
    localtime_r(&now, &tm);
    strftime(day, sizeof(day), "%Y%m%d", &tm);
    snprintf(path, sizeof(path), "%s/test-%s.pcap", dir, day);
    n = read_file(path, pkts, 64, NULL);
    CHECKF(n == 1, "%s: %d packets, expected 1 (log: %s)", path, n, fc.log);
    CHECKF(strstr(fc.log, "capturing into") != NULL, "log: %s", fc.log);

    /* A directory that does not exist: the route does not start. */
    snprintf(conf, sizeof(conf), "file \"%s/missing/%%route%%.pcap\"", dir);
    CHECKF(fake_chain_open(&fc, "pcap", conf, err, sizeof(err)) < 0, "missing directory accepted");
    CHECKF(strstr(err, "cannot write into directory") != NULL, "message: %s", err);
    snprintf(conf, sizeof(conf), "file \"%s/missing/x.pcap\"", dir);
    CHECKF(fake_chain_open(&fc, "pcap", conf, err, sizeof(err)) < 0, "missing directory accepted");
    CHECKF(strstr(err, "cannot create") != NULL && strstr(err, "No such file or directory"),
          "message: %s", err);

    /* An existing file is replaced. */
    snprintf(path, sizeof(path), "%s/old.pcap", dir);
    FILE *f = fopen(path, "w");
    CHECKF(f != NULL, "cannot write %s", path);
    if (f) {
        fputs("not a capture", f);
        fclose(f);
    }
    snprintf(conf, sizeof(conf), "file \"%s\"", path);
    if (open_chain(&fc, conf) < 0)
        return;
    send_dg(&fc, SG_LEG_CLIENT_IN, &c, &s, a, sizeof(a));
    fake_chain_close(&fc);
    CHECKF(read_file(path, pkts, 64, NULL) == 1, "the old file was not replaced");
}

static void config_errors(void)
{
    static const struct {
        const char *conf, *want;
    } bad[] = {
        {"", "needs 'file PATH'"},
        {"format pcapng", "needs 'file PATH'"},
        {"file \"/tmp/%client%.pcap\"", "unknown placeholder at '%client%.pcap'"},
        {"file /tmp/x.pcap\nformat json", "format"},
        {"file /tmp/x.pcap\nsnaplen 10", "snaplen"},
        {"file /tmp/x.pcap\nsnaplen 300000", "snaplen"},
        {"file /tmp/x.pcap\nmax_size 2k", "'max_size' 2048 is below snaplen + 1024 (66559)"},
        {"file /tmp/x.pcap\nat_max_size rotate", "at_max_size"},
        {"file \"\"", "file"},
    };
    char err[512];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct fake_chain fc;
        int rc = fake_chain_open(&fc, "pcap", bad[i].conf, err, sizeof(err));

        CHECKF(rc < 0, "'%s' was accepted", bad[i].conf);
        if (rc < 0)
            CHECKF(strstr(err, bad[i].want) != NULL, "'%s': message '%s' lacks '%s'", bad[i].conf,
                  err, bad[i].want);
        else
            fake_chain_close(&fc);
    }
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"pcap_format", pcap_format},
        {"pcapng_format", pcapng_format},
        {"mixed_families", mixed_families},
        {"wildcard", wildcard},
        {"snaplen", snaplen},
        {"max_size_next", max_size_next},
        {"max_size_stop", max_size_stop},
        {"disk_full", disk_full},
        {"name_template", name_template},
        {"config_errors", config_errors},
    };

    return unit_main(argc, argv, cases, UNIT_COUNT(cases), make_dir, remove_dir);
}
