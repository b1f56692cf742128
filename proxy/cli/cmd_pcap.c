/*
 * `slipgate pcap decode FILE [--json] [--record DIR] [--protocol NAME]`:
 * the game sessions of a capture, decoded as the live proxy decodes them,
 * for every game whose codec has a capture decoder (codec.h, struct
 * sg_capture_impl).
 *
 * This file reads the capture (pcap or pcapng, read with libpcap; Ethernet,
 * Linux cooked v1/v2, BSD loopback or raw IP; IPv4 and IPv6) and splits its
 * UDP datagrams into flows by (client address, server address).  Each flow
 * belongs to one game: `--protocol NAME`, or the game whose probe or
 * connect hook claims the flow's first datagram, or else the first game
 * with a capture decoder (Quake 3: a capture that starts mid-game).  The
 * client is the side the game's capture decoder calls the client (the one
 * that sends requests), or, when it cannot tell, the side with the higher
 * port.  Queries from other client ports are therefore flows of their own.
 *
 * One line per datagram: frame number, time, session, direction, length,
 * then what the game's decoder prints (the netchan header and a summary of
 * the decoded message); with --json one JSON object per line.  --record DIR
 * has each game flow record its server messages as a demo in DIR, named
 * <client address>-<port>.<the game's demo extension>.  A summary per
 * session goes to stderr.  A flow of a game without a capture decoder is
 * listed, not decoded, and counts as an error.  Exit status: 0 when
 * everything decoded, 1 when something did not (or a file failed), 2 usage.
 */
#include "proxy/cli/commands.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <pcap/pcap.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "protocols/byteorder.h"
#include "protocols/codec.h"
#include "protocols/error.h"

#define EXIT_ERRORS  1
#define EXIT_USAGE   2
#define MAX_SESSIONS 4096

static const char usage_text[] =
    "usage: slipgate pcap decode FILE.pcap[ng] [--json] [--record DIR] [--protocol NAME]\n"
    "  --json             one JSON object per datagram instead of text\n"
    "  --record DIR       write each game session's server messages as a demo in DIR\n"
    "  --protocol NAME    decode every flow as that game (default: the game whose\n"
    "                     handshake the flow carries, else the game claimed last,\n"
    "                     else the first game with a capture decoder)\n";

struct endpoint {
    int family; /* 4 or 6 */
    uint8_t addr[16];
    uint16_t port;
};

struct session {
    unsigned id;
    struct endpoint client, server;
    const struct sg_codec *codec; /* the flow's game */
    void *flow;                   /* its capture decoder's flow; NULL: not decoded */
    bool undecoded;               /* counted as an error for having no decoder */
    uint64_t datagrams;
};

struct tool {
    bool json;
    const char *record_dir;
    const struct sg_codec *forced;  /* --protocol */
    const struct sg_codec *claimed; /* the game a probe or connect hook claimed last */
    struct session *sessions[MAX_SESSIONS];
    unsigned nsessions;
    uint64_t frames, skipped, errors;
    double t0;
    bool have_t0;
};

/* Print a usage error and return the usage exit code. */
__attribute__((format(printf, 1, 2))) static int usage(const char *fmt, ...);

static int usage(const char *fmt, ...)
{
    va_list ap;

    fputs("slipgate pcap: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n", stderr);
    fputs(usage_text, stderr);
    return EXIT_USAGE;
}

/* ---- output helpers ---- */

static void endpoint_str(const struct endpoint *e, char *buf, size_t cap)
{
    char a[INET6_ADDRSTRLEN];

    inet_ntop(e->family == 6 ? AF_INET6 : AF_INET, e->addr, a, sizeof(a));
    snprintf(buf, cap, e->family == 6 ? "[%s]:%u" : "%s:%u", a, e->port);
}

/* ---- sessions ---- */

static bool endpoint_eq(const struct endpoint *a, const struct endpoint *b)
{
    return a->family == b->family && a->port == b->port &&
           memcmp(a->addr, b->addr, a->family == 6 ? 16 : 4) == 0;
}

/*
 * The game of a new flow whose first datagram is `data`: --protocol, or the
 * game whose probe or connect hook claims it, or the game claimed last in
 * this capture (a NetQuake server's new port), or the first game with a
 * capture decoder (a Quake 3 capture that starts mid-game).
 */
static const struct sg_codec *flow_game(struct tool *t, const uint8_t *data, size_t len)
{
    const struct sg_codec *c;

    if (t->forced)
        return t->forced;
    c = sg_codec_probe(data, len);
    if (!c)
        c = sg_codec_connect(data, len, NULL);
    if (c)
        t->claimed = c;
    else
        c = t->claimed ? t->claimed : sg_codec_capture_default();
    return c;
}

