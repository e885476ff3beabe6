/*
 * test_budget.c — the write budget's rule (src/engine/plan.c sm__budget_interval,
 * docs/design.md §5) and the plan that applies it.  Unset, it must be the
 * seed's write-load cap exactly: the old formula is written out below, as it
 * stood, and every n from 1 to 1024 (with several intervals, samples and
 * series counts) must give the same interval, to the bit.  Set, the period
 * is the smallest 0.01 s step that keeps n x series rows per period within
 * the budget, never below the user's period and at most a point an hour.
 */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "internal.h"

/* The seed's rule, verbatim (sm__capped_interval before the budget). */
static double seed_rule(int collectors, double interval, int samples)
{
    double min_period;

    if (collectors <= 4 || samples < 1)
        return interval;
    min_period = 10.0 * (int)(((long long)collectors + 4 - 1) / 4);
    return interval * samples < min_period ? min_period / samples : interval;
}

static const double intervals[] = {0.01, 0.5, 1, 2.5, 10, 30, 100, 3000, 86400};
static const int samples_of[] = {1, 2, 3, 7};
static const int series_of[] = {1, 11, 22, 27, 300};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void test_unset_is_the_seed_rule(void)
{
    int same = 1, need_zero = 1;

    for (int n = 1; n <= 1024; n++)
        for (size_t i = 0; i < COUNT(intervals); i++)
            for (size_t k = 0; k < COUNT(samples_of); k++)
                for (size_t s = 0; s < COUNT(series_of); s++) {
                    double need = -1;
                    /* 0 and SM_DEFAULT both mean "none" */
                    double a = sm__budget_interval(n, series_of[s], intervals[i], samples_of[k],
                                                   0, &need);
                    double b = sm__budget_interval(n, series_of[s], intervals[i], samples_of[k],
                                                   SM_DEFAULT, NULL);
                    double want = seed_rule(n, intervals[i], samples_of[k]);
                    if (memcmp(&a, &want, sizeof a) != 0 || memcmp(&b, &want, sizeof b) != 0) {
                        if (same)
                            fprintf(stderr, "n=%d interval=%g samples=%d: %.17g, seed %.17g\n",
                                    n, intervals[i], samples_of[k], a, want);
                        same = 0;
                    }
                    need_zero &= need == 0;
                }
    CHECK(same);
    CHECK(need_zero);
    /* the reference points of docs/design.md §5 */
    CHECK_NEAR(sm__budget_interval(8, 22, 10, 1, 0, NULL), 20, 0);
    CHECK_NEAR(sm__budget_interval(64, 22, 10, 1, 0, NULL), 160, 0);
    CHECK_NEAR(sm__budget_interval(1024, 27, 10, 1, 0, NULL), 2560, 0);
    CHECK_NEAR(sm__budget_interval(4, 22, 1, 1, 0, NULL), 1, 0);
}

/* ceil(rows x 100 / budget) / 100, as the rule and docs/design.md §5 say it */
static double want_period(int n, int series, double budget)
{
    double x = (double)n * series * 100.0 / budget;
    double c = (double)(long long)x;
    return (c < x ? c + 1 : c) / 100.0;
}

static void test_set(void)
{
    static const double budgets[] = {0.01, 0.3, 1, 7, 100, 333.3, 1000, 1e5, 1e7};
    int ok = 1;

    for (int n = 1; n <= 1024; n += n < 16 ? 1 : 37)
        for (size_t b = 0; b < COUNT(budgets); b++)
            for (size_t i = 0; i < COUNT(intervals); i++)
                for (size_t k = 0; k < COUNT(samples_of); k++)
                    for (size_t s = 0; s < COUNT(series_of); s++) {
                        int sr = series_of[s], sk = samples_of[k];
                        double user = intervals[i] * sk, need = -1;
                        double iv = sm__budget_interval(n, sr, intervals[i], sk, budgets[b],
                                                        &need);
                        double period = iv * sk, rows = (double)n * sr;
                        double want = want_period(n, sr, budgets[b]);
                        double floor_p = want < SM_WRITE_BUDGET_PERIOD_MAX
                                             ? want : SM_WRITE_BUDGET_PERIOD_MAX;
                        int good = need == want && iv >= intervals[i] &&
                                   /* never below the user's period; kept when longer */
                                   (user >= floor_p ? iv == intervals[i]
                                                    : period == floor_p / sk * sk) &&
                                   /* within the budget when it can be met */
                                   (want > SM_WRITE_BUDGET_PERIOD_MAX ||
                                    rows / period <= budgets[b] * (1 + 1e-12)) &&
                                   /* the smallest 0.01 s step: one step less is over it */
                                   (user >= floor_p || want > SM_WRITE_BUDGET_PERIOD_MAX ||
                                    want <= 0.01 || rows / (want - 0.01) > budgets[b]);
                        if (!good && ok)
                            fprintf(stderr, "n=%d series=%d budget=%g interval=%g samples=%d: "
                                    "interval %.17g need %.17g want %.17g\n", n, sr, budgets[b],
                                    intervals[i], sk, iv, need, want);
                        ok &= good;
                    }
    CHECK(ok);
    /* 64 pods of 22 series at 100 rows/s: 14.08 s; 1024 of 27 at 500: 55.3 s */
    CHECK_NEAR(sm__budget_interval(64, 22, 10, 1, 100, NULL), 14.08, 1e-12);
    CHECK_NEAR(sm__budget_interval(1024, 27, 10, 1, 500, NULL), 55.3, 1e-12);
    /* a budget above the job's rows: the user's 10 s stays, even for n > 4 */
    CHECK_NEAR(sm__budget_interval(64, 22, 10, 1, 1000, NULL), 10, 0);
    /* cannot be met: a point an hour, and need says what it asked */
    {
        double need;
        CHECK_NEAR(sm__budget_interval(1024, 27, 10, 2, 1, &need), 1800, 0);
        CHECK_NEAR(need, 27648, 0);
    }
}

