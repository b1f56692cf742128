/*
 * The report: two tables (throughput; latency and memory) with the ratios to
 * minrelay and the added latency over direct, the project's targets, and the
 * command that reproduces the run; or the same figures as one JSON object.
 */
#include "sg_version.h"
#include "tests/bench/bench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Targets from the project issue, printed beside the figures. */
#define TARGET_PASSTHROUGH 0.9
#define TARGET_DECODE      0.7
#define TARGET_P99_US      100.0
#define TARGET_P99_RATE    20000.0
#define TARGET_RSS_KIB     512.0
#define OTHERS_WARN        0.25 /* cores used by other processes worth a warning */

static const struct sg_bench_result *find_result(const struct sg_bench *b, const char *name)
{
    for (size_t i = 0; i < b->nres; i++)
        if (strcmp(b->res[i].mode->name, name) == 0 && b->res[i].status == SG_BENCH_OK)
            return &b->res[i];
    return NULL;
}

/* a / b, or NAN when it means nothing. */
static double ratio(double a, double b)
{
    return a > 0 && b > 0 ? a / b : NAN;
}

void sg_bench_report_command(const struct sg_bench *b, FILE *f)
{
    const struct sg_bench_opts *o = &b->o;

    fprintf(f, "%s --sessions %u --rate %.0f --duration %g --steps %u --step-ms %.0f", b->self,
            o->sessions, o->rate, o->duration, o->steps, o->step_s * 1000);
    fprintf(f, " --modes %s --slipgate %s", o->modes, o->slipgate);
    if (strcmp(o->game, "q3") != 0)
        fprintf(f, " --game %s", o->game);
    if (o->builtin_shape)
        fputs(" --shape builtin", f);
    else
        fprintf(f, " --captures %s", o->captures);
    if (o->pin)
        fputs(" --pin", f);
    if (o->json)
        fputs(" --json", f);
}

void sg_bench_cpu_list(const struct sg_bench_cpus *c, char *out, size_t len)
{
    size_t off = 0;

    out[0] = '\0';
    for (unsigned i = 0; i < c->n && off < len; i++) {
        unsigned j = i;

        while (j + 1 < c->n && c->cpu[j + 1] == c->cpu[j] + 1)
            j++;
        if (j > i)
            off += (size_t)snprintf(out + off, len - off, "%s%d-%d", i ? "," : "", c->cpu[i],
                                    c->cpu[j]);
        else
            off += (size_t)snprintf(out + off, len - off, "%s%d", i ? "," : "", c->cpu[i]);
        i = j;
    }
}

/* Where --pin put the harness and the relays (a one-loop relay's CPU, the widest's). */
static void pin_lists(const struct sg_bench *b, char *harness, char *one, char *widest, size_t len)
{
    struct sg_bench_cpus c;

    sg_bench_cpu_list(&b->harness, harness, len);
    sg_bench_relay_cpus(b, 1, &c);
    sg_bench_cpu_list(&c, one, len);
    sg_bench_relay_cpus(b, b->relay_loops_max, &c);
    sg_bench_cpu_list(&c, widest, len);
}

static void cell(FILE *f, int width, double v, int decimals)
{
    if (isnan(v))
        fprintf(f, " %*s", width, "-");
    else
        fprintf(f, " %*.*f", width, decimals, v);
}

/* One row per mode that ran: each latency round's p99, or its page faults. */
static void round_rows(FILE *f, const struct sg_bench *b, bool faults)
{
    for (size_t i = 0; i < b->nres; i++) {
        const struct sg_bench_result *m = &b->res[i];

        if (m->status != SG_BENCH_OK)
            continue;
        fprintf(f, "%-18s", m->mode->name);
        for (unsigned k = 0; k < m->nrounds; k++)
            cell(f, 8,
                 !faults                   ? m->round_p99[k]
                 : m->round_faults[k] >= 0 ? (double)m->round_faults[k]
                                           : NAN,
                 0);
        fputc('\n', f);
    }
}

/* The start of a row: the mode's name, or the whole row when it did not run. */
static bool row_start(FILE *f, const struct sg_bench_result *m)
{
    fprintf(f, "%-18s", m->mode->name);
    if (m->status == SG_BENCH_NA)
        fprintf(f, " n/a (%s)\n", m->unavailable);
    else if (m->status == SG_BENCH_ERROR)
        fprintf(f, " error: %s\n", m->error);
    return m->status == SG_BENCH_OK;
}

