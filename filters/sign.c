/*
 * Signed recordings: keys, the .sig writer and reader (filters/sign.h;
 * the format is doc/signatures.md).
 *
 *     slipgate-sig 1
 *     key ID PUBKEY_BASE64
 *     meta NAME VALUE            (values %XX-escaped: no blanks, no controls)
 *     ...
 *     begin NONCE_HEX
 *     cp SEQ BYTES ITEMS TIME_MS FINAL HASH_HEX SIG_BASE64
 *     ...
 *
 * The header is every byte through the `begin` line; its BLAKE2b-256 hash
 * H is part of what each checkpoint signs:
 *
 *     "slipgate-sig 1 cp\n" H be64(SEQ) be64(BYTES) be64(ITEMS) be64(TIME_MS)
 *     u8(FINAL) HASH
 *
 * HASH is BLAKE2b-256 of the recording's first BYTES bytes.
 */
/* fopencookie needs _GNU_SOURCE (set by meson.build) */
#include "filters/sign.h"

#include "protocols/error.h"
#include "sg_version.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


#define HASH_BYTES    32
#define MAX_LINE      1024
#define DOMAIN        "slipgate-sig 1 cp\n"
#define SK_HEADER     "slipgate-secret-key 1\n"
#define PUB_PREFIX    "slipgate-pub 1 "
#define B64           sodium_base64_VARIANT_ORIGINAL

static int start(void)
{
    return sodium_init() < 0 ? -EIO : 0;
}

/* ---- keys ---- */

void sg_sign_key_id(const uint8_t pk[SG_SIGN_PK_BYTES], char id[SG_SIGN_ID_LEN + 1])
{
    uint8_t h[HASH_BYTES];

    crypto_generichash(h, sizeof(h), pk, SG_SIGN_PK_BYTES, NULL, 0);
    sodium_bin2hex(id, SG_SIGN_ID_LEN + 1, h, SG_SIGN_ID_LEN / 2);
}

void sg_sign_key_wipe(struct sg_sign_key *key)
{
    if (key)
        sodium_memzero(key, sizeof(*key));
}

int sg_sign_keygen(struct sg_sign_key *key)
{
    if (start() < 0)
        return -EIO;
    crypto_sign_keypair(key->pk, key->sk);
    sg_sign_key_id(key->pk, key->id);
    return 0;
}

void sg_sign_pub_line(const uint8_t pk[SG_SIGN_PK_BYTES], char *out, size_t cap)
{
    char id[SG_SIGN_ID_LEN + 1], b64[64];

    sg_sign_key_id(pk, id);
    sodium_bin2base64(b64, sizeof(b64), pk, SG_SIGN_PK_BYTES, B64);
    snprintf(out, cap, PUB_PREFIX "%s %s", id, b64);
}

/* Write all of `len` bytes to a new file at `path` with `mode`; 0 or -errno. */
static int write_new(const char *path, const char *text, mode_t mode)
{
    size_t len = strlen(text);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    int err = 0;

    if (fd < 0)
        return -errno;
    if (fchmod(fd, mode) != 0 || write(fd, text, len) != (ssize_t)len)
        err = errno ? -errno : -EIO;
    if (close(fd) != 0 && err == 0)
        err = -errno;
    if (err < 0)
        unlink(path);
    return err;
}

int sg_sign_key_save(const struct sg_sign_key *key, const char *prefix, char *why, size_t whylen)
{
    char text[256], b64[128], pub[PATH_MAX];
    int err;

    if (snprintf(pub, sizeof(pub), "%s.pub", prefix) >= (int)sizeof(pub)) {
        snprintf(why, whylen, "%s: name too long", prefix);
        return -ENAMETOOLONG;
    }
    sodium_bin2base64(b64, sizeof(b64), key->sk, SG_SIGN_SK_BYTES, B64);
    snprintf(text, sizeof(text), SK_HEADER "%s\n", b64);
    err = write_new(prefix, text, 0600);
    sodium_memzero(text, sizeof(text));
    sodium_memzero(b64, sizeof(b64));
    if (err < 0) {
        snprintf(why, whylen, "cannot create %s: %s", prefix, strerror(-err));
        return err;
    }
    sg_sign_pub_line(key->pk, text, sizeof(text));
    strcat(text, "\n");
    err = write_new(pub, text, 0644);
    if (err < 0) {
        snprintf(why, whylen, "cannot create %s: %s", pub, strerror(-err));
        unlink(prefix);
        return err;
    }
    return 0;
}

