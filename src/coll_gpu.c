/*
 * coll_gpu.c — gpu_<i>_* series (docs/design.md §1) from NVML, loaded at run time:
 * MLflow's five, the ten health fields (temperature, clocks, clock-event
 * reasons, PCIe and ECC counters) and the gpu_events tag (Xid errors from an
 * event set polled with a zero timeout, remapped rows, retired pages;
 * docs/gpu.md).  It must never wait inside the driver: a sample's calls all
 * return at once.
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
 *   3. The key index i is the NVML index; a MIG instance is keyed by its
 *      parent's.  Its memory and processes are asked of its own MIG device
 *      handle (NVML answers them per instance); every other field exists
 *      only for the board and is asked of the parent's handle.
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
#include <time.h>

#include <unistd.h>

#include "internal.h"
#include "parse.h"
#include "nvml.h"

#define GPU_MAX 64 /* more than any host carries (8-16 on the largest nodes); NVML indices
                      * beyond it are not logged */
#define MIG_MAX 8  /* MIG instances named per parent GPU (an A100/H100 has at most 7) */

enum metric {
    M_MEM_PCT, M_MEM_MB, M_UTIL, M_POWER_W, M_POWER_PCT,  /* MLflow's five */
    M_TEMP, M_SM_CLOCK, M_MEM_CLOCK, M_THR, M_THR_POWER, M_THR_THERMAL,
    M_PCIE_RX, M_PCIE_TX, M_ECC_CORR, M_ECC_UNCORR,
    M_PROC_MEM, /* per recorded rank (sm__emit_rank), the own rank counted here */
    M_COUNT
};

#define BIT(m) (1u << (m))
#define MEM_BITS (BIT(M_MEM_PCT) | BIT(M_MEM_MB))
#define POWER_BITS (BIT(M_POWER_W) | BIT(M_POWER_PCT))
#define THR_BITS (BIT(M_THR) | BIT(M_THR_POWER) | BIT(M_THR_THERMAL))
#define PCIE_BITS (BIT(M_PCIE_RX) | BIT(M_PCIE_TX))
#define ECC_BITS (BIT(M_ECC_CORR) | BIT(M_ECC_UNCORR))
#define ALL_BITS (BIT(M_COUNT) - 1u)

/* The NVML queries of one sample and the metrics each one feeds. */
enum query {
    Q_MEM, Q_UTIL, Q_POWER, Q_LIMIT, Q_TEMP, Q_SM_CLOCK, Q_MEM_CLOCK, Q_REASONS,
    Q_PCIE_RX, Q_PCIE_TX, Q_ECC, Q_PROCS, Q_COUNT
};
static const unsigned int q_mask[Q_COUNT] = {
    MEM_BITS,        BIT(M_UTIL),      POWER_BITS,       BIT(M_POWER_PCT),
    BIT(M_TEMP),     BIT(M_SM_CLOCK),  BIT(M_MEM_CLOCK), THR_BITS,
    BIT(M_PCIE_RX),  BIT(M_PCIE_TX),   ECC_BITS,         BIT(M_PROC_MEM)};
static const char *const q_label[Q_COUNT] = {
    "memory_usage_*",         "utilization_percentage",    "power_usage_*",
    "power_usage_percentage", "temperature_celsius",       "sm_clock_megahertz",
    "memory_clock_megahertz", "throttled_*",               "pcie_receive_megabytes",
    "pcie_transmit_megabytes", "ecc_errors_*",              "process_memory_megabytes"};

/*
 * Clock-event reasons (NVML's nvmlClocksEventReason*, docs/gpu.md): the
 * clocks are "held down" for any reason but an idle GPU and the user's own
 * application-clock setting; power and thermal are the two that matter most.
 * HW_SLOWDOWN (the board's slowdown signal: power brake or temperature, the
 * driver cannot tell which) counts in the total only.
 */
#define THR_ANY (~(SM_NVML_REASON_GPU_IDLE | SM_NVML_REASON_APPLICATIONS_CLOCKS_SETTING))
#define THR_POWER (SM_NVML_REASON_SW_POWER_CAP | SM_NVML_REASON_HW_POWER_BRAKE_SLOWDOWN)
#define THR_THERMAL (SM_NVML_REASON_SW_THERMAL_SLOWDOWN | SM_NVML_REASON_HW_THERMAL_SLOWDOWN)

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
     "gpu_" #i "_ecc_errors_uncorrected",  "gpu_" #i "_process_memory_megabytes"}
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
static const char *const unit[M_COUNT] = {"percent", "MB",      "percent", "W",       "percent",
                                          "celsius", "MHz",     "MHz",     "percent", "percent",
                                          "percent", "MB",      "MB",      "errors",  "errors",
                                          "MB"};

const char *const *sm__gpu_keys(unsigned int i)
{
    return i < GPU_MAX ? gpu_keys[i] : NULL;
}

/*
 * Who holds a GPU's memory (docs/gpu.md): the processes NVML lists per GPU,
 * each put in one class.  NVML's pids are the driver's, i.e. the host's; a
 * pid is this container's only when /proc (through the sysroot) shows it
 * AND it has a GPU device open there (every CUDA context holds
 * /dev/nvidiactl and /dev/nvidiaN), so a host pid that happens to number
 * another process here is not taken for it.
 *
 * In a pid namespace of its own (a container without hostPID) no pid NVML
 * lists can be this container's: the driver knows no pid namespace and
 * always answers the host's (NVIDIA, docs/gpu.md), and nothing in a
 * container's /proc maps a host pid back (NSpid lists the namespaces from
 * the reader's down, fs/proc/array.c).  Classing them all "foreign" would
 * say "another container holds 30 GB" of the job's own memory, so there the
 * process list is not read at all: its series and the holders of the peak
 * tag are dropped in one line (procs_open, open_procs_ns).
 */
enum pclass { P_OWN, P_RANK, P_UNRANKED, P_FOREIGN };
#define PCACHE 128
#define PROC_LIST 256      /* processes read per GPU and sample (6 KB of stack) */
#define PROC_RANKS_MAX 64  /* ranks a collector records (coll_proc's trees) */
#define PROC_POINTS_MAX 512
#define PEAK_RANKS 8       /* other ranks named in gpu_memory_at_peak */

