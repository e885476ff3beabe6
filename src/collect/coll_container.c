/*
 * coll_container.c — the container_* series, measured against the cgroup's
 * own limits (docs/design.md §1, §3; docs/cgroup.md).
 *
 *   container_memory_usage_megabytes    working set at the limiting level:
 *                                       usage − inactive_file, floored at 0
 *   container_memory_usage_percentage   100 · working set / memory limit
 *   container_cpu_utilization_percentage
 *                                       100 · Δusage / (Δwall · CPU limit)
 *   container_memory_{anon,shmem,file_active,kernel}_megabytes
 *                                       the working set's parts (§9), from
 *                                       the same memory.stat read
 *   container_{memory,cpu}_pressure_percentage
 *                                       v2 PSI: 100 · Δ"some total" µs / Δwall µs
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
 *   psi      memory.pressure, cpu.pressure   (none: one line)
 *   events   memory.events                   memory.failcnt, memory.oom_control
 * oom, peak and throttle are read at open and at the end only (run tags);
 * events at open, once per window and at the end (docs/design.md §9: the
 * tags that survive an OOM kill ship with the window's points).
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
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "parse.h"

struct kfile {
    int fd;                 /* -1 when closed (absent or failed) */
    char path[SM_PATH_MAX]; /* with sysroot */
};

/* One PSI file (Documentation/accounting/psi.rst) read as a rate. */
struct psi {
    struct kfile f;
    int on;                 /* attached at open */
    int err;                /* why not (-errno), for open()'s line */
    int malformed;          /* ... the file was read but not understood */
    int said;               /* its failure line was said (streak) */
    uint64_t t0, prev;      /* "some total" µs at open, at the last sample */
    struct timespec t_prev;
    double peak;            /* highest sample, percent */
    char src[200];
};

/* What the window tags last shipped (docs/design.md §9): a tag goes out again
 * only when its value changed, so a steady run ships nothing per window. */
struct shipped {
    int valid;
    double t;               /* monotonic time it was shipped */
    uint64_t v[4];
};

struct ctr {
    sm_cgroup cg;
    size_t srlen;           /* strlen(sysroot): paths in messages are the machine's */
    int has_mem, has_cpu;
    struct kfile usage, stat, cpu, events, peak, thr, failcnt;
    struct psi mpsi, cpsi;
    int v1mem;              /* the memory controller is v1 (total_* keys) */
    int have_comp;          /* memory.stat has every part of the working set */
    sm_memstat ms;          /* the last memory.stat read */
    int have_ev;            /* memory events are readable; ev0 is their start */
    sm_memevents ev0;
    double t_open;          /* monotonic, for the window tags' spacing */
    /* the working set's parts at the highest sampled working set, MB */
    double peak_anon, peak_shmem, peak_fa, peak_kernel;
    double shipped_peak_mb;
    int shipped_peak;
    struct shipped ev_shipped, pr_shipped;
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
    uint64_t peak0;         /* the kernel's peak at open, bytes */
    int peak_reset;         /* ... reset there: whatever it reads is the run's */

    /* the last failure, for its one line */
    const struct kfile *bad;
    const char *bad_key;
    int bad_parse, bad_open;
    int parts;              /* parts attached: memory, CPU (1 or 2) */
    /* a part's failure line was said (both parts attached): its streak */
    int mem_said, cpu_said;

    char src_mem[200], src_pct[200], src_cpu[200];
    char src_anon[200], src_shmem[200], src_fa[200], src_kernel[200];
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
    f->fd = sm__open_abs(f->path);
    return f->fd < 0 ? f->fd : 0;
}

