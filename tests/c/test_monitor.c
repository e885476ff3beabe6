/*
 * test_monitor.c — the sampling engine end to end on a fake machine
 * (tests/fixtures/monitor-basic through SCOPEMETER_SYSROOT) with the queue
 * sink: windows, steps, rounding, timestamps, start and end tags, the last
 * partial window at stop, who collects (docs/design.md §4), the write-load cap
 * and the write budget (§5),
 * configuration precedence, the skipped tag, the stop timeout and a forked
 * child's stop.  No timing thresholds: waits are for conditions, with
 * generous bounds.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"
#include "scopemeter.h"

#define MAXREC 8192

static char fixture[1024];
static sm_record recs[MAXREC];
static int nrecs;

static const char *const env_vars[] = {
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK",
    "PMI_RANK", "SCOPEMETER_NODE_NAME", "NODE_NAME", "SLURMD_NODENAME", "SCOPEMETER_INTERVAL",
    "SCOPEMETER_SAMPLES", "MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL",
    "MLFLOW_SYSTEM_METRICS_SAMPLES_BEFORE_LOGGING", "CUDA_VISIBLE_DEVICES",
    "SCOPEMETER_NVML_LIBRARY", "SCOPEMETER_WRITE_BUDGET", NULL};

static void reset_env(const char *sysroot)
{
    for (int i = 0; env_vars[i]; i++)
        unsetenv(env_vars[i]);
    setenv("SCOPEMETER_SYSROOT", sysroot, 1);
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Drains once (waiting up to timeout); appends to recs.  Returns drain's rc. */
static int drain_some(sm_monitor *m, double timeout)
{
    int n = sm_monitor_drain_records(m, recs + nrecs, MAXREC - nrecs, sizeof recs[0], timeout);
    if (n > 0)
        nrecs += n;
    return n;
}

/* Drains until the stream is over (-EPIPE); returns that rc. */
static int drain_all(sm_monitor *m)
{
    int rc;
    for (int i = 0; i < 1000; i++) {
        rc = drain_some(m, 1.0);
        if (rc < 0)
            return rc;
        if (rc == 0)
            continue;
    }
    return 0;
}

static const sm_record *find_tag(const char *key)
{
    for (int i = 0; i < nrecs; i++)
        if (recs[i].kind == SM_RECORD_TAG && strcmp(recs[i].key, key) == 0)
            return &recs[i];
    return NULL;
}

static const char *tag(const char *key)
{
    const sm_record *r = find_tag(key);
    return r ? r->text : NULL;
}

static int64_t max_step(void)
{
    int64_t s = -1;
    for (int i = 0; i < nrecs; i++)
        if (recs[i].kind == SM_RECORD_METRIC && recs[i].step > s)
            s = recs[i].step;
    return s;
}

static const char *const expect_keys[] = {
    "system/node_cpu_utilization_percentage/rank0",
    "system/node_memory_usage_megabytes/rank0",
    "system/node_memory_usage_percentage/rank0",
    "system/rootfs_usage_megabytes/rank0",
    "system/rootfs_usage_percentage/rank0",
    "system/rootfs_available_megabytes/rank0",
    "system/network_receive_megabytes/rank0",
    "system/network_transmit_megabytes/rank0",
    NULL,
};

static int is_rounded(double v)
{
    return fabs(v * 10.0 - nearbyint(v * 10.0)) < 1e-6;
}

/* Every expected key, and no other: steps 0..last contiguous, in order,
 * rounded values, non-decreasing timestamps within [t0, t1]. */
static void check_series(int64_t t0, int64_t t1, int64_t *last_step)
{
    int64_t last = max_step();
    int nkeys = 0;

    for (int i = 0; i < nrecs; i++) {
        int known = 0;
        if (recs[i].kind != SM_RECORD_METRIC)
            continue;
        for (int k = 0; expect_keys[k]; k++)
            known |= strcmp(recs[i].key, expect_keys[k]) == 0;
        if (!known)
            fprintf(stderr, "unexpected key %s\n", recs[i].key);
        CHECK(known);
        CHECK(is_rounded(recs[i].value));
        CHECK(recs[i].timestamp_ms >= t0 && recs[i].timestamp_ms <= t1);
    }
    for (int k = 0; expect_keys[k]; k++) {
        int64_t want = 0, prev_ts = 0;
        nkeys++;
        for (int i = 0; i < nrecs; i++) {
            const sm_record *r = &recs[i];
            if (r->kind != SM_RECORD_METRIC || strcmp(r->key, expect_keys[k]) != 0)
                continue;
            CHECK_EQ_INT(r->step, want); /* 0, 1, 2, ... in order, no gap */
            CHECK(r->timestamp_ms >= prev_ts);
            prev_ts = r->timestamp_ms;
            want++;
            if (strstr(r->key, "node_memory_usage_megabytes"))
                CHECK_NEAR(r->value, 8388.5, 1e-9);
            if (strstr(r->key, "node_memory_usage_percentage"))
                CHECK_NEAR(r->value, 50.0, 1e-9);
            if (strstr(r->key, "node_cpu_") || strstr(r->key, "network_"))
                CHECK_NEAR(r->value, 0.0, 1e-9);
        }
        /* every key in every window; a rate may miss the last one when that
         * window is the final sample alone, taken too soon after the last
         * one for a rate: it keeps the levels (docs/design.md §7) */
        if (strstr(expect_keys[k], "node_cpu_"))
            CHECK(want == last + 1 || want == last);
        else
            CHECK_EQ_INT(want, last + 1);
    }
    CHECK_EQ_INT(nkeys, 8);
    *last_step = last;
}

static sm_monitor *queue_monitor(double interval, int samples)
{
    sm_monitor *m = sm_monitor_new();
    CHECK(m != NULL);
    if (!m)
        exit(1);
    CHECK_EQ_INT(sm_monitor_use_queue(m), 0);
    if (interval > 0)
        CHECK_EQ_INT(sm_monitor_set_interval(m, interval), 0);
    if (samples > 0)
        CHECK_EQ_INT(sm_monitor_set_samples(m, samples), 0);
    return m;
}

