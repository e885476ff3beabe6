/*
 * test_round1.c — sm__round1 (src/collect/collectors.c) computes by arithmetic below
 * 2^48 what printf("%.1f") + strtod computed (and still computes above):
 * the same double, bit for bit, -0 included, on every value tried — random
 * bit patterns, every magnitude, the exact ties (odd/4: 0.25, 0.75, ...),
 * the doubles nearest to the half-tenths (k/20 for odd k: 2.675, 1e13+0.05)
 * and their neighbours, subnormals, negatives, the edge at 2^48 and huge
 * values.  SM_TEST_ROUND1_VALUES scales it (default 3 million).
 *
 * With a file argument (tests/py/test_round1.py): lines "x y" in C99 hex
 * floats, y being Python's round(x, 1); every one must match.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"

static uint64_t seed = 0x2545F4914F6CDD1Dull;

static uint64_t rnd(void)
{
    return check_rnd(&seed);
}

static double printf_round1(double v)
{
    char buf[512];

    if (!isfinite(v))
        return v;
    snprintf(buf, sizeof buf, "%.1f", v);
    return strtod(buf, NULL);
}

static size_t tried, bad;

static void one(double x)
{
    double got = sm__round1(x), want = printf_round1(x);

    tried++;
    if (memcmp(&got, &want, sizeof got) != 0 && !(isnan(got) && isnan(want))) {
        if (bad++ < 10)
            fprintf(stderr, "sm__round1(%a = %.17g) = %.17g, printf+strtod %.17g\n", x, x, got,
                    want);
    }
}

/* x and its neighbours, both signs */
static void around(double x, int ulps)
{
    double lo = x, hi = x;

    one(x);
    one(-x);
    for (int i = 0; i < ulps; i++) {
        lo = nextafter(lo, -INFINITY);
        hi = nextafter(hi, INFINITY);
        one(lo);
        one(hi);
        one(-lo);
        one(-hi);
    }
}

static double uniform(void)
{
    return (double)(rnd() >> 11) * 0x1p-53;
}

static void test_values(size_t count)
{
    static const double fixed[] = {
        0.0, 0.05, 0.15, 0.25, 0.35, 0.45, 0.75, 1.25, 2.5, 2.675, 2.25, 0.95, 9.95, 99.95,
        1e15 + 0.05, 1e14 + 0.05, 1e13 + 0.05, 4.5e14, 0x1p48, 0x1p49, 0x1p52, 0x1p53,
        1e300, 1.7976931348623157e308, 4.9e-324, 2.2250738585072014e-308, 0x1p-1074,
        0.049999999999999996, 0.04999999999999999, 0.1, 0.2, 0.3, 0.7, 1.05, 1.15,
        123456.75, 281474976710655.5, 281474976710655.25, 140737488355327.75,
    };
    size_t start = tried;

    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        around(fixed[i], 8);
    one(NAN);
    one(INFINITY);
    one(-INFINITY);
    while (tried - start < count) {
        uint64_t bits = rnd();
        double x;
        int64_t k;

        switch (rnd() % 8) {
        case 0: /* any bit pattern */
            memcpy(&x, &bits, sizeof x);
            one(x);
            break;
        case 1: /* every magnitude up to past the edge */
            x = uniform() * ldexp(1.0, (int)(rnd() % 72) - 20);
            one(rnd() % 2 ? x : -x);
            break;
        case 2: /* exact ties: odd multiples of 1/4 */
            k = (int64_t)(rnd() % (1ull << (rnd() % 51))) | 1;
            around((double)k / 4.0, 2);
            break;
        case 3: /* the doubles nearest the half-tenths, k/20 for odd k */
            k = (int64_t)(rnd() % (1ull << (rnd() % 54))) | 1;
            around((double)k / 20.0, 3);
            break;
        case 4: /* logged values and their neighbours: k/10 */
            k = (int64_t)(rnd() % (1ull << (rnd() % 54)));
            around((double)k / 10.0, 2);
            break;
        case 5: /* subnormals and tiny */
            x = uniform() * ldexp(1.0, -(int)(rnd() % 1080));
            one(rnd() % 2 ? x : -x);
            break;
        case 6: /* at the edge, 2^48 */
            around(0x1p48 - (double)(rnd() % 64) * 0.0625, 1);
            break;
        default: /* the usual: percentages, megabytes */
            x = uniform() * 100000.0;
            one(rnd() % 2 ? x : -x);
        }
    }
}

static int test_file(const char *path)
{
    FILE *f = fopen(path, "r");
    char a[64], b[64];
    size_t lines = 0, wrong = 0;

    if (!f) {
        perror(path);
        return 2;
    }
    while (fscanf(f, "%63s %63s", a, b) == 2) {
        double x = strtod(a, NULL), want = strtod(b, NULL), got = sm__round1(x);
        lines++;
        if (memcmp(&got, &want, sizeof got) != 0 && wrong++ < 10)
            fprintf(stderr, "sm__round1(%s) = %a, Python's round %s\n", a, got, b);
    }
    fclose(f);
    printf("test_round1: %zu values from %s, %zu differ from Python's round\n", lines, path,
           wrong);
    return lines == 0 || wrong != 0;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        return test_file(argv[1]);
    test_values(check_env_count("SM_TEST_ROUND1_VALUES", 3000000));
    printf("test_round1: %zu values, %zu differ from printf+strtod\n", tried, bad);
    CHECK(tried >= 1000);
    CHECK_EQ_INT(bad, 0);
    return CHECK_DONE();
}
