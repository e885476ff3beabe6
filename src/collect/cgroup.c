/*
 * cgroup.c — finding this process's cgroup and the limits that bind it
 * (docs/design.md §1; docs/cgroup.md has the rules and every decision).
 *
 *   1. /proc/self/cgroup gives the cgroup path per hierarchy; mountinfo gives
 *      where each hierarchy is mounted and which part of it (the mount root).
 *   2. v1 or v2 is decided per controller from mountinfo, not from statfs
 *      (a fixture under SCOPEMETER_SYSROOT has no cgroup filesystem): a v1
 *      mount listing the controller in its super options means v1 for it,
 *      even when a cgroup2 mount sits at /sys/fs/cgroup/unified (hybrid);
 *      otherwise a cgroup2 mount means v2.
 *   3. Directory = mount point + (path minus the mount root, cut on a path
 *      component boundary).  A path not under the root is not visible.
 *   4. Limits are read on every level from the process's own directory up to
 *      the mount point; a missing file means "no limit here", not "stop".
 *
 * Everything goes through the sysroot.  The only allocation is the one-time
 * read of /proc/self/cgroup and mountinfo and a work area freed on return.
 */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "parse.h"

/* cgroup-v1 memory.limit_in_bytes reports "unlimited" as PAGE_COUNTER_MAX
 * pages: 9223372036854771712 with 4 KiB pages, 2^64-1 on old kernels.
 * Anything at or above 2^62 is no limit (OpenJDK and cAdvisor use this). */
#define MEM_V1_UNLIMITED (1ull << 62)

enum { C_MEMORY, C_CPU, C_CPUACCT, C_CPUSET, C_BLKIO, C_N };
/* v1 names; on v2 every controller is the one unified hierarchy ("blkio" is "io") */
static const char *const ctl_names[C_N] = {"memory", "cpu", "cpuacct", "cpuset", "blkio"};

struct ctl {
    int version;            /* 1 or 2; 0 when not usable (why says why) */
    int err;                /* < 0: present but not usable: not visible, deleted */
    char path[SM_PATH_MAX]; /* from /proc/self/cgroup, " (deleted)" cut */
    char root[SM_PATH_MAX]; /* mount root, unescaped; never ends in '/' unless "/" */
    char rel[SM_PATH_MAX];  /* path below the root: "/" or "/a/b" */
    char mnt[SM_PATH_MAX];  /* sysroot + mount point */
    char dir[SM_PATH_MAX];  /* mnt + rel */
    char why[400];
};

/* Lowest memory limit that was not counted for being >= MemTotal (why line). */
struct mem_walk {
    uint64_t ignored;
    char ignored_path[SM_PATH_MAX];
};

/* Everything resolution needs, on the heap: the callers' stacks may be small. */
struct work {
    char *cg, *mi;
    size_t cglen, milen;
    struct ctl c[C_N];
    struct mem_walk mw;
    char buf[8192];
    char lvl[SM_PATH_MAX];
    char dir[SM_PATH_MAX];
    char tmp[SM_PATH_MAX];
    char point[SM_PATH_MAX];
    char quota_lvl[SM_PATH_MAX];   /* rel of the level with the lowest quota, "" none */
    char cpuset_dir[SM_PATH_MAX];
    char cpuset_path[SM_PATH_MAX];
};

static int line_of(const char *buf, size_t pos)
{
    int line = 1;

    for (size_t i = 0; i < pos; i++)
        line += buf[i] == '\n';
    return line;
}

static int streq(const char *s, size_t len, const char *lit)
{
    return strlen(lit) == len && memcmp(s, lit, len) == 0;
}

/* A small file in dir: its length, or -errno (-ENOENT when absent). */
static ssize_t read_in(struct work *w, const char *dir, const char *file)
{
    char path[SM_PATH_MAX];
    ssize_t n;
    int fd;

    if (sm__line(path, sizeof path, "%s/%s", dir, file) < 0)
        return -ENAMETOOLONG;
    fd = sm__open_abs(path);
    if (fd < 0)
        return fd;
    n = sm__pread_all(fd, w->buf, sizeof w->buf);
    close(fd);
    return n;
}

/* "/sys/fs/cgroup" itself ranks highest, then anything below it, then the
 * rest: duplicate mounts of one hierarchy are common in containers. */
static int mount_rank(const char *point)
{
    if (strcmp(point, "/sys/fs/cgroup") == 0)
        return 3;
    if (strncmp(point, "/sys/fs/cgroup/", 15) == 0)
        return 2;
    return 1;
}

