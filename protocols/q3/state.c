/*
 * Quake 3 client-side stream state (see state.h): configstrings, baselines,
 * the snapshot and parse-entity rings, the reliable server-command ring,
 * and the configstring updates carried by "cs" / "bcs0-2" server commands.
 *
 * Server commands are tokenized as Cmd_TokenizeString does: tokens split
 * on bytes <= ' ', "double quotes" group (no escapes), and // or
 * slash-star comments outside quotes end or skip text.
 */
#include "protocols/q3/state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "protocols/q3/msg.h"

#define MAX_TOKENS 1024

struct tokens {
    int argc;
    const char *argv[MAX_TOKENS];
    const char *rest[MAX_TOKENS]; /* where token i started in the input */
    char buf[SG_Q3_BIG_INFO_STRING + MAX_TOKENS + 2];
};

struct sg_q3_state *sg_q3_state_create(int protocol)
{
    struct sg_q3_state *st = calloc(1, sizeof(*st));

    if (!st)
        return NULL;
    st->protocol = protocol;
    st->variant = sg_q3_variant_for_protocol(protocol);
    return st;
}

struct sg_q3_state *sg_q3_state_create_variant(const struct sg_q3_variant *v)
{
    struct sg_q3_state *st = sg_q3_state_create(v->protocol);

    if (st)
        st->variant = v;
    return st;
}

void sg_q3_state_set_variant(struct sg_q3_state *st, const struct sg_q3_variant *v)
{
    if (v)
        st->variant = v;
}

void sg_q3_state_destroy(struct sg_q3_state *st)
{
    if (!st)
        return;
    for (int i = 0; i < st->pool.nchunks; i++)
        free(st->pool.chunk[i]);
    for (int i = 0; i < SG_Q3_MAX_CONFIGSTRINGS; i++)
        free(st->cs[i]);
    for (int i = 0; i < SG_Q3_MAX_RELIABLE_COMMANDS; i++)
        free(st->commands[i]);
    free(st->big_cs);
    free(st->parse_scratch);
    free(st);
}

/* ---- the entity pool and the parse-entities ring ---- */

const struct sg_q3_entity sg_q3__zero_entity;

/* Every slot of the ring lets go of its state. */
static void release_ring(struct sg_q3_state *st)
{
    for (int i = 0; i < SG_Q3_MAX_PARSE_ENTITIES; i++)
        sg_q3__entpool_unref(&st->pool, st->parse_ring[i].ref);
    memset(st->parse_ring, 0, sizeof(st->parse_ring));
}

int sg_q3__state_push_new(struct sg_q3_state *st, const struct sg_q3_entity *e)
{
    struct sg_q3_entpool *pool = &st->pool;
    unsigned rec;

    /* A free record, or a new chunk of them (the ring holds at most 2048). */
    if (!pool->free_head) {
        unsigned base = (unsigned)pool->nchunks * SG_Q3_ENTPOOL_CHUNK;
        struct sg_q3_entity *c;

        if (pool->nchunks == SG_Q3_ENTPOOL_CHUNKS)
            return -ENOMEM;
        c = malloc(SG_Q3_ENTPOOL_CHUNK * sizeof(*c));
        if (!c)
            return -ENOMEM;
        for (unsigned i = 0; i < SG_Q3_ENTPOOL_CHUNK; i++) {
            pool->refs[base + i] = 0;
            pool->next[base + i] = i + 1 < SG_Q3_ENTPOOL_CHUNK ? (uint16_t)(base + i + 2) : 0;
        }
        pool->chunk[pool->nchunks++] = c;
        pool->free_head = (uint16_t)(base + 1);
    }
    rec = (unsigned)pool->free_head - 1;
    pool->free_head = pool->next[rec];
    pool->chunk[rec / SG_Q3_ENTPOOL_CHUNK][rec % SG_Q3_ENTPOOL_CHUNK] = *e;
    pool->live++;
    sg_q3__state_push_slot(st, (struct sg_q3_parse_slot){(uint16_t)(rec + 1),
                                                          (uint16_t)e->number});
    return 0;
}

