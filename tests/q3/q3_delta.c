/*
 * q3_delta: unit tests of the entity / playerstate delta records and the
 * name tables.  argv[1] = case.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/error.h"
#include "protocols/q3/delta.h"
#include "protocols/q3/proto.h"
#include "q3_util.h"

#define V (&sg_q3_variant_68)

/* Small deterministic PRNG (xorshift32). */
static uint32_t rng = 0x12345678u;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

/* A random value that survives the field's wire width. */
static int32_t random_field(int bits)
{
    if (bits == 0) {
        switch (rnd() % 4) {
        case 0:
            return 0;
        case 1:
            return sg_q3_float_to_bits((float)((int)(rnd() % 8192) - 4096));
        case 2:
            return sg_q3_float_to_bits((float)(rnd() % 100000) / 7.0f);
        default:
            return sg_q3_float_to_bits((float)((int)(rnd() % 200000) - 100000));
        }
    }
    if (bits == 32 || bits == -32)
        return (int32_t)rnd();
    if (bits < 0) {
        int n = -bits;
        int32_t v = (int32_t)(rnd() % (1u << n)) - (1 << (n - 1));
        return v;
    }
    return (int32_t)(rnd() & ((1u << bits) - 1));
}

/* Write a record, read it back, check the bits and the applied state. */
static int entity_roundtrip(void)
{
    static uint8_t buf[4096];

    for (int iter = 0; iter < 5000; iter++) {
        struct sg_q3_entity from, to, got;
        struct sg_q3_entity_delta rec, back;
        struct sg_q3_msg m;
        bool force = rnd() & 1;
        int number;

        /* two random entities sharing some fields */
        memset(&from, 0, sizeof(from));
        for (int i = 0; i < SG_Q3_ES_NUM_FIELDS; i++)
            from.f[i] = rnd() % 3 ? 0 : random_field(sg_q3_entity_fields[i].bits);
        to = from;
        to.number = from.number = (int)(rnd() % (SG_Q3_MAX_GENTITIES - 1));
        for (int i = 0; i < SG_Q3_ES_NUM_FIELDS; i++)
            if (rnd() % 4 == 0)
                to.f[i] = random_field(sg_q3_entity_fields[i].bits);

        if (!sg_q3_delta_entity_make(V, &from, &to, force, &rec)) {
            CHECK(!force && memcmp(&from, &to, sizeof(from)) == 0);
            continue;
        }
        sg_q3_msg_init_write(&m, buf, sizeof(buf));
        sg_q3_delta_entity_write(&m, V, &rec);
        CHECK(!m.overflowed);
        size_t bits = m.bit, len = m.size;

        sg_q3_msg_init_read(&m, buf, len);
        number = sg_q3_msg_read_bits(&m, SG_Q3_GENTITYNUM_BITS);
        CHECK(number == to.number);
        CHECK(sg_q3_delta_entity_read(&m, V, number, &back) == 0);
        CHECK(m.bit == bits);
        CHECK(memcmp(&rec, &back, sizeof(rec)) == 0);
        sg_q3_delta_entity_apply(V, &from, &back, &got);
        CHECK(memcmp(&got, &to, sizeof(to)) == 0);
    }
    return 0;
}

static int player_roundtrip(void)
{
    static uint8_t buf[4096];

    for (int iter = 0; iter < 5000; iter++) {
        struct sg_q3_player from, to, got;
        struct sg_q3_player_delta rec, back;
        struct sg_q3_msg m;
        bool from_null = rnd() % 5 == 0;

        memset(&from, 0, sizeof(from));
        if (!from_null)
            for (int i = 0; i < SG_Q3_PS_NUM_FIELDS; i++)
                from.f[i] = rnd() % 3 ? 0 : random_field(sg_q3_player_fields[i].bits);
        to = from;
        for (int i = 0; i < SG_Q3_PS_NUM_FIELDS; i++)
            if (rnd() % 4 == 0)
                to.f[i] = random_field(sg_q3_player_fields[i].bits);
        for (int a = 0; a < SG_Q3_PS_NUM_ARRAYS; a++)
            for (int i = 0; i < SG_Q3_PS_ARRAY_LEN; i++)
                if (rnd() % 8 == 0)
                    to.a[a][i] = random_field(a == SG_Q3_PS_POWERUPS ? 32 : -16);

        sg_q3_delta_player_make(V, from_null ? NULL : &from, &to, &rec);
        sg_q3_msg_init_write(&m, buf, sizeof(buf));
        sg_q3_delta_player_write(&m, V, &rec);
        CHECK(!m.overflowed);
        size_t bits = m.bit, len = m.size;

        sg_q3_msg_init_read(&m, buf, len);
        CHECK(sg_q3_delta_player_read(&m, V, &back) == 0);
        CHECK(m.bit == bits);
        CHECK(memcmp(&rec, &back, sizeof(rec)) == 0);
        sg_q3_delta_player_apply(V, from_null ? NULL : &from, &back, &got);
        CHECK(memcmp(&got, &to, sizeof(to)) == 0);
    }
    return 0;
}

/* The form the game's writer picks for one float. */
static int form_of(float f)
{
    struct sg_q3_entity from, to;
    struct sg_q3_entity_delta rec;

    memset(&from, 0, sizeof(from));
    from.f[SG_Q3_ES_ORIGIN0] = sg_q3_float_to_bits(1.25f); /* so 0.0 differs */
    to = from;
    to.f[SG_Q3_ES_ORIGIN0] = sg_q3_float_to_bits(f);
    if (!sg_q3_delta_entity_make(V, &from, &to, false, &rec))
        return -1;
    return rec.form[SG_Q3_ES_ORIGIN0];
}

