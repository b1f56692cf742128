/*
 * QuakeWorld status query, for `slipgate doctor`: the connectionless
 * "status" (0xFFFFFFFF, then text); the server answers with A2C_PRINT,
 * 'n' followed by its serverinfo and one line per player (mvdsv
 * sv_main.c, SVC_Status).
 */
#include "protocols/codec.h"

#include <errno.h>
#include <string.h>

static const char qw_query[] = "\xff\xff\xff\xffstatus\n";

static int qw_status_query(uint8_t *out, size_t cap)
{
    size_t n = sizeof(qw_query) - 1;

    if (cap < n)
        return -ENOSPC;
    memcpy(out, qw_query, n);
    return (int)n;
}

static bool qw_status_is_reply(const uint8_t *data, size_t len)
{
    return len >= 5 && memcmp(data, "\xff\xff\xff\xffn", 5) == 0;
}

const struct sg_codec_status sg_qw_status = {
    .what = "status",
    .query = qw_status_query,
    .is_reply = qw_status_is_reply,
};
