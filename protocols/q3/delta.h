/*
 * Quake 3 delta coding of entityState_t and playerState_t
 * (MSG_ReadDeltaEntity / MSG_WriteDeltaEntity and the playerstate pair).
 *
 * Entity delta, after the entity number (10 bits in protocol 68):
 *
 *     1 bit   remove            1 = entity leaves the snapshot; nothing follows
 *     1 bit   has delta         0 = identical to the base ("no change" form)
 *     byte    lc                fields 0 .. lc-1 follow, each:
 *       1 bit   changed         0 = copy from the base
 *       float:  1 bit nonzero (0 = value 0.0), then 1 bit full:
 *               0 -> 13 bits, value + 4096 (an integer in [-4096, 4095])
 *               1 -> 32 bits IEEE
 *       int:    1 bit nonzero (0 = value 0), then `bits` bits
 *
 * Playerstate delta: byte lc; per field below lc a changed bit then, for a
 * float, 1 bit full + 13 or 32 bits, for an int `bits` bits (no zero bit
 * in the playerstate).  Then 1 bit "arrays follow"; if set, for stats,
 * persistant, ammo, powerups: 1 bit sent, 16-bit mask, one value per mask
 * bit (16-bit signed shorts; powerups 32-bit longs).
 *
 * Every function takes the variant (variant.h) whose field tables and
 * entity number width the stream uses.
 *
 * A record below keeps exactly what was sent (lc, per-field form, masks)
 * so writing it back gives the same bits; `make` builds the record the
 * game's own writer would send for two full states.
 */
#ifndef SG_PROTOCOLS_Q3_DELTA_H
#define SG_PROTOCOLS_Q3_DELTA_H

#include <stdbool.h>
#include <stdint.h>

#include "protocols/q3/fields.h"
#include "protocols/q3/msg.h"
#include "protocols/q3/variant.h"

/* A full entity: 32-bit words by enum sg_q3_es_field (floats as bit patterns). */
struct sg_q3_entity {
    int32_t number; /* the variant's entitynum_none after a remove */
    int32_t f[SG_Q3_ES_NUM_FIELDS];
};

/* A full playerstate: words by enum sg_q3_ps_field, plus the four arrays. */
struct sg_q3_player {
    int32_t f[SG_Q3_PS_NUM_FIELDS];
    int32_t a[SG_Q3_PS_NUM_ARRAYS][SG_Q3_PS_ARRAY_LEN];
};

/* How one field travelled. */
enum sg_q3_form {
    SG_Q3_FORM_SAME = 0, /* changed bit 0: copied from the base */
    SG_Q3_FORM_ZERO,     /* entities only: the 1-bit "value is zero" form */
    SG_Q3_FORM_INT,      /* integer field; or float sent as 13-bit integral */
    SG_Q3_FORM_FULL,     /* float sent as 32 bits */
};

enum sg_q3_ent_kind {
    SG_Q3_ENT_DELTA,    /* lc + fields */
    SG_Q3_ENT_NOCHANGE, /* the two-bit "not removed, no delta" form */
    SG_Q3_ENT_REMOVE,
};

/* One entity update as sent.  form[i] / value[i] are the field at wire
 * position i of the variant's table; value[i] is the word a sent field gives. */
struct sg_q3_entity_delta {
    uint16_t number;
    uint8_t kind; /* enum sg_q3_ent_kind */
    uint8_t lc;   /* DELTA: fields 0..lc-1 carry a changed bit */
    uint8_t form[SG_Q3_ES_NUM_FIELDS];
    int32_t value[SG_Q3_ES_NUM_FIELDS];
};

/* One playerstate update as sent. */
struct sg_q3_player_delta {
    uint8_t lc;
    uint8_t form[SG_Q3_PS_NUM_FIELDS];
    int32_t value[SG_Q3_PS_NUM_FIELDS];
    bool arrays;                          /* the "arrays follow" bit */
    bool array_sent[SG_Q3_PS_NUM_ARRAYS]; /* per-array bit */
    uint16_t array_mask[SG_Q3_PS_NUM_ARRAYS];
    int32_t array_value[SG_Q3_PS_NUM_ARRAYS][SG_Q3_PS_ARRAY_LEN];
};

/*
 * Read the rest of an entity update whose number (already read) is
 * `number`.  Returns 0, or SG_E_MALFORMED for lc beyond the table.
 * Overflow is left in m->overflowed for the caller to check.
 */
int sg_q3_delta_entity_read(struct sg_q3_msg *m, const struct sg_q3_variant *v, int number,
                            struct sg_q3_entity_delta *rec);

/* Write an entity update, number included, exactly as recorded. */
void sg_q3_delta_entity_write(struct sg_q3_msg *m, const struct sg_q3_variant *v,
                              const struct sg_q3_entity_delta *rec);

/* to = from + rec, as the game applies it (to may not alias from). */
void sg_q3_delta_entity_apply(const struct sg_q3_variant *v, const struct sg_q3_entity *from,
                              const struct sg_q3_entity_delta *rec, struct sg_q3_entity *to);

/*
 * The update the game's writer sends for from -> to (to->number is used).
 * Returns false when it would send nothing (no change and !force).
 */
bool sg_q3_delta_entity_make(const struct sg_q3_variant *v, const struct sg_q3_entity *from,
                             const struct sg_q3_entity *to, bool force,
                             struct sg_q3_entity_delta *rec);

/* A remove record for entity `number`. */
void sg_q3_delta_entity_make_remove(const struct sg_q3_variant *v, int number,
                                    struct sg_q3_entity_delta *rec);

/* Read a playerstate update.  Returns 0 or SG_E_MALFORMED (lc too big). */
int sg_q3_delta_player_read(struct sg_q3_msg *m, const struct sg_q3_variant *v,
                            struct sg_q3_player_delta *rec);

/* Write a playerstate update exactly as recorded. */
void sg_q3_delta_player_write(struct sg_q3_msg *m, const struct sg_q3_variant *v,
                              const struct sg_q3_player_delta *rec);

/* to = from + rec; `from` NULL means the all-zero state. */
void sg_q3_delta_player_apply(const struct sg_q3_variant *v, const struct sg_q3_player *from,
                              const struct sg_q3_player_delta *rec, struct sg_q3_player *to);

/* The update the game's writer sends for from -> to; `from` NULL = zero state. */
void sg_q3_delta_player_make(const struct sg_q3_variant *v, const struct sg_q3_player *from,
                             const struct sg_q3_player *to, struct sg_q3_player_delta *rec);

#endif
