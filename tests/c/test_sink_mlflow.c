/*
 * test_sink_mlflow.c — the REST sink and its helpers, without the monitor.
 *
 * Always (meson test): Retry-After parsing, URI redaction, backoff bounds,
 * run id rule; a sink aimed at a closed port and at a socket that accepts
 * and never answers must give up at the flush deadline with -ETIMEDOUT.
 *
 * With SM_TEST_MLFLOW_URI=http://... (tests/py/test_rest_faults.py runs it
 * against a real mlflow server): creates a run, pushes more metrics and tags
 * than one log-batch may carry plus a NaN, flushes, and prints
 * "run_id=<id>" for the Python side to read the run back.
 */
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "mlflow_rest.h"
#include "deliver.h"
#include "sink.h"

#define N_STEPS 1250 /* x 2 keys = 2500 metrics: three log-batches */
#define N_TAGS 150   /* more than MLflow's 100 tags per batch */

static void test_retry_after(void)
{
    /* delta-seconds */
    CHECK_NEAR(sm__rest_parse_retry_after("3", 0), 3.0, 1e-9);
    CHECK_NEAR(sm__rest_parse_retry_after("  120 \r\n", 0), 120.0, 1e-9);
    CHECK_NEAR(sm__rest_parse_retry_after("0", 0), 0.0, 1e-9);
    /* HTTP-date (RFC 9110 example), relative to a given now */
    CHECK_NEAR(sm__rest_parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", 784111777 - 10),
               10.0, 1e-9);
    /* a date in the past means now */
    CHECK_NEAR(sm__rest_parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", 784111777 + 50), 0.0,
               1e-9);
    CHECK(sm__rest_parse_retry_after("soon", 0) < 0);
    CHECK(sm__rest_parse_retry_after("", 0) < 0);
    CHECK(sm__rest_parse_retry_after("12abc", 0) < 0);
}

static void test_redact(void)
{
    char out[256];

    sm__rest_redact("http://user:s3cret@host:5000/mlflow", out, sizeof out);
    CHECK_EQ_STR(out, "http://***@host:5000/mlflow");
    CHECK(strstr(out, "s3cret") == NULL);
    sm__rest_redact("https://host/prefix?token=abc", out, sizeof out);
    CHECK_EQ_STR(out, "https://host/prefix?***");
    sm__rest_redact("http://127.0.0.1:5000", out, sizeof out);
    CHECK_EQ_STR(out, "http://127.0.0.1:5000");
    sm__rest_redact("http://a@b@host/x", out, sizeof out); /* the last '@' ends userinfo */
    CHECK_EQ_STR(out, "http://***@host/x");
    sm__rest_redact("http://user:pw@host", out, 8); /* truncation still redacts */
    CHECK(strstr(out, "pw") == NULL);
    CHECK(sm__rest_is_http("HTTPS://x"));
    CHECK(!sm__rest_is_http("sqlite:///mlflow.db"));
    CHECK(!sm__rest_is_http(NULL));
}

static void test_backoff(void)
{
    uint64_t seed = 42;
    int ok = 1;

    CHECK_NEAR(sm__rest_backoff(5, 7.0, 1.0, 30.0, &seed), 7.0, 1e-9); /* Retry-After wins */
    CHECK_NEAR(sm__rest_backoff(0, 9999.0, 1.0, 30.0, &seed), 600.0, 1e-9); /* capped */
    for (int a = 0; a < 40; a++)
        for (int k = 0; k < 50; k++) {
            double d = sm__rest_backoff(a, -1, 1.0, 30.0, &seed);
            double ceil_s = a < 5 ? (double)(1 << a) : 30.0;
            if (!(d >= 0 && d <= ceil_s))
                ok = 0;
        }
    CHECK(ok);
}

static void test_run_id_rule(void)
{
    CHECK(sm_mlflow_valid_run_id("0123abcdef"));
    CHECK(sm_mlflow_valid_run_id("a_b-c"));
    CHECK(!sm_mlflow_valid_run_id("_abc"));
    CHECK(!sm_mlflow_valid_run_id("abc/../x"));
    CHECK(!sm_mlflow_valid_run_id("abc def"));
    CHECK(!sm_mlflow_valid_run_id(""));
    CHECK(!sm_mlflow_valid_run_id(NULL));
}

