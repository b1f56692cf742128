/*
 * Traffic shape: the sizes of client and server datagrams, and how many
 * server datagrams answer one client datagram, taken from real Quake 3
 * captures (pcap or pcapng through libpcap) when they can be read.
 *
 * In each capture the UDP port seen in the most datagrams is the server's:
 * datagrams to it are client->server, datagrams from it server->client.
 * Sizes are the UDP payload length from the UDP header (not the captured
 * length, which a snap length may have cut).  They are kept in capture
 * order, so a burst of 1300-byte fragments is replayed as a burst.
 *
 * Without captures the built-in shape stands in: client datagrams of 30 to
 * 100 bytes, server datagrams of 100 to 600 bytes with a 1300-byte fragment
 * burst now and then, one server datagram per three client ones (60/s and
 * 20/s in the game).
 */
#include "tests/bench/bench.h"

#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <pcap/pcap.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZES (1u << 20) /* per direction, over all captures */

struct sizes {
    uint16_t *v;
    size_t n, cap;
};

struct udp_seen {
    uint16_t sport, dport, len;
};

static int sizes_push(struct sizes *s, unsigned len, size_t *padded)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        uint16_t *v;

        if (s->n >= MAX_SIZES)
            return 0; /* enough of a sample */
        v = realloc(s->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    if (len < SG_BENCH_HDR_LEN) {
        len = SG_BENCH_HDR_LEN;
        (*padded)++;
    }
    if (len > SG_BENCH_MAX_PAYLOAD)
        len = SG_BENCH_MAX_PAYLOAD;
    s->v[s->n++] = (uint16_t)len;
    return 0;
}

/* ---- reading one capture ---- */

static unsigned be16(const unsigned char *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

/* The UDP header of one captured frame, or false if it is not UDP/IP. */
static bool frame_udp(int dlt, const unsigned char *d, size_t caplen, struct udp_seen *u)
{
    size_t off;
    unsigned ethertype, proto;

    /* Link layer. */
    switch (dlt) {
    case DLT_EN10MB:
        if (caplen < 14)
            return false;
        ethertype = be16(d + 12);
        off = 14;
        while ((ethertype == 0x8100 || ethertype == 0x88a8) && caplen >= off + 4) {
            ethertype = be16(d + off + 2);
            off += 4;
        }
        break;
    case DLT_LINUX_SLL:
        if (caplen < 16)
            return false;
        ethertype = be16(d + 14);
        off = 16;
        break;
    case DLT_RAW:
        if (caplen < 1)
            return false;
        ethertype = (d[0] >> 4) == 6 ? 0x86dd : 0x0800;
        off = 0;
        break;
    default:
        return false;
    }

    /* Network layer: IPv4 (first fragments only) or IPv6 without extension headers. */
    if (ethertype == 0x0800) {
        size_t ihl;

        if (caplen < off + 20 || (d[off] >> 4) != 4)
            return false;
        ihl = (size_t)(d[off] & 15) * 4;
        proto = d[off + 9];
        if ((be16(d + off + 6) & 0x1fff) != 0)
            return false;
        off += ihl;
    } else if (ethertype == 0x86dd) {
        if (caplen < off + 40)
            return false;
        proto = d[off + 6];
        off += 40;
    } else {
        return false;
    }
    if (proto != 17 || caplen < off + 8 || be16(d + off + 4) < 8)
        return false;

    u->sport = (uint16_t)be16(d + off);
    u->dport = (uint16_t)be16(d + off + 2);
    u->len = (uint16_t)(be16(d + off + 4) - 8);
    return true;
}

/* Append the sizes of one capture; returns datagrams used, or a negated errno. */
static long read_capture(const char *path, struct sizes *c2s, struct sizes *s2c, size_t *padded)
{
    char errbuf[PCAP_ERRBUF_SIZE];
    struct udp_seen *seen = NULL, u;
    size_t n = 0, cap = 0, used = 0;
    uint32_t *ports = NULL;
    struct pcap_pkthdr *hdr;
    const unsigned char *data;
    unsigned server = 0;
    long ret;
    pcap_t *p;
    int dlt;

    p = pcap_open_offline(path, errbuf);
    if (!p) {
        fprintf(stderr, "slipgate-bench: warning: %s: %s\n", path, errbuf);
        return -EINVAL;
    }
    dlt = pcap_datalink(p);

    /* Every UDP datagram, and how often each port appears. */
    ports = calloc(65536, sizeof(*ports));
    if (!ports) {
        ret = -ENOMEM;
        goto out;
    }
    for (size_t frames = 0; frames < (1u << 24) && pcap_next_ex(p, &hdr, &data) == 1; frames++) {
        if (!frame_udp(dlt, data, hdr->caplen, &u))
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 4096;
            struct udp_seen *ns = realloc(seen, ncap * sizeof(*ns));
            if (!ns) {
                ret = -ENOMEM;
                goto out;
            }
            seen = ns;
            cap = ncap;
        }
        seen[n++] = u;
        ports[u.sport]++;
        if (u.dport != u.sport)
            ports[u.dport]++;
    }

    /* The server is the busiest port; split by direction. */
    for (unsigned i = 1; i < 65536; i++)
        if (ports[i] > ports[server])
            server = i;
    for (size_t i = 0; i < n && server != 0; i++) {
        int err = 0;

        if (seen[i].dport == server)
            err = sizes_push(c2s, seen[i].len, padded);
        else if (seen[i].sport == server)
            err = sizes_push(s2c, seen[i].len, padded);
        else
            continue;
        if (err < 0) {
            ret = err;
            goto out;
        }
        used++;
    }
    ret = (long)used;
out:
    free(ports);
    free(seen);
    pcap_close(p);
    return ret;
}

