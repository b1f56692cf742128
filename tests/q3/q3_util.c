/* Helpers shared by the Quake 3 message-layer tests (see q3_util.h). */
#include "q3_util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "protocols/error.h"
#include "protocols/q3/demo.h"

const char *const q3_test_demos[] = {
    "q3/demos/cpma_core_gameplay.dm_68",
    "q3/demos/cpma_one_frag.dm_68",
    "q3/demos/osp_chat.dm_68",
    "q3/demos/osp_team_chat.dm_68",
    "q3/demos/truncated.dm_68",
    "q3/sessions/ioq68/client_demo.dm_68",
    "q3/sessions/ioq71/client_demo.dm_71",
    "q3/sessions/oa71/client_demo.dm_71",
    NULL,
};

const char *q3_testdata(const char *rel, char *buf, size_t cap)
{
    const char *root = getenv("SG_TESTDATA");

    if (!root || !*root) {
        fprintf(stderr, "SG_TESTDATA is not set\n");
        return NULL;
    }
    snprintf(buf, cap, "%s/%s", root, rel);
    if (access(buf, R_OK) != 0) {
        fprintf(stderr, "missing test data: %s\n", buf);
        return NULL;
    }
    return buf;
}

int q3_demo_load(const char *path, struct q3_demo *d)
{
    struct sg_q3_demo_reader r;
    static uint8_t buf[SG_Q3_MAX_MSGLEN];
    int err;

    memset(d, 0, sizeof(*d));
    err = sg_q3_demo_reader_open(&r, path);
    if (err < 0)
        return err;
    d->protocol = r.protocol;
    for (;;) {
        int32_t seq;
        size_t len;
        struct q3_demo_msg *m;

        err = sg_q3_demo_read(&r, &seq, buf, &len);
        if (err <= 0)
            break;
        m = realloc(d->msgs, (d->count + 1) * sizeof(*m));
        if (!m) {
            err = -ENOMEM;
            break;
        }
        d->msgs = m;
        m = &d->msgs[d->count++];
        m->seq = seq;
        m->len = len;
        m->data = malloc(len ? len : 1);
        if (!m->data) {
            err = -ENOMEM;
            break;
        }
        memcpy(m->data, buf, len);
    }
    d->end = err;
    sg_q3_demo_reader_finish(&r);
    return err == -ENOMEM ? err : 0;
}

void q3_demo_free(struct q3_demo *d)
{
    for (size_t i = 0; i < d->count; i++)
        free(d->msgs[i].data);
    free(d->msgs);
    memset(d, 0, sizeof(*d));
}
