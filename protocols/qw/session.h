/*
 * The QuakeWorld codec's session, shared by codec.c (the codec table, the
 * session's life), netchan.c (decode / encode) and inspect.c (the
 * inspector's dump), and no one else.
 */
#ifndef SG_PROTOCOLS_QW_SESSION_H
#define SG_PROTOCOLS_QW_SESSION_H

#include "protocols/qw/qw.h"

#include "protocols/relinject.h"
#include "protocols/text.h"

#define TEXT_POOL (SG_QW_MAX_DGRAM * 2 + SG_QW_MAX_MSGS)

struct qwc {
    /* The filters' view of the datagram decoded last (its frame, its
     * texts over pool) and the injections riding on reliable datagrams:
     * first, for the shared filter hooks. */
    struct sg_fview v;
    struct sg_codec_stats stats;
    struct sg_qw_ext offered, chosen, active;
    bool have_serverdata;
    struct sg_qw_variant var;
    struct sg_qnc_chan chan[2]; /* the receiver of each direction */
    bool accepted, established;
    int qport;
    int32_t challenge;
    int unsupported_op; /* reported once */
    bool unsupported_noted;
    char first_error[160];

    /* The datagram decoded last. */
    struct sg_qnc_header hdr;
    struct sg_qw_oob oob;
    struct sg_qw_parsed parsed;
    /* The parsed lists (parsed.fields, parsed.msgs): they start at a
     * datagram's usual worth, double as one needs (up to SG_QW_MAX_*) and
     * keep their size.  Per parsed message, msgs_cap long: */
    struct sg_field *fields; /* fields_cap */
    struct sg_fmsg *pmsgs;    /* pmsgs_cap */
    uint32_t fields_cap, pmsgs_cap;
    uint8_t copy[SG_QW_MAX_DGRAM];
    size_t copy_len;
    size_t payload_at; /* header bytes */
    char pool[TEXT_POOL];

    uint8_t out[SG_QW_MAX_DGRAM + 2048];
    size_t out_len;
    bool out_sent; /* the frame decoded last went out rebuilt, as `out` */
    char describe[256];

    /* Recording (record.c, state.c). */
    struct sg_qw_recorder rec;
    struct sg_qw_track *track;
    FILE *rec_out;
    char level[64]; /* the map's name, from its serverdata */
    char player[64];   /* the userinfo's name of the connect packet, "" until then */
    uint64_t lost[2], sequenced[2]; /* the netchan's loss per direction (qw_info) */
    char hostname[64]; /* the server info's hostname (fullserverinfo), "" until then */
};

/* inspect.c */
/* Room for `fields` fields and `pmsgs` messages in the parsed lists, and
 * for each message's view beside them (codec.c): 0 or -ENOMEM. */
int sg_qw__lists_room(struct qwc *c, uint32_t fields, uint32_t pmsgs);
/* The codec table's decode and encode (netchan.c). */
int sg_qw__decode(void *state, enum sg_dir dir, const uint8_t *data, size_t len,
                  const struct sg_frame **frame);
int sg_qw__encode(void *state, const struct sg_frame *frame, sg_emit_fn emit, void *ctx,
                  bool *identical);
int sg_qw__dump(void *state, const struct sg_frame *frame, enum sg_dump_level level, bool json,
                FILE *out);

#endif
