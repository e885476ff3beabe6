/*
 * test_proc.c — the process tree collector (src/collect/coll_proc.c, docs/design.md
 * §9) on a fake /proc laid out under a temporary SCOPEMETER_SYSROOT: a tree
 * of 3 processes (children from two threads' children files), a comm with
 * ") (" in it, the ppid scan without children files, the Rss fallback
 * without smaps_rollup, the CPU formula and its clamp, a process that exits
 * between samples, the peak tag shipped with windows, a read of a growing
 * process, a read overtaken by a fork or an exit, the naming of a point with a rank of its own, and the recorder
 * lock (reclock.c) with the real kernel.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"

static char root[256];

static void put(const char *rel, const char *text)
{
    char path[1024], dir[1024];

    snprintf(path, sizeof path, "%s%s", root, rel);
    /* mkdir -p of the parent */
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + strlen(root) + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(dir, 0755);
            *p = '/';
        }
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void rm(const char *rel)
{
    char path[1024];
    snprintf(path, sizeof path, "%s%s", root, rel);
    unlink(path);
}

/* resident pages (stat field 24) of every process stat_file writes: memory
 * moves with them, as on a real node (coll_proc.c re-reads Pss when they move) */
static int rss_pages = 400; /* 1600 kB: above every Pss lay_out_tree writes, as on a node */

/* "pid (comm) S ppid ..." with utime/stime/cutime/cstime and starttime */
static int minflt = 100; /* field 10 of every stat_file */

static void stat_file(int pid, const char *comm, int ppid, int ut, int st, int cut, int cst)
{
    char rel[64], text[512];

    snprintf(rel, sizeof rel, "/proc/%d/stat", pid);
    snprintf(text, sizeof text,
             "%d (%s) S %d %d %d 0 -1 4194560 %d 0 0 0 %d %d %d %d 20 0 3 0 %d 100000 %d "
             "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n",
             pid, comm, ppid, pid, pid, minflt, ut, st, cut, cst, 5000 + pid, rss_pages);
    put(rel, text);
}

static void rollup(int pid, int pss_kb, int rss_kb)
{
    char rel[64], text[512];

    snprintf(rel, sizeof rel, "/proc/%d/smaps_rollup", pid);
    snprintf(text, sizeof text,
             "55d0c0a00000-7ffd4a1ff000 ---p 00000000 00:00 0                          [rollup]\n"
             "Rss:              %d kB\nPss:              %d kB\nPss_Anon:          7 kB\n"
             "SwapPss:           9 kB\n", rss_kb, pss_kb);
    put(rel, text);
}

static void status(int pid, int rss_kb)
{
    char rel[64], text[256];

    snprintf(rel, sizeof rel, "/proc/%d/status", pid);
    snprintf(text, sizeof text, "Name:\tx\nState:\tS (sleeping)\nVmRSS:\t  %d kB\nThreads:\t1\n",
             rss_kb);
    put(rel, text);
}

struct run {
    int rc;
    sm_opened res;
    sm_points pts;
    char msg[300];
};

static const sm_point *point(const struct run *r, int rank, const char *key)
{
    for (size_t i = 0; i < r->pts.n; i++)
        if (r->pts.v[i].rank == rank && strcmp(r->pts.v[i].key, key) == 0)
            return &r->pts.v[i];
    return NULL;
}

static double value(const struct run *r, const char *key)
{
    const sm_point *p = point(r, SM_RANK_OWN, key);
    return p ? p->value : -1;
}

static void *open_coll(const sm_ctx *ctx, struct run *r)
{
    void *state = sm__zalloc(sm__coll_proc.state_size);

    memset(r, 0, sizeof *r);
    r->rc = sm__coll_proc.open(state, ctx, &r->res);
    if (r->rc != 0) {
        sm__zfree(state);
        return NULL;
    }
    return state;
}

static int sample(void *s, struct run *r)
{
    r->pts.n = 0;
    r->msg[0] = '\0';
    return sm__coll_proc.sample(s, &r->pts, r->msg, sizeof r->msg);
}

