/*
 * NetQuake .dem files offline (`slipgate demo info|dump|reencode|cut`),
 * read with the container reader of demo.c.  Each message is
 * decoded (nq.h) with the protocol its serverinfo gave, and re-encoded
 * from its fields.
 *
 * DarkPlaces keeps the CSQC program (csprogs.dat) in its demos: when the
 * program loads while a demo is recorded (csprogs.c CL_VM_Init, cut in at
 * the file's start; the server's demos alike), each as a block of its own,
 * a stufftext "\ncl_downloadbegin SIZE NAME\n", the program in
 * svc_downloaddata messages (DarkPlaces opcode 50: long offset, short size
 * read unsigned, the bytes; its NET_MAXMESSAGE of 65 536 makes a whole
 * block 65 536 bytes, 65 529 of them data) and a stufftext
 * "\ncl_downloadfinished SIZE CRC\n" (CRC-16-CCITT of the program, as
 * CRC_Block).  No NetQuake protocol has opcode 50: between the two
 * stufftexts such a block is read as what it is, a piece of the program.
 */
#include "protocols/nq/demo.h"

#include "protocols/byteorder.h"
#include "protocols/crc16.h"
#include "protocols/error.h"
#include "protocols/text.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DP_SVC_DOWNLOADDATA 50
#define DP_DOWNLOAD_HEAD    7 /* byte svc_downloaddata, long offset, short size */

/* The stufftext that makes up the whole block read last, NUL-terminated into `out`; false if not. */
static bool block_stufftext(const struct dem *d, char *out, size_t cap)
{
    if (d->len < 3 || d->buf[0] != 9 || d->buf[d->len - 1] != 0 || d->len - 1 > cap ||
        memchr(d->buf + 1, 0, d->len - 2))
        return false;
    memcpy(out, d->buf + 1, d->len - 1);
    return true;
}

/* The CSQC program's stufftexts: its start and its end (size and CRC checked). */
static void csprogs_text(struct dem *d)
{
    char text[256], name[64];
    unsigned long size;
    long crc;

    if (!block_stufftext(d, text, sizeof(text)))
        return;
    if (sscanf(text, "\ncl_downloadbegin %lu %63s", &size, name) == 2 && size <= UINT32_MAX) {
        memset(&d->cs, 0, sizeof(d->cs));
        d->cs.open = d->cs.seen = true;
        d->cs.size = (uint32_t)size;
        d->cs.crc = 0xffff;
        snprintf(d->cs.name, sizeof(d->cs.name), "%s", name);
    } else if (d->cs.open && sscanf(text, "\ncl_downloadfinished %lu %ld", &size, &crc) == 2) {
        d->cs.open = false;
        d->cs.finished = true;
        d->cs.crc_said = (uint32_t)crc;
        d->cs.crc_ok = size == d->cs.size && d->cs.got == d->cs.size && crc == d->cs.crc;
    }
}

/*
 * Decode the block read last: a piece of DarkPlaces' CSQC program (then
 * d->cs_block, and no messages in d->parsed), or the game's messages.
 * 0 or the parser's error.
 */
static int dem_parse(struct dem *d)
{
    int err;

    d->cs_block = false;
    if (d->cs.open && d->len >= DP_DOWNLOAD_HEAD && d->buf[0] == DP_SVC_DOWNLOADDATA) {
        uint32_t off = sg_le32(d->buf + 1), n = sg_le16(d->buf + 5);

        if (d->len == DP_DOWNLOAD_HEAD + n && off == d->cs.got && n <= d->cs.size - off) {
            d->cs_block = true;
            d->cs_offset = off;
            d->cs_len = n;
            d->cs.crc = sg_crc16_ccitt(d->cs.crc, d->buf + DP_DOWNLOAD_HEAD, n);
            d->cs.got += n;
            d->cs.blocks++;
            return sg_nq_parse(SG_DIR_S2C, &d->proto, d->buf, 0, &d->parsed); /* none */
        }
    }
    err = sg_nq_parse(SG_DIR_S2C, &d->proto, d->buf, d->len, &d->parsed);
    csprogs_text(d);
    return err;
}

