/*
 * An example slipgate filter plugin: `example_counter` counts the frames
 * and messages of each session (by direction) and reports them when the
 * session ends.  It builds against the installed headers alone:
 *
 *     cc -shared -fPIC -I PREFIX/include/slipgate -o example_plugin.so example_plugin.c
 *
 * or, where slipgate is installed (meson install, the slipgate-dev package):
 *
 *     cc $(pkg-config --cflags slipgate-filter) -shared -fPIC -o example_plugin.so example_plugin.c
 *
 * and is loaded with `plugin PATH` at the top of the config file:
 *
 *     plugin ./example_plugin.so
 *     route main {
 *         server 127.0.0.1:27960
 *         filter example_counter { every 500 }
 *     }
 *
 * `every N` (default 0: never) also logs a running count every N frames of
 * a session, through sg_filter_log.  The end-of-session summary goes to
 * standard error as one line, because filter.h gives session_end() no way
 * to log through the proxy (see doc/filters/plugins.md).
 */
#include "filters/filter.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

struct counter_conf {
    int64_t every;
};

struct counter_slot {
    uint64_t frames[2], messages[2], raw;
};

static int on_frame(struct sg_filter_call *call)
{
    const struct counter_conf *c = call->conf;
    struct counter_slot *s = *call->slot;
    const struct sg_frame *f = call->frame;
    uint64_t total;
    int d;

    /* The first frame of a session makes its slot. */
    if (!s) {
        s = calloc(1, sizeof(*s));
        if (!s)
            return -ENOMEM;
        *call->slot = s;
    }
    d = f->dir == SG_DIR_S2C;
    s->frames[d]++;
    s->messages[d] += f->nmsgs;
    s->raw += f->kind == SG_FRAME_RAW;
    total = s->frames[0] + s->frames[1];
    if (c->every > 0 && total % (uint64_t)c->every == 0)
        sg_filter_log(call, SG_FILTER_LOG_INFO, "%llu frames so far", (unsigned long long)total);
    return SG_FILTER_PASS;
}

static void session_end(void *route_state, const struct sg_filter_session *session, void *slot)
{
    struct counter_slot *s = slot;

    (void)route_state;
    fprintf(stderr,
            "example_counter: session %llu (%s): to server %llu frames %llu messages, to client "
            "%llu frames %llu messages, %llu undecoded\n",
            (unsigned long long)session->id, session->client ? session->client : "?",
            (unsigned long long)s->frames[0], (unsigned long long)s->messages[0],
            (unsigned long long)s->frames[1], (unsigned long long)s->messages[1],
            (unsigned long long)s->raw);
    free(s);
}

static const struct sg_conf_directive directives[] = {
    {.name = "every",
     .type = SG_CONF_INT,
     .offset = offsetof(struct counter_conf, every),
     .min = 0,
     .max = 1000000000,
     .argname = "N",
     .help = "also log a running count every N frames of a session (default 0: never)"},
    {NULL},
};

static const struct sg_filter_impl counter = {
    .name = "example_counter",
    .description = "count each session's frames and messages; report them at its end",
    .example = "filter example_counter {\n    every 500\n}\n",
    .conf_size = sizeof(struct counter_conf),
    .directives = directives,
    .on_frame = on_frame,
    .session_end = session_end,
};

static const struct sg_filter_impl *const filters[] = {&counter, NULL};

static const struct sg_filter_plugin plugin = {
    .abi = SG_FILTER_ABI,
    .name = "example",
    .filters = filters,
};

const struct sg_filter_plugin *slipgate_filter_plugin(void);

const struct sg_filter_plugin *slipgate_filter_plugin(void)
{
    return &plugin;
}
