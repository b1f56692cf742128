/*
 * q3_reencode: every message of a real demo decodes without error and
 * re-encodes to the same bytes.  argv[1] = demo path under $SG_TESTDATA.
 */
#include <stdlib.h>
#include <string.h>

#include "protocols/error.h"
#include "protocols/q3/state.h"
#include "protocols/q3/svmsg.h"
#include "q3_util.h"

int main(int argc, char **argv)
{
    static uint8_t out[SG_Q3_MAX_MSGLEN];
    char path[4096];
    struct q3_demo d;
    struct sg_q3_state *st;
    struct sg_q3_svmsg msg;
    size_t same = 0, errors = 0;

    if (argc < 2 || !q3_testdata(argv[1], path, sizeof(path)))
        return 1;
    CHECK(q3_demo_load(path, &d) == 0);
    CHECK(d.count > 0);
    st = sg_q3_state_create(d.protocol);
    CHECK(st != NULL);
    sg_q3_svmsg_init(&msg);

    /* decode then encode each message; compare bytes */
    for (size_t i = 0; i < d.count; i++) {
        const struct q3_demo_msg *m = &d.msgs[i];
        int err = sg_q3_parse_server_message(st, m->seq, m->data, m->len, &msg);
        int n;

        if (err < 0) {
            fprintf(stderr, "message %zu (seq %d): %s\n", i, m->seq, sg_errname(err));
            errors++;
            continue;
        }
        n = sg_q3_write_server_message(&msg, out, sizeof(out));
        if (n == (int)m->len && memcmp(out, m->data, m->len) == 0) {
            same++;
            continue;
        }
        fprintf(stderr, "message %zu (seq %d): re-encoded %d bytes, original %zu\n", i, m->seq, n,
                m->len);
    }
    printf("%s: %zu messages, %zu byte-identical, %zu decode errors, %llu nodelta\n", argv[1],
           d.count, same, errors, (unsigned long long)st->snapshots_nodelta);
    sg_q3_svmsg_finish(&msg);
    sg_q3_state_destroy(st);
    CHECK(errors == 0);
    CHECK(same == d.count);
    q3_demo_free(&d);
    return 0;
}
