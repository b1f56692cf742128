/* QuakeWorld opcode names (mvdsv / ezQuake protocol.h; FTE's additions by their FTE names). */
#include "protocols/qw/qw.h"

static const char *const svc_names[] = {
    [0] = "svc_bad",
    [1] = "svc_nop",
    [2] = "svc_disconnect",
    [3] = "svc_updatestat",
    [6] = "svc_sound",
    [8] = "svc_print",
    [9] = "svc_stufftext",
    [10] = "svc_setangle",
    [11] = "svc_serverdata",
    [12] = "svc_lightstyle",
    [14] = "svc_updatefrags",
    [16] = "svc_stopsound",
    [19] = "svc_damage",
    [20] = "svc_spawnstatic",
    [21] = "svc_fte_spawnstatic2",
    [22] = "svc_spawnbaseline",
    [23] = "svc_temp_entity",
    [24] = "svc_setpause",
    [26] = "svc_centerprint",
    [27] = "svc_killedmonster",
    [28] = "svc_foundsecret",
    [29] = "svc_spawnstaticsound",
    [30] = "svc_intermission",
    [31] = "svc_finale",
    [32] = "svc_cdtrack",
    [33] = "svc_sellscreen",
    [34] = "svc_smallkick",
    [35] = "svc_bigkick",
    [36] = "svc_updateping",
    [37] = "svc_updateentertime",
    [38] = "svc_updatestatlong",
    [39] = "svc_muzzleflash",
    [40] = "svc_updateuserinfo",
    [41] = "svc_download",
    [42] = "svc_playerinfo",
    [43] = "svc_nails",
    [44] = "svc_chokecount",
    [45] = "svc_modellist",
    [46] = "svc_soundlist",
    [47] = "svc_packetentities",
    [48] = "svc_deltapacketentities",
    [49] = "svc_maxspeed",
    [50] = "svc_entgravity",
    [51] = "svc_setinfo",
    [52] = "svc_serverinfo",
    [53] = "svc_updatepl",
    [54] = "svc_nails2",
    [60] = "svc_fte_modellistshort",
    [66] = "svc_fte_spawnbaseline2",
    [76] = "svc_fte_csqcentities",
    [83] = "svc_qizmovoice",
    [84] = "svc_fte_voicechat",
    [92] = "svc_fte_csqcentities_sized",
};

static const char *const clc_names[] = {
    [0] = "clc_bad",     [1] = "clc_nop",    [3] = "clc_move",   [4] = "clc_stringcmd",
    [5] = "clc_delta",   [6] = "clc_tmove",  [7] = "clc_upload", [83] = "clc_voicechat",
};

const char *sg_qw_svc_name(int op)
{
    if (op >= 0 && op < (int)(sizeof(svc_names) / sizeof(svc_names[0])) && svc_names[op])
        return svc_names[op];
    return "svc_unknown";
}

const char *sg_qw_clc_name(int op)
{
    if (op == 200)
        return "clc_mvd_weapon";
    if (op == 201)
        return "clc_mvd_debug";
    if (op >= 0 && op < (int)(sizeof(clc_names) / sizeof(clc_names[0])) && clc_names[op])
        return clc_names[op];
    return "clc_unknown";
}
