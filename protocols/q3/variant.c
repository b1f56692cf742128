/*
 * The Quake 3 variant descriptors and their lookups (see variant.h).
 */
#include "protocols/q3/variant.h"

#include <stddef.h>
#include <stdint.h>

#include "protocols/q3/proto.h"

/* Every descriptor here fits the fixed-size state (state.h, delta.h). */
#define FITS(bits, cs, cmds, backup)                                                         \
    ((bits) <= SG_Q3_GENTITYNUM_BITS && (cs) <= SG_Q3_MAX_CONFIGSTRINGS &&                   \
     (cmds) <= SG_Q3_MAX_RELIABLE_COMMANDS && (backup) <= SG_Q3_PACKET_BACKUP)

/* id's 1.29-1.32 limits (qcommon.h, q_shared.h), shared by ioquake3 and OpenArena. */
#define Q3_LIMITS                                                                            \
    .entity_fields = sg_q3_entity_fields, .num_entity_fields = SG_Q3_ES_NUM_FIELDS,           \
    .player_fields = sg_q3_player_fields, .num_player_fields = SG_Q3_PS_NUM_FIELDS,           \
    .gentitynum_bits = 10, .max_gentities = 1 << 10, .entitynum_none = (1 << 10) - 1,         \
    .max_configstrings = 1024, .max_reliable_commands = 64, .packet_backup = 32
_Static_assert(FITS(10, 1024, 64, 32), "Quake 3 limits exceed the state's arrays");

static const char *const exts_68[] = {"dm_66", "dm_67", "dm_68", "dm_69", "dm_70"};
static const char *const exts_71[] = {"dm_71"};

const struct sg_q3_variant sg_q3_variant_68 = {
    .wire = SG_Q3_WIRE_68,
    .name = "protocol 68",
    .protocol = 68,
    .protocol_min = 66,
    .protocol_max = 70,
    .xor_payload = true,
    .checksum = false,
    Q3_LIMITS,
    .demo_exts = exts_68,
    .demo_read_exts = 3,
};

const struct sg_q3_variant sg_q3_variant_ioq3_71 = {
    .wire = SG_Q3_WIRE_IOQ3_71,
    .name = "ioquake3 71",
    .protocol = 71,
    .protocol_min = 71,
    .protocol_max = 71,
    .xor_payload = false,
    .checksum = true,
    Q3_LIMITS,
    .demo_exts = exts_71,
    .demo_read_exts = 1,
};

const struct sg_q3_variant sg_q3_variant_oa_71 = {
    .wire = SG_Q3_WIRE_OA_71,
    .name = "OpenArena 71",
    .protocol = 71,
    .protocol_min = 71,
    .protocol_max = 71,
    .xor_payload = true,
    .checksum = false,
    Q3_LIMITS,
    .demo_exts = exts_71,
    .demo_read_exts = 1,
};

/* In the order ties are broken (sg_q3_variant_by_checksum). */
static const struct sg_q3_variant *const variants[] = {
    &sg_q3_variant_68,
    &sg_q3_variant_ioq3_71,
    &sg_q3_variant_oa_71,
};
#define NVARIANTS (sizeof(variants) / sizeof(variants[0]))

const char *const sg_q3_variant_read_exts[] = {"dm_66", "dm_67", "dm_68", "dm_71", NULL};

static bool holds(const struct sg_q3_variant *v, int protocol)
{
    return protocol >= v->protocol_min && protocol <= v->protocol_max;
}

const struct sg_q3_variant *sg_q3_variant_of(enum sg_q3_wire wire)
{
    for (size_t i = 0; i < NVARIANTS; i++)
        if (variants[i]->wire == wire)
            return variants[i];
    return NULL;
}

enum sg_q3_wire sg_q3_variant_wire_for_protocol(int protocol)
{
    const struct sg_q3_variant *found = NULL;

    for (size_t i = 0; i < NVARIANTS; i++) {
        if (!holds(variants[i], protocol))
            continue;
        if (found)
            return SG_Q3_WIRE_UNKNOWN; /* shared number: the datagrams decide */
        found = variants[i];
    }
    return found ? found->wire : SG_Q3_WIRE_HEADERS;
}

enum sg_q3_wire sg_q3_variant_by_checksum(int protocol, bool checksum)
{
    for (size_t i = 0; i < NVARIANTS; i++)
        if ((!protocol || holds(variants[i], protocol)) && variants[i]->checksum == checksum)
            return variants[i]->wire;
    return SG_Q3_WIRE_UNKNOWN;
}

const struct sg_q3_variant *sg_q3_variant_for_protocol(int protocol)
{
    for (size_t i = 0; i < NVARIANTS; i++)
        if (holds(variants[i], protocol))
            return variants[i];
    return &sg_q3_variant_68;
}

bool sg_q3_variant_decoded(int protocol)
{
    for (size_t i = 0; i < NVARIANTS; i++)
        if (holds(variants[i], protocol))
            return true;
    return false;
}

/* Does `table` (count entries) fill distinct state words below `words`, in legal widths? */
static bool table_valid(const struct sg_q3_netfield *table, int count, int words)
{
    uint64_t seen = 0;

    _Static_assert(SG_Q3_ES_NUM_FIELDS <= 64 && SG_Q3_PS_NUM_FIELDS <= 64, "slot mask too small");
    if (!table || count < 0 || count > words)
        return false;
    for (int i = 0; i < count; i++) {
        int slot = table[i].slot, bits = table[i].bits;

        if (slot < 0 || slot >= words || (seen >> slot) & 1 || bits < -32 || bits > 32 ||
            !table[i].name)
            return false;
        seen |= (uint64_t)1 << slot;
    }
    return true;
}

static bool power_of_two(int n)
{
    return n > 0 && (n & (n - 1)) == 0;
}

bool sg_q3_variant_valid(const struct sg_q3_variant *v)
{
    if (!v || !table_valid(v->entity_fields, v->num_entity_fields, SG_Q3_ES_NUM_FIELDS) ||
        !table_valid(v->player_fields, v->num_player_fields, SG_Q3_PS_NUM_FIELDS))
        return false;
    if (v->gentitynum_bits < 1 || v->gentitynum_bits > SG_Q3_GENTITYNUM_BITS ||
        v->max_gentities != 1 << v->gentitynum_bits || v->entitynum_none != v->max_gentities - 1)
        return false;
    if (v->max_configstrings < 1 || v->max_configstrings > SG_Q3_MAX_CONFIGSTRINGS)
        return false;
    if (!power_of_two(v->max_reliable_commands) ||
        v->max_reliable_commands > SG_Q3_MAX_RELIABLE_COMMANDS)
        return false;
    if (!power_of_two(v->packet_backup) || v->packet_backup > SG_Q3_PACKET_BACKUP)
        return false;
    return v->protocol_min <= v->protocol && v->protocol <= v->protocol_max && v->demo_exts &&
           v->demo_read_exts <= v->protocol_max - v->protocol_min + 1;
}

const char *sg_q3_variant_demo_ext(int protocol)
{
    for (size_t i = 0; i < NVARIANTS; i++)
        if (holds(variants[i], protocol))
            return variants[i]->demo_exts[protocol - variants[i]->protocol_min];
    return sg_q3_variant_68.demo_exts[sg_q3_variant_68.protocol - sg_q3_variant_68.protocol_min];
}
