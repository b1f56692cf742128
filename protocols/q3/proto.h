/*
 * Quake 3 protocol constants, opcodes and their name tables.
 *
 * A server message (and every demo message) is a bit stream, Huffman coded
 * with the fixed tree (see msg.h):
 *
 *     long  reliableAcknowledge      last client command the server saw
 *     byte  op  ...                  svc_* operations, in any order
 *     byte  svc_EOF                  end of message; then zero padding bits
 *
 * The values and limits below are those of id's 1.29h-1.32 code and of
 * ioquake3 (qcommon.h, q_shared.h).  Protocols 66, 67, 68 (retail point
 * releases) and 71 (ioquake3) share them: the field tables, the opcode
 * numbers and the message layout are the same; they differ only in the
 * netchan (68 scrambles payloads with XOR, 71 adds a checksum and no XOR).
 * svc_voipSpeex / svc_voipOpus exist only in ioquake3 builds; the parser
 * accepts them for every protocol because an older client would simply
 * reject the message.
 */
#ifndef SG_PROTOCOLS_Q3_PROTO_H
#define SG_PROTOCOLS_Q3_PROTO_H

#include <stdbool.h>
#include <stdint.h>

#define SG_Q3_GENTITYNUM_BITS       10
#define SG_Q3_MAX_GENTITIES         (1 << SG_Q3_GENTITYNUM_BITS)
#define SG_Q3_ENTITYNUM_NONE        (SG_Q3_MAX_GENTITIES - 1) /* ends a packet-entities list */
#define SG_Q3_MAX_CONFIGSTRINGS     1024
#define SG_Q3_MAX_GAMESTATE_CHARS   16000
#define SG_Q3_PACKET_BACKUP         32 /* snapshots the client keeps to delta from */
#define SG_Q3_PACKET_MASK           (SG_Q3_PACKET_BACKUP - 1)
#define SG_Q3_MAX_SNAPSHOT_ENTITIES 256
#define SG_Q3_MAX_PARSE_ENTITIES    (SG_Q3_MAX_GENTITIES * 2)
#define SG_Q3_MAX_RELIABLE_COMMANDS 64
#define SG_Q3_MAX_MAP_AREA_BYTES    32
#define SG_Q3_MAX_STATS             16
#define SG_Q3_MAX_PERSISTANT        16
#define SG_Q3_MAX_WEAPONS           16
#define SG_Q3_MAX_POWERUPS          16
#define SG_Q3_VOIP_FLAGCNT          2

/* Snapshot flags (snapFlags byte). */
#define SG_Q3_SNAPFLAG_RATE_DELAYED 1
#define SG_Q3_SNAPFLAG_NOT_ACTIVE   2
#define SG_Q3_SNAPFLAG_SERVERCOUNT  4 /* toggled on every map change */

/* Engine configstrings (fixed by the engine for every mod). */
#define SG_Q3_CS_SERVERINFO 0
#define SG_Q3_CS_SYSTEMINFO 1
/* baseq3 game layout; CPMA and OSP keep it. */
#define SG_Q3_CS_GAME_VERSION     20
#define SG_Q3_CS_LEVEL_START_TIME 21
#define SG_Q3_CS_PLAYERS          544
#define SG_Q3_MAX_CLIENTS         64

/* Protocol numbers this code knows. */
#define SG_Q3_PROTOCOL_66 66
#define SG_Q3_PROTOCOL_67 67
#define SG_Q3_PROTOCOL_68 68
#define SG_Q3_PROTOCOL_71 71

/*
 * Does slipgate decode the game of Quake 3 protocol `p` (66-71: Quake 3
 * 1.29-1.32, ioquake3, OpenArena)?  A session whose connect announces
 * another number (43 Quake 3 1.11-1.16, 45-48 the later point releases,
 * 73/90/91 Quake Live, 84 Wolfenstein: Enemy Territory, ...) is relayed
 * with only its netchan header read.
 */
#define SG_Q3_PROTOCOL_DECODED(p) ((p) >= SG_Q3_PROTOCOL_66 && (p) <= SG_Q3_PROTOCOL_71)

/* Server to client operations. */
enum sg_q3_svc {
    SG_Q3_SVC_BAD,
    SG_Q3_SVC_NOP,
    SG_Q3_SVC_GAMESTATE,
    SG_Q3_SVC_CONFIGSTRING, /* only inside svc_gamestate: short index, bigstring */
    SG_Q3_SVC_BASELINE,     /* only inside svc_gamestate: entity delta from null */
    SG_Q3_SVC_SERVERCOMMAND,
    SG_Q3_SVC_DOWNLOAD,
    SG_Q3_SVC_SNAPSHOT,
    SG_Q3_SVC_EOF,
    SG_Q3_SVC_VOIP_SPEEX, /* ioquake3 */
    SG_Q3_SVC_VOIP_OPUS,  /* ioquake3 */
    SG_Q3_SVC_COUNT
};

/* Client to server operations. */
enum sg_q3_clc {
    SG_Q3_CLC_BAD,
    SG_Q3_CLC_NOP,
    SG_Q3_CLC_MOVE,
    SG_Q3_CLC_MOVE_NODELTA,
    SG_Q3_CLC_CLIENTCOMMAND,
    SG_Q3_CLC_EOF,
    SG_Q3_CLC_VOIP_SPEEX, /* ioquake3 */
    SG_Q3_CLC_VOIP_OPUS,  /* ioquake3 */
    SG_Q3_CLC_COUNT
};

/*
 * a - b for sequence numbers and counters that may wrap: computed modulo
 * 2^32, so comparing the result with 0 orders values less than 2^31 apart.
 */
static inline int32_t sg_q3_seqdiff(int32_t a, int32_t b)
{
    return (int32_t)((uint32_t)a - (uint32_t)b);
}

/* a + n, wrapping. */
static inline int32_t sg_q3_seqadd(int32_t a, int32_t n)
{
    return (int32_t)((uint32_t)a + (uint32_t)n);
}

/* The game's name of a server op ("svc_snapshot"); "svc_unknown" outside the table. Static. */
const char *sg_q3_svc_name(int op);

/* The game's name of a client op ("clc_move"); "clc_unknown" outside the table. Static. */
const char *sg_q3_clc_name(int op);

/* The game a Quake 3 protocol number belongs to ("Wolfenstein: Enemy Territory"), or NULL
 * where unknown.  Static. */
const char *sg_q3_protocol_game(int protocol);

/* Name of a snapshot flag bit ("rate_delayed", "not_active", "servercount"), or NULL. */
const char *sg_q3_snapflag_name(int bit);

/*
 * Is `verb` the first word of command text `cmd` as the game splits it
 * (Cmd_TokenizeString: leading blanks and control bytes skipped, the word
 * ends at a blank or is quoted)?  Both NUL-terminated, borrowed.
 */
bool sg_q3_command_is(const char *cmd, const char *verb);

#endif