static void close_coll(void *s)
{
    if (s) {
        sm__coll_proc.close(s);
        sm__zfree(s);
    }
}

static void ctx_here(sm_ctx *ctx)
{
    memset(ctx, 0, sizeof *ctx);
    snprintf(ctx->sysroot, sizeof ctx->sysroot, "%s", root);
    ctx->id.world_size = ctx->id.local_world_size = 1;
}

/* The tree 100 -> {101 (forked by thread 105), 102}: 3 processes. */
static void lay_out_tree(int children_files, int rollups)
{
    char link[1024];

    snprintf(link, sizeof link, "%s/proc/self", root);
    unlink(link);
    put("/proc/100/cmdline", "python3\n");
    CHECK_EQ_INT(symlink("100", link), 0);
    stat_file(100, "python3", 1, 500, 200, 30, 20);
    stat_file(101, "evil) (x", 100, 40, 10, 0, 0); /* comm with ") (" */
    stat_file(102, "pt_data_worker", 100, 5, 5, 0, 0);
    stat_file(7, "unrelated", 1, 999, 999, 0, 0);
    if (children_files) {
        put("/proc/100/task/100/children", "102 ");
        put("/proc/100/task/105/children", "101 "); /* another thread's child */
        put("/proc/101/task/101/children", "");
        put("/proc/102/task/102/children", "");
        put("/proc/7/task/7/children", "");
    }
    if (rollups) {
        rollup(100, 1000, 1500);
        rollup(101, 300, 900);
        rollup(102, 200, 800);
        rollup(7, 5000, 5000);
    }
    status(100, 1500);
    status(101, 900);
    status(102, 800);
    status(7, 5000);
}

static void test_tree(void)
{
    sm_ctx ctx;
    struct run r;
    void *s;
    long tck = sysconf(_SC_CLK_TCK);
    double t0, t1;

    lay_out_tree(1, 1);
    ctx_here(&ctx);
    t0 = sm__now_mono();
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_STR(r.res.msg, ""); /* children files and smaps_rollup: nothing to say */
    /* baseline, then a sample after the children used 100 more ticks */
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_INT(r.pts.n, 3);
    CHECK_NEAR(value(&r, "process_count"), 3, 0);
    CHECK_NEAR(value(&r, "process_memory_megabytes"), (1000 + 300 + 200) * 1024 / 1e6, 1e-9);
    CHECK_NEAR(value(&r, "process_cpu_utilization_percentage"), 0, 0);
    usleep(200000);
    stat_file(101, "evil) (x", 100, 120, 30, 0, 0); /* +100 ticks */
    CHECK_EQ_INT(sample(s, &r), 0);
    t1 = sm__now_mono();
    {
        double cpu = value(&r, "process_cpu_utilization_percentage");
        /* 100 ticks over at most t1 - t0 and at least 0.2 s */
        CHECK(cpu >= 100.0 * 100 / tck / (t1 - t0) - 1e-9);
        CHECK(cpu <= 100.0 * 100 / tck / 0.2 + 1e-9);
    }
    /* 101 exits and 100 reaps it: its ticks move into 100's cutime, the sum
     * goes on; the tree is 2 processes */
    rm("/proc/101/stat");
    rm("/proc/101/smaps_rollup");
    put("/proc/100/task/105/children", "");
    stat_file(100, "python3", 1, 500, 200, 30 + 120, 20 + 30);
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_NEAR(value(&r, "process_count"), 2, 0);
    CHECK_NEAR(value(&r, "process_memory_megabytes"), (1000 + 200) * 1024 / 1e6, 1e-9);
    CHECK_NEAR(value(&r, "process_cpu_utilization_percentage"), 0, 0);
    /* the sum going down (a process left the tree unreaped): clamped at 0 */
    stat_file(100, "python3", 1, 400, 200, 0, 0);
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_NEAR(value(&r, "process_cpu_utilization_percentage"), 0, 0);
    /* the peak tag: the tree's highest memory */
    {
        sm_tags t = {0};
        sm__coll_proc.tags(s, SM_TAGS_END, &t);
        CHECK_EQ_INT(t.n, 1);
        CHECK_EQ_STR(t.v[0].key, "process_tree_peak");
        CHECK_EQ_STR(t.v[0].value, "processes=3 memory_mb=1.5");
    }
    close_coll(s);
}