/* sm__rest_parse_reply: what sm__rest_once makes of an answer */
static void test_parse_reply(void)
{
    static const char ok[] = "{\"run\": {\"info\": {\"run_id\": \"abc\"}}}";
    static const char refused[] = "{\"error_code\": \"INVALID_PARAMETER_VALUE\", "
                                  "\"message\": \"bad\\nSQL: SELECT 1\"}";
    static const char html[] = "<html>\r\n<b>502</b> Bad Gateway</html>";
    sm_rest_result res;

    memset(&res, 0, sizeof res);
    sm__rest_parse_reply("runs/get?run_id=abc", 200, ok, sizeof ok - 1, &res);
    CHECK_EQ_INT(res.outcome, SM_REST_OK);
    CHECK_EQ_INT((int)res.http, 200);
    CHECK_EQ_STR(json_string_value(json_object_get(
                     json_object_get(json_object_get(res.body, "run"), "info"), "run_id")),
                 "abc");
    CHECK_EQ_STR(res.msg, "");
    sm__rest_result_clear(&res);

    /* MLflow's refusal: its error_code, one line (the newline in the
     * message is blanked), the query left out */
    sm__rest_parse_reply("runs/get?run_id=abc", 400, refused, sizeof refused - 1, &res);
    CHECK_EQ_INT(res.outcome, SM_REST_REFUSED);
    CHECK_EQ_STR(res.error_code, "INVALID_PARAMETER_VALUE");
    CHECK_EQ_STR(res.msg, "runs/get: HTTP 400 INVALID_PARAMETER_VALUE: bad SQL: SELECT 1");
    sm__rest_result_clear(&res);

    /* a proxy's page: retried, its first printable bytes said */
    sm__rest_parse_reply("runs/log-batch", 502, html, sizeof html - 1, &res);
    CHECK_EQ_INT(res.outcome, SM_REST_RETRY);
    CHECK(res.body == NULL);
    CHECK_EQ_STR(res.error_code, "");
    CHECK_EQ_STR(res.msg, "runs/log-batch: HTTP 502: <html>  <b>502</b> Bad Gateway</html>");
    sm__rest_result_clear(&res);

    /* no body at all */
    sm__rest_parse_reply("runs/update", 429, NULL, 0, &res);
    CHECK_EQ_INT(res.outcome, SM_REST_RETRY);
    CHECK_EQ_STR(res.msg, "runs/update: HTTP 429");
    sm__rest_result_clear(&res);
}

/* sm__run_check_of: the one verdict of the run check, from runs/get's answer
 * however it was asked (answer.c) */
static void check_of(sm_run_check *c, long http, const char *body, const char *line)
{
    sm_rest_result res;

    memset(&res, 0, sizeof res);
    if (http)
        sm__rest_parse_reply("runs/get?run_id=abc", http, body, body ? strlen(body) : 0, &res);
    else
        sm__rest_answer_none(&res, "runs/get", "http://h", ECONNREFUSED, NULL);
    sm__run_check_of(c, &res, json_object_get(res.body, "run"), line, "abc", "http://h", 3);
    sm__rest_result_clear(&res);
}

