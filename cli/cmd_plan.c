/*
 * cmd_plan.c — `scopemeter plan`: the preflight (docs/design.md §8).  Before a
 * user turns on every worker they see what it costs: collectors, the
 * effective interval after the write budget's rule, series (= charts, MLflow draws
 * one per series), UI sections, rows per hour and bytes per day.  The
 * numbers come from sm_plan_estimate(); docs/plan.md derives them.
 *
 *   scopemeter plan --workers W [--workers-per-pod P] [--nodes N]
 *                   [--gpus-per-worker G] [--interval S] [--samples K]
 *                   [--all-workers | --one-worker] [--no-container-limits]
 *                   [--rdma] [--write-budget R] [--detail default|full] [--json]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "scopemeter.h"

static void plan_usage(FILE *f)
{
    fprintf(f,
            "usage: scopemeter plan --workers W [--workers-per-pod P] [--nodes N]\n"
            "                       [--gpus-per-worker G] [--interval S] [--samples K]\n"
            "                       [--all-workers | --one-worker] [--no-container-limits]\n"
            "                       [--rdma] [--write-budget R] [--detail default|full]\n"
            "                       [--json]\n"
            "\n"
            "What recording system metrics costs for a job, before it runs:\n"
            "  --workers W            processes in the job (world size)\n"
            "  --workers-per-pod P    processes per pod / container (local world size; default 1)\n"
            "  --nodes N              nodes the pods land on (default: one per pod, the most\n"
            "                         UI sections the job can show)\n"
            "  --gpus-per-worker G    GPUs per worker (default 0); a pod's collector logs all\n"
            "                         the pod's GPUs: workers per pod x G\n"
            "  --interval S           seconds between samples (default 10)\n"
            "  --samples K            samples per logged point (default 1)\n"
            "  --all-workers          every pod's local rank 0 collects\n"
            "  --one-worker           only rank 0 collects (the default)\n"
            "  --no-container-limits  pods have no cgroup limit: no container_* series\n"
            "  --rdma                 pods are given RDMA ports (InfiniBand, RoCE): the rdma_*\n"
            "                         series of the interconnect\n"
            "  --write-budget R       rows/s the tracking server takes from the job, all\n"
            "                         collectors together: the period that fits it, and the\n"
            "                         server it needs (default: four collectors at 10 s)\n"
            "  --detail L             the level counted: default, or full (adds the GPM,\n"
            "                         NVLink, clock and ECC series per GPU; docs/series.md\n"
            "                         \"Levels\")\n"
            "  --json                 one JSON object\n"
            "Assumptions and formulas: docs/plan.md.\n");
}

static void human_bytes(double b, char *out, size_t len)
{
    if (b >= 1e12)
        snprintf(out, len, "%.1f TB", b / 1e12);
    else if (b >= 1e9)
        snprintf(out, len, "%.1f GB", b / 1e9);
    else if (b >= 1e6)
        snprintf(out, len, "%.1f MB", b / 1e6);
    else if (b >= 1e3)
        snprintf(out, len, "%.1f kB", b / 1e3);
    else
        snprintf(out, len, "%.0f B", b);
}

static int print_json(const sm_plan_input *in, int nodes_given, const sm_plan *p,
                      double asked_interval)
{
    int pods = (in->workers + in->workers_per_pod - 1) / in->workers_per_pod;
    int nodes = nodes_given ? in->nodes : pods;
    int node_sections = p->node_series_per_collector * (p->collectors < nodes ? p->collectors : nodes);
    json_t *root = json_object();
    char *s;

    if (!root)
        return 1;
    json_object_set_new(root, "workers", json_integer(in->workers));
    json_object_set_new(root, "workers_per_pod", json_integer(in->workers_per_pod));
    json_object_set_new(root, "pods", json_integer(pods));
    json_object_set_new(root, "nodes", json_integer(nodes));
    json_object_set_new(root, "nodes_assumed", json_boolean(!nodes_given));
    json_object_set_new(root, "gpus_per_worker", json_integer(in->gpus_per_worker));
    json_object_set_new(root, "all_workers", json_boolean(in->all_workers));
    json_object_set_new(root, "container_limits", json_boolean(in->container_limits));
    json_object_set_new(root, "rdma_ports", json_boolean(in->rdma_ports == 1));
    json_object_set_new(root, "collectors", json_integer(p->collectors));
    json_object_set_new(root, "requested_interval_s", json_real(asked_interval));
    json_object_set_new(root, "interval_s", json_real(p->interval_s));
    json_object_set_new(root, "samples", json_integer(p->samples));
    json_object_set_new(root, "period_s", json_real(p->period_s));
    json_object_set_new(root, "capped", json_boolean(p->interval_s > asked_interval));
    json_object_set_new(root, "gpus_per_collector", json_integer(p->gpus_per_collector));
    json_object_set_new(root, "series_per_collector", json_integer(p->series_per_collector));
    json_object_set_new(root, "node_series_per_collector",
                        json_integer(p->node_series_per_collector));
    json_object_set_new(root, "gpu_series_per_collector", json_integer(p->gpu_series_per_collector));
    json_object_set_new(root, "container_series_per_collector",
                        json_integer(p->container_series_per_collector));
    json_object_set_new(root, "rdma_series_per_collector",
                        json_integer(p->rdma_series_per_collector));
    json_object_set_new(root, "ranks_recorded", json_integer(p->ranks_recorded));
    json_object_set_new(root, "process_series", json_integer(p->process_series));
    json_object_set_new(root, "series", json_integer(p->series));
    json_object_set_new(root, "charts", json_integer(p->charts));
    json_object_set_new(root, "sections", json_integer(p->sections));
    json_object_set_new(root, "node_sections", json_integer(node_sections));
    json_object_set_new(root, "rows_per_hour", json_real(p->rows_per_hour));
    json_object_set_new(root, "bytes_per_row", json_real(p->bytes_per_row));
    json_object_set_new(root, "bytes_per_day", json_real(p->bytes_per_day));
    json_object_set_new(root, "write_budget", p->write_budget > 0 ? json_real(p->write_budget)
                                                                  : json_null());
    json_object_set_new(root, "series_per_collector_recorded",
                        json_integer(p->series_per_collector_recorded));
    json_object_set_new(root, "budget_period_s", p->write_budget > 0
                                                     ? json_real(p->budget_period_s)
                                                     : json_null());
    json_object_set_new(root, "budget_met", json_boolean(!(p->write_budget > 0) ||
                                                         p->budget_period_s <= p->period_s));
    json_object_set_new(root, "rows_per_s", json_real(p->rows_per_s));
    json_object_set_new(root, "server_cores", json_integer(p->server_cores));
    json_object_set_new(root, "ui_charts_over", json_boolean(p->ui_charts_over));
    json_object_set_new(root, "ui_charts_warn", json_integer(SM_PLAN_UI_CHARTS_WARN));
    json_object_set_new(root, "pod_memory_front_mb", json_real(p->pod_memory_front_mb));
    json_object_set_new(root, "pod_memory_companion_mb", json_real(p->pod_memory_companion_mb));
    json_object_set_new(root, "pod_memory_cli_mb", json_real(p->pod_memory_cli_mb));
    json_object_set_new(root, "detail",
                        json_string(p->detail == SM_PLAN_DETAIL_FULL ? "full" : "default"));
    json_object_set_new(root, "series_full", json_integer(p->series_full));
    s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
    json_decref(root);
    if (!s)
        return 1;
    printf("%s\n", s);
    free(s);
    return 0;
}

/* Only with a budget: without one the lines are those of the default rule. */
static void print_budget(const sm_plan *p)
{
    double need = p->rows_per_s > p->write_budget ? p->rows_per_s : p->write_budget;

    printf("write budget %g rows/s; the job writes %.4g rows/s (%d collector%s x %d series every "
           "%g s)\n", p->write_budget, p->rows_per_s, p->collectors, p->collectors == 1 ? "" : "s",
           p->series_per_collector_recorded, p->period_s);
    if (p->budget_period_s > p->period_s)
        printf("             not met: the budget asks a period of %g s, more than the longest "
               "(%g s, a point an hour); raise the budget or record fewer collectors\n",
               p->budget_period_s, SM_WRITE_BUDGET_PERIOD_MAX);
    printf("server       %d core%s for %.4g rows/s: mlflow server on PostgreSQL, one worker a "
           "core, at half load (measured: 352 rows/s a core, bench table 11; "
           "docs/rest.md)\n", p->server_cores, p->server_cores == 1 ? "" : "s", need);
}

