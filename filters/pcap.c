/*
 * The 'pcap' filter: a tap that writes every datagram of the route's
 * sessions, on both legs, to a capture file that tcpdump, tshark and
 * Wireshark read:
 *
 *     client -> proxy   (SG_LEG_CLIENT_IN,  from the client to the listen address)
 *     proxy  -> server  (SG_LEG_SERVER_OUT, from the session's upstream socket)
 *     server -> proxy   (SG_LEG_SERVER_IN)
 *     proxy  -> client  (SG_LEG_CLIENT_OUT)
 *
 * A datagram a filter drops is seen on its way in only; a duplicated one
 * is written once per copy sent, a delayed one when it is sent.
 *
 * Each datagram gets a synthesized IPv4 or IPv6 header and a UDP header
 * (lengths and checksums filled in), so the link type is LINKTYPE_RAW
 * (101), which holds IPv4 and IPv6 packets in one file.  A leg whose two
 * addresses differ in family is written as IPv6 with the IPv4 address
 * mapped (::ffff:a.b.c.d); a leg between two mapped addresses as IPv4.
 * Where the proxy is bound to a wildcard address (0.0.0.0, ::), its side
 * shows the address the kernel picks to reach the peer (looked up once per
 * session with a connected, unused UDP socket).
 *
 * `format pcap` goes through libpcap (pcap_open_dead + pcap_dump_fopen).
 * libpcap 1.10 writes no pcapng, so `format pcapng` is written here: a
 * Section Header Block, one Interface Description Block (LINKTYPE_RAW) and an Enhanced Packet Block
 * per datagram with a comment naming the session and the leg, and the direction flag; the interface
 * is called "slipgate".
 *
 * One file per route (sessions share it), opened when the route starts or,
 * when the name holds %route%, at the route's first datagram.  Output is
 * buffered and flushed on flush() (the proxy's periodic sweep) and at
 * destroy.  A write error (disk full) is logged once and ends the capture
 * for the route; the traffic itself is never held up.
 *
 * With `anonymize yes` on the route, the client's address and port in the
 * packet headers are its pseudonymous ones (filters/anon.h: 198.18.0.0/15,
 * 2001:db8::/32), the same for a client all along, and the checksums are
 * computed over them.
 *
 * With `sign_key` (route or top level), the file is written through a
 * signer (filters/sign.h) and gets FILE.sig: the route's first datagram
 * tells the key, so a file opened at start-up (no %route%) is made again
 * then, signed from its first byte.  Checkpoints are made at flush(),
 * after the buffered records reached the file; the final one when the
 * file closes.
 */
#include "filters/chain.h"
#include "filters/filter.h"
#include "filters/sign.h"

#include "protocols/error.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PCAP_PATH_MAX   4096
#define LINKTYPE_RAW    101
#define SNAPLEN_DEFAULT 65535
#define SNAPLEN_MIN     48     /* an IPv6 + UDP header */
#define SNAPLEN_MAX     262144 /* libpcap's own maximum */
#define PKT_MAX         (40 + 8 + 65535)

enum { FORMAT_PCAP, FORMAT_PCAPNG };
static const char *const format_names[] = {"pcap", "pcapng", NULL};
enum { AT_MAX_NEXT, AT_MAX_STOP };
static const char *const at_max_names[] = {"next", "stop", NULL};

static const char *const placeholders[] = {"route", "date", "time", "part"};
enum { PH_ROUTE, PH_DATE, PH_TIME, PH_PART, PH_COUNT };

struct pcap_conf {
    char *file;
    int format;
    int64_t snaplen;
    int64_t max_size; /* bytes; 0 = no limit */
    int at_max_size;
    /* from conf_check */
    bool has_route, has_part;
};

struct pcap_route {
    const struct pcap_conf *c;
    pcap_t *dead;          /* format pcap: libpcap's handle for writing */
    pcap_dumper_t *dumper; /* format pcap: the open file */
    FILE *fp;              /* the open file (the dumper's, for pcap) */
    char path[PCAP_PATH_MAX];
    char route[128];  /* the route's name, once a datagram told it */
    unsigned part;    /* 1, then 2.. after max_size */
    uint64_t size;    /* bytes in the current file */
    uint64_t packets; /* written to the current file */
    uint16_t ip_id;
    bool stopped; /* no more writing: error or max_size with `stop` */
    bool open_failed_said;
    bool key_known;                  /* a datagram told the route's sign_key (or none) */
    const struct sg_sign_key *key;   /* sign the files with it, or NULL */
    int64_t sign_interval_ms;
    struct sg_sign_writer *signer;   /* the current file's .sig, or NULL */
    char server[64];                 /* for the .sig */
    int pending_err; /* an error found without a call to log it with */
    char pending[PCAP_PATH_MAX + 128];
    uint8_t pkt[PKT_MAX];
};

