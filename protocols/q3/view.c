/*
 * The Quake 3 filters' view of a session: the messages of a decoded frame
 * as the filters see them (server commands, client commands, gamestate
 * configstrings, the game's own messages), the filters' changes to them
 * (set a text, drop, inject), and the messages translated for the
 * receiver when filters changed the stream (reliable commands renumbered,
 * changed texts, injections carried until acknowledged).
 */
#include "protocols/q3/session.h"

#include "protocols/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the message list filters see ---- */

void sg_q3__msgs_reset(struct q3c *c)
{
    c->nmsgs = 0;
    c->arena_len = 0;
    for (int i = 0; i < c->nchanged; i++)
        free(c->changed[i]);
    c->nchanged = 0;
}

/* Keep `len` bytes (then a NUL) in the arena; returns the offset, or -1. */
static long arena_put(struct q3c *c, const char *text, size_t len)
{
    size_t off = c->arena_len;

    if (c->arena_len + len + 1 > c->arena_cap) {
        size_t cap = c->arena_cap ? c->arena_cap : 4096;
        while (cap < c->arena_len + len + 1)
            cap *= 2;
        char *a = realloc(c->arena, cap);
        if (!a)
            return -1;
        c->arena = a;
        c->arena_cap = cap;
    }
    memcpy(c->arena + off, text, len);
    c->arena[off + len] = '\0';
    c->arena_len += len + 1;
    return (long)off;
}

/* Room for one more message; false when out of memory. */
static bool msgs_grow(struct q3c *c)
{
    unsigned cap;
    struct sg_msg *ms;
    int32_t *sq, *rf;

    if (c->nmsgs < c->cap_msgs)
        return true;
    cap = c->cap_msgs ? 2 * c->cap_msgs : 64;
    ms = realloc(c->msgs, cap * sizeof(*ms));
    sq = ms ? realloc(c->msg_seq, cap * sizeof(*sq)) : NULL;
    rf = sq ? realloc(c->msg_ref, cap * sizeof(*rf)) : NULL;
    if (ms)
        c->msgs = ms;
    if (sq)
        c->msg_seq = sq;
    if (rf)
        c->msg_ref = rf;
    if (!ms || !sq || !rf)
        return false;
    c->cap_msgs = cap;
    return true;
}

/* Append a message; text and command become arena offsets (fixed up by sg_q3__msgs_done). */
struct sg_msg *sg_q3__msg_add(struct q3c *c, enum sg_msg_kind kind, const char *name,
                              int32_t number, const char *text, size_t len, const char *command,
                              int32_t seq, int32_t ref)
{
    struct sg_msg *m;
    long t = -1, cmd = -1;

    if (!msgs_grow(c))
        return NULL;
    if (text && (t = arena_put(c, text, len)) < 0)
        return NULL;
    if (command && (cmd = arena_put(c, command, strlen(command))) < 0)
        return NULL;
    m = &c->msgs[c->nmsgs];
    memset(m, 0, sizeof(*m));
    m->kind = kind;
    m->name = name;
    m->number = number;
    m->text = (const char *)(intptr_t)t;
    m->text_len = text ? len : 0;
    m->command = (const char *)(intptr_t)cmd;
    c->msg_seq[c->nmsgs] = seq;
    c->msg_ref[c->nmsgs] = ref;
    c->nmsgs++;
    return m;
}

void sg_q3__msgs_done(struct q3c *c, struct sg_frame *f)
{
    for (unsigned i = 0; i < c->nmsgs; i++) {
        intptr_t t = (intptr_t)c->msgs[i].text, cmd = (intptr_t)c->msgs[i].command;
        c->msgs[i].text = t < 0 ? NULL : c->arena + t;
        c->msgs[i].command = cmd < 0 ? c->msgs[i].text : c->arena + cmd;
    }
    f->msgs = c->msgs;
    f->nmsgs = c->nmsgs;
}

