/*
 * The Quake 2 codec's session, shared by its rooms and no one else: the
 * state one session keeps (struct q2c) and what each room offers the
 * others: codec.c (the codec table, the session's life), oob.c
 * (connectionless packets), netchan.c (headers, fragments, decode /
 * encode),
 * state.c (the level a mid-level recording needs), record.c (.dm2
 * recording), inspect.c (the inspector's dump), capture.c (`slipgate pcap
 * decode`).
 */
#ifndef SG_PROTOCOLS_Q2_SESSION_H
#define SG_PROTOCOLS_Q2_SESSION_H

#include "protocols/q2/q2.h"
#include "protocols/q2/bits.h"

#include "protocols/qnetchan.h"
#include "protocols/relinject.h"
#include "protocols/text.h"

#define MAX_DGRAM  (SG_Q2_MAX_MSGLEN + 64)
#define TEXT_POOL  (2 * SG_Q2_MAX_MSGLEN + SG_Q2_MAX_MSGS)
#define MAX_PIECES 64

#define SG_Q2_CS_OLD 2080      /* configstrings of protocol 34 */
#define SG_Q2_EDICTS_OLD 1024  /* entities of protocol 34 */
#define INJECT_LIMIT 1400 /* a datagram carrying injections stays within the old MAX_MSGLEN */


struct chan {
    struct sg_qnc_chan rx; /* what the receiver accepted last */
    /* new netchan: the message being reassembled */
    bool assembling;
    uint32_t frag_seq;
    uint8_t *frag; /* SG_Q2_MAX_MSGLEN */
    size_t frag_len;
    /* the datagrams it came in (for an unchanged rebuild) */
    uint8_t *pieces; /* MAX_DGRAM * ... : concatenated */
    size_t pieces_len;
    uint32_t piece_len[MAX_PIECES];
    unsigned npieces;
    size_t piece_payload; /* the first fragment's payload size (the sender's cut) */
};

struct q2c {
    /* The filters' view of the datagram decoded last (its frame, its
     * texts over pool) and the injections riding on reliable datagrams:
     * first, for the shared filter hooks. */
    struct sg_fview v;
    struct sg_codec_stats stats;
    int protocol;    /* from the connect (0 unknown) */
    bool kex;        /* a rerelease (KEX) connect (2022/2023): relayed, not decoded */
    int minor;       /* R1Q2 / Q2PRO minor from the connect */
    int qport;       /* from the connect, -1 unknown */
    int nctype;      /* 1: Q2PRO's new netchan */
    bool zlib;
    int32_t challenge;
    bool accepted, established;
    struct sg_q2_variant sv; /* S2C layout (serverdata) */
    struct sg_q2_variant cv; /* C2S layout (connect) */
    struct chan chan[2];
    int unsupported_op;
    char first_error[160];
    /* The status page's (q2_info): the userinfo's name (the connect's, then
     * the client's clc_userinfo), and the netchan's loss per direction. */
    char player[64];
    uint64_t lost[2], sequenced[2];

    /* The datagram decoded last. */
    struct sg_qnc_header hdr;
    const char *oob_name;
    struct sg_q2_parsed parsed;
    bool *rec_dropped; /* v.msgs_cap long */
    uint8_t copy[MAX_DGRAM];
    size_t copy_len;
    const uint8_t *payload; /* the message (copy + header, or the reassembled one) */
    size_t payload_len;
    size_t header_len;
    char pool[TEXT_POOL];
    uint8_t out[MAX_DGRAM + 2048];
    uint8_t body[SG_Q2_MAX_MSGLEN + 2048];
    char describe[256];

    /* Recording (.dm2, protocol 34 sessions): the demo being written. */
    FILE *rec_out;
    bool rec_started; /* its serverdata is written */
    bool want_nodelta; /* a recording waits for a non-delta frame: ask the server for one */
    /* 35/36 sessions: the client's state, their demos transcoded to 34
     * (state.c, record.c; made at the first 35/36 server message). */
    struct sg_q2_trans *trans;

    /* The level as the client knows it (S2C, protocol 34): what a demo that
     * starts mid-level is given first. */
    struct level {
        bool have;
        int32_t servercount;
        char gamedir[64], levelname[128];
        int32_t playernum;
        char *cs[SG_Q2_CS_OLD]; /* configstrings (NULL: empty) */
        uint8_t *base[SG_Q2_EDICTS_OLD]; /* spawnbaseline messages as written (NULL: none) */
        uint16_t base_len[SG_Q2_EDICTS_OLD];
    } lvl;
};

/* ---- 35/36 sessions: the client's state (state.c), written as 34 demos
 * (record.c) ---- */


#define CS_COUNT       2080 /* non-extended configstrings */
#define CS_NAME        0
#define CS_MAXCLIENTS  30
#define MAX_EDICTS     1024
#define UPDATE_BACKUP  16
#define UPDATE_MASK    (UPDATE_BACKUP - 1)
#define RING           4096 /* entity states of the kept frames */
#define RING_MASK      (RING - 1)
#define MAX_PKT_FRAMES 8    /* frames remembered per server message */
#define BLOCK_SOFT     SG_Q2_DEMO_BLOCK /* what every player reads in a block */
#define PACKED_BSP     31

