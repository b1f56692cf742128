/*
 * What a Quake 3 client knows about the server stream, kept per stream
 * (per session side, or per demo file) by the parser:
 *
 *  - the gamestate: configstrings (the game's view of the strings, updated
 *    by "cs" / "bcs0-2" server commands), entity baselines, clientNum,
 *    checksumFeed;
 *  - the last PACKET_BACKUP (32 in every variant today) snapshots by message number, each with its
 *    playerstate and a window into the parse-entities ring (2048 entities),
 *    exactly as cl.snapshots / cl.parseEntities, so deltas resolve the
 *    same way they do in the game, stale frames included.  A ring slot
 *    holds a reference into a pool of entity states that snapshots share
 *    while an entity does not change (most entities, most of the time),
 *    so a session keeps a few hundred states, not 2048 copies;
 *  - the last MAX_RELIABLE_COMMANDS (64) reliable server commands
 *    (clc.serverCommands).
 *
 * The limits (configstrings, entity numbers, the rings' sizes) are the
 * state's variant's (variant.h); the arrays are sized by their maxima.
 *
 * Nothing here is global: a caller creates one state per stream and hands
 * it to the parser (parse.c) for every message in order.
 */
#ifndef SG_PROTOCOLS_Q3_STATE_H
#define SG_PROTOCOLS_Q3_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocols/q3/delta.h"
#include "protocols/q3/proto.h"

/* One snapshot as the client keeps it (clSnapshot_t). */
struct sg_q3_snapshot {
    bool valid;
    int32_t message_num;
    int32_t delta_num; /* message it was delta'd from, -1 for none */
    int32_t server_time;
    int32_t server_command_num; /* last server command seen when it arrived */
    uint8_t snap_flags;
    uint8_t areamask_len;
    uint8_t areamask[SG_Q3_MAX_MAP_AREA_BYTES];
    struct sg_q3_player ps;
    uint32_t parse_entities_num; /* first entity in the ring (a wrapping counter) */
    int32_t num_entities;
};

/* Entity states for the parse-entities ring, reference counted, in
 * chunks that never move (pointers into them stay valid); the counts sit
 * together, apart from the states, so that counting touches little. */
#define SG_Q3_ENTPOOL_CHUNK   64
#define SG_Q3_ENTPOOL_CHUNKS  (SG_Q3_MAX_PARSE_ENTITIES / SG_Q3_ENTPOOL_CHUNK + 2)
#define SG_Q3_ENTPOOL_RECORDS (SG_Q3_ENTPOOL_CHUNKS * SG_Q3_ENTPOOL_CHUNK)

struct sg_q3_entpool {
    struct sg_q3_entity *chunk[SG_Q3_ENTPOOL_CHUNKS]; /* SG_Q3_ENTPOOL_CHUNK states each */
    int nchunks;
    uint16_t refs[SG_Q3_ENTPOOL_RECORDS];
    uint16_t next[SG_Q3_ENTPOOL_RECORDS]; /* free list: record + 1, 0 ends it */
    uint16_t free_head;                   /* record + 1, 0: none free */
    uint32_t live;                        /* records referenced now */
};

/* A slot of the parse-entities ring: the state's record, and its entity
 * number (so that merging a frame reads no record it carries over). */
struct sg_q3_parse_slot {
    uint16_t ref;    /* pool record + 1; 0: the all-zero entity */
    uint16_t number; /* the entity's number */
};

struct sg_q3_state {
    int protocol; /* 66, 67, 68, 71; informational */

    /* The variant the stream speaks: its field tables and limits are the
     * ones the parser, the recorder and the lookups below use (never NULL;
     * the arrays here are sized by the SG_Q3_* maxima, which bound it). */
    const struct sg_q3_variant *variant;

    /* gamestate */
    bool have_gamestate;
    char *cs[SG_Q3_MAX_CONFIGSTRINGS];                  /* NULL = unset */
    uint32_t cs_changes; /* counts every change of a configstring (readers cache by it) */
    struct sg_q3_entity baselines[SG_Q3_MAX_GENTITIES]; /* all-zero unless its used bit is set */
    uint8_t baseline_used[SG_Q3_MAX_GENTITIES / 8];     /* a writer of baselines[n] sets bit n */
    int32_t client_num;
    int32_t checksum_feed;
    char *big_cs; /* "bcs0".."bcs2" being assembled, or NULL */

    /* reliable commands */
    int32_t reliable_ack;
    int32_t server_command_seq; /* highest server command stored */
    char *commands[SG_Q3_MAX_RELIABLE_COMMANDS];

    /* snapshots */
    int32_t server_message_seq; /* sequence of the message being parsed */
    bool snap_valid;          /* a valid snapshot arrived since the gamestate (cl.snap.valid) */
    int32_t snap_message_num; /* its message number (cl.snap.messageNum), 0 before one */
    struct sg_q3_snapshot snapshots[SG_Q3_PACKET_BACKUP];
    uint32_t parse_entities_num; /* entities ever parsed, wrapping */
    struct sg_q3_parse_slot parse_ring[SG_Q3_MAX_PARSE_ENTITIES];
    struct sg_q3_entpool pool;

