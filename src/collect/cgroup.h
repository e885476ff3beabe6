/*
 * cgroup.h — locating this process's cgroup and its limits (docs/design.md §1,
 * docs/cgroup.md).  Implemented in cgroup.c; the
 * pure text parsers it uses are in parse_cgroup.c.
 *
 * Every *_dir below carries the sysroot prefix (it is opened as is); every
 * *_path is the cgroup path as /proc/self/cgroup names it (no sysroot, no
 * mount point), which is what the why line and the run tag show.
 */
#ifndef SM_CGROUP_H
#define SM_CGROUP_H

#include <stdint.h>

#include "internal.h"

typedef struct sm_cgroup {
    int version;                       /* 1 or 2: of the memory controller, else of cpu; 0 none */
    int mem_version;                   /* 1, 2, or 0 when no memory controller is usable */
    int cpu_version;                   /* 1, 2, or 0 when no cpu controller is usable */
    char path[SM_PATH_MAX];            /* own cgroup path (memory's, else cpu's) */
    char mem_dir[SM_PATH_MAX];         /* own cgroup dir, memory controller (with sysroot) */
    char cpu_dir[SM_PATH_MAX];         /* own cgroup dir, cpu controller (v2: same as mem_dir) */
    char cpuacct_dir[SM_PATH_MAX];     /* v1 cpuacct (usage); v2: same as cpu_dir */
    char mem_limit_dir[SM_PATH_MAX];   /* level with the lowest memory limit, "" none */
    char mem_limit_path[SM_PATH_MAX];  /* the same level as a cgroup path */
    char cpu_limit_dir[SM_PATH_MAX];   /* level whose limit gives cpu_cores, "" none */
    char cpu_limit_path[SM_PATH_MAX];
    char cpu_usage_dir[SM_PATH_MAX];   /* where CPU usage is read (v1: cpuacct hierarchy);
                                          "" when no usage file can be had */
    char cpu_usage_why[400];           /* why cpu_usage_dir is "" (a limit, no usage) */
    char cpu_quota_dir[SM_PATH_MAX];   /* level with the lowest quota (its cpu.stat has the
                                          throttling counters), "" none */
    uint64_t mem_limit;                /* bytes, 0 = no memory limit */
    double cpu_cores;                  /* quota/period, capped by cpuset; 0 = no CPU limit */
    double cpu_quota_cores;            /* lowest quota/period alone, 0 none */
    uint64_t cpu_quota_us;             /* that quota and its period as the kernel gives them */
    uint64_t cpu_period_us;            /* (cpu.max, cpu.cfs_quota_us/_period_us), 0 none */
    unsigned cpuset_cpus;              /* CPUs the process may use (cpuset/affinity), 0 unknown */
    unsigned host_cpus;                /* the host's online CPUs, 0 unknown */
    char why[512];                     /* how it was found / why none (one line) */
    char tag[400];                     /* value of scopemeter.rankN.cgroup */
    /* block I/O (coll_io.c): v2 io.stat or v1 blkio.*, at the limiting level */
    int io_version;                    /* 1 (blkio), 2 (io), 0 when none is usable */
    char io_dir[SM_PATH_MAX];          /* the level read, with sysroot; "" none */
    char io_path[SM_PATH_MAX];         /* the same level as a cgroup path */
    char io_why[400];                  /* which level and why, or why none */
} sm_cgroup;

/* Resolves directories and limits.  0 with mem_limit or cpu_cores set when a
 * limit exists; 0 with neither when there is none (why says so); negative
 * when the cgroup cannot be found or a file cannot be read or parsed (why
 * says which, tag is "none: <reason>"). */
SM_HIDDEN int sm__cgroup_resolve(const sm_ctx *ctx, sm_cgroup *cg);

#endif