struct pcache_entry {
    int pid, cls, rank;
    uint64_t start;        /* /proc/PID/stat starttime: a reused pid is another process */
    unsigned int seen;     /* the sample that last asked */
};

struct held {               /* one GPU's memory by class, MB */
    double used, own, unranked, foreign, other;
    int nr;
    struct { int rank; double mb; } r[PEAK_RANKS];
};

struct procs {
    sm_ctx ctx;            /* the sysroot, for /proc and /dev */
    int self_pid, own_rank, rank0, nranks; /* recorded ranks rank0 .. rank0+nranks-1 */
    int own_pid_ns;        /* /proc is a pid namespace of its own: NVML's pids are not its */
    unsigned int sample;
    struct pcache_entry cache[PCACHE];
    char env[65536];       /* /proc/PID/environ, read when a new pid appears */
};

struct gpu_dev {
    sm_nvml_device h;     /* the GPU, or a MIG instance's parent: the board-wide fields */
    sm_nvml_device mig[MIG_MAX]; /* the named MIG instances of it: memory and processes */
    unsigned int nmig;           /* 0: the whole GPU is the device */
    const char *procs_source;
    unsigned int index;   /* NVML index: the i of the keys */
    unsigned int want;    /* BIT(metric) still produced */
    int mem_v2;           /* memory through nvmlDeviceGetMemoryInfo_v2 */
    int temp_v;           /* temperature through nvmlDeviceGetTemperatureV */
    int lost;
    int failing;          /* a transient error was reported; cleared on success */
    const char *mem_source;
    sm_nvml_return open_drop[Q_COUNT];   /* at open: why a query was dropped, 0 none */
    const char *open_call[Q_COUNT];
    const char *const *key; /* gpu_keys[index] */
    unsigned int based;     /* BIT(metric) of a cumulative series whose start value is known */
    /* cumulative series: the counter's last value, the sum of its deltas
     * since open (a counter that went back restarted: its value is new) */
    unsigned long long pcie_last[2], pcie_sum[2]; /* [0] receive, [1] transmit: bytes */
    unsigned long long ecc_last[2], ecc_sum[2];   /* [0] corrected, [1] uncorrected */
    /* events and memory health (the gpu_events tag) */
    unsigned int xid_last, xids, ncodes;
    unsigned int codes[8];       /* distinct Xid codes, in order of first sight */
    long long xid_at;            /* wall-clock s of the last Xid's arrival */
    int remap_ok, retired_ok;    /* the call answered at open */
    unsigned int remap[4];       /* corrected rows, uncorrected rows, pending, failure */
    unsigned int retired[2];     /* pages: multiple single-bit, double-bit */
    double used_mb;              /* memory used at this sample (the memory series' value) */
    struct held peak;            /* by class at the highest used memory */
    double peak_shipped;         /* used MB of the peak last shipped; 0 none */
    double total_mb;
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
    sm_nvml_uint_fn gi_id;   /* nvmlDeviceGetGpuInstanceId */
    sm_nvml_uint_fn ci_id;   /* nvmlDeviceGetComputeInstanceId */
    sm_nvml_temperature_v_fn temperature_v; /* NVML 13's; the old one is deprecated */
    sm_nvml_temperature_fn temperature;
    sm_nvml_clock_fn clock;
    sm_nvml_reasons_fn reasons;
    const char *reasons_call; /* the name resolved: Event (R535+) or Throttle */
    sm_nvml_fields_fn fields;
    sm_nvml_ecc_fn ecc;
    sm_nvml_remapped_fn remapped;
    sm_nvml_retired_fn retired;
    sm_nvml_event_set_create_fn event_set_create;
    sm_nvml_register_events_fn register_events;
    sm_nvml_event_wait_fn event_wait;
    sm_nvml_event_set_free_fn event_set_free;
    sm_nvml_processes_fn processes;
};

struct gpu {
    void *lib;
    struct nvml_api f;
    unsigned int n_nvml; /* devices NVML enumerates */
    size_t n;
    struct gpu_dev dev[GPU_MAX];
    /* what CUDA_VISIBLE_DEVICES named, per NVML index: the MIG instances'
     * handles; mig_whole: a MIG entry whose instance NVML does not show */
    sm_nvml_device sel_mig[GPU_MAX][MIG_MAX];
    unsigned int sel_nmig[GPU_MAX];
    int mig_whole;
    sm_nvml_event_set events;  /* Xid events of every device; NULL: none */
    int events_failing;        /* the last poll failed; its line was said */
    char shipped[sizeof ((sm_tag *)0)->value]; /* gpu_events as last shipped */
    char shipped_news[sizeof ((sm_tag *)0)->value]; /* the same without the repeat counts */
    double t_open, t_shipped;  /* monotonic s */
    struct procs procs;
};

static int query_procs(struct gpu *g, struct gpu_dev *d, struct procs *pr, sm_points *out,
                       int at_open, char *msg, size_t msglen, int *skipped);
static void tag_mem_peak(struct gpu *g, int phase, sm_tags *out);

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
 * prefix ("MIG-<uuid>", driver >= 470), when exactly one does; *mig its
 * MIG device handle. */
static int match_mig_uuid(struct gpu *g, const char *prefix, size_t plen, sm_nvml_device *mig)
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
                *mig = mh;
            }
        }
    }
    return hit;
}

/* The MIG device handle of GPU parent's instance gi/ci (the pre-470 entry
 * MIG-GPU-<uuid>/<gi>/<ci>); 0, or -1 when NVML lists none such (or lacks
 * the id calls). */
static int match_mig_ids(struct gpu *g, unsigned int parent, const char *ids,
                         sm_nvml_device *mig)
{
    unsigned int max = 0, gi, ci;
    char *end;
    sm_nvml_device h;

    if (!g->f.mig_count || !g->f.mig_handle || !g->f.gi_id || !g->f.ci_id || *ids != '/')
        return -1;
    gi = (unsigned int)strtoul(ids + 1, &end, 10);
    if (end == ids + 1 || *end != '/' || !isdigit((unsigned char)end[1]))
        return -1;
    ci = (unsigned int)strtoul(end + 1, &end, 10);
    if (*end || g->f.handle(parent, &h) != SM_NVML_SUCCESS ||
        g->f.mig_count(h, &max) != SM_NVML_SUCCESS)
        return -1;
    for (unsigned int j = 0; j < max && j < 64; j++) {
        sm_nvml_device mh;
        unsigned int a, b;
        if (g->f.mig_handle(h, j, &mh) == SM_NVML_SUCCESS &&
            g->f.gi_id(mh, &a) == SM_NVML_SUCCESS && g->f.ci_id(mh, &b) == SM_NVML_SUCCESS &&
            a == gi && b == ci) {
            *mig = mh;
            return 0;
        }
    }
    return -1;
}

