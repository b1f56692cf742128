/*
 * Quake 3 client message (client to server), decoded and encoded bit-exact.
 *
 * Wire layout (ioquake3 cl_input.c CL_WritePacket, read by sv_client.c
 * SV_ExecuteClientMessage), Huffman-coded bit stream, XOR already removed:
 *
 *     long serverId                 the server's map instance the client is on
 *     long messageAcknowledge       last server message the client received
 *     long reliableAcknowledge      last server command the client received
 *     { byte clc_clientCommand, long sequence, string command } ...
 *     [ byte clc_move | clc_moveNoDelta, byte count (1..32),
 *       count x usercmd delta (from the previous one, the first from zero) ]
 *     byte clc_EOF, then padding up to the byte after the last bit
 *
 * A usercmd delta (MSG_WriteDeltaUsercmdKey):
 *
 *     1 bit  0: 32 bits serverTime       1: 8 bits serverTime - previous
 *     1 bit  0: nothing changed          1: the 8 fields below follow
 *       per field: 1 bit sent, then (value ^ key) in its width
 *       angles[0..2] 16, forwardmove 8, rightmove 8, upmove 8, buttons 16, weapon 8
 *
 * with key = checksumFeed ^ messageAcknowledge ^ MSG_HashKey(the server
 * command numbered reliableAcknowledge, 32) ^ serverTime.  The client
 * writes it with its own copy of that command, the server reads it with
 * its own: each side's view (DESIGN rule 3).
 *
 * The server reads commands until the first other op, then at most one
 * move, and ignores the rest; what follows the last op understood here is
 * kept as raw bits (the "tail") so an unchanged message encodes to the same
 * bytes.
 */
#ifndef SG_PROTOCOLS_Q3_CLMSG_H
#define SG_PROTOCOLS_Q3_CLMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocols/q3/msg.h"
#include "protocols/q3/proto.h"

#define SG_Q3_MAX_PACKET_USERCMDS 32
#define SG_Q3_USERCMD_FIELDS      8

/* A reliable command as it travelled: number and raw bytes. */
struct sg_q3_reliable_cmd {
    int32_t sequence;
    uint16_t len;
    char text[SG_Q3_MAX_STRING_CHARS]; /* raw wire bytes, NUL-terminated */
};

/*
 * The last 64 reliable commands one side knows, by number (the game's
 * reliableCommands / serverCommands arrays).  The game keeps 1024 bytes a
 * slot; only the bytes up to the NUL matter to the keys, so each slot here
 * is a heap string sized to its command (grown, never shrunk: no
 * allocation once the slots are warm).  Zeroed = all empty; free with
 * sg_q3_ring_finish.
 */
struct sg_q3_reliable_ring {
    int32_t highest; /* highest number stored */
    char *cmd[SG_Q3_MAX_RELIABLE_COMMANDS]; /* NULL: never filled ("") */
    uint16_t cap[SG_Q3_MAX_RELIABLE_COMMANDS];
    int32_t hash[SG_Q3_MAX_RELIABLE_COMMANDS]; /* sg_q3_hash_key(cmd, 32) of each slot, 0 for "" */
};

/*
 * Store command `seq` (NUL-terminated `text`, truncated to 1023 bytes),
 * unless a newer command owns its slot.  0, or -ENOMEM (the slot then
 * reads "").
 */
int sg_q3_ring_store(struct sg_q3_reliable_ring *ring, int32_t seq, const char *text);

/* Free the slots and zero the ring; accepts NULL and a zeroed ring. */
void sg_q3_ring_finish(struct sg_q3_reliable_ring *ring);

/* The entry for command `seq` (its slot; "" when never filled).  Valid until the slot changes. */
const char *sg_q3_ring_get(const struct sg_q3_reliable_ring *ring, int32_t seq);

/* sg_q3_hash_key(sg_q3_ring_get(ring, seq), 32), kept when the command was stored. */
int32_t sg_q3_ring_hash(const struct sg_q3_reliable_ring *ring, int32_t seq);

