/*
 * Info strings (protocols/info.h): iteration and lookup as the games read
 * them, in-place edits that leave the bytes alone when nothing changes,
 * the writers' limits, and the real userinfo and serverinfo of the
 * QuakeWorld capture ($SG_TESTDATA).
 */
#include "protocols/info.h"

#include "protocols/error.h"
#include "tests/q3/pcap_udp.h"
#include "tests/unit.h"

#include <errno.h>

#define S(lit) lit, sizeof(lit) - 1

/* "k=v;k=v;" of every pair ("k" alone for a lone key), into out. */
static void pairs_of(const char *s, char *out, size_t cap)
{
    struct sg_info_iter it;
    struct sg_info_pair p;
    size_t n = 0;

    sg_info_iter_init(&it, s, strlen(s));
    out[0] = '\0';
    while (sg_info_next(&it, &p) > 0) {
        if (p.value)
            n += (size_t)snprintf(out + n, cap - n, "%.*s=%.*s;", (int)p.key_len, p.key,
                                  (int)p.value_len, p.value);
        else
            n += (size_t)snprintf(out + n, cap - n, "%.*s;", (int)p.key_len, p.key);
        CHECK(p.start < p.end && p.end <= strlen(s));
    }
}

static void expect_pairs(const char *s, const char *want)
{
    char got[256];

    pairs_of(s, got, sizeof(got));
    CHECKF(strcmp(got, want) == 0, "\"%s\": got \"%s\", want \"%s\"", s, got, want);
}

static void case_iterate(void)
{
    expect_pairs("", "");
    expect_pairs("\\", "");
    expect_pairs("\\name\\unnamed\\rate\\25000", "name=unnamed;rate=25000;");
    /* the leading backslash is optional */
    expect_pairs("name\\unnamed\\rate\\25000", "name=unnamed;rate=25000;");
    /* a trailing backslash ends nothing */
    expect_pairs("\\a\\b\\", "a=b;");
    /* odd count: a lone key at the end */
    expect_pairs("\\a\\b\\c", "a=b;c;");
    /* empty values and keys */
    expect_pairs("\\a\\\\b\\c", "a=;b=c;");
    expect_pairs("\\\\v", "=v;");
    expect_pairs("\\a\\", "a=;");
    /* high bytes and spaces are plain bytes */
    expect_pairs("\\name\\\xe2\xe5\xf3 x", "name=\xe2\xe5\xf3 x;");
}

static void case_get(void)
{
    static const char s[] = "\\a\\1\\b\\\\a\\2\\c";
    const char *v = NULL;
    size_t n = 99;

    CHECK(sg_info_get(S(s), S("a"), &v, &n) == 1 && n == 1 && v[0] == '1'); /* the first */
    CHECK(sg_info_get(S(s), S("b"), &v, &n) == 1 && n == 0);
    CHECK(sg_info_get(S(s), S("c"), &v, &n) == 0); /* a lone key is no pair */
    CHECK(sg_info_get(S(s), S("A"), &v, &n) == 0); /* case sensitive */
    CHECK(sg_info_get(S(s), S("1"), &v, &n) == 0); /* values are not keys */
    CHECK(sg_info_get(S(""), S("a"), &v, &n) == 0);
    CHECK(sg_info_get(S("x\\y"), S("x"), &v, &n) == 1 && n == 1 && v[0] == 'y');
}

/* Apply sg_info_set to `in` (room `cap`), expect `ret` and `want`. */
static void expect_set(const char *in, size_t cap, const char *key, const char *value, int ret,
                       const char *want)
{
    char buf[600];
    size_t len = strlen(in);
    int r;

    CHECK(len < sizeof(buf));
    memset(buf, 0x5a, sizeof(buf));
    memcpy(buf, in, len + 1);
    r = sg_info_set(buf, &len, cap, key, strlen(key), value, strlen(value));
    CHECKF(r == ret, "set %s=%s in \"%s\": %d, want %d", key, value, in, r, ret);
    CHECKF(len == strlen(want) && memcmp(buf, want, len) == 0, "set %s=%s in \"%s\": \"%.*s\"", key,
           value, in, (int)len, buf);
    if (r == 1)
        CHECK(buf[len] == '\0');
    /* nothing written past the limit */
    for (size_t i = cap > strlen(in) + 1 ? cap : strlen(in) + 1; i < sizeof(buf); i++)
        CHECK(buf[i] == 0x5a);
}

