/*
 * The live NetQuake codec (protocols/nq/codec.c): a real quakespasm +
 * DarkPlaces session ($SG_TESTDATA capture) decoded with 0 errors and
 * every message rebuilt byte-identical, and hand-built netchan traffic for
 * the receivers' rules (pieces, EOM, resends, duplicates, stale unreliable
 * datagrams) and the filters (text changed, dropped, injected and carried
 * again on a resend until acknowledged).
 */
#include "protocols/nq/nq.h"
#include "protocols/nq/oob.h"

#include "protocols/byteorder.h"
#include "protocols/error.h"
#include "tests/q3/pcap_udp.h"
#include "tests/unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA 0x00010000u
#define ACK  0x00020000u
#define EOM  0x00080000u
#define UNREL 0x00100000u

static const struct sg_codec *nq;
static void *st;

static uint8_t last_out[70000];
static size_t last_len;
static int emits;

static int emit(void *ctx, const uint8_t *d, size_t n)
{
    (void)ctx;
    memcpy(last_out, d, n);
    last_len = n;
    emits++;
    return 0;
}

static void setup(void)
{
    nq = sg_codec_find("nq");
    if (!nq || !nq->create || nq->create(&st) < 0)
        abort();
}

static void teardown(void)
{
    nq->destroy(st);
}

/* A netchan datagram: flags | length, sequence, payload. */
static size_t dgram(uint8_t *out, uint32_t flags, uint32_t seq, const void *p, size_t n)
{
    sg_put_be32(out, flags | (uint32_t)(n + 8));
    sg_put_be32(out + 4, seq);
    memcpy(out + 8, p, n);
    return n + 8;
}

static const struct sg_frame *dec(enum sg_dir dir, uint32_t flags, uint32_t seq, const void *p,
                                  size_t n, int *err)
{
    uint8_t d[4096];
    const struct sg_frame *f = NULL;
    size_t len = dgram(d, flags, seq, p, n);
    int e = nq->decode(st, dir, d, len, &f);

    if (err)
        *err = e;
    return f;
}

/* ---- the capture ---- */

struct scan {
    int client_port;
    uint64_t datagrams, errors, messages, rebuilt, identical, oob, rejected, texts;
};

static int on_udp(const struct pcap_udp *u, void *arg)
{
    struct scan *s = arg;
    const struct sg_frame *f;
    enum sg_dir dir;
    bool identical = false;

    if (s->client_port < 0 && sg_nq_is_connect_request(u->data, u->len))
        s->client_port = u->sport;
    if (s->client_port < 0)
        return 0;
    dir = u->sport == s->client_port ? SG_DIR_C2S : SG_DIR_S2C;
    s->datagrams++;
    if (nq->decode(st, dir, u->data, u->len, &f) < 0)
        s->errors++;
    s->oob += f->kind == SG_FRAME_OOB;
    s->rejected += f->kind == SG_FRAME_REJECTED;
    if (f->kind == SG_FRAME_MESSAGE) {
        s->messages++;
        for (unsigned i = 0; i < f->nmsgs; i++)
            s->texts += f->msgs[i].text != NULL;
        if (nq->encode(st, f, emit, NULL, &identical) == 1) {
            s->rebuilt++;
            s->identical += identical && last_len == u->len && memcmp(last_out, u->data, u->len) == 0;
        }
    }
    return 0;
}

static void case_capture(void)
{
    const char *root = getenv("SG_TESTDATA");
    char path[4096];
    struct scan s = {.client_port = -1};

    CHECK(root != NULL);
    if (!root)
        return;
    snprintf(path, sizeof(path), "%s/nq/sessions/quakespasm_darkplaces/capture.pcap", root);
    CHECK(pcap_udp_foreach(path, on_udp, &s) == 0);
    printf("%llu datagrams: %llu messages, %llu rebuilt, %llu identical, %llu oob, %llu rejected, "
           "%llu texts, %llu errors\n",
           (unsigned long long)s.datagrams, (unsigned long long)s.messages,
           (unsigned long long)s.rebuilt, (unsigned long long)s.identical,
           (unsigned long long)s.oob, (unsigned long long)s.rejected, (unsigned long long)s.texts,
           (unsigned long long)s.errors);
    CHECK_EQ(s.errors, 0);
    CHECK(s.messages > 100);
    CHECK_EQ(s.rebuilt, s.messages);
    CHECK_EQ(s.identical, s.messages);
    CHECK(s.oob >= 2); /* connect, accept */
    CHECK(s.texts > 0);
    CHECK(nq->established(st));
    CHECK_EQ(nq->stats(st)->errors, 0);
}

/* ---- the netchan ---- */