/* Keeps a named instance's handle for its parent (once: a repeated entry
 * names the same instance). */
static void keep_mig(struct gpu *g, unsigned int parent, sm_nvml_device mig)
{
    unsigned int *n = &g->sel_nmig[parent];

    for (unsigned int k = 0; k < *n; k++)
        if (g->sel_mig[parent][k] == mig)
            return;
    if (*n < MIG_MAX)
        g->sel_mig[parent][(*n)++] = mig;
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
        /* the pre-470 form MIG-GPU-<gpu uuid>/<gi>/<ci> names its parent;
         * the instance is the one of those ids, when NVML lists it */
        size_t ul = strcspn(tok + 4, "/");
        sm_nvml_device mig;
        idx = match_gpu_uuid(g, tok + 4, ul);
        if (idx >= 0 && match_mig_ids(g, (unsigned int)idx, tok + 4 + ul, &mig) == 0)
            keep_mig(g, (unsigned int)idx, mig);
        else if (idx >= 0)
            g->mig_whole = 1;
        *l->mig |= idx >= 0;
    } else if (strncmp(tok, "MIG-", 4) == 0 && g->f.uuid) {
        sm_nvml_device mig;
        idx = match_mig_uuid(g, tok, strlen(tok), &mig);
        if (idx >= 0)
            keep_mig(g, (unsigned int)idx, mig);
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

    memset(g->sel_nmig, 0, sizeof g->sel_nmig); /* no MIG instance named (yet) */
    g->mig_whole = 0;
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
    if (mig) {
        /* which series are the instance's and which the board's: NVML
         * answers memory and processes per instance, nothing else */
        char per[160] = "";
        size_t pl = 0;
        for (size_t i = 0; i < nsel && pl < sizeof per; i++) {
            int w;
            if (!g->sel_nmig[sel[i]])
                continue;
            w = snprintf(per + pl, sizeof per - pl, "%s%u", pl ? "," : "", sel[i]);
            pl += w > 0 ? (size_t)w : 0;
        }
        if (per[0])
            sm__line_join(note, notelen, strchr(per, ',')
                ? "MIG: gpu_{%s}_memory_usage_* and gpu_{%s}_process_memory_megabytes are the "
                  "named instance's (through its MIG device handle); "
                  "utilization, power, temperature, clocks, throttled, PCIe, ECC and "
                  "gpu_events are the whole parent GPU's (every instance on it)"
                : "MIG: gpu_%s_memory_usage_* and gpu_%s_process_memory_megabytes are the "
                  "named instance's (through its MIG device handle); "
                  "utilization, power, temperature, clocks, throttled, PCIe, ECC and "
                  "gpu_events are the whole parent GPU's (every instance on it)", per, per);
        if (g->mig_whole)
            sm__line_join(note, notelen, "a MIG-GPU-<uuid>/<gi>/<ci> entry whose instance NVML "
                "does not list is logged as its whole parent GPU (memory, utilization and power "
                "of every instance on it)");
    }
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

static sm_nvml_return read_memory_of(const struct gpu *g, const struct gpu_dev *d,
                                     sm_nvml_device h, unsigned long long *used,
                                     unsigned long long *total)
{
    sm_nvml_return rc;

    if (d->mem_v2) {
        sm_nvml_memory_v2 m;
        memset(&m, 0, sizeof m);
        m.version = SM_NVML_MEMORY_V2_VERSION;
        rc = g->f.memory_v2(h, &m);
        *used = m.used;
        *total = m.total;
    } else {
        sm_nvml_memory m;
        memset(&m, 0, sizeof m);
        rc = g->f.memory(h, &m);
        *used = m.used;
        *total = m.total;
    }
    return rc;
}

/* The device's memory: the GPU's, or the sum over its named MIG instances
 * (each one's own total and use, through its MIG device handle; the parent
 * handle would give the whole board, or NO_PERMISSION without privilege).
 * The first failing instance's rc is the answer: a partial sum is no value. */
static sm_nvml_return read_memory(const struct gpu *g, const struct gpu_dev *d,
                                  unsigned long long *used, unsigned long long *total)
{
    sm_nvml_return rc;

    if (!d->nmig)
        return read_memory_of(g, d, d->h, used, total);
    *used = *total = 0;
    for (unsigned int k = 0; k < d->nmig; k++) {
        unsigned long long u = 0, t = 0;
        rc = read_memory_of(g, d, d->mig[k], &u, &t);
        if (rc != SM_NVML_SUCCESS)
            return rc;
        *used += u;
        *total += t;
    }
    return SM_NVML_SUCCESS;
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
            d->mem_source = d->nmig ? "nvmlDeviceGetMemoryInfo_v2(MIG device handle)"
                                    : "nvmlDeviceGetMemoryInfo_v2";
            return rc;
        }
    }
    d->mem_v2 = 0;
    d->mem_source = d->nmig ? "nvmlDeviceGetMemoryInfo(MIG device handle)"
                            : "nvmlDeviceGetMemoryInfo";
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

/* judge() for a query of the health fields; counts a transient failure. */
static int got(const struct gpu *g, struct gpu_dev *d, sm_nvml_return rc, enum query q,
               const char *call, int at_open, char *msg, size_t msglen, int *skipped)
{
    if (judge(g, d, rc, q, call, at_open, msg, msglen))
        return 1;
    *skipped += classify(rc) == V_SKIP;
    return 0;
}

static int wants(const struct gpu_dev *d, enum query q)
{
    return !d->lost && (d->want & q_mask[q]);
}

/* A counter field's value; the PCIe counters are unsigned 64-bit (the
 * header's valueType says so; narrower types are widened). */
static sm_nvml_return field_u64(const sm_nvml_field_value *f, unsigned long long *v)
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

