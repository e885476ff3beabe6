/*
 * cmd_companion.c — `scopemeter companion --pid PID --run-id ID --tracking-uri
 * URI [--owns-run] [--rank N] [--timeout S] [--python PY [--python-path DIR]]
 * [--mlflow-client]`: the
 * recording outlives the process that records it (docs/design.md §6, §7).
 *
 * Why this exists: the Python front's monitor is a thread of the training
 * process (the C API's, of its caller).  When the kernel OOM-kills that
 * process, or a SIGKILL lands, nothing of it runs again: no end tag, and a
 * run it opened stays RUNNING for ever.  enable_system_metrics() therefore
 * starts this small process as its child, in the same cgroup.  It records
 * nothing while the parent lives; it only waits, in one poll(2):
 *
 *   - on its stdin, a pipe from the front: "stop" (a clean stop: the
 *     monitor wrote its own end tags) makes it exit at once, touching
 *     nothing.  "ended" (the front's SIGTERM path in a process that opened
 *     the run): the monitor's end is written, but a process that then dies
 *     of SIGTERM runs no atexit and MLflow leaves its run RUNNING, so it
 *     waits for the death to end the run only (no tag of the rank).  EOF is not death: a forked DataLoader worker holds the
 *     pipe's write end after the parent is gone, and a worker may exit
 *     first; EOF only stops the reading.
 *   - on a pidfd of the parent (pidfd_open(2), Linux >= 5.3, through
 *     syscall(2): the glibc 2.17 of the wheels has no wrapper): readable
 *     once the parent's thread group has exited (kernel/pid.c
 *     pidfd_poll).  ENOSYS (older kernels): getppid() once a second — the
 *     kernel reparents an orphan (kernel/exit.c, forget_original_parent).
 *
 * On the parent's death without a stop word it says what killed it: the
 * cgroup's OOM kill counter against its value at start (the container
 * collector's own end tags, src/collect/coll_container.c, opened here at start as
 * the monitor opened it: sm_oom_guard_cgroup_open), read just before the end
 * is written -- after an OOM once what was left of its process group is gone
 * (wait_tree) -- a kill counted being the reason whatever the exit status; else
 * the wait status the kernel keeps in /proc/PID/stat field 52 while the
 * parent is a zombie (read at once: readable until the parent's own parent
 * reaps it, a race it may lose, said in the tag).  Then
 * it writes the end tags the dead monitor could not (the ones the cgroup
 * itself keeps), scopemeter.rankN.ended_by and .end_reason, and, when the
 * parent opened the run and it is still RUNNING, marks it KILLED (an OOM
 * kill, a terminating signal), FAILED (another signal, a non-zero exit) or
 * FINISHED (exit 0 without a stop: os._exit(0)), with scopemeter.end_reason.
 * Over http(s) it first delivers what the parent had spooled (deliver_spool).
 * http(s) stores through the REST helpers (auth and TLS from the
 * environment, as `scopemeter run`); any other store (sqlite:, file:)
 * through `PY -m scopemeter _companion-end ...`, MLflow's own client, started
 * only now that the killed process's memory is free.  Then it exits: it
 * never outlives the job.
 *
 * Its lines go to the inherited stderr (the job's log).  Exit status: 0
 * (stopped, or the end written), 1 (the end could not be written), 2 (usage).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "internal.h"
#include "mlflow/run_end.h"
#include "mlflow/spool.h"
#include "oom_guard.h"
#include "parse.h"
#include "scopemeter_mlflow.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* one number on every architecture (asm-generic/unistd.h) */
#endif
#ifndef SYS_close_range
#define SYS_close_range 436 /* the same (asm-generic/unistd.h) */
#endif

#define MAX_TAGS (SM_TAGS_MAX + 3)

struct comp {
    int pid, rank, owns_run, client;
    int ended;                /* "ended": the monitor's end is written; only the run's is left */
    const char *run_id, *uri, *python, *pypath;
    double timeout;
    int ppid_watch;           /* the pid is this process's parent: getppid() tells */
    pid_t pgid;               /* the parent's process group, or -1 (note_parent) */
    unsigned long long start; /* its start time, ticks after boot (stat field 22) */
    void *ctr;                /* the container collector's state, or NULL */
    /* the end: tags (key, value) and the run's status */
    char keys[MAX_TAGS][96];
    char vals[MAX_TAGS][512];
    size_t ntags;
    sm_run_end end;           /* its status and reason (src/mlflow/run_end.c) */
    int ws, ws_rc;            /* the parent's wait status, or -errno (exit_status) */
};

