/*
 * Quake 3 netchan (ioquake3 code/qcommon/net_chan.c, client/cl_net_chan.c,
 * server/sv_net_chan.c), both directions of one session.
 *
 * Datagram headers, little-endian, bit 0 = least significant:
 *
 *   server -> client
 *    0                   1                   2                   3
 *    0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *   |                sequence (bits 0-30)                         |F|  F = fragment
 *   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *   |   checksum = challenge ^ (sequence * challenge)   [ioq3 71]   |
 *   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *   |  fragment start [F]           |  fragment length [F]          |
 *   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *   |  message (or fragment bytes) ...
 *
 *   client -> server
 *    0                   1                   2                   3
 *    0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *   |                sequence (bits 0-30)                         |F|
 *   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *   |  qport                        |  checksum, low half [ioq3 71] |
 *   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *   |  checksum, high half [ioq3 71]|  fragment start [F]           |
 *   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *   |  fragment length [F]          |  message ...
 *   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *   (fields in brackets are absent when their condition does not hold;
 *   the next field then moves up)
 *
 * Message length: a datagram of N bytes carries N - header bytes; pieces
 * carry `fragment length` bytes and at most 1300.
 *
 * Rules, as the receiving game applies them (Netchan_Process):
 *  - sequence -1 (FF FF FF FF) marks an out-of-band packet (oob.h);
 *  - ioquake3 71: a checksum that does not match drops the datagram
 *    (the checksum uses the sequence without the fragment bit);
 *  - a sequence not above the last accepted one is a duplicate or out of
 *    order: dropped (but a later one skipping numbers is fine: loss);
 *  - fragments: all pieces carry the message's sequence; a piece whose
 *    start is not the length gathered so far is dropped and the partial
 *    message kept (a duplicated piece is thus ignored, while after a lost
 *    one the message never completes; a new sequence restarts the
 *    gathering, so interleaved messages lose each other); a piece shorter than
 *    1300 bytes ends the message, so one of exactly k * 1300 bytes ends
 *    with a zero-length piece; a negative length, a length past the
 *    datagram or a total over MAX_MSGLEN is illegal; the sequence is
 *    accepted only when the message completes.
 *
 * Protocol 68 XOR (also OpenArena 71), applied to the whole message after
 * reassembly, each key one byte:
 *  - server -> client, from message byte 4: key = challenge ^ sequence,
 *    then per byte i: key ^= c << (i & 1), c running over the client
 *    command numbered by the message's reliableAcknowledge (its first long);
 *  - client -> server, from message byte 12: key = challenge ^ serverId ^
 *    messageAcknowledge (its first two longs), c over the server command
 *    numbered by its reliableAcknowledge (its third long);
 *  c is the command's byte, '.' for '%' and bytes > 127, wrapping at the
 *  end of the command.  The receiver reads the longs from the scrambled
 *  bytes, the sender from the plain ones: decode and encode do the same.
 */
#include "protocols/q3/netchan.h"

#include <string.h>

#include "protocols/byteorder.h"
#include "protocols/error.h"
#include "protocols/q3/delta.h"

#define SV_XOR_START 4  /* SV_ENCODE_START / CL_DECODE_START */
#define CL_XOR_START 12 /* CL_ENCODE_START / SV_DECODE_START */

/* ---- names ---- */

const char *sg_q3_wire_name(enum sg_q3_wire wire)
{
    const struct sg_q3_variant *v = sg_q3_variant_of(wire);

    if (v)
        return v->name;
    return wire == SG_Q3_WIRE_HEADERS ? "headers only" : "unknown";
}

bool sg_q3_wire_xor(enum sg_q3_wire wire)
{
    const struct sg_q3_variant *v = sg_q3_variant_of(wire);

    return v && v->xor_payload;
}

bool sg_q3_wire_checksum(enum sg_q3_wire wire)
{
    const struct sg_q3_variant *v = sg_q3_variant_of(wire);

    return v && v->checksum;
}

const char *sg_q3_rx_name(enum sg_q3_rx rx)
{
    static const char *const names[] = {
        [SG_Q3_RX_NONE] = "none",
        [SG_Q3_RX_OOB] = "oob",
        [SG_Q3_RX_MESSAGE] = "message",
        [SG_Q3_RX_FRAGMENT] = "fragment",
        [SG_Q3_RX_OLD] = "old",
        [SG_Q3_RX_GAP] = "gap",
        [SG_Q3_RX_BAD_FRAGMENT] = "bad_fragment",
        [SG_Q3_RX_BAD_CHECKSUM] = "bad_checksum",
        [SG_Q3_RX_UNDECODABLE] = "undecodable",
        [SG_Q3_RX_HEADERS] = "headers-only",
    };

    if ((int)rx < 0 || (size_t)rx >= sizeof(names) / sizeof(names[0]))
        return "?";
    return names[rx];
}