/*
 * A cumulative series since open: the deltas between readings, summed from
 * the first value read.  A reading below the last one is a counter that
 * restarted — a PCIe counter that wrapped, volatile ECC counts cleared by
 * nvmlDeviceClearEccErrorCounts (nvml.h: it "takes effect immediately") or
 * by a driver reload — so its value is what happened since: added whole,
 * never taken back (a difference from the first reading alone went down to
 * the count since the clear).  What was counted between the last reading
 * and the restart is not seen.
 */
static unsigned long long count_since_open(struct gpu_dev *d, enum metric m,
                                           unsigned long long *last, unsigned long long *sum,
                                           unsigned long long v)
{
    if (!(d->based & BIT(m)))
        *last = v;
    d->based |= BIT(m);
    *sum += v >= *last ? v - *last : v;
    *last = v;
    return *sum;
}

static const char *const call_temp[2] = {"nvmlDeviceGetTemperature",
                                         "nvmlDeviceGetTemperatureV"};
static const char *const src_temp[2] = {"nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU)",
                                        "nvmlDeviceGetTemperatureV(NVML_TEMPERATURE_GPU)"};
static const char *const src_clock[2] = {"nvmlDeviceGetClockInfo(NVML_CLOCK_SM)",
                                         "nvmlDeviceGetClockInfo(NVML_CLOCK_MEM)"};
static const char *const src_pcie[2] = {
    "nvmlDeviceGetFieldValues(NVML_FI_DEV_PCIE_COUNT_RX_BYTES)",
    "nvmlDeviceGetFieldValues(NVML_FI_DEV_PCIE_COUNT_TX_BYTES)"};
static const char *const src_ecc[2] = {
    "nvmlDeviceGetTotalEccErrors(NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC)",
    "nvmlDeviceGetTotalEccErrors(NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC)"};

static sm_nvml_return read_temperature(const struct gpu *g, const struct gpu_dev *d, int *t)
{
    sm_nvml_return rc;

    if (d->temp_v) {
        sm_nvml_temperature v;
        memset(&v, 0, sizeof v);
        v.version = SM_NVML_TEMPERATURE_V1_VERSION;
        v.sensorType = SM_NVML_TEMPERATURE_GPU;
        rc = g->f.temperature_v(d->h, &v);
        *t = v.temperature;
    } else {
        unsigned int u = 0;
        rc = g->f.temperature(d->h, SM_NVML_TEMPERATURE_GPU, &u);
        *t = (int)u;
    }
    return rc;
}

/* At open, as choose_memory: nvmlDeviceGetTemperatureV when the library has
 * it (nvml.h deprecates the old call as of NVML 13, so a later driver may
 * drop it) and it answers, else the old call, which every driver before it
 * has.  Returns the rc of the variant kept. */
static sm_nvml_return choose_temperature(const struct gpu *g, struct gpu_dev *d, int *t)
{
    sm_nvml_return rc;

    d->temp_v = g->f.temperature_v != NULL;
    rc = read_temperature(g, d, t);
    if (d->temp_v && g->f.temperature && rc != SM_NVML_SUCCESS &&
        rc != SM_NVML_ERROR_GPU_IS_LOST) {
        d->temp_v = 0;
        rc = read_temperature(g, d, t);
    }
    return rc;
}

/* The health fields of one device (docs/gpu.md "Series"): temperature,
 * clocks, clock-event reasons, PCIe and ECC counters.  As query_device. */
static int query_health(const struct gpu *g, struct gpu_dev *d, sm_points *out, int at_open,
                        char *msg, size_t msglen)
{
    int skipped = 0;

    if (wants(d, Q_TEMP)) {
        int t = 0;
        sm_nvml_return rc = at_open ? choose_temperature(g, d, &t) : read_temperature(g, d, &t);
        if (got(g, d, rc, Q_TEMP, call_temp[d->temp_v], at_open, msg, msglen, &skipped) && out)
            sm__emit(out, d->key[M_TEMP], (double)t, unit[M_TEMP], src_temp[d->temp_v],
                     SM_AGG_MEAN);
    }
    for (int k = 0; k < 2; k++) {
        enum query q = k ? Q_MEM_CLOCK : Q_SM_CLOCK;
        enum metric m = k ? M_MEM_CLOCK : M_SM_CLOCK;
        unsigned int mhz = 0;
        sm_nvml_return rc;
        if (!wants(d, q))
            continue;
        rc = g->f.clock(d->h, k ? SM_NVML_CLOCK_MEM : SM_NVML_CLOCK_SM, &mhz);
        if (got(g, d, rc, q, "nvmlDeviceGetClockInfo", at_open, msg, msglen, &skipped) && out)
            sm__emit(out, d->key[m], (double)mhz, unit[m], src_clock[k], SM_AGG_MEAN);
    }
    if (wants(d, Q_REASONS)) {
        unsigned long long r = 0;
        sm_nvml_return rc = g->f.reasons(d->h, &r);
        /* sampled: each sample says 100 or 0, the window's mean is the share
         * of its samples in which the reason was active (docs/gpu.md) */
        if (got(g, d, rc, Q_REASONS, g->f.reasons_call, at_open, msg, msglen, &skipped) && out) {
            sm__emit(out, d->key[M_THR], (r & THR_ANY) ? 100.0 : 0.0, unit[M_THR],
                    g->f.reasons_call, SM_AGG_MEAN);
            sm__emit(out, d->key[M_THR_POWER], (r & THR_POWER) ? 100.0 : 0.0,
                    unit[M_THR_POWER], g->f.reasons_call, SM_AGG_MEAN);
            sm__emit(out, d->key[M_THR_THERMAL], (r & THR_THERMAL) ? 100.0 : 0.0,
                    unit[M_THR_THERMAL], g->f.reasons_call, SM_AGG_MEAN);
        }
    }
    if (wants(d, Q_PCIE_RX) || wants(d, Q_PCIE_TX)) {
        sm_nvml_field_value fv[2];
        sm_nvml_return rc;
        memset(fv, 0, sizeof fv);
        fv[0].fieldId = SM_NVML_FI_DEV_PCIE_COUNT_RX_BYTES;
        fv[1].fieldId = SM_NVML_FI_DEV_PCIE_COUNT_TX_BYTES;
        rc = g->f.fields(d->h, 2, fv);
        for (int k = 0; k < 2; k++) {
            enum query q = k ? Q_PCIE_TX : Q_PCIE_RX;
            enum metric m = k ? M_PCIE_TX : M_PCIE_RX;
            unsigned long long v = 0;
            sm_nvml_return frc = rc != SM_NVML_SUCCESS ? rc : field_u64(&fv[k], &v);
            if (!wants(d, q) ||
                !got(g, d, frc, q, "nvmlDeviceGetFieldValues", at_open, msg, msglen, &skipped))
                continue;
            /* the counters may wrap (the header says so, not at what width) */
            v = count_since_open(d, m, &d->pcie_last[k], &d->pcie_sum[k], v);
            if (out)
                sm__emit(out, d->key[m], (double)v / 1e6, unit[m], src_pcie[k], SM_AGG_LAST);
        }
    }
    /* one query for both (a board without ECC, or ECC off, says NOT_SUPPORTED
     * to both): the line says it once */
    for (int k = 0; k < 2 && wants(d, Q_ECC); k++) {
        enum query q = Q_ECC;
        enum metric m = k ? M_ECC_UNCORR : M_ECC_CORR;
        unsigned long long c = 0;
        sm_nvml_return rc;
        rc = g->f.ecc(d->h,
                      k ? SM_NVML_MEMORY_ERROR_TYPE_UNCORRECTED : SM_NVML_MEMORY_ERROR_TYPE_CORRECTED,
                      SM_NVML_VOLATILE_ECC, &c);
        if (!got(g, d, rc, q, "nvmlDeviceGetTotalEccErrors", at_open, msg, msglen, &skipped))
            continue;
        c = count_since_open(d, m, &d->ecc_last[k], &d->ecc_sum[k], c);
        if (out)
            sm__emit(out, d->key[m], (double)c, unit[m], src_ecc[k], SM_AGG_LAST);
    }
    return skipped;
}