static void case_pieces(void)
{
    static const uint8_t p1[] = {8, 'a', 'b'}; /* svc_print "ab..." split over two pieces */
    static const uint8_t p2[] = {'c', 0, 25, 1};
    const struct sg_frame *f;
    int err;

    f = dec(SG_DIR_S2C, DATA, 0, p1, sizeof(p1), &err);
    CHECK(err == 0 && f->kind == SG_FRAME_RAW);
    /* the same piece again: the receiver takes it as a resend of a middle piece: relayed */
    f = dec(SG_DIR_S2C, DATA, 0, p1, sizeof(p1), &err);
    CHECK(err == 0 && f->kind == SG_FRAME_RAW);
    f = dec(SG_DIR_S2C, DATA | EOM, 1, p2, sizeof(p2), &err);
    CHECK(err == 0 && f->kind == SG_FRAME_MESSAGE);
    CHECK_EQ(f->nmsgs, 2);
    CHECK(f->msgs[0].kind == SG_MSG_PRINT && strcmp(f->msgs[0].text, "abc") == 0);
    CHECK_EQ(f->msg_len, sizeof(p1) + sizeof(p2));
    CHECK_EQ(f->pieces, 2);
    /* only the last piece is rebuilt */
    emits = 0;
    bool identical = false;
    CHECK_EQ(nq->encode(st, f, emit, NULL, &identical), 1);
    CHECK(identical && emits == 1 && last_len == 8 + sizeof(p2));
    /* the text lies in the piece relayed already: it cannot change */
    CHECK_EQ(nq->set_text(st, 0, "x", 1), SG_E_UNSUPPORTED);
    /* the signon message lies in the last piece: it can be dropped (a nop stays) */
    CHECK_EQ(nq->drop_msg(st, 1), 0);
    CHECK_EQ(nq->encode(st, f, emit, NULL, &identical), 1);
    CHECK(!identical && last_len == 8 + 2 && last_out[8] == 'c' && last_out[9] == 0);
    /* the last piece again: re-decoded, marked repeat */
    f = dec(SG_DIR_S2C, DATA | EOM, 1, p2, sizeof(p2), &err);
    CHECK(err == 0 && f->kind == SG_FRAME_MESSAGE && f->nmsgs == 2 && f->msgs[0].repeat);
    /* an older piece: the receiver drops it */
    f = dec(SG_DIR_S2C, DATA, 0, p1, sizeof(p1), &err);
    CHECK(f->kind == SG_FRAME_REJECTED);
    /* unreliable: an older sequence is stale */
    f = dec(SG_DIR_S2C, UNREL, 5, "\x01", 1, &err);
    CHECK(err == 0 && f->kind == SG_FRAME_MESSAGE && f->sequence == 5);
    f = dec(SG_DIR_S2C, UNREL, 4, "\x01", 1, &err);
    CHECK(f->kind == SG_FRAME_REJECTED);
    f = dec(SG_DIR_S2C, UNREL, 9, "\x01", 1, &err);
    CHECK(f->kind == SG_FRAME_MESSAGE); /* a gap is fine (lost datagrams) */
    /* a length word that lies */
    {
        uint8_t d[16];
        size_t n = dgram(d, UNREL, 10, "\x01", 1);
        d[3]++;
        CHECK(nq->decode(st, SG_DIR_S2C, d, n, &f) == 0 && f->kind == SG_FRAME_REJECTED);
    }
}

static void case_filters(void)
{
    static const uint8_t say[] = {4, 's', 'a', 'y', ' ', '"', 'h', 'i', '"', 0};
    static const uint8_t print[] = {8, 'h', 'e', 'l', 'l', 'o', '\n', 0};
    const struct sg_frame *f;
    bool identical;
    int err;

    /* a client's say: the cross-game chat, rewritten */
    f = dec(SG_DIR_C2S, DATA | EOM, 0, say, sizeof(say), &err);
    CHECK(err == 0 && f->kind == SG_FRAME_MESSAGE && f->nmsgs == 1);
    CHECK(f->msgs[0].kind == SG_MSG_CHAT && strcmp(f->msgs[0].text, "hi") == 0);
    CHECK_EQ(nq->set_text(st, 0, "hello", 5), 0);
    CHECK_EQ(nq->encode(st, f, emit, NULL, &identical), 1);
    CHECK(!identical && last_len == 8 + 13 && memcmp(last_out + 8, "\x04say \"hello\"", 13) == 0);
    CHECK(sg_be32(last_out) == (DATA | EOM | 21) && sg_be32(last_out + 4) == 0);

    /* an injection towards the client rides on the server's next reliable message */
    CHECK_EQ(nq->inject(st, SG_DIR_S2C, SG_MSG_CENTERPRINT, "notice", 6), 0);
    f = dec(SG_DIR_S2C, UNREL, 0, "\x01", 1, &err);
    CHECK(!nq->must_encode(st, f)); /* not on an unreliable datagram */
    f = dec(SG_DIR_S2C, DATA | EOM, 0, print, sizeof(print), &err);
    CHECK(f->kind == SG_FRAME_MESSAGE && f->msgs[0].kind == SG_MSG_PRINT);
    CHECK(nq->must_encode(st, f));
    CHECK_EQ(nq->encode(st, f, emit, NULL, &identical), 1);
    CHECK(last_len == 8 + sizeof(print) + 8 && memcmp(last_out + 8 + sizeof(print), "\x1anotice", 8) == 0);
    CHECK(f->nmsgs == 2 && f->msgs[1].injected);
    /* the piece is lost: the server resends it, the injection rides again */
    f = dec(SG_DIR_S2C, DATA | EOM, 0, print, sizeof(print), &err);
    CHECK(f->kind == SG_FRAME_MESSAGE && nq->must_encode(st, f));
    CHECK_EQ(nq->encode(st, f, emit, NULL, &identical), 1);
    CHECK(last_len == 8 + sizeof(print) + 8);
    /* the client acknowledges: delivered, nothing rides on the next */
    f = dec(SG_DIR_C2S, ACK, 0, "", 0, &err);
    CHECK(err == 0 && f->ack == 0);
    f = dec(SG_DIR_S2C, DATA | EOM, 1, print, sizeof(print), &err);
    CHECK(f->kind == SG_FRAME_MESSAGE && !nq->must_encode(st, f));
    CHECK_EQ(nq->encode(st, f, emit, NULL, &identical), 1);
    CHECK(identical);
    /* with no reliable message for a while, an injection goes on an unreliable datagram */
    CHECK_EQ(nq->inject(st, SG_DIR_S2C, SG_MSG_PRINT, "late", 4), 0);
    for (uint32_t k = 0; k < 19; k++) {
        f = dec(SG_DIR_S2C, UNREL, 100 + k, "\x01", 1, &err);
        CHECK(f->kind == SG_FRAME_MESSAGE && !nq->must_encode(st, f));
    }
    f = dec(SG_DIR_S2C, UNREL, 200, "\x01", 1, &err);
    CHECK(nq->must_encode(st, f));
    CHECK_EQ(nq->encode(st, f, emit, NULL, &identical), 1);
    CHECK(last_len == 8 + 1 + 6 && memcmp(last_out + 9, "\x08late", 6) == 0 &&
          sg_be32(last_out) == (UNREL | 15) && sg_be32(last_out + 4) == 200);
    f = dec(SG_DIR_S2C, UNREL, 201, "\x01", 1, &err);
    CHECK(!nq->must_encode(st, f)); /* sent once */
    /* a dropped print leaves a nop in the reliable piece */
    f = dec(SG_DIR_S2C, DATA | EOM, 2, print, sizeof(print), &err);
    CHECK_EQ(nq->drop_msg(st, 0), 0);
    CHECK_EQ(nq->encode(st, f, emit, NULL, &identical), 1);
    CHECK(last_len == 9 && last_out[8] == 1 && sg_be32(last_out + 4) == 2);
}

