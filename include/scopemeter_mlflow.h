/*
 * scopemeter_mlflow.h — the MLflow part of libscopemeter (libscopemeter.so
 * only; src/mlflow/, docs/rest.md): the REST sink and the JSONL sink of a
 * monitor, the REST calls `scopemeter run` makes around a monitor, and the
 * run resolution it uses.  Needs libcurl and jansson at link time; the core
 * (scopemeter.h) does not.
 */
#ifndef SCOPEMETER_MLFLOW_H
#define SCOPEMETER_MLFLOW_H

#include "scopemeter.h"

#ifdef __cplusplus
extern "C" {
#endif

/* REST sink (libscopemeter.so, src/mlflow/): tracking URI (http:// or https://)
 * and run id.  At start the sink checks the run once (runs/get, at most 5 s):
 * a run that does not exist or is deleted makes sm_monitor_start() return
 * -ENOENT with a line in err; a server that does not answer is said in one
 * line and the points wait for it. */
SM_EXTERN int sm_monitor_set_run(sm_monitor *m, const char *tracking_uri, const char *run_id);
/* REST sink: extra HTTP headers on every request (e.g. those MLflow's
 * request-header provider plugins add), a NULL-terminated list of name,
 * value pairs, copied.  An Authorization header from the environment's
 * credentials wins over one given here, as in MLflow's client.  Values are
 * never printed.  Call it after sm_monitor_set_run (-EINVAL before: the
 * headers belong to that sink's settings). */
SM_EXTERN int sm_monitor_set_headers(sm_monitor *m, const char *const *headers);
/* REST sink: the companion (docs/monitor.md, docs/design.md §7): the
 * recording outlives this process.  cli_path is the `scopemeter` CLI's
 * (only the program knows where it is installed); NULL or "" turns it off.
 * Call it after sm_monitor_set_run or sm_monitor_set_resolved (-EINVAL
 * before, or with unknown flags: the companion belongs to that sink's
 * settings) and before sm_monitor_start (-EBUSY after).  Once the start
 * succeeds, the monitor starts `cli_path companion` as this process's child
 * (posix_spawn: safe in a multi-threaded caller; in its cgroup), with a
 * pipe on its stdin whose write end is O_CLOEXEC here.  It records nothing
 * while this process lives; if the process dies without sm_monitor_stop
 * (an OOM kill, SIGKILL, _exit) it writes the rank's end tags the cgroup
 * kept, scopemeter.rankN.ended_by=companion and .end_reason, and, with
 * SM_COMPANION_OWNS_RUN (this process created the run and ends it: not a
 * worker attached to its launcher's or rank 0's run), ends the run if still
 * RUNNING (KILLED, FAILED or FINISHED by how it died, run tag
 * scopemeter.end_reason).  sm_monitor_stop, after its flush, writes "stop"
 * to it and reaps it (it exits at once; 2 s, then SIGKILL).  A companion
 * that cannot start is one line and the monitor records anyway;
 * SCOPEMETER_COMPANION=0 in the environment turns it off.  It reaches the
 * store with the environment's credentials and TLS settings (as
 * `scopemeter run`); headers of sm_monitor_set_headers are not its. */
#define SM_COMPANION_OWNS_RUN 1u
SM_EXTERN int sm_monitor_set_companion(sm_monitor *m, const char *cli_path, unsigned flags);
/* JSONL sink: every record as one JSON object per line, appended to path
 * by the sink's own thread; the closing line says how many were written
 * (docs/cli.md).  The file is opened at start: a path that cannot be opened
 * makes sm_monitor_start() fail with a line in err. */
SM_EXTERN int sm_monitor_set_jsonl(sm_monitor *m, const char *path);

/* ---------------------------------------------------------------------------
 * MLflow REST helpers (libscopemeter.so only; src/mlflow/, docs/rest.md): the
 * calls `scopemeter run` makes around a monitor, for native programs that
 * manage their own run.  tracking_uri is http(s)://host[:port][/prefix];
 * authentication and TLS come from the environment exactly as for MLflow's
 * Python client (MLFLOW_TRACKING_TOKEN, MLFLOW_TRACKING_USERNAME/PASSWORD,
 * MLFLOW_TRACKING_INSECURE_TLS, MLFLOW_TRACKING_SERVER_CERT_PATH,
 * MLFLOW_TRACKING_CLIENT_CERT_PATH); proxies from http_proxy/https_proxy/
 * no_proxy.  Each call retries connection errors, 408, 429 (honouring
 * Retry-After) and 5xx with backoff until timeout_s (<= 0: 30 s) and returns
 * 0, or:
 *   -ETIMEDOUT  the server did not answer successfully in time
 *   -ENOENT     the experiment or run does not exist (or is deleted)
 *   -EEXIST     it exists already (create)
 *   -EACCES     HTTP 401/403
 *   -EPROTO     any other refusal (the server's message is in err)
 *   -EIO        a local failure, or a TLS or URL problem (libcurl's message)
 *   -ENOSPC     an id does not fit the caller's buffer
 *   -ENOMEM     out of memory
 *   -EINVAL     a bad argument (not an http(s) URI, not a run id, ...)
 * with one line in err (never a credential).
 * ------------------------------------------------------------------------- */

/* The experiment to create runs in: `name` (created when missing, as
 * mlflow.set_experiment does), else `id` (checked), else "0" (Default). */
SM_EXTERN int sm_mlflow_experiment(const char *tracking_uri, const char *name, const char *id,
                                   char *id_out, size_t id_len, double timeout_s, char *err,
                                   size_t errlen);

/* runs/create in experiment_id; run_name may be NULL (the server picks one);
 * tags is NULL or a NULL-terminated list of key, value pairs. */
SM_EXTERN int sm_mlflow_create_run(const char *tracking_uri, const char *experiment_id,
                                   const char *run_name, const char *const *tags,
                                   char *run_id_out, size_t run_id_len, double timeout_s,
                                   char *err, size_t errlen);

/* The newest RUNNING run of experiment_id whose tag `tag_key` equals
 * `tag_value` (runs/search); -ENOENT when there is none yet. */
SM_EXTERN int sm_mlflow_find_run(const char *tracking_uri, const char *experiment_id,
                                 const char *tag_key, const char *tag_value, char *run_id_out,
                                 size_t run_id_len, double timeout_s, char *err, size_t errlen);

/* runs/get: status_out receives RUNNING, FINISHED, FAILED, KILLED or
 * SCHEDULED (may be NULL); a deleted run is -ENOENT. */
SM_EXTERN int sm_mlflow_get_run(const char *tracking_uri, const char *run_id, char *status_out,
                                size_t status_len, double timeout_s, char *err, size_t errlen);

/* runs/set-tag */
SM_EXTERN int sm_mlflow_set_tag(const char *tracking_uri, const char *run_id, const char *key,
                                const char *value, double timeout_s, char *err, size_t errlen);

/* runs/update with status FINISHED, FAILED or KILLED and end_time = now. */
SM_EXTERN int sm_mlflow_end_run(const char *tracking_uri, const char *run_id, const char *status,
                                double timeout_s, char *err, size_t errlen);

/* The URI with userinfo replaced by "***" and any query dropped: the form to
 * print.  Always NUL-terminates out. */
SM_EXTERN void sm_mlflow_redact_uri(const char *uri, char *out, size_t outlen);

/* 1 when id is a string MLflow accepts as a run id (its rule,
 * mlflow/utils/validation.py _validate_run_id: [a-zA-Z0-9][\w-]{0,255}),
 * else 0.  "../x", "a/b" and "x?y=1" are not: they would name another
 * endpoint or be refused by every store. */
SM_EXTERN int sm_mlflow_valid_run_id(const char *id);

/* Whether https tracking URIs can be reached: 0, with out naming the
 * libcurl that does TLS and where it comes from ("built in", or the path of
 * the module scopemeter-https.so, loaded here if it was not); < 0 with out
 * saying why not.  An http URI never needs it (src/mlflow/curl_api.c). */
SM_EXTERN int sm_mlflow_tls(char *out, size_t outlen);

/* ---------------------------------------------------------------------------
 * Run resolution (src/mlflow/mlflow_run.c, docs/cli.md): the run a process
 * records into, as `scopemeter run` finds it before CMD starts.  In order:
 * run_id; MLFLOW_RUN_ID (ignored, with one line, when experiment is given:
 * the explicit flag wins); for ranks > 0 of a job, the run rank 0 created
 * (by the job's id: TORCHELASTIC_RUN_ID, SLURM_JOB_ID.SLURM_STEP_ID); for a
 * torchelastic restart, the job's RUNNING run; else a new run in experiment,
 * MLFLOW_EXPERIMENT_NAME, MLFLOW_EXPERIMENT_ID or Default.  Every outcome is
 * one line (through sm_set_log_handler's handler when set).
 * ------------------------------------------------------------------------- */
typedef struct sm_run_request {
    size_t size;               /* SM_RUN_REQUEST_INIT: sizeof(sm_run_request) */
    const char *tracking_uri;  /* http(s) */
    const char *run_id;        /* an explicit run, or NULL */
    const char *experiment;    /* an explicit experiment name, or NULL */
    const char *source_name;   /* mlflow.source.name of a new run (CMD's name) */
    const sm_identity *id;     /* rank, world size (sm_identity_read_env) */
    double timeout_s;          /* bound on all the calls; SM_DEFAULT: 30 s */
    int (*cancelled)(void *arg); /* polled during every call and wait; may be NULL */
    void *cancel_arg;
} sm_run_request;
#define SM_RUN_REQUEST_INIT {sizeof(sm_run_request), NULL, NULL, NULL, NULL, NULL, SM_DEFAULT, \
                             NULL, NULL}

