/*
 * NetQuake messages (protocols/nq/parse.c): every block of the two demos
 * in $SG_TESTDATA/nq/demos (protocols 15 and 666) and of a real
 * quakespasm/DarkPlaces session's client demo is decoded with no error
 * and re-encoded to the same bytes; hand-built messages check what the
 * demos do not hold (the 666 extension bits, 999's coordinate sizes, the
 * client's messages, malformed input).
 */
#include "protocols/nq/nq.h"

#include "protocols/error.h"
#include "tests/unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct sg_nq_parsed parsed;

static void teardown(void)
{
    sg_nq_parsed_free(&parsed);
}

/* Parse `len` bytes and write them back: they must come back the same. */
static int roundtrip(enum sg_dir dir, struct sg_nq_proto *p, const uint8_t *d, size_t len)
{
    uint8_t *copy = unit_exact_copy(d, len);
    uint8_t out[4096];
    struct sg_bmsg_writer w;
    int err = sg_nq_parse(dir, p, copy, len, &parsed);

    if (err != SG_E_OVERFLOW && len <= sizeof(out)) {
        sg_bmsg_writer_init(&w, out, sizeof(out));
        CHECK_EQ(sg_nq_write(&parsed, NULL, &w), 0);
        CHECKF(w.len == len && memcmp(out, d, len) == 0, "rebuilt %zu bytes of %zu", w.len, len);
    }
    free(copy);
    return err;
}

static const struct sg_field *field(uint32_t msg, const char *name)
{
    const struct sg_fmsg *m = &parsed.msgs[msg];

    for (uint32_t k = 0; k < m->count; k++)
        if (strcmp(parsed.fields[m->first + k].name, name) == 0)
            return &parsed.fields[m->first + k];
    return NULL;
}

/* ---- the demos ---- */

struct demo_stats {
    uint64_t blocks, msgs, updates, clientdata, sounds, serverinfo, errors, differ;
    int32_t protocol;
};

static void demo(const char *rel, struct demo_stats *st)
{
    char path[1024];
    const char *td = getenv("SG_TESTDATA");
    size_t len, pos = 0;
    uint8_t *file, *out = NULL;
    size_t out_cap = 0;
    struct sg_nq_proto p;

    memset(st, 0, sizeof(*st));
    CHECK(td != NULL);
    if (!td)
        return;
    snprintf(path, sizeof(path), "%s/%s", td, rel);
    file = unit_slurp(path, &len);
    CHECKF(file != NULL, "%s", path);
    if (!file)
        return;
    sg_nq_proto_set(&p, SG_NQ_PROTOCOL_NETQUAKE, 0);
    while (pos < len && file[pos] != '\n')
        pos++;
    pos++; /* the cd-track line */
    while (pos + 16 <= len) {
        uint32_t n = sg_le32(file + pos);
        struct sg_bmsg_writer w;
        uint8_t *msg;
        pos += 16;
        CHECKF(n <= len - pos, "block %llu runs past the file", (unsigned long long)st->blocks);
        if (n > len - pos)
            break;
        msg = unit_exact_copy(file + pos, n);
        if (sg_nq_parse(SG_DIR_S2C, &p, msg, n, &parsed) < 0)
            st->errors++;
        if (out_cap < n + 1) {
            out = realloc(out, n + 1);
            out_cap = n + 1;
        }
        sg_bmsg_writer_init(&w, out, out_cap);
        if (sg_nq_write(&parsed, NULL, &w) < 0 || w.len != n || memcmp(out, msg, n) != 0)
            st->differ++;
        for (uint32_t i = 0; i < parsed.nmsgs; i++) {
            int op = parsed.msgs[i].op;
            st->updates += op >= 128;
            st->clientdata += op == 15;
            st->sounds += op == 6;
            st->serverinfo += op == 11;
            CHECKF(!parsed.msgs[i].unparsed, "block %llu: %s unparsed",
                   (unsigned long long)st->blocks, sg_nq_svc_name(op));
        }
        st->msgs += parsed.nmsgs;
        st->blocks++;
        free(msg);
        pos += n;
    }
    CHECK_EQ(pos, len); /* no partial block at the end */
    st->protocol = p.protocol;
    free(out);
    free(file);
}

