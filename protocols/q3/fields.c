/*
 * Quake 3 delta field tables (see fields.h).  The widths come from the
 * game's netField_t tables; GENTITYNUM_BITS is 10, MAX_POWERUPS 16.
 */
#include "protocols/q3/fields.h"

#include <string.h>

/* An entry in wire position `slot`, kept in state word `slot`: for these
 * tables the wire order and the state's order are the same. */
#define F(slot, name, bits) [slot] = {(name), (bits), (slot)}

const struct sg_q3_netfield sg_q3_entity_fields[SG_Q3_ES_NUM_FIELDS] = {
    F(SG_Q3_ES_POS_TRTIME, "pos.trTime", 32),
    F(SG_Q3_ES_POS_TRBASE0, "pos.trBase[0]", 0),
    F(SG_Q3_ES_POS_TRBASE1, "pos.trBase[1]", 0),
    F(SG_Q3_ES_POS_TRDELTA0, "pos.trDelta[0]", 0),
    F(SG_Q3_ES_POS_TRDELTA1, "pos.trDelta[1]", 0),
    F(SG_Q3_ES_POS_TRBASE2, "pos.trBase[2]", 0),
    F(SG_Q3_ES_APOS_TRBASE1, "apos.trBase[1]", 0),
    F(SG_Q3_ES_POS_TRDELTA2, "pos.trDelta[2]", 0),
    F(SG_Q3_ES_APOS_TRBASE0, "apos.trBase[0]", 0),
    F(SG_Q3_ES_EVENT, "event", 10),
    F(SG_Q3_ES_ANGLES2_1, "angles2[1]", 0),
    F(SG_Q3_ES_ETYPE, "eType", 8),
    F(SG_Q3_ES_TORSOANIM, "torsoAnim", 8),
    F(SG_Q3_ES_EVENTPARM, "eventParm", 8),
    F(SG_Q3_ES_LEGSANIM, "legsAnim", 8),
    F(SG_Q3_ES_GROUNDENTITYNUM, "groundEntityNum", SG_Q3_GENTITYNUM_BITS),
    F(SG_Q3_ES_POS_TRTYPE, "pos.trType", 8),
    F(SG_Q3_ES_EFLAGS, "eFlags", 19),
    F(SG_Q3_ES_OTHERENTITYNUM, "otherEntityNum", SG_Q3_GENTITYNUM_BITS),
    F(SG_Q3_ES_WEAPON, "weapon", 8),
    F(SG_Q3_ES_CLIENTNUM, "clientNum", 8),
    F(SG_Q3_ES_ANGLES1, "angles[1]", 0),
    F(SG_Q3_ES_POS_TRDURATION, "pos.trDuration", 32),
    F(SG_Q3_ES_APOS_TRTYPE, "apos.trType", 8),
    F(SG_Q3_ES_ORIGIN0, "origin[0]", 0),
    F(SG_Q3_ES_ORIGIN1, "origin[1]", 0),
    F(SG_Q3_ES_ORIGIN2, "origin[2]", 0),
    F(SG_Q3_ES_SOLID, "solid", 24),
    F(SG_Q3_ES_POWERUPS, "powerups", SG_Q3_MAX_POWERUPS),
    F(SG_Q3_ES_MODELINDEX, "modelindex", 8),
    F(SG_Q3_ES_OTHERENTITYNUM2, "otherEntityNum2", SG_Q3_GENTITYNUM_BITS),
    F(SG_Q3_ES_LOOPSOUND, "loopSound", 8),
    F(SG_Q3_ES_GENERIC1, "generic1", 8),
    F(SG_Q3_ES_ORIGIN2_2, "origin2[2]", 0),
    F(SG_Q3_ES_ORIGIN2_0, "origin2[0]", 0),
    F(SG_Q3_ES_ORIGIN2_1, "origin2[1]", 0),
    F(SG_Q3_ES_MODELINDEX2, "modelindex2", 8),
    F(SG_Q3_ES_ANGLES0, "angles[0]", 0),
    F(SG_Q3_ES_TIME, "time", 32),
    F(SG_Q3_ES_APOS_TRTIME, "apos.trTime", 32),
    F(SG_Q3_ES_APOS_TRDURATION, "apos.trDuration", 32),
    F(SG_Q3_ES_APOS_TRBASE2, "apos.trBase[2]", 0),
    F(SG_Q3_ES_APOS_TRDELTA0, "apos.trDelta[0]", 0),
    F(SG_Q3_ES_APOS_TRDELTA1, "apos.trDelta[1]", 0),
    F(SG_Q3_ES_APOS_TRDELTA2, "apos.trDelta[2]", 0),
    F(SG_Q3_ES_TIME2, "time2", 32),
    F(SG_Q3_ES_ANGLES2, "angles[2]", 0),
    F(SG_Q3_ES_ANGLES2_0, "angles2[0]", 0),
    F(SG_Q3_ES_ANGLES2_2, "angles2[2]", 0),
    F(SG_Q3_ES_CONSTANTLIGHT, "constantLight", 32),
    F(SG_Q3_ES_FRAME, "frame", 16),
};

