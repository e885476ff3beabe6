/*
 * fuzz_mlflow_reply.c — libFuzzer target for what scopemeter takes from an
 * MLflow server's reply: the Retry-After header value
 * (sm_rest_parse_retry_after) and the JSON body, loaded exactly as
 * sm_rest_once() loads it (json_loadb, flags 0) and read through every
 * accessor chain mlflow_api.c and the sink use (experiment.experiment_id,
 * run.info.run_id / status / lifecycle_stage, runs[0].info.run_id,
 * error_code, message).
 *
 * Input: the first line is the Retry-After value (at most 255 bytes, as
 * on_header() accepts), the rest is the body.
 *
 * Limitation (see docs/hardening.md): sm_rest_once() parses the body and
 * builds the error line inline, after curl_easy_perform(); that part
 * (describe_error) is only reachable through a real transfer, so it is
 * covered by the REST tests against servers, not here.
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
    json_error_t je;
    json_t *root, *run_info;

    if (hl < 256) {
        char v[256];
        memcpy(v, buf, hl);
        v[hl] = '\0';
        /* a fixed "now" (2026-01-01) keeps executions reproducible */
        double ra = sm_rest_parse_retry_after(v, 1767225600L);
        if (!isfinite(ra) || (ra < 0 && ra != -1))
            abort();
    }

    root = json_loadb(body, blen, 0, &je);
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
