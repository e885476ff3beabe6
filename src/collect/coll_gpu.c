/*
 * coll_gpu.c — gpu_<i>_* series (docs/design.md §1) from NVML, loaded at run time:
 * MLflow's five, the ten health fields (temperature, clocks, clock-event
 * reasons, PCIe and ECC counters) and the gpu_events tag (Xid errors from an
 * event set polled with a zero timeout, remapped rows, retired pages;
 * docs/gpu.md).  It must never wait inside the driver: a sample's calls all
 * return at once.
 *
 * This file is the collector's face: the keys, open, sample, close and the
 * ops table.  The jobs are one file each, below it (gpu_int.h lists them):
 * the binding (gpu_nvml.c), which GPUs (gpu_select.c), a sample's queries
 * (gpu_query.c), who holds the memory (gpu_holders.c), the tags
 * (gpu_events.c).
 *
 * Failure policy (docs/design.md §6): library not loadable or not NVML, init or
 * device count failing: one warning, gpu_* absent, the tag says why with
 * NVML's own text.  A missing optional entry point or NOT_SUPPORTED /
 * NO_PERMISSION drops that one metric of that device; GPU_IS_LOST drops the
 * device with one line; any other error skips the value of that sample (one
 * line per streak).  No allocation or formatting per sample.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_int.h"
#include "parse.h"

/*
 * The upstream keys, as MLflow's GPUMonitor writes them: gpu_<i>_<suffix>,
 * i the NVML index.  Static storage: a point's key must outlive the
 * collector (a consumer may name its points after closing the set), and
 * nothing is formatted per sample.
 */
