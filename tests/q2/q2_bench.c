/*
 * q2_bench: Quake 2 decode (and decode + rebuild) speed over the real
 * capture's game session, held in memory and replayed N times (each pass
 * in a fresh codec session, so the sequence rule accepts every datagram).
 * Built, not a test:  q2_bench [passes] [capture.pcap] (default: the Q2PRO protocol 36 session)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "protocols/codec.h"
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

int main(int argc, char **argv)
{
    const struct sg_codec *c = sg_codec_find("q2");
    int passes = argc > 1 ? atoi(argv[1]) : 200;
    const char *path = argc > 2 ? argv[2]
                                : "../shared/testdata/q2/sessions/q2pro_36/capture.pcap";
    struct all a = {0};
    size_t bytes = 0, out = 0;

    if (!c || !c->decode || pcap_udp_foreach(path, keep, &a) != 0 || a.n == 0) {
        fprintf(stderr, "cannot read %s (or no q2 decoder)\n", path);
        return 1;
    }
    for (size_t i = 0; i < a.n; i++)
        bytes += a.d[i].len;
    for (int rebuild = 0; rebuild < 2; rebuild++) {
        double t0 = now();
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
        double dt = now() - t0;
        printf("%s: %zu datagrams x %d passes, %.1f MB/s, %.0f ns/datagram\n",
               rebuild ? "decode + rebuild" : "decode", a.n, passes,
               (double)bytes * passes / dt / 1e6, dt * 1e9 / ((double)a.n * passes));
    }
    for (size_t i = 0; i < a.n; i++)
        free(a.d[i].data);
    free(a.d);
    return 0;
}
