/*
 * Unit tests of the configuration reader (config/config.h).
 *
 * Usage: config_test CASE [FIXTURE_DIR].  Each case parses a small text
 * against the test sections below and compares the stored values and the
 * exact diagnostics; a mismatch prints what was expected and what came.
 *
 * Test sections: top level (log, verbose, workers, timeout, cache, tags,
 * metrics from a second table, limits block filling the top object, route
 * blocks); route (every value type, filter blocks); filter (level,
 * enabled, and a self-nesting group block for the depth limit).
 */
#include "config/config.h"
#include "tests/unit.h"
#include "protocols/error.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROUTES  4
#define MAX_FILTERS 4
#define MAX_TAGS    8

struct t_filter {
    char name[32];
    int64_t level;
    bool enabled;
};

struct t_route {
    char name[32];
    char *listen, *server, *demo_dir, *motd;
    int64_t idle, max_sessions, buffer;
    int protocol;
    int game; /* `game`: an ENUM whose choices come from choice_at() */
    bool record;
    struct t_filter filters[MAX_FILTERS];
    int nfilters;
};

struct t_conf {
    char *log, *metrics;
    bool verbose;
    int64_t workers, timeout, cache, max_clients;
    char *tags[MAX_TAGS];
    int ntags;
    struct t_route routes[MAX_ROUTES];
    int nroutes;
};

/* Sections and their callbacks. */

static const char *const protocols[] = {"auto", "q3", "q2", "qw", "nq", NULL};

/* A list kept elsewhere (as slipgate's codec registry): "any" then two games. */
static const char *game_at(int i)
{
    static const char *const games[] = {"any", "alpha", "beta"};

    return i >= 0 && i < 3 ? games[i] : NULL;
}

static void *open_route(void *obj, const struct sg_conf_directive *d,
                        const struct sg_conf_arg *args, int nargs, struct sg_conf_diag *diag,
                        const char *file)
{
    struct t_conf *c = obj;

    if (nargs != 1) {
        sg_conf_diag_error(diag, file, args[-1].line, args[-1].col,
                           "'route' expects one name, got %d", nargs);
        return NULL;
    }
    for (int i = 0; i < c->nroutes; i++) {
        if (strcmp(c->routes[i].name, args[0].text) == 0) {
            sg_conf_diag_error(diag, file, args[0].line, args[0].col, "route '%s' defined twice",
                               args[0].text);
            return NULL;
        }
    }
    if (c->nroutes == MAX_ROUTES) {
        sg_conf_diag_error(diag, file, args[-1].line, args[-1].col, "too many routes");
        return NULL;
    }
    struct t_route *r = &c->routes[c->nroutes++];
    snprintf(r->name, sizeof(r->name), "%s", args[0].text);
    return r;
}

static void *open_filter(void *obj, const struct sg_conf_directive *d,
                         const struct sg_conf_arg *args, int nargs, struct sg_conf_diag *diag,
                         const char *file)
{
    struct t_route *r = obj;

    if (nargs != 1 || r->nfilters == MAX_FILTERS) {
        sg_conf_diag_error(diag, file, args[-1].line, args[-1].col, "bad filter");
        return NULL;
    }
    struct t_filter *f = &r->filters[r->nfilters++];
    snprintf(f->name, sizeof(f->name), "%s", args[0].text);
    return f;
}

static int set_tags(void *obj, const struct sg_conf_directive *d, const struct sg_conf_arg *args,
                    int nargs, struct sg_conf_diag *diag, const char *file)
{
    struct t_conf *c = obj;

    if (nargs == 0) {
        sg_conf_diag_error(diag, file, args[-1].line, args[-1].col, "'tags' needs a tag");
        return SG_E_CONFIG;
    }
    for (int i = 0; i < nargs; i++) {
        if (args[i].text[0] == '-') {
            sg_conf_diag_error(diag, file, args[i].line, args[i].col,
                               "tag '%s' must not start with '-'", args[i].text);
            return SG_E_CONFIG;
        }
        if (c->ntags == MAX_TAGS)
            return -ENOSPC;
        c->tags[c->ntags] = strdup(args[i].text);
        if (!c->tags[c->ntags])
            return -ENOMEM;
        c->ntags++;
    }
    return 0;
}

static const struct sg_conf_section filter_section;

static const struct sg_conf_directive filter_dirs[] = {
    {.name = "level", .type = SG_CONF_INT, .offset = offsetof(struct t_filter, level)},
    {.name = "enabled", .type = SG_CONF_BOOL, .offset = offsetof(struct t_filter, enabled)},
    {.name = "group", .type = SG_CONF_BLOCK, .child = &filter_section},
    {NULL},
};
static const struct sg_conf_directive *const filter_tables[] = {filter_dirs, NULL};
static const struct sg_conf_section filter_section = {"filter", filter_tables};

#define RT(field) offsetof(struct t_route, field)
static const struct sg_conf_directive route_dirs[] = {
    {.name = "listen", .type = SG_CONF_ADDR, .offset = RT(listen)},
    {.name = "server", .type = SG_CONF_ADDR, .offset = RT(server)},
    {.name = "idle_timeout",
     .type = SG_CONF_DURATION,
     .offset = RT(idle),
     .min = 1000,
     .max = 3600000},
    {.name = "max_sessions",
     .type = SG_CONF_INT,
     .offset = RT(max_sessions),
     .min = 1,
     .max = 100000},
    {.name = "protocol", .type = SG_CONF_ENUM, .offset = RT(protocol), .choices = protocols},
    {.name = "game", .type = SG_CONF_ENUM, .offset = RT(game), .choice_at = game_at},
    {.name = "record", .type = SG_CONF_BOOL, .offset = RT(record)},
    {.name = "demo_dir", .type = SG_CONF_PATH, .offset = RT(demo_dir)},
    {.name = "motd", .type = SG_CONF_STRING, .offset = RT(motd)},
    {.name = "buffer", .type = SG_CONF_SIZE, .offset = RT(buffer), .min = 1024, .max = 1 << 20},
    {.name = "filter", .type = SG_CONF_BLOCK, .open = open_filter, .child = &filter_section},
    {NULL},
};
static const struct sg_conf_directive *const route_tables[] = {route_dirs, NULL};
static const struct sg_conf_section route_section = {"route", route_tables};

#define CT(field) offsetof(struct t_conf, field)
static const struct sg_conf_directive limits_dirs[] = {
    {.name = "max_clients", .type = SG_CONF_INT, .offset = CT(max_clients)},
    {NULL},
};
static const struct sg_conf_directive *const limits_tables[] = {limits_dirs, NULL};
static const struct sg_conf_section limits_section = {"limits", limits_tables};

static const struct sg_conf_directive top_dirs[] = {
    {.name = "log", .type = SG_CONF_PATH, .offset = CT(log)},
    {.name = "verbose", .type = SG_CONF_BOOL, .offset = CT(verbose)},
    {.name = "workers", .type = SG_CONF_INT, .offset = CT(workers)},
    {.name = "timeout", .type = SG_CONF_DURATION, .offset = CT(timeout)},
    {.name = "cache", .type = SG_CONF_SIZE, .offset = CT(cache)},
    {.name = "tags", .type = SG_CONF_CUSTOM, .set = set_tags},
    {.name = "limits", .type = SG_CONF_BLOCK, .child = &limits_section},
    {.name = "route", .type = SG_CONF_BLOCK, .open = open_route, .child = &route_section},
    {NULL},
};
/* A second module's table in the same section. */
static const struct sg_conf_directive metrics_dirs[] = {
    {.name = "metrics", .type = SG_CONF_ADDR, .offset = CT(metrics)},
    {NULL},
};
static const struct sg_conf_directive *const top_tables[] = {top_dirs, metrics_dirs, NULL};
static const struct sg_conf_section top_section = {"top level", top_tables};

