/*
 * body_oracle.h — the jansson build of the log-batch body as sink_mlflow.c
 * had it before body.c (json_text and build_body), kept for the tests on
 * purpose: it is what the direct writer must mean.  tests/c/test_body.c and
 * tests/fuzz/fuzz_body.c compare body.c's output, read back, against it.
 */
#ifndef SM_BODY_ORACLE_H
#define SM_BODY_ORACLE_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mlflow_rest.h"
#include "sink.h"

static json_t *json_text(const char *s)
{
    char buf[1024];
    size_t n = strlen(s), o = 0, i = 0;
    json_t *j;

    if (n >= sizeof buf)
        n = sizeof buf - 1;
    j = json_stringn(s, n);
    if (j)
        return j;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
                     : (c & 0xF8) == 0xF0 ? 4 : 0;
        int ok = len > 0 && i + len <= n;
        for (size_t k = 1; ok && k < len; k++)
            ok = ((unsigned char)s[i + k] & 0xC0) == 0x80;
        if (!ok) {
            buf[o++] = '?';
            i++;
            continue;
        }
        memcpy(buf + o, s + i, len);
        o += len;
        i += len;
    }
    j = json_stringn(buf, o);
    if (j)
        return j;
    for (i = 0; i < o; i++)
        if ((unsigned char)buf[i] >= 0x80)
            buf[i] = '?';
    return json_stringn(buf, o);
}

static json_t *oracle(const char *run_id, const sm_ring *ring, const sm_entry *recs, size_t n,
                      int64_t step_base, size_t *used, size_t *shipped)
{
    json_t *root = NULL;
    size_t nm, nt, i;
    char *body;

again:
    json_decref(root);
    root = json_object();
    json_t *metrics = json_array(), *tags = json_array();
    json_object_set_new(root, "run_id", json_string(run_id));
    json_object_set_new(root, "metrics", metrics);
    json_object_set_new(root, "params", json_array());
    json_object_set_new(root, "tags", tags);
    nm = nt = 0;
    for (i = 0; i < n; i++) {
        const sm_entry *r = &recs[i];
        json_t *o;
        if (nm + nt >= SM_MLFLOW_MAX_ENTITIES)
            break;
        if (r->text == 0) {
            if (nm >= SM_MLFLOW_MAX_METRICS)
                break;
            if (!isfinite(r->value))
                continue;
            o = json_object();
            json_object_set_new(o, "key", json_text(sm__ring_str(ring, r->key)));
            json_object_set_new(o, "value", json_real(r->value));
            json_object_set_new(o, "timestamp", json_integer(r->timestamp_ms));
            json_object_set_new(o, "step", json_integer(step_base + r->step));
            json_array_append_new(metrics, o);
            nm++;
        } else {
            if (nt >= SM_MLFLOW_MAX_TAGS)
                break;
            o = json_object();
            json_object_set_new(o, "key", json_text(sm__ring_str(ring, r->key)));
            json_object_set_new(o, "value", json_text(sm__ring_str(ring, r->text)));
            json_array_append_new(tags, o);
            nt++;
        }
    }
    *used = i;
    *shipped = nm + nt;
    body = json_dumps(root, JSON_COMPACT);
    if (body && strlen(body) > SM_MLFLOW_MAX_BODY && i > 1) {
        free(body);
        n = i / 2;
        goto again;
    }
    free(body);
    return root;
}

/* the same double, -0 and 0 apart */
static int same_double(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static int values_identical(json_t *got, json_t *want)
{
    json_t *gm = json_object_get(got, "metrics"), *wm = json_object_get(want, "metrics");
    size_t i;
    json_t *w;

    if (json_array_size(gm) != json_array_size(wm))
        return 0;
    json_array_foreach(wm, i, w) {
        json_t *g = json_object_get(json_array_get(gm, i), "value");
        if (!json_is_real(g) || !same_double(json_real_value(g),
                                             json_real_value(json_object_get(w, "value"))))
            return 0;
    }
    return 1;
}

#endif
