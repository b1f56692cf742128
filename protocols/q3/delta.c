/*
 * Quake 3 entity and playerstate delta records: read, write, apply, make.
 * The wire layout is drawn in delta.h; the field tables and the entity
 * number width are the variant's (variant.h), passed in by the caller.  Reads go through the bounded bit
 * reader; the caller checks its overflow flag once per message.
 */
#include "protocols/q3/delta.h"

#include <string.h>

#include "protocols/error.h"

/* The word a reader gets back for `v` sent in `bits` bits (masked, sign-extended). */
static int32_t wire_int(int32_t v, int bits)
{
    int n = bits < 0 ? -bits : bits;
    uint32_t u = (uint32_t)v;
    uint32_t mask;

    if (n >= 32)
        return v;
    mask = (1u << n) - 1;
    u &= mask;
    if (bits < 0 && (u & (1u << (n - 1))))
        u |= ~mask;
    return (int32_t)u;
}

/* True when float `bits` is an integer in [-4096, 4095]: the 13-bit form. */
static bool float_small_int(int32_t bits, int *trunc)
{
    float f = sg_q3_bits_to_float(bits);
    int t;

    if (!(f >= -(float)SG_Q3_FLOAT_INT_BIAS && f < (float)SG_Q3_FLOAT_INT_BIAS))
        return false; /* also rejects NaN */
    t = (int)f;
    if ((float)t != f)
        return false;
    *trunc = t;
    return true;
}

/* Read the value part of a changed float: full bit, then 13 or 32 bits. */
static void read_float_value(struct sg_q3_msg *m, uint8_t *form, int32_t *value)
{
    if (sg_q3_msg_read_bits(m, 1) == 0) {
        int trunc = (int)sg_q3_msg_read_bits(m, SG_Q3_FLOAT_INT_BITS) - SG_Q3_FLOAT_INT_BIAS;

        /* Only the NYT code (corrupt data) reads past 8191: the game takes
         * the value all the same, but no 13-bit form can carry it, so it is
         * recorded as what a writer must send, the full 32 bits. */
        *form = trunc < SG_Q3_FLOAT_INT_BIAS ? SG_Q3_FORM_INT : SG_Q3_FORM_FULL;
        *value = sg_q3_float_to_bits((float)trunc);
    } else {
        *form = SG_Q3_FORM_FULL;
        *value = sg_q3_msg_read_bits(m, 32);
    }
}

/* Write the value part of a changed float in the recorded form. */
static void write_float_value(struct sg_q3_msg *m, uint8_t form, int32_t value)
{
    int trunc;

    if (form == SG_Q3_FORM_INT && float_small_int(value, &trunc)) {
        sg_q3_msg_write_bits(m, 0, 1);
        sg_q3_msg_write_bits(m, trunc + SG_Q3_FLOAT_INT_BIAS, SG_Q3_FLOAT_INT_BITS);
    } else {
        sg_q3_msg_write_bits(m, 1, 1);
        sg_q3_msg_write_bits(m, value, 32);
    }
}

/* The form the game's writer picks for a changed float (with or without the zero bit). */
static uint8_t float_form(int32_t value, bool zero_bit)
{
    int trunc;

    if (zero_bit && sg_q3_bits_to_float(value) == 0.0f)
        return SG_Q3_FORM_ZERO;
    return float_small_int(value, &trunc) ? SG_Q3_FORM_INT : SG_Q3_FORM_FULL;
}

/* The word a reader ends with for a changed float sent in `form`. */
static int32_t float_result(int32_t value, uint8_t form)
{
    int trunc;

    if (form == SG_Q3_FORM_ZERO)
        return 0;
    if (form == SG_Q3_FORM_INT && float_small_int(value, &trunc))
        return sg_q3_float_to_bits((float)trunc);
    return value;
}

/*
 * The sent fields, the same for entities and the player state but for
 * entities' zero bit (`zero_bit`: after the changed bit, 0 sends the field
 * as zero on its own).  Inline: each caller's constant `zero_bit` folds.
 */