/* MSG_HashKey: the game's hash of the first `maxlen` bytes of a command. */
int32_t sg_q3_hash_key(const char *s, int maxlen);

/* The usercmd key before serverTime is mixed in. */
int32_t sg_q3_clmsg_key(int32_t checksum_feed, int32_t message_ack, const char *acked_cmd);

/* A usercmd as the game holds it (usercmd_t). */
struct sg_q3_usercmd {
    int32_t server_time;
    int32_t angles[3];
    int32_t buttons;
    uint8_t weapon;
    int8_t forwardmove, rightmove, upmove;
};

/* How one usercmd travelled, for bit-exact encoding. */
struct sg_q3_usercmd_wire {
    bool time_delta;                      /* 8-bit delta (true) or 32-bit absolute time */
    uint32_t time;                        /* the 8 or 32 bits as sent */
    bool changed;                         /* the "fields follow" bit */
    uint8_t sent;                         /* bit f set: field f was sent */
    uint32_t value[SG_Q3_USERCMD_FIELDS]; /* field values un-keyed, in field width */
};

/*
 * The wire record the game's writer makes for `to` after `from`
 * (MSG_WriteDeltaUsercmdKey): what a filter that changes a move fills in.
 */
void sg_q3_usercmd_make_wire(const struct sg_q3_usercmd *from, const struct sg_q3_usercmd *to,
                             struct sg_q3_usercmd_wire *w);

/* Usercmd field names in wire order ("angles[0]" ... "weapon"), static. */
const char *sg_q3_usercmd_field_name(int field);

struct sg_q3_clmsg {
    int32_t server_id;
    int32_t message_ack;
    int32_t reliable_ack;

    int num_commands;
    struct sg_q3_reliable_cmd commands[SG_Q3_MAX_RELIABLE_COMMANDS];

    int move_op; /* 0, SG_Q3_CLC_MOVE or SG_Q3_CLC_MOVE_NODELTA */
    int num_cmds;
    int32_t key; /* the key the moves were read with, before serverTime */
    struct sg_q3_usercmd cmds[SG_Q3_MAX_PACKET_USERCMDS];      /* as the game holds them */
    struct sg_q3_usercmd_wire wire[SG_Q3_MAX_PACKET_USERCMDS]; /* as sent: what encode writes */

    bool eof;    /* clc_EOF read after the last op */
    int stop_op; /* when !eof: the op byte the parse stopped at (-1: end of data) */

    /* Everything after the last bit understood, raw. */
    size_t tail_bits;
    uint8_t tail[SG_Q3_MAX_MSGLEN];
};

/*
 * Decode client message `data` (`len` bytes, XOR removed), reading the
 * moves with `checksum_feed` and the server commands the sender knew
 * (`server_cmds`, may be NULL: empty).  Returns 0, or SG_E_OVERFLOW (read
 * past the end), SG_E_MALFORMED (move count outside 1..32, command number
 * or string cut); `out` then holds what was read before.  `data` is
 * borrowed for the call.
 */
int sg_q3_clmsg_decode(const uint8_t *data, size_t len, int32_t checksum_feed,
                       const struct sg_q3_reliable_ring *server_cmds, struct sg_q3_clmsg *out);

/*
 * Encode `cm` into `buf` (`cap` bytes), keying the moves with
 * `checksum_feed` and `server_cmds` (the receiver's view).  An unchanged
 * message with the same key gives back the decoded bytes.  Returns the
 * length, or SG_E_OVERFLOW.
 */
int sg_q3_clmsg_encode(const struct sg_q3_clmsg *cm, int32_t checksum_feed,
                       const struct sg_q3_reliable_ring *server_cmds, uint8_t *buf, size_t cap);

/*
 * Does the client leave the game with this message: does it carry a
 * `disconnect` command (CL_Disconnect sends one, in three packets, after
 * ending the client's own demo)?  Repeats count too.
 */
bool sg_q3_clmsg_disconnects(const struct sg_q3_clmsg *cm);

#endif
