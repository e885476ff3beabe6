/*
 * cmd_sync.c — `scopemeter sync [DIR]`: delivers what a recorder that died
 * left in its spool (docs/design.md §6, "The spool"; docs/cli.md) to each
 * file's run, exactly once (the commit in each file moves after every batch
 * the store took), one line per file.  A damaged file (truncated, corrupt)
 * delivers what reads and is renamed aside (*.damaged), never removed; a file
 * of another version or not a spool file is one line and left; a file a live
 * recorder holds (flock) is skipped with a line: that recorder replays it.
 * Nothing not delivered counts as delivered.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "mlflow/mlflow_rest.h"
#include "mlflow/spool.h"
#include "scopemeter_mlflow.h"

/* The recorders whose files this sync read: one end check each. */
#define WRITERS_MAX 64
struct writer {
    char run[SM_SPOOL_RUN_MAX + 1];
    int rank;
    long pid;
};

static void note_writer(struct writer *w, int *n, const sm_spool_header *h)
{
    for (int i = 0; i < *n; i++)
        if (w[i].rank == h->rank && w[i].pid == (long)h->pid && strcmp(w[i].run, h->run) == 0)
            return;
    if (*n == WRITERS_MAX)
        return; /* the next sync ends the rest */
    snprintf(w[*n].run, sizeof w[*n].run, "%s", h->run);
    w[*n].rank = h->rank;
    w[*n].pid = (long)h->pid;
    ++*n;
}

/* A recorder killed (kill -9, a node's OOM killer) never ends the run it
 * opened: it stays RUNNING.  Its spool files, unlocked, say it is gone.  The
 * run is ended KILLED here only when it is still RUNNING, its
 * scopemeter.owner tag names this very writer (the process that would have
 * ended it: a run another process opened, an attached one, is that
 * process's to end, and a companion ends the Python front's itself), and no
 * process of that pid lives here (docs/cli.md).  0, or < 0 when ending
 * failed (said). */
static int end_orphan(const char *uri, const struct writer *w, double timeout)
{
    char status[32], owner[256], want[64], reason[256], err[600];

    if (kill((pid_t)w->pid, 0) == 0 || errno != ESRCH)
        return 0; /* a process of that pid lives: not known gone */
    if (sm__mlflow_run_status_tag(uri, w->run, "scopemeter.owner", status, sizeof status, owner,
                                  sizeof owner, timeout, err, sizeof err) < 0) {
        fprintf(stderr, "scopemeter: warning: run %s: cannot read its status to end it: %s\n",
                w->run, err);
        return -1;
    }
    if (strcmp(status, "RUNNING") != 0)
        return 0;
    snprintf(want, sizeof want, "rank=%d pid=%ld", w->rank, w->pid);
    if (strcmp(owner, want) != 0) {
        printf("scopemeter: run %s is RUNNING; left as it is: its owner is %s%s%s, not the "
               "recorder whose spool this was (rank %d, pid %ld)\n", w->run,
               owner[0] ? "" : "not a scopemeter run (no scopemeter.owner tag)",
               owner[0] ? "scopemeter.owner=" : "", owner, w->rank, w->pid);
        return 0;
    }
    snprintf(reason, sizeof reason, "KILLED by scopemeter sync: its recorder (rank %d, pid %ld) "
             "was gone and had left it RUNNING", w->rank, w->pid);
    /* the run's tag only: the rank's end tags (ended_by) are for the one
     * that writes the rank's end, which sync cannot (docs/design.md §3) */
    if (sm_mlflow_set_tag(uri, w->run, "scopemeter.end_reason", reason, timeout, err,
                          sizeof err) < 0 ||
        sm_mlflow_end_run(uri, w->run, "KILLED", timeout, err, sizeof err) < 0) {
        fprintf(stderr, "scopemeter: warning: run %s: cannot end it: %s\n", w->run, err);
        return -1;
    }
    printf("scopemeter: run %s: its recorder (rank %d, pid %ld) is gone and had left it "
           "RUNNING: ended KILLED (scopemeter.end_reason says so)\n", w->run, w->rank, w->pid);
    return 0;
}