static int has_dotdot(const char *p)
{
    for (const char *s = p; (s = strstr(s, "..")) != NULL; s += 2)
        if (s[-1] == '/' && (s[2] == '/' || s[2] == '\0'))
            return 1;
    return 0;
}

/* rel = path below root, on a component boundary; -EXDEV when not under it. */
static int strip_root(const char *path, const char *root, char *rel, size_t cap)
{
    size_t rl = strlen(root);

    if (has_dotdot(path))
        return -EXDEV; /* cgroupns: a cgroup outside the namespace shows as /../.. */
    if (strcmp(root, "/") == 0)
        return sm__line(rel, cap, "%s", path);
    if (strncmp(path, root, rl) != 0 || (path[rl] != '\0' && path[rl] != '/'))
        return -EXDEV;
    return sm__line(rel, cap, "%s", path[rl] ? path + rl : "/");
}

static int find_entry(const struct work *w, int v2, const char *name, sm_cg_entry *e)
{
    size_t pos = 0;

    while (sm__cgroup_next(w->cg, w->cglen, &pos, e) == 1) {
        if (v2 && e->hier == 0 && e->ctrl_len == 0)
            return 1;
        if (!v2 && e->hier != 0 && sm__list_has(e->ctrl, e->ctrl_len, name))
            return 1;
    }
    return 0;
}

static int is_v1_mount_of(const sm_mount *m, const char *name)
{
    return streq(m->fstype, m->fstype_len, "cgroup") && sm__list_has(m->super, m->super_len, name);
}

/* Where controller c lives for this process.  Leaves c->version 0 with a
 * reason when it is not mounted; sets c->err when it is mounted but its
 * directory cannot be seen. */
static int locate(const sm_ctx *ctx, struct work *w, struct ctl *c, const char *name)
{
    sm_mount m;
    sm_cg_entry e;
    size_t pos = 0;
    int v1 = 0, v2 = 0, best = 0, rc;

    while (sm__mountinfo_next(w->mi, w->milen, &pos, &m) == 1) {
        if (is_v1_mount_of(&m, name))
            v1 = 1;
        else if (streq(m.fstype, m.fstype_len, "cgroup2"))
            v2 = 1;
    }
    if (!v1 && !v2) {
        sm__line(c->why, sizeof c->why, "no cgroup mount for %s in /proc/self/mountinfo", name);
        return 0;
    }
    if (!find_entry(w, !v1, name, &e)) {
        sm__line(c->why, sizeof c->why, "no %s line in /proc/self/cgroup",
            v1 ? name : "v2 (0::)");
        return 0;
    }
    if (e.path_len >= sizeof c->path) {
        c->err = -ENAMETOOLONG;
        sm__line(c->why, sizeof c->why, "%s cgroup path too long", name);
        return c->err;
    }
    memcpy(c->path, e.path, e.path_len);
    c->path[e.path_len] = '\0';
    if (e.deleted) {
        c->err = -ENOENT;
        sm__line(c->why, sizeof c->why,
            "the process's cgroup %s was deleted (/proc/self/cgroup says so)", c->path);
        return c->err;
    }

    /* Among the mounts of this hierarchy, the best-ranked one that shows the
     * path wins; when none shows it, report the best-ranked one. */
    pos = 0;
    while (sm__mountinfo_next(w->mi, w->milen, &pos, &m) == 1) {
        char *root = w->tmp, rel[SM_PATH_MAX];
        int rank;

        if (v1 ? !is_v1_mount_of(&m, name) : !streq(m.fstype, m.fstype_len, "cgroup2"))
            continue;
        if (sm__unescape_octal(m.point, m.point_len, w->point, sizeof w->point) < 0 ||
            sm__unescape_octal(m.root, m.root_len, root, sizeof w->tmp) < 0 || root[0] != '/' ||
            w->point[0] != '/') {
            c->err = -EINVAL;
            c->version = 0; /* an earlier mount may have set it: not found, not half-found */
            sm__line(c->why, sizeof c->why,
                "cannot parse /proc/self/mountinfo line %d (mount point or root)",
                line_of(w->mi, pos - 1));
            return c->err;
        }
        for (size_t l = strlen(root); l > 1 && root[l - 1] == '/'; l--)
            root[l - 1] = '\0';
        rank = mount_rank(w->point);
        rc = strip_root(c->path, root, rel, sizeof rel);
        if (rc == 0)
            rank += 10; /* any mount that shows the path beats one that does not */
        if (rank <= best)
            continue;
        best = rank;
        c->version = v1 ? 1 : 2;
        sm__line(c->root, sizeof c->root, "%s", root);
        if (sm__line(c->mnt, sizeof c->mnt, "%s%s", ctx->sysroot, w->point) < 0)
            rc = -ENAMETOOLONG;
        c->err = rc;
        if (rc == 0) {
            sm__line(c->rel, sizeof c->rel, "%s", rel);
            if (sm__line(c->dir, sizeof c->dir, "%s%s", c->mnt, strcmp(rel, "/") == 0 ? "" : rel) < 0)
                c->err = -ENAMETOOLONG;
        }
        if (c->err == -EXDEV)
            sm__line(c->why, sizeof c->why,
                "cgroup %s is not under the mount root %s of %s: not visible", c->path, root,
                w->point);
        else if (c->err < 0)
            sm__line(c->why, sizeof c->why, "%s cgroup directory path too long", name);
    }
    if (c->err < 0)
        c->version = 0;
    return c->err;
}

