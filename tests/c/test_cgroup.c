/* test_cgroup.c — sm__cgroup_resolve and the container collector against the
 * fixture machines (tests/fixtures/cg-*, through the sysroot) and against
 * trees built here in a temporary directory: malformed and truncated files,
 * a file that fails and comes back, CPU deltas, end tags. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "check_tree.h"

#define GiB (1ull << 30)
#define MEMTOTAL (503ull * GiB) /* the fixtures' MemTotal */

/* dir with the sysroot removed: what the machine would call it */
static const char *rel(const sm_ctx *ctx, const char *dir)
{
    size_t n = strlen(ctx->sysroot);
    return strncmp(dir, ctx->sysroot, n) == 0 ? dir + n : dir;
}

/* ---- what the collector says on stderr (sm__log: one write(2) per line) --- */
static int saved_err = -1;
static FILE *err_file;

static void err_capture(void)
{
    fflush(stderr);
    err_file = tmpfile();
    saved_err = dup(2);
    if (!err_file || saved_err < 0 || dup2(fileno(err_file), 2) < 0) {
        perror("capture stderr");
        exit(2);
    }
}

/* stops capturing; out receives what was written */
static void err_release(char *out, size_t cap)
{
    size_t n;

    dup2(saved_err, 2);
    close(saved_err);
    rewind(err_file);
    n = fread(out, 1, cap - 1, err_file);
    out[n] = '\0';
    fclose(err_file);
}

/* a v2 machine with a cgroup namespace: own cgroup = mount point */
/* memory.stat of the v2 tree: with memory.current 3000000000 the working set
 * is 2000 MB = anon 600 + shmem 300 + active_file 50 + kernel 1050 */
#define MEMSTAT_V2                                                                          \
    "anon 600000000\nfile 1350000000\nshmem 300000000\nactive_file 50000000\n"              \
    "inactive_file 1000000000\n"
#define PSI_ZERO                                                                            \
    "some avg10=0.00 avg60=0.00 avg300=0.00 total=%llu\n"                                  \
    "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"

static void v2_tree(void)
{
    tree_new("sm-test-cgroup");
    put("proc/self/cgroup", "0::/\n");
    put("proc/self/mountinfo",
        "1 0 0:1 / / rw - overlay overlay rw\n"
        "2 1 0:30 / /sys/fs/cgroup ro shared:3 - cgroup2 cgroup rw,nsdelegate\n");
    put("proc/stat", "cpu  1 2 3 4\ncpu0 1 2 3 4\ncpu1 1 2 3 4\ncpu2 1 2 3 4\ncpu3 1 2 3 4\n");
    put("sys/fs/cgroup/memory.max", "%llu\n", 4 * GiB);
    put("sys/fs/cgroup/memory.current", "3000000000\n");
    put("sys/fs/cgroup/memory.stat", MEMSTAT_V2);
    put("sys/fs/cgroup/memory.events", "low 0\noom 1\noom_kill 2\n");
    put("sys/fs/cgroup/memory.peak", "3500000000\n");
    put("sys/fs/cgroup/memory.pressure", PSI_ZERO, 1000000ull);
    put("sys/fs/cgroup/cpu.pressure", PSI_ZERO, 0ull);
    put("sys/fs/cgroup/cpu.max", "200000 100000\n");
    put("sys/fs/cgroup/cpu.stat",
        "usage_usec 1000000\nnr_periods 10\nnr_throttled 1\nthrottled_usec 500000\n");
}

static int resolve_tmp(sm_cgroup *cg)
{
    sm_ctx ctx;
    ctx_for(&ctx, tmp);
    return sm__cgroup_resolve(&ctx, cg);
}

