/*
 * Configuration values: the parsers of config.h (durations, booleans,
 * addresses) and the typed store that checks one argument against a
 * directive and writes it into the configured object.
 *
 * INT      [-]digits                          int64_t
 * SIZE     digits [k|M|G] [B], powers of 1024  int64_t bytes
 * DURATION digits [ms|s|m|h], bare = seconds  int64_t milliseconds
 * BOOL     yes/no on/off true/false 1/0, any case
 * ENUM     one of d->choices (or d->choice_at), any case  int index
 * STRING   any text; PATH any non-empty text; ADDR as sg_conf_split_addr(),
 *          and its port not 0
 *
 * Every rejected value is one diagnostic at the value's position saying
 * what the directive expects and what it got.
 */
#include "config/internal.h"

#include "protocols/error.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MS_PER_S INT64_C(1000)
#define MS_PER_M INT64_C(60000)
#define MS_PER_H INT64_C(3600000)

const char *sg_conf__clip(const char *s, char *out, size_t cap)
{
    size_t n = 0;

    if (cap == 0)
        return out;
    for (; s[n] && n + 1 < cap; n++)
        out[n] = (unsigned char)s[n] < 0x20 || s[n] == 0x7f ? '?' : s[n];
    out[n] = '\0';
    if (s[n] && cap > 4)
        memcpy(out + cap - 4, "...", 4);
    return out;
}

/* Reads the leading digits of `s` into *v; returns how many.  *v is UINT64_MAX on overflow. */
static int read_digits(const char *s, uint64_t *v)
{
    int n = 0;

    *v = 0;
    for (; s[n] >= '0' && s[n] <= '9'; n++) {
        uint64_t d = (uint64_t)(s[n] - '0');
        *v = *v > (UINT64_MAX - d) / 10 ? UINT64_MAX : *v * 10 + d;
    }
    return n;
}

/* Multiplies a digit count by a unit into an int64_t; -ERANGE on overflow. */
static int scale(uint64_t v, int64_t unit, int64_t *out)
{
    if (v > (uint64_t)(INT64_MAX / unit))
        return -ERANGE;
    *out = (int64_t)v * unit;
    return 0;
}

static int parse_int(const char *s, int64_t *out)
{
    bool neg = s[0] == '-';
    uint64_t v;
    int n = read_digits(s + neg, &v);

    if (n == 0 || s[neg + n] != '\0')
        return -EINVAL;
    if (v > (uint64_t)INT64_MAX + neg)
        return -ERANGE;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

static int parse_size(const char *s, int64_t *bytes)
{
    uint64_t v;
    int n = read_digits(s, &v);
    int64_t unit = 1;

    if (n == 0)
        return -EINVAL;
    s += n;
    switch (*s) {
    case 'k':
    case 'K':
        unit = INT64_C(1) << 10, s++;
        break;
    case 'm':
    case 'M':
        unit = INT64_C(1) << 20, s++;
        break;
    case 'g':
    case 'G':
        unit = INT64_C(1) << 30, s++;
        break;
    default:
        break;
    }
    if (*s == 'B')
        s++;
    if (*s != '\0')
        return -EINVAL;
    return scale(v, unit, bytes);
}

int sg_conf_parse_duration(const char *s, int64_t *ms)
{
    static const struct {
        const char *suffix;
        int64_t unit;
    } units[] = {{"", MS_PER_S}, {"ms", 1}, {"s", MS_PER_S}, {"m", MS_PER_M}, {"h", MS_PER_H}};
    uint64_t v;
    int n;

    if (!s || !ms)
        return -EINVAL;
    n = read_digits(s, &v);
    if (n == 0)
        return -EINVAL;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(s + n, units[i].suffix) == 0)
            return scale(v, units[i].unit, ms);
    }
    return -EINVAL;
}

int sg_conf_parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"yes", "on", "true", "1"};
    static const char *const no[] = {"no", "off", "false", "0"};

    if (!s || !out)
        return -EINVAL;
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(s, yes[i]) == 0)
            return *out = true, 0;
        if (strcasecmp(s, no[i]) == 0)
            return *out = false, 0;
    }
    return -EINVAL;
}

