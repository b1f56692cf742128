/*
 * q3_demo: demo container reader and writer, truncation, and the
 * mid-stream recording path (`demo cut`).  argv[1] = case, argv[2] = demo
 * path under $SG_TESTDATA for the cases that take one.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "protocols/byteorder.h"
#include "protocols/error.h"
#include "protocols/q3/demo.h"
#include "q3_util.h"

/* FNV-1a over bytes. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;

    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Hash of a tracked frame: playerstate, entity list, areamask, time. */
static uint64_t frame_hash(const struct sg_q3_state *st, const struct sg_q3_snapshot *s)
{
    uint64_t h = fnv(0xcbf29ce484222325ull, &s->ps, sizeof(s->ps));

    h = fnv(h, &s->server_time, sizeof(s->server_time));
    h = fnv(h, s->areamask, s->areamask_len);
    for (int i = 0; i < s->num_entities; i++)
        h = fnv(h, sg_q3_state_entity(st, s, i), sizeof(struct sg_q3_entity));
    return h;
}

/* Hash of all configstrings. */
static uint64_t cs_hash(const struct sg_q3_state *st)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (int i = 0; i < SG_Q3_MAX_CONFIGSTRINGS; i++) {
        const char *s = sg_q3_state_configstring(st, i);
        h = fnv(h, &i, sizeof(i));
        h = fnv(h, s, strlen(s) + 1);
    }
    return h;
}

/* Write blocks of `d` (first `count`) to a temporary file, with or without end marker. */
static FILE *write_temp(const struct q3_demo *d, size_t count, bool marker)
{
    FILE *f = tmpfile();
    struct sg_q3_demo_writer w;

    if (!f)
        return NULL;
    sg_q3_demo_writer_init(&w, f);
    for (size_t i = 0; i < count; i++)
        if (sg_q3_demo_write(&w, d->msgs[i].seq, d->msgs[i].data, d->msgs[i].len) < 0)
            return NULL;
    if (marker && sg_q3_demo_writer_finish(&w) < 0)
        return NULL;
    fflush(f);
    rewind(f);
    return f;
}

/* truncated.dm_68 (no end marker) and a file cut inside a message. */
static int truncated(void)
{
    static uint8_t buf[SG_Q3_MAX_MSGLEN];
    char path[4096];
    struct q3_demo d, full;
    struct sg_q3_demo_reader r;
    struct sg_q3_state *st;
    struct sg_q3_svmsg msg;
    FILE *f;
    long size;
    int32_t seq;
    size_t len, n = 0;
    int err;

    /* the real file: every whole message, then SG_E_TRUNCATED */
    CHECK(q3_testdata("q3/demos/truncated.dm_68", path, sizeof(path)));
    CHECK(q3_demo_load(path, &d) == 0);
    CHECK(d.end == SG_E_TRUNCATED);
    CHECK(d.count == 238);
    st = sg_q3_state_create(68);
    sg_q3_svmsg_init(&msg);
    for (size_t i = 0; i < d.count; i++)
        CHECK(sg_q3_parse_server_message(st, d.msgs[i].seq, d.msgs[i].data, d.msgs[i].len, &msg) ==
              0);
    CHECK(st->errors == 0 && st->snapshots_nodelta == 0);
    sg_q3_state_destroy(st);

    /* a copy of a complete demo cut in the middle of its 11th message */
    CHECK(q3_testdata("q3/demos/osp_chat.dm_68", path, sizeof(path)));
    CHECK(q3_demo_load(path, &full) == 0 && full.end == 0);
    f = write_temp(&full, full.count, true);
    CHECK(f != NULL);
    size = 0;
    for (size_t i = 0; i < 10; i++)
        size += 8 + (long)full.msgs[i].len;
    size += 8 + (long)full.msgs[10].len / 2;
    CHECK(ftruncate(fileno(f), size) == 0);
    sg_q3_demo_reader_init(&r, f, 68);
    while ((err = sg_q3_demo_read(&r, &seq, buf, &len)) == 1) {
        CHECK(seq == full.msgs[n].seq && len == full.msgs[n].len);
        CHECK(memcmp(buf, full.msgs[n].data, len) == 0);
        n++;
    }
    CHECK(err == SG_E_TRUNCATED && n == 10);
    CHECK(r.truncated && r.partial == 8 + full.msgs[10].len / 2);
    CHECK(sg_q3_demo_read(&r, &seq, buf, &len) == SG_E_TRUNCATED);
    sg_q3_demo_reader_finish(&r);
    fclose(f);

    sg_q3_svmsg_finish(&msg);
    q3_demo_free(&d);
    q3_demo_free(&full);
    return 0;
}