/* ---- fixtures ------------------------------------------------------------- */
static void test_fixtures(void)
{
    sm_ctx ctx;
    sm_cgroup cg;

    ctx_fixture(&ctx, "cg-k8s-v2-cgroupns");
    CHECK_EQ_INT(sm__cgroup_resolve(&ctx, &cg), 0);
    CHECK_EQ_INT(cg.version, 2);
    CHECK_EQ_STR(rel(&ctx, cg.mem_dir), "/sys/fs/cgroup");
    CHECK_EQ_STR(rel(&ctx, cg.mem_limit_dir), "/sys/fs/cgroup");
    CHECK_EQ_INT(cg.mem_limit, 56 * GiB);
    CHECK_NEAR(cg.cpu_cores, 16.0, 1e-12);
    CHECK_EQ_INT(cg.cpu_quota_us, 1600000); /* cpu.max as the kernel gives it */
    CHECK_EQ_INT(cg.cpu_period_us, 100000);
    CHECK_EQ_INT(cg.host_cpus, 64);
    CHECK_EQ_INT(cg.cpuset_cpus, 64);
    CHECK_EQ_STR(cg.tag, "v2 / mem=56.0GiB cpu=16.0");
    CHECK(contains(cg.why, "memory limit 56.0 GiB at /"));

    ctx_fixture(&ctx, "cg-docker-v1-hostns");
    CHECK_EQ_INT(sm__cgroup_resolve(&ctx, &cg), 0);
    CHECK_EQ_INT(cg.version, 1);
    CHECK_EQ_STR(rel(&ctx, cg.mem_dir), "/sys/fs/cgroup/memory");
    CHECK_EQ_STR(rel(&ctx, cg.mem_limit_dir), "/sys/fs/cgroup/memory");
    CHECK_EQ_STR(rel(&ctx, cg.cpu_dir), "/sys/fs/cgroup/cpu,cpuacct");
    CHECK_EQ_STR(rel(&ctx, cg.cpu_usage_dir), "/sys/fs/cgroup/cpu,cpuacct");
    CHECK_EQ_INT(cg.mem_limit, 2 * GiB);
    CHECK_NEAR(cg.cpu_cores, 1.5, 1e-12);
    CHECK_EQ_INT(cg.cpu_quota_us, 150000); /* cpu.cfs_quota_us, cpu.cfs_period_us */
    CHECK_EQ_INT(cg.cpu_period_us, 100000);
    CHECK_EQ_STR(cg.tag, "v1 /docker/3f1e5a9b2c7d mem=2.0GiB cpu=1.5");
    CHECK(contains(cg.why, "(mount root /docker/3f1e5a9b2c7d)"));
    CHECK_EQ_STR(cg.mem_limit_path, "/docker/3f1e5a9b2c7d");

    ctx_fixture(&ctx, "cg-hybrid");
    CHECK_EQ_INT(sm__cgroup_resolve(&ctx, &cg), 0);
    CHECK_EQ_INT(cg.version, 1);
    CHECK_EQ_INT(cg.mem_version, 1);
    CHECK_EQ_INT(cg.cpu_version, 1);
    CHECK_EQ_STR(rel(&ctx, cg.mem_dir),
                 "/sys/fs/cgroup/memory/user.slice/user-1000.slice/session-3.scope");
    CHECK_EQ_STR(rel(&ctx, cg.mem_limit_dir), "/sys/fs/cgroup/memory/user.slice/user-1000.slice");
    CHECK_EQ_INT(cg.mem_limit, 8 * GiB);
    CHECK_NEAR(cg.cpu_cores, 0.0, 0);
    CHECK_EQ_STR(cg.tag, "v1 /user.slice/user-1000.slice/session-3.scope mem=8.0GiB");

    ctx_fixture(&ctx, "cg-slurm-v2");
    CHECK_EQ_INT(sm__cgroup_resolve(&ctx, &cg), 0);
    CHECK_EQ_STR(rel(&ctx, cg.mem_limit_dir),
                 "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_12");
    CHECK_EQ_STR(cg.mem_limit_path, "/system.slice/slurmstepd.scope/job_12");
    CHECK_EQ_INT(cg.mem_limit, 16 * GiB);
    CHECK_NEAR(cg.cpu_cores, 4.0, 1e-12);
    CHECK_NEAR(cg.cpu_quota_cores, 0.0, 0);
    CHECK_EQ_INT(cg.cpu_quota_us, 0); /* a cpuset limit: no quota to tag */
    CHECK_EQ_INT(cg.cpu_period_us, 0);
    CHECK_EQ_INT(cg.host_cpus, 16);
    CHECK_EQ_STR(rel(&ctx, cg.cpu_usage_dir),
                 "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_12/step_0/user/task_0");
    CHECK(contains(cg.why, "cpuset: 4 of 16 CPUs"));

    ctx_fixture(&ctx, "cg-bare-host");
    CHECK_EQ_INT(sm__cgroup_resolve(&ctx, &cg), 0);
    CHECK_EQ_INT(cg.mem_limit, 0);
    CHECK_NEAR(cg.cpu_cores, 0.0, 0);
    CHECK_EQ_STR(cg.tag, "none: no limit");
    CHECK_EQ_STR(cg.why,
                 "v2 cgroup /user.slice/user-1000.slice/session-2.scope, no memory limit, "
                 "no cpu limit");

    ctx_fixture(&ctx, "cg-cpu-only");
    CHECK_EQ_INT(sm__cgroup_resolve(&ctx, &cg), 0);
    CHECK_EQ_INT(cg.mem_limit, 0);
    CHECK_NEAR(cg.cpu_cores, 2.5, 1e-12);
    CHECK_EQ_STR(cg.tag, "v2 / cpu=2.5");

    ctx_fixture(&ctx, "cg-mem-above-total");
    CHECK_EQ_INT(sm__cgroup_resolve(&ctx, &cg), 0);
    CHECK_EQ_INT(cg.mem_limit, 0);
    CHECK_EQ_STR(cg.tag, "none: no limit");
    CHECK(contains(cg.why, "no memory limit (600.0 GiB at / is not below MemTotal 503.0 GiB)"));
    /* the same limit is a limit on a bigger node */
    ctx.mem_total = 1024 * GiB;
    CHECK_EQ_INT(sm__cgroup_resolve(&ctx, &cg), 0);
    CHECK_EQ_INT(cg.mem_limit, 600 * GiB);
    /* exactly MemTotal is not a limit */
    ctx.mem_total = 600 * GiB;
    CHECK_EQ_INT(sm__cgroup_resolve(&ctx, &cg), 0);
    CHECK_EQ_INT(cg.mem_limit, 0);

    ctx_fixture(&ctx, "cg-systemd-slice");
    CHECK_EQ_INT(sm__cgroup_resolve(&ctx, &cg), 0);
    CHECK_EQ_STR(rel(&ctx, cg.mem_limit_dir), "/sys/fs/cgroup/training.slice");
    CHECK_EQ_STR(rel(&ctx, cg.cpu_limit_dir), "/sys/fs/cgroup/training.slice");
    CHECK_EQ_STR(rel(&ctx, cg.cpu_usage_dir), "/sys/fs/cgroup/training.slice");
    CHECK_EQ_INT(cg.mem_limit, 32 * GiB);
    CHECK_NEAR(cg.cpu_cores, 4.0, 1e-12);
    CHECK_EQ_INT(cg.host_cpus, 32);

    ctx_fixture(&ctx, "cg-escaped-mount");
    CHECK_EQ_INT(sm__cgroup_resolve(&ctx, &cg), 0);
    CHECK_EQ_STR(rel(&ctx, cg.mem_dir), "/sys/fs/cgroup/my cgroup/task 1");
    CHECK_EQ_STR(rel(&ctx, cg.mem_limit_dir), "/sys/fs/cgroup/my cgroup/task 1");
    CHECK_EQ_INT(cg.mem_limit, GiB);
    CHECK_EQ_STR(cg.tag, "v2 /batch job/task 1 mem=1.0GiB");

    ctx_fixture(&ctx, "cg-deleted");
    CHECK(sm__cgroup_resolve(&ctx, &cg) < 0);
    CHECK_EQ_STR(cg.tag, "none: the process's cgroup /kubepods/pod1/ctr was deleted "
                         "(/proc/self/cgroup says so)");

    ctx_fixture(&ctx, "cg-outside-root");
    CHECK_EQ_INT(sm__cgroup_resolve(&ctx, &cg), -EXDEV);
    CHECK_EQ_STR(cg.tag, "none: cgroup /docker/xyz is not under the mount root /docker/abc of "
                         "/sys/fs/cgroup/memory: not visible");
}

/* ---- the collector on fixtures -------------------------------------------- */
static void *open_coll(const sm_ctx *ctx, struct run *r)
{
    return coll_open(&sm__coll_container, ctx, r);
}

static int sample(void *state, struct run *r)
{
    return coll_sample(&sm__coll_container, state, r);
}

static const char *tag(const sm_tags *t, const char *key)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->v[i].key, key) == 0)
            return t->v[i].value;
    return NULL;
}

static void close_coll(void *state)
{
    coll_close(&sm__coll_container, state);
}