static void print_text(const sm_plan_input *in, int nodes_given, const sm_plan *p,
                       double asked_interval)
{
    int pods = (in->workers + in->workers_per_pod - 1) / in->workers_per_pod;
    int nodes = nodes_given ? in->nodes : pods;
    int node_hosts = p->collectors < nodes ? p->collectors : nodes;
    int tiered = p->node_series_per_collector;
    int other = p->series_per_collector - tiered;
    char bytes[32];

    printf("job          %d worker%s, %d per pod -> %d pod%s on %d node%s%s; %d GPU%s per worker\n",
           in->workers, in->workers == 1 ? "" : "s", in->workers_per_pod, pods,
           pods == 1 ? "" : "s", nodes, nodes == 1 ? "" : "s",
           nodes_given ? "" : " (assumed one per pod; pass --nodes)", in->gpus_per_worker,
           in->gpus_per_worker == 1 ? "" : "s");
    printf("collectors   %d (%s)\n", p->collectors,
           in->all_workers ? "all workers: one per pod, its local rank 0" : "rank 0 only");
    printf("interval     %g s x %d sample%s = one point per series every %g s", p->interval_s,
           p->samples, p->samples == 1 ? "" : "s", p->period_s);
    if (p->interval_s > asked_interval && p->write_budget > 0)
        printf(" (write budget: %d collector%s x %d series, raised from %g s)", p->collectors,
               p->collectors == 1 ? "" : "s", p->series_per_collector_recorded, asked_interval);
    else if (p->interval_s > asked_interval)
        printf(" (write-load cap: %d collectors > 4, raised from %g s)", p->collectors,
               asked_interval);
    printf("\n");
    printf("series       %d per collector (%d with the node tier: node_*, rootfs_*; "
           "%d GPU; %d container; %d network; %d RDMA%s)\n", p->series_per_collector, tiered,
           p->gpu_series_per_collector, p->container_series_per_collector,
           other - p->gpu_series_per_collector - p->container_series_per_collector -
               p->rdma_series_per_collector,
           p->rdma_series_per_collector, in->rdma_ports == 1 ? "" : ": no --rdma");
    printf("             + %d process tree series (%d per rank, %d rank%s: process_*)\n",
           p->process_series, p->ranks_recorded ? p->process_series / p->ranks_recorded : 0,
           p->ranks_recorded, p->ranks_recorded == 1 ? "" : "s");
    printf("             %d in total\n", p->series);
    printf("charts       %d (MLflow draws one chart per series)\n", p->charts);
    if (p->detail == SM_PLAN_DETAIL_FULL)
        printf("detail       full: the GPM, NVLink, clock and ECC series of every GPU included "
               "(docs/series.md \"Levels\")\n");
    else if (p->series_full > p->series)
        printf("detail       default; --detail full adds %d (GPM, NVLink, clocks and ECC per "
               "GPU): %d series and charts\n", p->series_full - p->series, p->series_full);
    printf("sections     %d (node_*/rootfs_*: %d x %d node%s = %d; other series: %d)\n",
           p->sections, tiered, node_hosts, node_hosts == 1 ? "" : "s", tiered * node_hosts,
           p->sections - tiered * node_hosts);
    printf("rows/hour    %.0f\n", p->rows_per_hour);
    human_bytes(p->bytes_per_day, bytes, sizeof bytes);
    printf("bytes/day    %s (at %.0f bytes per row, a measured backend; docs/plan.md)\n", bytes,
           p->bytes_per_row);
    printf("memory       in each collecting pod, within its limit: the Python front %.1f MB (%.1f in "
           "the training process + %.1f its companion), scopemeter run %.1f MB (itself and its OOM "
           "reserve; docs/plan.md)\n",
           p->pod_memory_front_mb + p->pod_memory_companion_mb, p->pod_memory_front_mb,
           p->pod_memory_companion_mb, p->pod_memory_cli_mb);
    if (p->write_budget > 0)
        print_budget(p);
    if (!in->all_workers && pods > 1) {
        sm_plan_input all = *in;
        sm_plan q = SM_PLAN_INIT;
        char e[160];
        all.all_workers = 1;
        if (sm_plan_estimate(&all, &q, e, sizeof e) == 0) {
            human_bytes(q.bytes_per_day, bytes, sizeof bytes);
            printf("with --all-workers: %d collectors, %d series and charts, %d sections, "
                   "every %g s, %.0f rows/hour, %s/day\n",
                   q.collectors, q.series, q.sections, q.period_s, q.rows_per_hour, bytes);
        }
    }
}

