/*
 * Quake 2 (protocols 34, 35 = R1Q2, 36 = Q2PRO; demo protocols 26 and
 * 3434..3436): the codec's shared declarations.
 *
 * As for QuakeWorld (protocols/qw/qw.h), the decoded form of a message is
 * a list of fields in wire order, each with its name, its kind (a number
 * of a bmsg kind, a string, raw bytes) and its raw value, so that writing
 * the fields back gives the bytes that came (STYLE.md "Keep the wire's own
 * choices").  The field widths depend on what the serverdata negotiated
 * (struct sg_q2_variant), worked out once per serverdata.
 *
 * Compressed data (svc_zpacket) is kept twice: the zpacket message holds
 * the deflated bytes as they came, and the inflated stream is parsed into
 * messages of its own that name the zpacket as their parent.  The writer
 * writes the original deflated bytes unless one of those messages was
 * dropped or changed; then it deflates the rebuilt contents again.
 *
 * A compressed download (svc_zdownload) is file data, not messages: its
 * chunks are inflated as the client inflates them (one raw-deflate stream
 * per file from Q2PRO, one per chunk from R1Q2, carried from message to
 * message in the parsed stream's `zdl`), bounded by SG_Q2_ZDL_MAX per
 * message, and the count of bytes each gave is a value field, "inflated";
 * the chunk is written back as it came.
 */
#ifndef SG_PROTOCOLS_Q2_Q2_H
#define SG_PROTOCOLS_Q2_Q2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "protocols/bmsg.h"
#include "protocols/codec.h"
#include "protocols/msglist.h"

#define SG_Q2_MAX_MSGLEN  0x8000 /* q2pro MAX_MSGLEN: a message, a zpacket's contents, a demo block */
#define SG_Q2_ZPOOL       (4 * SG_Q2_MAX_MSGLEN) /* inflated zpacket contents per stream */
/* Every message takes at least its opcode byte, in the message or in the
 * inflated pool: no stream the parser accepts holds more messages than
 * that, so the message cap never stops a parse early (a stream whose
 * zpackets inflate to more than the pool fails whole, SG_E_TOOBIG).  The
 * field arrays are sized the same (a field takes a byte but for the
 * values of a bit-packed move, whose bytes are one DATA field beside
 * them); running out of either is an error, never a shorter list. */
#define SG_Q2_MAX_MSGS    (SG_Q2_MAX_MSGLEN + SG_Q2_ZPOOL)
#define SG_Q2_MAX_FIELDS  (2 * SG_Q2_MAX_MSGS)
/* What the lists hold at first: they double as a stream needs, up to the
 * caps, and keep their size across streams (a session does not allocate
 * once it has met its largest datagram). */
#define SG_Q2_MSGS_START   256
#define SG_Q2_FIELDS_START 1024
#define SG_Q2_ZDL_MAX     (512u * 1024) /* bytes one svc_zdownload may inflate to (no zip bomb) */
#define SG_Q2_KEX_EDICTS  8192 /* rerelease MAX_EDICTS */

/* svc opcodes (q2pro inc/common/protocol.h). */
enum {
    SG_Q2_SVC_BAD, SG_Q2_SVC_MUZZLEFLASH, SG_Q2_SVC_MUZZLEFLASH2, SG_Q2_SVC_TEMP_ENTITY,
    SG_Q2_SVC_LAYOUT, SG_Q2_SVC_INVENTORY, SG_Q2_SVC_NOP, SG_Q2_SVC_DISCONNECT,
    SG_Q2_SVC_RECONNECT, SG_Q2_SVC_SOUND, SG_Q2_SVC_PRINT, SG_Q2_SVC_STUFFTEXT,
    SG_Q2_SVC_SERVERDATA, SG_Q2_SVC_CONFIGSTRING, SG_Q2_SVC_SPAWNBASELINE, SG_Q2_SVC_CENTERPRINT,
    SG_Q2_SVC_DOWNLOAD, SG_Q2_SVC_PLAYERINFO, SG_Q2_SVC_PACKETENTITIES,
    SG_Q2_SVC_DELTAPACKETENTITIES, SG_Q2_SVC_FRAME, SG_Q2_SVC_ZPACKET, SG_Q2_SVC_ZDOWNLOAD,
    SG_Q2_SVC_GAMESTATE, SG_Q2_SVC_SETTING, SG_Q2_SVC_CONFIGSTRINGSTREAM,
    SG_Q2_SVC_BASELINESTREAM, SG_Q2_SVC_COUNT
};

/* clc opcodes. */
enum {
    SG_Q2_CLC_BAD, SG_Q2_CLC_NOP, SG_Q2_CLC_MOVE, SG_Q2_CLC_USERINFO, SG_Q2_CLC_STRINGCMD,
    SG_Q2_CLC_SETTING, SG_Q2_CLC_MOVE_NODELTA = 10, SG_Q2_CLC_MOVE_BATCHED,
    SG_Q2_CLC_USERINFO_DELTA, SG_Q2_CLC_COUNT
};

