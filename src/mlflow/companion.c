/*
 * companion.c — the C API's companion (sm_monitor_set_companion,
 * scopemeter_mlflow.h; docs/monitor.md, docs/design.md §7): the recording
 * outlives its caller on this surface too.
 *
 * sm_monitor_set_companion (sink_mlflow.c: a setting of the REST sink)
 * registers these as the monitor's sink hooks (sm__monitor_set_sink_hooks,
 * sink.h), called on the caller's thread: at the end of a successful
 * sm_monitor_start (the run checked, the rank known) it starts `scopemeter
 * companion --pid <getpid()> --run-id <run> --tracking-uri <uri> --rank
 * <rank> [--owns-run]`, the argv
 * the Python front builds (python/scopemeter/_companion.py, _start_companion),
 * as the caller's child (so in its cgroup) through posix_spawn (the caller
 * may be multi-threaded: no fork), its stdin a pipe whose write end stays
 * here, O_CLOEXEC; at sm_monitor_stop, after the flush, it writes "stop\n",
 * closes the pipe and reaps the companion (it exits at once; bounded, then
 * SIGKILL).  Its environment is the caller's with the sink's headers added
 * to SCOPEMETER_HTTP_HEADERS (companion_env), so its requests pass a gateway
 * the sink's pass.  A companion that cannot start is one line: the monitor records
 * as before.  The store is http(s): the REST sink's, the only one the C API
 * records into an MLflow run with.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "mlflow_rest.h"
#include "scopemeter_mlflow.h"

extern char **environ;

#define COMPANION_WAIT_S 2.0 /* it answers the stop word at once (as the front's) */

#define HEADERS_VAR "SCOPEMETER_HTTP_HEADERS"

/* The companion's environment: ours, with SCOPEMETER_HTTP_HEADERS (read by
 * every REST handle, rest_http.c) holding the sink's headers
 * (sm_monitor_set_headers) besides what it held here, so the companion's
 * requests carry what this process's carry: behind a gateway that asks for
 * a header, an end without it would be refused.  NULL when the sink has no
 * headers (environ as it is) or out of memory (the same, said by the
 * companion's refused end).  *text: the variable, the caller frees it. */
static char **companion_env(const sm_rest_settings *set, char **text)
{
    const char *cur = getenv(HEADERS_VAR);
    json_t *o;
    char *dump, **env;
    size_t n = 0, k = 0, len;

    *text = NULL;
    if (!set->headers || !set->headers[0])
        return NULL;
    o = cur && *cur ? json_loads(cur, JSON_REJECT_DUPLICATES, NULL) : NULL;
    if (!json_is_object(o)) {
        json_decref(o); /* a bad one is the companion's to say, as ours was */
        o = json_object();
    }
    for (size_t i = 0; o && set->headers[i] && set->headers[i + 1]; i += 2)
        (void)json_object_set_new(o, set->headers[i], json_string(set->headers[i + 1]));
    dump = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    while (environ[n])
        n++;
    env = dump ? calloc(n + 2, sizeof *env) : NULL;
    len = dump ? strlen(HEADERS_VAR) + 1 + strlen(dump) + 1 : 0;
    if (env && (*text = malloc(len)) != NULL) {
        snprintf(*text, len, "%s=%s", HEADERS_VAR, dump);
        for (size_t i = 0; i < n; i++)
            if (strncmp(environ[i], HEADERS_VAR "=", sizeof HEADERS_VAR) != 0)
                env[k++] = environ[i];
        env[k] = *text;
    } else {
        free(env);
        env = NULL;
    }
    sm__rest_free_secret(dump); /* header values may be secrets */
    return env;
}

/* fd moved to >= 3, O_CLOEXEC: a pipe end that landed on 0..2 (a caller
 * with a closed stdin) would be lost to the dup2 onto the child's stdin. */
static int above_stdio(int fd)
{
    int nfd;

    if (fd > 2)
        return fd;
    nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    close(fd);
    return nfd;
}

