/*
 * slipgate's command line.
 *
 *   slipgate [OPTIONS] [+set NAME VALUE]...     run the proxy
 *   slipgate demo ...                           offline demo tools
 *   slipgate pcap decode FILE ...               sessions in a capture
 *   slipgate filters [-c CONFIG] [--json]       the filters and their directives
 *   slipgate doctor [-c CONFIG] ...             what would go wrong, checked now
 *   slipgate play [GAME] [OPTIONS]              the local playground
 *
 * Exit status: 0 success, 1 runtime or configuration error, 2 usage error.
 */
#include "proxy/addr.h"
#include "protocols/json.h"
#include "proxy/app.h"
#include "proxy/cli/commands.h"
#include "proxy/conf.h"
#include "proxy/preflight.h"
#include "sg_version.h"

#include <errno.h>
#include <getopt.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pcap/pcap.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sodium.h>
#include <unistd.h>
#include <uv.h>
#include <zlib.h>

extern char **environ;

static const char usage_text[] =
    "Usage: slipgate [OPTIONS] [+set NAME VALUE]...\n"
    "       slipgate demo COMMAND ...      demo tools, per game (slipgate demo --help)\n"
    "       slipgate pcap decode FILE ...  decode the game sessions in a capture\n"
    "       slipgate keygen [--out PREFIX]  a key pair for signing recordings (sign_key)\n"
    "       slipgate filters [-c CONFIG] [--json]\n"
    "                                      list the filters and their directives\n"
    "       slipgate doctor [-c CONFIG]    what would go wrong: ports in use, servers\n"
    "                                      that do not answer, full or unwritable\n"
    "                                      demo directories, buffer caps, key modes\n"
    "       slipgate play [q3|qw|nq] [--with-client] [--seconds N] [--basedir DIR]\n"
    "                     [--map MAP] [--dir DIR]\n"
    "                                      a local playground: a real server with bots\n"
    "                                      (OpenArena by default), slipgate in front of\n"
    "                                      it showing chat and prints, recording demos,\n"
    "                                      its web page; --with-client adds a headless\n"
    "                                      client (slipgate play --help)\n"
    "\n"
    "A live UDP proxy for the Quake games: clients connect to slipgate, slipgate\n"
    "relays every datagram to the real server and back.\n"
    "\n"
    "Options:\n"
    "  -c, --config FILE        read routes and settings from FILE\n"
    "  -l, --listen ADDR:PORT   where clients connect (default " SG_DEFAULT_LISTEN ";\n"
    "                           [::]:PORT listens on IPv6 and IPv4; port 0: one\n"
    "                           from the kernel, listed by +set ports_file FILE)\n"
    "  -s, --server HOST:PORT   the real game server (IPv6 as [addr]:port)\n";

/* After the -p line, which lists the games of the codec registry. */
static const char usage_opts[] =
    "      --check-config       validate the configuration and exit (0 valid, 1 not):\n"
    "                           also resolves every host, binds every listen\n"
    "                           address (and http's) once, checks the stats file,\n"
    "                           demo directories and textlog/pcap/inspect files\n"
    "      --stats FILE         write a JSON summary of every session at exit\n"
    "                           (a path that cannot be written fails the start)\n"
    "      --record DIR         record each session's demo (.dm_68, .qwd, ...) into DIR\n"
    "  -w, --workers N          N worker loops, each with its own socket per route\n"
    "                           (SO_REUSEPORT) and its own sessions ('workers N';\n"
    "                           default: the environment's SLIPGATE_WORKERS, else one\n"
    "                           per CPU, up to 8)\n"
    "  -v, --verbose            log more (repeat for debug, trace)\n"
    "  -q, --quiet              log less (repeat for errors only)\n"
    "      --version            print the version, and those of the libraries it\n"
    "                           runs with (libuv, zlib, libsodium, libpcap,\n"
    "                           libmicrohttpd), and exit\n"
    "  -h, --help               print this help and exit\n";

