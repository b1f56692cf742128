/*
 * q2_bench: Quake 2 decode (and decode + rebuild) speed over the real
 * capture's game session, held in memory and replayed N times (each pass
 * in a fresh codec session, so the sequence rule accepts every datagram;
 * the session's create and destroy are timed apart): the codec's whole
 * path (netchan, fragments, zpackets, the cross-game view, level
 * tracking).  Then the message parser alone (sg_q2_parse, and
 * sg_q2_write back, checked byte for byte) over every block of a .dm2, as
 * nq_bench and qw_bench measure theirs: the ">= 200 MB/s" target's figure.
 * MB/s of wall time and of this process's CPU time (steadier on a busy
 * machine).  Built, not a test:
 *     q2_bench [passes] [capture.pcap] [demo.dm2]
 * (defaults: the Q2PRO protocol 36 session, the libq2 duel demo)
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "protocols/byteorder.h"
#include "protocols/codec.h"
#include "protocols/q2/q2.h"
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

/* The blocks of a .dm2: (offset, length) pairs into `buf`, up to the end marker. */
struct dm2 {
    uint8_t *buf;
    size_t len, n, *off, *blen;
};

static int dm2_load(const char *path, struct dm2 *m)
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
    while (pos + 4 <= m->len) {
        uint32_t l = sg_le32(m->buf + pos);

        if (l == 0xffffffffu || l > SG_Q2_MAX_MSGLEN || pos + 4 + l > m->len)
            break;
        if (m->n == cap) {
            cap = cap ? cap * 2 : 4096;
            m->off = realloc(m->off, cap * sizeof(*m->off));
            m->blen = realloc(m->blen, cap * sizeof(*m->blen));
            if (!m->off || !m->blen)
                return -1;
        }
        m->off[m->n] = pos + 4;
        m->blen[m->n++] = l;
        pos += 4 + l;
    }
    return m->n ? 0 : -1;
}

/* Parse (and with `rebuild` write back) every block, `passes` times. */
static int dm2_bench(const struct dm2 *m, int passes, bool rebuild)
{
    static uint8_t wbuf[2 * SG_Q2_MAX_MSGLEN];
    struct sg_q2_parsed p;
    size_t bytes = 0, nmsgs = 0, errors = 0, differ = 0;
    double t0, c0, dt, cpu;

    if (sg_q2_parsed_init(&p) < 0)
        return 1;
    for (size_t i = 0; i < m->n; i++)
        bytes += m->blen[i];
    t0 = now();
    c0 = cpu_now();
    for (int pass = 0; pass < passes; pass++) {
        struct sg_q2_variant v;

        sg_q2_variant_init(&v, 34, 0); /* the demo's serverdata sets it */
        for (size_t i = 0; i < m->n; i++) {
            const uint8_t *d = m->buf + m->off[i];

            if (sg_q2_parse(SG_DIR_S2C, &v, d, m->blen[i], &p) < 0)
                errors++;
            nmsgs += p.nmsgs;
            if (rebuild) {
                struct sg_bmsg_writer w;

                sg_bmsg_writer_init(&w, wbuf, sizeof(wbuf));
                if (sg_q2_write(&p, NULL, &w) < 0 || w.len != m->blen[i] ||
                    memcmp(wbuf, d, w.len) != 0)
                    differ++;
            }
        }
    }
    dt = now() - t0;
    cpu = cpu_now() - c0;
    printf("dm2 %s: %zu blocks (%zu messages, %zu bytes) x %d passes, %.1f MB/s "
           "(%.1f MB/s of CPU time), %.0f ns/block, %zu errors%s\n",
           rebuild ? "parse + write" : "parse", m->n, nmsgs / (size_t)passes, bytes, passes,
           (double)bytes * passes / dt / 1e6, (double)bytes * passes / cpu / 1e6,
           cpu * 1e9 / ((double)m->n * passes), errors / (size_t)passes,
           rebuild ? (differ ? ", NOT byte-identical" : ", byte-identical") : "");
    sg_q2_parsed_free(&p);
    return errors || differ ? 1 : 0;
}

int main(int argc, char **argv)
{
    const struct sg_codec *c = sg_codec_find("q2");
    int passes = argc > 1 ? atoi(argv[1]) : 200;
    const char *path = argc > 2 ? argv[2]
                                : "../shared/testdata/q2/sessions/q2pro_36/capture.pcap";
    const char *dpath = argc > 3 ? argv[3] : "../shared/testdata/q2/demos/libq2_testduel.dm2";
    struct all a = {0};
    struct dm2 m = {0};
    size_t bytes = 0, out = 0;
    int rc;

    if (passes < 1)
        passes = 1;
    if (!c || !c->decode || pcap_udp_foreach(path, keep, &a) != 0 || a.n == 0) {
        fprintf(stderr, "cannot read %s (or no q2 decoder)\n", path);
        return 1;
    }
    for (size_t i = 0; i < a.n; i++)
        bytes += a.d[i].len;
    for (int rebuild = 0; rebuild < 2; rebuild++) {
        double dt = 0, cpu = 0, set_up = 0;

        for (int p = 0; p < passes; p++) {
            double c0 = cpu_now(), t1, c1, c2;
            void *st;

            if (c->create(&st) < 0)
                return 1;
            t1 = now();
            c1 = cpu_now();
            for (size_t i = 0; i < a.n; i++) {
                const struct sg_frame *f;
                bool id;
                c->decode(st, a.d[i].dir, a.d[i].data, a.d[i].len, &f);
                if (rebuild && f->kind == SG_FRAME_MESSAGE)
                    c->encode(st, f, sink, &out, &id);
            }
            dt += now() - t1;
            c2 = cpu_now();
            cpu += c2 - c1;
            c->destroy(st);
            set_up += (c1 - c0) + (cpu_now() - c2);
        }
        printf("%s: %zu datagrams x %d passes, %.1f MB/s (%.1f MB/s of CPU time), "
               "%.0f ns/datagram; session create + destroy %.1f us (CPU), not counted\n",
               rebuild ? "decode + rebuild" : "decode", a.n, passes,
               (double)bytes * passes / dt / 1e6, (double)bytes * passes / cpu / 1e6,
               cpu * 1e9 / ((double)a.n * passes), set_up * 1e6 / passes);
    }
    for (size_t i = 0; i < a.n; i++)
        free(a.d[i].data);
    free(a.d);

    if (dm2_load(dpath, &m) != 0) {
        fprintf(stderr, "cannot read %s\n", dpath);
        return 1;
    }
    rc = dm2_bench(&m, passes, false);
    rc |= dm2_bench(&m, passes, true);
    free(m.buf);
    free(m.off);
    free(m.blen);
    return rc;
}
