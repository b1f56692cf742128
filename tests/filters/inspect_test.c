/*
 * The 'inspect' filter (filters/inspect.c) against fake frames: the lines
 * of each level in text and JSON (the JSON is parsed here and checked field
 * by field), the direction / kinds / repeats / colours settings, dropped
 * and re-encoded frames, a codec's dump hook, and output that cannot be
 * opened or written.  Output goes to a temporary file the test reads back.
 */
#include "tests/filters/fake.h"
#include "tests/unit.h"

#include "protocols/error.h"
#include "tests/q3/json_mini.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- running the filter ---- */

struct out {
    char path[64];
    char *text;
    char *lines[256];
    int n;
};

static void out_init(struct out *o)
{
    int fd;

    memset(o, 0, sizeof(*o));
    snprintf(o->path, sizeof(o->path), "/tmp/sg_inspect_XXXXXX");
    fd = mkstemp(o->path);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
}

/* Read the file back into lines (after the chain is closed: flushed). */
static void out_read(struct out *o)
{
    FILE *f = fopen(o->path, "r");
    long size;

    CHECK(f != NULL);
    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    o->text = calloc(1, (size_t)size + 1);
    if (o->text && fread(o->text, 1, (size_t)size, f) != (size_t)size)
        CHECK(!"short read");
    fclose(f);
    for (char *p = o->text, *nl; p && *p && o->n < 256; p = nl + 1) {
        nl = strchr(p, '\n');
        CHECK(nl != NULL); /* every line ends in a newline */
        if (!nl)
            break;
        *nl = '\0';
        o->lines[o->n++] = p;
    }
}

static void out_free(struct out *o)
{
    if (failures && o->text) {
        fprintf(stderr, "--- output (%d lines) ---\n", o->n);
        for (int i = 0; i < o->n; i++)
            fprintf(stderr, "%s\n", o->lines[i]);
    }
    unlink(o->path);
    free(o->text);
}

static int open_inspect(struct fake_chain *fc, struct out *o, const char *conf)
{
    char text[1024];

    snprintf(text, sizeof(text), "output %s\n%s", o->path, conf);
    if (fake_chain_open(fc, "inspect", text, NULL, 0) < 0) {
        fprintf(stderr, "cannot open inspect with: %s\n", text);
        failures++;
        return -1;
    }
    return 0;
}

/* Run the tap over the current fake frame as the proxy would, with its fate. */
static void tap(struct fake_chain *fc, bool dropped, int drop_filter, bool reencoded)
{
    static const uint8_t bytes[20] = {0xff, 0xff, 0xff, 0xff, 'g',  'e', 't', 'i', 'n',  'f',
                                      'o',  0x00, 0x01, 0x7f, 0x80, 'x', 'y', 'z', 0x0a, 0x09};
    struct sg_chain_result res = {.drop = dropped, .drop_filter = drop_filter};
    struct sg_filter_call call = {0};
    struct sg_filter_proxy proxy = {0};

    call.session = &fc->session;
    call.frame = &fc->codec.frame;
    call.data = bytes;
    call.len = sizeof(bytes);
    call.now_ms = 1000;
    call.reencoded = reencoded;
    proxy.codec = fc->session.codec;
    proxy.codec_state = fc->session.codec_state;
    proxy.session_id = fc->session.id;
    sg_chain_taps(fc->chain, fc->slots, &call, &proxy, &res);
}

/* A server message: a print with colours and a newline, a snapshot, a repeated print. */
static void server_frame(struct fake_chain *fc)
{
    unsigned i;

    fake_frame(&fc->codec, SG_DIR_S2C, SG_FRAME_MESSAGE);
    fc->codec.frame.sequence = 4242;
    fc->codec.frame.reliable_ack = 7;
    fake_msg(&fc->codec, SG_MSG_PRINT, "^1Red^7 joined\n");
    i = fake_msg(&fc->codec, SG_MSG_GAME, NULL);
    fc->codec.msgs[i].name = "svc_snapshot";
    fc->codec.msgs[i].number = 123456;
    i = fake_msg(&fc->codec, SG_MSG_PRINT, "old news");
    fc->codec.msgs[i].repeat = true;
}

/* A client message: a say command. */
static void client_frame(struct fake_chain *fc)
{
    fake_frame(&fc->codec, SG_DIR_C2S, SG_FRAME_MESSAGE);
    fc->codec.frame.sequence = 99;
    fc->codec.frame.ack = 4241;
    fake_msg(&fc->codec, SG_MSG_CHAT, "hi all");
}

