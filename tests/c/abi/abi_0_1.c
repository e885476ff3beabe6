/*
 * abi_0_1.c — a program as it was written against scopemeter 0.1's header
 * (tests/c/abi/0.1/, a verbatim copy): 0.1's struct layouts, 0.1's entry
 * points.  Built now and linked against today's libscopemeter.so, it must
 * run and get what today's API gives (compare.py runs abi_now beside it);
 * every struct sits before a guard the library must leave alone.
 */
#include "0.1/scopemeter_mlflow.h"

#include "abi_common.h"

int main(int argc, char **argv)
{
    struct { sm_identity id; unsigned char g[GUARD_LEN]; } id;
    struct { sm_plan p; unsigned char g[GUARD_LEN]; } plan;
    struct { sm_series_info s; unsigned char g[GUARD_LEN]; } si;
    struct { sm_cgroup_info c; unsigned char g[GUARD_LEN]; } cg;
    struct { sm_record r[8]; unsigned char g[GUARD_LEN]; } recs;
    struct { sm_run_result r; unsigned char g[GUARD_LEN]; } res;
    sm_plan_input in;
    sm_probe *p = NULL;
    sm_monitor *m;
    char err[256], key[64];
    int rc, n, metrics = 0;

    if (argc < 2)
        return 2;
    abi_env(argv[1]);
    printf("header %s library %s\n", SM_VERSION, sm_version());

    memset(&id, GUARD_BYTE, sizeof id);
    rc = sm_identity_from_env(&id.id);
    ABI_CHECK(guard_intact(id.g));
    printf("identity rc=%d rank=%d local=%d world=%d local_world=%d node=%s launcher=%s "
           "source=%s invalid=%s\n", rc, id.id.rank, id.id.local_rank, id.id.world_size,
           id.id.local_world_size, id.id.node, id.id.launcher,
           id.id.node_source ? id.id.node_source : "-", id.id.invalid);
    printf("collects default=%d all_workers=%d\n", sm_collects(&id.id, 0, NULL, 0),
           sm_collects(&id.id, 1, NULL, 0));

    memset(&in, 0, sizeof in);
    in.workers = 8;
    in.workers_per_pod = 4;
    in.nodes = SM_PLAN_DEFAULT;
    in.gpus_per_worker = 1;
    in.all_workers = 1;
    in.interval_s = 5;
    in.samples = SM_PLAN_DEFAULT;
    in.container_limits = 1;
    memset(&plan, GUARD_BYTE, sizeof plan);
    rc = sm_plan_compute(&in, &plan.p, err, sizeof err);
    ABI_CHECK(guard_intact(plan.g));
    ABI_PRINT_PLAN(rc, &plan.p);
    in.samples = 0; /* 0 is not "default": the bound, in words */
    rc = sm_plan_compute(&in, &plan.p, err, sizeof err);
    printf("plan samples=0 rc=%d err=%s\n", rc, err);

    rc = sm_probe_run(0, &p, err, sizeof err);
    printf("probe rc=%d\n", rc);
    if (rc == 0) {
        const sm_identity *pid = sm_probe_identity(p); /* the library's struct, read as 0.1's */
        printf("probe identity rank=%d local=%d world=%d node=%s launcher=%s mode=%s\n",
               pid->rank, pid->local_rank, pid->world_size, pid->node, pid->launcher,
               sm_probe_collect_mode(p));
        for (size_t i = 0; i < sm_probe_series_count(p); i++) {
            memset(&si, GUARD_BYTE, sizeof si);
            ABI_CHECK(sm_probe_series(p, i, &si.s) == 0);
            ABI_CHECK(guard_intact(si.g));
            ABI_PRINT_SERIES(&si.s);
        }
        ABI_CHECK(sm_probe_series(p, sm_probe_series_count(p), &si.s) < 0);
        memset(&cg, GUARD_BYTE, sizeof cg);
        sm_probe_cgroup(p, &cg.c);
        ABI_CHECK(guard_intact(cg.g));
        ABI_PRINT_CGROUP(&cg.c);
        sm_probe_free(p);
    }

    /* a queue monitor drained through 0.1's fixed records */
    m = sm_monitor_new();
    snprintf(key, sizeof key, "abi-0.1-%ld", (long)getpid());
    ABI_CHECK(m && sm_monitor_use_queue(m) == 0 && sm_monitor_set_interval(m, 0.05) == 0 &&
              sm_monitor_set_samples(m, 1) == 0 && sm_monitor_set_all_workers(m, 1) == 0 &&
              sm_monitor_set_recording_key(m, key) == 0);
    rc = sm_monitor_start(m, err, sizeof err);
    printf("monitor start rc=%d\n", rc);
    abi_sleep(0.3);
    sm_monitor_stop(m);
    memset(&recs, GUARD_BYTE, sizeof recs);
    while ((n = sm_monitor_drain(m, recs.r, 8, 1.0)) >= 0)
        for (int i = 0; i < n; i++) {
            ABI_CHECK(memchr(recs.r[i].key, 0, sizeof recs.r[i].key) != NULL);
            ABI_CHECK(memchr(recs.r[i].text, 0, sizeof recs.r[i].text) != NULL);
            metrics += recs.r[i].kind == SM_RECORD_METRIC;
            abi_key_seen(recs.r[i].kind == SM_RECORD_TAG ? "tag" : "metric", recs.r[i].key);
        }
    ABI_CHECK(guard_intact(recs.g));
    printf("drain rc=%d metrics>0=%d\n", n, metrics > 0);
    abi_print_keys();
    sm_monitor_free(m);

    {   /* run resolution: nothing listens on port 9 */
        sm_run_request req = {"http://127.0.0.1:9", "0123abc", NULL, "abi", &id.id, 0.3,
                              NULL, NULL};
        memset(&res, GUARD_BYTE, sizeof res);
        rc = sm_mlflow_resolve_run(&req, &res.r);
        ABI_CHECK(guard_intact(res.g));
        printf("resolve rc=%d run_id=%s owns=%d\n", rc, res.r.run_id, res.r.owns_run);
    }
    return abi_fail;
}
