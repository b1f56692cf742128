/*
 * The Quake 2 .dm2 container (demo.h): recognising one, and reading its
 * blocks.  No message decoding happens here (offline.c walks the blocks'
 * messages; record.c writes the container).
 */
#include "protocols/q2/demo.h"

#include "protocols/byteorder.h"
#include "protocols/codec.h"
#include "protocols/error.h"
#include "protocols/q2/q2.h"

static bool known_protocol(int32_t p)
{
    return p == 26 || p == 34 || p == 35 || p == 36 || (p >= 3434 && p <= 3436) || p == 2022 ||
           p == 2023;
}

int sg_q2__dm2_probe(const uint8_t *head, size_t len)
{
    int32_t length;

    if (len < 4)
        return SG_DEMO_PROBE_UNKNOWN;
    length = (int32_t)sg_le32(head);
    if (length <= 0 || length > SG_Q2_MAX_MSGLEN)
        return SG_DEMO_PROBE_NO;
    if (len < 9)
        return len < SG_DEMO_HEAD_MAX && len < 4 + (size_t)length ? SG_DEMO_PROBE_NO
                                                                   : SG_DEMO_PROBE_UNKNOWN;
    if (head[4] != SG_Q2_SVC_SERVERDATA || length < 5)
        return SG_DEMO_PROBE_NO;
    return known_protocol((int32_t)sg_le32(head + 5)) ? SG_DEMO_PROBE_YES : SG_DEMO_PROBE_NO;
}

int sg_q2__dm2_block(FILE *f, uint8_t *buf, size_t *len)
{
    uint8_t h[4];
    int32_t n;
    size_t got = fread(h, 1, 4, f);

    if (got != 4)
        return SG_E_TRUNCATED;
    n = (int32_t)sg_le32(h);
    if (n == -1)
        return SG_Q2__DM2_END;
    if (n < 0 || n > SG_Q2_MAX_MSGLEN)
        return SG_E_TOOBIG;
    if (fread(buf, 1, (size_t)n, f) != (size_t)n)
        return SG_E_TRUNCATED;
    *len = (size_t)n;
    return SG_Q2__DM2_MSG;
}
