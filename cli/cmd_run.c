/*
 * cmd_run.c — `scopemeter run [options] -- CMD ARGS...`: record system
 * metrics into an MLflow run while CMD runs, under the same run as CMD's own
 * MLflow logging, and exit with CMD's status (docs/design.md §8, docs/cli.md).
 *
 *   1. block the signals to forward (and SIGCHLD) before any thread exists,
 *      and read them from a signalfd: no work in signal handlers, and the
 *      monitor's threads never see them; SIGCHLD gets its default action
 *      and SIGPIPE is ignored (CMD gets back the dispositions it was given);
 *   2. find the run (sm_mlflow_resolve, src/mlflow/mlflow_run.c): --run-id,
 *      MLFLOW_RUN_ID, the job's run (ranks > 0 of a multi-process job find
 *      the run rank 0 created by its job id), or create one (--experiment,
 *      MLFLOW_EXPERIMENT_NAME, MLFLOW_EXPERIMENT_ID, Default);
 *   3. start the monitor (REST sink; without an http(s) tracking URI or a
 *      run, the queue sink drained into a local JSONL file — nothing is lost
 *      silently);
 *   4. fork/exec CMD with MLFLOW_RUN_ID/MLFLOW_TRACKING_URI exported and
 *      MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING removed, in a process group of
 *      its own; forward INT, TERM, HUP, QUIT, USR1, USR2 to that group until
 *      it exits (below: why every signal reaches CMD exactly once); be the
 *      subreaper of CMD's tree (reaped() below); in an interactive run keep a
 *      sentinel in CMD's group that sees the terminal's Ctrl-C (watch_group);
 *      beside CMD, with a memory limit, the OOM reserve (cli/oom_guard.c);
 *   5. stop the monitor (bounded), mark a run this process owns FINISHED,
 *      FAILED or KILLED, exit with CMD's status (128+N for signal N);
 *   6. end the reserve, and say when the kernel took it.
 */
#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "oom_guard.h"
#include "scopemeter_mlflow.h"

extern char **environ;

#define DEFAULT_STARTUP_TIMEOUT 15.0

struct run_opts {
    const char *run_id;
    const char *experiment;
    const char *jsonl;
    int all_workers;
    const char *detail; /* --detail: SCOPEMETER_DETAIL for the collectors */
    double interval;
    int samples;
    double write_budget;       /* rows/s; 0: SCOPEMETER_WRITE_BUDGET, else none */
    double stop_timeout;       /* < 0: the monitor's default */
    double startup_timeout;
    int buffer_points;         /* 0: the monitor's default (one hour) */
    char **cmd;
};

struct run_state {
    const char *uri;           /* MLFLOW_TRACKING_URI when http(s), else NULL */
    char shown[512];           /* the URI, redacted */
    char run_id[300];
    int owns_run;              /* this process ends the run */
    sm_run_result resolved;    /* what sm_mlflow_resolve gave, its run check included */
    sm_identity *id;           /* sm_identity_read_env; NULL only out of memory */
    int sfd;                   /* signalfd */
    int pending_sig;           /* a terminating signal that came before CMD started */
    struct sigaction old_chld, old_pipe; /* the dispositions we were given, CMD's */
    int tty;                   /* our controlling terminal, or -1 */
    int tty_lent;              /* CMD's group is the terminal's foreground group */
    pid_t sentinel;            /* the sentinel in CMD's group (watch_group), or 0 */
    int sentinel_fd;           /* where it says what the group got, or -1 */
    int group_sig;             /* a terminating signal CMD's group got (Ctrl-C), or 0 */
    int collecting;            /* the monitor records: CMD gets an OOM reserve beside it */
    pid_t cmd_pid;             /* CMD, the leader of its process group; 0 before it started */
    void *cg;                  /* the job cgroup's counters (sm_oom_guard_cgroup_open), or NULL */
    unsigned long long ooms;   /* the OOM kills it counted by the end of CMD's tree */

    /* JSONL fallback (the monitor's JSONL sink writes it) */
    char jsonl_path[4096];

    /* CMD's environment and the two strings it owns */
    char **env;
    char *env_run, *env_uri;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: scopemeter run [--run-id ID | --experiment NAME] [--all-workers]\n"
            "                      [--interval S] [--samples K] [--write-budget R]\n"
            "                      [--stop-timeout S] [--startup-timeout S] [--buffer-points N]\n"
            "                      [--jsonl PATH] -- CMD [ARGS...]\n"
            "\n"
            "Records system metrics into an MLflow run while CMD runs and exits with CMD's\n"
            "status.  Tracking server: MLFLOW_TRACKING_URI (http:// or https://).  Run:\n"
            "--run-id, else MLFLOW_RUN_ID, else a new run in --experiment,\n"
            "MLFLOW_EXPERIMENT_NAME, MLFLOW_EXPERIMENT_ID or Default.  CMD gets\n"
            "MLFLOW_RUN_ID and MLFLOW_TRACKING_URI, so its own MLflow logging lands in the\n"
            "same run.\n"
            "\n"
            "  --run-id ID          attach to this run (it is not ended by scopemeter)\n"
            "  --experiment NAME    create the run in this experiment (created if missing)\n"
            "  --all-workers        every pod's local rank 0 collects (default: rank 0 only)\n"
            "  --detail full        the series of level full too: GPM, NVLink, clocks and\n"
            "                       ECC counts per GPU\n"
            "                       (as SCOPEMETER_DETAIL=full; docs/series.md \"Levels\")\n"
            "  --interval S         seconds between samples (default 10)\n"
            "  --samples K          samples averaged per logged point (default 1)\n"
            "  --write-budget R     rows/s the tracking server takes from this job, all\n"
            "                       collectors together (default SCOPEMETER_WRITE_BUDGET, else\n"
            "                       four collectors' load at 10 s); the same on every node\n"
            "  --stop-timeout S     bound on stopping and flushing after CMD exits (default 30)\n"
            "  --startup-timeout S  bound on talking to the server before CMD starts (default 15)\n"
            "  --buffer-points N    points kept while the server is unreachable, 256 to\n"
            "                       100000000 (default: one hour of points; the oldest go first)\n"
            "  --jsonl PATH         where points go when there is no http(s) tracking URI\n"
            "                       or no run (default ./scopemeter-rankN-PID.jsonl)\n"
            "\n"
            "Under torchrun (ranks share one run; see docs/cli.md):\n"
            "  torchrun --no-python ... scopemeter run --all-workers -- python train.py\n");
}

