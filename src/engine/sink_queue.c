/*
 * sink_queue.c — the pull sink for language bindings.  The sampling thread
 * pushes each window's records into a ring; the binding drains them with
 * sm_monitor_drain_records() and logs them through its own client with its own
 * policy.  (The Python front no longer does: its MlflowClient thread drives
 * the engine's delivery policy, src/mlflow/deliver.h.)
 *
 * flush() only closes the ring: the records already queued stay there for the
 * binding, and drain returns -EPIPE once they are gone, which tells the
 * binding the stream is over.  It does not wait for the binding: a binding
 * that drains on the same thread that stops would otherwise wait the whole
 * stop timeout.  close() frees the ring; the monitor calls it from
 * sm_monitor_free(), after the binding's last drain.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sink.h"

static void q_push(sm_sink *s, const sm_record *recs, size_t n)
{
    sm__ring_push(s->impl, recs, n);
}

static int q_flush(sm_sink *s, double deadline)
{
    (void)deadline;
    sm__ring_close(s->impl);
    return 0;
}

static uint64_t q_dropped(sm_sink *s)
{
    return sm__ring_dropped(s->impl);
}

static void q_close(sm_sink *s)
{
    sm__ring_destroy(s->impl);
    free(s->impl);
    free(s);
}

static const sm_sink_ops queue_ops = {
    .name = "queue",
    .push = q_push,
    .flush = q_flush,
    .dropped = q_dropped,
    .close = q_close,
};

int sm__sink_queue_new(size_t cap, sm_sink **out)
{
    sm_sink *s = calloc(1, sizeof *s);
    sm_ring *r = calloc(1, sizeof *r);
    int rc = -ENOMEM;

    *out = NULL;
    if (!s || !r)
        goto fail;
    rc = sm__ring_init(r, cap);
    if (rc < 0)
        goto fail;
    s->ops = &queue_ops;
    s->impl = r;
    *out = s;
    return 0;
fail:
    free(r);
    free(s);
    return rc;
}

int sm__sink_queue_drain(sm_sink *s, sm_record *out, int cap, size_t record_size,
                        double timeout_s)
{
    sm_record chunk[64];
    int n;

    if (!s || s->ops != &queue_ops || !out || cap <= 0 || record_size < SM_RECORD_SIZE_MIN)
        return -EINVAL;
    if (record_size == sizeof *out) /* the caller's sm_record is this library's */
        return sm__ring_pop(s->impl, out, (size_t)cap, timeout_s);
    /* another stride (a program built against an older or newer header):
     * the fields both know, zeros past ours (scopemeter.h) */
    n = sm__ring_pop(s->impl, chunk, (size_t)cap < 64 ? (size_t)cap : 64, timeout_s);
    for (int i = 0; i < n; i++) {
        char *dst = (char *)out + (size_t)i * record_size;
        memcpy(dst, &chunk[i], record_size < sizeof chunk[i] ? record_size : sizeof chunk[i]);
        if (record_size > sizeof chunk[i])
            memset(dst + sizeof chunk[i], 0, record_size - sizeof chunk[i]);
    }
    return n;
}

size_t sm__sink_queue_len(sm_sink *s)
{
    return s && s->ops == &queue_ops ? sm__ring_len(s->impl) : 0;
}
