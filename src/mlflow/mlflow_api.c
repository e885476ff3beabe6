/*
 * mlflow_api.c — the public MLflow REST helpers of scopemeter.h: experiment
 * lookup/creation, runs/create, runs/search by tag, runs/get, runs/set-tag,
 * runs/update.  `scopemeter run` uses them around a monitor; a native
 * training program can too.
 *
 * Each call owns a short-lived sm_rest (one easy handle) in the caller's
 * thread and retries transient failures until its timeout (rest_retry.c).
 * Request shapes follow MLflow's REST API reference and its Python client
 * (mlflow/store/tracking/rest_store.py).
 */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mlflow_rest.h"
#include "sink.h"

#define DEFAULT_TIMEOUT 30.0

/* One call, its answer in the public API's words (answer.c): 0, or the
 * code with err set.  On 0 the answer's body goes to *resp when asked (the
 * caller decrefs); *http, when asked, gets the answer's status. */
static int call(sm_rest *r, const char *method, const char *endpoint, json_t *req, json_t **resp,
                long *http, double deadline, char *err, size_t errlen)
{
    sm_rest_result res;
    int rc;

    sm__rest_call(r, method, endpoint, req, &res, deadline, err, errlen);
    rc = sm__rest_errno(&res);
    if (http)
        *http = res.http;
    if (resp) {
        *resp = rc == 0 ? res.body : NULL;
        if (rc == 0)
            res.body = NULL;
    }
    sm__rest_result_clear(&res);
    return rc;
}

static double deadline_of(double timeout_s)
{
    return sm__now_mono() + (timeout_s > 0 ? timeout_s : DEFAULT_TIMEOUT);
}

static int open_rest(sm_rest *r, const char *uri, char *err, size_t errlen)
{
    if (!sm__rest_is_http(uri)) {
        snprintf(err, errlen, "MLflow REST helpers need an http:// or https:// tracking URI");
        return -EINVAL;
    }
    return sm__rest_init(r, uri, err, errlen);
}

static int copy_out(const char *v, char *out, size_t outlen, char *err, size_t errlen,
                    const char *what)
{
    if (!v || !*v) {
        snprintf(err, errlen, "the server's answer has no %s", what);
        return -EPROTO;
    }
    if (!out || strlen(v) >= outlen) {
        snprintf(err, errlen, "%s does not fit the caller's buffer", what);
        return -ENOSPC;
    }
    memcpy(out, v, strlen(v) + 1);
    return 0;
}

/* MLflow's run ids (mlflow/utils/validation.py _validate_run_id): the one
 * check every call that names a run makes, the REST sink's included. */
int sm_mlflow_valid_run_id(const char *id)
{
    size_t n;

    if (!id || !*id)
        return 0;
    n = strlen(id);
    if (n > 256)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '_' && c != '-')))
            return 0;
    }
    return 1;
}

void sm_mlflow_redact_uri(const char *uri, char *out, size_t outlen)
{
    sm__rest_redact(uri, out, outlen);
}

/* ---- experiments --------------------------------------------------------------- */
/* By name, as mlflow.set_experiment(): the experiment, created when
 * missing; a creation by another rank meanwhile (RESOURCE_ALREADY_EXISTS)
 * is looked up again. */