static int parse(int argc, char **argv, struct run_opts *o)
{
    int i;
    struct cli_opt opts[] = {
        {"--run-id", CLI_STRING, &o->run_id, 0, 0, 0, "run", 0},
        {"--experiment", CLI_STRING, &o->experiment, 0, 0, 0, "run", 0},
        {"--jsonl", CLI_STRING, &o->jsonl, 0, 0, 0, NULL, 0},
        {"--all-workers", CLI_FLAG, &o->all_workers, 0, 0, 1, NULL, 0},
        {"--detail", CLI_STRING, &o->detail, 0, 0, 0, NULL, 0},
        {"--interval", CLI_SECONDS, &o->interval, SM_INTERVAL_MIN, SM_INTERVAL_MAX, 0, NULL, 0},
        {"--samples", CLI_INT, &o->samples, 1, SM_SAMPLES_MAX, 0, NULL, 0},
        {"--write-budget", CLI_NUMBER, &o->write_budget, SM_WRITE_BUDGET_MIN, SM_WRITE_BUDGET_MAX,
         0, NULL, 0},
        {"--stop-timeout", CLI_SECONDS, &o->stop_timeout, 0, SM_STOP_TIMEOUT_MAX, 0, NULL, 0},
        {"--startup-timeout", CLI_SECONDS, &o->startup_timeout, 0.1, 86400, 0, NULL, 0},
        {"--buffer-points", CLI_INT, &o->buffer_points, SM_BUFFER_POINTS_MIN,
         SM_BUFFER_POINTS_MAX, 0, NULL, 0},
    };

    memset(o, 0, sizeof *o);
    o->stop_timeout = -1;
    o->startup_timeout = DEFAULT_STARTUP_TIMEOUT;
    i = cli_parse("run", argc, argv, opts, sizeof opts / sizeof opts[0], 1);
    if (i == CLI_HELP) {
        usage(stdout);
        return 1;
    }
    if (i < 0)
        return -1;
    if (o->detail &&
        (cli_detail("run", o->detail) < 0 || setenv("SCOPEMETER_DETAIL", o->detail, 1) < 0))
        return -1;
    if (i >= argc) {
        fprintf(stderr, "scopemeter run: no command given (scopemeter run [options] -- CMD ...)\n");
        return -1;
    }
    o->cmd = argv + i;
    return 0;
}

/* ---- signals ------------------------------------------------------------------- */
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

static void signal_set(sigset_t *s)
{
    sigemptyset(s);
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        sigaddset(s, forwarded[i]);
    sigaddset(s, SIGCHLD);
}

static int terminating(int sig)
{
    return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT;
}

/*
 * Every signal reaches CMD exactly once (docs/cli.md, Signals).  CMD runs in
 * a process group of its own, so a signal sent to our group (GNU timeout,
 * Slurm, torchrun's agent all use killpg) reaches only us, and we pass it on
 * to CMD's group — what the group's members would have got — once.  In an
 * interactive shell the terminal's foreground group follows CMD (a shell
 * does the same for its jobs), so Ctrl-C and Ctrl-\ reach CMD's group
 * directly and never us; Ctrl-Z stops CMD, and we stop ourselves with it so
 * the shell sees its job stopped; `fg` continues us, and we give CMD the
 * terminal back and continue it.  dumb-init forwards to its child's group
 * for the same reason.  A SIGKILL that cannot be forwarded still ends CMD:
 * PR_SET_PDEATHSIG (spawn).
 */

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Whether we hold the terminal: our group is its foreground group. */
static int foreground(const struct run_state *st)
{
    return st->tty >= 0 && tcgetpgrp(st->tty) == getpgrp();
}