static ssize_t kf_read(struct kfile *f, char *buf, size_t cap)
{
    if (f->fd < 0) {
        int rc = kf_open(f); /* it failed before: it may be back */
        if (rc < 0)
            return rc;
    }
    return sm__pread_all(f->fd, buf, cap);
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
        rc = sm__parse_kv(s->buf, (size_t)n, key, out);
    } else {
        rc = sm__parse_number(s->buf, (size_t)n, out, &unl);
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

/* memory.stat into s->ms, as kf_number reads one number (the same failure
 * bookkeeping): one read gives the working set's cache and its parts. */
static int kf_memstat(struct ctr *s, struct kfile *f)
{
    ssize_t n = kf_read(f, s->buf, sizeof s->buf);
    int rc;

    s->bad = f;
    s->bad_key = s->inactive_key;
    s->bad_parse = 0;
    s->bad_open = 0;
    if (n < 0)
        return (int)n;
    rc = sm__parse_memstat(s->buf, (size_t)n, s->v1mem, &s->ms);
    s->bad_parse = rc < 0;
    return rc;
}

static int read_ws(struct ctr *s, uint64_t *ws)
{
    uint64_t usage;
    int rc;

    rc = kf_number_retry(s, &s->usage, NULL, &usage);
    if (rc < 0)
        return rc;
    rc = kf_memstat(s, &s->stat);
    if (rc < 0 && s->stat.fd >= 0 && kf_open(&s->stat) == 0)
        rc = kf_memstat(s, &s->stat);
    if (rc < 0) {
        kf_close(&s->stat);
        return rc;
    }
    *ws = usage > s->ms.inactive_file ? usage - s->ms.inactive_file : 0;
    return 0;
}

/* The memory events of docs/design.md §9: v2 memory.events; v1 has no such
 * file, its counters are memory.failcnt (charges that hit the limit: max)
 * and memory.oom_control:oom_kill.  0 when any counter was read. */
static int read_events(struct ctr *s, sm_memevents *ev)
{
    uint64_t v;
    ssize_t n;
    int rc;

    memset(ev, 0, sizeof *ev);
    if (!s->v1mem) {
        if (s->events.fd < 0)
            return -ENOENT;
        n = kf_read(&s->events, s->buf, sizeof s->buf);
        rc = n < 0 ? (int)n : sm__parse_memory_events(s->buf, (size_t)n, ev);
        return rc;
    }
    if (s->events.fd >= 0 && kf_number(s, &s->events, "oom_kill", &v) == 0) {
        ev->oom_kill = v;
        ev->have |= SM_ME_OOM_KILL;
    }
    if (s->failcnt.fd >= 0 && kf_number(s, &s->failcnt, NULL, &v) == 0) {
        ev->max = v;
        ev->have |= SM_ME_MAX;
    }
    return ev->have ? 0 : -ENOENT;
}

static double since(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

static int psi_read(struct ctr *s, struct psi *p, uint64_t *total)
{
    ssize_t n = kf_read(&p->f, s->buf, sizeof s->buf);
    int rc;

    if (n < 0) {
        kf_close(&p->f);
        return (int)n;
    }
    rc = sm__parse_psi_some(s->buf, (size_t)n, total);
    p->malformed = rc < 0;
    if (rc < 0)
        kf_close(&p->f); /* reopened next time: the file may have been replaced */
    return rc;
}

static const char *psi_why(const struct psi *p)
{
    if (!p->err)
        return strerror(ENOENT);
    return p->malformed ? "no \"some ... total=\" line" : strerror(-p->err);
}

/* Opens a PSI file and takes its baseline.  0, or -errno (the line is the
 * caller's: it names the file and the series). */
static int psi_open(struct ctr *s, struct psi *p, const char *dir, const char *name)
{
    int rc = kf_set(&p->f, dir, name);

    if (rc == 0)
        rc = kf_open(&p->f);
    /* psi=0 on the kernel command line: the file exists and reading it fails
     * with EOPNOTSUPP (kernel/sched/psi.c psi_show) */
    if (rc == 0)
        rc = psi_read(s, p, &p->t0);
    if (rc < 0) {
        kf_close(&p->f);
        p->err = rc;
        return rc;
    }
    p->prev = p->t0;
    clock_gettime(CLOCK_MONOTONIC, &p->t_prev);
    snprintf(p->src, sizeof p->src, "%s:some total", mpath(s, &p->f));
    p->on = 1;
    return 0;
}

/* One PSI sample: 100 · Δstall µs / Δwall µs.  A failure skips the series for
 * this sample with one line per streak (the other series go on). */
static void psi_sample(struct ctr *s, struct psi *p, const char *key, sm_points *out)
{
    struct timespec now;
    uint64_t v;
    int rc;

    if (!p->on)
        return;
    rc = psi_read(s, p, &v);
    if (rc < 0) {
        if (!p->said)
            sm__log(SM_WARN, "container: cannot %s %s: %s; %s skipped until it recovers",
                   p->malformed ? "parse" : "read", mpath(s, &p->f),
                   p->malformed ? "no \"some ... total=\" line" : strerror(-rc), key);
        p->said = 1;
        return;
    }
    if (p->said)
        sm__log(SM_INFO, "container: %s recovered", key);
    p->said = 0;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (v >= p->prev) {
        double dt = since(&p->t_prev, &now);
        double pct = dt > 0 ? 100.0 * (double)(v - p->prev) / (dt * 1e6) : 0.0;
        if (pct > p->peak)
            p->peak = pct;
        sm__emit(out, key, pct, "percent", p->src, SM_AGG_RATE);
    } else {
        p->t0 = v; /* went backwards: a re-created cgroup; its total is all ours */
    }
    p->prev = v;
    p->t_prev = now;
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
    kf_close(&s->failcnt);
    kf_close(&s->mpsi.f);
    kf_close(&s->cpsi.f);
}

static int fail(struct ctr *s, sm_opened *res, const struct kfile *f, const char *what, int rc)
{
    snprintf(res->msg, sizeof res->msg, "cannot %s %s: %s; container_* dropped", what,
             mpath(s, f), strerror(-rc));
    ctr_close(s);
    return rc;
}

/* The kernel's peak is the cgroup's since it was created or last reset, not
 * the run's (docs/cgroup.md, "The kernel's peak"): a run that never passed
 * 105 MB read 314.6 MB from an earlier job in the same cgroup.  The
 * recording's own instance (ctx->owns_peak) resets it where the kernel lets
 * it: on cgroup v1 writing 0 to memory.max_usage_in_bytes sets it to the
 * usage now (Documentation/admin-guide/cgroup-v1/memory.rst, 5.4); on v2
 * (>= 6.12) a write to memory.peak resets it for that descriptor only
 * (cgroup-v2.rst), so the descriptor kept is the one written.  Else (no
 * write access: a read-only /sys/fs/cgroup in a container; v2 before 6.12;
 * an instance that only watches) the end tags it only when it rose above its
 * value here: a peak that never moved is an earlier one.  Never under
 * SCOPEMETER_SYSROOT (fixture files are not the kernel's).  The line says
 * why, when the peak here is above the usage (so it may predate the run). */
static void peak_open(struct ctr *s, const sm_ctx *ctx, int v2, char *msg, size_t len)
{
    uint64_t usage = 0;
    int rc = -EPERM;

    if (kf_open(&s->peak) < 0 || kf_number(s, &s->peak, NULL, &s->peak0) < 0) {
        kf_close(&s->peak); /* optional: v2 before 5.19 has no memory.peak */
        return;
    }
    if (ctx->owns_peak && !ctx->sysroot[0]) {
        int fd = open(s->peak.path, (v2 ? O_RDWR : O_WRONLY) | O_CLOEXEC);
        const char *word = v2 ? "reset\n" : "0\n";

        rc = fd < 0 ? -errno : write(fd, word, strlen(word)) < 0 ? -errno : 0;
        if (rc == 0 && v2) {
            kf_close(&s->peak); /* the reset holds for this descriptor only */
            s->peak.fd = fd;
        } else if (fd >= 0) {
            close(fd);
        }
    }
    s->peak_reset = rc == 0;
    if (s->peak_reset || !ctx->owns_peak || kf_number(s, &s->usage, NULL, &usage) < 0 ||
        s->peak0 <= usage)
        return;
    sm__line_join(msg, len, "the kernel's peak (%s: %.1f MB, above the %.1f MB in use) may "
                 "predate the run and cannot be reset here (%s): memory_peak_mb is tagged only "
                 "if the run passes it", mpath(s, &s->peak), (double)s->peak0 / 1e6,
                 (double)usage / 1e6, strerror(-rc));
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

/* The series of docs/design.md §9 that cannot be had here, joined to open()'s
 * one line: the parts without a key of memory.stat, the pressure without PSI
 * (v1 has none; v2 without the file, or psi=0 where reading it fails). */
static void absences(struct ctr *s, char *msg, size_t len)
{
    const sm_cgroup *cg = &s->cg;
    int want_m = s->has_mem, want_c = s->has_cpu;
    const char *miss;
    char why[200];
    int em;

    if (s->has_mem && !s->have_comp && (miss = sm__memstat_missing(s->ms.have, s->v1mem)))
        sm__line_join(msg, len, "memory.stat has no %s: "
                     "container_memory_{anon,shmem,file_active,kernel}_megabytes absent", miss);
    if ((want_m && cg->mem_version == 1) || (want_c && cg->cpu_version == 1)) {
        /* a v1 controller: no pressure files at all (psi.rst, "Cgroup2 interface") */
        if (want_m && cg->mem_version == 1 && want_c && cg->cpu_version == 1)
            sm__line_join(msg, len, "cgroup v1 has no PSI: container_*_pressure_percentage absent");
        else
            sm__line_join(msg, len, "cgroup v1 has no PSI: container_%s_pressure_percentage absent",
                         cg->mem_version == 1 && want_m ? "memory" : "cpu");
        want_m &= cg->mem_version == 2;
        want_c &= cg->cpu_version == 2;
    }
    want_m &= !s->mpsi.on;
    want_c &= !s->cpsi.on;
    if (!want_m && !want_c)
        return;
    em = strcmp(psi_why(&s->mpsi), psi_why(&s->cpsi)) == 0;
    if (want_m && want_c && em)
        snprintf(why, sizeof why, "memory.pressure, cpu.pressure: %s", psi_why(&s->mpsi));
    else if (want_m && want_c)
        snprintf(why, sizeof why, "memory.pressure: %s, cpu.pressure: %s", psi_why(&s->mpsi),
                 psi_why(&s->cpsi));
    else
        snprintf(why, sizeof why, "%s: %s", want_m ? "memory.pressure" : "cpu.pressure",
                 psi_why(want_m ? &s->mpsi : &s->cpsi));
    sm__line_join(msg, len, "no PSI (%s): container_%s_pressure_percentage absent", why,
                 want_m && want_c ? "*" : want_m ? "memory" : "cpu");
}

static int ctr_open(void *state, const sm_ctx *ctx, sm_opened *res)
{
    struct ctr *s = state;
    sm_cgroup *cg = &s->cg;
    int v2, rc = 0, rc_mem = 0, rc_cpu = 0;
    uint64_t ws;
    /* a part whose first read fails: its file and why (docs/design.md §6) */
    char why_mem[300] = "", why_cpu[300] = "", both[610];
    char peak_msg[SM_NOTE_LINE] = "";

    kf_init(&s->usage);
    kf_init(&s->stat);
    kf_init(&s->cpu);
    kf_init(&s->events);
    kf_init(&s->peak);
    kf_init(&s->thr);
    kf_init(&s->failcnt);
    kf_init(&s->mpsi.f);
    kf_init(&s->cpsi.f);
    s->t_open = sm__now_mono();
    s->srlen = strlen(ctx->sysroot);

    rc = sm__cgroup_resolve(ctx, cg);
    snprintf(res->status, sizeof res->status, "%s", cg->tag);
    if (rc < 0) {
        sm__line_mid(res->msg, sizeof res->msg, "cgroup: ", cg->why, "; container_* dropped");
        return rc;
    }
    s->has_mem = cg->mem_limit > 0;
    s->has_cpu = cg->cpu_cores > 0 && cg->cpu_usage_dir[0];
    if (!s->has_mem && !s->has_cpu) {
        if (cg->cpu_cores > 0)
            sm__line_mid(res->msg, sizeof res->msg, "cgroup: CPU limit but no CPU usage (",
                         cg->cpu_usage_why, "), no memory limit: container_* absent");
        else
            sm__line_mid(res->msg, sizeof res->msg, "no cgroup limit (", cg->why,
                         "): container_* absent");
        return SM_ABSENT;
    }

    if (s->has_mem) {
        const char *d = cg->mem_limit_dir;
        v2 = cg->mem_version == 2;
        s->v1mem = !v2;
        s->inactive_key = v2 ? "inactive_file" : "total_inactive_file";
        if (kf_set(&s->usage, d, v2 ? "memory.current" : "memory.usage_in_bytes") < 0 ||
            kf_set(&s->stat, d, "memory.stat") < 0 ||
            kf_set(&s->events, d, v2 ? "memory.events" : "memory.oom_control") < 0 ||
            kf_set(&s->peak, d, v2 ? "memory.peak" : "memory.max_usage_in_bytes") < 0 ||
            kf_set(&s->failcnt, d, "memory.failcnt") < 0)
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
        if (kf_open(&s->events) == 0)
            s->have_oom = kf_number(s, &s->events, s->oom_key, &s->oom_start) == 0;
        peak_open(s, ctx, v2, peak_msg, sizeof peak_msg);
        if (!v2 && kf_open(&s->failcnt) < 0)
            kf_close(&s->failcnt);
        if (read_events(s, &s->ev0) == 0)
            s->have_ev = 1;
        /* memory.events without oom_kill (v2 before 4.13) still has the
         * other counters: the file stays open while either needs it */
        if (!s->have_oom && !s->have_ev)
            kf_close(&s->events);
        /* the parts need every key; an older kernel's memory.stat lacks
         * shmem: all four go, with one line (not a part mislabelled) */
        s->have_comp = (s->ms.have & SM_MS_PARTS) == SM_MS_PARTS;
        if (s->have_comp) {
            const char *k = v2 ? "" : "total_";
            snprintf(s->src_anon, sizeof s->src_anon, "%s:%s", mpath(s, &s->stat),
                     v2 ? "anon" : "total_rss");
            snprintf(s->src_shmem, sizeof s->src_shmem, "%s:%sshmem", mpath(s, &s->stat), k);
            snprintf(s->src_fa, sizeof s->src_fa, "%s:%sactive_file", mpath(s, &s->stat), k);
            snprintf(s->src_kernel, sizeof s->src_kernel, "working set - %s, %sshmem, "
                     "%sactive_file", v2 ? "anon" : "total_rss", k, k);
        }
        if (v2)
            psi_open(s, &s->mpsi, cg->mem_limit_dir, "memory.pressure");
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
        sm__line_mid(res->msg, sizeof res->msg, "", both, "; container_* dropped");
        ctr_close(s);
        return rc_mem < 0 ? rc_mem : rc_cpu;
    }
    if (s->has_cpu) {
        v2 = cg->cpu_version == 2;
        if (v2)
            psi_open(s, &s->cpsi, cg->cpu_usage_dir, "cpu.pressure");
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
        sm__line_mid(res->msg, sizeof res->msg, "", why_mem, "; container_memory_* dropped");
    else if (why_cpu[0])
        sm__line_mid(res->msg, sizeof res->msg, "", why_cpu,
            "; container_cpu_utilization_percentage dropped");
    else if (!s->has_mem)
        snprintf(res->msg, sizeof res->msg,
                 "cgroup: CPU limit only, no memory limit: container_memory_* absent");
    else if (cg->cpu_cores > 0 && !s->has_cpu)
        sm__line_mid(res->msg, sizeof res->msg, "cgroup: CPU limit but no CPU usage (",
                     cg->cpu_usage_why, "): container_cpu_utilization_percentage absent");
    else if (!s->has_cpu)
        snprintf(res->msg, sizeof res->msg, "cgroup: memory limit only, no CPU limit: "
                 "container_cpu_utilization_percentage absent");
    absences(s, res->msg, sizeof res->msg);
    if (peak_msg[0])
        sm__line_join(res->msg, sizeof res->msg, "%s", peak_msg);
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
        sm__log(SM_WARN, "container: %s; %s skipped until it recovers", line, series);
        *said = 1;
    } else if (rc == 0 && *said) {
        sm__log(SM_INFO, "container: %s recovered", series);
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
            const sm_memstat *m = &s->ms;
            int comp = s->have_comp && (m->have & SM_MS_PARTS) == SM_MS_PARTS;
            /* the kernel part is the rest, in integers (floored at 0 at
             * each step: no wrap on absurd values): slab, sockets, page
             * tables, stacks (and on v1 usage_in_bytes' per-CPU slack) */
            uint64_t kern = comp ? ws : 0;
            kern = kern > m->anon ? kern - m->anon : 0;
            kern = kern > m->shmem ? kern - m->shmem : 0;
            kern = kern > m->active_file ? kern - m->active_file : 0;
            if (!s->ws_seen || mb > s->ws_peak_mb) {
                s->ws_peak_mb = mb;
                s->peak_anon = comp ? (double)m->anon / 1e6 : 0;
                s->peak_shmem = comp ? (double)m->shmem / 1e6 : 0;
                s->peak_fa = comp ? (double)m->active_file / 1e6 : 0;
                s->peak_kernel = (double)kern / 1e6;
            }
            s->ws_seen = 1;
            sm__emit(out, "container_memory_usage_megabytes", mb, "MB", s->src_mem,
                    SM_AGG_MEAN);
            sm__emit(out, "container_memory_usage_percentage",
                    100.0 * (double)ws / (double)s->cg.mem_limit, "percent", s->src_pct,
                    SM_AGG_MEAN);
            if (comp) {
                sm__emit(out, "container_memory_anon_megabytes", (double)m->anon / 1e6, "MB",
                        s->src_anon, SM_AGG_MEAN);
                sm__emit(out, "container_memory_shmem_megabytes", (double)m->shmem / 1e6, "MB",
                        s->src_shmem, SM_AGG_MEAN);
                sm__emit(out, "container_memory_file_active_megabytes",
                        (double)m->active_file / 1e6, "MB", s->src_fa, SM_AGG_MEAN);
                sm__emit(out, "container_memory_kernel_megabytes", (double)kern / 1e6, "MB",
                        s->src_kernel, SM_AGG_MEAN);
            }
        }
        part_said(s, rc_mem, &s->mem_said, "container_memory_*");
        /* its own file: a bad memory.current does not stop it (§6) */
        psi_sample(s, &s->mpsi, "container_memory_pressure_percentage", out);
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
                sm__emit(out, "container_cpu_utilization_percentage", pct, "percent",
                        s->src_cpu, SM_AGG_RATE);
            } /* else: the counter went backwards (cgroup re-created): re-base, no point */
            s->cpu_prev = ns;
            s->t_prev = now;
        }
        part_said(s, rc_cpu, &s->cpu_said, "container_cpu_utilization_percentage");
        psi_sample(s, &s->cpsi, "container_cpu_pressure_percentage", out);
    }
    /* one part: its failure is the sample's (collectors.c says the line) */
    rc = rc_mem < 0 ? rc_mem : rc_cpu;
    return s->parts < 2 ? rc : 0;
}