static int experiment_by_name(sm_rest *r, const char *name, char *id_out, size_t id_len,
                              double deadline, char *err, size_t errlen)
{
    json_t *resp = NULL, *req = NULL;
    char ep[1200], esc[1024];
    int rc = 0;

    if (sm__rest_escape(r, name, esc, sizeof esc) < 0) {
        snprintf(err, errlen, "experiment name too long");
        return -EINVAL;
    }
    for (int tries = 0; tries < 3; tries++) {
        snprintf(ep, sizeof ep, "experiments/get-by-name?experiment_name=%s", esc);
        rc = call(r, "GET", ep, NULL, &resp, NULL, deadline, err, errlen);
        if (rc == 0) {
            rc = copy_out(json_string_value(json_object_get(
                              json_object_get(resp, "experiment"), "experiment_id")),
                          id_out, id_len, err, errlen, "experiment_id");
            const char *stage = json_string_value(json_object_get(
                json_object_get(resp, "experiment"), "lifecycle_stage"));
            if (rc == 0 && stage && strcmp(stage, "deleted") == 0) {
                char shown[204];
                snprintf(err, errlen, "experiment '%s' is deleted (restore it or "
                         "choose another name)", sm__shown(shown, sizeof shown, name));
                rc = -ENOENT;
            }
            goto out;
        }
        if (rc != -ENOENT)
            goto out;
        /* missing: create it, as mlflow.set_experiment() does */
        json_decref(req);
        req = json_pack("{s:s}", "name", name);
        if (!req) {
            snprintf(err, errlen, "out of memory");
            rc = -ENOMEM;
            goto out;
        }
        rc = call(r, "POST", "experiments/create", req, &resp, NULL, deadline, err, errlen);
        if (rc == 0) {
            rc = copy_out(json_string_value(json_object_get(resp, "experiment_id")), id_out,
                          id_len, err, errlen, "experiment_id");
            goto out;
        }
        if (rc != -EEXIST)
            goto out;
        /* another rank created it meanwhile: look it up again */
        json_decref(resp);
        resp = NULL;
    }
out:
    json_decref(req);
    json_decref(resp);
    return rc;
}

/* By id (MLFLOW_EXPERIMENT_ID): it must exist. */
static int experiment_by_id(sm_rest *r, const char *id, char *id_out, size_t id_len,
                            double deadline, char *err, size_t errlen)
{
    json_t *resp = NULL;
    char ep[1200], esc[1024];
    long http = 0;
    int rc;

    if (sm__rest_escape(r, id, esc, sizeof esc) < 0) {
        snprintf(err, errlen, "experiment id too long");
        return -EINVAL;
    }
    snprintf(ep, sizeof ep, "experiments/get?experiment_id=%s", esc);
    rc = call(r, "GET", ep, NULL, &resp, &http, deadline, err, errlen);
    if (rc == 0)
        rc = copy_out(id, id_out, id_len, err, errlen, "experiment_id");
    else if (rc == -ENOENT || (rc == -EPROTO && http != 404))
        snprintf(err, errlen, "experiment id %.64s does not exist on the server", id);
    json_decref(resp);
    return rc;
}

int sm_mlflow_experiment(const char *uri, const char *name, const char *id, char *id_out,
                         size_t id_len, double timeout_s, char *err, size_t errlen)
{
    sm_rest r;
    double deadline = deadline_of(timeout_s);
    int rc;

    if ((!name || !*name) && (!id || !*id))
        return copy_out("0", id_out, id_len, err, errlen, "experiment_id"); /* Default */
    if ((rc = open_rest(&r, uri, err, errlen)) < 0)
        return rc;
    if (name && *name)
        rc = experiment_by_name(&r, name, id_out, id_len, deadline, err, errlen);
    else
        rc = experiment_by_id(&r, id, id_out, id_len, deadline, err, errlen);
    sm__rest_free(&r);
    return rc;
}

/* ---- runs ------------------------------------------------------------------------ */
static const char *user_name(char *buf, size_t len)
{
    /* what MLflow records as mlflow.user: getpass.getuser() */
    static const char *vars[] = {"LOGNAME", "USER", "LNAME", "USERNAME"};
    struct passwd pw, *res = NULL;
    char tmp[1024];

    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            snprintf(buf, len, "%s", v);
            return buf;
        }
    }
    if (getpwuid_r(getuid(), &pw, tmp, sizeof tmp, &res) == 0 && res) {
        snprintf(buf, len, "%s", res->pw_name);
        return buf;
    }
    return NULL;
}