static void check_demo(const char *rel, int32_t protocol, bool sounds)
{
    struct demo_stats st;

    demo(rel, &st);
    CHECKF(st.blocks > 100, "%s: %llu blocks", rel, (unsigned long long)st.blocks);
    CHECK_EQ(st.errors, 0);
    CHECK_EQ(st.differ, 0);
    CHECK_EQ(st.protocol, protocol);
    CHECK_EQ(st.serverinfo, 1);
    CHECK(st.updates > 0 && st.clientdata > 0);
    CHECK(!sounds || st.sounds > 0);
    CHECK(st.msgs > st.blocks);
}

static void case_demo_15(void)
{
    check_demo("nq/demos/vektar_demo1.dem", 15, true);
}

static void case_demo_666(void)
{
    check_demo("nq/demos/vgio_test.dem", 666, false);
}

static void case_session_demo(void)
{
    check_demo("nq/sessions/quakespasm_darkplaces/client_demo.dem", 15, false);
}

/* ---- hand-built messages ---- */

/* A 666 entity update: U_MOREBITS | U_EXTEND1 bring alpha and frame2 (bytes
 * that protocol 15 does not read). */
static void case_fitz_update(void)
{
    /* op = 0x80 | U_MOREBITS | U_ORIGIN1; morebits: U_EXTEND1 >> 8; extend1: (U_ALPHA | U_FRAME2) >> 16 */
    static const uint8_t m[] = {0x83, 0x80, 0x03, 0x07, 0x10, 0x00, 0x40, 0x02};
    struct sg_nq_proto p;

    sg_nq_proto_set(&p, SG_NQ_PROTOCOL_FITZQUAKE, 0);
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, m, sizeof(m)), 0);
    CHECK_EQ(parsed.nmsgs, 1);
    CHECK(field(0, "entity") && field(0, "entity")->raw == 7);
    CHECK(field(0, "origin0") && field(0, "origin0")->raw == 0x10);
    CHECK(field(0, "alpha") && field(0, "alpha")->raw == 0x40);
    CHECK(field(0, "frame2") && field(0, "frame2")->raw == 2);
    /* Protocol 15 reads no extension byte: entity 3, then the rest are other messages. */
    sg_nq_proto_set(&p, SG_NQ_PROTOCOL_NETQUAKE, 0);
    sg_nq_parse(SG_DIR_S2C, &p, m, sizeof(m), &parsed);
    CHECK(parsed.nmsgs > 1);
    CHECK(field(0, "entity") && field(0, "entity")->raw == 3);
    CHECK(field(0, "alpha") == NULL);
}

/* serverinfo 999 with PRFL_FLOATCOORD: later coordinates are floats. */
static void case_rmq_flags(void)
{
    uint8_t m[64];
    size_t n = 0;
    struct sg_nq_proto p;

    sg_nq_proto_set(&p, SG_NQ_PROTOCOL_NETQUAKE, 0);
    m[n++] = 11;
    memcpy(m + n, "\xe7\x03\x00\x00", 4); /* 999 */
    n += 4;
    memcpy(m + n, "\x10\x00\x00\x00", 4); /* PRFL_FLOATCOORD */
    n += 4;
    memcpy(m + n, "\x08\x01lvl\0maps/e1m1.bsp\0\0snd.wav\0\0", 30);
    n += 30;
    m[n++] = 19; /* damage: armor, blood, three float coords */
    m[n++] = 1;
    m[n++] = 2;
    memcpy(m + n, "\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40", 12);
    n += 12;
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, m, n), 0);
    CHECK_EQ(p.protocol, 999);
    CHECK_EQ(p.coord, SG_BMSG_COORD_FLOAT);
    CHECK(parsed.serverinfo && strcmp(parsed.level, "e1m1") == 0);
    CHECK_EQ(parsed.nmsgs, 2);
    CHECK(field(1, "origin2") && field(1, "origin2")->raw == 0x40400000u);
}

/* Sounds with the 666 large entity and large sound bits; baseline2 with a large model. */
static void case_fitz_sound_baseline(void)
{
    static const uint8_t m[] = {
        6,    0x19, 0x80, 0x10, 0x02, 0x03, 0x01, 0x01, 1, 0, 2, 0, 3, 0, /* sound */
        42, 5, 0, 0x05, 0x2c, 0x01, 7, 0, 0, 1, 0, 9, 2, 0, 9, 3, 0, 9, 0x80, /* baseline2 */
    };
    struct sg_nq_proto p;

    sg_nq_proto_set(&p, SG_NQ_PROTOCOL_FITZQUAKE, 0);
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, m, sizeof(m)), 0);
    CHECK_EQ(parsed.nmsgs, 2);
    CHECK(field(0, "volume") && field(0, "volume")->raw == 0x80);
    CHECK(field(0, "entity") && field(0, "entity")->raw == 0x0210);
    CHECK(field(0, "sound") && field(0, "sound")->raw == 0x0101);
    CHECK(field(1, "model") && field(1, "model")->raw == 300);
    CHECK(field(1, "alpha") && field(1, "alpha")->raw == 0x80);
}

