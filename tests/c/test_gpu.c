/*
 * test_gpu.c — the GPU collector against the fake NVML (tests/fakenvml),
 * in-process, where the probe CLI cannot look: several samples of one open
 * collector (a device lost mid-run, a transient error that recovers), the
 * exact points, and that every nvmlInit_v2 is matched by nvmlShutdown.
 * The CLI-level cases (tags, CUDA_VISIBLE_DEVICES, library failures) are in
 * tests/py/test_gpu.py.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "gpu_int.h" /* the collector's clock, injected by gpm_energy_full */
#include "internal.h"

extern char **environ;

static char sysroot[256];
static char fake_path[1024], minimal_path[1024], next_path[1024];
static int (*init_refs)(void);
static int (*event_set_live)(void);
static void (*raise_xid)(int, unsigned int);
static void (*fail_call)(int, const char *, int);
static void (*fail_mig)(int, int, const char *, int);

/* stderr of the collector, captured to a file per step */
static int saved_stderr = -1;
static char errfile[300];

static void capture_begin(void)
{
    int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    fflush(stderr);
    saved_stderr = dup(2);
    dup2(fd, 2);
    close(fd);
}

/* Returns the captured text (static buffer) and restores stderr. */
static const char *capture_end(void)
{
    static char buf[4096];
    int fd;
    ssize_t n;

    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    fd = open(errfile, O_RDONLY);
    n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static const sm_point *find(const sm_points *p, const char *key)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->v[i].key, key) == 0)
            return &p->v[i];
    return NULL;
}

static double value(const sm_points *p, const char *key)
{
    const sm_point *pt = find(p, key);
    return pt ? pt->value : -1.0;
}

/* every FAKE_NVML_* and CUDA_VISIBLE_DEVICES unset: the fake's defaults */
static void reset_env(void)
{
    char name[128];

    unsetenv("CUDA_VISIBLE_DEVICES");
    for (size_t i = 0; environ[i];) {
        size_t n = strcspn(environ[i], "=");
        if (strncmp(environ[i], "FAKE_NVML_", 10) == 0 && n < sizeof name) {
            memcpy(name, environ[i], n);
            name[n] = '\0';
            unsetenv(name);
            continue; /* environ shifted */
        }
        i++;
    }
}

/* MLflow's five, the ten health fields and the own rank's process memory
 * (docs/gpu.md): the health tests open at level full without GPM and NVLink
 * (mask_work; those have their own tests, gpm_energy_full), so every health
 * field is a series */
#define GPU_SERIES 16
/* the default level: the clocks and ECC counts are level full's
 * (docs/series.md "Levels") */
#define GPU_SERIES_DEFAULT 12
static int mask_work = 1;

struct opened {
    void *state;
    sm_opened res;
    int rc;
};

static struct opened open_gpu_as(int all_workers)
{
    struct opened o;
    sm_ctx ctx;

    memset(&o, 0, sizeof o);
    CHECK_EQ_INT(sm__ctx_init(&ctx), 0);
    ctx.all_workers = all_workers;
    if (mask_work)
        ctx.detail = SM_DETAIL_FULL;
    o.state = calloc(1, sm__coll_gpu.state_size);
    o.rc = sm__coll_gpu.open(o.state, &ctx, &o.res);
    if (mask_work && o.rc == 0)
        for (size_t i = 0; i < ((struct gpu *)o.state)->n; i++)
            ((struct gpu *)o.state)->dev[i].want &= ~WORK_BITS;
    return o;
}

static struct opened open_gpu(void)
{
    return open_gpu_as(0);
}

static void close_gpu(struct opened *o)
{
    if (o->rc == 0)
        sm__coll_gpu.close(o->state);
    free(o->state);
    CHECK_EQ_INT(init_refs(), 0); /* every init matched by a shutdown */
}

/* Two devices; device 1 is lost after 8 queries: the open takes 4 (memory
 * v2, utilization, power, limit) and each sample 4, so the second sample
 * finds it lost. */
static void lost_mid_run(void)
{
    sm_points *p = calloc(1, sizeof *p);
    struct opened o;
    const char *err;
    char msg[300] = "";

    reset_env();
    setenv("FAKE_NVML_DEVICES", "2", 1);
    setenv("FAKE_NVML_LOST_AFTER_1", "8", 1);
    o = open_gpu();
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_STR(o.res.status, "nvml 550.54.15, 2 devices");
    CHECK_EQ_STR(o.res.msg, "");

    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    CHECK_EQ_INT(p->n, 2 * GPU_SERIES);
    CHECK_NEAR(value(p, "gpu_0_memory_usage_percentage"), 25.0, 1e-9);
    CHECK_NEAR(value(p, "gpu_0_memory_usage_megabytes"), 21474.83648, 1e-9);
    CHECK_NEAR(value(p, "gpu_0_utilization_percentage"), 40.0, 1e-9);
    CHECK_NEAR(value(p, "gpu_0_power_usage_watts"), 150.0, 1e-9);
    CHECK_NEAR(value(p, "gpu_0_power_usage_percentage"), 50.0, 1e-9);
    CHECK_NEAR(value(p, "gpu_1_memory_usage_megabytes"), 22474.83648, 1e-9);
    CHECK_NEAR(value(p, "gpu_1_memory_usage_percentage"), 100.0 * 22474836480.0 / 85899345920.0,
               1e-9);
    CHECK_NEAR(value(p, "gpu_1_utilization_percentage"), 41.0, 1e-9);
    CHECK_NEAR(value(p, "gpu_1_power_usage_watts"), 151.0, 1e-9);
    CHECK_NEAR(value(p, "gpu_1_power_usage_percentage"), 100.0 * 151.0 / 300.0, 1e-9);
    CHECK(find(p, "gpu_0_memory_usage_megabytes") != NULL &&
          strcmp(find(p, "gpu_0_memory_usage_megabytes")->source,
                 "nvmlDeviceGetMemoryInfo_v2") == 0);
    CHECK_EQ_STR(find(p, "gpu_0_power_usage_watts")->unit, "W");

    /* second sample: device 1 lost, one line, device 0 goes on */
    p->n = 0;
    capture_begin();
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    err = capture_end();
    CHECK_EQ_INT(p->n, GPU_SERIES);
    CHECK(find(p, "gpu_1_memory_usage_megabytes") == NULL);
    CHECK_NEAR(value(p, "gpu_0_utilization_percentage"), 40.0, 1e-9);
    CHECK_EQ_INT(count_lines(err), 1);
    CHECK(strstr(err, "scopemeter: warning: gpu: GPU 1 lost") != NULL);
    CHECK(strstr(err, "fake NVML: GPU is lost") != NULL);

    /* third sample: no second line */
    p->n = 0;
    capture_begin();
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    err = capture_end();
    CHECK_EQ_INT(p->n, GPU_SERIES);
    CHECK_EQ_STR(err, "");
    close_gpu(&o);
    free(p);
}

/* Lost before the first query: dropped at open, with the reason in the
 * open message; the other device attaches. */
static void lost_at_open(void)
{
    sm_points *p = calloc(1, sizeof *p);
    struct opened o;
    char msg[300] = "";

    reset_env();
    setenv("FAKE_NVML_DEVICES", "2", 1);
    setenv("FAKE_NVML_LOST_AFTER_1", "0", 1);
    o = open_gpu();
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_STR(o.res.status, "nvml 550.54.15, 1 device");
    CHECK(strstr(o.res.msg, "GPU 1 lost (nvmlDeviceGetMemoryInfo_v2: fake NVML: GPU is lost): "
                            "gpu_1_* dropped") != NULL);
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    CHECK_EQ_INT(p->n, GPU_SERIES);
    CHECK(find(p, "gpu_1_utilization_percentage") == NULL);
    close_gpu(&o);
    free(p);
}

/* A transient error (UNKNOWN) skips the value with one line, and the
 * recovery is said once: the fake fails utilization twice (open, sample 1). */
static void transient_then_recovered(void)
{
    sm_points *p = calloc(1, sizeof *p);
    struct opened o;
    const char *err;
    char msg[300] = "";

    reset_env();
    setenv("FAKE_NVML_FAIL_UTIL_0", "999", 1);
    setenv("FAKE_NVML_FAIL_TIMES_0", "2", 1);
    o = open_gpu();
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_STR(o.res.msg, ""); /* transient at open: kept, nothing to say yet */

    capture_begin();
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    err = capture_end();
    CHECK_EQ_INT(p->n, GPU_SERIES - 1);
    CHECK(find(p, "gpu_0_utilization_percentage") == NULL);
    CHECK_EQ_INT(count_lines(err), 1);
    CHECK(strstr(err, "nvmlDeviceGetUtilizationRates failed: fake NVML: Unknown Error") != NULL);

    p->n = 0;
    capture_begin();
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    err = capture_end();
    CHECK_EQ_INT(p->n, GPU_SERIES);
    CHECK_NEAR(value(p, "gpu_0_utilization_percentage"), 40.0, 1e-9);
    CHECK_EQ_STR(err, "scopemeter: gpu: GPU 0 recovered\n");
    close_gpu(&o);
    free(p);
}

