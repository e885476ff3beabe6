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

#include "answer.h"
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
    long stall_s;             /* a transfer that moves no byte this long is given up
                               * (CURLOPT_LOW_SPEED_TIME); 0: 10 s; < 0: only the
                               * total timeout gives it up */
    /* A transfer that moves no byte for say_s (> 0) calls stalled(stalled_arg,
     * seconds) once, from inside the transfer (the calling thread), and goes
     * on: the caller says a slow server without sending its request again
     * (deliver.c, "Patience"). */
    long say_s;
    void (*stalled)(void *arg, double waited_s);
    void *stalled_arg;
    double moved_at;          /* monotonic s of the transfer's last byte (on_progress) */
    long long moved;          /* bytes moved by then, both ways */
    int said;                 /* stalled() was called for this transfer */
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
} sm_rest;

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
/* rest_auth.c: wipes and frees a string that may hold a secret (NULL ok);
 * the wipe survives the compiler (a plain memset before free() is a dead
 * store it may drop). */
SM_HIDDEN void sm__rest_free_secret(char *s);

/* One request, no retry.  method "GET" or "POST"; endpoint relative to
 * <uri>/api/2.0/mlflow/ (e.g. "runs/log-batch", "runs/get?run_id=..");
 * body is the JSON text of a POST (NULL for GET). */
SM_HIDDEN int sm__rest_once(sm_rest *r, const char *method, const char *endpoint,
                           const char *body, size_t body_len, sm_rest_result *res);

/* Retry loop for one-off calls (CLI helpers): repeats SM_REST_RETRY outcomes
 * with backoff until the monotonic deadline.  res (cleared by the caller
 * after) receives the last answer: its outcome (returned too), status,
 * error_code and, on SM_REST_OK, its body (an empty object when the answer
 * had none).  err gets the call's one line on failure. */
SM_HIDDEN int sm__rest_call(sm_rest *r, const char *method, const char *endpoint,
                           json_t *req, sm_rest_result *res, double deadline, char *err,
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

/* "scheme://host[:port]/path" with any userinfo replaced by "***" and the
 * query dropped (tokens hide there too).  Always NUL-terminates out. */
SM_HIDDEN void sm__rest_redact(const char *uri, char *out, size_t outlen);

/* Is the string an http:// or https:// URI (case-insensitive)? */
SM_HIDDEN int sm__rest_is_http(const char *uri);

/* URL-encode for a query value; returns 0 or -ENOSPC. */
SM_HIDDEN int sm__rest_escape(sm_rest *r, const char *in, char *out, size_t outlen);


/* mlflow_api.c: the run check (answer.h's verdict) of run_id on an open
 * handle, runs/get until the monotonic deadline; with the largest step of
 * rank's system metrics (keys system/.../rankN): a re-attached monitor
 * continues after it (docs/design.md §1). */
SM_HIDDEN void sm__mlflow_check_run_on(sm_rest *r, const char *run_id, int rank, double deadline,
                                      sm_run_check *c);
/* mlflow_api.c: runs/get: the run's status and the value of its tag key
 * ("" when absent); 0, or < 0 with err (no answer, no such run). */
SM_HIDDEN int sm__mlflow_run_status_tag(const char *uri, const char *run_id, const char *key,
                                        char *status, size_t status_len, char *value,
                                        size_t value_len, double timeout_s, char *err,
                                        size_t errlen);
/* mlflow_api.c: the same on a handle of its own for uri, within timeout_s. */
SM_HIDDEN void sm__mlflow_check_run(const char *uri, const char *run_id, int rank,
                                   double timeout_s, sm_run_check *c);

/* mlflow_api.c: whether the run takes writes from these credentials: the
 * rank's start tag scopemeter.rankN.node (node: its value, as the start tags
 * write it moments later) with runs/set-tag, which needs the permission
 * log-batch needs (MLflow's auth app: EDIT) and an active run, and touches
 * one row in one database session.  Not runs/get or a no-op runs/update,
 * which read every latest metric of the run (at 1024 ranks of 11 series
 * 0.52 and 0.33 s of the server each), nor an empty log-inputs or
 * log-batch, which open a second session inside the first: 256 at once
 * held every pooled connection of a 4-worker server waiting for another
 * (docs/rest.md "The run check", measured 2026-12-04).  0, -EACCES
 * (401/403), -ENOENT (no such run), another refusal (a deleted run:
 * -EPROTO) or no answer, as the public helpers; err set. */
SM_HIDDEN int sm__mlflow_check_write_on(sm_rest *r, const char *run_id, int rank,
                                       const char *node, double deadline, char *err,
                                       size_t errlen);
/* mlflow_api.c: the largest step in the histories of keys[0..n) of the run
 * (metrics/get-history: what those keys hold, not the whole run), -1 when
 * none has a point.  0 or as the public helpers, err set. */
SM_HIDDEN int sm__mlflow_last_step_on(sm_rest *r, const char *run_id, const char *const *keys,
                                     size_t n, double deadline, long long *last, char *err,
                                     size_t errlen);

/* sink_mlflow.c: the REST sink's settings, opaque to the monitor
 * (sm_sink_config.settings): built by sm_monitor_set_run, changed by
 * sm_monitor_set_headers, freed with sm__rest_settings_free. */
typedef struct sm_rest_settings {
    char run_id[260];
    char **headers;   /* NULL or NULL-terminated name, value pairs (owned) */
    double check_s;   /* bound of the run check at start: 0 the default, < 0 none */
    sm_run_check check; /* the resolution's (sm_monitor_set_resolved), else NONE */
    /* the companion (sm_monitor_set_companion, companion.c) */
    char *companion;         /* the CLI's path (owned), NULL: none */
    int companion_owns;      /* --owns-run */
    int companion_fd;        /* the stop pipe's write end while companion_pid > 0 */
    pid_t companion_pid;     /* the running companion, 0: none */
    pid_t companion_parent;  /* the process that started it */
} sm_rest_settings;
SM_HIDDEN void sm__rest_settings_free(void *settings);
/* companion.c: the monitor's sink hooks (sink.h) of a REST sink with a
 * companion: started spawns it (settings: an sm_rest_settings), stopped
 * tells it "stop" and reaps it; settings_free stops one still running and
 * frees its part of set. */
SM_HIDDEN void sm__companion_started(void *settings, const char *uri, int rank);
SM_HIDDEN void sm__companion_stopped(void *settings);
SM_HIDDEN void sm__companion_settings_free(sm_rest_settings *set);

/* sink_mlflow.c: the REST sink's constructor (an sm_sink_factory). */
struct sm_sink;
struct sm_sink_config;
SM_HIDDEN int sm__sink_mlflow_new(const struct sm_sink_config *cfg, char *err, size_t errlen,
                                 struct sm_sink **out);

#endif
