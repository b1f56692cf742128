/*
 * fuzz_json: whatever bytes a peer or a file holds, the JSON slipgate
 * writes from them is strict JSON (RFC 8259) and valid UTF-8, and a
 * string says what protocols/json.h's rule says it says.
 *
 * Input: u8 mode, then the rest.  Bits 0-1 of mode pick the path, bits 2-3
 * the game (sg_codecs[] order: q3, qw, nq, q2), bits 4-5 which of the
 * game's demo file name endings a demo file has:
 *
 *     0  the rest as one string through sg_json_str: it parses as one JSON
 *        string whose characters are, in order, each well-formed UTF-8
 *        sequence of the input and each other byte read as Latin-1 (decoded
 *        here independently of json.c)
 *     1  the rest as a demo file through the game's `demo dump --json`:
 *        every line is one JSON value
 *     2  { u8 flags, le16 length, length bytes } ... datagrams (flags bit 0:
 *        server to client) through the game's capture decoder as `pcap
 *        decode --json` prints them: every datagram's object is JSON
 *     3  the same datagrams through the game's codec as a live session, each
 *        frame written by the codec's inspector dump (`/api/stream`'s and the
 *        json inspector's "game" member) at every level: each is JSON
 *
 * The checker below is strict: no trailing commas, no leading zeros, no
 * bare control characters, every \u escape a real character (surrogates
 * only in pairs), nesting at most 256 deep, and the text as a whole valid
 * UTF-8 (shortest form, no surrogates, at most U+10FFFF).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "protocols/codec.h"
#include "protocols/json.h"

/* ---- a strict JSON checker ---- */

struct jp {
    const uint8_t *p, *end;
    int depth;
    uint32_t *cps; /* a string's characters, when asked for */
    size_t ncps, cap;
};

/* One UTF-8 character of the text at jp->p into *cp; false if malformed. */
static bool utf8_char(struct jp *j, uint32_t *cp)
{
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint8_t c = *j->p;
    size_t n;
    uint32_t v;

    if (c < 0x80) {
        *cp = c;
        j->p++;
        return true;
    }
    if ((c & 0xe0) == 0xc0)
        n = 2, v = c & 0x1f;
    else if ((c & 0xf0) == 0xe0)
        n = 3, v = c & 0x0f;
    else if ((c & 0xf8) == 0xf0)
        n = 4, v = c & 0x07;
    else
        return false;
    if ((size_t)(j->end - j->p) < n)
        return false;
    for (size_t i = 1; i < n; i++) {
        if ((j->p[i] & 0xc0) != 0x80)
            return false;
        v = v << 6 | (j->p[i] & 0x3f);
    }
    if (v < min[n] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return false;
    *cp = v;
    j->p += n;
    return true;
}

static void ws(struct jp *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static bool lit(struct jp *j, const char *w)
{
    size_t n = strlen(w);

    if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n) != 0)
        return false;
    j->p += n;
    return true;
}

