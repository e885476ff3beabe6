/*
 * abi_now.c — the same program as abi_0_1.c written against today's header
 * (include/): the sized structs, the opaque identity, the library-owned
 * probe views, records with whole tag values.  compare.py checks that both
 * print the same.  It also acts a program of a later header: structs larger
 * than this library's (a field appended) and smaller than the first sized
 * layout, to show what the library reads and writes of each.
 */
#include <errno.h>
#include <stddef.h>

#include "scopemeter_mlflow.h"

#include "abi_common.h"

/* What a later header could hold: today's struct with a field appended. */
struct later_plan_input { sm_plan_input in; int later; };
struct later_plan { sm_plan p; int later; };

static void growth(void)
{
    struct later_plan_input li;
    struct later_plan lp;
    sm_plan_input in = SM_PLAN_INPUT_INIT;
    sm_plan p = SM_PLAN_INIT;
    char err[256];

    in.workers = 8;
    ABI_CHECK(sm_plan_estimate(&in, &p, err, sizeof err) == 0);
    /* a larger input: the library reads what it knows, ignores the rest */
    memset(&li, 0, sizeof li);
    li.in = in;
    li.in.size = sizeof li;
    li.later = 12345;
    memset(&lp, GUARD_BYTE, sizeof lp);
    lp.p.size = sizeof lp;
    ABI_CHECK(sm_plan_estimate(&li.in, &lp.p, err, sizeof err) == 0);
    ABI_CHECK(lp.p.size == sizeof lp);                /* the caller's size stays */
    ABI_CHECK(lp.p.series == p.series && lp.p.bytes_per_day == p.bytes_per_day);
    {
        unsigned char tail[sizeof lp.later];
        memset(tail, GUARD_BYTE, sizeof tail);
        ABI_CHECK(memcmp(&lp.later, tail, sizeof tail) == 0); /* left alone */
    }
    /* a size below the first sized layout is refused, not guessed at */
    in.size = offsetof(sm_plan_input, samples);
    ABI_CHECK(sm_plan_estimate(&in, &p, err, sizeof err) == -EINVAL);
    in.size = sizeof in;
    p.size = 0;
    ABI_CHECK(sm_plan_estimate(&in, &p, err, sizeof err) == -EINVAL);
    /* SM_DEFAULT everywhere but workers: the defaults of docs/plan.md */
    p.size = sizeof p;
    ABI_CHECK(sm_plan_estimate(&in, &p, err, sizeof err) == 0 && p.samples == 1 &&
              p.interval_s == SM_INTERVAL_DEFAULT && p.gpus_per_collector == 0);
}