static void conf_free(struct t_conf *c)
{
    sg_conf_free_strings(&top_section, c);
    for (int i = 0; i < c->nroutes; i++)
        sg_conf_free_strings(&route_section, &c->routes[i]);
    for (int i = 0; i < c->ntags; i++)
        free(c->tags[i]);
    memset(c, 0, sizeof(*c));
}

/* Checking helpers: each failed check prints and counts. */

#define CHECK_INT(got, want) check_int(__LINE__, #got, (long long)(got), (long long)(want))
#define CHECK_STR(got, want) check_str(__LINE__, #got, (got), (want))

static void check_int(int line, const char *what, long long got, long long want)
{
    if (got == want)
        return;
    fprintf(stderr, "line %d: %s: got %lld, want %lld\n", line, what, got, want);
    failures++;
}

static void check_str(int line, const char *what, const char *got, const char *want)
{
    if ((!got && !want) || (got && want && strcmp(got, want) == 0))
        return;
    fprintf(stderr, "line %d: %s:\n   got: %s%s%s\n  want: %s%s%s\n", line, what, got ? "\"" : "",
            got ? got : "NULL", got ? "\"" : "", want ? "\"" : "", want ? want : "NULL",
            want ? "\"" : "");
    failures++;
}

/* Compares all diagnostics with the NULL-terminated `want`. */
static void check_diags_at(int line, const struct sg_conf_diag *diag, const char *const *want)
{
    int n = 0;

    while (want[n])
        n++;
    for (int i = 0; i < n || i < diag->count; i++) {
        const char *got = i < diag->count && i < SG_CONF_MAX_DIAGS ? diag->msgs[i] : NULL;
        const char *exp = i < n ? want[i] : NULL;
        if (got && exp && strcmp(got, exp) == 0)
            continue;
        fprintf(stderr, "line %d: diagnostic %d:\n   got: %s\n  want: %s\n", line, i,
                got ? got : "(none)", exp ? exp : "(none)");
        failures++;
    }
}
#define CHECK_DIAGS(diag, ...) check_diags_at(__LINE__, (diag), (const char *const[]){__VA_ARGS__})

/* Parses `text` as "t.conf" into a fresh *c; returns the parse result. */
static int parse(const char *text, struct t_conf *c, struct sg_conf_diag *diag)
{
    memset(c, 0, sizeof(*c));
    sg_conf_diag_init(diag);
    return sg_conf_parse_text("t.conf", text, strlen(text), &top_section, c, diag);
}

/* Parses a text that should hold exactly the errors listed. */
#define EXPECT_ERRORS(text, ...)                                                                   \
    do {                                                                                           \
        struct t_conf c_;                                                                          \
        struct sg_conf_diag d_;                                                                    \
        CHECK_INT(parse((text), &c_, &d_), SG_E_CONFIG);                                           \
        CHECK_DIAGS(&d_, __VA_ARGS__);                                                             \
        conf_free(&c_);                                                                            \
    } while (0)

/* Good files. */

static const char full_text[] = "# slipgate test configuration\n"
                                "log \"/var/log/slip gate.log\"   // a path with a space\n"
                                "verbose yes\n"
                                "workers -3\n"
                                "timeout 90\n"
                                "cache 64k\n"
                                "tags alpha \"beta gamma\" delta\n"
                                "metrics 127.0.0.1:9100\n"
                                "\n"
                                "limits {\n"
                                "\tmax_clients 12\n"
                                "}\n"
                                "\n"
                                "route main {\n"
                                "    listen 0.0.0.0:27960\n"
                                "    server \"quake.example.org:27961\"\n"
                                "    idle_timeout 2m   # two minutes\n"
                                "    max_sessions 64\n"
                                "    protocol q3\n"
                                "    record on\n"
                                "    demo_dir /srv/demos\n"
                                "    motd \"say \\\"hi\\\"\\tthere\\\\n\"\n"
                                "    buffer 1M\n"
                                "    filter chat {\n"
                                "        level 3\n"
                                "        enabled true\n"
                                "    }\n"
                                "    filter ban {\n"
                                "        level 7\n"
                                "    }\n"
                                "}\n"
                                "\n"
                                "route \"second route\" {\n"
                                "    listen [::]:27970\n"
                                "    server *:27971\n"
                                "    protocol QW\n"
                                "}\n";

static void check_full(const struct t_conf *c)
{
    CHECK_STR(c->log, "/var/log/slip gate.log");
    CHECK_INT(c->verbose, true);
    CHECK_INT(c->workers, -3);
    CHECK_INT(c->timeout, 90000);
    CHECK_INT(c->cache, 65536);
    CHECK_INT(c->ntags, 3);
    CHECK_STR(c->tags[0], "alpha");
    CHECK_STR(c->tags[1], "beta gamma");
    CHECK_STR(c->tags[2], "delta");
    CHECK_STR(c->metrics, "127.0.0.1:9100");
    CHECK_INT(c->max_clients, 12);
    CHECK_INT(c->nroutes, 2);

    const struct t_route *r = &c->routes[0];
    CHECK_STR(r->name, "main");
    CHECK_STR(r->listen, "0.0.0.0:27960");
    CHECK_STR(r->server, "quake.example.org:27961");
    CHECK_INT(r->idle, 120000);
    CHECK_INT(r->max_sessions, 64);
    CHECK_INT(r->protocol, 1);
    CHECK_INT(r->record, true);
    CHECK_STR(r->demo_dir, "/srv/demos");
    CHECK_STR(r->motd, "say \"hi\"\tthere\\n");
    CHECK_INT(r->buffer, 1 << 20);
    CHECK_INT(r->nfilters, 2);
    CHECK_STR(r->filters[0].name, "chat");
    CHECK_INT(r->filters[0].level, 3);
    CHECK_INT(r->filters[0].enabled, true);
    CHECK_STR(r->filters[1].name, "ban");
    CHECK_INT(r->filters[1].level, 7);
    CHECK_INT(r->filters[1].enabled, false);

    r = &c->routes[1];
    CHECK_STR(r->name, "second route");
    CHECK_STR(r->listen, "[::]:27970");
    CHECK_STR(r->server, "*:27971");
    CHECK_INT(r->protocol, 3);
    CHECK_STR(r->motd, NULL);
    CHECK_INT(r->idle, 0);
}

static void case_good_full(void)
{
    struct t_conf c;
    struct sg_conf_diag d;

    CHECK_INT(parse(full_text, &c, &d), 0);
    CHECK_DIAGS(&d, NULL);
    check_full(&c);
    conf_free(&c);
}

static void case_good_crlf(void)
{
    char text[sizeof(full_text) * 2];
    size_t n = 0;
    struct t_conf c;
    struct sg_conf_diag d;

    /* The same file with CRLF line ends and a byte order mark. */
    memcpy(text, "\xef\xbb\xbf", 3);
    n = 3;
    for (const char *s = full_text; *s; s++) {
        if (*s == '\n')
            text[n++] = '\r';
        text[n++] = *s;
    }
    text[n] = '\0';
    CHECK_INT(parse(text, &c, &d), 0);
    CHECK_DIAGS(&d, NULL);
    check_full(&c);
    conf_free(&c);

    /* Errors in a CRLF file point at the right columns; the last line has no newline. */
    EXPECT_ERRORS("verbose maybe\r\nroute r {\r\n  listen x\r\n}\r\nroute s {\r\n  record no",
                  "t.conf:1:9: error: 'verbose' expects yes or no (or on/off, true/false, 1/0), "
                  "got 'maybe'",
                  "t.conf:3:10: error: 'listen' expects ADDR:PORT (e.g. 0.0.0.0:27960 or "
                  "[::]:27960), got 'x'",
                  "t.conf:6:12: error: block 'route' opened at line 5 is not closed", NULL);
}

