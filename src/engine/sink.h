/*
 * sink.h — where finished records go.  The monitor's sampling thread hands
 * each logging window's records (metrics and tags) to a sink with push(),
 * which must never block on the network: sinks keep a bounded ring
 * (ring.c) that drops the oldest records when full and counts them.
 *
 * Sinks: sink_queue.c (a binding drains records with sm_monitor_drain_records),
 * and in the full library mlflow/deliver.c (the delivery policy to an
 * MLflow run, driven by the REST sink's libcurl thread, mlflow/sink_mlflow.c,
 * or by the Python front's MlflowClient thread) and mlflow/sink_jsonl.c.
 * Adding a sink is one new file implementing these ops.
 */
#ifndef SM_SINK_H
#define SM_SINK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "internal.h"

/* ---- ring.c: bounded FIFO of records, drop-oldest on overflow ------------- */
/* A record as the ring keeps it (24 bytes): key and tag text are ids in the
 * ring's string table (sm__ring_str); text 0 means a metric.  push() takes
 * sm_record (scopemeter.h), whose key and text point at the producer's
 * strings for the duration of the call; the ring copies them, whole. */
typedef struct sm_entry {
    double value;
    int64_t timestamp_ms;
    int32_t step;
    uint16_t key;
    uint16_t text;
} sm_entry;

#define SM_RING_STRINGS 8192   /* distinct keys and tag texts one ring holds */
#define SM_RING_HASH 16384     /* open-addressing buckets, a power of two */

typedef struct sm_ring {
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* signalled on push and on close */
    sm_entry *buf;
    size_t cap, head, len;
    uint64_t dropped;        /* records overwritten because the ring was full */
    int closed;              /* no more pushes; consumers drain what is left */
    /* Records ever removed from the head (consumed or overwritten), and its
     * value at the last peek: consume(n) after an overflow during shipping
     * removes only what was peeked and is still there (ring.c). */
    uint64_t head_seq, peek_seq;
    /* string table: written under mu, entries never change once set */
    char **str;
    uint32_t nstr;
    uint16_t *hash;
} sm_ring;

SM_HIDDEN int sm__ring_init(sm_ring *r, size_t cap);
SM_HIDDEN void sm__ring_destroy(sm_ring *r);
/* Never blocks on a consumer; overwrites the oldest when full. */
SM_HIDDEN void sm__ring_push(sm_ring *r, const sm_record *recs, size_t n);
/* Copies up to cap entries without removing them, waiting up to timeout_s
 * (0: no wait; < 0: until records come or the ring closes) for at least one.
 * Returns the count, 0 on timeout, -EPIPE when closed and empty. */
SM_HIDDEN int sm__ring_peek(sm_ring *r, sm_entry *out, size_t cap, double timeout_s);
/* Removes the n oldest records (after a successful peek+ship).  Returns how
 * many it removed: fewer than n when the producer overwrote some of them
 * since the peek (already counted in dropped). */
SM_HIDDEN size_t sm__ring_consume(sm_ring *r, size_t n);
/* peek + consume in one step, expanded to records (the queue sink). */
SM_HIDDEN int sm__ring_pop(sm_ring *r, sm_record *out, size_t cap, double timeout_s);
/* The string of an entry's key or text id ("" for 0); valid until destroy. */
SM_HIDDEN const char *sm__ring_str(const sm_ring *r, uint16_t id);
SM_HIDDEN void sm__ring_expand(const sm_ring *r, const sm_entry *e, sm_record *out);
SM_HIDDEN void sm__ring_close(sm_ring *r);
SM_HIDDEN size_t sm__ring_len(sm_ring *r);
SM_HIDDEN uint64_t sm__ring_dropped(sm_ring *r);

/* ---- sink interface -------------------------------------------------------- */
typedef struct sm_sink sm_sink;

/* What became of the records a sink was handed, for the closing line:
 * delivered + overflow + refused + undelivered (+ non-finite values skipped)
 * is everything pushed. */
typedef struct sm_sink_counts {
    int to_file;           /* a file: its records are "written", else "delivered" */
    uint64_t delivered;    /* the store took them */
    uint64_t overflow;     /* dropped because the buffer was full (oldest first) */
    uint64_t refused;      /* the store said no (4xx); not retried */
    uint64_t undelivered;  /* still waiting when the stop bound ran out (spool_left too) */
    /* the spool past the ring (mlflow/spool.c): records moved into it,
     * taken back out (in delivered or refused), lost to its bound (in
     * overflow), left in its files for `scopemeter sync` (in undelivered) */
    uint64_t spooled, replayed, spool_dropped, spool_left;
} sm_sink_counts;