/* A window tag that changes often (events under memory.high, pressure)
 * ships at most every (time since open)/128: every window for the first
 * ~20 minutes at the 10 s default, then ever more sparsely.  The sink's ring
 * keeps each distinct tag text for the run (ring.c), so their number must
 * stay bounded: about 128 x (1 + ln(run / (128 x window))) per tag, ~1000 for
 * a week at 10 s.  The end tag always carries the exact value. */
static int spaced(const struct ctr *s, const struct shipped *sh)
{
    double now = sm__now_mono();

    return !sh->valid || now - sh->t >= (now - s->t_open) / 128.0;
}

static void ship(struct shipped *sh, const uint64_t v[4])
{
    memcpy(sh->v, v, sizeof sh->v);
    sh->valid = 1;
    sh->t = sm__now_mono();
}

static uint64_t delta(uint64_t v, uint64_t v0)
{
    /* below its start value: a re-created cgroup, all of it is ours */
    return v >= v0 ? v - v0 : v;
}

/* scopemeter.rankN.memory_at_peak (docs/design.md §9) */
static void tag_at_peak(struct ctr *s, sm_tags *out)
{
    if (s->have_comp)
        sm__tag_add(out, "memory_at_peak", "working_set_mb=%.1f anon_mb=%.1f shmem_mb=%.1f "
                   "file_active_mb=%.1f kernel_mb=%.1f limit_mb=%.1f", s->ws_peak_mb,
                   s->peak_anon, s->peak_shmem, s->peak_fa, s->peak_kernel,
                   (double)s->cg.mem_limit / 1e6);
    else
        sm__tag_add(out, "memory_at_peak", "working_set_mb=%.1f limit_mb=%.1f", s->ws_peak_mb,
                   (double)s->cg.mem_limit / 1e6);
    s->shipped_peak_mb = s->ws_peak_mb;
    s->shipped_peak = 1;
}

