/*
 * Reliable-command numbering between two peers that no longer see the
 * same stream (DESIGN.md rule 4): one direction's reliable commands (server
 * commands to the client, or client commands to the server), numbered by
 * the sender, renumbered for the receiver after filters dropped some or
 * injected new ones, with acknowledgements translated back.
 *
 * Quake 3 rules this follows (ioquake3 cl_parse.c CL_ParseCommandString,
 * sv_client.c SV_ClientCommand, sv_main.c SV_AddServerCommand): the
 * sender resends every command the receiver has not acknowledged in each
 * message, in order; the receiver keeps a command only when its number is
 * above the last it kept; a server drops a client whose command numbers
 * skip one; acknowledgements name the last command received.
 *
 * Without changes the mapping is the identity and nothing is stored but
 * the highest numbers.  All state is in the struct; nothing is allocated
 * except override texts.
 */
#ifndef SG_PROTOCOLS_Q3_RENUM_H
#define SG_PROTOCOLS_Q3_RENUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SG_Q3_RENUM_RING    256 /* sender numbers remembered (the game resends at most 64) */
#define SG_Q3_RENUM_PENDING 16  /* injected commands waiting for their acknowledgement */

struct sg_q3_renum_entry {
    int32_t sender;   /* the sender's number (valid when == the slot's number) */
    int32_t receiver; /* the receiver's number; 0 when dropped */
    char *text;       /* the text the receiver gets instead, or NULL */
};

struct sg_q3_renum_inject {
    int32_t receiver;
    char *text;
    bool sent; /* went out at least once (later sends are resends) */
};

struct sg_q3_renum {
    bool started;         /* a command was seen */
    bool changed;         /* numbering or a text differs from the sender's */
    int32_t last_sender;   /* highest sender number seen */
    int32_t last_receiver; /* highest receiver number given */
    int32_t receiver_ack;  /* latest acknowledgement from the receiver (its numbers) */
    struct sg_q3_renum_entry ring[SG_Q3_RENUM_RING];
    int npending;
    struct sg_q3_renum_inject pending[SG_Q3_RENUM_PENDING]; /* by receiver number */
};

void sg_q3_renum_init(struct sg_q3_renum *r);
void sg_q3_renum_finish(struct sg_q3_renum *r); /* frees texts; leaves it initialised */

/* Is sender command `seq` new (not seen before)? */
bool sg_q3_renum_is_new(const struct sg_q3_renum *r, int32_t seq);

/*
 * Sender command `seq` seen for the first time (is_new): give it the next
 * receiver number (keeping gaps the sender left).  Returns that number.
 */
int32_t sg_q3_renum_add(struct sg_q3_renum *r, int32_t seq);

/* Filters' verdicts on a command added in this message: drop it, or change its text. */
int sg_q3_renum_drop(struct sg_q3_renum *r, int32_t seq);
int sg_q3_renum_set_text(struct sg_q3_renum *r, int32_t seq, const char *text);

/*
 * How sender command `seq` reaches the receiver: returns false when it is
 * dropped; else its receiver number, and in *text the replacement (NULL:
 * as sent).  Numbers before the remembered window keep the offset they had.
 */
bool sg_q3_renum_map(const struct sg_q3_renum *r, int32_t seq, int32_t *receiver,
                     const char **text);

/* A sender number that is not a command (a gamestate's commandSequence): the receiver's. */
int32_t sg_q3_renum_forward(const struct sg_q3_renum *r, int32_t seq);

/*
 * A new command from the proxy for the receiver: numbered after every
 * command given so far, held until acknowledged.  0, or SG_E_TOOBIG when
 * SG_Q3_RENUM_PENDING wait already, -ENOMEM.
 */
int sg_q3_renum_inject(struct sg_q3_renum *r, const char *text);

/*
 * The receiver acknowledged `ack` (its numbers): forget injected commands
 * up to it, and return the sender's number for it (the newest sender
 * command all of whose predecessors the receiver has, dropped ones
 * counting as received).
 */
int32_t sg_q3_renum_ack(struct sg_q3_renum *r, int32_t ack);

/* Same, without side effects. */
int32_t sg_q3_renum_ack_peek(const struct sg_q3_renum *r, int32_t ack);

/*
 * A new level (gamestate with commandSequence `seq`): the receiver takes
 * its number as the last command it has, so waiting injections would be
 * ignored; they are renumbered after it.  Returns the receiver's number for `seq`.
 */
int32_t sg_q3_renum_gamestate(struct sg_q3_renum *r, int32_t seq);

/* Injected commands still to send (receiver number above the receiver's acknowledgement). */
int sg_q3_renum_pending(const struct sg_q3_renum *r);

#endif
