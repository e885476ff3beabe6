/*
 * test_pidmap.c — whose process is this (src/collect/pidmap.c): the rule
 * sm__pid_decide fed stat lines and RANK values as numbers, then
 * sm__pidmap_class over a fake /proc (a temporary sysroot) for what only
 * the reads can show: a pid reused by another process is decided anew, the
 * own tree coll_proc.c feeds counts only for the process it listed, a pid
 * this /proc does not show is foreign.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "pidmap.h"

static sm__pidmap map; /* 200 kB: not on the stack */

static void reset(int self_pid, int own_rank)
{
    memset(&map, 0, sizeof map);
    map.self_pid = self_pid;
    map.own_rank = own_rank;
}

/* Runs the rule as sm__pidmap_class does, answering its questions from the
 * table (pid, ppid, start, RANK; -1 none); a pid not in it is unreadable.
 * Returns the class; *asked counts the questions. */
struct proc { int pid, ppid; uint64_t start; int rank; };

static int decide(const struct proc *t, size_t nt, int pid, int *rank, int *asked)
{
    sm__pidq q = {.n = 0, .env_rank = SM_PID_UNREAD};
    int cls, need = pid;

    *asked = 0;
    for (;;) {
        const struct proc *p = NULL;
        if (q.n == 0 || (cls = sm__pid_decide(&map, &q, rank, &need)) == SM_PID_NEED_STAT) {
            for (size_t i = 0; i < nt; i++)
                if (t[i].pid == need)
                    p = &t[i];
            if (q.n == 0 && !p)
                return sm__pid_decide(&map, &q, rank, &need); /* not visible */
            q.chain[q.n++] = p ? (sm__pidstat){p->pid, p->ppid, p->start}
                               : (sm__pidstat){need, 0, SM_PID_NOSTART};
        } else if (cls == SM_PID_NEED_ENV) {
            for (size_t i = 0; i < nt; i++)
                if (t[i].pid == need)
                    q.env_rank = t[i].rank;
        } else {
            return cls;
        }
        (*asked)++;
    }
}

static void test_rule(void)
{
    /* 100 this process; 101 its DataLoader worker, 102 the worker's child
     * (no RANK: the chain says whose); 200 rank 1; 300 no RANK, not below
     * 100; 400 RANK 0 but not below 100 (a second launcher's rank 0) */
    static const struct proc t[] = {
        {1, 0, 1, -1},      {50, 1, 10, -1},    {100, 50, 20, 0}, {101, 100, 30, -1},
        {102, 101, 40, -1}, {200, 50, 21, 1},   {201, 200, 31, 1}, {300, 1, 22, -1},
        {400, 1, 23, 0},
    };
    size_t nt = sizeof t / sizeof t[0];
    int rank, asked;

    reset(100, 0);
    /* the tree's own: this process itself, at once */
    CHECK_EQ_INT(decide(t, nt, 100, &rank, &asked), SM_PID_OWN);
    CHECK_EQ_INT(rank, 0);
    CHECK_EQ_INT(asked, 1);
    /* the own rank found through the ppid chain: 102 -> 101 -> 100, no RANK read */
    CHECK_EQ_INT(decide(t, nt, 102, &rank, &asked), SM_PID_OWN);
    CHECK_EQ_INT(rank, 0);
    CHECK_EQ_INT(asked, 3);
    /* another rank: its chain ends at init without this process, then RANK */
    CHECK_EQ_INT(decide(t, nt, 201, &rank, &asked), SM_PID_RANK);
    CHECK_EQ_INT(rank, 1);
    CHECK_EQ_INT(asked, 5); /* 201, 200, 50, 1, environ */
    CHECK_EQ_INT(decide(t, nt, 300, &rank, &asked), SM_PID_UNRANKED);
    CHECK_EQ_INT(rank, -1);
    CHECK_EQ_INT(decide(t, nt, 400, &rank, &asked), SM_PID_OWN); /* RANK is ours */
    CHECK_EQ_INT(rank, 0);
    /* foreign: this /proc does not show it */
    CHECK_EQ_INT(decide(t, nt, 999, &rank, &asked), SM_PID_FOREIGN);
    CHECK_EQ_INT(rank, -1);
    /* an ancestor that is gone: the chain ends there, RANK decides */
    {
        static const struct proc orphan[] = {{600, 599, 50, 3}};
        CHECK_EQ_INT(decide(orphan, 1, 600, &rank, &asked), SM_PID_RANK);
        CHECK_EQ_INT(rank, 3);
        CHECK_EQ_INT(asked, 3); /* 600, 599 (unreadable), environ */
    }
    /* a cycle (a fake /proc) ends at SM_PID_DEPTH ancestors */
    {
        static const struct proc loop[] = {{700, 701, 5, -1}, {701, 700, 5, -1}};
        CHECK_EQ_INT(decide(loop, 2, 700, &rank, &asked), SM_PID_UNRANKED);
        CHECK_EQ_INT(asked, SM_PID_DEPTH + 1);
    }

    /* the tree coll_proc.c fed: 101 (start 30) is own, so is a child of
     * it, without following the chain to 100 */
    reset(-1, 0); /* /proc/self unknown: only the tree says own */
    sm__pidmap_tree_begin(&map);
    sm__pidmap_tree_add(&map, 101, 30);
    sm__pidmap_tree_add(&map, 100, 20);
    sm__pidmap_tree_end(&map);
    CHECK_EQ_INT(decide(t, nt, 102, &rank, &asked), SM_PID_OWN);
    CHECK_EQ_INT(asked, 2); /* 102, then 101 is in the tree */
    /* a reused pid: the tree's 101 started at 30; a 101 that started at 35
     * is another process, not the tree's */
    {
        static const struct proc reused[] = {{101, 1, 35, -1}, {1, 0, 1, -1}};
        CHECK_EQ_INT(decide(reused, 2, 101, &rank, &asked), SM_PID_UNRANKED);
    }
}