/* The cgroup path of the level whose rel is lvl. */
static void level_path(const struct ctl *c, const char *lvl, char *out, size_t cap)
{
    if (strcmp(c->root, "/") == 0)
        sm__line(out, cap, "%s", lvl);
    else
        sm__line(out, cap, "%s%s", c->root, strcmp(lvl, "/") == 0 ? "" : lvl);
}

/* One level up: "/a/b" -> "/a" -> "/"; returns 0 at the top. */
static int level_up(char *lvl)
{
    char *slash;

    if (strcmp(lvl, "/") == 0)
        return 0;
    slash = strrchr(lvl, '/');
    if (!slash) /* not a path ("" or relative): nothing above it */
        return 0;
    if (slash == lvl)
        lvl[1] = '\0';
    else
        *slash = '\0';
    return 1;
}

static int level_dir(const struct ctl *c, const char *lvl, char *out, size_t cap)
{
    return sm__line(out, cap, "%s%s", c->mnt, strcmp(lvl, "/") == 0 ? "" : lvl);
}

static int fail_file(sm_cgroup *cg, const char *dir, const char *file, const char *what, int rc)
{
    sm__line(cg->why, sizeof cg->why, "cannot %s %s/%s: %s", what, dir, file, strerror(-rc));
    return rc;
}

/* "56.0 GiB"; below 1 GiB in MiB ("512 MiB"), where 0.1 GiB steps say little.
 * sep is " " for the why line and "" for the tag ("mem=56.0GiB"). */
static void gib(char *out, size_t cap, uint64_t bytes, const char *sep)
{
    if (bytes >= (1ull << 30))
        sm__line(out, cap, "%.1f%sGiB", (double)bytes / 1073741824.0, sep);
    else
        sm__line(out, cap, "%.0f%sMiB", (double)bytes / 1048576.0, sep);
}

/* 16 -> "16.0", 2.5 -> "2.5", 0.25 -> "0.25" (docs/design.md §3 writes cpu=16.0) */
static void cores_str(char *out, size_t cap, double v)
{
    size_t n;

    sm__line(out, cap, "%.2f", v);
    n = strlen(out);
    if (n >= 4 && out[n - 1] == '0' && out[n - 3] == '.')
        out[--n] = '\0';
}

/* ---- memory: the lowest limit from the own level up to the mount point ---- */

static int walk_memory(const sm_ctx *ctx, struct work *w, sm_cgroup *cg, struct mem_walk *mw)
{
    const struct ctl *c = &w->c[C_MEMORY];
    const char *file = c->version == 2 ? "memory.max" : "memory.limit_in_bytes";

    sm__line(w->lvl, sizeof w->lvl, "%s", c->rel);
    do {
        uint64_t v;
        int unl, rc;
        ssize_t n;

        if (level_dir(c, w->lvl, w->dir, sizeof w->dir) < 0)
            return -ENAMETOOLONG;
        n = read_in(w, w->dir, file);
        if (n == -ENOENT)
            continue; /* no limit at this level (the v2 root has no memory.max) */
        if (n < 0)
            return fail_file(cg, w->dir + strlen(ctx->sysroot), file, "read", (int)n);
        rc = sm__parse_number(w->buf, (size_t)n, &v, &unl);
        if (rc < 0)
            return fail_file(cg, w->dir + strlen(ctx->sysroot), file, "parse", rc);
        if (unl || v == 0 || (c->version == 1 && v >= MEM_V1_UNLIMITED))
            continue;
        if (ctx->mem_total && v >= ctx->mem_total) {
            if (!mw->ignored || v < mw->ignored) {
                mw->ignored = v;
                level_path(c, w->lvl, mw->ignored_path, sizeof mw->ignored_path);
            }
            continue;
        }
        /* "<=": on a tie the higher level wins; with the same limit it holds at
         * least as much usage, so it is the one that reaches the limit first
         * (Slurm puts equal limits on job_N and step_M) */
        if (!cg->mem_limit || v <= cg->mem_limit) {
            cg->mem_limit = v;
            sm__line(cg->mem_limit_dir, sizeof cg->mem_limit_dir, "%s", w->dir);
            level_path(c, w->lvl, cg->mem_limit_path, sizeof cg->mem_limit_path);
        }
    } while (level_up(w->lvl));
    return 0;
}

