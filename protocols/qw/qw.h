/*
 * QuakeWorld (protocol 28, with the FTE / FTE2 / MVD1 extensions mvdsv and
 * ezQuake negotiate): the codec's shared declarations.
 *
 * The decoded form of a message is a list of fields in wire order, each
 * with its name, its kind (a number of a bmsg kind, a string with the way
 * it ended, or raw bytes) and its raw value.  The parsers (parse.c) walk
 * one field table per message, resolving the sizes the negotiated
 * extensions select (coordinates, angles, extended entity bits) once per
 * session; the writer (write.c) writes every field back from its raw form,
 * so decode -> write gives the bytes that came (STYLE.md "Keep the wire's
 * own choices").
 */
#ifndef SG_PROTOCOLS_QW_QW_H
#define SG_PROTOCOLS_QW_QW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocols/bmsg.h"
#include "protocols/codec.h"
#include "protocols/msglist.h"
#include "protocols/qnetchan.h"

#include <stdio.h>

#define SG_QW_PROTOCOL    28
#define SG_QW_MAX_MSGLEN  1450  /* mvdsv MAX_MSGLEN */
#define SG_QW_MAX_DGRAM   8192  /* what the decoder accepts at all */
/* Every message takes at least its opcode byte, and every field at least one
 * byte (the one that may take none, an empty DATA field, follows a number
 * or an opcode that took one): a datagram the decoder accepts can never
 * hold more of either than it has bytes, so no cap stops a parse early and
 * no message escapes the filters by how the datagram is packed. */
#define SG_QW_MAX_FIELDS  SG_QW_MAX_DGRAM
#define SG_QW_MAX_MSGS    SG_QW_MAX_DGRAM

/* Extension magics (challenge tail, connect lines, serverdata). */
#define SG_QW_MAGIC_FTE  0x58455446u /* "FTEX" */
#define SG_QW_MAGIC_FTE2 0x32455446u /* "FTE2" */
#define SG_QW_MAGIC_MVD1 0x3144564du /* "MVD1" */

/* FTE extension bits that change what is on the wire. */
#define SG_QW_FTE_TRANS            0x00000008u
#define SG_QW_FTE_MODELDBL         0x00001000u
#define SG_QW_FTE_ENTITYDBL        0x00002000u
#define SG_QW_FTE_ENTITYDBL2       0x00004000u
#define SG_QW_FTE_FLOATCOORDS      0x00008000u
#define SG_QW_FTE_SPAWNSTATIC2     0x00400000u
#define SG_QW_FTE_CHUNKEDDOWNLOADS 0x20000000u
/* MVD1 bits. */
#define SG_QW_MVD1_FLOATCOORDS     0x00000001u
#define SG_QW_MVD1_HIGHLAGTELEPORT 0x00000002u

/* One set of negotiated extensions. */
struct sg_qw_ext {
    uint32_t fte, fte2, mvd1, z_ext;
    bool known; /* any source said something */
};

/* The sizes one set of extensions selects, worked out once. */
struct sg_qw_variant {
    uint8_t coord;        /* enum sg_bmsg_num: MSG_ReadCoord */
    uint8_t angle;        /* enum sg_bmsg_num: MSG_ReadAngle */
    uint8_t ent_origin;   /* packet entities and playerinfo origins */
    bool fte;             /* FTE bits at all: U_FTE_EVENMORE is read */
    bool trans;           /* FTE_PEXT_TRANS */
    bool chunked;         /* FTE_PEXT_CHUNKEDDOWNLOADS */
    bool setangle_byte;   /* MVD1 HIGHLAGTELEPORT: svc_setangle starts with a byte */
    /* An .mvd's stream (set by its reader after sg_qw_variant_of(), which
     * clears it; serverdata keeps it): serverdata carries a float demo time
     * for the player number, svc_playerinfo has MVD's DF_* form, and
     * svc_setangle names its player first. */
    bool mvd;
};

void sg_qw_variant_of(const struct sg_qw_ext *ext, struct sg_qw_variant *v);

/* Fields and messages: protocols/msglist.h (a move whose checksum byte
 * matched, sum_ok, gets it recomputed by the writer). */

/* A parsed message stream (one datagram's payload after the header). */
struct sg_qw_parsed {
    struct sg_field *fields; /* SG_QW_MAX_FIELDS */
    uint32_t nfields;
    struct sg_fmsg *msgs; /* SG_QW_MAX_MSGS */
    uint32_t nmsgs;
    /* What the parser learnt (S2C serverdata). */
    bool serverdata;
    struct sg_qw_ext ext;
    char level[64];
    /* An extension met that cannot be decoded: its opcode, else -1. */
    int unsupported_op;
    /* C2S: the datagram's sequence (set by the caller: move checksums). */
    uint32_t sequence;
    uint32_t moves, moves_bad; /* clc_move messages, and those whose checksum did not match */
};

