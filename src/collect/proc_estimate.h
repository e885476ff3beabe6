/*
 * proc_estimate.h — the process tree's memory between reads of its
 * smaps_rollup (docs/design.md §9, *The estimate's rules*), as pure
 * functions: the last read's records and a snapshot of every process's
 * /proc/PID/stat in, the tree's Pss estimate and when and why to read again
 * out.  The reading (files, clocks, CPU cost) is src/collect/coll_proc.c's; nothing
 * here opens a file or reads a clock: time is an input, so tests feed it
 * numbers (tests/c/test_proc_estimate.c).
 */
#ifndef SM_PROC_ESTIMATE_H
#define SM_PROC_ESTIMATE_H

#include <stdint.h>

#include "internal.h"

/* The share of one core a steady tree's reads may take (MEM_BUDGET in
 * proc_estimate.c); coll_proc.c says it in its one line about the cost. */
#define SM__MEM_BUDGET 0.0009

/* One process of the walked tree as its /proc/PID/stat gives it now. */
typedef struct sm__pnow {
    int pid;
    int alive;             /* its stat was read (0: exited since the walk) */
    uint64_t start;        /* starttime: a reused pid is another process */
    uint64_t rss_kb;       /* resident kB (field 24 × page) */
    uint64_t flt;          /* minflt + majflt (fields 10, 12) */
} sm__pnow;

/* One process at its tree's last read (MEM_SET). */
typedef struct sm__prec {
    int pid;
    int read;              /* its smaps_rollup was read: it is in the tree's Pss */
    int seen;              /* the mark of the estimate that last found it in the tree */
    uint64_t start;        /* starttime: a reused pid is another process */
    uint64_t rss_kb, flt;  /* resident kB and faults where the read's walk passed (MEM_AT) */
    uint64_t priv_kb;      /* Private_Clean + Private_Dirty: what its exit takes away */
    uint64_t pss_kb;       /* Pss: its exit takes away at most this (MEM_DOUBT) */
    uint64_t room_kb;      /* what unsharing can still add to its Pss (MEM_UNSHARE) */
} sm__prec;

/* A tree's last read: its sums, and when the reads are spaced from. */
typedef struct sm__mread {
    double t;              /* when (monotonic s); 0: none yet, the next sample reads */
    double spaced_t;       /* the last read that cost at least MEM_SLOW: when, */
    double spaced_cost;    /* ... and its CPU s; every spacing counts from it (0: none) */
    int n;                 /* processes walked at the read (a change without records) */
    int counted;           /* processes whose memory it counted */
    int ok;                /* it counted some and the tree was resident: a base */
    uint64_t kb;           /* the tree's Pss */
    uint64_t rss_kb, flt;  /* resident kB and faults where its walks passed (MEM_AT) */
    uint64_t room_kb;      /* what unsharing can still add (MEM_UNSHARE) */
    uint64_t priv_kb;      /* Private_Clean + Private_Dirty */
} sm__mread;

/* Why the tree is read again (design.md §9, the table): the trigger whose
 * spacing passes first. */
enum sm__mem_why {
    SM__MEM_FIRST,         /* no read yet: now */
    SM__MEM_DOUBT,         /* exits may have taken more than their private pages: 10 % */
    SM__MEM_SET,           /* processes came or went: 2 % */
    SM__MEM_UNSHARE,       /* faults resident pages do not explain, past the slack: 2 % */
    SM__MEM_MOVE,          /* resident pages moved past the slack: 0.09 % */
    SM__MEM_AGE,           /* none of those: 300 s after the read, at 0.09 % */
};

/* One sample's estimate of a tree that has been read. */
typedef struct sm__mest {
    uint64_t kb;           /* the tree's Pss estimate, at most its resident kB */
    uint64_t rss_kb, flt;  /* the tree's resident kB and faults now (the live processes') */
    int changed;           /* a process came or went since the read */
    uint64_t unshared;     /* what faults added (MEM_UNSHARE) */
    uint64_t doubt;        /* what exits may have taken beyond their private pages */
    double slack;          /* max(2 % of the read's Pss, 4 MB) in kB: the documented bound */
    double next;           /* the next read: at or after this time (monotonic s), */
    int why;               /* ... for this reason (enum sm__mem_why) */
    int within;            /* no term that is only a bound is past the slack: neither
                            * exits' unknown share (MEM_DOUBT) nor faults taken for
                            * unsharing (MEM_UNSHARE) wait for their read; the estimate
                            * is held to its documented error, and a peak may take it */
} sm__mest;

/* A read of tree: begins (its sums zeroed, n processes walked at time t),
 * takes each process's record, ends with the read's CPU cost (the spacing:
 * 1 when this read sets it) and the tree's resident kB from the stats
 * before it. */
SM_HIDDEN void sm__mem_read_begin(sm__mread *m, double t, int n);
SM_HIDDEN void sm__mem_read_add(sm__mread *m, const sm__prec *r);
SM_HIDDEN int sm__mem_read_end(sm__mread *m, double cost, uint64_t rss_kb);
/* A read at time t that cost `cost` s of CPU and was not kept as the base
 * (coll_proc.c: the tree changed during it): the spacing counts from it all
 * the same (1 when it sets it). */
SM_HIDDEN int sm__mem_spent(sm__mread *m, double t, double cost);

/* Process r (its stat before the read in rss_kb and flt) read: where the walk
 * passed (MEM_AT) from the rollup's Rss (UINT64_MAX: none) and its stat after
 * the read (NULL: gone or another process), then what the rollup said: Pss,
 * the room (UINT64_MAX: no Pss_Anon, resident − Pss is taken) and the private
 * pages (UINT64_MAX: no Private_* lines, Pss is taken). */
SM_HIDDEN void sm__mem_at(sm__prec *r, uint64_t walk_rss, const sm__pnow *after,
                          uint64_t page_kb);
SM_HIDDEN void sm__mem_took(sm__prec *r, uint64_t pss, uint64_t room, uint64_t priv);

/* Records sorted by pid, as sm__mem_estimate looks them up. */
SM_HIDDEN void sm__mem_sort(sm__prec *rec, int n);

/* The estimate of a read tree (m->t > 0) from its n walked processes now
 * (cur) and its records (rec, nrec sorted by pid; nrec < 0: none fitted, the
 * tree is taken as one process), each record found marked seen = mark; the
 * trigger whose spacing passes first into e->next and e->why.  1 when the
 * tree is to be read at now (now >= e->next), else 0. */
SM_HIDDEN int sm__mem_estimate(const sm__mread *m, sm__prec *rec, int nrec, const sm__pnow *cur,
                               int n, int mark, uint64_t page_kb, double now, sm__mest *e);

#endif