/* process_tree_peak is also a window tag (docs/design.md §9: it must reach
 * the store before an OOM kill ends the process): the first window ships
 * it, then only a peak risen by max(1 MB, 1 % of the one last shipped), so
 * the sink's ring keeps a bounded number of texts; the end tag is the final
 * peak whatever was shipped. */
static const char *window_peak(void *s)
{
    static sm_tags t;

    memset(&t, 0, sizeof t);
    sm__coll_proc.tags(s, SM_TAGS_WINDOW, &t);
    for (size_t i = 0; i < t.n; i++)
        if (strcmp(t.v[i].key, "process_tree_peak") == 0)
            return t.v[i].value;
    return NULL;
}

/* process 100 of lay_out_tree touched 16 MB: its resident pages move */
static void touched(void)
{
    rss_pages += 4096;
    stat_file(100, "python3", 1, 500, 200, 30, 20);
}

static void test_peak_window(void)
{
    char cmd[600];
    sm_ctx ctx;
    struct run r;
    sm_tags end = {0};
    void *s;
    const char *v;

    snprintf(cmd, sizeof cmd, "rm -rf %s/proc", root);
    CHECK_EQ_INT(system(cmd), 0);
    lay_out_tree(1, 1);
    ctx_here(&ctx);
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK(window_peak(s) == NULL); /* nothing sampled yet: no peak to ship */
    CHECK_EQ_INT(sample(s, &r), 0);
    v = window_peak(s);
    CHECK(v && strcmp(v, "processes=3 memory_mb=1.5") == 0);
    CHECK(window_peak(s) == NULL); /* unchanged: not again */
    /* +0.9 MB (below the 1 MB step): not shipped */
    rollup(100, 1000 + 880, 1500);
    touched();
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK(window_peak(s) == NULL);
    /* +1.1 MB over the one shipped: shipped */
    rollup(100, 1000 + 1075, 1500);
    touched();
    CHECK_EQ_INT(sample(s, &r), 0);
    v = window_peak(s);
    CHECK(v && strcmp(v, "processes=3 memory_mb=2.6") == 0);
    /* a large tree: the step is 1 % of the peak shipped (here 5.1 MB) */
    rollup(101, 500000, 500000);
    touched();
    CHECK_EQ_INT(sample(s, &r), 0);
    v = window_peak(s);
    CHECK(v && strcmp(v, "processes=3 memory_mb=514.3") == 0);
    rollup(101, 500000 + 3000, 500000); /* +3.1 MB: more than 1 MB, less than 1 % */
    touched();
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK(window_peak(s) == NULL);
    rollup(101, 500000 + 6000, 500000); /* +6.1 MB since the one shipped */
    touched();
    CHECK_EQ_INT(sample(s, &r), 0);
    v = window_peak(s);
    CHECK(v && strcmp(v, "processes=3 memory_mb=520.5") == 0);
    /* the tree shrinks: the peak stays, nothing shipped; the end has the peak */
    rm("/proc/101/stat");
    put("/proc/100/task/105/children", "");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_NEAR(value(&r, "process_count"), 2, 0);
    CHECK(window_peak(s) == NULL);
    rollup(101, 500000 + 6100, 500000); /* not in the tree any more */
    sm__coll_proc.tags(s, SM_TAGS_END, &end);
    CHECK_EQ_INT(end.n, 1);
    CHECK_EQ_STR(end.v[0].value, "processes=3 memory_mb=520.5");
    close_coll(s);
    rss_pages = 400;
}

/* The tree of 3 processes, 64 MB resident each, 192 MB, 100 MB of Pss: its
 * collector opened and its baseline read (NULL when it could not open). */
