/*
 * sink_mlflow.c — the REST sink: ships finished records to an MLflow run
 * with runs/log-batch over libcurl, from its own thread.
 *
 * Both surfaces ship through it: `scopemeter run` and, for an http(s)
 * tracking URI, the Python front (docs/design.md § Shipping).
 *
 * This file is only the transport: the delivery policy (what to send and
 * when, what an answer means, backoff, the lines and the counters) is
 * deliver.c's, shared with the Python front's MlflowClient transport.  Here:
 * the log-batch body of one batch, one request on the one libcurl easy handle
 * (its connection is kept alive between windows where the server allows), and
 * the run check at start over REST.
 *
 * At start the run is checked once (check_run): a missing or deleted run
 * fails the start instead of refusing every window; so do credentials
 * that may read the run but not write to it (401/403).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "deliver.h"
#include "mlflow_rest.h"
#include "sink.h"

/* The transport's state, owned by the delivering thread (free_arg at close). */
typedef struct rest_transport {
    sm_rest rest;
    char run_id[260];
} rest_transport;

/* ---- JSON of one batch --------------------------------------------------------- */

/* The log-batch body of the first records of b (deliver.c chose them within
 * MLflow's count limits, none non-finite), written by body.c.  *taken
 * receives how many it covers: fewer than b->n when the body would exceed
 * MLflow's 1 MB request limit.  The caller frees *body.  0 or -ENOMEM. */
static int build_body(const char *run_id, const sm_deliver_batch *b, size_t *taken,
                      char **body, size_t *len)
{
    sm_body sb = {0};
    int rc = sm__body_log_batch(&sb, run_id, b->ring, b->recs, b->n, b->step_base);

    *taken = rc < 0 ? 0 : sb.used;
    *body = rc < 0 ? NULL : sb.buf;
    *len = rc < 0 ? 0 : sb.len;
    if (rc < 0)
        sm__body_free(&sb);
    return rc;
}

/* One request (an sm_deliver_post): the batch as one runs/log-batch; a
 * is the policy's, cleared (deliver.c clears it after). */
static void post(void *arg, const sm_deliver_batch *b, size_t *taken, sm_rest_result *a)
{
    rest_transport *t = arg;
    char *body = NULL;
    size_t len = 0;

    if (build_body(t->run_id, b, taken, &body, &len) < 0) {
        *taken = 0;
        a->outcome = SM_REST_FAILED; /* out of memory: tried again after backoff */
        snprintf(a->msg, sizeof a->msg, "out of memory building runs/log-batch");
        return;
    }
    t->rest.stall_s = -1; /* waited for up to the total timeout (deliver.c, "Patience") */
    t->rest.say_s = b->say_s;
    t->rest.stalled = b->stalled;
    t->rest.stalled_arg = b->stalled_arg;
    sm__rest_once(&t->rest, "POST", "runs/log-batch", body, len, a);
    t->rest.stall_s = t->rest.say_s = 0; /* the handle's other requests: as they were */
    t->rest.stalled = NULL;
    free(body);
    if (a->outcome == SM_REST_RETRY && a->http == 0 && a->os_errno > 0)
        /* no answer: said by the socket's errno, as the MlflowClient
         * transport says it (answer.h) */
        sm__rest_answer_none(a, "runs/log-batch", t->rest.shown, a->os_errno, NULL);
}

static void transport_free(void *arg)
{
    rest_transport *t = arg;

    if (!t)
        return;
    sm__rest_free(&t->rest);
    free(t);
}

/* The run is checked once, before any window, over REST; deliver.c says
 * what the verdict means (the MlflowClient path asks its own way).
 *
 * The check costs the server what this rank's own points cost, not what the
 * run holds: the rank's node tag written first (runs/set-tag: the run is
 * there, active, and takes writes from these credentials:
 * sm__mlflow_check_write_on) and the histories of a few of the rank's
 * own keys (where its steps stopped, for a re-attach).  runs/get reads every
 * latest metric of the run: 1024 ranks starting each read 1024 x 11 (0.5 s
 * of the server each at the end, measured 2026-12-04), which kept a 4-worker
 * server from answering anything for minutes (docs/rest.md "The run check").
 * runs/get is asked only to say why a run is refused (missing, deleted).
 *
 * The run resolution's check, when it came with the settings
 * (sm_monitor_set_resolved: `scopemeter run` asked runs/get already, with
 * the run's status), is taken as it is; the write check still applies. */