int sm_mlflow_create_run(const char *uri, const char *experiment_id, const char *run_name,
                         const char *const *tags, char *run_id_out, size_t run_id_len,
                         double timeout_s, char *err, size_t errlen)
{
    sm_rest r;
    json_t *req, *jtags, *resp = NULL;
    char user[256];
    int rc, have_user_tag = 0;

    if (!experiment_id || !*experiment_id) {
        snprintf(err, errlen, "no experiment id");
        return -EINVAL;
    }
    if ((rc = open_rest(&r, uri, err, errlen)) < 0)
        return rc;
    req = json_pack("{s:s, s:I}", "experiment_id", experiment_id, "start_time",
                    (json_int_t)sm__now_ms());
    jtags = json_array();
    if (!req || !jtags) {
        json_decref(jtags);
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
        goto out;
    }
    if (run_name && *run_name)
        json_object_set_new(req, "run_name", json_string(run_name));
    for (size_t i = 0; tags && tags[i] && tags[i + 1]; i += 2) {
        json_t *t = json_pack("{s:s, s:s}", "key", tags[i], "value", tags[i + 1]);
        if (!t) {
            json_decref(jtags);
            snprintf(err, errlen, "tag %.100s is not valid UTF-8", tags[i]);
            rc = -EINVAL;
            goto out;
        }
        have_user_tag |= strcmp(tags[i], "mlflow.user") == 0;
        json_array_append_new(jtags, t);
    }
    if (user_name(user, sizeof user)) {
        json_object_set_new(req, "user_id", json_string(user));
        if (!have_user_tag)
            json_array_append_new(jtags, json_pack("{s:s, s:s}", "key", "mlflow.user", "value",
                                                   user));
    }
    json_object_set_new(req, "tags", jtags);
    rc = call(&r, "POST", "runs/create", req, &resp, NULL, deadline_of(timeout_s), err, errlen);
    if (rc == 0)
        rc = copy_out(json_string_value(json_object_get(
                          json_object_get(json_object_get(resp, "run"), "info"), "run_id")),
                      run_id_out, run_id_len, err, errlen, "run_id");
out:
    json_decref(req);
    json_decref(resp);
    sm__rest_free(&r);
    return rc;
}

int sm_mlflow_find_run(const char *uri, const char *experiment_id, const char *tag_key,
                       const char *tag_value, char *run_id_out, size_t run_id_len,
                       double timeout_s, char *err, size_t errlen)
{
    sm_rest r;
    json_t *req = NULL, *resp = NULL, *runs;
    char filter[1024];
    int rc;

    if (!experiment_id || !tag_key || !tag_value || strpbrk(tag_key, "`'\"\\") ||
        strpbrk(tag_value, "'\\")) {
        snprintf(err, errlen, "run search: a tag key or value that cannot be quoted");
        return -EINVAL;
    }
    /* RUNNING only, newest first: the finished runs of earlier jobs that
     * carried the same tag (a fixed torchrun --rdzv-id) are not this job's */
    if ((size_t)snprintf(filter, sizeof filter,
                         "tags.`%s` = '%s' AND attributes.status = 'RUNNING'", tag_key,
                         tag_value) >= sizeof filter) {
        snprintf(err, errlen, "run search: tag too long");
        return -EINVAL;
    }
    if ((rc = open_rest(&r, uri, err, errlen)) < 0)
        return rc;
    req = json_pack("{s:[s], s:s, s:i, s:[s]}", "experiment_ids", experiment_id, "filter",
                    filter, "max_results", 1, "order_by", "attributes.start_time DESC");
    if (!req) {
        snprintf(err, errlen, "run search: a tag that is not UTF-8 (or out of memory)");
        rc = -ENOMEM;
        goto out;
    }
    json_object_set_new(req, "run_view_type", json_string("ACTIVE_ONLY"));
    rc = call(&r, "POST", "runs/search", req, &resp, NULL, deadline_of(timeout_s), err, errlen);
    if (rc < 0)
        goto out;
    runs = json_object_get(resp, "runs");
    if (!json_array_size(runs)) {
        snprintf(err, errlen, "no RUNNING run with tag %.100s=%.200s yet", tag_key, tag_value);
        rc = -ENOENT;
        goto out;
    }
    rc = copy_out(json_string_value(json_object_get(
                      json_object_get(json_array_get(runs, 0), "info"), "run_id")),
                  run_id_out, run_id_len, err, errlen, "run_id");
out:
    json_decref(req);
    json_decref(resp);
    sm__rest_free(&r);
    return rc;
}

