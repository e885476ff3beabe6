/*
 * body.h — the runs/log-batch request body, written directly from the
 * ring's entries (body.c).
 *
 * Why a writer of its own: building a jansson tree per window and dumping
 * it cost ~170 k instructions per window, 60 % of the shipping thread's
 * user time (bench/README.md, "Where a window's CPU goes").  The body is
 * always the same shape, so it is written straight into one buffer.  What
 * it writes parses (jansson, Python's json) to exactly the object the
 * jansson build made: tests/c/test_body.c and tests/fuzz/fuzz_body.c hold
 * it to that.
 */
#ifndef SM_MLFLOW_BODY_H
#define SM_MLFLOW_BODY_H

#include <stddef.h>
#include <stdint.h>

#include "sink.h"

/* One body and what it covers.  buf is malloc'd, NUL-terminated and grows
 * as needed; a caller may take it over (set buf to NULL) or keep it for the
 * next body; sm__body_free releases it. */
typedef struct sm_body {
    char *buf;
    size_t len, cap;
    size_t used;               /* records covered, non-finite ones included */
    size_t shipped;            /* metrics + tags in the body */
    size_t nonfinite;          /* NaN/inf values skipped among `used` */
    const char *nonfinite_key; /* the first one's key, NULL when none */
} sm_body;

/* Writes the log-batch body of run_id for the first records of recs[0..n)
 * that fit MLflow's limits, as the REST sink ships them (sink_mlflow.c):
 * at most SM_MLFLOW_MAX_METRICS metrics, SM_MLFLOW_MAX_TAGS tags and
 * SM_MLFLOW_MAX_ENTITIES of both, metrics' steps offset by step_base,
 * non-finite values skipped (NaN and inf are not JSON), and over
 * SM_MLFLOW_MAX_BODY bytes half as many records, again.  Keys and texts are
 * the ring's strings, cut at 1023 bytes, bytes that are not UTF-8 as jansson
 * reads it become '?'.  b->shipped is 0 when nothing is shippable (the body
 * is written all the same).  0 or -ENOMEM. */
SM_HIDDEN int sm__body_log_batch(sm_body *b, const char *run_id, const sm_ring *ring,
                                const sm_entry *recs, size_t n, int64_t step_base);
SM_HIDDEN void sm__body_free(sm_body *b);

/* MLflow's limits on one log-batch (mlflow/utils/validation.py), the one
 * place they are applied: whether record r goes into a batch that holds
 * *nm metrics and *nt tags so far.  1: it does (the count grows); 0: it is
 * skipped (a non-finite value: NaN and inf are not JSON); -1: the batch is
 * full.  deliver.c chooses its batches with it, and body.c writes them. */
SM_HIDDEN int sm__body_admit(const sm_entry *r, size_t *nm, size_t *nt);

/* Exposed for the tests: a JSON number for v (finite) that reads back as
 * exactly v, with a '.' or an exponent (a reader keeps it a real); the
 * length written, at most 32 bytes, no NUL. */
SM_HIDDEN size_t sm__body_real(char *out, double v);
/* The text a key or tag value becomes in JSON, before escaping (the same
 * as the jansson build's): at most 1023 bytes of s, sanitised to what
 * jansson accepts as UTF-8.  out holds 1024 bytes; the length written. */
SM_HIDDEN size_t sm__body_text(char *out, const char *s);

#endif
