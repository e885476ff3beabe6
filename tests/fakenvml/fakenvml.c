/*
 * fakenvml.c — a fake libnvidia-ml.so.1 for the GPU collector's tests.
 *
 * No CI machine has a GPU, so the tests load this library through
 * SCOPEMETER_NVML_LIBRARY.  It implements the NVML entry points gpu_nvml.c
 * resolves, with the documented ABI (layouts, return codes, the versioned
 * memory struct's tag), written here independently of src/collect/nvml.h so that a
 * layout mistake in one does not hide in the other.  Values and failures are
 * chosen per test through environment variables read at nvmlInit_v2 (not per
 * call, so the benchmark's lower bound is not inflated by getenv):
 *
 *   FAKE_NVML_INIT_FAIL=rc         nvmlInit_v2 returns rc
 *   FAKE_NVML_COUNT_FAIL=rc        nvmlDeviceGetCount_v2 returns rc
 *   FAKE_NVML_DEVICES=n            devices (default 1, at most 16)
 *   FAKE_NVML_DRIVER=ver           nvmlSystemGetDriverVersion (default 550.54.15)
 *   per device i:
 *   FAKE_NVML_UUID_i               default GPU-f4ce000i-0000-4000-8000-00000000000i
 *   FAKE_NVML_MEM_TOTAL_i          bytes (default 80 GiB)
 *   FAKE_NVML_MEM_USED_i           bytes allocated (default 20 GiB + i GB)
 *   FAKE_NVML_MEM_RESERVED_i       bytes reserved by the driver (default 512 MiB);
 *                                  v1 reports used + reserved, v2 used alone
 *   FAKE_NVML_UTIL_i               percent (default 40 + i)
 *   FAKE_NVML_POWER_i              mW (default 150000 + 1000 i)
 *   FAKE_NVML_LIMIT_i              enforced limit, mW (default 300000)
 *   FAKE_NVML_TEMP_i               °C (default 60 + i), from nvmlDeviceGetTemperatureV
 *                                  and nvmlDeviceGetTemperature alike
 *   FAKE_NVML_SM_CLOCK_i           MHz (default 1980 - i), FAKE_NVML_MEM_CLOCK_i (2619)
 *   FAKE_NVML_REASONS_i=a,b,...    clock-event reason masks (0x.. or decimal), one per
 *                                  call, cycling: a known pattern (default 0)
 *   FAKE_NVML_PCIE_RX_i, _TX_i     the byte counters' values, one per call, the last
 *                                  repeating (defaults: 1e9 + i, 2e9 + i, fixed)
 *   FAKE_NVML_ECC_CORR_i, _UNCORR_i  volatile ECC counts, one per call, the last
 *                                  repeating (default 0)
 *   FAKE_NVML_REMAP_i=c,u,p,f      nvmlDeviceGetRemappedRows (default 0,0,0,0)
 *   FAKE_NVML_RETIRED_i=s,d        retired pages by cause (default 0,0)
 *   FAKE_NVML_XID_i=a,b,...        Xid errors pending at init, delivered one per
 *                                  nvmlEventSetWait_v2; fake_nvml_raise_xid(i, code)
 *                                  raises one later (an in-process test)
 *   FAKE_NVML_PROCS_i=pid:bytes,...  nvmlDeviceGetComputeRunningProcesses_v3's list
 *                                  (pids as the driver gives them: the tests name real
 *                                  processes of their own and pids that exist nowhere)
 *   FAKE_NVML_FAIL_PCIE_RX_i=rc, _PCIE_TX_i  that field's own nvmlReturn
 *   FAKE_NVML_FAIL_<CALL>_i=rc     CALL one of HANDLE MEM MEMV2 UTIL POWER LIMIT UUID
 *                                  TEMP TEMPV CLOCK REASONS FIELDS ECC REMAP RETIRED EVENTS
 *                                  PROCS (TEMP: both temperature calls, one sensor; TEMPV:
 *                                  nvmlDeviceGetTemperatureV alone; EVENTS:
 *                                  nvmlDeviceRegisterEvents, whose UNKNOWN (999) leaves
 *                                  the set undefined, as nvml.h says: every later
 *                                  nvmlEventSetWait_v2 on it answers UNKNOWN)
 *   FAKE_NVML_FAIL_TIMES_i=n       the scripted failures of device i stop after n
 *                                  (a transient error that recovers)
 *                                  fake_nvml_fail(i, "CALL", rc) sets or (rc 0) clears
 *                                  one later: a call that starts failing mid-run
 *                                  (an in-process test)
 *   FAKE_NVML_LOST_AFTER_i=n       after n successful queries of device i (MEM,
 *                                  MEMV2, UTIL, POWER, LIMIT), every call on it
 *                                  answers GPU_IS_LOST (0: lost from the start)
 *   FAKE_NVML_GPM_i=0              device i has no GPM (before Hopper): nvmlGpmQueryDeviceSupport
 *                                  says isSupportedDevice 0 (default 1)
 *   FAKE_NVML_GPM_SM_i, _OCC_i, _TENSOR_i, _DRAM_i (percent), _NVLRX_i, _NVLTX_i (MiB/s):
 *                                  the rate during each interval between two GPM samples,
 *                                  one per nvmlGpmSampleGet, the last repeating (defaults
 *                                  50 + i, 30 + i, 20 + i, 10 + i, 100 + i, 200 + i); each
 *                                  sample advances the device's GPM clock by 1 s, and
 *                                  nvmlGpmMetricsGet computes (counter2 - counter1) /
 *                                  (time2 - time1) as nvml.h defines the metrics
 *   FAKE_NVML_GPM_FAIL_<M>_i=rc    that metric's own nvmlReturn (M: SM OCC TENSOR DRAM
 *                                  NVLRX NVLTX); FAKE_NVML_FAIL_GPM_i=rc: nvmlGpmSampleGet
 *   FAKE_NVML_NVLINK_RX_i, _TX_i   NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_{RX,TX} summed over
 *                                  the links (scopeId UINT_MAX), KiB, one per call, the
 *                                  last repeating (defaults 1000 + i, 2000 + i);
 *                                  FAKE_NVML_FAIL_NVLINK_RX_i, _TX_i: the field's nvmlReturn
 *   FAKE_NVML_ENERGY_i             nvmlDeviceGetTotalEnergyConsumption, mJ, one per call,
 *                                  the last repeating (default 1e9 + 1e6 i);
 *                                  FAKE_NVML_FAIL_ENERGY_i: its rc
 *   FAKE_NVML_MIG_i=k              k MIG instances on device i, UUIDs
 *                                  FAKE_NVML_MIG_UUID_i_j, default
 *                                  MIG-f4ce000i-000j-4000-8000-000000000000
 *   per MIG instance j of device i (its MIG device handle answers memory and
 *   processes as its own; every other device query on it says NOT_SUPPORTED,
 *   as NVML does for the board-wide fields):
 *   FAKE_NVML_MIG_MEM_TOTAL_i_j    bytes (default 10 GiB (j + 1))
 *   FAKE_NVML_MIG_MEM_USED_i_j     bytes allocated (default 1 GiB + j GB)
 *   FAKE_NVML_MIG_MEM_RESERVED_i_j bytes reserved (default 0)
 *   FAKE_NVML_MIG_PROCS_i_j=pid:bytes,...  its process list (default none)
 *   FAKE_NVML_MIG_GI_i_j, _CI_i_j  nvmlDeviceGetGpuInstanceId / ComputeInstanceId
 *                                  (defaults j + 1 and 0)
 *   FAKE_NVML_MIG_GPM_i_j          the instance's own GPM rate of every percent metric
 *                                  (nvmlGpmMigSampleGet with its GPU instance id;
 *                                  default 20 + j)
 *   FAKE_NVML_MIG_FAIL_<CALL>_i_j=rc  CALL one of MEM MEMV2 PROCS on the MIG handle;
 *                                  fake_nvml_fail_mig(i, j, "CALL", rc) sets or
 *                                  clears one later (an in-process test)
 *
 * Built three times: the full library; with -DFAKE_NVML_MINIMAL, an old or
 * stripped NVML without nvmlDeviceGetMemoryInfo_v2, nvmlDeviceGetUtilizationRates,
 * nvmlDeviceGetEnforcedPowerLimit, nvmlSystemGetDriverVersion, nvmlDeviceGetUUID
 * the MIG calls and every health-field and event entry point but the old
 * nvmlDeviceGetCurrentClocksThrottleReasons; with -DFAKE_NVML_NEXT, a later
 * NVML that has dropped the entry points NVIDIA's nvml.h marks DEPRECATED(13.0)
 * among those the collector calls (nvmlDeviceGetTemperature,
 * nvmlDeviceGetCurrentClocksThrottleReasons).  fake_nvml_init_refs() lets an
 * in-process test check that every nvmlInit_v2 was matched by nvmlShutdown,
 * fake_nvml_event_set_live() that an event set was freed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

typedef int nvml_rc;
enum {
    OK = 0,
    E_UNINITIALIZED = 1,
    E_INVALID_ARGUMENT = 2,
    E_NOT_SUPPORTED = 3,
    E_NOT_FOUND = 6,
    E_INSUFFICIENT_SIZE = 7,
    E_GPU_IS_LOST = 15,
    E_ARGUMENT_VERSION_MISMATCH = 25,
    E_UNKNOWN = 999,
};

struct mem_v1 {
    unsigned long long total, free, used;
};
struct mem_v2 {
    unsigned int version;
    unsigned long long total, reserved, free, used;
};
struct util {
    unsigned int gpu, memory;
};
_Static_assert(sizeof(struct mem_v2) == 40, "nvmlMemory_v2_t is 40 bytes on LP64");

#define MAX_DEV 16
#define MAX_MIG 7

/* the calls before C_UUID count as the queries of FAKE_NVML_LOST_AFTER_i */
enum call {
    C_HANDLE, C_MEM, C_MEMV2, C_UTIL, C_POWER, C_LIMIT, C_UUID,
    C_TEMP, C_CLOCK, C_REASONS, C_FIELDS, C_ECC, C_REMAP, C_RETIRED, C_EVENTS, C_PROCS,
    C_TEMPV, C_GPM, C_ENERGY, C_N
};
static const char *const call_name[C_N] = {"HANDLE", "MEM",    "MEMV2",   "UTIL",  "POWER",
                                           "LIMIT",  "UUID",   "TEMP",    "CLOCK", "REASONS",
                                           "FIELDS", "ECC",    "REMAP",   "RETIRED", "EVENTS",
                                           "PROCS",  "TEMPV",  "GPM",     "ENERGY"};