/* A driver that rejects the v2 tag: memory through v1, whose "used"
 * includes the driver's reserve (20 GiB + 512 MiB). */
static void memory_v1_fallback(void)
{
    sm_points *p = calloc(1, sizeof *p);
    struct opened o;
    char msg[300] = "";

    reset_env();
    setenv("FAKE_NVML_FAIL_MEMV2_0", "25", 1);
    o = open_gpu();
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    CHECK_NEAR(value(p, "gpu_0_memory_usage_megabytes"), 22011.707392, 1e-9);
    CHECK(find(p, "gpu_0_memory_usage_megabytes") != NULL &&
          strcmp(find(p, "gpu_0_memory_usage_megabytes")->source, "nvmlDeviceGetMemoryInfo") ==
              0);
    close_gpu(&o);
    free(p);
}

/* The three GPU lines of docs/design.md §6 differ in kind: no device is SM_ABSENT
 * (informational), a library or NVML failure is negative (a warning).  A
 * failed open leaves NVML shut down and unloaded. */
static void three_lines(void)
{
    char path[512], nodev[300];
    struct opened o;

    reset_env();
    snprintf(nodev, sizeof nodev, "%s/nodev", sysroot);
    mkdir(nodev, 0755);
    setenv("SCOPEMETER_SYSROOT", nodev, 1);
    o = open_gpu();
    CHECK_EQ_INT(o.rc, SM_ABSENT);
    CHECK_EQ_STR(o.res.status, "none: no /dev/nvidia device");
    CHECK_EQ_STR(o.res.msg, "no /dev/nvidia device: gpu_* series absent (normal on CPU workers)");
    close_gpu(&o);
    rmdir(nodev);
    setenv("SCOPEMETER_SYSROOT", sysroot, 1);

    setenv("CUDA_VISIBLE_DEVICES", "NoDevFiles", 1); /* Slurm without GPUs */
    o = open_gpu();
    CHECK_EQ_INT(o.rc, SM_ABSENT);
    CHECK_EQ_STR(o.res.status, "none: CUDA_VISIBLE_DEVICES selects no device");
    close_gpu(&o);
    unsetenv("CUDA_VISIBLE_DEVICES");

    snprintf(path, sizeof path, "%s/missing/libnvidia-ml.so.1", sysroot);
    setenv("SCOPEMETER_NVML_LIBRARY", path, 1);
    o = open_gpu();
    CHECK(o.rc < 0);
    CHECK(strncmp(o.res.status, "unavailable: ", 13) == 0 && strstr(o.res.status, path));
    close_gpu(&o);
    setenv("SCOPEMETER_NVML_LIBRARY", fake_path, 1);

    setenv("FAKE_NVML_INIT_FAIL", "9", 1);
    o = open_gpu();
    CHECK(o.rc < 0);
    CHECK_EQ_STR(o.res.status, "unavailable: fake NVML: Driver Not Loaded");
    close_gpu(&o);
    unsetenv("FAKE_NVML_INIT_FAIL");

    setenv("FAKE_NVML_COUNT_FAIL", "999", 1); /* after a successful init */
    o = open_gpu();
    CHECK(o.rc < 0);
    CHECK_EQ_STR(o.res.status, "unavailable: fake NVML: Unknown Error");
    close_gpu(&o); /* checks the init was undone */
    unsetenv("FAKE_NVML_COUNT_FAIL");

    setenv("FAKE_NVML_LOST_AFTER_0", "0", 1); /* the only device lost at open */
    o = open_gpu();
    CHECK(o.rc < 0);
    CHECK(strstr(o.res.status, "GPU 0 lost") != NULL);
    close_gpu(&o);
    unsetenv("FAKE_NVML_LOST_AFTER_0");
}


static const char *source(const sm_points *p, const char *key)
{
    const sm_point *pt = find(p, key);
    return pt ? pt->source : "(absent)";
}

/* The health fields equal what the fake returned, sample by sample: the
 * clock-event reasons as a known pattern (the window's mean is the share of
 * its samples), the cumulative PCIe counter through a restart, ECC since
 * open. */
static void health_values(void)
{
    static const double thr[4] = {0, 100, 0, 100}, pwr[4] = {0, 0, 0, 100},
                        therm[4] = {0, 100, 0, 0}, rx[4] = {500, 1000, 1100, 1100},
                        corr[4] = {0, 2, 2, 2};
    sm_points *p = calloc(1, sizeof *p);
    double sum[3] = {0, 0, 0};
    struct opened o;
    char msg[300] = "";

    reset_env();
    setenv("FAKE_NVML_DEVICES", "2", 1);
    setenv("FAKE_NVML_TEMP_0", "71", 1);
    setenv("FAKE_NVML_SM_CLOCK_0", "1410", 1);
    setenv("FAKE_NVML_MEM_CLOCK_0", "1593", 1);
    /* open reads the first (0x4); the samples then 0, HW thermal, idle, SW power cap */
    setenv("FAKE_NVML_REASONS_0", "0x4,0,0x40,0x1", 1);
    setenv("FAKE_NVML_PCIE_RX_0", "1000000000,1500000000,2000000000,100000000", 1);
    setenv("FAKE_NVML_ECC_CORR_0", "3,3,5", 1);
    setenv("FAKE_NVML_ECC_UNCORR_0", "0,1", 1);
    o = open_gpu();
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_STR(o.res.msg, "");
    for (int k = 0; k < 4; k++) {
        p->n = 0;
        CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
        CHECK_EQ_INT(p->n, 2 * GPU_SERIES);
        CHECK_NEAR(value(p, "gpu_0_temperature_celsius"), 71.0, 0);
        CHECK_NEAR(value(p, "gpu_0_sm_clock_megahertz"), 1410.0, 0);
        CHECK_NEAR(value(p, "gpu_0_memory_clock_megahertz"), 1593.0, 0);
        CHECK_NEAR(value(p, "gpu_0_throttled_percentage"), thr[k], 0);
        CHECK_NEAR(value(p, "gpu_0_throttled_power_percentage"), pwr[k], 0);
        CHECK_NEAR(value(p, "gpu_0_throttled_thermal_percentage"), therm[k], 0);
        CHECK_NEAR(value(p, "gpu_0_pcie_receive_megabytes"), rx[k], 1e-9);
        CHECK_NEAR(value(p, "gpu_0_pcie_transmit_megabytes"), 0.0, 0); /* fixed counter */
        CHECK_NEAR(value(p, "gpu_0_ecc_errors_corrected"), corr[k], 0);
        CHECK_NEAR(value(p, "gpu_0_ecc_errors_uncorrected"), 1.0, 0);
        /* device 1: the fake's defaults */
        CHECK_NEAR(value(p, "gpu_1_temperature_celsius"), 61.0, 0);
        CHECK_NEAR(value(p, "gpu_1_sm_clock_megahertz"), 1979.0, 0);
        CHECK_NEAR(value(p, "gpu_1_throttled_percentage"), 0.0, 0);
        CHECK_NEAR(value(p, "gpu_1_pcie_receive_megabytes"), 0.0, 0);
        sum[0] += value(p, "gpu_0_throttled_percentage");
        sum[1] += value(p, "gpu_0_throttled_power_percentage");
        sum[2] += value(p, "gpu_0_throttled_thermal_percentage");
    }
    /* the window of these four samples: throttled half of it, a quarter each */
    CHECK_NEAR(sum[0] / 4, 50.0, 0);
    CHECK_NEAR(sum[1] / 4, 25.0, 0);
    CHECK_NEAR(sum[2] / 4, 25.0, 0);
    CHECK_EQ_STR(source(p, "gpu_0_throttled_percentage"), "nvmlDeviceGetCurrentClocksEventReasons");
    CHECK_EQ_STR(source(p, "gpu_0_pcie_receive_megabytes"),
                 "nvmlDeviceGetFieldValues(NVML_FI_DEV_PCIE_COUNT_RX_BYTES)");
    CHECK_EQ_STR(find(p, "gpu_0_temperature_celsius")->unit, "celsius");
    CHECK_EQ_STR(find(p, "gpu_0_sm_clock_megahertz")->unit, "MHz");
    CHECK_EQ_INT(find(p, "gpu_0_pcie_receive_megabytes")->agg, SM_AGG_LAST);
    CHECK_EQ_INT(find(p, "gpu_0_ecc_errors_corrected")->agg, SM_AGG_LAST);
    CHECK_EQ_INT(find(p, "gpu_0_throttled_percentage")->agg, SM_AGG_MEAN);
    close_gpu(&o);
    free(p);
}

/* ECC through two clears (nvmlDeviceClearEccErrorCounts, `nvidia-smi -p 0`,
 * resets the volatile counts at once; issue 46 item 5): the counter reads
 * 0 at open, then 20, 37, 43, cleared, 4, 10, 22, 34, cleared, 3, 9.  The
 * series is the sum of what each reading added (a reading below the last is
 * the count since the clear): 86 at the end, as many as the counter counted
 * (43 + 34 + 9), never going down; the difference from the first reading
 * alone read 4 after the first clear and ended at 9.  The uncorrected
 * counter, cleared with it, likewise. */