/* Read a small file (at most `cap` - 1 bytes) into buf, NUL-terminated; optionally its stat. */
static int read_small(const char *path, char *buf, size_t cap, struct stat *st)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;
    struct stat tmp;

    if (fd < 0)
        return -errno;
    if (fstat(fd, st ? st : &tmp) != 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    n = read(fd, buf, cap - 1);
    close(fd);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    return (int)n;
}

/* The base64 secret key after SK_HEADER in `text`; 0 or -EINVAL. */
static int parse_secret(const char *text, uint8_t sk[SG_SIGN_SK_BYTES])
{
    size_t n = 0;
    const char *b = text + strlen(SK_HEADER), *end;

    if (strncmp(text, SK_HEADER, strlen(SK_HEADER)) != 0)
        return -EINVAL;
    if (sodium_base642bin(sk, SG_SIGN_SK_BYTES, b, strlen(b), "\r\n", &n, &end, B64) != 0 ||
        n != SG_SIGN_SK_BYTES || *end != '\0')
        return -EINVAL;
    return 0;
}

int sg_sign_key_load(const char *path, struct sg_sign_key *key, char *why, size_t whylen)
{
    char text[512];
    struct stat st;
    uint8_t pk[SG_SIGN_PK_BYTES];
    int n;

    if (start() < 0) {
        snprintf(why, whylen, "libsodium failed to start");
        return -EIO;
    }
    n = read_small(path, text, sizeof(text), &st);
    if (n < 0) {
        snprintf(why, whylen, "sign_key %s: %s", path, strerror(-n));
        return n;
    }
    if (st.st_mode & 077) {
        sodium_memzero(text, sizeof(text));
        snprintf(why, whylen,
                 "sign_key %s is readable or writable by group or others (mode %04o); "
                 "chmod 600 it",
                 path, (unsigned)(st.st_mode & 07777));
        return SG_E_CONFIG;
    }
    n = parse_secret(text, key->sk);
    sodium_memzero(text, sizeof(text));
    if (n < 0) {
        snprintf(why, whylen, "sign_key %s is not a slipgate secret key (make one with "
                 "`slipgate keygen`)", path);
        return SG_E_CONFIG;
    }
    /* The public half is the key's second 32 bytes; check it belongs. */
    crypto_sign_ed25519_sk_to_pk(pk, key->sk);
    memcpy(key->pk, pk, sizeof(pk));
    sg_sign_key_id(key->pk, key->id);
    return 0;
}

