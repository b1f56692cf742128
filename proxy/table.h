/*
 * The session table of a route: its live sessions by client address (a
 * hash keyed with a per-route SipHash key), by host alone (qport matching),
 * in one list, and the waiting lists of those not yet established, oldest
 * first (the ones a full table evicts).  It only links sessions: admission,
 * the max_sessions slots and the ending of sessions stay with the route
 * (proxy/route.c), which holds these fields by name (a union with struct
 * sg_table, as with struct sg_relay).
 */
#ifndef SG_PROXY_TABLE_H
#define SG_PROXY_TABLE_H

#include "proxy/session.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#define SG_HOST_BUCKETS 1024 /* chains of sessions by host; a power of two */

#define SG_TABLE_FIELDS                                                                            \
    /* Live sessions: hash by client address (keyed SipHash) plus a list. */                      \
    struct sg_session **buckets;                                                                   \
    size_t nbuckets, nsessions;                                                                    \
    struct sg_session *sessions;                                                                   \
    unsigned char hash_key[16];                                                                    \
    /* The same sessions by host alone (qport matching), SG_HOST_BUCKETS chains. */               \
    struct sg_session **hosts;                                                                     \
    /* Sessions not yet established, oldest first: [SG_STAGE_UNANSWERED] and                      \
     * [SG_STAGE_ANSWERED]. */                                                                     \
    struct sg_session *waiting[2], *waiting_tail[2];

struct sg_table {
    SG_TABLE_FIELDS
};

/* An empty table with a fresh key: 0 or -ENOMEM. */
int sg_table_init(struct sg_table *t);
void sg_table_free(struct sg_table *t);
/* The session of client address `sa`, or NULL. */
struct sg_session *sg_table_find(const struct sg_table *t, const struct sockaddr *sa);
/* Add `s` (its client address set) as UNANSWERED; take it out again. */
void sg_table_insert(struct sg_table *t, struct sg_session *s);
void sg_table_remove(struct sg_table *t, struct sg_session *s);
/* Move `s` forward to stage `st` (stages never go back; a closing session stays). */
void sg_table_stage(struct sg_table *t, struct sg_session *s, enum sg_session_stage st);
/* `s` now answers to client address `to` (a qport move): re-keyed. */
void sg_table_rekey(struct sg_table *t, struct sg_session *s, const struct sockaddr *to);
/* The first session of the chain `sa`'s host is on (follow host_next;
 * other hosts share chains: compare with sg_table_same_host). */
struct sg_session *sg_table_host_chain(const struct sg_table *t, const struct sockaddr *sa);
bool sg_table_same_host(const struct sockaddr *a, const struct sockaddr *b);

#endif