/* scopemeter.rankN.memory_events: the deltas since open, as v2
 * "high=12 max=3 oom=0 oom_kill=0" or v1 "max=3 oom_kill=0" (the counters
 * the kernel has).  window: only when they changed, high/max spaced. */
static void tag_events(struct ctr *s, int window, sm_tags *out)
{
    static const char *const name[4] = {"high", "max", "oom", "oom_kill"};
    static const unsigned bit[4] = {SM_ME_HIGH, SM_ME_MAX, SM_ME_OOM, SM_ME_OOM_KILL};
    sm_memevents ev;
    uint64_t d[4], now[4], start[4];
    char val[160] = "";
    unsigned have;

    if (!s->have_ev || read_events(s, &ev) < 0)
        return;
    now[0] = ev.high, now[1] = ev.max, now[2] = ev.oom, now[3] = ev.oom_kill;
    start[0] = s->ev0.high, start[1] = s->ev0.max, start[2] = s->ev0.oom,
    start[3] = s->ev0.oom_kill;
    have = ev.have & s->ev0.have;
    for (int i = 0; i < 4; i++)
        d[i] = have & bit[i] ? delta(now[i], start[i]) : 0;
    if (window && s->ev_shipped.valid) {
        if (memcmp(d, s->ev_shipped.v, sizeof d) == 0)
            return;
        /* an OOM is news at once; high and max can move every window */
        if (d[2] == s->ev_shipped.v[2] && d[3] == s->ev_shipped.v[3] &&
            !spaced(s, &s->ev_shipped))
            return;
    }
    for (int i = 0; i < 4; i++)
        if (have & bit[i])
            sm__line_add(val, sizeof val, "%s%s=%llu", val[0] ? " " : "", name[i],
                        (unsigned long long)d[i]);
    if (!val[0])
        return;
    sm__tag_add(out, "memory_events", "%s", val);
    ship(&s->ev_shipped, d);
}

