/*
 * test_proc_estimate.c — the process tree's memory estimate and its reads
 * (src/collect/proc_estimate.c, docs/design.md §9 *The estimate's rules*) fed
 * numbers, as the parsers are: one test a rule (its estimate term and its
 * read-again trigger), then the CI failures each rule was earned by, with
 * the numbers CI saw, each run with the rule as it was before (which must
 * miss the test's Pss by more than the documented bound, as CI saw) and as
 * it is (which must not).  No file, no clock: the time is a number.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "proc_estimate.h"

#define PAGE 4 /* kB */

/* The documented bound (design.md §9): max(2 % of Pss, 4 MB) + the series'
 * 0.1 MB rounding, in kB. */
static double bound_kb(double pss_kb)
{
    double b = 0.02 * pss_kb > 4096 ? 0.02 * pss_kb : 4096;

    return b + 0.1e6 / 1024;
}

static double mb(double kb)
{
    return kb * 1024 / 1e6;
}

/* A tree as the last read left it: records sorted by pid. */
struct fix {
    sm__mread m;
    sm__prec rec[16];
    int nrec;
    int mark;              /* the sample number (records seen at the read carry it) */
};

/* One process read: pid, its stat (resident kB, faults) and its rollup. */
struct proc {
    int pid;
    uint64_t rss_kb, flt, pss, priv, room;
};

/* The read of procs at time t that cost `cost` s of CPU (each walk saw its
 * stat: a still tree). */
static void read_tree(struct fix *f, const struct proc *p, int n, double t, double cost)
{
    uint64_t rss = 0;

    f->mark++;
    sm__mem_read_begin(&f->m, t, n);
    for (int i = 0; i < n; i++) {
        sm__prec r = {.pid = p[i].pid, .seen = f->mark, .start = 1000 + (uint64_t)p[i].pid,
                      .rss_kb = p[i].rss_kb, .flt = p[i].flt};

        sm__mem_took(&r, p[i].pss, p[i].room, p[i].priv);
        sm__mem_read_add(&f->m, &r);
        f->rec[i] = r;
        rss += p[i].rss_kb;
    }
    f->nrec = n;
    sm__mem_sort(f->rec, n);
    sm__mem_read_end(&f->m, cost, rss);
}

/* A sample at time t: the processes' stats now (start 1000 + pid unless
 * given), the estimate; returns whether it reads. */
static int sample_at(struct fix *f, const struct proc *p, int n, double t, sm__mest *e)
{
    sm__pnow cur[16];

    for (int i = 0; i < n; i++)
        cur[i] = (sm__pnow){.pid = p[i].pid, .alive = 1, .start = 1000 + (uint64_t)p[i].pid,
                            .rss_kb = p[i].rss_kb, .flt = p[i].flt};
    f->mark++;
    return sm__mem_estimate(&f->m, f->rec, f->nrec, cur, n, f->mark, PAGE, t, e);
}

/* A parent of 100 MB (60 MB private) and a forked child sharing 40 MB with it. */
static const struct proc TWO[] = {
    {.pid = 10, .rss_kb = 100000, .flt = 25000, .pss = 80000, .priv = 60000, .room = 20000},
    {.pid = 11, .rss_kb = 41000, .flt = 100, .pss = 21000, .priv = 1000, .room = 20000},
};

/* No read yet: read now, the reason says so. */
static void test_first(void)
{
    struct fix f = {0};
    sm__mest e;

    CHECK_EQ_INT(sample_at(&f, TWO, 2, 5.0, &e), 1);
    CHECK_EQ_INT(e.why, SM__MEM_FIRST);
    CHECK_EQ_INT((int)e.rss_kb, 141000);
}

/* MEM_ESTIMATE, MEM_MAX_AGE, MEM_BUDGET: a still tree is its read, read
 * again only 300 s later (its spacing, T/0.0009, being shorter), and the
 * estimate is within its bound meanwhile. */
