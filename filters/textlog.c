/*
 * The 'textlog' filter: a log file of the chat, prints, centerprints and
 * commands of every session of a route, one line per message:
 *
 *     2026-11-22T07:49:32.123Z s3 127.0.0.1:51234 to_client print peers^7 entered the game
 *
 * (UTC time with milliseconds, session, client address, direction, kind,
 * text with control characters escaped and trailing newlines removed).
 *
 * It is a tap: it runs after the chain and sees each frame as it was sent,
 * so what it logs is what the receiver got (rewritten texts, without
 * removed messages or dropped datagrams).  Resends of a reliable message
 * are not logged again.
 *
 * Lines are collected in a buffer that is written with one write() per
 * buffer-full and at every flush (about once a second), to a file opened
 * for appending in create().  A write error (a full disk) never stops the
 * relay: the lines are counted as lost, the error is logged once, and
 * writing is tried again at the next flush; its return is logged too.
 */
#include "filters/filter.h"
#include "filters/text.h"

#include "protocols/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TEXTLOG_BUF  65536
#define TEXTLOG_CLIP 2048 /* bytes of a message's text logged at most */
#define TEXTLOG_LINE (TEXTLOG_CLIP * 4 + 256)

struct textlog_conf {
    char *file;
    struct sg_conf_list kinds;
    int direction;
    bool strip_colors;
    uint32_t mask; /* from conf_check */
};

struct textlog_route {
    const struct textlog_conf *conf;
    int fd;
    bool own_fd;
    size_t len;
    unsigned lines; /* in the buffer */
    uint64_t written, lost;
    int error;          /* the last write error, 0 when writing works */
    bool report_error;  /* an error to log at the next frame */
    bool report_resume; /* writing works again: log it at the next frame */
    uint64_t lost_reported;
    char buf[TEXTLOG_BUF];
};

static int conf_check(void *p, char *err, size_t errlen)
{
    struct textlog_conf *c = p;

    if (!c->file) {
        snprintf(err, errlen, "needs 'file PATH' (the log file, or - for standard output)");
        return SG_E_CONFIG;
    }
    c->mask = SG_KINDS_TEXT & ~SG_KIND_BIT(SG_MSG_CONFIGSTRING);
    return sg_filter__kinds_parse(&c->kinds, "kinds", &c->mask, err, errlen);
}

