/*
 * log.c — the one line format.  Every failure is one line on stderr with the
 * prefix "scopemeter:" (docs/design.md §6), so "why is this series missing" always
 * has an answer in the log.  Lines are written with a single write(2) so that
 * lines of concurrent ranks sharing a terminal do not interleave mid-line.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sink.h"

void sm_vlog(int level, const char *fmt, va_list ap)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "scopemeter: %s", level == SM_WARN ? "warning: " : "");
    int m;

    if (n < 0)
        return;
    m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    if (m < 0)
        return;
    n += m;
    if ((size_t)n >= sizeof line - 1)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    /* best effort: a closed stderr must not disturb training */
    if (write(STDERR_FILENO, line, (size_t)n) < 0)
        return;
}

void sm_log(int level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    sm_vlog(level, fmt, ap);
    va_end(ap);
}

void sm_note(sm_notes *notes, int level, const char *fmt, ...)
{
    va_list ap;

    if (!notes || notes->n >= SM_NOTES_MAX)
        return;
    va_start(ap, fmt);
    vsnprintf(notes->line[notes->n], sizeof notes->line[0], fmt, ap);
    va_end(ap);
    notes->level[notes->n++] = level;
}

void sm_tag_add(sm_tags *t, const char *key, const char *fmt, ...)
{
    va_list ap;

    if (!t || t->n >= SM_TAGS_MAX)
        return;
    snprintf(t->v[t->n].key, sizeof t->v[0].key, "%s", key);
    va_start(ap, fmt);
    vsnprintf(t->v[t->n].value, sizeof t->v[0].value, fmt, ap);
    va_end(ap);
    t->n++;
}

void sm_log_summary(int64_t windows, uint64_t points, uint64_t tags, const sm_sink_counts *c)
{
    uint64_t lost = c->overflow + c->refused;

    if (lost > 0)
        sm_log(SM_WARN, "%llu points dropped during the run (buffer full or refused; oldest "
               "first)", (unsigned long long)lost);
    /* The process's own account, one line: a reader checks it against the
     * run (tests/soak counts every rank's points against it). */
    sm_log(SM_INFO, "logged %lld windows (%llu points, %llu tags): %llu delivered, %llu dropped "
           "(buffer full), %llu refused, %llu undelivered at stop", (long long)windows,
           (unsigned long long)points, (unsigned long long)tags,
           (unsigned long long)c->delivered, (unsigned long long)c->overflow,
           (unsigned long long)c->refused, (unsigned long long)c->undelivered);
}
