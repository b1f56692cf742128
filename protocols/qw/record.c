/*
 * QuakeWorld demo recording: network-side .qwd files, as ezQuake writes
 * and plays them (the QWD seed §3; ezQuake cl_demo.c).  A .qwd is a list
 * of blocks, each
 *
 *     float time;  byte type;  ...
 *
 *   type 0 dem_cmd:  the client's usercmd_t as the client keeps it in
 *                    memory (24 bytes: msec, 3 pad bytes, 3 float angles,
 *                    3 shorts forward/side/up, buttons, impulse), then
 *                    3 float view angles (41 bytes in all);
 *   type 1 dem_read: long length, then a server datagram as the client
 *                    received it, netchan header included: playback runs
 *                    each through the client's Netchan_Process (a sequence
 *                    not above the last one is dropped);
 *   type 2 dem_set:  long outgoing, long incoming: the playing client's
 *                    netchan sequences from here on.
 *
 * Playback pairs each dem_cmd with the client's outgoing sequence and
 * checks every delta packetentities' base against the frame that command
 * opened, so the client's commands go into the file in the order slipgate
 * saw them, numbered by their real sequences (a dem_set re-syncs the
 * playing client's count after a lost or dropped client datagram).  The
 * demo ends with the client's end marker: an out-of-band dem_read holding
 * svc_disconnect "EndOfDemo", at which ezQuake prints "End of demo".
 *
 * The time of a block is the client's own game clock: the milliseconds of
 * its commands (each move carries its last three, so a lost datagram's
 * time is recovered from the next), counted from the file's first block.
 * The same stream always gives the same file, live or from a capture.
 *
 * A recording that starts mid-level begins with a connection preamble
 * built from what the decoder tracked (state.c: sg_qw_track_preamble).
 */
#include "protocols/qw/qw.h"

#include "protocols/byteorder.h"
#include "protocols/error.h"

#include <errno.h>
#include <string.h>

#define DEM_CMD  0
#define DEM_READ 1
#define DEM_SET  2

/* ---- the client's clock and commands ---- */

/* Apply one delta usercmd's fields (from `*at`) onto `cmd` (MSG_ReadDeltaUsercmd). */
static void apply_cmd(const struct sg_field *f, uint32_t n, uint32_t *at,
                      struct sg_qw_usercmd *cmd)
{
    uint32_t i = *at;

    /* "cmdbits" opens the command, "msec" (always there) closes it.  The
     * names are parse.c's usercmd field names: two letters tell them apart. */
    for (i++; i < n; i++) {
        const char *name = f[i].name;

        switch (name[0]) {
        case 'm': /* msec */
            cmd->msec = (uint8_t)f[i].raw;
            *at = i + 1;
            return;
        case 'a': /* angle0..2 */
            if (name[5] >= '0' && name[5] <= '2')
                cmd->angles[name[5] - '0'] = sg_bmsg_num_value(f[i].num, f[i].raw);
            break;
        case 'f':
            cmd->move[0] = (int16_t)f[i].raw;
            break;
        case 's':
            cmd->move[1] = (int16_t)f[i].raw;
            break;
        case 'u':
            cmd->move[2] = (int16_t)f[i].raw;
            break;
        case 'b':
            cmd->buttons = (uint8_t)f[i].raw;
            break;
        case 'i':
            cmd->impulse = (uint8_t)f[i].raw;
            break;
        default:
            break;
        }
    }
    *at = i;
}

/* The three commands of the datagram's last clc_move (oldest first); false when it has none. */
static bool move_cmds(const struct sg_qw_parsed *p, struct sg_qw_usercmd cmds[3])
{
    const struct sg_fmsg *move = NULL;
    struct sg_qw_usercmd cur;
    uint32_t at, k = 0;

    for (uint32_t i = 0; i < p->nmsgs; i++)
        if (p->msgs[i].op == 3 && !p->msgs[i].unparsed)
            move = &p->msgs[i];
    if (!move || move->count < 2 + 3 * 2)
        return false;
    memset(&cur, 0, sizeof(cur));
    at = 2; /* checksum, lossage */
    while (k < 3 && at < move->count) {
        if (p->fields[move->first + at].name[0] != 'c') /* "cmdbits" */
            return false;
        apply_cmd(p->fields + move->first, move->count, &at, &cur);
        cmds[k++] = cur; /* each is a delta from the one before */
    }
    return k == 3;
}

