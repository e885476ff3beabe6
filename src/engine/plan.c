/*
 * plan.c — sm_plan_estimate: the preflight (docs/design.md §8).  Turning on
 * every worker multiplies series, charts and rows; a user should see those
 * numbers before deciding, not in a log line after.  Everything here
 * is arithmetic on the rules the monitor applies (collectors, the write
 * budget's rule, series per collector, how MLflow's UI groups keys); docs/plan.md
 * derives each number.  It must count what the monitor would record: the
 * series a collector adds and the write budget's interval are asked of the
 * collectors' table and of sm__budget_interval (the monitor's own calls),
 * never written again here, and it reads no file: the plan is of a job that
 * has not started, on a machine that may not be the job's.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Bytes one metric row costs the tracking store, as measured on a
 * production MLflow backend (16 ranks x 16 series at 10 s = about 914 MB a
 * day).  docs/plan.md says what it covers and how the tests
 * compare it with MLflow's own sqlite store. */
#define BYTES_PER_ROW 433.0
/* What the recorder holds resident in a collecting pod, MB (docs/plan.md
 * "Memory"): the bounds the measurements sit under -- the front's thread and
 * scopemeter run over https, bench/README.md table 5; the companion
 * waiting, issue 32's bound (tests/py/test_plan.py measures it against
 * this); scopemeter run
 * twice, itself and its OOM reserve of its own resident size
 * (docs/cgroup.md §7). */
#define POD_MEMORY_FRONT_MB 1.0
#define POD_MEMORY_COMPANION_MB 2.5
#define POD_MEMORY_CLI_MB 10.0

static int ceil_div(int a, int b)
{
    return (int)(((long long)a + b - 1) / b);
}

/* docs/design.md §4, shared by the monitor, the probe and the plan so they
 * never disagree: who collects, and
 * one collector by default; with all_workers one per pod (world size / local
 * world size). */
int sm__collectors_of(int world_size, int local_world_size, int all_workers)
{
    int n;

    if (!all_workers)
        return 1;
    n = ceil_div(world_size > 0 ? world_size : 1, local_world_size > 0 ? local_world_size : 1);
    return n < 1 ? 1 : n;
}

int sm_collects(const sm_identity *id, int all_workers, char *why, size_t whylen)
{
    char dummy[1];

    if (!why || whylen == 0) {
        why = dummy;
        whylen = sizeof dummy;
    }
    why[0] = '\0';
    if (!id)
        return 0;
    if (id->invalid[0]) {
        snprintf(why, whylen, "%s", id->invalid);
        return 0;
    }
    if (all_workers) {
        if (id->local_rank == 0)
            return 1;
        snprintf(why, whylen, "rank %d (local rank %d) does not collect: with all_workers the "
                 "pod's local rank 0 collects for it", id->rank, id->local_rank);
        return 0;
    }
    if (id->rank == 0)
        return 1;
    snprintf(why, whylen, "rank %d does not collect: by default only rank 0 does "
             "(all_workers collects one per pod)", id->rank);
    return 0;
}

/* The write budget's rule (docs/design.md §5): the logging period
 * (interval x samples) that keeps the job's rows within the budget, computed
 * by each collector alone from n and its own series (the same budget in
 * every collector's environment gives every collector the same answer).
 * Raises the interval, keeps the samples; a longer user period is kept.
 *   unset (budget <= 0): the default budget, four collectors at 10 s:
 *     with n > 4 the period is at least 10 x ceil(n/4) s (the seed's rule,
 *     exactly; tests/c/test_budget.c holds it against the formula);
 *   set: at least n x series / budget, rounded up to 0.01 s so the tags and
 *     lines say it exactly, and at most SM_WRITE_BUDGET_PERIOD_MAX (a point
 *     an hour: a longer one would leave a run almost no points); *need_s is
 *     the period the budget asks, so a caller sees when it cannot be met. */
double sm__budget_interval(int collectors, int series, double interval, int samples,
                           double budget, double *need_s)
{
    double min_period, need;

    if (need_s)
        *need_s = 0;
    if (samples < 1)
        return interval;
    if (!(budget > 0)) {
        if (collectors <= 4)
            return interval;
        min_period = 10.0 * ceil_div(collectors, 4);
    } else {
        /* ceil(x) as -floor(-x): the CLI loads no libm (number.h) */
        need = -sm__floor(-((double)collectors * series * 100.0 / budget)) / 100.0;
        if (need_s)
            *need_s = need;
        min_period = need < SM_WRITE_BUDGET_PERIOD_MAX ? need : SM_WRITE_BUDGET_PERIOD_MAX;
    }
    return interval * samples < min_period ? min_period / samples : interval;
}

/* The server a job's rows need (docs/rest.md, "Sizing"): cores of an mlflow
 * server on PostgreSQL (its workers and postgres together) at half load.
 * The rate two cores sustained with nothing lost, no 5xx and a bounded lag
 * (bench/README.md table 11), halved: a core's share. */