static bool matches(const char *line, const char *pattern)
{
    regex_t re;
    bool ok;

    if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0) {
        fprintf(stderr, "bad pattern %s\n", pattern);
        return false;
    }
    ok = regexec(&re, line, 0, NULL, 0) == 0;
    regfree(&re);
    if (!ok)
        fprintf(stderr, "line does not match /%s/:\n  %s\n", pattern, line);
    return ok;
}

#define PREFIX "^[0-2][0-9]:[0-5][0-9]:[0-6][0-9]\\.[0-9]{3} test s1    127\\.0\\.0\\.1:50000 +"

/* ---- cases ---- */

static void case_text_messages(void)
{
    struct fake_chain fc;
    struct out o;

    out_init(&o);
    if (open_inspect(&fc, &o, "") < 0)
        return;
    server_frame(&fc);
    tap(&fc, false, -1, false);
    client_frame(&fc);
    tap(&fc, false, -1, false);
    fake_chain_close(&fc);
    out_read(&o);
    /* packet, print, snapshot (the repeat hidden); packet, chat */
    CHECK(o.n == 5);
    if (o.n == 5) {
        CHECK(matches(o.lines[0], PREFIX "s>c message  seq=4242    len=20    rack=7 msgs=3$"));
        CHECK(matches(o.lines[1], PREFIX "s>c   print +print +#0 +\\^1Red\\^7 joined\\\\n$"));
        CHECK(matches(o.lines[2], PREFIX "s>c   game +svc_snapshot +#123456 *$"));
        CHECK(matches(o.lines[3], PREFIX "c>s message  seq=99      len=20    ack=4241 msgs=1$"));
        CHECK(matches(o.lines[4], PREFIX "c>s   chat +chat +#0 +hi all$"));
        /* the columns line up: the message text starts at the same offset */
        CHECK(strstr(o.lines[1], "#0") - o.lines[1] == strstr(o.lines[4], "#0") - o.lines[4]);
    }
    out_free(&o);
}

static void case_text_packets(void)
{
    struct fake_chain fc;
    struct out o;

    out_init(&o);
    if (open_inspect(&fc, &o, "level packets") < 0)
        return;
    server_frame(&fc);
    tap(&fc, false, -1, true);
    fake_frame(&fc.codec, SG_DIR_C2S, SG_FRAME_OOB);
    fc.codec.frame.sequence = -1;
    tap(&fc, true, 0, false);
    fake_chain_close(&fc);
    out_read(&o);
    CHECK(o.n == 2);
    if (o.n == 2) {
        CHECK(matches(o.lines[0], PREFIX "s>c message  seq=4242 .* \\[re-encoded\\]$"));
        CHECK(matches(o.lines[1],
                      PREFIX "c>s oob      seq=-1 .*\\[DROPPED by filter #0 inspect\\]$"));
    }
    out_free(&o);
}

static void case_text_fields_raw(void)
{
    struct fake_chain fc;
    struct out o;

    out_init(&o);
    if (open_inspect(&fc, &o, "level fields") < 0)
        return;
    fake_frame(&fc.codec, SG_DIR_C2S, SG_FRAME_RAW);
    fc.codec.frame.sequence = -1;
    tap(&fc, false, -1, false);
    fake_chain_close(&fc);
    out_read(&o);
    CHECK(o.n == 3);
    if (o.n == 3) {
        CHECK(matches(o.lines[0], PREFIX "c>s raw      seq=-1      len=20   $"));
        CHECK(matches(o.lines[1], PREFIX "c>s   0000  ff ff ff ff 67 65 74 69 6e 66 6f 00 01 7f "
                                         "80 78  \\|\\.\\.\\.\\.getinfo\\.\\.\\.\\.x\\|$"));
        CHECK(matches(o.lines[2], PREFIX "c>s   0010  79 7a 0a 09 {38}\\|yz\\.\\.\\|$"));
    }
    out_free(&o);
}

