/*
 * fuzz_qw_prx: QuakeWorld proxy chains (`route_by prx`): the connect
 * reader, the userinfo rewrite and the connect writer of
 * protocols/qw/prx.c, and the challenge reader.
 *
 * Input: a client datagram as it came (the fuzzer adds the 0xffffffff
 * "connect " head when the input lacks it, so most inputs reach the
 * parser).
 *
 * Properties:
 *  - the parser fills only what fits: the userinfo is NUL-terminated at
 *    userinfo_len, the tail fits its room, a chain names >= 1 hop and its
 *    first hop is a non-empty NUL-terminated string without '@';
 *  - rewritten, the userinfo has no `prx` key at the chain's end and the
 *    chain's rest otherwise, and carries the stamp;
 *  - built again with a challenge, the connect reads back to the same
 *    protocol, qport, challenge, userinfo and tail;
 *  - the challenge reader never reads past the datagram.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "protocols/codec.h"
#include "protocols/info.h"

extern const struct sg_codec_route_by sg_qw_route_by;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct sg_codec_route_by *rb = &sg_qw_route_by;
    static const char head[] = "\xff\xff\xff\xff"
                               "connect ";
    struct sg_route_by_req req, back;
    uint8_t *buf, out[SG_ROUTE_BY_USERINFO_MAX + SG_ROUTE_BY_TAIL_MAX + 128];
    size_t len = size;
    int32_t ch;
    const char *v;
    size_t vl;
    int n;

    buf = malloc(size + sizeof(head));
    if (!buf)
        return 0;
    if (size >= 4 && memcmp(data, head, 4) == 0) {
        memcpy(buf, data, size);
    } else {
        memcpy(buf, head, sizeof(head) - 1);
        memcpy(buf + sizeof(head) - 1, data, size);
        len = size + sizeof(head) - 1;
    }
    (void)rb->classify(buf, len);
    if (rb->challenge_parse(buf, len, &ch) == 1)
        FUZZ_CHECK(len >= 6 && buf[4] == 'c');
    if (rb->connect_parse(buf, len, &req) == 0) {
        FUZZ_CHECK(req.userinfo_len < sizeof(req.userinfo));
        FUZZ_CHECK(req.userinfo[req.userinfo_len] == 0);
        FUZZ_CHECK(strlen(req.userinfo) == req.userinfo_len);
        FUZZ_CHECK(req.tail_len <= sizeof(req.tail));
        if (req.hops) {
            FUZZ_CHECK(req.next[0] != 0 && strlen(req.next) < sizeof(req.next));
            FUZZ_CHECK(strchr(req.next, '@') == NULL);
        }
        if (rb->connect_rewrite(&req, "*qwfwd", "slipgate") == 0) {
            FUZZ_CHECK(strlen(req.userinfo) == req.userinfo_len);
            FUZZ_CHECK(sg_info_get(req.userinfo, req.userinfo_len, "*qwfwd", 6, &v, &vl) == 1);
            if (req.hops <= 1)
                FUZZ_CHECK(!sg_info_get(req.userinfo, req.userinfo_len, "prx", 3, &v, &vl) ||
                           v == NULL || vl == 0);
            n = rb->connect_build(&req, 12345, out, sizeof(out));
            if (n > 0 && !memchr(req.userinfo, '"', req.userinfo_len)) {
                FUZZ_CHECK(rb->connect_parse(out, (size_t)n, &back) == 0);
                FUZZ_CHECK(back.protocol == req.protocol && back.qport == req.qport);
                FUZZ_CHECK(back.challenge == 12345);
                FUZZ_CHECK(back.userinfo_len == req.userinfo_len &&
                           memcmp(back.userinfo, req.userinfo, req.userinfo_len) == 0);
                FUZZ_CHECK(back.tail_len == req.tail_len &&
                           memcmp(back.tail, req.tail, req.tail_len) == 0);
            }
        }
    }
    free(buf);
    return 0;
}
