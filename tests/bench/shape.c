/*
 * The bench's traffic: one script per real Quake 3 capture (pcap or pcapng
 * through libpcap), replayed byte for byte (bench.h says how).
 *
 * In each capture the UDP port seen in the most datagrams is the server's,
 * and the client port that exchanged the most datagrams with it is the
 * game client (the others are status tools).  The script is that client's
 * session from its `getchallenge` on, in capture order; it is marked
 * `q3` when it holds the whole handshake (getchallenge, challengeResponse,
 * connect, connectResponse) and netchan traffic after it.  The challenge
 * from challengeResponse tells whether the netchan header carries the
 * ioquake3 71 checksum.
 *
 * Keys: a netchan datagram's key is its first word (sequence and fragment
 * bit) and, for a fragment, its start (read past qport and checksum); an
 * out-of-band one's is a hash of its first 32 bytes, with bit 63 set.
 *
 * QuakeWorld captures (slipgate-bench --game qw) go the same way: the same
 * `getchallenge`, then the server's 'c' challenge, `connect` and the 'j'
 * accept make a handshake a decoder can follow (`q3` is set: "decodable",
 * and `qw`).  QuakeWorld has no fragments and its first word's top bit is
 * the reliable flag: a netchan datagram's key is its whole first word.
 *
 * NetQuake captures (slipgate-bench --game nq) are told by their connect
 * request (a control packet, CCREQ_CONNECT with "QUAKE"): its sender is the
 * client, its destination the server's control port, and the server's
 * accept (CCREP_ACCEPT) names the port the rest of the session comes from.
 * The script is the client's datagrams with both ports from the connect on
 * (a DarkPlaces client's `getchallenge` before it, which a NetQuake server
 * does not answer, is left out); the accept is marked with the offset of its
 * port, which the sink fills with its own second port, and the datagrams
 * from the new port are marked `moved` (load.c).  A DarkPlaces server
 * (Nexuiz on DP7 or 15) answers with its connectionless `challenge` and
 * `accept` instead, from the same port: the session is then followed with
 * no move.  Keys: a netchan
 * datagram's is its first 8 bytes (flags, length, sequence; big-endian); a
 * control packet's is a hash like an out-of-band one's, of the accept's
 * first 5 bytes only (the port differs on every path).
 *
 * Quake 2 captures (slipgate-bench --game q2) go as Quake 3 ones do: the
 * same `getchallenge`, then the server's `challenge N p=...`, `connect`
 * (its protocol and qport say how wide the client header's qport is: two
 * bytes for 34, one for R1Q2 35 and Q2PRO 36, none when qport & 0xff is 0)
 * and `client_connect` make the handshake (`q3` and `q2` are set).  A
 * netchan datagram's key is its first word (sequence and reliable bit);
 * Q2PRO's new netchan (36, `nc=1`) marks a fragment with bit 30 of that
 * word, and a fragment's key adds its offset word, read after the qport.
 *
 * Without captures the built-in shape stands in: netchan-shaped datagrams
 * (sequence, qport, zeros) of 30 to 100 bytes from the client and 100 to
 * 600 from the server with a 1300-byte fragment burst now and then, one
 * server datagram per three client ones.  It has no handshake: modes that
 * decode are n/a with it.
 */
#include "tests/bench/bench.h"

#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <pcap/pcap.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SCRIPT  (1u << 20) /* datagrams per script */
#define FRAG_BIT    0x80000000u
#define OOB_KEY_BIT (1ull << 63)
#define OOB_KEY_LEN 32
#define Q2_FRAG_BIT 0x40000000u

struct udp_seen {
    uint16_t sport, dport, len;
    uint32_t off; /* of the payload in `bytes` */
};

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static unsigned le16(const uint8_t *p)
{
    return (unsigned)p[0] | (unsigned)p[1] << 8;
}