#define GPU_KEYS(i)                                                                         \
    {"gpu_" #i "_memory_usage_percentage", "gpu_" #i "_memory_usage_megabytes",             \
     "gpu_" #i "_utilization_percentage",  "gpu_" #i "_power_usage_watts",                  \
     "gpu_" #i "_power_usage_percentage",  "gpu_" #i "_temperature_celsius",                   \
     "gpu_" #i "_sm_clock_megahertz",      "gpu_" #i "_memory_clock_megahertz",                \
     "gpu_" #i "_throttled_percentage",    "gpu_" #i "_throttled_power_percentage",            \
     "gpu_" #i "_throttled_thermal_percentage", "gpu_" #i "_pcie_receive_megabytes",           \
     "gpu_" #i "_pcie_transmit_megabytes", "gpu_" #i "_ecc_errors_corrected",                  \
     "gpu_" #i "_ecc_errors_uncorrected",  "gpu_" #i "_process_memory_megabytes",              \
     "gpu_" #i "_sm_active_percentage",    "gpu_" #i "_sm_occupancy_percentage",               \
     "gpu_" #i "_tensor_active_percentage", "gpu_" #i "_dram_bandwidth_percentage",            \
     "gpu_" #i "_nvlink_receive_megabytes", "gpu_" #i "_nvlink_transmit_megabytes"}
#define GPU_KEYS10(t)                                                                       \
    GPU_KEYS(t##0), GPU_KEYS(t##1), GPU_KEYS(t##2), GPU_KEYS(t##3), GPU_KEYS(t##4),         \
        GPU_KEYS(t##5), GPU_KEYS(t##6), GPU_KEYS(t##7), GPU_KEYS(t##8), GPU_KEYS(t##9)
static const char *const gpu_keys[GPU_MAX][M_COUNT] = {
    GPU_KEYS(0), GPU_KEYS(1), GPU_KEYS(2), GPU_KEYS(3), GPU_KEYS(4),
    GPU_KEYS(5), GPU_KEYS(6), GPU_KEYS(7), GPU_KEYS(8), GPU_KEYS(9),
    GPU_KEYS10(1), GPU_KEYS10(2), GPU_KEYS10(3), GPU_KEYS10(4), GPU_KEYS10(5),
    GPU_KEYS(60), GPU_KEYS(61), GPU_KEYS(62), GPU_KEYS(63),
};
_Static_assert(sizeof gpu_keys / sizeof gpu_keys[0] == GPU_MAX, "one key row per index");
_Static_assert(GPU_MAX * (M_COUNT - 1) + 512 /* PROC_POINTS_MAX */ + 19 + 64 * 3 <=
                   SM_POINTS_MAX,
               "a sample of every GPU and the other collectors fits sm_points");

const char *const *sm__gpu_keys(unsigned int i)
{
    return i < GPU_MAX ? gpu_keys[i] : NULL;
}

/* Open, step 2: a handle and a first query for every selected device; a
 * lost one or a metric it lacks goes into devnote. */
static void open_devices(struct gpu *g, const unsigned int *sel, size_t nsel, unsigned int drop,
                         char *devnote, size_t devcap)
{
    g->n = 0;
    for (size_t i = 0; i < nsel; i++) {
        struct gpu_dev *d = &g->dev[g->n];
        sm_nvml_return nrc;
        memset(d, 0, sizeof *d);
        d->index = sel[i];
        d->want = ALL_BITS & ~drop & (g->detail_full ? ALL_BITS : ~FULL_BITS);
        d->key = gpu_keys[d->index];
        d->nmig = g->sel_nmig[d->index];
        memcpy(d->mig, g->sel_mig[d->index], sizeof d->mig);
        d->procs_source = d->nmig ? "nvmlDeviceGetComputeRunningProcesses_v3(MIG device handle)"
                                  : "nvmlDeviceGetComputeRunningProcesses_v3";
        nrc = g->f.handle(d->index, &d->h);
        if (nrc != SM_NVML_SUCCESS) {
            sm__line_join(devnote, devcap, "GPU %u %s(nvmlDeviceGetHandleByIndex_v2: %s): "
                         "gpu_%u_* dropped", d->index,
                         nrc == SM_NVML_ERROR_GPU_IS_LOST ? "lost " : "", sm__gpu_nvml_text(g, nrc),
                         d->index);
            continue;
        }
        sm__gpu_query_device(g, d, NULL, 1, devnote, devcap);
        if (d->lost)
            continue;
        sm__gpu_gpm_open(g, d, devnote, devcap);
        sm__gpu_gpm_query(g, d, NULL, 1, devnote, devcap);
        g->n++;
    }
    sm__gpu_say_drops(g, devnote, devcap);
}

static int gpu_open(void *state, const sm_ctx *ctx, sm_opened *res)
{
    struct gpu *g = state;
    const char *libname = getenv("SCOPEMETER_NVML_LIBRARY");
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    char node[64] = "", driver[SM_NVML_DRIVER_VERSION_BUFFER] = "";
    char selnote[sizeof res->msg] = "", devnote[sizeof res->msg] = "";
    char symnote[sizeof res->msg] = "";
    unsigned int sel[GPU_MAX], drop = 0;
    size_t nsel;
    int initialized = 0, rc;

    if (!libname || !*libname)
        libname = "libnvidia-ml.so.1";
    g->now = sm__now_mono;
    g->detail_full = ctx->detail == SM_DETAIL_FULL;

    if (!sm__gpu_find_dev_node(ctx, node, sizeof node)) {
        sm__line(res->msg, sizeof res->msg,
                "no /dev/nvidia device: gpu_* series absent (normal on CPU workers)");
        sm__line(res->status, sizeof res->status, "none: no /dev/nvidia device");
        return SM_ABSENT;
    }
    if (visible) {
        /* "", "-1", "NoDevFiles": CUDA shows this process no device at all,
         * which needs no NVML to know. */
        char first[256];
        sm__list_entry(visible, first, sizeof first);
        if (!sm__gpu_entry_shape_ok(first)) {
            sm__line(res->msg, sizeof res->msg,
                    "CUDA_VISIBLE_DEVICES='%.64s' gives this process no GPU: gpu_* series absent",
                    visible);
            sm__line(res->status, sizeof res->status,
                    "none: CUDA_VISIBLE_DEVICES selects no device");
            return SM_ABSENT;
        }
    }

    rc = sm__gpu_load_nvml(g, libname, node, &drop, symnote, sizeof symnote, &initialized, res);
    if (rc < 0)
        goto fail;
    if (g->f.driver_version &&
        g->f.driver_version(driver, sizeof driver) == SM_NVML_SUCCESS) {
        driver[sizeof driver - 1] = '\0';
        sm__build_note_nvml(driver); /* the build tag's nvml= */
    } else
        snprintf(driver, sizeof driver, "(driver version unknown)");

    nsel = sm__gpu_select_devices(g, visible, sel, selnote, sizeof selnote);
    if (nsel == 0) {
        sm__line(res->msg, sizeof res->msg,
                "CUDA_VISIBLE_DEVICES='%.64s' names none of the %u NVML devices%s: "
                "gpu_* series absent", visible, g->n_nvml,
                g->f.uuid ? "" : " (NVML lacks nvmlDeviceGetUUID)");
        sm__line(res->status, sizeof res->status, "none: CUDA_VISIBLE_DEVICES selects no device");
        sm__gpu_unload(g, initialized);
        return SM_ABSENT;
    }
    sm__gpu_procs_open(&g->procs, ctx);
    drop |= sm__gpu_procs_ns_drop(g, devnote, sizeof devnote);
    open_devices(g, sel, nsel, drop, devnote, sizeof devnote);
    if (g->n == 0) {
        sm__line(res->msg, sizeof res->msg, "no usable GPU although /dev/%s exists: %s", node,
                devnote);
        sm__line(res->status, sizeof res->status, "unavailable: %s", devnote);
        rc = -ENODEV;
        goto fail;
    }
    g->t_open = sm__now_mono();
    sm__gpu_procs_ranks(g, ctx, devnote, sizeof devnote);
    sm__gpu_events_open(g, devnote, sizeof devnote);
    sm__gpu_health_read(g, 1);
    sm__gpu_energy_open(g, devnote, sizeof devnote);
    sm__line(res->status, sizeof res->status, "nvml %s, %zu device%s", driver, g->n,
            g->n == 1 ? "" : "s");
    /* an AMD GPU beside these takes the indices after NVML's (coll_amdgpu.c) */
    res->gpu_index_next = g->n_nvml < GPU_MAX ? g->n_nvml : GPU_MAX;
    /* One line; what explains a missing series first: the selection, lost
     * devices and dropped metrics, then entry points the library lacks. */
    if (selnote[0] || devnote[0] || symnote[0]) {
        sm__line(res->msg, sizeof res->msg, "gpu: ");
        if (selnote[0])
            sm__line_join(res->msg + 5, sizeof res->msg - 5, "%s", selnote);
        if (devnote[0])
            sm__line_join(res->msg + 5, sizeof res->msg - 5, "%s", devnote);
        if (symnote[0])
            sm__line_join(res->msg + 5, sizeof res->msg - 5, "%s", symnote);
    }
    return 0;

fail:
    if (initialized)
        sm__gpu_gpm_close(g);
    sm__gpu_unload(g, initialized);
    return rc;
}

static int gpu_sample(void *state, sm_points *out, char *msg, size_t msglen)
{
    struct gpu *g = state;

    (void)msg;
    (void)msglen;
    sm__gpu_events_poll(g);
    for (size_t i = 0; i < g->n; i++) {
        struct gpu_dev *d = &g->dev[i];
        size_t mark = out->n;
        int skipped;

        if (d->lost)
            continue;
        skipped = sm__gpu_query_device(g, d, out, 0, NULL, 0);
        if (!d->lost)
            skipped += sm__gpu_gpm_query(g, d, out, 0, NULL, 0);
        if (d->lost) {
            out->n = mark; /* a device lost mid-sample contributes nothing */
            continue;
        }
        if (!skipped && d->failing) {
            sm__log(SM_INFO, "gpu: GPU %u recovered", d->index);
            d->failing = 0;
        }
    }
    /* Lost devices and dropped metrics were said once each; the others go
     * on, so a sample as such never fails. */
    return 0;
}

static void gpu_close(void *state)
{
    sm__gpu_gpm_close(state);
    sm__gpu_unload(state, 1);
}

const sm_collector_ops sm__coll_gpu = {
    .name = "gpu",
    /* per GPU: MLflow's five, the ten health fields but the clocks and ECC
     * counts, the own rank's memory; at detail full those four and the six
     * of gpu_gpm.c (docs/series.md "Levels") */
    .series_per_device = M_COUNT - M_FULL_COUNT,
    .series_per_device_full = M_FULL_COUNT,
    .status_tag = "gpu",
    .gpu = true,
    .counts_devices = true,
    .state_size = sizeof(struct gpu),
    .open = gpu_open,
    .sample = gpu_sample,
    .tags = sm__gpu_tags,
    .close = gpu_close,
};

