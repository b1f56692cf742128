/*
 * `slipgate demo ...`: offline tools over Quake 3 demo files, built on the
 * message layer of protocols/q3 (the same decoder the proxy runs live).
 *
 *   demo info FILE...                  protocol, map, game, server, players,
 *                                      duration, counts, errors
 *   demo dump FILE [--json]            every message decoded, one per line
 *   demo reencode IN OUT               decode + encode every message; how many
 *                                      came out byte-identical
 *   demo cut IN OUT --from MS --to MS  the span of server time [from, to] as a
 *                                      playable demo (synthesized gamestate +
 *                                      non-delta first snapshot)
 *
 * Exit codes: 0 ok, 1 errors found or I/O failure, 2 usage.
 */
#include "proxy/commands.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/error.h"
#include "protocols/q3/demo.h"
#include "protocols/q3/dump.h"
#include "protocols/q3/state.h"
#include "protocols/q3/svmsg.h"

#define EXIT_ERRORS 1
#define EXIT_USAGE  2

static const char usage_text[] =
    "usage: slipgate demo info FILE...\n"
    "       slipgate demo dump FILE [--json]\n"
    "       slipgate demo reencode IN OUT\n"
    "       slipgate demo cut IN OUT --from MS --to MS\n"
    "FILE is a Quake 3 demo (.dm_66, .dm_67, .dm_68, .dm_71); MS is server time in ms.\n";

/* Print a usage error and return the usage exit code. */
__attribute__((format(printf, 1, 2))) static int usage(const char *fmt, ...);

static int usage(const char *fmt, ...)
{
    va_list ap;

    fputs("slipgate demo: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n", stderr);
    fputs(usage_text, stderr);
    return EXIT_USAGE;
}

/* Open a demo for reading, reporting failures. */
static int open_demo(struct sg_q3_demo_reader *r, const char *path)
{
    int err = sg_q3_demo_reader_open(r, path);

    if (err < 0)
        fprintf(stderr, "slipgate demo: %s: %s\n", path, sg_strerror(err));
    return err;
}

/* Everything `info` reports about one file. */
struct info {
    uint64_t messages, gamestates, snapshots, decode_errors, nodelta;
    int32_t first_time, last_time;
    bool have_time;
    int end;
    size_t partial;
};

/* Copy `s` without Quake color codes (^X). */
static void clean_name(const char *s, char *out, size_t cap)
{
    size_t n = 0;

    for (; *s && n + 1 < cap; s++) {
        if (s[0] == '^' && s[1]) {
            s++;
            continue;
        }
        out[n++] = *s;
    }
    out[n] = 0;
}

/* Decode a whole file through one state, gathering counts and times. */
static int scan(struct sg_q3_demo_reader *r, struct sg_q3_state *st, struct info *in)
{
    static uint8_t buf[SG_Q3_MAX_MSGLEN];
    struct sg_q3_svmsg msg;
    int err;

    memset(in, 0, sizeof(*in));
    sg_q3_svmsg_init(&msg);
    for (;;) {
        int32_t seq;
        size_t len;
        int perr;

        err = sg_q3_demo_read(r, &seq, buf, &len);
        if (err <= 0)
            break;
        perr = sg_q3_parse_server_message(st, seq, buf, len, &msg);
        in->messages++;
        in->decode_errors += perr < 0;
        in->gamestates += sg_q3_svmsg_count(&msg, SG_Q3_SVC_GAMESTATE);
        for (uint32_t i = 0; i < msg.num_snaps; i++) {
            const struct sg_q3_snap *s = &msg.snaps[i];

            in->snapshots++;
            in->nodelta += s->status == SG_E_NODELTA;
            if (!in->have_time)
                in->first_time = s->server_time;
            in->last_time = s->server_time;
            in->have_time = true;
        }
    }
    in->end = err;
    in->partial = r->partial;
    sg_q3_svmsg_finish(&msg);
    return err == -ENOMEM ? err : 0;
}

/* The players named in the configstrings at the end of the file. */
static void print_players(const struct sg_q3_state *st)
{
    int count = 0;

    printf("players:      ");
    for (int i = 0; i < SG_Q3_MAX_CLIENTS; i++) {
        char name[64], clean[64];

        if (!sg_q3_info_value(sg_q3_state_configstring(st, SG_Q3_CS_PLAYERS + i), "n", name,
                              sizeof(name)))
            continue;
        clean_name(name, clean, sizeof(clean));
        printf("%s%d:%s", count++ ? ", " : "", i, clean);
    }
    printf("%s\n", count ? "" : "(none)");
}

