/*
 * The 'record' filter: network-side demos.  Each session that a codec with
 * a demo writer decodes is recorded into `directory`, by default one file
 * per level, named from the `name` template plus the game's extension:
 *
 *     %map%-%date%-%time%-%client%   e.g. oa_dm1-20261122-041500-127.0.0.1_27961.dm_71
 *
 * It is a tap: it sees each server message as it went out to the client
 * (after the filters, rebuilt when they changed it; dropped datagrams are
 * not recorded), and the codec writes the game's format
 * (protocols/codec.h record()).  A recording that starts mid-level (a
 * reload turned it on, or a size limit started a new part) begins with a
 * gamestate the codec builds from what it tracked.
 *
 * Every message is flushed as it is written, so a file cut by kill -9
 * reads up to its last whole message; the end marker is written when the
 * level changes, a part reaches `max_size`, the session ends (which covers
 * SIGTERM and a reload that changes the filters).  A file that never got a
 * message is removed, and so is one the codec says no player can play (the
 * sign-on alone).  A write error (a full disk) stops recording for that
 * session only, is logged once, and never touches the relaying; the file is
 * cut back to its last whole message (a short write leaves part of one,
 * which the games' players take for a broken demo) and ends there.
 *
 * A demo ends where the player's own would (DESIGN.md rule 9):
 *   - the client disconnects (a C2S frame the codec marks `disconnect`):
 *     the end marker goes in at once, and nothing the server sends after
 *     it (its "disconnected" print and disconnect command, snapshots in
 *     flight) is recorded, even when the client's datagram was dropped;
 *   - the server drops the client (a server message carrying an
 *     SG_MSG_DISCONNECT that went out: kicked, server shutdown): the game
 *     writes that message into its own demo before it acts on it, so the
 *     message is recorded and the demo ends after it.
 * After either, only a new level (the gamestate of a reconnect on the same
 * session) starts a new file.
 */
#include "filters/chain.h"
#include "filters/filter.h"
#include "filters/sign.h"

#include "protocols/demofile.h"
#include "protocols/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio_ext.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RECORD_DEFAULT_NAME "%map%-%date%-%time%-%client%"
#define RECORD_PATH_MAX     4096
#define RECORD_SUFFIXES     100 /* -2 .. -99 for names taken in the same second */

enum { AT_MAX_NEXT, AT_MAX_STOP };
static const char *const at_max_names[] = {"next", "stop", NULL};

extern const struct sg_filter_impl sg_builtin_record;

struct record_conf {
    char *directory;
    char *name;
    bool split_on_map_change;
    int64_t max_size; /* bytes; 0 = no limit */
    int at_max_size;
    bool has_part; /* the template uses %part% (from conf_check) */
};

/* One session's recording (the slot). */
struct record_slot {
    FILE *fp;
    char path[RECORD_PATH_MAX];
    uint64_t written;           /* messages in the current file */
    uint64_t whole;             /* its bytes up to the end of the last whole message */
    uint64_t opened_ms;         /* when the current file was opened (wall clock, ms) */
    unsigned part;              /* of the current level: 1, then 2.. after max_size */
    bool failed;                /* stopped by an error, for the rest of the session */
    bool stopped;               /* stopped by max_size with `at_max_size stop` */
    bool ended;                 /* the connection ended: wait for a new level */
    bool kick_seen;             /* a server disconnect went by, its datagram dropped */
    uint32_t demos;             /* files that got at least one message */
    uint64_t demo_bytes;        /* the bytes of those finished (closed) */
    char last[RECORD_PATH_MAX]; /* the last of them */
    struct sg_sign_writer *signer; /* the current file's .sig (sign_key set), or NULL */
    bool sign_failed;           /* writing the .sig failed: reported once */
    struct sg_chain *chain;     /* to log from session_end */
    int index;
};

/* ---- the name ---- */