/* clc_move: byte angles in 15, short angles in 666; string commands carry their text. */
static void case_client(void)
{
    static const uint8_t move15[] = {3, 0, 0, 0x80, 0x3f, 1, 2, 3, 0xc8, 0, 0, 0, 0, 0, 1, 0,
                                     4, 's', 'a', 'y', ' ', 'h', 'i', 0, 1, 2};
    static const uint8_t move666[] = {3, 0, 0, 0x80, 0x3f, 1, 0, 2, 0, 3, 0, 0xc8, 0, 0, 0, 0, 0,
                                      1, 0};
    struct sg_nq_proto p;

    sg_nq_proto_set(&p, SG_NQ_PROTOCOL_NETQUAKE, 0);
    CHECK_EQ(roundtrip(SG_DIR_C2S, &p, move15, sizeof(move15)), 0);
    CHECK_EQ(parsed.nmsgs, 4);
    CHECK(parsed.msgs[0].op == 3 && parsed.msgs[0].count == 9);
    CHECK(field(0, "forward") && field(0, "forward")->raw == 200);
    CHECK(parsed.msgs[1].op == 4 && parsed.msgs[1].text == 0);
    CHECK(field(1, "text") && field(1, "text")->len == 6);
    CHECK(parsed.disconnect);
    CHECK(strcmp(sg_nq_clc_name(parsed.msgs[2].op), "clc_nop") == 0);
    sg_nq_proto_set(&p, SG_NQ_PROTOCOL_FITZQUAKE, 0);
    CHECK_EQ(roundtrip(SG_DIR_C2S, &p, move666, sizeof(move666)), 0);
    CHECK_EQ(parsed.nmsgs, 1);
    CHECK(field(0, "angle1") && field(0, "angle1")->num == SG_BMSG_ANGLE16 &&
          field(0, "angle1")->raw == 2);
    /* The 666 move read as 15 leaves bytes that are no message. */
    sg_nq_proto_set(&p, SG_NQ_PROTOCOL_NETQUAKE, 0);
    CHECK(sg_nq_parse(SG_DIR_C2S, &p, move666, sizeof(move666), &parsed) < 0);
}

/* Bad opcodes and temp entities are errors whose rest still re-encodes; a cut message overflows. */
static void case_malformed(void)
{
    static const uint8_t bad[] = {8, 'h', 'i', 0, 0, 9, 9, 9};
    static const uint8_t te[] = {23, 99, 1, 2, 3};
    static const uint8_t cut[] = {8, 'h', 'i', 0, 7, 0, 0};
    static const uint8_t print[] = {8, 'h', 'i', '\n', 0, 26, 'c', 0};
    struct sg_nq_proto p;

    sg_nq_proto_set(&p, SG_NQ_PROTOCOL_NETQUAKE, 0);
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, bad, sizeof(bad)), SG_E_MALFORMED);
    CHECK(parsed.nmsgs == 2 && parsed.msgs[1].unparsed);
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, te, sizeof(te)), SG_E_MALFORMED);
    CHECK_EQ(sg_nq_parse(SG_DIR_S2C, &p, cut, sizeof(cut), &parsed), SG_E_OVERFLOW);
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, print, sizeof(print)), 0);
    CHECK(parsed.nmsgs == 2 && parsed.msgs[0].text == 0 && parsed.msgs[1].text == 0);
    CHECK(strcmp(sg_nq_svc_name(parsed.msgs[1].op), "svc_centerprint") == 0);
    /* A protocol not decoded: the rest after its serverinfo is relayed as one field. */
    {
        static const uint8_t dp[] = {11, 0xb7, 0x0d, 0, 0, 1, 2, 3, 8, 'x', 0};
        CHECK_EQ(roundtrip(SG_DIR_S2C, &p, dp, sizeof(dp)), 0);
        CHECK_EQ(p.protocol, 3511);
        CHECK_EQ(parsed.unsupported_op, 11);
        CHECK(parsed.msgs[0].unparsed);
    }
}

/* ---- DarkPlaces on 15 ---- */

/* Every message of DarkPlaces' own that its server sends on 15 (its opcodes
 * past id's, its temp entity types, the sound speed bit): decoded into
 * fields with the Quake protocol's sizes, rebuilt byte-identical. */