/* The run check (runs/get) of a given run: what the store said of it, as a
 * value.  The resolution makes it when it attaches to a given run and hands
 * it to the REST sink with sm_monitor_set_resolved, whose start then does not
 * ask runs/get again (docs/rest.md); the sink makes its own otherwise. */
enum sm_run_check_outcome {
    SM_RUN_CHECK_NONE = 0,      /* no check was made (a run found or created) */
    SM_RUN_CHECK_RUN = 1,       /* the store answered with the run: status, last_step */
    SM_RUN_CHECK_REFUSED = 2,   /* missing or deleted, credentials refused, a bad request
                                 * or answer, a TLS or URL problem: not recorded into */
    SM_RUN_CHECK_NO_ANSWER = 3, /* no answer within its bound: points wait for the store */
};
typedef struct sm_run_check {
    int outcome;               /* enum sm_run_check_outcome */
    int error;                 /* REFUSED, NO_ANSWER: the REST helpers' code (above) */
    long http;                 /* runs/get's HTTP status, 0 when none */
    int rank;                  /* whose system steps last_step counts */
    long long last_step;       /* RUN: the largest step of that rank's system metrics, -1 none */
    char status[32];           /* RUN: RUNNING, FINISHED, ... */
    char why[600];             /* REFUSED, NO_ANSWER: the line */
} sm_run_check;

