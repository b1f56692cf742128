/*
 * The 'drop' filter: removes messages by kind and/or by a regular
 * expression on their text, one way or both; with `whole_datagram yes` the
 * whole datagram holding such a message is dropped instead (the receiver
 * sees packet loss, DESIGN.md rule 4).
 *
 * Only whole messages (SG_FRAME_MESSAGE) are looked at.  Resends of a
 * reliable message (`repeat`) are skipped: the codec gives a resend the
 * first verdict when the message was removed, and a resend of a datagram
 * dropped whole gets through, as after real loss.
 */
#include "filters/filter.h"
#include "filters/text.h"

#include "protocols/error.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

struct drop_conf {
    struct sg_conf_list kinds, match;
    int direction;
    bool whole_datagram, icase;
    /* from conf_check */
    uint32_t mask;
    struct sg_filter__regexes patterns;
};

struct drop_slot {
    bool warned;
};

static void conf_init(void *p)
{
    struct drop_conf *c = p;
    c->direction = SG_FILTER_DIR_BOTH;
}

static void conf_free(void *p)
{
    struct drop_conf *c = p;
    sg_filter__regexes_free(&c->patterns);
}

static int conf_check(void *p, char *err, size_t errlen)
{
    struct drop_conf *c = p;
    int rc;

    if (c->kinds.count == 0 && c->match.count == 0) {
        snprintf(err, errlen,
                 "says nothing to drop: give 'kinds KIND,...' and/or 'match REGEX' (to drop "
                 "every message, use 'kinds all')");
        return SG_E_CONFIG;
    }
    c->mask = SG_KINDS_TEXT;
    if ((rc = sg_filter__kinds_parse(&c->kinds, "kinds", &c->mask, err, errlen)) < 0)
        return rc;
    if (c->match.count && !(c->mask & SG_KINDS_TEXT)) {
        snprintf(err, errlen,
                 "'match' looks at text, but 'kinds' names only 'game' messages, "
                 "which have none");
        return SG_E_CONFIG;
    }
    return sg_filter__regexes_compile(&c->patterns, &c->match, "match", c->icase ? REG_ICASE : 0,
                                      err, errlen);
}

static bool wanted(const struct drop_conf *c, const struct sg_msg *m)
{
    if (m->repeat || m->dropped || !sg_filter__kind_in(c->mask, m->kind))
        return false;
    if (c->patterns.n == 0)
        return true;
    return m->text && sg_filter__regexes_match(&c->patterns, m->text) >= 0;
}

static int on_frame(struct sg_filter_call *call)
{
    const struct drop_conf *c = call->conf;
    const struct sg_frame *f = call->frame;
    int verdict = SG_FILTER_PASS;

    if (f->kind != SG_FRAME_MESSAGE || !f->msgs || !sg_filter__dir_matches(c->direction, f->dir))
        return SG_FILTER_PASS;
    for (unsigned i = 0; i < f->nmsgs; i++) {
        const struct sg_msg *m = &f->msgs[i];
        char shown[160];
        int err;

        if (!wanted(c, m))
            continue;
        sg_filter__escape(shown, sizeof(shown), m->text ? m->text : "", m->text ? m->text_len : 0,
                          100, false);
        if (c->whole_datagram) {
            sg_filter_log(call, SG_FILTER_LOG_DEBUG, "dropped a datagram %s holding a %s \"%s\"",
                          sg_filter__dir_name(f->dir), sg_msg_kind_name(m->kind), shown);
            return SG_FILTER_DROP;
        }
        err = sg_filter_drop_msg(call, i);
        if (err < 0) {
            struct drop_slot *s = *call->slot;
            if (!s)
                s = *call->slot = calloc(1, sizeof(*s));
            if (s && !s->warned) {
                s->warned = true;
                sg_filter_log(call, SG_FILTER_LOG_WARN,
                              "cannot remove a %s (%s) alone: %s; it passes (use "
                              "'whole_datagram yes' to drop its datagram; said once per session)",
                              sg_msg_kind_name(m->kind), m->name ? m->name : "?", sg_strerror(err));
            }
            continue;
        }
        sg_filter_log(call, SG_FILTER_LOG_DEBUG, "removed a %s %s \"%s\"",
                      sg_msg_kind_name(m->kind), sg_filter__dir_name(f->dir), shown);
        verdict = SG_FILTER_CHANGED;
    }
    return verdict;
}

static void session_end(void *route_state, const struct sg_filter_session *session, void *slot)
{
    (void)route_state;
    (void)session;
    free(slot);
}

static const struct sg_conf_directive directives[] = {
    {.name = "kinds",
     .type = SG_CONF_LIST,
     .offset = offsetof(struct drop_conf, kinds),
     .min = 1,
     .max = 16,
     .argname = "KIND[,KIND...]",
     .help = "message kinds to drop (default: every text kind, when 'match' is given)"},
    {.name = "match",
     .type = SG_CONF_LIST,
     .offset = offsetof(struct drop_conf, match),
     .argname = "REGEX",
     .help = "drop messages whose text matches (POSIX extended); repeatable"},
    {.name = "direction",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct drop_conf, direction),
     .choices = sg_filter__direction_choices,
     .argname = "both|to_client|to_server",
     .help = "which way (default both)"},
    {.name = "whole_datagram",
     .type = SG_CONF_BOOL,
     .offset = offsetof(struct drop_conf, whole_datagram),
     .argname = "yes|no",
     .help = "drop the whole datagram instead of the message (default no)"},
    {.name = "icase",
     .type = SG_CONF_BOOL,
     .offset = offsetof(struct drop_conf, icase),
     .argname = "yes|no",
     .help = "match without regard to case (default no)"},
    {NULL},
};

const struct sg_filter_impl sg_builtin_drop = {
    .name = "drop",
    .description = "remove messages by kind or text (or drop their whole datagram)",
    .example = "filter drop {\n"
               "    kinds chat\n"
               "    match \"(free|cheap) (hacks|aimbot)\"\n"
               "    icase yes\n"
               "    direction to_client\n"
               "}\n",
    .conf_size = sizeof(struct drop_conf),
    .directives = directives,
    .conf_init = conf_init,
    .conf_check = conf_check,
    .conf_free = conf_free,
    .on_frame = on_frame,
    .session_end = session_end,
};
