#include "protocols/nq/control.h"

#include "protocols/byteorder.h"

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
