/*
 * What every C unit test of slipgate shares: the checks and the case
 * runner.  One executable per unit, one meson test() per case; the case
 * is the first argument (STYLE.md "Build and tests").
 *
 *     static void case_roundtrip(void) { CHECK(x == 1); CHECKF(n > 2, "n is %d", n); }
 *     int main(int argc, char **argv)
 *     {
 *         static const struct unit_case cases[] = {{"roundtrip", case_roundtrip}};
 *         return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
 *     }
 *
 * A failed check prints file, line and the condition and counts in
 * `failures`; the case still runs to its end.  Include this header in one
 * file of a test executable only.
 */
#ifndef SG_TESTS_UNIT_H
#define SG_TESTS_UNIT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures; /* checks failed so far */

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* The same, with a printf-style explanation. */
#define CHECKF(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* Two integers that must be equal: both are printed when they are not. */
#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_) {                                                                            \
            fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", __FILE__, __LINE__, #a,    \
                    a_, #b, b_);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* A repeatable generator (xorshift64) over the caller's state. */
static inline uint32_t unit_rng(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return (uint32_t)(*state >> 16);
}

/* A heap copy of exactly `len` bytes, so ASan sees any access past it; never NULL. */
static inline uint8_t *unit_exact_copy(const uint8_t *p, size_t len)
{
    uint8_t *q = malloc(len ? len : 1);

    if (!q)
        abort();
    if (len)
        memcpy(q, p, len);
    return q;
}

/* The whole file at `path`, NUL-terminated (not counted in *len), or NULL
 * when it cannot be read; the caller frees it. */
static inline uint8_t *unit_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long n;

    *len = 0;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n + 1);
        if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
            buf[n] = 0;
            *len = (size_t)n;
        } else {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

struct unit_case {
    const char *name;
    void (*fn)(void);
};

#define UNIT_COUNT(cases) (sizeof(cases) / sizeof((cases)[0]))

/*
 * Run the case argv[1] names, after `setup` and before `teardown` (either
 * may be NULL).  Returns the exit status: 0 passed, 1 a check failed, 2 no
 * such case (or none named).
 */
static inline int unit_main(int argc, char **argv, const struct unit_case *cases, size_t n,
                            void (*setup)(void), void (*teardown)(void))
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s CASE\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(argv[1], cases[i].name) != 0)
            continue;
        if (setup)
            setup();
        cases[i].fn();
        if (teardown)
            teardown();
        if (failures)
            fprintf(stderr, "%s: %d check(s) failed\n", argv[1], failures);
        return failures ? 1 : 0;
    }
    fprintf(stderr, "unknown case '%s'\n", argv[1]);
    return 2;
}

#endif
