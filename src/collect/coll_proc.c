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
 *                                        estimate between reads (the last
 *                                        read moved by resident pages and
 *                                        page faults, MEM_ESTIMATE) may
 *                                        be wrong: the processes changed,
 *                                        resident moved or copy-on-write
 *                                        may have unshared > max(2 % of
 *                                        Pss, 4 MB), or 300 s passed
 *                                        (MEM_BUDGET, MEM_MOVE_REL below);
 *                                        never a smaps_rollup read per
 *                                        sample of a steady tree
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
    double mem_next;       /* no smaps_rollup read before this (monotonic s) */
    double mem_next_fast;  /* ... or before this when the tree changed (MEM_BUDGET_CHANGE) */
    double mem_next_doubt; /* ... or before this when an exit took an unknown share (MEM_DOUBT) */
    int mem_n;             /* processes in the tree at the last read */
    double mem_t;          /* when the last read was (monotonic s); 0: none yet */
    uint64_t mem_rss_kb;   /* the tree's resident kB at the last read (MEM_AT) */
    uint64_t mem_kb;       /* the tree's Pss kB the last read gave */
    uint64_t mem_flt;      /* the tree's faults (minflt + majflt) at the last read (MEM_AT) */
    uint64_t mem_room_kb;  /* what unsharing can still add to Pss (MEM_UNSHARE) */
    uint64_t mem_priv_kb;  /* the tree's Private_Clean + Private_Dirty at the last read */
    int mem_ok;            /* the last read counted some process: the estimate has a base */
    int recs;              /* its processes' records in proc_state.rec at the last read
                            * (MEM_SET; the trees' lie in tree order); -1: they did not fit */
};

/* One process at its tree's last read (MEM_SET). */
struct prec {
    int pid;
    int read;              /* its smaps_rollup was read: it is in the tree's mem_kb */
    int seen;              /* the sample that last found it in the tree */
    uint64_t start;        /* starttime: a reused pid is another process */
    uint64_t rss_kb, flt;  /* resident kB and faults where the read's walk passed (MEM_AT) */
    uint64_t priv_kb;      /* Private_Clean + Private_Dirty: what its exit takes away */
    uint64_t pss_kb;       /* Pss: its exit takes away at most this (MEM_DOUBT) */
    uint64_t room_kb;      /* what unsharing can still add to its Pss (MEM_UNSHARE) */
};

/* Reading smaps_rollup walks the page tables of every mapping under the
 * process's mmap read lock (fs/proc/task_mmu.c show_smaps_rollup): its cost
 * grows with resident memory, tens of ms per GB measured here.  The tree's
 * memory reads are kept within this share of one core: after a read that
 * cost T of CPU (at least MEM_SLOW: below that, every sample reads), the next
 * waits until T / MEM_BUDGET has passed.  The samples in between estimate the
 * tree's Pss from what /proc/PID/stat already gives for the CPU series, each
 * process's resident pages (field 24) and page faults (fields 10, 12), moved
 * from the last read (MEM_ESTIMATE): no extra read, no gap in the series.  0.09 % keeps the whole monitor
 * within issue 20's 0.1 % of one core at the 10 s default with a 4 GB tree
 * (bench/README.md table 9).  Docs: design.md §9. */
#define MEM_BUDGET 0.0009
#define MEM_SLOW 0.001
/* A tree whose set of processes changed (a fork: pages become shared; an
 * exit) is read again sooner, within 2 % of one core: the ratio of the last
 * read no longer describes it.  A steady tree stays within MEM_BUDGET. */
#define MEM_BUDGET_CHANGE 0.02
/* MEM_DOUBT: an exit takes away the process's private pages (MEM_SET) and
 * also the pages it shared only with processes that exited with it: pages
 * the parent copied (wrote) or freed after forking them, still mapped by the
 * workers alone (mapcount 2 among two workers, neither's Private).  No file
 * says which: smaps_rollup gives each process's sums, not who shares a page.
 * What an exit took is between its private pages and its Pss at the read;
 * when the exits' Pss − private passes max(2 % of Pss, 4 MB) the tree is read
 * at the next sample, within 10 % of one core (CI: 2 DataLoader workers of a
 * torch parent that ran the loader's loop after forking them took 9 MB more
 * than their private pages off a 317 MB tree, and the 2 % spacing kept the
 * estimate 7 MB high for seconds).  An exit is an event, not a state: a
 * DataLoader's workers end once an epoch. */
