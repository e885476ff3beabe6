/*
 * test_body.c — the direct log-batch writer (src/mlflow/body.c) against the
 * jansson build it replaced: for random batches (keys and tag texts with
 * quotes, backslashes, control characters, valid and invalid UTF-8, overlong
 * forms and surrogates; values NaN/inf, huge, negative, -0, subnormal, in
 * 0.1 steps; more records than MLflow's limits; bodies over 1 MB), the body
 * read back with json_loads must equal the object the jansson build made —
 * the same records covered, every value the same double bit for bit.
 *
 * The oracle is the jansson build as sink_mlflow.c had it (body_oracle.h).
 * SM_TEST_BODY_BATCHES / SM_TEST_BODY_VALUES scale the test.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "body_oracle.h"
#include "check.h"

static uint64_t seed = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
    return check_rnd(&seed);
}

/* ---- random inputs -------------------------------------------------------- */
/* A text of up to max bytes (no NUL): mostly what scopemeter's keys look
 * like, often the characters JSON must escape and bytes that are not UTF-8. */
static void random_text(char *out, size_t max)
{
    static const char *const pieces[] = {
        "system/cpu_utilization_percentage", "/rank0", "container_memory", "\"", "\\",
        "\n", "\t", "\r", "\b", "\f", "\x01", "\x1f", "\x7f", "/", "é", "€", "😀",
        "\xc3", "\xe2\x82", "\xf0\x9f\x98", "\x80", "\xbf", "\xc0\x80", "\xc1\xbf",
        "\xe0\x80\x80", "\xed\xa0\x80", "\xed\xbf\xbf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80",
        "\xf8\x88\x80\x80\x80", "\xff", "\xfe", "ß", "\xef\xbf\xbf", "\xf4\x8f\xbf\xbf",
        "gpu0", "k8s:pod/ns", " ", "a",
    };
    size_t n = 0, want = rnd() % 4 == 0 ? max : rnd() % (max + 1);
    int style = (int)(rnd() % 4);

    while (n < want) {
        const char *p;
        size_t l;
        if (style == 0) { /* random bytes, any */
            out[n++] = (char)(1 + rnd() % 255);
            continue;
        }
        p = pieces[rnd() % (sizeof pieces / sizeof pieces[0])];
        l = strlen(p);
        if (n + l > want)
            l = want - n; /* a cut sequence is one more invalid case */
        memcpy(out + n, p, l);
        n += l;
    }
    out[n] = '\0';
}

static double random_value(void)
{
    uint64_t bits;
    double v;

    switch (rnd() % 12) {
    case 0:
        return NAN;
    case 1:
        return rnd() % 2 ? INFINITY : -INFINITY;
    case 2:
        bits = rnd();
        memcpy(&v, &bits, sizeof v);
        return isfinite(v) ? v : 1.5;
    case 3:
        return (double)(int64_t)(rnd() % 2000001 - 1000000) / 10.0; /* 0.1 steps */
    case 4:
        return sm__round1((double)(rnd() >> 11) * 0x1p-53 * pow(10, (double)(rnd() % 30) - 6));
    case 5:
        return -sm__round1((double)(rnd() % 100000000000ull) / 7.0);
    case 6:
        return rnd() % 2 ? 0.0 : -0.0;
    case 7:
        return (rnd() % 2 ? 1 : -1) * 1.7976931348623157e308 / (double)(1 + rnd() % 1000);
    case 8:
        return 4.9e-324 * (double)(rnd() % 1000); /* subnormals */
    case 9:
        return sm__round1((double)(rnd() % (1ull << 52)) * (rnd() % 2 ? 1 : -1));
    case 10:
        return (double)(rnd() % 10000) + 0.5; /* exact halves */
    default:
        return sm__round1((double)(rnd() % 100000) / 100.0);
    }
}

