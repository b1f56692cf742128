/*
 * Quake 3 netchan: one session's datagrams in both directions turned into
 * whole, descrambled messages, and messages turned back into datagrams.
 *
 * The header layouts and the rules are drawn at the top of netchan.c.
 * In short, per direction the codec does what the receiving game does
 * (ioquake3 net_chan.c Netchan_Process, cl_net_chan.c, sv_net_chan.c):
 * drops sequences that are not newer, reassembles fragments, checks the
 * protocol-71 checksum, removes the protocol-68 XOR; and for sending what
 * the sending game does (Netchan_Transmit, *_Netchan_Encode).
 *
 * The XOR and usercmd keys depend on reliable commands each side has seen,
 * so the codec reads the start of every message: svc_serverCommand and
 * svc_gamestate (up to the checksum feed) in server messages, everything
 * in client messages (clmsg.h).  It keeps two views (DESIGN rule 3): what
 * the client knows and what the server knows.  A datagram is decoded with
 * its sender's view; a message is encoded with its receiver's view.
 * Decoding also updates the receiver's view, as if the message were
 * relayed unchanged; encoding a (changed) message overwrites it with what
 * was actually sent.
 *
 * All state is in the caller-owned struct sg_q3_netchan (about 35 KB;
 * allocate it on the heap) and the heap strings of its command rings,
 * which sg_q3_netchan_finish frees.  Nothing is global.
 */
#ifndef SG_PROTOCOLS_Q3_NETCHAN_H
#define SG_PROTOCOLS_Q3_NETCHAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocols/q3/clmsg.h"
#include "protocols/q3/msg.h"
#include "protocols/q3/oob.h"
#include "protocols/q3/proto.h"
#include "protocols/q3/variant.h"

#define SG_Q3_MAX_PACKETLEN 1400                        /* MAX_PACKETLEN */
#define SG_Q3_FRAGMENT_SIZE (SG_Q3_MAX_PACKETLEN - 100) /* 1300 */
#define SG_Q3_FRAGMENT_BIT  0x80000000u
#define SG_Q3_MAX_FRAGMENTS (SG_Q3_MAX_MSGLEN / SG_Q3_FRAGMENT_SIZE + 1) /* 13 */

enum sg_q3_dir {
    SG_Q3_C2S, /* client to server */
    SG_Q3_S2C, /* server to client */
};

enum sg_q3_side {
    SG_Q3_SIDE_CLIENT,
    SG_Q3_SIDE_SERVER,
};

/* enum sg_q3_wire and the variant descriptors: variant.h. */

/* The variant's name ("protocol 68", "ioquake3 71", "OpenArena 71"),
 * "headers only" or "unknown"; static. */
const char *sg_q3_wire_name(enum sg_q3_wire wire);
/* The variant's netchan quirks; false for UNKNOWN and HEADERS. */
bool sg_q3_wire_xor(enum sg_q3_wire wire);
bool sg_q3_wire_checksum(enum sg_q3_wire wire);

/* How the wire format was decided (bits). */
#define SG_Q3_EVIDENCE_HANDSHAKE   1u /* protocol from challengeResponse / connect */
#define SG_Q3_EVIDENCE_CHECKSUM    2u /* a datagram's checksum validated */
#define SG_Q3_EVIDENCE_NO_CHECKSUM 4u /* a datagram's checksum did not */
#define SG_Q3_EVIDENCE_RECOVERED   8u /* challenge recovered from checksums (no handshake) */

/* What the receiver does with a datagram. */
enum sg_q3_rx {
    SG_Q3_RX_NONE,
    SG_Q3_RX_OOB,          /* out-of-band packet, in frame->u.oob */
    SG_Q3_RX_MESSAGE,      /* a whole message: frame->msg */
    SG_Q3_RX_FRAGMENT,     /* a piece was stored; the message is not complete */
    SG_Q3_RX_OLD,          /* sequence not newer: duplicate or out of order, dropped */
    SG_Q3_RX_GAP,          /* a piece that does not continue the partial message, dropped */
    SG_Q3_RX_BAD_FRAGMENT, /* illegal fragment length, dropped */
    SG_Q3_RX_BAD_CHECKSUM, /* protocol 71 checksum mismatch, dropped */
    SG_Q3_RX_UNDECODABLE,  /* too short, or keys unknown: relay only */
    SG_Q3_RX_HEADERS,      /* a protocol not decoded (SG_Q3_WIRE_HEADERS): header read, relayed */
};