/* The first word of a command and where its argument text starts. */
static size_t verb_of(const char *cmd, char *verb, size_t cap)
{
    size_t n = 0;

    while (cmd[n] == ' ')
        n++;
    size_t start = n, k = 0;
    while (cmd[n] && cmd[n] != ' ' && cmd[n] != '\n') {
        if (k + 1 < cap)
            verb[k++] = cmd[n];
        n++;
    }
    verb[k] = '\0';
    (void)start;
    while (cmd[n] == ' ')
        n++;
    return n;
}

/* A quoted argument's inside (or the rest of the line); returns its length. */
static size_t unquote(const char *arg, const char **out)
{
    if (arg[0] == '"') {
        const char *end = strchr(arg + 1, '"');
        *out = arg + 1;
        return end ? (size_t)(end - arg - 1) : strlen(arg + 1);
    }
    *out = arg;
    return strlen(arg);
}

/* What a server command is, as a cross-game message: kind, number, text. */
static void classify_server_command(const char *cmd, enum sg_msg_kind *kind, int32_t *number,
                                    const char **text, size_t *len)
{
    char verb[32];
    size_t at = verb_of(cmd, verb, sizeof(verb));
    const char *t = cmd + at;

    *kind = SG_MSG_SERVER_COMMAND;
    if (strcmp(verb, "print") == 0)
        *kind = SG_MSG_PRINT;
    else if (strcmp(verb, "cp") == 0)
        *kind = SG_MSG_CENTERPRINT;
    else if (strcmp(verb, "chat") == 0 || strcmp(verb, "tchat") == 0)
        *kind = SG_MSG_CHAT;
    else if (strcmp(verb, "disconnect") == 0)
        *kind = SG_MSG_DISCONNECT;
    else if (strcmp(verb, "cs") == 0) {
        char *end;
        long idx = strtol(t, &end, 10);
        if (end != t) {
            *kind = SG_MSG_CONFIGSTRING;
            *number = (int32_t)idx;
            t = end;
            while (*t == ' ')
                t++;
        }
    }
    if (*kind == SG_MSG_SERVER_COMMAND) {
        *text = cmd;
        *len = strlen(cmd);
    } else {
        *len = unquote(t, text);
    }
}

/* A server command as a cross-game message. */
static void add_server_command(struct q3c *c, const char *cmd, int32_t seq, bool repeat)
{
    enum sg_msg_kind kind;
    int32_t number = seq;
    const char *text;
    size_t len;
    struct sg_msg *m;

    classify_server_command(cmd, &kind, &number, &text, &len);
    m = sg_q3__msg_add(c, kind, "svc_serverCommand", number, text, len, cmd, seq, -1);
    if (m)
        m->repeat = repeat;
}

/* What a client command is, as a cross-game message: kind and text. */
static void classify_client_command(const char *cmd, enum sg_msg_kind *kind, const char **text,
                                    size_t *len)
{
    char verb[32];
    size_t at = verb_of(cmd, verb, sizeof(verb));

    *kind = SG_MSG_CLIENT_COMMAND;
    *text = cmd;
    *len = strlen(cmd);
    if (strcmp(verb, "say") == 0 || strcmp(verb, "say_team") == 0) {
        *kind = SG_MSG_CHAT;
        *len = unquote(cmd + at, text);
    } else if (strcmp(verb, "tell") == 0) {
        const char *rest = cmd + at;
        while (*rest && *rest != ' ')
            rest++;
        while (*rest == ' ')
            rest++;
        *kind = SG_MSG_CHAT;
        *len = unquote(rest, text);
    }
}

/* A client command as a cross-game message. */
static void add_client_command(struct q3c *c, const char *cmd, int32_t seq, bool repeat)
{
    enum sg_msg_kind kind;
    const char *text;
    size_t len;
    struct sg_msg *m;

    classify_client_command(cmd, &kind, &text, &len);
    m = sg_q3__msg_add(c, kind, "clc_clientCommand", seq, text, len, cmd, seq, -1);
    if (m)
        m->repeat = repeat;
}