const struct sg_q3_netfield sg_q3_player_fields[SG_Q3_PS_NUM_FIELDS] = {
    F(SG_Q3_PS_COMMANDTIME, "commandTime", 32),
    F(SG_Q3_PS_ORIGIN0, "origin[0]", 0),
    F(SG_Q3_PS_ORIGIN1, "origin[1]", 0),
    F(SG_Q3_PS_BOBCYCLE, "bobCycle", 8),
    F(SG_Q3_PS_VELOCITY0, "velocity[0]", 0),
    F(SG_Q3_PS_VELOCITY1, "velocity[1]", 0),
    F(SG_Q3_PS_VIEWANGLES1, "viewangles[1]", 0),
    F(SG_Q3_PS_VIEWANGLES0, "viewangles[0]", 0),
    F(SG_Q3_PS_WEAPONTIME, "weaponTime", -16),
    F(SG_Q3_PS_ORIGIN2, "origin[2]", 0),
    F(SG_Q3_PS_VELOCITY2, "velocity[2]", 0),
    F(SG_Q3_PS_LEGSTIMER, "legsTimer", 8),
    F(SG_Q3_PS_PM_TIME, "pm_time", -16),
    F(SG_Q3_PS_EVENTSEQUENCE, "eventSequence", 16),
    F(SG_Q3_PS_TORSOANIM, "torsoAnim", 8),
    F(SG_Q3_PS_MOVEMENTDIR, "movementDir", 4),
    F(SG_Q3_PS_EVENTS0, "events[0]", 8),
    F(SG_Q3_PS_LEGSANIM, "legsAnim", 8),
    F(SG_Q3_PS_EVENTS1, "events[1]", 8),
    F(SG_Q3_PS_PM_FLAGS, "pm_flags", 16),
    F(SG_Q3_PS_GROUNDENTITYNUM, "groundEntityNum", SG_Q3_GENTITYNUM_BITS),
    F(SG_Q3_PS_WEAPONSTATE, "weaponstate", 4),
    F(SG_Q3_PS_EFLAGS, "eFlags", 16),
    F(SG_Q3_PS_EXTERNALEVENT, "externalEvent", 10),
    F(SG_Q3_PS_GRAVITY, "gravity", 16),
    F(SG_Q3_PS_SPEED, "speed", 16),
    F(SG_Q3_PS_DELTA_ANGLES1, "delta_angles[1]", 16),
    F(SG_Q3_PS_EXTERNALEVENTPARM, "externalEventParm", 8),
    F(SG_Q3_PS_VIEWHEIGHT, "viewheight", -8),
    F(SG_Q3_PS_DAMAGEEVENT, "damageEvent", 8),
    F(SG_Q3_PS_DAMAGEYAW, "damageYaw", 8),
    F(SG_Q3_PS_DAMAGEPITCH, "damagePitch", 8),
    F(SG_Q3_PS_DAMAGECOUNT, "damageCount", 8),
    F(SG_Q3_PS_GENERIC1, "generic1", 8),
    F(SG_Q3_PS_PM_TYPE, "pm_type", 8),
    F(SG_Q3_PS_DELTA_ANGLES0, "delta_angles[0]", 16),
    F(SG_Q3_PS_DELTA_ANGLES2, "delta_angles[2]", 16),
    F(SG_Q3_PS_TORSOTIMER, "torsoTimer", 12),
    F(SG_Q3_PS_EVENTPARMS0, "eventParms[0]", 8),
    F(SG_Q3_PS_EVENTPARMS1, "eventParms[1]", 8),
    F(SG_Q3_PS_CLIENTNUM, "clientNum", 8),
    F(SG_Q3_PS_WEAPON, "weapon", 5),
    F(SG_Q3_PS_VIEWANGLES2, "viewangles[2]", 0),
    F(SG_Q3_PS_GRAPPLEPOINT0, "grapplePoint[0]", 0),
    F(SG_Q3_PS_GRAPPLEPOINT1, "grapplePoint[1]", 0),
    F(SG_Q3_PS_GRAPPLEPOINT2, "grapplePoint[2]", 0),
    F(SG_Q3_PS_JUMPPAD_ENT, "jumppad_ent", SG_Q3_GENTITYNUM_BITS),
    F(SG_Q3_PS_LOOPSOUND, "loopSound", 16),
};

const char *sg_q3_ps_array_name(int array)
{
    static const char *const names[SG_Q3_PS_NUM_ARRAYS] = {"stats", "persistant", "ammo",
                                                           "powerups"};
    if (array < 0 || array >= SG_Q3_PS_NUM_ARRAYS)
        return "unknown";
    return names[array];
}

int sg_q3_ps_array_bits(int array)
{
    return array == SG_Q3_PS_POWERUPS ? 32 : 16;
}

float sg_q3_bits_to_float(int32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

int32_t sg_q3_float_to_bits(float f)
{
    int32_t bits;
    memcpy(&bits, &f, sizeof(bits));
    return bits;
}
