/*
 * test_run_end.c — the run's end (src/mlflow/run_end.c), fed wait statuses
 * as waitpid(2) builds them (W_EXITCODE, <sys/wait.h>), signals sent and
 * OOM counters: the verdicts `scopemeter run` and the companion give
 * (docs/design.md §7), one table.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

#include "check.h"
#include "run_end.h"

struct row {
    int ws_rc, ws, term;
    unsigned long long ooms;
    const char *status, *reason;
};

static const struct row rows[] = {
    /* exits: 0 is its own verdict, even after an OOM kill in the cgroup */
    {0, W_EXITCODE(0, 0), 0, 0, "FINISHED", "exit 0"},
    {0, W_EXITCODE(0, 0), 0, 2, "FINISHED", "oom_kill"},
    {0, W_EXITCODE(0, 0), 1, 0, "FINISHED", "exit 0"},
    {0, W_EXITCODE(1, 0), 0, 0, "FAILED", "exit 1"},
    {0, W_EXITCODE(127, 0), 0, 0, "FAILED", "exit 127"},
    /* bash train.sh: its OOM-killed child, then exit 1 */
    {0, W_EXITCODE(1, 0), 0, 2, "KILLED", "oom_kill"},
    /* torchrun handles the forwarded SIGINT and exits 1: the job was killed */
    {0, W_EXITCODE(1, 0), 1, 0, "KILLED", "exit 1"},
    /* the terminating set and SIGKILL */
    {0, W_EXITCODE(0, SIGKILL), 0, 0, "KILLED", "signal 9 (SIGKILL)"},
    {0, W_EXITCODE(0, SIGTERM), 0, 0, "KILLED", "signal 15 (SIGTERM)"},
    {0, W_EXITCODE(0, SIGINT), 0, 0, "KILLED", "signal 2 (SIGINT)"},
    {0, W_EXITCODE(0, SIGHUP), 0, 0, "KILLED", "signal 1 (SIGHUP)"},
    {0, W_EXITCODE(0, SIGQUIT), 0, 0, "KILLED", "signal 3 (SIGQUIT)"},
    {0, W_EXITCODE(0, SIGKILL), 0, 1, "KILLED", "oom_kill"},
    /* a crash is FAILED, unless an OOM kill or a sent signal says otherwise */
    {0, W_EXITCODE(0, SIGSEGV), 0, 0, "FAILED", "signal 11 (SIGSEGV)"},
    {0, W_EXITCODE(0, SIGABRT), 0, 0, "FAILED", "signal 6 (SIGABRT)"},
    {0, W_EXITCODE(0, SIGUSR1), 0, 0, "FAILED", "signal 10 (signal)"},
    {0, W_EXITCODE(0, SIGSEGV), 1, 0, "KILLED", "signal 11 (SIGSEGV)"},
    {0, W_EXITCODE(0, SIGSEGV), 0, 3, "KILLED", "oom_kill"},
    /* the companion lost the race with the parent's parent */
    {-ESRCH, 0, 0, 0, "KILLED", "unknown (exit status not readable: already reaped)"},
    {-ENOENT, 0, 0, 0, "KILLED", "unknown (exit status not readable: already reaped)"},
    {-EACCES, 0, 0, 0, "KILLED", "unknown (exit status not readable: Permission denied)"},
    {-ESRCH, 0, 0, 1, "KILLED", "oom_kill"},
};

int main(void)
{
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct row *r = &rows[i];
        sm_run_end e;

        sm__run_end_judge(r->ws_rc, r->ws, r->term, r->ooms, &e);
        if (strcmp(e.status, r->status) || strcmp(e.reason, r->reason))
            fprintf(stderr, "row %zu: ws_rc %d ws %#x term %d ooms %llu\n", i, r->ws_rc,
                    (unsigned)r->ws, r->term, r->ooms);
        CHECK_EQ_STR(e.status, r->status);
        CHECK_EQ_STR(e.reason, r->reason);
    }
    {
        /* the run tag each surface writes (docs/design.md §3's examples) */
        sm_run_end e;
        char text[300];

        sm__run_end_judge(0, W_EXITCODE(1, 0), 0, 2, &e);
        sm__run_end_text(&e, "run", 0, "2 OOM kills in its cgroup; CMD exit 1", text,
                         sizeof text);
        CHECK_EQ_STR(text, "KILLED by scopemeter run of rank 0: oom_kill (2 OOM kills in its "
                           "cgroup; CMD exit 1)");
        sm__run_end_judge(0, W_EXITCODE(0, SIGKILL), 0, 0, &e);
        sm__run_end_text(&e, "companion", 3, NULL, text, sizeof text);
        CHECK_EQ_STR(text, "KILLED by scopemeter companion of rank 3: signal 9 (SIGKILL)");
    }
    CHECK(sm__run_end_terminating(SIGTERM) && !sm__run_end_terminating(SIGKILL) &&
          !sm__run_end_terminating(SIGUSR1));
    return CHECK_DONE();
}
