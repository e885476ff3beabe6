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
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"

static const char *fake_vars[] = {
    "FAKE_NVML_DEVICES",    "FAKE_NVML_LOST_AFTER_1", "FAKE_NVML_FAIL_UTIL_0",
    "FAKE_NVML_FAIL_TIMES_0", "FAKE_NVML_FAIL_MEMV2_0", "CUDA_VISIBLE_DEVICES",
    "FAKE_NVML_INIT_FAIL",  "FAKE_NVML_COUNT_FAIL",   "FAKE_NVML_LOST_AFTER_0",
};

static char sysroot[256];
static char fake_path[1024];
static int (*init_refs)(void);

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

static void reset_env(void)
{
    for (size_t i = 0; i < sizeof fake_vars / sizeof fake_vars[0]; i++)
        unsetenv(fake_vars[i]);
}

struct opened {
    void *state;
    sm_opened res;
    int rc;
};

static struct opened open_gpu(void)
{
    struct opened o;
    sm_ctx ctx;

    memset(&o, 0, sizeof o);
    CHECK_EQ_INT(sm__ctx_init(&ctx), 0);
    o.state = calloc(1, sm__coll_gpu.state_size);
    o.rc = sm__coll_gpu.open(o.state, &ctx, &o.res);
    return o;
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
    CHECK_EQ_INT(p->n, 10);
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
    CHECK_EQ_INT(p->n, 5);
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
    CHECK_EQ_INT(p->n, 5);
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
    CHECK_EQ_INT(p->n, 5);
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
    CHECK_EQ_INT(p->n, 4);
    CHECK(find(p, "gpu_0_utilization_percentage") == NULL);
    CHECK_EQ_INT(count_lines(err), 1);
    CHECK(strstr(err, "nvmlDeviceGetUtilizationRates failed: fake NVML: Unknown Error") != NULL);

    p->n = 0;
    capture_begin();
    CHECK_EQ_INT(sm__coll_gpu.sample(o.state, p, msg, sizeof msg), 0);
    err = capture_end();
    CHECK_EQ_INT(p->n, 5);
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
    if (!init_refs) {
        fprintf(stderr, "fake_nvml_init_refs missing\n");
        return 1;
    }

    snprintf(sysroot, sizeof sysroot, "/tmp/sm-test-gpu-XXXXXX");
    if (!mkdtemp(sysroot))
        return 1;
    snprintf(errfile, sizeof errfile, "%s/stderr", sysroot);
    snprintf(path, sizeof path, "%s/dev", sysroot);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/dev/nvidia0", sysroot);
    close(open(path, O_WRONLY | O_CREAT, 0600));
    setenv("SCOPEMETER_SYSROOT", sysroot, 1);
    setenv("SCOPEMETER_NVML_LIBRARY", fake_path, 1);

    lost_mid_run();
    lost_at_open();
    transient_then_recovered();
    memory_v1_fallback();
    three_lines();

    unlink(path);
    unlink(errfile);
    snprintf(path, sizeof path, "%s/dev", sysroot);
    rmdir(path);
    rmdir(sysroot);
    dlclose(fake);
    return CHECK_DONE();
}