static void print_targets(const struct sg_bench *b, FILE *f)
{
    const struct sg_bench_result *mr = find_result(b, "minrelay"), *dr = find_result(b, "direct");
    const struct sg_bench_result *sg = find_result(b, "slipgate");
    const struct sg_bench_result *dec = find_result(b, "slipgate-decode");
    double r;

    fprintf(f, "\ntargets (reported, not tested):\n");
    r = sg && mr ? ratio(sg->tput_pps, mr->tput_pps) : NAN;
    if (isnan(r))
        fprintf(f, "  pass-through >= %.1f x minrelay: not measured\n", TARGET_PASSTHROUGH);
    else
        fprintf(f, "  pass-through >= %.1f x minrelay: %.2f x, %s (CPU efficiency: %.2f x)\n",
                TARGET_PASSTHROUGH, r, r >= TARGET_PASSTHROUGH ? "met" : "NOT met",
                ratio(mr->tput_ns, sg->tput_ns));
    r = dec && mr ? ratio(dec->tput_pps, mr->tput_pps) : NAN;
    if (isnan(r))
        fprintf(f, "  full decode >= %.1f x minrelay: not measured\n", TARGET_DECODE);
    else
        fprintf(f, "  full decode >= %.1f x minrelay: %.2f x, %s\n", TARGET_DECODE, r,
                r >= TARGET_DECODE ? "met" : "NOT met");
    if (sg && dr && b->o.rate == TARGET_P99_RATE)
        fprintf(f, "  added p99 <= %.0f us at %.0f pkt/s: %+.1f us, %s\n", TARGET_P99_US,
                TARGET_P99_RATE, sg->p99 - dr->p99,
                sg->p99 - dr->p99 <= TARGET_P99_US ? "met" : "NOT met");
    else if (sg && dr)
        fprintf(f,
                "  added p99 <= %.0f us at %.0f pkt/s: %+.1f us at %.0f pkt/s (run with "
                "--rate %.0f to compare)\n",
                TARGET_P99_US, TARGET_P99_RATE, sg->p99 - dr->p99, b->o.rate, TARGET_P99_RATE);
    else
        fprintf(f, "  added p99 <= %.0f us at %.0f pkt/s: not measured\n", TARGET_P99_US,
                TARGET_P99_RATE);
    if (dec && dec->rss_load >= 0)
        fprintf(f, "  RSS <= %.0f KiB per Q3 session: %.2f KiB per decoded session, %s\n",
                TARGET_RSS_KIB, dec->rss_per_session,
                dec->rss_per_session <= TARGET_RSS_KIB ? "met" : "NOT met");
    else if (sg && sg->rss_load >= 0)
        fprintf(f,
                "  RSS <= %.0f KiB per Q3 session: %.2f KiB per pass-through session (a lower "
                "bound: no decoding measured)\n",
                TARGET_RSS_KIB, sg->rss_per_session);
    else
        fprintf(f, "  RSS <= %.0f KiB per Q3 session: not measured\n", TARGET_RSS_KIB);
}

