/*
 * q3_golden: `demo dump` output of a real demo against its checked-in
 * golden file.  argv[1] = demo path under $SG_TESTDATA, argv[2] = golden
 * file, argv[3] = "text" or "json".  The dump comes from the same
 * sg_q3_dump_demo() the command uses.  With SG_UPDATE_GOLDEN=1 the golden
 * file is (re)written instead; review the diff before committing it.
 */
#include <stdlib.h>
#include <string.h>

#include "protocols/error.h"
#include "protocols/q3/dump.h"
#include "q3_util.h"

/* Line `n` (1-based) of a NUL-terminated text, copied into out. */
static void line_of(const char *text, size_t n, char *out, size_t cap)
{
    const char *p = text;
    size_t len;

    for (size_t i = 1; i < n && p; i++) {
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    if (!p) {
        snprintf(out, cap, "<end of file>");
        return;
    }
    len = strcspn(p, "\n");
    snprintf(out, cap, "%.*s", (int)(len < cap - 1 ? len : cap - 1), p);
}

/* Compare; on a difference print the first differing line of each side. */
static int compare(const char *got, size_t got_len, const char *want, size_t want_len)
{
    static char a[512], b[512];
    size_t line = 1, i = 0;

    if (got_len == want_len && memcmp(got, want, got_len) == 0)
        return 0;
    for (; i < got_len && i < want_len && got[i] == want[i]; i++)
        line += got[i] == '\n';
    line_of(want, line, a, sizeof(a));
    line_of(got, line, b, sizeof(b));
    fprintf(stderr, "dump differs from golden file at line %zu\n-%s\n+%s\n", line, a, b);
    return 1;
}

/* Read a whole file. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;

    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n + 1);
        if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
            buf[n] = 0;
            *len = (size_t)n;
        } else {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

int main(int argc, char **argv)
{
    char path[4096];
    struct sg_q3_demo_reader r;
    struct sg_q3_dump_stats stats;
    char *got = NULL, *want;
    size_t got_len = 0, want_len = 0;
    FILE *mem;
    int rc;

    if (argc < 4 || !q3_testdata(argv[1], path, sizeof(path)))
        return 1;

    /* dump the demo into memory */
    CHECK(sg_q3_demo_reader_open(&r, path) == 0);
    mem = open_memstream(&got, &got_len);
    CHECK(mem != NULL);
    CHECK(sg_q3_dump_demo(mem, strcmp(argv[3], "json") == 0 ? SG_Q3_DUMP_JSON : SG_Q3_DUMP_TEXT, &r,
                          &stats) == 0);
    CHECK(fclose(mem) == 0);
    sg_q3_demo_reader_finish(&r);
    CHECK(stats.messages > 0);
    CHECK(stats.decode_errors == 0);

    /* update mode */
    if (getenv("SG_UPDATE_GOLDEN") && strcmp(getenv("SG_UPDATE_GOLDEN"), "1") == 0) {
        FILE *f = fopen(argv[2], "wb");

        CHECK(f != NULL);
        CHECK(fwrite(got, 1, got_len, f) == got_len);
        CHECK(fclose(f) == 0);
        printf("wrote %s (%zu bytes)\n", argv[2], got_len);
        free(got);
        return 0;
    }

    want = slurp(argv[2], &want_len);
    if (!want) {
        fprintf(stderr, "cannot read golden file %s\n", argv[2]);
        free(got);
        return 1;
    }
    rc = compare(got, got_len, want, want_len);
    printf("%s: %llu messages, dump %zu bytes, %s\n", argv[1], (unsigned long long)stats.messages,
           got_len, rc ? "DIFFERS" : "matches");
    free(got);
    free(want);
    return rc;
}
