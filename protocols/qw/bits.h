/*
 * QuakeWorld's entity delta bits (packetentities, deltapacketentities),
 * shared by the parser (parse.c) and the level tracker (state.c).  The low
 * 9 bits of the 16-bit word are the entity number; U_MOREBITS adds a byte
 * of the low flags, U_EVENMORE FTE's extension byte.
 */
#ifndef SG_QW_BITS_H
#define SG_QW_BITS_H

#define U_ORIGIN1  (1u << 9)
#define U_ORIGIN2  (1u << 10)
#define U_ORIGIN3  (1u << 11)
#define U_ANGLE2   (1u << 12)
#define U_FRAME    (1u << 13)
#define U_REMOVE   (1u << 14)
#define U_MOREBITS (1u << 15)

/* the byte after U_MOREBITS */
#define U_ANGLE1   (1u << 0)
#define U_ANGLE3   (1u << 1)
#define U_MODEL    (1u << 2)
#define U_COLORMAP (1u << 3)
#define U_SKIN     (1u << 4)
#define U_EFFECTS  (1u << 5)
#define U_EVENMORE (1u << 7)

/* FTE's byte after U_EVENMORE */
#define U_FTE_TRANS   (1u << 1)
#define U_FTE_YETMORE (1u << 7)

#endif
