/*
 * Address lists for the door (ban.h): parsing a rule, ban files, matching.
 */
#include "proxy/ban.h"

#include "protocols/error.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- one rule ---- */

/* Skip blanks; the next word's end. */
static const char *word_end(const char *p)
{
    while (*p && !isspace((unsigned char)*p))
        p++;
    return p;
}

static const char *skip_blanks(const char *p)
{
    while (*p && isspace((unsigned char)*p))
        p++;
    return p;
}

/* ADDR[/BITS] (the word [w, e)) into the rule's address and prefix. */
static int parse_cidr(const char *w, const char *e, struct sg_ban_rule *out, char *why,
                      size_t whylen)
{
    char buf[64];
    const char *slash;
    size_t n = (size_t)(e - w);
    long bits = -1, max;
    struct in_addr a4;
    char *end;

    if (n >= sizeof(buf)) {
        snprintf(why, whylen, "'%.40s...' is not an address", w);
        return -EINVAL;
    }
    memcpy(buf, w, n);
    buf[n] = '\0';
    slash = strchr(buf, '/');
    if (slash) {
        errno = 0;
        bits = strtol(slash + 1, &end, 10);
        if (errno || end == slash + 1 || *end || bits < 0) {
            snprintf(why, whylen, "'%s': the prefix length after '/' is not a number", buf);
            return -EINVAL;
        }
        buf[slash - buf] = '\0';
    }
    memset(out->addr, 0, sizeof(out->addr));
    if (inet_pton(AF_INET, buf, &a4) == 1) {
        out->addr[10] = out->addr[11] = 0xff;
        memcpy(out->addr + 12, &a4, 4);
        max = 32;
    } else if (inet_pton(AF_INET6, buf, out->addr) == 1) {
        max = 128;
    } else {
        snprintf(why, whylen, "'%s' is not an IPv4 or IPv6 address", buf);
        return -EINVAL;
    }
    if (bits > max) {
        snprintf(why, whylen, "'%s/%ld': an %s prefix is 0 to %ld bits", buf, bits,
                 max == 32 ? "IPv4" : "IPv6", max);
        return -EINVAL;
    }
    out->bits = (uint8_t)((bits < 0 ? max : bits) + (max == 32 ? 96 : 0));
    /* Host bits beyond the prefix are cleared: 203.0.113.7/24 is 203.0.113.0/24. */
    for (int i = 0; i < 16; i++) {
        int keep = (int)out->bits - 8 * i;
        if (keep <= 0)
            out->addr[i] = 0;
        else if (keep < 8)
            out->addr[i] &= (uint8_t)(0xff << (8 - keep));
    }
    return 0;
}

/* WHEN: 2026-12-31, 2026-12-31T18:00Z, 2026-12-31T18:00:30Z (UTC). */
static int parse_when(const char *w, const char *e, int64_t *ms, char *why, size_t whylen)
{
    char buf[32];
    size_t n = (size_t)(e - w);
    int y, mo, d, h = 0, mi = 0, s = 0, used = 0;
    struct tm tm = {0};
    time_t t;

    if (n == 0 || n >= sizeof(buf))
        goto bad;
    memcpy(buf, w, n);
    buf[n] = '\0';
    if (sscanf(buf, "%4d-%2d-%2d%n", &y, &mo, &d, &used) != 3 || used != 10)
        goto bad;
    if (buf[10] != '\0') {
        int u2 = 0, u3 = 0;
        if (sscanf(buf + 10, "T%2d:%2d%n", &h, &mi, &u2) != 2 || u2 != 6)
            goto bad;
        if (buf[16] == ':' && (sscanf(buf + 16, ":%2d%n", &s, &u3) != 1 || u3 != 3))
            goto bad;
        if (strcmp(buf + 16 + u3, "Z") != 0)
            goto bad;
    }
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 59)
        goto bad;
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = s;
    t = timegm(&tm);
    if (t == (time_t)-1 || tm.tm_mday != d) { /* 2026-02-30 */
        goto bad;
    }
    *ms = (int64_t)t * 1000;
    return 0;
