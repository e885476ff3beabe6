/*
 * supervise.c — `scopemeter run`'s supervision of CMD (cli/cmd_run.c):
 * the signals (blocked before any thread exists and read from a signalfd,
 * each forwarded to CMD's process group exactly once), the terminal (lent
 * to CMD's group, a sentinel in it that sees the terminal's Ctrl-C), the
 * subreaper of CMD's tree and the reaping, CMD's start (fork/exec, its
 * dispositions and mask given back) and, after an OOM, the wait for what is
 * left of its group.  Why a file of its own: cmd_run.c is the recording
 * (the run, the monitor, the end); this is process control, and the two
 * change for different reasons.  What must never happen here: work in a
 * signal handler (there is none), a call that is not async-signal-safe in
 * a child between fork and exec (other threads exist), a signal reaching
 * CMD twice or not at all, a child left unreaped while we wait.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "mlflow/run_end.h"
#include "oom_guard.h"
#include "supervise.h"

void supervise_init(struct supervise *sv)
{
    memset(sv, 0, sizeof *sv);
    sv->sfd = -1;
    sv->sentinel_fd = -1;
    sv->tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC); /* -1: none (ENXIO) */
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
    return sm__run_end_terminating(sig); /* the set the run's end counts as a kill */
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
 * PR_SET_PDEATHSIG (supervise_spawn).
 */

/* Whether we hold the terminal: our group is its foreground group. */
static int foreground(const struct supervise *sv)
{
    return sv->tty >= 0 && tcgetpgrp(sv->tty) == getpgrp();
}

