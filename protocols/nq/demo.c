/*
 * The NetQuake .dem container (demo.h): recognising one, and the
 * streaming reader of its cd-track line and blocks.  No message decoding
 * happens here.
 */
#include "protocols/nq/demo.h"

#include "protocols/byteorder.h"
#include "protocols/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int sg_nq_dem_probe(const uint8_t *head, size_t len)
{
    size_t i = 0, digits = 0;

    if (len > 0 && head[0] == '-')
        i++;
    for (; i < len && i < TRACK_MAX; i++) {
        if (head[i] == '\n')
            return digits > 0 ? SG_DEMO_PROBE_YES : SG_DEMO_PROBE_NO;
        if (head[i] < '0' || head[i] > '9')
            return SG_DEMO_PROBE_NO;
        digits++;
    }
    return i >= TRACK_MAX ? SG_DEMO_PROBE_NO : SG_DEMO_PROBE_UNKNOWN;
}

int sg_nq__dem_open(struct dem *d, FILE *in)
{
    int ch;

    memset(d, 0, sizeof(*d));
    d->in = in;
    sg_nq_proto_set(&d->proto, SG_NQ_PROTOCOL_NETQUAKE, 0);
    while ((ch = getc(in)) != EOF) {
        if (d->track_len >= TRACK_MAX)
            return SG_E_MALFORMED;
        d->track[d->track_len++] = (char)ch;
        if (ch == '\n')
            return sg_nq_dem_probe((const uint8_t *)d->track, d->track_len) == SG_DEMO_PROBE_YES
                       ? 0
                       : SG_E_MALFORMED;
    }
    return SG_E_MALFORMED;
}

void sg_nq__dem_close(struct dem *d)
{
    free(d->buf);
    sg_nq_parsed_free(&d->parsed);
}

int sg_nq__dem_next(struct dem *d)
{
    uint8_t hdr[16];
    size_t n = fread(hdr, 1, sizeof(hdr), d->in);

    if (n == 0)
        return ferror(d->in) ? -EIO : 0;
    if (n < sizeof(hdr)) {
        d->truncated = true;
        return 0;
    }
    d->len = sg_le32(hdr);
    memcpy(d->angles, hdr + 4, 12);
    if (d->len > SG_NQ_DEM_MAX_BLOCK) {
        d->too_long = true;
        return 0;
    }
    if (d->len > d->cap) {
        uint8_t *b = realloc(d->buf, d->len);
        if (!b)
            return -ENOMEM;
        d->buf = b;
        d->cap = d->len;
    }
    if (fread(d->buf, 1, d->len, d->in) != d->len) {
        d->truncated = true;
        return 0;
    }
    d->blocks++;
    return 1;
}