/* Control packets: decoded as OOB frames; a reject carries its reason. */
static void case_control(void)
{
    static const uint8_t conn[] = {0x80, 0, 0, 12, 1, 'Q', 'U', 'A', 'K', 'E', 0, 3};
    static const uint8_t rej[] = {0x80, 0, 0, 9, 0x82, 'f', 'u', 'l', 0};
    static const uint8_t info[] = {0x80, 0, 0, 12, 2, 'Q', 'U', 'A', 'K', 'E', 0, 3};
    const struct sg_frame *f;

    CHECK(nq->decode(st, SG_DIR_C2S, conn, sizeof(conn), &f) == 0 && f->kind == SG_FRAME_OOB);
    CHECK(strcmp(f->msgs[0].name, "CCREQ_CONNECT") == 0);
    CHECK(nq->decode(st, SG_DIR_C2S, info, sizeof(info), &f) == 0 &&
          strcmp(f->msgs[0].name, "CCREQ_SERVER_INFO") == 0);
    CHECK(nq->decode(st, SG_DIR_S2C, rej, sizeof(rej), &f) == 0 && f->kind == SG_FRAME_OOB);
    CHECK(strcmp(f->msgs[0].name, "CCREP_REJECT") == 0 && f->msgs[0].text &&
          strcmp(f->msgs[0].text, "ful") == 0);
    CHECK(!nq->established(st));
    CHECK(nq->decode(st, SG_DIR_S2C, (const uint8_t *)"\x80\x00\x00\x09\x81\x40\x9c\x00\x00", 9,
                     &f) == 0);
    CHECK(strcmp(f->msgs[0].name, "CCREP_ACCEPT") == 0);
    dec(SG_DIR_C2S, UNREL, 0, "\x01", 1, NULL);
    CHECK(nq->established(st));
    /* a serverinfo of 666, then the client's connect request again (a late
     * retry): the session keeps its protocol (666 reads a 666 update) */
    {
        static const uint8_t info666[] = {11, 0x9a, 2, 0, 0, 1, 0, 'x', 0, 0, 0};
        static const uint8_t upd[] = {0x81, 0x80, 0x01, 0x05, 0x40}; /* U_EXTEND1, U_ALPHA */
        int err;
        f = dec(SG_DIR_S2C, DATA | EOM, 0, info666, sizeof(info666), &err);
        CHECK(err == 0 && f->kind == SG_FRAME_MESSAGE);
        CHECK(nq->decode(st, SG_DIR_C2S, conn, sizeof(conn), &f) == 0);
        f = dec(SG_DIR_S2C, UNREL, 0, upd, sizeof(upd), &err);
        CHECK(err == 0 && f->kind == SG_FRAME_MESSAGE && f->nmsgs == 1);
    }
}

/* The live dump at `level fields` (inspect) shows every message's fields,
 * as `demo dump` does, and the accept's port; an injected message has none. */
static char *dump_of(const struct sg_frame *f, bool json)
{
    char *txt = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&txt, &n);

    if (!m)
        abort();
    CHECK(nq->dump(st, f, SG_DUMP_FIELDS, json, m) > 0);
    fclose(m);
    return txt;
}

