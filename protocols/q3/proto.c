/*
 * Quake 3 opcode name tables (svc_*, clc_*, snapshot flags), as the game's
 * own svc_strings spells them, for logs, the inspector and golden files.
 */
#include "protocols/q3/proto.h"

#include <stddef.h>
#include <string.h>

static const char *const svc_names[SG_Q3_SVC_COUNT] = {
    [SG_Q3_SVC_BAD] = "svc_bad",
    [SG_Q3_SVC_NOP] = "svc_nop",
    [SG_Q3_SVC_GAMESTATE] = "svc_gamestate",
    [SG_Q3_SVC_CONFIGSTRING] = "svc_configstring",
    [SG_Q3_SVC_BASELINE] = "svc_baseline",
    [SG_Q3_SVC_SERVERCOMMAND] = "svc_serverCommand",
    [SG_Q3_SVC_DOWNLOAD] = "svc_download",
    [SG_Q3_SVC_SNAPSHOT] = "svc_snapshot",
    [SG_Q3_SVC_EOF] = "svc_EOF",
    [SG_Q3_SVC_VOIP_SPEEX] = "svc_voipSpeex",
    [SG_Q3_SVC_VOIP_OPUS] = "svc_voipOpus",
};

static const char *const clc_names[SG_Q3_CLC_COUNT] = {
    [SG_Q3_CLC_BAD] = "clc_bad",
    [SG_Q3_CLC_NOP] = "clc_nop",
    [SG_Q3_CLC_MOVE] = "clc_move",
    [SG_Q3_CLC_MOVE_NODELTA] = "clc_moveNoDelta",
    [SG_Q3_CLC_CLIENTCOMMAND] = "clc_clientCommand",
    [SG_Q3_CLC_EOF] = "clc_EOF",
    [SG_Q3_CLC_VOIP_SPEEX] = "clc_voipSpeex",
    [SG_Q3_CLC_VOIP_OPUS] = "clc_voipOpus",
};

const char *sg_q3_svc_name(int op)
{
    if (op < 0 || op >= SG_Q3_SVC_COUNT)
        return "svc_unknown";
    return svc_names[op];
}

const char *sg_q3_clc_name(int op)
{
    if (op < 0 || op >= SG_Q3_CLC_COUNT)
        return "clc_unknown";
    return clc_names[op];
}

const char *sg_q3_snapflag_name(int bit)
{
    switch (bit) {
    case SG_Q3_SNAPFLAG_RATE_DELAYED:
        return "rate_delayed";
    case SG_Q3_SNAPFLAG_NOT_ACTIVE:
        return "not_active";
    case SG_Q3_SNAPFLAG_SERVERCOUNT:
        return "servercount";
    default:
        return NULL;
    }
}

const char *sg_q3_protocol_game(int protocol)
{
    switch (protocol) {
    case 43:
        return "Quake 3 1.11-1.16";
    case 45:
    case 46:
    case 47:
    case 48:
        return "Quake 3 before 1.29";
    case 66:
    case 67:
    case 68:
        return "Quake 3 1.29-1.32";
    case 71:
        return "ioquake3 / OpenArena";
    case 73:
    case 90:
    case 91:
        return "Quake Live";
    case 84:
        return "Wolfenstein: Enemy Territory";
    default:
        return NULL;
    }
}

bool sg_q3_command_is(const char *cmd, const char *verb)
{
    const unsigned char *p = (const unsigned char *)cmd;
    size_t n = strlen(verb);

    while (*p && *p <= ' ')
        p++;
    if (*p == '"')
        return strncmp((const char *)p + 1, verb, n) == 0 && p[1 + n] == '"';
    return strncmp((const char *)p, verb, n) == 0 && p[n] <= ' ';
}