static void test_steady(void)
{
    struct fix f = {0};
    sm__mest e;

    read_tree(&f, TWO, 2, 10.0, 0.01);
    CHECK_EQ_INT(sample_at(&f, TWO, 2, 20.0, &e), 0);
    CHECK_EQ_INT((int)e.kb, 101000);
    CHECK_EQ_INT(e.why, SM__MEM_AGE);
    CHECK_NEAR(e.next, 310.0, 1e-9);
    CHECK_EQ_INT(e.within, 1);
    CHECK_EQ_INT(sample_at(&f, TWO, 2, 310.0, &e), 1);
    /* a read that cost 0.5 s: its spacing, 555.6 s, is past the age */
    read_tree(&f, TWO, 2, 10.0, 0.5);
    CHECK_EQ_INT(sample_at(&f, TWO, 2, 400.0, &e), 0);
    CHECK_NEAR(e.next, 10.0 + 0.5 / 0.0009, 1e-6);
    CHECK_EQ_INT(e.why, SM__MEM_AGE);
    /* a read under MEM_SLOW (1 ms) leaves the spacing where the last costly
     * one put it */
    read_tree(&f, TWO, 2, 20.0, 0.0005);
    CHECK_NEAR(f.m.spaced_t, 10.0, 0);
    CHECK_NEAR(f.m.spaced_cost, 0.5, 0);
}

/* MEM_ESTIMATE: growth counted whole; a shrink as private as the process
 * was; MEM_MOVE_REL: a move past max(2 % of Pss, 4 MB) is read at the
 * 0.09 % spacing, a smaller one is not. */
static void test_growth_and_shrink(void)
{
    struct fix f = {0};
    struct proc p[2];
    sm__mest e;

    read_tree(&f, TWO, 2, 10.0, 0.01);
    memcpy(p, TWO, sizeof p);
    p[0].rss_kb += 4000; /* 1000 pages, 1000 faults: allocated */
    p[0].flt += 1000;
    CHECK_EQ_INT(sample_at(&f, p, 2, 11.0, &e), 0);
    CHECK_EQ_INT((int)e.kb, 105000);
    CHECK_EQ_INT((int)e.unshared, 0); /* the growth explains the faults */
    CHECK_EQ_INT(e.why, SM__MEM_AGE);
    p[0].rss_kb += 2000; /* 6000 kB moved: past the 4096 floor */
    p[0].flt += 500;
    CHECK_EQ_INT(sample_at(&f, p, 2, 11.0, &e), 0);
    CHECK_EQ_INT((int)e.kb, 107000);
    CHECK_EQ_INT(e.why, SM__MEM_MOVE);
    CHECK_NEAR(e.next, 10.0 + 0.01 / 0.0009, 1e-9);
    CHECK_EQ_INT(e.within, 1); /* growth is measured (MEM_PEAK) */
    CHECK_EQ_INT(sample_at(&f, p, 2, 10.0 + 0.01 / 0.0009, &e), 1);
    /* the parent frees 10 MB: 60 % of it private, so Pss drops by 6 MB */
    memcpy(p, TWO, sizeof p);
    p[0].rss_kb -= 10000;
    CHECK_EQ_INT(sample_at(&f, p, 2, 11.0, &e), 0);
    CHECK_EQ_INT((int)e.kb, 101000 - 6000);
}

/* MEM_UNSHARE: faults resident pages do not explain are pages unshared,
 * at most the room the read saw; past the slack, read at the 2 % spacing. */
