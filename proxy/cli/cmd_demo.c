/*
 * `slipgate demo ...`: offline tools over demo files, for every game whose
 * codec has a demo reader (codec.h, struct sg_demo_impl).  The file's game
 * comes from the codec table: its extension names a reader and its first
 * bytes must agree with it; a file with an unknown extension goes to the
 * reader whose probe claims its first bytes; `--protocol NAME` forces one.
 * Everything game-specific (decoding, what `info` reports, the dump's
 * lines, re-encoding, cutting) is the reader's; this file only picks it and
 * opens the files.
 *
 *   demo info FILE...                  what the file holds (per game)
 *   demo dump FILE [--json]            every message decoded, one per line
 *   demo reencode IN OUT               decode + encode every message; how many
 *                                      came out byte-identical
 *   demo cut IN OUT --from MS --to MS  the span of server time [from, to] as a
 *                                      playable demo (games that support it)
 *   demo verify FILE [--key K|--keyfile F] [--json]
 *                                      FILE against its FILE.sig (any game, and
 *                                      pcap captures: proxy/cmd_sign.c)
 *
 * Exit codes: 0 ok, 1 errors found, a file no reader reads, or I/O
 * failure, 2 usage.
 */
#include "proxy/cli/commands.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/codec.h"
#include "protocols/error.h"

#define EXIT_ERRORS 1
#define EXIT_USAGE  2

static const char usage_text[] =
    "usage: slipgate demo info FILE...\n"
    "       slipgate demo dump FILE [--json]\n"
    "       slipgate demo reencode IN OUT\n"
    "       slipgate demo cut IN OUT --from MS --to MS\n"
    "       slipgate demo verify FILE [--key PUBKEY | --keyfile F.pub] [--json]\n"
    "  --protocol NAME, -p NAME  read FILE as that game's demo, whatever its name says\n"
    "The game comes from FILE's extension and first bytes; MS is server time in ms.\n"
    "verify checks a signed recording (a demo of any game, or a pcap capture) against\n"
    "FILE.sig: authentic, whole / authentic up to byte N / modified at or after byte N /\n"
    "signed by another key / no signature; exit 0 only when authentic.\n";

/* The list of readable and not-yet-readable demo formats, after the usage text. */
static void print_formats(FILE *out)
{
    const char *game, *exts;

    fputs("Demo readers (per game, from the codec table):\n", out);
    for (int i = 0; sg_codecs[i]; i++) {
        const struct sg_demo_impl *d = sg_codecs[i]->demo_reader;

        if (!d)
            continue;
        fprintf(out, "  %-4s", sg_codecs[i]->name);
        for (int j = 0; d->extensions[j]; j++)
            fprintf(out, "%s.%s", j ? ", " : " ", d->extensions[j]);
        fprintf(out, "%s\n", d->cut ? "" : " (no cut)");
    }
    for (int i = 0; (game = sg_codec_demo_unreadable_at(i, &exts)); i++)
        fprintf(out, "  %-4s %s: not readable yet\n", game, exts);
}

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

/* A game's name for people: its description up to " (" or ":" ("Quake 3"). */
static void game_title(const struct sg_codec *c, char *buf, size_t cap)
{
    size_t n = strcspn(c->description, "(:");

    while (n > 0 && c->description[n - 1] == ' ')
        n--;
    snprintf(buf, cap, "%.*s", (int)n, c->description);
}

/* "q3 (.dm_66, .dm_67, ...)" for every game with a reader, then the ones without. */
static void print_known(FILE *out)
{
    const char *game, *exts;
    int n = 0;

    for (int i = 0; sg_codecs[i]; i++) {
        const struct sg_demo_impl *d = sg_codecs[i]->demo_reader;

        if (!d)
            continue;
        fprintf(out, "%s%s (", n++ ? "; " : "", sg_codecs[i]->name);
        for (int j = 0; d->extensions[j]; j++)
            fprintf(out, "%s.%s", j ? ", " : "", d->extensions[j]);
        fputc(')', out);
    }
    if (!n)
        fputs("none", out);
    for (int i = 0; (game = sg_codec_demo_unreadable_at(i, &exts)); i++)
        fprintf(out, "%s%s (%s)", i ? ", " : "; not readable yet: ", game, exts);
}

/* The extension of `path`'s file name, without the dot ("" when none). */
static const char *file_ext(const char *path)
{
    const char *base = strrchr(path, '/');
    const char *dot;

    base = base ? base + 1 : path;
    dot = strrchr(base, '.');
    return dot && dot != base ? dot + 1 : "";
}

/* Say that `c` has no demo reader; returns NULL. */
static const struct sg_codec *no_reader(const char *path, const struct sg_codec *c)
{
    char title[64];

    game_title(c, title, sizeof(title));
    fprintf(stderr, "slipgate demo: %s: %s (%s) demos are not readable yet; readable now: ", path,
            title, c->name);
    print_known(stderr);
    fputs("\n", stderr);
    return NULL;
}

