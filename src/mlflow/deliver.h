/*
 * deliver.h — the one delivery policy of records to an MLflow run, whoever
 * does the I/O (docs/design.md § Shipping, §6).
 *
 * Two transports drive it: the REST sink's thread with libcurl
 * (sink_mlflow.c) and, for stores C cannot reach (sqlite:, file:, databases,
 * an MLflow auth plugin, Databricks), a Python daemon thread with
 * MlflowClient (python/scopemeter/_transport.py and _session.py's pump,
 * through _native.c).  Both loop
 *
 *     while (sm__deliver_next(d, &batch))          waits: records, spread, backoff
 *         sm__deliver_done(d, taken, &answer);     after one request
 *
 * and everything else is here: batching within MLflow's limits, non-finite
 * values skipped, what to do with each answer (read into one sm_rest_result
 * by answer.c whichever transport met it), backoff with full jitter, the
 * outage / recovery / refusal / stop-deadline lines and the counters the
 * closing line reports, and the lines of the run check at start.  A
 * transport only sends a batch and says what came back; it never decides.
 *
 * The object is also the sink the monitor pushes into (sm__deliver_sink): a
 * bounded ring, flushed at stop within the bound (docs/design.md §7).  It is
 * reference-counted: the monitor's sink holds one reference, a Python driver
 * another, so a driver stuck in a request past the stop bound is abandoned
 * (its next() returns 0, its done() is ignored) and never joined.
 */
#ifndef SM_DELIVER_H
#define SM_DELIVER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "answer.h"
#include "sink.h"

typedef struct sm_deliver sm_deliver;

/* The bound of the run check at start (seconds), whichever transport asks:
 * a store that has not answered by then is said, and the points wait for it
 * (docs/design.md § Shipping). */
#define SM_DELIVER_CHECK_TIMEOUT_S 5.0

/* One request's worth: records within MLflow's log-batch limits, none of
 * them a non-finite metric. */
typedef struct sm_deliver_batch {
    const sm_entry *recs;
    size_t n;
    int64_t step_base;    /* added to every metric's step (a re-attached run) */
    const sm_ring *ring;  /* key and text strings: sm__ring_str(ring, id) */
    /* A request with no byte back for say_s seconds: the transport calls
     * stalled(stalled_arg, seconds) once and goes on waiting up to its total
     * timeout (deliver.c, "Patience"); a transport that cannot may ignore it */
    long say_s;
    void (*stalled)(void *arg, double waited_s);
    void *stalled_arg;
} sm_deliver_batch;

/* One request of a thread-driven transport; *taken receives how many of
 * b->n records it carried (fewer when the body would be too large). */
typedef void (*sm_deliver_post)(void *arg, const sm_deliver_batch *b, size_t *taken,
                                sm_rest_result *a);

/* A policy for run_id at the store shown (redacted) in lines; no buffer yet
 * (sm__deliver_configure).  One reference, the caller's. */
SM_HIDDEN int sm__deliver_new(const char *run_id, const char *shown, sm_deliver **out);
SM_HIDDEN void sm__deliver_ref(sm_deliver *d);
SM_HIDDEN void sm__deliver_unref(sm_deliver *d);
/* At the monitor's start: the buffer and the spread (sink.h's config).
 * Wakes a driver waiting in next().  Once. */
SM_HIDDEN int sm__deliver_configure(sm_deliver *d, const sm_sink_config *cfg, char *err,
                                   size_t errlen);
/* The sink face the monitor pushes into; it takes a reference, dropped by
 * its close().  Its close also ends a thread started here. */
SM_HIDDEN sm_sink *sm__deliver_sink(sm_deliver *d);
/* The REST sink: a thread (named name, no signals) loops next/post/done.
 * free_arg(arg) runs at close, after the thread is joined. */
SM_HIDDEN int sm__deliver_start_thread(sm_deliver *d, sm_deliver_post post, void *arg,
                                      void (*free_arg)(void *), const char *name);
/* The driver's side.  next: waits for records (and the random spread of a
 * fresh window, and the backoff of a failed request), then fills b and
 * returns 1; returns 0 when delivery is over (stopped and empty, stop bound
 * passed, cancelled).  done: what became of that batch (taken of b->n). */
SM_HIDDEN int sm__deliver_next(sm_deliver *d, sm_deliver_batch *b);
SM_HIDDEN void sm__deliver_done(sm_deliver *d, size_t taken, const sm_rest_result *a);
/* Ends delivery now: next() returns 0 (a start that failed, a driver to end). */
SM_HIDDEN void sm__deliver_cancel(sm_deliver *d);
/* For libcurl's xferinfo: non-zero abort, the stop deadline (monotonic ms, 0 none). */
SM_HIDDEN atomic_int *sm__deliver_abort_flag(sm_deliver *d);
SM_HIDDEN atomic_llong *sm__deliver_deadline_ms(sm_deliver *d);

/* The run check at start, however it was asked (answer.h: its verdict):
 * says what it decides and returns 0 (record: steps continue after the
 * rank's last one; no answer: said, the points wait for the store) or, for
 * a refused run, its code with err set (the start fails). */
SM_HIDDEN int sm__deliver_checked(sm_deliver *d, const sm_run_check *c, char *err, size_t errlen);

/* ---- the MlflowClient transport (python/scopemeter/_native.c) -------------- */

/* The monitor delivers through d, driven from outside (a Python thread):
 * its factory configures d at start and hands the monitor d's sink.  The
 * monitor holds a reference from this call on. */
SM_HIDDEN int sm__monitor_set_delivery(sm_monitor *m, sm_deliver *d);
SM_HIDDEN const char *sm__deliver_shown(const sm_deliver *d);
/* The run check from MlflowClient's get_run: run_json is the Run as
 * runs/get's "run" object (NULL when the store did not give it), error_code
 * MLflow's ("RESOURCE_DOES_NOT_EXIST": missing), why the line of a store
 * that did not answer.  As sm__deliver_checked. */
SM_HIDDEN int sm__deliver_check_json(sm_deliver *d, int rank, const char *run_json,
                                    const char *error_code, const char *why, char *err,
                                    size_t errlen);

#endif