/* The piece of the CSQC program again, from its offset, size and bytes. */
static void csprogs_write(const struct dem *d, struct sg_bmsg_writer *w)
{
    sg_bmsg_write_u8(w, DP_SVC_DOWNLOADDATA);
    sg_bmsg_write_s32(w, (int32_t)d->cs_offset);
    sg_bmsg_write_u16(w, d->cs_len);
    sg_bmsg_write_data(w, d->buf + DP_DOWNLOAD_HEAD, d->cs_len);
}

/* "csprogs:" for info; the number of errors it found (an incomplete program or a wrong CRC). */
static int csprogs_info(const struct dem *d, FILE *out)
{
    if (!d->cs.seen)
        return 0;
    fprintf(out, "csprogs:      ");
    for (const char *s = d->cs.name; *s; s++)
        fputc((unsigned char)*s > 32 && (unsigned char)*s < 127 ? *s : '.', out);
    fprintf(out, ", %" PRIu32 " bytes in %" PRIu32 " blocks, ", d->cs.size, d->cs.blocks);
    if (!d->cs.finished)
        fprintf(out, "not finished (%" PRIu32 " bytes came)", d->cs.got);
    else if (d->cs.crc_ok)
        fprintf(out, "CRC %" PRIu32 " matches", d->cs.crc_said);
    else
        fprintf(out, "CRC %" PRIu32 " or size does not match (%" PRIu32 " bytes, CRC %u)",
                d->cs.crc_said, d->cs.got, (unsigned)d->cs.crc);
    fprintf(out, " (DarkPlaces' CSQC program)\n");
    return d->cs.finished && d->cs.crc_ok ? 0 : 1;
}

static float angle_of(const uint8_t *p)
{
    uint32_t u = sg_le32(p);
    float f;

    memcpy(&f, &u, sizeof(f));
    return f;
}

static int track_number(const struct dem *d)
{
    return atoi(d->track);
}

/* ---- info ---- */

static int nq_demo_info(FILE *in, const char *name, FILE *out)
{
    struct dem d;
    uint64_t msgs = 0, errors = 0, levels = 0, texts = 0;
    float t_first = 0, t_last = 0;
    bool have_time = false;
    char level[64] = "", levelname[128] = "";
    int32_t protocol = -1;
    int unsupported = -1;
    int rc;

    rc = sg_nq__dem_open(&d, in);
    if (rc < 0) {
        fprintf(out, "file:         %s\nnot a NetQuake demo: no cd-track line\n", name);
        return 1;
    }
    while ((rc = sg_nq__dem_next(&d)) > 0) {
        if (dem_parse(&d) < 0)
            errors++;
        msgs += d.parsed.nmsgs + d.cs_block;
        if (d.parsed.unsupported_op >= 0 && unsupported < 0)
            unsupported = d.parsed.unsupported_op;
        for (uint32_t i = 0; i < d.parsed.nmsgs; i++) {
            const struct sg_fmsg *m = &d.parsed.msgs[i];
            const struct sg_field *f;
            if (m->count == 0)
                continue;
            f = &d.parsed.fields[m->first];
            if (m->op == 7 && f->type == SG_FIELD_NUM) {
                float t = sg_bmsg_num_value(SG_BMSG_FLOAT, f->raw);
                if (!have_time)
                    t_first = t;
                t_last = t;
                have_time = true;
            } else if (m->op == 11 && !m->unparsed && m->count > 3) {
                /* protocol, [flags], maxclients, gametype, levelname */
                const struct sg_field *ln = &f[d.proto.protocol == SG_NQ_PROTOCOL_RMQ ? 4 : 3];
                size_t n = ln->len < sizeof(levelname) - 1 ? ln->len : sizeof(levelname) - 1;
                if (ln->type == SG_FIELD_STRING) {
                    memcpy(levelname, ln->ptr, n);
                    levelname[n] = 0;
                }
            } else if (m->text >= 0) {
                texts++;
            }
        }
        if (d.parsed.serverinfo) {
            levels++;
            protocol = d.proto.protocol;
            if (!level[0])
                snprintf(level, sizeof(level), "%s", d.parsed.level);
        }
    }
    if (rc < 0) {
        sg_nq__dem_close(&d);
        return rc;
    }
    fprintf(out, "file:         %s\n", name);
    if (protocol < 0)
        fprintf(out, "protocol:     ? (no serverinfo)\n");
    else
        fprintf(out, "protocol:     %d%s\n", (int)protocol,
                sg_nq_protocol_known(protocol) ? "" : " (not decoded: relayed)");
    fprintf(out, "map:          %s\n", level[0] ? level : "?");
    fprintf(out, "level:        ");
    for (const char *s = levelname; *s; s++)
        fputc((unsigned char)*s >= 32 && (unsigned char)*s < 127 ? *s : '.', out);
    fprintf(out, "\ncd track:     %d\n", track_number(&d));
    if (have_time)
        fprintf(out, "duration:     %.3f s (server time %.3f .. %.3f)\n",
                (double)t_last - (double)t_first, (double)t_first, (double)t_last);
    else
        fprintf(out, "duration:     ? (no svc_time)\n");
    fprintf(out, "blocks:       %" PRIu64 " (%" PRIu64 " messages, %" PRIu64 " levels, %" PRIu64
                 " texts)\n",
            d.blocks, msgs, levels, texts);
    if (unsupported >= 0)
        fprintf(out, "unsupported:  opcode %d and later relayed undecoded\n", unsupported);
    errors += (uint64_t)csprogs_info(&d, out);
    fprintf(out, "errors:       %" PRIu64 " decode%s%s\n", errors,
            d.truncated ? ", the file ends inside a block" : "",
            d.too_long ? ", a block length over 1 MiB" : "");
    errors += d.truncated + d.too_long;
    sg_nq__dem_close(&d);
    return errors > 0 ? (int)(errors > 1000 ? 1000 : errors) : 0;
}

