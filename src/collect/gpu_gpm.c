/*
 * gpu_gpm.c — what a GPU actually did, at detail level full (docs/gpu.md
 * "Detail series"): SM active, SM occupancy, tensor active and DRAM
 * bandwidth from GPM (nvmlGpmSampleGet / nvmlGpmMetricsGet, Hopper and
 * newer), NVLink bytes from the field counters
 * (NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_{RX,TX}; GPM's rates only where the
 * driver refuses the fields), and the energy since open behind the
 * gpu_energy tag (nvmlDeviceGetTotalEnergyConsumption, at every level: a
 * tag adds no chart).
 *
 * GPM's metrics are those of the interval between two samples taken at
 * least 100 ms apart (nvml.h, nvmlGpmMetricsGet): each device keeps two
 * buffers and the previous sample's buffer is the first of the pair, so a
 * sample makes one nvmlGpmSampleGet and never a second wake-up.  A sample
 * closer than 100 ms to the last one takes no GPM value (the next does).
 * It must never wait inside the driver or allocate per sample; a metric the
 * driver refuses is dropped alone with one line (the failure policy of
 * docs/design.md §6, as gpu_query.c's health fields).
 */
#include <stdio.h>
#include <string.h>

#include "gpu_int.h"

#define GPM_MIN_INTERVAL 0.1 /* s: nvml.h, "should be greater than 100ms" */

/* The GPM metrics asked, in the order of the metric enum. */
static const struct {
    enum metric m;
    unsigned int id;
    const char *source;
} gpm_metric[] = {
    {M_SM_ACTIVE, SM_NVML_GPM_METRIC_SM_UTIL, "nvmlGpmMetricsGet(NVML_GPM_METRIC_SM_UTIL)"},
    {M_SM_OCC, SM_NVML_GPM_METRIC_SM_OCCUPANCY,
     "nvmlGpmMetricsGet(NVML_GPM_METRIC_SM_OCCUPANCY)"},
    {M_TENSOR, SM_NVML_GPM_METRIC_ANY_TENSOR_UTIL,
     "nvmlGpmMetricsGet(NVML_GPM_METRIC_ANY_TENSOR_UTIL)"},
    {M_DRAM, SM_NVML_GPM_METRIC_DRAM_BW_UTIL, "nvmlGpmMetricsGet(NVML_GPM_METRIC_DRAM_BW_UTIL)"},
    {M_NVLINK_RX, SM_NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC,
     "nvmlGpmMetricsGet(NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC)"},
    {M_NVLINK_TX, SM_NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC,
     "nvmlGpmMetricsGet(NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC)"},
};
#define GPM_N (sizeof gpm_metric / sizeof gpm_metric[0])

static const char *const full_label[M_WORK_COUNT] = {
    "sm_active_percentage",    "sm_occupancy_percentage",  "tensor_active_percentage",
    "dram_bandwidth_percentage", "nvlink_receive_megabytes", "nvlink_transmit_megabytes"};
static const char *const src_nvlink[2] = {
    "nvmlDeviceGetFieldValues(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX)",
    "nvmlDeviceGetFieldValues(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX)"};

/* A transient failure: one line per streak (d->failing, as gpu_query.c). */
static void say_failing(const struct gpu *g, struct gpu_dev *d, const char *call,
                        sm_nvml_return rc)
{
    if (d->failing)
        return;
    sm__log(SM_WARN, "gpu: GPU %u: %s failed: %s; its values are skipped until it recovers",
            d->index, call, sm__gpu_nvml_text(g, rc));
    d->failing = 1;
}

/* Metric m refused while sampling: dropped with one line. */
static void drop_metric(const struct gpu *g, struct gpu_dev *d, enum metric m, const char *call,
                        sm_nvml_return rc)
{
    if (!(d->want & BIT(m)))
        return;
    d->want &= ~BIT(m);
    sm__log(SM_WARN, "gpu: gpu_%u_%s dropped: %s says %s", d->index,
            full_label[m - M_SM_ACTIVE], call, sm__gpu_nvml_text(g, rc));
}

