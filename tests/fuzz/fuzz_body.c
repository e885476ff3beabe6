/*
 * fuzz_body.c — libFuzzer target for the direct log-batch writer
 * (src/mlflow/body.c): arbitrary keys, tag texts and values must give a body
 * that jansson reads back as exactly the object the jansson build made
 * (tests/c/body_oracle.h), every value the same double, within MLflow's
 * limits; anything else aborts.
 *
 * Input: byte 0 from 0xC0 up repeats the records (1 + byte0 % 64 times, up
 * to 2600: MLflow's limits and the 1 MB rule are reached from small inputs;
 * below it once, so most runs are quick), then
 * records: a kind byte (odd: a tag), 8 bytes of the value (a double's bits;
 * every 4th metric rounded to one decimal, as logged), the key up to a NUL
 * (at most 255 bytes), for a tag its text up to a NUL (at most 511).
 */
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "body_oracle.h"

#define MAX_RECS 2600

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static size_t take_str(const unsigned char **p, const unsigned char *end, char *out, size_t cap)
{
    size_t n = 0;

    while (*p < end && **p && n < cap - 1)
        out[n++] = (char)*(*p)++;
    if (*p < end && **p == 0)
        (*p)++;
    out[n] = '\0';
    return n;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static sm_record in[MAX_RECS];
    static sm_entry recs[MAX_RECS];
    /* the records point at their strings (scopemeter.h) */
    static char keys[MAX_RECS][256], texts[MAX_RECS][512];
    const unsigned char *p = data + 1, *end = data + size;
    size_t n = 0, base, used, shipped;
    sm_body b = {0};
    sm_ring ring;
    json_t *want, *got;
    int repeat, got_n;

    if (size < 1)
        return 0;
    repeat = data[0] >= 0xC0 ? 1 + data[0] % 64 : 1;
    while (p + 9 <= end && n < MAX_RECS) {
        sm_record *x = &in[n];
        memset(x, 0, sizeof *x);
        x->kind = *p++ & 1 ? SM_RECORD_TAG : SM_RECORD_METRIC;
        memcpy(&x->value, p, sizeof x->value);
        p += 8;
        if (n % 4 == 0)
            x->value = sm__round1(x->value);
        x->timestamp_ms = (int64_t)(n * 1000) - 5000;
        x->step = (int64_t)n - 3;
        if (!take_str(&p, end, keys[n], sizeof keys[n]))
            keys[n][0] = 'k', keys[n][1] = '\0';
        x->key = keys[n];
        if (x->kind == SM_RECORD_TAG) {
            if (!take_str(&p, end, texts[n], sizeof texts[n]))
                texts[n][0] = 't', texts[n][1] = '\0';
            x->text = texts[n];
            x->text_len = strlen(texts[n]);
        }
        n++;
    }
    for (base = n; repeat > 1 && n + base <= MAX_RECS; repeat--, n += base)
        memcpy(in + n, in, base * sizeof in[0]);
    if (sm__ring_init(&ring, MAX_RECS) < 0)
        abort();
    sm__ring_push(&ring, in, n);
    got_n = sm__ring_peek(&ring, recs, MAX_RECS, 0);
    if (got_n < 0)
        got_n = 0;
    if (sm__body_log_batch(&b, "fuzz_run", &ring, recs, (size_t)got_n, 7) < 0)
        abort();
    want = oracle("fuzz_run", &ring, recs, (size_t)got_n, 7, &used, &shipped);
    got = json_loads(b.buf, 0, NULL);
    if (!got || !json_equal(got, want) || !values_identical(got, want) || b.used != used ||
        b.shipped != shipped || b.len != strlen(b.buf) ||
        (b.len > SM_MLFLOW_MAX_BODY && b.used > 1))
        abort();
    json_decref(got);
    json_decref(want);
    sm__body_free(&b);
    sm__ring_destroy(&ring);
    return 0;
}