/* A scripted sequence: one value per call; cycling or with its last repeating. */
#define SEQ_MAX 64
struct seq {
    unsigned long long v[SEQ_MAX];
    int n, at, cycle;
};

struct proclist {
    int n;
    struct { unsigned int pid; unsigned long long bytes; } v[16];
};

struct mig {
    int dev;
    char uuid[96];
    unsigned long long total, used, reserved;
    unsigned int gi, ci;
    double gpm_rate;
    int fail[C_N];
    struct proclist procs;
};

struct dev {
    char uuid[96];
    unsigned long long total, used, reserved;
    unsigned int util, power, limit;
    int fail[C_N];
    long fail_times; /* -1: for ever */
    long lost_after; /* -1: never */
    long queries;
    int nmig;
    struct mig mig[MAX_MIG];
    unsigned int temp, sm_clock, mem_clock;
    struct seq reasons, pcie[2], ecc[2], remap, retired;
    int field_fail[2];
    struct seq xid;      /* pending Xid codes; at: delivered so far */
    int gpm;             /* GPM supported */
    struct seq gpm_rate[6], nvlink[2], energy;
    int gpm_fail[6], nvlink_fail[2];
    double gpm_t, gpm_c[6]; /* the GPM clock (s) and counters (rate x s) */
    struct proclist procs;
};

static int refs;
static int init_fail, count_fail;
static unsigned int ndev;
static char driver[80];
static struct dev devs[MAX_DEV];

static const char *env_i(const char *name, int i, int j)
{
    char key[64];

    if (j >= 0)
        snprintf(key, sizeof key, "%s_%d_%d", name, i, j);
    else if (i >= 0)
        snprintf(key, sizeof key, "%s_%d", name, i);
    else
        snprintf(key, sizeof key, "%s", name);
    return getenv(key);
}

