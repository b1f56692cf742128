/*
 * The proxy's directive tables and the loading sequence:
 * defaults -> config file -> -l/-s/-p -> +set NAME VALUE -> validation.
 */
#include "proxy/conf.h"
#include "proxy/addr.h"

#include "proxy/log.h"
#include "filters/anon.h"
#include "filters/sign.h"
#include "protocols/codec.h"
#include "protocols/error.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *sg_protocol_choice(int i)
{
    if (i == 0)
        return "auto";
    for (int k = 0; sg_codecs[k]; k++)
        if (k == i - 1)
            return sg_codecs[k]->name;
    return NULL;
}

const char *sg_protocol_name(int protocol)
{
    const char *s = protocol >= 0 ? sg_protocol_choice(protocol) : NULL;

    return s ? s : "?";
}

const struct sg_codec *sg_protocol_codec(int protocol)
{
    for (int k = 0; protocol > 0 && sg_codecs[k]; k++)
        if (k == protocol - 1)
            return sg_codecs[k];
    return NULL;
}
const char *const sg_reencode_names[] = {"changed", "always", NULL};
const char *const sg_undecodable_names[] = {"relay", "drop", NULL};
static const char *const anonymize_names[] = {"no", "yes", NULL};
/* residence times */
static const char *const residence_names[] = {"on", "off", NULL};
#define RESIDENCE_HELP                                                                             \
    "measure each relayed datagram's residence time (receive to send) into the "                   \
    "slipgate_datagram_residence_seconds histogram (default on)"

/* readiness probe */
static const char *const ready_probe_names[] = {"off", "on", NULL};
#define READY_PROBE_HELP                                                                           \
    "/ready also needs the route's server to have answered the game's status query within "        \
    "ready_probe_timeout (slipgate asks it every few seconds; default off)"

/* ---- route blocks ---- */

static void *filter_open(void *obj, const struct sg_conf_directive *d,
                         const struct sg_conf_arg *args, int nargs, struct sg_conf_diag *diag,
                         const char *file)
{
    struct sg_route_conf *rc = obj;

    return sg_filter_conf_open(&rc->filters, rc->top ? rc->top->plugins : NULL, args, nargs, diag,
                               file);
}

/* Where `listen` and `server` were given, for --check-config's resolve and bind checks. */
static void addr_stored(void *obj, const struct sg_conf_directive *d, const struct sg_conf_arg *arg)
{
    struct sg_route_conf *rc = obj;
    bool listen = strcmp(d->name, "listen") == 0;

    *(listen ? &rc->listen_line : &rc->server_line) = arg->line;
    *(listen ? &rc->listen_col : &rc->server_col) = arg->col;
}

/* spectators: where `spectate` was given, for the checks that name it. */
static void spectate_stored(void *obj, const struct sg_conf_directive *d,
                            const struct sg_conf_arg *arg)
{
    struct sg_route_conf *rc = obj;

    (void)d;
    rc->spectate_line = arg->line;
    rc->spectate_col = arg->col;
}

/* `nq_accept_ports LOW-HIGH` (or one PORT). */
static int nq_ports_set(void *obj, const struct sg_conf_directive *d,
                        const struct sg_conf_arg *args, int nargs, struct sg_conf_diag *diag,
                        const char *file)
{
    struct sg_route_conf *rc = obj;
    long low, high;
    char *end;

    if (nargs != 1) {
        const struct sg_conf_arg *at = nargs ? &args[1] : &args[-1];
        sg_conf_diag_error(diag, file, at->line, at->col, "'%s' takes one argument, LOW-HIGH",
                           d->name);
        return SG_E_CONFIG;
    }
    errno = 0;
    low = strtol(args[0].text, &end, 10);
    high = low;
    if (end != args[0].text && *end == '-')
        high = strtol(end + 1, &end, 10);
    if (errno || end == args[0].text || *end || low < 1 || high > 65535 || low > high) {
        sg_conf_diag_error(diag, file, args[0].line, args[0].col,
                           "'%s' wants ports LOW-HIGH within 1-65535, not '%.63s'", d->name,
                           args[0].text);
        return SG_E_CONFIG;
    }
    rc->nq_accept_low = (int)low;
    rc->nq_accept_high = (int)high;
    return 0;
}

/* ---- master servers ---- */

/* `master HOST:PORT ...`: every value is a master; the directive may repeat. */
static int master_set(void *obj, const struct sg_conf_directive *d, const struct sg_conf_arg *args,
                      int nargs, struct sg_conf_diag *diag, const char *file)
{
    struct sg_route_conf *rc = obj;
    struct sg_master_conf *m;

    if (nargs < 1) {
        sg_conf_diag_error(diag, file, args[-1].line, args[-1].col,
                           "'%s' takes one or more HOST:PORT", d->name);
        return SG_E_CONFIG;
    }
    for (int i = 0; i < nargs; i++) {
        const char *colon = strrchr(args[i].text, ':');
        char *end;
        long port = colon ? strtol(colon + 1, &end, 10) : 0;

        if (!colon || colon == args[i].text || !colon[1] || *end || port < 1 || port > 65535) {
            sg_conf_diag_error(diag, file, args[i].line, args[i].col,
                               "'%s' wants HOST:PORT (IPv6 as [ADDR]:PORT), not '%.63s'", d->name,
                               args[i].text);
            return SG_E_CONFIG;
        }
    }
    m = realloc(rc->masters, (size_t)(rc->nmasters + nargs) * sizeof(*m));
    if (!m)
        return -ENOMEM;
    rc->masters = m;
    for (int i = 0; i < nargs; i++) {
        struct sg_master_conf *e = &m[rc->nmasters];
        if (!(e->addr = strdup(args[i].text)))
            return -ENOMEM;
        e->line = args[i].line;
        e->col = args[i].col;
        rc->nmasters++;
    }
    return 0;
}

struct sg_master_conf *sg_master_conf_copy(const struct sg_master_conf *m, int n)
{
    struct sg_master_conf *c = n > 0 ? calloc((size_t)n, sizeof(*c)) : NULL;

    for (int i = 0; c && i < n; i++) {
        c[i] = m[i];
        if (!(c[i].addr = strdup(m[i].addr))) {
            sg_master_conf_free(c, i);
            return NULL;
        }
    }
    return c;
}

void sg_master_conf_free(struct sg_master_conf *m, int n)
{
    for (int i = 0; m && i < n; i++)
        free(m[i].addr);
    free(m);
}

/* Where `record`, `stats_file` and `http` were given, for the system checks' file:line. */
static void record_stored(void *obj, const struct sg_conf_directive *d,
                          const struct sg_conf_arg *arg)
{
    ((struct sg_route_conf *)obj)->record_line = arg->line;
}

static void top_place_stored(void *obj, const struct sg_conf_directive *d,
                             const struct sg_conf_arg *arg)
{
    struct sg_conf *conf = obj;

    if (strcmp(d->name, "http") == 0) {
        conf->http_line = arg->line;
        conf->http_col = arg->col;
    } else {
        conf->stats_file_line = arg->line;
    }
}

