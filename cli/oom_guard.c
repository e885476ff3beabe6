/*
 * oom_guard.c — scopemeter run is never the OOM killer's choice while a
 * process of CMD can be chosen instead (docs/cgroup.md §7).
 *
 * Why the kernel can pick scopemeter.  scopemeter runs in CMD's cgroup (it
 * measures its own cgroup), so a memory-cgroup OOM ranks it with CMD's
 * processes.  The kernel (mm/oom_kill.c, oom_badness) picks the eligible
 * process with the most rss + swap + page tables, plus oom_score_adj in
 * thousandths of the cgroup's limit.  A process already chosen is skipped once
 * its memory was reaped or unmapped (MMF_OOM_SKIP), and memory that belongs
 * to no process — tmpfs/shm files, a dying victim's pages not yet uncharged —
 * is no one's rss.  So when such memory fills the cgroup, the next charge
 * (anyone's: a shell's, a launcher's, scopemeter's own page fault or kernel
 * buffer) selects among the live processes by their own rss, and
 * scopemeter's few MB outweigh a shell, a sleeping launcher or `head`: the
 * recorder dies, its end tags and last window with it (measured in a v2
 * guest, tests/py/test_vm_cgroup2.py).
 *
 * The fix: this process lowers its own oom_score_adj to -999 before starting
 * CMD, and CMD gets the original value back between fork and exec.  Any
 * process of CMD then outranks scopemeter whatever the sizes; scopemeter is
 * still killable (-999, not -1000 = never), so a cgroup whose last process is
 * scopemeter always has a victim.  Lowering needs CAP_SYS_RESOURCE (the
 * kernel lets an unprivileged process only raise its value, or lower it back
 * to a minimum a privileged writer set): without it nothing changes and the
 * ranking rests on size alone, which docs/cgroup.md says.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "number.h"
#include "oom_guard.h"

#define ADJ_PATH "/proc/self/oom_score_adj"
#define GUARD_ADJ (-999)

/* the value to give back, formatted before fork (the child only writes) */
static char orig_text[16];
static size_t orig_len;

static int read_adj(int *adj)
{
    char buf[32];
    const char *p = buf;
    const sm_num_spec spec = {ADJ_PATH, -1000, 1000, 1, 0};
    ssize_t n;
    double v;
    int fd = open(ADJ_PATH, O_RDONLY | O_CLOEXEC), rc = 0;

    if (fd < 0)
        return -errno;
    n = read(fd, buf, sizeof buf - 1);
    if (n <= 0) {
        rc = n < 0 ? -errno : -EINVAL;
        goto out;
    }
    buf[n] = '\0';
    /* the kernel writes "%d\n" (fs/proc/base.c); the one number parser
     * (src/number.h) holds it to the kernel's range */
    if (sm__num_scan(&p, &spec, &v) < 0 || (*p && strcmp(p, "\n") != 0)) {
        rc = -EINVAL;
        goto out;
    }
    *adj = (int)v;
out:
    close(fd);
    return rc;
}

static int write_adj(const char *text, size_t len)
{
    int fd = open(ADJ_PATH, O_WRONLY | O_CLOEXEC), rc = 0;

    if (fd < 0)
        return -errno;
    if (write(fd, text, len) != (ssize_t)len)
        rc = -errno;
    close(fd);
    return rc;
}

int sm_oom_guard_lower(void)
{
    char text[16];
    int adj = 0, rc, n;

    orig_len = 0;
    rc = read_adj(&adj);
    if (rc < 0)
        return rc;
    if (adj <= GUARD_ADJ)
        return 0; /* already as low (-1000: never killed), nothing to give back */
    n = snprintf(text, sizeof text, "%d", GUARD_ADJ);
    rc = write_adj(text, (size_t)n); /* EACCES without CAP_SYS_RESOURCE */
    if (rc < 0)
        return rc;
    n = snprintf(orig_text, sizeof orig_text, "%d", adj);
    orig_len = (size_t)n;
    return 0;
}

void sm_oom_guard_child(void)
{
    /* a raise: always permitted; open/write/close only (async-signal-safe) */
    if (orig_len)
        (void)write_adj(orig_text, orig_len);
}