static void ecc_through_a_clear(void)
{
    static const double corr[9] = {20, 37, 43, 47, 53, 65, 77, 80, 86},
                        uncorr[9] = {0, 1, 1, 1, 2, 2, 2, 2, 3};
    sm_points *p = calloc(1, sizeof *p);
    struct opened o;
    char msg[300] = "";

    reset_env();
    setenv("FAKE_NVML_ECC_CORR_0", "0,20,37,43,4,10,22,34,3,9", 1);
    setenv("FAKE_NVML_ECC_UNCORR_0", "0,0,1,1,0,1,1,1,0,1", 1);
    o = open_gpu();
    CHECK_EQ_INT(o.rc, 0);
    for (int k = 0; k < 9; k++) {
        p->n = 0;
        CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
        CHECK_NEAR(value(p, "gpu_0_ecc_errors_corrected"), corr[k], 0);
        CHECK_NEAR(value(p, "gpu_0_ecc_errors_uncorrected"), uncorr[k], 0);
    }
    close_gpu(&o);
    free(p);
}

/* NOT_SUPPORTED drops that one series of that device, grouped in the open
 * line; a field of nvmlDeviceGetFieldValues fails on its own. */
static void per_field_degrade(void)
{
    sm_points *p = calloc(1, sizeof *p);
    struct opened o;
    char msg[300] = "";

    reset_env();
    setenv("FAKE_NVML_DEVICES", "2", 1);
    setenv("FAKE_NVML_FAIL_TEMP_0", "3", 1);
    setenv("FAKE_NVML_FAIL_ECC_0", "3", 1);
    setenv("FAKE_NVML_FAIL_PCIE_RX_1", "3", 1);
    o = open_gpu();
    CHECK_EQ_INT(o.rc, 0);
    CHECK(strstr(o.res.msg, "gpu_0_temperature_celsius dropped: nvmlDeviceGetTemperature says "
                            "fake NVML: Not Supported") != NULL);
    CHECK(strstr(o.res.msg, "gpu_1_pcie_receive_megabytes dropped: nvmlDeviceGetFieldValues "
                            "says fake NVML: Not Supported") != NULL);
    CHECK(strstr(o.res.msg, "gpu_0_ecc_errors_* dropped: nvmlDeviceGetTotalEccErrors says fake "
                            "NVML: Not Supported") != NULL);
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    CHECK_EQ_INT(p->n, 2 * GPU_SERIES - 4);
    CHECK(find(p, "gpu_0_temperature_celsius") == NULL);
    CHECK(find(p, "gpu_0_ecc_errors_corrected") == NULL);
    CHECK(find(p, "gpu_1_pcie_receive_megabytes") == NULL);
    CHECK(find(p, "gpu_1_temperature_celsius") != NULL);
    CHECK(find(p, "gpu_1_pcie_transmit_megabytes") != NULL);
    CHECK(find(p, "gpu_0_sm_clock_megahertz") != NULL);
    close_gpu(&o);
    free(p);
}

/* An old driver: no health entry point but the pre-R535 reasons call, which
 * is used; the open line names what is missing. */
static void old_driver(void)
{
    sm_points *p = calloc(1, sizeof *p);
    struct opened o;
    char msg[300] = "";

    reset_env();
    setenv("SCOPEMETER_NVML_LIBRARY", minimal_path, 1);
    setenv("FAKE_NVML_REASONS_0", "0x20", 1);
    o = open_gpu();
    CHECK_EQ_INT(o.rc, 0);
    CHECK(strstr(o.res.msg, "NVML lacks nvmlDeviceGetTemperature, nvmlDeviceGetClockInfo, "
                            "nvmlDeviceGetFieldValues, nvmlDeviceGetTotalEccErrors") != NULL);
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    CHECK_EQ_INT(p->n, 6); /* memory 2, power W, the three throttled */
    CHECK_EQ_STR(source(p, "gpu_0_throttled_thermal_percentage"),
                 "nvmlDeviceGetCurrentClocksThrottleReasons");
    CHECK_NEAR(value(p, "gpu_0_throttled_thermal_percentage"), 100.0, 0);
    CHECK_NEAR(value(p, "gpu_0_throttled_power_percentage"), 0.0, 0);
    sm__coll_gpu.close(o.state);
    free(o.state);
    setenv("SCOPEMETER_NVML_LIBRARY", fake_path, 1);
    free(p);
}

static const char *tag_of(const sm_tags *t, const char *key)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->v[i].key, key) == 0)
            return t->v[i].value;
    return NULL;
}

/* The temperature through nvmlDeviceGetTemperatureV, which NVML 13's nvml.h
 * puts in place of the deprecated nvmlDeviceGetTemperature (issue 46 item
 * 12): the full fake has both and the new one is used; a V that rejects the
 * struct's version tag at open falls back to the old call; a later NVML
 * without the deprecated calls (the next fake: no nvmlDeviceGetTemperature,
 * no ...ClocksThrottleReasons) keeps the series and names nothing missing. */
static void temperature_v_first(void)
{
    sm_points *p = calloc(1, sizeof *p);
    struct opened o;
    char msg[300] = "";

    reset_env();
    setenv("FAKE_NVML_TEMP_0", "71", 1);
    o = open_gpu();
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_STR(o.res.msg, "");
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    CHECK_NEAR(value(p, "gpu_0_temperature_celsius"), 71.0, 0);
    CHECK_EQ_STR(source(p, "gpu_0_temperature_celsius"),
                 "nvmlDeviceGetTemperatureV(NVML_TEMPERATURE_GPU)");
    close_gpu(&o);

    setenv("FAKE_NVML_FAIL_TEMPV_0", "25", 1); /* ARGUMENT_VERSION_MISMATCH */
    o = open_gpu();
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_STR(o.res.msg, "");
    p->n = 0;
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    CHECK_NEAR(value(p, "gpu_0_temperature_celsius"), 71.0, 0);
    CHECK_EQ_STR(source(p, "gpu_0_temperature_celsius"),
                 "nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU)");
    close_gpu(&o);

    reset_env();
    setenv("SCOPEMETER_NVML_LIBRARY", next_path, 1);
    setenv("FAKE_NVML_TEMP_0", "64", 1);
    setenv("FAKE_NVML_REASONS_0", "0x20", 1);
    o = open_gpu();
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_STR(o.res.msg, "");
    p->n = 0;
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    CHECK_EQ_INT(p->n, GPU_SERIES);
    CHECK_NEAR(value(p, "gpu_0_temperature_celsius"), 64.0, 0);
    CHECK_EQ_STR(source(p, "gpu_0_temperature_celsius"),
                 "nvmlDeviceGetTemperatureV(NVML_TEMPERATURE_GPU)");
    CHECK_NEAR(value(p, "gpu_0_throttled_thermal_percentage"), 100.0, 0);
    close_gpu(&o);
    /* no sensor: the line names the call there is */
    setenv("FAKE_NVML_FAIL_TEMP_0", "3", 1);
    o = open_gpu();
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_STR(o.res.msg, "gpu: gpu_0_temperature_celsius dropped: "
                            "nvmlDeviceGetTemperatureV says fake NVML: Not Supported");
    close_gpu(&o);
    setenv("SCOPEMETER_NVML_LIBRARY", fake_path, 1);
    free(p);
}

/* nvmlDeviceRegisterEvents answering UNKNOWN leaves the event set "in
 * undefined state" (nvml.h: it "should be freed"; the fake's answers every
 * wait on it with UNKNOWN): the set is freed at open with one clause and
 * never polled, so an Xid raised later is neither a line nor a tag, and no
 * wait fails.  Before, the set was kept for the GPUs registered before and
 * after (issue 46 item 12). */
static void events_set_undefined(void)
{
    sm_points *p = calloc(1, sizeof *p);
    sm_tags *t = calloc(1, sizeof *t);
    struct opened o;
    char msg[300] = "";

    reset_env();
    setenv("FAKE_NVML_DEVICES", "3", 1);
    setenv("FAKE_NVML_FAIL_EVENTS_1", "999", 1);
    o = open_gpu();
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_STR(o.res.msg, "gpu: no Xid events: nvmlDeviceRegisterEvents of GPU 1 says fake "
                            "NVML: Unknown Error, which leaves the event set undefined "
                            "(nvml.h); it is freed");
    CHECK_EQ_INT(event_set_live(), 0);
    raise_xid(0, 79);
    capture_begin();
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    CHECK_EQ_STR(capture_end(), "");
    CHECK_EQ_INT(p->n, 3 * GPU_SERIES);
    sm__coll_gpu.tags(o.state, SM_TAGS_END, t);
    CHECK(tag_of(t, "gpu_events") == NULL);
    close_gpu(&o);
    free(t);
    free(p);
}

/* An Xid the driver raises reaches the gpu_events tag at the next window
 * (the sample polls the event set); unchanged, a window ships nothing;
 * remapped rows and retired pages are there from the start. */
