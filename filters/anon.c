/*
 * Client pseudonyms (filters/anon.h): the key file and the keyed hashes.
 *
 * Key file:  "slipgate-anonymize-key 1\n" BASE64(32 random bytes) "\n"
 *
 * Hash inputs (BLAKE2b, keyed with the 32 bytes), domain-separated:
 *     name, address:  "slipgate-anon 1 ip" u8(4|6) ADDR(4|16)     -> 16 bytes
 *     port:           "slipgate-anon 1 port" u8(4|6) ADDR be16(PORT) -> 16 bytes
 * The name is "anon-" and the hex of the address hash's first 4 bytes; the
 * pseudonymous IPv4 address 198.18.0.0/15 plus the hash's bytes 4-6 (17
 * bits), IPv6 2001:db8::/32 plus its bytes 4-15.
 */
#include "filters/anon.h"

#include "protocols/error.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEY_HEADER "slipgate-anonymize-key 1\n"
#define B64        sodium_base64_VARIANT_ORIGINAL
#define HASH_BYTES 16

char *sg_anon_default_path(char *buf, size_t cap)
{
    const char *d;
    int n;

    if ((d = getenv("STATE_DIRECTORY")) && *d) {
        /* systemd may list several, separated by ':': the first. */
        size_t len = strcspn(d, ":");
        n = snprintf(buf, cap, "%.*s/anonymize.key", (int)len, d);
    } else if ((d = getenv("XDG_STATE_HOME")) && *d == '/') {
        n = snprintf(buf, cap, "%s/slipgate/anonymize.key", d);
    } else if ((d = getenv("HOME")) && *d) {
        n = snprintf(buf, cap, "%s/.local/state/slipgate/anonymize.key", d);
    } else {
        return NULL;
    }
    return n > 0 && (size_t)n < cap ? buf : NULL;
}

/* mkdir -p of the directories above `path` (mode 0700 for those it makes). */
static int make_parents(const char *path)
{
    char dir[PATH_MAX];
    size_t len = strlen(path);

    if (len >= sizeof(dir))
        return -ENAMETOOLONG;
    memcpy(dir, path, len + 1);
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    return 0;
}

/* A new key file at `path`: 0, -EEXIST (someone made it meanwhile), or -errno. */
static int create_key(const char *path)
{
    uint8_t k[SG_ANON_KEY_BYTES];
    char text[128], b64[64];
    size_t len;
    int fd, err = 0;

    if ((err = make_parents(path)) < 0)
        return err;
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    randombytes_buf(k, sizeof(k));
    sodium_bin2base64(b64, sizeof(b64), k, sizeof(k), B64);
    snprintf(text, sizeof(text), KEY_HEADER "%s\n", b64);
    len = strlen(text);
    if (fchmod(fd, 0600) != 0 || write(fd, text, len) != (ssize_t)len)
        err = errno ? -errno : -EIO;
    if (close(fd) != 0 && err == 0)
        err = -errno;
    if (err < 0)
        unlink(path);
    sodium_memzero(k, sizeof(k));
    sodium_memzero(text, sizeof(text));
    sodium_memzero(b64, sizeof(b64));
    return err;
}

int sg_anon_key_load(const char *path, struct sg_anon_key *key, bool *created, char *why,
                     size_t whylen)
{
    char text[256];
    const char *b, *end;
    struct stat st;
    size_t n = 0;
    ssize_t got;
    int fd, err;

    memset(key, 0, sizeof(*key));
    if (created)
        *created = false;
    if (sodium_init() < 0) {
        snprintf(why, whylen, "libsodium failed to start");
        return -EIO;
    }

    /* Made on first use. */
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        err = create_key(path);
        if (err < 0 && err != -EEXIST) {
            snprintf(why, whylen, "anonymize_key %s: cannot create it: %s", path, strerror(-err));
            return err;
        }
        if (err == 0 && created)
            *created = true;
        fd = open(path, O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0) {
        err = -errno;
        snprintf(why, whylen, "anonymize_key %s: %s", path, strerror(-err));
        return err;
    }
    if (fstat(fd, &st) != 0) {
        err = -errno;
        close(fd);
        snprintf(why, whylen, "anonymize_key %s: %s", path, strerror(-err));
        return err;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(why, whylen, "anonymize_key %s is not a regular file", path);
        return SG_E_CONFIG;
    }
    if (st.st_mode & 077) {
        close(fd);
        snprintf(why, whylen,
                 "anonymize_key %s is readable or writable by group or others (mode %04o); "
                 "chmod 600 it",
                 path, (unsigned)(st.st_mode & 07777));
        return SG_E_CONFIG;
    }
    got = read(fd, text, sizeof(text) - 1);
    err = got < 0 ? -errno : 0;
    close(fd);
    if (err < 0) {
        snprintf(why, whylen, "anonymize_key %s: %s", path, strerror(-err));
        return err;
    }
    text[got] = '\0';

    /* The header, then the base64 key and its newline. */
    b = text + strlen(KEY_HEADER);
    if (strncmp(text, KEY_HEADER, strlen(KEY_HEADER)) != 0 ||
        sodium_base642bin(key->k, sizeof(key->k), b, strlen(b), "\r\n", &n, &end, B64) != 0 ||
        n != sizeof(key->k) || *end != '\0') {
        sodium_memzero(text, sizeof(text));
        sg_anon_key_wipe(key);
        snprintf(why, whylen,
                 "anonymize_key %s is not a slipgate anonymize key (remove it, or name a file that "
                 "does not exist yet: slipgate makes one)",
                 path);
        return SG_E_CONFIG;
    }
    sodium_memzero(text, sizeof(text));
    return 0;
}