static unsigned long long num(const char *name, int i, unsigned long long def)
{
    const char *v = env_i(name, i, -1);
    return v && *v ? strtoull(v, NULL, 10) : def;
}

static unsigned long long num2(const char *name, int i, int j, unsigned long long def)
{
    const char *v = env_i(name, i, j);
    return v && *v ? strtoull(v, NULL, 10) : def;
}

/* pid:bytes,... */
static void procs_parse(struct proclist *l, const char *v)
{
    l->n = 0;
    while (v && *v && l->n < 16) {
        char *end;
        l->v[l->n].pid = (unsigned int)strtoul(v, &end, 10);
        l->v[l->n].bytes = *end == ':' ? strtoull(end + 1, &end, 10) : 0;
        l->n++;
        if (*end != ',')
            break;
        v = end + 1;
    }
}

static void seq_parse(struct seq *q, const char *v, unsigned long long dflt, int cycle)
{
    char *end;

    memset(q, 0, sizeof *q);
    q->cycle = cycle;
    while (v && *v && q->n < SEQ_MAX) {
        q->v[q->n++] = strtoull(v, &end, 0);
        if (*end != ',')
            break;
        v = end + 1;
    }
    if (q->n == 0 && dflt != ~0ull)
        q->v[q->n++] = dflt;
}

static unsigned long long seq_next(struct seq *q)
{
    unsigned long long v;

    if (q->n == 0)
        return 0;
    v = q->v[q->at < q->n ? q->at : q->n - 1];
    q->at++;
    if (q->cycle && q->at >= q->n)
        q->at = 0;
    return v;
}

static void configure(void)
{
    const char *v;

    init_fail = (int)num("FAKE_NVML_INIT_FAIL", -1, 0);
    count_fail = (int)num("FAKE_NVML_COUNT_FAIL", -1, 0);
    ndev = (unsigned int)num("FAKE_NVML_DEVICES", -1, 1);
    if (ndev > MAX_DEV)
        ndev = MAX_DEV;
    v = getenv("FAKE_NVML_DRIVER");
    snprintf(driver, sizeof driver, "%s", v ? v : "550.54.15");
    for (int i = 0; i < MAX_DEV; i++) {
        struct dev *d = &devs[i];
        memset(d, 0, sizeof *d);
        v = env_i("FAKE_NVML_UUID", i, -1);
        if (v)
            snprintf(d->uuid, sizeof d->uuid, "%s", v);
        else
            snprintf(d->uuid, sizeof d->uuid, "GPU-f4ce%04d-0000-4000-8000-%012d", i, i);
        d->total = num("FAKE_NVML_MEM_TOTAL", i, 85899345920ull);
        d->used = num("FAKE_NVML_MEM_USED", i, 21474836480ull + 1000000000ull * (unsigned)i);
        d->reserved = num("FAKE_NVML_MEM_RESERVED", i, 536870912ull);
        d->util = (unsigned int)num("FAKE_NVML_UTIL", i, 40u + (unsigned)i);
        d->power = (unsigned int)num("FAKE_NVML_POWER", i, 150000u + 1000u * (unsigned)i);
        d->limit = (unsigned int)num("FAKE_NVML_LIMIT", i, 300000u);
        for (int c = 0; c < C_N; c++) {
            char name[40];
            snprintf(name, sizeof name, "FAKE_NVML_FAIL_%s", call_name[c]);
            d->fail[c] = (int)num(name, i, 0);
        }
        v = env_i("FAKE_NVML_FAIL_TIMES", i, -1);
        d->fail_times = v && *v ? strtol(v, NULL, 10) : -1;
        v = env_i("FAKE_NVML_LOST_AFTER", i, -1);
        d->lost_after = v && *v ? strtol(v, NULL, 10) : -1;
        d->temp = (unsigned int)num("FAKE_NVML_TEMP", i, 60u + (unsigned)i);
        d->sm_clock = (unsigned int)num("FAKE_NVML_SM_CLOCK", i, 1980u - (unsigned)i);
        d->mem_clock = (unsigned int)num("FAKE_NVML_MEM_CLOCK", i, 2619u);
        seq_parse(&d->reasons, env_i("FAKE_NVML_REASONS", i, -1), 0, 1);
        seq_parse(&d->pcie[0], env_i("FAKE_NVML_PCIE_RX", i, -1), 1000000000ull + (unsigned)i, 0);
        seq_parse(&d->pcie[1], env_i("FAKE_NVML_PCIE_TX", i, -1), 2000000000ull + (unsigned)i, 0);
        seq_parse(&d->ecc[0], env_i("FAKE_NVML_ECC_CORR", i, -1), 0, 0);
        seq_parse(&d->ecc[1], env_i("FAKE_NVML_ECC_UNCORR", i, -1), 0, 0);
        seq_parse(&d->remap, env_i("FAKE_NVML_REMAP", i, -1), ~0ull, 0);
        seq_parse(&d->retired, env_i("FAKE_NVML_RETIRED", i, -1), ~0ull, 0);
        seq_parse(&d->xid, env_i("FAKE_NVML_XID", i, -1), ~0ull, 0);
        d->field_fail[0] = (int)num("FAKE_NVML_FAIL_PCIE_RX", i, 0);
        d->field_fail[1] = (int)num("FAKE_NVML_FAIL_PCIE_TX", i, 0);
        procs_parse(&d->procs, env_i("FAKE_NVML_PROCS", i, -1));
        d->gpm = (int)num("FAKE_NVML_GPM", i, 1);
        for (int k = 0; k < 6; k++) {
            static const char *const nm[6] = {"SM", "OCC", "TENSOR", "DRAM", "NVLRX", "NVLTX"};
            static const unsigned dflt[6] = {50, 30, 20, 10, 100, 200};
            char name[48];
            snprintf(name, sizeof name, "FAKE_NVML_GPM_%s", nm[k]);
            seq_parse(&d->gpm_rate[k], env_i(name, i, -1), dflt[k] + (unsigned)i, 0);
            snprintf(name, sizeof name, "FAKE_NVML_GPM_FAIL_%s", nm[k]);
            d->gpm_fail[k] = (int)num(name, i, 0);
        }
        seq_parse(&d->nvlink[0], env_i("FAKE_NVML_NVLINK_RX", i, -1), 1000ull + (unsigned)i, 0);
        seq_parse(&d->nvlink[1], env_i("FAKE_NVML_NVLINK_TX", i, -1), 2000ull + (unsigned)i, 0);
        d->nvlink_fail[0] = (int)num("FAKE_NVML_FAIL_NVLINK_RX", i, 0);
        d->nvlink_fail[1] = (int)num("FAKE_NVML_FAIL_NVLINK_TX", i, 0);
        seq_parse(&d->energy, env_i("FAKE_NVML_ENERGY", i, -1),
                  1000000000ull + 1000000ull * (unsigned)i, 0);
        d->nmig = (int)num("FAKE_NVML_MIG", i, 0);
        if (d->nmig > MAX_MIG)
            d->nmig = MAX_MIG;
        for (int j = 0; j < d->nmig; j++) {
            struct mig *m = &d->mig[j];
            m->dev = i;
            v = env_i("FAKE_NVML_MIG_UUID", i, j);
            if (v)
                snprintf(m->uuid, sizeof m->uuid, "%s", v);
            else
                snprintf(m->uuid, sizeof m->uuid, "MIG-f4ce%04d-%04d-4000-8000-000000000000",
                         i, j);
            m->total = num2("FAKE_NVML_MIG_MEM_TOTAL", i, j, 10737418240ull * (unsigned)(j + 1));
            m->used = num2("FAKE_NVML_MIG_MEM_USED", i, j,
                           1073741824ull + 1000000000ull * (unsigned)j);
            m->reserved = num2("FAKE_NVML_MIG_MEM_RESERVED", i, j, 0);
            m->gi = (unsigned int)num2("FAKE_NVML_MIG_GI", i, j, (unsigned)j + 1);
            m->ci = (unsigned int)num2("FAKE_NVML_MIG_CI", i, j, 0);
            m->gpm_rate = (double)num2("FAKE_NVML_MIG_GPM", i, j, 20u + (unsigned)j);
            for (int c = 0; c < C_N; c++) {
                char name[48];
                snprintf(name, sizeof name, "FAKE_NVML_MIG_FAIL_%s", call_name[c]);
                m->fail[c] = (int)num2(name, i, j, 0);
            }
            procs_parse(&m->procs, env_i("FAKE_NVML_MIG_PROCS", i, j));
        }
    }
}

