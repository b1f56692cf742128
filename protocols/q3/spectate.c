/*
 * Quake 3 spectators: the game's server side for one real client on a
 * route's spectator port (spectate.h).  What a server does for a client is
 * taken from ioquake3's sv_client.c (SV_GetChallenge, SV_DirectConnect,
 * SV_SendClientGameState, SV_ExecuteClientMessage) and sv_snapshot.c
 * (SV_UpdateServerCommandsToClient, SV_WriteSnapshotToClient); the
 * message bodies are the demo recorder's (record.c) and the netchan is
 * the session codec's (netchan.c), used from the server's side.
 */
#include "protocols/q3/spectate.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "protocols/error.h"
#include "protocols/q3/demo.h"
#include "protocols/q3/oob.h"
#include "protocols/q3/variant.h"

#define SPEC_PROTOCOL    71   /* what the challenge answer reports (a 68 client falls back) */
#define GAMESTATE_RESEND 1000 /* ms between gamestates the spectator has not acknowledged */

enum spec_stage {
    STAGE_CONNECTED, /* accepted: the next gamestate is due */
    STAGE_PRIMED,    /* a gamestate went out, not acknowledged yet */
    STAGE_ACTIVE,    /* snapshots flow */
};

/* One message sent: whether it carried a snapshot, and of which watched frame. */
struct sent {
    int32_t seq;
    int32_t watched_msg;
    bool snap;
};

struct q3spec {
    struct sg_q3_netchan nc;
    struct sg_q3_frame qf;
    int32_t challenge;
    char name[64];
    enum spec_stage stage;
    const void *watched; /* the state it watches (struct sg_spect_src), or NULL */

    int32_t out_seq;    /* last sequence sent */
    int32_t gs_seq;     /* sequence of the last gamestate sent */
    uint64_t gs_ms;     /* when it went */
    int32_t msg_ack;    /* the spectator's messageAcknowledge */
    int32_t delta_msg;  /* what the next snapshot may be a delta from (SV_UserMove), -1: none */
    int32_t client_cmd; /* last client command received (acknowledged back) */

    /* reliable server commands, in the spectator's numbering */
    int32_t rel_seq, rel_ack;
    char *rel[SG_Q3_MAX_RELIABLE_COMMANDS];

    char notice[128]; /* a centerprint for when it is active again, "" none */

    struct sent sent[SG_Q3_PACKET_BACKUP];
    struct sg_q3_svmsg out;
    uint8_t buf[SG_Q3_MAX_MSGLEN];
    struct sg_q3_datagrams dg;
};

/* ---- out-of-band ---- */

static int oob_text(uint8_t *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int oob_text(uint8_t *out, size_t cap, const char *fmt, ...)
{
    char text[256];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(text))
        return SG_E_TOOBIG;
    return sg_q3_oob_build(text, (size_t)n, false, out, cap);
}

static int reply(int n, size_t *out_len)
{
    if (n < 0)
        return SG_SPECT_IGNORE;
    *out_len = (size_t)n;
    return SG_SPECT_REPLY;
}

static int refuse(int n, size_t *out_len)
{
    return reply(n, out_len) == SG_SPECT_REPLY ? SG_SPECT_REFUSE : SG_SPECT_IGNORE;
}

static int q3s_hello(const uint8_t *data, size_t len, int32_t challenge, const char *password,
                     uint8_t *out, size_t cap, size_t *out_len)
{
    struct sg_q3_oob *o = malloc(sizeof(*o));
    char pw[SG_Q3_MAX_INFO_STRING];
    int ret = SG_SPECT_IGNORE;

    if (!o)
        return SG_SPECT_IGNORE;
    if (sg_q3_oob_parse(data, len, true, o) < 0)
        goto done;
    switch (o->kind) {
    case SG_Q3_OOB_GETCHALLENGE:
        /* SV_GetChallenge: the client's own challenge and the protocol back (71) */
        if (o->has_client_challenge)
            ret = reply(oob_text(out, cap, "challengeResponse %d %d %d", challenge,
                                 o->client_challenge, SPEC_PROTOCOL),
                        out_len);
        else
            ret = reply(oob_text(out, cap, "challengeResponse %d", challenge), out_len);
        break;
    case SG_Q3_OOB_CONNECT:
        /* SV_DirectConnect's refusals, with its own texts */
        if (!o->has_protocol || (o->protocol != 68 && o->protocol != 71)) {
            ret =
                refuse(oob_text(out, cap, "print\nServer uses protocol version %d (yours is %d).\n",
                                SPEC_PROTOCOL, o->has_protocol ? o->protocol : 0),
                       out_len);
        } else if (!o->has_challenge || o->challenge != challenge) {
            ret = refuse(oob_text(out, cap, "print\nNo or bad challenge for your address.\n"),
                         out_len);
        } else if (password && *password &&
                   (!sg_q3_info_value(o->userinfo, "password", pw, sizeof(pw)) ||
                    strcmp(pw, password) != 0)) {
            ret = refuse(oob_text(out, cap, "print\nInvalid password\n"), out_len);
        } else {
            ret = SG_SPECT_CONNECT;
        }
        break;
    default:
        break;
    }
done:
    free(o);
    return ret;
}

