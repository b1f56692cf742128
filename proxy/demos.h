/*
 * Finished demos for the HTTP API (proxy/http.c): the list, and a file of
 * it to download.  The directories are the ones slipgate itself writes
 * demos to (each route's `record` directory, the directories of its
 * sessions' demo files); a download names a file in one of them, and
 * nothing else is served: no `..`, no symbolic link, only regular files.
 */
#ifndef SG_PROXY_DEMOS_H
#define SG_PROXY_DEMOS_H

#include "proxy/stats.h"

#include <stdint.h>
#include <stdio.h>

#define SG_DEMOS_MAX_DIRS  32
#define SG_DEMOS_MAX_FILES 500 /* listed per answer, newest first */
#define SG_DEMOS_PATH_MAX  512

struct sg_demo_dirs {
    int n;
    char dir[SG_DEMOS_MAX_DIRS][SG_DEMOS_PATH_MAX]; /* as configured / as written (not resolved) */
};

/* The directories of every loop's routes and sessions (loops paused). */
void sg_demos_dirs(const struct sg_stats_view *v, struct sg_demo_dirs *out);

/* {"demos": [...]}: the finished files of those directories (loops paused:
 * the files being written are left out, and an ended session's map and
 * player are given with its last demo). */
void sg_demos_json(FILE *f, const struct sg_stats_view *v);

/*
 * Open `path` for reading if it is a regular file (not a link) directly in
 * one of `dirs` (compared resolved): the descriptor (>= 0) and its size,
 * or a negative errno with the reason in `why`: -EINVAL (a malformed or
 * relative path, `..`), -EACCES (outside the directories, a link, not a
 * regular file), -ENOENT.
 */
int sg_demos_open(const struct sg_demo_dirs *dirs, const char *path, uint64_t *size, char *why,
                  size_t whycap);

#endif