/* Where `sign_key` was given, for the start-up check's file:line. */
static void route_key_stored(void *obj, const struct sg_conf_directive *d,
                             const struct sg_conf_arg *arg)
{
    ((struct sg_route_conf *)obj)->sign_key_line = arg->line;
}

static void top_key_stored(void *obj, const struct sg_conf_directive *d,
                           const struct sg_conf_arg *arg)
{
    ((struct sg_conf *)obj)->sign_key_line = arg->line;
}

/* Where `anonymize_key` was given. */
static void route_anon_key_stored(void *obj, const struct sg_conf_directive *d,
                                  const struct sg_conf_arg *arg)
{
    ((struct sg_route_conf *)obj)->anonymize_key_line = arg->line;
}

static void top_anon_key_stored(void *obj, const struct sg_conf_directive *d,
                                const struct sg_conf_arg *arg)
{
    ((struct sg_conf *)obj)->anonymize_key_line = arg->line;
}

#define ANONYMIZE_HELP                                                                             \
    "replace client addresses with a keyed pseudonym (anon-XXXXXXXX) in logs, --stats, demo "     \
    "names, .sig files, textlog/inspect output, the HTTP pages and pcap captures (default no)"
#define ANONYMIZE_KEY_HELP                                                                         \
    "the pseudonyms' secret key, made (mode 0600) when it does not exist (default "               \
    "$STATE_DIRECTORY/anonymize.key, else $XDG_STATE_HOME or ~/.local/state: "                      \
    "slipgate/anonymize.key)"

#define SIGN_KEY_HELP                                                                              \
    "sign every recording (demos, pcap captures) with this secret key (from `slipgate keygen`, "  \
    "mode 0600): a FILE.sig beside each (check with `slipgate demo verify`)"
#define SIGN_INTERVAL_HELP                                                                         \
    "how often a signed recording gets a checkpoint, the point up to which a cut recording "      \
    "still verifies (default 10s)"

/* ---- bans and admin controls ---- */

