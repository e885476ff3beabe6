/*
 * cmd_run.c — `scopemeter run [options] -- CMD ARGS...`: record system
 * metrics into an MLflow run while CMD runs, under the same run as CMD's own
 * MLflow logging, and exit with CMD's status (docs/design.md §8, docs/cli.md).
 *
 *   1. block the signals to forward (and SIGCHLD) before any thread exists,
 *      and read them from a signalfd: no work in signal handlers, and the
 *      monitor's threads never see them; SIGCHLD gets its default action
 *      and SIGPIPE is ignored (CMD gets back the dispositions it was given);
 *   2. find the run (sm_mlflow_resolve, src/mlflow/mlflow_run.c): --run-id,
 *      MLFLOW_RUN_ID, the job's run (ranks > 0 of a multi-process job find
 *      the run rank 0 created by its job id), or create one (--experiment,
 *      MLFLOW_EXPERIMENT_NAME, MLFLOW_EXPERIMENT_ID, Default);
 *   3. start the monitor (REST sink; without an http(s) tracking URI or a
 *      run, the queue sink drained into a local JSONL file — nothing is lost
 *      silently);
 *   4. fork/exec CMD with MLFLOW_RUN_ID/MLFLOW_TRACKING_URI exported and
 *      MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING removed, in a process group of
 *      its own; forward INT, TERM, HUP, QUIT, USR1, USR2 to that group until
 *      it exits (cli/supervise.c: why every signal reaches CMD exactly once);
 *      be the subreaper of CMD's tree; in an interactive run keep a
 *      sentinel in CMD's group that sees the terminal's Ctrl-C (the same);
 *      beside CMD, with a memory limit, the OOM reserve (cli/oom_guard.c);
 *   5. stop the monitor (bounded), mark a run this process owns FINISHED,
 *      FAILED or KILLED, exit with CMD's status (128+N for signal N);
 *   6. end the reserve, and say when the kernel took it.
 */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "internal.h"
#include "mlflow/run_end.h"
#include "oom_guard.h"
#include "scopemeter_mlflow.h"
#include "supervise.h"

extern char **environ;

#define DEFAULT_STARTUP_TIMEOUT 15.0

struct run_opts {
    const char *run_id;
    const char *experiment;
    const char *jsonl;
    int all_workers;
    const char *detail; /* --detail: SCOPEMETER_DETAIL for the collectors */
    double interval;
    int samples;
    double write_budget;       /* rows/s; 0: SCOPEMETER_WRITE_BUDGET, else none */
    double stop_timeout;       /* < 0: the monitor's default */
    double startup_timeout;
    int buffer_points;         /* 0: the monitor's default (one hour) */
    char **cmd;
};

struct run_state {
    const char *uri;           /* MLFLOW_TRACKING_URI when http(s), else NULL */
    char shown[512];           /* the URI, redacted */
    char run_id[300];
    int owns_run;              /* this process ends the run */
    sm_run_result resolved;    /* what sm_mlflow_resolve gave, its run check included */
    sm_identity *id;           /* sm_identity_read_env; NULL only out of memory */
    struct supervise sv;       /* signals, the terminal, reaping: cli/supervise.c */
    int collecting;            /* the monitor records: CMD gets an OOM reserve beside it */
    pid_t cmd_pid;             /* CMD, the leader of its process group; 0 before it started */
    void *cg;                  /* the job cgroup's counters (sm_oom_guard_cgroup_open), or NULL */
    unsigned long long ooms;   /* the OOM kills it counted by the end of CMD's tree */

    /* JSONL fallback (the monitor's JSONL sink writes it) */
    char jsonl_path[4096];

