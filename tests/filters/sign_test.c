/*
 * Signed recordings (filters/sign.c): keys, the .sig writer, and the
 * reader's verdict for every way a recording or its .sig can be damaged.
 *
 * Each case writes a recording through the writer's stream in chunks (a
 * checkpoint after each chunk: the interval is 1 ms and the clock moves
 * 5 ms per chunk), reads both files back and checks sg_sign_verify_mem's
 * verdict and byte position, then also runs every one-byte truncation of
 * the damaged input through the reader (never a crash).
 */
#include "filters/sign.h"
#include "tests/unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK  300
#define CHUNKS 5

static char dir[] = "/tmp/sg_sign_test_XXXXXX";

struct rec {
    uint8_t *data, *sig;
    size_t len, siglen;
};


/*
 * Record `name` in `dir`: CHUNKS chunks of CHUNK bytes (the seed makes the
 * content), a checkpoint after each, and the final one unless `cut`.
 */
static void record(const struct sg_sign_key *key, const char *name, unsigned seed, bool cut,
                   struct rec *r)
{
    char path[256], sigpath[300];
    struct sg_sign_writer *w;
    struct sg_sign_meta meta = {.route = "main", .server = "127.0.0.1:27960",
                                .client = "127.0.0.1:5000", .map = "q3dm17",
                                .protocol = "q3", .kind = "demo", .start_ms = 1764000000000};
    uint8_t buf[CHUNK];
    FILE *fp;
    int fd;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    snprintf(sigpath, sizeof(sigpath), "%s.sig", path);
    unlink(path);
    unlink(sigpath);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    CHECK(fd >= 0);
    CHECK_EQ(sg_sign_writer_create(&w, key, path, fd, &meta, 1, &fp), 0);
    CHECK(sg_sign_writer_tick(w, 100, 0) == 0); /* starts the clock */
    for (unsigned c = 0; c < CHUNKS; c++) {
        for (unsigned i = 0; i < CHUNK; i++)
            buf[i] = (uint8_t)(seed * 31 + c * 7 + i);
        CHECK(fwrite(buf, 1, CHUNK, fp) == CHUNK);
        CHECK(fflush(fp) == 0);
        CHECK_EQ(ftell(fp), (long)((c + 1) * CHUNK));
        CHECK_EQ(sg_sign_writer_tick(w, 100 + 5 * (c + 1), c + 1), 1);
    }
    if (!cut) {
        CHECK(fwrite("END", 1, 3, fp) == 3);
        CHECK(fflush(fp) == 0);
        CHECK_EQ(sg_sign_writer_finish(w, CHUNKS + 1), 0);
    } else {
        CHECK(fwrite("tail", 1, 4, fp) == 4); /* written after the last checkpoint */
        CHECK(fflush(fp) == 0);
    }
    CHECK(fclose(fp) == 0);
    sg_sign_writer_destroy(w, false);
    r->data = unit_slurp(path, &r->len);
    r->sig = unit_slurp(sigpath, &r->siglen);
    CHECK(r->data && r->sig);
}

static void rec_free(struct rec *r)
{
    free(r->data);
    free(r->sig);
}

/* Every prefix of the .sig, and of the data, through the reader: only verdicts, no crash. */
static void prefixes(const struct rec *r, const uint8_t *pk)
{
    struct sg_sign_result res;

    for (size_t n = 0; n <= r->siglen; n += 1 + n / 64)
        sg_sign_verify_mem(r->sig, n, r->data, r->len, pk, &res);
    for (size_t n = 0; n <= r->len; n += 97)
        sg_sign_verify_mem(r->sig, r->siglen, r->data, n, pk, &res);
}

static struct sg_sign_result verify(const struct rec *r, const uint8_t *pk)
{
    struct sg_sign_result res;
    char line[512];

    sg_sign_verify_mem(r->sig, r->siglen, r->data, r->len, pk, &res);
    sg_sign_result_line(&res, line, sizeof(line));
    fprintf(stderr, "verdict: %s\n", line);
    prefixes(r, pk);
    return res;
}

static struct sg_sign_key key1, key2;

static void setup(void)
{
    CHECK(mkdtemp(dir) != NULL);
    CHECK_EQ(sg_sign_keygen(&key1), 0);
    CHECK_EQ(sg_sign_keygen(&key2), 0);
}