/* The main run: 0.05 s x 2, several windows, stop, drain. */
static void test_windows(void)
{
    char err[256];
    sm_monitor *m;
    int64_t t0, t1, last = -1;
    int before_stop, rc, metrics_after_stop = 0;

    reset_env(fixture);
    nrecs = 0;
    m = queue_monitor(0.05, 2);
    CHECK_EQ_INT(sm_monitor_drain_records(m, recs, 4, sizeof recs[0], 0), -EINVAL); /* not started */
    t0 = wall_ms();
    rc = sm_monitor_start(m, err, sizeof err);
    CHECK_EQ_INT(rc, 0);
    if (rc != 0) {
        fprintf(stderr, "start: %s\n", err);
        sm_monitor_free(m);
        return;
    }
    CHECK_NEAR(sm_monitor_interval(m), 0.05, 1e-12);
    CHECK_EQ_INT(sm_monitor_samples(m), 2);
    CHECK_EQ_INT(sm_monitor_collectors(m), 1);
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), -EALREADY);
    CHECK_EQ_INT(sm_monitor_set_interval(m, 1), -EBUSY);

    /* wait (bounded) until three windows have been logged */
    for (int i = 0; i < 400 && max_step() < 2; i++)
        drain_some(m, 0.05);
    CHECK(max_step() >= 2);
    before_stop = nrecs;
    /* half an interval: the final sample's rates are due now (a final sample
     * milliseconds after a scheduled one keeps only the levels: a rate over
     * no time would read 0 %) */
    usleep(30 * 1000);

    CHECK_EQ_INT(sm_monitor_stop(m), 0);
    CHECK_EQ_INT(sm_monitor_stop(m), 0); /* idempotent */
    t1 = wall_ms();
    CHECK_EQ_INT(drain_all(m), -EPIPE);
    CHECK_EQ_INT(sm_monitor_drain_records(m, recs, 4, sizeof recs[0], 0), -EPIPE); /* and stays over */

    /* the stop logged the last partial window */
    for (int i = before_stop; i < nrecs; i++)
        metrics_after_stop += recs[i].kind == SM_RECORD_METRIC;
    CHECK(metrics_after_stop >= 8);

    check_series(t0, t1, &last);
    CHECK(last >= 2);

    /* start tags (docs/design.md §3) */
    CHECK_EQ_STR(tag("scopemeter.rank0.node"), "unknown");
    CHECK_EQ_STR(tag("scopemeter.interval_s"), "0.05");
    CHECK_EQ_STR(tag("scopemeter.samples"), "2");
    CHECK_EQ_STR(tag("scopemeter.collectors"), "1");
    CHECK(tag("scopemeter.rank0.gpu") != NULL);
    CHECK(tag("scopemeter.rank0.cgroup") != NULL);
    CHECK(tag("scopemeter.skipped") == NULL);
    /* tags come first, before any point */
    CHECK(recs[0].kind == SM_RECORD_TAG);
    CHECK_EQ_INT(sm_monitor_dropped(m), 0);
    sm_monitor_free(m);
}

/* A run shorter than one window: interval 10 s, stopped at once.  The stop
 * wakes the thread at once and the partial window (one sample) is logged. */
static void test_partial_window(void)
{
    char err[256];
    sm_monitor *m;
    int64_t t0, t1, last = -1;

    reset_env(fixture);
    setenv("NODE_NAME", "gpu-node-1", 1);
    nrecs = 0;
    m = queue_monitor(10, 1);
    t0 = wall_ms();
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), 0);
    CHECK_EQ_INT(sm_monitor_stop(m), 0);
    t1 = wall_ms();
    CHECK_EQ_INT(drain_all(m), -EPIPE);
    CHECK_EQ_INT(max_step(), 0);
    CHECK_EQ_STR(tag("scopemeter.rank0.node"), "gpu-node-1");
    CHECK_EQ_STR(tag("scopemeter.interval_s"), "10");
    /* node-scope keys carry the node tier; the others never do */
    {
        int node_tier = 0, net = 0;
        for (int i = 0; i < nrecs; i++) {
            if (recs[i].kind != SM_RECORD_METRIC)
                continue;
            CHECK(recs[i].timestamp_ms >= t0 && recs[i].timestamp_ms <= t1);
            if (strcmp(recs[i].key, "system/node_memory_usage_megabytes/gpu-node-1/rank0") == 0)
                node_tier++;
            if (strcmp(recs[i].key, "system/network_receive_megabytes/rank0") == 0)
                net++;
        }
        CHECK_EQ_INT(node_tier, 1);
        CHECK_EQ_INT(net, 1);
    }
    (void)last;
    sm_monitor_free(m);
}