static void case_json_fields(void)
{
    struct fake_chain fc;
    struct out o;
    struct jval *v;

    out_init(&o);
    if (open_inspect(&fc, &o, "format json\nlevel fields\nshow_repeats yes") < 0)
        return;
    server_frame(&fc);
    fc.codec.msgs[2].injected = true; /* "old news": a resent injection */
    fc.codec.frame.new_level = true;
    snprintf(fc.codec.frame.level, sizeof(fc.codec.frame.level), "q3dm17");
    tap(&fc, false, -1, true);
    client_frame(&fc);
    tap(&fc, true, 0, false);
    fake_chain_close(&fc);
    out_read(&o);
    CHECK(o.n == 2);
    if (o.n >= 1 && (v = jparse_line(o.lines[0])) != NULL) {
        const struct jval *msgs = jget(v, "msgs"), *m;
        CHECK(jis_num(v, "v", 1));
        CHECK(jget(v, "t") && jget(v, "t")->type == J_NUM && jget(v, "t")->num > 1.6e12);
        CHECK(matches(jget(v, "time") ? jget(v, "time")->str : "",
                      "^[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}$"));
        CHECK(jis_str(v, "route", "test"));
        CHECK(jis_num(v, "session", 1));
        CHECK(jis_str(v, "client", "127.0.0.1:50000"));
        CHECK(jis_str(v, "codec", "fake"));
        CHECK(jis_str(v, "dir", "s2c"));
        CHECK(jis_str(v, "frame", "message"));
        CHECK(jis_num(v, "len", 20));
        CHECK(jis_num(v, "seq", 4242));
        CHECK(jis_num(v, "ack", -1));
        CHECK(jis_num(v, "rack", 7));
        CHECK(jis_num(v, "nmsgs", 3));
        CHECK(jis_bool(v, "new_level", true));
        CHECK(jis_str(v, "level", "q3dm17"));
        CHECK(jis_bool(v, "dropped", false));
        CHECK(jis_num(v, "drop_filter", -1));
        CHECK(jis_bool(v, "reencoded", true));
        CHECK(jget(v, "game") == NULL); /* the fake codec has no dump */
        CHECK(jis_str(v, "hex", "ffffffff676574696e666f00017f8078797a0a09"));
        CHECK(msgs && msgs->type == J_ARR && msgs->n == 3);
        if (msgs && msgs->type == J_ARR && msgs->n == 3) {
            m = msgs->items[0];
            CHECK(jis_num(m, "i", 0));
            CHECK(jis_str(m, "kind", "print"));
            CHECK(jis_str(m, "name", "print"));
            CHECK(jis_num(m, "num", 0));
            CHECK(jis_str(m, "text", "^1Red^7 joined\n"));
            CHECK(jis_str(m, "command", "^1Red^7 joined\n"));
            CHECK(jis_bool(m, "repeat", false));
            CHECK(jis_bool(m, "changed", false));
            CHECK(jis_bool(m, "removed", false));
            CHECK(jis_bool(m, "injected", false));
            m = msgs->items[1];
            CHECK(jis_str(m, "kind", "game"));
            CHECK(jis_str(m, "name", "svc_snapshot"));
            CHECK(jis_num(m, "num", 123456));
            CHECK(jget(m, "text") && jget(m, "text")->type == J_NULL);
            m = msgs->items[2];
            CHECK(jis_num(m, "i", 2));
            CHECK(jis_bool(m, "repeat", true));
            CHECK(jis_bool(m, "injected", true));
        }
        jfree(v);
    } else {
        CHECK(!"first line parses");
    }
    if (o.n >= 2 && (v = jparse_line(o.lines[1])) != NULL) {
        CHECK(jis_str(v, "dir", "c2s"));
        CHECK(jis_num(v, "ack", 4241));
        CHECK(jis_bool(v, "dropped", true));
        CHECK(jis_num(v, "drop_filter", 0));
        CHECK(jis_str(v, "drop_label", "inspect"));
        CHECK(jis_bool(v, "new_level", false));
        CHECK(jget(v, "level") == NULL);
        CHECK(jget(v, "msgs") && jget(v, "msgs")->n == 1);
        jfree(v);
    } else {
        CHECK(!"second line parses");
    }
    out_free(&o);
}

static void case_json_packets(void)
{
    struct fake_chain fc;
    struct out o;
    struct jval *v;

    out_init(&o);
    if (open_inspect(&fc, &o, "format json\nlevel packets") < 0)
        return;
    server_frame(&fc);
    tap(&fc, false, -1, false);
    fake_chain_close(&fc);
    out_read(&o);
    CHECK(o.n == 1);
    if (o.n == 1 && (v = jparse_line(o.lines[0])) != NULL) {
        CHECK(jis_num(v, "v", 1));
        CHECK(jget(v, "msgs") == NULL);
        CHECK(jget(v, "hex") == NULL);
        CHECK(jis_num(v, "nmsgs", 3));
        jfree(v);
    }
    out_free(&o);
}

