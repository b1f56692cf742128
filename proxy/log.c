/* Timestamped, levelled log lines; see log.h. */
#include "proxy/log.h"

#include <stdarg.h>
#include <time.h>

const char *const sg_log_level_names[] = {"error", "warn", "info", "debug", "trace", NULL};
static const char level_tags[][6] = {"error", "warn", "info", "debug", "trace"};

void sg_log(const struct sg_logger *lg, int level, const char *route, uint64_t sid,
            const char *fmt, ...)
{
    FILE *out = lg->out ? lg->out : stderr;
    struct timespec ts;
    struct tm tm;
    char stamp[40];
    va_list ap;

    if (!sg_log_enabled(lg, level))
        return;

    /* Timestamp in UTC with milliseconds. */
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);

    /* Prefix, then the message, written as one line. */
    flockfile(out);
    if (level < SG_LOG_ERROR)
        level = SG_LOG_ERROR;
    if (level > SG_LOG_TRACE)
        level = SG_LOG_TRACE;
    fprintf(out, "%s.%03ldZ %-5s ", stamp, ts.tv_nsec / 1000000L, level_tags[level]);
    if (route)
        fprintf(out, "[%s] ", route);
    if (sid)
        fprintf(out, "[s%llu] ", (unsigned long long)sid);
    va_start(ap, fmt);
    vfprintf(out, fmt, ap);
    va_end(ap);
    fputc('\n', out);
    funlockfile(out);
    fflush(out);
}
