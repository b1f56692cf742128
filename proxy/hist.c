/* Fixed log-bucket histograms of durations (hist.h). */
#include "proxy/hist.h"

#include <math.h>

#define DECADE(k) 1000u * k, 1250u * k, 1600u * k, 2000u * k, 2500u * k, 3200u * k, 4000u * k, \
                  5000u * k, 6400u * k, 8000u * k

const uint32_t sg_hist_edges[SG_HIST_EDGES] = {
    DECADE(1u), DECADE(10u), DECADE(100u), DECADE(1000u), DECADE(10000u), 100000000u,
};

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
