/*
 * cg_driver.c — a test tool, not a test: opens the container collector for
 * this process (honouring SCOPEMETER_SYSROOT) and then obeys one command per
 * line on stdin, so a pytest can put it in a real cgroup, make things happen
 * there (an OOM kill, a removed cgroup) and read what the collector says —
 * including the end tags, which `scopemeter probe` does not show.
 *
 *   output at start:  "open RC" / "status TAG-VALUE" / "msg LINE" / "ready"
 *   sample            "point KEY VALUE" per point, then "sample RC MSG"
 *   tags start|window|end
 *                     "tag KEY VALUE" per tag, then "done"
 *   run SHELL-CMD     runs it (sh -c) as a child, waits: "exit CODE" or
 *                     "signal N"
 *   quit / EOF        closes the collector and exits 0
 * When open fails or the collector is absent, it prints the four start lines
 * and exits 0 without reading commands.  An argument names another
 * collector of the table by its name (e.g. "disk_io": tests/py/test_disk_io.py;
 * "rdma", "network": tests/vm/rdma.sh).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"

static void run(const char *cmd)
{
    int status;
    pid_t pid;

    fflush(stdout);
    pid = fork();
    if (pid < 0) {
        printf("exit -1 fork: %s\n", strerror(errno));
        return;
    }
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFSIGNALED(status))
        printf("signal %d\n", WTERMSIG(status));
    else
        printf("exit %d\n", WEXITSTATUS(status));
}

int main(int argc, char **argv)
{
    const sm_collector_ops *ops = &sm__coll_container;
    sm_ctx ctx;
    sm_opened res;
    sm_points *pts = calloc(1, sizeof *pts);
    void *state;
    char line[4096];
    int rc;

    /* the RDMA and network ones: tests/vm/rdma.sh, around real RDMA traffic */
    static const sm_collector_ops *const others[] = {&sm__coll_io, &sm__coll_rdma,
                                                     &sm__coll_network};

    for (size_t i = 0; argc > 1 && i < sizeof others / sizeof others[0]; i++)
        if (strcmp(argv[1], others[i]->name) == 0)
            ops = others[i];
    if (argc > 1 && strcmp(argv[1], ops->name) != 0) {
        fprintf(stderr, "cg_driver: unknown collector %s\n", argv[1]);
        free(pts);
        return 2;
    }
    state = calloc(1, ops->state_size);
    if (!pts || !state || sm__ctx_init(&ctx) < 0) {
        fprintf(stderr, "cg_driver: cannot start\n");
        return 2;
    }
    memset(&res, 0, sizeof res);
    rc = ops->open(state, &ctx, &res);
    printf("open %d\nstatus %s\nmsg %s\nready\n", rc, res.status, res.msg);
    fflush(stdout);
    if (rc != 0)
        goto out;
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        if (strcmp(line, "sample") == 0) {
            char msg[300] = "";
            pts->n = 0;
            rc = ops->sample(state, pts, msg, sizeof msg);
            for (size_t i = 0; rc == 0 && i < pts->n; i++)
                printf("point %s %.6f\n", pts->v[i].key, pts->v[i].value);
            printf("sample %d %s\n", rc, msg);
        } else if (strncmp(line, "tags ", 5) == 0) {
            sm_tags tags = {0};
            const char *ph = line + 5;
            if (ops->tags)
                ops->tags(state, strcmp(ph, "end") == 0      ? SM_TAGS_END
                                 : strcmp(ph, "window") == 0 ? SM_TAGS_WINDOW
                                                             : SM_TAGS_START,
                          &tags);
            for (size_t i = 0; i < tags.n; i++)
                printf("tag %s %s\n", tags.v[i].key, tags.v[i].value);
            printf("done\n");
        } else if (strncmp(line, "run ", 4) == 0) {
            run(line + 4);
        } else if (strcmp(line, "quit") == 0) {
            break;
        } else {
            printf("error unknown command\n");
        }
        fflush(stdout);
    }
    ops->close(state);
out:
    free(state);
    free(pts);
    return 0;
}
