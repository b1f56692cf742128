/*
 * Quake 2's delta bits shared by the parser (parse.c) and the 35/36 to 34
 * transcoder (state.c, record.c): U_* for entities (up to 32 bits in 34/35/36),
 * PS_* for the player state.  Protocol-specific extensions stay in parse.h.
 */
#ifndef SG_Q2_BITS_H
#define SG_Q2_BITS_H

#define U_ORIGIN1   (1ull << 0)
#define U_ORIGIN2   (1ull << 1)
#define U_ANGLE2    (1ull << 2)
#define U_ANGLE3    (1ull << 3)
#define U_FRAME8    (1ull << 4)
#define U_EVENT     (1ull << 5)
#define U_REMOVE    (1ull << 6)
#define U_MOREBITS1 (1ull << 7)
#define U_NUMBER16  (1ull << 8)
#define U_ORIGIN3   (1ull << 9)
#define U_ANGLE1    (1ull << 10)
#define U_MODEL     (1ull << 11)
#define U_RENDERFX8 (1ull << 12)
#define U_EFFECTS8  (1ull << 14)
#define U_MOREBITS2 (1ull << 15)
#define U_SKIN8     (1ull << 16)
#define U_FRAME16   (1ull << 17)
#define U_RENDERFX16 (1ull << 18)
#define U_EFFECTS16 (1ull << 19)
#define U_MODEL2    (1ull << 20)
#define U_MODEL3    (1ull << 21)
#define U_MODEL4    (1ull << 22)
#define U_MOREBITS3 (1ull << 23)
#define U_OLDORIGIN (1ull << 24)
#define U_SKIN16    (1ull << 25)
#define U_SOUND     (1ull << 26)
#define U_SOLID     (1ull << 27)

#define PS_M_TYPE         (1u << 0)
#define PS_M_ORIGIN       (1u << 1)
#define PS_M_VELOCITY     (1u << 2)
#define PS_M_TIME         (1u << 3)
#define PS_M_FLAGS        (1u << 4)
#define PS_M_GRAVITY      (1u << 5)
#define PS_M_DELTA_ANGLES (1u << 6)
#define PS_VIEWOFFSET     (1u << 7)
#define PS_VIEWANGLES     (1u << 8)
#define PS_KICKANGLES     (1u << 9)
#define PS_BLEND          (1u << 10)
#define PS_FOV            (1u << 11)
#define PS_WEAPONINDEX    (1u << 12)
#define PS_WEAPONFRAME    (1u << 13)
#define PS_RDFLAGS        (1u << 14)

#endif
