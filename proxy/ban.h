/*
 * Address lists for the door: bans (`ban`, `ban_file`, kicks from the HTTP
 * API) and the addresses remote administration may come from
 * (`admin_from`).
 *
 * A rule is an address with a prefix length (a CIDR range; a bare address
 * is the whole address).  IPv4 rules are kept as IPv4-mapped IPv6
 * (::ffff:a.b.c.d, prefix + 96), so an IPv4 client that reaches a
 * dual-stack listener as ::ffff:a.b.c.d matches the IPv4 rule.
 *
 * The text form, one rule (a `ban` directive's arguments, a line of a ban
 * file):
 *
 *     ADDR[/BITS] [until WHEN] [REASON ...]
 *
 * WHEN is a UTC time in ISO 8601: 2026-12-31, 2026-12-31T18:00Z or
 * 2026-12-31T18:00:30Z; from then on the rule no longer matches (no
 * reload needed).  REASON is the rest of the line (at most
 * SG_BAN_REASON_MAX - 1 bytes, printable ASCII).  In a ban file, blank
 * lines and lines starting with '#' are skipped, and " #" starts a
 * comment at the end of a line.
 *
 * A list is immutable once built and shared by reference (the config, each
 * worker's routes): read it from any thread.
 */
#ifndef SG_PROXY_BAN_H
#define SG_PROXY_BAN_H

#include "config/config.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define SG_BAN_REASON_MAX 64

struct sg_ban_rule {
    uint8_t addr[16];  /* IPv6 form, host bits cleared */
    uint8_t bits;      /* prefix length in the IPv6 form, 0-128 */
    int64_t until_ms;  /* wall clock (ms since the epoch) it ends at; 0: never */
    char reason[SG_BAN_REASON_MAX];
    const char *file;  /* where it was given (static or the list's), or NULL */
    int line;
};

struct sg_ban_list {
    _Atomic int refs;
    int count, cap;
    struct sg_ban_rule *rules;
    char **files; /* the ban files' names (rules' `file` point at them) */
    int nfiles;
};

/*
 * Parse one rule from `text` (NUL-terminated) into `out`; `allow_extra`
 * false refuses `until` and a reason (an `admin_from` entry).  Returns 0,
 * or -EINVAL with what is wrong in `why`.
 */
int sg_ban_rule_parse(const char *text, bool allow_extra, struct sg_ban_rule *out, char *why,
                      size_t whylen);

/* A new empty list (one reference), or NULL. */
struct sg_ban_list *sg_ban_list_create(void);
/* Add one rule (copied).  0 or -ENOMEM. */
int sg_ban_list_add(struct sg_ban_list *l, const struct sg_ban_rule *rule);
struct sg_ban_list *sg_ban_list_ref(struct sg_ban_list *l); /* accepts NULL */
void sg_ban_list_unref(struct sg_ban_list *l);              /* accepts NULL */
/* Same rules in the same order (NULL and empty are equal). */
bool sg_ban_list_equal(const struct sg_ban_list *a, const struct sg_ban_list *b);

/*
 * Read a ban file into `l`: every bad line is one diagnostic
 * "FILE:LINE:COL: error: ..." in `diag`.  Returns 0, SG_E_CONFIG after
 * reporting, or a negated errno (the file cannot be read, also reported).
 */
int sg_ban_file_load(struct sg_ban_list *l, const char *path, struct sg_conf_diag *diag);

/* The address's IPv6 form (IPv4 mapped); false for another family. */
bool sg_ban_addr_key(const struct sockaddr *sa, uint8_t key[16]);
/* Does `rule` cover `key`?  (Expiry is not looked at.) */
bool sg_ban_rule_covers(const struct sg_ban_rule *rule, const uint8_t key[16]);
/* The first rule of `l` covering `sa` and not expired at `now_ms`, or NULL. */
const struct sg_ban_rule *sg_ban_list_match(const struct sg_ban_list *l,
                                            const struct sockaddr *sa, int64_t now_ms);
/* "203.0.113.0/24" or "2001:db8::/32" (a whole address without /BITS). */
void sg_ban_rule_format(const struct sg_ban_rule *rule, char *buf, size_t cap);

#endif