/* ---- checksum ---- */

uint32_t sg_q3_netchan_checksum(int32_t challenge, int32_t sequence)
{
    uint32_t c = (uint32_t)challenge;

    return c ^ ((uint32_t)sequence * c);
}

bool sg_q3_netchan_solve_challenge(int32_t sequence, uint32_t checksum, int32_t *challenge)
{
    uint32_t s = (uint32_t)sequence, c = 0;

    /* with s even, bit i of s * c depends only on bits below i of c */
    if (s & 1)
        return false;
    for (int i = 0; i < 32; i++)
        if (((checksum ^ (s * c)) >> i) & 1)
            c |= 1u << i;
    *challenge = (int32_t)c;
    return sg_q3_netchan_checksum(*challenge, sequence) == checksum;
}

/* ---- protocol 68 XOR ---- */

#define BYTES8(b) ((uint64_t)(b) * 0x0101010101010101u)

/*
 * Eight key bytes at once, for msg[i..i+8) while cmd[index..index+8) are
 * all inside the command: the characters as the game sees them ('%' and
 * bytes > 127 become '.'), each shifted left by one at an odd message
 * position, then XORed in turn into the running key (a prefix XOR).  Every
 * character is at most 127 once replaced, so the shift stays in its byte.
 * Returns the key after the eighth byte.
 */
static uint8_t xor_word(uint8_t *msg, size_t i, const char *cmd, size_t index, uint8_t key)
{
    uint64_t w, t, bad, odd, d;

    memcpy(&w, cmd + index, 8);
    w = sg_le64((const uint8_t *)&w);
    t = w ^ BYTES8('%');
    /* 0x80 in each byte that is > 127 or '%' (t's zero bytes, exactly) */
    bad = (w | ~(((t & BYTES8(0x7f)) + BYTES8(0x7f)) | t | BYTES8(0x7f))) & BYTES8(0x80);
    bad = (bad >> 7) * 0xff;
    w = (w & ~bad) | (BYTES8('.') & bad);
    odd = i & 1 ? BYTES8(0xff) & ~(uint64_t)0xff00ff00ff00ff00u : 0xff00ff00ff00ff00u;
    d = (w & ~odd) | ((w & odd) << 1);
    d ^= d << 8;
    d ^= d << 16;
    d ^= d << 32;
    d ^= BYTES8(key);
    sg_put_le64(msg + i, sg_le64(msg + i) ^ d);
    return (uint8_t)(d >> 56);
}

static void xor_bytes(uint8_t *msg, size_t len, size_t start, uint8_t key, const char *cmd)
{
    size_t cmd_len = strlen(cmd), index = 0, i = start;

    if (cmd_len == 0) {
        /* the zeroed slot: the key never changes */
        for (; i + 8 <= len; i += 8)
            sg_put_le64(msg + i, sg_le64(msg + i) ^ BYTES8(key));
        for (; i < len; i++)
            msg[i] ^= key;
        return;
    }
    while (i < len) {
        unsigned c;

        /* the game restarts at a NUL */
        if (index >= cmd_len)
            index = 0;
        if (len - i >= 8 && cmd_len - index >= 8) {
            key = xor_word(msg, i, cmd, index, key);
            i += 8;
            index += 8;
            continue;
        }
        c = (unsigned char)cmd[index];
        if (c > 127 || c == '%')
            c = '.';
        key ^= (uint8_t)(c << (i & 1));
        index++;
        msg[i] ^= key;
        i++;
    }
}

void sg_q3_xor_server_message(uint8_t *msg, size_t len, int32_t challenge, int32_t sequence,
                              const char *cmd)
{
    xor_bytes(msg, len, SV_XOR_START, (uint8_t)(challenge ^ sequence), cmd);
}

void sg_q3_xor_client_message(uint8_t *msg, size_t len, int32_t challenge, int32_t server_id,
                              int32_t message_ack, const char *cmd)
{
    xor_bytes(msg, len, CL_XOR_START, (uint8_t)(challenge ^ server_id ^ message_ack), cmd);
}

