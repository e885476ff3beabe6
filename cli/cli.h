/* cli.h — the scopemeter command's subcommands; one file each. */
#ifndef SM_CLI_H
#define SM_CLI_H

int cmd_probe(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_report(int argc, char **argv); /* execs python -m scopemeter report */

/* Parses a decimal number of seconds; returns 0 or -1. */
int cli_parse_seconds(const char *s, double *out);
int cli_parse_int(const char *s, int *out);

#endif