/* ---- the spectator ---- */

/* The variant the spectator's netchan speaks (its rings' sizes); 68's until known. */
static const struct sg_q3_variant *spec_variant(const struct q3spec *sp)
{
    const struct sg_q3_variant *v = sg_q3_variant_of(sp->nc.wire);

    return v ? v : &sg_q3_variant_68;
}

static void rel_clear(struct q3spec *sp)
{
    for (int i = 0; i < SG_Q3_MAX_RELIABLE_COMMANDS; i++) {
        free(sp->rel[i]);
        sp->rel[i] = NULL;
    }
    sp->rel_seq = sp->rel_ack = 0;
}

/* A (re)connect: everything the server keeps per client starts again. */
static void restart(struct q3spec *sp)
{
    rel_clear(sp);
    sp->stage = STAGE_CONNECTED;
    sp->out_seq = sp->gs_seq = sp->msg_ack = sp->client_cmd = 0;
    sp->delta_msg = -1;
    sp->gs_ms = 0;
    memset(sp->sent, 0, sizeof(sp->sent));
}

static int accept_connect(struct q3spec *sp, const uint8_t *data, size_t len, sg_emit_fn emit,
                          void *ctx)
{
    const struct sg_q3_oob *o = &sp->qf.u.oob;
    uint8_t out[64];
    int n, err = sg_q3_netchan_decode(&sp->nc, SG_Q3_C2S, data, len, &sp->qf);

    if (err < 0 || sp->qf.rx != SG_Q3_RX_OOB || o->kind != SG_Q3_OOB_CONNECT)
        return err < 0 ? err : SG_E_MALFORMED;
    restart(sp);
    sp->challenge = o->challenge;
    if (!sg_q3_info_value(o->userinfo, "name", sp->name, sizeof(sp->name)))
        sp->name[0] = 0;
    sp->nc.connected = true; /* the netchan the spectator's connectResponse sets up */
    n = oob_text(out, sizeof(out), "connectResponse %d", sp->challenge);
    if (n < 0)
        return n;
    return emit(ctx, out, (size_t)n);
}

static int q3s_create(void **spec, const uint8_t *connect, size_t len, sg_emit_fn emit, void *ctx)
{
    struct q3spec *sp = calloc(1, sizeof(*sp));
    int err;

    *spec = NULL;
    if (!sp)
        return -ENOMEM;
    sg_q3_netchan_init(&sp->nc);
    sg_q3_svmsg_init(&sp->out);
    err = accept_connect(sp, connect, len, emit, ctx);
    if (err < 0) {
        sg_q3_netchan_finish(&sp->nc);
        sg_q3_svmsg_finish(&sp->out);
        free(sp);
        return err;
    }
    *spec = sp;
    return 0;
}

static void q3s_destroy(void *spec)
{
    struct q3spec *sp = spec;

    if (!sp)
        return;
    rel_clear(sp);
    sg_q3_netchan_finish(&sp->nc);
    sg_q3_svmsg_finish(&sp->out);
    free(sp);
}

/* A delayed copy of a session's server stream (spectate_delay). */
struct q3stream {
    struct sg_q3_state *st;
    struct sg_q3_svmsg sv;
    int parse_err;
    struct sg_frame frame;
};

