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
 * (sink.h); the writer sleeps until a window arrives and writes its lines
 * with write(2) on the descriptor, no stdio buffer between.  The file only
 * ever holds whole lines, and "N records written" counts the lines on disk
 * (docs/cli.md, Without a tracking server): a write that fails or comes back
 * short (a full disk: ENOSPC, EIO) is said once, the file is cut back with
 * ftruncate(2) to the end of its last whole line — a reader never meets a cut
 * line — the records whose lines were whole count as written, the rest and
 * every record from there on as undelivered.  (A file system that reports a
 * full disk only at writeback, after write(2) succeeded, is beyond this: the
 * tmpfs, ext4 and xfs in front of such a run reserve at write.)  jansson
 * encodes: values are finite (the monitor skips NaN/inf), keys and texts may
 * need escaping.
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

#include "number.h"
#include "scopemeter_mlflow.h"
#include "sink.h"

#define BATCH 256

typedef struct jsink {
    sm_sink base;
    sm_ring ring;
    int fd;
    off_t end;                /* the file's size: its last whole line ends here */
    char *buf;                /* one window's lines */
    size_t len, cap;
    size_t ends[BATCH];       /* where each line of buf ends */
    char path[4096];
    pthread_t thread;
    int thread_started;
    int write_errno;          /* first failed write, said once */
    atomic_ullong written, failed;
    sm_entry batch[BATCH];
} jsink;

/* Appends r's line to the window's buffer: 0, -EINVAL (invalid UTF-8 in
 * a tag value: counted as failed) or -ENOMEM. */
static int add_line(jsink *s, const sm_record *r)
{
    json_t *o;
    char *line, digits[32];
    size_t n;
    int prec = 17;

    if (r->kind == SM_RECORD_METRIC)
        o = json_pack("{s:s, s:s, s:f, s:I, s:I}", "kind", "metric", "key", r->key, "value",
                      r->value, "timestamp", (json_int_t)r->timestamp_ms, "step",
                      (json_int_t)r->step);
    else
        o = json_pack("{s:s, s:s, s:s, s:I}", "kind", "tag", "key", r->key, "value", r->text,
                      "timestamp", (json_int_t)r->timestamp_ms);
    /* the shortest decimal that reads back (12.3, not 12.300000000000001) */
    if (r->kind == SM_RECORD_METRIC)
        prec = sm__num_shortest(digits, sizeof digits, r->value, true);
    line = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(prec)) : NULL;
    json_decref(o);
    if (!line)
        return -EINVAL;
    n = strlen(line) + 1;
    if (s->len + n > s->cap) {
        size_t cap = (s->len + n) * 2;
        char *b = realloc(s->buf, cap);
        if (!b) {
            free(line);
            return -ENOMEM;
        }
        s->buf = b;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, line, n - 1);
    s->buf[s->len + n - 1] = '\n';
    s->len += n;
    free(line);
    return 0;
}

/* Writes the window's nlines lines; the number now whole on disk.  On a
 * failed or short write the file is cut back to its last whole line and the
 * first error is said (see the top). */
static size_t write_lines(jsink *s, size_t nlines)
{
    size_t done = 0, whole = 0;
    int e = 0;

    while (done < s->len) {
        ssize_t w = write(s->fd, s->buf + done, s->len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            e = w < 0 ? errno : ENOSPC; /* write(2) returns 0 only when nothing fits */
            break;
        }
        done += (size_t)w;
    }
    while (whole < nlines && s->ends[whole] <= done)
        whole++;
    if (e) {
        off_t keep = s->end + (off_t)(whole ? s->ends[whole - 1] : 0);
        s->write_errno = e;
        sm__log(SM_WARN, "cannot write %s: %s; points from here on are not kept", s->path,
               strerror(e));
        if (done > (whole ? s->ends[whole - 1] : 0) && ftruncate(s->fd, keep) < 0)
            sm__log(SM_WARN, "cannot cut %s back to its last whole line: %s; its last line is "
                   "incomplete", s->path, strerror(errno));
        s->end = keep;
    } else {
        s->end += (off_t)done;
    }
    return whole;
}

static void *write_main(void *arg)
{
    jsink *s = arg;
    int n;

    while ((n = sm__ring_peek(&s->ring, s->batch, BATCH, -1)) != -EPIPE) {
        sm_record r;
        size_t nlines = 0, whole = 0;

        if (n <= 0)
            continue;
        s->len = 0;
        for (int i = 0; i < n && !s->write_errno; i++) {
            sm__ring_expand(&s->ring, &s->batch[i], &r);
            if (add_line(s, &r) == 0) /* else not encoded: counted as failed */
                s->ends[nlines++] = s->len;
        }
        if (!s->write_errno && nlines > 0)
            whole = write_lines(s, nlines);
        sm__ring_consume(&s->ring, (size_t)n);
        atomic_fetch_add(&s->written, whole);
        /* not encoded, not whole on disk, or after a failure */
        atomic_fetch_add(&s->failed, (uint64_t)n - whole);
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
    out->to_file = 1; /* written to a file, not delivered to a store */
    out->delivered = atomic_load(&s->written);
    out->overflow = sm__ring_dropped(&s->ring);
    out->undelivered = atomic_load(&s->failed) + sm__ring_len(&s->ring);
    sm__log(SM_INFO, "%llu record%s written to %s", (unsigned long long)out->delivered,
           out->delivered == 1 ? "" : "s", s->path);
}

static void j_close(sm_sink *base)
{
    jsink *s = base->impl;

    j_flush(base, 0);
    if (s->fd >= 0 && close(s->fd) != 0 && !s->write_errno)
        sm__log(SM_WARN, "closing %s: %s", s->path, strerror(errno));
    sm__ring_destroy(&s->ring);
    free(s->buf);
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
    int rc;

    *out = NULL;
    s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->fd = -1;
    s->base.ops = &jsonl_ops;
    s->base.impl = s;
    snprintf(s->path, sizeof s->path, "%s", cfg->target);
    rc = sm__ring_init(&s->ring, cfg->cap);
    if (rc < 0) {
        snprintf(err, errlen, "cannot allocate a buffer of %zu points", cfg->cap);
        free(s);
        return rc;
    }
    s->fd = open(s->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (s->fd < 0 || (s->end = lseek(s->fd, 0, SEEK_END)) < 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot open %s: %s", s->path, strerror(errno));
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