/* tcsetpgrp from a background group raises SIGTTOU unless it is blocked. */
static void set_tty_group(const struct run_state *st, pid_t pgid)
{
    sigset_t ttou, old;

    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    pthread_sigmask(SIG_BLOCK, &ttou, &old);
    (void)tcsetpgrp(st->tty, pgid);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void lend_tty(struct run_state *st, pid_t child)
{
    set_tty_group(st, child);
    st->tty_lent = 1;
}

static void take_tty_back(struct run_state *st)
{
    if (st->tty_lent)
        set_tty_group(st, getpgrp());
    st->tty_lent = 0;
}

/* To CMD's group; to CMD alone when it left the group it was given. */
static void forward(pid_t child, int sig)
{
    if (kill(-child, sig) < 0)
        kill(child, sig);
}

/*
 * One signal sent to us twice at once — GNU timeout sends it to its child and
 * then to its group, scopemeter being in both — is one signal: standard
 * signals do not queue, a second delivery while the first is pending merges
 * with it (signal(7)).  The signalfd would hand us both, so the signals that
 * arrive within COALESCE_S of the first are gathered, and each number is
 * passed on once, in the order it first came.  A SIGCHLD among them is
 * returned in *chld.
 */
#define COALESCE_S 0.05

static void forward_coalesced(struct run_state *st, pid_t child, int first, int *forwarded_term,
                              int *chld)
{
    int order[sizeof forwarded / sizeof forwarded[0]], n = 0;
    double end = mono() + COALESCE_S;
    int sig = first;

    for (;;) {
        struct pollfd p = {.fd = st->sfd, .events = POLLIN};
        struct signalfd_siginfo si;
        int seen = 0, ms;

        for (int i = 0; i < n; i++)
            seen |= order[i] == sig;
        if (!seen && n < (int)(sizeof order / sizeof order[0]))
            order[n++] = sig;
        ms = (int)((end - mono()) * 1000);
        if (ms <= 0 || poll(&p, 1, ms) != 1 || read(st->sfd, &si, sizeof si) != sizeof si)
            break;
        sig = (int)si.ssi_signo;
        if (sig == SIGCHLD) {
            *chld = 1;
            sig = first; /* already in order: nothing added */
        }
    }
    for (int i = 0; i < n; i++) {
        forward(child, order[i]);
        if (terminating(order[i]))
            *forwarded_term = 1;
    }
}

/* A terminating signal that arrived while CMD was not started yet. */
static int check_early_signal(struct run_state *st)
{
    struct pollfd p = {.fd = st->sfd, .events = POLLIN};
    struct signalfd_siginfo si;

    while (!st->pending_sig && poll(&p, 1, 0) == 1) {
        if (read(st->sfd, &si, sizeof si) != sizeof si)
            break;
        if (terminating((int)si.ssi_signo))
            st->pending_sig = (int)si.ssi_signo;
    }
    return st->pending_sig;
}

/* ---- finding the run: sm_mlflow_resolve (src/mlflow/mlflow_run.c) ---------- */
static int cancelled(void *arg)
{
    return check_early_signal(arg);
}

static void resolve_run(struct run_state *st, const struct run_opts *o)
{
    sm_run_request req = SM_RUN_REQUEST_INIT;
    sm_run_result res = SM_RUN_RESULT_INIT;

    req.tracking_uri = st->uri;
    req.run_id = o->run_id;
    req.experiment = o->experiment;
    req.source_name = strrchr(o->cmd[0], '/') ? strrchr(o->cmd[0], '/') + 1 : o->cmd[0];
    req.id = st->id;
    req.timeout_s = o->startup_timeout;
    req.cancelled = cancelled;
    req.cancel_arg = st;
    if (sm_mlflow_resolve(&req, &res) == 0) {
        snprintf(st->run_id, sizeof st->run_id, "%s", res.run_id);
        st->owns_run = res.owns_run;
        st->resolved = res; /* its run check goes to the sink (sm_monitor_set_resolved) */
    }
}

/* ---- JSONL fallback ---------------------------------------------------------------- */
static void jsonl_path(struct run_state *st, const struct run_opts *o)
{
    if (o->jsonl)
        snprintf(st->jsonl_path, sizeof st->jsonl_path, "%s", o->jsonl);
    else
        snprintf(st->jsonl_path, sizeof st->jsonl_path, "scopemeter-rank%d-%ld.jsonl",
                 sm_identity_rank(st->id), (long)getpid());
}

/* ---- the child --------------------------------------------------------------------- */

/* CMD's environment: ours, with MLFLOW_RUN_ID and MLFLOW_TRACKING_URI set when
 * there is a run, and MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING removed.  0 or -1. */
static int child_env(struct run_state *st)
{
    static const char drop[] = "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING=";
    size_t n = 0, o = 0;
    int removed = 0;

    while (environ[n])
        n++;
    st->env = calloc(n + 3, sizeof *st->env);
    if (!st->env)
        return -1;
    if (st->run_id[0]) {
        size_t l1 = strlen(st->run_id) + 16, l2 = strlen(st->uri) + 24;
        st->env_run = malloc(l1);
        st->env_uri = malloc(l2);
        if (!st->env_run || !st->env_uri)
            return -1;
        snprintf(st->env_run, l1, "MLFLOW_RUN_ID=%s", st->run_id);
        snprintf(st->env_uri, l2, "MLFLOW_TRACKING_URI=%s", st->uri);
    }
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], drop, sizeof drop - 1) == 0) {
            removed = 1;
            continue;
        }
        if (st->env_run && (strncmp(environ[i], "MLFLOW_RUN_ID=", 14) == 0 ||
                            strncmp(environ[i], "MLFLOW_TRACKING_URI=", 20) == 0))
            continue;
        st->env[o++] = environ[i];
    }
    if (st->env_run) {
        st->env[o++] = st->env_run;
        st->env[o++] = st->env_uri;
    }
    st->env[o] = NULL;
    if (removed)
        fprintf(stderr, "scopemeter: removed MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING from CMD's "
                "environment: MLflow's own monitor would log unprefixed system/* keys into the "
                "same run from every process; scopemeter records them with scope-true names\n");
    return 0;
}

/* fork + execvpe; the child gets the original signal mask and the SIGCHLD
 * and SIGPIPE dispositions back (an ignored signal stays ignored across
 * exec, signal(7)), and dies with us (PR_SET_PDEATHSIG) so a SIGKILLed
 * scopemeter leaves no orphan training.  Exec failures come back over a
 * close-on-exec pipe. */