/* At open, a query's drop goes into the open line, grouped over devices by
 * sm__gpu_say_drops (gpu_query.c labels Q_GPM and Q_NVLINK_*). */
static void drop_at_open(struct gpu_dev *d, enum query q, unsigned int bits, sm_nvml_return rc,
                         const char *call)
{
    if (!(d->want & bits))
        return;
    d->want &= ~bits;
    d->open_drop[q] = rc;
    d->open_call[q] = call;
}

static sm_nvml_return take(const struct gpu *g, const struct gpu_dev *d, sm_nvml_gpm_sample s)
{
    return d->gpm_mig ? g->f.gpm_mig_get(d->h, d->gpm_gi, s) : g->f.gpm_get(d->h, s);
}

/*
 * Whether and how device d gets GPM: the library has the calls, the device
 * says so (nvmlGpmQueryDeviceSupport), under MIG the one named instance's
 * own GPM (nvmlGpmMigSampleGet with its GPU instance id: several instances
 * of a board in one series would mix them), two buffers, the first sample.
 */
void sm__gpu_gpm_open(struct gpu *g, struct gpu_dev *d, char *note, size_t cap)
{
    sm_nvml_gpm_support sup;
    sm_nvml_return rc;

    (void)note;
    (void)cap;
    d->gpm_last = -1;
    if (!(d->want & GPM_BITS))
        return;
    if (!g->f.gpm_support || !g->f.gpm_alloc || !g->f.gpm_free || !g->f.gpm_get ||
        !g->f.gpm_metrics) {
        drop_at_open(d, Q_GPM, GPM_BITS, SM_NVML_ERROR_FUNCTION_NOT_FOUND,
                     "the absence of nvmlGpm* in this NVML");
        return;
    }
    if (d->nmig > 1) {
        drop_at_open(d, Q_GPM, GPM_BITS, SM_NVML_ERROR_NOT_SUPPORTED,
                     "nvmlGpmMigSampleGet (one series, several MIG instances named)");
        return;
    }
    if (d->nmig == 1) {
        rc = g->f.gpm_mig_get && g->f.gi_id ? g->f.gi_id(d->mig[0], &d->gpm_gi)
                                            : SM_NVML_ERROR_FUNCTION_NOT_FOUND;
        if (rc != SM_NVML_SUCCESS) {
            drop_at_open(d, Q_GPM, GPM_BITS, rc, "nvmlGpmMigSampleGet (the instance's GPM)");
            return;
        }
        d->gpm_mig = 1;
    }
    memset(&sup, 0, sizeof sup);
    sup.version = SM_NVML_GPM_SUPPORT_VERSION;
    rc = g->f.gpm_support(d->nmig ? d->mig[0] : d->h, &sup);
    if (rc == SM_NVML_SUCCESS && !sup.isSupportedDevice)
        rc = SM_NVML_ERROR_NOT_SUPPORTED; /* before Hopper */
    if (rc != SM_NVML_SUCCESS) {
        drop_at_open(d, Q_GPM, GPM_BITS, rc, "nvmlGpmQueryDeviceSupport");
        return;
    }
    rc = g->f.gpm_alloc(&d->gpm_s[0]);
    if (rc == SM_NVML_SUCCESS)
        rc = g->f.gpm_alloc(&d->gpm_s[1]);
    if (rc != SM_NVML_SUCCESS) {
        drop_at_open(d, Q_GPM, GPM_BITS, rc, "nvmlGpmSampleAlloc");
        return;
    }
    d->gpm = 1;
    rc = take(g, d, d->gpm_s[0]);
    if (rc == SM_NVML_SUCCESS) {
        d->gpm_last = 0;
        d->gpm_t = g->now();
    } else if (sm__gpu_verdict(rc) == V_DROP) {
        drop_at_open(d, Q_GPM, GPM_BITS, rc,
                     d->gpm_mig ? "nvmlGpmMigSampleGet" : "nvmlGpmSampleGet");
        d->gpm = 0;
    }
    /* a transient error: the first sample takes the first GPM sample */
}

