/*
 * The Quake 3 codec's session, shared by its rooms and no one else: the
 * state one session keeps (struct q3c) and what each room offers the
 * others: codec.c (the codec table, create / destroy, decode / encode),
 * view.c (the filters' view: the frame's messages, their changes, the
 * messages translated for the receiver), relay.c (the relay hooks).
 */
#ifndef SG_PROTOCOLS_Q3_SESSION_H
#define SG_PROTOCOLS_Q3_SESSION_H

#include "protocols/codec.h"
#include "protocols/q3/demo.h"
#include "protocols/q3/netchan.h"
#include "protocols/q3/renum.h"
#include "protocols/q3/state.h"
#include "protocols/q3/svmsg.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct q3c {
    struct sg_q3_netchan nc;
    struct sg_q3_frame qf;
    struct sg_q3_state *st;
    struct sg_q3_svmsg sv;
    int parse_err; /* of the last server message */
    struct sg_frame frame;
    struct sg_codec_stats stats;
    char first_error[200];
    char describe[320];
    char level[64];         /* the map name of the server info, as of level_changes: */
    uint32_t level_changes; /* the state's cs_changes when `level` was read */
    bool level_read;
    struct sg_codec_info game; /* the last server name, level and player name known (q3_info) */
    uint64_t headers_only; /* datagrams of a protocol not decoded, relayed with the header read */
    bool noticed;          /* take_notice() has said that the protocol is relayed headers only */

    /* admission: the server treats the client as connected (a connectResponse,
     * or sequenced traffic, which a server sends only to connected clients);
     * established once the client's own sequenced traffic followed */
    bool server_in_game, established;

    /* the datagram decoded last, to compare a rebuilt one against */
    size_t last_len;
    uint8_t last[SG_Q3_MAX_MSGLEN + 64];

    /* rebuilding */
    uint8_t buf[SG_Q3_MAX_MSGLEN];
    struct sg_q3_datagrams dg;

    /* recording */
    FILE *rec_out;
    struct sg_q3_demo_writer writer;
    struct sg_q3_recorder rec;
    const uint8_t *out_msg; /* the message as it went out (rebuilt, or as received) */
    size_t out_len;

    /* filters: the frame's messages, and reliable numbering for both sides */
    struct sg_msg *msgs;
    int32_t *msg_seq; /* reliable sequence of msgs[i] (sender's numbers), or -1 */
    int32_t *msg_ref; /* svmsg gamestate item of a configstring, or -1 */
    unsigned nmsgs, cap_msgs;
    char *arena; /* texts of msgs (offsets while building) */
    size_t arena_len, arena_cap;
    char *changed[128]; /* texts filters set during this frame, and injected ones it carried */
    int nchanged;
    struct sg_q3_renum sc; /* server commands: server -> client */
    struct sg_q3_renum cc; /* client commands: client -> server */
    bool translating;      /* numbering or texts differ between the two sides */
    int32_t ack_out;       /* the frame's reliable acknowledgement, in the receiver's numbers */
    int32_t gs_seq_out;    /* a gamestate's commandSequence in the client's numbers */
    char (*cmd_copies)[SG_Q3_MAX_STRING_CHARS]; /* scratch for translating client commands */
};

/* ---- view.c: the filters' view ---- */

/* A new frame: no messages, no kept texts. */
void sg_q3__msgs_reset(struct q3c *c);
/* Append a message; text and command become arena offsets (fixed up by
 * sg_q3__msgs_done); NULL when out of memory. */
struct sg_msg *sg_q3__msg_add(struct q3c *c, enum sg_msg_kind kind, const char *name,
                              int32_t number, const char *text, size_t len, const char *command,
                              int32_t seq, int32_t ref);
/* The frame's messages final: their texts point into the arena. */
void sg_q3__msgs_done(struct q3c *c, struct sg_frame *f);
/* The messages of the server message decoded last; new reliable commands
 * are numbered for the client. */
void sg_q3__list_server_message(struct q3c *c);
/* The messages of the client message decoded last. */
void sg_q3__list_client_message(struct q3c *c);
/* Write the message again from its decoded form into c->buf (translated
 * when filters changed the stream); its length or a negative error. */
int sg_q3__rewrite_message(struct q3c *c, enum sg_dir dir);

/* The codec table's filter hooks (codec.h). */
int sg_q3__set_text(void *state, unsigned i, const char *text, size_t len);
int sg_q3__drop_msg(void *state, unsigned i);
int sg_q3__inject(void *state, enum sg_dir dir, enum sg_msg_kind kind, const char *text,
                  size_t len);
bool sg_q3__must_encode(void *state, const struct sg_frame *f);

/* ---- relay.c: the relay hooks (codec.h) ---- */

bool sg_q3__probe(const uint8_t *d, size_t n);
int sg_q3__client_qport(union sg_relay_state *rs, const uint8_t *d, size_t n, bool learn);
bool sg_q3__client_follows(const union sg_relay_state *rs, const void *state, const uint8_t *d,
                           size_t n, char *why, size_t whylen);

#endif