/* The messages of a server message; new reliable commands are numbered for the client. */
void sg_q3__list_server_message(struct q3c *c)
{
    const struct sg_q3_svmsg *sv = &c->sv;

    c->ack_out = sg_q3_renum_ack(&c->cc, sv->reliable_ack);
    c->gs_seq_out = -1;
    for (uint32_t i = 0; i < sv->num_ops; i++) {
        const struct sg_q3_op *op = &sv->ops[i];

        switch (op->type) {
        case SG_Q3_SVC_SERVERCOMMAND: {
            int32_t seq = op->u.cmd.sequence;
            bool fresh = sg_q3_renum_is_new(&c->sc, seq);
            if (fresh)
                sg_q3_renum_add(&c->sc, seq);
            add_server_command(c, sg_q3_svmsg_str(sv, op->u.cmd.text), seq, !fresh);
            break;
        }
        case SG_Q3_SVC_GAMESTATE:
            c->gs_seq_out = sg_q3_renum_gamestate(&c->sc, op->u.gamestate.command_seq);
            for (uint32_t k = 0; k < op->u.gamestate.num_items; k++) {
                const struct sg_q3_gs_item *it = &sv->items[op->u.gamestate.first_item + k];
                const char *t;
                if (it->op != SG_Q3_SVC_CONFIGSTRING)
                    continue;
                t = sg_q3_svmsg_str(sv, it->text);
                sg_q3__msg_add(c, SG_MSG_CONFIGSTRING, "svc_configstring", it->index, t,
                               it->text.len, NULL, -1, (int32_t)(op->u.gamestate.first_item + k));
            }
            sg_q3__msg_add(c, SG_MSG_GAME, "svc_gamestate", op->u.gamestate.command_seq, NULL, 0,
                           NULL, -1, -1);
            break;
        case SG_Q3_SVC_SNAPSHOT:
            sg_q3__msg_add(c, SG_MSG_GAME, "svc_snapshot", sv->snaps[op->u.snap].server_time, NULL,
                           0, NULL, -1, -1);
            break;
        case SG_Q3_SVC_DOWNLOAD:
            sg_q3__msg_add(c, SG_MSG_GAME, "svc_download", op->u.download.block, NULL, 0, NULL, -1,
                           -1);
            break;
        case SG_Q3_SVC_VOIP_SPEEX:
        case SG_Q3_SVC_VOIP_OPUS:
            sg_q3__msg_add(c, SG_MSG_GAME, "svc_voip", op->u.voip.sequence, NULL, 0, NULL, -1, -1);
            break;
        default:
            break;
        }
    }
}

/* The messages of a client message. */
void sg_q3__list_client_message(struct q3c *c)
{
    const struct sg_q3_clmsg *cm = &c->qf.u.cl;

    c->ack_out = sg_q3_renum_ack(&c->sc, cm->reliable_ack);
    for (int i = 0; i < cm->num_commands; i++) {
        int32_t seq = cm->commands[i].sequence;
        bool fresh = sg_q3_renum_is_new(&c->cc, seq);
        if (fresh)
            sg_q3_renum_add(&c->cc, seq);
        if (fresh && !c->translating)
            c->frame.ack_wanted = seq; /* the server's next reliable_ack (numbering kept) */
        add_client_command(c, cm->commands[i].text, seq, !fresh);
    }
    if (cm->move_op)
        sg_q3__msg_add(c, SG_MSG_GAME,
                       cm->move_op == SG_Q3_CLC_MOVE ? "clc_move" : "clc_moveNoDelta", cm->num_cmds,
                       NULL, 0, NULL, -1, -1);
}

/* ---- filters ---- */

/* From now on both sides' numbering and views are kept apart. */
static void start_translating(struct q3c *c)
{
    c->translating = true;
    c->nc.split_views = true;
}

/* Keep a text a filter set for the rest of the frame. */
static const char *keep_text(struct q3c *c, const char *text, size_t len)
{
    char *copy;

    if (c->nchanged >= (int)(sizeof(c->changed) / sizeof(c->changed[0])) ||
        !(copy = strndup(text, len)))
        return NULL;
    c->changed[c->nchanged++] = copy;
    return copy;
}

