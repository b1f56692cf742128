/*
 * What DarkPlaces' own protocols DP5, DP6 and DP7 change in NetQuake's
 * messages (the rest is parse.c's, read with their sizes: float
 * coordinates, 16-bit angles).  Facts from DarkPlaces' cl_parse.c
 * (CL_ParseServerMessage, CL_ParseClientdata: the receiver's view of the
 * server's messages) and sv_user.c (SV_ReadClientMove: the server's view
 * of clc_move).
 *
 * The server's messages DarkPlaces' client reads differently on DP5-DP7:
 *  - svc_clientdata (15): the SU_ bits of a u16 with two extension bytes;
 *    punch angles as angle16, punch vectors and velocity as floats; items
 *    only with SU_ITEMS (always on DP5); DP5 alone still sends the player's
 *    stats in it, as shorts (DP6 and DP7 send them as svc_updatestat /
 *    svc_updatestatubyte); SU_VIEWZOOM a u16.
 *  - svc_entities (57), svc_csqcentities (58): dpent.c.
 *  - svc_temp_entity: a type neither id's nor DarkPlaces' own belongs to
 *    the server's CSQC program (parse.c hands it to dpent.c).
 * The client's clc_move: DP7 opens it with the move's sequence number;
 * angles are angle16; buttons a long from DP6 on, followed by the cursor
 * (screen position, trace start and impact, entity).
 */
#include "protocols/nq/parse.h"

#define SU_VIEWHEIGHT  (1u << 0)
#define SU_IDEALPITCH  (1u << 1)
#define SU_PUNCH1      (1u << 2)
#define SU_VELOCITY1   (1u << 5)
#define SU_ITEMS       (1u << 9)
#define SU_WEAPONFRAME (1u << 12)
#define SU_ARMOR       (1u << 13)
#define SU_WEAPON      (1u << 14)
#define SU_EXTEND1     (1u << 15)
#define SU_PUNCHVEC1   (1u << 16)
#define SU_VIEWZOOM    (1u << 19)
#define SU_EXTEND2     (1u << 23)

static void clientdata(struct sg_nq__ctx *c)
{
    static const char *const punch[3] = {"punch0", "punch1", "punch2"};
    static const char *const pvec[3] = {"punchvector0", "punchvector1", "punchvector2"};
    static const char *const vel[3] = {"velocity0", "velocity1", "velocity2"};
    static const char *const stats[7] = {"health",  "ammo",  "shells",      "nails",
                                         "rockets", "cells", "activeweapon"};
    uint32_t bits = sg_nq__num(c, "bits", SG_BMSG_U16);

    if (bits & SU_EXTEND1)
        bits |= sg_nq__num(c, "extend1", SG_BMSG_U8) << 16;
    if (bits & SU_EXTEND2)
        bits |= sg_nq__num(c, "extend2", SG_BMSG_U8) << 24;
    if (bits & SU_VIEWHEIGHT)
        sg_nq__num(c, "viewheight", SG_BMSG_S8);
    if (bits & SU_IDEALPITCH)
        sg_nq__num(c, "idealpitch", SG_BMSG_S8);
    for (int i = 0; i < 3; i++) {
        if (bits & (SU_PUNCH1 << i))
            sg_nq__num(c, punch[i], SG_BMSG_ANGLE16);
        if (bits & (SU_PUNCHVEC1 << i))
            sg_nq__num(c, pvec[i], SG_BMSG_COORD_FLOAT);
        if (bits & (SU_VELOCITY1 << i))
            sg_nq__num(c, vel[i], SG_BMSG_COORD_FLOAT);
    }
    if ((bits & SU_ITEMS) || c->p->dpn == 5)
        sg_nq__num(c, "items", SG_BMSG_S32);
    if (c->p->dpn == 5) {
        if (bits & SU_WEAPONFRAME)
            sg_nq__num(c, "weaponframe", SG_BMSG_S16);
        if (bits & SU_ARMOR)
            sg_nq__num(c, "armor", SG_BMSG_S16);
        if (bits & SU_WEAPON)
            sg_nq__num(c, "weapon", SG_BMSG_S16);
        for (int i = 0; i < 7; i++)
            sg_nq__num(c, stats[i], i == 6 ? SG_BMSG_U16 : SG_BMSG_S16);
    }
    if (bits & SU_VIEWZOOM)
        sg_nq__num(c, "viewzoom", SG_BMSG_U16);
}

bool sg_nq__dp_svc(struct sg_nq__ctx *c, uint32_t mi)
{
    switch (c->out->msgs[mi].op) {
    case 15:
        clientdata(c);
        return true;
    case 57:
        sg_nq__dp_entities(c);
        return true;
    case 58:
        sg_nq__dp_csqc(c, mi);
        return true;
    default:
        return false;
    }
}

/* SV_ReadClientMove. */
static void move(struct sg_nq__ctx *c)
{
    if (c->p->dpn >= 7)
        sg_nq__num(c, "sequence", SG_BMSG_S32);
    sg_nq__num(c, "time", SG_BMSG_FLOAT);
    sg_nq__num(c, "angle0", SG_BMSG_ANGLE16);
    sg_nq__num(c, "angle1", SG_BMSG_ANGLE16);
    sg_nq__num(c, "angle2", SG_BMSG_ANGLE16);
    sg_nq__num(c, "forward", SG_BMSG_S16);
    sg_nq__num(c, "side", SG_BMSG_S16);
    sg_nq__num(c, "up", SG_BMSG_S16);
    sg_nq__num(c, "buttons", c->p->dpn >= 6 ? SG_BMSG_S32 : SG_BMSG_U8);
    sg_nq__num(c, "impulse", SG_BMSG_U8);
    if (c->p->dpn < 6)
        return;
    sg_nq__num(c, "cursor_screen0", SG_BMSG_S16);
    sg_nq__num(c, "cursor_screen1", SG_BMSG_S16);
    sg_nq__num(c, "cursor_start0", SG_BMSG_FLOAT);
    sg_nq__num(c, "cursor_start1", SG_BMSG_FLOAT);
    sg_nq__num(c, "cursor_start2", SG_BMSG_FLOAT);
    sg_nq__num(c, "cursor_impact0", SG_BMSG_FLOAT);
    sg_nq__num(c, "cursor_impact1", SG_BMSG_FLOAT);
    sg_nq__num(c, "cursor_impact2", SG_BMSG_FLOAT);
    sg_nq__num(c, "cursor_entity", SG_BMSG_U16);
}

bool sg_nq__dp_clc(struct sg_nq__ctx *c, uint32_t mi)
{
    if (c->out->msgs[mi].op != 3)
        return false; /* nop, disconnect, stringcmd, ackframe, ackdownloaddata: parse.c */
    move(c);
    return true;
}
