/*
 * sink_mlflow.c — the REST sink: ships finished records to an MLflow run
 * with runs/log-batch from its own thread.
 *
 * Both surfaces ship through it: `scopemeter run` and, for an http(s)
 * tracking URI, the Python front (docs/design.md § Shipping).
 *
 * The sampling thread only pushes into a bounded ring (sink.h, ring.c);
 * sampling never waits on the network (docs/design.md §6).  The
 * shipping thread owns the one libcurl easy handle (its connection is kept
 * alive between windows where the server allows) and sleeps until a window
 * arrives or stop begins — no polling.  Then it peeks the oldest records,
 * posts them as one log-batch within MLflow's limits, and removes them from
 * the ring only once the server took them — so the order of points survives
 * an outage and nothing is lost while the ring has room.  When the ring is
 * full the oldest records are overwritten (counted, reported).
 *
 * Many collectors of one job start together and so post together, at every
 * window and above all at the end of the run.  MLflow's server holds two
 * pooled database connections per log-batch and deadlocks its default pool
 * with about 15 simultaneous ones, until its 30 s pool timeout
 * (bench/README.md).  So each post waits a random delay of up to 50 ms per
 * collector of the job (at most half a window; at stop, at most a quarter
 * of what is left of the bound): 64 collectors spread over 3.2 s.
 *
 * At start the run is checked once (runs/get): a missing or deleted run
 * fails the start instead of refusing every window; so do credentials
 * that may read the run but not write to it (a no-op runs/update: 401/403).
 *
 *   2xx                          consumed
 *   408, 429, 5xx, no connection retried after backoff (full jitter, cap
 *                                30 s) or the server's Retry-After
 *   other 4xx                    one line with MLflow's error_code/message;
 *                                that batch is dropped and counted, never retried
 *
 * Stop: flush(deadline) closes the ring and lets the thread deliver what is
 * queued; at the deadline the request in flight is aborted (the xferinfo
 * callback sees the deadline/abort flag) and one line says how many points
 * were not delivered.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlflow_rest.h"
#include "sink.h"

#define BACKOFF_BASE_S 1.0
#define BACKOFF_CAP_S 30.0
#define BACKOFF_FLUSH_CAP_S 2.0
#define SPREAD_PER_COLLECTOR_S 0.05
#define CHECK_TIMEOUT_S 5.0

typedef struct mlsink {
    sm_sink base;
    sm_ring ring;
    sm_rest rest;
    char run_id[260];
    size_t cap;
    double spread_s;          /* upper bound of the random delay before a post */
    int64_t step_base;        /* added to every step: after the run's earlier system steps */
    double period_s;

    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;       /* guards flushing, done; cv wakes backoff waits and flush */
    pthread_cond_t cv;
    int flushing;
    int done;                 /* the shipping thread has left its loop */
    atomic_int abort;         /* stop now: the in-flight request is aborted */
    atomic_llong deadline_ms; /* flush deadline (monotonic ms), 0 before flush */

    /* shipping thread only */
    sm_entry *batch;          /* SM_MLFLOW_MAX_ENTITIES entries */
    uint64_t seed;
    int attempt;
    double outage_since;      /* monotonic time of the first failure, 0 when healthy */
    uint64_t dropped_before;  /* ring drops when the outage began */
    uint64_t dropped_said;    /* ring drops already reported */
    char last_refusal[64];    /* error_code of the last refusal already printed */

    /* counters (atomic: read by dropped() from the monitor's thread) */
    atomic_ullong delivered;
    atomic_ullong refused;
    atomic_ullong nonfinite;
    /* Records the ring overwrote while their POST was in flight and that the
     * server then took: the ring counted them as dropped, but they landed. */
    atomic_ullong rescued;
} mlsink;

/* ---- JSON of one batch --------------------------------------------------------- */

/* A JSON string of s (at most cap bytes): bytes that are not valid UTF-8
 * become '?' (jansson refuses invalid UTF-8, and a cgroup path may hold
 * anything). */
