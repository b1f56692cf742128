/*
 * JSON strings under the one rule of json.h.
 */
#include "protocols/json.h"

#include <string.h>

size_t sg_utf8_seq(const uint8_t *s, size_t n)
{
    uint8_t c = s[0], lo = 0x80, hi = 0xbf;
    size_t len;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4;
    else
        return 0; /* a continuation byte, an overlong lead (c0, c1) or past U+10FFFF */
    if (n < len)
        return 0;
    if (c == 0xe0)
        lo = 0xa0; /* overlong */
    else if (c == 0xed)
        hi = 0x9f; /* surrogates */
    else if (c == 0xf0)
        lo = 0x90; /* overlong */
    else if (c == 0xf4)
        hi = 0x8f; /* past U+10FFFF */
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return len;
}

void sg_json_chars(FILE *f, const void *p, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const uint8_t *s = p;
    size_t i = 0, run = 0; /* s[run..i) is written as it is */

    while (s && i < n) {
        uint8_t c = s[i];
        char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        size_t k;

        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            i++;
            continue;
        }
        if (c >= 0x80 && (k = sg_utf8_seq(s + i, n - i)) != 0) {
            i += k;
            continue;
        }
        if (i > run)
            fwrite(s + run, 1, i - run, f);
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
        } else if (c == '\n') {
            fputs("\\n", f);
        } else if (c == '\t') {
            fputs("\\t", f);
        } else if (c == '\r') {
            fputs("\\r", f);
        } else {
            fwrite(esc, 1, sizeof(esc), f);
        }
        run = ++i;
    }
    if (i > run)
        fwrite(s + run, 1, i - run, f);
}

void sg_json_str(FILE *f, const void *s, size_t n)
{
    fputc('"', f);
    sg_json_chars(f, s, n);
    fputc('"', f);
}

void sg_json_cstr(FILE *f, const char *s)
{
    sg_json_str(f, s, s ? strlen(s) : 0);
}