/* The handle is the address of the device's record. */
static struct dev *dev_of(void *h)
{
    for (unsigned int i = 0; i < ndev; i++)
        if (h == &devs[i])
            return &devs[i];
    return NULL;
}

static int is_lost(const struct dev *d)
{
    return d->lost_after >= 0 && d->queries >= d->lost_after;
}

/* The calls after C_UUID do not count: the sample that made the n-th
 * counted query still gets its health fields, the next finds the GPU lost. */
static int is_lost_for(const struct dev *d, enum call c)
{
    return c < C_UUID || d->lost_after == 0 ? is_lost(d)
                                            : d->lost_after >= 0 && d->queries > d->lost_after;
}

static struct mig *mig_of(void *h)
{
    for (unsigned int i = 0; i < ndev; i++)
        for (int j = 0; j < devs[i].nmig; j++)
            if (h == &devs[i].mig[j])
                return &devs[i].mig[j];
    return NULL;
}

/* The prologue of a query a MIG device handle answers (memory, processes):
 * 1 with *rc set when h is a MIG handle, 0 when it is not. */
static int mig_query(void *h, enum call c, struct mig **out, nvml_rc *rc)
{
    struct mig *m;

    if (refs <= 0)
        return *rc = E_UNINITIALIZED, 1;
    m = mig_of(h);
    if (!m)
        return 0;
    *out = m;
    *rc = is_lost(&devs[m->dev]) ? E_GPU_IS_LOST : m->fail[c] ? m->fail[c] : OK;
    return 1;
}

/* Common prologue of a device query: state, handle, scripted failure. */
static nvml_rc query(void *h, enum call c, struct dev **out)
{
    struct dev *d;

    if (refs <= 0)
        return E_UNINITIALIZED;
    d = dev_of(h);
    if (!d)
        /* a board-wide query on a MIG device handle: NVML has no per-instance value */
        return mig_of(h) ? E_NOT_SUPPORTED : E_INVALID_ARGUMENT;
    if (is_lost_for(d, c))
        return E_GPU_IS_LOST;
    if (d->fail[c] && d->fail_times != 0) {
        if (d->fail_times > 0)
            d->fail_times--;
        return d->fail[c];
    }
    if (c < C_UUID)
        __atomic_fetch_add(&d->queries, 1, __ATOMIC_RELAXED);
    *out = d;
    return OK;
}

API const char *nvmlErrorString(nvml_rc rc)
{
    switch (rc) {
    case 0: return "fake NVML: Success";
    case 1: return "fake NVML: Uninitialized";
    case 2: return "fake NVML: Invalid Argument";
    case 3: return "fake NVML: Not Supported";
    case 4: return "fake NVML: Insufficient Permissions";
    case 6: return "fake NVML: Not Found";
    case 7: return "fake NVML: Insufficient Size";
    case 9: return "fake NVML: Driver Not Loaded";
    case 10: return "fake NVML: Timeout";
    case 15: return "fake NVML: GPU is lost";
    case 18: return "fake NVML: RM has detected an NVML/RM version mismatch.";
    case 25: return "fake NVML: Argument version mismatch";
    default: return "fake NVML: Unknown Error";
    }
}

API nvml_rc nvmlInit_v2(void)
{
    if (refs == 0)
        configure();
    if (init_fail)
        return init_fail;
    refs++;
    return OK;
}

API nvml_rc nvmlShutdown(void)
{
    if (refs <= 0)
        return E_UNINITIALIZED;
    refs--;
    return OK;
}

API int fake_nvml_init_refs(void)
{
    return refs;
}

API nvml_rc nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (refs <= 0)
        return E_UNINITIALIZED;
    if (!count)
        return E_INVALID_ARGUMENT;
    if (count_fail)
        return count_fail;
    *count = ndev;
    return OK;
}

