/* Reliable-command renumbering (renum.h). */
#include "protocols/q3/renum.h"

#include "protocols/error.h"
#include "protocols/q3/proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SLOT(seq) ((uint32_t)(seq) & (SG_Q3_RENUM_RING - 1))

void sg_q3_renum_init(struct sg_q3_renum *r)
{
    memset(r, 0, sizeof(*r));
}

void sg_q3_renum_finish(struct sg_q3_renum *r)
{
    for (int i = 0; i < SG_Q3_RENUM_RING; i++)
        free(r->ring[i].text);
    for (int i = 0; i < r->npending; i++)
        free(r->pending[i].text);
    sg_q3_renum_init(r);
}

static void start(struct sg_q3_renum *r, int32_t seq)
{
    r->started = true;
    r->last_sender = seq;
    r->last_receiver = seq;
    r->receiver_ack = seq;
}

bool sg_q3_renum_is_new(const struct sg_q3_renum *r, int32_t seq)
{
    return !r->started || seq > r->last_sender;
}

static struct sg_q3_renum_entry *entry(struct sg_q3_renum *r, int32_t seq)
{
    struct sg_q3_renum_entry *e = &r->ring[SLOT(seq)];

    if (!r->started || e->sender != seq || seq > r->last_sender ||
        (int64_t)seq <= (int64_t)r->last_sender - SG_Q3_RENUM_RING)
        return NULL;
    return e;
}

int32_t sg_q3_renum_add(struct sg_q3_renum *r, int32_t seq)
{
    struct sg_q3_renum_entry *e;

    if (!r->started)
        start(r, sg_q3_seqadd(seq, -1));
    if (seq <= r->last_sender)
        return sg_q3_renum_forward(r, seq);
    r->last_receiver = sg_q3_seqadd(r->last_receiver, sg_q3_seqdiff(seq, r->last_sender));
    r->last_sender = seq;
    e = &r->ring[SLOT(seq)];
    free(e->text);
    e->sender = seq;
    e->receiver = r->last_receiver;
    e->text = NULL;
    return e->receiver;
}

int sg_q3_renum_drop(struct sg_q3_renum *r, int32_t seq)
{
    struct sg_q3_renum_entry *e = entry(r, seq);
    int32_t was;

    if (!e || e->receiver == 0)
        return SG_E_STATE;
    was = e->receiver;
    e->receiver = 0;
    free(e->text);
    e->text = NULL;
    /* everything numbered after it moves down by one */
    for (int64_t s = (int64_t)seq + 1; s <= r->last_sender; s++) {
        struct sg_q3_renum_entry *n = entry(r, (int32_t)s);
        if (n && n->receiver > was)
            n->receiver--;
    }
    for (int i = 0; i < r->npending; i++)
        if (r->pending[i].receiver > was)
            r->pending[i].receiver--;
    r->last_receiver = sg_q3_seqadd(r->last_receiver, -1);
    r->changed = true;
    return 0;
}

int sg_q3_renum_set_text(struct sg_q3_renum *r, int32_t seq, const char *text)
{
    struct sg_q3_renum_entry *e = entry(r, seq);
    char *copy;

    if (!e || e->receiver == 0)
        return SG_E_STATE;
    if (!(copy = strdup(text)))
        return -ENOMEM;
    free(e->text);
    e->text = copy;
    r->changed = true;
    return 0;
}

bool sg_q3_renum_map(const struct sg_q3_renum *r, int32_t seq, int32_t *receiver,
                     const char **text)
{
    const struct sg_q3_renum_entry *e = entry((struct sg_q3_renum *)(uintptr_t)r, seq);

    *text = NULL;
    if (!e) {
        *receiver = sg_q3_renum_forward(r, seq);
        return true;
    }
    if (e->receiver == 0)
        return false;
    *receiver = e->receiver;
    *text = e->text;
    return true;
}

int32_t sg_q3_renum_forward(const struct sg_q3_renum *r, int32_t seq)
{
    return r->started ? sg_q3_seqadd(seq, sg_q3_seqdiff(r->last_receiver, r->last_sender)) : seq;
}

int sg_q3_renum_inject(struct sg_q3_renum *r, const char *text)
{
    char *copy;

    if (!r->started)
        return SG_E_STATE;
    if (r->npending >= SG_Q3_RENUM_PENDING)
        return SG_E_TOOBIG;
    if (!(copy = strdup(text)))
        return -ENOMEM;
    r->last_receiver = sg_q3_seqadd(r->last_receiver, 1);
    r->pending[r->npending].receiver = r->last_receiver;
    r->pending[r->npending].text = copy;
    r->pending[r->npending].sent = false;
    r->npending++;
    r->changed = true;
    return 0;
}

int32_t sg_q3_renum_ack_peek(const struct sg_q3_renum *r, int32_t ack)
{
    int64_t cand;

    if (!r->started || !r->changed)
        return ack;
    cand = r->last_sender;
    for (int64_t s = r->last_sender; s > (int64_t)r->last_sender - SG_Q3_RENUM_RING; s--) {
        const struct sg_q3_renum_entry *e = &r->ring[SLOT(s)];
        if (e->sender != s)
            break; /* before the first command seen: numbers were the same */
        if (e->receiver == 0)
            continue; /* dropped: received along with what precedes it */
        if (e->receiver <= ack)
            return (int32_t)cand;
        cand = s - 1;
    }
    return cand < ack ? (int32_t)cand : ack;
}

int32_t sg_q3_renum_ack(struct sg_q3_renum *r, int32_t ack)
{
    int j = 0;

    if (!r->started)
        start(r, ack);
    r->receiver_ack = ack;
    for (int i = 0; i < r->npending; i++) {
        if (r->pending[i].receiver <= ack)
            free(r->pending[i].text);
        else
            r->pending[j++] = r->pending[i];
    }
    r->npending = j;
    return sg_q3_renum_ack_peek(r, ack);
}

int32_t sg_q3_renum_gamestate(struct sg_q3_renum *r, int32_t seq)
{
    int32_t at;

    if (!r->started) {
        start(r, seq);
        return seq;
    }
    at = sg_q3_renum_forward(r, seq > r->last_sender ? seq : r->last_sender);
    for (int i = 0; i < r->npending; i++)
        r->pending[i].receiver = sg_q3_seqadd(at, 1 + i);
    r->last_sender = seq > r->last_sender ? seq : r->last_sender;
    r->last_receiver = sg_q3_seqadd(at, r->npending);
    return at;
}

int sg_q3_renum_pending(const struct sg_q3_renum *r)
{
    int n = 0;

    for (int i = 0; i < r->npending; i++)
        n += r->pending[i].receiver > r->receiver_ack;
    return n;
}