static void xid_reaches_tag(void)
{
    sm_points *p = calloc(1, sizeof *p);
    sm_tags *t = calloc(1, sizeof *t);
    struct opened o;
    const char *err, *v;
    char msg[300] = "";

    reset_env();
    setenv("FAKE_NVML_DEVICES", "3", 1);
    setenv("FAKE_NVML_XID_0", "13", 1);
    setenv("FAKE_NVML_REMAP_1", "0,2,1,0", 1);
    setenv("FAKE_NVML_RETIRED_1", "0,3", 1);
    setenv("FAKE_NVML_FAIL_EVENTS_2", "3", 1);
    o = open_gpu();
    CHECK_EQ_INT(o.rc, 0);
    CHECK(strstr(o.res.msg, "no Xid events of GPU 2: nvmlDeviceRegisterEvents says fake NVML: "
                            "Not Supported") != NULL);
    sm__coll_gpu.tags(o.state, SM_TAGS_START, t);
    CHECK_EQ_STR(tag_of(t, "gpu_events"),
                 "gpu1 remapped_uncorrected=2 remap_pending=1 retired_pages_dbe=3");

    raise_xid(0, 79);
    raise_xid(2, 48); /* GPU 2 did not register: never delivered */
    capture_begin();
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    err = capture_end();
    CHECK_EQ_INT(p->n, 3 * GPU_SERIES); /* events take no series */
    CHECK(strstr(err, "gpu: GPU 0: Xid 13") != NULL && strstr(err, "gpu: GPU 0: Xid 79") != NULL);
    CHECK_EQ_INT(count_lines(err), 2);
    t->n = 0;
    sm__coll_gpu.tags(o.state, SM_TAGS_WINDOW, t);
    v = tag_of(t, "gpu_events");
    CHECK(v && strncmp(v, "gpu0 xid=79 at=20", 17) == 0);
    CHECK(v && strstr(v, "Z xids=2 codes=13,79; gpu1 remapped_uncorrected=2") != NULL);

    t->n = 0; /* nothing new: nothing shipped */
    p->n = 0;
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    sm__coll_gpu.tags(o.state, SM_TAGS_WINDOW, t);
    CHECK(tag_of(t, "gpu_events") == NULL);

    /* a new code is news at once (a repeat of a known one is spaced in time:
     * docs/gpu.md; the end tag always has the count) */
    raise_xid(0, 31);
    p->n = 0;
    capture_begin();
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    capture_end();
    sm__coll_gpu.tags(o.state, SM_TAGS_WINDOW, t);
    v = tag_of(t, "gpu_events");
    CHECK(v && strncmp(v, "gpu0 xid=31 at=", 15) == 0 && strstr(v, " xids=3 codes=13,79,31;"));
    raise_xid(0, 79);
    p->n = 0;
    capture_begin();
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    capture_end();
    t->n = 0;
    sm__coll_gpu.tags(o.state, SM_TAGS_END, t);
    v = tag_of(t, "gpu_events");
    CHECK(v && strstr(v, "gpu0 xid=79 at=") && strstr(v, " xids=4 codes=13,79,31;"));
    close_gpu(&o);
    free(t);
    free(p);
}


/* A real process for the fake's process list: a child of this process
 * (in its tree) or, detached, a grandchild reparented away from it; with
 * or without RANK in its environment and the GPU node open (fd 9). */
static pid_t spawn(int detached, const char *rank, int gpu_fd)
{
    int p[2];
    pid_t pid, got = -1;

    if (pipe(p) < 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        pid_t g = detached ? fork() : 0;
        if (g > 0) {
            if (write(p[1], &g, sizeof g) != (ssize_t)sizeof g)
                _exit(1);
            _exit(0);
        }
        if (g == 0) {
            if (!detached) {
                pid_t me = getpid();
                if (write(p[1], &me, sizeof me) != (ssize_t)sizeof me)
                    _exit(1);
            }
            close(p[0]);
            close(p[1]);
            if (gpu_fd >= 0)
                dup2(gpu_fd, 9); /* a copy without O_CLOEXEC, as a CUDA context's */
            if (rank)
                setenv("RANK", rank, 1);
            else
                unsetenv("RANK");
            execl("/bin/sleep", "sleep", "30", (char *)NULL);
        }
        _exit(127);
    }
    close(p[1]);
    if (pid > 0 && read(p[0], &got, sizeof got) != (ssize_t)sizeof got)
        got = -1;
    close(p[0]);
    if (pid > 0 && detached)
        waitpid(pid, NULL, 0); /* the intermediate: its child goes to init */
    /* the pid is written before exec: wait until the exec is done, so its
     * environ and fds are sleep's (a bounded wait for an event, not a time) */
    for (int i = 0; got > 0 && i < 1000; i++) {
        char path[64], comm[32] = "";
        int fd;
        ssize_t n = -1;
        snprintf(path, sizeof path, "/proc/%d/comm", (int)got);
        fd = open(path, O_RDONLY);
        if (fd >= 0) {
            n = read(fd, comm, sizeof comm - 1);
            close(fd);
        }
        if (n > 0 && strncmp(comm, "sleep\n", 6) == 0)
            break;
        usleep(10000);
    }
    return got;
}

/* Who holds GPU 0's memory: NVML (the fake) names this process and its
 * child (rank 0's tree), a detached process of rank 3, one of no rank, one
 * that has no GPU open (a host pid that numbers another process here) and
 * a pid that exists nowhere.  Under all_workers with 4 local ranks, the
 * series of ranks 0..3 and the tag at the peak say each holder's share. */
