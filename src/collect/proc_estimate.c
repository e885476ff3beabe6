/*
 * proc_estimate.c — the process tree's Pss between reads of its
 * smaps_rollup, and when to read it again (docs/design.md §9, the table *The
 * estimate's rules*: each MEM_* rule below is a row; the miss that earned
 * it, with its numbers, is that row's last column, not repeated here).
 * Pure: what coll_proc.c read (the last read's records, a stat snapshot of
 * every process, the time) in; the estimate, the next read's time and its
 * reason out.  Nothing here may open a file, read a clock or
 * allocate: that would make the rules testable only through a fake /proc
 * again (tests/c/test_proc_estimate.c feeds them numbers).
 */
#include <stdlib.h>

#include "proc_estimate.h"

/* MEM_BUDGET: reading smaps_rollup walks the page tables of every mapping
 * under the process's mmap read lock (fs/proc/task_mmu.c
 * show_smaps_rollup): its cost grows with resident memory (bench/README.md
 * table 9 measures it).  The tree's reads are kept within this share of
 * one core: after a read that cost T of CPU (at least MEM_SLOW: below that, every
 * sample may read), the next waits until T / MEM_BUDGET has passed.  The
 * samples in between estimate the tree's Pss from what /proc/PID/stat
 * already gives for the CPU series (MEM_ESTIMATE): no extra read, no gap in
 * the series.  0.09 % keeps the whole monitor within issue 20's 0.1 % of one
 * core at the 10 s default with a 4 GB tree (bench/README.md table 9). */
#define MEM_BUDGET SM__MEM_BUDGET
#define MEM_SLOW 0.001
/* MEM_SET's spacing: a tree whose set of processes changed (a fork shares
 * pages, an exit unshares) is read again sooner, within 2 % of one core; so
 * is one whose faults may have unshared past the slack (MEM_UNSHARE). */
#define MEM_BUDGET_CHANGE 0.02
/* MEM_DOUBT's spacing, 10 % of one core: an exit is an event, not a state
 * (a DataLoader's workers end once an epoch). */
#define MEM_BUDGET_DOUBT 0.1
/* MEM_MOVE_REL: past its spacing a tree is read only when the estimate may
 * be wrong: in a steady tree it stays right, and a read would only cost
 * (bench/README.md table 9).  A resident move beyond MEM_MOVE_REL of the last
 * Pss (the error a reader of the series can ignore), and at least
 * MEM_MOVE_KB (an interpreter's allocator breathes by a few MB in a steady
 * loop; below that the error is < 4 MB anyway), is read: the estimate's
 * error is at most the move.  The same slack bounds unsharing (MEM_UNSHARE)
 * and doubt (MEM_DOUBT). */
#define MEM_MOVE_REL 0.02
#define MEM_MOVE_KB 4096
/* MEM_MAX_AGE: what neither resident pages nor faults show (another process
 * mapping the same file pages) drifts slowly: read at least this often. */
#define MEM_MAX_AGE 300.0

/* MEM_SET: processes come and go between reads.  A page counts once in the
 * tree's Pss however many of its processes map it (each mapper 1/mapcount,
 * Documentation/filesystems/proc.rst "Pss"), so a process that exits takes
 * away only its private pages (Private_Clean + Private_Dirty of its
 * smaps_rollup at the last read); those it shared stay, moved to the other
 * mappers' Pss.  Scaling its resident pages by the tree's Pss/resident takes
 * the shared pages away too.  A process forked since shares every resident
 * page with its parent: it adds what it faulted since (its minflt and majflt
 * start at 0, kernel/fork.c copy_mm), each a page it made its own by writing
 * or newly touched, at most its resident pages.  So the estimate keeps, per
 * process of the last read, its record (sm__prec); a tree whose records do
 * not fit coll_proc.c's is estimated as one process, a change seen by its
 * count. */

