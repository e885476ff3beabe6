/*
 * fuzz_user_number.c — libFuzzer target for the one parser of numbers
 * people write (src/util/number.c: options, environment and launcher variables,
 * MLflow settings, Python arguments).  The first byte picks the spec (whole
 * or not, seconds or not, one of several bounds, negative and unbounded
 * ones included); the rest is the text, NUL-terminated as getenv and argv
 * give it.  Oracles:
 *   - accepted exactly when an independent reading of the grammar
 *     ([-]DIGITS[.DIGITS], '.' not in whole numbers, '-' only with negative
 *     bounds) accepts and strtod's value is within the bounds;
 *   - the value is strtod's, finite, within the bounds, never -0;
 *   - a refusal writes one line: starts with the name, no newline, within
 *     the buffer, and a short buffer is cut, never overrun;
 *   - sm__num_scan advances within the text on success, not at all otherwise;
 *   - sm__num_check on the input's first 8 bytes as a double agrees with the
 *     bounds and whole-ness computed here.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "number.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static const struct {
    double min, max;
} bounds[] = {
    {0.01, 86400}, {1, 100000}, {0, 3600}, {-1000, 1000}, {0, 2147483647},
    {-INFINITY, INFINITY}, {0, INFINITY}, {-INFINITY, 0}, {0.1, 0.1},
};

/* the grammar, read independently of number.c */
static int grammar(const char *s, const sm_num_spec *spec)
{
    int digits = 0;

    if (*s == '-') {
        if (!(spec->min < 0))
            return 0;
        s++;
    }
    for (; *s >= '0' && *s <= '9'; s++)
        digits++;
    if (*s == '.' && !spec->whole)
        for (s++; *s >= '0' && *s <= '9'; s++)
            digits++;
    return digits > 0 && *s == '\0';
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    sm_num_spec spec = {"--opt", 0, 0, 0, 0};
    char *text, err[256], small[12];
    const char *p;
    double v = -7, want, d;
    int rc, ok;

    if (size < 1)
        return 0;
    spec.whole = data[0] & 1;
    spec.seconds = (data[0] >> 1) & 1;
    spec.min = bounds[(data[0] >> 2) % (sizeof bounds / sizeof bounds[0])].min;
    spec.max = bounds[(data[0] >> 2) % (sizeof bounds / sizeof bounds[0])].max;
    text = malloc(size);
    if (!text)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';

    rc = sm__num_parse(text, &spec, &v, err, sizeof err);
    want = strtod(text, NULL);
    ok = grammar(text, &spec) && want >= -DBL_MAX && want <= DBL_MAX && want >= spec.min &&
         want <= spec.max;
    if (ok != (rc == 0))
        abort();
    if (rc == 0) {
        if (v != want || (v == 0 && signbit(v)) || err[0])
            abort();
    } else {
        if (v != -7 || (rc != -EINVAL && rc != -ERANGE))
            abort();
        if (strncmp(err, "--opt must be a ", 16) != 0 || strchr(err, '\n') ||
            strlen(err) >= sizeof err)
            abort();
        if (sm__num_parse(text, &spec, &v, small, sizeof small) != rc ||
            strlen(small) != sizeof small - 1 || memcmp(small, err, sizeof small - 1) != 0)
            abort();
    }

    p = text;
    rc = sm__num_scan(&p, &spec, &v);
    if (rc == 0 && (p <= text || p > text + strlen(text)))
        abort();
    if (rc < 0 && p != text)
        abort();

    if (size >= 1 + sizeof d) {
        memcpy(&d, data + 1, sizeof d);
        rc = sm__num_check(d, NULL, &spec, err, sizeof err);
        ok = d >= -DBL_MAX && d <= DBL_MAX && d >= spec.min && d <= spec.max &&
             (!spec.whole || d == floor(d));
        if (ok != (rc == 0) || (rc && (strncmp(err, "--opt must be", 13) != 0 ||
                                       strchr(err, '\n'))))
            abort();
    }
    free(text);
    return 0;
}