/* ---- CPU: the lowest quota/period on the way up ------------------------------ */
static int walk_quota(const sm_ctx *ctx, struct work *w, sm_cgroup *cg, char *quota_lvl,
                      size_t qcap)
{
    const struct ctl *c = &w->c[C_CPU];
    const char *sr_dir;

    sm__line(w->lvl, sizeof w->lvl, "%s", c->rel);
    do {
        uint64_t quota, period;
        int unl, rc;
        ssize_t n;

        if (level_dir(c, w->lvl, w->dir, sizeof w->dir) < 0)
            return -ENAMETOOLONG;
        sr_dir = w->dir + strlen(ctx->sysroot);
        if (c->version == 2) {
            n = read_in(w, w->dir, "cpu.max");
            if (n == -ENOENT)
                continue;
            if (n < 0)
                return fail_file(cg, sr_dir, "cpu.max", "read", (int)n);
            rc = sm__parse_cpu_max(w->buf, (size_t)n, &quota, &period, &unl);
            if (rc < 0)
                return fail_file(cg, sr_dir, "cpu.max", "parse", rc);
        } else {
            int unl2;
            n = read_in(w, w->dir, "cpu.cfs_quota_us");
            if (n == -ENOENT)
                continue;
            if (n < 0)
                return fail_file(cg, sr_dir, "cpu.cfs_quota_us", "read", (int)n);
            rc = sm__parse_number(w->buf, (size_t)n, &quota, &unl);
            if (rc < 0)
                return fail_file(cg, sr_dir, "cpu.cfs_quota_us", "parse", rc);
            if (unl)
                continue;
            n = read_in(w, w->dir, "cpu.cfs_period_us");
            if (n < 0)
                return fail_file(cg, sr_dir, "cpu.cfs_period_us", "read", (int)n);
            rc = sm__parse_number(w->buf, (size_t)n, &period, &unl2);
            if (rc == 0 && (unl2 || period == 0 || quota == 0))
                rc = -EINVAL;
            if (rc < 0)
                return fail_file(cg, sr_dir, "cpu.cfs_period_us", "parse", rc);
        }
        if (unl)
            continue;
        double cores = (double)quota / (double)period;
        if (!cg->cpu_quota_cores || cores <= cg->cpu_quota_cores) { /* ties: higher level */
            cg->cpu_quota_cores = cores;
            cg->cpu_quota_us = quota;
            cg->cpu_period_us = period;
            sm__line(cg->cpu_quota_dir, sizeof cg->cpu_quota_dir, "%s", w->dir);
            sm__line(quota_lvl, qcap, "%s", w->lvl);
        }
    } while (level_up(w->lvl));
    return 0;
}

/* CPUs of the cpuset: v2 cpuset.cpus.effective, v1 cpuset.effective_cpus or
 * cpuset.cpus, from the own level up (the first level that has one). */
static int walk_cpuset(const sm_ctx *ctx, struct work *w, sm_cgroup *cg, char *dir_out,
                       size_t dcap, char *path_out, size_t pcap)
{
    const struct ctl *c = &w->c[C_CPUSET];
    static const char *const v2f[] = {"cpuset.cpus.effective", NULL};
    static const char *const v1f[] = {"cpuset.effective_cpus", "cpuset.cpus", NULL};
    const char *const *files = c->version == 2 ? v2f : v1f;

    if (!c->version)
        return 0;
    sm__line(w->lvl, sizeof w->lvl, "%s", c->rel);
    do {
        if (level_dir(c, w->lvl, w->dir, sizeof w->dir) < 0)
            return -ENAMETOOLONG;
        for (int i = 0; files[i]; i++) {
            unsigned n;
            ssize_t len = read_in(w, w->dir, files[i]);
            int rc;
            if (len == -ENOENT)
                continue;
            if (len < 0)
                return fail_file(cg, w->dir + strlen(ctx->sysroot), files[i], "read", (int)len);
            rc = sm__parse_cpulist(w->buf, (size_t)len, &n);
            if (rc < 0)
                return fail_file(cg, w->dir + strlen(ctx->sysroot), files[i], "parse", rc);
            if (n == 0)
                continue; /* an empty set inherits (v1 cpuset not configured) */
            cg->cpuset_cpus = n;
            sm__line(dir_out, dcap, "%s", w->dir);
            level_path(c, w->lvl, path_out, pcap);
            return 0;
        }
    } while (level_up(w->lvl));
    return 0;
}

