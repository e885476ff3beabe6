/*
 * plan.c — sm_plan_compute: the preflight (docs/design.md §8).  Turning on
 * every worker multiplies series, charts and rows; a user should see those
 * numbers before deciding, not in a log line after.  Everything here
 * is arithmetic on the rules the monitor applies (collectors, write-load
 * cap, series per collector, how MLflow's UI groups keys); docs/plan.md
 * derives each number.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Series each collecting process logs, by scope (docs/design.md §1). */
#define NODE_SERIES 3      /* node_cpu_utilization_percentage, node_memory_usage_{megabytes,percentage} */
#define ROOTFS_SERIES 3    /* rootfs_usage_{megabytes,percentage}, rootfs_available_megabytes */
#define NETWORK_SERIES 2   /* network_{receive,transmit}_megabytes */
#define GPU_SERIES 5       /* per GPU: memory %, memory MB, utilization, power W, power % */
#define CONTAINER_SERIES 3 /* container_memory_usage_{megabytes,percentage}, container_cpu_... */

/* Bytes one metric row costs the tracking store, as measured on a
 * production MLflow backend (16 ranks x 16 series at 10 s = about 914 MB a
 * day).  docs/plan.md says what it covers and how the tests
 * compare it with MLflow's own sqlite store. */
#define BYTES_PER_ROW 433.0

static int ceil_div(int a, int b)
{
    return (int)(((long long)a + b - 1) / b);
}

/* docs/design.md §4, shared by the monitor and the plan so they never disagree:
 * one collector by default; with all_workers one per pod (world size / local
 * world size). */
int sm_collectors_of(int world_size, int local_world_size, int all_workers)
{
    int n;

    if (!all_workers)
        return 1;
    n = ceil_div(world_size > 0 ? world_size : 1, local_world_size > 0 ? local_world_size : 1);
    return n < 1 ? 1 : n;
}

/* The write-load cap: with more than four collectors the logging period
 * (interval x samples) is at least 10 x ceil(n/4) s; a longer period is kept.
 * Raises the interval, keeps the samples. */
double sm_capped_interval(int collectors, double interval, int samples)
{
    double min_period;

    if (collectors <= 4 || samples < 1)
        return interval;
    min_period = 10.0 * ceil_div(collectors, 4);
    return interval * samples < min_period ? min_period / samples : interval;
}

int sm_plan_compute(const sm_plan_input *in, sm_plan *out, char *err, size_t errlen)
{
    char dummy[1];
    int pods, nodes, per_pod, gpus, samples, node_hosts;
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
    if (in->workers < 1) {
        snprintf(err, errlen, "workers must be at least 1");
        return -EINVAL;
    }
    per_pod = in->workers_per_pod > 0 ? in->workers_per_pod : 1;
    if (per_pod > in->workers) {
        snprintf(err, errlen, "workers per pod (%d) is more than the workers (%d)", per_pod,
                 in->workers);
        return -EINVAL;
    }
    pods = ceil_div(in->workers, per_pod);
    /* nodes unknown: one pod per node, the most sections a job can show */
    nodes = in->nodes > 0 ? in->nodes : pods;
    if (nodes > pods) {
        snprintf(err, errlen, "%d nodes but only %d pod%s: every node hosts at least one pod",
                 nodes, pods, pods == 1 ? "" : "s");
        return -EINVAL;
    }
    gpus = in->gpus_per_worker;
    if (gpus < 0 || gpus > 64) {
        snprintf(err, errlen, "GPUs per worker must be between 0 and 64");
        return -EINVAL;
    }
    interval = in->interval_s > 0 ? in->interval_s : 10.0;
    if (isnan(in->interval_s) || interval < 0.01 || interval > 86400) {
        snprintf(err, errlen, "interval must be between 0.01 and 86400 s");
        return -EINVAL;
    }
    samples = in->samples > 0 ? in->samples : 1;
    if (samples > 100000) {
        snprintf(err, errlen, "samples must be between 1 and 100000");
        return -EINVAL;
    }

    out->collectors = sm_collectors_of(in->workers, per_pod, in->all_workers);
    interval = sm_capped_interval(out->collectors, interval, samples);
    period = interval * samples;
    out->interval_s = interval;
    out->samples = samples;
    out->period_s = period;

    /* The collecting rank (a pod's local rank 0) logs every GPU of its
     * container: under torchrun and Ray the pod's workers share one container
     * and CUDA_VISIBLE_DEVICES is not narrowed per rank (docs/plan.md). */
    out->gpus_per_collector = gpus * per_pod;
    out->series_per_collector = NODE_SERIES + ROOTFS_SERIES + NETWORK_SERIES +
                                GPU_SERIES * out->gpus_per_collector +
                                (in->container_limits ? CONTAINER_SERIES : 0);
    out->series = out->collectors * out->series_per_collector;
    out->charts = out->series; /* MLflow draws one chart per series */

    /* MLflow's UI groups a key by all but its last '/' segment.  node_* and
     * rootfs_* carry /NODE before the rank: one section per (series, node
     * with a collector).  Every node hosts at least one pod, so with
     * all_workers every node has a collector; by default only rank 0's. */
    node_hosts = out->collectors < nodes ? out->collectors : nodes;
    out->sections = (NODE_SERIES + ROOTFS_SERIES) * node_hosts +
                    (out->series_per_collector - NODE_SERIES - ROOTFS_SERIES);

    out->rows_per_hour = out->series * 3600.0 / period;
    out->bytes_per_row = BYTES_PER_ROW;
    out->bytes_per_day = out->rows_per_hour * 24.0 * BYTES_PER_ROW;
    return 0;
}
