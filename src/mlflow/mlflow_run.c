/*
 * mlflow_run.c — which MLflow run a process records into (docs/cli.md,
 * docs/design.md §4): the run resolution `scopemeter run` does before CMD
 * starts, in the library so that any surface can share it.
 *
 *   1. --run-id, else MLFLOW_RUN_ID (unless --experiment asks for a new run:
 *      an explicit flag beats a variable left over in the environment, and
 *      the ignored variable is said): attach after one check (runs/get);
 *   2. ranks > 0 of a multi-process job: the run rank 0 created, found by the
 *      job's id (TORCHELASTIC_RUN_ID, Slurm's job and step) in a run tag;
 *   3. a torchelastic restart of the job: the job's run while it is RUNNING;
 *   4. else a new run in --experiment, MLFLOW_EXPERIMENT_NAME,
 *      MLFLOW_EXPERIMENT_ID or Default, tagged with the job id.
 * Every outcome is one line: what is attached to and why.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mlflow_rest.h"
#include "sink.h"

#define JOB_TAG "scopemeter.job_id"
#define OWNER_TAG "scopemeter.owner"
#define CHECK_BOUND_S 5.0

/* The launcher's id of this job, shared by all its ranks: TORCHELASTIC_RUN_ID
 * (torchrun's rendezvous id; "none" is torchrun's default for a multi-node
 * static rendezvous and identifies nothing), else Slurm's job and step. */
static int job_key(char *out, size_t len)
{
    const char *t = getenv("TORCHELASTIC_RUN_ID");
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
    char raw[300];

    /* the tag's value, the search's and the lines' are the id escaped
     * (names.c): one text, which a table prints on one row */
    if (t && *t && strcmp(t, "none") != 0) {
        snprintf(raw, sizeof raw, "torchelastic:%s", t);
        sm__shown(out, len, raw);
        return 1;
    }
    if (job && *job) {
        snprintf(raw, sizeof raw, "slurm:%s.%s", job, step && *step ? step : "0");
        sm__shown(out, len, raw);
        return 1;
    }
    out[0] = '\0';
    return 0;
}

/* A restart of the same job: torchelastic counts its restarts in
 * TORCHELASTIC_RESTART_COUNT (0 on the first attempt). */
static int restarted(void)
{
    const sm_num_spec spec = {"TORCHELASTIC_RESTART_COUNT", 0, INT_MAX, 1, 0};
    double n;

    return sm__env_number(spec.name, &spec, &n, "taken as 0 (a first attempt)", NULL) > 0 &&
           n > 0;
}

/* A job id the runs/search filter can quote. */
static int quotable(const char *s)
{
    return !strpbrk(s, "'\\");
}

/* 1: a given run id, checked once (a mistyped id would record into nothing;
 * a server that is down delays CMD by CHECK_BOUND_S once, then points
 * wait).  The check goes out with the result (out->check): the REST sink
 * that sm_monitor_set_resolved gives it says more at start (an ended run,
 * steps continued, no answer) from the same answer: one runs/get.  A check
 * the server did not answer within its bound goes too: asking again would
 * hold CMD back a second bound for a server just found down. */
static int attach(const sm_run_request *q, const char *given, const char *why,
                  sm_run_result *out, double t)
{
    sm_run_check c;

    sm__mlflow_check_run(q->tracking_uri, given, q->id->rank, t < CHECK_BOUND_S ? t : CHECK_BOUND_S,
                         &c);
    if (c.outcome != SM_RUN_CHECK_RUN && q->cancelled && q->cancelled(q->cancel_arg))
        return -ECANCELED; /* the caller says why it stopped */
    if (c.outcome == SM_RUN_CHECK_REFUSED) { /* as the sink's start refuses it */
        sm__log(SM_INFO, "%s (%s); not recording into it", c.why, why);
        return c.error;
    }
    if (c.outcome == SM_RUN_CHECK_RUN)
        sm__log(SM_INFO, "recording into run %s (%s, %s)", given, why, c.status);
    else /* the no-answer case is said once, by the sink that takes the check */
        sm__log(SM_INFO, "recording into run %s (%s, not checked: no answer)", given, why);
    out->check = c;
    snprintf(out->run_id, sizeof out->run_id, "%s", given);
    return 0;
}

/* 2: ranks > 0 find the newest RUNNING run with the job's tag, the one rank 0
 * created (or is creating) for this job. */