static int spool_name(const struct dirent *e)
{
    size_t n = strlen(e->d_name);

    return n > 6 && strcmp(e->d_name + n - 6, ".spool") == 0;
}

int cmd_sync(int argc, char **argv)
{
    const char *env_dir = getenv("SCOPEMETER_SPOOL_DIR");
    const char *dir = env_dir && *env_dir ? env_dir : SM_SPOOL_DIR_DEFAULT;
    const char *uri = getenv("MLFLOW_TRACKING_URI");
    double timeout = 30;
    struct dirent **list = NULL;
    struct cli_opt opts[] = {
        {"--timeout", CLI_SECONDS, &timeout, 1, 86400, 0, NULL, 0},
    };
    int first, n, bad = 0, done = 0, nw = 0, unended = 0;
    struct writer writers[WRITERS_MAX];

    first = cli_parse("sync", argc, argv, opts, sizeof opts / sizeof opts[0], 1);
    if (first == CLI_HELP) {
        printf("usage: scopemeter sync [--timeout S] [DIR]\n\n"
               "Delivers the spool files a recorder left in DIR (default SCOPEMETER_SPOOL_DIR,\n"
               "else " SM_SPOOL_DIR_DEFAULT ") to their runs at MLFLOW_TRACKING_URI (http or\n"
               "https), exactly once, and removes each file once delivered; a damaged\n"
               "file delivers what reads and is kept as FILE.damaged; one line per\n"
               "file.  --timeout: how long one batch is retried while the server does not\n"
               "answer (default 30 s).  Exit 0 when every file was delivered.\n");
        return 0;
    }
    if (first < 0)
        return 2;
    if (first < argc)
        dir = argv[first];
    if (first + 1 < argc) {
        fprintf(stderr, "scopemeter sync: one directory at most, got '%s' too\n",
                argv[first + 1]);
        return 2;
    }
    if (!uri || (strncmp(uri, "http://", 7) != 0 && strncmp(uri, "https://", 8) != 0)) {
        /* a local store has no REST endpoint: `mlflow server` on it has */
        fprintf(stderr, "scopemeter sync: MLFLOW_TRACKING_URI must be an http(s) tracking "
                "server%s%s; for a local store, run `mlflow server --backend-store-uri` on it "
                "and point MLFLOW_TRACKING_URI there\n", uri ? ", got " : " (unset)",
                uri ? uri : "");
        return 2;
    }
    n = scandir(dir, &list, spool_name, versionsort);
    if (n < 0 && errno == ENOENT && first >= argc) {
        /* the recorders' own directory, made at their first spooled point:
         * absent means no recorder ever spooled here.  A DIR named on the
         * command line that does not exist is a mistake: said, exit 1. */
        printf("scopemeter: sync of %s: no spool directory, nothing to deliver\n", dir);
        return 0;
    }
    if (n < 0) {
        fprintf(stderr, "scopemeter sync: cannot read %s: %m\n", dir);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        char path[4096], line[2048];
        sm_spool_header h;
        int rc;

        snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
        free(list[i]);
        rc = sm__spool_sync_file(path, uri, timeout, line, sizeof line, &h);
        fprintf(rc == 0 ? stdout : stderr, "scopemeter: %s%s\n",
                rc == 0 ? "" : "warning: ", line);
        if (rc == 0)
            done++;
        else
            bad++;
        if (h.run[0])
            note_writer(writers, &nw, &h);
    }
    free(list);
    for (int i = 0; i < nw; i++) /* a run not ended is exit 1 too, not a file */
        unended += end_orphan(uri, &writers[i], timeout) < 0;
    printf("scopemeter: sync of %s: %d file%s delivered, %d not\n", dir, done,
           done == 1 ? "" : "s", bad);
    return bad || unended ? 1 : 0;
}