void sg_q3_state_clear_gamestate(struct sg_q3_state *st)
{
    for (int i = 0; i < SG_Q3_MAX_CONFIGSTRINGS; i++) {
        free(st->cs[i]);
        st->cs[i] = NULL;
    }
    st->cs_changes++;
    /* Only the baselines a gamestate set are non-zero (baseline_used says
     * which): clearing just those keeps the pages of the others untouched,
     * so a session's RSS grows with the baselines its map uses, not with
     * all SG_Q3_MAX_GENTITIES of them on every gamestate. */
    for (int i = 0; i < SG_Q3_MAX_GENTITIES; i++)
        if (st->baseline_used[i >> 3] & (1u << (i & 7)))
            memset(&st->baselines[i], 0, sizeof(st->baselines[i]));
    memset(st->baseline_used, 0, sizeof(st->baseline_used));
    memset(st->snapshots, 0, sizeof(st->snapshots));
    st->snap_valid = false;
    st->snap_message_num = 0;
    release_ring(st);
    st->parse_entities_num = 0;
    st->have_gamestate = false;
    st->client_num = 0;
    st->checksum_feed = 0;
}

const char *sg_q3_state_configstring(const struct sg_q3_state *st, int index)
{
    if (index < 0 || index >= st->variant->max_configstrings || !st->cs[index])
        return "";
    return st->cs[index];
}

int sg_q3_state_set_configstring(struct sg_q3_state *st, int index, const char *s, size_t len)
{
    char *copy;

    if (index < 0 || index >= st->variant->max_configstrings)
        return -EINVAL;
    copy = malloc(len + 1);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, s, len);
    copy[len] = 0;
    free(st->cs[index]);
    st->cs[index] = copy;
    st->cs_changes++;
    return 0;
}

/* Skip blanks and comments; NULL when the text (or the command) ends. */
static const char *skip_blank(const char *p)
{
    for (;;) {
        while (*p && (unsigned char)*p <= ' ')
            p++;
        if (!*p || (p[0] == '/' && p[1] == '/'))
            return NULL;
        if (p[0] != '/' || p[1] != '*')
            return p;
        while (*p && (p[0] != '*' || p[1] != '/'))
            p++;
        if (!*p)
            return NULL;
        p += 2;
    }
}

/* Split `text` into tokens the way the game's command tokenizer does. */
static void tokenize(const char *text, struct tokens *t)
{
    char *out = t->buf;
    char *end = t->buf + sizeof(t->buf) - 1;
    const char *p = text;

    t->argc = 0;
    while (t->argc < MAX_TOKENS && (p = skip_blank(p)) != NULL) {
        t->rest[t->argc] = p;
        t->argv[t->argc++] = out;
        if (*p == '"') {
            for (p++; *p && *p != '"' && out < end; p++)
                *out++ = *p;
            *out++ = 0;
            if (*p != '"')
                return;
            p++;
            continue;
        }
        while ((unsigned char)*p > ' ' && *p != '"' && out < end) {
            if (p[0] == '/' && (p[1] == '/' || p[1] == '*'))
                break;
            *out++ = *p++;
        }
        *out++ = 0;
        if (out >= end)
            return;
    }
}

/* Cmd_Argv: token i or "". */
static const char *argv_at(const struct tokens *t, int i)
{
    return i < t->argc ? t->argv[i] : "";
}

/* "cs <index> <text...>": the new value is the tokens from 2 on, joined by spaces. */
static int apply_cs(struct sg_q3_state *st, const struct tokens *t)
{
    char value[SG_Q3_BIG_INFO_STRING];
    size_t n = 0;
    int index = atoi(argv_at(t, 1));

    if (index < 0 || index >= st->variant->max_configstrings)
        return 0; /* the game drops the connection; we keep the old value */
    value[0] = 0;
    for (int i = 2; i < t->argc; i++) {
        size_t len = strlen(t->argv[i]);

        if (i > 2 && n + 1 < sizeof(value))
            value[n++] = ' ';
        if (len > sizeof(value) - 1 - n)
            len = sizeof(value) - 1 - n;
        memcpy(value + n, t->argv[i], len);
        n += len;
    }
    value[n] = 0;
    return sg_q3_state_set_configstring(st, index, value, n);
}