API nvml_rc nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **handle)
{
    if (refs <= 0)
        return E_UNINITIALIZED;
    if (!handle || index >= ndev)
        return E_INVALID_ARGUMENT;
    if (devs[index].fail[C_HANDLE])
        return devs[index].fail[C_HANDLE];
    *handle = &devs[index];
    return OK;
}

API nvml_rc nvmlDeviceGetMemoryInfo(void *h, struct mem_v1 *m)
{
    struct dev *d = NULL;
    struct mig *g = NULL;
    nvml_rc rc;

    if (m && mig_query(h, C_MEM, &g, &rc)) {
        if (rc != OK)
            return rc;
        m->total = g->total; /* the instance's own memory */
        m->used = g->used + g->reserved;
        m->free = g->total - m->used;
        return OK;
    }
    rc = m ? query(h, C_MEM, &d) : E_INVALID_ARGUMENT;
    if (rc != OK)
        return rc;
    m->total = d->total;
    m->used = d->used + d->reserved; /* v1 counts the reserve as used */
    m->free = d->total - m->used;
    return OK;
}

API nvml_rc nvmlDeviceGetPowerUsage(void *h, unsigned int *mw)
{
    struct dev *d = NULL;
    nvml_rc rc = mw ? query(h, C_POWER, &d) : E_INVALID_ARGUMENT;

    if (rc != OK)
        return rc;
    *mw = d->power;
    return OK;
}

/* ---- the health fields ---------------------------------------------------- */

static nvml_rc clock_reasons(void *h, unsigned long long *r)
{
    struct dev *d = NULL;
    nvml_rc rc = r ? query(h, C_REASONS, &d) : E_INVALID_ARGUMENT;

    if (rc != OK)
        return rc;
    *r = seq_next(&d->reasons);
    return OK;
}

/* nvmlDeviceGetCurrentClocksThrottleReasons: the drivers before R535 export
 * only this name, so the minimal library (an old driver) has it too; NVML 13
 * deprecates it, so the next one does not. */
#ifndef FAKE_NVML_NEXT
API nvml_rc nvmlDeviceGetCurrentClocksThrottleReasons(void *h, unsigned long long *r)
{
    return clock_reasons(h, r);
}
#endif

#ifndef FAKE_NVML_MINIMAL
API nvml_rc nvmlDeviceGetCurrentClocksEventReasons(void *h, unsigned long long *r)
{
    return clock_reasons(h, r);
}

/* NVML_TEMPERATURE_GPU (0) is the only sensor there is */
#ifndef FAKE_NVML_NEXT
API nvml_rc nvmlDeviceGetTemperature(void *h, int sensor, unsigned int *t)
{
    struct dev *d = NULL;
    nvml_rc rc;

    if (!t || sensor != 0)
        return E_INVALID_ARGUMENT;
    rc = query(h, C_TEMP, &d);
    if (rc != OK)
        return rc;
    *t = d->temp;
    return OK;
}
#endif

/* nvmlTemperature_v1_t as NVIDIA's header lays it out */
struct temperature {
    unsigned int version;
    int sensor;
    int degrees;
};
_Static_assert(sizeof(struct temperature) == 12, "nvmlTemperature_v1_t is 12 bytes");

API nvml_rc nvmlDeviceGetTemperatureV(void *h, struct temperature *t)
{
    struct dev *d = NULL;
    nvml_rc rc;

    if (!t || t->sensor != 0)
        return E_INVALID_ARGUMENT;
    /* NVML_STRUCT_VERSION(Temperature, 1): size in the low bits, 1 in the top byte */
    if (t->version != (unsigned int)(sizeof(struct temperature) | (1u << 24)))
        return E_ARGUMENT_VERSION_MISMATCH;
    rc = query(h, C_TEMPV, &d); /* its own scripted failure, then the sensor's */
    if (rc == OK)
        rc = query(h, C_TEMP, &d);
    if (rc != OK)
        return rc;
    t->degrees = (int)d->temp;
    return OK;
}

API nvml_rc nvmlDeviceGetClockInfo(void *h, int type, unsigned int *mhz)
{
    struct dev *d = NULL;
    nvml_rc rc;

    /* NVML_CLOCK_GRAPHICS 0, SM 1, MEM 2, VIDEO 3 */
    if (!mhz || type < 0 || type > 3)
        return E_INVALID_ARGUMENT;
    rc = query(h, C_CLOCK, &d);
    if (rc != OK)
        return rc;
    *mhz = type == 2 ? d->mem_clock : d->sm_clock;
    return OK;
}

/* nvmlFieldValue_t as NVIDIA's header lays it out (LP64) */
union fvalue {
    double d;
    int si;
    unsigned int ui;
    unsigned long ul;
    unsigned long long ull;
    signed long long sll;
    unsigned short us;
};
struct field {
    unsigned int id, scope;
    long long timestamp, latency;
    int type;
    nvml_rc ret;
    union fvalue value;
};
_Static_assert(sizeof(struct field) == 40, "nvmlFieldValue_t is 40 bytes on LP64");

API nvml_rc nvmlDeviceGetFieldValues(void *h, int count, struct field *f)
{
    struct dev *d = NULL;
    nvml_rc rc;

    if (!f || count <= 0)
        return E_INVALID_ARGUMENT;
    rc = query(h, C_FIELDS, &d);
    if (rc != OK)
        return rc;
    for (int i = 0; i < count; i++) {
        /* NVML_FI_DEV_PCIE_COUNT_TX_BYTES 197, _RX_BYTES 198 */
        int k = f[i].id == 198 ? 0 : f[i].id == 197 ? 1 : -1;
        f[i].timestamp = 0;
        f[i].latency = 0;
        /* NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX 138, _RX 139: the sum over
         * the links for scopeId UINT_MAX, one link's otherwise (not faked) */
        if (f[i].id == 138 || f[i].id == 139) {
            int x = f[i].id == 138;
            f[i].ret = f[i].scope != 0xFFFFFFFFu ? E_NOT_SUPPORTED : d->nvlink_fail[x];
            if (f[i].ret)
                continue;
            f[i].type = 3;
            f[i].value.ull = seq_next(&d->nvlink[x]);
            continue;
        }
        if (k < 0) {
            f[i].ret = E_NOT_SUPPORTED;
            continue;
        }
        f[i].ret = d->field_fail[k];
        if (f[i].ret)
            continue;
        f[i].type = 3; /* NVML_VALUE_TYPE_UNSIGNED_LONG_LONG */
        f[i].value.ull = seq_next(&d->pcie[k]);
    }
    return OK;
}

