/*
 * NetQuake sessions of a capture (`slipgate pcap decode`), decoded by the
 * live codec (codec.c) as slipgate decodes them: per datagram the rest of
 * one line (what the receiver does with it, the messages, texts), every
 * message rebuilt and compared with what came (a difference is an error).
 * A NetQuake session is two flows: the control port (connect, accept) and
 * the port the accept names, where the game runs.  With a record base the
 * server's messages go to <base>.dem from the level's serverinfo, a new
 * file per level (<base>-2.dem ...), ended where the player's own demo
 * ends (its disconnect) or at the end of the capture.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/byteorder.h"
#include "protocols/codec.h"
#include "protocols/demofile.h"
#include "protocols/error.h"
#include "protocols/nq/nq.h"
#include "protocols/text.h"

#define TEXT_MAX 60

struct flow {
    void *st; /* the codec's session state */
    char *record_base;
    FILE *rec;
    char rec_path[4096]; /* the demo being written */
    uint64_t whole;      /* its bytes up to its last whole block */
    unsigned demos;
    bool record_failed, ended;
    uint64_t datagrams, messages, identical, oob, rejected, errors;
    uint8_t rebuilt[65536 + 16];
    size_t rebuilt_len;
};

static int nq_capture_role(const uint8_t *d, size_t n)
{
    uint32_t head, flags;

    if (n < 5)
        return -1;
    head = sg_be32(d);
    if (head == 0xffffffffu)
        return -1;
    flags = head & 0xffff0000u;
    if (flags & 0x80000000u) /* control: CCREQ (client) or CCREP (server) */
        return (d[4] & 0x80) ? 0 : 1;
    if (n < 9 || (head & 0xffffu) != n)
        return -1;
    if (!(flags & (0x00100000u | 0x00010000u)))
        return -1; /* an ACK says nothing */
    /* A client sends clc_ messages (1 to 4): unreliable ones start with clc_move, reliable
     * ones with clc_stringcmd; a server's start with svc_time, svc_print, serverinfo ... */
    if (d[8] == 3 || d[8] == 4)
        return 1;
    return d[8] > 4 ? 0 : -1;
}

static int nq_capture_create(void **flow, const char *record_base)
{
    struct flow *fl = calloc(1, sizeof(*fl));

    if (!fl)
        return -ENOMEM;
    if (sg_nq_codec.create(&fl->st) < 0 ||
        (record_base && !(fl->record_base = strdup(record_base)))) {
        if (fl->st)
            sg_nq_codec.destroy(fl->st);
        free(fl);
        return -ENOMEM;
    }
    *flow = fl;
    return 0;
}

/* End the demo; one that holds nothing a player can play (nothing, or the sign-on alone) goes. */
static int stop_recording(struct flow *fl)
{
    int errors = 0, rc;

    if (!fl->rec)
        return 0;
    rc = sg_nq_record_end(fl->st, fl->rec);
    if (rc < 0) { /* a full disk: the demo ends at its last whole block */
        sg_demo_file_cut(fl->rec, fl->whole);
        errors++;
    }
    if (fclose(fl->rec) != 0)
        errors++;
    fl->rec = NULL;
    if (errors)
        fprintf(stderr, "slipgate pcap: %s: demo write failed\n", fl->rec_path);
    else if (rc == 1 && remove(fl->rec_path) == 0)
        fl->demos--;
    return errors;
}

static int start_recording(struct flow *fl)
{
    char *path = fl->rec_path;
    size_t cap = sizeof(fl->rec_path);
    int n;

    if (fl->demos > 0)
        n = snprintf(path, cap, "%s-%u.dem", fl->record_base, fl->demos + 1);
    else
        n = snprintf(path, cap, "%s.dem", fl->record_base);
    if (n < 0 || (size_t)n >= cap) {
        fprintf(stderr, "slipgate pcap: %s: %s\n", fl->record_base, strerror(ENAMETOOLONG));
        fl->record_failed = true;
        return 1;
    }
    fl->rec = fopen(path, "wb");
    if (!fl->rec) {
        fprintf(stderr, "slipgate pcap: %s: %s\n", path, strerror(errno));
        fl->record_failed = true;
        return 1;
    }
    fl->demos++;
    fl->whole = 0;
    return 0;
}

static int collect(void *ctx, const uint8_t *d, size_t n)
{
    struct flow *fl = ctx;

    if (n > sizeof(fl->rebuilt))
        return SG_E_TOOBIG;
    memcpy(fl->rebuilt, d, n);
    fl->rebuilt_len = n;
    return 0;
}

static void put_string(FILE *out, const char *s, size_t len, bool json)
{
    fputc('"', out);
    sg_put_escaped(out, (const uint8_t *)s, len < TEXT_MAX ? len : TEXT_MAX, json);
    if (len > TEXT_MAX)
        fputs("...", out);
    fputc('"', out);
}

static const char *flags_name(uint32_t head)
{
    if (head & 0x80000000u)
        return "ctl";
    if (head & 0x00020000u)
        return "ack";
    if (head & 0x00100000u)
        return "unreliable";
    if (head & 0x00010000u)
        return (head & 0x00080000u) ? "data+eom" : "data";
    return "?";
}

