/*
 * The QuakeWorld demo containers' reader (demo.c), .qwd and .mvd: their
 * blocks (offline.c, at its top, draws both formats), told apart by name
 * or by their first blocks.  No message decoding happens here.
 */
#ifndef SG_PROTOCOLS_QW_DEMO_H
#define SG_PROTOCOLS_QW_DEMO_H

#include "protocols/qw/qw.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { DEM_CMD, DEM_READ, DEM_SET, DEM_MULTIPLE, DEM_SINGLE, DEM_STATS, DEM_ALL, DEM_TYPES };

/* The block types' names, and "bad" for any other (DEM_TYPES). */
extern const char *const sg_qw__dem_names[DEM_TYPES + 1];

#define CMD_BYTES   36              /* usercmd_t (24) + 3 float view angles */
#define MAX_BLOCK   SG_QW_MAX_DGRAM /* the longest message block taken */
#define HIDDEN_HEAD 6 /* long len, short type */

/* One block of the file. */
struct block {
    size_t offset;       /* of its first byte */
    size_t index;        /* 0, 1, ... */
    int type;            /* DEM_* */
    unsigned to;         /* single / stats: the player */
    uint32_t mask;       /* multiple: the players */
    double time;         /* seconds since the start (mvd) or the recorded time (qwd) */
    const uint8_t *head; /* bytes before the payload (time, type, mask, length) */
    size_t head_len;
    bool has_len;        /* `long len` is the last 4 bytes of head */
    const uint8_t *data; /* payload */
    size_t len;
};

/* A reader of a whole file in memory. */
struct sg_qw__demo_rd {
    const uint8_t *buf;
    size_t len, pos, count;
    bool mvd;
    uint64_t mvd_ms;
    char why[160]; /* after a -1 from sg_qw__demo_next */
    size_t bad_at;
};

/* The next block of `r` into *b: 1, 0 at a clean end, or -1 with r->why
 * and r->bad_at. */
int sg_qw__demo_next(struct sg_qw__demo_rd *r, struct block *b);

/* The whole of `in` into *buf (malloc'd, *len bytes; 512 MiB at most):
 * 0, -EFBIG, -ENOMEM or -EIO. */
int sg_qw__demo_slurp(FILE *in, uint8_t **buf, size_t *len);

/* A demo's first bytes (the codec table's demo probe), either format: SG_DEMO_PROBE_*. */
int sg_qw__demo_probe(const uint8_t *head, size_t len);

/* Is the file `name` (its bytes `buf`) an .mvd?  By its name, else by its first blocks. */
bool sg_qw__demo_is_mvd(const char *name, const uint8_t *buf, size_t len);

#endif
