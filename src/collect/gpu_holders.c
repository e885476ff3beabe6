/*
 * gpu_holders.c — who holds a GPU's memory (docs/gpu.md): the processes NVML
 * lists per GPU, each put in one class (pidmap.h), summed by class into
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

/* The class of an NVML pid (pidmap.h) and its rank; a pid that has no GPU
 * device open here is another container's or the host's, whatever process
 * it numbers here (the answer kept with the class, as the class is). */
static int pid_class(struct procs *pr, int pid, int *rank)
{
    int *gpu_open, cls = sm__pidmap_class(pr->map, pid, rank, &gpu_open);

    if (cls == SM_PID_FOREIGN)
        return cls;
    if (*gpu_open < 0)
        *gpu_open = has_gpu_open(pr, pid);
    if (!*gpu_open) {
        *rank = -1;
        return SM_PID_FOREIGN;
    }
    return cls;
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
        if (cls == SM_PID_OWN) {
            h.own += mb;
            rank = pr->own_rank;
        } else if (cls == SM_PID_UNRANKED) {
            h.unranked += mb;
        } else if (cls == SM_PID_FOREIGN) {
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

/* The rank, the pid map (the set's, else one of its own: pidmap.h), the
 * sysroot and its pid namespace. */
void sm__gpu_procs_open(struct procs *pr, const sm_ctx *ctx)
{
    pr->ctx = *ctx;
    pr->ctx.rec_key = NULL; /* not kept beyond open */
    pr->own_rank = ctx->id.rank >= 0 ? ctx->id.rank : 0;
    pr->rank0 = pr->own_rank;
    pr->nranks = 1;
    pr->map = ctx->pids;
    if (!pr->map) {
        sm__pidmap_init(&pr->own_map, ctx);
        pr->map = &pr->own_map;
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

/* The ranks whose gpu_i_process_memory_megabytes this collector records
 * (sm__pid_ranks), bounded so that a sample's points fit. */
void sm__gpu_procs_ranks(struct gpu *g, const sm_ctx *ctx, char *note, size_t cap)
{
    if (!g->f.processes || g->n == 0 || g->procs.own_pid_ns)
        return;
    g->procs.nranks = sm__pid_ranks(ctx, PROC_RANKS_MAX, PROC_POINTS_MAX, (int)g->n, note, cap);
}
