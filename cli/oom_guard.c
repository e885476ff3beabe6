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
 * to a minimum a privileged writer set).
 *
 * Without it (a Kubernetes container: no CAP_SYS_RESOURCE) the other side
 * moves instead: any process may raise its own value, so CMD gets, between
 * fork and exec, its value plus enough thousandths of the limit to outweigh
 * scopemeter's own size (twice its resident size at the start, at least
 * 8 MiB); CMD's tree inherits it (proc(5)).  A process of CMD, however
 * small, then outranks scopemeter; one line says so at start.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "number.h"
#include "oom_guard.h"
#include "parse.h"

#define ADJ_PATH "/proc/self/oom_score_adj"
#define GUARD_ADJ (-999)
#define ADJ_MAX 1000
/* the least the raise outweighs: above the CLI's resident size measured over
 * https (4.61 MB, bench/README.md) with room for NVML's pages */
#define FLOOR_BYTES (8u << 20)

/* CMD's value, formatted before fork (the child only writes) */
static char cmd_text[16];
static size_t cmd_len;

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
    ssize_t w = write(fd, text, len);
    if (w != (ssize_t)len)
        rc = w < 0 ? -errno : -EIO; /* a short write set no errno */
    close(fd);
    return rc;
}

/* The raise that makes a process of CMD with no memory of its own outrank
 * this process: oom_badness adds adj * (totalpages / 1000) pages, totalpages
 * the OOMing cgroup's limit (mem_cgroup_get_max, plus swap) or the node's
 * RAM (mm/oom_kill.c).  The lowest limit over the hierarchy (cgroup.c) is
 * the smallest totalpages an OOM of this job can have.  *limit: the bytes
 * sized against. */
static int raise_by(uint64_t *limit, const char **of)
{
    sm_ctx *ctx = calloc(1, sizeof *ctx);
    sm_cgroup *cg = calloc(1, sizeof *cg);
    char buf[4096];
    uint64_t kb = 0, self, per_point;
    long page = sysconf(_SC_PAGESIZE);
    ssize_t n;
    int d = ADJ_MAX;

    *limit = 0;
    *of = "the cgroup's";
    if (!ctx || !cg || page <= 0)
        goto out;
    (void)sm__ctx_init(ctx);
    if (sm__cgroup_resolve(ctx, cg) == 0 && cg->mem_limit)
        *limit = cg->mem_limit;
    else {
        *limit = ctx->mem_total; /* no cgroup limit: the node's OOM */
        *of = "the node's";
    }
    /* this process's own size, not the sysroot's (fixtures stand in for
     * the cgroup files only) */
    ctx->sysroot[0] = '\0';
    n = sm__read_file(ctx, "/proc/self/status", buf, sizeof buf);
    if (n >= 0)
        (void)sm__parse_kb(buf, (size_t)n, "VmRSS:", &kb);
    self = 2 * kb * 1024 > FLOOR_BYTES ? 2 * kb * 1024 : FLOOR_BYTES;
    per_point = *limit / (uint64_t)page / 1000; /* pages one point adds */
    if (per_point)
        d = (int)(((self + (uint64_t)page - 1) / (uint64_t)page + per_point - 1) / per_point);
out:
    free(ctx);
    free(cg);
    return d < ADJ_MAX ? d : ADJ_MAX;
}

/* This process to GUARD_ADJ: EACCES without CAP_SYS_RESOURCE. */
static int write_guard(void)
{
    char text[16];
    int n = snprintf(text, sizeof text, "%d", GUARD_ADJ);

    return write_adj(text, (size_t)n);
}

int sm_oom_guard_lower_self(void)
{
    int adj = 0, rc = read_adj(&adj);

    return rc < 0 || adj <= GUARD_ADJ ? rc : write_guard();
}

int sm_oom_guard_lower(void)
{
    uint64_t limit;
    const char *of;
    int adj = 0, rc, n, to;

    cmd_len = 0;
    rc = read_adj(&adj);
    if (rc < 0)
        return rc;
    if (adj <= GUARD_ADJ)
        return 0; /* already as low (-1000: never killed), nothing to give back */
    rc = write_guard();
    if (rc == 0) {
        to = adj; /* CMD gets the original back */
    } else {
        int want = raise_by(&limit, &of);
        to = adj + want;
        to = to < ADJ_MAX ? to : ADJ_MAX;
        if (to == adj) {
            fprintf(stderr, "scopemeter: cannot lower its own oom_score_adj (%d; no "
                    "CAP_SYS_RESOURCE) nor raise CMD's above it: in an OOM the kernel ranks "
                    "the recorder with CMD's processes by size alone\n", adj);
            return rc;
        }
        if (to - adj < want) /* held at 1000: less than the size */
            fprintf(stderr, "scopemeter: cannot lower its own oom_score_adj (%d; no "
                    "CAP_SYS_RESOURCE): CMD runs at oom_score_adj %d instead, the most there "
                    "is, which is not enough to outweigh the recorder's size: in an OOM a "
                    "process of CMD smaller than it may still go after it\n", adj, to);
        else
            fprintf(stderr, "scopemeter: cannot lower its own oom_score_adj (%d; no "
                    "CAP_SYS_RESOURCE): CMD runs at oom_score_adj %d instead, so that in an "
                    "OOM any process of CMD goes before the recorder (+%d thousandths of %s "
                    "%.0f MiB outweigh the recorder's size)\n", adj, to, to - adj, of,
                    (double)limit / (1 << 20));
    }
    n = snprintf(cmd_text, sizeof cmd_text, "%d", to);
    cmd_len = (size_t)n;
    return rc;
}

void sm_oom_guard_child(void)
{
    /* a raise, or back to the value this process had: always permitted;
     * open/write/close only (async-signal-safe) */
    if (cmd_len)
        (void)write_adj(cmd_text, cmd_len);
}