static void case_dp15_messages(void)
{
    static const uint8_t msg[] = {
        /* showlmp */ 35, 97, 0, 112, 105, 99, 0, 10, 0, 20, 0,
        /* hidelmp */ 36, 97, 0,
        /* downloaddata */ 50, 0, 0, 1, 0, 3, 0, 120, 121, 122,
        /* updatestatubyte */ 51, 5, 7,
        /* effect */ 52, 1, 0, 1, 0, 1, 0, 1, 2, 3, 4,
        /* effect2 */ 53, 1, 0, 1, 0, 1, 0, 2, 1, 3, 0, 4, 5,
        /* precache */ 54, 1, 128, 97, 0,
        /* spawnbaseline2 */ 55, 9, 0, 0, 1, 2, 0, 0, 0, 1, 0, 64, 1, 0, 64, 1, 0, 64,
        /* spawnstatic2 */ 56, 0, 1, 2, 0, 0, 0, 1, 0, 64, 1, 0, 64, 1, 0, 64,
        /* spawnstaticsound2 */ 59, 1, 0, 1, 0, 1, 0, 0, 1, 255, 64,
        /* trailparticles */ 60, 3, 0, 4, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0,
        /* pointparticles */ 61, 4, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 7, 0,
        /* pointparticles1 */ 62, 4, 0, 1, 0, 1, 0, 1, 0,
        /* sound with speed */ 6, 32, 64, 31, 11, 0, 5, 1, 0, 1, 0, 1, 0,
        /* te explosion3 */ 23, 16, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0,
        /* te lightning4 */ 23, 17, 109, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0,
        /* te blood */ 23, 50, 1, 0, 1, 0, 1, 0, 1, 255, 2, 9,
        /* te bloodshower */ 23, 52, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 8, 0, 10, 0,
        /* te explosionrgb */ 23, 53, 1, 0, 1, 0, 1, 0, 1, 2, 3,
        /* te particlecube */ 23, 54, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 10,
        0, 1, 1, 8, 0,
        /* te particlerain */ 23, 55, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 10,
        0, 1,
        /* te spikequad */ 23, 58, 1, 0, 1, 0, 1, 0,
        /* te customflash */ 23, 73, 1, 0, 1, 0, 1, 0, 1, 2, 3, 4, 5,
        /* te flamejet */ 23, 74, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 3,
        /* te tei_g3 */ 23, 76, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0,
    };
    static const char *const names[] = {
        "svc_showlmp", "svc_hidelmp", "svc_downloaddata", "svc_updatestatubyte", "svc_effect",
        "svc_effect2", "svc_precache", "svc_spawnbaseline2", "svc_spawnstatic2",
        "svc_spawnstaticsound2", "svc_trailparticles", "svc_pointparticles",
        "svc_pointparticles1", "svc_sound"};
    struct sg_nq_proto p;

    sg_nq_proto_set(&p, SG_NQ_PROTOCOL_NETQUAKE, 0);
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, msg, sizeof(msg)), 0);
    CHECK_EQ(parsed.nmsgs, 25);
    CHECK_EQ(parsed.unsupported_op, -1);
    if (parsed.nmsgs != 25)
        return;
    for (uint32_t i = 0; i < parsed.nmsgs; i++) {
        CHECKF(!parsed.msgs[i].unparsed, "message %u", i);
        if (i < UNIT_COUNT(names))
            CHECKF(strcmp(sg_nq_svc_name(parsed.msgs[i].op), names[i]) == 0, "message %u: %s", i,
                   sg_nq_svc_name(parsed.msgs[i].op));
        else
            CHECK_EQ(parsed.msgs[i].op, 23);
    }
    CHECK(field(0, "y") && field(0, "y")->raw == 20);
    CHECK(field(2, "start") && field(2, "start")->raw == 0x10000 && field(2, "data") &&
          field(2, "data")->len == 3 && memcmp(field(2, "data")->ptr, "xyz", 3) == 0);
    CHECK(field(6, "index") && field(6, "index")->raw == 0x8001);
    CHECK(field(7, "entity") && field(7, "entity")->raw == 9 && field(7, "model")->raw == 256 &&
          field(7, "origin0")->num == SG_BMSG_COORD16 && field(7, "angle0")->num == SG_BMSG_ANGLE8);
    CHECK(field(9, "sound") && field(9, "sound")->raw == 256);
    CHECK(field(11, "count") && field(11, "count")->raw == 7);
    CHECK(field(13, "speed") && field(13, "speed")->raw == 8000 && field(13, "sound")->raw == 5);
    CHECK(field(15, "model") && field(15, "end2"));
    CHECK(field(19, "randomvel") && field(19, "randomvel")->raw == 8);
    CHECK(field(22, "blue") && field(22, "blue")->raw == 5);
    CHECK(field(24, "angle2"));
    /* a cut one overflows, as a short read does in the client */
    CHECK_EQ(sg_nq_parse(SG_DIR_S2C, &p, msg, 8, &parsed), SG_E_OVERFLOW);
    /* 666 / 999 know none of them (QuakeSpasm's client: "Illegible server message") */
    sg_nq_proto_set(&p, SG_NQ_PROTOCOL_FITZQUAKE, 0);
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, msg + 11, 3), SG_E_MALFORMED);
}

