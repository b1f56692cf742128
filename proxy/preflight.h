/*
 * What the start and a session's first recording will need, checked now:
 * one set of checks for `--check-config`, `slipgate doctor` and the start.
 *
 *   SG_PREFLIGHT_NET    every route's server and listen address resolves,
 *                       every listen address (held until all are bound: two
 *                       routes cannot share a port) and `http` can be bound
 *                       now; a port in use names its holder when /proc tells.
 *   SG_PREFLIGHT_STATS  the stats file (--stats, else stats_file) can be written.
 *   SG_PREFLIGHT_FILES  every recording
 *                       directory (`record`, --record, a record filter's
 *                       `directory`) is a directory, or is missing with a
 *                       parent the recorder can create it in, and can be
 *                       written; every textlog/pcap/inspect output file can
 *                       be written or created in an existing, writable
 *                       directory; signing keys are readable regular files
 *                       only their owner can read; the anonymize key can be
 *                       read, or made.
 *
 * Each finding goes to `say` with its verdict and where it was configured
 * (file, line and column; line 0 for the command line).  Nothing is
 * created or changed: a probe file made to test a directory is removed.
 */
#ifndef SG_PROXY_PREFLIGHT_H
#define SG_PROXY_PREFLIGHT_H

#include "proxy/conf.h"

#include <stdint.h>

enum sg_preflight_verdict { SG_PREFLIGHT_OK, SG_PREFLIGHT_WARN, SG_PREFLIGHT_FAIL };

enum {
    SG_PREFLIGHT_NET = 1,
    SG_PREFLIGHT_FILES = 2,
    SG_PREFLIGHT_STATS = 4, /* the stats file (the start checks it on its own) */
    SG_PREFLIGHT_ALL = 7,
};

/* `file` is the configuration file, or an origin such as "command line" or "--stats". */
typedef void (*sg_preflight_say)(void *ctx, enum sg_preflight_verdict v, const char *file,
                                 int line, int col, const char *text);

struct sg_preflight_opts {
    unsigned what;       /* SG_PREFLIGHT_NET | SG_PREFLIGHT_FILES | SG_PREFLIGHT_STATS */
    const char *stats;   /* --stats FILE, checked instead of stats_file; or NULL */
    int64_t min_free;    /* warn when a recording directory has less (and under 5 %); 0: no */
};

/* Run the checks; returns how many failed (out of memory is a failure too, told through `say`). */
int sg_preflight(const struct sg_conf *conf, const struct sg_preflight_opts *opts,
                 sg_preflight_say say, void *ctx);

#endif
