/* oom_guard.h — scopemeter run's place in the kernel's OOM order (cli/oom_guard.c). */
#ifndef SM_CLI_OOM_GUARD_H
#define SM_CLI_OOM_GUARD_H

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

#endif
