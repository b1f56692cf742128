/*
 * QuakeWorld sessions of a capture, decoded as the live proxy decodes them:
 * the capture decoder behind the codec table (codec.h, struct
 * sg_capture_impl) that `slipgate pcap decode` feeds with each flow.
 *
 * Each flow runs the live codec (netchan.c): every datagram is decoded, and
 * every whole message is rebuilt from its decoded form and compared with
 * the bytes that came, as `reencode always` does live; a rebuild that
 * differs is an error.  Per datagram the rest of one line: the header, what
 * the receiver does with it, and the messages in it.  With a record base
 * the server's messages go to <base>.qwd through the codec's own demo
 * writer (record.c), starting at the serverdata and ending where the
 * client's own demo ends (as the live recorder, filters/record.c): at the
 * client's `drop`, or after a server message carrying svc_disconnect.  A
 * new level on the same flow goes into <base>-2.qwd, and so on.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/byteorder.h"
#include "protocols/codec.h"
#include "protocols/demofile.h"
#include "protocols/error.h"
#include "protocols/json.h"
#include "protocols/qw/qw.h"

#define NAMES_SHOWN 8 /* message names on a text line */

extern const struct sg_codec sg_qw_codec;

struct flow {
    void *codec;       /* the live codec's session state */
    char *record_base; /* NULL: not recording */
    FILE *demo;        /* the demo being written */
    char path[4200];
    bool record_failed, ended;
    uint64_t written; /* messages in the demo being written */
    uint64_t whole;   /* its bytes up to its last whole message */
    unsigned demos;   /* demos with at least one message */
    uint64_t datagrams, oob, messages, rejected, errors;
    uint64_t rebuilt, identical;
};

/* Does the sender act as the client (1), the server (0), or can it not tell (-1)? */
static int qw_capture_role(const uint8_t *data, size_t len)
{
    static const char *const requests[] = {"getchallenge", "connect", "status", "ping", "rcon"};
    size_t n;

    if (len < 5 || sg_le32(data) != 0xffffffffu)
        return -1;
    for (n = 4; n < len && data[n] > ' '; n++)
        ;
    for (size_t i = 0; i < sizeof(requests) / sizeof(requests[0]); i++)
        if (n - 4 == strlen(requests[i]) && memcmp(data + 4, requests[i], n - 4) == 0)
            return 1;
    /* The server's answers are one letter: 'c' challenge, 'j' accept, 'n' print, 'l', 'k'. */
    if (strchr("cjnlk", data[4]) && (len == 5 || !(data[5] >= 'a' && data[5] <= 'z')))
        return 0;
    return -1;
}

static int qw_capture_create(void **flow, const char *record_base)
{
    struct flow *fl = calloc(1, sizeof(*fl));

    if (!fl)
        return -ENOMEM;
    if (sg_qw_codec.create(&fl->codec) < 0) {
        free(fl);
        return -ENOMEM;
    }
    if (record_base && !(fl->record_base = strdup(record_base))) {
        sg_qw_codec.destroy(fl->codec);
        free(fl);
        return -ENOMEM;
    }
    *flow = fl;
    return 0;
}

/* ---- recording ---- */

/* End the demo being written (a file without a message goes); the number of errors. */
static int stop_recording(struct flow *fl)
{
    int err;

    if (!fl->demo)
        return 0;
    err = sg_qw_codec.record_end(fl->codec, fl->demo);
    if (err < 0) /* a full disk: the demo ends at its last whole message */
        sg_demo_file_cut(fl->demo, fl->whole);
    if (fclose(fl->demo) != 0 && err == 0)
        err = -errno;
    fl->demo = NULL;
    if (fl->written == 0)
        remove(fl->path);
    fl->written = 0;
    if (err < 0) {
        fprintf(stderr, "slipgate pcap: %s: %s\n", fl->path, sg_strerror(err));
        return 1;
    }
    return 0;
}