#define ROWS_PER_S_PER_CORE 352.0
#define SIZING_LOAD 0.5

static int server_cores(double rows_per_s)
{
    double c = -sm__floor(-(rows_per_s / (ROWS_PER_S_PER_CORE * SIZING_LOAD)));
    return c < 1 ? 1 : c > 1e6 ? 1000000 : (int)c;
}

/* The first sized layouts (scopemeter.h: a caller's size below them is
 * -EINVAL): frozen, whatever fields come later. */
#define PLAN_INPUT_SIZE_MIN (offsetof(sm_plan_input, container_limits) + sizeof(int))
#define PLAN_SIZE_MIN (offsetof(sm_plan, process_series) + sizeof(int))

static int compute(const sm_plan_input *in, sm_plan *out, char *err, size_t errlen);

int sm_plan_estimate(const sm_plan_input *in, sm_plan *out, char *err, size_t errlen)
{
    sm_plan_input v = SM_PLAN_INPUT_INIT;
    sm_plan p = SM_PLAN_INIT;
    int rc;

    if (in && out && (sm_sized_in(&v, sizeof v, in, PLAN_INPUT_SIZE_MIN) < 0 ||
                      out->size < PLAN_SIZE_MIN)) {
        if (err && errlen)
            snprintf(err, errlen, "sm_plan_input or sm_plan without its size "
                     "(SM_PLAN_INPUT_INIT, SM_PLAN_INIT)");
        return -EINVAL;
    }
    rc = compute(in ? &v : NULL, out ? &p : NULL, err, errlen);
    if (rc == 0)
        sm_sized_out(out, &p, sizeof p, PLAN_SIZE_MIN);
    return rc;
}

/* A value outside its fixed bounds: the one number parser's line (number.h),
 * "interval must be between 0.01 and 86400 s, got 0", as every surface says
 * it.  The bounds that depend on other fields (nodes <= pods) say their own. */
static int out_of(double v, const sm_num_spec *spec, char *err, size_t errlen)
{
    return sm__num_check(v, NULL, spec, err, errlen) < 0;
}