static const struct sg_codec *pick_by_head(const char *path, const uint8_t *head, size_t n,
                                           const struct sg_codec *forced);

/*
 * The game whose reader reads `f` (named `path`), or NULL after saying why
 * not.  `forced` is the --protocol game, or NULL.  Leaves `f` at offset 0.
 */
static const struct sg_codec *pick_reader(FILE *f, const char *path, const struct sg_codec *forced)
{
    uint8_t *head = malloc(SG_DEMO_HEAD_MAX);
    size_t n = head ? fread(head, 1, SG_DEMO_HEAD_MAX, f) : 0;
    const struct sg_codec *c;

    if (!head || ferror(f) || fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "slipgate demo: %s: %s\n", path,
                sg_strerror(!head   ? -ENOMEM
                            : errno ? -errno
                                    : -EIO));
        free(head);
        return NULL;
    }
    c = pick_by_head(path, head, n, forced);
    free(head);
    return c;
}

/* pick_reader() once the file's first `n` bytes are in `head`. */
static const struct sg_codec *pick_by_head(const char *path, const uint8_t *head, size_t n,
                                           const struct sg_codec *forced)
{
    const char *ext = file_ext(path), *game, *exts;
    const struct sg_codec *c;
    char title[64];

    if (forced)
        return forced->demo_reader ? forced : no_reader(path, forced);

    /* the extension names a reader: the first bytes must not contradict it */
    c = sg_codec_demo_ext(ext);
    if (c && c->demo_reader->probe(head, n) != SG_DEMO_PROBE_NO)
        return c;
    if (c) {
        game_title(c, title, sizeof(title));
        fprintf(stderr,
                "slipgate demo: %s: its extension .%s says a %s demo, but its first bytes are "
                "not one (use --protocol NAME to read it as a given game's demo)\n",
                path, ext, title);
        return NULL;
    }

    /* a game whose demos cannot be read yet */
    game = sg_codec_demo_unreadable(ext, &exts);
    if (game) {
        c = sg_codec_find(game);
        if (c)
            return no_reader(path, c);
        fprintf(stderr, "slipgate demo: %s: %s demos (%s) are not readable yet\n", path, game,
                exts);
        return NULL;
    }

    /* an unknown extension: the first bytes decide */
    for (int i = 0; sg_codecs[i]; i++)
        if (sg_codecs[i]->demo_reader &&
            sg_codecs[i]->demo_reader->probe(head, n) == SG_DEMO_PROBE_YES)
            return sg_codecs[i];
    fprintf(stderr,
            "slipgate demo: no codec reads %s: its extension %s%s and its first bytes match no "
            "known demo format; known: ",
            path, ext[0] ? "." : "(none)", ext);
    print_known(stderr);
    fputs("\n", stderr);
    return NULL;
}

/* Open `path` and find its reader; NULL (after saying why) when either fails. */
static FILE *open_demo(const char *path, const struct sg_codec *forced, const struct sg_codec **c)
{
    FILE *f = fopen(path, "rb");

    if (!f) {
        fprintf(stderr, "slipgate demo: %s: %s\n", path, sg_strerror(-errno));
        return NULL;
    }
    *c = pick_reader(f, path, forced);
    if (!*c) {
        fclose(f);
        return NULL;
    }
    return f;
}

/* A hook's result as an exit code, telling a stopping error as "slipgate demo: WHAT: ERROR". */
static int result(int rc, const char *what)
{
    if (rc < 0) {
        fprintf(stderr, "slipgate demo: %s: %s\n", what, sg_strerror(rc));
        return EXIT_ERRORS;
    }
    return rc > 0 ? EXIT_ERRORS : 0;
}

/* demo info FILE... */
static int cmd_info(int argc, char **argv, const struct sg_codec *forced)
{
    int rc = 0;

    if (argc < 2)
        return usage("info needs at least one FILE");
    for (int i = 1; i < argc; i++) {
        const struct sg_codec *c;
        FILE *f;

        if (i > 1)
            printf("\n");
        f = open_demo(argv[i], forced, &c);
        if (!f) {
            rc = EXIT_ERRORS;
            continue;
        }
        if (result(c->demo_reader->info(f, argv[i], stdout), argv[i]) != 0)
            rc = EXIT_ERRORS;
        fclose(f);
    }
    return rc;
}

/* demo dump FILE [--json] */
static int cmd_dump(int argc, char **argv, const struct sg_codec *forced)
{
    const char *path = NULL;
    const struct sg_codec *c;
    bool json = false;
    FILE *f;
    int rc;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (argv[i][0] == '-' && argv[i][1])
            return usage("dump: unknown option %s", argv[i]);
        else if (path)
            return usage("dump takes one FILE");
        else
            path = argv[i];
    }
    if (!path)
        return usage("dump needs a FILE");
    f = open_demo(path, forced, &c);
    if (!f)
        return EXIT_ERRORS;
    rc = result(c->demo_reader->dump(f, path, json, stdout), path);
    fclose(f);
    return rc;
}

