/*
 * coll_container.c — the container_* series, measured against the cgroup's
 * own limits (docs/design.md §1, §3; docs/cgroup.md).
 *
 *   container_memory_usage_megabytes    working set at the limiting level:
 *                                       usage − inactive_file, floored at 0
 *   container_memory_usage_percentage   100 · working set / memory limit
 *   container_cpu_utilization_percentage
 *                                       100 · Δusage / (Δwall · CPU limit)
 *
 * It attaches only when a limit really exists: with neither a memory nor a
 * CPU limit, open() says so in one line and returns SM_ABSENT.  A memory
 * limit alone gives the two memory series, a CPU limit alone the CPU series.
 *
 * Files (kept open, re-read with pread at offset 0: kernfs regenerates them):
 *            v2                              v1
 *   usage    memory.current                  memory.usage_in_bytes
 *   cache    memory.stat:inactive_file       memory.stat:total_inactive_file
 *   cpu      cpu.stat:usage_usec             cpuacct.usage (ns)
 *   oom      memory.events:oom_kill          memory.oom_control:oom_kill
 *   peak     memory.peak                     memory.max_usage_in_bytes
 *   throttle cpu.stat nr_throttled,          cpu.stat nr_throttled,
 *            throttled_usec                  throttled_time (ns)
 * The last three are read at open and at the end only (run tags).
 *
 * A file that fails (the cgroup was removed: kernfs answers ENODEV) is
 * reopened once; if that fails too, the next sample tries to open it again,
 * so the series resume when the file comes back.
 *
 * A bad file degrades only the series computed from it (docs/design.md §6):
 * the memory part (usage + memory.stat: both memory series) and the CPU part
 * (cpu.stat: the CPU series) fail apart.  With one part attached, a failed
 * part is a failed sample (collectors.c says the one line per failure streak,
 * as for any collector).  With both attached, the surviving part's points
 * still go out and this file says the failed part's line itself — once per
 * streak, naming the file and the series skipped, and once when it recovers
 * — and the sample returns 0 (collectors.c's line would say "its series",
 * all of them, which is exactly what is not true here).  At open, a part
 * whose first read fails is dropped with its line; the other part stays.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "parse.h"

struct kfile {
    int fd;                 /* -1 when closed (absent or failed) */
    char path[SM_PATH_MAX]; /* with sysroot */
};

struct ctr {
    sm_cgroup cg;
    size_t srlen;           /* strlen(sysroot): paths in messages are the machine's */
    int has_mem, has_cpu;
    struct kfile usage, stat, cpu, events, peak, thr;
    const char *inactive_key;
    const char *cpu_key;    /* v2 cpu.stat key, or NULL: the file is one number */
    uint64_t cpu_ns_per_unit; /* 1000 for usage_usec, 1 for cpuacct.usage */
    const char *oom_key;
    const char *thr_time_key;
    double thr_s_per_unit;

    uint64_t cpu_prev;      /* ns */
    struct timespec t_prev;
    int have_oom;
    uint64_t oom_start;
    int have_thr;
    uint64_t thr_n0, thr_t0;
    int ws_seen;
    double ws_peak_mb;

    /* the last failure, for its one line */
    const struct kfile *bad;
    const char *bad_key;
    int bad_parse, bad_open;
    int parts;              /* parts attached: memory, CPU (1 or 2) */
    /* a part's failure line was said (both parts attached): its streak */
    int mem_said, cpu_said;

    char src_mem[200], src_pct[200], src_cpu[200];
    char buf[16384];        /* memory.stat is the largest file read (~2-4 KB) */
};

static void kf_init(struct kfile *f)
{
    f->fd = -1;
    f->path[0] = '\0';
}

static void kf_close(struct kfile *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
}

static int kf_set(struct kfile *f, const char *dir, const char *name)
{
    int n = snprintf(f->path, sizeof f->path, "%s/%s", dir, name);
    return n < 0 || (size_t)n >= sizeof f->path ? -ENAMETOOLONG : 0;
}

