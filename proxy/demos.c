/*
 * Finished demos for the HTTP API (demos.h).
 */
#include "proxy/demos.h"

#include "protocols/json.h"
#include "proxy/route.h"
#include "proxy/session.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void add_dir(struct sg_demo_dirs *d, const char *dir, size_t len)
{
    if (len == 0 || len >= SG_DEMOS_PATH_MAX || d->n >= SG_DEMOS_MAX_DIRS)
        return;
    while (len > 1 && dir[len - 1] == '/')
        len--;
    for (int i = 0; i < d->n; i++)
        if (strlen(d->dir[i]) == len && memcmp(d->dir[i], dir, len) == 0)
            return;
    memcpy(d->dir[d->n], dir, len);
    d->dir[d->n][len] = '\0';
    d->n++;
}

/* The directory part of a file's path. */
static void add_dir_of(struct sg_demo_dirs *d, const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;

    if (slash)
        add_dir(d, path, slash == path ? 1 : (size_t)(slash - path));
}

static void route_dirs(struct sg_demo_dirs *d, const struct sg_route *r)
{
    if (r->conf.record)
        add_dir(d, r->conf.record, strlen(r->conf.record));
    for (size_t i = 0; i < r->nended; i++)
        if (r->ended[i].demo[0])
            add_dir_of(d, r->ended[i].demo);
    for (const struct sg_session *s = r->sessions; s; s = s->next) {
        struct sg_session_summary sum;
        sg_stats_live_summary(s, &sum);
        if (sum.demo[0])
            add_dir_of(d, sum.demo);
    }
}

void sg_demos_dirs(const struct sg_stats_view *v, struct sg_demo_dirs *out)
{
    out->n = 0;
    for (int k = 0; k < v->nworkers && k < SG_CONF_MAX_WORKERS; k++) {
        if (!v->loop[k].present)
            continue;
        for (const struct sg_route *r = v->loop[k].routes; r; r = r->next)
            route_dirs(out, r);
    }
}

/* Is `path` a file being written now (any loop's live sessions)? */
static bool being_written(const struct sg_stats_view *v, const char *path)
{
    for (int k = 0; k < v->nworkers && k < SG_CONF_MAX_WORKERS; k++) {
        if (!v->loop[k].present)
            continue;
        for (const struct sg_route *r = v->loop[k].routes; r; r = r->next)
            for (const struct sg_session *s = r->sessions; s; s = s->next)
                for (int i = 0; r->chain && s->slots && i < r->chain->n; i++) {
                    struct sg_filter_figures fig;
                    if (sg_session_slot_figures(s, r->chain, i, &fig) && fig.open_path &&
                        strcmp(fig.open_path, path) == 0)
                        return true;
                }
    }
    return false;
}

/* The session (ended, or live with its demo closed) whose last demo is
 * `path`: its summary into `out` and its route's name; NULL when none. */
static const char *session_of(const struct sg_stats_view *v, const char *path,
                              struct sg_session_summary *out)
{
    for (int k = 0; k < v->nworkers && k < SG_CONF_MAX_WORKERS; k++) {
        if (!v->loop[k].present)
            continue;
        for (const struct sg_route *r = v->loop[k].routes; r; r = r->next) {
            for (size_t i = r->nended; i-- > 0;)
                if (strcmp(r->ended[i].demo, path) == 0) {
                    *out = r->ended[i];
                    return r->conf.name;
                }
            for (const struct sg_session *s = r->sessions; s; s = s->next) {
                sg_stats_live_summary(s, out);
                if (strcmp(out->demo, path) == 0)
                    return r->conf.name;
            }
        }
    }
    return NULL;
}

struct demo_file {
    char path[SG_DEMOS_PATH_MAX];
    uint64_t bytes, mtime_ms;
};

static int newest_first(const void *a, const void *b)
{
    const struct demo_file *x = a, *y = b;
    return x->mtime_ms < y->mtime_ms ? 1 : x->mtime_ms > y->mtime_ms ? -1 : strcmp(x->path, y->path);
}

