/*
 * test_number.c — the one number parser (src/util/number.c): its grammar, its
 * bounds at and just outside each edge, and the one line every caller
 * prints (docs/design.md §8, "Numbers").
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"

static const sm_num_spec interval = {"--interval", 0.01, 86400, 0, 1};
static const sm_num_spec samples = {"SCOPEMETER_SAMPLES", 1, 100000, 1, 0};
static const sm_num_spec adj = {"oom_score_adj", -1000, 1000, 1, 0};

static int parse(const char *s, const sm_num_spec *spec, double *v)
{
    char err[256];
    return sm__num_parse(s, spec, v, err, sizeof err);
}

static void test_grammar(void)
{
    double v = -7;

    CHECK_EQ_INT(parse("10", &interval, &v), 0);
    CHECK_NEAR(v, 10, 0);
    CHECK_EQ_INT(parse("0.5", &interval, &v), 0);
    CHECK_NEAR(v, 0.5, 0);
    CHECK_EQ_INT(parse(".5", &interval, &v), 0);
    CHECK_NEAR(v, 0.5, 0);
    CHECK_EQ_INT(parse("5.", &interval, &v), 0);
    CHECK_NEAR(v, 5, 0);
    CHECK_EQ_INT(parse("007", &samples, &v), 0);
    CHECK_NEAR(v, 7, 0);

    /* refused, never read as something else */
    v = -7;
    CHECK_EQ_INT(parse("0x10", &interval, &v), -EINVAL);
    CHECK_EQ_INT(parse("0X10", &samples, &v), -EINVAL);
    CHECK_EQ_INT(parse("1e3", &interval, &v), -EINVAL);
    CHECK_EQ_INT(parse("1E3", &samples, &v), -EINVAL);
    CHECK_EQ_INT(parse("1e400", &interval, &v), -EINVAL);
    CHECK_EQ_INT(parse("1e", &interval, &v), -EINVAL);
    CHECK_EQ_INT(parse(" 1", &interval, &v), -EINVAL);
    CHECK_EQ_INT(parse("1 ", &interval, &v), -EINVAL);
    CHECK_EQ_INT(parse("\t1", &samples, &v), -EINVAL);
    CHECK_EQ_INT(parse("1\n", &samples, &v), -EINVAL);
    CHECK_EQ_INT(parse("", &interval, &v), -EINVAL);
    CHECK_EQ_INT(parse(NULL, &interval, &v), -EINVAL);
    CHECK_EQ_INT(parse("nan", &interval, &v), -EINVAL);
    CHECK_EQ_INT(parse("inf", &interval, &v), -EINVAL);
    CHECK_EQ_INT(parse("-inf", &adj, &v), -EINVAL);
    CHECK_EQ_INT(parse("infinity", &interval, &v), -EINVAL);
    CHECK_EQ_INT(parse("+1", &interval, &v), -EINVAL);
    CHECK_EQ_INT(parse("-", &adj, &v), -EINVAL);
    CHECK_EQ_INT(parse(".", &interval, &v), -EINVAL);
    CHECK_EQ_INT(parse("1.2.3", &interval, &v), -EINVAL);
    CHECK_EQ_INT(parse("1..2", &interval, &v), -EINVAL);
    CHECK_EQ_INT(parse("8.0", &samples, &v), -EINVAL); /* a whole number is digits */
    CHECK_EQ_INT(parse("1,5", &interval, &v), -EINVAL);
    CHECK_EQ_INT(parse("abc", &samples, &v), -EINVAL);
    CHECK_EQ_INT(parse("10s", &interval, &v), -EINVAL);
    CHECK_NEAR(v, -7, 0); /* untouched on failure */

    /* a sign only where the bounds hold negative numbers; "-0" is not 0 */
    CHECK_EQ_INT(parse("-0", &samples, &v), -ERANGE);
    CHECK_EQ_INT(parse("-0", &(sm_num_spec){"x", 0, 10, 1, 0}, &v), -ERANGE);
    CHECK_EQ_INT(parse("-0.0", &(sm_num_spec){"x", 0, 10, 0, 0}, &v), -ERANGE);
    CHECK_EQ_INT(parse("-1", &interval, &v), -ERANGE);
    CHECK_EQ_INT(parse("-500", &adj, &v), 0);
    CHECK_NEAR(v, -500, 0);
    CHECK_EQ_INT(parse("-0", &adj, &v), 0);
    CHECK(v == 0 && !signbit(v)); /* -0 is 0 */
}