/* ---- dump ---- */

const struct sg_field_style sg_nq_field_style = {.lead = " ", .data_text = true};

/* Open `in` as a demo for a command that reports on stderr: 0, or 1 (not a
 * NetQuake demo, said). */
static int open_or_say(struct dem *d, FILE *in, const char *name)
{
    if (sg_nq__dem_open(d, in) >= 0)
        return 0;
    fprintf(stderr, "slipgate demo: %s: not a NetQuake demo (no cd-track line)\n", name);
    return 1;
}

/* Open `in` and copy its cd-track line to `out`: 0, 1 (not a demo, said),
 * or -EIO. */
static int open_copy_track(struct dem *d, FILE *in, const char *name, FILE *out)
{
    int rc = open_or_say(d, in, name);

    if (rc)
        return rc;
    if (fwrite(d->track, 1, d->track_len, out) != d->track_len) {
        sg_nq__dem_close(d);
        return -EIO;
    }
    return 0;
}

/* Write one block: its length, the view angles the block came with, `body`. */
static int write_block(const struct dem *d, const uint8_t *body, size_t len, FILE *out)
{
    uint8_t hdr[16];

    sg_put_le32(hdr, (uint32_t)len);
    memcpy(hdr + 4, d->angles, 12);
    if (fwrite(hdr, 1, 16, out) != 16 || fwrite(body, 1, len, out) != len)
        return -EIO;
    return 0;
}

/* The end of a command's writing: `rc` (< 0: an error, the demo closed), or
 * -EIO when `out` cannot be flushed (closed too), else 0 (still open). */
static int flush_or_close(struct dem *d, int rc, FILE *out)
{
    if (rc >= 0 && fflush(out) != 0)
        rc = -EIO;
    if (rc < 0)
        sg_nq__dem_close(d);
    return rc < 0 ? rc : 0;
}