bad:
    snprintf(why, whylen,
             "'until %.*s': the time is UTC in ISO 8601, as 2026-12-31, 2026-12-31T18:00Z or "
             "2026-12-31T18:00:30Z",
             (int)(n > 40 ? 40 : n), w);
    return -EINVAL;
}

int sg_ban_rule_parse(const char *text, bool allow_extra, struct sg_ban_rule *out, char *why,
                      size_t whylen)
{
    const char *p = skip_blanks(text), *e;
    size_t n;
    int err;

    memset(out, 0, sizeof(*out));
    if (!*p) {
        snprintf(why, whylen, "no address (ADDR[/BITS]%s)",
                 allow_extra ? " [until WHEN] [REASON]" : "");
        return -EINVAL;
    }
    e = word_end(p);
    if ((err = parse_cidr(p, e, out, why, whylen)) < 0)
        return err;
    p = skip_blanks(e);
    if (*p && !allow_extra) {
        snprintf(why, whylen, "'%.40s': one ADDR[/BITS] per entry", p);
        return -EINVAL;
    }
    e = word_end(p);
    if ((size_t)(e - p) == 5 && memcmp(p, "until", 5) == 0) {
        p = skip_blanks(e);
        e = word_end(p);
        if ((err = parse_when(p, e, &out->until_ms, why, whylen)) < 0)
            return err;
        p = skip_blanks(e);
    }
    /* The reason: the rest, trailing blanks cut. */
    n = strlen(p);
    while (n && isspace((unsigned char)p[n - 1]))
        n--;
    if (n >= SG_BAN_REASON_MAX) {
        snprintf(why, whylen, "the reason is %zu bytes; at most %d", n, SG_BAN_REASON_MAX - 1);
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)p[i] < 0x20 || (unsigned char)p[i] > 0x7e) {
            snprintf(why, whylen, "the reason holds byte 0x%02x; printable ASCII only",
                     (unsigned char)p[i]);
            return -EINVAL;
        }
    }
    memcpy(out->reason, p, n);
    out->reason[n] = '\0';
    return 0;
}

/* ---- lists ---- */

struct sg_ban_list *sg_ban_list_create(void)
{
    struct sg_ban_list *l = calloc(1, sizeof(*l));

    if (l)
        atomic_init(&l->refs, 1);
    return l;
}

int sg_ban_list_add(struct sg_ban_list *l, const struct sg_ban_rule *rule)
{
    if (l->count == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        struct sg_ban_rule *r = realloc(l->rules, (size_t)cap * sizeof(*r));
        if (!r)
            return -ENOMEM;
        l->rules = r;
        l->cap = cap;
    }
    l->rules[l->count++] = *rule;
    return 0;
}

struct sg_ban_list *sg_ban_list_ref(struct sg_ban_list *l)
{
    if (l)
        atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
    return l;
}

void sg_ban_list_unref(struct sg_ban_list *l)
{
    if (!l || atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) != 1)
        return;
    free(l->rules);
    for (int i = 0; i < l->nfiles; i++)
        free(l->files[i]);
    free(l->files);
    free(l);
}

bool sg_ban_list_equal(const struct sg_ban_list *a, const struct sg_ban_list *b)
{
    int na = a ? a->count : 0, nb = b ? b->count : 0;

    if (na != nb)
        return false;
    for (int i = 0; i < na; i++) {
        const struct sg_ban_rule *x = &a->rules[i], *y = &b->rules[i];
        if (memcmp(x->addr, y->addr, 16) || x->bits != y->bits || x->until_ms != y->until_ms ||
            strcmp(x->reason, y->reason))
            return false;
    }
    return true;
}

/* Keep `path` in the list, for the rules' `file`. */
static const char *keep_name(struct sg_ban_list *l, const char *path)
{
    char **f = realloc(l->files, (size_t)(l->nfiles + 1) * sizeof(*f));

    if (!f)
        return NULL;
    l->files = f;
    if (!(f[l->nfiles] = strdup(path)))
        return NULL;
    return f[l->nfiles++];
}

