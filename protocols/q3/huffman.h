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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sg_q3_huff; /* opaque; the fixed coder's tables */

/* The shared fixed coder; never NULL, never freed. */
const struct sg_q3_huff *sg_q3_huff_fixed(void);

/* The escape symbol (NYT, "not yet transmitted") of both coders. */
#define SG_Q3_HUFF_NYT 256

/*
 * The fixed coder's decode table, for inline readers: indexed by the next
 * stream bits (LSB first) masked with `*mask`, an entry is symbol | length
 * << 16, or has SG_Q3_HUFF_LUT_LONG set for a code longer than the table
 * (never with the default 11-bit table; a reader then uses the functions
 * below).  Valid for the program's lifetime.
 */
#define SG_Q3_HUFF_LUT_LONG 0x80000000u
const uint32_t *sg_q3_huff_lut(const struct sg_q3_huff *h, uint32_t *mask);

/*
 * The fixed coder's encode tables, for inline writers: code[b] holds byte
 * b's code (the first bit sent in the least significant bit), len[b] its
 * length (1..11).  Valid for the program's lifetime.
 */
const uint32_t *sg_q3_huff_codes(const struct sg_q3_huff *h, const uint8_t **len);

/*
 * Decode one symbol from `data` (`size` bytes) starting at bit `*bit`;
 * on success stores the byte value, advances `*bit` and returns 0.
 * Returns SG_E_HUFFMAN, `*bit` unchanged, for a code that would need a bit
 * at or past `size * 8` (no byte past `size` is ever read) or for the NYT
 * code, which game-written data never contains.
 */
int sg_q3_huff_get_sym(const struct sg_q3_huff *h, const uint8_t *data, size_t size, size_t *bit,
                       uint8_t *sym);

/*
 * Encode byte `sym` into `out` (capacity `cap` bytes) at bit `*bit`,
 * advancing it.  Exactly the code's bits are set; every other bit of `out`
 * is left as it was, so a zeroed buffer gives the game's bytes.  Returns 0,
 * or SG_E_OVERFLOW (nothing written) when the code would pass `cap * 8`.
 */
int sg_q3_huff_put_sym(const struct sg_q3_huff *h, uint8_t *out, size_t cap, size_t *bit,
                       uint8_t sym);

/*
 * The game's symbol read (Huff_offsetReceive bounded by the message end):
 * like sg_q3_huff_get_sym but returns the symbol, 0..255 or SG_Q3_HUFF_NYT
 * (the game then ORs the value 256 into the result), or SG_E_HUFFMAN with
 * `*bit` unchanged when the code would need a bit at or past `size * 8`.
 */
int sg_q3_huff_decode_sym(const struct sg_q3_huff *h, const uint8_t *data, size_t size,
                          size_t *bit);

/*
 * The game's read of one N-bit value in Huffman mode, in one call: the low
 * `raw` (0..7) bits raw, LSB first, then `nsyms` (0..4) codes giving the
 * value's bytes from the low one up; a NYT code contributes 256 (spilling
 * into the next byte), as in the game.  On success stores the value,
 * advances `*bit` and returns 0.  With `*bit` unchanged, returns
 * SG_E_OVERFLOW when the raw bits would pass `size * 8`, SG_E_HUFFMAN when
 * a code would need a bit at or past it.  No byte past `size` is read.
 */
int sg_q3_huff_read_value(const struct sg_q3_huff *h, const uint8_t *data, size_t size,
                          size_t *bit, unsigned raw, unsigned nsyms, uint32_t *value);

/*
 * The fast path of the game's string readers: decodes codes from `*bit`
 * on while they lie far enough inside the message (a whole 8-byte load
 * ahead) that each byte read would succeed, storing at most `max` bytes
 * as the game's byte reads see them (NYT reads as 0).  It stops after a
 * byte that reads as 0 or as `stop` (consumed, not stored; `*ended` is
 * set), after `max` bytes, or near the end; the caller reads the rest one
 * byte at a time.  Advances `*bit`; returns the bytes stored.
 */
size_t sg_q3_huff_decode_string(const struct sg_q3_huff *h, const uint8_t *data, size_t size,
                                size_t *bit, uint8_t *out, size_t max, int stop, bool *ended);

/*
 * Decode `n` bytes into `out` (table-driven; the fast path for bulk data).
 * Returns `n`, or SG_E_HUFFMAN with `*bit` at the failing code (end of the
 * buffer or NYT); `out` before that point is filled.  -EINVAL if n > INT_MAX.
 */
int sg_q3_huff_decode(const struct sg_q3_huff *h, const uint8_t *data, size_t size, size_t *bit,
                      uint8_t *out, size_t n);

/*
 * Encode the `n` bytes at `in` from bit `*bit` on.  Returns `n`, or
 * SG_E_OVERFLOW with `*bit` after the last code that fit.  -EINVAL if
 * n > INT_MAX.
 */
int sg_q3_huff_encode(const struct sg_q3_huff *h, uint8_t *out, size_t cap, size_t *bit,
                      const uint8_t *in, size_t n);

/*
 * The code of `sym` (0..255 or SG_Q3_HUFF_NYT): returns its length in bits
 * and stores in `*code` (when not NULL) its bits, the first one sent in the
 * least significant bit.  SG_E_MALFORMED for a symbol out of range.
 */
int sg_q3_huff_code(const struct sg_q3_huff *h, int sym, uint32_t *code);

/*
 * Adaptive coder (connect packets).  `in` is the compressed body that
 * follows the 12-byte OOB prefix: a 2-byte big-endian length, then the
 * codes.  Writes at most `cap` bytes to `out` and returns the number
 * written, or a negative error.  `in`/`out` are borrowed for the call.
 *
 * As Huff_Decompress: the length is clamped to `cap` (the game clamps to
 * its buffer: pass SG_Q3_MAX_MSGLEN - 12 for identical results); an empty
 * `in` gives 0 bytes; a 1-byte `in` is SG_E_TRUNCATED.  Nothing past
 * `in_len` is read: such bits count as 0 (the game reads whatever its
 * packet buffer holds there).  Decoding stops before a symbol that would
 * start at bit 8 * (in_len + 1) or later; the game leaves the rest of the
 * declared length undefined, this function fills it with zeros and still
 * returns the declared (clamped) length.
 */
int sg_q3_huff_adaptive_decompress(const uint8_t *in, size_t in_len, uint8_t *out, size_t cap);

/*
 * The inverse: writes the 2-byte length and the codes; returns bytes
 * written or a negative error (SG_E_OVERFLOW when `cap` is too small,
 * SG_E_TOOBIG above 65535 input bytes).  An empty input gives 0 bytes.
 * Like Huff_Compress the output is (bits >> 3) + 1 bytes long, so it ends
 * with a zero byte when the codes fill whole bytes (the game sends an
 * uninitialised byte there).  The output is identical to the game's
 * whenever it is shorter than the input, as real userinfo always is; for
 * incompressible input ioquake3's compressor stops emitting tree bits once
 * its bit position (16 length bits included) reaches 8 * in_len, giving a
 * stream no decoder can read, where this function (like the id 1.32
 * compressor) keeps writing a correct stream, which the game decodes.
 */
int sg_q3_huff_adaptive_compress(const uint8_t *in, size_t in_len, uint8_t *out, size_t cap);

#endif
