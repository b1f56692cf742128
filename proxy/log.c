/*
 * Timestamped, levelled log lines; see log.h.
 *
 * Logging must never stall relaying: when the log goes to a pipe, socket or
 * terminal, the descriptor is made non-blocking for the run and a line that
 * cannot be written at once is dropped and counted; the next line that gets
 * through says how many were lost.  Each line is one write(2).
 */
#include "proxy/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

const char *const sg_log_level_names[] = {"error", "warn", "info", "debug", "trace", NULL};
static const char level_tags[][6] = {"error", "warn", "info", "debug", "trace"};
/* syslog(3)'s priorities: LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG (trace too). */
static const char level_prio[][4] = {"<3>", "<4>", "<6>", "<7>", "<7>"};

bool sg_log_is_journal(int fd)
{
    const char *env = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    int end = 0;

    if (!env || sscanf(env, "%llu:%llu%n", &dev, &ino, &end) != 2 || env[end] != '\0')
        return false;
    return fstat(fd, &st) == 0 && (unsigned long long)st.st_dev == dev &&
           (unsigned long long)st.st_ino == ino;
}

void sg_log_init(struct sg_logger *lg, int fd, int level)
{
    struct stat st;

    lg->fd = fd;
    lg->level = level;
    lg->dropped = 0;
    lg->restore_flags = -1;
    lg->journal = sg_log_is_journal(fd);
    if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
        int flags = fcntl(fd, F_GETFL);
        if (flags >= 0 && !(flags & O_NONBLOCK) && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0)
            lg->restore_flags = flags;
    }
}

void sg_log_finish(struct sg_logger *lg)
{
    if (lg->restore_flags >= 0)
        fcntl(lg->fd, F_SETFL, lg->restore_flags);
    lg->restore_flags = -1;
}

static void put_line(struct sg_logger *lg, const char *line, size_t len)
{
    ssize_t n = write(lg->fd, line, len);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        lg->dropped++;
}

void sg_log(struct sg_logger *lg, int level, const char *route, uint64_t sid, const char *fmt, ...)
{
    char line[2048];
    struct timespec ts;
    struct tm tm;
    size_t n;
    int k;
    va_list ap;

    if (!sg_log_enabled(lg, level))
        return;
    if (level < SG_LOG_ERROR)
        level = SG_LOG_ERROR;
    if (level > SG_LOG_TRACE)
        level = SG_LOG_TRACE;

    /* Say first what was lost while the output was blocked. */
    if (lg->dropped) {
        char note[96];
        unsigned long long lost = lg->dropped;
        lg->dropped = 0;
        k = snprintf(note, sizeof(note), "%s(%llu log lines dropped: log output was blocked)\n",
                     lg->journal ? "<4>" : "", lost);
        put_line(lg, note, (size_t)k);
        if (lg->dropped) {
            lg->dropped = lost + 1; /* still blocked: this line is lost too */
            return;
        }
    }

    /* Timestamp in UTC with milliseconds (journald: the priority), level,
     * route, session. */
    if (lg->journal) {
        n = (size_t)snprintf(line, sizeof(line), "%s%-5s ", level_prio[level], level_tags[level]);
    } else {
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
        k = snprintf(line + n, sizeof(line) - n, ".%03ldZ %-5s ", ts.tv_nsec / 1000000L,
                     level_tags[level]);
        n += (size_t)k;
    }
    if (route && n < sizeof(line))
        n += (size_t)snprintf(line + n, sizeof(line) - n, "[%s] ", route);
    if (sid && n < sizeof(line))
        n += (size_t)snprintf(line + n, sizeof(line) - n, "[s%llu] ", (unsigned long long)sid);

    /* The message, cut to fit, and the newline. */
    if (n < sizeof(line) - 1) {
        va_start(ap, fmt);
        k = vsnprintf(line + n, sizeof(line) - 1 - n, fmt, ap);
        va_end(ap);
        n = k < 0 ? n : n + (size_t)k > sizeof(line) - 2 ? sizeof(line) - 2 : n + (size_t)k;
    } else {
        n = sizeof(line) - 2;
    }
    line[n++] = '\n';
    put_line(lg, line, n);
}

uint64_t sg_now_wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}