/* Lengths the game refuses, and the end marker whatever its sequence. */
static int reader_errors(void)
{
    static uint8_t buf[SG_Q3_MAX_MSGLEN];
    uint8_t block[8];
    struct sg_q3_demo_reader r;
    int32_t seq;
    size_t len;
    FILE *f;

    static const int32_t lens[] = {SG_Q3_MAX_MSGLEN + 1, -2};
    static const int want[] = {SG_E_TOOBIG, SG_E_MALFORMED};
    for (int i = 0; i < 2; i++) {
        f = tmpfile();
        CHECK(f != NULL);
        sg_put_le32(block, 7);
        sg_put_le32(block + 4, (uint32_t)lens[i]);
        CHECK(fwrite(block, 1, 8, f) == 8);
        rewind(f);
        sg_q3_demo_reader_init(&r, f, 68);
        CHECK(sg_q3_demo_read(&r, &seq, buf, &len) == want[i]);
        fclose(f);
    }

    /* length -1 ends the demo even with another sequence */
    f = tmpfile();
    CHECK(f != NULL);
    sg_put_le32(block, 1234);
    sg_put_le32(block + 4, 0xffffffffu);
    CHECK(fwrite(block, 1, 8, f) == 8);
    rewind(f);
    sg_q3_demo_reader_init(&r, f, 68);
    CHECK(sg_q3_demo_read(&r, &seq, buf, &len) == 0 && r.ended && !r.truncated);
    CHECK(sg_q3_demo_read(&r, &seq, buf, &len) == 0);
    fclose(f);

    /* an empty file has no end marker */
    f = tmpfile();
    CHECK(f != NULL);
    sg_q3_demo_reader_init(&r, f, 68);
    CHECK(sg_q3_demo_read(&r, &seq, buf, &len) == SG_E_TRUNCATED && r.partial == 0);
    fclose(f);
    return 0;
}

/* Writer then reader give back every block, and the file is the original. */
static int writer(void)
{
    static uint8_t buf[SG_Q3_MAX_MSGLEN];
    char path[4096];
    struct q3_demo d;
    struct sg_q3_demo_reader r;
    FILE *f, *orig;
    int32_t seq;
    size_t len, n = 0;
    int err, c1, c2;

    CHECK(q3_testdata("q3/sessions/ioq71/client_demo.dm_71", path, sizeof(path)));
    CHECK(q3_demo_load(path, &d) == 0 && d.end == 0);
    f = write_temp(&d, d.count, true);
    CHECK(f != NULL);
    sg_q3_demo_reader_init(&r, f, 71);
    while ((err = sg_q3_demo_read(&r, &seq, buf, &len)) == 1) {
        CHECK(seq == d.msgs[n].seq && len == d.msgs[n].len);
        CHECK(memcmp(buf, d.msgs[n].data, len) == 0);
        n++;
    }
    CHECK(err == 0 && r.ended && n == d.count);

    /* byte for byte the same file */
    rewind(f);
    orig = fopen(path, "rb");
    CHECK(orig != NULL);
    do {
        c1 = fgetc(f);
        c2 = fgetc(orig);
        CHECK(c1 == c2);
    } while (c1 != EOF);
    fclose(orig);
    fclose(f);
    CHECK(sg_q3_demo_protocol_from_name("x/y.dm_71") == 71);
    CHECK(sg_q3_demo_protocol_from_name("a.dm_66") == 66);
    CHECK(sg_q3_demo_protocol_from_name("a.dm68") == 0);
    CHECK(sg_q3_demo_protocol_from_name("a.dm_") == 0);
    CHECK(sg_q3_demo_protocol_from_name("a.dm_6x") == 0);
    q3_demo_free(&d);
    return 0;
}

