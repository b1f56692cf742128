/*
 * QuakeWorld demo files for the offline tools (`slipgate demo info|dump|
 * reencode`), behind the codec table's demo reader (codec.h, struct
 * sg_demo_impl).  Two formats, one reader:
 *
 *   .qwd  a client's recording: blocks of `float time, byte type, ...`:
 *         dem_cmd (0): the client's usercmd_t as it lay in memory (24
 *           bytes) and its 3 float view angles;
 *         dem_read (1): `long len`, then the datagram the client received
 *           (its 8-byte netchan header first; a header of -1 is a
 *           connectionless packet, ezQuake's end-of-demo marker among them);
 *         dem_set (2): `long outgoing, long incoming` sequences.
 *   .mvd  a server's multi-view recording: blocks of `byte ms since the
 *         last block, byte type | to << 3, ...`, the type one of dem_cmd,
 *         read, set, multiple (then `long playermask`), single and stats
 *         (`to` = the player), all; every message block is `long len`
 *         then messages without a netchan header.  Its own svc forms:
 *         serverdata with a float demo time for the player number,
 *         svc_playerinfo with the DF_* delta flags, svc_setangle naming
 *         the player, svc_nails2; with MVD1 HIDDEN_MESSAGES a dem_multiple
 *         to nobody (mask 0) holds hidden blocks (`long len, short type,
 *         data`), which players skip.
 *
 * (The QWD seed §3, PROTOCOLS.md C7; ezQuake cl_demo.c CL_GetDemoMessage is
 * the reader these rules follow; demo.c walks the blocks.)  Every message
 * is decoded by the live codec's parser (parse.c, with the MVD forms) and
 * written back from its fields; block headers are kept as they came, with
 * the length of what was written.  A file that ends inside a block, or a block no player reads
 * (an unknown type, a length out of range), stops the walk with its offset.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/byteorder.h"
#include "protocols/codec.h"
#include "protocols/error.h"
#include "protocols/info.h"
#include "protocols/qw/demo.h"
#include "protocols/qw/qw.h"
#include "protocols/text.h"

/* ---- decoding a block ---- */

enum payload { PL_NONE, PL_MESSAGES, PL_OOB, PL_HIDDEN, PL_RUNT };

struct dec {
    bool mvd;
    struct sg_qw_ext ext;
    struct sg_qw_variant var;
    struct sg_qw_parsed p;
    enum payload kind;
    size_t msg_at; /* payload bytes before the messages (the qwd netchan header) */
    int err;       /* the last block's parse error, or 0 */
    uint64_t unsupported;
};

static int dec_init(struct dec *d, bool mvd)
{
    memset(d, 0, sizeof(*d));
    d->mvd = mvd;
    /* every message and every field takes at least a byte of the block */
    d->p.fields = calloc(MAX_BLOCK, sizeof(*d->p.fields));
    d->p.msgs = calloc(MAX_BLOCK, sizeof(*d->p.msgs));
    if (!d->p.fields || !d->p.msgs)
        return -ENOMEM;
    sg_qw_variant_of(&d->ext, &d->var);
    d->var.mvd = mvd;
    return 0;
}

static void dec_free(struct dec *d)
{
    free(d->p.fields);
    free(d->p.msgs);
}

/* Are the hidden blocks of `b` whole?  Their count, or -1. */
static int hidden_count(const struct block *b)
{
    size_t at = 0;
    int n = 0;

    while (at < b->len) {
        if (b->len - at < HIDDEN_HEAD)
            return -1;
        uint32_t l = sg_le32(b->data + at);
        if (l > b->len - at - HIDDEN_HEAD)
            return -1;
        at += HIDDEN_HEAD + l;
        n++;
    }
    return n;
}

