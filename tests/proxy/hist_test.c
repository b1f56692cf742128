/* proxy/hist.c: the residence and loop-turn histograms (edges, merge, percentiles). */
#include "proxy/hist.h"
#include "tests/unit.h"

/* The edges ascend from 1 us to 100 ms, each at most 1.28 x the one below;
 * a value goes to the first edge at or above it. */
static void case_edges(void)
{
    CHECK_EQ(sg_hist_edges[0], 1000);
    CHECK_EQ(sg_hist_edges[SG_HIST_EDGES - 1], 100000000);
    for (unsigned i = 1; i < SG_HIST_EDGES; i++) {
        CHECKF(sg_hist_edges[i] > sg_hist_edges[i - 1], "edge %u", i);
        CHECKF((uint64_t)sg_hist_edges[i] * 100 <= (uint64_t)sg_hist_edges[i - 1] * 128,
               "edge %u: %u after %u", i, sg_hist_edges[i], sg_hist_edges[i - 1]);
    }
    CHECK_EQ(sg_hist_bucket(0), 0);
    CHECK_EQ(sg_hist_bucket(1000), 0);
    CHECK_EQ(sg_hist_bucket(1001), 1);
    CHECK_EQ(sg_hist_bucket(1250), 1);
    CHECK_EQ(sg_hist_bucket(100000000), SG_HIST_EDGES - 1);
    CHECK_EQ(sg_hist_bucket(100000001), SG_HIST_EDGES);
    CHECK_EQ(sg_hist_bucket(UINT64_MAX), SG_HIST_EDGES);
    for (unsigned i = 0; i < SG_HIST_EDGES; i++) {
        CHECKF(sg_hist_bucket(sg_hist_edges[i]) == i, "edge %u", i);
        CHECKF(sg_hist_bucket(sg_hist_edges[i] + 1ull) == i + 1, "above edge %u", i);
    }
    /* the first edge at or above the value, as a plain search finds it */
    for (uint64_t v = 0; v < 300000000; v = v * 1.003 + 1) {
        unsigned want = 0;

        while (want < SG_HIST_EDGES && v > sg_hist_edges[want])
            want++;
        CHECKF(sg_hist_bucket(v) == want, "%llu: bucket %u, expected %u", (unsigned long long)v,
               sg_hist_bucket(v), want);
    }
    /* around the start of every quarter-octave cell sg_hist_bucket indexes by, and the table's bounds */
    CHECK_EQ(sg_hist_bound[SG_HIST_EDGES], UINT64_MAX);
    for (unsigned i = 0; i < SG_HIST_EDGES; i++)
        CHECKF(sg_hist_bound[i] == sg_hist_edges[i], "bound %u", i);
    for (unsigned e = 2; e < 64; e++)
        for (uint64_t m = 0; m < 4; m++) {
            uint64_t start = (1ull << e) + m * (1ull << (e - 2));

            for (uint64_t v = start - 1; v <= start + 1 && v >= start - 1; v++) {
                unsigned want = 0;

                while (want < SG_HIST_EDGES && v > sg_hist_edges[want])
                    want++;
                CHECKF(sg_hist_bucket(v) == want, "%llu: bucket %u, expected %u",
                       (unsigned long long)v, sg_hist_bucket(v), want);
            }
        }
    /* monotonic: a larger value never goes to a lower bucket */
    for (uint64_t v = 0, last = 0; v < 200000000; v = v * 1.01 + 1) {
        unsigned b = sg_hist_bucket(v);
        CHECKF(b >= last, "%llu", (unsigned long long)v);
        last = b;
    }
    /* Prometheus' bounds: 1, 2 and 5 of each decade */
    for (unsigned k = 0; k < SG_HIST_PROM; k++) {
        uint32_t e = sg_hist_edges[sg_hist_prom[k]];
        uint32_t want = (k % 3 == 0 ? 1 : k % 3 == 1 ? 2 : 5) * 1000;

        for (unsigned d = 0; d < k / 3; d++)
            want *= 10;
        CHECKF(e == want, "le %u: %u, expected %u", k, e, want);
    }
}

static void case_add(void)
{
    struct sg_hist h = {{0}};
    uint64_t total = 0;

    for (uint64_t v = 500; v <= 300000000; v *= 3) {
        sg_hist_add(&h, v);
        total += v;
    }
    CHECK_EQ(h.count, 13);
    CHECK_EQ(h.sum_ns, total);
    CHECK_EQ(h.max_ns, 500ull * 531441); /* 3^12 */
    {
        uint64_t n = 0;
        for (unsigned i = 0; i < SG_HIST_BUCKETS; i++)
            n += h.b[i];
        CHECK_EQ(n, h.count);
    }
    CHECK_EQ(h.b[0], 1);             /* 500 ns */
    CHECK_EQ(h.b[SG_HIST_EDGES], 1); /* 265.7 ms */
    /* cumulative counts never go down, and reach the count at the last edge less the overflow */
    for (unsigned i = 1; i < SG_HIST_EDGES; i++)
        CHECK(sg_hist_below(&h, i) >= sg_hist_below(&h, i - 1));
    CHECK_EQ(sg_hist_below(&h, SG_HIST_EDGES - 1), 12);
}

static void case_merge(void)
{
    struct sg_hist a = {{0}}, b = {{0}}, both = {{0}}, m = {{0}};

    for (uint64_t v = 1; v < 50000000; v = v * 2 + 7) {
        sg_hist_add(&a, v);
        sg_hist_add(&both, v);
        sg_hist_add(&b, v * 3);
        sg_hist_add(&both, v * 3);
    }
    sg_hist_merge(&m, &a);
    sg_hist_merge(&m, &b);
    CHECK(memcmp(&m, &both, sizeof(m)) == 0);
    sg_hist_merge(&m, &(struct sg_hist){{0}});
    CHECK(memcmp(&m, &both, sizeof(m)) == 0);
}

static void case_quantile(void)
{
    struct sg_hist h = {{0}};

    CHECK_EQ(sg_hist_quantile(&h, 0.5), 0);
    /* 1000 values: 1..1000 us */
    for (uint64_t us = 1; us <= 1000; us++)
        sg_hist_add(&h, us * 1000);
    /* p50 = 500 us: the bucket (400, 500] us, given as its upper edge */
    CHECK_EQ(sg_hist_quantile(&h, 0.5), 500000);
    /* p99 = 990 us: (800 us, 1 ms] */
    CHECK_EQ(sg_hist_quantile(&h, 0.99), 1000000);
    /* p99.9 and p100: the max, 1 ms */
    CHECK_EQ(sg_hist_quantile(&h, 0.999), 1000000);
    CHECK_EQ(sg_hist_quantile(&h, 1.0), 1000000);
    /* the edge is capped by the largest value seen */
    sg_hist_add(&h, 1100000);
    CHECK_EQ(sg_hist_quantile(&h, 1.0), 1100000);
    /* a quantile never goes down as q goes up, and never exceeds the max */
    {
        uint64_t last = 0;
        for (double q = 0.001; q <= 1.0; q += 0.001) {
            uint64_t v = sg_hist_quantile(&h, q);
            CHECK(v >= last && v <= h.max_ns);
            last = v;
        }
    }
    /* one value above the last edge: the max */
    {
        struct sg_hist o = {{0}};
        sg_hist_add(&o, 300000000);
        CHECK_EQ(sg_hist_quantile(&o, 0.5), 300000000);
    }
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"edges", case_edges},
        {"add", case_add},
        {"merge", case_merge},
        {"quantile", case_quantile},
    };
    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
