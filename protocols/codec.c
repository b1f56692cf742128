/* The codec registry: every game slipgate can decode. */
#include "protocols/codec.h"

#include <string.h>

extern const struct sg_codec sg_q3_codec;

const struct sg_codec *const sg_codecs[] = {
    &sg_q3_codec,
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