/* The longs a message starts with, read as the game reads them (Huffman). */
static void read_longs(const uint8_t *msg, size_t len, int32_t *v, int n)
{
    struct sg_q3_msg m;

    sg_q3_msg_init_read(&m, msg, len);
    for (int i = 0; i < n; i++)
        v[i] = sg_q3_msg_read_long(&m);
}

/*
 * XOR a whole message of `dir` with the command ring `ring` of the view
 * that keys it.  The longs come from the bytes as they are now: scrambled
 * when decoding, plain when encoding.
 */
static void scramble(const struct sg_q3_netchan *nc, enum sg_q3_dir dir, int32_t sequence,
                     const struct sg_q3_reliable_ring *ring, uint8_t *msg, size_t len)
{
    int32_t v[3];

    if (dir == SG_Q3_S2C) {
        if (len <= SV_XOR_START)
            return;
        read_longs(msg, len, v, 1);
        sg_q3_xor_server_message(msg, len, nc->challenge, sequence, sg_q3_ring_get(ring, v[0]));
    } else {
        if (len <= CL_XOR_START)
            return;
        read_longs(msg, len, v, 3);
        sg_q3_xor_client_message(msg, len, nc->challenge, v[0], v[1], sg_q3_ring_get(ring, v[2]));
    }
}

/* ---- the leading part of server messages ---- */

/* Up to two views to update while walking (either may be NULL), and the
 * variant whose limits and entity table the walk follows. */
struct views {
    struct sg_q3_view *a, *b;
    const struct sg_q3_variant *v;
};

/* The variant a session's messages are walked with: its wire's, else 68's. */
static const struct sg_q3_variant *walk_variant(const struct sg_q3_netchan *nc)
{
    const struct sg_q3_variant *v = sg_q3_variant_of(nc->wire);

    return v ? v : &sg_q3_variant_68;
}

static void views_server_command(struct views vs, int32_t seq, const char *text)
{
    if (vs.a)
        sg_q3_ring_store(&vs.a->server_cmds, seq, text);
    if (vs.b)
        sg_q3_ring_store(&vs.b->server_cmds, seq, text);
}

static void views_gamestate(struct views vs, int32_t client_num, int32_t feed)
{
    struct sg_q3_view *v[2] = {vs.a, vs.b};

    for (int i = 0; i < 2; i++) {
        if (!v[i])
            continue;
        v[i]->have_gamestate = true;
        v[i]->client_num = client_num;
        v[i]->checksum_feed = feed;
    }
}

/* svc_gamestate after its op byte (CL_ParseGamestate). */
static int walk_gamestate(struct sg_q3_msg *m, struct sg_q3_svkeys *out, struct views vs)
{
    char str[SG_Q3_BIG_INFO_STRING];
    struct sg_q3_entity_delta rec;
    int32_t cmd_seq, client_num, feed;
    int ncs = 0, nbl = 0, err;

    cmd_seq = sg_q3_msg_read_long(m);
    for (;;) {
        int op = sg_q3_msg_read_byte(m);

        if (op == SG_Q3_SVC_EOF)
            break;
        if (op == SG_Q3_SVC_CONFIGSTRING) {
            int index = sg_q3_msg_read_short(m);

            if (index < 0 || index >= vs.v->max_configstrings)
                return m->overflowed ? SG_E_OVERFLOW : SG_E_MALFORMED;
            sg_q3_msg_read_string(m, str, sizeof(str), NULL);
            ncs++;
        } else if (op == SG_Q3_SVC_BASELINE) {
            int number = sg_q3_msg_read_bits(m, vs.v->gentitynum_bits);

            if (number < 0 || number >= vs.v->max_gentities)
                return m->overflowed ? SG_E_OVERFLOW : SG_E_MALFORMED;
            err = sg_q3_delta_entity_read(m, vs.v, number, &rec);
            if (err < 0)
                return err;
            nbl++;
        } else {
            return m->overflowed ? SG_E_OVERFLOW : SG_E_MALFORMED;
        }
        if (m->overflowed)
            return SG_E_OVERFLOW;
    }
    client_num = sg_q3_msg_read_long(m);
    feed = sg_q3_msg_read_long(m);
    if (m->overflowed)
        return SG_E_OVERFLOW;
    views_gamestate(vs, client_num, feed);
    if (out) {
        out->gamestate = true;
        out->gs_command_seq = cmd_seq;
        out->gs_configstrings = ncs;
        out->gs_baselines = nbl;
        out->client_num = client_num;
        out->checksum_feed = feed;
    }
    return 0;
}