void sg_anon_key_wipe(struct sg_anon_key *key)
{
    if (key)
        sodium_memzero(key, sizeof(*key));
}

/*
 * The host part of `sa`: 4 bytes for IPv4 and IPv4-mapped IPv6, 16 for
 * IPv6; its port in *port (host order); *mapped for a mapped address.
 * Returns the length, 0 for another family.
 */
static size_t host_of(const struct sockaddr *sa, uint8_t addr[16], int *port, bool *mapped)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    *mapped = false;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        memcpy(addr, &in->sin_addr, 4);
        *port = ntohs(in->sin_port);
        return 4;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        *port = ntohs(in6->sin6_port);
        if (memcmp(in6->sin6_addr.s6_addr, prefix, 12) == 0) {
            memcpy(addr, in6->sin6_addr.s6_addr + 12, 4);
            *mapped = true;
            return 4;
        }
        memcpy(addr, in6->sin6_addr.s6_addr, 16);
        return 16;
    }
    return 0;
}

/* BLAKE2b keyed with `key` over domain, family byte, address and (port >= 0) the port. */
static void keyed(const struct sg_anon_key *key, const char *domain, const uint8_t *addr,
                  size_t alen, int port, uint8_t out[HASH_BYTES])
{
    crypto_generichash_state st;
    uint8_t fam = alen == 4 ? 4 : 6, p[2];

    crypto_generichash_init(&st, key->k, sizeof(key->k), HASH_BYTES);
    crypto_generichash_update(&st, (const uint8_t *)domain, strlen(domain));
    crypto_generichash_update(&st, &fam, 1);
    crypto_generichash_update(&st, addr, alen);
    if (port >= 0) {
        p[0] = (uint8_t)(port >> 8);
        p[1] = (uint8_t)port;
        crypto_generichash_update(&st, p, 2);
    }
    crypto_generichash_final(&st, out, HASH_BYTES);
}

char *sg_anon_name(const struct sg_anon_key *key, const struct sockaddr *sa, char *out, size_t cap)
{
    uint8_t addr[16], h[HASH_BYTES];
    char hex[9];
    bool mapped;
    int port;
    size_t alen = sa ? host_of(sa, addr, &port, &mapped) : 0;

    if (!alen) {
        snprintf(out, cap, "anon-unknown");
        return out;
    }
    keyed(key, "slipgate-anon 1 ip", addr, alen, -1, h);
    sodium_bin2hex(hex, sizeof(hex), h, 4);
    snprintf(out, cap, "anon-%s", hex);
    return out;
}

int sg_anon_addr(const struct sg_anon_key *key, const struct sockaddr *sa,
                 struct sockaddr_storage *out)
{
    uint8_t addr[16], h[HASH_BYTES], hp[HASH_BYTES], v4[4];
    bool mapped;
    int port, pport;
    size_t alen = host_of(sa, addr, &port, &mapped);

    memset(out, 0, sizeof(*out));
    if (!alen)
        return -EAFNOSUPPORT;
    keyed(key, "slipgate-anon 1 ip", addr, alen, -1, h);
    keyed(key, "slipgate-anon 1 port", addr, alen, port, hp);
    pport = 1024 + (int)(((unsigned)hp[0] << 8 | hp[1]) % (65536 - 1024));

    /* 198.18.0.0/15: 17 bits of the hash. */
    v4[0] = 198;
    v4[1] = (uint8_t)(18 | (h[4] & 1));
    v4[2] = h[5];
    v4[3] = h[6];
    if (alen == 4 && !mapped) {
        struct sockaddr_in *in = (struct sockaddr_in *)out;
        in->sin_family = AF_INET;
        memcpy(&in->sin_addr, v4, 4);
        in->sin_port = htons((uint16_t)pport);
        return 0;
    }
    {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)out;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)pport);
        if (mapped) {
            in6->sin6_addr.s6_addr[10] = 0xff;
            in6->sin6_addr.s6_addr[11] = 0xff;
            memcpy(in6->sin6_addr.s6_addr + 12, v4, 4);
        } else {
            /* 2001:db8::/32 and 96 bits of the hash. */
            in6->sin6_addr.s6_addr[0] = 0x20;
            in6->sin6_addr.s6_addr[1] = 0x01;
            in6->sin6_addr.s6_addr[2] = 0x0d;
            in6->sin6_addr.s6_addr[3] = 0xb8;
            memcpy(in6->sin6_addr.s6_addr + 4, h + 4, 12);
        }
    }
    return 0;
}
