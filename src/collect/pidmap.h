/*
 * pidmap.h — one answer to "whose process is this?" for the collectors that
 * see other processes' memory (gpu_holders.c for NVML's pids, coll_amdgpu.c
 * for DRM fdinfo's): the class of a process, keyed by pid and start time so
 * that a reused pid is never taken for the process it numbered before.
 *
 *   own       this process or a descendant (its ppid chain reaches this
 *             process, or the own tree coll_proc.c walked lists it), or a
 *             process whose RANK (environ) is this recorder's rank
 *   rank R    another process whose RANK is R
 *   unranked  visible here, neither of the above
 *   foreign   not visible in this /proc (another pid namespace: another
 *             container, the host)
 *
 * One map a collector set (collectors.c owns it and hands it to every
 * collector through sm_ctx.pids); a collector opened alone (a unit test)
 * keeps one in its state.  The rule itself is sm__pid_decide, pure: fed the
 * stat lines (pid, ppid, start) of a process and its ancestors and its RANK,
 * it says the class or which file it needs next; sm__pidmap_class does
 * only those reads.  No other file follows a ppid chain or reads RANK from
 * an environ (tests/py/test_layers.py fails a second one).
 */
#ifndef SM_PIDMAP_H
#define SM_PIDMAP_H

#include <stdint.h>

#include "internal.h"

enum sm__pidclass {
    SM_PID_OWN,
    SM_PID_RANK,
    SM_PID_UNRANKED,
    SM_PID_FOREIGN,
    SM_PID_NEED_STAT, /* sm__pid_decide: the stat of *need is wanted */
    SM_PID_NEED_ENV,  /* sm__pid_decide: the RANK of *need's environ is wanted */
};

#define SM_PID_DEPTH 64           /* ancestors followed at most (a cycle of a fake /proc ends) */
#define SM_PID_UNREAD (-2)        /* env_rank not read yet */
#define SM_PID_NOSTART UINT64_MAX /* a stat that could not be read: the chain ends there */
#define SM_PIDMAP_CACHE 256       /* classes kept, least recently asked evicted */
#define SM_PIDMAP_TREE 4096       /* the own tree's processes kept (coll_proc.c's TREE_MAX) */

/* What /proc/PID/stat says of one process (fs/proc/array.c: ppid, field 4;
 * starttime, field 22, the same for a pid's whole life). */
typedef struct sm__pidstat {
    int pid, ppid;
    uint64_t start;
} sm__pidstat;

/* One question: what is known so far of a process and its ancestors. */
typedef struct sm__pidq {
    sm__pidstat chain[SM_PID_DEPTH]; /* chain[0] the process, chain[k+1] chain[k]'s parent */
    int n;
    int env_rank; /* SM_PID_UNREAD, -1 no RANK in its environ, else RANK */
} sm__pidq;

typedef struct sm__pidmap {
    sm_ctx ctx;             /* the sysroot, for /proc */
    int self_pid;           /* what /proc/self names; -1 unknown */
    int own_rank;           /* this recorder's rank (0 without one) */
    unsigned int uses;      /* the clock of the cache's last use */
    int ntree;              /* the own tree as coll_proc.c last walked it, sorted by pid */
    struct { int pid; uint64_t start; } tree[SM_PIDMAP_TREE];
    struct sm__pident {
        int pid, cls, rank;
        int aux;            /* one fact a user keeps with the class (gpu_holders.c:
                             * whether a /dev/nvidia* node is open); -1 unknown */
        uint64_t start;
        unsigned int seen;  /* uses when last asked; 0: free */
    } cache[SM_PIDMAP_CACHE];
    sm__pidq q;
    char env[65536];        /* /proc/PID/environ, read once a process */
} sm__pidmap;

/* The map of ctx (what /proc/self names, the rank), empty. */
SM_HIDDEN void sm__pidmap_init(sm__pidmap *m, const sm_ctx *ctx);

/* The own tree, replaced: begin, one add a live process, end (sorts). */
SM_HIDDEN void sm__pidmap_tree_begin(sm__pidmap *m);
SM_HIDDEN void sm__pidmap_tree_add(sm__pidmap *m, int pid, uint64_t start);
SM_HIDDEN void sm__pidmap_tree_end(sm__pidmap *m);

/* Pure: the class of q->chain[0] from what q holds and m's self_pid,
 * own_rank and tree (*rank: own_rank for SM_PID_OWN, R for SM_PID_RANK, else
 * -1), or SM_PID_NEED_STAT / SM_PID_NEED_ENV with *need the pid to read. */
SM_HIDDEN int sm__pid_decide(const sm__pidmap *m, const sm__pidq *q, int *rank, int *need);

/* The class of pid now (its stat is read each call: the start time keys the
 * cache), deciding it once a process; *aux, when asked, points at the
 * entry's aux (NULL for a foreign pid, whose class is not kept). */
SM_HIDDEN int sm__pidmap_class(sm__pidmap *m, int pid, int *rank, int **aux);

/* How many ranks from this recorder's on a collector records the memory
 * of, rank0 .. rank0+n-1: its own; under all_workers local rank 0's
 * collector the pod's R .. R+LOCAL_WORLD_SIZE-1 (as coll_proc.c's trees),
 * at most ranks_max, and fewer when ndev devices' points would pass
 * points_max a sample (said in note). */
SM_HIDDEN int sm__pid_ranks(const sm_ctx *ctx, int ranks_max, int points_max, int ndev,
                            char *note, size_t cap);

#endif