static int kf_open(struct kfile *f)
{
    kf_close(f);
    f->fd = sm_open_abs(f->path);
    return f->fd < 0 ? f->fd : 0;
}

static ssize_t kf_read(struct kfile *f, char *buf, size_t cap)
{
    if (f->fd < 0) {
        int rc = kf_open(f); /* it failed before: it may be back */
        if (rc < 0)
            return rc;
    }
    return sm_pread_all(f->fd, buf, cap);
}

/* One number from f: the whole file (key NULL) or "key value" of it. */
static int kf_number(struct ctr *s, struct kfile *f, const char *key, uint64_t *out)
{
    ssize_t n = kf_read(f, s->buf, sizeof s->buf);
    int unl, rc;

    s->bad = f;
    s->bad_key = key;
    s->bad_parse = 0;
    s->bad_open = 0;
    if (n < 0)
        return (int)n;
    if (key) {
        rc = sm_parse_kv(s->buf, (size_t)n, key, out);
    } else {
        rc = sm_parse_number(s->buf, (size_t)n, out, &unl);
        if (rc == 0 && unl)
            rc = -EINVAL;
    }
    s->bad_parse = rc < 0;
    return rc;
}

/* The one line for the last failure: which file, read or parse, why. */
static void describe(const struct ctr *s, int rc, char *msg, size_t len)
{
    const char *path = s->bad ? s->bad->path + s->srlen : "?";

    if (s->bad_parse && rc == -ENOENT && s->bad_key)
        snprintf(msg, len, "cannot parse %s: no %s", path, s->bad_key);
    else
        snprintf(msg, len, "cannot %s %s: %s",
                 s->bad_parse ? "parse" : s->bad_open ? "open" : "read", path, strerror(-rc));
}

/* The same, reopening the file once when it fails (removed and re-created,
 * replaced): one retry, then the error stands. */
static int kf_number_retry(struct ctr *s, struct kfile *f, const char *key, uint64_t *out)
{
    int rc = kf_number(s, f, key, out);

    if (rc < 0 && f->fd >= 0 && kf_open(f) == 0)
        rc = kf_number(s, f, key, out);
    if (rc < 0)
        kf_close(f);
    return rc;
}

static const char *mpath(const struct ctr *s, const struct kfile *f)
{
    return f->path + s->srlen;
}

static int read_ws(struct ctr *s, uint64_t *ws)
{
    uint64_t usage, inactive;
    int rc;

    rc = kf_number_retry(s, &s->usage, NULL, &usage);
    if (rc < 0)
        return rc;
    rc = kf_number_retry(s, &s->stat, s->inactive_key, &inactive);
    if (rc < 0)
        return rc;
    *ws = usage > inactive ? usage - inactive : 0;
    return 0;
}

static int read_cpu(struct ctr *s, uint64_t *ns)
{
    uint64_t v;
    int rc = kf_number_retry(s, &s->cpu, s->cpu_key, &v);

    if (rc < 0)
        return rc;
    /* in integers: a counter beyond 2^64 ns (584 years of CPU) is not a
     * reading, and converting it through a double would be undefined */
    if (v > UINT64_MAX / s->cpu_ns_per_unit) {
        s->bad_parse = 1;
        return -ERANGE;
    }
    *ns = v * s->cpu_ns_per_unit;
    return 0;
}

static int read_thr(struct ctr *s, uint64_t *n, uint64_t *t)
{
    int rc = kf_number_retry(s, &s->thr, "nr_throttled", n);
    return rc < 0 ? rc : kf_number_retry(s, &s->thr, s->thr_time_key, t);
}

static void ctr_close(void *state)
{
    struct ctr *s = state;

    kf_close(&s->usage);
    kf_close(&s->stat);
    kf_close(&s->cpu);
    kf_close(&s->events);
    kf_close(&s->peak);
    kf_close(&s->thr);
}

