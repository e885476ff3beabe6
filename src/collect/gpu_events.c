/*
 * gpu_events.c — the NVIDIA collector's tags (docs/series.md): gpu_events
 * (Xid errors from one NVML event set polled with a zero timeout; remapped
 * rows and retired pages, read once per window) and gpu_memory_at_peak (each
 * GPU's memory by holder at its highest sampled use, as gpu_holders.c keeps
 * it).  It must never wait inside the driver, and the texts it ships must
 * stay bounded over a run (a repeat is spaced in time, a peak ships when it
 * rose by a step).
 */
#include <string.h>
#include <time.h>

#include "gpu_int.h"

/*
 * Xid errors through one event set for every device (docs/gpu.md "Events"):
 * polled with a zero timeout from the sampling thread, so no thread of ours
 * waits in the driver and a sample never blocks on it.  A device that
 * cannot register (NOT_SUPPORTED on some boards, MIG without privilege)
 * only lacks its events, said in the open line.
 */
void sm__gpu_events_open(struct gpu *g, char *note, size_t cap)
{
    sm_nvml_return rc;
    size_t registered = 0;

    if (!g->f.event_set_create || !g->f.register_events || !g->f.event_wait ||
        !g->f.event_set_free)
        return; /* the missing entry point was named already */
    rc = g->f.event_set_create(&g->events);
    if (rc != SM_NVML_SUCCESS) {
        g->events = NULL;
        sm__line_join(note, cap, "no Xid events: nvmlEventSetCreate says %s",
                      sm__gpu_nvml_text(g, rc));
        return;
    }
    for (size_t i = 0; i < g->n; i++) {
        rc = g->f.register_events(g->dev[i].h, SM_NVML_EVENT_TYPE_XID_CRITICAL_ERROR, g->events);
        if (rc == SM_NVML_ERROR_UNKNOWN) {
            /* nvml.h: "event set is in undefined state and should be freed"
             * (NOT_SUPPORTED leaves it usable): no GPU's events are polled */
            sm__line_join(note, cap, "no Xid events: nvmlDeviceRegisterEvents of GPU %u says %s, "
                          "which leaves the event set undefined (nvml.h); it is freed",
                          g->dev[i].index, sm__gpu_nvml_text(g, rc));
            registered = 0;
            break;
        }
        if (rc == SM_NVML_SUCCESS)
            registered++;
        else
            sm__line_join(note, cap, "no Xid events of GPU %u: nvmlDeviceRegisterEvents says %s",
                          g->dev[i].index, sm__gpu_nvml_text(g, rc));
    }
    if (!registered) {
        g->f.event_set_free(g->events);
        g->events = NULL;
    }
}

/* What arrived since the last poll; at most a bounded number per sample,
 * the rest is there at the next. */
void sm__gpu_events_poll(struct gpu *g)
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
                        "until it answers again", sm__gpu_nvml_text(g, rc));
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
void sm__gpu_health_read(struct gpu *g, int at_open)
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
                d->remap_ok = sm__gpu_verdict(rc) == V_OK || sm__gpu_verdict(rc) == V_SKIP;
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
                else if (sm__gpu_verdict(rc) != V_SKIP)
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
        /* the ECC counts since recording started (their series are at
         * detail full, docs/series.md "Levels"): an uncorrected error is
         * news each time, corrected ones when they first appear (a board
         * that corrects a stream of them ships its count spaced) */
        if (d->ecc_sum[0] && news)
            sm__line_add(c, sizeof c, " ecc_corrected");
        else if (d->ecc_sum[0])
            sm__line_add(c, sizeof c, " ecc_corrected=%llu", d->ecc_sum[0]);
        if (d->ecc_sum[1])
            sm__line_add(c, sizeof c, " ecc_uncorrected=%llu", d->ecc_sum[1]);
        if (c[0])
            sm__line_add(val, cap, "%sgpu%u%s", val[0] ? "; " : "", d->index, c);
    }
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

void sm__gpu_tags(void *state, int phase, sm_tags *out)
{
    struct gpu *g = state;
    char val[sizeof g->shipped], news[sizeof g->shipped];
    double now = sm__now_mono();

    tag_mem_peak(g, phase, out);
    sm__gpu_energy_tag(g, phase, out);
    if (phase != SM_TAGS_START)
        sm__gpu_health_read(g, 0);
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
    /* the event line of the ECC counts, as often as the tag ships them */
    for (size_t i = 0; i < g->n; i++) {
        struct gpu_dev *d = &g->dev[i];
        if (d->ecc_sum[0] == d->ecc_said[0] && d->ecc_sum[1] == d->ecc_said[1])
            continue;
        sm__log(d->ecc_sum[1] > d->ecc_said[1] ? SM_WARN : SM_INFO,
                "gpu: GPU %u: ECC errors since recording started: %llu corrected, %llu "
                "uncorrected (docs/gpu.md \"Events\")", d->index, d->ecc_sum[0], d->ecc_sum[1]);
        memcpy(d->ecc_said, d->ecc_sum, sizeof d->ecc_said);
    }
    memcpy(g->shipped, val, sizeof val);
    memcpy(g->shipped_news, news, sizeof news);
    g->t_shipped = now;
}
