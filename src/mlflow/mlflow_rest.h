/*
 * mlflow_rest.h — talking to an MLflow tracking server over its REST API
 * (https://mlflow.org/docs/latest/rest-api.html), shared by the shipping
 * thread of the REST sink (sink_mlflow.c) and the CLI helpers
 * (mlflow_api.c).
 *
 * One sm_rest is one libcurl easy handle plus what every request carries:
 * the base URI, the Authorization header and the TLS settings, all read from
 * the environment the way MLflow's Python client reads them
 * (mlflow/utils/credentials.py, mlflow/utils/rest_utils.py):
 *
 *   MLFLOW_TRACKING_USERNAME + MLFLOW_TRACKING_PASSWORD  Basic (wins, as in MLflow)
 *     (each falls back to ~/.mlflow/credentials [mlflow] mlflow_tracking_username/_password)
 *   MLFLOW_TRACKING_TOKEN                Bearer
 *   MLFLOW_TRACKING_INSECURE_TLS=true    no certificate or host name verification
 *   MLFLOW_TRACKING_SERVER_CERT_PATH     CA bundle (requests' verify=PATH)
 *   MLFLOW_TRACKING_CLIENT_CERT_PATH     client certificate PEM, key in the same file
 *                                        (requests' cert=PATH)
 *   MLFLOW_HTTP_REQUEST_TIMEOUT          total seconds per request (default 120)
 *
 * A handle is used by one thread at a time (the thread that owns it).  The
 * Authorization value is a secret: it lives in the header list only, is never
 * formatted into a message, and is wiped on free.
 *
 * Implemented one job per file (rest_private.h holds what they share):
 * rest_http.c one request, rest_auth.c credentials, rest_tls.c the TLS
 * library and options, rest_retry.c the retry policy, rest_uri.c the URI.
 */
#ifndef SM_MLFLOW_REST_H
#define SM_MLFLOW_REST_H

#include <stdatomic.h>
#include <stddef.h>

#include <curl/curl.h>
#include <jansson.h>

#include "internal.h"
#include "scopemeter_mlflow.h"

/* MLflow's own limits (mlflow/utils/validation.py), from the one place
 * every surface reads them (scopemeter.h) */
#define SM_MLFLOW_MAX_METRICS SM_MLFLOW_BATCH_METRICS   /* MAX_METRICS_PER_BATCH */
#define SM_MLFLOW_MAX_TAGS SM_MLFLOW_BATCH_TAGS         /* MAX_PARAMS_TAGS_PER_BATCH */
#define SM_MLFLOW_MAX_ENTITIES SM_MLFLOW_BATCH_ENTITIES /* MAX_ENTITIES_PER_BATCH */
#define SM_MLFLOW_MAX_BODY 1000000      /* MAX_BATCH_LOG_REQUEST_SIZE, bytes */

typedef struct sm_rest {
    char base[2048];          /* tracking URI without trailing '/' (may hold userinfo) */
    char shown[512];          /* the same, redacted, for messages */
    const struct sm_curl_api *c; /* the libcurl h and headers belong to (curl_api.h) */
    CURL *h;
    struct curl_slist *headers; /* Content-Type, Expect:, Authorization (secret) */
    int insecure;
    int has_auth;             /* Authorization from the environment's credentials */
    char *ca_path, *client_cert, *proxy;
    long connect_timeout_s;
    long total_timeout_s;
    /* Abort: the transfer stops when *abort_flag is non-zero or the monotonic
     * clock passes *abort_deadline_ms (> 0, CLOCK_MONOTONIC milliseconds);
     * checked by the xferinfo callback. */
    atomic_int *abort_flag;
    atomic_llong *abort_deadline_ms;
    /* response being received */
    char *resp;
    size_t resp_len, resp_cap;
    double retry_after;       /* seconds from Retry-After, < 0 when absent */
    char errbuf[CURL_ERROR_SIZE];
    long last_http;           /* sm__rest_call: status of the last answer, 0 when none */
    char last_error_code[64]; /* sm__rest_call: MLflow's error_code of the last answer */
} sm_rest;

/* Outcome of one request. */
enum sm_rest_outcome {
    SM_REST_OK = 0,       /* 2xx */
    SM_REST_RETRY = 1,    /* connection error, 408, 429, 5xx: try again later */
    SM_REST_REFUSED = 2,  /* any other status: the server said no, do not retry */
    SM_REST_ABORTED = 3,  /* stopped by the abort flag or deadline */
    SM_REST_FAILED = 4,   /* local failure (out of memory, bad option) */
};