API nvml_rc nvmlDeviceGetTotalEnergyConsumption(void *h, unsigned long long *mj)
{
    struct dev *d = NULL;
    nvml_rc rc = mj ? query(h, C_ENERGY, &d) : E_INVALID_ARGUMENT;

    if (rc != OK)
        return rc;
    *mj = seq_next(&d->energy);
    return OK;
}

/* ---- GPM: a sample is the device's GPM clock and counters at the call ---- */
#define GPM_MAGIC 0x67706d31u
struct gpm_sample {
    unsigned int magic;
    int dev, mig;  /* mig -1: the whole GPU */
    double t, c[6];
};
struct gpm_metric { /* nvmlGpmMetric_t as NVIDIA's header lays it out */
    unsigned int id;
    nvml_rc ret;
    double value;
    struct { char *shortName, *longName, *unit; } info;
};
_Static_assert(sizeof(struct gpm_metric) == 40, "nvmlGpmMetric_t is 40 bytes on LP64");
struct gpm_get {
    unsigned int version, num;
    struct gpm_sample *s1, *s2;
    struct gpm_metric m[477]; /* NVML_GPM_METRIC_MAX of nvml.h 13.5.37 */
};
struct gpm_support {
    unsigned int version, supported;
};

API nvml_rc nvmlGpmSampleAlloc(struct gpm_sample **s)
{
    if (!s)
        return E_INVALID_ARGUMENT;
    *s = calloc(1, sizeof **s);
    if (!*s)
        return E_UNKNOWN;
    (*s)->magic = GPM_MAGIC;
    return OK;
}

API nvml_rc nvmlGpmSampleFree(struct gpm_sample *s)
{
    if (!s || s->magic != GPM_MAGIC)
        return E_INVALID_ARGUMENT;
    s->magic = 0;
    free(s);
    return OK;
}

API nvml_rc nvmlGpmQueryDeviceSupport(void *h, struct gpm_support *g)
{
    struct mig *m;
    struct dev *d;

    if (refs <= 0)
        return E_UNINITIALIZED;
    if (!g || g->version != 1)
        return !g ? E_INVALID_ARGUMENT : E_ARGUMENT_VERSION_MISMATCH;
    m = mig_of(h);
    d = m ? &devs[m->dev] : dev_of(h);
    if (!d)
        return E_INVALID_ARGUMENT;
    g->supported = (unsigned int)d->gpm;
    return OK;
}

/* one interval of 1 s at the next scripted rates */
static void gpm_advance(struct dev *d, struct mig *m, struct gpm_sample *s)
{
    d->gpm_t += 1.0;
    for (int k = 0; k < 6; k++)
        d->gpm_c[k] += (double)seq_next(&d->gpm_rate[k]);
    s->t = d->gpm_t;
    for (int k = 0; k < 6; k++)
        s->c[k] = m && k < 4 ? m->gpm_rate * d->gpm_t : d->gpm_c[k];
}

/* nvmlGpmSampleGet (gi < 0) and nvmlGpmMigSampleGet (the instance gi's own) */
static nvml_rc gpm_sample(void *h, long gi, struct gpm_sample *s)
{
    struct dev *d = NULL;
    nvml_rc rc;

    if (!s || s->magic != GPM_MAGIC)
        return E_INVALID_ARGUMENT;
    rc = query(h, C_GPM, &d);
    if (rc != OK)
        return rc;
    if (!d->gpm)
        return E_NOT_SUPPORTED;
    s->dev = (int)(d - devs);
    s->mig = -1;
    for (int j = 0; j < d->nmig && gi >= 0; j++)
        if (d->mig[j].gi == (unsigned long)gi)
            s->mig = j;
    if (gi >= 0 && s->mig < 0)
        return E_NOT_FOUND;
    gpm_advance(d, s->mig >= 0 ? &d->mig[s->mig] : NULL, s);
    return OK;
}

API nvml_rc nvmlGpmSampleGet(void *h, struct gpm_sample *s)
{
    return gpm_sample(h, -1, s);
}

API nvml_rc nvmlGpmMigSampleGet(void *h, unsigned int gi, struct gpm_sample *s)
{
    return gpm_sample(h, (long)gi, s);
}

API nvml_rc nvmlGpmMetricsGet(struct gpm_get *g)
{
    if (refs <= 0)
        return E_UNINITIALIZED;
    if (!g)
        return E_INVALID_ARGUMENT;
    if (g->version != 1)
        return E_ARGUMENT_VERSION_MISMATCH;
    if (!g->s1 || !g->s2 || g->s1->magic != GPM_MAGIC || g->s2->magic != GPM_MAGIC ||
        g->num > 477 || g->s1->dev != g->s2->dev || g->s1->mig != g->s2->mig ||
        !(g->s2->t > g->s1->t))
        return E_INVALID_ARGUMENT;
    for (unsigned int i = 0; i < g->num; i++) {
        /* NVML_GPM_METRIC_SM_UTIL 2, _SM_OCCUPANCY 3, _ANY_TENSOR_UTIL 5,
         * _DRAM_BW_UTIL 10, _NVLINK_TOTAL_RX_PER_SEC 60, _TX_PER_SEC 61 */
        static const unsigned int ids[6] = {2, 3, 5, 10, 60, 61};
        struct gpm_metric *m = &g->m[i];
        int k = -1;
        for (int j = 0; j < 6; j++)
            if (m->id == ids[j])
                k = j;
        m->info.shortName = m->info.longName = m->info.unit = NULL;
        if (k < 0 || (g->s1->mig >= 0 && k >= 4)) { /* no NVLink per instance */
            m->ret = E_NOT_SUPPORTED;
            continue;
        }
        m->ret = devs[g->s1->dev].gpm_fail[k];
        m->value = m->ret ? 0 : (g->s2->c[k] - g->s1->c[k]) / (g->s2->t - g->s1->t);
    }
    return OK;
}