#define MEM_BUDGET_DOUBT 0.1
/* Past its spacing a tree is read only when the estimate may be wrong: in a
 * steady tree resident pages × the last ratio stays right, and a read would
 * only cost (a 190 MB interpreter: 5-7 ms, every window at 10 s before this
 * rule; bench/README.md table 9).  What moves Pss/resident:
 *   - the set of processes (a fork shares every page, an exit unshares):
 *     mem_n, with the sooner MEM_BUDGET_CHANGE spacing above;
 *   - memory mapped, touched or freed: resident pages move.  New private
 *     pages raise Pss by what they raise resident, the estimate by ratio ×
 *     that, so its error is at most the resident move: a move beyond
 *     MEM_MOVE_REL of the last Pss (the error a reader of the series can
 *     ignore), and at least MEM_MOVE_KB (an interpreter's allocator breathes
 *     by a few MB in a steady loop; below that the error is < 4 MB anyway);
 *   - copy-on-write breaking in forked children (a shared page becomes two
 *     private ones, resident unchanged, Pss up: DataLoader workers writing
 *     the parent's tensors or touching its objects' refcounts): resident
 *     pages cannot see it, the tree's page faults can (MEM_UNSHARE);
 *   - another process mapping the same file pages.  Slow drifts:
 *     MEM_MAX_AGE. */
#define MEM_MOVE_REL 0.02
#define MEM_MOVE_KB 4096
#define MEM_MAX_AGE 300.0
/* MEM_UNSHARE: unsharing a copy-on-write page is a write fault in the process that
 * writes (mm/memory.c do_wp_page → wp_page_copy; a shared transparent huge
 * page is split first and one 4 kB page copied, mm/huge_memory.c
 * do_huge_pmd_wp_page), counted in its minflt (/proc/PID/stat field 10,
 * summed over its threads: fs/proc/array.c do_task_stat).  Each adds one page
 * to the tree's Pss and nothing to its resident pages.  So between reads the
 * estimate adds the faults resident pages do not explain — per process,
 * Δfaults × page − its resident growth, at most what the last read said
 * unsharing could still add to it (Anonymous − Pss_Anon of its smaps_rollup,
 * Documentation/ABI/testing/procfs-smaps_rollup; a kernel without Pss_Anon:
 * resident − Pss) — and, beyond max(2 % of Pss, 4 MB) of those, reads the
 * tree again at the sooner MEM_BUDGET_CHANGE spacing.  Faults that are not
 * unsharing (pages mapped, touched and unmapped between two samples: a
 * DataLoader's batches in shared memory) look the same: the estimate is then
 * high by at most that room until the read corrects it.  No syscall is
 * added: the faults are in the stat line read anyway, the kB lines in the
 * smaps_rollup text read anyway. */
/* MEM_SET: processes come and go between reads.  A page counts once in the
 * tree's Pss however many of its processes map it (each mapper 1/mapcount,
 * Documentation/filesystems/proc.rst "Pss"), so a process that exits takes
 * away only its private pages (Private_Clean + Private_Dirty of its
 * smaps_rollup at the last read); those it shared stay, moved to the other
 * mappers' Pss.  Scaling its resident pages by the tree's Pss/resident did
 * not: DataLoader workers exiting took 137 MB too many off a 317 MB tree
 * (CI), 9 children of a 1 GB parent 911 MB.  A process forked since shares
 * every resident page with its parent: it adds what it faulted since (its
 * minflt and majflt start at 0, kernel/fork.c copy_mm), each a page it made
 * its own by writing or newly touched, at most its resident pages.  So the
 * estimate keeps, per process of the last read, its pid, start time,
 * resident pages, faults and private pages (TREE_MAX records over all
 * trees; a tree whose records do not fit is estimated as one process). */
/* MEM_ESTIMATE: between reads the tree's Pss is the last read's, plus each
 * process's resident growth counted whole (new resident pages are mostly
 * memory it allocated and touched: private, each a whole page of Pss;
 * scaling them by the last ratio made a 128 MB allocation after a fork read
 * as 32 MB), minus its resident shrink scaled by its last private/resident
 * (what it frees is as private as it was: a page it shared stays with the
 * others), plus its unsharing above, plus the processes forked and minus
 * those exited (MEM_SET).  Exact to the page for allocations, forks, exits
 * (those that took more are read again, MEM_DOUBT) and copy-on-write within
 * the tree; a move it gets wrong (pages shared with
 * a process outside the tree mapped, a new program's shared libraries, faults
 * that were not unsharing) is wrong by at most that move, and one beyond
 * max(2 % of Pss, 4 MB) is read again (MEM_MOVE_REL). */
