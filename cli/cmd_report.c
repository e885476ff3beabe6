/*
 * cmd_report.c — `scopemeter report [RUN_ID] [--json] [--all] [--plot FILE.png]`.
 *
 * Why this file is small: the report has one implementation, in Python
 * (the package python/scopemeter/_report/, docs/report.md), because it reads runs
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
 *
 * The package: when this program is a bundle's (`pip install --target DIR`
 * puts it in DIR/bin and the package in DIR/scopemeter), the bundle's, put
 * first on the interpreter's sys.path and checked after the import: an
 * interpreter with another scopemeter installed (or on PYTHONPATH) must not
 * report with that one, and one without any must still work.  Otherwise the
 * interpreter's own (a venv's, PYTHONPATH's).
 *
 * Python runs BOOT with -c rather than `-m scopemeter`: both put the working
 * directory first on sys.path, so an mlflow.py (or a scopemeter/) where the
 * user stands would be imported instead; -P, which stops that, exists only
 * since 3.11 and the wheel supports 3.9.  BOOT removes that entry first.
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

/* argv after -c BOOT: MODE ("probe" or "run"), BUNDLE (a directory or ""),
 * then, for "run", `report ARGS...`.  -c puts "" (the working directory)
 * first on sys.path, unless -P/PYTHONSAFEPATH already left it out. */
static const char BOOT[] =
    "import os, sys\n"
    "if sys.path and sys.path[0] == '':\n"
    "    del sys.path[0]\n"
    "mode, bundle = sys.argv[1], sys.argv[2]\n"
    "if bundle:\n"
    "    sys.path.insert(0, bundle)\n"
    "import scopemeter\n"
    "where = os.path.dirname(os.path.dirname(os.path.realpath(scopemeter.__file__)))\n"
    "if bundle and where != os.path.realpath(bundle):\n"
    "    sys.exit('imports scopemeter from ' + where + ', not the bundle ' + bundle)\n"
    "import scopemeter._report\n"
    "if mode == 'run':\n"
    "    from scopemeter.__main__ import main\n"
    "    sys.argv = ['scopemeter'] + sys.argv[3:]\n"
    "    sys.exit(main(sys.argv[1:]))\n";

/* "a: b" or "b" into out, cut at cap (a reason line may be long: a cut one
 * still says what failed). */
static void join(char *out, size_t cap, const char *a, const char *b)
{
    int n = a ? snprintf(out, cap, "%s: %s", a, b) : snprintf(out, cap, "%s", b);

    if (n < 0)
        out[0] = '\0';
}

/* Whether `py -c PROBE` exits 0.  Its stdout goes to /dev/null; the last line
 * of its stderr (the ImportError) is kept in why[] for the one line said
 * when no candidate works: a traceback is not the user's business, its
 * reason is. */