/* `ban ADDR[/BITS] [until WHEN] [REASON...]` and `admin_from ADDR[/BITS]...`. */
static int ban_set(void *obj, const struct sg_conf_directive *d, const struct sg_conf_arg *args,
                   int nargs, struct sg_conf_diag *diag, const char *file)
{
    struct sg_route_conf *rc = obj;
    bool admin = strcmp(d->name, "admin_from") == 0;
    struct sg_ban_list **list = admin ? &rc->admin_from : &rc->bans;
    struct sg_ban_rule rule;
    char text[512], why[200];
    size_t n = 0;

    if (nargs < 1) {
        sg_conf_diag_error(diag, file, args[-1].line, args[-1].col, "'%s' needs %s", d->name,
                           admin ? "ADDR[/BITS] ..." : "ADDR[/BITS] [until WHEN] [REASON]");
        return SG_E_CONFIG;
    }
    if (!*list && !(*list = sg_ban_list_create()))
        return -ENOMEM;
    /* admin_from: each argument one entry; ban: the arguments are one rule. */
    for (int i = 0; i < nargs; i++) {
        if (admin || i == 0)
            n = 0;
        n += (size_t)snprintf(text + n, n < sizeof(text) ? sizeof(text) - n : 0, "%s%s",
                              n ? " " : "", args[i].text);
        if (n >= sizeof(text)) {
            sg_conf_diag_error(diag, file, args[i].line, args[i].col, "'%s': line too long",
                               d->name);
            return SG_E_CONFIG;
        }
        if (!admin && i + 1 < nargs)
            continue;
        if (sg_ban_rule_parse(text, !admin, &rule, why, sizeof(why)) < 0) {
            const struct sg_conf_arg *at = admin ? &args[i] : &args[0];
            sg_conf_diag_error(diag, file, at->line, at->col, "'%s': %s", d->name, why);
            return SG_E_CONFIG;
        }
        rule.line = args[0].line;
        if (sg_ban_list_add(*list, &rule) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* The `ban_file`s, read now: a bad line stops the load (or the reload) with FILE:LINE. */
static int load_ban_files(struct sg_route_conf *r, struct sg_conf_diag *diag)
{
    int rc = 0, err;

    if (r->ban_files.count && !r->bans && !(r->bans = sg_ban_list_create()))
        return -ENOMEM;
    for (int i = 0; i < r->ban_files.count; i++) {
        err = sg_ban_file_load(r->bans, r->ban_files.items[i].argv[0], diag);
        if (err == -ENOMEM)
            return err;
        if (err < 0)
            rc = SG_E_CONFIG;
    }
    return rc;
}

#define BAN_DIRECTIVES                                                                             \
    {.name = "ban",                                                                                \
     .type = SG_CONF_CUSTOM,                                                                       \
     .set = ban_set,                                                                               \
     .argname = "ADDR[/BITS] [until WHEN] [REASON]",                                               \
     .help = "refuse a client address or CIDR range (IPv4 or IPv6) at the door, until WHEN (UTC, " \
             "2026-12-31T18:00Z) or for good; repeatable (doc/security.md)"},                      \
        {.name = "ban_file",                                                                       \
         .type = SG_CONF_LIST,                                                                     \
         .offset = offsetof(struct sg_route_conf, ban_files),                                      \
         .argname = "FILE",                                                                        \
         .help = "read bans from FILE, one `ADDR[/BITS] [until WHEN] [REASON]` a line, # "         \
                 "comments; read again on reload (SIGHUP); repeatable"},                           \
        {.name = "admin_from",                                                                     \
         .type = SG_CONF_CUSTOM,                                                                   \
         .set = ban_set,                                                                           \
         .argname = "ADDR[/BITS] ...",                                                             \
         .help = "only these addresses may send the game's out-of-band remote administration "     \
                 "(rcon) through this route; others' are dropped (default: anyone); repeatable"}

/* ---- upstream source addresses ---- */

/* `upstream_source ADDR ...`: local addresses (IPv4 or IPv6, no port) the
 * sessions' upstream sockets bind in turn; each must be bindable here now. */
static int upstream_source_set(void *obj, const struct sg_conf_directive *d,
                               const struct sg_conf_arg *args, int nargs,
                               struct sg_conf_diag *diag, const char *file)
{
    struct sg_route_conf *rc = obj;

    if (nargs < 1) {
        sg_conf_diag_error(diag, file, args[-1].line, args[-1].col,
                           "'%s' takes one or more local addresses (no port)", d->name);
        return SG_E_CONFIG;
    }
    for (int i = 0; i < nargs; i++) {
        struct sockaddr_storage ss;
        const char *t = args[i].text;
        int fd;

        memset(&ss, 0, sizeof(ss));
        if (inet_pton(AF_INET, t, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
            ss.ss_family = AF_INET;
        } else if (inet_pton(AF_INET6, t, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
            ss.ss_family = AF_INET6;
        } else {
            sg_conf_diag_error(diag, file, args[i].line, args[i].col,
                               "'%s' wants an IPv4 or IPv6 address without a port, not '%.63s'",
                               d->name, t);
            return SG_E_CONFIG;
        }
        if (rc->nupstream_source >= SG_UPSTREAM_SOURCES_MAX) {
            sg_conf_diag_error(diag, file, args[i].line, args[i].col,
                               "'%s': at most %d addresses per route", d->name,
                               SG_UPSTREAM_SOURCES_MAX);
            return SG_E_CONFIG;
        }
        if ((fd = sg_addr_try_bind((struct sockaddr *)&ss)) < 0) {
            sg_conf_diag_error(diag, file, args[i].line, args[i].col,
                               "'%s': cannot bind %s here: %s (an address of this host?)",
                               d->name, t, strerror(-fd));
            return SG_E_CONFIG;
        }
        close(fd);
        rc->upstream_source[rc->nupstream_source++] = ss;
    }
    return 0;
}

#define UPSTREAM_SOURCE_DIRECTIVES                                                                 \
    {.name = "upstream_source",                                                                    \
     .type = SG_CONF_CUSTOM,                                                                       \
     .set = upstream_source_set,                                                                   \
     .argname = "ADDR ...",                                                                        \
     .help = "local addresses the sessions' server-side sockets bind in turn (of the server's "   \
             "family), so the server sees players at different addresses (default: the "        \
             "system's choice); repeatable"}

static const struct sg_conf_directive route_directives[] = {
    {.name = "listen",
     .type = SG_CONF_ADDR,
     .stored = addr_stored,
     .offset = offsetof(struct sg_route_conf, listen),
     .port0 = true,
     .argname = "ADDR:PORT",
     .help =
         "address to receive clients on; [::]:PORT is dual-stack (default " SG_DEFAULT_LISTEN ")"},
    {.name = "server",
     .type = SG_CONF_ADDR,
     .stored = addr_stored,
     .offset = offsetof(struct sg_route_conf, server),
     .argname = "HOST:PORT",
     .help = "the real game server (names resolve; IPv6 as [addr]:port)"},
    {.name = "protocol",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct sg_route_conf, protocol),
     .choice_at = sg_protocol_choice,
     .argname = "auto|GAME",
     .help = "game protocol to decode; auto relays without decoding until a codec claims it"},
    {.name = "idle_timeout",
     .type = SG_CONF_DURATION,
     .offset = offsetof(struct sg_route_conf, idle_timeout_ms),
     .min = 100,
     .max = 7LL * 24 * 3600 * 1000,
     .argname = "DURATION",
     .help = "end a session after this long without traffic (default 60s)"},
    {.name = "handshake_timeout",
     .type = SG_CONF_DURATION,
     .offset = offsetof(struct sg_route_conf, handshake_timeout_ms),
     .min = 100,
     .max = 3600LL * 1000,
     .argname = "DURATION",
     .help = "end a session the server has not answered, or whose game handshake has not "
             "completed, after this long; a full table ends such sessions first (default 5s)"},
    {.name = "max_sessions",
     .type = SG_CONF_INT,
     .offset = offsetof(struct sg_route_conf, max_sessions),
     .min = 1,
     .max = 1000000,
     .argname = "N",
     .help = "most sessions (clients) at once on this route (default 1024)"},
    {.name = "new_sessions_per_source",
     .type = SG_CONF_INT,
     .offset = offsetof(struct sg_route_conf, new_sessions_per_source),
     .min = 1,
     .max = 1000000,
     .argname = "N",
     .help = "new sessions per second one source IP may open (default 10)"},
    {.name = "source_prefix_v6",
     .type = SG_CONF_INT,
     .offset = offsetof(struct sg_route_conf, source_prefix_v6),
     .min = 32,
     .max = 128,
     .argname = "BITS",
     .help = "the per-source limits count an IPv6 source by its first BITS bits: one "
             "host commonly holds a whole /64 (default 64; 128: each address)"},
    {.name = "socket_buffer",
     .type = SG_CONF_SIZE,
     .offset = offsetof(struct sg_route_conf, socket_buffer),
     .min = 0,
     .max = 1024LL * 1024 * 1024,
     .argname = "SIZE",
     .help = "kernel receive and send buffer of the listening socket, which carries every "
             "client's datagrams (default 0: the system's, net.core.rmem_default)"},
    {.name = "reencode",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct sg_route_conf, reencode),
     .choices = sg_reencode_names,
     .argname = "changed|always",
     .help = "rebuild only frames a filter changed (default), or every decoded message"},
    {.name = "undecodable",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct sg_route_conf, undecodable),
     .choices = sg_undecodable_names,
     .argname = "relay|drop",
     .help = "relay a datagram the codec cannot decode whole as it came (default), or drop it "
             "(no filter is passed by what slipgate cannot read; counted as undecodable drops)"},
    {.name = "nq_accept_ports",
     .type = SG_CONF_CUSTOM,
     .set = nq_ports_set,
     .argname = "LOW-HIGH",
     .help = "ports of the server's host a NetQuake accept may move a session to (default "
             "1024-65535)"},
    {.name = "record",
     .type = SG_CONF_PATH,
     .stored = record_stored,
     .offset = offsetof(struct sg_route_conf, record),
     .argname = "DIR",
     .help = "write each session's demo files (.dm_68, ...) into DIR (a `record` filter at the "
             "end of the chain)"},
    {.name = "sign_key",
     .type = SG_CONF_PATH,
     .stored = route_key_stored,
     .offset = offsetof(struct sg_route_conf, sign_key),
     .argname = "FILE",
     .help = SIGN_KEY_HELP},
    {.name = "sign_interval",
     .type = SG_CONF_DURATION,
     .offset = offsetof(struct sg_route_conf, sign_interval_ms),
     .min = 1000,
     .max = 3600LL * 1000,
     .argname = "DURATION",
     .help = SIGN_INTERVAL_HELP},
    {.name = "anonymize",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct sg_route_conf, anonymize),
     .choices = anonymize_names,
     .argname = "yes|no",
     .help = ANONYMIZE_HELP},
    {.name = "anonymize_key",
     .type = SG_CONF_PATH,
     .stored = route_anon_key_stored,
     .offset = offsetof(struct sg_route_conf, anonymize_key),
     .argname = "FILE",
     .help = ANONYMIZE_KEY_HELP},
    /* residence times */
    {.name = "residence",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct sg_route_conf, residence_off),
     .choices = residence_names,
     .argname = "on|off",
     .help = RESIDENCE_HELP},
    /* Master servers */
    {.name = "master",
     .type = SG_CONF_CUSTOM,
     .set = master_set,
     .argname = "HOST:PORT ...",
     .help = "register the route with these master servers: slipgate sends the game's heartbeat "
             "from the listening socket, so server browsers list slipgate's address (needs a "
             "protocol; names resolve at start and reload; doc/public-server.md)"},
    {.name = "master_interval",
     .type = SG_CONF_DURATION,
     .offset = offsetof(struct sg_route_conf, master_interval_ms),
     .min = 1000,
     .max = 3600LL * 1000,
     .argname = "DURATION",
     .help = "send the master heartbeat this often (default: the game server's own period, 5 "
             "minutes; DarkPlaces 2)"},
    /* readiness probe */
    {.name = "ready_probe",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct sg_route_conf, ready_probe),
     .choices = ready_probe_names,
     .argname = "on|off",
     .help = READY_PROBE_HELP},
    /* spectators */
    {.name = "spectate",
     .type = SG_CONF_ADDR,
     .stored = spectate_stored,
     .offset = offsetof(struct sg_route_conf, spectate),
     .port0 = true,
     .argname = "ADDR:PORT",
     .help = "a spectator port: a real game client that connects there watches a player of this "
             "route through that player's eyes (Quake 3; doc/spectators.md); nothing it sends "
             "reaches the server"},
    {.name = "spectate_delay",
     .type = SG_CONF_DURATION,
     .offset = offsetof(struct sg_route_conf, spectate_delay_ms),
     .min = 0,
     .max = 600LL * 1000,
     .argname = "DURATION",
     .help = "show every spectator the game this much later, 0 to 10m (default 0: live); "
             "slipgate then keeps each session's server messages that long (doc/spectators.md)"},
    {.name = "spectate_password",
     .type = SG_CONF_STRING,
     .offset = offsetof(struct sg_route_conf, spectate_password),
     .argname = "TEXT",
     .help = "spectators must give this password (the game's own: Quake 3's `password` cvar)"},
    {.name = "max_spectators",
     .type = SG_CONF_INT,
     .offset = offsetof(struct sg_route_conf, max_spectators),
     .min = 1,
     .max = 1024,
     .argname = "N",
     .help = "most spectators at once on the spectator port (default 8)"},
    {.name = "filter",
     .type = SG_CONF_BLOCK,
     .open = filter_open,
     .child_section = sg_filter_conf_section,
     .argname = "NAME [LABEL]",
     .help = "a block: one filter of the chain, in order (`slipgate filters` lists them)"},
    /* bans and admin controls */
    BAN_DIRECTIVES,
    UPSTREAM_SOURCE_DIRECTIVES,
    {NULL},
};