/* What `w` shows: its tracked state (NULL: none yet) and its last server message. */
static const struct sg_q3_state *stream_of(const struct sg_spect_src *w,
                                           const struct sg_q3_svmsg **m, int *parse_err)
{
    const struct q3stream *d;

    if (!w || !w->state)
        return NULL;
    if (!w->delayed)
        return sg_q3__codec_stream(w->state, m, parse_err);
    d = w->state;
    *m = &d->sv;
    *parse_err = d->parse_err;
    return d->st;
}

static const void *state_of(const struct sg_spect_src *w)
{
    return w ? w->state : NULL;
}

static void q3s_watch(void *spec, const struct sg_spect_src *watched)
{
    struct q3spec *sp = spec;

    sp->watched = state_of(watched);
    if (sp->stage != STAGE_CONNECTED) {
        /* a new view: a new gamestate (the game's follow of another client
         * keeps it; here the configstrings and baselines may differ) */
        sp->stage = STAGE_CONNECTED;
        memset(sp->sent, 0, sizeof(sp->sent));
    }
}

/* Queue a server command for the spectator (SV_AddServerCommand).  0, or
 * SG_E_STATE when it would overflow the window the client keeps. */
static int rel_add(struct q3spec *sp, const char *text)
{
    int cmds = spec_variant(sp)->max_reliable_commands;
    int32_t seq = sp->rel_seq + 1;
    char **slot = &sp->rel[seq & (cmds - 1)];
    char *copy;

    if (seq - sp->rel_ack > cmds)
        return SG_E_STATE; /* the game drops such a client: "Server command overflow" */
    if (!(copy = strdup(text)))
        return -ENOMEM;
    free(*slot);
    *slot = copy;
    sp->rel_seq = seq;
    return 0;
}

/* The message's start: reliableAcknowledge and the unacknowledged commands. */
static int begin_message(struct q3spec *sp)
{
    struct sg_q3_svmsg *m = &sp->out;
    int32_t mask = spec_variant(sp)->max_reliable_commands - 1;

    sg_q3_svmsg_reset(m);
    m->reliable_ack = sp->client_cmd;
    for (int32_t i = sp->rel_ack + 1; i <= sp->rel_seq; i++) {
        const char *text = sp->rel[i & mask];
        int op = sg_q3_svmsg_add_op(m, SG_Q3_SVC_SERVERCOMMAND);
        int err;

        if (op < 0)
            return op;
        m->ops[op].u.cmd.sequence = i;
        err = sg_q3_svmsg_add_bytes(m, text ? text : "", text ? strlen(text) : 0,
                                    &m->ops[op].u.cmd.text);
        if (err < 0)
            return err;
    }
    return 0;
}

/* Write the message, frame it for the spectator's netchan and send it. */
static int send_message(struct q3spec *sp, sg_emit_fn emit, void *ctx)
{
    int len = sg_q3_write_server_message(&sp->out, sp->buf, sizeof(sp->buf));
    int n, err;

    if (len < 0)
        return len;
    sp->out.sequence = ++sp->out_seq;
    n = sg_q3_netchan_encode(&sp->nc, SG_Q3_S2C, sp->out_seq, sp->buf, (size_t)len, &sp->dg);
    if (n < 0)
        return n;
    for (int i = 0; i < n; i++)
        if ((err = emit(ctx, sp->dg.data[i], sp->dg.len[i])) < 0)
            return err;
    return n;
}

static bool wire_known(const struct q3spec *sp)
{
    return sg_q3_variant_of(sp->nc.wire) != NULL && sp->nc.have_challenge;
}

/* SV_SendClientGameState: the commands waiting, then the gamestate. */
static int send_gamestate(struct q3spec *sp, const struct sg_q3_state *st, uint64_t now_ms,
                          sg_emit_fn emit, void *ctx)
{
    int err, n;

    if (!st || !st->have_gamestate || !wire_known(sp))
        return 0;
    if ((err = begin_message(sp)) < 0)
        return err;
    if ((err = sg_q3_record_gamestate(st, sp->rel_seq, &sp->out)) < 0)
        return err;
    n = send_message(sp, emit, ctx);
    if (n < 0)
        return n;
    sp->sent[sp->out_seq & (spec_variant(sp)->packet_backup - 1)] = (struct sent){.seq = sp->out_seq};
    sp->gs_seq = sp->out_seq;
    sp->gs_ms = now_ms ? now_ms : 1;
    sp->stage = STAGE_PRIMED;
    return n;
}