/* Original decode: frame hashes by message index. */
struct original {
    uint64_t *hash; /* 0 when the message has no valid snapshot */
    int32_t *time;  /* snapshot server time, or INT32_MIN */
    uint64_t *cs;   /* configstrings after the message */
};

static int decode_original(const struct q3_demo *d, struct original *o)
{
    struct sg_q3_state *st = sg_q3_state_create(d->protocol);
    struct sg_q3_svmsg msg;

    o->hash = calloc(d->count, sizeof(*o->hash));
    o->time = calloc(d->count, sizeof(*o->time));
    o->cs = calloc(d->count, sizeof(*o->cs));
    CHECK(st && o->hash && o->time && o->cs);
    sg_q3_svmsg_init(&msg);
    for (size_t i = 0; i < d->count; i++) {
        const struct sg_q3_snap *s;
        const struct sg_q3_snapshot *f;

        CHECK(sg_q3_parse_server_message(st, d->msgs[i].seq, d->msgs[i].data, d->msgs[i].len,
                                         &msg) == 0);
        s = sg_q3_svmsg_snapshot(&msg);
        f = s ? sg_q3_state_snapshot(st, s->message_num) : NULL;
        o->time[i] = s ? s->server_time : INT32_MIN;
        o->hash[i] = f ? frame_hash(st, f) : 0;
        o->cs[i] = cs_hash(st);
    }
    sg_q3_svmsg_finish(&msg);
    sg_q3_state_destroy(st);
    return 0;
}

