/*
 * main.c — the `scopemeter` command: probe, plan, run, report, sync, companion,
 * reserve.
 * Each subcommand lives in its own cmd_*.c and uses the public API only.
 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cli.h"
#include "scopemeter.h"
#include "scopemeter_mlflow.h"

struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
};

static const struct command commands[] = {
    {"probe", cmd_probe, "show every series this process would record here, and why"},
    {"plan", cmd_plan, "preflight: series, charts, sections, rows and bytes for a job"},
    {"run", cmd_run, "record system metrics into MLflow while a command runs"},
    {"report", cmd_report, "how close a run came to OOM, and where (Python, docs/report.md)"},
    {"companion", cmd_companion, "internal: ends the run of a recorder that died (docs/cli.md)"},
    {"sync", cmd_sync, "deliver what a dead recorder left in its spool (docs/cli.md)"},
    {"reserve", cmd_reserve, "internal: holds run's memory for its last writes (docs/cli.md)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: scopemeter <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n'scopemeter <command> --help' for a command's options.\n");
}

/* What is installed and from where: a platform team that put a wheel's CLI
 * into a bundle directory checks which copy a PATH finds, and which libcurl
 * it carries (static, http only; https through the TLS module, whose path
 * the last line names: src/mlflow/curl_api.c, scripts/build-deps). */
static int print_version(void)
{
    char exe[PATH_MAX], tls[1024];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);

    if (n < 0)
        snprintf(exe, sizeof exe, "unknown (%s)", strerror(errno));
    else
        exe[n] = '\0';
    printf("scopemeter %s\nexecutable: %s\n%s\n", sm_version(), exe, curl_version());
    /* https is a module loaded on need (src/mlflow/curl_api.c): say which */
    if (sm_mlflow_tls(tls, sizeof tls) == 0)
        printf("https: %s\n", tls);
    else
        printf("https: unavailable: %s\n", tls);
    return 0;
}

int main(int argc, char **argv)
{
    /* One malloc arena for the whole process: the CLI's threads (sampling,
     * shipping, libcurl's resolver) allocate little and rarely, and an arena
     * per thread kept ~50 kB more resident over https (bench/README.md,
     * table 5).  The process is the CLI's own; a library never sets this. */
    mallopt(M_ARENA_MAX, 1);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0)
        return print_version();
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "scopemeter: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