typedef struct sm_rest_result {
    int outcome;          /* enum sm_rest_outcome */
    long http;            /* HTTP status, 0 when there was no response */
    double retry_after;   /* seconds the server asked to wait, < 0 when it did not */
    json_t *body;         /* parsed response (NULL when not JSON); caller decrefs */
    char msg[512];        /* one line, no secrets: what went wrong */
    char error_code[64];  /* MLflow's error_code, "" when none */
    int os_errno;         /* no answer: the socket's errno (ECONNRESET for a connection
                           * closed without a reply), 0 when unknown */
} sm_rest_result;

/* Process-wide curl_global_init, once (thread-safe). */
SM_HIDDEN int sm__rest_global_init(void);

/* Reads auth/TLS/proxy/timeouts from the environment and creates the easy
 * handle.  uri must be http:// or https://.  -EINVAL with a line in err on a
 * bad URI or contradictory settings (insecure TLS together with a CA path,
 * as MLflow refuses it). */
SM_HIDDEN int sm__rest_init(sm_rest *r, const char *uri, char *err, size_t errlen);
SM_HIDDEN void sm__rest_free(sm_rest *r);
/* Extra headers on every request (NULL-terminated name, value pairs), as
 * MLflow's request-header providers add them; an Authorization among them is
 * skipped when the environment gave credentials (MLflow's own order).  A
 * name or value with a control character is -EINVAL (header injection). */
SM_HIDDEN int sm__rest_add_headers(sm_rest *r, const char *const *pairs, char *err,
                                  size_t errlen);

/* One request, no retry.  method "GET" or "POST"; endpoint relative to
 * <uri>/api/2.0/mlflow/ (e.g. "runs/log-batch", "runs/get?run_id=..");
 * body is the JSON text of a POST (NULL for GET). */
SM_HIDDEN int sm__rest_once(sm_rest *r, const char *method, const char *endpoint,
                           const char *body, size_t body_len, sm_rest_result *res);
SM_HIDDEN void sm__rest_result_clear(sm_rest_result *res);

/* The reply part of sm__rest_once(), pure: parses body (len bytes, not
 * NUL-terminated; NULL when len is 0) as JSON into res->body, and sets
 * res->http, res->outcome and, for a non-2xx status, res->msg and
 * res->error_code (one line, from MLflow's error JSON or the start of the
 * body).  res starts cleared (zeroed, or sm__rest_result_clear); the caller
 * clears it after. */
SM_HIDDEN void sm__rest_parse_reply(const char *endpoint, long http, const char *body,
                                   size_t len, sm_rest_result *res);

/* Retry loop for one-off calls (CLI helpers): repeats SM_REST_RETRY outcomes
 * with backoff until the monotonic deadline.  Returns the last outcome; on
 * SM_REST_OK, *resp (if not NULL) receives the response body (caller
 * decrefs).  err gets one line on failure. */
SM_HIDDEN int sm__rest_call(sm_rest *r, const char *method, const char *endpoint,
                           json_t *req, json_t **resp, double deadline, char *err,
                           size_t errlen);

/* A cancel hook for the calls this thread makes (thread-local: the REST
 * sink's thread never sees it): while set, a request in flight is aborted and
 * a retry wait ends as soon as fn(arg) returns non-zero, and sm__rest_call
 * returns SM_REST_ABORTED with "cancelled".  sm_mlflow_resolve sets it to
 * the caller's sm_run_request.cancelled for its own calls.  NULL clears. */
SM_HIDDEN void sm__rest_set_cancel(int (*fn)(void *arg), void *arg);

/* Delay before retry number `attempt` (0-based): the server's Retry-After
 * when given (capped at 10 min), else exponential backoff with full jitter,
 * uniform in [0, min(cap_s, base_s * 2^attempt)].  *seed is the caller's
 * PRNG state (no global state). */
SM_HIDDEN double sm__rest_backoff(int attempt, double retry_after, double base_s, double cap_s,
                                 uint64_t *seed);
SM_HIDDEN uint64_t sm__rest_seed(const void *salt);

/* Retry-After value: delta-seconds or an HTTP-date.  Returns seconds from
 * now (>= 0), or -1 when it cannot be parsed. */