static void test_run_check(void)
{
    sm_run_check c;

    check_of(&c, 200, "{\"run\": {\"info\": {\"status\": \"FINISHED\"}, \"data\": "
             "{\"metrics\": [{\"key\": \"system/node_cpu_utilization_percentage/n/rank3\", "
             "\"step\": \"41\"}, {\"key\": \"system/x/rank0\", \"step\": 99}]}}}", NULL);
    CHECK_EQ_INT(c.outcome, SM_RUN_CHECK_RUN);
    CHECK_EQ_STR(c.status, "FINISHED");
    CHECK_EQ_INT(c.last_step, 41); /* rank 3's only */
    CHECK_EQ_INT(c.rank, 3);
    CHECK_EQ_INT((int)c.http, 200);

    check_of(&c, 200, "{\"run\": {\"info\": {\"lifecycle_stage\": \"deleted\"}}}", NULL);
    CHECK_EQ_INT(c.outcome, SM_RUN_CHECK_REFUSED);
    CHECK_EQ_INT(c.error, -ENOENT);
    CHECK_EQ_STR(c.why, "run abc is deleted");

    check_of(&c, 404, "{\"error_code\": \"RESOURCE_DOES_NOT_EXIST\"}", "the call's line");
    CHECK_EQ_INT(c.outcome, SM_RUN_CHECK_REFUSED);
    CHECK_EQ_INT(c.error, -ENOENT);
    CHECK_EQ_STR(c.why, "run abc does not exist on http://h");

    check_of(&c, 403, "Permission denied", "the call's line");
    CHECK_EQ_INT(c.outcome, SM_RUN_CHECK_REFUSED);
    CHECK_EQ_INT(c.error, -EACCES);
    CHECK_EQ_STR(c.why, "the call's line");

    check_of(&c, 503, NULL, NULL); /* retried until the bound: no answer, points wait */
    CHECK_EQ_INT(c.outcome, SM_RUN_CHECK_NO_ANSWER);
    CHECK_EQ_INT(c.error, -ETIMEDOUT);
    CHECK_EQ_STR(c.why, "runs/get: HTTP 503");

    check_of(&c, 0, NULL, NULL);
    CHECK_EQ_INT(c.outcome, SM_RUN_CHECK_NO_ANSWER);
    CHECK_EQ_STR(c.why, "runs/get on http://h: no answer (Connection refused)");

    sm__run_check_failed(&c, -EINVAL, "not an MLflow run id: ../x", 0);
    CHECK_EQ_INT(c.outcome, SM_RUN_CHECK_REFUSED);
    sm__run_check_failed(&c, -ENOMEM, "out of memory", 0);
    CHECK_EQ_INT(c.outcome, SM_RUN_CHECK_NO_ANSWER);
}

static void metric(sm_record *r, const char *key, double v, int64_t step)
{
    memset(r, 0, sizeof *r);
    r->kind = SM_RECORD_METRIC;
    r->key = key; /* a literal: alive through the push */
    r->value = v;
    r->timestamp_ms = sm__now_ms();
    r->step = step;
}

/* A loopback socket that listens and never accepts: connect() completes in
 * the kernel, the request is buffered, no answer ever comes. */
static int silent_listener(int *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 16) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0)
        return -1;
    *port = ntohs(a.sin_port);
    return fd;
}

/* A port nothing listens on (bound, then closed). */
static int closed_port(void)
{
    int port = 0, fd = silent_listener(&port);
    close(fd);
    return port;
}

static void flush_gives_up(const char *what, int port)
{
    char uri[64], err[256] = "";
    sm_sink *s = NULL;
    sm_sink_config cfg;
    sm_rest_settings set = {.run_id = "0123456789abcdef", .check_s = 0.5};
    sm_record r[10];
    double t0, took;
    int rc;

    snprintf(uri, sizeof uri, "http://127.0.0.1:%d", port);
    /* the run check at start meets the same server: bounded, then recording
     * goes on (points wait) */
    cfg = (sm_sink_config){.target = uri, .cap = 64, .collectors = 1, .period_s = 1,
                           .settings = &set};
    t0 = sm__now_mono();
    rc = sm__sink_mlflow_new(&cfg, err, sizeof err, &s);
    CHECK(sm__now_mono() - t0 < 0.5 + 2.0);
    CHECK_EQ_INT(rc, 0);
    if (rc)
        return;
    for (int i = 0; i < 10; i++)
        metric(&r[i], "system/test/rank0", i, i);
    s->ops->push(s, r, 10);
    usleep(300 * 1000); /* the first request is in flight (or failed) */
    t0 = sm__now_mono();
    rc = s->ops->flush(s, t0 + 1.5);
    took = sm__now_mono() - t0;
    fprintf(stderr, "%s: flush returned %d after %.2f s (deadline 1.5 s)\n", what, rc, took);
    CHECK_EQ_INT(rc, -ETIMEDOUT);
    /* the bound: the deadline plus the xferinfo callback's poll period */
    CHECK(took < 1.5 + 2.0);
    CHECK_EQ_INT(s->ops->dropped(s), 0); /* not delivered is not "dropped" */
    {
        sm_sink_counts c;
        s->ops->counts(s, &c);
        CHECK_EQ_INT(c.delivered, 0);
        CHECK_EQ_INT(c.undelivered, 10);
        CHECK_EQ_INT(c.overflow + c.refused, 0);
    }
    s->ops->close(s);
}