/* A host name or IPv4 address: letters, digits, '.', '-', '_'; or "*". */
static bool valid_name(const char *h, size_t n)
{
    if (n == 1 && h[0] == '*')
        return true;
    for (size_t i = 0; i < n; i++) {
        if (!isalnum((unsigned char)h[i]) && !strchr(".-_", h[i]))
            return false;
    }
    return n > 0;
}

/* The inside of [...]: an IPv6 address (as inet_pton reads it), then an optional %zone. */
static bool valid_v6(const char *h, size_t n)
{
    char text[INET6_ADDRSTRLEN];
    struct in6_addr a6;
    size_t i = 0;

    for (; i < n && h[i] != '%'; i++) {
        if (!isxdigit((unsigned char)h[i]) && h[i] != ':' && h[i] != '.')
            return false;
    }
    if (i < n && (i + 1 == n || !valid_name(h + i + 1, n - i - 1)))
        return false;
    /* Only the characters were checked: "[:::::]" must not pass. */
    if (i >= sizeof(text))
        return false;
    memcpy(text, h, i);
    text[i] = '\0';
    return inet_pton(AF_INET6, text, &a6) == 1;
}

/* A decimal port, 0-65535. */
static int check_port(const char *p)
{
    uint64_t v;
    int n = read_digits(p, &v);

    if (n == 0 || p[n] != '\0')
        return -EINVAL;
    return v > 65535 ? -ERANGE : 0;
}

static int copy_part(const char *s, size_t n, char *out, size_t cap)
{
    if (!out || n >= cap)
        return -ENOSPC;
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

int sg_conf_split_addr(const char *s, char *host, size_t hostcap, char *port, size_t portcap)
{
    const char *h, *p;
    size_t hn;
    bool ok;

    if (!s)
        return -EINVAL;

    /* Find the host and the port. */
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':')
            return -EINVAL;
        h = s + 1;
        hn = (size_t)(close - h);
        p = close + 2;
        ok = valid_v6(h, hn);
    } else {
        const char *colon = strrchr(s, ':');
        if (!colon)
            return -EINVAL;
        h = s;
        hn = (size_t)(colon - s);
        p = colon + 1;
        ok = valid_name(h, hn);
    }
    if (!ok)
        return -EINVAL;

    /* Check the port, then write both. */
    int rc = check_port(p);
    if (rc < 0)
        return rc;
    rc = copy_part(h, hn, host, hostcap);
    if (rc == 0)
        rc = copy_part(p, strlen(p), port, portcap);
    return rc;
}

/* "5m", "90s", "250ms": the largest unit that divides `ms`. */
static const char *fmt_duration(int64_t ms, char *out, size_t cap)
{
    if (ms != 0 && ms % MS_PER_H == 0)
        snprintf(out, cap, "%" PRId64 "h", ms / MS_PER_H);
    else if (ms != 0 && ms % MS_PER_M == 0)
        snprintf(out, cap, "%" PRId64 "m", ms / MS_PER_M);
    else if (ms % MS_PER_S == 0)
        snprintf(out, cap, "%" PRId64 "s", ms / MS_PER_S);
    else
        snprintf(out, cap, "%" PRId64 "ms", ms);
    return out;
}

/* "64k", "1G", "1000": the largest power of 1024 that divides `bytes`. */
static const char *fmt_size(int64_t bytes, char *out, size_t cap)
{
    static const char units[] = "GMk";

    for (int i = 0; i < 3; i++) {
        int64_t unit = INT64_C(1) << (10 * (3 - i));
        if (bytes != 0 && bytes % unit == 0) {
            snprintf(out, cap, "%" PRId64 "%c", bytes / unit, units[i]);
            return out;
        }
    }
    snprintf(out, cap, "%" PRId64, bytes);
    return out;
}