static void case_comments(void)
{
    struct t_conf c;
    struct sg_conf_diag d;
    const char *text = "# hash comment\n"
                       "   // slash comment\n"
                       "\t# indented\n"
                       "tags a#b http://x \"#not\" \"//not\"# after a quote\n"
                       "log /srv//x.log // trailing\n"
                       "verbose on#not-a-comment\n"
                       "//\n"
                       "#\n";

    CHECK_INT(parse(text, &c, &d), SG_E_CONFIG);
    CHECK_DIAGS(&d,
                "t.conf:6:9: error: 'verbose' expects yes or no (or on/off, true/false, 1/0), "
                "got 'on#not-a-comment'",
                NULL);
    CHECK_INT(c.ntags, 4);
    CHECK_STR(c.tags[0], "a#b");
    CHECK_STR(c.tags[1], "http://x");
    CHECK_STR(c.tags[2], "#not");
    CHECK_STR(c.tags[3], "//not");
    CHECK_STR(c.log, "/srv//x.log");
    conf_free(&c);
}

static void case_empty(void)
{
    struct t_conf c;
    struct sg_conf_diag d;

    CHECK_INT(parse("", &c, &d), 0);
    CHECK_INT(d.count, 0);
    CHECK_INT(parse("\n\n# only comments\r\n   \t\n", &c, &d), 0);
    CHECK_INT(d.count, 0);
    CHECK_INT(sg_conf_parse_text("t.conf", NULL, 0, &top_section, &c, &d), 0);
    CHECK_INT(sg_conf_parse_text("t.conf", "x", 1, NULL, &c, &d), -EINVAL);
}

static void case_escapes(void)
{
    struct t_conf c;
    struct sg_conf_diag d;

    CHECK_INT(parse("tags \"a\\\\b\" \"\\\"q\\\"\" \"l1\\nl2\" \"\" \"t\\tt\"\n", &c, &d), 0);
    CHECK_DIAGS(&d, NULL);
    CHECK_INT(c.ntags, 5);
    CHECK_STR(c.tags[0], "a\\b");
    CHECK_STR(c.tags[1], "\"q\"");
    CHECK_STR(c.tags[2], "l1\nl2");
    CHECK_STR(c.tags[3], "");
    CHECK_STR(c.tags[4], "t\tt");
    conf_free(&c);

    EXPECT_ERRORS("tags \"a\\qb\"\n",
                  "t.conf:1:8: error: unknown escape '\\q' in quoted string; use \\\", \\\\, \\n "
                  "or \\t",
                  NULL);
    EXPECT_ERRORS("tags \"ab\"cd\ntags ab\"cd\"\n",
                  "t.conf:1:10: error: expected a blank or the end of the line after the closing "
                  "quote",
                  "t.conf:2:8: error: unexpected '\"' inside a word; quote the whole value", NULL);
}

static void case_unterminated(void)
{
    EXPECT_ERRORS("log \"/var/log\nverbose yes\ntags \"a\\\"\n  motd \"x\\",
                  "t.conf:1:5: error: unterminated quoted string",
                  "t.conf:3:6: error: unterminated quoted string",
                  "t.conf:4:8: error: unterminated quoted string", NULL);
}

static void case_nul_byte(void)
{
    static const char text[] = "verbose yes\nlog a\0b\nworkers 2\n";
    struct t_conf c;
    struct sg_conf_diag d;

    memset(&c, 0, sizeof(c));
    sg_conf_diag_init(&d);
    CHECK_INT(sg_conf_parse_text("t.conf", text, sizeof(text) - 1, &top_section, &c, &d),
              SG_E_CONFIG);
    CHECK_DIAGS(&d, "t.conf:2:6: error: unexpected NUL byte", NULL);
    CHECK_INT(c.workers, 2);
    CHECK_STR(c.log, NULL);
    conf_free(&c);
}

/* Unknown directives and suggestions. */

static void case_unknown_directive(void)
{
    EXPECT_ERRORS("verbos yes\n"
                  "route r {\n"
                  "  idle_timout 5s\n"
                  "  lsiten 1.2.3.4:5\n"
                  "  Protocol q3\n"
                  "  color blue\n"
                  "  log x\n"
                  "}\n"
                  "frobnicate 3\n",
                  "t.conf:1:1: error: unknown directive 'verbos' at top level; did you mean "
                  "'verbose'?",
                  "t.conf:3:3: error: unknown directive 'idle_timout' in route block; did you mean "
                  "'idle_timeout'?",
                  "t.conf:4:3: error: unknown directive 'lsiten' in route block; did you mean "
                  "'listen'?",
                  "t.conf:5:3: error: unknown directive 'Protocol' in route block; did you mean "
                  "'protocol'?",
                  "t.conf:6:3: error: unknown directive 'color' in route block",
                  "t.conf:7:3: error: unknown directive 'log' in route block",
                  "t.conf:9:1: error: unknown directive 'frobnicate' at top level", NULL);
}

static void case_suggest(void)
{
    CHECK_STR(sg_conf_suggest(&route_section, "idle_timout"), "idle_timeout");
    CHECK_STR(sg_conf_suggest(&route_section, "idletimeout"), "idle_timeout");
    CHECK_STR(sg_conf_suggest(&route_section, "lsiten"), "listen");
    CHECK_STR(sg_conf_suggest(&route_section, "LISTEN"), "listen");
    CHECK_STR(sg_conf_suggest(&route_section, "srever"), "server");
    CHECK_STR(sg_conf_suggest(&route_section, "max_session"), "max_sessions");
    CHECK_STR(sg_conf_suggest(&route_section, "protcol"), "protocol");
    CHECK_STR(sg_conf_suggest(&route_section, "x"), NULL);
    CHECK_STR(sg_conf_suggest(&route_section, "color"), NULL);
    CHECK_STR(sg_conf_suggest(&route_section, "maximum_sessions"), "max_sessions");
    CHECK_STR(sg_conf_suggest(&route_section, "session_limit"), NULL);
    CHECK_STR(sg_conf_suggest(&route_section, "rec"), NULL);
    CHECK_STR(sg_conf_suggest(&route_section, "recrd"), "record");
    CHECK_STR(sg_conf_suggest(&route_section, ""), NULL);
    CHECK_STR(sg_conf_suggest(&route_section, NULL), NULL);
    /* Every table of the section is searched. */
    CHECK_STR(sg_conf_suggest(&top_section, "metric"), "metrics");
    CHECK_STR(sg_conf_suggest(&top_section, "verbos"), "verbose");

    CHECK(sg_conf_find(&top_section, "metrics") == &metrics_dirs[0]);
    CHECK(sg_conf_find(&top_section, "route") == &top_dirs[7]);
    CHECK(sg_conf_find(&top_section, "Route") == NULL);
    CHECK(sg_conf_find(NULL, "route") == NULL);
}

/* Bad values. */

static void case_bad_int(void)
{
    EXPECT_ERRORS("route r {\n"
                  "  max_sessions lots\n"
                  "}\n"
                  "route s {\n"
                  "  max_sessions 0\n"
                  "}\n"
                  "route t {\n"
                  "  max_sessions 100001\n"
                  "}\n"
                  "route u {\n"
                  "  max_sessions 100000\n"
                  "}\n"
                  "workers 1.5\n",
                  "t.conf:2:16: error: 'max_sessions' expects an integer between 1 and 100000, "
                  "got 'lots'",
                  "t.conf:5:16: error: 'max_sessions' expects an integer between 1 and 100000, "
                  "got '0'",
                  "t.conf:8:16: error: 'max_sessions' expects an integer between 1 and 100000, "
                  "got '100001'",
                  "t.conf:13:9: error: 'workers' expects an integer, got '1.5'", NULL);
    EXPECT_ERRORS("workers 9223372036854775808\n",
                  "t.conf:1:9: error: 'workers' expects an integer between -9223372036854775808 "
                  "and 9223372036854775807, got '9223372036854775808'",
                  NULL);

    struct t_conf c;
    struct sg_conf_diag d;
    CHECK_INT(parse("workers -9223372036854775808\n", &c, &d), 0);
    CHECK_INT(c.workers, INT64_MIN);
    CHECK_INT(parse("workers 9223372036854775807\n", &c, &d), 0);
    CHECK_INT(c.workers, INT64_MAX);
    CHECK_INT(parse("workers -\n", &c, &d), SG_E_CONFIG);
    CHECK_INT(parse("workers +1\n", &c, &d), SG_E_CONFIG);
}

