/*
 * gpu_holders.c — who holds a GPU's memory (docs/gpu.md): the processes NVML
 * lists per GPU, each put in one class (enum pclass), summed by class into
 * the device's peak (the holders of gpu_memory_at_peak) and by recorded rank
 * (gpu_i_process_memory_megabytes).  NVML's pids are the driver's, i.e. the
 * host's; a pid is this container's only when /proc (through the sysroot)
 * shows it AND it has a GPU device open there (every CUDA context holds
 * /dev/nvidiactl and /dev/nvidiaN), so a host pid that happens to number
 * another process here is not taken for it.  It reads /proc only; the list
 * itself is asked of NVML by gpu_query.c, and nothing here emits a series.
 *
 * In a pid namespace of its own (a container without hostPID) no pid NVML
 * lists can be this container's: the driver knows no pid namespace and
 * always answers the host's (NVIDIA, docs/gpu.md), and nothing in a
 * container's /proc maps a host pid back (NSpid lists the namespaces from
 * the reader's down, fs/proc/array.c).  Classing them all "foreign" would
 * say "another container holds 30 GB" of the job's own memory, so there the
 * process list is not read at all: its series and the holders of the peak
 * tag are dropped in one line (sm__gpu_procs_open, sm__gpu_procs_ns_drop).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_int.h"
#include "parse.h"

/* 1 when /proc/PID/fd holds a link to a GPU device node (through the
 * sysroot): the process has a CUDA context here.  Only when a pid is new. */
static int has_gpu_open(const struct procs *pr, int pid)
{
    char dev[SM_PATH_MAX], path[64], link[SM_PATH_MAX], full[SM_PATH_MAX];
    size_t dl;

    if (sm__path(&pr->ctx, "/dev/nvidia", dev, sizeof dev) < 0)
        return 0;
    dl = strlen(dev);
    /* the fds a CUDA context opens come early; 1024 bounds the cost of a miss */
    for (int fd = 0; fd < 1024; fd++) {
        ssize_t n;
        snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
        if (sm__path(&pr->ctx, path, full, sizeof full) < 0)
            return 0;
        n = readlink(full, link, sizeof link - 1);
        if (n < 0) {
            if (errno == ENOENT)
                continue;
            return 0; /* EACCES: not ours to see */
        }
        link[n] = '\0';
        if ((size_t)n > dl && strncmp(link, dev, dl) == 0)
            return 1; /* /dev/nvidia0, /dev/nvidiactl, /dev/nvidia-uvm */
    }
    return 0;
}

/* The class of an NVML pid (and its rank for P_RANK), cached by pid and
 * start time.  Own: this process or a descendant (the ppid chain reaches
 * self); a rank: another process whose environment says RANK. */
static int pid_class(struct procs *pr, int pid, int *rank)
{
    char path[64], buf[1024];
    struct pcache_entry *e = NULL, *old = &pr->cache[0];
    sm_pid_stat st;
    ssize_t n;

    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    n = pid > 0 ? sm__read_file(&pr->ctx, path, buf, sizeof buf) : -EINVAL;
    if (n < 0 || sm__parse_pid_stat(buf, (size_t)n, &st) != 0)
        return P_FOREIGN; /* not in this pid namespace: another container, the host */
    for (int i = 0; i < PCACHE; i++) {
        struct pcache_entry *c = &pr->cache[i];
        if (c->pid == pid && c->start == st.starttime) {
            e = c;
            break;
        }
        if (c->seen < old->seen)
            old = c;
    }
    if (!e) {
        int cls = P_FOREIGN, r = -1, p = pid;
        if (has_gpu_open(pr, pid)) {
            cls = P_UNRANKED;
            for (int depth = 0; depth < 64 && p > 1; depth++) {
                sm_pid_stat a;
                if (p == pr->self_pid) {
                    cls = P_OWN;
                    break;
                }
                snprintf(path, sizeof path, "/proc/%d/stat", p);
                n = sm__read_file(&pr->ctx, path, buf, sizeof buf);
                if (n < 0 || sm__parse_pid_stat(buf, (size_t)n, &a) != 0)
                    break;
                p = a.ppid;
            }
            if (cls != P_OWN) {
                int fd;
                snprintf(path, sizeof path, "/proc/%d/environ", pid);
                fd = sm__open(&pr->ctx, path);
                if (fd >= 0) {
                    n = pread(fd, pr->env, sizeof pr->env, 0); /* a cut read keeps its start */
                    close(fd);
                    if (n > 0 && sm__environ_int(pr->env, (size_t)n, "RANK", &r) == 0)
                        cls = r == pr->own_rank ? P_OWN : P_RANK;
                }
            }
        }
        e = old;
        e->pid = pid;
        e->start = st.starttime;
        e->cls = cls;
        e->rank = r;
    }
    e->seen = pr->sample;
    *rank = e->rank;
    return e->cls;
}

/* The classes of GPU d's processes (info, count of them): by_rank (MB of
 * each recorded rank, rank0 first) and, while sampling, d's peak when its
 * used memory is the highest yet. */