/* ---- configuration ---- */

static void conf_init(void *p)
{
    struct pcap_conf *c = p;

    c->format = FORMAT_PCAP;
    c->snaplen = SNAPLEN_DEFAULT;
    c->at_max_size = AT_MAX_NEXT;
}

/* The placeholder at t ("%route%"), its length in *len; -1 if none. */
static int placeholder(const char *t, size_t *len)
{
    for (int i = 0; i < PH_COUNT; i++) {
        size_t n = strlen(placeholders[i]);
        if (strncmp(t + 1, placeholders[i], n) == 0 && t[1 + n] == '%') {
            *len = n + 2;
            return i;
        }
    }
    return -1;
}

static int conf_check(void *p, char *err, size_t errlen)
{
    struct pcap_conf *c = p;

    if (!c->file) {
        snprintf(err, errlen,
                 "needs 'file PATH' (where the capture goes; %%route%% %%date%% "
                 "%%time%% %%part%% are filled in)");
        return SG_E_CONFIG;
    }
    for (const char *t = c->file; *t; t++) {
        size_t len;
        int i;

        if (*t != '%')
            continue;
        i = placeholder(t, &len);
        if (i < 0) {
            snprintf(err, errlen,
                     "'file': unknown placeholder at '%.20s' (known: %%route%% %%date%% %%time%% "
                     "%%part%%)",
                     t);
            return SG_E_CONFIG;
        }
        c->has_route |= i == PH_ROUTE;
        c->has_part |= i == PH_PART;
        t += len - 1;
    }
    if (c->max_size > 0 && c->max_size < c->snaplen + 1024) {
        snprintf(err, errlen,
                 "'max_size' %" PRId64 " is below snaplen + 1024 (%" PRId64
                 "): a file must hold its headers and one whole datagram",
                 c->max_size, c->snaplen + 1024);
        return SG_E_CONFIG;
    }
    return 0;
}

/* ---- file names ---- */

/* Expand the template into r->path for the current part; -ENAMETOOLONG if too long. */
static int expand(struct pcap_route *r)
{
    const struct pcap_conf *c = r->c;
    char value[160];
    size_t o = 0, ext = (size_t)-1;
    time_t now = time(NULL);
    struct tm tm;

    localtime_r(&now, &tm);
    for (const char *t = c->file; *t;) {
        size_t len = 1;
        int i = *t == '%' ? placeholder(t, &len) : -1;

        switch (i) {
        case PH_ROUTE:
            snprintf(value, sizeof(value), "%s", r->route[0] ? r->route : "route");
            for (char *v = value; *v; v++)
                if (*v == '/' || (unsigned char)*v < 0x20)
                    *v = '_';
            break;
        case PH_DATE:
            strftime(value, sizeof(value), "%Y%m%d", &tm);
            break;
        case PH_TIME:
            strftime(value, sizeof(value), "%H%M%S", &tm);
            break;
        case PH_PART:
            snprintf(value, sizeof(value), "%u", r->part);
            break;
        default:
            snprintf(value, sizeof(value), "%c", t[0]);
            break;
        }
        if (o + strlen(value) >= sizeof(r->path))
            return -ENAMETOOLONG;
        memcpy(r->path + o, value, strlen(value) + 1);
        o += strlen(value);
        if (i < 0 && *t == '.')
            ext = o - 1;
        else if (i < 0 && *t == '/')
            ext = (size_t)-1;
        t += len;
    }
    /* Later parts without %part%: "cap.pcap" -> "cap-part2.pcap". */
    if (r->part > 1 && !c->has_part) {
        char suffix[32];
        size_t n = (size_t)snprintf(suffix, sizeof(suffix), "-part%u", r->part);

        if (ext == (size_t)-1)
            ext = o;
        if (o + n >= sizeof(r->path))
            return -ENAMETOOLONG;
        memmove(r->path + ext + n, r->path + ext, o - ext + 1);
        memcpy(r->path + ext, suffix, n);
    }
    return 0;
}

