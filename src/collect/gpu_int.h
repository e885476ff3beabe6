/*
 * gpu_int.h — what the parts of the NVIDIA collector share among themselves
 * and with nobody else: the collector's state (struct gpu), its devices, the
 * NVML binding's table of entry points, and the functions one part calls in
 * another.  One job a file (docs/design.md §0); each calls only the files
 * below it, never back (tests/py/test_layers.py fails on a circle):
 *
 *   coll_gpu.c     open, sample, close, the keys: calls every part below
 *   gpu_events.c   the gpu_events and gpu_memory_at_peak tags
 *   gpu_query.c    one device's queries of a sample; the open's first query
 *   gpu_holders.c  who holds a GPU's memory (the pids NVML lists, classed)
 *   gpu_gpm.c      the GPU's real work (GPM), NVLink bytes, energy
 *   gpu_select.c   which GPUs: the device node, CUDA_VISIBLE_DEVICES, MIG
 *   gpu_nvml.c     the binding: dlopen, the entry points, what an rc means
 *
 * No file outside these includes this header: the collector's interface is
 * sm__coll_gpu and sm__gpu_keys (internal.h).
 */
#ifndef SM_GPU_INT_H
#define SM_GPU_INT_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "nvml.h"
#include "pidmap.h"

#define GPU_MAX 64 /* more than any host carries (8-16 on the largest nodes); NVML indices
                      * beyond it are not logged */
#define MIG_MAX 8  /* MIG instances named per parent GPU (an A100/H100 has at most 7) */

enum metric {
    M_MEM_PCT, M_MEM_MB, M_UTIL, M_POWER_W, M_POWER_PCT,  /* MLflow's five */
    M_TEMP, M_SM_CLOCK, M_MEM_CLOCK, M_THR, M_THR_POWER, M_THR_THERMAL,
    M_PCIE_RX, M_PCIE_TX, M_ECC_CORR, M_ECC_UNCORR,
    M_PROC_MEM, /* per recorded rank (sm__emit_rank), the own rank counted here */
    /* the GPU's real work from GPM, NVLink from the field counters (or
     * GPM's rates): gpu_gpm.c's, detail level full only */
    M_SM_ACTIVE, M_SM_OCC, M_TENSOR, M_DRAM, M_NVLINK_RX, M_NVLINK_TX,
    M_COUNT
};
#define M_WORK_COUNT 6 /* the metrics from M_SM_ACTIVE on */

#define BIT(m) (1u << (m))
#define MEM_BITS (BIT(M_MEM_PCT) | BIT(M_MEM_MB))
#define POWER_BITS (BIT(M_POWER_W) | BIT(M_POWER_PCT))
#define THR_BITS (BIT(M_THR) | BIT(M_THR_POWER) | BIT(M_THR_THERMAL))
#define PCIE_BITS (BIT(M_PCIE_RX) | BIT(M_PCIE_TX))
#define ECC_BITS (BIT(M_ECC_CORR) | BIT(M_ECC_UNCORR))
#define GPM_BITS (BIT(M_SM_ACTIVE) | BIT(M_SM_OCC) | BIT(M_TENSOR) | BIT(M_DRAM))
#define NVLINK_BITS (BIT(M_NVLINK_RX) | BIT(M_NVLINK_TX))
#define CLOCK_BITS (BIT(M_SM_CLOCK) | BIT(M_MEM_CLOCK))
#define WORK_BITS (GPM_BITS | NVLINK_BITS)
/* Detail level full only (docs/series.md "Levels"): FULL_BITS are not even
 * queried at the default level; the ECC counts are read at every level (the
 * gpu_events tag says them), their series emitted at full only. */
#define FULL_BITS (WORK_BITS | CLOCK_BITS)
#define FULL_SERIES_BITS (FULL_BITS | ECC_BITS)
#define M_FULL_COUNT 10 /* the metrics of FULL_SERIES_BITS */
_Static_assert(__builtin_popcount(FULL_SERIES_BITS) == M_FULL_COUNT, "M_FULL_COUNT counts them");
#define ALL_BITS (BIT(M_COUNT) - 1u)