    /* CMD's environment and the two strings it owns */
    char **env;
    char *env_run, *env_uri;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: scopemeter run [--run-id ID | --experiment NAME] [--all-workers]\n"
            "                      [--interval S] [--samples K] [--write-budget R]\n"
            "                      [--stop-timeout S] [--startup-timeout S] [--buffer-points N]\n"
            "                      [--jsonl PATH] -- CMD [ARGS...]\n"
            "\n"
            "Records system metrics into an MLflow run while CMD runs and exits with CMD's\n"
            "status.  Tracking server: MLFLOW_TRACKING_URI (http:// or https://).  Run:\n"
            "--run-id, else MLFLOW_RUN_ID, else a new run in --experiment,\n"
            "MLFLOW_EXPERIMENT_NAME, MLFLOW_EXPERIMENT_ID or Default.  CMD gets\n"
            "MLFLOW_RUN_ID and MLFLOW_TRACKING_URI, so its own MLflow logging lands in the\n"
            "same run.\n"
            "\n"
            "  --run-id ID          attach to this run (it is not ended by scopemeter)\n"
            "  --experiment NAME    create the run in this experiment (created if missing)\n"
            "  --all-workers        every pod's local rank 0 collects (default: rank 0 only)\n"
            "  --detail full        the series of level full too: GPM, NVLink, clocks and\n"
            "                       ECC counts per GPU\n"
            "                       (as SCOPEMETER_DETAIL=full; docs/series.md \"Levels\")\n"
            "  --interval S         seconds between samples (default 10)\n"
            "  --samples K          samples averaged per logged point (default 1)\n"
            "  --write-budget R     rows/s the tracking server takes from this job, all\n"
            "                       collectors together (default SCOPEMETER_WRITE_BUDGET, else\n"
            "                       four collectors' load at 10 s); the same on every node\n"
            "  --stop-timeout S     bound on stopping and flushing after CMD exits (default 30)\n"
            "  --startup-timeout S  bound on talking to the server before CMD starts (default 15)\n"
            "  --buffer-points N    points kept while the server is unreachable, 256 to\n"
            "                       100000000 (default: one hour of points; the oldest go first)\n"
            "  --jsonl PATH         where points go when there is no http(s) tracking URI\n"
            "                       or no run (default ./scopemeter-rankN-PID.jsonl)\n"
            "\n"
            "Under torchrun (ranks share one run; see docs/cli.md):\n"
            "  torchrun --no-python ... scopemeter run --all-workers -- python train.py\n");
}

static int parse(int argc, char **argv, struct run_opts *o)
{
    int i;
    struct cli_opt opts[] = {
        {"--run-id", CLI_STRING, &o->run_id, 0, 0, 0, "run", 0},
        {"--experiment", CLI_STRING, &o->experiment, 0, 0, 0, "run", 0},
        {"--jsonl", CLI_STRING, &o->jsonl, 0, 0, 0, NULL, 0},
        {"--all-workers", CLI_FLAG, &o->all_workers, 0, 0, 1, NULL, 0},
        {"--detail", CLI_STRING, &o->detail, 0, 0, 0, NULL, 0},
        {"--interval", CLI_SECONDS, &o->interval, SM_INTERVAL_MIN, SM_INTERVAL_MAX, 0, NULL, 0},
        {"--samples", CLI_INT, &o->samples, 1, SM_SAMPLES_MAX, 0, NULL, 0},
        {"--write-budget", CLI_NUMBER, &o->write_budget, SM_WRITE_BUDGET_MIN, SM_WRITE_BUDGET_MAX,
         0, NULL, 0},
        {"--stop-timeout", CLI_SECONDS, &o->stop_timeout, 0, SM_STOP_TIMEOUT_MAX, 0, NULL, 0},
        {"--startup-timeout", CLI_SECONDS, &o->startup_timeout, 0.1, 86400, 0, NULL, 0},
        {"--buffer-points", CLI_INT, &o->buffer_points, SM_BUFFER_POINTS_MIN,
         SM_BUFFER_POINTS_MAX, 0, NULL, 0},
    };

    memset(o, 0, sizeof *o);
    o->stop_timeout = -1;
    o->startup_timeout = DEFAULT_STARTUP_TIMEOUT;
    i = cli_parse("run", argc, argv, opts, sizeof opts / sizeof opts[0], 1);
    if (i == CLI_HELP) {
        usage(stdout);
        return 1;
    }
    if (i < 0)
        return -1;
    if (o->detail &&
        (cli_detail("run", o->detail) < 0 || setenv("SCOPEMETER_DETAIL", o->detail, 1) < 0))
        return -1;
    if (i >= argc) {
        fprintf(stderr, "scopemeter run: no command given (scopemeter run [options] -- CMD ...)\n");
        return -1;
    }
    o->cmd = argv + i;
    return 0;
}