/* The rest of --help (two strings: each within C's 4095-character minimum). */
static const char usage_more[] =
    "\n"
    "  +set NAME VALUE          set any configuration directive, over the file:\n"
    "                           a top-level one (+set log_level debug), a route\n"
    "                           directive for every route (+set idle_timeout 30s),\n"
    "                           or one route's (+set lan.server 10.0.0.2:27960)\n"
    "  SLIPGATE_SET_NAME=VALUE  in the environment: as +set name VALUE (NAME in\n"
    "                           lower case; ROUTE__NAME for ROUTE.name), before\n"
    "                           the command line's +set\n"
    "\n"
    "Signals: SIGINT/SIGTERM stop cleanly (a second one exits at once); with\n"
    "'drain_timeout', SIGTERM drains first (no new session, /ready 503).\n"
    "SIGHUP re-reads the config file without dropping live sessions.\n"
    "\n"
    "Filters run in each route's chain, from 'filter NAME [LABEL] { ... }' blocks\n"
    "in the config file; 'plugin PATH' at the top loads more of them.  --stats\n"
    "counts each filter's frames; 'stats_interval DURATION' logs them too.\n"
    "'http ADDR:PORT' serves Prometheus /metrics, a JSON API and a live page.\n"
    "\n"
    "Signed recordings: 'sign_key FILE' (from slipgate keygen) gives every demo and\n"
    "capture a FILE.sig with a checkpoint every 'sign_interval' (default 10s);\n"
    "'slipgate demo verify FILE --keyfile KEY.pub' checks it.\n"
    "'anonymize yes' names each client by a keyed hash of its address (anon-XXXXXXXX)\n"
    "in logs, --stats, demo names, .sig files and pcap captures ('anonymize_key FILE',\n"
    "made on first use).\n"
    "\n"
    "Examples:\n"
    "  slipgate -s q3.example.org:27960\n"
    "  slipgate -l [::]:27960 -s 127.0.0.1:27961 --stats /tmp/slipgate.json\n"
    "  slipgate -c /etc/slipgate.conf +set idle_timeout 2m\n"
    "  slipgate -p q3 -s 127.0.0.1:27961 --record demos +set reencode always\n"
    "  slipgate -p q3 -s 127.0.0.1:27961 +set http 127.0.0.1:8080\n";

/* --help: the -p line names every game of the codec registry, "auto" first. */
static void print_usage(void)
{
    fputs(usage_text, stdout);
    fputs("  -p, --protocol PROTO     ", stdout);
    for (int i = 0; sg_protocol_choice(i); i++)
        printf("%s%s", i ? "|" : "", sg_protocol_choice(i));
    fputs(" (default auto: each of\n"
          "                           these games is detected and decoded, anything\n"
          "                           else relayed as it is)\n",
          stdout);
    fputs(usage_opts, stdout);
    fputs(usage_more, stdout);
}

/* ---- slipgate --version ---- */

/* slipgate's version, then the libraries' as loaded at run time (not as built against). */
static int print_version(void)
{
    const char *pcap = pcap_lib_version();
    const char *prefix = "libpcap version ";

    if (strncmp(pcap, prefix, strlen(prefix)) == 0)
        pcap += strlen(prefix);
    printf("slipgate %s\n", SG_VERSION);
    printf("libuv %s\n", uv_version_string());
    printf("zlib %s\n", zlibVersion());
    printf("libsodium %s\n", sodium_version_string());
    printf("libpcap %s\n", pcap);
    printf("libmicrohttpd %s\n", MHD_get_version());
    return ferror(stdout) || fflush(stdout) != 0 ? 1 : 0;
}

/* ---- slipgate filters ---- */

static const char filters_usage[] =
    "Usage: slipgate filters [-c CONFIG] [--json]\n"
    "List every filter: the built-in ones and those of the plugins CONFIG loads\n"
    "(its 'plugin PATH' lines), each with its directives.\n"
    "\n"
    "  -c, --config FILE   also list the filters of FILE's plugins\n"
    "      --json          one JSON object instead of text\n"
    "  -h, --help          print this help and exit\n";

static void json_str(const char *s)
{
    sg_json_cstr(stdout, s);
}

static const char *const conf_type_names[] = {
    "string", "path", "address", "integer", "size", "duration",
    "bool",   "enum", "custom",  "block",   "list",
};

