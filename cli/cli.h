/* cli.h — the scopemeter command's subcommands (one file each) and the one
 * option parser they share (opts.c). */
#ifndef SM_CLI_H
#define SM_CLI_H

#include <stddef.h>

int cmd_probe(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_report(int argc, char **argv); /* execs python -m scopemeter report */
int cmd_companion(int argc, char **argv); /* watches a recorder, ends what it left */
int cmd_sync(int argc, char **argv);
int cmd_reserve(int argc, char **argv); /* holds scopemeter run's OOM reserve */

enum cli_kind { CLI_FLAG, CLI_INT, CLI_SECONDS, CLI_NUMBER, CLI_STRING };

/* One option: --name, its kind, where the value goes (int * for FLAG and
 * INT, double * for SECONDS and NUMBER, const char ** for STRING), inclusive bounds for
 * numbers, the value a FLAG stores, and a group: two options of one group
 * given together are a usage error (--run-id/--experiment). */
struct cli_opt {
    const char *name;
    enum cli_kind kind;
    void *dst;
    double min, max;
    int flag_value;
    const char *group;
    int seen;              /* set by cli_parse */
};

#define CLI_HELP (-2)
/* Parses argv[1..].  Returns the index of the first operand (argc when
 * none; after "--" the next one), CLI_HELP for -h/--help, or -1 after one
 * line "scopemeter CMD: ..." on stderr.  operands: whether positional
 * arguments may follow the options (else one is a usage error). */
int cli_parse(const char *cmd, int argc, char **argv, struct cli_opt *opts, size_t nopts,
              int operands);
/* --detail's word: 0 default, 1 full (docs/series.md "Levels"), or -1 after
 * one line "scopemeter CMD: ..." on stderr. */
int cli_detail(const char *cmd, const char *word);

#endif
