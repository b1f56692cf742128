/*
 * The proxy's side of filters: the registry of built-in filters, plugins,
 * the `filter NAME [LABEL] { ... }` blocks of a route, and the chain that
 * runs them over a session's frames.  Filters themselves see only
 * filters/filter.h.
 */
#ifndef SG_FILTERS_CHAIN_H
#define SG_FILTERS_CHAIN_H

#include "filters/filter.h"

#include <stdalign.h>
#include <stddef.h>

/* ---- registry and plugins ---- */

/* Every built-in filter, NULL-terminated (filters/registry.c). */
extern const struct sg_filter_impl *const sg_builtin_filters[];

/* A loaded plugin, shared by reference count between configurations. */
struct sg_plugin {
    int refs;
    void *handle;
    char *path;
    const struct sg_filter_plugin *table;
    struct sg_plugin *next; /* in a configuration's list */
};

/*
 * Load the plugin at `path` (dlopen; a path without '/' is taken relative
 * to the working directory, not searched).  Returns 0 and a plugin with one
 * reference, or a negative error with the reason in `err` (cannot open,
 * no entry point, ABI mismatch naming both versions, a filter name taken).
 */
int sg_plugin_load(const char *path, struct sg_plugin **out, char *err, size_t errlen);
void sg_plugin_ref(struct sg_plugin *p);
void sg_plugin_unref(struct sg_plugin *p); /* accepts NULL */

/* The filter called `name`: a built-in, or one of `plugins` (a list); NULL if none.
 * `*owner` gets the plugin holding it, or NULL for a built-in. */
const struct sg_filter_impl *sg_filter_find(struct sg_plugin *plugins, const char *name,
                                            struct sg_plugin **owner);

/* ---- configuration ---- */

/* One `filter NAME [LABEL] { ... }` block. */
struct sg_filter_conf {
    const struct sg_filter_impl *impl;
    struct sg_plugin *plugin; /* a reference, or NULL */
    char *label;              /* LABEL, or the filter's name */
    char *file;               /* where it was configured ("command line" when not a file) */
    int line;
    bool checked; /* conf_check succeeded (conf_free is then due) */
    struct sg_conf_section section;
    const struct sg_conf_directive *tables[2];
    struct sg_filter_conf *next;
    alignas(max_align_t) unsigned char conf[]; /* impl->conf_size bytes */
};

/*
 * The hooks a filter's table has past `flush` (figures, finish), or NULL
 * when `fc` is a plugin's: a plugin built on an older filter.h of the same
 * SG_FILTER_ABI has a table that ends at `flush`, so nothing past it is read
 * of a plugin's table (built-in filters only, until the ABI is bumped).
 */
static inline const struct sg_filter_impl *sg_filter_conf_tail(const struct sg_filter_conf *fc)
{
    return fc->plugin ? NULL : fc->impl;
}

/* A route's filter blocks in order, shared by reference count. */
struct sg_filter_list {
    int refs;
    int count;
    struct sg_filter_conf *head;
};

/*
 * Config glue for a route's `filter` directive: append a block for filter
 * `name` (found among built-ins and `plugins`) to `*list` (created on first
 * use).  Returns the object the block's directives fill, or NULL after
 * reporting an unknown filter (with a suggestion) or out of memory.
 */
void *sg_filter_conf_open(struct sg_filter_list **list, struct sg_plugin *plugins,
                          const struct sg_conf_arg *args, int nargs, struct sg_conf_diag *diag,
                          const char *file);
/* The directive section of a block `sg_filter_conf_open` returned. */
const struct sg_conf_section *sg_filter_conf_section(void *obj);
/* Append a filter with default settings (for --record and the like); NULL on ENOMEM. */
struct sg_filter_conf *sg_filter_conf_append(struct sg_filter_list **list,
                                             const struct sg_filter_impl *impl,
                                             struct sg_plugin *plugin, const char *label,
                                             const char *file, int line);
