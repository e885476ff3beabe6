/*
 * compat.c — the entry points of 0.1 over 0.1's struct layouts, kept so that
 * a program built against 0.1's header still links and runs against this
 * library (docs/design.md §8, tests/c/abi/).  0.1's structs had fixed sizes
 * and no size field, so the sized API (scopemeter.h) has other names; these
 * convert to it and back.  They are not declared in scopemeter.h: nothing
 * new calls them, and nothing here may grow — the structs below are 0.1's
 * forever (the copy of 0.1's header in tests/c/abi/ is the reference).
 * (sm_identity_from_env lives in identity.c, sm_mlflow_resolve_run in
 * mlflow/mlflow_run.c: the one next to the struct it fills.)
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* ---- 0.1's layouts ------------------------------------------------------------ */

typedef struct {
    const char *key, *upstream;
    double value, logged;
    const char *scope, *unit, *source;
} series_info_0_1;

typedef struct {
    int found, version;
    const char *dir, *limiting_dir;
    double mem_limit_bytes, cpu_limit_cores;
    const char *cpu_limiting_dir, *why, *tag;
} cgroup_info_0_1;

typedef struct {
    int workers, workers_per_pod, nodes, gpus_per_worker, all_workers;
    double interval_s;
    int samples, container_limits;
} plan_input_0_1;

typedef struct {
    int collectors;
    double interval_s;
    int samples;
    double period_s;
    int gpus_per_collector, series_per_collector, node_series_per_collector,
        gpu_series_per_collector, container_series_per_collector, series, charts, sections;
    double rows_per_hour, bytes_per_row, bytes_per_day;
    int ranks_recorded, process_series;
} plan_0_1;

typedef struct {
    int kind;
    char key[256];
    char text[512]; /* 0.1 cut a tag value at 511 bytes; so does this entry */
    double value;
    int64_t timestamp_ms;
    int64_t step;
} record_0_1;

SM_EXTERN int sm_probe_series(const sm_probe *p, size_t i, series_info_0_1 *out);
SM_EXTERN void sm_probe_cgroup(const sm_probe *p, cgroup_info_0_1 *out);
SM_EXTERN int sm_plan_compute(const plan_input_0_1 *in, plan_0_1 *out, char *err, size_t errlen);
SM_EXTERN int sm_monitor_drain(sm_monitor *m, record_0_1 *out, int cap, double timeout_s);

/* ---- the entry points ----------------------------------------------------------- */

int sm_probe_series(const sm_probe *p, size_t i, series_info_0_1 *out)
{
    const sm_series_info *s = sm_probe_series_at(p, i);

    if (!s || !out)
        return -EINVAL;
    *out = (series_info_0_1){s->key, s->upstream, s->value, s->logged, s->scope, s->unit,
                             s->source};
    return 0;
}

void sm_probe_cgroup(const sm_probe *p, cgroup_info_0_1 *out)
{
    const sm_cgroup_info *c = sm_probe_cgroup_info(p);

    *out = (cgroup_info_0_1){c->found, c->version, c->dir, c->limiting_dir, c->mem_limit_bytes,
                             c->cpu_limit_cores, c->cpu_limiting_dir, c->why, c->tag};
}

int sm_plan_compute(const plan_input_0_1 *in, plan_0_1 *out, char *err, size_t errlen)
{
    sm_plan_input v = SM_PLAN_INPUT_INIT;
    sm_plan p = SM_PLAN_INIT;
    int rc;

    if (out)
        memset(out, 0, sizeof *out); /* as 0.1 did, error or not */
    if (!in || !out)
        return sm_plan_estimate(NULL, NULL, err, errlen);
    v.workers = in->workers;
    v.workers_per_pod = in->workers_per_pod;
    v.nodes = in->nodes;
    v.gpus_per_worker = in->gpus_per_worker;
    v.all_workers = in->all_workers != 0;
    v.interval_s = in->interval_s;
    v.samples = in->samples;
    v.container_limits = in->container_limits != 0;
    rc = sm_plan_estimate(&v, &p, err, errlen);
    if (rc < 0)
        return rc;
    *out = (plan_0_1){p.collectors, p.interval_s, p.samples, p.period_s, p.gpus_per_collector,
                      p.series_per_collector, p.node_series_per_collector,
                      p.gpu_series_per_collector, p.container_series_per_collector, p.series,
                      p.charts, p.sections, p.rows_per_hour, p.bytes_per_row, p.bytes_per_day,
                      p.ranks_recorded, p.process_series};
    return 0;
}

/* 0.1's drain: records copied into the caller's fixed arrays (key cut at 255
 * bytes, a tag value at 511, as 0.1 did), at most 64 a call. */
int sm_monitor_drain(sm_monitor *m, record_0_1 *out, int cap, double timeout_s)
{
    sm_record r[64];
    int n;

    if (!out || cap <= 0)
        return -EINVAL;
    n = sm_monitor_drain_records(m, r, cap < 64 ? cap : 64, sizeof r[0], timeout_s);
    for (int i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].kind = r[i].kind;
        snprintf(out[i].key, sizeof out[i].key, "%s", r[i].key);
        if (r[i].text)
            snprintf(out[i].text, sizeof out[i].text, "%s", r[i].text);
        out[i].value = r[i].value;
        out[i].timestamp_ms = r[i].timestamp_ms;
        out[i].step = r[i].step;
    }
    return n;
}
