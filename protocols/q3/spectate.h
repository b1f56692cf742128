/*
 * Quake 3 spectators (codec.h, struct sg_codec_spectate): slipgate answers
 * a real client on a route's spectator port as a server would, and sends it
 * the view of one session of the route, re-encoded for its own netchan.
 *
 * Per spectator (heap, about 170 KB: its netchan and one decoded frame):
 *  - the handshake: challengeResponse with the proxy's challenge, the
 *    Huffman-coded connect checked (challenge, protocol 68 or 71,
 *    `password` in the userinfo), connectResponse;
 *  - a gamestate built from the watched session's tracked state (the
 *    demo recorder's, record.c) with the watched player's client number,
 *    sent again while the spectator has not acknowledged it;
 *  - then for each snapshot the watched player receives, one message: the
 *    server commands the player received (numbered in the spectator's own
 *    reliable sequence, sent until acknowledged, as the server does), and
 *    the snapshot re-encoded as a delta from the last one the spectator
 *    acknowledged (messageAcknowledge of its client messages), or whole;
 *    its player state marked PMF_FOLLOW, as the game's follow mode does;
 *  - its client messages are read for acknowledgements and console
 *    commands only (disconnect, follow, follownext, followprev); its moves
 *    are ignored.
 */
#ifndef SG_PROTOCOLS_Q3_SPECTATE_H
#define SG_PROTOCOLS_Q3_SPECTATE_H

#include "protocols/codec.h"
#include "protocols/q3/netchan.h"
#include "protocols/q3/state.h"
#include "protocols/q3/svmsg.h"

#define SG_Q3_PMF_FOLLOW 4096 /* bg_public.h: the player state is a followed client's */

/* The spectator hooks of the Quake 3 codec. */
extern const struct sg_codec_spectate sg_q3_spectate;

/*
 * A session's server stream as its codec decoded it (codec.c): the tracked
 * state (NULL before the handshake), and the server message decoded last
 * with its parse status.  Borrowed until the codec's next call.
 */
const struct sg_q3_state *sg_q3__codec_stream(const void *state, const struct sg_q3_svmsg **last,
                                              int *parse_err);

#endif
