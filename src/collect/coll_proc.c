/*
 * coll_proc.c — the process tree of a rank (docs/design.md §9): the
 * recording process (the Python process that called
 * enable_system_metrics(); under `scopemeter run` scopemeter itself, so CMD
 * is in it) and all its descendants (data-loader workers, compilers, ...).
 *
 *   process_count                        processes in the tree
 *   process_memory_megabytes             sum of Pss (/proc/PID/smaps_rollup):
 *                                        a page shared by forked children
 *                                        counts once in total; read within
 *                                        a CPU budget and only when the
 *                                        estimate between reads may be
 *                                        wrong (proc_estimate.c: the
 *                                        MEM_* rules, pure; this file does
 *                                        their reading); never a
 *                                        smaps_rollup read per sample of a
 *                                        steady tree
 *   process_cpu_utilization_percentage   100 * Δticks / CLK_TCK / Δwall, 100 =
 *                                        one core; ticks = utime + stime +
 *                                        cutime + cstime summed over the live
 *                                        tree (a child reaped inside the tree
 *                                        moves into its parent's c*time, so
 *                                        the sum goes on), Δ clamped at 0
 *
 * The tree: children come from /proc/PID/task/TID/children (every thread's
 * own children; CONFIG_PROC_CHILDREN, Documentation/filesystems/proc.rst
 * 3.7), else from one scan of /proc/[0-9]*\/stat (ppid).  The root is the
 * pid /proc/self names (readlink), which is the pid in the pid namespace of
 * the /proc being read; a fake /proc under SCOPEMETER_SYSROOT provides a
 * proc/self link to its root.  Nothing is allocated per sample: directory
 * entries are read with getdents64 into the state, the tree is capped at
 * TREE_MAX processes (one line when a tree is larger: the rest is not
 * counted).
 *
 * Siblings (docs/design.md §9): under all_workers the pod's collector (local
 * rank 0, global rank R) also records the trees of the pod's other local
 * ranks, R+1 .. R+LOCAL_WORLD_SIZE-1 — torchrun's and Slurm's block layout,
 * where the ranks of one node are consecutive.  Each of them holds its
 * rank's lock socket (reclock.c); connecting to it gives its pid
 * (SO_PEERCRED), cached with its start time and asked again when that
 * process is gone.  A sibling that has not bound yet is asked again at the
 * next sample.  Its points carry its rank (sm__emit_rank).  The first sample
 * (the baseline, whose values are never logged, §1) emits every sibling
 * rank's three keys, 0 where not known yet, so the monitor has their series
 * whether or not the sibling started before the collector.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "parse.h"
#include "pidmap.h"
#include "proc_estimate.h"

#define TREE_MAX 4096      /* processes counted per tree */
#define SCAN_MAX 32768     /* (pid, ppid) pairs of the fallback's /proc scan */
#define SIB_MAX 63         /* other local ranks of one pod */
#define TREES_MAX (1 + SIB_MAX)
_Static_assert(19 + 64 * 15 + 512 + TREES_MAX * 3 <= SM_POINTS_MAX,
               "SM_POINTS_MAX holds every GPU's and every tree's points");

struct tree {
    int rank;              /* SM_RANK_OWN, or the sibling's rank */
    int pid;               /* root; 0: a sibling not found yet */
    uint64_t start;        /* the root's starttime: a reused pid is not it */
    uint64_t ticks;        /* the previous sample's sum */
    double t;              /* when (monotonic s); 0: no previous sample */
    int said;              /* its "not visible" line was printed */
    sm__mread mem;         /* its last memory read (proc_estimate.h) */
    int recs;              /* its processes' records in proc_state.rec at the last read
                            * (MEM_SET; the trees' lie in tree order); -1: they did not fit */
};

/* SCOPEMETER_TRACE=proc (docs/cli.md, Diagnosis): one line a read of a tree,
 * saying when it began (wall clock, as the points' timestamps), what it cost
 * and the estimate it replaced, so that a reader of a series can tell a read
 * from an estimate and a test can hold its verdict until the read a change
 * calls for (tests/py/test_proctree_cow.py).  Off by default: a line a read. */
static const char *const mem_why[] = {
    [SM__MEM_FIRST] = "first", [SM__MEM_DOUBT] = "exits", [SM__MEM_SET] = "processes",
    [SM__MEM_UNSHARE] = "faults", [SM__MEM_MOVE] = "resident", [SM__MEM_AGE] = "age",
};

static void tree_name(const struct tree *t, char *buf, size_t cap)
{
    if (t->rank == SM_RANK_OWN)
        snprintf(buf, cap, "own");
    else
        snprintf(buf, cap, "rank %d", t->rank);
}