/* The tracked frame the spectator acknowledged last, when a delta from it reads right. */
static const struct sg_q3_snapshot *
acked_base(const struct q3spec *sp, const struct sg_q3_state *st, const struct sg_q3_snapshot *snap)
{
    int backup = spec_variant(sp)->packet_backup;
    const struct sent *s = &sp->sent[sp->delta_msg & (backup - 1)];
    const struct sg_q3_snapshot *base;
    int32_t d = sp->out_seq + 1 - sp->delta_msg;

    if (sp->delta_msg <= 0 || s->seq != sp->delta_msg || !s->snap || d <= 0 || d >= backup)
        return NULL;
    base = sg_q3_state_snapshot(st, s->watched_msg);
    if (!base || base == snap)
        return NULL;
    d = sg_q3_seqdiff(snap->message_num, base->message_num);
    return d > 0 && d < st->variant->packet_backup ? base : NULL;
}

/* SV_WriteSnapshotToClient for the watched player's frame `snap`. */
static int send_snapshot(struct q3spec *sp, const struct sg_q3_state *st,
                         const struct sg_q3_snapshot *snap, sg_emit_fn emit, void *ctx)
{
    const struct sg_q3_snapshot *base = acked_base(sp, st, snap);
    struct sg_q3_snapshot *cur = malloc(2 * sizeof(*cur)), *old = cur + 1;
    struct sg_q3_snap *s;
    int err, n;

    if (!cur)
        return -ENOMEM;
    /* the player state as the game's follow mode sends it */
    *cur = *snap;
    cur->ps.f[SG_Q3_PS_PM_FLAGS] |= SG_Q3_PMF_FOLLOW;
    if (base) {
        *old = *base;
        old->ps.f[SG_Q3_PS_PM_FLAGS] |= SG_Q3_PMF_FOLLOW;
    }
    err = begin_message(sp);
    if (err >= 0)
        err = sg_q3_record_snapshot(st, cur, base ? old : NULL, &sp->out);
    if (err < 0 && base) { /* the base's entities are gone: whole */
        base = NULL;
        err = begin_message(sp);
        if (err >= 0)
            err = sg_q3_record_snapshot(st, cur, NULL, &sp->out);
    }
    free(cur);
    if (err < 0)
        return err;
    /* the delta in the spectator's own numbering */
    s = &sp->out.snaps[sp->out.num_snaps - 1];
    s->delta_num = base ? (uint8_t)(sp->out_seq + 1 - sp->delta_msg) : 0;
    n = send_message(sp, emit, ctx);
    if (n < 0)
        return n;
    sp->sent[sp->out_seq & (spec_variant(sp)->packet_backup - 1)] =
        (struct sent){.seq = sp->out_seq, .watched_msg = snap->message_num, .snap = true};
    return n;
}

/* A console command of the spectator's (SV_ExecuteClientCommand, the ones it heeds). */
static void client_command(const char *text, struct sg_spect_ask_req *req)
{
    char verb[32];
    size_t n = strcspn(text, " \t");
    const char *arg = text + n;

    if (n >= sizeof(verb))
        return;
    memcpy(verb, text, n);
    verb[n] = 0;
    arg += strspn(arg, " \t\"");
    if (strcasecmp(verb, "disconnect") == 0) {
        req->ask = SG_SPECT_ASK_END;
    } else if (strcasecmp(verb, "follownext") == 0) {
        req->ask = SG_SPECT_ASK_NEXT;
    } else if (strcasecmp(verb, "followprev") == 0) {
        req->ask = SG_SPECT_ASK_PREV;
    } else if (strcasecmp(verb, "follow") == 0 && *arg) {
        req->ask = SG_SPECT_ASK_FOLLOW;
        snprintf(req->arg, sizeof(req->arg), "%.*s", (int)strcspn(arg, "\""), arg);
    }
}

static int q3s_input(void *spec, const struct sg_spect_src *watched, uint64_t now_ms,
                     const uint8_t *data, size_t len, sg_emit_fn emit, void *ctx,
                     struct sg_spect_ask_req *req)
{
    struct q3spec *sp = spec;
    const struct sg_q3_svmsg *last;
    const struct sg_q3_state *st = NULL;
    const struct sg_q3_clmsg *cl = &sp->qf.u.cl;
    int parse_err, err;

