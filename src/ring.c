/*
 * ring.c — the bounded FIFO between the sampling thread and a sink's
 * consumer (the REST shipping thread, or a binding draining the queue).
 *
 * Sampling must never wait on the network (contract §6), so push() never
 * blocks on a consumer: when the ring is full the oldest record is
 * overwritten and counted in `dropped`.  The storage is allocated once at
 * init; push and pop copy records and allocate nothing.
 *
 * Consumers that ship before they remove (peek, ship, consume) may see the
 * producer overwrite records they already peeked while shipping: head_seq
 * counts every record ever removed from the head, so consume(n) removes only
 * the peeked records that are still there, never one that was not shipped.
 * Timed waits use a CLOCK_MONOTONIC condvar.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sink.h"

int sm_ring_init(sm_ring *r, size_t cap)
{
    int rc;

    memset(r, 0, sizeof *r);
    if (cap == 0 || cap > SIZE_MAX / sizeof(sm_record))
        return -EINVAL;
    r->buf = calloc(cap, sizeof *r->buf);
    if (!r->buf)
        return -ENOMEM;
    r->cap = cap;
    rc = pthread_mutex_init(&r->mu, NULL);
    if (rc) {
        free(r->buf);
        r->buf = NULL;
        return -rc;
    }
    rc = sm_cond_init_mono(&r->cv);
    if (rc < 0) {
        pthread_mutex_destroy(&r->mu);
        free(r->buf);
        r->buf = NULL;
    }
    return rc;
}

void sm_ring_destroy(sm_ring *r)
{
    if (!r->buf)
        return;
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r->buf);
    r->buf = NULL;
    r->cap = r->len = r->head = 0;
}

void sm_ring_push(sm_ring *r, const sm_record *recs, size_t n)
{
    pthread_mutex_lock(&r->mu);
    if (r->closed) {
        /* a push after close (a sampling thread left behind by a stop that
         * timed out) has nowhere to go: it counts as dropped */
        r->dropped += n;
        pthread_mutex_unlock(&r->mu);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (r->len == r->cap) { /* full: the oldest goes */
            r->head = (r->head + 1) % r->cap;
            r->len--;
            r->head_seq++;
            r->dropped++;
        }
        r->buf[(r->head + r->len) % r->cap] = recs[i];
        r->len++;
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Waits (mutex held) until records are there, the ring is closed, or the
 * timeout passes.  Returns 1 when records are there, 0 on timeout, -EPIPE
 * when closed and empty. */
static int wait_records(sm_ring *r, double timeout_s)
{
    double deadline = sm_now_mono() + (timeout_s > 0 ? timeout_s : 0);
    struct timespec ts;

    sm_mono_timespec(deadline, &ts);
    while (r->len == 0) {
        if (r->closed)
            return -EPIPE;
        if (!(timeout_s > 0) || sm_now_mono() >= deadline)
            return 0;
        pthread_cond_timedwait(&r->cv, &r->mu, &ts);
    }
    return 1;
}

static size_t copy_out(sm_ring *r, sm_record *out, size_t cap)
{
    size_t n = r->len < cap ? r->len : cap;

    for (size_t i = 0; i < n; i++)
        out[i] = r->buf[(r->head + i) % r->cap];
    return n;
}

static void remove_head(sm_ring *r, size_t n)
{
    if (n > r->len)
        n = r->len;
    r->head = (r->head + n) % r->cap;
    r->len -= n;
    r->head_seq += n;
}

/* peek and pop: wait for records, copy up to cap, and remove them too when
 * `remove` (pop) — one body so the two cannot drift apart. */
static int take(sm_ring *r, sm_record *out, size_t cap, double timeout_s, int remove)
{
    int rc;
    size_t n;

    if (cap == 0)
        return -EINVAL;
    if (cap > INT32_MAX)
        cap = INT32_MAX;
    pthread_mutex_lock(&r->mu);
    rc = wait_records(r, timeout_s);
    if (rc > 0) {
        n = copy_out(r, out, cap);
        if (remove)
            remove_head(r, n);
        r->peek_seq = r->head_seq;
        rc = (int)n;
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int sm_ring_peek(sm_ring *r, sm_record *out, size_t cap, double timeout_s)
{
    return take(r, out, cap, timeout_s, 0);
}

size_t sm_ring_consume(sm_ring *r, size_t n)
{
    uint64_t end;
    size_t removed = 0;

    pthread_mutex_lock(&r->mu);
    end = r->peek_seq + n; /* one past the last record peeked */
    if (end > r->head_seq) { /* some of them may have been overwritten since */
        removed = (size_t)(end - r->head_seq);
        remove_head(r, removed);
    }
    r->peek_seq = r->head_seq;
    pthread_mutex_unlock(&r->mu);
    return removed;
}

int sm_ring_pop(sm_ring *r, sm_record *out, size_t cap, double timeout_s)
{
    return take(r, out, cap, timeout_s, 1);
}

void sm_ring_close(sm_ring *r)
{
    pthread_mutex_lock(&r->mu);
    r->closed = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

size_t sm_ring_len(sm_ring *r)
{
    size_t n;

    pthread_mutex_lock(&r->mu);
    n = r->len;
    pthread_mutex_unlock(&r->mu);
    return n;
}

uint64_t sm_ring_dropped(sm_ring *r)
{
    uint64_t n;

    pthread_mutex_lock(&r->mu);
    n = r->dropped;
    pthread_mutex_unlock(&r->mu);
    return n;
}
