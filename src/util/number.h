/*
 * number.h — the one parser of the numbers people write: command-line
 * options, scopemeter's and MLflow's environment variables, the launcher's
 * variables, and (through _native.parse_number) the Python front's
 * arguments (docs/design.md §8, "Numbers").  Core layer: libc only, no I/O,
 * no logging — the caller says the line it is given, with its own prefix
 * and consequence ("; ignored", "scopemeter run: ...").
 *
 * The grammar, the same for every caller: [-]DIGITS[.DIGITS] (".5" and "5."
 * too), a '.' never in a whole number.  Refused, never read as something
 * else: an empty value, white space anywhere (" 1", "1 "), '+', hex
 * ("0x10"), an exponent ("1e3"), "inf", "nan", and a '-' where the bounds
 * hold no negative number ("-0" included).
 */
#ifndef SM_NUMBER_H
#define SM_NUMBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef SM_HIDDEN /* as internal.h: the surfaces include this header alone */
#define SM_HIDDEN __attribute__((visibility("hidden")))
#endif

/* What a value is and how the user names it.  min/max are inclusive; ±inf
 * (or min > max never: callers pass real bounds) leaves that side open, and
 * a line of an unbounded number says only its kind. */
typedef struct sm_num_spec {
    const char *name; /* as the user wrote it: "--interval", "SCOPEMETER_INTERVAL", "interval" */
    double min, max;
    int whole;        /* a whole number: digits only */
    int seconds;      /* said as "a number of seconds ... s" */
} sm_num_spec;

/* Reads one number at *p (NUL-terminated), as curl's strparse does: *p
 * advances past it on success and is untouched on failure, so a caller
 * may read what follows (Slurm's "8(x4)").  0 and *out; -EINVAL: no number
 * of the grammar there; -ERANGE: a number outside the bounds. */
SM_HIDDEN int sm__num_scan(const char **p, const sm_num_spec *spec, double *out);

/* The whole of text as one number: sm__num_scan and nothing after it.  On
 * failure the one line (no prefix, no newline) goes to err:
 *   "--interval must be a number of seconds between 0.01 and 86400 s, got '0x10'"
 * Text always says the kind ("a whole number", "a number of seconds"): the
 * reader of a typo may not know the value is a number at all. */
SM_HIDDEN int sm__num_parse(const char *text, const sm_num_spec *spec, double *out, char *err,
                 size_t errlen);

/* A value that already is a number (a Python int or float): its bounds and
 * whether it is whole.  0; -ERANGE (out of bounds, NaN) or -EDOM (a fraction
 * where a whole number is wanted), with the line in err, got being how the
 * value is shown (NULL: "%g"):
 *   "interval must be between 0.01 and 86400 s, got 0"
 *   "samples must be a whole number between 1 and 100000, got 2.5" */
SM_HIDDEN int sm__num_check(double v, const char *got, const sm_num_spec *spec, char *err,
                 size_t errlen);

/* The shortest decimal that strtod reads back as v exactly, into out (the
 * exact limit tags and the write budget tag, docs/design.md §3; the JSONL
 * file's values, docs/cli.md):
 * 2.5 stays "2.5", 1/3 is "0.3333333333333333", 2412.3 is "2412.3", not
 * "2412.3000000000002"; 100 is "100", not "1e+02".  Without `exponent`
 * (tags a person reads) an exponent only at 17 digits; with it (the JSONL
 * file: a reader parses it) an exponent where Python's repr has one, below
 * 1e-4 and from 1e16 on: 1e-05 is "1e-05", not 17 digits; 76360 stays.  Returns the %g
 * precision it took (1..17), for a writer that formats v itself with that
 * precision (jansson's JSON_REAL_PRECISION). */
SM_HIDDEN int sm__num_shortest(char *out, size_t cap, double v, bool exponent);

/* floor(x), exactly (-0, NaN and ±inf as they are), without libm: at -Os
 * GCC calls libm's floor/ceil/trunc instead of expanding them, and the CLI
 * does not load libm (its IFUNC resolvers made ~390 kB of it resident;
 * bench/README.md "The front at 1 MB"; tests/py/test_hot_text.py).  From
 * 2^52 on every double is whole; below, the conversion truncates. */
static inline double sm__floor(double x)
{
    double t;

    if (!(x > -0x1p52 && x < 0x1p52))
        return x;
    t = (double)(int64_t)x;
    return t == x ? x : t > x ? t - 1.0 : t;
}

#endif