/* Read lc (at most `max`) and the fields below it into form[] / value[]. */
static inline int read_fields(struct sg_q3_msg *m, const struct sg_q3_netfield *fields, int max,
                              bool zero_bit, uint8_t *lc_out, uint8_t *form, int32_t *value)
{
    int lc = sg_q3_msg_read_byte(m);

    if (m->overflowed)
        return SG_E_OVERFLOW;
    if (lc < 0 || lc > max)
        return SG_E_MALFORMED;
    *lc_out = (uint8_t)lc;

    /* one changed bit per field below lc, then its value */
    for (int i = 0; i < lc; i++) {
        int bits = fields[i].bits;

        if (sg_q3_msg_read_bits(m, 1) == 0)
            continue;
        if (zero_bit && sg_q3_msg_read_bits(m, 1) == 0) {
            form[i] = SG_Q3_FORM_ZERO;
            continue;
        }
        if (bits == 0) {
            read_float_value(m, &form[i], &value[i]);
        } else {
            form[i] = SG_Q3_FORM_INT;
            value[i] = sg_q3_msg_read_bits(m, bits);
            /* Only the NYT code (corrupt data) reads past a field's width:
             * the game takes the value, but no writer can send it again. */
            if (wire_int(value[i], bits) != value[i])
                return SG_E_MALFORMED;
        }
    }
    return 0;
}

/* Write the fields below lc, each in its recorded form. */
static inline void write_fields(struct sg_q3_msg *m, const struct sg_q3_netfield *fields, int lc,
                                bool zero_bit, const uint8_t *form, const int32_t *value)
{
    for (int i = 0; i < lc; i++) {
        int bits = fields[i].bits;

        if (form[i] == SG_Q3_FORM_SAME) {
            sg_q3_msg_write_bits(m, 0, 1);
            continue;
        }
        sg_q3_msg_write_bits(m, 1, 1);
        if (zero_bit) {
            if (form[i] == SG_Q3_FORM_ZERO) {
                sg_q3_msg_write_bits(m, 0, 1);
                continue;
            }
            sg_q3_msg_write_bits(m, 1, 1);
        }
        if (bits == 0)
            write_float_value(m, form[i], value[i]);
        else
            sg_q3_msg_write_bits(m, form[i] == SG_Q3_FORM_ZERO ? 0 : value[i], bits);
    }
}

/* The sent fields below n replace the base's words in f[]. */
static inline void apply_fields(const struct sg_q3_netfield *fields, int n, const uint8_t *form,
                                const int32_t *value, int32_t *f)
{
    for (int i = 0; i < n; i++) {
        int bits = fields[i].bits;
        int32_t *w = &f[fields[i].slot];

        if (form[i] == SG_Q3_FORM_SAME)
            continue;
        if (bits == 0)
            *w = float_result(value[i], form[i]);
        else
            *w = form[i] == SG_Q3_FORM_ZERO ? 0 : wire_int(value[i], bits);
    }
}

/* lc (one past the wire position of the last field that differs), and each
 * differing field below it in the form the game picks. */
static inline int make_fields(const struct sg_q3_netfield *fields, int nfields, bool zero_bit,
                              const int32_t *from, const int32_t *to, uint8_t *form,
                              int32_t *value)
{
    int lc = 0;

    for (int i = 0; i < nfields; i++) {
        if (from[fields[i].slot] != to[fields[i].slot])
            lc = i + 1;
    }
    for (int i = 0; i < lc; i++) {
        int bits = fields[i].bits;
        int32_t w = to[fields[i].slot];

        if (from[fields[i].slot] == w)
            continue;
        if (bits == 0) {
            form[i] = float_form(w, zero_bit);
            value[i] = float_result(w, form[i]);
        } else if (zero_bit && w == 0) {
            form[i] = SG_Q3_FORM_ZERO;
        } else {
            form[i] = SG_Q3_FORM_INT;
            value[i] = wire_int(w, bits);
        }
    }
    return lc;
}

int sg_q3_delta_entity_read(struct sg_q3_msg *m, const struct sg_q3_variant *v, int number,
                            struct sg_q3_entity_delta *rec)
{

    memset(rec, 0, sizeof(*rec));
    rec->number = (uint16_t)number;

