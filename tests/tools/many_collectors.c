/* many_collectors: N collectors of one job in one process, each a full
 * monitor — its own identity (sm_monitor_set_identity: rank r of N, its own
 * node), ring, delivery thread and connection — recording into one MLflow run
 * over the REST sink, all stopped at the same moment (one thread per monitor
 * released by one barrier).  tests/py/test_scale.py drives it: 1024 processes
 * of `scopemeter run` do not fit a 2-core machine, 1024 monitors do.
 *
 *   many_collectors URI RUN_ID N BUDGET INTERVAL SECONDS STOP_TIMEOUT
 *
 * Every line of the library goes to stderr (one closing line per monitor);
 * stdout gets "started S", "stopped S" (seconds) and "failed N". */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "scopemeter.h"
#include "scopemeter_mlflow.h"

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t stop_barrier;

static void log_line(int level, const char *msg, void *userdata)
{
    (void)userdata;
    pthread_mutex_lock(&log_mu); /* one whole line at a time from 2048 threads */
    fprintf(stderr, "scopemeter%s: %s\n", level == SM_LOG_WARNING ? " warning" : "", msg);
    pthread_mutex_unlock(&log_mu);
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct stopper {
    sm_monitor *m;
    int rc;
};

static void *stop_one(void *arg)
{
    struct stopper *s = arg;

    pthread_barrier_wait(&stop_barrier);
    s->rc = sm_monitor_stop(s->m);
    return NULL;
}

#define STARTERS 32

struct starting {
    struct stopper *st;
    int n, next, failed;
    pthread_mutex_t mu;
};

static void *start_some(void *arg)
{
    struct starting *sg = arg;
    char err[512];

    for (;;) {
        int r;

        pthread_mutex_lock(&sg->mu);
        r = sg->next < sg->n && !sg->failed ? sg->next++ : -1;
        pthread_mutex_unlock(&sg->mu);
        if (r < 0)
            return NULL;
        if (sm_monitor_start(sg->st[r].m, err, sizeof err) != 0) {
            fprintf(stderr, "many_collectors: rank %d: %s\n", r, err);
            pthread_mutex_lock(&sg->mu);
            sg->failed = 1;
            pthread_mutex_unlock(&sg->mu);
        }
    }
}

int main(int argc, char **argv)
{
    struct stopper *st = NULL;
    pthread_t *th = NULL;
    pthread_attr_t attr;
    char node[32];
    int n, failed = 0, started = 0, rc = 1;
    double budget, interval, seconds, stop_timeout, t0;

    if (argc != 8) {
        fprintf(stderr, "usage: many_collectors URI RUN_ID N BUDGET INTERVAL SECONDS "
                "STOP_TIMEOUT\n");
        return 2;
    }
    n = atoi(argv[3]);
    budget = atof(argv[4]);
    interval = atof(argv[5]);
    seconds = atof(argv[6]);
    stop_timeout = atof(argv[7]);
    if (n < 1)
        return 2;
    sm_set_log_handler(log_line, NULL);
    st = calloc((size_t)n, sizeof *st);
    th = calloc((size_t)n, sizeof *th);
    if (!st || !th || pthread_barrier_init(&stop_barrier, NULL, (unsigned)n) != 0)
        goto out;
    for (int r = 0; r < n; r++) {
        sm_monitor *m = sm_monitor_new();

        st[r].m = m;
        snprintf(node, sizeof node, "node%d", r);
        if (!m || sm_monitor_set_identity(m, r, 0, n, 1, node) < 0 ||
            sm_monitor_set_all_workers(m, 1) < 0 || sm_monitor_set_run(m, argv[1], argv[2]) < 0 ||
            sm_monitor_set_write_budget(m, budget) < 0 ||
            sm_monitor_set_interval(m, interval) < 0 ||
            sm_monitor_set_samples(m, 1) < 0 ||
            sm_monitor_set_stop_timeout(m, stop_timeout) < 0) {
            fprintf(stderr, "many_collectors: rank %d: a setter failed\n", r);
            goto out;
        }
    }
    /* a start waits for the server (the run's first tags): STARTERS at a time, as
     * the pods of a job start, not one after another */
    t0 = now();
    {
        pthread_t starters[STARTERS];
        struct starting sg = {st, n, 0, 0, PTHREAD_MUTEX_INITIALIZER};
        int k = n < STARTERS ? n : STARTERS;

        for (int i = 0; i < k; i++)
            if (pthread_create(&starters[i], NULL, start_some, &sg) != 0)
                abort();
        for (int i = 0; i < k; i++)
            pthread_join(starters[i], NULL);
        if (sg.failed)
            goto out;
        started = n;
    }
    printf("started %.1f\n", now() - t0);
    fflush(stdout);
    {
        double until = now() + seconds;
        while (now() < until)
            usleep(100000);
    }
    /* the simultaneous stop: every monitor's stop window posts at once */
    t0 = now();
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 128 * 1024);
    for (int r = 0; r < n; r++)
        if (pthread_create(&th[r], &attr, stop_one, &st[r]) != 0) {
            fprintf(stderr, "many_collectors: thread %d: %s\n", r, strerror(errno));
            abort(); /* the barrier would never open */
        }
    pthread_attr_destroy(&attr);
    for (int r = 0; r < n; r++) {
        pthread_join(th[r], NULL);
        failed += st[r].rc != 0;
    }
    printf("stopped %.1f\nfailed %d\n", now() - t0, failed);
    rc = failed ? 1 : 0;
out:
    if (st)
        for (int r = 0; r < n; r++)
            sm_monitor_free(st[r].m);
    free(st);
    free(th);
    (void)started;
    return rc;
}
