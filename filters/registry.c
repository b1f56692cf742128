/* The built-in filters, in the order `slipgate filters` lists them. */
#include "filters/chain.h"

extern const struct sg_filter_impl sg_builtin_inspect, sg_builtin_textlog, sg_builtin_guard,
    sg_builtin_rewrite, sg_builtin_drop, sg_builtin_inject, sg_builtin_netem, sg_builtin_ratelimit,
    sg_builtin_record, sg_builtin_pcap;

const struct sg_filter_impl *const sg_builtin_filters[] = {
    &sg_builtin_inspect, &sg_builtin_textlog, &sg_builtin_guard,     &sg_builtin_rewrite,
    &sg_builtin_drop,    &sg_builtin_inject,  &sg_builtin_netem,     &sg_builtin_ratelimit,
    &sg_builtin_record,  &sg_builtin_pcap,    NULL,
};
