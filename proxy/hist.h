/*
 * A fixed log-bucket histogram of durations (nanoseconds), for the relay's
 * residence times and loop turns.  Each loop keeps its own (no lock on the
 * datagram path); a reader sums them with sg_hist_merge while the loops are
 * paused (stats.c, metrics.c).
 *
 * Bucket i counts the values at most sg_hist_edges[i] and above the edge
 * before it; the edges run from 1 us to 100 ms, ten per decade at 1, 1.25,
 * 1.6, 2, 2.5, 3.2, 4, 5, 6.4 and 8 (each at most 1.28 x the one below);
 * the last bucket counts what is above 100 ms.  Percentiles are given as
 * the upper edge of the bucket they fall in (never above the largest value
 * seen), so they overstate by at most one bucket's width.
 */
#ifndef SG_PROXY_HIST_H
#define SG_PROXY_HIST_H

#include <stdint.h>

#define SG_HIST_EDGES   51 /* 1 us .. 100 ms */
#define SG_HIST_BUCKETS (SG_HIST_EDGES + 1)

extern const uint32_t sg_hist_edges[SG_HIST_EDGES]; /* nanoseconds, ascending */

struct sg_hist {
    uint64_t b[SG_HIST_BUCKETS];
    uint64_t count, sum_ns, max_ns;
};

/*
 * The bucket of `ns`, without a search: the value's octave [2^e, 2^(e+1))
 * and the two bits below its leading one name a cell a quarter octave wide
 * (at most 1.25 x from its start to its end), and the edges are at least
 * 1.25 x apart, so no cell holds more than one edge: sg_hist_cell gives the
 * bucket of the cell's start, and one comparison with that bucket's edge
 * says whether `ns` lies above it.  Values of 2^27 ns and more share the
 * last cell (above 100 ms); setting bit 2 changes neither the octave nor
 * the cell of a value of 32 ns or more, and every smaller one is in
 * bucket 0 either way.
 */
#define SG_HIST_CELLS 108 /* 27 octaves, 4 cells each */
extern const uint8_t sg_hist_cell[SG_HIST_CELLS];
extern const uint64_t sg_hist_bound[SG_HIST_BUCKETS]; /* sg_hist_edges, then UINT64_MAX */

static inline unsigned sg_hist_bucket(uint64_t ns)
{
    uint64_t x = ns | 4;
    unsigned z = (unsigned)__builtin_clzll(x);
    /* 4 * (63 - z) + the two bits below the leading one: (x << z) >> 61 is 4..7 */
    unsigned c = 248u - 4u * z + (unsigned)((x << z) >> 61);
    unsigned t = sg_hist_cell[c < SG_HIST_CELLS - 1 ? c : SG_HIST_CELLS - 1];

    return t + (ns > sg_hist_bound[t]);
}

static inline void sg_hist_add(struct sg_hist *h, uint64_t ns)
{
    h->b[sg_hist_bucket(ns)]++;
    h->count++;
    h->sum_ns += ns;
    if (ns > h->max_ns)
        h->max_ns = ns;
}

/* Add `from`'s counts to `to`. */
void sg_hist_merge(struct sg_hist *to, const struct sg_hist *from);

/* The `q`-quantile (0 < q <= 1) in nanoseconds: the upper edge of the bucket
 * that holds it, or the largest value seen when that is lower (or the value
 * is above the last edge); 0 when the histogram is empty. */
uint64_t sg_hist_quantile(const struct sg_hist *h, double q);

/* Prometheus' `le` bounds: the edges at 1, 2 and 5 of each decade
 * (sg_hist_edges[sg_hist_prom[k]]), SG_HIST_PROM of them. */
#define SG_HIST_PROM 16
extern const uint8_t sg_hist_prom[SG_HIST_PROM];

/* The count of values at most sg_hist_edges[edge]. */
uint64_t sg_hist_below(const struct sg_hist *h, unsigned edge);

#endif