    req->ask = SG_SPECT_ASK_NONE;
    if (state_of(watched) != sp->watched)
        q3s_watch(sp, watched);
    st = stream_of(watched, &last, &parse_err);

    /* a connect again (the accept was lost): accepted again, from the start */
    if (sg_q3_oob_is(data, len)) {
        struct sg_q3_oob *o = malloc(sizeof(*o));
        bool again = o && sg_q3_oob_parse(data, len, true, o) == 0 &&
                     o->kind == SG_Q3_OOB_CONNECT && o->has_challenge &&
                     o->challenge == sp->challenge;

        uint8_t out[128];
        size_t n = 0;

        free(o);
        if (again)
            return accept_connect(sp, data, len, emit, ctx);
        /* a challenge request again: the same challenge */
        if (q3s_hello(data, len, sp->challenge, NULL, out, sizeof(out), &n) == SG_SPECT_REPLY)
            return emit(ctx, out, n);
        return 0;
    }

    err = sg_q3_netchan_decode(&sp->nc, SG_Q3_C2S, data, len, &sp->qf);
    if (sp->qf.rx != SG_Q3_RX_MESSAGE)
        return err;

    /* acknowledgements (SV_ExecuteClientMessage), within what was sent */
    if (cl->message_ack <= sp->out_seq && cl->message_ack > sp->msg_ack)
        sp->msg_ack = cl->message_ack;
    if (cl->reliable_ack <= sp->rel_seq && cl->reliable_ack > sp->rel_ack)
        sp->rel_ack = cl->reliable_ack;
    /* the base of the next snapshot: what it acknowledged, unless it asks
     * for a whole one (clc_moveNoDelta: its demo waits for one, or it lost
     * its frames) */
    if (cl->move_op == SG_Q3_CLC_MOVE)
        sp->delta_msg = sp->msg_ack;
    else if (cl->move_op == SG_Q3_CLC_MOVE_NODELTA)
        sp->delta_msg = -1;
    /* its commands, each once (the client sends them until acknowledged) */
    for (int i = 0; i < cl->num_commands; i++) {
        if (cl->commands[i].sequence != sp->client_cmd + 1)
            continue;
        sp->client_cmd = cl->commands[i].sequence;
        client_command(cl->commands[i].text, req);
        if (req->ask == SG_SPECT_ASK_END)
            return 0;
    }

    /* the gamestate: due, or acknowledged, or lost */
    if (sp->stage == STAGE_PRIMED && sp->msg_ack >= sp->gs_seq) {
        sp->stage = STAGE_ACTIVE;
        /* the notice waiting for the new view: the game's centerprint */
        if (sp->notice[0]) {
            char cmd[160];

            snprintf(cmd, sizeof(cmd), "cp \"%s\n\"", sp->notice);
            sp->notice[0] = 0;
            if ((err = rel_add(sp, cmd)) < 0)
                return err;
        }
    }
    if (sp->stage == STAGE_CONNECTED ||
        (sp->stage == STAGE_PRIMED && now_ms - sp->gs_ms >= GAMESTATE_RESEND))
        return send_gamestate(sp, st, now_ms, emit, ctx);
    return err < 0 ? err : 0;
}

/* The text of the watched stream's server command `op`, as it travelled. */
static bool forwarded(const char *text)
{
    /* the player's own disconnect is not the spectator's */
    return strncasecmp(text, "disconnect", 10) != 0;
}

