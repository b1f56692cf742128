/*
 * Quake 2's answer to the connectionless "status" as the route's probe
 * reads it (protocols/q2/oob.c, through the codec table's status hooks):
 * "print\n", the serverinfo line, one line per player (yquake2
 * SV_StatusString, q2pro alike).  Answers built here from that layout:
 * good ones, every cut of one, and hostile ones; none may crash, each is
 * read or refused as a whole.
 */
#include "protocols/codec.h"
#include "protocols/error.h"
#include "protocols/q2/q2.h"

#include "tests/unit.h"

#include <stdio.h>
#include <string.h>

extern const struct sg_codec sg_q2_codec;

#define OOB "\xff\xff\xff\xff"

static const char good[] = OOB "print\n\\maxclients\\8\\hostname\\Slip Gate\\mapname\\q2dm1"
                               "\\protocol\\34\n0 25 \"alice\"\n-2 40 \"bob\"\n";

static int parse(const char *s, size_t n, struct sg_codec_server *out)
{
    return sg_q2_codec.status->parse((const uint8_t *)s, n, out);
}

/* A refused answer leaves nothing behind. */
static void check_refused(const char *s, size_t n, const char *what)
{
    struct sg_codec_server sv;
    int err = parse(s, n, &sv);

    CHECKF(err == SG_E_MALFORMED, "%s: %d", what, err);
    CHECKF(!sv.hostname[0] && !sv.map[0] && sv.players == -1 && sv.max_players == -1,
           "%s: left %s / %s / %d / %d", what, sv.hostname, sv.map, sv.players, sv.max_players);
}

static void case_good(void)
{
    struct sg_codec_server sv;
    uint8_t q[64];
    int n;

    /* The hooks: the query, the answer recognised and read. */
    CHECK(sg_q2_codec.status->parse == sg_q2_status_parse);
    n = sg_codec_status_query(sg_q2_codec.status, q, sizeof(q));
    CHECK(n == 11 && memcmp(q, OOB "status\n", 11) == 0);
    CHECK(sg_codec_status_is_reply(sg_q2_codec.status, (const uint8_t *)good, sizeof(good) - 1));

    CHECK_EQ(parse(good, sizeof(good) - 1, &sv), 0);
    CHECK(strcmp(sv.hostname, "Slip Gate") == 0);
    CHECK(strcmp(sv.map, "q2dm1") == 0);
    CHECK_EQ(sv.players, 2);
    CHECK_EQ(sv.max_players, 8);

    /* A NUL after the text (some servers send it) changes nothing. */
    {
        char z[sizeof(good)];
        memcpy(z, good, sizeof(good)); /* with its NUL */
        CHECK_EQ(parse(z, sizeof(z), &sv), 0);
        CHECK_EQ(sv.players, 2);
    }

    /* q2pro with sv_status_show 1: the serverinfo only; keys it lacks are unknown. */
    {
        static const char s[] = OOB "print\n\\hostname\\solo\n";
        CHECK_EQ(parse(s, sizeof(s) - 1, &sv), 0);
        CHECK(strcmp(sv.hostname, "solo") == 0 && sv.map[0] == 0);
        CHECK_EQ(sv.players, 0);
        CHECK_EQ(sv.max_players, -1);
    }

    /* A name longer than the room is cut, NUL-terminated. */
    {
        char s[512];
        char name[200];
        memset(name, 'n', sizeof(name) - 1);
        name[sizeof(name) - 1] = 0;
        n = snprintf(s, sizeof(s), OOB "print\n\\hostname\\%s\\mapname\\%s\n", name, name);
        CHECK_EQ(parse(s, (size_t)n, &sv), 0);
        CHECK_EQ(strlen(sv.hostname), sizeof(sv.hostname) - 1);
        CHECK_EQ(strlen(sv.map), sizeof(sv.map) - 1);
    }

    /* maxclients that is no small decimal: unknown, the rest still read. */
    {
        static const char *const vals[] = {"abc", "-1", "999999", "8x", ""};
        for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
            char s[128];
            n = snprintf(s, sizeof(s), OOB "print\n\\maxclients\\%s\\hostname\\h\n", vals[i]);
            CHECKF(parse(s, (size_t)n, &sv) == 0 && sv.max_players == -1 &&
                       strcmp(sv.hostname, "h") == 0,
                   "maxclients %s: %d", vals[i], sv.max_players);
        }
    }
}