/* Frees every device's GPM buffers (before nvmlShutdown). */
void sm__gpu_gpm_close(struct gpu *g)
{
    for (size_t i = 0; i < GPU_MAX; i++)
        for (int k = 0; k < 2; k++)
            if (g->dev[i].gpm_s[k]) {
                g->f.gpm_free(g->dev[i].gpm_s[k]);
                g->dev[i].gpm_s[k] = NULL;
            }
}

/* NVLink from the field counters, summed over every link (scopeId
 * UINT_MAX, nvml.h), cumulative since open: deltas summed, a counter below
 * its last value restarted (a driver reload) and counts whole.  At open a
 * refused field falls back to GPM's rate where GPM is there. */
static int query_nvlink(struct gpu *g, struct gpu_dev *d, sm_points *out, int at_open)
{
    sm_nvml_field_value fv[2];
    sm_nvml_return rc;
    int skipped = 0;

    if (!(d->want & NVLINK_BITS) || d->nvlink_gpm)
        return 0;
    if (!g->f.fields) {
        if (at_open && d->gpm)
            d->nvlink_gpm = 1;
        else if (at_open)
            drop_at_open(d, Q_NVLINK_RX, NVLINK_BITS, SM_NVML_ERROR_FUNCTION_NOT_FOUND,
                         "the absence of nvmlDeviceGetFieldValues in this NVML");
        return 0;
    }
    memset(fv, 0, sizeof fv);
    fv[0].fieldId = SM_NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
    fv[1].fieldId = SM_NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
    fv[0].scopeId = fv[1].scopeId = SM_NVML_NVLINK_ALL_LINKS;
    rc = g->f.fields(d->h, 2, fv);
    for (int k = 0; k < 2; k++) {
        enum metric m = k ? M_NVLINK_TX : M_NVLINK_RX;
        unsigned long long v = 0;
        sm_nvml_return frc = rc != SM_NVML_SUCCESS ? rc : sm__gpu_field_u64(&fv[k], &v);
        if (!(d->want & BIT(m)))
            continue;
        switch (sm__gpu_verdict(frc)) {
        case V_OK:
            if (!(d->based & BIT(m)))
                d->nvlink_last[k] = v;
            d->based |= BIT(m);
            d->nvlink_sum[k] += v >= d->nvlink_last[k] ? v - d->nvlink_last[k] : v;
            d->nvlink_last[k] = v;
            if (out)
                sm__emit(out, d->key[m], (double)d->nvlink_sum[k] * 1024.0 / 1e6, "MB",
                         src_nvlink[k], SM_AGG_LAST);
            break;
        case V_DROP:
            if (at_open && d->gpm)
                d->nvlink_gpm = 1; /* GPM's rates take over (both: one source) */
            else if (at_open)
                drop_at_open(d, k ? Q_NVLINK_TX : Q_NVLINK_RX, BIT(m), frc,
                             "nvmlDeviceGetFieldValues");
            else
                drop_metric(g, d, m, "nvmlDeviceGetFieldValues", frc);
            break;
        case V_LOST:
            break; /* the next health query says it */
        default:
            if (!at_open) {
                say_failing(g, d, "nvmlDeviceGetFieldValues(NVLink)", frc);
                skipped++;
            }
        }
    }
    if (d->nvlink_gpm) {
        d->based &= ~NVLINK_BITS; /* one source for both */
        d->nvlink_sum[0] = d->nvlink_sum[1] = 0;
    }
    return skipped;
}