static int q3s_feed(void *spec, const struct sg_spect_src *watched, const struct sg_frame *f,
                    uint64_t now_ms, sg_emit_fn emit, void *ctx)
{
    struct q3spec *sp = spec;
    const struct sg_q3_svmsg *m;
    const struct sg_q3_state *st;
    const struct sg_q3_snap *snap;
    const struct sg_q3_snapshot *frame;
    int parse_err, err;
    bool gamestate = false;

    if (state_of(watched) != sp->watched)
        q3s_watch(sp, watched);
    if (f->kind != SG_FRAME_MESSAGE || f->dir != SG_DIR_S2C)
        return 0;
    st = stream_of(watched, &m, &parse_err);
    if (!st)
        return 0;

    /* the server commands the player took, in the spectator's numbering */
    for (uint32_t i = 0; i < m->num_ops; i++) {
        const struct sg_q3_op *op = &m->ops[i];

        if (op->type == SG_Q3_SVC_GAMESTATE)
            gamestate = true;
        if (op->type != SG_Q3_SVC_SERVERCOMMAND || !op->u.cmd.fresh || sp->stage == STAGE_CONNECTED)
            continue;
        if (forwarded(sg_q3_svmsg_str(m, op->u.cmd.text)) &&
            (err = rel_add(sp, sg_q3_svmsg_str(m, op->u.cmd.text))) < 0)
            return err;
    }

    /* a new level: a new gamestate */
    if (gamestate) {
        q3s_watch(sp, watched);
        sp->stage = STAGE_CONNECTED;
        memset(sp->sent, 0, sizeof(sp->sent));
        rel_clear(sp);
        return send_gamestate(sp, st, now_ms, emit, ctx);
    }
    if (sp->stage == STAGE_CONNECTED && wire_known(sp))
        return send_gamestate(sp, st, now_ms, emit, ctx);
    if (sp->stage != STAGE_ACTIVE || parse_err < 0)
        return 0;
    snap = sg_q3_svmsg_snapshot(m);
    if (!snap || snap->status != 0 || !(frame = sg_q3_state_snapshot(st, snap->message_num)))
        return 0;
    return send_snapshot(sp, st, frame, emit, ctx);
}

/* Quotes and backslashes would end the command's argument: they become '. */
static void q3s_notice(void *spec, const char *text)
{
    struct q3spec *sp = spec;
    size_t i;

    for (i = 0; text[i] && i + 1 < sizeof(sp->notice); i++)
        sp->notice[i] =
            text[i] == '"' || text[i] == '\\' || (unsigned char)text[i] < 32 ? '\'' : text[i];
    sp->notice[i] = 0;
}

static const char *q3s_name(const void *spec)
{
    return ((const struct q3spec *)spec)->name;
}

static int q3s_player(const void *state, char *name, size_t cap)
{
    const struct sg_q3_svmsg *last;
    const struct sg_q3_state *st;
    int parse_err;

    name[0] = 0;
    st = state ? sg_q3__codec_stream(state, &last, &parse_err) : NULL;
    if (!st || !st->have_gamestate || st->client_num < 0 || st->client_num >= 64)
        return -1;
    if (!sg_q3_info_value(sg_q3_state_configstring(st, SG_Q3_CS_PLAYERS + st->client_num), "n",
                          name, cap))
        name[0] = 0;
    return st->client_num;
}

static int q3s_stream_create(void **stream)
{
    struct q3stream *d = calloc(1, sizeof(*d));

    *stream = NULL;
    if (!d || !(d->st = sg_q3_state_create(68))) {
        free(d);
        return -ENOMEM;
    }
    sg_q3_svmsg_init(&d->sv);
    *stream = d;
    return 0;
}

static void q3s_stream_destroy(void *stream)
{
    struct q3stream *d = stream;

    if (!d)
        return;
    sg_q3_svmsg_finish(&d->sv);
    sg_q3_state_destroy(d->st);
    free(d);
}

/* A message of the session's stream, as its client took it (parse.c). */
static int q3s_stream_feed(void *stream, int32_t sequence, const uint8_t *msg, size_t len,
                           const struct sg_frame **f)
{
    struct q3stream *d = stream;

    d->parse_err = sg_q3_parse_server_message(d->st, sequence, msg, len, &d->sv);
    memset(&d->frame, 0, sizeof(d->frame));
    d->frame.dir = SG_DIR_S2C;
    d->frame.kind = SG_FRAME_MESSAGE;
    d->frame.sequence = sequence;
    d->frame.ack = d->frame.reliable_ack = -1;
    d->frame.msg = msg;
    d->frame.msg_len = len;
    *f = &d->frame;
    return d->parse_err < 0 ? d->parse_err : 0;
}

const struct sg_codec_spectate sg_q3_spectate = {
    .hello = q3s_hello,
    .create = q3s_create,
    .destroy = q3s_destroy,
    .watch = q3s_watch,
    .input = q3s_input,
    .feed = q3s_feed,
    .name = q3s_name,
    .player = q3s_player,
    .stream_create = q3s_stream_create,
    .stream_destroy = q3s_stream_destroy,
    .stream_feed = q3s_stream_feed,
    .notice = q3s_notice,
};