static void test_unshare(void)
{
    struct fix f = {0};
    struct proc p[2];
    sm__mest e;

    read_tree(&f, TWO, 2, 10.0, 0.01);
    memcpy(p, TWO, sizeof p);
    p[1].flt += 500; /* 2 MB written in the child, resident flat */
    CHECK_EQ_INT(sample_at(&f, p, 2, 10.2, &e), 0);
    CHECK_EQ_INT((int)e.kb, 103000);
    CHECK_EQ_INT((int)e.unshared, 2000);
    CHECK_EQ_INT(e.why, SM__MEM_AGE);
    p[1].flt += 10000; /* 40 MB of faults, 20 MB of room: 20 MB */
    CHECK_EQ_INT(sample_at(&f, p, 2, 10.2, &e), 0);
    CHECK_EQ_INT((int)e.kb, 121000);
    CHECK_EQ_INT((int)e.unshared, 20000);
    CHECK_EQ_INT(e.why, SM__MEM_UNSHARE);
    CHECK_NEAR(e.next, 10.0 + 0.01 / 0.02, 1e-9);
    CHECK_EQ_INT(sample_at(&f, p, 2, 10.5, &e), 1);
}

/* MEM_SET: a process forked since adds what it faulted (at most its
 * resident); one gone takes its private pages; a reused pid is both; a
 * change is read at the 2 % spacing. */
static void test_set(void)
{
    struct fix f = {0};
    struct proc p[3];
    sm__pnow cur[3];
    sm__mest e;

    read_tree(&f, TWO, 2, 10.0, 0.01);
    memcpy(p, TWO, sizeof TWO);
    p[2] = (struct proc){.pid = 12, .rss_kb = 100000, .flt = 3000}; /* 12 MB its own */
    CHECK_EQ_INT(sample_at(&f, p, 3, 10.1, &e), 0);
    CHECK_EQ_INT((int)e.kb, 113000);
    CHECK_EQ_INT(e.changed, 1);
    CHECK_EQ_INT(e.why, SM__MEM_SET);
    CHECK_NEAR(e.next, 10.5, 1e-9);
    CHECK_EQ_INT(e.within, 1); /* so is a fork (MEM_PEAK) */
    /* the child exits: its 1000 kB private go; its shared 20 MB stay */
    CHECK_EQ_INT(sample_at(&f, TWO, 1, 10.05, &e), 0);
    CHECK_EQ_INT((int)e.kb, 100000);
    CHECK_EQ_INT((int)e.doubt, 20000); /* Pss − private: what it may have taken more */
    CHECK_EQ_INT(e.why, SM__MEM_DOUBT); /* at the 10 % spacing */
    CHECK_NEAR(e.next, 10.0 + 0.01 / 0.1, 1e-9);
    /* pid 11 reused by a new process: the old one's private go, the new one's faults come */
    for (int i = 0; i < 2; i++)
        cur[i] = (sm__pnow){.pid = TWO[i].pid, .alive = 1, .start = 1000 + (uint64_t)TWO[i].pid,
                            .rss_kb = TWO[i].rss_kb, .flt = TWO[i].flt};
    cur[1].start = 7;
    cur[1].flt = 10; /* 40 kB */
    f.mark++;
    CHECK_EQ_INT(sm__mem_estimate(&f.m, f.rec, f.nrec, cur, 2, f.mark, PAGE, 10.05, &e), 0);
    CHECK_EQ_INT((int)e.kb, 101000 - 1000 + 40);
    CHECK_EQ_INT(e.changed, 1);
    /* a tree whose records did not fit: one process, a change by its count */
    f.nrec = -1;
    CHECK_EQ_INT(sample_at(&f, TWO, 2, 10.1, &e), 0);
    CHECK_EQ_INT(e.changed, 0);
    CHECK_EQ_INT((int)e.kb, 101000);
    CHECK_EQ_INT(sample_at(&f, TWO, 1, 10.1, &e), 0);
    CHECK_EQ_INT(e.changed, 1);
}

/* Pss is never above resident. */
static void test_cap(void)
{
    struct fix f = {0};
    struct proc p[1] = {{.pid = 10, .rss_kb = 50000, .flt = 10, .pss = 50000, .priv = 50000,
                         .room = 0}};
    sm__mest e;

    read_tree(&f, p, 1, 10.0, 0.01);
    p[0].rss_kb = 20000; /* then another 1000 faults counted as unshared: no room */
    p[0].flt = 1010;
    sample_at(&f, p, 1, 11.0, &e);
    CHECK_EQ_INT((int)e.kb, 20000);
}