static const char *const placeholders[] = {"map",     "date",  "time", "client", "server",
                                           "session", "route", "part", NULL};

/* Keep names portable: letters, digits, '-', '_', '.'; anything else becomes '_'. */
static void clean(char *s)
{
    for (char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_' || *p == '.'))
            *p = '_';
}

/* The placeholder at `t` ("%map%..."): its index, and its length through the closing '%'. */
static int placeholder(const char *t, size_t *len)
{
    for (int i = 0; placeholders[i]; i++) {
        size_t n = strlen(placeholders[i]);
        if (strncmp(t + 1, placeholders[i], n) == 0 && t[1 + n] == '%') {
            *len = n + 2;
            return i;
        }
    }
    return -1;
}

/* Expand the template (checked by conf_check) into `out`; -ENAMETOOLONG if it does not fit. */
static int expand(const char *tmpl, const struct sg_filter_session *s, const char *level,
                  unsigned part, char *out, size_t cap)
{
    char value[128];
    size_t o = 0;
    time_t now = time(NULL);
    struct tm tm;

    localtime_r(&now, &tm);
    for (const char *t = tmpl; *t;) {
        size_t len = 1;
        int i = *t == '%' ? placeholder(t, &len) : -1;

        if (i < 0) {
            snprintf(value, sizeof(value), "%c", t[0]); /* a literal character */
        } else {
            switch (i) {
            case 0:
                snprintf(value, sizeof(value), "%s", level[0] ? level : "unknown");
                break;
            case 1:
                strftime(value, sizeof(value), "%Y%m%d", &tm);
                break;
            case 2:
                strftime(value, sizeof(value), "%H%M%S", &tm);
                break;
            case 3:
                snprintf(value, sizeof(value), "%s", s->client ? s->client : "");
                break;
            case 4:
                snprintf(value, sizeof(value), "%s", s->server ? s->server : "");
                break;
            case 5:
                snprintf(value, sizeof(value), "%llu", (unsigned long long)s->id);
                break;
            case 6:
                snprintf(value, sizeof(value), "%s", s->route ? s->route : "");
                break;
            default:
                snprintf(value, sizeof(value), "%u", part);
                break;
            }
        }
        clean(value);
        if (o + strlen(value) >= cap)
            return -ENAMETOOLONG;
        memcpy(out + o, value, strlen(value) + 1);
        o += strlen(value);
        t += len;
    }
    if (o == 0)
        return -EINVAL;
    if (out[0] == '.')
        out[0] = '_'; /* no hidden files: a name never starts with '.' */
    return 0;
}

/* ---- configuration ---- */

static void conf_init(void *p)
{
    struct record_conf *c = p;

    c->split_on_map_change = true;
    c->at_max_size = AT_MAX_NEXT;
}

static int conf_check(void *p, char *err, size_t errlen)
{
    struct record_conf *c = p;
    const char *t;

    if (!c->directory) {
        snprintf(err, errlen, "needs 'directory DIR' (where the demos go)");
        return SG_E_CONFIG;
    }
    if (!c->name && !(c->name = strdup(RECORD_DEFAULT_NAME))) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    if (c->name[0] == '\0' || strchr(c->name, '/')) {
        snprintf(err, errlen, "'name' must be a non-empty file name without '/' (got '%.60s')",
                 c->name);
        return SG_E_CONFIG;
    }
    for (t = c->name; *t; t++) {
        size_t len;
        int i;

        if (*t != '%')
            continue;
        i = placeholder(t, &len);
        if (i < 0) {
            snprintf(err, errlen,
                     "'name': unknown placeholder at '%.20s' (known: %%map%% %%date%% %%time%% "
                     "%%client%% %%server%% %%session%% %%route%% %%part%%)",
                     t);
            return SG_E_CONFIG;
        }
        c->has_part = c->has_part || strcmp(placeholders[i], "part") == 0;
        t += len - 1;
    }
    return 0;
}

static int create(const void *conf, void **route_state, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    *route_state = (void *)(uintptr_t)conf; /* nothing per route but the settings */
    return 0;
}

/* ---- files ---- */

/* Log through the chain outside on_frame (session_end): the slot knows its place. */
static void slot_log(struct record_slot *slot, const struct sg_filter_session *s,
                     enum sg_filter_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void slot_log(struct record_slot *slot, const struct sg_filter_session *s,
                     enum sg_filter_log_level level, const char *fmt, ...)
{
    char text[RECORD_PATH_MAX + 256];
    va_list ap;

    if (!slot->chain || !slot->chain->log)
        return;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    slot->chain->log(slot->chain->log_ctx, level, slot->chain->f[slot->index].fc->label, s->id,
                     text);
}

/* The file's messages so far are whole and in it (flushed): a cut comes back here. */
static void mark_whole(struct record_slot *slot)
{
    off_t at = ftello(slot->fp);

    if (at >= 0)
        slot->whole = (uint64_t)at;
    if (slot->signer)
        sg_sign_writer_mark(slot->signer);
}

/*
 * A write failed (a full disk: the last one went out in part): cut the
 * file back to its last whole message (protocols/demofile.h; a signed
 * demo's signer cuts its descriptor and its hash).  0 or a negative error.
 */
static int cut_back(struct record_slot *slot)
{
    if (slot->signer) {
        __fpurge(slot->fp);
        clearerr(slot->fp);
        return sg_sign_writer_cut(slot->signer);
    }
    return sg_demo_file_cut(slot->fp, slot->whole);
}

/* Write the end marker and close; a file without a message, or one the codec says no player
 * can play, goes away.  `why`: "" or "; reason" */
static void finish_file(struct record_slot *slot, const struct sg_filter_session *s, bool report,
                        const char *why)
{
    bool unplayable = false;
    int err = 0;
    long size;

    if (!slot->fp)
        return;
    if (s->codec && s->codec->record_end && s->codec_state)
        err = s->codec->record_end(s->codec_state, slot->fp);
    unplayable = err == 1;
    if (err == 1)
        err = 0;
    if (err == 0 && fflush(slot->fp) != 0)
        err = sg_write_error();
    /* The end marker did not fit: the demo ends at its last whole message. */
    if (err < 0 && cut_back(slot) < 0 && report)
        slot_log(slot, s, SG_FILTER_LOG_ERROR, "demo %s: cutting it back to its last whole "
                 "message failed", slot->path);
    size = ftell(slot->fp);
    /* The final checkpoint signs the whole file, end marker included. */
    if (slot->signer && slot->written > 0 && fflush(slot->fp) == 0 &&
        sg_sign_writer_finish(slot->signer, slot->written) < 0 && report)
        slot_log(slot, s, SG_FILTER_LOG_ERROR, "demo %s: writing its .sig failed", slot->path);
    if (fclose(slot->fp) != 0 && err == 0)
        err = -errno;
    slot->fp = NULL;
    if (unplayable && slot->written > 0) {
        if (report)
            slot_log(slot, s, SG_FILTER_LOG_INFO, "demo %s removed: nothing in it to play (%llu "
                     "messages, the sign-on alone)", slot->path,
                     (unsigned long long)slot->written);
        slot->written = 0;
        if (slot->demos > 0)
            slot->demos--;
    }
    sg_sign_writer_destroy(slot->signer, slot->written == 0);
    slot->signer = NULL;
    if (slot->written == 0) {
        remove(slot->path);
        return;
    }
    if (size > 0)
        slot->demo_bytes += (uint64_t)size;
    if (err < 0 && report)
        slot_log(slot, s, SG_FILTER_LOG_ERROR, "demo %s: %s", slot->path, sg_strerror(err));
    else if (report)
        slot_log(slot, s, SG_FILTER_LOG_INFO, "demo %s finished (%llu messages, %ld bytes)%s",
                 slot->path, (unsigned long long)slot->written, size, why);
    slot->written = 0;
}

static bool sig_exists(const char *path)
{
    char sig[RECORD_PATH_MAX + 8];
    struct stat st;

    snprintf(sig, sizeof(sig), "%s.sig", path);
    return lstat(sig, &st) == 0;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Open the next file: DIR/NAME[-partN][-K].EXT, never over an existing one;
 * with a sign_key, written through the signer, FILE.sig beside it.
 */
static int open_file(struct record_slot *slot, const struct record_conf *c,
                     const struct sg_filter_session *s, const struct sg_frame *f)
{
    char name[512], part[32] = "";
    const char *ext = s->codec->demo_ext(s->codec_state);
    int err = expand(c->name, s, f->level, slot->part, name, sizeof(name));
    int fd = -1;

    if (err < 0)
        return err;
    if (slot->part > 1 && !c->has_part)
        snprintf(part, sizeof(part), "-part%u", slot->part);
    if (mkdir(c->directory, 0777) != 0 && errno != EEXIST)
        return -errno;
    for (int i = 1; i < RECORD_SUFFIXES && fd < 0; i++) {
        char suffix[16] = "";
        if (i > 1)
            snprintf(suffix, sizeof(suffix), "-%d", i);
        if (snprintf(slot->path, sizeof(slot->path), "%s/%s%s%s.%s", c->directory, name, part,
                     suffix, ext) >= (int)sizeof(slot->path))
            return -ENAMETOOLONG;
        fd = open(slot->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            return -errno;
        /* Signed: a name whose .sig is left over (its demo deleted) is taken too. */
        if (fd >= 0 && s->sign_key && sig_exists(slot->path)) {
            close(fd);
            remove(slot->path);
            fd = -1;
        }
    }
    if (fd < 0)
        return -EEXIST;
    slot->sign_failed = false;
    if (s->sign_key) {
        struct sg_sign_meta meta = {.route = s->route,
                                    .server = s->server,
                                    .client = s->client,
                                    .map = f->level[0] ? f->level : NULL,
                                    .protocol = s->codec->name,
                                    .kind = "demo",
                                    .start_ms = wall_ms()};
        err = sg_sign_writer_create(&slot->signer, s->sign_key, slot->path, fd, &meta,
                                    s->sign_interval_ms, &slot->fp);
        if (err < 0) {
            remove(slot->path);
            return err;
        }
        slot->written = 0;
        slot->whole = 0;
        return 0;
    }
    slot->fp = fdopen(fd, "wb");
    if (!slot->fp) {
        err = -errno;
        close(fd);
        remove(slot->path);
        return err;
    }
    slot->written = 0;
    slot->whole = 0;
    return 0;
}

/* ---- the tap ---- */

/* The session's slot, made on first use; NULL when out of memory. */
static struct record_slot *slot_get(struct sg_filter_call *call)
{
    struct record_slot *slot = *call->slot;

    if (slot)
        return slot;
    slot = calloc(1, sizeof(*slot));
    if (!slot)
        return NULL;
    slot->chain = call->proxy ? call->proxy->chain : NULL;
    slot->index = call->proxy ? call->proxy->index : 0;
    slot->part = 1;
    *call->slot = slot;
    return slot;
}

/* The connection ended: the demo ends here; nothing more until a new level. */
static void end_connection(struct record_slot *slot, const struct sg_filter_session *s,
                           const char *why)
{
    finish_file(slot, s, true, why);
    slot->ended = true;
    slot->kick_seen = false;
}

/*
 * Does this server message end the connection: does it carry the server's
 * disconnect to the client?  A fresh one that a filter did not remove; or
 * a resend of one whose first datagram was dropped on the way.
 */
static bool server_disconnects(struct record_slot *slot, const struct sg_filter_call *call)
{
    const struct sg_frame *f = call->frame;
    bool fresh = false, resent = false;

    for (unsigned i = 0; i < f->nmsgs; i++) {
        const struct sg_msg *m = &f->msgs[i];

        if (m->kind != SG_MSG_DISCONNECT || m->dropped)
            continue;
        fresh = fresh || !m->repeat;
        resent = resent || m->repeat;
    }
    if (call->dropped) {
        slot->kick_seen = slot->kick_seen || fresh;
        return false;
    }
    return fresh || (resent && slot->kick_seen);
}

static int on_frame(struct sg_filter_call *call)
{
    const struct record_conf *c = call->route_state;
    const struct sg_filter_session *s = call->session;
    const struct sg_frame *f = call->frame;
    struct record_slot *slot = *call->slot;
    bool kicked;
    long size;
    int n;

    /* Messages of a game with a demo writer. */
    if (!f || f->kind != SG_FRAME_MESSAGE || !s || !s->codec || !s->codec_state ||
        !s->codec->demo_ext || !s->codec->record)
        return SG_FILTER_PASS;

    /* The client leaves: its own demo has ended (even if this datagram was dropped). */
    if (f->dir == SG_DIR_C2S) {
        if (!f->disconnect || (slot && slot->ended))
            return SG_FILTER_PASS;
        if (!(slot = slot_get(call)))
            return -ENOMEM;
        end_connection(slot, s, "; the client disconnected");
        return SG_FILTER_PASS;
    }

    /* Server messages as the client got them. */
    if (f->dir != SG_DIR_S2C)
        return SG_FILTER_PASS;
    if (!(slot = slot_get(call)))
        return -ENOMEM;
    kicked = server_disconnects(slot, call);
    if (call->dropped || slot->failed || slot->stopped)
        return SG_FILTER_PASS;

    /* After the connection ended, only a new level (a reconnect) records again. */
    if (slot->ended) {
        if (!f->new_level)
            return SG_FILTER_PASS;
        slot->ended = false;
        slot->kick_seen = false;
        slot->part = 1;
    }

    /* A new level starts a new file (unless the demo should run on). */
    if (f->new_level && c->split_on_map_change && slot->fp) {
        finish_file(slot, s, true, "");
        slot->part = 1;
    }
    if (!slot->fp) {
        n = open_file(slot, c, s, f);
        if (n < 0) {
            sg_filter_log(call, SG_FILTER_LOG_ERROR,
                          "cannot record to %s: %s; not recording this session",
                          slot->path[0] ? slot->path : c->directory, sg_strerror(n));
            slot->failed = true;
            return n;
        }
        slot->opened_ms = wall_ms();
    }

    /* The message, flushed at once. */
    n = s->codec->record(s->codec_state, f, slot->fp);
    if (n > 0 && fflush(slot->fp) != 0)
        n = sg_write_error();
    if (n > 0)
        mark_whole(slot);
    if (n > 0 && slot->written++ == 0) {
        slot->demos++;
        memcpy(slot->last, slot->path, sizeof(slot->last));
        sg_filter_log(call, SG_FILTER_LOG_INFO, "recording to %s%s", slot->path,
                      slot->signer ? " (signed)" : "");
    }
    /* A checkpoint when one is due (the message is flushed: it is in the file). */
    if (n > 0 && slot->signer && !slot->sign_failed &&
        sg_sign_writer_tick(slot->signer, call->now_ms, slot->written) < 0) {
        sg_filter_log(call, SG_FILTER_LOG_ERROR, "demo %s: writing its .sig failed; the demo "
                      "goes on, signed up to its last checkpoint", slot->path);
        slot->sign_failed = true;
    }
    if (n < 0) {
        int cut = cut_back(slot);

        sg_filter_log(call, SG_FILTER_LOG_ERROR, "recording stopped: writing %s failed: %s; %s",
                      slot->path, sg_strerror(n),
                      cut < 0 ? "cutting it back to its last whole message failed"
                              : "the demo ends at its last whole message");
        finish_file(slot, s, false, "");
        slot->failed = true;
        return n;
    }

    /* The server dropped the client: its own demo ends with this message. */
    if (kicked) {
        end_connection(slot, s, "; the server disconnected the client");
        return SG_FILTER_PASS;
    }

    /* Past the size limit: this part ends here; the next one starts at the next message. */
    if (n > 0 && c->max_size > 0 && (size = ftell(slot->fp)) > c->max_size) {
        if (c->at_max_size == AT_MAX_STOP) {
            sg_filter_log(call, SG_FILTER_LOG_WARN,
                          "demo %s reached max_size (%ld bytes): recording stopped for this "
                          "session",
                          slot->path, size);
            slot->stopped = true;
        }
        finish_file(slot, s, true, "");
        slot->part++;
    }
    return SG_FILTER_PASS;
}

static void session_end(void *route_state, const struct sg_filter_session *session, void *p)
{
    struct record_slot *slot = p;

    (void)route_state;
    finish_file(slot, session, true, "");
    free(slot);
}

/* What the slot wrote (the `figures` hook): the demos, the bytes of those
 * finished, the last one's path, and the file being written now. */
static void figures(const void *slot, struct sg_filter_figures *out)
{
    const struct record_slot *rs = slot;

    out->files = rs->demos;
    out->bytes = rs->demo_bytes;
    out->last = rs->demos ? rs->last : NULL;
    if (rs->fp) {
        off_t at = ftello(rs->fp);

        out->open_path = rs->path;
        out->open_bytes = at > 0 ? (uint64_t)at : 0;
        out->opened_ms = rs->opened_ms;
    }
}

/* The session ends: finish the file being written, as session_end would,
 * so that the figures taken next count its bytes. */
static void finish(void *slot, const struct sg_filter_session *session)
{
    finish_file(slot, session, true, "");
}

static const struct sg_conf_directive directives[] = {
    {.name = "directory",
     .type = SG_CONF_PATH,
     .offset = offsetof(struct record_conf, directory),
     .argname = "DIR",
     .help = "where the demos go (made if missing, one level); required"},
    {.name = "name",
     .type = SG_CONF_STRING,
     .offset = offsetof(struct record_conf, name),
     .argname = "TEMPLATE",
     .help = "file name without the extension; %map% %date% %time% %client% %server% %session% "
             "%route% %part% (default " RECORD_DEFAULT_NAME ")"},
    {.name = "split_on_map_change",
     .type = SG_CONF_BOOL,
     .offset = offsetof(struct record_conf, split_on_map_change),
     .argname = "yes|no",
     .help = "start a new demo at each level (default yes; no: one demo for the session)"},
    {.name = "max_size",
     .type = SG_CONF_SIZE,
     .offset = offsetof(struct record_conf, max_size),
     .min = 0,
     .max = INT64_MAX,
     .argname = "SIZE",
     .help = "end a demo once it grows past SIZE bytes (k/M/G; default 0: no limit)"},
    {.name = "at_max_size",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct record_conf, at_max_size),
     .choices = at_max_names,
     .argname = "next|stop",
     .help = "past max_size: start the next part (default), or stop recording the session"},
    {NULL},
};

const struct sg_filter_impl sg_builtin_record = {
    .name = "record",
    .description = "write each session's demo files (.dm_68, .dm_71, .qwd, ...) as the client saw "
                   "the game",
    .example = "filter record {\n"
               "    directory demos\n"
               "    name %map%-%date%-%time%-%client%\n"
               "    max_size 50M\n"
               "}\n",
    .tap = true,
    .conf_size = sizeof(struct record_conf),
    .directives = directives,
    .conf_init = conf_init,
    .conf_check = conf_check,
    .create = create,
    .on_frame = on_frame,
    .session_end = session_end,
    .figures = figures,
    .finish = finish,
};