/* route_by prx: client-directed routing (QuakeWorld proxy chains). */
const char *const sg_route_by_names[] = {"fixed", "prx", NULL};

static const struct sg_conf_directive route_by_directives[] = {
    {.name = "route_by",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct sg_route_conf, route_by),
     .choices = sg_route_by_names,
     .argname = "fixed|prx",
     .help = "where sessions go: `server` (fixed, default), or the next hop of the proxy chain "
             "the client names in its connect (prx: QuakeWorld, the qwfwd convention; `server` "
             "then takes clients that name no chain)"},
    {.name = "prx_allow",
     .type = SG_CONF_LIST,
     .offset = offsetof(struct sg_route_conf, prx_allow),
     .min = 1,
     .max = 64,
     .argname = "ADDR[/BITS][:PORT[-PORT]]...",
     .help = "route_by prx: destinations a chain may name (numeric addresses, CIDR ranges, "
             "ports; repeatable); nothing else is reached"},
    {.name = "prx_allow_file",
     .type = SG_CONF_PATH,
     .offset = offsetof(struct sg_route_conf, prx_allow_file),
     .argname = "FILE",
     .help = "route_by prx: more allow-list entries, one a line (# comments), read again on "
             "SIGHUP"},
    {.name = "prx_max_hops",
     .type = SG_CONF_INT,
     .offset = offsetof(struct sg_route_conf, prx_max_hops),
     .min = 1,
     .max = 16,
     .argname = "N",
     .help = "route_by prx: refuse chains naming more hops than this, the server included "
             "(default 3)"},
    {.name = "prx_chains_per_source",
     .type = SG_CONF_INT,
     .offset = offsetof(struct sg_route_conf, prx_chains_per_minute),
     .min = 1,
     .max = 100000,
     .argname = "N",
     .help = "route_by prx: new chains one source IP may start a minute (default 30)"},
    {.name = "prx_ping_interval",
     .type = SG_CONF_DURATION,
     .offset = offsetof(struct sg_route_conf, prx_ping_interval_ms),
     .min = 0,
     .max = 3600LL * 1000,
     .argname = "DURATION",
     .help = "route_by prx: ping each allowed server (single IPv4 address and port) this often "
             "for pingstatus; 0: never (default 30s)"},
    {NULL},
};

static const struct sg_conf_directive *const route_tables[] = {route_directives,
                                                               route_by_directives, NULL};

const struct sg_conf_section sg_conf_route_section = {
    .name = "route",
    .tables = route_tables,
};

static void route_defaults(struct sg_route_conf *rc)
{
    rc->protocol = SG_PROTO_AUTO;
    rc->idle_timeout_ms = 60000;
    rc->handshake_timeout_ms = 5000;
    rc->max_sessions = 1024;
    rc->new_sessions_per_source = 10;
    rc->source_prefix_v6 = 64;
    rc->nq_accept_low = 1024;
    rc->nq_accept_high = 65535;
    rc->anonymize = -1; /* the top level's */
    rc->prx_max_hops = 3;
    rc->prx_chains_per_minute = 30;
    rc->prx_ping_interval_ms = 30000;
    rc->residence_off = -1; /* the top level's (residence times) */
    rc->ready_probe = -1;   /* the top level's (readiness probe) */
    rc->max_spectators = 8; /* spectators */
}

static struct sg_route_conf *route_append(struct sg_conf *conf, const char *name, int line)
{
    struct sg_route_conf *rc = calloc(1, sizeof(*rc)), **tail;

    if (!rc || !(rc->name = strdup(name))) {
        free(rc);
        return NULL;
    }
    route_defaults(rc);
    rc->line = line;
    rc->top = conf;
    for (tail = &conf->routes; *tail; tail = &(*tail)->next)
        ;
    *tail = rc;
    conf->nroutes++;
    return rc;
}

/* `route [NAME] {` opens a route; names are unique and default to routeN. */
static void *route_open(void *obj, const struct sg_conf_directive *d,
                        const struct sg_conf_arg *args, int nargs, struct sg_conf_diag *diag,
                        const char *file)
{
    struct sg_conf *conf = obj;
    char auto_name[32];
    const char *name;
    struct sg_route_conf *rc;

    if (nargs > 1) {
        sg_conf_diag_error(diag, file, args[1].line, args[1].col,
                           "'route' takes at most one name, got %d values", nargs);
        return NULL;
    }
    snprintf(auto_name, sizeof(auto_name), "route%d", conf->nroutes + 1);
    name = nargs == 1 ? args[0].text : auto_name;
    if (strchr(name, '.') || name[0] == '\0') {
        sg_conf_diag_error(diag, file, args[0].line, args[0].col,
                           "route name '%s' must be non-empty and may not contain '.'", name);
        return NULL;
    }
    if (sg_conf_route(conf, name)) {
        sg_conf_diag_error(diag, file, args[0].line, args[0].col,
                           "route '%s' is defined twice (first at line %d)", name,
                           sg_conf_route(conf, name)->line);
        return NULL;
    }
    rc = route_append(conf, name, nargs == 1 ? args[0].line : 0);
    if (!rc)
        sg_conf_diag_error(diag, file, 0, 0, "out of memory");
    return rc;
}

