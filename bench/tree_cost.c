/*
 * tree_cost.c — what the process-tree collector (src/collect/coll_proc.c) costs per
 * sample for a tree of N processes holding M MB, against the floor of
 * reading the same files, and what a full sample costs with and without it
 * (issue 20, bench/README.md table 9).
 *
 * The tree: this process maps SHARED MB of private anonymous memory and
 * touches it, forks N-1 children (which share those pages copy-on-write:
 * Pss splits them), then every process maps and touches its own
 * (M - SHARED) / N MB.  Pages are the host's default (transparent huge pages
 * only where THP is "always"; the line "thp:" says which).
 *
 * Variants, timed interleaved per round (thread CPU time), median of rounds:
 *   floor, with memory   open/read/close of what the collector reads: for
 *                        every process /proc/PID/task (getdents), each
 *                        thread's children, stat and smaps_rollup
 *   floor, no memory     the same without smaps_rollup
 *   collector, memory    sm__coll_proc's sample on a freshly opened state
 *                        (its first sample always reads memory; the open
 *                        is not timed)
 *   collector, count+CPU the samples in between memory reads (the 2 % rate
 *                        limit, design.md §9, holds them)
 *   full sample          sm__collset_sample(): every collector, process
 *                        included, with its rate limit as the monitor runs it
 *   without process      the same collectors but process: today's sample
 *
 *   bench/tree_cost [--procs N] [--mb M] [--shared-mb S] [--rounds R] [--iters I]
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "internal.h"

#define MAXP 64

static char buf[1 << 16];
static int pids[MAXP], npids;

static void touch(char *p, size_t len)
{
    for (size_t i = 0; i < len; i += 4096)
        p[i] = (char)(i >> 12 | 1);
}

static char *map_touched(size_t mb)
{
    size_t len = mb << 20;
    char *p = mmap(NULL, len ? len : 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);

    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    touch(p, len);
    return p;
}

static void read_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return;
    while (read(fd, buf, sizeof buf) > 0)
        ;
    close(fd);
}

/* the bare reads of the collector's files, nothing parsed */
static void floor_once(int mem)
{
    char path[320];

    for (int i = 0; i < npids; i++) {
        DIR *d;
        struct dirent *e;

        snprintf(path, sizeof path, "/proc/%d/task", pids[i]);
        d = opendir(path);
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            snprintf(path, sizeof path, "/proc/%d/task/%s/children", pids[i], e->d_name);
            read_file(path);
        }
        if (d)
            closedir(d);
        snprintf(path, sizeof path, "/proc/%d/stat", pids[i]);
        read_file(path);
        if (mem) {
            snprintf(path, sizeof path, "/proc/%d/smaps_rollup", pids[i]);
            read_file(path);
        }
    }
}

int main(int argc, char **argv)
{
    int procs = 9, rounds = 5, iters = 3, ready[2];
    size_t mb = 4096, shared = 512;
    sm_ctx ctx;
    sm_collset set;
    sm_notes notes = {0};
    static sm_points pts;
    static const char *names[6] = {"floor, with memory", "floor, no memory",
                                   "collector, memory", "collector, count+CPU",
                                   "full sample", "without process"};
    double *v[6];

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--procs") == 0)
            procs = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--mb") == 0)
            mb = (size_t)atol(argv[i + 1]);
        else if (strcmp(argv[i], "--shared-mb") == 0)
            shared = (size_t)atol(argv[i + 1]);
        else if (strcmp(argv[i], "--rounds") == 0)
            rounds = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--iters") == 0)
            iters = atoi(argv[i + 1]);
    }
    if (procs < 1 || procs > MAXP || rounds < 1 || iters < 1 || shared > mb) {
        fprintf(stderr, "usage: tree_cost [--procs N] [--mb M] [--shared-mb S] [--rounds R] "
                        "[--iters I]\n");
        return 2;
    }
    map_touched(shared);
    if (pipe(ready) < 0)
        return 1;
    pids[npids++] = getpid();
    for (int i = 1; i < procs; i++) {
        pid_t pid = fork();
        if (pid < 0)
            return 1;
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            map_touched((mb - shared) / (size_t)procs);
            if (write(ready[1], "x", 1) != 1)
                _exit(1);
            for (;;)
                pause();
        }
        pids[npids++] = pid;
    }
    map_touched((mb - shared) / (size_t)procs);
    for (int i = 1; i < procs; i++)
        if (read(ready[0], buf, 1) != 1)
            return 1;

    if (sm__ctx_init(&ctx) < 0 || sm__collset_open(&set, &ctx, &notes) < 0)
        return 1;
    for (int k = 0; k < 6; k++)
        v[k] = calloc((size_t)rounds, sizeof(double));
    {
        char line[256];
        int fd = open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY);
        ssize_t n = fd >= 0 ? read(fd, line, sizeof line - 1) : -1;
        line[n > 0 ? n - 1 : 0] = '\0';
        if (fd >= 0)
            close(fd);
        printf("tree: %d processes, %zu MB (%zu MB mapped before the forks, shared), thp: %s\n",
               procs, mb, shared, n > 0 ? line : "unknown");
    }
    for (int r = 0; r < rounds; r++) {
        double c0, sum[6] = {0};
        for (int i = 0; i < iters; i++) {
            char msg[300];
            void *st = sm__zalloc(sm__coll_proc.state_size);
            sm_opened res = {0};

            c0 = cpu_now();
            floor_once(1);
            sum[0] += cpu_now() - c0;
            c0 = cpu_now();
            floor_once(0);
            sum[1] += cpu_now() - c0;
            if (!st || sm__coll_proc.open(st, &ctx, &res) != 0)
                return 1;
            pts.n = 0;
            c0 = cpu_now();
            sm__coll_proc.sample(st, &pts, msg, sizeof msg); /* the first: memory read */
            sum[2] += cpu_now() - c0;
            pts.n = 0;
            c0 = cpu_now();
            sm__coll_proc.sample(st, &pts, msg, sizeof msg); /* held by the rate limit */
            sum[3] += cpu_now() - c0;
            if (pts.n != 3) /* count, CPU and the estimated memory (no smaps_rollup read) */
                printf("note: a sample between memory reads had %zu points\n", pts.n);
            sm__coll_proc.close(st);
            sm__zfree(st);
            pts.n = 0;
            c0 = cpu_now();
            sm__collset_sample(&set, &pts);
            sum[4] += cpu_now() - c0;
            pts.n = 0;
            c0 = cpu_now();
            for (size_t k = 0; k < set.n; k++)
                if (set.c[k].ops != &sm__coll_proc)
                    set.c[k].ops->sample(set.c[k].state, &pts, msg, sizeof msg);
            sum[5] += cpu_now() - c0;
        }
        for (int k = 0; k < 6; k++)
            v[k][r] = sum[k] / iters * 1e3;
    }
    printf("median of %d rounds x %d (ms per sample, thread CPU):\n", rounds, iters);
    for (int k = 0; k < 6; k++) {
        qsort(v[k], (size_t)rounds, sizeof(double), cmp_double);
        printf("%-22s %10.4f %10.4f %10.4f\n", names[k], v[k][rounds / 2], v[k][0],
               v[k][rounds - 1]);
    }
    sm__collset_close(&set);
    for (int i = 1; i < npids; i++)
        kill(pids[i], SIGKILL);
    while (wait(NULL) > 0)
        ;
    return 0;
}