/* Quake 3 ends a quoted argument at the next quote: the text may not hold one. */
static void put_quoted(char *out, size_t cap, const char *prefix, const char *text, size_t len,
                       const char *suffix)
{
    size_t n = (size_t)snprintf(out, cap, "%s\"", prefix);

    for (size_t i = 0; i < len && n + 3 < cap; i++)
        out[n++] = text[i] == '"' ? '\'' : text[i];
    snprintf(out + n, cap - n, "\"%s", suffix);
}

/* The command a message of `kind` carries `text` in, keeping the original's form. */
static int build_command(const struct sg_msg *orig, enum sg_dir dir, enum sg_msg_kind kind,
                         const char *text, size_t len, char *out, size_t cap)
{
    char verb[32] = "";

    if (orig && orig->command)
        verb_of(orig->command, verb, sizeof(verb));
    if (len >= SG_Q3_MAX_STRING_CHARS - 32)
        len = SG_Q3_MAX_STRING_CHARS - 32;
    if (dir == SG_DIR_C2S) {
        switch (kind) {
        case SG_MSG_CHAT:
            if (orig && strcmp(verb, "tell") == 0) {
                /* keep "tell N " */
                const char *p = orig->command + verb_of(orig->command, verb, sizeof(verb));
                size_t head = (size_t)(p - orig->command);
                while (p[0] && p[0] != ' ')
                    p++, head++;
                snprintf(out, cap, "%.*s %.*s", (int)head, orig->command, (int)len, text);
            } else {
                snprintf(out, cap, "%s %.*s", verb[0] ? verb : "say", (int)len, text);
            }
            return 0;
        case SG_MSG_CLIENT_COMMAND:
            snprintf(out, cap, "%.*s", (int)len, text);
            return 0;
        default:
            return SG_E_UNSUPPORTED;
        }
    }
    switch (kind) {
    case SG_MSG_PRINT:
        put_quoted(out, cap, "print ", text, len, "");
        return 0;
    case SG_MSG_CENTERPRINT:
        put_quoted(out, cap, "cp ", text, len, "");
        return 0;
    case SG_MSG_CHAT:
        put_quoted(out, cap, verb[0] && strcmp(verb, "tchat") == 0 ? "tchat " : "chat ", text, len,
                   "");
        return 0;
    case SG_MSG_DISCONNECT:
        put_quoted(out, cap, "disconnect ", text, len, "");
        return 0;
    case SG_MSG_CONFIGSTRING: {
        char prefix[32];
        if (!orig)
            return SG_E_UNSUPPORTED;
        snprintf(prefix, sizeof(prefix), "cs %d ", (int)orig->number);
        put_quoted(out, cap, prefix, text, len, "");
        return 0;
    }
    case SG_MSG_SERVER_COMMAND:
        snprintf(out, cap, "%.*s", (int)len, text);
        return 0;
    default:
        return SG_E_UNSUPPORTED;
    }
}

int sg_q3__set_text(void *state, unsigned i, const char *text, size_t len)
{
    struct q3c *c = state;
    struct sg_msg *m = &c->msgs[i];
    enum sg_dir dir = c->frame.dir;
    char cmd[SG_Q3_MAX_STRING_CHARS];
    int err;

    if (i >= c->nmsgs || m->kind == SG_MSG_GAME || m->repeat || m->dropped)
        return SG_E_UNSUPPORTED;

    /* A configstring of a gamestate: changed in place, no numbering involved. */
    if (c->msg_ref[i] >= 0) {
        struct sg_q3_gs_item *it;
        struct sg_q3_bytes ref;
        if ((err = sg_q3_svmsg_add_bytes(&c->sv, text, len, &ref)) < 0)
            return err;
        it = &c->sv.items[c->msg_ref[i]];
        it->text = ref;
        m->text = keep_text(c, text, len);
        m->command = m->text;
        m->text_len = len;
        m->changed = true;
        return m->text ? 0 : -ENOMEM;
    }
    if (c->msg_seq[i] < 0)
        return SG_E_UNSUPPORTED;
    if ((err = build_command(m, dir, m->kind, text, len, cmd, sizeof(cmd))) < 0)
        return err;
    err = sg_q3_renum_set_text(dir == SG_DIR_S2C ? &c->sc : &c->cc, c->msg_seq[i], cmd);
    if (err < 0)
        return err;
    start_translating(c);
    m->command = keep_text(c, cmd, strlen(cmd));
    m->text = keep_text(c, text, len);
    m->text_len = m->text ? strlen(m->text) : 0;
    m->changed = true;
    return 0;
}

