/*
 * Helpers shared by the Quake 3 message-layer tests: test data lookup
 * (SG_TESTDATA, a missing file fails the test) and whole-demo loading.
 */
#ifndef SG_TESTS_Q3_UTIL_H
#define SG_TESTS_Q3_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

struct q3_demo_msg {
    int32_t seq;
    size_t len;
    uint8_t *data;
};

struct q3_demo {
    struct q3_demo_msg *msgs;
    size_t count;
    int protocol;
    int end; /* 0 end marker, else the reader's error (SG_E_TRUNCATED ...) */
};

/* Full path of `rel` under $SG_TESTDATA in `buf`; NULL (and a message) if unset or missing. */
const char *q3_testdata(const char *rel, char *buf, size_t cap);

/* Load every message of a demo file.  0 or a negative error. */
int q3_demo_load(const char *path, struct q3_demo *d);

/* Free a loaded demo; accepts a zeroed struct. */
void q3_demo_free(struct q3_demo *d);

/* The seven demos the golden tests cover, relative to $SG_TESTDATA. */
extern const char *const q3_test_demos[];

#endif