static pid_t spawn(char **cmd, char **env, struct run_state *st, const sigset_t *orig,
                   int *exec_errno)
{
    int p[2];
    pid_t parent = getpid(), pid;
    int e = 0, lend = foreground(st);
    ssize_t n;

    *exec_errno = 0;
    if (pipe2(p, O_CLOEXEC) < 0) {
        *exec_errno = errno;
        return -1;
    }
    (void)sm_oom_guard_lower(); /* CMD goes before us in an OOM: docs/cgroup.md §7 */
    if (st->collecting)
        (void)sm_oom_guard_reserve(); /* and memory for our end when nothing of CMD is left */
    pid = fork();
    if (pid < 0) {
        *exec_errno = errno;
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        /* async-signal-safe calls only: other threads existed at fork */
        close(p[0]);
        sigaction(SIGCHLD, &st->old_chld, NULL);
        sigaction(SIGPIPE, &st->old_pipe, NULL);
        /* CMD's own group; the terminal follows it when we had it (both
         * sides do both, as a shell does, so neither order races) */
        setpgid(0, 0);
        if (lend) {
            sigset_t ttou;
            sigemptyset(&ttou);
            sigaddset(&ttou, SIGTTOU);
            sigprocmask(SIG_BLOCK, &ttou, NULL);
            tcsetpgrp(st->tty, getpid());
        }
        sigprocmask(SIG_SETMASK, orig, NULL);
        sm_oom_guard_child();
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) /* the parent died before prctl */
            _exit(127);
        execvpe(cmd[0], cmd, env);
        e = errno;
        if (write(p[1], &e, sizeof e) < 0)
            _exit(127);
        _exit(e == ENOENT ? 127 : 126);
    }
    close(p[1]);
    setpgid(pid, pid); /* EACCES once it has exec'd: it did it itself */
    if (lend)
        lend_tty(st, pid);
    do
        n = read(p[0], &e, sizeof e);
    while (n < 0 && errno == EINTR);
    close(p[0]);
    if (n == (ssize_t)sizeof e)
        *exec_errno = e; /* the child _exits; it is reaped by the wait loop */
    return pid;
}

/* 1 when the child is gone (*status set), else 0.  ECHILD: it was reaped
 * without us (SIGCHLD ignored or SA_NOCLDWAIT after all — cmd_run resets
 * both, so only if something else in this process undid that): its status
 * is lost, which is said, and counts as a failure.  We are the subreaper of
 * CMD's tree (PR_SET_CHILD_SUBREAPER, cmd_run; as PID 1 of a container every
 * orphan is ours anyway): an orphan of the tree is reparented to us, stays in
 * the process tree the monitor records (docs/design.md §9) and is reaped
 * here; any child is waited for, CMD's status kept.  A CMD stopped from the
 * terminal stops us too (the comment above forward). */
static int reaped(struct run_state *st, pid_t child, int *status, int flags)
{
    pid_t w;
    int ws;

    for (;;) {
        while ((w = waitpid(-1, &ws, flags | WUNTRACED)) < 0 && errno == EINTR)
            ;
        if (w <= 0 || w == child)
            break;
        if (w == st->sentinel && !WIFSTOPPED(ws))
            st->sentinel = 0; /* reaped: end_sentinel must not signal its pid */
        if (!WIFSTOPPED(ws))
            (void)sm_oom_guard_reaped(w, ws); /* the reserve, taken by an OOM */
        /* an orphan of CMD's tree reaped (or stopped); look for more */
    }
    if (w == child && WIFSTOPPED(ws)) {
        int sig = WSTOPSIG(ws);
        if (sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) {
            int had = st->tty_lent;
            take_tty_back(st);
            kill(getpid(), SIGSTOP); /* returns once the shell continues us */
            if (had && foreground(st))
                lend_tty(st, child);
            forward(child, SIGCONT);
        }
        return 0;
    }
    if (w == child) {
        *status = ws;
        take_tty_back(st);
        return 1;
    }
    if (w < 0 && errno == ECHILD) {
        fprintf(stderr, "scopemeter: CMD (pid %ld) was reaped elsewhere; its exit status is "
                "lost\n", (long)child);
        *status = 1 << 8; /* exit 1 */
        return 1;
    }
    return 0;
}

/*
 * A Ctrl-C reaches the terminal's foreground group, CMD's, and not us (the
 * comment above forward), so a CMD that handles SIGINT and exits 1 —
 * torchrun does — read as FAILED although the user killed the job.  To see
 * what the foreground group gets, an interactive run (the terminal lent to
 * CMD) has a sentinel in it: a forked child that joins CMD's group and only
 * waits on the signalfd it inherits (the forwarded signals, blocked), says the
 * first terminating one it gets over a pipe and exits.  Any terminating
 * signal CMD's group got — the terminal's, or a kill of the group — then marks
 * a failed CMD KILLED (run_status_of).  It ignores SIGTSTP (Ctrl-Z stops CMD
 * and us, reaped()), dies with us (PR_SET_PDEATHSIG), and is one more process
 * in the recorded tree while CMD runs (docs/design.md §9).  Async-signal-safe
 * calls only after the fork: other threads existed.
 */
static void watch_group(struct run_state *st, pid_t child)
{
    struct sigaction ign = {.sa_handler = SIG_IGN};
    int p[2];
    pid_t pid, parent = getpid();

    if (pipe2(p, O_CLOEXEC) < 0)
        return; /* no sentinel: a Ctrl-C then reads as CMD's exit says */
    pid = fork();
    if (pid == 0) {
        struct signalfd_siginfo si;
        close(p[0]);
        sigemptyset(&ign.sa_mask);
        sigaction(SIGTSTP, &ign, NULL);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent || setpgid(0, child) < 0)
            _exit(0); /* we died, or CMD left its group: nothing to watch */
        for (;;) {
            ssize_t n = read(st->sfd, &si, sizeof si);
            if (n < 0 && errno == EINTR)
                continue;
            if (n != (ssize_t)sizeof si)
                _exit(0);
            if (terminating((int)si.ssi_signo)) {
                int sig = (int)si.ssi_signo;
                if (write(p[1], &sig, sizeof sig) < 0)
                    _exit(1);
                _exit(0);
            }
        }
    }
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        return;
    }
    st->sentinel = pid;
    st->sentinel_fd = p[0];
}