/* Decode the messages of a block (kind and parse result in `d`). */
static void decode_block(struct dec *d, const struct block *b)
{
    d->kind = PL_NONE;
    d->err = 0;
    d->msg_at = 0;
    d->p.nmsgs = d->p.nfields = 0;
    if (!b->has_len)
        return;
    if (!d->mvd) {
        if (b->len < 4) {
            d->kind = PL_RUNT;
            d->err = SG_E_TRUNCATED;
            return;
        }
        if (sg_le32(b->data) == 0xffffffffu) {
            d->kind = PL_OOB;
            return;
        }
        if (b->len < 8) {
            d->kind = PL_RUNT;
            d->err = SG_E_TRUNCATED;
            return;
        }
        d->msg_at = 8;
    } else if (b->type == DEM_MULTIPLE && b->mask == 0 &&
               (d->ext.mvd1 & 0x20u) /* MVD1 HIDDEN_MESSAGES */) {
        d->kind = PL_HIDDEN;
        if (hidden_count(b) < 0)
            d->err = SG_E_MALFORMED;
        return;
    }
    d->kind = PL_MESSAGES;
    d->err = sg_qw_parse_n(SG_DIR_S2C, &d->var, b->data + d->msg_at, b->len - d->msg_at, &d->p,
                           MAX_BLOCK, MAX_BLOCK);
    if (d->p.unsupported_op >= 0)
        d->unsupported++;
    if (d->p.serverdata) {
        d->ext = d->p.ext;
        sg_qw_variant_of(&d->ext, &d->var);
        d->var.mvd = d->mvd;
    }
}

/* ---- the file ---- */

/* An opened file: its bytes, format, reader and decoder. */
struct file {
    uint8_t *buf;
    size_t len;
    struct sg_qw__demo_rd r;
    struct dec d;
};

static int file_open(struct file *f, FILE *in, const char *name)
{
    int err;

    memset(f, 0, sizeof(*f));
    err = sg_qw__demo_slurp(in, &f->buf, &f->len);
    if (err < 0)
        return err;
    f->r.buf = f->buf;
    f->r.len = f->len;
    f->r.mvd = sg_qw__demo_is_mvd(name, f->buf, f->len);
    err = dec_init(&f->d, f->r.mvd);
    if (err < 0) {
        dec_free(&f->d);
        free(f->buf);
    }
    return err;
}

static void file_close(struct file *f)
{
    dec_free(&f->d);
    free(f->buf);
}

/* ---- text ---- */

static void put_float(FILE *out, float v, uint32_t raw, bool json)
{
    if (!isfinite(v))
        fprintf(out, json ? "\"0x%08x\"" : "0x%08x", (unsigned)raw);
    else
        fprintf(out, "%.9g", v);
}

static const struct sg_field_style field_style = {.lead = " ", .data_text = false};

static float le_float(const uint8_t *p)
{
    uint32_t v = sg_le32(p);
    float f;

    memcpy(&f, &v, sizeof(f));
    return f;
}

/* The block's own line (its header; cmd and set blocks in full). */
static void put_block(FILE *out, const struct block *b, const struct dec *d, bool json)
{
    if (json && !isfinite(b->time)) /* a .qwd's float time may be anything: JSON has no NaN */
        fprintf(out, "{\"block\":%zu,\"offset\":%zu,\"time\":null,\"type\":\"%s\"", b->index,
                b->offset, sg_qw__dem_names[b->type]);
    else if (json)
        fprintf(out, "{\"block\":%zu,\"offset\":%zu,\"time\":%.3f,\"type\":\"%s\"", b->index,
                b->offset, b->time, sg_qw__dem_names[b->type]);
    else
        fprintf(out, "#%zu @%zu t=%.3f %s", b->index, b->offset, b->time,
                sg_qw__dem_names[b->type]);
    if (b->type == DEM_SINGLE || b->type == DEM_STATS)
        fprintf(out, json ? ",\"to\":%u" : " to=%u", b->to);
    if (b->type == DEM_MULTIPLE)
        fprintf(out, json ? ",\"mask\":%u" : " mask=0x%08x", (unsigned)b->mask);
    if (b->has_len)
        fprintf(out, json ? ",\"len\":%zu" : " len=%zu", b->len);
    if (b->type == DEM_CMD) {
        const uint8_t *c = b->data;
        static const char *const names[] = {"msec",    "pitch",      "yaw",      "roll",
                                            "forward", "side",       "up",       "buttons",
                                            "impulse", "view_pitch", "view_yaw", "view_roll"};
        for (int i = 0; i < 12; i++) {
            fprintf(out, json ? ",\"%s\":" : " %s=", names[i]);
            if (i == 0)
                fprintf(out, "%u", c[0]);
            else if (i <= 3)
                put_float(out, le_float(c + 4 * i), sg_le32(c + 4 * i), json);
            else if (i <= 6)
                fprintf(out, "%d", (int16_t)sg_le16(c + 16 + 2 * (i - 4)));
            else if (i <= 8)
                fprintf(out, "%u", c[22 + i - 7]);
            else
                put_float(out, le_float(c + 24 + 4 * (i - 9)), sg_le32(c + 24 + 4 * (i - 9)), json);
        }
    } else if (b->type == DEM_SET) {
        fprintf(out, json ? ",\"outgoing\":%d,\"incoming\":%d" : " outgoing=%d incoming=%d",
                (int32_t)sg_le32(b->data), (int32_t)sg_le32(b->data + 4));
    }
    if (d->kind == PL_MESSAGES && d->msg_at == 8) {
        uint32_t s = sg_le32(b->data), a = sg_le32(b->data + 4);
        fprintf(out,
                json ? ",\"seq\":%u,\"reliable\":%s,\"ack\":%u,\"ack_reliable\":%s"
                     : " seq=%u%s ack=%u%s",
                s & 0x7fffffffu, json ? (s >> 31 ? "true" : "false") : (s >> 31 ? "r" : ""),
                a & 0x7fffffffu, json ? (a >> 31 ? "true" : "false") : (a >> 31 ? "r" : ""));
    }
    if (d->kind == PL_OOB) {
        fputs(json ? ",\"oob\":\"" : " oob \"", out);
        sg_put_escaped(out, b->data + 4, b->len - 4, json);
        fputc('"', out);
    }
    if (d->kind == PL_RUNT)
        fputs(json ? ",\"runt\":true" : " (runt)", out);
    if (d->err)
        fprintf(out, json ? ",\"error\":\"%s\"" : " (error: %s)", sg_errname(d->err));
}