    /* remove bit, then the "has delta" bit */
    if (sg_q3_msg_read_bits(m, 1) == 1) {
        rec->kind = SG_Q3_ENT_REMOVE;
        return 0;
    }
    if (sg_q3_msg_read_bits(m, 1) == 0) {
        rec->kind = SG_Q3_ENT_NOCHANGE;
        return 0;
    }
    rec->kind = SG_Q3_ENT_DELTA;
    return read_fields(m, v->entity_fields, v->num_entity_fields, true, &rec->lc, rec->form,
                       rec->value);
}

void sg_q3_delta_entity_write(struct sg_q3_msg *m, const struct sg_q3_variant *v,
                              const struct sg_q3_entity_delta *rec)
{
    int lc = rec->lc > v->num_entity_fields ? v->num_entity_fields : rec->lc;

    sg_q3_msg_write_bits(m, rec->number, v->gentitynum_bits);
    if (rec->kind == SG_Q3_ENT_REMOVE) {
        sg_q3_msg_write_bits(m, 1, 1);
        return;
    }
    sg_q3_msg_write_bits(m, 0, 1);
    if (rec->kind == SG_Q3_ENT_NOCHANGE) {
        sg_q3_msg_write_bits(m, 0, 1);
        return;
    }
    sg_q3_msg_write_bits(m, 1, 1);
    sg_q3_msg_write_byte(m, lc);

    /* fields in table order, each in its recorded form */
    write_fields(m, v->entity_fields, lc, true, rec->form, rec->value);
}

void sg_q3_delta_entity_apply(const struct sg_q3_variant *v, const struct sg_q3_entity *from,
                              const struct sg_q3_entity_delta *rec, struct sg_q3_entity *to)
{
    int n;

    if (rec->kind == SG_Q3_ENT_REMOVE) {
        memset(to, 0, sizeof(*to));
        to->number = v->entitynum_none;
        return;
    }
    *to = *from;
    to->number = rec->number;
    if (rec->kind == SG_Q3_ENT_NOCHANGE)
        return;

    /* sent fields replace the base's words (the bound in a local: the
     * stores below could, for the compiler, change it) */
    n = rec->lc < v->num_entity_fields ? rec->lc : v->num_entity_fields;
    apply_fields(v->entity_fields, n, rec->form, rec->value, to->f);
}

bool sg_q3_delta_entity_make(const struct sg_q3_variant *v, const struct sg_q3_entity *from,
                             const struct sg_q3_entity *to, bool force,
                             struct sg_q3_entity_delta *rec)
{
    int lc = 0;

    memset(rec, 0, sizeof(*rec));
    rec->number = (uint16_t)(to->number & (v->max_gentities - 1));

    lc = make_fields(v->entity_fields, v->num_entity_fields, true, from->f, to->f, rec->form,
                     rec->value);
    if (lc == 0) {
        rec->kind = SG_Q3_ENT_NOCHANGE;
        return force;
    }
    rec->kind = SG_Q3_ENT_DELTA;
    rec->lc = (uint8_t)lc;
    return true;
}

void sg_q3_delta_entity_make_remove(const struct sg_q3_variant *v, int number,
                                    struct sg_q3_entity_delta *rec)
{
    memset(rec, 0, sizeof(*rec));
    rec->number = (uint16_t)(number & (v->max_gentities - 1));
    rec->kind = SG_Q3_ENT_REMOVE;
}

int sg_q3_delta_player_read(struct sg_q3_msg *m, const struct sg_q3_variant *v,
                            struct sg_q3_player_delta *rec)
{

    int err;

    memset(rec, 0, sizeof(*rec));
    /* fields: changed bit, then the value (no zero bit here) */
    err = read_fields(m, v->player_fields, v->num_player_fields, false, &rec->lc, rec->form,
                      rec->value);
    if (err < 0)
        return err;

