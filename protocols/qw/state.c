/*
 * What a recording that starts mid-level needs (placeholder: filled in below).
 */
#include "protocols/qw/qw.h"

#include "protocols/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct sg_qw_track {
    bool level;
};

int sg_qw_track_create(struct sg_qw_track **t)
{
    *t = calloc(1, sizeof(**t));
    return *t ? 0 : -ENOMEM;
}

void sg_qw_track_destroy(struct sg_qw_track *t)
{
    free(t);
}

void sg_qw_track_reset(struct sg_qw_track *t)
{
    t->level = false;
}

void sg_qw_track_server(struct sg_qw_track *t, const struct sg_qw_parsed *p, uint32_t seq)
{
    (void)t;
    (void)p;
    (void)seq;
}

bool sg_qw_track_ready(const struct sg_qw_track *t)
{
    (void)t;
    return false;
}

int sg_qw_track_preamble(const struct sg_qw_track *t, struct sg_qw_recorder *r, uint32_t seq)
{
    (void)t;
    (void)r;
    (void)seq;
    return SG_E_UNSUPPORTED;
}
