/*
 * sink_jsonl.c — the local file sink: one JSON object per record and line,
 * written by its own thread.
 *
 * `scopemeter run` uses it when there is no http(s) tracking server or no
 * run to record into: nothing is lost silently, the points land in a file a
 * user can inspect or import later (docs/cli.md):
 *   {"kind": "metric", "key": ..., "value": ..., "timestamp": ms, "step": n}
 *   {"kind": "tag", "key": ..., "value": "...", "timestamp": ms}
 *
 * As the REST sink, the sampling thread only pushes into a bounded ring
 * (sink.h); the writer sleeps until a window arrives, writes it and flushes
 * the stdio buffer once per window.  A write that fails (disk full, EIO) is
 * said once; the records from there on count as undelivered.  jansson
 * encodes: values are finite (the monitor skips NaN/inf), keys and texts
 * may need escaping.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "scopemeter_mlflow.h"
#include "sink.h"

#define BATCH 256

typedef struct jsink {
    sm_sink base;
    sm_ring ring;
    FILE *f;
    char path[4096];
    pthread_t thread;
    int thread_started;
    int write_errno;          /* first failed write, said once */
    atomic_ullong written, failed;
    sm_entry batch[BATCH];
} jsink;

static int write_record(jsink *s, const sm_record *r)
{
    json_t *o;
    char *line;
    int rc = 0;

    if (r->kind == SM_RECORD_METRIC)
        o = json_pack("{s:s, s:s, s:f, s:I, s:I}", "kind", "metric", "key", r->key, "value",
                      r->value, "timestamp", (json_int_t)r->timestamp_ms, "step",
                      (json_int_t)r->step);
    else
        o = json_pack("{s:s, s:s, s:s, s:I}", "kind", "tag", "key", r->key, "value", r->text,
                      "timestamp", (json_int_t)r->timestamp_ms);
    line = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!line)
        return -EINVAL; /* invalid UTF-8 in a tag value: counted as failed */
    if (fprintf(s->f, "%s\n", line) < 0)
        rc = errno ? -errno : -EIO;
    free(line);
    return rc;
}

static void *write_main(void *arg)
{
    jsink *s = arg;
    int n;

    while ((n = sm__ring_peek(&s->ring, s->batch, BATCH, -1)) != -EPIPE) {
        sm_record r;
        uint64_t ok = 0, bad = 0;

        if (n <= 0)
            continue;
        for (int i = 0; i < n; i++) {
            int rc = -EIO;
            sm__ring_expand(&s->ring, &s->batch[i], &r);
            if (!s->write_errno)
                rc = write_record(s, &r);
            if (rc == 0)
                ok++;
            else
                bad++;
            if (rc < 0 && rc != -EINVAL && !s->write_errno) {
                s->write_errno = -rc;
                sm__log(SM_WARN, "cannot write %s: %s; points from here on are not kept",
                       s->path, strerror(-rc));
            }
        }
        if (!s->write_errno && fflush(s->f) != 0) {
            s->write_errno = errno ? errno : EIO;
            sm__log(SM_WARN, "cannot write %s: %s; points from here on are not kept", s->path,
                   strerror(s->write_errno));
            bad += ok; /* buffered, never reached the file */
            ok = 0;
        }
        sm__ring_consume(&s->ring, (size_t)n);
        atomic_fetch_add(&s->written, ok);
        atomic_fetch_add(&s->failed, bad);
    }
    return NULL;
}

static void j_push(sm_sink *base, const sm_record *recs, size_t n)
{
    jsink *s = base->impl;

    sm__ring_push(&s->ring, recs, n);
}

/* Local writes: the writer drains the ring and leaves; the deadline is not
 * needed to abort a network request, so flush waits for the writer. */
static int j_flush(sm_sink *base, double deadline)
{
    jsink *s = base->impl;

    (void)deadline;
    sm__ring_close(&s->ring);
    if (s->thread_started) {
        pthread_join(s->thread, NULL);
        s->thread_started = 0;
    }
    return 0;
}

static uint64_t j_dropped(sm_sink *base)
{
    jsink *s = base->impl;

    return sm__ring_dropped(&s->ring);
}

static void j_counts(sm_sink *base, sm_sink_counts *out)
{
    jsink *s = base->impl;

    memset(out, 0, sizeof *out);
    out->delivered = atomic_load(&s->written);
    out->overflow = sm__ring_dropped(&s->ring);
    out->undelivered = atomic_load(&s->failed) + sm__ring_len(&s->ring);
    sm__log(SM_INFO, "%llu records written to %s", (unsigned long long)out->delivered, s->path);
}

static void j_close(sm_sink *base)
{
    jsink *s = base->impl;

    j_flush(base, 0);
    if (s->f && fclose(s->f) != 0 && !s->write_errno)
        sm__log(SM_WARN, "closing %s: %s", s->path, strerror(errno));
    sm__ring_destroy(&s->ring);
    free(s);
}

static const sm_sink_ops jsonl_ops = {
    .name = "jsonl",
    .push = j_push,
    .flush = j_flush,
    .dropped = j_dropped,
    .counts = j_counts,
    .close = j_close,
};

static int sm__sink_jsonl_new(const sm_sink_config *cfg, char *err, size_t errlen, sm_sink **out)
{
    jsink *s;
    sigset_t all, old;
    int fd, rc;

    *out = NULL;
    s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->base.ops = &jsonl_ops;
    s->base.impl = s;
    snprintf(s->path, sizeof s->path, "%s", cfg->target);
    rc = sm__ring_init(&s->ring, cfg->cap);
    if (rc < 0) {
        snprintf(err, errlen, "cannot allocate a buffer of %zu points", cfg->cap);
        free(s);
        return rc;
    }
    fd = open(s->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 || !(s->f = fdopen(fd, "a"))) {
        rc = -errno;
        snprintf(err, errlen, "cannot open %s: %s", s->path, strerror(errno));
        if (fd >= 0)
            close(fd);
        goto fail;
    }
    /* the writer takes no signals: they belong to the application's threads */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = -pthread_create(&s->thread, NULL, write_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc < 0) {
        snprintf(err, errlen, "cannot start the JSONL writer");
        goto fail;
    }
    pthread_setname_np(s->thread, "scopemeter-jsonl");
    s->thread_started = 1;
    *out = &s->base;
    return 0;
fail:
    j_close(&s->base);
    return rc;
}

int sm_monitor_set_jsonl(sm_monitor *m, const char *path)
{
    if (!m || !path || !*path)
        return -EINVAL;
    return sm__monitor_set_sink_factory(m, sm__sink_jsonl_new, path, NULL, NULL);
}
