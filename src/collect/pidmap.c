/*
 * pidmap.c — whose process is this (pidmap.h): the one place that follows
 * a ppid chain and reads RANK from a process's environ, for both GPU
 * collectors.  sm__pid_decide is the rule, pure (tests/c/test_pidmap.c
 * feeds it numbers); sm__pidmap_class reads the files it asks for, through
 * the sysroot, and keeps each process's class by pid and start time: a
 * process is decided once (its ancestors' stat lines and its environ read
 * once), and a pid reused by another process is decided anew.
 *
 * The own tree coll_proc.c walks each sample (the children files, or its
 * one /proc scan) is fed here: a process it lists, or whose ancestor it
 * lists, is own without following the chain to this process.  The tree
 * only shortens the walk: a process the tree has not seen yet (it was
 * forked since, or coll_proc is not recording) is decided by its chain, as
 * before the tree was kept.  Nothing here may emit a series or say a line:
 * what a class means for a series is its collector's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parse.h"
#include "pidmap.h"

void sm__pidmap_init(sm__pidmap *m, const sm_ctx *ctx)
{
    char path[SM_PATH_MAX], link[64];
    ssize_t n;

    m->ctx = *ctx;
    m->ctx.rec_key = NULL; /* not kept beyond open */
    m->ctx.pids = NULL;
    m->own_rank = ctx->id.rank >= 0 ? ctx->id.rank : 0;
    m->self_pid = -1;
    m->uses = 0;
    m->ntree = 0;
    memset(m->cache, 0, sizeof m->cache);
    /* a fake /proc links self to its root, as for coll_proc.c */
    if (sm__path(ctx, "/proc/self", path, sizeof path) == 0 &&
        (n = readlink(path, link, sizeof link - 1)) > 0) {
        link[n] = '\0';
        m->self_pid = atoi(link);
    }
}

void sm__pidmap_tree_begin(sm__pidmap *m)
{
    m->ntree = 0;
}

void sm__pidmap_tree_add(sm__pidmap *m, int pid, uint64_t start)
{
    if (m->ntree < SM_PIDMAP_TREE) {
        m->tree[m->ntree].pid = pid;
        m->tree[m->ntree].start = start;
        m->ntree++;
    }
}

static int by_pid(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;

    return (x > y) - (x < y);
}

void sm__pidmap_tree_end(sm__pidmap *m)
{
    qsort(m->tree, (size_t)m->ntree, sizeof m->tree[0], by_pid);
}