/* Queries every metric once; rc verdicts are those of judge().  Emits into
 * out when non-NULL.  Returns the number of transient failures. */
static int query_device(struct gpu *g, struct gpu_dev *d, sm_points *out, int at_open,
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
            d->used_mb = (double)used / 1e6;
            d->total_mb = (double)total / 1e6;
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
    skipped += query_health(g, d, out, at_open, msg, msglen);
    if (g->f.processes)
        query_procs(g, d, &g->procs, out, at_open, msg, msglen, &skipped);
    return skipped;
}

/* 1 when /proc/PID/fd holds a link to a GPU device node (through the
 * sysroot): the process has a CUDA context here.  Only when a pid is new. */
static int has_gpu_open(const struct procs *pr, int pid)
{
    char dev[SM_PATH_MAX], path[64], link[SM_PATH_MAX], full[SM_PATH_MAX];
    size_t dl;

    if (sm__path(&pr->ctx, "/dev/nvidia", dev, sizeof dev) < 0)
        return 0;
    dl = strlen(dev);
    /* the fds a CUDA context opens come early; 1024 bounds the cost of a miss */
    for (int fd = 0; fd < 1024; fd++) {
        ssize_t n;
        snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
        if (sm__path(&pr->ctx, path, full, sizeof full) < 0)
            return 0;
        n = readlink(full, link, sizeof link - 1);
        if (n < 0) {
            if (errno == ENOENT)
                continue;
            return 0; /* EACCES: not ours to see */
        }
        link[n] = '\0';
        if ((size_t)n > dl && strncmp(link, dev, dl) == 0)
            return 1; /* /dev/nvidia0, /dev/nvidiactl, /dev/nvidia-uvm */
    }
    return 0;
}

/* The class of an NVML pid (and its rank for P_RANK), cached by pid and
 * start time.  Own: this process or a descendant (the ppid chain reaches
 * self); a rank: another process whose environment says RANK. */
static int pid_class(struct procs *pr, int pid, int *rank)
{
    char path[64], buf[1024];
    struct pcache_entry *e = NULL, *old = &pr->cache[0];
    sm_pid_stat st;
    ssize_t n;

    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    n = pid > 0 ? sm__read_file(&pr->ctx, path, buf, sizeof buf) : -EINVAL;
    if (n < 0 || sm__parse_pid_stat(buf, (size_t)n, &st) != 0)
        return P_FOREIGN; /* not in this pid namespace: another container, the host */
    for (int i = 0; i < PCACHE; i++) {
        struct pcache_entry *c = &pr->cache[i];
        if (c->pid == pid && c->start == st.starttime) {
            e = c;
            break;
        }
        if (c->seen < old->seen)
            old = c;
    }
    if (!e) {
        int cls = P_FOREIGN, r = -1, p = pid;
        if (has_gpu_open(pr, pid)) {
            cls = P_UNRANKED;
            for (int depth = 0; depth < 64 && p > 1; depth++) {
                sm_pid_stat a;
                if (p == pr->self_pid) {
                    cls = P_OWN;
                    break;
                }
                snprintf(path, sizeof path, "/proc/%d/stat", p);
                n = sm__read_file(&pr->ctx, path, buf, sizeof buf);
                if (n < 0 || sm__parse_pid_stat(buf, (size_t)n, &a) != 0)
                    break;
                p = a.ppid;
            }
            if (cls != P_OWN) {
                int fd;
                snprintf(path, sizeof path, "/proc/%d/environ", pid);
                fd = sm__open(&pr->ctx, path);
                if (fd >= 0) {
                    n = pread(fd, pr->env, sizeof pr->env, 0); /* a cut read keeps its start */
                    close(fd);
                    if (n > 0 && sm__environ_int(pr->env, (size_t)n, "RANK", &r) == 0)
                        cls = r == pr->own_rank ? P_OWN : P_RANK;
                }
            }
        }
        e = old;
        e->pid = pid;
        e->start = st.starttime;
        e->cls = cls;
        e->rank = r;
    }
    e->seen = pr->sample;
    *rank = e->rank;
    return e->cls;
}

/* Reads GPU d's processes into h (MB by class) and emits its per-rank
 * series.  Returns 1 when the value was used. */
