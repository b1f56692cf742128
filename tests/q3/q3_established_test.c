/*
 * The Quake 3 codec's `established` hook (protocols/codec.h) against real
 * captures (tests/q3/meson.build: q3_established@<s>).
 *
 * Every datagram of $SG_TESTDATA/q3/sessions/<s>/capture.pcap goes through
 * three codec states:
 *
 *   - player: the whole session.  Not established before the server's
 *     connectResponse; established at the client's first sequenced
 *     (non-OOB) datagram after it, and for good.
 *   - blind: only what a spoofing sender could produce, the client's
 *     datagrams, with the server's connectionless answers other than
 *     connectResponse (which a server sends only to the address whose
 *     connect carried the challenge it gave that address).  Never
 *     established.
 *   - queries: the connectionless exchange only (getchallenge, getinfo,
 *     ..., both ways, connectResponse excepted).  Never established.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pcap_udp.h"
#include "protocols/codec.h"
#include "q3_util.h"

#define CLIENT_PORT 27961
#define SERVER_PORT 27960

struct run {
    const struct sg_codec *codec;
    void *player, *blind, *queries;
    bool seen_connect_response;
    uint64_t established_at; /* frame where the player became established, 0 before */
    uint64_t expected_at;    /* the client's first sequenced datagram after connectResponse */
    int failures;
};

static bool is_oob(const struct pcap_udp *u)
{
    return u->len >= 4 && memcmp(u->data, "\xff\xff\xff\xff", 4) == 0;
}

static bool is_connect_response(const struct pcap_udp *u)
{
    static const char cr[] = "\xff\xff\xff\xff"
                             "connectResponse";
    return u->len >= sizeof(cr) - 1 && memcmp(u->data, cr, sizeof(cr) - 1) == 0;
}

static int on_datagram(const struct pcap_udp *u, void *arg)
{
    struct run *r = arg;
    const struct sg_frame *f;
    enum sg_dir dir;

    if (u->sport == CLIENT_PORT && u->dport == SERVER_PORT)
        dir = SG_DIR_C2S;
    else if (u->sport == SERVER_PORT && u->dport == CLIENT_PORT)
        dir = SG_DIR_S2C;
    else
        return 0;

    /* The whole session. */
    if (dir == SG_DIR_C2S && !is_oob(u) && r->seen_connect_response && !r->expected_at)
        r->expected_at = u->frame;
    if (dir == SG_DIR_S2C && is_connect_response(u))
        r->seen_connect_response = true;
    r->codec->decode(r->player, dir, u->data, u->len, &f);
    if (r->codec->established(r->player)) {
        if (!r->established_at)
            r->established_at = u->frame;
    } else if (r->established_at) {
        fprintf(stderr, "frame %llu: no longer established\n", (unsigned long long)u->frame);
        r->failures++;
    }

    /* What a blind sender could make happen, and the query exchange. */
    if (dir == SG_DIR_C2S || (is_oob(u) && !is_connect_response(u)))
        r->codec->decode(r->blind, dir, u->data, u->len, &f);
    if (is_oob(u) && !is_connect_response(u))
        r->codec->decode(r->queries, dir, u->data, u->len, &f);
    if (r->codec->established(r->blind) || r->codec->established(r->queries)) {
        fprintf(stderr, "frame %llu: established without the server's connectResponse\n",
                (unsigned long long)u->frame);
        r->failures++;
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    char rel[256], path[1024];
    struct run r = {0};

    if (argc != 2 ||
        (strcmp(argv[1], "ioq68") && strcmp(argv[1], "ioq71") && strcmp(argv[1], "oa71"))) {
        fprintf(stderr, "usage: %s ioq68|ioq71|oa71\n", argv[0]);
        return 2;
    }
    r.codec = sg_codec_find("q3");
    CHECK(r.codec && r.codec->established);
    CHECK(r.codec->create(&r.player) == 0);
    CHECK(r.codec->create(&r.blind) == 0);
    CHECK(r.codec->create(&r.queries) == 0);
    CHECK(!r.codec->established(r.player));

    snprintf(rel, sizeof(rel), "q3/sessions/%s/capture.pcap", argv[1]);
    CHECK(q3_testdata(rel, path, sizeof(path)));
    CHECK(pcap_udp_foreach(path, on_datagram, &r) == 0);
    printf("%s: connectResponse %s; the client's first sequenced datagram after it: frame "
           "%llu; established at frame %llu\n",
           argv[1], r.seen_connect_response ? "seen" : "not seen",
           (unsigned long long)r.expected_at, (unsigned long long)r.established_at);
    CHECK(r.failures == 0);
    CHECK(r.seen_connect_response && r.expected_at > 0);
    CHECK(r.established_at == r.expected_at);

    r.codec->destroy(r.player);
    r.codec->destroy(r.blind);
    r.codec->destroy(r.queries);
    return 0;
}