/* ---- the built-in shape ---- */

static int builtin_shape(struct sizes *c2s, struct sizes *s2c, size_t *padded)
{
    int err = 0;

    /* Client: 30..100 bytes, spread evenly. */
    for (unsigned i = 0; i < 240 && err == 0; i++)
        err = sizes_push(c2s, 30 + (i * 37) % 71, padded);

    /* Server: 100..600 bytes, and every 20th message a 3217-byte one in fragments. */
    for (unsigned i = 0; i < 80 && err == 0; i++) {
        if (i % 20 == 10) {
            err = sizes_push(s2c, 1300, padded);
            if (err == 0)
                err = sizes_push(s2c, 1300, padded);
            if (err == 0)
                err = sizes_push(s2c, 617, padded);
        } else {
            err = sizes_push(s2c, 100 + (i * 173) % 500, padded);
        }
    }
    return err;
}

/* ---- the public part ---- */

static double mean(const uint16_t *v, size_t n)
{
    double sum = 0;

    for (size_t i = 0; i < n; i++)
        sum += v[i];
    return n ? sum / (double)n : 0.0;
}

int sg_bench_shape_load(struct sg_bench_shape *shape, const char *dir, bool builtin)
{
    struct sizes c2s = {0}, s2c = {0};
    char pattern[PATH_MAX];
    glob_t g = {0};
    size_t files = 0, padded = 0;
    int err = 0;

    memset(shape, 0, sizeof(*shape));

    /* The captures: DIR/x/capture.pcap, or DIR/x.pcap / .pcapng directly. */
    if (!builtin && dir && *dir) {
        int gerr;

        snprintf(pattern, sizeof(pattern), "%s/*/capture.pcap*", dir);
        gerr = glob(pattern, 0, NULL, &g);
        snprintf(pattern, sizeof(pattern), "%s/*.pcap*", dir);
        if (gerr == 0) {
            glob(pattern, GLOB_APPEND, NULL, &g);
        } else {
            globfree(&g);
            memset(&g, 0, sizeof(g));
            glob(pattern, 0, NULL, &g);
        }
        for (size_t i = 0; i < g.gl_pathc; i++) {
            long used = read_capture(g.gl_pathv[i], &c2s, &s2c, &padded);

            if (used == -ENOMEM) {
                err = -ENOMEM;
                goto err_sizes;
            }
            if (used > 0)
                files++;
        }
        globfree(&g);
        memset(&g, 0, sizeof(g));
    }

    if (files == 0 || c2s.n == 0 || s2c.n == 0) {
        if (!builtin)
            fprintf(stderr,
                    "slipgate-bench: warning: no readable capture under '%s'; "
                    "using the built-in Quake 3 shape\n",
                    dir ? dir : "");
        free(c2s.v);
        free(s2c.v);
        memset(&c2s, 0, sizeof(c2s));
        memset(&s2c, 0, sizeof(s2c));
        files = 0;
        padded = 0;
        err = builtin_shape(&c2s, &s2c, &padded);
        if (err < 0)
            goto err_sizes;
    }

    shape->c2s = c2s.v;
    shape->s2c = s2c.v;
    shape->n_c2s = c2s.n;
    shape->n_s2c = s2c.n;
    shape->s2c_per_c2s = (double)s2c.n / (double)c2s.n;
    if (shape->s2c_per_c2s > 8.0)
        shape->s2c_per_c2s = 8.0; /* the sink's reply batch is sized for this */
    shape->c2s_mean = mean(c2s.v, c2s.n);
    shape->s2c_mean = mean(s2c.v, s2c.n);
    shape->files = files;
    shape->padded = padded;
    if (files)
        snprintf(shape->source, sizeof(shape->source), "%zu captures under %s", files, dir);
    else
        snprintf(shape->source, sizeof(shape->source), "built-in Quake 3 shape");
    return 0;

err_sizes:
    globfree(&g);
    free(c2s.v);
    free(s2c.v);
    return err;
}

void sg_bench_shape_finish(struct sg_bench_shape *shape)
{
    if (!shape)
        return;
    free(shape->c2s);
    free(shape->s2c);
    memset(shape, 0, sizeof(*shape));
}
