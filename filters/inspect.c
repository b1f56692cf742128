/*
 * The 'inspect' filter: placeholder until it is written (passes every frame).
 */
#include "filters/filter.h"

static int on_frame(struct sg_filter_call *call)
{
    (void)call;
    return SG_FILTER_PASS;
}

const struct sg_filter_impl sg_builtin_inspect = {
    .name = "inspect",
    .description = "(not written yet)",
    .on_frame = on_frame,
};
