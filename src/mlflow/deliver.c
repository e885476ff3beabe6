/*
 * deliver.c — the delivery policy (deliver.h): the one place that decides
 * what to send, when, and what an answer means, for both transports (the
 * REST sink's libcurl thread and the Python front's MlflowClient thread).
 * It must never do I/O to the store itself: that is the transport's.
 *
 * The sampling thread only pushes into the bounded ring (sink.h, ring.c);
 * sampling never waits on the network (docs/design.md §6).  The driver
 * sleeps in next() until a window arrives or stop begins — no polling.
 * next() peeks the oldest records and hands out one log-batch within
 * MLflow's limits; done() removes them from the ring only once the store
 * took them — so the order of points survives an outage and nothing is lost
 * while the ring has room.  Past the ring, the spool (spool.c): while
 * delivery fails (or the spool still holds records), a ring half full has its
 * oldest records moved into the spool's files by this driver, never by the
 * sampling thread, which only wakes the driver; the spool is replayed first,
 * oldest first, then the ring.  Without a spool (SCOPEMETER_SPOOL_MAX_MB=0,
 * a tmpfs, a write error) a full ring overwrites its oldest records
 * (counted, reported).  At stop, what the bound leaves in the ring goes to
 * the spool too, for `scopemeter sync`.
 *
 * Many collectors of one job start together and so post together, at every
 * window and above all at the end of the run.  MLflow's server holds two
 * pooled database connections per log-batch and deadlocks its default pool
 * with about 15 simultaneous ones, until its 30 s pool timeout
 * (bench/README.md).  So each fresh window waits a random delay of up to
 * 50 ms per collector of the job (at most half a window; at stop, at most a
 * quarter of what is left of the bound): 64 collectors spread over 3.2 s.
 *
 *   2xx                          consumed
 *   408, 429, 5xx, no connection retried after backoff (full jitter, cap
 *                                30 s; while stopping 2 s, or the
 *                                job's spread: flush_cap) or the
 *                                store's Retry-After
 *   other 4xx                    one line per kind with MLflow's
 *                                error_code/message; that batch is dropped
 *                                and counted, never retried
 *
 * Patience.  A request with no byte back for 10 s is an outage, said while
 * the job runs (stalled(), from inside the transfer) -- and then waited for,
 * up to the request's total timeout (MLflow's MLFLOW_HTTP_REQUEST_TIMEOUT,
 * 120 s, the bound MLflow's own client gives a request).  A server that
 * queues the job's requests answers each late and works on one its client
 * gave up on all the same: giving up and sending again only adds to its
 * queue.  CI's 1024 collectors, giving up at 10 s (doubling to 120 s):
 * 606 requests given up during the recording, 293 of the re-sends refused as
 * duplicates of a write still under way, 506 collectors undelivered at the
 * stop bound (2026-12-06; the server's stock pool deadlocked too, which no
 * client fixes: docs/rest.md, "The pool").  With the pool sized, a 25 s
 * stall of the server cost 379 re-sends giving up at 10 s, none waiting.
 * Waiting costs nothing the job needs: the ring holds an hour.  Once the
 * stop began a request is waited for until the stop bound: the answer to it
 * is the only one that can still come in time.
 *
 * Stop: flush(deadline) closes the ring and lets the driver deliver what is
 * queued; at the deadline delivery is aborted (libcurl's xferinfo sees the
 * flag; a Python request in flight is abandoned) and one line says how many
 * points were not delivered.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "body.h"
#include "deliver.h"
#include "mlflow_rest.h"
#include "scopemeter_mlflow.h"
#include "spool.h"

#define BACKOFF_BASE_S 1.0
#define BACKOFF_CAP_S 30.0
#define DUP_RETRIES_MAX 3
#define BACKOFF_FLUSH_CAP_S 2.0
#define SPREAD_PER_COLLECTOR_S 0.05
#define SPILL_CHUNK 4096
#define SAY_STALL_S 10

struct sm_deliver {
    sm_sink base;
    atomic_int refs;
    char run_id[260];
    char shown[512];          /* the store, redacted, for lines */
    int configured;           /* the ring exists (under mu) */
    sm_ring ring;
    size_t cap;
    double spread_s;          /* upper bound of the random delay before a post */
    double period_s;
    int64_t step_base;        /* added to every step: after the run's earlier system steps */

    /* a thread-driven transport (the REST sink) */
    pthread_t thread;
    int thread_started;
    sm_deliver_post post;
    void *post_arg;
    void (*free_arg)(void *);

    pthread_mutex_t mu;       /* guards configured, flushing, done; cv wakes waits */
    pthread_cond_t cv;
    int flushing;
    int done;                 /* the driver has left its loop */
    atomic_int abort;         /* stop now: the request in flight is aborted */
    atomic_llong deadline_ms; /* flush deadline (monotonic ms), 0 before flush */

    /* the driver's (one thread at a time) */
    sm_entry *raw;            /* peeked, SM_MLFLOW_MAX_ENTITIES */
    sm_entry *batch;          /* the shippable ones of raw */
    size_t *from;             /* batch[i] is raw[from[i]] */
    size_t nraw, nbatch;
    int fresh;                /* the next post is a new window's, not a retry */
    double wait_s;            /* backoff to wait before the next post */
    uint64_t seed;
    int attempt;
    int dup_retries;          /* unique-key refusals retried for this batch (sm__deliver_done) */
    double outage_since;      /* monotonic time of the first failure, 0 when healthy */
    uint64_t dropped_before;  /* ring drops when the outage began */
    uint64_t dropped_said;    /* ring drops already reported */
    char last_refusal[64];    /* error_code of the last refusal already printed */

    /* counters (atomic: read by dropped() from the monitor's thread) */
    atomic_ullong delivered;
    atomic_ullong refused;
    atomic_ullong nonfinite;
    /* Records the ring overwrote while their request was in flight and that
     * the store then took: the ring counted them as dropped, but they landed. */
    atomic_ullong rescued;

    /* the spool (spool.h): NULL when off.  spool_mu serialises it (the
     * driver, and the thread that stops once the driver is gone). */
    sm_spool *spool;
    pthread_mutex_t spool_mu;
    sm_entry *spill_buf;      /* SPILL_CHUNK, the first time it spills */
    size_t spill_at, spill_to; /* ring length that starts a spill, and its end */
    int from_spool;           /* the batch handed out came from the spool */
    atomic_int failing;       /* delivery is failing (for push: wake the driver) */
    atomic_int spool_busy;    /* the spool holds records: the ring follows them */
};