/* A percentage in tenths, for comparing; a rate over a few nanoseconds can be
 * absurd (capped), and a negative or NaN one is 0.  Rounded by hand, not
 * llround: it was the CLI's one libm symbol, and loading libm made its
 * IFUNC resolvers resident (bench/README.md table 5 has what it cost). */
static uint64_t tenths(double pct)
{
    if (!(pct > 0))
        return 0;
    return pct < 1e15 ? (uint64_t)(pct * 10 + 0.5) : (uint64_t)1e16;
}

/* scopemeter.rankN.pressure: run totals of "some" stall (s) and the highest
 * sample (percent), v2 only.  Compared in the units shown (centiseconds,
 * tenths of a percent), so a change below them ships nothing. */
static void tag_pressure(struct ctr *s, int window, sm_tags *out)
{
    uint64_t v[4] = {0};
    char val[160] = "";

    if (!s->mpsi.on && !s->cpsi.on)
        return;
    if (s->mpsi.on) {
        v[0] = delta(s->mpsi.prev, s->mpsi.t0) / 10000;
        v[1] = tenths(s->mpsi.peak);
    }
    if (s->cpsi.on) {
        v[2] = delta(s->cpsi.prev, s->cpsi.t0) / 10000;
        v[3] = tenths(s->cpsi.peak);
    }
    if (window && s->pr_shipped.valid &&
        (memcmp(v, s->pr_shipped.v, sizeof v) == 0 || !spaced(s, &s->pr_shipped)))
        return;
    if (s->mpsi.on)
        sm__line_add(val, sizeof val, "memory_some_s=%llu.%02llu memory_peak_pct=%.1f",
                    (unsigned long long)(v[0] / 100), (unsigned long long)(v[0] % 100),
                    s->mpsi.peak);
    if (s->cpsi.on)
        sm__line_add(val, sizeof val, "%scpu_some_s=%llu.%02llu cpu_peak_pct=%.1f",
                    val[0] ? " " : "", (unsigned long long)(v[2] / 100),
                    (unsigned long long)(v[2] % 100), s->cpsi.peak);
    sm__tag_add(out, "pressure", "%s", val);
    ship(&s->pr_shipped, v);
}

