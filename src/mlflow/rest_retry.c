/*
 * rest_retry.c — the REST client's retry policy (mlflow_rest.h,
 * docs/rest.md "Retry policy"): which answers are worth another try, how
 * long to wait before it (the server's Retry-After, else exponential
 * backoff with full jitter), and the retry loop of the one-off calls
 * (sm__rest_call: the CLI helpers, the run check at start).
 *
 * Semantics from MLflow (mlflow/utils/request_utils.py): transient
 * statuses 408, 429, 500, 502, 503, 504 are retried, and so are the other
 * 5xx and connection errors; Retry-After is honoured (capped at 10 min).
 *
 * Why apart: the REST sink's shipping thread has its own loop (its points
 * wait in a ring) but the same rules, so they are written once, here.  This
 * file must never sleep past the caller's deadline or a cancel (waits are
 * cut into slices that check both), and never keep state between calls:
 * the jitter's PRNG state is the caller's (sm__rest_seed).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rest_private.h"
#include "sink.h"

int sm__rest_retryable_status(long s)
{
    /* MLflow's _TRANSIENT_FAILURE_RESPONSE_CODES are 408, 429, 500, 502,
     * 503, 504; every 5xx is a server-side condition worth retrying here,
     * because the points wait in the ring anyway. */
    return s == 408 || s == 429 || (s >= 500 && s <= 599);
}

uint64_t sm__rest_seed(const void *salt)
{
    struct timespec ts;
    uint64_t s;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)getpid() << 16 ^
        (uint64_t)(uintptr_t)salt;
    return s ? s : 0x9e3779b97f4a7c15ull;
}

static double uniform01(uint64_t *s)
{
    /* xorshift64*: plenty for jitter */
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return (double)((x * 0x2545F4914F6CDD1Dull) >> 11) / (double)(1ull << 53);
}

double sm__rest_backoff(int attempt, double retry_after, double base_s, double cap_s,
                       uint64_t *seed)
{
    double ceil_s;

    if (retry_after >= 0)
        return retry_after > 600 ? 600 : retry_after;
    if (attempt < 0)
        attempt = 0;
    if (attempt > 30)
        attempt = 30;
    ceil_s = base_s * (double)(1u << attempt);
    if (ceil_s > cap_s)
        ceil_s = cap_s;
    /* "full jitter" (AWS architecture blog, Exponential Backoff And Jitter):
     * retries of many ranks spread over the whole window */
    return ceil_s * uniform01(seed);
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

/* Time left for the last try of a bounded call (a refused connection
 * answers in microseconds; a hanging one is cut at the deadline anyway). */
#define LAST_TRY_MARGIN_S 0.1

int sm__rest_call(sm_rest *r, const char *method, const char *endpoint, json_t *req,
                 json_t **resp, double deadline, char *err, size_t errlen)
{
    char *body = NULL;
    size_t len = 0;
    sm_rest_result res = {0};
    uint64_t seed = sm__rest_seed(r);
    int attempt = 0, outcome;
    atomic_llong dl = (long long)(deadline * 1000.0);
    atomic_llong *saved = r->abort_deadline_ms;

    if (resp)
        *resp = NULL;
    r->last_http = 0;
    r->last_error_code[0] = '\0';
    if (req) {
        body = json_dumps(req, JSON_COMPACT);
        if (!body) {
            snprintf(err, errlen, "out of memory");
            return SM_REST_FAILED;
        }
        len = strlen(body);
    }
    r->abort_deadline_ms = &dl; /* a request in flight stops at the deadline too */
    for (;;) {
        double wait;

        outcome = sm__rest_once(r, method, endpoint, body, len, &res);
        r->last_http = res.http;
        snprintf(r->last_error_code, sizeof r->last_error_code, "%s", res.error_code);
        if (outcome != SM_REST_RETRY)
            break;
        wait = sm__rest_backoff(attempt++, res.retry_after, 0.5, 8.0, &seed);
        if (sm__now_mono() + wait >= deadline) {
            /* The caller's bound is used whole: a jittered pause that would
             * overshoot it becomes one last try just before it, so a
             * server that comes up late in the bound is still met, and the
             * bound, not the dice, says when the caller goes on. */
            double left = deadline - sm__now_mono() - LAST_TRY_MARGIN_S;
            if (left <= LAST_TRY_MARGIN_S || res.retry_after >= 0) {
                snprintf(err, errlen, "%s (gave up after %d attempts)", res.msg, attempt);
                goto out;
            }
            wait = left;
        }
        sm__rest_result_clear(&res);
        /* in slices, so a cancel (a SIGTERM to scopemeter run) ends it at once */
        for (double end = sm__now_mono() + wait; !sm__rest_cancel_asked() && sm__now_mono() < end;)
            sm__sleep(end - sm__now_mono() < 0.05 ? end - sm__now_mono() : 0.05);
        if (sm__rest_cancel_asked()) {
            outcome = SM_REST_ABORTED;
            snprintf(err, errlen, "%.*s on %s: cancelled", (int)strcspn(endpoint, "?"),
                     endpoint, r->shown);
            goto out;
        }
    }
    if (outcome == SM_REST_OK) {
        if (resp) {
            *resp = res.body ? res.body : json_object();
            res.body = NULL;
        }
    } else if (outcome == SM_REST_ABORTED) {
        snprintf(err, errlen, "%.*s on %s: %s", (int)strcspn(endpoint, "?"), endpoint, r->shown,
                 sm__rest_cancel_asked() ? "cancelled" : "no answer before the deadline");
    } else {
        snprintf(err, errlen, "%s", res.msg);
    }
out:
    r->abort_deadline_ms = saved;
    sm__rest_result_clear(&res);
    free(body);
    return outcome;
}
