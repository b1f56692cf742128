/*
 * The decoded form of an idTech 1/2 message stream (QuakeWorld, NetQuake,
 * Quake 2), shared by their parsers, writers and codecs: a list of fields
 * in wire order, each with its name, its kind (a number of a bmsg kind, a
 * string with the way it ended, raw bytes, or a decoded value) and its raw
 * value, and a list of messages that each name their first field and
 * count.  Writing every field back from its raw form gives the bytes that
 * came (STYLE.md "Keep the wire's own choices").
 *
 * Beside it, the filters' view the three codecs share (struct sg_fview):
 * the cross-game frame (struct sg_msg) over those lists, its text pool,
 * the text messages found, changed, dropped and injected (relinject.c's
 * queue), and the codec table's filter hooks themselves.  What each game
 * keeps for itself and gives as data (struct sg_fview_rules): its text
 * opcodes, which datagrams carry injections and how they are settled, its
 * own messages (configstrings, userinfo, the server's info).
 */
#ifndef SG_PROTOCOLS_MSGLIST_H
#define SG_PROTOCOLS_MSGLIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "protocols/bmsg.h"
#include "protocols/codec.h"
#include "protocols/error.h"
#include "protocols/relinject.h"

/* Field kinds. */
enum {
    SG_FIELD_NUM,    /* `num` says which enum sg_bmsg_num */
    SG_FIELD_STRING, /* bytes at ptr, then the terminator `end` names (none: SG_BMSG_STR_END/CUT) */
    SG_FIELD_DATA,   /* raw bytes at ptr */
    SG_FIELD_VALUE,  /* a decoded value only (Quake 2's bit-packed moves): not written */
};

struct sg_field {
    const char *name;   /* static */
    uint8_t type;       /* SG_FIELD_* */
    uint8_t num;        /* enum sg_bmsg_num (NUM) */
    uint8_t end;        /* enum sg_bmsg_str_end (STRING) */
    uint32_t raw;       /* NUM / VALUE: the wire value */
    const uint8_t *ptr; /* STRING / DATA: the bytes (the stream, a game's pool, or the text pool) */
    uint32_t len;
};

/* One message: its opcode and its fields; the flags a game does not use stay unread. */
struct sg_fmsg {
    int op;         /* the opcode byte as it came (NetQuake: >= 128 for a fast entity update) */
    uint32_t first; /* index of its first field */
    uint32_t count; /* fields */
    int text;       /* index (relative) of its text field, or -1 */
    bool unparsed;  /* slipgate cannot decode it: the rest is one DATA field */
    bool sum_ok;    /* QuakeWorld, Quake 2 34: clc_move's checksum byte matched */
    bool changed;   /* Quake 2: a field was changed (a zpacket is deflated again) */
    int parent;     /* Quake 2: the zpacket message it came inside, or -1 */
    uint32_t at;    /* NetQuake: where its opcode byte is in the stream */
};

/* Write fields `fields[first..first + n)` back as they came (VALUE fields
 * write nothing; `fields` may be NULL when n is 0). */
void sg_fields_write(const struct sg_field *fields, uint32_t first, uint32_t n,
                     struct sg_bmsg_writer *w);

/* How a game's dumps show a field: ` name=value` (text), `["name",value]` (JSON). */
struct sg_field_style {
    const char *lead; /* text: before the name */
    bool data_text;   /* JSON: a DATA field as "N bytes" (else the count N) */
    /* A NUM field's value; NULL: sg_field_put_num (Quake 2 has its own). */
    void (*put_num)(FILE *out, const struct sg_field *f, bool json);
};

/* One field as `st` shows it (a VALUE field as a signed number). */
void sg_field_put(FILE *out, const struct sg_field *f, bool json, const struct sg_field_style *st);
/* A NUM field's value as QuakeWorld and NetQuake dumps show it: the float
 * kinds as %.9g (the raw bits in hex when not finite), the signed ones
 * signed, the rest unsigned. */
void sg_field_put_num(FILE *out, const struct sg_field *f, bool json);