void sg_bench_report_table(const struct sg_bench *b, FILE *f)
{
    const struct sg_bench_result *mr = find_result(b, "minrelay"), *dr = find_result(b, "direct");
    const struct sg_bench_opts *o = &b->o;
    const struct sg_bench_shape *sh = &b->shape;

    fprintf(f, "slipgate-bench %s: %u sessions on 127.0.0.1; traffic: %s\n", SG_VERSION,
            o->sessions, sh->source);
    fprintf(f, "  client datagrams %.1f B mean, server %.1f B mean, %.2f server per client\n",
            sh->c2s_mean, sh->s2c_mean, sh->s2c_per_c2s);
    fprintf(f, "  machine: %ld CPUs, load average %s at the start\n", b->ncpu, b->loadavg);
    if (o->pin) {
        char h[256], one[256], widest[256];

        pin_lists(b, h, one, widest, sizeof(h));
        fprintf(f, "  pinned (--pin): generator and sink on CPU %s; a one-loop relay on CPU %s", h,
                one);
        if (b->relay_loops_max > 1)
            fprintf(f, ", %u loops on CPUs %s", b->relay_loops_max, widest);
        fputc('\n', f);
    } else {
        fputs("  not pinned: the relays, the generator and the sink share every CPU\n", f);
    }
    fputc('\n', f);

    /* Throughput. */
    fprintf(f, "throughput: highest rate with < %.1f%% loss (%u steps of %.0f ms)\n",
            SG_BENCH_LOSS_MAX * 100, o->steps, o->step_s * 1000);
    fprintf(f, "%-18s %10s %7s %-9s %6s | %10s %7s | %6s\n", "mode", "max pkt/s", "x min", "limit",
            "CPU %", "ns/pkt", "x min", "others");
    for (size_t i = 0; i < b->nres; i++) {
        const struct sg_bench_result *m = &b->res[i];

        if (!row_start(f, m))
            continue;
        cell(f, 10, m->tput_pps, 0);
        cell(f, 7, mr ? ratio(m->tput_pps, mr->tput_pps) : NAN, 2);
        fprintf(f, " %-9s", m->limit);
        cell(f, 6, m->tput_cpu * 100, 0);
        fputs(" |", f);
        cell(f, 10, m->tput_ns, 0);
        cell(f, 7, mr ? ratio(m->tput_ns, mr->tput_ns) : NAN, 2);
        fputs(" |", f);
        cell(f, 6, m->others, 2);
        fputc('\n', f);
    }

    /* Latency and memory. */
    fprintf(f, "\nlatency: one-way, every datagram, at %.0f pkt/s for %g s; memory: relay RSS\n",
            o->rate, o->duration);
    fprintf(f, "%-18s %8s %8s %8s %8s %7s %8s %10s\n", "mode", "p50 us", "p99 us", "p99.9 us",
            "+p99 us", "x min", "loss %", "KiB/sess");
    for (size_t i = 0; i < b->nres; i++) {
        const struct sg_bench_result *m = &b->res[i];

        if (!row_start(f, m))
            continue;
        cell(f, 8, m->p50, 1);
        cell(f, 8, m->p99, 1);
        cell(f, 8, m->p999, 1);
        cell(f, 8, dr && m != dr ? m->p99 - dr->p99 : NAN, 1);
        cell(f, 7, mr ? ratio(m->p99, mr->p99) : NAN, 2);
        cell(f, 8, m->lat.loss * 100, 3);
        cell(f, 10, m->rss_load >= 0 ? m->rss_per_session : NAN, 2);
        fputc('\n', f);
    }

    /* Each round's p99: the first round holds the sessions' synchronized start.
     * Every mode that ran had the same rounds; one that failed may have fewer. */
    {
        unsigned rounds = 1;

        for (size_t i = 0; i < b->nres; i++)
            rounds = b->res[i].nrounds > rounds ? b->res[i].nrounds : rounds;
        fprintf(f,
                "\np99 us of each latency round (%g s each, in the order run; the first holds "
                "the sessions' synchronized start)\n",
                o->duration / rounds);
    }
    round_rows(f, b, false);

    /* The relay's minor page faults per round: where a new session's first
     * writes to its memory fall (each can cost microseconds in a VM). */
    {
        bool any = false;

        for (size_t i = 0; i < b->nres; i++)
            for (unsigned k = 0; k < b->res[i].nrounds; k++)
                any = any || (b->res[i].status == SG_BENCH_OK && b->res[i].round_faults[k] >= 0);
        if (any) {
            fprintf(f, "\nthe relay's minor page faults in each latency round (first writes to "
                       "memory; a new session's state)\n");
            round_rows(f, b, true);
        }
    }

    /* What slipgate's decoder made of the traffic (its --stats, all sessions). */
    {
        bool any = false;

        for (size_t i = 0; i < b->nres; i++)
            any = any || (b->res[i].status == SG_BENCH_OK && b->res[i].dec_datagrams >= 0);
        if (any) {
            fprintf(f, "\ndecoding: slipgate's --stats at the end, all sessions; its loop's "
                       "longest turn (work, whole run) and turns over 1 ms\n");
            fprintf(f, "%-18s %11s %11s %8s %11s %11s %8s %9s %9s %9s\n", "mode", "datagrams",
                    "messages", "errors", "reencoded", "identical", "demos", "demo KiB", "turn us",
                    "turns>1ms");
            for (size_t i = 0; i < b->nres; i++) {
                const struct sg_bench_result *m = &b->res[i];

                if (m->status != SG_BENCH_OK || m->mode->relay != SG_BENCH_RELAY_SLIPGATE)
                    continue;
                if (m->dec_datagrams < 0) {
                    fprintf(f, "%-18s %11s %11s %8s %11s %11s %8s %9s", m->mode->name,
                            "not decoded", "", "", "", "", "", "");
                } else {
                    fprintf(f, "%-18s %11lld %11lld %8lld %11lld %11lld %8lld", m->mode->name,
                            m->dec_datagrams, m->dec_messages, m->dec_errors, m->dec_reencoded,
                            m->dec_identical, m->demos);
                    cell(f, 9, m->demo_bytes >= 0 ? (double)m->demo_bytes / 1024 : NAN, 0);
                }
                cell(f, 9, m->loop_max_us, 0);
                cell(f, 9, m->loop_over_1ms >= 0 ? (double)m->loop_over_1ms : NAN, 0);
                fputc('\n', f);
            }
        }
    }

    /* slipgate's own residence times and loop turns over the latency run. */
    {
        bool any = false;

        for (size_t i = 0; i < b->nres; i++)
            any = any || (b->res[i].status == SG_BENCH_OK && b->res[i].res_start.have);
        if (any) {
            fprintf(f, "\nresidence: slipgate's own histogram (kernel receive timestamp to sendmmsg, "
                       "both directions), us;\nstart = the first latency round (synchronized "
                       "start), steady = the others; loop turns over the latency run\n");
            fprintf(f, "%-18s %9s %7s %7s %7s %7s | %9s %7s %7s %7s %7s | %7s %7s %7s %7s\n",
                    "mode", "start n", "p50", "p99", "p99.9", "max", "steady n", "p50", "p99",
                    "p99.9", "max", "turn50", "turn99", "t99.9", "turnmax");
            for (size_t i = 0; i < b->nres; i++) {
                const struct sg_bench_result *m = &b->res[i];
                const struct sg_bench_resid *x[3] = {&m->res_start, &m->res_steady, &m->turn};

                if (m->status != SG_BENCH_OK || m->mode->relay != SG_BENCH_RELAY_SLIPGATE)
                    continue;
                fprintf(f, "%-18s", m->mode->name);
                for (int k = 0; k < 3; k++) {
                    if (k < 2)
                        fprintf(f, " %9llu", x[k]->have ? x[k]->count : 0ull);
                    cell(f, 7, x[k]->have ? x[k]->p50 : NAN, 1);
                    cell(f, 7, x[k]->have ? x[k]->p99 : NAN, 1);
                    cell(f, 7, x[k]->have ? x[k]->p999 : NAN, 1);
                    cell(f, 7, x[k]->have ? x[k]->max : NAN, 0);
                    if (k < 2)
                        fputs(" |", f);
                }
                fputc('\n', f);
            }
        }
    }

    print_targets(b, f);

    /* Say so when the machine was not ours. */
    {
        double worst = 0;

        for (size_t i = 0; i < b->nres; i++)
            if (b->res[i].status == SG_BENCH_OK && b->res[i].others > worst)
                worst = b->res[i].others;
        if (worst > OTHERS_WARN)
            fprintf(f,
                    "\nwarning: other processes used up to %.2f of %ld cores during a mode: the "
                    "figures are\ndisturbed (see \"others\"); run again on a quiet machine.\n",
                    worst, b->ncpu);
    }

    fputs("\nreproduce: ", f);
    sg_bench_report_command(b, f);
    fputc('\n', f);
}

