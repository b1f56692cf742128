/*
 * The 'inspect' filter: the live view of a route's traffic, as readable
 * text or as JSON lines (the format is documented in doc/inspect.md).
 *
 *     filter inspect {
 *         level messages        # packets | messages | fields
 *         format text           # text | json
 *         output -              # - is standard output, else a file appended to
 *     }
 *
 * It is a tap: it sees every frame after the chain, as it was sent (or
 * marked dropped, with the index of the filter that dropped it, or
 * re-encoded).  Each frame gives one packet line; at `messages` one more
 * line per message of the frame (kinds and repeats as configured); at
 * `fields` everything the codec can show (its dump hook), or for a frame
 * no codec explains, a hex preview of the datagram's first bytes.  Every
 * text line starts with the same prefix, so interleaved sessions stay
 * readable:
 *
 *     07:49:32.123 main s3 127.0.0.1:51234         s>c message  seq=1234 ...
 *
 * A frame is formatted into a memory stream, then appended to a buffer of
 * whole lines that is written with write() when full and at every flush
 * (the proxy flushes about once a second, and before exit), so lines of
 * several routes appending to one file never interleave mid-line.  The
 * output is opened non-blocking: a reader that stalls, a full disk or any
 * other write error makes inspection stop (logged once) rather than stall
 * the relay.
 */
#include "filters/chain.h"
#include "filters/filter.h"
#include "filters/inspect.h"
#include "filters/text.h"

#include "protocols/error.h"
#include "protocols/json.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define INSPECT_BUF       65536
#define INSPECT_VERSION   1
#define INSPECT_HEX_BYTES 64
#define INSPECT_TEXT_LINE 8192 /* escaped text of one message line, at most */

enum inspect_level { LEVEL_PACKETS, LEVEL_MESSAGES, LEVEL_FIELDS };
enum inspect_format { FORMAT_TEXT, FORMAT_JSON };
enum inspect_colors { COLORS_KEEP, COLORS_STRIP };

static const char *const level_choices[] = {"packets", "messages", "fields", NULL};
static const char *const format_choices[] = {"text", "json", NULL};
static const char *const color_choices[] = {"keep", "strip", NULL};

struct inspect_conf {
    int level;
    int format;
    char *output; /* NULL or "-": standard output */
    int direction;
    struct sg_conf_list kinds;
    bool show_repeats;
    int colors;
    int64_t clip; /* text bytes shown per message line (text format); 0 = all */
    /* from conf_check */
    uint32_t mask;
    bool kinds_set;
};

struct inspect_route {
    const struct inspect_conf *conf;
    int fd;
    bool stopped;  /* a write failed: inspection is over */
    bool report;   /* the failure is still to be logged */
    int error;     /* errno of the failure */
    uint64_t lost; /* bytes not written */
    FILE *mem;     /* one frame's output */
    char *mem_buf;
    size_t mem_size;
    char *dump_buf; /* the codec's dump of one frame */
    size_t dump_size;
    size_t len; /* bytes waiting in buf */
    char buf[INSPECT_BUF];
};

/* ---- configuration ---- */

static void conf_init(void *p)
{
    struct inspect_conf *c = p;

    c->level = LEVEL_MESSAGES;
    c->format = FORMAT_TEXT;
    c->direction = SG_FILTER_DIR_BOTH;
    c->colors = COLORS_KEEP;
    c->clip = 200;
}

static int conf_check(void *p, char *err, size_t errlen)
{
    struct inspect_conf *c = p;

    c->mask = SG_KINDS_TEXT | SG_KIND_BIT(SG_MSG_GAME);
    c->kinds_set = c->kinds.count > 0;
    if (c->output && !c->output[0]) {
        snprintf(err, errlen, "'output' needs a file name, or - for standard output");
        return SG_E_CONFIG;
    }
    return sg_filter__kinds_parse(&c->kinds, "kinds", &c->mask, err, errlen);
}

/* ---- output ---- */

static bool to_stdout(const struct inspect_conf *c)
{
    return !c->output || strcmp(c->output, "-") == 0;
}