/* ---- the top level ---- */

/* `plugin PATH`: load it now, so the filter blocks after it can use its filters. */
static int plugin_set(void *obj, const struct sg_conf_directive *d, const struct sg_conf_arg *args,
                      int nargs, struct sg_conf_diag *diag, const char *file)
{
    struct sg_conf *conf = obj;
    struct sg_plugin *p, **tail;
    char why[512];
    int err;

    if (nargs != 1) {
        const struct sg_conf_arg *at = nargs < 1 ? &args[-1] : &args[1];
        sg_conf_diag_error(diag, file, at->line, at->col, "'plugin' takes 1 value (a path), got %d",
                           nargs);
        return SG_E_CONFIG;
    }
    err = sg_plugin_load(args[0].text, &p, why, sizeof(why));
    if (err < 0) {
        sg_conf_diag_error(diag, file, args[0].line, args[0].col, "%s", why);
        return err == -ENOMEM ? err : SG_E_CONFIG;
    }
    for (struct sg_plugin *o = conf->plugins; o; o = o->next) {
        for (int i = 0; p->table->filters[i]; i++) {
            if (sg_filter_find(o, p->table->filters[i]->name, NULL) &&
                sg_filter_find(NULL, p->table->filters[i]->name, NULL) == NULL) {
                sg_conf_diag_error(diag, file, args[0].line, args[0].col,
                                   "plugin '%s': filter '%s' is already defined by plugin '%s'",
                                   args[0].text, p->table->filters[i]->name, o->path);
                sg_plugin_unref(p);
                return SG_E_CONFIG;
            }
        }
    }
    for (tail = &conf->plugins; *tail; tail = &(*tail)->next)
        ;
    *tail = p;
    return 0;
}

static const struct sg_conf_directive top_directives[] = {
    {.name = "log_level",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct sg_conf, log_level),
     .choices = sg_log_level_names,
     .argname = "error|warn|info|debug|trace",
     .help = "how much to log (default info; -v and -q move it)"},
    {.name = "stats_file",
     .type = SG_CONF_PATH,
     .stored = top_place_stored,
     .offset = offsetof(struct sg_conf, stats_file),
     .argname = "FILE",
     .help = "write a JSON summary of every session here at exit"},
    {.name = "stats_interval",
     .type = SG_CONF_DURATION,
     .offset = offsetof(struct sg_conf, stats_interval_ms),
     .min = 0,
     .max = 7LL * 24 * 3600 * 1000,
     .argname = "DURATION",
     .help = "log a `stats` line per route (packets, sessions, each filter's counters) this "
             "often (default 0: never)"},
    {.name = "http",
     .type = SG_CONF_ADDR,
     .stored = top_place_stored,
     .offset = offsetof(struct sg_conf, http),
     .port0 = true,
     .argname = "ADDR:PORT",
     .help = "serve /metrics (Prometheus), a JSON API and a live web page here, e.g. "
             "127.0.0.1:8080 (default: off; doc/monitoring.md)"},
    {.name = "http_token",
     .type = SG_CONF_STRING,
     .offset = offsetof(struct sg_conf, http_token),
     .argname = "TOKEN",
     .help = "require this token from every HTTP client (Authorization: Bearer TOKEN, or the "
             "page's cookie); default none"},
    {.name = "http_idle_timeout",
     .type = SG_CONF_DURATION,
     .offset = offsetof(struct sg_conf, http_idle_timeout_ms),
     .min = 1000,
     .max = 3600LL * 1000,
     .argname = "DURATION",
     .help = "close an HTTP connection idle this long: waiting for a request, between two, or "
             "half-way through one (1s to 1h, counted in whole seconds; default 30s)"},
    {.name = "plugin",
     .type = SG_CONF_CUSTOM,
     .set = plugin_set,
     .argname = "PATH",
     .help = "load filters from a plugin (a shared object); before the routes that use them"},
    {.name = "sign_key",
     .type = SG_CONF_PATH,
     .stored = top_key_stored,
     .offset = offsetof(struct sg_conf, sign_key),
     .argname = "FILE",
     .help = SIGN_KEY_HELP " (every route that sets none)"},
    {.name = "sign_interval",
     .type = SG_CONF_DURATION,
     .offset = offsetof(struct sg_conf, sign_interval_ms),
     .min = 1000,
     .max = 3600LL * 1000,
     .argname = "DURATION",
     .help = SIGN_INTERVAL_HELP " (every route that sets none)"},
    {.name = "anonymize",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct sg_conf, anonymize),
     .choices = anonymize_names,
     .argname = "yes|no",
     .help = ANONYMIZE_HELP " (every route that sets none)"},
    {.name = "anonymize_key",
     .type = SG_CONF_PATH,
     .stored = top_anon_key_stored,
     .offset = offsetof(struct sg_conf, anonymize_key),
     .argname = "FILE",
     .help = ANONYMIZE_KEY_HELP " (every route that sets none)"},
    /* residence times */
    {.name = "residence",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct sg_conf, residence_off),
     .choices = residence_names,
     .argname = "on|off",
     .help = RESIDENCE_HELP " (every route that sets none)"},
    /* Ports from the kernel: `listen`/`http` port 0, where they ended up. */
    {.name = "ports_file",
     .type = SG_CONF_PATH,
     .offset = offsetof(struct sg_conf, ports_file),
     .argname = "FILE",
     .help = "once every listener is bound (and after each reload), write one line per route, "
             "NAME ADDR:PORT, and `http ADDR:PORT`, with the ports the kernel gave (port 0)"},
    {.name = "route",
     .type = SG_CONF_BLOCK,
     .open = route_open,
     .child = &sg_conf_route_section,
     .argname = "[NAME]",
     .help = "a block: one listen -> server pair with its own settings"},
    {.name = "workers",
     .type = SG_CONF_INT,
     .offset = offsetof(struct sg_conf, workers),
     .min = 1,
     .max = SG_CONF_MAX_WORKERS,
     .argname = "N",
     .help = "worker loops (threads), each with its own socket per route (SO_REUSEPORT) and "
             "its own sessions; one client address stays on one loop (default: "
             "SLIPGATE_WORKERS, else one per CPU up to 8; a reload keeps the number)"},
    /* Health and draining */
    {.name = "drain_timeout",
     .type = SG_CONF_DURATION,
     .offset = offsetof(struct sg_conf, drain_timeout_ms),
     .min = 0,
     .max = 24LL * 3600 * 1000,
     .argname = "DURATION",
     .help = "on SIGTERM, take no new session and let the others go on until they end or "
             "this long has passed, then stop (default 0: SIGTERM stops at once)"},
    /* readiness probe */
    {.name = "ready_probe",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct sg_conf, ready_probe),
     .choices = ready_probe_names,
     .argname = "on|off",
     .help = READY_PROBE_HELP " (every route that sets none)"},
    {.name = "ready_probe_timeout",
     .type = SG_CONF_DURATION,
     .offset = offsetof(struct sg_conf, ready_probe_timeout_ms),
     .min = 1000,
     .max = 3600LL * 1000,
     .argname = "DURATION",
     .help = "with ready_probe on, /ready fails for a route whose server has not answered a "
             "status query for this long (default 10s; asked every fifth of it, 200 ms to 2 s)"},
    {NULL},
};

