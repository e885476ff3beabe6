/*
 * cmd_report.c — `scopemeter report [RUN_ID] [--json] [--plot FILE.png]`.
 *
 * Why this file is small: the report has one implementation, in Python
 * (python/scopemeter/_report.py, docs/report.md), because it reads runs
 * through MLflow's own client — every store (the local sqlite default, file:,
 * servers) and MLflow's auth plugins work there and nowhere else.  This
 * command only finds an interpreter that can import scopemeter and execs
 * `PYTHON -m scopemeter report ARGS...`, so the exit status, the output and
 * the signals are Python's own.
 *
 * The interpreter, first that can import the package:
 *   1. SCOPEMETER_PYTHON (an explicit choice: no fallback when it fails);
 *   2. python3, then python, beside this executable (/proc/self/exe): pip
 *      installs the CLI into the environment's bin/, beside its python;
 *   3. python3 on PATH.
 * None: one line saying so, exit 2.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

#define PROBE "import scopemeter._report"

/* Whether `py -c PROBE` exits 0; its output goes to /dev/null (a broken
 * candidate's traceback is not the user's business unless none works). */
static int can_import(const char *py)
{
    pid_t pid;
    int status = 0;

    pid = fork();
    if (pid < 0)
        return 0;
    if (pid == 0) {
        int fd = open("/dev/null", O_RDWR);

        if (fd >= 0) {
            dup2(fd, STDIN_FILENO);
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
        }
        execlp(py, py, "-c", PROBE, (char *)NULL);
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return 0;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* dir of /proc/self/exe + "/" + name into out; 0 or -errno. */
static int beside_exe(const char *name, char *out, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *slash;

    if (n <= 0)
        return -errno;
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    if (!slash)
        return -ENOENT;
    *slash = '\0';
    if ((size_t)snprintf(out, cap, "%s/%s", exe, name) >= cap)
        return -ENAMETOOLONG;
    return access(out, X_OK) == 0 ? 0 : -errno;
}

static int exec_report(const char *py, int argc, char **argv)
{
    char **args = calloc((size_t)argc + 4, sizeof *args);
    int rc;

    if (!args) {
        fprintf(stderr, "scopemeter report: out of memory\n");
        return 2;
    }
    args[0] = (char *)py;
    args[1] = "-m";
    args[2] = "scopemeter";
    args[3] = "report";
    for (int i = 1; i < argc; i++)
        args[3 + i] = argv[i];
    fflush(NULL);
    execvp(py, args);
    rc = errno;
    fprintf(stderr, "scopemeter report: cannot run %s: %s\n", py, strerror(rc));
    free(args);
    return 2;
}

int cmd_report(int argc, char **argv)
{
    const char *env = getenv("SCOPEMETER_PYTHON");
    static const char *const names[] = {"python3", "python"};
    char path[PATH_MAX + 16];

    if (env && *env) {
        if (can_import(env))
            return exec_report(env, argc, argv);
        fprintf(stderr, "scopemeter report: SCOPEMETER_PYTHON=%s cannot import scopemeter "
                        "(the report is Python: pip install scopemeter into that interpreter)\n",
                env);
        return 2;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (beside_exe(names[i], path, sizeof path) == 0 && can_import(path))
            return exec_report(path, argc, argv);
    if (can_import("python3"))
        return exec_report("python3", argc, argv);
    fprintf(stderr, "scopemeter report: no Python that can import scopemeter (tried "
                    "SCOPEMETER_PYTHON, python3/python beside this program, python3 on PATH): "
                    "pip install scopemeter, or set SCOPEMETER_PYTHON\n");
    return 2;
}
