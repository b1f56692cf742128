/*
 * fuzz_nq: one NetQuake session through the nq codec as the proxy drives it
 * (protocols/nq/): control packets, the netchan (pieces, EOM, resends,
 * duplicates, unreliable sequences), every message of the protocol the
 * serverinfo chose, rebuild, the filters' text changes, drops and
 * injections, dumps and the .dem recorder; or (mode bit 7) a .dem file
 * through `demo info|dump|reencode`.
 *
 * Input:
 *
 *     u8   mode       bit 7: the rest is a .dem file; else bits 0-1 a
 *                     synthetic serverinfo first (0 none, 1 protocol 15,
 *                     2 666, 3 999 with the flags in bits 2-6 shifted to
 *                     PRFL_SHORTANGLE .. PRFL_FLOATCOORD and INT32COORD);
 *                     with 15, bit 2: a DarkPlaces server (its stufftext
 *                     "cl_serverextension_download 2" before the serverinfo);
 *                     with 666, bits 2-3 when not 0: DarkPlaces' own
 *                     protocol instead (1 DP5, 2 DP6, 3 DP7)
 *     { u8 flags, le16 length, length bytes } ...   datagrams in arrival order
 *
 * flags bit 0: direction (1 server to client); bits 1-3: 1 change the first
 * text, 2 drop the first message, 3 inject a print to the client, 4 inject
 * a say to the server.
 *
 * Every datagram is also read as a server's status answer by every game's
 * status hook (fuzz_status: the readiness probe's reading; seeds.py adds
 * CCREP_SERVER_INFO answers), and goes through the relay hook (the
 * accept's port move) as the proxy calls it, on a server at port 26000 with
 * nq_accept_ports 1024-65535 and slipgate listening on 27500.
 *
 * Properties: no crash, leak or sanitizer report; every error is one of
 * the project's codes; a whole message that no filter touched is rebuilt
 * byte for byte, and whatever the filters did a rebuilt datagram decodes
 * again; a .dem file re-encodes to a file that reads with no more problems;
 * the relay hook moves the session only on a server's accept that answers
 * a connect request the client sent before it (once per request), never
 * after the client sent a server's reply itself, only to a port in range,
 * and then the accept the client gets names slipgate's port.  A filter's
 * verdict covers every message a peer would act on (issue 25 item 1): each
 * datagram is also parsed as a bare message stream, and when the parser
 * reports success the list is the whole stream (written back it gives the
 * bytes, with every message dropped it gives none), and a message left
 * unparsed is one the frame reports as undecoded (a protocol not decoded)
 * or what follows a server's disconnect (the client reads no further).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "protocols/byteorder.h"
#include "protocols/codec.h"
#include "protocols/error.h"
#include "protocols/nq/oob.h"
#include "protocols/nq/nq.h"

struct out {
    uint8_t *data;
    size_t len;
};

static int collect(void *ctx, const uint8_t *d, size_t n)
{
    struct out *o = ctx;

    free(o->data);
    o->data = malloc(n ? n : 1);
    FUZZ_CHECK(o->data != NULL);
    memcpy(o->data, d, n);
    o->len = n;
    return 0;
}

static bool valid_err(int err)
{
    return err == 0 || err == SG_E_MALFORMED || err == SG_E_OVERFLOW || err == SG_E_TOOBIG;
}

static void demo_file(const uint8_t *data, size_t size)
{
    FILE *null = fuzz_null_file();
    static uint8_t empty[1]; /* fmemopen wants a size: an empty input is read as one zero byte */
    FILE *in = size ? fmemopen((void *)(uintptr_t)data, size, "rb") : fmemopen(empty, 1, "rb");
    char *buf = NULL;
    size_t len = 0;
    FILE *out;
    int rc;

    if (!in || !null) {
        if (in)
            fclose(in);
        if (null)
            fclose(null);
        return;
    }
    if (size == 0) {
        fclose(in);
        fclose(null);
        return;
    }
    sg_nq_demo_impl.probe(data, size);
    FUZZ_CHECK(sg_nq_demo_impl.info(in, "fuzz.dem", null) >= 0);
    rewind(in);
    FUZZ_CHECK(sg_nq_demo_impl.dump(in, "fuzz.dem", false, null) >= 0);
    rewind(in);
    FUZZ_CHECK(sg_nq_demo_impl.dump(in, "fuzz.dem", true, null) >= 0);
    rewind(in);
    out = open_memstream(&buf, &len);
    FUZZ_CHECK(out != NULL);
    rc = sg_nq_demo_impl.reencode(in, "fuzz.dem", out, null);
    fclose(out);
    FUZZ_CHECK(rc >= 0);
    if (rc == 0) {
        /* a clean demo re-encodes to itself */
        FUZZ_CHECK(len == size && memcmp(buf, data, size) == 0);
    }
    free(buf);
    fclose(in);
    fclose(null);
}