/* `demo info` for one file; returns 0, or 1 if errors were found. */
static int info_one(const char *path)
{
    struct sg_q3_demo_reader r;
    struct sg_q3_state *st;
    struct info in;
    char map[256], game[256], version[256], proto[32], fsgame[256];
    const char *serverinfo;
    uint64_t errors;

    if (open_demo(&r, path) < 0)
        return EXIT_ERRORS;
    st = sg_q3_state_create(r.protocol);
    if (!st || scan(&r, st, &in) < 0) {
        fprintf(stderr, "slipgate demo: %s: out of memory\n", path);
        sg_q3_state_destroy(st);
        sg_q3_demo_reader_finish(&r);
        return EXIT_ERRORS;
    }

    /* what the configstrings say */
    serverinfo = sg_q3_state_configstring(st, SG_Q3_CS_SERVERINFO);
    sg_q3_info_value(serverinfo, "mapname", map, sizeof(map));
    sg_q3_info_value(serverinfo, "gamename", game, sizeof(game));
    sg_q3_info_value(serverinfo, "version", version, sizeof(version));
    if (!sg_q3_info_value(serverinfo, "protocol", proto, sizeof(proto)))
        sg_q3_info_value(serverinfo, "com_protocol", proto, sizeof(proto)); /* ioquake3 */
    sg_q3_info_value(sg_q3_state_configstring(st, SG_Q3_CS_SYSTEMINFO), "fs_game", fsgame,
                     sizeof(fsgame));
    errors = in.decode_errors + in.nodelta + (in.end != 0);

    printf("file:         %s\n", path);
    printf("protocol:     %s (file name: %d)\n", proto[0] ? proto : "?", r.protocol);
    printf("map:          %s\n", map[0] ? map : "?");
    printf("game:         %s%s%s\n", game[0] ? game : "?", fsgame[0] ? ", fs_game " : "", fsgame);
    printf("server:       %s\n", version[0] ? version : "?");
    print_players(st);
    if (in.have_time)
        printf("duration:     %.3f s (server time %d .. %d)\n",
               ((double)in.last_time - (double)in.first_time) / 1000.0, in.first_time,
               in.last_time);
    else
        printf("duration:     ? (no snapshots)\n");
    printf("messages:     %" PRIu64 " (%" PRIu64 " gamestates, %" PRIu64 " snapshots)\n",
           in.messages, in.gamestates, in.snapshots);
    printf("errors:       %" PRIu64, errors);
    if (in.decode_errors)
        printf(", %" PRIu64 " messages failed to decode", in.decode_errors);
    if (in.nodelta)
        printf(", %" PRIu64 " snapshots with a missing delta base", in.nodelta);
    if (in.end)
        printf(", file ends without end marker (%s, %zu stray bytes)", sg_errname(in.end),
               in.partial);
    printf("\n");

    sg_q3_state_destroy(st);
    sg_q3_demo_reader_finish(&r);
    return errors ? EXIT_ERRORS : 0;
}

/* demo info FILE... */
static int cmd_info(int argc, char **argv)
{
    int rc = 0;

    if (argc < 2)
        return usage("info needs at least one FILE");
    for (int i = 1; i < argc; i++) {
        if (i > 1)
            printf("\n");
        if (info_one(argv[i]) != 0)
            rc = EXIT_ERRORS;
    }
    return rc;
}

/* demo dump FILE [--json] */
static int cmd_dump(int argc, char **argv)
{
    enum sg_q3_dump_format format = SG_Q3_DUMP_TEXT;
    const char *path = NULL;
    struct sg_q3_demo_reader r;
    struct sg_q3_dump_stats stats;
    int err;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            format = SG_Q3_DUMP_JSON;
        else if (argv[i][0] == '-' && argv[i][1])
            return usage("dump: unknown option %s", argv[i]);
        else if (path)
            return usage("dump takes one FILE");
        else
            path = argv[i];
    }
    if (!path)
        return usage("dump needs a FILE");
    if (open_demo(&r, path) < 0)
        return EXIT_ERRORS;
    err = sg_q3_dump_demo(stdout, format, &r, &stats);
    sg_q3_demo_reader_finish(&r);
    if (err < 0) {
        fprintf(stderr, "slipgate demo: %s: %s\n", path, sg_strerror(err));
        return EXIT_ERRORS;
    }
    return stats.decode_errors || stats.nodelta || stats.end ? EXIT_ERRORS : 0;
}

