/*
 * Prints the player state of every valid snapshot of a Quake 3 demo, one
 * line each: "serverTime clientNum pm_flags origin0 origin1 origin2"
 * (origins as the game's float bits, printed as floats).  For the
 * spectator real-peer test (tests/peers/spectate_peers.py), which compares
 * a spectator's own demo with the watched player's.  Exit 1 when a
 * message does not decode.  Usage: q3_demo_origins FILE
 */
#include <stdio.h>
#include <string.h>

#include "protocols/error.h"
#include "protocols/q3/demo.h"
#include "protocols/q3/fields.h"

static float as_float(int32_t bits)
{
    float f;

    memcpy(&f, &bits, sizeof(f));
    return f;
}

int main(int argc, char **argv)
{
    static uint8_t buf[SG_Q3_MAX_MSGLEN];
    struct sg_q3_demo_reader r;
    struct sg_q3_svmsg msg;
    struct sg_q3_state *st;
    int32_t seq, last = -1;
    size_t len;
    int err, bad = 0;

    if (argc != 2) {
        fprintf(stderr, "usage: %s FILE\n", argv[0]);
        return 2;
    }
    if (sg_q3_demo_reader_open(&r, argv[1]) < 0) {
        perror(argv[1]);
        return 2;
    }
    st = sg_q3_state_create(r.protocol ? r.protocol : 68);
    sg_q3_svmsg_init(&msg);
    while ((err = sg_q3_demo_read(&r, &seq, buf, &len)) == 1) {
        const struct sg_q3_snapshot *s;

        if (sg_q3_parse_server_message(st, seq, buf, len, &msg) < 0) {
            bad++;
            continue;
        }
        s = sg_q3_state_latest(st);
        if (!s || s->message_num == last)
            continue;
        last = s->message_num;
        printf("%d %d %d %.3f %.3f %.3f\n", s->server_time, s->ps.f[SG_Q3_PS_CLIENTNUM],
               s->ps.f[SG_Q3_PS_PM_FLAGS], as_float(s->ps.f[SG_Q3_PS_ORIGIN0]),
               as_float(s->ps.f[SG_Q3_PS_ORIGIN1]), as_float(s->ps.f[SG_Q3_PS_ORIGIN2]));
    }
    sg_q3_svmsg_finish(&msg);
    sg_q3_state_destroy(st);
    sg_q3_demo_reader_finish(&r);
    if (err < 0 && err != SG_E_TRUNCATED)
        bad++;
    return bad ? 1 : 0;
}