void sg_qw_rec_client(struct sg_qw_recorder *r, const struct sg_qw_parsed *p, uint32_t seq)
{
    struct sg_qw_usercmd cmds[3];
    uint32_t gap;

    if (!move_cmds(p, cmds))
        return;
    /* The clock: this command's msec, and those of up to two lost datagrams before it. */
    gap = r->have_seq ? seq - r->last_seq : 1;
    if (gap >= 1 && gap <= 3) {
        for (uint32_t k = 3 - gap; k < 3; k++)
            r->clock_ms += cmds[k].msec;
    } else {
        r->clock_ms += cmds[2].msec;
    }
    r->have_seq = true;
    r->last_seq = seq;

    /* Recording: the command waits for the next server message (bounded: the oldest goes). */
    if (!r->out)
        return;
    if (r->npend == SG_QW_REC_PENDING) {
        memmove(r->pend, r->pend + 1, sizeof(r->pend[0]) * (SG_QW_REC_PENDING - 1));
        r->npend--;
    }
    r->pend[r->npend].seq = seq;
    r->pend[r->npend].ms = r->clock_ms;
    r->pend[r->npend].cmd = cmds[2];
    r->npend++;
}

/* ---- blocks ---- */

static void put_float(uint8_t *p, float v)
{
    uint32_t u;

    memcpy(&u, &v, sizeof(u));
    sg_put_le32(p, u);
}

static float block_time(const struct sg_qw_recorder *r, uint64_t ms)
{
    return (float)((double)(ms - r->start_ms) / 1000.0);
}

static int put(struct sg_qw_recorder *r, const void *data, size_t len)
{
    if (fwrite(data, 1, len, r->out) != len)
        return sg_write_error(); /* -ENOSPC on a full disk */
    r->bytes += len;
    return 0;
}

static int write_set(struct sg_qw_recorder *r, uint64_t ms, uint32_t out_seq, uint32_t in_seq)
{
    uint8_t b[13];

    put_float(b, block_time(r, ms));
    b[4] = DEM_SET;
    sg_put_le32(b + 5, out_seq);
    sg_put_le32(b + 9, in_seq);
    r->out_seq = out_seq;
    r->in_seq = in_seq;
    r->seq_known = true;
    return put(r, b, sizeof(b));
}

static int write_cmd(struct sg_qw_recorder *r, const struct sg_qw_rec_cmd *c)
{
    uint8_t b[41];
    int err;

    /* The playing client numbers commands itself: re-sync it after a gap. */
    if (!r->seq_known || c->seq != r->out_seq) {
        err = write_set(r, c->ms, c->seq, r->in_seq);
        if (err < 0)
            return err;
    }
    memset(b, 0, sizeof(b));
    put_float(b, block_time(r, c->ms));
    b[4] = DEM_CMD;
    b[5] = c->cmd.msec; /* usercmd_t: msec, 3 pad bytes, angles at 4 */
    for (int i = 0; i < 3; i++)
        put_float(b + 9 + 4 * i, c->cmd.angles[i]);
    for (int i = 0; i < 3; i++)
        sg_put_le16(b + 21 + 2 * i, (uint16_t)c->cmd.move[i]);
    b[27] = c->cmd.buttons;
    b[28] = c->cmd.impulse;
    for (int i = 0; i < 3; i++) /* the view angles */
        put_float(b + 29 + 4 * i, c->cmd.angles[i]);
    r->out_seq = c->seq + 1;
    /* The frame this command opens in the playing client, and the base it will expect. */
    r->cmds[c->seq % 64].seq = c->seq;
    r->cmds[c->seq % 64].valid = true;
    r->cmds[c->seq % 64].has_delta = r->pe_have;
    r->cmds[c->seq % 64].delta = r->pe_last;
    return put(r, b, sizeof(b));
}

int sg_qw_rec_read(struct sg_qw_recorder *r, const uint8_t *data, size_t len)
{
    uint8_t b[9];
    int err;

    put_float(b, block_time(r, r->clock_ms));
    b[4] = DEM_READ;
    sg_put_le32(b + 5, (uint32_t)len);
    if ((err = put(r, b, sizeof(b))) < 0 || (err = put(r, data, len)) < 0)
        return err;
    r->blocks++;
    return 0;
}

/* The commands the client sent since the last server message. */
static int write_pending(struct sg_qw_recorder *r)
{
    int err = 0;

    for (unsigned i = 0; i < r->npend && !err; i++)
        err = write_cmd(r, &r->pend[i]);
    r->npend = 0;
    return err;
}

/* ---- the recorder ---- */

void sg_qw_rec_start(struct sg_qw_recorder *r, FILE *out)
{
    r->out = out;
    r->started = false;
    r->seq_known = false;
    r->npend = 0;
    r->bytes = 0;
    r->blocks = 0;
    r->pe_have = false;
    memset(r->cmds, 0, sizeof(r->cmds));
    memset(r->infile_valid, 0, sizeof(r->infile_valid));
}

/* Does the file hold entity frame `seq`? */
static bool holds(const struct sg_qw_recorder *r, uint32_t seq)
{
    return r->infile_valid[seq % 64] && r->infile[seq % 64] == seq;
}