/* What the sentinel said, once it has said it; then its pipe is closed. */
static void read_sentinel(struct run_state *st)
{
    int sig = 0;
    ssize_t n;

    do
        n = read(st->sentinel_fd, &sig, sizeof sig);
    while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof sig && terminating(sig))
        st->group_sig = sig;
    close(st->sentinel_fd);
    st->sentinel_fd = -1;
}

/* After CMD: the sentinel goes, and what it said before is read. */
static void end_sentinel(struct run_state *st)
{
    struct pollfd p = {.fd = st->sentinel_fd, .events = POLLIN};

    if (st->sentinel_fd >= 0 && poll(&p, 1, 0) == 1)
        read_sentinel(st);
    if (st->sentinel > 0) {
        kill(st->sentinel, SIGKILL);
        while (waitpid(st->sentinel, NULL, 0) < 0 && errno == EINTR)
            ;
        st->sentinel = 0;
    }
    if (st->sentinel_fd >= 0)
        close(st->sentinel_fd);
    st->sentinel_fd = -1;
}

/* Waits for the child, forwarding signals.  Returns the wait status;
 * *forwarded_term is set when a terminating signal was passed on. */
static int wait_child(struct run_state *st, pid_t child, int *forwarded_term)
{
    int status = 0;

    if (st->pending_sig) {
        forward(child, st->pending_sig);
        *forwarded_term = 1;
    }
    for (;;) {
        struct signalfd_siginfo si;
        struct pollfd p[2] = {{.fd = st->sfd, .events = POLLIN},
                              {.fd = st->sentinel_fd, .events = POLLIN}};
        ssize_t n;

        if (poll(p, st->sentinel_fd >= 0 ? 2 : 1, -1) < 0 && errno == EINTR)
            continue;
        if (st->sentinel_fd >= 0 && p[1].revents) {
            read_sentinel(st); /* said, or gone: the pipe is closed either way */
            if (!p[0].revents)
                continue;
        }
        n = read(st->sfd, &si, sizeof si);
        if (n != (ssize_t)sizeof si) {
            if (n < 0 && errno == EINTR)
                continue;
            /* the signalfd broke: plain wait (no forwarding possible) */
            while (!reaped(st, child, &status, 0))
                ;
            return status;
        }
        if (si.ssi_signo == SIGCHLD) {
            if (reaped(st, child, &status, WNOHANG))
                return status;
            continue;
        }
        /* Whoever sent it, it came to us and not to CMD's group (a
         * terminal's Ctrl-C only while we still held the terminal, before
         * CMD's group took it): passed on once, like any other. */
        int chld = 0;
        forward_coalesced(st, child, (int)si.ssi_signo, forwarded_term, &chld);
        if (chld && reaped(st, child, &status, WNOHANG))
            return status;
    }
}

/* ---- the command ------------------------------------------------------------------- */
/* Whether CMD can be executed, as execvp will look for it: a name with a
 * '/' as given, else each PATH entry (unset PATH: confstr's default).  0,
 * ENOENT (not found), EISDIR (a directory) or EACCES (found, not executable).  Run before any
 * MLflow call: `scopemeter run typo` creates no run. */
