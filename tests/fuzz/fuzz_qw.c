/*
 * fuzz_qw: one QuakeWorld session through the qw codec as the proxy drives
 * it (protocols/qw/): decode every datagram (connectionless packets,
 * netchan, every message with the sizes the negotiated extensions select),
 * rebuild every whole message, let the "filters" change, drop and inject
 * texts, and dump each frame for the inspector.
 *
 * Input:
 *
 *     u8   mode       bits 0-2: extensions a synthetic connect announces
 *                     first (bit 0 FTE float coords, bit 1 MVD1 float
 *                     origins and high-lag setangle, bit 2 FTE trans and
 *                     chunked downloads); 0: none, the datagrams decide
 *     { u8 flags, le16 length, length bytes } ...   datagrams in arrival order
 *
 * flags bit 0: direction (1 server to client); bits 1-3: 1 change the first
 * text, 2 drop the first message, 3 inject a print to the client, 4 inject
 * a say to the server.
 *
 * Properties: no crash, leak or sanitizer report; every error is one of
 * the project's codes; a whole message that no filter touched is rebuilt
 * byte for byte (the decoded fields hold every byte), and whatever the
 * filters did, a rebuilt datagram fits the rebuild buffer and decodes again.
 * A filter's verdict covers every message a peer would act on (issue 25
 * item 1): each datagram is also parsed as a bare message stream, and when
 * the parser reports success the list is the whole stream (written back it
 * gives the bytes, with every message dropped it gives none), and a message
 * left unparsed (relayed as raw bytes) is one the frame reports as
 * undecoded (an unsupported extension), never a silent one.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "protocols/codec.h"
#include "protocols/error.h"
#include "protocols/qw/qw.h"

extern const struct sg_codec sg_qw_codec;

struct out {
    uint8_t *data;
    size_t len;
    int count;
};

static int collect(void *ctx, const uint8_t *d, size_t n)
{
    struct out *o = ctx;

    free(o->data);
    o->data = malloc(n ? n : 1);
    FUZZ_CHECK(o->data != NULL);
    memcpy(o->data, d, n);
    o->len = n;
    o->count++;
    return 0;
}

static bool valid_err(int err)
{
    return err == 0 || err == SG_E_MALFORMED || err == SG_E_OVERFLOW || err == SG_E_TOOBIG ||
           err == SG_E_VERSION || err == SG_E_TRUNCATED;
}

/* The stream property above; `mode` picks the extensions as the connect does. */
static void listed_property(enum sg_dir dir, uint8_t mode, const uint8_t *d, size_t n)
{
    static struct sg_field fields[SG_QW_MAX_FIELDS];
    static struct sg_fmsg msgs[SG_QW_MAX_MSGS];
    static bool dropped[SG_QW_MAX_MSGS];
    static uint8_t buf[SG_QW_MAX_DGRAM];
    struct sg_qw_parsed p = {.fields = fields, .msgs = msgs};
    struct sg_qw_variant v;
    struct sg_bmsg_writer w;
    int err;

    if (n > SG_QW_MAX_DGRAM)
        return;
    p.ext.fte = (mode & 1 ? SG_QW_FTE_FLOATCOORDS : 0) |
                (mode & 4 ? SG_QW_FTE_TRANS | SG_QW_FTE_CHUNKEDDOWNLOADS : 0);
    p.ext.mvd1 = mode & 2 ? SG_QW_MVD1_FLOATCOORDS | SG_QW_MVD1_HIGHLAGTELEPORT : 0;
    sg_qw_variant_of(&p.ext, &v);
    err = sg_qw_parse(dir, &v, d, n, &p);
    FUZZ_CHECK(valid_err(err));
    if (err < 0)
        return;
    for (uint32_t i = 0; i < p.nmsgs; i++)
        FUZZ_CHECK(!p.msgs[i].unparsed || p.unsupported_op >= 0);
    sg_bmsg_writer_init(&w, buf, sizeof(buf));
    FUZZ_CHECK(sg_qw_write(&p, NULL, &w) == 0);
    FUZZ_CHECK(w.len == n && memcmp(buf, d, n) == 0);
    memset(dropped, 1, sizeof(bool) * p.nmsgs);
    sg_bmsg_writer_init(&w, buf, sizeof(buf));
    FUZZ_CHECK(sg_qw_write(&p, dropped, &w) == 0 && w.len == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct sg_codec *c = &sg_qw_codec;
    struct fuzz_in in;
    void *st = NULL;
    FILE *null = fuzz_null_file();
    uint8_t mode;

    fuzz_in_init(&in, data, size);
    mode = fuzz_u8(&in);
    FUZZ_CHECK(c->create(&st) == 0);
    if (mode & 7) {
        char conn[512];
        const struct sg_frame *f;
        int n = snprintf(conn, sizeof(conn),
                         "\xff\xff\xff\xff" "connect 28 1234 5678 \"\\name\\fuzz\\*z_ext\\511\"\n"
                         "0x58455446 0x%x\n0x3144564d 0x%x\n",
                         (mode & 1 ? SG_QW_FTE_FLOATCOORDS : 0) |
                             (mode & 4 ? SG_QW_FTE_TRANS | SG_QW_FTE_CHUNKEDDOWNLOADS : 0),
                         mode & 2 ? SG_QW_MVD1_FLOATCOORDS | SG_QW_MVD1_HIGHLAGTELEPORT : 0);
        c->decode(st, SG_DIR_C2S, (const uint8_t *)conn, (size_t)n, &f);
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
            FUZZ_CHECK(err == 1 || err == SG_E_OVERFLOW);
            if (err == 1 && !touched && !must)
                FUZZ_CHECK(identical && o.len == got && memcmp(o.data, copy, got) == 0);
            if (err == 1) {
                /* The rebuilt datagram decodes again in a fresh session. */
                void *st2 = NULL;
                const struct sg_frame *g;
                FUZZ_CHECK(c->create(&st2) == 0);
                FUZZ_CHECK(valid_err(c->decode(st2, dir, o.data, o.len, &g)));
                c->destroy(st2);
            }
            free(o.data);
        }
        if (null && c->dump) {
            FUZZ_CHECK(c->dump(st, f, SG_DUMP_FIELDS, false, null) >= 0);
            FUZZ_CHECK(c->dump(st, f, SG_DUMP_FIELDS, true, null) >= 0);
        }
        c->describe(st);
        if (c->info) { /* the status page's names: each a string within its field */
            struct sg_codec_info gi;
            c->info(st, &gi);
            FUZZ_CHECK(memchr(gi.hostname, 0, sizeof(gi.hostname)) &&
                       memchr(gi.map, 0, sizeof(gi.map)) && memchr(gi.player, 0, sizeof(gi.player)));
        }
        free(copy);
    }
    c->destroy(st);
    if (null)
        fclose(null);
    return 0;
}