/* DarkPlaces' client on 15: its acknowledgements (download data, entity frames). */
static void case_dp15_client(void)
{
    static const uint8_t msg[] = {51, 0, 0, 1, 0, 0, 4, 50, 7, 0, 0, 0, 3, 0, 0, 0x80, 0x3f, 1,
                                  2, 3, 0, 0, 0, 0, 0, 0, 0, 0};
    struct sg_nq_proto p;

    sg_nq_proto_set(&p, SG_NQ_PROTOCOL_NETQUAKE, 0);
    CHECK_EQ(roundtrip(SG_DIR_C2S, &p, msg, sizeof(msg)), 0);
    CHECK_EQ(parsed.nmsgs, 3);
    if (parsed.nmsgs != 3)
        return;
    CHECK(strcmp(sg_nq_clc_name(parsed.msgs[0].op), "clc_ackdownloaddata") == 0);
    CHECK(field(0, "start") && field(0, "start")->raw == 0x10000 && field(0, "size")->raw == 1024);
    CHECK(strcmp(sg_nq_clc_name(parsed.msgs[1].op), "clc_ackframe") == 0);
    CHECK(field(1, "frame") && field(1, "frame")->raw == 7);
    CHECK(parsed.msgs[2].op == 3 && parsed.msgs[2].count == 9);
}

/* What only the server's CSQC program reads (its entities, its temp entity
 * types) is relayed as the rest of the message: an error from a server that
 * has not said it is DarkPlaces, none once its stufftext did; its serverinfo
 * keeps that, a new connection (proto_set) forgets it. */
static void case_dp15_csqc(void)
{
    static const uint8_t ents[] = {7, 0, 0, 0x80, 0x3f, 58, 5, 0, 1, 2, 3, 0, 0};
    static const uint8_t te[] = {23, 100, 1, 2, 3, 8, 'x', 0};
    static const uint8_t said[] = {9, 'c', 's', 'q', 'c', '_', 'p', 'r', 'o', 'g', 'n', 'a', 'm',
                                   'e', ' ', 'c', 's', 'p', 'r', 'o', 'g', 's', '.', 'd', 'a',
                                   't', '\n', 0, 11, 15, 0, 0, 0, 8, 1, 'x', 0, 0, 0};
    static const uint8_t said2[] = {9, 'c', 'l', '_', 's', 'e', 'r', 'v', 'e', 'r', 'e', 'x',
                                    't', 'e', 'n', 's', 'i', 'o', 'n', '_', 'd', 'o', 'w', 'n',
                                    'l', 'o', 'a', 'd', ' ', '2', '\n', 0};
    struct sg_nq_proto p;

    sg_nq_proto_set(&p, SG_NQ_PROTOCOL_NETQUAKE, 0);
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, ents, sizeof(ents)), SG_E_MALFORMED);
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, te, sizeof(te)), SG_E_MALFORMED);
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, said, sizeof(said)), 0);
    CHECK(p.dp && p.protocol == SG_NQ_PROTOCOL_NETQUAKE && parsed.serverinfo);
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, ents, sizeof(ents)), 0);
    /* the section as on DP7: entity 5, its body kept raw up to the end */
    CHECK(parsed.nmsgs == 2 && !parsed.msgs[1].unparsed && parsed.msgs[1].count == 3);
    if (parsed.nmsgs != 2)
        return;
    CHECK(field(1, "updates") && field(1, "updates")->len == 3);
    CHECK(parsed.unsupported_op == -1 && parsed.csqc_raw == 1);
    /* the game's temp entity: its body up to where the rest (a print) parses */
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, te, sizeof(te)), 0);
    CHECK(parsed.nmsgs == 2 && !parsed.msgs[0].unparsed && field(0, "type") &&
          field(0, "type")->raw == 100);
    if (parsed.nmsgs != 2)
        return;
    CHECK(field(0, "csqc") && field(0, "csqc")->len == 3 && parsed.msgs[1].op == 8);
    CHECK(parsed.unsupported_op == -1 && parsed.csqc_raw == 1);
    sg_nq_proto_set(&p, SG_NQ_PROTOCOL_NETQUAKE, 0);
    CHECK(!p.dp);
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, said2, sizeof(said2)), 0);
    CHECK(p.dp && parsed.msgs[0].text == 0);
    /* on 666 the stufftext changes nothing */
    sg_nq_proto_set(&p, SG_NQ_PROTOCOL_FITZQUAKE, 0);
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, said2, sizeof(said2)), 0);
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, te, sizeof(te)), SG_E_MALFORMED);
}

