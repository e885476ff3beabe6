/*
 * gpu_query.c — one device's queries of a sample (docs/gpu.md "Series"):
 * MLflow's five, the ten health fields (temperature, clocks, clock-event
 * reasons, PCIe and ECC counters) and the process list behind the per-rank
 * series, each emitted as a point; at open the same queries, once, decide
 * which variant of a call a device gets (memory v2 or v1, temperature V or
 * the old call) and which metrics it drops.  It must never wait inside the
 * driver: every call returns at once.  No allocation or formatting per
 * sample.
 *
 * Failure policy (docs/design.md §6): NOT_SUPPORTED / NO_PERMISSION drops
 * that one metric of that device (at open grouped over the devices in the
 * open line, later one line); GPU_IS_LOST drops the device with one line;
 * any other error skips the value of that sample (one line per streak).
 */
#include <stdio.h>
#include <string.h>

#include "gpu_int.h"

/* What each query feeds (the metrics it drops with it) and its label in
 * the lines (gpu_<i>_<label> dropped). */
static const unsigned int q_mask[Q_COUNT] = {
    MEM_BITS,        BIT(M_UTIL),      POWER_BITS,       BIT(M_POWER_PCT),
    BIT(M_TEMP),     BIT(M_SM_CLOCK),  BIT(M_MEM_CLOCK), THR_BITS,
    BIT(M_PCIE_RX),  BIT(M_PCIE_TX),   ECC_BITS,         BIT(M_PROC_MEM),
    GPM_BITS,        BIT(M_NVLINK_RX), BIT(M_NVLINK_TX)};
static const char *const q_label[Q_COUNT] = {
    "memory_usage_*",         "utilization_percentage",    "power_usage_*",
    "power_usage_percentage", "temperature_celsius",       "sm_clock_megahertz",
    "memory_clock_megahertz", "throttled_*",               "pcie_receive_megabytes",
    "pcie_transmit_megabytes", "ecc_errors_*",              "process_memory_megabytes",
    "{sm_active,sm_occupancy,tensor_active,dram_bandwidth}_percentage",
    "nvlink_receive_megabytes", "nvlink_transmit_megabytes"};

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

/* Each metric's unit (docs/series.md). */
static const char *const unit[M_COUNT] = {"percent", "MB",      "percent", "W",       "percent",
                                          "celsius", "MHz",     "MHz",     "percent", "percent",
                                          "percent", "MB",      "MB",      "errors",  "errors",
                                          "MB",      "percent", "percent", "percent", "percent",
                                          "MB",      "MB"};

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
    switch (sm__gpu_verdict(rc)) {
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
                       call, sm__gpu_nvml_text(g, rc));
            }
        }
        return 0;
    case V_LOST:
        if (!d->lost) {
            d->lost = 1;
            if (at_open)
                sm__line_join(msg, msglen, "GPU %u lost (%s: %s): gpu_%u_* dropped", d->index, call,
                    sm__gpu_nvml_text(g, rc), d->index);
            else
                sm__log(SM_WARN, "gpu: GPU %u lost (%s: %s): gpu_%u_* series stop", d->index,
                       call, sm__gpu_nvml_text(g, rc), d->index);
        }
        return 0;
    case V_SKIP:
    default:
        /* at open a transient error keeps the metric: the first sample says */
        if (!at_open && !d->failing) {
            sm__log(SM_WARN, "gpu: GPU %u: %s failed: %s; its values are skipped until it recovers",
                   d->index, call, sm__gpu_nvml_text(g, rc));
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
    *skipped += sm__gpu_verdict(rc) == V_SKIP;
    return 0;
}

static int wants(const struct gpu_dev *d, enum query q)
{
    return !d->lost && (d->want & q_mask[q]);
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
 * clocks, clock-event reasons, PCIe and ECC counters.  As sm__gpu_query_device. */
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
            sm_nvml_return frc = rc != SM_NVML_SUCCESS ? rc : sm__gpu_field_u64(&fv[k], &v);
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
        /* the series at detail full; the gpu_events tag at every level */
        if (out && g->detail_full)
            sm__emit(out, d->key[m], (double)c, unit[m], src_ecc[k], SM_AGG_LAST);
    }
    return skipped;
}

/* GPU d's process list — under MIG each named instance's through its MIG
 * device handle, one after the other — put in classes by gpu_holders.c,
 * and the per-rank series. */
static void query_procs(struct gpu *g, struct gpu_dev *d, struct procs *pr, sm_points *out,
                        int at_open, char *msg, size_t msglen, int *skipped)
{
    sm_nvml_process_info info[PROC_LIST];
    unsigned int count = PROC_LIST;
    double by_rank[PROC_RANKS_MAX];
    sm_nvml_return rc;

    if (!wants(d, Q_PROCS))
        return;
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
        return;
    sm__gpu_holders(pr, d, info, count, at_open, by_rank);
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
}

/* Queries every metric once; rc verdicts are those of judge().  Emits into
 * out when non-NULL.  Returns the number of transient failures. */
int sm__gpu_query_device(struct gpu *g, struct gpu_dev *d, sm_points *out, int at_open,
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
            skipped += sm__gpu_verdict(rc) == V_SKIP;
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
            skipped += sm__gpu_verdict(rc) == V_SKIP;
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
                    skipped += sm__gpu_verdict(lrc) == V_SKIP;
                }
            }
        } else {
            skipped += sm__gpu_verdict(rc) == V_SKIP;
        }
    }
    skipped += query_health(g, d, out, at_open, msg, msglen);
    if (g->f.processes)
        query_procs(g, d, &g->procs, out, at_open, msg, msglen, &skipped);
    return skipped;
}

/* Dropped metrics found at open, one clause per (query, reason) with the
 * devices grouped: "gpu_{0,1,2}_power_usage_* dropped: ... says Not Supported". */
void sm__gpu_say_drops(const struct gpu *g, char *buf, size_t cap)
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
                list, q_label[q], d->open_call[q], sm__gpu_nvml_text(g, d->open_drop[q]));
        }
}