static const struct sg_conf_directive *const top_tables[] = {top_directives, NULL};

const struct sg_conf_section sg_conf_top_section = {
    .name = "top level",
    .tables = top_tables,
};

struct sg_route_conf *sg_conf_route(struct sg_conf *conf, const char *name)
{
    for (struct sg_route_conf *rc = conf->routes; rc; rc = rc->next)
        if (strcmp(rc->name, name) == 0)
            return rc;
    return NULL;
}

void sg_conf_destroy(struct sg_conf *conf)
{
    struct sg_route_conf *rc, *next;

    if (!conf)
        return;
    for (rc = conf->routes; rc; rc = next) {
        next = rc->next;
        sg_conf_free_strings(&sg_conf_route_section, rc);
        sg_master_conf_free(rc->masters, rc->nmasters);
        sg_filter_list_unref(rc->filters);
        sg_ban_list_unref(rc->bans);
        sg_ban_list_unref(rc->admin_from);
        free(rc->name);
        free(rc);
    }
    while (conf->plugins) {
        struct sg_plugin *p = conf->plugins;
        conf->plugins = p->next;
        sg_plugin_unref(p);
    }
    sg_conf_free_strings(&sg_conf_top_section, conf);
    free(conf->file);
    free(conf);
}

/* ---- command-line layers ---- */

/* -l / -s / -p: make the single route, or override the file's only route. */
static int apply_route_options(struct sg_conf *conf, const struct sg_conf_overrides *ov,
                               struct sg_conf_diag *diag)
{
    static const struct {
        const char *opt, *directive;
        size_t off;
    } opts[] = {
        {"--listen", "listen", offsetof(struct sg_conf_overrides, listen)},
        {"--server", "server", offsetof(struct sg_conf_overrides, server)},
        {"--protocol", "protocol", offsetof(struct sg_conf_overrides, protocol)},
    };
    int rc = 0;

    /* --record applies to every route. */
    if (ov->record) {
        for (struct sg_route_conf *r = conf->routes; r; r = r->next)
            if (sg_conf_set(&sg_conf_route_section, r, "record", ov->record, "--record", diag) < 0)
                rc = SG_E_CONFIG;
    }
    if (!ov->listen && !ov->server && !ov->protocol)
        return rc;
    if (conf->nroutes == 0 && !route_append(conf, "default", 0))
        return -ENOMEM;
    if (conf->nroutes > 1) {
        sg_conf_diag_error(diag, "command line", 0, 0,
                           "-l/-s/-p need a configuration with a single route; this one has %d "
                           "(use +set ROUTE.server HOST:PORT instead)",
                           conf->nroutes);
        return SG_E_CONFIG;
    }
    if (ov->record && !conf->routes->record &&
        sg_conf_set(&sg_conf_route_section, conf->routes, "record", ov->record, "--record", diag) <
            0)
        rc = SG_E_CONFIG;
    for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
        const char *value = *(const char *const *)((const char *)ov + opts[i].off);
        if (value && sg_conf_set(&sg_conf_route_section, conf->routes, opts[i].directive, value,
                                 opts[i].opt, diag) < 0)
            rc = SG_E_CONFIG;
    }
    return rc;
}

/* +set NAME VALUE: top-level directive, every route's, or ROUTE.NAME. */
static int apply_set(struct sg_conf *conf, const char *name, const char *value,
                     struct sg_conf_diag *diag)
{
    const char *dot = strchr(name, '.');
    const char *suggestion;
    int err;

    /* ROUTE.NAME targets one route. */
    if (dot) {
        char route[128];
        size_t n = (size_t)(dot - name);
        struct sg_route_conf *rc;
        if (n >= sizeof(route))
            n = sizeof(route) - 1;
        memcpy(route, name, n);
        route[n] = '\0';
        rc = sg_conf_route(conf, route);
        if (!rc) {
            sg_conf_diag_error(diag, "command line", 0, 0, "+set %s: there is no route named '%s'",
                               name, route);
            return SG_E_CONFIG;
        }
        err = sg_conf_set(&sg_conf_route_section, rc, dot + 1, value, "command line", diag);
        if (err == -ENOENT) {
            suggestion = sg_conf_suggest(&sg_conf_route_section, dot + 1);
            sg_conf_diag_error(diag, "command line", 0, 0,
                               "+set %s: unknown route directive '%s'%s%s%s", name, dot + 1,
                               suggestion ? "; did you mean '" : "", suggestion ? suggestion : "",
                               suggestion ? "'?" : "");
        }
        return err < 0 ? SG_E_CONFIG : 0;
    }

    /* A top-level directive. */
    err = sg_conf_set(&sg_conf_top_section, conf, name, value, "command line", diag);
    if (err != -ENOENT)
        return err < 0 ? SG_E_CONFIG : 0;

    /* A route directive for every route (the default route if there is none). */
    if (sg_conf_find(&sg_conf_route_section, name)) {
        if (conf->nroutes == 0 && !route_append(conf, "default", 0))
            return -ENOMEM;
        for (struct sg_route_conf *rc = conf->routes; rc; rc = rc->next)
            if (sg_conf_set(&sg_conf_route_section, rc, name, value, "command line", diag) < 0)
                return SG_E_CONFIG;
        return 0;
    }
    suggestion = sg_conf_suggest(&sg_conf_route_section, name);
    if (!suggestion)
        suggestion = sg_conf_suggest(&sg_conf_top_section, name);
    sg_conf_diag_error(diag, "command line", 0, 0, "+set: unknown setting '%s'%s%s%s", name,
                       suggestion ? "; did you mean '" : "", suggestion ? suggestion : "",
                       suggestion ? "'?" : "");
    return SG_E_CONFIG;
}

/* ---- validation ---- */

