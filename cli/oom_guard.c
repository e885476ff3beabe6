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
 * scopemeter's own size and its reserve's (four times its resident size at
 * the start, at least 16 MiB); CMD's tree inherits it (proc(5)).  A process
 * of CMD, however small, then outranks scopemeter; one line says so at
 * start.
 *
 * Order decides who goes first, not whether the recorder survives the last
 * OOM.  When CMD's last process is gone and the memory that fills the cgroup
 * belongs to no process (a /dev/shm file CMD left), the recorder is the only
 * process the kernel can take, and its next page kills it whatever its
 * oom_score_adj: a page of its own code evicted while the cgroup filled and
 * read back for the run's end, a buffer for the last window.  So the
 * recorder keeps a reserve that the kernel itself frees at that moment: a
 * child, `scopemeter reserve` (cmd_reserve.c, comm "sm-reserve"), holding as
 * much anonymous memory as the recorder has resident (all it could need to
 * read back) and nothing else.  Its oom_score_adj sits between the
 * recorder's and CMD's, in the middle of what lies between the recorder and
 * a process of CMD with no memory (reserve_adj), so the kernel takes it
 * first even after the recorder grew (a guest saw the recorder at 4.4 MB
 * beside a reserve sized at its start, at the same value: the recorder was
 * taken), and every process of CMD goes before it.  Its death uncharges the
 * reserve, and the charge that asked for the OOM succeeds.  Only with a
 * cgroup memory limit: a node OOM ranks every process of the node.
 *
 * And who counts the OOM's kills at the end (sm_oom_guard_cgroup_open):
 * scopemeter run and the companion read the cgroup's counter through the
 * container collector's own end tags when their recording ends, so the
 * kills after the first death are the run's too (docs/cgroup.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "number.h"
#include "oom_guard.h"
#include "parse.h"

#define ADJ_PATH "/proc/self/oom_score_adj"
#define GUARD_ADJ (-999)
#define ADJ_MAX 1000
/* the least the raise outweighs: the recorder, its reserve (reserve_adj) and
 * room between them, above four times the CLI's resident size measured over
 * http (2.6 MB; 4.61 MB over https, bench/README.md) */
#define FLOOR_BYTES (16u << 20)

/* CMD's value, formatted before fork (the child only writes) */
static char cmd_text[16];
static size_t cmd_len;
/* this process's value and CMD's once sm_oom_guard_lower read them */
static int adj_known, self_adj, cmd_adj;

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
     * (src/util/number.h) holds it to the kernel's range */
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

/* What an OOM of this job is sized against: the lowest memory limit over
 * the hierarchy (cgroup.c), else the node's RAM (*of says which), and this
 * process's own resident size (/proc/self/status VmRSS, proc(5); not the
 * sysroot's: fixtures stand in for the cgroup files only).  0 when a cgroup
 * limit was found, -ENOENT when only the node's, -ENOMEM. */
static int job_sizes(uint64_t *limit, const char **of, uint64_t *rss)
{
    sm_ctx *ctx = calloc(1, sizeof *ctx);
    sm_cgroup *cg = calloc(1, sizeof *cg);
    char buf[4096];
    uint64_t kb = 0;
    ssize_t n;
    int rc = -ENOMEM;

    *limit = 0;
    *rss = 0;
    *of = "the cgroup's";
    if (!ctx || !cg)
        goto out;
    (void)sm__ctx_init(ctx);
    if (sm__cgroup_resolve(ctx, cg) == 0 && cg->mem_limit) {
        *limit = cg->mem_limit;
        rc = 0;
    } else {
        *limit = ctx->mem_total; /* no cgroup limit: the node's OOM */
        *of = "the node's";
        rc = -ENOENT;
    }
    ctx->sysroot[0] = '\0';
    n = sm__read_file(ctx, "/proc/self/status", buf, sizeof buf);
    if (n >= 0 && sm__parse_kb(buf, (size_t)n, "VmRSS:", &kb) == 0)
        *rss = kb * 1024;
out:
    free(ctx);
    free(cg);
    return rc;
}