/* ---- lines and counters ------------------------------------------------------ */

/* Records the ring overwrote that never reached the store. */
static uint64_t lost(sm_deliver *d)
{
    return sm__ring_dropped(&d->ring) - atomic_load(&d->rescued);
}

static void report_drops(sm_deliver *d)
{
    uint64_t n = sm__ring_dropped(&d->ring);

    if (n > d->dropped_said) {
        if (d->dropped_said == 0)
            sm__log(SM_WARN, "buffer of %zu points full while MLflow is unreachable: the "
                   "oldest points are dropped (counted, reported when the server is back "
                   "and at stop)", d->cap);
        d->dropped_said = n;
    }
}

static void on_failure(sm_deliver *d, const sm_rest_result *a)
{
    atomic_store(&d->failing, 1);
    if (d->outage_since == 0) {
        d->outage_since = sm__now_mono();
        d->dropped_before = lost(d);
        sm__log(SM_WARN, "cannot deliver to MLflow (%s); %zu points wait in the buffer "
               "(room for %zu) and are retried%s", a->msg, sm__ring_len(&d->ring), d->cap,
               a->retry_after >= 0 ? ", honouring Retry-After" : " with backoff");
    }
    report_drops(d);
}

/* A refusal that names a unique-key violation of the store's database:
 * sqlite, PostgreSQL and MySQL say it so (MLflow passes the text on). */
static int duplicate_key(const sm_rest_result *a)
{
    return strstr(a->msg, "UNIQUE constraint failed") != NULL ||
           strstr(a->msg, "duplicate key value violates unique constraint") != NULL ||
           strstr(a->msg, "Duplicate entry") != NULL;
}

static void on_success(sm_deliver *d)
{
    atomic_store(&d->failing, 0);
    if (d->outage_since > 0) {
        uint64_t n = lost(d) - d->dropped_before;
        if (n)
            sm__log(SM_INFO, "MLflow reachable again after %.0f s; %llu oldest points were "
                   "dropped because the buffer was full",
                   sm__now_mono() - d->outage_since, (unsigned long long)n);
        else
            sm__log(SM_INFO, "MLflow reachable again after %.0f s; no point lost",
                   sm__now_mono() - d->outage_since);
        d->outage_since = 0;
    }
    d->attempt = 0;
    d->dup_retries = 0;
}

/* n records refused; `counted` of them still in the ring (the others were
 * overwritten meanwhile and are counted as dropped by the ring already). */
