/*
 * A plugin built for another filter ABI (SG_FILTER_ABI + 1): slipgate must
 * refuse it at start-up, naming the file and both versions, without ever
 * calling its filters.
 */
#include "filters/filter.h"

static int on_frame(struct sg_filter_call *call)
{
    (void)call;
    return SG_FILTER_DROP;
}

static const struct sg_filter_impl future = {
    .name = "future_filter",
    .description = "never loaded",
    .on_frame = on_frame,
};

static const struct sg_filter_impl *const filters[] = {&future, NULL};

static const struct sg_filter_plugin plugin = {
    .abi = SG_FILTER_ABI + 1,
    .name = "wrong_abi",
    .filters = filters,
};

const struct sg_filter_plugin *slipgate_filter_plugin(void);

const struct sg_filter_plugin *slipgate_filter_plugin(void)
{
    return &plugin;
}
