/*
 * Reliable-command renumbering (protocols/q3/renum.h): the numbers the
 * receiver gets, acknowledgements back, drops, injections, a new level.
 */
#include "protocols/q3/renum.h"
#include "tests/unit.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int32_t map(const struct sg_q3_renum *r, int32_t seq)
{
    int32_t to;
    const char *t;
    return sg_q3_renum_map(r, seq, &to, &t) ? to : 0;
}

/* No change: the identity, whatever the numbers. */
static void case_identity(void)
{
    struct sg_q3_renum r;

    sg_q3_renum_init(&r);
    CHECK(sg_q3_renum_ack(&r, 5) == 5);
    for (int32_t s = 6; s < 400; s++) {
        CHECK(sg_q3_renum_is_new(&r, s));
        CHECK(sg_q3_renum_add(&r, s) == s);
        CHECK(!sg_q3_renum_is_new(&r, s));
        CHECK(map(&r, s) == s);
        CHECK(sg_q3_renum_ack(&r, s - 3) == s - 3);
    }
    CHECK(sg_q3_renum_forward(&r, 500) == 500);
    CHECK(!r.changed);
    sg_q3_renum_finish(&r);
}

/* An injection shifts later commands by one; acks map back. */
static void case_inject(void)
{
    struct sg_q3_renum r;

    sg_q3_renum_init(&r);
    sg_q3_renum_ack(&r, 10);
    CHECK(sg_q3_renum_add(&r, 11) == 11);
    CHECK(sg_q3_renum_inject(&r, "print \"hi\"") == 0); /* receiver 12 */
    CHECK(r.pending[0].receiver == 12);
    CHECK(sg_q3_renum_pending(&r) == 1);
    CHECK(sg_q3_renum_add(&r, 12) == 13);
    CHECK(sg_q3_renum_add(&r, 13) == 14);
    CHECK(map(&r, 11) == 11 && map(&r, 12) == 13 && map(&r, 13) == 14);
    /* the receiver has 11 only: the sender's 11 */
    CHECK(sg_q3_renum_ack(&r, 11) == 11);
    CHECK(sg_q3_renum_pending(&r) == 1);
    /* has the injection too: still the sender's 11 */
    CHECK(sg_q3_renum_ack(&r, 12) == 11);
    CHECK(sg_q3_renum_pending(&r) == 0 && r.npending == 0);
    CHECK(sg_q3_renum_ack(&r, 13) == 12);
    CHECK(sg_q3_renum_ack(&r, 14) == 13);
    CHECK(sg_q3_renum_forward(&r, 20) == 21);
    sg_q3_renum_finish(&r);
}

/* A dropped command: later ones move down; acks skip over it. */
static void case_drop(void)
{
    struct sg_q3_renum r;
    const char *t;
    int32_t to;

    sg_q3_renum_init(&r);
    sg_q3_renum_ack(&r, 0);
    for (int32_t s = 1; s <= 3; s++)
        sg_q3_renum_add(&r, s);
    CHECK(sg_q3_renum_drop(&r, 2) == 0);
    CHECK(!sg_q3_renum_map(&r, 2, &to, &t));
    CHECK(map(&r, 1) == 1 && map(&r, 3) == 2);
    CHECK(sg_q3_renum_add(&r, 4) == 3);
    /* receiver has 1: sender 2 (dropped) counts as received with it */
    CHECK(sg_q3_renum_ack(&r, 1) == 2);
    CHECK(sg_q3_renum_ack(&r, 2) == 3);
    CHECK(sg_q3_renum_ack(&r, 3) == 4);
    /* the last command dropped: acknowledging its predecessor acknowledges it */
    sg_q3_renum_add(&r, 5);
    CHECK(sg_q3_renum_drop(&r, 5) == 0);
    CHECK(sg_q3_renum_ack(&r, 3) == 5);
    CHECK(sg_q3_renum_drop(&r, 5) < 0);  /* twice */
    CHECK(sg_q3_renum_drop(&r, 99) < 0); /* unknown */
    sg_q3_renum_finish(&r);
}

/* Changed texts travel with their number, every resend. */
static void case_text(void)
{
    struct sg_q3_renum r;
    const char *t;
    int32_t to;

    sg_q3_renum_init(&r);
    sg_q3_renum_add(&r, 7);
    CHECK(sg_q3_renum_set_text(&r, 7, "print \"x\"") == 0);
    CHECK(sg_q3_renum_map(&r, 7, &to, &t) && to == 7 && t && strcmp(t, "print \"x\"") == 0);
    sg_q3_renum_add(&r, 8);
    CHECK(sg_q3_renum_map(&r, 8, &to, &t) && to == 8 && !t);
    /* the ring wraps: old entries are forgotten, texts freed (ASan checks) */
    for (int32_t s = 9; s < 9 + 3 * SG_Q3_RENUM_RING; s++) {
        sg_q3_renum_add(&r, s);
        if (s % 3 == 0)
            sg_q3_renum_set_text(&r, s, "cs 1 \"y\"");
    }
    sg_q3_renum_finish(&r);
}

