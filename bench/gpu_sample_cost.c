/*
 * gpu_sample_cost.c — what a GPU sample costs with the health fields
 * (temperature, clocks, reasons, PCIe, ECC, the process list, the event
 * poll) against the five series alone, on the fake NVML (tests/fakenvml).
 *
 * The "five alone" collector is the same code with the fake answering
 * NOT_SUPPORTED to every health call at open, so those calls are dropped
 * and never made again: what a sample cost before the fields existed, plus
 * the one zero-timeout event poll.  The fake answers from memory, so both
 * numbers are the collector's own CPU (calls, arithmetic, emitting, the
 * /proc/PID/stat read per listed process), a lower bound of a real sample:
 * NVML's own cost on hardware (ioctls into the driver) is not measurable
 * without a GPU and is not in them.  The two are timed in alternating
 * rounds (thread CPU time), the median round reported.
 *
 * The fourth collector is detail level full (SCOPEMETER_DETAIL=full): the
 * health sample plus one nvmlGpmSampleGet, one nvmlGpmMetricsGet and the
 * NVLink field values per GPU.  Its clock is injected, one second a sample,
 * so every sample takes a GPM pair (none is skipped for being closer than
 * nvml.h's 100 ms); printed with its ratio to the health sample measured in
 * the same rounds.
 *
 *   SCOPEMETER_NVML_LIBRARY=build/tests/fakenvml/libnvidia-ml.so.1 \
 *   bench/gpu_sample_cost [--devices N] [--rounds R] [--iters K]
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "gpu_int.h" /* the collector's clock (struct gpu's now) */
#include "internal.h"

static const char *const health_calls[] = {"TEMP", "CLOCK", "REASONS", "FIELDS",
                                           "ECC",  "PROCS", "REMAP",   "RETIRED"};

/* The fake's script for n devices: health 1, every health call answering
 * and one process (this one) per GPU; 2, the same without the process list;
 * 0, every health call NOT_SUPPORTED. */
static void script(int n, int health)
{
    char key[64], val[32];

    snprintf(val, sizeof val, "%d", n);
    setenv("FAKE_NVML_DEVICES", val, 1);
    for (int i = 0; i < n; i++) {
        for (size_t c = 0; c < sizeof health_calls / sizeof health_calls[0]; c++) {
            snprintf(key, sizeof key, "FAKE_NVML_FAIL_%s_%d", health_calls[c], i);
            if (health == 1 || (health == 2 && strcmp(health_calls[c], "PROCS") != 0))
                unsetenv(key);
            else
                setenv(key, "3", 1);
        }
        snprintf(key, sizeof key, "FAKE_NVML_PROCS_%d", i);
        snprintf(val, sizeof val, "%d:1000000000", (int)getpid());
        setenv(key, val, 1);
    }
}

/* A clock a second a call: every sample of detail full takes a GPM pair. */
static double bench_clock;
static double one_second_a_call(void)
{
    return bench_clock += 1.0;
}

/* us of thread CPU per sample over iters samples of one open collector;
 * full: detail level full. */
static double per_sample(int n, int health, int full, int iters, size_t *points)
{
    sm_points *p = calloc(1, sizeof *p);
    void *state = calloc(1, sm__coll_gpu.state_size);
    sm_opened res;
    sm_ctx ctx;
    char msg[300];
    double t0, t;

    script(n, health);
    memset(&res, 0, sizeof res);
    if (full)
        setenv("SCOPEMETER_DETAIL", "full", 1);
    else
        unsetenv("SCOPEMETER_DETAIL");
    if (!p || !state || sm__ctx_init(&ctx) < 0 || sm__coll_gpu.open(state, &ctx, &res) != 0) {
        fprintf(stderr, "gpu collector did not open: %s\n", res.msg);
        exit(1);
    }
    if (full) {
        struct gpu *g = state;
        bench_clock = g->dev[0].gpm_t;
        g->now = one_second_a_call;
    }
    sm__coll_gpu.sample(state, p, msg, sizeof msg); /* the baseline, as the monitor's */
    t0 = cpu_now();
    for (int k = 0; k < iters; k++) {
        p->n = 0;
        sm__coll_gpu.sample(state, p, msg, sizeof msg);
    }
    t = (cpu_now() - t0) / iters * 1e6;
    *points = p->n;
    sm__coll_gpu.close(state);
    free(state);
    free(p);
    return t;
}