/* in and out are whole structs here (sm_plan_estimate). */
static int compute(const sm_plan_input *in, sm_plan *out, char *err, size_t errlen)
{
    char dummy[1];
    int pods, nodes, per_pod, gpus, samples, node_hosts, node_scope, sib_gpu, full;
    double interval, period;

    if (!err || errlen == 0) {
        err = dummy;
        errlen = sizeof dummy;
    }
    err[0] = '\0';
    if (!in || !out) {
        snprintf(err, errlen, "no input");
        return -EINVAL;
    }
    memset(out, 0, sizeof *out);
    /* SM_DEFAULT where the default is not a bound check below (scopemeter.h) */
    sm_plan_input dflt = *in;
    if (dflt.workers == SM_DEFAULT)
        dflt.workers = 1;
    if (dflt.gpus_per_worker == SM_DEFAULT)
        dflt.gpus_per_worker = 0;
    dflt.rdma_ports = dflt.rdma_ports != SM_DEFAULT && dflt.rdma_ports != 0;
    dflt.all_workers = dflt.all_workers != SM_DEFAULT && dflt.all_workers != 0;
    dflt.container_limits = dflt.container_limits == SM_DEFAULT || dflt.container_limits != 0;
    if (dflt.detail == SM_DEFAULT)
        dflt.detail = SM_PLAN_DETAIL_DEFAULT;
    in = &dflt;
    /* the same bounds and words as the monitor and every surface (scopemeter.h) */
    if (out_of(in->workers, &(sm_num_spec){"workers", 1, SM_PLAN_WORKERS_MAX, 1, 0}, err,
               errlen))
        return -EINVAL;
    per_pod = in->workers_per_pod == SM_PLAN_DEFAULT ? 1 : in->workers_per_pod;
    if (per_pod < 1 || per_pod > in->workers) {
        snprintf(err, errlen, "workers per pod must be between 1 and the workers (%d)",
                 in->workers);
        return -EINVAL;
    }
    pods = ceil_div(in->workers, per_pod);
    /* nodes unknown: one pod per node, the most sections a job can show */
    nodes = in->nodes == SM_PLAN_DEFAULT ? pods : in->nodes;
    if (nodes < 1 || nodes > pods) {
        snprintf(err, errlen, "nodes must be between 1 and the pods (%d): every node hosts at "
                 "least one pod", pods);
        return -EINVAL;
    }
    gpus = in->gpus_per_worker;
    if (out_of(gpus, &(sm_num_spec){"GPUs per worker", 0, SM_GPUS_MAX, 1, 0}, err, errlen))
        return -EINVAL;
    interval = in->interval_s == SM_PLAN_DEFAULT ? SM_INTERVAL_DEFAULT : in->interval_s;
    if (out_of(interval, &(sm_num_spec){"interval", SM_INTERVAL_MIN, SM_INTERVAL_MAX, 0, 1}, err,
               errlen))
        return -EINVAL;
    samples = in->samples == SM_PLAN_DEFAULT ? 1 : in->samples;
    if (out_of(samples, &(sm_num_spec){"samples", 1, SM_SAMPLES_MAX, 1, 0}, err, errlen))
        return -EINVAL;

    if (in->detail != SM_PLAN_DETAIL_DEFAULT && in->detail != SM_PLAN_DETAIL_FULL) {
        snprintf(err, errlen, "detail must be default (0) or full (1), got %d", in->detail);
        return -EINVAL;
    }
    if (in->write_budget != SM_DEFAULT &&
        out_of(in->write_budget, &(sm_num_spec){"write budget", SM_WRITE_BUDGET_MIN,
                                                SM_WRITE_BUDGET_MAX, 0, 0}, err, errlen))
        return -EINVAL;
    out->write_budget = in->write_budget == SM_DEFAULT ? 0 : in->write_budget;
    out->collectors = sm__collectors_of(in->workers, per_pod, in->all_workers);

    /* The collecting rank (a pod's local rank 0) logs every GPU of its
     * container: under torchrun and Ray the pod's workers share one container
     * and CUDA_VISIBLE_DEVICES is not narrowed per rank (docs/plan.md). */
    out->gpus_per_collector = gpus * per_pod;
    out->series_per_collector = sm__collectors_series(out->gpus_per_collector,
                                                     in->container_limits, &node_scope);
    out->detail = in->detail;
    full = sm__collectors_series_full(out->gpus_per_collector);
    if (out->detail == SM_PLAN_DETAIL_FULL)
        out->series_per_collector += full; /* GPU series, no node tier */
    out->node_series_per_collector = node_scope;
    out->gpu_series_per_collector = out->series_per_collector -
                                    sm__collectors_series(0, in->container_limits, NULL);
    out->container_series_per_collector = out->series_per_collector -
                                          sm__collectors_series(out->gpus_per_collector, 0, NULL) -
                                          (out->detail == SM_PLAN_DETAIL_FULL ? full : 0);
    /* rdma_* only where the pods are given RDMA ports (coll_rdma.c) */
    out->rdma_series_per_collector = in->rdma_ports ? sm__port_series() : 0;
    out->series_per_collector += out->rdma_series_per_collector;
    /* with all_workers the pod's collector also records, per GPU, the memory
     * each other local rank's processes hold on it (gpu_i_process_memory_
     * megabytes/rankN, coll_gpu.c); they share the own rank's sections */
    sib_gpu = in->all_workers ? out->gpus_per_collector * (per_pod - 1) : 0;
    out->series_per_collector += sib_gpu;
    out->gpu_series_per_collector += sib_gpu;
    /* every recorded rank's process tree: rank 0's by default; with
     * all_workers each pod's collector records its own and its local
     * siblings' trees, so every worker's (docs/design.md §9) */
    out->ranks_recorded = in->all_workers ? in->workers : 1;
    out->process_series = out->ranks_recorded * sm__process_series();
    out->series = out->collectors * out->series_per_collector + out->process_series;
    out->series_full = out->series +
                       (out->detail == SM_PLAN_DETAIL_FULL ? 0 : out->collectors * full);
    /* what one collector counts at start, its pod's process trees included
     * (the largest pod: n x this bounds the job's series) */
    out->series_per_collector_recorded = out->series_per_collector +
        (in->all_workers ? per_pod : 1) * sm__process_series();
    interval = sm__budget_interval(out->collectors, out->series_per_collector_recorded, interval,
                                   samples, out->write_budget, &out->budget_period_s);
    period = interval * samples;
    out->interval_s = interval;
    out->samples = samples;
    out->period_s = period;
    out->charts = out->series; /* MLflow draws one chart per series */

    /* MLflow's UI groups a key by all but its last '/' segment.  node_* and
     * rootfs_* carry /NODE before the rank: one section per (series, node
     * with a collector).  Every node hosts at least one pod, so with
     * all_workers every node has a collector; by default only rank 0's. */
    node_hosts = out->collectors < nodes ? out->collectors : nodes;
    out->sections = node_scope * node_hosts + (out->series_per_collector - sib_gpu - node_scope) +
                    sm__process_series(); /* process_*: one section per key, every rank in it */

    out->rows_per_hour = out->series * 3600.0 / period;
    out->rows_per_s = out->series / period;
    out->server_cores = server_cores(out->rows_per_s > out->write_budget ? out->rows_per_s
                                                                         : out->write_budget);
    out->bytes_per_row = BYTES_PER_ROW;
    out->bytes_per_day = out->rows_per_hour * 24.0 * BYTES_PER_ROW;
    out->ui_charts_over = out->charts > SM_PLAN_UI_CHARTS_WARN;
    out->pod_memory_front_mb = POD_MEMORY_FRONT_MB;
    out->pod_memory_companion_mb = POD_MEMORY_COMPANION_MB;
    out->pod_memory_cli_mb = POD_MEMORY_CLI_MB;
    return 0;
}
