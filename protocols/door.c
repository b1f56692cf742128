/*
 * What the games share at the door (door.h).
 */
#include "protocols/door.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

bool sg_door_oob_is(const uint8_t *d, size_t n, const char *word, bool icase)
{
    size_t w = strlen(word);

    if (n < 4 + w || memcmp(d, "\xff\xff\xff\xff", 4) != 0)
        return false;
    if (icase ? strncasecmp((const char *)d + 4, word, w) != 0 : memcmp(d + 4, word, w) != 0)
        return false;
    return n == 4 + w || d[4 + w] == ' ' || d[4 + w] == '\n' || d[4 + w] == '\0' ||
           d[4 + w] == '\t';
}

size_t sg_door_oob_print(uint8_t *out, size_t cap, const char *head, const char *const *texts,
                         bool nul)
{
    size_t h = strlen(head);

    for (int i = 0; texts[i]; i++) {
        size_t t = strlen(texts[i]), len = 4 + h + t + (nul ? 1 : 0);
        if (len > cap)
            continue;
        memcpy(out, "\xff\xff\xff\xff", 4);
        memcpy(out + 4, head, h);
        memcpy(out + 4 + h, texts[i], t);
        if (nul)
            out[4 + h + t] = '\0';
        return len;
    }
    return 0;
}

int sg_door_put(uint8_t *out, size_t cap, const void *bytes, size_t n)
{
    if (cap < n || n > INT32_MAX)
        return -ENOSPC;
    memcpy(out, bytes, n);
    return (int)n;
}

bool sg_door_starts(const uint8_t *d, size_t len, const void *prefix, size_t n)
{
    return len >= n && memcmp(d, prefix, n) == 0;
}

int sg_door_oob_printf(uint8_t *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (cap < 5)
        return -ENOSPC;
    memcpy(out, "\xff\xff\xff\xff", 4);
    va_start(ap, fmt);
    n = vsnprintf((char *)out + 4, cap - 4, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n + 1 > cap - 4)
        return -ENOSPC;
    return 4 + n + 1;
}