void sm__companion_started(void *settings, const char *uri, int rank)
{
    sm_rest_settings *set = settings;
    char pid[24], rk[24], shown[256];
    const char *env = getenv("SCOPEMETER_COMPANION");
    char *argv[13], **cenv, *env_text;
    int p[2], n = 0, rc;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, dfl;
    pid_t child;

    if (!set || !set->companion || set->companion_pid > 0)
        return;
    if (env && strcmp(env, "0") == 0)
        return; /* off, as for the Python front */
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    snprintf(rk, sizeof rk, "%d", rank);
    argv[n++] = set->companion;
    argv[n++] = "companion";
    argv[n++] = "--pid";
    argv[n++] = pid;
    argv[n++] = "--run-id";
    argv[n++] = set->run_id;
    argv[n++] = "--tracking-uri";
    argv[n++] = (char *)uri;
    argv[n++] = "--rank";
    argv[n++] = rk;
    if (set->companion_owns)
        argv[n++] = "--owns-run";
    argv[n] = NULL;

    if (pipe2(p, O_CLOEXEC) < 0) {
        rc = errno;
        goto fail;
    }
    p[0] = above_stdio(p[0]);
    p[1] = above_stdio(p[1]);
    if (p[0] < 0 || p[1] < 0) {
        rc = errno;
        if (p[0] >= 0)
            close(p[0]);
        if (p[1] >= 0)
            close(p[1]);
        goto fail;
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[0], 0); /* dup2 clears O_CLOEXEC on 0 */
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawnattr_init(&at);
    /* the caller's blocked signals and ignored SIGCHLD (its waitpid of the
     * Python writer) or SIGPIPE are not the companion's */
    sigemptyset(&none);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGCHLD);
    sigaddset(&dfl, SIGPIPE);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &dfl);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    cenv = companion_env(set, &env_text);
    rc = posix_spawn(&child, set->companion, &fa, &at, argv, cenv ? cenv : environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    free(cenv);
    sm__rest_free_secret(env_text);
    close(p[0]);
    if (rc != 0) {
        close(p[1]);
        goto fail;
    }
    set->companion_pid = child;
    set->companion_fd = p[1];
    set->companion_parent = getpid();
    return;
fail:
    sm_mlflow_redact_uri(uri, shown, sizeof shown);
    sm__log(SM_WARN, "the companion (%s) did not start: %s; if this process is OOM-killed or "
           "SIGKILLed, run %s at %s keeps no end tags%s", set->companion, strerror(rc),
           set->run_id, shown, set->companion_owns ? " and stays RUNNING" : "");
}

/* write(2) of the stop word without a SIGPIPE for the caller when the
 * companion is gone already: the signal is blocked on this thread for the
 * call and a pending one of ours consumed. */
static void tell(int fd, const char *word)
{
    sigset_t pipe_set, old, pending;
    int had;

    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    sigpending(&pending);
    had = sigismember(&pending, SIGPIPE);
    if (write(fd, word, strlen(word)) < 0 && errno == EPIPE && !had) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static int reap(pid_t pid, double bound_s)
{
    struct timespec nap = {0, 10 * 1000 * 1000};
    int status;

    for (double waited = 0; waited < bound_s; waited += 0.01) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR))
            return 0; /* reaped, or not ours to reap (SIGCHLD ignored, reaped elsewhere) */
        nanosleep(&nap, NULL);
    }
    return -ETIMEDOUT;
}

void sm__companion_stopped(void *settings)
{
    sm_rest_settings *set = settings;
    pid_t pid;

    if (!set || set->companion_pid <= 0 || set->companion_parent != getpid())
        return; /* none, or a forked child's copy: the companion is the parent's */
    pid = set->companion_pid;
    set->companion_pid = 0;
    tell(set->companion_fd, "stop\n");
    close(set->companion_fd);
    set->companion_fd = -1;
    if (reap(pid, COMPANION_WAIT_S) < 0) {
        sm__log(SM_WARN, "the companion (pid %d) did not exit within %g s of its stop; killed",
               (int)pid, COMPANION_WAIT_S);
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
}

void sm__companion_settings_free(sm_rest_settings *set)
{
    sm__companion_stopped(set); /* a monitor freed without its stop (a failed start) */
    free(set->companion);
    set->companion = NULL;
}
