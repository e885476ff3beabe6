/*
 * cmd_reserve.c — `scopemeter reserve BYTES PPID [ADJ]` (internal): the memory
 * scopemeter run keeps for its own last writes, held by a process the
 * kernel's OOM killer takes before the recorder (cli/oom_guard.c,
 * docs/cgroup.md §7).
 *
 * It raises its oom_score_adj to ADJ (between the recorder's and CMD's:
 * oom_guard.c reserve_adj; raising needs no capability), touches BYTES of
 * anonymous memory (charged to the job's cgroup), says so with one byte on
 * stdout, and waits to be killed: by scopemeter run at its end, by the
 * kernel in an OOM where no process of CMD is left to take, or by
 * PR_SET_PDEATHSIG when the recorder (PPID) dies first.  It must never do
 * anything else: no allocation after the reserve, no output after its byte,
 * no signal handled (it keeps the recorder's mask, which blocks every signal
 * the recorder forwards).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "cli.h"
#include "number.h"
#include "oom_guard.h"

int cmd_reserve(int argc, char **argv)
{
    static const sm_num_spec bytes_spec = {"BYTES", 4096, 1u << 30, 1, 0},
                             ppid_spec = {"PPID", 1, 1 << 22, 1, 0},
                             adj_spec = {"ADJ", -1000, 1000, 1, 0};
    static const char usage[] = "usage: scopemeter reserve BYTES PPID [ADJ] (internal: "
                                "scopemeter run starts it; docs/cli.md)\n";
    char err[160];
    double bytes, ppid, adj = 0;
    int ok, rc;
    long page = sysconf(_SC_PAGESIZE);
    size_t len, i;
    void *p;

    if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        printf("%s", usage);
        return 0;
    }
    ok = (argc == 3 || argc == 4) && page > 0;
    if (!ok || sm__num_parse(argv[1], &bytes_spec, &bytes, err, sizeof err) < 0 ||
        sm__num_parse(argv[2], &ppid_spec, &ppid, err, sizeof err) < 0 ||
        (argc == 4 && sm__num_parse(argv[3], &adj_spec, &adj, err, sizeof err) < 0)) {
        fprintf(stderr, "scopemeter reserve: %s%s", ok ? err : "", ok ? "; " : "");
        fprintf(stderr, "%s", usage);
        return 2;
    }
    /* the recorder's death takes the reserve with it; one already gone
     * before the prctl is not our parent any more */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != (pid_t)ppid)
        return 1;
    /* the name the kernel's log and ps show: "Killed process N (sm-reserve)" */
    (void)prctl(PR_SET_NAME, "sm-reserve", 0, 0, 0);
    if (argc == 4 && (rc = sm_oom_guard_set_self((int)adj)) < 0)
        fprintf(stderr, "scopemeter reserve: cannot raise its oom_score_adj to %d (%s): in an "
                "OOM the kernel orders it and the recorder by their sizes alone\n", (int)adj,
                strerror(-rc));
    len = ((size_t)bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return 1;
    /* a write fault gives each page a frame of its own (a read would map
     * the shared zero page, charged to no one) */
    for (i = 0; i < len; i += (size_t)page)
        ((volatile char *)p)[i] = 1;
    if (write(STDOUT_FILENO, "r", 1) != 1)
        return 1;
    close(STDOUT_FILENO);
    for (;;)
        pause();
}