static double wall_s(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void trace_read(const struct tree *t, double began, double cost, int kept,
                       const sm__mest *e, int baseline, uint64_t file_kb)
{
    char was[64] = "", got[96], whose[24];

    if (!baseline && e->rss_kb > 0)
        snprintf(was, sizeof was, "; the estimate was %.1f MB", (double)e->kb * 1024 / 1e6);
    if (kept) /* MB as the series (10^6 bytes) */
        snprintf(got, sizeof got, "%.1f MB in %d processes, %.1f MB of it file pages",
                 (double)t->mem.kb * 1024 / 1e6, t->mem.counted, (double)file_kb * 1024 / 1e6);
    tree_name(t, whose, sizeof whose);
    sm__log(SM_INFO, "trace: process tree (%s) read at %.3f (%s): %s, %.1f ms of CPU%s",
            whose, began,
            baseline ? "baseline" : (e->why >= 0 && e->why <= SM__MEM_AGE ? mem_why[e->why] : "?"),
            kept ? got : "not kept (the tree changed during it)", cost * 1e3, was);
}

/* A sample between reads: the estimate, and the read it waits for (the
 * trigger whose spacing passes first; "resident" and "age" wait for no
 * change the estimate cannot follow: design.md §9, the table). */
static void trace_estimate(const struct tree *t, const sm__mest *e, double now)
{
    char whose[24];

    tree_name(t, whose, sizeof whose);
    sm__log(SM_INFO, "trace: process tree (%s) estimated at %.3f: %.1f MB; next read in %.1f s "
            "(%s)", whose, wall_s(), (double)e->kb * 1024 / 1e6, e->next > now ? e->next - now : 0,
            e->why >= 0 && e->why <= SM__MEM_AGE ? mem_why[e->why] : "?");
}

/* The cost of a read is this thread's CPU time (the page-table walk runs in
 * the kernel on our behalf), not wall time: on a loaded node a preempted read
 * would otherwise look slow and drop memory points for nothing. */
static double thread_cpu_s(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct proc_state {
    char sysroot[1024];
    sm__pidmap *pids;      /* the set's pid map, fed the own tree each walk; NULL: none */
    char key[256];         /* the recording key (siblings' lock names) */
    int children;          /* 1: task/TID/children, 0: the ppid scan */
    int rollup;            /* 1: Pss from smaps_rollup, 0: VmRSS from status */
    long tck;
    uint64_t page_kb;      /* /proc/PID/stat's rss is in pages */
    int samples;           /* samples taken (0: the next is the baseline) */
    int cap_said, mem_said, budget_said;
    int trace;             /* SCOPEMETER_TRACE has "proc": a line a read (trace_read) */
    uint64_t trace_file_kb; /* ... and the read's Pss_File sum, for that line */
    int ntrees;
    struct tree trees[TREES_MAX];
    /* the tree being walked, and what each one's stat said (alive: it was read) */
    int n, over;
    int in_exit;           /* a read met a process in its exit (sum_mem): not a base */
    int list[TREE_MAX];
    sm__pnow cur[TREE_MAX];
    char live[TREE_MAX];   /* its stat was read and it is not a zombie */
    int before[TREE_MAX];  /* a read's live processes, sorted: the walk after it compares */
    sm__prec kept[TREE_MAX]; /* the tree's records before a read, kept if it is not a base */
    /* the processes of every tree at its last read, each tree's sorted by pid */
    sm__prec rec[TREE_MAX];
    /* the fallback's scan */
    size_t nscan;
    int scan_over;
    struct { int pid, ppid; } scan[SCAN_MAX];
    /* the peak of the own tree's memory (tag scopemeter.rankN.process_tree_peak),
     * and the peak last shipped with a window (shipped_n 0: none yet) */
    double peak_mb, shipped_mb;
    int peak_n, shipped_n;
    char buf[65536];       /* one file (a children list of 4096 pids fits) */
    _Alignas(8) char dents[8192]; /* getdents64: records are 8-byte aligned from here */
};

/* getdents64(2)'s record; glibc < 2.30 has no wrapper */
struct dent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static ssize_t read_at(const struct proc_state *s, const char *abs, char *buf, size_t cap)
{
    char path[SM_PATH_MAX];
    int fd;
    ssize_t n;

    if (snprintf(path, sizeof path, "%s%s", s->sysroot, abs) >= (int)sizeof path)
        return -ENAMETOOLONG;
    fd = sm__open_abs(path);
    if (fd < 0)
        return fd;
    n = sm__pread_all(fd, buf, cap);
    close(fd);
    return n;
}

static int read_pid_stat(struct proc_state *s, int pid, sm_pid_stat *st)
{
    char abs[64];
    ssize_t n;

    snprintf(abs, sizeof abs, "/proc/%d/stat", pid);
    n = read_at(s, abs, s->buf, sizeof s->buf);
    if (n < 0)
        return (int)n;
    return sm__parse_pid_stat(s->buf, (size_t)n, st);
}

/* A numeric directory entry's value, or 0. */
static int entry_pid(const char *name)
{
    long v = 0;

    if (!*name)
        return 0;
    for (; *name; name++) {
        if (*name < '0' || *name > '9' || v > 0x7fffffff / 10)
            return 0;
        v = v * 10 + (*name - '0');
    }
    return (int)v;
}

/* Calls fn(s, pid, arg) for every numeric entry of sysroot + abs. */
static int each_numeric(struct proc_state *s, const char *abs,
                        void (*fn)(struct proc_state *, int, void *), void *arg)
{
    char path[SM_PATH_MAX];
    int fd;

    if (snprintf(path, sizeof path, "%s%s", s->sysroot, abs) >= (int)sizeof path)
        return -ENAMETOOLONG;
    fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    for (;;) {
        long n = syscall(SYS_getdents64, fd, s->dents, sizeof s->dents);
        if (n < 0) {
            int rc = -errno;
            close(fd);
            return rc;
        }
        if (n == 0)
            break;
        for (long off = 0; off < n;) {
            const struct dent64 *d = (const struct dent64 *)(s->dents + off);
            int pid = entry_pid(d->d_name);
            if (pid > 0)
                fn(s, pid, arg);
            off += d->d_reclen;
        }
    }
    close(fd);
    return 0;
}

static void add(struct proc_state *s, int pid)
{
    if (s->n < TREE_MAX)
        s->list[s->n++] = pid;
    else
        s->over = 1;
}

/* children of one thread: /proc/PID/task/TID/children */
static void thread_children(struct proc_state *s, int tid, void *arg)
{
    char abs[96];
    size_t pos = 0;
    int child;
    ssize_t n;

    snprintf(abs, sizeof abs, "/proc/%d/task/%d/children", *(int *)arg, tid);
    n = read_at(s, abs, s->buf, sizeof s->buf);
    if (n == -EFBIG)
        s->over = 1;
    if (n <= 0)
        return; /* the thread ended meanwhile */
    while (sm__pid_list_next(s->buf, (size_t)n, &pos, &child) == 1)
        add(s, child);
}

static void scan_one(struct proc_state *s, int pid, void *arg)
{
    sm_pid_stat st;

    (void)arg;
    if (s->nscan >= SCAN_MAX) {
        s->scan_over = 1;
        return;
    }
    if (read_pid_stat(s, pid, &st) == 0) {
        s->scan[s->nscan].pid = pid;
        s->scan[s->nscan].ppid = st.ppid;
        s->nscan++;
    }
}

/* The tree under root into s->list (root first).  With the ppid scan, one
 * scan serves every tree of the sample (scanned says whether it was done). */
static void walk(struct proc_state *s, int root, int *scanned)
{
    s->n = 0;
    s->over = 0;
    add(s, root);
    if (s->children) {
        for (int i = 0; i < s->n; i++) {
            char abs[64];
            int pid = s->list[i];
            snprintf(abs, sizeof abs, "/proc/%d/task", pid);
            each_numeric(s, abs, thread_children, &pid); /* gone: no children */
        }
        return;
    }
    if (!*scanned) {
        s->nscan = 0;
        each_numeric(s, "/proc", scan_one, NULL);
        *scanned = 1;
    }
    for (int i = 0; i < s->n; i++)
        for (size_t j = 0; j < s->nscan; j++)
            if (s->scan[j].ppid == s->list[i] && s->scan[j].pid != s->list[i])
                add(s, s->scan[j].pid);
}

/* Where tree ti's records start in s->rec: after the earlier trees'. */
static sm__prec *recs_at(struct proc_state *s, int ti, int *used)
{
    int off = 0;

    *used = 0;
    for (int j = 0; j < s->ntrees; j++) {
        int m = s->trees[j].recs > 0 ? s->trees[j].recs : 0;
        off += j < ti ? m : 0;
        *used += m;
    }
    return s->rec + off;
}

/* Makes tree ti's records n long, moving the later trees' (at a read, or 0
 * when its tree ended: nothing per sample).  NULL, the tree then keeping
 * none (recs -1), when they do not fit in TREE_MAX with the others'. */
static sm__prec *recs_make(struct proc_state *s, int ti, int n)
{
    struct tree *t = &s->trees[ti];
    int used, have = t->recs > 0 ? t->recs : 0;
    sm__prec *r = recs_at(s, ti, &used);
    size_t tail = (size_t)(used - (int)(r - s->rec) - have);

    if (used - have + n > TREE_MAX)
        n = -1;
    memmove(r + (n > 0 ? n : 0), r + have, tail * sizeof *r);
    t->recs = n;
    return n >= 0 ? r : NULL;
}

/* One process's memory in kB: Pss, or VmRSS without smaps_rollup; with
 * smaps_rollup also its private pages (MEM_SET), the room unsharing has
 * (MEM_UNSHARE) and the resident pages the walk saw (MEM_AT; UINT64_MAX
 * without the line).  -errno when unreadable (gone: ENOENT/ESRCH; another
 * user's: EACCES). */
static int proc_kb(struct proc_state *s, int pid, uint64_t *kb, uint64_t *room, uint64_t *priv,
                   uint64_t *rss)
{
    uint64_t anon, pss_anon, clean, dirty, file;
    char abs[64];
    ssize_t n;

    snprintf(abs, sizeof abs, s->rollup ? "/proc/%d/smaps_rollup" : "/proc/%d/status", pid);
    n = read_at(s, abs, s->buf, sizeof s->buf);
    if (n < 0)
        return (int)n;
    /* a kernel thread or a zombie has no mm: an empty file, nothing resident */
    *room = 0;
    *priv = 0;
    if (!s->rollup || n == 0 || sm__parse_kb(s->buf, (size_t)n, "Rss:", rss) < 0)
        *rss = UINT64_MAX;
    if (n == 0) {
        *kb = 0;
        return 0;
    }
    /* what unsharing can add (MEM_UNSHARE): anonymous pages counted whole
     * in Anonymous and shared in Pss_Anon; a kernel without Pss_Anon (older
     * than the split of Pss) leaves room UINT64_MAX (sm__mem_took) */
    if (s->rollup && (sm__parse_kb(s->buf, (size_t)n, "Anonymous:", &anon) < 0 ||
                      sm__parse_kb(s->buf, (size_t)n, "Pss_Anon:", &pss_anon) < 0))
        *room = UINT64_MAX;
    else if (s->rollup)
        *room = anon > pss_anon ? anon - pss_anon : 0;
    /* private pages; without the two lines UINT64_MAX (sm__mem_took) */
    if (s->rollup && (sm__parse_kb(s->buf, (size_t)n, "Private_Clean:", &clean) < 0 ||
                      sm__parse_kb(s->buf, (size_t)n, "Private_Dirty:", &dirty) < 0))
        *priv = UINT64_MAX;
    else if (s->rollup)
        *priv = clean + dirty;
    if (s->trace && s->rollup && sm__parse_kb(s->buf, (size_t)n, "Pss_File:", &file) == 0)
        s->trace_file_kb += file; /* the page cache's share: trace_read */
    n = sm__parse_kb(s->buf, (size_t)n, s->rollup ? "Pss:" : "VmRSS:", kb);
    if (n == -ENOENT && !s->rollup) { /* status of a zombie: no VmRSS line */
        *kb = 0;
        return 0;
    }
    return (int)n;
}

/* Sums over the walked tree from each process's stat: the processes still
 * alive and their CPU ticks; each one's resident pages and faults into
 * s->cur (what the memory estimate needs, read every sample anyway). */
static void sum_tree(struct proc_state *s, int *count, uint64_t *ticks)
{
    int live = 0;

    *ticks = 0;
    for (int i = 0; i < s->n; i++) {
        sm_pid_stat st;

        s->cur[i].pid = s->list[i];
        s->cur[i].alive = read_pid_stat(s, s->list[i], &st) == 0;
        s->live[i] = s->cur[i].alive && st.state != 'Z' && st.state != 'X';
        if (!s->cur[i].alive)
            continue; /* exited since the walk */
        live++;
        s->cur[i].start = st.starttime;
        s->cur[i].rss_kb = st.rss_pages * s->page_kb;
        s->cur[i].flt = st.minflt + st.majflt;
        *ticks += st.utime + st.stime + st.cutime + st.cstime;
    }
    *count = live;
}

/* The own tree as last walked (s->list, the live ones of s->cur) into the
 * set's pid map: the GPU collectors' "own" (pidmap.h). */
static void feed_pids(struct proc_state *s)
{
    if (!s->pids)
        return;
    sm__pidmap_tree_begin(s->pids);
    for (int i = 0; i < s->n; i++)
        if (s->cur[i].alive)
            sm__pidmap_tree_add(s->pids, s->list[i], s->cur[i].start);
    sm__pidmap_tree_end(s->pids);
}

/* Tree ti's memory read (Pss, or VmRSS without smaps_rollup) into its mem
 * and, with smaps_rollup, each process's record (MEM_SET), where its walk
 * passed (MEM_AT: its stat is read again after its smaps_rollup, one open
 * more per process per read, within the read's measured cost).  Between
 * reads the rules (proc_estimate.c) open nothing: the faults and resident
 * pages are in the stat line read for the CPU series.  The first unreadable
 * process is said once. */
static void sum_mem(struct proc_state *s, int ti, double now)
{
    struct tree *t = &s->trees[ti];
    sm__prec *rec = NULL;
    int m = 0;

    if (s->rollup) {
        for (int i = 0; i < s->n; i++)
            m += s->cur[i].alive;
        rec = recs_make(s, ti, m);
        m = 0;
    }
    sm__mem_read_begin(&t->mem, now, s->n);
    for (int i = 0; i < s->n; i++) {
        uint64_t k = 0, room = 0, p = 0, at = UINT64_MAX;
        sm__prec r = {.pid = s->list[i], .seen = s->samples, .start = s->cur[i].start,
                      .rss_kb = s->cur[i].rss_kb, .flt = s->cur[i].flt};
        int rc;

        if (!s->cur[i].alive)
            continue; /* exited since the walk */
        rc = proc_kb(s, s->list[i], &k, &room, &p, &at);
        /* An empty smaps_rollup of a process whose stat showed resident
         * pages: its mm is detached, its pages not yet all unmapped (do_exit
         * runs exit_mm before exit_notify makes it a zombie, kernel/exit.c),
         * so the others' Pss still share pages no read counts for it: the
         * read is low by its share (a stress run: 401.6 MB kept for a 413.4
         * MB tree, an orphaning parent's children ending).  read_tree reads
         * again, and keeps no such read as a base. */
        if (rc == 0 && s->rollup && k == 0 && at == UINT64_MAX && s->cur[i].rss_kb > 0)
            s->in_exit = 1;
        if (rc == 0) {
            sm_pid_stat st;
            sm__pnow after = {0};

            if (s->rollup && at != UINT64_MAX && read_pid_stat(s, s->list[i], &st) == 0)
                after = (sm__pnow){.pid = s->list[i], .alive = 1, .start = st.starttime,
                                   .rss_kb = st.rss_pages * s->page_kb,
                                   .flt = st.minflt + st.majflt};
            sm__mem_at(&r, at, after.alive ? &after : NULL, s->page_kb);
            sm__mem_took(&r, k, room, p);
        }
        sm__mem_read_add(&t->mem, &r);
        if (rec && rc != -ENOENT && rc != -ESRCH) /* unreadable: found, not counted */
            rec[m++] = r;
        if (rc != 0 && rc != -ENOENT && rc != -ESRCH && !s->mem_said) {
            sm__log(SM_WARN, "process_memory_megabytes: cannot read %s of pid %d (%s); that "
                   "process's memory is not counted (said once)",
                   s->rollup ? "smaps_rollup" : "status", s->list[i], strerror(-rc));
            s->mem_said = 1;
        }
    }
    if (rec) {
        recs_make(s, ti, m); /* fewer: those gone since the walk */
        sm__mem_sort(rec, m);
    }
}

static int by_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;

    return (x > y) - (x < y);
}

/* MEM_AT for the set (proc_estimate.c): tree ti read as one set of
 * processes.  The walk lists them before their smaps_rollup is read, and a
 * process forked between the walk and its parent's read takes a share of
 * the parent's Pss that no read counts; an exit during the read (the
 * process a zombie, its pages gone) moves shares from the processes read
 * before it to those read after (design.md §9's table, MEM_AT of the set,
 * has the misses they made).  So the tree is walked again after the
 * read, its stats read again, and read again while its live processes (not
 * zombies) differ, at most READ_TRIES reads.  When they still differ (forks
 * slower than reads on a loaded node) the read is not a base: the tree keeps
 * the last one, and its estimate follows what came and went (MEM_SET), as it
 * would have had no read been made; 1 when the read is the new base (the
 * first read always is: there is none to keep).  *count and *ticks are the
 * last walk's.  The walk and the stats cost a file a thread and a process,
 * within the read's measured cost. */
#define READ_TRIES 3

static int read_tree(struct proc_state *s, int ti, double now, int *count, uint64_t *ticks)
{
    struct tree *t = &s->trees[ti];
    sm__mread was = t->mem;
    int nrec = t->recs, used;

    if (was.t > 0 && nrec > 0)
        memcpy(s->kept, recs_at(s, ti, &used), (size_t)nrec * sizeof *s->kept);
    for (int k = 1;; k++) {
        int rescan = 0, nb = 0, na = 0, same = 1;

        s->trace_file_kb = 0;
        s->in_exit = 0;
        sum_mem(s, ti, now);
        for (int i = 0; i < s->n; i++)
            if (s->live[i])
                s->before[nb++] = s->list[i];
        qsort(s->before, (size_t)nb, sizeof *s->before, by_int);
        walk(s, t->pid, &rescan);
        sum_tree(s, count, ticks);
        for (int i = 0; i < s->n; i++)
            if (s->live[i]) {
                na++;
                same = same && bsearch(&s->list[i], s->before, (size_t)nb, sizeof *s->before,
                                       by_int) != NULL;
            }
        if (same && na == nb && !s->in_exit)
            return 1;
        if (k == READ_TRIES)
            break;
    }
    if (was.t <= 0 || !s->rollup) /* no base to keep (VmRSS: none needed) */
        return 1;
    t->mem = was;
    if (recs_make(s, ti, nrec) && nrec > 0)
        memcpy(recs_at(s, ti, &used), s->kept, (size_t)nrec * sizeof *s->kept);
    return 0;
}

/* A sibling's pid through its lock (SO_PEERCRED), checked against a reused
 * pid by its start time. */
static void find_sibling(struct proc_state *s, struct tree *t)
{
    sm_pid_stat st;
    pid_t pid;

    if (t->pid > 0) {
        if (read_pid_stat(s, t->pid, &st) == 0 && st.starttime == t->start)
            return; /* still the same process */
        t->pid = 0; /* gone (a restarted worker binds again) */
        t->t = 0;
        t->mem.t = 0; /* its next tree is read, not estimated */
    }
    if (t->said)
        return; /* not visible here: asking again would only fill its backlog */
    if (sm__reclock_peer(s->key, t->rank, &pid) < 0)
        return; /* not bound (yet), or its backlog is full: asked again next sample */
    if (pid <= 0 || read_pid_stat(s, pid, &st) < 0) {
        sm__log(SM_INFO, "process_*/rank%d: the rank's process %s; its tree is not recorded",
               t->rank, pid <= 0 ? "is in another pid namespace" : "is not in this /proc");
        t->said = 1;
        return;
    }
    t->pid = pid;
    t->start = st.starttime;
}

static int proc_open(void *state, const sm_ctx *ctx, sm_opened *res)
{
    struct proc_state *s = state;
    char path[SM_PATH_MAX], link[32], abs[96];
    const char *trace;
    ssize_t n;
    int root, scanned = 0, count;
    uint64_t ticks;

    snprintf(s->sysroot, sizeof s->sysroot, "%s", ctx->sysroot);
    trace = getenv("SCOPEMETER_TRACE");
    s->trace = trace && strstr(trace, "proc");
    s->pids = ctx->pids;
    s->tck = sysconf(_SC_CLK_TCK);
    if (s->tck <= 0)
        s->tck = 100;
    s->page_kb = sysconf(_SC_PAGESIZE) > 0 ? (uint64_t)sysconf(_SC_PAGESIZE) / 1024 : 4;
    if (snprintf(path, sizeof path, "%s/proc/self", ctx->sysroot) >= (int)sizeof path)
        return -ENAMETOOLONG;
    n = readlink(path, link, sizeof link - 1);
    if (n < 0 || (link[n] = '\0', (root = entry_pid(link)) <= 0)) {
        sm__line(res->msg, sizeof res->msg, "process_*: /proc/self%s names no pid (%s); the "
                "process tree is not recorded", ctx->sysroot[0] ? " under SCOPEMETER_SYSROOT" : "",
                n < 0 ? strerror(errno) : "not a number");
        return SM_ABSENT; /* a fake /proc of a test without one */
    }
    s->trees[0] = (struct tree){.rank = SM_RANK_OWN, .pid = root};
    s->ntrees = 1;

    snprintf(abs, sizeof abs, "/proc/%d/task/%d/children", root, root);
    n = read_at(s, abs, s->buf, sizeof s->buf);
    s->children = n >= 0;
    if (!s->children)
        sm__line(res->msg, sizeof res->msg, "process_*: no /proc/PID/task/TID/children "
                "(CONFIG_PROC_CHILDREN): the tree is found by scanning /proc");
    snprintf(abs, sizeof abs, "/proc/%d/smaps_rollup", root);
    n = read_at(s, abs, s->buf, sizeof s->buf);
    s->rollup = n != -ENOENT;
    if (!s->rollup) {
        if (res->msg[0])
            sm__line_add(res->msg, sizeof res->msg, "; ");
        sm__line_add(res->msg, sizeof res->msg, "process_memory_megabytes: no "
                    "/proc/PID/smaps_rollup (kernel < 4.14): Rss summed instead of Pss (pages "
                    "shared by forked children count once per process)");
    }

    /* the first delta's base */
    walk(s, root, &scanned);
    sum_tree(s, &count, &ticks);
    s->trees[0].ticks = ticks;
    if (count == 0) {
        sm__line(res->msg, sizeof res->msg, "process_*: cannot read %s/proc/%d/stat; the "
                 "process tree is not recorded", ctx->sysroot, root);
        return -ENOENT;
    }
    s->trees[0].t = sm__now_mono();
    feed_pids(s);

    if (ctx->all_workers && ctx->rec_key && ctx->id.local_rank == 0 &&
        ctx->id.local_world_size > 1 && !ctx->id.invalid[0]) {
        snprintf(s->key, sizeof s->key, "%s", ctx->rec_key);
        for (int r = ctx->id.rank + 1; r < ctx->id.rank + ctx->id.local_world_size &&
                                       r < ctx->id.world_size && s->ntrees < TREES_MAX; r++)
            s->trees[s->ntrees++] = (struct tree){.rank = r};
        if (ctx->id.local_world_size - 1 > SIB_MAX)
            sm__log(SM_WARN, "process_*: %d local ranks; the trees of the first %d besides this "
                   "one are recorded", ctx->id.local_world_size, SIB_MAX);
    }
    return 0;
}

static void emit3(sm_points *out, int rank, int count, double mb, int mem_ok, double cpu,
                  int cpu_ok, const char *mem_src, const char *tree_src)
{
    sm__emit_rank(out, rank, "process_count", count, "count", tree_src, SM_AGG_MEAN);
    if (mem_ok)
        sm__emit_rank(out, rank, "process_memory_megabytes", mb, "MB", mem_src, SM_AGG_MEAN);
    if (cpu_ok)
        sm__emit_rank(out, rank, "process_cpu_utilization_percentage", cpu, "percent",
                     "/proc/PID/stat", SM_AGG_RATE);
}

static int proc_sample(void *state, sm_points *out, char *msg, size_t msglen)
{
    struct proc_state *s = state;
    const char *mem_src = s->rollup ? "/proc/PID/smaps_rollup" : "/proc/PID/status";
    const char *tree_src = s->children ? "/proc/PID/task/TID/children" : "/proc/PID/stat (ppid)";
    int baseline = s->samples++ == 0, scanned = 0, rc = 0;

    for (int i = 0; i < s->ntrees; i++) {
        struct tree *t = &s->trees[i];
        int count, mem_ok, cpu_ok, read_mem, tried, used;
        uint64_t ticks, kb;
        double now, cpu = 0, mb, cost = 0;
        sm__mest e = {0};

        if (t->rank != SM_RANK_OWN)
            find_sibling(s, t);
        if (t->pid <= 0) {
            if (t->recs > 0)
                recs_make(s, i, 0); /* a sibling that ended: its tree is read anew */
            if (baseline) /* the series exist from the start (see the top) */
                emit3(out, t->rank, 0, 0, 1, 0, 1, mem_src, tree_src);
            continue;
        }
        walk(s, t->pid, &scanned);
        sum_tree(s, &count, &ticks);
        now = sm__now_mono();
        /* VmRSS is as cheap as stat: read every sample; the baseline reads */
        read_mem = (s->rollup ? sm__mem_estimate(&t->mem, recs_at(s, i, &used), t->recs, s->cur,
                                                 s->n, s->samples, s->page_kb, now, &e)
                              : 1) || baseline;
        kb = 0;
        mem_ok = 0;
        tried = read_mem;
        if (tried) {
            double began = s->trace ? wall_s() : 0;

            cost = thread_cpu_s();
            read_mem = read_tree(s, i, now, &count, &ticks);
            cost = thread_cpu_s() - cost;
            if (s->trace)
                trace_read(t, began, cost, read_mem, &e, baseline, s->trace_file_kb);
        }
        if (read_mem) {
            kb = t->mem.kb;
            mem_ok = t->mem.counted > 0;
            if (sm__mem_read_end(&t->mem, cost, e.rss_kb) && s->rollup && !s->budget_said) {
                sm__log(SM_INFO, "process_memory_megabytes: reading smaps_rollup of the tree took "
                       "%.0f ms of CPU (the kernel walks its page tables); read at most every "
                       "%.0f s (%.2f%% of one core), the samples between estimate it from the "
                       "resident pages", cost * 1e3, cost / SM__MEM_BUDGET, SM__MEM_BUDGET * 100);
                s->budget_said = 1;
            }
        } else {
            if (tried) { /* a read that was not a base: its cost spaces the next */
                sm__mem_spent(&t->mem, now, cost);
                sm__mem_estimate(&t->mem, recs_at(s, i, &used), t->recs, s->cur, s->n, s->samples,
                                 s->page_kb, now, &e);
            }
            if (t->mem.ok && e.rss_kb > 0) {
                kb = e.kb; /* the estimate (proc_estimate.c MEM_ESTIMATE) */
                mem_ok = 1;
                if (s->trace)
                    trace_estimate(t, &e, now);
            }
        }
        now = sm__now_mono();
        if (count == 0) {
            if (t->rank == SM_RANK_OWN) {
                sm__line(msg, msglen, "cannot read %s/proc/%d/stat", s->sysroot, t->pid);
                rc = -ENOENT;
            } else {
                t->pid = 0; /* the sibling ended: found again when it binds again */
                t->t = 0;
                t->mem.t = 0; /* its next tree is read, not estimated */
                if (t->recs > 0)
                    recs_make(s, i, 0);
                if (baseline)
                    emit3(out, t->rank, 0, 0, 1, 0, 1, mem_src, tree_src);
            }
            continue;
        }
        if ((s->over || s->scan_over) && !s->cap_said) {
            sm__log(SM_WARN, "process_*: a process tree has more than %d processes%s; the rest is "
                   "not counted (said once)", TREE_MAX,
                   s->scan_over ? " or /proc more than 32768" : "");
            s->cap_said = 1;
        }
        cpu_ok = t->t > 0 && now > t->t;
        if (cpu_ok)
            cpu = 100.0 * (ticks > t->ticks ? (double)(ticks - t->ticks) : 0.0) /
                  (double)s->tck / (now - t->t);
        t->ticks = ticks;
        t->t = now;
        if (t->rank == SM_RANK_OWN)
            feed_pids(s);
        mb = (double)kb * 1024.0 / 1e6;
        emit3(out, t->rank, count, mb, mem_ok || baseline, cpu, cpu_ok || baseline, mem_src,
              tree_src);
        /* the peak tag: reads, and estimates held to their error (MEM_PEAK) */
        if (t->rank == SM_RANK_OWN && mem_ok && (read_mem || e.within) && mb > s->peak_mb) {
            s->peak_mb = mb;
            s->peak_n = count;
        }
    }
    return rc;
}

/* The tree has no limit to scale a step by (memory_at_peak's is 0.1 % of the
 * limit): the window tag is shipped again when the peak rose by max(1 MB,
 * 1 % of the peak last shipped).  That bounds the distinct texts the sink's
 * ring keeps for the run (docs/series.md, *Window tags*): 1 MB steps up to
 * 100 MB, then ln(1e4)/ln(1.01) = 926 steps up to 1 TB, ~1000 in all. */
#define PEAK_STEP_MB 1.0
#define PEAK_STEP_REL 0.01

static void proc_tags(void *state, int phase, sm_tags *out)
{
    struct proc_state *s = state;
    double step;

    if (phase == SM_TAGS_START || s->peak_n <= 0)
        return;
    if (phase == SM_TAGS_WINDOW && s->shipped_n > 0) {
        step = s->shipped_mb * PEAK_STEP_REL;
        if (s->peak_mb < s->shipped_mb + (step > PEAK_STEP_MB ? step : PEAK_STEP_MB))
            return;
    }
    /* a window tag too (docs/design.md §9): the training process killed by the
     * OOM killer never reaches stop, and this is what its tree held */
    sm__tag_add(out, "process_tree_peak", "processes=%d memory_mb=%.1f", s->peak_n, s->peak_mb);
    s->shipped_mb = s->peak_mb;
    s->shipped_n = s->peak_n;
}

static void proc_close(void *state)
{
    (void)state; /* no descriptor is kept: every read opens its file */
}

const sm_collector_ops sm__coll_proc = {
    .name = "process",
    .series = 3,
    .per_rank = true,
    .state_size = sizeof(struct proc_state),
    .open = proc_open,
    .sample = proc_sample,
    .tags = proc_tags,
    .close = proc_close,
};
