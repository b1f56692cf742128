/*
 * The 'record' filter with the real Quake 3 codec on real captures
 * (tests/filters/meson.build: filter_record_q3@<s>): every datagram of the
 * game session in $SG_TESTDATA/q3/sessions/<s>/capture.pcap is decoded by
 * the codec and handed to the record filter as the proxy hands it (the
 * taps, after the chain).  The captures end with the real client quitting
 * normally: its `disconnect` command (three times), then the server's
 * answer ("peers disconnected" print, its own `disconnect`) and a few
 * snapshots in flight.
 *
 * What must hold (DESIGN.md rule 9, recordings end where the player's own
 * would):
 *   - one demo, ending with the end marker, whose last message is the last
 *     message of the client's own demo of the same minutes
 *     (client_demo.*): nothing the server sent after the client's
 *     disconnect is in it, and every message of the client's own demo
 *     after its synthesized gamestate is in it byte for byte;
 *   - the filter logs that the demo finished because the client
 *     disconnected, and its summary counts one demo;
 *   - the same capture played again on the same session (the client
 *     reconnecting from the same port: a new gamestate) starts a second
 *     demo that equals the first.
 */
#include "tests/filters/fake.h"

#include "protocols/codec.h"
#include "tests/q3/pcap_udp.h"
#include "tests/q3/q3_util.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CLIENT_PORT 27961
#define SERVER_PORT 27960

/* What the record filter's slot wrote, through its hooks (filters/filter.h). */
static bool slot_summary(const struct sg_filter_impl *impl, const void *slot, uint32_t *demos,
                         const char **last)
{
    struct sg_filter_figures fig = {0};

    if (!impl->figures || !slot)
        return false;
    impl->figures(slot, &fig);
    *demos = fig.files;
    *last = fig.last;
    return true;
}

struct run {
    struct fake_chain c;
    const struct sg_codec *codec;
    void *cstate;
    unsigned disconnects; /* C2S frames marked disconnect */
    int32_t last_disconnect_seq;
    unsigned datagrams;
};

/* One datagram of the game session: decode, then the taps, as the proxy does. */
static int on_datagram(const struct pcap_udp *u, void *arg)
{
    struct run *r = arg;
    const struct sg_frame *f = NULL;
    enum sg_dir dir;
    struct sg_filter_call call = {0};
    struct sg_filter_proxy proxy = {0};
    struct sg_chain_result res = {.drop_filter = -1};

    if (u->sport == CLIENT_PORT && u->dport == SERVER_PORT)
        dir = SG_DIR_C2S;
    else if (u->sport == SERVER_PORT && u->dport == CLIENT_PORT)
        dir = SG_DIR_S2C;
    else
        return 0; /* status queries of other ports */
    r->datagrams++;
    r->codec->decode(r->cstate, dir, u->data, u->len, &f);
    if (!f)
        return 1;
    if (f->disconnect) {
        r->disconnects++;
        r->last_disconnect_seq = f->sequence;
    }
    call.session = &r->c.session;
    call.frame = f;
    call.data = u->data;
    call.len = u->len;
    proxy.codec = r->codec;
    proxy.codec_state = r->cstate;
    proxy.session_id = r->c.session.id;
    sg_chain_run(r->c.chain, r->c.slots, &call, &proxy, &res);
    sg_chain_taps(r->c.chain, r->c.slots, &call, &proxy, &res);
    return 0;
}

/* The files in `dir`, sorted: how many, the names in `names`. */
static int list_dir(const char *dir, char names[][256], int cap)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, alphasort), k = 0;

    for (int i = 0; i < n; i++) {
        if (ents[i]->d_name[0] != '.' && k < cap)
            snprintf(names[k++], 256, "%s", ents[i]->d_name);
        free(ents[i]);
    }
    free(ents);
    return k;
}

/* `ours` ends where `own` (the client's own demo) ends and holds all of it but its record 0. */
static int check_against_own(const struct q3_demo *ours, const struct q3_demo *own,
                             const char *what)
{
    int32_t last = own->msgs[own->count - 1].seq;

    CHECK(ours->count > 100 && ours->end == 0);
    printf("%s: %zu messages, last %d; the client's own demo: %zu records, last %d\n", what,
           ours->count, ours->msgs[ours->count - 1].seq, own->count, last);
    if (ours->msgs[ours->count - 1].seq != last) {
        fprintf(stderr, "%s: ends at message %d, the client's own demo at %d\n", what,
                ours->msgs[ours->count - 1].seq, last);
        return 1;
    }
    for (size_t i = 1; i < own->count; i++) {
        bool same = false;

        for (size_t j = 0; j < ours->count && !same; j++)
            same = ours->msgs[j].seq == own->msgs[i].seq && ours->msgs[j].len == own->msgs[i].len &&
                   memcmp(ours->msgs[j].data, own->msgs[i].data, own->msgs[i].len) == 0;
        if (!same) {
            fprintf(stderr, "%s: the client's own message %d is missing\n", what, own->msgs[i].seq);
            return 1;
        }
    }
    return 0;
}

