/*
 * NetQuake control packets (NETFLAG_CTL, see oob.h): recognising a
 * connect request, building the proxy's own replies (banned, full), and
 * what the codec reads of the control packets that pass.
 */
#include "protocols/nq/oob.h"

#include "protocols/byteorder.h"
#include "protocols/door.h"

#include <string.h>

/* The header's flags and length agree with what arrived. */
static bool is_control(const uint8_t *d, size_t n, size_t min)
{
    uint32_t head;

    if (n < min)
        return false;
    head = sg_be32(d);
    return (head & 0xffff0000u) == SG_NQ_NETFLAG_CTL && (head & 0xffffu) == n;
}

bool sg_nq_is_connect_request(const uint8_t *d, size_t n)
{
    static const char game[] = "QUAKE"; /* with its NUL */

    return is_control(d, n, 5 + sizeof(game)) && d[4] == SG_NQ_CCREQ_CONNECT &&
           memcmp(d + 5, game, sizeof(game)) == 0;
}

int sg_nq_accept_port(const uint8_t *d, size_t n)
{
    uint32_t port;

    if (n != SG_NQ_ACCEPT_LEN || !is_control(d, n, SG_NQ_ACCEPT_LEN) ||
        d[4] != SG_NQ_CCREP_ACCEPT)
        return -1;
    port = sg_le32(d + 5);
    return port >= 1 && port <= 65535 ? (int)port : -1;
}

void sg_nq_set_accept_port(uint8_t *d, int port)
{
    sg_put_le32(d + 5, (uint32_t)port);
}

/* ---- the door ---- */

/* A CCREP_REJECT holding the first of `texts` that fits in `cap`, or 0. */
static size_t reject(const char *const *texts, uint8_t *out, size_t cap)
{
    for (int i = 0; texts[i]; i++) {
        size_t t = strlen(texts[i]), n = 4 + 1 + t + 1;
        if (n > cap)
            continue;
        sg_put_be32(out, SG_NQ_NETFLAG_CTL | (uint32_t)n);
        out[4] = SG_NQ_CCREP_REJECT;
        memcpy(out + 5, texts[i], t + 1);
        return n;
    }
    return 0;
}

size_t sg_nq_banned_reply(const uint8_t *data, size_t len, uint8_t *out, size_t cap)
{
    static const char *const texts[] = {"You have been banned.\n", "Banned.\n", "Banned", NULL};

    if (!sg_nq_is_connect_request(data, len))
        return 0;
    return reject(texts, out, cap);
}

/* NetQuake (net_dgrm.c) rejects a connect request with no free slot so. */
size_t sg_nq_full_reply(const uint8_t *data, size_t len, uint8_t *out, size_t cap)
{
    static const char *const texts[] = {"Server is full.\n", NULL};

    if (!sg_nq_is_connect_request(data, len))
        return 0;
    return reject(texts, out, cap);
}

bool sg_nq_is_admin(const uint8_t *data, size_t len)
{
    return (is_control(data, len, 5) && data[4] == SG_NQ_CCREQ_RCON) ||
           sg_door_oob_is(data, len, "rcon", false) || sg_door_oob_is(data, len, "srcon", false);
}
