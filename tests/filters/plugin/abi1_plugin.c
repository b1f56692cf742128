/*
 * A plugin as one built against ABI 1's filter.h before `figures` and
 * `finish` were added at the end of struct sg_filter_impl: its table ends
 * where `figures` begins, and the page after it is not readable.  slipgate
 * must read the table only up to that end (tests/filters/plugin_test.c).
 */
#include "filters/filter.h"

#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int on_frame(struct sg_filter_call *call)
{
    (void)call;
    return SG_FILTER_PASS;
}

static const struct sg_filter_impl *filters[2];

static const struct sg_filter_plugin plugin = {
    .abi = SG_FILTER_ABI,
    .name = "abi1",
    .filters = filters,
};

const struct sg_filter_plugin *slipgate_filter_plugin(void);

const struct sg_filter_plugin *slipgate_filter_plugin(void)
{
    static const struct sg_filter_impl full = {
        .name = "abi1_filter",
        .description = "a table of ABI 1's length",
        .on_frame = on_frame,
    };
    long page = sysconf(_SC_PAGESIZE);
    size_t old_len = offsetof(struct sg_filter_impl, figures);
    unsigned char *mem;

    if (filters[0])
        return &plugin;
    mem = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return NULL;
    /* The old table's bytes end at the page's end; what follows faults. */
    memcpy(mem + page - old_len, &full, old_len);
    if (mprotect(mem + page, (size_t)page, PROT_NONE) < 0)
        return NULL;
    filters[0] = (const struct sg_filter_impl *)(void *)(mem + page - old_len);
    return &plugin;
}
