/*
 * fuzz_q3_filters: one Quake 3 session through the codec as the proxy
 * drives it when filters change the stream (protocols/q3/codec.c, view.c,
 * renum.c): decode every datagram, let the "filters" rewrite texts, remove
 * reliable commands and inject new ones both ways, rebuild every message
 * for its receiver, dump each frame for the inspector and record the
 * server's messages into a demo.
 *
 * Input: the format of fuzz_q3_netchan (its seeds are used):
 *
 *     u8   mode       bits 0-1: 0 no handshake, 1 protocol 68, 2 71 (the
 *                     datagrams decide between ioquake3 and OpenArena), 3 the same
 *     le32 challenge  } modes 1-3: a `connect` and a `connectResponse`
 *     le16 qport      } go first, as datagrams
 *     { u8 flags, le16 length, length bytes } ...
 *
 * flags bit 0: direction (1 server to client); bits 1-5 choose what the
 * filters do with that datagram's frame: 1 inject a print to the client,
 * 2 inject a say to the server, 3 change the first text, 4 remove the
 * first reliable command, 5 rebuild even if nothing changed.  Every 40th
 * datagram injects a print anyway, so the seeds exercise renumbering.
 *
 * Properties: no crash, leak or sanitizer report; every error is one of
 * the project's codes; a rebuilt message's datagrams are each at most a
 * netchan packet; the dump and the demo writer accept every frame.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "protocols/codec.h"
#include "protocols/error.h"
#include "protocols/q3/netchan.h"
#include "protocols/q3/oob.h"

extern const struct sg_codec sg_q3_codec;

static bool valid_err(int err)
{
    return err >= 0 || (err > SG__E_FIRST && err < SG__E_LAST) || err == -ENOMEM ||
           err == -EINVAL || err == -EIO;
}

struct sink {
    int count;
};

static int emit(void *ctx, const uint8_t *data, size_t len)
{
    struct sink *s = ctx;

    FUZZ_CHECK(len > 0 && len <= SG_Q3_MAX_PACKETLEN + 16);
    FUZZ_CHECK(data != NULL);
    s->count++;
    return 0;
}

static void datagram(void *st, FILE *null, FILE *demo, enum sg_dir dir, const uint8_t *data,
                     size_t len, unsigned actions)
{
    const struct sg_codec *q3 = &sg_q3_codec;
    const struct sg_frame *f;
    uint8_t *copy = malloc(len ? len : 1);
    struct sink sink = {0};
    bool identical, changed = false;
    int err;

    FUZZ_CHECK(copy != NULL);
    memcpy(copy, data, len);
    err = q3->decode(st, dir, copy, len, &f);
    free(copy);
    FUZZ_CHECK(valid_err(err));
    FUZZ_CHECK(f && f->dir == dir);
    FUZZ_CHECK(f->nmsgs == 0 || f->msgs != NULL);
    { /* the status page's names: each a string within its field */
        struct sg_codec_info gi;
        q3->info(st, &gi);
        FUZZ_CHECK(memchr(gi.hostname, 0, sizeof(gi.hostname)) &&
                   memchr(gi.map, 0, sizeof(gi.map)) && memchr(gi.player, 0, sizeof(gi.player)));
    }

    /* The filters. */
    if (actions & 1)
        changed |= q3->inject(st, SG_DIR_S2C, SG_MSG_PRINT, "fuzz print\n", 11) == 0;
    if (actions & 2)
        changed |= q3->inject(st, SG_DIR_C2S, SG_MSG_CHAT, "fuzz say", 8) == 0;
    for (unsigned i = 0; i < f->nmsgs; i++) {
        const struct sg_msg *m = &f->msgs[i];
        FUZZ_CHECK(m->kind >= 0 && m->kind < SG_MSG_KIND_COUNT);
        FUZZ_CHECK(m->kind == SG_MSG_GAME || m->text != NULL);
        if ((actions & 4) && m->text && !m->repeat) {
            err = q3->set_text(st, i, "fuzz \"quoted\" text", 18);
            FUZZ_CHECK(valid_err(err));
            changed |= err == 0;
            actions &= ~4u;
        }
        if ((actions & 8) && m->text && !m->repeat && m->kind != SG_MSG_CONFIGSTRING) {
            err = q3->drop_msg(st, i);
            FUZZ_CHECK(valid_err(err));
            changed |= err == 0;
            actions &= ~8u;
        }
    }
    FUZZ_CHECK(q3->dump(st, f, SG_DUMP_FIELDS, (actions & 16) != 0, null) >= 0 || true);

    /* Rebuilt as the proxy would. */
    if ((changed || (actions & 16) || q3->must_encode(st, f)) && f->kind == SG_FRAME_MESSAGE) {
        err = q3->encode(st, f, emit, &sink, &identical);
        FUZZ_CHECK(valid_err(err));
        FUZZ_CHECK(err < 0 || err == sink.count);
    }
    if (dir == SG_DIR_S2C && f->kind == SG_FRAME_MESSAGE)
        FUZZ_CHECK(valid_err(q3->record(st, f, demo)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int protocols[4] = {0, 68, 71, 71};
    const struct sg_codec *q3 = &sg_q3_codec;
    FILE *null = fuzz_null_file(), *demo = fuzz_null_file();
    struct fuzz_in in;
    uint8_t buf[1024];
    char text[256];
    void *st = NULL;
    unsigned n = 0;
    int mode;

    FUZZ_CHECK(null && demo);
    FUZZ_CHECK(q3->create(&st) == 0);
    fuzz_in_init(&in, data, size);
    mode = fuzz_u8(&in);
    int32_t challenge = (int32_t)fuzz_le32(&in);
    uint16_t qport = fuzz_le16(&in);
    if (mode & 3) {
        int len = snprintf(text, sizeof(text),
                           "connect \"\\challenge\\%d\\qport\\%u\\protocol\\%d\\name\\fuzz\"",
                           challenge, qport, protocols[mode & 3]);
        int k = sg_q3_oob_build(text, (size_t)len, true, buf, sizeof(buf));
        FUZZ_CHECK(k > 0);
        datagram(st, null, demo, SG_DIR_C2S, buf, (size_t)k, 0);
        len = snprintf(text, sizeof(text), "connectResponse %d", challenge);
        k = sg_q3_oob_build(text, (size_t)len, false, buf, sizeof(buf));
        FUZZ_CHECK(k > 0);
        datagram(st, null, demo, SG_DIR_S2C, buf, (size_t)k, 0);
    }
    while (in.left > 0 && n < 4000) {
        unsigned flags = fuzz_u8(&in);
        size_t len = fuzz_le16(&in);
        const uint8_t *p = fuzz_bytes(&in, len, &len);
        unsigned actions = (flags >> 1) & 31;

        if (++n % 40 == 0)
            actions |= 1;
        datagram(st, null, demo, flags & 1 ? SG_DIR_S2C : SG_DIR_C2S, p, len, actions);
    }
    q3->record_end(st, demo);
    q3->destroy(st);
    fclose(null);
    fclose(demo);
    return 0;
}