static void test_bounds(void)
{
    double v;

    CHECK_EQ_INT(parse("0.01", &interval, &v), 0);
    CHECK_EQ_INT(parse("0.00999", &interval, &v), -ERANGE);
    CHECK_EQ_INT(parse("86400", &interval, &v), 0);
    CHECK_EQ_INT(parse("86400.000001", &interval, &v), -ERANGE);
    CHECK_EQ_INT(parse("0", &interval, &v), -ERANGE);
    CHECK_EQ_INT(parse("1", &samples, &v), 0);
    CHECK_EQ_INT(parse("0", &samples, &v), -ERANGE);
    CHECK_EQ_INT(parse("100000", &samples, &v), 0);
    CHECK_EQ_INT(parse("100001", &samples, &v), -ERANGE);
    CHECK_EQ_INT(parse("-1000", &adj, &v), 0);
    CHECK_EQ_INT(parse("-1001", &adj, &v), -ERANGE);
    CHECK_EQ_INT(parse("1000", &adj, &v), 0);
    CHECK_EQ_INT(parse("1001", &adj, &v), -ERANGE);

    /* 5000 digits: out of range (overflow is a value, not a crash); with
     * leading zeros a small number; 5000 fraction digits round */
    {
        char *s = malloc(5002);
        memset(s, '9', 5000);
        s[5000] = '\0';
        CHECK_EQ_INT(parse(s, &samples, &v), -ERANGE);
        CHECK_EQ_INT(parse(s, &(sm_num_spec){"x", 0, INFINITY, 0, 0}, &v), -ERANGE);
        memset(s, '0', 5000);
        s[4999] = '5';
        CHECK_EQ_INT(parse(s, &samples, &v), 0);
        CHECK_NEAR(v, 5, 0);
        s[0] = '0';
        s[1] = '.';
        CHECK_EQ_INT(parse(s, &interval, &v), -ERANGE); /* 5e-4998: below 0.01 */
        CHECK_EQ_INT(parse(s, &(sm_num_spec){"x", 0, 1, 0, 0}, &v), 0);
        CHECK(v >= 0 && v < 1e-300);
        free(s);
    }
}

static void test_lines(void)
{
    char err[256];
    double v;

    CHECK_EQ_INT(sm__num_parse("0x10", &interval, &v, err, sizeof err), -EINVAL);
    CHECK_EQ_STR(err, "--interval must be a number of seconds between 0.01 and 86400 s, got '0x10'");
    CHECK_EQ_INT(sm__num_parse("0", &samples, &v, err, sizeof err), -ERANGE);
    CHECK_EQ_STR(err, "SCOPEMETER_SAMPLES must be a whole number between 1 and 100000, got '0'");
    CHECK_EQ_INT(sm__num_parse("", &(sm_num_spec){"--workers", 1, 1048576, 1, 0}, &v, err,
                              sizeof err), -EINVAL);
    CHECK_EQ_STR(err, "--workers must be a whole number between 1 and 1048576, got ''");
    CHECK_EQ_INT(sm__num_parse("x", &(sm_num_spec){"N", 0, INFINITY, 1, 0}, &v, err, sizeof err),
                 -EINVAL);
    CHECK_EQ_STR(err, "N must be a whole number of at least 0, got 'x'");
    /* one line whatever the value holds, and not all of a long one */
    CHECK_EQ_INT(sm__num_parse("1\n2", &samples, &v, err, sizeof err), -EINVAL);
    CHECK_EQ_STR(err, "SCOPEMETER_SAMPLES must be a whole number between 1 and 100000, got '1?2'");
    {
        char s[100];
        memset(s, 'a', 99);
        s[99] = '\0';
        CHECK_EQ_INT(sm__num_parse(s, &samples, &v, err, sizeof err), -EINVAL);
        CHECK(strstr(err, "got 'aaaaaaaaaa") && strstr(err, "a...'") && strlen(err) < 160);
    }
    /* a short buffer cuts the line, never overruns it */
    CHECK_EQ_INT(sm__num_parse("0x10", &interval, &v, err, 8), -EINVAL);
    CHECK_EQ_STR(err, "--inter");
    CHECK_EQ_INT(sm__num_parse("0x10", &interval, &v, NULL, 0), -EINVAL);
    CHECK_EQ_INT(sm__num_parse("5", &interval, &v, err, sizeof err), 0);
    CHECK_EQ_STR(err, "");
}