/* docs/design.md §4: who collects */
static void test_who_collects(void)
{
    char err[256];
    sm_monitor *m;
    int rc;

    /* default: rank 0 only */
    reset_env(fixture);
    setenv("RANK", "1", 1);
    setenv("LOCAL_RANK", "0", 1);
    setenv("WORLD_SIZE", "2", 1);
    m = queue_monitor(0, 0);
    rc = sm_monitor_start(m, err, sizeof err);
    CHECK_EQ_INT(rc, SM_NOT_COLLECTING);
    CHECK(strstr(err, "rank 1") != NULL);
    CHECK_EQ_INT(sm_monitor_drain_records(m, recs, 4, sizeof recs[0], 0), -EPIPE); /* no stream */
    CHECK_EQ_INT(sm_monitor_stop(m), 0);
    sm_monitor_free(m);

    /* all_workers: local rank != 0 does not collect */
    setenv("RANK", "3", 1);
    setenv("LOCAL_RANK", "1", 1);
    setenv("WORLD_SIZE", "4", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    m = queue_monitor(0, 0);
    CHECK_EQ_INT(sm_monitor_set_all_workers(m, 1), 0);
    rc = sm_monitor_start(m, err, sizeof err);
    CHECK_EQ_INT(rc, SM_NOT_COLLECTING);
    CHECK(strstr(err, "local rank 1") != NULL);
    sm_monitor_free(m);

    /* all_workers: local rank 0 of the second pod collects; n = 4 / 2 */
    setenv("RANK", "2", 1);
    setenv("LOCAL_RANK", "0", 1);
    nrecs = 0;
    m = queue_monitor(10, 1);
    CHECK_EQ_INT(sm_monitor_set_all_workers(m, 1), 0);
    rc = sm_monitor_start(m, err, sizeof err);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(sm_monitor_collectors(m), 2);
    CHECK_EQ_INT(sm_monitor_stop(m), 0);
    CHECK_EQ_INT(drain_all(m), -EPIPE);
    CHECK_EQ_STR(tag("scopemeter.rank2.node"), "unknown");
    CHECK_EQ_STR(tag("scopemeter.collectors"), "2");
    {
        int rank2 = 0;
        for (int i = 0; i < nrecs; i++)
            rank2 += recs[i].kind == SM_RECORD_METRIC && strstr(recs[i].key, "/rank2") != NULL;
        CHECK_EQ_INT(rank2, 8);
    }
    sm_monitor_free(m);

    /* sm_monitor_set_identity: the caller's identity, not the environment's (here
     * RANK=2 of 4): rank 7 of 1024 on its own node collects under all_workers */
    m = queue_monitor(10, 1);
    CHECK_EQ_INT(sm_monitor_set_identity(m, 7, 0, 1024, 1, "node7"), 0);
    CHECK_EQ_INT(sm_monitor_set_identity(m, 1024, 0, 1024, 1, "x"), -EINVAL); /* rank < world */
    CHECK_EQ_INT(sm_monitor_set_identity(m, 0, 1, 4, 1, NULL), -EINVAL);     /* local < local world */
    CHECK_EQ_INT(sm_monitor_set_identity(m, 0, 0, 4, 8, NULL), -EINVAL);     /* local world <= world */
    CHECK_EQ_INT(sm_monitor_set_identity(m, -1, 0, 4, 1, NULL), -EINVAL);
    CHECK_EQ_INT(sm_monitor_set_identity(m, 7, 0, 1024, 1, "node7"), 0);     /* refused ones left it */
    CHECK_EQ_INT(sm_monitor_set_all_workers(m, 1), 0);
    nrecs = 0;
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), 0);
    CHECK_EQ_INT(sm_monitor_set_identity(m, 1, 0, 2, 1, NULL), -EBUSY);
    CHECK_EQ_INT(sm_monitor_collectors(m), 1024);
    CHECK_EQ_INT(sm_monitor_stop(m), 0);
    CHECK_EQ_INT(drain_all(m), -EPIPE);
    CHECK_EQ_STR(tag("scopemeter.rank7.node"), "node7");
    CHECK_EQ_STR(tag("scopemeter.collectors"), "1024");
    {
        int rank7 = 0, other = 0;
        for (int i = 0; i < nrecs; i++)
            if (recs[i].kind == SM_RECORD_METRIC) {
                rank7 += strstr(recs[i].key, "/node7/rank7") != NULL;
                other += strstr(recs[i].key, "/rank7") == NULL;
            }
        CHECK(rank7 > 0);
        CHECK_EQ_INT(other, 0);
    }
    sm_monitor_free(m);

    /* a missing LOCAL_RANK counts as 0: the worst case is duplication */
    unsetenv("LOCAL_RANK");
    setenv("RANK", "5", 1);
    setenv("WORLD_SIZE", "6", 1);
    unsetenv("LOCAL_WORLD_SIZE");
    m = queue_monitor(10, 1);
    CHECK_EQ_INT(sm_monitor_set_all_workers(m, 1), 0);
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), 0);
    CHECK_EQ_INT(sm_monitor_collectors(m), 6);
    sm_monitor_free(m); /* free stops */
}

/* Rank 0 of a job of `world` pods of one worker each. */
static void pods_env(const char *world)
{
    reset_env(fixture);
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", world, 1);
    setenv("LOCAL_WORLD_SIZE", "1", 1);
}

/* docs/design.md §5: write-load cap */
static void test_cap(void)
{
    char err[256];
    sm_monitor *m;

    /* 32 pods: period >= 10 * ceil(32/4) = 80 s; samples kept, interval raised */
    pods_env("32");
    nrecs = 0;
    m = queue_monitor(0.5, 2);
    CHECK_EQ_INT(sm_monitor_set_all_workers(m, 1), 0);
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), 0);
    CHECK_EQ_INT(sm_monitor_collectors(m), 32);
    CHECK_NEAR(sm_monitor_interval(m), 10.0 * 8 / 2, 1e-9);
    CHECK_EQ_INT(sm_monitor_samples(m), 2);
    CHECK_EQ_INT(sm_monitor_stop(m), 0);
    CHECK_EQ_INT(drain_all(m), -EPIPE);
    CHECK_EQ_STR(tag("scopemeter.interval_s"), "40");
    CHECK_EQ_STR(tag("scopemeter.samples"), "2");
    CHECK_EQ_STR(tag("scopemeter.collectors"), "32");
    sm_monitor_free(m);

    /* a longer user period is kept: 8 pods -> 20 s minimum, user asks 30 s */
    setenv("WORLD_SIZE", "8", 1);
    m = queue_monitor(30, 1);
    CHECK_EQ_INT(sm_monitor_set_all_workers(m, 1), 0);
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), 0);
    CHECK_NEAR(sm_monitor_interval(m), 30.0, 1e-9);
    sm_monitor_free(m);

    /* 8 pods with the default 10 s: raised to 20 s (the reference run of docs/plan.md) */
    m = queue_monitor(0, 0);
    CHECK_EQ_INT(sm_monitor_set_all_workers(m, 1), 0);
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), 0);
    CHECK_NEAR(sm_monitor_interval(m), 20.0, 1e-9);
    CHECK_EQ_INT(sm_monitor_samples(m), 1);
    sm_monitor_free(m);

    /* 4 collectors: no cap; without all_workers n = 1 whatever the world */
    setenv("WORLD_SIZE", "4", 1);
    m = queue_monitor(0, 0);
    CHECK_EQ_INT(sm_monitor_set_all_workers(m, 1), 0);
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), 0);
    CHECK_NEAR(sm_monitor_interval(m), 10.0, 1e-9);
    sm_monitor_free(m);
    setenv("WORLD_SIZE", "64", 1);
    m = queue_monitor(0, 0);
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), 0);
    CHECK_EQ_INT(sm_monitor_collectors(m), 1);
    CHECK_NEAR(sm_monitor_interval(m), 10.0, 1e-9);
    sm_monitor_free(m);
}