/* print levels */
#define SG_Q2_PRINT_CHAT 3

/* Entity-state flags the serverdata selects (q2pro msgEsFlags_t, the ones that change widths). */
#define SG_Q2_ES_LONGSOLID    0x1u
#define SG_Q2_ES_SHORTANGLES  0x2u
#define SG_Q2_ES_EXTENSIONS   0x4u
#define SG_Q2_ES_EXTENSIONS_2 0x8u
#define SG_Q2_ES_KEX_FLOAT    0x10u /* rerelease 2023: float positions (temp entities, sounds) */
/* Player-state flags (msgPsFlags_t). */
#define SG_Q2_PS_EXTENSIONS   0x1u
#define SG_Q2_PS_EXTENSIONS_2 0x2u
#define SG_Q2_PS_MOREBITS     0x4u

/* What one serverdata (or connect) negotiated. */
struct sg_q2_variant {
    int protocol;   /* the stream's layout: 26, 34, 35, 36 (extended demos: 34) */
    int wire;       /* the number in the serverdata (3434 for an extended demo) */
    int minor;      /* R1Q2 / Q2PRO minor version */
    bool extended;  /* Q2PRO extended limits (cs_remap_new) */
    uint8_t es, ps; /* SG_Q2_ES_*, SG_Q2_PS_* */
    int cs_end;     /* configstring count: the gamestate loop's end index */
    bool known;     /* a serverdata (or connect) was seen */
    int kex;        /* rerelease (KEX) demo layout: 2022 (as shipped in demos), 2023; else 0 */
};

/*
 * A server's answer to the connectionless "status" (status.c's query):
 * "print\n", the serverinfo (`\key\value...`) and a newline, then one
 * line per player, `FRAGS PING "NAME"` and a newline (yquake2
 * SV_StatusString; q2pro's sv_status_show 1 lists none).  Fills `out`
 * with `hostname`, `mapname`, `maxclients` and the player lines counted;
 * 0, or SG_E_MALFORMED for anything else (cut short, a NUL inside, a line
 * not in that form).  `data` is borrowed for the call.
 */
int sg_q2_status_parse(const uint8_t *data, size_t len, struct sg_codec_server *out);

/* The variant of protocol `protocol` with `minor`, before any Q2PRO flags. */
void sg_q2_variant_init(struct sg_q2_variant *v, int protocol, int minor);

/* Fields and messages: protocols/msglist.h.  Quake 2's own: VALUE fields
 * (bit-packed moves), a string the message ended (`end` SG_BMSG_STR_END,
 * written back without its 0), each message's `parent` and `changed`, and
 * `sum_ok` for a 34 clc_move (sum_sequence says when it is recomputed). */

struct sg_q2_parsed {
    struct sg_field *fields; /* fields_cap, grown up to SG_Q2_MAX_FIELDS */
    uint32_t nfields, fields_cap;
    struct sg_fmsg *msgs; /* msgs_cap, grown up to SG_Q2_MAX_MSGS */
    uint32_t nmsgs, msgs_cap;
    uint8_t *zpool; /* SG_Q2_ZPOOL: inflated zpacket contents */
    size_t zpool_len;
    struct sg_q2_zdl *zdl; /* svc_zdownload's inflate stream, across messages (made on first use) */
    /* What the parser learnt (S2C). */
    bool serverdata;
    char level[64];
    int frames;     /* svc_frame messages */
    int32_t frame, deltaframe; /* the last frame's numbers (-1 none) */
    /* C2S: the datagram's sequence (set by the caller: move checksums). */
    uint32_t sequence;
    uint32_t moves, moves_bad;
    int unsupported_op; /* an opcode that could not be decoded, else -1 */
    /* The sequence the 34 move checksums were checked against: the writer
     * recomputes a matching byte when `sequence` differs (renumbered) or
     * its message is marked changed, and else writes the byte it read. */
    uint32_t sum_sequence;
    void *inflater; /* zpackets: one zlib stream, reset for each (NULL until the first) */
    /* Rerelease (KEX) demos: the stream was read with the KEX layout (names
     * of opcodes 21..33), and which entities have a nonzero solid (edicts,
     * then baselines: 2022 reads a zero-solid entity's origin as shorts). */
    bool kex;
    uint8_t *kex_solid; /* 2 * SG_Q2_KEX_EDICTS / 8 bytes (made on first use) */
};

/* Allocate / free the arrays of a parsed stream (and its zlib stream). */
int sg_q2_parsed_init(struct sg_q2_parsed *p);
void sg_q2_parsed_free(struct sg_q2_parsed *p);

/*
 * Parse a whole S2C or C2S message stream with `v`, which a serverdata
 * in the stream updates.  Returns 0 or a negative error (then the stream
 * is only partly described, and the last message is unparsed; -ENOMEM
 * when a list could not grow).
 */
int sg_q2_parse(enum sg_dir dir, struct sg_q2_variant *v, const uint8_t *data, size_t len,
                struct sg_q2_parsed *out);