API nvml_rc nvmlDeviceGetTotalEccErrors(void *h, int type, int counter, unsigned long long *n)
{
    struct dev *d = NULL;
    nvml_rc rc;

    if (!n || type < 0 || type > 1 || counter < 0 || counter > 1)
        return E_INVALID_ARGUMENT;
    rc = query(h, C_ECC, &d);
    if (rc != OK)
        return rc;
    *n = counter == 0 ? seq_next(&d->ecc[type]) : 0; /* VOLATILE; the aggregate is not faked */
    return OK;
}

API nvml_rc nvmlDeviceGetRemappedRows(void *h, unsigned int *corr, unsigned int *unc,
                                      unsigned int *pending, unsigned int *failure)
{
    struct dev *d = NULL;
    nvml_rc rc;

    if (!corr || !unc || !pending || !failure)
        return E_INVALID_ARGUMENT;
    rc = query(h, C_REMAP, &d);
    if (rc != OK)
        return rc;
    *corr = (unsigned int)d->remap.v[0];
    *unc = (unsigned int)d->remap.v[1];
    *pending = (unsigned int)d->remap.v[2];
    *failure = (unsigned int)d->remap.v[3];
    return OK;
}

API nvml_rc nvmlDeviceGetRetiredPages(void *h, int cause, unsigned int *count,
                                      unsigned long long *addresses)
{
    struct dev *d = NULL;
    unsigned int have;
    nvml_rc rc;

    if (!count || cause < 0 || cause > 1 || (*count && !addresses))
        return E_INVALID_ARGUMENT;
    rc = query(h, C_RETIRED, &d);
    if (rc != OK)
        return rc;
    have = (unsigned int)d->retired.v[cause];
    for (unsigned int j = 0; j < have && j < *count; j++)
        addresses[j] = 0x1000ull * (j + 1);
    rc = *count < have ? E_INSUFFICIENT_SIZE : OK;
    *count = have;
    return rc;
}

/* nvmlProcessInfo_v2_t (the nvmlProcessInfo_t of _v3) as NVIDIA's header lays it out */
struct procinfo {
    unsigned int pid;
    unsigned long long used;
    unsigned int gi, ci;
};
_Static_assert(sizeof(struct procinfo) == 24, "nvmlProcessInfo_v2_t is 24 bytes on LP64");

API nvml_rc nvmlDeviceGetComputeRunningProcesses_v3(void *h, unsigned int *count,
                                                     struct procinfo *infos)
{
    struct dev *d = NULL;
    struct mig *g = NULL;
    const struct proclist *l;
    unsigned int gi = 0xFFFFFFFFu, ci = 0xFFFFFFFFu;
    nvml_rc rc;

    if (!count || (*count && !infos))
        return E_INVALID_ARGUMENT;
    if (mig_query(h, C_PROCS, &g, &rc)) {
        if (rc != OK)
            return rc;
        l = &g->procs; /* the instance's processes only */
        gi = g->gi;
        ci = g->ci;
    } else {
        rc = query(h, C_PROCS, &d);
        if (rc != OK)
            return rc;
        l = &d->procs;
    }
    if (*count < (unsigned int)l->n) {
        *count = (unsigned int)l->n;
        return E_INSUFFICIENT_SIZE;
    }
    for (int j = 0; j < l->n; j++) {
        infos[j].pid = l->v[j].pid;
        infos[j].used = l->v[j].bytes;
        infos[j].gi = gi;
        infos[j].ci = ci;
    }
    *count = (unsigned int)l->n;
    return OK;
}

/* nvmlEventData_t as NVIDIA's header lays it out */
struct event {
    void *device;
    unsigned long long type, data;
    unsigned int gi, ci;
};
_Static_assert(sizeof(struct event) == 32, "nvmlEventData_t is 32 bytes on LP64");

/* One event set at a time is enough for the collector; its address is the handle. */
static struct {
    int live;
    int undefined;           /* a registration answered UNKNOWN */
    unsigned int registered; /* bit per device */
} evset;

API nvml_rc nvmlEventSetCreate(void **set)
{
    if (refs <= 0)
        return E_UNINITIALIZED;
    if (!set)
        return E_INVALID_ARGUMENT;
    evset.live = 1;
    evset.undefined = 0;
    evset.registered = 0;
    *set = &evset;
    return OK;
}

API nvml_rc nvmlDeviceRegisterEvents(void *h, unsigned long long types, void *set)
{
    struct dev *d = NULL;
    nvml_rc rc;

    if (set != &evset || !evset.live || !(types & 0x8)) /* nvmlEventTypeXidCriticalError */
        return E_INVALID_ARGUMENT;
    rc = query(h, C_EVENTS, &d);
    if (rc == E_UNKNOWN)
        evset.undefined = 1; /* nvml.h: "event set is in undefined state and should be freed" */
    if (rc != OK)
        return rc;
    evset.registered |= 1u << (d - devs);
    return OK;
}

/* 1 while an event set is created and not freed */
API int fake_nvml_event_set_live(void)
{
    return evset.live;
}

/* CALL's failure on device i from the next call on, as FAKE_NVML_FAIL_<CALL>_i
 * (rc 0: the call answers again); FAKE_NVML_FAIL_TIMES_i still bounds it. */
API void fake_nvml_fail(int i, const char *call, int rc)
{
    if (i < 0 || i >= MAX_DEV || !call)
        return;
    for (int c = 0; c < C_N; c++)
        if (strcmp(call, call_name[c]) == 0)
            devs[i].fail[c] = rc;
}

API void fake_nvml_raise_xid(int i, unsigned int code)
{
    struct seq *q;

    if (i < 0 || i >= MAX_DEV)
        return;
    q = &devs[i].xid;
    if (q->n < SEQ_MAX)
        q->v[q->n++] = code;
}