static void case_dump_fields(void)
{
    static const uint8_t info[] = {11, 15, 0, 0, 0, 1, 0, 'x', 0, 'm', 'a', 'p', 's', '/',
                                   'b', '.', 'b', 's', 'p', 0, 0, 0, 8, 'h', 'i', '\n', 0};
    static const uint8_t stats[] = {3, 1, 0xff, 0xff, 0xff, 0x7f, 3, 2, 1, 0, 0, 1,
                                    3, 3, 0, 0, 0, 0x80};
    const struct sg_frame *f;
    char *t;
    int err;

    CHECK(nq->decode(st, SG_DIR_S2C, (const uint8_t *)"\x80\x00\x00\x09\x81\x40\x9c\x00\x00", 9,
                     &f) == 0);
    t = dump_of(f, false);
    CHECKF(strstr(t, "CCREP_ACCEPT port=40000"), "%s", t);
    free(t);
    t = dump_of(f, true);
    CHECKF(strstr(t, "\"port\":40000"), "%s", t);
    free(t);
    f = dec(SG_DIR_S2C, DATA | EOM, 0, info, sizeof(info), &err);
    CHECK(err == 0 && f && f->nmsgs == 2);
    CHECK_EQ(nq->inject(st, SG_DIR_S2C, SG_MSG_PRINT, "injected\n", 9), 0);
    t = dump_of(f, false);
    CHECKF(strstr(t, "svc_serverinfo protocol=15 maxclients=1 gametype=0 levelname=\"x\" "
                     "model=\"maps/b.bsp\"") &&
               strstr(t, "svc_print \"hi\\n\" text=\"hi\\n\""),
           "%s", t);
    free(t);
    t = dump_of(f, true);
    CHECKF(strstr(t, "\"fields\":[[\"protocol\",15],[\"maxclients\",1]"), "%s", t);
    free(t);
    /* signed fields print exactly, the largest too (no float between) */
    f = dec(SG_DIR_S2C, UNREL, 0, stats, sizeof(stats), &err);
    CHECK(err == 0 && f && f->nmsgs == 3);
    t = dump_of(f, false);
    CHECKF(strstr(t, "value=2147483647") && strstr(t, "value=16777217") &&
               strstr(t, "value=-2147483648"),
           "%s", t);
    free(t);
}

/* A DarkPlaces server (Nexuiz) accepts its client's connectionless
 * "connect" with a connectionless "accept", not with CCREP_ACCEPT: the
 * session is established at the client's first netchan datagram after it
 * (the proxy ended such a session at its handshake timeout), and the
 * netchan starts over there. */
static void case_dp_handshake(void)
{
    static const char chal[] = "\xff\xff\xff\xffgetchallenge";
    static const char challenge[] = "\xff\xff\xff\xff" "challenge 12345";
    static const char conn[] = "\xff\xff\xff\xff" "connect\\protocol\\darkplaces 3"
                               "\\protocols\\DP7 DP6 DP5 QUAKE\\challenge\\12345";
    static const char acc[] = "\xff\xff\xff\xff" "accept";
    const struct sg_frame *f;

    CHECK(nq->decode(st, SG_DIR_C2S, (const uint8_t *)chal, sizeof(chal) - 1, &f) == 0 &&
          f->kind == SG_FRAME_OOB);
    CHECK(nq->decode(st, SG_DIR_S2C, (const uint8_t *)challenge, sizeof(challenge) - 1, &f) == 0);
    CHECK(nq->decode(st, SG_DIR_C2S, (const uint8_t *)conn, sizeof(conn) - 1, &f) == 0 &&
          f->kind == SG_FRAME_OOB);
    /* the client's own "accept" (an echo) or netchan traffic before the accept: not yet */
    CHECK(nq->decode(st, SG_DIR_C2S, (const uint8_t *)acc, sizeof(acc) - 1, &f) == 0);
    dec(SG_DIR_C2S, UNREL, 0, "\x01", 1, NULL);
    CHECK(!nq->established(st));
    CHECK(nq->decode(st, SG_DIR_S2C, (const uint8_t *)acc, sizeof(acc) - 1, &f) == 0 &&
          f->kind == SG_FRAME_OOB);
    CHECK(!nq->established(st));
    /* the netchan starts over: a reliable message numbered 0 is the next one */
    f = dec(SG_DIR_S2C, DATA | EOM, 0, "\x01", 1, NULL);
    CHECK(f->kind == SG_FRAME_MESSAGE);
    dec(SG_DIR_C2S, UNREL, 0, "\x01", 1, NULL);
    CHECK(nq->established(st));
}

/* A DarkPlaces server answers the client's second connect (it sent CCREQ_CONNECT
 * and a connectionless one) with a duplicate "accept" while the sign-on is on its
 * way: the netchan goes on (the message's first piece is kept); after a
 * disconnect, an accept starts the connection over. */
static void case_dp_duplicate_accept(void)
{
    static const char acc[] = "\xff\xff\xff\xff" "accept";
    const struct sg_frame *f;
    int err = 0;

    CHECK(nq->decode(st, SG_DIR_S2C, (const uint8_t *)acc, sizeof(acc) - 1, &f) == 0);
    f = dec(SG_DIR_S2C, DATA, 0, "\x08hi\n", 4, NULL);
    CHECK(f->kind == SG_FRAME_RAW);
    CHECK(nq->decode(st, SG_DIR_S2C, (const uint8_t *)acc, sizeof(acc) - 1, &f) == 0 &&
          f->kind == SG_FRAME_OOB);
    f = dec(SG_DIR_S2C, DATA | EOM, 1, "\0\x01", 2, &err);
    CHECK_EQ(err, 0);
    CHECK(f->kind == SG_FRAME_MESSAGE && f->nmsgs == 2);
    CHECK_EQ(nq->stats(st)->errors, 0);
    /* the server leaves: the next accept is a new connection, numbered from 0 */
    f = dec(SG_DIR_S2C, DATA | EOM, 2, "\x02", 1, NULL);
    CHECK(f->kind == SG_FRAME_MESSAGE);
    CHECK(nq->decode(st, SG_DIR_S2C, (const uint8_t *)acc, sizeof(acc) - 1, &f) == 0);
    f = dec(SG_DIR_S2C, DATA | EOM, 0, "\x01", 1, &err);
    CHECK(err == 0 && f->kind == SG_FRAME_MESSAGE);
}