static int nq_demo_dump(FILE *in, const char *name, bool json, FILE *out)
{
    struct dem d;
    uint64_t errors = 0;
    int rc = open_or_say(&d, in, name);

    if (rc)
        return rc;
    if (json)
        fprintf(out, "{\"cdtrack\":%d}\n", track_number(&d));
    else
        fprintf(out, "# cd track %d\n", track_number(&d));
    while ((rc = sg_nq__dem_next(&d)) > 0) {
        int err = dem_parse(&d);
        if (err < 0)
            errors++;
        if (json) {
            fprintf(out, "{\"block\":%" PRIu64 ",\"len\":%u,\"angles\":[", d.blocks,
                    (unsigned)d.len);
            for (int k = 0; k < 3; k++) { /* a file's floats may be anything: JSON has no NaN */
                float a = angle_of(d.angles + 4 * k);
                fprintf(out, isfinite(a) ? "%s%.9g" : "%snull", k ? "," : "", (double)a);
            }
            fputs("],\"msgs\":[", out);
        } else {
            fprintf(out, "block %" PRIu64 " len=%u angles=%.9g %.9g %.9g%s%s\n", d.blocks,
                    (unsigned)d.len, (double)angle_of(d.angles), (double)angle_of(d.angles + 4),
                    (double)angle_of(d.angles + 8), err < 0 ? " error=" : "",
                    err < 0 ? sg_strerror(err) : "");
        }
        for (uint32_t i = 0; i < d.parsed.nmsgs; i++) {
            const struct sg_fmsg *m = &d.parsed.msgs[i];
            if (json)
                fprintf(out, "%s{\"op\":%d,\"name\":\"%s\",\"fields\":[", i ? "," : "", m->op,
                        sg_nq_svc_name(m->op));
            else
                fprintf(out, "  %s", sg_nq_svc_name(m->op));
            for (uint32_t k = 0; k < m->count; k++) {
                if (json && k)
                    fputc(',', out);
                sg_field_put(out, &d.parsed.fields[m->first + k], json, &sg_nq_field_style);
            }
            fputs(json ? "]}" : "\n", out);
        }
        if (d.cs_block && json)
            fprintf(out, "{\"op\":%d,\"name\":\"svc_downloaddata\",\"fields\":[[\"offset\",%" PRIu32
                         "],[\"size\",%" PRIu32 "],[\"data\",\"%" PRIu32 " bytes\"]]}",
                    DP_SVC_DOWNLOADDATA, d.cs_offset, d.cs_len, d.cs_len);
        else if (d.cs_block)
            fprintf(out, "  svc_downloaddata offset=%" PRIu32 " size=%" PRIu32 " data=<%" PRIu32
                         " bytes> (a piece of DarkPlaces' CSQC program)\n",
                    d.cs_offset, d.cs_len, d.cs_len);
        if (json)
            fprintf(out, "]%s%s%s}\n", err < 0 ? ",\"error\":\"" : "", err < 0 ? sg_strerror(err) : "",
                    err < 0 ? "\"" : "");
    }
    if (rc < 0) {
        sg_nq__dem_close(&d);
        return rc;
    }
    if (d.truncated || d.too_long) {
        errors++;
        if (json)
            fprintf(out, "{\"end\":\"%s\"}\n", d.truncated ? "truncated" : "block too long");
        else
            fprintf(out, "# %s\n", d.truncated ? "the file ends inside a block" : "a block over 1 MiB");
    } else {
        fputs(json ? "{\"end\":\"eof\"}\n" : "# end of file\n", out);
    }
    sg_nq__dem_close(&d);
    return errors > 1000 ? 1000 : (int)errors;
}

/* ---- reencode ---- */

static int nq_demo_reencode(FILE *in, const char *name, FILE *out, FILE *report)
{
    struct dem d;
    uint64_t msgs = 0, identical = 0, errors = 0;
    uint8_t *wbuf = NULL;
    size_t wcap = 0;
    int rc = open_copy_track(&d, in, name, out);

    if (rc)
        return rc;
    while ((rc = sg_nq__dem_next(&d)) > 0) {
        struct sg_bmsg_writer w;
        const uint8_t *body;
        size_t body_len;
        int err = dem_parse(&d);

        if (wcap < d.len + 16) {
            uint8_t *b = realloc(wbuf, d.len + 16);
            if (!b) {
                rc = -ENOMEM;
                break;
            }
            wbuf = b;
            wcap = d.len + 16;
        }
        sg_bmsg_writer_init(&w, wbuf, wcap);
        msgs += d.parsed.nmsgs + d.cs_block;
        if (err < 0)
            errors++;
        if (d.cs_block)
            csprogs_write(&d, &w);
        if (err == SG_E_OVERFLOW || err == -ENOMEM || err == SG_E_TOOBIG ||
            (!d.cs_block && sg_nq_write(&d.parsed, NULL, &w) < 0) || w.overflowed) {
            body = d.buf; /* not whole: the block as it came */
            body_len = d.len;
        } else {
            body = wbuf;
            body_len = w.len;
            if (w.len == d.len && (d.len == 0 || memcmp(wbuf, d.buf, d.len) == 0))
                identical++;
            else
                errors++;
        }
        if ((rc = write_block(&d, body, body_len, out)) < 0)
            break;
    }
    free(wbuf);
    if ((rc = flush_or_close(&d, rc, out)) < 0)
        return rc;
    fprintf(report, "%" PRIu64 " blocks, %" PRIu64 " messages, %" PRIu64
                    " blocks byte-identical%s\n",
            d.blocks, msgs, identical,
            d.truncated ? "; the file ends inside a block (not copied)" : "");
    errors += d.truncated + d.too_long;
    sg_nq__dem_close(&d);
    return errors > 1000 ? 1000 : (int)errors;
}