static void test_collector_fixtures(void)
{
    sm_ctx ctx;
    struct run r;
    void *s;
    const sm_point *p;

    ctx_fixture(&ctx, "cg-docker-v1-hostns");
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_STR(r.res.status, "v1 /docker/3f1e5a9b2c7d mem=2.0GiB cpu=1.5");
    /* the fixture's memory.stat has no total_shmem (an older kernel): the
     * parts go with one line rather than the kernel part holding shmem */
    CHECK_EQ_STR(r.res.msg, "memory.stat has no total_shmem: "
                            "container_memory_{anon,shmem,file_active,kernel}_megabytes absent; "
                            "cgroup v1 has no PSI: container_*_pressure_percentage absent");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_INT(r.pts.n, 3);
    p = point(&r, "container_memory_usage_megabytes");
    CHECK(p && fabs(p->value - 1200.0) < 1e-9); /* 1500000000 - 300000000 */
    CHECK(p && contains(p->source, "/sys/fs/cgroup/memory/memory.usage_in_bytes"));
    p = point(&r, "container_memory_usage_percentage");
    CHECK(p && fabs(p->value - 100.0 * 1.2e9 / (2.0 * GiB)) < 1e-9);
    p = point(&r, "container_cpu_utilization_percentage");
    CHECK(p && p->value == 0.0); /* the fixture's counter does not move */
    sm__coll_container.tags(s, SM_TAGS_END, &r.tags);
    CHECK_EQ_STR(tag(&r.tags, "oom_kill"), "0");
    CHECK_EQ_STR(tag(&r.tags, "mem_peak_sampled_mb"), "1200.0");
    /* the kernel's peak (1900 MB) has not moved since open: an earlier one,
     * not the run's (issue 46 item 10; never reset under a sysroot) */
    CHECK(tag(&r.tags, "memory_peak_mb") == NULL);
    CHECK_EQ_STR(tag(&r.tags, "cpu_throttled_periods"), "0");
    CHECK_EQ_STR(tag(&r.tags, "cpu_throttled_s"), "0.0");
    close_coll(s);

    ctx_fixture(&ctx, "cg-cpu-only");
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_STR(r.res.msg, "cgroup: CPU limit only, no memory limit: container_memory_* "
                            "absent; no PSI (cpu.pressure: No such file or directory): "
                            "container_cpu_pressure_percentage absent");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_INT(r.pts.n, 1);
    CHECK(point(&r, "container_cpu_utilization_percentage") != NULL);
    sm__coll_container.tags(s, SM_TAGS_END, &r.tags);
    CHECK(tag(&r.tags, "oom_kill") == NULL); /* no memory limit: no limiting cgroup */
    CHECK(tag(&r.tags, "mem_peak_sampled_mb") == NULL);
    close_coll(s);

    ctx_fixture(&ctx, "cg-hybrid");
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_STR(r.res.msg, "cgroup: memory limit only, no CPU limit: "
                            "container_cpu_utilization_percentage absent; memory.stat has no "
                            "total_shmem: container_memory_{anon,shmem,file_active,kernel}_"
                            "megabytes absent; cgroup v1 has no PSI: "
                            "container_memory_pressure_percentage absent");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_INT(r.pts.n, 2);
    p = point(&r, "container_memory_usage_megabytes");
    CHECK(p && fabs(p->value - 2000.0) < 1e-9);
    close_coll(s);

    ctx_fixture(&ctx, "cg-bare-host");
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(r.rc, SM_ABSENT);
    CHECK(s == NULL);
    CHECK_EQ_STR(r.res.status, "none: no limit");
    CHECK(contains(r.res.msg, "no cgroup limit (v2 cgroup /user.slice/"));
    CHECK(contains(r.res.msg, "): container_* absent"));

    ctx_fixture(&ctx, "cg-outside-root");
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(r.rc, -EXDEV);
    CHECK(contains(r.res.msg, "cgroup: cgroup /docker/xyz is not under the mount root"));
    CHECK(contains(r.res.msg, "; container_* dropped"));
}

/* ---- malformed and truncated files ---------------------------------------- */
static void expect_fail(const char *what, const char *needle)
{
    sm_cgroup cg;
    int rc = resolve_tmp(&cg);
    if (rc >= 0)
        fprintf(stderr, "  case: %s\n", what);
    CHECK(rc < 0);
    CHECK(contains(cg.why, needle));
    CHECK(strncmp(cg.tag, "none: ", 6) == 0);
}