static void case_set(void)
{
    /* the same value: not a byte changes */
    expect_set("\\name\\a\\rate\\1", 64, "name", "a", 0, "\\name\\a\\rate\\1");
    expect_set("name\\a", 64, "name", "a", 0, "name\\a");
    /* in place, keeping the order */
    expect_set("\\name\\a\\rate\\1", 64, "name", "bob", 1, "\\name\\bob\\rate\\1");
    expect_set("\\name\\abc\\rate\\1", 64, "name", "x", 1, "\\name\\x\\rate\\1");
    expect_set("name\\a\\rate\\1", 64, "name", "z", 1, "name\\z\\rate\\1");
    /* duplicates go */
    expect_set("\\a\\1\\b\\2\\a\\3", 64, "a", "1", 1, "\\a\\1\\b\\2");
    expect_set("\\a\\1\\a\\1", 64, "a", "1", 1, "\\a\\1");
    /* appended */
    expect_set("", 64, "a", "1", 1, "\\a\\1");
    expect_set("\\", 64, "a", "1", 1, "\\a\\1");
    expect_set("\\b\\2", 64, "a", "1", 1, "\\b\\2\\a\\1");
    expect_set("\\b\\2\\", 64, "a", "1", 1, "\\b\\2\\a\\1");
    expect_set("\\b\\", 64, "a", "1", 1, "\\b\\\\a\\1");
    /* after a lone key it would pair with it */
    expect_set("\\b\\2\\c", 64, "a", "1", SG_E_MALFORMED, "\\b\\2\\c");
    /* ... but a key that is there can still change */
    expect_set("\\a\\0\\c", 64, "a", "1", 1, "\\a\\1\\c");
    /* an empty value removes */
    expect_set("\\a\\1\\b\\2", 64, "a", "", 1, "\\b\\2");
    expect_set("\\a\\1\\b\\2", 64, "x", "", 0, "\\a\\1\\b\\2");
    /* what the games' writers refuse */
    expect_set("\\a\\1", 64, "b", "x\\y", -EINVAL, "\\a\\1");
    expect_set("\\a\\1", 64, "b", "say \"hi\"", -EINVAL, "\\a\\1");
    expect_set("\\a\\1", 64, "b", "x;quit", -EINVAL, "\\a\\1");
    expect_set("\\a\\1", 64, "", "x", -EINVAL, "\\a\\1");
    expect_set("\\a\\1", 64, "b\\", "x", -EINVAL, "\\a\\1");
    {
        char big[SG_INFO_MAX_KEY + 1];

        memset(big, 'k', sizeof(big) - 1);
        big[SG_INFO_MAX_KEY] = '\0';
        expect_set("\\a\\1", 200, big, "x", -EINVAL, "\\a\\1");
        expect_set("\\a\\1", 200, "b", big, -EINVAL, "\\a\\1");
        big[SG_INFO_MAX_KEY - 1] = '\0'; /* 63 bytes: allowed */
        CHECK(sg_info_valid(big, strlen(big)));
    }
    /* the limit counts the NUL: "\a\1\b\2" is 8 bytes, needs 9 */
    expect_set("\\a\\1", 9, "b", "2", 1, "\\a\\1\\b\\2");
    expect_set("\\a\\1", 8, "b", "2", SG_E_TOOBIG, "\\a\\1");
    expect_set("\\a\\1", 5, "a", "22", SG_E_TOOBIG, "\\a\\1");
    expect_set("\\a\\1", 6, "a", "22", 1, "\\a\\22");
}

static void case_remove(void)
{
    char buf[64];
    size_t len;

    strcpy(buf, "\\a\\1\\b\\2\\a\\3\\c");
    len = strlen(buf);
    CHECK(sg_info_remove(buf, &len, S("a")) == 2);
    CHECK(len == 6 && memcmp(buf, "\\b\\2\\c", 6) == 0);
    CHECK(sg_info_remove(buf, &len, S("c")) == 0); /* a lone key is no pair */
    CHECK(sg_info_remove(buf, &len, S("x")) == 0 && len == 6);
    strcpy(buf, "a\\1\\b\\2");
    len = strlen(buf);
    CHECK(sg_info_remove(buf, &len, S("a")) == 1);
    CHECK(len == 4 && memcmp(buf, "\\b\\2", 4) == 0);
    CHECK(sg_info_remove(buf, &len, S("b")) == 1 && len == 0);
}

