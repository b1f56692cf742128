/*
 * /metrics in the Prometheus text format: one family per quantity, labels
 * per route (never per client: the series stay bounded by the routes,
 * codecs, filters and drop reasons of the configuration).  Counters end in
 * _total, sizes are bytes, times seconds.  Decode counters add the ended
 * sessions a route still keeps (--stats' list) to the live ones.
 */
#include "proxy/metrics.h"

#include "protocols/json.h"
#include "proxy/route.h"
#include "proxy/spectate.h"
#include "proxy/stats.h"
#include "sg_version.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CODECS 16

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value: backslash, quote and newline escaped. */
static void label_value(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            fprintf(f, "\\%c", *s);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

/* One histogram's series (hist.h): `labels` already written as `k="v",` pairs
 * (or empty); the `le` bounds are the edges at 1, 2 and 5 of each decade. */
static void histogram(FILE *f, const char *name, const char *labels, const struct sg_hist *h)
{
    for (unsigned k = 0; k < SG_HIST_PROM; k++)
        fprintf(f, "%s_bucket{%sle=\"%g\"} %llu\n", name, labels,
                (double)sg_hist_edges[sg_hist_prom[k]] / 1e9,
                (unsigned long long)sg_hist_below(h, sg_hist_prom[k]));
    fprintf(f, "%s_bucket{%sle=\"+Inf\"} %llu\n", name, labels, (unsigned long long)h->count);
    /* the labels without their trailing comma, in braces (none without labels) */
    if (labels[0]) {
        int n = (int)strlen(labels) - 1;

        fprintf(f, "%s_sum{%.*s} %.9f\n", name, n, labels, (double)h->sum_ns / 1e9);
        fprintf(f, "%s_count{%.*s} %llu\n", name, n, labels, (unsigned long long)h->count);
    } else {
        fprintf(f, "%s_sum %.9f\n", name, (double)h->sum_ns / 1e9);
        fprintf(f, "%s_count %llu\n", name, (unsigned long long)h->count);
    }
}

/* A route's histogram by direction. */
static void histogram_route(FILE *f, const char *name, const struct sg_route *r, const char *dir,
                            const struct sg_hist *h)
{
    char *labels = NULL;
    size_t size = 0;
    FILE *m = open_memstream(&labels, &size);

    if (!m)
        return;
    fputs("route=", m);
    label_value(m, r->conf.name);
    fprintf(m, ",direction=\"%s\",", dir);
    if (fclose(m) == 0)
        histogram(f, name, labels, h);
    free(labels);
}

static void sample_route(FILE *f, const char *name, const struct sg_route *r, const char *k2,
                         const char *v2, uint64_t value)
{
    fprintf(f, "%s{route=", name);
    label_value(f, r->conf.name);
    if (k2) {
        fprintf(f, ",%s=", k2);
        label_value(f, v2);
    }
    fprintf(f, "} %llu\n", (unsigned long long)value);
}

/* Decode counters of one route by codec: ended sessions kept, plus live ones. */
struct codec_sum {
    const char *name;
    struct sg_codec_stats c;
};

static void add_codec(struct codec_sum *sums, int *n, const char *name,
                      const struct sg_codec_stats *c)
{
    int i;

    for (i = 0; i < *n && strcmp(sums[i].name, name) != 0; i++)
        ;
    if (i == *n) {
        if (*n == MAX_CODECS)
            return;
        memset(&sums[i], 0, sizeof(sums[i]));
        sums[i].name = name;
        (*n)++;
    }
    sg_codec_stats_add(&sums[i].c, c);
}

/* Per route: decode sums by codec, demos written, live recordings and their bytes. */
struct route_sums {
    struct codec_sum codecs[MAX_CODECS];
    int ncodecs;
    uint64_t demos, recording, recording_bytes;
    uint64_t demo_bytes; /* of the finished demo files */
};

/* The file filter `i` of `chain` is writing for `s` now (its figures hook). */
static bool slot_progress(const struct sg_session *s, const struct sg_chain *chain, int i,
                          const char **path, uint64_t *bytes, uint64_t *opened)
{
    struct sg_filter_figures fig;

    if (!sg_session_slot_figures(s, chain, i, &fig) || !fig.open_path)
        return false;
    *path = fig.open_path;
    *bytes = fig.open_bytes;
    *opened = fig.opened_ms;
    return true;
}

static void route_sums(const struct sg_route *r, struct route_sums *out)
{
    memset(out, 0, sizeof(*out));
    out->demos = r->omitted.demos;
    out->demo_bytes = r->omitted.demo_bytes;
    for (int i = 0; i < SG_ROUTE_OMITTED_CODECS && r->omitted.codec[i]; i++)
        add_codec(out->codecs, &out->ncodecs, r->omitted.codec[i], &r->omitted.cstats[i]);
    for (size_t i = 0; i < r->nended; i++) {
        if (r->ended[i].codec)
            add_codec(out->codecs, &out->ncodecs, r->ended[i].codec, &r->ended[i].cstats);
        out->demos += r->ended[i].demos;
        out->demo_bytes += r->ended[i].demo_bytes;
    }
    for (const struct sg_session *s = r->sessions; s; s = s->next) {
        struct sg_session_summary sum;

        sg_stats_live_summary(s, &sum);
        if (sum.codec)
            add_codec(out->codecs, &out->ncodecs, sum.codec, &sum.cstats);
        out->demos += sum.demos;
        out->demo_bytes += sum.demo_bytes;
        for (int i = 0; r->chain && s->slots && i < r->chain->n; i++) {
            const char *path;
            uint64_t bytes, opened;
            if (slot_progress(s, r->chain, i, &path, &bytes, &opened)) {
                out->recording++;
                out->recording_bytes += bytes;
            }
        }
    }
}

static uint64_t rss_bytes(void)
{
    unsigned long long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "re");

    if (!f)
        return 0;
    if (fscanf(f, "%llu %llu", &size, &resident) != 2)
        resident = 0;
    fclose(f);
    return resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/*
 * One route as /metrics shows it: worker 0's and the same-named routes of
 * the other loops (read while they are paused) summed.  `filters` has one
 * entry per filter of worker 0's chain.
 */
struct route_agg {
    struct sg_counters c;
    struct sg_hist resid[2]; /* [SG_DIR_C2S], [SG_DIR_S2C] */
    uint64_t resid_untimed;
    uint64_t nsessions, total, evicted, kernel_drops;
    uint64_t rtt_samples[2], rtt_sum_ms[2];
    uint64_t rb_answers[SG_ROUTE_BY_PING + 1];
    struct route_sums sums;
    struct sg_filter_counters *filters;
};

static void route_agg(const struct sg_stats_view *v, struct sg_route *r, struct route_agg *out)
{
    const struct sg_route *g[SG_CONF_MAX_WORKERS];
    int n = sg_stats_route_group(v, r, g);
    struct route_sums one;

    memset(out, 0, sizeof(*out));
    if (r->chain && r->chain->n)
        out->filters = calloc((size_t)r->chain->n, sizeof(*out->filters));
    for (int k = 0; k < n; k++) {
        const struct sg_route *m = g[k];

        sg_route_poll_kernel_drops((struct sg_route *)(uintptr_t)m);
        out->c.c2s_packets += m->counters.c2s_packets;
        out->c.c2s_bytes += m->counters.c2s_bytes;
        out->c.s2c_packets += m->counters.s2c_packets;
        out->c.s2c_bytes += m->counters.s2c_bytes;
        sg_hist_merge(&out->resid[SG_DIR_C2S], &m->resid[SG_DIR_C2S]);
        sg_hist_merge(&out->resid[SG_DIR_S2C], &m->resid[SG_DIR_S2C]);
        out->resid_untimed += m->resid_untimed;
        for (int d = 0; d < SG_DROP__COUNT; d++)
            out->c.drops[d] += m->counters.drops[d];
        out->nsessions += m->nsessions;
        out->total += m->sessions_total;
        out->evicted += m->sessions_evicted;
        out->kernel_drops += m->kernel_drops;
        for (int d = 0; d < 2; d++) {
            out->rtt_samples[d] += m->rtt_samples[d];
            out->rtt_sum_ms[d] += m->rtt_sum_ms[d];
        }
        for (int a = 0; a <= SG_ROUTE_BY_PING; a++)
            out->rb_answers[a] += m->rb_answers[a];
        route_sums(m, &one);
        out->sums.demos += one.demos;
        out->sums.demo_bytes += one.demo_bytes;
        out->sums.recording += one.recording;
        out->sums.recording_bytes += one.recording_bytes;
        for (int c = 0; c < one.ncodecs; c++)
            add_codec(out->sums.codecs, &out->sums.ncodecs, one.codecs[c].name, &one.codecs[c].c);
        for (int i = 0; out->filters && m->chain && m->chain->n == r->chain->n && i < m->chain->n;
             i++) {
            sg_filter_counters_add(&out->filters[i], &m->chain->f[i].counters);
        }
    }
}

/* The spectator ports' figures (proxy/spectate.h), for the routes that have one. */
static void spectator_metrics(FILE *f, const struct sg_route *routes)
{
    static const struct {
        const char *name, *type, *help;
    } fam[] = {
        {"slipgate_spectators_active", "gauge", "spectators watching now (spectate port)"},
        {"slipgate_spectators_total", "counter", "spectators admitted"},
        {"slipgate_spectators_refused_total", "counter",
         "spectator connects refused (password, challenge, protocol, max_spectators)"},
        {"slipgate_spectator_datagrams_total", "counter",
         "datagrams on the spectator port, by direction (in: received, out: sent)"},
        {"slipgate_spectator_bytes_total", "counter",
         "UDP payload bytes on the spectator port, by direction"},
        {"slipgate_spectator_handshakes_limited_total", "counter",
         "handshake datagrams dropped unread: their address had 10 answers that second"},
    };
    const struct sg_route *r;

    for (size_t k = 0; k < sizeof(fam) / sizeof(fam[0]); k++) {
        family(f, fam[k].name, fam[k].type, fam[k].help);
        for (r = routes; r; r = r->next) {
            const struct sg_spectate *sp = r->spect;

            if (!sp)
                continue;
            if (k == 0)
                sample_route(f, fam[k].name, r, NULL, NULL, sp->n);
            else if (k == 1)
                sample_route(f, fam[k].name, r, NULL, NULL, sp->stats.started);
            else if (k == 2)
                sample_route(f, fam[k].name, r, NULL, NULL, sp->stats.refused);
            else if (k == 3) {
                sample_route(f, fam[k].name, r, "direction", "in", sp->stats.datagrams_in);
                sample_route(f, fam[k].name, r, "direction", "out", sp->stats.datagrams_out);
            } else if (k == 4) {
                sample_route(f, fam[k].name, r, "direction", "in", sp->stats.bytes_in);
                sample_route(f, fam[k].name, r, "direction", "out", sp->stats.bytes_out);
            } else {
                sample_route(f, fam[k].name, r, NULL, NULL, sp->stats.limited);
            }
        }
    }
}

void sg_metrics_write(FILE *f, const struct sg_stats_view *v, const struct sg_http_stats *st)
{
    struct route_agg *agg;
    struct route_sums *sums;
    int nroutes = 0, i;
    const struct sg_route *r;

    for (r = v->loop[0].routes; r; r = r->next)
        nroutes++;
    agg = calloc(nroutes ? (size_t)nroutes : 1, sizeof(*agg));
    sums = calloc(nroutes ? (size_t)nroutes : 1, sizeof(*sums));
    if (!agg || !sums) {
        free(agg);
        free(sums);
        return;
    }
    i = 0;
    for (struct sg_route *rw = v->loop[0].routes; rw; rw = rw->next, i++) {
        route_agg(v, rw, &agg[i]);
        sums[i] = agg[i].sums;
    }

    /* The process. */
    family(f, "slipgate_build_info", "gauge", "slipgate's version (always 1)");
    fprintf(f, "slipgate_build_info{version=\"%s\"} 1\n", SG_VERSION);
    family(f, "slipgate_start_time_seconds", "gauge", "when slipgate started, since the epoch");
    fprintf(f, "slipgate_start_time_seconds %.3f\n", (double)v->started_wall_ms / 1000.0);
    family(f, "slipgate_process_resident_memory_bytes", "gauge", "resident memory of the process");
    fprintf(f, "slipgate_process_resident_memory_bytes %llu\n", (unsigned long long)rss_bytes());
    family(f, "slipgate_config_last_reload_successful", "gauge",
           "whether the last reload (SIGHUP) was applied: 1, or 0 when the file was refused "
           "and the old configuration stayed (1 before any reload)");
    fprintf(f, "slipgate_config_last_reload_successful %d\n", v->reload_ok ? 1 : 0);
    family(f, "slipgate_config_last_reload_success_timestamp_seconds", "gauge",
           "when the configuration in force was loaded (the start, or the last reload applied), "
           "since the epoch");
    fprintf(f, "slipgate_config_last_reload_success_timestamp_seconds %.3f\n",
            (double)v->reload_ok_ms / 1000.0);
    family(f, "slipgate_config_reloads_total", "counter", "reloads (SIGHUP), by result");
    fprintf(f, "slipgate_config_reloads_total{result=\"applied\"} %llu\n",
            (unsigned long long)v->reloads_applied);
    fprintf(f, "slipgate_config_reloads_total{result=\"refused\"} %llu\n",
            (unsigned long long)v->reloads_refused);
    family(f, "slipgate_draining", "gauge",
           "1 from SIGTERM until the stop while drain_timeout lets the sessions end, else 0");
    fprintf(f, "slipgate_draining %d\n", v->draining ? 1 : 0);
    family(f, "slipgate_loop_lag_seconds", "gauge",
           "how late the event loop ran a timer at the last 0.5 s tick");
    fprintf(f, "slipgate_loop_lag_seconds %.6f\n", st->loop_lag_s);
    {
        struct sg_hist th = {{0}};

        for (int w = 0; w < v->nworkers; w++)
            if (v->loop[w].present && v->loop[w].turn_hist)
                sg_hist_merge(&th, v->loop[w].turn_hist);
        family(f, "slipgate_loop_turn_seconds", "histogram",
               "the work of each event-loop turn (every worker loop's), the wait for "
               "datagrams left out: what a turn's work delays the next datagram by");
        histogram(f, "slipgate_loop_turn_seconds", "", &th);
    }

    /* Each route's addresses: join on `route` to name the server. */
    family(f, "slipgate_route_info", "gauge", "a route's listen and server addresses (always 1)");
    for (r = v->loop[0].routes; r; r = r->next) {
        fprintf(f, "slipgate_route_info{route=");
        label_value(f, r->conf.name);
        fprintf(f, ",listen=");
        label_value(f, r->conf.listen ? r->conf.listen : "");
        fprintf(f, ",server=");
        label_value(f, r->conf.server ? r->conf.server : "");
        fprintf(f, "} 1\n");
    }

    /* Datagrams and bytes relayed, drops. */
    family(f, "slipgate_datagrams_total", "counter", "datagrams forwarded, by direction");
    for (r = v->loop[0].routes, i = 0; r; r = r->next, i++) {
        sample_route(f, "slipgate_datagrams_total", r, "direction", "c2s", agg[i].c.c2s_packets);
        sample_route(f, "slipgate_datagrams_total", r, "direction", "s2c", agg[i].c.s2c_packets);
    }
    family(f, "slipgate_datagram_residence_seconds", "histogram",
           "each relayed datagram's time in slipgate: from the kernel's receive timestamp "
           "to just before the sendmmsg that hands its bytes to the kernel, by direction");
    for (r = v->loop[0].routes, i = 0; r; r = r->next, i++) {
        histogram_route(f, "slipgate_datagram_residence_seconds", r, "c2s",
                        &agg[i].resid[SG_DIR_C2S]);
        histogram_route(f, "slipgate_datagram_residence_seconds", r, "s2c",
                        &agg[i].resid[SG_DIR_S2C]);
    }
    family(f, "slipgate_datagram_residence_untimed_total", "counter",
           "relayed datagrams the kernel gave no receive timestamp: their residence starts at "
           "a clock read when slipgate picked them up");
    for (r = v->loop[0].routes, i = 0; r; r = r->next, i++)
        sample_route(f, "slipgate_datagram_residence_untimed_total", r, NULL, NULL,
                     agg[i].resid_untimed);
    family(f, "slipgate_bytes_total", "counter", "UDP payload bytes forwarded, by direction");
    for (r = v->loop[0].routes, i = 0; r; r = r->next, i++) {
        sample_route(f, "slipgate_bytes_total", r, "direction", "c2s", agg[i].c.c2s_bytes);
        sample_route(f, "slipgate_bytes_total", r, "direction", "s2c", agg[i].c.s2c_bytes);
    }
    family(f, "slipgate_drops_total", "counter", "datagrams not forwarded, by reason");
    for (r = v->loop[0].routes, i = 0; r; r = r->next, i++)
        for (int d = 0; d < SG_DROP__COUNT; d++)
            sample_route(f, "slipgate_drops_total", r, "reason", sg_drop_names[d],
                         agg[i].c.drops[d]);
    family(f, "slipgate_listener_kernel_drops_total", "counter",
           "datagrams the kernel dropped at the listening socket (full receive buffer)");
    for (r = v->loop[0].routes, i = 0; r; r = r->next, i++)
        sample_route(f, "slipgate_listener_kernel_drops_total", r, NULL, NULL, agg[i].kernel_drops);

    /* Round trips timed (the players' pings), by leg. */
    family(f, "slipgate_rtt_seconds", "summary",
           "round trips timed from the traffic: leg client (a server datagram relayed until "
           "the client acknowledges it), leg server (the same towards the server)");
    for (r = v->loop[0].routes, i = 0; r; r = r->next, i++) {
        static const char *const leg[2] = {[SG_DIR_C2S] = "server", [SG_DIR_S2C] = "client"};
        for (int d = 0; d < 2; d++) {
            fprintf(f, "slipgate_rtt_seconds_sum{route=");
            label_value(f, r->conf.name);
            fprintf(f, ",leg=\"%s\"} %.3f\n", leg[d], (double)agg[i].rtt_sum_ms[d] / 1000.0);
            fprintf(f, "slipgate_rtt_seconds_count{route=");
            label_value(f, r->conf.name);
            fprintf(f, ",leg=\"%s\"} %llu\n", leg[d], (unsigned long long)agg[i].rtt_samples[d]);
        }
    }

    /* route_by prx: what a route answered itself, as a proxy node does. */
    family(f, "slipgate_prx_answers_total", "counter",
           "route_by prx: queries the route answered itself, by kind");
    for (r = v->loop[0].routes, i = 0; r; r = r->next, i++) {
        static const char *const kind[SG_ROUTE_BY_PING + 1] = {
            [SG_ROUTE_BY_GETCHALLENGE] = "challenge",
            [SG_ROUTE_BY_PINGSTATUS] = "pingstatus",
            [SG_ROUTE_BY_STATUS] = "status",
            [SG_ROUTE_BY_PING] = "ping"};
        if (!r->rb)
            continue;
        for (int a = 0; a <= SG_ROUTE_BY_PING; a++)
            if (kind[a])
                sample_route(f, "slipgate_prx_answers_total", r, "kind", kind[a],
                             agg[i].rb_answers[a]);
    }

    /* Spectators (worker 0's route holds the spectator port). */
    spectator_metrics(f, v->loop[0].routes);

    /* Sessions. */
    family(f, "slipgate_sessions_active", "gauge", "sessions (clients) now");
    for (r = v->loop[0].routes, i = 0; r; r = r->next, i++)
        sample_route(f, "slipgate_sessions_active", r, NULL, NULL, agg[i].nsessions);
    family(f, "slipgate_sessions_total", "counter", "sessions started");
    for (r = v->loop[0].routes, i = 0; r; r = r->next, i++)
        sample_route(f, "slipgate_sessions_total", r, NULL, NULL, agg[i].total);
    family(f, "slipgate_sessions_evicted_total", "counter",
           "sessions ended to make room when the table was full");
    for (r = v->loop[0].routes, i = 0; r; r = r->next, i++)
        sample_route(f, "slipgate_sessions_evicted_total", r, NULL, NULL, agg[i].evicted);

    /* Decoding, by codec. */
    {
        static const struct {
            const char *name, *help;
            size_t off;
        } dec[] = {
            {"slipgate_decode_datagrams_total", "datagrams decoded",
             offsetof(struct sg_codec_stats, decoded)},
            {"slipgate_decode_messages_total", "messages decoded",
             offsetof(struct sg_codec_stats, messages)},
            {"slipgate_decode_oob_total", "connectionless (out-of-band) datagrams decoded",
             offsetof(struct sg_codec_stats, oob)},
            {"slipgate_decode_rejected_total", "datagrams the codec refused (not its game)",
             offsetof(struct sg_codec_stats, rejected)},
            {"slipgate_decode_errors_total", "datagrams that failed to decode (still relayed)",
             offsetof(struct sg_codec_stats, errors)},
            {"slipgate_reencodes_total", "messages rebuilt from their decoded form",
             offsetof(struct sg_codec_stats, reencoded)},
            {"slipgate_reencodes_identical_total",
             "rebuilt messages byte-identical to the original",
             offsetof(struct sg_codec_stats, reencode_identical)},
            {"slipgate_reencode_errors_total", "rebuilds that failed (the original went out)",
             offsetof(struct sg_codec_stats, reencode_errors)},
        };
        for (size_t k = 0; k < sizeof(dec) / sizeof(dec[0]); k++) {
            family(f, dec[k].name, "counter", dec[k].help);
            i = 0;
            for (r = v->loop[0].routes; r; r = r->next, i++)
                for (int c = 0; c < sums[i].ncodecs; c++) {
                    uint64_t n;
                    memcpy(&n, (const char *)&sums[i].codecs[c].c + dec[k].off, sizeof(n));
                    sample_route(f, dec[k].name, r, "codec", sums[i].codecs[c].name, n);
                }
        }
    }

    /* Filters, by label and position in the chain (0 first, as in --stats' "filters"). */
    {
        static const struct {
            const char *name, *help;
            size_t off;
        } flt[] = {
            {"slipgate_filter_frames_total", "frames the filter saw",
             offsetof(struct sg_filter_counters, seen)},
            {"slipgate_filter_passed_total", "frames the filter passed",
             offsetof(struct sg_filter_counters, passed)},
            {"slipgate_filter_dropped_total", "frames the filter dropped",
             offsetof(struct sg_filter_counters, dropped)},
            {"slipgate_filter_changed_total", "frames the filter changed",
             offsetof(struct sg_filter_counters, changed)},
            {"slipgate_filter_injected_total", "messages the filter injected",
             offsetof(struct sg_filter_counters, injected)},
            {"slipgate_filter_errors_total", "errors of the filter",
             offsetof(struct sg_filter_counters, errors)},
        };
        for (size_t k = 0; k < sizeof(flt) / sizeof(flt[0]); k++) {
            family(f, flt[k].name, "counter", flt[k].help);
            for (r = v->loop[0].routes, i = 0; r; r = r->next, i++)
                for (int c = 0; r->chain && agg[i].filters && c < r->chain->n; c++) {
                    uint64_t n;
                    memcpy(&n, (const char *)&agg[i].filters[c] + flt[k].off, sizeof(n));
                    /* two filters may share a label: their position tells them apart */
                    fprintf(f, "%s{route=", flt[k].name);
                    label_value(f, r->conf.name);
                    fputs(",filter=", f);
                    label_value(f, r->chain->f[c].fc->label);
                    fprintf(f, ",position=\"%d\"} %llu\n", c, (unsigned long long)n);
                }
        }
    }

    /* Demos. */
    family(f, "slipgate_demos_written_total", "counter",
           "demo files written (that got at least one message)");
    i = 0;
    for (r = v->loop[0].routes; r; r = r->next, i++)
        sample_route(f, "slipgate_demos_written_total", r, NULL, NULL, sums[i].demos);
    family(f, "slipgate_demo_bytes_total", "counter",
           "bytes of the demo files finished (the ones being written count once they end)");
    i = 0;
    for (r = v->loop[0].routes; r; r = r->next, i++)
        sample_route(f, "slipgate_demo_bytes_total", r, NULL, NULL, sums[i].demo_bytes);
    family(f, "slipgate_recordings_active", "gauge", "demo files being written now");
    i = 0;
    for (r = v->loop[0].routes; r; r = r->next, i++)
        sample_route(f, "slipgate_recordings_active", r, NULL, NULL, sums[i].recording);
    family(f, "slipgate_recording_bytes", "gauge", "bytes in the demo files being written now");
    i = 0;
    for (r = v->loop[0].routes; r; r = r->next, i++)
        sample_route(f, "slipgate_recording_bytes", r, NULL, NULL, sums[i].recording_bytes);

    /* The HTTP server's live stream. */
    family(f, "slipgate_http_stream_clients", "gauge", "/api/stream clients connected");
    fprintf(f, "slipgate_http_stream_clients %llu\n", (unsigned long long)st->stream_clients);
    family(f, "slipgate_http_stream_events_total", "counter", "events queued to stream clients");
    fprintf(f, "slipgate_http_stream_events_total %llu\n", (unsigned long long)st->stream_events);
    family(f, "slipgate_http_stream_dropped_total", "counter",
           "events a slow stream client lost (its buffer was full)");
    fprintf(f, "slipgate_http_stream_dropped_total %llu\n", (unsigned long long)st->stream_dropped);
    family(f, "slipgate_http_evicted_total", "counter",
           "idle HTTP connections closed to let a new client in (all were taken)");
    fprintf(f, "slipgate_http_evicted_total %llu\n", (unsigned long long)st->evicted);
    for (i = 0; i < nroutes; i++)
        free(agg[i].filters);
    free(agg);
    free(sums);
}

static void json_str(FILE *f, const char *s)
{
    sg_json_cstr(f, s);
}

/* The demo files being written by the sessions of `routes` (one loop's). */
static void recordings_of(FILE *f, const struct sg_route *routes, uint64_t now, bool *pfirst)
{
    bool first = *pfirst;

    for (const struct sg_route *r = routes; r; r = r->next)
        for (const struct sg_session *s = r->sessions; s; s = s->next)
            for (int i = 0; r->chain && s->slots && i < r->chain->n; i++) {
                const char *path;
                uint64_t bytes, opened;

                if (!slot_progress(s, r->chain, i, &path, &bytes, &opened))
                    continue;
                fprintf(f, "%s\n  {\"route\": ", first ? "" : ",");
                json_str(f, r->conf.name);
                fprintf(f, ", \"session\": %llu, \"client\": ", (unsigned long long)s->sum.id);
                json_str(f, s->sum.client);
                fputs(", \"filter\": ", f);
                json_str(f, r->chain->f[i].fc->label);
                fputs(", \"path\": ", f);
                json_str(f, path);
                fprintf(f, ", \"bytes\": %llu, \"map\": ", (unsigned long long)bytes);
                json_str(f, s->map);
                /* the file's own start: a session can write several (levels, max_size parts) */
                fprintf(f, ", \"started_ms\": %llu, \"duration_ms\": %llu}",
                        (unsigned long long)opened,
                        (unsigned long long)(now > opened ? now - opened : 0));
                first = false;
            }
    *pfirst = first;
}

void sg_metrics_recordings_json(FILE *f, const struct sg_stats_view *v)
{
    uint64_t now = sg_now_wall_ms();
    bool first = true;

    fputs("{\"recordings\": [", f);
    recordings_of(f, v->loop[0].routes, now, &first);
    /* the other loops' too (read while they are paused) */
    for (int w = 1; w < v->nworkers; w++)
        if (v->loop[w].present)
            recordings_of(f, v->loop[w].routes, now, &first);
    fputs(first ? "]}\n" : "\n]}\n", f);
}