static void *open_192mb(sm_ctx *ctx, struct run *r)
{
    char cmd[600];
    void *s;

    snprintf(cmd, sizeof cmd, "rm -rf %s/proc", root);
    CHECK_EQ_INT(system(cmd), 0);
    rss_pages = 16384;
    lay_out_tree(1, 1);
    rollup(100, 60000, 65536);
    rollup(101, 20000, 65536);
    rollup(102, 20000, 65536);
    ctx_here(ctx);
    s = open_coll(ctx, r);
    CHECK_EQ_INT(r->rc, 0);
    if (s) {
        CHECK_EQ_INT(sample(s, r), 0); /* the baseline reads */
        CHECK_NEAR(value(r, "process_memory_megabytes"), 100000 * 1024 / 1e6, 1e-9);
    }
    return s;
}

/* Pss is read again only when the estimate may be wrong (coll_proc.c,
 * MEM_MOVE_REL, MEM_ESTIMATE, MEM_UNSHARE; design.md §9): a steady tree is
 * estimated, so a Pss change neither its resident pages nor its faults show
 * stays unseen; a resident move of 1 % is not enough (the growth counted
 * whole); faults that resident pages do not explain (copy-on-write) raise the
 * estimate page for page, and past 4 MB the tree is read; a tree grown by
 * 20 % is read. */
static void test_read_when_stale(void)
{
    sm_ctx ctx;
    struct run r;
    void *s = open_192mb(&ctx, &r);
    double est;

    /* steady: Pss drifts where resident pages cannot see it; not read */
    rollup(100, 61000, 65536);
    for (int i = 0; i < 5; i++) {
        CHECK_EQ_INT(sample(s, &r), 0);
        CHECK_NEAR(value(&r, "process_memory_megabytes"), 100000 * 1024 / 1e6, 1e-6);
    }
    /* resident +656 kB (below the 4 MB floor and 2 % of Pss): still the estimate */
    rss_pages = 16384 + 164;
    stat_file(100, "python3", 1, 500, 200, 30, 20);
    est = (100000.0 + 164 * 4) * 1024 / 1e6;
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_NEAR(value(&r, "process_memory_megabytes"), est, 1e-3);
    /* 2 MB of write faults in 101, its resident flat (a child unsharing):
     * estimated, each fault a page; 100's growth above explains none of them */
    rss_pages = 16384;
    minflt = 100 + 512;
    stat_file(101, "evil) (x", 100, 40, 10, 0, 0);
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_NEAR(value(&r, "process_memory_megabytes"), (100000.0 + 164 * 4 + 512 * 4) * 1024 / 1e6,
               1e-3);
    /* 8 MB of them: past the 4 MB floor, read (the drift above shows up) */
    minflt = 100 + 2048;
    stat_file(101, "evil) (x", 100, 40, 10, 0, 0);
    rollup(101, 28192, 65536);
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_NEAR(value(&r, "process_memory_megabytes"), (61000 + 28192 + 20000) * 1024 / 1e6,
               1e-9);
    minflt = 100;
    stat_file(101, "evil) (x", 100, 40, 10, 0, 0);
    /* the tree grows by 20 % (process 100 touched 39 MB of its own): read */
    rss_pages = 16384 + 9830;
    stat_file(100, "python3", 1, 500, 200, 30, 20);
    rollup(100, 61000 + 9830 * 4, 65536 + 9830 * 4);
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_NEAR(value(&r, "process_memory_megabytes"), (61000 + 9830 * 4 + 48192) * 1024 / 1e6,
               1e-9);
    close_coll(s);
    rss_pages = 400;
}

/* The walk of a process's page tables takes time, and a process that
 * touches memory grows during it (coll_proc.c MEM_AT).  The collector's
 * reads are stood in for here at the one place they meet the files: this
 * test is linked with --wrap=sm__open_abs, and a hook may run as a path is
 * opened, the moment the kernel would walk it. */