void sg_demos_json(FILE *f, const struct sg_stats_view *v)
{
    struct sg_demo_dirs *d = malloc(sizeof(*d));
    struct demo_file *files = calloc(SG_DEMOS_MAX_FILES, sizeof(*files));
    size_t n = 0;
    uint64_t more = 0;

    fputs("{\"demos\": [", f);
    if (!d || !files) {
        free(d);
        free(files);
        fputs("], \"error\": \"out of memory\"}\n", f);
        return;
    }
    sg_demos_dirs(v, d);
    for (int i = 0; i < d->n; i++) {
        DIR *dir = opendir(d->dir[i]);
        struct dirent *e;
        if (!dir)
            continue;
        while ((e = readdir(dir))) {
            struct stat st;
            char p[SG_DEMOS_PATH_MAX];
            int len;
            if (e->d_name[0] == '.') /* ., .., hidden and the writers' temporary files */
                continue;
            len = snprintf(p, sizeof(p), "%s%s%s", d->dir[i],
                           strcmp(d->dir[i], "/") == 0 ? "" : "/", e->d_name);
            if (len < 0 || (size_t)len >= sizeof(p))
                continue;
            if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
                !S_ISREG(st.st_mode) || being_written(v, p))
                continue;
            if (n == SG_DEMOS_MAX_FILES) {
                more++;
                continue;
            }
            memcpy(files[n].path, p, (size_t)len + 1);
            files[n].bytes = (uint64_t)st.st_size;
            files[n].mtime_ms =
                (uint64_t)st.st_mtim.tv_sec * 1000 + (uint64_t)st.st_mtim.tv_nsec / 1000000;
            n++;
        }
        closedir(dir);
    }
    qsort(files, n, sizeof(*files), newest_first);
    for (size_t i = 0; i < n; i++) {
        struct sg_session_summary sum;
        const char *route = session_of(v, files[i].path, &sum);
        const struct sg_session_summary *s = route ? &sum : NULL;
        const char *name = strrchr(files[i].path, '/');

        fputs(i ? ",\n  {\"path\": " : "\n  {\"path\": ", f);
        sg_json_cstr(f, files[i].path);
        fputs(", \"name\": ", f);
        sg_json_cstr(f, name ? name + 1 : files[i].path);
        fprintf(f, ", \"bytes\": %llu, \"mtime_ms\": %llu, \"route\": ",
                (unsigned long long)files[i].bytes, (unsigned long long)files[i].mtime_ms);
        if (s) {
            sg_json_cstr(f, route);
            fprintf(f, ", \"session\": %llu, \"map\": ", (unsigned long long)s->id);
            sg_json_cstr(f, s->game.map);
            fputs(", \"player\": ", f);
            sg_json_cstr(f, s->game.player);
            fputc('}', f);
        } else {
            fputs("null, \"session\": null, \"map\": \"\", \"player\": \"\"}", f);
        }
    }
    fprintf(f, "%s], \"more\": %llu}\n", n ? "\n" : "", (unsigned long long)more);
    free(d);
    free(files);
}

#define WHY(...) snprintf(why, whycap, __VA_ARGS__)

int sg_demos_open(const struct sg_demo_dirs *dirs, const char *path, uint64_t *size, char *why,
                  size_t whycap)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    char want[PATH_MAX], have[PATH_MAX], dir[SG_DEMOS_PATH_MAX];
    struct stat st;
    size_t dlen;
    bool inside = false;
    int fd;

    if (!path || path[0] != '/' || !slash || !slash[1] || strlen(path) >= SG_DEMOS_PATH_MAX) {
        WHY("path: the absolute path of a demo (/api/demos)");
        return -EINVAL;
    }
    if (strstr(path, "/../") || strstr(path, "/./") || strcmp(slash, "/..") == 0 ||
        strcmp(slash, "/.") == 0 || strstr(path, "//")) {
        WHY("path: no '.' or '..' parts");
        return -EINVAL;
    }
    dlen = slash == path ? 1 : (size_t)(slash - path);
    memcpy(dir, path, dlen);
    dir[dlen] = '\0';
    if (!realpath(dir, want)) {
        WHY("not a demo of slipgate's");
        return -EACCES;
    }
    for (int i = 0; i < dirs->n && !inside; i++)
        inside = realpath(dirs->dir[i], have) && strcmp(have, want) == 0;
    if (!inside) {
        WHY("not a demo of slipgate's: outside its record directories");
        return -EACCES;
    }
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        WHY(e == ELOOP ? "a symbolic link is not served" : e == ENOENT ? "no such demo"
                                                                        : "cannot open it");
        return e == ENOENT ? -ENOENT : -EACCES;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        WHY("not a regular file");
        return -EACCES;
    }
    *size = (uint64_t)st.st_size;
    return fd;
}