/*
 * Walk a server message as CL_ParseServerMessage does, up to the first op
 * that needs the client's snapshot state; store its server commands and
 * gamestate keys into the views; fill `out` when not NULL.
 */
static int walk_server_message(const uint8_t *msg, size_t len, struct sg_q3_svkeys *out,
                               struct views vs)
{
    char game[SG_Q3_MAX_STRING_CHARS], raw[SG_Q3_MAX_STRING_CHARS];
    struct sg_q3_msg m;
    int32_t ack;
    int err;

    if (out) {
        /* everything but the commands array (only its first num_commands are read) */
        memset(out, 0, offsetof(struct sg_q3_svkeys, commands));
        memset(&out->gamestate, 0, sizeof(*out) - offsetof(struct sg_q3_svkeys, gamestate));
        out->stop_op = -1;
    }
    sg_q3_msg_init_read(&m, msg, len);
    ack = sg_q3_msg_read_long(&m);
    if (out)
        out->reliable_ack = ack;

    for (;;) {
        int op = sg_q3_msg_read_byte(&m);
        int32_t seq;

        if (m.overflowed)
            return SG_E_OVERFLOW;
        switch (op) {
        case SG_Q3_SVC_NOP:
            continue;
        case SG_Q3_SVC_SERVERCOMMAND:
            seq = sg_q3_msg_read_long(&m);
            sg_q3_msg_read_string(&m, game, sizeof(game), raw);
            if (m.overflowed)
                return SG_E_OVERFLOW;
            views_server_command(vs, seq, raw);
            if (out && out->num_commands < SG_Q3_MAX_RELIABLE_COMMANDS) {
                struct sg_q3_reliable_cmd *c = &out->commands[out->num_commands++];

                c->sequence = seq;
                c->len = (uint16_t)strlen(raw);
                memcpy(c->text, raw, (size_t)c->len + 1);
            }
            continue;
        case SG_Q3_SVC_GAMESTATE:
            err = walk_gamestate(&m, out, vs);
            if (err < 0)
                return err;
            continue;
        case SG_Q3_SVC_SNAPSHOT:
            if (out) {
                out->snapshot = true;
                out->snap_server_time = sg_q3_msg_read_long(&m);
                out->snap_delta_num = (uint8_t)sg_q3_msg_read_byte(&m);
                out->snap_flags = (uint8_t)sg_q3_msg_read_byte(&m);
            }
            break;
        case SG_Q3_SVC_EOF:
        case SG_Q3_SVC_DOWNLOAD:
        case SG_Q3_SVC_VOIP_SPEEX:
        case SG_Q3_SVC_VOIP_OPUS:
            break;
        default:
            return SG_E_MALFORMED; /* CL_ParseServerMessage: illegible server message */
        }
        if (out)
            out->stop_op = op;
        return m.overflowed ? SG_E_OVERFLOW : 0;
    }
}

int sg_q3_svkeys_parse(const uint8_t *msg, size_t len, struct sg_q3_svkeys *out)
{
    struct views none = {NULL, NULL, &sg_q3_variant_68};

    return walk_server_message(msg, len, out, none);
}

/* Store the reliable commands of a client message (clc_clientCommand ops) into a view. */
static void walk_client_commands(const uint8_t *msg, size_t len, struct sg_q3_view *v)
{
    char game[SG_Q3_MAX_STRING_CHARS], raw[SG_Q3_MAX_STRING_CHARS];
    struct sg_q3_msg m;

    /* serverId, messageAcknowledge, reliableAcknowledge, then the commands */
    sg_q3_msg_init_read(&m, msg, len);
    for (int i = 0; i < 3; i++)
        sg_q3_msg_read_long(&m);
    while (!m.overflowed && sg_q3_msg_read_byte(&m) == SG_Q3_CLC_CLIENTCOMMAND) {
        int32_t seq = sg_q3_msg_read_long(&m);

        sg_q3_msg_read_string(&m, game, sizeof(game), raw);
        if (m.overflowed)
            break;
        sg_q3_ring_store(&v->client_cmds, seq, raw);
    }
}

/* ---- session state ---- */

void sg_q3_netchan_init(struct sg_q3_netchan *nc)
{
    memset(nc, 0, sizeof(*nc));
}

