/* capi_companion: a native program on the C API that creates its own run and
 * records into it with the companion set (sm_monitor_set_companion,
 * docs/monitor.md).  tests/py/test_companion.py drives it against a real
 * MLflow server: SIGKILLed while it records (the companion ends the run), or
 * stopped cleanly (the companion is reaped, the run left as the program left
 * it: RUNNING, since it never ends it).
 *
 *   capi_companion URI CLI MODE [NAME=VALUE]
 *
 * MODE: wait (sleep until killed), stop.  NAME=VALUE: a header a gateway in
 * front of the server asks for; the program's own calls send it through
 * SCOPEMETER_HTTP_HEADERS, unset before the monitor starts, whose sink gets
 * it from sm_monitor_set_headers only: the companion must carry it too.
 *
 * stdout: "RUN <run_id> PID <pid>", "RECORDING", then for stop "STOPPED <rc>"
 * and "DONE"; the library's lines go to stderr. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scopemeter.h"
#include "scopemeter_mlflow.h"

int main(int argc, char **argv)
{
    char exp[64], run[300], err[512];
    const char *uri, *cli, *mode;
    sm_monitor *m;
    int rc;

    char hname[128] = "", hjson[512];
    const char *hv = NULL;

    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: capi_companion URI CLI wait|stop [NAME=VALUE]\n");
        return 2;
    }
    if (argc == 5) {
        const char *eq = strchr(argv[4], '=');
        if (!eq || (size_t)(eq - argv[4]) >= sizeof hname)
            return 2;
        memcpy(hname, argv[4], (size_t)(eq - argv[4]));
        hname[eq - argv[4]] = '\0';
        hv = eq + 1;
        snprintf(hjson, sizeof hjson, "{\"%s\": \"%s\"}", hname, hv);
        setenv("SCOPEMETER_HTTP_HEADERS", hjson, 1);
    }
    uri = argv[1];
    cli = argv[2];
    mode = argv[3];
    setvbuf(stdout, NULL, _IOLBF, 0);
    if ((rc = sm_mlflow_experiment(uri, "capi-companion", NULL, exp, sizeof exp, 30, err,
                                   sizeof err)) < 0 ||
        (rc = sm_mlflow_create_run(uri, exp, "capi-companion", NULL, run, sizeof run, 30, err,
                                   sizeof err)) < 0) {
        fprintf(stderr, "run: %s (%d)\n", err, rc);
        return 1;
    }
    printf("RUN %s PID %d\n", run, (int)getpid());
    unsetenv("SCOPEMETER_HTTP_HEADERS");
    m = sm_monitor_new();
    if (!m || sm_monitor_set_interval(m, 0.5) < 0 || sm_monitor_set_samples(m, 1) < 0 ||
        sm_monitor_set_companion(m, cli, SM_COMPANION_OWNS_RUN) != -EINVAL || /* before set_run */
        sm_monitor_set_run(m, uri, run) < 0 ||
        (hv && sm_monitor_set_headers(m, (const char *const[]){hname, hv, NULL}) < 0) ||
        sm_monitor_set_companion(m, cli, 2) != -EINVAL ||                      /* unknown flag */
        (rc = sm_monitor_set_companion(m, cli, SM_COMPANION_OWNS_RUN)) < 0) {
        fprintf(stderr, "configuring the monitor failed (%d)\n", rc);
        return 1;
    }
    if ((rc = sm_monitor_start(m, err, sizeof err)) != 0) {
        fprintf(stderr, "start: %s (%d)\n", err, rc);
        return 1;
    }
    if (sm_monitor_set_companion(m, NULL, 0) != -EBUSY) { /* after start */
        fprintf(stderr, "set_companion after start was not -EBUSY\n");
        return 1;
    }
    printf("RECORDING\n");
    if (strcmp(mode, "wait") == 0) {
        sleep(120);
        return 0;
    }
    sleep(2);
    rc = sm_monitor_stop(m);
    printf("STOPPED %d\n", rc);
    sleep(1); /* the test looks for a companion while this process lives */
    sm_monitor_free(m);
    printf("DONE\n");
    return 0;
}