/* A descriptor of our own for standard output; a pipe is reopened non-blocking. */
static int open_stdout(void)
{
    struct stat st;
    int fd = -1;

    if (fstat(STDOUT_FILENO, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
        fd = open("/proc/self/fd/1", O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    return fd;
}

static int create(const void *conf, void **route_state, char *err, size_t errlen)
{
    const struct inspect_conf *c = conf;
    struct inspect_route *r = calloc(1, sizeof(*r));
    int e;

    if (!r) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    r->conf = c;
    r->fd = -1;
    if (to_stdout(c)) {
        r->fd = open_stdout();
        if (r->fd < 0) {
            e = errno;
            snprintf(err, errlen, "cannot write to standard output: %s", strerror(e));
            goto err_free;
        }
    } else {
        r->fd = open(c->output, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0644);
        if (r->fd < 0) {
            e = errno;
            snprintf(err, errlen, "cannot open the output '%s' for appending: %s", c->output,
                     strerror(e));
            goto err_free;
        }
    }
    r->mem = open_memstream(&r->mem_buf, &r->mem_size);
    if (!r->mem) {
        e = ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto err_close;
    }
    *route_state = r;
    return 0;

err_close:
    if (r->mem)
        fclose(r->mem);
    free(r->mem_buf);
    close(r->fd);
err_free:
    free(r);
    return -e;
}

/* Write `len` bytes; on failure inspection stops. */
static void write_all(struct inspect_route *r, const char *data, size_t len)
{
    size_t off = 0;

    for (int tries = 0; off < len && !r->stopped && tries < 1000; tries++) {
        ssize_t n = write(r->fd, data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            r->error = n < 0 ? errno : EIO;
            r->stopped = true;
            r->report = true;
            break;
        }
        off += (size_t)n;
    }
    if (off < len && !r->stopped) { /* no progress: give up as for an error */
        r->error = EIO;
        r->stopped = true;
        r->report = true;
    }
    r->lost += len - off;
}

static void flush(void *route_state)
{
    struct inspect_route *r = route_state;

    if (!r || r->len == 0)
        return;
    if (!r->stopped)
        write_all(r, r->buf, r->len);
    r->len = 0;
}

static void destroy(void *route_state)
{
    struct inspect_route *r = route_state;

    if (!r)
        return;
    flush(r);
    fclose(r->mem);
    free(r->dump_buf);
    free(r->mem_buf);
    close(r->fd);
    free(r);
}

/* Append one frame's bytes: whole lines only go out. */
static void emit(struct inspect_route *r, const char *data, size_t len)
{
    if (r->len + len > sizeof(r->buf))
        flush(r);
    if (r->stopped)
        return;
    if (len > sizeof(r->buf)) {
        write_all(r, data, len);
        return;
    }
    memcpy(r->buf + r->len, data, len);
    r->len += len;
}

/* Log a write failure once. */
static void report(struct sg_filter_call *call, struct inspect_route *r)
{
    const struct inspect_conf *c = r->conf;

    if (!r->report)
        return;
    r->report = false;
    sg_filter_log(call, SG_FILTER_LOG_ERROR,
                  "cannot write to %s%s%s: %s; inspection stops (said once)",
                  to_stdout(c) ? "standard output" : "the output '", to_stdout(c) ? "" : c->output,
                  to_stdout(c) ? "" : "'", strerror(r->error));
}

/* ---- formatting helpers ---- */

static const char *frame_kind_name(enum sg_frame_kind k)
{
    switch (k) {
    case SG_FRAME_RAW:
        return "raw";
    case SG_FRAME_OOB:
        return "oob";
    case SG_FRAME_PARTIAL:
        return "partial";
    case SG_FRAME_MESSAGE:
        return "message";
    case SG_FRAME_REJECTED:
        return "rejected";
    }
    return "unknown";
}

/* Text as a JSON string (protocols/json.h), without Quake 3 colour codes if `strip_colors`. */
static void json_str(FILE *f, const char *s, size_t len, bool strip_colors)
{
    size_t run = 0;

    fputc('"', f);
    for (size_t i = 0; strip_colors && s && i + 1 < len; i++)
        if (s[i] == '^' && isalnum((unsigned char)s[i + 1])) {
            sg_json_chars(f, s + run, i - run);
            run = ++i + 1;
        }
    if (s && len > run)
        sg_json_chars(f, s + run, len - run);
    fputc('"', f);
}

/* Text for a text line: escaped, colours per the settings, clipped with a marker. */
static void text_out(FILE *f, const struct inspect_conf *c, const char *s, size_t len)
{
    char out[INSPECT_TEXT_LINE];
    size_t clip = c->clip > 0 ? (size_t)c->clip : len;

    sg_filter__escape(out, sizeof(out), s, len, clip, c->colors == COLORS_STRIP);
    fputs(out, f);
    if (len > clip)
        fprintf(f, "[+%zu bytes]", len - clip);
}

/* Is message `m` shown at messages level? */
static bool msg_shown(const struct inspect_conf *c, const struct sg_msg *m)
{
    return sg_filter__kind_in(c->mask, m->kind) && (c->show_repeats || !m->repeat);
}

/* The filter that dropped the frame, by label. */
static const char *drop_label(const struct sg_filter_call *call)
{
    const struct sg_filter_proxy *p = call->proxy;

    if (!p || !p->chain || call->drop_filter < 0 || call->drop_filter >= p->chain->n)
        return NULL;
    return p->chain->f[call->drop_filter].fc->label;
}

/* Ask the codec for its view; 0 and the bytes in *buf, or a negative error. */
static int codec_dump(char **buf, size_t *size, const struct sg_filter_call *call,
                      enum sg_dump_level level, bool json, size_t *len)
{
    const struct sg_filter_session *s = call->session;
    FILE *m;
    off_t n;
    int err;

    if (!s || !s->codec || !s->codec->dump || !s->codec_state)
        return SG_E_UNSUPPORTED;
    /* a fresh stream each time: a rewound memstream's size is not reliable everywhere */
    free(*buf);
    *buf = NULL;
    *size = 0;
    m = open_memstream(buf, size);
    if (!m)
        return -ENOMEM;
    err = s->codec->dump(s->codec_state, call->frame, level, json, m);
    if (fclose(m) != 0)
        return -ENOMEM;
    n = (off_t)*size;
    if (err < 0)
        return err;
    if (n <= 0 || !*buf)
        return SG_E_STATE;
    *len = (size_t)n;
    return 0;
}

/* ---- text ---- */

/* "07:49:32.123 main s3 127.0.0.1:51234         c>s " */
static void text_prefix(char *out, size_t cap, const struct timespec *ts,
                        const struct sg_filter_call *call)
{
    const struct sg_filter_session *s = call->session;
    struct tm tm;
    char sid[24];

    localtime_r(&ts->tv_sec, &tm);
    snprintf(sid, sizeof(sid), "s%llu", s ? (unsigned long long)s->id : 0ULL);
    snprintf(out, cap, "%02d:%02d:%02d.%03ld %s %-5s %-21s %s ", tm.tm_hour, tm.tm_min, tm.tm_sec,
             ts->tv_nsec / 1000000, s && s->route ? s->route : "-", sid,
             s && s->client ? s->client : "-", call->frame->dir == SG_DIR_C2S ? "c>s" : "s>c");
}

/* The codec's lines, each under the prefix and indented. */
static void text_codec_lines(FILE *f, const char *pfx, const char *data, size_t len)
{
    size_t at = 0;

    while (at < len) {
        const char *nl = memchr(data + at, '\n', len - at);
        size_t n = nl ? (size_t)(nl - (data + at)) : len - at;

        fprintf(f, "%s  %.*s\n", pfx, (int)n, data + at);
        at += n + 1;
    }
}

static void text_hex(FILE *f, const char *pfx, const uint8_t *data, size_t len)
{
    size_t n = len < INSPECT_HEX_BYTES ? len : INSPECT_HEX_BYTES;

    for (size_t row = 0; row < n; row += 16) {
        fprintf(f, "%s  %04zx ", pfx, row);
        for (size_t i = row; i < row + 16; i++) {
            if (i < n)
                fprintf(f, " %02x", data[i]);
            else
                fputs("   ", f);
        }
        fputs("  |", f);
        for (size_t i = row; i < row + 16 && i < n; i++)
            fputc(data[i] >= 0x20 && data[i] < 0x7f ? data[i] : '.', f);
        fputs("|\n", f);
    }
    if (len > n)
        fprintf(f, "%s  ... %zu more bytes\n", pfx, len - n);
}

static void text_frame(struct inspect_route *r, const struct sg_filter_call *call,
                       const struct timespec *ts)
{
    const struct inspect_conf *c = r->conf;
    const struct sg_frame *fr = call->frame;
    FILE *f = r->mem;
    char pfx[256];
    size_t dlen = 0;
    bool dumped;
    const char *label;

    text_prefix(pfx, sizeof(pfx), ts, call);
    dumped =
        codec_dump(&r->dump_buf, &r->dump_size, call,
                   c->level == LEVEL_FIELDS ? SG_DUMP_FIELDS : SG_DUMP_PACKETS, false, &dlen) == 0;

    /* The packet line. */
    fprintf(f, "%s%-8s seq=%-7d len=%-5zu", pfx, frame_kind_name(fr->kind), (int)fr->sequence,
            call->len);
    if (fr->ack >= 0)
        fprintf(f, " ack=%d", (int)fr->ack);
    if (fr->reliable_ack >= 0)
        fprintf(f, " rack=%d", (int)fr->reliable_ack);
    if (fr->pieces > 1)
        fprintf(f, " pieces=%d", fr->pieces);
    if (fr->kind == SG_FRAME_MESSAGE || fr->nmsgs)
        fprintf(f, " msgs=%u", fr->nmsgs);
    if (fr->new_level)
        fprintf(f, " level=%s", fr->level);
    if (call->dropped) {
        label = drop_label(call);
        fprintf(f, " [DROPPED by filter #%d%s%s]", call->drop_filter, label ? " " : "",
                label ? label : "");
    }
    if (call->reencoded)
        fputs(" [re-encoded]", f);
    if (dumped && c->level != LEVEL_FIELDS) {
        const char *nl = memchr(r->dump_buf, '\n', dlen);
        fprintf(f, " | %.*s", (int)(nl ? (size_t)(nl - r->dump_buf) : dlen), r->dump_buf);
    }
    fputc('\n', f);
    if (c->level == LEVEL_PACKETS)
        return;
    if (dumped && c->level == LEVEL_FIELDS) {
        text_codec_lines(f, pfx, r->dump_buf, dlen);
        return;
    }

    /* One line per message. */
    for (unsigned i = 0; fr->msgs && i < fr->nmsgs; i++) {
        const struct sg_msg *m = &fr->msgs[i];

        if (!msg_shown(c, m))
            continue;
        fprintf(f, "%s  %-12s %-18s", pfx, sg_msg_kind_name(m->kind), m->name ? m->name : "-");
        if (m->text) { /* the number in a column of its own, then the text */
            if (m->number >= 0)
                fprintf(f, " #%-6d ", (int)m->number);
            else
                fputs("         ", f);
            text_out(f, c, m->text, m->text_len);
        } else if (m->number >= 0) {
            fprintf(f, " #%d", (int)m->number);
        }
        if (m->injected)
            fputs(" (injected)", f);
        if (m->repeat)
            fputs(" (repeat)", f);
        if (m->changed)
            fputs(" (changed)", f);
        if (m->dropped)
            fputs(" (removed)", f);
        fputc('\n', f);
        if (c->level == LEVEL_FIELDS && m->command && m->command != m->text) {
            fprintf(f, "%s    command ", pfx);
            text_out(f, c, m->command, strlen(m->command));
            fputc('\n', f);
        }
    }
    if (c->level == LEVEL_FIELDS)
        text_hex(f, pfx, call->data, call->len);
}

/* ---- JSON ---- */

static void json_msgs(FILE *f, const struct inspect_conf *c, const struct sg_frame *fr)
{
    bool first = true;
    bool strip = c->colors == COLORS_STRIP;

    fputs(",\"msgs\":[", f);
    for (unsigned i = 0; fr->msgs && i < fr->nmsgs; i++) {
        const struct sg_msg *m = &fr->msgs[i];

        if (!msg_shown(c, m))
            continue;
        fprintf(f, "%s{\"i\":%u,\"kind\":\"%s\",\"name\":", first ? "" : ",", i,
                sg_msg_kind_name(m->kind));
        json_str(f, m->name ? m->name : "", m->name ? strlen(m->name) : 0, false);
        fprintf(f, ",\"num\":%d,\"text\":", (int)m->number);
        if (m->text)
            json_str(f, m->text, m->text_len, strip);
        else
            fputs("null", f);
        if (c->level == LEVEL_FIELDS && m->command) {
            fputs(",\"command\":", f);
            json_str(f, m->command, strlen(m->command), strip);
        }
        fprintf(f, ",\"repeat\":%s,\"changed\":%s,\"removed\":%s,\"injected\":%s}",
                m->repeat ? "true" : "false", m->changed ? "true" : "false",
                m->dropped ? "true" : "false", m->injected ? "true" : "false");
        first = false;
    }
    fputc(']', f);
}

static void json_frame(FILE *f, const struct inspect_conf *c, char **dump_buf, size_t *dump_size,
                       const struct sg_filter_call *call, const struct timespec *ts)
{
    const struct sg_filter_session *s = call->session;
    const struct sg_frame *fr = call->frame;
    struct tm tm;
    size_t dlen = 0;
    const char *label = call->dropped ? drop_label(call) : NULL;
    bool dumped;

    localtime_r(&ts->tv_sec, &tm);
    fprintf(f, "{\"v\":%d,\"t\":%lld,\"time\":\"%02d:%02d:%02d.%03ld\",\"route\":", INSPECT_VERSION,
            (long long)ts->tv_sec * 1000 + ts->tv_nsec / 1000000, tm.tm_hour, tm.tm_min, tm.tm_sec,
            ts->tv_nsec / 1000000);
    json_str(f, s && s->route ? s->route : "", s && s->route ? strlen(s->route) : 0, false);
    fprintf(f, ",\"session\":%llu,\"client\":", s ? (unsigned long long)s->id : 0ULL);
    json_str(f, s && s->client ? s->client : "", s && s->client ? strlen(s->client) : 0, false);
    fprintf(f, ",\"codec\":");
    if (s && s->codec)
        json_str(f, s->codec->name, strlen(s->codec->name), false);
    else
        fputs("null", f);
    fprintf(f,
            ",\"dir\":\"%s\",\"frame\":\"%s\",\"len\":%zu,\"seq\":%d,\"ack\":%d,\"rack\":%d,"
            "\"pieces\":%d,\"nmsgs\":%u,\"new_level\":%s",
            fr->dir == SG_DIR_C2S ? "c2s" : "s2c", frame_kind_name(fr->kind), call->len,
            (int)fr->sequence, (int)fr->ack, (int)fr->reliable_ack, fr->pieces, fr->nmsgs,
            fr->new_level ? "true" : "false");
    if (fr->new_level) {
        fputs(",\"level\":", f);
        json_str(f, fr->level, strnlen(fr->level, sizeof(fr->level)), false);
    }
    fprintf(f, ",\"dropped\":%s,\"drop_filter\":%d", call->dropped ? "true" : "false",
            call->dropped ? call->drop_filter : -1);
    if (label) {
        fputs(",\"drop_label\":", f);
        json_str(f, label, strlen(label), false);
    }
    fprintf(f, ",\"reencoded\":%s", call->reencoded ? "true" : "false");
    if (c->level >= LEVEL_MESSAGES)
        json_msgs(f, c, fr);
    dumped =
        codec_dump(dump_buf, dump_size, call,
                   c->level == LEVEL_FIELDS ? SG_DUMP_FIELDS : SG_DUMP_PACKETS, true, &dlen) == 0;
    if (dumped && (*dump_buf)[0] == '{') {
        fputs(",\"game\":", f);
        fwrite(*dump_buf, 1, dlen, f);
    }
    if (c->level == LEVEL_FIELDS && !dumped) {
        size_t n = call->len < INSPECT_HEX_BYTES ? call->len : INSPECT_HEX_BYTES;
        fputs(",\"hex\":\"", f);
        for (size_t i = 0; i < n; i++)
            fprintf(f, "%02x", call->data[i]);
        fputc('"', f);
    }
    fputs("}\n", f);
}

/* ---- the tap ---- */

/* Does the frame concern this inspector? */
static bool wanted(const struct inspect_conf *c, const struct sg_frame *fr)
{
    if (!sg_filter__dir_matches(c->direction, fr->dir))
        return false;
    if (c->level == LEVEL_PACKETS || !c->kinds_set)
        return true;
    for (unsigned i = 0; fr->msgs && i < fr->nmsgs; i++)
        if (msg_shown(c, &fr->msgs[i]))
            return true;
    return false;
}

static int on_frame(struct sg_filter_call *call)
{
    struct inspect_route *r = call->route_state;
    struct timespec ts;
    off_t n;

    if (!r)
        return SG_FILTER_PASS;
    report(call, r);
    if (r->stopped || !call->frame || !wanted(r->conf, call->frame))
        return SG_FILTER_PASS;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (fseeko(r->mem, 0, SEEK_SET) != 0)
        return -EIO;
    if (r->conf->format == FORMAT_JSON)
        json_frame(r->mem, r->conf, &r->dump_buf, &r->dump_size, call, &ts);
    else
        text_frame(r, call, &ts);
    if (fflush(r->mem) != 0 || (n = ftello(r->mem)) < 0 || (size_t)n > r->mem_size)
        return -ENOMEM;
    emit(r, r->mem_buf, (size_t)n);
    report(call, r);
    return SG_FILTER_PASS;
}

int sg_inspect_json(FILE *f, const struct sg_filter_call *call, uint32_t kinds, char **dump_buf,
                    size_t *dump_size)
{
    struct inspect_conf c = {0};
    struct timespec ts;

    if (!call->frame)
        return 0;
    conf_init(&c);
    c.format = FORMAT_JSON;
    c.mask = kinds;
    c.kinds_set = kinds != (SG_KINDS_TEXT | SG_KIND_BIT(SG_MSG_GAME));
    if (!wanted(&c, call->frame))
        return 0;
    clock_gettime(CLOCK_REALTIME, &ts);
    json_frame(f, &c, dump_buf, dump_size, call, &ts);
    return ferror(f) ? -ENOMEM : 1;
}

static const struct sg_conf_directive directives[] = {
    {.name = "level",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct inspect_conf, level),
     .choices = level_choices,
     .argname = "packets|messages|fields",
     .help = "one line per datagram, plus one per message, plus every field (default messages)"},
    {.name = "format",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct inspect_conf, format),
     .choices = format_choices,
     .argname = "text|json",
     .help = "aligned text lines, or one JSON object per frame (doc/inspect.md; default text)"},
    {.name = "output",
     .type = SG_CONF_PATH,
     .offset = offsetof(struct inspect_conf, output),
     .argname = "PATH",
     .help = "a file to append to, or - for standard output (default -)"},
    {.name = "direction",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct inspect_conf, direction),
     .choices = sg_filter__direction_choices,
     .argname = "both|to_client|to_server",
     .help = "which way (default both)"},
    {.name = "kinds",
     .type = SG_CONF_LIST,
     .offset = offsetof(struct inspect_conf, kinds),
     .min = 1,
     .max = 16,
     .argname = "KIND[,KIND...]",
     .help = "message kinds shown; frames without one are left out (default all)"},
    {.name = "show_repeats",
     .type = SG_CONF_BOOL,
     .offset = offsetof(struct inspect_conf, show_repeats),
     .argname = "yes|no",
     .help = "show resends of reliable messages already shown (default no)"},
    {.name = "colors",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct inspect_conf, colors),
     .choices = color_choices,
     .argname = "keep|strip",
     .help = "Quake 3 colour codes (^1 ...) in texts kept or removed (default keep)"},
    {.name = "clip",
     .type = SG_CONF_INT,
     .offset = offsetof(struct inspect_conf, clip),
     .min = 0,
     .max = 1 << 20,
     .argname = "BYTES",
     .help = "text bytes shown per message line in text format, 0 = all (default 200)"},
    {NULL},
};

const struct sg_filter_impl sg_builtin_inspect = {
    .name = "inspect",
    .description = "show the traffic live: one line per datagram and message, as text or JSON",
    .example = "filter inspect {\n"
               "    level messages\n"
               "    format text\n"
               "    output -\n"
               "    kinds chat,print,centerprint\n"
               "}\n",
    .tap = true,
    .conf_size = sizeof(struct inspect_conf),
    .directives = directives,
    .conf_init = conf_init,
    .conf_check = conf_check,
    .create = create,
    .destroy = destroy,
    .on_frame = on_frame,
    .flush = flush,
};
