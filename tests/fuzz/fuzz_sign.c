/*
 * fuzz_sign: the .sig reader (filters/sign.c sg_sign_verify_mem) over a
 * recording and its .sig, and the one-line verdict.
 *
 * Input:
 *
 *     u8 flags, le32 siglen, siglen bytes of .sig, the rest: the recording
 *
 * flags bit 0: verify against a fixed public key (not the .sig's own),
 * which is "another key" for every real signature.
 *
 * Properties:
 *  - the reader never crashes, never reads past either buffer (ASan);
 *  - authentic verdicts cover no more than the recording, and whole means
 *    exactly all of it;
 *  - a modification is reported within the recording;
 *  - the verdict line is a NUL-terminated string.
 */
#include "filters/sign.h"
#include "fuzz_common.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t other_pk[SG_SIGN_PK_BYTES] = {1, 2, 3};
    struct fuzz_in in;
    struct sg_sign_result res;
    const uint8_t *sig;
    size_t siglen, got;
    uint8_t flags;
    char line[512];

    fuzz_in_init(&in, data, size);
    flags = fuzz_u8(&in);
    siglen = fuzz_le32(&in);
    sig = fuzz_bytes(&in, siglen, &got);
    siglen = got;
    sg_sign_verify_mem(sig, siglen, in.p, in.left, (flags & 1) ? other_pk : NULL, &res);
    FUZZ_CHECK(res.verdict <= SG_SIGN_NONE);
    FUZZ_CHECK(res.file_bytes == in.left);
    if (res.verdict == SG_SIGN_WHOLE)
        FUZZ_CHECK(res.bytes == in.left);
    if (res.verdict == SG_SIGN_PARTIAL || res.verdict == SG_SIGN_MODIFIED)
        FUZZ_CHECK(res.bytes <= in.left);
    sg_sign_result_line(&res, line, sizeof(line));
    FUZZ_CHECK(memchr(line, '\0', sizeof(line)) != NULL);
    return 0;
}
