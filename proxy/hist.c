/* Fixed log-bucket histograms of durations (hist.h). */
#include "proxy/hist.h"

#include <math.h>

#define DECADE(k) 1000u * k, 1250u * k, 1600u * k, 2000u * k, 2500u * k, 3200u * k, 4000u * k, \
                  5000u * k, 6400u * k, 8000u * k

const uint32_t sg_hist_edges[SG_HIST_EDGES] = {
    DECADE(1u), DECADE(10u), DECADE(100u), DECADE(1000u), DECADE(10000u), 100000000u,
};

#define DECADE64(k) 1000ull * k, 1250ull * k, 1600ull * k, 2000ull * k, 2500ull * k, \
                    3200ull * k, 4000ull * k, 5000ull * k, 6400ull * k, 8000ull * k

const uint64_t sg_hist_bound[SG_HIST_BUCKETS] = {
    DECADE64(1u), DECADE64(10u), DECADE64(100u), DECADE64(1000u), DECADE64(10000u), 100000000u,
    UINT64_MAX,
};

/* The bucket of each cell's first value (hist.h: sg_hist_bucket); the
 * unit test checks every value's bucket against a search of the edges. */
/* clang-format off */
const uint8_t sg_hist_cell[SG_HIST_CELLS] = {
     0,  0,  0,  0,    0,  0,  0,  0,    0,  0,  0,  0, /* 2^0.. */
     0,  0,  0,  0,    0,  0,  0,  0,    0,  0,  0,  0, /* 2^3.. */
     0,  0,  0,  0,    0,  0,  0,  0,    0,  0,  0,  0, /* 2^6.. */
     0,  0,  0,  0,    1,  2,  2,  3,    4,  5,  5,  6, /* 2^9.. */
     7,  8,  8,  9,   10, 11, 11, 12,   13, 14, 14, 15, /* 2^12.. */
    16, 17, 17, 18,   19, 20, 20, 21,   22, 23, 23, 24, /* 2^15.. */
    25, 26, 26, 27,   28, 29, 29, 30,   31, 32, 32, 33, /* 2^18.. */
    34, 35, 35, 36,   37, 38, 38, 39,   40, 41, 42, 42, /* 2^21.. */
    43, 44, 45, 45,   46, 47, 48, 48,   49, 50, 51, 51, /* 2^24.. */
};
/* clang-format on */

const uint8_t sg_hist_prom[SG_HIST_PROM] = {0,  3,  7,  10, 13, 17, 20, 23,
                                            27, 30, 33, 37, 40, 43, 47, 50};

void sg_hist_merge(struct sg_hist *to, const struct sg_hist *from)
{
    for (unsigned i = 0; i < SG_HIST_BUCKETS; i++)
        to->b[i] += from->b[i];
    to->count += from->count;
    to->sum_ns += from->sum_ns;
    if (from->max_ns > to->max_ns)
        to->max_ns = from->max_ns;
}

uint64_t sg_hist_quantile(const struct sg_hist *h, double q)
{
    uint64_t rank, seen = 0;

    if (h->count == 0)
        return 0;
    if (!(q > 0))
        q = 0;
    rank = (uint64_t)ceil(q * (double)h->count);
    if (rank < 1)
        rank = 1;
    if (rank > h->count)
        rank = h->count;
    for (unsigned i = 0; i < SG_HIST_EDGES; i++) {
        seen += h->b[i];
        if (seen >= rank)
            return sg_hist_edges[i] < h->max_ns ? sg_hist_edges[i] : h->max_ns;
    }
    return h->max_ns;
}

uint64_t sg_hist_below(const struct sg_hist *h, unsigned edge)
{
    uint64_t n = 0;

    for (unsigned i = 0; i <= edge && i < SG_HIST_EDGES; i++)
        n += h->b[i];
    return n;
}
