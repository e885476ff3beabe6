/*
 * coll_gpu.c — gpu_<i>_* series (docs/design.md §1) from NVML, loaded at run time.
 *
 * Why dlopen: the engine links libc, pthreads and libdl only, so the same
 * build runs on CPU workers and on GPU nodes; NVML (libnvidia-ml.so.1) is
 * part of the driver and is injected into containers by the NVIDIA runtime.
 * SCOPEMETER_NVML_LIBRARY names another file (the tests' fake library).  It
 * is a real path: SCOPEMETER_SYSROOT does not apply to it (a library must be
 * loadable by this process, not laid out in a fake tree).
 *
 * Which GPUs (docs/design.md §1, docs/gpu.md):
 *   1. Assigned at all: a /dev/nvidia[0-9]* node exists (through the
 *      sysroot).  NVIDIA_VISIBLE_DEVICES is not looked at: base images set
 *      it to "all" on CPU workers too.  No node: absent, informational.
 *   2. Narrowed by CUDA_VISIBLE_DEVICES with CUDA's own rules: indices or
 *      GPU-/MIG- UUIDs (unique prefixes allowed), the list ends at the first
 *      invalid entry, so "", "-1" and Slurm's "NoDevFiles" mean no device.
 *   3. The key index i is the NVML index.
 *
 * Failure policy (docs/design.md §6): library not loadable or not NVML, init or
 * device count failing: one warning, gpu_* absent, the tag says why with
 * NVML's own text.  A missing optional entry point or NOT_SUPPORTED /
 * NO_PERMISSION drops that one metric of that device; GPU_IS_LOST drops the
 * device with one line; any other error skips the value of that sample (one
 * line per streak).  No allocation or formatting per sample.
 */
#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "parse.h"
#include "nvml.h"

#define GPU_MAX 64 /* more than any host carries (8-16 on the largest nodes); NVML indices
                      * beyond it are not logged */

enum metric { M_MEM_PCT, M_MEM_MB, M_UTIL, M_POWER_W, M_POWER_PCT, M_COUNT };

#define BIT(m) (1u << (m))
#define MEM_BITS (BIT(M_MEM_PCT) | BIT(M_MEM_MB))
#define POWER_BITS (BIT(M_POWER_W) | BIT(M_POWER_PCT))
#define ALL_BITS (BIT(M_COUNT) - 1u)

/* The NVML queries of one sample and the metrics each one feeds. */
enum query { Q_MEM, Q_UTIL, Q_POWER, Q_LIMIT, Q_COUNT };
static const unsigned int q_mask[Q_COUNT] = {MEM_BITS, BIT(M_UTIL), POWER_BITS,
                                             BIT(M_POWER_PCT)};
static const char *const q_label[Q_COUNT] = {"memory_usage_*", "utilization_percentage",
                                             "power_usage_*", "power_usage_percentage"};

/*
 * The upstream keys, as MLflow's GPUMonitor writes them: gpu_<i>_<suffix>,
 * i the NVML index.  Static storage: a point's key must outlive the
 * collector (a consumer may name its points after closing the set), and
 * nothing is formatted per sample.
 */