/* ---- pcapng blocks (https://www.ietf.org/archive/id/draft-ietf-opsawg-pcapng) ---- */

static size_t pad4(size_t n)
{
    return (n + 3) & ~(size_t)3;
}

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4); /* pcapng is written in the host's byte order */
}

static void put16(uint8_t *p, uint16_t v)
{
    memcpy(p, &v, 2);
}

/* Append option `code` with `len` bytes of `data` at p; returns bytes written. */
static size_t put_opt(uint8_t *p, uint16_t code, const void *data, size_t len)
{
    put16(p, code);
    put16(p + 2, (uint16_t)len);
    memcpy(p + 4, data, len);
    memset(p + 4 + len, 0, pad4(len) - len);
    return 4 + pad4(len);
}

/* Write the Section Header and Interface Description blocks. */
static int pcapng_header(struct pcap_route *r)
{
    uint8_t b[512];
    size_t n = 0, start;

    /* SHB: type, length, byte-order magic, version 1.0, section length unknown, options */
    put32(b, 0x0A0D0D0A);
    put32(b + 8, 0x1A2B3C4D);
    put16(b + 12, 1);
    put16(b + 14, 0);
    memset(b + 16, 0xff, 8);
    n = 24;
    n += put_opt(b + n, 4, "slipgate", 8); /* shb_userappl */
    n += put_opt(b + n, 0, "", 0);
    put32(b + 4, (uint32_t)(n + 4));
    put32(b + n, (uint32_t)(n + 4));
    n += 4;

    /* IDB: LINKTYPE_RAW, the snap length, named after the route */
    start = n;
    put32(b + n, 1);
    put16(b + n + 8, LINKTYPE_RAW);
    put16(b + n + 10, 0);
    put32(b + n + 12, (uint32_t)r->c->snaplen);
    n += 16;
    n += put_opt(b + n, 2, "slipgate", 8); /* if_name */
    n += put_opt(b + n, 0, "", 0);
    put32(b + start + 4, (uint32_t)(n + 4 - start));
    put32(b + n, (uint32_t)(n + 4 - start));
    n += 4;
    r->size += n;
    return fwrite(b, 1, n, r->fp) == n ? 0 : -1;
}

/* ---- the file ---- */

static int err_of(int e)
{
    return e ? -e : -EIO;
}

/* Close the current file; returns 0 or the negated errno of a failed final write. */
static int file_close(struct pcap_route *r)
{
    int rc = 0;

    if (r->dumper) {
        if (pcap_dump_flush(r->dumper) != 0)
            rc = err_of(errno);
        if (r->signer && rc == 0 && sg_sign_writer_finish(r->signer, r->packets) < 0)
            rc = -EIO;
        pcap_dump_close(r->dumper); /* closes r->fp */
    } else if (r->fp) {
        if (fflush(r->fp) != 0 || ferror(r->fp))
            rc = err_of(errno);
        if (r->signer && rc == 0 && sg_sign_writer_finish(r->signer, r->packets) < 0)
            rc = -EIO;
        if (fclose(r->fp) != 0 && rc == 0)
            rc = err_of(errno);
    }
    sg_sign_writer_destroy(r->signer, false);
    r->signer = NULL;
    r->dumper = NULL;
    r->fp = NULL;
    return rc;
}

