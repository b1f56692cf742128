/*
 * The NetQuake .dem container's reader (demo.c): the cd-track line
 * ("-1\n", as the player's `record` wrote it), then blocks of a
 * little-endian int32 length, three float view angles and the server's
 * message of that length (the DEM seed §5).  struct dem also holds what
 * the offline tools (offline.c) decode of the blocks.
 */
#ifndef SG_PROTOCOLS_NQ_DEMO_H
#define SG_PROTOCOLS_NQ_DEMO_H

#include "protocols/nq/nq.h"

#include <stdio.h>

#define TRACK_MAX 32 /* the cd-track line's bytes, '\n' included */

struct dem {
    FILE *in;
    char track[TRACK_MAX + 1];
    size_t track_len; /* with its '\n' */
    uint8_t *buf;
    size_t cap;
    /* the block read last */
    uint32_t len;
    uint8_t angles[12];
    uint64_t blocks;
    bool truncated; /* the file ended inside a block */
    bool too_long;  /* a block length no demo has */
    struct sg_nq_proto proto;
    struct sg_nq_parsed parsed;
    /* DarkPlaces' CSQC program in the demo (see the top) */
    struct {
        bool open;       /* after cl_downloadbegin, before cl_downloadfinished */
        bool seen, finished, crc_ok;
        char name[64];
        uint32_t size, got, blocks, crc_said;
        uint16_t crc;
    } cs;
    bool cs_block;           /* the block read last is a piece of it */
    uint32_t cs_offset, cs_len;
};

/* Open `in` at its cd-track line: 0 or SG_E_MALFORMED. */
int sg_nq__dem_open(struct dem *d, FILE *in);
void sg_nq__dem_close(struct dem *d);
/* The next block: 1, 0 at the end of the file, or a negative error. */
int sg_nq__dem_next(struct dem *d);

#endif