static void who_holds_memory(void)
{
    sm_points *p = calloc(1, sizeof *p);
    sm_tags *t = calloc(1, sizeof *t);
    char dev[300], procs[300], msg[300] = "";
    pid_t own_child, rank3, unranked, nofd;
    struct opened o;
    const char *v;
    int gpu_fd;

    reset_env();
    setenv("RANK", "0", 1);
    setenv("LOCAL_RANK", "0", 1);
    setenv("WORLD_SIZE", "4", 1);
    setenv("LOCAL_WORLD_SIZE", "4", 1);
    snprintf(dev, sizeof dev, "%s/dev/nvidia0", sysroot);
    gpu_fd = open(dev, O_RDONLY | O_CLOEXEC); /* only where spawn() dup2s it */
    CHECK(gpu_fd >= 0);
    own_child = spawn(0, NULL, gpu_fd);
    rank3 = spawn(1, "3", gpu_fd);
    unranked = spawn(1, NULL, gpu_fd);
    nofd = spawn(1, "2", -1);
    CHECK(own_child > 0 && rank3 > 0 && unranked > 0 && nofd > 0);
    snprintf(procs, sizeof procs, "%d:1000000000,%d:500000000,%d:512000000,%d:100000000,"
             "%d:7000000,4000000:30000000000", (int)getpid(), (int)own_child, (int)rank3,
             (int)unranked, (int)nofd);
    setenv("FAKE_NVML_PROCS_0", procs, 1);
    o = open_gpu_as(1);
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    CHECK_EQ_INT(p->n, GPU_SERIES + 3); /* ranks 1..3 beside the own */
    for (size_t i = 0; i < p->n; i++) {
        const sm_point *pt = &p->v[i];
        if (strcmp(pt->key, "gpu_0_process_memory_megabytes") != 0)
            continue;
        CHECK_NEAR(pt->value, pt->rank == SM_RANK_OWN ? 1500.0 : pt->rank == 3 ? 512.0 : 0.0,
                   1e-9);
        CHECK(pt->rank == SM_RANK_OWN || (pt->rank >= 1 && pt->rank <= 3));
    }
    sm__coll_gpu.tags(o.state, SM_TAGS_WINDOW, t);
    v = tag_of(t, "gpu_memory_at_peak");
    CHECK_EQ_STR(v ? v : "(none)", "gpu0 used_mb=21474.8 own_mb=1500.0 rank3_mb=512.0 "
                                   "unranked_mb=100.0 foreign_mb=30007.0");
    t->n = 0; /* the same peak: not shipped again */
    p->n = 0;
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    sm__coll_gpu.tags(o.state, SM_TAGS_WINDOW, t);
    CHECK(tag_of(t, "gpu_memory_at_peak") == NULL);
    close_gpu(&o);
    close(gpu_fd);
    kill(own_child, SIGKILL);
    waitpid(own_child, NULL, 0);
    kill(rank3, SIGKILL);
    kill(unranked, SIGKILL);
    kill(nofd, SIGKILL);
    unsetenv("RANK");
    unsetenv("LOCAL_RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("LOCAL_WORLD_SIZE");
    free(t);
    free(p);
}

/* A MIG instance (docs/gpu.md "MIG"): the board holds 70 GB of 80 GB and
 * lists this process with 5 GB and a stranger with 60 GB; the named
 * instance holds 10 GB of its 40 GB and lists this process with 1 GB and a
 * stranger with 2 GB.  Memory, the process series and the peak's holders
 * must be the instance's (any of the board's numbers fails), utilization
 * and the health fields the board's; a failure on the instance's handle
 * costs only its series, one line, and recovers. */
static void mig_instance_fields(void)
{
    sm_points *p = calloc(1, sizeof *p);
    sm_tags *t = calloc(1, sizeof *t);
    char dev[300], procs[100], msg[300] = "";
    struct opened o;
    const char *v, *err;
    int gpu_fd;

    reset_env();
    snprintf(dev, sizeof dev, "%s/dev/nvidia0", sysroot);
    gpu_fd = open(dev, O_RDONLY | O_CLOEXEC); /* this process has a "CUDA context" */
    CHECK(gpu_fd >= 0);
    setenv("FAKE_NVML_MIG_0", "2", 1);
    setenv("FAKE_NVML_MEM_TOTAL_0", "80000000000", 1);
    setenv("FAKE_NVML_MEM_USED_0", "70000000000", 1);
    setenv("FAKE_NVML_MIG_MEM_TOTAL_0_1", "40000000000", 1);
    setenv("FAKE_NVML_MIG_MEM_USED_0_1", "10000000000", 1);
    snprintf(procs, sizeof procs, "%d:5000000000,4000000:60000000000", (int)getpid());
    setenv("FAKE_NVML_PROCS_0", procs, 1);
    snprintf(procs, sizeof procs, "%d:1000000000,4000001:2000000000", (int)getpid());
    setenv("FAKE_NVML_MIG_PROCS_0_1", procs, 1);
    setenv("CUDA_VISIBLE_DEVICES", "MIG-f4ce0000-0001", 1);
    o = open_gpu();
    CHECK_EQ_INT(o.rc, 0);
    CHECK(strstr(o.res.msg, "MIG: gpu_0_memory_usage_* and gpu_0_process_memory_megabytes "
                            "are the named instance's") != NULL);
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    CHECK_EQ_INT(p->n, GPU_SERIES);
    CHECK_NEAR(value(p, "gpu_0_memory_usage_megabytes"), 10000.0, 1e-9);
    CHECK_NEAR(value(p, "gpu_0_memory_usage_percentage"), 25.0, 1e-9);
    CHECK_NEAR(value(p, "gpu_0_process_memory_megabytes"), 1000.0, 1e-9);
    CHECK_EQ_STR(find(p, "gpu_0_process_memory_megabytes")->source,
                 "nvmlDeviceGetComputeRunningProcesses_v3(MIG device handle)");
    CHECK_NEAR(value(p, "gpu_0_utilization_percentage"), 40.0, 1e-9);   /* the board's */
    CHECK_NEAR(value(p, "gpu_0_power_usage_watts"), 150.0, 1e-9);
    CHECK_NEAR(value(p, "gpu_0_temperature_celsius"), 60.0, 1e-9);
    sm__coll_gpu.tags(o.state, SM_TAGS_WINDOW, t);
    v = tag_of(t, "gpu_memory_at_peak");
    CHECK_EQ_STR(v ? v : "(none)", "gpu0 used_mb=10000.0 own_mb=1000.0 foreign_mb=2000.0");

    /* the instance's memory fails mid-run (transient): only its two series
     * go, one line, and come back */
    fail_mig(0, 1, "MEMV2", 999);
    for (int k = 0; k < 2; k++) {
        p->n = 0;
        capture_begin();
        CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
        err = capture_end();
        CHECK_EQ_INT(p->n, GPU_SERIES - 2);
        CHECK(find(p, "gpu_0_memory_usage_megabytes") == NULL);
        CHECK_NEAR(value(p, "gpu_0_process_memory_megabytes"), 1000.0, 1e-9);
        CHECK_NEAR(value(p, "gpu_0_utilization_percentage"), 40.0, 1e-9);
        CHECK_EQ_STR(err, k ? "" : "scopemeter: warning: gpu: GPU 0: nvmlDeviceGetMemoryInfo_v2"
                                   "(MIG device handle) failed: fake NVML: Unknown Error; its "
                                   "values are skipped until it recovers\n");
    }
    fail_mig(0, 1, "MEMV2", 0);
    p->n = 0;
    capture_begin();
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    CHECK_EQ_STR(capture_end(), "scopemeter: gpu: GPU 0 recovered\n");
    CHECK_NEAR(value(p, "gpu_0_memory_usage_megabytes"), 10000.0, 1e-9);

    /* the instance's process list refused: that series alone is dropped */
    fail_mig(0, 1, "PROCS", 4);
    p->n = 0;
    capture_begin();
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    err = capture_end();
    CHECK_EQ_INT(p->n, GPU_SERIES - 1);
    CHECK(find(p, "gpu_0_process_memory_megabytes") == NULL);
    CHECK_NEAR(value(p, "gpu_0_memory_usage_megabytes"), 10000.0, 1e-9);
    CHECK_EQ_STR(err, "scopemeter: warning: gpu: gpu_0_process_memory_megabytes dropped: "
                      "nvmlDeviceGetComputeRunningProcesses_v3(MIG device handle) says fake "
                      "NVML: Insufficient Permissions\n");
    fail_mig(0, 1, "PROCS", 0);
    close_gpu(&o);
    close(gpu_fd);
    free(t);
    free(p);
}

/* ---- per-field degrade, field by field (docs/gpu.md "Per-field degrade") ---- */

/* One sample of a collector opened with the environment as it is now. */
static void sample_once(sm_points *p, struct opened *o)
{
    char msg[300] = "";

    p->n = 0;
    CHECK_EQ_INT(sm__coll_gpu.sample(o->state, p, msg, sizeof msg), 0);
}

/* sample_once, returning what it said on stderr (capture_end's buffer). */
static const char *sample_said(sm_points *p, struct opened *o)
{
    capture_begin();
    sample_once(p, o);
    return capture_end();
}

/* p is base without exactly the keys of drop (NULL-terminated): every other
 * point is there with base's value.  A key that base lacks fails: nothing
 * can be "dropped" that was never produced. */
static void same_but(const sm_points *p, const sm_points *base, const char *const *drop)
{
    size_t nd = 0;

    for (; drop[nd]; nd++) {
        if (!find(base, drop[nd]))
            fprintf(stderr, "not in the baseline: %s\n", drop[nd]);
        CHECK(find(base, drop[nd]) != NULL);
        if (find(p, drop[nd]))
            fprintf(stderr, "not dropped: %s\n", drop[nd]);
        CHECK(find(p, drop[nd]) == NULL);
    }
    CHECK_EQ_INT(p->n, base->n - nd);
    for (size_t i = 0; i < base->n; i++) {
        const sm_point *b = &base->v[i], *q;
        int dropped = 0;
        for (size_t j = 0; j < nd; j++)
            dropped |= strcmp(b->key, drop[j]) == 0;
        if (dropped)
            continue;
        q = find(p, b->key);
        if (!q || q->value != b->value)
            fprintf(stderr, "%s: %g, want %g (baseline)\n", b->key, q ? q->value : -1.0,
                    b->value);
        CHECK(q != NULL && q->value == b->value);
    }
}

/* The baseline: two GPUs as the fake answers by default, one sample. */
static void baseline(sm_points *base)
{
    struct opened o;

    reset_env();
    setenv("FAKE_NVML_DEVICES", "2", 1);
    o = open_gpu();
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_STR(o.res.msg, "");
    sample_once(base, &o);
    CHECK_EQ_INT(base->n, 2 * GPU_SERIES);
    close_gpu(&o);
}

/* Each health call of GPU 0 answering NOT_SUPPORTED (or NO_PERMISSION) from
 * the start: exactly the series it feeds are dropped, the open line (one
 * line) names each with NVML's text, nothing more is said while sampling,
 * and every other series of both GPUs keeps the value it has without the
 * failure.  Without a process list there is no gpu_memory_at_peak for that
 * GPU either. */
static void degrade_each_call(void)
{
    static const struct {
        const char *var, *rc;
        const char *drop[4];
        const char *line; /* the open message, whole */
    } cases[] = {
        {"FAKE_NVML_FAIL_CLOCK_0", "3",
         {"gpu_0_sm_clock_megahertz", "gpu_0_memory_clock_megahertz"},
         "gpu: gpu_0_sm_clock_megahertz dropped: nvmlDeviceGetClockInfo says fake NVML: Not "
         "Supported; gpu_0_memory_clock_megahertz dropped: nvmlDeviceGetClockInfo says fake "
         "NVML: Not Supported"},
        {"FAKE_NVML_FAIL_REASONS_0", "3",
         {"gpu_0_throttled_percentage", "gpu_0_throttled_power_percentage",
          "gpu_0_throttled_thermal_percentage"},
         "gpu: gpu_0_throttled_* dropped: nvmlDeviceGetCurrentClocksEventReasons says fake "
         "NVML: Not Supported"},
        {"FAKE_NVML_FAIL_FIELDS_0", "3",
         {"gpu_0_pcie_receive_megabytes", "gpu_0_pcie_transmit_megabytes"},
         "gpu: gpu_0_pcie_receive_megabytes dropped: nvmlDeviceGetFieldValues says fake NVML: "
         "Not Supported; gpu_0_pcie_transmit_megabytes dropped: nvmlDeviceGetFieldValues says "
         "fake NVML: Not Supported"},
        {"FAKE_NVML_FAIL_PCIE_TX_0", "3", /* one field of the call, the other answers */
         {"gpu_0_pcie_transmit_megabytes"},
         "gpu: gpu_0_pcie_transmit_megabytes dropped: nvmlDeviceGetFieldValues says fake NVML: "
         "Not Supported"},
        {"FAKE_NVML_FAIL_PROCS_0", "3",
         {"gpu_0_process_memory_megabytes"},
         "gpu: gpu_0_process_memory_megabytes dropped: nvmlDeviceGetComputeRunningProcesses_v3 "
         "says fake NVML: Not Supported"},
        {"FAKE_NVML_FAIL_PROCS_0", "4", /* NO_PERMISSION: the same */
         {"gpu_0_process_memory_megabytes"},
         "gpu: gpu_0_process_memory_megabytes dropped: nvmlDeviceGetComputeRunningProcesses_v3 "
         "says fake NVML: Insufficient Permissions"},
    };
    sm_points *base = calloc(1, sizeof *base), *p = calloc(1, sizeof *p);
    sm_tags *t = calloc(1, sizeof *t);

    baseline(base);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct opened o;
        const char *err, *peak;

        reset_env();
        setenv("FAKE_NVML_DEVICES", "2", 1);
        setenv(cases[c].var, cases[c].rc, 1);
        o = open_gpu();
        CHECK_EQ_INT(o.rc, 0);
        CHECK_EQ_STR(o.res.status, "nvml 550.54.15, 2 devices");
        CHECK_EQ_STR(o.res.msg, cases[c].line);
        for (int k = 0; k < 2; k++) { /* the drop holds; said once, at open */
            err = sample_said(p, &o);
            CHECK_EQ_STR(err, "");
            same_but(p, base, cases[c].drop);
        }
        t->n = 0;
        sm__coll_gpu.tags(o.state, SM_TAGS_WINDOW, t);
        peak = tag_of(t, "gpu_memory_at_peak");
        CHECK(peak != NULL && strstr(peak, "gpu1 used_mb=") != NULL);
        if (strcmp(cases[c].drop[0], "gpu_0_process_memory_megabytes") == 0)
            CHECK(peak != NULL && strncmp(peak, "gpu1 ", 5) == 0); /* no gpu0 clause */
        else
            CHECK(peak != NULL && strncmp(peak, "gpu0 used_mb=", 13) == 0);
        close_gpu(&o);
    }
    free(t);
    free(p);
    free(base);
}