/* An ENUM whose choices come from a function: each one by its index, any case; a wrong one
 * names them all. */
static void case_enum_choice_at(void)
{
    struct t_conf c;
    struct sg_conf_diag d;

    CHECK_INT(parse("route r {\n  game BETA\n}\n", &c, &d), 0);
    CHECK_INT(c.routes[0].game, 2);
    CHECK_INT(parse("route r {\n  game alpha\n}\n", &c, &d), 0);
    CHECK_INT(c.routes[0].game, 1);
    CHECK_INT(parse("route r {\n  game any\n}\n", &c, &d), 0);
    CHECK_INT(c.routes[0].game, 0);
    EXPECT_ERRORS("route r {\n  game gamma\n}\n",
                  "t.conf:2:8: error: 'game' expects one of any, alpha, beta, got 'gamma'", NULL);
}

static void case_bad_enum(void)
{
    EXPECT_ERRORS("route r {\n  protocol q4\n  protocol \"\"\n}\n",
                  "t.conf:2:12: error: 'protocol' expects one of auto, q3, q2, qw, nq, got 'q4'",
                  "t.conf:3:3: error: 'protocol' given twice (first at line 2)", NULL);

    struct t_conf c;
    struct sg_conf_diag d;
    CHECK_INT(parse("route r {\n  protocol NQ\n}\n", &c, &d), 0);
    CHECK_INT(c.routes[0].protocol, 4);
    CHECK_INT(parse("route r {\n  protocol auto\n}\n", &c, &d), 0);
    CHECK_INT(c.routes[0].protocol, 0);
}

static void case_bad_duration(void)
{
    EXPECT_ERRORS("route r {\n"
                  "  idle_timeout soon\n"
                  "}\n"
                  "route s {\n"
                  "  idle_timeout 2h\n"
                  "}\n"
                  "route t {\n"
                  "  idle_timeout 999ms\n"
                  "}\n"
                  "timeout -5s\n",
                  "t.conf:2:16: error: 'idle_timeout' expects a duration such as 60s, 500ms or 2m, "
                  "got 'soon'",
                  "t.conf:5:16: error: 'idle_timeout' must be between 1s and 1h, got '2h'",
                  "t.conf:8:16: error: 'idle_timeout' must be between 1s and 1h, got '999ms'",
                  "t.conf:10:9: error: 'timeout' expects a duration such as 60s, 500ms or 2m, got "
                  "'-5s'",
                  NULL);
    EXPECT_ERRORS("timeout 99999999999999999999\n",
                  "t.conf:1:9: error: 'timeout' must be between 0s and 9223372036854775807ms, got "
                  "'99999999999999999999'",
                  NULL);
}

static void case_bad_size(void)
{
    EXPECT_ERRORS("route r {\n"
                  "  buffer big\n"
                  "}\n"
                  "route s {\n"
                  "  buffer 2M\n"
                  "}\n"
                  "route t {\n"
                  "  buffer 1000\n"
                  "}\n"
                  "cache 1T\n",
                  "t.conf:2:10: error: 'buffer' expects a size such as 4096, 64k or 1M, got 'big'",
                  "t.conf:5:10: error: 'buffer' must be between 1k and 1M, got '2M'",
                  "t.conf:8:10: error: 'buffer' must be between 1k and 1M, got '1000'",
                  "t.conf:10:7: error: 'cache' expects a size such as 4096, 64k or 1M, got '1T'",
                  NULL);
}

static void case_bad_bool(void)
{
    EXPECT_ERRORS("verbose maybe\nroute r {\n  record 2\n}\n",
                  "t.conf:1:9: error: 'verbose' expects yes or no (or on/off, true/false, 1/0), "
                  "got 'maybe'",
                  "t.conf:3:10: error: 'record' expects yes or no (or on/off, true/false, 1/0), "
                  "got '2'",
                  NULL);
}

static void case_bad_addr(void)
{
    EXPECT_ERRORS("route r {\n"
                  "  listen 27960\n"
                  "  server ::1:27960\n"
                  "}\n"
                  "route s {\n"
                  "  listen 0.0.0.0:70000\n"
                  "  server :27960\n"
                  "}\n"
                  "route t {\n"
                  "  listen [::1]27960\n"
                  "  server fe80::1\n"
                  "}\n"
                  "metrics \"my host:80\"\n"
                  "route u {\n"
                  "  listen [:::::]:27960\n"
                  "  server 127.0.0.1:0\n"
                  "}\n",
                  "t.conf:2:10: error: 'listen' expects ADDR:PORT (e.g. 0.0.0.0:27960 or "
                  "[::]:27960), got '27960'",
                  "t.conf:3:10: error: 'server' expects ADDR:PORT (e.g. 0.0.0.0:27960 or "
                  "[::]:27960), got '::1:27960'; did you mean '[::1]:27960'?",
                  "t.conf:6:10: error: 'listen' expects ADDR:PORT (e.g. 0.0.0.0:27960 or "
                  "[::]:27960), got '0.0.0.0:70000'; the port must be between 1 and 65535",
                  "t.conf:7:10: error: 'server' expects ADDR:PORT (e.g. 0.0.0.0:27960 or "
                  "[::]:27960), got ':27960'",
                  "t.conf:10:10: error: 'listen' expects ADDR:PORT (e.g. 0.0.0.0:27960 or "
                  "[::]:27960), got '[::1]27960'",
                  "t.conf:11:10: error: 'server' expects ADDR:PORT (e.g. 0.0.0.0:27960 or "
                  "[::]:27960), got 'fe80::1'; put an IPv6 address in brackets, as in "
                  "[::1]:27960",
                  "t.conf:13:9: error: 'metrics' expects ADDR:PORT (e.g. 0.0.0.0:27960 or "
                  "[::]:27960), got 'my host:80'",
                  "t.conf:15:10: error: 'listen' expects ADDR:PORT (e.g. 0.0.0.0:27960 or "
                  "[::]:27960), got '[:::::]:27960'",
                  "t.conf:16:10: error: 'server' expects a port between 1 and 65535, got "
                  "'127.0.0.1:0' (port 0)",
                  NULL);
}

static void case_bad_path(void)
{
    EXPECT_ERRORS("log \"\"\n", "t.conf:1:5: error: 'log' expects a file path, got ''", NULL);
}

static void case_value_count(void)
{
    EXPECT_ERRORS("route r {\n"
                  "  server a:1 b:2\n"
                  "  listen\n"
                  "  motd one two three\n"
                  "}\n"
                  "tags\n"
                  "tags ok -bad\n",
                  "t.conf:2:14: error: 'server' takes 1 value, got 2",
                  "t.conf:3:3: error: missing value for 'listen'",
                  "t.conf:4:12: error: 'motd' takes 1 value, got 3",
                  "t.conf:6:1: error: 'tags' needs a tag",
                  "t.conf:7:9: error: tag '-bad' must not start with '-'", NULL);
}

static void case_duplicate(void)
{
    struct t_conf c;
    struct sg_conf_diag d;

    /* Twice in one object is an error; once in each of two routes is fine. */
    CHECK_INT(parse("route a {\n"
                    "  server a:1\n"
                    "  record yes\n"
                    "  server b:2\n"
                    "}\n"
                    "route b {\n"
                    "  server c:3\n"
                    "}\n"
                    "verbose no\n"
                    "tags x\n"
                    "tags y\n"
                    "verbose yes\n",
                    &c, &d),
              SG_E_CONFIG);
    CHECK_DIAGS(&d, "t.conf:4:3: error: 'server' given twice (first at line 2)",
                "t.conf:12:1: error: 'verbose' given twice (first at line 9)", NULL);
    CHECK_STR(c.routes[0].server, "a:1");
    CHECK_STR(c.routes[1].server, "c:3");
    CHECK_INT(c.verbose, false);
    CHECK_INT(c.ntags, 2);
    conf_free(&c);
}