static void usage(FILE *f)
{
    fprintf(f, "usage: scopemeter companion --pid PID --run-id RUN_ID --tracking-uri URI\n"
            "           [--owns-run] [--rank N] [--timeout S] [--python PY [--python-path DIR]]\n"
            "           [--mlflow-client]\n"
            "Internal: started by enable_system_metrics() (docs/python.md) or a C program\n"
            "(docs/monitor.md).  Watches PID; \"stop\" on stdin ends it at once.  If PID dies\n"
            "without it, writes rank N's end tags and why it died, and marks a run PID\n"
            "opened (--owns-run) KILLED, FAILED or FINISHED (docs/cli.md).\n");
}

static void add_tag(struct comp *c, const char *key, const char *value)
{
    if (c->ntags >= MAX_TAGS)
        return;
    snprintf(c->keys[c->ntags], sizeof c->keys[0], "%s", key);
    snprintf(c->vals[c->ntags], sizeof c->vals[0], "%s", value);
    c->ntags++;
}

/* /proc/PID/stat into *st, its text in buf (n bytes).  0 or -errno. */
static int read_stat(int pid, char *buf, size_t cap, ssize_t *n, sm_pid_stat *st)
{
    char path[64];
    int fd, rc;

    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    *n = read(fd, buf, cap);
    rc = *n < 0 ? -errno : sm__parse_pid_stat(buf, (size_t)*n, st);
    close(fd);
    return rc;
}

/* The parent's wait status from its zombie's /proc/PID/stat: 0, or -errno
 * (ESRCH/ENOENT: already reaped, or the pid is someone else's now; ENOENT
 * also for a kernel before 3.5). */
static int exit_status(int pid, int *status)
{
    char buf[2048];
    sm_pid_stat st;
    ssize_t n = 0;
    int rc = read_stat(pid, buf, sizeof buf, &n, &st);

    /* only a zombie's field is its exit status: a live process (a reused
     * pid) reads 0, which would say "exit 0" */
    if (rc == 0)
        rc = st.state == 'Z' || st.state == 'X' ? sm__parse_exit_code(buf, (size_t)n, status)
                                                : -ESRCH;
    return rc;
}

/* While the parent lives: its process group and start time.  After its
 * death, what is left of its tree is what of that group started after it
 * (the kernel reparents orphans and they keep their group: kernel/exit.c,
 * forget_original_parent), this process aside. */
static void note_parent(struct comp *c)
{
    char buf[2048];
    sm_pid_stat st;
    ssize_t n;

    c->pgid = getpgid(c->pid);
    if (c->pgid > 0 && read_stat(c->pid, buf, sizeof buf, &n, &st) == 0)
        c->start = st.starttime;
    else
        c->pgid = -1; /* gone already: watch() sees it */
}

/* A live process left of the parent's tree (note_parent), or 0; *count of them. */
static int left_of_tree(const struct comp *c, int *count)
{
    DIR *dir = opendir("/proc");
    struct dirent *e;
    int first = 0, self = getpid();

    *count = 0;
    while (dir && (e = readdir(dir))) {
        char buf[2048];
        sm_pid_stat st;
        ssize_t n;
        int pid = atoi(e->d_name);

        if (pid <= 0 || pid == self || getpgid(pid) != c->pgid ||
            read_stat(pid, buf, sizeof buf, &n, &st) < 0 || st.state == 'Z' ||
            st.state == 'X' || st.starttime < c->start)
            continue;
        (*count)++;
        if (!first)
            first = pid;
    }
    if (dir)
        closedir(dir);
    return first;
}

/* The parent died in an OOM: the kernel goes on killing what is left of its
 * tree, one process per failed charge (mm/memcontrol.c) -- the issue's `sh`
 * and `head`, 12 ms apart -- and those kills are the run's too.  So the end
 * (oom_kill, memory_events, the peak) is read once that is gone, as
 * `scopemeter run` waits for CMD's group (cli/supervise.c), at most until
 * deadline; each wait is one poll on a pidfd of a process left (none: a look
 * every 50 ms).  What outlives the bound is left running, said. */