/* MEM_AT: a read is not an instant.  The walk of a process's page tables
 * takes milliseconds per 100 MB (15 ms for 500 MB here), and a process that
 * touches memory meanwhile (an interpreter filling a 600 MB buffer: 20 MB
 * over one walk here) has its Pss counted where the walk passed, not where
 * its stat stood before the read.  The estimate moves from the read by
 * resident pages, so taking them from that stat counted the growth during
 * the walk twice (CI: 1056 MB for a 1013 MB tree, held until the next read
 * seconds later).  Each record's resident pages are the walk's own (the
 * rollup's Rss, the same walk as its Pss) kept between the stat before the
 * read and one after it: on a still process stat's counters win, which lag
 * the walk's sum by a few hundred kB.  Its faults at the walk are those
 * before plus a page for each page it grew by up to there (at most those
 * after): each new page a fault, so the growth after the walk explains the
 * faults after it, which would otherwise pass for unsharing (up to the room
 * of the pages it shares).  Unsharing during the walk itself may be counted
 * or missed, by at most what unshared in those milliseconds.  One stat read
 * more per process per read, within the read's measured cost. */

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
    char key[256];         /* the recording key (siblings' lock names) */
    int children;          /* 1: task/TID/children, 0: the ppid scan */
    int rollup;            /* 1: Pss from smaps_rollup, 0: VmRSS from status */
    long tck;
    uint64_t page_kb;      /* /proc/PID/stat's rss is in pages */
    int samples;           /* samples taken (0: the next is the baseline) */
    int cap_said, mem_said, budget_said;
    int ntrees;
    struct tree trees[TREES_MAX];
    /* the tree being walked, and what each one's stat said (alive: it was read) */
    int n, over;
    int list[TREE_MAX];
    struct { uint64_t start, rss_kb, flt; int alive; } cur[TREE_MAX];
    /* the processes of every tree at its last read, each tree's sorted by pid */
    struct prec rec[TREE_MAX];
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

/* The error a reader of the series can ignore (MEM_MOVE_REL), in kB. */
static double mem_slack(const struct tree *t)
{
    double limit = MEM_MOVE_REL * (double)t->mem_kb;

    return limit > MEM_MOVE_KB ? limit : MEM_MOVE_KB;
}

/* The estimate of tree t may be wrong (see MEM_MOVE_REL): read it again.
 * changed: a process came or went since the read. */
static int mem_stale(const struct tree *t, uint64_t rss_kb, double now, int changed)
{
    uint64_t move = rss_kb > t->mem_rss_kb ? rss_kb - t->mem_rss_kb : t->mem_rss_kb - rss_kb;

    return changed || (double)move > mem_slack(t) || now - t->mem_t >= MEM_MAX_AGE;
}

static int by_pid(const void *a, const void *b)
{
    int x = ((const struct prec *)a)->pid, y = ((const struct prec *)b)->pid;

    return (x > y) - (x < y);
}

/* Where tree ti's records start in s->rec: after the earlier trees'. */
static struct prec *recs_at(struct proc_state *s, int ti, int *used)
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
static struct prec *recs_make(struct proc_state *s, int ti, int n)
{
    struct tree *t = &s->trees[ti];
    int used, have = t->recs > 0 ? t->recs : 0;
    struct prec *r = recs_at(s, ti, &used);
    size_t tail = (size_t)(used - (int)(r - s->rec) - have);

    if (used - have + n > TREE_MAX)
        n = -1;
    memmove(r + (n > 0 ? n : 0), r + have, tail * sizeof *r);
    t->recs = n;
    return n >= 0 ? r : NULL;
}

/* What one process (or a tree without records, as one) moved the tree's Pss
 * by since the read (MEM_ESTIMATE): resident growth whole, a shrink as
 * private as it was, and the faults the growth does not explain, within its
 * room (MEM_UNSHARE), which are added to *unshared too. */