static unsigned host_cpus(const sm_ctx *ctx, struct work *w)
{
    char path[SM_PATH_MAX], *stat = NULL;
    unsigned n = 0;
    ssize_t len;

    len = sm__read_file(ctx, "/sys/devices/system/cpu/online", w->buf, sizeof w->buf);
    if (len >= 0 && sm__parse_cpulist(w->buf, (size_t)len, &n) == 0 && n > 0)
        return n;
    if (sm__path(ctx, "/proc/stat", path, sizeof path) < 0)
        return 0;
    len = sm__read_file_alloc(path, &stat); /* one line per CPU: can be large */
    if (len < 0 || sm__count_stat_cpus(stat, (size_t)len, &n) < 0)
        n = 0;
    free(stat);
    return n;
}

/* CPUs this process may run on (sched_getaffinity), 0 when unknown. */
static unsigned affinity_cpus(void)
{
    for (int ncpu = 1024; ncpu <= (1 << 18); ncpu *= 4) {
        cpu_set_t *set = CPU_ALLOC((size_t)ncpu);
        size_t sz = CPU_ALLOC_SIZE((size_t)ncpu);
        int rc, n = 0;

        if (!set)
            return 0;
        CPU_ZERO_S(sz, set);
        rc = sched_getaffinity(0, sz, set);
        if (rc == 0)
            n = CPU_COUNT_S(sz, set);
        CPU_FREE(set);
        if (rc == 0)
            return (unsigned)n;
        if (errno != EINVAL)
            return 0;
    }
    return 0;
}

static int read_all(const sm_ctx *ctx, const char *abs, char **out, size_t *len, sm_cgroup *cg)
{
    char path[SM_PATH_MAX];
    ssize_t n;
    int rc = sm__path(ctx, abs, path, sizeof path);

    if (rc < 0) {
        sm__line(cg->why, sizeof cg->why, "cannot read %s: %s", abs, strerror(-rc));
        return rc;
    }
    n = sm__read_file_alloc(path, out);
    if (n < 0) {
        sm__line(cg->why, sizeof cg->why, "cannot read %s: %s", abs, strerror((int)-n));
        return (int)n;
    }
    *len = (size_t)n;
    return 0;
}

/* Every line parses, or the whole file is reported (one clear line). */
static int validate(struct work *w, sm_cgroup *cg)
{
    sm_cg_entry e;
    sm_mount m;
    size_t pos = 0;
    int rc;

    while ((rc = sm__cgroup_next(w->cg, w->cglen, &pos, &e)) == 1)
        ;
    if (rc < 0) {
        sm__line(cg->why, sizeof cg->why, "cannot parse /proc/self/cgroup line %d",
            line_of(w->cg, pos));
        return rc;
    }
    pos = 0;
    while ((rc = sm__mountinfo_next(w->mi, w->milen, &pos, &m)) == 1)
        ;
    if (rc < 0) {
        sm__line(cg->why, sizeof cg->why, "cannot parse /proc/self/mountinfo line %d",
            line_of(w->mi, pos));
        return rc;
    }
    return 0;
}

/* The tag's path: elided at the front when it would not fit. */
static void tag_set(sm_cgroup *cg, const char *suffix)
{
    size_t room = sizeof cg->tag - strlen(suffix) - 8, pl = strlen(cg->path);

    if (pl <= room)
        sm__line(cg->tag, sizeof cg->tag, "v%d %s%s", cg->version, cg->path, suffix);
    else
        sm__line(cg->tag, sizeof cg->tag, "v%d \xe2\x80\xa6%s%s", cg->version,
            cg->path + pl - room, suffix);
}

static void set_none(sm_cgroup *cg, int rc)
{
    (void)rc;
    sm__line(cg->tag, sizeof cg->tag, "none: %s", cg->why);
}

/* Where CPU usage is read: the counter of exactly the processes the limit
 * binds, or none.  A usage counter divided by a limit must count the
 * processes that limit binds: the limit's own cgroup, read in the cpuacct
 * hierarchy (docs/cgroup.md §2).  Same hierarchy (v2, or v1 `cpu,cpuacct`
 * co-mounted): that very cgroup.  Separate v1 hierarchies: the level of the
 * limit's path in cpuacct, when the process's path is the same in both (every
 * manager, systemd, runc, Slurm, mirrors its tree in each hierarchy); a
 * process placed at different paths (cpu:/X, cpuacct:/) has no cpuacct
 * cgroup that holds X's processes: an ancestor counts others too (the root
 * counts the host: 4 x node_cpu on 8 CPUs at 0.5 core), a descendant only
 * some.  Then no usage, and cpu_usage_why says so. */