void sm__mlflow_check_run_on(sm_rest *r, const char *run_id, int rank, double deadline,
                             sm_run_check *c)
{
    sm_rest_result res;
    char ep[400], err[600] = "";

    if (!sm_mlflow_valid_run_id(run_id)) {
        char shown[84]; /* escaped (names.c): the line stays one line */
        snprintf(err, sizeof err, "not an MLflow run id: %s",
                 run_id ? sm__shown(shown, sizeof shown, run_id) : "(null)");
        sm__run_check_failed(c, -EINVAL, err, rank);
        return;
    }
    snprintf(ep, sizeof ep, "runs/get?run_id=%s", run_id); /* the id needs no escaping */
    sm__rest_call(r, "GET", ep, NULL, &res, deadline, err, sizeof err);
    sm__run_check_of(c, &res, json_object_get(res.body, "run"), err, run_id, r->shown, rank);
    sm__rest_result_clear(&res);
}

int sm__mlflow_run_status_tag(const char *uri, const char *run_id, const char *key,
                              char *status, size_t status_len, char *value, size_t value_len,
                              double timeout_s, char *err, size_t errlen)
{
    json_t *resp = NULL, *info, *tags, *t;
    char ep[400];
    sm_rest r;
    size_t i;
    int rc;

    status[0] = value[0] = '\0';
    if (!sm_mlflow_valid_run_id(run_id)) {
        snprintf(err, errlen, "runs/get: bad run id");
        return -EINVAL;
    }
    if ((rc = open_rest(&r, uri, err, errlen)) < 0)
        return rc;
    snprintf(ep, sizeof ep, "runs/get?run_id=%s", run_id); /* the id needs no escaping */
    rc = call(&r, "GET", ep, NULL, &resp, NULL, deadline_of(timeout_s), err, errlen);
    sm__rest_free(&r);
    if (rc < 0)
        goto out;
    info = json_object_get(json_object_get(resp, "run"), "info");
    snprintf(status, status_len, "%s", json_string_value(json_object_get(info, "status"))
                                           ? json_string_value(json_object_get(info, "status"))
                                           : "");
    tags = json_object_get(json_object_get(json_object_get(resp, "run"), "data"), "tags");
    json_array_foreach(tags, i, t) {
        const char *k = json_string_value(json_object_get(t, "key"));
        const char *v = json_string_value(json_object_get(t, "value"));
        if (k && v && strcmp(k, key) == 0)
            snprintf(value, value_len, "%s", v);
    }
out:
    json_decref(resp);
    return rc;
}

int sm__mlflow_check_write_on(sm_rest *r, const char *run_id, int rank, const char *node,
                             double deadline, char *err, size_t errlen)
{
    char key[64];
    json_t *req;
    int rc;

    if (!sm_mlflow_valid_run_id(run_id)) {
        char shown[84]; /* escaped (names.c): the line stays one line */
        snprintf(err, errlen, "not an MLflow run id: %s",
                 run_id ? sm__shown(shown, sizeof shown, run_id) : "(null)");
        return -EINVAL;
    }
    snprintf(key, sizeof key, "scopemeter.rank%d.node", rank);
    if (!(req = json_pack("{s:s, s:s, s:s}", "run_id", run_id, "key", key, "value", node))) {
        snprintf(err, errlen, "runs/set-tag: out of memory");
        return -ENOMEM;
    }
    rc = call(r, "POST", "runs/set-tag", req, NULL, NULL, deadline, err, errlen);
    json_decref(req);
    return rc;
}