/* Random edits keep the string readable and agree with a plain model. */
static void case_random(void)
{
    static const char *const keys[] = {"name", "rate", "*z_ext", "team", "skin", "b"};
    static const char *const values[] = {"", "1", "peers", "25000", "\xe2\xe5", "red team"};
    uint64_t rng = 0x5eed0004;
    char buf[SG_INFO_QW_USER];
    size_t len = 0;
    const char *model[6] = {0};

    for (int step = 0; step < 20000; step++) {
        int k = (int)(unit_rng(&rng) % 6), v = (int)(unit_rng(&rng) % 6);
        size_t before = len;
        int r = sg_info_set(buf, &len, sizeof(buf), keys[k], strlen(keys[k]), values[v],
                            strlen(values[v]));

        CHECK(r == 0 || r == 1);
        if (r == 0)
            CHECK(len == before);
        model[k] = v ? values[v] : NULL;
        for (int i = 0; i < 6; i++) {
            const char *got;
            size_t n;
            int has = sg_info_get(buf, len, keys[i], strlen(keys[i]), &got, &n);

            CHECKF(has == (model[i] != NULL), "step %d key %s", step, keys[i]);
            if (has && model[i])
                CHECK(n == strlen(model[i]) && memcmp(got, model[i], n) == 0);
        }
        CHECK(len < sizeof(buf));
        if (failures)
            break;
    }
}

/* The capture: ezQuake's connect userinfo and mvdsv's status serverinfo. */
struct qw_info {
    int connects, statuses;
};

static int is_oob(const char *d)
{
    return memcmp(d, "\xff\xff\xff\xff", 4) == 0;
}

static int qw_datagram(const struct pcap_udp *u, void *arg)
{
    struct qw_info *found = arg;
    const char *d = (const char *)u->data, *v;
    size_t n;

    if (u->len > 12 && is_oob(d) && memcmp(d + 4, "connect ", 8) == 0) {
        const char *q = memchr(d, '"', u->len), *q2;
        char buf[SG_INFO_QW_USER];
        size_t len;

        CHECK(q != NULL);
        if (!q)
            return 0;
        q2 = memchr(q + 1, '"', u->len - (size_t)(q + 1 - d));
        CHECK(q2 != NULL);
        if (!q2)
            return 0;
        len = (size_t)(q2 - q - 1);
        CHECK(len < sizeof(buf));
        memcpy(buf, q + 1, len);
        CHECK(sg_info_get(buf, len, S("name"), &v, &n) == 1 && n == 5 && !memcmp(v, "peers", 5));
        CHECK(sg_info_get(buf, len, S("*z_ext"), &v, &n) == 1 && n == 3 && !memcmp(v, "511", 3));
        /* the same value: the exact bytes stay */
        CHECK(sg_info_set(buf, &len, sizeof(buf), S("rate"), S("25000")) == 0);
        CHECK(len == (size_t)(q2 - q - 1) && memcmp(buf, q + 1, len) == 0);
        /* a new name, then the old one: the exact bytes again */
        CHECK(sg_info_set(buf, &len, sizeof(buf), S("name"), S("proxy")) == 1);
        CHECK(sg_info_set(buf, &len, sizeof(buf), S("name"), S("peers")) == 1);
        CHECK(len == (size_t)(q2 - q - 1) && memcmp(buf, q + 1, len) == 0);
        found->connects++;
    } else if (u->sport == 27500 && u->len > 5 && is_oob(d) && d[4] == 'n') {
        /* serverinfo up to the first newline */
        const char *s = d + 5, *nl = memchr(s, '\n', u->len - 5);

        CHECK(nl != NULL);
        if (!nl)
            return 0;
        CHECK(sg_info_get(s, (size_t)(nl - s), S("map"), &v, &n) == 1 && n == 3 &&
              !memcmp(v, "box", 3));
        CHECK(sg_info_get(s, (size_t)(nl - s), S("*version"), &v, &n) == 1 &&
              n == strlen("MVDSV 0.35") && !memcmp(v, "MVDSV 0.35", n));
        found->statuses++;
    }
    return 0;
}

static void case_qw_capture(void)
{
    const char *root = getenv("SG_TESTDATA");
    char path[1024];
    struct qw_info found = {0, 0};

    snprintf(path, sizeof(path), "%s/qw/sessions/ezquake_mvdsv/capture.pcap",
             root ? root : "../shared/testdata");
    CHECK(pcap_udp_foreach(path, qw_datagram, &found) == 0);
    CHECKF(found.connects >= 1 && found.statuses >= 1, "%d connects, %d status replies",
           found.connects, found.statuses);
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"iterate", case_iterate}, {"get", case_get},       {"set", case_set},
        {"remove", case_remove},   {"random", case_random}, {"qw_capture", case_qw_capture},
    };
    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