/* Open IN and create OUT, reporting failures. */
static int open_pair(struct sg_q3_demo_reader *r, struct sg_q3_demo_writer *w, const char *in,
                     const char *out)
{
    int err;

    if (open_demo(r, in) < 0)
        return -1;
    err = sg_q3_demo_writer_open(w, out);
    if (err < 0) {
        fprintf(stderr, "slipgate demo: %s: %s\n", out, sg_strerror(err));
        sg_q3_demo_reader_finish(r);
        return -1;
    }
    return 0;
}

/* demo reencode IN OUT */
static int cmd_reencode(int argc, char **argv)
{
    struct sg_q3_demo_reader r;
    struct sg_q3_demo_writer w;
    struct sg_q3_demo_stats cs;
    int err, ferr;

    if (argc != 3)
        return usage("reencode takes IN and OUT");
    if (open_pair(&r, &w, argv[1], argv[2]) < 0)
        return EXIT_ERRORS;
    err = sg_q3_demo_reencode(&r, &w, &cs);
    ferr = sg_q3_demo_writer_finish(&w);
    sg_q3_demo_reader_finish(&r);
    if (err < 0 || ferr < 0) {
        fprintf(stderr, "slipgate demo: reencode: %s\n", sg_strerror(err < 0 ? err : ferr));
        return EXIT_ERRORS;
    }
    printf("%" PRIu64 " messages, %" PRIu64 " byte-identical, %" PRIu64 " failed to decode%s\n",
           cs.messages, cs.identical, cs.decode_errors,
           cs.end ? " (input ends without end marker)" : "");
    return cs.identical == cs.messages && !cs.end ? 0 : EXIT_ERRORS;
}

/* Parse a server time argument. */
static bool parse_time(const char *s, int32_t *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < INT32_MIN || v > INT32_MAX)
        return false;
    *out = (int32_t)v;
    return true;
}

/* demo cut IN OUT --from MS --to MS */
static int cmd_cut(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    int32_t from = INT32_MIN, to = INT32_MAX;
    bool have_from = false, have_to = false;
    struct sg_q3_demo_reader r;
    struct sg_q3_demo_writer w;
    struct sg_q3_demo_stats cs;
    int err, ferr;

    /* arguments */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--from") == 0 || strcmp(argv[i], "--to") == 0) {
            bool is_from = argv[i][2] == 'f';

            if (i + 1 >= argc || !parse_time(argv[i + 1], is_from ? &from : &to))
                return usage("cut: %s needs a server time in milliseconds", argv[i]);
            *(is_from ? &have_from : &have_to) = true;
            i++;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return usage("cut: unknown option %s", argv[i]);
        } else if (!in) {
            in = argv[i];
        } else if (!out) {
            out = argv[i];
        } else {
            return usage("cut takes IN and OUT");
        }
    }
    if (!in || !out || !have_from || !have_to)
        return usage("cut needs IN, OUT, --from and --to");
    if (to < from)
        return usage("cut: --to is before --from");

    /* copy the span */
    if (open_pair(&r, &w, in, out) < 0)
        return EXIT_ERRORS;
    err = sg_q3_demo_cut(&r, &w, from, to, &cs);
    ferr = sg_q3_demo_writer_finish(&w);
    sg_q3_demo_reader_finish(&r);
    if (err < 0 || ferr < 0) {
        fprintf(stderr, "slipgate demo: cut: %s\n", sg_strerror(err < 0 ? err : ferr));
        return EXIT_ERRORS;
    }
    printf("wrote %" PRIu64 " messages (%" PRIu64 " re-encoded) from %" PRIu64 " read%s\n",
           cs.written, cs.rewritten, cs.messages, cs.started ? "" : "; no snapshot in that span");
    return !cs.started || cs.decode_errors ? EXIT_ERRORS : 0;
}

int sg_cmd_demo(int argc, char **argv)
{
    const char *sub = argc > 1 ? argv[1] : NULL;

    if (!sub)
        return usage("missing subcommand");
    if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0 || strcmp(sub, "help") == 0) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (strcmp(sub, "info") == 0)
        return cmd_info(argc - 1, argv + 1);
    if (strcmp(sub, "dump") == 0)
        return cmd_dump(argc - 1, argv + 1);
    if (strcmp(sub, "reencode") == 0)
        return cmd_reencode(argc - 1, argv + 1);
    if (strcmp(sub, "cut") == 0)
        return cmd_cut(argc - 1, argv + 1);
    return usage("unknown subcommand '%s'", sub);
}
