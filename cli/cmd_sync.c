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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "mlflow/spool.h"

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
    int first, n, bad = 0, done = 0;

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
        int rc;

        snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
        free(list[i]);
        rc = sm__spool_sync_file(path, uri, timeout, line, sizeof line);
        fprintf(rc == 0 ? stdout : stderr, "scopemeter: %s%s\n",
                rc == 0 ? "" : "warning: ", line);
        if (rc == 0)
            done++;
        else
            bad++;
    }
    free(list);
    printf("scopemeter: sync of %s: %d file%s delivered, %d not\n", dir, done,
           done == 1 ? "" : "s", bad);
    return bad ? 1 : 0;
}