/*
 * Text a peer sent that is and is not UTF-8 (protocols/json.h's rule):
 * well-formed UTF-8 as it is, every other byte (Quake's high-bit text) as
 * \u00XX, quotes and control bytes escaped; with and without colour codes.
 */
static void case_json_bytes(void)
{
    static const char text[] = "^1d\xc3\xa9^7 \xe9\xc8\xc3\"\x01\x7f \xe2\x82\xac";
    static const char want[] = "\"text\":\"^1d\xc3\xa9^7 \\u00e9\\u00c8\\u00c3\\\"\\u0001"
                               "\\u007f \xe2\x82\xac\"";
    static const char stripped[] = "\"text\":\"d\xc3\xa9 \\u00e9\\u00c8\\u00c3\\\"\\u0001"
                                   "\\u007f \xe2\x82\xac\"";
    const char *confs[] = {"format json\nlevel messages",
                           "format json\nlevel messages\ncolors strip"};

    for (int k = 0; k < 2; k++) {
        struct fake_chain fc;
        struct out o;
        struct jval *v;

        out_init(&o);
        if (open_inspect(&fc, &o, confs[k]) < 0)
            return;
        fake_frame(&fc.codec, SG_DIR_C2S, SG_FRAME_MESSAGE);
        fake_msg(&fc.codec, SG_MSG_CHAT, text);
        tap(&fc, false, -1, false);
        fake_chain_close(&fc);
        out_read(&o);
        CHECK(o.n == 1);
        if (o.n == 1) {
            if (!strstr(o.lines[0], k ? stripped : want))
                fprintf(stderr, "no %s in\n  %s\n", k ? stripped : want, o.lines[0]);
            CHECK(strstr(o.lines[0], k ? stripped : want) != NULL);
            v = jparse_line(o.lines[0]);
            CHECK(v != NULL);
            if (v && jget(v, "msgs") && jget(v, "msgs")->n == 1)
                CHECK(jis_str(jget(v, "msgs")->items[0], "text",
                              k ? "d\xc3\xa9 \xe9\xc8\xc3\"\x01\x7f \xe2\x82\xac" : text));
            else
                CHECK(!"one message");
            jfree(v);
        }
        out_free(&o);
    }
}

static void case_direction(void)
{
    struct fake_chain fc;
    struct out o;

    out_init(&o);
    if (open_inspect(&fc, &o, "direction to_server\nlevel packets") < 0)
        return;
    server_frame(&fc);
    tap(&fc, false, -1, false);
    client_frame(&fc);
    tap(&fc, false, -1, false);
    server_frame(&fc);
    tap(&fc, false, -1, false);
    fake_chain_close(&fc);
    out_read(&o);
    CHECK(o.n == 1);
    if (o.n == 1)
        CHECK(matches(o.lines[0], PREFIX "c>s message  seq=99 "));
    out_free(&o);
}

static void case_kinds(void)
{
    struct fake_chain fc;
    struct out o;

    out_init(&o);
    if (open_inspect(&fc, &o, "kinds chat\nkinds centerprint") < 0)
        return;
    server_frame(&fc); /* print and game only: left out */
    tap(&fc, false, -1, false);
    client_frame(&fc); /* a chat */
    tap(&fc, false, -1, false);
    fake_frame(&fc.codec, SG_DIR_S2C, SG_FRAME_MESSAGE);
    fake_msg(&fc.codec, SG_MSG_PRINT, "not shown");
    fake_msg(&fc.codec, SG_MSG_CENTERPRINT, "FIGHT!");
    tap(&fc, false, -1, false);
    fake_chain_close(&fc);
    out_read(&o);
    CHECK(o.n == 4);
    if (o.n == 4) {
        CHECK(matches(o.lines[0], "c>s message "));
        CHECK(matches(o.lines[1], "c>s   chat +chat +#0 +hi all$"));
        CHECK(matches(o.lines[2], "s>c message .* msgs=2$"));
        CHECK(matches(o.lines[3], "s>c   centerprint +centerprint +#1 +FIGHT!$"));
    }
    out_free(&o);
}

static void case_repeats(void)
{
    struct fake_chain fc;
    struct out o;

    out_init(&o);
    if (open_inspect(&fc, &o, "show_repeats yes") < 0)
        return;
    server_frame(&fc);
    tap(&fc, false, -1, false);
    fake_chain_close(&fc);
    out_read(&o);
    CHECK(o.n == 4);
    if (o.n == 4)
        CHECK(matches(o.lines[3], "s>c   print +print +#2 +old news \\(repeat\\)$"));
    out_free(&o);
}