static void (*on_open)(const char *path);
static int walks; /* the hook's walks of process 100 */
int __real_sm__open_abs(const char *path);
int __wrap_sm__open_abs(const char *path);
int __wrap_sm__open_abs(const char *path)
{
    if (on_open)
        on_open(path);
    return __real_sm__open_abs(path);
}

/* Process 100 touching 80 MB of its own, one page a fault: its stat said
 * 40 MB of it before the read, the walk saw 60 MB, its stat says all 80 MB
 * after.  The walk costs 3 ms of this thread's CPU, as the kernel's would. */
static void walk_growing(const char *path)
{
    const char *tail = "/proc/100/smaps_rollup";
    size_t n = strlen(path), k = strlen(tail);
    struct timespec t0, t;

    if (n < k || strcmp(path + n - k, tail) != 0)
        return;
    walks++;
    /* its pages shared with 101 and 102 leave room for unsharing (MEM_UNSHARE) */
    put("/proc/100/smaps_rollup", "Rss:  125536 kB\nPss:  120000 kB\nPss_Anon:  100000 kB\n"
                                  "Anonymous:  125536 kB\n");
    rss_pages = 16384 + 20000;
    minflt = 100 + 20000;
    stat_file(100, "python3", 1, 500, 200, 30, 20);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < 0.003);
}

/* A read of a growing process (MEM_AT): the estimate that follows moves from
 * where the walk saw it (Pss 120 MB at 60 MB grown), not from its stat before
 * the read (which counted the 20 MB the walk grew through twice: 200 MB for a
 * 180 MB tree), nor takes the faults of the growth it missed for unsharing
 * (the same 200 MB, within the 25 MB of room the walk saw), nor misses
 * unsharing after it. */
static void test_read_of_a_growing_process(void)
{
    sm_ctx ctx;
    struct run r;
    void *s = open_192mb(&ctx, &r);

    /* 40 MB grown: read, and the walk goes on while it grows */
    rss_pages = 16384 + 10000;
    minflt = 100 + 10000;
    stat_file(100, "python3", 1, 500, 200, 30, 20);
    on_open = walk_growing;
    CHECK_EQ_INT(sample(s, &r), 0);
    on_open = NULL;
    CHECK_EQ_INT(walks, 1); /* the hook is linked in (--wrap) and the read went through it */
    CHECK_NEAR(value(&r, "process_memory_megabytes"), 160000 * 1024 / 1e6, 1e-9);
    /* still at 80 MB grown, the next read 3.3 s away (the walk's 3 ms at
     * 0.09 % of one core): estimated, the 20 MB the walk missed added once */
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(sample(s, &r), 0);
        CHECK_NEAR(value(&r, "process_memory_megabytes"), 180000 * 1024 / 1e6, 1e-9);
    }
    /* then 900 write faults, resident flat: 3.6 MB unshared, estimated (below
     * the 4 MB floor); faults taken after the walk would miss them */
    minflt = 100 + 20000 + 900;
    stat_file(100, "python3", 1, 500, 200, 30, 20);
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_NEAR(value(&r, "process_memory_megabytes"), 183600 * 1024 / 1e6, 1e-9);
    close_coll(s);
    rss_pages = 400;
    minflt = 100;
}

/* The n-th open of a path ending in tail (the hooks below). */
static int opens;
static int nth_open(const char *path, const char *tail, int n)
{
    size_t len = strlen(path), k = strlen(tail);

    return len >= k && strcmp(path + len - k, tail) == 0 && ++opens == n;
}

/* Process 100 forks 103 as its smaps_rollup is opened for the read, after
 * the walk that listed the tree (the first open is the collector's check at
 * open): 103 shares 40 MB of 100's, whose Pss gives 103 half. */
static void fork_at_read(const char *path)
{
    if (!nth_open(path, "/proc/100/smaps_rollup", 2))
        return;
    stat_file(103, "pt_data_worker", 100, 0, 0, 0, 0);
    put("/proc/103/task/103/children", "");
    put("/proc/100/task/100/children", "102 103 ");
    rollup(103, 20000, 65536);
    rollup(100, 40000, 65536);
}