/* A frame's text pool: NUL-terminated copies that live until it is emptied. */
struct sg_textpool {
    char *buf; /* borrowed */
    size_t cap, used;
};

/* A NUL-terminated copy of `n` bytes of `s` in the pool, or NULL when it is full. */
static inline const char *sg_textpool_keep(struct sg_textpool *p, const void *s, size_t n)
{
    char *q;

    if (p->cap - p->used < n + 1)
        return NULL;
    q = p->buf + p->used;
    memcpy(q, s, n);
    q[n] = 0;
    p->used += n + 1;
    return q;
}

/* A game's text opcodes: what an injected text is written as. */
struct sg_text_ops {
    uint8_t print, centerprint, stufftext; /* svc_ */
    uint8_t stringcmd;                     /* clc_ */
    /* svc_print has a level byte, chat 3, else 2; without it (NetQuake) a
     * chat line starts with a 1 byte. */
    bool print_level;
};

struct sg_fview;

/*
 * What a game's filters' view keeps of its own: its opcodes and its
 * reliable rules, as data and one callback.
 */
struct sg_fview_rules {
    struct sg_text_ops ops;
    uint8_t disconnect;          /* svc_disconnect: the server ends the connection */
    enum sg_msg_kind other_text; /* a server's text message of another opcode */
    const char *leave_verb;      /* a client's command that leaves (NULL: the game's parser says) */
    bool keep_end;        /* a changed text keeps its string's way of ending (sg_fmsg_set_text) */
    bool number_injected; /* an injected message's number is the datagram's sequence (else -1) */
    /* Which datagrams carry injections.  0: reliable ones only, settled by
     * the receiver's reliable bit (sg_relinj_ack); else also an unreliable
     * one, once an injection has waited that many (NetQuake, whose
     * acknowledgements name a piece: the game settles its carrier itself). */
    unsigned patience;
    /* May message `i` of the view be changed or dropped? NULL: any. */
    bool (*changeable)(const struct sg_fview *v, unsigned i);
};

/*
 * The filters' view of the datagram decoded last (QuakeWorld, NetQuake,
 * Quake 2): the cross-game frame over the parsed messages, and the
 * injections waiting.  A game's session starts with it (its first member),
 * so the codec table's filter hooks below take the session as it is.
 */
struct sg_fview {
    struct sg_frame frame;
    const char *why; /* REJECTED: the receiver's reason */
    const struct sg_fview_rules *rules;
    /* The parsed lists of the frame (set by sg_fview_messages). */
    struct sg_field *fields;
    struct sg_fmsg *pmsgs;
    /* Per view message, msgs_cap long (the parsed ones, then the injections). */
    struct sg_msg *msgs;
    int *msg_index; /* the parsed message of each */
    bool *dropped;  /* by parsed message */
    uint32_t msgs_cap;
    struct sg_textpool text;
    struct sg_relinj inj;
    /* The datagram decoded last: may it carry injections as a reliable
     * one (its game says), and its sequence. */
    bool carrier;
    uint32_t seq;
};

/* The per-message arrays at `cap` (larger or smaller); -ENOMEM leaves
 * the ones not yet grown as they were (msgs_cap too). */
int sg_fview_room(struct sg_fview *v, uint32_t cap);
void sg_fview_free(struct sg_fview *v);

/* A new frame's view: empty, RAW, no sequences, the parsed stream `game`,
 * no reason, not a carrier; the pool emptied.  (This and the next are
 * inline, as the per-message steps below: they run for every datagram.) */
static inline void sg_fview_reset(struct sg_fview *v, enum sg_dir dir, void *game)
{
    struct sg_frame *fr = &v->frame;

    memset(fr, 0, sizeof(*fr));
    fr->dir = dir;
    fr->kind = SG_FRAME_RAW;
    fr->sequence = fr->ack = fr->reliable_ack = fr->ack_wanted = -1;
    fr->msgs = v->msgs;
    fr->game = game;
    v->text.used = 0;
    v->why = NULL;
    v->carrier = false;
}