/* Distinct metric keys drained: the collector's own series count. */
static int metric_keys(void)
{
    int n = 0;
    for (int i = 0; i < nrecs; i++) {
        int seen = 0;
        if (recs[i].kind != SM_RECORD_METRIC)
            continue;
        for (int j = 0; j < i && !seen; j++)
            seen = recs[j].kind == SM_RECORD_METRIC && strcmp(recs[j].key, recs[i].key) == 0;
        n += !seen;
    }
    return n;
}

/* docs/design.md §5: the write budget, from the setter and the environment;
 * the rule over n and this collector's own series, and its tag. */
static void test_budget(void)
{
    char err[256], want[32];
    double rows;
    int series;
    sm_monitor *m;

    pods_env("64");
    /* the setter: 64 pods at 7.5 rows/s (the seed's rule would give 160 s) */
    nrecs = 0;
    m = queue_monitor(0, 0);
    CHECK_EQ_INT(sm_monitor_set_all_workers(m, 1), 0);
    CHECK_EQ_INT(sm_monitor_set_write_budget(m, 0), -EINVAL);
    CHECK_EQ_INT(sm_monitor_set_write_budget(m, -3), -EINVAL);
    CHECK_EQ_INT(sm_monitor_set_write_budget(m, NAN), -EINVAL);
    CHECK_EQ_INT(sm_monitor_set_write_budget(m, 7.5), 0);
    /* the detail level's setter: its two levels or SM_DEFAULT, before start
     * (what each level records: tests/py/test_gpu.py) */
    CHECK_EQ_INT(sm_monitor_set_detail(m, 2), -EINVAL);
    CHECK_EQ_INT(sm_monitor_set_detail(NULL, SM_DETAIL_FULL), -EINVAL);
    CHECK_EQ_INT(sm_monitor_set_detail(m, SM_DETAIL_FULL), 0);
    CHECK_EQ_INT(sm_monitor_set_detail(m, SM_DEFAULT), 0);
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), 0);
    CHECK_EQ_INT(sm_monitor_set_detail(m, SM_DETAIL_FULL), -EBUSY);
    CHECK_EQ_INT(sm_monitor_set_write_budget(m, 8), -EBUSY);
    CHECK_NEAR(sm_monitor_write_budget(m), 7.5, 0);
    CHECK_EQ_INT(sm_monitor_stop(m), 0);
    CHECK_EQ_INT(drain_all(m), -EPIPE);
    series = metric_keys();
    CHECK(series > 0);
    rows = 64.0 * series * 100.0 / 7.5; /* ceil(rows x 100 / budget) / 100 */
    CHECK_NEAR(sm_monitor_interval(m), ((double)(long long)rows + ((double)(long long)rows < rows))
                                           / 100.0, 1e-12);
    CHECK(64.0 * series / sm_monitor_interval(m) <= 7.5);
    CHECK_EQ_STR(tag("scopemeter.write_budget_rows_per_s"), "7.5");
    snprintf(want, sizeof want, "%g", sm_monitor_interval(m));
    CHECK_EQ_STR(tag("scopemeter.interval_s"), want);
    sm_monitor_free(m);

    /* the environment, and the setter beats it */
    setenv("SCOPEMETER_WRITE_BUDGET", "1000", 1);
    nrecs = 0;
    m = queue_monitor(0, 0);
    CHECK_EQ_INT(sm_monitor_set_all_workers(m, 1), 0);
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), 0);
    CHECK_NEAR(sm_monitor_write_budget(m), 1000, 0);
    CHECK_NEAR(sm_monitor_interval(m), 10, 0); /* 64 x series / 10 s is within 1000 */
    CHECK_EQ_INT(sm_monitor_stop(m), 0);
    CHECK_EQ_INT(drain_all(m), -EPIPE);
    CHECK_EQ_STR(tag("scopemeter.write_budget_rows_per_s"), "1000");
    sm_monitor_free(m);
    m = queue_monitor(0, 0);
    CHECK_EQ_INT(sm_monitor_set_all_workers(m, 1), 0);
    CHECK_EQ_INT(sm_monitor_set_write_budget(m, 7.5), 0);
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), 0);
    CHECK_NEAR(sm_monitor_write_budget(m), 7.5, 0);
    sm_monitor_free(m);

    /* a bad value in the environment is ignored (one line): the default rule,
     * and no budget tag */
    static const char *const bad[] = {"0", "-5", "abc", "nan", "10/s", "1e3", " 5", NULL};
    for (int i = 0; bad[i]; i++) {
        setenv("SCOPEMETER_WRITE_BUDGET", bad[i], 1);
        nrecs = 0;
        m = queue_monitor(0, 0);
        CHECK_EQ_INT(sm_monitor_set_all_workers(m, 1), 0);
        CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), 0);
        CHECK_NEAR(sm_monitor_write_budget(m), 0, 0);
        CHECK_NEAR(sm_monitor_interval(m), 160, 0);
        CHECK_EQ_INT(sm_monitor_stop(m), 0);
        CHECK_EQ_INT(drain_all(m), -EPIPE);
        CHECK(tag("scopemeter.write_budget_rows_per_s") == NULL);
        sm_monitor_free(m);
    }
    unsetenv("SCOPEMETER_WRITE_BUDGET");
}

static void start_free(double set_interval, int set_samples, double *interval, int *samples)
{
    char err[256];
    sm_monitor *m = queue_monitor(set_interval, set_samples);
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), 0);
    *interval = sm_monitor_interval(m);
    *samples = sm_monitor_samples(m);
    sm_monitor_free(m);
}