int sg_q3__drop_msg(void *state, unsigned i)
{
    struct q3c *c = state;
    struct sg_msg *m = &c->msgs[i];
    int err;

    if (i >= c->nmsgs || m->repeat || c->msg_seq[i] < 0)
        return SG_E_UNSUPPORTED;
    if (m->dropped)
        return 0;
    err = sg_q3_renum_drop(c->frame.dir == SG_DIR_S2C ? &c->sc : &c->cc, c->msg_seq[i]);
    if (err < 0)
        return err;
    start_translating(c);
    m->dropped = true;
    return 0;
}

int sg_q3__inject(void *state, enum sg_dir dir, enum sg_msg_kind kind, const char *text, size_t len)
{
    struct q3c *c = state;
    char cmd[SG_Q3_MAX_STRING_CHARS];
    int err;

    if (c->nc.wire == SG_Q3_WIRE_HEADERS)
        return SG_E_UNSUPPORTED; /* no message view of a protocol not decoded */
    if (!c->nc.connected && dir == SG_DIR_S2C)
        return SG_E_STATE;
    if ((err = build_command(NULL, dir, kind, text, len, cmd, sizeof(cmd))) < 0)
        return err;
    err = sg_q3_renum_inject(dir == SG_DIR_S2C ? &c->sc : &c->cc, cmd);
    if (err < 0)
        return err;
    start_translating(c);
    return 0;
}

bool sg_q3__must_encode(void *state, const struct sg_frame *f)
{
    struct q3c *c = state;

    return c->translating && (f->kind == SG_FRAME_MESSAGE || f->kind == SG_FRAME_PARTIAL);
}

/* ---- translating for the receiver (filters changed the stream) ---- */

/* One reliable command of a rebuilt message. */
struct out_cmd {
    int32_t seq;
    const char *text;       /* a text that stays put (renum's, or the caller's copy) */
    struct sg_q3_bytes ref; /* or, when has_ref, the original in the message's byte pool */
    bool has_ref;
    bool injected, resend; /* a filter's injection; sent before */
};

/*
 * The injected commands a rebuilt message carries, appended to the frame's
 * messages (after sg_q3__msgs_done: texts are kept copies) so that the taps show
 * what was sent.  Resends until acknowledged are marked repeat.
 */
static void note_injected(struct q3c *c, const struct out_cmd *cmds, int k)
{
    struct sg_frame *f = &c->frame;

    for (int i = 0; i < k; i++) {
        enum sg_msg_kind kind;
        int32_t number = cmds[i].seq;
        const char *text, *cmd;
        size_t len;
        struct sg_msg *m;

        if (!cmds[i].injected || !(cmd = keep_text(c, cmds[i].text, strlen(cmds[i].text))))
            continue;
        if (f->dir == SG_DIR_S2C)
            classify_server_command(cmd, &kind, &number, &text, &len);
        else
            classify_client_command(cmd, &kind, &text, &len);
        if (!(text = keep_text(c, text, len)) || !msgs_grow(c))
            continue;
        m = &c->msgs[c->nmsgs];
        memset(m, 0, sizeof(*m));
        m->kind = kind;
        m->name = f->dir == SG_DIR_S2C ? "svc_serverCommand" : "clc_clientCommand";
        m->number = number;
        m->text = text;
        m->text_len = len;
        m->command = cmd;
        m->injected = true;
        m->repeat = cmds[i].resend;
        c->msg_seq[c->nmsgs] = -1;
        c->msg_ref[c->nmsgs] = -1;
        c->nmsgs++;
        f->msgs = c->msgs;
        f->nmsgs = c->nmsgs;
    }
}