/* A recording started mid-level of a DarkPlaces server on 15 begins with the
 * CSQC lines the server sent before its serverinfo (the player's client
 * loads the CSQC program from them), then the serverinfo, whole though it
 * passes 8000 bytes (Nexuiz's does). */
static void case_record_midgame_dp(void)
{
    static const uint8_t lines[] = "\x09" "cl_serverextension_download 2\n\0"
                                   "\x09" "csqc_progname csprogs.dat\n\0"
                                   "\x0b\x0f\0\0\0\x08\x01x\0maps/b.bsp\0";
    static const uint8_t time[] = {7, 0, 0, 0x80, 0x3f};
    static uint8_t first[16384];
    size_t n = sizeof(lines) - 1;
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    const struct sg_frame *f;

    CHECK(out != NULL);
    if (!out)
        return;
    memcpy(first, lines, n);
    for (int i = 0; i < 1000; i++)
        n += (size_t)snprintf((char *)first + n, 16, "progs/m%04d.mdl", i) + 1;
    memcpy(first + n, "\0\0\x19\x01", 4); /* the lists' ends, signon 1 */
    n += 4;
    uint32_t seq = 0;
    for (size_t at = 0; at < n; at += 1024, seq++) /* pieces of 1024 bytes */
        f = dec(SG_DIR_S2C, at + 1024 >= n ? DATA | EOM : DATA, seq, first + at,
                at + 1024 >= n ? n - at : 1024, NULL);
    CHECK(f->kind == SG_FRAME_MESSAGE && f->new_level && f->nmsgs == 4);
    CHECK(n > 8000);
    dec(SG_DIR_S2C, DATA | EOM, seq, "\x19\x02", 2, NULL);
    dec(SG_DIR_S2C, DATA | EOM, seq + 1, "\x19\x03", 2, NULL);
    f = dec(SG_DIR_S2C, UNREL, 0, time, sizeof(time), NULL);
    CHECK(f->kind == SG_FRAME_MESSAGE && !f->new_level);
    CHECK_EQ(nq->record(st, f, out), 1);
    CHECK_EQ(nq->record_end(st, out), 0);
    fclose(out);
    /* "-1\n", then the first block: the two lines, the serverinfo */
    CHECK(len > 3 + 16 + 60 && memcmp(buf, "-1\n", 3) == 0);
    if (len > 3 + 16 + 60) {
        const uint8_t *b = (const uint8_t *)buf + 3 + 16;
        CHECK(sg_le32((const uint8_t *)buf + 3) >= n); /* (the signon 1 is a message of its own) */
        CHECK(memcmp(b, first, 60) == 0);
        CHECK(b[60] == 11);
    }
    free(buf);
}

/* DP7: a print behind a CSQC section reaches the filters and is rewritten
 * (the rest of the datagram rebuilt as it came); the client's move angles
 * come after its sequence; the session names DP7 and what it keeps raw;
 * a recording turned on mid-level waits for the next level. */
static void case_dp7(void)
{
    static const uint8_t info[] = {11, 0xb0, 0x0d, 0, 0, 8, 1, 'x', 0, 'm', 'a', 'p', 's', '/',
                                   'b', '.', 'b', 's', 'p', 0, 0, 0};
    static const uint8_t csqc[] = {58, 5, 0, 1, 0, 0, 2, 0, 0, 8, 'h', 'i', '\n', 0,
                                   57, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0x80};
    /* clc_move: sequence 5, time 2.0, pitch 90 (angle16), the rest 0 (56 bytes) */
    static const uint8_t move[56] = {3, 5, 0, 0, 0, 0, 0, 0, 0x40, 0, 0x40};
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    const struct sg_frame *f;
    bool identical;
    int err;

    CHECK(out != NULL);
    if (!out)
        return;
    f = dec(SG_DIR_S2C, DATA | EOM, 0, info, sizeof(info), &err);
    CHECK(err == 0 && f->kind == SG_FRAME_MESSAGE && f->new_level);
    f = dec(SG_DIR_S2C, UNREL, 0, csqc, sizeof(csqc), &err);
    CHECK(err == 0 && f->kind == SG_FRAME_MESSAGE && f->nmsgs == 3 && !f->undecoded);
    if (f->nmsgs == 3) {
        CHECK(f->msgs[1].kind == SG_MSG_PRINT && strcmp(f->msgs[1].text, "hi\n") == 0);
        CHECK_EQ(nq->set_text(st, 1, "yo\n", 3), 0);
        CHECK_EQ(nq->encode(st, f, emit, NULL, &identical), 1);
        CHECK(!identical && last_len == 8 + sizeof(csqc) &&
              memcmp(last_out + 8, csqc, 10) == 0 && memcmp(last_out + 18, "yo\n", 3) == 0 &&
              memcmp(last_out + 21, csqc + 13, sizeof(csqc) - 13) == 0);
    }
    f = dec(SG_DIR_C2S, UNREL, 0, move, sizeof(move), &err);
    CHECK(err == 0 && f->kind == SG_FRAME_MESSAGE && f->nmsgs == 1);
    CHECK(strstr(nq->describe(st), "NetQuake protocol 3504 (DarkPlaces)") != NULL);
    CHECK(strstr(nq->describe(st), "1 CSQC bodies kept raw") != NULL);
    CHECK(strstr(nq->describe(st), "undecoded") == NULL);
    f = dec(SG_DIR_S2C, UNREL, 1, "\x01", 1, &err);
    CHECK_EQ(nq->record(st, f, out), 0);
    CHECK(strstr(nq->describe(st), "recording waits for a level start") != NULL);
    fclose(out);
    CHECK_EQ(len, 0);
    free(buf);
}