/* The file name base of a session's recording: DIR/<client address>-<port>; 0 or -1. */
static int record_base(const struct tool *t, const struct session *s, char *path, size_t cap)
{
    char name[128];

    endpoint_str(&s->client, name, sizeof(name));
    for (char *p = name; *p; p++)
        if (*p == ':' && strchr(p + 1, ':') == NULL)
            *p = '-'; /* the port separator */
        else if (*p == ':' || *p == '[' || *p == ']')
            *p = '_';
    return snprintf(path, cap, "%s/%s", t->record_dir, name) < (int)cap ? 0 : -1;
}

/* Give session `s` to `game`: its capture decoder's flow, or none (an error, once). 0 or -1. */
static int start_flow(struct tool *t, struct session *s, const struct sg_codec *game)
{
    char base[4096];

    s->codec = game;
    if (!game || !game->capture) {
        if (!s->undecoded)
            t->errors++; /* a flow that cannot be decoded: said in the summary */
        s->undecoded = true;
        return 0;
    }
    if (t->record_dir && record_base(t, s, base, sizeof(base)) < 0) {
        fprintf(stderr, "slipgate pcap: %s: directory name too long\n", t->record_dir);
        return -1;
    }
    if (game->capture->create(&s->flow, t->record_dir ? base : NULL) < 0) {
        fprintf(stderr, "slipgate pcap: out of memory\n");
        return -1;
    }
    return 0;
}

/*
 * A client's connect that another game's hook claims moves the flow to that
 * game, as protocol auto does live (a DarkPlaces client opens with Quake
 * 3's getchallenge, then connects as NetQuake).
 */
static void maybe_switch(struct tool *t, struct session *s, const uint8_t *data, size_t len)
{
    const struct sg_codec *other = sg_codec_connect(data, len, s->codec);

    if (!other)
        return;
    t->claimed = other;
    if (s->flow) {
        t->errors += (uint64_t)s->codec->capture->finish(s->flow);
        s->codec->capture->destroy(s->flow);
        s->flow = NULL;
    }
    if (start_flow(t, s, other) < 0)
        t->errors++;
}

/* The session of a datagram from `src` to `dst`, created on first sight; NULL when full. */
static struct session *find_session(struct tool *t, const struct endpoint *src,
                                    const struct endpoint *dst, const uint8_t *data, size_t len,
                                    enum sg_dir *dir)
{
    const struct sg_codec *game;
    struct session *s;
    int client;

    for (unsigned i = 0; i < t->nsessions; i++) {
        s = t->sessions[i];
        if (endpoint_eq(&s->client, src) && endpoint_eq(&s->server, dst)) {
            *dir = SG_DIR_C2S;
            return s;
        }
        if (endpoint_eq(&s->server, src) && endpoint_eq(&s->client, dst)) {
            *dir = SG_DIR_S2C;
            return s;
        }
    }
    if (t->nsessions == MAX_SESSIONS)
        return NULL;
    s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    game = flow_game(t, data, len);
    client = game && game->capture ? game->capture->role(data, len) : -1;
    if (client < 0)
        client = src->port > dst->port; /* mid-game: servers usually sit on the lower port */
    s->client = client ? *src : *dst;
    s->server = client ? *dst : *src;
    *dir = client ? SG_DIR_C2S : SG_DIR_S2C;

    if (start_flow(t, s, game) < 0) {
        free(s);
        return NULL;
    }
    s->id = ++t->nsessions;
    t->sessions[s->id - 1] = s;
    return s;
}

static void session_destroy(struct session *s)
{
    if (!s)
        return;
    if (s->flow)
        s->codec->capture->destroy(s->flow);
    free(s);
}

/* ---- per datagram ---- */

static void on_datagram(struct tool *t, const struct endpoint *src, const struct endpoint *dst,
                        const uint8_t *data, size_t len, uint64_t frame, double ts)
{
    enum sg_dir dir;
    struct session *s = find_session(t, src, dst, data, len, &dir);

    if (!s) {
        t->skipped++;
        return;
    }
    s->datagrams++;
    if (!t->forced && dir == SG_DIR_C2S && s->datagrams > 1)
        maybe_switch(t, s, data, len);
    if (t->json)
        printf("{\"frame\":%" PRIu64 ",\"time\":%.6f,\"session\":%u,\"dir\":\"%s\",\"len\":%zu",
               frame, ts, s->id, dir == SG_DIR_C2S ? "c2s" : "s2c", len);
    else
        printf("#%" PRIu64 " %.3f s%u %s len=%zu", frame, ts, s->id,
               dir == SG_DIR_C2S ? "C>S" : "S>C", len);
    if (!s->flow) {
        const char *name = s->codec ? s->codec->name : "none";

        printf(t->json ? ",\"game\":\"%s\",\"decoded\":false}\n" : " %s not decoded\n", name);
        return;
    }
    t->errors += (uint64_t)s->codec->capture->datagram(s->flow, dir, data, len, t->json, stdout);
}