static void wait_tree(const struct comp *c, unsigned long long ooms, double deadline)
{
    int pid, count, said = 0;

    while ((pid = left_of_tree(c, &count)) > 0) {
        double left = deadline - sm__now_mono();
        int fd;

        if (left <= 0) {
            fprintf(stderr, "scopemeter: companion: %d process%s of pid %d's group still "
                    "run%s; left running, the end is read now\n", count,
                    count == 1 ? "" : "es", c->pid, count == 1 ? "s" : "");
            return;
        }
        if (!said++)
            fprintf(stderr, "scopemeter: companion: pid %d died in an OOM (%llu kill%s in its "
                    "cgroup so far); waiting up to %.1f s for the %d process%s left of its "
                    "group before reading the end\n", c->pid, ooms, ooms == 1 ? "" : "s",
                    left, count, count == 1 ? "" : "es");
        fd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (fd >= 0) {
            struct pollfd p = {fd, POLLIN, 0};

            (void)poll(&p, 1, (int)(left * 1000) + 1);
            close(fd);
        } else if (errno != ESRCH) {
            struct timespec nap = {0, 50 * 1000 * 1000};
            nanosleep(&nap, NULL); /* no pidfd (before 5.3): look again */
        }
    }
}

/* What killed the parent, into reason/status and the tags.  Called at the
 * end, just before they are written: the kernel may still be killing the
 * parent's tree after the parent (an OOM kills one process per failed
 * charge), so the counters are read as late as they can be; the wait status
 * was read at the death (c->ws). */
static void judge(struct comp *c)
{
    sm_tags *t = sm__zalloc(sizeof *t);
    unsigned long long ooms = 0;
    char val[600];

    if (t && c->ctr && !c->ended) {
        sm__coll_container.tags(c->ctr, SM_TAGS_END, t);
        for (size_t i = 0; i < t->n; i++) {
            char key[96];

            if (strcmp(t->v[i].key, "oom_kill") == 0)
                ooms = strtoull(t->v[i].value, NULL, 10); /* our own "%llu" */
            snprintf(key, sizeof key, "scopemeter.rank%d.%s", c->rank, t->v[i].key);
            add_tag(c, key, t->v[i].value);
        }
    }
    sm__zfree(t);
    /* the rule scopemeter run's end follows too: src/mlflow/run_end.c */
    sm__run_end_judge(c->ws_rc, c->ws, 0, ooms, &c->end);
    if (c->ended)
        return; /* the monitor wrote the rank's end itself */
    snprintf(val, sizeof val, "scopemeter.rank%d.end_reason", c->rank);
    add_tag(c, val, c->end.reason);
    snprintf(val, sizeof val, "scopemeter.rank%d.ended_by", c->rank);
    add_tag(c, val, "companion");
}

/* The windows the dead process had moved to its spool (an outage longer
 * than its ring, docs/design.md §6 "The spool"): its files,
 * scopemeter-<run>-rank<N>-<pid>-<seq>.spool in SCOPEMETER_SPOOL_DIR, are
 * delivered as `scopemeter sync` delivers them, oldest segment first,
 * exactly once; their lock died with the process.  What the store does not
 * take within the bound stays for `scopemeter sync`, and the line says so.
 * The ring's windows died with the process: only the spool is on disk. */
static void deliver_spool(const struct comp *c, double deadline)
{
    const char *env = getenv("SCOPEMETER_SPOOL_DIR");
    const char *dir = env && *env ? env : SM_SPOOL_DIR_DEFAULT;
    struct dirent **list = NULL;
    char prefix[320];
    int n;

    snprintf(prefix, sizeof prefix, "scopemeter-%s-rank%d-%d-", c->run_id, c->rank, c->pid);
    n = scandir(dir, &list, NULL, versionsort); /* versionsort: seq 10 after seq 9 */
    for (int i = 0; i < n; i++) {
        const char *name = list[i]->d_name;
        size_t len = strlen(name);

        if (strncmp(name, prefix, strlen(prefix)) == 0 && len > 6 &&
            strcmp(name + len - 6, ".spool") == 0) {
            char path[4096], line[4200];
            double left = deadline - sm__now_mono();

            snprintf(path, sizeof path, "%s/%s", dir, name);
            if (left > 0)
                (void)sm__spool_sync_file(path, c->uri, left, line, sizeof line, NULL);
            else
                snprintf(line, sizeof line, "%s: not delivered within the bound; kept for "
                         "`scopemeter sync`", path);
            fprintf(stderr, "scopemeter: companion: %s\n", line);
        }
        free(list[i]);
    }
    free(list);
}