/* explicit setters > SCOPEMETER_* > MLFLOW_SYSTEM_METRICS_* > 10 s x 1 */
static void test_config(void)
{
    double iv;
    int s;

    reset_env(fixture);
    start_free(0, 0, &iv, &s);
    CHECK_NEAR(iv, 10.0, 1e-12);
    CHECK_EQ_INT(s, 1);

    setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "3", 1);
    setenv("MLFLOW_SYSTEM_METRICS_SAMPLES_BEFORE_LOGGING", "4", 1);
    start_free(0, 0, &iv, &s);
    CHECK_NEAR(iv, 3.0, 1e-12);
    CHECK_EQ_INT(s, 4);

    setenv("SCOPEMETER_INTERVAL", "0.5", 1);
    setenv("SCOPEMETER_SAMPLES", "2", 1);
    start_free(0, 0, &iv, &s);
    CHECK_NEAR(iv, 0.5, 1e-12);
    CHECK_EQ_INT(s, 2);

    start_free(7, 3, &iv, &s);
    CHECK_NEAR(iv, 7.0, 1e-12);
    CHECK_EQ_INT(s, 3);

    /* an unusable value is said and skipped: the next source applies */
    setenv("SCOPEMETER_INTERVAL", "fast", 1);
    setenv("SCOPEMETER_SAMPLES", "2.5", 1);
    start_free(0, 0, &iv, &s);
    CHECK_NEAR(iv, 3.0, 1e-12);
    CHECK_EQ_INT(s, 4);
    /* the one number parser's grammar (number.h): hex, an exponent and
     * white space are refused as --interval refuses them */
    {
        static const char *const bad[][2] = {{"0x10", " 2"}, {"1e1", "2 "}, {"inf", "-0"}};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            setenv("SCOPEMETER_INTERVAL", bad[i][0], 1);
            setenv("SCOPEMETER_SAMPLES", bad[i][1], 1);
            start_free(0, 0, &iv, &s);
            CHECK(iv == 3.0 && s == 4);
        }
    }

    /* setters check their range */
    {
        sm_monitor *m = sm_monitor_new();
        CHECK_EQ_INT(sm_monitor_set_interval(m, 0.001), -EINVAL);
        CHECK_EQ_INT(sm_monitor_set_interval(m, NAN), -EINVAL);
        CHECK_EQ_INT(sm_monitor_set_interval(m, -1), 0); /* <= 0: environment */
        CHECK_EQ_INT(sm_monitor_set_samples(m, 1000000), -EINVAL);
        CHECK_EQ_INT(sm_monitor_set_stop_timeout(m, -2), -EINVAL);
        /* SM_DEFAULT is "the default" in every setter (scopemeter.h) */
        CHECK_EQ_INT(sm_monitor_set_stop_timeout(m, SM_DEFAULT), 0);
        CHECK_EQ_INT(sm_monitor_set_samples(m, SM_DEFAULT), 0);
        CHECK_EQ_INT(sm_monitor_set_interval(m, SM_DEFAULT), 0);
        CHECK_EQ_INT(sm_monitor_set_buffer_points(m, (size_t)SM_DEFAULT), 0);
        /* one bound, the CLI's too (issue 33 item 9): never a silent floor */
        CHECK_EQ_INT(sm_monitor_set_buffer_points(m, 10), -EINVAL);
        CHECK_EQ_INT(sm_monitor_set_buffer_points(m, SM_BUFFER_POINTS_MAX + 1), -EINVAL);
        CHECK_EQ_INT(sm_monitor_set_buffer_points(m, SM_BUFFER_POINTS_MIN), 0);
        CHECK_EQ_INT(sm_monitor_set_buffer_points(m, 0), 0);
        sm_monitor_free(m);
    }
}

static void test_errors(void)
{
    char err[256];
    sm_monitor *m;
    char missing[1100];

    /* no sink configured */
    reset_env(fixture);
    m = sm_monitor_new();
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), -EINVAL);
    CHECK(strstr(err, "sink") != NULL);
    CHECK_EQ_INT(sm_monitor_stop(m), 0); /* never started: nothing to stop */
    sm_monitor_free(m);

    /* nothing can be read: no collector starts -> -ENODATA, one line, and
     * the scopemeter.skipped tag for the binding to log */
    snprintf(missing, sizeof missing, "%s/does-not-exist", fixture);
    reset_env(missing);
    nrecs = 0;
    m = queue_monitor(0, 0);
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), -ENODATA);
    CHECK(strstr(err, "nothing to record") != NULL);
    CHECK_EQ_INT(drain_all(m), -EPIPE);
    CHECK(tag("scopemeter.skipped") != NULL);
    CHECK_EQ_INT(sm_monitor_stop(m), 0);
    sm_monitor_free(m);

    /* a stop timeout of 0 cannot wait for the thread: -ETIMEDOUT, the thread
     * is left behind and frees the monitor itself when it is done */
    reset_env(fixture);
    m = queue_monitor(10, 1);
    CHECK_EQ_INT(sm_monitor_set_stop_timeout(m, 0), 0);
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), 0);
    CHECK_EQ_INT(sm_monitor_stop(m), -ETIMEDOUT);
    CHECK_EQ_INT(sm_monitor_stop(m), -ETIMEDOUT); /* idempotent, same answer */
    sm_monitor_free(m);
    sleep_s(0.3); /* let the left-behind thread finish before the leak check */
}

/* Values move: network counters are the latest cumulative value and never
 * go down; memory is a window mean within the values written. */
static int copy_file(const char *from, const char *to)
{
    char buf[8192];
    FILE *f = fopen(from, "rb"), *g = fopen(to, "wb");
    size_t n;
    int rc = 0;

    if (!f || !g)
        rc = -1;
    while (rc == 0 && (n = fread(buf, 1, sizeof buf, f)) > 0)
        if (fwrite(buf, 1, n, g) != n)
            rc = -1;
    if (f)
        fclose(f);
    if (g && fclose(g) != 0)
        rc = -1;
    return rc;
}

static void write_file(const char *path, const char *text, int in_place)
{
    /* in place: same inode, same length, so the collector's open descriptor
     * sees the new content on its next pread */
    FILE *f = fopen(path, in_place ? "r+b" : "wb");
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
}

static void net_text(char *out, size_t len, unsigned long long rx)
{
    snprintf(out, len,
             "Inter-|   Receive                                                |  Transmit\n"
             " face |bytes    packets errs drop fifo frame compressed multicast|bytes    "
             "packets errs drop fifo colls carrier compressed\n"
             "  eth0: %015llu  98765    0    0    0     0          0         0 98765432   "
             "87654    0    0    0     0       0          0\n",
             rx);
}