static int check_run(rest_transport *t, sm_deliver *d, const sm_sink_config *cfg,
                     const sm_run_check *given, double bound, char *err, size_t errlen)
{
    double deadline = sm__now_mono() + bound;
    char why[512] = "";
    sm_run_check c;
    int rc, verdict;

    int taken = given->rank == cfg->rank && (given->outcome == SM_RUN_CHECK_RUN ||
                                             given->outcome == SM_RUN_CHECK_NO_ANSWER);

    if (taken) {
        verdict = sm__deliver_checked(d, given, err, errlen);
        if (verdict < 0 || given->outcome != SM_RUN_CHECK_RUN)
            return verdict; /* no answer in time: said; the points wait */
    }
    rc = sm__mlflow_check_write_on(&t->rest, t->run_id, cfg->rank, cfg->node_tag, deadline, why,
                                   sizeof why);
    if (!taken) {
        if (rc == 0) {
            long long last;

            rc = sm__mlflow_last_step_on(&t->rest, t->run_id, cfg->step_keys, cfg->nstep_keys,
                                         deadline, &last, why, sizeof why);
            memset(&c, 0, sizeof c);
            c.outcome = SM_RUN_CHECK_RUN;
            c.rank = cfg->rank;
            c.last_step = last;
            if (rc < 0)
                sm__run_check_failed(&c, rc, why, cfg->rank);
            return sm__deliver_checked(d, &c, err, errlen);
        }
        if (rc != -EACCES) {
            sm__run_check_failed(&c, rc, why, cfg->rank);
            if (c.outcome == SM_RUN_CHECK_REFUSED) {
                /* refused: runs/get says why as it always has (missing,
                 * deleted); a run it finds active refused for another
                 * reason keeps the refusal's own line */
                sm__mlflow_check_run_on(&t->rest, t->run_id, cfg->rank, deadline, &c);
                if (c.outcome == SM_RUN_CHECK_RUN) {
                    snprintf(err, errlen, "cannot record into run %s at %s: %s", t->run_id,
                             t->rest.shown, why);
                    return rc;
                }
            }
            return sm__deliver_checked(d, &c, err, errlen);
        }
    }
    /* Reading is not writing: credentials with READ only on the run's
     * experiment (MLflow's auth app) pass runs/get and would have every
     * window refused; the write check needs what the windows need, so a
     * 401/403 fails the start in one line.  Any other answer is left to the
     * windows' own lines. */
    if (rc == -EACCES) {
        snprintf(err, errlen, "cannot record into run %s at %s: these credentials may not "
                 "write to it (%s)", t->run_id, t->rest.shown, why);
        return -EACCES;
    }
    return 0;
}

int sm__sink_mlflow_new(const sm_sink_config *cfg, char *err, size_t errlen, sm_sink **out)
{
    const sm_rest_settings *set = cfg->settings;
    rest_transport *t;
    sm_deliver *d = NULL;
    int rc;

    *out = NULL;
    if (!set || !sm_mlflow_valid_run_id(set->run_id)) {
        char shown[84]; /* escaped (names.c): the line stays one line */
        snprintf(err, errlen, "not an MLflow run id: %s",
                 set ? sm__shown(shown, sizeof shown, set->run_id) : "(null)");
        return -EINVAL;
    }
    t = calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    snprintf(t->run_id, sizeof t->run_id, "%s", set->run_id);
    rc = sm__rest_init(&t->rest, cfg->target, err, errlen);
    if (rc < 0) {
        free(t);
        return rc;
    }
    rc = sm__rest_add_headers(&t->rest, (const char *const *)set->headers, err, errlen);
    if (rc == 0)
        rc = sm__deliver_new(t->run_id, t->rest.shown, &d);
    if (rc == 0)
        rc = sm__deliver_configure(d, cfg, err, errlen);
    if (rc == 0 && set->check_s >= 0)
        rc = check_run(t, d, cfg, &set->check,
                       set->check_s > 0 ? set->check_s : SM_DELIVER_CHECK_TIMEOUT_S, err, errlen);
    if (rc < 0)
        goto fail;
    t->rest.abort_flag = sm__deliver_abort_flag(d);
    t->rest.abort_deadline_ms = sm__deliver_deadline_ms(d);
    rc = sm__deliver_start_thread(d, post, t, transport_free, "scopemeter-ship");
    if (rc < 0) {
        snprintf(err, errlen, "cannot start the shipping thread");
        goto fail;
    }
    *out = sm__deliver_sink(d); /* the sink's reference; its close frees t */
    sm__deliver_unref(d);
    return 0;
fail:
    transport_free(t);
    sm__deliver_unref(d);
    return rc;
}

