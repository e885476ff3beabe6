/*
 * gpu_nvml.c — the NVML binding of the NVIDIA collector: the library loaded
 * at run time, its entry points resolved into struct nvml_api (gpu_int.h),
 * nvmlInit_v2 and the device count, and what a return code means
 * (sm__gpu_verdict).  The other parts call NVML only through the table this
 * file fills; nothing here queries a device or knows a series' value.
 *
 * Why dlopen: the engine links libc, pthreads and libdl only, so the same
 * build runs on CPU workers and on GPU nodes; NVML (libnvidia-ml.so.1) is
 * part of the driver and is injected into containers by the NVIDIA runtime.
 * SCOPEMETER_NVML_LIBRARY names another file (the tests' fake library).  It
 * is a real path: SCOPEMETER_SYSROOT does not apply to it (a library must be
 * loadable by this process, not laid out in a fake tree).  A missing
 * optional entry point drops its metrics on every device, said in one
 * clause; a missing required one, a failing init or count, one line and no
 * gpu_* at all.  The types are src/collect/nvml.h's, checked against NVIDIA's own
 * header by tests/c/nvml_abi/nvml_abi.c.
 */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#include "gpu_int.h"

/* NVML's own text of rc (nvmlErrorString), or a fixed one where the
 * library lacks it. */
const char *sm__gpu_nvml_text(const struct gpu *g, sm_nvml_return rc)
{
    const char *s = g->f.error_string ? g->f.error_string(rc) : NULL;
    static const char *const fallback = "NVML error (no nvmlErrorString)";

    return s && *s ? s : fallback;
}

/* What an rc means for the metric it answered (the failure policy,
 * docs/design.md §6). */
enum verdict sm__gpu_verdict(sm_nvml_return rc)
{
    switch (rc) {
    case SM_NVML_SUCCESS:
        return V_OK;
    case SM_NVML_ERROR_NOT_SUPPORTED:
    case SM_NVML_ERROR_NO_PERMISSION:
        return V_DROP;
    case SM_NVML_ERROR_GPU_IS_LOST:
        return V_LOST;
    default:
        return V_SKIP;
    }
}

/* A counter field's value (the PCIe and NVLink counters): unsigned 64-bit
 * as the header's valueType says, narrower types widened; another type is
 * no counter (UNKNOWN: skipped, said once per streak). */
sm_nvml_return sm__gpu_field_u64(const sm_nvml_field_value *f, unsigned long long *v)
{
    if (f->nvmlReturn != SM_NVML_SUCCESS)
        return f->nvmlReturn;
    switch (f->valueType) {
    case SM_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
        *v = f->value.ullVal;
        return SM_NVML_SUCCESS;
    case SM_NVML_VALUE_TYPE_UNSIGNED_LONG:
        *v = f->value.ulVal;
        return SM_NVML_SUCCESS;
    case SM_NVML_VALUE_TYPE_UNSIGNED_INT:
        *v = f->value.uiVal;
        return SM_NVML_SUCCESS;
    default:
        return SM_NVML_ERROR_UNKNOWN; /* not a counter: skipped, said once per streak */
    }
}

/* dlsym into a function pointer without the object/function pointer cast
 * that ISO C leaves undefined (POSIX guarantees the representation). */
static int resolve(void *lib, const char *name, void *fnp)
{
    void *p;

    dlerror();
    p = dlsym(lib, name);
    memcpy(fnp, &p, sizeof p);
    return p ? 0 : -1;
}

/* Undoes open: the event set, nvmlShutdown when nvmlInit_v2 succeeded
 * (initialized), the library. */
void sm__gpu_unload(struct gpu *g, int initialized)
{
    if (g->events)
        g->f.event_set_free(g->events);
    g->events = NULL;
    if (initialized)
        g->f.shutdown();
    if (g->lib)
        dlclose(g->lib);
    g->lib = NULL;
}

/* The health fields' entry points (an older driver lacks some): one clause
 * names every missing one; docs/gpu.md maps each to the series it feeds. */
