/*
 * answer.c — what an MLflow store answered, read one way whoever received
 * it (answer.h): the outcome of a status, MLflow's error JSON as one line,
 * Retry-After, the public API's code for an answer, and the run check's
 * verdict from runs/get's answer.
 *
 * Why one file at the bottom: the libcurl transport, the MlflowClient
 * transport (_native.c), the one-off calls and the delivery policy all meet
 * the same answers; read in four places they drifted, and read in a file
 * that also does I/O the files above it called each other in circles.  This
 * file must never do I/O, keep state or call a file of src/mlflow/ above it
 * (curl_api.c's table only, for libcurl's HTTP-date parser); the fuzz target
 * fuzz_mlflow_reply runs its parsers on arbitrary bytes.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "answer.h"
#include "curl_api.h"

/* ---- one answer ----------------------------------------------------------------- */
void sm__rest_result_clear(sm_rest_result *res)
{
    if (res->body)
        json_decref(res->body);
    memset(res, 0, sizeof *res);
    res->retry_after = -1;
}

/* One line from MLflow's error body {"error_code": .., "message": ..}, or
 * the start of a non-JSON body. */
static void describe_error(const char *endpoint, const char *body, size_t len,
                           sm_rest_result *res)
{
    const char *code = NULL, *message = NULL;
    char ep[96], snippet[200];
    size_t i, o = 0;

    snprintf(ep, sizeof ep, "%.*s", (int)strcspn(endpoint, "?"), endpoint);
    if (res->body) {
        code = json_string_value(json_object_get(res->body, "error_code"));
        message = json_string_value(json_object_get(res->body, "message"));
    }
    /* MLflow's auth app and most proxies refuse with a text body: the code is
     * the one MLflow's own errors carry for that status (mlflow/exceptions.py),
     * so a refusal is named the same whoever sent it */
    if (!code && res->http == 401)
        code = "UNAUTHENTICATED";
    else if (!code && res->http == 403)
        code = "PERMISSION_DENIED";
    if (code)
        snprintf(res->error_code, sizeof res->error_code, "%s", code);
    if (!code && res->http == 404) {
        /* MLflow answers a missing run or experiment with its JSON error;
         * a bare 404 (an HTML page) means no MLflow API lives there */
        snprintf(res->msg, sizeof res->msg, "%s: HTTP 404 with no MLflow error: no MLflow "
                 "REST API at this tracking URI (a wrong path prefix? MLflow's API is the "
                 "tracking URI + /api/2.0/mlflow/)", ep);
        return;
    }
    if (!message && code && !res->body && body) {
        /* a text body (the auth app's "Permission denied"): its first printable bytes */
        for (i = 0; i < len && o < sizeof snippet - 1 && o < 120; i++) {
            unsigned char c = (unsigned char)body[i];
            snippet[o++] = (c >= 32 && c < 127) ? (char)c : ' ';
        }
        snippet[o] = '\0';
        message = snippet;
    }
    if (code || message) {
        snprintf(res->msg, sizeof res->msg, "%s: HTTP %ld %s: %.300s", ep, res->http,
                 code ? code : "", message ? message : "");
        /* the server's text goes into one log line (docs/design.md §6): MLflow's
         * messages can hold newlines (a database error with its SQL) */
        for (char *c = res->msg; *c; c++)
            if ((unsigned char)*c < 32 || *c == 127)
                *c = ' ';
        return;
    }
    /* not MLflow's JSON (a proxy's HTML page): the first printable bytes */
    for (i = 0; body && i < len && o < sizeof snippet - 1 && o < 120; i++) {
        unsigned char c = (unsigned char)body[i];
        snippet[o++] = (c >= 32 && c < 127) ? (char)c : ' ';
    }
    snippet[o] = '\0';
    snprintf(res->msg, sizeof res->msg, "%s: HTTP %ld%s%s", ep, res->http, o ? ": " : "",
             snippet);
}

/* What the server answered, without the transfer (the fuzz target calls it
 * on arbitrary bytes): http status and body in, outcome, parsed body and
 * error line out. */
void sm__rest_parse_reply(const char *endpoint, long http, const char *body, size_t len,
                         sm_rest_result *res)
{
    res->http = http;
    if (len) {
        json_error_t je;
        res->body = json_loadb(body, len, 0, &je);
    }
    res->outcome = sm__rest_outcome_of(http);
    if (res->outcome == SM_REST_OK)
        return;
    describe_error(endpoint, body, len, res);
}


int sm__rest_outcome_of(long http)
{
    if (http >= 200 && http < 300)
        return SM_REST_OK;
    /* MLflow's _TRANSIENT_FAILURE_RESPONSE_CODES are 408, 429, 500, 502,
     * 503, 504; every 5xx is a server-side condition worth retrying here,
     * because the points wait in the ring anyway. */
    if (http == 408 || http == 429 || (http >= 500 && http <= 599))
        return SM_REST_RETRY;
    return SM_REST_REFUSED;
}


double sm__rest_parse_retry_after(const char *v, long now_epoch)
{
    char buf[128];
    size_t n;
    char *end;
    long secs;
    time_t when;

    while (*v == ' ' || *v == '\t')
        v++;
    n = strcspn(v, "\r\n");
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, v, n);
    buf[n] = '\0';
    if (isdigit((unsigned char)buf[0])) {
        errno = 0;
        secs = strtol(buf, &end, 10);
        if (errno || *end)
            return -1;
        return (double)secs;
    }
    when = sm__curl_builtin()->getdate(buf, NULL); /* RFC 9110 HTTP-date (and the obsolete forms) */
    if (when == (time_t)-1)
        return -1;
    return when > now_epoch ? (double)(when - now_epoch) : 0.0;
}

