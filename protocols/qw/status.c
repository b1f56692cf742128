/*
 * QuakeWorld status query, for `slipgate doctor`: the connectionless
 * "status" (0xFFFFFFFF, then text); the server answers with A2C_PRINT,
 * 'n' followed by its serverinfo and one line per player (mvdsv
 * sv_main.c, SVC_Status).
 */
#include "protocols/codec.h"
#include "protocols/door.h"
#include "protocols/error.h"

#include <errno.h>
#include <stdio.h>

static const char qw_query[] = "\xff\xff\xff\xffstatus\n";

static const char qw_reply[] = "\xff\xff\xff\xffn"; /* A2C_PRINT */

const struct sg_codec_status sg_qw_status = {
    .what = "status",
    .query_text = qw_query,
    .reply_text = qw_reply,
};

/*
 * Master servers: S2M_HEARTBEAT, "a\n<sequence>\n<players>\n" (no
 * 0xFFFFFFFF prefix), every 5 minutes, the sequence counting heartbeats
 * from 1 and the players those connected or spawned; S2M_SHUTDOWN, "C\n",
 * when the server goes down (mvdsv sv_master.c, Master_Heartbeat,
 * Master_Shutdown).  The player count comes from the server's answer to
 * the status query: one line per client after the serverinfo line.
 */
static int qw_master_heartbeat(uint8_t *out, size_t cap, const uint8_t *status, size_t status_len,
                               uint32_t sequence)
{
    int players = 0, n;
    size_t i = 5;

    if (!status || !sg_door_starts(status, status_len, qw_reply, sizeof(qw_reply) - 1))
        return SG_E_MALFORMED;
    while (i < status_len && status[i] != '\n') /* the serverinfo */
        i++;
    if (i >= status_len)
        return SG_E_MALFORMED;
    for (size_t start = ++i; i < status_len; i++) {
        if (status[i] == '\n') {
            players += i > start;
            start = i + 1;
        }
    }
    n = snprintf((char *)out, cap, "a\n%u\n%d\n", (unsigned)sequence, players);
    return n < 0 || (size_t)n >= cap ? -ENOSPC : n;
}

const struct sg_codec_master sg_qw_master = {
    .what = "heartbeat (S2M_HEARTBEAT)",
    .interval_ms = 300 * 1000,
    .needs_status = true,
    .heartbeat = qw_master_heartbeat,
    .shutdown_text = "C\n", /* S2M_SHUTDOWN */
};