static unsigned int resolve_health(struct gpu *g, char *msg, size_t msglen)
{
    struct {
        const char *name;
        void *fnp;
        unsigned int bits;
    } const opt[] = {
        {"nvmlDeviceGetClockInfo", &g->f.clock, BIT(M_SM_CLOCK) | BIT(M_MEM_CLOCK)},
        {"nvmlDeviceGetFieldValues", &g->f.fields, PCIE_BITS},
        {"nvmlDeviceGetTotalEccErrors", &g->f.ecc, ECC_BITS},
        {"nvmlDeviceGetRemappedRows", &g->f.remapped, 0},
        {"nvmlDeviceGetRetiredPages", &g->f.retired, 0},
        {"nvmlDeviceGetComputeRunningProcesses_v3", &g->f.processes, BIT(M_PROC_MEM)},
    };
    char missing[256] = "";
    unsigned int drop = 0;

    /* the new entry point first, the deprecated one as the fallback (a later
     * driver may drop it; an older one lacks the new); both missing are
     * named by the call every driver before NVML 13 has */
    resolve(g->lib, "nvmlDeviceGetTemperatureV", &g->f.temperature_v);
    if (resolve(g->lib, "nvmlDeviceGetTemperature", &g->f.temperature) < 0 &&
        !g->f.temperature_v) {
        drop |= BIT(M_TEMP);
        sm__line_add(missing, sizeof missing, "%snvmlDeviceGetTemperature",
                     missing[0] ? ", " : "");
    }
    /* the R535 name first, then the name of the drivers before it (same
     * signature and bits) */
    g->f.reasons_call = "nvmlDeviceGetCurrentClocksEventReasons";
    if (resolve(g->lib, g->f.reasons_call, &g->f.reasons) < 0) {
        g->f.reasons_call = "nvmlDeviceGetCurrentClocksThrottleReasons";
        if (resolve(g->lib, g->f.reasons_call, &g->f.reasons) < 0) {
            drop |= THR_BITS;
            sm__line_add(missing, sizeof missing, "%snvmlDeviceGetCurrentClocksEventReasons",
                         missing[0] ? ", " : "");
        }
    }
    for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++)
        if (resolve(g->lib, opt[i].name, opt[i].fnp) < 0) {
            drop |= opt[i].bits;
            sm__line_add(missing, sizeof missing, "%s%s", missing[0] ? ", " : "", opt[i].name);
        }
    /* the four event calls come and go together: named as one */
    if ((resolve(g->lib, "nvmlEventSetCreate", &g->f.event_set_create) |
         resolve(g->lib, "nvmlDeviceRegisterEvents", &g->f.register_events) |
         resolve(g->lib, "nvmlEventSetWait_v2", &g->f.event_wait) |
         resolve(g->lib, "nvmlEventSetFree", &g->f.event_set_free)) < 0)
        sm__line_add(missing, sizeof missing, "%sthe nvmlEventSet calls (no Xid events)",
                     missing[0] ? ", " : "");
    if (missing[0])
        sm__line_join(msg, msglen, "NVML lacks %s: the gpu_* series and events they give are "
                      "absent", missing);
    return drop;
}

/* Optional entry points: a missing one drops its metrics on every device. */
static unsigned int resolve_optional(struct gpu *g, char *msg, size_t msglen)
{
    unsigned int drop = 0;

    resolve(g->lib, "nvmlErrorString", &g->f.error_string);
    resolve(g->lib, "nvmlSystemGetDriverVersion", &g->f.driver_version);
    resolve(g->lib, "nvmlDeviceGetUUID", &g->f.uuid);
    resolve(g->lib, "nvmlDeviceGetMaxMigDeviceCount", &g->f.mig_count);
    resolve(g->lib, "nvmlDeviceGetMigDeviceHandleByIndex", &g->f.mig_handle);
    resolve(g->lib, "nvmlDeviceGetGpuInstanceId", &g->f.gi_id);
    resolve(g->lib, "nvmlDeviceGetComputeInstanceId", &g->f.ci_id);
    resolve(g->lib, "nvmlDeviceGetMemoryInfo_v2", &g->f.memory_v2);
    resolve(g->lib, "nvmlDeviceGetMemoryInfo", &g->f.memory);
    /* the detail series' calls and the energy: absent on older drivers
     * (GPM since R520, the energy since Volta's); gpu_gpm.c says what each
     * absence drops, where it is asked for */
    resolve(g->lib, "nvmlGpmQueryDeviceSupport", &g->f.gpm_support);
    resolve(g->lib, "nvmlGpmSampleAlloc", &g->f.gpm_alloc);
    resolve(g->lib, "nvmlGpmSampleFree", &g->f.gpm_free);
    resolve(g->lib, "nvmlGpmSampleGet", &g->f.gpm_get);
    resolve(g->lib, "nvmlGpmMigSampleGet", &g->f.gpm_mig_get);
    resolve(g->lib, "nvmlGpmMetricsGet", &g->f.gpm_metrics);
    resolve(g->lib, "nvmlDeviceGetTotalEnergyConsumption", &g->f.energy);
    if (!g->f.memory_v2 && !g->f.memory) {
        drop |= MEM_BITS;
        sm__line_join(msg, msglen, "NVML lacks nvmlDeviceGetMemoryInfo: gpu_*_memory_usage_* dropped");
    }
    if (resolve(g->lib, "nvmlDeviceGetUtilizationRates", &g->f.utilization) < 0) {
        drop |= BIT(M_UTIL);
        sm__line_join(msg, msglen,
            "NVML lacks nvmlDeviceGetUtilizationRates: gpu_*_utilization_percentage dropped");
    }
    if (resolve(g->lib, "nvmlDeviceGetPowerUsage", &g->f.power) < 0) {
        drop |= POWER_BITS;
        sm__line_join(msg, msglen, "NVML lacks nvmlDeviceGetPowerUsage: gpu_*_power_usage_* dropped");
    }
    if (resolve(g->lib, "nvmlDeviceGetEnforcedPowerLimit", &g->f.limit) < 0 &&
        !(drop & BIT(M_POWER_PCT))) {
        drop |= BIT(M_POWER_PCT);
        sm__line_join(msg, msglen,
            "NVML lacks nvmlDeviceGetEnforcedPowerLimit: gpu_*_power_usage_percentage dropped");
    }
    return drop | resolve_health(g, msg, msglen);
}

