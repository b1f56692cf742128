/*
 * fuzz_q2: one Quake 2 session through the q2 codec as the proxy drives it
 * (protocols/q2/): decode every datagram (connectionless packets, both
 * netchans with Q2PRO's fragments, every message with the layout the
 * serverdata negotiates, zpackets and svc_zdownload chunks inflated with
 * their output bounded; seeds.py adds compressed downloads and a bomb),
 * rebuild every whole message, let the "filters" change and drop texts,
 * record each server message (34 as it came, 35/36 transcoded to a 34
 * demo from the tracked state) and dump each frame for the inspector.
 *
 * Input:
 *
 *     u8   mode       bits 0-1: a synthetic connect announces protocol 34
 *                     (1), 35 (2) or 36 (3) first; 0: none, the datagrams
 *                     decide; bit 2: with 36, Q2PRO's new netchan (nc=1)
 *     { u8 flags, le16 length, length bytes } ...   datagrams in arrival order
 *
 * flags bit 0: direction (1 server to client); bits 1-2: 1 change the first
 * text, 2 drop the first message, 3 inject a print to the client and a say
 * to the server.
 *
 * Every datagram is also read as a server's status answer by every game's
 * status hook (fuzz_status: the readiness probe's reading; seeds.py adds
 * Quake 2 answers).
 *
 * Properties: no crash, leak or sanitizer report; every error is one of
 * the project's codes; a whole message that no filter touched is rebuilt
 * byte for byte (the decoded fields hold every byte, and an untouched
 * zpacket keeps its deflated bytes).  A filter's verdict covers every
 * message a peer would act on (issue 25 item 1): each datagram is also
 * parsed as a bare message stream, and when the parser reports success the
 * list is the whole stream, zpackets' contents included (written back it
 * gives the bytes, with every message dropped it gives none, and no
 * message is left unparsed).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "protocols/codec.h"
#include "protocols/error.h"
#include "protocols/q2/q2.h"

extern const struct sg_codec sg_q2_codec;

struct out {
    uint8_t *data;
    size_t len;
    int count;
};

static int collect(void *ctx, const uint8_t *d, size_t n)
{
    struct out *o = ctx;
    uint8_t *p = realloc(o->data, o->len + n + 1);

    FUZZ_CHECK(p != NULL);
    o->data = p;
    memcpy(o->data + o->len, d, n);
    o->len += n;
    o->count++;
    return 0;
}

static bool valid_err(int err)
{
    return err == 0 || err == SG_E_MALFORMED || err == SG_E_OVERFLOW || err == SG_E_TOOBIG ||
           err == SG_E_UNSUPPORTED || err == SG_E_INFLATE || err == SG_E_TRUNCATED;
}

/* The stream property above, with the protocol the mode's connect names. */
static void listed_property(enum sg_dir dir, uint8_t mode, const uint8_t *d, size_t n)
{
    static struct sg_q2_parsed p;
    static bool ready;
    static bool *dropped;
    static uint8_t buf[SG_Q2_MAX_MSGLEN + 64];
    struct sg_q2_variant v;
    struct sg_bmsg_writer w;
    int err;

    if (!ready) {
        FUZZ_CHECK(sg_q2_parsed_init(&p) == 0);
        dropped = malloc(SG_Q2_MAX_MSGS * sizeof(*dropped));
        FUZZ_CHECK(dropped != NULL);
        ready = true;
    }
    if (n > SG_Q2_MAX_MSGLEN)
        return;
    sg_q2_variant_init(&v, (mode & 3) == 2 ? 35 : (mode & 3) == 3 ? 36 : 34,
                       (mode & 3) == 2 ? 1905 : (mode & 3) == 3 ? 1026 : 0);
    p.sequence = 0;
    err = sg_q2_parse(dir, &v, d, n, &p);
    FUZZ_CHECK(valid_err(err));
    if (err < 0)
        return;
    for (uint32_t i = 0; i < p.nmsgs; i++)
        FUZZ_CHECK(!p.msgs[i].unparsed);
    sg_bmsg_writer_init(&w, buf, sizeof(buf));
    FUZZ_CHECK(sg_q2_write(&p, NULL, &w) == 0);
    FUZZ_CHECK(w.len == n && memcmp(buf, d, n) == 0);
    memset(dropped, 1, sizeof(bool) * p.nmsgs);
    sg_bmsg_writer_init(&w, buf, sizeof(buf));
    FUZZ_CHECK(sg_q2_write(&p, dropped, &w) == 0 && w.len == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct sg_codec *c = &sg_q2_codec;
    struct fuzz_in in;
    void *st = NULL;
    FILE *null = fuzz_null_file();
    uint8_t mode;

    fuzz_in_init(&in, data, size);
    mode = fuzz_u8(&in);
    FUZZ_CHECK(c->create(&st) == 0);
    if (mode & 3) {
        char conn[256], tail[64] = "";
        const struct sg_frame *f;
        int proto = 33 + (mode & 3);
        if ((mode & 3) == 2)
            snprintf(tail, sizeof(tail), " 1390 1905");
        else if ((mode & 3) == 3)
            snprintf(tail, sizeof(tail), " 1390 %d 1 1026", (mode & 4) ? 1 : 0);
        int n = snprintf(conn, sizeof(conn),
                         "\xff\xff\xff\xff" "connect %d 4660 1234 \"\\name\\fuzz\"%s\n", proto,
                         tail);
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
        unsigned what = (flags >> 1) & 3;
        bool touched = false;
        int err;
        fuzz_door(p, got);

        FUZZ_CHECK(copy != NULL);
        memcpy(copy, p, got);
        fuzz_status(copy, got); /* as the readiness probe reads a server's answer */
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
            else if (what == 3) {
                c->inject(st, SG_DIR_S2C, SG_MSG_PRINT, "injected\n", 9);
                c->inject(st, SG_DIR_C2S, SG_MSG_CHAT, "hello", 5);
            }
            if (c->must_encode(st, f))
                touched = true; /* an injection rides on it */
            err = c->encode(st, f, collect, &o, &identical);
            FUZZ_CHECK(err >= 1 || err == SG_E_OVERFLOW);
            if (err >= 1 && !touched && f->pieces <= 1)
                FUZZ_CHECK(identical && o.len == got && memcmp(o.data, copy, got) == 0);
            if (err >= 1 && !touched)
                FUZZ_CHECK(identical);
            free(o.data);
            if (dir == SG_DIR_S2C && null) {
                int r = c->record(st, f, null);
                FUZZ_CHECK(r >= 0 || valid_err(r));
            }
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
                       memchr(gi.map, 0, sizeof(gi.map)) &&
                       memchr(gi.player, 0, sizeof(gi.player)));
        }
        free(copy);
    }
    if (null)
        FUZZ_CHECK(c->record_end(st, null) == 0);
    c->destroy(st);
    if (null)
        fclose(null);
    return 0;
}