static double moved(const struct proc_state *s, const struct prec *r, uint64_t rss_kb,
                    uint64_t flt, uint64_t *unshared)
{
    uint64_t f = flt > r->flt ? (flt - r->flt) * s->page_kb : 0;
    double d;

    if (rss_kb >= r->rss_kb) {
        d = (double)(rss_kb - r->rss_kb);
        f = f > rss_kb - r->rss_kb ? f - (rss_kb - r->rss_kb) : 0;
    } else { /* stat's resident and the rollup's private may disagree by a page */
        d = -(double)(r->rss_kb - rss_kb) *
            (r->priv_kb < r->rss_kb ? (double)r->priv_kb / (double)r->rss_kb : 1.0);
    }
    f = f < r->room_kb ? f : r->room_kb;
    *unshared += f;
    return d + (double)f;
}

/* Tree ti's Pss between reads, in kB (MEM_ESTIMATE, MEM_SET), from what
 * sum_tree read of the walked processes; *changed when one came or went
 * since the read, *unshared what their faults added (MEM_UNSHARE), *doubt
 * what the exits may have taken beyond their private pages (MEM_DOUBT).
 * Pss is never above resident. */
static uint64_t mem_estimate(struct proc_state *s, int ti, uint64_t rss_kb, uint64_t flt,
                             int *changed, uint64_t *unshared, uint64_t *doubt)
{
    struct tree *t = &s->trees[ti];
    double est = (double)t->mem_kb;
    int used;
    struct prec *rec = recs_at(s, ti, &used);

    *unshared = 0;
    *doubt = 0;
    if (t->recs < 0) { /* no records: the tree as one process, a change by its count */
        struct prec one = {.rss_kb = t->mem_rss_kb, .flt = t->mem_flt,
                           .priv_kb = t->mem_priv_kb, .room_kb = t->mem_room_kb};
        *changed = s->n != t->mem_n;
        est += moved(s, &one, rss_kb, flt, unshared);
        return est <= 0 ? 0 : est >= (double)rss_kb ? rss_kb : (uint64_t)est;
    }
    *changed = 0;
    for (int i = 0; i < s->n; i++) {
        struct prec key = {.pid = s->list[i]}, *r;

        if (!s->cur[i].alive)
            continue;
        r = bsearch(&key, rec, (size_t)t->recs, sizeof *rec, by_pid);
        if (r && r->start == s->cur[i].start) {
            r->seen = s->samples;
            if (r->read)
                est += moved(s, r, s->cur[i].rss_kb, s->cur[i].flt, unshared);
            continue;
        }
        /* forked since the read (a reused pid too): what it faulted since */
        *changed = 1;
        est += (double)(s->cur[i].flt * s->page_kb < s->cur[i].rss_kb
                            ? s->cur[i].flt * s->page_kb : s->cur[i].rss_kb);
    }
    for (int j = 0; j < t->recs; j++)
        if (rec[j].seen != s->samples) { /* exited: its private pages go */
            *changed = 1;
            if (rec[j].read) {
                est -= (double)rec[j].priv_kb;
                *doubt += rec[j].pss_kb > rec[j].priv_kb ? rec[j].pss_kb - rec[j].priv_kb : 0;
            }
        }
    return est <= 0 ? 0 : est >= (double)rss_kb ? rss_kb : (uint64_t)est;
}

/* One process's memory in kB: Pss, or VmRSS without smaps_rollup; with
 * smaps_rollup also its private pages (MEM_SET), the room unsharing has
 * (MEM_UNSHARE) and the resident pages the walk saw (MEM_AT; UINT64_MAX
 * without the line).  -errno when unreadable (gone: ENOENT/ESRCH; another
 * user's: EACCES). */
static int proc_kb(struct proc_state *s, int pid, uint64_t *kb, uint64_t *room, uint64_t *priv,
                   uint64_t *rss)
{
    uint64_t anon, pss_anon, clean, dirty;
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
     * than the split of Pss) leaves room UINT64_MAX, the caller then takes
     * resident − Pss */
    if (s->rollup && (sm__parse_kb(s->buf, (size_t)n, "Anonymous:", &anon) < 0 ||
                      sm__parse_kb(s->buf, (size_t)n, "Pss_Anon:", &pss_anon) < 0))
        *room = UINT64_MAX;
    else if (s->rollup)
        *room = anon > pss_anon ? anon - pss_anon : 0;
    /* private pages: without the two lines, Pss (what is freed is then as
     * shared as the process was) */
    if (s->rollup && (sm__parse_kb(s->buf, (size_t)n, "Private_Clean:", &clean) < 0 ||
                      sm__parse_kb(s->buf, (size_t)n, "Private_Dirty:", &dirty) < 0))
        *priv = UINT64_MAX;
    else if (s->rollup)
        *priv = clean + dirty;
    n = sm__parse_kb(s->buf, (size_t)n, s->rollup ? "Pss:" : "VmRSS:", kb);
    if (n == -ENOENT && !s->rollup) { /* status of a zombie: no VmRSS line */
        *kb = 0;
        return 0;
    }
    if (*priv == UINT64_MAX)
        *priv = *kb;
    return (int)n;
}