/* The raise that makes a process of CMD with no memory of its own outrank
 * this process: oom_badness adds adj * (totalpages / 1000) pages, totalpages
 * the OOMing cgroup's limit (mem_cgroup_get_max, plus swap) or the node's
 * RAM (mm/oom_kill.c).  The lowest limit over the hierarchy is the smallest
 * totalpages an OOM of this job can have.  *limit: the bytes sized
 * against.  Four times this process's size also leaves room for the
 * reserve (below: about twice this size, this size again in anonymous
 * memory and its own file pages) with as much again split between the
 * reserve's two sides. */
static int raise_by(uint64_t *limit, const char **of)
{
    uint64_t rss, self, per_point;
    long page = sysconf(_SC_PAGESIZE);
    int d = ADJ_MAX;

    if (job_sizes(limit, of, &rss) == -ENOMEM || page <= 0)
        return d;
    self = 4 * rss > FLOOR_BYTES ? 4 * rss : FLOOR_BYTES;
    per_point = *limit / (uint64_t)page / 1000; /* pages one point adds */
    if (per_point)
        d = (int)(((self + (uint64_t)page - 1) / (uint64_t)page + per_point - 1) / per_point);
    return d < ADJ_MAX ? d : ADJ_MAX;
}

/* The reserve's oom_score_adj: oom_badness adds adj * (limit / 1000) to each
 * process's rss + page tables (the raise_by comment), so between the
 * recorder's value and CMD's lie (cmd - self) * limit / 1000 bytes of rank.
 * The reserve's own size takes a part of that (twice bytes: the recorder's
 * resident size at the start in anonymous memory, and its own file pages,
 * 1.7 MB measured beside 2.7 MB of anonymous); it goes up by half of the
 * rest, so the recorder may grow by as much before it outranks the reserve
 * as a process of CMD with no memory outranks the reserve by (300 MiB, no
 * CAP_SYS_RESOURCE: recorder 0, reserve 18, CMD 54; 5.7 MB each side).
 * The recorder's value when there is no room (the same value, or a limit
 * too small for a point); called only once sm_oom_guard_lower read it. */
static int reserve_adj(uint64_t limit, uint64_t bytes)
{
    uint64_t point = limit / 1000;
    int64_t gap = (int64_t)cmd_adj - self_adj, own;

    if (point == 0 || gap <= 0)
        return self_adj;
    own = (int64_t)((2 * bytes + point - 1) / point);
    return gap > own ? self_adj + (int)((gap - own + 1) / 2) : self_adj;
}

/* The reserve process while it lives (0 once reaped), whether it died of a
 * SIGKILL not ours, and its size. */
static pid_t reserve_pid;
static int reserve_taken;
static uint64_t reserve_bytes;

int sm_oom_guard_reserve(void)
{
    uint64_t limit, rss;
    const char *of;
    char bytes[24], ppid[24], adj[16], *const empty_env[] = {NULL};
    char *argv[] = {"scopemeter", "reserve", bytes, ppid, adj, NULL};
    posix_spawn_file_actions_t fa;
    int p[2], rc;
    char c;
    ssize_t n;
    pid_t pid;

    if (reserve_pid)
        return 0;
    rc = job_sizes(&limit, &of, &rss);
    if (rc < 0)
        return rc; /* no cgroup limit: nothing a reserve in it would change */
    /* at least 1 MiB: a recorder whose size could not be read still needs its
     * code back */
    reserve_bytes = rss > (1u << 20) ? rss : (1u << 20);
    snprintf(bytes, sizeof bytes, "%llu", (unsigned long long)reserve_bytes);
    snprintf(ppid, sizeof ppid, "%ld", (long)getpid());
    snprintf(adj, sizeof adj, "%d", reserve_adj(limit, reserve_bytes));
    if (!adj_known)
        argv[4] = NULL; /* it keeps ours */
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    /* posix_spawn: threads exist (the monitor's); stdout is the pipe, whose
     * other copies close at exec; the signal mask is ours (forwarded signals
     * blocked), and stays so in the reserve */
    rc = posix_spawn_file_actions_init(&fa);
    if (rc == 0) {
        rc = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
        if (rc == 0)
            rc = posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
        if (rc == 0)
            rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, empty_env);
        posix_spawn_file_actions_destroy(&fa);
    }
    close(p[1]);
    if (rc == 0) {
        do
            n = read(p[0], &c, 1);
        while (n < 0 && errno == EINTR);
        if (n == 1) {
            reserve_pid = pid;
            reserve_taken = 0;
        } else {
            rc = EIO; /* it could not map or touch its memory: gone */
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        }
    }
    close(p[0]);
    if (rc != 0)
        fprintf(stderr, "scopemeter: no OOM reserve (%s): if CMD leaves the cgroup full when "
                "it ends (a file in /dev/shm), the recorder may be killed before the run's "
                "end\n", strerror(rc));
    return -rc;
}

