/*
 * qw_bench: QuakeWorld decode (and decode + rebuild) speed over the real
 * capture's game session, held in memory and replayed N times (each pass
 * in a fresh codec session, so the sequence rule accepts every datagram).
 * Then the same for the messages of an .mvd (every message block's
 * payload through the parser, sg_qw_parse with the MVD forms, and back
 * through the writer), the figure the ">= 200 MB/s" target is about.
 * Built, not a test:  qw_bench [passes] [capture.pcap] [demo.mvd]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "protocols/codec.h"
#include "protocols/qw/qw.h"
#include "tests/q3/pcap_udp.h"

struct dg {
    int dir;
    uint8_t *data;
    size_t len;
};

struct all {
    struct dg *d;
    size_t n, cap;
    uint16_t server, client;
};

static int keep(const struct pcap_udp *u, void *arg)
{
    struct all *a = arg;

    if (!a->client && u->len > 11 && memcmp(u->data, "\xff\xff\xff\xff" "connect", 11) == 0) {
        a->client = u->sport;
        a->server = u->dport;
    }
    if (!a->client || !((u->sport == a->client && u->dport == a->server) ||
                        (u->sport == a->server && u->dport == a->client)))
        return 0;
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 1024;
        a->d = realloc(a->d, a->cap * sizeof(*a->d));
        if (!a->d)
            return -1;
    }
    a->d[a->n].dir = u->sport == a->client ? SG_DIR_C2S : SG_DIR_S2C;
    a->d[a->n].data = malloc(u->len);
    if (!a->d[a->n].data)
        return -1;
    memcpy(a->d[a->n].data, u->data, u->len);
    a->d[a->n++].len = u->len;
    return 0;
}

static int sink(void *ctx, const uint8_t *d, size_t n)
{
    (void)d;
    *(size_t *)ctx += n;
    return 0;
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* This process's CPU time: a loaded machine stretches the wall clock, not this. */
static double cpu_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The message blocks of an .mvd: (offset, length) pairs into `buf` (hidden blocks left out). */
struct mvd {
    uint8_t *buf;
    size_t len, n, *off, *mlen;
};

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int mvd_load(const char *path, struct mvd *m)
{
    FILE *f = fopen(path, "rb");
    size_t pos = 0, cap = 0;
    long n;

    if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) != 0)
        return -1;
    m->buf = malloc((size_t)n);
    if (!m->buf || fread(m->buf, 1, (size_t)n, f) != (size_t)n)
        return -1;
    fclose(f);
    m->len = (size_t)n;
    while (pos + 2 <= m->len) {
        unsigned type = m->buf[pos + 1] & 7;
        size_t head = 2 + (type == 3 ? 4 : 0), l;

        if (type == 0 || type == 2) { /* cmd, set: no messages */
            pos += head + (type == 0 ? 36 : 8);
            continue;
        }
        if (type == 7 || pos + head + 4 > m->len)
            break;
        l = le32(m->buf + pos + head);
        if (pos + head + 4 + l > m->len)
            break;
        if (!(type == 3 && le32(m->buf + pos + 2) == 0)) { /* not hidden */
            if (m->n == cap) {
                cap = cap ? cap * 2 : 4096;
                m->off = realloc(m->off, cap * sizeof(*m->off));
                m->mlen = realloc(m->mlen, cap * sizeof(*m->mlen));
                if (!m->off || !m->mlen)
                    return -1;
            }
            m->off[m->n] = pos + head + 4;
            m->mlen[m->n++] = l;
        }
        pos += head + 4 + l;
    }
    return m->n ? 0 : -1;
}