/* Both views forget everything (the rings' slots are freed). */
static void clear_views(struct sg_q3_netchan *nc)
{
    for (int i = 0; i < 2; i++) {
        sg_q3_ring_finish(&nc->view[i].client_cmds);
        sg_q3_ring_finish(&nc->view[i].server_cmds);
    }
    memset(nc->view, 0, sizeof(nc->view));
}

void sg_q3_netchan_finish(struct sg_q3_netchan *nc)
{
    if (!nc)
        return;
    clear_views(nc);
    memset(nc, 0, sizeof(*nc));
}

void sg_q3_netchan_reset(struct sg_q3_netchan *nc)
{
    memset(nc->rx, 0, sizeof(nc->rx));
    clear_views(nc);
    nc->split_views = false;
}

const struct sg_q3_view *sg_q3_netchan_view(const struct sg_q3_netchan *nc, enum sg_q3_side side)
{
    return &nc->view[side];
}

/* The handshake fields an out-of-band packet carries. */
static void learn_oob(struct sg_q3_netchan *nc, enum sg_q3_dir dir, const struct sg_q3_oob *o)
{
    switch (o->kind) {
    case SG_Q3_OOB_CHALLENGE_RESPONSE:
        if (dir != SG_Q3_S2C)
            break;
        nc->challenge = o->challenge;
        nc->have_challenge = true;
        if (o->has_protocol && !(nc->evidence & SG_Q3_EVIDENCE_HANDSHAKE))
            nc->protocol = o->protocol; /* the server's; connect has the final word */
        break;
    case SG_Q3_OOB_CONNECT:
        if (dir != SG_Q3_C2S)
            break;
        /* a (re)connect: the server sets its netchan up afresh (SV_DirectConnect) */
        sg_q3_netchan_reset(nc);
        nc->connected = false;
        nc->wire = SG_Q3_WIRE_UNKNOWN;
        nc->evidence = 0;
        if (o->has_protocol) {
            nc->protocol = o->protocol;
            nc->evidence |= SG_Q3_EVIDENCE_HANDSHAKE;
            /* HEADERS where no variant has the number (named, relayed, not
             * misread as 68); UNKNOWN where two share it (the datagrams decide) */
            nc->wire = sg_q3_variant_wire_for_protocol(o->protocol);
        }
        if (o->has_challenge) {
            nc->challenge = o->challenge;
            nc->have_challenge = true;
        }
        if (o->has_qport) {
            nc->qport = o->qport;
            nc->have_qport = true;
        }
        break;
    case SG_Q3_OOB_CONNECT_RESPONSE:
        if (dir != SG_Q3_S2C || nc->connected)
            break;
        /* the client sets its netchan up (CL_ConnectionlessPacket) */
        nc->connected = true;
        memset(&nc->rx[SG_Q3_S2C], 0, sizeof(nc->rx[SG_Q3_S2C]));
        break;
    default:
        break;
    }
}

/*
 * Decide the wire format from a datagram whose checksum, if any, would
 * be at `off`: by the handshake's protocol, then by whether the checksum
 * validates; with no handshake, by solving the challenge from one
 * checksum and confirming it on the next.
 */
static void detect_wire(struct sg_q3_netchan *nc, const uint8_t *data, size_t len, size_t off,
                        int32_t seq)
{
    uint32_t k;
    int32_t c;

    if (nc->wire != SG_Q3_WIRE_UNKNOWN || len < off + 4)
        return;
    k = sg_le32(data + off);
    if (nc->have_challenge) {
        if (k == sg_q3_netchan_checksum(nc->challenge, seq)) {
            nc->wire = sg_q3_variant_by_checksum(0, true);
            nc->evidence |= SG_Q3_EVIDENCE_CHECKSUM;
        } else {
            /* the checksum-less variant of the handshake's number, else the first */
            nc->wire = sg_q3_variant_by_checksum(nc->protocol, false);
            if (nc->wire == SG_Q3_WIRE_UNKNOWN)
                nc->wire = sg_q3_variant_by_checksum(0, false);
            nc->evidence |= SG_Q3_EVIDENCE_NO_CHECKSUM;
        }
        return;
    }
    if (nc->have_candidate && k == sg_q3_netchan_checksum(nc->candidate, seq)) {
        nc->challenge = nc->candidate;
        nc->have_challenge = true;
        nc->wire = sg_q3_variant_by_checksum(0, true);
        nc->evidence |= SG_Q3_EVIDENCE_CHECKSUM | SG_Q3_EVIDENCE_RECOVERED;
        if (!nc->protocol)
            nc->protocol = sg_q3_variant_of(nc->wire)->protocol;
        return;
    }
    if (sg_q3_netchan_solve_challenge(seq, k, &c)) {
        nc->candidate = c;
        nc->have_candidate = true;
    }
}

