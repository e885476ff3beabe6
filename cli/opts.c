/*
 * opts.c — the one option parser of every subcommand.  Each subcommand
 * describes its options as a table (name, kind, bounds); the parser accepts
 * `--opt VALUE` and `--opt=VALUE`, takes numbers through the one number
 * parser (src/util/number.h: plain decimal, no 0x10, 1e9, inf: a typo must not
 * become a valid setting), checks exclusive pairs, and says every usage
 * error in one line:
 *   scopemeter run: --interval must be a number of seconds between 0.01 and 86400 s, got '0'
 * Subcommands exit 2 after such a line.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "number.h"

static int set_value(const char *cmd, struct cli_opt *o, const char *v)
{
    double d;

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
    case CLI_NUMBER: {
        /* the one number parser and its line (src/util/number.h) */
        const sm_num_spec spec = {o->name, o->min, o->max, o->kind == CLI_INT,
                                  o->kind == CLI_SECONDS};
        char err[256];

        if (sm__num_parse(v, &spec, &d, err, sizeof err) < 0) {
            fprintf(stderr, "scopemeter %s: %s\n", cmd, err);
            return -1;
        }
        if (o->kind == CLI_INT)
            *(int *)o->dst = (int)d;
        else
            *(double *)o->dst = d;
        return 0;
    }
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

int cli_detail(const char *cmd, const char *word)
{
    if (strcmp(word, "default") == 0)
        return 0;
    if (strcmp(word, "full") == 0)
        return 1;
    fprintf(stderr, "scopemeter %s: --detail must be default or full, got '%s'\n", cmd, word);
    return -1;
}
