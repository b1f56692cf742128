/*
 * The games' text helpers (text.h): escaped text for dumps, and the
 * command words, quoted arguments and chat texts the filters read.
 */
#include "protocols/text.h"

#include "protocols/json.h"

#include <string.h>

void sg_put_escaped(FILE *out, const uint8_t *s, size_t n, bool json)
{
    if (json) {
        sg_json_chars(out, s, n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned ch = s[i];
        if (ch == '"' || ch == '\\')
            fprintf(out, "\\%c", ch);
        else if (ch == '\n')
            fputs("\\n", out);
        else if (ch < 0x20 || ch > 0x7e)
            fprintf(out, "\\x%02x", ch);
        else
            fputc((int)ch, out);
    }
}

size_t sg_text_verb(const char *s, size_t n, char *verb, size_t cap)
{
    size_t i = 0, k = 0;

    while (i < n && s[i] == ' ')
        i++;
    while (i < n && s[i] != ' ' && s[i] != '\n') {
        if (k + 1 < cap)
            verb[k++] = s[i];
        i++;
    }
    verb[k] = 0;
    while (i < n && s[i] == ' ')
        i++;
    return i;
}

void sg_text_unquoted(const char *s, size_t n, const char **t, size_t *len)
{
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
        n--;
    if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
        s++;
        n -= 2;
    }
    *t = s;
    *len = n;
}

bool sg_text_say(const char *s, size_t n, const char **t, size_t *len)
{
    char verb[32];
    size_t at = sg_text_verb(s, n, verb, sizeof(verb));

    if (strcmp(verb, "say") != 0 && strcmp(verb, "say_team") != 0)
        return false;
    sg_text_unquoted(s + at, n - at, t, len);
    return true;
}