#define GPU_KEYS(i)                                                                         \
    {"gpu_" #i "_memory_usage_percentage", "gpu_" #i "_memory_usage_megabytes",             \
     "gpu_" #i "_utilization_percentage",  "gpu_" #i "_power_usage_watts",                  \
     "gpu_" #i "_power_usage_percentage"}
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
_Static_assert(GPU_MAX * M_COUNT + 16 <= SM_POINTS_MAX,
               "a sample of every GPU and the other collectors fits sm_points");
static const char *const unit[M_COUNT] = {"percent", "MB", "percent", "W", "percent"};

const char *const *sm__gpu_keys(unsigned int i)
{
    return i < GPU_MAX ? gpu_keys[i] : NULL;
}

struct gpu_dev {
    sm_nvml_device h;
    unsigned int index;   /* NVML index: the i of the keys */
    unsigned int want;    /* BIT(metric) still produced */
    int mem_v2;           /* memory through nvmlDeviceGetMemoryInfo_v2 */
    int lost;
    int failing;          /* a transient error was reported; cleared on success */
    const char *mem_source;
    sm_nvml_return open_drop[Q_COUNT];   /* at open: why a query was dropped, 0 none */
    const char *open_call[Q_COUNT];
    const char *const *key; /* gpu_keys[index] */
};

struct nvml_api {
    sm_nvml_init_fn init;
    sm_nvml_shutdown_fn shutdown;
    sm_nvml_count_fn count;
    sm_nvml_handle_fn handle;
    /* optional */
    sm_nvml_error_string_fn error_string;
    sm_nvml_memory_v2_fn memory_v2;
    sm_nvml_memory_fn memory;
    sm_nvml_utilization_fn utilization;
    sm_nvml_uint_fn power;
    sm_nvml_uint_fn limit;
    sm_nvml_string_fn driver_version;
    sm_nvml_dev_string_fn uuid;
    sm_nvml_uint_fn mig_count;
    sm_nvml_mig_handle_fn mig_handle;
};

struct gpu {
    void *lib;
    struct nvml_api f;
    unsigned int n_nvml; /* devices NVML enumerates */
    size_t n;
    struct gpu_dev dev[GPU_MAX];
};

/* ---- small helpers --------------------------------------------------------- */

static const char *nvml_text(const struct gpu *g, sm_nvml_return rc)
{
    const char *s = g->f.error_string ? g->f.error_string(rc) : NULL;
    static const char *const fallback = "NVML error (no nvmlErrorString)";

    return s && *s ? s : fallback;
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

/* /dev/nvidia[0-9]* through the sysroot: the container was given a GPU.
 * nvidiactl, nvidia-uvm and nvidia-caps are not devices of their own. */
static int find_dev_node(const sm_ctx *ctx, char *first, size_t firstlen)
{
    char path[SM_PATH_MAX];
    struct dirent *e;
    DIR *d;
    int found = 0;

    if (sm__path(ctx, "/dev", path, sizeof path) < 0)
        return 0;
    d = opendir(path);
    if (!d)
        return 0;
    while ((e = readdir(d)) != NULL) {
        const char *s = e->d_name;
        if (strncmp(s, "nvidia", 6) != 0 || !isdigit((unsigned char)s[6]))
            continue;
        s += 6;
        while (isdigit((unsigned char)*s))
            s++;
        if (*s || (size_t)(s - e->d_name) >= firstlen)
            continue;
        /* keep the lowest-sorting name for a stable message */
        if (!found || strcmp(e->d_name, first) < 0)
            memcpy(first, e->d_name, (size_t)(s - e->d_name) + 1);
        found = 1;
    }
    closedir(d);
    return found;
}

/* ---- CUDA_VISIBLE_DEVICES ---------------------------------------------------- */

static int all_digits(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return 0;
    return 1;
}

/* Could this entry name a device at all (before NVML is asked)?  Used to
 * tell "this process was given no GPU" without loading NVML. */
static int entry_shape_ok(const char *tok)
{
    return all_digits(tok) || strncmp(tok, "GPU-", 4) == 0 || strncmp(tok, "MIG-", 4) == 0;
}


/* The NVML index whose GPU UUID starts with prefix, when exactly one does. */
static int match_gpu_uuid(struct gpu *g, const char *prefix, size_t plen)
{
    int hit = -1;

    for (unsigned int i = 0; i < g->n_nvml; i++) {
        sm_nvml_device h;
        char uuid[SM_NVML_UUID_BUFFER];
        if (g->f.handle(i, &h) != SM_NVML_SUCCESS ||
            g->f.uuid(h, uuid, sizeof uuid) != SM_NVML_SUCCESS)
            continue;
        uuid[sizeof uuid - 1] = '\0';
        if (strncmp(uuid, prefix, plen) == 0) {
            if (hit >= 0)
                return -2; /* ambiguous: CUDA rejects it too */
            hit = (int)i;
        }
    }
    return hit;
}

/* The parent GPU's NVML index of the MIG instance whose UUID starts with
 * prefix ("MIG-<uuid>", driver >= 470), when exactly one does. */
static int match_mig_uuid(struct gpu *g, const char *prefix, size_t plen)
{
    int hit = -1;

    if (!g->f.mig_count || !g->f.mig_handle)
        return -1;
    for (unsigned int i = 0; i < g->n_nvml; i++) {
        sm_nvml_device h, mh;
        unsigned int max = 0;
        if (g->f.handle(i, &h) != SM_NVML_SUCCESS ||
            g->f.mig_count(h, &max) != SM_NVML_SUCCESS)
            continue; /* MIG disabled or not supported on this GPU */
        for (unsigned int j = 0; j < max && j < 64; j++) {
            char uuid[SM_NVML_UUID_BUFFER];
            if (g->f.mig_handle(h, j, &mh) != SM_NVML_SUCCESS ||
                g->f.uuid(mh, uuid, sizeof uuid) != SM_NVML_SUCCESS)
                continue; /* an empty slot is NOT_FOUND */
            uuid[sizeof uuid - 1] = '\0';
            if (strncmp(uuid, prefix, plen) == 0) {
                if (hit >= 0)
                    return -2; /* two instances share the prefix */
                hit = (int)i;
            }
        }
    }
    return hit;
}

/*
 * Parses CUDA_VISIBLE_DEVICES into sel[] (NVML indices, ascending, no
 * duplicates).  CUDA semantics: the list ends at the first entry that names
 * no device.  *mig is set when a MIG entry was mapped to its parent GPU;
 * stop receives the first invalid entry ("" when the list was all valid).
 */
struct cuda_list {
    struct gpu *g;
    int *mig;
};

/* An entry as CUDA reads it: an index, a GPU UUID or its unique prefix, a
 * MIG instance (mapped to its parent GPU). */
static int cuda_match(const char *tok, void *arg)
{
    struct cuda_list *l = arg;
    struct gpu *g = l->g;
    int idx = -1;

    if (all_digits(tok)) {
        unsigned long x = strtoul(tok, NULL, 10);
        if (x < g->n_nvml && x < GPU_MAX)
            idx = (int)x;
    } else if (strncmp(tok, "GPU-", 4) == 0 && g->f.uuid) {
        idx = match_gpu_uuid(g, tok, strlen(tok));
    } else if (strncmp(tok, "MIG-GPU-", 8) == 0 && g->f.uuid) {
        /* the pre-470 form MIG-GPU-<gpu uuid>/<gi>/<ci> names its parent */
        idx = match_gpu_uuid(g, tok + 4, strcspn(tok + 4, "/"));
        *l->mig |= idx >= 0;
    } else if (strncmp(tok, "MIG-", 4) == 0 && g->f.uuid) {
        idx = match_mig_uuid(g, tok, strlen(tok));
        *l->mig |= idx >= 0;
    }
    return idx;
}

static size_t parse_visible(struct gpu *g, const char *v, unsigned int *sel, int *mig,
                            char *stop, size_t stoplen)
{
    char chosen[GPU_MAX] = {0};
    struct cuda_list l = {g, mig};
    unsigned int lim = g->n_nvml < GPU_MAX ? g->n_nvml : GPU_MAX;
    size_t n = 0;

    *mig = 0;
    sm__visible_walk(v, cuda_match, &l, chosen, lim, stop, stoplen);
    for (unsigned int i = 0; i < lim; i++)
        if (chosen[i])
            sel[n++] = i;
    return n;
}

/*
 * The NVML indices this process logs, ascending: every device, or those
 * CUDA_VISIBLE_DEVICES names.  What narrowed the set goes into note.
 */
static size_t select_devices(struct gpu *g, const char *visible, unsigned int *sel, char *note,
                             size_t notelen)
{
    char stop[64], list[160] = "";
    size_t nsel, len = 0;
    int mig, narrowed;

    if (!visible) {
        nsel = g->n_nvml < GPU_MAX ? g->n_nvml : GPU_MAX;
        for (size_t i = 0; i < nsel; i++)
            sel[i] = (unsigned int)i;
        return nsel;
    }
    nsel = parse_visible(g, visible, sel, &mig, stop, sizeof stop);
    for (size_t i = 0; i < nsel && len < sizeof list; i++) {
        int w = snprintf(list + len, sizeof list - len, "%s%u", i ? ", " : "", sel[i]);
        len += w > 0 ? (size_t)w : 0;
    }
    narrowed = nsel > 0 && nsel < g->n_nvml;
    if (narrowed)
        sm__line_join(note, notelen, "CUDA_VISIBLE_DEVICES='%.64s' narrows the logged GPUs to NVML index %s "
            "(of %u)", visible, list, g->n_nvml);
    if (stop[0] && nsel > 0)
        sm__line_join(note, notelen, "%s entry '%s' names no device%s and ends the list, as in CUDA",
            narrowed ? "its" : "CUDA_VISIBLE_DEVICES", stop,
            (!g->f.uuid && (strncmp(stop, "GPU-", 4) == 0 || strncmp(stop, "MIG-", 4) == 0))
                ? " (NVML lacks nvmlDeviceGetUUID)" : "");
    if (mig)
        sm__line_join(note, notelen, "a MIG instance is logged as its whole parent GPU (memory, "
            "utilization and power of every instance on it)");
    return nsel;
}

/* ---- one device's queries -------------------------------------------------- */

enum verdict { V_OK, V_DROP, V_LOST, V_SKIP };

static enum verdict classify(sm_nvml_return rc)
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

static sm_nvml_return read_memory(const struct gpu *g, const struct gpu_dev *d,
                                  unsigned long long *used, unsigned long long *total)
{
    sm_nvml_return rc;

    if (d->mem_v2) {
        sm_nvml_memory_v2 m;
        memset(&m, 0, sizeof m);
        m.version = SM_NVML_MEMORY_V2_VERSION;
        rc = g->f.memory_v2(d->h, &m);
        *used = m.used;
        *total = m.total;
    } else {
        sm_nvml_memory m;
        memset(&m, 0, sizeof m);
        rc = g->f.memory(d->h, &m);
        *used = m.used;
        *total = m.total;
    }
    return rc;
}

/* At open: v2 when the library has it and the driver accepts the tag
 * (drivers before 510 answer ARGUMENT_VERSION_MISMATCH or NOT_SUPPORTED),
 * else v1.  Returns the rc of the variant kept. */
static sm_nvml_return choose_memory(const struct gpu *g, struct gpu_dev *d)
{
    unsigned long long used, total;
    sm_nvml_return rc = SM_NVML_ERROR_FUNCTION_NOT_FOUND;

    if (g->f.memory_v2) {
        d->mem_v2 = 1;
        rc = read_memory(g, d, &used, &total);
        if (rc == SM_NVML_SUCCESS || rc == SM_NVML_ERROR_GPU_IS_LOST || !g->f.memory) {
            d->mem_source = "nvmlDeviceGetMemoryInfo_v2";
            return rc;
        }
    }
    d->mem_v2 = 0;
    d->mem_source = "nvmlDeviceGetMemoryInfo";
    if (g->f.memory)
        rc = read_memory(g, d, &used, &total);
    return rc;
}

/*
 * What one query's rc means for the device.  At open (at_open) a dropped
 * metric is recorded for the open message, which groups devices; while
 * sampling, a change is logged at once.  Returns 1 when the value may be used.
 */
static int judge(const struct gpu *g, struct gpu_dev *d, sm_nvml_return rc, enum query q,
                 const char *call, int at_open, char *msg, size_t msglen)
{
    switch (classify(rc)) {
    case V_OK:
        return 1;
    case V_DROP:
        if (d->want & q_mask[q]) {
            d->want &= ~q_mask[q];
            if (at_open) {
                d->open_drop[q] = rc;
                d->open_call[q] = call;
            } else {
                sm__log(SM_WARN, "gpu: gpu_%u_%s dropped: %s says %s", d->index, q_label[q],
                       call, nvml_text(g, rc));
            }
        }
        return 0;
    case V_LOST:
        if (!d->lost) {
            d->lost = 1;
            if (at_open)
                sm__line_join(msg, msglen, "GPU %u lost (%s: %s): gpu_%u_* dropped", d->index, call,
                    nvml_text(g, rc), d->index);
            else
                sm__log(SM_WARN, "gpu: GPU %u lost (%s: %s): gpu_%u_* series stop", d->index,
                       call, nvml_text(g, rc), d->index);
        }
        return 0;
    case V_SKIP:
    default:
        /* at open a transient error keeps the metric: the first sample says */
        if (!at_open && !d->failing) {
            sm__log(SM_WARN, "gpu: GPU %u: %s failed: %s; its values are skipped until it recovers",
                   d->index, call, nvml_text(g, rc));
            d->failing = 1;
        }
        return 0;
    }
}

/* Queries every metric once; rc verdicts are those of judge().  Emits into
 * out when non-NULL.  Returns the number of transient failures. */
static int query_device(const struct gpu *g, struct gpu_dev *d, sm_points *out, int at_open,
                        char *msg, size_t msglen)
{
    int skipped = 0;

    if (d->want & MEM_BITS) {
        unsigned long long used = 0, total = 0;
        sm_nvml_return rc = at_open ? choose_memory(g, d) : read_memory(g, d, &used, &total);
        if (judge(g, d, rc, Q_MEM, d->mem_source, at_open, msg, msglen)) {
            if (out && total > 0)
                sm__emit(out, d->key[M_MEM_PCT], 100.0 * (double)used / (double)total,
                        unit[M_MEM_PCT], d->mem_source, SM_AGG_MEAN);
            if (out)
                sm__emit(out, d->key[M_MEM_MB], (double)used / 1e6, unit[M_MEM_MB],
                        d->mem_source, SM_AGG_MEAN);
        } else {
            skipped += classify(rc) == V_SKIP;
        }
    }
    if (!d->lost && (d->want & BIT(M_UTIL))) {
        sm_nvml_utilization u = {0, 0};
        sm_nvml_return rc = g->f.utilization(d->h, &u);
        if (judge(g, d, rc, Q_UTIL, "nvmlDeviceGetUtilizationRates", at_open, msg, msglen)) {
            if (out)
                sm__emit(out, d->key[M_UTIL], (double)u.gpu, unit[M_UTIL],
                        "nvmlDeviceGetUtilizationRates", SM_AGG_MEAN);
        } else {
            skipped += classify(rc) == V_SKIP;
        }
    }
    if (!d->lost && (d->want & POWER_BITS)) {
        unsigned int mw = 0, limit = 0;
        sm_nvml_return rc = g->f.power(d->h, &mw);
        if (judge(g, d, rc, Q_POWER, "nvmlDeviceGetPowerUsage", at_open, msg, msglen)) {
            if (out && (d->want & BIT(M_POWER_W)))
                sm__emit(out, d->key[M_POWER_W], (double)mw / 1000.0, unit[M_POWER_W],
                        "nvmlDeviceGetPowerUsage", SM_AGG_MEAN);
            /* The enforced limit is read every sample: nvidia-smi -pl and
             * power capping change it while a job runs. */
            if (d->want & BIT(M_POWER_PCT)) {
                sm_nvml_return lrc = g->f.limit(d->h, &limit);
                if (judge(g, d, lrc, Q_LIMIT, "nvmlDeviceGetEnforcedPowerLimit", at_open, msg,
                          msglen)) {
                    if (out && limit > 0)
                        sm__emit(out, d->key[M_POWER_PCT], 100.0 * (double)mw / (double)limit,
                                unit[M_POWER_PCT],
                                "nvmlDeviceGetPowerUsage/nvmlDeviceGetEnforcedPowerLimit",
                                SM_AGG_MEAN);
                } else {
                    skipped += classify(lrc) == V_SKIP;
                }
            }
        } else {
            skipped += classify(rc) == V_SKIP;
        }
    }
    return skipped;
}

/* Dropped metrics found at open, one clause per (query, reason) with the
 * devices grouped: "gpu_{0,1,2}_power_usage_* dropped: ... says Not Supported". */
static void say_drops(const struct gpu *g, char *buf, size_t cap)
{
    char done[GPU_MAX][Q_COUNT];

    memset(done, 0, sizeof done);
    for (int q = 0; q < Q_COUNT; q++)
        for (size_t i = 0; i < g->n; i++) {
            const struct gpu_dev *d = &g->dev[i];
            char list[200] = "";
            size_t len = 0, count = 0;

            if (!d->open_drop[q] || done[i][q])
                continue;
            for (size_t j = i; j < g->n; j++) {
                const struct gpu_dev *e = &g->dev[j];
                int w;
                if (e->open_drop[q] != d->open_drop[q] ||
                    strcmp(e->open_call[q], d->open_call[q]) != 0)
                    continue;
                done[j][q] = 1;
                w = snprintf(list + len, sizeof list - len, "%s%u", count ? "," : "", e->index);
                if (w > 0 && (size_t)w < sizeof list - len)
                    len += (size_t)w;
                count++;
            }
            sm__line_join(buf, cap, count > 1 ? "gpu_{%s}_%s dropped: %s says %s"
                                    : "gpu_%s_%s dropped: %s says %s",
                list, q_label[q], d->open_call[q], nvml_text(g, d->open_drop[q]));
        }
}

/* ---- open / sample / close --------------------------------------------------- */

static void unload(struct gpu *g, int initialized)
{
    if (initialized)
        g->f.shutdown();
    if (g->lib)
        dlclose(g->lib);
    g->lib = NULL;
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
    resolve(g->lib, "nvmlDeviceGetMemoryInfo_v2", &g->f.memory_v2);
    resolve(g->lib, "nvmlDeviceGetMemoryInfo", &g->f.memory);
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
    return drop;
}

/* Open, step 1: load NVML, resolve its entry points, init it, count its
 * devices.  0 or -errno with the lines in res; *initialized says whether
 * nvmlShutdown is owed. */
static int load_nvml(struct gpu *g, const char *libname, const char *node, unsigned int *drop,
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
                nvml_text(g, nrc));
        sm__line(res->status, sizeof res->status, "unavailable: %s", nvml_text(g, nrc));
        return -EIO;
    }
    *initialized = 1;
    nrc = g->f.count(&g->n_nvml);
    if (nrc != SM_NVML_SUCCESS) {
        sm__line(res->msg, sizeof res->msg,
                "/dev/%s exists but NVML cannot count devices: %s; gpu_* series absent", node,
                nvml_text(g, nrc));
        sm__line(res->status, sizeof res->status, "unavailable: %s", nvml_text(g, nrc));
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
        d->want = ALL_BITS & ~drop;
        d->key = gpu_keys[d->index];
        nrc = g->f.handle(d->index, &d->h);
        if (nrc != SM_NVML_SUCCESS) {
            sm__line_join(devnote, devcap, "GPU %u %s(nvmlDeviceGetHandleByIndex_v2: %s): "
                         "gpu_%u_* dropped", d->index,
                         nrc == SM_NVML_ERROR_GPU_IS_LOST ? "lost " : "", nvml_text(g, nrc),
                         d->index);
            continue;
        }
        query_device(g, d, NULL, 1, devnote, devcap);
        if (d->lost)
            continue;
        g->n++;
    }
    say_drops(g, devnote, devcap);
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

    if (!find_dev_node(ctx, node, sizeof node)) {
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
        if (!entry_shape_ok(first)) {
            sm__line(res->msg, sizeof res->msg,
                    "CUDA_VISIBLE_DEVICES='%.64s' gives this process no GPU: gpu_* series absent",
                    visible);
            sm__line(res->status, sizeof res->status,
                    "none: CUDA_VISIBLE_DEVICES selects no device");
            return SM_ABSENT;
        }
    }

    rc = load_nvml(g, libname, node, &drop, symnote, sizeof symnote, &initialized, res);
    if (rc < 0)
        goto fail;
    if (g->f.driver_version &&
        g->f.driver_version(driver, sizeof driver) == SM_NVML_SUCCESS) {
        driver[sizeof driver - 1] = '\0';
        sm__build_note_nvml(driver); /* the build tag's nvml= */
    } else
        snprintf(driver, sizeof driver, "(driver version unknown)");

    nsel = select_devices(g, visible, sel, selnote, sizeof selnote);
    if (nsel == 0) {
        sm__line(res->msg, sizeof res->msg,
                "CUDA_VISIBLE_DEVICES='%.64s' names none of the %u NVML devices%s: "
                "gpu_* series absent", visible, g->n_nvml,
                g->f.uuid ? "" : " (NVML lacks nvmlDeviceGetUUID)");
        sm__line(res->status, sizeof res->status, "none: CUDA_VISIBLE_DEVICES selects no device");
        unload(g, initialized);
        return SM_ABSENT;
    }
    open_devices(g, sel, nsel, drop, devnote, sizeof devnote);
    if (g->n == 0) {
        sm__line(res->msg, sizeof res->msg, "no usable GPU although /dev/%s exists: %s", node,
                devnote);
        sm__line(res->status, sizeof res->status, "unavailable: %s", devnote);
        rc = -ENODEV;
        goto fail;
    }
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
    unload(g, initialized);
    return rc;
}

static int gpu_sample(void *state, sm_points *out, char *msg, size_t msglen)
{
    struct gpu *g = state;

    (void)msg;
    (void)msglen;
    for (size_t i = 0; i < g->n; i++) {
        struct gpu_dev *d = &g->dev[i];
        size_t mark = out->n;
        int skipped;

        if (d->lost)
            continue;
        skipped = query_device(g, d, out, 0, NULL, 0);
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
    unload(state, 1);
}

const sm_collector_ops sm__coll_gpu = {
    .name = "gpu",
    .series_per_device = 5, /* per GPU: memory %, memory MB, utilization, power W, power % */
    .status_tag = "gpu",
    .state_size = sizeof(struct gpu),
    .open = gpu_open,
    .sample = gpu_sample,
    .close = gpu_close,
};
