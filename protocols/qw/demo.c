/*
 * The QuakeWorld demo containers (demo.h), .qwd and .mvd: their blocks
 * walked, a file read whole, and the probes that tell the formats apart.
 * No message decoding happens here (offline.c).
 */
#include "protocols/qw/demo.h"

#include "protocols/byteorder.h"
#include "protocols/codec.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_FILE (512u << 20)

const char *const sg_qw__dem_names[DEM_TYPES + 1] = {"cmd",    "read",  "set", "multiple",
                                                     "single", "stats", "all", "bad"};

int sg_qw__demo_next(struct sg_qw__demo_rd *r, struct block *b)
{
    const uint8_t *p = r->buf + r->pos;
    size_t left = r->len - r->pos, need;
    unsigned c;

    memset(b, 0, sizeof(*b));
    b->offset = r->pos;
    b->index = r->count;
    r->bad_at = r->pos;
    if (left == 0)
        return 0;
    need = r->mvd ? 2 : 5;
    if (left < need)
        goto cut;
    if (r->mvd) {
        r->mvd_ms += p[0];
        b->time = (double)r->mvd_ms / 1000.0;
        c = p[1];
        b->type = (int)(c & 7);
        b->to = c >> 3;
    } else {
        uint32_t t = sg_le32(p);
        float f;

        memcpy(&f, &t, sizeof(f));
        b->time = f;
        c = p[4];
        b->type = c <= DEM_SET ? (int)c : DEM_TYPES;
    }
    switch (b->type) {
    case DEM_CMD:
        need += CMD_BYTES;
        break;
    case DEM_SET:
        need += 8;
        break;
    case DEM_MULTIPLE:
        need += 4;
        __attribute__((fallthrough));
    case DEM_READ:
    case DEM_SINGLE:
    case DEM_STATS:
    case DEM_ALL:
        if (left < need + 4)
            goto cut;
        if (b->type == DEM_MULTIPLE)
            b->mask = sg_le32(p + need - 4);
        b->len = sg_le32(p + need);
        if (b->len > MAX_BLOCK) {
            snprintf(r->why, sizeof(r->why),
                     "block #%zu (%s) says %zu bytes; no player reads more than %d", b->index,
                     sg_qw__dem_names[b->type], b->len, MAX_BLOCK);
            return -1;
        }
        need += 4;
        b->has_len = true;
        break;
    default:
        snprintf(r->why, sizeof(r->why), "block #%zu has type %u, which no player reads", b->index,
                 c & (r->mvd ? 7u : 0xffu));
        return -1;
    }
    b->head = p;
    b->head_len = need;
    if (!b->has_len)
        b->len = need - (r->mvd ? 2 : 5);
    if (left < need + (b->has_len ? b->len : 0))
        goto cut;
    if (b->has_len) {
        b->data = p + need;
    } else {
        b->head_len = r->mvd ? 2 : 5;
        b->data = p + b->head_len;
    }
    r->pos += b->head_len + b->len;
    r->count++;
    return 1;
cut:
    snprintf(r->why, sizeof(r->why),
             "the file ends inside block #%zu (%zu of its bytes there, %zu needed at least)",
             b->index, left, need + (b->has_len ? b->len : 0));
    return -1;
}

int sg_qw__demo_slurp(FILE *in, uint8_t **buf, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    uint8_t *b = malloc(cap);

    if (!b)
        return -ENOMEM;
    for (;;) {
        size_t got;
        if (n == cap) {
            uint8_t *nb;
            if (cap >= MAX_FILE) {
                free(b);
                return -EFBIG;
            }
            cap *= 2;
            nb = realloc(b, cap);
            if (!nb) {
                free(b);
                return -ENOMEM;
            }
            b = nb;
        }
        got = fread(b + n, 1, cap - n, in);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(in)) {
        free(b);
        return -EIO;
    }
    *buf = b;
    *len = n;
    return 0;
}

/*
 * Probes: walk the first blocks of each format.  The first block decides
 * NO; a file cut inside it, or a later block that makes no sense, is
 * UNKNOWN (a file named .qwd / .mvd is then read, and the reader tells
 * where it stops); three good blocks (or a good file's end) are YES.
 */
static int probe_as(const uint8_t *head, size_t len, bool mvd)
{
    struct sg_qw__demo_rd r = {.buf = head, .len = len, .mvd = mvd};
    struct block b;
    double first = 0;

    for (int i = 0; i < 3; i++) {
        bool bad = false;
        int rc = sg_qw__demo_next(&r, &b);

        if (rc == 0)
            return i ? SG_DEMO_PROBE_YES : SG_DEMO_PROBE_UNKNOWN;
        if (rc < 0) {
            bool cut = strncmp(r.why, "the file ends", 13) == 0;
            return cut || i ? SG_DEMO_PROBE_UNKNOWN : SG_DEMO_PROBE_NO;
        }
        if (mvd) {
            /* an .mvd has no client moves, and its messages start with an svc opcode */
            bad =
                b.type == DEM_CMD || (b.has_len && b.len > 0 && (b.data[0] == 0 || b.data[0] > 94));
        } else {
            bad = !isfinite(b.time) || b.time < 0 || b.time > 1e7 || (i && b.time < first - 1.0) ||
                  (b.type == DEM_READ && b.len < 8 &&
                   !(b.len >= 4 && sg_le32(b.data) == 0xffffffffu));
            first = b.time;
        }
        if (bad)
            return i ? SG_DEMO_PROBE_UNKNOWN : SG_DEMO_PROBE_NO;
    }
    return SG_DEMO_PROBE_YES;
}

int sg_qw__demo_probe(const uint8_t *head, size_t len)
{
    int m = probe_as(head, len, true), q = probe_as(head, len, false);

    if (m == SG_DEMO_PROBE_YES || q == SG_DEMO_PROBE_YES)
        return SG_DEMO_PROBE_YES;
    return m == SG_DEMO_PROBE_UNKNOWN || q == SG_DEMO_PROBE_UNKNOWN ? SG_DEMO_PROBE_UNKNOWN
                                                                    : SG_DEMO_PROBE_NO;
}

bool sg_qw__demo_is_mvd(const char *name, const uint8_t *buf, size_t len)
{
    const char *dot = strrchr(name, '.');

    if (dot && strcasecmp(dot + 1, "mvd") == 0)
        return true;
    if (dot && strcasecmp(dot + 1, "qwd") == 0)
        return false;
    return probe_as(buf, len < SG_DEMO_HEAD_MAX ? len : SG_DEMO_HEAD_MAX, true) ==
           SG_DEMO_PROBE_YES;
}
