/*
 * ring.c — the bounded FIFO between the sampling thread and a sink's
 * consumer (the REST shipping thread, or a binding draining the queue).
 *
 * Sampling must never wait on the network (docs/design.md §6),
 * so push() never blocks on a consumer: when the ring is full the oldest
 * record is overwritten and counted in `dropped`.
 *
 * Storage is compact.  A record in the ring is an sm_entry of 24 bytes; its
 * key and tag text live once in the ring's string table (a run has a fixed
 * set of series keys and a few dozen tags).  A record with its strings
 * inline (0.1's sm_record had 768 bytes of key and text) would make an
 * hour's buffer of 131072 records 100 MB, and
 * a ring touches every page of its storage as its head goes round.  The
 * table is filled on push (under the lock) and never changes an entry once
 * published, so a consumer reads the strings of the entries it took without
 * the lock.  A new string allocates; the same keys every window do not.
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

/* ---- string table ------------------------------------------------------------- */

static uint32_t str_hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */

    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* The id of s (n bytes), adding it when new.  0 when the table is full or
 * out of memory (id 0 is the empty string, never a key). */
static uint16_t intern(sm_ring *r, const char *s, size_t n)
{
    uint32_t h = str_hash(s, n), mask = SM_RING_HASH - 1;
    char *copy;

    for (uint32_t i = h & mask;; i = (i + 1) & mask) {
        uint16_t id = r->hash[i];
        if (id == 0)
            break; /* a free bucket: s is new */
        if (strncmp(r->str[id], s, n) == 0 && r->str[id][n] == '\0')
            return id;
    }
    if (r->nstr >= SM_RING_STRINGS)
        return 0;
    copy = malloc(n + 1);
    if (!copy)
        return 0;
    memcpy(copy, s, n);
    copy[n] = '\0';
    r->str[r->nstr] = copy;
    for (uint32_t i = h & mask;; i = (i + 1) & mask)
        if (r->hash[i] == 0) {
            r->hash[i] = (uint16_t)r->nstr;
            break;
        }
    return (uint16_t)r->nstr++;
}

const char *sm__ring_str(const sm_ring *r, uint16_t id)
{
    return id < SM_RING_STRINGS && r->str[id] ? r->str[id] : "";
}

void sm__ring_expand(const sm_ring *r, const sm_entry *e, sm_record *out)
{
    const char *k = sm__ring_str(r, e->key);

    memset(out, 0, sizeof *out);
    out->kind = e->text ? SM_RECORD_TAG : SM_RECORD_METRIC;
    out->key = k; /* the table's strings live until sm__ring_destroy */
    if (e->text) {
        out->text = sm__ring_str(r, e->text);
        out->text_len = strlen(out->text);
    }
    out->value = e->value;
    out->timestamp_ms = e->timestamp_ms;
    out->step = e->step;
}

/* ---- the ring ----------------------------------------------------------------- */

/* Entries, string pointers and hash buckets in one block of sm__zalloc: a
 * ring costs the pages its head has touched (a few while the sink keeps up;
 * it restarts at the front when emptied), not its capacity. */
static size_t ring_bytes(size_t cap)
{
    return cap * sizeof(sm_entry) + SM_RING_STRINGS * sizeof(char *) +
           SM_RING_HASH * sizeof(uint16_t);
}

int sm__ring_init(sm_ring *r, size_t cap)
{
    int rc = -ENOMEM;
    void *mem;

    memset(r, 0, sizeof *r);
    if (cap == 0 || cap > (SIZE_MAX / 2) / sizeof(sm_entry))
        return -EINVAL;
    /* sm_entry (8-byte aligned) first, then the pointers, then the buckets */
    mem = sm__zalloc(ring_bytes(cap));
    if (!mem)
        return -ENOMEM;
    r->buf = mem;
    r->str = (char **)(r->buf + cap);
    r->hash = (uint16_t *)(r->str + SM_RING_STRINGS);
    r->nstr = 1;      /* id 0 (str[0] NULL): no string, "" to readers */
    r->cap = cap;
    rc = -pthread_mutex_init(&r->mu, NULL);
    if (rc < 0)
        goto fail;
    rc = sm__cond_init_mono(&r->cv);
    if (rc < 0) {
        pthread_mutex_destroy(&r->mu);
        goto fail;
    }
    return 0;
fail:
    sm__zfree(mem);
    memset(r, 0, sizeof *r);
    return rc;
}

