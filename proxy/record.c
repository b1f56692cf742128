/*
 * Network-side demos: each session that decodes is recorded into the
 * route's `record` directory, one file per level, named
 *
 *     MAP-YYYYmmdd-HHMMSS-CLIENT.EXT     e.g. oa_dm1-20261122-041500-127.0.0.1_27961.dm_71
 *
 * The codec writes the game's format (protocols/codec.h record()).  Every
 * message is flushed as it is written, so a file stopped by kill -9 reads
 * up to its last whole message; the end marker is written when the level
 * changes, the session ends or slipgate stops.  A write error (a full disk)
 * stops recording for that session, says so once, and never touches the
 * relaying.
 */
#include "proxy/app.h"
#include "proxy/route.h"
#include "protocols/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

struct sg_recording {
    FILE *fp;
    char path[4096];
    uint64_t written; /* messages in the current file */
    bool failed;      /* gave up after an error; until the directory changes */
    char dir[2048];
};

/* Keep names portable: letters, digits, '-', '_', '.'; anything else becomes '_'. */
static void clean(char *s)
{
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '-' || *s == '_' || *s == '.'))
            *s = '_';
}

static void finish_file(struct sg_session *s, bool report)
{
    struct sg_recording *rec = s->rec;
    struct sg_route *r = s->route;
    int err = 0;

    if (!rec->fp)
        return;
    if (s->codec)
        err = s->codec->record_end(s->cstate, rec->fp);
    if (fclose(rec->fp) != 0 && err == 0)
        err = -errno;
    rec->fp = NULL;

    /* A file that never got a message (nothing to start from yet) goes away. */
    if (rec->written == 0) {
        remove(rec->path);
        return;
    }
    rec->written = 0;
    if (err < 0 && report)
        sg_log(&r->app->log, SG_LOG_ERROR, r->conf.name, s->sum.id, "demo %s: %s", rec->path,
               sg_strerror(err));
    else if (report)
        sg_log_at(&r->app->log, SG_LOG_INFO, r->conf.name, s->sum.id, "demo %s finished",
                  rec->path);
}

static int open_file(struct sg_session *s, const struct sg_frame *f)
{
    struct sg_recording *rec = s->rec;
    struct sg_route *r = s->route;
    char level[64], client[64], stamp[32];
    time_t now = time(NULL);
    struct tm tm;

    /* The name: level, time, client. */
    snprintf(level, sizeof(level), "%s", f->level[0] ? f->level : "unknown");
    snprintf(client, sizeof(client), "%s", s->sum.client);
    clean(level);
    clean(client);
    localtime_r(&now, &tm);
    strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
    if (snprintf(rec->path, sizeof(rec->path), "%s/%s-%s-%s.%s", rec->dir, level, stamp, client,
                 s->codec->demo_ext(s->cstate)) >= (int)sizeof(rec->path)) {
        sg_log(&r->app->log, SG_LOG_ERROR, r->conf.name, s->sum.id,
               "record directory name too long: %s", rec->dir);
        return -ENAMETOOLONG;
    }

    /* The directory may need making; a name taken in the same second gets a suffix. */
    mkdir(rec->dir, 0777);
    for (int i = 2; i < 100; i++) {
        struct stat st;
        if (stat(rec->path, &st) != 0)
            break;
        if (snprintf(rec->path, sizeof(rec->path), "%s/%s-%s-%s-%d.%s", rec->dir, level, stamp,
                     client, i, s->codec->demo_ext(s->cstate)) >= (int)sizeof(rec->path))
            return -ENAMETOOLONG;
    }
    rec->fp = fopen(rec->path, "wb");
    if (!rec->fp) {
        int err = -errno;
        sg_log(&r->app->log, SG_LOG_ERROR, r->conf.name, s->sum.id,
               "cannot record to %s: %s; not recording this session", rec->path, strerror(-err));
        return err;
    }
    rec->written = 0;
    return 0;
}

void sg_record_frame(struct sg_session *s, const struct sg_frame *f)
{
    struct sg_route *r = s->route;
    int n;

    /* Recording turned off (reload), or on, or into another directory. */
    if (!r->conf.record) {
        sg_record_close(s);
        return;
    }
    if (s->rec && strcmp(s->rec->dir, r->conf.record) != 0)
        sg_record_close(s);
    if (!s->rec) {
        if (!s->codec->demo_ext || !(s->rec = calloc(1, sizeof(*s->rec))))
            return;
        snprintf(s->rec->dir, sizeof(s->rec->dir), "%s", r->conf.record);
    }
    if (s->rec->failed)
        return;

    /* A new level starts a new file. */
    if (f->new_level)
        finish_file(s, true);
    if (!s->rec->fp && open_file(s, f) < 0) {
        s->rec->failed = true;
        return;
    }

    /* The message, flushed at once. */
    n = s->codec->record(s->cstate, f, s->rec->fp);
    if (n > 0 && fflush(s->rec->fp) != 0)
        n = -errno;
    if (n > 0 && s->rec->written++ == 0) {
        s->sum.demos++;
        if (snprintf(s->sum.demo, sizeof(s->sum.demo), "%s", s->rec->path) >=
            (int)sizeof(s->sum.demo))
            memcpy(s->sum.demo + sizeof(s->sum.demo) - 4, "...", 4);
        sg_log_at(&r->app->log, SG_LOG_INFO, r->conf.name, s->sum.id, "recording to %s",
                  s->rec->path);
    }
    if (n < 0) {
        sg_log(&r->app->log, SG_LOG_ERROR, r->conf.name, s->sum.id,
               "recording stopped: writing %s failed: %s", s->rec->path, sg_strerror(n));
        finish_file(s, false);
        s->rec->failed = true;
    }
}

void sg_record_close(struct sg_session *s)
{
    if (!s->rec)
        return;
    finish_file(s, true);
    free(s->rec);
    s->rec = NULL;
}
