/*
 * A decoded Quake 3 server message: everything needed to write the same
 * bytes back (sg_q3_write_server_message) and to show it (dump.c).
 *
 * Wire layout (CL_ParseServerMessage), Huffman-coded bit stream:
 *
 *     long reliableAcknowledge
 *     { byte op; body } ...                   ops in wire order
 *     byte svc_EOF, zero bits up to the byte after the last one written
 *
 *   svc_nop            -
 *   svc_serverCommand  long sequence, string text
 *   svc_gamestate      long commandSequence,
 *                      { byte svc_configstring, short index, bigstring
 *                      | byte svc_baseline, number, entity delta from zero } ...,
 *                      byte svc_EOF, long clientNum, long checksumFeed
 *   svc_snapshot       long serverTime, byte deltaNum (0 = none), byte snapFlags,
 *                      byte areamask length, areamask bytes, playerstate delta,
 *                      { number, entity delta } ..., ENTITYNUM_NONE
 *   (entity numbers in the variant's gentitynum_bits: 10, and 1023, in 68)
 *   svc_download       short block, [block 0: long size, size < 0: string error],
 *                      short length, bytes
 *   svc_voipSpeex/Opus short sender, byte generation, long sequence, byte frames,
 *                      short length, 2 bits flags, bytes
 *
 * Storage: the message owns growable pools (ops, snapshots, entity records,
 * gamestate items, bytes); ops refer to pool entries by index, so the
 * pools may be reallocated while a message is being built.  Strings keep
 * the raw wire bytes (before the game turns '%' and bytes > 127 into '.'),
 * NUL-terminated inside `bytes`.  A message is reused from one decode to
 * the next: sg_q3_svmsg_reset keeps the capacity.
 */
#ifndef SG_PROTOCOLS_Q3_SVMSG_H
#define SG_PROTOCOLS_Q3_SVMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocols/q3/delta.h"

/* Bytes in a message's byte pool: raw, with a NUL after them. */
struct sg_q3_bytes {
    uint32_t off;
    uint32_t len;
    bool cut; /* a string the game stopped reading at its size limit: no terminator was read */
};

/* One entry of a gamestate, in wire order. */
struct sg_q3_gs_item {
    uint8_t op;              /* SG_Q3_SVC_CONFIGSTRING or SG_Q3_SVC_BASELINE */
    uint16_t index;          /* configstring index, or baseline entity number */
    uint32_t ent;            /* baseline: record index in ents[] */
    struct sg_q3_bytes text; /* configstring: its raw bytes */
};

/* One svc_snapshot. */
struct sg_q3_snap {
    int32_t server_time;
    uint8_t delta_num; /* as sent; 0 = not delta compressed */
    uint8_t snap_flags;
    uint8_t areamask_len;
    uint8_t areamask[SG_Q3_MAX_MAP_AREA_BYTES];
    struct sg_q3_player_delta ps;
    uint32_t first_ent; /* entity records ents[first_ent .. first_ent + num_ents) */
    uint32_t num_ents;
    /* filled in by the parser from the stream state */
    int32_t message_num;       /* sequence of the message that carried it */
    int32_t delta_message_num; /* message_num - delta_num; -1 when not a delta */
    int status;                /* 0, or SG_E_NODELTA: base frame missing, values unreliable */
    uint32_t num_entities;     /* entities in the resulting frame */
};

/* One operation. */
struct sg_q3_op {
    uint8_t type; /* enum sg_q3_svc */
    union {
        struct {
            int32_t sequence;
            struct sg_q3_bytes text;
            bool fresh; /* parser: newer than anything before (the client stores it) */
        } cmd;
        struct {
            int32_t command_seq;
            uint32_t first_item; /* items[first_item .. first_item + num_items) */
            uint32_t num_items;
            int32_t client_num;
            int32_t checksum_feed;
        } gamestate;
        uint32_t snap; /* index in snaps[] */
        struct {
            uint16_t block;
            bool has_size; /* block 0 carries the file size */
            int32_t size;  /* total size; < 0: `error` follows and nothing else */
            struct sg_q3_bytes error;
            struct sg_q3_bytes data; /* the chunk (short length + bytes) */
        } download;
        struct {
            int16_t sender;
            uint8_t generation;
            int32_t sequence;
            uint8_t frames;
            int16_t size; /* as sent; the data is read only if nothing above is negative */
            uint8_t flags;
            struct sg_q3_bytes data;
        } voip;
    } u;
};

struct sg_q3_svmsg {
    /* The variant it is coded in: the field tables and entity number width
     * of its records (the parser sets its state's; init: protocol 68's;
     * NULL, in a zeroed struct, reads as protocol 68's).  Kept by reset. */
    const struct sg_q3_variant *variant;

    int32_t sequence;     /* message sequence (netchan or demo block) */
    int32_t reliable_ack; /* reliableAcknowledge */

    struct sg_q3_op *ops;
    uint32_t num_ops, cap_ops;
    struct sg_q3_snap *snaps;
    uint32_t num_snaps, cap_snaps;
    struct sg_q3_entity_delta *ents;
    uint32_t num_ents, cap_ents;
    struct sg_q3_gs_item *items;
    uint32_t num_items, cap_items;
    uint8_t *bytes;
    uint32_t num_bytes, cap_bytes;