static void on_refused(sm_deliver *d, const sm_rest_result *a, size_t n, size_t counted)
{
    const char *kind = a->error_code[0] ? a->error_code : "?";

    atomic_fetch_add(&d->refused, counted);
    /* one line per kind of refusal: a run that was deleted refuses every
     * batch, and a line per window would flood the training log */
    if (strcmp(d->last_refusal, kind) != 0) {
        snprintf(d->last_refusal, sizeof d->last_refusal, "%s", kind);
        sm__log(SM_WARN, "MLflow refused %zu records (%s); not retried, they are dropped "
               "and counted", n, a->msg);
    }
}

/* ---- the spool ------------------------------------------------------------------- */

static int spill_wanted(sm_deliver *d)
{
    return d->spool && (atomic_load(&d->failing) || atomic_load(&d->spool_busy)) &&
           sm__ring_len(&d->ring) >= d->spill_at;
}

/* Moves the oldest records of the ring into the spool until keep are left
 * (the driver's thread, or the stopping one once the driver is gone).
 * Records the producer overwrote meanwhile are in the spool all the same:
 * rescued, as a request in flight's are. */
static void spill(sm_deliver *d, size_t keep)
{
    size_t len;

    pthread_mutex_lock(&d->spool_mu);
    if (!d->spill_buf)
        d->spill_buf = calloc(SPILL_CHUNK, sizeof *d->spill_buf);
    while (d->spill_buf && (len = sm__ring_len(&d->ring)) > keep) {
        size_t want = len - keep < SPILL_CHUNK ? len - keep : SPILL_CHUNK;
        int n = sm__ring_peek(&d->ring, d->spill_buf, want, 0);
        size_t removed;

        if (n <= 0 || sm__spool_put(d->spool, &d->ring, d->spill_buf, (size_t)n,
                                    d->step_base) < 0)
            break;
        removed = sm__ring_consume(&d->ring, (size_t)n);
        atomic_fetch_add(&d->rescued, (size_t)n - removed);
    }
    atomic_store(&d->spool_busy, sm__spool_pending(d->spool) > 0);
    pthread_mutex_unlock(&d->spool_mu);
}

static void spill_if_needed(sm_deliver *d)
{
    if (spill_wanted(d))
        spill(d, d->spill_to);
}

/* ---- waits ----------------------------------------------------------------------- */

/* Sleeps up to secs, waking early on abort and when a flush begins (so
 * queued points get one more try right away).  Looks at the ring once a
 * second, so the first overflow is said when it happens.  Returns 1 when a
 * flush began meanwhile. */
static int wait_for(sm_deliver *d, double secs)
{
    double until = sm__now_mono() + secs;
    struct timespec ts;
    int flushing, began;

    pthread_mutex_lock(&d->mu);
    flushing = d->flushing;
    while (!atomic_load(&d->abort) && d->flushing == flushing && sm__now_mono() < until) {
        double slice = sm__now_mono() + 1.0;
        sm__mono_timespec(slice < until ? slice : until, &ts);
        pthread_cond_timedwait(&d->cv, &d->mu, &ts);
        pthread_mutex_unlock(&d->mu);
        spill_if_needed(d);
        report_drops(d);
        pthread_mutex_lock(&d->mu);
    }
    began = d->flushing != flushing;
    pthread_mutex_unlock(&d->mu);
    return began;
}

static double uniform01(uint64_t *seed)
{
    *seed ^= *seed << 13; /* xorshift64 */
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    return (double)(*seed >> 11) / 9007199254740992.0;
}

/* The job's spread now (see the top of the file): 50 ms a collector, within
 * half a window while running, within a quarter of what is left of the stop
 * bound once the stop began (dl, the flush deadline, > 0). */
static double job_spread(const sm_deliver *d, long long dl)
{
    double room = dl > 0 ? ((double)dl / 1000.0 - sm__now_mono()) / 4 : d->period_s / 2;

    return d->spread_s < room ? d->spread_s : room;
}

/* The random delay before posting a fresh window, within the job's spread. */
static void spread(sm_deliver *d)
{
    for (;;) {
        long long dl = atomic_load(&d->deadline_ms);
        double bound = job_spread(d, dl);

        if (!(bound > 0.001))
            return;
        /* a stop that begins meanwhile draws again within its own bound */
        if (!wait_for(d, bound * uniform01(&d->seed)) || dl > 0)
            return;
    }
}

/* The backoff cap while stopping.  A store that comes back during the stop
 * is used within 2 s -- but n collectors of one job stop together, and n
 * retrying every 2 s send the server n/2 requests a second whatever it
 * takes: 1024 of them kept a 4-worker server from answering any for 480 s
 * (CI, 2026-12-04).  So the cap is the job's spread, as its first posts
 * were (at most 20 retries a second for the job), never under 2 s. */