SM_HIDDEN double sm__rest_parse_retry_after(const char *v, long now_epoch);

/* "scheme://host[:port]/path" with any userinfo replaced by "***" and the
 * query dropped (tokens hide there too).  Always NUL-terminates out. */
SM_HIDDEN void sm__rest_redact(const char *uri, char *out, size_t outlen);

/* Is the string an http:// or https:// URI (case-insensitive)? */
SM_HIDDEN int sm__rest_is_http(const char *uri);

/* URL-encode for a query value; returns 0 or -ENOSPC. */
SM_HIDDEN int sm__rest_escape(sm_rest *r, const char *in, char *out, size_t outlen);


/* mlflow_api.c: runs/get on an open handle until the monotonic deadline;
 * 0 (status_out gets RUNNING, FINISHED, ...), -ENOENT for a missing or
 * deleted run, else as the public helpers (scopemeter_mlflow.h).  With
 * last_step, also the largest step among the run's system metrics of `rank`
 * (keys system/.../rankN; -1 when it has none): a re-attached monitor
 * continues after it (docs/design.md §3). */
SM_HIDDEN int sm__mlflow_get_run_on(sm_rest *r, const char *run_id, char *status_out,
                                   size_t status_len, int rank, int64_t *last_step,
                                   double deadline, char *err, size_t errlen);

/* mlflow_api.c: sm_mlflow_get_run (scopemeter_mlflow.h) with the last
 * step of rank's system metrics as sm__mlflow_get_run_on gives it. */
SM_HIDDEN int sm__mlflow_get_run_steps(const char *uri, const char *run_id, char *status_out,
                                      size_t status_len, int rank, int64_t *last_step,
                                      double timeout_s, char *err, size_t errlen);

/* mlflow_run.c: the run check sm_mlflow_resolve_run made on this thread
 * when it attached to a given run (runs/get: the run's status and the
 * rank's last system step), for the REST sink this thread starts next on
 * the same URI, run and rank (sm_monitor_start calls the sink's constructor
 * on the caller's thread), so that `scopemeter run --run-id` asks runs/get
 * once.  1 with the check's outcome in *rc (0: answered, status and
 * *last_step set; negative: no answer within its bound, why says so), and
 * the check is used up; 0 when none matches or it is too old to trust (the
 * sink then asks itself). */
SM_HIDDEN int sm__mlflow_take_run_check(const char *uri, const char *run_id, int rank, int *rc,
                                       char *status, size_t status_len, int64_t *last_step,
                                       char *why, size_t why_len);
/* mlflow_api.c: what runs/get's "run" object says, however it was asked
 * (the MlflowClient path hands its Run as the same JSON): 0 with its status
 * and the largest step of this rank's system metrics (-1 none), or -ENOENT
 * with the line in err for a deleted run, and for run NULL (the store said
 * RESOURCE_DOES_NOT_EXIST). */
SM_HIDDEN int sm__mlflow_run_state(json_t *run, const char *run_id, const char *shown, int rank,
                                  char *status_out, size_t status_len, int64_t *last_step,
                                  char *err, size_t errlen);

/* mlflow_api.c: whether these credentials may write to the run: runs/update
 * naming only the run (MLflow >= 2.3 changes only the fields a request
 * gives, so nothing changes) needs the permission log-batch needs.  0, or
 * -EACCES (401/403) with err set, else as the public helpers. */
SM_HIDDEN int sm__mlflow_check_write_on(sm_rest *r, const char *run_id, double deadline,
                                       char *err, size_t errlen);

/* sink_mlflow.c: the REST sink's settings, opaque to the monitor
 * (sm_sink_config.settings): built by sm_monitor_set_run, changed by
 * sm_monitor_set_headers, freed with sm__rest_settings_free. */
typedef struct sm_rest_settings {
    char run_id[260];
    char **headers;   /* NULL or NULL-terminated name, value pairs (owned) */
    double check_s;   /* bound of the run check at start: 0 the default, < 0 none */
} sm_rest_settings;
SM_HIDDEN void sm__rest_settings_free(void *settings);

/* sink_mlflow.c: the REST sink's constructor (an sm_sink_factory). */
struct sm_sink;
struct sm_sink_config;
SM_HIDDEN int sm__sink_mlflow_new(const struct sm_sink_config *cfg, char *err, size_t errlen,
                                 struct sm_sink **out);

#endif