static bool has_bounds(const struct sg_conf_directive *d)
{
    return d->min != 0 || d->max != 0;
}

static bool in_bounds(const struct sg_conf_directive *d, int64_t v)
{
    return !has_bounds(d) || (v >= d->min && v <= d->max);
}

/* Reports a bad value at the argument's position. */
#define BAD(fmt, ...)                                                                              \
    (sg_conf_diag_error(diag, file, arg->line, arg->col, "'%s' " fmt, d->name, __VA_ARGS__),       \
     SG_E_CONFIG)

static int store_int(const struct sg_conf_directive *d, int64_t *v, const struct sg_conf_arg *arg,
                     const char *file, struct sg_conf_diag *diag, const char *got)
{
    int64_t lo = has_bounds(d) ? d->min : INT64_MIN;
    int64_t hi = has_bounds(d) ? d->max : INT64_MAX;
    int rc = parse_int(arg->text, v);

    if (rc == -EINVAL && !has_bounds(d))
        return BAD("expects an integer, got '%s'", got);
    if (rc < 0 || !in_bounds(d, *v))
        return BAD("expects an integer between %" PRId64 " and %" PRId64 ", got '%s'", lo, hi, got);
    return 0;
}

static int store_size(const struct sg_conf_directive *d, int64_t *v, const struct sg_conf_arg *arg,
                      const char *file, struct sg_conf_diag *diag, const char *got)
{
    char lo[32], hi[32];
    int rc = parse_size(arg->text, v);

    if (rc == -EINVAL)
        return BAD("expects a size such as 4096, 64k or 1M, got '%s'", got);
    if (rc < 0 || !in_bounds(d, *v))
        return BAD("must be between %s and %s, got '%s'",
                   fmt_size(has_bounds(d) ? d->min : 0, lo, sizeof(lo)),
                   fmt_size(has_bounds(d) ? d->max : INT64_MAX, hi, sizeof(hi)), got);
    return 0;
}

static int store_duration(const struct sg_conf_directive *d, int64_t *v,
                          const struct sg_conf_arg *arg, const char *file,
                          struct sg_conf_diag *diag, const char *got)
{
    char lo[32], hi[32];
    int rc = sg_conf_parse_duration(arg->text, v);

    if (rc == -EINVAL)
        return BAD("expects a duration such as 60s, 500ms or 2m, got '%s'", got);
    if (rc < 0 || !in_bounds(d, *v))
        return BAD("must be between %s and %s, got '%s'",
                   fmt_duration(has_bounds(d) ? d->min : 0, lo, sizeof(lo)),
                   fmt_duration(has_bounds(d) ? d->max : INT64_MAX, hi, sizeof(hi)), got);
    return 0;
}

/* ENUM: the index of the choice matching `text`, or reports the list of choices. */
static int find_choice(const struct sg_conf_directive *d, const struct sg_conf_arg *arg,
                       const char *file, struct sg_conf_diag *diag, const char *got)
{
    char list[200] = "";
    size_t used = 0;

    for (int i = 0; i < 1000; i++) {
        const char *c = d->choices ? d->choices[i] : d->choice_at ? d->choice_at(i) : NULL;

        if (!c)
            break;
        if (strcasecmp(arg->text, c) == 0)
            return i;
        int n = snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", c);
        if (n > 0)
            used += (size_t)n < sizeof(list) - used ? (size_t)n : sizeof(list) - used - 1;
    }
    return BAD("expects one of %s, got '%s'", list, got);
}