/* MEM_AT: the record's resident pages are the walk's Rss kept between the
 * stat before and after; its faults those before plus a page a page grown,
 * at most those after; gone during the read: the stat before. */
static void test_at_walk(void)
{
    sm__prec r = {.pid = 10, .start = 5, .rss_kb = 100000, .flt = 25000};
    sm__pnow after = {.pid = 10, .alive = 1, .start = 5, .rss_kb = 140000, .flt = 35000};

    sm__mem_at(&r, 120000, &after, PAGE);
    CHECK_EQ_INT((int)r.rss_kb, 120000);
    CHECK_EQ_INT((int)r.flt, 30000);
    r = (sm__prec){.pid = 10, .start = 5, .rss_kb = 100000, .flt = 25000};
    sm__mem_at(&r, 100300, &(sm__pnow){.pid = 10, .alive = 1, .start = 5, .rss_kb = 100000,
                                       .flt = 25000}, PAGE);
    CHECK_EQ_INT((int)r.rss_kb, 100000); /* still: stat's counters win over the walk's sum */
    CHECK_EQ_INT((int)r.flt, 25000);
    sm__mem_at(&r, 120000, &(sm__pnow){.pid = 10, .alive = 1, .start = 6}, PAGE);
    CHECK_EQ_INT((int)r.rss_kb, 100000); /* another process now: kept as before */
    sm__mem_at(&r, 120000, NULL, PAGE);
    CHECK_EQ_INT((int)r.rss_kb, 100000);
    /* a kernel without Pss_Anon: room resident − Pss; without Private_*: Pss */
    sm__mem_took(&r, 60000, UINT64_MAX, UINT64_MAX);
    CHECK_EQ_INT((int)r.room_kb, 40000);
    CHECK_EQ_INT((int)r.priv_kb, 60000);
    CHECK_EQ_INT(r.read, 1);
}

/* ---- the CI failures, fed their numbers ---------------------------------- */

/* CI, test_proctree_cow's orphan test, hold d0: a parent that had just filled
 * 600 MB (of its 1 GB) read 1056.2 MB while the tree's Pss was 1012.8 MB at
 * both ends of the hold (bound 20.4 MB).  The read's walk of the filling
 * parent saw 42383 kB (43.4 MB) more than its stat before the read; the
 * estimate moved from that stat counted them again (MEM_AT).  old: the record
 * from the stat before the read. */