/* ---- decode ---- */

static int decode_oob(struct sg_q3_netchan *nc, enum sg_q3_dir dir, const uint8_t *data, size_t len,
                      struct sg_q3_frame *f)
{
    int err = sg_q3_oob_parse(data, len, dir == SG_Q3_C2S, &f->u.oob);

    f->rx = SG_Q3_RX_OOB;
    nc->stats.oob[dir]++;
    if (err < 0)
        return err;
    learn_oob(nc, dir, &f->u.oob);
    return 0;
}

/* The content of a whole message: read it, and learn the commands and keys. */
static int decode_content(struct sg_q3_netchan *nc, struct sg_q3_frame *f)
{
    struct sg_q3_view *client = &nc->view[SG_Q3_SIDE_CLIENT];
    struct sg_q3_view *server = &nc->view[SG_Q3_SIDE_SERVER];

    if (f->dir == SG_Q3_S2C) {
        struct views vs = {server, nc->split_views ? NULL : client, walk_variant(nc)};

        return walk_server_message(f->msg, f->msg_len, &f->u.sv, vs);
    }
    f->content_err = sg_q3_clmsg_decode(f->msg, f->msg_len, client->checksum_feed,
                                        &client->server_cmds, &f->u.cl);
    for (int i = 0; i < f->u.cl.num_commands; i++) {
        sg_q3_ring_store(&client->client_cmds, f->u.cl.commands[i].sequence,
                         f->u.cl.commands[i].text);
        if (!nc->split_views)
            sg_q3_ring_store(&server->client_cmds, f->u.cl.commands[i].sequence,
                             f->u.cl.commands[i].text);
    }
    return f->content_err;
}

/* The sender's command ring that keys the XOR of a message in `dir`. */
static const struct sg_q3_reliable_ring *sender_ring(const struct sg_q3_netchan *nc,
                                                     enum sg_q3_dir dir)
{
    return dir == SG_Q3_S2C ? &nc->view[SG_Q3_SIDE_SERVER].client_cmds
                            : &nc->view[SG_Q3_SIDE_CLIENT].server_cmds;
}

/* A fragment piece after its header (the Netchan_Process fragment paragraph). */
static int take_fragment(struct sg_q3_netchan *nc, struct sg_q3_frame *f, const uint8_t *data,
                         size_t len)
{
    struct sg_q3_chan_rx *rx = &nc->rx[f->dir];
    int start = f->fragment_start, flen = f->fragment_length;

    /* a new sequence restarts the partial message */
    if (f->sequence != rx->fragment_sequence) {
        rx->fragment_sequence = f->sequence;
        rx->fragment_length = 0;
    }
    /* a piece out of place: dropped, the partial message kept */
    if (start < 0 || (size_t)start != rx->fragment_length) {
        f->rx = SG_Q3_RX_GAP;
        nc->stats.gaps[f->dir]++;
        return 0;
    }
    if (flen < 0 || f->header_len + (size_t)flen > len ||
        rx->fragment_length + (size_t)flen > sizeof(rx->fragment_buffer)) {
        f->rx = SG_Q3_RX_BAD_FRAGMENT;
        nc->stats.bad_fragments[f->dir]++;
        return SG_E_FRAGMENT;
    }
    memcpy(rx->fragment_buffer + rx->fragment_length, data + f->header_len, (size_t)flen);
    rx->fragment_length += (size_t)flen;
    if (flen == SG_Q3_FRAGMENT_SIZE) {
        f->rx = SG_Q3_RX_FRAGMENT;
        nc->stats.fragments[f->dir]++;
        return 0;
    }

    /* the last piece: the whole message */
    memcpy(f->msg, rx->fragment_buffer, rx->fragment_length);
    f->msg_len = rx->fragment_length;
    f->pieces = (int)(rx->fragment_length / SG_Q3_FRAGMENT_SIZE) + 1;
    rx->fragment_length = 0;
    f->rx = SG_Q3_RX_MESSAGE;
    return 0;
}

/*
 * A protocol slipgate does not decode: only what every Quake 3 netchan
 * shares is read, the 32-bit little-endian sequence with the fragment bit
 * on top, and from the client the 16-bit qport after it (protocol 43 has
 * it too: the Java proxy of ../shared/seeds read both).  Where checksums
 * or fragment fields sit in the other games is not assumed; the payload
 * is not touched.
 */
