/*
 * fuzz_config: the configuration reader (config/config.h
 * sg_conf_parse_text) and `+set NAME VALUE` (sg_conf_set), with a section
 * table that has every value type, a second table in one section, a block
 * filling its parent, blocks making child objects and a self-nesting block
 * for the depth limit.  The directive names are those of slipgate's own
 * tables and of tests/config, so real files make good seeds.
 *
 * Input:
 *
 *     TEXT                           the file, any bytes but two NULs in a row
 *     [ 00 00 NAME 00 VALUE { 00 NAME 00 VALUE } ]   +set overrides
 *
 * A NAME "ROUTE.directive" sets a directive of route ROUTE (checked only,
 * with no object, when there is no such route); any other NAME a top-level
 * directive.
 *
 * Properties:
 *  - the reader never reads past TEXT (copied into a buffer of its own
 *    size, without a NUL) and returns 0 exactly when it reported nothing;
 *    each diagnostic is "fuzz.conf:..." and NUL-terminated;
 *  - whatever it stored is valid: numbers within the directive's bounds,
 *    enums within their choices, addresses that split, paths not empty;
 *  - sg_conf_set returns -ENOENT exactly for unknown names, reports a
 *    diagnostic exactly when it returns SG_E_CONFIG, and keeps the object
 *    valid; suggestions are known names; the value helpers return only
 *    their documented codes;
 *  - every string is freed through sg_conf_free_strings (LeakSanitizer).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "fuzz_common.h"
#include "protocols/error.h"

#define MAX_ROUTES  4
#define MAX_FILTERS 4
#define MAX_TAGS    8
#define UNSET       INT64_MIN

struct f_filter {
    char name[32];
    char *label;
    int64_t level;
    bool enabled;
};

struct f_route {
    char name[32];
    char *listen, *server, *record, *demo_dir, *motd;
    int64_t idle, max_sessions, per_source, buffer;
    int protocol, reencode;
    struct f_filter filters[MAX_FILTERS];
    int nfilters;
};

struct f_conf {
    char *log, *stats_file, *metrics;
    int log_level;
    bool verbose;
    int64_t workers, timeout, cache, max_clients;
    char *tags[MAX_TAGS];
    int ntags;
    struct f_route routes[MAX_ROUTES];
    int nroutes;
};

/* ---- the tables ---- */

static const char *const log_levels[] = {"error", "warn", "info", "debug", "trace", NULL};
static const char *const protocols[] = {"auto", "q3", "q2", "qw", "nq", NULL};
static const char *const reencodes[] = {"changed", "always", NULL};

static void route_init(struct f_route *r)
{
    memset(r, 0, sizeof(*r));
    r->idle = r->max_sessions = r->per_source = r->buffer = UNSET;
    r->protocol = r->reencode = -1;
}

static void *open_route(void *obj, const struct sg_conf_directive *d,
                        const struct sg_conf_arg *args, int nargs, struct sg_conf_diag *diag,
                        const char *file)
{
    struct f_conf *c = obj;
    struct f_route *r;

    if (nargs > 1) {
        sg_conf_diag_error(diag, file, args[-1].line, args[-1].col,
                           "'route' expects at most one name, got %d", nargs);
        return NULL;
    }
    if (c->nroutes == MAX_ROUTES) {
        sg_conf_diag_error(diag, file, args[-1].line, args[-1].col, "too many routes");
        return NULL;
    }
    r = &c->routes[c->nroutes++];
    route_init(r);
    snprintf(r->name, sizeof(r->name), "%s", nargs ? args[0].text : "default");
    return r;
}

static void *open_filter(void *obj, const struct sg_conf_directive *d,
                         const struct sg_conf_arg *args, int nargs, struct sg_conf_diag *diag,
                         const char *file)
{
    struct f_route *r = obj;
    struct f_filter *f;

    if (nargs != 1 || r->nfilters == MAX_FILTERS) {
        sg_conf_diag_error(diag, file, args[-1].line, args[-1].col, "bad filter");
        return NULL;
    }
    f = &r->filters[r->nfilters++];
    memset(f, 0, sizeof(*f));
    f->level = UNSET;
    snprintf(f->name, sizeof(f->name), "%s", args[0].text);
    return f;
}

