/* oom_guard.h — scopemeter run's place in the kernel's OOM order, and the OOM's
 * kills counted at the end (cli/oom_guard.c). */
#ifndef SM_CLI_OOM_GUARD_H
#define SM_CLI_OOM_GUARD_H

#include <sys/types.h>

/* Before fork: lower this process's oom_score_adj below CMD's, where the
 * kernel lets us (CAP_SYS_RESOURCE).  Returns 0 when lowered, else -errno:
 * then CMD is to run at a raised value instead, and one line said so
 * (docs/cgroup.md §7). */
int sm_oom_guard_lower(void);

/* The companion's (cli/cmd_companion.c): lower this process's oom_score_adj
 * to -999 where the kernel lets us, nothing else, nothing said.  0 or -errno. */
int sm_oom_guard_lower_self(void);

/* In the child between fork and exec (async-signal-safe): give CMD the
 * oom_score_adj this process was started with, or the raised one. */
void sm_oom_guard_child(void);

/* This process's oom_score_adj to adj (a raise needs no capability, a
 * lowering CAP_SYS_RESOURCE).  0 or -errno (-EIO: a short write). */
int sm_oom_guard_set_self(int adj);

/* After sm_oom_guard_lower (which read the two values the reserve's lies
 * between): start the reserve process, `scopemeter reserve` (cmd_reserve.c),
 * when the job's cgroup has a memory limit.  0 when it holds its memory,
 * -ENOENT without a limit, else -errno after one line. */
int sm_oom_guard_reserve(void);

/* A child reaped by scopemeter run's wait loop: 1 when it was the reserve
 * (its status kept), else 0. */
int sm_oom_guard_reaped(pid_t pid, int status);

/* At the end: kill and reap the reserve if it still lives.  1 when the
 * kernel took it before (an OOM with no process of CMD left to take), else 0;
 * *mb: its size, MB. */
int sm_oom_guard_reserve_end(double *mb);

/* The reserve's pid while it lives, else 0. */
pid_t sm_oom_guard_reserve_pid(void);

/* The container collector (src/collect/coll_container.c) opened as the monitor opens
 * it, only to read its END tags: the cgroup's counters against their values
 * at this open (oom_kill, memory_events, cpu_throttled_*) and the kernel's
 * peak; it resets nothing.  scopemeter run and the companion read the OOM
 * kills through it at their end.  NULL without a limit or unreadable (the
 * monitor said why at its start). */
void *sm_oom_guard_cgroup_open(void);

/* The OOM kills its cgroup counted since sm_oom_guard_cgroup_open: 0, or
 * -ENOENT (no collector, no counter: a kernel before 4.13). */
int sm_oom_guard_cgroup_kills(void *ctr, unsigned long long *n);

void sm_oom_guard_cgroup_close(void *ctr); /* NULL is fine */

#endif
