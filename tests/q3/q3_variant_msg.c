/*
 * q3_variant_msg: the message parser and writer follow the stream's
 * variant descriptor, not protocol 68's tables and limits.  A test-only
 * descriptor differs from 68 in every table and limit a descriptor holds:
 * the playerstate table in reverse wire order, the first two entity
 * fields swapped, 9-bit entity numbers, 512 configstrings, 32 reliable
 * commands, 16 snapshots of backup.  argv[1] = case:
 *
 *   valid       the shipped descriptors and the test one pass
 *               sg_q3_variant_valid; broken ones do not
 *   roundtrip   a gamestate and a snapshot recorded from a state in the
 *               test variant, written, parsed by a state in the test
 *               variant: the same state comes back (fields by meaning,
 *               entity numbers above 255), and writing the parsed
 *               messages gives the same bytes
 *   not68       the same bytes parsed with protocol 68's descriptor do
 *               not give the same state (or are refused)
 *   limits      configstring index, command window and snapshot backup
 *               are the variant's
 */
#include <errno.h>
#include <string.h>

#include "protocols/error.h"
#include "protocols/q3/demo.h"
#include "protocols/q3/state.h"
#include "protocols/q3/svmsg.h"
#include "protocols/q3/variant.h"
#include "q3_util.h"

static struct sg_q3_netfield test_players[SG_Q3_PS_NUM_FIELDS];
static struct sg_q3_netfield test_entities[SG_Q3_ES_NUM_FIELDS];
static const char *const test_exts[] = {"dm_99"};

static struct sg_q3_variant test_variant = {
    .wire = SG_Q3_WIRE_68,
    .name = "test variant",
    .protocol = 99,
    .protocol_min = 99,
    .protocol_max = 99,
    .xor_payload = true,
    .checksum = false,
    .entity_fields = test_entities,
    .num_entity_fields = SG_Q3_ES_NUM_FIELDS,
    .player_fields = test_players,
    .num_player_fields = SG_Q3_PS_NUM_FIELDS,
    .gentitynum_bits = 9,
    .max_gentities = 1 << 9,
    .entitynum_none = (1 << 9) - 1,
    .max_configstrings = 512,
    .max_reliable_commands = 32,
    .packet_backup = 16,
    .demo_exts = test_exts,
    .demo_read_exts = 1,
};

/* The test tables: 68's playerstate table reversed, its entity table with
 * pos.trTime (32-bit int) and pos.trBase[0] (float) swapped. */
static void make_tables(void)
{
    for (int i = 0; i < SG_Q3_PS_NUM_FIELDS; i++)
        test_players[i] = sg_q3_player_fields[SG_Q3_PS_NUM_FIELDS - 1 - i];
    memcpy(test_entities, sg_q3_entity_fields, sizeof(test_entities));
    test_entities[0] = sg_q3_entity_fields[1];
    test_entities[1] = sg_q3_entity_fields[0];
}

static uint8_t gs_bytes[SG_Q3_MAX_MSGLEN], snap_bytes[SG_Q3_MAX_MSGLEN], again[SG_Q3_MAX_MSGLEN];
static int gs_len, snap_len;

/* An entity with some fields set (by meaning). */
static void fill_entity(struct sg_q3_entity *e, int number, int k)
{
    memset(e, 0, sizeof(*e));
    e->number = number;
    e->f[SG_Q3_ES_POS_TRTIME] = 1000 + k;
    e->f[SG_Q3_ES_POS_TRBASE0] = sg_q3_float_to_bits(12.0f + (float)k);
    e->f[SG_Q3_ES_ORIGIN1] = sg_q3_float_to_bits(0.5f * (float)k);
    e->f[SG_Q3_ES_ETYPE] = 3;
    e->f[SG_Q3_ES_MODELINDEX] = 40 + k;
    e->f[SG_Q3_ES_FRAME] = 7 * k;
}

/*
 * A source state in the test variant (two configstrings, baselines of
 * entities 5 and 300, a snapshot holding entities 5 and 300 changed from
 * their baselines), recorded as a gamestate message and a snapshot
 * message, each written to bytes.
 */