static int fail(struct ctr *s, sm_opened *res, const struct kfile *f, const char *what, int rc)
{
    snprintf(res->msg, sizeof res->msg, "cannot %s %s: %s; container_* dropped", what,
             mpath(s, f), strerror(-rc));
    ctr_close(s);
    return rc;
}

/* Opens f, recording it as the failure to describe when that fails. */
static int kf_open_noted(struct ctr *s, struct kfile *f)
{
    int rc = kf_open(f);

    if (rc < 0) {
        s->bad = f;
        s->bad_key = NULL;
        s->bad_parse = 0;
        s->bad_open = 1;
    }
    return rc;
}

static int ctr_open(void *state, const sm_ctx *ctx, sm_opened *res)
{
    struct ctr *s = state;
    sm_cgroup *cg = &s->cg;
    int v2, rc = 0, rc_mem = 0, rc_cpu = 0;
    uint64_t ws;
    /* a part whose first read fails: its file and why (docs/design.md §6) */
    char why_mem[300] = "", why_cpu[300] = "", both[610];

    kf_init(&s->usage);
    kf_init(&s->stat);
    kf_init(&s->cpu);
    kf_init(&s->events);
    kf_init(&s->peak);
    kf_init(&s->thr);
    s->srlen = strlen(ctx->sysroot);

    rc = sm_cgroup_resolve(ctx, cg);
    snprintf(res->status, sizeof res->status, "%s", cg->tag);
    if (rc < 0) {
        sm_line_mid(res->msg, sizeof res->msg, "cgroup: ", cg->why, "; container_* dropped");
        return rc;
    }
    s->has_mem = cg->mem_limit > 0;
    s->has_cpu = cg->cpu_cores > 0 && cg->cpu_usage_dir[0];
    if (!s->has_mem && !s->has_cpu) {
        sm_line_mid(res->msg, sizeof res->msg,
            cg->cpu_cores > 0 ? "cgroup CPU limit but no CPU usage file (" : "no cgroup limit (",
            cg->why, "): container_* absent");
        return SM_ABSENT;
    }

    if (s->has_mem) {
        const char *d = cg->mem_limit_dir;
        v2 = cg->mem_version == 2;
        s->inactive_key = v2 ? "inactive_file" : "total_inactive_file";
        if (kf_set(&s->usage, d, v2 ? "memory.current" : "memory.usage_in_bytes") < 0 ||
            kf_set(&s->stat, d, "memory.stat") < 0 ||
            kf_set(&s->events, d, v2 ? "memory.events" : "memory.oom_control") < 0 ||
            kf_set(&s->peak, d, v2 ? "memory.peak" : "memory.max_usage_in_bytes") < 0)
            return fail(s, res, &s->usage, "open", -ENAMETOOLONG);
        if ((rc_mem = kf_open_noted(s, &s->usage)) < 0 ||
            (rc_mem = kf_open_noted(s, &s->stat)) < 0 || (rc_mem = read_ws(s, &ws)) < 0) {
            describe(s, rc_mem, why_mem, sizeof why_mem);
            kf_close(&s->usage);
            kf_close(&s->stat);
            s->has_mem = 0;
        }
    }
    if (s->has_mem) {
        v2 = cg->mem_version == 2;
        /* optional: the counter (kernel >= 4.13 on v1) and the peak (v2: >= 5.19) */
        s->oom_key = "oom_kill";
        if (kf_open(&s->events) == 0 &&
            kf_number(s, &s->events, s->oom_key, &s->oom_start) == 0)
            s->have_oom = 1;
        else
            kf_close(&s->events);
        if (kf_open(&s->peak) < 0)
            kf_close(&s->peak);
        snprintf(s->src_mem, sizeof s->src_mem, "%s - memory.stat:%s", mpath(s, &s->usage),
                 s->inactive_key);
        snprintf(s->src_pct, sizeof s->src_pct, "%s - memory.stat:%s, %s", mpath(s, &s->usage),
                 s->inactive_key, v2 ? "memory.max" : "memory.limit_in_bytes");
    }
    if (s->has_cpu) {
        v2 = cg->cpu_version == 2;
        s->cpu_key = v2 ? "usage_usec" : NULL;
        s->cpu_ns_per_unit = v2 ? 1000 : 1;
        if (kf_set(&s->cpu, cg->cpu_usage_dir, v2 ? "cpu.stat" : "cpuacct.usage") < 0)
            return fail(s, res, &s->cpu, "open", -ENAMETOOLONG);
        /* baseline: the first sample is a delta from here */
        if ((rc_cpu = kf_open_noted(s, &s->cpu)) < 0 ||
            (rc_cpu = read_cpu(s, &s->cpu_prev)) < 0) {
            describe(s, rc_cpu, why_cpu, sizeof why_cpu);
            kf_close(&s->cpu);
            s->has_cpu = 0;
        }
    }
    if (!s->has_mem && !s->has_cpu) { /* every part that exists failed */
        snprintf(both, sizeof both, "%s%s%s", why_mem, why_mem[0] && why_cpu[0] ? "; " : "",
                 why_cpu);
        sm_line_mid(res->msg, sizeof res->msg, "", both, "; container_* dropped");
        ctr_close(s);
        return rc_mem < 0 ? rc_mem : rc_cpu;
    }
    if (s->has_cpu) {
        v2 = cg->cpu_version == 2;
        clock_gettime(CLOCK_MONOTONIC, &s->t_prev);
        snprintf(s->src_cpu, sizeof s->src_cpu, "%s%s, %s", mpath(s, &s->cpu),
                 v2 ? ":usage_usec" : "", v2 ? "cpu.max" : "cpu.cfs_quota_us/cfs_period_us");
        if (cg->cpu_quota_dir[0]) {
            s->thr_time_key = v2 ? "throttled_usec" : "throttled_time";
            s->thr_s_per_unit = v2 ? 1e-6 : 1e-9;
            if (kf_set(&s->thr, cg->cpu_quota_dir, "cpu.stat") == 0 && kf_open(&s->thr) == 0 &&
                read_thr(s, &s->thr_n0, &s->thr_t0) == 0)
                s->have_thr = 1;
            else
                kf_close(&s->thr);
        }
    }
    s->parts = s->has_mem + s->has_cpu;
    if (why_mem[0]) /* the other part stands: only this one's series go */
        sm_line_mid(res->msg, sizeof res->msg, "", why_mem, "; container_memory_* dropped");
    else if (why_cpu[0])
        sm_line_mid(res->msg, sizeof res->msg, "", why_cpu,
            "; container_cpu_utilization_percentage dropped");
    else if (!s->has_mem)
        snprintf(res->msg, sizeof res->msg,
                 "cgroup: CPU limit only, no memory limit: container_memory_* absent");
    else if (cg->cpu_cores > 0 && !s->has_cpu)
        snprintf(res->msg, sizeof res->msg, "cgroup: CPU limit but no CPU usage file: "
                 "container_cpu_utilization_percentage absent");
    else if (!s->has_cpu)
        snprintf(res->msg, sizeof res->msg, "cgroup: memory limit only, no CPU limit: "
                 "container_cpu_utilization_percentage absent");
    return 0;
}

