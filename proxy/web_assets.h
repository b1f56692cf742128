/*
 * The web page's files (doc/web/), compiled in by scripts/embed_web.py:
 * no CDN, nothing to install.
 */
#ifndef SG_PROXY_WEB_ASSETS_H
#define SG_PROXY_WEB_ASSETS_H

#include <stddef.h>

struct sg_web_asset {
    const char *path; /* "/", "/app.js", ... */
    const char *type; /* Content-Type */
    const unsigned char *data;
    size_t len;
};

extern const struct sg_web_asset sg_web_assets[];
extern const size_t sg_web_assets_count;

#endif