/* `record DIR` (and --record) is a shortcut: a `record` filter at the end of the chain. */
static int add_record_filter(struct sg_route_conf *r, const char *file, struct sg_conf_diag *diag)
{
    const struct sg_filter_impl *impl = sg_filter_find(NULL, "record", NULL);
    struct sg_filter_conf *fc;

    /* At the `record` line (a --record or +set record: the command line). */
    fc = impl ? sg_filter_conf_append(&r->filters, impl, NULL, NULL, r->record_line ? file : NULL,
                                      r->record_line)
              : NULL;
    if (!fc) {
        sg_conf_diag_error(diag, file, r->line, 0, "route '%s': cannot add the record filter",
                           r->name);
        return -ENOMEM;
    }
    return sg_conf_set(sg_filter_conf_section(fc->conf), fc->conf, "directory", r->record, "record",
                       diag);
}

/* How many `record` filters the route's chain has. */
static int record_filters(const struct sg_route_conf *r)
{
    int n = 0;

    for (const struct sg_filter_conf *fc = r->filters ? r->filters->head : NULL; fc; fc = fc->next)
        n += strcmp(fc->impl->name, "record") == 0 && !fc->plugin;
    return n;
}

/* The route's signing key, inherited from the top level, and checked now (file:line). */
static int check_sign_key(struct sg_conf *conf, struct sg_route_conf *r, const char *file,
                          struct sg_conf_diag *diag)
{
    struct sg_sign_key key;
    char why[512];
    int line = r->sign_key_line, err;

    if (!r->sign_key && conf->sign_key) {
        if (!(r->sign_key = strdup(conf->sign_key)))
            return -ENOMEM;
        line = conf->sign_key_line;
    }
    if (r->sign_interval_ms == 0)
        r->sign_interval_ms =
            conf->sign_interval_ms ? conf->sign_interval_ms : SG_SIGN_DEFAULT_INTERVAL_MS;
    if (!r->sign_key)
        return 0;
    err = sg_sign_key_load(r->sign_key, &key, why, sizeof(why));
    sg_sign_key_wipe(&key);
    if (err < 0) {
        sg_conf_diag_error(diag, line ? file : "command line", line, 0, "%s", why);
        return SG_E_CONFIG;
    }
    return 0;
}

/*
 * The route's `anonymize` and key file, inherited from the top level; the
 * key is read now (made when it does not exist), so a bad one stops
 * start-up with file:line.
 */
static int check_anonymize(struct sg_conf *conf, struct sg_route_conf *r, const char *file,
                           struct sg_conf_diag *diag)
{
    struct sg_anon_key key;
    char why[PATH_MAX + 200], def[PATH_MAX];
    int line = r->anonymize_key_line, err;

    if (r->anonymize < 0)
        r->anonymize = conf->anonymize;
    if (!r->anonymize_key && conf->anonymize_key) {
        if (!(r->anonymize_key = strdup(conf->anonymize_key)))
            return -ENOMEM;
        line = conf->anonymize_key_line;
    }
    if (!r->anonymize)
        return 0;
    if (!r->anonymize_key) {
        if (!sg_anon_default_path(def, sizeof(def))) {
            sg_conf_diag_error(diag, r->line ? file : "command line", r->line, 0,
                               "route '%s': 'anonymize yes' needs a key file: give "
                               "'anonymize_key FILE' (no STATE_DIRECTORY, XDG_STATE_HOME or HOME "
                               "to put the default in)",
                               r->name);
            return SG_E_CONFIG;
        }
        if (!(r->anonymize_key = strdup(def)))
            return -ENOMEM;
        line = r->line;
    }
    err = sg_anon_key_load(r->anonymize_key, &key, NULL, why, sizeof(why));
    sg_anon_key_wipe(&key);
    if (err < 0) {
        sg_conf_diag_error(diag, line ? file : "command line", line, 0, "%s", why);
        return SG_E_CONFIG;
    }
    return 0;
}

/* route_by prx: a game that has proxy chains, and allow-list entries that parse. */
/* spectators: a game with spectators, live only so far, and options that need the port. */
static int check_spectate(struct sg_route_conf *r, const char *file, struct sg_conf_diag *diag)
{
    const struct sg_codec *game = sg_protocol_codec(r->protocol);
    int line = r->spectate_line;

    if (!r->spectate) {
        if (r->spectate_delay_ms > 0 || r->spectate_password) {
            sg_conf_diag_error(diag, r->line ? file : "command line", r->line, r->line ? 1 : 0,
                               "route '%s': 'spectate_delay' and 'spectate_password' need "
                               "'spectate ADDR:PORT'",
                               r->name);
            return SG_E_CONFIG;
        }
        return 0;
    }
    if (!game || !game->spectate) {
        sg_conf_diag_error(diag, line ? file : "command line", line, r->spectate_col,
                           "route '%s': 'spectate' needs a game with spectators: set 'protocol "
                           "q3' (the only one so far)",
                           r->name);
        return SG_E_CONFIG;
    }
    if (r->route_by != SG_ROUTE_BY_FIXED) {
        sg_conf_diag_error(diag, line ? file : "command line", line, r->spectate_col,
                           "route '%s': 'spectate' needs a fixed route (no 'route_by')", r->name);
        return SG_E_CONFIG;
    }
    return 0;
}

static int check_route_by(struct sg_route_conf *r, const char *file, struct sg_conf_diag *diag)
{
    const struct sg_codec *game = sg_protocol_codec(r->protocol);
    const char *f = r->line ? file : "command line";
    int rc = 0;

    if (r->route_by != SG_ROUTE_BY_PRX) {
        if (r->prx_allow.count || r->prx_allow_file) {
            sg_conf_diag_error(diag, f, r->line, r->line ? 1 : 0,
                               "route '%s' has a prx allow-list but not 'route_by prx'", r->name);
            rc = SG_E_CONFIG;
        }
        return rc;
    }
    if (!game || !game->route_by) {
        sg_conf_diag_error(diag, f, r->line, r->line ? 1 : 0,
                           "route '%s': 'route_by prx' needs a 'protocol' whose clients name "
                           "proxy chains (qw)",
                           r->name);
        rc = SG_E_CONFIG;
    }
    if (!r->prx_allow.count && !r->prx_allow_file) {
        sg_conf_diag_error(diag, f, r->line, r->line ? 1 : 0,
                           "route '%s': 'route_by prx' needs 'prx_allow' or 'prx_allow_file' "
                           "(the destinations chains may name; never an open relay)",
                           r->name);
        rc = SG_E_CONFIG;
    }
    for (int i = 0; i < r->prx_allow.count; i++) {
        const struct sg_conf_list_item *it = &r->prx_allow.items[i];
        for (int j = 0; j < it->argc; j++) {
            struct sg_addr_rule rule;
            char why[160];
            if (sg_addr_rule_parse(it->argv[j], &rule, why, sizeof(why)) < 0) {
                sg_conf_diag_error(diag, it->line ? file : "command line", it->line, 0,
                                   "prx_allow: %s", why);
                rc = SG_E_CONFIG;
            }
        }
    }
    return rc;
}

