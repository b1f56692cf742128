/*
 * Quake 3 status query, for `slipgate doctor`: the connectionless
 * "getstatus" a server browser sends (0xFFFFFFFF, then text); the server
 * answers "statusResponse\n" with its info string and player lines
 * (ioquake3 server/sv_main.c, SVC_Status).
 */
#include "protocols/codec.h"

#include <errno.h>
#include <string.h>

static const char q3_query[] = "\xff\xff\xff\xffgetstatus\n";
static const char q3_reply[] = "\xff\xff\xff\xffstatusResponse";

static int q3_status_query(uint8_t *out, size_t cap)
{
    size_t n = sizeof(q3_query) - 1;

    if (cap < n)
        return -ENOSPC;
    memcpy(out, q3_query, n);
    return (int)n;
}

static bool q3_status_is_reply(const uint8_t *data, size_t len)
{
    size_t n = sizeof(q3_reply) - 1;

    return len >= n && memcmp(data, q3_reply, n) == 0;
}

const struct sg_codec_status sg_q3_status = {
    .what = "getstatus",
    .query = q3_status_query,
    .is_reply = q3_status_is_reply,
};