/* A DarkPlaces server on 15 (its CSQC stufftext said so): a print behind
 * its CSQC section, and one behind a CSQC temp entity, reach the filters
 * and are rewritten (the rest rebuilt as it came); the bodies are kept
 * raw and counted, nothing undecoded. */
static void case_dp15(void)
{
    static const uint8_t info[] = "\x09" "csqc_progname csprogs.dat\n\0"
                                  "\x0b\x0f\0\0\0\x08\x01x\0maps/b.bsp\0\0\0";
    /* entity 5, body 1 0 0 2 (a u16 0 inside it), end; print; a fast update */
    static const uint8_t csqc[] = {58, 5, 0, 1, 0, 0, 2, 0, 0, 8, 'h', 'i', '\n', 0, 0x80, 1};
    /* a temp entity of the game's (type 100, body 40 41); print; a fast update */
    static const uint8_t te[] = {23, 100, 40, 41, 8, 'h', 'o', '\n', 0, 0x80, 2};
    const struct sg_frame *f;
    bool identical;
    int err;

    f = dec(SG_DIR_S2C, DATA | EOM, 0, info, sizeof(info) - 1, &err);
    CHECK(err == 0 && f->kind == SG_FRAME_MESSAGE && f->new_level);
    f = dec(SG_DIR_S2C, UNREL, 0, csqc, sizeof(csqc), &err);
    CHECK(err == 0 && f->kind == SG_FRAME_MESSAGE && f->nmsgs == 3 && !f->undecoded);
    if (f->nmsgs == 3) {
        CHECK(f->msgs[1].kind == SG_MSG_PRINT && strcmp(f->msgs[1].text, "hi\n") == 0);
        CHECK_EQ(nq->set_text(st, 1, "yo\n", 3), 0);
        CHECK_EQ(nq->encode(st, f, emit, NULL, &identical), 1);
        CHECK(!identical && last_len == 8 + sizeof(csqc) &&
              memcmp(last_out + 8, csqc, 10) == 0 && memcmp(last_out + 18, "yo\n", 3) == 0 &&
              memcmp(last_out + 21, csqc + 13, sizeof(csqc) - 13) == 0);
    }
    f = dec(SG_DIR_S2C, UNREL, 1, te, sizeof(te), &err);
    CHECK(err == 0 && f->kind == SG_FRAME_MESSAGE && f->nmsgs == 3 && !f->undecoded);
    if (f->nmsgs == 3) {
        CHECK(f->msgs[1].kind == SG_MSG_PRINT && strcmp(f->msgs[1].text, "ho\n") == 0);
        CHECK_EQ(nq->set_text(st, 1, "ok\n", 3), 0);
        CHECK_EQ(nq->encode(st, f, emit, NULL, &identical), 1);
        CHECK(!identical && last_len == 8 + sizeof(te) && memcmp(last_out + 8, te, 5) == 0 &&
              memcmp(last_out + 13, "ok\n", 3) == 0 &&
              memcmp(last_out + 16, te + 8, sizeof(te) - 8) == 0);
    }
    CHECK(strstr(nq->describe(st), "NetQuake protocol 15") != NULL);
    CHECK(strstr(nq->describe(st), "2 CSQC bodies kept raw") != NULL);
    CHECK(strstr(nq->describe(st), "undecoded") == NULL);
    CHECK_EQ(nq->stats(st)->errors, 0);
}

/* The DarkPlaces protocols the decoder does not read (NEHAHRAMOVIE, 250
 * here): relayed as they came, their texts read where they lead, and the
 * session names the protocol and says it is relayed. */
static void case_dp_relayed(void)
{
    static const uint8_t info[] = "\x0b\xfa\0\0\0\x08\x01x\0maps/b.bsp\0\0\0";
    static const uint8_t upd[] = {8, 'h', 'i', '\n', 0, 0x80, 1, 2, 3};
    const struct sg_frame *f;
    int err;

    f = dec(SG_DIR_S2C, DATA | EOM, 0, info, sizeof(info) - 1, &err);
    CHECK(err == 0 && f->kind == SG_FRAME_MESSAGE);
    f = dec(SG_DIR_S2C, UNREL, 0, upd, sizeof(upd), &err);
    CHECK(err == 0 && f->kind == SG_FRAME_MESSAGE && f->nmsgs == 2 && f->undecoded);
    if (f->nmsgs == 2)
        CHECK(f->msgs[0].kind == SG_MSG_PRINT && strcmp(f->msgs[0].text, "hi\n") == 0);
    CHECKF(strstr(nq->describe(st),
                  "NetQuake protocol 250 (DarkPlaces NEHAHRAMOVIE, not decoded: relayed)") != NULL,
           "%s", nq->describe(st));
    CHECK_EQ(nq->stats(st)->errors, 0);
}