static int create(const void *conf, void **route_state, char *err, size_t errlen)
{
    const struct textlog_conf *c = conf;
    struct textlog_route *r = calloc(1, sizeof(*r));

    if (!r) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    r->conf = c;
    if (strcmp(c->file, "-") == 0) {
        r->fd = STDOUT_FILENO;
    } else {
        r->fd = open(c->file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (r->fd < 0) {
            int e = errno;
            snprintf(err, errlen, "cannot open the log file '%s' for appending: %s", c->file,
                     strerror(e));
            free(r);
            return -e;
        }
        r->own_fd = true;
    }
    *route_state = r;
    return 0;
}

/* Write the buffer out (whole lines, one write per call when it can). */
static void write_out(struct textlog_route *r)
{
    size_t off = 0;

    for (int tries = 0; off < r->len && tries < 64; tries++) {
        ssize_t n = write(r->fd, r->buf + off, r->len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            unsigned lost = 0;
            for (size_t i = off; i < r->len; i++)
                lost += r->buf[i] == '\n';
            r->lost += lost;
            if (r->error == 0)
                r->report_error = true;
            r->error = e;
            r->report_resume = false;
            r->len = 0;
            r->lines = 0;
            return;
        }
        off += (size_t)n;
    }
    r->written += r->lines;
    if (r->error != 0 && off > 0) {
        r->error = 0;
        r->report_resume = true;
    }
    r->len = 0;
    r->lines = 0;
}

static void flush(void *route_state)
{
    struct textlog_route *r = route_state;

    if (r && r->len)
        write_out(r);
}

static void destroy(void *route_state)
{
    struct textlog_route *r = route_state;

    if (!r)
        return;
    flush(r);
    if (r->own_fd)
        close(r->fd);
    free(r);
}

/* Log the write problems found since the last frame. */
static void report(struct sg_filter_call *call, struct textlog_route *r)
{
    if (r->report_error) {
        r->report_error = false;
        sg_filter_log(call, SG_FILTER_LOG_ERROR,
                      "cannot write to the log file '%s': %s; lines are lost until writing "
                      "works again (said once)",
                      r->conf->file, strerror(r->error));
    }
    if (r->report_resume) {
        r->report_resume = false;
        sg_filter_log(call, SG_FILTER_LOG_INFO,
                      "writing to the log file '%s' again; %llu line(s) were lost", r->conf->file,
                      (unsigned long long)(r->lost - r->lost_reported));
        r->lost_reported = r->lost;
    }
}

static void add_line(struct textlog_route *r, const struct sg_filter_call *call,
                     const struct sg_msg *m)
{
    const struct textlog_conf *c = r->conf;
    char ts[40], line[TEXTLOG_LINE];
    size_t len = m->text_len, n;
    int head;

    while (len > 0 && (m->text[len - 1] == '\n' || m->text[len - 1] == '\r'))
        len--;
    sg_filter__timestamp(ts, sizeof(ts));
    head = snprintf(line, sizeof(line), "%s s%llu %s %s %s ", ts,
                    (unsigned long long)call->session->id,
                    call->session->client ? call->session->client : "-",
                    sg_filter__dir_name(call->frame->dir), sg_msg_kind_name(m->kind));
    if (head < 0 || (size_t)head >= sizeof(line) - 2)
        return;
    n = (size_t)head + sg_filter__escape(line + head, sizeof(line) - (size_t)head - 1, m->text, len,
                                         TEXTLOG_CLIP, c->strip_colors);
    line[n++] = '\n';
    if (r->len + n > sizeof(r->buf))
        write_out(r);
    memcpy(r->buf + r->len, line, n);
    r->len += n;
    r->lines++;
}

static int on_frame(struct sg_filter_call *call)
{
    struct textlog_route *r = call->route_state;
    const struct textlog_conf *c = r->conf;
    const struct sg_frame *f = call->frame;

    report(call, r);
    if (call->dropped || !f->msgs || !sg_filter__dir_matches(c->direction, f->dir))
        return SG_FILTER_PASS;
    for (unsigned i = 0; i < f->nmsgs; i++) {
        const struct sg_msg *m = &f->msgs[i];
        if (m->repeat || m->dropped || m->injected || !m->text ||
            !sg_filter__kind_in(c->mask, m->kind))
            continue;
        add_line(r, call, m);
    }
    return SG_FILTER_PASS;
}

static const struct sg_conf_directive directives[] = {
    {.name = "file",
     .type = SG_CONF_PATH,
     .offset = offsetof(struct textlog_conf, file),
     .argname = "PATH",
     .help = "the log file, appended to (- is standard output); required"},
    {.name = "kinds",
     .type = SG_CONF_LIST,
     .offset = offsetof(struct textlog_conf, kinds),
     .min = 1,
     .max = 16,
     .argname = "KIND[,KIND...]",
     .help = "message kinds to log (default: every text kind but configstring)"},
    {.name = "direction",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct textlog_conf, direction),
     .choices = sg_filter__direction_choices,
     .argname = "both|to_client|to_server",
     .help = "which way (default both)"},
    {.name = "strip_colors",
     .type = SG_CONF_BOOL,
     .offset = offsetof(struct textlog_conf, strip_colors),
     .argname = "yes|no",
     .help = "remove Quake 3 colour codes (^1 ...) from the text (default no)"},
    {NULL},
};

const struct sg_filter_impl sg_builtin_textlog = {
    .name = "textlog",
    .description = "log chat, prints, centerprints and commands of every session to a file",
    .example = "filter textlog {\n"
               "    file slipgate-text.log\n"
               "    kinds print,chat,centerprint,servercmd,clientcmd\n"
               "    strip_colors yes\n"
               "}\n",
    .tap = true,
    .conf_size = sizeof(struct textlog_conf),
    .directives = directives,
    .conf_check = conf_check,
    .create = create,
    .destroy = destroy,
    .on_frame = on_frame,
    .flush = flush,
};