static void test_check(void)
{
    char err[256];
    const sm_num_spec iv = {"interval", 0.01, 86400, 0, 1};
    const sm_num_spec n = {"samples", 1, 100000, 1, 0};
    const sm_num_spec whole = {"workers", -INFINITY, INFINITY, 1, 0};

    CHECK_EQ_INT(sm__num_check(0.01, NULL, &iv, err, sizeof err), 0);
    CHECK_EQ_INT(sm__num_check(86400, NULL, &iv, err, sizeof err), 0);
    CHECK_EQ_INT(sm__num_check(0, "0", &iv, err, sizeof err), -ERANGE);
    CHECK_EQ_STR(err, "interval must be between 0.01 and 86400 s, got 0");
    CHECK_EQ_INT(sm__num_check(nextafter(86400, INFINITY), NULL, &iv, err, sizeof err), -ERANGE);
    CHECK_EQ_INT(sm__num_check(nextafter(0.01, 0), NULL, &iv, err, sizeof err), -ERANGE);
    CHECK_EQ_INT(sm__num_check(INFINITY, "inf", &iv, err, sizeof err), -ERANGE);
    CHECK_EQ_INT(sm__num_check(NAN, "nan", &iv, err, sizeof err), -ERANGE);
    CHECK_EQ_STR(err, "interval must be between 0.01 and 86400 s, got nan");
    CHECK_EQ_INT(sm__num_check(2.5, "2.5", &n, err, sizeof err), -EDOM);
    CHECK_EQ_STR(err, "samples must be a whole number between 1 and 100000, got 2.5");
    CHECK_EQ_INT(sm__num_check(0, NULL, &n, err, sizeof err), -ERANGE);
    CHECK_EQ_STR(err, "samples must be between 1 and 100000, got 0");
    CHECK_EQ_INT(sm__num_check(100001, NULL, &n, err, sizeof err), -ERANGE);
    CHECK_EQ_INT(sm__num_check(8.5, "8.5", &whole, err, sizeof err), -EDOM);
    CHECK_EQ_STR(err, "workers must be a whole number, got 8.5");
    CHECK_EQ_INT(sm__num_check(1e300, NULL, &whole, err, sizeof err), 0);
    CHECK_EQ_INT(sm__num_check(INFINITY, "inf", &whole, err, sizeof err), -ERANGE);
    CHECK_EQ_STR(err, "workers must be a whole number, got inf");
    CHECK_EQ_INT(sm__num_check(-0.0, NULL, &n, err, sizeof err), -ERANGE);
}

/* sm__env_number: the variable's line, what is used instead, said once */
static char said[8][320];
static int nsaid;

static void keep(int level, const char *msg, void *userdata)
{
    (void)userdata;
    if (level == SM_WARN && nsaid < 8)
        snprintf(said[nsaid++], sizeof said[0], "%s", msg);
}

