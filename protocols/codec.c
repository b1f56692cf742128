/* The codec registry: every game slipgate knows (decoders first, then relay-only games). */
#include "protocols/codec.h"
#include "protocols/door.h"

#include <string.h>
#include <strings.h>

extern const struct sg_codec sg_q3_codec;
extern const struct sg_codec sg_nq_codec;
extern const struct sg_codec sg_qw_codec;
extern const struct sg_codec sg_q2_codec;

const struct sg_codec *const sg_codecs[] = {
    &sg_q3_codec,
    &sg_qw_codec,
    &sg_nq_codec,
    &sg_q2_codec,
    NULL,
};

const struct sg_codec *sg_codec_find(const char *name)
{
    for (int i = 0; sg_codecs[i]; i++)
        if (strcmp(sg_codecs[i]->name, name) == 0)
            return sg_codecs[i];
    return NULL;
}

void sg_codecs_prepare(void)
{
    for (int i = 0; sg_codecs[i]; i++)
        if (sg_codecs[i]->prepare)
            sg_codecs[i]->prepare();
}

const struct sg_codec *sg_codec_probe(const uint8_t *data, size_t len)
{
    for (int i = 0; sg_codecs[i]; i++)
        if (sg_codecs[i]->probe && sg_codecs[i]->probe(data, len))
            return sg_codecs[i];
    return NULL;
}

const struct sg_codec *sg_codec_connect(const uint8_t *data, size_t len, const struct sg_codec *not)
{
    for (int i = 0; sg_codecs[i]; i++)
        if (sg_codecs[i] != not && sg_codecs[i]->is_connect && sg_codecs[i]->is_connect(data, len))
            return sg_codecs[i];
    return NULL;
}

const struct sg_codec *sg_codec_handshaker(void)
{
    for (int i = 0; sg_codecs[i]; i++)
        if (sg_codecs[i]->handshake)
            return sg_codecs[i];
    return NULL;
}

const struct sg_codec *sg_codec_demo_ext(const char *ext)
{
    for (int i = 0; sg_codecs[i]; i++) {
        const struct sg_demo_impl *d = sg_codecs[i]->demo_reader;

        for (int j = 0; d && d->extensions[j]; j++)
            if (strcasecmp(d->extensions[j], ext) == 0)
                return sg_codecs[i];
    }
    return NULL;
}

/*
 * Demo files of the games whose codec has no reader yet, so that the tools
 * can name the game.  A game leaves this list when its codec gains a
 * demo_reader (which then lists the extensions itself).
 */
static const struct {
    const char *game, *exts[3], *list;
} unreadable[] = {
    {NULL, {NULL, NULL, NULL}, NULL}, /* none left: every game reads its demos now */
};

const char *sg_codec_demo_unreadable(const char *ext, const char **exts)
{
    for (size_t i = 0; i < sizeof(unreadable) / sizeof(unreadable[0]); i++) {
        if (!unreadable[i].game)
            continue; /* the sentinel */
        const struct sg_codec *c = sg_codec_find(unreadable[i].game);

        if (c && c->demo_reader)
            continue; /* readable after all */
        for (int j = 0; unreadable[i].exts[j]; j++)
            if (strcasecmp(unreadable[i].exts[j], ext) == 0) {
                if (exts)
                    *exts = unreadable[i].list;
                return unreadable[i].game;
            }
    }
    return NULL;
}

const char *sg_codec_demo_unreadable_at(int i, const char **exts)
{
    for (size_t k = 0; k < sizeof(unreadable) / sizeof(unreadable[0]); k++) {
        if (!unreadable[k].game)
            continue; /* the sentinel */
        const struct sg_codec *c = sg_codec_find(unreadable[k].game);

        if (c && c->demo_reader)
            continue;
        if (i-- == 0) {
            if (exts)
                *exts = unreadable[k].list;
            return unreadable[k].game;
        }
    }
    return NULL;
}

const struct sg_codec *sg_codec_capture_default(void)
{
    for (int i = 0; sg_codecs[i]; i++)
        if (sg_codecs[i]->capture)
            return sg_codecs[i];
    return NULL;
}

static const char *const kind_names[SG_MSG_KIND_COUNT] = {
    [SG_MSG_PRINT] = "print",
    [SG_MSG_CENTERPRINT] = "centerprint",
    [SG_MSG_CHAT] = "chat",
    [SG_MSG_SERVER_COMMAND] = "servercmd",
    [SG_MSG_CLIENT_COMMAND] = "clientcmd",
    [SG_MSG_STUFFTEXT] = "stufftext",
    [SG_MSG_CONFIGSTRING] = "configstring",
    [SG_MSG_DISCONNECT] = "disconnect",
    [SG_MSG_GAME] = "game",
};

const char *sg_msg_kind_name(enum sg_msg_kind kind)
{
    return (unsigned)kind < SG_MSG_KIND_COUNT ? kind_names[kind] : "unknown";
}

int sg_msg_kind_parse(const char *name)
{
    for (int i = 0; i < SG_MSG_KIND_COUNT; i++)
        if (strcmp(kind_names[i], name) == 0)
            return i;
    return -1;
}

int sg_codec_status_query(const struct sg_codec_status *st, uint8_t *out, size_t cap)
{
    if (st->query)
        return st->query(out, cap);
    return sg_door_put(out, cap, st->query_text, strlen(st->query_text));
}

bool sg_codec_status_is_reply(const struct sg_codec_status *st, const uint8_t *data, size_t len)
{
    if (st->is_reply)
        return st->is_reply(data, len);
    return sg_door_starts(data, len, st->reply_text, strlen(st->reply_text));
}

int sg_codec_heartbeat(const struct sg_codec_master *m, uint8_t *out, size_t cap,
                       const uint8_t *status, size_t status_len, uint32_t sequence)
{
    if (m->heartbeat)
        return m->heartbeat(out, cap, status, status_len, sequence);
    return sg_door_put(out, cap, m->heartbeat_text, strlen(m->heartbeat_text));
}

int sg_codec_master_shutdown(const struct sg_codec_master *m, uint8_t *out, size_t cap)
{
    if (m->shutdown)
        return m->shutdown(out, cap);
    if (!m->shutdown_text)
        return 0;
    return sg_door_put(out, cap, m->shutdown_text, strlen(m->shutdown_text));
}