static void test_malformed(void)
{
    sm_cgroup cg;
    sm_ctx ctx;
    struct run r;
    void *s;

    v2_tree();
    CHECK_EQ_INT(resolve_tmp(&cg), 0);
    CHECK_EQ_INT(cg.mem_limit, 4 * GiB);
    CHECK_NEAR(cg.cpu_cores, 2.0, 1e-12);
    CHECK_EQ_INT(cg.host_cpus, 4);

    /* mountinfo: no separator; cut in the middle of the cgroup2 line; a bad escape */
    put("proc/self/mountinfo", "1 0 0:1 / / rw - overlay overlay rw\n"
                               "2 1 0:30 / /sys/fs/cgroup ro cgroup2 cgroup rw\n");
    expect_fail("mountinfo without -", "cannot parse /proc/self/mountinfo line 2");
    put("proc/self/mountinfo", "1 0 0:1 / / rw - overlay overlay rw\n2 1 0:30 / /sys/fs/cg");
    expect_fail("mountinfo truncated", "cannot parse /proc/self/mountinfo line 2");
    put("proc/self/mountinfo", "2 1 0:30 / /sys/fs/cgroup\\04 ro - cgroup2 cgroup rw\n");
    expect_fail("mountinfo bad escape",
                "cannot parse /proc/self/mountinfo line 1 (mount point or root)");
    put("proc/self/mountinfo", "1 0 0:1 / / rw - overlay overlay rw\n");
    expect_fail("no cgroup mount", "no cgroup mount for memory in /proc/self/mountinfo");
    put("proc/self/mountinfo", "");
    expect_fail("empty mountinfo", "no memory or cpu cgroup controller");
    rm("proc/self/mountinfo");
    expect_fail("no mountinfo", "cannot read /proc/self/mountinfo: No such file or directory");
    put("proc/self/mountinfo", "2 1 0:30 / /sys/fs/cgroup ro - cgroup2 cgroup rw\n");
    CHECK_EQ_INT(resolve_tmp(&cg), 0);

    /* /proc/self/cgroup */
    put("proc/self/cgroup", "0::/\nbroken\n");
    expect_fail("cgroup garbage", "cannot parse /proc/self/cgroup line 2");
    put("proc/self/cgroup", "0::");
    expect_fail("cgroup truncated", "cannot parse /proc/self/cgroup line 1");
    put("proc/self/cgroup", "4:memory:/x\n");
    expect_fail("no v2 line", "no v2 (0::) line in /proc/self/cgroup");
    put("proc/self/cgroup", "0::/../sibling\n");
    expect_fail("cgroupns outside", "cgroup /../sibling is not under the mount root /");
    rm("proc/self/cgroup");
    expect_fail("no /proc/self/cgroup", "cannot read /proc/self/cgroup");
    put("proc/self/cgroup", "0::/\n");

    /* limit files */
    put("sys/fs/cgroup/memory.max", "12abc\n");
    expect_fail("memory.max", "cannot parse /sys/fs/cgroup/memory.max: Invalid argument");
    put("sys/fs/cgroup/memory.max", "");
    expect_fail("memory.max empty", "cannot parse /sys/fs/cgroup/memory.max");
    put("sys/fs/cgroup/memory.max", "%llu\n", 4 * GiB);
    put("sys/fs/cgroup/cpu.max", "200000\n");
    expect_fail("cpu.max", "cannot parse /sys/fs/cgroup/cpu.max: Invalid argument");
    put("sys/fs/cgroup/cpu.max", "200000 100000\n");
    put("sys/fs/cgroup/cpuset.cpus.effective", "0-\n");
    expect_fail("cpuset", "cannot parse /sys/fs/cgroup/cpuset.cpus.effective");
    put("sys/fs/cgroup/cpuset.cpus.effective", "0-1\n");
    CHECK_EQ_INT(resolve_tmp(&cg), 0);
    CHECK_NEAR(cg.cpu_cores, 2.0, 1e-12); /* quota 2 = cpuset 2: quota named */
    put("sys/fs/cgroup/cpuset.cpus.effective", "3\n");
    CHECK_EQ_INT(resolve_tmp(&cg), 0);
    CHECK_NEAR(cg.cpu_cores, 1.0, 1e-12); /* cpuset below the quota caps it */
    CHECK(contains(cg.why, "cpu limit 1.0 cores (cpuset: 1 of 4 CPUs) at /"));
    rm("sys/fs/cgroup/cpuset.cpus.effective");
    /* host CPU count from /sys/devices/system/cpu/online before /proc/stat */
    put("sys/devices/system/cpu/online", "0-1\n");
    put("sys/fs/cgroup/cpuset.cpus.effective", "0-1\n");
    CHECK_EQ_INT(resolve_tmp(&cg), 0);
    CHECK_EQ_INT(cg.host_cpus, 2);
    rm("sys/devices/system/cpu/online");
    rm("sys/fs/cgroup/cpuset.cpus.effective");

    /* collector files malformed at open: exactly the series computed from the
     * bad file go, with one line naming it (docs/design.md §6); the other
     * part stays.  memory.stat and memory.current feed both memory series,
     * cpu.stat the CPU series. */
    ctx_for(&ctx, tmp);
    put("sys/fs/cgroup/memory.stat", "active_file 5\n");
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_STR(r.res.msg, "cannot parse /sys/fs/cgroup/memory.stat: no inactive_file; "
                            "container_memory_* dropped");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_INT(r.pts.n, 2); /* CPU and CPU pressure */
    CHECK(point(&r, "container_cpu_utilization_percentage") != NULL);
    CHECK(point(&r, "container_memory_pressure_percentage") == NULL); /* part dropped at open */
    sm__coll_container.tags(s, SM_TAGS_END, &r.tags);
    CHECK(tag(&r.tags, "oom_kill") == NULL && tag(&r.tags, "memory_peak_mb") == NULL);
    CHECK_EQ_STR(tag(&r.tags, "cpu_throttled_periods"), "0");
    close_coll(s);
    put("sys/fs/cgroup/memory.stat", "inactive_file 1x\n");
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK(contains(r.res.msg, "cannot parse /sys/fs/cgroup/memory.stat: Invalid argument; "
                              "container_memory_* dropped"));
    close_coll(s);
    put("sys/fs/cgroup/memory.stat", MEMSTAT_V2);
    put("sys/fs/cgroup/cpu.stat", "usage_usec\n");
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_STR(r.res.msg, "cannot parse /sys/fs/cgroup/cpu.stat: no usage_usec; "
                            "container_cpu_utilization_percentage dropped");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_INT(r.pts.n, 7); /* 2 memory, 4 parts, memory pressure */
    CHECK(point(&r, "container_memory_usage_megabytes") != NULL);
    CHECK(point(&r, "container_memory_usage_percentage") != NULL);
    CHECK(point(&r, "container_cpu_pressure_percentage") == NULL);
    close_coll(s);
    /* both parts bad: nothing is left, the collector is dropped naming both */
    put("sys/fs/cgroup/memory.current", "x\n");
    s = open_coll(&ctx, &r);
    CHECK(r.rc < 0 && s == NULL);
    CHECK_EQ_STR(r.res.msg, "cannot parse /sys/fs/cgroup/memory.current: Invalid argument; "
                            "cannot parse /sys/fs/cgroup/cpu.stat: no usage_usec; "
                            "container_* dropped");
    put("sys/fs/cgroup/cpu.stat", "usage_usec 1000000\nnr_throttled 1\nthrottled_usec 500000\n");
    rm("sys/fs/cgroup/memory.current");
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_STR(r.res.msg, "cannot open /sys/fs/cgroup/memory.current: No such file or "
                            "directory; container_memory_* dropped");
    close_coll(s);
    /* a memory limit alone: its bad file leaves nothing, the collector goes */
    put("sys/fs/cgroup/cpu.max", "max 100000\n");
    s = open_coll(&ctx, &r);
    CHECK(r.rc < 0 && s == NULL);
    CHECK_EQ_STR(r.res.msg, "cannot open /sys/fs/cgroup/memory.current: No such file or "
                            "directory; container_* dropped");
    put("sys/fs/cgroup/cpu.max", "200000 100000\n");
    put("sys/fs/cgroup/memory.current", "3000000000\n");
    /* memory.events malformed: the collector attaches, the tag is absent */
    put("sys/fs/cgroup/memory.events", "oom_kill lots\n");
    rm("sys/fs/cgroup/memory.peak");
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_INT(sample(s, &r), 0);
    sm__coll_container.tags(s, SM_TAGS_END, &r.tags);
    CHECK(tag(&r.tags, "oom_kill") == NULL);
    CHECK(tag(&r.tags, "memory_peak_mb") == NULL);
    CHECK_EQ_STR(tag(&r.tags, "mem_peak_sampled_mb"), "2000.0");
    close_coll(s);
    rm_tree();
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ---- a bad file degrades only its own series (docs/design.md §6) -------- */
static void test_bad_file_fixture(void)
{
    sm_ctx ctx;
    struct run r;
    void *s;

    /* cg-k8s-v2-cgroupns with a malformed memory.current: the CPU series
     * stays, the two memory series go, one line names the file */
    ctx_fixture(&ctx, "cg-k8s-v2-bad-memory-current");
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_STR(r.res.status, "v2 / mem=56.0GiB cpu=16.0");
    CHECK_EQ_STR(r.res.msg, "cannot parse /sys/fs/cgroup/memory.current: Invalid argument; "
                            "container_memory_* dropped; no PSI (cpu.pressure: No such file or "
                            "directory): container_cpu_pressure_percentage absent");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_INT(r.pts.n, 1);
    CHECK(point(&r, "container_cpu_utilization_percentage") != NULL);
    /* no memory part: no memory end tags; the CPU quota's throttling stays */
    sm__coll_container.tags(s, SM_TAGS_END, &r.tags);
    CHECK(tag(&r.tags, "oom_kill") == NULL);
    CHECK(tag(&r.tags, "mem_peak_sampled_mb") == NULL);
    CHECK(tag(&r.tags, "memory_peak_mb") == NULL);
    CHECK(tag(&r.tags, "cpu_throttled_periods") != NULL);
    close_coll(s);
}

/* ---- samples: values, failure and recovery, CPU deltas, end tags ---------- */
static void test_samples(void)
{
    sm_ctx ctx;
    struct run r;
    void *s;
    const sm_point *p;
    double t0, t1, t2, t3;
    struct timespec nap = {0, 200 * 1000 * 1000};

    v2_tree();
    ctx_for(&ctx, tmp);
    t0 = now_s();
    s = open_coll(&ctx, &r);
    t1 = now_s();
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_STR(r.res.msg, "");
    nanosleep(&nap, NULL);
    /* 0.2 s of CPU (usage_usec +200000) on a 2-core limit */
    put("sys/fs/cgroup/cpu.stat",
        "usage_usec 1200000\nnr_periods 20\nnr_throttled 4\nthrottled_usec 2500000\n");
    put("sys/fs/cgroup/memory.current", "3500000000\n");
    t2 = now_s();
    CHECK_EQ_INT(sample(s, &r), 0);
    t3 = now_s();
    p = point(&r, "container_cpu_utilization_percentage");
    CHECK(p != NULL);
    if (p) { /* 100 * 0.2 / (dt * 2) for the dt between the two reads */
        CHECK(p->value <= 100.0 * 0.2 / ((t2 - t1) * 2) + 1e-9);
        CHECK(p->value >= 100.0 * 0.2 / ((t3 - t0) * 2) - 1e-9);
    }
    p = point(&r, "container_memory_usage_megabytes");
    CHECK(p && fabs(p->value - 2500.0) < 1e-9);
    p = point(&r, "container_memory_usage_percentage");
    CHECK(p && fabs(p->value - 100.0 * 2.5e9 / (4.0 * GiB)) < 1e-9);

    /* usage below inactive_file: the working set floors at 0 */
    put("sys/fs/cgroup/memory.current", "999\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    p = point(&r, "container_memory_usage_megabytes");
    CHECK(p && p->value == 0.0);

    /* a file that turns bad: only the series computed from it go (the CPU
     * series never reads memory.current), with one line naming the file for
     * the whole streak and one when it recovers (docs/design.md §6) */
    err_capture();
    put("sys/fs/cgroup/memory.current", "garbage\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_INT(r.pts.n, 3); /* CPU and both pressures: other files */
    CHECK(point(&r, "container_cpu_utilization_percentage") != NULL);
    rm("sys/fs/cgroup/memory.current");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_INT(r.pts.n, 3);
    put("sys/fs/cgroup/memory.current", "2000000000\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_INT(r.pts.n, 9);
    p = point(&r, "container_memory_usage_megabytes");
    CHECK(p && fabs(p->value - 1000.0) < 1e-9);
    /* and the other way round: a bad cpu.stat leaves the memory series */
    put("sys/fs/cgroup/cpu.stat", "nr_periods 3\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_INT(r.pts.n, 8);
    CHECK(point(&r, "container_cpu_utilization_percentage") == NULL);
    CHECK(point(&r, "container_memory_usage_percentage") != NULL);
    put("sys/fs/cgroup/cpu.stat",
        "usage_usec 1200000\nnr_periods 20\nnr_throttled 4\nthrottled_usec 2500000\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_INT(r.pts.n, 9);
    {
        char said[4096];
        err_release(said, sizeof said);
        CHECK_EQ_STR(said,
                     "scopemeter: warning: container: cannot parse /sys/fs/cgroup/memory.current: "
                     "Invalid argument; container_memory_* skipped until it recovers\n"
                     "scopemeter: container: container_memory_* recovered\n"
                     "scopemeter: warning: container: cannot parse /sys/fs/cgroup/cpu.stat: no "
                     "usage_usec; container_cpu_utilization_percentage skipped until it "
                     "recovers\n"
                     "scopemeter: container: container_cpu_utilization_percentage recovered\n");
    }

    /* CPU counter going backwards (re-created cgroup): no point, re-based */
    put("sys/fs/cgroup/cpu.stat", "usage_usec 5\nnr_throttled 4\nthrottled_usec 2500000\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK(point(&r, "container_cpu_utilization_percentage") == NULL);
    CHECK_EQ_INT(sample(s, &r), 0);
    p = point(&r, "container_cpu_utilization_percentage");
    CHECK(p && p->value == 0.0);

    /* end tags: deltas over the run, peaks */
    put("sys/fs/cgroup/memory.events", "low 0\noom 4\noom_kill 5\n");
    sm__coll_container.tags(s, SM_TAGS_END, &r.tags);
    CHECK_EQ_STR(tag(&r.tags, "oom_kill"), "3");            /* 5 - 2 at open */
    CHECK_EQ_STR(tag(&r.tags, "mem_peak_sampled_mb"), "2500.0");
    /* the kernel's peak as at open (3500 MB): an earlier one, no tag; once
     * the run passes it, the tag is the run's */
    CHECK(tag(&r.tags, "memory_peak_mb") == NULL);
    put("sys/fs/cgroup/memory.peak", "3600000000\n");
    memset(&r.tags, 0, sizeof r.tags);
    sm__coll_container.tags(s, SM_TAGS_END, &r.tags);
    CHECK_EQ_STR(tag(&r.tags, "memory_peak_mb"), "3600.0");
    CHECK_EQ_STR(tag(&r.tags, "cpu_throttled_periods"), "3"); /* 4 - 1 */
    CHECK_EQ_STR(tag(&r.tags, "cpu_throttled_s"), "2.0");     /* (2500000 - 500000) us */
    /* start tags: the cgroup tag is open()'s status; tags() adds the exact
     * limits (docs/design.md §3) */
    memset(&r.tags, 0, sizeof r.tags);
    sm__coll_container.tags(s, SM_TAGS_START, &r.tags);
    CHECK_EQ_INT(r.tags.n, 4);
    CHECK_EQ_STR(tag(&r.tags, "memory_limit_bytes"), "4294967296");
    CHECK_EQ_STR(tag(&r.tags, "cpu_limit_cores"), "2");
    CHECK_EQ_STR(tag(&r.tags, "cpu_quota_us"), "200000");
    CHECK_EQ_STR(tag(&r.tags, "cpu_period_us"), "100000");
    close_coll(s);
    rm_tree();
}

/* ---- v1 layouts built here: separate cpu and cpuacct mounts, sentinel ---- */
static void test_v1_tree(void)
{
    sm_cgroup cg;
    sm_ctx ctx;
    struct run r;
    void *s;

    tree_new("sm-test-cgroup");
    put("proc/self/cgroup", "9:cpuacct:/a/b\n8:cpu:/a/b\n7:memory:/a/b\n3:cpuset:/\n0::/\n");
    put("proc/self/mountinfo",
        "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
        "40 31 0:29 / /host/cpu rw - cgroup cgroup rw,cpu\n"
        "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
        "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
        "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n");
    put("proc/stat", "cpu  1 2 3 4\ncpu0 1 2 3 4\ncpu1 1 2 3 4\n");
    put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    put("sys/fs/cgroup/memory/a/memory.limit_in_bytes", "18446744073709551615\n");
    put("sys/fs/cgroup/memory/a/b/memory.limit_in_bytes", "4611686018427387904\n"); /* 2^62 */
    put("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
    put("sys/fs/cgroup/cpu/a/cpu.cfs_quota_us", "50000\n");
    put("sys/fs/cgroup/cpu/a/cpu.cfs_period_us", "100000\n");
    put("sys/fs/cgroup/cpu/a/cpu.stat", "nr_periods 1\nnr_throttled 0\nthrottled_time 0\n");
    put("sys/fs/cgroup/cpu/a/b/cpu.cfs_quota_us", "-1\n");
    put("sys/fs/cgroup/cpu/a/b/cpu.cfs_period_us", "100000\n");
    put("sys/fs/cgroup/cpuacct/a/cpuacct.usage", "1000\n");
    put("sys/fs/cgroup/cpuacct/a/b/cpuacct.usage", "10\n");
    put("sys/fs/cgroup/cpuset/cpuset.cpus", "0-1\n");
    CHECK_EQ_INT(resolve_tmp(&cg), 0);
    ctx_for(&ctx, tmp);
    CHECK_EQ_INT(cg.version, 1);
    CHECK_EQ_INT(cg.mem_limit, 0); /* every level at or above 2^62 */
    CHECK_NEAR(cg.cpu_cores, 0.5, 1e-12);
    CHECK_EQ_STR(rel(&ctx, cg.cpu_dir), "/sys/fs/cgroup/cpu/a/b"); /* /sys/fs/cgroup preferred */
    CHECK_EQ_STR(rel(&ctx, cg.cpu_limit_dir), "/sys/fs/cgroup/cpu/a");
    CHECK_EQ_STR(rel(&ctx, cg.cpu_usage_dir), "/sys/fs/cgroup/cpuacct/a"); /* same level */
    CHECK_EQ_STR(cg.tag, "v1 /a/b cpu=0.5");
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK(point(&r, "container_cpu_utilization_percentage") != NULL);
    CHECK(contains(r.pts.v[0].source, "/sys/fs/cgroup/cpuacct/a/cpuacct.usage"));
    sm__coll_container.tags(s, SM_TAGS_END, &r.tags);
    CHECK_EQ_STR(tag(&r.tags, "cpu_throttled_periods"), "0");
    memset(&r.tags, 0, sizeof r.tags);
    sm__coll_container.tags(s, SM_TAGS_START, &r.tags);
    CHECK_EQ_INT(r.tags.n, 3); /* no memory limit: no memory_limit_bytes */
    CHECK_EQ_STR(tag(&r.tags, "cpu_limit_cores"), "0.5");
    CHECK_EQ_STR(tag(&r.tags, "cpu_quota_us"), "50000");
    CHECK_EQ_STR(tag(&r.tags, "cpu_period_us"), "100000");
    close_coll(s);

    /* a quota the display tag rounds (1/6 core: cpu=0.17): the start tag is
     * exact, as strtod reads it back */
    put("sys/fs/cgroup/cpu/a/cpu.cfs_period_us", "300000\n");
    CHECK_EQ_INT(resolve_tmp(&cg), 0);
    CHECK_EQ_STR(cg.tag, "v1 /a/b cpu=0.17");
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    memset(&r.tags, 0, sizeof r.tags);
    sm__coll_container.tags(s, SM_TAGS_START, &r.tags);
    CHECK_EQ_STR(tag(&r.tags, "cpu_limit_cores"), "0.16666666666666666");
    CHECK(tag(&r.tags, "cpu_limit_cores") &&
          strtod(tag(&r.tags, "cpu_limit_cores"), NULL) == 50000.0 / 300000.0);
    CHECK_EQ_STR(tag(&r.tags, "cpu_period_us"), "300000");
    close_coll(s);
    put("sys/fs/cgroup/cpu/a/cpu.cfs_period_us", "100000\n");

    /* issue 46 item 3: cpu and cpuacct placed apart.  The quota binds
     * cpu:/a's processes; the process's cpuacct cgroup is the root, which
     * counts the whole host (the old code divided it by 0.5 core).  No
     * cpuacct cgroup counts just the quota's processes: no usage, one line. */
    put("proc/self/cgroup", "9:cpuacct:/\n8:cpu:/a/b\n7:memory:/a/b\n3:cpuset:/\n0::/\n");
    put("sys/fs/cgroup/cpuacct/cpuacct.usage", "99999999\n");
    CHECK_EQ_INT(resolve_tmp(&cg), 0);
    CHECK_NEAR(cg.cpu_cores, 0.5, 1e-12);
    CHECK_EQ_STR(cg.cpu_usage_dir, "");
    CHECK_EQ_STR(cg.cpu_usage_why, "the cpu limit is at /a in the cpu hierarchy, where the "
                 "process is at /a/b, but its cpuacct cgroup is /: no cpuacct cgroup counts "
                 "just the processes the limit binds");
    CHECK(contains(cg.why, "cpu limit 0.5 cores (quota) at /a, no cpu usage (the cpu limit"));
    s = open_coll(&ctx, &r); /* no memory limit, no usage: nothing to record */
    CHECK_EQ_INT(r.rc, SM_ABSENT);
    CHECK(contains(r.res.msg, "cgroup: CPU limit but no CPU usage (the cpu limit is at /a"));
    /* a descendant (cpuacct:/a/b/c) counts only some of them: the same */
    put("proc/self/cgroup", "9:cpuacct:/a/b/c\n8:cpu:/a/b\n7:memory:/a/b\n3:cpuset:/\n0::/\n");
    CHECK_EQ_INT(resolve_tmp(&cg), 0);
    CHECK_EQ_STR(cg.cpu_usage_dir, "");
    /* the same path in both (a mirrored tree): the quota's level, as before */
    put("proc/self/cgroup", "9:cpuacct:/a/b\n8:cpu:/a/b\n7:memory:/a/b\n3:cpuset:/\n0::/\n");
    CHECK_EQ_INT(resolve_tmp(&cg), 0);
    CHECK_EQ_STR(rel(&ctx, cg.cpu_usage_dir), "/sys/fs/cgroup/cpuacct/a");

    /* a v1 memory limit below the sentinel, and the cpuacct controller missing */
    put("sys/fs/cgroup/memory/a/memory.limit_in_bytes", "1073741824\n");
    put("proc/self/cgroup", "8:cpu:/a/b\n7:memory:/a/b\n0::/\n");
    CHECK_EQ_INT(resolve_tmp(&cg), 0);
    CHECK_EQ_INT(cg.mem_limit, GiB);
    CHECK_EQ_STR(cg.cpu_usage_dir, "");
    CHECK(contains(cg.why, "no cpu usage (no cpuacct line in /proc/self/cgroup)"));
    rm_tree();
}


/* ---- docs/design.md §9: parts, pressure, events, window tags ------------- */
static void test_composition(void)
{
    sm_ctx ctx;
    struct run r;
    void *s;
    const sm_point *p;
    sm_tags w;
    double t1, t2, t3, t0;
    struct timespec nap = {0, 100 * 1000 * 1000};

    /* the fixtures: every part by hand (their READMEs) */
    ctx_fixture(&ctx, "cg-k8s-v2-psi");
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_STR(r.res.msg, "");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_INT(r.pts.n, 9);
    CHECK_NEAR(point(&r, "container_memory_usage_megabytes")->value, 6500.0, 1e-9);
    CHECK_NEAR(point(&r, "container_memory_anon_megabytes")->value, 2300.0, 1e-9);
    CHECK_NEAR(point(&r, "container_memory_shmem_megabytes")->value, 3100.0, 1e-9);
    CHECK_NEAR(point(&r, "container_memory_file_active_megabytes")->value, 400.0, 1e-9);
    CHECK_NEAR(point(&r, "container_memory_kernel_megabytes")->value, 700.0, 1e-9);
    CHECK_NEAR(point(&r, "container_memory_pressure_percentage")->value, 0.0, 0);
    CHECK_NEAR(point(&r, "container_cpu_pressure_percentage")->value, 0.0, 0);
    CHECK(contains(point(&r, "container_memory_shmem_megabytes")->source,
                   "/sys/fs/cgroup/memory.stat:shmem"));
    CHECK(contains(point(&r, "container_cpu_pressure_percentage")->source,
                   "/sys/fs/cgroup/cpu.pressure:some total"));
    memset(&r.tags, 0, sizeof r.tags);
    sm__coll_container.tags(s, SM_TAGS_END, &r.tags);
    CHECK_EQ_STR(tag(&r.tags, "memory_at_peak"),
                 "working_set_mb=6500.0 anon_mb=2300.0 shmem_mb=3100.0 file_active_mb=400.0 "
                 "kernel_mb=700.0 limit_mb=8589.9");
    CHECK_EQ_STR(tag(&r.tags, "memory_events"), "high=0 max=0 oom=0 oom_kill=0");
    CHECK_EQ_STR(tag(&r.tags, "pressure"),
                 "memory_some_s=0.00 memory_peak_pct=0.0 cpu_some_s=0.00 cpu_peak_pct=0.0");
    close_coll(s);

    ctx_fixture(&ctx, "cg-docker-v1-shmem");
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_STR(r.res.msg, "cgroup v1 has no PSI: container_*_pressure_percentage absent");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_INT(r.pts.n, 7);
    CHECK_NEAR(point(&r, "container_memory_anon_megabytes")->value, 400.0, 1e-9);
    CHECK_NEAR(point(&r, "container_memory_shmem_megabytes")->value, 500.0, 1e-9);
    CHECK_NEAR(point(&r, "container_memory_file_active_megabytes")->value, 200.0, 1e-9);
    CHECK_NEAR(point(&r, "container_memory_kernel_megabytes")->value, 100.0, 1e-9);
    CHECK(contains(point(&r, "container_memory_anon_megabytes")->source, "memory.stat:total_rss"));
    sm__coll_container.tags(s, SM_TAGS_END, &r.tags);
    CHECK_EQ_STR(tag(&r.tags, "memory_events"), "max=0 oom_kill=0"); /* v1: failcnt, oom_control */
    CHECK(tag(&r.tags, "pressure") == NULL);
    close_coll(s);

    /* a tree that moves: rates, deltas, and what a window ships */
    v2_tree();
    ctx_for(&ctx, tmp);
    t0 = now_s();
    s = open_coll(&ctx, &r);
    t1 = now_s();
    CHECK_EQ_INT(r.rc, 0);
    nanosleep(&nap, NULL);
    /* 50 ms of memory stall and 20 ms of CPU stall since open */
    put("sys/fs/cgroup/memory.pressure", PSI_ZERO, 1050000ull);
    put("sys/fs/cgroup/cpu.pressure", PSI_ZERO, 20000ull);
    t2 = now_s();
    CHECK_EQ_INT(sample(s, &r), 0);
    t3 = now_s();
    p = point(&r, "container_memory_pressure_percentage");
    CHECK(p && p->value <= 100.0 * 0.05 / (t2 - t1) + 1e-9 &&
          p->value >= 100.0 * 0.05 / (t3 - t0) - 1e-9);
    p = point(&r, "container_cpu_pressure_percentage");
    CHECK(p && p->value > 0 && p->value <= 100.0 * 0.02 / (t2 - t1) + 1e-9);
    /* the parts add up to the working set (2000 MB) */
    CHECK_NEAR(point(&r, "container_memory_anon_megabytes")->value +
                   point(&r, "container_memory_shmem_megabytes")->value +
                   point(&r, "container_memory_file_active_megabytes")->value +
                   point(&r, "container_memory_kernel_megabytes")->value,
               point(&r, "container_memory_usage_megabytes")->value, 1e-9);
    CHECK_NEAR(point(&r, "container_memory_kernel_megabytes")->value, 1050.0, 1e-9);

    /* the first window ships every tag; the next, with nothing changed, none */
    memset(&w, 0, sizeof w);
    sm__coll_container.tags(s, SM_TAGS_WINDOW, &w);
    CHECK_EQ_INT(w.n, 3);
    CHECK_EQ_STR(tag(&w, "memory_at_peak"),
                 "working_set_mb=2000.0 anon_mb=600.0 shmem_mb=300.0 file_active_mb=50.0 "
                 "kernel_mb=1050.0 limit_mb=4295.0");
    CHECK_EQ_STR(tag(&w, "memory_events"), "oom=0 oom_kill=0");
    CHECK(tag(&w, "pressure") && /* the peak is a rate: timing's */
          strncmp(tag(&w, "pressure"), "memory_some_s=0.05 memory_peak_pct=", 35) == 0);
    CHECK(tag(&w, "pressure") && contains(tag(&w, "pressure"), " cpu_some_s=0.02 cpu_peak_pct="));
    memset(&w, 0, sizeof w);
    CHECK_EQ_INT(sample(s, &r), 0); /* no stall since: the peaks stay */
    sm__coll_container.tags(s, SM_TAGS_WINDOW, &w);
    CHECK_EQ_INT(w.n, 0);
    /* the peak rising by less than max(1 MB, 0.1 % of the limit = 4.3 MB) ships
     * nothing; by more, the composition at the new peak */
    put("sys/fs/cgroup/memory.current", "3003000000\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    sm__coll_container.tags(s, SM_TAGS_WINDOW, &w);
    CHECK_EQ_INT(w.n, 0);
    put("sys/fs/cgroup/memory.stat", "anon 610000000\nshmem 300000000\nactive_file 50000000\n"
                                     "inactive_file 1000000000\n");
    put("sys/fs/cgroup/memory.current", "3010000000\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    sm__coll_container.tags(s, SM_TAGS_WINDOW, &w);
    CHECK_EQ_INT(w.n, 1);
    CHECK_EQ_STR(tag(&w, "memory_at_peak"),
                 "working_set_mb=2010.0 anon_mb=610.0 shmem_mb=300.0 file_active_mb=50.0 "
                 "kernel_mb=1050.0 limit_mb=4295.0");
    /* a lower working set later leaves the peak tag alone */
    put("sys/fs/cgroup/memory.current", "2000000000\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    memset(&w, 0, sizeof w);
    sm__coll_container.tags(s, SM_TAGS_WINDOW, &w);
    CHECK_EQ_INT(w.n, 0);
    /* an OOM kill ships at once, as a delta since open (oom 1, oom_kill 2 then) */
    put("sys/fs/cgroup/memory.events", "low 0\noom 2\noom_kill 3\n");
    sm__coll_container.tags(s, SM_TAGS_WINDOW, &w);
    CHECK_EQ_INT(w.n, 1);
    CHECK_EQ_STR(tag(&w, "memory_events"), "oom=1 oom_kill=1");
    memset(&w, 0, sizeof w);
    sm__coll_container.tags(s, SM_TAGS_WINDOW, &w);
    CHECK_EQ_INT(w.n, 0);
    /* the end: every tag, final values */
    memset(&r.tags, 0, sizeof r.tags);
    sm__coll_container.tags(s, SM_TAGS_END, &r.tags);
    CHECK_EQ_STR(tag(&r.tags, "memory_events"), "oom=1 oom_kill=1");
    CHECK(contains(tag(&r.tags, "memory_at_peak"), "working_set_mb=2010.0 "));
    CHECK(tag(&r.tags, "pressure") && contains(tag(&r.tags, "pressure"), "memory_some_s=0.05 "));
    close_coll(s);

    /* a PSI file that fails mid-run: only its series is skipped, one line for
     * the streak and one when it is back (docs/design.md §6) */
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(sample(s, &r), 0);
    err_capture();
    put("sys/fs/cgroup/cpu.pressure", "some avg10=0.00\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK(point(&r, "container_cpu_pressure_percentage") == NULL);
    CHECK(point(&r, "container_memory_pressure_percentage") != NULL);
    CHECK(point(&r, "container_cpu_utilization_percentage") != NULL);
    rm("sys/fs/cgroup/cpu.pressure"); /* the same streak: no second line */
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK(point(&r, "container_cpu_pressure_percentage") == NULL);
    put("sys/fs/cgroup/cpu.pressure", PSI_ZERO, 30000ull);
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK(point(&r, "container_cpu_pressure_percentage") != NULL);
    {
        char said[2048];
        err_release(said, sizeof said);
        CHECK_EQ_STR(said, "scopemeter: warning: container: cannot parse /sys/fs/cgroup/cpu.pressure: "
                           "no \"some ... total=\" line; container_cpu_pressure_percentage "
                           "skipped until it recovers\n"
                           "scopemeter: container: container_cpu_pressure_percentage recovered\n");
    }
    close_coll(s);

    /* a PSI file that opens but cannot be read (psi=0 answers EOPNOTSUPP
     * there; a directory answers EISDIR): absent with the reason */
    rm("sys/fs/cgroup/cpu.pressure");
    {
        char d[1024];
        snprintf(d, sizeof d, "%s/sys/fs/cgroup/cpu.pressure", tmp);
        mkdir(d, 0755);
        s = open_coll(&ctx, &r);
        CHECK_EQ_STR(r.res.msg, "no PSI (cpu.pressure: Is a directory): "
                                "container_cpu_pressure_percentage absent");
        close_coll(s);
        rmdir(d);
        put("sys/fs/cgroup/cpu.pressure", PSI_ZERO, 0ull);
    }

    /* memory.events before oom_kill (v2 kernels before 4.13): no oom_kill tag,
     * memory_events with the counters there are */
    put("sys/fs/cgroup/memory.events", "low 0\nhigh 5\nmax 1\noom 0\n");
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(sample(s, &r), 0);
    put("sys/fs/cgroup/memory.events", "low 0\nhigh 9\nmax 1\noom 0\n");
    sm__coll_container.tags(s, SM_TAGS_END, &r.tags);
    CHECK(tag(&r.tags, "oom_kill") == NULL);
    CHECK_EQ_STR(tag(&r.tags, "memory_events"), "high=4 max=0 oom=0");
    close_coll(s);
    put("sys/fs/cgroup/memory.events", "low 0\noom 1\noom_kill 2\n");

    /* parts larger than the working set (v1 usage is approximate): kernel 0 */
    put("sys/fs/cgroup/memory.stat", "anon 1500000000\nshmem 400000000\nactive_file 200000000\n"
                                     "inactive_file 1000000000\n");
    put("sys/fs/cgroup/memory.current", "3000000000\n");
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_NEAR(point(&r, "container_memory_kernel_megabytes")->value, 0.0, 0);
    close_coll(s);

    /* PSI missing on v2 (no file; psi=0 makes the read fail instead): those
     * two series are absent with one line, never zeros; the rest stays */
    rm("sys/fs/cgroup/memory.pressure");
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_STR(r.res.msg, "no PSI (memory.pressure: No such file or directory): "
                            "container_memory_pressure_percentage absent");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_INT(r.pts.n, 8);
    CHECK(point(&r, "container_memory_pressure_percentage") == NULL);
    sm__coll_container.tags(s, SM_TAGS_END, &r.tags);
    CHECK(tag(&r.tags, "pressure") && contains(tag(&r.tags, "pressure"), "cpu_some_s=") &&
          !strstr(tag(&r.tags, "pressure"), "memory_"));
    close_coll(s);
    rm("sys/fs/cgroup/cpu.pressure");
    put("sys/fs/cgroup/memory.pressure", "some avg10=0.00\n"); /* no total: malformed */
    s = open_coll(&ctx, &r);
    CHECK_EQ_STR(r.res.msg, "no PSI (memory.pressure: no \"some ... total=\" line, cpu.pressure: "
                            "No such file or directory): container_*_pressure_percentage absent");
    close_coll(s);
    rm("sys/fs/cgroup/memory.pressure");
    s = open_coll(&ctx, &r);
    CHECK_EQ_STR(r.res.msg, "no PSI (memory.pressure, cpu.pressure: No such file or directory): "
                            "container_*_pressure_percentage absent");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_INT(r.pts.n, 7);
    close_coll(s);
    rm_tree();
}

int main(void)
{
    const char *f = getenv("SM_FIXTURES");

    snprintf(fixtures, sizeof fixtures, "%s", f ? f : "tests/fixtures");
    test_fixtures();
    test_collector_fixtures();
    test_malformed();
    test_bad_file_fixture();
    test_samples();
    test_v1_tree();
    test_composition();
    return CHECK_DONE();
}