int main(int argc, char **argv)
{
    sm_plan_input in = SM_PLAN_INPUT_INIT;
    struct { sm_plan p; unsigned char g[GUARD_LEN]; } plan;
    struct { sm_run_result r; unsigned char g[GUARD_LEN]; } res;
    static sm_record recs[8];
    sm_identity *id = NULL;
    sm_probe *p = NULL;
    sm_monitor *m;
    char err[256], key[64];
    int rc, n, metrics = 0;

    if (argc < 2)
        return 2;
    abi_env(argv[1]);
    printf("header %s library %s\n", SM_VERSION, sm_version());

    rc = sm_identity_read_env(&id);
    ABI_CHECK(id != NULL);
    if (!id)
        return 1;
    printf("identity rc=%d rank=%d local=%d world=%d local_world=%d node=%s launcher=%s "
           "source=%s invalid=%s\n", rc, sm_identity_rank(id), sm_identity_local_rank(id),
           sm_identity_world_size(id), sm_identity_local_world_size(id), sm_identity_node(id),
           sm_identity_launcher(id),
           sm_identity_node_source(id) ? sm_identity_node_source(id) : "-",
           sm_identity_invalid(id));
    printf("collects default=%d all_workers=%d\n", sm_collects(id, 0, NULL, 0),
           sm_collects(id, 1, NULL, 0));

    in.workers = 8;
    in.workers_per_pod = 4;
    in.gpus_per_worker = 1;
    in.all_workers = 1;
    in.interval_s = 5;
    memset(&plan, GUARD_BYTE, sizeof plan);
    plan.p.size = sizeof plan.p;
    rc = sm_plan_estimate(&in, &plan.p, err, sizeof err);
    ABI_CHECK(guard_intact(plan.g));
    ABI_PRINT_PLAN(rc, &plan.p);
    in.samples = 0; /* 0 is not "default": the bound, in words */
    rc = sm_plan_estimate(&in, &plan.p, err, sizeof err);
    printf("plan samples=0 rc=%d err=%s\n", rc, err);
    growth();

    rc = sm_probe_run(0, &p, err, sizeof err);
    printf("probe rc=%d\n", rc);
    if (rc == 0) {
        const sm_identity *pid = sm_probe_identity(p);
        const sm_cgroup_info *c = sm_probe_cgroup_info(p);
        printf("probe identity rank=%d local=%d world=%d node=%s launcher=%s mode=%s\n",
               sm_identity_rank(pid), sm_identity_local_rank(pid), sm_identity_world_size(pid),
               sm_identity_node(pid), sm_identity_launcher(pid), sm_probe_collect_mode(p));
        for (size_t i = 0; i < sm_probe_series_count(p); i++) {
            const sm_series_info *s = sm_probe_series_at(p, i);
            ABI_CHECK(s && s->size == sizeof *s && SM_HAS_FIELD(s, source));
            ABI_PRINT_SERIES(s);
        }
        ABI_CHECK(sm_probe_series_at(p, sm_probe_series_count(p)) == NULL);
        ABI_CHECK(c->size == sizeof *c && SM_HAS_FIELD(c, tag));
        ABI_PRINT_CGROUP(c);
        sm_probe_free(p);
    }

    m = sm_monitor_new();
    snprintf(key, sizeof key, "abi-now-%ld", (long)getpid());
    ABI_CHECK(m && sm_monitor_use_queue(m) == 0 && sm_monitor_set_interval(m, 0.05) == 0 &&
              sm_monitor_set_samples(m, SM_DEFAULT) == 0 &&
              sm_monitor_set_stop_timeout(m, SM_DEFAULT) == 0 &&
              sm_monitor_set_detail(m, SM_DEFAULT) == 0 && /* 0.3's setter, the same output */
              sm_monitor_set_all_workers(m, 1) == 0 && sm_monitor_set_recording_key(m, key) == 0);
    rc = sm_monitor_start(m, err, sizeof err);
    printf("monitor start rc=%d\n", rc);
    abi_sleep(0.3);
    sm_monitor_stop(m);
    ABI_CHECK(sm_monitor_drain_records(m, recs, 8, offsetof(sm_record, text_len), 0) == -EINVAL);
    while ((n = sm_monitor_drain_records(m, recs, 8, sizeof recs[0], 1.0)) >= 0)
        for (int i = 0; i < n; i++) {
            ABI_CHECK(recs[i].kind == SM_RECORD_METRIC ? recs[i].text == NULL
                                                       : strlen(recs[i].text) == recs[i].text_len);
            metrics += recs[i].kind == SM_RECORD_METRIC;
            abi_key_seen(recs[i].kind == SM_RECORD_TAG ? "tag" : "metric", recs[i].key);
        }
    printf("drain rc=%d metrics>0=%d\n", n, metrics > 0);
    abi_print_keys();
    sm_monitor_free(m);

    {
        sm_run_request req = SM_RUN_REQUEST_INIT;
        req.tracking_uri = "http://127.0.0.1:9";
        req.run_id = "0123abc";
        req.source_name = "abi";
        req.id = id;
        req.timeout_s = 0.3;
        memset(&res, GUARD_BYTE, sizeof res);
        res.r.size = sizeof res.r;
        rc = sm_mlflow_resolve(&req, &res.r);
        ABI_CHECK(guard_intact(res.g));
        printf("resolve rc=%d run_id=%s owns=%d\n", rc, res.r.run_id, res.r.owns_run);
    }
    sm_identity_free(id);
    return abi_fail;
}