/* ---- finding the run: sm_mlflow_resolve (src/mlflow/mlflow_run.c) ---------- */
static int cancelled(void *arg)
{
    return supervise_early_signal(&((struct run_state *)arg)->sv);
}

static void resolve_run(struct run_state *st, const struct run_opts *o)
{
    sm_run_request req = SM_RUN_REQUEST_INIT;
    sm_run_result res = SM_RUN_RESULT_INIT;

    req.tracking_uri = st->uri;
    req.run_id = o->run_id;
    req.experiment = o->experiment;
    req.source_name = strrchr(o->cmd[0], '/') ? strrchr(o->cmd[0], '/') + 1 : o->cmd[0];
    req.id = st->id;
    req.timeout_s = o->startup_timeout;
    req.cancelled = cancelled;
    req.cancel_arg = st;
    if (sm_mlflow_resolve(&req, &res) == 0) {
        snprintf(st->run_id, sizeof st->run_id, "%s", res.run_id);
        st->owns_run = res.owns_run;
        st->resolved = res; /* its run check goes to the sink (sm_monitor_set_resolved) */
    }
}

/* ---- JSONL fallback ---------------------------------------------------------------- */
static void jsonl_path(struct run_state *st, const struct run_opts *o)
{
    if (o->jsonl)
        snprintf(st->jsonl_path, sizeof st->jsonl_path, "%s", o->jsonl);
    else
        snprintf(st->jsonl_path, sizeof st->jsonl_path, "scopemeter-rank%d-%ld.jsonl",
                 sm_identity_rank(st->id), (long)getpid());
}

/* ---- the child --------------------------------------------------------------------- */

/* CMD's environment: ours, with MLFLOW_RUN_ID and MLFLOW_TRACKING_URI set when
 * there is a run, and MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING removed.  0 or -1. */
static int child_env(struct run_state *st)
{
    static const char drop[] = "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING=";
    size_t n = 0, o = 0;
    int removed = 0;

    while (environ[n])
        n++;
    st->env = calloc(n + 3, sizeof *st->env);
    if (!st->env)
        return -1;
    if (st->run_id[0]) {
        size_t l1 = strlen(st->run_id) + 16, l2 = strlen(st->uri) + 24;
        st->env_run = malloc(l1);
        st->env_uri = malloc(l2);
        if (!st->env_run || !st->env_uri)
            return -1;
        snprintf(st->env_run, l1, "MLFLOW_RUN_ID=%s", st->run_id);
        snprintf(st->env_uri, l2, "MLFLOW_TRACKING_URI=%s", st->uri);
    }
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], drop, sizeof drop - 1) == 0) {
            removed = 1;
            continue;
        }
        if (st->env_run && (strncmp(environ[i], "MLFLOW_RUN_ID=", 14) == 0 ||
                            strncmp(environ[i], "MLFLOW_TRACKING_URI=", 20) == 0))
            continue;
        st->env[o++] = environ[i];
    }
    if (st->env_run) {
        st->env[o++] = st->env_run;
        st->env[o++] = st->env_uri;
    }
    st->env[o] = NULL;
    if (removed)
        fprintf(stderr, "scopemeter: removed MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING from CMD's "
                "environment: MLflow's own monitor would log unprefixed system/* keys into the "
                "same run from every process; scopemeter records them with scope-true names\n");
    return 0;
}