static double flush_cap(sm_deliver *d)
{
    double cap = job_spread(d, atomic_load(&d->deadline_ms));

    return cap > BACKOFF_FLUSH_CAP_S ? cap : BACKOFF_FLUSH_CAP_S;
}

/* A request has had no byte back for waited_s (the transport's, inside the
 * transfer; see the top of the file): said as an outage once, and waited for. */
static void stalled(void *arg, double waited_s)
{
    sm_deliver *d = arg;

    atomic_store(&d->failing, 1);
    if (d->outage_since == 0) {
        d->outage_since = sm__now_mono() - waited_s;
        d->dropped_before = lost(d);
        sm__log(SM_WARN, "cannot deliver to MLflow (runs/log-batch on %s: no answer for %.0f s; "
               "waited for, not sent again); %zu points wait in the buffer (room for %zu)",
               d->shown, waited_s, sm__ring_len(&d->ring), d->cap);
    }
}

/* The request about to go: said after SAY_STALL_S without an answer. */
static void hand_out(sm_deliver *d, sm_deliver_batch *b)
{
    b->recs = d->batch;
    b->n = d->nbatch;
    b->step_base = d->step_base;
    b->ring = &d->ring;
    b->say_s = SAY_STALL_S;
    b->stalled = stalled;
    b->stalled_arg = d;
}

/* Past the flush deadline: nothing more is tried (flush is about to abort). */
static int past_deadline(sm_deliver *d)
{
    long long dl = atomic_load(&d->deadline_ms);

    return dl > 0 && sm__now_mono() * 1000.0 >= (double)dl;
}

static int over(sm_deliver *d)
{
    return atomic_load(&d->abort) || past_deadline(d);
}

/* ---- the driver's side ------------------------------------------------------------ */

/* The first peeked records that fit one log-batch (MLflow's limits,
 * mlflow/utils/validation.py); non-finite values are not JSON and are
 * skipped (counted when consumed).  Returns the count of batch records;
 * d->nraw becomes the raw records they cover. */
static size_t select_batch(sm_deliver *d, size_t n)
{
    size_t nm = 0, nt = 0, i;

    d->nbatch = 0;
    for (i = 0; i < n; i++) {
        int admit = sm__body_admit(&d->raw[i], &nm, &nt);

        if (admit < 0)
            break;
        if (admit == 0)
            continue;
        d->from[d->nbatch] = i;
        d->batch[d->nbatch++] = d->raw[i];
    }
    d->nraw = i;
    return d->nbatch;
}

/* Removes the first `used` peeked records from the ring, counting the
 * non-finite values among them (said once, totalled at stop).  Returns how
 * many the ring still held (ring.c: sm__ring_consume). */
static void count_nonfinite(sm_deliver *d, size_t used)
{
    for (size_t i = 0; i < used; i++) {
        const sm_entry *r = &d->raw[i];
        if (r->text == 0 && !isfinite(r->value) && atomic_fetch_add(&d->nonfinite, 1) == 0)
            sm__log(SM_WARN, "skipped a non-finite value of %.200s (NaN/inf is not JSON); "
                   "further ones are counted and reported at stop",
                   sm__ring_str(&d->ring, r->key));
    }
}

static size_t consume(sm_deliver *d, size_t used)
{
    count_nonfinite(d, used);
    return sm__ring_consume(&d->ring, used);
}

/* The first used records of a spool batch are done (delivered or refused). */
static void spool_done(sm_deliver *d, size_t used)
{
    count_nonfinite(d, used);
    pthread_mutex_lock(&d->spool_mu);
    sm__spool_commit(d->spool, used);
    atomic_store(&d->spool_busy, sm__spool_pending(d->spool) > 0);
    pthread_mutex_unlock(&d->spool_mu);
}

/* The spool's oldest records, when it holds any: 1 with a batch, 0 none. */
static int spool_batch(sm_deliver *d)
{
    size_t n;

    if (!atomic_load(&d->spool_busy))
        return 0;
    pthread_mutex_lock(&d->spool_mu);
    n = sm__spool_read(d->spool, d->raw, SM_MLFLOW_MAX_ENTITIES);
    if (n == 0)
        atomic_store(&d->spool_busy, sm__spool_pending(d->spool) > 0);
    pthread_mutex_unlock(&d->spool_mu);
    if (n == 0)
        return 0;
    d->from_spool = 1;
    if (select_batch(d, n) == 0) {
        spool_done(d, d->nraw); /* all non-finite */
        return spool_batch(d);
    }
    return 1;
}

