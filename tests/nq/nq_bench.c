/*
 * nq_bench: NetQuake message decode speed (the target: >= 200
 * MB/s), over the blocks of a .dem held in memory and decoded N times
 * (parse only, then parse + rebuild); the protocol follows the demo's
 * serverinfo as `demo info` does.  Built, not a test:
 *     nq_bench [passes] [file.dem]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "protocols/byteorder.h"
#include "protocols/nq/nq.h"

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); /* CPU time: other load on the machine does not count */
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int passes = argc > 1 ? atoi(argv[1]) : 50;
    const char *path = argc > 2 ? argv[2] : "../shared/testdata/nq/demos/vektar_demo1.dem";
    FILE *f = fopen(path, "rb");
    struct sg_nq_parsed p = {0};
    static uint8_t out[1 << 20];
    uint8_t *d;
    long n;
    size_t start = 0, bytes = 0;
    unsigned long long msgs = 0;

    if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) <= 0) {
        fprintf(stderr, "nq_bench: cannot read %s\n", path);
        return 1;
    }
    rewind(f);
    d = malloc((size_t)n);
    if (!d || fread(d, 1, (size_t)n, f) != (size_t)n)
        return 1;
    fclose(f);
    while (start < (size_t)n && d[start] != '\n')
        start++;
    start++;
    for (int mode = 0; mode < 2; mode++) {
        double t0 = now();
        bytes = 0;
        msgs = 0;
        for (int k = 0; k < passes; k++) {
            struct sg_nq_proto pr;
            size_t i = start;
            sg_nq_proto_set(&pr, SG_NQ_PROTOCOL_NETQUAKE, 0);
            while (i + 16 <= (size_t)n) {
                uint32_t len = sg_le32(d + i);
                if (len > (size_t)n - i - 16)
                    break;
                sg_nq_parse(SG_DIR_S2C, &pr, d + i + 16, len, &p);
                msgs += p.nmsgs;
                if (mode == 1) {
                    struct sg_bmsg_writer w;
                    sg_bmsg_writer_init(&w, out, sizeof(out));
                    sg_nq_write(&p, NULL, &w);
                }
                bytes += len;
                i += 16 + len;
            }
        }
        double dt = now() - t0;
        printf("%s: %d passes, %zu bytes, %llu messages in %.3f s: %.1f MB/s, %.1f M msg/s\n",
               mode ? "decode + rebuild" : "decode", passes, bytes, msgs, dt, bytes / dt / 1e6,
               (double)msgs / dt / 1e6);
    }
    sg_nq_parsed_free(&p);
    free(d);
    return 0;
}