/* ---- DarkPlaces' own protocols (DP5-DP7) ---- */

static const uint8_t dp7_info[] = {11, 0xb0, 0x0d, 0, 0, 8, 1, 'x', 0, 0, 0}; /* protocol 3504 */

static void case_dp7_messages(void)
{
    /* clientdata: bits PUNCH1 | VELOCITY1 | ITEMS | EXTEND1, extend1 PUNCHVEC1 | VIEWZOOM */
    static const uint8_t cd[] = {15, 0x24, 0x82, 0x09, 0x10, 0x00, 0, 0, 0x80, 0x3f,
                                 0, 0, 0x80, 0x3f, 7, 0, 0, 0, 0xff, 0x00};
    /* entities: frame 9, movesequence 4; entity 1: every field (bits 0xff, 0xff, 0xff, 0x07),
     * the animation type 1; entity 2 removed; the terminator */
    static const uint8_t ents[] = {
        57, 9, 0, 0, 0, 4, 0, 0, 0,
        1, 0, 0xff, 0xff, 0xff, 0x07,
        0x10,                                    /* flags */
        0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0, 0, 0x40, 0x40, /* origin: floats (ORIGIN32) */
        1, 0, 2, 0, 3, 0,                        /* angles: angle16 */
        5, 1, 6, 1, 2,                           /* model16, frame16, skin */
        1, 2, 3, 4,                              /* effects32 */
        9, 10, 11,                               /* alpha, scale, colormap */
        3, 0, 1,                                 /* tag entity, index */
        1, 0, 2, 0, 3, 0, 4, 0, 5, 6,            /* light */
        7, 8, 9, 10, 11, 12, 13, 14,             /* glow, colormod, glowmod */
        1, 1, 0, 2, 0, 10, 0, 20, 0, 128, 127,   /* animation 1: 2 frames, 2 starts, 2 lerps */
        7, 0,                                    /* trail effect */
        2, 0x80,                                 /* entity 2 removed */
        0, 0x80};
    /* CSQC: entity 3 removed, entity 5 updated (a body with a 00 00 inside), the end; then
     * svc_updatestatubyte and a print the filters must see */
    static const uint8_t csqc[] = {58, 3, 0x80, 5, 0, 1, 0, 0, 2, 0, 0, 51, 16, 35, 8, 'h', 'i', 0};
    /* a CSQC temp entity (type 100), then a print */
    static const uint8_t te[] = {23, 100, 'a', 'b', 0, 8, 'y', 'o', 0};
    static const uint8_t dp6_ents[] = {57, 9, 0, 0, 0, 0, 0x80};
    /* a complex animation of an unknown type: the client stops */
    static const uint8_t bad[] = {57, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0x80, 0x80, 0x80, 0x02, 9};
    struct sg_nq_proto p;

    sg_nq_proto_set(&p, SG_NQ_PROTOCOL_NETQUAKE, 0);
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, dp7_info, sizeof(dp7_info)), 0);
    CHECK(p.protocol == SG_NQ_PROTOCOL_DP7 && p.dpn == 7 && p.dp && !p.fitz);
    CHECK(p.coord == SG_BMSG_COORD_FLOAT && p.angle == SG_BMSG_ANGLE16);
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, cd, sizeof(cd)), 0);
    CHECK(parsed.nmsgs == 1 && field(0, "punch0") && field(0, "velocity0") &&
          field(0, "items") && field(0, "punchvector0") && field(0, "viewzoom") &&
          field(0, "viewzoom")->raw == 0xff && !field(0, "health"));
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, ents, sizeof(ents)), 0);
    CHECK(parsed.nmsgs == 1 && field(0, "movesequence") && field(0, "movesequence")->raw == 4);
    CHECK(field(0, "origin0") && field(0, "origin0")->num == SG_BMSG_COORD_FLOAT);
    CHECK(field(0, "effects") && field(0, "effects")->raw == 0x04030201);
    CHECK(field(0, "anim_lerp1") && field(0, "anim_lerp1")->raw == 127 &&
          field(0, "traileffect") && field(0, "traileffect")->raw == 7);
    CHECK(!parsed.msgs[0].unparsed && parsed.unsupported_op < 0);
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, csqc, sizeof(csqc)), 0);
    CHECK(parsed.nmsgs == 3 && parsed.msgs[2].text == 0 && parsed.csqc_raw == 1);
    if (parsed.nmsgs == 3) {
        CHECK(field(0, "updates") && field(0, "updates")->len == 4 && field(0, "end"));
        CHECK(parsed.msgs[1].op == 51 && parsed.msgs[1].count == 2);
    }
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, te, sizeof(te)), 0);
    CHECK(parsed.nmsgs == 2 && field(0, "csqc") && field(0, "csqc")->len == 3 &&
          parsed.msgs[1].op == 8 && parsed.msgs[1].text == 0 && parsed.unsupported_op < 0);
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, bad, sizeof(bad)), SG_E_MALFORMED);
    /* DP6: no movesequence */
    sg_nq_proto_set(&p, SG_NQ_PROTOCOL_DP6, 0);
    CHECK_EQ(roundtrip(SG_DIR_S2C, &p, dp6_ents, sizeof(dp6_ents)), 0);
    CHECK(parsed.nmsgs == 1 && !field(0, "movesequence") && field(0, "entity"));
}