/* Open r->path afresh (a regular file of that name is replaced) and write the file header. */
static int file_open(struct pcap_route *r, char *why, size_t whylen)
{
    struct stat st;
    int fd, err;

    err = expand(r);
    if (err < 0) {
        snprintf(why, whylen, "the file name is too long");
        return err;
    }
    /*
     * A new inode, so a chain being replaced (reload) that still writes
     * its tail to the old file never writes into the new one.  Devices and
     * pipes (/dev/null, a FIFO read by tshark) are opened as they are.
     */
    if (lstat(r->path, &st) == 0 && S_ISREG(st.st_mode))
        unlink(r->path);
    fd = open(r->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0 && r->key) {
        char sigpath[PCAP_PATH_MAX + 8];
        struct timespec now;
        struct sg_sign_meta meta = {.route = r->route[0] ? r->route : NULL,
                                    .server = r->server[0] ? r->server : NULL,
                                    .kind = "pcap"};

        clock_gettime(CLOCK_REALTIME, &now);
        meta.start_ms = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
        snprintf(sigpath, sizeof(sigpath), "%s.sig", r->path);
        if (lstat(sigpath, &st) == 0 && S_ISREG(st.st_mode))
            unlink(sigpath);
        err = sg_sign_writer_create(&r->signer, r->key, r->path, fd, &meta, r->sign_interval_ms,
                                    &r->fp);
        if (err < 0) {
            snprintf(why, whylen, "cannot sign '%s': %s", r->path, sg_strerror(err));
            return err;
        }
    } else if (fd < 0 || !(r->fp = fdopen(fd, "wb"))) {
        err = -errno;
        if (fd >= 0)
            close(fd);
        snprintf(why, whylen, "cannot create '%s': %s", r->path, strerror(-err));
        return err;
    }
    r->size = 0;
    r->packets = 0;
    if (r->c->format == FORMAT_PCAP) {
        r->dumper = pcap_dump_fopen(r->dead, r->fp);
        if (!r->dumper) {
            snprintf(why, whylen, "cannot start '%s': %s", r->path, pcap_geterr(r->dead));
            fclose(r->fp);
            r->fp = NULL;
            sg_sign_writer_destroy(r->signer, true);
            r->signer = NULL;
            return -EIO;
        }
        r->size = 24; /* the file header */
        err = ferror(r->fp) ? -1 : 0;
    } else {
        err = pcapng_header(r);
    }
    if (err < 0) {
        err = err_of(errno);
        snprintf(why, whylen, "cannot write '%s': %s", r->path, strerror(-err));
        file_close(r);
        return err;
    }
    return 0;
}

/* ---- per route ---- */

/* The directory part of `tmpl`, when it holds no placeholder, must be writable. */
static int check_dir(const char *tmpl, char *err, size_t errlen)
{
    const char *slash = strrchr(tmpl, '/');
    char dir[PCAP_PATH_MAX];

    if (!slash)
        snprintf(dir, sizeof(dir), ".");
    else
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - tmpl) + (slash == tmpl), tmpl);
    if (strchr(dir, '%'))
        return 0;
    if (access(dir, W_OK | X_OK) != 0) {
        int e = errno;
        snprintf(err, errlen, "cannot write into directory '%s': %s", dir, strerror(e));
        return -e;
    }
    return 0;
}

static int create(const void *conf, void **route_state, char *err, size_t errlen)
{
    const struct pcap_conf *c = conf;
    struct pcap_route *r = calloc(1, sizeof(*r));
    int rc;

    if (!r) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    r->c = c;
    r->part = 1;
    if (c->format == FORMAT_PCAP && !(r->dead = pcap_open_dead(DLT_RAW, (int)c->snaplen))) {
        snprintf(err, errlen, "libpcap cannot write raw IP captures");
        free(r);
        return -ENOMEM;
    }
    /*
     * Without %route% the name is known now: open at once, so a bad path
     * stops the start.  With it, at least a fixed directory is checked now.
     */
    if (c->has_route && (rc = check_dir(c->file, err, errlen)) < 0)
        goto err_dead;
    if (!c->has_route && (rc = file_open(r, err, errlen)) < 0) {
    err_dead:
        if (r->dead)
            pcap_close(r->dead);
        free(r);
        return rc;
    }
    *route_state = r;
    return 0;
}

/* Stop writing after an error; the message waits for a call to log it with. */
static void fail(struct pcap_route *r, int err, const char *what)
{
    file_close(r);
    r->stopped = true;
    r->pending_err = err;
    snprintf(r->pending, sizeof(r->pending), "%s '%s' failed: %s; the capture is stopped", what,
             r->path, strerror(-err));
}

static void say_pending(struct pcap_route *r, struct sg_filter_call *call)
{
    if (!r->pending_err || !call)
        return;
    sg_filter_log(call, SG_FILTER_LOG_ERROR, "%s", r->pending);
    r->pending_err = 0;
}

