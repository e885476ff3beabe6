/* supervise.h — scopemeter run's supervision of CMD: signals, the terminal,
 * the subreaper, reaping (cli/supervise.c says how and why). */
#ifndef SM_CLI_SUPERVISE_H
#define SM_CLI_SUPERVISE_H

#include <signal.h>
#include <sys/types.h>

struct supervise {
    int sfd;                   /* signalfd */
    int pending_sig;           /* a terminating signal that came before CMD started */
    struct sigaction old_chld, old_pipe; /* the dispositions we were given, CMD's */
    int tty;                   /* our controlling terminal, or -1 */
    int tty_lent;              /* CMD's group is the terminal's foreground group */
    pid_t sentinel;            /* the sentinel in CMD's group (supervise_watch_group), or 0 */
    int sentinel_fd;           /* where it says what the group got, or -1 */
    int group_sig;             /* a terminating signal CMD's group got (Ctrl-C), or 0 */
};

/* Nothing taken yet; the terminal opened when there is one. */
void supervise_init(struct supervise *sv);

/* Blocks the forwarded signals and SIGCHLD (into *orig, the mask before)
 * and opens their signalfd.  0, or -1 after one line, all given back. */
int supervise_take_signals(struct supervise *sv, sigset_t *orig);

/* This process the subreaper of CMD's tree (one line when it cannot be). */
void supervise_subreaper(void);

/* A terminating signal that arrived before CMD started, or 0. */
int supervise_early_signal(struct supervise *sv);

/* CMD started in its own process group, the terminal lent to it when we hold
 * it; reserve: start the OOM reserve beside it (cli/oom_guard.c).  Its pid,
 * or -1 (*exec_errno); an exec that failed after the fork is *exec_errno
 * with the pid, reaped by supervise_wait. */
pid_t supervise_spawn(struct supervise *sv, char **cmd, char **env, int reserve,
                      const sigset_t *orig, int *exec_errno);

/* With the terminal lent: the sentinel in CMD's group. */
void supervise_watch_group(struct supervise *sv, pid_t child);

/* Forwards signals until CMD exits, reaping orphans of its tree.  Its wait
 * status; *forwarded_term set when a terminating signal was passed on. */
int supervise_wait(struct supervise *sv, pid_t child, int *forwarded_term);

/* After CMD: the sentinel gone, what it saw in sv->group_sig. */
void supervise_end_sentinel(struct supervise *sv);

/* After an OOM: what is left of CMD's group waited for, at most bound s. */
void supervise_wait_tree(struct supervise *sv, pid_t pgid, double bound);

/* The signalfd and the terminal closed, *orig and SIGCHLD's disposition back. */
void supervise_end(struct supervise *sv, const sigset_t *orig);

#endif
