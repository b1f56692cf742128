/*
 * Latency histogram: log-linear buckets over nanoseconds.
 *
 *   value < 32                 bucket = value (exact)
 *   2^e <= value < 2^(e+1)     bucket = 32 + 32 (e - 5) + the 5 bits after the top one
 *
 * so a bucket is at most 1/32 of its value wide; quantiles report the middle
 * of their bucket.  Values beyond 2^40 ns (18 minutes) land in the last one.
 */
#include "tests/bench/bench.h"

#include <string.h>

#define SUB_BITS 5
#define SUB      (1u << SUB_BITS)
#define MAX_EXP  40

static unsigned bucket_of(uint64_t v)
{
    unsigned e;

    if (v >= (UINT64_C(1) << MAX_EXP))
        v = (UINT64_C(1) << MAX_EXP) - 1;
    if (v < SUB)
        return (unsigned)v;
    e = 63u - (unsigned)__builtin_clzll(v);
    return SUB + SUB * (e - SUB_BITS) + (unsigned)((v >> (e - SUB_BITS)) & (SUB - 1));
}

/* The middle of bucket `i`, in nanoseconds. */
static double bucket_mid(unsigned i)
{
    unsigned e, m;
    uint64_t low, width;

    if (i < SUB)
        return (double)i;
    e = (i - SUB) / SUB + SUB_BITS;
    m = (i - SUB) % SUB + SUB;
    low = (uint64_t)m << (e - SUB_BITS);
    width = UINT64_C(1) << (e - SUB_BITS);
    return (double)low + (double)width / 2.0;
}

void sg_bench_hist_reset(struct sg_bench_hist *h)
{
    memset(h, 0, sizeof(*h));
}

void sg_bench_hist_add(struct sg_bench_hist *h, uint64_t ns)
{
    h->b[bucket_of(ns)]++;
    h->n++;
    if (ns > h->max_ns)
        h->max_ns = ns;
}

void sg_bench_hist_merge(struct sg_bench_hist *into, const struct sg_bench_hist *from)
{
    for (unsigned i = 0; i < SG_BENCH_HIST_BUCKETS; i++)
        into->b[i] += from->b[i];
    into->n += from->n;
    if (from->max_ns > into->max_ns)
        into->max_ns = from->max_ns;
}

double sg_bench_hist_quantile_us(const struct sg_bench_hist *h, double q)
{
    uint64_t rank, seen = 0;

    if (h->n == 0)
        return 0.0;
    if (q >= 1.0)
        return (double)h->max_ns / 1000.0;
    /* The smallest value with at least ceil(q n) values at or below it. */
    rank = (uint64_t)(q * (double)h->n);
    if ((double)rank < q * (double)h->n)
        rank++;
    if (rank == 0)
        rank = 1;
    for (unsigned i = 0; i < SG_BENCH_HIST_BUCKETS; i++) {
        seen += h->b[i];
        if (seen >= rank) {
            double mid = bucket_mid(i);
            /* Never report more than the largest value seen. */
            if (mid > (double)h->max_ns)
                mid = (double)h->max_ns;
            return mid / 1000.0;
        }
    }
    return (double)h->max_ns / 1000.0;
}