/* The block's messages: text lines, or JSON members (before its closing brace). */
static void put_messages(FILE *out, const struct block *b, const struct dec *d, bool json)
{
    if (d->kind == PL_HIDDEN) {
        size_t at = 0;
        bool first = true;

        if (json)
            fputs(",\"hidden\":[", out);
        while (at + HIDDEN_HEAD <= b->len) {
            uint32_t l = sg_le32(b->data + at);
            unsigned type = sg_le16(b->data + at + 4);
            if (l > b->len - at - HIDDEN_HEAD)
                break;
            if (json)
                fprintf(out, "%s{\"type\":%u,\"len\":%u}", first ? "" : ",", type, (unsigned)l);
            else
                fprintf(out, "  hidden type=0x%04x len=%u\n", type, (unsigned)l);
            first = false;
            at += HIDDEN_HEAD + l;
        }
        if (json)
            fputc(']', out);
        return;
    }
    if (d->kind != PL_MESSAGES)
        return;
    if (json)
        fputs(",\"messages\":[", out);
    for (uint32_t i = 0; i < d->p.nmsgs; i++) {
        const struct sg_fmsg *m = &d->p.msgs[i];
        if (json)
            fprintf(out, "%s{\"op\":\"%s\",\"fields\":[", i ? "," : "", sg_qw_svc_name(m->op));
        else
            fprintf(out, "  %s%s", sg_qw_svc_name(m->op), m->unparsed ? " (undecoded)" : "");
        for (uint32_t k = 0; k < m->count; k++) {
            if (json && k)
                fputc(',', out);
            sg_field_put(out, &d->p.fields[m->first + k], json, &field_style);
        }
        fputs(json ? "]}" : "\n", out);
    }
    if (json)
        fputc(']', out);
}

/* ---- dump ---- */

static int qw_demo_dump(FILE *in, const char *name, bool json, FILE *out)
{
    struct file f;
    struct block b;
    uint64_t errors = 0, messages = 0;
    int err = file_open(&f, in, name), rc;

    if (err < 0)
        return err;
    while ((rc = sg_qw__demo_next(&f.r, &b)) > 0) {
        decode_block(&f.d, &b);
        errors += f.d.err != 0;
        messages += f.d.kind == PL_MESSAGES ? f.d.p.nmsgs : 0;
        put_block(out, &b, &f.d, json);
        if (!json)
            fputc('\n', out);
        put_messages(out, &b, &f.d, json);
        if (json)
            fputs("}\n", out);
    }
    if (rc < 0) {
        errors++;
        if (json) {
            fprintf(out, "{\"error\":\"");
            sg_put_escaped(out, (const uint8_t *)f.r.why, strlen(f.r.why), true);
            fprintf(out, "\",\"offset\":%zu}\n", f.r.bad_at);
        } else {
            fprintf(out, "# error at offset %zu: %s\n", f.r.bad_at, f.r.why);
        }
        fprintf(stderr, "slipgate demo: %s: at offset %zu: %s\n", name, f.r.bad_at, f.r.why);
    }
    if (!json)
        fprintf(out, "# %zu blocks, %" PRIu64 " messages, %" PRIu64 " errors\n", f.r.count,
                messages, errors);
    file_close(&f);
    if (ferror(out))
        return -EIO;
    return errors > INT32_MAX ? INT32_MAX : (int)errors;
}