/* Every cut of the good answer: read when it ends at the end of a line
 * (fewer players), refused otherwise; never more than what came. */
static void case_truncated(void)
{
    size_t len = sizeof(good) - 1, head = 10; /* OOB "print\n" */
    const char *info_end = memchr(good + head, '\n', len - head);

    for (size_t k = 0; k < len; k++) {
        struct sg_codec_server sv;
        int err = parse(good, k, &sv);
        bool whole = k > (size_t)(info_end - good) && good[k - 1] == '\n';
        if (whole) {
            int lines = 0;
            for (size_t i = (size_t)(info_end - good) + 1; i < k; i++)
                lines += good[i] == '\n';
            CHECKF(err == 0 && sv.players == lines && strcmp(sv.hostname, "Slip Gate") == 0,
                   "cut at %zu: %d, %d players", k, err, sv.players);
        } else {
            char what[32];
            snprintf(what, sizeof(what), "cut at %zu", k);
            check_refused(good, k, what);
        }
    }
}

static void case_hostile(void)
{
    static const struct {
        const char *what, *s;
    } bad[] = {
        {"another answer", OOB "info\n\\hostname\\x\n"},
        {"a refusal, no serverinfo", OOB "print\nServer is full.\n"},
        {"no newline at all", OOB "print\n\\hostname\\x"},
        {"an empty serverinfo", OOB "print\n\n"},
        {"no 0xFFFFFFFF", "print\n\\hostname\\x\n"},
        {"player: no quotes", OOB "print\n\\hostname\\x\n1 2 alice\n"},
        {"player: one quote", OOB "print\n\\hostname\\x\n1 2 \"alice\n"},
        {"player: a third quote", OOB "print\n\\hostname\\x\n1 2 \"al\"ice\"\n"},
        {"player: text after the name", OOB "print\n\\hostname\\x\n1 2 \"alice\" x\n"},
        {"player: letters for frags", OOB "print\n\\hostname\\x\nab 2 \"alice\"\n"},
        {"player: one number", OOB "print\n\\hostname\\x\n1 \"alice\"\n"},
        {"player: a lone minus", OOB "print\n\\hostname\\x\n- 2 \"alice\"\n"},
        {"player: 12 digits", OOB "print\n\\hostname\\x\n123456789012 2 \"a\"\n"},
        {"player: an empty line", OOB "print\n\\hostname\\x\n\n"},
        {"player: cut before its newline", OOB "print\n\\hostname\\x\n1 2 \"a\""},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        check_refused(bad[i].s, strlen(bad[i].s), bad[i].what);

    /* A NUL inside the text. */
    {
        static const char s[] = OOB "print\n\\hostname\\x\0y\n";
        check_refused(s, sizeof(s) - 1, "a NUL inside");
    }
    /* Big answers: 60000 player lines read and counted; one bad line among them refused. */
    {
        static char s[10 + 16 + 60000 * 9 + 16];
        struct sg_codec_server sv;
        size_t n = (size_t)sprintf(s, OOB "print\n\\hostname\\big\n");
        for (int i = 0; i < 60000; i++)
            n += (size_t)sprintf(s + n, "0 0 \"p\"\n");
        CHECK_EQ(parse(s, n, &sv), 0);
        CHECK_EQ(sv.players, 60000);
        s[n - 3] = '"'; /* the last line: 0 0 """ */
        check_refused(s, n, "a bad last line of 60000");
    }
    /* Random bytes after the head: refused or read, never past the data. */
    {
        uint64_t rng = 7;
        static uint8_t s[2048];
        for (int round = 0; round < 2000; round++) {
            struct sg_codec_server sv;
            size_t n = 10 + unit_rng(&rng) % 200;
            memcpy(s, OOB "print\n", 10);
            for (size_t i = 10; i < n; i++) {
                static const char pick[] = "\\\n\" 0123456789-abc\0\xff";
                s[i] = (uint8_t)pick[unit_rng(&rng) % (sizeof(pick) - 1)];
            }
            int err = sg_q2_status_parse(s, n, &sv);
            CHECK(err == 0 || err == SG_E_MALFORMED);
            CHECK(memchr(sv.hostname, 0, sizeof(sv.hostname)) && memchr(sv.map, 0, sizeof(sv.map)));
            CHECK(sv.players >= -1 && sv.max_players >= -1);
        }
    }
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"good", case_good},
        {"truncated", case_truncated},
        {"hostile", case_hostile},
    };
    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
