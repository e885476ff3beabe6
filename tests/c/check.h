/*
 * check.h — the C unit tests' few macros.  Each test file's main() runs its
 * cases and ends with CHECK_DONE(), which prints "N passed, N failed" and
 * returns non-zero when anything failed.
 */
#ifndef SM_CHECK_H
#define SM_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The randomized tests' generator (xorshift64): *state starts at any
 * non-zero value of the test's own, so a failure replays. */
static inline uint64_t check_rnd(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* How many cases a randomized test runs: the environment variable name, or
 * dflt when it is unset or empty (a longer run by hand). */
static inline size_t check_env_count(const char *name, size_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? (size_t)strtoull(v, NULL, 10) : dflt;
}

static int check_pass, check_fail;

#define CHECK(cond)                                                                         \
    do {                                                                                    \
        if (cond) {                                                                         \
            check_pass++;                                                                   \
        } else {                                                                            \
            check_fail++;                                                                   \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);        \
        }                                                                                   \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                  \
    do {                                                                                    \
        long long va_ = (long long)(a), vb_ = (long long)(b);                               \
        if (va_ == vb_) {                                                                   \
            check_pass++;                                                                   \
        } else {                                                                            \
            check_fail++;                                                                   \
            fprintf(stderr, "%s:%d: %s == %lld, want %lld\n", __FILE__, __LINE__, #a, va_,  \
                    vb_);                                                                   \
        }                                                                                   \
    } while (0)

#define CHECK_EQ_STR(a, b)                                                                  \
    do {                                                                                    \
        const char *sa_ = (a), *sb_ = (b);                                                  \
        if (sa_ && sb_ && strcmp(sa_, sb_) == 0) {                                          \
            check_pass++;                                                                   \
        } else {                                                                            \
            check_fail++;                                                                   \
            fprintf(stderr, "%s:%d: %s == \"%s\", want \"%s\"\n", __FILE__, __LINE__, #a,   \
                    sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)");                            \
        }                                                                                   \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                               \
    do {                                                                                    \
        double da_ = (a), db_ = (b);                                                        \
        if (fabs(da_ - db_) <= (tol)) {                                                     \
            check_pass++;                                                                   \
        } else {                                                                            \
            check_fail++;                                                                   \
            fprintf(stderr, "%s:%d: %s == %.6f, want %.6f\n", __FILE__, __LINE__, #a, da_,  \
                    db_);                                                                   \
        }                                                                                   \
    } while (0)

#define CHECK_DONE()                                                                        \
    (printf("%s: %d passed, %d failed\n", __FILE__, check_pass, check_fail),               \
     check_fail ? 1 : 0)

#endif
