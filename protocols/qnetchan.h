/*
 * The netchan header QuakeWorld and Quake 2 share (id's net_chan.c), read
 * and written in one place; each game gives only its own rules (the
 * sequence mask, whether fragment bits exist, the client's qport width).
 *
 *   0                   31 32                  63
 *   | sequence    |F|R| | ack              |A| | qport (C2S) | fragment (F) | message...
 *   R: the datagram carries the sender's reliable message
 *   A: the reliable bit of the last reliable message the sender got
 *   F: Q2PRO's new netchan only (mask 0x3fffffff): a 16-bit fragment word
 *      (offset, bit 15 = more) follows the qport
 *   both words little-endian; 0xffffffff as first word: connectionless.
 *
 * The words are kept as they came, so writing a header back gives the
 * bytes that came, bits the receiver ignores included.  Below the header,
 * the receiver's rule as both games' decode tell it to the filters' view
 * (msglist.h): the datagram opened, a runt or stale one rejected, the loss
 * counted.
 */
#ifndef SG_PROTOCOLS_QNETCHAN_H
#define SG_PROTOCOLS_QNETCHAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "protocols/bmsg.h"
#include "protocols/byteorder.h"
#include "protocols/codec.h"
#include "protocols/msglist.h"
#include "protocols/relinject.h"

#define SG_QNC_REL_BIT  0x80000000u
#define SG_QNC_FRG_BIT  0x40000000u
#define SG_QNC_OLD_MASK 0x7fffffffu /* id's netchan: 31-bit sequences */
#define SG_QNC_NEW_MASK 0x3fffffffu /* Q2PRO's new netchan: 30 bits and the fragment bit */

/* One game's rules for one datagram. */
struct sg_qnc_rules {
    uint32_t mask;   /* SG_QNC_OLD_MASK or SG_QNC_NEW_MASK */
    bool fragments;  /* the fragment bit and word exist */
    int qport_width; /* bytes of qport after the words: 0, 1, 2 */
};

struct sg_qnc_header {
    uint32_t w1, w2;   /* the words as they came (bits the receiver ignores kept) */
    uint32_t seq, ack; /* masked */
    bool reliable, ack_reliable, fragment, more;
    uint32_t offset;
    bool has_qport;
    int qport_width; /* 0, 1, 2 */
    uint32_t qport;
};

/* Read the header of an in-game datagram: the bytes it took, or
 * SG_E_TRUNCATED (a runt). */
int sg_qnc_read(const uint8_t *d, size_t n, const struct sg_qnc_rules *r, struct sg_qnc_header *h);

/* Write `h` back, as a fragment (offset, more) when `fragment`. */
void sg_qnc_write(const struct sg_qnc_header *h, bool fragment, bool more, uint32_t offset,
                  struct sg_bmsg_writer *w);

/* What a receiver accepted last, one direction. */
struct sg_qnc_chan {
    bool started;
    uint32_t incoming; /* highest sequence accepted */
};

/* The receiver's rule (Netchan_Process): a sequence not above the last
 * accepted one is stale or a duplicate, and dropped. */
static inline bool sg_qnc_stale(const struct sg_qnc_chan *c, uint32_t seq)
{
    return c->started && seq <= c->incoming;
}

/* Note `seq` accepted. */
static inline void sg_qnc_accepted(struct sg_qnc_chan *c, uint32_t seq)
{
    c->started = true;
    c->incoming = seq;
}

/* Accept `seq`: the sequences skipped since the last one accepted are lost
 * on the way here (`*lost`), `seq` one more that came in order
 * (`*sequenced`). */
static inline void sg_qnc_take(struct sg_qnc_chan *c, uint32_t seq, uint64_t *lost,
                               uint64_t *sequenced)
{
    if (c->started && seq - c->incoming > 1)
        *lost += seq - c->incoming - 1;
    (*sequenced)++;
    sg_qnc_accepted(c, seq);
}

/*
 * A datagram's decode opens, for the filters' view (msglist.h): counted in
 * `stats`, copied to `copy` (`cap` bytes; sg_fview_begin) and its length
 * kept in `*copy_len`.  1 when it is connectionless (first word
 * 0xffffffff), 0 when sequenced, SG_E_TOOBIG (nothing kept) when longer
 * than `cap`.  (Inline with the next: they run for every datagram.)
 */
static inline int sg_qnc_open(struct sg_fview *v, struct sg_codec_stats *stats, enum sg_dir dir,
                              void *game, const uint8_t *data, size_t len, uint8_t *copy,
                              size_t cap, size_t *copy_len)
{
    stats->decoded++;
    if (sg_fview_begin(v, dir, game, data, len, copy, cap) < 0)
        return SG_E_TOOBIG;
    *copy_len = len;
    return len >= 4 && sg_le32(data) == 0xffffffffu;
}

/*
 * The receiver's rule, told to the filters' view: `n` is sg_qnc_read's
 * result for header `h`, `ch` the receiver of the frame's direction.  A
 * runt or a stale / duplicate sequence makes the frame REJECTED (counted in
 * `stats`) and gives false.  Else the frame takes the sequences, the
 * injections their acknowledgement, and `carrier` says whether injections
 * may ride on this datagram; the sequence is not yet accepted (sg_qnc_take).
 */
static inline bool sg_qnc_view(struct sg_fview *v, struct sg_codec_stats *stats, int n,
                               const struct sg_qnc_chan *ch, const struct sg_qnc_header *h,
                               bool carrier)
{
    if (n < 0) {
        sg_fview_reject(v, stats, "runt (shorter than the header)");
        return false;
    }
    v->frame.sequence = (int32_t)h->seq;
    v->frame.ack = (int32_t)h->ack;
    if (sg_qnc_stale(ch, h->seq)) {
        sg_fview_reject(v, stats, "stale or duplicate sequence");
        return false;
    }
    sg_relinj_ack(&v->inj, v->frame.dir, h->ack, h->ack_reliable);
    v->carrier = carrier;
    v->seq = h->seq;
    v->frame.ack_wanted = (int32_t)h->seq; /* the receiver's incoming_sequence */
    return true;
}

/*
 * The inspector's opening of a datagram's dump (doc/inspect.md): in JSON
 * `{"rx":KIND,"len":LEN`, then for a sequenced one its sequence and
 * reliable bits, and the qport when `qport`; as text `DIR KIND len=LEN`,
 * then ` seq=S[r] ack=A[r]` for a sequenced one.  The caller goes on.
 */
void sg_qnc_dump_head(FILE *out, const struct sg_frame *fr, size_t len,
                      const struct sg_qnc_header *h, bool qport, bool json);

#endif
