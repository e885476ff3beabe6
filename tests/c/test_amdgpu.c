/* test_amdgpu.c — the amdgpu collector against the AMD fixture machines
 * (tests/fixtures/amd-*, written by tests/fixtures/make-amd-fixtures) and a
 * copy of one changed here: which render nodes count, the index base after
 * NVIDIA's, ROCR/HIP_VISIBLE_DEVICES, a file that fails and recovers, and
 * that the per-device series count is the collector's own and counted once. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"

static char fixtures[2048];

struct run {
    int rc;
    sm_opened res;
    sm_points pts;
    char msg[300];
};

static void *open_at(const char *root, unsigned base, struct run *r)
{
    sm_ctx ctx;
    void *state = calloc(1, sm__coll_amdgpu.state_size);

    memset(&ctx, 0, sizeof ctx);
    snprintf(ctx.sysroot, sizeof ctx.sysroot, "%s", root);
    memset(r, 0, sizeof *r);
    r->res.gpu_index_base = base;
    r->rc = sm__coll_amdgpu.open(state, &ctx, &r->res);
    if (r->rc != 0) {
        free(state);
        return NULL;
    }
    return state;
}

static void *open_fx(const char *name, unsigned base, struct run *r)
{
    char root[3000];
    snprintf(root, sizeof root, "%s/%s", fixtures, name);
    return open_at(root, base, r);
}

static int sample(void *state, struct run *r)
{
    r->pts.n = 0;
    r->msg[0] = '\0';
    return sm__coll_amdgpu.sample(state, &r->pts, r->msg, sizeof r->msg);
}

static const sm_point *point(const struct run *r, const char *key)
{
    for (size_t i = 0; i < r->pts.n; i++)
        if (strcmp(r->pts.v[i].key, key) == 0)
            return &r->pts.v[i];
    return NULL;
}

static void close_coll(void *state)
{
    if (state) {
        sm__coll_amdgpu.close(state);
        free(state);
    }
}

static void test_fixtures(void)
{
    struct run r;
    const sm_point *p;
    void *s;

    /* one of two given: card1 as gpu_0, all five series */
    s = open_fx("amd-two-cards-one-given", 0, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_STR(r.res.status, "amdgpu sysfs, 1 device (renderD129=card1 as gpu_0)");
    CHECK_EQ_INT(r.res.gpu_index_next, 1);
    CHECK_EQ_INT(sample(s, &r), 0);
    /* the fixtures have no /proc: all but the process memory (tests/py/test_amdgpu.py
     * gives a /proc and checks that one) */
    CHECK_EQ_INT(r.pts.n, (size_t)sm__coll_amdgpu.series_per_device - 1);
    p = point(&r, "gpu_0_utilization_percentage");
    CHECK(p && p->value == 88.0 && strcmp(p->unit, "percent") == 0);
    p = point(&r, "gpu_0_power_usage_watts");
    CHECK(p && p->value == 402.5 && p->agg == SM_AGG_MEAN);
    p = point(&r, "gpu_0_power_usage_percentage");
    CHECK(p && p->value == 100.0 * 402500000.0 / 560000000.0);
    p = point(&r, "gpu_0_memory_usage_megabytes");
    CHECK(p && p->value == 53687091200.0 / 1e6);
    close_coll(s);

    /* after two NVIDIA GPUs: gpu_2, gpu_3 */
    s = open_fx("amd-two-cards", 2, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_INT(r.res.gpu_index_next, 4);
    CHECK_EQ_STR(r.res.msg, "amdgpu: renderD128=card0 as gpu_2, renderD129=card1 as gpu_3 "
                            "(indices after NVIDIA's 2); gpu_*_process_memory_megabytes "
                            "dropped: cannot list /proc");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK(point(&r, "gpu_2_utilization_percentage") != NULL);
    CHECK(point(&r, "gpu_3_power_usage_percentage") != NULL);
    CHECK(point(&r, "gpu_0_utilization_percentage") == NULL);
    close_coll(s);

    /* narrowing keeps the key index of the device (as NVML's for CUDA) */
    setenv("ROCR_VISIBLE_DEVICES", "GPU-a1b2c3d4e5f60718", 1);
    s = open_fx("amd-two-cards", 0, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_STR(r.res.status, "amdgpu sysfs, 1 device (renderD129=card1 as gpu_1)");
    CHECK_EQ_INT(r.res.gpu_index_next, 2); /* what the container was given, narrowed or not */
    close_coll(s);
    setenv("HIP_VISIBLE_DEVICES", "1", 1); /* of the one ROCR left: none */
    s = open_fx("amd-two-cards", 0, &r);
    CHECK_EQ_INT(r.rc, SM_ABSENT);
    CHECK_EQ_STR(r.res.status, "none: HIP_VISIBLE_DEVICES selects no AMD device");
    unsetenv("ROCR_VISIBLE_DEVICES");
    unsetenv("HIP_VISIBLE_DEVICES");

    /* no hwmon: 5 series for gpu_0 (no power, no temperature), 8 for gpu_1
     * (power1_input) */
    s = open_fx("amd-no-hwmon", 0, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_INT(r.pts.n, 13);
    CHECK(point(&r, "gpu_0_temperature_celsius") == NULL);
    p = point(&r, "gpu_1_temperature_celsius");
    CHECK(p && p->value == 52.0 && strcmp(p->unit, "celsius") == 0);
    p = point(&r, "gpu_0_sm_clock_megahertz");
    CHECK(p && p->value == 2100.0 && strcmp(p->unit, "MHz") == 0);
    p = point(&r, "gpu_1_memory_clock_megahertz");
    CHECK(p && p->value == 1249.0);
    CHECK(point(&r, "gpu_0_power_usage_watts") == NULL);
    p = point(&r, "gpu_1_power_usage_watts");
    CHECK(p && p->value == 198.0);
    close_coll(s);

    /* an NVIDIA render node beside the AMD one: skipped, saying why */
    s = open_fx("amd-with-nvidia-card", 0, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_STR(r.res.msg, "amdgpu: renderD129=card1 as gpu_0; skipped renderD128: vendor "
                            "0x10de, not AMD; gpu_*_process_memory_megabytes dropped: cannot "
                            "list /proc");
    close_coll(s);

    /* no render node: absent without a word */
    s = open_at("/nonexistent-sysroot", 0, &r);
    CHECK_EQ_INT(r.rc, SM_ABSENT);
    CHECK_EQ_STR(r.res.msg, "");
    CHECK_EQ_STR(r.res.status, "");
}

/* A copy of amd-two-cards-one-given whose files fail and come back. */
static void test_failing_file(void)
{
    char tmp[] = "/tmp/sm-test-amdgpu-XXXXXX", cmd[4200], busy[600], cap[600];
    struct run r;
    void *s;
    FILE *f;

    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        exit(2);
    }
    snprintf(cmd, sizeof cmd, "cp -a '%s/amd-two-cards-one-given/.' '%s'", fixtures, tmp);
    CHECK_EQ_INT(system(cmd), 0);
    snprintf(busy, sizeof busy, "%s/sys/devices/pci0000:00/0000:00:02.1/0000:0c:00.0/"
             "gpu_busy_percent", tmp);
    snprintf(cap, sizeof cap, "%s/sys/devices/pci0000:00/0000:00:02.1/0000:0c:00.0/"
             "hwmon/hwmon3/power1_cap", tmp);
    s = open_at(tmp, 0, &r);
    CHECK_EQ_INT(r.rc, 0);
    /* rewritten in place (the kept descriptor sees it): not a number */
    f = fopen(busy, "w");
    fputs("busy\n", f);
    fclose(f);
    CHECK_EQ_INT(sample(s, &r), 0); /* the sample goes on; that value is skipped */
    CHECK(point(&r, "gpu_0_utilization_percentage") == NULL);
    CHECK(point(&r, "gpu_0_memory_usage_megabytes") != NULL);
    f = fopen(busy, "w");
    fputs("12\n", f);
    fclose(f);
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK(point(&r, "gpu_0_utilization_percentage") &&
          point(&r, "gpu_0_utilization_percentage")->value == 12.0);
    /* the cap is read every sample: a new cap changes the percentage */
    f = fopen(cap, "w");
    fputs("805000000\n", f);
    fclose(f);
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK(point(&r, "gpu_0_power_usage_percentage") &&
          point(&r, "gpu_0_power_usage_percentage")->value == 50.0);
    close_coll(s);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK_EQ_INT(system(cmd), 0);
}

static void test_counts(void)
{
    /* a GPU is either vendor's: the AMD row adds no series per device, and
     * plan counts NVIDIA's, which has at least AMD's (docs/plan.md) */
    CHECK(sm__coll_amdgpu.series_per_device <= sm__coll_gpu.series_per_device);
    CHECK_EQ_INT(sm__collectors_series(2, 0, NULL) - sm__collectors_series(0, 0, NULL),
                 2 * sm__coll_gpu.series_per_device);
    CHECK(sm__gpu_keys(63) != NULL && sm__gpu_keys(64) == NULL);
    CHECK_EQ_STR(sm__gpu_keys(12)[4], "gpu_12_power_usage_percentage");
}

int main(void)
{
    const char *f = getenv("SM_FIXTURES");

    snprintf(fixtures, sizeof fixtures, "%s", f ? f : "tests/fixtures");
    unsetenv("ROCR_VISIBLE_DEVICES");
    unsetenv("HIP_VISIBLE_DEVICES");
    test_fixtures();
    test_failing_file();
    test_counts();
    return CHECK_DONE();
}