static int set_tags(void *obj, const struct sg_conf_directive *d, const struct sg_conf_arg *args,
                    int nargs, struct sg_conf_diag *diag, const char *file)
{
    struct f_conf *c = obj;

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

#define FT(field) offsetof(struct f_filter, field)
static const struct sg_conf_directive filter_dirs[] = {
    {.name = "label", .type = SG_CONF_STRING, .offset = FT(label)},
    {.name = "level", .type = SG_CONF_INT, .offset = FT(level), .min = -5, .max = 5},
    {.name = "enabled", .type = SG_CONF_BOOL, .offset = FT(enabled)},
    {.name = "group", .type = SG_CONF_BLOCK, .child = &filter_section},
    {NULL},
};
static const struct sg_conf_directive *const filter_tables[] = {filter_dirs, NULL};
static const struct sg_conf_section filter_section = {"filter", filter_tables};

#define RT(field) offsetof(struct f_route, field)
static const struct sg_conf_directive route_dirs[] = {
    {.name = "listen", .type = SG_CONF_ADDR, .offset = RT(listen)},
    {.name = "server", .type = SG_CONF_ADDR, .offset = RT(server)},
    {.name = "protocol", .type = SG_CONF_ENUM, .offset = RT(protocol), .choices = protocols},
    {.name = "idle_timeout",
     .type = SG_CONF_DURATION,
     .offset = RT(idle),
     .min = 100,
     .max = 7LL * 24 * 3600 * 1000},
    {.name = "max_sessions",
     .type = SG_CONF_INT,
     .offset = RT(max_sessions),
     .min = 1,
     .max = 1000000},
    {.name = "new_sessions_per_source",
     .type = SG_CONF_INT,
     .offset = RT(per_source),
     .min = 1,
     .max = 1000000},
    {.name = "reencode", .type = SG_CONF_ENUM, .offset = RT(reencode), .choices = reencodes},
    {.name = "record", .type = SG_CONF_PATH, .offset = RT(record)},
    {.name = "demo_dir", .type = SG_CONF_PATH, .offset = RT(demo_dir)},
    {.name = "motd", .type = SG_CONF_STRING, .offset = RT(motd)},
    {.name = "buffer", .type = SG_CONF_SIZE, .offset = RT(buffer), .min = 1024, .max = 1 << 20},
    {.name = "filter", .type = SG_CONF_BLOCK, .open = open_filter, .child = &filter_section},
    {NULL},
};
static const struct sg_conf_directive *const route_tables[] = {route_dirs, NULL};
static const struct sg_conf_section route_section = {"route", route_tables};

#define CT(field) offsetof(struct f_conf, field)
static const struct sg_conf_directive limits_dirs[] = {
    {.name = "max_clients", .type = SG_CONF_INT, .offset = CT(max_clients), .min = 1, .max = 999},
    {NULL},
};
static const struct sg_conf_directive *const limits_tables[] = {limits_dirs, NULL};
static const struct sg_conf_section limits_section = {"limits", limits_tables};

static const struct sg_conf_directive top_dirs[] = {
    {.name = "log_level", .type = SG_CONF_ENUM, .offset = CT(log_level), .choices = log_levels},
    {.name = "stats_file", .type = SG_CONF_PATH, .offset = CT(stats_file)},
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

/* ---- checks ---- */

static void check_bounds(int64_t v, int64_t lo, int64_t hi)
{
    FUZZ_CHECK(v == UNSET || (v >= lo && v <= hi));
}

static void check_enum(int v, const char *const *choices)
{
    int n = 0;

    while (choices[n])
        n++;
    FUZZ_CHECK(v == -1 || (v >= 0 && v < n));
}

static void check_addr(const char *s)
{
    char host[512], port[16];

    FUZZ_CHECK(!s || sg_conf_split_addr(s, host, sizeof(host), port, sizeof(port)) == 0);
}

static void check_path(const char *s)
{
    FUZZ_CHECK(!s || s[0] != '\0');
}

/* Everything stored is a value its directive accepts. */
static void check_conf(const struct f_conf *c)
{
    FUZZ_CHECK(c->nroutes >= 0 && c->nroutes <= MAX_ROUTES);
    FUZZ_CHECK(c->ntags >= 0 && c->ntags <= MAX_TAGS);
    check_enum(c->log_level, log_levels);
    check_path(c->stats_file);
    check_path(c->log);
    check_addr(c->metrics);
    check_bounds(c->max_clients, 1, 999);
    for (int i = 0; i < c->nroutes; i++) {
        const struct f_route *r = &c->routes[i];

        check_addr(r->listen);
        check_addr(r->server);
        check_path(r->record);
        check_path(r->demo_dir);
        check_enum(r->protocol, protocols);
        check_enum(r->reencode, reencodes);
        check_bounds(r->idle, 100, 7LL * 24 * 3600 * 1000);
        check_bounds(r->max_sessions, 1, 1000000);
        check_bounds(r->per_source, 1, 1000000);
        check_bounds(r->buffer, 1024, 1 << 20);
        FUZZ_CHECK(r->nfilters >= 0 && r->nfilters <= MAX_FILTERS);
        for (int k = 0; k < r->nfilters; k++)
            check_bounds(r->filters[k].level, -5, 5);
    }
}

static void check_diags(const struct sg_conf_diag *diag, int from, const char *origin)
{
    size_t n = strlen(origin);

    for (int i = from; i < diag->count && i < SG_CONF_MAX_DIAGS; i++) {
        FUZZ_CHECK(memchr(diag->msgs[i], '\0', sizeof(diag->msgs[i])) != NULL);
        FUZZ_CHECK(strncmp(diag->msgs[i], origin, n) == 0 && diag->msgs[i][n] == ':');
    }
}

/* The value helpers, on their own. */
static void check_helpers(const char *value)
{
    char host[256], port[8], small_host[4], small_port[2];
    int64_t ms;
    bool b;
    int rc;

    rc = sg_conf_parse_duration(value, &ms);
    FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ERANGE);
    rc = sg_conf_parse_bool(value, &b);
    FUZZ_CHECK(rc == 0 || rc == -EINVAL);
    rc = sg_conf_split_addr(value, host, sizeof(host), port, sizeof(port));
    FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ERANGE || rc == -ENOSPC);
    if (rc == 0)
        FUZZ_CHECK(strlen(host) < sizeof(host) && strlen(port) < sizeof(port) &&
                   atol(port) <= 65535);
    rc = sg_conf_split_addr(value, small_host, sizeof(small_host), small_port, sizeof(small_port));
    FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ERANGE || rc == -ENOSPC);
}