static int hexval(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool hex4(struct jp *j, uint32_t *v)
{
    *v = 0;
    if (j->end - j->p < 4)
        return false;
    for (int i = 0; i < 4; i++) {
        int h = hexval(j->p[i]);
        if (h < 0)
            return false;
        *v = *v << 4 | (uint32_t)h;
    }
    j->p += 4;
    return true;
}

static void keep(struct jp *j, uint32_t cp)
{
    if (!j->cps)
        return;
    FUZZ_CHECK(j->ncps < j->cap);
    j->cps[j->ncps++] = cp;
}

static bool string(struct jp *j)
{
    if (j->p >= j->end || *j->p != '"')
        return false;
    j->p++;
    while (j->p < j->end) {
        uint32_t cp;
        uint8_t c = *j->p;

        if (c == '"') {
            j->p++;
            return true;
        }
        if (c < 0x20)
            return false;
        if (c != '\\') {
            if (!utf8_char(j, &cp))
                return false;
            keep(j, cp);
            continue;
        }
        if (++j->p >= j->end)
            return false;
        c = *j->p++;
        switch (c) {
        case '"':
        case '\\':
        case '/':
            keep(j, c);
            break;
        case 'b':
            keep(j, 8);
            break;
        case 'f':
            keep(j, 12);
            break;
        case 'n':
            keep(j, 10);
            break;
        case 'r':
            keep(j, 13);
            break;
        case 't':
            keep(j, 9);
            break;
        case 'u':
            if (!hex4(j, &cp))
                return false;
            if (cp >= 0xdc00 && cp <= 0xdfff)
                return false; /* a low surrogate alone */
            if (cp >= 0xd800 && cp <= 0xdbff) {
                uint32_t lo;
                if (!lit(j, "\\u") || !hex4(j, &lo) || lo < 0xdc00 || lo > 0xdfff)
                    return false;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            keep(j, cp);
            break;
        default:
            return false;
        }
    }
    return false;
}

static bool digits(struct jp *j)
{
    const uint8_t *s = j->p;

    while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
        j->p++;
    return j->p > s;
}

static bool number(struct jp *j)
{
    if (j->p < j->end && *j->p == '-')
        j->p++;
    if (j->p < j->end && *j->p == '0')
        j->p++;
    else if (!digits(j))
        return false;
    if (j->p < j->end && *j->p == '.') {
        j->p++;
        if (!digits(j))
            return false;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
            j->p++;
        if (!digits(j))
            return false;
    }
    return true;
}

static bool value(struct jp *j)
{
    ws(j);
    if (j->p >= j->end)
        return false;
    switch (*j->p) {
    case '"':
        return string(j);
    case 't':
        return lit(j, "true");
    case 'f':
        return lit(j, "false");
    case 'n':
        return lit(j, "null");
    case '[':
    case '{': {
        bool obj = *j->p == '{';
        uint8_t close = obj ? '}' : ']';

        if (++j->depth > 256)
            return false;
        j->p++;
        ws(j);
        if (j->p < j->end && *j->p == close) {
            j->p++;
            j->depth--;
            return true;
        }
        for (;;) {
            if (obj) {
                ws(j);
                if (!string(j))
                    return false;
                ws(j);
                if (!lit(j, ":"))
                    return false;
            }
            if (!value(j))
                return false;
            ws(j);
            if (j->p >= j->end)
                return false;
            if (*j->p == close) {
                j->p++;
                j->depth--;
                return true;
            }
            if (*j->p++ != ',')
                return false;
        }
    }
    default:
        return number(j);
    }
}

/* Is [s, s+n) exactly one JSON value (whitespace around it allowed)? */
static bool is_json(const char *s, size_t n)
{
    struct jp j = {.p = (const uint8_t *)s, .end = (const uint8_t *)s + n};

    if (!value(&j))
        return false;
    ws(&j);
    return j.p == j.end;
}

static void check_json(const char *s, size_t n)
{
    if (!is_json(s, n)) {
        fprintf(stderr, "not JSON (%zu bytes): %.*s\n", n, (int)(n < 2000 ? n : 2000), s);
        FUZZ_CHECK(!"the output is JSON");
    }
}

/* Every non-empty line of [s, s+n) is one JSON value. */
static void check_lines(const char *s, size_t n)
{
    while (n) {
        const char *nl = memchr(s, '\n', n);
        size_t len = nl ? (size_t)(nl - s) : n;

        if (len)
            check_json(s, len);
        if (!nl)
            break;
        n -= len + 1;
        s = nl + 1;
    }
}

/* ---- the paths ---- */

/* The rule, decoded here from the input on its own terms. */
static size_t expected_chars(const uint8_t *s, size_t n, uint32_t *out)
{
    size_t k = 0;

    for (size_t i = 0; i < n;) {
        struct jp j = {.p = s + i, .end = s + n};
        uint32_t cp;

        if (utf8_char(&j, &cp)) {
            out[k++] = cp;
            i = (size_t)(j.p - s);
        } else {
            out[k++] = s[i++];
        }
    }
    return k;
}

static void one_string(const uint8_t *s, size_t n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    uint32_t *got = malloc((n + 1) * sizeof(*got)), *want = malloc((n + 1) * sizeof(*want));
    struct jp j;
    size_t nwant;

    FUZZ_CHECK(f && got && want);
    sg_json_str(f, s, n);
    FUZZ_CHECK(fclose(f) == 0);
    check_json(buf, len);
    j = (struct jp){
        .p = (const uint8_t *)buf, .end = (const uint8_t *)buf + len, .cps = got, .cap = n + 1};
    FUZZ_CHECK(string(&j) && j.p == j.end);
    nwant = expected_chars(s, n, want);
    FUZZ_CHECK(j.ncps == nwant && memcmp(got, want, nwant * sizeof(*got)) == 0);
    free(buf);
    free(got);
    free(want);
}

static void demo_dump(const struct sg_codec *c, int ext, const uint8_t *data, size_t size)
{
    char name[32], *buf = NULL;
    size_t len = 0;
    FILE *in, *out;
    int next = 0;

    if (!c->demo_reader)
        return;
    while (c->demo_reader->extensions[next + 1] && next < ext)
        next++;
    snprintf(name, sizeof(name), "fuzz.%s", c->demo_reader->extensions[next]);
    in = fmemopen((void *)(uintptr_t)data, size ? size : 1, "rb");
    out = open_memstream(&buf, &len);
    FUZZ_CHECK(in && out);
    if (size) /* fmemopen wants a size; an empty file is a file of size 0 */
        c->demo_reader->dump(in, name, true, out);
    FUZZ_CHECK(fclose(out) == 0);
    fclose(in);
    check_lines(buf, len);
    free(buf);
}

static void datagrams(const struct sg_codec *c, bool live, const uint8_t *data, size_t size)
{
    struct fuzz_in in;
    void *st = NULL;

    if (live ? c->create(&st) != 0 : !c->capture || c->capture->create(&st, NULL) != 0)
        return;
    fuzz_in_init(&in, data, size);
    while (in.left >= 3) {
        uint8_t flags = fuzz_u8(&in);
        uint16_t n = fuzz_le16(&in);
        size_t got;
        const uint8_t *p = fuzz_bytes(&in, n, &got);
        enum sg_dir dir = flags & 1 ? SG_DIR_S2C : SG_DIR_C2S;
        uint8_t *copy = malloc(got ? got : 1);
        char *buf = NULL;
        size_t len = 0;
        FILE *out;

        FUZZ_CHECK(copy != NULL);
        memcpy(copy, p, got);
        if (live) {
            const struct sg_frame *f = NULL;

            c->decode(st, dir, copy, got, &f);
            for (int level = SG_DUMP_PACKETS; f && c->dump && level <= SG_DUMP_FIELDS; level++) {
                out = open_memstream(&buf, &len);
                FUZZ_CHECK(out != NULL);
                int rc = c->dump(st, f, (enum sg_dump_level)level, true, out);
                FUZZ_CHECK(fclose(out) == 0);
                if (rc >= 0 && len)
                    check_json(buf, len);
                free(buf);
                buf = NULL;
            }
        } else {
            out = open_memstream(&buf, &len);
            FUZZ_CHECK(out != NULL);
            fputs("{\"frame\":1", out); /* what cmd_pcap.c prints before it */
            c->capture->datagram(st, dir, copy, got, true, out);
            FUZZ_CHECK(fclose(out) == 0);
            check_lines(buf, len);
            free(buf);
        }
        free(copy);
    }
    if (live)
        c->destroy(st);
    else
        c->capture->destroy(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int ncodecs = 0, mode;
    const struct sg_codec *c;

    if (size < 1)
        return 0;
    while (sg_codecs[ncodecs])
        ncodecs++;
    mode = data[0];
    c = sg_codecs[(mode >> 2 & 3) % ncodecs];
    data++;
    size--;
    switch (mode & 3) {
    case 0:
        one_string(data, size);
        break;
    case 1:
        demo_dump(c, mode >> 4 & 3, data, size);
        break;
    default:
        datagrams(c, (mode & 3) == 3, data, size);
        break;
    }
    return 0;
}