/* Open IN (finding its reader) and create OUT, reporting failures. */
static int open_pair(const char *in, const char *out, const struct sg_codec *forced,
                     const struct sg_codec **c, FILE **inf, FILE **outf)
{
    *inf = open_demo(in, forced, c);
    if (!*inf)
        return -1;
    *outf = fopen(out, "wb");
    if (!*outf) {
        fprintf(stderr, "slipgate demo: %s: %s\n", out, sg_strerror(-errno));
        fclose(*inf);
        return -1;
    }
    return 0;
}

/* Close OUT, telling a write error the hook could not see. */
static int close_out(FILE *outf, int rc, const char *what)
{
    if (fclose(outf) != 0 && rc >= 0)
        rc = -errno;
    return result(rc, what);
}

/* demo reencode IN OUT */
static int cmd_reencode(int argc, char **argv, const struct sg_codec *forced)
{
    const struct sg_codec *c;
    FILE *inf, *outf;
    int rc;

    if (argc != 3)
        return usage("reencode takes IN and OUT");
    if (open_pair(argv[1], argv[2], forced, &c, &inf, &outf) < 0)
        return EXIT_ERRORS;
    rc = c->demo_reader->reencode(inf, argv[1], outf, stdout);
    fclose(inf);
    return close_out(outf, rc, "reencode");
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
static int cmd_cut(int argc, char **argv, const struct sg_codec *forced)
{
    const char *in = NULL, *out = NULL;
    int32_t from = INT32_MIN, to = INT32_MAX;
    bool have_from = false, have_to = false;
    const struct sg_codec *c;
    FILE *inf, *outf;
    int rc;

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

    /* the game's reader must know how to cut before OUT is created */
    inf = open_demo(in, forced, &c);
    if (!inf)
        return EXIT_ERRORS;
    if (!c->demo_reader->cut) {
        char title[64];

        game_title(c, title, sizeof(title));
        fprintf(stderr, "slipgate demo: %s: %s demos cannot be cut yet\n", in, title);
        fclose(inf);
        return EXIT_ERRORS;
    }
    fclose(inf);

    /* copy the span */
    if (open_pair(in, out, c, &c, &inf, &outf) < 0)
        return EXIT_ERRORS;
    rc = c->demo_reader->cut(inf, in, outf, from, to, stdout);
    fclose(inf);
    return close_out(outf, rc, "cut");
}

/* Take `--protocol NAME` / `-p NAME` out of argv; 0, or the usage exit code. */
static int take_protocol(int *argc, char **argv, const struct sg_codec **forced)
{
    int n = 0;

    for (int i = 0; i < *argc; i++) {
        if (strcmp(argv[i], "--protocol") != 0 && strcmp(argv[i], "-p") != 0) {
            argv[n++] = argv[i];
            continue;
        }
        if (i + 1 >= *argc)
            return usage("%s needs a game name", argv[i]);
        *forced = sg_codec_find(argv[++i]);
        if (!*forced) {
            fprintf(stderr, "slipgate demo: unknown protocol '%s'; known:", argv[i]);
            for (int j = 0; sg_codecs[j]; j++)
                fprintf(stderr, " %s", sg_codecs[j]->name);
            fputs("\n", stderr);
            fputs(usage_text, stderr);
            return EXIT_USAGE;
        }
    }
    *argc = n;
    return 0;
}

int sg_cmd_demo(int argc, char **argv)
{
    const struct sg_codec *forced = NULL;
    const char *sub = argc > 1 ? argv[1] : NULL;
    int rc;

    if (!sub)
        return usage("missing subcommand");
    if (strcmp(sub, "verify") == 0) /* any file with a .sig: no game reader involved */
        return sg_cmd_demo_verify(argc - 1, argv + 1);
    rc = take_protocol(&argc, argv, &forced);
    if (rc != 0)
        return rc;
    sub = argc > 1 ? argv[1] : NULL;
    if (!sub)
        return usage("missing subcommand");
    if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0 || strcmp(sub, "help") == 0) {
        fputs(usage_text, stdout);
        print_formats(stdout);
        return 0;
    }
    if (strcmp(sub, "info") == 0)
        return cmd_info(argc - 1, argv + 1, forced);
    if (strcmp(sub, "dump") == 0)
        return cmd_dump(argc - 1, argv + 1, forced);
    if (strcmp(sub, "reencode") == 0)
        return cmd_reencode(argc - 1, argv + 1, forced);
    if (strcmp(sub, "cut") == 0)
        return cmd_cut(argc - 1, argv + 1, forced);
    return usage("unknown subcommand '%s'", sub);
}
