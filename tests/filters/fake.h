/*
 * Test support for filters: a fake codec whose frames the test fills in,
 * and a one-filter chain to run a filter's on_frame against them, with the
 * same sg_filter_* helpers the proxy gives (filters/chain.c).
 */
#ifndef SG_TESTS_FILTERS_FAKE_H
#define SG_TESTS_FILTERS_FAKE_H

#include "filters/chain.h"

#include <stdbool.h>

#define FAKE_MAX_MSGS 16

struct fake_injection {
    enum sg_dir dir;
    enum sg_msg_kind kind;
    char text[256];
};

/* The codec state: the frame the test built, and what filters did to it. */
struct fake_codec {
    struct sg_frame frame;
    struct sg_msg msgs[FAKE_MAX_MSGS];
    char texts[FAKE_MAX_MSGS][256];
    int set_text_calls, drop_calls;
    struct fake_injection inj[16];
    int ninj;
};

extern const struct sg_codec fake_codec_impl;

/* Reset the frame: direction and kind, no messages. */
void fake_frame(struct fake_codec *fc, enum sg_dir dir, enum sg_frame_kind kind);
/* Append a message; returns its index. */
unsigned fake_msg(struct fake_codec *fc, enum sg_msg_kind kind, const char *text);

/* A chain of one filter configured from `conf_text` (the inside of its block). */
struct fake_chain {
    struct sg_filter_list *list;
    struct sg_chain *chain;
    void *slots[1];
    struct sg_filter_session session;
    struct fake_codec codec;
    char log[4096]; /* what the filter logged, lines joined */
};

/*
 * Parse "filter NAME { CONF_TEXT }" in a route and create the chain.
 * Returns 0, or a negative error with the diagnostics printed to stderr
 * (or stored in `err` when not NULL).
 */
int fake_chain_open(struct fake_chain *fcn, const char *name, const char *conf_text, char *err,
                    size_t errlen);
/*
 * Does `conf_text` make filter `name` refuse to start with an error that
 * contains `want`?  Prints what happened when not (for CHECK).
 */
bool fake_config_refused(const char *name, const char *conf_text, const char *want);
/* Run the filter over the fake codec's current frame; returns the verdict the chain reached
 * (SG_FILTER_DROP, SG_FILTER_CHANGED or SG_FILTER_PASS). */
int fake_chain_run(struct fake_chain *fcn, uint64_t now_ms, struct sg_chain_result *res);
/* End the session (session_end) and free everything. */
void fake_chain_close(struct fake_chain *fcn);

#endif
