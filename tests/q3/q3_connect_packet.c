/*
 * Writes a client's Quake 3 connect datagram to stdout: FF FF FF FF
 * "connect ", then the userinfo argument adaptive-Huffman coded as the game
 * sends it (sg_q3_oob_build).  For the loopback tests that play a client
 * (q3_protocol_loop.py).  Usage: q3_connect_packet 'connect "\protocol\43..."'
 */
#include <stdio.h>
#include <string.h>

#include "protocols/q3/oob.h"

int main(int argc, char **argv)
{
    static unsigned char pkt[4096];
    int n;

    if (argc != 2) {
        fprintf(stderr, "usage: %s 'connect \"USERINFO\"'\n", argv[0]);
        return 2;
    }
    n = sg_q3_oob_build(argv[1], strlen(argv[1]), true, pkt, sizeof(pkt));
    if (n < 0) {
        fprintf(stderr, "cannot build the connect: %d\n", n);
        return 1;
    }
    return fwrite(pkt, 1, (size_t)n, stdout) == (size_t)n ? 0 : 1;
}