static void cleanup(void)
{
    char cmd[300];

    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

/* ---- keys ---- */

static void case_keygen_files(void)
{
    char prefix[256], pub[300], why[600];
    struct sg_sign_key k;
    uint8_t pk[SG_SIGN_PK_BYTES];
    struct stat st;

    setup();
    snprintf(prefix, sizeof(prefix), "%s/league", dir);
    snprintf(pub, sizeof(pub), "%s.pub", prefix);
    CHECK_EQ(sg_sign_key_save(&key1, prefix, why, sizeof(why)), 0);
    CHECK(stat(prefix, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK_EQ(sg_sign_key_load(prefix, &k, why, sizeof(why)), 0);
    CHECK(memcmp(k.sk, key1.sk, sizeof(k.sk)) == 0 && memcmp(k.pk, key1.pk, sizeof(k.pk)) == 0);
    CHECK(strcmp(k.id, key1.id) == 0 && strlen(k.id) == SG_SIGN_ID_LEN);
    CHECK_EQ(sg_sign_pub_load(pub, pk, why, sizeof(why)), 0);
    CHECK(memcmp(pk, key1.pk, sizeof(pk)) == 0);
    CHECK_EQ(sg_sign_pub_load(prefix, pk, why, sizeof(why)), 0); /* the secret file's public half */
    CHECK(memcmp(pk, key1.pk, sizeof(pk)) == 0);
    /* never over an existing key */
    CHECK(sg_sign_key_save(&key2, prefix, why, sizeof(why)) == -EEXIST);
    CHECK_EQ(sg_sign_key_load(prefix, &k, why, sizeof(why)), 0);
    CHECK(memcmp(k.pk, key1.pk, sizeof(k.pk)) == 0);
    cleanup();
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");

    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    CHECK(chmod(path, mode) == 0);
}

static void case_key_refused(void)
{
    char prefix[256], why[600];
    struct sg_sign_key k;

    setup();
    snprintf(prefix, sizeof(prefix), "%s/k", dir);
    CHECK_EQ(sg_sign_key_save(&key1, prefix, why, sizeof(why)), 0);
    CHECK(chmod(prefix, 0640) == 0);
    CHECK(sg_sign_key_load(prefix, &k, why, sizeof(why)) < 0);
    CHECKF(strstr(why, "group or others") && strstr(why, "0640"), "%s", why);
    CHECK(chmod(prefix, 0604) == 0);
    CHECK(sg_sign_key_load(prefix, &k, why, sizeof(why)) < 0);
    CHECK(chmod(prefix, 0400) == 0);
    CHECK_EQ(sg_sign_key_load(prefix, &k, why, sizeof(why)), 0);

    write_file(prefix, "slipgate-secret-key 1\nnot base64!\n", 0600);
    CHECK(sg_sign_key_load(prefix, &k, why, sizeof(why)) < 0);
    CHECKF(strstr(why, "not a slipgate secret key") != NULL, "%s", why);
    write_file(prefix, "slipgate-secret-key 1\nAAAA\n", 0600); /* too short */
    CHECK(sg_sign_key_load(prefix, &k, why, sizeof(why)) < 0);
    write_file(prefix, "", 0600);
    CHECK(sg_sign_key_load(prefix, &k, why, sizeof(why)) < 0);
    unlink(prefix);
    CHECK(sg_sign_key_load(prefix, &k, why, sizeof(why)) == -ENOENT);
    cleanup();
}

static void case_pub_forms(void)
{
    char line[128], hex[2 * SG_SIGN_PK_BYTES + 1];
    uint8_t pk[SG_SIGN_PK_BYTES];

    setup();
    sg_sign_pub_line(key1.pk, line, sizeof(line));
    CHECK(strncmp(line, "slipgate-pub 1 ", 15) == 0 && strstr(line, key1.id));
    CHECK_EQ(sg_sign_pub_parse(line, pk), 0);
    CHECK(memcmp(pk, key1.pk, sizeof(pk)) == 0);
    CHECK_EQ(sg_sign_pub_parse(strrchr(line, ' ') + 1, pk), 0); /* base64 alone */
    CHECK(memcmp(pk, key1.pk, sizeof(pk)) == 0);
    for (int i = 0; i < SG_SIGN_PK_BYTES; i++)
        snprintf(hex + 2 * i, 3, "%02x", key1.pk[i]);
    CHECK_EQ(sg_sign_pub_parse(hex, pk), 0);
    CHECK(memcmp(pk, key1.pk, sizeof(pk)) == 0);
    CHECK(sg_sign_pub_parse("", pk) < 0);
    CHECK(sg_sign_pub_parse("abcd", pk) < 0);
    hex[10] = 'x';
    CHECK(sg_sign_pub_parse(hex, pk) < 0);
    cleanup();
}

/* ---- verdicts ---- */

static void case_whole(void)
{
    struct rec r;
    struct sg_sign_result res;
    char line[512];

    setup();
    record(&key1, "a.dm_68", 1, false, &r);
    res = verify(&r, key1.pk);
    CHECK_EQ(res.verdict, SG_SIGN_WHOLE);
    CHECK_EQ(res.bytes, CHUNK * CHUNKS + 3);
    CHECK_EQ(res.items, CHUNKS + 1);
    CHECK_EQ(res.checkpoints, CHUNKS + 1);
    CHECK(strcmp(res.key_id, key1.id) == 0);
    CHECK(strcmp(res.map, "q3dm17") == 0 && strcmp(res.file, "a.dm_68") == 0);
    CHECK(strcmp(res.client, "127.0.0.1:5000") == 0 && res.start_ms == 1764000000000);
    sg_sign_result_line(&res, line, sizeof(line));
    CHECKF(strncmp(line, "authentic, whole", 16) == 0, "%s", line);
    /* the key the .sig names, when none is given */
    res = verify(&r, NULL);
    CHECK_EQ(res.verdict, SG_SIGN_WHOLE);
    rec_free(&r);
    cleanup();
}

static void case_kill9_partial(void)
{
    struct rec r;
    struct sg_sign_result res;
    char line[512];

    setup();
    record(&key1, "a.dm_68", 1, true, &r);
    res = verify(&r, key1.pk);
    CHECK_EQ(res.verdict, SG_SIGN_PARTIAL);
    CHECK_EQ(res.bytes, CHUNK * CHUNKS);
    CHECK_EQ(res.file_bytes, CHUNK * CHUNKS + 4);
    CHECK(res.cut_ms > 0);
    sg_sign_result_line(&res, line, sizeof(line));
    CHECKF(strstr(line, "authentic up to byte 1500 / message 5 (recording cut at ") == line, "%s",
           line);
    rec_free(&r);
    cleanup();
}

static void case_no_checkpoint(void)
{
    struct rec r;
    struct sg_sign_result res;
    char *p;

    setup();
    record(&key1, "a.dm_68", 1, true, &r);
    p = strstr((char *)r.sig, "\ncp ");
    CHECK(p != NULL);
    r.siglen = (size_t)(p + 1 - (char *)r.sig); /* the header only: cut before a checkpoint */
    res = verify(&r, key1.pk);
    CHECK_EQ(res.verdict, SG_SIGN_NONE);
    CHECK(strstr(res.reason, "no checkpoint") != NULL);
    rec_free(&r);
    cleanup();
}

static void case_flip_data(void)
{
    struct rec r;
    struct sg_sign_result res;

    setup();
    record(&key1, "a.dm_68", 1, false, &r);
    r.data[CHUNK * 2 + 17] ^= 0x04; /* in the third chunk */
    res = verify(&r, key1.pk);
    CHECK_EQ(res.verdict, SG_SIGN_MODIFIED);
    CHECK_EQ(res.bytes, CHUNK * 2); /* the last checkpoint that still holds */
    r.data[CHUNK * 2 + 17] ^= 0x04;
    r.data[0] ^= 0x80;
    res = verify(&r, key1.pk);
    CHECK_EQ(res.verdict, SG_SIGN_MODIFIED);
    CHECK_EQ(res.bytes, 0);
    r.data[0] ^= 0x80;
    r.data[r.len - 1] ^= 0x01; /* in the end marker, after the last periodic checkpoint */
    res = verify(&r, key1.pk);
    CHECK_EQ(res.verdict, SG_SIGN_MODIFIED);
    CHECK_EQ(res.bytes, CHUNK * CHUNKS);
    rec_free(&r);
    cleanup();
}

static void case_flip_meta(void)
{
    struct rec r;
    struct sg_sign_result res;
    char *p;

    setup();
    record(&key1, "a.dm_68", 1, false, &r);
    p = strstr((char *)r.sig, "meta map q3dm17");
    CHECK(p != NULL);
    p[13] ^= 0x01; /* q3dm17 -> q3dm07: another map */
    res = verify(&r, key1.pk);
    CHECK_EQ(res.verdict, SG_SIGN_MODIFIED);
    CHECK_EQ(res.bytes, 0);
    CHECKF(strstr(res.reason, "metadata") != NULL, "%s", res.reason);
    p[13] ^= 0x01;
    p = strstr((char *)r.sig, "meta client 127.0.0.1");
    p[12] = '8'; /* another client */
    res = verify(&r, key1.pk);
    CHECK_EQ(res.verdict, SG_SIGN_MODIFIED);
    CHECK_EQ(res.bytes, 0);
    rec_free(&r);
    cleanup();
}

static void case_flip_checkpoint(void)
{
    struct rec r;
    struct sg_sign_result res;
    char *p;

    setup();
    record(&key1, "a.dm_68", 1, false, &r);
    p = strstr((char *)r.sig, "\ncp 2 ");
    CHECK(p != NULL);
    p = strchr(p + 6, ' '); /* past BYTES */
    p[1] = p[1] == '1' ? '2' : '1'; /* ITEMS changed: its signature no longer holds */
    res = verify(&r, key1.pk);
    CHECK_EQ(res.verdict, SG_SIGN_MODIFIED);
    CHECK_EQ(res.bytes, CHUNK * 2);
    /* a bit of a signature */
    free(r.sig);
    free(r.data);
    record(&key1, "b.dm_68", 1, false, &r);
    p = strstr((char *)r.sig, "\ncp 3 ");
    p = strchr(p + 1, '\n'); /* the end of checkpoint 3's line */
    while (p[-1] != ' ')
        p--;
    p[3] = p[3] == 'A' ? 'B' : 'A'; /* a character of its signature */
    res = verify(&r, key1.pk);
    CHECK_EQ(res.verdict, SG_SIGN_MODIFIED);
    CHECK_EQ(res.bytes, CHUNK * 3);
    rec_free(&r);
    cleanup();
}

static void case_truncated_data(void)
{
    struct rec r;
    struct sg_sign_result res;

    setup();
    record(&key1, "a.dm_68", 1, false, &r);
    r.len = CHUNK * 3 + 10;
    res = verify(&r, key1.pk);
    CHECK_EQ(res.verdict, SG_SIGN_MODIFIED);
    CHECK_EQ(res.bytes, CHUNK * 3 + 10);
    CHECKF(strstr(res.reason, "ends at byte") != NULL, "%s", res.reason);
    r.len = 0;
    res = verify(&r, key1.pk);
    CHECK_EQ(res.verdict, SG_SIGN_MODIFIED);
    CHECK_EQ(res.bytes, 0);
    rec_free(&r);
    cleanup();
}

static void case_truncated_sig(void)
{
    struct rec r;
    struct sg_sign_result res;
    char *p;

    setup();
    record(&key1, "a.dm_68", 1, false, &r);
    p = strstr((char *)r.sig, "\ncp 3 ");
    CHECK(p != NULL);
    r.siglen = (size_t)(p + 20 - (char *)r.sig); /* cut inside checkpoint 3's line */
    res = verify(&r, key1.pk);
    CHECK_EQ(res.verdict, SG_SIGN_PARTIAL); /* what kill -9 in mid-write leaves */
    CHECK_EQ(res.bytes, CHUNK * 3);
    CHECK(res.sig_truncated);
    r.siglen = 30; /* inside the key line */
    res = verify(&r, key1.pk);
    CHECK(res.verdict == SG_SIGN_MODIFIED || res.verdict == SG_SIGN_NONE);
    rec_free(&r);
    cleanup();
}

static void case_appended_data(void)
{
    struct rec r;
    struct sg_sign_result res;
    uint8_t *more;

    setup();
    record(&key1, "a.dm_68", 1, false, &r);
    more = realloc(r.data, r.len + 5);
    CHECK(more != NULL);
    r.data = more;
    memcpy(r.data + r.len, "extra", 5);
    r.len += 5;
    res = verify(&r, key1.pk);
    CHECK_EQ(res.verdict, SG_SIGN_MODIFIED);
    CHECK_EQ(res.bytes, CHUNK * CHUNKS + 3);
    rec_free(&r);
    cleanup();
}

static void case_other_demo(void)
{
    struct rec a, b;
    struct sg_sign_result res;

    setup();
    record(&key1, "a.dm_68", 1, false, &a);
    record(&key1, "b.dm_68", 2, false, &b);
    free(a.sig);
    a.sig = b.sig; /* b's .sig beside a */
    a.siglen = b.siglen;
    b.sig = NULL;
    res = verify(&a, key1.pk);
    CHECK_EQ(res.verdict, SG_SIGN_MODIFIED);
    CHECK_EQ(res.bytes, 0);
    CHECKF(strstr(res.reason, "b.dm_68") != NULL, "%s", res.reason);
    rec_free(&a);
    rec_free(&b);
    cleanup();
}

static void case_other_key(void)
{
    struct rec r;
    struct sg_sign_result res;
    char line[512];

    setup();
    record(&key2, "a.dm_68", 1, false, &r);
    res = verify(&r, key1.pk);
    CHECK_EQ(res.verdict, SG_SIGN_OTHER_KEY);
    CHECK(strcmp(res.key_id, key2.id) == 0);
    sg_sign_result_line(&res, line, sizeof(line));
    CHECKF(strstr(line, "signed by another key (id ") && strstr(line, key2.id), "%s", line);
    rec_free(&r);
    cleanup();
}

static void case_no_sig(void)
{
    struct sg_sign_result res;
    char line[512];

    sg_sign_verify_mem(NULL, 0, (const uint8_t *)"abc", 3, NULL, &res);
    CHECK_EQ(res.verdict, SG_SIGN_NONE);
    sg_sign_result_line(&res, line, sizeof(line));
    CHECKF(strncmp(line, "no signature", 12) == 0, "%s", line);
    sg_sign_verify_mem((const uint8_t *)"", 0, (const uint8_t *)"abc", 3, NULL, &res);
    CHECK_EQ(res.verdict, SG_SIGN_NONE);
}

static void case_bad_version(void)
{
    static const char sig[] = "slipgate-sig 2\nkey x y\n";
    struct sg_sign_result res;

    sg_sign_verify_mem((const uint8_t *)sig, strlen(sig), (const uint8_t *)"abc", 3, NULL, &res);
    CHECK_EQ(res.verdict, SG_SIGN_NONE);
    CHECKF(strstr(res.reason, "version 2") != NULL, "%s", res.reason);
}

/* Random bytes and random edits of a real .sig: verdicts only. */
static void case_garbage(void)
{
    struct rec r;
    struct sg_sign_result res;
    uint64_t rng = 12345;
    uint8_t *copy;

    setup();
    record(&key1, "a.dm_68", 1, false, &r);
    copy = malloc(r.siglen);
    for (int i = 0; i < 3000; i++) {
        memcpy(copy, r.sig, r.siglen);
        for (int k = 0; k < 1 + i % 4; k++)
            copy[unit_rng(&rng) % r.siglen] = (uint8_t)unit_rng(&rng);
        sg_sign_verify_mem(copy, r.siglen - unit_rng(&rng) % 8, r.data, r.len, key1.pk, &res);
        CHECK(res.verdict != SG_SIGN_WHOLE || memcmp(copy, r.sig, r.siglen) == 0 ||
              res.bytes == r.len);
    }
    for (size_t i = 0; i < r.siglen; i++)
        copy[i] = (uint8_t)unit_rng(&rng);
    sg_sign_verify_mem(copy, r.siglen, r.data, r.len, NULL, &res);
    CHECK_EQ(res.verdict, SG_SIGN_NONE);
    free(copy);
    rec_free(&r);
    cleanup();
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"keygen_files", case_keygen_files},
        {"key_refused", case_key_refused},
        {"pub_forms", case_pub_forms},
        {"whole", case_whole},
        {"kill9_partial", case_kill9_partial},
        {"no_checkpoint", case_no_checkpoint},
        {"flip_data", case_flip_data},
        {"flip_meta", case_flip_meta},
        {"flip_checkpoint", case_flip_checkpoint},
        {"truncated_data", case_truncated_data},
        {"truncated_sig", case_truncated_sig},
        {"appended_data", case_appended_data},
        {"other_demo", case_other_demo},
        {"other_key", case_other_key},
        {"no_sig", case_no_sig},
        {"bad_version", case_bad_version},
        {"garbage", case_garbage},
    };
    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