/* Block structure. */

static void case_nested_block(void)
{
    struct t_conf c;
    struct sg_conf_diag d;

    CHECK_INT(parse("route r {\n"
                    "  filter f {\n"
                    "    level 1\n"
                    "    group {\n"
                    "      group {\n"
                    "        enabled yes\n"
                    "      }\n"
                    "    }\n"
                    "  }\n"
                    "  record yes\n"
                    "}\n",
                    &c, &d),
              0);
    CHECK_DIAGS(&d, NULL);
    CHECK_INT(c.routes[0].nfilters, 1);
    CHECK_INT(c.routes[0].filters[0].level, 1);
    CHECK_INT(c.routes[0].filters[0].enabled, true);
    CHECK_INT(c.routes[0].record, true);
    conf_free(&c);

    /* 'level' is known in the filter block only. */
    EXPECT_ERRORS("route r {\n  filter f {\n  }\n  level 2\n}\n",
                  "t.conf:4:3: error: unknown directive 'level' in route block", NULL);
}

static void case_unexpected_close(void)
{
    EXPECT_ERRORS("verbose yes\n}\nroute r {\n}\n}\n", "t.conf:2:1: error: unexpected '}'",
                  "t.conf:5:1: error: unexpected '}'", NULL);
}

static void case_unclosed_block(void)
{
    EXPECT_ERRORS("route r {\n  filter f {\n    level 1\n",
                  "t.conf:3:12: error: block 'filter' opened at line 2 is not closed",
                  "t.conf:3:12: error: block 'route' opened at line 1 is not closed", NULL);
}

static void case_block_without_brace(void)
{
    struct t_conf c;
    struct sg_conf_diag d;

    /* A lone '{' on the next line opens the block (checked, not stored) without more errors. */
    CHECK_INT(parse("route r\n"
                    "{\n"
                    "  record maybe\n"
                    "}\n"
                    "route\n"
                    "verbose yes\n",
                    &c, &d),
              SG_E_CONFIG);
    CHECK_DIAGS(&d, "t.conf:1:1: error: 'route' is a block; expected '{' at end of line",
                "t.conf:3:10: error: 'record' expects yes or no (or on/off, true/false, 1/0), "
                "got 'maybe'",
                "t.conf:5:1: error: 'route' is a block; expected '{' at end of line", NULL);
    CHECK_INT(c.nroutes, 0);
    CHECK_INT(c.verbose, true);
    conf_free(&c);
}

static void case_not_a_block(void)
{
    struct t_conf c;
    struct sg_conf_diag d;

    CHECK_INT(parse("route r {\n"
                    "  listen 1.2.3.4:5 {\n"
                    "    nonsense here\n"
                    "  }\n"
                    "  record yes\n"
                    "}\n",
                    &c, &d),
              SG_E_CONFIG);
    CHECK_DIAGS(&d, "t.conf:2:20: error: 'listen' is not a block", NULL);
    CHECK_STR(c.routes[0].listen, NULL);
    CHECK_INT(c.routes[0].record, true);
    conf_free(&c);
}

static void case_stray_braces(void)
{
    /*
     * A '{' with no directive before it (at a line's start with nothing
     * pending, or after ';') opens a skipped block that its '}' closes; a
     * '}' with no block open is reported; quoted braces are values.
     */
    EXPECT_ERRORS("route r { listen 1.2.3.4:5 }\n"
                  "{\n"
                  "  verbose yes\n"
                  "}\n"
                  "route s {\n"
                  "  record yes }\n"
                  "} record\n"
                  "verbose no; { timeout 1s }\n"
                  "tags \"{\" \"}\"\n",
                  "t.conf:2:1: error: unexpected '{'; a block opens with its name: NAME [ARGS] {",
                  "t.conf:7:1: error: unexpected '}'",
                  "t.conf:7:3: error: unknown directive 'record' at top level",
                  "t.conf:8:13: error: unexpected '{'; a block opens with its name: NAME [ARGS] {",
                  NULL);
}

static void case_bad_block_recovery(void)
{
    struct t_conf c;
    struct sg_conf_diag d;

    /*
     * An unknown block is skipped to its '}'; a block whose open fails is
     * still checked; a line that fails to lex but ends in '{' still nests.
     */
    CHECK_INT(parse("rout r {\n"
                    "  anything goes {\n"
                    "    here\n"
                    "  }\n"
                    "}\n"
                    "route a {\n"
                    "  record yes\n"
                    "}\n"
                    "route a {\n"
                    "  record perhaps\n"
                    "  filter f {\n"
                    "    levle 1\n"
                    "  }\n"
                    "}\n"
                    "route \"b {\n"
                    "  colour red\n"
                    "}\n"
                    "route {\n"
                    "}\n"
                    "verbose yes\n",
                    &c, &d),
              SG_E_CONFIG);
    CHECK_DIAGS(&d,
                "t.conf:1:1: error: unknown directive 'rout' at top level; did you mean 'route'?",
                "t.conf:9:7: error: route 'a' defined twice",
                "t.conf:10:10: error: 'record' expects yes or no (or on/off, true/false, 1/0), "
                "got 'perhaps'",
                "t.conf:12:5: error: unknown directive 'levle' in filter block; did you mean "
                "'level'?",
                "t.conf:15:7: error: unterminated quoted string",
                "t.conf:18:1: error: 'route' expects one name, got 0", NULL);
    CHECK_INT(c.nroutes, 1);
    CHECK_INT(c.routes[0].record, true);
    CHECK_INT(c.verbose, true);
    conf_free(&c);
}

static void case_depth_limit(void)
{
    char text[2048] = "route r {\n  filter f {\n";
    struct t_conf c;
    struct sg_conf_diag d;

    /* top + route + filter + 13 groups = 16 frames; the 14th group is one too many. */
    for (int i = 0; i < 14; i++)
        strcat(text, "group {\n");
    strcat(text, "level 5\n");
    for (int i = 0; i < 14; i++)
        strcat(text, "}\n");
    strcat(text, "  }\n}\nverbose yes\n");
    CHECK_INT(parse(text, &c, &d), SG_E_CONFIG);
    CHECK_DIAGS(&d, "t.conf:16:1: error: blocks are nested too deeply (at most 15 levels)", NULL);
    CHECK_INT(c.verbose, true);
    conf_free(&c);
}

static void case_multiple_errors(void)
{
    struct t_conf c;
    struct sg_conf_diag d;

    CHECK_INT(parse("verbose perhaps\n"
                    "workers many\n"
                    "route main {\n"
                    "  listen 27960\n"
                    "  idle_timout 5s\n"
                    "  protocol q4\n"
                    "  max_sessions lots\n"
                    "  record yes\n"
                    "}\n"
                    "tags \"open\n"
                    "cache 4k\n"
                    "}\n",
                    &c, &d),
              SG_E_CONFIG);
    CHECK_DIAGS(&d,
                "t.conf:1:9: error: 'verbose' expects yes or no (or on/off, true/false, 1/0), "
                "got 'perhaps'",
                "t.conf:2:9: error: 'workers' expects an integer, got 'many'",
                "t.conf:4:10: error: 'listen' expects ADDR:PORT (e.g. 0.0.0.0:27960 or "
                "[::]:27960), got '27960'",
                "t.conf:5:3: error: unknown directive 'idle_timout' in route block; did you mean "
                "'idle_timeout'?",
                "t.conf:6:12: error: 'protocol' expects one of auto, q3, q2, qw, nq, got 'q4'",
                "t.conf:7:16: error: 'max_sessions' expects an integer between 1 and 100000, got "
                "'lots'",
                "t.conf:10:6: error: unterminated quoted string",
                "t.conf:12:1: error: unexpected '}'", NULL);
    /* The good lines between the errors were applied. */
    CHECK_INT(c.routes[0].record, true);
    CHECK_INT(c.cache, 4096);
    conf_free(&c);
}