/* Sums over the walked tree from each process's stat: the processes still
 * alive, their CPU ticks and their resident pages (what the memory estimate
 * and its staleness test need, read every sample anyway). */
static void sum_tree(struct proc_state *s, int *count, uint64_t *ticks, uint64_t *rss_kb,
                     uint64_t *flt)
{
    int live = 0;

    *ticks = 0;
    *rss_kb = 0;
    *flt = 0;
    for (int i = 0; i < s->n; i++) {
        sm_pid_stat st;

        s->cur[i].alive = read_pid_stat(s, s->list[i], &st) == 0;
        if (!s->cur[i].alive)
            continue; /* exited since the walk */
        live++;
        s->cur[i].start = st.starttime;
        s->cur[i].rss_kb = st.rss_pages * s->page_kb;
        s->cur[i].flt = st.minflt + st.majflt;
        *ticks += st.utime + st.stime + st.cutime + st.cstime;
        *rss_kb += s->cur[i].rss_kb;
        *flt += s->cur[i].flt;
    }
    *count = live;
}

/* Where process i was when the walk of its smaps_rollup (just read, rss: the
 * resident pages it saw) passed (MEM_AT): *rss_kb the resident pages between
 * its stat before and after the read nearest rss, *flt its faults before
 * plus a page for each it grew by up to there, at most its faults after. */
static void read_at_walk(struct proc_state *s, int i, uint64_t rss, uint64_t *rss_kb,
                         uint64_t *flt)
{
    uint64_t lo = s->cur[i].rss_kb, hi = lo, grew;
    sm_pid_stat st;

    *rss_kb = lo;
    *flt = s->cur[i].flt;
    if (rss == UINT64_MAX || read_pid_stat(s, s->list[i], &st) != 0 ||
        st.starttime != s->cur[i].start)
        return; /* exited during the read: its next sample says so */
    if (st.rss_pages * s->page_kb < lo)
        lo = st.rss_pages * s->page_kb;
    else
        hi = st.rss_pages * s->page_kb;
    *rss_kb = rss < lo ? lo : rss > hi ? hi : rss;
    grew = *rss_kb > s->cur[i].rss_kb ? (*rss_kb - s->cur[i].rss_kb) / s->page_kb : 0;
    *flt = *flt + grew < st.minflt + st.majflt ? *flt + grew : st.minflt + st.majflt;
}

/* Tree ti's memory read (Pss, or VmRSS without smaps_rollup) into its
 * mem_* and, with smaps_rollup, each process's record (MEM_SET); *rss_kb and
 * *flt the tree's resident pages and faults where its walks passed (MEM_AT).
 * *mem_ok is 0 when no process's memory could be read; the first unreadable
 * one is said once. */
