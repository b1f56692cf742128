/*
 * fuzz_demo_reader: a whole Quake 3 demo file through the demo reader
 * (protocols/q3/demo.h sg_q3_demo_reader_init over fmemopen of the input),
 * every message through the server message parser with one stream state
 * and the dump, and the stream through the recorder, which joins it late
 * (as `demo cut` and a proxy that starts recording mid-session do).
 *
 * Input: a demo file, read as protocol 68:
 *
 *     { le32 sequence, le32 length, length bytes } ...   le32 -1, le32 -1
 *
 * Properties:
 *  - the reader returns whole messages of at most MAX_MSGLEN bytes, then
 *    the end marker or one of its documented errors, and counts exactly
 *    the bytes it consumed; it never reads past the input;
 *  - parsing each message fails only with the documented errors;
 *  - the recorder's output is itself a demo the reader reads to its end
 *    marker, with the messages the recorder says it wrote, each parsing
 *    with the documented results.
 *
 * The same input then goes through the QuakeWorld demo reader (the codec
 * table's hooks, protocols/qw/offline.c), read once as an .mvd and once as a
 * .qwd: `info`, `dump` (text and JSON) and `reencode`.  Properties:
 *  - each hook returns the number of problems it found, never a negative
 *    error (the input is in memory: no I/O can fail);
 *  - a reencode that found no problem wrote the input's own bytes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "protocols/error.h"
#include "protocols/q3/demo.h"
#include "protocols/q3/dump.h"
#include "protocols/codec.h"

extern const struct sg_demo_impl sg_qw_demo_impl; /* protocols/qw/offline.c */

struct ctx {
    struct sg_q3_state *st;
    struct sg_q3_svmsg msg;
    struct sg_q3_recorder rec;
    uint8_t buf[SG_Q3_MAX_MSGLEN];
};

static bool parse_error_ok(int err)
{
    return err == SG_E_OVERFLOW || err == SG_E_MALFORMED || err == SG_E_TOOBIG;
}

/* Read a demo from `f`, parse every message; feeds `rec` when not NULL.  Returns the count. */
static uint64_t read_demo(struct ctx *c, FILE *f, size_t size, FILE *dump,
                          struct sg_q3_recorder *rec, int *end)
{
    struct sg_q3_demo_reader r;
    uint64_t count = 0;
    int err;

    sg_q3_demo_reader_init(&r, f, 68);
    for (;;) {
        int32_t seq;
        size_t len = 0;
        int perr;

        err = sg_q3_demo_read(&r, &seq, c->buf, &len);
        FUZZ_CHECK(r.offset <= size);
        if (err <= 0)
            break;
        FUZZ_CHECK(err == 1 && len <= SG_Q3_MAX_MSGLEN);
        count++;
        FUZZ_CHECK(r.messages == count);

        perr = sg_q3_parse_server_message(c->st, seq, c->buf, len, &c->msg);
        FUZZ_CHECK(perr == 0 || parse_error_ok(perr));
        if (dump) {
            sg_q3_dump_message(dump, SG_Q3_DUMP_TEXT, &c->msg, len, perr);
            sg_q3_dump_message(dump, SG_Q3_DUMP_JSON, &c->msg, len, perr);
        }
        /* the recorder joins after the first message (usually the gamestate) */
        if (rec && count > 1) {
            int w = sg_q3_recorder_feed(rec, c->st, &c->msg, perr, c->buf, len);

            FUZZ_CHECK(w == 0 || w == 1 || w == SG_E_OVERFLOW || w == -EINVAL);
        }
    }
    FUZZ_CHECK(err == 0 || err == SG_E_TRUNCATED || err == SG_E_TOOBIG || err == SG_E_MALFORMED);
    FUZZ_CHECK(err != 0 || r.ended);
    FUZZ_CHECK(err != SG_E_TRUNCATED || (r.truncated && r.offset == size && r.partial < 8 + 16384));
    *end = err;
    sg_q3_demo_reader_finish(&r);
    return count;
}

/* The QuakeWorld demo reader's hooks over the input, named `name`. */
static void qw_demo(const uint8_t *data, size_t size, const char *name)
{
    const struct sg_demo_impl *d = &sg_qw_demo_impl;
    char *re = NULL;
    size_t re_len = 0;
    FILE *in, *null = fuzz_null_file(), *out;
    int rc;

    FUZZ_CHECK(null != NULL);
    in = fmemopen((void *)(uintptr_t)data, size, "rb");
    FUZZ_CHECK(in != NULL);
    FUZZ_CHECK(d->info(in, name, null) >= 0);
    rewind(in);
    FUZZ_CHECK(d->dump(in, name, false, null) >= 0);
    rewind(in);
    FUZZ_CHECK(d->dump(in, name, true, null) >= 0);
    rewind(in);
    out = open_memstream(&re, &re_len);
    FUZZ_CHECK(out != NULL);
    rc = d->reencode(in, name, out, null);
    fclose(out);
    FUZZ_CHECK(rc >= 0);
    FUZZ_CHECK(rc != 0 || (re_len == size && memcmp(re, data, size) == 0));
    free(re);
    fclose(in);
    fclose(null);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ctx *c = malloc(sizeof(*c));
    struct sg_q3_demo_writer w;
    FILE *in, *dump, *out, *back;
    char *rec_buf = NULL;
    size_t rec_len = 0;
    uint64_t written;
    int end;

    if (size == 0) {
        free(c);
        return 0; /* fmemopen needs a byte */
    }
    FUZZ_CHECK(c != NULL);
    c->st = sg_q3_state_create(68);
    sg_q3_svmsg_init(&c->msg);
    in = fmemopen((void *)(uintptr_t)data, size, "rb");
    dump = fuzz_null_file();
    out = open_memstream(&rec_buf, &rec_len);
    FUZZ_CHECK(c->st && in && dump && out);

    /* the input, dumped and recorded */
    sg_q3_demo_writer_init(&w, out);
    sg_q3_recorder_init(&c->rec, &w);
    read_demo(c, in, size, dump, &c->rec, &end);
    written = c->rec.written;
    FUZZ_CHECK(c->rec.rewritten <= written);
    FUZZ_CHECK(sg_q3_demo_writer_finish(&w) == 0 && w.messages == written);
    sg_q3_recorder_finish(&c->rec);
    fclose(out);
    fclose(in);
    fclose(dump);

    /* the recording, read back with a fresh state */
    FUZZ_CHECK(rec_len >= 8 * (written + 1));
    sg_q3_state_destroy(c->st);
    c->st = sg_q3_state_create(68);
    back = fmemopen(rec_buf, rec_len, "rb");
    FUZZ_CHECK(c->st && back);
    FUZZ_CHECK(read_demo(c, back, rec_len, NULL, NULL, &end) == written && end == 0);
    fclose(back);

    free(rec_buf);
    sg_q3_svmsg_finish(&c->msg);
    sg_q3_state_destroy(c->st);
    free(c);

    qw_demo(data, size, "fuzz.mvd");
    qw_demo(data, size, "fuzz.qwd");
    return 0;
}