static int float_forms(void)
{
    CHECK(form_of(0.0f) == SG_Q3_FORM_ZERO);
    CHECK(form_of(-0.0f) == SG_Q3_FORM_ZERO);
    CHECK(form_of(5.0f) == SG_Q3_FORM_INT);
    CHECK(form_of(-4096.0f) == SG_Q3_FORM_INT);
    CHECK(form_of(4095.0f) == SG_Q3_FORM_INT);
    CHECK(form_of(4096.0f) == SG_Q3_FORM_FULL);
    CHECK(form_of(-4097.0f) == SG_Q3_FORM_FULL);
    CHECK(form_of(0.5f) == SG_Q3_FORM_FULL);
    CHECK(form_of(NAN) == SG_Q3_FORM_FULL);
    CHECK(form_of(INFINITY) == SG_Q3_FORM_FULL);
    CHECK(form_of(1e10f) == SG_Q3_FORM_FULL);
    return 0;
}

/* The "no change" and remove forms and their sizes on the wire. */
static int special_forms(void)
{
    static uint8_t buf[64];
    struct sg_q3_entity e;
    struct sg_q3_entity_delta rec, back;
    struct sg_q3_msg m;

    memset(&e, 0, sizeof(e));
    e.number = 42;
    e.f[SG_Q3_ES_ETYPE] = 3;
    CHECK(!sg_q3_delta_entity_make(V, &e, &e, false, &rec));
    CHECK(sg_q3_delta_entity_make(V, &e, &e, true, &rec));
    CHECK(rec.kind == SG_Q3_ENT_NOCHANGE && rec.number == 42);
    sg_q3_msg_init_write(&m, buf, sizeof(buf));
    sg_q3_delta_entity_write(&m, V, &rec);
    CHECK(m.bit > 10); /* 10 number bits (2 raw + one code), then 0, 0 */
    sg_q3_msg_init_read(&m, buf, m.size);
    CHECK(sg_q3_msg_read_bits(&m, 10) == 42);
    CHECK(sg_q3_delta_entity_read(&m, V, 42, &back) == 0 && back.kind == SG_Q3_ENT_NOCHANGE);

    sg_q3_delta_entity_make_remove(V, 42, &rec);
    sg_q3_msg_init_write(&m, buf, sizeof(buf));
    sg_q3_delta_entity_write(&m, V, &rec);
    sg_q3_msg_init_read(&m, buf, m.size);
    CHECK(sg_q3_msg_read_bits(&m, 10) == 42);
    CHECK(sg_q3_delta_entity_read(&m, V, 42, &back) == 0 && back.kind == SG_Q3_ENT_REMOVE);
    {
        struct sg_q3_entity out;
        sg_q3_delta_entity_apply(V, &e, &back, &out);
        CHECK(out.number == SG_Q3_ENTITYNUM_NONE && out.f[SG_Q3_ES_ETYPE] == 0);
    }
    return 0;
}

/* An lc beyond the table is malformed. */
static int bad_lc(void)
{
    static uint8_t buf[64];
    struct sg_q3_entity_delta rec;
    struct sg_q3_player_delta ps;
    struct sg_q3_msg m;

    sg_q3_msg_init_write(&m, buf, sizeof(buf));
    sg_q3_msg_write_bits(&m, 0, 1);
    sg_q3_msg_write_bits(&m, 1, 1);
    sg_q3_msg_write_byte(&m, SG_Q3_ES_NUM_FIELDS + 1);
    sg_q3_msg_init_read(&m, buf, m.size + 4);
    CHECK(sg_q3_delta_entity_read(&m, V, 1, &rec) == SG_E_MALFORMED);

    sg_q3_msg_init_write(&m, buf, sizeof(buf));
    sg_q3_msg_write_byte(&m, SG_Q3_PS_NUM_FIELDS + 1);
    sg_q3_msg_init_read(&m, buf, m.size + 4);
    CHECK(sg_q3_delta_player_read(&m, V, &ps) == SG_E_MALFORMED);
    return 0;
}

static int names(void)
{
    CHECK(strcmp(sg_q3_svc_name(SG_Q3_SVC_SNAPSHOT), "svc_snapshot") == 0);
    CHECK(strcmp(sg_q3_svc_name(SG_Q3_SVC_EOF), "svc_EOF") == 0);
    CHECK(strcmp(sg_q3_svc_name(99), "svc_unknown") == 0);
    CHECK(strcmp(sg_q3_svc_name(-1), "svc_unknown") == 0);
    CHECK(strcmp(sg_q3_clc_name(SG_Q3_CLC_MOVE_NODELTA), "clc_moveNoDelta") == 0);
    CHECK(strcmp(sg_q3_entity_fields[SG_Q3_ES_FRAME].name, "frame") == 0);
    CHECK(sg_q3_entity_fields[SG_Q3_ES_EFLAGS].bits == 19);
    CHECK(strcmp(sg_q3_player_fields[SG_Q3_PS_LOOPSOUND].name, "loopSound") == 0);
    CHECK(sg_q3_player_fields[SG_Q3_PS_WEAPONTIME].bits == -16);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(void);
    } cases[] = {
        {"entity_roundtrip", entity_roundtrip},
        {"player_roundtrip", player_roundtrip},
        {"float_forms", float_forms},
        {"special_forms", special_forms},
        {"bad_lc", bad_lc},
        {"names", names},
    };

    for (size_t i = 0; argc > 1 && i < sizeof(cases) / sizeof(cases[0]); i++)
        if (strcmp(argv[1], cases[i].name) == 0)
            return cases[i].fn();
    fprintf(stderr, "unknown case\n");
    return 1;
}