static void usage_level(struct work *w, sm_cgroup *cg, const char *cap_by)
{
    const struct ctl *ac = &w->c[C_CPUACCT];
    const struct ctl *lc = cap_by && strcmp(cap_by, "cpuset") == 0 ? &w->c[C_CPUSET]
                                                                    : &w->c[C_CPU];
    const char *lname = lc == &w->c[C_CPUSET] ? "cpuset" : "cpu";
    char rel[SM_PATH_MAX];

    if (!ac->version) {
        sm__line(cg->cpu_usage_why, sizeof cg->cpu_usage_why, "%s",
                 ac->why[0] ? ac->why : "no cpuacct");
        return;
    }
    if (strcmp(ac->mnt, lc->mnt) != 0 && strcmp(ac->path, lc->path) != 0) {
        sm__line(cg->cpu_usage_why, sizeof cg->cpu_usage_why,
                 "the cpu limit is at %s in the %s hierarchy, where the process is at %s, but "
                 "its cpuacct cgroup is %s: no cpuacct cgroup counts just the processes the "
                 "limit binds", cg->cpu_limit_path, lname, lc->path, ac->path);
        return;
    }
    if (strip_root(cg->cpu_limit_path, ac->root, rel, sizeof rel) < 0 ||
        level_dir(ac, rel, cg->cpu_usage_dir, sizeof cg->cpu_usage_dir) < 0) {
        cg->cpu_usage_dir[0] = '\0';
        sm__line(cg->cpu_usage_why, sizeof cg->cpu_usage_why,
                 "the cpu limit's cgroup %s is not under the cpuacct mount root %s: not visible",
                 cg->cpu_limit_path, ac->root);
    }
}

/* Resolve, step 2: the CPU limit in cores.  A cgroup cpuset narrower than
 * the host is a CPU limit by itself (Slurm confines cores with cpusets, not
 * quotas); affinity alone (taskset on a laptop) only caps a limit that
 * exists, it does not make one.  Returns what capped the quota ("cpuset",
 * "affinity") or NULL; *aff gets the affinity's CPU count. */
static const char *cpu_limit(const sm_ctx *ctx, struct work *w, sm_cgroup *cg, unsigned *aff)
{
    struct ctl *cc = &w->c[C_CPU];
    const char *cap_by = NULL;
    unsigned allowed;

    *aff = 0;
    cg->host_cpus = host_cpus(ctx, w);
    if (!ctx->sysroot[0])
        *aff = affinity_cpus(); /* a fixture's affinity is not this process's */
    allowed = cg->cpuset_cpus;
    if (*aff && (!allowed || *aff < allowed))
        allowed = *aff;
    if (cc->version && cg->host_cpus &&
        (cg->cpu_quota_cores > 0 || (cg->cpuset_cpus && cg->cpuset_cpus < cg->host_cpus))) {
        cg->cpu_cores = cg->cpu_quota_cores;
        if (allowed && allowed < cg->host_cpus &&
            (cg->cpu_cores == 0 || (double)allowed < cg->cpu_cores)) {
            cg->cpu_cores = allowed;
            cap_by = allowed == cg->cpuset_cpus ? "cpuset" : "affinity";
        }
    } else if (cc->version && cg->cpu_quota_cores > 0) {
        cg->cpu_cores = cg->cpu_quota_cores; /* host CPU count unknown: quota alone */
    }
    if (cg->cpu_cores <= 0)
        return cap_by;
    if (!cap_by) {
        sm__line(cg->cpu_limit_dir, sizeof cg->cpu_limit_dir, "%s", cg->cpu_quota_dir);
        level_path(cc, w->quota_lvl, cg->cpu_limit_path, sizeof cg->cpu_limit_path);
    } else if (strcmp(cap_by, "cpuset") == 0) {
        sm__line(cg->cpu_limit_dir, sizeof cg->cpu_limit_dir, "%s", w->cpuset_dir);
        sm__line(cg->cpu_limit_path, sizeof cg->cpu_limit_path, "%s", w->cpuset_path);
    } else {
        sm__line(cg->cpu_limit_dir, sizeof cg->cpu_limit_dir, "%s", cc->dir);
        sm__line(cg->cpu_limit_path, sizeof cg->cpu_limit_path, "%s", cc->path);
    }
    usage_level(w, cg, cap_by);
    return cap_by;
}