/* Open, step 1: load NVML, resolve its entry points, init it, count its
 * devices.  0 or -errno with the lines in res; *initialized says whether
 * nvmlShutdown is owed. */
int sm__gpu_load_nvml(struct gpu *g, const char *libname, const char *node, unsigned int *drop,
                      char *symnote, size_t symcap, int *initialized, sm_opened *res)
{
    sm_nvml_return nrc;

    g->lib = dlopen(libname, RTLD_NOW | RTLD_LOCAL);
    if (!g->lib) {
        const char *e = dlerror();
        sm__line(res->msg, sizeof res->msg,
                "/dev/%s exists but NVML cannot be loaded (%s): gpu_* series absent", node,
                e ? e : libname);
        sm__line(res->status, sizeof res->status, "unavailable: %s", e ? e : libname);
        return -ENOENT;
    }
    if (resolve(g->lib, "nvmlInit_v2", &g->f.init) < 0 ||
        resolve(g->lib, "nvmlShutdown", &g->f.shutdown) < 0 ||
        resolve(g->lib, "nvmlDeviceGetCount_v2", &g->f.count) < 0 ||
        resolve(g->lib, "nvmlDeviceGetHandleByIndex_v2", &g->f.handle) < 0) {
        const char *e = dlerror();
        sm__line(res->msg, sizeof res->msg, "%s is not a usable NVML (%s): gpu_* series absent",
                libname, e ? e : "missing entry point");
        sm__line(res->status, sizeof res->status, "unavailable: %s",
                e ? e : "missing entry point");
        return -ENOSYS;
    }
    *drop = resolve_optional(g, symnote, symcap);

    nrc = g->f.init();
    if (nrc != SM_NVML_SUCCESS) {
        sm__line(res->msg, sizeof res->msg,
                "/dev/%s exists but NVML init failed: %s; gpu_* series absent", node,
                sm__gpu_nvml_text(g, nrc));
        sm__line(res->status, sizeof res->status, "unavailable: %s", sm__gpu_nvml_text(g, nrc));
        return -EIO;
    }
    *initialized = 1;
    nrc = g->f.count(&g->n_nvml);
    if (nrc != SM_NVML_SUCCESS) {
        sm__line(res->msg, sizeof res->msg,
                "/dev/%s exists but NVML cannot count devices: %s; gpu_* series absent", node,
                sm__gpu_nvml_text(g, nrc));
        sm__line(res->status, sizeof res->status, "unavailable: %s", sm__gpu_nvml_text(g, nrc));
        return -EIO;
    }
    if (g->n_nvml == 0) {
        sm__line(res->msg, sizeof res->msg,
                "/dev/%s exists but NVML reports no device: gpu_* series absent", node);
        sm__line(res->status, sizeof res->status, "unavailable: NVML reports no device");
        return -ENODEV;
    }
    return 0;
}