/* ---- sm__pidmap_class over a fake /proc ------------------------------------ */

static char root[256];

static void put(const char *rel, const char *text, size_t len)
{
    char path[512], dir[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        mkdir(dir, 0755);
        *p = '/';
    }
    f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(2);
    }
    fwrite(text, 1, len, f);
    fclose(f);
}

/* /proc/PID/stat (as tests/py/test_amdgpu.py writes it) and environ */
static void proc(int pid, int ppid, unsigned start, int rank)
{
    char rel[64], text[512], env[64];
    int n;

    snprintf(rel, sizeof rel, "proc/%d/stat", pid);
    n = snprintf(text, sizeof text, "%d (python3) S %d %d %d 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 "
                 "1 0 %u 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n",
                 pid, ppid, pid, pid, start);
    put(rel, text, (size_t)n);
    snprintf(rel, sizeof rel, "proc/%d/environ", pid);
    n = rank >= 0 ? snprintf(env, sizeof env, "PATH=/usr/bin%cRANK=%d%c", 0, rank, 0)
                  : snprintf(env, sizeof env, "PATH=/usr/bin%c", 0);
    put(rel, env, (size_t)n);
}

static void test_reads(void)
{
    char self[300];
    sm_ctx ctx;
    int rank, *aux;

    snprintf(root, sizeof root, "%s/pidmap-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        exit(2);
    }
    proc(1, 0, 1, -1);
    proc(100, 1, 20, 0);
    proc(101, 100, 30, -1);
    proc(300, 1, 22, -1);
    snprintf(self, sizeof self, "%s/proc/self", root);
    CHECK_EQ_INT(symlink("100", self), 0);
    memset(&ctx, 0, sizeof ctx);
    snprintf(ctx.sysroot, sizeof ctx.sysroot, "%s", root);
    ctx.id.rank = 0;
    sm__pidmap_init(&map, &ctx);
    CHECK_EQ_INT(map.self_pid, 100);

    /* the tree's own, through the chain */
    CHECK_EQ_INT(sm__pidmap_class(&map, 101, &rank, &aux), SM_PID_OWN);
    CHECK_EQ_INT(rank, 0);
    CHECK(aux && *aux == -1);
    *aux = 1; /* a user's fact, kept with the class */
    CHECK_EQ_INT(sm__pidmap_class(&map, 300, &rank, NULL), SM_PID_UNRANKED);
    /* foreign: no /proc/999 here */
    CHECK_EQ_INT(sm__pidmap_class(&map, 999, &rank, &aux), SM_PID_FOREIGN);
    CHECK(aux == NULL && rank == -1);

    /* kept: 300's environ now says RANK=2, but the same process was decided */
    proc(300, 1, 22, 2);
    CHECK_EQ_INT(sm__pidmap_class(&map, 300, &rank, NULL), SM_PID_UNRANKED);
    /* a reused pid: 300 is now another process (start 90, RANK=2): decided anew */
    proc(300, 1, 90, 2);
    CHECK_EQ_INT(sm__pidmap_class(&map, 300, &rank, NULL), SM_PID_RANK);
    CHECK_EQ_INT(rank, 2);
    /* 101 reused by a process of rank 3 not below this one: not own, and its
     * aux is not the old process's */
    proc(101, 1, 95, 3);
    CHECK_EQ_INT(sm__pidmap_class(&map, 101, &rank, &aux), SM_PID_RANK);
    CHECK_EQ_INT(rank, 3);
    CHECK(aux && *aux == -1);
    /* the tree fed with the old 101 (start 30) does not make the new one own */
    sm__pidmap_tree_begin(&map);
    sm__pidmap_tree_add(&map, 101, 30);
    sm__pidmap_tree_end(&map);
    proc(102, 101, 96, -1);
    CHECK_EQ_INT(sm__pidmap_class(&map, 102, &rank, NULL), SM_PID_UNRANKED);
    /* fed with the process 101 is now (start 95): its child is own */
    sm__pidmap_tree_begin(&map);
    sm__pidmap_tree_add(&map, 101, 95);
    sm__pidmap_tree_end(&map);
    proc(103, 101, 97, -1);
    CHECK_EQ_INT(sm__pidmap_class(&map, 103, &rank, NULL), SM_PID_OWN);
    CHECK_EQ_INT(rank, 0);
}

static void test_ranks(void)
{
    sm_ctx ctx;
    char note[300] = "";

    memset(&ctx, 0, sizeof ctx);
    ctx.id.rank = 8;
    ctx.id.local_rank = 0;
    ctx.id.local_world_size = 4;
    CHECK_EQ_INT(sm__pid_ranks(&ctx, 64, 512, 8, note, sizeof note), 1); /* not all_workers */
    ctx.all_workers = 1;
    CHECK_EQ_INT(sm__pid_ranks(&ctx, 64, 512, 8, note, sizeof note), 4);
    CHECK_EQ_STR(note, "");
    CHECK_EQ_INT(sm__pid_ranks(&ctx, 64, 8, 4, note, sizeof note), 2);
    CHECK_EQ_STR(note, "gpu_*_process_memory_megabytes recorded for ranks 8..9 of 11 (at most "
                       "8 points a sample)");
}

int main(void)
{
    test_rule();
    test_reads();
    test_ranks();
    return CHECK_DONE();
}