/* MEM_DOUBT: an exit takes away the process's private pages (MEM_SET) and
 * also the pages it shared only with processes that exited with it: pages the
 * parent copied (wrote) or freed after forking them, still mapped by the
 * workers alone (mapcount 2 among two workers, neither's Private).  No file
 * says which: smaps_rollup gives each process's sums, not who shares a page.
 * What an exit took is between its private pages and its Pss at the read; the
 * estimate takes the private pages (the lower bound), and when the exits' Pss
 * − private passes the slack the tree is read at MEM_BUDGET_DOUBT (MEM_SET's
 * 2 % spacing held such an estimate high for seconds: DataLoader workers of a
 * parent that ran the loader's loop after forking them). */

/* MEM_UNSHARE: unsharing a copy-on-write page is a write fault in the process
 * that writes (mm/memory.c do_wp_page → wp_page_copy; a shared transparent
 * huge page is split first and one 4 kB page copied, mm/huge_memory.c
 * do_huge_pmd_wp_page), counted in its minflt (/proc/PID/stat field 10,
 * summed over its threads: fs/proc/array.c do_task_stat).  Each adds one page
 * to the tree's Pss and nothing to its resident pages.  So between reads the
 * estimate adds the faults resident pages do not explain — per process,
 * Δfaults × page − its resident growth, at most what the last read said
 * unsharing could still add to it (Anonymous − Pss_Anon of its smaps_rollup,
 * Documentation/ABI/testing/procfs-smaps_rollup; a kernel without Pss_Anon:
 * resident − Pss) — and, beyond the slack of those, reads the tree again at
 * MEM_BUDGET_CHANGE. Faults that are not unsharing (pages mapped, touched and
 * unmapped between two samples: a DataLoader's batches in shared memory) look
 * the same: the estimate is then high by at most that room until the read
 * corrects it. */

/* MEM_ESTIMATE: between reads the tree's Pss is the last read's, plus each
 * process's resident growth counted whole (new resident pages are mostly
 * memory it allocated and touched: private, each a whole page of Pss, not the
 * last ratio of one), minus its resident shrink scaled by its last
 * private/resident (what it frees is as private as it was: a page it shared
 * stays with the others), plus its unsharing (MEM_UNSHARE), plus the
 * processes forked and minus those exited (MEM_SET).  Exact to the page for
 * allocations, forks, exits (those that took more are read again, MEM_DOUBT)
 * and copy-on-write within the tree; a move it gets wrong (pages shared with
 * a process outside the tree mapped, a new program's shared libraries, faults
 * that were not unsharing) is wrong by at most that move, and one beyond the
 * slack is read again (MEM_MOVE_REL).  Pss is never above resident. */

/* MEM_AT: a read is not an instant.  The walk of a process's page tables
 * takes milliseconds per 100 MB, and a process that touches memory meanwhile
 * (an interpreter filling a buffer) has its Pss counted where the walk
 * passed, not where its stat stood before the read.  The estimate moves from
 * the read by resident pages, so taking them from that stat would count the
 * growth during the walk twice.  Each record's resident pages are the walk's
 * own (the rollup's Rss, the same walk as its Pss) kept between the stat
 * before the read and one after it: on a still process stat's counters win,
 * which lag the walk's sum by a few hundred kB. Its faults at the walk are
 * those before plus a page for each page it grew by up to there (at most
 * those after): each new page a fault, so the growth after the walk explains
 * the faults after it, which would otherwise pass for unsharing (up to the
 * room of the pages it shares).  Unsharing during the walk itself may be
 * counted or missed, by at most what unshared in those milliseconds. */

void sm__mem_read_begin(sm__mread *m, double t, int n)
{
    m->t = t;
    m->n = n;
    m->counted = 0;
    m->ok = 0;
    m->kb = m->rss_kb = m->flt = m->room_kb = m->priv_kb = 0;
}

void sm__mem_read_add(sm__mread *m, const sm__prec *r)
{
    m->rss_kb += r->rss_kb;
    m->flt += r->flt;
    if (!r->read)
        return; /* found, not counted (another user's) */
    m->counted++;
    m->kb += r->pss_kb;
    m->room_kb += r->room_kb;
    m->priv_kb += r->priv_kb;
}

