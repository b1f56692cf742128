/*
 * Quake 3 status query, for `slipgate doctor`: the connectionless
 * "getstatus" a server browser sends (0xFFFFFFFF, then text); the server
 * answers "statusResponse\n" with its info string and player lines
 * (ioquake3 server/sv_main.c, SVC_Status).
 */
#include "protocols/codec.h"


static const char q3_query[] = "\xff\xff\xff\xffgetstatus\n";
static const char q3_reply[] = "\xff\xff\xff\xffstatusResponse";

const struct sg_codec_status sg_q3_status = {
    .what = "getstatus",
    .query_text = q3_query,
    .reply_text = q3_reply,
};

/*
 * Master servers (the dpmaster protocol): "heartbeat QuakeArena-1\n" every
 * 5 minutes (ioquake3 server/sv_main.c, HEARTBEAT_MSEC and
 * HEARTBEAT_FOR_MASTER); the master answers with "getinfo CHALLENGE".  At
 * shutdown ioquake3 sends the same heartbeat again, so that the master's
 * getinfo goes unanswered and the master drops the server.
 */
static const char q3_heartbeat[] = "\xff\xff\xff\xffheartbeat QuakeArena-1\n";

const struct sg_codec_master sg_q3_master = {
    .what = "heartbeat QuakeArena-1",
    .interval_ms = 300 * 1000,
    .heartbeat_text = q3_heartbeat,
    .shutdown_text = q3_heartbeat,
};