static int decode_headers(struct sg_q3_netchan *nc, enum sg_q3_dir dir, const uint8_t *data,
                          size_t len, struct sg_q3_frame *f)
{
    uint32_t word;

    f->rx = SG_Q3_RX_HEADERS;
    if (len < 4)
        return 0; /* relayed as it came; nothing to read */
    word = sg_le32(data);
    f->fragmented = (word & SG_Q3_FRAGMENT_BIT) != 0;
    f->sequence = (int32_t)(word & ~SG_Q3_FRAGMENT_BIT);
    f->header_len = 4;
    if (dir == SG_Q3_C2S && len >= 6) {
        f->qport = sg_le16(data + 4);
        f->header_len = 6;
    }
    return 0;
}

int sg_q3_netchan_decode(struct sg_q3_netchan *nc, enum sg_q3_dir dir, const uint8_t *data,
                         size_t len, struct sg_q3_frame *f)
{
    struct sg_q3_chan_rx *rx = &nc->rx[dir];
    size_t off = 4;
    uint32_t word;
    int err;

    memset(f, 0, offsetof(struct sg_q3_frame, msg));
    f->dir = dir;
    f->datagram_len = len;
    nc->stats.datagrams[dir]++;
    if (sg_q3_oob_is(data, len))
        return decode_oob(nc, dir, data, len, f);

    if (nc->wire == SG_Q3_WIRE_HEADERS)
        return decode_headers(nc, dir, data, len, f);

    /* Header: sequence, qport, checksum, fragment fields. */
    f->rx = SG_Q3_RX_UNDECODABLE;
    if (len < (dir == SG_Q3_C2S ? 6u : 4u))
        goto undecodable_short;
    if (len >= SG_Q3_MAX_MSGLEN)
        goto undecodable_long; /* the game drops it too (NET_GetPacket: "Oversize packet") */
    word = sg_le32(data);
    f->fragmented = (word & SG_Q3_FRAGMENT_BIT) != 0;
    f->sequence = (int32_t)(word & ~SG_Q3_FRAGMENT_BIT);
    if (dir == SG_Q3_C2S) {
        f->qport = sg_le16(data + 4);
        off = 6;
        if (!nc->have_qport) {
            nc->qport = f->qport;
            nc->have_qport = true;
        }
    }
    detect_wire(nc, data, len, off, f->sequence);
    if (nc->wire == SG_Q3_WIRE_UNKNOWN)
        goto undecodable_keys;
    if (sg_q3_wire_checksum(nc->wire)) {
        if (len < off + 4)
            goto undecodable_short;
        f->has_checksum = true;
        f->checksum = sg_le32(data + off);
        off += 4;
        if (f->checksum != sg_q3_netchan_checksum(nc->challenge, f->sequence)) {
            f->header_len = off;
            f->rx = SG_Q3_RX_BAD_CHECKSUM;
            nc->stats.bad_checksums[dir]++;
            return 0;
        }
    }
    if (f->fragmented) {
        if (len < off + 4)
            goto undecodable_short;
        f->fragment_start = (int16_t)sg_le16(data + off);
        f->fragment_length = (int16_t)sg_le16(data + off + 2);
        off += 4;
    }
    f->header_len = off;
    if (sg_q3_wire_xor(nc->wire) && !nc->have_challenge)
        goto undecodable_keys;

    /* Duplicates and out-of-order sequences: dropped; shown with today's keys. */
    if (f->sequence <= rx->incoming_sequence) {
        f->rx = SG_Q3_RX_OLD;
        nc->stats.old[dir]++;
        if (!f->fragmented) {
            f->msg_len = len - off;
            memcpy(f->msg, data + off, f->msg_len);
            if (sg_q3_wire_xor(nc->wire))
                scramble(nc, dir, f->sequence, sender_ring(nc, dir), f->msg, f->msg_len);
        }
        return 0;
    }
    f->dropped = f->sequence - (rx->incoming_sequence + 1);

    /* Reassembly, or the message as it is. */
    if (f->fragmented) {
        err = take_fragment(nc, f, data, len);
        if (f->rx != SG_Q3_RX_MESSAGE)
            return err;
    } else {
        f->msg_len = len - off;
        memcpy(f->msg, data + off, f->msg_len);
        f->pieces = 1;
        f->rx = SG_Q3_RX_MESSAGE;
    }
    rx->incoming_sequence = f->sequence;
    nc->stats.messages[dir]++;

    /* XOR off with the sender's view, then read the content. */
    if (sg_q3_wire_xor(nc->wire))
        scramble(nc, dir, f->sequence, sender_ring(nc, dir), f->msg, f->msg_len);
    f->content_err = decode_content(nc, f);
    if (f->content_err < 0)
        nc->stats.content_errors[dir]++;
    return f->content_err;

undecodable_short:
    nc->stats.undecodable[dir]++;
    return SG_E_TRUNCATED;
undecodable_long:
    nc->stats.undecodable[dir]++;
    return SG_E_TOOBIG;
undecodable_keys:
    nc->stats.undecodable[dir]++;
    return SG_E_STATE;
}

