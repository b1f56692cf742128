/*
 * Quake 3 demo container: the streaming reader and the writer of the block
 * format drawn in demo.h.  No message decoding happens here.
 */
#include "protocols/q3/demo.h"

#include <errno.h>
#include <string.h>

#include "protocols/byteorder.h"
#include "protocols/error.h"

int sg_q3_demo_protocol_from_name(const char *path)
{
    const char *dot = strrchr(path, '.');
    int n = 0;

    if (!dot || strncmp(dot, ".dm_", 4) != 0 || !dot[4])
        return 0;
    for (const char *p = dot + 4; *p; p++) {
        if (*p < '0' || *p > '9' || n > 1000)
            return 0;
        n = n * 10 + (*p - '0');
    }
    return n;
}

int sg_q3_demo_reader_open(struct sg_q3_demo_reader *r, const char *path)
{
    FILE *f = fopen(path, "rb");

    if (!f)
        return -errno;
    sg_q3_demo_reader_init(r, f, sg_q3_demo_protocol_from_name(path));
    r->own = true;
    return 0;
}

void sg_q3_demo_reader_init(struct sg_q3_demo_reader *r, FILE *f, int protocol)
{
    memset(r, 0, sizeof(*r));
    r->f = f;
    r->protocol = protocol;
}

void sg_q3_demo_reader_finish(struct sg_q3_demo_reader *r)
{
    if (!r)
        return;
    if (r->own && r->f)
        fclose(r->f);
    memset(r, 0, sizeof(*r));
}

/* Read exactly `n` bytes; returns how many were read before the end. */
static size_t read_full(struct sg_q3_demo_reader *r, void *buf, size_t n)
{
    size_t got = fread(buf, 1, n, r->f);

    r->offset += got;
    return got;
}

/* The file ended inside or before a block header/body. */
static int truncated(struct sg_q3_demo_reader *r, size_t partial)
{
    r->truncated = true;
    r->partial = partial;
    return ferror(r->f) ? -EIO : SG_E_TRUNCATED;
}

int sg_q3_demo_read(struct sg_q3_demo_reader *r, int32_t *seq, uint8_t *buf, size_t *len)
{
    uint8_t hdr[8];
    size_t got;
    int32_t n;

    if (!r->f || r->ended)
        return 0;
    if (r->truncated)
        return SG_E_TRUNCATED;

    /* sequence and length */
    got = read_full(r, hdr, sizeof(hdr));
    if (got != sizeof(hdr))
        return truncated(r, got);
    *seq = (int32_t)sg_le32(hdr);
    n = (int32_t)sg_le32(hdr + 4);
    if (n == -1) {
        r->ended = true;
        return 0;
    }
    if (n < 0)
        return SG_E_MALFORMED;
    if (n > SG_Q3_MAX_MSGLEN)
        return SG_E_TOOBIG;

    /* the message bytes */
    got = read_full(r, buf, (size_t)n);
    if (got != (size_t)n)
        return truncated(r, sizeof(hdr) + got);
    *len = (size_t)n;
    r->messages++;
    return 1;
}

int sg_q3_demo_writer_open(struct sg_q3_demo_writer *w, const char *path)
{
    FILE *f = fopen(path, "wb");

    if (!f)
        return -errno;
    sg_q3_demo_writer_init(w, f);
    w->own = true;
    return 0;
}

void sg_q3_demo_writer_init(struct sg_q3_demo_writer *w, FILE *f)
{
    memset(w, 0, sizeof(*w));
    w->f = f;
}

/* Write a block header and body. */
static int put_block(struct sg_q3_demo_writer *w, int32_t seq, int32_t len, const uint8_t *data)
{
    uint8_t hdr[8];

    if (w->error)
        return w->error;
    sg_put_le32(hdr, (uint32_t)seq);
    sg_put_le32(hdr + 4, (uint32_t)len);
    if (fwrite(hdr, 1, sizeof(hdr), w->f) != sizeof(hdr) ||
        (len > 0 && fwrite(data, 1, (size_t)len, w->f) != (size_t)len))
        w->error = sg_write_error(); /* -ENOSPC on a full disk */
    return w->error;
}

int sg_q3_demo_write(struct sg_q3_demo_writer *w, int32_t seq, const uint8_t *data, size_t len)
{
    int err;

    if (len > SG_Q3_MAX_MSGLEN)
        return SG_E_TOOBIG;
    err = put_block(w, seq, (int32_t)len, data);
    if (err == 0)
        w->messages++;
    return err;
}

int sg_q3_demo_writer_finish(struct sg_q3_demo_writer *w)
{
    int err;

    if (!w || !w->f)
        return 0;
    err = put_block(w, -1, -1, NULL);
    if (fflush(w->f) != 0 && !err)
        err = -errno;
    if (w->own && fclose(w->f) != 0 && !err)
        err = -errno;
    w->f = NULL;
    return err;
}
