/*
 * fuzz_mlflow_reply.c — libFuzzer target for what scopemeter takes from an
 * MLflow server's reply: the Retry-After header value
 * (sm__rest_parse_retry_after) and the body through sm__rest_parse_reply(),
 * the reply half of sm__rest_once(): once as a 2xx answer, whose parsed body
 * is then read through every accessor chain mlflow_api.c and the sink use
 * (experiment.experiment_id, run.info.run_id / status / lifecycle_stage,
 * runs[0].info.run_id, error_code, message), and once as an error status,
 * which builds the error line (describe_error) that goes to stderr: it must
 * be one NUL-terminated line without control characters.
 *
 * Input: the first line is the Retry-After value (at most 255 bytes, as
 * on_header() accepts), the rest is the body.  The error status is picked
 * from the body's length, so the retried and the refused statuses are both
 * reached with the same corpus.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mlflow_rest.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static void read_str(json_t *v)
{
    const char *s = json_string_value(v);

    if (s && strlen(s) > json_string_length(v)) /* NUL-terminated within its length */
        abort();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *buf = (const char *)data, *nl = memchr(buf, '\n', size);
    size_t hl = nl ? (size_t)(nl - buf) : size;
    const char *body = nl ? nl + 1 : buf + size;
    size_t blen = size - (size_t)(body - buf);
    static const long statuses[] = {400, 404, 429, 503, 302};
    sm_rest_result res;
    json_t *root, *run_info;
    long http;

    if (hl < 256) {
        char v[256];
        memcpy(v, buf, hl);
        v[hl] = '\0';
        /* a fixed "now" (2026-01-01) keeps executions reproducible */
        double ra = sm__rest_parse_retry_after(v, 1767225600L);
        if (!isfinite(ra) || (ra < 0 && ra != -1))
            abort();
    }

    /* an error answer: the outcome and the one-line message */
    http = statuses[blen % (sizeof statuses / sizeof statuses[0])];
    memset(&res, 0, sizeof res);
    sm__rest_parse_reply("runs/get?run_id=0123abc", http, blen ? body : NULL, blen, &res);
    if (res.http != http ||
        res.outcome != (http == 429 || http >= 500 ? SM_REST_RETRY : SM_REST_REFUSED))
        abort();
    if (!memchr(res.msg, '\0', sizeof res.msg) || !memchr(res.error_code, '\0',
                                                         sizeof res.error_code))
        abort();
    if (strncmp(res.msg, "runs/get: HTTP ", 15) != 0) /* the query never shows */
        abort();
    for (const char *c = res.msg; *c; c++)
        if ((unsigned char)*c < 32 || *c == 127)
            abort();
    sm__rest_result_clear(&res);

    /* a 2xx answer: the body as the callers read it */
    memset(&res, 0, sizeof res);
    sm__rest_parse_reply("runs/get", 200, blen ? body : NULL, blen, &res);
    if (res.outcome != SM_REST_OK || res.msg[0])
        abort();
    root = res.body;
    res.body = NULL;
    if (!root)
        return 0;
    read_str(json_object_get(json_object_get(root, "experiment"), "experiment_id"));
    read_str(json_object_get(json_object_get(root, "experiment"), "lifecycle_stage"));
    read_str(json_object_get(root, "experiment_id"));
    run_info = json_object_get(json_object_get(root, "run"), "info");
    read_str(json_object_get(run_info, "run_id"));
    read_str(json_object_get(run_info, "status"));
    read_str(json_object_get(run_info, "lifecycle_stage"));
    if (json_array_size(json_object_get(root, "runs")))
        read_str(json_object_get(json_object_get(json_array_get(json_object_get(root, "runs"), 0),
                                                 "info"),
                                 "run_id"));
    read_str(json_object_get(root, "error_code"));
    read_str(json_object_get(root, "message"));
    json_decref(root);
    return 0;
}
