/*
 * Quake 2 sessions of a capture, decoded as the live proxy decodes them:
 * the capture decoder behind the codec table (codec.h, struct
 * sg_capture_impl) that `slipgate pcap decode` feeds with each flow.
 */
#include "protocols/q2/session.h"

#include "protocols/byteorder.h"
#include "protocols/demofile.h"
#include "protocols/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct flow {
    void *st;
    uint64_t datagrams, messages, identical, errors, rejected, oob;
    char *record_path; /* --record: record_base + ".dm2" */
    FILE *rec;
    uint64_t whole; /* its bytes up to its last whole block */
    bool rec_failed;
};

static int capture_role(const uint8_t *d, size_t n)
{
    static const char *const client[] = {"getchallenge", "connect ", "info ", "status", "ping"};
    static const char *const server[] = {"challenge ", "client_connect", "print\n", "info\n"};

    if (n < 5 || sg_le32(d) != 0xffffffffu)
        return -1;
    for (size_t i = 0; i < sizeof(client) / sizeof(client[0]); i++)
        if (n - 4 >= strlen(client[i]) && memcmp(d + 4, client[i], strlen(client[i])) == 0)
            return 1;
    for (size_t i = 0; i < sizeof(server) / sizeof(server[0]); i++)
        if (n - 4 >= strlen(server[i]) && memcmp(d + 4, server[i], strlen(server[i])) == 0)
            return 0;
    return -1;
}

static void capture_destroy_early(struct flow *f)
{
    sg_q2__destroy(f->st);
    free(f);
}

static int capture_create(void **flow, const char *record_base)
{
    struct flow *f = calloc(1, sizeof(*f));

    if (!f || sg_q2__create(&f->st) < 0) {
        free(f);
        return -ENOMEM;
    }
    if (record_base) {
        size_t n = strlen(record_base) + 5;
        f->record_path = malloc(n);
        if (!f->record_path) {
            capture_destroy_early(f);
            return -ENOMEM;
        }
        snprintf(f->record_path, n, "%s.dm2", record_base);
    }
    *flow = f;
    return 0;
}

struct collect {
    uint8_t buf[MAX_DGRAM * 4];
    size_t len;
    int n;
};

static int collect_emit(void *ctx, const uint8_t *d, size_t n)
{
    struct collect *k = ctx;

    if (sizeof(k->buf) - k->len < n)
        return -ENOSPC;
    memcpy(k->buf + k->len, d, n);
    k->len += n;
    k->n++;
    return 0;
}

static int capture_datagram(void *flow, enum sg_dir dir, const uint8_t *data, size_t len,
                            bool json, FILE *report)
{
    struct flow *f = flow;
    const struct sg_frame *fr;
    int err, errors = 0;
    bool identical = false, rebuilt = false;
    static const char *const kinds[] = {"raw", "oob", "partial", "message", "rejected"};

    f->datagrams++;
    err = sg_q2__decode(f->st, dir, data, len, &fr);
    if (err < 0)
        errors++;
    if (fr->kind == SG_FRAME_OOB)
        f->oob++;
    if (fr->kind == SG_FRAME_REJECTED)
        f->rejected++;
    if (fr->kind == SG_FRAME_MESSAGE) {
        struct collect *k = malloc(sizeof(*k));
        f->messages++;
        if (!k)
            return errors + 1;
        k->len = 0;
        k->n = 0;
        if (sg_q2__encode(f->st, fr, collect_emit, k, &identical) < 0)
            errors++;
        rebuilt = true;
        if (identical)
            f->identical++;
        else
            errors++;
        free(k);
        if (dir == SG_DIR_S2C && f->record_path && !f->rec_failed) {
            struct q2c *c = f->st;
            if (!f->rec && c->parsed.serverdata && !c->sv.extended &&
                (c->sv.protocol == 26 || (c->sv.protocol >= 34 && c->sv.protocol <= 36))) {
                f->rec = fopen(f->record_path, "wb");
                if (!f->rec) {
                    fprintf(stderr, "slipgate pcap: %s: %s\n", f->record_path, strerror(errno));
                    f->rec_failed = true;
                    errors++;
                }
            }
            if (f->rec) {
                int r = sg_q2__record(f->st, fr, f->rec);
                if (r >= 0)
                    r = sg_demo_file_whole(f->rec, &f->whole);
                if (r < 0) {
                    fprintf(stderr, "slipgate pcap: %s: demo write failed: %s; it ends at its "
                            "last whole block\n", f->record_path, sg_strerror(r));
                    sg_demo_file_cut(f->rec, f->whole);
                    f->rec_failed = true;
                    errors++;
                }
            }
        }
    }
    f->errors += (uint64_t)errors;
    if (json) {
        fprintf(report, ",\"rx\":\"%s\"", kinds[fr->kind]);
        if (fr->sequence >= 0)
            fprintf(report, ",\"seq\":%d,\"ack\":%d", fr->sequence, fr->ack);
        if (fr->kind == SG_FRAME_MESSAGE)
            fprintf(report, ",\"messages\":%u,\"identical\":%s", fr->nmsgs,
                    identical ? "true" : "false");
        if (err < 0)
            fprintf(report, ",\"error\":\"%s\"", sg_errname(err));
        fputs("}\n", report);
    } else {
        fprintf(report, " %s", kinds[fr->kind]);
        if (fr->sequence >= 0)
            fprintf(report, " seq=%d ack=%d", fr->sequence, fr->ack);
        if (fr->kind == SG_FRAME_OOB && fr->nmsgs)
            fprintf(report, " %s", fr->msgs[0].name);
        if (fr->kind == SG_FRAME_MESSAGE) {
            fprintf(report, " msgs=%u", fr->nmsgs);
            for (unsigned i = 0; i < fr->nmsgs && i < 6; i++)
                fprintf(report, "%s%s", i ? "," : " ", fr->msgs[i].name);
            if (fr->nmsgs > 6)
                fputs(",...", report);
        }
        if (rebuilt)
            fprintf(report, " %s", identical ? "identical" : "CHANGED");
        if (err < 0)
            fprintf(report, " error=%s", sg_errname(err));
        fputc('\n', report);
    }
    return errors;
}

static int capture_finish(void *flow)
{
    struct flow *f = flow;
    int errors = 0;

    if (f->rec) {
        if (sg_q2__record_end(f->st, f->rec) < 0) { /* a full disk: the demo ends at its last whole block */
            sg_demo_file_cut(f->rec, f->whole);
            errors++;
        }
        errors += fclose(f->rec) != 0;
        f->rec = NULL;
    }
    return errors;
}

static void capture_summary(void *flow, FILE *out)
{
    struct flow *f = flow;

    fprintf(out,
            "%s; %llu datagrams, %llu out of band, %llu rejected by the receiver, %llu messages, "
            "%llu rebuilt identical, %llu errors\n",
            sg_q2__describe(f->st), (unsigned long long)f->datagrams, (unsigned long long)f->oob,
            (unsigned long long)f->rejected, (unsigned long long)f->messages,
            (unsigned long long)f->identical, (unsigned long long)f->errors);
}

static void capture_destroy(void *flow)
{
    struct flow *f = flow;

    if (!f)
        return;
    if (f->rec)
        fclose(f->rec);
    free(f->record_path);
    sg_q2__destroy(f->st);
    free(f);
}

const struct sg_capture_impl sg_q2_capture_impl = {
    .title = "Quake 2",
    .role = capture_role,
    .create = capture_create,
    .datagram = capture_datagram,
    .finish = capture_finish,
    .summary = capture_summary,
    .destroy = capture_destroy,
};
