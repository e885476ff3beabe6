/*
 * rapl_sample_cost.c — what the RAPL read adds to a sample (issue 47 item
 * 3): the CPU package energy collector's sample over N packages against
 * today's full sample of this machine, timed in the same run.
 *
 * The packages are N zones laid out as tests/fixtures/make-rapl-fixtures
 * lays them out, in a temporary sysroot: the reads are preads of regular
 * files, the collector's own cost (one kept descriptor per package, parsed,
 * the wrap-safe step summed).  Where this machine has readable RAPL zones
 * of its own, their sample is timed too: the kernel's cost, an MSR read on
 * the package's CPU (drivers/powercap/intel_rapl_msr.c rapl_msr_read_raw,
 * rdmsrl_safe_on_cpu: a cross-CPU call when another CPU reads it).
 * Alternating rounds of thread CPU time, the median round reported.
 *
 *   bench/rapl_sample_cost [--packages N] [--rounds R] [--iters K]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "internal.h"

static int put(const char *dir, const char *name, const char *text)
{
    char path[600];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "w");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f);
}

/* N package zones under root/sys/class/powercap (regular directories). */
static int make_root(const char *root, int packages)
{
    char dir[400], text[32];

    for (int i = 0; i < packages; i++) {
        char cmd[500];
        snprintf(dir, sizeof dir, "%s/sys/class/powercap/intel-rapl:%d", root, i);
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
        if (system(cmd) != 0)
            return -1;
        snprintf(text, sizeof text, "package-%d\n", i);
        if (put(dir, "name", text) < 0 || put(dir, "energy_uj", "123456789012\n") < 0 ||
            put(dir, "max_energy_range_uj", "262143328850\n") < 0)
            return -1;
    }
    return 0;
}

/* Median us of thread CPU per sample of state, alternating with today's. */
static void timed(sm_collset *set, void *state, int rounds, int iters, double *today,
                  double *with)
{
    static sm_points pts;
    char msg[300];

    for (int w = 0; w < iters / 10 + 1; w++) { /* warm caches */
        pts.n = 0;
        sm__collset_sample(set, &pts);
        sm__coll_rapl.sample(state, &pts, msg, sizeof msg);
    }
    for (int r = 0; r < rounds; r++) {
        double c0 = cpu_now(), c1, c2;
        for (int i = 0; i < iters; i++) {
            pts.n = 0;
            sm__collset_sample(set, &pts);
        }
        c1 = cpu_now();
        for (int i = 0; i < iters; i++) {
            pts.n = 0;
            sm__coll_rapl.sample(state, &pts, msg, sizeof msg);
        }
        c2 = cpu_now();
        today[r] = (c1 - c0) / iters * 1e6;
        with[r] = (c2 - c1) / iters * 1e6;
    }
    qsort(today, (size_t)rounds, sizeof(double), cmp_double);
    qsort(with, (size_t)rounds, sizeof(double), cmp_double);
}

int main(int argc, char **argv)
{
    int packages = 2, rounds = 9, iters = 5000, rc = 1;
    char root[] = "/tmp/rapl_sample_cost.XXXXXX", cmd[200];
    sm_ctx real, fx;
    sm_collset set;
    sm_notes notes = {0};
    sm_opened res;
    static sm_points pts;
    void *rapl = NULL, *own = NULL;
    double *today = NULL, *with = NULL;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--packages") == 0)
            packages = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--rounds") == 0)
            rounds = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--iters") == 0)
            iters = atoi(argv[i + 1]);
    }
    if (packages < 1 || packages > 64 || rounds < 1 || iters < 1) {
        fprintf(stderr, "usage: rapl_sample_cost [--packages 1..64] [--rounds R] [--iters K]\n");
        return 2;
    }
    if (!mkdtemp(root) || make_root(root, packages) < 0) {
        fprintf(stderr, "cannot lay out %d packages under %s\n", packages, root);
        goto out;
    }
    unsetenv("SCOPEMETER_SYSROOT");
    if (sm__ctx_init(&real) < 0 || sm__collset_open(&set, &real, &notes) < 0)
        goto out;
    memset(&fx, 0, sizeof fx);
    snprintf(fx.sysroot, sizeof fx.sysroot, "%s", root);
    memset(&res, 0, sizeof res);
    rapl = sm__zalloc(sm__coll_rapl.state_size);
    own = sm__zalloc(sm__coll_rapl.state_size);
    today = calloc((size_t)rounds, sizeof(double));
    with = calloc((size_t)rounds, sizeof(double));
    if (!rapl || !own || !today || !with || sm__coll_rapl.open(rapl, &fx, &res) != 0) {
        fprintf(stderr, "rapl collector did not open: %s\n", res.msg);
        goto out_set;
    }
    pts.n = 0;
    sm__collset_sample(&set, &pts);
    printf("today's full sample on this machine: %zu points (its own RAPL row included where "
           "it has one)\n", pts.n);
    printf("%-48s %10s\n", "median of rounds (us of thread CPU per sample)", "cpu");
    timed(&set, rapl, rounds, iters, today, with);
    printf("%-48s %10.2f\n", "today: full sample (sm__collset_sample)", today[rounds / 2]);
    printf("%-48s %10.2f  (%.3f per package; ratio %.3f)\n",
           "the RAPL read, packages of regular files", with[rounds / 2],
           with[rounds / 2] / packages, with[rounds / 2] / today[rounds / 2]);
    memset(&res, 0, sizeof res);
    if (sm__coll_rapl.open(own, &real, &res) == 0) {
        timed(&set, own, rounds, iters, today, with);
        printf("%-48s %10.2f  (ratio %.3f to today's %.2f)\n    %s\n",
               "the RAPL read, this machine's own zones", with[rounds / 2],
               with[rounds / 2] / today[rounds / 2], today[rounds / 2], res.msg);
        sm__coll_rapl.close(own);
    } else {
        printf("this machine's own RAPL: %s\n", res.msg);
    }
    printf("(%d packages, %d rounds x %d)\n", packages, rounds, iters);
    rc = 0;
    sm__coll_rapl.close(rapl);
out_set:
    free(today);
    free(with);
    sm__zfree(rapl);
    sm__zfree(own);
    sm__collset_close(&set);
out:
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", root);
    return rc;
}