static void jnum(FILE *f, double v, int decimals)
{
    if (isnan(v) || isinf(v))
        fputs("null", f);
    else
        fprintf(f, "%.*f", decimals, v);
}

static void print_json(const struct sg_bench *b, FILE *f)
{
    const struct sg_bench_result *mr = find_result(b, "minrelay"), *dr = find_result(b, "direct");
    const struct sg_bench_opts *o = &b->o;
    const struct sg_bench_shape *sh = &b->shape;
    char *cmd = NULL;
    size_t cmdlen = 0;
    FILE *cf = open_memstream(&cmd, &cmdlen);

    if (cf) {
        sg_bench_report_command(b, cf);
        fclose(cf);
    }
    fprintf(f, "{\"bench\": \"slipgate-bench\", \"version\": ");
    sg_bench_json_str(f, SG_VERSION);
    fprintf(f, ", \"command\": ");
    sg_bench_json_str(f, cmd ? cmd : "");
    free(cmd);
    fprintf(f, ",\n \"config\": {\"sessions\": %u, \"rate_pps\": ", o->sessions);
    jnum(f, o->rate, 0);
    fprintf(f, ", \"duration_s\": ");
    jnum(f, o->duration, 3);
    fprintf(f, ", \"steps\": %u, \"step_s\": ", o->steps);
    jnum(f, o->step_s, 3);
    fprintf(f, ", \"loss_max\": ");
    jnum(f, SG_BENCH_LOSS_MAX, 4);
    fprintf(f, ", \"quick\": %s},\n \"machine\": {\"cpus\": %ld, \"loadavg\": ",
            o->quick ? "true" : "false", b->ncpu);
    sg_bench_json_str(f, b->loadavg);
    fputs(", \"pinned\": ", f);
    if (o->pin) {
        char h[256], one[256], widest[256];

        pin_lists(b, h, one, widest, sizeof(h));
        fputs("{\"harness\": ", f);
        sg_bench_json_str(f, h);
        fputs(", \"relay\": ", f);
        sg_bench_json_str(f, one);
        fputs(", \"relay_widest\": ", f);
        sg_bench_json_str(f, widest);
        fputc('}', f);
    } else {
        fputs("null", f);
    }
    fprintf(f, "},\n \"shape\": {\"source\": ");
    sg_bench_json_str(f, sh->source);
    fprintf(f,
            ", \"captures\": %zu, \"quake3\": %s, \"c2s_datagrams\": %zu, \"s2c_datagrams\": %zu, "
            "\"c2s_mean_bytes\": ",
            sh->files, sh->q3 ? "true" : "false", sh->n_c2s, sh->n_s2c);
    jnum(f, sh->c2s_mean, 2);
    fprintf(f, ", \"s2c_mean_bytes\": ");
    jnum(f, sh->s2c_mean, 2);
    fprintf(f, ", \"s2c_per_c2s\": ");
    jnum(f, sh->s2c_per_c2s, 4);
    fprintf(f, "},\n \"targets\": {\"passthrough_ratio_min\": ");
    jnum(f, TARGET_PASSTHROUGH, 2);
    fprintf(f, ", \"decode_ratio_min\": ");
    jnum(f, TARGET_DECODE, 2);
    fprintf(f, ", \"added_p99_us_max\": ");
    jnum(f, TARGET_P99_US, 0);
    fprintf(f, ", \"added_p99_rate_pps\": ");
    jnum(f, TARGET_P99_RATE, 0);
    fprintf(f, ", \"rss_per_session_kib_max\": ");
    jnum(f, TARGET_RSS_KIB, 0);
    fprintf(f, "},\n \"modes\": {");

    for (size_t i = 0; i < b->nres; i++) {
        const struct sg_bench_result *m = &b->res[i];

        fprintf(f, "%s\n  ", i ? "," : "");
        sg_bench_json_str(f, m->mode->name);
        fprintf(f, ": {\"status\": \"%s\"",
                m->status == SG_BENCH_OK   ? "ok"
                : m->status == SG_BENCH_NA ? "n/a"
                                           : "error");
        if (m->status == SG_BENCH_NA) {
            fprintf(f, ", \"reason\": ");
            sg_bench_json_str(f, m->unavailable);
            fputc('}', f);
            continue;
        }
        if (m->status == SG_BENCH_ERROR) {
            fprintf(f, ", \"error\": ");
            sg_bench_json_str(f, m->error);
            fputc('}', f);
            continue;
        }
        if (m->mode->http)
            fprintf(f, ", \"metrics_scrapes\": {\"ok\": %lu, \"failed\": %lu}", m->scrapes_ok,
                    m->scrapes_failed);
        fprintf(f, ",\n   \"throughput\": {\"pps\": ");
        jnum(f, m->tput_pps, 0);
        fprintf(f, ", \"target_pps\": ");
        jnum(f, m->tput_target, 0);
        fprintf(f, ", \"ratio_minrelay\": ");
        jnum(f, mr ? ratio(m->tput_pps, mr->tput_pps) : NAN, 3);
        fprintf(f, ", \"relay_cpu\": ");
        jnum(f, m->tput_cpu, 3);
        fprintf(f, ", \"relay_cpu_ns_per_pkt\": ");
        jnum(f, m->tput_ns, 1);
        fprintf(f, ", \"cpu_ratio_minrelay\": ");
        jnum(f, mr ? ratio(m->tput_ns, mr->tput_ns) : NAN, 3);
        fprintf(f, ", \"limit\": \"%s\", \"steps\": [", m->limit);
        for (unsigned s = 0; s < m->nsteps; s++) {
            const struct sg_bench_steprec *r = &m->steps[s];

            fprintf(f, "%s{\"target_pps\": ", s ? ", " : "");
            jnum(f, r->target, 0);
            fprintf(f, ", \"offered_pps\": ");
            jnum(f, r->offered, 0);
            fprintf(f, ", \"delivered_pps\": ");
            jnum(f, r->delivered, 0);
            fprintf(f, ", \"loss\": ");
            jnum(f, r->loss, 6);
            fprintf(f, ", \"relay_cpu\": ");
            jnum(f, r->cpu, 3);
            fprintf(f, ", \"relay_cpu_ns_per_pkt\": ");
            jnum(f, r->ns, 1);
            fprintf(f,
                    ", \"harness_drops\": %llu, \"max_burst\": %llu, \"skipped\": %llu, "
                    "\"verdict\": \"%s\"}",
                    (unsigned long long)r->harness_drops, (unsigned long long)r->max_burst,
                    (unsigned long long)r->skipped, r->verdict);
        }
        fprintf(f, "]},\n   \"latency\": {\"rate_pps\": ");
        jnum(f, m->lat.target_pps, 0);
        fprintf(f, ", \"offered_pps\": ");
        jnum(f, m->lat.offered_pps, 0);
        fprintf(f, ", \"loss\": ");
        jnum(f, m->lat.loss, 6);
        fprintf(f, ", \"samples\": %llu, \"p50_us\": ", (unsigned long long)m->lat.hist.n);
        jnum(f, m->p50, 2);
        fprintf(f, ", \"p99_us\": ");
        jnum(f, m->p99, 2);
        fprintf(f, ", \"p999_us\": ");
        jnum(f, m->p999, 2);
        fprintf(f, ", \"max_us\": ");
        jnum(f, m->pmax, 2);
        fprintf(f, ", \"round_p99_us\": [");
        for (unsigned k = 0; k < m->nrounds; k++) {
            fputs(k ? ", " : "", f);
            jnum(f, m->round_p99[k], 2);
        }
        fputc(']', f);
        fprintf(f, ", \"round_minor_faults\": [");
        for (unsigned k = 0; k < m->nrounds; k++) {
            fputs(k ? ", " : "", f);
            jnum(f, m->round_faults[k] >= 0 ? (double)m->round_faults[k] : NAN, 0);
        }
        fputc(']', f);
        fprintf(f, ", \"added_p99_us\": ");
        jnum(f, dr && m != dr ? m->p99 - dr->p99 : NAN, 2);
        fprintf(f, ", \"p99_ratio_minrelay\": ");
        jnum(f, mr ? ratio(m->p99, mr->p99) : NAN, 3);
        fprintf(f, ", \"relay_cpu\": ");
        jnum(f, m->lat_cpu, 3);
        fprintf(f, ", \"relay_cpu_ns_per_pkt\": ");
        jnum(f, m->ns_per_pkt, 1);
        fprintf(f, ", \"cpu_ratio_minrelay\": ");
        jnum(f, mr ? ratio(m->ns_per_pkt, mr->ns_per_pkt) : NAN, 3);
        fprintf(f, "},\n   \"rss\": ");
        if (m->rss_load < 0) {
            fputs("null", f);
        } else {
            fprintf(f,
                    "{\"before_kib\": %ld, \"first_session_kib\": %ld, \"open_kib\": %ld, "
                    "\"after_kib\": %ld, ",
                    m->rss_before, m->rss_first, m->rss_open, m->rss_load);
            fprintf(f, "\"per_session_kib\": ");
            jnum(f, m->rss_per_session, 3);
            fputc('}', f);
        }
        fprintf(f, ", \"other_cpu_cores\": ");
        jnum(f, m->others, 2);
        fprintf(f, ", \"relay_cpus\": ");
        sg_bench_json_str(f, m->relay_cpus);
        fprintf(f, ", \"relay_sessions\": ");
        if (m->relay_sessions >= 0)
            fprintf(f, "%ld", m->relay_sessions);
        else
            fputs("null", f);
        fprintf(f,
                ", \"latency_run\": {\"unmatched_datagrams\": %llu, \"reconnects\": %llu, "
                "\"stalls\": %llu, \"replies_given_up\": %llu}",
                (unsigned long long)m->lat.unknown, (unsigned long long)m->lat.held,
                (unsigned long long)m->lat.waited, (unsigned long long)m->lat.forgiven);
        fprintf(f, ", \"loop\": {\"longest_turn_us\": ");
        jnum(f, m->loop_max_us, 1);
        fprintf(f, ", \"turns_over_1ms\": ");
        if (m->loop_over_1ms >= 0)
            fprintf(f, "%lld}", m->loop_over_1ms);
        else
            fputs("null}", f);
        fprintf(f, ",\n   \"residence\": ");
        if (!m->res_start.have) {
            fputs("null", f);
        } else {
            const struct sg_bench_resid *x[3] = {&m->res_start, &m->res_steady, &m->turn};
            static const char *const names[3] = {"start", "steady", "loop_turn"};

            for (int k = 0; k < 3; k++) {
                if (!x[k]->have) { /* steady: a run of one round has none */
                    fprintf(f, "%s\"%s\": null", k ? ", " : "{", names[k]);
                    continue;
                }
                fprintf(f, "%s\"%s\": {\"count\": %llu, \"p50_us\": ", k ? ", " : "{", names[k],
                        x[k]->count);
                jnum(f, x[k]->p50, 2);
                fputs(", \"p99_us\": ", f);
                jnum(f, x[k]->p99, 2);
                fputs(", \"p999_us\": ", f);
                jnum(f, x[k]->p999, 2);
                fputs(", \"max_us\": ", f);
                jnum(f, x[k]->max, 2);
                fputc('}', f);
            }
            fputc('}', f);
        }
        fprintf(f, ",\n   \"decode\": ");
        if (m->dec_datagrams < 0)
            fputs("null", f);
        else
            fprintf(f,
                    "{\"datagrams\": %lld, \"messages\": %lld, \"errors\": %lld, "
                    "\"reencoded\": %lld, \"reencode_identical\": %lld, "
                    "\"reencode_errors\": %lld, \"demos\": %lld, \"demo_bytes\": %lld}",
                    m->dec_datagrams, m->dec_messages, m->dec_errors, m->dec_reencoded,
                    m->dec_identical, m->dec_reencode_errors, m->demos, m->demo_bytes);
        fputc('}', f);
    }
    fprintf(f, "\n }\n}\n");
}

/* Print the JSON report after checking it parses and lists every mode. */
int sg_bench_report_json(const struct sg_bench *b)
{
    char *text = NULL;
    size_t len = 0, where = 0;
    FILE *f = open_memstream(&text, &len);
    int err = 0;

    if (!f)
        return -ENOMEM;
    print_json(b, f);
    if (fclose(f) != 0 || !text)
        return -ENOMEM;
    if (sg_bench_json_check(text, len, &where) < 0) {
        fprintf(stderr, "slipgate-bench: internal error: invalid JSON at offset %zu\n", where);
        err = -EINVAL;
    }
    for (size_t i = 0; i < b->nres && err == 0; i++) {
        char key[64];

        snprintf(key, sizeof(key), "\"%s\": {\"status\"", b->res[i].mode->name);
        if (!strstr(text, key)) {
            fprintf(stderr, "slipgate-bench: internal error: mode %s missing from the JSON\n",
                    b->res[i].mode->name);
            err = -EINVAL;
        }
    }
    fputs(text, stdout);
    free(text);
    return err;
}