/* Process 102 exits as its smaps_rollup is opened, after 100's was read (the
 * root first): a zombie, its pages gone, its 20 MB share of 100's back to
 * 100, which the read saw before. */
static void exit_at_read(const char *path)
{
    if (!nth_open(path, "/proc/102/smaps_rollup", 1))
        return;
    put("/proc/102/stat", "102 (pt_data_worker) Z 100 100 100 0 -1 4194564 10 0 0 0 5 5 0 0 20 "
                          "0 1 0 5102 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 "
                          "0 0 0 0\n");
    put("/proc/102/smaps_rollup", "");
    rollup(100, 80000, 65536);
}

/* A read that a fork or an exit overtakes (coll_proc.c read_tree, MEM_AT
 * for the set), at the baseline (which reads whatever a read costs): the
 * tree is walked again after the read, its stats read, and read again when
 * its live processes differ, so the point is the tree's Pss, 100 MB both
 * times (open_192mb checks it).  The old code's read missed the share that
 * went to the child it had not listed, and the one that went back to the
 * parent it had read before the exit (81.9 MB each), and held them until the
 * next read. */
static void test_read_overtaken_by_a_fork_or_an_exit(void)
{
    sm_ctx ctx;
    struct run r;
    void *s;

    opens = 0;
    on_open = fork_at_read;
    s = open_192mb(&ctx, &r);
    on_open = NULL;
    CHECK(opens >= 2); /* the hook is linked in and the fork came */
    CHECK_NEAR(value(&r, "process_count"), 4, 0);
    close_coll(s);
    opens = 0;
    on_open = exit_at_read;
    s = open_192mb(&ctx, &r);
    on_open = NULL;
    CHECK(opens >= 1);
    CHECK_NEAR(value(&r, "process_count"), 3, 0); /* the zombie is in the tree until reaped */
    close_coll(s);
    rss_pages = 400;
}

/* Process 102 in its exit as its smaps_rollup is read: its mm detached
 * (do_exit runs exit_mm before exit_notify makes it a zombie, kernel/exit.c),
 * the file empty while its stat still says it runs with its resident pages,
 * and its pages not yet unmapped (100's Pss still shares them). */
static void in_exit_at_read(const char *path)
{
    if (nth_open(path, "/proc/102/smaps_rollup", 1))
        put("/proc/102/smaps_rollup", "");
}

/* A read that met a process in its exit (coll_proc.c sum_mem) is low by the
 * process's share and is no base: the old code kept 122.2 MB for a 142.7 MB
 * tree (102's 20 MB missing) until the next read; read again and still in
 * its exit, the estimate from the last base follows (100's growth counted
 * whole); the exit done (a zombie), the tree is read. */
static void test_read_of_a_process_in_its_exit(void)
{
    sm_ctx ctx;
    struct run r;
    void *s = open_192mb(&ctx, &r);

    /* 100 touches 39 MB of its own (a read is due: MEM_MOVE) as 102 exits */
    rss_pages = 16384 + 9830;
    stat_file(100, "python3", 1, 500, 200, 30, 20);
    rollup(100, 60000 + 9830 * 4, 65536 + 9830 * 4);
    opens = 0;
    on_open = in_exit_at_read;
    CHECK_EQ_INT(sample(s, &r), 0);
    on_open = NULL;
    CHECK_EQ_INT(opens, 3); /* the hook is linked in; read READ_TRIES times, in its exit each */
    CHECK_NEAR(value(&r, "process_memory_megabytes"), (100000 + 9830 * 4) * 1024 / 1e6, 1e-9);
    /* the exit done: a zombie, its share back in 100's Pss */
    put("/proc/102/stat", "102 (pt_data_worker) Z 100 100 100 0 -1 4194564 10 0 0 0 5 5 0 0 20 "
                          "0 1 0 5102 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 "
                          "0 0 0 0\n");
    rollup(100, 80000 + 9830 * 4, 65536 + 9830 * 4);
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_NEAR(value(&r, "process_memory_megabytes"), (100000 + 9830 * 4) * 1024 / 1e6, 1e-9);
    close_coll(s);
    rss_pages = 400;
}

