/*
 * Injected texts riding on the id netchan's reliable bit (QuakeWorld and
 * Quake 2 share the netchan: mvdsv and Q2PRO net_chan.c).
 *
 * The receiver of a direction flips the reliable bit it acknowledges each
 * time it accepts a reliable datagram.  An injection therefore rides on the
 * sender's own next reliable datagram (the carrier), as extra messages the
 * codec writes after the sender's; once the receiver acknowledges the
 * carrier or a later datagram, a flipped bit says the carrier arrived (the
 * injection is delivered and forgotten), an unflipped one that it was lost:
 * the sender resends its reliable message and the injection rides on it
 * again.  Neither peer's sequences or reliable bits ever change.
 * NetQuake keeps its queue here too, with its own reliable rules (see
 * sg_relinj_settle).
 */
#ifndef SG_PROTOCOLS_RELINJECT_H
#define SG_PROTOCOLS_RELINJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocols/codec.h"

#define SG_RELINJ_MAX 8 /* injections waiting at once, both ways */

struct sg_relinj_item {
    enum sg_dir dir; /* the way it travels */
    enum sg_msg_kind kind;
    char text[1024]; /* as the game command carries it (a client's chat: `say "..."`) */
    size_t len;
    bool attached; /* riding on the carrier in flight */
    unsigned waited; /* NetQuake: unreliable datagrams of its way since it was queued */
};

struct sg_relinj {
    struct sg_relinj_item item[SG_RELINJ_MAX];
    unsigned n;
    /* By the way the injections travel: the carrier in flight, and the
     * receiver's reliable bit before it and as last acknowledged. */
    struct {
        bool in_flight;
        uint32_t carrier;
        bool bit_before, bit_known, bit_now;
    } q[2];
};

/*
 * May `len` bytes of `text` (borrowed) be injected towards `dir` as `kind`
 * (prints, chat, centerprints and stufftext towards the client, chat and
 * commands towards the server), into a buffer of `cap` bytes?  0,
 * SG_E_UNSUPPORTED (another kind), -EINVAL (a NUL, or too long).
 */
int sg_relinj_check(enum sg_dir dir, enum sg_msg_kind kind, const char *text, size_t len,
                    size_t cap);

/*
 * Queue `len` bytes of `text` (borrowed) to travel `dir`: prints, chat,
 * centerprints and stufftext towards the client, chat (made a `say`) and
 * commands towards the server.  0, SG_E_UNSUPPORTED (another kind),
 * -EINVAL (a NUL or too long), SG_E_TOOBIG (the queue is full).
 */
int sg_relinj_add(struct sg_relinj *b, enum sg_dir dir, enum sg_msg_kind kind, const char *text,
                  size_t len);

/* A datagram the receiver accepted came from `dir`'s sender, acknowledging
 * `ack` with reliable bit `bit`: what travelled the other way is settled. */
void sg_relinj_ack(struct sg_relinj *b, enum sg_dir dir, uint32_t ack, bool bit);

/* May a reliable datagram travelling `dir` carry injections now (none in
 * flight, the receiver's bit known), and does one wait for it? */
bool sg_relinj_can_carry(const struct sg_relinj *b, enum sg_dir dir);
bool sg_relinj_waiting(const struct sg_relinj *b, enum sg_dir dir);

/* The codec attached the items it marked `attached` to datagram `seq`. */
void sg_relinj_carried(struct sg_relinj *b, enum sg_dir dir, uint32_t seq);

/* Datagram `seq` was not sent after all: what rode on it waits again. */
void sg_relinj_unsent(struct sg_relinj *b, enum sg_dir dir, uint32_t seq);

/* A new connection: the receivers start over, the injections wait again. */
void sg_relinj_restart(struct sg_relinj *b);

/*
 * NetQuake's reliable rules (its acknowledgements name a piece, not a bit;
 * its codec keeps the carrier in `q[dir].in_flight` / `carrier` itself):
 * what rode towards `towards` is forgotten when `delivered`, else it waits
 * for the next carrier (the carrier's flag is the caller's).  An injection
 * towards `dir`, not attached, that has waited `min_waited` unreliable
 * datagrams or more; one more unreliable datagram of `dir` (up to `most`).
 */
void sg_relinj_settle(struct sg_relinj *b, enum sg_dir towards, bool delivered);
bool sg_relinj_ready(const struct sg_relinj *b, enum sg_dir dir, unsigned min_waited);
void sg_relinj_waited(struct sg_relinj *b, enum sg_dir dir, unsigned most);

#endif