static int query_procs(struct gpu *g, struct gpu_dev *d, struct procs *pr, sm_points *out,
                       int at_open, char *msg, size_t msglen, int *skipped)
{
    sm_nvml_process_info info[PROC_LIST];
    unsigned int count = PROC_LIST;
    struct held h;
    double by_rank[PROC_RANKS_MAX];
    sm_nvml_return rc;

    if (!wants(d, Q_PROCS))
        return 0;
    memset(info, 0, sizeof info);
    /* INSUFFICIENT_SIZE (more than PROC_LIST processes: the list is not
     * filled) is judged as any transient error: skipped, one line a streak.
     * Under MIG each named instance lists its own processes through its MIG
     * device handle (the parent's answers the whole board only with
     * privilege); the lists are put one after the other. */
    if (!d->nmig) {
        rc = g->f.processes(d->h, &count, info);
    } else {
        count = 0;
        rc = SM_NVML_SUCCESS;
        for (unsigned int k = 0; k < d->nmig && rc == SM_NVML_SUCCESS; k++) {
            unsigned int c = PROC_LIST - count;
            rc = g->f.processes(d->mig[k], &c, info + count);
            if (rc == SM_NVML_SUCCESS)
                count += c < PROC_LIST - count ? c : PROC_LIST - count;
        }
    }
    if (!got(g, d, rc, Q_PROCS, d->procs_source, at_open, msg, msglen, skipped))
        return 0;
    memset(&h, 0, sizeof h);
    memset(by_rank, 0, sizeof by_rank);
    h.used = d->used_mb;
    for (unsigned int i = 0; i < count && i < PROC_LIST; i++) {
        double mb;
        int rank = -1, cls;
        if (info[i].usedGpuMemory == ~0ull || info[i].pid == 0)
            continue; /* NVML_VALUE_NOT_AVAILABLE; no process */
        mb = (double)info[i].usedGpuMemory / 1e6;
        cls = pid_class(pr, (int)info[i].pid, &rank);
        if (cls == P_OWN) {
            h.own += mb;
            rank = pr->own_rank;
        } else if (cls == P_UNRANKED) {
            h.unranked += mb;
        } else if (cls == P_FOREIGN) {
            h.foreign += mb;
        } else {
            int j = 0;
            while (j < h.nr && h.r[j].rank != rank)
                j++;
            if (j < h.nr || h.nr < PEAK_RANKS) {
                h.r[j].rank = rank;
                h.r[j].mb += mb;
                h.nr += j == h.nr;
            } else {
                h.other += mb; /* more ranks than the tag names */
            }
        }
        if (rank >= pr->rank0 && rank < pr->rank0 + pr->nranks)
            by_rank[rank - pr->rank0] += mb;
    }
    if (out)
        for (int r = 0; r < pr->nranks; r++) {
            int rk = pr->rank0 + r;
            if (rk == pr->own_rank)
                sm__emit(out, d->key[M_PROC_MEM], by_rank[r], unit[M_PROC_MEM],
                        d->procs_source, SM_AGG_MEAN);
            else
                sm__emit_rank(out, rk, d->key[M_PROC_MEM], by_rank[r], unit[M_PROC_MEM],
                             d->procs_source, SM_AGG_MEAN);
        }
    if (!at_open && h.used >= d->peak.used && h.used > 0)
        d->peak = h;
    return 1;
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
        d->nmig = g->sel_nmig[d->index];
        memcpy(d->mig, g->sel_mig[d->index], sizeof d->mig);
        d->procs_source = d->nmig ? "nvmlDeviceGetComputeRunningProcesses_v3(MIG device handle)"
                                  : "nvmlDeviceGetComputeRunningProcesses_v3";
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

/* ---- events and memory health: the gpu_events tag --------------------------- */

/*
 * Xid errors through one event set for every device (docs/gpu.md "Events"):
 * polled with a zero timeout from the sampling thread, so no thread of ours
 * waits in the driver and a sample never blocks on it.  A device that
 * cannot register (NOT_SUPPORTED on some boards, MIG without privilege)
 * only lacks its events, said in the open line.
 */
static void events_open(struct gpu *g, char *note, size_t cap)
{
    sm_nvml_return rc;
    size_t registered = 0;

    if (!g->f.event_set_create || !g->f.register_events || !g->f.event_wait ||
        !g->f.event_set_free)
        return; /* the missing entry point was named already */
    rc = g->f.event_set_create(&g->events);
    if (rc != SM_NVML_SUCCESS) {
        g->events = NULL;
        sm__line_join(note, cap, "no Xid events: nvmlEventSetCreate says %s", nvml_text(g, rc));
        return;
    }
    for (size_t i = 0; i < g->n; i++) {
        rc = g->f.register_events(g->dev[i].h, SM_NVML_EVENT_TYPE_XID_CRITICAL_ERROR, g->events);
        if (rc == SM_NVML_ERROR_UNKNOWN) {
            /* nvml.h: "event set is in undefined state and should be freed"
             * (NOT_SUPPORTED leaves it usable): no GPU's events are polled */
            sm__line_join(note, cap, "no Xid events: nvmlDeviceRegisterEvents of GPU %u says %s, "
                          "which leaves the event set undefined (nvml.h); it is freed",
                          g->dev[i].index, nvml_text(g, rc));
            registered = 0;
            break;
        }
        if (rc == SM_NVML_SUCCESS)
            registered++;
        else
            sm__line_join(note, cap, "no Xid events of GPU %u: nvmlDeviceRegisterEvents says %s",
                          g->dev[i].index, nvml_text(g, rc));
    }
    if (!registered) {
        g->f.event_set_free(g->events);
        g->events = NULL;
    }
}

/* What arrived since the last poll; at most a bounded number per sample,
 * the rest is there at the next. */
static void events_poll(struct gpu *g)
{
    for (int n = 0; g->events && n < 64; n++) {
        sm_nvml_event_data ev;
        sm_nvml_return rc;

        memset(&ev, 0, sizeof ev);
        rc = g->f.event_wait(g->events, &ev, 0);
        if (rc == SM_NVML_ERROR_TIMEOUT)
            break; /* nothing (more) pending */
        if (rc != SM_NVML_SUCCESS) {
            if (!g->events_failing)
                sm__log(SM_WARN, "gpu: nvmlEventSetWait_v2 failed: %s; Xid events are missed "
                        "until it answers again", nvml_text(g, rc));
            g->events_failing = 1;
            break;
        }
        g->events_failing = 0;
        if (!(ev.eventType & SM_NVML_EVENT_TYPE_XID_CRITICAL_ERROR))
            continue;
        for (size_t i = 0; i < g->n; i++) {
            struct gpu_dev *d = &g->dev[i];
            unsigned int code = (unsigned int)ev.eventData, seen = 0;
            if (d->h != ev.device)
                continue;
            d->xid_last = code;
            d->xids++;
            d->xid_at = (long long)sm__now_ms() / 1000;
            for (unsigned int j = 0; j < d->ncodes; j++)
                seen |= d->codes[j] == code;
            if (!seen && d->ncodes < sizeof d->codes / sizeof d->codes[0])
                d->codes[d->ncodes++] = code;
            sm__log(SM_WARN, "gpu: GPU %u: Xid %u (docs/gpu.md says what it means)", d->index,
                    code);
        }
    }
}

/* Remapped rows and retired pages: lifetime facts of the board, read once
 * per window (they change rarely; reading them per sample would cost for
 * nothing).  A NOT_SUPPORTED at open (MIG, boards before Ampere for rows,
 * Ampere and later for pages) leaves that part out; any other error at open
 * (a transient one) only skips that reading, as elsewhere. */
static void health_read(struct gpu *g, int at_open)
{
    for (size_t i = 0; i < g->n; i++) {
        struct gpu_dev *d = &g->dev[i];
        unsigned long long addr[64];
        unsigned int v[4];

        if (d->lost)
            continue;
        if (g->f.remapped && (at_open || d->remap_ok)) {
            sm_nvml_return rc = g->f.remapped(d->h, &v[0], &v[1], &v[2], &v[3]);
            if (rc == SM_NVML_SUCCESS)
                memcpy(d->remap, v, sizeof d->remap);
            if (at_open)
                d->remap_ok = classify(rc) == V_OK || classify(rc) == V_SKIP;
        }
        if (g->f.retired && (at_open || d->retired_ok)) {
            int ok = 1;
            for (int c = 0; c < 2; c++) {
                unsigned int count = sizeof addr / sizeof addr[0];
                sm_nvml_return rc = g->f.retired(
                    d->h, c ? SM_NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
                            : SM_NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
                    &count, addr);
                /* INSUFFICIENT_SIZE: more pages than the buffer, count says how many */
                if (rc == SM_NVML_SUCCESS || rc == SM_NVML_ERROR_INSUFFICIENT_SIZE)
                    d->retired[c] = count;
                else if (classify(rc) != V_SKIP)
                    ok = 0;
            }
            if (at_open)
                d->retired_ok = ok;
        }
    }
}

/* scopemeter.rankN.gpu_events (docs/series.md gives the grammar): one
 * clause per GPU with anything to say, only its non-zero items.  news: only
 * what is news (which codes, the board's rows and pages), not the last
 * Xid's time and the count, which a storm of one Xid moves every window. */
static void events_format(const struct gpu *g, int news, char *val, size_t cap)
{
    val[0] = '\0';
    for (size_t i = 0; i < g->n; i++) {
        const struct gpu_dev *d = &g->dev[i];
        char c[256] = "";

        if (d->xids) {
            char at[32] = "";
            time_t t = (time_t)d->xid_at;
            struct tm tm;
            if (gmtime_r(&t, &tm))
                strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm);
            if (!news)
                sm__line_add(c, sizeof c, " xid=%u at=%s xids=%u", d->xid_last, at, d->xids);
            sm__line_add(c, sizeof c, " codes=");
            for (unsigned int j = 0; j < d->ncodes; j++)
                sm__line_add(c, sizeof c, "%s%u", j ? "," : "", d->codes[j]);
        }
        if (d->remap_ok) {
            if (d->remap[0])
                sm__line_add(c, sizeof c, " remapped_corrected=%u", d->remap[0]);
            if (d->remap[1])
                sm__line_add(c, sizeof c, " remapped_uncorrected=%u", d->remap[1]);
            if (d->remap[2])
                sm__line_add(c, sizeof c, " remap_pending=1");
            if (d->remap[3])
                sm__line_add(c, sizeof c, " remap_failure=1");
        }
        if (d->retired_ok) {
            if (d->retired[0])
                sm__line_add(c, sizeof c, " retired_pages_sbe=%u", d->retired[0]);
            if (d->retired[1])
                sm__line_add(c, sizeof c, " retired_pages_dbe=%u", d->retired[1]);
        }
        if (c[0])
            sm__line_add(val, cap, "%sgpu%u%s", val[0] ? "; " : "", d->index, c);
    }
}

