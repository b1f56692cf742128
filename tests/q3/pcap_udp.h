/*
 * Test helper: every UDP datagram of a capture file (pcap or pcapng, read
 * with libpcap), over Ethernet, Linux cooked (v1/v2), BSD loopback or raw
 * IP, IPv4 or IPv6.  The proxy's own reader is proxy/cmd_pcap.c; this one
 * is kept small and separate so the tests do not depend on the tool.
 */
#ifndef SG_TESTS_Q3_PCAP_UDP_H
#define SG_TESTS_Q3_PCAP_UDP_H

#include <stddef.h>
#include <stdint.h>

struct pcap_udp {
    uint64_t frame; /* 1-based frame number, as tshark counts */
    int family;     /* 4 or 6 */
    uint8_t src[16], dst[16];
    uint16_t sport, dport;
    const uint8_t *data; /* valid for the callback only */
    size_t len;
};

/* Calls `cb` for each UDP datagram; stops when it returns non-zero and
 * returns that; 0 at the end; -1 if the file cannot be read. */
int pcap_udp_foreach(const char *path, int (*cb)(const struct pcap_udp *u, void *arg), void *arg);

#endif
