/*
 * Filter configuration and the chain (filters/chain.h).
 */
#include "filters/chain.h"

#include "protocols/error.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- plugins ---- */

const struct sg_filter_impl *sg_filter_find(struct sg_plugin *plugins, const char *name,
                                            struct sg_plugin **owner)
{
    if (owner)
        *owner = NULL;
    for (int i = 0; sg_builtin_filters[i]; i++)
        if (strcmp(sg_builtin_filters[i]->name, name) == 0)
            return sg_builtin_filters[i];
    for (struct sg_plugin *p = plugins; p; p = p->next) {
        for (int i = 0; p->table->filters[i]; i++) {
            if (strcmp(p->table->filters[i]->name, name) == 0) {
                if (owner)
                    *owner = p;
                return p->table->filters[i];
            }
        }
    }
    return NULL;
}

int sg_plugin_load(const char *path, struct sg_plugin **out, char *err, size_t errlen)
{
    char local[4096];
    const char *open_path = path;
    sg_filter_plugin_entry entry;
    const struct sg_filter_plugin *table;
    struct sg_plugin *p;
    void *h;

    *out = NULL;
    /* dlopen searches the library path for a bare name; a plugin path is a file. */
    if (!strchr(path, '/')) {
        snprintf(local, sizeof(local), "./%s", path);
        open_path = local;
    }
    dlerror();
    h = dlopen(open_path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        snprintf(err, errlen, "cannot load plugin '%s': %s", path, why ? why : "unknown error");
        return SG_E_CONFIG;
    }
    *(void **)&entry = dlsym(h, SG_FILTER_PLUGIN_ENTRY);
    if (!entry) {
        snprintf(err, errlen, "'%s' is not a slipgate plugin: it has no '%s' function", path,
                 SG_FILTER_PLUGIN_ENTRY);
        dlclose(h);
        return SG_E_CONFIG;
    }
    table = entry();
    if (!table) {
        snprintf(err, errlen, "plugin '%s': its entry point returned nothing", path);
        dlclose(h);
        return SG_E_CONFIG;
    }
    if (table->abi != SG_FILTER_ABI) {
        snprintf(err, errlen,
                 "plugin '%s' was built for filter ABI %u, this slipgate has ABI %u; rebuild it "
                 "against this slipgate's filter.h",
                 path, table->abi, SG_FILTER_ABI);
        dlclose(h);
        return SG_E_VERSION;
    }
    if (!table->filters || !table->filters[0]) {
        snprintf(err, errlen, "plugin '%s' has no filters", path);
        dlclose(h);
        return SG_E_CONFIG;
    }
    for (int i = 0; table->filters[i]; i++) {
        const struct sg_filter_impl *f = table->filters[i];
        if (!f->name || !f->on_frame || (f->conf_size == 0 && f->directives)) {
            snprintf(err, errlen, "plugin '%s': filter %d is incomplete (name, on_frame, conf)",
                     path, i);
            dlclose(h);
            return SG_E_CONFIG;
        }
        if (sg_filter_find(NULL, f->name, NULL)) {
            snprintf(err, errlen, "plugin '%s': filter '%s' has the name of a built-in filter",
                     path, f->name);
            dlclose(h);
            return SG_E_CONFIG;
        }
    }
    p = calloc(1, sizeof(*p));
    if (!p || !(p->path = strdup(path))) {
        free(p);
        dlclose(h);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    p->refs = 1;
    p->handle = h;
    p->table = table;
    *out = p;
    return 0;
}

void sg_plugin_ref(struct sg_plugin *p)
{
    if (p)
        p->refs++;
}

void sg_plugin_unref(struct sg_plugin *p)
{
    if (!p || --p->refs > 0)
        return;
    dlclose(p->handle);
    free(p->path);
    free(p);
}

/* ---- configuration ---- */

struct sg_filter_conf *sg_filter_conf_append(struct sg_filter_list **list,
                                             const struct sg_filter_impl *impl,
                                             struct sg_plugin *plugin, const char *label,
                                             const char *file, int line)
{
    struct sg_filter_conf *fc, **tail;

    if (!*list) {
        *list = calloc(1, sizeof(**list));
        if (!*list)
            return NULL;
        (*list)->refs = 1;
    }
    fc = calloc(1, sizeof(*fc) + impl->conf_size);
    if (!fc)
        return NULL;
    fc->label = strdup(label ? label : impl->name);
    fc->file = strdup(file ? file : "command line");
    if (!fc->label || !fc->file) {
        free(fc->label);
        free(fc->file);
        free(fc);
        return NULL;
    }
    fc->impl = impl;
    fc->plugin = plugin;
    sg_plugin_ref(plugin);
    fc->line = line;
    fc->tables[0] = impl->directives;
    fc->tables[1] = NULL;
    fc->section.name = impl->name;
    fc->section.tables = impl->directives ? fc->tables : NULL;
    if (impl->conf_init)
        impl->conf_init(fc->conf);
    for (tail = &(*list)->head; *tail; tail = &(*tail)->next)
        ;
    *tail = fc;
    (*list)->count++;
    return fc;
}

void *sg_filter_conf_open(struct sg_filter_list **list, struct sg_plugin *plugins,
                          const struct sg_conf_arg *args, int nargs, struct sg_conf_diag *diag,
                          const char *file)
{
    const struct sg_filter_impl *impl;
    struct sg_plugin *owner;
    struct sg_filter_conf *fc;

    if (nargs < 1 || nargs > 2) {
        const struct sg_conf_arg *at = nargs < 1 ? &args[-1] : &args[2];
        sg_conf_diag_error(diag, file, at->line, at->col,
                           "'filter' takes a filter name and an optional label, got %d values",
                           nargs);
        return NULL;
    }
    impl = sg_filter_find(plugins, args[0].text, &owner);
    if (!impl) {
        struct sg_conf_directive names[64] = {{0}};
        const struct sg_conf_directive *tables[2] = {names, NULL};
        const struct sg_conf_section all = {.name = "filters", .tables = tables};
        const char *best;
        int n = 0;

        /* the nearest name, built-in or from a plugin, by the config reader's measure */
        for (int i = 0; sg_builtin_filters[i] && n < 63; i++)
            names[n++].name = sg_builtin_filters[i]->name;
        for (struct sg_plugin *p = plugins; p; p = p->next)
            for (int i = 0; p->table->filters[i] && n < 63; i++)
                names[n++].name = p->table->filters[i]->name;
        best = sg_conf_suggest(&all, args[0].text);
        sg_conf_diag_error(diag, file, args[0].line, args[0].col,
                           "unknown filter '%s'%s%s%s (`slipgate filters` lists them; a plugin's "
                           "filters need its 'plugin PATH' line first)",
                           args[0].text, best ? "; did you mean '" : "", best ? best : "",
                           best ? "'?" : "");
        return NULL;
    }
    fc = sg_filter_conf_append(list, impl, owner, nargs == 2 ? args[1].text : NULL, file,
                               args[0].line);
    if (!fc) {
        sg_conf_diag_error(diag, file, args[0].line, args[0].col, "out of memory");
        return NULL;
    }
    return fc->conf;
}

static struct sg_filter_conf *conf_of(void *obj)
{
    return (struct sg_filter_conf *)((unsigned char *)obj - offsetof(struct sg_filter_conf, conf));
}

const struct sg_conf_section *sg_filter_conf_section(void *obj)
{
    struct sg_filter_conf *fc = conf_of(obj);
    return fc->impl->directives ? &fc->section : NULL;
}

int sg_filter_list_check(struct sg_filter_list *list, struct sg_conf_diag *diag)
{
    int rc = 0;

    for (struct sg_filter_conf *fc = list ? list->head : NULL; fc; fc = fc->next) {
        char why[256] = "";
        int err;

        if (fc->checked || !fc->impl->conf_check) {
            fc->checked = true;
            continue;
        }
        err = fc->impl->conf_check(fc->conf, why, sizeof(why));
        if (err < 0) {
            sg_conf_diag_error(diag, fc->file, fc->line, 0, "filter '%s': %s", fc->label,
                               why[0] ? why : sg_strerror(err));
            rc = SG_E_CONFIG;
            continue;
        }
        fc->checked = true;
    }
    return rc;
}

/* Same value for one directive? */
static bool directive_equal(const struct sg_conf_directive *d, const void *a, const void *b)
{
    const char *pa = (const char *)a + d->offset, *pb = (const char *)b + d->offset;

    switch (d->type) {
    case SG_CONF_STRING:
    case SG_CONF_PATH:
    case SG_CONF_ADDR: {
        const char *sa, *sb;
        memcpy(&sa, pa, sizeof(sa));
        memcpy(&sb, pb, sizeof(sb));
        return (!sa && !sb) || (sa && sb && strcmp(sa, sb) == 0);
    }
    case SG_CONF_INT:
    case SG_CONF_SIZE:
    case SG_CONF_DURATION:
        return memcmp(pa, pb, sizeof(int64_t)) == 0;
    case SG_CONF_BOOL:
        return memcmp(pa, pb, sizeof(bool)) == 0;
    case SG_CONF_ENUM:
        return memcmp(pa, pb, sizeof(int)) == 0;
    case SG_CONF_LIST: {
        const struct sg_conf_list *la = (const void *)pa, *lb = (const void *)pb;
        if (la->count != lb->count)
            return false;
        for (int i = 0; i < la->count; i++) {
            if (la->items[i].argc != lb->items[i].argc)
                return false;
            for (int j = 0; j < la->items[i].argc; j++)
                if (strcmp(la->items[i].argv[j], lb->items[i].argv[j]) != 0)
                    return false;
        }
        return true;
    }
    default:
        return false; /* CUSTOM: cannot tell, so treat as changed */
    }
}

bool sg_filter_list_equal(const struct sg_filter_list *a, const struct sg_filter_list *b)
{
    const struct sg_filter_conf *x = a ? a->head : NULL, *y = b ? b->head : NULL;

    for (; x && y; x = x->next, y = y->next) {
        if (x->impl != y->impl || strcmp(x->label, y->label) != 0)
            return false;
        for (const struct sg_conf_directive *d = x->impl->directives; d && d->name; d++)
            if (!directive_equal(d, x->conf, y->conf))
                return false;
    }
    return !x && !y;
}

void sg_filter_list_ref(struct sg_filter_list *list)
{
    if (list)
        list->refs++;
}

void sg_filter_list_unref(struct sg_filter_list *list)
{
    struct sg_filter_conf *fc, *next;

    if (!list || --list->refs > 0)
        return;
    for (fc = list->head; fc; fc = next) {
        next = fc->next;
        if (fc->checked && fc->impl->conf_free)
            fc->impl->conf_free(fc->conf);
        if (fc->impl->directives)
            sg_conf_free_strings(&fc->section, fc->conf);
        sg_plugin_unref(fc->plugin);
        free(fc->label);
        free(fc->file);
        free(fc);
    }
    free(list);
}

/* ---- running ---- */

int sg_chain_create(struct sg_filter_list *list, sg_chain_log_fn log, void *log_ctx,
                    struct sg_chain **out, char *err, size_t errlen)
{
    struct sg_chain *c;
    int i = 0;

    *out = NULL;
    if (!list || list->count == 0)
        return 0;
    c = calloc(1, sizeof(*c) + (size_t)list->count * sizeof(c->f[0]));
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    c->log = log;
    c->log_ctx = log_ctx;
    c->only_taps = true;
    for (struct sg_filter_conf *fc = list->head; fc; fc = fc->next, i++) {
        char why[256] = "";
        int rc;

        c->f[i].fc = fc;
        if (fc->impl->on_datagram)
            c->has_datagram_taps = true;
        if (!fc->impl->tap)
            c->only_taps = false;
        if (!fc->impl->create)
            continue;
        rc = fc->impl->create(fc->conf, &c->f[i].route_state, why, sizeof(why));
        if (rc < 0) {
            snprintf(err, errlen, "filter '%s' (%s:%d): %s", fc->label, fc->file, fc->line,
                     why[0] ? why : sg_strerror(rc));
            c->n = i;
            sg_chain_destroy(c);
            return rc;
        }
    }
    c->n = i;
    c->list = list;
    sg_filter_list_ref(list);
    *out = c;
    return 0;
}

void sg_chain_destroy(struct sg_chain *chain)
{
    if (!chain)
        return;
    for (int i = 0; i < chain->n; i++) {
        const struct sg_filter_impl *impl = chain->f[i].fc->impl;
        if (impl->flush)
            impl->flush(chain->f[i].route_state);
        if (impl->destroy)
            impl->destroy(chain->f[i].route_state);
    }
    sg_filter_list_unref(chain->list);
    free(chain);
}

static void prepare(struct sg_chain *chain, int i, void **slots, struct sg_filter_call *call,
                    struct sg_filter_proxy *proxy)
{
    proxy->chain = chain;
    proxy->index = i;
    call->proxy = proxy;
    call->slot = &slots[i];
    call->route_state = chain->f[i].route_state;
    call->conf = chain->f[i].fc->conf;
}

void sg_chain_run(struct sg_chain *chain, void **slots, struct sg_filter_call *call,
                  struct sg_filter_proxy *proxy, struct sg_chain_result *res)
{
    memset(res, 0, sizeof(*res));
    res->drop_filter = -1;
    call->delay_ms = 0;
    call->copies = 0;
    call->dropped = false;
    call->reencoded = false;
    call->drop_filter = -1;
    for (int i = 0; chain && i < chain->n; i++) {
        struct sg_chain_filter *f = &chain->f[i];
        unsigned injected_before = proxy->injected;
        int v;

        if (f->fc->impl->tap)
            continue;
        prepare(chain, i, slots, call, proxy);
        f->counters.seen++;
        v = f->fc->impl->on_frame(call);
        f->counters.injected += proxy->injected - injected_before;
        if (v < 0) {
            f->counters.errors++;
            v = SG_FILTER_PASS;
        }
        if (v == SG_FILTER_DROP) {
            f->counters.dropped++;
            res->drop = true;
            res->drop_filter = i;
            break;
        }
        if (v == SG_FILTER_CHANGED || proxy->injected != injected_before) {
            f->counters.changed += v == SG_FILTER_CHANGED;
            proxy->changed = true;
        } else {
            f->counters.passed++;
        }
    }
    res->changed = proxy->changed;
    res->delay_ms = call->delay_ms;
    res->copies = call->copies;
}

void sg_chain_taps(struct sg_chain *chain, void **slots, struct sg_filter_call *call,
                   struct sg_filter_proxy *proxy, const struct sg_chain_result *res)
{
    for (int i = 0; chain && i < chain->n; i++) {
        struct sg_chain_filter *f = &chain->f[i];

        if (!f->fc->impl->tap)
            continue;
        prepare(chain, i, slots, call, proxy);
        call->dropped = res->drop;
        call->drop_filter = res->drop_filter;
        f->counters.seen++;
        if (f->fc->impl->on_frame(call) < 0)
            f->counters.errors++;
        else
            f->counters.passed++;
    }
}

void sg_chain_datagram(struct sg_chain *chain, void **slots, struct sg_filter_call *call,
                       enum sg_leg leg, const uint8_t *data, size_t len,
                       const struct sockaddr *from, const struct sockaddr *to)
{
    struct sg_filter_proxy proxy = {0};

    if (!chain || !chain->has_datagram_taps)
        return;
    for (int i = 0; i < chain->n; i++) {
        if (!chain->f[i].fc->impl->on_datagram)
            continue;
        prepare(chain, i, slots, call, &proxy);
        chain->f[i].fc->impl->on_datagram(call, leg, data, len, from, to);
    }
}

void sg_chain_session_end(struct sg_chain *chain, void **slots,
                          const struct sg_filter_session *session)
{
    for (int i = 0; chain && i < chain->n; i++) {
        const struct sg_filter_impl *impl = chain->f[i].fc->impl;
        if (slots[i] && impl->session_end)
            impl->session_end(chain->f[i].route_state, session, slots[i]);
        slots[i] = NULL;
    }
}

void sg_chain_flush(struct sg_chain *chain)
{
    for (int i = 0; chain && i < chain->n; i++)
        if (chain->f[i].fc->impl->flush)
            chain->f[i].fc->impl->flush(chain->f[i].route_state);
}

/* ---- what filters may ask (filters/filter.h) ---- */

int sg_filter_set_text(struct sg_filter_call *call, unsigned i, const char *text, size_t len)
{
    struct sg_filter_proxy *p = call->proxy;

    if (!p || !p->codec || !p->codec->set_text || !call->frame || i >= call->frame->nmsgs)
        return SG_E_UNSUPPORTED;
    return p->codec->set_text(p->codec_state, i, text, len);
}

int sg_filter_drop_msg(struct sg_filter_call *call, unsigned i)
{
    struct sg_filter_proxy *p = call->proxy;

    if (!p || !p->codec || !p->codec->drop_msg || !call->frame || i >= call->frame->nmsgs)
        return SG_E_UNSUPPORTED;
    return p->codec->drop_msg(p->codec_state, i);
}

int sg_filter_inject(struct sg_filter_call *call, enum sg_dir dir, enum sg_msg_kind kind,
                     const char *text, size_t len)
{
    struct sg_filter_proxy *p = call->proxy;
    int err;

    if (!p || !p->codec || !p->codec->inject)
        return SG_E_UNSUPPORTED;
    err = p->codec->inject(p->codec_state, dir, kind, text, len);
    if (err >= 0)
        p->injected++;
    return err;
}

void sg_filter_log(struct sg_filter_call *call, enum sg_filter_log_level level, const char *fmt,
                   ...)
{
    struct sg_filter_proxy *p = call->proxy;
    char text[1024];
    va_list ap;

    if (!p || !p->chain || !p->chain->log)
        return;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    p->chain->log(p->chain->log_ctx, level, p->chain->f[p->index].fc->label,
                  call->session ? call->session->id : 0, text);
}