static double ci_1056(int old)
{
    struct fix f = {0};
    /* scopemeter; the parent (400 MB shared with the child, 600 MB filling); the child */
    struct proc p[3] = {
        {.pid = 1, .rss_kb = 9000, .flt = 2250, .pss = 6499, .priv = 6000, .room = 0},
        {.pid = 100, .rss_kb = 560000, .flt = 140000},
        {.pid = 101, .rss_kb = 391625, .flt = 300, .pss = 196312, .priv = 1000,
         .room = 195313},
    };
    sm__pnow after = {.pid = 100, .alive = 1, .start = 1100, .rss_kb = 610000,
                      .flt = 152500};
    sm__prec r = {.pid = 100, .seen = 1, .start = 1100, .rss_kb = 560000, .flt = 140000};
    sm__mest e;
    uint64_t walk = 560000 + 42383, pss;

    f.mark = 1;
    sm__mem_read_begin(&f.m, 10.0, 3);
    for (int i = 0; i < 3; i++) {
        sm__prec q = {.pid = p[i].pid, .seen = 1, .start = 1000 + (uint64_t)p[i].pid,
                      .rss_kb = p[i].rss_kb, .flt = p[i].flt};
        if (p[i].pid == 100) {
            q = r;
            if (!old)
                sm__mem_at(&q, walk, &after, PAGE);
            /* its Pss where the walk passed: 195313 shared + 5000 + the fill so far */
            sm__mem_took(&q, walk - 390625 + 195313, 0, walk - 390625);
        } else {
            sm__mem_took(&q, p[i].pss, p[i].room, p[i].priv);
        }
        sm__mem_read_add(&f.m, &q);
        f.rec[i] = q;
    }
    f.nrec = 3;
    sm__mem_sort(f.rec, 3);
    sm__mem_read_end(&f.m, 0.04, 960625);
    /* the fill done: 600 MB (585938 kB) + 5000 + the 400 MB shared, a fault a page */
    p[1].rss_kb = 390625 + 5000 + 585938;
    p[1].flt = p[1].rss_kb / PAGE;
    pss = 6499 + (195313 + 5000 + 585938) + 196312;
    CHECK_EQ_INT(sample_at(&f, p, 3, 12.0, &e), 0); /* the next read is 44 s away */
    printf("CI 1056 vs 1013 (MEM_AT, %s rule): %.1f MB estimated, the tree's Pss %.1f MB, "
           "bound %.1f MB (design.md §9: max(2 %%, 4 MB) + 0.1)\n", old ? "old" : "today's",
           mb((double)e.kb), mb((double)pss), mb(bound_kb((double)pss)));
    CHECK_NEAR(mb((double)pss), 1012.8, 0.05);
    return (double)e.kb - (double)pss;
}

static void test_ci_read_of_a_growing_process(void)
{
    double old = ci_1056(1), now = ci_1056(0);

    CHECK_NEAR(mb(old), 1056.2 - 1012.8, 0.1); /* the old rule misses as CI saw */
    CHECK(old > bound_kb(989062));
    CHECK(now >= -bound_kb(989062) && now <= bound_kb(989062));
    CHECK_NEAR(now, 0, 1);
}

/* The exits of children whose Pss was more than their private pages: until
 * a read, the estimate is the read's minus their private pages, and the
 * tree's Pss lies below it by up to the doubt.  Whether the sample at t
 * reads; old: as before MEM_DOUBT, when a change (e->changed, here) was read
 * no sooner than MEM_SET's 2 % spacing. */
static int exits_read(struct fix *f, const sm__pnow *cur, int n, double t, int old, sm__mest *e)
{
    int r = sm__mem_estimate(&f->m, f->rec, f->nrec, cur, n, ++f->mark, PAGE, t, e);

    CHECK_EQ_INT(e->changed, 1);
    return old ? t >= f->m.spaced_t + f->m.spaced_cost / 0.02 : r;
}

/* CI, test_proctree_cow's DataLoader test, hold d98: the 2 workers of a
 * torch parent joined; 324.5 MB read for a tree of 317.5 MB (bound 6.4 MB).
 * The workers had 9 MB more Pss than private pages; of it 6.8 MB was pages
 * only they mapped (the parent had run the loader's loop after forking
 * them), freed by their exits, the rest goes back to the parent.  Here the
 * read of this tree cost 27 ms and the hold began 1.5 s after it, past the
 * 2 % spacing (1.35 s); on CI's slower machine it was not (50 ms taken: 2.5
 * s), and the old rule sat on the estimate. */