static int find_rank0_run(const sm_run_request *q, const char *exp_id, const char *job,
                          sm_run_result *out, double t)
{
    char err[600] = "";
    double deadline = sm__now_mono() + t, pause = 0.25;
    int rc;

    for (;;) {
        rc = sm_mlflow_find_run(q->tracking_uri, exp_id, JOB_TAG, job, out->run_id,
                                sizeof out->run_id, deadline - sm__now_mono(), err, sizeof err);
        if (rc == 0) {
            sm__log(SM_INFO, "rank %d: recording into run %s, rank 0's run of job %s",
                   q->id->rank, out->run_id, job);
            return 0;
        }
        if (rc != -ENOENT || sm__now_mono() + pause >= deadline ||
            (q->cancelled && q->cancelled(q->cancel_arg)))
            break;
        sm__sleep(pause);
        pause = pause < 2 ? pause * 2 : 2;
    }
    out->run_id[0] = '\0';
    sm__log(SM_INFO, "rank %d: rank 0's run for job %s not found within %g s (%s); CMD runs, "
           "this rank records into no run", q->id->rank, job, t, err);
    return rc < 0 ? rc : -ENOENT;
}

/* scopemeter.owner: the process that ends the run, "rank=0 pid=4242" as the
 * spool header names its writer.  `scopemeter sync` ends a run still RUNNING
 * only when the spool it delivered was this process's (docs/cli.md): a run
 * another process opened is that process's to end. */
static void owner_of(const sm_run_request *q, char *out, size_t cap)
{
    snprintf(out, cap, "rank=%d pid=%ld", q->id ? q->id->rank : 0, (long)getpid());
}

/* 4: a new run in exp_id, tagged with its source and, for a job of several
 * ranks, the job's id (what ranks > 0 and a restart look for). */
static int create_run(const sm_run_request *q, const char *exp_id, const char *job,
                      sm_run_result *out, double t)
{
    char err[600], shown[512], owner[64];
    const char *tags[11];
    int n = 0, rc;

    owner_of(q, owner, sizeof owner);
    tags[n++] = OWNER_TAG;
    tags[n++] = owner;
    tags[n++] = "mlflow.source.name";
    tags[n++] = q->source_name && *q->source_name ? q->source_name : "scopemeter";
    tags[n++] = "mlflow.source.type";
    tags[n++] = "LOCAL";
    if (job) {
        tags[n++] = JOB_TAG;
        tags[n++] = job;
    }
    tags[n] = NULL;
    rc = sm_mlflow_create_run(q->tracking_uri, exp_id, NULL, tags, out->run_id,
                              sizeof out->run_id, t, err, sizeof err);
    sm_mlflow_redact_uri(q->tracking_uri, shown, sizeof shown);
    if (rc < 0) {
        out->run_id[0] = '\0';
        sm__log(SM_INFO, "cannot create an MLflow run at %s: %s", shown, err);
        return rc;
    }
    out->owns_run = 1;
    sm__log(SM_INFO, "created run %s in experiment %s at %s", out->run_id, exp_id, shown);
    return 0;
}

static int resolve(const sm_run_request *q, sm_run_result *out);

/* The caller's cancel (scopemeter run: a SIGTERM before CMD starts) reaches
 * every request and retry wait of the resolution, not only the waits for rank
 * 0's run: a server that is down must not hold a SIGTERM for the whole
 * --startup-timeout. */
/* The first sized layouts (scopemeter_mlflow.h), frozen. */
#define REQUEST_SIZE_MIN (offsetof(sm_run_request, cancel_arg) + sizeof(void *))
#define RESULT_SIZE_MIN (offsetof(sm_run_result, owns_run) + sizeof(int))

int sm_mlflow_resolve(const sm_run_request *req, sm_run_result *out)
{
    sm_run_request q = SM_RUN_REQUEST_INIT;
    sm_run_result r = SM_RUN_RESULT_INIT;
    int rc;

    if (!req || !out || sm_sized_in(&q, sizeof q, req, REQUEST_SIZE_MIN) < 0 ||
        out->size < RESULT_SIZE_MIN)
        return -EINVAL;
    if (q.cancelled)
        sm__rest_set_cancel(q.cancelled, q.cancel_arg);
    rc = resolve(&q, &r);
    sm__rest_set_cancel(NULL, NULL);
    sm_sized_out(out, &r, sizeof r, RESULT_SIZE_MIN);
    return rc;
}

/* 0.1's entry point and layouts (src/api/compat.c says why): no size field, the
 * identity a 0.1 struct of SM_IDENTITY_V0_SIZE bytes, which resolve reads
 * no further than. */
