/*
 * The NetQuake message parser's inside, shared by its files and no one
 * else: parse.c (the stream, id's messages, FitzQuake's and DarkPlaces'
 * on 15), dp.c (what DarkPlaces' own protocols DP5-DP7 change), dpent.c
 * (their entity frames and the CSQC sections).
 */
#ifndef SG_PROTOCOLS_NQ_PARSE_H
#define SG_PROTOCOLS_NQ_PARSE_H

#include "protocols/nq/nq.h"

#include "protocols/fieldread.h"

/* Pseudo-kinds of sg_nq__num resolved through the protocol. */
enum {
    SG_NQ__COORD = SG_FK_COORD, /* MSG_ReadCoord */
    SG_NQ__ANGLE = SG_FK_ANGLE, /* MSG_ReadAngle */
};

/* One parse in progress (a stream, or the rest of one tried after a
 * CSQC body whose end the wire does not say). */
struct sg_nq__ctx {
    struct sg_bmsg_reader r;
    struct sg_nq_proto *p;
    struct sg_nq_parsed *out;
    enum sg_dir dir;
    size_t base; /* where r's bytes start in the stream (a message's `at`) */
    int err;
};

/* Read a number of `kind` (a bmsg kind or a pseudo-kind) as field `name`;
 * its raw value (0 once the reader failed). */
uint32_t sg_nq__num(struct sg_nq__ctx *c, const char *name, uint8_t kind);
/* A NUL-terminated string as field `name`; its field or NULL. */
struct sg_field *sg_nq__str(struct sg_nq__ctx *c, const char *name);
/* `n` raw bytes as field `name`. */
void sg_nq__data(struct sg_nq__ctx *c, const char *name, size_t n);

/* Parse messages from the reader's position to its end, appended to c->out. */
void sg_nq__stream(struct sg_nq__ctx *c);

/*
 * Does the stream from `at` (an offset in c's reader) to its end parse as
 * whole messages with no error?  When it does they are appended to c->out
 * (the reader then at its end); when not nothing of c->out changed.  A
 * stream gets SG_NQ__TRIALS tries at most, after which every try fails.
 */
#define SG_NQ__TRIALS 4096
bool sg_nq__try_rest(struct sg_nq__ctx *c, size_t at);

/* ---- DarkPlaces' protocols DP5, DP6, DP7 (dp.c, dpent.c) ---- */

/* A server message of message index `mi` whose form DP5-DP7 change
 * (clientdata, entities, CSQC, temp entities); false when not one. */
bool sg_nq__dp_svc(struct sg_nq__ctx *c, uint32_t mi);
/* A client message of DP5-DP7 (clc_move, ackframe, ackdownloaddata); false when not one. */
bool sg_nq__dp_clc(struct sg_nq__ctx *c, uint32_t mi);

/* svc_entities: DP5-DP7's entity frame (dpent.c). */
void sg_nq__dp_entities(struct sg_nq__ctx *c);
/* svc_csqcentities of message `mi` (dpent.c). */
void sg_nq__dp_csqc(struct sg_nq__ctx *c, uint32_t mi);
/* The body of a game-defined message (a CSQC temp entity) of message
 * `mi`: raw bytes up to where the rest of the stream parses (dpent.c). */
void sg_nq__dp_opaque(struct sg_nq__ctx *c, uint32_t mi, const char *name);

#endif