/*
 * A datagram's frame begins: the view reset (sg_fview_reset), the
 * datagram copied to `copy` (`cap` bytes) as the frame's message.
 * SG_E_TOOBIG (nothing copied) when it is longer.
 */
static inline int sg_fview_begin(struct sg_fview *v, enum sg_dir dir, void *game,
                                 const uint8_t *data, size_t len, uint8_t *copy, size_t cap)
{
    sg_fview_reset(v, dir, game);
    if (len > cap)
        return SG_E_TOOBIG;
    memcpy(copy, data, len);
    v->frame.msg = copy;
    v->frame.msg_len = len;
    return 0;
}

/* The receiver drops the datagram, for reason `why` (static): a REJECTED
 * frame, counted in `stats`; returns 0. */
int sg_fview_reject(struct sg_fview *v, struct sg_codec_stats *stats, const char *why);

/* The view's messages come from `n` parsed messages over `fields`, none
 * dropped; the game adds each (sg_fview_add, sg_fview_add_text).  (This
 * and the next three are inline: they run for every message.) */
static inline void sg_fview_parsed(struct sg_fview *v, struct sg_field *fields,
                                   struct sg_fmsg *pmsgs, uint32_t n)
{
    v->fields = fields;
    v->pmsgs = pmsgs;
    memset(v->dropped, 0, sizeof(bool) * n);
}

/* Parsed message `pi` as the view's next message: a GAME message called
 * `name`, with `number`; a server's disconnect SG_MSG_DISCONNECT. */
static inline struct sg_msg *sg_fview_add(struct sg_fview *v, int pi, const char *name,
                                          int32_t number)
{
    struct sg_frame *fr = &v->frame;
    struct sg_msg *m = &fr->msgs[fr->nmsgs];

    memset(m, 0, sizeof(*m));
    m->kind = SG_MSG_GAME;
    m->name = name;
    m->number = number;
    v->msg_index[fr->nmsgs++] = pi;
    if (fr->dir == SG_DIR_S2C && v->pmsgs[pi].op == v->rules->disconnect) {
        m->kind = SG_MSG_DISCONNECT;
        m->text = m->command = "";
    }
    return m;
}

/* The text field of parsed message `pm` (a string), or NULL. */
static inline const struct sg_field *sg_fview_text_field(const struct sg_fview *v,
                                                         const struct sg_fmsg *pm)
{
    const struct sg_field *tf;

    if (pm->text < 0 || (uint32_t)pm->text >= pm->count)
        return NULL;
    tf = &v->fields[pm->first + (uint32_t)pm->text];
    return tf->type == SG_FIELD_STRING ? tf : NULL;
}

/* sg_fview_add_text's work on a text field. */
const struct sg_field *sg_fview_take_text(struct sg_fview *v, struct sg_msg *m,
                                          const struct sg_fmsg *pm, const struct sg_field *tf);

/*
 * Its text, when parsed message `pm` (view message `m`) has one, kept in
 * the pool (else `m` stays GAME): a server's print (chat or not, by the
 * print's rule), centerprint, stufftext or other text; a client's command
 * or chat.  A client's leave verb ends the connection.  The text field, or
 * NULL when none was taken.
 */
static inline const struct sg_field *sg_fview_add_text(struct sg_fview *v, struct sg_msg *m,
                                                       const struct sg_fmsg *pm)
{
    const struct sg_field *tf = sg_fview_text_field(v, pm);

    return tf ? sg_fview_take_text(v, m, pm, tf) : NULL;
}

/* A view message as the inspector's text line starts: `  name`, whether
 * it was dropped or injected, its text quoted. */
void sg_fview_put_msg(FILE *out, const struct sg_msg *m);

/* A client's command (its text just taken, `len` bytes):
 * CLIENT_COMMAND, or CHAT for a say with its text unquoted in the pool. */
void sg_fview_client_command(struct sg_textpool *pool, struct sg_msg *m, size_t len);

