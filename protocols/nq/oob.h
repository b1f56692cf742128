/*
 * NetQuake (protocol 15 and the DarkPlaces family) control packets: the
 * connection handshake that precedes the game's netchan.
 *
 * Every NetQuake datagram starts with a big-endian 32-bit word, flags in
 * the top bits and the datagram's length in the low 16; control packets
 * have NETFLAG_CTL (0x80000000) and a one-byte command after the header.
 * The client asks with CCREQ_CONNECT ("QUAKE", NUL, the net protocol
 * version 3); the server answers CCREP_ACCEPT followed by a little-endian
 * 32-bit UDP port: a socket it opened for this client alone, to which the
 * client moves (WinQuake net_dgrm.c, _Datagram_CheckNewConnections and
 * _Datagram_Connect; quakespasm and DarkPlaces keep it).
 */
#ifndef SG_PROTOCOLS_NQ_OOB_H
#define SG_PROTOCOLS_NQ_OOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sg_codec_server; /* protocols/codec.h */

#define SG_NQ_NETFLAG_CTL    0x80000000u
#define SG_NQ_CCREQ_CONNECT  0x01
#define SG_NQ_CCREQ_RCON     0x05 /* ProQuake's, kept by DarkPlaces (netconn.h) */
#define SG_NQ_CCREP_ACCEPT   0x81
#define SG_NQ_CCREP_REJECT   0x82
#define SG_NQ_CCREP_SERVER_INFO 0x83 /* address, host name, level, players, maximum, version */
#define SG_NQ_ACCEPT_LEN     9 /* header, command, port */

/* A client's CCREQ_CONNECT for the game "QUAKE" (length word matching). */
bool sg_nq_is_connect_request(const uint8_t *d, size_t n);

/* A server's CCREP_ACCEPT: the port it moves the client to (1..65535), or -1. */
int sg_nq_accept_port(const uint8_t *d, size_t n);

/*
 * The door (codec.h): a server built with BAN_TEST (quakespasm, WinQuake)
 * answers a banned address's CCREQ_CONNECT with CCREP_REJECT "You have been
 * banned.\n" (net_dgrm.c); here shortened to "Banned.\n" or "Banned" when
 * the request is shorter than the answer.  Remote administration is
 * CCREQ_RCON (ProQuake, DarkPlaces) and DarkPlaces' out-of-band `rcon` and
 * `srcon` (netconn.c).
 */
size_t sg_nq_banned_reply(const uint8_t *data, size_t len, uint8_t *out, size_t cap);
size_t sg_nq_full_reply(const uint8_t *data, size_t len, uint8_t *out, size_t cap);
bool sg_nq_is_admin(const uint8_t *data, size_t len);

/*
 * A server's CCREP_SERVER_INFO, its answer to CCREQ_SERVER_INFO (status.c's
 * query): after the command byte its address, host name and level as
 * strings, then the players, the maximum and the net protocol version as
 * bytes (WinQuake net_dgrm.c; quakespasm and DarkPlaces alike).  Fills
 * `out`; 0, or SG_E_MALFORMED (not that control packet, the header's
 * length not the datagram's, a string or byte missing).  `d` is borrowed.
 */
int sg_nq_server_info_parse(const uint8_t *d, size_t n, struct sg_codec_server *out);

/* Write `port` into an accept (d holds SG_NQ_ACCEPT_LEN bytes). */
void sg_nq_set_accept_port(uint8_t *d, int port);

#endif