/* One `+set NAME VALUE`. */
static void set_one(struct f_conf *c, const char *name, const char *value,
                    struct sg_conf_diag *diag)
{
    const struct sg_conf_section *section = &top_section;
    const char *dot = strchr(name, '.'), *near;
    void *obj = c;
    int before = diag->count, rc;

    if (dot) {
        obj = NULL;
        for (int i = 0; i < c->nroutes; i++)
            if (strlen(c->routes[i].name) == (size_t)(dot - name) &&
                memcmp(c->routes[i].name, name, (size_t)(dot - name)) == 0)
                obj = &c->routes[i];
        section = &route_section;
        name = dot + 1;
    }
    rc = sg_conf_set(section, obj, name, value, "command line", diag);
    FUZZ_CHECK(rc == 0 || rc == -ENOENT || rc == SG_E_CONFIG);
    FUZZ_CHECK((rc == -ENOENT) == (sg_conf_find(section, name) == NULL));
    FUZZ_CHECK((rc == SG_E_CONFIG) == (diag->count > before));
    check_diags(diag, before, "command line");
    near = sg_conf_suggest(section, name);
    FUZZ_CHECK(!near || sg_conf_find(section, near) != NULL);
    check_helpers(value);
}

static void free_conf(struct f_conf *c)
{
    sg_conf_free_strings(&top_section, c);
    for (int i = 0; i < c->nroutes; i++) {
        sg_conf_free_strings(&route_section, &c->routes[i]);
        for (int k = 0; k < c->routes[i].nfilters; k++)
            sg_conf_free_strings(&filter_section, &c->routes[i].filters[k]);
    }
    for (int i = 0; i < c->ntags; i++)
        free(c->tags[i]);
}

/* Where the +set part starts: the first two NULs in a row, or the end. */
static size_t text_length(const uint8_t *data, size_t size)
{
    for (size_t i = 0; i + 1 < size; i++)
        if (data[i] == 0 && data[i + 1] == 0)
            return i;
    return size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct f_conf *c = calloc(1, sizeof(*c));
    struct sg_conf_diag *diag = malloc(sizeof(*diag));
    size_t len = text_length(data, size), pos;
    char *text, *sets;
    int rc;

    FUZZ_CHECK(c && diag);
    c->log_level = -1;
    c->workers = c->timeout = c->cache = c->max_clients = UNSET;
    sg_conf_diag_init(diag);

    /* the file */
    text = malloc(len ? len : 1);
    FUZZ_CHECK(text != NULL);
    memcpy(text, data, len);
    rc = sg_conf_parse_text("fuzz.conf", text, len, &top_section, c, diag);
    free(text);
    FUZZ_CHECK(rc == 0 || rc == SG_E_CONFIG);
    FUZZ_CHECK((rc == 0) == (diag->count == 0));
    check_diags(diag, 0, "fuzz.conf");
    check_conf(c);

    /* the overrides: NUL-separated NAME VALUE pairs */
    pos = len + 2;
    if (pos < size) {
        sets = malloc(size - pos + 1);
        FUZZ_CHECK(sets != NULL);
        memcpy(sets, data + pos, size - pos);
        sets[size - pos] = '\0';
        for (size_t i = 0; i < size - pos;) {
            const char *name = sets + i, *value;

            i += strlen(name) + 1;
            if (i >= size - pos)
                break;
            value = sets + i;
            i += strlen(value) + 1;
            set_one(c, name, value, diag);
            check_conf(c);
        }
        free(sets);
    }

    free_conf(c);
    free(c);
    free(diag);
    return 0;
}
