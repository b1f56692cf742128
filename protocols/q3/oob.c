/*
 * Quake 3 out-of-band packets: classify, parse, build (see oob.h).
 *
 * The game reads the first line with MSG_ReadStringLine, splits it with
 * Cmd_TokenizeString (whitespace separates, double quotes group) and
 * compares the first word with Q_stricmp.  The bodies of infoResponse,
 * statusResponse and print follow the first newline.
 */
#include "protocols/q3/oob.h"

#include "protocols/door.h"
#include "protocols/error.h"
#include "protocols/q3/huffman.h"
#include "protocols/q3/msg.h"
#include "protocols/q3/state.h" /* sg_q3_info_value */

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const kind_names[SG_Q3_OOB_KIND_COUNT] = {
    [SG_Q3_OOB_UNKNOWN] = "unknown",
    [SG_Q3_OOB_GETCHALLENGE] = "getchallenge",
    [SG_Q3_OOB_CHALLENGE_RESPONSE] = "challengeResponse",
    [SG_Q3_OOB_CONNECT] = "connect",
    [SG_Q3_OOB_CONNECT_RESPONSE] = "connectResponse",
    [SG_Q3_OOB_GETINFO] = "getinfo",
    [SG_Q3_OOB_INFO_RESPONSE] = "infoResponse",
    [SG_Q3_OOB_GETSTATUS] = "getstatus",
    [SG_Q3_OOB_STATUS_RESPONSE] = "statusResponse",
    [SG_Q3_OOB_PRINT] = "print",
    [SG_Q3_OOB_DISCONNECT] = "disconnect",
    [SG_Q3_OOB_RCON] = "rcon",
};

const char *sg_q3_oob_kind_name(enum sg_q3_oob_kind kind)
{
    if ((int)kind < 0 || kind >= SG_Q3_OOB_KIND_COUNT)
        return "unknown";
    return kind_names[kind];
}

bool sg_q3_oob_is(const uint8_t *data, size_t len)
{
    return len >= 4 && data[0] == 0xff && data[1] == 0xff && data[2] == 0xff && data[3] == 0xff;
}

/* One token of the first line, Cmd_TokenizeString style. */
struct token {
    const char *p;
    size_t len;
};

/* Split `line` (`len` bytes, no newline) into at most `max` tokens. */
static int tokenize(const char *line, size_t len, struct token *tok, int max)
{
    size_t i = 0;
    int n = 0;

    while (n < max) {
        while (i < len && (unsigned char)line[i] <= ' ')
            i++;
        if (i >= len)
            break;
        if (line[i] == '"') {
            size_t start = ++i;

            while (i < len && line[i] != '"')
                i++;
            if (i >= len)
                return SG_E_MALFORMED; /* unterminated quote */
            tok[n].p = line + start;
            tok[n].len = i - start;
            i++;
        } else {
            size_t start = i;

            while (i < len && (unsigned char)line[i] > ' ')
                i++;
            tok[n].p = line + start;
            tok[n].len = i - start;
        }
        n++;
    }
    return n;
}

/* atoi() over a token: optional sign, digits; wraps to 32 bits like the game's int. */
static int32_t token_int(const struct token *t)
{
    uint32_t v = 0;
    size_t i = 0;
    bool neg = false;

    if (i < t->len && (t->p[i] == '-' || t->p[i] == '+'))
        neg = t->p[i++] == '-';
    for (; i < t->len && isdigit((unsigned char)t->p[i]); i++)
        v = v * 10u + (uint32_t)(t->p[i] - '0');
    return (int32_t)(neg ? 0u - v : v);
}

static bool token_is(const struct token *t, const char *word)
{
    size_t n = strlen(word);

    return t->len == n && strncasecmp(t->p, word, n) == 0;
}

static void copy_token(char *dst, size_t cap, const struct token *t)
{
    size_t n = t->len < cap - 1 ? t->len : cap - 1;

    memcpy(dst, t->p, n);
    dst[n] = '\0';
}

static enum sg_q3_oob_kind classify(const struct token *t)
{
    for (int k = SG_Q3_OOB_UNKNOWN + 1; k < SG_Q3_OOB_KIND_COUNT; k++)
        if (token_is(t, kind_names[k]))
            return (enum sg_q3_oob_kind)k;
    return SG_Q3_OOB_UNKNOWN;
}

/* Numbers and names from the tokens of the first line, per kind. */
static int parse_fields(struct sg_q3_oob *o, const struct token *tok, int ntok)
{
    char val[32];

    switch (o->kind) {
    case SG_Q3_OOB_GETCHALLENGE:
        if (ntok > 1) {
            o->has_client_challenge = true;
            o->client_challenge = token_int(&tok[1]);
        }
        if (ntok > 2)
            copy_token(o->game, sizeof(o->game), &tok[2]);
        break;
    case SG_Q3_OOB_CHALLENGE_RESPONSE:
        if (ntok < 2)
            return SG_E_MALFORMED;
        o->has_challenge = true;
        o->challenge = token_int(&tok[1]);
        if (ntok > 2) {
            o->has_client_challenge = true;
            o->client_challenge = token_int(&tok[2]);
        }
        if (ntok > 3) {
            o->has_protocol = true;
            o->protocol = token_int(&tok[3]);
        }
        break;
    case SG_Q3_OOB_CONNECT_RESPONSE:
        if (ntok > 1) {
            o->has_challenge = true;
            o->challenge = token_int(&tok[1]);
        }
        break;
    case SG_Q3_OOB_CONNECT:
        if (ntok < 2)
            return SG_E_MALFORMED;
        copy_token(o->userinfo, sizeof(o->userinfo), &tok[1]);
        if (sg_q3_info_value(o->userinfo, "protocol", val, sizeof(val))) {
            struct token t = {val, strlen(val)};

            o->has_protocol = true;
            o->protocol = token_int(&t);
        }
        if (sg_q3_info_value(o->userinfo, "qport", val, sizeof(val))) {
            struct token t = {val, strlen(val)};

            o->has_qport = true;
            o->qport = (uint16_t)token_int(&t);
        }
        if (sg_q3_info_value(o->userinfo, "challenge", val, sizeof(val))) {
            struct token t = {val, strlen(val)};

            o->has_challenge = true;
            o->challenge = token_int(&t);
        }
        break;
    default:
        break;
    }
    return 0;
}

