/*
 * Logging: one line per event on a stream (stderr by default), with a UTC
 * timestamp, the level, the route name and the session id when there is
 * one:  2026-11-22T03:50:07.123Z info  [default] [s12] session start ...
 * The logger is caller-owned (one per process, hung off the app); writing
 * never blocks the loop (log.c).
 *
 * When the stream is journald's (systemd sets JOURNAL_STREAM to the
 * device:inode of the stream it connected, and the descriptor is that one),
 * each line starts with its syslog priority instead of the timestamp, which
 * the journal keeps itself:  <6>info  [default] [s12] session start ...
 * (error <3>, warn <4>, info <6>, debug and trace <7>), so that
 * `journalctl -p err` finds the errors.
 */
#ifndef SG_PROXY_LOG_H
#define SG_PROXY_LOG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum sg_log_level {
    SG_LOG_ERROR,
    SG_LOG_WARN,
    SG_LOG_INFO,
    SG_LOG_DEBUG,
    SG_LOG_TRACE,
};

struct sg_logger {
    int level;                  /* messages above this level are skipped */
    int fd;                     /* borrowed; where lines go */
    int restore_flags;          /* fd flags to put back at finish, or -1 */
    unsigned long long dropped; /* lines lost to a blocked output, not yet reported */
    bool journal;               /* fd is journald's stream: <N> prefixes, no timestamps */
};

/* Whether `fd` is the stream JOURNAL_STREAM names (its "DEVICE:INODE"). */
bool sg_log_is_journal(int fd);

/* Log to `fd` from now on; makes a pipe/socket/terminal non-blocking. */
void sg_log_init(struct sg_logger *lg, int fd, int level);
/* Put the descriptor's flags back.  Accepts a zeroed logger. */
void sg_log_finish(struct sg_logger *lg);

/* The names used in the config file and in log lines ("error".."trace"). */
extern const char *const sg_log_level_names[];

static inline int sg_log_enabled(const struct sg_logger *lg, int level)
{
    return level <= lg->level;
}

/* `route` may be NULL, `sid` 0 for no session. */
void sg_log(struct sg_logger *lg, int level, const char *route, uint64_t sid, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define sg_log_at(lg, lvl, route, sid, ...)                                                        \
    do {                                                                                           \
        if (sg_log_enabled((lg), (lvl)))                                                           \
            sg_log((lg), (lvl), (route), (sid), __VA_ARGS__);                                      \
    } while (0)

/* The wall clock, ms since the epoch. */
uint64_t sg_now_wall_ms(void);

#endif
