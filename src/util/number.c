/*
 * number.c — the one parser of numbers people write (number.h): options,
 * environment and launcher variables, MLflow settings, Python arguments.
 * Before it, five files had five rules (strtod took SCOPEMETER_INTERVAL=0x10
 * as 16 s while --interval 0x10 was refused; a bad MLFLOW_HTTP_REQUEST_TIMEOUT
 * was dropped without a word).  Built as curl's lib/curlx/strparse.c: the
 * grammar is checked here, character by character, the pointer advances only
 * on success, and the error says which way the value is wrong.
 *
 * Never: read outside the NUL-terminated text, log, allocate, or accept a
 * value the grammar refuses because libc would (strtod reads hex, exponents,
 * inf and leading blanks: it only converts what the grammar already took).
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "number.h"

#define GOT_MAX 60 /* characters of a bad value quoted in the line */

int sm__num_scan(const char **p, const sm_num_spec *spec, double *out)
{
    const char *s, *q;
    char *end;
    int neg = 0, digits = 0, saved = errno;
    double v;

    if (!p || !*p || !spec || !out)
        return -EINVAL;
    s = q = *p;
    if (*q == '-') {
        neg = 1;
        q++;
    }
    for (; *q >= '0' && *q <= '9'; q++)
        digits++;
    if (*q == '.' && !spec->whole)
        for (q++; *q >= '0' && *q <= '9'; q++)
            digits++;
    if (!digits)
        return -EINVAL;
    /* strtod converts exactly what the grammar took (every caller runs in the
     * C numeric locale: the CLI never calls setlocale, CPython sets LC_CTYPE
     * only); where it would read further (an exponent, "0x10") or less (a
     * locale whose decimal point is ','), the value is refused, not guessed. */
    v = strtod(s, &end);
    errno = saved; /* overflow is an out-of-range value below, not an errno */
    if (end != q)
        return -EINVAL;
    if (neg && !(spec->min < 0))
        return -ERANGE; /* "-0" where no negative number is allowed */
    if (!(v >= -DBL_MAX && v <= DBL_MAX) || !(v >= spec->min && v <= spec->max))
        return -ERANGE;
    *out = v == 0 ? 0.0 : v; /* -0 is 0 */
    *p = q;
    return 0;
}

/* A bound as people write it: 86400, 0.01, 1048576 (never 1.04858e+06). */
static void bound(char *buf, size_t cap, double b)
{
    if (fabs(b) < 1e15 && b == sm__floor(b))
        snprintf(buf, cap, "%.0f", b);
    else
        snprintf(buf, cap, "%g", b);
}

/* " between 1 and 100000", " between 0.01 and 86400 s", " at least 1 s"
 * (" of at least" after a noun: "a whole number of at least 0"), or "" for an
 * unbounded number. */
static void range(char *buf, size_t cap, const sm_num_spec *spec, const char *of)
{
    char lo[32], hi[32];
    int has_lo = spec->min >= -DBL_MAX, has_hi = spec->max <= DBL_MAX;
    const char *unit = spec->seconds ? " s" : "";

    bound(lo, sizeof lo, spec->min);
    bound(hi, sizeof hi, spec->max);
    if (has_lo && has_hi)
        snprintf(buf, cap, " between %s and %s%s", lo, hi, unit);
    else if (has_lo)
        snprintf(buf, cap, "%s at least %s%s", of, lo, unit);
    else if (has_hi)
        snprintf(buf, cap, "%s at most %s%s", of, hi, unit);
    else
        buf[0] = '\0';
}

/* The bad value, at most GOT_MAX characters, control characters as '?': the
 * line stays one line whatever the environment held. */
static void shown(char *buf, size_t cap, const char *text)
{
    size_t n = 0, i;

    for (i = 0; text[i] && i < GOT_MAX && n + 1 < cap; i++)
        buf[n++] = (unsigned char)text[i] < 0x20 || text[i] == 0x7f ? '?' : text[i];
    buf[n] = '\0';
    if (text[i] && n + 4 <= cap)
        memcpy(buf + n, "...", 4);
}

int sm__num_parse(const char *text, const sm_num_spec *spec, double *out, char *err,
                 size_t errlen)
{
    const char *p = text;
    char r[96], got[GOT_MAX + 4];
    double v = 0;
    int rc;

    if (err && errlen)
        err[0] = '\0';
    if (!spec || !out)
        return -EINVAL;
    rc = text ? sm__num_scan(&p, spec, &v) : -EINVAL;
    if (rc == 0 && *p)
        rc = -EINVAL; /* "1 ", "0x10" read as far as "0", "5(x3)" */
    if (rc == 0) {
        *out = v;
        return 0;
    }
    if (err && errlen) {
        range(r, sizeof r, spec, " of");
        shown(got, sizeof got, text ? text : "");
        snprintf(err, errlen, "%s must be a %s%s%s, got '%s'", spec->name,
                 spec->whole ? "whole number" : "number", spec->seconds ? " of seconds" : "", r,
                 got);
    }
    return rc;
}

int sm__num_check(double v, const char *got, const sm_num_spec *spec, char *err, size_t errlen)
{
    char r[96], g[GOT_MAX + 4];
    int rc = 0;
    int kind; /* say what the value must be, not only its range */

    if (err && errlen)
        err[0] = '\0';
    if (!spec)
        return -EINVAL;
    if (v == v && spec->whole && fabs(v) <= DBL_MAX && v != sm__floor(v))
        rc = -EDOM;
    else if (!(v >= -DBL_MAX && v <= DBL_MAX) || !(v >= spec->min && v <= spec->max))
        rc = -ERANGE; /* NaN and ±inf too, whatever the bounds */
    /* a NaN out of a range is said as any value out of it ("must be between
     * 0.01 and 10000000, got nan", as got 0): one message (issue 46) */
    kind = rc == -EDOM || !(spec->min >= -DBL_MAX || spec->max <= DBL_MAX);
    if (rc && err && errlen) {
        range(r, sizeof r, spec, kind ? " of" : "");
        if (got)
            shown(g, sizeof g, got);
        else
            snprintf(g, sizeof g, "%g", v);
        /* a number already: only what is wrong with it (its range, or that
         * it is a fraction) */
        if (kind)
            snprintf(err, errlen, "%s must be a %s%s, got %s", spec->name,
                     spec->whole ? "whole number" : "number", r, g);
        else
            snprintf(err, errlen, "%s must be%s, got %s", spec->name, r, g);
    }
    return rc;
}

int sm__num_shortest(char *out, size_t cap, double v, bool exponent)
{
    double a = v < 0 ? -v : v;

    /* an exponent where a reader's own shortest form has one (Python's repr,
     * JavaScript's: below 1e-4 or from 1e16 on), never for 76360 */
    exponent = exponent && v != 0 && (a < 1e-4 || a >= 1e16);
    for (int prec = 1; prec < 17; prec++) {
        snprintf(out, cap, "%.*g", prec, v);
        if ((exponent || !strchr(out, 'e')) && strtod(out, NULL) == v)
            return prec;
    }
    snprintf(out, cap, "%.17g", v);
    return 17;
}