/* ---- the command ------------------------------------------------------------------- */
/* Whether CMD can be executed, as execvp will look for it: a name with a
 * '/' as given, else each PATH entry (unset PATH: confstr's default).  0,
 * ENOENT (not found), EISDIR (a directory) or EACCES (found, not executable).  Run before any
 * MLflow call: `scopemeter run typo` creates no run. */
static int find_cmd(const char *name)
{
    const char *path = getenv("PATH");
    char buf[4096], def[1024];
    int found_noexec = 0;

    if (!*name)
        return ENOENT;
    if (strchr(name, '/')) {
        struct stat sb;
        if (stat(name, &sb) == 0 && S_ISDIR(sb.st_mode))
            return EISDIR; /* access(X_OK) passes a directory; execve refuses it */
        return access(name, X_OK) == 0 ? 0 : errno == ENOENT || errno == ENOTDIR ? ENOENT
                                                                                 : EACCES;
    }
    if (!path) {
        if (confstr(_CS_PATH, def, sizeof def) == 0)
            snprintf(def, sizeof def, "/bin:/usr/bin");
        path = def;
    }
    while (path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        struct stat sb;
        /* an empty entry is the current directory */
        if (snprintf(buf, sizeof buf, "%.*s/%s", len ? (int)len : 1, len ? path : ".", name) <
                (int)sizeof buf &&
            stat(buf, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
            if (access(buf, X_OK) == 0)
                return 0;
            found_noexec = 1;
        }
        path = end ? end + 1 : NULL;
    }
    return found_noexec ? EACCES : ENOENT;
}

/* ---- the end of the run ---------------------------------------------------------- */

/* Ending a run we created gets a fifth of the stop bound (1 to 10 s),
 * reserved from it: the monitor's stop takes the rest, so the whole stop
 * holds the bound (docs/rest.md, Stop). */
static double end_run_reserve(double bound)
{
    return bound / 5 < 1 ? 1 : bound / 5 > 10 ? 10 : bound / 5;
}

static void end_run(const struct run_state *st, const char *run_status, double timeout_s)
{
    char err[600];

    if (sm_mlflow_end_run(st->uri, st->run_id, run_status, timeout_s, err, sizeof err) < 0)
        fprintf(stderr, "scopemeter: could not mark run %s %s: %s\n", st->run_id, run_status,
                err);
}

/* The monitor's settings first: a bad value is a usage error, found before a
 * run is created.  NULL after one line. */
static sm_monitor *new_monitor(const struct run_opts *o)
{
    sm_monitor *m = sm_monitor_new();

    if (!m) {
        fprintf(stderr, "scopemeter: out of memory\n");
        return NULL;
    }
    if ((o->interval > 0 && sm_monitor_set_interval(m, o->interval) < 0) ||
        (o->samples > 0 && sm_monitor_set_samples(m, o->samples) < 0) ||
        (o->write_budget > 0 && sm_monitor_set_write_budget(m, o->write_budget) < 0) ||
        (o->stop_timeout >= 0 && sm_monitor_set_stop_timeout(m, o->stop_timeout) < 0)) {
        /* cannot happen after parse(): the same bounds (scopemeter.h) */
        fprintf(stderr, "scopemeter run: --interval, --samples, --write-budget or --stop-timeout "
                "out of range\n");
        sm_monitor_free(m);
        return NULL;
    }
    sm_monitor_set_all_workers(m, o->all_workers);
    if (o->buffer_points > 0)
        sm_monitor_set_buffer_points(m, (size_t)o->buffer_points);
    return m;
}

/* What the start left freed on the heap goes back to the kernel: over https
 * OpenSSL's initialisation, its algorithm fetches and the run check's
 * handshake free temporaries that would otherwise stay resident for the
 * whole job (~50 kB: RssAnon 1.09 -> 1.04 MB, bench/README.md "The CLI over
 * https").  Once: the windows after it allocate and free little.  The CLI's
 * own process, so its heap is its own to trim. */
static void trim_after_start(void)
{
    malloc_trim(0);
}

/* 2 and 3. The run, then the monitor: into the run, else (nothing is lost
 * silently) a local JSONL file.  Returns 1 when collecting, 0 when not. */
static int start_recording(struct run_state *st, const struct run_opts *o, sm_monitor *m)
{
    const char *uri = getenv("MLFLOW_TRACKING_URI");
    char err[600], line[700];
    int rc;

    if (uri && *uri)
        sm_mlflow_redact_uri(uri, st->shown, sizeof st->shown);
    jsonl_path(st, o);
    if (uri && (strncasecmp(uri, "http://", 7) == 0 || strncasecmp(uri, "https://", 8) == 0)) {
        st->uri = uri;
        resolve_run(st, o);
    } else {
        if (!uri || !*uri)
            snprintf(line, sizeof line, "MLFLOW_TRACKING_URI is not set");
        else
            snprintf(line, sizeof line, "MLFLOW_TRACKING_URI is %.400s, not an http(s) tracking "
                     "server (scopemeter run ships over MLflow's REST API; the Python front "
                     "scopemeter.enable_system_metrics() logs to any store)", st->shown);
        fprintf(stderr, "scopemeter: %s: no MLflow tracking server to ship to; CMD runs as "
                "usual\n", line);
    }
    if (supervise_early_signal(&st->sv))
        return 0;

    if (st->run_id[0])
        rc = sm_monitor_set_resolved(m, st->uri, &st->resolved);
    else
        rc = sm_monitor_set_jsonl(m, st->jsonl_path);
    err[0] = '\0';
    if (rc == 0)
        rc = sm_monitor_start(m, err, sizeof err);
    if (rc == 0) {
        trim_after_start();
        if (!st->run_id[0])
            fprintf(stderr, "scopemeter: no MLflow run to record into: points go to %s "
                    "(one JSON record per line)\n", st->jsonl_path);
        return 1;
    }
    /* -ENODATA: nothing to record, SM_NOT_COLLECTING: not this rank; the
     * monitor said so in one line */
    if (rc < 0 && rc != -ENODATA)
        fprintf(stderr, "scopemeter: not recording: %s\n", err[0] ? err : strerror(-rc));
    return 0;
}

/* 4. CMD: its exit code (128+N for signal N, 125-127 when it could not be
 * started), its wait status and whether we forwarded a terminating signal. */
static int run_cmd(struct run_state *st, const struct run_opts *o, const sigset_t *orig,
                   int *status, int *forwarded_term)
{
    int exec_errno = 0;
    pid_t child;

    if (child_env(st) < 0) {
        fprintf(stderr, "scopemeter: out of memory building CMD's environment\n");
        *status = 125 << 8;
        return 125;
    }
    child = supervise_spawn(&st->sv, o->cmd, st->env, st->collecting, orig, &exec_errno);
    st->cmd_pid = child > 0 ? child : 0;
    if (child < 0) {
        fprintf(stderr, "scopemeter: cannot start %s: %s\n", o->cmd[0], strerror(exec_errno));
        *status = 125 << 8;
        return 125;
    }
    if (st->sv.tty_lent)
        supervise_watch_group(&st->sv, child);
    *status = supervise_wait(&st->sv, child, forwarded_term);
    supervise_end_sentinel(&st->sv);
    if (st->sv.group_sig)
        *forwarded_term = 1; /* the group was signalled to end: the job was killed */
    /* Orphans of CMD's tree still running when CMD exits are left running,
     * not signalled and not waited for (docs/cli.md, Signals): CMD's exit
     * ends the job for scopemeter as for a shell, and what CMD left behind
     * on purpose (a server started with nohup) goes on as it would without
     * scopemeter; when scopemeter exits they are reparented on, to the next
     * subreaper or init.  Those already dead are reaped now, so the last
     * sample does not count zombies. */
    {
        pid_t w;
        int ws;
        while ((w = waitpid(-1, &ws, WNOHANG)) > 0)
            (void)sm_oom_guard_reaped(w, ws);
    }
    if (exec_errno) {
        fprintf(stderr, "scopemeter: cannot run %s: %s\n", o->cmd[0], strerror(exec_errno));
        return exec_errno == ENOENT ? 127 : 126;
    }
    if (WIFEXITED(*status))
        return WEXITSTATUS(*status);
    if (WIFSIGNALED(*status))
        return 128 + WTERMSIG(*status);
    return 1;
}

/* A tag of the run, one line when it cannot be written. */
static void run_tag(const struct run_state *st, const char *key, const char *value, double bound)
{
    char err[600];

    if (sm_mlflow_set_tag(st->uri, st->run_id, key, value, bound, err, sizeof err) < 0)
        fprintf(stderr, "scopemeter: could not tag run %s with %s: %s\n", st->run_id, key, err);
}

/* 5. Stop, then end the run: both within the one stop bound.  A run whose
 * cgroup counted OOM kills says so as the companion's end does
 * (docs/design.md §3): scopemeter.rankN.end_reason oom_kill, and where this
 * process ends the run, scopemeter.end_reason. */
static void stop_recording(const struct run_state *st, const struct run_opts *o, sm_monitor *m,
                           int collecting, const sm_run_end *end, int exit_code)
{
    double bound = o->stop_timeout >= 0 ? o->stop_timeout : SM_STOP_TIMEOUT_DEFAULT;
    double reserve = st->owns_run ? end_run_reserve(bound) : 0, t0 = sm__now_mono();

    if (reserve > 0)
        sm_monitor_set_stop_timeout(m, bound > reserve ? bound - reserve : 0);
    if (collecting)
        sm_monitor_stop(m);
    if (st->ooms > 0 && st->run_id[0]) {
        char key[64], detail[100], text[300];
        int rank = sm_identity_rank(st->id);

        snprintf(key, sizeof key, "scopemeter.rank%d.end_reason", rank);
        run_tag(st, key, end->reason, end_run_reserve(bound)); /* oom_kill */
        if (st->owns_run) {
            snprintf(detail, sizeof detail, "%llu OOM kill%s in its cgroup; CMD exit %d",
                     st->ooms, st->ooms == 1 ? "" : "s", exit_code);
            sm__run_end_text(end, "run", rank, detail, text, sizeof text);
            run_tag(st, "scopemeter.end_reason", text, end_run_reserve(bound));
        }
    }
    if (st->owns_run)
        end_run(st, end->status, bound - (sm__now_mono() - t0) > reserve
                                    ? bound - (sm__now_mono() - t0) : reserve);
}

/* 6. The OOM reserve goes (cli/oom_guard.c).  When the kernel took it, the
 * cgroup stayed full with nothing of CMD left and the reserve is why the end
 * above was written: said, and tagged, since that kill is one of the
 * cgroup's oom_kill count and not one of CMD's processes.  The tag comes
 * after the run's end (the reserve may be taken by the end's own request)
 * and waits at most the end's share of the stop bound. */
static void reserve_end(const struct run_state *st, const struct run_opts *o)
{
    double mb, bound = o->stop_timeout >= 0 ? o->stop_timeout : SM_STOP_TIMEOUT_DEFAULT;
    char key[64], value[32];

    if (!sm_oom_guard_reserve_end(&mb))
        return;
    fprintf(stderr, "scopemeter: the recorder's reserve (%.1f MB) was SIGKILLed before the "
            "run's end: in an OOM that is the kernel taking it instead of the recorder, the "
            "cgroup full with no process of CMD left; that kill is one of the cgroup's oom_kill "
            "count, not one of CMD's processes\n", mb);
    if (!st->run_id[0] || !st->uri)
        return;
    snprintf(key, sizeof key, "scopemeter.rank%d.oom_reserve_taken", sm_identity_rank(st->id));
    snprintf(value, sizeof value, "%.1f", mb);
    run_tag(st, key, value, end_run_reserve(bound));
}

/* 7. The monitor's oom_kill end tag was read at its stop; a kill after it
 * (the reserve, taken by the end's own requests: reserve_end) is counted
 * now that nothing of the job is left, so the tag is the cgroup's count for
 * the whole run (docs/cgroup.md). */
static void oom_kill_end(struct run_state *st, const struct run_opts *o, int collecting)
{
    double bound = o->stop_timeout >= 0 ? o->stop_timeout : SM_STOP_TIMEOUT_DEFAULT;
    unsigned long long before = st->ooms;
    char key[64], value[32];

    if (!collecting || !st->run_id[0] || !st->uri ||
        sm_oom_guard_cgroup_kills(st->cg, &st->ooms) < 0 || st->ooms == before)
        return;
    snprintf(key, sizeof key, "scopemeter.rank%d.oom_kill", sm_identity_rank(st->id));
    snprintf(value, sizeof value, "%llu", st->ooms);
    run_tag(st, key, value, end_run_reserve(bound));
}

int cmd_run(int argc, char **argv)
{
    struct run_opts o;
    struct run_state st;
    sigset_t orig;
    sm_monitor *m;
    sm_run_end end;
    int rc, collecting = 0, status = 0, exit_code, forwarded_term = 0;

    rc = parse(argc, argv, &o);
    if (rc != 0)
        return rc > 0 ? 0 : 2; /* one line said why */
    /* CMD first: a mistyped command must not leave a run behind */
    rc = find_cmd(o.cmd[0]);
    if (rc != 0) {
        fprintf(stderr, "scopemeter: cannot run %s: %s%s; no run created\n", o.cmd[0],
                strerror(rc), strchr(o.cmd[0], '/') ? "" : " (searched PATH)");
        return rc == ENOENT ? 127 : 126; /* as a shell exits */
    }
    memset(&st, 0, sizeof st);
    supervise_init(&st.sv);
    if (!(m = new_monitor(&o)))
        return 125;
    if (supervise_take_signals(&st.sv, &orig) < 0) {
        sm_monitor_free(m);
        return 125;
    }
    supervise_subreaper();
    if ((rc = sm_identity_read_env(&st.id)) < 0)
        /* a malformed RANK must not pass for rank 0 (docs/design.md §4):
         * no run, no monitor; CMD runs as usual */
        fprintf(stderr, "scopemeter: warning: %s\n",
                st.id ? sm_identity_invalid(st.id) : sm_strerror(rc));
    else
        collecting = start_recording(&st, &o, m);
    st.collecting = collecting;
    /* after the monitor's open: the same counters, read at the end of CMD's tree */
    st.cg = sm_oom_guard_cgroup_open();

    if (supervise_early_signal(&st.sv)) {
        fprintf(stderr, "scopemeter: %s before CMD started; not starting it\n",
                strsignal(st.sv.pending_sig));
        exit_code = 128 + st.sv.pending_sig;
        forwarded_term = 1;
        status = st.sv.pending_sig; /* as if killed by it */
    } else {
        exit_code = run_cmd(&st, &o, &orig, &status, &forwarded_term);
    }
    if (st.cmd_pid > 0 && sm_oom_guard_cgroup_kills(st.cg, &st.ooms) == 0 && st.ooms > 0) {
        supervise_wait_tree(&st.sv, st.cmd_pid,
                            o.stop_timeout >= 0 ? o.stop_timeout : SM_STOP_TIMEOUT_DEFAULT);
        (void)sm_oom_guard_cgroup_kills(st.cg, &st.ooms);
    }
    /* FINISHED, FAILED or KILLED: the rule the companion's end follows too */
    sm__run_end_judge(0, status, forwarded_term, st.ooms, &end);
    stop_recording(&st, &o, m, collecting, &end, exit_code);
    reserve_end(&st, &o);
    oom_kill_end(&st, &o, collecting);
    sm_oom_guard_cgroup_close(st.cg);

    sm_monitor_free(m);
    sm_identity_free(st.id);
    free(st.env);
    free(st.env_run);
    free(st.env_uri);
    supervise_end(&st.sv, &orig);
    return exit_code;
}
