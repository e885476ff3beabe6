/*
 * log.c — the one line format.  Every failure is one line on stderr with the
 * prefix "scopemeter:" (docs/design.md §6), so "why is this series missing" always
 * has an answer in the log.  Lines are written with a single write(2) so that
 * lines of concurrent ranks sharing a terminal do not interleave mid-line.
 * An embedding program may take the lines instead (sm_set_log_handler), and
 * one thread may take its own for the length of a call (sm__log_thread_hook:
 * the Python extension, in its caller's thread).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* The embedding program's handler (sm_set_log_handler): process-wide, like
 * curl's global settings; set before monitors start, read by every thread.
 * One atomic pointer pair would still tear between fn and userdata, so both
 * live in one struct swapped by pointer. */
struct handler {
    sm_log_fn fn;
    void *userdata;
};
static _Atomic(const struct handler *) log_handler;
static struct handler handlers[2];
static atomic_int handler_slot;

void sm_set_log_handler(sm_log_fn fn, void *userdata)
{
    int slot;

    if (!fn) {
        atomic_store(&log_handler, NULL);
        return;
    }
    /* two slots: the one being replaced may still be read by a thread in
     * sm__vlog; the next set reuses it (setting a handler is rare) */
    slot = atomic_fetch_add(&handler_slot, 1) & 1;
    handlers[slot].fn = fn;
    handlers[slot].userdata = userdata;
    atomic_store(&log_handler, &handlers[slot]);
}

/* The calling thread's taker (internal.h): thread-local, so the monitor's
 * own threads never see the one a caller set around its call. */
static _Thread_local sm__log_hook thread_hook;

void sm__log_thread_hook(const sm__log_hook *hook, sm__log_hook *prev)
{
    if (prev)
        *prev = thread_hook;
    thread_hook = hook && hook->fn ? *hook : (sm__log_hook){NULL, NULL};
}

void sm__vlog(int level, const char *fmt, va_list ap)
{
    char line[SM_NOTE_LINE + 64]; /* a whole note and the prefix */
    const char *prefix = level == SM_WARN ? "warning: " : "";
    const struct handler *h = atomic_load(&log_handler);
    int api = level == SM_WARN ? SM_LOG_WARNING : SM_LOG_INFO;
    int p = snprintf(line, sizeof line, "scopemeter: %s", prefix), n, m;

    if (p < 0)
        return;
    m = vsnprintf(line + p, sizeof line - (size_t)p, fmt, ap);
    if (m < 0)
        return;
    n = p + m;
    if ((size_t)n >= sizeof line - 1)
        n = (int)sizeof line - 2;
    line[n] = '\0';
    /* a taker gets the message without the prefix: this thread's first (it
     * may hand the line back, < 0), then the program's */
    if (thread_hook.fn && thread_hook.fn(api, line + p, thread_hook.userdata) == 0)
        return;
    if (h) {
        h->fn(api, line + p, h->userdata);
        return;
    }
    line[n++] = '\n';
    /* best effort: a closed stderr must not disturb training */
    if (write(STDERR_FILENO, line, (size_t)n) < 0)
        return;
}

void sm__log(int level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    sm__vlog(level, fmt, ap);
    va_end(ap);
}

void sm__note(sm_notes *notes, int level, const char *fmt, ...)
{
    va_list ap;

    if (!notes || notes->n >= SM_NOTES_MAX)
        return;
    va_start(ap, fmt);
    vsnprintf(notes->line[notes->n], sizeof notes->line[0], fmt, ap);
    va_end(ap);
    notes->level[notes->n++] = level;
}

void sm__tag_add(sm_tags *t, const char *key, const char *fmt, ...)
{
    va_list ap;

    if (!t)
        return;
    if (t->n >= SM_TAGS_MAX) {
        if (t->dropped++ == 0)
            snprintf(t->first_dropped, sizeof t->first_dropped, "%s", key);
        return;
    }
    snprintf(t->v[t->n].key, sizeof t->v[0].key, "%s", key);
    va_start(ap, fmt);
    vsnprintf(t->v[t->n].value, sizeof t->v[0].value, fmt, ap);
    va_end(ap);
    t->n++;
}

/* ---- building a "why" line ---------------------------------------------------
 * One family for every file: write, append, or join with "; ".  A line is
 * cut to its buffer and a cut ends in "..." (a reader sees that it was). */
static int vline(char *buf, size_t cap, size_t len, const char *fmt, va_list ap)
{
    int n;

    if (cap == 0 || len + 1 >= cap)
        return -ENAMETOOLONG;
    n = vsnprintf(buf + len, cap - len, fmt, ap);
    if (n < 0)
        return -EINVAL;
    if ((size_t)n >= cap - len) {
        if (cap > 4)
            memcpy(buf + cap - 4, "...", 4);
        return -ENAMETOOLONG;
    }
    return 0;
}

int sm__line(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = vline(buf, cap, 0, fmt, ap);
    va_end(ap);
    return rc;
}

void sm__line_add(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vline(buf, cap, strnlen(buf, cap), fmt, ap);
    va_end(ap);
}

void sm__line_join(char *buf, size_t cap, const char *fmt, ...)
{
    size_t len = strnlen(buf, cap);
    va_list ap;

    if (len && len + 3 < cap) {
        memcpy(buf + len, "; ", 3);
        len += 2;
    }
    va_start(ap, fmt);
    vline(buf, cap, len, fmt, ap);
    va_end(ap);
}

/* pre + mid + post, cutting mid (with "...") so that post always fits: a
 * line ends with what was dropped, however long the path in the middle. */
void sm__line_mid(char *out, size_t cap, const char *pre, const char *mid, const char *post)
{
    size_t pl = strlen(pre), ml = strlen(mid), tl = strlen(post);

    if (cap == 0)
        return;
    if (pl + tl + 4 >= cap) {
        snprintf(out, cap, "%s", post);
        return;
    }
    if (pl + ml + tl >= cap)
        ml = cap - pl - tl - 4;
    memcpy(out, pre, pl);
    memcpy(out + pl, mid, ml);
    if (ml < strlen(mid)) {
        memcpy(out + pl + ml, "...", 3);
        ml += 3;
    }
    memcpy(out + pl + ml, post, tl + 1);
}

