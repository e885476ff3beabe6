/*
 * main.c — the `scopemeter` command: probe, plan, run.
 * Each subcommand lives in its own cmd_*.c and uses the public API only.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "scopemeter.h"

struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
};

static const struct command commands[] = {
    {"probe", cmd_probe, "show every series this process would record here, and why"},
#ifdef SM_HAVE_PLAN
    {"plan", cmd_plan, "preflight: series, charts, sections, rows and bytes for a job"},
#endif
#ifdef SM_HAVE_RUN
    {"run", cmd_run, "record system metrics into MLflow while a command runs"},
    {"report", cmd_report, "how close a run came to OOM, and where (Python, docs/report.md)"},
#endif
};

static void usage(FILE *f)
{
    fprintf(f, "usage: scopemeter <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-7s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n'scopemeter <command> --help' for a command's options.\n");
}

int cli_parse_seconds(const char *s, double *out)
{
    char *end;
    double v;

    if (!s || !*s)
        return -1;
    errno = 0;
    v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < 0)
        return -1;
    *out = v;
    return 0;
}

int cli_parse_int(const char *s, int *out)
{
    char *end;
    long v;

    if (!s || !*s)
        return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || v < 0 || v > INT_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("scopemeter %s\n", sm_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "scopemeter: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