static void mem_text(char *out, size_t len, const char *avail)
{
    snprintf(out, len,
             "MemTotal:       16384000 kB\nMemFree:         4096000 kB\n"
             "MemAvailable:    %s kB\n",
             avail);
}

/* A sysroot whose /proc/net/dev and /proc/meminfo a test rewrites: the
 * fixture's other files copied into dir, meminfo at 50 % used. */
static const char *moving_files[] = {"proc/stat", "proc/self/cgroup", "proc/self/mountinfo",
                                     "proc/net/dev", "proc/meminfo", NULL};
static const char *moving_dirs[] = {"proc", "proc/net", "proc/self"};

static char *moving_root(char *tmpl, unsigned long long rx)
{
    char *dir = mkdtemp(tmpl);
    char p1[1200], p2[1200], text[512];
    int ok = 1;

    CHECK(dir != NULL);
    if (!dir)
        return NULL;
    for (int i = 0; i < 3; i++) {
        snprintf(p1, sizeof p1, "%s/%s", dir, moving_dirs[i]);
        mkdir(p1, 0755);
    }
    for (int i = 0; i < 3; i++) { /* the unchanging files */
        snprintf(p1, sizeof p1, "%s/%s", fixture, moving_files[i]);
        snprintf(p2, sizeof p2, "%s/%s", dir, moving_files[i]);
        ok &= copy_file(p1, p2) == 0;
    }
    CHECK(ok);
    snprintf(p1, sizeof p1, "%s/proc/net/dev", dir);
    net_text(text, sizeof text, rx);
    write_file(p1, text, 0);
    snprintf(p1, sizeof p1, "%s/proc/meminfo", dir);
    mem_text(text, sizeof text, "8192000");
    write_file(p1, text, 0);
    return dir;
}

static void remove_moving_root(const char *dir)
{
    char p[1200];

    for (int i = 0; moving_files[i]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, moving_files[i]);
        unlink(p);
    }
    for (int i = 2; i >= 0; i--) {
        snprintf(p, sizeof p, "%s/%s", dir, moving_dirs[i]);
        rmdir(p);
    }
    rmdir(dir);
}

static void test_moving_values(void)
{
    char tmpl[] = "/tmp/sm-monitor-XXXXXX";
    const unsigned long long rx0 = 1000000000ULL;
    char *dir = moving_root(tmpl, rx0);
    char netdev[1200], meminfo[1200], text[512];
    char err[256];
    sm_monitor *m;
    unsigned long long rx = rx0;
    double prev = -1;
    int windows;

    if (!dir)
        return;
    snprintf(netdev, sizeof netdev, "%s/proc/net/dev", dir);
    snprintf(meminfo, sizeof meminfo, "%s/proc/meminfo", dir);
    reset_env(dir);
    nrecs = 0;
    m = queue_monitor(0.02, 3);
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), 0);
    for (int i = 0; i < 2000 && max_step() < 4; i++) {
        rx += 250000; /* +0.25 MB */
        net_text(text, sizeof text, rx);
        write_file(netdev, text, 1);
        /* MemAvailable alternates: used is 50 % or 75 % of MemTotal */
        mem_text(text, sizeof text, i % 2 ? "8192000" : "4096000");
        write_file(meminfo, text, 1);
        drain_some(m, 0.005);
    }
    CHECK_EQ_INT(sm_monitor_stop(m), 0);
    CHECK_EQ_INT(drain_all(m), -EPIPE);
    windows = (int)max_step() + 1;
    CHECK(windows >= 5);
    for (int i = 0; i < nrecs; i++) {
        const sm_record *r = &recs[i];
        if (r->kind != SM_RECORD_METRIC)
            continue;
        CHECK(is_rounded(r->value));
        if (strcmp(r->key, "system/network_receive_megabytes/rank0") == 0) {
            CHECK(r->value >= prev); /* cumulative since start: never decreases */
            CHECK(r->value <= (double)(rx - rx0) / 1e6 + 0.05);
            prev = r->value;
        }
        if (strcmp(r->key, "system/node_memory_usage_percentage/rank0") == 0)
            /* a window mean of 50 % and 75 % samples lies between them */
            CHECK(r->value >= 50.0 - 1e-9 && r->value <= 75.0 + 1e-9);
    }
    CHECK(prev > 0); /* the counter moved */
    sm_monitor_free(m);
    remove_moving_root(dir);
}

/* The run's last window is the state at the stop (issue 46 item 1): a stop
 * right after a scheduled sample (interval 2 s: within min(interval/2, 1 s)
 * of it) still takes the final sample with every level -- here node memory,
 * which went from 50 % to 75 % between the first window and the stop.
 * Before, that final sample was skipped and the run ended at 50 %.  Whether
 * its rate (node CPU) is in it depends on when the stop came: not checked. */
static void test_final_sample_keeps_the_levels(void)
{
    char tmpl[] = "/tmp/sm-monitor-XXXXXX";
    char *dir = moving_root(tmpl, 1000000000ULL);
    char meminfo[1200], text[512], err[256];
    sm_monitor *m;
    int levels = 0;

    if (!dir)
        return;
    snprintf(meminfo, sizeof meminfo, "%s/proc/meminfo", dir);
    reset_env(dir);
    nrecs = 0;
    m = queue_monitor(2, 1);
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), 0);
    for (int i = 0; i < 600 && max_step() < 0; i++) /* the first window, at 2 s */
        drain_some(m, 0.05);
    CHECK_EQ_INT(max_step(), 0);
    mem_text(text, sizeof text, "4096000");
    write_file(meminfo, text, 1);
    CHECK_EQ_INT(sm_monitor_stop(m), 0);
    CHECK_EQ_INT(drain_all(m), -EPIPE);
    CHECK_EQ_INT(max_step(), 1);
    for (int i = 0; i < nrecs; i++) {
        const sm_record *r = &recs[i];
        if (r->kind != SM_RECORD_METRIC || r->step != 1)
            continue;
        levels += strstr(r->key, "node_cpu_") == NULL;
        if (strcmp(r->key, "system/node_memory_usage_percentage/rank0") == 0)
            CHECK_NEAR(r->value, 75.0, 1e-9);
    }
    CHECK_EQ_INT(levels, 7); /* every level of the fixture's 8 series */
    sm_monitor_free(m);
    remove_moving_root(dir);
}