static void ctr_tags(void *state, int phase, sm_tags *out)
{
    struct ctr *s = state;
    uint64_t v, n, t;

    if (phase == SM_TAGS_START) {
        /* scopemeter.rankN.cgroup is open()'s status, rounded for people;
         * these are the exact limits a reader computes with (docs/design.md
         * §3).  Start tags: sent once, not counted against the window budget. */
        char cores[32];
        if (s->cg.mem_limit > 0)
            sm__tag_add(out, "memory_limit_bytes", "%llu", (unsigned long long)s->cg.mem_limit);
        if (s->cg.cpu_cores > 0) {
            sm__num_shortest(cores, sizeof cores, s->cg.cpu_cores, false); /* never the rounding */
            sm__tag_add(out, "cpu_limit_cores", "%s", cores);
        }
        if (s->cg.cpu_quota_us > 0 && s->cg.cpu_period_us > 0) {
            sm__tag_add(out, "cpu_quota_us", "%llu", (unsigned long long)s->cg.cpu_quota_us);
            sm__tag_add(out, "cpu_period_us", "%llu", (unsigned long long)s->cg.cpu_period_us);
        }
        return;
    }
    if (phase == SM_TAGS_WINDOW) {
        /* the peak: when it rose by max(1 MB, 0.1 % of the limit) since it
         * was last shipped, so at most ~1000 texts a run (see spaced()) */
        double step = (double)s->cg.mem_limit / 1e9;
        if (s->ws_seen && (!s->shipped_peak ||
                           s->ws_peak_mb >= s->shipped_peak_mb + (step > 1.0 ? step : 1.0)))
            tag_at_peak(s, out);
        tag_events(s, 1, out);
        tag_pressure(s, 1, out);
        return;
    }
    if (s->ws_seen)
        tag_at_peak(s, out);
    tag_events(s, 0, out);
    tag_pressure(s, 0, out);
    if (s->have_oom && kf_number_retry(s, &s->events, s->oom_key, &v) == 0)
        /* a counter below its start value means a re-created cgroup: all of it is ours */
        sm__tag_add(out, "oom_kill", "%llu",
                   (unsigned long long)(v >= s->oom_start ? v - s->oom_start : v));
    if (s->ws_seen)
        sm__tag_add(out, "mem_peak_sampled_mb", "%.1f", s->ws_peak_mb);
    if (s->peak.fd >= 0 && kf_number_retry(s, &s->peak, NULL, &v) == 0 &&
        (s->peak_reset || v > s->peak0)) /* else it is an earlier peak (peak_open) */
        sm__tag_add(out, "memory_peak_mb", "%.1f", (double)v / 1e6);
    if (s->have_thr && read_thr(s, &n, &t) == 0) {
        sm__tag_add(out, "cpu_throttled_periods", "%llu",
                   (unsigned long long)(n >= s->thr_n0 ? n - s->thr_n0 : n));
        sm__tag_add(out, "cpu_throttled_s", "%.1f",
                   (double)(t >= s->thr_t0 ? t - s->thr_t0 : t) * s->thr_s_per_unit);
    }
}

const sm_collector_ops sm__coll_container = {
    .name = "container",
    /* usage, percentage, CPU; 4 parts of the working set; 2 pressure (v2 PSI:
     * plan counts them as the upper bound, docs/plan.md) */
    .series = 9,
    .needs_limit = true,
    .status_tag = "cgroup",
    .state_size = sizeof(struct ctr),
    .open = ctr_open,
    .sample = ctr_sample,
    .tags = ctr_tags,
    .close = ctr_close,
};
