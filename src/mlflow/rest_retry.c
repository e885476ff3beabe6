/*
 * rest_retry.c — the REST client's retry policy (mlflow_rest.h,
 * docs/rest.md "Retry policy"): which answers are worth another try, how
 * long to wait before it (the server's Retry-After, else exponential
 * backoff with full jitter), and the retry loop of the one-off calls
 * (sm__rest_call: the CLI helpers, the run check at start).  Which
 * answers are worth another try is answer.c's (sm__rest_outcome_of), read
 * by rest_http.c before an answer reaches here.
 *
 * Semantics from MLflow (mlflow/utils/request_utils.py): transient
 * statuses are retried, and so are connection errors; Retry-After is
 * honoured (capped at 10 min).
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

/* Time left for the last try of a bounded call (a refused connection
 * answers in microseconds; a hanging one is cut at the deadline anyway). */
#define LAST_TRY_MARGIN_S 0.1

int sm__rest_call(sm_rest *r, const char *method, const char *endpoint, json_t *req,
                 sm_rest_result *res, double deadline, char *err, size_t errlen)
{
    char *body = NULL;
    size_t len = 0;
    uint64_t seed = sm__rest_seed(r);
    int attempt = 0, outcome;
    atomic_llong dl = (long long)(deadline * 1000.0);
    atomic_llong *saved = r->abort_deadline_ms;

    memset(res, 0, sizeof *res);
    res->retry_after = -1;
    if (req) {
        body = json_dumps(req, JSON_COMPACT);
        if (!body) {
            res->outcome = SM_REST_FAILED;
            snprintf(err, errlen, "out of memory");
            return res->outcome;
        }
        len = strlen(body);
    }
    r->abort_deadline_ms = &dl; /* a request in flight stops at the deadline too */
    for (;;) {
        double wait;

        outcome = sm__rest_once(r, method, endpoint, body, len, res);
        if (outcome != SM_REST_RETRY)
            break;
        wait = sm__rest_backoff(attempt++, res->retry_after, 0.5, 8.0, &seed);
        if (sm__now_mono() + wait >= deadline) {
            /* The caller's bound is used whole: a jittered pause that would
             * overshoot it becomes one last try just before it, so a
             * server that comes up late in the bound is still met, and the
             * bound, not the dice, says when the caller goes on. */
            double left = deadline - sm__now_mono() - LAST_TRY_MARGIN_S;
            if (left <= LAST_TRY_MARGIN_S || res->retry_after >= 0) {
                snprintf(err, errlen, "%s (gave up after %d attempts)", res->msg, attempt);
                goto out;
            }
            wait = left;
        }
        sm__rest_result_clear(res);
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
        if (!res->body)
            res->body = json_object();
    } else if (outcome == SM_REST_ABORTED) {
        snprintf(err, errlen, "%.*s on %s: %s", (int)strcspn(endpoint, "?"), endpoint, r->shown,
                 sm__rest_cancel_asked() ? "cancelled" : "no answer before the deadline");
    } else {
        snprintf(err, errlen, "%s", res->msg);
    }
out:
    res->outcome = outcome;
    r->abort_deadline_ms = saved;
    free(body);
    return outcome;
}