/* Run every block's conf_check; report problems as "FILE:LINE: error: filter 'X': ...". */
int sg_filter_list_check(struct sg_filter_list *list, struct sg_conf_diag *diag);
/* Do two lists configure the same filters with the same settings? */
bool sg_filter_list_equal(const struct sg_filter_list *a, const struct sg_filter_list *b);
void sg_filter_list_ref(struct sg_filter_list *list);   /* accepts NULL */
void sg_filter_list_unref(struct sg_filter_list *list); /* accepts NULL */

/* ---- running ---- */

struct sg_filter_counters {
    uint64_t seen, passed, dropped, changed, injected, errors;
};

/* Add `from` to `to` (one filter's counters over several worker loops). */
static inline void sg_filter_counters_add(struct sg_filter_counters *to,
                                          const struct sg_filter_counters *from)
{
    to->seen += from->seen;
    to->passed += from->passed;
    to->dropped += from->dropped;
    to->changed += from->changed;
    to->injected += from->injected;
    to->errors += from->errors;
}

struct sg_chain_filter {
    const struct sg_filter_conf *fc;
    void *route_state;
    struct sg_filter_counters counters;
};

/* How the proxy logs for filters. */
typedef void (*sg_chain_log_fn)(void *ctx, enum sg_filter_log_level level, const char *filter,
                                uint64_t session, const char *text);

/* A route's running filters. */
struct sg_chain {
    struct sg_filter_list *list; /* a reference */
    sg_chain_log_fn log;
    void *log_ctx;
    bool has_datagram_taps;
    bool only_taps; /* every filter only watches (`tap`): none can change, drop or inject */
    int n;
    struct sg_chain_filter f[];
};

/* Create every filter of `list` for one route.  Returns 0 (an empty list gives
 * *out NULL), or a negative error with "filter 'X' (FILE:LINE): why" in `err`. */
int sg_chain_create(struct sg_filter_list *list, sg_chain_log_fn log, void *log_ctx,
                    struct sg_chain **out, char *err, size_t errlen);
void sg_chain_destroy(struct sg_chain *chain); /* accepts NULL */

/* The proxy's side of one frame's journey through the chain. */
struct sg_filter_proxy {
    struct sg_chain *chain;
    int index; /* the filter being called */
    const struct sg_codec *codec;
    void *codec_state;
    uint64_t session_id;
    bool changed;      /* a filter changed or injected something */
    unsigned injected; /* messages injected during this frame */
};

/* What the chain decided. */
struct sg_chain_result {
    bool drop;
    bool changed;
    int drop_filter; /* index of the filter that dropped it, or -1 */
    uint32_t delay_ms;
    uint8_t copies;
};

/*
 * Run the non-tap filters over one frame.  `slots` has chain->n entries
 * (per session, zeroed at start).  `call` has session, frame, data, len,
 * now_ms filled; the rest is the chain's.
 */
void sg_chain_run(struct sg_chain *chain, void **slots, struct sg_filter_call *call,
                  struct sg_filter_proxy *proxy, struct sg_chain_result *res);
/* Run the taps over the frame as it went out (or was dropped). */
void sg_chain_taps(struct sg_chain *chain, void **slots, struct sg_filter_call *call,
                   struct sg_filter_proxy *proxy, const struct sg_chain_result *res);
/* Datagram taps: one datagram on one leg. */
void sg_chain_datagram(struct sg_chain *chain, void **slots, struct sg_filter_call *call,
                       enum sg_leg leg, const uint8_t *data, size_t len,
                       const struct sockaddr *from, const struct sockaddr *to);
/* A session ended: session_end for each filter with a slot; zeroes the slots. */
void sg_chain_session_end(struct sg_chain *chain, void **slots,
                          const struct sg_filter_session *session);
/* Flush every filter's buffered output. */
void sg_chain_flush(struct sg_chain *chain);

#endif
