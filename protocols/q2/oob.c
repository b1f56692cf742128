/*
 * Quake 2 connectionless packets: each named, and what they teach the
 * session (the protocol, the qport and its width, the minor version, the
 * netchan type, zlib, the challenge); the server's answer to a "status"
 * query read for the route's page; and the door (what a refused client is
 * told).
 */
#include "protocols/q2/session.h"

#include "protocols/door.h"
#include "protocols/error.h"
#include "protocols/info.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* The n-th space-separated token of `s` (quotes group), copied into out. */
static bool token(const char *s, int n, char *out, size_t cap)
{
    for (int i = 0;; i++) {
        size_t k = 0;
        while (*s == ' ' || *s == '\n')
            s++;
        if (!*s)
            return false;
        bool q = *s == '"';
        if (q)
            s++;
        while (*s && (q ? *s != '"' : (*s != ' ' && *s != '\n'))) {
            if (i == n && k + 1 < cap)
                out[k++] = *s;
            s++;
        }
        if (q && *s == '"')
            s++;
        if (i == n) {
            out[k] = 0;
            return true;
        }
    }
}

static int tokint(const char *s, int n, int dflt)
{
    char t[32];

    if (!token(s, n, t, sizeof(t)) || !(isdigit((unsigned char)t[0]) || t[0] == '-'))
        return dflt;
    return atoi(t);
}

/* The userinfo's name (`info`, `len`) as the player's, when it has one. */
void sg_q2__take_name(struct q2c *c, const char *info, size_t len)
{
    const char *v;
    size_t vl;

    if (sg_info_get(info, len, "name", 4, &v, &vl) && v)
        snprintf(c->player, sizeof(c->player), "%.*s",
                 (int)(vl < sizeof(c->player) ? vl : sizeof(c->player) - 1), v);
}

static void new_connection(struct q2c *c)
{
    for (int d = 0; d < 2; d++) {
        c->chan[d].rx.started = false;
        c->chan[d].assembling = false;
        c->chan[d].npieces = 0;
    }
    sg_relinj_restart(&c->v.inj);
    c->accepted = false;
}

int sg_q2__decode_oob(struct q2c *c, enum sg_dir dir)
{
    char text[1024];
    size_t n = c->copy_len - 4 < sizeof(text) - 1 ? c->copy_len - 4 : sizeof(text) - 1;
    char verb[32];
    struct sg_msg *m = &c->v.msgs[0];

    memcpy(text, c->copy + 4, n);
    text[n] = 0;
    for (size_t i = 0; i < n; i++)
        if (!text[i])
            text[i] = ' ';
    c->stats.oob++;
    c->v.frame.kind = SG_FRAME_OOB;
    if (!token(text, 0, verb, sizeof(verb)))
        verb[0] = 0;
    c->oob_name = "other";
    if (dir == SG_DIR_C2S && strcmp(verb, "getchallenge") == 0) {
        c->oob_name = "getchallenge";
    } else if (dir == SG_DIR_S2C && strcmp(verb, "challenge") == 0) {
        c->oob_name = "challenge";
        c->challenge = tokint(text, 1, 0);
    } else if (dir == SG_DIR_C2S && strcmp(verb, "connect") == 0) {
        int p = tokint(text, 1, 0);
        c->oob_name = "connect";
        if (p == 2022 || p == 2023) {
            /* The rerelease's transport below the connect is not public
             * (PROTOCOLS.md B): the session is relayed as it comes. */
            c->protocol = p;
            c->kex = true;
            c->qport = -1;
            c->minor = 0;
            c->nctype = 0;
            c->zlib = false;
            new_connection(c);
        } else if (p >= 34 && p <= 36) {
            c->kex = false;
            c->protocol = p;
            c->qport = tokint(text, 2, -1);
            c->challenge = tokint(text, 3, 0);
            c->minor = 0;
            c->nctype = 0;
            c->zlib = false;
            if (p == 35) {
                c->minor = tokint(text, 6, 1903);
            } else if (p == 36) {
                c->nctype = tokint(text, 6, 0);
                c->zlib = tokint(text, 7, 0) != 0;
                c->minor = tokint(text, 8, 1015);
            }
            if (p == 35 && c->minor > 1905)
                c->minor = 1905;
            sg_q2_variant_init(&c->cv, p, c->minor);
            sg_q2_variant_init(&c->sv, p, c->minor);
            c->sv.known = false; /* until its serverdata */
            new_connection(c);
            {
                char ui[SG_INFO_Q2];
                if (token(text, 4, ui, sizeof(ui)))
                    sg_q2__take_name(c, ui, strlen(ui));
            }
        }
    } else if (dir == SG_DIR_S2C && strcmp(verb, "client_connect") == 0) {
        c->oob_name = "client_connect";
        c->accepted = true;
        for (int i = 1; i < 8; i++) {
            char t[64];
            if (!token(text, i, t, sizeof(t)))
                break;
            if (strncmp(t, "nc=", 3) == 0)
                c->nctype = atoi(t + 3);
        }
    } else if (strcmp(verb, "print") == 0) {
        c->oob_name = "print";
    } else if (strcmp(verb, "info") == 0) {
        c->oob_name = "info";
    } else if (strcmp(verb, "status") == 0) {
        c->oob_name = "status";
    } else if (strcmp(verb, "ping") == 0 || strcmp(verb, "ack") == 0) {
        c->oob_name = verb[0] == 'p' ? "ping" : "ack";
    }
    memset(m, 0, sizeof(*m));
    m->kind = SG_MSG_GAME;
    m->name = c->oob_name;
    m->number = -1;
    c->v.frame.nmsgs = 1;
    return 0;
}