typedef struct sm_run_result {
    size_t size;               /* SM_RUN_RESULT_INIT: sizeof(sm_run_result) */
    char run_id[300];          /* MLflow's run ids are at most 256 characters */
    int owns_run;              /* created here (or a restart's rank 0): the caller ends it */
    sm_run_check check;        /* a given run's check (SM_RUN_CHECK_NONE otherwise) */
} sm_run_result;
#define SM_RUN_RESULT_INIT {sizeof(sm_run_result), "", 0, {0}}

/* 0 with out->run_id, or a negative code (no run: -ENOENT, -ETIMEDOUT, ...,
 * as the REST helpers) after the line that says why.  Reads req->size
 * bytes of req, writes out->size bytes of out (top of scopemeter.h);
 * -EINVAL for a size below this header's (the first sized one). */
SM_EXTERN int sm_mlflow_resolve(const sm_run_request *req, sm_run_result *out);

/* sm_monitor_set_run for the run res names, with the check res carries: a
 * check of the monitor's rank (SM_RUN_CHECK_RUN or _NO_ANSWER) is the REST
 * sink's check at start, said by it, with no runs/get of its own.  res is
 * what sm_mlflow_resolve gave for the same tracking_uri; a res whose size
 * does not cover the check is sm_monitor_set_run. */
SM_EXTERN int sm_monitor_set_resolved(sm_monitor *m, const char *tracking_uri,
                                      const sm_run_result *res);

#ifdef __cplusplus
}
#endif
#endif /* SCOPEMETER_MLFLOW_H */