/* Remapped rows and retired pages are items of the gpu_events tag, not
 * series: a call that says NOT_SUPPORTED at open leaves its items out for
 * the run (docs/gpu.md, "Events"), the other call's items and the other
 * GPU's stay, and no series of either GPU changes. */
static void degrade_remap_and_retired(void)
{
    static const char *const none[] = {NULL};
    static const struct {
        const char *var;
        const char *tag;
    } cases[] = {
        {NULL, "gpu0 remapped_uncorrected=2 remap_pending=1 retired_pages_dbe=3; "
               "gpu1 remapped_corrected=1"},
        {"FAKE_NVML_FAIL_REMAP_0", "gpu0 retired_pages_dbe=3; gpu1 remapped_corrected=1"},
        {"FAKE_NVML_FAIL_RETIRED_0",
         "gpu0 remapped_uncorrected=2 remap_pending=1; gpu1 remapped_corrected=1"},
    };
    sm_points *base = calloc(1, sizeof *base), *p = calloc(1, sizeof *p);
    sm_tags *t = calloc(1, sizeof *t);

    baseline(base);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct opened o;

        reset_env();
        setenv("FAKE_NVML_DEVICES", "2", 1);
        setenv("FAKE_NVML_REMAP_0", "0,2,1,0", 1);
        setenv("FAKE_NVML_RETIRED_0", "0,3", 1);
        setenv("FAKE_NVML_REMAP_1", "1,0,0,0", 1);
        if (cases[c].var)
            setenv(cases[c].var, "3", 1);
        o = open_gpu();
        CHECK_EQ_INT(o.rc, 0);
        t->n = 0;
        sm__coll_gpu.tags(o.state, SM_TAGS_START, t);
        CHECK_EQ_STR(tag_of(t, "gpu_events"), cases[c].tag);
        CHECK_EQ_STR(sample_said(p, &o), "");
        same_but(p, base, none);
        t->n = 0; /* the window re-reads them: still left out, nothing new */
        sm__coll_gpu.tags(o.state, SM_TAGS_END, t);
        CHECK_EQ_STR(tag_of(t, "gpu_events"), cases[c].tag);
        close_gpu(&o);
    }
    free(t);
    free(p);
    free(base);
}

/* A transient error at open (UNKNOWN, the open's reading only) is not
 * NOT_SUPPORTED: the rows and pages are read again at the next window and
 * reach the tag (the failure policy: any other error skips that one
 * reading).  It once left them out for the whole run. */
static void remap_transient_at_open(void)
{
    const char *tags[2] = {"FAKE_NVML_FAIL_REMAP_0", "FAKE_NVML_FAIL_RETIRED_0"};
    const char *want[2] = {"gpu0 remapped_uncorrected=2 remap_pending=1",
                           "gpu0 retired_pages_dbe=3"};
    sm_points *p = calloc(1, sizeof *p);
    sm_tags *t = calloc(1, sizeof *t);

    for (int c = 0; c < 2; c++) {
        struct opened o;

        reset_env();
        setenv(c ? "FAKE_NVML_RETIRED_0" : "FAKE_NVML_REMAP_0", c ? "0,3" : "0,2,1,0", 1);
        setenv(tags[c], "999", 1);
        setenv("FAKE_NVML_FAIL_TIMES_0", c ? "2" : "1", 1); /* pages: one call per cause */
        o = open_gpu();
        CHECK_EQ_INT(o.rc, 0);
        t->n = 0;
        sm__coll_gpu.tags(o.state, SM_TAGS_START, t);
        CHECK(tag_of(t, "gpu_events") == NULL); /* the open's reading failed */
        sample_once(p, &o);
        CHECK_EQ_INT(p->n, GPU_SERIES);
        t->n = 0;
        sm__coll_gpu.tags(o.state, SM_TAGS_WINDOW, t);
        CHECK_EQ_STR(tag_of(t, "gpu_events"), want[c]);
        close_gpu(&o);
    }
    free(t);
    free(p);
}

/* A health call that starts failing mid-run (fake_nvml_fail between
 * samples): NOT_SUPPORTED drops its series for the rest of the run with one
 * warning line, even when the call answers again later; ECC's two series
 * from one call are one line; another error skips the value with one line a
 * streak and "recovered" when it answers; every other series keeps its
 * value throughout. */
static void health_fails_mid_run(void)
{
    static const char *const none[] = {NULL};
    static const char *const thr[] = {"gpu_0_throttled_percentage",
                                      "gpu_0_throttled_power_percentage",
                                      "gpu_0_throttled_thermal_percentage", NULL};
    static const char *const thr_ecc[] = {
        "gpu_0_throttled_percentage", "gpu_0_throttled_power_percentage",
        "gpu_0_throttled_thermal_percentage", "gpu_0_ecc_errors_corrected",
        "gpu_0_ecc_errors_uncorrected", NULL};
    static const char *const thr_ecc_temp[] = {
        "gpu_0_throttled_percentage", "gpu_0_throttled_power_percentage",
        "gpu_0_throttled_thermal_percentage", "gpu_0_ecc_errors_corrected",
        "gpu_0_ecc_errors_uncorrected", "gpu_0_temperature_celsius", NULL};
    static const char *const thr_ecc_procs[] = {
        "gpu_0_throttled_percentage", "gpu_0_throttled_power_percentage",
        "gpu_0_throttled_thermal_percentage", "gpu_0_ecc_errors_corrected",
        "gpu_0_ecc_errors_uncorrected", "gpu_0_process_memory_megabytes", NULL};
    sm_points *base = calloc(1, sizeof *base), *p = calloc(1, sizeof *p);
    struct opened o;
    const char *err;

    baseline(base);
    reset_env();
    setenv("FAKE_NVML_DEVICES", "2", 1);
    o = open_gpu();
    CHECK_EQ_INT(o.rc, 0);
    sample_once(p, &o);
    same_but(p, base, none);

    fail_call(0, "REASONS", 3);
    err = sample_said(p, &o);
    same_but(p, base, thr);
    CHECK_EQ_STR(err, "scopemeter: warning: gpu: gpu_0_throttled_* dropped: "
                      "nvmlDeviceGetCurrentClocksEventReasons says fake NVML: Not Supported\n");
    fail_call(0, "REASONS", 0); /* answers again: dropped is dropped */
    CHECK_EQ_STR(sample_said(p, &o), "");
    same_but(p, base, thr);

    fail_call(0, "ECC", 3);
    err = sample_said(p, &o);
    same_but(p, base, thr_ecc);
    CHECK_EQ_STR(err, "scopemeter: warning: gpu: gpu_0_ecc_errors_* dropped: "
                      "nvmlDeviceGetTotalEccErrors says fake NVML: Not Supported\n");

    fail_call(0, "TEMP", 999);
    for (int k = 0; k < 2; k++) { /* one line for the streak */
        err = sample_said(p, &o);
        same_but(p, base, thr_ecc_temp);
        CHECK_EQ_STR(err, k ? "" : "scopemeter: warning: gpu: GPU 0: nvmlDeviceGetTemperatureV "
                                   "failed: fake NVML: Unknown Error; its values are skipped "
                                   "until it recovers\n");
    }
    fail_call(0, "TEMP", 0);
    err = sample_said(p, &o);
    same_but(p, base, thr_ecc);
    CHECK_EQ_STR(err, "scopemeter: gpu: GPU 0 recovered\n");

    fail_call(0, "PROCS", 4);
    err = sample_said(p, &o);
    same_but(p, base, thr_ecc_procs);
    CHECK_EQ_STR(err, "scopemeter: warning: gpu: gpu_0_process_memory_megabytes dropped: "
                      "nvmlDeviceGetComputeRunningProcesses_v3 says fake NVML: Insufficient "
                      "Permissions\n");
    CHECK_EQ_STR(sample_said(p, &o), "");
    same_but(p, base, thr_ecc_procs);
    close_gpu(&o);
    free(p);
    free(base);
}

