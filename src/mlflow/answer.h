/*
 * answer.h — what an MLflow store answered, in one vocabulary for every
 * file of the MLflow layer (answer.c): the libcurl transport (rest_http.c)
 * and the one-off calls (rest_retry.c, mlflow_api.c) fill an sm_rest_result,
 * the Python front's MlflowClient transport has its answers read into the
 * same type (_native.c), the delivery policy (deliver.c) decides on it, and
 * the run check at start is one sm_run_check (scopemeter_mlflow.h) whoever
 * asked.  Errno codes are the public API's words (scopemeter_mlflow.h),
 * made from an answer only where a public function returns (sm__rest_errno).
 *
 * answer.c sits at the bottom of the layer: pure functions, no I/O, no
 * state, calling no other file of src/mlflow/ but curl_api.c's table (the
 * HTTP-date parser), so every file above may use it and it uses none.
 */
#ifndef SM_ANSWER_H
#define SM_ANSWER_H

#include <stddef.h>

#include <jansson.h>

#include "internal.h"
#include "scopemeter_mlflow.h"

/* Outcome of one request. */
enum sm_rest_outcome {
    SM_REST_OK = 0,       /* 2xx */
    SM_REST_RETRY = 1,    /* connection error, 408, 429, 5xx: try again later */
    SM_REST_REFUSED = 2,  /* any other status: the server said no, do not retry */
    SM_REST_ABORTED = 3,  /* stopped by the abort flag or deadline */
    SM_REST_FAILED = 4,   /* local failure (out of memory, bad option) */
};

/* The one answer type: one request's (sm__rest_once), a retried call's last
 * (sm__rest_call: msg is then the call's line), an MlflowClient request's
 * (sm__rest_answer_http, sm__rest_answer_none).  Cleared with
 * sm__rest_result_clear (it may own the parsed body). */
typedef struct sm_rest_result {
    int outcome;          /* enum sm_rest_outcome */
    long http;            /* HTTP status, 0 when there was no response */
    double retry_after;   /* seconds the server asked to wait, < 0 when it did not */
    json_t *body;         /* parsed response (NULL when not JSON); caller decrefs */
    char msg[512];        /* one line, no secrets: what went wrong */
    char error_code[64];  /* MLflow's error_code, "" when none */
    int os_errno;         /* no answer: the socket's errno (ECONNRESET for a connection
                           * closed without a reply), 0 when unknown */
    int timed_out;        /* no answer within the request's stall or total bound: the
                           * server may still be working on it */
} sm_rest_result;

SM_HIDDEN void sm__rest_result_clear(sm_rest_result *res);

/* What an HTTP status means: SM_REST_OK (2xx), SM_REST_RETRY (408, 429,
 * 5xx: MLflow's transient codes, mlflow/utils/request_utils.py, and every
 * 5xx), else SM_REST_REFUSED. */
SM_HIDDEN int sm__rest_outcome_of(long http);

/* The reply part of sm__rest_once(), pure: parses body (len bytes, not
 * NUL-terminated; NULL when len is 0) as JSON into res->body, and sets
 * res->http, res->outcome and, for a non-2xx status, res->msg and
 * res->error_code (one line, from MLflow's error JSON or the start of the
 * body).  res starts cleared (zeroed, or sm__rest_result_clear); the caller
 * clears it after. */
SM_HIDDEN void sm__rest_parse_reply(const char *endpoint, long http, const char *body,
                                   size_t len, sm_rest_result *res);

/* Retry-After value: delta-seconds or an HTTP-date.  Returns seconds from
 * now (>= 0), or -1 when it cannot be parsed. */
SM_HIDDEN double sm__rest_parse_retry_after(const char *v, long now_epoch);

/* An answer another transport met (MlflowClient): http > 0 with its body
 * (MLflow's error JSON; len bytes) and its Retry-After header's text (NULL
 * none), read as sm__rest_once reads the same answer.  res starts cleared. */
SM_HIDDEN void sm__rest_answer_http(sm_rest_result *res, const char *endpoint, long http,
                                   const char *body, size_t len, const char *retry_after);
/* No answer, whichever transport met it: said by the socket's errno when
 * there is one (so the same fault reads the same on both paths), else why
 * (NULL: "no answer").  Replaces what res held. */
SM_HIDDEN void sm__rest_answer_none(sm_rest_result *res, const char *endpoint, const char *shown,
                                   int os_errno, const char *why);

/* The public API's code for an answer (scopemeter_mlflow.h): 0, -ETIMEDOUT
 * (no answer in time), -ENOENT, -EEXIST, -EACCES, -EPROTO, -EIO. */
SM_HIDDEN int sm__rest_errno(const sm_rest_result *res);

/* The run check at start (scopemeter_mlflow.h's sm_run_check), however
 * runs/get was asked: a is its answer, run the answer's "run" object (NULL
 * when it has none), line the line of a failed ask (NULL: a->msg; a
 * retried call's own, sm__rest_call's err).  The one verdict: SM_RUN_CHECK_RUN (status, this
 * rank's last system step), SM_RUN_CHECK_REFUSED (missing or deleted,
 * credentials refused, a bad request or answer, a TLS or URL problem: what
 * waiting does not mend), SM_RUN_CHECK_NO_ANSWER (the points wait). */
SM_HIDDEN void sm__run_check_of(sm_run_check *c, const sm_rest_result *a, json_t *run,
                               const char *line, const char *run_id, const char *shown,
                               int rank);
/* A check that could not ask (a bad run id or URI, no TLS, no memory):
 * code is the public API's, why the line; the verdict as above. */
SM_HIDDEN void sm__run_check_failed(sm_run_check *c, int code, const char *why, int rank);
/* An int64 field of an answer (a step): a JSON number or, through protobuf
 * JSON, a string; 0 otherwise. */
SM_HIDDEN int64_t sm__rest_int64(const json_t *v);

#endif