/* A cut from the middle third decodes cleanly and shows the same frames. */
static int cut(const char *rel)
{
    char path[4096];
    struct q3_demo d, c;
    struct original o;
    struct sg_q3_demo_reader r;
    struct sg_q3_demo_writer w;
    struct sg_q3_demo_stats stats;
    struct sg_q3_state *st;
    struct sg_q3_svmsg msg;
    int32_t first = INT32_MIN, last = INT32_MIN, from, to;
    size_t start = 0, matched = 0;
    FILE *f;

    CHECK(q3_testdata(rel, path, sizeof(path)));
    CHECK(q3_demo_load(path, &d) == 0 && d.count > 10);
    CHECK(decode_original(&d, &o) == 0);
    for (size_t i = 0; i < d.count; i++) {
        if (o.time[i] == INT32_MIN)
            continue;
        if (first == INT32_MIN)
            first = o.time[i];
        last = o.time[i];
    }
    from = first + (last - first) / 3;
    to = first + 2 * (last - first) / 3;

    /* cut into a temporary file */
    CHECK(sg_q3_demo_reader_open(&r, path) == 0);
    f = tmpfile();
    CHECK(f != NULL);
    sg_q3_demo_writer_init(&w, f);
    CHECK(sg_q3_demo_cut(&r, &w, from, to, &stats) == 0);
    CHECK(sg_q3_demo_writer_finish(&w) == 0);
    sg_q3_demo_reader_finish(&r);
    CHECK(stats.started && stats.decode_errors == 0 && stats.written > 2);
    rewind(f);

    /* read it back */
    {
        static uint8_t buf[SG_Q3_MAX_MSGLEN];
        int32_t seq;
        size_t len;
        int err;

        memset(&c, 0, sizeof(c));
        c.msgs = calloc(stats.written, sizeof(*c.msgs));
        CHECK(c.msgs != NULL);
        sg_q3_demo_reader_init(&r, f, d.protocol);
        while ((err = sg_q3_demo_read(&r, &seq, buf, &len)) == 1) {
            CHECK(c.count < stats.written);
            c.msgs[c.count].seq = seq;
            c.msgs[c.count].len = len;
            c.msgs[c.count].data = malloc(len);
            CHECK(c.msgs[c.count].data != NULL);
            memcpy(c.msgs[c.count].data, buf, len);
            c.count++;
        }
        CHECK(err == 0 && c.count == stats.written);
        fclose(f);
    }

    /* gamestate first, then a non-delta snapshot one sequence later */
    st = sg_q3_state_create(d.protocol);
    sg_q3_svmsg_init(&msg);
    CHECK(sg_q3_parse_server_message(st, c.msgs[0].seq, c.msgs[0].data, c.msgs[0].len, &msg) == 0);
    CHECK(msg.num_ops == 1 && msg.ops[0].type == SG_Q3_SVC_GAMESTATE);
    CHECK(c.msgs[1].seq == c.msgs[0].seq + 1);
    CHECK(sg_q3_parse_server_message(st, c.msgs[1].seq, c.msgs[1].data, c.msgs[1].len, &msg) == 0);
    CHECK(sg_q3_svmsg_snapshot(&msg) && sg_q3_svmsg_snapshot(&msg)->delta_num == 0);
    while (start < d.count && d.msgs[start].seq != c.msgs[1].seq)
        start++;
    CHECK(start < d.count && o.time[start] >= from);
    CHECK(cs_hash(st) == o.cs[start]);

    /* every message decodes; every frame equals the original's */
    for (size_t i = 1, j = start; i < c.count; i++, j++) {
        const struct sg_q3_snap *s;
        const struct sg_q3_snapshot *fr;

        if (i > 1)
            CHECK(sg_q3_parse_server_message(st, c.msgs[i].seq, c.msgs[i].data, c.msgs[i].len,
                                             &msg) == 0);
        CHECK(j < d.count && d.msgs[j].seq == c.msgs[i].seq);
        s = sg_q3_svmsg_snapshot(&msg);
        CHECK(!s || (s->server_time >= from && s->server_time <= to));
        fr = s ? sg_q3_state_snapshot(st, s->message_num) : NULL;
        CHECK(!s || fr);
        CHECK((fr ? frame_hash(st, fr) : 0) == o.hash[j]);
        matched += fr != NULL;
    }
    CHECK(st->errors == 0 && st->snapshots_nodelta == 0);
    printf("%s: cut %d..%d: %zu messages, %zu frames identical to the original, %llu re-encoded\n",
           rel, from, to, c.count, matched, (unsigned long long)stats.rewritten);

    sg_q3_svmsg_finish(&msg);
    sg_q3_state_destroy(st);
    free(o.hash);
    free(o.time);
    free(o.cs);
    q3_demo_free(&c);
    q3_demo_free(&d);
    return 0;
}

/*
 * A stream where one snapshot deltas from two messages back (as after a
 * lost packet), built with sg_q3_record_snapshot; it must decode to the
 * same frames.  A recording that starts between the two must re-encode
 * that snapshot without delta.
 */
