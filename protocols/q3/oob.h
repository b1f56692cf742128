/*
 * Quake 3 out-of-band (connectionless) packets.
 *
 * An out-of-band datagram starts with the four bytes FF FF FF FF, then a
 * text command line.  The game tokenizes the first line and switches on the
 * first word, case-insensitively (cl_main.c CL_ConnectionlessPacket,
 * sv_main.c SV_ConnectionlessPacket).  One exception: a client's `connect`
 * is compressed with the adaptive Huffman coder from byte 12 (right after
 * "connect "), bytes 12-13 holding the plain length big-endian.
 *
 * The packets a session meets, with the fields parsed here:
 *
 *   client -> server                     server -> client
 *   getchallenge [clientChallenge [game]]  challengeResponse challenge [clientChallenge protocol]
 *   connect "userinfo" (Huffman)         connectResponse [challenge]
 *   getinfo [challenge]                  infoResponse\n<info string>
 *   getstatus [challenge]                statusResponse\n<info string>\n<players>
 *   rcon password command                print\n<text>
 *                                        disconnect
 *
 * The protocol-71 extra fields of challengeResponse (ioquake3 sv_client.c
 * SV_GetChallenge: "challengeResponse %d %d %d") are the client's own
 * challenge echoed back and the server's com_protocol.
 *
 * Parsing borrows nothing past the call: every field is copied into the
 * caller-owned struct sg_q3_oob.
 */
#ifndef SG_PROTOCOLS_Q3_OOB_H
#define SG_PROTOCOLS_Q3_OOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SG_Q3_OOB_MAX_TEXT        16384 /* MAX_MSGLEN: largest plain OOB body we keep */
#define SG_Q3_MAX_INFO_STRING     1024
#define SG_Q3_CONNECT_HUFF_OFFSET 12 /* FF FF FF FF "connect " */

enum sg_q3_oob_kind {
    SG_Q3_OOB_UNKNOWN,
    SG_Q3_OOB_GETCHALLENGE,
    SG_Q3_OOB_CHALLENGE_RESPONSE,
    SG_Q3_OOB_CONNECT,
    SG_Q3_OOB_CONNECT_RESPONSE,
    SG_Q3_OOB_GETINFO,
    SG_Q3_OOB_INFO_RESPONSE,
    SG_Q3_OOB_GETSTATUS,
    SG_Q3_OOB_STATUS_RESPONSE,
    SG_Q3_OOB_PRINT,
    SG_Q3_OOB_DISCONNECT,
    SG_Q3_OOB_RCON,
    SG_Q3_OOB_KIND_COUNT
};

struct sg_q3_oob {
    enum sg_q3_oob_kind kind;
    char command[32]; /* the first word as sent, truncated */

    /* Numbers from the command line, where the kind carries them. */
    bool has_challenge;
    int32_t challenge; /* challengeResponse, connectResponse, connect userinfo */
    bool has_client_challenge;
    int32_t client_challenge; /* getchallenge; challengeResponse (protocol 71) */
    bool has_protocol;
    int protocol; /* challengeResponse (protocol 71), connect userinfo */
    bool has_qport;
    uint16_t qport; /* connect userinfo */

    /* connect: sent as plain text, as Quake 3 1.11-1.16 (protocol 43) did, not
     * Huffman-coded; sg_q3_oob_write sends it so again. */
    bool plain_connect;

    /* getchallenge's game name; empty when absent. */
    char game[64];

    /* connect: the userinfo between the quotes, NUL-terminated. */
    char userinfo[SG_Q3_MAX_INFO_STRING];

    /*
     * The plain text after FF FF FF FF (for connect: decompressed), exactly
     * as it travels, not NUL-terminated inside; text[text_len] is 0.
     */
    size_t text_len;
    char text[SG_Q3_OOB_MAX_TEXT + 1];
    /* For the responses with a body (infoResponse, statusResponse, print):
     * offset into text where the body starts, after the first newline. */
    size_t body_offset;
};

/* True when `data` (`len` bytes) is an out-of-band packet: FF FF FF FF first. */
bool sg_q3_oob_is(const uint8_t *data, size_t len);

/*
 * Parse one out-of-band datagram.  `from_client` selects the direction
 * (only client packets may carry a compressed connect).  Fills `out`, which
 * is caller-owned.  Returns 0, or SG_E_MALFORMED (not OOB, a
 * challengeResponse or connect without its argument, an unterminated
 * quote), SG_E_HUFFMAN / SG_E_TRUNCATED (corrupt connect), SG_E_TOOBIG.
 * Numbers are read as atoi() does (no digits: 0).
 * Unknown commands are not an error: kind is SG_Q3_OOB_UNKNOWN.
 */
int sg_q3_oob_parse(const uint8_t *data, size_t len, bool from_client, struct sg_q3_oob *out);

/*
 * Build an out-of-band datagram whose text is `text` (`len` bytes) into
 * `out` (capacity `cap`): FF FF FF FF then the text; a client's text that
 * starts with "connect" is compressed from byte 12 as the client does
 * (NET_OutOfBandData); everything else travels plain (NET_OutOfBandPrint).
 * Returns the datagram length, or SG_E_OVERFLOW / SG_E_TOOBIG.
 */
int sg_q3_oob_build(const char *text, size_t len, bool from_client, uint8_t *out, size_t cap);

/*
 * Rebuild a parsed packet from `oob->text` (after a caller changed it,
 * or to prove the parser): same rules as sg_q3_oob_build.
 */
int sg_q3_oob_write(const struct sg_q3_oob *oob, bool from_client, uint8_t *out, size_t cap);

/* The canonical name of a kind ("getchallenge", "challengeResponse"...), static. */
const char *sg_q3_oob_kind_name(enum sg_q3_oob_kind kind);

/*
 * The door (codec.h): ioquake3 answers a banned address's `connect` with
 * the print "You are banned from this server." (sv_client.c,
 * SV_DirectConnect) and nothing else; its remote administration is
 * `rcon` (sv_main.c, any case).
 */
size_t sg_q3_banned_reply(const uint8_t *data, size_t len, uint8_t *out, size_t cap);
size_t sg_q3_full_reply(const uint8_t *data, size_t len, uint8_t *out, size_t cap);
bool sg_q3_is_admin(const uint8_t *data, size_t len);

#endif