int sm__mem_spent(sm__mread *m, double t, double cost)
{
    if (cost < MEM_SLOW)
        return 0; /* every sample may read: the spacing stays the last costly read's */
    m->spaced_t = t;
    m->spaced_cost = cost;
    return 1;
}

int sm__mem_read_end(sm__mread *m, double cost, uint64_t rss_kb)
{
    m->ok = m->counted > 0 && rss_kb > 0;
    return sm__mem_spent(m, m->t, cost);
}

void sm__mem_at(sm__prec *r, uint64_t walk_rss, const sm__pnow *after, uint64_t page_kb)
{
    uint64_t lo = r->rss_kb, hi = lo, at, grew;

    if (walk_rss == UINT64_MAX || !after || after->start != r->start)
        return; /* exited during the read: its next sample says so */
    if (after->rss_kb < lo)
        lo = after->rss_kb;
    else
        hi = after->rss_kb;
    at = walk_rss < lo ? lo : walk_rss > hi ? hi : walk_rss;
    grew = at > r->rss_kb ? (at - r->rss_kb) / page_kb : 0;
    r->flt = r->flt + grew < after->flt ? r->flt + grew : after->flt;
    r->rss_kb = at;
}

void sm__mem_took(sm__prec *r, uint64_t pss, uint64_t room, uint64_t priv)
{
    r->read = 1;
    r->pss_kb = pss;
    /* private pages: without the two lines, Pss (what is freed is then as
     * shared as the process was) */
    r->priv_kb = priv == UINT64_MAX ? pss : priv;
    /* a kernel without Pss_Anon (older than the split of Pss): resident − Pss */
    r->room_kb = room != UINT64_MAX ? room : r->rss_kb > pss ? r->rss_kb - pss : 0;
}

static int by_pid(const void *a, const void *b)
{
    int x = ((const sm__prec *)a)->pid, y = ((const sm__prec *)b)->pid;

    return (x > y) - (x < y);
}

void sm__mem_sort(sm__prec *rec, int n)
{
    if (n > 1)
        qsort(rec, (size_t)n, sizeof *rec, by_pid);
}

/* What one process (or a tree without records, as one) moved the tree's Pss
 * by since the read (MEM_ESTIMATE): resident growth whole, a shrink as
 * private as it was, and the faults the growth does not explain, within its
 * room (MEM_UNSHARE), which are added to *unshared too. */
static double moved(const sm__prec *r, uint64_t rss_kb, uint64_t flt, uint64_t page_kb,
                    uint64_t *unshared)
{
    uint64_t f = flt > r->flt ? (flt - r->flt) * page_kb : 0;
    double d;

    if (rss_kb >= r->rss_kb) {
        d = (double)(rss_kb - r->rss_kb);
        f = f > rss_kb - r->rss_kb ? f - (rss_kb - r->rss_kb) : 0;
    } else { /* stat's resident and the rollup's private may disagree by a page */
        d = -(double)(r->rss_kb - rss_kb) *
            (r->priv_kb < r->rss_kb ? (double)r->priv_kb / (double)r->rss_kb : 1.0);
    }
    f = f < r->room_kb ? f : r->room_kb;
    *unshared += f;
    return d + (double)f;
}

/* The tree's Pss now, in kB (MEM_ESTIMATE, MEM_SET), with e's changed,
 * unshared and doubt. */