static int can_import(const char *py, const char *bundle, char *why, size_t cap)
{
    int fds[2], status = 0, ok = 0;
    char buf[4096];
    size_t len = 0;
    ssize_t n;
    pid_t pid;

    why[0] = '\0';
    if (pipe(fds) < 0)
        return 0;
    pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return 0;
    }
    if (pid == 0) {
        int fd = open("/dev/null", O_RDWR);

        if (fd >= 0) {
            dup2(fd, STDIN_FILENO);
            dup2(fd, STDOUT_FILENO);
        }
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        execlp(py, py, "-c", BOOT, "probe", bundle, (char *)NULL);
        fprintf(stderr, "scopemeter report: cannot run %s: %s\n", py, strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    /* keep the tail: the reason is the last line of a traceback */
    while ((n = read(fds[0], buf + len, sizeof buf - 1 - len)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        len += (size_t)n;
        if (len == sizeof buf - 1) {
            memmove(buf, buf + len / 2, len - len / 2);
            len -= len / 2;
        }
    }
    close(fds[0]);
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            goto out;
    ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
out:
    buf[len] = '\0';
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        buf[--len] = '\0';
    join(why, cap, NULL, strrchr(buf, '\n') ? strrchr(buf, '\n') + 1 : buf);
    return ok;
}

/* dir of /proc/self/exe + "/" + name into out (not checked); 0 or -errno. */
static int exe_dir_join(const char *name, char *out, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *slash;

    if (n <= 0)
        return n < 0 ? -errno : -ENOENT;
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    if (!slash)
        return -ENOENT;
    *slash = '\0';
    if ((size_t)snprintf(out, cap, "%s/%s", exe, name) >= cap)
        return -ENAMETOOLONG;
    return 0;
}

/* An executable `name` beside this program; 0 or -errno. */
static int beside_exe(const char *name, char *out, size_t cap)
{
    int rc = exe_dir_join(name, out, cap);

    if (rc != 0)
        return rc;
    return access(out, X_OK) == 0 ? 0 : -errno;
}

/* The bundle this program belongs to: DIR when it runs as DIR/bin/scopemeter
 * beside DIR/scopemeter/ (pip install --target DIR), else "".  The real
 * path of the program (a symbolic link to it in /usr/local/bin finds the
 * bundle all the same). */
static void own_bundle(char out[PATH_MAX])
{
    char pkg[PATH_MAX + 64];
    char *slash;

    out[0] = '\0';
    if (exe_dir_join("../scopemeter/_report/__init__.py", pkg, sizeof pkg) != 0 ||
        access(pkg, R_OK) != 0)
        return;
    /* ".../bin/../scopemeter/_report/__init__.py" -> ".../bin/.." */
    slash = strstr(pkg, "/../scopemeter/_report/__init__.py");
    slash[3] = '\0';
    if (!realpath(pkg, out))
        out[0] = '\0';
}

static int exec_report(const char *py, const char *bundle, int argc, char **argv)
{
    char **args = calloc((size_t)argc + 6, sizeof *args);
    int rc;

    if (!args) {
        fprintf(stderr, "scopemeter report: out of memory\n");
        return 2;
    }
    args[0] = (char *)py;
    args[1] = "-c";
    args[2] = (char *)BOOT;
    args[3] = "run";
    args[4] = (char *)bundle;
    args[5] = "report";
    for (int i = 1; i < argc; i++)
        args[5 + i] = argv[i];
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
    char path[PATH_MAX + 16], why[512], last[512] = "", bundle[PATH_MAX];

    own_bundle(bundle);
    if (env && *env) {
        if (can_import(env, bundle, why, sizeof why))
            return exec_report(env, bundle, argc, argv);
        fprintf(stderr, "scopemeter report: SCOPEMETER_PYTHON=%s cannot import %s "
                        "(%s): the report is Python, %s\n", env,
                bundle[0] ? "this bundle's scopemeter" : "scopemeter",
                why[0] ? why : "no reason given",
                bundle[0] ? "it needs Python 3.9 or later with mlflow"
                          : "pip install scopemeter into that interpreter");
        return 2;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (beside_exe(names[i], path, sizeof path) != 0)
            continue;
        if (can_import(path, bundle, why, sizeof why))
            return exec_report(path, bundle, argc, argv);
        join(last, sizeof last, path, why);
    }
    if (can_import("python3", bundle, why, sizeof why))
        return exec_report("python3", bundle, argc, argv);
    if (why[0])
        join(last, sizeof last, "python3", why);
    if (bundle[0])
        fprintf(stderr, "scopemeter report: no Python that can import this bundle's scopemeter "
                        "(%s; tried SCOPEMETER_PYTHON, python3/python beside this program, "
                        "python3 on PATH%s%s): the report needs Python 3.9 or later with mlflow, "
                        "or set SCOPEMETER_PYTHON\n", bundle, last[0] ? "; " : "", last);
    else
        fprintf(stderr, "scopemeter report: no Python that can import scopemeter (tried "
                        "SCOPEMETER_PYTHON, python3/python beside this program, python3 on "
                        "PATH%s%s): pip install scopemeter, or set SCOPEMETER_PYTHON\n",
                last[0] ? "; " : "", last);
    return 2;
}