static void sum_mem(struct proc_state *s, int ti, uint64_t *kb, int *mem_ok, uint64_t *rss_kb,
                    uint64_t *flt)
{
    struct tree *t = &s->trees[ti];
    struct prec *rec = NULL;
    int mem_n = 0, m = 0;

    if (s->rollup) {
        for (int i = 0; i < s->n; i++)
            m += s->cur[i].alive;
        rec = recs_make(s, ti, m);
        m = 0;
    }
    *kb = 0;
    *rss_kb = 0;
    *flt = 0;
    t->mem_room_kb = 0;
    t->mem_priv_kb = 0;
    for (int i = 0; i < s->n; i++) {
        uint64_t k = 0, r = 0, p = 0, at = UINT64_MAX, rss = s->cur[i].rss_kb, f = s->cur[i].flt;
        int rc;

        if (!s->cur[i].alive)
            continue; /* exited since the walk */
        rc = proc_kb(s, s->list[i], &k, &r, &p, &at);
        if (rc == 0) {
            if (s->rollup)
                read_at_walk(s, i, at, &rss, &f);
            if (r == UINT64_MAX)
                r = rss > k ? rss - k : 0;
            *kb += k;
            t->mem_room_kb += r;
            t->mem_priv_kb += p;
            mem_n++;
        }
        *rss_kb += rss;
        *flt += f;
        if (rec && rc != -ENOENT && rc != -ESRCH) /* unreadable: found, not counted */
            rec[m++] = (struct prec){.pid = s->list[i], .read = rc == 0, .seen = s->samples,
                                     .start = s->cur[i].start, .rss_kb = rss, .flt = f,
                                     .priv_kb = p, .pss_kb = k, .room_kb = r};
        if (rc != 0 && rc != -ENOENT && rc != -ESRCH && !s->mem_said) {
            sm__log(SM_WARN, "process_memory_megabytes: cannot read %s of pid %d (%s); that "
                   "process's memory is not counted (said once)",
                   s->rollup ? "smaps_rollup" : "status", s->list[i], strerror(-rc));
            s->mem_said = 1;
        }
    }
    if (rec) {
        recs_make(s, ti, m); /* fewer: those gone since the walk */
        qsort(rec, (size_t)m, sizeof *rec, by_pid);
    }
    *mem_ok = mem_n > 0;
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
        t->mem_t = 0; /* its next tree is read, not estimated */
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
    ssize_t n;
    int root, scanned = 0, count;
    uint64_t ticks, rss_kb, flt;

    snprintf(s->sysroot, sizeof s->sysroot, "%s", ctx->sysroot);
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
    sum_tree(s, &count, &ticks, &rss_kb, &flt);
    s->trees[0].ticks = ticks;
    if (count == 0) {
        sm__line(res->msg, sizeof res->msg, "process_*: cannot read %s/proc/%d/stat; the "
                 "process tree is not recorded", ctx->sysroot, root);
        return -ENOENT;
    }
    s->trees[0].t = sm__now_mono();

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
        int count, mem_ok, cpu_ok, read_mem, changed = 0;
        uint64_t ticks, kb, rss_kb, flt, est = 0, unshared = 0, doubt = 0;
        double now, cpu = 0, mb, cost = 0;

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
        sum_tree(s, &count, &ticks, &rss_kb, &flt);
        now = sm__now_mono();
        if (s->rollup && t->mem_t > 0)
            est = mem_estimate(s, i, rss_kb, flt, &changed, &unshared, &doubt);
        read_mem = !s->rollup || baseline || t->mem_t <= 0 || /* VmRSS: as cheap as stat */
                   (now >= t->mem_next && mem_stale(t, rss_kb, now, changed)) ||
                   ((changed || (double)unshared > mem_slack(t)) && now >= t->mem_next_fast) ||
                   ((double)doubt > mem_slack(t) && now >= t->mem_next_doubt);
        kb = 0;
        mem_ok = 0;
        if (read_mem) {
            cost = thread_cpu_s();
            sum_mem(s, i, &kb, &mem_ok, &t->mem_rss_kb, &t->mem_flt);
            cost = thread_cpu_s() - cost;
            t->mem_n = s->n;
            t->mem_t = now;
            t->mem_kb = kb;
            t->mem_ok = mem_ok && rss_kb > 0;
        } else if (s->rollup && t->mem_ok && rss_kb > 0) {
            kb = est; /* the estimate (MEM_ESTIMATE) */
            mem_ok = 1;
        }
        if (read_mem && s->rollup && cost >= MEM_SLOW) {
            t->mem_next = now + cost / MEM_BUDGET;
            t->mem_next_fast = now + cost / MEM_BUDGET_CHANGE;
            t->mem_next_doubt = now + cost / MEM_BUDGET_DOUBT;
            if (!s->budget_said) {
                sm__log(SM_INFO, "process_memory_megabytes: reading smaps_rollup of the tree took "
                       "%.0f ms of CPU (the kernel walks its page tables); read at most every "
                       "%.0f s (%.2f%% of one core), the samples between estimate it from the "
                       "resident pages", cost * 1e3, cost / MEM_BUDGET, MEM_BUDGET * 100);
                s->budget_said = 1;
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
                t->mem_t = 0; /* its next tree is read, not estimated */
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
        mb = (double)kb * 1024.0 / 1e6;
        emit3(out, t->rank, count, mb, mem_ok || baseline, cpu, cpu_ok || baseline, mem_src,
              tree_src);
        if (t->rank == SM_RANK_OWN && mem_ok && mb > s->peak_mb) {
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