    /*
     * How the original ended, so the writer can give back the same length
     * and padding: the bit after svc_EOF and the original bytes from the
     * byte holding that bit to the end (bits below end_bit & 7 cleared).
     * The writer uses them only when its own end bit is the same.
     */
    bool has_tail;
    uint32_t end_bit;
    struct sg_q3_bytes tail;
};

/* Initialise an empty message (no allocation yet), in protocol 68's variant. */
void sg_q3_svmsg_init(struct sg_q3_svmsg *msg);

/* The message's variant (protocol 68's where none is set). */
static inline const struct sg_q3_variant *sg_q3_svmsg_variant(const struct sg_q3_svmsg *msg)
{
    return msg->variant ? msg->variant : &sg_q3_variant_68;
}

/* Item `i` of gamestate `op`, or NULL past the message's items (a parser
 * that stopped early leaves fewer than the op counts). */
static inline const struct sg_q3_gs_item *sg_q3_gs_item(const struct sg_q3_svmsg *msg,
                                                        const struct sg_q3_op *op, uint32_t i)
{
    uint32_t k = op->u.gamestate.first_item + i;

    return k < msg->num_items ? &msg->items[k] : NULL;
}

/* Free the pools; accepts NULL and a zeroed struct. */
void sg_q3_svmsg_finish(struct sg_q3_svmsg *msg);

/* Empty the message, keeping the pools' capacity. */
void sg_q3_svmsg_reset(struct sg_q3_svmsg *msg);

/*
 * Append one zeroed element to a pool and return its index, or -ENOMEM
 * (or SG_E_TOOBIG beyond a sanity limit).  Pointers into the pool are
 * invalidated by the next append to the same pool.
 */
int sg_q3_svmsg_add_op(struct sg_q3_svmsg *msg, int type);
int sg_q3_svmsg_add_snap(struct sg_q3_svmsg *msg);
int sg_q3_svmsg_add_ent(struct sg_q3_svmsg *msg);
int sg_q3_svmsg_add_item(struct sg_q3_svmsg *msg);

/* Copy `len` bytes (then a NUL) into the byte pool; fills `*out`.  0 or -ENOMEM. */
int sg_q3_svmsg_add_bytes(struct sg_q3_svmsg *msg, const void *data, size_t len,
                          struct sg_q3_bytes *out);

/* Bytes of a reference (NUL-terminated); valid until the pool next grows. */
const uint8_t *sg_q3_svmsg_bytes(const struct sg_q3_svmsg *msg, struct sg_q3_bytes ref);

/* Convenience: a reference as a C string (the raw bytes; may hold bytes > 127). */
const char *sg_q3_svmsg_str(const struct sg_q3_svmsg *msg, struct sg_q3_bytes ref);

/* Count the ops of one type. */
unsigned sg_q3_svmsg_count(const struct sg_q3_svmsg *msg, int type);

/*
 * Does the message carry a `disconnect` server command (the server drops
 * the client: kicked, server quits)?  The client writes such a message
 * into its own demo and then ends it (CL_GetServerCommand).
 */
bool sg_q3_svmsg_disconnects(const struct sg_q3_svmsg *msg);

/* The first svc_snapshot of the message, or NULL. */
const struct sg_q3_snap *sg_q3_svmsg_snapshot(const struct sg_q3_svmsg *msg);

struct sg_q3_state;

/*
 * Decode one server message (`len` bytes at `data`, Huffman coded, XOR
 * already removed) carried by message `sequence`, as the client does, into
 * `out` (reset first), updating `st`: gamestate, configstrings, server
 * commands, snapshots; `out` takes the state's variant, whose field tables
 * and limits the decode follows.  Returns 0, or a negative error (SG_E_OVERFLOW,
 * SG_E_MALFORMED, SG_E_TOOBIG, -ENOMEM); `out` then holds the ops decoded
 * before the error.  A snapshot whose base frame is missing is not an
 * error: it is decoded, flagged with status SG_E_NODELTA, and not kept.
 * `data` is borrowed for the call.
 */
int sg_q3_parse_server_message(struct sg_q3_state *st, int32_t sequence, const uint8_t *data,
                               size_t len, struct sg_q3_svmsg *out);

/*
 * Encode `msg` into `buf` (`cap` bytes; at most SG_Q3_MAX_MSGLEN are
 * useful): the same bits as the message it was decoded from, including
 * the original length and padding when the content is unchanged, coded
 * with the message's variant (sg_q3_svmsg_variant).  Returns the length in
 * bytes, or SG_E_OVERFLOW.  Needs no stream state.
 */
int sg_q3_write_server_message(const struct sg_q3_svmsg *msg, uint8_t *buf, size_t cap);

/*
 * The game's view of raw string bytes: '%' and bytes > 127 become '.',
 * at most cap - 1 bytes kept, NUL-terminated.  Returns the stored length.
 */
size_t sg_q3_game_string(const uint8_t *raw, size_t len, char *out, size_t cap);

#endif