/* ---- encode ---- */

/* Header of one datagram; returns its length. */
static size_t put_header(const struct sg_q3_netchan *nc, enum sg_q3_dir dir, int32_t sequence,
                         bool fragment, size_t start, size_t flen, uint8_t *out)
{
    size_t off = 4;

    sg_put_le32(out, (uint32_t)sequence | (fragment ? SG_Q3_FRAGMENT_BIT : 0));
    if (dir == SG_Q3_C2S) {
        sg_put_le16(out + 4, nc->qport);
        off = 6;
    }
    if (sg_q3_wire_checksum(nc->wire)) {
        sg_put_le32(out + off, sg_q3_netchan_checksum(nc->challenge, sequence));
        off += 4;
    }
    if (fragment) {
        sg_put_le16(out + off, (uint16_t)start);
        sg_put_le16(out + off + 2, (uint16_t)flen);
        off += 4;
    }
    return off;
}

int sg_q3_netchan_encode(struct sg_q3_netchan *nc, enum sg_q3_dir dir, int32_t sequence,
                         const uint8_t *msg, size_t len, struct sg_q3_datagrams *out)
{
    uint8_t buf[SG_Q3_MAX_MSGLEN];
    struct sg_q3_view *receiver =
        &nc->view[dir == SG_Q3_S2C ? SG_Q3_SIDE_CLIENT : SG_Q3_SIDE_SERVER];
    size_t start = 0;

    out->count = 0;
    if (len > SG_Q3_MAX_MSGLEN)
        return SG_E_TOOBIG;
    if (nc->wire == SG_Q3_WIRE_HEADERS)
        return SG_E_UNSUPPORTED; /* a protocol not decoded is never rebuilt */
    if (nc->wire == SG_Q3_WIRE_UNKNOWN || !nc->have_challenge)
        return SG_E_STATE; /* both the XOR and the checksum need the challenge */
    /* A fragment's header is the sequence with the top bit set: for sequence
     * 0x7fffffff that is 0xffffffff, which reads as an out-of-band packet.
     * The message stays as it came (the caller relays the original). */
    if (len >= SG_Q3_FRAGMENT_SIZE && (uint32_t)sequence == 0x7fffffffu)
        return SG_E_UNSUPPORTED;
    memcpy(buf, msg, len);

    /* XOR with the receiver's view; the receiver now knows this message's commands. */
    if (sg_q3_wire_xor(nc->wire))
        scramble(nc, dir, sequence,
                 dir == SG_Q3_S2C ? &receiver->client_cmds : &receiver->server_cmds, buf, len);
    if (dir == SG_Q3_S2C) {
        struct views vs = {receiver, NULL, walk_variant(nc)};

        walk_server_message(msg, len, NULL, vs);
    } else {
        walk_client_commands(msg, len, receiver);
    }

    /* One datagram, or 1300-byte pieces ending with a short (maybe empty) one. */
    if (len < SG_Q3_FRAGMENT_SIZE) {
        size_t h = put_header(nc, dir, sequence, false, 0, 0, out->data[0]);

        memcpy(out->data[0] + h, buf, len);
        out->len[0] = h + len;
        out->count = 1;
        return 1;
    }
    for (;;) {
        size_t flen = len - start < SG_Q3_FRAGMENT_SIZE ? len - start : SG_Q3_FRAGMENT_SIZE;
        uint8_t *d = out->data[out->count];
        size_t h = put_header(nc, dir, sequence, true, start, flen, d);

        memcpy(d + h, buf + start, flen);
        out->len[out->count++] = h + flen;
        start += flen;
        if (flen < SG_Q3_FRAGMENT_SIZE)
            break;
    }
    return out->count;
}