static void test_batches(void)
{
    size_t batches = check_env_count("SM_TEST_BODY_BATCHES", 400), failures = 0, halved = 0;
    sm_body b = {0};
    sm_entry *recs = calloc(2600, sizeof *recs);
    sm_record *in = calloc(2600, sizeof *in);
    /* the records point at their strings (scopemeter.h): storage for them */
    char (*keys)[256] = calloc(2600, sizeof *keys);
    char (*texts)[512] = calloc(2600, sizeof *texts);

    for (size_t t = 0; t < batches && failures < 5; t++) {
        sm_ring ring;
        size_t n = rnd() % (t % 10 == 0 ? 2600 : 64), used, shipped, maxkey;
        int tag_pct = (int)(rnd() % 101);
        int64_t step_base = (int64_t)(rnd() % 1000000) - (t % 7 == 0 ? 500000 : 0);
        json_t *want, *got;
        json_error_t jerr;
        int rc;

        /* long escaped keys now and then: bodies over 1 MB are halved */
        maxkey = t % 10 == 0 && rnd() % 2 ? sizeof keys[0] - 1 : 40;
        CHECK(sm__ring_init(&ring, 4096) == 0);
        for (size_t i = 0; i < n; i++) {
            sm_record *x = &in[i];
            char *key = keys[i], *text = texts[i];
            memset(x, 0, sizeof *x);
            x->kind = (int)(rnd() % 100) < tag_pct ? SM_RECORD_TAG : SM_RECORD_METRIC;
            random_text(key, maxkey);
            if (!key[0])
                key[0] = 'k'; /* the ring keeps no empty key */
            if (maxkey > 40 && rnd() % 2)
                memset(key, 1, maxkey); /* the worst escaping: \u0001 each */
            x->key = key;
            if (x->kind == SM_RECORD_TAG) {
                random_text(text, rnd() % 8 ? 40 : sizeof texts[0] - 1);
                if (!text[0])
                    text[0] = 't';
                x->text = text;
                x->text_len = strlen(text);
            }
            x->value = random_value();
            x->timestamp_ms = (int64_t)(rnd() >> 12) * (rnd() % 9 == 0 ? -1 : 1);
            x->step = (int64_t)(int32_t)rnd();
        }
        sm__ring_push(&ring, in, n);
        rc = sm__ring_peek(&ring, recs, 2600, 0);
        CHECK(rc == (int)n || (n == 0 && rc == 0));
        if (rc < 0)
            rc = 0;
        rc = sm__body_log_batch(&b, "0123abcd_run-id", &ring, recs, (size_t)rc, step_base);
        CHECK_EQ_INT(rc, 0);
        want = oracle("0123abcd_run-id", &ring, recs, n, step_base, &used, &shipped);
        got = json_loads(b.buf, 0, &jerr);
        if (!got || !json_equal(got, want) || !values_identical(got, want) ||
            b.used != used || b.shipped != shipped || b.len != strlen(b.buf) ||
            (b.len > SM_MLFLOW_MAX_BODY && b.used > 1)) {
            char *w = json_dumps(want, JSON_COMPACT);
            failures++;
            fprintf(stderr, "batch %zu (n %zu): used %zu/%zu shipped %zu/%zu, %s\n got  %.600s\n"
                    " want %.600s\n", t, n, b.used, used, b.shipped, shipped,
                    got ? "differs" : jerr.text, b.buf, w ? w : "?");
            free(w);
        }
        halved += used < n && b.len > 100000;
        CHECK(failures == 0 || t + 1 < batches);
        json_decref(got);
        json_decref(want);
        sm__ring_destroy(&ring);
    }
    CHECK_EQ_INT(failures, 0);
    CHECK(halved > 0); /* the 1 MB rule was exercised */
    fprintf(stderr, "test_body: %zu random batches, %zu differ from the jansson build (%zu "
            "halved)\n", batches, failures, halved);
    sm__body_free(&b);
    free(recs);
    free(in);
    free(keys);
    free(texts);
}