/* A gamestate: injections still waiting are numbered after it. */
static void case_gamestate(void)
{
    struct sg_q3_renum r;

    sg_q3_renum_init(&r);
    sg_q3_renum_ack(&r, 0);
    sg_q3_renum_add(&r, 1);
    CHECK(sg_q3_renum_inject(&r, "print \"a\"") == 0); /* 2 */
    CHECK(sg_q3_renum_gamestate(&r, 3) == 4);
    CHECK(r.pending[0].receiver == 5);
    CHECK(sg_q3_renum_add(&r, 4) == 6);
    CHECK(sg_q3_renum_ack(&r, 5) == 3);
    CHECK(r.npending == 0);
    CHECK(sg_q3_renum_ack(&r, 6) == 4);
    sg_q3_renum_finish(&r);
}

/* Bounded: injections beyond the window are refused, not queued. */
static void case_limits(void)
{
    struct sg_q3_renum r;
    int refused = 0;

    sg_q3_renum_init(&r);
    CHECK(sg_q3_renum_inject(&r, "x") < 0); /* nothing known of the numbering yet */
    sg_q3_renum_ack(&r, 100);
    for (int i = 0; i < SG_Q3_RENUM_PENDING + 5; i++)
        refused += sg_q3_renum_inject(&r, "print \"z\"") < 0;
    CHECK(refused == 5);
    CHECK(sg_q3_renum_pending(&r) == SG_Q3_RENUM_PENDING);
    sg_q3_renum_finish(&r);
}

/*
 * Sequence numbers from a hostile peer: the extremes of int32 in any order
 * (found by fault@malformed_q3 under UBSan: a signed overflow in
 * sg_q3_renum_add).  Nothing may overflow; numbering stays consistent.
 */
static void case_extremes(void)
{
    static const int32_t seqs[] = {INT32_MAX, INT32_MIN, -2097151989, 1698718208, 0, -1,
                                   INT32_MIN + 1, INT32_MAX - 1, 5};

    for (size_t a = 0; a < sizeof(seqs) / sizeof(seqs[0]); a++) {
        struct sg_q3_renum r;

        sg_q3_renum_init(&r);
        sg_q3_renum_ack(&r, seqs[a]);
        CHECK(sg_q3_renum_inject(&r, "print \"x\"") == 0);
        for (size_t b = 0; b < sizeof(seqs) / sizeof(seqs[0]); b++) {
            int32_t to = sg_q3_renum_add(&r, seqs[b]);

            (void)to;
            (void)map(&r, seqs[b]);
            (void)sg_q3_renum_forward(&r, seqs[b]);
            (void)sg_q3_renum_drop(&r, seqs[b]);
            (void)sg_q3_renum_ack(&r, seqs[(a + b) % (sizeof(seqs) / sizeof(seqs[0]))]);
        }
        (void)sg_q3_renum_gamestate(&r, INT32_MAX);
        CHECK(sg_q3_renum_inject(&r, "print \"y\"") == 0);
        (void)sg_q3_renum_ack_peek(&r, INT32_MIN);
        sg_q3_renum_finish(&r);
    }

    /* wrapping past INT32_MAX keeps the offset an injection made */
    {
        struct sg_q3_renum r;

        sg_q3_renum_init(&r);
        sg_q3_renum_ack(&r, INT32_MAX - 2);
        CHECK(sg_q3_renum_add(&r, INT32_MAX - 1) == INT32_MAX - 1);
        CHECK(sg_q3_renum_inject(&r, "print \"z\"") == 0); /* receiver INT32_MAX */
        CHECK(sg_q3_renum_add(&r, INT32_MAX) == INT32_MIN);
        CHECK(sg_q3_renum_forward(&r, INT32_MAX) == INT32_MIN);
        sg_q3_renum_finish(&r);
    }
}

int main(int argc, char **argv)
{
    static const struct unit_case cases[] = {
        {"identity", case_identity}, {"inject", case_inject},       {"drop", case_drop},
        {"text", case_text},         {"gamestate", case_gamestate}, {"limits", case_limits},
        {"extremes", case_extremes},
    };

    return unit_main(argc, argv, cases, UNIT_COUNT(cases), NULL, NULL);
}