/* The test's own monotonic clock (struct gpu's now): no verdict depends
 * on how fast the samples run. */
static double test_clock;
static double clock_now(void)
{
    return test_clock;
}

/* Detail level full: GPU 0 has GPM (Hopper), GPU 1 not (before it).  The
 * GPM metrics are the fake's rates of the interval between two samples
 * (nvml.h: nvmlGpmMetricsGet), the previous sample's buffer the first of
 * the pair; a sample < 100 ms after the last takes no GPM value; a metric
 * the driver refuses is dropped alone with one line; NVLink from the field
 * counters (KiB, summed over links) on both; energy since open through a
 * driver reload in the end tag. */
static void gpm_energy_full(void)
{
    sm_points *p = calloc(1, sizeof *p);
    sm_tags *t = calloc(1, sizeof *t);
    struct opened o;
    struct gpu *g;
    const char *err;
    char msg[300] = "";

    reset_env();
    mask_work = 0;
    setenv("SCOPEMETER_DETAIL", "full", 1);
    setenv("FAKE_NVML_DEVICES", "2", 1);
    setenv("FAKE_NVML_GPM_1", "0", 1);
    setenv("FAKE_NVML_GPM_SM_0", "60,80,70", 1);     /* per interval: open's, 1st, 2nd */
    setenv("FAKE_NVML_GPM_TENSOR_0", "5,25,45", 1);
    setenv("FAKE_NVML_GPM_FAIL_OCC_0", "3", 1);     /* NOT_SUPPORTED */
    setenv("FAKE_NVML_NVLINK_RX_0", "1000,3000,3000,7000", 1); /* KiB */
    setenv("FAKE_NVML_NVLINK_TX_1", "500,1524", 1);
    setenv("FAKE_NVML_ENERGY_0", "1000000000,4600000000,1000", 1); /* mJ; reload */
    o = open_gpu();
    unsetenv("SCOPEMETER_DETAIL");
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_STR(o.res.msg, "gpu: gpu_1_{sm_active,sm_occupancy,tensor_active,dram_bandwidth}"
                            "_percentage dropped: nvmlGpmQueryDeviceSupport says fake NVML: "
                            "Not Supported");
    g = o.state;
    g->now = clock_now;
    test_clock = g->dev[0].gpm_t + 1.0;

    capture_begin();
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    err = capture_end();
    CHECK_EQ_STR(err, "scopemeter: warning: gpu: gpu_0_sm_occupancy_percentage dropped: "
                      "nvmlGpmMetricsGet(NVML_GPM_METRIC_SM_OCCUPANCY) says fake NVML: Not "
                      "Supported\n");
    CHECK_EQ_INT(p->n, (GPU_SERIES + 3 + 2) + (GPU_SERIES + 2));
    CHECK_NEAR(value(p, "gpu_0_sm_active_percentage"), 80.0, 1e-9);
    CHECK_NEAR(value(p, "gpu_0_tensor_active_percentage"), 25.0, 1e-9);
    CHECK_NEAR(value(p, "gpu_0_dram_bandwidth_percentage"), 10.0, 1e-9);
    CHECK(find(p, "gpu_0_sm_occupancy_percentage") == NULL);
    CHECK(find(p, "gpu_1_sm_active_percentage") == NULL);
    CHECK_NEAR(value(p, "gpu_0_nvlink_receive_megabytes"), 2000 * 1024 / 1e6, 1e-12);
    CHECK_NEAR(value(p, "gpu_0_nvlink_transmit_megabytes"), 0.0, 1e-12);
    CHECK_NEAR(value(p, "gpu_1_nvlink_transmit_megabytes"), 1024 * 1024 / 1e6, 1e-12);
    CHECK_EQ_STR(find(p, "gpu_0_sm_active_percentage")->source,
                 "nvmlGpmMetricsGet(NVML_GPM_METRIC_SM_UTIL)");
    CHECK_EQ_STR(find(p, "gpu_1_nvlink_transmit_megabytes")->source,
                 "nvmlDeviceGetFieldValues(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX)");

    /* 50 ms later: no GPM pair (nvml.h: >= 100 ms), the counters go on */
    test_clock += 0.05;
    p->n = 0;
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    CHECK(find(p, "gpu_0_sm_active_percentage") == NULL);
    CHECK_NEAR(value(p, "gpu_0_nvlink_receive_megabytes"), 2000 * 1024 / 1e6, 1e-12);
    /* 200 ms after the last GPM sample: the next interval's rates */
    test_clock += 0.15;
    p->n = 0;
    capture_begin();
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    err = capture_end();
    CHECK_EQ_STR(err, "");
    CHECK_NEAR(value(p, "gpu_0_sm_active_percentage"), 70.0, 1e-9);
    CHECK_NEAR(value(p, "gpu_0_tensor_active_percentage"), 45.0, 1e-9);
    CHECK_NEAR(value(p, "gpu_0_nvlink_receive_megabytes"), 6000 * 1024 / 1e6, 1e-12);

    /* energy: +3.6e9 mJ, then a reload (1000 < last) counts whole */
    sm__coll_gpu.tags(o.state, SM_TAGS_WINDOW, t);
    CHECK(tag_of(t, "gpu_energy") == NULL);
    t->n = 0;
    sm__coll_gpu.tags(o.state, SM_TAGS_END, t);
    CHECK(tag_of(t, "gpu_energy") != NULL &&
          strcmp(tag_of(t, "gpu_energy"),
                 "gpu0 kwh=1.000000; gpu1 kwh=0.000000; total_kwh=1.000000") == 0);
    printf("gpu_energy: %s\n", tag_of(t, "gpu_energy") ? tag_of(t, "gpu_energy") : "(none)");
    close_gpu(&o);

    /* the default level: none of the six, the energy tag still there */
    reset_env();
    setenv("FAKE_NVML_DEVICES", "2", 1);
    o = open_gpu();
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_STR(o.res.msg, "");
    p->n = 0;
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    CHECK_EQ_INT(p->n, 2 * GPU_SERIES_DEFAULT);
    CHECK(find(p, "gpu_0_nvlink_receive_megabytes") == NULL);
    t->n = 0;
    sm__coll_gpu.tags(o.state, SM_TAGS_END, t);
    CHECK(tag_of(t, "gpu_energy") != NULL);
    close_gpu(&o);
    mask_work = 1;
    free(p);
    free(t);
}

/* MIG: one named instance gets its own GPM (nvmlGpmMigSampleGet with its
 * GPU instance id); two named instances of one board: one line, none. */
static void gpm_mig(void)
{
    sm_points *p = calloc(1, sizeof *p);
    struct opened o;
    struct gpu *g;
    char msg[300] = "";

    reset_env();
    mask_work = 0;
    setenv("SCOPEMETER_DETAIL", "full", 1);
    setenv("FAKE_NVML_MIG_0", "2", 1);
    setenv("FAKE_NVML_MIG_GPM_0_1", "33", 1);
    setenv("CUDA_VISIBLE_DEVICES", "MIG-f4ce0000-0001-4000-8000-000000000000", 1);
    o = open_gpu();
    CHECK_EQ_INT(o.rc, 0);
    g = o.state;
    g->now = clock_now;
    test_clock = g->dev[0].gpm_t + 1.0;
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    CHECK_NEAR(value(p, "gpu_0_sm_active_percentage"), 33.0, 1e-9);
    CHECK_NEAR(value(p, "gpu_0_dram_bandwidth_percentage"), 33.0, 1e-9);
    close_gpu(&o);

    setenv("CUDA_VISIBLE_DEVICES", "MIG-f4ce0000-0000-4000-8000-000000000000,"
                                   "MIG-f4ce0000-0001-4000-8000-000000000000", 1);
    o = open_gpu();
    unsetenv("SCOPEMETER_DETAIL");
    CHECK_EQ_INT(o.rc, 0);
    CHECK(strstr(o.res.msg, "gpu_0_{sm_active,sm_occupancy,tensor_active,dram_bandwidth}_"
                            "percentage dropped: nvmlGpmMigSampleGet (one series, several MIG "
                            "instances named)") != NULL);
    printf("two instances: %s\n", o.res.msg);
    p->n = 0;
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    CHECK(find(p, "gpu_0_sm_active_percentage") == NULL);
    close_gpu(&o);
    mask_work = 1;
    free(p);
}