static void case_colors_clip(void)
{
    struct fake_chain fc;
    struct out o;

    out_init(&o);
    if (open_inspect(&fc, &o, "colors strip\nclip 8") < 0)
        return;
    fake_frame(&fc.codec, SG_DIR_S2C, SG_FRAME_MESSAGE);
    fake_msg(&fc.codec, SG_MSG_CHAT, "^1Red^7 says\x01 hello there, a long line");
    fake_msg(&fc.codec, SG_MSG_CHAT, "^2ok");
    fake_msg(&fc.codec, SG_MSG_CHAT, "^3hi");
    fc.codec.msgs[1].changed = true;
    fc.codec.msgs[0].dropped = true;
    fc.codec.msgs[2].injected = true;
    fc.codec.msgs[2].repeat = true;
    tap(&fc, false, -1, false);
    fake_chain_close(&fc);
    out_read(&o);
    CHECK(o.n == 3);
    if (o.n == 3) {
        /* 8 input bytes read: "^1Red^7 " -> "Red "; the rest counted */
        CHECK(matches(o.lines[1],
                      "s>c   chat +chat +#0 +Red \\.\\.\\.\\[\\+30 bytes\\] \\(removed\\)$"));
        CHECK(matches(o.lines[2], "s>c   chat +chat +#1 +ok \\(changed\\)$"));
    }
    out_free(&o);

    /* an injected message is marked, its resends too (shown with show_repeats) */
    out_init(&o);
    if (open_inspect(&fc, &o, "show_repeats yes") < 0)
        return;
    fake_frame(&fc.codec, SG_DIR_S2C, SG_FRAME_MESSAGE);
    fake_msg(&fc.codec, SG_MSG_PRINT, "new");
    fake_msg(&fc.codec, SG_MSG_PRINT, "again");
    fc.codec.msgs[0].injected = true;
    fc.codec.msgs[1].injected = true;
    fc.codec.msgs[1].repeat = true;
    tap(&fc, false, -1, false);
    fake_chain_close(&fc);
    out_read(&o);
    CHECK(o.n == 3);
    if (o.n == 3) {
        CHECK(matches(o.lines[1], "s>c   print +print +#0 +new \\(injected\\)$"));
        CHECK(matches(o.lines[2], "s>c   print +print +#1 +again \\(injected\\) \\(repeat\\)$"));
    }
    out_free(&o);

    /* control characters are escaped, colours kept by default */
    out_init(&o);
    if (open_inspect(&fc, &o, "") < 0)
        return;
    fake_frame(&fc.codec, SG_DIR_S2C, SG_FRAME_MESSAGE);
    fake_msg(&fc.codec, SG_MSG_CHAT, "^3a\tb\x01\xe9\\");
    tap(&fc, false, -1, false);
    fake_chain_close(&fc);
    out_read(&o);
    CHECK(o.n == 2);
    if (o.n == 2)
        CHECK(matches(o.lines[1], " \\^3a\\\\tb\\\\x01\\\\xe9\\\\\\\\$"));
    out_free(&o);
}

/* A codec with a dump hook: its lines join the inspector's. */
static int dump_calls;
static int fake_dump(void *state, const struct sg_frame *frame, enum sg_dump_level level, bool json,
                     FILE *out)
{
    dump_calls++;
    if (json)
        return fprintf(out, "{\"level\":%d,\"seq\":%d}", (int)level, (int)frame->sequence);
    if (level == SG_DUMP_FIELDS)
        return fprintf(out, "fake header seq=%d\nfield a=1\nfield b=2\n", (int)frame->sequence);
    return fprintf(out, "fake header seq=%d\n", (int)frame->sequence);
}

