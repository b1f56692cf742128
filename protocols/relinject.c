/*
 * Injected texts riding on the next reliable datagram (relinject.h): the
 * queue of each direction and when an injection counts as delivered.
 */
#include "protocols/relinject.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "protocols/error.h"

int sg_relinj_check(enum sg_dir dir, enum sg_msg_kind kind, const char *text, size_t len,
                    size_t cap)
{
    if (dir == SG_DIR_S2C
            ? (kind != SG_MSG_PRINT && kind != SG_MSG_CHAT && kind != SG_MSG_CENTERPRINT &&
               kind != SG_MSG_STUFFTEXT)
            : (kind != SG_MSG_CHAT && kind != SG_MSG_CLIENT_COMMAND))
        return SG_E_UNSUPPORTED;
    if (memchr(text, 0, len) || len + 16 >= cap)
        return -EINVAL;
    return 0;
}

int sg_relinj_add(struct sg_relinj *b, enum sg_dir dir, enum sg_msg_kind kind, const char *text,
                  size_t len)
{
    struct sg_relinj_item *j;
    int err = sg_relinj_check(dir, kind, text, len, sizeof(b->item[0].text));

    if (err < 0)
        return err;
    if (b->n >= SG_RELINJ_MAX)
        return SG_E_TOOBIG;
    j = &b->item[b->n++];
    memset(j, 0, sizeof(*j));
    j->dir = dir;
    j->kind = kind;
    if (dir == SG_DIR_C2S && kind == SG_MSG_CHAT)
        j->len = (size_t)snprintf(j->text, sizeof(j->text), "say \"%.*s\"", (int)len, text);
    else
        j->len = (size_t)snprintf(j->text, sizeof(j->text), "%.*s", (int)len, text);
    return 0;
}

/* The carrier towards `towards` is settled: what rode on it is forgotten
 * when `delivered`, else it waits for the next reliable datagram. */
void sg_relinj_settle(struct sg_relinj *b, enum sg_dir towards, bool delivered)
{
    unsigned keep = 0;

    for (unsigned i = 0; i < b->n; i++) {
        struct sg_relinj_item *j = &b->item[i];
        if (j->dir == towards && j->attached) {
            j->attached = false;
            if (delivered)
                continue;
        }
        b->item[keep++] = *j;
    }
    b->n = keep;
}

void sg_relinj_ack(struct sg_relinj *b, enum sg_dir dir, uint32_t ack, bool bit)
{
    enum sg_dir towards = dir == SG_DIR_C2S ? SG_DIR_S2C : SG_DIR_C2S;

    if (b->q[towards].in_flight && ack >= b->q[towards].carrier) {
        b->q[towards].in_flight = false;
        sg_relinj_settle(b, towards, bit != b->q[towards].bit_before);
    }
    b->q[towards].bit_known = true;
    b->q[towards].bit_now = bit;
}

bool sg_relinj_can_carry(const struct sg_relinj *b, enum sg_dir dir)
{
    return !b->q[dir].in_flight && b->q[dir].bit_known;
}

bool sg_relinj_waiting(const struct sg_relinj *b, enum sg_dir dir)
{
    for (unsigned i = 0; i < b->n; i++)
        if (b->item[i].dir == dir)
            return true;
    return false;
}

void sg_relinj_carried(struct sg_relinj *b, enum sg_dir dir, uint32_t seq)
{
    b->q[dir].in_flight = true;
    b->q[dir].carrier = seq;
    b->q[dir].bit_before = b->q[dir].bit_now;
}

void sg_relinj_unsent(struct sg_relinj *b, enum sg_dir dir, uint32_t seq)
{
    if (b->q[dir].in_flight && b->q[dir].carrier == seq) {
        b->q[dir].in_flight = false;
        sg_relinj_settle(b, dir, false);
    }
}

void sg_relinj_restart(struct sg_relinj *b)
{
    memset(b->q, 0, sizeof(b->q));
    for (unsigned i = 0; i < b->n; i++)
        b->item[i].attached = false;
}

bool sg_relinj_ready(const struct sg_relinj *b, enum sg_dir dir, unsigned min_waited)
{
    for (unsigned i = 0; i < b->n; i++)
        if (b->item[i].dir == dir && !b->item[i].attached && b->item[i].waited >= min_waited)
            return true;
    return false;
}

void sg_relinj_waited(struct sg_relinj *b, enum sg_dir dir, unsigned most)
{
    for (unsigned i = 0; i < b->n; i++)
        if (b->item[i].dir == dir && !b->item[i].attached && b->item[i].waited < most)
            b->item[i].waited++;
}
