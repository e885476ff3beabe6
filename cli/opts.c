/*
 * opts.c — the one option parser of every subcommand.  Each subcommand
 * describes its options as a table (name, kind, bounds); the parser accepts
 * `--opt VALUE` and `--opt=VALUE`, takes numbers in plain decimal only (no
 * 0x10, 1e9, inf: a typo must not become a valid setting), checks bounds
 * and exclusive pairs, and says every usage error in one line:
 *   scopemeter run: --interval must be between 0.01 and 86400 s, got '0'
 * Subcommands exit 2 after such a line.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Plain decimal: digits, at most one '.', nothing else (no sign, no space). */
static int decimal(const char *s, int allow_fraction)
{
    int digits = 0, dots = 0;

    for (; *s; s++) {
        if (*s >= '0' && *s <= '9')
            digits++;
        else if (*s == '.' && allow_fraction && !dots)
            dots++;
        else
            return 0;
    }
    return digits > 0;
}

static void say_range(const char *cmd, const struct cli_opt *o, const char *v)
{
    const char *unit = o->kind == CLI_SECONDS ? " s" : "";

    if (o->kind == CLI_INT)
        fprintf(stderr, "scopemeter %s: %s must be a whole number between %.0f and %.0f, got "
                "'%s'\n", cmd, o->name, o->min, o->max, v);
    else
        fprintf(stderr, "scopemeter %s: %s must be a number of seconds between %g and %g%s, "
                "got '%s'\n", cmd, o->name, o->min, o->max, unit, v);
}

static int set_value(const char *cmd, struct cli_opt *o, const char *v)
{
    double d;
    char *end;

    switch (o->kind) {
    case CLI_STRING:
        if (!*v) {
            fprintf(stderr, "scopemeter %s: %s needs a non-empty value\n", cmd, o->name);
            return -1;
        }
        *(const char **)o->dst = v;
        return 0;
    case CLI_INT:
    case CLI_SECONDS:
        if (!decimal(v, o->kind == CLI_SECONDS)) {
            say_range(cmd, o, v);
            return -1;
        }
        errno = 0;
        d = strtod(v, &end);
        if (errno || d < o->min || d > o->max) {
            say_range(cmd, o, v);
            return -1;
        }
        if (o->kind == CLI_INT)
            *(int *)o->dst = (int)d;
        else
            *(double *)o->dst = d;
        return 0;
    case CLI_FLAG:
        break;
    }
    return -1;
}

int cli_parse(const char *cmd, int argc, char **argv, struct cli_opt *opts, size_t nopts,
              int operands)
{
    int i;

    for (size_t k = 0; k < nopts; k++)
        opts[k].seen = 0;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *eq;
        struct cli_opt *o = NULL;
        size_t len;

        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
            return CLI_HELP;
        if (a[0] != '-' || !a[1]) {
            if (operands)
                break; /* the first operand (CMD, RUN_ID) */
            fprintf(stderr, "scopemeter %s: unexpected argument '%s'\n", cmd, a);
            return -1;
        }
        eq = strchr(a, '=');
        len = eq ? (size_t)(eq - a) : strlen(a);
        for (size_t k = 0; k < nopts; k++)
            if (strlen(opts[k].name) == len && strncmp(opts[k].name, a, len) == 0)
                o = &opts[k];
        if (!o) {
            fprintf(stderr, "scopemeter %s: unknown option '%.*s'\n", cmd, (int)len, a);
            return -1;
        }
        if (o->seen) {
            fprintf(stderr, "scopemeter %s: %s given twice\n", cmd, o->name);
            return -1;
        }
        o->seen = 1;
        if (o->kind == CLI_FLAG) {
            if (eq) {
                fprintf(stderr, "scopemeter %s: %s takes no value\n", cmd, o->name);
                return -1;
            }
            *(int *)o->dst = o->flag_value;
            continue;
        }
        if (!eq && i + 1 >= argc) {
            fprintf(stderr, "scopemeter %s: %s needs a value\n", cmd, o->name);
            return -1;
        }
        if (set_value(cmd, o, eq ? eq + 1 : argv[++i]) < 0)
            return -1;
    }
    for (size_t k = 0; k < nopts; k++)
        for (size_t j = k + 1; j < nopts; j++)
            if (opts[k].seen && opts[j].seen && opts[k].group && opts[j].group &&
                strcmp(opts[k].group, opts[j].group) == 0) {
                fprintf(stderr, "scopemeter %s: %s and %s exclude each other\n", cmd,
                        opts[k].name, opts[j].name);
                return -1;
            }
    return i;
}