/* The protocol the mode's serverinfo names. */
static int32_t mode_protocol(uint8_t mode)
{
    static const int32_t protos[4] = {15, 15, 666, 999};

    if ((mode & 3) == 2 && (mode & 0x0c))
        return SG_NQ_PROTOCOL_DP5 - 1 + ((mode >> 2) & 3);
    return protos[mode & 3];
}

/* The stream property above, with the protocol the mode's serverinfo names. */
static void listed_property(enum sg_dir dir, uint8_t mode, const uint8_t *d, size_t n)
{
    static uint8_t buf[65536];
    struct sg_nq_parsed p = {0};
    struct sg_nq_proto proto;
    struct sg_bmsg_writer w;
    bool *dropped;
    int err;

    if (n > sizeof(buf))
        return;
    memset(&proto, 0, sizeof(proto));
    sg_nq_proto_set(&proto, mode_protocol(mode), 0);
    proto.dp = proto.dp || ((mode & 3) == 1 && (mode & 4));
    err = sg_nq_parse(dir, &proto, d, n, &p);
    FUZZ_CHECK(valid_err(err) || err == -ENOMEM);
    if (err == 0) {
        for (uint32_t i = 0; i < p.nmsgs; i++)
            FUZZ_CHECK(!p.msgs[i].unparsed || p.unsupported_op >= 0 ||
                       (dir == SG_DIR_S2C && p.msgs[i].op == 2));
        sg_bmsg_writer_init(&w, buf, sizeof(buf));
        FUZZ_CHECK(sg_nq_write(&p, NULL, &w) == 0);
        FUZZ_CHECK(w.len == n && memcmp(buf, d, n) == 0);
        dropped = malloc(p.nmsgs + 1);
        FUZZ_CHECK(dropped != NULL);
        memset(dropped, 1, p.nmsgs + 1);
        sg_bmsg_writer_init(&w, buf, sizeof(buf));
        FUZZ_CHECK(sg_nq_write(&p, dropped, &w) == 0 && w.len == 0);
        free(dropped);
    }
    sg_nq_parsed_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct sg_codec *c = &sg_nq_codec;
    struct fuzz_in in;
    void *st = NULL;
    FILE *null;
    char *rec = NULL;
    size_t rec_len = 0;
    FILE *recf;
    uint8_t mode;

    fuzz_in_init(&in, data, size);
    mode = fuzz_u8(&in);
    if (mode & 0x80) {
        demo_file(data + 1, size ? size - 1 : 0);
        return 0;
    }
    null = fuzz_null_file();
    recf = open_memstream(&rec, &rec_len);
    FUZZ_CHECK(c->create(&st) == 0);
    union sg_relay_state rs;
    const struct sg_relay_ctx rctx = {.listen_port = 27500, .server_port = 26000,
                                      .port_low = 1024, .port_high = 65535};
    bool connect_out = false, client_replied = false;
    memset(&rs, 0, sizeof(rs));
    if (mode & 3) {
        uint8_t m[96];
        size_t n = 8;
        const struct sg_frame *f;
        uint32_t b = (mode >> 2) & 0x1f, flags = (b & 0xf) << 1 | (b & 0x10) << 3;
        if ((mode & 3) == 1 && (mode & 4)) {
            static const char dp[] = "\x09" "cl_serverextension_download 2\n";
            memcpy(m + n, dp, sizeof(dp)); /* with its NUL */
            n += sizeof(dp);
        }
        m[n++] = 11;
        sg_put_le32(m + n, (uint32_t)mode_protocol(mode));
        n += 4;
        if ((mode & 3) == 3) {
            sg_put_le32(m + n, flags);
            n += 4;
        }
        memcpy(m + n, "\x04\x01" "fuzz\0maps/f.bsp\0\0s.wav\0\0", 25);
        n += 25;
        sg_put_be32(m, 0x00090000u | (uint32_t)n); /* DATA | EOM */
        sg_put_be32(m + 4, 0);
        c->decode(st, SG_DIR_S2C, m, n, &f);
    }
    while (in.left >= 3) {
        uint8_t flags = fuzz_u8(&in);
        uint16_t len = fuzz_le16(&in);
        size_t got;
        const uint8_t *p = fuzz_bytes(&in, len, &got);
        uint8_t *copy = malloc(got ? got : 1);
        enum sg_dir dir = flags & 1 ? SG_DIR_S2C : SG_DIR_C2S;
        const struct sg_frame *f = NULL;
        unsigned what = (flags >> 1) & 7;
        bool touched = false;
        int err;
        fuzz_door(p, got);

        FUZZ_CHECK(copy != NULL);
        memcpy(copy, p, got);
        fuzz_status(copy, got); /* as the readiness probe reads a server's answer */
        {
            struct sg_relay_move mv;
            FUZZ_CHECK(c->handshake(&rs, &rctx, dir, copy, got, &mv) == 0);
            if (dir == SG_DIR_C2S) {
                FUZZ_CHECK(!mv.moved && !mv.data &&
                           (mv.server_port == 0 || mv.server_port == rctx.server_port));
                if (sg_nq_is_connect_request(copy, got))
                    connect_out = true;
                else if (got >= 5 && (copy[4] & 0x80) && copy[0] == 0x80 && copy[1] == 0 &&
                         (size_t)(copy[2] << 8 | copy[3]) == got)
                    client_replied = true;
            } else if (mv.moved || mv.server_port > 0) {
                FUZZ_CHECK(mv.moved && connect_out && !client_replied);
                FUZZ_CHECK(mv.server_port >= 1024 && mv.server_port <= 65535 &&
                           mv.server_port == sg_nq_accept_port(copy, got));
                FUZZ_CHECK(mv.data && mv.len == got &&
                           sg_nq_accept_port(mv.data, mv.len) == rctx.listen_port);
                connect_out = false; /* once per request */
            }
            if (dir == SG_DIR_S2C && sg_nq_accept_port(copy, got) >= 0)
                connect_out = false;
        }
        sg_nq_capture_impl.role(copy, got);
        listed_property(dir, mode, copy, got);
        err = c->decode(st, dir, copy, got, &f);
        FUZZ_CHECK(valid_err(err));
        FUZZ_CHECK(f != NULL && f->dir == dir);
        if (f->kind == SG_FRAME_MESSAGE) {
            struct out o = {0};
            bool identical = false;
            if (what == 1 && f->nmsgs && f->msgs[0].text)
                touched = c->set_text(st, 0, "fuzz \"text\"\n", 12) == 0;
            else if (what == 2 && f->nmsgs)
                touched = c->drop_msg(st, 0) == 0;
            else if (what == 3)
                c->inject(st, SG_DIR_S2C, SG_MSG_PRINT, "injected\n", 9);
            else if (what == 4)
                c->inject(st, SG_DIR_C2S, SG_MSG_CHAT, "hello", 5);
            bool must = c->must_encode(st, f);
            err = c->encode(st, f, collect, &o, &identical);
            FUZZ_CHECK(err == 1 || err == SG_E_OVERFLOW || err == SG_E_TOOBIG ||
                       err == SG_E_UNSUPPORTED);
            if (err == 1 && !touched && !must)
                FUZZ_CHECK(identical && o.len == got && memcmp(o.data, copy, got) == 0);
            if (err == 1) {
                void *st2 = NULL;
                const struct sg_frame *g;
                FUZZ_CHECK(c->create(&st2) == 0);
                FUZZ_CHECK(valid_err(c->decode(st2, dir, o.data, o.len, &g)));
                c->destroy(st2);
            }
            free(o.data);
            if (recf)
                FUZZ_CHECK(c->record(st, f, recf) >= 0 || f->msg_len > SG_NQ_DEM_MAX_BLOCK);
        }
        if (null && c->dump) {
            FUZZ_CHECK(c->dump(st, f, SG_DUMP_FIELDS, false, null) >= 0);
            FUZZ_CHECK(c->dump(st, f, SG_DUMP_FIELDS, true, null) >= 0);
        }
        c->established(st);
        c->describe(st);
        if (c->info) { /* the status page's names: each a string within its field */
            struct sg_codec_info gi;
            c->info(st, &gi);
            FUZZ_CHECK(memchr(gi.hostname, 0, sizeof(gi.hostname)) &&
                       memchr(gi.map, 0, sizeof(gi.map)) &&
                       memchr(gi.player, 0, sizeof(gi.player)));
        }
        free(copy);
    }
    if (recf) {
        c->record_end(st, recf);
        fclose(recf);
    }
    free(rec);
    c->destroy(st);
    if (null)
        fclose(null);
    return 0;
}
