/* Helpers shared by the libFuzzer targets (fuzz_common.h). */
#include "fuzz_common.h"

#include <stdlib.h>
#include <string.h>

#include "protocols/byteorder.h"
#include "protocols/codec.h"
#include "protocols/error.h"
#include "protocols/q3/proto.h"

_Noreturn void fuzz_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "%s:%d: property failed: %s\n", file, line, what);
    fflush(stderr);
    abort();
}

/* ---- input cursor ---- */

void fuzz_in_init(struct fuzz_in *in, const uint8_t *data, size_t size)
{
    in->p = data;
    in->left = size;
}

const uint8_t *fuzz_bytes(struct fuzz_in *in, size_t n, size_t *got)
{
    const uint8_t *p = in->p;

    if (n > in->left)
        n = in->left;
    in->p += n;
    in->left -= n;
    *got = n;
    return p;
}

uint8_t fuzz_u8(struct fuzz_in *in)
{
    uint8_t b[1] = {0};
    size_t got;
    const uint8_t *p = fuzz_bytes(in, 1, &got);

    memcpy(b, p, got);
    return b[0];
}

uint16_t fuzz_le16(struct fuzz_in *in)
{
    uint8_t b[2] = {0};
    size_t got;
    const uint8_t *p = fuzz_bytes(in, 2, &got);

    memcpy(b, p, got);
    return sg_le16(b);
}

uint32_t fuzz_le32(struct fuzz_in *in)
{
    uint8_t b[4] = {0};
    size_t got;
    const uint8_t *p = fuzz_bytes(in, 4, &got);

    memcpy(b, p, got);
    return sg_le32(b);
}

/* ---- a stream that discards its output ---- */

static ssize_t null_write(void *cookie, const char *buf, size_t size)
{
    (void)cookie;
    (void)buf;
    return (ssize_t)size;
}

FILE *fuzz_null_file(void)
{
    cookie_io_functions_t io = {.write = null_write};

    return fopencookie(NULL, "w", io);
}

/* ---- decoded server messages ---- */

/* Same bytes behind two references (and the same "cut" flag)? */
static bool same_bytes(const struct sg_q3_svmsg *a, struct sg_q3_bytes ra,
                       const struct sg_q3_svmsg *b, struct sg_q3_bytes rb)
{
    return ra.len == rb.len && ra.cut == rb.cut &&
           memcmp(sg_q3_svmsg_bytes(a, ra), sg_q3_svmsg_bytes(b, rb), ra.len) == 0;
}

static bool same_snap(const struct sg_q3_svmsg *a, const struct sg_q3_snap *x,
                      const struct sg_q3_svmsg *b, const struct sg_q3_snap *y, bool state_fields)
{
    if (x->server_time != y->server_time || x->delta_num != y->delta_num ||
        x->snap_flags != y->snap_flags || x->areamask_len != y->areamask_len ||
        memcmp(x->areamask, y->areamask, x->areamask_len) != 0 ||
        memcmp(&x->ps, &y->ps, sizeof(x->ps)) != 0 || x->num_ents != y->num_ents)
        return false;
    if (state_fields &&
        (x->status != y->status || x->num_entities != y->num_entities ||
         x->message_num != y->message_num || x->delta_message_num != y->delta_message_num))
        return false;
    for (uint32_t i = 0; i < x->num_ents; i++)
        if (memcmp(&a->ents[x->first_ent + i], &b->ents[y->first_ent + i], sizeof(a->ents[0])))
            return false;
    return true;
}

static bool same_gamestate(const struct sg_q3_svmsg *a, const struct sg_q3_op *x,
                           const struct sg_q3_svmsg *b, const struct sg_q3_op *y)
{
    if (x->u.gamestate.command_seq != y->u.gamestate.command_seq ||
        x->u.gamestate.client_num != y->u.gamestate.client_num ||
        x->u.gamestate.checksum_feed != y->u.gamestate.checksum_feed ||
        x->u.gamestate.num_items != y->u.gamestate.num_items)
        return false;
    for (uint32_t i = 0; i < x->u.gamestate.num_items; i++) {
        const struct sg_q3_gs_item *p = &a->items[x->u.gamestate.first_item + i];
        const struct sg_q3_gs_item *q = &b->items[y->u.gamestate.first_item + i];

        if (p->op != q->op || p->index != q->index)
            return false;
        if (p->op == SG_Q3_SVC_CONFIGSTRING
                ? !same_bytes(a, p->text, b, q->text)
                : memcmp(&a->ents[p->ent], &b->ents[q->ent], sizeof(a->ents[0])) != 0)
            return false;
    }
    return true;
}