static void flush(void *route_state)
{
    struct pcap_route *r = route_state;
    int rc = 0;

    if (!r || r->stopped || !r->fp)
        return;
    if (r->dumper)
        rc = pcap_dump_flush(r->dumper);
    else
        rc = fflush(r->fp);
    if (rc != 0 || ferror(r->fp)) {
        fail(r, err_of(errno), "writing");
        return;
    }
    /* What was flushed is in the file: a checkpoint when one is due. */
    if (r->signer) {
        struct timespec now;

        clock_gettime(CLOCK_MONOTONIC, &now);
        if (sg_sign_writer_tick(r->signer,
                                (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000,
                                r->packets) < 0)
            fail(r, -EIO, "signing");
    }
}

static void destroy(void *route_state)
{
    struct pcap_route *r = route_state;
    int rc;

    if (!r)
        return;
    if (!r->stopped && (rc = file_close(r)) < 0)
        fail(r, rc, "writing");
    file_close(r);
    /* Nobody calls us again to log with: the proxy's stderr is all there is. */
    if (r->pending_err)
        fprintf(stderr, "slipgate: filter pcap: %s\n", r->pending);
    if (r->dead)
        pcap_close(r->dead);
    free(r);
}

/* ---- packets ---- */

struct endpoint {
    int family; /* AF_INET or AF_INET6 */
    uint8_t addr[16];
    uint16_t port; /* host order */
};

static int endpoint_of(const struct sockaddr *sa, struct endpoint *e)
{
    if (!sa)
        return -EINVAL;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        e->family = AF_INET;
        memcpy(e->addr, &in->sin_addr, 4);
        e->port = ntohs(in->sin_port);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        e->family = AF_INET6;
        memcpy(e->addr, &in6->sin6_addr, 16);
        e->port = ntohs(in6->sin6_port);
        return 0;
    }
    return -EAFNOSUPPORT;
}

static bool is_mapped(const struct endpoint *e)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return e->family == AF_INET6 && memcmp(e->addr, prefix, 12) == 0;
}

static void to_mapped(struct endpoint *e)
{
    memmove(e->addr + 12, e->addr, 4);
    memset(e->addr, 0, 10);
    e->addr[10] = e->addr[11] = 0xff;
    e->family = AF_INET6;
}

static void to_v4(struct endpoint *e)
{
    memmove(e->addr, e->addr + 12, 4);
    e->family = AF_INET;
}

/* One's complement sum of 16-bit big-endian words (RFC 1071), not yet folded. */
static uint32_t sum16(uint32_t sum, const uint8_t *p, size_t n)
{
    for (; n >= 2; p += 2, n -= 2)
        sum += (uint32_t)(p[0] << 8 | p[1]);
    if (n)
        sum += (uint32_t)p[0] << 8;
    return sum;
}

