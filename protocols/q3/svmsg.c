/*
 * Storage for decoded Quake 3 server messages (see svmsg.h): growable
 * pools owned by the message, reused across decodes.
 */
#include "protocols/q3/svmsg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/error.h"

/* No pool may grow past this many elements (a 16 KiB message holds far fewer). */
#define POOL_LIMIT (1u << 20)

void sg_q3_svmsg_init(struct sg_q3_svmsg *msg)
{
    memset(msg, 0, sizeof(*msg));
    msg->variant = &sg_q3_variant_68;
}


void sg_q3_svmsg_finish(struct sg_q3_svmsg *msg)
{
    if (!msg)
        return;
    free(msg->ops);
    free(msg->snaps);
    free(msg->ents);
    free(msg->items);
    free(msg->bytes);
    memset(msg, 0, sizeof(*msg));
}

void sg_q3_svmsg_reset(struct sg_q3_svmsg *msg)
{
    msg->sequence = 0;
    msg->reliable_ack = 0;
    msg->num_ops = 0;
    msg->num_snaps = 0;
    msg->num_ents = 0;
    msg->num_items = 0;
    msg->num_bytes = 0;
    msg->has_tail = false;
    msg->end_bit = 0;
    msg->tail = (struct sg_q3_bytes){0, 0, false};
}

/* Make room for `want` elements of `size` bytes in *pool (capacity *cap). */
static int grow(void **pool, uint32_t *cap, size_t size, uint32_t want)
{
    uint32_t ncap;
    void *p;

    if (want <= *cap)
        return 0;
    if (want > POOL_LIMIT)
        return SG_E_TOOBIG;
    ncap = *cap ? *cap : 16;
    while (ncap < want)
        ncap *= 2;
    p = realloc(*pool, (size_t)ncap * size);
    if (!p)
        return -ENOMEM;
    *pool = p;
    *cap = ncap;
    return 0;
}

/* Append one zeroed element; returns its index. */
static int append(void **pool, uint32_t *num, uint32_t *cap, size_t size)
{
    int err = grow(pool, cap, size, *num + 1);

    if (err < 0)
        return err;
    memset((uint8_t *)*pool + (size_t)*num * size, 0, size);
    return (int)(*num)++;
}

int sg_q3_svmsg_add_op(struct sg_q3_svmsg *msg, int type)
{
    int i = append((void **)&msg->ops, &msg->num_ops, &msg->cap_ops, sizeof(*msg->ops));

    if (i >= 0)
        msg->ops[i].type = (uint8_t)type;
    return i;
}

int sg_q3_svmsg_add_snap(struct sg_q3_svmsg *msg)
{
    return append((void **)&msg->snaps, &msg->num_snaps, &msg->cap_snaps, sizeof(*msg->snaps));
}

int sg_q3_svmsg_add_ent(struct sg_q3_svmsg *msg)
{
    return append((void **)&msg->ents, &msg->num_ents, &msg->cap_ents, sizeof(*msg->ents));
}

int sg_q3_svmsg_add_item(struct sg_q3_svmsg *msg)
{
    return append((void **)&msg->items, &msg->num_items, &msg->cap_items, sizeof(*msg->items));
}

int sg_q3_svmsg_add_bytes(struct sg_q3_svmsg *msg, const void *data, size_t len,
                          struct sg_q3_bytes *out)
{
    int err;

    if (len > POOL_LIMIT)
        return SG_E_TOOBIG;
    err = grow((void **)&msg->bytes, &msg->cap_bytes, 1, msg->num_bytes + (uint32_t)len + 1);
    if (err < 0)
        return err;
    if (len)
        memcpy(msg->bytes + msg->num_bytes, data, len);
    msg->bytes[msg->num_bytes + len] = 0;
    out->off = msg->num_bytes;
    out->len = (uint32_t)len;
    out->cut = false;
    msg->num_bytes += (uint32_t)len + 1;
    return 0;
}

const uint8_t *sg_q3_svmsg_bytes(const struct sg_q3_svmsg *msg, struct sg_q3_bytes ref)
{
    static const uint8_t empty[1];

    if (!msg->bytes || (uint64_t)ref.off + ref.len >= (uint64_t)msg->num_bytes + 1)
        return empty;
    return msg->bytes + ref.off;
}

const char *sg_q3_svmsg_str(const struct sg_q3_svmsg *msg, struct sg_q3_bytes ref)
{
    return (const char *)sg_q3_svmsg_bytes(msg, ref);
}

unsigned sg_q3_svmsg_count(const struct sg_q3_svmsg *msg, int type)
{
    unsigned n = 0;

    for (uint32_t i = 0; i < msg->num_ops; i++)
        n += msg->ops[i].type == type;
    return n;
}

bool sg_q3_svmsg_disconnects(const struct sg_q3_svmsg *msg)
{
    for (uint32_t i = 0; i < msg->num_ops; i++)
        if (msg->ops[i].type == SG_Q3_SVC_SERVERCOMMAND &&
            sg_q3_command_is(sg_q3_svmsg_str(msg, msg->ops[i].u.cmd.text), "disconnect"))
            return true;
    return false;
}

const struct sg_q3_snap *sg_q3_svmsg_snapshot(const struct sg_q3_svmsg *msg)
{
    for (uint32_t i = 0; i < msg->num_ops; i++) {
        if (msg->ops[i].type == SG_Q3_SVC_SNAPSHOT && msg->ops[i].u.snap < msg->num_snaps)
            return &msg->snaps[msg->ops[i].u.snap];
    }
    return NULL;
}

size_t sg_q3_game_string(const uint8_t *raw, size_t len, char *out, size_t cap)
{
    size_t n = 0;

    if (cap == 0)
        return 0;
    for (size_t i = 0; i < len && n + 1 < cap; i++) {
        uint8_t c = raw[i];
        out[n++] = (c == '%' || c > 127) ? '.' : (char)c;
    }
    out[n] = 0;
    return n;
}