/* Open the next demo file; the number of errors. */
static int start_recording(struct flow *fl)
{
    if (fl->demos > 0)
        snprintf(fl->path, sizeof(fl->path), "%s-%u.qwd", fl->record_base, fl->demos + 1);
    else
        snprintf(fl->path, sizeof(fl->path), "%s.qwd", fl->record_base);
    fl->demo = fopen(fl->path, "wb");
    if (!fl->demo) {
        fprintf(stderr, "slipgate pcap: %s: %s\n", fl->path, strerror(errno));
        fl->record_failed = true;
        return 1;
    }
    fl->written = 0;
    fl->whole = 0;
    return 0;
}

/* A server message for the demo; the number of errors. */
static int record(struct flow *fl, const struct sg_frame *f)
{
    bool kicked = false;
    int errors = 0, n;

    if (fl->ended && !f->new_level)
        return 0;
    fl->ended = false;
    if (f->new_level && fl->demo && fl->written)
        errors += stop_recording(fl);
    if (!fl->demo && !fl->record_failed)
        errors += start_recording(fl);
    if (!fl->demo)
        return errors;
    n = sg_qw_codec.record(fl->codec, f, fl->demo);
    if (n >= 0) {
        int e = sg_demo_file_whole(fl->demo, &fl->whole);
        if (e < 0)
            n = e;
    }
    if (n > 0 && fl->written++ == 0)
        fl->demos++;
    if (n < 0) {
        fprintf(stderr, "slipgate pcap: %s: demo write failed: %s; it ends at its last whole "
                "message\n", fl->path, sg_strerror(n));
        sg_demo_file_cut(fl->demo, fl->whole);
        fl->record_failed = true;
        return errors + 1 + stop_recording(fl);
    }
    /* The server dropped the client: the client's own demo ends with this message. */
    for (unsigned i = 0; i < f->nmsgs; i++)
        kicked = kicked || f->msgs[i].kind == SG_MSG_DISCONNECT;
    if (kicked) {
        errors += stop_recording(fl);
        fl->ended = true;
    }
    return errors;
}

/* ---- per datagram ---- */

static int count_emit(void *ctx, const uint8_t *data, size_t len)
{
    (void)data;
    (void)len;
    (*(int *)ctx)++;
    return 0;
}

static void print_line(FILE *out, const struct flow *fl, const struct sg_frame *f, bool json,
                       int rebuilt, int err)
{
    static const char *const kinds[] = {"raw", "oob", "partial", "message", "rejected"};

    (void)fl;
    if (json) {
        fprintf(out, ",\"rx\":\"%s\"", kinds[f->kind]);
        if (f->sequence >= 0)
            fprintf(out, ",\"seq\":%" PRId32 ",\"ack\":%" PRId32, f->sequence, f->ack);
        if (f->kind == SG_FRAME_OOB && f->nmsgs)
            fprintf(out, ",\"oob\":\"%s\"", f->msgs[0].name);
        if (f->kind == SG_FRAME_MESSAGE) {
            fputs(",\"messages\":[", out);
            for (unsigned i = 0; i < f->nmsgs; i++)
                fprintf(out, "%s\"%s\"", i ? "," : "", f->msgs[i].name);
            fputc(']', out);
            if (f->new_level) {
                fputs(",\"level\":", out); /* the server's text: any bytes */
                sg_json_cstr(out, f->level);
            }
        }
        if (rebuilt >= 0)
            fprintf(out, ",\"rebuilt\":\"%s\"", rebuilt ? "identical" : "different");
        if (err < 0)
            fprintf(out, ",\"error\":\"%s\"", sg_errname(err));
        fputs("}\n", out);
        return;
    }
    if (f->sequence >= 0)
        fprintf(out, " seq=%" PRId32 " ack=%" PRId32, f->sequence, f->ack);
    if (f->kind == SG_FRAME_OOB && f->nmsgs)
        fprintf(out, " %s", f->msgs[0].name);
    else if (f->kind != SG_FRAME_MESSAGE)
        fprintf(out, " %s", kinds[f->kind]);
    if (f->kind == SG_FRAME_MESSAGE) {
        fprintf(out, " msgs=%u", f->nmsgs);
        for (unsigned i = 0; i < f->nmsgs && i < NAMES_SHOWN; i++)
            fprintf(out, "%s%s", i ? "," : " ", f->msgs[i].name);
        if (f->nmsgs > NAMES_SHOWN)
            fputs(",...", out);
        if (f->new_level)
            fprintf(out, " level=%s", f->level);
    }
    if (rebuilt == 0)
        fputs(" | rebuilt DIFFERENT", out);
    if (err < 0)
        fprintf(out, " | error=%s", sg_errname(err));
    fputc('\n', out);
}

