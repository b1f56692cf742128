/*
 * The client sequence of a relayed game's session, for NAT rebinding
 * (codec.h client_follows): a datagram from a new address moves a session
 * only when its sequence continues the client's stream, newer than the
 * last one seen and at most SG_SEQWIN_AHEAD ahead, which a sender that
 * never saw the stream cannot guess.  Sequences are compared modulo the
 * game's sequence field (`mask`, flag bits removed).
 */
#ifndef SG_PROTOCOLS_SEQWIN_H
#define SG_PROTOCOLS_SEQWIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SG_SEQWIN_AHEAD 500u /* several seconds of a client's datagrams */

struct sg_seqwin {
    uint32_t last; /* newest client sequence seen */
    bool have;
};

/* The distance from `from` to `to`, modulo the sequence field. */
static inline uint32_t sg_seqwin_ahead(uint32_t from, uint32_t to, uint32_t mask)
{
    return (to - from) & mask;
}

/* A datagram of the session's own client: keep its sequence if newer. */
static inline void sg_seqwin_learn(struct sg_seqwin *w, uint32_t seq, uint32_t mask)
{
    uint32_t d;

    seq &= mask;
    d = sg_seqwin_ahead(w->last, seq, mask);
    if (!w->have || (d != 0 && d <= mask / 2)) {
        w->last = seq;
        w->have = true;
    }
}

/* A new connection on the session: sequences restart. */
static inline void sg_seqwin_reset(struct sg_seqwin *w)
{
    w->have = false;
    w->last = 0;
}

/* Does `seq` continue the stream whose newest sequence is `last`? */
static inline bool sg_seqwin_follows(bool have, uint32_t last, uint32_t seq, uint32_t mask,
                                     char *why, size_t whylen)
{
    uint32_t d;

    seq &= mask;
    if (!have) {
        snprintf(why, whylen, "no client sequence seen yet");
        return false;
    }
    d = sg_seqwin_ahead(last, seq, mask);
    if (d == 0 || d > mask / 2) {
        snprintf(why, whylen, "sequence %lu is not newer than the client's %lu", (unsigned long)seq,
                 (unsigned long)last);
        return false;
    }
    if (d > SG_SEQWIN_AHEAD) {
        snprintf(why, whylen, "sequence %lu is %lu ahead of the client's %lu (at most %u)",
                 (unsigned long)seq, (unsigned long)d, (unsigned long)last, SG_SEQWIN_AHEAD);
        return false;
    }
    return true;
}

#endif