static int nq_capture_datagram(void *flow, enum sg_dir dir, const uint8_t *data, size_t len,
                               bool json, FILE *out)
{
    static const char *const kinds[] = {"raw", "oob", "partial", "message", "rejected"};
    struct flow *fl = flow;
    const struct sg_frame *f;
    int errors = 0, err, n;
    bool identical = false;

    fl->datagrams++;
    err = sg_nq_codec.decode(fl->st, dir, data, len, &f);
    if (err < 0)
        errors++;
    fl->oob += f->kind == SG_FRAME_OOB;
    fl->rejected += f->kind == SG_FRAME_REJECTED;
    if (f->kind == SG_FRAME_MESSAGE) {
        fl->messages++;
        n = sg_nq_codec.encode(fl->st, f, collect, fl, &identical);
        if (n < 0 || !identical || fl->rebuilt_len != len || memcmp(fl->rebuilt, data, len) != 0)
            errors++;
        else
            fl->identical++;
        /* the recording: from a level's start, a file per level, to the client's leaving */
        if (dir == SG_DIR_S2C && fl->record_base && !fl->record_failed) {
            if (f->new_level) {
                errors += stop_recording(fl);
                fl->ended = false;
                errors += start_recording(fl);
            }
            if (fl->rec && !fl->ended) {
                int r = sg_nq_record(fl->st, f, fl->rec);
                if (r >= 0)
                    r = sg_demo_file_whole(fl->rec, &fl->whole);
                if (r < 0) {
                    fprintf(stderr, "slipgate pcap: %s: demo write failed: %s; it ends at its "
                            "last whole block\n", fl->rec_path, sg_strerror(r));
                    sg_demo_file_cut(fl->rec, fl->whole);
                    fl->record_failed = true;
                    errors++;
                }
            }
        }
        if (dir == SG_DIR_C2S && f->disconnect && fl->rec) {
            errors += stop_recording(fl);
            fl->ended = true;
        }
    }
    if (json) {
        fprintf(out, ",\"flags\":\"%s\",\"kind\":\"%s\"", len >= 4 ? flags_name(sg_be32(data)) : "?",
                kinds[f->kind]);
        if (f->sequence >= 0)
            fprintf(out, ",\"seq\":%" PRId32, f->sequence);
        if (f->kind == SG_FRAME_MESSAGE)
            fprintf(out, ",\"msg_len\":%zu,\"identical\":%s", f->msg_len,
                    identical ? "true" : "false");
        fputs(",\"msgs\":[", out);
        for (unsigned i = 0; i < f->nmsgs; i++) {
            fprintf(out, "%s{\"name\":\"%s\"", i ? "," : "", f->msgs[i].name);
            if (f->msgs[i].text) {
                fputs(",\"text\":", out);
                put_string(out, f->msgs[i].text, f->msgs[i].text_len, true);
            }
            fputc('}', out);
        }
        fputc(']', out);
        if (err < 0)
            fprintf(out, ",\"error\":\"%s\"", sg_errname(err));
        fputs("}\n", out);
    } else {
        fprintf(out, " %s %s", len >= 4 ? flags_name(sg_be32(data)) : "?", kinds[f->kind]);
        if (f->sequence >= 0)
            fprintf(out, " seq=%" PRId32, f->sequence);
        if (f->kind == SG_FRAME_MESSAGE)
            fprintf(out, " msg=%zu msgs=%u%s", f->msg_len, f->nmsgs,
                    identical ? "" : " REBUILT-DIFFERS");
        for (unsigned i = 0; i < f->nmsgs; i++)
            if (f->msgs[i].text || f->kind == SG_FRAME_OOB) {
                fprintf(out, " %s", f->msgs[i].name);
                if (f->msgs[i].text) {
                    fputc(' ', out);
                    put_string(out, f->msgs[i].text, f->msgs[i].text_len, false);
                }
            }
        if (err < 0)
            fprintf(out, " | error=%s", sg_errname(err));
        fputc('\n', out);
    }
    fl->errors += (uint64_t)errors;
    return errors;
}

static int nq_capture_finish(void *flow)
{
    return stop_recording(flow);
}

static void nq_capture_summary(void *flow, FILE *out)
{
    struct flow *fl = flow;

    fprintf(out,
            "%" PRIu64 " datagrams, %" PRIu64 " messages (%" PRIu64 " rebuilt byte-identical), %" PRIu64
            " control, %" PRIu64 " rejected, %" PRIu64 " errors; %s",
            fl->datagrams, fl->messages, fl->identical, fl->oob, fl->rejected, fl->errors,
            sg_nq_codec.describe(fl->st));
    if (fl->demos)
        fprintf(out, "; %u demo file(s)", fl->demos);
    fputc('\n', out);
}

static void nq_capture_destroy(void *flow)
{
    struct flow *fl = flow;

    if (!fl)
        return;
    if (fl->rec)
        fclose(fl->rec);
    sg_nq_codec.destroy(fl->st);
    free(fl->record_base);
    free(fl);
}

const struct sg_capture_impl sg_nq_capture_impl = {
    .title = "NetQuake",
    .role = nq_capture_role,
    .create = nq_capture_create,
    .datagram = nq_capture_datagram,
    .finish = nq_capture_finish,
    .summary = nq_capture_summary,
    .destroy = nq_capture_destroy,
};