static int validate(struct sg_conf *conf, struct sg_conf_diag *diag)
{
    const char *file = conf->file ? conf->file : "command line";
    int rc = 0, err;

    if (conf->nroutes == 0) {
        sg_conf_diag_error(diag, file, 0, 0,
                           "no route: give -s HOST:PORT, or a 'route NAME { ... }' block with a "
                           "'server'");
        return SG_E_CONFIG;
    }
    if (conf->stats_interval_ms > 0 && conf->stats_interval_ms < 100) {
        sg_conf_diag_error(diag, file, 0, 0,
                           "'stats_interval' is 0 (off) or at least 100ms, got %lldms",
                           (long long)conf->stats_interval_ms);
        rc = SG_E_CONFIG;
    }
    if (conf->http_token && (strlen(conf->http_token) < 8 || strlen(conf->http_token) > 256)) {
        sg_conf_diag_error(diag, file, 0, 0, "'http_token' is 8 to 256 characters, got %zu",
                           strlen(conf->http_token));
        rc = SG_E_CONFIG;
    }
    if (conf->http_token && !conf->http) {
        sg_conf_diag_error(diag, file, 0, 0, "'http_token' is set but 'http' is not");
        rc = SG_E_CONFIG;
    }
    for (struct sg_route_conf *r = conf->routes; r; r = r->next) {
        if (!r->listen && !(r->listen = strdup(SG_DEFAULT_LISTEN)))
            return -ENOMEM;
        if (!r->server) {
            sg_conf_diag_error(diag, r->line ? file : "command line", r->line, r->line ? 1 : 0,
                               "route '%s' has no 'server' (the real game server, HOST:PORT)",
                               r->name);
            rc = SG_E_CONFIG;
        }
        if (r->record && add_record_filter(r, file, diag) < 0)
            rc = SG_E_CONFIG;
        if (check_sign_key(conf, r, file, diag) < 0)
            rc = SG_E_CONFIG;
        if (check_anonymize(conf, r, file, diag) < 0)
            rc = SG_E_CONFIG;
        if (r->residence_off < 0) /* residence times */
            r->residence_off = conf->residence_off;
        if (r->nmasters > 0 && r->protocol == SG_PROTO_AUTO) {
            sg_conf_diag_error(diag, r->masters[0].line ? file : "command line",
                               r->masters[0].line, r->masters[0].col,
                               "route '%s': 'master' needs the route's game: set 'protocol' "
                               "(the heartbeat is the game's own)",
                               r->name);
            rc = SG_E_CONFIG;
        }
        if (check_spectate(r, file, diag) < 0) /* spectators */
            rc = SG_E_CONFIG;
        if (r->ready_probe < 0) /* readiness probe */
            r->ready_probe = conf->ready_probe;
        r->page_probe = conf->http != NULL;
        r->ready_probe_timeout_ms =
            conf->ready_probe_timeout_ms ? conf->ready_probe_timeout_ms : SG_READY_PROBE_TIMEOUT_MS;
        if (record_filters(r) > 1) {
            sg_conf_diag_error(diag, r->line ? file : "command line", r->line, r->line ? 1 : 0,
                               "route '%s' has %d recorders ('record DIR', --record and 'filter "
                               "record' blocks); a session's codec writes one demo at a time: "
                               "keep one",
                               r->name, record_filters(r));
            rc = SG_E_CONFIG;
        }
        if (sg_filter_list_check(r->filters, diag) < 0)
            rc = SG_E_CONFIG;
        /* bans and admin controls */
        if ((err = load_ban_files(r, diag)) == -ENOMEM)
            return err;
        if (err < 0)
            rc = SG_E_CONFIG;
        if (check_route_by(r, file, diag) < 0)
            rc = SG_E_CONFIG;
        /* Two port-0 listeners get two ports from the kernel. */
        const char *lport = strrchr(r->listen, ':') + 1; /* checked HOST:PORT */
        bool kernel_port = strspn(lport, "0") == strlen(lport);
        for (struct sg_route_conf *o = conf->routes; o != r && !kernel_port; o = o->next) {
            if (strcmp(o->listen, r->listen) == 0) {
                sg_conf_diag_error(diag, r->line ? file : "command line", r->line, r->line ? 1 : 0,
                                   "routes '%s' and '%s' both listen on %s", o->name, r->name,
                                   r->listen);
                rc = SG_E_CONFIG;
            }
        }
    }
    return rc;
}

int sg_conf_load(const char *path, const struct sg_conf_overrides *ov, struct sg_conf **out,
                 struct sg_conf_diag *diag)
{
    struct sg_conf *conf = calloc(1, sizeof(*conf));
    int err = 0;

    *out = NULL;
    if (!conf)
        return -ENOMEM;
    conf->log_level = SG_LOG_INFO;

    /* The file, when there is one. */
    if (path) {
        if (!(conf->file = strdup(path))) {
            err = -ENOMEM;
            goto err_conf;
        }
        if (sg_conf_parse_file(path, &sg_conf_top_section, conf, diag) < 0)
            err = SG_E_CONFIG;
    }

    /* Command-line layers, in the order a player expects. */
    if (err == 0)
        err = apply_route_options(conf, ov, diag);
    for (int i = 0; err == 0 && i < ov->nsets; i++)
        err = apply_set(conf, ov->sets[2 * i], ov->sets[2 * i + 1], diag);
    if (err == 0)
        err = validate(conf, diag);
    if (err < 0)
        goto err_conf;

    if (ov->workers > 0)
        conf->workers = ov->workers;

    /* -v / -q move the level within its range. */
    conf->log_level += ov->verbosity;
    if (conf->log_level < SG_LOG_ERROR)
        conf->log_level = SG_LOG_ERROR;
    if (conf->log_level > SG_LOG_TRACE)
        conf->log_level = SG_LOG_TRACE;
    *out = conf;
    return 0;

err_conf:
    sg_conf_destroy(conf);
    return err == -ENOMEM ? err : SG_E_CONFIG;
}

/* +set NAME VALUE out of a command line (see conf.h). */
int sg_conf_extract_sets(const char *prog, int *argc, char **argv, const char ***sets,
                         int *nsets)
{
    int out = 1, n = 0;
    const char **pairs = calloc((size_t)*argc, sizeof(*pairs));

    if (!pairs)
        return -1;
    for (int i = 1; i < *argc; i++) {
        if (argv[i][0] != '+') {
            argv[out++] = argv[i];
            continue;
        }
        if (strcmp(argv[i], "+set") != 0) {
            fprintf(stderr, "%s: unknown command '%s' (only +set NAME VALUE is known)\n", prog,
                    argv[i]);
            free(pairs);
            return -1;
        }
        if (i + 2 >= *argc) {
            fprintf(stderr, "%s: +set needs a NAME and a VALUE\n", prog);
            free(pairs);
            return -1;
        }
        pairs[2 * n] = argv[i + 1];
        pairs[2 * n + 1] = argv[i + 2];
        n++;
        i += 2;
    }
    *argc = out;
    argv[out] = NULL;
    *sets = pairs;
    *nsets = n;
    return 0;
}
