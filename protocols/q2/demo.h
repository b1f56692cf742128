/*
 * The Quake 2 .dm2 container's reader (demo.c): a run of blocks, each an
 * int32 length, then that many bytes of server messages (one datagram's
 * payload, its netchan header stripped); a length of -1 (0xffffffff) ends
 * the file; a length of 0 separates levels in some multi-level recordings
 * (seed DM2 §2.2).
 */
#ifndef SG_PROTOCOLS_Q2_DEMO_H
#define SG_PROTOCOLS_Q2_DEMO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A .dm2's first bytes (the codec table's demo probe): its first block a
 * length the game accepts, starting with svc_serverdata (every writer
 * starts with it) and a protocol number it knows; SG_DEMO_PROBE_*. */
int sg_q2__dm2_probe(const uint8_t *head, size_t len);

enum { SG_Q2__DM2_END = 0, SG_Q2__DM2_MSG = 1 };

/* One block of `f` into `buf` (SG_Q2_MAX_MSGLEN bytes): SG_Q2__DM2_MSG
 * (*len set), SG_Q2__DM2_END (the -1 marker), or a negative error:
 * SG_E_TRUNCATED for a file that ends without the marker (or inside a
 * block), SG_E_TOOBIG for a length out of range. */
int sg_q2__dm2_block(FILE *f, uint8_t *buf, size_t *len);

#endif