/* The GPM metrics of the interval since the last GPM sample. */
static int query_gpm(struct gpu *g, struct gpu_dev *d, sm_points *out)
{
    sm_nvml_gpm_metrics_get *mg = &g->gpm_mg;
    unsigned int ask[GPM_N];
    unsigned int n = 0;
    sm_nvml_return rc;
    double t = g->now(), dt;
    int k;

    if (!d->gpm || !(d->want & (GPM_BITS | (d->nvlink_gpm ? NVLINK_BITS : 0))))
        return 0;
    if (d->gpm_last >= 0 && t - d->gpm_t < GPM_MIN_INTERVAL)
        return 0; /* too close to the last: the next sample's pair */
    k = d->gpm_last == 0 ? 1 : 0;
    rc = take(g, d, d->gpm_s[k]);
    if (rc != SM_NVML_SUCCESS) {
        const char *call = d->gpm_mig ? "nvmlGpmMigSampleGet" : "nvmlGpmSampleGet";
        enum verdict v = sm__gpu_verdict(rc);
        if (v == V_DROP) {
            for (size_t j = 0; j < GPM_N; j++)
                if (gpm_metric[j].m < M_NVLINK_RX || d->nvlink_gpm)
                    drop_metric(g, d, gpm_metric[j].m, call, rc);
            d->gpm = 0;
        } else if (v == V_SKIP) {
            say_failing(g, d, call, rc);
        }
        return v == V_SKIP;
    }
    dt = t - d->gpm_t;
    if (d->gpm_last < 0) { /* the first sample of the pair */
        d->gpm_last = k;
        d->gpm_t = t;
        return 0;
    }
    /* the request's header and the metrics asked; the rest of the array is
     * never read (numMetrics) */
    mg->version = SM_NVML_GPM_METRICS_GET_VERSION;
    mg->sample1 = d->gpm_s[d->gpm_last];
    mg->sample2 = d->gpm_s[k];
    for (size_t j = 0; j < GPM_N; j++) {
        enum metric m = gpm_metric[j].m;
        if (!(d->want & BIT(m)) || (m >= M_NVLINK_RX && !d->nvlink_gpm))
            continue;
        memset(&mg->metrics[n], 0, sizeof mg->metrics[n]);
        mg->metrics[n].metricId = gpm_metric[j].id;
        ask[n++] = (unsigned int)j;
    }
    mg->numMetrics = n;
    d->gpm_last = k;
    d->gpm_t = t;
    rc = g->f.gpm_metrics(mg);
    if (rc != SM_NVML_SUCCESS) {
        if (sm__gpu_verdict(rc) == V_DROP)
            for (unsigned int j = 0; j < n; j++)
                drop_metric(g, d, gpm_metric[ask[j]].m, "nvmlGpmMetricsGet", rc);
        else
            say_failing(g, d, "nvmlGpmMetricsGet", rc);
        return sm__gpu_verdict(rc) == V_SKIP;
    }
    for (unsigned int j = 0; j < n; j++) {
        const sm_nvml_gpm_metric *r = &mg->metrics[j];
        enum metric m = gpm_metric[ask[j]].m;
        enum verdict v = sm__gpu_verdict(r->nvmlReturn);
        if (v == V_DROP) {
            drop_metric(g, d, m, gpm_metric[ask[j]].source, r->nvmlReturn);
            continue;
        }
        if (v != V_OK) {
            say_failing(g, d, gpm_metric[ask[j]].source, r->nvmlReturn);
            continue;
        }
        if (m >= M_NVLINK_RX) {
            /* MiB/s over the pair's interval: integrated into MB since open */
            int x = m == M_NVLINK_TX;
            d->nvlink_gpm_mb[x] += r->value * 1.048576 * dt;
            if (out)
                sm__emit(out, d->key[m], d->nvlink_gpm_mb[x], "MB", gpm_metric[ask[j]].source,
                         SM_AGG_LAST);
        } else if (out) {
            sm__emit(out, d->key[m], r->value, "percent", gpm_metric[ask[j]].source,
                     SM_AGG_MEAN);
        }
    }
    return 0;
}

