/*
 * Quake 2's zlib, in one place: the inflate streams the parser runs (a
 * zpacket's raw deflate, a zdownload's stream across messages, a rerelease
 * blast's zlib-wrapped data) and the deflate that packs a changed zpacket
 * again.  Every inflate is bounded by its caller's output length.
 */
#include "protocols/q2/parse.h"

#include <zlib.h>

/* Set up `z` for inflating with `wbits` (-MAX_WBITS: raw deflate;
 * MAX_WBITS: zlib-wrapped, as inflateInit); false when zlib could not. */
static bool start(z_stream *z, int wbits)
{
    return inflateInit2(z, wbits) == Z_OK;
}

/* `inlen` bytes of `in` inflated to the stream's end into `out`, no more
 * than `outlen` bytes; zlib's return code. */
static int finish(z_stream *z, const uint8_t *in, uint32_t inlen, uint8_t *out, uint32_t outlen)
{
    z->next_in = (Bytef *)(uintptr_t)in;
    z->avail_in = inlen;
    z->next_out = out;
    z->avail_out = outlen;
    return inflate(z, Z_FINISH);
}

/* A zpacket's raw deflate through the parsed stream's one inflater: 0,
 * -ENOMEM (no inflater), SG_E_INFLATE (a broken stream). */
static int zpacket_inflate(struct sg_q2_parsed *o, const uint8_t *in, uint32_t inlen, uint8_t *out,
                           uint32_t outlen)
{
    z_stream *z;

    /* One raw-deflate stream per parsed stream, set up on the first zpacket
     * and reset for each later one (its window is allocated once). */
    if (!o->inflater) {
        z = calloc(1, sizeof(*z));
        if (!z || !start(z, -MAX_WBITS)) {
            free(z);
            return -ENOMEM;
        }
        o->inflater = z;
    } else {
        z = o->inflater;
        if (inflateReset(z) != Z_OK)
            return SG_E_INFLATE;
    }
    /* bounded: no more than the header says (<= 32 KiB) */
    if (finish(z, in, inlen, out, outlen) != Z_STREAM_END)
        return SG_E_INFLATE;
    return 0;
}

/* A rerelease blast's zlib-wrapped data (zlib's `uncompress`), exactly
 * `outlen` bytes of it: 0, -ENOMEM or SG_E_INFLATE. */
static int zlib_uncompress(const uint8_t *in, uint32_t inlen, uint8_t *out, uint32_t outlen)
{
    z_stream z;
    int ret;

    memset(&z, 0, sizeof(z));
    if (!start(&z, MAX_WBITS))
        return -ENOMEM;
    /* bounded: no more than the header says (a bomb stops here) */
    ret = finish(&z, in, inlen, out, outlen);
    inflateEnd(&z);
    if (ret != Z_STREAM_END || z.total_out != outlen)
        return SG_E_INFLATE;
    return 0;
}

bool sg_q2__inflated(struct ctx *c, int self, bool wrapped, uint32_t most, struct ctx *sub)
{
    uint32_t inlen = num(c, "compressed", SG_BMSG_U16);
    uint32_t outlen = num(c, "uncompressed", SG_BMSG_U16);
    const uint8_t *in = data(c, "deflated", inlen);
    struct sg_q2_parsed *o = c->out;
    uint8_t *dst;
    int err;

    if (!in)
        return false;
    if (c->parent >= 0 || outlen > most) {
        fail(c, SG_E_MALFORMED); /* recursively entered, or too large */
        return false;
    }
    if (SG_Q2_ZPOOL - o->zpool_len < outlen) {
        fail(c, SG_E_TOOBIG);
        return false;
    }
    dst = o->zpool + o->zpool_len;
    err = wrapped ? zlib_uncompress(in, inlen, dst, outlen)
                  : zpacket_inflate(o, in, inlen, dst, outlen);
    if (err < 0) {
        fail(c, err);
        return false;
    }
    o->zpool_len += outlen;
    memset(sub, 0, sizeof(*sub));
    sg_bmsg_reader_init(&sub->r, dst, outlen);
    sub->v = c->v;
    sub->out = o;
    sub->dir = c->dir;
    sub->parent = self;
    return true;
}

/* The download's inflate stream: the client's (Q2PRO cls.download.z). */
struct sg_q2_zdl {
    z_stream z;
    bool live; /* inflateInit2 done */
    uint8_t out[16384];
};

void sg_q2__zdl_reset(struct sg_q2_zdl *d)
{
    if (d && d->live)
        inflateReset(&d->z);
}

int64_t sg_q2__zdl_inflate(struct sg_q2_parsed *o, const uint8_t *in, size_t n)
{
    struct sg_q2_zdl *d = o->zdl;
    int64_t total = 0;
    int ret;

    if (!d) {
        if (!(d = o->zdl = calloc(1, sizeof(*d))))
            return -ENOMEM;
    }
    if (!d->live) {
        if (!start(&d->z, -MAX_WBITS))
            return -ENOMEM;
        d->live = true;
    }
    if (n == 0)
        return 0;
    d->z.next_in = (Bytef *)(uintptr_t)in;
    d->z.avail_in = (uInt)n;
    do {
        d->z.next_out = d->out;
        d->z.avail_out = sizeof(d->out);
        ret = inflate(&d->z, Z_SYNC_FLUSH);
        if (ret != Z_OK && ret != Z_STREAM_END && ret != Z_BUF_ERROR) {
            sg_q2__zdl_reset(d);
            return SG_E_INFLATE;
        }
        total += (int64_t)(sizeof(d->out) - d->z.avail_out);
        if (total > SG_Q2_ZDL_MAX) {
            sg_q2__zdl_reset(d);
            return SG_E_TOOBIG;
        }
    } while (d->z.avail_out == 0 && ret != Z_STREAM_END);
    if (ret == Z_STREAM_END)
        sg_q2__zdl_reset(d);
    return total;
}

void sg_q2__zlib_free(struct sg_q2_parsed *p)
{
    if (p->inflater) {
        inflateEnd(p->inflater);
        free(p->inflater);
    }
    if (p->zdl) {
        if (p->zdl->live)
            inflateEnd(&p->zdl->z);
        free(p->zdl);
    }
}

int sg_q2_deflate(const uint8_t *in, size_t inlen, uint8_t *out, size_t cap, size_t *outlen)
{
    z_stream z;
    int ret;

    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 9, Z_DEFAULT_STRATEGY) !=
        Z_OK)
        return -ENOMEM;
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)inlen;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    ret = deflate(&z, Z_FINISH);
    *outlen = cap - z.avail_out;
    deflateEnd(&z);
    return ret == Z_STREAM_END ? 0 : SG_E_OVERFLOW;
}