/* Parse a whole S2C or C2S message stream with `v`; `ext_out` learns from
 * serverdata.  Returns 0 or a negative error (then the stream is only
 * partly described). */
int sg_qw_parse(enum sg_dir dir, const struct sg_qw_variant *v, const uint8_t *data, size_t len,
                struct sg_qw_parsed *out);
/* The same with room for `max_fields` fields and `max_msgs` messages in
 * `out` (a demo block holds up to 8192 bytes of messages, more than a
 * datagram's worth; sg_qw_parse: SG_QW_MAX_FIELDS, SG_QW_MAX_MSGS). */
int sg_qw_parse_n(enum sg_dir dir, const struct sg_qw_variant *v, const uint8_t *data, size_t len,
                  struct sg_qw_parsed *out, uint32_t max_fields, uint32_t max_msgs);

/* Write the messages back (each not dropped, in order); a move whose
 * checksum matched gets it recomputed over what is written. */
int sg_qw_write(const struct sg_qw_parsed *p, const bool *dropped, struct sg_bmsg_writer *w);

/* clc_move's checksum byte over `len` bytes after it, for datagram `sequence`. */
uint8_t sg_qw_move_checksum(const uint8_t *move, size_t len, uint32_t sequence);

/* Opcode names: "svc_print", "clc_move"; "svc_unknown" out of range. */
const char *sg_qw_svc_name(int op);
const char *sg_qw_clc_name(int op);

/* ---- netchan (netchan.c) ---- */

/* Read the header of an in-game datagram with QuakeWorld's rules (31-bit
 * sequences, no fragments, the client's 16-bit qport): the bytes it took,
 * or a negative error (a runt). */
int sg_qw_header_read(enum sg_dir dir, const uint8_t *data, size_t len, struct sg_qnc_header *h);
int sg_qw_header_write(const struct sg_qnc_header *h, struct sg_bmsg_writer *w);

/* ---- relay hooks (relay.c) ---- */

/* Is `d` (`n` bytes) a QuakeWorld client's connect (protocol 28)? */
bool sg_qw_is_connect(const uint8_t *d, size_t n);
/* The qport of a client's datagram (its sequence learnt with `learn`; a
 * connect restarts the sequence), or -1 for none. */
int sg_qw_client_qport(union sg_relay_state *rs, const uint8_t *d, size_t n, bool learn);
/* Does datagram `d` continue the client's sequence (a NAT rebinding)?  If
 * not, says why into `why`. */
bool sg_qw_client_follows(const union sg_relay_state *rs, const void *state, const uint8_t *d,
                          size_t n, char *why, size_t whylen);

/* ---- connectionless (oob.c) ---- */

/*
 * The door (codec.h): mvdsv answers every datagram of a banned address
 * with A2C_PRINT 'n' "\nbanned.\n" (sv_main.c, SV_SendBan); its remote
 * administration is `rcon` (SV_ConnectionlessPacket, exact case).
 */
size_t sg_qw_banned_reply(const uint8_t *data, size_t len, uint8_t *out, size_t cap);
size_t sg_qw_full_reply(const uint8_t *data, size_t len, uint8_t *out, size_t cap);
bool sg_qw_is_admin(const uint8_t *data, size_t len);

enum sg_qw_oob_kind {
    SG_QW_OOB_OTHER,
    SG_QW_OOB_GETCHALLENGE,
    SG_QW_OOB_CHALLENGE, /* 'c' */
    SG_QW_OOB_CONNECT,
    SG_QW_OOB_ACCEPT,    /* 'j' */
    SG_QW_OOB_IP,        /* "ip" (mvdsv realip) */
    SG_QW_OOB_STATUS,
    SG_QW_OOB_PING,      /* "ping" or 'k' */
    SG_QW_OOB_ACK,       /* 'l' */
    SG_QW_OOB_PRINT,     /* 'n' */
    SG_QW_OOB_CHUNK,     /* "\\chunk": a chunked download block out of band */
    SG_QW_OOB_RCON,
};

struct sg_qw_oob {
    enum sg_qw_oob_kind kind;
    const char *name;      /* static */
    int32_t challenge;     /* CHALLENGE, CONNECT */
    int protocol;          /* CONNECT */
    int qport;             /* CONNECT, or -1 */
    const char *userinfo;  /* CONNECT: into the packet */
    size_t userinfo_len;
    struct sg_qw_ext ext;  /* CHALLENGE: offered; CONNECT: chosen (lines and *z_ext) */
};

/* Parse a connectionless packet (starting with 0xffffffff).  Returns 0 or
 * SG_E_MALFORMED (the fields that could be read are set). */