/* A forked child (a data-loader worker) that stops or frees the parent's
 * monitor returns at once and touches nothing of the parent's. */
static void test_fork(void)
{
    char err[256];
    sm_monitor *m;
    pid_t pid;
    int status = -1;

    reset_env(fixture);
    m = queue_monitor(10, 1);
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), 0);
    pid = fork();
    if (pid == 0) {
        int rc = sm_monitor_stop(m);
        sm_monitor_free(m);
        _exit(rc == 0 ? 0 : 3);
    }
    CHECK(pid > 0);
    if (pid > 0)
        CHECK_EQ_INT(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    nrecs = 0;
    CHECK_EQ_INT(sm_monitor_stop(m), 0); /* the parent's monitor still stops normally */
    CHECK_EQ_INT(drain_all(m), -EPIPE);
    CHECK_EQ_INT(max_step(), 0);
    sm_monitor_free(m);
}

struct drainer {
    sm_monitor *m;
    int rc, metrics, tags;
};

static void *drain_thread(void *arg)
{
    struct drainer *d = arg;
    sm_record buf[64];
    int rc;

    while ((rc = sm_monitor_drain_records(d->m, buf, 64, sizeof buf[0], 0.2)) >= 0)
        for (int i = 0; i < rc; i++) {
            d->metrics += buf[i].kind == SM_RECORD_METRIC;
            d->tags += buf[i].kind == SM_RECORD_TAG;
        }
    d->rc = rc;
    return NULL;
}

static void *stop_thread(void *arg)
{
    return (void *)(intptr_t)sm_monitor_stop(arg);
}

/* The binding's pattern: a drain thread runs until -EPIPE while another
 * thread stops; two stops at once both return 0 and the last window comes
 * once. */
static void test_concurrent_stop(void)
{
    char err[256];
    sm_monitor *m;
    struct drainer d = {0};
    pthread_t td, ts;
    void *trc = (void *)1;

    reset_env(fixture);
    m = queue_monitor(0.02, 1);
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), 0);
    d.m = m;
    CHECK_EQ_INT(pthread_create(&td, NULL, drain_thread, &d), 0);
    sleep_s(0.1);
    CHECK_EQ_INT(pthread_create(&ts, NULL, stop_thread, m), 0);
    CHECK_EQ_INT(sm_monitor_stop(m), 0);
    pthread_join(ts, &trc);
    CHECK(trc == NULL); /* the other stop returned 0 too */
    pthread_join(td, NULL);
    CHECK_EQ_INT(d.rc, -EPIPE);
    CHECK(d.metrics >= 8); /* at least the final window */
    /* whole windows of 8 points; the final one may hold the 7 levels alone
     * (no node_cpu rate: a final sample too soon after the last, §7) */
    CHECK(d.metrics % 8 == 0 || d.metrics % 8 == 7);
    /* start tags: node, gpu, cgroup, build, interval_s, samples, collectors */
    CHECK_EQ_INT(d.tags, 7);
    sm_monitor_free(m);
}

/* The embedding program's log handler (scopemeter.h): lines reach it
 * without the prefix and with their level; NULL restores stderr.  And the
 * API's small helpers: sm_strerror, the version macros. */
static char handled[512];
static int handled_level = -1, handled_n;

static void on_line(int level, const char *msg, void *userdata)
{
    *(int *)userdata += 1;
    handled_level = level;
    snprintf(handled, sizeof handled, "%s", msg);
    handled_n++;
}

static void test_log_handler_and_helpers(void)
{
    char err[256];
    int calls = 0;
    sm_monitor *m;

    reset_env(fixture);
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    sm_set_log_handler(on_line, &calls);
    m = queue_monitor(0, 0);
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), SM_NOT_COLLECTING);
    sm_monitor_free(m);
    CHECK(calls >= 1);
    CHECK_EQ_INT(handled_level, SM_LOG_INFO);
    CHECK(strncmp(handled, "rank 1 does not collect", 23) == 0);
    /* a malformed RANK is a warning, through the handler too */
    setenv("RANK", "abc", 1);
    m = queue_monitor(0, 0);
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), SM_NOT_COLLECTING);
    sm_monitor_free(m);
    CHECK_EQ_INT(handled_level, SM_LOG_WARNING);
    CHECK(strstr(handled, "RANK='abc'") != NULL);
    sm_set_log_handler(NULL, NULL);
    calls = 0;
    m = queue_monitor(0, 0);
    sm_monitor_start(m, err, sizeof err);
    sm_monitor_free(m);
    CHECK_EQ_INT(calls, 0); /* back on stderr */

    CHECK_EQ_STR(sm_strerror(-ENOENT), strerror(ENOENT));
    CHECK(strstr(sm_strerror(SM_NOT_COLLECTING), "does not collect") != NULL);
    CHECK_EQ_STR(sm_strerror(0), "success");
    CHECK_EQ_STR(sm_version(), SM_VERSION);
    CHECK_EQ_INT(SM_VERSION_HEX, (SM_VERSION_MAJOR << 16) | (SM_VERSION_MINOR << 8) |
                                     SM_VERSION_PATCH);
}

/* A phase's tags past SM_TAGS_MAX are counted and the first named (the
 * monitor says them in one line, push_tags), never dropped silently as the
 * 16-tag table did once RAPL made the end tags 15. */
static void test_tags_past_the_table(void)
{
    static sm_tags t;
    char key[32];

    memset(&t, 0, sizeof t);
    for (int i = 0; i < SM_TAGS_MAX + 3; i++) {
        snprintf(key, sizeof key, "k%d", i);
        sm__tag_add(&t, key, "v%d", i);
    }
    CHECK_EQ_INT((int)t.n, SM_TAGS_MAX);
    CHECK_EQ_INT((int)t.dropped, 3);
    snprintf(key, sizeof key, "k%d", SM_TAGS_MAX);
    CHECK_EQ_STR(t.first_dropped, key);
    snprintf(key, sizeof key, "v%d", SM_TAGS_MAX - 1);
    CHECK_EQ_STR(t.v[SM_TAGS_MAX - 1].value, key);
    CHECK(SM_TAGS_MAX >= 15 + 8); /* the end tags of a rank with every source, and room */
}