int sm__mlflow_last_step_on(sm_rest *r, const char *run_id, const char *const *keys, size_t n,
                            double deadline, long long *last, char *err, size_t errlen)
{
    char ep[2048], esc[1024], token[512] = "";
    int rc = 0;

    *last = -1;
    for (size_t k = 0; k < n && rc == 0; k++) {
        if (sm__rest_escape(r, keys[k], esc, sizeof esc) < 0) {
            snprintf(err, errlen, "metrics/get-history: key too long");
            return -EINVAL;
        }
        token[0] = '\0';
        for (;;) { /* a server that pages the history (next_page_token) is followed */
            json_t *resp = NULL, *m;
            const char *next;
            size_t i;
            int more;

            snprintf(ep, sizeof ep, "metrics/get-history?run_id=%s&metric_key=%s%s%s", run_id,
                     esc, token[0] ? "&page_token=" : "", token);
            rc = call(r, "GET", ep, NULL, &resp, NULL, deadline, err, errlen);
            if (rc < 0)
                break;
            json_array_foreach(json_object_get(resp, "metrics"), i, m) {
                long long v = sm__rest_int64(json_object_get(m, "step"));
                if (v > *last)
                    *last = v;
            }
            next = json_string_value(json_object_get(resp, "next_page_token"));
            more = next && *next && sm__rest_escape(r, next, token, sizeof token) == 0;
            json_decref(resp);
            if (!more)
                break;
        }
    }
    return rc;
}

void sm__mlflow_check_run(const char *uri, const char *run_id, int rank, double timeout_s,
                          sm_run_check *c)
{
    sm_rest r;
    char err[600] = "";
    int rc;

    if ((rc = open_rest(&r, uri, err, sizeof err)) < 0) {
        sm__run_check_failed(c, rc, err, rank);
        return;
    }
    sm__mlflow_check_run_on(&r, run_id, rank, deadline_of(timeout_s), c);
    sm__rest_free(&r);
}

int sm_mlflow_get_run(const char *uri, const char *run_id, char *status_out, size_t status_len,
                      double timeout_s, char *err, size_t errlen)
{
    sm_run_check c;

    sm__mlflow_check_run(uri, run_id, 0, timeout_s, &c);
    if (c.outcome != SM_RUN_CHECK_RUN) {
        snprintf(err, errlen, "%s", c.why);
        return c.error;
    }
    if (status_out && status_len)
        snprintf(status_out, status_len, "%s", c.status);
    return 0;
}

/* POST req (consumed) to endpoint, no answer wanted. */
static int post_json(const char *uri, const char *endpoint, json_t *req, double timeout_s,
                     char *err, size_t errlen)
{
    sm_rest r;
    int rc;

    if (!req) {
        snprintf(err, errlen, "%s: out of memory", endpoint);
        return -ENOMEM;
    }
    if ((rc = open_rest(&r, uri, err, errlen)) == 0) {
        rc = call(&r, "POST", endpoint, req, NULL, NULL, deadline_of(timeout_s), err, errlen);
        sm__rest_free(&r);
    }
    json_decref(req);
    return rc;
}

int sm_mlflow_set_tag(const char *uri, const char *run_id, const char *key, const char *value,
                      double timeout_s, char *err, size_t errlen)
{
    json_t *req;

    if (!sm_mlflow_valid_run_id(run_id) || !key || !value) {
        snprintf(err, errlen, "set-tag: bad run id, key or value");
        return -EINVAL;
    }
    req = json_pack("{s:s, s:s, s:s}", "run_id", run_id, "key", key, "value", value);
    if (!req) {
        snprintf(err, errlen, "set-tag: key or value is not valid UTF-8");
        return -EINVAL;
    }
    return post_json(uri, "runs/set-tag", req, timeout_s, err, errlen);
}

int sm_mlflow_end_run(const char *uri, const char *run_id, const char *status, double timeout_s,
                      char *err, size_t errlen)
{
    if (!sm_mlflow_valid_run_id(run_id) || !status ||
        (strcmp(status, "FINISHED") && strcmp(status, "FAILED") && strcmp(status, "KILLED"))) {
        snprintf(err, errlen, "end run: bad run id or status (FINISHED, FAILED or KILLED)");
        return -EINVAL;
    }
    return post_json(uri, "runs/update",
                     json_pack("{s:s, s:s, s:I}", "run_id", run_id, "status", status, "end_time",
                               (json_int_t)sm__now_ms()),
                     timeout_s, err, errlen);
}