static uint64_t estimate(const sm__mread *m, sm__prec *rec, int nrec, const sm__pnow *cur, int n,
                         int mark, uint64_t page_kb, sm__mest *e)
{
    double est = (double)m->kb;

    if (nrec < 0) { /* no records: the tree as one process, a change by its count */
        sm__prec one = {.rss_kb = m->rss_kb, .flt = m->flt, .priv_kb = m->priv_kb,
                        .room_kb = m->room_kb};
        e->changed = n != m->n;
        est += moved(&one, e->rss_kb, e->flt, page_kb, &e->unshared);
        return est <= 0 ? 0 : est >= (double)e->rss_kb ? e->rss_kb : (uint64_t)est;
    }
    for (int i = 0; i < n; i++) {
        sm__prec key = {.pid = cur[i].pid}, *r;

        if (!cur[i].alive)
            continue;
        r = nrec > 0 ? bsearch(&key, rec, (size_t)nrec, sizeof *rec, by_pid) : NULL;
        if (r && r->start == cur[i].start) {
            r->seen = mark;
            if (r->read)
                est += moved(r, cur[i].rss_kb, cur[i].flt, page_kb, &e->unshared);
            continue;
        }
        /* forked since the read (a reused pid too): what it faulted since */
        e->changed = 1;
        est += (double)(cur[i].flt * page_kb < cur[i].rss_kb ? cur[i].flt * page_kb
                                                             : cur[i].rss_kb);
    }
    for (int j = 0; j < nrec; j++)
        if (rec[j].seen != mark) { /* exited: its private pages go */
            e->changed = 1;
            if (rec[j].read) {
                est -= (double)rec[j].priv_kb;
                e->doubt += rec[j].pss_kb > rec[j].priv_kb ? rec[j].pss_kb - rec[j].priv_kb : 0;
            }
        }
    return est <= 0 ? 0 : est >= (double)e->rss_kb ? e->rss_kb : (uint64_t)est;
}

/* The reason whose time comes first replaces the one so far; they are
 * offered from the least specific (the age) to the most (doubt), and on a tie
 * the later offered wins, so the age is the reason only when nothing else
 * called for a read. */
static void sooner(sm__mest *e, int why, double t)
{
    if (t <= e->next) {
        e->next = t;
        e->why = why;
    }
}

int sm__mem_estimate(const sm__mread *m, sm__prec *rec, int nrec, const sm__pnow *cur, int n,
                     int mark, uint64_t page_kb, double now, sm__mest *e)
{
    double spaced = m->spaced_cost, age;
    uint64_t move;

    *e = (sm__mest){.next = 0, .why = SM__MEM_FIRST};
    for (int i = 0; i < n; i++)
        if (cur[i].alive) {
            e->rss_kb += cur[i].rss_kb;
            e->flt += cur[i].flt;
        }
    if (m->t <= 0)
        return 1; /* no read yet, or a sibling's tree found again */
    e->kb = estimate(m, rec, nrec, cur, n, mark, page_kb, e);
    e->slack = MEM_MOVE_REL * (double)m->kb > MEM_MOVE_KB ? MEM_MOVE_REL * (double)m->kb
                                                          : MEM_MOVE_KB;
    move = e->rss_kb > m->rss_kb ? e->rss_kb - m->rss_kb : m->rss_kb - e->rss_kb;
    /* MEM_MAX_AGE: no reason but time (m->t + 300 s, and its spacing) */
    age = m->t + MEM_MAX_AGE;
    e->next = m->spaced_t + spaced / MEM_BUDGET > age ? m->spaced_t + spaced / MEM_BUDGET : age;
    e->why = SM__MEM_AGE;
    if ((double)move > e->slack)
        sooner(e, SM__MEM_MOVE, m->spaced_t + spaced / MEM_BUDGET);
    if ((double)e->unshared > e->slack)
        sooner(e, SM__MEM_UNSHARE, m->spaced_t + spaced / MEM_BUDGET_CHANGE);
    if (e->changed)
        sooner(e, SM__MEM_SET, m->spaced_t + spaced / MEM_BUDGET_CHANGE);
    if ((double)e->doubt > e->slack)
        sooner(e, SM__MEM_DOUBT, m->spaced_t + spaced / MEM_BUDGET_DOUBT);
    /* MEM_PEAK: a peak is read as a fact (the tree held this much): it takes
     * reads and estimates held to the slack.  Growth, shrink, forks and exits
     * of private pages are measured moves, exact for allocations (an OOM kill
     * between reads ends a growth the reads never saw); what exits took
     * beyond their private pages, and faults counted as unsharing, are only
     * bounds until the read they call for (the 867.9 MB for a tree
     * that peaked at 849: 3 children's writes with faults that were not all
     * unsharing, and 639.2 for 533 after their exits). */
    e->within = (double)e->doubt <= e->slack && (double)e->unshared <= e->slack;
    return now >= e->next;
}