/* One part of a sample failed (rc < 0) or succeeded (rc == 0).  With both
 * parts attached this file says the part's line, once per streak; with one,
 * collectors.c says it (the sample fails). */
static void part_said(struct ctr *s, int rc, int *said, const char *series)
{
    char line[300];

    if (s->parts < 2)
        return;
    if (rc < 0 && !*said) {
        describe(s, rc, line, sizeof line);
        sm_log(SM_WARN, "container: %s; %s skipped until it recovers", line, series);
        *said = 1;
    } else if (rc == 0 && *said) {
        sm_log(SM_INFO, "container: %s recovered", series);
        *said = 0;
    }
}

static int ctr_sample(void *state, sm_points *out, char *msg, size_t msglen)
{
    struct ctr *s = state;
    int rc, rc_mem = 0, rc_cpu = 0;

    if (s->has_mem) {
        uint64_t ws;
        rc_mem = read_ws(s, &ws);
        if (rc_mem < 0) {
            if (s->parts < 2)
                describe(s, rc_mem, msg, msglen);
        } else {
            double mb = (double)ws / 1e6;
            if (!s->ws_seen || mb > s->ws_peak_mb)
                s->ws_peak_mb = mb;
            s->ws_seen = 1;
            sm_emit(out, "container_memory_usage_megabytes", mb, "MB", s->src_mem,
                    SM_AGG_MEAN);
            sm_emit(out, "container_memory_usage_percentage",
                    100.0 * (double)ws / (double)s->cg.mem_limit, "percent", s->src_pct,
                    SM_AGG_MEAN);
        }
        part_said(s, rc_mem, &s->mem_said, "container_memory_*");
    }
    if (s->has_cpu) {
        uint64_t ns;
        struct timespec now;
        rc_cpu = read_cpu(s, &ns);
        if (rc_cpu < 0) {
            if (s->parts < 2)
                describe(s, rc_cpu, msg, msglen);
        } else {
            clock_gettime(CLOCK_MONOTONIC, &now);
            double dt = (double)(now.tv_sec - s->t_prev.tv_sec) +
                        (double)(now.tv_nsec - s->t_prev.tv_nsec) / 1e9;
            if (ns >= s->cpu_prev) {
                double pct = dt > 0 ? 100.0 * ((double)(ns - s->cpu_prev) / 1e9) /
                                          (dt * s->cg.cpu_cores)
                                    : 0.0;
                sm_emit(out, "container_cpu_utilization_percentage", pct, "percent",
                        s->src_cpu, SM_AGG_MEAN);
            } /* else: the counter went backwards (cgroup re-created): re-base, no point */
            s->cpu_prev = ns;
            s->t_prev = now;
        }
        part_said(s, rc_cpu, &s->cpu_said, "container_cpu_utilization_percentage");
    }
    /* one part: its failure is the sample's (collectors.c says the line) */
    rc = rc_mem < 0 ? rc_mem : rc_cpu;
    return s->parts < 2 ? rc : 0;
}