static uint16_t fold(uint32_t sum)
{
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

static void be16(uint8_t *p, uint32_t v)
{
    v = v > 0xffff ? 0xffff : v;
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

/*
 * Build the IP + UDP packet for one datagram in r->pkt, the payload cut at
 * the snap length; *caplen gets the bytes built, *origlen the whole size.
 */
static int build(struct pcap_route *r, const struct sockaddr *from, const struct sockaddr *to,
                 const uint8_t *data, size_t len, uint32_t *caplen, uint32_t *origlen)
{
    struct endpoint src, dst;
    uint8_t *ip = r->pkt, *udp;
    size_t iplen, cap;
    uint32_t sum;
    uint16_t ck;

    if (endpoint_of(from, &src) < 0 || endpoint_of(to, &dst) < 0)
        return -EAFNOSUPPORT;
    if (len > 65535 - 8)
        len = 65535 - 8;
    if (src.family != dst.family) {
        if (src.family == AF_INET)
            to_mapped(&src);
        else
            to_mapped(&dst);
    } else if (is_mapped(&src) && is_mapped(&dst)) {
        to_v4(&src);
        to_v4(&dst);
    }

    /* The IP header and the UDP pseudo-header's sum. */
    sum = 17 + (uint32_t)(8 + len);
    if (src.family == AF_INET) {
        iplen = 20;
        memset(ip, 0, 20);
        ip[0] = 0x45;
        be16(ip + 2, (uint32_t)(20 + 8 + len));
        be16(ip + 4, r->ip_id++);
        ip[6] = 0x40; /* don't fragment */
        ip[8] = 64;
        ip[9] = 17;
        memcpy(ip + 12, src.addr, 4);
        memcpy(ip + 16, dst.addr, 4);
        be16(ip + 10, fold(sum16(0, ip, 20)));
        sum = sum16(sum, src.addr, 4);
        sum = sum16(sum, dst.addr, 4);
    } else {
        iplen = 40;
        memset(ip, 0, 40);
        ip[0] = 0x60;
        be16(ip + 4, (uint32_t)(8 + len));
        ip[6] = 17;
        ip[7] = 64;
        memcpy(ip + 8, src.addr, 16);
        memcpy(ip + 24, dst.addr, 16);
        sum = sum16(sum, src.addr, 16);
        sum = sum16(sum, dst.addr, 16);
    }

    /* UDP: ports, length, checksum over the whole payload (0 is sent as 0xffff). */
    udp = ip + iplen;
    be16(udp, src.port);
    be16(udp + 2, dst.port);
    be16(udp + 4, (uint32_t)(8 + len));
    udp[6] = udp[7] = 0;
    sum = sum16(sum, udp, 8);
    sum = sum16(sum, data, len);
    ck = fold(sum);
    be16(udp + 6, ck ? ck : 0xffff);

    *origlen = (uint32_t)(iplen + 8 + len);
    cap = *origlen < (uint64_t)r->c->snaplen ? *origlen : (size_t)r->c->snaplen;
    if (cap > iplen + 8)
        memcpy(udp + 8, data, cap - iplen - 8);
    *caplen = (uint32_t)cap;
    return 0;
}

static const char *leg_name(enum sg_leg leg)
{
    switch (leg) {
    case SG_LEG_CLIENT_IN:
        return "client->proxy";
    case SG_LEG_SERVER_OUT:
        return "proxy->server";
    case SG_LEG_SERVER_IN:
        return "server->proxy";
    case SG_LEG_CLIENT_OUT:
        return "proxy->client";
    }
    return "?";
}

/* Write one packet record; returns 0 or -1 (see ferror). */
static int write_record(struct pcap_route *r, const struct timespec *ts, uint32_t caplen,
                        uint32_t origlen, const char *comment, bool inbound, size_t recsize)
{
    if (r->dumper) {
        struct pcap_pkthdr h = {.caplen = caplen, .len = origlen};

        h.ts.tv_sec = ts->tv_sec;
        h.ts.tv_usec = ts->tv_nsec / 1000;
        pcap_dump((u_char *)r->dumper, &h, r->pkt);
    } else {
        uint64_t us = (uint64_t)ts->tv_sec * 1000000u + (uint64_t)ts->tv_nsec / 1000u;
        uint32_t flags = inbound ? 1 : 2; /* epb_flags: direction inbound / outbound */
        uint8_t head[28], tail[256];
        size_t n = 0;
        static const uint8_t zero[4];

        put32(head, 6);
        put32(head + 4, (uint32_t)recsize);
        put32(head + 8, 0);
        put32(head + 12, (uint32_t)(us >> 32));
        put32(head + 16, (uint32_t)us);
        put32(head + 20, caplen);
        put32(head + 24, origlen);
        n += put_opt(tail, 1, comment, strlen(comment)); /* opt_comment */
        n += put_opt(tail + n, 2, &flags, 4);            /* epb_flags */
        n += put_opt(tail + n, 0, "", 0);
        put32(tail + n, (uint32_t)recsize);
        n += 4;
        if (fwrite(head, 1, 28, r->fp) != 28 || fwrite(r->pkt, 1, caplen, r->fp) != caplen ||
            fwrite(zero, 1, pad4(caplen) - caplen, r->fp) != pad4(caplen) - caplen ||
            fwrite(tail, 1, n, r->fp) != n)
            return -1;
    }
    r->size += recsize;
    r->packets++;
    return ferror(r->fp) ? -1 : 0;
}

/*
 * Per session: the proxy's own address on each side (listener, upstream
 * socket) where it is bound to a wildcard (0.0.0.0, ::), replaced by the
 * address the kernel picks to reach the peer, found once per session.
 */
struct pcap_slot {
    struct sockaddr_storage local[2]; /* 0: the listener's side, 1: the upstream side */
    bool known[2];
};

static bool unspecified(const struct sockaddr *sa)
{
    static const uint8_t zero[16];

    if (sa->sa_family == AF_INET)
        return ((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr == 0;
    if (sa->sa_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, zero, 16) == 0;
    return false;
}

static socklen_t sa_len(const struct sockaddr *sa)
{
    return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* `bound`, or when it is a wildcard, the source address towards `peer` (same family). */
static void local_for(const struct sockaddr *bound, const struct sockaddr *peer,
                      struct sockaddr_storage *out)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    int fd;

    memset(out, 0, sizeof(*out));
    memcpy(out, bound, sa_len(bound));
    if (!unspecified(bound) || peer->sa_family != bound->sa_family)
        return;
    /* A connected UDP socket sends nothing: connect() only looks up the route. */
    fd = socket(peer->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    if (connect(fd, peer, sa_len(peer)) == 0 &&
        getsockname(fd, (struct sockaddr *)&ss, &len) == 0 && ss.ss_family == bound->sa_family) {
        if (ss.ss_family == AF_INET)
            ((struct sockaddr_in *)out)->sin_addr = ((struct sockaddr_in *)&ss)->sin_addr;
        else
            ((struct sockaddr_in6 *)out)->sin6_addr = ((struct sockaddr_in6 *)&ss)->sin6_addr;
    }
    close(fd);
}

/* Replace the proxy's wildcard address of this leg (from or to) by a real one. */
static void fix_local(struct sg_filter_call *call, enum sg_leg leg, const struct sockaddr **from,
                      const struct sockaddr **to)
{
    bool proxy_sends = leg == SG_LEG_CLIENT_OUT || leg == SG_LEG_SERVER_OUT;
    int side = leg == SG_LEG_SERVER_IN || leg == SG_LEG_SERVER_OUT;
    const struct sockaddr **mine = proxy_sends ? from : to;
    const struct sockaddr *peer = proxy_sends ? *to : *from;
    struct pcap_slot *s = *call->slot;

    if (!*mine || !peer || !unspecified(*mine))
        return;
    if (!s && !(s = *call->slot = calloc(1, sizeof(*s))))
        return;
    if (!s->known[side] || s->local[side].ss_family != (*mine)->sa_family) {
        local_for(*mine, peer, &s->local[side]);
        s->known[side] = true;
    }
    *mine = (const struct sockaddr *)&s->local[side];
}

static void session_end(void *route_state, const struct sg_filter_session *session, void *slot)
{
    (void)route_state;
    (void)session;
    free(slot);
}

static void on_datagram(struct sg_filter_call *call, enum sg_leg leg, const uint8_t *data,
                        size_t len, const struct sockaddr *from, const struct sockaddr *to)
{
    struct pcap_route *r = call->route_state;
    const struct pcap_conf *c = call->conf;
    uint32_t caplen, origlen;
    char comment[96], why[PCAP_PATH_MAX + 128];
    struct timespec ts;
    size_t recsize;
    bool inbound = leg == SG_LEG_CLIENT_IN || leg == SG_LEG_SERVER_IN;
    int err;

    if (!r)
        return;
    say_pending(r, call);
    if (r->stopped)
        return;

    /* The first datagram tells the route's signing key: a file opened unsigned is made again. */
    if (!r->key_known && call->session) {
        r->key_known = true;
        r->key = call->session->sign_key;
        r->sign_interval_ms = call->session->sign_interval_ms;
        snprintf(r->route, sizeof(r->route), "%s",
                 call->session->route ? call->session->route : "");
        snprintf(r->server, sizeof(r->server), "%s",
                 call->session->server ? call->session->server : "");
        if (r->key && r->fp && r->packets == 0 && (err = file_close(r)) < 0) {
            fail(r, err, "writing");
            say_pending(r, call);
            return;
        }
    }

    /* A name with %route% is opened at the route's first datagram. */
    if (!r->fp) {
        snprintf(r->route, sizeof(r->route), "%s",
                 call->session && call->session->route ? call->session->route : "");
        if ((err = file_open(r, why, sizeof(why))) < 0) {
            r->stopped = true;
            sg_filter_log(call, SG_FILTER_LOG_ERROR, "%s; no capture for this route", why);
            return;
        }
        sg_filter_log(call, SG_FILTER_LOG_INFO, "capturing into %s", r->path);
    }

    clock_gettime(CLOCK_REALTIME, &ts);
    fix_local(call, leg, &from, &to);
    /* anonymize yes: the client's pseudonymous address in the headers (checksums follow). */
    if (call->session && call->session->client_anon) {
        if (leg == SG_LEG_CLIENT_IN)
            from = call->session->client_anon;
        else if (leg == SG_LEG_CLIENT_OUT)
            to = call->session->client_anon;
    }
    if (build(r, from, to, data, len, &caplen, &origlen) < 0)
        return; /* not an IP address: nothing to write */
    snprintf(comment, sizeof(comment), "session %" PRIu64 " %s",
             call->session ? call->session->id : 0, leg_name(leg));
    recsize = c->format == FORMAT_PCAP
                  ? 16 + caplen
                  : 28 + pad4(caplen) + (4 + pad4(strlen(comment))) + 8 + 4 + 4;

    /* max_size: go on in the next part, or stop. */
    if (c->max_size > 0 && r->size + recsize > (uint64_t)c->max_size) {
        uint64_t size = r->size;
        char old[PCAP_PATH_MAX];

        snprintf(old, sizeof(old), "%s", r->path);
        if ((err = file_close(r)) < 0) {
            fail(r, err, "writing");
            say_pending(r, call);
            return;
        }
        if (c->at_max_size == AT_MAX_STOP) {
            r->stopped = true;
            sg_filter_log(call, SG_FILTER_LOG_INFO,
                          "%s reached max_size (%" PRIu64 " bytes): the capture is stopped", old,
                          size);
            return;
        }
        r->part++;
        if ((err = file_open(r, why, sizeof(why))) < 0) {
            r->stopped = true;
            sg_filter_log(call, SG_FILTER_LOG_ERROR, "%s; the capture is stopped", why);
            return;
        }
        sg_filter_log(call, SG_FILTER_LOG_INFO,
                      "%s reached max_size (%" PRIu64 " bytes): continuing in %s", old, size,
                      r->path);
    }

    if (write_record(r, &ts, caplen, origlen, comment, inbound, recsize) < 0) {
        fail(r, err_of(errno), "writing");
        say_pending(r, call);
    }
}

static int on_frame(struct sg_filter_call *call)
{
    (void)call;
    return SG_FILTER_PASS; /* everything happens per datagram */
}

static const struct sg_conf_directive directives[] = {
    {.name = "file",
     .type = SG_CONF_PATH,
     .offset = offsetof(struct pcap_conf, file),
     .argname = "PATH",
     .help = "the capture file, replaced if it exists; %route% %date% %time% %part% are filled "
             "in (required)"},
    {.name = "format",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct pcap_conf, format),
     .choices = format_names,
     .argname = "pcap|pcapng",
     .help = "file format (default pcap)"},
    {.name = "snaplen",
     .type = SG_CONF_INT,
     .offset = offsetof(struct pcap_conf, snaplen),
     .min = SNAPLEN_MIN,
     .max = SNAPLEN_MAX,
     .argname = "BYTES",
     .help = "keep at most this many bytes of each packet, IP and UDP headers included (default "
             "65535)"},
    {.name = "max_size",
     .type = SG_CONF_SIZE,
     .offset = offsetof(struct pcap_conf, max_size),
     .min = 0,
     .max = INT64_MAX,
     .argname = "SIZE",
     .help = "end a file before it grows past SIZE bytes (k/M/G; default 0: no limit)"},
    {.name = "at_max_size",
     .type = SG_CONF_ENUM,
     .offset = offsetof(struct pcap_conf, at_max_size),
     .choices = at_max_names,
     .argname = "next|stop",
     .help = "at max_size: go on in the next part (default), or stop capturing"},
    {NULL},
};

const struct sg_filter_impl sg_builtin_pcap = {
    .name = "pcap",
    .description = "capture both legs of every session to a pcap or pcapng file (a tap)",
    .example = "filter pcap {\n"
               "    file \"/tmp/slipgate-%route%.pcapng\"\n"
               "    format pcapng\n"
               "    max_size 100M\n"
               "}\n",
    .tap = true,
    .conf_size = sizeof(struct pcap_conf),
    .directives = directives,
    .conf_init = conf_init,
    .conf_check = conf_check,
    .create = create,
    .destroy = destroy,
    .on_frame = on_frame,
    .on_datagram = on_datagram,
    .session_end = session_end,
    .flush = flush,
};