static bool is_oob(const uint8_t *d, size_t len)
{
    return len >= 4 && le32(d) == 0xffffffffu;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* A NetQuake control packet (flags 0x8000, its length word matching) with command `cmd`. */
static bool nq_ctl(const uint8_t *d, size_t len, int cmd)
{
    return len >= 5 && len <= 0xffff && be32(d) == (0x80000000u | (uint32_t)len) && d[4] == cmd;
}

#define NQ_CCREQ_CONNECT 0x01
#define NQ_CCREP_ACCEPT  0x81
#define NQ_ACCEPT_PORT   5 /* offset of the accept's port (32 bits, little-endian) */

static bool oob_is(const uint8_t *d, size_t len, const char *what)
{
    size_t n = strlen(what);

    return is_oob(d, len) && len >= 4 + n && memcmp(d + 4, what, n) == 0;
}

/* The key of a datagram (see the top of the file), or false if it is too short. */
static bool dgram_key(const struct sg_bench_script *sc, bool s2c, const uint8_t *d, size_t len,
                      uint64_t *key)
{
    bool checksum = sc->checksum, qw = sc->qw, nq = sc->nq;
    size_t off;
    uint32_t word;

    if (nq && len >= 8 && !(d[0] & 0x80)) {
        *key = (uint64_t)be32(d) << 32 | be32(d + 4);
        return true;
    }
    if (is_oob(d, len) || (nq && len >= 5 && (d[0] & 0x80))) {
        uint64_t h = 1469598103934665603ull; /* FNV-1a */
        size_t n = nq && nq_ctl(d, len, NQ_CCREP_ACCEPT) ? NQ_ACCEPT_PORT : len;

        for (size_t i = 0; i < n && i < OOB_KEY_LEN; i++)
            h = (h ^ d[i]) * 1099511628211ull;
        *key = h | OOB_KEY_BIT;
        return true;
    }
    if (len < 4 || nq)
        return false;
    word = le32(d);
    *key = word;
    if (sc->q2) {
        off = 8u + (s2c ? 0u : sc->q2_qport);
        if ((word & Q2_FRAG_BIT) && len >= off + 2)
            *key |= (uint64_t)le16(d + off) << 32;
        return true;
    }
    if (qw || !(word & FRAG_BIT))
        return true;
    off = (s2c ? 4 : 6) + (checksum ? 4 : 0);
    if (len < off + 2)
        return false;
    *key |= (uint64_t)le16(d + off) << 32;
    return true;
}

static int cmp_key(const void *a, const void *b)
{
    const struct sg_bench_keyidx *x = a, *y = b;

    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

long sg_bench_script_find(const struct sg_bench_script *sc, bool s2c, const uint8_t *data,
                          size_t len)
{
    const struct sg_bench_keyidx *k = sc->keys[s2c];
    size_t lo = 0, hi = sc->nkeys[s2c];
    uint64_t key;

    if (!dgram_key(sc, s2c, data, len, &key))
        return -1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (k[mid].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < sc->nkeys[s2c] && k[lo].key == key ? (long)k[lo].idx : -1;
}

/* ---- building a script ---- */

/* A script under construction: datagrams appended, then sealed. */
struct builder {
    struct sg_bench_script *sc;
    size_t cap, bytes_len, bytes_cap;
};

static int push(struct builder *b, bool s2c, const uint8_t *data, size_t len)
{
    struct sg_bench_script *sc = b->sc;

    if (len > SG_BENCH_MAX_DGRAM || sc->n >= MAX_SCRIPT)
        return 0; /* nothing a relay would carry; or enough of a sample */
    if (sc->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1024;
        struct sg_bench_dgram *d = realloc(sc->d, cap * sizeof(*d));

        if (!d)
            return -ENOMEM;
        sc->d = d;
        b->cap = cap;
    }
    if (b->bytes_len + len > b->bytes_cap) {
        size_t cap = b->bytes_cap ? b->bytes_cap * 2 : 65536;
        uint8_t *nb;

        while (cap < b->bytes_len + len)
            cap *= 2;
        nb = realloc(sc->bytes, cap);
        if (!nb)
            return -ENOMEM;
        sc->bytes = nb;
        b->bytes_cap = cap;
    }
    if (data)
        memcpy(sc->bytes + b->bytes_len, data, len);
    else
        memset(sc->bytes + b->bytes_len, 0, len);
    /* `data` holds the offset until the script is sealed (bytes may move). */
    sc->d[sc->n++] = (struct sg_bench_dgram){
        .data = (const uint8_t *)(uintptr_t)b->bytes_len, .len = (uint16_t)len, .s2c = s2c};
    b->bytes_len += len;
    return 0;
}

/* Pointers, reply ranges, client index list and key tables. */
static int seal(struct builder *b)
{
    struct sg_bench_script *sc = b->sc;
    size_t nc = 0;

    if (sc->n < 2 || sc->d[0].s2c || !sc->d[1].s2c)
        return -EINVAL; /* it must open with a client datagram that gets an answer */
    sc->c2s = calloc(sc->n, sizeof(*sc->c2s));
    sc->keys[0] = calloc(sc->n, sizeof(*sc->keys[0]));
    sc->keys[1] = calloc(sc->n, sizeof(*sc->keys[1]));
    if (!sc->c2s || !sc->keys[0] || !sc->keys[1])
        return -ENOMEM;
    for (size_t i = 0; i < sc->n; i++) {
        struct sg_bench_dgram *d = &sc->d[i];
        uint64_t key;

        d->data = sc->bytes + (uintptr_t)d->data;
        if (d->s2c) {
            sc->n_s2c++;
        } else {
            uint32_t j = (uint32_t)i + 1;

            while (j < sc->n && sc->d[j].s2c)
                j++;
            d->next = (uint32_t)i + 1;
            d->nreplies = j - ((uint32_t)i + 1);
            d->after = (uint32_t)sc->n_s2c;
            sc->c2s[nc++] = (uint32_t)i;
        }
        if (dgram_key(sc, d->s2c, d->data, d->len, &key))
            sc->keys[d->s2c][sc->nkeys[d->s2c]++] = (struct sg_bench_keyidx){key, (uint32_t)i};
    }
    sc->n_c2s = nc;

    /* Sorted keys; a key seen twice names its first datagram only. */
    for (int dir = 0; dir < 2; dir++) {
        size_t w = 0;

        qsort(sc->keys[dir], sc->nkeys[dir], sizeof(*sc->keys[dir]), cmp_key);
        for (size_t i = 0; i < sc->nkeys[dir]; i++) {
            if (w > 0 && sc->keys[dir][w - 1].key == sc->keys[dir][i].key) {
                sc->dup_keys++;
                continue;
            }
            sc->keys[dir][w++] = sc->keys[dir][i];
        }
        sc->nkeys[dir] = w;
    }
    return 0;
}

static void script_finish(struct sg_bench_script *sc)
{
    free(sc->d);
    free(sc->c2s);
    free(sc->keys[0]);
    free(sc->keys[1]);
    free(sc->bytes);
    memset(sc, 0, sizeof(*sc));
}

/* ---- reading one capture ---- */

static unsigned be16(const unsigned char *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

/* The UDP header of one captured frame, or false if it is not UDP/IP. */
static bool frame_udp(int dlt, const unsigned char *d, size_t caplen, struct udp_seen *u)
{
    size_t off;
    unsigned ethertype, proto;

    /* Link layer. */
    switch (dlt) {
    case DLT_EN10MB:
        if (caplen < 14)
            return false;
        ethertype = be16(d + 12);
        off = 14;
        while ((ethertype == 0x8100 || ethertype == 0x88a8) && caplen >= off + 4) {
            ethertype = be16(d + off + 2);
            off += 4;
        }
        break;
    case DLT_LINUX_SLL:
        if (caplen < 16)
            return false;
        ethertype = be16(d + 14);
        off = 16;
        break;
    case DLT_RAW:
        if (caplen < 1)
            return false;
        ethertype = (d[0] >> 4) == 6 ? 0x86dd : 0x0800;
        off = 0;
        break;
    default:
        return false;
    }

    /* Network layer: IPv4 (first fragments only) or IPv6 without extension headers. */
    if (ethertype == 0x0800) {
        size_t ihl;

        if (caplen < off + 20 || (d[off] >> 4) != 4)
            return false;
        ihl = (size_t)(d[off] & 15) * 4;
        proto = d[off + 9];
        if ((be16(d + off + 6) & 0x1fff) != 0)
            return false;
        off += ihl;
    } else if (ethertype == 0x86dd) {
        if (caplen < off + 40)
            return false;
        proto = d[off + 6];
        off += 40;
    } else {
        return false;
    }
    if (proto != 17 || caplen < off + 8 || be16(d + off + 4) < 8)
        return false;

    u->sport = (uint16_t)be16(d + off);
    u->dport = (uint16_t)be16(d + off + 2);
    u->len = (uint16_t)(be16(d + off + 4) - 8);
    u->off = (uint32_t)(off + 8);
    return caplen >= u->off + u->len; /* a datagram cut by the snap length is no use */
}

/*
 * A NetQuake session (see the top of the file): the script from the first
 * connect request on.  Returns 1 when the capture holds one, 0 when it does
 * not (it is then read as Quake 3 or QuakeWorld), or a negated errno.
 */
static int read_nq(const struct udp_seen *seen, size_t n, const uint8_t *bytes, struct builder *b)
{
    struct sg_bench_script *sc = b->sc;
    unsigned client = 0, control = 0, moved = 0;
    bool accepted = false, data = false;
    size_t first = n;
    int err;

    for (size_t i = 0; i < n && first == n; i++) {
        const uint8_t *d = bytes + seen[i].off;

        if (nq_ctl(d, seen[i].len, NQ_CCREQ_CONNECT) && seen[i].len >= 11 &&
            memcmp(d + 5, "QUAKE", 6) == 0) {
            first = i;
            client = seen[i].sport;
            control = seen[i].dport;
        }
    }
    if (first == n)
        return 0;
    for (size_t i = first; i < n; i++) {
        const uint8_t *d = bytes + seen[i].off;
        unsigned sp = seen[i].sport, dp = seen[i].dport;
        bool s2c = dp == client && (sp == control || (moved && sp == moved));
        size_t was = sc->n;

        if (!s2c && !(sp == client && (dp == control || (moved && dp == moved))))
            continue;
        if (s2c && sp == control && nq_ctl(d, seen[i].len, NQ_CCREP_ACCEPT) &&
            seen[i].len >= NQ_ACCEPT_PORT + 4 && seen[i].len <= SG_BENCH_HDR_LEN) {
            unsigned port = le32(d + NQ_ACCEPT_PORT);

            if (port > 0 && port < 65536 && port != client) {
                moved = port;
                accepted = true;
            }
            if ((err = push(b, s2c, d, seen[i].len)) < 0)
                return err;
            if (sc->n > was)
                sc->d[was].port_at = NQ_ACCEPT_PORT;
            continue;
        }
        if (s2c && seen[i].len >= 10 && memcmp(d, "\xff\xff\xff\xff" "accept", 10) == 0)
            accepted = true; /* DarkPlaces' connectionless accept: no port move */
        if (!(d[0] & 0x80) && accepted)
            data = true;
        if ((err = push(b, s2c, d, seen[i].len)) < 0)
            return err;
        if (sc->n > was && s2c && moved && sp == moved)
            sc->d[was].moved = true;
    }
    sc->nq = true;
    sc->q3 = accepted && data;
    return 1;
}

/* The qport bytes of a Quake 2 client's header after its connect,
 * "connect <protocol> <qport> ..." (q2pro NetchanOld/New_Transmit): 2 for 34,
 * for 35 and 36 one (qport & 0xff), none when that byte is 0. */
static uint8_t q2_qport_bytes(const uint8_t *d, size_t len)
{
    char text[64] = {0};
    long protocol, qport;
    char *end;

    memcpy(text, d + 12, len - 12 < sizeof(text) - 1 ? len - 12 : sizeof(text) - 1);
    protocol = strtol(text, &end, 10);
    qport = strtol(end, NULL, 10);
    if (protocol == 35 || protocol == 36)
        return (qport & 0xff) ? 1 : 0;
    return 2;
}

/* The script of one capture, or a negated errno (-EINVAL: no usable session). */
static int read_capture(const char *path, struct sg_bench_script *sc)
{
    char errbuf[PCAP_ERRBUF_SIZE];
    struct udp_seen *seen = NULL, u;
    size_t n = 0, cap = 0, blen = 0, bcap = 0;
    uint8_t *bytes = NULL;
    uint32_t *ports = NULL;
    struct pcap_pkthdr *hdr;
    const unsigned char *data;
    unsigned server = 0, client = 0;
    struct builder b = {sc, 0, 0, 0};
    bool started = false, looked = false, hs[4] = {false}, qw = false, q2 = false;
    long challenge = 0;
    int ret, dlt;
    pcap_t *p;

    memset(sc, 0, sizeof(*sc));
    p = pcap_open_offline(path, errbuf);
    if (!p) {
        fprintf(stderr, "slipgate-bench: warning: %s: %s\n", path, errbuf);
        return -EINVAL;
    }
    dlt = pcap_datalink(p);

    /* Every UDP datagram, and how often each port appears. */
    ports = calloc(65536, sizeof(*ports));
    if (!ports) {
        ret = -ENOMEM;
        goto out;
    }
    for (size_t frames = 0; frames < (1u << 24) && pcap_next_ex(p, &hdr, &data) == 1; frames++) {
        if (!frame_udp(dlt, data, hdr->caplen, &u))
            continue;
        if (n == cap || blen + u.len > bcap) {
            size_t ncap = cap ? cap * 2 : 4096, nbcap = bcap ? bcap * 2 : 1 << 20;
            struct udp_seen *ns = realloc(seen, ncap * sizeof(*ns));
            uint8_t *nb;

            if (ns)
                seen = ns;
            while (nbcap < blen + u.len)
                nbcap *= 2;
            nb = ns ? realloc(bytes, nbcap) : NULL;
            if (!ns || !nb) {
                ret = -ENOMEM;
                goto out;
            }
            bytes = nb;
            cap = ncap;
            bcap = nbcap;
        }
        memcpy(bytes + blen, data + u.off, u.len);
        u.off = (uint32_t)blen;
        blen += u.len;
        seen[n++] = u;
        ports[u.sport]++;
        if (u.dport != u.sport)
            ports[u.dport]++;
    }

    /* NetQuake: its connect request tells the client and the server's ports. */
    if ((ret = read_nq(seen, n, bytes, &b)) != 0) {
        if (ret > 0)
            ret = seal(&b);
        goto out;
    }

    /* The server is the busiest port, the game client its busiest peer. */
    for (unsigned i = 1; i < 65536; i++)
        if (ports[i] > ports[server])
            server = i;
    memset(ports, 0, 65536 * sizeof(*ports));
    for (size_t i = 0; i < n; i++) {
        if (seen[i].dport == server && seen[i].sport != server)
            ports[seen[i].sport]++;
        else if (seen[i].sport == server && seen[i].dport != server)
            ports[seen[i].dport]++;
    }
    for (unsigned i = 1; i < 65536; i++)
        if (ports[i] > ports[client])
            client = i;

    /* Its session from its getchallenge on (from its first datagram if it has none). */
    for (size_t i = 0; i < n && server && client; i++) {
        bool s2c = seen[i].sport == server && seen[i].dport == client;
        const uint8_t *d = bytes + seen[i].off;

        if (!s2c && !(seen[i].sport == client && seen[i].dport == server))
            continue;
        if (!started && !s2c && oob_is(d, seen[i].len, "getchallenge"))
            started = true;
        if (!started)
            continue;
        if (!s2c && oob_is(d, seen[i].len, "getchallenge"))
            hs[0] = true;
        if (s2c && oob_is(d, seen[i].len, "challengeResponse ")) {
            char text[32] = {0};
            size_t tlen = (size_t)seen[i].len - 22; /* after "\xff\xff\xff\xffchallengeResponse " */

            memcpy(text, d + 22, tlen < sizeof(text) - 1 ? tlen : sizeof(text) - 1);
            challenge = strtol(text, NULL, 10);
            hs[1] = true;
        }
        if (!s2c && oob_is(d, seen[i].len, "connect "))
            hs[2] = true;
        if (s2c && oob_is(d, seen[i].len, "connectResponse"))
            hs[3] = true;
        /* QuakeWorld: 'c' and the challenge's digits, then 'j' */
        if (s2c && oob_is(d, seen[i].len, "c") && seen[i].len > 5 &&
            (d[5] == '-' || (d[5] >= '0' && d[5] <= '9')))
            hs[1] = qw = true;
        if (s2c && qw && oob_is(d, seen[i].len, "j"))
            hs[3] = true;
        /* Quake 2: 'challenge N p=...', the connect's protocol and qport, 'client_connect' */
        if (s2c && oob_is(d, seen[i].len, "challenge "))
            hs[1] = q2 = true;
        if (!s2c && q2 && oob_is(d, seen[i].len, "connect "))
            sc->q2_qport = q2_qport_bytes(d, seen[i].len);
        if (s2c && q2 && oob_is(d, seen[i].len, "client_connect"))
            hs[3] = true;
        /* ioquake3 71: the first client netchan datagram carries the checksum. */
        if (!s2c && !is_oob(d, seen[i].len) && hs[1] && !qw && !q2 && !looked &&
            seen[i].len >= 10) {
            uint32_t seq = le32(d) & ~FRAG_BIT, c = (uint32_t)challenge;

            sc->checksum = le32(d + 6) == (c ^ (seq * c));
            looked = true;
        }
        if ((ret = push(&b, s2c, d, seen[i].len)) < 0)
            goto out;
    }
    sc->q3 = hs[0] && hs[1] && hs[2] && hs[3];
    sc->qw = qw;
    sc->q2 = q2;
    ret = seal(&b);
out:
    free(ports);
    free(seen);
    free(bytes);
    pcap_close(p);
    if (ret < 0)
        script_finish(sc);
    return ret;
}

/* ---- the built-in shape ---- */

static int builtin_put(struct builder *b, bool s2c, uint32_t word, unsigned start, unsigned len)
{
    uint8_t d[SG_BENCH_MAX_PAYLOAD] = {0};

    d[0] = (uint8_t)word;
    d[1] = (uint8_t)(word >> 8);
    d[2] = (uint8_t)(word >> 16);
    d[3] = (uint8_t)(word >> 24);
    if (!s2c) {
        d[4] = 0x39; /* a qport */
        d[5] = 0x30;
    }
    if (word & FRAG_BIT) {
        d[4] = (uint8_t)start;
        d[5] = (uint8_t)(start >> 8);
    }
    return push(b, s2c, d, len);
}

static int builtin_script(struct sg_bench_script *sc)
{
    struct builder b = {sc, 0, 0, 0};
    uint32_t cseq = 1, sseq = 1;
    unsigned k = 0;
    int err = 0;

    memset(sc, 0, sizeof(*sc));
    snprintf(sc->name, sizeof(sc->name), "builtin");
    /* 240 client datagrams of 30..100 bytes; after every third, a server one of
     * 100..600 bytes, every 20th of them a 3217-byte message in three pieces. */
    for (unsigned i = 0; i < 240 && err == 0; i++) {
        err = builtin_put(&b, false, cseq++, 0, 30 + (i * 37) % 71);
        if (err == 0 && i % 3 == 0) {
            if (k % 20 == 10) {
                err = builtin_put(&b, true, sseq | FRAG_BIT, 0, 1308);
                if (err == 0)
                    err = builtin_put(&b, true, sseq | FRAG_BIT, 1300, 1308);
                if (err == 0)
                    err = builtin_put(&b, true, sseq | FRAG_BIT, 2600, 625);
            } else {
                err = builtin_put(&b, true, sseq, 0, 100 + (k * 173) % 500);
            }
            sseq++;
            k++;
        }
    }
    if (err == 0)
        err = seal(&b);
    if (err < 0)
        script_finish(sc);
    return err;
}

/* ---- the public part ---- */

int sg_bench_shape_load(struct sg_bench_shape *shape, const char *dir, bool builtin)
{
    char pattern[PATH_MAX];
    glob_t g = {0};
    size_t bytes[2] = {0, 0};
    int err = 0;

    memset(shape, 0, sizeof(*shape));

    /* The captures: DIR/x/capture.pcap, or DIR/x.pcap / .pcapng directly. */
    if (!builtin && dir && *dir) {
        int gerr;

        snprintf(pattern, sizeof(pattern), "%s/*/capture.pcap*", dir);
        gerr = glob(pattern, 0, NULL, &g);
        snprintf(pattern, sizeof(pattern), "%s/*.pcap*", dir);
        if (gerr == 0) {
            glob(pattern, GLOB_APPEND, NULL, &g);
        } else {
            globfree(&g);
            memset(&g, 0, sizeof(g));
            glob(pattern, 0, NULL, &g);
        }
        shape->scripts = calloc(g.gl_pathc ? g.gl_pathc : 1, sizeof(*shape->scripts));
        if (!shape->scripts) {
            err = -ENOMEM;
            goto err;
        }
        shape->q3 = g.gl_pathc > 0;
        for (size_t i = 0; i < g.gl_pathc; i++) {
            struct sg_bench_script *sc = &shape->scripts[shape->nscripts];
            const char *path = g.gl_pathv[i], *slash;
            int r = read_capture(path, sc);

            if (r == -ENOMEM) {
                err = r;
                goto err;
            }
            if (r < 0) {
                fprintf(stderr, "slipgate-bench: warning: %s: no game session to replay\n", path);
                continue;
            }
            /* Named after its folder (x/capture.pcap) or its file. */
            slash = strrchr(path, '/');
            if (slash && strncmp(slash, "/capture.pcap", 13) == 0) {
                const char *start = slash;

                while (start > path && start[-1] != '/')
                    start--;
                snprintf(sc->name, sizeof(sc->name), "%.*s", (int)(slash - start), start);
            } else {
                snprintf(sc->name, sizeof(sc->name), "%s", slash ? slash + 1 : path);
            }
            shape->q3 = shape->q3 && sc->q3;
            shape->nscripts++;
        }
        globfree(&g);
        memset(&g, 0, sizeof(g));
        shape->files = shape->nscripts;
    }

    if (shape->nscripts == 0) {
        if (!builtin)
            fprintf(stderr,
                    "slipgate-bench: warning: no readable capture under '%s'; "
                    "using the built-in Quake 3 shape\n",
                    dir ? dir : "");
        free(shape->scripts);
        shape->scripts = calloc(1, sizeof(*shape->scripts));
        if (!shape->scripts) {
            err = -ENOMEM;
            goto err;
        }
        if ((err = builtin_script(&shape->scripts[0])) < 0)
            goto err;
        shape->nscripts = 1;
        shape->files = 0;
        shape->q3 = false;
    }

    /* Totals over the scripts. */
    for (size_t i = 0; i < shape->nscripts; i++) {
        const struct sg_bench_script *sc = &shape->scripts[i];

        shape->n_c2s += sc->n_c2s;
        shape->n_s2c += sc->n_s2c;
        if (sc->n > shape->max_len)
            shape->max_len = sc->n;
        for (size_t j = 0; j < sc->n; j++)
            bytes[sc->d[j].s2c] += sc->d[j].len;
    }
    if (shape->n_c2s == 0 || shape->n_s2c == 0) {
        err = -EINVAL;
        goto err;
    }
    shape->s2c_per_c2s = (double)shape->n_s2c / (double)shape->n_c2s;
    shape->c2s_mean = (double)bytes[0] / (double)shape->n_c2s;
    shape->s2c_mean = (double)bytes[1] / (double)shape->n_s2c;
    if (shape->files) {
        size_t off = (size_t)snprintf(shape->source, sizeof(shape->source),
                                      "%zu %s sessions replayed from %s (", shape->files,
                                      shape->scripts[0].nq   ? "NetQuake"
                                      : shape->scripts[0].qw ? "QuakeWorld"
                                      : shape->scripts[0].q2 ? "Quake 2"
                                                             : "Quake 3",
                                      dir);

        for (size_t i = 0; i < shape->nscripts && off < sizeof(shape->source); i++)
            off += (size_t)snprintf(shape->source + off, sizeof(shape->source) - off, "%s%s%s",
                                    i ? ", " : "", shape->scripts[i].name,
                                    shape->scripts[i].q3 ? "" : " [no handshake]");
        if (off < sizeof(shape->source))
            snprintf(shape->source + off, sizeof(shape->source) - off, ")");
    } else {
        snprintf(shape->source, sizeof(shape->source),
                 "built-in Quake 3 shape (netchan-shaped, no handshake)");
    }
    return 0;

err:
    globfree(&g);
    sg_bench_shape_finish(shape);
    return err;
}

void sg_bench_shape_finish(struct sg_bench_shape *shape)
{
    if (!shape)
        return;
    for (size_t i = 0; shape->scripts && i < shape->nscripts; i++)
        script_finish(&shape->scripts[i]);
    free(shape->scripts);
    memset(shape, 0, sizeof(*shape));
}