/* ---- cut ---- */

/* The server time of svc_time in `parsed`'s last one, in ms; false without one. */
static bool block_time(const struct sg_nq_parsed *p, int64_t *ms)
{
    bool found = false;

    for (uint32_t i = 0; i < p->nmsgs; i++) {
        const struct sg_fmsg *m = &p->msgs[i];
        float f;

        if (m->op != 7 || m->count < 1 || m->unparsed ||
            strcmp(p->fields[m->first].name, "time") != 0)
            continue;
        memcpy(&f, &p->fields[m->first].raw, sizeof(f));
        if (!(f > -2e6f && f < 2e6f)) /* NaN or a time no game reaches */
            continue;
        *ms = (int64_t)((double)f * 1000.0);
        found = true;
    }
    return found;
}

/*
 * `demo cut`: the cd-track line, the preamble (every block up to the
 * signon's end: serverinfo, baselines, static entities, the client's state
 * and svc_signonnum 3, so that the cut plays), then the blocks whose
 * server time (their last svc_time, or the one before) is in [from, to],
 * copied as they are.  The preamble ends at the first block with a
 * svc_time after the one that held svc_signonnum 3 (or, in a demo with no
 * svc_signonnum at all, at the first block with a svc_time).
 */
static int nq_demo_cut(FILE *in, const char *name, FILE *out, int32_t from_ms, int32_t to_ms,
                       FILE *report)
{
    struct dem d;
    uint64_t pre = 0, kept = 0, errors = 0;
    bool in_pre = true, signon_done = false, any_signon = false, have_time = false;
    int64_t now = 0;
    int rc = open_copy_track(&d, in, name, out);

    if (rc)
        return rc;
    while ((rc = sg_nq__dem_next(&d)) > 0) {
        int64_t t;
        bool timed;

        if (dem_parse(&d) < 0)
            errors++;
        timed = block_time(&d.parsed, &t);
        if (timed) {
            now = t;
            have_time = true;
        }
        if (in_pre && timed && (signon_done || !any_signon))
            in_pre = false;
        if (in_pre) {
            pre++;
            if (d.parsed.signon >= 0)
                any_signon = true;
            if (d.parsed.signon >= 3)
                signon_done = true;
        } else if (!have_time || now < from_ms || now > to_ms) {
            continue;
        } else {
            kept++;
        }
        if ((rc = write_block(&d, d.buf, d.len, out)) < 0)
            break;
    }
    if ((rc = flush_or_close(&d, rc, out)) < 0)
        return rc;
    fprintf(report,
            "%" PRIu64 " blocks read: %" PRIu64 " of the preamble (serverinfo and signon), %" PRIu64
            " in [%" PRId32 ", %" PRId32 "] ms written%s\n",
            d.blocks, pre, kept, from_ms, to_ms,
            d.truncated ? "; the file ends inside a block (not copied)" : "");
    errors += d.truncated + d.too_long;
    sg_nq__dem_close(&d);
    return errors > 1000 ? 1000 : (int)errors;
}

static const char *const nq_demo_exts[] = {"dem", NULL};

const struct sg_demo_impl sg_nq_demo_impl = {
    .extensions = nq_demo_exts,
    .probe = sg_nq_dem_probe,
    .info = nq_demo_info,
    .dump = nq_demo_dump,
    .reencode = nq_demo_reencode,
    .cut = nq_demo_cut,
};