typedef struct {
    const char *tracking_uri, *run_id, *experiment, *source_name;
    const sm_identity *id;
    double timeout_s;
    int (*cancelled)(void *arg);
    void *cancel_arg;
} run_request_0_1;
typedef struct {
    char run_id[300];
    int owns_run;
} run_result_0_1;
SM_EXTERN int sm_mlflow_resolve_run(const run_request_0_1 *q, run_result_0_1 *out);

int sm_mlflow_resolve_run(const run_request_0_1 *q, run_result_0_1 *out)
{
    sm_run_result r = SM_RUN_RESULT_INIT;
    int rc;

    if (!q || !out)
        return -EINVAL;
    /* 0.1 read timeout_s <= 0 as "at once", never as the default */
    sm_run_request n = {sizeof n, q->tracking_uri, q->run_id, q->experiment, q->source_name,
                        q->id, q->timeout_s > 0 ? q->timeout_s : 0, q->cancelled,
                        q->cancel_arg};
    rc = sm_mlflow_resolve(&n, &r);
    memset(out, 0, sizeof *out);
    memcpy(out->run_id, r.run_id, sizeof out->run_id);
    out->owns_run = r.owns_run;
    return rc;
}

static int resolve(const sm_run_request *q, sm_run_result *out)
{
    char err[600], exp_id[128], job[300];
    const char *env_run = getenv("MLFLOW_RUN_ID");
    const char *exp_name, *exp_env_id;
    double t;
    int have_job, rc;

    if (!q || !out || !q->id || !sm__rest_is_http(q->tracking_uri))
        return -EINVAL;
    memset(out, 0, sizeof *out);
    t = q->timeout_s == SM_DEFAULT ? 30.0 : q->timeout_s > 0 ? q->timeout_s : 0.001;
    if (q->run_id && *q->run_id)
        return attach(q, q->run_id, "--run-id", out, t);
    if (env_run && *env_run && q->experiment && *q->experiment) {
        char id[104], exp[104];
        sm__log(SM_INFO, "MLFLOW_RUN_ID=%s is ignored: --experiment %s asks for a new run",
               sm__shown(id, sizeof id, env_run), sm__shown(exp, sizeof exp, q->experiment));
    }
    else if (env_run && *env_run)
        return attach(q, env_run, "MLFLOW_RUN_ID", out, t);

    exp_name = q->experiment ? q->experiment : getenv("MLFLOW_EXPERIMENT_NAME");
    exp_env_id = q->experiment ? NULL : getenv("MLFLOW_EXPERIMENT_ID");
    have_job = job_key(job, sizeof job) && quotable(job);
    rc = sm_mlflow_experiment(q->tracking_uri, exp_name, exp_env_id, exp_id, sizeof exp_id, t,
                              err, sizeof err);
    if (rc < 0) {
        sm__log(SM_INFO, "no MLflow experiment to create the run in: %s", err);
        return rc;
    }

    if (q->id->world_size > 1 && q->id->rank != 0) {
        if (!have_job) {
            sm__log(SM_INFO, "rank %d of %d: no run to share — set MLFLOW_RUN_ID for every rank "
                   "(or launch with torchrun --standalone / --rdzv-id, or under Slurm, so the "
                   "job has an id); CMD runs, this rank records into no run", q->id->rank,
                   q->id->world_size);
            return -ENOENT;
        }
        return find_rank0_run(q, exp_id, job, out, t);
    }

    if (have_job && q->id->world_size > 1 && restarted()) {
        /* a torchelastic restart continues the job's run while it is
         * RUNNING.  A first attempt never does: the job id repeats across
         * jobs (a fixed --rdzv-id), and two jobs must not mix. */
        rc = sm_mlflow_find_run(q->tracking_uri, exp_id, JOB_TAG, job, out->run_id,
                                sizeof out->run_id, t, err, sizeof err);
        if (rc == 0) {
            char owner[64];
            out->owns_run = 1; /* rank 0 of the job ends the job's run */
            owner_of(q, owner, sizeof owner); /* this process now: sync must not end it */
            if (sm_mlflow_set_tag(q->tracking_uri, out->run_id, OWNER_TAG, owner, t, err,
                                  sizeof err) < 0)
                sm__log(SM_INFO, "cannot tag run %s with its new owner (%s): `scopemeter sync` "
                        "of the old owner's spool may end it", out->run_id, err);
            sm__log(SM_INFO, "continuing run %s of job %s (a restart)", out->run_id, job);
            return 0;
        }
    }

    return create_run(q, exp_id, have_job && q->id->world_size > 1 ? job : NULL, out, t);
}