API nvml_rc nvmlEventSetWait_v2(void *set, struct event *ev, unsigned int timeout_ms)
{
    (void)timeout_ms; /* the fake never waits: what is pending is delivered, else TIMEOUT */
    if (refs <= 0)
        return E_UNINITIALIZED;
    if (set != &evset || !evset.live || !ev)
        return E_INVALID_ARGUMENT;
    if (evset.undefined)
        return E_UNKNOWN;
    for (unsigned int i = 0; i < ndev; i++) {
        struct seq *q = &devs[i].xid;
        if (!(evset.registered & (1u << i)) || q->at >= q->n)
            continue;
        memset(ev, 0, sizeof *ev);
        ev->device = &devs[i];
        ev->type = 0x8;
        ev->data = q->v[q->at++];
        ev->gi = ev->ci = 0xFFFFFFFFu;
        return OK;
    }
    return 10; /* NVML_ERROR_TIMEOUT */
}

API nvml_rc nvmlEventSetFree(void *set)
{
    if (set != &evset || !evset.live)
        return E_INVALID_ARGUMENT;
    evset.live = 0;
    return OK;
}

API nvml_rc nvmlDeviceGetMemoryInfo_v2(void *h, struct mem_v2 *m)
{
    struct dev *d = NULL;
    struct mig *g = NULL;
    nvml_rc rc;

    if (!m)
        return E_INVALID_ARGUMENT;
    /* NVML_STRUCT_VERSION(Memory, 2): size in the low bits, 2 in the top byte */
    if (m->version != (unsigned int)(sizeof(struct mem_v2) | (2u << 24)))
        return E_ARGUMENT_VERSION_MISMATCH;
    if (mig_query(h, C_MEMV2, &g, &rc)) {
        if (rc != OK)
            return rc;
        m->total = g->total; /* the instance's own memory */
        m->reserved = g->reserved;
        m->used = g->used;
        m->free = g->total - g->used - g->reserved;
        return OK;
    }
    rc = query(h, C_MEMV2, &d);
    if (rc != OK)
        return rc;
    m->total = d->total;
    m->reserved = d->reserved;
    m->used = d->used;
    m->free = d->total - d->used - d->reserved;
    return OK;
}

API nvml_rc nvmlDeviceGetUtilizationRates(void *h, struct util *u)
{
    struct dev *d = NULL;
    nvml_rc rc = u ? query(h, C_UTIL, &d) : E_INVALID_ARGUMENT;

    if (rc != OK)
        return rc;
    u->gpu = d->util;
    u->memory = d->util / 2;
    return OK;
}

API nvml_rc nvmlDeviceGetEnforcedPowerLimit(void *h, unsigned int *mw)
{
    struct dev *d = NULL;
    nvml_rc rc = mw ? query(h, C_LIMIT, &d) : E_INVALID_ARGUMENT;

    if (rc != OK)
        return rc;
    *mw = d->limit;
    return OK;
}

API nvml_rc nvmlSystemGetDriverVersion(char *buf, unsigned int len)
{
    if (refs <= 0)
        return E_UNINITIALIZED;
    if (!buf)
        return E_INVALID_ARGUMENT;
    if (len < strlen(driver) + 1)
        return E_INSUFFICIENT_SIZE;
    memcpy(buf, driver, strlen(driver) + 1);
    return OK;
}

static nvml_rc copy_uuid(const char *uuid, char *buf, unsigned int len)
{
    if (!buf)
        return E_INVALID_ARGUMENT;
    if (len < strlen(uuid) + 1)
        return E_INSUFFICIENT_SIZE;
    memcpy(buf, uuid, strlen(uuid) + 1);
    return OK;
}

API nvml_rc nvmlDeviceGetUUID(void *h, char *buf, unsigned int len)
{
    struct dev *d = NULL;
    struct mig *m;
    nvml_rc rc;

    if (refs <= 0)
        return E_UNINITIALIZED;
    m = mig_of(h);
    if (m)
        return is_lost(&devs[m->dev]) ? E_GPU_IS_LOST : copy_uuid(m->uuid, buf, len);
    rc = query(h, C_UUID, &d);
    return rc != OK ? rc : copy_uuid(d->uuid, buf, len);
}

API nvml_rc nvmlDeviceGetMaxMigDeviceCount(void *h, unsigned int *count)
{
    struct dev *d;

    if (refs <= 0)
        return E_UNINITIALIZED;
    d = dev_of(h);
    if (!d || !count)
        return E_INVALID_ARGUMENT;
    if (d->nmig == 0)
        return E_NOT_SUPPORTED; /* MIG mode off */
    *count = MAX_MIG;
    return OK;
}

/* a MIG device handle's ids; NOT_SUPPORTED on a GPU handle, as NVML's */
static nvml_rc instance_id(void *h, unsigned int *id, int ci)
{
    struct mig *m;

    if (refs <= 0)
        return E_UNINITIALIZED;
    if (!id)
        return E_INVALID_ARGUMENT;
    m = mig_of(h);
    if (!m)
        return dev_of(h) ? E_NOT_SUPPORTED : E_INVALID_ARGUMENT;
    *id = ci ? m->ci : m->gi;
    return OK;
}

API nvml_rc nvmlDeviceGetGpuInstanceId(void *h, unsigned int *id)
{
    return instance_id(h, id, 0);
}

API nvml_rc nvmlDeviceGetComputeInstanceId(void *h, unsigned int *id)
{
    return instance_id(h, id, 1);
}

/* CALL's failure on MIG instance j of device i (rc 0: answers again) */
API void fake_nvml_fail_mig(int i, int j, const char *call, int rc)
{
    if (i < 0 || i >= MAX_DEV || j < 0 || j >= MAX_MIG || !call)
        return;
    for (int c = 0; c < C_N; c++)
        if (strcmp(call, call_name[c]) == 0)
            devs[i].mig[j].fail[c] = rc;
}

API nvml_rc nvmlDeviceGetMigDeviceHandleByIndex(void *h, unsigned int index, void **mig)
{
    struct dev *d;

    if (refs <= 0)
        return E_UNINITIALIZED;
    d = dev_of(h);
    if (!d || !mig || index >= MAX_MIG)
        return E_INVALID_ARGUMENT;
    if (index >= (unsigned int)d->nmig)
        return E_NOT_FOUND; /* an empty slot */
    *mig = &d->mig[index];
    return OK;
}
#endif /* FAKE_NVML_MINIMAL */
