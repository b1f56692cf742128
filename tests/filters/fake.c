/* Test support for filters (fake.h). */
#include "tests/filters/fake.h"

#include "protocols/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fake_set_text(void *state, unsigned i, const char *text, size_t len)
{
    struct fake_codec *fc = state;

    if (i >= fc->frame.nmsgs || fc->msgs[i].kind == SG_MSG_GAME)
        return SG_E_UNSUPPORTED;
    if (len >= sizeof(fc->texts[i]))
        len = sizeof(fc->texts[i]) - 1;
    memcpy(fc->texts[i], text, len);
    fc->texts[i][len] = '\0';
    fc->msgs[i].text = fc->texts[i];
    fc->msgs[i].text_len = len;
    fc->msgs[i].changed = true;
    fc->set_text_calls++;
    return 0;
}

static int fake_drop_msg(void *state, unsigned i)
{
    struct fake_codec *fc = state;

    if (i >= fc->frame.nmsgs)
        return SG_E_UNSUPPORTED;
    fc->msgs[i].dropped = true;
    fc->drop_calls++;
    return 0;
}

static int fake_inject(void *state, enum sg_dir dir, enum sg_msg_kind kind, const char *text,
                       size_t len)
{
    struct fake_codec *fc = state;
    struct fake_injection *in;

    if (fc->ninj >= 16)
        return SG_E_TOOBIG;
    in = &fc->inj[fc->ninj++];
    in->dir = dir;
    in->kind = kind;
    snprintf(in->text, sizeof(in->text), "%.*s", (int)len, text);
    return 0;
}

const struct sg_codec fake_codec_impl = {
    .name = "fake",
    .description = "test codec",
    .set_text = fake_set_text,
    .drop_msg = fake_drop_msg,
    .inject = fake_inject,
};

void fake_frame(struct fake_codec *fc, enum sg_dir dir, enum sg_frame_kind kind)
{
    memset(&fc->frame, 0, sizeof(fc->frame));
    memset(fc->msgs, 0, sizeof(fc->msgs));
    fc->frame.dir = dir;
    fc->frame.kind = kind;
    fc->frame.sequence = 1;
    fc->frame.ack = fc->frame.reliable_ack = fc->frame.ack_wanted = -1;
    fc->frame.msgs = fc->msgs;
}

unsigned fake_msg(struct fake_codec *fc, enum sg_msg_kind kind, const char *text)
{
    unsigned i = fc->frame.nmsgs++;

    fc->msgs[i].kind = kind;
    fc->msgs[i].name = sg_msg_kind_name(kind);
    fc->msgs[i].number = (int32_t)i;
    if (text) {
        snprintf(fc->texts[i], sizeof(fc->texts[i]), "%s", text);
        fc->msgs[i].text = fc->texts[i];
        fc->msgs[i].text_len = strlen(fc->texts[i]);
        fc->msgs[i].command = fc->msgs[i].text;
    }
    return i;
}

/* A minimal route section holding only `filter` blocks. */
struct fake_route {
    struct sg_filter_list *list;
};

static void *open_filter(void *obj, const struct sg_conf_directive *d,
                         const struct sg_conf_arg *args, int nargs, struct sg_conf_diag *diag,
                         const char *file)
{
    struct fake_route *r = obj;
    return sg_filter_conf_open(&r->list, NULL, args, nargs, diag, file);
}

static const struct sg_conf_directive route_dirs[] = {
    {.name = "filter", .type = SG_CONF_BLOCK, .open = open_filter,
     .child_section = sg_filter_conf_section},
    {NULL},
};
static const struct sg_conf_directive *const route_tables[] = {route_dirs, NULL};
static const struct sg_conf_section route_section = {.name = "route", .tables = route_tables};

