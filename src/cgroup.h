/*
 * cgroup.h — locating this process's cgroup and its limits (contract §3,
 * ../shared/spec/cgroup.md).  Implemented in cgroup.c; the pure text parsers
 * it uses are in parse_cgroup.c.
 */
#ifndef SM_CGROUP_H
#define SM_CGROUP_H

#include <stdint.h>

#include "internal.h"

typedef struct sm_cgroup {
    int version;                       /* 1 or 2 (of the memory/cpu controllers), 0 none */
    char mem_dir[SM_PATH_MAX];         /* own cgroup dir, memory controller (with sysroot) */
    char cpu_dir[SM_PATH_MAX];         /* own cgroup dir, cpu controller (v2: same as mem_dir) */
    char cpuacct_dir[SM_PATH_MAX];     /* v1 cpuacct (usage); v2: same as mem_dir */
    char mem_limit_dir[SM_PATH_MAX];   /* level with the lowest memory limit, "" none */
    char cpu_limit_dir[SM_PATH_MAX];   /* level with the lowest CPU quota, "" none */
    uint64_t mem_limit;                /* bytes, 0 = no memory limit */
    double cpu_cores;                  /* quota/period, capped by cpuset; 0 = no CPU limit */
    char why[512];                     /* how it was found / why none (one line) */
    char tag[400];                     /* value of scopemeter.rankN.cgroup */
} sm_cgroup;

/* Resolves directories and limits.  0 with mem_limit or cpu_cores set when a
 * limit exists; 0 with neither when there is none (why says so); negative
 * when the cgroup cannot be found (why says why). */
SM_HIDDEN int sm_cgroup_resolve(const sm_ctx *ctx, sm_cgroup *cg);

#endif