static int in_tree(const sm__pidmap *m, const sm__pidstat *p)
{
    int lo = 0, hi = m->ntree;

    if (p->start == SM_PID_NOSTART)
        return 0;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (m->tree[mid].pid < p->pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < m->ntree && m->tree[lo].pid == p->pid && m->tree[lo].start == p->start;
}

int sm__pid_decide(const sm__pidmap *m, const sm__pidq *q, int *rank, int *need)
{
    int ended = 0;

    *rank = -1;
    *need = 0;
    if (q->n <= 0)
        return SM_PID_FOREIGN; /* not in this pid namespace: another container, the host */
    /* own: the ppid chain reaches this process, or a process of the tree */
    for (int k = 0; k < q->n; k++) {
        const sm__pidstat *p = &q->chain[k];
        if (p->pid <= 1) { /* init, or no parent: the chain ended */
            ended = 1;
            break;
        }
        if (p->pid == m->self_pid || in_tree(m, p)) {
            *rank = m->own_rank;
            return SM_PID_OWN;
        }
    }
    if (!ended && q->n < SM_PID_DEPTH && q->chain[q->n - 1].start != SM_PID_NOSTART) {
        *need = q->chain[q->n - 1].ppid; /* one ancestor further */
        return SM_PID_NEED_STAT;
    }
    /* not below this process: its RANK says whose it is */
    if (q->env_rank == SM_PID_UNREAD) {
        *need = q->chain[0].pid;
        return SM_PID_NEED_ENV;
    }
    if (q->env_rank < 0)
        return SM_PID_UNRANKED;
    *rank = q->env_rank;
    return q->env_rank == m->own_rank ? SM_PID_OWN : SM_PID_RANK;
}

/* ---- the reads sm__pid_decide asks for ------------------------------------ */

static int read_stat(const sm__pidmap *m, int pid, sm__pidstat *out)
{
    char path[64], buf[1024];
    sm_pid_stat st;
    ssize_t n;

    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    n = pid > 0 ? sm__read_file(&m->ctx, path, buf, sizeof buf) : -EINVAL;
    if (n < 0)
        return (int)n;
    if (sm__parse_pid_stat(buf, (size_t)n, &st) != 0)
        return -EINVAL;
    *out = (sm__pidstat){.pid = pid, .ppid = st.ppid, .start = st.starttime};
    return 0;
}

/* RANK of pid's environ; -1 when it has none or it cannot be read. */
static int read_env_rank(sm__pidmap *m, int pid)
{
    char path[64];
    ssize_t n;
    int fd, r;

    snprintf(path, sizeof path, "/proc/%d/environ", pid);
    if ((fd = sm__open(&m->ctx, path)) < 0)
        return -1;
    n = pread(fd, m->env, sizeof m->env, 0); /* a cut read keeps its start */
    close(fd);
    return n > 0 && sm__environ_int(m->env, (size_t)n, "RANK", &r) == 0 ? r : -1;
}

int sm__pidmap_class(sm__pidmap *m, int pid, int *rank, int **aux)
{
    struct sm__pident *e = NULL, *old = &m->cache[0];
    sm__pidstat st;

    *rank = -1;
    if (aux)
        *aux = NULL;
    if (read_stat(m, pid, &st) != 0)
        return SM_PID_FOREIGN; /* not visible: its class is not kept */
    for (int i = 0; i < SM_PIDMAP_CACHE; i++) {
        struct sm__pident *c = &m->cache[i];
        if (c->seen && c->pid == pid && c->start == st.start) {
            e = c;
            break;
        }
        if (c->seen < old->seen)
            old = c;
    }
    if (!e) {
        sm__pidq *q = &m->q;
        int cls, r, need;

        q->n = 0;
        q->env_rank = SM_PID_UNREAD;
        q->chain[q->n++] = st;
        while ((cls = sm__pid_decide(m, q, &r, &need)) == SM_PID_NEED_STAT ||
               cls == SM_PID_NEED_ENV) {
            if (cls == SM_PID_NEED_ENV) {
                q->env_rank = read_env_rank(m, need);
                continue;
            }
            if (read_stat(m, need, &q->chain[q->n]) != 0) /* gone: the chain ends there */
                q->chain[q->n] = (sm__pidstat){.pid = need, .ppid = 0, .start = SM_PID_NOSTART};
            q->n++;
        }
        e = old;
        *e = (struct sm__pident){.pid = pid, .start = st.start, .cls = cls, .rank = r, .aux = -1};
    }
    e->seen = ++m->uses ? m->uses : (m->uses = 1);
    *rank = e->rank;
    if (aux)
        *aux = &e->aux;
    return e->cls;
}

int sm__pid_ranks(const sm_ctx *ctx, int ranks_max, int points_max, int ndev, char *note,
                  size_t cap)
{
    int rank0 = ctx->id.rank >= 0 ? ctx->id.rank : 0, want = 1, fit, n;

    if (ctx->all_workers && ctx->id.local_rank == 0 && ctx->id.local_world_size > 1 &&
        !ctx->id.invalid[0])
        want = ctx->id.local_world_size < ranks_max ? ctx->id.local_world_size : ranks_max;
    fit = points_max / ndev;
    n = want < fit ? want : fit;
    if (n < want)
        sm__line_join(note, cap, "gpu_*_process_memory_megabytes recorded for ranks %d..%d of "
                      "%d (at most %d points a sample)", rank0, rank0 + n - 1, rank0 + want - 1,
                      points_max);
    return n;
}