static void gpu_tags(void *state, int phase, sm_tags *out)
{
    struct gpu *g = state;
    char val[sizeof g->shipped], news[sizeof g->shipped];
    double now = sm__now_mono();

    tag_mem_peak(g, phase, out);
    if (phase != SM_TAGS_START)
        health_read(g, 0);
    events_format(g, 0, val, sizeof val);
    events_format(g, 1, news, sizeof news);
    if (!val[0])
        return;
    /* at start and end whenever there is something; in a window a new code
     * or a change of rows and pages at once, a repeat of known codes at most
     * every (time since open)/128, so the distinct texts of a run stay
     * bounded (docs/design.md §9, as memory_events) */
    if (phase == SM_TAGS_WINDOW &&
        (strcmp(val, g->shipped) == 0 ||
         (strcmp(news, g->shipped_news) == 0 && now - g->t_shipped < (now - g->t_open) / 128.0)))
        return;
    sm__tag_add(out, "gpu_events", "%s", val);
    memcpy(g->shipped, val, sizeof val);
    memcpy(g->shipped_news, news, sizeof news);
    g->t_shipped = now;
}

/* Whether /proc (through the sysroot) shows a pid namespace of its own.
 * The host's shows the kernel's threads: pid 2 is kthreadd, whose parent is
 * no process (init/main.c, rest_init).  A container's namespace starts at
 * its own pid 1 and shows no kernel thread.  Only a /proc that has a pid 1
 * and no such pid 2 is taken for one: a fake machine's tree without pid 1
 * is a host's, as before. */