static int wait_configured(sm_deliver *d)
{
    int ok;

    pthread_mutex_lock(&d->mu);
    while (!d->configured && !atomic_load(&d->abort))
        pthread_cond_wait(&d->cv, &d->mu);
    ok = d->configured && !atomic_load(&d->abort);
    pthread_mutex_unlock(&d->mu);
    return ok;
}

int sm__deliver_next(sm_deliver *d, sm_deliver_batch *b)
{
    int n;

    memset(b, 0, sizeof *b);
    if (!wait_configured(d))
        goto end;
    for (;;) {
        if (over(d))
            break;
        if (d->wait_s > 0) { /* the backoff of the last failure */
            double w = d->wait_s;
            d->wait_s = 0;
            wait_for(d, w);
            continue;
        }
        spill_if_needed(d);
        /* the spool first, oldest first: its records are older than the ring's */
        if (spool_batch(d)) {
            hand_out(d, b);
            return 1;
        }
        d->from_spool = 0;
        /* sleeps until a window is pushed or the ring is closed (stop) */
        n = sm__ring_peek(&d->ring, d->raw, SM_MLFLOW_MAX_ENTITIES, -1);
        if (n == -EPIPE)
            break; /* closed and empty: all delivered */
        if (n <= 0)
            continue;
        if (d->fresh && d->attempt == 0) {
            d->fresh = 0;
            spread(d);
            if (over(d))
                break;
            /* windows pushed meanwhile go in the same post */
            n = sm__ring_peek(&d->ring, d->raw, SM_MLFLOW_MAX_ENTITIES, 0);
            if (n <= 0)
                continue;
        }
        if (select_batch(d, (size_t)n) == 0) {
            consume(d, d->nraw); /* all non-finite */
            continue;
        }
        hand_out(d, b);
        return 1;
    }
end:
    pthread_mutex_lock(&d->mu);
    d->done = 1;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    return 0;
}

void sm__deliver_done(sm_deliver *d, size_t taken, const sm_rest_result *a)
{
    size_t used, removed;
    double cap;

    /* a request that returns after the stop bound: the closing line was said */
    if (atomic_load(&d->abort) || !d->configured)
        return;
    if (taken > d->nbatch)
        taken = d->nbatch;
    used = taken < d->nbatch ? d->from[taken] : d->nraw;
    if (d->from_spool && (a->outcome == SM_REST_OK ||
                          (a->outcome == SM_REST_REFUSED &&
                           !(d->dup_retries < DUP_RETRIES_MAX && duplicate_key(a))))) {
        spool_done(d, used);
        if (a->outcome == SM_REST_OK)
            atomic_fetch_add(&d->delivered, taken);
        else
            on_refused(d, a, used, used);
        on_success(d);
        d->fresh = 0; /* the rest of the backlog goes out at once */
        return;
    }
    switch (a->outcome) {
    case SM_REST_OK:
        removed = consume(d, used);
        atomic_fetch_add(&d->rescued, used - removed); /* delivered after all */
        atomic_fetch_add(&d->delivered, taken);
        on_success(d);
        d->fresh = sm__ring_len(&d->ring) == 0; /* a backlog goes out at once */
        break;
    case SM_REST_REFUSED:
        if (d->dup_retries < DUP_RETRIES_MAX && duplicate_key(a)) {
            /* an earlier send of this batch reached the store but its answer
             * was lost (a timeout here, or a reset connection that libcurl
             * re-sent on its own), and the store is still writing it:
             * MLflow's duplicate filter (SqlAlchemyStore._log_metrics) is not
             * atomic against that concurrent write and refuses the second
             * send with a unique-key error (bench/README.md, table 10).  Once
             * the first write is done a send is idempotent and stores what it
             * did not: retried, never dropped (the batch may hold windows the
             * first send did not).  A store that says it every time is
             * refused after DUP_RETRIES_MAX. */
            d->dup_retries++;
            d->wait_s = sm__rest_backoff(d->attempt++, -1, BACKOFF_BASE_S, BACKOFF_FLUSH_CAP_S,
                                        &d->seed);
            break;
        }
        removed = consume(d, used);
        on_refused(d, a, used, removed);
        on_success(d); /* the store answered: not an outage */
        d->fresh = sm__ring_len(&d->ring) == 0;
        break;
    case SM_REST_ABORTED:
        break;
    default: /* SM_REST_RETRY, SM_REST_FAILED */
        on_failure(d, a);
        cap = atomic_load(&d->deadline_ms) > 0 ? flush_cap(d) : BACKOFF_CAP_S;
        d->wait_s = sm__rest_backoff(d->attempt++, a->retry_after, BACKOFF_BASE_S, cap, &d->seed);
        break;
    }
}

