/*
 * NetQuake's names and numbers: the protocol numbers the decoder reads and
 * what each selects, DarkPlaces' names for the ones it does not, and the
 * opcode names (svc_*, clc_*) for logs, the inspector and golden files.
 */
#include "protocols/nq/nq.h"

#include <stddef.h>

#define N(t) (sizeof(t) / sizeof((t)[0]))

void sg_nq_proto_set(struct sg_nq_proto *p, int32_t protocol, uint32_t flags)
{
    struct sg_bmsg_sizes s;

    if (protocol != SG_NQ_PROTOCOL_RMQ)
        flags = 0;
    s = sg_bmsg_sizes_nq(flags);
    p->protocol = protocol;
    p->flags = flags;
    p->coord = s.coord;
    p->angle = s.angle;
    p->fitz = protocol == SG_NQ_PROTOCOL_FITZQUAKE || protocol == SG_NQ_PROTOCOL_RMQ;
    p->dp = false;
    p->dpn = 0;
    if (protocol >= SG_NQ_PROTOCOL_DP5 && protocol <= SG_NQ_PROTOCOL_DP7) {
        /* DarkPlaces 5-7 (common.c MSG_ReadCoord / MSG_ReadAngle): float
         * coordinates, 16-bit angles, clc_move's angles 16-bit. */
        p->dp = true;
        p->dpn = (uint8_t)(protocol - SG_NQ_PROTOCOL_DP5 + 5);
        p->coord = SG_BMSG_COORD_FLOAT;
        p->angle = p->move_angle = SG_BMSG_ANGLE16;
        return;
    }
    /* clc_move: MSG_ReadAngle in 15, MSG_ReadAngle16 (float with PRFL_FLOATANGLE) after. */
    if (!p->fitz)
        p->move_angle = s.angle;
    else
        p->move_angle = (flags & SG_BMSG_PRFL_FLOATANGLE) ? SG_BMSG_ANGLE_FLOAT : SG_BMSG_ANGLE16;
}

/* The names DarkPlaces gives the protocol numbers its server speaks
 * (protocol.c, sv_protocolname) that the decoder does not read. */
const char *sg_nq_dp_protocol_name(int32_t protocol)
{
    switch (protocol) {
    case 96:
        return "DarkPlaces DP1";
    case 97:
        return "DarkPlaces DP2";
    case 250:
        return "DarkPlaces NEHAHRAMOVIE";
    case 3500:
        return "DarkPlaces DP3";
    case 3501:
        return "DarkPlaces DP4";
    case 3505:
        return "DarkPlaces DP8";
    case 10000:
        return "DarkPlaces NEHAHRABJP";
    case 10001:
        return "DarkPlaces NEHAHRABJP2";
    case 10002:
        return "DarkPlaces NEHAHRABJP3";
    default:
        return NULL;
    }
}

static const char *const svc_names[] = {
    "svc_bad",          "svc_nop",           "svc_disconnect",   "svc_updatestat",
    "svc_version",      "svc_setview",       "svc_sound",        "svc_time",
    "svc_print",        "svc_stufftext",     "svc_setangle",     "svc_serverinfo",
    "svc_lightstyle",   "svc_updatename",    "svc_updatefrags",  "svc_clientdata",
    "svc_stopsound",    "svc_updatecolors",  "svc_particle",     "svc_damage",
    "svc_spawnstatic",  "svc_spawnbinary",   "svc_spawnbaseline", "svc_temp_entity",
    "svc_setpause",     "svc_signonnum",     "svc_centerprint",  "svc_killedmonster",
    "svc_foundsecret",  "svc_spawnstaticsound", "svc_intermission", "svc_finale",
    "svc_cdtrack",      "svc_sellscreen",    "svc_cutscene",     "svc_showlmp",
    "svc_hidelmp",      "svc_skybox",        "svc_unknown",      "svc_unknown",
    "svc_bf",           "svc_fog",           "svc_spawnbaseline2", "svc_spawnstatic2",
    "svc_spawnstaticsound2", "svc_unknown",  "svc_unknown",      "svc_unknown",
    "svc_unknown",      "svc_unknown",       "svc_downloaddata", "svc_updatestatubyte",
    "svc_effect",       "svc_effect2",       "svc_precache",     "svc_spawnbaseline2",
    "svc_spawnstatic2", "svc_entities",      "svc_csqcentities", "svc_spawnstaticsound2",
    "svc_trailparticles", "svc_pointparticles", "svc_pointparticles1",
};

const char *sg_nq_svc_name(int op)
{
    if (op >= 128 && op <= 255)
        return "svc_update";
    if (op >= 0 && op < (int)N(svc_names))
        return svc_names[op];
    return "svc_unknown";
}

const char *sg_nq_clc_name(int op)
{
    static const char *const names[] = {"clc_bad", "clc_nop", "clc_disconnect", "clc_move",
                                        "clc_stringcmd"};

    if (op == 50)
        return "clc_ackframe";
    if (op == 51)
        return "clc_ackdownloaddata";
    return op >= 0 && op < (int)N(names) ? names[op] : "clc_unknown";
}