static void case_dp7_client(void)
{
    /* clc_move (sequence, time, angles, moves, buttons long, impulse, cursor), ackframe,
     * stringcmd */
    static const uint8_t c7[] = {
        3, 5, 0, 0, 0, 0, 0, 0x80, 0x3f, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0,
        1, 0, 0, 0, 9, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 7, 0,
        50, 9, 0, 0, 0, 4, 's', 'a', 'y', ' ', 'x', 0};
    /* DP5: no sequence, buttons a byte, no cursor */
    static const uint8_t c5[] = {3, 0, 0, 0x80, 0x3f, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 1, 9};
    struct sg_nq_proto p;

    sg_nq_proto_set(&p, SG_NQ_PROTOCOL_DP7, 0);
    CHECK_EQ(roundtrip(SG_DIR_C2S, &p, c7, sizeof(c7)), 0);
    CHECK(parsed.nmsgs == 3 && field(0, "sequence") && field(0, "cursor_entity") &&
          field(0, "cursor_entity")->raw == 7 && field(0, "buttons")->num == SG_BMSG_S32);
    CHECK(parsed.nmsgs == 3 && parsed.msgs[2].text == 0 && field(1, "frame"));
    sg_nq_proto_set(&p, SG_NQ_PROTOCOL_DP5, 0);
    CHECK_EQ(roundtrip(SG_DIR_C2S, &p, c5, sizeof(c5)), 0);
    CHECK(parsed.nmsgs == 1 && !field(0, "sequence") && !field(0, "cursor_entity") &&
          field(0, "impulse") && field(0, "impulse")->raw == 9);
    CHECK_EQ(roundtrip(SG_DIR_C2S, &p, c7, sizeof(c7)), SG_E_MALFORMED);
}

/* ---- demo cut ---- */

/* One block of a .dem in memory. */
struct blk {
    const uint8_t *hdr; /* 16 bytes: length and angles, then the message */
    uint32_t len;
    int64_t ms; /* its server time: its last svc_time, or the block before's; -1 before any */
    int signon; /* its last svc_signonnum, or -1 */
    bool serverinfo;
};

