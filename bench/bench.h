/*
 * bench.h — what the C benchmarks share: their clocks and the sort for their
 * medians.  Nothing that measures belongs here: each benchmark's loop stays
 * in its own file, beside the table it fills (bench/README.md).
 */
#ifndef SM_BENCH_H
#define SM_BENCH_H

#include <time.h>

/* clk's time in seconds */
static inline double now(clockid_t clk)
{
    struct timespec ts;

    clock_gettime(clk, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* the CPU time this thread has used, in seconds */
static inline double cpu_now(void)
{
    return now(CLOCK_THREAD_CPUTIME_ID);
}

/* qsort's comparison of doubles, ascending */
static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#endif