void sm__ring_destroy(sm_ring *r)
{
    if (!r->buf)
        return;
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    for (uint32_t i = 1; i < r->nstr; i++)
        free(r->str[i]);
    sm__zfree(r->buf);
    memset(r, 0, sizeof *r);
}

void sm__ring_push(sm_ring *r, const sm_record *recs, size_t n)
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
        const sm_record *x = &recs[i];
        sm_entry e = {.value = x->value, .timestamp_ms = x->timestamp_ms, .step = x->step};

        e.key = intern(r, x->key, strlen(x->key));
        if (x->kind == SM_RECORD_TAG) /* whole: a tag value has no length cap here */
            e.text = intern(r, x->text ? x->text : "", x->text ? x->text_len : 0);
        if (e.key == 0 || (x->kind == SM_RECORD_TAG && e.text == 0)) {
            r->dropped++; /* no room for one more distinct string */
            continue;
        }
        if (r->len == r->cap) { /* full: the oldest goes */
            r->head = (r->head + 1) % r->cap;
            r->len--;
            r->head_seq++;
            r->dropped++;
        }
        r->buf[(r->head + r->len) % r->cap] = e;
        r->len++;
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Waits (mutex held) until records are there, the ring is closed, or the
 * timeout passes (< 0: no timeout).  Returns 1 when records are there, 0 on
 * timeout, -EPIPE when closed and empty. */
static int wait_records(sm_ring *r, double timeout_s)
{
    double deadline = sm__now_mono() + (timeout_s > 0 ? timeout_s : 0);
    struct timespec ts;

    sm__mono_timespec(deadline, &ts);
    while (r->len == 0) {
        if (r->closed)
            return -EPIPE;
        if (timeout_s < 0) {
            pthread_cond_wait(&r->cv, &r->mu);
            continue;
        }
        if (!(timeout_s > 0) || sm__now_mono() >= deadline)
            return 0;
        pthread_cond_timedwait(&r->cv, &r->mu, &ts);
    }
    return 1;
}

static void remove_head(sm_ring *r, size_t n)
{
    if (n > r->len)
        n = r->len;
    r->head = (r->head + n) % r->cap;
    r->len -= n;
    r->head_seq += n;
    /* Emptied (the usual state between windows): the next push starts at the
     * front again, so only the pages of the largest backlog become resident.
     * A head that goes round touches the whole buffer (cap x 24 bytes: 3 MB
     * at the default hour of points) within hours even when it never holds
     * more than one window.  Nothing outside the lock keeps a position:
     * consumers copy entries and count removals in head_seq. */
    if (r->len == 0)
        r->head = 0;
}

/* peek and pop: wait for records, copy up to cap (as entries, or expanded to
 * records), and remove them too when `remove` (pop) — one body so the two
 * cannot drift apart. */
static int take(sm_ring *r, sm_entry *ent, sm_record *rec, size_t cap, double timeout_s,
                int remove)
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
        n = r->len < cap ? r->len : cap;
        for (size_t i = 0; i < n; i++) {
            const sm_entry *e = &r->buf[(r->head + i) % r->cap];
            if (ent)
                ent[i] = *e;
            else
                sm__ring_expand(r, e, &rec[i]);
        }
        if (remove)
            remove_head(r, n);
        r->peek_seq = r->head_seq;
        rc = (int)n;
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int sm__ring_peek(sm_ring *r, sm_entry *out, size_t cap, double timeout_s)
{
    return take(r, out, NULL, cap, timeout_s, 0);
}

size_t sm__ring_consume(sm_ring *r, size_t n)
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

int sm__ring_pop(sm_ring *r, sm_record *out, size_t cap, double timeout_s)
{
    return take(r, NULL, out, cap, timeout_s, 1);
}

void sm__ring_close(sm_ring *r)
{
    pthread_mutex_lock(&r->mu);
    r->closed = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

size_t sm__ring_len(sm_ring *r)
{
    size_t n;

    pthread_mutex_lock(&r->mu);
    n = r->len;
    pthread_mutex_unlock(&r->mu);
    return n;
}

uint64_t sm__ring_dropped(sm_ring *r)
{
    uint64_t n;

    pthread_mutex_lock(&r->mu);
    n = r->dropped;
    pthread_mutex_unlock(&r->mu);
    return n;
}
