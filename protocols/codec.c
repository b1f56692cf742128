/* The codec registry: every game slipgate knows (decoders first, then relay-only games). */
#include "protocols/codec.h"

#include <string.h>

extern const struct sg_codec sg_q3_codec;
extern const struct sg_codec sg_nq_relay;
extern const struct sg_codec sg_qw_codec;
extern const struct sg_codec sg_q2_relay;

const struct sg_codec *const sg_codecs[] = {
    &sg_q3_codec,
    &sg_qw_codec,
    &sg_nq_relay,
    &sg_q2_relay,
    NULL,
};

const struct sg_codec *sg_codec_find(const char *name)
{
    for (int i = 0; sg_codecs[i]; i++)
        if (strcmp(sg_codecs[i]->name, name) == 0)
            return sg_codecs[i];
    return NULL;
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
