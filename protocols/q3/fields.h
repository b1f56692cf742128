/*
 * Quake 3 delta field tables: entityState_t and playerState_t as the wire
 * sees them (msg.c netField_t entityStateFields / playerStateFields).
 *
 * A state is kept as an array of 32-bit words indexed by the enums below
 * (the order of protocol 68's wire tables); a table entry names the word
 * it fills (`slot`), so a variant's table (variant.h) may order, narrow or
 * leave out fields while the state keeps its meaning.  Floats are kept as
 * their IEEE bit patterns (the game compares and copies them as ints too).
 * `bits` is the wire width: 0 means float (1 + 13 bits "integral" or 1 + 32
 * bits "full"), negative means signed (sign-extended on read).  The order
 * matters: a delta sends `lc` = 1 + wire position of the last changed
 * field, then one "changed" bit per field below lc.
 */
#ifndef SG_PROTOCOLS_Q3_FIELDS_H
#define SG_PROTOCOLS_Q3_FIELDS_H

#include <stdint.h>

#include "protocols/q3/proto.h"

/* Floats whose value is an integer in [-4096, 4095] travel in 13 bits. */
#define SG_Q3_FLOAT_INT_BITS 13
#define SG_Q3_FLOAT_INT_BIAS (1 << (SG_Q3_FLOAT_INT_BITS - 1))

struct sg_q3_netfield {
    const char *name; /* the game's name, e.g. "pos.trBase[0]" */
    int bits;         /* 0 = float; < 0 = signed integer of -bits */
    int slot;         /* the state word it fills: enum sg_q3_es_field / sg_q3_ps_field */
};

/* entityState_t fields, wire order. */
enum sg_q3_es_field {
    SG_Q3_ES_POS_TRTIME,
    SG_Q3_ES_POS_TRBASE0,
    SG_Q3_ES_POS_TRBASE1,
    SG_Q3_ES_POS_TRDELTA0,
    SG_Q3_ES_POS_TRDELTA1,
    SG_Q3_ES_POS_TRBASE2,
    SG_Q3_ES_APOS_TRBASE1,
    SG_Q3_ES_POS_TRDELTA2,
    SG_Q3_ES_APOS_TRBASE0,
    SG_Q3_ES_EVENT,
    SG_Q3_ES_ANGLES2_1,
    SG_Q3_ES_ETYPE,
    SG_Q3_ES_TORSOANIM,
    SG_Q3_ES_EVENTPARM,
    SG_Q3_ES_LEGSANIM,
    SG_Q3_ES_GROUNDENTITYNUM,
    SG_Q3_ES_POS_TRTYPE,
    SG_Q3_ES_EFLAGS,
    SG_Q3_ES_OTHERENTITYNUM,
    SG_Q3_ES_WEAPON,
    SG_Q3_ES_CLIENTNUM,
    SG_Q3_ES_ANGLES1,
    SG_Q3_ES_POS_TRDURATION,
    SG_Q3_ES_APOS_TRTYPE,
    SG_Q3_ES_ORIGIN0,
    SG_Q3_ES_ORIGIN1,
    SG_Q3_ES_ORIGIN2,
    SG_Q3_ES_SOLID,
    SG_Q3_ES_POWERUPS,
    SG_Q3_ES_MODELINDEX,
    SG_Q3_ES_OTHERENTITYNUM2,
    SG_Q3_ES_LOOPSOUND,
    SG_Q3_ES_GENERIC1,
    SG_Q3_ES_ORIGIN2_2,
    SG_Q3_ES_ORIGIN2_0,
    SG_Q3_ES_ORIGIN2_1,
    SG_Q3_ES_MODELINDEX2,
    SG_Q3_ES_ANGLES0,
    SG_Q3_ES_TIME,
    SG_Q3_ES_APOS_TRTIME,
    SG_Q3_ES_APOS_TRDURATION,
    SG_Q3_ES_APOS_TRBASE2,
    SG_Q3_ES_APOS_TRDELTA0,
    SG_Q3_ES_APOS_TRDELTA1,
    SG_Q3_ES_APOS_TRDELTA2,
    SG_Q3_ES_TIME2,
    SG_Q3_ES_ANGLES2,
    SG_Q3_ES_ANGLES2_0,
    SG_Q3_ES_ANGLES2_2,
    SG_Q3_ES_CONSTANTLIGHT,
    SG_Q3_ES_FRAME,
    SG_Q3_ES_NUM_FIELDS /* 51 */
};

