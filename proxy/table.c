/*
 * The session table (proxy/table.h).
 */
#include "proxy/table.h"

#include "proxy/addr.h"

#include <errno.h>
#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t addr_hash(const struct sg_table *t, const struct sockaddr *sa)
{
    unsigned char in[18];
    unsigned char out[crypto_shorthash_BYTES];
    size_t n = sg_addr_host_key(sa, in);
    uint16_t port = (uint16_t)sg_addr_port(sa);
    uint64_t h;

    memcpy(in + n, &port, 2);
    crypto_shorthash(out, in, n + 2, t->hash_key);
    memcpy(&h, out, sizeof(h));
    return h;
}

static size_t host_bucket(const struct sg_table *t, const struct sockaddr *sa)
{
    unsigned char in[16];
    unsigned char out[crypto_shorthash_BYTES];
    size_t n = sg_addr_host_key(sa, in);
    uint64_t h;

    crypto_shorthash(out, in, n, t->hash_key);
    memcpy(&h, out, sizeof(h));
    return h & (SG_HOST_BUCKETS - 1);
}

int sg_table_init(struct sg_table *t)
{
    memset(t, 0, sizeof(*t));
    randombytes_buf(t->hash_key, sizeof(t->hash_key));
    t->nbuckets = 64;
    t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
    t->hosts = calloc(SG_HOST_BUCKETS, sizeof(*t->hosts));
    return t->buckets && t->hosts ? 0 : -ENOMEM;
}

void sg_table_free(struct sg_table *t)
{
    free(t->buckets);
    free(t->hosts);
    t->buckets = t->hosts = NULL;
}

bool sg_table_same_host(const struct sockaddr *a, const struct sockaddr *b)
{
    unsigned char ka[16], kb[16];
    size_t na = sg_addr_host_key(a, ka), nb = sg_addr_host_key(b, kb);

    return na == nb && memcmp(ka, kb, na) == 0;
}

struct sg_session *sg_table_find(const struct sg_table *t, const struct sockaddr *sa)
{
    struct sg_session *s = t->buckets[addr_hash(t, sa) & (t->nbuckets - 1)];
    for (; s; s = s->hnext)
        if (sg_addr_equal((const struct sockaddr *)&s->client, sa))
            return s;
    return NULL;
}

struct sg_session *sg_table_host_chain(const struct sg_table *t, const struct sockaddr *sa)
{
    return t->hosts[host_bucket(t, sa)];
}

static void grow(struct sg_table *t)
{
    size_t n = t->nbuckets * 2;
    struct sg_session **b = calloc(n, sizeof(*b));

    if (!b)
        return; /* keep the longer chains */
    for (size_t i = 0; i < t->nbuckets; i++) {
        struct sg_session *s = t->buckets[i], *next;
        for (; s; s = next) {
            size_t j = addr_hash(t, (struct sockaddr *)&s->client) & (n - 1);
            next = s->hnext;
            s->hnext = b[j];
            b[j] = s;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = n;
}

/* ---- the waiting lists: sessions not yet established, oldest first ---- */

static void waiting_append(struct sg_table *t, struct sg_session *s)
{
    int k = s->stage;

    s->wnext = NULL;
    s->wprev = t->waiting_tail[k];
    if (s->wprev)
        s->wprev->wnext = s;
    else
        t->waiting[k] = s;
    t->waiting_tail[k] = s;
}

static void waiting_remove(struct sg_table *t, struct sg_session *s)
{
    int k = s->stage;

    if (s->wprev)
        s->wprev->wnext = s->wnext;
    else
        t->waiting[k] = s->wnext;
    if (s->wnext)
        s->wnext->wprev = s->wprev;
    else
        t->waiting_tail[k] = s->wprev;
    s->wprev = s->wnext = NULL;
}

void sg_table_stage(struct sg_table *t, struct sg_session *s, enum sg_session_stage st)
{
    if (st <= s->stage || s->closing)
        return; /* stages only go forward */
    waiting_remove(t, s);
    s->stage = st;
    if (st != SG_STAGE_ESTABLISHED)
        waiting_append(t, s);
}

static void hash_in(struct sg_table *t, struct sg_session *s)
{
    size_t i = addr_hash(t, (struct sockaddr *)&s->client) & (t->nbuckets - 1);

    s->hnext = t->buckets[i];
    t->buckets[i] = s;
}

void sg_table_insert(struct sg_table *t, struct sg_session *s)
{
    size_t i;

    if (t->nsessions + 1 > t->nbuckets)
        grow(t);
    hash_in(t, s);
    i = host_bucket(t, (struct sockaddr *)&s->client);
    s->host_next = t->hosts[i];
    t->hosts[i] = s;
    s->prev = NULL;
    s->next = t->sessions;
    if (t->sessions)
        t->sessions->prev = s;
    t->sessions = s;
    t->nsessions++;
    s->stage = SG_STAGE_UNANSWERED;
    waiting_append(t, s);
}

/* Out of the address table only (the host chain and the list stay). */
static void unhash(struct sg_table *t, struct sg_session *s)
{
    struct sg_session **pp =
        &t->buckets[addr_hash(t, (struct sockaddr *)&s->client) & (t->nbuckets - 1)];
    for (; *pp; pp = &(*pp)->hnext) {
        if (*pp == s) {
            *pp = s->hnext;
            break;
        }
    }
}

void sg_table_remove(struct sg_table *t, struct sg_session *s)
{
    struct sg_session **pp = &t->hosts[host_bucket(t, (struct sockaddr *)&s->client)];

    unhash(t, s);
    for (; *pp; pp = &(*pp)->host_next) {
        if (*pp == s) {
            *pp = s->host_next;
            break;
        }
    }
    if (s->prev)
        s->prev->next = s->next;
    else
        t->sessions = s->next;
    if (s->next)
        s->next->prev = s->prev;
    t->nsessions--;
    if (s->stage != SG_STAGE_ESTABLISHED)
        waiting_remove(t, s);
}

/* The host chain stays: a qport move keeps the host. */
void sg_table_rekey(struct sg_table *t, struct sg_session *s, const struct sockaddr *to)
{
    unhash(t, s);
    memset(&s->client, 0, sizeof(s->client));
    memcpy(&s->client, to, sg_addr_len(to));
    hash_in(t, s);
}