static int encode_test_stream(void)
{
    struct sg_q3_state *src = sg_q3_state_create_variant(&test_variant);
    struct sg_q3_snapshot frame;
    struct sg_q3_svmsg msg;
    static const int nums[2] = {5, 300};

    CHECK(src != NULL);
    sg_q3_svmsg_init(&msg);
    CHECK(sg_q3_state_set_configstring(src, 0, "\\sv_hostname\\variant", 20) == 0);
    CHECK(sg_q3_state_set_configstring(src, 511, "last", 4) == 0);
    for (int i = 0; i < 2; i++) {
        fill_entity(&src->baselines[nums[i]], nums[i], i);
        src->baseline_used[nums[i] >> 3] |= (uint8_t)(1u << (nums[i] & 7));
    }
    src->client_num = 2;
    src->checksum_feed = 77;
    src->have_gamestate = true;
    CHECK(sg_q3_record_gamestate(src, 4, &msg) == 0);
    CHECK(msg.variant == &test_variant);
    gs_len = sg_q3_write_server_message(&msg, gs_bytes, sizeof(gs_bytes));
    CHECK(gs_len > 0);

    /* the frame: its entities in the ring, its playerstate by meaning */
    memset(&frame, 0, sizeof(frame));
    frame.valid = true;
    frame.message_num = 2;
    frame.delta_num = -1;
    frame.server_time = 5000;
    frame.parse_entities_num = src->parse_entities_num;
    for (int i = 0; i < 2; i++) {
        struct sg_q3_entity e;

        fill_entity(&e, nums[i], i + 10);
        CHECK(sg_q3__state_push_new(src, &e) == 0);
        frame.num_entities++;
    }
    frame.ps.f[SG_Q3_PS_COMMANDTIME] = 4990;
    frame.ps.f[SG_Q3_PS_ORIGIN0] = sg_q3_float_to_bits(-128.25f);
    frame.ps.f[SG_Q3_PS_PM_FLAGS] = 0x1234;
    frame.ps.f[SG_Q3_PS_CLIENTNUM] = 2;
    frame.ps.f[SG_Q3_PS_WEAPON] = 5;
    frame.ps.f[SG_Q3_PS_LOOPSOUND] = 9;
    frame.ps.a[SG_Q3_PS_STATS][0] = 100;
    sg_q3_svmsg_reset(&msg);
    CHECK(sg_q3_record_snapshot(src, &frame, NULL, &msg) == 0);
    CHECK(msg.variant == &test_variant);
    snap_len = sg_q3_write_server_message(&msg, snap_bytes, sizeof(snap_bytes));
    CHECK(snap_len > 0);

    /* the same message written in 68's variant is other bytes */
    msg.variant = &sg_q3_variant_68;
    CHECK(sg_q3_write_server_message(&msg, again, sizeof(again)) != snap_len ||
          memcmp(again, snap_bytes, (size_t)snap_len) != 0);
    sg_q3_svmsg_finish(&msg);
    sg_q3_state_destroy(src);
    return 0;
}

/* Parse both messages with `v`; 0 when both parse, else the first error. */
static int decode_stream(const struct sg_q3_variant *v, struct sg_q3_state **out)
{
    struct sg_q3_state *st = sg_q3_state_create_variant(v);
    struct sg_q3_svmsg msg;
    int err, n;

    sg_q3_svmsg_init(&msg);
    *out = st;
    if (!st)
        return -ENOMEM;
    err = sg_q3_parse_server_message(st, 1, gs_bytes, (size_t)gs_len, &msg);
    if (err == 0 && msg.variant != v)
        err = -EINVAL;
    /* the parsed message writes back to the same bytes */
    if (err == 0 && ((n = sg_q3_write_server_message(&msg, again, sizeof(again))) != gs_len ||
                     memcmp(again, gs_bytes, (size_t)gs_len) != 0))
        err = -EBADMSG;
    if (err == 0)
        err = sg_q3_parse_server_message(st, 2, snap_bytes, (size_t)snap_len, &msg);
    if (err == 0 && ((n = sg_q3_write_server_message(&msg, again, sizeof(again))) != snap_len ||
                     memcmp(again, snap_bytes, (size_t)snap_len) != 0))
        err = -EBADMSG;
    sg_q3_svmsg_finish(&msg);
    return err;
}

/* Does `st` hold what encode_test_stream recorded? */
static bool holds_test_stream(const struct sg_q3_state *st)
{
    const struct sg_q3_snapshot *s = sg_q3_state_latest(st);
    static const int nums[2] = {5, 300};

    if (!s || s->num_entities != 2 || strcmp(sg_q3_state_configstring(st, 511), "last") != 0 ||
        st->client_num != 2 || st->checksum_feed != 77)
        return false;
    if (s->ps.f[SG_Q3_PS_PM_FLAGS] != 0x1234 || s->ps.f[SG_Q3_PS_COMMANDTIME] != 4990 ||
        s->ps.f[SG_Q3_PS_ORIGIN0] != sg_q3_float_to_bits(-128.25f) ||
        s->ps.f[SG_Q3_PS_CLIENTNUM] != 2 || s->ps.f[SG_Q3_PS_WEAPON] != 5 ||
        s->ps.f[SG_Q3_PS_LOOPSOUND] != 9 || s->ps.a[SG_Q3_PS_STATS][0] != 100)
        return false;
    for (int i = 0; i < 2; i++) {
        struct sg_q3_entity want, base;

        fill_entity(&want, nums[i], i + 10);
        fill_entity(&base, nums[i], i);
        if (memcmp(sg_q3_state_entity(st, s, i), &want, sizeof(want)) != 0 ||
            !sg_q3_state_baseline_used(st, nums[i]) ||
            memcmp(&st->baselines[nums[i]], &base, sizeof(base)) != 0)
            return false;
    }
    return true;
}