/* ---- a server's answer to "status" (the route's readiness probe) ---- */

/* A player line of the answer: `FRAGS PING "NAME"`, the numbers decimal
 * (a minus allowed), the name quoted (SV_StatusString; q2pro alike). */
static bool status_player_line(const char *s, size_t n)
{
    size_t i = 0;

    for (int k = 0; k < 2; k++) {
        size_t digits = 0;
        if (i < n && s[i] == '-')
            i++;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
            digits++;
        if (!digits || digits > 11 || i >= n || s[i] != ' ')
            return false;
        i++;
    }
    if (n - i < 2 || s[i] != '"')
        return false;
    return memchr(s + i + 1, '"', n - i - 1) == s + n - 1;
}

/* `key` of the serverinfo (`info`, `len`) into out (cut to fit), "" if absent. */
static void status_value(const char *info, size_t len, const char *key, char *out, size_t cap)
{
    const char *v;
    size_t vl;

    out[0] = 0;
    if (sg_info_get(info, len, key, strlen(key), &v, &vl) && v) {
        if (vl > cap - 1)
            vl = cap - 1;
        memcpy(out, v, vl);
        out[vl] = 0;
    }
}

int sg_q2_status_parse(const uint8_t *data, size_t len, struct sg_codec_server *out)
{
    static const char head[] = "\xff\xff\xff\xffprint\n";
    const size_t hl = sizeof(head) - 1;
    const char *s, *nl;
    size_t n, line;
    char num[16];
    int players = 0;

    memset(out, 0, sizeof(*out));
    out->players = out->max_players = -1;
    if (len < hl || memcmp(data, head, hl) != 0)
        return SG_E_MALFORMED;
    s = (const char *)data + hl;
    n = len - hl;
    if (n && !s[n - 1]) /* a NUL after the text, as some servers send */
        n--;
    if (memchr(s, 0, n))
        return SG_E_MALFORMED;
    /* The serverinfo line: `\key\value...`, then one line per player,
     * each ended by a newline (an answer cut short ends without one). */
    nl = memchr(s, '\n', n);
    if (!nl || nl == s || s[0] != '\\')
        return SG_E_MALFORMED;
    line = (size_t)(nl - s);
    status_value(s, line, "hostname", out->hostname, sizeof(out->hostname));
    status_value(s, line, "mapname", out->map, sizeof(out->map));
    status_value(s, line, "maxclients", num, sizeof(num));
    if (num[0] && strspn(num, "0123456789") == strlen(num) && strlen(num) <= 5)
        out->max_players = atoi(num);
    for (size_t at = line + 1; at < n; players++) {
        nl = memchr(s + at, '\n', n - at);
        if (!nl || !status_player_line(s + at, (size_t)(nl - (s + at))))
            goto malformed;
        at = (size_t)(nl - s) + 1;
    }
    out->players = players;
    return 0;

malformed:
    memset(out, 0, sizeof(*out));
    out->players = out->max_players = -1;
    return SG_E_MALFORMED;
}

/* ---- the door ---- */

size_t sg_q2_banned_reply(const uint8_t *data, size_t len, uint8_t *out, size_t cap)
{
    static const char *const texts[] = {
        "Your IP address is banned from this server.\nConnection refused.\n", NULL};

    if (!sg_q2_is_connect(data, len))
        return 0;
    return sg_door_oob_print(out, cap, "print\n", texts, false);
}

/* Quake 2 (SV_DirectConnect) answers a connect with no free slot so. */
size_t sg_q2_full_reply(const uint8_t *data, size_t len, uint8_t *out, size_t cap)
{
    static const char *const texts[] = {"Server is full.\n", NULL};

    if (!sg_q2_is_connect(data, len) && !sg_door_oob_is(data, len, "getchallenge", false))
        return 0;
    return sg_door_oob_print(out, cap, "print\n", texts, false);
}

bool sg_q2_is_admin(const uint8_t *data, size_t len)
{
    return sg_door_oob_is(data, len, "rcon", false);
}
