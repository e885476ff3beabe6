/*
 * run_end.c — the one map from a wait status, a signal sent and the cgroup's
 * OOM kills to a run's status and end reason (run_end.h says the rule).  Why
 * a file: `scopemeter run` and the companion wrote the same signal set twice,
 * and a run must end with the same word whichever surface ended it.  Never
 * any I/O here: the callers read the status and the counters, the unit test
 * (tests/c/test_run_end.c) feeds them.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "run_end.h"

int sm__run_end_terminating(int sig)
{
    return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT;
}

const char *sm__run_end_signame(int sig)
{
    switch (sig) {
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    default: return "signal";
    }
}

void sm__run_end_text(const sm_run_end *e, const char *who, int rank, const char *detail,
                      char *out, size_t cap)
{
    snprintf(out, cap, "%s by scopemeter %s of rank %d: %s%s%s%s", e->status, who, rank,
             e->reason, detail ? " (" : "", detail ? detail : "", detail ? ")" : "");
}

void sm__run_end_judge(int ws_rc, int ws, int term, unsigned long long ooms, sm_run_end *out)
{
    int sig = ws_rc == 0 && WIFSIGNALED(ws) ? WTERMSIG(ws) : 0;
    const char *status;

    if (ws_rc == 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
        status = "FINISHED";
    else if (ws_rc != 0 || ooms > 0 || term || sig == SIGKILL || sm__run_end_terminating(sig))
        status = "KILLED";
    else
        status = "FAILED"; /* a crash (SIGSEGV, SIGABRT), a non-zero exit */
    snprintf(out->status, sizeof out->status, "%s", status);
    if (ooms > 0)
        snprintf(out->reason, sizeof out->reason, "oom_kill");
    else if (sig)
        snprintf(out->reason, sizeof out->reason, "signal %d (%s)", sig, sm__run_end_signame(sig));
    else if (ws_rc == 0 && WIFEXITED(ws))
        snprintf(out->reason, sizeof out->reason, "exit %d", WEXITSTATUS(ws));
    else if (ws_rc == 0)
        snprintf(out->reason, sizeof out->reason, "wait status %#x", (unsigned)ws);
    else
        snprintf(out->reason, sizeof out->reason, "unknown (exit status not readable: %s)",
                 ws_rc == -ENOENT || ws_rc == -ESRCH ? "already reaped" : strerror(-ws_rc));
}
