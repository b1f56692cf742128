/*
 * Quake 3 Huffman coding.
 *
 * Two coders share one symbol alphabet (bytes 0..255 plus the NYT escape):
 *
 *  - The fixed coder: a tree built once from the 256 msg_hData counts and
 *    then never changed; every in-game message (both directions) and every
 *    demo message is coded with it.  sg_q3_huff_fixed() returns the shared,
 *    immutable instance (built on first use, thread-safe; it holds no
 *    mutable state so any number of sessions may use it at once).
 *
 *  - The adaptive coder: the tree starts empty and grows with every symbol,
 *    as Huff_Compress / Huff_Decompress do.  Used by the client's `connect`
 *    packet (from byte 12; bytes 12-13 hold the uncompressed length, big
 *    endian).
 *
 * Bits are numbered from bit 0 of byte 0 upwards (LSB first), as the game
 * reads them.
 */
#ifndef SG_PROTOCOLS_Q3_HUFFMAN_H
#define SG_PROTOCOLS_Q3_HUFFMAN_H

#include <stddef.h>
#include <stdint.h>

struct sg_q3_huff; /* opaque; the fixed coder's tables */

/* The shared fixed coder; never NULL, never freed. */
const struct sg_q3_huff *sg_q3_huff_fixed(void);

/*
 * Decode one symbol from `data` (`size` bytes) starting at bit `*bit`;
 * on success stores the byte value, advances `*bit` and returns 0.
 * Returns SG_E_HUFFMAN for a code that leaves the buffer or the tree.
 */
int sg_q3_huff_get_sym(const struct sg_q3_huff *h, const uint8_t *data, size_t size,
                       size_t *bit, uint8_t *sym);

/*
 * Encode byte `sym` into `out` (capacity `cap` bytes) at bit `*bit`,
 * advancing it.  Bits that are written are OR-ed in, so the caller gives a
 * zeroed buffer.  Returns 0, or SG_E_OVERFLOW when it would not fit.
 */
int sg_q3_huff_put_sym(const struct sg_q3_huff *h, uint8_t *out, size_t cap, size_t *bit,
                       uint8_t sym);

/*
 * Adaptive coder (connect packets).  `in` is the compressed body that
 * follows the 12-byte OOB prefix: a 2-byte big-endian length, then the
 * codes.  Writes at most `cap` bytes to `out` and returns the number
 * written, or a negative error.  `in`/`out` are borrowed for the call.
 */
int sg_q3_huff_adaptive_decompress(const uint8_t *in, size_t in_len, uint8_t *out, size_t cap);

/* The inverse: writes the 2-byte length and the codes; returns bytes
 * written or a negative error (SG_E_OVERFLOW when `cap` is too small). */
int sg_q3_huff_adaptive_compress(const uint8_t *in, size_t in_len, uint8_t *out, size_t cap);

#endif