/* ---- info ---- */

#define MAX_PLAYERS 32

struct player {
    char name[64];
    bool present, spectator;
};

struct facts {
    uint64_t blocks[DEM_TYPES], messages, serverdata, errors, hidden, oob, undecoded;
    double first, last;
    bool have_time;
    struct sg_qw_ext ext;
    char gamedir[64], levelname[128], map[64], version[128], hostname[128];
    struct player pl[MAX_PLAYERS];
};

static void copy_str(char *dst, size_t cap, const uint8_t *s, size_t n)
{
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, s, n);
    dst[n] = 0;
}

/* `key` of info string (s, n) into dst, when there. */
static void info_key(const uint8_t *s, size_t n, const char *key, char *dst, size_t cap)
{
    const char *v;
    size_t vl;

    if (sg_info_get((const char *)s, n, key, strlen(key), &v, &vl))
        copy_str(dst, cap, (const uint8_t *)v, vl);
}

static const struct sg_field *field(const struct dec *d, const struct sg_fmsg *m, uint32_t k)
{
    return k < m->count ? &d->p.fields[m->first + k] : NULL;
}

static void learn(struct facts *fa, const struct dec *d)
{
    for (uint32_t i = 0; i < d->p.nmsgs; i++) {
        const struct sg_fmsg *m = &d->p.msgs[i];
        const struct sg_field *a, *b, *c;

        if (m->unparsed)
            fa->undecoded++;
        switch (m->op) {
        case 11: /* serverdata: protocol(s), servercount, gamedir, player/time, levelname */
            fa->serverdata++;
            for (uint32_t k = 0; k < m->count; k++) {
                const struct sg_field *x = field(d, m, k);
                if (strcmp(x->name, "gamedir") == 0)
                    copy_str(fa->gamedir, sizeof(fa->gamedir), x->ptr, x->len);
                else if (strcmp(x->name, "levelname") == 0)
                    copy_str(fa->levelname, sizeof(fa->levelname), x->ptr, x->len);
            }
            break;
        case 45: /* modellist: the first model of the first chunk is the map */
            a = field(d, m, 0);
            b = field(d, m, 1);
            if (a && b && a->raw == 0 && b->type == SG_FIELD_STRING && b->len > 9 &&
                memcmp(b->ptr, "maps/", 5) == 0 && memcmp(b->ptr + b->len - 4, ".bsp", 4) == 0)
                copy_str(fa->map, sizeof(fa->map), b->ptr + 5, b->len - 9);
            break;
        case 9: /* stufftext "fullserverinfo \"...\"" */
            a = field(d, m, 0);
            if (a && a->len > 16 && memcmp(a->ptr, "fullserverinfo \"", 16) == 0) {
                size_t n = a->len - 16;
                const uint8_t *q = memchr(a->ptr + 16, '"', n);
                if (q)
                    n = (size_t)(q - (a->ptr + 16));
                info_key(a->ptr + 16, n, "*version", fa->version, sizeof(fa->version));
                info_key(a->ptr + 16, n, "hostname", fa->hostname, sizeof(fa->hostname));
            }
            break;
        case 52: /* serverinfo key value */
            a = field(d, m, 0);
            b = field(d, m, 1);
            if (a && b && a->len == 8 && memcmp(a->ptr, "hostname", 8) == 0)
                copy_str(fa->hostname, sizeof(fa->hostname), b->ptr, b->len);
            break;
        case 40: /* updateuserinfo player, userid, userinfo */
            a = field(d, m, 0);
            c = field(d, m, 2);
            if (a && c && a->raw < MAX_PLAYERS) {
                struct player *p = &fa->pl[a->raw];
                char spec[8] = "";
                p->name[0] = 0;
                info_key(c->ptr, c->len, "name", p->name, sizeof(p->name));
                info_key(c->ptr, c->len, "*spectator", spec, sizeof(spec));
                p->spectator = spec[0] && strcmp(spec, "0") != 0;
                p->present = c->len > 0 && p->name[0];
            }
            break;
        case 51: /* setinfo player, key, value */
            a = field(d, m, 0);
            b = field(d, m, 1);
            c = field(d, m, 2);
            if (a && b && c && a->raw < MAX_PLAYERS && b->len == 4 &&
                memcmp(b->ptr, "name", 4) == 0) {
                copy_str(fa->pl[a->raw].name, sizeof(fa->pl[a->raw].name), c->ptr, c->len);
                fa->pl[a->raw].present = c->len > 0;
            }
            break;
        default:
            break;
        }
    }
}