/* Resolve, step 3: the one "why" line and the scopemeter.rankN.cgroup tag
 * (docs/design.md §3): "v2 /path mem=56.0GiB cpu=16", "v2 /path cpu=2.5"
 * for a CPU-only limit, "none: no limit". */
static void describe(const sm_ctx *ctx, const struct work *w, sm_cgroup *cg,
                     const char *cap_by, unsigned aff)
{
    const struct ctl *mc = &w->c[C_MEMORY], *cc = &w->c[C_CPU];
    const struct ctl *hc = mc->version ? mc : cc;
    char s1[64], s2[64], suffix[96] = "";

    sm__line(cg->why, sizeof cg->why, "v%d cgroup %s", cg->version, cg->path);
    if (strcmp(hc->root, "/") != 0)
        sm__line_add(cg->why, sizeof cg->why, " (mount root %s)", hc->root);
    if (!mc->version) {
        sm__line_add(cg->why, sizeof cg->why, ", no memory controller (%s)", mc->why);
    } else if (cg->mem_limit) {
        gib(s1, sizeof s1, cg->mem_limit, " ");
        sm__line_add(cg->why, sizeof cg->why, ", memory limit %s at %s", s1, cg->mem_limit_path);
    } else {
        sm__line_add(cg->why, sizeof cg->why, ", no memory limit");
        if (w->mw.ignored) {
            gib(s1, sizeof s1, w->mw.ignored, " ");
            gib(s2, sizeof s2, ctx->mem_total, " ");
            sm__line_add(cg->why, sizeof cg->why, " (%s at %s is not below MemTotal %s)", s1,
                        w->mw.ignored_path, s2);
        }
    }
    if (!cc->version) {
        sm__line_add(cg->why, sizeof cg->why, ", no cpu controller (%s)", cc->why);
    } else if (cg->cpu_cores > 0) {
        cores_str(s1, sizeof s1, cg->cpu_cores);
        if (!cap_by)
            sm__line_add(cg->why, sizeof cg->why, ", cpu limit %s cores (quota) at %s", s1,
                        cg->cpu_limit_path);
        else if (strcmp(cap_by, "cpuset") == 0)
            sm__line_add(cg->why, sizeof cg->why,
                        ", cpu limit %s cores (cpuset: %u of %u CPUs) at %s", s1,
                        cg->cpuset_cpus, cg->host_cpus, cg->cpu_limit_path);
        else
            sm__line_add(cg->why, sizeof cg->why, ", cpu limit %s cores (affinity: %u of %u CPUs)",
                        s1, aff, cg->host_cpus);
        if (!cg->cpu_usage_dir[0])
            sm__line_add(cg->why, sizeof cg->why, ", no cpu usage (%s)",
                        cg->cpu_usage_why);
    } else {
        sm__line_add(cg->why, sizeof cg->why, ", no cpu limit");
    }

    if (cg->mem_limit) {
        gib(s1, sizeof s1, cg->mem_limit, "");
        sm__line_add(suffix, sizeof suffix, " mem=%s", s1);
    }
    if (cg->cpu_cores > 0) {
        cores_str(s1, sizeof s1, cg->cpu_cores);
        sm__line_add(suffix, sizeof suffix, " cpu=%s", s1);
    }
    if (suffix[0])
        tag_set(cg, suffix);
    else
        sm__line(cg->tag, sizeof cg->tag, "none: no limit");
}

/* Resolve, step 4: where the container's block I/O is read (coll_io.c,
 * docs/series.md): at the level of the memory limit (else of the CPU
 * limit), so that the disk series count the processes the memory series
 * count (io.stat and the *_recursive blkio files include the descendants).
 * v1 blkio is a hierarchy of its own: the level is taken there when blkio
 * shows this process at the same cgroup path as the limiting controller;
 * otherwise the process's own blkio cgroup is read, and io_why says so. */
