/*
 * The decoded form of an idTech 1/2 message stream (QuakeWorld, NetQuake,
 * Quake 2), shared by their parsers, writers and codecs: a list of fields
 * in wire order, each with its name, its kind (a number of a bmsg kind, a
 * string with the way it ended, raw bytes, or a decoded value) and its raw
 * value, and a list of messages that each name their first field and
 * count.  Writing every field back from its raw form gives the bytes that
 * came (STYLE.md "Keep the wire's own choices").
 *
 * Beside it, the pieces of the cross-game text view (struct sg_msg) the
 * three codecs share: the frame's text pool, a text message's change, and
 * an injected text's view.  What each game keeps for itself: its opcode
 * tables, its message layouts and its netchan rules.
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

/* A new frame's view: empty, RAW, no sequences, messages in `msgs`, the
 * parsed stream `game`; the pool emptied. */
static inline void sg_fview_reset(struct sg_frame *fr, enum sg_dir dir, struct sg_msg *msgs,
                                  void *game, struct sg_textpool *pool)
{
    memset(fr, 0, sizeof(*fr));
    fr->dir = dir;
    fr->kind = SG_FRAME_RAW;
    fr->sequence = fr->ack = fr->reliable_ack = fr->ack_wanted = -1;
    fr->msgs = msgs;
    fr->game = game;
    pool->used = 0;
}

/* Parsed message `pi` as the view's next message (msg_index names it): a
 * GAME message called `name`, with `number`. */
static inline struct sg_msg *sg_fview_add(struct sg_frame *fr, int *msg_index, int pi,
                                          const char *name, int32_t number)
{
    struct sg_msg *m = &fr->msgs[fr->nmsgs];

    memset(m, 0, sizeof(*m));
    m->kind = SG_MSG_GAME;
    m->name = name;
    m->number = number;
    msg_index[fr->nmsgs++] = pi;
    return m;
}

/* The string field `tf` as the view message's command and text (kept in
 * the pool): false when the pool is full (then the message stays GAME). */
static inline bool sg_fview_text(struct sg_textpool *pool, struct sg_msg *m,
                                 const struct sg_field *tf)
{
    m->command = sg_textpool_keep(pool, tf->ptr, tf->len);
    if (!m->command)
        return false;
    m->text = m->command;
    m->text_len = tf->len;
    return true;
}

/* A client's command (its text set by sg_fview_text, `len` bytes):
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

/* A game's text opcodes: what an injected text is written as. */
struct sg_text_ops {
    uint8_t print, centerprint, stufftext; /* svc_ */
    uint8_t stringcmd;                     /* clc_ */
    bool print_level; /* svc_print has a level byte, chat 3 else 2 (not NetQuake) */
};

/* Write the opcode (and print level) an injected text of `kind` towards
 * `dir` starts with (a kind sg_relinj_check accepts); returns its name. */
const char *sg_text_op_write(struct sg_bmsg_writer *w, const struct sg_text_ops *ops,
                             enum sg_dir dir, enum sg_msg_kind kind);

/*
 * Attach the reliable injections of `inj` waiting for the view `fr`'s
 * direction that fit: the datagram stays within `limit` bytes and the view
 * within `msgs_cap` messages.  Each is written (sg_text_op_write, the text)
 * and added to the view.  True when any was (the caller then says
 * sg_relinj_carried).
 */
bool sg_relinj_attach(struct sg_relinj *inj, struct sg_frame *fr, unsigned msgs_cap,
                      struct sg_bmsg_writer *w, size_t limit, const struct sg_text_ops *ops,
                      struct sg_textpool *pool);

/*
 * The view of an injected text (`kind`, opcode name `name`, view number
 * `number`) whose opcode bytes the game wrote to `w`: its string goes
 * after them, 0-terminated, and `m` is filled.
 */
void sg_fmsg_injected(struct sg_textpool *pool, struct sg_msg *m, struct sg_bmsg_writer *w,
                      enum sg_msg_kind kind, const char *name, int32_t number, const char *text,
                      size_t len);

#endif
