#include "protocols/text.h"

void sg_put_escaped(FILE *out, const uint8_t *s, size_t n, bool json)
{
    for (size_t i = 0; i < n; i++) {
        unsigned ch = s[i];
        if (ch == '"' || ch == '\\')
            fprintf(out, "\\%c", ch);
        else if (ch == '\n')
            fputs("\\n", out);
        else if (ch < 0x20 || ch > 0x7e)
            fprintf(out, json ? "\\u%04x" : "\\x%02x", ch);
        else
            fputc((int)ch, out);
    }
}