static void test_plan(void)
{
    sm_plan_input in = SM_PLAN_INPUT_INIT;
    sm_plan p = SM_PLAN_INIT, q = SM_PLAN_INIT;
    char err[256];

    /* unset: the plan of today (8 GPU pods: 20 s, docs/plan.md's reference) */
    in.workers = 8;
    in.nodes = 4;
    in.gpus_per_worker = 1;
    in.all_workers = 1;
    CHECK_EQ_INT(sm_plan_estimate(&in, &p, err, sizeof err), 0);
    CHECK_NEAR(p.period_s, 20, 0);
    /* 8 collectors x (31 of the pod + 3 of its own tree) series every 20 s;
     * 31 = 3 node + 3 rootfs + 2 network + 12 of its GPU + 11 container: the
     * GPU's default level (docs/series.md "Levels"; 16 before the clocks and
     * ECC counts went to level full) */
    CHECK_NEAR(p.rows_per_hour, 8 * 34 * 3600 / 20, 1e-9);
    CHECK_NEAR(p.write_budget, 0, 0);
    CHECK_NEAR(p.budget_period_s, 0, 0);
    CHECK_EQ_INT(p.series_per_collector_recorded, 31 + 3);
    CHECK_EQ_INT(p.gpu_series_per_collector, 12);
    /* level full: + 10 per GPU (GPM 4, NVLink 2, clocks 2, ECC 2) */
    CHECK_EQ_INT(p.series_full, p.series + 8 * 10);
    in.detail = SM_PLAN_DETAIL_FULL;
    CHECK_EQ_INT(sm_plan_estimate(&in, &q, err, sizeof err), 0);
    CHECK_EQ_INT(q.series_per_collector_recorded, 31 + 10 + 3);
    CHECK_EQ_INT(q.gpu_series_per_collector, 22);
    CHECK_EQ_INT(q.series, p.series_full);
    CHECK_EQ_INT(q.series_full, q.series);
    in.detail = SM_DEFAULT;
    q = (sm_plan)SM_PLAN_INIT;

    /* set: the rule over the collector's own series, its pod's trees included */
    in.workers = 1024;
    in.nodes = SM_DEFAULT;
    in.write_budget = 500;
    CHECK_EQ_INT(sm_plan_estimate(&in, &q, err, sizeof err), 0);
    CHECK_EQ_INT(q.collectors, 1024);
    CHECK_EQ_INT(q.series_per_collector_recorded, 34);
    CHECK_NEAR(q.period_s, want_period(1024, 34, 500), 0); /* 69.64 s */
    CHECK_NEAR(q.rows_per_s, q.series / q.period_s, 1e-9);
    CHECK(q.rows_per_s <= 500);
    CHECK_NEAR(q.write_budget, 500, 0);
    CHECK(q.server_cores >= 1);
    /* 4 workers a pod: each collector also records 3 siblings' trees */
    in.workers_per_pod = 4;
    CHECK_EQ_INT(sm_plan_estimate(&in, &q, err, sizeof err), 0);
    CHECK_EQ_INT(q.series_per_collector_recorded, q.series_per_collector + 4 * 3);
    CHECK_EQ_INT(q.collectors * q.series_per_collector_recorded, q.series);

    /* bad budgets: the plan's bound line, as every other bound */
    static const double bad[] = {0, -2, 0.001, 1e8, NAN, INFINITY};
    for (size_t i = 0; i < COUNT(bad); i++) {
        in.write_budget = bad[i];
        CHECK_EQ_INT(sm_plan_estimate(&in, &q, err, sizeof err), -EINVAL);
        CHECK(strstr(err, "write budget") != NULL);
    }

    /* a caller of the first sized layout: the budget takes its default */
    in = (sm_plan_input)SM_PLAN_INPUT_INIT;
    in.workers = 64;
    in.all_workers = 1;
    in.write_budget = 1; /* past the size below: not read */
    in.size = offsetof(sm_plan_input, write_budget);
    CHECK_EQ_INT(sm_plan_estimate(&in, &q, err, sizeof err), 0);
    CHECK_NEAR(q.period_s, 160, 0);
}

int main(void)
{
    test_unset_is_the_seed_rule();
    test_set();
    test_plan();
    return CHECK_DONE();
}