#define X10 "xxxxxxxxxx"
#define X60 X10 X10 X10 X10 X10 X10
#define X80 X60 X10 X10

static void case_diag_overflow(void)
{
    char text[4096] = "";
    struct t_conf c;
    struct sg_conf_diag d;

    for (int i = 0; i < 40; i++)
        strcat(text, "bogus 1\n");
    CHECK_INT(parse(text, &c, &d), SG_E_CONFIG);
    CHECK_INT(d.count, 40);
    CHECK_STR(d.msgs[0], "t.conf:1:1: error: unknown directive 'bogus' at top level");
    CHECK_STR(d.msgs[SG_CONF_MAX_DIAGS - 1],
              "t.conf:32:1: error: unknown directive 'bogus' at top level");

    /* Long values are clipped and control bytes shown as '?'. */
    EXPECT_ERRORS("workers \"a\\tb\"\n"
                  "cache " X80 "\n",
                  "t.conf:1:9: error: 'workers' expects an integer, got 'a?b'",
                  "t.conf:2:7: error: 'cache' expects a size such as 4096, 64k or 1M, got '" X60
                  "...'",
                  NULL);
    EXPECT_ERRORS(X80 "\n",
                  "t.conf:1:1: error: unknown directive "
                  "'" X60 "...' at top level",
                  NULL);
}

/* sg_conf_set. */

static void case_set_ok(void)
{
    struct t_conf c = {0};
    struct t_route *r = &c.routes[0];
    struct sg_conf_diag d;

    sg_conf_diag_init(&d);
    CHECK_INT(sg_conf_set(&top_section, &c, "verbose", "on", NULL, &d), 0);
    CHECK_INT(sg_conf_set(&top_section, &c, "timeout", "500ms", NULL, &d), 0);
    CHECK_INT(sg_conf_set(&top_section, &c, "metrics", "[::1]:9100", NULL, &d), 0);
    CHECK_INT(sg_conf_set(&top_section, &c, "metrics", "*:9101", NULL, &d), 0);
    CHECK_INT(sg_conf_set(&top_section, &c, "tags", "one two", NULL, &d), 0);
    CHECK_INT(sg_conf_set(&route_section, r, "protocol", "q2", NULL, &d), 0);
    CHECK_INT(sg_conf_set(&route_section, r, "motd", "", NULL, &d), 0);
    CHECK_INT(d.count, 0);
    CHECK_INT(c.verbose, true);
    CHECK_INT(c.timeout, 500);
    CHECK_STR(c.metrics, "*:9101");
    CHECK_INT(c.ntags, 1);
    CHECK_STR(c.tags[0], "one two");
    CHECK_INT(r->protocol, 2);
    CHECK_STR(r->motd, "");
    /* With no object the value is only checked. */
    CHECK_INT(sg_conf_set(&route_section, NULL, "listen", "1.2.3.4:5", NULL, &d), 0);
    c.nroutes = 1;
    conf_free(&c);
}

static void case_set_unknown(void)
{
    struct t_conf c = {0};
    struct sg_conf_diag d;

    sg_conf_diag_init(&d);
    CHECK_INT(sg_conf_set(&top_section, &c, "verbos", "on", NULL, &d), -ENOENT);
    CHECK_INT(sg_conf_set(&top_section, &c, "listen", "1.2.3.4:5", NULL, &d), -ENOENT);
    CHECK_INT(sg_conf_set(&top_section, &c, NULL, "x", NULL, &d), -ENOENT);
    CHECK_INT(sg_conf_set(NULL, &c, "verbose", "x", NULL, &d), -ENOENT);
    CHECK_INT(d.count, 0);
}

static void case_set_bad(void)
{
    struct t_conf c = {0};
    struct sg_conf_diag d;

    sg_conf_diag_init(&d);
    CHECK_INT(sg_conf_set(&route_section, &c.routes[0], "max_sessions", "lots", NULL, &d),
              SG_E_CONFIG);
    CHECK_INT(sg_conf_set(&top_section, &c, "timeout", "soon", "+set", &d), SG_E_CONFIG);
    CHECK_INT(sg_conf_set(&top_section, &c, "route", "x", NULL, &d), SG_E_CONFIG);
    CHECK_INT(sg_conf_set(&top_section, &c, "verbose", NULL, NULL, &d), SG_E_CONFIG);
    CHECK_INT(sg_conf_set(&top_section, &c, "tags", "-x", NULL, &d), SG_E_CONFIG);
    CHECK_INT(sg_conf_set(&top_section, &c, "metrics", "::1:80", "env SLIPGATE", &d), SG_E_CONFIG);
    CHECK_DIAGS(&d,
                "command line: error: 'max_sessions' expects an integer between 1 and 100000, "
                "got 'lots'",
                "+set: error: 'timeout' expects a duration such as 60s, 500ms or 2m, got 'soon'",
                "command line: error: 'route' is a block and cannot be given one value",
                "command line: error: missing value for 'verbose'",
                "command line: error: tag '-x' must not start with '-'",
                "env SLIPGATE: error: 'metrics' expects ADDR:PORT (e.g. 0.0.0.0:27960 or "
                "[::]:27960), got '::1:80'; did you mean '[::1]:80'?",
                NULL);
    CHECK_INT(c.routes[0].max_sessions, 0);
    CHECK_INT(c.timeout, 0);
    CHECK_STR(c.metrics, NULL);
}

/* Parsers. */

static void case_duration_parse(void)
{
    static const struct {
        const char *s;
        int rc;
        int64_t ms;
    } cases[] = {
        {"0", 0, 0},
        {"60", 0, 60000},
        {"60s", 0, 60000},
        {"500ms", 0, 500},
        {"2m", 0, 120000},
        {"1h", 0, 3600000},
        {"007s", 0, 7000},
        {"9223372036854775807ms", 0, INT64_MAX},
        {"9223372036854775s", 0, INT64_C(9223372036854775000)},
        {"9223372036854776s", -ERANGE, 0},
        {"99999999999999999999999ms", -ERANGE, 0},
        {"", -EINVAL, 0},
        {"s", -EINVAL, 0},
        {"ms", -EINVAL, 0},
        {"-1s", -EINVAL, 0},
        {"+1s", -EINVAL, 0},
        {"1.5s", -EINVAL, 0},
        {"1d", -EINVAL, 0},
        {"1S", -EINVAL, 0},
        {"1 s", -EINVAL, 0},
        {" 1s", -EINVAL, 0},
        {"1sms", -EINVAL, 0},
        {"1mss", -EINVAL, 0},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t ms = -1;
        int rc = sg_conf_parse_duration(cases[i].s, &ms);
        if (rc != cases[i].rc || (rc == 0 && ms != cases[i].ms)) {
            fprintf(stderr, "duration '%s': got rc %d ms %lld, want rc %d ms %lld\n", cases[i].s,
                    rc, (long long)ms, cases[i].rc, (long long)cases[i].ms);
            failures++;
        }
    }
    CHECK_INT(sg_conf_parse_duration(NULL, &(int64_t){0}), -EINVAL);
}

static void case_bool_parse(void)
{
    static const char *const yes[] = {"yes", "on", "true", "1", "YES", "On", "True"};
    static const char *const no[] = {"no", "off", "false", "0", "NO", "Off", "FALSE"};
    static const char *const bad[] = {"", "y", "n", "2", "yess", "nope", "enable", " yes", "01"};
    bool b;

    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        b = false;
        CHECK_INT(sg_conf_parse_bool(yes[i], &b), 0);
        CHECK_INT(b, true);
        b = true;
        CHECK_INT(sg_conf_parse_bool(no[i], &b), 0);
        CHECK_INT(b, false);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (sg_conf_parse_bool(bad[i], &b) != -EINVAL) {
            fprintf(stderr, "bool '%s' was accepted\n", bad[i]);
            failures++;
        }
    }
    CHECK_INT(sg_conf_parse_bool(NULL, &b), -EINVAL);
}