/* tcsetpgrp from a background group raises SIGTTOU unless it is blocked. */
static void set_tty_group(const struct supervise *sv, pid_t pgid)
{
    sigset_t ttou, old;

    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    pthread_sigmask(SIG_BLOCK, &ttou, &old);
    (void)tcsetpgrp(sv->tty, pgid);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void lend_tty(struct supervise *sv, pid_t child)
{
    set_tty_group(sv, child);
    sv->tty_lent = 1;
}

static void take_tty_back(struct supervise *sv)
{
    if (sv->tty_lent)
        set_tty_group(sv, getpgrp());
    sv->tty_lent = 0;
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

static void forward_coalesced(struct supervise *sv, pid_t child, int first, int *forwarded_term,
                              int *chld)
{
    int order[sizeof forwarded / sizeof forwarded[0]], n = 0;
    double end = sm__now_mono() + COALESCE_S;
    int sig = first;

    for (;;) {
        struct pollfd p = {.fd = sv->sfd, .events = POLLIN};
        struct signalfd_siginfo si;
        int seen = 0, ms;

        for (int i = 0; i < n; i++)
            seen |= order[i] == sig;
        if (!seen && n < (int)(sizeof order / sizeof order[0]))
            order[n++] = sig;
        ms = (int)((end - sm__now_mono()) * 1000);
        if (ms <= 0 || poll(&p, 1, ms) != 1 || read(sv->sfd, &si, sizeof si) != sizeof si)
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
int supervise_early_signal(struct supervise *sv)
{
    struct pollfd p = {.fd = sv->sfd, .events = POLLIN};
    struct signalfd_siginfo si;

    while (!sv->pending_sig && poll(&p, 1, 0) == 1) {
        if (read(sv->sfd, &si, sizeof si) != sizeof si)
            break;
        if (terminating((int)si.ssi_signo))
            sv->pending_sig = (int)si.ssi_signo;
    }
    return sv->pending_sig;
}

/* fork + execvpe; the child gets the original signal mask and the SIGCHLD
 * and SIGPIPE dispositions back (an ignored signal stays ignored across
 * exec, signal(7)), and dies with us (PR_SET_PDEATHSIG) so a SIGKILLed
 * scopemeter leaves no orphan training.  Exec failures come back over a
 * close-on-exec pipe. */
pid_t supervise_spawn(struct supervise *sv, char **cmd, char **env, int reserve,
                      const sigset_t *orig, int *exec_errno)
{
    int p[2];
    pid_t parent = getpid(), pid;
    int e = 0, lend = foreground(sv);
    ssize_t n;

    *exec_errno = 0;
    if (pipe2(p, O_CLOEXEC) < 0) {
        *exec_errno = errno;
        return -1;
    }
    (void)sm_oom_guard_lower(); /* CMD goes before us in an OOM: docs/cgroup.md §7 */
    if (reserve)
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
        sigaction(SIGCHLD, &sv->old_chld, NULL);
        sigaction(SIGPIPE, &sv->old_pipe, NULL);
        /* CMD's own group; the terminal follows it when we had it (both
         * sides do both, as a shell does, so neither order races) */
        setpgid(0, 0);
        if (lend) {
            sigset_t ttou;
            sigemptyset(&ttou);
            sigaddset(&ttou, SIGTTOU);
            sigprocmask(SIG_BLOCK, &ttou, NULL);
            tcsetpgrp(sv->tty, getpid());
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
        lend_tty(sv, pid);
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
static int reaped(struct supervise *sv, pid_t child, int *status, int flags)
{
    pid_t w;
    int ws;

    for (;;) {
        while ((w = waitpid(-1, &ws, flags | WUNTRACED)) < 0 && errno == EINTR)
            ;
        if (w <= 0 || w == child)
            break;
        if (w == sv->sentinel && !WIFSTOPPED(ws))
            sv->sentinel = 0; /* reaped: supervise_end_sentinel must not signal its pid */
        if (!WIFSTOPPED(ws))
            (void)sm_oom_guard_reaped(w, ws); /* the reserve, taken by an OOM */
        /* an orphan of CMD's tree reaped (or stopped); look for more */
    }
    if (w == child && WIFSTOPPED(ws)) {
        int sig = WSTOPSIG(ws);
        if (sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) {
            int had = sv->tty_lent;
            take_tty_back(sv);
            kill(getpid(), SIGSTOP); /* returns once the shell continues us */
            if (had && foreground(sv))
                lend_tty(sv, child);
            forward(child, SIGCONT);
        }
        return 0;
    }
    if (w == child) {
        *status = ws;
        take_tty_back(sv);
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
 * a failed CMD KILLED (src/mlflow/run_end.c).  It ignores SIGTSTP (Ctrl-Z stops CMD
 * and us, reaped()), dies with us (PR_SET_PDEATHSIG), and is one more process
 * in the recorded tree while CMD runs (docs/design.md §9).  Async-signal-safe
 * calls only after the fork: other threads existed.
 */
void supervise_watch_group(struct supervise *sv, pid_t child)
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
            ssize_t n = read(sv->sfd, &si, sizeof si);
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
    sv->sentinel = pid;
    sv->sentinel_fd = p[0];
}

/* What the sentinel said, once it has said it; then its pipe is closed. */
static void read_sentinel(struct supervise *sv)
{
    int sig = 0;
    ssize_t n;

    do
        n = read(sv->sentinel_fd, &sig, sizeof sig);
    while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof sig && terminating(sig))
        sv->group_sig = sig;
    close(sv->sentinel_fd);
    sv->sentinel_fd = -1;
}

/* After CMD: the sentinel goes, and what it said before is read. */
void supervise_end_sentinel(struct supervise *sv)
{
    struct pollfd p = {.fd = sv->sentinel_fd, .events = POLLIN};

    if (sv->sentinel_fd >= 0 && poll(&p, 1, 0) == 1)
        read_sentinel(sv);
    if (sv->sentinel > 0) {
        kill(sv->sentinel, SIGKILL);
        while (waitpid(sv->sentinel, NULL, 0) < 0 && errno == EINTR)
            ;
        sv->sentinel = 0;
    }
    if (sv->sentinel_fd >= 0)
        close(sv->sentinel_fd);
    sv->sentinel_fd = -1;
}

/* Waits for the child, forwarding signals.  Returns the wait status;
 * *forwarded_term is set when a terminating signal was passed on. */
int supervise_wait(struct supervise *sv, pid_t child, int *forwarded_term)
{
    int status = 0;

    if (sv->pending_sig) {
        forward(child, sv->pending_sig);
        *forwarded_term = 1;
    }
    for (;;) {
        struct signalfd_siginfo si;
        struct pollfd p[2] = {{.fd = sv->sfd, .events = POLLIN},
                              {.fd = sv->sentinel_fd, .events = POLLIN}};
        ssize_t n;

        if (poll(p, sv->sentinel_fd >= 0 ? 2 : 1, -1) < 0 && errno == EINTR)
            continue;
        if (sv->sentinel_fd >= 0 && p[1].revents) {
            read_sentinel(sv); /* said, or gone: the pipe is closed either way */
            if (!p[0].revents)
                continue;
        }
        n = read(sv->sfd, &si, sizeof si);
        if (n != (ssize_t)sizeof si) {
            if (n < 0 && errno == EINTR)
                continue;
            /* the signalfd broke: plain wait (no forwarding possible) */
            while (!reaped(sv, child, &status, 0))
                ;
            return status;
        }
        if (si.ssi_signo == SIGCHLD) {
            if (reaped(sv, child, &status, WNOHANG))
                return status;
            continue;
        }
        /* Whoever sent it, it came to us and not to CMD's group (a
         * terminal's Ctrl-C only while we still held the terminal, before
         * CMD's group took it): passed on once, like any other. */
        int chld = 0;
        forward_coalesced(sv, child, (int)si.ssi_signo, forwarded_term, &chld);
        if (chld && reaped(sv, child, &status, WNOHANG))
            return status;
    }
}

/* Signals: blocked before any thread starts, so every thread inherits
 * the mask and only the signalfd sees them.  Two inherited dispositions
 * would break that, so they are set here and given back to CMD (supervise_spawn):
 *  - SIGCHLD ignored (or SA_NOCLDWAIT): the kernel reaps CMD itself and
 *    sends no SIGCHLD (waitpid(2) NOTES), so we would wait forever;
 *  - SIGPIPE default: one line to a closed stderr pipe (`| head`) would
 *    kill scopemeter, and PR_SET_PDEATHSIG then the training.  Ignored,
 *    a write fails with EPIPE instead.  It stays ignored until exit, so
 *    a last line cannot turn CMD's status into 141.
 * 0, or -1 after one line with everything given back. */
int supervise_take_signals(struct supervise *sv, sigset_t *orig)
{
    struct sigaction dfl = {.sa_handler = SIG_DFL}, ign = {.sa_handler = SIG_IGN};
    sigset_t fwd;

    sigemptyset(&dfl.sa_mask);
    sigemptyset(&ign.sa_mask);
    sigaction(SIGCHLD, &dfl, &sv->old_chld);
    sigaction(SIGPIPE, &ign, &sv->old_pipe);
    signal_set(&fwd);
    pthread_sigmask(SIG_BLOCK, &fwd, orig);
    sv->sfd = signalfd(-1, &fwd, SFD_CLOEXEC);
    if (sv->sfd < 0) {
        fprintf(stderr, "scopemeter: signalfd: %s\n", strerror(errno));
        pthread_sigmask(SIG_SETMASK, orig, NULL);
        sigaction(SIGCHLD, &sv->old_chld, NULL);
        return -1;
    }
    return 0;
}

/* CMD died in an OOM (its cgroup counted a kill): the rest of its tree
 * is the kernel's next victims, one per failed charge (mm/memcontrol.c), a
 * few ms apart -- `sh -c 'head ... > /dev/shm/big'` lost sh, then head
 * 12 ms later, after the recorder had read oom_kill 1.  So the recording's
 * end (the final sample, oom_kill, the peaks) waits for what is left of CMD's
 * process group, orphans reparented to us (we are the subreaper), at most
 * the stop timeout; signals go on being forwarded to that group.  A process
 * that outlives the bound is left running, as without an OOM, with one line
 * (docs/cli.md, Signals).  Outside an OOM nothing is waited for. */
void supervise_wait_tree(struct supervise *sv, pid_t pgid, double bound)
{
    double end = sm__now_mono() + bound;
    int forwarded_term = 0, chld = 0;

    for (;;) {
        struct pollfd p = {.fd = sv->sfd, .events = POLLIN};
        struct signalfd_siginfo si;
        double left = end - sm__now_mono();
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
            read(sv->sfd, &si, sizeof si) != sizeof si)
            continue;
        if (si.ssi_signo != SIGCHLD)
            forward_coalesced(sv, pgid, (int)si.ssi_signo, &forwarded_term, &chld);
    }
}

/* The subreaper of CMD's tree (reaped()); not inherited by CMD (prctl(2)). */
void supervise_subreaper(void)
{
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        fprintf(stderr, "scopemeter: warning: PR_SET_CHILD_SUBREAPER: %s; orphans of CMD's tree "
                "leave the recorded process tree\n", strerror(errno));
}

/* At the end: the signalfd and the terminal closed, the mask and SIGCHLD's
 * disposition given back. */
void supervise_end(struct supervise *sv, const sigset_t *orig)
{
    close(sv->sfd);
    if (sv->tty >= 0)
        close(sv->tty);
    pthread_sigmask(SIG_SETMASK, orig, NULL);
    sigaction(SIGCHLD, &sv->old_chld, NULL);
}