static int find_cmd(const char *name)
{
    const char *path = getenv("PATH");
    char buf[4096], def[1024];
    int found_noexec = 0;

    if (!*name)
        return ENOENT;
    if (strchr(name, '/')) {
        struct stat sb;
        if (stat(name, &sb) == 0 && S_ISDIR(sb.st_mode))
            return EISDIR; /* access(X_OK) passes a directory; execve refuses it */
        return access(name, X_OK) == 0 ? 0 : errno == ENOENT || errno == ENOTDIR ? ENOENT
                                                                                 : EACCES;
    }
    if (!path) {
        if (confstr(_CS_PATH, def, sizeof def) == 0)
            snprintf(def, sizeof def, "/bin:/usr/bin");
        path = def;
    }
    while (path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        struct stat sb;
        /* an empty entry is the current directory */
        if (snprintf(buf, sizeof buf, "%.*s/%s", len ? (int)len : 1, len ? path : ".", name) <
                (int)sizeof buf &&
            stat(buf, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
            if (access(buf, X_OK) == 0)
                return 0;
            found_noexec = 1;
        }
        path = end ? end + 1 : NULL;
    }
    return found_noexec ? EACCES : ENOENT;
}

/* ---- the end of the run ---------------------------------------------------------- */

/* Ending a run we created gets a fifth of the stop bound (1 to 10 s),
 * reserved from it: the monitor's stop takes the rest, so the whole stop
 * holds the bound (docs/rest.md, Stop). */
static double end_run_reserve(double bound)
{
    return bound / 5 < 1 ? 1 : bound / 5 > 10 ? 10 : bound / 5;
}

/* An OOM kill in the job's cgroup during the run makes a failed CMD KILLED,
 * whatever its status: `bash train.sh` outlives its OOM-killed python and
 * exits 1 (the companion's judge, cli/cmd_companion.c, says the same). */
static const char *run_status_of(int exit_code, int status, int forwarded_term,
                                 unsigned long long ooms)
{
    if (exit_code == 0)
        return "FINISHED";
    if (ooms > 0 || forwarded_term ||
        (WIFSIGNALED(status) && (WTERMSIG(status) == SIGKILL || terminating(WTERMSIG(status)))))
        return "KILLED"; /* a crash (SIGSEGV, SIGABRT) is FAILED */
    return "FAILED";
}

static void end_run(const struct run_state *st, const char *run_status, double timeout_s)
{
    char err[600];

    if (sm_mlflow_end_run(st->uri, st->run_id, run_status, timeout_s, err, sizeof err) < 0)
        fprintf(stderr, "scopemeter: could not mark run %s %s: %s\n", st->run_id, run_status,
                err);
}

/* The monitor's settings first: a bad value is a usage error, found before a
 * run is created.  NULL after one line. */
static sm_monitor *new_monitor(const struct run_opts *o)
{
    sm_monitor *m = sm_monitor_new();

    if (!m) {
        fprintf(stderr, "scopemeter: out of memory\n");
        return NULL;
    }
    if ((o->interval > 0 && sm_monitor_set_interval(m, o->interval) < 0) ||
        (o->samples > 0 && sm_monitor_set_samples(m, o->samples) < 0) ||
        (o->write_budget > 0 && sm_monitor_set_write_budget(m, o->write_budget) < 0) ||
        (o->stop_timeout >= 0 && sm_monitor_set_stop_timeout(m, o->stop_timeout) < 0)) {
        /* cannot happen after parse(): the same bounds (scopemeter.h) */
        fprintf(stderr, "scopemeter run: --interval, --samples, --write-budget or --stop-timeout "
                "out of range\n");
        sm_monitor_free(m);
        return NULL;
    }
    sm_monitor_set_all_workers(m, o->all_workers);
    if (o->buffer_points > 0)
        sm_monitor_set_buffer_points(m, (size_t)o->buffer_points);
    return m;
}

/* 1. Signals: blocked before any thread starts, so every thread inherits
 * the mask and only the signalfd sees them.  Two inherited dispositions
 * would break that, so they are set here and given back to CMD (spawn):
 *  - SIGCHLD ignored (or SA_NOCLDWAIT): the kernel reaps CMD itself and
 *    sends no SIGCHLD (waitpid(2) NOTES), so we would wait forever;
 *  - SIGPIPE default: one line to a closed stderr pipe (`| head`) would
 *    kill scopemeter, and PR_SET_PDEATHSIG then the training.  Ignored,
 *    a write fails with EPIPE instead.  It stays ignored until exit, so
 *    a last line cannot turn CMD's status into 141.
 * 0, or -1 after one line with everything given back. */
static int take_signals(struct run_state *st, sigset_t *orig)
{
    struct sigaction dfl = {.sa_handler = SIG_DFL}, ign = {.sa_handler = SIG_IGN};
    sigset_t fwd;

    sigemptyset(&dfl.sa_mask);
    sigemptyset(&ign.sa_mask);
    sigaction(SIGCHLD, &dfl, &st->old_chld);
    sigaction(SIGPIPE, &ign, &st->old_pipe);
    signal_set(&fwd);
    pthread_sigmask(SIG_BLOCK, &fwd, orig);
    st->sfd = signalfd(-1, &fwd, SFD_CLOEXEC);
    if (st->sfd < 0) {
        fprintf(stderr, "scopemeter: signalfd: %s\n", strerror(errno));
        pthread_sigmask(SIG_SETMASK, orig, NULL);
        sigaction(SIGCHLD, &st->old_chld, NULL);
        return -1;
    }
    return 0;
}

/* What the start left freed on the heap goes back to the kernel: over https
 * OpenSSL's initialisation, its algorithm fetches and the run check's
 * handshake free temporaries that would otherwise stay resident for the
 * whole job (~50 kB: RssAnon 1.09 -> 1.04 MB, bench/README.md "The CLI over
 * https").  Once: the windows after it allocate and free little.  The CLI's
 * own process, so its heap is its own to trim. */
static void trim_after_start(void)
{
    malloc_trim(0);
}

/* 2 and 3. The run, then the monitor: into the run, else (nothing is lost
 * silently) a local JSONL file.  Returns 1 when collecting, 0 when not. */
static int start_recording(struct run_state *st, const struct run_opts *o, sm_monitor *m)
{
    const char *uri = getenv("MLFLOW_TRACKING_URI");
    char err[600], line[700];
    int rc;

    if (uri && *uri)
        sm_mlflow_redact_uri(uri, st->shown, sizeof st->shown);
    jsonl_path(st, o);
    if (uri && (strncasecmp(uri, "http://", 7) == 0 || strncasecmp(uri, "https://", 8) == 0)) {
        st->uri = uri;
        resolve_run(st, o);
    } else {
        if (!uri || !*uri)
            snprintf(line, sizeof line, "MLFLOW_TRACKING_URI is not set");
        else
            snprintf(line, sizeof line, "MLFLOW_TRACKING_URI is %.400s, not an http(s) tracking "
                     "server (scopemeter run ships over MLflow's REST API; the Python front "
                     "scopemeter.enable_system_metrics() logs to any store)", st->shown);
        fprintf(stderr, "scopemeter: %s: no MLflow tracking server to ship to; CMD runs as "
                "usual\n", line);
    }
    if (check_early_signal(st))
        return 0;

    if (st->run_id[0])
        rc = sm_monitor_set_resolved(m, st->uri, &st->resolved);
    else
        rc = sm_monitor_set_jsonl(m, st->jsonl_path);
    err[0] = '\0';
    if (rc == 0)
        rc = sm_monitor_start(m, err, sizeof err);
    if (rc == 0) {
        trim_after_start();
        if (!st->run_id[0])
            fprintf(stderr, "scopemeter: no MLflow run to record into: points go to %s "
                    "(one JSON record per line)\n", st->jsonl_path);
        return 1;
    }
    /* -ENODATA: nothing to record, SM_NOT_COLLECTING: not this rank; the
     * monitor said so in one line */
    if (rc < 0 && rc != -ENODATA)
        fprintf(stderr, "scopemeter: not recording: %s\n", err[0] ? err : strerror(-rc));
    return 0;
}

/* 4. CMD: its exit code (128+N for signal N, 125-127 when it could not be
 * started), its wait status and whether we forwarded a terminating signal. */
static int run_cmd(struct run_state *st, const struct run_opts *o, const sigset_t *orig,
                   int *status, int *forwarded_term)
{
    int exec_errno = 0;
    pid_t child;

    if (child_env(st) < 0) {
        fprintf(stderr, "scopemeter: out of memory building CMD's environment\n");
        *status = 125 << 8;
        return 125;
    }
    child = spawn(o->cmd, st->env, st, orig, &exec_errno);
    st->cmd_pid = child > 0 ? child : 0;
    if (child < 0) {
        fprintf(stderr, "scopemeter: cannot start %s: %s\n", o->cmd[0], strerror(exec_errno));
        *status = 125 << 8;
        return 125;
    }
    if (st->tty_lent)
        watch_group(st, child);
    *status = wait_child(st, child, forwarded_term);
    end_sentinel(st);
    if (st->group_sig)
        *forwarded_term = 1; /* the group was signalled to end: the job was killed */
    /* Orphans of CMD's tree still running when CMD exits are left running,
     * not signalled and not waited for (docs/cli.md, Signals): CMD's exit
     * ends the job for scopemeter as for a shell, and what CMD left behind
     * on purpose (a server started with nohup) goes on as it would without
     * scopemeter; when scopemeter exits they are reparented on, to the next
     * subreaper or init.  Those already dead are reaped now, so the last
     * sample does not count zombies. */
    {
        pid_t w;
        int ws;
        while ((w = waitpid(-1, &ws, WNOHANG)) > 0)
            (void)sm_oom_guard_reaped(w, ws);
    }
    if (exec_errno) {
        fprintf(stderr, "scopemeter: cannot run %s: %s\n", o->cmd[0], strerror(exec_errno));
        return exec_errno == ENOENT ? 127 : 126;
    }
    if (WIFEXITED(*status))
        return WEXITSTATUS(*status);
    if (WIFSIGNALED(*status))
        return 128 + WTERMSIG(*status);
    return 1;
}

/* A tag of the run, one line when it cannot be written. */
static void run_tag(const struct run_state *st, const char *key, const char *value, double bound)
{
    char err[600];

    if (sm_mlflow_set_tag(st->uri, st->run_id, key, value, bound, err, sizeof err) < 0)
        fprintf(stderr, "scopemeter: could not tag run %s with %s: %s\n", st->run_id, key, err);
}

/* 5. Stop, then end the run: both within the one stop bound.  A run whose
 * cgroup counted OOM kills says so as the companion's end does
 * (docs/design.md §3): scopemeter.rankN.end_reason oom_kill, and where this
 * process ends the run, scopemeter.end_reason. */
static void stop_recording(const struct run_state *st, const struct run_opts *o, sm_monitor *m,
                           int collecting, const char *run_status, int exit_code)
{
    double bound = o->stop_timeout >= 0 ? o->stop_timeout : SM_STOP_TIMEOUT_DEFAULT;
    double reserve = st->owns_run ? end_run_reserve(bound) : 0, t0 = mono();

    if (reserve > 0)
        sm_monitor_set_stop_timeout(m, bound > reserve ? bound - reserve : 0);
    if (collecting)
        sm_monitor_stop(m);
    if (st->ooms > 0 && st->run_id[0]) {
        char key[64], text[300];
        int rank = sm_identity_rank(st->id);

        snprintf(key, sizeof key, "scopemeter.rank%d.end_reason", rank);
        run_tag(st, key, "oom_kill", end_run_reserve(bound));
        if (st->owns_run) {
            snprintf(text, sizeof text, "%s by scopemeter run of rank %d: oom_kill (%llu OOM "
                     "kill%s in its cgroup; CMD exit %d)", run_status, rank, st->ooms,
                     st->ooms == 1 ? "" : "s", exit_code);
            run_tag(st, "scopemeter.end_reason", text, end_run_reserve(bound));
        }
    }
    if (st->owns_run)
        end_run(st, run_status, bound - (mono() - t0) > reserve ? bound - (mono() - t0) : reserve);
}

/* 4b. CMD died in an OOM (its cgroup counted a kill): the rest of its tree
 * is the kernel's next victims, one per failed charge (mm/memcontrol.c), a
 * few ms apart -- `sh -c 'head ... > /dev/shm/big'` lost sh, then head
 * 12 ms later, after the recorder had read oom_kill 1.  So the recording's
 * end (the final sample, oom_kill, the peaks) waits for what is left of CMD's
 * process group, orphans reparented to us (we are the subreaper), at most
 * the stop timeout; signals go on being forwarded to that group.  A process
 * that outlives the bound is left running, as without an OOM, with one line
 * (docs/cli.md, Signals).  Outside an OOM nothing is waited for. */
static void wait_tree(struct run_state *st, pid_t pgid, double bound)
{
    double end = mono() + bound;
    int forwarded_term = 0, chld = 0;

    for (;;) {
        struct pollfd p = {.fd = st->sfd, .events = POLLIN};
        struct signalfd_siginfo si;
        double left = end - mono();
        pid_t w;
        int ws;

        while ((w = waitpid(-pgid, &ws, WNOHANG)) < 0 && errno == EINTR)
            ;
        if (w > 0)
            continue; /* one reaped: look for more */
        if (w < 0)
            return; /* ECHILD: none of the group is left */
        if (left <= 0) {
            fprintf(stderr, "scopemeter: CMD ended in an OOM and processes of its group still "
                    "run after %g s: left running; the run's end is read now\n", bound);
            return;
        }
        if (poll(&p, 1, (int)(left * 1000) + 1) != 1 ||
            read(st->sfd, &si, sizeof si) != sizeof si)
            continue;
        if (si.ssi_signo != SIGCHLD)
            forward_coalesced(st, pgid, (int)si.ssi_signo, &forwarded_term, &chld);
    }
}

/* 6. The OOM reserve goes (cli/oom_guard.c).  When the kernel took it, the
 * cgroup stayed full with nothing of CMD left and the reserve is why the end
 * above was written: said, and tagged, since that kill is one of the
 * cgroup's oom_kill count and not one of CMD's processes.  The tag comes
 * after the run's end (the reserve may be taken by the end's own request)
 * and waits at most the end's share of the stop bound. */
static void reserve_end(const struct run_state *st, const struct run_opts *o)
{
    double mb, bound = o->stop_timeout >= 0 ? o->stop_timeout : SM_STOP_TIMEOUT_DEFAULT;
    char key[64], value[32];

    if (!sm_oom_guard_reserve_end(&mb))
        return;
    fprintf(stderr, "scopemeter: the recorder's reserve (%.1f MB) was SIGKILLed before the "
            "run's end: in an OOM that is the kernel taking it instead of the recorder, the "
            "cgroup full with no process of CMD left; that kill is one of the cgroup's oom_kill "
            "count, not one of CMD's processes\n", mb);
    if (!st->run_id[0] || !st->uri)
        return;
    snprintf(key, sizeof key, "scopemeter.rank%d.oom_reserve_taken", sm_identity_rank(st->id));
    snprintf(value, sizeof value, "%.1f", mb);
    run_tag(st, key, value, end_run_reserve(bound));
}

/* 7. The monitor's oom_kill end tag was read at its stop; a kill after it
 * (the reserve, taken by the end's own requests: reserve_end) is counted
 * now that nothing of the job is left, so the tag is the cgroup's count for
 * the whole run (docs/cgroup.md). */
static void oom_kill_end(struct run_state *st, const struct run_opts *o, int collecting)
{
    double bound = o->stop_timeout >= 0 ? o->stop_timeout : SM_STOP_TIMEOUT_DEFAULT;
    unsigned long long before = st->ooms;
    char key[64], value[32];

    if (!collecting || !st->run_id[0] || !st->uri ||
        sm_oom_guard_cgroup_kills(st->cg, &st->ooms) < 0 || st->ooms == before)
        return;
    snprintf(key, sizeof key, "scopemeter.rank%d.oom_kill", sm_identity_rank(st->id));
    snprintf(value, sizeof value, "%llu", st->ooms);
    run_tag(st, key, value, end_run_reserve(bound));
}

int cmd_run(int argc, char **argv)
{
    struct run_opts o;
    struct run_state st;
    sigset_t orig;
    sm_monitor *m;
    int rc, collecting = 0, status = 0, exit_code, forwarded_term = 0;

    rc = parse(argc, argv, &o);
    if (rc != 0)
        return rc > 0 ? 0 : 2; /* one line said why */
    /* CMD first: a mistyped command must not leave a run behind */
    rc = find_cmd(o.cmd[0]);
    if (rc != 0) {
        fprintf(stderr, "scopemeter: cannot run %s: %s%s; no run created\n", o.cmd[0],
                strerror(rc), strchr(o.cmd[0], '/') ? "" : " (searched PATH)");
        return rc == ENOENT ? 127 : 126; /* as a shell exits */
    }
    memset(&st, 0, sizeof st);
    st.sfd = -1;
    st.sentinel_fd = -1;
    st.tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC); /* -1: none (ENXIO) */
    if (!(m = new_monitor(&o)))
        return 125;
    if (take_signals(&st, &orig) < 0) {
        sm_monitor_free(m);
        return 125;
    }
    /* the subreaper of CMD's tree (reaped()); not inherited by CMD (prctl(2)) */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        fprintf(stderr, "scopemeter: warning: PR_SET_CHILD_SUBREAPER: %s; orphans of CMD's tree "
                "leave the recorded process tree\n", strerror(errno));
    if ((rc = sm_identity_read_env(&st.id)) < 0)
        /* a malformed RANK must not pass for rank 0 (docs/design.md §4):
         * no run, no monitor; CMD runs as usual */
        fprintf(stderr, "scopemeter: warning: %s\n",
                st.id ? sm_identity_invalid(st.id) : sm_strerror(rc));
    else
        collecting = start_recording(&st, &o, m);
    st.collecting = collecting;
    /* after the monitor's open: the same counters, read at the end of CMD's tree */
    st.cg = sm_oom_guard_cgroup_open();

    if (check_early_signal(&st)) {
        fprintf(stderr, "scopemeter: %s before CMD started; not starting it\n",
                strsignal(st.pending_sig));
        exit_code = 128 + st.pending_sig;
        forwarded_term = 1;
        status = st.pending_sig; /* as if killed by it */
    } else {
        exit_code = run_cmd(&st, &o, &orig, &status, &forwarded_term);
    }
    if (st.cmd_pid > 0 && sm_oom_guard_cgroup_kills(st.cg, &st.ooms) == 0 && st.ooms > 0) {
        wait_tree(&st, st.cmd_pid, o.stop_timeout >= 0 ? o.stop_timeout : SM_STOP_TIMEOUT_DEFAULT);
        (void)sm_oom_guard_cgroup_kills(st.cg, &st.ooms);
    }
    stop_recording(&st, &o, m, collecting, run_status_of(exit_code, status, forwarded_term,
                                                         st.ooms), exit_code);
    reserve_end(&st, &o);
    oom_kill_end(&st, &o, collecting);
    sm_oom_guard_cgroup_close(st.cg);

    sm_monitor_free(m);
    sm_identity_free(st.id);
    free(st.env);
    free(st.env_run);
    free(st.env_uri);
    close(st.sfd);
    if (st.tty >= 0)
        close(st.tty);
    pthread_sigmask(SIG_SETMASK, &orig, NULL);
    sigaction(SIGCHLD, &st.old_chld, NULL);
    return exit_code;
}