/* ---- the capture ---- */

/* Offset of the IP header for link type `dlt`; -1 when not IP. */
static long link_offset(int dlt, const uint8_t *p, size_t caplen)
{
    switch (dlt) {
    case DLT_EN10MB: {
        size_t off = 14;
        uint16_t type;

        if (caplen < 14)
            return -1;
        type = sg_be16(p + 12);
        while ((type == 0x8100 || type == 0x88a8) && caplen >= off + 4) {
            type = sg_be16(p + off + 2); /* VLAN tags */
            off += 4;
        }
        return type == 0x0800 || type == 0x86dd ? (long)off : -1;
    }
    case DLT_LINUX_SLL:
        return caplen >= 16 ? 16 : -1;
#ifdef DLT_LINUX_SLL2
    case DLT_LINUX_SLL2:
        return caplen >= 20 ? 20 : -1;
#endif
    case DLT_NULL:
    case DLT_LOOP:
        return caplen >= 4 ? 4 : -1;
    case DLT_RAW:
#ifdef DLT_IPV4
    case DLT_IPV4:
    case DLT_IPV6:
#endif
        return 0;
    default:
        return -1;
    }
}

/* One captured packet: find its UDP payload. */
static void on_packet(struct tool *t, int dlt, const struct pcap_pkthdr *h, const uint8_t *p)
{
    struct endpoint src = {0}, dst = {0};
    long off = link_offset(dlt, p, h->caplen);
    size_t caplen, ihl, ulen;
    const uint8_t *ip;
    uint8_t proto;
    double ts = (double)h->ts.tv_sec + (double)h->ts.tv_usec / 1e6;

    t->frames++;
    if (!t->have_t0) {
        t->t0 = ts;
        t->have_t0 = true;
    }
    if (off < 0)
        goto skip;
    ip = p + off;
    caplen = h->caplen - (size_t)off;
    if (caplen >= 20 && (ip[0] >> 4) == 4) {
        ihl = (size_t)(ip[0] & 15) * 4;
        if (ihl < 20 || (sg_be16(ip + 6) & 0x1fff) != 0)
            goto skip; /* a later IP fragment */
        proto = ip[9];
        src.family = dst.family = 4;
        memcpy(src.addr, ip + 12, 4);
        memcpy(dst.addr, ip + 16, 4);
    } else if (caplen >= 40 && (ip[0] >> 4) == 6) {
        ihl = 40; /* extension headers are not followed */
        proto = ip[6];
        src.family = dst.family = 6;
        memcpy(src.addr, ip + 8, 16);
        memcpy(dst.addr, ip + 24, 16);
    } else {
        goto skip;
    }
    if (proto != 17 || caplen < ihl + 8)
        goto skip;
    src.port = sg_be16(ip + ihl);
    dst.port = sg_be16(ip + ihl + 2);
    ulen = sg_be16(ip + ihl + 4);
    if (ulen < 8 || ihl + ulen > caplen)
        goto skip; /* truncated capture */
    on_datagram(t, &src, &dst, ip + ihl + 8, ulen - 8, t->frames, ts - t->t0);
    return;
skip:
    t->skipped++;
}

/* A game's name for people: its description up to " (" or ":" ("Quake 3"). */
static void game_title(const struct sg_codec *c, char *buf, size_t cap)
{
    size_t n = strcspn(c->description, "(:");

    while (n > 0 && c->description[n - 1] == ' ')
        n--;
    snprintf(buf, cap, "%.*s", (int)n, c->description);
}

static void summary(const struct tool *t)
{
    const struct sg_codec *main_game = t->forced ? t->forced : sg_codec_capture_default();
    const char *title = main_game && main_game->capture ? main_game->capture->title : "game";

    for (unsigned i = 0; i < t->nsessions; i++) {
        const struct session *s = t->sessions[i];
        char c[80], sv[80], game[64];

        endpoint_str(&s->client, c, sizeof(c));
        endpoint_str(&s->server, sv, sizeof(sv));
        fprintf(stderr, "session %u: %s -> %s: ", s->id, c, sv);
        if (s->codec != main_game)
            title = "game";
        if (s->flow) {
            s->codec->capture->summary(s->flow, stderr);
            continue;
        }
        if (s->codec)
            game_title(s->codec, game, sizeof(game));
        fprintf(stderr, "%" PRIu64 " datagrams of %s%s%s%s, not decoded: %s\n", s->datagrams,
                s->codec ? game : "no known game", s->codec ? " (" : "",
                s->codec ? s->codec->name : "", s->codec ? ")" : "",
                s->codec ? "its codec has no capture decoder yet" : "no codec claims it");
    }
    fprintf(stderr, "%" PRIu64 " frames, %" PRIu64 " not %s UDP, %u sessions, %" PRIu64 " errors\n",
            t->frames, t->skipped, title, t->nsessions, t->errors);
}