static int run_capture(const char *name)
{
    char rel[256], cap[1024], own_path[1024], dir[] = "/tmp/sg-record-q3-XXXXXX", conf[256];
    char names[4][256], path[2][600];
    const char *ext = strcmp(name, "ioq68") == 0 ? "dm_68" : "dm_71";
    struct run *r = calloc(1, sizeof(*r));
    struct q3_demo own = {0}, d[2] = {{0}};
    uint32_t demos = 0;
    const char *last = NULL;
    int n;

    CHECK(r && mkdtemp(dir));
    snprintf(rel, sizeof(rel), "q3/sessions/%s/capture.pcap", name);
    CHECK(q3_testdata(rel, cap, sizeof(cap)));
    snprintf(rel, sizeof(rel), "q3/sessions/%s/client_demo.%s", name, ext);
    CHECK(q3_testdata(rel, own_path, sizeof(own_path)));
    CHECK(q3_demo_load(own_path, &own) == 0 && own.count > 2);

    /* The session: the real codec behind a record filter. */
    snprintf(conf, sizeof(conf), "directory %s\nname %%map%%\n", dir);
    CHECK(fake_chain_open(&r->c, "record", conf, NULL, 0) == 0);
    r->codec = sg_codec_find("q3");
    CHECK(r->codec && r->codec->create(&r->cstate) == 0);
    r->c.session.codec = r->codec;
    r->c.session.codec_state = r->cstate;

    /* The capture, then the same again: the client reconnecting. */
    CHECK(pcap_udp_foreach(cap, on_datagram, r) == 0);
    printf("%s: %u datagrams; %u client datagrams carry its disconnect (the last is %d)\n", name,
           r->datagrams, r->disconnects, r->last_disconnect_seq);
    CHECK(r->disconnects == 3);
    n = list_dir(dir, names, 4);
    CHECK(n == 1); /* the first demo is finished, nothing opened after it */
    CHECK(slot_summary(r->c.chain->f[0].fc->impl, r->c.slots[0], &demos, &last));
    CHECK(demos == 1);
    CHECK(pcap_udp_foreach(cap, on_datagram, r) == 0);
    CHECK(r->disconnects == 6);
    CHECK(slot_summary(r->c.chain->f[0].fc->impl, r->c.slots[0], &demos, &last));
    CHECK(demos == 2);
    fake_chain_close(&r->c);
    printf("%s", r->c.log);
    r->codec->destroy(r->cstate);

    /* Two demos, each ending where the client's own ends; the same bytes. */
    n = list_dir(dir, names, 4);
    CHECK(n == 2);
    snprintf(path[0], sizeof(path[0]), "%s/oa_dm1.%s", dir, ext);
    snprintf(path[1], sizeof(path[1]), "%s/oa_dm1-2.%s", dir, ext);
    CHECK(q3_demo_load(path[0], &d[0]) == 0);
    CHECK(q3_demo_load(path[1], &d[1]) == 0);
    CHECK(check_against_own(&d[0], &own, path[0]) == 0);
    CHECK(check_against_own(&d[1], &own, path[1]) == 0);
    CHECK(d[0].count == d[1].count);
    for (size_t i = 0; i < d[0].count; i++)
        CHECK(d[0].msgs[i].seq == d[1].msgs[i].seq && d[0].msgs[i].len == d[1].msgs[i].len &&
              memcmp(d[0].msgs[i].data, d[1].msgs[i].data, d[0].msgs[i].len) == 0);
    CHECK(strstr(r->c.log, "finished (") && strstr(r->c.log, "; the client disconnected\n"));

    q3_demo_free(&d[0]);
    q3_demo_free(&d[1]);
    q3_demo_free(&own);
    unlink(path[0]);
    unlink(path[1]);
    rmdir(dir);
    free(r);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2 ||
        (strcmp(argv[1], "ioq68") && strcmp(argv[1], "ioq71") && strcmp(argv[1], "oa71"))) {
        fprintf(stderr, "usage: %s ioq68|ioq71|oa71\n", argv[0]);
        return 2;
    }
    return run_capture(argv[1]);
}