int sg_ban_file_load(struct sg_ban_list *l, const char *path, struct sg_conf_diag *diag)
{
    FILE *f = fopen(path, "r");
    char line[1024], why[200];
    const char *name;
    int lineno = 0, rc = 0, err;

    if (!f) {
        err = -errno;
        sg_conf_diag_error(diag, path, 0, 0, "cannot open ban file: %s", strerror(-err));
        return err;
    }
    if (!(name = keep_name(l, path))) {
        fclose(f);
        return -ENOMEM;
    }
    while (fgets(line, sizeof(line), f)) {
        struct sg_ban_rule rule;
        size_t n = strlen(line);
        char *p, *hash;

        lineno++;
        if (n == sizeof(line) - 1 && line[n - 1] != '\n') {
            int c;
            while ((c = fgetc(f)) != EOF && c != '\n')
                ;
            sg_conf_diag_error(diag, path, lineno, 0, "line longer than %zu bytes",
                               sizeof(line) - 2);
            rc = SG_E_CONFIG;
            continue;
        }
        /* A comment: the whole line, or from " #" on. */
        p = line + (skip_blanks(line) - line);
        if (*p == '#' || *p == '\0')
            continue;
        for (hash = p; (hash = strchr(hash, '#')) != NULL; hash++)
            if (isspace((unsigned char)hash[-1])) {
                *hash = '\0';
                break;
            }
        if (sg_ban_rule_parse(p, true, &rule, why, sizeof(why)) < 0) {
            sg_conf_diag_error(diag, path, lineno, (int)(p - line) + 1, "%s", why);
            rc = SG_E_CONFIG;
            continue;
        }
        rule.file = name;
        rule.line = lineno;
        if (sg_ban_list_add(l, &rule) < 0) {
            fclose(f);
            return -ENOMEM;
        }
    }
    if (ferror(f)) {
        sg_conf_diag_error(diag, path, 0, 0, "cannot read ban file: %s", strerror(errno));
        rc = SG_E_CONFIG;
    }
    fclose(f);
    return rc;
}

/* ---- matching ---- */

bool sg_ban_addr_key(const struct sockaddr *sa, uint8_t key[16])
{
    if (sa->sa_family == AF_INET) {
        memset(key, 0, 10);
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return true;
    }
    if (sa->sa_family == AF_INET6) {
        memcpy(key, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return true;
    }
    return false;
}

bool sg_ban_rule_covers(const struct sg_ban_rule *rule, const uint8_t key[16])
{
    int full = rule->bits / 8, rest = rule->bits % 8;

    if (memcmp(rule->addr, key, (size_t)full) != 0)
        return false;
    return rest == 0 || ((key[full] ^ rule->addr[full]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

const struct sg_ban_rule *sg_ban_list_match(const struct sg_ban_list *l,
                                            const struct sockaddr *sa, int64_t now_ms)
{
    uint8_t key[16];

    if (!l || l->count == 0 || !sg_ban_addr_key(sa, key))
        return NULL;
    for (int i = 0; i < l->count; i++) {
        const struct sg_ban_rule *r = &l->rules[i];
        if ((r->until_ms == 0 || now_ms < r->until_ms) && sg_ban_rule_covers(r, key))
            return r;
    }
    return NULL;
}

void sg_ban_rule_format(const struct sg_ban_rule *rule, char *buf, size_t cap)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    char a[INET6_ADDRSTRLEN];
    bool v4 = rule->bits >= 96 && memcmp(rule->addr, mapped, 12) == 0;
    int bits = v4 ? rule->bits - 96 : rule->bits;

    inet_ntop(v4 ? AF_INET : AF_INET6, v4 ? rule->addr + 12 : rule->addr, a, sizeof(a));
    if (bits == (v4 ? 32 : 128))
        snprintf(buf, cap, "%s", a);
    else
        snprintf(buf, cap, "%s/%d", a, bits);
}