static void case_codec_dump(void)
{
    struct sg_codec dumping = fake_codec_impl;
    const char *confs[] = {"level packets", "level fields", "format json\nlevel fields"};
    struct fake_chain fc;
    struct out o;
    struct jval *v;

    dumping.dump = fake_dump;
    for (int k = 0; k < 3; k++) {
        out_init(&o);
        if (open_inspect(&fc, &o, confs[k]) < 0)
            return;
        fc.session.codec = &dumping;
        dump_calls = 0;
        server_frame(&fc);
        tap(&fc, false, -1, false);
        fake_chain_close(&fc);
        out_read(&o);
        CHECK(dump_calls == 1);
        if (k == 0) {
            CHECK(o.n == 1);
            if (o.n == 1)
                CHECK(matches(o.lines[0], "s>c message  seq=4242 .* \\| fake header seq=4242$"));
        } else if (k == 1) {
            CHECK(o.n == 4);
            if (o.n == 4) {
                CHECK(matches(o.lines[0], "s>c message  seq=4242 .*msgs=3$"));
                CHECK(matches(o.lines[1], PREFIX "s>c   fake header seq=4242$"));
                CHECK(matches(o.lines[3], PREFIX "s>c   field b=2$"));
            }
        } else {
            CHECK(o.n == 1);
            if (o.n == 1 && (v = jparse_line(o.lines[0])) != NULL) {
                const struct jval *g = jget(v, "game");
                CHECK(g && g->type == J_OBJ);
                CHECK(jis_num(g, "level", SG_DUMP_FIELDS));
                CHECK(jis_num(g, "seq", 4242));
                CHECK(jget(v, "hex") == NULL);
                jfree(v);
            }
        }
        out_free(&o);
    }
}

static void case_unwritable(void)
{
    struct fake_chain fc;
    char err[512] = "";
    const char *p;
    int n = 0;

    /* a file that cannot be opened: the chain is not created, the reason is clear */
    CHECK(fake_chain_open(&fc, "inspect", "output /nonexistent-dir/x.log", err, sizeof(err)) < 0);
    CHECK(strstr(err, "filter 'inspect'") != NULL);
    CHECK(strstr(err, "cannot open the output '/nonexistent-dir/x.log' for appending: No such "
                      "file or directory") != NULL);
    if (failures)
        fprintf(stderr, "error: %s\n", err);

    /* a write error: logged once, inspection stops, the frames still pass */
    if (fake_chain_open(&fc, "inspect", "output /dev/full\nlevel packets", NULL, 0) < 0) {
        failures++;
        return;
    }
    for (int i = 0; i < 2000; i++) { /* more than a buffer-full */
        server_frame(&fc);
        CHECK(fake_chain_run(&fc, 1000 + (uint64_t)i, NULL) == SG_FILTER_PASS);
    }
    sg_chain_flush(fc.chain);
    server_frame(&fc);
    fake_chain_run(&fc, 5000, NULL);
    for (p = fc.log; (p = strstr(p, "cannot write to the output '/dev/full'")) != NULL; p++)
        n++;
    CHECK(n == 1);
    CHECK(strstr(fc.log, "No space left on device; inspection stops (said once)") != NULL);
    if (failures)
        fprintf(stderr, "log: %s\n", fc.log);
    fake_chain_close(&fc);
}

static void case_bad_config(void)
{
    struct fake_chain fc;
    char err[512] = "";

    CHECK(fake_chain_open(&fc, "inspect", "level everything", err, sizeof(err)) < 0);
    CHECK(strstr(err, "everything") != NULL && strstr(err, "packets") != NULL);
    err[0] = '\0';
    CHECK(fake_chain_open(&fc, "inspect", "kinds chat,shout", err, sizeof(err)) < 0);
    CHECK(strstr(err, "unknown message kind 'shout'") != NULL);
    err[0] = '\0';
    CHECK(fake_chain_open(&fc, "inspect", "format yaml", err, sizeof(err)) < 0);
    CHECK(strstr(err, "yaml") != NULL && strstr(err, "json") != NULL);
    err[0] = '\0';
    CHECK(fake_chain_open(&fc, "inspect", "colors maybe", err, sizeof(err)) < 0);
    CHECK(strstr(err, "maybe") != NULL && strstr(err, "strip") != NULL);
    err[0] = '\0';
    CHECK(fake_chain_open(&fc, "inspect", "clip -1", err, sizeof(err)) < 0);
    CHECK(strstr(err, "clip") != NULL);
    if (failures)
        fprintf(stderr, "last error: %s\n", err);
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"text_messages", case_text_messages},
        {"text_packets", case_text_packets},
        {"text_fields_raw", case_text_fields_raw},
        {"json_fields", case_json_fields},
        {"json_packets", case_json_packets},
        {"json_bytes", case_json_bytes},
        {"direction", case_direction},
        {"kinds", case_kinds},
        {"repeats", case_repeats},
        {"colors_clip", case_colors_clip},
        {"codec_dump", case_codec_dump},
        {"unwritable", case_unwritable},
        {"bad_config", case_bad_config},
    };

    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
