/*
 * Reading one field of a message, for the parsers that read field by field
 * into a list (QuakeWorld, NetQuake): a number, a string, raw bytes, and
 * the fixed-message tables they walk.  Each step reads into a field of its
 * own and says whether it could; the game then keeps the field in its list
 * (its own growth rule and limits) and names it.  Quake 2 keeps its own
 * readers (its number reader is tuned as one check; its strings may end
 * with the message), and QuakeWorld its own number reader (qw/parse.c).
 */
#ifndef SG_PROTOCOLS_FIELDREAD_H
#define SG_PROTOCOLS_FIELDREAD_H

#include "protocols/bmsg.h"
#include "protocols/msglist.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Pseudo-kinds a game resolves through its protocol before reading (the
 * bmsg kinds stay below them). */
enum {
    SG_FK_COORD = 200, /* MSG_ReadCoord */
    SG_FK_ANGLE,       /* MSG_ReadAngle */
    SG_FK_ORIGIN,      /* QuakeWorld: an entity or player origin (MVD1 float coords) */
    SG_FK_STRING,      /* a string, not a number */
    SG_FK_END = 0xff,  /* ends a table */
};

/* One field of a fixed message's table. */
struct sg_fdesc {
    const char *name;
    uint8_t kind; /* a bmsg kind, or SG_FK_* */
};

/* Field *f kept at *k as `name`, member by member: *f was just stored
 * member by member, and a whole-struct copy of it (`*k = *f`) reads it back
 * in wider loads than those stores, which stalls the store forwarding
 * (measured: nq_bench's decode 390 -> 227 MB/s). */
static inline void sg_field_keep(struct sg_field *k, const char *name, const struct sg_field *f)
{
    k->name = name;
    k->type = f->type;
    k->num = f->num;
    k->end = f->end;
    k->raw = f->raw;
    k->ptr = f->ptr;
    k->len = f->len;
}

/* A number of bmsg `kind` into *f; false when the reader had failed or the
 * message ended first (the reader is then failed). */
static inline bool sg_fread_num(struct sg_bmsg_reader *r, uint8_t kind, struct sg_field *f)
{
    uint32_t raw;

    if (r->overflowed || sg_bmsg_read_num(r, kind, &raw) < 0)
        return false;
    memset(f, 0, sizeof(*f));
    f->type = SG_FIELD_NUM;
    f->num = kind;
    f->raw = raw;
    return true;
}

/* A string as the QuakeWorld and NetQuake engines read it: bytes up to a
 * NUL, 0xff kept, 2047 at most; false when the message ended inside it. */
static inline bool sg_fread_str(struct sg_bmsg_reader *r, struct sg_field *f)
{
    char buf[2048];
    enum sg_bmsg_str_end end;
    size_t at = r->pos, n;

    if (r->overflowed)
        return false;
    n = sg_bmsg_read_string(r, buf, sizeof(buf), 0, &end);
    if (end == SG_BMSG_STR_END)
        return false;
    memset(f, 0, sizeof(*f));
    f->type = SG_FIELD_STRING;
    f->end = (uint8_t)end;
    f->ptr = r->data + at;
    f->len = (uint32_t)n;
    return true;
}

/* `n` raw bytes; false when fewer are left (the reader is then failed). */
static inline bool sg_fread_data(struct sg_bmsg_reader *r, size_t n, struct sg_field *f)
{
    size_t at = r->pos;

    if (r->overflowed || sg_bmsg_skip(r, n) < 0)
        return false;
    memset(f, 0, sizeof(*f));
    f->type = SG_FIELD_DATA;
    f->ptr = r->data + at;
    f->len = (uint32_t)n;
    return true;
}

#endif
