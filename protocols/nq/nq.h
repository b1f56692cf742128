/*
 * NetQuake (protocol 15, FitzQuake 666, RMQ 999): the message decoder's
 * shared declarations.
 *
 * As for QuakeWorld (protocols/qw/qw.h), the decoded form of a message is
 * a list of fields in wire order, each with its name, its kind (a bmsg
 * number kind, a string with the way it ended, or raw bytes) and its raw
 * value; writing every field back from its raw form gives the bytes that
 * came (STYLE.md "Keep the wire's own choices").  The protocol (and the
 * 999 flags, which select the coordinate and angle sizes) is taken from
 * svc_serverinfo, also in the middle of a message: the messages after it
 * are read with the new sizes, as the client reads them.
 */
#ifndef SG_PROTOCOLS_NQ_NQ_H
#define SG_PROTOCOLS_NQ_NQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "protocols/bmsg.h"
#include "protocols/codec.h"
#include "protocols/msglist.h"

#define SG_NQ_PROTOCOL_NETQUAKE 15
#define SG_NQ_PROTOCOL_FITZQUAKE 666
#define SG_NQ_PROTOCOL_RMQ 999
/* DarkPlaces' own protocols (protocol.c): DP5, DP6, DP7 (Nexuiz 2.5, Xonotic). */
#define SG_NQ_PROTOCOL_DP5 3502
#define SG_NQ_PROTOCOL_DP6 3503
#define SG_NQ_PROTOCOL_DP7 3504

/* What the parser accepts at all: fields and messages in one stream. */
#define SG_NQ_MAX_FIELDS (1u << 20)
#define SG_NQ_MAX_MSGS   (1u << 18)

/* The protocol one stream is read with, its sizes worked out once. */
struct sg_nq_proto {
    int32_t protocol; /* 15, 666, 999, or another number serverinfo gave */
    uint32_t flags;   /* 999: the PRFL_ flags */
    uint8_t coord;      /* enum sg_bmsg_num: MSG_ReadCoord */
    uint8_t angle;      /* enum sg_bmsg_num: MSG_ReadAngle */
    uint8_t move_angle; /* clc_move's angles (angle8 in 15, angle16 or float after) */
    bool fitz;          /* 666 / 999: the extended bits and messages */
    bool dp;            /* a DarkPlaces server (its stufftext said so): on 15, what
                         * only a CSQC program reads is kept raw (as on DP5-DP7) */
    uint8_t dpn;        /* DarkPlaces' own protocol 5, 6 or 7 (DP5-DP7), else 0 */
};

/* Select `protocol` (and `flags`, used by 999 only); `dp` is cleared
 * (set for DP5-DP7). */
void sg_nq_proto_set(struct sg_nq_proto *p, int32_t protocol, uint32_t flags);
/* Is `protocol` one the decoder reads (15, 666, 999, DP5-DP7)?  Inline:
 * the parser asks it for every message. */
static inline bool sg_nq_protocol_known(int32_t protocol)
{
    return protocol == SG_NQ_PROTOCOL_NETQUAKE || protocol == SG_NQ_PROTOCOL_FITZQUAKE ||
           protocol == SG_NQ_PROTOCOL_RMQ || (protocol >= SG_NQ_PROTOCOL_DP5 &&
                                              protocol <= SG_NQ_PROTOCOL_DP7);
}
/* The name DarkPlaces gives a protocol number its server speaks that the
 * decoder does not read ("DarkPlaces DP3"), or NULL. */
const char *sg_nq_dp_protocol_name(int32_t protocol);

/* Fields and messages: protocols/msglist.h (each message's `at` is set;
 * fields point into the stream). */

/* A parsed message stream; the arrays grow as needed (sg_nq_parsed_free). */
struct sg_nq_parsed {
    struct sg_field *fields;
    uint32_t nfields, fields_cap;
    struct sg_fmsg *msgs;
    uint32_t nmsgs, msgs_cap;
    /* What the parser learnt (S2C). */
    bool serverinfo;   /* a serverinfo was in it: a new level */
    char level[64];    /* its map name ("start" of "maps/start.bsp") */
    int signon;        /* the last svc_signonnum, or -1 */
    bool disconnect;   /* svc_disconnect / clc_disconnect was in it */
    /* An opcode the parser cannot decode (the rest relayed), or -1. */
    int unsupported_op;
    /* DarkPlaces (DP5-DP7, 15): game-defined bodies (CSQC entities, CSQC temp entities)
     * kept as raw bytes, each up to where the rest of the stream parses. */
    uint32_t csqc_raw;
    uint32_t trials; /* the stream's tries at such an end (parse.h) */
};

void sg_nq_parsed_free(struct sg_nq_parsed *p);

/*
 * Parse a whole S2C or C2S message stream with `proto` (S2C: updated by a
 * serverinfo in it).  The fields point into `data`, which must outlive
 * them.  Returns 0 or a negative error: SG_E_MALFORMED (an opcode or a
 * value the receiver rejects; the rest is one unparsed field),
 * SG_E_OVERFLOW (a read past the end), -ENOMEM, SG_E_TOOBIG.
 */
int sg_nq_parse(enum sg_dir dir, struct sg_nq_proto *proto, const uint8_t *data, size_t len,
                struct sg_nq_parsed *out);

/* Write the messages back (each not dropped, in order). */
int sg_nq_write(const struct sg_nq_parsed *p, const bool *dropped, struct sg_bmsg_writer *w);

/* How the dumps show a field (sg_field_put): ` name=value`, a DATA field "N bytes" in JSON. */
extern const struct sg_field_style sg_nq_field_style;

/* Opcode names: "svc_print", "clc_move", "svc_update" (>= 128); "svc_unknown" out of range. */
const char *sg_nq_svc_name(int op);
const char *sg_nq_clc_name(int op);

/* The registry entry (codec.c) and its relay hook (relay.c): the accept's port move. */
extern const struct sg_codec sg_nq_codec;
int sg_nq_relay_handshake(union sg_relay_state *rs, const struct sg_relay_ctx *ctx,
                          enum sg_dir dir, const uint8_t *data, size_t len,
                          struct sg_relay_move *out);

/* Recording hooks (codec.c), also used by the capture decoder (capture.c).
 * sg_nq_record_end returns 1 when the demo holds nothing a player can play. */
int sg_nq_record(void *state, const struct sg_frame *frame, FILE *out);
int sg_nq_record_end(void *state, FILE *out);
extern const struct sg_capture_impl sg_nq_capture_impl;

/* ---- .dem files (demo.c, offline.c) ---- */

#define SG_NQ_DEM_MAX_BLOCK (1u << 20) /* a block longer than this is not a demo's */

/* Is `head` the start of a .dem: an optional '-', digits, '\n'?  SG_DEMO_PROBE_*. */
int sg_nq_dem_probe(const uint8_t *head, size_t len);

extern const struct sg_demo_impl sg_nq_demo_impl;

#endif