static void case_size_parse(void)
{
    static const struct {
        const char *s;
        int64_t bytes; /* -1: rejected */
    } cases[] = {
        {"0", 0},
        {"4096", 4096},
        {"10B", 10},
        {"64k", 65536},
        {"64K", 65536},
        {"1kB", 1024},
        {"1M", 1 << 20},
        {"1MB", 1 << 20},
        {"3m", 3 << 20},
        {"2G", INT64_C(2) << 30},
        {"8589934591G", INT64_C(8589934591) << 30},
        {"8589934592G", -1},
        {"1b", -1},
        {"k", -1},
        {"1T", -1},
        {"-1", -1},
        {"1 k", -1},
        {"1BB", -1},
        {"", -1},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct t_conf c = {.cache = -7};
        struct sg_conf_diag d;
        sg_conf_diag_init(&d);
        int rc = sg_conf_set(&top_section, &c, "cache", cases[i].s, NULL, &d);
        int64_t want = cases[i].bytes;
        if ((want < 0 && (rc != SG_E_CONFIG || c.cache != -7)) ||
            (want >= 0 && (rc != 0 || c.cache != want))) {
            fprintf(stderr, "size '%s': got rc %d bytes %lld, want %lld\n", cases[i].s, rc,
                    (long long)c.cache, (long long)want);
            failures++;
        }
    }
}

static void case_addr_split(void)
{
    static const struct {
        const char *s;
        int rc;
        const char *host, *port;
    } cases[] = {
        {"0.0.0.0:27960", 0, "0.0.0.0", "27960"},
        {"[::]:27960", 0, "::", "27960"},
        {"[::1]:0", 0, "::1", "0"},
        {"*:27960", 0, "*", "27960"},
        {"localhost:65535", 0, "localhost", "65535"},
        {"quake-1.example_x.org:1", 0, "quake-1.example_x.org", "1"},
        {"[fe80::1%eth0]:5", 0, "fe80::1%eth0", "5"},
        {"[::ffff:1.2.3.4]:5", 0, "::ffff:1.2.3.4", "5"},
        {"host:00080", 0, "host", "00080"},
        {"host:65536", -ERANGE, NULL, NULL},
        {"host:99999999999999999999999", -ERANGE, NULL, NULL},
        {"27960", -EINVAL, NULL, NULL},
        {":27960", -EINVAL, NULL, NULL},
        {"host:", -EINVAL, NULL, NULL},
        {"host:http", -EINVAL, NULL, NULL},
        {"host:-1", -EINVAL, NULL, NULL},
        {"::1:27960", -EINVAL, NULL, NULL},
        {"[::1]27960", -EINVAL, NULL, NULL},
        {"[::1]:", -EINVAL, NULL, NULL},
        {"[::1:27960", -EINVAL, NULL, NULL},
        {"[]:1", -EINVAL, NULL, NULL},
        {"[host]:1", -EINVAL, NULL, NULL},
        {"[fe80::1%]:1", -EINVAL, NULL, NULL},
        {"[:::::]:27960", -EINVAL, NULL, NULL},
        {"[1:2]:1", -EINVAL, NULL, NULL},
        {"[1::2::3]:1", -EINVAL, NULL, NULL},
        {"[::1.2.3]:1", -EINVAL, NULL, NULL},
        {"ho st:1", -EINVAL, NULL, NULL},
        {"**:1", -EINVAL, NULL, NULL},
        {"", -EINVAL, NULL, NULL},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char host[64] = "", port[8] = "";
        int rc = sg_conf_split_addr(cases[i].s, host, sizeof(host), port, sizeof(port));
        bool ok = rc == cases[i].rc;
        if (ok && rc == 0)
            ok = strcmp(host, cases[i].host) == 0 && strcmp(port, cases[i].port) == 0;
        if (!ok) {
            fprintf(stderr, "addr '%s': got rc %d host '%s' port '%s', want rc %d\n", cases[i].s,
                    rc, host, port, cases[i].rc);
            failures++;
        }
    }

    /* Short buffers. */
    char host[4], port[4];
    CHECK_INT(sg_conf_split_addr("abcd:1", host, sizeof(host), port, sizeof(port)), -ENOSPC);
    CHECK_INT(sg_conf_split_addr("abc:12345", host, sizeof(host), port, sizeof(port)), -ENOSPC);
    CHECK_INT(sg_conf_split_addr("abc:123", host, sizeof(host), port, sizeof(port)), 0);
    CHECK_STR(host, "abc");
    CHECK_STR(port, "123");
    CHECK_INT(sg_conf_split_addr(NULL, host, sizeof(host), port, sizeof(port)), -EINVAL);
}

/* Ownership and files. */

static void case_free_strings(void)
{
    struct t_conf c;
    struct sg_conf_diag d;

    /* A later value (here from sg_conf_set) frees the earlier one; ASan checks for leaks. */
    CHECK_INT(parse("log /a\nmetrics a:1\nroute r {\n  motd hi\n  demo_dir /d\n}\n", &c, &d), 0);
    CHECK_INT(sg_conf_set(&top_section, &c, "log", "/b", NULL, &d), 0);
    CHECK_INT(sg_conf_set(&route_section, &c.routes[0], "motd", "bye", NULL, &d), 0);
    CHECK_STR(c.log, "/b");
    CHECK_STR(c.routes[0].motd, "bye");

    sg_conf_free_strings(&top_section, &c);
    CHECK(c.log == NULL && c.metrics == NULL);
    sg_conf_free_strings(&route_section, &c.routes[0]);
    CHECK(c.routes[0].motd == NULL && c.routes[0].demo_dir == NULL);
    CHECK(c.routes[0].listen == NULL);
    /* Twice is harmless; NULLs are accepted. */
    sg_conf_free_strings(&top_section, &c);
    sg_conf_free_strings(NULL, &c);
    sg_conf_free_strings(&top_section, NULL);
    conf_free(&c);
}

static void case_missing_file(void)
{
    struct t_conf c = {0};
    struct sg_conf_diag d;

    sg_conf_diag_init(&d);
    CHECK_INT(sg_conf_parse_file("/nonexistent/slipgate.conf", &top_section, &c, &d), -ENOENT);
    CHECK_DIAGS(
        &d, "/nonexistent/slipgate.conf: error: cannot open file: No such file or directory", NULL);
    sg_conf_diag_init(&d);
    CHECK_INT(sg_conf_parse_file("/", &top_section, &c, &d), -EISDIR);
    CHECK_DIAGS(&d, "/: error: cannot read file: Is a directory", NULL);
}

static void case_parse_file(const char *dir)
{
    char path[4096];
    struct t_conf c = {0};
    struct sg_conf_diag d;

    snprintf(path, sizeof(path), "%s/good.conf", dir);
    sg_conf_diag_init(&d);
    CHECK_INT(sg_conf_parse_file(path, &top_section, &c, &d), 0);
    CHECK_DIAGS(&d, NULL);
    check_full(&c);
    conf_free(&c);

    snprintf(path, sizeof(path), "%s/bad.conf", dir);
    sg_conf_diag_init(&d);
    CHECK_INT(sg_conf_parse_file(path, &top_section, &c, &d), SG_E_CONFIG);
    CHECK_INT(d.count, 3);
    CHECK(strstr(d.msgs[0], "/bad.conf:3:3: error: unknown directive 'idle_timout' in route "
                            "block; did you mean 'idle_timeout'?") != NULL);
    CHECK(strstr(d.msgs[1], "/bad.conf:4:12: error: 'protocol' expects one of auto, q3, q2, qw, "
                            "nq, got 'q4'") != NULL);
    CHECK(strstr(d.msgs[2], "/bad.conf:5:13: error: block 'route' opened at line 2 is not "
                            "closed") != NULL);
    conf_free(&c);
}