/* The NVML queries of one sample (gpu_query.c maps each to the metrics it
 * feeds and to its label in the lines). */
enum query {
    Q_MEM, Q_UTIL, Q_POWER, Q_LIMIT, Q_TEMP, Q_SM_CLOCK, Q_MEM_CLOCK, Q_REASONS,
    Q_PCIE_RX, Q_PCIE_TX, Q_ECC, Q_PROCS, Q_GPM, Q_NVLINK_RX, Q_NVLINK_TX, Q_COUNT
};

/* What an NVML return code means for a metric (gpu_nvml.c, sm__gpu_verdict):
 * the value; drop the metric (NOT_SUPPORTED, NO_PERMISSION); the device is
 * lost; skip this value (any other error, transient). */
enum verdict { V_OK, V_DROP, V_LOST, V_SKIP };

#define PROC_LIST 256      /* processes read per GPU and sample (6 KB of stack) */
#define PROC_RANKS_MAX 64  /* ranks a collector records (coll_proc's trees) */
#define PROC_POINTS_MAX 512
#define PEAK_RANKS 8       /* other ranks named in gpu_memory_at_peak */

struct held {               /* one GPU's memory by class, MB */
    double used, own, unranked, foreign, other;
    int nr;
    struct { int rank; double mb; } r[PEAK_RANKS];
};

struct procs {
    sm_ctx ctx;            /* the sysroot, for /proc and /dev */
    int own_rank, rank0, nranks; /* recorded ranks rank0 .. rank0+nranks-1 */
    int own_pid_ns;        /* /proc is a pid namespace of its own: NVML's pids are not its */
    sm__pidmap *map;       /* whose process each pid is (pidmap.h): the set's, or own_map */
    sm__pidmap own_map;    /* opened alone (tests/c): a map of its own */
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
    unsigned long long ecc_said[2];               /* the sums the last ECC line said */
    /* events and memory health (the gpu_events tag) */
    unsigned int xid_last, xids, ncodes;
    unsigned int codes[8];       /* distinct Xid codes, in order of first sight */
    long long xid_at;            /* wall-clock s of the last Xid's arrival */
    int remap_ok, retired_ok;    /* the call answered at open */
    unsigned int remap[4];       /* corrected rows, uncorrected rows, pending, failure */
    unsigned int retired[2];     /* pages: multiple single-bit, double-bit */
    /* GPM (gpu_gpm.c): two sample buffers taken in turn, the last one's
     * monotonic time; a metric the driver refuses leaves want */
    int gpm;                     /* GPM samples are taken (Q_GPM) */
    int gpm_mig;                 /* through nvmlGpmMigSampleGet(h, gpm_gi) */
    unsigned int gpm_gi;
    int nvlink_gpm;              /* NVLink from GPM's rates: the fields were refused */
    sm_nvml_gpm_sample gpm_s[2];
    int gpm_last;                /* gpm_s[gpm_last] holds the last sample; -1 none */
    double gpm_t;                /* its time, monotonic s */
    unsigned long long nvlink_last[2], nvlink_sum[2]; /* the field counters, KiB */
    double nvlink_gpm_mb[2];     /* MB integrated from GPM's rates */
    /* energy since open (the gpu_energy tag), mJ; wrap-safe as the counters */
    int energy_ok, energy_based;
    unsigned long long energy_last, energy_sum;
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
    /* the GPU's real work and its energy (optional, detail full) */
    sm_nvml_gpm_support_fn gpm_support;
    sm_nvml_gpm_alloc_fn gpm_alloc;
    sm_nvml_gpm_free_fn gpm_free;
    sm_nvml_gpm_get_fn gpm_get;
    sm_nvml_gpm_mig_get_fn gpm_mig_get;
    sm_nvml_gpm_metrics_fn gpm_metrics;
    sm_nvml_energy_fn energy;
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
    int detail_full;           /* detail level full: FULL_BITS wanted, ECC series emitted */
    double (*now)(void);       /* monotonic s: sm__now_mono; a test's own clock */
    sm_nvml_gpm_metrics_get gpm_mg; /* 19 KB: the request of nvmlGpmMetricsGet */
};