/* The blocks of `file` (after the cd-track line); returns how many, at most `cap`. */
static size_t blocks_of(const uint8_t *file, size_t len, struct blk *b, size_t cap)
{
    struct sg_nq_proto p;
    size_t pos = 0, n = 0;
    int64_t ms = -1;

    sg_nq_proto_set(&p, SG_NQ_PROTOCOL_NETQUAKE, 0);
    while (pos < len && file[pos] != '\n')
        pos++;
    pos++;
    while (pos + 16 <= len && n < cap) {
        uint32_t l = sg_le32(file + pos);
        uint8_t *msg;

        if (l > len - pos - 16)
            break;
        msg = unit_exact_copy(file + pos + 16, l);
        CHECK_EQ(sg_nq_parse(SG_DIR_S2C, &p, msg, l, &parsed), 0);
        for (uint32_t i = 0; i < parsed.nmsgs; i++) {
            if (parsed.msgs[i].op == 7) { /* svc_time */
                float f;

                memcpy(&f, &parsed.fields[parsed.msgs[i].first].raw, sizeof(f));
                ms = (int64_t)((double)f * 1000.0);
            }
        }
        b[n] = (struct blk){file + pos, l, ms, parsed.signon, parsed.serverinfo};
        free(msg);
        n++;
        pos += 16 + l;
    }
    return n;
}

/* A cut of the protocol 15 demo: it reads back cleanly, starts with the
 * serverinfo and the signon (the original's blocks up to svc_signonnum 3),
 * then holds exactly the original's later blocks whose server time is in
 * [from, to], byte for byte. */
static void case_demo_cut(void)
{
    const char *td = getenv("SG_TESTDATA");
    const int32_t from = 20000, to = 40000;
    static struct blk orig[8192], cut[8192];
    char path[1024];
    uint8_t *file, *out;
    size_t len, olen, no, nc, pre = 0, k = 0;
    FILE *f, *devnull;
    long end;

    CHECK(td != NULL);
    CHECK(sg_nq_demo_impl.cut != NULL);
    if (!td || !sg_nq_demo_impl.cut)
        return;
    snprintf(path, sizeof(path), "%s/nq/demos/vektar_demo1.dem", td);
    file = unit_slurp(path, &len);
    CHECKF(file != NULL, "%s", path);
    if (!file)
        return;

    /* cut */
    {
        FILE *in = fopen(path, "rb");

        f = tmpfile();
        devnull = fopen("/dev/null", "w");
        CHECK(in && f && devnull);
        if (!in || !f || !devnull)
            return;
        CHECK_EQ(sg_nq_demo_impl.cut(in, path, f, from, to, devnull), 0);
        fclose(in);
    }
    fflush(f);
    end = ftell(f);
    CHECK(end > 0);
    olen = (size_t)end;
    out = malloc(olen);
    rewind(f);
    CHECK(out && fread(out, 1, olen, f) == olen);
    rewind(f);
    CHECK_EQ(sg_nq_demo_impl.info(f, "cut.dem", devnull), 0); /* reads back, 0 problems */
    fclose(f);
    fclose(devnull);

    /* the same cd-track line */
    CHECK(olen > 3 && memcmp(out, file, 3) == 0);

    no = blocks_of(file, len, orig, 8192);
    nc = blocks_of(out, olen, cut, 8192);
    while (pre < no && (pre == 0 || orig[pre - 1].signon < 3))
        pre++; /* the original's blocks up to and with svc_signonnum 3 */
    CHECKF(pre > 1 && pre < 10, "%zu blocks of signon", pre);
    CHECK(nc > pre && cut[0].serverinfo);
    for (size_t i = 0; i < pre && i < nc; i++)
        CHECKF(cut[i].len == orig[i].len && memcmp(cut[i].hdr, orig[i].hdr, 16 + orig[i].len) == 0,
               "preamble block %zu", i);
    for (size_t i = pre, j = pre; i < no; i++) {
        if (orig[i].ms < from || orig[i].ms > to)
            continue;
        k++;
        CHECKF(j < nc, "the cut ends before original block %zu", i);
        if (j >= nc)
            break;
        CHECKF(cut[j].len == orig[i].len && memcmp(cut[j].hdr, orig[i].hdr, 16 + orig[i].len) == 0,
               "cut block %zu is not original block %zu", j, i);
        j++;
    }
    CHECKF(k > 100, "%zu blocks in the range", k);
    CHECK_EQ(nc, pre + k); /* nothing else */
    free(out);
    free(file);
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"demo_15", case_demo_15},
        {"demo_666", case_demo_666},
        {"session_demo", case_session_demo},
        {"fitz_update", case_fitz_update},
        {"rmq_flags", case_rmq_flags},
        {"fitz_sound_baseline", case_fitz_sound_baseline},
        {"client", case_client},
        {"malformed", case_malformed},
        {"demo_cut", case_demo_cut},
        {"dp15_messages", case_dp15_messages},
        {"dp15_client", case_dp15_client},
        {"dp15_csqc", case_dp15_csqc},
        {"dp7_messages", case_dp7_messages},
        {"dp7_client", case_dp7_client},
    };

    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, teardown);
}