static void test_ci_dataloader_exits(void)
{
    for (int old = 1; old >= 0; old--) {
        struct fix f = {0};
        struct proc p[3] = {
            {.pid = 50, .rss_kb = 600000, .flt = 150000, .pss = 307895, .priv = 250000,
             .room = 50000},
            {.pid = 51, .rss_kb = 300000, .flt = 3000, .pss = 14500, .priv = 10000,
             .room = 100000},
            {.pid = 52, .rss_kb = 300000, .flt = 3000, .pss = 14500, .priv = 10000,
             .room = 100000},
        };
        sm__pnow cur[1] = {{.pid = 50, .alive = 1, .start = 1050, .rss_kb = 600000,
                            .flt = 150000}};
        sm__mest e;
        double truth = 307895 + (9000 - 6836), T = 0.05, t = 100.0 + 1.6;
        int reads;

        read_tree(&f, p, 3, 100.0, T);
        reads = exits_read(&f, cur, 1, t, old, &e);
        printf("CI 324.5 vs 317.5 (MEM_DOUBT, %s rule): a read costing %.0f ms, the workers' "
               "exits, the sample %.1f s after the read %s; estimate %.1f MB, the tree's Pss "
               "%.1f MB (doubt %.1f MB), bound %.1f MB\n", old ? "old" : "today's", T * 1e3,
               t - 100.0, reads ? "reads" : "estimates", mb((double)e.kb), mb(truth),
               mb((double)e.doubt), mb(bound_kb(truth)));
        CHECK_NEAR(mb((double)e.kb), 324.5, 0.05);
        CHECK_NEAR(mb(truth), 317.5, 0.05);
        CHECK_EQ_INT(e.why, SM__MEM_DOUBT);
        CHECK((double)e.kb - truth > bound_kb(truth)); /* out of the bound: only a read is right */
        CHECK_EQ_INT(reads, !old);
    }
}

/* CI and here, test_proctree_cow's orphan test, hold d3: 6 children of a
 * 1 GB parent that then freed 600 MB (theirs alone, shared 6 ways) exit;
 * the estimate stays at the tree's resident pages, its cap, where Pss is
 * half that (CI: 832 MB for a 416 MB tree; 5 of 5 failed here) until a
 * read, which the old rule left to the 2 % spacing. */
static void test_ci_orphaned_pages(void)
{
    for (int old = 1; old >= 0; old--) {
        struct fix f = {0};
        /* scopemeter; the parent (c, 400 MB, shared with all 7 children, 7 MB
         * its own); the child that keeps c to the end; the 6 that exit */
        struct proc p[9] = {
            {.pid = 1, .rss_kb = 23750, .flt = 2500, .pss = 8000, .priv = 7000},
            {.pid = 100, .rss_kb = 397625, .flt = 100000, .pss = 48828 + 7000, .priv = 7000,
             .room = 300000},
            {.pid = 101, .rss_kb = 391125, .flt = 300, .pss = 48828 + 500, .priv = 500,
             .room = 300000},
        };
        sm__pnow cur[3];
        sm__mest e;
        double T = 0.15, t = 50.0 + 1.6, truth = 8000 + (195313 + 7000) + (195313 + 500);
        int reads;

        for (int c = 0; c < 6; c++) /* c 8 ways, the freed 600 MB (585938 kB) 6 ways */
            p[3 + c] = (struct proc){.pid = 102 + c, .rss_kb = 390625 + 585938 + 500, .flt = 500,
                                     .pss = 48828 + 97656 + 500, .priv = 500};
        read_tree(&f, p, 9, 50.0, T);
        for (int i = 0; i < 3; i++)
            cur[i] = (sm__pnow){.pid = p[i].pid, .alive = 1, .start = 1000 + (uint64_t)p[i].pid,
                                .rss_kb = p[i].rss_kb, .flt = p[i].flt};
        reads = exits_read(&f, cur, 3, t, old, &e);
        printf("orphaned pages 832 vs 416 (MEM_DOUBT, %s rule): the 6 exits, the sample %.1f s "
               "after a %.0f ms read %s; estimate %.1f MB (the cap, resident: %.1f MB), the "
               "tree's Pss %.1f MB, bound %.1f MB\n", old ? "old" : "today's", t - 50.0,
               T * 1e3, reads ? "reads" : "estimates", mb((double)e.kb), mb((double)e.rss_kb),
               mb(truth), mb(bound_kb(truth)));
        CHECK_EQ_INT((int)e.kb, (int)e.rss_kb);
        CHECK_NEAR(mb((double)e.kb), 832.0, 0.05);
        CHECK_NEAR(mb(truth), 416.0, 0.15);
        CHECK_EQ_INT(e.why, SM__MEM_DOUBT);
        CHECK((double)e.kb - truth > bound_kb(truth));
        CHECK_EQ_INT(reads, !old);
    }
}