static int decode_file(const char *path, bool json, const char *record_dir,
                       const struct sg_codec *forced)
{
    char errbuf[PCAP_ERRBUF_SIZE];
    struct tool *t = calloc(1, sizeof(*t));
    struct pcap_pkthdr *h;
    const u_char *p;
    pcap_t *pc;
    int dlt, rc, status;

    if (!t) {
        fprintf(stderr, "slipgate pcap: out of memory\n");
        return EXIT_ERRORS;
    }
    t->json = json;
    t->record_dir = record_dir;
    t->forced = forced;
    pc = pcap_open_offline(path, errbuf);
    if (!pc) {
        fprintf(stderr, "slipgate pcap: %s\n", errbuf);
        status = EXIT_ERRORS;
        goto out;
    }
    dlt = pcap_datalink(pc);
    while ((rc = pcap_next_ex(pc, &h, &p)) == 1)
        on_packet(t, dlt, h, p);
    if (rc == PCAP_ERROR) {
        fprintf(stderr, "slipgate pcap: %s: %s\n", path, pcap_geterr(pc));
        t->errors++;
    }
    pcap_close(pc);
    fflush(stdout);
    for (unsigned i = 0; i < t->nsessions; i++) {
        struct session *s = t->sessions[i];

        if (s->flow)
            t->errors += (uint64_t)s->codec->capture->finish(s->flow);
    }
    summary(t);
    status = t->errors ? EXIT_ERRORS : 0;
out:
    for (unsigned i = 0; i < t->nsessions; i++)
        session_destroy(t->sessions[i]);
    free(t);
    return status;
}

/* The games with a capture decoder, for messages: " q3". */
static void print_decoders(FILE *out)
{
    for (int i = 0; sg_codecs[i]; i++)
        if (sg_codecs[i]->capture)
            fprintf(out, " %s", sg_codecs[i]->name);
}

int sg_cmd_pcap(int argc, char **argv)
{
    const char *file = NULL, *record_dir = NULL;
    const struct sg_codec *forced = NULL;
    bool json = false;

    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(usage_text, argc < 2 ? stderr : stdout);
        if (argc >= 2) {
            fputs("Capture decoders (per game, from the codec table):", stdout);
            print_decoders(stdout);
            fputs("\n", stdout);
        }
        return argc < 2 ? EXIT_USAGE : 0;
    }
    if (strcmp(argv[1], "decode") != 0)
        return usage("unknown command '%s'", argv[1]);
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--record") == 0 && i + 1 < argc) {
            record_dir = argv[++i];
        } else if ((strcmp(argv[i], "--protocol") == 0 || strcmp(argv[i], "-p") == 0) &&
                   i + 1 < argc) {
            forced = sg_codec_find(argv[++i]);
            if (!forced)
                return usage("unknown protocol '%s'", argv[i]);
        } else if (argv[i][0] == '-') {
            return usage("unknown option '%s'", argv[i]);
        } else if (!file) {
            file = argv[i];
        } else {
            return usage("unexpected argument '%s'", argv[i]);
        }
    }
    if (!file)
        return usage("decode needs a capture file");
    if (forced && !forced->capture) {
        fprintf(stderr, "slipgate pcap: %s: this game's captures cannot be decoded yet; decoders:",
                forced->name);
        print_decoders(stderr);
        fputs("\n", stderr);
        return EXIT_ERRORS;
    }
    if (record_dir) {
        /* Said before the first flow, not once per flow at its first message. */
        struct stat st;
        if (stat(record_dir, &st) < 0 || !S_ISDIR(st.st_mode) || access(record_dir, W_OK) < 0) {
            fprintf(stderr, "slipgate pcap: --record %s: %s\n", record_dir,
                    stat(record_dir, &st) < 0 ? strerror(errno)
                    : !S_ISDIR(st.st_mode)    ? "not a directory"
                                              : "not writable");
            return EXIT_ERRORS;
        }
    }
    return decode_file(file, json, record_dir, forced);
}