/* A window's tags of o into t; the lines they printed. */
static const char *window_tags(struct opened *o, sm_tags *t)
{
    t->n = 0;
    capture_begin();
    sm__coll_gpu.tags(o->state, SM_TAGS_WINDOW, t);
    return capture_end();
}

/* The default level (docs/series.md "Levels"): the clocks and the ECC
 * counts are level full's series; the throttled shares and the PCIe bytes
 * stay.  The ECC counts are still read and said by the gpu_events tag and a
 * line: corrected ones when they first appear, an uncorrected one at once
 * (a warning); nothing new, nothing shipped.  At full both are series again,
 * the same counts. */
static void default_level(void)
{
    static const char *const full_only[] = {"sm_clock_megahertz", "memory_clock_megahertz",
                                            "ecc_errors_corrected", "ecc_errors_uncorrected"};
    sm_points *p = calloc(1, sizeof *p);
    sm_tags *t = calloc(1, sizeof *t);
    struct opened o;
    const char *err;
    char msg[300] = "", key[64];

    /* 2 GPUs; GPU 0's ECC counts read 0 at open, then 2 and 0, then 5 and 1 */
    static const char *const fake[][2] = {{"FAKE_NVML_DEVICES", "2"},
                                          {"FAKE_NVML_SM_CLOCK_0", "1410"},
                                          {"FAKE_NVML_ECC_CORR_0", "0,2,5"},
                                          {"FAKE_NVML_ECC_UNCORR_0", "0,0,1"}};

    reset_env();
    mask_work = 0;
    unsetenv("SCOPEMETER_DETAIL");
    for (size_t k = 0; k < sizeof fake / sizeof fake[0]; k++)
        setenv(fake[k][0], fake[k][1], 1);
    o = open_gpu();
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_STR(o.res.msg, "");
    sm__coll_gpu.tags(o.state, SM_TAGS_START, t);
    CHECK(tag_of(t, "gpu_events") == NULL);

    capture_begin();
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    err = capture_end();
    CHECK_EQ_STR(err, "");
    CHECK_EQ_INT(p->n, 2 * GPU_SERIES_DEFAULT);
    for (int d = 0; d < 2; d++)
        for (size_t k = 0; k < sizeof full_only / sizeof full_only[0]; k++) {
            snprintf(key, sizeof key, "gpu_%d_%s", d, full_only[k]);
            CHECK(find(p, key) == NULL);
        }
    CHECK(find(p, "gpu_0_throttled_percentage") != NULL);
    CHECK(find(p, "gpu_0_pcie_receive_megabytes") != NULL);
    err = window_tags(&o, t);
    CHECK_EQ_STR(tag_of(t, "gpu_events"), "gpu0 ecc_corrected=2");
    CHECK_EQ_STR(err, "scopemeter: gpu: GPU 0: ECC errors since recording started: 2 corrected, "
                      "0 uncorrected (docs/gpu.md \"Events\")\n");

    p->n = 0;
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    err = window_tags(&o, t);
    CHECK_EQ_STR(tag_of(t, "gpu_events"), "gpu0 ecc_corrected=5 ecc_uncorrected=1");
    CHECK_EQ_STR(err, "scopemeter: warning: gpu: GPU 0: ECC errors since recording started: 5 "
                      "corrected, 1 uncorrected (docs/gpu.md \"Events\")\n");

    p->n = 0; /* the counters stay: nothing new, nothing shipped, no line */
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    err = window_tags(&o, t);
    CHECK(tag_of(t, "gpu_events") == NULL);
    CHECK_EQ_STR(err, "");
    t->n = 0;
    sm__coll_gpu.tags(o.state, SM_TAGS_END, t);
    CHECK_EQ_STR(tag_of(t, "gpu_events"), "gpu0 ecc_corrected=5 ecc_uncorrected=1");
    close_gpu(&o);

    /* level full: the four are series, the same counts */
    setenv("SCOPEMETER_DETAIL", "full", 1);
    setenv("FAKE_NVML_GPM", "0", 1);
    o = open_gpu();
    unsetenv("SCOPEMETER_DETAIL");
    CHECK_EQ_INT(o.rc, 0);
    for (int k = 0; k < 3; k++) {
        p->n = 0;
        CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    }
    CHECK_NEAR(value(p, "gpu_0_sm_clock_megahertz"), 1410.0, 0);
    CHECK(find(p, "gpu_1_memory_clock_megahertz") != NULL);
    CHECK_NEAR(value(p, "gpu_0_ecc_errors_corrected"), 5.0, 0);
    CHECK_NEAR(value(p, "gpu_0_ecc_errors_uncorrected"), 1.0, 0);
    close_gpu(&o);
    mask_work = 1;
    free(t);
    free(p);
}

int main(void)
{
    const char *dir = getenv("SM_FAKE_NVML_DIR");
    char path[512];
    void *fake;

    if (!dir) {
        fprintf(stderr, "SM_FAKE_NVML_DIR not set (run through meson test)\n");
        return 1;
    }
    snprintf(fake_path, sizeof fake_path, "%s/libnvidia-ml.so.1", dir);
    /* Held open for the whole test, so the fake's counters survive the
     * collector's dlclose and fake_nvml_init_refs() can be asked. */
    fake = dlopen(fake_path, RTLD_NOW | RTLD_LOCAL);
    if (!fake) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    {
        void *sym = dlsym(fake, "fake_nvml_init_refs");
        memcpy(&init_refs, &sym, sizeof sym);
    }
    {
        void *sym = dlsym(fake, "fake_nvml_raise_xid");
        memcpy(&raise_xid, &sym, sizeof sym);
    }
    {
        void *sym = dlsym(fake, "fake_nvml_fail");
        memcpy(&fail_call, &sym, sizeof sym);
    }
    {
        void *sym = dlsym(fake, "fake_nvml_fail_mig");
        memcpy(&fail_mig, &sym, sizeof sym);
    }
    {
        void *sym = dlsym(fake, "fake_nvml_event_set_live");
        memcpy(&event_set_live, &sym, sizeof sym);
    }
    if (!init_refs || !raise_xid || !fail_call || !fail_mig || !event_set_live) {
        fprintf(stderr, "fake_nvml_init_refs, fake_nvml_raise_xid, fake_nvml_fail, "
                "fake_nvml_fail_mig or fake_nvml_event_set_live missing\n");
        return 1;
    }
    snprintf(minimal_path, sizeof minimal_path, "%s/libnvidia-ml-minimal.so", dir);
    snprintf(next_path, sizeof next_path, "%s/libnvidia-ml-next.so", dir);

    snprintf(sysroot, sizeof sysroot, "/tmp/sm-test-gpu-XXXXXX");
    if (!mkdtemp(sysroot))
        return 1;
    snprintf(errfile, sizeof errfile, "%s/stderr", sysroot);
    snprintf(path, sizeof path, "%s/dev", sysroot);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/dev/nvidia0", sysroot);
    close(open(path, O_WRONLY | O_CREAT, 0600));
    /* the real /proc: who_holds_memory's processes are real ones */
    snprintf(path, sizeof path, "%s/proc", sysroot);
    if (symlink("/proc", path) < 0)
        return 1;
    snprintf(path, sizeof path, "%s/dev/nvidia0", sysroot);
    setenv("SCOPEMETER_SYSROOT", sysroot, 1);
    setenv("SCOPEMETER_NVML_LIBRARY", fake_path, 1);

    lost_mid_run();
    lost_at_open();
    transient_then_recovered();
    memory_v1_fallback();
    three_lines();
    health_values();
    ecc_through_a_clear();
    per_field_degrade();
    old_driver();
    xid_reaches_tag();
    temperature_v_first();
    events_set_undefined();
    who_holds_memory();
    mig_instance_fields();
    degrade_each_call();
    degrade_remap_and_retired();
    remap_transient_at_open();
    health_fails_mid_run();
    gpm_energy_full();
    gpm_mig();
    default_level();

    unlink(path);
    unlink(errfile);
    snprintf(path, sizeof path, "%s/proc", sysroot);
    unlink(path);
    snprintf(path, sizeof path, "%s/dev", sysroot);
    rmdir(path);
    rmdir(sysroot);
    dlclose(fake);
    return CHECK_DONE();
}