void sm__deliver_cancel(sm_deliver *d)
{
    atomic_store(&d->abort, 1);
    pthread_mutex_lock(&d->mu);
    if (d->configured)
        sm__ring_close(&d->ring); /* wakes a peek */
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

atomic_int *sm__deliver_abort_flag(sm_deliver *d)
{
    return &d->abort;
}

atomic_llong *sm__deliver_deadline_ms(sm_deliver *d)
{
    return &d->deadline_ms;
}

/* ---- the run check's lines ------------------------------------------------------ */

int sm__deliver_checked(sm_deliver *d, const sm_run_check *c, char *err, size_t errlen)
{
    long long last = c->last_step;

    /* the line as the sink's start has always cut it (511 bytes) */
    if (c->outcome == SM_RUN_CHECK_REFUSED) {
        snprintf(err, errlen, "%.511s", c->why);
        return c->error;
    }
    if (c->outcome != SM_RUN_CHECK_RUN) {
        sm__log(SM_WARN, "cannot check run %s at %s (%.511s); recording into it anyway: points "
               "wait in the buffer until the server answers", d->run_id, d->shown, c->why);
        return 0;
    }
    /* Re-attaching (docs/design.md §3): the chart goes on where this rank's
     * system series stopped instead of restarting at step 0 and
     * interleaving with the old points; an ended run is said. */
    if (last >= 0)
        d->step_base = last + 1;
    if (c->status[0] && strcmp(c->status, "RUNNING") != 0)
        sm__log(SM_INFO, "run %s is %s; recording into it anyway%s", d->run_id, c->status,
               last >= 0 ? ", its system steps continue after its last one" : "");
    if (last >= 0)
        sm__log(SM_INFO, "run %s already holds system metrics of rank %d up to step %lld: steps "
               "continue at %lld", d->run_id, c->rank, last, last + 1);
    return 0;
}

/* ---- the sink face ---------------------------------------------------------------- */

static void d_push(sm_sink *base, const sm_record *recs, size_t n)
{
    sm_deliver *d = base->impl;

    sm__ring_push(&d->ring, recs, n);
    /* past the high-water mark while delivery fails: the driver (asleep in
     * its backoff) spills; this thread only wakes it, no I/O here */
    if (spill_wanted(d)) {
        pthread_mutex_lock(&d->mu);
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
    }
}

/* Ends delivery: abort what is in flight, wake every wait, join a thread of
 * ours (a Python driver is not joined: it sees the abort at its next look). */
static void stop_driver(sm_deliver *d)
{
    sm__deliver_cancel(d);
    if (d->thread_started) {
        pthread_join(d->thread, NULL);
        d->thread_started = 0;
    }
}

static int d_flush(sm_sink *base, double deadline)
{
    sm_deliver *d = base->impl;
    struct timespec ts;
    size_t left;
    uint64_t nonfinite;
    int done;

    /* the request in flight at the deadline stops by itself (xferinfo) */
    atomic_store(&d->deadline_ms, (long long)(deadline * 1000.0));
    sm__ring_close(&d->ring); /* the monitor pushes nothing after flush */
    sm__mono_timespec(deadline, &ts);
    pthread_mutex_lock(&d->mu);
    d->flushing = 1;
    pthread_cond_broadcast(&d->cv);
    while (!d->done && sm__now_mono() < deadline)
        pthread_cond_timedwait(&d->cv, &d->mu, &ts);
    done = d->done;
    pthread_mutex_unlock(&d->mu);
    stop_driver(d);

    left = sm__ring_len(&d->ring);
    /* what the bound left: into the spool, for `scopemeter sync` (the
     * driver is gone; a Python one abandoned sees abort and touches nothing) */
    if (d->spool && (left || atomic_load(&d->spool_busy))) {
        sm_spool_counts sc;
        if (left)
            spill(d, 0);
        pthread_mutex_lock(&d->spool_mu);
        sm__spool_counts(d->spool, &sc);
        pthread_mutex_unlock(&d->spool_mu);
        if (sc.left)
            sm__log(SM_WARN, "%llu points kept in the spool in %s: `scopemeter sync` "
                   "delivers them once the server answers", (unsigned long long)sc.left,
                   sm__spool_dir(d->spool));
        left = sm__ring_len(&d->ring) + (size_t)sc.left;
    }
    nonfinite = atomic_load(&d->nonfinite);
    /* buffer overflow and refusals were said when they happened; the
     * monitor reports their total (dropped()) after this */
    if (nonfinite > 1)
        sm__log(SM_INFO, "%llu non-finite values were skipped in all",
               (unsigned long long)nonfinite);
    if (!done || left) {
        sm__log(SM_WARN, "stop deadline reached: %zu points not delivered to MLflow at %s",
               left, d->shown);
        return -ETIMEDOUT;
    }
    return 0;
}

static uint64_t d_dropped(sm_sink *base)
{
    sm_deliver *d = base->impl;

    return lost(d) + atomic_load(&d->refused);
}

static void d_counts(sm_sink *base, sm_sink_counts *out)
{
    sm_deliver *d = base->impl;

    sm_spool_counts sc;

    pthread_mutex_lock(&d->spool_mu);
    sm__spool_counts(d->spool, &sc);
    pthread_mutex_unlock(&d->spool_mu);
    out->delivered = atomic_load(&d->delivered);
    out->overflow = lost(d) + sc.dropped;
    out->refused = atomic_load(&d->refused);
    out->undelivered = sm__ring_len(&d->ring) + sc.left;
    out->spooled = sc.spooled;
    out->replayed = sc.replayed;
    out->spool_dropped = sc.dropped;
    out->spool_left = sc.left;
}

static void d_close(sm_sink *base)
{
    sm_deliver *d;

    if (!base)
        return;
    d = base->impl;
    stop_driver(d);
    if (d->free_arg)
        d->free_arg(d->post_arg);
    d->free_arg = NULL;
    d->post_arg = NULL;
    sm__deliver_unref(d);
}

static const sm_sink_ops deliver_ops = {
    .name = "mlflow",
    .push = d_push,
    .flush = d_flush,
    .dropped = d_dropped,
    .counts = d_counts,
    .close = d_close,
};

sm_sink *sm__deliver_sink(sm_deliver *d)
{
    sm__deliver_ref(d);
    return &d->base;
}

/* ---- life ------------------------------------------------------------------------ */

int sm__deliver_new(const char *run_id, const char *shown, sm_deliver **out)
{
    sm_deliver *d;
    int rc;

    *out = NULL;
    d = calloc(1, sizeof *d);
    if (!d)
        return -ENOMEM;
    d->base.ops = &deliver_ops;
    d->base.impl = d;
    atomic_init(&d->refs, 1);
    snprintf(d->run_id, sizeof d->run_id, "%s", run_id ? run_id : "");
    snprintf(d->shown, sizeof d->shown, "%s", shown ? shown : "");
    d->fresh = 1;
    d->seed = sm__rest_seed(d);
    atomic_init(&d->abort, 0);
    atomic_init(&d->deadline_ms, 0);
    atomic_init(&d->delivered, 0);
    atomic_init(&d->refused, 0);
    atomic_init(&d->nonfinite, 0);
    atomic_init(&d->rescued, 0);
    atomic_init(&d->failing, 0);
    atomic_init(&d->spool_busy, 0);
    if ((rc = -pthread_mutex_init(&d->mu, NULL)) < 0) {
        free(d);
        return rc;
    }
    if ((rc = -pthread_mutex_init(&d->spool_mu, NULL)) < 0) {
        pthread_mutex_destroy(&d->mu);
        free(d);
        return rc;
    }
    if ((rc = sm__cond_init_mono(&d->cv)) < 0) {
        pthread_mutex_destroy(&d->spool_mu);
        pthread_mutex_destroy(&d->mu);
        free(d);
        return rc;
    }
    d->raw = calloc(SM_MLFLOW_MAX_ENTITIES, sizeof *d->raw);
    d->batch = calloc(SM_MLFLOW_MAX_ENTITIES, sizeof *d->batch);
    d->from = calloc(SM_MLFLOW_MAX_ENTITIES, sizeof *d->from);
    if (!d->raw || !d->batch || !d->from) {
        sm__deliver_unref(d);
        return -ENOMEM;
    }
    *out = d;
    return 0;
}

int sm__deliver_configure(sm_deliver *d, const sm_sink_config *cfg, char *err, size_t errlen)
{
    int rc;

    pthread_mutex_lock(&d->mu);
    if (d->configured) {
        pthread_mutex_unlock(&d->mu);
        snprintf(err, errlen, "this delivery is in use already");
        return -EBUSY;
    }
    d->cap = cfg->cap;
    d->period_s = cfg->period_s;
    d->spread_s = cfg->collectors > 1 ? SPREAD_PER_COLLECTOR_S * cfg->collectors : 0;
    rc = sm__ring_init(&d->ring, cfg->cap);
    if (rc < 0)
        snprintf(err, errlen, "cannot allocate a buffer of %zu points", cfg->cap);
    else
        d->configured = 1;
    /* the spool past the ring: a spill starts half full and leaves a
     * quarter, so the ring has half its room for what comes meanwhile */
    d->spill_at = cfg->cap / 2;
    d->spill_to = cfg->cap / 4;
    if (rc == 0 && sm__spool_new(d->run_id, cfg->rank, &d->spool) < 0)
        d->spool = NULL; /* out of memory: the ring alone, as before */
    if (d->configured && atomic_load(&d->abort))
        sm__ring_close(&d->ring);
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

static void *drive(void *arg)
{
    sm_deliver *d = arg;
    sm_deliver_batch b;

    while (sm__deliver_next(d, &b)) {
        sm_rest_result a = {.retry_after = -1};
        size_t taken = b.n;

        d->post(d->post_arg, &b, &taken, &a);
        sm__deliver_done(d, taken, &a);
        sm__rest_result_clear(&a);
    }
    return NULL;
}

int sm__deliver_start_thread(sm_deliver *d, sm_deliver_post post, void *arg,
                            void (*free_arg)(void *), const char *name)
{
    sigset_t all, old;
    int rc;

    d->post = post;
    d->post_arg = arg;
    d->free_arg = free_arg;
    /* the delivering thread takes no signals: they belong to the
     * application's threads (a handler must never run on ours) */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = -pthread_create(&d->thread, NULL, drive, d);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc < 0)
        return rc;
    pthread_setname_np(d->thread, name);
    d->thread_started = 1;
    return 0;
}

void sm__deliver_ref(sm_deliver *d)
{
    atomic_fetch_add(&d->refs, 1);
}

void sm__deliver_unref(sm_deliver *d)
{
    if (!d || atomic_fetch_sub(&d->refs, 1) != 1)
        return;
    sm__spool_free(d->spool); /* files with nothing left go; the others stay for sync */
    free(d->spill_buf);
    if (d->configured)
        sm__ring_destroy(&d->ring);
    pthread_cond_destroy(&d->cv);
    pthread_mutex_destroy(&d->spool_mu);
    pthread_mutex_destroy(&d->mu);
    free(d->raw);
    free(d->batch);
    free(d->from);
    free(d);
}

/* ---- the MlflowClient transport's side --------------------------------------- */

static int driven_factory(const sm_sink_config *cfg, char *err, size_t errlen, sm_sink **out)
{
    sm_deliver *d = cfg->settings;
    int rc;

    *out = NULL;
    rc = sm__deliver_configure(d, cfg, err, errlen);
    if (rc == 0)
        *out = sm__deliver_sink(d);
    return rc;
}

static void unref_settings(void *settings)
{
    sm__deliver_unref(settings);
}

int sm__monitor_set_delivery(sm_monitor *m, sm_deliver *d)
{
    if (!m || !d)
        return -EINVAL;
    sm__deliver_ref(d); /* the monitor's, released with its settings */
    return sm__monitor_set_sink_factory(m, driven_factory, d->shown[0] ? d->shown : "mlflow", d,
                                       unref_settings);
}

const char *sm__deliver_shown(const sm_deliver *d)
{
    return d->shown;
}

int sm__deliver_check_json(sm_deliver *d, int rank, const char *run_json, const char *error_code,
                          const char *why, char *err, size_t errlen)
{
    sm_rest_result a = {.retry_after = -1};
    sm_run_check c;
    json_t *run = NULL;

    if (run_json) {
        json_error_t je;
        run = json_loads(run_json, 0, &je);
    }
    /* the Run, a missing run, or no answer: read as the same answer over
     * REST would be (answer.c decides) */
    if (run)
        a.outcome = SM_REST_OK;
    else if (error_code && strcmp(error_code, "RESOURCE_DOES_NOT_EXIST") == 0) {
        a.outcome = SM_REST_REFUSED;
        snprintf(a.error_code, sizeof a.error_code, "%s", error_code);
    } else {
        a.outcome = SM_REST_RETRY;
        snprintf(a.msg, sizeof a.msg, "%s", why ? why : "no answer");
    }
    sm__run_check_of(&c, &a, run, NULL, d->run_id, d->shown, rank);
    json_decref(run);
    return sm__deliver_checked(d, &c, err, errlen);
}