/* Parse (and with `rebuild` write back) every message block, `passes` times. */
static int mvd_bench(const struct mvd *m, int passes, bool rebuild)
{
    static struct sg_field fields[SG_QW_MAX_FIELDS];
    static struct sg_fmsg msgs[SG_QW_MAX_MSGS];
    static uint8_t wbuf[SG_QW_MAX_DGRAM + 4096];
    struct sg_qw_parsed p = {.fields = fields, .msgs = msgs};
    size_t bytes = 0, nmsgs = 0, errors = 0, differ = 0;
    double t0 = now(), c0 = cpu_now(), dt, cpu;

    for (size_t i = 0; i < m->n; i++)
        bytes += m->mlen[i];
    for (int pass = 0; pass < passes; pass++) {
        struct sg_qw_ext ext = {0};
        struct sg_qw_variant v;

        sg_qw_variant_of(&ext, &v);
        v.mvd = true;
        for (size_t i = 0; i < m->n; i++) {
            const uint8_t *d = m->buf + m->off[i];

            if (sg_qw_parse(SG_DIR_S2C, &v, d, m->mlen[i], &p) < 0)
                errors++;
            if (p.serverdata) {
                sg_qw_variant_of(&p.ext, &v);
                v.mvd = true;
            }
            nmsgs += p.nmsgs;
            if (rebuild) {
                struct sg_bmsg_writer w;

                sg_bmsg_writer_init(&w, wbuf, sizeof(wbuf));
                if (sg_qw_write(&p, NULL, &w) < 0 || w.len != m->mlen[i] ||
                    memcmp(wbuf, d, w.len) != 0)
                    differ++;
            }
        }
    }
    dt = now() - t0;
    cpu = cpu_now() - c0;
    printf("mvd %s: %zu message blocks (%zu messages, %zu bytes) x %d passes, %.1f MB/s "
           "(%.1f MB/s of CPU time), %.0f ns/block, %zu errors%s\n",
           rebuild ? "parse + write" : "parse", m->n, nmsgs / (size_t)passes, bytes, passes,
           (double)bytes * passes / dt / 1e6, (double)bytes * passes / cpu / 1e6,
           cpu * 1e9 / ((double)m->n * passes),
           errors / (size_t)passes, rebuild ? (differ ? ", NOT byte-identical" : ", byte-identical")
                                            : "");
    return errors || differ ? 1 : 0;
}

int main(int argc, char **argv)
{
    const struct sg_codec *c = sg_codec_find("qw");
    int passes = argc > 1 ? atoi(argv[1]) : 200;
    const char *path = argc > 2 ? argv[2]
                                : "../shared/testdata/qw/sessions/ezquake_mvdsv/capture.pcap";
    struct all a = {0};
    size_t bytes = 0, out = 0;

    if (!c || !c->decode || pcap_udp_foreach(path, keep, &a) != 0 || a.n == 0) {
        fprintf(stderr, "cannot read %s (or no qw decoder)\n", path);
        return 1;
    }
    for (size_t i = 0; i < a.n; i++)
        bytes += a.d[i].len;
    for (int rebuild = 0; rebuild < 2; rebuild++) {
        double t0 = now(), c0 = cpu_now();
        for (int p = 0; p < passes; p++) {
            void *st;
            if (c->create(&st) < 0)
                return 1;
            for (size_t i = 0; i < a.n; i++) {
                const struct sg_frame *f;
                bool id;
                c->decode(st, a.d[i].dir, a.d[i].data, a.d[i].len, &f);
                if (rebuild && f->kind == SG_FRAME_MESSAGE)
                    c->encode(st, f, sink, &out, &id);
            }
            c->destroy(st);
        }
        double dt = now() - t0, cpu = cpu_now() - c0;
        printf("%s: %zu datagrams x %d passes, %.1f MB/s (%.1f MB/s of CPU time), "
               "%.0f ns/datagram (CPU)\n",
               rebuild ? "decode + rebuild" : "decode", a.n, passes,
               (double)bytes * passes / dt / 1e6, (double)bytes * passes / cpu / 1e6,
               cpu * 1e9 / ((double)a.n * passes));
    }
    for (size_t i = 0; i < a.n; i++)
        free(a.d[i].data);
    free(a.d);

    {
        const char *mpath = argc > 3 ? argv[3] : "../shared/testdata/qw/demos/mvdparser_1on1.mvd";
        struct mvd m = {0};
        int rc;

        if (mvd_load(mpath, &m) != 0) {
            fprintf(stderr, "cannot read %s\n", mpath);
            return 1;
        }
        rc = mvd_bench(&m, passes / 20 > 0 ? passes / 20 : 1, false);
        rc |= mvd_bench(&m, passes / 20 > 0 ? passes / 20 : 1, true);
        free(m.buf);
        free(m.off);
        free(m.mlen);
        return rc;
    }
}