int sg_qw_oob_parse(enum sg_dir dir, const uint8_t *data, size_t len, struct sg_qw_oob *o);

/* ---- recording (record.c, state.c) ---- */

/* A user command as the client keeps it (usercmd_t). */
struct sg_qw_usercmd {
    uint8_t msec, buttons, impulse;
    float angles[3];
    int16_t move[3]; /* forward, side, up */
};

#define SG_QW_REC_PENDING 32 /* client commands waiting for the next server message */

struct sg_qw_rec_cmd {
    uint32_t seq;
    uint64_t ms; /* the client's clock after it */
    struct sg_qw_usercmd cmd;
};

/* A frame a command in the file opened, and the delta base the playing client will expect. */
struct sg_qw_rec_frame {
    uint32_t seq, delta;
    bool valid, has_delta;
};

/* One session's demo writer and the client's clock (zeroed at start). */
struct sg_qw_recorder {
    FILE *out;        /* the demo being written (borrowed), NULL when none */
    bool started;     /* the file has its start (serverdata or a preamble) */
    bool seq_known;   /* out_seq is the playing client's outgoing sequence */
    uint32_t out_seq; /* the playing client's next outgoing sequence */
    uint32_t in_seq;  /* the last server sequence in the file */
    struct sg_qw_rec_cmd pend[SG_QW_REC_PENDING];
    unsigned npend;
    uint64_t clock_ms, start_ms; /* the client's game clock; the file's first block */
    bool have_seq;
    uint32_t last_seq; /* the client's last accepted sequence */
    uint64_t bytes, blocks;
    /* What the playing client holds, to keep every entity frame decodable. */
    bool pe_have;
    uint32_t pe_last; /* its last whole entity frame (its cl.delta_sequence) */
    struct sg_qw_rec_frame cmds[64]; /* the frame each command in the file opened */
    uint32_t infile[64]; /* entity frames in the file */
    bool infile_valid[64];
    uint64_t rewritten; /* server messages written with a whole entity frame */
};

struct sg_qw_track; /* state.c: what a mid-level start needs */

/* Count an accepted client datagram's commands into the clock; queue its newest when recording. */
void sg_qw_rec_client(struct sg_qw_recorder *r, const struct sg_qw_parsed *p, uint32_t seq);
/* Start a demo in `out` (borrowed until sg_qw_rec_end). */
void sg_qw_rec_start(struct sg_qw_recorder *r, FILE *out);
/*
 * Write server datagram `data` (sequence `seq`, header included; `p` its
 * messages, `dropped` those a filter removed, or NULL) after the client
 * commands waiting; the first one of a file starts it (`new_level`: as it
 * is; else after a preamble from `t`).  A datagram whose delta entities the
 * playing client could not decode is written with the whole frame instead.
 * Returns 1 written, 0 waiting for a start, or a negative error.
 */
int sg_qw_rec_server(struct sg_qw_recorder *r, const struct sg_qw_track *t, bool new_level,
                     uint32_t seq, const uint8_t *data, size_t len, const struct sg_qw_parsed *p,
                     const bool *dropped);
/* One dem_read block at the current time (the preamble's datagrams). */
int sg_qw_rec_read(struct sg_qw_recorder *r, const uint8_t *data, size_t len);
/* The end marker, flushed; the recorder forgets `out`.  0 or a negative error. */
int sg_qw_rec_end(struct sg_qw_recorder *r);

/* The tracked state (state.c). */
int sg_qw_track_create(struct sg_qw_track **t);
void sg_qw_track_destroy(struct sg_qw_track *t);
/* A new connection: forget the level. */
void sg_qw_track_reset(struct sg_qw_track *t);
/* Learn from an accepted server message (as the client got it), parsed with `v`. */
void sg_qw_track_server(struct sg_qw_track *t, const struct sg_qw_variant *v,
                        const struct sg_qw_parsed *p, uint32_t seq);
/* Could a preamble be written now? */
bool sg_qw_track_ready(const struct sg_qw_track *t);
/* Is the entity frame of server datagram `seq` known whole? */
bool sg_qw_track_has_frame(const struct sg_qw_track *t, uint32_t seq);
/* Write that frame as one svc_packetentities from the baselines.  0 or a negative error. */
int sg_qw_track_write_frame(const struct sg_qw_track *t, uint32_t seq, struct sg_bmsg_writer *w);
/* Write the preamble that makes a demo start before server datagram `seq`. */
int sg_qw_track_preamble(const struct sg_qw_track *t, struct sg_qw_recorder *r, uint32_t seq);

/* Write message `i` of `p` (opcode and fields) to `w`. */
void sg_qw_write_msg(const struct sg_qw_parsed *p, uint32_t i, struct sg_bmsg_writer *w);

#endif