int sg_q3_oob_parse(const uint8_t *data, size_t len, bool from_client, struct sg_q3_oob *out)
{
    struct token tok[8];
    size_t line_len;
    int ntok, n;

    memset(out, 0, offsetof(struct sg_q3_oob, text));
    out->text_len = 0;
    out->text[0] = '\0';
    if (!sg_q3_oob_is(data, len))
        return SG_E_MALFORMED;

    /*
     * The text: plain, or for a client's connect decompressed from byte 12.
     * A connect whose argument starts with its quote at byte 12 is plain
     * text, as Quake 3 1.11-1.16 (protocol 43) sent it: compressed, byte 12
     * is the high byte of the length, and 0x22 would mean a userinfo of
     * over 8 KiB, eight times what the game sends.
     */
    out->plain_connect = from_client && len > SG_Q3_CONNECT_HUFF_OFFSET &&
                         memcmp(data + 4, "connect ", 8) == 0 &&
                         data[SG_Q3_CONNECT_HUFF_OFFSET] == '"';
    if (from_client && len >= 11 && memcmp(data + 4, "connect", 7) == 0 && !out->plain_connect) {
        size_t head = len < SG_Q3_CONNECT_HUFF_OFFSET ? len : SG_Q3_CONNECT_HUFF_OFFSET;

        memcpy(out->text, data + 4, head - 4);
        out->text_len = head - 4;
        if (len > SG_Q3_CONNECT_HUFF_OFFSET) {
            n = sg_q3_huff_adaptive_decompress(
                data + SG_Q3_CONNECT_HUFF_OFFSET, len - SG_Q3_CONNECT_HUFF_OFFSET,
                (uint8_t *)out->text + out->text_len, SG_Q3_MAX_MSGLEN - SG_Q3_CONNECT_HUFF_OFFSET);
            if (n < 0)
                return n;
            out->text_len += (size_t)n;
        }
    } else {
        if (len - 4 > SG_Q3_OOB_MAX_TEXT)
            return SG_E_TOOBIG;
        memcpy(out->text, data + 4, len - 4);
        out->text_len = len - 4;
    }
    out->text[out->text_len] = '\0';

    /* The first line (MSG_ReadStringLine stops at NUL or newline). */
    for (line_len = 0; line_len < out->text_len; line_len++)
        if (out->text[line_len] == '\n' || out->text[line_len] == '\0')
            break;
    out->body_offset = line_len < out->text_len ? line_len + 1 : line_len;

    ntok = tokenize(out->text, line_len, tok, 8);
    if (ntok < 0)
        return ntok;
    if (ntok == 0)
        return 0;
    copy_token(out->command, sizeof(out->command), &tok[0]);
    out->kind = classify(&tok[0]);
    return parse_fields(out, tok, ntok);
}

int sg_q3_oob_build(const char *text, size_t len, bool from_client, uint8_t *out, size_t cap)
{
    if (len > SG_Q3_OOB_MAX_TEXT)
        return SG_E_TOOBIG;
    if (cap < 4 + (len < 8 ? len : 8))
        return SG_E_OVERFLOW;
    memset(out, 0xff, 4);

    /* A client's connect: "connect " plain, the rest adaptive Huffman. */
    if (from_client && len > 8 && memcmp(text, "connect", 7) == 0) {
        int n;

        memcpy(out + 4, text, 8);
        n = sg_q3_huff_adaptive_compress((const uint8_t *)text + 8, len - 8,
                                         out + SG_Q3_CONNECT_HUFF_OFFSET,
                                         cap - SG_Q3_CONNECT_HUFF_OFFSET);
        if (n < 0)
            return n;
        return SG_Q3_CONNECT_HUFF_OFFSET + n;
    }
    if (cap < 4 + len)
        return SG_E_OVERFLOW;
    memcpy(out + 4, text, len);
    return (int)(4 + len);
}

int sg_q3_oob_write(const struct sg_q3_oob *oob, bool from_client, uint8_t *out, size_t cap)
{
    return sg_q3_oob_build(oob->text, oob->text_len, from_client && !oob->plain_connect, out, cap);
}

/* ---- the door ---- */

size_t sg_q3_banned_reply(const uint8_t *data, size_t len, uint8_t *out, size_t cap)
{
    static const char *const texts[] = {"You are banned from this server.\n", NULL};

    if (!sg_door_oob_is(data, len, "connect", true))
        return 0;
    return sg_door_oob_print(out, cap, "print\n", texts, false);
}

/* ioquake3 (SV_DirectConnect) answers a connect with no free slot so. */
size_t sg_q3_full_reply(const uint8_t *data, size_t len, uint8_t *out, size_t cap)
{
    static const char *const texts[] = {"Server is full.\n", NULL};

    if (!sg_door_oob_is(data, len, "connect", true) &&
        !sg_door_oob_is(data, len, "getchallenge", true))
        return 0;
    return sg_door_oob_print(out, cap, "print\n", texts, false);
}

bool sg_q3_is_admin(const uint8_t *data, size_t len)
{
    return sg_door_oob_is(data, len, "rcon", true);
}
