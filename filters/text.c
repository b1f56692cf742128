/*
 * Helpers shared by the text filters (filters/text.h).
 */
#include "filters/text.h"

#include "protocols/error.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const sg_filter__direction_choices[] = {"both", "to_client", "to_server", NULL};

/* ---- kind lists ---- */

/* One word of a kinds list; 0 or SG_E_CONFIG. */
static int add_kind(const char *word, size_t n, const char *directive, int line, uint32_t *mask,
                    char *err, size_t errlen)
{
    char name[32];
    int k;

    if (n == 0)
        return 0; /* "print,,chat" or a trailing comma */
    if (n >= sizeof(name))
        n = sizeof(name) - 1;
    memcpy(name, word, n);
    name[n] = '\0';
    if (strcmp(name, "text") == 0) {
        *mask |= SG_KINDS_TEXT;
        return 0;
    }
    if (strcmp(name, "all") == 0) {
        *mask |= SG_KINDS_TEXT | SG_KIND_BIT(SG_MSG_GAME);
        return 0;
    }
    k = sg_msg_kind_parse(name);
    if (k < 0) {
        snprintf(err, errlen,
                 "'%s' on line %d: unknown message kind '%s'; kinds are print, centerprint, "
                 "chat, servercmd, clientcmd, stufftext, configstring, disconnect, game, "
                 "text (every text kind) and all",
                 directive, line, name);
        return SG_E_CONFIG;
    }
    *mask |= SG_KIND_BIT(k);
    return 0;
}

int sg_filter__kinds_parse(const struct sg_conf_list *list, const char *directive, uint32_t *mask,
                           char *err, size_t errlen)
{
    uint32_t m = 0;

    if (!list || list->count == 0)
        return 0;
    for (int i = 0; i < list->count; i++) {
        const struct sg_conf_list_item *it = &list->items[i];
        for (int a = 0; a < it->argc; a++) {
            const char *w = it->argv[a];
            for (;;) {
                const char *comma = strchr(w, ',');
                size_t n = comma ? (size_t)(comma - w) : strlen(w);
                int rc = add_kind(w, n, directive, it->line, &m, err, errlen);
                if (rc < 0)
                    return rc;
                if (!comma)
                    break;
                w = comma + 1;
            }
        }
    }
    if (m == 0) {
        snprintf(err, errlen, "'%s' names no message kind", directive);
        return SG_E_CONFIG;
    }
    *mask = m;
    return 0;
}

/* ---- regular expressions ---- */

int sg_filter__regexes_compile(struct sg_filter__regexes *out, const struct sg_conf_list *list,
                               const char *directive, int cflags, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (!list || list->count == 0)
        return 0;
    out->v = calloc((size_t)list->count, sizeof(*out->v));
    if (!out->v) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    for (int i = 0; i < list->count; i++) {
        const struct sg_conf_list_item *it = &list->items[i];
        struct sg_filter__regex *r = &out->v[i];
        int rc;

        r->source = it->argv[0];
        r->arg1 = it->argc > 1 ? it->argv[1] : NULL;
        r->line = it->line;
        rc = regcomp(&r->re, r->source, REG_EXTENDED | cflags);
        if (rc != 0) {
            char why[128];
            regerror(rc, &r->re, why, sizeof(why));
            snprintf(err, errlen, "'%s' on line %d: bad regular expression '%.60s': %s", directive,
                     it->line, r->source, why);
            out->n = i;
            sg_filter__regexes_free(out);
            return SG_E_CONFIG;
        }
        r->compiled = true;
        out->n = i + 1;
    }
    return 0;
}

void sg_filter__regexes_free(struct sg_filter__regexes *rx)
{
    if (!rx)
        return;
    for (int i = 0; i < rx->n; i++)
        if (rx->v[i].compiled)
            regfree(&rx->v[i].re);
    free(rx->v);
    rx->v = NULL;
    rx->n = 0;
}

int sg_filter__regexes_match(const struct sg_filter__regexes *rx, const char *text)
{
    for (int i = 0; i < rx->n; i++)
        if (regexec(&rx->v[i].re, text, 0, NULL, 0) == 0)
            return i;
    return -1;
}

/* ---- log text ---- */

size_t sg_filter__escape(char *out, size_t cap, const char *text, size_t len, size_t clip,
                         bool strip_colors)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0, i;

    if (cap == 0)
        return 0;
    for (i = 0; i < len && i < clip; i++) {
        unsigned char c = (unsigned char)text[i];
        char e[5];
        size_t k = 0;

        if (strip_colors && c == '^' && i + 1 < len && isalnum((unsigned char)text[i + 1])) {
            i++;
            continue;
        }
        if (c == '\\' || c == '\n' || c == '\r' || c == '\t') {
            e[k++] = '\\';
            e[k++] = c == '\\' ? '\\' : c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        } else if (c < 0x20 || c > 0x7e) {
            e[k++] = '\\';
            e[k++] = 'x';
            e[k++] = hex[c >> 4];
            e[k++] = hex[c & 15];
        } else {
            e[k++] = (char)c;
        }
        if (n + k + 1 > cap)
            break;
        memcpy(out + n, e, k);
        n += k;
    }
    if (i < len && n + 4 <= cap) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = '\0';
    return n;
}

void sg_filter__timestamp(char *out, size_t cap)
{
    struct timespec ts;
    struct tm tm;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
}