static void print_filter(const struct sg_filter_impl *f, const char *plugin, bool json, bool first)
{
    if (!json) {
        printf("%s%s  (%s%s%s)\n    %s\n", first ? "" : "\n", f->name, f->tap ? "tap" : "filter",
               plugin ? ", plugin " : "", plugin ? plugin : "",
               f->description ? f->description : "");
        for (const struct sg_conf_directive *d = f->directives; d && d->name; d++)
            printf("    %-20s %-18s %s\n", d->name, d->argname ? d->argname : "",
                   d->help ? d->help : "");
        return;
    }
    printf("%s\n    {\"name\": ", first ? "" : ",");
    json_str(f->name);
    printf(", \"kind\": \"%s\", \"plugin\": ", f->tap ? "tap" : "filter");
    if (plugin)
        json_str(plugin);
    else
        fputs("null", stdout);
    fputs(", \"description\": ", stdout);
    json_str(f->description ? f->description : "");
    fputs(", \"example\": ", stdout);
    if (f->example)
        json_str(f->example);
    else
        fputs("null", stdout);
    fputs(", \"directives\": [", stdout);
    for (const struct sg_conf_directive *d = f->directives; d && d->name; d++) {
        printf("%s{\"name\": ", d == f->directives ? "" : ", ");
        json_str(d->name);
        printf(", \"type\": \"%s\", \"argname\": ",
               (unsigned)d->type < sizeof(conf_type_names) / sizeof(conf_type_names[0])
                   ? conf_type_names[d->type]
                   : "custom");
        json_str(d->argname ? d->argname : "");
        fputs(", \"help\": ", stdout);
        json_str(d->help ? d->help : "");
        putchar('}');
    }
    fputs("]}", stdout);
}