static void io_level(struct work *w, sm_cgroup *cg)
{
    const struct ctl *bc = &w->c[C_BLKIO];
    const struct ctl *lc = cg->mem_limit ? &w->c[C_MEMORY] : &w->c[C_CPU];
    const char *lim = cg->mem_limit ? cg->mem_limit_path : cg->cpu_limit_path;
    const char *name = bc->version == 1 ? "blkio" : "io";
    char rel[SM_PATH_MAX];

    if (!bc->version) {
        sm__line(cg->io_why, sizeof cg->io_why, "%s", bc->why[0] ? bc->why : "no blkio/io cgroup");
        return;
    }
    cg->io_version = bc->version;
    if ((cg->mem_limit || cg->cpu_cores > 0) && lim[0] && strcmp(bc->path, lc->path) == 0 &&
        strip_root(lim, bc->root, rel, sizeof rel) == 0 &&
        level_dir(bc, rel, cg->io_dir, sizeof cg->io_dir) == 0) {
        sm__line(cg->io_path, sizeof cg->io_path, "%s", lim);
        sm__line(cg->io_why, sizeof cg->io_why, "%s cgroup %s, the %s-limiting level", name, lim,
                cg->mem_limit ? "memory" : "cpu");
        return;
    }
    sm__line(cg->io_dir, sizeof cg->io_dir, "%s", bc->dir);
    sm__line(cg->io_path, sizeof cg->io_path, "%s", bc->path);
    sm__line(cg->io_why, sizeof cg->io_why, "%s cgroup %s, the process's own", name, bc->path);
    if (cg->mem_limit || cg->cpu_cores > 0)
        sm__line_add(cg->io_why, sizeof cg->io_why, " (the %s limit is at %s in the %s hierarchy, "
                    "where the process is at %s)", cg->mem_limit ? "memory" : "cpu", lim,
                    cg->mem_limit ? "memory" : "cpu", lc->path);
}

/* Resolve, step 1: the files, and the process's own directory in every
 * controller.  0 or -errno with cg->why. */
static int locate_all(const sm_ctx *ctx, struct work *w, sm_cgroup *cg)
{
    int rc = read_all(ctx, "/proc/self/cgroup", &w->cg, &w->cglen, cg);

    if (rc == 0)
        rc = read_all(ctx, "/proc/self/mountinfo", &w->mi, &w->milen, cg);
    if (rc == 0)
        rc = validate(w, cg);
    if (rc < 0)
        return rc;
    for (int i = 0; i < C_N; i++) {
        rc = locate(ctx, w, &w->c[i], ctl_names[i]);
        if (rc < 0 && (i == C_MEMORY || i == C_CPU)) {
            /* the process's own cgroup cannot be seen: say so, do not guess */
            sm__line(cg->why, sizeof cg->why, "%s", w->c[i].why);
            return rc;
        }
    }
    return 0;
}

int sm__cgroup_resolve(const sm_ctx *ctx, sm_cgroup *cg)
{
    struct work *w;
    struct ctl *mc, *cc, *ac;
    unsigned aff = 0;
    const char *cap_by;
    int rc;

    memset(cg, 0, sizeof *cg);
    w = sm__zalloc(sizeof *w); /* 100 KB of path buffers, sparsely used */
    if (!w) {
        sm__line(cg->why, sizeof cg->why, "out of memory");
        rc = -ENOMEM;
        goto out;
    }
    if ((rc = locate_all(ctx, w, cg)) < 0)
        goto out;
    mc = &w->c[C_MEMORY];
    cc = &w->c[C_CPU];
    ac = &w->c[C_CPUACCT];
    cg->mem_version = mc->version;
    cg->cpu_version = cc->version;
    cg->version = mc->version ? mc->version : cc->version;
    if (!cg->version) {
        sm__line(cg->why, sizeof cg->why, "no memory or cpu cgroup controller (%s)", mc->why);
        rc = -ENOENT;
        goto out;
    }
    sm__line(cg->path, sizeof cg->path, "%s", mc->version ? mc->path : cc->path);
    sm__line(cg->mem_dir, sizeof cg->mem_dir, "%s", mc->dir);
    sm__line(cg->cpu_dir, sizeof cg->cpu_dir, "%s", cc->dir);
    sm__line(cg->cpuacct_dir, sizeof cg->cpuacct_dir, "%s", ac->version ? ac->dir : "");

    if (mc->version && (rc = walk_memory(ctx, w, cg, &w->mw)) < 0)
        goto out;
    if (cc->version && (rc = walk_quota(ctx, w, cg, w->quota_lvl, sizeof w->quota_lvl)) < 0)
        goto out;
    if ((rc = walk_cpuset(ctx, w, cg, w->cpuset_dir, sizeof w->cpuset_dir, w->cpuset_path,
                          sizeof w->cpuset_path)) < 0)
        goto out;
    cap_by = cpu_limit(ctx, w, cg, &aff);
    describe(ctx, w, cg, cap_by, aff);
    io_level(w, cg);
out:
    if (rc < 0)
        set_none(cg, rc);
    if (w) {
        free(w->cg);
        free(w->mi);
        sm__zfree(w);
    }
    return rc;
}
