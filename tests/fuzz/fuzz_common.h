/*
 * Helpers shared by the libFuzzer targets in tests/fuzz: a failed property
 * aborts (libFuzzer then saves the input as a crash artifact), a cursor
 * that cuts the fuzzer's input into fields, and the comparison of two
 * decoded Quake 3 server messages.  Nothing here keeps state between two
 * inputs.
 */
#ifndef SG_TESTS_FUZZ_COMMON_H
#define SG_TESTS_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "protocols/q3/svmsg.h"

/* A property that must hold for every input; prints where and aborts. */
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fuzz_fail(__FILE__, __LINE__, #cond);                                                  \
    } while (0)

_Noreturn void fuzz_fail(const char *file, int line, const char *what);

/* libFuzzer's entry point, declared for -Wmissing-prototypes. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads fields from the front of the input; a read past the end gives zeros. */
struct fuzz_in {
    const uint8_t *p;
    size_t left;
};

void fuzz_in_init(struct fuzz_in *in, const uint8_t *data, size_t size);
uint8_t fuzz_u8(struct fuzz_in *in);
uint16_t fuzz_le16(struct fuzz_in *in);
uint32_t fuzz_le32(struct fuzz_in *in);
/* Up to `n` bytes (fewer at the end of the input); `*got` says how many. */
const uint8_t *fuzz_bytes(struct fuzz_in *in, size_t n, size_t *got);

/*
 * The door's codec hooks (banned_reply, full_reply, is_admin) of every game on one
 * client datagram: an answer is never longer than the room given nor than
 * the datagram, and starts as a connectionless packet does.
 */
void fuzz_door(const uint8_t *d, size_t n);

/*
 * The status hooks of every game on one datagram, as the readiness probe
 * reads a server's answer: parse returns 0 or SG_E_MALFORMED, reads only
 * an answer is_reply accepts, leaves its strings NUL-terminated in their
 * room and its counts at -1 or more, and nothing but "unknown" when it
 * refuses.  `d` should be a buffer of exactly `n` bytes (overreads show).
 */
void fuzz_status(const uint8_t *d, size_t n);

/* A stream that discards what is written (for the dump code); NULL on failure. */
FILE *fuzz_null_file(void);

/*
 * Do two decoded server messages say the same thing on the wire?  Compares
 * every field the encoder writes (not the tail, which depends on the
 * original bytes), as tests/q3/q3_fuzz.c does; with `state_fields` also the
 * fields the parser derived from the stream state (snapshot status and
 * entity count, fresh commands), which agree when both messages were
 * parsed with equal states.
 */
bool fuzz_same_svmsg(const struct sg_q3_svmsg *a, const struct sg_q3_svmsg *b, bool state_fields);

#endif