/* ADDR: checks the syntax, with a hint for the usual mistakes. */
static int check_addr(const struct sg_conf_directive *d, const struct sg_conf_arg *arg,
                      const char *file, struct sg_conf_diag *diag, const char *got)
{
    char host[256], port[8], hint[128] = "";
    const char *s = arg->text;
    const char *last = strrchr(s, ':');
    int rc = sg_conf_split_addr(s, host, sizeof(host), port, sizeof(port));

    /* Port 0 is whatever port the kernel picks: only a listener can say which (ports_file). */
    if (rc == 0 && !d->port0 && strspn(port, "0") == strlen(port))
        return BAD("expects a port between 1 and 65535, got '%s' (port 0)", got);
    if (rc == 0)
        return 0;

    /* A bare IPv6 address: suggest the bracketed form when it parses. */
    if (rc == -EINVAL && s[0] != '[' && last && memchr(s, ':', (size_t)(last - s))) {
        struct in6_addr a6;
        size_t hn = (size_t)(last - s);
        if (hn < sizeof(host) && check_port(last + 1) == 0) {
            memcpy(host, s, hn);
            host[hn] = '\0';
        } else {
            host[0] = '\0';
        }
        if (host[0] && inet_pton(AF_INET6, host, &a6) == 1)
            snprintf(hint, sizeof(hint), "; did you mean '[%.64s]:%.16s'?", host, last + 1);
        else
            snprintf(hint, sizeof(hint), "; put an IPv6 address in brackets, as in [::1]:27960");
    } else if (rc == -ERANGE) {
        snprintf(hint, sizeof(hint), "; the port must be between 1 and 65535");
    } else if (rc == -ENOSPC) {
        snprintf(hint, sizeof(hint), "; the host name is too long");
    }
    return BAD("expects ADDR:PORT (e.g. 0.0.0.0:27960 or [::]:27960), got '%s'%s", got, hint);
}

/* Replaces the string at the slot, freeing the previous one. */
static int store_string(void *slot, const char *text, const char *file, int line, int col,
                        struct sg_conf_diag *diag)
{
    char *dup = strdup(text);
    char *old;

    if (!dup) {
        sg_conf_diag_error(diag, file, line, col, "out of memory");
        return -ENOMEM;
    }
    memcpy(&old, slot, sizeof(old));
    free(old);
    memcpy(slot, &dup, sizeof(dup));
    return 0;
}

int sg_conf__set_value(const struct sg_conf_directive *d, void *obj, const struct sg_conf_arg *arg,
                       const char *file, struct sg_conf_diag *diag)
{
    char *slot = obj ? (char *)obj + d->offset : NULL;
    char got[64];
    int64_t v = 0;
    bool b = false;
    int rc = 0;

    sg_conf__clip(arg->text, got, sizeof(got));
    switch (d->type) {
    case SG_CONF_INT:
    case SG_CONF_SIZE:
    case SG_CONF_DURATION:
        if (d->type == SG_CONF_INT)
            rc = store_int(d, &v, arg, file, diag, got);
        else if (d->type == SG_CONF_SIZE)
            rc = store_size(d, &v, arg, file, diag, got);
        else
            rc = store_duration(d, &v, arg, file, diag, got);
        if (rc == 0 && slot)
            memcpy(slot, &v, sizeof(v));
        return rc;
    case SG_CONF_BOOL:
        if (sg_conf_parse_bool(arg->text, &b) < 0)
            return BAD("expects yes or no (or on/off, true/false, 1/0), got '%s'", got);
        if (slot)
            memcpy(slot, &b, sizeof(b));
        return 0;
    case SG_CONF_ENUM: {
        int idx = find_choice(d, arg, file, diag, got);
        if (idx >= 0 && slot)
            memcpy(slot, &idx, sizeof(idx));
        return idx < 0 ? idx : 0;
    }
    case SG_CONF_ADDR:
        rc = check_addr(d, arg, file, diag, got);
        break;
    case SG_CONF_PATH:
        if (arg->text[0] == '\0')
            return BAD("expects a file path, got '%s'", got);
        break;
    case SG_CONF_STRING:
        break;
    case SG_CONF_CUSTOM:
    case SG_CONF_BLOCK:
    default:
        return BAD("cannot be set to a single value, got '%s'", got);
    }
    if (rc < 0 || !slot)
        return rc;
    rc = store_string(slot, arg->text, file, arg->line, arg->col, diag);
    if (rc == 0 && d->stored)
        d->stored(obj, d, arg);
    return rc;
}