/* http(s): the REST helpers, each call bounded by what is left. */
static int end_rest(struct comp *c, double deadline, int *ended)
{
    char err[600], st[32] = "", text[300];
    int rc = 0, r;

    for (size_t i = 0; i < c->ntags; i++) {
        double left = deadline - sm__now_mono();

        r = sm_mlflow_set_tag(c->uri, c->run_id, c->keys[i], c->vals[i], left > 1 ? left : 1,
                              err, sizeof err);
        if (r < 0) {
            fprintf(stderr, "scopemeter: companion: could not write tag %s of run %s: %s\n",
                    c->keys[i], c->run_id, err);
            rc = r;
            if (r == -ETIMEDOUT || r == -ENOENT)
                return rc; /* the rest would fail the same way */
        }
    }
    if (!c->owns_run)
        return rc;
    r = sm_mlflow_get_run(c->uri, c->run_id, st, sizeof st, 5, err, sizeof err);
    if (r < 0) {
        fprintf(stderr, "scopemeter: companion: could not read run %s: %s\n", c->run_id, err);
        return r;
    }
    if (strcmp(st, "RUNNING") != 0)
        return rc; /* someone ended it: theirs to say */
    sm__run_end_text(&c->end, "companion", c->rank, NULL, text, sizeof text);
    (void)sm_mlflow_set_tag(c->uri, c->run_id, "scopemeter.end_reason", text, 5, err,
                            sizeof err);
    r = sm_mlflow_end_run(c->uri, c->run_id, c->end.status, 10, err, sizeof err);
    if (r < 0) {
        fprintf(stderr, "scopemeter: companion: could not mark run %s %s: %s\n", c->run_id,
                c->end.status, err);
        return r;
    }
    *ended = 1;
    return rc;
}

/* Any other store: MLflow's client in `PY -m scopemeter _companion-end`,
 * which writes the tags, then ends the run when asked and still RUNNING.
 * -c with a boot line rather than -m: the package directory the front
 * imported goes first on sys.path (a sys.path the training script changed
 * is not in the environment). */