static int recorder_gap(void)
{
    static uint8_t buf[SG_Q3_MAX_MSGLEN];
    char path[4096];
    struct q3_demo d;
    struct original o, o2;
    struct sg_q3_state *st;
    struct sg_q3_svmsg msg, built;
    struct sg_q3_recorder *rec = malloc(sizeof(*rec));
    struct sg_q3_demo_writer w;
    struct q3_demo_msg saved;
    size_t i = 100, n;
    FILE *f;
    int len;

    CHECK(rec != NULL);
    CHECK(q3_testdata("q3/demos/osp_team_chat.dm_68", path, sizeof(path)));
    CHECK(q3_demo_load(path, &d) == 0 && d.count > i + 10);
    CHECK(decode_original(&d, &o) == 0);

    /* re-encode message i+2 delta'd from frame i */
    st = sg_q3_state_create(68);
    sg_q3_svmsg_init(&msg);
    sg_q3_svmsg_init(&built);
    for (n = 0; n <= i + 2; n++)
        CHECK(sg_q3_parse_server_message(st, d.msgs[n].seq, d.msgs[n].data, d.msgs[n].len, &msg) ==
              0);
    CHECK(msg.num_ops == 1 && msg.ops[0].type == SG_Q3_SVC_SNAPSHOT);
    built.reliable_ack = msg.reliable_ack;
    CHECK(sg_q3_record_snapshot(st, sg_q3_state_snapshot(st, d.msgs[i + 2].seq),
                                sg_q3_state_snapshot(st, d.msgs[i].seq), &built) == 0);
    CHECK(built.snaps[0].delta_num == d.msgs[i + 2].seq - d.msgs[i].seq);
    len = sg_q3_write_server_message(&built, buf, sizeof(buf));
    CHECK(len > 0);
    saved = d.msgs[i + 2];
    d.msgs[i + 2].data = buf;
    d.msgs[i + 2].len = (size_t)len;
    sg_q3_state_destroy(st);

    /* the modified stream shows the same frames */
    CHECK(decode_original(&d, &o2) == 0);
    CHECK(memcmp(o.hash, o2.hash, d.count * sizeof(*o.hash)) == 0);

    /* record from message i+1 on */
    st = sg_q3_state_create(68);
    f = tmpfile();
    CHECK(f != NULL);
    sg_q3_demo_writer_init(&w, f);
    sg_q3_recorder_init(rec, &w);
    for (n = 0; n < d.count; n++) {
        int perr =
            sg_q3_parse_server_message(st, d.msgs[n].seq, d.msgs[n].data, d.msgs[n].len, &msg);
        CHECK(perr == 0);
        if (n > i)
            CHECK(sg_q3_recorder_feed(rec, st, &msg, perr, d.msgs[n].data, d.msgs[n].len) == 1);
    }
    CHECK(sg_q3_demo_writer_finish(&w) == 0);
    CHECK(rec->rewritten == 2 && rec->written == d.count - i);
    sg_q3_recorder_finish(rec);
    sg_q3_state_destroy(st);

    /* the recording decodes to the original frames */
    {
        struct sg_q3_demo_reader r;
        int32_t seq;
        size_t mlen;
        int err;

        rewind(f);
        sg_q3_demo_reader_init(&r, f, 68);
        st = sg_q3_state_create(68);
        n = i; /* the gamestate stands before message i+1 */
        while ((err = sg_q3_demo_read(&r, &seq, buf, &mlen)) == 1) {
            const struct sg_q3_snap *s;
            const struct sg_q3_snapshot *fr;

            CHECK(sg_q3_parse_server_message(st, seq, buf, mlen, &msg) == 0);
            if (n > i) {
                CHECK(seq == d.msgs[n].seq);
                s = sg_q3_svmsg_snapshot(&msg);
                fr = s ? sg_q3_state_snapshot(st, s->message_num) : NULL;
                CHECK((fr ? frame_hash(st, fr) : 0) == o.hash[n]);
                if (n == i + 2)
                    CHECK(s->delta_num == 0);
            }
            n++;
        }
        CHECK(err == 0 && n == d.count);
        CHECK(st->errors == 0 && st->snapshots_nodelta == 0);
        sg_q3_state_destroy(st);
        fclose(f);
    }

    d.msgs[i + 2] = saved;
    sg_q3_svmsg_finish(&msg);
    sg_q3_svmsg_finish(&built);
    free(rec);
    free(o.hash);
    free(o.time);
    free(o.cs);
    free(o2.hash);
    free(o2.time);
    free(o2.cs);
    q3_demo_free(&d);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 1;
    if (strcmp(argv[1], "truncated") == 0)
        return truncated();
    if (strcmp(argv[1], "reader_errors") == 0)
        return reader_errors();
    if (strcmp(argv[1], "writer") == 0)
        return writer();
    if (strcmp(argv[1], "recorder_gap") == 0)
        return recorder_gap();
    if (strcmp(argv[1], "cut") == 0 && argc > 2)
        return cut(argv[2]);
    fprintf(stderr, "unknown case\n");
    return 1;
}