static void ctr_tags(void *state, int phase, sm_tags *out)
{
    struct ctr *s = state;
    uint64_t v, n, t;

    if (phase != SM_TAGS_END)
        return; /* the start tag (scopemeter.rankN.cgroup) is open()'s status */
    if (s->have_oom && kf_number_retry(s, &s->events, s->oom_key, &v) == 0)
        /* a counter below its start value means a re-created cgroup: all of it is ours */
        sm_tag_add(out, "oom_kill", "%llu",
                   (unsigned long long)(v >= s->oom_start ? v - s->oom_start : v));
    if (s->ws_seen)
        sm_tag_add(out, "mem_peak_sampled_mb", "%.1f", s->ws_peak_mb);
    if (s->peak.fd >= 0 && kf_number_retry(s, &s->peak, NULL, &v) == 0)
        sm_tag_add(out, "memory_peak_mb", "%.1f", (double)v / 1e6);
    if (s->have_thr && read_thr(s, &n, &t) == 0) {
        sm_tag_add(out, "cpu_throttled_periods", "%llu",
                   (unsigned long long)(n >= s->thr_n0 ? n - s->thr_n0 : n));
        sm_tag_add(out, "cpu_throttled_s", "%.1f",
                   (double)(t >= s->thr_t0 ? t - s->thr_t0 : t) * s->thr_s_per_unit);
    }
}

const sm_collector_ops sm_coll_container = {
    .name = "container",
    .series = 3,
    .status_tag = "cgroup",
    .state_size = sizeof(struct ctr),
    .open = ctr_open,
    .sample = ctr_sample,
    .tags = ctr_tags,
    .close = ctr_close,
};