static int cmp_out_cmd(const void *a, const void *b)
{
    const struct out_cmd *x = a, *y = b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * The reliable commands the receiver gets in this message: the sender's,
 * renumbered, without the dropped ones and with changed texts, plus the
 * injected ones it has not acknowledged yet, in number order.
 */
static int out_commands(struct sg_q3_renum *r, const int32_t *seqs, const char *const *texts,
                        const struct sg_q3_bytes *refs, int n, bool with_pending,
                        struct out_cmd *out, int cap)
{
    int k = 0;

    for (int i = 0; i < n && k < cap; i++) {
        int32_t to;
        const char *t;
        if (!sg_q3_renum_map(r, seqs[i], &to, &t))
            continue;
        memset(&out[k], 0, sizeof(out[k]));
        out[k].seq = to;
        out[k].text = t ? t : texts ? texts[i] : NULL;
        out[k].has_ref = !t && refs;
        if (out[k].has_ref)
            out[k].ref = refs[i];
        k++;
    }
    for (int i = 0; with_pending && i < r->npending && k < cap; i++) {
        if (r->pending[i].receiver <= r->receiver_ack)
            continue;
        memset(&out[k], 0, sizeof(out[k]));
        out[k].seq = r->pending[i].receiver;
        out[k].text = r->pending[i].text;
        out[k].injected = true;
        out[k++].resend = r->pending[i].sent;
        r->pending[i].sent = true;
    }
    qsort(out, (size_t)k, sizeof(*out), cmp_out_cmd);
    return k;
}

/* A server message for the client: acknowledgement, commands and gamestate renumbered. */
static int translate_server_message(struct q3c *c)
{
    struct sg_q3_svmsg *sv = &c->sv;
    int32_t seqs[SG_Q3_MAX_RELIABLE_COMMANDS * 2];
    struct sg_q3_bytes refs[SG_Q3_MAX_RELIABLE_COMMANDS * 2];
    struct out_cmd cmds[SG_Q3_MAX_RELIABLE_COMMANDS * 2 + SG_Q3_RENUM_PENDING];
    struct sg_q3_op *rest;
    uint32_t nrest = 0, first_cmd = UINT32_MAX;
    bool gamestate = false;
    int n = 0, k, err;

    sv->reliable_ack = c->ack_out;
    rest = malloc((sv->num_ops + 1) * sizeof(*rest));
    if (!rest)
        return -ENOMEM;
    for (uint32_t i = 0; i < sv->num_ops; i++) {
        struct sg_q3_op *op = &sv->ops[i];
        if (op->type == SG_Q3_SVC_SERVERCOMMAND && n < (int)(sizeof(seqs) / sizeof(seqs[0]))) {
            if (first_cmd == UINT32_MAX)
                first_cmd = nrest;
            seqs[n] = op->u.cmd.sequence;
            refs[n++] = op->u.cmd.text; /* not a pointer: the pool grows below */
            continue;
        }
        if (op->type == SG_Q3_SVC_GAMESTATE) {
            gamestate = true;
            if (c->gs_seq_out >= 0)
                op->u.gamestate.command_seq = c->gs_seq_out;
        }
        rest[nrest++] = *op;
    }
    if (first_cmd == UINT32_MAX)
        first_cmd = 0; /* commands lead a server message (SV_UpdateServerCommandsToClient) */
    /* injected commands wait for a message after the gamestate (renum_gamestate) */
    k = out_commands(&c->sc, seqs, NULL, refs, n, !gamestate, cmds,
                     (int)(sizeof(cmds) / sizeof(cmds[0])));

    /* The ops again: what came before the commands, the commands, the rest. */
    sv->num_ops = 0;
    for (uint32_t i = 0; i < first_cmd; i++) {
        if ((err = sg_q3_svmsg_add_op(sv, rest[i].type)) < 0)
            goto out;
        sv->ops[err] = rest[i];
    }
    note_injected(c, cmds, k);
    for (int i = 0; i < k; i++) {
        struct sg_q3_bytes ref = cmds[i].ref;
        int at = sg_q3_svmsg_add_op(sv, SG_Q3_SVC_SERVERCOMMAND);
        if ((err = at) < 0)
            goto out;
        if (!cmds[i].has_ref &&
            (err = sg_q3_svmsg_add_bytes(sv, cmds[i].text, strlen(cmds[i].text), &ref)) < 0)
            goto out;
        sv->ops[at].type = SG_Q3_SVC_SERVERCOMMAND;
        sv->ops[at].u.cmd.sequence = cmds[i].seq;
        sv->ops[at].u.cmd.text = ref;
        sv->ops[at].u.cmd.fresh = true;
    }
    for (uint32_t i = first_cmd; i < nrest; i++) {
        if ((err = sg_q3_svmsg_add_op(sv, rest[i].type)) < 0)
            goto out;
        sv->ops[err] = rest[i];
    }
    err = 0;
out:
    free(rest);
    return err;
}

/* A client message for the server: acknowledgement and commands renumbered. */
static void translate_client_message(struct q3c *c)
{
    struct sg_q3_clmsg *cm = &c->qf.u.cl;
    int32_t seqs[SG_Q3_MAX_RELIABLE_COMMANDS];
    const char *texts[SG_Q3_MAX_RELIABLE_COMMANDS];
    struct out_cmd cmds[SG_Q3_MAX_RELIABLE_COMMANDS + SG_Q3_RENUM_PENDING];
    int n = cm->num_commands, k;

    cm->reliable_ack = c->ack_out;
    if (!c->cmd_copies &&
        !(c->cmd_copies = calloc(SG_Q3_MAX_RELIABLE_COMMANDS, sizeof(*c->cmd_copies))))
        n = 0; /* out of memory: the commands go as they are */
    for (int i = 0; i < n; i++) {
        seqs[i] = cm->commands[i].sequence;
        snprintf(c->cmd_copies[i], sizeof(c->cmd_copies[i]), "%s", cm->commands[i].text);
        texts[i] = c->cmd_copies[i];
    }
    k = out_commands(&c->cc, seqs, texts, NULL, n, true, cmds,
                     (int)(sizeof(cmds) / sizeof(cmds[0])));
    if (k > SG_Q3_MAX_RELIABLE_COMMANDS)
        k = SG_Q3_MAX_RELIABLE_COMMANDS;
    note_injected(c, cmds, k);
    for (int i = 0; i < k; i++) {
        size_t len = strlen(cmds[i].text);
        if (len >= sizeof(cm->commands[i].text))
            len = sizeof(cm->commands[i].text) - 1;
        cm->commands[i].sequence = cmds[i].seq;
        memmove(cm->commands[i].text, cmds[i].text, len);
        cm->commands[i].text[len] = '\0';
        cm->commands[i].len = (uint16_t)len;
    }
    cm->num_commands = k;
}

/* Write the message again from its decoded form (translated when filters changed the stream). */
int sg_q3__rewrite_message(struct q3c *c, enum sg_dir dir)
{
    const struct sg_q3_view *sv;
    int err;

    if (dir == SG_DIR_S2C) {
        if (c->parse_err < 0)
            return c->parse_err;
        if (c->translating && (err = translate_server_message(c)) < 0)
            return err;
        return sg_q3_write_server_message(&c->sv, c->buf, sizeof(c->buf));
    }
    if (c->qf.content_err < 0)
        return c->qf.content_err;
    if (c->translating)
        translate_client_message(c);
    sv = sg_q3_netchan_view(&c->nc, SG_Q3_SIDE_SERVER);
    return sg_q3_clmsg_encode(&c->qf.u.cl, sv->checksum_feed, &sv->server_cmds, c->buf,
                              sizeof(c->buf));
}
