/*
 * QuakeWorld connectionless packets: 0xffffffff, then text or a one-letter
 * command (mvdsv sv_main.c SV_ConnectionlessPacket, ezQuake cl_main.c
 * CL_ConnectionlessPacket).
 *
 *   C2S "getchallenge\n"
 *   S2C 'c' <challenge decimal> NUL [long magic, long bits]*   (FTEX, FTE2, MVD1)
 *   C2S "connect 28 <qport> <challenge> \"<userinfo>\"\n" ["0x<magic> 0x<bits>\n"]*
 *   S2C 'j'                                       accept
 *   C2S "ip <userid> <key>"                       mvdsv realip
 *   C2S "status ...", "ping", "rcon ..."; S2C 'n' print, 'k' ping, 'l' ack
 *   S2C "\\chunk" long number, byte svc_download, chunk (FTE chunked downloads)
 *
 * The client only echoes extension bits the server offered and it
 * supports; slipgate relays both tails untouched so every extension is
 * negotiated through it, and remembers them for the decoder.
 */
#include "protocols/qw/qw.h"

#include "protocols/byteorder.h"
#include "protocols/door.h"
#include "protocols/error.h"
#include "protocols/info.h"

#include <stdlib.h>
#include <string.h>

static bool starts(const uint8_t *p, size_t n, const char *s)
{
    size_t l = strlen(s);

    return n >= l && memcmp(p, s, l) == 0;
}

/* One number as atoi/strtoul would read it (decimal or 0x hex), advancing *p. */
static bool read_number(const uint8_t **p, const uint8_t *end, long long *out)
{
    char buf[24];
    size_t n = 0;
    char *stop;

    while (*p < end && **p == ' ')
        (*p)++;
    while (*p < end && n < sizeof(buf) - 1 && **p != ' ' && **p != '\n' && **p != '"')
        buf[n++] = (char)*(*p)++;
    buf[n] = 0;
    if (n == 0)
        return false;
    *out = strtoll(buf, &stop, 0);
    return *stop == 0;
}

static void note_ext(struct sg_qw_ext *e, uint32_t magic, uint32_t bits)
{
    if (magic == SG_QW_MAGIC_FTE)
        e->fte = bits;
    else if (magic == SG_QW_MAGIC_FTE2)
        e->fte2 = bits;
    else if (magic == SG_QW_MAGIC_MVD1)
        e->mvd1 = bits;
    else
        return;
    e->known = true;
}

static int parse_challenge(const uint8_t *p, const uint8_t *end, struct sg_qw_oob *o)
{
    const uint8_t *nul = memchr(p, 0, (size_t)(end - p));
    long long v;

    if (!read_number(&p, nul ? nul : end, &v))
        return SG_E_MALFORMED;
    o->challenge = (int32_t)v;
    if (!nul)
        return 0;
    for (p = nul + 1; end - p >= 8; p += 8)
        note_ext(&o->ext, sg_le32(p), sg_le32(p + 4));
    return 0;
}

static int parse_connect(const uint8_t *p, const uint8_t *end, struct sg_qw_oob *o)
{
    const uint8_t *q, *nl;
    long long v;
    const char *z;
    size_t zl;

    p += strlen("connect");
    if (!read_number(&p, end, &v))
        return SG_E_MALFORMED;
    o->protocol = (int)v;
    if (!read_number(&p, end, &v))
        return SG_E_MALFORMED;
    o->qport = (int)v;
    if (!read_number(&p, end, &v))
        return SG_E_MALFORMED;
    o->challenge = (int32_t)v;
    while (p < end && *p == ' ')
        p++;
    if (p < end && *p == '"') {
        q = memchr(p + 1, '"', (size_t)(end - p - 1));
        if (!q)
            return SG_E_MALFORMED;
        o->userinfo = (const char *)p + 1;
        o->userinfo_len = (size_t)(q - p - 1);
        if (sg_info_get(o->userinfo, o->userinfo_len, "*z_ext", 6, &z, &zl) && zl < 16) {
            char buf[16];
            memcpy(buf, z, zl);
            buf[zl] = 0;
            o->ext.z_ext = (uint32_t)strtoul(buf, NULL, 10);
            o->ext.known = true;
        }
        p = q + 1;
    }
    /* The extension lines: "0x<magic> 0x<bits>\n" each. */
    nl = memchr(p, '\n', (size_t)(end - p));
    while (nl && nl + 1 < end) {
        long long magic, bits;
        const uint8_t *line = nl + 1;
        nl = memchr(line, '\n', (size_t)(end - line));
        if (read_number(&line, nl ? nl : end, &magic) && read_number(&line, nl ? nl : end, &bits))
            note_ext(&o->ext, (uint32_t)magic, (uint32_t)bits);
    }
    return 0;
}

