/*
 * Quake 2 opcode names (svc_*, clc_*, and the rerelease's), for logs, the
 * inspector and golden files.
 */
#include "protocols/q2/q2.h"

static const char *const svc_names[SG_Q2_SVC_COUNT] = {
    "svc_bad",          "svc_muzzleflash",   "svc_muzzleflash2",  "svc_temp_entity",
    "svc_layout",       "svc_inventory",     "svc_nop",           "svc_disconnect",
    "svc_reconnect",    "svc_sound",         "svc_print",         "svc_stufftext",
    "svc_serverdata",   "svc_configstring",  "svc_spawnbaseline", "svc_centerprint",
    "svc_download",     "svc_playerinfo",    "svc_packetentities", "svc_deltapacketentities",
    "svc_frame",        "svc_zpacket",       "svc_zdownload",     "svc_gamestate",
    "svc_setting",      "svc_configstringstream", "svc_baselinestream",
};

const char *sg_q2_svc_name(int op)
{
    op &= 0xff;
    if ((op & 0x1f) == SG_Q2_SVC_FRAME)
        return "svc_frame";
    return op < SG_Q2_SVC_COUNT ? svc_names[op] : "svc_unknown";
}

const char *sg_q2_svc_name_kex(int op)
{
    static const char *const kex[] = {
        "svc_splitclient",  "svc_configblast", "svc_spawnbaselineblast", "svc_level_restart",
        "svc_damage",       "svc_locprint",    "svc_fog",                "svc_waitingforplayers",
        "svc_bot_chat",     "svc_poi",         "svc_help_path",          "svc_muzzleflash3",
        "svc_achievement",
    };

    op &= 0xff;
    if (op >= 21 && op <= 33)
        return kex[op - 21];
    return op < 21 ? svc_names[op] : "svc_unknown";
}

const char *sg_q2_clc_name(int op)
{
    static const char *const names[SG_Q2_CLC_COUNT] = {
        "clc_bad", "clc_nop", "clc_move", "clc_userinfo", "clc_stringcmd", "clc_setting",
        NULL, NULL, NULL, NULL, "clc_move_nodelta", "clc_move_batched", "clc_userinfo_delta",
    };
    int o = op & 0xff;

    if ((o & 0x1f) == SG_Q2_CLC_MOVE_NODELTA || (o & 0x1f) == SG_Q2_CLC_MOVE_BATCHED)
        o &= 0x1f;
    return o < SG_Q2_CLC_COUNT && names[o] ? names[o] : "clc_unknown";
}