/* the limits: exactly what fits, nothing more */
static void test_limits(void)
{
    sm_ring ring;
    sm_record *in = calloc(1300, sizeof *in);
    char (*keys)[16] = calloc(1300, sizeof *keys);
    sm_entry *recs = calloc(1300, sizeof *recs);
    sm_body b = {0};

    CHECK(sm__ring_init(&ring, 2000) == 0);
    for (int i = 0; i < 1200; i++) {
        snprintf(keys[i], sizeof keys[i], "m%d", i % 50);
        in[i].key = keys[i];
        in[i].value = i == 3 ? NAN : i / 10.0;
    }
    sm__ring_push(&ring, in, 1200);
    CHECK_EQ_INT(sm__ring_peek(&ring, recs, 1300, 0), 1200);
    CHECK_EQ_INT(sm__body_log_batch(&b, "r", &ring, recs, 1200, 0), 0);
    CHECK_EQ_INT(b.shipped, 1000);
    CHECK_EQ_INT(b.used, 1001); /* the NaN is covered, not shipped */
    CHECK_EQ_INT(b.nonfinite, 1);
    CHECK_EQ_STR(b.nonfinite_key, "m3");
    CHECK(strncmp(b.buf, "{\"run_id\":\"r\",\"metrics\":[{\"key\":\"m0\",\"value\":0.0,"
                  "\"timestamp\":0,\"step\":0},", 68) == 0);
    /* all non-finite: nothing to ship */
    CHECK_EQ_INT(sm__body_log_batch(&b, "r", &ring, recs + 3, 1, 0), 0);
    CHECK_EQ_INT(b.shipped, 0);
    CHECK_EQ_INT(b.used, 1);
    sm__body_free(&b);
    sm__ring_destroy(&ring);
    free(in);
    free(keys);
    free(recs);
}

/* Every double the writer formats reads back as itself, and a logged
 * value (round(x, 1)) below 2^49 takes the k/10 path, never printf. */
static void test_reals(void)
{
    size_t count = check_env_count("SM_TEST_BODY_VALUES", 3000000), bad = 0, slow = 0;
    char out[40];

    for (size_t i = 0; i < count; i++) {
        double v, back;
        uint64_t bits = rnd();
        size_t len;
        int logged = 0;

        switch (i % 4) {
        case 0:
            memcpy(&v, &bits, sizeof v);
            if (!isfinite(v))
                continue;
            break;
        case 1:
            v = random_value();
            if (!isfinite(v))
                continue;
            break;
        default:
            /* logged values: every magnitude the collectors produce */
            v = sm__round1(((double)(bits >> 11) * 0x1p-53 - 0.5) *
                          pow(2, (double)(rnd() % 49)));
            logged = 1;
        }
        len = sm__body_real(out, v);
        out[len] = '\0';
        back = strtod(out, NULL);
        if (!same_double(v, back) || !(strchr(out, '.') || strchr(out, 'e'))) {
            if (bad++ < 5)
                fprintf(stderr, "%.17g written as %s\n", v, out);
        }
        if (logged && (strchr(out, 'e') || len > 19 || strchr(out, '.') != out + len - 2))
            slow++;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(slow, 0);
    {
        size_t l = sm__body_real(out, -0.0);
        CHECK(l == 4 && memcmp(out, "-0.0", 4) == 0);
        l = sm__body_real(out, 123456.7);
        CHECK(l == 8 && memcmp(out, "123456.7", 8) == 0);
        l = sm__body_real(out, 1e300);
        out[l] = '\0';
        CHECK(strtod(out, NULL) == 1e300);
        l = sm__body_real(out, 0x1p60);
        out[l] = '\0';
        CHECK(strtod(out, NULL) == 0x1p60 && strchr(out, '.'));
    }
}

int main(void)
{
    test_limits();
    test_reals();
    test_batches();
    return CHECK_DONE();
}