int sg_qw_oob_parse(enum sg_dir dir, const uint8_t *data, size_t len, struct sg_qw_oob *o)
{
    const uint8_t *p = data + 4, *end = data + len;
    size_t n;

    memset(o, 0, sizeof(*o));
    o->qport = -1;
    o->name = "oob";
    if (len < 4 || sg_le32(data) != 0xffffffffu)
        return SG_E_MALFORMED;
    n = (size_t)(end - p);
    if (n == 0)
        return SG_E_MALFORMED;
    if (dir == SG_DIR_C2S) {
        if (starts(p, n, "getchallenge")) {
            o->kind = SG_QW_OOB_GETCHALLENGE;
            o->name = "getchallenge";
        } else if (starts(p, n, "connect")) {
            o->kind = SG_QW_OOB_CONNECT;
            o->name = "connect";
            return parse_connect(p, end, o);
        } else if (starts(p, n, "ip ")) {
            o->kind = SG_QW_OOB_IP;
            o->name = "ip";
        } else if (starts(p, n, "status")) {
            o->kind = SG_QW_OOB_STATUS;
            o->name = "status";
        } else if (starts(p, n, "ping") || p[0] == 'k') {
            o->kind = SG_QW_OOB_PING;
            o->name = "ping";
        } else if (starts(p, n, "rcon")) {
            o->kind = SG_QW_OOB_RCON;
            o->name = "rcon";
        }
        return 0;
    }
    switch (p[0]) {
    case 'c':
        o->kind = SG_QW_OOB_CHALLENGE;
        o->name = "challenge";
        return parse_challenge(p + 1, end, o);
    case 'j':
        o->kind = SG_QW_OOB_ACCEPT;
        o->name = "accept";
        break;
    case 'n':
        o->kind = SG_QW_OOB_PRINT;
        o->name = "print";
        break;
    case 'k':
        o->kind = SG_QW_OOB_PING;
        o->name = "ping";
        break;
    case 'l':
        o->kind = SG_QW_OOB_ACK;
        o->name = "ack";
        break;
    case '\\':
        if (starts(p, n, "\\chunk")) {
            o->kind = SG_QW_OOB_CHUNK;
            o->name = "chunk";
        }
        break;
    default:
        break;
    }
    return 0;
}

/* ---- the door ---- */

size_t sg_qw_banned_reply(const uint8_t *data, size_t len, uint8_t *out, size_t cap)
{
    static const char *const texts[] = {"\nbanned.\n", NULL};

    (void)data;
    (void)len;
    return sg_door_oob_print(out, cap, "n", texts, false);
}

/* mvdsv (SVC_DirectConnect) answers a connect with no free slot with an A2C_PRINT. */
size_t sg_qw_full_reply(const uint8_t *data, size_t len, uint8_t *out, size_t cap)
{
    static const char *const texts[] = {"\nserver is full\n\n", NULL};

    if (!sg_door_oob_is(data, len, "connect", false) &&
        !sg_door_oob_is(data, len, "getchallenge", false))
        return 0;
    return sg_door_oob_print(out, cap, "n", texts, false);
}

bool sg_qw_is_admin(const uint8_t *data, size_t len)
{
    return sg_door_oob_is(data, len, "rcon", false);
}