    void *parse_scratch; /* the parser's buffers, kept between messages (parse.c) */

    /* counters for reports */
    uint64_t messages, gamestates, snapshots_valid, snapshots_nodelta, errors;
};

/* Allocate a zeroed state for a stream of protocol `protocol`, whose
 * variant is sg_q3_variant_for_protocol's; NULL on allocation failure.
 * Free with _destroy. */
struct sg_q3_state *sg_q3_state_create(int protocol);

/* The same for variant `v` (protocol: v->protocol). */
struct sg_q3_state *sg_q3_state_create_variant(const struct sg_q3_variant *v);

/* The stream turned out to speak `v` (a session's netchan decides between
 * the two 71s); NULL keeps the current one. */
void sg_q3_state_set_variant(struct sg_q3_state *st, const struct sg_q3_variant *v);

/* Free a state and its strings; accepts NULL. */
void sg_q3_state_destroy(struct sg_q3_state *st);

/* Forget the gamestate, snapshots and entities (CL_ClearState); commands stay. */
void sg_q3_state_clear_gamestate(struct sg_q3_state *st);

/* Configstring `index` (game view), "" when unset or out of range; valid until it changes. */
const char *sg_q3_state_configstring(const struct sg_q3_state *st, int index);

/* Replace configstring `index` with `len` bytes of `s`.  0, -EINVAL or -ENOMEM. */
int sg_q3_state_set_configstring(struct sg_q3_state *st, int index, const char *s, size_t len);

/*
 * Store server command `seq` as the client does (ignored unless newer than
 * every stored one) and apply "cs" / "bcs0" / "bcs1" / "bcs2" to the
 * configstrings.  `text` is the game's view of the command.  Returns 1 if
 * stored, 0 if ignored as old, or -ENOMEM.
 */
int sg_q3_state_server_command(struct sg_q3_state *st, int32_t seq, const char *text);

/* Stored server command `seq`, or NULL if outside the variant's command window. */
const char *sg_q3_state_command(const struct sg_q3_state *st, int32_t seq);

/* The latest valid snapshot (the game's cl.snap), or NULL before one. */
const struct sg_q3_snapshot *sg_q3_state_latest(const struct sg_q3_state *st);

/* The tracked snapshot for message `message_num` if it is valid and current, else NULL. */
const struct sg_q3_snapshot *sg_q3_state_snapshot(const struct sg_q3_state *st,
                                                  int32_t message_num);

/* Entity `i` (0 .. num_entities-1) of a tracked snapshot. */
const struct sg_q3_entity *sg_q3_state_entity(const struct sg_q3_state *st,
                                              const struct sg_q3_snapshot *snap, int i);

/*
 * The ring, for the parser (parse.c): the slot in the ring of entity `i`
 * of `snap`, the entity a reference stands for, and appending to the ring,
 * by sharing a slot's state or as a new state (0 or -ENOMEM).
 */
static inline struct sg_q3_parse_slot sg_q3__state_slot(const struct sg_q3_state *st,
                                                        const struct sg_q3_snapshot *snap, int i)
{
    return st->parse_ring[(snap->parse_entities_num + (uint32_t)i) & (SG_Q3_MAX_PARSE_ENTITIES - 1)];
}
int sg_q3__state_push_new(struct sg_q3_state *st, const struct sg_q3_entity *e);

extern const struct sg_q3_entity sg_q3__zero_entity; /* what ref 0 stands for */

static inline const struct sg_q3_entity *sg_q3__state_ref_entity(const struct sg_q3_state *st,
                                                                 uint16_t ref)
{
    unsigned rec = (unsigned)ref - 1;

    if (ref == 0)
        return &sg_q3__zero_entity;
    return &st->pool.chunk[rec / SG_Q3_ENTPOOL_CHUNK][rec % SG_Q3_ENTPOOL_CHUNK];
}

static inline void sg_q3__entpool_unref(struct sg_q3_entpool *pool, uint16_t ref)
{
    unsigned rec = (unsigned)ref - 1;

    if (ref != 0 && --pool->refs[rec] == 0) {
        pool->next[rec] = pool->free_head;
        pool->free_head = ref;
        pool->live--;
    }
}

/* The next slot takes `in`'s state (counted first: it may be the slot's own). */
static inline void sg_q3__state_push_slot(struct sg_q3_state *st, struct sg_q3_parse_slot in)
{
    struct sg_q3_parse_slot *slot =
        &st->parse_ring[st->parse_entities_num & (SG_Q3_MAX_PARSE_ENTITIES - 1)];

    if (in.ref)
        st->pool.refs[in.ref - 1]++;
    sg_q3__entpool_unref(&st->pool, slot->ref);
    *slot = in;
    st->parse_entities_num++;
}

/* True if baseline `number` was received in the gamestate. */
bool sg_q3_state_baseline_used(const struct sg_q3_state *st, int number);

/*
 * Look up `key` in an info string ("\key\value\..."); copies the value
 * (at most cap - 1 bytes) to `out`.  Returns true when the key exists.
 */
bool sg_q3_info_value(const char *info, const char *key, char *out, size_t cap);

#endif