static bool same_op(const struct sg_q3_svmsg *a, const struct sg_q3_op *x,
                    const struct sg_q3_svmsg *b, const struct sg_q3_op *y, bool state_fields)
{
    if (x->type != y->type)
        return false;
    switch (x->type) {
    case SG_Q3_SVC_SERVERCOMMAND:
        return x->u.cmd.sequence == y->u.cmd.sequence &&
               same_bytes(a, x->u.cmd.text, b, y->u.cmd.text) &&
               (!state_fields || x->u.cmd.fresh == y->u.cmd.fresh);
    case SG_Q3_SVC_SNAPSHOT:
        return same_snap(a, &a->snaps[x->u.snap], b, &b->snaps[y->u.snap], state_fields);
    case SG_Q3_SVC_GAMESTATE:
        return same_gamestate(a, x, b, y);
    case SG_Q3_SVC_DOWNLOAD:
        return x->u.download.block == y->u.download.block &&
               x->u.download.has_size == y->u.download.has_size &&
               x->u.download.size == y->u.download.size &&
               same_bytes(a, x->u.download.error, b, y->u.download.error) &&
               same_bytes(a, x->u.download.data, b, y->u.download.data);
    case SG_Q3_SVC_VOIP_SPEEX:
    case SG_Q3_SVC_VOIP_OPUS:
        return x->u.voip.sender == y->u.voip.sender && x->u.voip.sequence == y->u.voip.sequence &&
               x->u.voip.size == y->u.voip.size && x->u.voip.flags == y->u.voip.flags &&
               x->u.voip.frames == y->u.voip.frames &&
               x->u.voip.generation == y->u.voip.generation &&
               same_bytes(a, x->u.voip.data, b, y->u.voip.data);
    default:
        return true;
    }
}

bool fuzz_same_svmsg(const struct sg_q3_svmsg *a, const struct sg_q3_svmsg *b, bool state_fields)
{
    if (a->reliable_ack != b->reliable_ack || a->num_ops != b->num_ops)
        return false;
    for (uint32_t i = 0; i < a->num_ops; i++)
        if (!same_op(a, &a->ops[i], b, &b->ops[i], state_fields))
            return false;
    return true;
}

void fuzz_door(const uint8_t *d, size_t n)
{
    uint8_t out[128];

    if (!d)
        return;
    for (int i = 0; sg_codecs[i]; i++) {
        const struct sg_codec *c = sg_codecs[i];
        for (size_t cap = n < sizeof(out) ? n : sizeof(out), k = 0; k < 2; k++, cap /= 2) {
            for (int h = 0; h < 2; h++) {
                size_t (*fn)(const uint8_t *, size_t, uint8_t *, size_t) =
                    h ? c->full_reply : c->banned_reply;
                size_t got = fn ? fn(d, n, out, cap) : 0;
                FUZZ_CHECK(got <= cap && got <= n);
                FUZZ_CHECK(got == 0 || got >= 5);
                FUZZ_CHECK(got == 0 ||
                           (out[0] == 0xff && out[1] == 0xff && out[2] == 0xff && out[3] == 0xff) ||
                           (out[0] == 0x80 && sg_be32(out) == (0x80000000u | (uint32_t)got)));
            }
        }
        if (c->is_admin)
            (void)c->is_admin(d, n);
    }
}

void fuzz_status(const uint8_t *d, size_t n)
{
    for (int i = 0; sg_codecs[i]; i++) {
        const struct sg_codec_status *st = sg_codecs[i]->status;
        struct sg_codec_server sv;
        int err;

        if (!st || !st->parse)
            continue;
        memset(&sv, 0x55, sizeof(sv)); /* what the hook must overwrite */
        err = st->parse(d, n, &sv);
        FUZZ_CHECK(err == 0 || err == SG_E_MALFORMED);
        FUZZ_CHECK(memchr(sv.hostname, 0, sizeof(sv.hostname)) != NULL);
        FUZZ_CHECK(memchr(sv.map, 0, sizeof(sv.map)) != NULL);
        FUZZ_CHECK(sv.players >= -1 && sv.max_players >= -1);
        if (err == 0)
            FUZZ_CHECK(sg_codec_status_is_reply(st, d, n));
        else
            FUZZ_CHECK(!sv.hostname[0] && !sv.map[0] && sv.players == -1 &&
                       sv.max_players == -1);
    }
}