static int valid(void)
{
    struct sg_q3_variant bad = test_variant;

    CHECK(sg_q3_variant_valid(&sg_q3_variant_68));
    CHECK(sg_q3_variant_valid(&sg_q3_variant_ioq3_71));
    CHECK(sg_q3_variant_valid(&sg_q3_variant_oa_71));
    CHECK(sg_q3_variant_valid(&test_variant));
    test_players[3].slot = test_players[4].slot; /* two entries fill one word */
    CHECK(!sg_q3_variant_valid(&test_variant));
    make_tables();
    bad.gentitynum_bits = 11; /* beyond the state's arrays */
    bad.max_gentities = 1 << 11;
    bad.entitynum_none = (1 << 11) - 1;
    CHECK(!sg_q3_variant_valid(&bad));
    bad = test_variant;
    bad.packet_backup = 24;
    CHECK(!sg_q3_variant_valid(&bad));
    return 0;
}

static int roundtrip(void)
{
    struct sg_q3_state *st;

    CHECK(encode_test_stream() == 0);
    CHECK(decode_stream(&test_variant, &st) == 0);
    CHECK(holds_test_stream(st));
    sg_q3_state_destroy(st);
    return 0;
}

static int not68(void)
{
    struct sg_q3_state *st;
    int err;

    CHECK(encode_test_stream() == 0);
    err = decode_stream(&sg_q3_variant_68, &st);
    CHECK(st != NULL);
    CHECK(err != 0 || !holds_test_stream(st));
    sg_q3_state_destroy(st);
    return 0;
}

/* A gamestate with one configstring at `index`, in 68's variant, as bytes. */
static int configstring_bytes(int index, uint8_t *out)
{
    struct sg_q3_svmsg msg;
    int opi, it, n;

    sg_q3_svmsg_init(&msg);
    opi = sg_q3_svmsg_add_op(&msg, SG_Q3_SVC_GAMESTATE);
    it = sg_q3_svmsg_add_item(&msg);
    if (opi < 0 || it < 0)
        return -ENOMEM;
    msg.items[it].op = SG_Q3_SVC_CONFIGSTRING;
    msg.items[it].index = (uint16_t)index;
    if (sg_q3_svmsg_add_bytes(&msg, "x", 1, &msg.items[it].text) < 0)
        return -ENOMEM;
    msg.ops[opi].u.gamestate.first_item = 0;
    msg.ops[opi].u.gamestate.num_items = 1;
    n = sg_q3_write_server_message(&msg, out, SG_Q3_MAX_MSGLEN);
    sg_q3_svmsg_finish(&msg);
    return n;
}

static int limits(void)
{
    struct sg_q3_state *t = sg_q3_state_create_variant(&test_variant);
    struct sg_q3_state *s68 = sg_q3_state_create(68);
    struct sg_q3_svmsg msg;
    int n = configstring_bytes(600, gs_bytes);

    CHECK(t && s68 && n > 0);
    sg_q3_svmsg_init(&msg);

    /* configstring 600: beyond the test variant's 512, within 68's 1024 */
    CHECK(sg_q3_parse_server_message(t, 1, gs_bytes, (size_t)n, &msg) == SG_E_MALFORMED);
    CHECK(sg_q3_parse_server_message(s68, 1, gs_bytes, (size_t)n, &msg) == 0);
    CHECK(strcmp(sg_q3_state_configstring(s68, 600), "x") == 0);
    CHECK(sg_q3_state_set_configstring(t, 600, "x", 1) == -EINVAL);

    /* the command window: 32 commands in the test variant, 64 in 68 */
    CHECK(sg_q3_state_server_command(t, 100, "print a") == 1);
    CHECK(sg_q3_state_server_command(s68, 100, "print a") == 1);
    CHECK(sg_q3_state_server_command(t, 140, "print b") == 1);
    CHECK(sg_q3_state_server_command(s68, 140, "print b") == 1);
    CHECK(sg_q3_state_command(t, 100) == NULL);
    CHECK(sg_q3_state_command(s68, 100) != NULL);

    /* the snapshot ring: 16 in the test variant (message 17 shares 1's slot) */
    t->snapshots[1] = (struct sg_q3_snapshot){.valid = true, .message_num = 17};
    s68->snapshots[17] = (struct sg_q3_snapshot){.valid = true, .message_num = 17};
    CHECK(sg_q3_state_snapshot(t, 17) == &t->snapshots[1]);
    CHECK(sg_q3_state_snapshot(s68, 17) == &s68->snapshots[17]);
    sg_q3_svmsg_finish(&msg);
    sg_q3_state_destroy(t);
    sg_q3_state_destroy(s68);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(void);
    } cases[] = {
        {"valid", valid},
        {"roundtrip", roundtrip},
        {"not68", not68},
        {"limits", limits},
    };

    make_tables();
    for (size_t i = 0; argc > 1 && i < sizeof(cases) / sizeof(cases[0]); i++)
        if (strcmp(argv[1], cases[i].name) == 0)
            return cases[i].fn();
    fprintf(stderr, "unknown case\n");
    return 1;
}
