/* Info strings `\key\value...` (info.h). */
#include "protocols/info.h"

#include <errno.h>
#include <string.h>

#include "protocols/error.h"

void sg_info_iter_init(struct sg_info_iter *it, const char *s, size_t len)
{
    it->s = s;
    it->len = len;
    it->pos = 0;
}

int sg_info_next(struct sg_info_iter *it, struct sg_info_pair *pair)
{
    const char *s = it->s;
    size_t len = it->len, i = it->pos, key;

    if (i >= len)
        return 0;
    pair->start = i;

    /* one backslash before the key (optional only for the first pair) */
    if (s[i] == '\\')
        i++;
    key = i;
    while (i < len && s[i] != '\\')
        i++;
    pair->key = s + key;
    pair->key_len = i - key;
    if (i >= len) {
        /* no separator after the key: a lone key, or nothing at all */
        it->pos = len;
        if (pair->key_len == 0)
            return 0;
        pair->value = NULL;
        pair->value_len = 0;
        pair->end = len;
        return 1;
    }

    /* the separator, then the value up to the next backslash */
    i++;
    pair->value = s + i;
    while (i < len && s[i] != '\\')
        i++;
    pair->value_len = (size_t)(s + i - pair->value);
    pair->end = i;
    it->pos = i;
    return 1;
}

static int key_is(const struct sg_info_pair *p, const char *key, size_t key_len)
{
    return p->value && p->key_len == key_len && (key_len == 0 || memcmp(p->key, key, key_len) == 0);
}

int sg_info_get(const char *s, size_t len, const char *key, size_t key_len, const char **value,
                size_t *value_len)
{
    struct sg_info_iter it;
    struct sg_info_pair p;

    sg_info_iter_init(&it, s, len);
    while (sg_info_next(&it, &p) > 0) {
        if (key_is(&p, key, key_len)) {
            *value = p.value;
            *value_len = p.value_len;
            return 1;
        }
    }
    return 0;
}

int sg_info_valid(const char *text, size_t n)
{
    if (n >= SG_INFO_MAX_KEY)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = text[i];

        if (c == '\\' || c == '"' || c == ';' || c == '\0')
            return 0;
    }
    return 1;
}

/* Cut bytes [from, to) out of s. */
static void cut(char *s, size_t *len, size_t from, size_t to)
{
    memmove(s + from, s + to, *len - to);
    *len -= to - from;
}

/* Cut every pair of `key` from offset `from` on; how many were cut. */
static int cut_key_from(char *s, size_t *len, const char *key, size_t key_len, size_t from)
{
    struct sg_info_iter it;
    struct sg_info_pair p;
    int removed = 0;

    sg_info_iter_init(&it, s, *len);
    it.pos = from;
    while (sg_info_next(&it, &p) > 0) {
        if (!key_is(&p, key, key_len))
            continue;
        /* A first pair written without its backslash: keep the
         * following pair's backslash, which then starts the string. */
        cut(s, len, p.start, p.end);
        it.len = *len;
        it.pos = p.start;
        removed++;
    }
    return removed;
}

int sg_info_remove(char *s, size_t *len, const char *key, size_t key_len)
{
    int removed = cut_key_from(s, len, key, key_len, 0);

    if (removed)
        s[*len] = '\0'; /* within the old bytes */
    return removed;
}

int sg_info_set(char *s, size_t *len, size_t cap, const char *key, size_t key_len,
                const char *value, size_t value_len)
{
    struct sg_info_iter it;
    struct sg_info_pair p, first = {0};
    size_t new_len, dup_bytes = 0, last_end = 0;
    int found = 0, dups = 0, lone = 0;

    if (key_len == 0 || !sg_info_valid(key, key_len) || !sg_info_valid(value, value_len))
        return -EINVAL;
    if (value_len == 0)
        return sg_info_remove(s, len, key, key_len) > 0;

    /* where the key is, and how the string ends */
    sg_info_iter_init(&it, s, *len);
    while (sg_info_next(&it, &p) > 0) {
        if (!p.value) {
            lone = 1;
            continue;
        }
        last_end = p.end;
        if (!key_is(&p, key, key_len))
            continue;
        if (!found) {
            first = p;
            found = 1;
        } else {
            dups++;
            dup_bytes += p.end - p.start;
        }
    }

    /* the same value already, once: nothing to do */
    if (found && !dups && first.value_len == value_len &&
        memcmp(first.value, value, value_len) == 0)
        return 0;

    if (found) {
        new_len = *len - dup_bytes - first.value_len + value_len;
    } else {
        /* appending after a lone key would pair it with the new key */
        if (lone)
            return SG_E_MALFORMED;
        new_len = *len + (last_end == *len) + key_len + 1 + value_len;
    }
    if (new_len >= cap)
        return SG_E_TOOBIG;

    if (found) {
        size_t vstart = (size_t)(first.value - s), vend = vstart + first.value_len;

        /* later duplicates go first (they lie after the first pair) */
        if (dups)
            cut_key_from(s, len, key, key_len, first.end);
        memmove(s + vstart + value_len, s + vend, *len - vend);
        memcpy(s + vstart, value, value_len);
        *len = *len - first.value_len + value_len;
    } else {
        char *o = s + *len;

        /* a trailing backslash already separates */
        if (last_end == *len)
            *o++ = '\\';
        memcpy(o, key, key_len);
        o += key_len;
        *o++ = '\\';
        memcpy(o, value, value_len);
        *len = new_len;
    }
    s[*len] = '\0';
    return 1;
}