int cmd_plan(int argc, char **argv)
{
    sm_plan_input in = SM_PLAN_INPUT_INIT;
    sm_plan p = SM_PLAN_INIT;
    char err[256];
    int json = 0, rc, one = 0;
    const char *detail = NULL;
    double asked;
    struct cli_opt opts[] = {
        {"--workers", CLI_INT, &in.workers, 1, SM_PLAN_WORKERS_MAX, 0, NULL, 0},
        {"--workers-per-pod", CLI_INT, &in.workers_per_pod, 1, SM_PLAN_WORKERS_MAX, 0, NULL, 0},
        {"--nodes", CLI_INT, &in.nodes, 1, SM_PLAN_WORKERS_MAX, 0, NULL, 0},
        {"--gpus-per-worker", CLI_INT, &in.gpus_per_worker, 0, SM_GPUS_MAX, 0, NULL, 0},
        {"--interval", CLI_SECONDS, &in.interval_s, SM_INTERVAL_MIN, SM_INTERVAL_MAX, 0, NULL, 0},
        {"--samples", CLI_INT, &in.samples, 1, SM_SAMPLES_MAX, 0, NULL, 0},
        {"--all-workers", CLI_FLAG, &in.all_workers, 0, 0, 1, "workers", 0},
        {"--one-worker", CLI_FLAG, &one, 0, 0, 1, "workers", 0},
        {"--no-container-limits", CLI_FLAG, &in.container_limits, 0, 0, 0, NULL, 0},
        {"--rdma", CLI_FLAG, &in.rdma_ports, 0, 0, 1, NULL, 0},
        {"--write-budget", CLI_NUMBER, &in.write_budget, SM_WRITE_BUDGET_MIN, SM_WRITE_BUDGET_MAX,
         0, NULL, 0},
        {"--json", CLI_FLAG, &json, 0, 0, 1, NULL, 0},
        {"--detail", CLI_STRING, &detail, 0, 0, 0, NULL, 0},
    };

    in.gpus_per_worker = 0;  /* the flags below set these from these values */
    in.all_workers = 0;
    in.container_limits = 1;
    in.rdma_ports = 0;
    rc = cli_parse("plan", argc, argv, opts, sizeof opts / sizeof opts[0], 0);
    if (rc == CLI_HELP) {
        plan_usage(stdout);
        return 0;
    }
    if (rc < 0)
        return 2;
    if (!opts[0].seen) {
        fprintf(stderr, "scopemeter plan: --workers is required\n");
        return 2;
    }
    if (detail && (in.detail = cli_detail("plan", detail)) < 0)
        return 2;
    rc = sm_plan_estimate(&in, &p, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "scopemeter plan: %s\n", err);
        return 2;
    }
    /* the defaults, for the report */
    if (in.workers_per_pod == SM_DEFAULT)
        in.workers_per_pod = 1;
    asked = in.interval_s == SM_DEFAULT ? SM_INTERVAL_DEFAULT : in.interval_s;
    if (p.ui_charts_over)
        fprintf(stderr, "scopemeter plan: warning: %d charts in the run's System metrics tab, "
                "more than %d (the largest bench/ui_render.py drew to its end, in about 5 "
                "minutes): read the ranks with `scopemeter report` (docs/plan.md)\n", p.charts,
                SM_PLAN_UI_CHARTS_WARN);
    if (json)
        return print_json(&in, opts[2].seen, &p, asked);
    print_text(&in, opts[2].seen, &p, asked);
    return 0;
}