typedef struct sm_sink_ops {
    const char *name;
    /* Called from the sampling thread with one window's records: enqueue only. */
    void (*push)(sm_sink *s, const sm_record *recs, size_t n);
    /* Called at stop after the last push: deliver what is queued, giving up
     * at the monotonic deadline (seconds, CLOCK_MONOTONIC).  0 or -ETIMEDOUT. */
    int (*flush)(sm_sink *s, double deadline);
    /* Records lost so far (ring overflow, or refused by the server). */
    uint64_t (*dropped)(sm_sink *s);
    /* After flush: the final account.  NULL for a sink that does not deliver
     * itself (the queue: its binding delivers and reports, sm_monitor_report). */
    void (*counts)(sm_sink *s, sm_sink_counts *out);
    /* Release everything; after flush. */
    void (*close)(sm_sink *s);
} sm_sink_ops;

struct sm_sink {
    const sm_sink_ops *ops;
    void *impl;
};

/* queue sink (sink_queue.c) */
SM_HIDDEN int sm__sink_queue_new(size_t cap, sm_sink **out);
/* The smallest record_size a drain takes: the first sm_record with string
 * pointers (scopemeter.h), frozen whatever fields come later. */
#define SM_RECORD_SIZE_MIN (offsetof(sm_record, text_len) + sizeof(size_t))
/* out: cap records of record_size bytes (>= SM_RECORD_SIZE_MIN) each. */
SM_HIDDEN int sm__sink_queue_drain(sm_sink *s, sm_record *out, int cap, size_t record_size,
                                  double timeout_s);
SM_HIDDEN size_t sm__sink_queue_len(sm_sink *s); /* records waiting; 0 for another sink */

/* What the monitor hands a delivering sink's constructor at start: only what
 * the core knows.  Whatever else a sink needs (an MLflow run, HTTP header
 * fields, a bound of its own) is its settings, opaque here: built by the
 * function that chose the sink and handed over with the factory. */
#define SM_STEP_KEYS 3

typedef struct sm_sink_config {
    const char *target;         /* the tracking URI (REST), the file (JSONL) */
    size_t cap;                 /* records the buffer holds */
    int collectors;             /* of the whole job: posts are spread by it */
    double period_s;            /* one logging window */
    int rank;                   /* the monitor's rank: its keys end in /rankN */
    void *settings;             /* the sink's own, as registered; may be NULL */
    /* A few of the monitor's own keys (its rank's; node-independent first,
     * one per family): a sink that re-attaches reads where the run's steps
     * of this rank stopped from their histories (docs/design.md §3), not
     * from the whole run.  Point into the monitor; valid during the call. */
    const char *step_keys[SM_STEP_KEYS];
    size_t nstep_keys;
    /* The value of the rank's start tag scopemeter.rankN.node, as the start
     * tags write it: the REST sink's write check writes it first. */
    char node_tag[SM_SHOWN_MAX(256)];
} sm_sink_config;

/* A delivering sink's constructor.  sm_monitor_set_run() (mlflow/sink_mlflow.c)
 * and sm_monitor_set_jsonl() (mlflow/sink_jsonl.c) live in the full library
 * and hand theirs to the monitor, so the core never links libcurl or
 * jansson. */
typedef int (*sm_sink_factory)(const sm_sink_config *cfg, char *err, size_t errlen,
                               sm_sink **out);
/* monitor.c: remember the factory, its target and its settings;
 * sm_monitor_start() calls it.  The monitor owns settings from this call on
 * (even when it fails) and releases them with free_settings (may be NULL)
 * when another sink is chosen or the monitor is freed. */
SM_HIDDEN int sm__monitor_set_sink_factory(sm_monitor *m, sm_sink_factory f, const char *target,
                                          void *settings, void (*free_settings)(void *));
/* monitor.c: the settings registered with factory f, while the monitor is
 * not started yet; NULL when another sink (or none) is chosen.  A sink's
 * own setters (sm_monitor_set_headers) change them here. */
SM_HIDDEN void *sm__monitor_sink_settings(sm_monitor *m, sm_sink_factory f);
/* monitor.c: hooks of the sink registered with f, called with its settings
 * on the caller's thread: started(settings, target, rank) at the end of a
 * successful sm_monitor_start (the run checked, the rank known), stopped at
 * sm_monitor_stop after the flush (the monitor's end delivered or given up);
 * a companion's (mlflow/companion.c).  NULL hooks: none.  -EINVAL when f is
 * not the chosen sink's factory, -EBUSY once started.  Cleared with the
 * settings. */
SM_HIDDEN int sm__monitor_set_sink_hooks(sm_monitor *m, sm_sink_factory f,
                                        void (*started)(void *settings, const char *target,
                                                        int rank),
                                        void (*stopped)(void *settings));
/* monitor.c: the recording key (docs/design.md §9) when none was set: the
 * sink that knows the run names it (copied). */
SM_HIDDEN int sm__monitor_default_recording_key(sm_monitor *m, const char *key);

/* monitor.c: the closing line both surfaces print, and its warning when records
 * were lost.  windows, points and tags are what the monitor logged. */
SM_HIDDEN void sm__log_summary(int64_t windows, uint64_t points, uint64_t tags,
                              const sm_sink_counts *c);

#endif
