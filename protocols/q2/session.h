/*
 * The Quake 2 codec's session, shared by its rooms and no one else: the
 * state one session keeps (struct q2c) and what each room offers the
 * others: codec.c (the codec table, decode / encode, the filters' view),
 * oob.c (connectionless packets), netchan.c (headers, fragments),
 * state.c (the level a mid-level recording needs), record.c (.dm2
 * recording), inspect.c (the inspector's dump), capture.c (`slipgate pcap
 * decode`).
 */
#ifndef SG_PROTOCOLS_Q2_SESSION_H
#define SG_PROTOCOLS_Q2_SESSION_H

#include "protocols/q2/q2.h"

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
    struct sg_codec_stats stats;
    struct sg_relinj inj; /* injected texts riding on reliable datagrams */
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
    struct sg_frame frame;
    struct sg_qnc_header hdr;
    const char *oob_name;
    const char *why;
    struct sg_q2_parsed parsed;
    /* Per parsed message, msgs_cap long (grown with the parsed list,
     * msgs with room for the injections after them). */
    struct sg_msg *msgs;
    int *msg_index;
    bool *dropped;
    bool *rec_dropped;
    uint32_t msgs_cap;
    uint8_t copy[MAX_DGRAM];
    size_t copy_len;
    const uint8_t *payload; /* the message (copy + header, or the reassembled one) */
    size_t payload_len;
    size_t header_len;
    char pool[TEXT_POOL];
    struct sg_textpool text; /* over pool */
    uint8_t out[MAX_DGRAM + 2048];
    uint8_t body[SG_Q2_MAX_MSGLEN + 2048];
    char describe[256];

    /* Recording (.dm2, protocol 34 sessions): the demo being written. */
    FILE *rec_out;
    bool rec_started; /* its serverdata is written */
    bool want_nodelta; /* a recording waits for a non-delta frame: ask the server for one */
    /* 35/36 sessions: the client's state, their demos transcoded to 34
     * (transcode.c; made at the first 35/36 server message). */
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

/* codec.c */
int sg_q2__create(void **state);
void sg_q2__destroy(void *state);
int sg_q2__decode(void *state, enum sg_dir dir, const uint8_t *data, size_t len,
                  const struct sg_frame **frame);
int sg_q2__encode(void *state, const struct sg_frame *frame, sg_emit_fn emit, void *ctx,
                  bool *identical);
const char *sg_q2__describe(void *state);

/* state.c: the level, followed from the messages the client accepted. */
void sg_q2__level_clear(struct level *l);
void sg_q2__level_track(struct level *l, const struct sg_q2_parsed *p, const bool *dropped);

/* oob.c: a connectionless packet (in c->copy) decoded into c->frame; the
 * userinfo's name (`info`, `len`) as the player's, when it has one. */
int sg_q2__decode_oob(struct q2c *c, enum sg_dir dir);
void sg_q2__take_name(struct q2c *c, const char *info, size_t len);

/* netchan.c */
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
