/*
 * Quake 2 status query, for `slipgate doctor` and the readiness probe: the
 * connectionless "status" (0xFFFFFFFF, then text); the server answers
 * "print\n" with its serverinfo and one line per player (yquake2
 * server/sv_main.c, SVC_Status), read by oob.c for the route's page.
 */
#include "protocols/codec.h"
#include "protocols/door.h"
#include "protocols/error.h"
#include "protocols/q2/q2.h"

#include <errno.h>
#include <string.h>

static const char q2_query[] = "\xff\xff\xff\xffstatus\n";
static const char q2_reply[] = "\xff\xff\xff\xffprint\n";

const struct sg_codec_status sg_q2_status = {
    .what = "status",
    .query_text = q2_query,
    .reply_text = q2_reply,
    .parse = sg_q2_status_parse,
};

/*
 * Master servers: "heartbeat\n" followed by the same status text the
 * server gives a "status" query (serverinfo, then one line per player),
 * every 5 minutes; "shutdown" when the server goes down (Quake 2
 * server/sv_main.c, Master_Heartbeat, Master_Shutdown; q2pro likewise).
 * The status text is the server's own answer, "print\n" taken off.
 */
static const char q2_heartbeat[] = "\xff\xff\xff\xffheartbeat\n";
static const char q2_shutdown[] = "\xff\xff\xff\xffshutdown";

static int q2_master_heartbeat(uint8_t *out, size_t cap, const uint8_t *status, size_t status_len,
                               uint32_t sequence)
{
    size_t head = sizeof(q2_heartbeat) - 1, skip = sizeof(q2_reply) - 1;

    (void)sequence;
    if (!status || !sg_door_starts(status, status_len, q2_reply, sizeof(q2_reply) - 1))
        return SG_E_MALFORMED;
    if (cap < head + status_len - skip)
        return -ENOSPC;
    memcpy(out, q2_heartbeat, head);
    memcpy(out + head, status + skip, status_len - skip);
    return (int)(head + status_len - skip);
}

const struct sg_codec_master sg_q2_master = {
    .what = "heartbeat",
    .interval_ms = 300 * 1000,
    .needs_status = true,
    .heartbeat = q2_master_heartbeat,
    .shutdown_text = q2_shutdown,
};