/* A player name without QuakeWorld's high-bit colouring, printable. */
static void put_name(FILE *out, const char *s)
{
    for (; *s; s++) {
        unsigned ch = (unsigned char)*s & 0x7fu;
        fputc(ch >= 32 && ch < 127 ? (int)ch : '_', out);
    }
}

static int qw_demo_info(FILE *in, const char *name, FILE *out)
{
    struct file f;
    struct facts fa;
    struct block b;
    int err = file_open(&f, in, name), rc, n;

    if (err < 0)
        return err;
    memset(&fa, 0, sizeof(fa));
    while ((rc = sg_qw__demo_next(&f.r, &b)) > 0) {
        fa.blocks[b.type]++;
        if (!fa.have_time)
            fa.first = b.time;
        fa.last = b.time;
        fa.have_time = true;
        decode_block(&f.d, &b);
        fa.errors += f.d.err != 0;
        fa.oob += f.d.kind == PL_OOB;
        if (f.d.kind == PL_HIDDEN)
            fa.hidden += (uint64_t)(hidden_count(&b) > 0 ? hidden_count(&b) : 0);
        if (f.d.kind == PL_MESSAGES) {
            fa.messages += f.d.p.nmsgs;
            learn(&fa, &f.d);
        }
    }
    fa.ext = f.d.ext;

    fprintf(out, "file:         %s\n", name);
    fprintf(out, "format:       %s\n",
            f.r.mvd ? "mvd (server multi-view demo)" : "qwd (client demo)");
    fprintf(out, "game:         QuakeWorld, gamedir %s\n", fa.gamedir[0] ? fa.gamedir : "?");
    fprintf(out, "protocol:     %d", SG_QW_PROTOCOL);
    if (fa.ext.fte || fa.ext.fte2 || fa.ext.mvd1)
        fprintf(out, " (FTE 0x%x, FTE2 0x%x, MVD1 0x%x)", (unsigned)fa.ext.fte,
                (unsigned)fa.ext.fte2, (unsigned)fa.ext.mvd1);
    fputc('\n', out);
    fprintf(out, "map:          %s", fa.map[0] ? fa.map : "?");
    if (fa.levelname[0]) {
        fputs(" (\"", out);
        put_name(out, fa.levelname);
        fputs("\")", out);
    }
    fputc('\n', out);
    fprintf(out, "server:       %s%s", fa.version[0] ? fa.version : "?",
            fa.hostname[0] ? ", " : "");
    put_name(out, fa.hostname);
    fputc('\n', out);
    for (int spec = 0; spec < 2; spec++) {
        fputs(spec ? "spectators:   " : "players:      ", out);
        n = 0;
        for (int i = 0; i < MAX_PLAYERS; i++) {
            if (!fa.pl[i].present || fa.pl[i].spectator != (spec != 0))
                continue;
            fprintf(out, "%s%d:", n++ ? ", " : "", i);
            put_name(out, fa.pl[i].name);
        }
        fprintf(out, "%s\n", n ? "" : "(none)");
    }
    if (fa.have_time)
        fprintf(out, "duration:     %.3f s\n", fa.last - fa.first);
    else
        fprintf(out, "duration:     ? (no blocks)\n");
    fprintf(out, "blocks:       %zu", f.r.count);
    n = 0;
    for (int t = 0; t < DEM_TYPES; t++)
        if (fa.blocks[t])
            fprintf(out, "%s%s %" PRIu64, n++ ? ", " : " (", sg_qw__dem_names[t], fa.blocks[t]);
    fprintf(out, "%s\n", n ? ")" : "");
    fprintf(out, "messages:     %" PRIu64 " (%" PRIu64 " serverdata", fa.messages, fa.serverdata);
    if (fa.hidden)
        fprintf(out, ", %" PRIu64 " hidden blocks", fa.hidden);
    if (fa.oob)
        fprintf(out, ", %" PRIu64 " connectionless", fa.oob);
    if (fa.undecoded)
        fprintf(out, ", %" PRIu64 " undecoded", fa.undecoded);
    fprintf(out, ")\n");
    fprintf(out, "errors:       %" PRIu64, fa.errors + (rc < 0));
    if (fa.errors)
        fprintf(out, ", %" PRIu64 " blocks failed to decode", fa.errors);
    if (rc < 0)
        fprintf(out, ", at offset %zu: %s", f.r.bad_at, f.r.why);
    fputc('\n', out);
    file_close(&f);
    fa.errors += rc < 0;
    return fa.errors > INT32_MAX ? INT32_MAX : (int)fa.errors;
}

