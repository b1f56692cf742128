/*
 * One NetQuake session's codec state, shared by the files of the codec
 * (codec.c fills the codec table with them): the netchan's receivers, the
 * frame decoded last, the injections, the level a mid-game recording
 * needs, the recording.  Not for use outside protocols/nq/.
 */
#ifndef SG_PROTOCOLS_NQ_SESSION_H
#define SG_PROTOCOLS_NQ_SESSION_H

#include "protocols/nq/nq.h"

#include "protocols/relinject.h"
#include "protocols/text.h"

#include <stdio.h>

#define NETFLAG_LENGTH_MASK 0x0000ffffu
#define NETFLAG_DATA        0x00010000u
#define NETFLAG_ACK         0x00020000u
#define NETFLAG_NAK         0x00040000u
#define NETFLAG_EOM         0x00080000u
#define NETFLAG_UNRELIABLE  0x00100000u
#define NETFLAG_CTL         0x80000000u

#define MAX_DGRAM   65535         /* the length field's reach */
#define MAX_MESSAGE (1u << 16)    /* a reassembled reliable message (QuakeSpasm 64000, DarkPlaces 65536) */
#define TEXT_RESERVE (SG_RELINJ_MAX * 1100 + 8 * 2100)

/* One direction's reliable stream, as its receiver takes it. */
struct rel {
    bool known;
    uint32_t next;          /* the receiver's receiveSequence */
    uint8_t *buf;           /* the message being assembled (MAX_MESSAGE) */
    size_t len;
    size_t last_at;         /* where the last piece taken starts */
    int pieces;             /* pieces taken of the message */
    bool complete;          /* its EOM piece was taken */
};

struct unrel {
    bool known;
    uint32_t next;
};

struct nqc {
    /* The filters' view of the datagram decoded last (its frame, its
     * texts grown with the message) and the injections: first, for the
     * shared filter hooks.  Injections ride on piece inj.q[dir].carrier
     * when in flight. */
    struct sg_fview v;
    struct sg_codec_stats stats;
    struct sg_nq_proto proto;
    struct rel rel[2];     /* by direction */
    struct unrel unrel[2];
    bool connect_seen, accepted, established;
    bool running; /* the server's netchan has sent since the accept (no disconnect since) */
    int accept_port;
    int unsupported_op;
    uint64_t csqc_raw;  /* DarkPlaces: game-defined bodies kept raw (nq.h) */
    bool rec_waited;    /* DP5-DP7: a recording waited for a level's start */
    char first_error[160];
    /* The status page's (nq_info): the player's name (the client's last
     * `name` command), and the unreliable netchan's loss per direction. */
    char player[64];
    uint64_t lost[2], sequenced[2];

    /* The datagram decoded last. */
    uint32_t flags, seq;
    bool is_reliable;       /* a DATA piece (the frame is its whole message) */
    bool is_resend;
    const char *ctl_name;
    struct sg_nq_parsed parsed;
    uint8_t copy[MAX_DGRAM];
    size_t copy_len;

    uint8_t out[MAX_DGRAM + 8];
    size_t out_len;
    bool out_sent;          /* the datagram decoded last went out rebuilt, as `out` */
    char describe[512];

    /* Recording (.dem): the client's latest view angles (its last clc_move),
     * as the float bits the player's own demo writes, and the demo written. */
    uint32_t view[3];
    FILE *rec_out;   /* the demo being written, or NULL */
    bool rec_started;
    bool rec_signon; /* the demo holds the whole sign-on (svc_signonnum 3) */
    bool rec_game;   /* and a block after it: something a player can play */
    struct level *lv; /* what a demo started mid-level needs (state.c) */
};

/*
 * The level as the client knows it, for a demo that starts mid-level: the
 * serverinfo message (with the cd track and the view entity), the signon's
 * baselines, static entities and sounds in their order, and the latest
 * light styles, player names, frags, colours and stats.  Reset at each
 * serverinfo; kept from the server messages the client takes (a resend
 * once).
 */

struct lvmsg {
    uint8_t len;
    uint8_t b[67]; /* lightstyle: op, style, up to 64 bytes, NUL */
};

struct level {
    bool valid;
    uint8_t *info;      /* serverinfo, cdtrack, setview messages */
    size_t info_len, info_cap;
    uint8_t *pre;       /* a DarkPlaces server's CSQC stufftext lines since the last serverinfo */
    size_t pre_len, pre_cap;
    uint8_t *signon;    /* baselines, static entities and sounds */
    size_t signon_len, signon_cap;
    struct lvmsg style[256], name[256], frags[256], colors[256], stat[256];
    struct lvmsg time;
};

/* codec.c */
void sg_nq__note_error(struct nqc *c, int err, const char *what);

/* netchan.c */
void sg_nq__reset_netchan(struct nqc *c);
int sg_nq__grow(struct nqc *c, size_t msg_len);
int sg_nq__decode(void *state, enum sg_dir dir, const uint8_t *data, size_t len,
                  const struct sg_frame **frame);
int sg_nq__encode(void *state, const struct sg_frame *frame, sg_emit_fn emit, void *ctx,
                  bool *identical);
/* The filters' view: NetQuake's text opcodes and reliable rules. */
extern const struct sg_fview_rules sg_nq__view_rules;

/* oob.c: a control packet (or a DarkPlaces connectionless one) decoded as an OOB frame */
int sg_nq__decode_ctl(struct nqc *c, enum sg_dir dir);

/* state.c: keep what the server message just parsed says of the level */
void sg_nq__track(struct nqc *c, const uint8_t *d, size_t len);
void sg_nq__level_free(struct level *lv);

/* inspect.c */
int sg_nq__dump(void *state, const struct sg_frame *frame, enum sg_dump_level level, bool json,
                FILE *out);

/* record.c */
const char *sg_nq__demo_ext(void *state);

#endif
