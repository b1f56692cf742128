/*
 * CRC-16-CCITT (polynomial 0x1021, MSB first, no reflection, no final
 * xor; the games start it at 0xffff): the CRC inside Quake 2's and
 * QuakeWorld's move checksum byte (COM_BlockSequenceCRCByte).  Four bytes
 * a step from four tables (crc16.c says how they are made), and the
 * byte-wise reference.  No state: the tables are constant.
 */
#ifndef SG_PROTOCOLS_CRC16_H
#define SG_PROTOCOLS_CRC16_H

#include <stddef.h>
#include <stdint.h>

extern const uint16_t sg_crc16_ccitt_tab[4][256];

/* `crc` continued over `n` bytes at `p` (borrowed for the call), four a step. */
uint16_t sg_crc16_ccitt(uint16_t crc, const uint8_t *p, size_t n);
/* The same one byte at a time (the reference the tests hold the other to). */
uint16_t sg_crc16_ccitt_bytewise(uint16_t crc, const uint8_t *p, size_t n);

/* Four bytes at `p` folded into `crc`: the first two into the CRC, the last
 * two looked up on their own (the CRC is linear in its input). */
static inline uint16_t sg_crc16_ccitt_step4(uint16_t crc, const uint8_t *p)
{
    unsigned v = crc ^ ((unsigned)p[0] << 8 | p[1]);

    return (uint16_t)(sg_crc16_ccitt_tab[3][v >> 8] ^ sg_crc16_ccitt_tab[2][v & 0xff] ^
                      sg_crc16_ccitt_tab[1][p[2]] ^ sg_crc16_ccitt_tab[0][p[3]]);
}

#endif