static json_t *json_text(const char *s, size_t cap)
{
    char buf[1024];
    size_t n = strnlen(s, cap), o = 0, i = 0;
    json_t *j;

    if (n >= sizeof buf)
        n = sizeof buf - 1;
    j = json_stringn(s, n);
    if (j)
        return j;
    /* invalid somewhere: keep ASCII and well-formed sequences, '?' for the rest */
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
    /* overlong forms or surrogates survived: ASCII only */
    for (i = 0; i < o; i++)
        if ((unsigned char)buf[i] >= 0x80)
            buf[i] = '?';
    return json_stringn(buf, o);
}

/* Builds the log-batch body from the first records of recs[0..n) that fit
 * MLflow's limits.  *used receives how many records it covers (including
 * non-finite values it skipped); *body is NULL when none of them is
 * shippable (all non-finite).  0 or -ENOMEM. */
static int build_body(mlsink *s, const sm_entry *recs, size_t n, size_t *used, size_t *shipped,
                      char **body, size_t *len)
{
    json_t *root = NULL, *metrics = NULL, *tags = NULL;
    size_t nm, nt, i;
    int rc = -ENOMEM;

    *body = NULL;
    *len = 0;
    *used = 0;
    *shipped = 0;
again:
    json_decref(root);
    root = json_object();
    metrics = json_array();
    tags = json_array();
    if (!root || !metrics || !tags) {
        json_decref(metrics);
        json_decref(tags);
        goto out;
    }
    json_object_set_new(root, "run_id", json_string(s->run_id));
    json_object_set_new(root, "metrics", metrics);
    json_object_set_new(root, "params", json_array());
    json_object_set_new(root, "tags", tags);
    nm = nt = 0;
    for (i = 0; i < n; i++) {
        const sm_entry *r = &recs[i];
        const char *key = sm_ring_str(&s->ring, r->key);
        json_t *o;

        if (nm + nt >= SM_MLFLOW_MAX_ENTITIES)
            break;
        if (r->text == 0) { /* a metric */
            if (nm >= SM_MLFLOW_MAX_METRICS)
                break;
            if (!isfinite(r->value)) {
                /* NaN and inf are not JSON: skipped, said once */
                if (atomic_fetch_add(&s->nonfinite, 1) == 0)
                    sm_log(SM_WARN, "skipped a non-finite value of %.200s (NaN/inf is not "
                           "JSON); further ones are counted and reported at stop", key);
                continue;
            }
            o = json_object();
            if (!o)
                goto out;
            json_object_set_new(o, "key", json_text(key, SIZE_MAX));
            json_object_set_new(o, "value", json_real(r->value));
            json_object_set_new(o, "timestamp", json_integer(r->timestamp_ms));
            json_object_set_new(o, "step", json_integer(s->step_base + r->step));
            json_array_append_new(metrics, o);
            nm++;
        } else {
            if (nt >= SM_MLFLOW_MAX_TAGS)
                break;
            o = json_object();
            if (!o)
                goto out;
            json_object_set_new(o, "key", json_text(key, SIZE_MAX));
            json_object_set_new(o, "value", json_text(sm_ring_str(&s->ring, r->text), SIZE_MAX));
            json_array_append_new(tags, o);
            nt++;
        }
    }
    *used = i;
    *shipped = nm + nt;
    if (nm + nt == 0) {
        rc = 0;
        goto out;
    }
    *body = json_dumps(root, JSON_COMPACT);
    if (!*body)
        goto out;
    *len = strlen(*body);
    if (*len > SM_MLFLOW_MAX_BODY && i > 1) {
        /* MLflow refuses a request over 1 MB: take half as many records */
        free(*body);
        *body = NULL;
        n = i / 2;
        goto again;
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

/* ---- the shipping thread -------------------------------------------------------- */

/* Records the ring overwrote that never reached the server. */
static uint64_t lost(mlsink *s)
{
    return sm_ring_dropped(&s->ring) - atomic_load(&s->rescued);
}

static void report_drops(mlsink *s)
{
    uint64_t d = sm_ring_dropped(&s->ring);

    if (d > s->dropped_said) {
        if (s->dropped_said == 0)
            sm_log(SM_WARN, "buffer of %zu points full while MLflow is unreachable: the "
                   "oldest points are dropped (counted, reported when the server is back "
                   "and at stop)", s->cap);
        s->dropped_said = d;
    }
}

/* Sleeps up to secs, waking early on abort and when a flush begins (so
 * queued points get one more try right away).  Looks at the ring once a
 * second, so the first overflow is said when it happens.  Returns 1 when a
 * flush began meanwhile. */
static int wait_for(mlsink *s, double secs)
{
    double until = sm_now_mono() + secs;
    struct timespec ts;
    int flushing, began;

    pthread_mutex_lock(&s->mu);
    flushing = s->flushing;
    while (!atomic_load(&s->abort) && s->flushing == flushing && sm_now_mono() < until) {
        double slice = sm_now_mono() + 1.0;
        sm_mono_timespec(slice < until ? slice : until, &ts);
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
        pthread_mutex_unlock(&s->mu);
        report_drops(s);
        pthread_mutex_lock(&s->mu);
    }
    began = s->flushing != flushing;
    pthread_mutex_unlock(&s->mu);
    return began;
}

static double uniform01(uint64_t *seed)
{
    *seed ^= *seed << 13; /* xorshift64 */
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    return (double)(*seed >> 11) / 9007199254740992.0;
}

/* The random delay before posting a fresh window (see the top of the file):
 * within half a window while running, within a quarter of what is left of
 * the stop bound at stop. */
static void spread(mlsink *s)
{
    for (;;) {
        long long dl = atomic_load(&s->deadline_ms);
        double room = dl > 0 ? ((double)dl / 1000.0 - sm_now_mono()) / 4 : s->period_s / 2;
        double bound = s->spread_s < room ? s->spread_s : room;

        if (!(bound > 0.001))
            return;
        /* a stop that begins meanwhile draws again within its own bound */
        if (!wait_for(s, bound * uniform01(&s->seed)) || dl > 0)
            return;
    }
}

static void on_failure(mlsink *s, const sm_rest_result *res)
{
    if (s->outage_since == 0) {
        s->outage_since = sm_now_mono();
        s->dropped_before = lost(s);
        sm_log(SM_WARN, "cannot deliver to MLflow (%s); %zu points wait in the buffer "
               "(room for %zu) and are retried%s", res->msg, sm_ring_len(&s->ring), s->cap,
               res->retry_after >= 0 ? ", honouring Retry-After" : " with backoff");
    }
    report_drops(s);
}

static void on_success(mlsink *s)
{
    if (s->outage_since > 0) {
        uint64_t d = lost(s) - s->dropped_before;
        if (d)
            sm_log(SM_INFO, "MLflow reachable again after %.0f s; %llu oldest points were "
                   "dropped because the buffer was full",
                   sm_now_mono() - s->outage_since, (unsigned long long)d);
        else
            sm_log(SM_INFO, "MLflow reachable again after %.0f s; no point lost",
                   sm_now_mono() - s->outage_since);
        s->outage_since = 0;
    }
    s->attempt = 0;
}

/* n records refused; `counted` of them still in the ring (the others were
 * overwritten meanwhile and are counted as dropped by the ring already). */
static void on_refused(mlsink *s, const sm_rest_result *res, size_t n, size_t counted)
{
    atomic_fetch_add(&s->refused, counted);
    /* one line per kind of refusal: a run that was deleted refuses every
     * batch, and a line per window would flood the training log */
    if (strcmp(s->last_refusal, res->error_code[0] ? res->error_code : "?") != 0) {
        snprintf(s->last_refusal, sizeof s->last_refusal, "%s",
                 res->error_code[0] ? res->error_code : "?");
        sm_log(SM_WARN, "MLflow refused %zu records (%s); not retried, they are dropped "
               "and counted", n, res->msg);
    }
}

/* Past the flush deadline: nothing more is tried (flush is about to abort). */
static int past_deadline(mlsink *s)
{
    long long d = atomic_load(&s->deadline_ms);

    return d > 0 && sm_now_mono() * 1000.0 >= (double)d;
}

static void *ship_main(void *arg)
{
    mlsink *s = arg;

    int fresh = 1; /* the next post is a new window's, not a retry */

    for (;;) {
        sm_rest_result res;
        size_t used = 0, shipped = 0, len = 0, removed;
        char *body = NULL;
        int n, outcome;
        double cap;

        if (atomic_load(&s->abort) || past_deadline(s))
            break;
        /* sleeps until a window is pushed or the ring is closed (stop) */
        n = sm_ring_peek(&s->ring, s->batch, SM_MLFLOW_MAX_ENTITIES, -1);
        if (n == -EPIPE)
            break; /* closed and empty: all delivered */
        if (n <= 0)
            continue;
        if (fresh && s->attempt == 0) {
            fresh = 0;
            spread(s);
            if (atomic_load(&s->abort) || past_deadline(s))
                break;
            /* windows pushed meanwhile go in the same post */
            n = sm_ring_peek(&s->ring, s->batch, SM_MLFLOW_MAX_ENTITIES, 0);
            if (n <= 0)
                continue;
        }
        if (build_body(s, s->batch, (size_t)n, &used, &shipped, &body, &len) < 0) {
            wait_for(s, 1.0); /* out of memory: try again later */
            continue;
        }
        if (!body) {
            sm_ring_consume(&s->ring, used);
            continue;
        }
        outcome = sm_rest_once(&s->rest, "POST", "runs/log-batch", body, len, &res);
        free(body);
        switch (outcome) {
        case SM_REST_OK:
            removed = sm_ring_consume(&s->ring, used);
            atomic_fetch_add(&s->rescued, used - removed); /* delivered after all */
            atomic_fetch_add(&s->delivered, shipped);
            on_success(s);
            fresh = sm_ring_len(&s->ring) == 0; /* a backlog goes out at once */
            break;
        case SM_REST_REFUSED:
            removed = sm_ring_consume(&s->ring, used);
            on_refused(s, &res, used, removed);
            on_success(s); /* the server answered: not an outage */
            fresh = sm_ring_len(&s->ring) == 0;
            break;
        case SM_REST_ABORTED:
            break;
        default: /* SM_REST_RETRY, SM_REST_FAILED */
            on_failure(s, &res);
            /* while stopping, a server that comes back is used within 2 s */
            cap = atomic_load(&s->deadline_ms) > 0 ? BACKOFF_FLUSH_CAP_S : BACKOFF_CAP_S;
            wait_for(s, sm_rest_backoff(s->attempt++, res.retry_after, BACKOFF_BASE_S, cap,
                                        &s->seed));
            break;
        }
        sm_rest_result_clear(&res);
    }
    pthread_mutex_lock(&s->mu);
    s->done = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- sink ops ------------------------------------------------------------------- */
static void ml_push(sm_sink *base, const sm_record *recs, size_t n)
{
    mlsink *s = base->impl;

    sm_ring_push(&s->ring, recs, n);
}

/* Stops the thread: abort what is in flight, wake every wait, join. */
static void stop_thread(mlsink *s)
{
    if (!s->thread_started)
        return;
    atomic_store(&s->abort, 1);
    sm_ring_close(&s->ring);
    pthread_mutex_lock(&s->mu);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    s->thread_started = 0;
}

static int ml_flush(sm_sink *base, double deadline)
{
    mlsink *s = base->impl;
    struct timespec ts;
    size_t left;
    uint64_t nonfinite;
    int done;

    if (!s->thread_started)
        return sm_ring_len(&s->ring) ? -ETIMEDOUT : 0;
    /* the request in flight at the deadline stops by itself (xferinfo) */
    atomic_store(&s->deadline_ms, (long long)(deadline * 1000.0));
    sm_ring_close(&s->ring); /* the monitor pushes nothing after flush */
    sm_mono_timespec(deadline, &ts);
    pthread_mutex_lock(&s->mu);
    s->flushing = 1;
    pthread_cond_broadcast(&s->cv);
    while (!s->done && sm_now_mono() < deadline)
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    done = s->done;
    pthread_mutex_unlock(&s->mu);
    stop_thread(s);

    left = sm_ring_len(&s->ring);
    nonfinite = atomic_load(&s->nonfinite);
    /* buffer overflow and refusals were said when they happened; the
     * monitor reports their total (dropped()) after this */
    if (nonfinite > 1)
        sm_log(SM_INFO, "%llu non-finite values were skipped in all",
               (unsigned long long)nonfinite);
    if (!done || left) {
        sm_log(SM_WARN, "stop deadline reached: %zu points not delivered to MLflow at %s",
               left, s->rest.shown);
        return -ETIMEDOUT;
    }
    return 0;
}

static uint64_t ml_dropped(sm_sink *base)
{
    mlsink *s = base->impl;

    return lost(s) + atomic_load(&s->refused);
}

static void ml_counts(sm_sink *base, sm_sink_counts *out)
{
    mlsink *s = base->impl;

    out->delivered = atomic_load(&s->delivered);
    out->overflow = lost(s);
    out->refused = atomic_load(&s->refused);
    out->undelivered = sm_ring_len(&s->ring);
}

static void ml_close(sm_sink *base)
{
    mlsink *s;

    if (!base)
        return;
    s = base->impl;
    stop_thread(s);
    sm_rest_free(&s->rest);
    sm_ring_destroy(&s->ring);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->batch);
    free(s);
}

static const sm_sink_ops mlflow_ops = {
    .name = "mlflow-rest",
    .push = ml_push,
    .flush = ml_flush,
    .dropped = ml_dropped,
    .counts = ml_counts,
    .close = ml_close,
};

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

/* The run is checked once, before any window: a missing or deleted run is
 * an error of start (one line), not a refusal per window.  A server that
 * does not answer in CHECK_TIMEOUT_S is said and the points wait for it. */
static int check_run(mlsink *s, int rank, double bound, char *err, size_t errlen)
{
    char why[512] = "", status[32] = "";
    int64_t last = -1;
    int rc;

    rc = sm_mlflow_get_run_on(&s->rest, s->run_id, status, sizeof status, rank, &last,
                              sm_now_mono() + bound, why, sizeof why);
    if (rc == -ENOENT || rc == -EACCES || rc == -EINVAL || rc == -EIO || rc == -EPROTO) {
        snprintf(err, errlen, "%s", why);
        return rc;
    }
    if (rc < 0) {
        sm_log(SM_WARN, "cannot check run %s at %s (%s); recording into it anyway: points "
               "wait in the buffer until the server answers", s->run_id, s->rest.shown, why);
        return 0;
    }
    /* Reading is not writing: credentials with READ only on the run's
     * experiment (MLflow's auth app) pass runs/get and would have every
     * window refused.  A runs/update naming only the run needs what log-batch
     * needs and changes nothing, so a 401/403 fails the start in one line;
     * any other answer is left to the windows' own lines. */
    if (sm_mlflow_check_write_on(&s->rest, s->run_id, sm_now_mono() + bound, why,
                                 sizeof why) == -EACCES) {
        snprintf(err, errlen, "cannot record into run %s at %s: these credentials may not "
                 "write to it (%s)", s->run_id, s->rest.shown, why);
        return -EACCES;
    }
    /* Re-attaching (docs/design.md §3): the chart goes on where this rank's
     * system series stopped instead of restarting at step 0 and
     * interleaving with the old points; an ended run is said. */
    if (last >= 0)
        s->step_base = last + 1;
    if (strcmp(status, "RUNNING") != 0 && status[0])
        sm_log(SM_INFO, "run %s is %s; recording into it anyway%s", s->run_id, status,
               last >= 0 ? ", its system steps continue after its last one" : "");
    if (last >= 0)
        sm_log(SM_INFO, "run %s already holds system metrics of rank %d up to step %lld: steps "
               "continue at %lld", s->run_id, rank, (long long)last, (long long)(last + 1));
    return 0;
}

int sm_sink_mlflow_new(const sm_sink_config *cfg, char *err, size_t errlen, sm_sink **out)
{
    const sm_rest_settings *set = cfg->settings;
    mlsink *s;
    sigset_t all, old;
    int rc;

    *out = NULL;
    if (!set || !sm_mlflow_valid_run_id(set->run_id)) {
        snprintf(err, errlen, "not an MLflow run id: %.80s", set ? set->run_id : "(null)");
        return -EINVAL;
    }
    s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->base.ops = &mlflow_ops;
    s->base.impl = s;
    s->cap = cfg->cap;
    s->period_s = cfg->period_s;
    s->spread_s = cfg->collectors > 1 ? SPREAD_PER_COLLECTOR_S * cfg->collectors : 0;
    snprintf(s->run_id, sizeof s->run_id, "%s", set->run_id);
    s->seed = sm_rest_seed(s);
    atomic_init(&s->abort, 0);
    atomic_init(&s->deadline_ms, 0);
    atomic_init(&s->delivered, 0);
    atomic_init(&s->refused, 0);
    atomic_init(&s->nonfinite, 0);
    atomic_init(&s->rescued, 0);
    if ((rc = -pthread_mutex_init(&s->mu, NULL)) < 0) {
        free(s);
        return rc;
    }
    if ((rc = sm_cond_init_mono(&s->cv)) < 0) {
        pthread_mutex_destroy(&s->mu);
        free(s);
        return rc;
    }
    rc = sm_ring_init(&s->ring, cfg->cap);
    if (rc < 0) {
        snprintf(err, errlen, "cannot allocate a buffer of %zu points", cfg->cap);
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return rc;
    }
    s->batch = calloc(SM_MLFLOW_MAX_ENTITIES, sizeof *s->batch);
    if (!s->batch) {
        rc = -ENOMEM;
        goto fail;
    }
    rc = sm_rest_init(&s->rest, cfg->target, err, errlen);
    if (rc == 0)
        rc = sm_rest_add_headers(&s->rest, (const char *const *)set->headers, err, errlen);
    if (rc == 0 && set->check_s >= 0)
        rc = check_run(s, cfg->rank, set->check_s > 0 ? set->check_s : CHECK_TIMEOUT_S, err,
                       errlen);
    if (rc < 0)
        goto fail;
    s->rest.abort_flag = &s->abort;
    s->rest.abort_deadline_ms = &s->deadline_ms;
    /* the shipping thread takes no signals: they belong to the application's
     * threads (a handler must never run on ours) */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = -pthread_create(&s->thread, NULL, ship_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc < 0) {
        snprintf(err, errlen, "cannot start the shipping thread");
        goto fail;
    }
    pthread_setname_np(s->thread, "scopemeter-ship");
    s->thread_started = 1;
    *out = &s->base;
    return 0;
fail:
    ml_close(&s->base);
    return rc;
}

static void free_strv(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

void sm_rest_settings_free(void *settings)
{
    sm_rest_settings *set = settings;

    if (!set)
        return;
    free_strv(set->headers);
    free(set);
}

int sm_monitor_set_run(sm_monitor *m, const char *tracking_uri, const char *run_id)
{
    sm_rest_settings *set;
    int rc;

    if (!m || !sm_rest_is_http(tracking_uri) || !sm_mlflow_valid_run_id(run_id))
        return -EINVAL;
    set = calloc(1, sizeof *set);
    if (!set)
        return -ENOMEM;
    snprintf(set->run_id, sizeof set->run_id, "%s", run_id);
    /* the monitor owns set from here on, even when it refuses it */
    rc = sm_monitor_set_sink_factory(m, sm_sink_mlflow_new, tracking_uri, set,
                                     sm_rest_settings_free);
    /* one recorder per rank and run (docs/design.md §9), unless the caller
     * names another key */
    if (rc == 0)
        rc = sm_monitor_default_recording_key(m, run_id);
    return rc;
}

/* Headers go into the REST sink's settings: after sm_monitor_set_run. */
int sm_monitor_set_headers(sm_monitor *m, const char *const *headers)
{
    sm_rest_settings *set = sm_monitor_sink_settings(m, sm_sink_mlflow_new);
    size_t n = 0;
    char **v;

    if (!set)
        return -EINVAL;
    while (headers && headers[n] && headers[n + 1])
        n += 2;
    if (headers && headers[n]) /* a name without a value */
        return -EINVAL;
    v = calloc(n + 1, sizeof *v);
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (!(v[i] = strdup(headers[i]))) {
            free_strv(v);
            return -ENOMEM;
        }
    free_strv(set->headers);
    set->headers = v;
    return 0;
}