/* Write the messages back (each not dropped, in order; `dropped` may be NULL). */
int sg_q2_write(const struct sg_q2_parsed *p, const bool *dropped, struct sg_bmsg_writer *w);

/* The checksum byte of a 34 clc_move over `len` bytes after it, for datagram `sequence`. */
uint8_t sg_q2_move_checksum(const uint8_t *move, size_t len, uint32_t sequence);
/* Its CRC-16-CCITT (initial 0xffff) of `n` bytes: four bytes a step, and
 * the byte-at-a-time reference the tests hold it to. */
uint16_t sg_q2__crc16(const uint8_t *p, size_t n);
uint16_t sg_q2__crc16_bytewise(const uint8_t *p, size_t n);

/* Opcode names: "svc_print", "clc_move"; "svc_unknown" out of range. */
const char *sg_q2_svc_name(int op);
/* The rerelease (KEX) demo layout's names (21..33 differ). */
const char *sg_q2_svc_name_kex(int op);
const char *sg_q2_clc_name(int op);

/* Raw deflate (windowBits -15, as R1Q2 and Q2PRO): 0 and *outlen, or a negative error. */
int sg_q2_deflate(const uint8_t *in, size_t inlen, uint8_t *out, size_t cap, size_t *outlen);

/* ---- relay hooks (relay.c) ---- */

bool sg_q2_is_connect(const uint8_t *d, size_t n);
/*
 * The door (codec.h): Q2PRO answers a banned address's `connect` with the
 * print "Your IP address is banned from this server.\nConnection
 * refused.\n" (server/main.c, SVC_DirectConnect); remote administration
 * is `rcon` (SV_ConnectionlessPacket, exact case).
 */
size_t sg_q2_banned_reply(const uint8_t *data, size_t len, uint8_t *out, size_t cap);
size_t sg_q2_full_reply(const uint8_t *data, size_t len, uint8_t *out, size_t cap);
bool sg_q2_is_admin(const uint8_t *data, size_t len);
int sg_q2_client_qport(union sg_relay_state *rs, const uint8_t *d, size_t n, bool learn);
bool sg_q2_client_follows(const union sg_relay_state *rs, const void *state, const uint8_t *d,
                          size_t n, char *why, size_t whylen);

/* ---- 35/36 sessions recorded as 34 demos (state.c tracks, record.c writes) ---- */

struct sg_q2_trans;

/* Create / destroy the state a 35/36 session's client keeps (destroy accepts NULL). */
int sg_q2_trans_create(struct sg_q2_trans **t);
void sg_q2_trans_destroy(struct sg_q2_trans *t);

/* Follow one accepted, parsed server message (`v`: the layout it was parsed with). */
void sg_q2_trans_track(struct sg_q2_trans *t, const struct sg_q2_parsed *p,
                       const struct sg_q2_variant *v);

/* An extended Q2PRO session: not transcoded (recording refused). */
bool sg_q2_trans_refused(const struct sg_q2_trans *t);

/*
 * Write the message tracked last (`p`, without the messages `dropped`
 * marks; may be NULL) to the 34 demo `out` (borrowed for the call): its
 * preamble first when `out` is new to it.  Returns 1 (a block written),
 * 0 (nothing yet: a demo starts at a valid frame) or a negative error.
 */
int sg_q2_trans_record(struct sg_q2_trans *t, const struct sg_q2_parsed *p, const bool *dropped,
                       FILE *out);

/* The demo `out` ended (a later file at the same address starts anew). */
void sg_q2_trans_record_end(struct sg_q2_trans *t, FILE *out);

/* Frames written to the current demo. */
int32_t sg_q2_trans_frames_written(const struct sg_q2_trans *t);

/*
 * What every demo player reads: a block of at most SG_Q2_DEMO_BLOCK bytes.
 * A player replays a block as one datagram of its local server, whose
 * netchan header (8 bytes) and the block must fit in the original 1400
 * bytes (Yamagi Quake II drops a larger one, or stops at more than 1400);
 * Q2PRO's client writes at most 1390 (1400 less its worst-case header).
 */
#define SG_Q2_DEMO_BLOCK 1390

/* A server's stufftext in a demo, as a client's own demo holds it. */
enum sg_q2_demo_stuff {
    SG_Q2_STUFF_KEEP,     /* as it came */
    SG_Q2_STUFF_PRECACHE, /* `precache <spawncount>`: written as the plain `precache` */
    SG_Q2_STUFF_LEAVE,    /* `cmd configstrings|baselines ...`: the sign-on's requests, left out */
};
enum sg_q2_demo_stuff sg_q2_demo_stufftext(const uint8_t *text, size_t len);

/* ---- demos (offline.c) ---- */

extern const struct sg_demo_impl sg_q2_demo_impl;

/* One message of `p`: a dump line (text, newline included) or a JSON object
 * (no newline), marked removed when a filter removed it. */
void sg_q2_dump_msg(FILE *out, const struct sg_q2_parsed *p, uint32_t i, enum sg_dir dir,
                    bool json, bool removed);

#endif
