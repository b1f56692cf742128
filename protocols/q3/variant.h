/*
 * Quake 3 variants as data: one descriptor per Quake 3-derived wire format.
 *
 * Everything by which the Quake 3 games that slipgate decodes differ from
 * one another lives in a `struct sg_q3_variant`: the protocol numbers a
 * connect string or a demo name carries, the entityState_t and
 * playerState_t field tables, the limits (entity number bits,
 * configstrings, reliable commands, snapshot backup), the netchan quirks
 * (the payload XOR of 1.32 / 68, the 32-bit checksum that ioquake3 71 puts
 * after the header) and the demo file extension.  The netchan (wire
 * choice, XOR, checksum), the demo reader's extensions and the whole
 * message layer take their answers from a descriptor: the parser and the
 * writer (svmsg.h; a message carries its variant), the delta coder
 * (delta.h), the stream state (state.h: each state has one), the recorder,
 * the dump, the netchan's walk of server messages and the spectator's
 * rings.  The variant pointer is handed down once per message, never
 * looked up per field.  A table entry names the state word it fills
 * (fields.h `slot`), so a variant's tables may order, narrow or leave out
 * fields.  Still fixed for all variants: the op numbers, the playerstate
 * arrays, the usercmd, the netchan's 64-command key rings, the
 * parse-entities ring and the meaning of configstring numbers.
 *
 * Three descriptors exist:
 *   - "protocol 68": Quake 3 1.29-1.32 (66, 67, 68; 69 and 70 are taken as
 *     the same), XOR, no checksum;
 *   - "ioquake3 71": no XOR, the checksum challenge ^ (sequence * challenge);
 *   - "OpenArena 71": the 68 wire format numbered 71.
 * The two 71s share a number: which one a session speaks is decided from
 * its first sequenced datagram (does the word after the header validate as
 * the checksum?), see netchan.c.  Adding a Quake 3-derived game is one more
 * descriptor (and its field tables) in variant.c; doc/games/quake3.md says
 * what Quake Live and Wolfenstein: Enemy Territory would need.
 *
 * The fixed-size state arrays (state.h, delta.h) are sized by the SG_Q3_*
 * maxima in proto.h and fields.h; a descriptor's limits must not exceed
 * them (variant.c checks this at compile time for the descriptors there,
 * sg_q3_variant_valid at run time for any).
 */
#ifndef SG_PROTOCOLS_Q3_VARIANT_H
#define SG_PROTOCOLS_Q3_VARIANT_H

#include <stdbool.h>

#include "protocols/q3/fields.h"

/* What a session's netchan speaks: a variant, or one of two states. */
enum sg_q3_wire {
    SG_Q3_WIRE_UNKNOWN, /* not decided yet */
    SG_Q3_WIRE_68,      /* protocols 66-68: XOR, no checksum */
    SG_Q3_WIRE_IOQ3_71, /* ioquake3 71: 32-bit checksum after the header, no XOR */
    SG_Q3_WIRE_OA_71,   /* OpenArena 71: the 68 wire format numbered 71 */
    SG_Q3_WIRE_HEADERS, /* a protocol slipgate does not decode: the header only */
};

struct sg_q3_variant {
    enum sg_q3_wire wire; /* its id */
    const char *name;     /* "protocol 68", "ioquake3 71", ... (logs, inspect) */

    /* protocol numbers: a connect / challengeResponse in [min, max] may be it */
    int protocol;     /* its own number (what its demos and connects carry) */
    int protocol_min; /* lowest number taken as this variant */
    int protocol_max; /* highest */

    /* netchan quirks */
    bool xor_payload; /* 1.32 XOR of the message after reassembly (SV/CL_Netchan_Encode) */
    bool checksum;    /* a 32-bit checksum after the header (ioquake3 71) */

    /* field tables: wire order; the count is at most SG_Q3_ES/PS_NUM_FIELDS */
    const struct sg_q3_netfield *entity_fields;
    int num_entity_fields;
    const struct sg_q3_netfield *player_fields;
    int num_player_fields;

    /* limits (each at most the SG_Q3_* maximum of proto.h) */
    int gentitynum_bits;       /* entity numbers on the wire */
    int max_gentities;         /* 1 << gentitynum_bits */
    int entitynum_none;        /* max_gentities - 1: ends a packet-entities list */
    int max_configstrings;     /* configstring indexes */
    int max_reliable_commands; /* ring of reliable commands (a power of two) */
    int packet_backup;         /* snapshots kept to delta from (a power of two) */

    /* demo files: demo_exts[p - protocol_min] is the extension a recording
     * of protocol p gets ("dm_68"); the first demo_read_exts of them are
     * those a demo reader takes by name */
    const char *const *demo_exts;
    int demo_read_exts;
};

extern const struct sg_q3_variant sg_q3_variant_68;
extern const struct sg_q3_variant sg_q3_variant_ioq3_71;
extern const struct sg_q3_variant sg_q3_variant_oa_71;

/* The descriptor of a wire id; NULL for UNKNOWN, HEADERS and anything else. */
const struct sg_q3_variant *sg_q3_variant_of(enum sg_q3_wire wire);

/*
 * The wire a handshake's protocol number decides: the one variant whose
 * range holds it; UNKNOWN where several do (71: decided by the first
 * sequenced datagram, see sg_q3_variant_by_checksum); HEADERS where none.
 */
enum sg_q3_wire sg_q3_variant_wire_for_protocol(int protocol);

/*
 * Among the variants that `protocol` may be (0: any), the one with
 * (checksum true) or without (false) the header checksum; UNKNOWN if none.
 * With several candidates the first in the table wins (68 before OA 71).
 */
enum sg_q3_wire sg_q3_variant_by_checksum(int protocol, bool checksum);

/*
 * The descriptor a decoder uses for a game of protocol `protocol` before
 * (or without) a netchan: the first variant whose range holds it, else
 * protocol 68's (the demo reader and capture decoder's default).
 */
const struct sg_q3_variant *sg_q3_variant_for_protocol(int protocol);

/*
 * Does `v` fit the decoder: field tables whose entries fill distinct state
 * words (slot) within the SG_Q3_*_NUM_FIELDS maxima, widths within 32
 * bits (0: float); limits within proto.h's
 * maxima, the rings' sizes powers of two, max_gentities = 1 << bits and
 * entitynum_none = max_gentities - 1?  The descriptors here all do (the
 * unit tests check); a new one should be checked the same way.
 */
bool sg_q3_variant_valid(const struct sg_q3_variant *v);

/* Does slipgate decode Quake 3 protocol `p` (does a variant's range hold it)? */
bool sg_q3_variant_decoded(int protocol);

/* The demo extension of a recording of protocol `protocol` ("dm_68"); a
 * number no variant holds gets the 68 variant's own.  Static. */
const char *sg_q3_variant_demo_ext(int protocol);

/* Every extension a Quake 3 demo reader takes by name, each once, in
 * protocol order, NULL-terminated (the descriptors' demo_read_exts). */
extern const char *const sg_q3_variant_read_exts[];

#endif