static void test_env(void)
{
    const sm_num_spec t = {"SM_TEST_TIMEOUT", 1, 86400, 1, 1};
    static atomic_flag once = ATOMIC_FLAG_INIT;
    double v = -1;

    sm_set_log_handler(keep, NULL);
    unsetenv("SM_TEST_TIMEOUT");
    CHECK_EQ_INT(sm__env_number(t.name, &t, &v, "using the default 120 s", &once), 0);
    setenv("SM_TEST_TIMEOUT", "", 1);
    CHECK_EQ_INT(sm__env_number(t.name, &t, &v, "using the default 120 s", &once), 0);
    setenv("SM_TEST_TIMEOUT", "30", 1);
    CHECK_EQ_INT(sm__env_number(t.name, &t, &v, "using the default 120 s", &once), 1);
    CHECK_NEAR(v, 30, 0);
    CHECK_EQ_INT(nsaid, 0);
    setenv("SM_TEST_TIMEOUT", "0x10", 1);
    CHECK_EQ_INT(sm__env_number(t.name, &t, &v, "using the default 120 s", &once), -1);
    CHECK_EQ_INT(sm__env_number(t.name, &t, &v, "using the default 120 s", &once), -1);
    CHECK_EQ_INT(nsaid, 1); /* once */
    CHECK_EQ_STR(said[0], "SM_TEST_TIMEOUT must be a whole number of seconds between 1 and "
                          "86400 s, got '0x10'; using the default 120 s");
    CHECK_EQ_INT(sm__env_number(t.name, &t, &v, "ignored", NULL), -1);
    CHECK_EQ_INT(nsaid, 2); /* no flag: every time */
    unsetenv("SM_TEST_TIMEOUT");
    sm_set_log_handler(NULL, NULL);
}

/* sm__floor against libm's floor (linked into this test, not into the CLI):
 * whole numbers, halves, the edges of the conversion, signed zeros,
 * non-finite values, and a walk of neighbours around each. */
static void test_floor(void)
{
    const double at[] = {0.0, -0.0, 0.3, -0.3, 0.5, -0.5, 1.0, -1.0, 2.5, -2.5, 1e15 + 0.5,
                         -1e15 - 0.5, 0x1p52 - 0.5, -0x1p52 + 0.5, 0x1p52, -0x1p52, 0x1p53 + 2,
                         0x1p63, -0x1p63, 1e300, -1e300, DBL_MIN, -DBL_MIN, 5e-324, -5e-324,
                         INFINITY, -INFINITY, 3599.999999999, 360000.0};
    size_t i;

    for (i = 0; i < sizeof at / sizeof at[0]; i++) {
        double x = at[i];
        for (int k = 0; k < 64; k++, x = nextafter(x, INFINITY)) {
            double want = floor(x), got = sm__floor(x);
            CHECK(got == want && signbit(got) == signbit(want));
        }
    }
    CHECK(isnan(sm__floor(NAN)));
}

/* sm__num_shortest: the shortest decimal that reads back (the exact limit
 * tags, the JSONL file's values) */
static void test_shortest(void)
{
    static const struct { double v; bool exp; const char *text; int prec; } cases[] = {
        {2412.3, false, "2412.3", 5}, {25.7, false, "25.7", 3}, {100, false, "100", 3},
        {2.5, false, "2.5", 2}, {0, false, "0", 1}, {-0.1, false, "-0.1", 1},
        {1.0 / 3, false, "0.3333333333333333", 16},
        {1e-7, false, "9.9999999999999995e-08", 17}, /* a tag: no exponent before 17 */
        {1e-7, true, "1e-07", 1}, {1.25e-5, true, "1.25e-05", 3}, /* the JSONL file */
        {2412.3, true, "2412.3", 5}, {1e20, true, "1e+20", 1},
        {76360, true, "76360", 5}, {0.00012, true, "0.00012", 2}, {0, true, "0", 1},
    };
    char out[32];

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ_INT(sm__num_shortest(out, sizeof out, cases[i].v, cases[i].exp), cases[i].prec);
        CHECK_EQ_STR(out, cases[i].text);
        CHECK(strtod(out, NULL) == cases[i].v);
    }
}

int main(void)
{
    test_shortest();
    test_floor();
    test_grammar();
    test_bounds();
    test_lines();
    test_check();
    test_env();
    return CHECK_DONE();
}
