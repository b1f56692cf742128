/*
 * slipgate error codes.
 *
 * Every function that can fail returns an int: 0 or positive for success,
 * negative for failure.  A failure is either a negated errno value (-EINVAL,
 * -ENOMEM, ...) or one of the project's own codes below, which live well
 * outside the errno range.  sg_strerror() names both.
 */
#ifndef SG_PROTOCOLS_ERROR_H
#define SG_PROTOCOLS_ERROR_H

/* X-macro: code, description.  Append only; the numbers are not stable ABI. */
#define SG_ERROR_MAP(XX)                                                                           \
    XX(MALFORMED, "malformed data")                                                                \
    XX(OVERFLOW, "read or write past the end of a message")                                        \
    XX(HUFFMAN, "invalid Huffman code")                                                            \
    XX(FRAGMENT, "bad or incomplete fragment")                                                     \
    XX(INFLATE, "compressed data is corrupt")                                                      \
    XX(UNSUPPORTED, "unsupported protocol or feature")                                             \
    XX(NODELTA, "delta reference is missing")                                                      \
    XX(TRUNCATED, "truncated input")                                                               \
    XX(TOOBIG, "message too large")                                                                \
    XX(CONFIG, "invalid configuration")                                                            \
    XX(RESOLVE, "address resolution failed")                                                       \
    XX(VERSION, "version mismatch")                                                                \
    XX(STATE, "operation not valid in the current state")

enum sg_error {
    SG__E_FIRST = -10000,
#define SG__E_ENUM(code, desc) SG_E_##code,
    SG_ERROR_MAP(SG__E_ENUM)
#undef SG__E_ENUM
        SG__E_LAST
};

/* A static description of `err` (any negative code, or >= 0 for success). */
const char *sg_strerror(int err);

/* The symbolic name of `err` ("SG_E_MALFORMED", "EINVAL", ...), static. */
const char *sg_errname(int err);

/*
 * The error of the write that just failed (fwrite, fflush, write): its
 * errno negated (-ENOSPC on a full disk, so it is told as "No space left on
 * device"), or -EIO when the call left errno unset.  Call it right after
 * the failure, before anything else can change errno.
 */
int sg_write_error(void);

#endif