int main(int argc, char **argv)
{
    int devices = 8, rounds = 9, iters = 2000;
    char root[] = "/tmp/sm-gpu-bench-XXXXXX", path[300];
    double with[64], without[64], noprocs[64], full[64];
    size_t pts_with = 0, pts_without = 0, pts_noprocs = 0, pts_full = 0;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--devices") == 0)
            devices = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--rounds") == 0)
            rounds = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--iters") == 0)
            iters = atoi(argv[i + 1]);
    }
    if (devices < 1 || devices > 16 || rounds < 1 || rounds > 64 || iters < 1 ||
        !getenv("SCOPEMETER_NVML_LIBRARY")) {
        fprintf(stderr, "usage: SCOPEMETER_NVML_LIBRARY=<fake> gpu_sample_cost [--devices 1..16] "
                        "[--rounds 1..64] [--iters N]\n");
        return 2;
    }
    /* a machine with /dev/nvidia0 and the real /proc (the process list's reads) */
    if (!mkdtemp(root))
        return 1;
    snprintf(path, sizeof path, "%s/dev", root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/dev/nvidia0", root);
    close(open(path, O_WRONLY | O_CREAT, 0600));
    snprintf(path, sizeof path, "%s/proc", root);
    if (symlink("/proc", path) < 0)
        return 1;
    setenv("SCOPEMETER_SYSROOT", root, 1);
    unsetenv("CUDA_VISIBLE_DEVICES");

    for (int r = 0; r < rounds; r++) {
        with[r] = per_sample(devices, 1, 0, iters, &pts_with);
        without[r] = per_sample(devices, 0, 0, iters, &pts_without);
        noprocs[r] = per_sample(devices, 2, 0, iters, &pts_noprocs);
        full[r] = per_sample(devices, 1, 1, iters, &pts_full);
    }
    qsort(full, (size_t)rounds, sizeof full[0], cmp_double);
    qsort(noprocs, (size_t)rounds, sizeof noprocs[0], cmp_double);
    qsort(with, (size_t)rounds, sizeof with[0], cmp_double);
    qsort(without, (size_t)rounds, sizeof without[0], cmp_double);
    printf("GPU sample, %d devices on the fake NVML (us of thread CPU, median of %d rounds "
           "of %d samples)\n", devices, rounds, iters);
    printf("  five series alone        %8.2f us  (%zu points)\n", without[rounds / 2],
           pts_without);
    printf("  health, no process list  %8.2f us  (%zu points)\n", noprocs[rounds / 2],
           pts_noprocs);
    printf("  with the health fields   %8.2f us  (%zu points)\n", with[rounds / 2], pts_with);
    printf("  ratio                    %8.2fx\n", with[rounds / 2] / without[rounds / 2]);
    printf("  detail full (GPM pair, NVLink) %8.2f us  (%zu points)\n", full[rounds / 2],
           pts_full);
    printf("  full / health            %8.2fx  (GPM and NVLink: %.2f us a sample, %.3f us a GPU)\n",
           full[rounds / 2] / with[rounds / 2], full[rounds / 2] - with[rounds / 2],
           (full[rounds / 2] - with[rounds / 2]) / devices);
    printf("  (GPM+NVLink) / health without the process list %5.2fx\n",
           (full[rounds / 2] - with[rounds / 2]) / noprocs[rounds / 2]);

    unlink(path);
    snprintf(path, sizeof path, "%s/dev/nvidia0", root);
    unlink(path);
    snprintf(path, sizeof path, "%s/dev", root);
    rmdir(path);
    rmdir(root);
    return 0;
}
