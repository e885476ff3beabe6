/*
 * run_end.h — how a recording ends, said once for every surface
 * (docs/design.md §3, §7): the run's status (FINISHED, FAILED, KILLED) and
 * the end reason from the recorded process's wait status, whether its group
 * was signalled to end, and the OOM kills its cgroup counted.  `scopemeter
 * run` (cli/cmd_run.c) and the companion (cli/cmd_companion.c) both ask it;
 * a surface that maps a wait status to a run status itself is a second copy
 * of the rule (tests/py/test_layers.py fails it).  Pure: numbers in, text out.
 */
#ifndef SM_RUN_END_H
#define SM_RUN_END_H

#include <stddef.h>

#ifndef SM_HIDDEN
#define SM_HIDDEN __attribute__((visibility("hidden")))
#endif

typedef struct sm_run_end {
    char status[16];  /* "FINISHED", "FAILED" or "KILLED" */
    char reason[200]; /* "oom_kill", "signal 9 (SIGKILL)", "exit 1", "unknown (...)" */
} sm_run_end;

/* ws_rc: 0 when ws is the process's wait status (waitpid(2)), else -errno:
 * it could not be read (-ESRCH/-ENOENT: already reaped).  term: a terminating
 * signal was sent to the process's group (forwarded by scopemeter run, or the
 * terminal's Ctrl-C).  ooms: the OOM kills the job's cgroup counted during
 * the recording.  The verdict:
 *   - exit 0: FINISHED (its own verdict, even after an OOM kill in the cgroup);
 *   - an OOM kill counted, a terminating signal sent, or death by SIGKILL,
 *     SIGTERM, SIGINT, SIGHUP or SIGQUIT: KILLED (a wrapper, `bash train.sh`,
 *     outlives its OOM-killed child and exits 1);
 *   - an unreadable status: KILLED (a process that ran its exit handlers
 *     would have said it stopped);
 *   - another signal (a crash: SIGSEGV, SIGABRT) or a non-zero exit: FAILED.
 * The reason: "oom_kill" when a kill was counted, else the signal or the exit. */
SM_HIDDEN void sm__run_end_judge(int ws_rc, int ws, int term, unsigned long long ooms,
                                 sm_run_end *out);

/* The run tag scopemeter.end_reason's value (docs/design.md §3), who being
 * the surface that ended the run ("run", "companion"): "KILLED by scopemeter
 * companion of rank 0: oom_kill", detail (NULL: none) after it in
 * parentheses.  The rank's own tag, scopemeter.rankN.end_reason, is
 * e->reason alone. */
SM_HIDDEN void sm__run_end_text(const sm_run_end *e, const char *who, int rank,
                                const char *detail, char *out, size_t cap);

/* Whether sig ends a job when a person or a launcher sends it: INT, TERM,
 * HUP, QUIT (scopemeter run forwards them and counts them as a kill). */
SM_HIDDEN int sm__run_end_terminating(int sig);

/* "SIGKILL", ..., or "signal" for one it does not name. */
SM_HIDDEN const char *sm__run_end_signame(int sig);

#endif