/* Big configstrings arrive in pieces: bcs0 starts, bcs1 continues, bcs2 ends. */
static int apply_bcs(struct sg_q3_state *st, const struct tokens *t, int part)
{
    struct tokens *cs;
    size_t have, add;
    int err;

    if (!st->big_cs) {
        st->big_cs = calloc(1, SG_Q3_BIG_INFO_STRING);
        if (!st->big_cs)
            return -ENOMEM;
    }
    if (part == 0) {
        snprintf(st->big_cs, SG_Q3_BIG_INFO_STRING, "cs %s \"%s", argv_at(t, 1), argv_at(t, 2));
        return 0;
    }
    have = strlen(st->big_cs);
    add = strlen(argv_at(t, 2));
    if (have + add + (part == 2) >= SG_Q3_BIG_INFO_STRING)
        return 0; /* the game drops the connection here */
    memcpy(st->big_cs + have, argv_at(t, 2), add + 1);
    if (part == 1)
        return 0;
    strcat(st->big_cs, "\"");

    /* bcs2: the assembled text is a "cs" command */
    cs = malloc(sizeof(*cs));
    if (!cs)
        return -ENOMEM;
    tokenize(st->big_cs, cs);
    err = strcmp(argv_at(cs, 0), "cs") == 0 ? apply_cs(st, cs) : 0;
    free(cs);
    return err;
}

/* Apply what a command changes in the state the parser tracks. */
static int execute(struct sg_q3_state *st, const char *text)
{
    struct tokens *t = malloc(sizeof(*t));
    const char *cmd;
    int err = 0;

    if (!t)
        return -ENOMEM;
    tokenize(text, t);
    cmd = argv_at(t, 0);
    if (strcmp(cmd, "cs") == 0)
        err = apply_cs(st, t);
    else if (strcmp(cmd, "bcs0") == 0)
        err = apply_bcs(st, t, 0);
    else if (strcmp(cmd, "bcs1") == 0)
        err = apply_bcs(st, t, 1);
    else if (strcmp(cmd, "bcs2") == 0)
        err = apply_bcs(st, t, 2);
    free(t);
    return err;
}

int sg_q3_state_server_command(struct sg_q3_state *st, int32_t seq, const char *text)
{
    int index = seq & (st->variant->max_reliable_commands - 1);
    size_t len = strlen(text);
    char *copy;
    int err;

    /* the client keeps only commands newer than the last one */
    if (sg_q3_seqdiff(st->server_command_seq, seq) >= 0)
        return 0;
    copy = malloc(len + 1);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, text, len + 1);
    free(st->commands[index]);
    st->commands[index] = copy;
    st->server_command_seq = seq;
    err = execute(st, text);
    return err < 0 ? err : 1;
}

const char *sg_q3_state_command(const struct sg_q3_state *st, int32_t seq)
{
    int32_t age = sg_q3_seqdiff(st->server_command_seq, seq);

    if (age < 0 || age >= st->variant->max_reliable_commands)
        return NULL;
    return st->commands[seq & (st->variant->max_reliable_commands - 1)];
}

const struct sg_q3_snapshot *sg_q3_state_snapshot(const struct sg_q3_state *st, int32_t message_num)
{
    const struct sg_q3_snapshot *s = &st->snapshots[message_num & (st->variant->packet_backup - 1)];

    if (!s->valid || s->message_num != message_num)
        return NULL;
    return s;
}

const struct sg_q3_entity *sg_q3_state_entity(const struct sg_q3_state *st,
                                              const struct sg_q3_snapshot *snap, int i)
{
    return sg_q3__state_ref_entity(st, sg_q3__state_slot(st, snap, i).ref);
}

const struct sg_q3_snapshot *sg_q3_state_latest(const struct sg_q3_state *st)
{
    return st->snap_valid ? sg_q3_state_snapshot(st, st->snap_message_num) : NULL;
}

bool sg_q3_state_baseline_used(const struct sg_q3_state *st, int number)
{
    if (number < 0 || number >= st->variant->max_gentities)
        return false;
    return (st->baseline_used[number >> 3] >> (number & 7)) & 1;
}

bool sg_q3_info_value(const char *info, const char *key, char *out, size_t cap)
{
    const char *p = info;
    size_t klen = strlen(key);

    if (cap)
        out[0] = 0;
    if (*p == '\\')
        p++;
    /* key\value pairs separated by backslashes; keys compare without case */
    while (*p) {
        const char *k = p;
        const char *v;

        while (*p && *p != '\\')
            p++;
        if (!*p)
            return false;
        v = ++p;
        while (*p && *p != '\\')
            p++;
        if ((size_t)(v - 1 - k) == klen && strncasecmp(k, key, klen) == 0) {
            size_t n = (size_t)(p - v);

            if (cap) {
                if (n > cap - 1)
                    n = cap - 1;
                memcpy(out, v, n);
                out[n] = 0;
            }
            return true;
        }
        if (*p)
            p++;
    }
    return false;
}