/* ---- gpu_nvml.c: the binding ---------------------------------------------------- */
SM_HIDDEN const char *sm__gpu_nvml_text(const struct gpu *g, sm_nvml_return rc);
SM_HIDDEN enum verdict sm__gpu_verdict(sm_nvml_return rc);
SM_HIDDEN sm_nvml_return sm__gpu_field_u64(const sm_nvml_field_value *f, unsigned long long *v);
SM_HIDDEN int sm__gpu_load_nvml(struct gpu *g, const char *libname, const char *node,
                                unsigned int *drop, char *symnote, size_t symcap,
                                int *initialized, sm_opened *res);
SM_HIDDEN void sm__gpu_unload(struct gpu *g, int initialized);

/* ---- gpu_select.c: which GPUs ----------------------------------------------------- */
SM_HIDDEN int sm__gpu_find_dev_node(const sm_ctx *ctx, char *first, size_t firstlen);
SM_HIDDEN int sm__gpu_entry_shape_ok(const char *tok);
SM_HIDDEN size_t sm__gpu_select_devices(struct gpu *g, const char *visible, unsigned int *sel,
                                        char *note, size_t notelen);

/* ---- gpu_holders.c: who holds the memory ------------------------------------------ */
SM_HIDDEN void sm__gpu_holders(struct procs *pr, struct gpu_dev *d,
                               const sm_nvml_process_info *info, unsigned int count,
                               int at_open, double *by_rank);
SM_HIDDEN void sm__gpu_procs_open(struct procs *pr, const sm_ctx *ctx);
SM_HIDDEN unsigned int sm__gpu_procs_ns_drop(const struct gpu *g, char *note, size_t cap);
SM_HIDDEN void sm__gpu_procs_ranks(struct gpu *g, const sm_ctx *ctx, char *note, size_t cap);

/* ---- gpu_query.c: one device's queries -------------------------------------------- */
SM_HIDDEN int sm__gpu_query_device(struct gpu *g, struct gpu_dev *d, sm_points *out,
                                   int at_open, char *msg, size_t msglen);
SM_HIDDEN void sm__gpu_say_drops(const struct gpu *g, char *buf, size_t cap);

/* ---- gpu_gpm.c: GPM, NVLink, energy ------------------------------------------------- */
SM_HIDDEN void sm__gpu_gpm_open(struct gpu *g, struct gpu_dev *d, char *note, size_t cap);
SM_HIDDEN int sm__gpu_gpm_query(struct gpu *g, struct gpu_dev *d, sm_points *out, int at_open,
                                char *msg, size_t msglen);
SM_HIDDEN void sm__gpu_gpm_close(struct gpu *g);
SM_HIDDEN void sm__gpu_energy_open(struct gpu *g, char *note, size_t cap);
SM_HIDDEN void sm__gpu_energy_read(struct gpu *g);
SM_HIDDEN void sm__gpu_energy_tag(struct gpu *g, int phase, sm_tags *out);

/* ---- gpu_events.c: the events and peak tags --------------------------------------- */
SM_HIDDEN void sm__gpu_events_open(struct gpu *g, char *note, size_t cap);
SM_HIDDEN void sm__gpu_events_poll(struct gpu *g);
SM_HIDDEN void sm__gpu_health_read(struct gpu *g, int at_open);
SM_HIDDEN void sm__gpu_tags(void *state, int phase, sm_tags *out);

#endif /* SM_GPU_INT_H */