/* ---- reencode ---- */

static int qw_demo_reencode(FILE *in, const char *name, FILE *outf, FILE *out)
{
    struct file f;
    struct block b;
    uint64_t blocks = 0, messages = 0, identical = 0, failed = 0, rebuilt = 0;
    uint8_t *wbuf = malloc(MAX_BLOCK + 4096);
    int err = wbuf ? file_open(&f, in, name) : -ENOMEM, rc;

    if (err < 0) {
        free(wbuf);
        return err;
    }
    while ((rc = sg_qw__demo_next(&f.r, &b)) > 0) {
        const uint8_t *data = b.data;
        size_t len = b.len;
        uint8_t lenb[4];

        blocks++;
        decode_block(&f.d, &b);
        if (f.d.kind == PL_MESSAGES) {
            struct sg_bmsg_writer w;

            messages += f.d.p.nmsgs;
            if (f.d.err) {
                failed++;
            } else {
                sg_bmsg_writer_init(&w, wbuf, MAX_BLOCK + 4096);
                sg_bmsg_write_data(&w, b.data, f.d.msg_at);
                if (sg_qw_write(&f.d.p, NULL, &w) < 0) {
                    failed++;
                } else {
                    rebuilt++;
                    identical += w.len == b.len && memcmp(wbuf, b.data, b.len) == 0;
                    data = wbuf;
                    len = w.len;
                }
            }
        } else if (f.d.err) {
            failed++;
        }
        /* the header as it came, with the length of what follows */
        if (b.has_len) {
            sg_put_le32(lenb, (uint32_t)len);
            if (fwrite(b.head, 1, b.head_len - 4, outf) != b.head_len - 4 ||
                fwrite(lenb, 1, 4, outf) != 4)
                goto werr;
        } else if (fwrite(b.head, 1, b.head_len, outf) != b.head_len) {
            goto werr;
        }
        if (len && fwrite(data, 1, len, outf) != len)
            goto werr;
    }
    fprintf(out,
            "%" PRIu64 " blocks, %" PRIu64 " messages; %" PRIu64 " message blocks rebuilt, %" PRIu64
            " byte-identical, %" PRIu64 " failed to decode\n",
            blocks, messages, rebuilt, identical, failed);
    if (rc < 0) {
        fprintf(out, "input stops at offset %zu: %s (the blocks before it were written)\n",
                f.r.bad_at, f.r.why);
        fprintf(stderr, "slipgate demo: %s: at offset %zu: %s\n", name, f.r.bad_at, f.r.why);
    }
    file_close(&f);
    free(wbuf);
    return failed || identical != rebuilt || rc < 0 ? 1 : 0;
werr:
    err = errno ? -errno : -EIO;
    file_close(&f);
    free(wbuf);
    return err;
}

static const char *const qw_demo_exts[] = {"qwd", "mvd", NULL};

const struct sg_demo_impl sg_qw_demo_impl = {
    .extensions = qw_demo_exts,
    .probe = sg_qw__demo_probe,
    .info = qw_demo_info,
    .dump = qw_demo_dump,
    .reencode = qw_demo_reencode,
    .cut = NULL,
};
