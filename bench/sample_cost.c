/*
 * sample_cost.c — what one full sample costs against the floor of reading the
 * same kernel files.
 *
 * The floor is measured on exactly the descriptors the collectors keep open:
 * after opening the collectors, every fd they hold is found in /proc/self/fd,
 * and the floor re-reads each with pread(fd, buf, n, 0) (the first 1023 bytes
 * of /proc/stat, as the collector reads; every other file to EOF) plus one
 * statvfs("/"), parsing nothing.  The sample is sm__collset_sample(): the same
 * reads plus parsing, arithmetic and emitting points.
 *
 * Both are timed interleaved in rounds (CPU time of this thread, and wall
 * time), and the median round is reported with the ratio computed within the
 * run, so machine noise hits both alike.
 *
 *   bench/sample_cost [--rounds R] [--iters N]
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "internal.h"

#define MAX_FDS 64

struct floor_fd {
    int fd;
    size_t len; /* bytes to read per pread */
    char path[256];
};

/* The descriptors opened between two snapshots of /proc/self/fd. */
static int list_fds(int *fds, int max)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;

    if (!d)
        return -errno;
    while ((e = readdir(d)) && n < max) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] == '.' || fd <= 2 || fd == dirfd(d))
            continue;
        fds[n++] = fd;
    }
    closedir(d);
    return n;
}

static int contains(const int *v, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

static char buf[1 << 16];

static void floor_once(const struct floor_fd *f, int n, const char *root)
{
    struct statvfs sv;

    for (int i = 0; i < n; i++) {
        size_t len = f[i].len, off = 0;
        ssize_t r;
        do {
            r = pread(f[i].fd, buf, len ? len : sizeof buf, (off_t)off);
            off += r > 0 ? (size_t)r : 0;
        } while (!f[i].len && r > 0);
    }
    statvfs(root, &sv);
}

int main(int argc, char **argv)
{
    int rounds = 31, iters = 2000, before[MAX_FDS], after[MAX_FDS], nb, na, nf = 0;
    struct floor_fd ff[MAX_FDS];
    sm_ctx ctx;
    sm_collset set;
    sm_notes notes = {0};
    static sm_points pts;
    char root[SM_PATH_MAX];
    double *fl_cpu, *sa_cpu, *fl_wall, *sa_wall;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--rounds") == 0)
            rounds = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--iters") == 0)
            iters = atoi(argv[i + 1]);
    }
    if (rounds < 1 || iters < 1) {
        fprintf(stderr, "usage: sample_cost [--rounds R] [--iters N]\n");
        return 2;
    }
    if (sm__ctx_init(&ctx) < 0 || sm__path(&ctx, "/", root, sizeof root) < 0)
        return 1;
    nb = list_fds(before, MAX_FDS);
    if (sm__collset_open(&set, &ctx, &notes) < 0)
        return 1;
    na = list_fds(after, MAX_FDS);
    for (int i = 0; i < na; i++) {
        char link[64];
        ssize_t l;
        if (contains(before, nb, after[i]))
            continue;
        ff[nf].fd = after[i];
        snprintf(link, sizeof link, "/proc/self/fd/%d", after[i]);
        l = readlink(link, ff[nf].path, sizeof ff[nf].path - 1);
        ff[nf].path[l > 0 ? l : 0] = '\0';
        /* the collector reads only the first line of /proc/stat */
        ff[nf].len = strcmp(ff[nf].path, "/proc/stat") == 0 ? 1023 : 0;
        nf++;
    }

    fl_cpu = calloc((size_t)rounds, sizeof(double));
    sa_cpu = calloc((size_t)rounds, sizeof(double));
    fl_wall = calloc((size_t)rounds, sizeof(double));
    sa_wall = calloc((size_t)rounds, sizeof(double));
    if (!fl_cpu || !sa_cpu || !fl_wall || !sa_wall)
        return 1;

    for (int w = 0; w < iters / 10 + 1; w++) { /* warm caches */
        floor_once(ff, nf, root);
        pts.n = 0;
        sm__collset_sample(&set, &pts);
    }
    for (int r = 0; r < rounds; r++) {
        double c0 = now(CLOCK_THREAD_CPUTIME_ID), w0 = now(CLOCK_MONOTONIC);
        for (int i = 0; i < iters; i++)
            floor_once(ff, nf, root);
        double c1 = now(CLOCK_THREAD_CPUTIME_ID), w1 = now(CLOCK_MONOTONIC);
        for (int i = 0; i < iters; i++) {
            pts.n = 0;
            sm__collset_sample(&set, &pts);
        }
        double c2 = now(CLOCK_THREAD_CPUTIME_ID), w2 = now(CLOCK_MONOTONIC);
        fl_cpu[r] = (c1 - c0) / iters * 1e6;
        sa_cpu[r] = (c2 - c1) / iters * 1e6;
        fl_wall[r] = (w1 - w0) / iters * 1e6;
        sa_wall[r] = (w2 - w1) / iters * 1e6;
    }
    double ratio_cpu[rounds];
    for (int r = 0; r < rounds; r++)
        ratio_cpu[r] = sa_cpu[r] / fl_cpu[r];
    qsort(fl_cpu, (size_t)rounds, sizeof(double), cmp_double);
    qsort(sa_cpu, (size_t)rounds, sizeof(double), cmp_double);
    qsort(fl_wall, (size_t)rounds, sizeof(double), cmp_double);
    qsort(sa_wall, (size_t)rounds, sizeof(double), cmp_double);
    qsort(ratio_cpu, (size_t)rounds, sizeof(double), cmp_double);

    printf("files read (%d descriptors kept open by the collectors, plus statvfs(\"/\")):\n", nf);
    for (int i = 0; i < nf; i++)
        printf("  %s%s\n", ff[i].path, ff[i].len ? " (first 1023 bytes)" : "");
    printf("series per sample: %zu\n", pts.n);
    printf("%-34s %10s %10s\n", "median of rounds (us per sample)", "cpu", "wall");
    printf("%-34s %10.2f %10.2f\n", "floor: pread kept fds + statvfs", fl_cpu[rounds / 2],
           fl_wall[rounds / 2]);
    printf("%-34s %10.2f %10.2f\n", "scopemeter: full sample", sa_cpu[rounds / 2],
           sa_wall[rounds / 2]);
    printf("ratio scopemeter/floor (cpu): median %.3f, p10 %.3f, p90 %.3f  (%d rounds x %d)\n",
           ratio_cpu[rounds / 2], ratio_cpu[rounds / 10], ratio_cpu[rounds * 9 / 10], rounds,
           iters);
    sm__collset_close(&set);
    free(fl_cpu);
    free(sa_cpu);
    free(fl_wall);
    free(sa_wall);
    return 0;
}