static int ship_to_server(const char *uri)
{
    char err[512] = "", run_id[64];
    const char *tags[] = {"scopemeter.test", "sink", NULL};
    sm_sink *s = NULL;
    static sm_record r[2 * N_STEPS + N_TAGS + 1];
    size_t n = 0;
    int rc;

    rc = sm_mlflow_create_run(uri, "0", NULL, tags, run_id, sizeof run_id, 30, err, sizeof err);
    CHECK_EQ_INT(rc, 0);
    if (rc) {
        fprintf(stderr, "create run: %s\n", err);
        return 1;
    }
    {
        /* a run that does not exist fails the start (runs/get), one line */
        sm_rest_settings none = {.run_id = "0123456789abcdef0123456789abcdef"};
        sm_sink_config missing = {.target = uri, .cap = 64, .collectors = 1, .period_s = 1,
                                  .settings = &none};
        rc = sm__sink_mlflow_new(&missing, err, sizeof err, &s);
        CHECK_EQ_INT(rc, -ENOENT);
        CHECK(strstr(err, "does not exist") != NULL);
        CHECK(s == NULL);
    }
    {
        static sm_rest_settings set;
        sm_sink_config cfg = {.target = uri, .cap = 8192, .collectors = 1, .period_s = 1,
                              .settings = &set};
        snprintf(set.run_id, sizeof set.run_id, "%s", run_id);
        rc = sm__sink_mlflow_new(&cfg, err, sizeof err, &s);
    }
    CHECK_EQ_INT(rc, 0);
    if (rc)
        return 1;
    for (int i = 0; i < N_TAGS; i++) {
        static char keys[N_TAGS][32], texts[N_TAGS][32];
        sm_record *t = &r[n++];
        memset(t, 0, sizeof *t);
        t->kind = SM_RECORD_TAG;
        snprintf(keys[i], sizeof keys[i], "scopemeter.test.tag%03d", i);
        snprintf(texts[i], sizeof texts[i], "value %d \xff", i); /* invalid UTF-8 -> '?' */
        t->key = keys[i];
        t->text = texts[i];
        t->text_len = strlen(texts[i]);
    }
    for (int i = 0; i < N_STEPS; i++) {
        metric(&r[n++], "system/test_a/rank0", i * 0.5, i);
        metric(&r[n++], "system/test_b/rank0", i, i);
    }
    metric(&r[n++], "system/test_nan/rank0", NAN, 0);
    /* pushed in windows, as the monitor does */
    for (size_t off = 0; off < n; off += 97)
        s->ops->push(s, r + off, n - off < 97 ? n - off : 97);
    rc = s->ops->flush(s, sm__now_mono() + 60);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(s->ops->dropped(s), 0);
    {
        sm_sink_counts c;
        s->ops->counts(s, &c);
        CHECK_EQ_INT(c.delivered, N_TAGS + 2 * N_STEPS); /* the NaN is skipped */
        CHECK_EQ_INT(c.undelivered + c.overflow + c.refused, 0);
    }
    s->ops->close(s);
    /* set-tag and update share one POST helper: success, a missing run,
     * a bad status (refused before any request) */
    rc = sm_mlflow_set_tag(uri, run_id, "scopemeter.test.set_tag", "yes", 30, err, sizeof err);
    CHECK_EQ_INT(rc, 0);
    rc = sm_mlflow_set_tag(uri, "0123456789abcdef0123456789abcdef", "k", "v", 30, err,
                           sizeof err);
    CHECK_EQ_INT(rc, -ENOENT);
    rc = sm_mlflow_end_run(uri, run_id, "RUNNING", 30, err, sizeof err);
    CHECK_EQ_INT(rc, -EINVAL);
    rc = sm_mlflow_end_run(uri, run_id, "FINISHED", 30, err, sizeof err);
    CHECK_EQ_INT(rc, 0);
    printf("run_id=%s\n", run_id);
    return 0;
}

int main(void)
{
    const char *uri = getenv("SM_TEST_MLFLOW_URI");
    int port = 0, fd;

    test_retry_after();
    test_redact();
    test_backoff();
    test_run_id_rule();
    test_parse_reply();
    test_run_check();
    flush_gives_up("closed port", closed_port());
    fd = silent_listener(&port);
    CHECK(fd >= 0);
    if (fd >= 0) {
        flush_gives_up("accepts, never answers", port);
        close(fd);
    }
    if (uri && *uri)
        ship_to_server(uri);
    return CHECK_DONE();
}