static int qw_capture_datagram(void *flow, enum sg_dir dir, const uint8_t *data, size_t len,
                               bool json, FILE *out)
{
    struct flow *fl = flow;
    const struct sg_frame *f;
    int err, rebuilt = -1, errors = 0;

    fl->datagrams++;
    err = sg_qw_codec.decode(fl->codec, dir, data, len, &f);
    if (f->kind == SG_FRAME_OOB)
        fl->oob++;
    if (f->kind == SG_FRAME_REJECTED)
        fl->rejected++;

    /* Every whole message rebuilt from its fields, as `reencode always` does. */
    if (f->kind == SG_FRAME_MESSAGE) {
        bool identical = false;
        int n = 0, e;

        fl->messages++;
        e = sg_qw_codec.encode(fl->codec, f, count_emit, &n, &identical);
        fl->rebuilt++;
        rebuilt = e >= 0 && identical;
        if (rebuilt)
            fl->identical++;
        else
            errors++;
        if (e < 0 && err == 0)
            err = e;
    }

    /* The recording: the client leaves (its demo ended before), or a server message. */
    if (fl->record_base && f->kind == SG_FRAME_MESSAGE) {
        if (dir == SG_DIR_C2S && f->disconnect && fl->demo) {
            errors += stop_recording(fl);
            fl->ended = true;
        } else if (dir == SG_DIR_S2C) {
            errors += record(fl, f);
        }
    }
    if (err < 0) {
        fl->errors++;
        errors++;
    }
    print_line(out, fl, f, json, rebuilt, err);
    return errors;
}

static int qw_capture_finish(void *flow)
{
    return stop_recording(flow);
}

static void qw_capture_summary(void *flow, FILE *out)
{
    const struct flow *fl = flow;

    if (fl->oob == fl->datagrams) {
        fprintf(out, "%" PRIu64 " out-of-band datagrams only, errors %" PRIu64 "\n", fl->datagrams,
                fl->errors);
        return;
    }
    fprintf(out,
            "%" PRIu64 " datagrams (%" PRIu64 " oob), %s, messages %" PRIu64
            ", rebuilt identical %" PRIu64 "/%" PRIu64 ", dropped as old %" PRIu64
            ", errors %" PRIu64 "%s\n",
            fl->datagrams, fl->oob, sg_qw_codec.describe(fl->codec), fl->messages, fl->identical,
            fl->rebuilt, fl->rejected, fl->errors + (fl->rebuilt - fl->identical),
            fl->demos ? ", recorded" : "");
}

static void qw_capture_destroy(void *flow)
{
    struct flow *fl = flow;

    if (!fl)
        return;
    if (fl->demo)
        fclose(fl->demo);
    sg_qw_codec.destroy(fl->codec);
    free(fl->record_base);
    free(fl);
}

const struct sg_capture_impl sg_qw_capture_impl = {
    .title = "QuakeWorld",
    .role = qw_capture_role,
    .create = qw_capture_create,
    .datagram = qw_capture_datagram,
    .finish = qw_capture_finish,
    .summary = qw_capture_summary,
    .destroy = qw_capture_destroy,
};
