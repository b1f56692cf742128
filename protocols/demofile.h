/*
 * Demo files on a full disk.  Every recorder (the record filter, `pcap
 * decode --record`) flushes each message as it writes it and remembers
 * where the file's last whole block ends; a write that fails part-way
 * leaves part of a block at the end, which the games' players take for a
 * broken demo, so the recorder cuts the file back there and the demo ends
 * at its last whole message.
 */
#ifndef SG_PROTOCOLS_DEMOFILE_H
#define SG_PROTOCOLS_DEMOFILE_H

#include <stdint.h>
#include <stdio.h>

/* A whole message went into `f`: flush it and store the file's bytes so far in *whole.
 * 0, or the write's error (-ENOSPC on a full disk). */
int sg_demo_file_whole(FILE *f, uint64_t *whole);

/* A write to `f` failed: drop what the stream still buffers (it is never written) and
 * cut the file back to `whole` bytes, where the next write goes.  0 or -errno. */
int sg_demo_file_cut(FILE *f, uint64_t whole);

#endif