static void log_to_buffer(void *ctx, enum sg_filter_log_level level, const char *filter,
                          uint64_t session, const char *text)
{
    struct fake_chain *fcn = ctx;
    size_t n = strlen(fcn->log);

    snprintf(fcn->log + n, sizeof(fcn->log) - n, "%s: %s\n", filter, text);
}

int fake_chain_open(struct fake_chain *fcn, const char *name, const char *conf_text, char *err,
                    size_t errlen)
{
    struct fake_route r = {0};
    struct sg_conf_diag diag;
    char text[8192], why[512];
    int rc;

    memset(fcn, 0, sizeof(*fcn));
    snprintf(text, sizeof(text), "filter %s {\n%s\n}\n", name, conf_text ? conf_text : "");
    sg_conf_diag_init(&diag);
    rc = sg_conf_parse_text("test.conf", text, strlen(text), &route_section, &r, &diag);
    if (rc == 0)
        rc = sg_filter_list_check(r.list, &diag);
    if (rc < 0) {
        if (err)
            snprintf(err, errlen, "%s", diag.count ? diag.msgs[0] : "config error");
        else
            for (int i = 0; i < diag.count && i < SG_CONF_MAX_DIAGS; i++)
                fprintf(stderr, "%s\n", diag.msgs[i]);
        sg_filter_list_unref(r.list);
        return rc;
    }
    fcn->list = r.list;
    rc = sg_chain_create(fcn->list, log_to_buffer, fcn, &fcn->chain, why, sizeof(why));
    if (rc < 0) {
        if (err)
            snprintf(err, errlen, "%s", why);
        else
            fprintf(stderr, "%s\n", why);
        sg_filter_list_unref(fcn->list);
        fcn->list = NULL;
        return rc;
    }
    fcn->session.id = 1;
    fcn->session.route = "test";
    fcn->session.client = "127.0.0.1:50000";
    fcn->session.server = "127.0.0.1:27960";
    fcn->session.codec = &fake_codec_impl;
    fcn->session.codec_state = &fcn->codec;
    fake_frame(&fcn->codec, SG_DIR_S2C, SG_FRAME_MESSAGE);
    return 0;
}

int fake_chain_run(struct fake_chain *fcn, uint64_t now_ms, struct sg_chain_result *res)
{
    static const uint8_t bytes[4] = {1, 2, 3, 4};
    struct sg_chain_result local;
    struct sg_filter_call call = {0};
    struct sg_filter_proxy proxy = {0};

    if (!res)
        res = &local;
    call.session = &fcn->session;
    call.frame = &fcn->codec.frame;
    call.data = bytes;
    call.len = sizeof(bytes);
    call.now_ms = now_ms;
    proxy.codec = &fake_codec_impl;
    proxy.codec_state = &fcn->codec;
    proxy.session_id = 1;
    sg_chain_run(fcn->chain, fcn->slots, &call, &proxy, res);
    sg_chain_taps(fcn->chain, fcn->slots, &call, &proxy, res);
    return res->drop ? SG_FILTER_DROP : res->changed ? SG_FILTER_CHANGED : SG_FILTER_PASS;
}

void fake_chain_close(struct fake_chain *fcn)
{
    if (fcn->chain) {
        sg_chain_session_end(fcn->chain, fcn->slots, &fcn->session);
        sg_chain_destroy(fcn->chain);
    }
    sg_filter_list_unref(fcn->list);
    fcn->chain = NULL;
    fcn->list = NULL;
}

bool fake_config_refused(const char *name, const char *conf_text, const char *want)
{
    struct fake_chain fc;
    char err[512] = "";

    if (fake_chain_open(&fc, name, conf_text, err, sizeof(err)) == 0) {
        fprintf(stderr, "%s accepted: %s\n", name, conf_text);
        fake_chain_close(&fc);
        return false;
    }
    if (!strstr(err, want)) {
        fprintf(stderr, "config %s\n  error: %s\n  wanted: %s\n", conf_text, err, want);
        return false;
    }
    return true;
}