static int end_python(struct comp *c, double deadline, int *ended)
{
    static const char boot[] =
        "import sys\n"
        "if sys.path and sys.path[0] == '':\n"
        "    del sys.path[0]\n"
        "if sys.argv[1]:\n"
        "    sys.path.insert(0, sys.argv[1])\n"
        "from scopemeter.__main__ import main\n"
        "sys.exit(main(sys.argv[2:]))\n";
    char rank[16];
    const char **argv = calloc(16 + 3 * MAX_TAGS, sizeof *argv);
    size_t a = 0;
    int status = 0, rc = -EIO;
    pid_t pid, w;

    if (!argv)
        return -ENOMEM;
    snprintf(rank, sizeof rank, "%d", c->rank);
    argv[a++] = c->python;
    argv[a++] = "-c";
    argv[a++] = boot;
    argv[a++] = c->pypath ? c->pypath : "";
    argv[a++] = "_companion-end";
    argv[a++] = "--tracking-uri";
    argv[a++] = c->uri;
    argv[a++] = "--run-id";
    argv[a++] = c->run_id;
    argv[a++] = "--rank";
    argv[a++] = rank;
    if (c->owns_run) {
        argv[a++] = "--end";
        argv[a++] = c->end.status;
    }
    argv[a++] = "--reason";
    argv[a++] = c->end.reason;
    for (size_t i = 0; i < c->ntags; i++) {
        argv[a++] = "--tag";
        argv[a++] = c->keys[i];
        argv[a++] = c->vals[i];
    }
    argv[a] = NULL;
    pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_RDONLY);

        if (fd >= 0)
            dup2(fd, STDIN_FILENO);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        signal(SIGQUIT, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        execvp(argv[0], (char *const *)argv);
        fprintf(stderr, "scopemeter: companion: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    free(argv);
    if (pid < 0)
        return -errno;
    /* bounded: a store that hangs (a locked sqlite database) must not keep
     * a process of the job alive */
    while ((w = waitpid(pid, &status, WNOHANG)) == 0 && sm__now_mono() < deadline) {
        struct timespec nap = {0, 50 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    if (w == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fprintf(stderr, "scopemeter: companion: %s did not write the end of run %s within "
                "%.0f s; stopped\n", c->python, c->run_id, c->timeout);
        return -ETIMEDOUT;
    }
    /* 0: written (and the run marked when asked); 4: written, the run was
     * no longer RUNNING and is left as it is */
    if (w > 0 && WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 4)) {
        rc = 0;
        *ended = c->owns_run && WEXITSTATUS(status) == 0;
    }
    return rc;
}

/* Closes every descriptor but stdin, stdout and stderr.  The companion
 * lives as long as its parent and may outlive it by the end's bound: a pipe
 * end it inherited (the C API spawns it from a caller whose descriptors need
 * not be O_CLOEXEC; the front's Popen closes them already) would hold that
 * pipe open, and a launcher reading it would wait for an EOF that comes only
 * with the companion.  close_range(2) (Linux >= 5.9, through syscall(2): the
 * glibc 2.17 of the wheels has no wrapper), else each entry of /proc/self/fd. */
static void close_inherited(void)
{
    DIR *dir;
    struct dirent *e;
    int fds[256], n;

    if (syscall(SYS_close_range, 3U, ~0U, 0U) == 0)
        return;
    do { /* closing while listing may skip entries: list, close, list again */
        if (!(dir = opendir("/proc/self/fd")))
            return;
        n = 0;
        while (n < (int)(sizeof fds / sizeof fds[0]) && (e = readdir(dir))) {
            int fd = atoi(e->d_name);
            if (fd > 2 && fd != dirfd(dir))
                fds[n++] = fd;
        }
        closedir(dir);
        for (int i = 0; i < n; i++)
            close(fds[i]);
    } while (n > 0);
}

/* Without a pidfd: whether the parent is gone (a zombie that is not our
 * parent still answers kill(0): it is seen once reaped). */
static int gone(const struct comp *c)
{
    if (c->ppid_watch)
        return getppid() != c->pid;
    return kill(c->pid, 0) < 0 && errno == ESRCH;
}

/* Waits for the stop word or the parent's death.  1: died; 0: stopped. */
static int watch(struct comp *c)
{
    char buf[64];
    int pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0), in_open = 1, died = 1;

    if (pidfd < 0 && errno != ENOSYS)
        return 1; /* ESRCH: gone before we looked */
    /* the parent may have died between its fork and our pidfd_open: the
     * pid would then name someone else (or no one) */
    if (c->ppid_watch && getppid() != c->pid)
        goto out;
    for (;;) {
        /* poll ignores a negative fd: stdin once it reached EOF, no pidfd */
        struct pollfd p[2] = {{in_open ? STDIN_FILENO : -1, POLLIN, 0}, {pidfd, POLLIN, 0}};
        int n = poll(p, 2, pidfd >= 0 ? -1 : 1000);

        if (n < 0 && errno != EINTR) {
            struct timespec nap = {1, 0};
            nanosleep(&nap, NULL); /* cannot happen with valid fds; never spin */
        }
        if (pidfd >= 0 ? p[1].revents != 0 : gone(c))
            goto out; /* the thread group has exited */
        if (!in_open || !(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        ssize_t r = read(STDIN_FILENO, buf, sizeof buf - 1);
        if (r > 0) {
            buf[r] = '\0';
            if (strstr(buf, "stop")) {
                died = 0;
                goto out;
            }
            if (strstr(buf, "ended")) {
                c->ended = 1; /* the SIGTERM path: wait for the death, end the run */
                if (!c->owns_run) {
                    died = 0; /* nothing of the run is this process's */
                    goto out;
                }
            }
        } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
            /* EOF: every write end closed (the parent and its forked
             * workers), or stdin is no pipe: not death; stop reading */
            in_open = 0;
        }
    }
out:
    if (pidfd >= 0)
        close(pidfd);
    return died;
}

int cmd_companion(int argc, char **argv)
{
    struct comp *c = calloc(1, sizeof *c);
    double t0;
    int i, rc = 0, ended = 0;

    if (!c) {
        fprintf(stderr, "scopemeter: out of memory\n");
        return 1;
    }
    {
        struct cli_opt opts[] = {
            {"--pid", CLI_INT, &c->pid, 1, 0x7fffffff, 0, NULL, 0},
            {"--run-id", CLI_STRING, &c->run_id, 0, 0, 0, NULL, 0},
            {"--tracking-uri", CLI_STRING, &c->uri, 0, 0, 0, NULL, 0},
            {"--owns-run", CLI_FLAG, &c->owns_run, 0, 0, 1, NULL, 0},
            {"--rank", CLI_INT, &c->rank, 0, SM_PLAN_WORKERS_MAX - 1, 0, NULL, 0},
            {"--timeout", CLI_SECONDS, &c->timeout, 1, 3600, 0, NULL, 0},
            {"--python", CLI_STRING, &c->python, 0, 0, 0, NULL, 0},
            {"--python-path", CLI_STRING, &c->pypath, 0, 0, 0, NULL, 0},
            {"--mlflow-client", CLI_FLAG, &c->client, 0, 0, 1, NULL, 0},
        };

        c->timeout = SM_STOP_TIMEOUT_DEFAULT;
        i = cli_parse("companion", argc, argv, opts, sizeof opts / sizeof opts[0], 0);
        if (i == CLI_HELP) {
            usage(stdout);
            goto out;
        }
        if (i < 0 || !c->pid || !c->run_id || !c->uri) {
            if (i >= 0)
                fprintf(stderr, "scopemeter companion: --pid, --run-id and --tracking-uri are "
                        "needed\n");
            usage(stderr);
            rc = 2;
            goto out;
        }
    }
    if (!sm_mlflow_valid_run_id(c->run_id)) {
        fprintf(stderr, "scopemeter companion: --run-id is not an MLflow run id\n");
        rc = 2;
        goto out;
    }
    /* Its job's signals are not its business: Ctrl-C reaches the whole
     * process group, a launcher may signal the group; the parent's death
     * (of that signal, or not) is what it acts on, and the stop word. */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    close_inherited();
    /* The job's memory may be no one's rss (tmpfs, /dev/shm): once the killed
     * process is gone, the next charge picks among the live processes by
     * size, and this one may be the largest left -- the end it is here to
     * write dies with it.  As scopemeter run (cli/oom_guard.c, docs/cgroup.md
     * §7): -999 where the kernel lets it (CAP_SYS_RESOURCE; still killable,
     * so a cgroup left with only this process has a victim); without it, it
     * stays at its parent's value, unsaid: raising the job's own value is
     * scopemeter run's to do for its CMD, not a watcher's for its parent. */
    (void)sm_oom_guard_lower_self();
    c->ppid_watch = getppid() == c->pid;
    note_parent(c);
    c->ctr = sm_oom_guard_cgroup_open();
    if (watch(c) == 0)
        goto out; /* a clean stop: the monitor ended itself */

    t0 = sm__now_mono();
    /* the exit status first: the zombie may be reaped at any moment */
    c->ws_rc = exit_status(c->pid, &c->ws);
    {
        unsigned long long ooms;

        /* the rest of its tree before the counters, within a quarter of the bound */
        if (!c->ended && c->pgid > 0 && sm_oom_guard_cgroup_kills(c->ctr, &ooms) == 0 && ooms > 0)
            wait_tree(c, ooms, t0 + c->timeout / 4);
    }
    {
        /* --mlflow-client: what the front ships through MLflow's client on
         * http(s) too (an auth plugin, no TLS module) the end does as well */
        int http = !c->client &&
                   (strncmp(c->uri, "http://", 7) == 0 || strncmp(c->uri, "https://", 8) == 0);
        int r;

        if (http) {
            /* half the bound at most for the spool: the end must still be written */
            deliver_spool(c, t0 + c->timeout / 2);
            judge(c);
            r = end_rest(c, t0 + c->timeout, &ended);
        }
        else if (c->python) {
            judge(c);
            r = end_python(c, t0 + c->timeout, &ended);
        } else {
            judge(c);
            fprintf(stderr, "scopemeter: companion: no --python for tracking URI %s: the end "
                    "of run %s is not written\n", c->uri, c->run_id);
            r = -EINVAL;
        }
        rc = r < 0;
        if (c->ended)
            fprintf(stderr, "scopemeter: companion: pid %d ended after its monitor's stop "
                    "(%s); run %s %s%s\n", c->pid, c->end.reason, c->run_id,
                    ended ? "marked " : r < 0 ? "not marked" : "left as it was",
                    ended ? c->end.status : "");
        else
            fprintf(stderr, "scopemeter: companion: pid %d ended without a stop (%s); rank "
                    "%d's end tags %s%s%s\n", c->pid, c->end.reason, c->rank,
                    r < 0 ? "not all written" : "written",
                    ended ? ", run marked " : "", ended ? c->end.status : "");
    }
out:
    sm_oom_guard_cgroup_close(c->ctr);
    free(c);
    return rc;
}