/* A thread's own taker of lines (sm__log_thread_hook, internal.h; the Python
 * extension's, docs/python.md): it gets the lines of its thread only, ahead
 * of the program's handler; a line it hands back (< 0) goes on to that
 * handler; clearing it puts the previous one back. */
static char hooked[512];
static int hooked_n, hook_refuses;

static int on_thread_line(int level, const char *msg, void *userdata)
{
    (void)userdata;
    if (hook_refuses)
        return -ENOMEM;
    snprintf(hooked, sizeof hooked, "%d %s", level, msg);
    hooked_n++;
    return 0;
}

static void *log_elsewhere(void *arg)
{
    (void)arg;
    sm__log(SM_INFO, "from another thread");
    return NULL;
}

static void test_thread_hook(void)
{
    sm__log_hook h = {on_thread_line, NULL}, prev = {NULL, NULL}, none;
    int calls = 0;
    pthread_t t;

    sm_set_log_handler(on_line, &calls);
    sm__log_thread_hook(&h, &prev);
    CHECK(prev.fn == NULL);
    sm__log(SM_WARN, "here %d", 1);
    CHECK_EQ_INT(hooked_n, 1);
    CHECK_EQ_STR(hooked, "1 here 1"); /* SM_LOG_WARNING, no prefix */
    CHECK_EQ_INT(calls, 0);
    CHECK(pthread_create(&t, NULL, log_elsewhere, NULL) == 0);
    pthread_join(t, NULL);
    CHECK_EQ_INT(hooked_n, 1); /* not this thread's line */
    CHECK_EQ_INT(calls, 1);
    CHECK_EQ_STR(handled, "from another thread");
    hook_refuses = 1;
    sm__log(SM_INFO, "handed back");
    CHECK_EQ_INT(calls, 2);
    CHECK_EQ_STR(handled, "handed back");
    hook_refuses = 0;
    sm__log_thread_hook(&prev, &none);
    CHECK(none.fn == on_thread_line);
    sm__log(SM_INFO, "after");
    CHECK_EQ_INT(hooked_n, 1);
    CHECK_EQ_INT(calls, 3);
    sm_set_log_handler(NULL, NULL);
}

/* docs/design.md §9: the window tags travel with a window's points while the
 * monitor runs (a process killed later still has them), only when changed;
 * the end tags carry them again at stop. */
static void test_window_tags(void)
{
    char root[1200], err[256];
    sm_monitor *m;
    int first_point = -1, peak_at = -1, peaks_running = 0, peaks_total = 0, events = 0;
    int64_t peak_step = -1;
    int stopped_at;

    snprintf(root, sizeof root, "%s/../cg-k8s-v2-psi", fixture);
    reset_env(root);
    nrecs = 0;
    m = queue_monitor(0.02, 2);
    CHECK_EQ_INT(sm_monitor_start(m, err, sizeof err), 0);
    for (int i = 0; i < 400 && max_step() < 3; i++)
        drain_some(m, 0.02);
    CHECK(max_step() >= 3);
    stopped_at = nrecs;
    CHECK_EQ_INT(sm_monitor_stop(m), 0);
    CHECK_EQ_INT(drain_all(m), -EPIPE);
    CHECK_EQ_STR(tag("scopemeter.rank0.memory_limit_bytes"), "8589934592");
    /* the exact CPU limit travels as start tags too (docs/design.md §3) */
    CHECK_EQ_STR(tag("scopemeter.rank0.cpu_limit_cores"), "4");
    CHECK_EQ_STR(tag("scopemeter.rank0.cpu_quota_us"), "400000");
    CHECK_EQ_STR(tag("scopemeter.rank0.cpu_period_us"), "100000");
    for (int i = 0; i < nrecs; i++) {
        const sm_record *r = &recs[i];
        if (r->kind == SM_RECORD_METRIC && first_point < 0)
            first_point = i;
        if (r->kind == SM_RECORD_METRIC)
            peak_step = r->step;
        if (r->kind != SM_RECORD_TAG)
            continue;
        if (strcmp(r->key, "scopemeter.rank0.memory_at_peak") == 0) {
            peaks_total++;
            peaks_running += i < stopped_at;
            if (peak_at < 0) {
                peak_at = i;
                CHECK(peak_step == 0); /* right after the first window's points */
            }
            CHECK_EQ_STR(r->text, "working_set_mb=6500.0 anon_mb=2300.0 shmem_mb=3100.0 "
                                  "file_active_mb=400.0 kernel_mb=700.0 limit_mb=8589.9");
        }
        events += strcmp(r->key, "scopemeter.rank0.memory_events") == 0;
    }
    CHECK(first_point >= 0 && peak_at > first_point);
    /* the fixture never changes: once while running (the first window), once at the end */
    CHECK_EQ_INT(peaks_running, 1);
    CHECK_EQ_INT(peaks_total, 2);
    CHECK_EQ_INT(events, 2);
    CHECK_EQ_STR(tag("scopemeter.rank0.memory_events"), "high=0 max=0 oom=0 oom_kill=0");
    CHECK_EQ_INT(sm_monitor_dropped(m), 0);
    sm_monitor_free(m);
}

int main(void)
{
    const char *fx = getenv("SM_FIXTURES");

    snprintf(fixture, sizeof fixture, "%s/monitor-basic", fx ? fx : "tests/fixtures");
    test_windows();
    test_partial_window();
    test_final_sample_keeps_the_levels();
    test_who_collects();
    test_cap();
    test_budget();
    test_config();
    test_errors();
    test_moving_values();
    test_window_tags();
    test_fork();
    test_concurrent_stop();
    test_log_handler_and_helpers();
    test_tags_past_the_table();
    test_thread_hook();
    return CHECK_DONE();
}