/* MEM_PEAK, issue 46 item 4: a 500 MiB parent forks 3 children that
 * rewrite 100 MiB each; the tree's Pss went from 532 to 849 MB, the series
 * to 867.9 (faults past the pages unshared: the estimate's unsharing is a
 * bound until its read) and the peak tag kept 867.9.  The estimate of those
 * samples is not held to its error (within 0): the peak waits for the read;
 * growth (an allocation) and forks are measured, and a peak may take them. */
static void test_peak_takes_what_is_held_to_its_error(void)
{
    struct fix f = {0};
    /* at the read after the fork: the parent 512000 kB shared 4 ways and 7531
     * its own; each child 128000 of Pss, 384000 of room */
    struct proc p[4] = {
        {.pid = 20, .rss_kb = 519531, .flt = 130000, .pss = 135531, .priv = 7531,
         .room = 384000},
    };
    sm__mest e;
    double truth, est;

    for (int c = 1; c <= 3; c++)
        p[c] = (struct proc){.pid = 20 + c, .rss_kb = 512000, .flt = 0, .pss = 128000,
                             .room = 384000};
    read_tree(&f, p, 4, 10.0, 0.03);
    CHECK_NEAR(mb((double)f.m.kb), 532.0, 0.05);
    /* each child writes 103192 kB (25798 faults) and takes 1538 faults more */
    for (int c = 1; c <= 3; c++)
        p[c].flt = 25798 + 1538;
    CHECK_EQ_INT(sample_at(&f, p, 4, 10.5, &e), 0); /* the read is T/0.02 = 1.5 s away */
    truth = 519531 + 3 * 103192.0;
    est = (double)e.kb;
    printf("issue 46 item 4: estimate %.1f MB, the tree's Pss %.1f MB, bound %.1f MB; "
           "unshared %.1f MB past the slack %.1f MB: within %d (a peak does not take it)\n",
           mb(est), mb(truth), mb(bound_kb(truth)), mb((double)e.unshared), mb(e.slack),
           e.within);
    CHECK_NEAR(mb(est), 867.9, 0.05);
    CHECK_NEAR(mb(truth), 849.0, 0.05);
    CHECK(est - truth > bound_kb(truth)); /* the value the tree never had */
    CHECK_EQ_INT(e.why, SM__MEM_UNSHARE);
    CHECK_EQ_INT(e.within, 0);
    /* faults within the slack: held to it */
    for (int c = 1; c <= 3; c++)
        p[c].flt = 600;
    sample_at(&f, p, 4, 10.5, &e);
    CHECK_EQ_INT(e.within, 1);
    /* the children exit: their Pss beyond their private pages is a bound */
    sample_at(&f, p, 1, 10.5, &e);
    CHECK_EQ_INT(e.why, SM__MEM_DOUBT);
    CHECK_EQ_INT(e.within, 0);
    /* the parent allocates 100 MB (a move past the slack, read at T/0.0009):
     * measured, exact for an allocation, a peak may take it */
    p[0].rss_kb += 102400;
    p[0].flt += 25600;
    sample_at(&f, p, 4, 10.5, &e);
    CHECK_EQ_INT(e.why, SM__MEM_MOVE);
    CHECK_EQ_INT(e.within, 1);
    CHECK_EQ_INT((int)e.kb, 519531 + 102400 + 3 * 600 * PAGE);
}

int main(void)
{
    test_first();
    test_steady();
    test_growth_and_shrink();
    test_unshare();
    test_set();
    test_cap();
    test_at_walk();
    test_ci_read_of_a_growing_process();
    test_ci_dataloader_exits();
    test_ci_orphaned_pages();
    test_peak_takes_what_is_held_to_its_error();
    return CHECK_DONE();
}