int sm_oom_guard_reaped(pid_t pid, int status)
{
    if (!reserve_pid || pid != reserve_pid)
        return 0;
    reserve_pid = 0;
    /* SIGKILL before our own at the end: the kernel's OOM killer (or a kill
     * -9 of the reserve alone, which frees it the same way) */
    reserve_taken = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    return 1;
}

int sm_oom_guard_reserve_end(double *mb)
{
    int status;
    pid_t w;

    *mb = (double)reserve_bytes / 1e6;
    if (reserve_pid) {
        while ((w = waitpid(reserve_pid, &status, WNOHANG)) < 0 && errno == EINTR)
            ;
        if (w == reserve_pid) {
            (void)sm_oom_guard_reaped(w, status);
        } else {
            (void)kill(reserve_pid, SIGKILL);
            while (waitpid(reserve_pid, NULL, 0) < 0 && errno == EINTR)
                ;
            reserve_pid = 0;
        }
    }
    return reserve_taken;
}

pid_t sm_oom_guard_reserve_pid(void)
{
    return reserve_pid;
}

void *sm_oom_guard_cgroup_open(void)
{
    sm_ctx *ctx = sm__zalloc(sizeof *ctx);
    sm_opened *res = sm__zalloc(sizeof *res);
    void *st = sm__zalloc(sm__coll_container.state_size);

    if (ctx && res && st) {
        (void)sm__ctx_init(ctx); /* owns_peak 0: the monitor's instance resets it */
        if (sm__coll_container.open(st, ctx, res) != 0) {
            sm__zfree(st); /* no limit, or unreadable */
            st = NULL;
        }
    } else {
        sm__zfree(st);
        st = NULL;
    }
    sm__zfree(res);
    sm__zfree(ctx);
    return st;
}

int sm_oom_guard_cgroup_kills(void *ctr, unsigned long long *n)
{
    sm_tags *t = ctr ? sm__zalloc(sizeof *t) : NULL;
    int rc = -ENOENT;

    *n = 0;
    if (!t)
        return ctr ? -ENOMEM : -ENOENT;
    sm__coll_container.tags(ctr, SM_TAGS_END, t);
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->v[i].key, "oom_kill") == 0) {
            *n = strtoull(t->v[i].value, NULL, 10); /* the collector's own "%llu" */
            rc = 0;
        }
    sm__zfree(t);
    return rc;
}

void sm_oom_guard_cgroup_close(void *ctr)
{
    if (!ctr)
        return;
    sm__coll_container.close(ctr);
    sm__zfree(ctr);
}

int sm_oom_guard_set_self(int adj)
{
    char text[16];
    int n = snprintf(text, sizeof text, "%d", adj);

    return write_adj(text, (size_t)n);
}

int sm_oom_guard_lower_self(void)
{
    int adj = 0, rc = read_adj(&adj);

    return rc < 0 || adj <= GUARD_ADJ ? rc : sm_oom_guard_set_self(GUARD_ADJ);
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
    self_adj = cmd_adj = adj;
    adj_known = 1;
    if (adj <= GUARD_ADJ)
        return 0; /* already as low (-1000: never killed), nothing to give back */
    rc = sm_oom_guard_set_self(GUARD_ADJ); /* EACCES without CAP_SYS_RESOURCE */
    if (rc == 0) {
        to = adj; /* CMD gets the original back */
        self_adj = GUARD_ADJ;
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
    cmd_adj = to;
    return rc;
}

void sm_oom_guard_child(void)
{
    /* a raise, or back to the value this process had: always permitted;
     * open/write/close only (async-signal-safe) */
    if (cmd_len)
        (void)write_adj(cmd_text, cmd_len);
}
