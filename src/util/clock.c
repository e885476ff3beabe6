/*
 * clock.c — the two clocks the monitor uses.
 *
 * Schedules, deadlines and timed waits run on CLOCK_MONOTONIC: a wall clock
 * stepped by NTP (or by an operator) must neither stall sampling nor fire a
 * burst of samples.  MLflow timestamps are wall-clock milliseconds since the
 * epoch (CLOCK_REALTIME), as MLflow's own client writes them (time.time()).
 */
#include <errno.h>
#include <time.h>

#include "internal.h"

double sm__now_mono(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t sm__now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + (int64_t)(ts.tv_nsec / 1000000);
}

void sm__mono_timespec(double t, struct timespec *out)
{
    double sec;

    if (!(t > 0)) /* also NaN */
        t = 0;
    if (t > 1e15) /* "forever": far enough, and no overflow of time_t */
        t = 1e15;
    sec = (double)(time_t)t;
    out->tv_sec = (time_t)sec;
    out->tv_nsec = (long)((t - sec) * 1e9);
    if (out->tv_nsec >= 1000000000L) {
        out->tv_sec++;
        out->tv_nsec -= 1000000000L;
    }
    if (out->tv_nsec < 0)
        out->tv_nsec = 0;
}

int sm__cond_init_mono(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    int rc = pthread_condattr_init(&a);

    if (rc)
        return -rc;
    rc = pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
    return -rc;
}

void sm__sleep(double s)
{
    struct timespec ts;

    if (!(s > 0))
        return;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