/* .dem recording: from a serverinfo on, a block per message the client takes, with the
 * client's latest move angles; the end is a block holding svc_disconnect. */
static void case_record(void)
{
    static const uint8_t info[] = {11, 15, 0, 0, 0, 1, 0, 'x', 0, 'm', 'a', 'p', 's', '/',
                                   'b', '.', 'b', 's', 'p', 0, 0, 0};
    static const uint8_t move[] = {3, 0, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    const struct sg_frame *f;
    float yaw = 90.0f;
    uint32_t yaw_bits;

    CHECK(out != NULL);
    if (!out)
        return;
    memcpy(&yaw_bits, &yaw, 4);
    /* mid-level: waits */
    f = dec(SG_DIR_S2C, UNREL, 0, "\x01", 1, NULL);
    CHECK_EQ(nq->record(st, f, out), 0);
    f = dec(SG_DIR_C2S, UNREL, 0, move, sizeof(move), NULL);
    CHECK(f->kind == SG_FRAME_MESSAGE);
    f = dec(SG_DIR_S2C, DATA | EOM, 0, info, sizeof(info), NULL);
    CHECK(f->kind == SG_FRAME_MESSAGE && f->new_level && strcmp(f->level, "b") == 0);
    CHECK_EQ(nq->record(st, f, out), 1);
    f = dec(SG_DIR_S2C, UNREL, 1, "\x01", 1, NULL);
    CHECK_EQ(nq->record(st, f, out), 1);
    /* no svc_signonnum 3 came: the sign-on alone, nothing a player can play (1: remove it) */
    CHECK_EQ(nq->record_end(st, out), 1);
    CHECK(strcmp(nq->demo_ext(st), "dem") == 0);
    fclose(out);
    CHECK_EQ(len, 3 + (16 + sizeof(info)) + (16 + 1) + (16 + 1));
    if (len == 3 + (16 + sizeof(info)) + 17 + 17) {
        const uint8_t *b = (const uint8_t *)buf;
        CHECK(memcmp(b, "-1\n", 3) == 0);
        CHECK(sg_le32(b + 3) == sizeof(info) && sg_le32(b + 3 + 4) == yaw_bits); /* pitch 64 * 360 / 256 */
        CHECK(memcmp(b + 3 + 16, info, sizeof(info)) == 0);
        CHECK(b[len - 1] == 2 && sg_le32(b + len - 17) == 1);
    }
    free(buf);
}

/* The demo holds the server messages as the client got them: a message
 * rebuilt by the filters (a print rewritten, a print injected) is written
 * rebuilt, after the earlier piece of its reliable message as that went
 * out; a resend of its last piece (the client drops it) is not written
 * again. */
static void case_record_filtered(void)
{
    static const uint8_t info[] = {11, 15, 0, 0, 0, 1, 0, 'x', 0, 'm', 'a', 'p', 's', '/',
                                   'b', '.', 'b', 's', 'p', 0, 0, 0};
    static const uint8_t piece1[] = {1};                                       /* svc_nop */
    static const uint8_t piece2[] = {8, 'h', 'e', 'l', 'l', 'o', '\n', 0};     /* svc_print */
    static const uint8_t want[] = {1, 8, 'b', 'y', 'e', '\n', 0, 8, 'i', 'n', 'j', 0};
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    const struct sg_frame *f;
    bool identical;

    CHECK(out != NULL);
    if (!out)
        return;
    f = dec(SG_DIR_S2C, DATA | EOM, 0, info, sizeof(info), NULL);
    CHECK(f->kind == SG_FRAME_MESSAGE && f->new_level);
    CHECK_EQ(nq->encode(st, f, emit, NULL, &identical), 1);
    CHECK(identical);
    CHECK_EQ(nq->record(st, f, out), 1);
    f = dec(SG_DIR_S2C, DATA, 1, piece1, sizeof(piece1), NULL);
    CHECK(f->kind == SG_FRAME_RAW);
    f = dec(SG_DIR_S2C, DATA | EOM, 2, piece2, sizeof(piece2), NULL);
    CHECK(f->kind == SG_FRAME_MESSAGE && f->nmsgs == 2 && f->msgs[1].kind == SG_MSG_PRINT);
    CHECK_EQ(nq->set_text(st, 1, "bye\n", 4), 0);
    CHECK_EQ(nq->inject(st, SG_DIR_S2C, SG_MSG_PRINT, "inj", 3), 0);
    CHECK_EQ(nq->encode(st, f, emit, NULL, &identical), 1);
    CHECK(!identical && last_len == 8 + sizeof(want) - 1 &&
          memcmp(last_out + 8, want + 1, sizeof(want) - 1) == 0);
    CHECK_EQ(nq->record(st, f, out), 1);
    /* the resend (its ack was lost): rebuilt again for the client, not written again */
    f = dec(SG_DIR_S2C, DATA | EOM, 2, piece2, sizeof(piece2), NULL);
    CHECK(f->kind == SG_FRAME_MESSAGE && f->msgs[0].repeat);
    CHECK_EQ(nq->set_text(st, 1, "bye\n", 4), 0);
    CHECK_EQ(nq->encode(st, f, emit, NULL, &identical), 1);
    CHECK_EQ(nq->record(st, f, out), 0);
    CHECK_EQ(nq->record_end(st, out), 1); /* the sign-on alone (no signon 3): nothing to play */
    fclose(out);
    CHECK_EQ(len, 3 + (16 + sizeof(info)) + (16 + sizeof(want)) + (16 + 1));
    if (len == 3 + (16 + sizeof(info)) + (16 + sizeof(want)) + 17) {
        const uint8_t *b = (const uint8_t *)buf + 3 + 16 + sizeof(info);
        CHECK(sg_le32(b) == sizeof(want) && memcmp(b + 16, want, sizeof(want)) == 0);
    }
    free(buf);
}

/* Recording turned on mid-level: the demo starts with a synthesized
 * serverinfo and signon (1, 2, 3), then the game, and reads cleanly. */
struct midgame {
    int client_port;
    uint64_t n;
    FILE *out;
    int written;
    int resends;
};

static int on_udp_mid(const struct pcap_udp *u, void *arg)
{
    struct midgame *m = arg;
    const struct sg_frame *f;

    if (m->client_port < 0 && sg_nq_is_connect_request(u->data, u->len))
        m->client_port = u->sport;
    if (m->client_port < 0)
        return 0;
    nq->decode(st, u->sport == m->client_port ? SG_DIR_C2S : SG_DIR_S2C, u->data, u->len, &f);
    if (++m->n >= 400 && f->kind == SG_FRAME_MESSAGE && f->dir == SG_DIR_S2C) {
        CHECK(!f->new_level);
        int n = nq->record(st, f, m->out);
        /* (a resend of a reliable message's last piece: the client drops it, not recorded) */
        CHECK(n == (f->nmsgs > 0 && f->msgs[0].repeat ? 0 : 1));
        m->written += n == 1;
        m->resends += f->nmsgs > 0 && f->msgs[0].repeat;
    }
    return 0;
}

static void case_record_midgame(void)
{
    const char *root = getenv("SG_TESTDATA");
    char path[4096], *buf = NULL;
    size_t len = 0;
    struct midgame m = {.client_port = -1};
    FILE *in, *null = fopen("/dev/null", "w");

    CHECK(root != NULL && null != NULL);
    if (!root || !null)
        return;
    m.out = open_memstream(&buf, &len);
    snprintf(path, sizeof(path), "%s/nq/sessions/quakespasm_darkplaces/capture.pcap", root);
    CHECK(pcap_udp_foreach(path, on_udp_mid, &m) == 0);
    CHECK_EQ(nq->record_end(st, m.out), 0);
    fclose(m.out);
    CHECK(m.written > 100);
    /* the blocks: serverinfo first, then signons 1, 2, 3 ending the first three */
    CHECK(len > 3 + 16 && memcmp(buf, "-1\n", 3) == 0 && (uint8_t)buf[3 + 16] == 11);
    {
        size_t i = 3;
        int signon = 0;
        for (int k = 0; k < 3 && i + 16 <= len; k++) {
            uint32_t n = sg_le32((const uint8_t *)buf + i);
            CHECK(n >= 2 && i + 16 + n <= len);
            if (n < 2 || i + 16 + n > len)
                break;
            if ((uint8_t)buf[i + 16 + n - 2] == 25)
                signon = (uint8_t)buf[i + 16 + n - 1];
            i += 16 + n;
            CHECK_EQ(signon, k + 1);
        }
    }
    in = fmemopen(buf, len, "rb");
    CHECK(in != NULL);
    if (in) {
        CHECK_EQ(sg_nq_demo_impl.info(in, "midgame.dem", null), 0);
        fclose(in);
    }
    fclose(null);
    free(buf);
}

/* The client's clc_disconnect marks its frame `disconnect` (reliable, or
 * unreliable as Quake's CL_Disconnect sends it): the record filter ends the
 * demo there (issue 13, item 7).  The server's svc_disconnect does not. */
static void case_client_disconnect(void)
{
    static const uint8_t nop[] = {1}, disconnect[] = {2};
    const struct sg_frame *f;
    int err;

    f = dec(SG_DIR_C2S, DATA | EOM, 0, nop, sizeof(nop), &err);
    CHECK(err == 0 && f->kind == SG_FRAME_MESSAGE && !f->disconnect);
    f = dec(SG_DIR_S2C, DATA | EOM, 0, disconnect, sizeof(disconnect), &err);
    CHECK(err == 0 && f->kind == SG_FRAME_MESSAGE && !f->disconnect);
    f = dec(SG_DIR_C2S, UNREL, 0, disconnect, sizeof(disconnect), &err);
    CHECK(err == 0 && f->kind == SG_FRAME_MESSAGE && f->disconnect);
    f = dec(SG_DIR_C2S, DATA | EOM, 1, disconnect, sizeof(disconnect), &err);
    CHECK(err == 0 && f->kind == SG_FRAME_MESSAGE && f->disconnect);
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"dump_fields", case_dump_fields},
        {"capture", case_capture},
        {"pieces", case_pieces},
        {"filters", case_filters},
        {"control", case_control},
        {"record", case_record},
        {"record_midgame", case_record_midgame},
        {"client_disconnect", case_client_disconnect},
        {"record_filtered", case_record_filtered},
        {"dp_handshake", case_dp_handshake},
        {"dp_duplicate_accept", case_dp_duplicate_accept},
        {"record_midgame_dp", case_record_midgame_dp},
        {"dp7", case_dp7},
        {"dp15", case_dp15},
        {"dp_relayed", case_dp_relayed},
    };

    return unit_main(argc, argv, cases, UNIT_COUNT(cases), setup, teardown);
}