/* Name of a receive status ("message", "fragment", "old", ...); static. */
const char *sg_q3_rx_name(enum sg_q3_rx rx);

/* What one side knows: the two command rings and the gamestate keys. */
struct sg_q3_view {
    struct sg_q3_reliable_ring client_cmds; /* clc_clientCommand by number */
    struct sg_q3_reliable_ring server_cmds; /* svc_serverCommand by number */
    bool have_gamestate;
    int32_t checksum_feed;
    int32_t client_num;
};

/* The receiving game's netchan state for one direction. */
struct sg_q3_chan_rx {
    int32_t incoming_sequence;
    int32_t fragment_sequence;
    size_t fragment_length;
    uint8_t fragment_buffer[SG_Q3_MAX_MSGLEN];
};

struct sg_q3_netchan_stats {
    uint64_t datagrams[2], oob[2], messages[2], fragments[2];
    uint64_t old[2], gaps[2], bad_fragments[2], bad_checksums[2], undecodable[2];
    uint64_t content_errors[2];
};

struct sg_q3_netchan {
    /* handshake */
    int protocol; /* from connect (or challengeResponse); 0 unknown */
    enum sg_q3_wire wire;
    unsigned evidence; /* SG_Q3_EVIDENCE_* */
    bool have_challenge;
    int32_t challenge;
    bool have_qport;
    uint16_t qport;
    bool connected;      /* connectResponse seen */
    bool have_candidate; /* mid-session: challenge solved from one checksum, unconfirmed */
    int32_t candidate;

    /*
     * Set once the proxy changes what one side sees (filters): decoding then
     * updates only the sender's view, and the receiver's view learns from
     * what encode actually sends.
     */
    bool split_views;

    struct sg_q3_chan_rx rx[2]; /* by enum sg_q3_dir */
    struct sg_q3_view view[2];  /* by enum sg_q3_side */
    struct sg_q3_netchan_stats stats;
};

/* A server message's leading part: what the keys need, and a summary. */
struct sg_q3_svkeys {
    int32_t reliable_ack;
    int num_commands;
    struct sg_q3_reliable_cmd commands[SG_Q3_MAX_RELIABLE_COMMANDS];
    bool gamestate;
    int32_t gs_command_seq;
    int gs_configstrings, gs_baselines;
    int32_t client_num, checksum_feed;
    bool snapshot; /* svc_snapshot reached: its first fields below */
    int32_t snap_server_time;
    uint8_t snap_delta_num, snap_flags;
    int stop_op; /* the op the walk stopped at (svc_snapshot, svc_EOF, svc_download, ...) */
};

/* One decoded datagram. */
struct sg_q3_frame {
    enum sg_q3_dir dir;
    enum sg_q3_rx rx;
    size_t datagram_len;

    /* netchan header as read */
    int32_t sequence; /* fragment bit removed */
    bool fragmented;
    uint16_t qport;    /* client to server */
    bool has_checksum; /* ioquake3 71 */
    uint32_t checksum;
    int fragment_start, fragment_length; /* as the game reads them (signed shorts) */
    size_t header_len;
    int32_t dropped; /* sequences skipped before this message */

    /* rx == MESSAGE: the message, XOR removed (what a demo records) */
    int pieces; /* datagrams it came in */
    size_t msg_len;
    uint8_t msg[SG_Q3_MAX_MSGLEN];
    int content_err; /* 0, or why its content did not parse */

    union {
        struct sg_q3_oob oob;   /* rx == OOB */
        struct sg_q3_svkeys sv; /* S2C message */
        struct sg_q3_clmsg cl;  /* C2S message */
    } u;
};