/*
 * Would the playing client decode this datagram's entities?  A whole frame
 * always; a delta when its base is the one the client's command for this
 * frame expects (CL_ParsePacketEntities' `from` check) and the file holds it.
 */
static bool decodable(const struct sg_qw_recorder *r, uint32_t seq, const struct sg_qw_parsed *p,
                      const bool *dropped, int *pe)
{
    *pe = -1;
    for (uint32_t i = 0; p && i < p->nmsgs; i++)
        if ((p->msgs[i].op == 47 || p->msgs[i].op == 48) && !p->msgs[i].unparsed &&
            !(dropped && dropped[i]))
            *pe = (int)i;
    if (*pe < 0 || p->msgs[*pe].op == 47)
        return true;
    const struct sg_fmsg *m = &p->msgs[*pe];
    uint32_t from = m->count ? p->fields[m->first].raw : 0;
    const struct sg_qw_rec_frame *c = &r->cmds[seq % 64];
    return c->valid && c->seq == seq && c->has_delta && ((c->delta ^ from) & 63) == 0 &&
           holds(r, c->delta);
}

/* The datagram again, its delta entities replaced by the whole frame; `*wrote`: the
 * error (if any) is the file's, not the frame's. */
static int rewrite(struct sg_qw_recorder *r, const struct sg_qw_track *t, uint32_t seq,
                   const uint8_t *data, const struct sg_qw_parsed *p, const bool *dropped, int pe,
                   bool *wrote)
{
    uint8_t buf[SG_QW_MAX_DGRAM + 8];
    struct sg_bmsg_writer w;

    sg_bmsg_writer_init(&w, buf, sizeof(buf));
    sg_bmsg_write_data(&w, data, 8); /* the server's header */
    for (uint32_t i = 0; i < p->nmsgs; i++) {
        if (dropped && dropped[i])
            continue;
        if ((int)i == pe) {
            int err = sg_qw_track_write_frame(t, seq, &w);
            if (err < 0)
                return err;
        } else {
            sg_qw_write_msg(p, i, &w);
        }
    }
    if (w.overflowed)
        return SG_E_OVERFLOW;
    r->rewritten++;
    *wrote = true;
    return sg_qw_rec_read(r, buf, w.len);
}

int sg_qw_rec_server(struct sg_qw_recorder *r, const struct sg_qw_track *t, bool new_level,
                     uint32_t seq, const uint8_t *data, size_t len, const struct sg_qw_parsed *p,
                     const bool *dropped)
{
    bool whole;
    int err, pe;

    if (!r->out)
        return SG_E_STATE;
    if (!r->started) {
        r->start_ms = r->clock_ms; /* the file's time 0 */
        /* A level's start as it came, or a preamble from the tracked state. */
        if (!new_level) {
            if (!t || !sg_qw_track_ready(t) || !sg_qw_track_has_frame(t, seq))
                return 0; /* nothing to start from yet */
            err = sg_qw_track_preamble(t, r, seq);
            if (err < 0)
                return err;
        }
        err = write_set(r, r->clock_ms, r->have_seq ? r->last_seq + 1 : 1, seq - 1);
        if (err < 0)
            return err;
        r->started = true;
        r->npend = 0; /* commands before the start belong to no frame of the file */
    }
    err = write_pending(r);
    /* A sequence the playing client would drop (a reconnect on the same file): re-sync. */
    if (!err && seq <= r->in_seq)
        err = write_set(r, r->clock_ms, r->out_seq, seq - 1);
    if (err < 0)
        return err;

    /* The entities as they came when the playing client can decode them, else whole. */
    whole = decodable(r, seq, p, dropped, &pe);
    if (!whole && len >= 8 && t && sg_qw_track_has_frame(t, seq)) {
        bool wrote = false;

        err = rewrite(r, t, seq, data, p, dropped, pe, &wrote);
        whole = err == 0;
        if (err < 0 && !wrote) /* the frame did not fit: as it came, then */
            err = sg_qw_rec_read(r, data, len);
    } else {
        err = sg_qw_rec_read(r, data, len);
    }
    if (err < 0)
        return err;
    if (pe >= 0 && whole) {
        r->pe_have = true;
        r->pe_last = seq;
        r->infile[seq % 64] = seq;
        r->infile_valid[seq % 64] = true;
    }
    r->in_seq = seq;
    return 1;
}

int sg_qw_rec_end(struct sg_qw_recorder *r)
{
    static const uint8_t end[] = "\xff\xff\xff\xff\x02"
                                 "EndOfDemo";
    int err = 0;

    if (!r->out)
        return 0;
    /* The client's own end: an out-of-band svc_disconnect (NUL included). */
    if (r->started)
        err = sg_qw_rec_read(r, end, sizeof(end));
    if (fflush(r->out) != 0 && !err)
        err = sg_write_error();
    r->out = NULL;
    r->started = false;
    r->npend = 0;
    return err;
}