int sg_sign_pub_parse(const char *text, uint8_t pk[SG_SIGN_PK_BYTES])
{
    char buf[160], *p, *e;
    size_t n = 0, len;
    const char *end;

    if (strlen(text) >= sizeof(buf))
        return -EINVAL;
    strcpy(buf, text);
    for (e = buf + strlen(buf); e > buf && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ');)
        *--e = '\0';
    p = buf;
    if (strncmp(p, PUB_PREFIX, strlen(PUB_PREFIX)) == 0) {
        p += strlen(PUB_PREFIX);
        if (!(p = strchr(p, ' ')))
            return -EINVAL;
        p++;
    }
    len = strlen(p);
    if (len == 2 * SG_SIGN_PK_BYTES &&
        sodium_hex2bin(pk, SG_SIGN_PK_BYTES, p, len, NULL, &n, &end) == 0 &&
        n == SG_SIGN_PK_BYTES && *end == '\0')
        return 0;
    if (sodium_base642bin(pk, SG_SIGN_PK_BYTES, p, len, NULL, &n, &end, B64) == 0 &&
        n == SG_SIGN_PK_BYTES && *end == '\0')
        return 0;
    return -EINVAL;
}

int sg_sign_pub_load(const char *path, uint8_t pk[SG_SIGN_PK_BYTES], char *why, size_t whylen)
{
    char text[512];
    uint8_t sk[SG_SIGN_SK_BYTES];
    int n;

    if (start() < 0) {
        snprintf(why, whylen, "libsodium failed to start");
        return -EIO;
    }
    n = read_small(path, text, sizeof(text), NULL);
    if (n < 0) {
        snprintf(why, whylen, "%s: %s", path, strerror(-n));
        return n;
    }
    if (parse_secret(text, sk) == 0) {
        crypto_sign_ed25519_sk_to_pk(pk, sk);
        sodium_memzero(sk, sizeof(sk));
        sodium_memzero(text, sizeof(text));
        return 0;
    }
    if (sg_sign_pub_parse(text, pk) == 0)
        return 0;
    snprintf(why, whylen, "%s: not a slipgate public key (a .pub file from `slipgate keygen`)",
             path);
    return -EINVAL;
}

/* ---- the signed message of a checkpoint ---- */

struct checkpoint {
    uint64_t seq, bytes, items, time_ms;
    uint8_t final;
    uint8_t hash[HASH_BYTES];
    uint8_t sig[crypto_sign_BYTES];
};

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

/* The bytes a checkpoint signs; returns their length. */
static size_t cp_message(const uint8_t header_hash[HASH_BYTES], const struct checkpoint *cp,
                         uint8_t *m)
{
    size_t o = strlen(DOMAIN);

    memcpy(m, DOMAIN, o);
    memcpy(m + o, header_hash, HASH_BYTES);
    o += HASH_BYTES;
    put64(m + o, cp->seq);
    put64(m + o + 8, cp->bytes);
    put64(m + o + 16, cp->items);
    put64(m + o + 24, cp->time_ms);
    o += 32;
    m[o++] = cp->final;
    memcpy(m + o, cp->hash, HASH_BYTES);
    return o + HASH_BYTES;
}

#define CP_MESSAGE_MAX (sizeof(DOMAIN) + 2 * HASH_BYTES + 33)

/* ---- the writer ---- */

struct sg_sign_writer {
    const struct sg_sign_key *key;
    int fd;     /* the recording's */
    int sigfd;  /* the .sig's */
    char sigpath[PATH_MAX];
    crypto_generichash_state hs; /* the recording so far */
    uint64_t bytes;              /* written to fd */
    crypto_generichash_state mark_hs; /* hs and bytes at the last whole item */
    uint64_t mark_bytes;
    uint64_t seq;
    uint64_t last_ms;   /* monotonic time of the last checkpoint (or the start) */
    bool started;       /* last_ms is set */
    int64_t interval_ms;
    uint8_t header_hash[HASH_BYTES];
    bool failed, finished;
};

/* The stream's write: to the descriptor, then into the hash (what went out only). */
static ssize_t cookie_write(void *c, const char *buf, size_t size)
{
    struct sg_sign_writer *w = c;
    size_t done = 0;

    while (done < size) {
        ssize_t n = write(w->fd, buf + done, size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        crypto_generichash_update(&w->hs, (const uint8_t *)buf + done, (size_t)n);
        w->bytes += (uint64_t)n;
        done += (size_t)n;
    }
    return done ? (ssize_t)done : -1;
}

/* ftell through the stream: only the current position is known. */
static int cookie_seek(void *c, off64_t *pos, int whence)
{
    struct sg_sign_writer *w = c;

    if (whence == SEEK_CUR && *pos == 0) {
        *pos = (off64_t)w->bytes;
        return 0;
    }
    errno = ESPIPE;
    return -1;
}

static int cookie_close(void *c)
{
    struct sg_sign_writer *w = c;
    int rc = close(w->fd);

    w->fd = -1;
    return rc;
}

/* Append "meta NAME VALUE\n" with the value %XX-escaped. */
static void meta_line(char *out, size_t cap, size_t *o, const char *name, const char *value)
{
    int n;

    if (!value || *o >= cap)
        return;
    n = snprintf(out + *o, cap - *o, "meta %s ", name);
    if (n < 0 || (size_t)n >= cap - *o) {
        *o = cap;
        return;
    }
    *o += (size_t)n;
    for (const unsigned char *p = (const unsigned char *)value; *p && *o + 4 < cap; p++) {
        if (*p <= ' ' || *p >= 0x7f || *p == '%')
            *o += (size_t)snprintf(out + *o, cap - *o, "%%%02X", *p);
        else
            out[(*o)++] = (char)*p;
    }
    if (*o + 1 < cap)
        out[(*o)++] = '\n';
    else
        *o = cap;
}

static int write_all(int fd, const char *text, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, text, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        text += n;
        len -= (size_t)n;
    }
    return 0;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int sg_sign_writer_create(struct sg_sign_writer **out, const struct sg_sign_key *key,
                          const char *path, int fd, const struct sg_sign_meta *meta,
                          int64_t interval_ms, FILE **fp)
{
    static const cookie_io_functions_t io = {
        .write = cookie_write, .seek = cookie_seek, .close = cookie_close};
    struct sg_sign_writer *w;
    char head[2048], b64[64], nonce_hex[33], start_s[40];
    uint8_t nonce[16];
    const char *base = strrchr(path, '/');
    size_t o = 0;
    time_t t;
    struct tm tm;
    int err;

    *out = NULL;
    *fp = NULL;
    if (start() < 0 || !(w = calloc(1, sizeof(*w)))) {
        close(fd);
        return -ENOMEM;
    }
    w->key = key;
    w->fd = fd;
    w->sigfd = -1;
    w->interval_ms = interval_ms > 0 ? interval_ms : SG_SIGN_DEFAULT_INTERVAL_MS;
    crypto_generichash_init(&w->hs, NULL, 0, HASH_BYTES);
    w->mark_hs = w->hs;
    if (snprintf(w->sigpath, sizeof(w->sigpath), "%s.sig", path) >= (int)sizeof(w->sigpath)) {
        err = -ENAMETOOLONG;
        goto err_free;
    }

    /* The header. */
    sodium_bin2base64(b64, sizeof(b64), key->pk, SG_SIGN_PK_BYTES, B64);
    randombytes_buf(nonce, sizeof(nonce));
    sodium_bin2hex(nonce_hex, sizeof(nonce_hex), nonce, sizeof(nonce));
    t = (time_t)(meta->start_ms / 1000);
    gmtime_r(&t, &tm);
    strftime(start_s, sizeof(start_s), "%Y-%m-%dT%H:%M:%SZ", &tm);
    o = (size_t)snprintf(head, sizeof(head), "slipgate-sig %d\nkey %s %s\n", SG_SIGN_VERSION,
                         key->id, b64);
    meta_line(head, sizeof(head), &o, "slipgate", SG_VERSION);
    meta_line(head, sizeof(head), &o, "kind", meta->kind);
    meta_line(head, sizeof(head), &o, "file", base ? base + 1 : path);
    meta_line(head, sizeof(head), &o, "route", meta->route);
    meta_line(head, sizeof(head), &o, "server", meta->server);
    meta_line(head, sizeof(head), &o, "client", meta->client);
    meta_line(head, sizeof(head), &o, "protocol", meta->protocol);
    meta_line(head, sizeof(head), &o, "map", meta->map);
    snprintf(b64, sizeof(b64), "%" PRIu64, meta->start_ms);
    meta_line(head, sizeof(head), &o, "start_ms", b64);
    meta_line(head, sizeof(head), &o, "start", start_s);
    if (o < sizeof(head))
        o += (size_t)snprintf(head + o, sizeof(head) - o, "begin %s\n", nonce_hex);
    if (o >= sizeof(head)) {
        err = -ENAMETOOLONG;
        goto err_free;
    }
    crypto_generichash(w->header_hash, HASH_BYTES, (const uint8_t *)head, o, NULL, 0);

    /* The .sig, then the stream. */
    w->sigfd = open(w->sigpath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (w->sigfd < 0) {
        err = -errno;
        goto err_free;
    }
    if ((err = write_all(w->sigfd, head, o)) < 0)
        goto err_sig;
    *fp = fopencookie(w, "wb", io);
    if (!*fp) {
        err = -ENOMEM;
        goto err_sig;
    }
    *out = w;
    return 0;

err_sig:
    close(w->sigfd);
    unlink(w->sigpath);
err_free:
    close(fd);
    free(w);
    return err;
}

/* Sign and append checkpoint `seq` over the bytes written so far. */
static int checkpoint(struct sg_sign_writer *w, uint64_t items, bool final)
{
    crypto_generichash_state copy = w->hs;
    struct checkpoint cp = {.seq = w->seq, .bytes = w->bytes, .items = items,
                            .time_ms = wall_ms(), .final = final};
    uint8_t m[CP_MESSAGE_MAX];
    char line[MAX_LINE], hash_hex[2 * HASH_BYTES + 1], sig_b64[128];
    size_t mlen;
    int n, err;

    if (w->failed || w->finished)
        return w->failed ? -EIO : 0;
    crypto_generichash_final(&copy, cp.hash, HASH_BYTES);
    mlen = cp_message(w->header_hash, &cp, m);
    crypto_sign_detached(cp.sig, NULL, m, mlen, w->key->sk);
    sodium_bin2hex(hash_hex, sizeof(hash_hex), cp.hash, HASH_BYTES);
    sodium_bin2base64(sig_b64, sizeof(sig_b64), cp.sig, sizeof(cp.sig), B64);
    n = snprintf(line, sizeof(line), "cp %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %d %s %s\n",
                 cp.seq, cp.bytes, cp.items, cp.time_ms, final ? 1 : 0, hash_hex, sig_b64);
    if ((err = write_all(w->sigfd, line, (size_t)n)) < 0) {
        w->failed = true;
        return err;
    }
    w->seq++;
    w->finished = final;
    return 1;
}

int sg_sign_writer_tick(struct sg_sign_writer *w, uint64_t now_ms, uint64_t items)
{
    if (!w->started) {
        w->started = true;
        w->last_ms = now_ms;
        return 0;
    }
    if (now_ms - w->last_ms < (uint64_t)w->interval_ms)
        return 0;
    w->last_ms = now_ms;
    return checkpoint(w, items, false);
}

void sg_sign_writer_mark(struct sg_sign_writer *w)
{
    w->mark_hs = w->hs;
    w->mark_bytes = w->bytes;
}

int sg_sign_writer_cut(struct sg_sign_writer *w)
{
    if (w->fd < 0)
        return -EBADF;
    if (ftruncate(w->fd, (off_t)w->mark_bytes) != 0 ||
        lseek(w->fd, (off_t)w->mark_bytes, SEEK_SET) < 0)
        return -errno;
    w->hs = w->mark_hs;
    w->bytes = w->mark_bytes;
    return 0;
}

int sg_sign_writer_finish(struct sg_sign_writer *w, uint64_t items)
{
    int rc = checkpoint(w, items, true);

    return rc < 0 ? rc : 0;
}

void sg_sign_writer_destroy(struct sg_sign_writer *w, bool remove_sig)
{
    if (!w)
        return;
    if (w->sigfd >= 0)
        close(w->sigfd);
    if (remove_sig)
        unlink(w->sigpath);
    if (w->fd >= 0)
        close(w->fd);
    sodium_memzero(&w->hs, sizeof(w->hs));
    sodium_memzero(&w->mark_hs, sizeof(w->mark_hs));
    free(w);
}

/* ---- the reader ---- */

const char *sg_sign_verdict_name(enum sg_sign_verdict v)
{
    static const char *const names[] = {"whole", "partial", "modified", "other_key", "none"};

    return (unsigned)v < sizeof(names) / sizeof(names[0]) ? names[v] : "none";
}

/* The next line of `sig` from *pos: its length without '\n'; -1 at the end, -2 if unterminated. */
static long next_line(const uint8_t *sig, size_t len, size_t *pos, const char **line)
{
    const uint8_t *nl;

    if (*pos >= len)
        return -1;
    *line = (const char *)sig + *pos;
    nl = memchr(sig + *pos, '\n', len - *pos);
    if (!nl)
        return -2;
    long n = (long)(nl - (sig + *pos));
    *pos += (size_t)n + 1;
    return n;
}

/* Copy a line (n bytes) NUL-terminated into buf; false if too long or holding a NUL. */
static bool take(const char *line, long n, char *buf, size_t cap)
{
    if (n < 0 || (size_t)n >= cap || memchr(line, '\0', (size_t)n))
        return false;
    memcpy(buf, line, (size_t)n);
    buf[n] = '\0';
    return true;
}

/* Decode a %XX-escaped meta value into out (clipped). */
static void unescape(const char *v, char *out, size_t cap)
{
    size_t o = 0;

    for (; *v && o + 1 < cap; v++) {
        unsigned x;
        if (*v == '%' && sscanf(v + 1, "%2x", &x) == 1 && v[1] && v[2]) {
            out[o++] = (x >= 0x20 && x < 0x7f) ? (char)x : '?';
            v += 2;
        } else {
            out[o++] = *v;
        }
    }
    out[o] = '\0';
}

static bool parse_u64(const char *s, uint64_t *v)
{
    char *end;

    if (*s < '0' || *s > '9')
        return false;
    errno = 0;
    *v = strtoull(s, &end, 10);
    return errno == 0 && *end == '\0';
}

/* "cp SEQ BYTES ITEMS TIME FINAL HASH SIG" into cp; false if malformed. */
static bool parse_cp(char *line, struct checkpoint *cp)
{
    char *f[8], *save = NULL;
    size_t n = 0;
    const char *end;
    uint64_t final;
    int k = 0;

    for (char *t = strtok_r(line, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        if (k == 8)
            return false;
        f[k++] = t;
    }
    if (k != 8 || strcmp(f[0], "cp") != 0 || !parse_u64(f[1], &cp->seq) ||
        !parse_u64(f[2], &cp->bytes) || !parse_u64(f[3], &cp->items) ||
        !parse_u64(f[4], &cp->time_ms) || !parse_u64(f[5], &final) || final > 1)
        return false;
    cp->final = (uint8_t)final;
    if (strlen(f[6]) != 2 * HASH_BYTES ||
        sodium_hex2bin(cp->hash, HASH_BYTES, f[6], strlen(f[6]), NULL, &n, &end) != 0 ||
        n != HASH_BYTES || *end)
        return false;
    if (sodium_base642bin(cp->sig, sizeof(cp->sig), f[7], strlen(f[7]), NULL, &n, &end, B64) != 0 ||
        n != sizeof(cp->sig) || *end)
        return false;
    return true;
}

/* The header: version, key, meta lines, begin.  Returns false (reason set) when unreadable. */
static bool read_header(const uint8_t *sig, size_t siglen, size_t *pos, uint8_t pk[SG_SIGN_PK_BYTES],
                        uint8_t header_hash[HASH_BYTES], struct sg_sign_result *res)
{
    char buf[MAX_LINE], id[SG_SIGN_ID_LEN + 1];
    const char *line;
    long n;
    size_t got = 0;
    const char *end;

    n = next_line(sig, siglen, pos, &line);
    if (n < 0 || !take(line, n, buf, sizeof(buf)) || strncmp(buf, "slipgate-sig ", 13) != 0) {
        snprintf(res->reason, sizeof(res->reason), "the .sig is not a slipgate signature file");
        res->verdict = SG_SIGN_NONE;
        return false;
    }
    if (strcmp(buf + 13, "1") != 0) {
        snprintf(res->reason, sizeof(res->reason), "the .sig has format version %.20s; this "
                 "slipgate reads version %d", buf + 13, SG_SIGN_VERSION);
        res->verdict = SG_SIGN_NONE;
        return false;
    }
    res->verdict = SG_SIGN_MODIFIED;
    res->bytes = 0;
    n = next_line(sig, siglen, pos, &line);
    if (n < 0 || !take(line, n, buf, sizeof(buf)) || strncmp(buf, "key ", 4) != 0 ||
        strlen(buf) < 4 + SG_SIGN_ID_LEN + 1 || buf[4 + SG_SIGN_ID_LEN] != ' ' ||
        sodium_base642bin(pk, SG_SIGN_PK_BYTES, buf + 5 + SG_SIGN_ID_LEN,
                          strlen(buf + 5 + SG_SIGN_ID_LEN), NULL, &got, &end, B64) != 0 ||
        got != SG_SIGN_PK_BYTES || *end) {
        snprintf(res->reason, sizeof(res->reason), "the .sig's key line is damaged");
        return false;
    }
    sg_sign_key_id(pk, id);
    if (memcmp(buf + 4, id, SG_SIGN_ID_LEN) != 0) {
        snprintf(res->reason, sizeof(res->reason), "the .sig's key line is damaged (its id does "
                 "not match its key)");
        return false;
    }
    memcpy(res->key_id, id, sizeof(id));
    for (;;) {
        n = next_line(sig, siglen, pos, &line);
        if (n < 0 || !take(line, n, buf, sizeof(buf))) {
            snprintf(res->reason, sizeof(res->reason), "the .sig's header is %s",
                     n == -1 || n == -2 ? "cut short" : "damaged");
            return false;
        }
        if (strncmp(buf, "begin ", 6) == 0)
            break;
        char *name = buf + 5, *value = NULL;
        if (strncmp(buf, "meta ", 5) == 0)
            value = strchr(name, ' ');
        if (!value || strchr(value + 1, ' ')) {
            snprintf(res->reason, sizeof(res->reason), "the .sig's header is damaged");
            return false;
        }
        *value++ = '\0';
        if (strcmp(name, "file") == 0)
            unescape(value, res->file, sizeof(res->file));
        else if (strcmp(name, "map") == 0)
            unescape(value, res->map, sizeof(res->map));
        else if (strcmp(name, "route") == 0)
            unescape(value, res->route, sizeof(res->route));
        else if (strcmp(name, "client") == 0)
            unescape(value, res->client, sizeof(res->client));
        else if (strcmp(name, "kind") == 0)
            unescape(value, res->kind, sizeof(res->kind));
        else if (strcmp(name, "start_ms") == 0 && !parse_u64(value, &res->start_ms))
            res->start_ms = 0;
    }
    crypto_generichash(header_hash, HASH_BYTES, sig, *pos, NULL, 0);
    return true;
}

void sg_sign_verify_mem(const uint8_t *sig, size_t siglen, const uint8_t *data, size_t len,
                        const uint8_t *trusted, struct sg_sign_result *res)
{
    uint8_t pk[SG_SIGN_PK_BYTES], header_hash[HASH_BYTES], m[CP_MESSAGE_MAX], h[HASH_BYTES];
    char buf[MAX_LINE];
    crypto_generichash_state hs;
    struct checkpoint cp, last = {0};
    uint64_t hashed = 0;
    size_t pos = 0;
    bool have_last = false;

    memset(res, 0, sizeof(*res));
    res->file_bytes = len;
    res->verdict = SG_SIGN_NONE;
    if (!sig) {
        snprintf(res->reason, sizeof(res->reason), "there is no .sig beside the file");
        return;
    }
    if (start() < 0) {
        snprintf(res->reason, sizeof(res->reason), "libsodium failed to start");
        return;
    }
    if (!read_header(sig, siglen, &pos, pk, header_hash, res))
        return;
    if (trusted && memcmp(trusted, pk, SG_SIGN_PK_BYTES) != 0) {
        res->verdict = SG_SIGN_OTHER_KEY;
        snprintf(res->reason, sizeof(res->reason), "not the key given");
        return;
    }
    crypto_generichash_init(&hs, NULL, 0, HASH_BYTES);

    /* Each whole checkpoint line, in order. */
    for (;;) {
        const char *line;
        long n = next_line(sig, siglen, &pos, &line);

        if (n == -1)
            break;
        if (n == -2) {
            res->sig_truncated = true; /* cut in the middle of a line: kill -9, a full disk */
            break;
        }
        res->verdict = SG_SIGN_MODIFIED;
        res->bytes = have_last ? last.bytes : 0;
        if (have_last && last.final) {
            snprintf(res->reason, sizeof(res->reason), "the .sig goes on after its final "
                     "checkpoint");
            return;
        }
        if (!take(line, n, buf, sizeof(buf)) || !parse_cp(buf, &cp)) {
            snprintf(res->reason, sizeof(res->reason), "checkpoint %u of the .sig is damaged",
                     res->checkpoints);
            return;
        }
        if (crypto_sign_verify_detached(cp.sig, m, cp_message(header_hash, &cp, m), pk) != 0) {
            snprintf(res->reason, sizeof(res->reason), "%s does not match its signature",
                     res->checkpoints == 0 ? "the .sig's metadata or first checkpoint"
                                           : "a checkpoint of the .sig");
            return;
        }
        if (cp.seq != res->checkpoints || (have_last && cp.bytes < last.bytes)) {
            snprintf(res->reason, sizeof(res->reason), "the .sig's checkpoints are out of order");
            return;
        }
        if (cp.bytes > len) {
            res->bytes = len;
            snprintf(res->reason, sizeof(res->reason), "the file ends at byte %zu, but %" PRIu64
                     " bytes were signed", len, cp.bytes);
            return;
        }
        crypto_generichash_update(&hs, data + hashed, (size_t)(cp.bytes - hashed));
        hashed = cp.bytes;
        crypto_generichash_state copy = hs;
        crypto_generichash_final(&copy, h, HASH_BYTES);
        if (sodium_memcmp(h, cp.hash, HASH_BYTES) != 0) {
            if (res->checkpoints == 0 && res->file[0])
                snprintf(res->reason, sizeof(res->reason), "its hash differs from the one "
                         "signed for %.100s", res->file);
            else
                snprintf(res->reason, sizeof(res->reason), "its hash differs from the one signed");
            return;
        }
        last = cp;
        have_last = true;
        res->checkpoints++;
    }

    /* What the checkpoints cover. */
    if (!have_last) {
        res->verdict = SG_SIGN_NONE;
        res->bytes = 0;
        snprintf(res->reason, sizeof(res->reason), "the .sig has no checkpoint yet (the recording "
                 "was cut before its first one)");
        return;
    }
    res->bytes = last.bytes;
    res->items = last.items;
    res->reason[0] = '\0';
    if (last.final && len == last.bytes) {
        res->verdict = SG_SIGN_WHOLE;
    } else if (last.final) {
        res->verdict = SG_SIGN_MODIFIED;
        snprintf(res->reason, sizeof(res->reason), "%zu bytes follow the signed end",
                 len - (size_t)last.bytes);
    } else {
        res->verdict = SG_SIGN_PARTIAL;
        res->cut_ms = last.time_ms;
    }
}

void sg_sign_result_line(const struct sg_sign_result *res, char *out, size_t cap)
{
    char when[40] = "?";

    switch (res->verdict) {
    case SG_SIGN_WHOLE:
        snprintf(out, cap, "authentic, whole (%" PRIu64 " bytes, %" PRIu64 " messages, key %s)",
                 res->bytes, res->items, res->key_id);
        break;
    case SG_SIGN_PARTIAL: {
        time_t t = (time_t)(res->cut_ms / 1000);
        struct tm tm;
        if (gmtime_r(&t, &tm))
            strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
        snprintf(out, cap,
                 "authentic up to byte %" PRIu64 " / message %" PRIu64 " (recording cut at %s; "
                 "%" PRIu64 " of %" PRIu64 " bytes signed, key %s)",
                 res->bytes, res->items, when, res->bytes, res->file_bytes, res->key_id);
        break;
    }
    case SG_SIGN_MODIFIED:
        snprintf(out, cap, "modified at or after byte %" PRIu64 " (%s)", res->bytes, res->reason);
        break;
    case SG_SIGN_OTHER_KEY:
        snprintf(out, cap, "signed by another key (id %s)", res->key_id);
        break;
    default:
        snprintf(out, cap, "no signature (%s)", res->reason);
        break;
    }
}
