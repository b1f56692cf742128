/*
 * Signed recordings on the command line (filters/sign.h):
 *
 *   slipgate keygen [--out PREFIX]      a key pair: PREFIX (secret, 0600) and
 *                                       PREFIX.pub; prints the public key line
 *   slipgate demo verify FILE [--key PUBKEY | --keyfile F] [--json]
 *                                       FILE against FILE.sig: one line,
 *                                       exit 0 only when authentic
 *
 * `demo verify` is game-independent: any recording with a .sig (demos of
 * every game, pcap captures) verifies the same way.
 */
#include "proxy/cli/commands.h"

#include "filters/sign.h"
#include "protocols/json.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SIG_BYTES (64u << 20)

static const char keygen_usage[] =
    "usage: slipgate keygen [--out PREFIX]\n"
    "Makes an Ed25519 key pair for `sign_key`: PREFIX (the secret key, mode 0600;\n"
    "default slipgate-sign) and PREFIX.pub, and prints the public key line\n"
    "(slipgate-pub 1 KEYID BASE64) to publish.\n";

int sg_cmd_keygen(int argc, char **argv)
{
    const char *prefix = "slipgate-sign";
    struct sg_sign_key key;
    char why[600], line[128];

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            prefix = argv[++i];
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(keygen_usage, stdout);
            return 0;
        } else {
            fprintf(stderr, "slipgate keygen: unexpected '%s'\n%s", argv[i], keygen_usage);
            return 2;
        }
    }
    if (sg_sign_keygen(&key) < 0) {
        fputs("slipgate keygen: libsodium failed to start\n", stderr);
        return 1;
    }
    if (sg_sign_key_save(&key, prefix, why, sizeof(why)) < 0) {
        sg_sign_key_wipe(&key);
        fprintf(stderr, "slipgate keygen: %s\n", why);
        return 1;
    }
    sg_sign_pub_line(key.pk, line, sizeof(line));
    sg_sign_key_wipe(&key);
    printf("%s\n", line);
    fprintf(stderr, "secret key: %s (mode 0600; keep it private)\npublic key: %s.pub\n", prefix,
            prefix);
    return 0;
}

/* A whole file mapped (or read) into memory; *len 0 and NULL for an empty one. */
static int map_file(const char *path, const uint8_t **data, size_t *len, size_t max)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    void *p;

    *data = NULL;
    *len = 0;
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) != 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    if (!S_ISREG(st.st_mode) || (max && (uint64_t)st.st_size > max)) {
        close(fd);
        return S_ISREG(st.st_mode) ? -EFBIG : -EINVAL; /* a directory, a device; a huge .sig */
    }
    if (st.st_size == 0) {
        close(fd);
        *data = (const uint8_t *)"";
        return 0;
    }
    p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return -errno;
    *data = p;
    *len = (size_t)st.st_size;
    return 0;
}

static void unmap_file(const uint8_t *data, size_t len)
{
    union {
        const uint8_t *c;
        void *v;
    } u = {.c = data};

    if (data && len)
        munmap(u.v, len);
}

static void json_str(const char *s)
{
    sg_json_cstr(stdout, s);
}

int sg_cmd_demo_verify(int argc, char **argv)
{
    const char *path = NULL, *keytext = NULL, *keyfile = NULL;
    uint8_t pk[SG_SIGN_PK_BYTES];
    const uint8_t *data, *sig;
    size_t len, siglen;
    char sigpath[4096], why[600], line[512];
    struct sg_sign_result res;
    bool json = false, have_sig;
    int err;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (strcmp(argv[i], "--key") == 0 && i + 1 < argc)
            keytext = argv[++i];
        else if (strcmp(argv[i], "--keyfile") == 0 && i + 1 < argc)
            keyfile = argv[++i];
        else if (argv[i][0] == '-' && argv[i][1])
            goto usage;
        else if (!path)
            path = argv[i];
        else
            goto usage;
    }
    if (!path || (keytext && keyfile))
        goto usage;
    if (keytext && sg_sign_pub_parse(keytext, pk) < 0) {
        fprintf(stderr, "slipgate demo verify: --key: not a public key (64 hex characters, "
                        "base64, or a slipgate-pub line)\n");
        return 2;
    }
    if (keyfile && sg_sign_pub_load(keyfile, pk, why, sizeof(why)) < 0) {
        fprintf(stderr, "slipgate demo verify: --keyfile %s\n", why);
        return 2;
    }

    /* The recording and its .sig. */
    err = map_file(path, &data, &len, 0);
    if (err < 0) {
        fprintf(stderr, "slipgate demo verify: %s: %s\n", path, strerror(-err));
        return 1;
    }
    snprintf(sigpath, sizeof(sigpath), "%s.sig", path);
    have_sig = map_file(sigpath, &sig, &siglen, MAX_SIG_BYTES) == 0;
    sg_sign_verify_mem(have_sig ? sig : NULL, siglen, data, len, keytext || keyfile ? pk : NULL,
                       &res);
    if (have_sig)
        unmap_file(sig, siglen);
    unmap_file(data, len);

    /* One line. */
    sg_sign_result_line(&res, line, sizeof(line));
    if (json) {
        printf("{\"file\":");
        json_str(path);
        printf(",\"verdict\":\"%s\",\"authentic\":%s,\"bytes\":%" PRIu64 ",\"messages\":%" PRIu64
               ",\"file_bytes\":%" PRIu64 ",\"checkpoints\":%u,\"key_id\":",
               sg_sign_verdict_name(res.verdict),
               res.verdict <= SG_SIGN_PARTIAL ? "true" : "false", res.bytes, res.items,
               res.file_bytes, res.checkpoints);
        json_str(res.key_id);
        printf(",\"key_checked\":%s,\"cut_ms\":%" PRIu64 ",\"start_ms\":%" PRIu64 ",\"kind\":",
               keytext || keyfile ? "true" : "false", res.cut_ms, res.start_ms);
        json_str(res.kind);
        printf(",\"route\":");
        json_str(res.route);
        printf(",\"client\":");
        json_str(res.client);
        printf(",\"map\":");
        json_str(res.map);
        printf(",\"line\":");
        json_str(line);
        printf("}\n");
    } else {
        printf("%s: %s%s\n", path, line,
               !keytext && !keyfile && res.verdict <= SG_SIGN_PARTIAL
                   ? " [key not checked: pass --key or --keyfile]"
                   : "");
    }
    return res.verdict <= SG_SIGN_PARTIAL ? 0 : 1;

usage:
    fputs("usage: slipgate demo verify FILE [--key PUBKEY | --keyfile FILE.pub] [--json]\n",
          stderr);
    return 2;
}
