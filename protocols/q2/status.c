/*
 * Quake 2 status query, for `slipgate doctor`: the connectionless
 * "status" (0xFFFFFFFF, then text); the server answers "print\n" with its
 * serverinfo and one line per player (yquake2 server/sv_main.c,
 * SVC_Status).
 */
#include "protocols/codec.h"

#include <errno.h>
#include <string.h>

static const char q2_query[] = "\xff\xff\xff\xffstatus\n";
static const char q2_reply[] = "\xff\xff\xff\xffprint\n";

static int q2_status_query(uint8_t *out, size_t cap)
{
    size_t n = sizeof(q2_query) - 1;

    if (cap < n)
        return -ENOSPC;
    memcpy(out, q2_query, n);
    return (int)n;
}

static bool q2_status_is_reply(const uint8_t *data, size_t len)
{
    size_t n = sizeof(q2_reply) - 1;

    return len >= n && memcmp(data, q2_reply, n) == 0;
}

const struct sg_codec_status sg_q2_status = {
    .what = "status",
    .query = q2_status_query,
    .is_reply = q2_status_is_reply,
};