/* No children files (CONFIG_PROC_CHILDREN off): one /proc scan by ppid; no
 * smaps_rollup (kernel < 4.14): VmRSS summed, one line says both. */
static void test_fallbacks(void)
{
    char cmd[600];
    sm_ctx ctx;
    struct run r;
    void *s;

    snprintf(cmd, sizeof cmd, "rm -rf %s/proc", root);
    CHECK_EQ_INT(system(cmd), 0);
    lay_out_tree(0, 0);
    ctx_here(&ctx);
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK(strstr(r.res.msg, "CONFIG_PROC_CHILDREN") != NULL);
    CHECK(strstr(r.res.msg, "smaps_rollup (kernel < 4.14): Rss summed") != NULL);
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_NEAR(value(&r, "process_count"), 3, 0); /* 7 is not in the tree */
    CHECK_NEAR(value(&r, "process_memory_megabytes"), (1500 + 900 + 800) * 1024 / 1e6, 1e-9);
    CHECK(strcmp(point(&r, SM_RANK_OWN, "process_memory_megabytes")->source,
                 "/proc/PID/status") == 0);
    close_coll(s);

    /* a fake /proc whose self is a directory (the older fixtures): absent */
    snprintf(cmd, sizeof cmd, "rm -f %s/proc/self && mkdir %s/proc/self", root, root);
    CHECK_EQ_INT(system(cmd), 0);
    s = open_coll(&ctx, &r);
    CHECK_EQ_INT(r.rc, SM_ABSENT);
    CHECK(strstr(r.res.msg, "/proc/self under SCOPEMETER_SYSROOT names no pid") != NULL);
}

/* A point named for another rank: the naming path of the siblings. */
static void test_rank_override(void)
{
    sm_points p = {0};
    char name[256];

    sm__emit(&p, "process_count", 3, "count", "x", SM_AGG_MEAN);
    sm__emit_rank(&p, 5, "process_count", 4, "count", "x", SM_AGG_MEAN);
    CHECK_EQ_INT(p.n, 2);
    CHECK_EQ_INT(p.v[0].rank, SM_RANK_OWN);
    CHECK_EQ_INT(p.v[1].rank, 5);
    CHECK_EQ_INT(sm_series_name(p.v[1].key, p.v[1].rank, "node-a", name, sizeof name), 0);
    CHECK_EQ_STR(name, "system/process_count/rank5");
}

/* The recorder lock with the real kernel: a second bind of the same name
 * is EADDRINUSE, the peer's pid is ours, closing frees the name, a long
 * key is hashed into a name that fits. */

/* "(COMM)" of this process as the kernel names it in /proc/PID/comm: "test_proc"
 * natively, the emulator's name under qemu-user (the portability tier runs
 * these tests on aarch64 so). */
static const char *self_comm(void)
{
    static char buf[64];
    char comm[32] = "";
    FILE *f = fopen("/proc/self/comm", "r");

    if (f) {
        if (fgets(comm, sizeof comm, f))
            comm[strcspn(comm, "\n")] = '\0';
        fclose(f);
    }
    snprintf(buf, sizeof buf, "(%s)", comm[0] ? comm : "test_proc");
    return buf;
}

