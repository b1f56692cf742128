/*
 * Quake 3 message buffer: bounded bit reader and writer.
 *
 * Exact game semantics (ioquake3 msg.c MSG_ReadBits / MSG_WriteBits):
 *  - Huffman mode (the default for message content): a read or write of
 *    N bits first moves the low (N & 7) bits raw, LSB first, then each
 *    remaining group of 8 bits as one fixed-Huffman symbol.
 *  - OOB mode (sg_q3_msg_oob): 8/16/32-bit values are plain little-endian
 *    bytes; used for netchan headers and out-of-band packets.
 *  - Negative `bits` means signed: the value is sign-extended on read.
 *  - Reading past the end never touches memory outside the buffer: it sets
 *    the sticky `overflowed` flag and returns 0; the codec checks the flag
 *    once per message.  Writing past `cap` likewise sets the flag.
 *
 * The struct is caller-owned; `data` is borrowed for the buffer's lifetime.
 */
#ifndef SG_PROTOCOLS_Q3_MSG_H
#define SG_PROTOCOLS_Q3_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SG_Q3_MAX_MSGLEN 16384 /* MAX_MSGLEN */
#define SG_Q3_MAX_STRING_CHARS 1024
#define SG_Q3_BIG_INFO_STRING 8192

struct sg_q3_msg {
    uint8_t *data;    /* bytes being read or written */
    size_t cap;       /* capacity of data, in bytes */
    size_t size;      /* bytes that hold data (reader: input length; writer: bytes used) */
    size_t bit;       /* current bit position */
    size_t readcount; /* bytes consumed: (bit >> 3) + 1 in Huffman mode, as the game counts */
    bool oob;         /* true: raw byte mode */
    bool overflowed;  /* sticky overflow flag */
};

/* Reader over `len` bytes at `data` (not modified; cast away for the struct). */
void sg_q3_msg_init_read(struct sg_q3_msg *m, const uint8_t *data, size_t len);
/* Writer into `buf` of `cap` bytes; zeroes the buffer. */
void sg_q3_msg_init_write(struct sg_q3_msg *m, uint8_t *buf, size_t cap);

/* Switch modes (MSG_Bitstream / the OOB readers).  The bit position is kept. */
void sg_q3_msg_oob(struct sg_q3_msg *m, bool oob);

/* Core bit I/O.  |bits| in 1..32; negative = signed. */
int32_t sg_q3_msg_read_bits(struct sg_q3_msg *m, int bits);
void sg_q3_msg_write_bits(struct sg_q3_msg *m, int32_t value, int bits);

/* Conveniences with the game's widths and signedness. */
int sg_q3_msg_read_byte(struct sg_q3_msg *m);   /* 0..255, or -1 past the end (game behaviour) */
int sg_q3_msg_read_short(struct sg_q3_msg *m);  /* signed 16, or -1 past the end */
int32_t sg_q3_msg_read_long(struct sg_q3_msg *m); /* 32, or -1 past the end */
float sg_q3_msg_read_float(struct sg_q3_msg *m);
void sg_q3_msg_write_byte(struct sg_q3_msg *m, int c);
void sg_q3_msg_write_short(struct sg_q3_msg *m, int c);
void sg_q3_msg_write_long(struct sg_q3_msg *m, int32_t c);
void sg_q3_msg_write_float(struct sg_q3_msg *m, float f);

/*
 * Strings as the game reads them (MSG_ReadString / ReadBigString /
 * ReadStringLine): bytes until 0 (or newline for _line), '%' becomes '.',
 * bytes > 127 become '.' (the 1.32 rule), at most `cap - 1` stored and
 * always NUL-terminated.  Returns the stored length.  `raw`, when not NULL,
 * receives the exact bytes read (before the substitutions) so an encoder
 * can reproduce them; it needs `cap` bytes too.
 */
size_t sg_q3_msg_read_string(struct sg_q3_msg *m, char *out, size_t cap, char *raw);
size_t sg_q3_msg_read_string_line(struct sg_q3_msg *m, char *out, size_t cap, char *raw);
/* Writes `len` bytes of `s` then a 0 byte, each as an 8-bit value. */
void sg_q3_msg_write_string(struct sg_q3_msg *m, const char *s, size_t len);

void sg_q3_msg_read_data(struct sg_q3_msg *m, uint8_t *out, size_t len);
void sg_q3_msg_write_data(struct sg_q3_msg *m, const uint8_t *in, size_t len);

/* Bytes the writer has produced so far: (bit + 7) >> 3. */
size_t sg_q3_msg_bytes(const struct sg_q3_msg *m);

#endif
