/*
 * A plugin's table as slipgate reads it: a plugin built against an older
 * filter.h of the same SG_FILTER_ABI has a struct sg_filter_impl that ends
 * at `flush`, before the hooks added since (`figures`, `finish`), so what
 * slipgate reads past `flush` it reads through sg_filter_conf_tail
 * (filters/chain.h), which gives NULL for a plugin's filter.  The plugin
 * (plugin/abi1_plugin.c) puts its table's end before an unreadable page: a
 * read past it faults.  Usage: plugin_abi_test CASE PLUGIN_DIR
 */
#include "filters/chain.h"
#include "tests/unit.h"

#include <stdio.h>
#include <string.h>

static const char *plugin_dir;

static void case_abi1_table(void)
{
    char path[4096], err[512] = "";
    struct sg_plugin *p = NULL, *owner = NULL;
    struct sg_filter_list *list = NULL;
    struct sg_filter_conf *fc;
    const struct sg_filter_impl *f, *tail;

    snprintf(path, sizeof(path), "%s/abi1_plugin.so", plugin_dir);
    CHECKF(sg_plugin_load(path, &p, err, sizeof(err)) == 0, "%s", err);
    if (!p)
        return;
    f = sg_filter_find(p, "abi1_filter", &owner);
    CHECK(f != NULL && owner == p);
    if (f) {
        CHECK(strcmp(f->description, "a table of ABI 1's length") == 0);
        fc = sg_filter_conf_append(&list, f, p, NULL, "test.conf", 1);
        CHECK(fc != NULL);
        if (fc) {
            /* As session.c asks at a session's end and for the figures. */
            tail = sg_filter_conf_tail(fc);
            CHECK(tail == NULL || (tail->figures == NULL && tail->finish == NULL));
            CHECK(tail == NULL);
        }
    }
    sg_filter_list_unref(list);
    sg_plugin_unref(p);
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {{"abi1_table", case_abi1_table}};

    plugin_dir = argc > 2 ? argv[2] : ".";
    return unit_main(argc > 2 ? 2 : argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