    /* the arrays: one bit for all, then per array a bit, a mask and values */
    rec->arrays = sg_q3_msg_read_bits(m, 1) != 0;
    if (!rec->arrays)
        return 0;
    for (int a = 0; a < SG_Q3_PS_NUM_ARRAYS; a++) {
        if (sg_q3_msg_read_bits(m, 1) == 0)
            continue;
        rec->array_sent[a] = true;
        rec->array_mask[a] = (uint16_t)sg_q3_msg_read_bits(m, SG_Q3_PS_ARRAY_LEN);
        for (int i = 0; i < SG_Q3_PS_ARRAY_LEN; i++) {
            if (!(rec->array_mask[a] & (1u << i)))
                continue;
            if (a == SG_Q3_PS_POWERUPS)
                rec->array_value[a][i] = sg_q3_msg_read_long(m);
            else
                rec->array_value[a][i] = sg_q3_msg_read_short(m);
        }
    }
    return 0;
}

void sg_q3_delta_player_write(struct sg_q3_msg *m, const struct sg_q3_variant *v,
                              const struct sg_q3_player_delta *rec)
{
    int lc = rec->lc > v->num_player_fields ? v->num_player_fields : rec->lc;

    sg_q3_msg_write_byte(m, lc);
    write_fields(m, v->player_fields, lc, false, rec->form, rec->value);

    /* arrays exactly as recorded */
    sg_q3_msg_write_bits(m, rec->arrays ? 1 : 0, 1);
    if (!rec->arrays)
        return;
    for (int a = 0; a < SG_Q3_PS_NUM_ARRAYS; a++) {
        sg_q3_msg_write_bits(m, rec->array_sent[a] ? 1 : 0, 1);
        if (!rec->array_sent[a])
            continue;
        sg_q3_msg_write_bits(m, rec->array_mask[a], SG_Q3_PS_ARRAY_LEN);
        for (int i = 0; i < SG_Q3_PS_ARRAY_LEN; i++) {
            if (!(rec->array_mask[a] & (1u << i)))
                continue;
            if (a == SG_Q3_PS_POWERUPS)
                sg_q3_msg_write_long(m, rec->array_value[a][i]);
            else
                sg_q3_msg_write_short(m, rec->array_value[a][i]);
        }
    }
}

void sg_q3_delta_player_apply(const struct sg_q3_variant *v, const struct sg_q3_player *from,
                              const struct sg_q3_player_delta *rec, struct sg_q3_player *to)
{
    int n = rec->lc < v->num_player_fields ? rec->lc : v->num_player_fields;

    if (from)
        *to = *from;
    else
        memset(to, 0, sizeof(*to));

    /* sent fields */
    apply_fields(v->player_fields, n, rec->form, rec->value, to->f);

    /* sent array elements */
    if (!rec->arrays)
        return;
    for (int a = 0; a < SG_Q3_PS_NUM_ARRAYS; a++) {
        int bits = sg_q3_ps_array_bits(a);

        if (!rec->array_sent[a])
            continue;
        for (int i = 0; i < SG_Q3_PS_ARRAY_LEN; i++) {
            if (rec->array_mask[a] & (1u << i))
                to->a[a][i] =
                    bits == 32 ? rec->array_value[a][i] : wire_int(rec->array_value[a][i], -bits);
        }
    }
}

void sg_q3_delta_player_make(const struct sg_q3_variant *v, const struct sg_q3_player *from,
                             const struct sg_q3_player *to, struct sg_q3_player_delta *rec)
{
    static const struct sg_q3_player zero;
    int lc = 0;

    if (!from)
        from = &zero;
    memset(rec, 0, sizeof(*rec));

    /* fields: lc, then the differing ones */
    lc = make_fields(v->player_fields, v->num_player_fields, false, from->f, to->f, rec->form,
                     rec->value);
    rec->lc = (uint8_t)lc;

    /* arrays: a mask of the differing elements */
    for (int a = 0; a < SG_Q3_PS_NUM_ARRAYS; a++) {
        int bits = sg_q3_ps_array_bits(a);

        for (int i = 0; i < SG_Q3_PS_ARRAY_LEN; i++) {
            if (from->a[a][i] == to->a[a][i])
                continue;
            rec->array_mask[a] |= (uint16_t)(1u << i);
            rec->array_value[a][i] = bits == 32 ? to->a[a][i] : wire_int(to->a[a][i], -bits);
        }
        rec->array_sent[a] = rec->array_mask[a] != 0;
        rec->arrays = rec->arrays || rec->array_sent[a];
    }
}