static int cmd_filters(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct sg_conf_diag diag;
    struct sg_conf *conf = NULL;
    const char *config = NULL;
    bool json = false, first = true;
    int opt;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            config = optarg;
            break;
        case 'j':
            json = true;
            break;
        case 'h':
            fputs(filters_usage, stdout);
            return 0;
        default:
            fputs("Try 'slipgate filters --help' for more information.\n", stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "slipgate filters: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }

    /* The config's plugins: the whole file is read (and must be valid), routes unchecked. */
    if (config) {
        sg_conf_diag_init(&diag);
        conf = calloc(1, sizeof(*conf));
        if (!conf || sg_conf_parse_file(config, &sg_conf_top_section, conf, &diag) < 0) {
            for (int i = 0; i < diag.count && i < SG_CONF_MAX_DIAGS; i++)
                fprintf(stderr, "%s\n", diag.msgs[i]);
            if (!conf)
                fprintf(stderr, "slipgate filters: out of memory\n");
            sg_conf_destroy(conf);
            return 1;
        }
    }

    if (json)
        fputs("{\"filters\": [", stdout);
    for (int i = 0; sg_builtin_filters[i]; i++, first = false)
        print_filter(sg_builtin_filters[i], NULL, json, first);
    for (struct sg_plugin *p = conf ? conf->plugins : NULL; p; p = p->next)
        for (int i = 0; p->table->filters[i]; i++, first = false)
            print_filter(p->table->filters[i], p->path, json, first);
    if (json)
        fputs("\n]}\n", stdout);
    sg_conf_destroy(conf);
    return ferror(stdout) || fflush(stdout) != 0 ? 1 : 0;
}

static void usage_hint(void)
{
    fputs("Try 'slipgate --help' for more information.\n", stderr);
}

enum { OPT_CHECK = 256, OPT_STATS, OPT_VERSION, OPT_RECORD };

/* --check-config's findings: failures are errors (FILE:LINE:COL: error: ...), warnings told. */
struct check_out {
    struct sg_conf_diag *diag;
    char warnings[8][400];
    int nwarnings;
};

static void check_said(void *ctx, enum sg_preflight_verdict v, const char *file, int line, int col,
                       const char *text)
{
    struct check_out *out = ctx;
    char *w;

    if (v == SG_PREFLIGHT_FAIL) {
        sg_conf_diag_error(out->diag, file, line, col, "%s", text);
    } else if (v == SG_PREFLIGHT_WARN && out->nwarnings < 8) {
        w = out->warnings[out->nwarnings++];
        if (line && col)
            snprintf(w, sizeof(out->warnings[0]), "%s:%d:%d: warning: %s", file, line, col, text);
        else if (line)
            snprintf(w, sizeof(out->warnings[0]), "%s:%d: warning: %s", file, line, text);
        else
            snprintf(w, sizeof(out->warnings[0]), "%s: warning: %s", file, text);
    }
}

/*
 * --check-config: the file, then what the start and a session's first
 * recording will meet (proxy/preflight.h, the checks `slipgate doctor`
 * makes too).
 */
static int check_config(const char *path, const struct sg_conf_overrides *ov, const char *stats)
{
    struct sg_conf_diag diag;
    struct sg_conf *conf;
    struct check_out out = {.diag = &diag};
    const struct sg_preflight_opts opts = {.what = SG_PREFLIGHT_ALL, .stats = stats};

    sg_conf_diag_init(&diag);
    if (sg_conf_load(path, ov, &conf, &diag) < 0) {
        if (diag.count == 0)
            sg_conf_diag_error(&diag, "slipgate", 0, 0, "out of memory");
        conf = NULL;
    } else {
        sg_preflight(conf, &opts, check_said, &out);
    }
    for (int i = 0; i < out.nwarnings; i++)
        fprintf(stderr, "%s\n", out.warnings[i]);
    if (diag.count > 0) {
        for (int i = 0; i < diag.count && i < SG_CONF_MAX_DIAGS; i++)
            fprintf(stderr, "%s\n", diag.msgs[i]);
        if (diag.count > SG_CONF_MAX_DIAGS)
            fprintf(stderr, "(%d more errors)\n", diag.count - SG_CONF_MAX_DIAGS);
        sg_conf_destroy(conf);
        return 1;
    }
    printf("%s: configuration OK (%d route%s)\n", path ? path : "command line", conf->nroutes,
           conf->nroutes == 1 ? "" : "s");
    for (struct sg_route_conf *r = conf->routes; r; r = r->next)
        printf("  route %s: %s -> %s (%s)\n", r->name, r->listen, r->server,
               sg_protocol_name(r->protocol));
    sg_conf_destroy(conf);
    return 0;
}

/* One SLIPGATE_SET_ variable, for qsort: by name. */
static int env_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * SLIPGATE_SET_<NAME>=VALUE in the environment, as `+set name VALUE` before
 * the command line's (which come later and win): NAME in lower case, and a
 * double underscore for the dot of ROUTE.NAME (ROUTE kept as written), e.g.
 * SLIPGATE_SET_DRAIN_TIMEOUT=30s, SLIPGATE_SET_main__SERVER=10.0.0.2:27960.
 * Taken in the order of their names.  `*sets` (2 * `*nsets` strings) is
 * replaced by a new array; `*names` holds the rewritten names (free both).
 */
static int env_sets(const char ***sets, int *nsets, char **names)
{
    static const char prefix[] = "SLIPGATE_SET_";
    const size_t plen = sizeof(prefix) - 1;
    const char **vars = NULL, **all;
    size_t n = 0, room = 0, k = 0;
    char *p;

    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (strncmp(*e, prefix, plen) == 0 && eq && eq > *e + plen) {
            n++;
            room += (size_t)(eq - *e) - plen + 1;
        }
    }
    *names = NULL;
    if (n == 0)
        return 0;
    vars = calloc(n, sizeof(*vars));
    all = calloc(2 * (n + (size_t)*nsets) + 1, sizeof(*all));
    *names = p = malloc(room);
    if (!vars || !all || !p) {
        free(vars);
        free(all);
        free(p);
        *names = NULL;
        return -1;
    }
    for (char **e = environ; e && *e && k < n; e++) {
        const char *eq = strchr(*e, '=');
        if (strncmp(*e, prefix, plen) == 0 && eq && eq > *e + plen)
            vars[k++] = *e;
    }
    qsort(vars, k, sizeof(*vars), env_cmp);
    for (size_t i = 0; i < k; i++) {
        const char *s = vars[i] + plen, *eq = strchr(s, '='), *sep = strstr(s, "__");
        const char *name = p;

        if (sep && sep >= eq)
            sep = NULL;
        for (const char *c = s; c < eq; c++) {
            if (c == sep) {
                *p++ = '.';
                c++; /* the second underscore */
            } else {
                /* the route's name as written, the directive's in lower case */
                *p++ = sep && c < sep ? *c
                                      : (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
            }
        }
        *p++ = '\0';
        all[2 * i] = name;
        all[2 * i + 1] = eq + 1;
    }
    for (int i = 0; i < 2 * *nsets; i++)
        all[2 * k + (size_t)i] = (*sets)[i];
    free(vars);
    free(*sets);
    *sets = all;
    *nsets += (int)k;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},
        {"listen", required_argument, NULL, 'l'},
        {"server", required_argument, NULL, 's'},
        {"protocol", required_argument, NULL, 'p'},
        {"check-config", no_argument, NULL, OPT_CHECK},
        {"stats", required_argument, NULL, OPT_STATS},
        {"record", required_argument, NULL, OPT_RECORD},
        {"workers", required_argument, NULL, 'w'},
        {"verbose", no_argument, NULL, 'v'},
        {"quiet", no_argument, NULL, 'q'},
        {"version", no_argument, NULL, OPT_VERSION},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct sg_conf_overrides ov = {0};
    const char *config = NULL, *stats = NULL;
    const char **sets = NULL;
    char *env_names = NULL;
    bool check = false;
    int opt, status;

    /* Writing past a file-size limit fails with EFBIG instead of killing us. */
    signal(SIGXFSZ, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);

    /* Subcommands. */
    if (argc > 1 && strcmp(argv[1], "demo") == 0)
        return sg_cmd_demo(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "pcap") == 0)
        return sg_cmd_pcap(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "filters") == 0)
        return cmd_filters(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "keygen") == 0)
        return sg_cmd_keygen(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "doctor") == 0)
        return sg_cmd_doctor(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "play") == 0)
        return sg_cmd_play(argc - 1, argv + 1);

    /* Options, with +set taken out first. */
    if (sg_conf_extract_sets("slipgate", &argc, argv, &sets, &ov.nsets) < 0) {
        usage_hint();
        return 2;
    }
    if (env_sets(&sets, &ov.nsets, &env_names) < 0) {
        fprintf(stderr, "slipgate: out of memory\n");
        free(sets);
        free(env_names);
        return 1;
    }
    ov.sets = sets;
    while ((opt = getopt_long(argc, argv, "c:l:s:p:w:vqh", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            config = optarg;
            break;
        case 'l':
            ov.listen = optarg;
            break;
        case 's':
            ov.server = optarg;
            break;
        case 'p':
            ov.protocol = optarg;
            break;
        case 'v':
            ov.verbosity++;
            break;
        case 'q':
            ov.verbosity--;
            break;
        case OPT_CHECK:
            check = true;
            break;
        case OPT_STATS:
            stats = optarg;
            break;
        case OPT_RECORD:
            ov.record = optarg;
            break;
        case 'w': {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || n < 1 || n > SG_CONF_MAX_WORKERS) {
                fprintf(stderr, "slipgate: -w: a number from 1 to %d, got '%s'\n",
                        SG_CONF_MAX_WORKERS, optarg);
                free(sets);
        free(env_names);
                return 2;
            }
            ov.workers = (int)n;
            break;
        }
        case OPT_VERSION:
            free(sets);
        free(env_names);
            return print_version();
        case 'h':
            print_usage();
            free(sets);
        free(env_names);
            return 0;
        default:
            usage_hint();
            free(sets);
        free(env_names);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "slipgate: unexpected argument '%s'\n", argv[optind]);
        usage_hint();
        free(sets);
        free(env_names);
        return 2;
    }

    /* Validate only, or run. */
    status = check ? check_config(config, &ov, stats) : sg_app_run(config, &ov, stats);
    free(sets);
    free(env_names);
    return status;
}