void sm__gpu_holders(struct procs *pr, struct gpu_dev *d, const sm_nvml_process_info *info,
                     unsigned int count, int at_open, double *by_rank)
{
    struct held h;

    memset(&h, 0, sizeof h);
    memset(by_rank, 0, sizeof *by_rank * PROC_RANKS_MAX);
    h.used = d->used_mb;
    for (unsigned int i = 0; i < count && i < PROC_LIST; i++) {
        double mb;
        int rank = -1, cls;
        if (info[i].usedGpuMemory == ~0ull || info[i].pid == 0)
            continue; /* NVML_VALUE_NOT_AVAILABLE; no process */
        mb = (double)info[i].usedGpuMemory / 1e6;
        cls = pid_class(pr, (int)info[i].pid, &rank);
        if (cls == P_OWN) {
            h.own += mb;
            rank = pr->own_rank;
        } else if (cls == P_UNRANKED) {
            h.unranked += mb;
        } else if (cls == P_FOREIGN) {
            h.foreign += mb;
        } else {
            int j = 0;
            while (j < h.nr && h.r[j].rank != rank)
                j++;
            if (j < h.nr || h.nr < PEAK_RANKS) {
                h.r[j].rank = rank;
                h.r[j].mb += mb;
                h.nr += j == h.nr;
            } else {
                h.other += mb; /* more ranks than the tag names */
            }
        }
        if (rank >= pr->rank0 && rank < pr->rank0 + pr->nranks)
            by_rank[rank - pr->rank0] += mb;
    }
    if (!at_open && h.used >= d->peak.used && h.used > 0)
        d->peak = h;
}

/* Whether /proc (through the sysroot) shows a pid namespace of its own.
 * The host's shows the kernel's threads: pid 2 is kthreadd, whose parent is
 * no process (init/main.c, rest_init).  A container's namespace starts at
 * its own pid 1 and shows no kernel thread.  Only a /proc that has a pid 1
 * and no such pid 2 is taken for one: a fake machine's tree without pid 1
 * is a host's, as before. */
static int own_pid_ns(const sm_ctx *ctx)
{
    char buf[512];
    sm_pid_stat st;
    ssize_t n;

    if (sm__read_file(ctx, "/proc/1/stat", buf, sizeof buf) <= 0)
        return 0;
    n = sm__read_file(ctx, "/proc/2/stat", buf, sizeof buf);
    return !(n > 13 && strncmp(buf, "2 (kthreadd) ", 13) == 0 &&
             sm__parse_pid_stat(buf, (size_t)n, &st) == 0 && st.ppid == 0);
}

/* The pid of /proc/self through the sysroot (a fake /proc links it to its
 * root, as for coll_proc.c), the rank, the sysroot and its pid namespace. */
void sm__gpu_procs_open(struct procs *pr, const sm_ctx *ctx)
{
    char path[SM_PATH_MAX], link[64];
    ssize_t n;

    pr->ctx = *ctx;
    pr->ctx.rec_key = NULL; /* not kept beyond open */
    pr->own_rank = ctx->id.rank >= 0 ? ctx->id.rank : 0;
    pr->rank0 = pr->own_rank;
    pr->nranks = 1;
    pr->self_pid = -1;
    if (sm__path(ctx, "/proc/self", path, sizeof path) == 0 &&
        (n = readlink(path, link, sizeof link - 1)) > 0) {
        link[n] = '\0';
        pr->self_pid = atoi(link);
    }
    pr->own_pid_ns = own_pid_ns(ctx);
}

/* In a pid namespace of its own the process list is not read (see "Who
 * holds a GPU's memory" above): its metric joins the dropped ones of every
 * device, said in one clause. */
unsigned int sm__gpu_procs_ns_drop(const struct gpu *g, char *note, size_t cap)
{
    if (!g->procs.own_pid_ns || !g->f.processes)
        return 0;
    sm__line_join(note, cap, "gpu_*_process_memory_megabytes and the holders of "
                  "gpu_memory_at_peak dropped: this process has a pid namespace of its own "
                  "(a container without hostPID) and NVML lists the host's pids, which cannot "
                  "be mapped into it");
    return BIT(M_PROC_MEM);
}

/* The ranks whose gpu_i_process_memory_megabytes this collector records:
 * its own; under all_workers the pod's (local rank 0's collector records
 * R .. R+LOCAL_WORLD_SIZE-1, as coll_proc.c's trees), bounded so that a
 * sample's points fit. */
void sm__gpu_procs_ranks(struct gpu *g, const sm_ctx *ctx, char *note, size_t cap)
{
    struct procs *pr = &g->procs;
    int want = 1, fit;

    if (!g->f.processes || g->n == 0 || pr->own_pid_ns)
        return;
    if (ctx->all_workers && ctx->id.local_rank == 0 && ctx->id.local_world_size > 1 &&
        !ctx->id.invalid[0])
        want = ctx->id.local_world_size < PROC_RANKS_MAX ? ctx->id.local_world_size
                                                         : PROC_RANKS_MAX;
    fit = PROC_POINTS_MAX / (int)g->n;
    pr->nranks = want < fit ? want : fit;
    if (pr->nranks < want)
        sm__line_join(note, cap, "gpu_*_process_memory_megabytes recorded for ranks %d..%d of "
                      "%d (at most %d points a sample)", pr->rank0, pr->rank0 + pr->nranks - 1,
                      pr->rank0 + want - 1, PROC_POINTS_MAX);
}