static int own_pid_ns(const sm_ctx *ctx)
{
    char buf[512];
    sm_pid_stat st;
    ssize_t n;

    if (sm__read_file(ctx, "/proc/1/stat", buf, sizeof buf) <= 0)
        return 0;
    n = sm__read_file(ctx, "/proc/2/stat", buf, sizeof buf);
    return !(n > 13 && strncmp(buf, "2 (kthreadd) ", 13) == 0 &&
             sm__parse_pid_stat(buf, (size_t)n, &st) == 0 && st.ppid == 0);
}

/* The pid of /proc/self through the sysroot (a fake /proc links it to its
 * root, as for coll_proc.c), the rank, the sysroot and its pid namespace. */
static void procs_open(struct procs *pr, const sm_ctx *ctx)
{
    char path[SM_PATH_MAX], link[64];
    ssize_t n;

    pr->ctx = *ctx;
    pr->ctx.rec_key = NULL; /* not kept beyond open */
    pr->own_rank = ctx->id.rank >= 0 ? ctx->id.rank : 0;
    pr->rank0 = pr->own_rank;
    pr->nranks = 1;
    pr->self_pid = -1;
    if (sm__path(ctx, "/proc/self", path, sizeof path) == 0 &&
        (n = readlink(path, link, sizeof link - 1)) > 0) {
        link[n] = '\0';
        pr->self_pid = atoi(link);
    }
    pr->own_pid_ns = own_pid_ns(ctx);
}

/* In a pid namespace of its own the process list is not read (see "Who
 * holds a GPU's memory" above): its metric joins the dropped ones of every
 * device, said in one clause. */
static unsigned int open_procs_ns(const struct gpu *g, char *note, size_t cap)
{
    if (!g->procs.own_pid_ns || !g->f.processes)
        return 0;
    sm__line_join(note, cap, "gpu_*_process_memory_megabytes and the holders of "
                  "gpu_memory_at_peak dropped: this process has a pid namespace of its own "
                  "(a container without hostPID) and NVML lists the host's pids, which cannot "
                  "be mapped into it");
    return q_mask[Q_PROCS];
}

/* The ranks whose gpu_i_process_memory_megabytes this collector records:
 * its own; under all_workers the pod's (local rank 0's collector records
 * R .. R+LOCAL_WORLD_SIZE-1, as coll_proc.c's trees), bounded so that a
 * sample's points fit. */
static void procs_ranks(struct gpu *g, const sm_ctx *ctx, char *note, size_t cap)
{
    struct procs *pr = &g->procs;
    int want = 1, fit;

    if (!g->f.processes || g->n == 0 || pr->own_pid_ns)
        return;
    if (ctx->all_workers && ctx->id.local_rank == 0 && ctx->id.local_world_size > 1 &&
        !ctx->id.invalid[0])
        want = ctx->id.local_world_size < PROC_RANKS_MAX ? ctx->id.local_world_size
                                                         : PROC_RANKS_MAX;
    fit = PROC_POINTS_MAX / (int)g->n;
    pr->nranks = want < fit ? want : fit;
    if (pr->nranks < want)
        sm__line_join(note, cap, "gpu_*_process_memory_megabytes recorded for ranks %d..%d of "
                      "%d (at most %d points a sample)", pr->rank0, pr->rank0 + pr->nranks - 1,
                      pr->rank0 + want - 1, PROC_POINTS_MAX);
}

/* scopemeter.rankN.gpu_memory_at_peak (docs/series.md): each GPU's memory
 * by holder at its highest sampled use; shipped when a peak rose by
 * max(1 MB, 0.1 % of the GPU's memory), so a run has ~1000 texts at most. */
static void tag_mem_peak(struct gpu *g, int phase, sm_tags *out)
{
    char val[sizeof ((sm_tag *)0)->value] = "";
    int rose = 0;

    for (size_t i = 0; i < g->n; i++) {
        struct gpu_dev *d = &g->dev[i];
        const struct held *h = &d->peak;
        double step = d->total_mb / 1000.0 > 1.0 ? d->total_mb / 1000.0 : 1.0;
        if (!(d->want & BIT(M_PROC_MEM)) || h->used <= 0)
            continue;
        rose |= d->peak_shipped == 0 || h->used >= d->peak_shipped + step;
        /* used_mb always, the holders only where non-zero: eight GPUs fit */
        sm__line_add(val, sizeof val, "%sgpu%u used_mb=%.1f", val[0] ? "; " : "", d->index,
                     h->used);
        if (h->own > 0)
            sm__line_add(val, sizeof val, " own_mb=%.1f", h->own);
        for (int j = 0; j < h->nr; j++)
            sm__line_add(val, sizeof val, " rank%d_mb=%.1f", h->r[j].rank, h->r[j].mb);
        if (h->other > 0)
            sm__line_add(val, sizeof val, " other_ranks_mb=%.1f", h->other);
        if (h->unranked > 0)
            sm__line_add(val, sizeof val, " unranked_mb=%.1f", h->unranked);
        if (h->foreign > 0)
            sm__line_add(val, sizeof val, " foreign_mb=%.1f", h->foreign);
    }
    if (!val[0] || phase == SM_TAGS_START || (phase == SM_TAGS_WINDOW && !rose))
        return;
    sm__tag_add(out, "gpu_memory_at_peak", "%s", val);
    for (size_t i = 0; i < g->n; i++)
        g->dev[i].peak_shipped = g->dev[i].peak.used;
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
    procs_open(&g->procs, ctx);
    drop |= open_procs_ns(g, devnote, sizeof devnote);
    open_devices(g, sel, nsel, drop, devnote, sizeof devnote);
    if (g->n == 0) {
        sm__line(res->msg, sizeof res->msg, "no usable GPU although /dev/%s exists: %s", node,
                devnote);
        sm__line(res->status, sizeof res->status, "unavailable: %s", devnote);
        rc = -ENODEV;
        goto fail;
    }
    g->t_open = sm__now_mono();
    procs_ranks(g, ctx, devnote, sizeof devnote);
    events_open(g, devnote, sizeof devnote);
    health_read(g, 1);
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
    events_poll(g);
    g->procs.sample++;
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
    .series_per_device = M_COUNT, /* per GPU: MLflow's five and the ten health fields */
    .status_tag = "gpu",
    .gpu = true,
    .counts_devices = true,
    .state_size = sizeof(struct gpu),
    .open = gpu_open,
    .sample = gpu_sample,
    .tags = gpu_tags,
    .close = gpu_close,
};