void sm__rest_answer_http(sm_rest_result *res, const char *endpoint, long http,
                          const char *body, size_t len, const char *retry_after)
{
    sm__rest_parse_reply(endpoint, http, body, len, res);
    res->retry_after = retry_after ? sm__rest_parse_retry_after(retry_after, (long)time(NULL))
                                   : -1;
}

void sm__rest_answer_none(sm_rest_result *res, const char *endpoint, const char *shown,
                          int os_errno, const char *why)
{
    sm__rest_result_clear(res);
    res->outcome = SM_REST_RETRY;
    res->os_errno = os_errno > 0 ? os_errno : 0;
    if (os_errno > 0)
        snprintf(res->msg, sizeof res->msg, "%s on %.200s: no answer (%s)", endpoint, shown,
                 strerror(os_errno));
    else /* as rest_http.c says a request that got no answer */
        snprintf(res->msg, sizeof res->msg, "%s on %.200s: %.200s", endpoint, shown,
                 why ? why : "no answer");
}

int sm__rest_errno(const sm_rest_result *res)
{
    int outcome = res->outcome;

    if (outcome == SM_REST_OK)
        return 0;
    if (outcome == SM_REST_RETRY || outcome == SM_REST_ABORTED)
        return -ETIMEDOUT;
    if (outcome == SM_REST_FAILED)
        return -EIO;
    if (strcmp(res->error_code, "RESOURCE_DOES_NOT_EXIST") == 0)
        return -ENOENT;
    if (res->http == 404)
        return -EPROTO; /* no MLflow API there (a wrong path prefix): its own line */
    if (strcmp(res->error_code, "RESOURCE_ALREADY_EXISTS") == 0)
        return -EEXIST;
    if (res->http == 401 || res->http == 403)
        return -EACCES;
    if (res->http == 0)
        return -EIO; /* a TLS or URL problem: curl's message says which */
    return -EPROTO;
}

/* ---- the run check ------------------------------------------------------------ */

int64_t sm__rest_int64(const json_t *v)
{
    /* the REST API gives int64 as a number or, through protobuf JSON, a string */
    return json_is_integer(v) ? (int64_t)json_integer_value(v)
           : json_is_string(v) ? strtoll(json_string_value(v), NULL, 10) : 0;
}

/* The largest step of the run's latest system metrics of this rank
 * (runs/get returns each key's latest point), -1 without any. */
static int64_t last_system_step(json_t *run, int rank)
{
    json_t *metrics = json_object_get(json_object_get(run, "data"), "metrics"), *m;
    char suffix[32];
    size_t i, sl;
    int64_t last = -1;

    snprintf(suffix, sizeof suffix, "/rank%d", rank);
    sl = strlen(suffix);
    json_array_foreach(metrics, i, m) {
        const char *key = json_string_value(json_object_get(m, "key"));
        json_t *step = json_object_get(m, "step");
        size_t kl = key ? strlen(key) : 0;
        if (!key || strncmp(key, "system/", 7) != 0 || kl < sl || strcmp(key + kl - sl, suffix))
            continue;
        int64_t v = sm__rest_int64(step);
        if (v > last)
            last = v;
    }
    return last;
}

/* Whether a code refuses the run rather than leaving its points to wait:
 * a missing or deleted run, credentials refused, a bad request or answer,
 * a TLS or URL problem — what waiting does not mend.  The one rule, for the
 * run resolution's attach (mlflow_run.c) and the sink's start (deliver.c). */
static int refuses(int code)
{
    return code == -ENOENT || code == -EACCES || code == -EINVAL || code == -EIO ||
           code == -EPROTO;
}

void sm__run_check_failed(sm_run_check *c, int code, const char *why, int rank)
{
    memset(c, 0, sizeof *c);
    c->outcome = refuses(code) ? SM_RUN_CHECK_REFUSED : SM_RUN_CHECK_NO_ANSWER;
    c->error = code;
    c->rank = rank;
    c->last_step = -1;
    snprintf(c->why, sizeof c->why, "%s", why ? why : "no answer");
}

void sm__run_check_of(sm_run_check *c, const sm_rest_result *a, json_t *run, const char *line,
                      const char *run_id, const char *shown, int rank)
{
    int code = sm__rest_errno(a);
    json_t *info;
    const char *stage, *status;
    char why[sizeof c->why];

    if (code != 0 && code != -ENOENT) { /* no answer, or another refusal: its line */
        sm__run_check_failed(c, code, line ? line : a->msg, rank);
        c->http = a->http;
        return;
    }
    run = code == 0 ? run : NULL; /* RESOURCE_DOES_NOT_EXIST: no run */
    info = json_object_get(run, "info");
    stage = json_string_value(json_object_get(info, "lifecycle_stage"));
    status = json_string_value(json_object_get(info, "status"));
    if (!run || (stage && strcmp(stage, "deleted") == 0)) {
        if (!run)
            snprintf(why, sizeof why, "run %s does not exist on %s", run_id, shown);
        else
            snprintf(why, sizeof why, "run %s is deleted", run_id);
        sm__run_check_failed(c, -ENOENT, why, rank);
        c->http = a->http;
        return;
    }
    memset(c, 0, sizeof *c);
    c->outcome = SM_RUN_CHECK_RUN;
    c->http = a->http;
    c->rank = rank;
    snprintf(c->status, sizeof c->status, "%s", status ? status : "");
    c->last_step = last_system_step(run, rank);
}