/*
 * A filter's change of the text of message `i` of the view `fr` (whose
 * parsed message is pmsgs[msg_index[i]]) to `text`: its text field now
 * holds the command (a client's chat keeps its verb, `say "text"`, with
 * the text's own quotes made single) in the pool, ending in a 0 unless
 * `keep_end` (Quake 2 writes a string the message ended unterminated
 * again).  0, SG_E_UNSUPPORTED (not a text message a filter may change),
 * -EINVAL or SG_E_TOOBIG (the pool is full).
 */
int sg_fmsg_set_text(struct sg_textpool *pool, struct sg_frame *fr, unsigned i,
                     struct sg_field *fields, const struct sg_fmsg *pmsgs, const int *msg_index,
                     bool keep_end, const char *text, size_t len);

/* A filter's drop of message `i` of the view `fr`: dropped[msg_index[i]] is set.
 * 0 or SG_E_UNSUPPORTED (not a message of the datagram, or an injection). */
int sg_fmsg_drop(struct sg_frame *fr, bool *dropped, const int *msg_index, unsigned i);

/* Write the opcode (and print level) an injected text of `kind` towards
 * `dir` starts with (a kind sg_relinj_check accepts); returns its name. */
const char *sg_text_op_write(struct sg_bmsg_writer *w, const struct sg_text_ops *ops,
                             enum sg_dir dir, enum sg_msg_kind kind);

/*
 * The view of an injected text (`kind`, opcode name `name`, view number
 * `number`) whose opcode bytes the game wrote to `w`: its string goes
 * after them, 0-terminated, and `m` is filled.
 */
void sg_fmsg_injected(struct sg_textpool *pool, struct sg_msg *m, struct sg_bmsg_writer *w,
                      enum sg_msg_kind kind, const char *name, int32_t number, const char *text,
                      size_t len);

/*
 * The codec table's filter hooks, over a session that starts with its
 * struct sg_fview (`state`): a text changed (not a configstring), a
 * message dropped, a text queued to be injected, and whether the frame
 * must be encoded for an injection to ride on it.
 */
int sg_fview_set_text(void *state, unsigned i, const char *text, size_t len);
int sg_fview_drop_msg(void *state, unsigned i);
int sg_fview_inject(void *state, enum sg_dir dir, enum sg_msg_kind kind, const char *text,
                    size_t len);
bool sg_fview_must_encode(void *state, const struct sg_frame *frame);

/*
 * Encoding the view's frame: write the injections waiting for its
 * direction that fit (the datagram within `limit` bytes, the view within
 * msgs_cap messages) after its messages, by the game's rules; then say
 * whether the datagram went out (`sent`): what rode on it is carried, or
 * waits again.
 */
void sg_fview_inject_write_any(struct sg_fview *v, struct sg_bmsg_writer *w, size_t limit);
static inline void sg_fview_inject_write(struct sg_fview *v, struct sg_bmsg_writer *w, size_t limit)
{
    if (v->inj.n) /* (none waiting, the usual case: not even a call) */
        sg_fview_inject_write_any(v, w, limit);
}
void sg_fview_sent(struct sg_fview *v, bool sent);

/* The encoded datagram `out` (`len` bytes) goes out: `*identical` when it
 * is the `copy` that came (`copy_len` bytes; counted in `stats`), emitted,
 * then sg_fview_sent.  Returns emit's result. */
static inline int sg_fview_emit(struct sg_fview *v, struct sg_codec_stats *stats,
                                const uint8_t *out, size_t len, const uint8_t *copy,
                                size_t copy_len, sg_emit_fn emit, void *ctx, bool *identical)
{
    int err;

    *identical = len == copy_len && memcmp(out, copy, len) == 0;
    if (*identical)
        stats->reencode_identical++;
    err = emit(ctx, out, len);
    sg_fview_sent(v, err >= 0);
    return err;
}

/* The codec table's filter entries of a game whose session starts with its
 * struct sg_fview (QuakeWorld, NetQuake, Quake 2); must_encode apart, as a
 * game may add its own reasons. */
#define SG_FVIEW_FILTER_HOOKS                                                                      \
    .set_text = sg_fview_set_text, .drop_msg = sg_fview_drop_msg, .inject = sg_fview_inject

#endif
