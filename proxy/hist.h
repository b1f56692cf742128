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
 * The bucket of `ns`.  Each octave [2^e, 2^(e+1)) of the edges' range
 * starts at bucket 3e - 29 (the edges are ten per decade, about three per
 * octave), and at most three steps up find the first edge at or above it:
 * no search over the whole table on the datagram path.
 */
static inline unsigned sg_hist_bucket(uint64_t ns)
{
    unsigned e, i;

    if (ns > sg_hist_edges[SG_HIST_EDGES - 1])
        return SG_HIST_EDGES;
    e = ns ? 63u - (unsigned)__builtin_clzll(ns) : 0;
    i = e < 10 ? 0 : 3 * e - 29;
    if (i > SG_HIST_EDGES - 1) /* cannot be (ns is at most the last edge): for the compiler */
        i = SG_HIST_EDGES - 1;
    while (i < SG_HIST_EDGES - 1 && ns > sg_hist_edges[i])
        i++;
    return i;
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