static void free_strv(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

void sm__rest_settings_free(void *settings)
{
    sm_rest_settings *set = settings;

    if (!set)
        return;
    free_strv(set->headers);
    sm__companion_settings_free(set);
    free(set);
}

int sm_monitor_set_run(sm_monitor *m, const char *tracking_uri, const char *run_id)
{
    sm_rest_settings *set;
    int rc;

    if (!m || !sm__rest_is_http(tracking_uri) || !sm_mlflow_valid_run_id(run_id))
        return -EINVAL;
    set = calloc(1, sizeof *set);
    if (!set)
        return -ENOMEM;
    snprintf(set->run_id, sizeof set->run_id, "%s", run_id);
    /* the monitor owns set from here on, even when it refuses it */
    rc = sm__monitor_set_sink_factory(m, sm__sink_mlflow_new, tracking_uri, set,
                                     sm__rest_settings_free);
    /* one recorder per rank and run (docs/design.md §9), unless the caller
     * names another key */
    if (rc == 0)
        rc = sm__monitor_default_recording_key(m, run_id);
    return rc;
}

int sm_monitor_set_resolved(sm_monitor *m, const char *tracking_uri, const sm_run_result *res)
{
    sm_rest_settings *set;
    int rc;

    if (!res)
        return -EINVAL;
    rc = sm_monitor_set_run(m, tracking_uri, res->run_id);
    set = rc == 0 ? sm__monitor_sink_settings(m, sm__sink_mlflow_new) : NULL;
    /* the check travels in the sink's settings, as the headers do */
    if (set && res->size >= offsetof(sm_run_result, check) + sizeof res->check)
        set->check = res->check;
    return rc;
}

/* Headers go into the REST sink's settings: after sm_monitor_set_run. */
int sm_monitor_set_headers(sm_monitor *m, const char *const *headers)
{
    sm_rest_settings *set = sm__monitor_sink_settings(m, sm__sink_mlflow_new);
    size_t n = 0;
    char **v;

    if (!set)
        return -EINVAL;
    while (headers && headers[n] && headers[n + 1])
        n += 2;
    if (headers && headers[n]) /* a name without a value */
        return -EINVAL;
    v = calloc(n + 1, sizeof *v);
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (!(v[i] = strdup(headers[i]))) {
            free_strv(v);
            return -ENOMEM;
        }
    free_strv(set->headers);
    set->headers = v;
    return 0;
}

/* The companion (companion.c) is a setting of this sink: after
 * sm_monitor_set_run, dropped with it, as the headers. */
int sm_monitor_set_companion(sm_monitor *m, const char *cli_path, unsigned flags)
{
    sm_rest_settings *set = sm__monitor_sink_settings(m, sm__sink_mlflow_new);
    char *p = NULL;
    int rc;

    if (!set) /* started (-EBUSY), or no REST sink chosen (-EINVAL): changes nothing */
        return sm__monitor_set_sink_hooks(m, sm__sink_mlflow_new, NULL, NULL) == -EBUSY ?
               -EBUSY : -EINVAL;
    if (flags & ~(unsigned)SM_COMPANION_OWNS_RUN)
        return -EINVAL;
    if (cli_path && cli_path[0] && !(p = strdup(cli_path)))
        return -ENOMEM;
    rc = sm__monitor_set_sink_hooks(m, sm__sink_mlflow_new, p ? sm__companion_started : NULL,
                                    p ? sm__companion_stopped : NULL);
    if (rc < 0) {
        free(p);
        return rc;
    }
    free(set->companion);
    set->companion = p;
    set->companion_owns = (flags & SM_COMPANION_OWNS_RUN) != 0;
    return 0;
}