/* playerState_t fields, wire order (the arrays travel separately). */
enum sg_q3_ps_field {
    SG_Q3_PS_COMMANDTIME,
    SG_Q3_PS_ORIGIN0,
    SG_Q3_PS_ORIGIN1,
    SG_Q3_PS_BOBCYCLE,
    SG_Q3_PS_VELOCITY0,
    SG_Q3_PS_VELOCITY1,
    SG_Q3_PS_VIEWANGLES1,
    SG_Q3_PS_VIEWANGLES0,
    SG_Q3_PS_WEAPONTIME,
    SG_Q3_PS_ORIGIN2,
    SG_Q3_PS_VELOCITY2,
    SG_Q3_PS_LEGSTIMER,
    SG_Q3_PS_PM_TIME,
    SG_Q3_PS_EVENTSEQUENCE,
    SG_Q3_PS_TORSOANIM,
    SG_Q3_PS_MOVEMENTDIR,
    SG_Q3_PS_EVENTS0,
    SG_Q3_PS_LEGSANIM,
    SG_Q3_PS_EVENTS1,
    SG_Q3_PS_PM_FLAGS,
    SG_Q3_PS_GROUNDENTITYNUM,
    SG_Q3_PS_WEAPONSTATE,
    SG_Q3_PS_EFLAGS,
    SG_Q3_PS_EXTERNALEVENT,
    SG_Q3_PS_GRAVITY,
    SG_Q3_PS_SPEED,
    SG_Q3_PS_DELTA_ANGLES1,
    SG_Q3_PS_EXTERNALEVENTPARM,
    SG_Q3_PS_VIEWHEIGHT,
    SG_Q3_PS_DAMAGEEVENT,
    SG_Q3_PS_DAMAGEYAW,
    SG_Q3_PS_DAMAGEPITCH,
    SG_Q3_PS_DAMAGECOUNT,
    SG_Q3_PS_GENERIC1,
    SG_Q3_PS_PM_TYPE,
    SG_Q3_PS_DELTA_ANGLES0,
    SG_Q3_PS_DELTA_ANGLES2,
    SG_Q3_PS_TORSOTIMER,
    SG_Q3_PS_EVENTPARMS0,
    SG_Q3_PS_EVENTPARMS1,
    SG_Q3_PS_CLIENTNUM,
    SG_Q3_PS_WEAPON,
    SG_Q3_PS_VIEWANGLES2,
    SG_Q3_PS_GRAPPLEPOINT0,
    SG_Q3_PS_GRAPPLEPOINT1,
    SG_Q3_PS_GRAPPLEPOINT2,
    SG_Q3_PS_JUMPPAD_ENT,
    SG_Q3_PS_LOOPSOUND,
    SG_Q3_PS_NUM_FIELDS /* 48 */
};

/* The four playerState arrays, in the order they travel. */
enum sg_q3_ps_array {
    SG_Q3_PS_STATS,
    SG_Q3_PS_PERSISTANT,
    SG_Q3_PS_AMMO,
    SG_Q3_PS_POWERUPS,
    SG_Q3_PS_NUM_ARRAYS
};
#define SG_Q3_PS_ARRAY_LEN 16 /* MAX_STATS = MAX_PERSISTANT = MAX_WEAPONS = MAX_POWERUPS */

/* Protocol 68's tables (every variant in variant.c uses them), indexed by
 * the enums above; entry i has slot i.  Code that decodes or encodes takes
 * its tables from the variant (variant.h), not from these names. */
extern const struct sg_q3_netfield sg_q3_entity_fields[SG_Q3_ES_NUM_FIELDS];
extern const struct sg_q3_netfield sg_q3_player_fields[SG_Q3_PS_NUM_FIELDS];

/* Array name ("stats", "persistant", "ammo", "powerups"). */
const char *sg_q3_ps_array_name(int array);

/* Wire width of one array element: 16 (signed short) except powerups, 32. */
int sg_q3_ps_array_bits(int array);

/* Float helpers on bit patterns (no aliasing tricks for callers). */
float sg_q3_bits_to_float(int32_t bits);
int32_t sg_q3_float_to_bits(float f);

#endif
