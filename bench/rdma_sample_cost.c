/*
 * rdma_sample_cost.c — what the RDMA read adds to a sample (issue 47 item 2):
 * the RDMA collector's sample over N InfiniBand ports against today's full
 * sample of this machine, timed in the same run.
 *
 * The ports are N copies of the fixture HCA tests/fixtures/rdma-k8s-mlx5-ib's
 * mlx5_0 in a temporary sysroot whose /dev is devtmpfs (every device), so
 * the reads are preads of regular files: the collector's own cost (two
 * kept descriptors per port, parsing, sums, emitting).  The kernel's cost on
 * an HCA, a PMA MAD to the firmware per counter file read
 * (drivers/infiniband/core/sysfs.c, get_perf_mad), is not in it: no HCA
 * here.  Today's sample is sm__collset_sample() on this machine (no RDMA
 * device: the RDMA row is absent).  Alternating rounds of thread CPU time,
 * the median round and the ratio within each round reported.
 *
 *   bench/rdma_sample_cost --fixtures tests/fixtures [--ports N] [--rounds R] [--iters K]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "internal.h"

/* N copies of the fixture HCA under root, /dev a devtmpfs. */
static int make_root(const char *fixtures, const char *root, int ports)
{
    char cmd[8192];
    FILE *f;

    snprintf(cmd, sizeof cmd, "mkdir -p '%s/sys/class/infiniband' '%s/proc/self'", root, root);
    if (system(cmd) != 0)
        return -1;
    for (int i = 0; i < ports; i++) {
        snprintf(cmd, sizeof cmd,
                 "cp -rL '%s/rdma-k8s-mlx5-ib/sys/class/infiniband/mlx5_0' "
                 "'%s/sys/class/infiniband/mlx5_%d'", fixtures, root, i);
        if (system(cmd) != 0)
            return -1;
    }
    snprintf(cmd, sizeof cmd, "%s/proc/self/mountinfo", root);
    f = fopen(cmd, "w");
    if (!f)
        return -1;
    fputs("25 1 0:6 / /dev rw,nosuid,relatime shared:2 - devtmpfs udev rw\n", f);
    return fclose(f);
}

int main(int argc, char **argv)
{
    const char *fixtures = NULL;
    int ports = 8, rounds = 9, iters = 5000, rc = 1;
    char root[] = "/tmp/rdma_sample_cost.XXXXXX", cmd[200];
    sm_ctx real, fx;
    sm_collset set;
    sm_notes notes = {0};
    sm_opened res;
    static sm_points pts;
    void *rdma = NULL;
    double *today = NULL, *with = NULL, *ratio = NULL;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--fixtures") == 0)
            fixtures = argv[i + 1];
        else if (strcmp(argv[i], "--ports") == 0)
            ports = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--rounds") == 0)
            rounds = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--iters") == 0)
            iters = atoi(argv[i + 1]);
    }
    if (!fixtures || ports < 1 || ports > 32 || rounds < 1 || iters < 1) {
        fprintf(stderr, "usage: rdma_sample_cost --fixtures DIR [--ports 1..32] [--rounds R] "
                "[--iters K]\n");
        return 2;
    }
    if (!mkdtemp(root) || make_root(fixtures, root, ports) < 0) {
        fprintf(stderr, "cannot lay out %d ports under %s\n", ports, root);
        goto out;
    }
    unsetenv("SCOPEMETER_SYSROOT");
    if (sm__ctx_init(&real) < 0 || sm__collset_open(&set, &real, &notes) < 0)
        goto out;
    memset(&fx, 0, sizeof fx);
    snprintf(fx.sysroot, sizeof fx.sysroot, "%s", root);
    memset(&res, 0, sizeof res);
    rdma = sm__zalloc(sm__coll_rdma.state_size);
    if (!rdma || sm__coll_rdma.open(rdma, &fx, &res) != 0) {
        fprintf(stderr, "rdma collector did not open: %s\n", res.msg);
        goto out_set;
    }
    today = calloc((size_t)rounds, sizeof(double));
    with = calloc((size_t)rounds, sizeof(double));
    ratio = calloc((size_t)rounds, sizeof(double));
    if (!today || !with || !ratio)
        goto out_rdma;
    for (int w = 0; w < iters / 10 + 1; w++) { /* warm caches */
        pts.n = 0;
        sm__collset_sample(&set, &pts);
        sm__coll_rdma.sample(rdma, &pts, cmd, sizeof cmd);
    }
    for (int r = 0; r < rounds; r++) {
        double c0 = cpu_now(), c1, c2;
        for (int i = 0; i < iters; i++) {
            pts.n = 0;
            sm__collset_sample(&set, &pts);
        }
        c1 = cpu_now();
        for (int i = 0; i < iters; i++) {
            pts.n = 0;
            sm__coll_rdma.sample(rdma, &pts, cmd, sizeof cmd);
        }
        c2 = cpu_now();
        today[r] = (c1 - c0) / iters * 1e6;
        with[r] = (c2 - c1) / iters * 1e6;
        ratio[r] = with[r] / today[r];
    }
    pts.n = 0;
    sm__collset_sample(&set, &pts);
    printf("today's full sample on this machine: %zu points\n", pts.n);
    qsort(today, (size_t)rounds, sizeof(double), cmp_double);
    qsort(with, (size_t)rounds, sizeof(double), cmp_double);
    qsort(ratio, (size_t)rounds, sizeof(double), cmp_double);
    printf("%-44s %10s\n", "median of rounds (us of thread CPU per sample)", "cpu");
    printf("%-44s %10.2f\n", "today: full sample (sm__collset_sample)", today[rounds / 2]);
    printf("%-44s %10.2f  (%.3f per port)\n", "the RDMA read, ports of regular files",
           with[rounds / 2], with[rounds / 2] / ports);
    printf("RDMA / today: median %.3f, p10 %.3f, p90 %.3f  (%d ports, %d rounds x %d)\n",
           ratio[rounds / 2], ratio[rounds / 10], ratio[rounds * 9 / 10], ports, rounds, iters);
    rc = 0;
out_rdma:
    free(today);
    free(with);
    free(ratio);
    sm__coll_rdma.close(rdma);
out_set:
    sm__zfree(rdma);
    sm__collset_close(&set);
out:
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", root);
    return rc;
}