static void test_lock(void)
{
    char key[64], name[200], longkey[300];
    int fd, fd2;
    pid_t pid;

    snprintf(key, sizeof key, "test-%d", (int)getpid());
    CHECK_EQ_INT(sm__reclock_peer(key, 0, &pid), -ECONNREFUSED);
    CHECK_EQ_INT(sm__reclock_bind(key, 0, &fd), 0);
    CHECK_EQ_INT(sm__reclock_bind(key, 0, &fd2), -EADDRINUSE);
    CHECK_EQ_INT(sm__reclock_bind(key, 1, &fd2), 0); /* another rank */
    CHECK_EQ_INT(sm__reclock_peer(key, 0, &pid), 0);
    CHECK_EQ_INT(pid, getpid());
    sm__reclock_holder(key, 0, name, sizeof name);
    CHECK(strncmp(name, "pid ", 4) == 0 && strstr(name, self_comm()) != NULL);
    close(fd);
    CHECK_EQ_INT(sm__reclock_peer(key, 0, &pid), -ECONNREFUSED);
    CHECK_EQ_INT(sm__reclock_bind(key, 0, &fd), 0); /* re-attach */
    close(fd);
    close(fd2);

    CHECK_EQ_INT(sm__reclock_name("abc", 3, name, sizeof name), 0);
    CHECK_EQ_STR(name, "scopemeter/abc/rank3");
    memset(longkey, 'k', 200);
    longkey[200] = '\0';
    CHECK_EQ_INT(sm__reclock_name(longkey, 2147483647, name, sizeof name), 0);
    CHECK(strlen(name) <= 107);
    CHECK(strncmp(name, "scopemeter/#", 12) == 0);
    CHECK_EQ_INT(sm__reclock_bind(longkey, 2147483647, &fd), 0);
    close(fd);
    CHECK_EQ_INT(sm__reclock_name("", 0, name, sizeof name), -EINVAL);
}

/* The lock through the monitor (the one place every surface shares): a
 * second monitor of the same key and rank records nothing and says who
 * holds it; after the first stops, a third records; another key is free. */
static void test_monitor_lock(void)
{
    char key[64], err[512];
    sm_monitor *a = sm_monitor_new(), *b = sm_monitor_new(), *c = sm_monitor_new(),
               *d = sm_monitor_new();

    unsetenv("SCOPEMETER_SYSROOT");
    snprintf(key, sizeof key, "run-%d", (int)getpid());
    for (sm_monitor **m = (sm_monitor *[]){a, b, c, d, NULL}; *m; m++) {
        CHECK_EQ_INT(sm_monitor_use_queue(*m), 0);
        CHECK_EQ_INT(sm_monitor_set_interval(*m, 0.05), 0);
    }
    CHECK_EQ_INT(sm_monitor_set_recording_key(a, key), 0);
    CHECK_EQ_INT(sm_monitor_set_recording_key(b, key), 0);
    CHECK_EQ_INT(sm_monitor_set_recording_key(c, key), 0);
    CHECK_EQ_INT(sm_monitor_set_recording_key(d, "another-run"), 0);
    CHECK_EQ_INT(sm_monitor_set_recording_key(d, ""), -EINVAL);
    CHECK_EQ_INT(sm_monitor_start(a, err, sizeof err), 0);
    CHECK_EQ_INT(sm_monitor_start(b, err, sizeof err), SM_NOT_COLLECTING);
    CHECK(strstr(err, "rank 0 of run run-") != NULL);
    CHECK(strstr(err, "already has a recorder: pid ") != NULL);
    CHECK(strstr(err, self_comm()) != NULL);
    CHECK_EQ_INT(sm_monitor_start(d, err, sizeof err), 0);
    CHECK_EQ_INT(sm_monitor_stop(a), 0);
    CHECK_EQ_INT(sm_monitor_start(c, err, sizeof err), 0); /* re-attach after a stop */
    CHECK_EQ_INT(sm_monitor_set_recording_key(c, key), -EBUSY);
    sm_monitor_free(a);
    sm_monitor_free(b);
    sm_monitor_free(c);
    sm_monitor_free(d);
}

int main(void)
{
    char cmd[600];

    snprintf(root, sizeof root, "/tmp/sm-test-proc-XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    test_tree();
    test_peak_window();
    test_read_when_stale();
    test_read_of_a_growing_process();
    test_read_overtaken_by_a_fork_or_an_exit();
    test_read_of_a_process_in_its_exit();
    test_fallbacks();
    test_rank_override();
    test_lock();
    test_monitor_lock();
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", root);
    return CHECK_DONE();
}
