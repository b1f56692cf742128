/* Test helper: UDP datagrams of a capture file (see pcap_udp.h). */
#include "pcap_udp.h"

#include <pcap/pcap.h>
#include <stdio.h>
#include <string.h>

#include "protocols/byteorder.h"

/* Offset of the IP header for a link type; -1 when it is not IP. */
static int link_offset(int dlt, const uint8_t *p, size_t caplen, size_t *off)
{
    uint16_t type;

    switch (dlt) {
    case DLT_EN10MB:
        if (caplen < 14)
            return -1;
        *off = 14;
        type = sg_be16(p + 12);
        if (type == 0x8100 && caplen >= 18) {
            type = sg_be16(p + 16);
            *off = 18;
        }
        return type == 0x0800 || type == 0x86dd ? 0 : -1;
    case DLT_LINUX_SLL:
        *off = 16;
        return caplen >= 16 ? 0 : -1;
    case DLT_LINUX_SLL2:
        *off = 20;
        return caplen >= 20 ? 0 : -1;
    case DLT_NULL:
    case DLT_LOOP:
        *off = 4;
        return caplen >= 4 ? 0 : -1;
    case DLT_RAW:
        *off = 0;
        return 0;
    default:
        return -1;
    }
}

int pcap_udp_foreach(const char *path, int (*cb)(const struct pcap_udp *u, void *arg), void *arg)
{
    char errbuf[PCAP_ERRBUF_SIZE];
    struct pcap_pkthdr *h;
    const u_char *p;
    pcap_t *pc = pcap_open_offline(path, errbuf);
    uint64_t frame = 0;
    int dlt, rc = 0;

    if (!pc) {
        fprintf(stderr, "%s: %s\n", path, errbuf);
        return -1;
    }
    dlt = pcap_datalink(pc);
    while (rc == 0 && pcap_next_ex(pc, &h, &p) == 1) {
        struct pcap_udp u;
        size_t off, ihl, caplen = h->caplen;
        const uint8_t *ip;
        uint8_t proto;

        frame++;
        if (link_offset(dlt, p, caplen, &off) < 0)
            continue;
        ip = p + off;
        caplen -= off;
        memset(&u, 0, sizeof(u));
        u.frame = frame;
        if (caplen >= 20 && (ip[0] >> 4) == 4) {
            ihl = (size_t)(ip[0] & 15) * 4;
            if ((sg_be16(ip + 6) & 0x1fff) != 0 || ihl < 20)
                continue; /* not a first fragment */
            proto = ip[9];
            u.family = 4;
            memcpy(u.src, ip + 12, 4);
            memcpy(u.dst, ip + 16, 4);
        } else if (caplen >= 40 && (ip[0] >> 4) == 6) {
            ihl = 40;
            proto = ip[6];
            u.family = 6;
            memcpy(u.src, ip + 8, 16);
            memcpy(u.dst, ip + 24, 16);
        } else {
            continue;
        }
        if (proto != 17 || caplen < ihl + 8)
            continue;
        u.sport = sg_be16(ip + ihl);
        u.dport = sg_be16(ip + ihl + 2);
        u.len = sg_be16(ip + ihl + 4);
        if (u.len < 8 || ihl + u.len > caplen)
            continue;
        u.len -= 8;
        u.data = ip + ihl + 8;
        rc = cb(&u, arg);
    }
    pcap_close(pc);
    return rc;
}