/* Device d's detail series; at open (out NULL) the NVLink fields' first
 * reading.  Returns the number of transient failures. */
int sm__gpu_gpm_query(struct gpu *g, struct gpu_dev *d, sm_points *out, int at_open,
                      char *msg, size_t msglen)
{
    int skipped;

    (void)msg;
    (void)msglen;
    if (d->lost || !(d->want & WORK_BITS))
        return 0;
    skipped = query_nvlink(g, d, out, at_open);
    if (!at_open)
        skipped += query_gpm(g, d, out);
    return skipped;
}

/* Every device's energy counter (mJ since the driver loaded, Volta and
 * newer): summed delta by delta since open; a reading below the last is a
 * driver reload (the counter restarted) and counts whole. */
void sm__gpu_energy_read(struct gpu *g)
{
    if (!g->f.energy)
        return;
    for (size_t i = 0; i < g->n; i++) {
        struct gpu_dev *d = &g->dev[i];
        unsigned long long mj = 0;
        sm_nvml_return rc;
        if (d->lost || !d->energy_ok)
            continue;
        rc = g->f.energy(d->h, &mj);
        if (rc != SM_NVML_SUCCESS) {
            if (sm__gpu_verdict(rc) == V_DROP) {
                d->energy_ok = 0;
                sm__log(SM_WARN, "gpu: GPU %u's energy dropped from the gpu_energy tag: "
                        "nvmlDeviceGetTotalEnergyConsumption says %s", d->index,
                        sm__gpu_nvml_text(g, rc));
            }
            continue;
        }
        if (!d->energy_based)
            d->energy_last = mj;
        d->energy_based = 1;
        d->energy_sum += mj >= d->energy_last ? mj - d->energy_last : mj;
        d->energy_last = mj;
    }
}

/* At open: the energy counter's first reading, the base; a GPU that
 * refuses it is said in the open line and left out of the tag. */
void sm__gpu_energy_open(struct gpu *g, char *note, size_t cap)
{
    if (!g->f.energy)
        return;
    for (size_t i = 0; i < g->n; i++) {
        struct gpu_dev *d = &g->dev[i];
        unsigned long long mj = 0;
        sm_nvml_return rc = g->f.energy(d->h, &mj);
        if (rc == SM_NVML_SUCCESS) {
            d->energy_ok = d->energy_based = 1;
            d->energy_last = mj;
        } else if (sm__gpu_verdict(rc) == V_SKIP) {
            d->energy_ok = 1; /* transient: the next reading is the base */
        } else {
            sm__line_join(note, cap, "GPU %u's energy not in gpu_energy: "
                          "nvmlDeviceGetTotalEnergyConsumption says %s", d->index,
                          sm__gpu_nvml_text(g, rc));
        }
    }
}

/* scopemeter.rankN.gpu_energy at the end (docs/series.md): each GPU's
 * energy since open in kWh, and their sum.  MIG: the board's (NVML has no
 * per-instance energy). */
void sm__gpu_energy_tag(struct gpu *g, int phase, sm_tags *out)
{
    char val[sizeof ((sm_tag *)0)->value] = "";
    double total = 0;
    int n = 0;

    if (phase == SM_TAGS_START)
        return;
    sm__gpu_energy_read(g);
    if (phase != SM_TAGS_END)
        return;
    for (size_t i = 0; i < g->n; i++) {
        const struct gpu_dev *d = &g->dev[i];
        double kwh = (double)d->energy_sum / 3.6e9; /* mJ in a kWh */
        if (!d->energy_based)
            continue;
        sm__line_add(val, sizeof val, "%sgpu%u kwh=%.6f", val[0] ? "; " : "", d->index, kwh);
        total += kwh;
        n++;
    }
    if (n > 1)
        sm__line_add(val, sizeof val, "; total_kwh=%.6f", total);
    if (val[0])
        sm__tag_add(out, "gpu_energy", "%s", val);
}
