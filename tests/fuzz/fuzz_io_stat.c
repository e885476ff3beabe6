/*
 * fuzz_io_stat.c — libFuzzer target for the block I/O parsers of a cgroup:
 * sm__parse_io_stat() (v2 io.stat) and sm__parse_blkio_bytes() (v1
 * blkio.*io_service_bytes*), both on every input.
 *
 * Besides memory safety (the input is not NUL-terminated; ASan sees any read
 * past len), a property of the format: the sums are over lines, so when the
 * whole input parses, its halves split after any newline parse too and
 * their sums add up to the whole's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

typedef int (*parser)(const char *, size_t, uint64_t *, uint64_t *);

static void check(parser f, const char *buf, size_t size)
{
    uint64_t r = 0, w = 0, r1 = 0, w1 = 0, r2 = 0, w2 = 0;
    const char *nl;
    size_t cut;
    int rc = f(buf, size, &r, &w);

    if (rc != 0 && rc != -EINVAL && rc != -ERANGE)
        abort();
    if (rc != 0)
        return;
    nl = memchr(buf, '\n', size);
    if (!nl)
        return;
    cut = (size_t)(nl - buf) + 1;
    if (f(buf, cut, &r1, &w1) != 0 || f(buf + cut, size - cut, &r2, &w2) != 0)
        abort();
    if (r1 + r2 != r || w1 + w2 != w)
        abort();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    check(sm__parse_io_stat, (const char *)data, size);
    check(sm__parse_blkio_bytes, (const char *)data, size);
    return 0;
}