static void case_null_diag(void)
{
    struct t_conf c = {0};

    /* Without a diag the result still tells success from failure. */
    CHECK_INT(sg_conf_parse_text("t.conf", "verbose yes\n", 12, &top_section, &c, NULL), 0);
    CHECK_INT(c.verbose, true);
    CHECK_INT(sg_conf_parse_text("t.conf", "verbose 7\n", 10, &top_section, &c, NULL), SG_E_CONFIG);
    CHECK_INT(sg_conf_set(&top_section, &c, "verbose", "bad", NULL, NULL), SG_E_CONFIG);
    sg_conf_diag_error(NULL, "x", 1, 1, "ignored %d", 1);

    struct sg_conf_diag d;
    sg_conf_diag_init(&d);
    sg_conf_diag_error(&d, NULL, 3, 0, "no column");
    sg_conf_diag_error(&d, "f", 0, 5, "no line");
    CHECK_DIAGS(&d, "config:3: error: no column", "f: error: no line", NULL);
}

/* Blocks written on one line, several directives on a line. */

static void case_one_line_blocks(void)
{
    struct t_conf c;
    struct sg_conf_diag d;

    CHECK_INT(parse("route r { listen 1.2.3.4:5; server b:2 }\n"
                    "route s {\n"
                    "  filter f { }\n"
                    "  filter g { level 3; enabled yes }   # a comment\n"
                    "  filter h { group { group { level 4 } } ; enabled on; }\n"
                    "  motd \"a;b\";record yes;\n"
                    "}\n"
                    "verbose yes; workers 4;; timeout 2s\n"
                    "limits { max_clients 9 }\n"
                    "route t { server c:3 ;}\n"
                    "tags \";\" x\n",
                    &c, &d),
              0);
    CHECK_DIAGS(&d, NULL);
    CHECK_INT(c.nroutes, 3);
    CHECK_STR(c.routes[0].listen, "1.2.3.4:5");
    CHECK_STR(c.routes[0].server, "b:2");
    CHECK_INT(c.routes[1].nfilters, 3);
    CHECK_INT(c.routes[1].filters[0].level, 0);
    CHECK_INT(c.routes[1].filters[1].level, 3);
    CHECK_INT(c.routes[1].filters[1].enabled, true);
    CHECK_INT(c.routes[1].filters[2].level, 4);
    CHECK_INT(c.routes[1].filters[2].enabled, true);
    CHECK_STR(c.routes[1].motd, "a;b");
    CHECK_INT(c.routes[1].record, true);
    CHECK_INT(c.verbose, true);
    CHECK_INT(c.workers, 4);
    CHECK_INT(c.timeout, 2000);
    CHECK_INT(c.max_clients, 9);
    CHECK_STR(c.routes[2].server, "c:3");
    CHECK_INT(c.ntags, 2);
    CHECK_STR(c.tags[0], ";");
    conf_free(&c);
}

static void case_one_line_errors(void)
{
    struct t_conf c;
    struct sg_conf_diag d;

    /* The errors of the directives on a one-line block, each at its place; the rest is stored. */
    CHECK_INT(parse("route r { listen 1.2.3.4:5; idle_timout 5s; protocol q4; server b:2 }\n"
                    "route s { filter f { levle 1 } ; record maybe }\n"
                    "verbose yes; verbose no\n"
                    "route u { listen 1.2.3.4:5 { x } ; server d:4 }\n",
                    &c, &d),
              SG_E_CONFIG);
    CHECK_DIAGS(&d,
                "t.conf:1:29: error: unknown directive 'idle_timout' in route block; did you mean "
                "'idle_timeout'?",
                "t.conf:1:54: error: 'protocol' expects one of auto, q3, q2, qw, nq, got 'q4'",
                "t.conf:2:22: error: unknown directive 'levle' in filter block; did you mean "
                "'level'?",
                "t.conf:2:41: error: 'record' expects yes or no (or on/off, true/false, 1/0), "
                "got 'maybe'",
                "t.conf:3:14: error: 'verbose' given twice (first at line 3)",
                "t.conf:4:28: error: 'listen' is not a block", NULL);
    CHECK_INT(c.nroutes, 3);
    CHECK_STR(c.routes[0].listen, "1.2.3.4:5");
    CHECK_STR(c.routes[0].server, "b:2");
    CHECK_INT(c.routes[1].nfilters, 1);
    CHECK_STR(c.routes[2].server, "d:4");
    CHECK_INT(c.verbose, true);
    conf_free(&c);

    /*
     * A one-line block without its '}': one error at its '{', and the block
     * ends with its line, so the next lines are read where they were meant.
     */
    CHECK_INT(parse("route r {\n"
                    "  filter f { level 1\n"
                    "  filter g { level 2 }\n"
                    "  record yes\n"
                    "}\n"
                    "route s { listen 1.2.3.4:5; filter h { enabled yes }\n"
                    "verbose yes\n",
                    &c, &d),
              SG_E_CONFIG);
    CHECK_DIAGS(&d,
                "t.conf:2:12: error: block 'filter' has directives after its '{' but no '}' on "
                "the same line; a block written on one line must end on it",
                "t.conf:6:9: error: block 'route' has directives after its '{' but no '}' on "
                "the same line; a block written on one line must end on it",
                NULL);
    CHECK_INT(c.nroutes, 2);
    CHECK_INT(c.routes[0].nfilters, 2);
    CHECK_INT(c.routes[0].filters[0].level, 1);
    CHECK_INT(c.routes[0].filters[1].level, 2);
    CHECK_INT(c.routes[0].record, true);
    CHECK_STR(c.routes[1].listen, "1.2.3.4:5");
    CHECK_INT(c.verbose, true);
    conf_free(&c);

    /* Too many '}' on a line, a quote glued to a ';', a lex error inside a one-line block. */
    EXPECT_ERRORS("route r { record yes } }\n"
                  "route s { motd \"x\"; record no }\n"
                  "route t { motd \"a\\qb\" }\n"
                  "verbose yes;}\n",
                  "t.conf:1:24: error: unexpected '}'",
                  "t.conf:3:18: error: unknown escape '\\q' in quoted string; use \\\", \\\\, "
                  "\\n or \\t",
                  "t.conf:4:13: error: unexpected '}'", NULL);
}

static const struct unit_case cases[] = {
#define C(n)                                                                                       \
    {                                                                                              \
#n, case_##n                                                                               \
    }
    C(good_full),
    C(good_crlf),
    C(comments),
    C(empty),
    C(escapes),
    C(unterminated),
    C(nul_byte),
    C(unknown_directive),
    C(suggest),
    C(bad_int),
    C(bad_enum),
    C(enum_choice_at),
    C(bad_duration),
    C(bad_size),
    C(bad_bool),
    C(bad_addr),
    C(bad_path),
    C(value_count),
    C(duplicate),
    C(nested_block),
    C(unexpected_close),
    C(unclosed_block),
    C(block_without_brace),
    C(not_a_block),
    C(stray_braces),
    C(bad_block_recovery),
    C(depth_limit),
    C(multiple_errors),
    C(diag_overflow),
    C(set_ok),
    C(set_unknown),
    C(set_bad),
    C(duration_parse),
    C(bool_parse),
    C(size_parse),
    C(addr_split),
    C(free_strings),
    C(missing_file),
    C(null_diag),
    C(one_line_blocks),
    C(one_line_errors),
#undef C
};

int main(int argc, char **argv)
{
    /* parse_file takes the fixtures' directory as a second argument */
    if (argc > 1 && strcmp(argv[1], "parse_file") == 0) {
        case_parse_file(argc > 2 ? argv[2] : ".");
        return failures ? 1 : 0;
    }
    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