#define RF_FRAMELERP        (1u << 6)
#define RF_BEAM             (1u << 7)
#define RF_GLOW             (1u << 9)
#define RF_SHELL_LITE_GREEN (1u << 19)

/* U_* and PS_*: protocols/q2/bits.h */

struct es {
    uint16_t number;
    int32_t origin[3], old_origin[3]; /* coordinates * 8 */
    uint16_t angles[3];               /* 16-bit angles (an 8-bit one << 8) */
    uint16_t model[4];
    uint16_t frame;
    uint32_t skin, effects, renderfx, solid;
    uint16_t sound;
    uint8_t event;
};

struct ps {
    uint8_t pm_type;
    int32_t origin[3], velocity[3];
    uint16_t pm_time, pm_flags;
    int16_t gravity, delta_angles[3];
    int8_t viewoffset[3], kick[3], gunoffset[3], gunangles[3];
    uint16_t viewangles[3];
    uint16_t gunindex;
    uint8_t gunframe, blend[4], fov, rdflags;
    int16_t stats[32];
};

struct frame {
    bool valid;
    int32_t number;
    uint8_t suppress; /* the 34 suppress count */
    uint8_t areabytes, areabits[32];
    struct ps ps;
    uint32_t first, num; /* entity states in the ring */
};

struct sg_q2_trans {
    /* the level */
    bool have;      /* a non-extended 35/36 serverdata was seen */
    bool extended;  /* an extended one: refused */
    bool longsolid; /* 32-bit solids on the wire (repacked to 16 bits) */
    int protocol;
    int32_t servercount, playernum;
    char gamedir[64];
    char *cs[CS_COUNT];
    bool have_base[MAX_EDICTS];
    struct es base[MAX_EDICTS];
    struct frame frames[UPDATE_BACKUP];
    struct es ring[RING];
    uint32_t nents;
    /* the frames of the message tracked last: its message index, frame slot */
    struct {
        uint32_t msg;
        int32_t number;
    } pkt[MAX_PKT_FRAMES];
    unsigned npkt;
    /* the demo being written */
    FILE *out;
    bool started;
    bool have_last;
    struct ps last_ps;
    struct es last_ents[MAX_EDICTS];
    uint32_t last_num;
    int32_t frames_written;
    uint32_t frames_dropped, others_dropped;
    uint8_t block[SG_Q2_MAX_MSGLEN];
    uint8_t one[SG_Q2_MAX_MSGLEN]; /* one message, before it joins the block */
};


/* codec.c: the session's life; room for `n` parsed messages (and the
 * injections after them) in the per-message arrays (0 or -ENOMEM). */
int sg_q2__create(void **state);
void sg_q2__destroy(void *state);
int sg_q2__msgs_room(struct q2c *c, uint32_t n);
const char *sg_q2__describe(void *state);

/* state.c: the level, followed from the messages the client accepted; an
 * entity's header in the parser's fields (bits1..bits4, number): the next field. */
uint32_t sg_q2__ent_header(const struct sg_field *f, uint32_t k, uint32_t n, uint64_t *bits,
                           int *num);
void sg_q2__level_clear(struct level *l);
void sg_q2__level_track(struct level *l, const struct sg_q2_parsed *p, const bool *dropped);

/* oob.c: a connectionless packet (in c->copy) decoded into c->frame; the
 * userinfo's name (`info`, `len`) as the player's, when it has one. */
int sg_q2__decode_oob(struct q2c *c, enum sg_dir dir);
void sg_q2__take_name(struct q2c *c, const char *info, size_t len);

/* netchan.c: the codec table's decode, must_encode and encode; the header
 * read by the session's rules; a fragmented message's datagrams kept. */
int sg_q2__decode(void *state, enum sg_dir dir, const uint8_t *data, size_t len,
                  const struct sg_frame **frame);
bool sg_q2__must_encode(void *state, const struct sg_frame *frame);
int sg_q2__encode(void *state, const struct sg_frame *frame, sg_emit_fn emit, void *ctx,
                  bool *identical);
int sg_q2__read_header(struct q2c *c, enum sg_dir dir, const uint8_t *d, size_t n, struct sg_qnc_header *h);
void sg_q2__keep_piece(struct chan *ch, const uint8_t *d, size_t n);

/* record.c */
const char *sg_q2__demo_ext(void *state);
int sg_q2__record(void *state, const struct sg_frame *frame, FILE *out);
int sg_q2__record_end(void *state, FILE *out);

/* inspect.c */
int sg_q2__dump(void *state, const struct sg_frame *frame, enum sg_dump_level level, bool json,
                FILE *out);

/* capture.c */
extern const struct sg_capture_impl sg_q2_capture_impl;

#endif