/* Datagrams built for one message. */
struct sg_q3_datagrams {
    int count;
    size_t len[SG_Q3_MAX_FRAGMENTS];
    uint8_t data[SG_Q3_MAX_FRAGMENTS][SG_Q3_MAX_PACKETLEN];
};

/* Initialise `nc` for a new session (everything unknown). */
void sg_q3_netchan_init(struct sg_q3_netchan *nc);

/* Frees the command rings' strings and clears the struct.  Accepts NULL. */
void sg_q3_netchan_finish(struct sg_q3_netchan *nc);

/* A new connection on the same session: sequences, fragments and views restart. */
void sg_q3_netchan_reset(struct sg_q3_netchan *nc);

/*
 * Decode datagram `data` (`len` bytes) travelling in `dir` into `f`
 * (caller-owned, about 100 KB, reusable).  Updates the session state as the
 * receiver would.  `f->rx` always says what the receiver does with it.
 * Returns 0 for a datagram the game handles normally, including one it
 * drops as loss would (old, gap, bad checksum: see f->rx); a negative
 * error to be counted for input the game would not take (SG_E_TRUNCATED,
 * SG_E_FRAGMENT, SG_E_MALFORMED/SG_E_HUFFMAN for an out-of-band packet,
 * SG_E_STATE when the keys are unknown, or the message's content error,
 * also in f->content_err, with f->msg still valid).  The datagram is
 * relayed in any case.  `data` is borrowed for the call; `f` holds no
 * pointer into it.
 */
int sg_q3_netchan_decode(struct sg_q3_netchan *nc, enum sg_q3_dir dir, const uint8_t *data,
                         size_t len, struct sg_q3_frame *f);

/*
 * Build the datagrams that carry message `msg` (`len` bytes, plain) with
 * `sequence` in `dir`, as the sending game would: XOR with the receiver's
 * view (protocol 68 wire), header and checksum, 1300-byte fragments.
 * Updates the receiver's view with the message's commands.  Returns the
 * number of datagrams, or SG_E_TOOBIG / SG_E_STATE (keys unknown).
 */
int sg_q3_netchan_encode(struct sg_q3_netchan *nc, enum sg_q3_dir dir, int32_t sequence,
                         const uint8_t *msg, size_t len, struct sg_q3_datagrams *out);

/* The view a side holds (for keying a re-encoded client message). */
const struct sg_q3_view *sg_q3_netchan_view(const struct sg_q3_netchan *nc, enum sg_q3_side side);

/* ---- primitives, exposed for tests and tools ---- */

/* NETCHAN_GENCHECKSUM: challenge ^ (sequence * challenge). */
uint32_t sg_q3_netchan_checksum(int32_t challenge, int32_t sequence);

/*
 * Solve checksum = c ^ (sequence * c) for c; unique when `sequence` is
 * even.  Returns true and stores c, false for an odd sequence.
 */
bool sg_q3_netchan_solve_challenge(int32_t sequence, uint32_t checksum, int32_t *challenge);

/*
 * The protocol-68 XOR of a server message (SV_Netchan_Encode /
 * CL_Netchan_Decode, its own inverse): from byte 4, key challenge ^
 * sequence, mixed with `cmd`, the client command numbered by the message's
 * reliableAcknowledge.
 */
void sg_q3_xor_server_message(uint8_t *msg, size_t len, int32_t challenge, int32_t sequence,
                              const char *cmd);

/*
 * The same for a client message (CL_Netchan_Encode / SV_Netchan_Decode):
 * from byte 12, key challenge ^ serverId ^ messageAcknowledge, mixed with
 * `cmd`, the server command numbered by the message's reliableAcknowledge.
 */
void sg_q3_xor_client_message(uint8_t *msg, size_t len, int32_t challenge, int32_t server_id,
                              int32_t message_ack, const char *cmd);

/*
 * Walk a server message (XOR removed) up to its first snapshot, download
 * or voip op, in protocol 68's variant (a session walks its own wire's).
 * Returns 0, SG_E_MALFORMED or SG_E_OVERFLOW.
 */
int sg_q3_svkeys_parse(const uint8_t *msg, size_t len, struct sg_q3_svkeys *out);

#endif
