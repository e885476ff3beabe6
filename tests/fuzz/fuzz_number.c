/*
 * fuzz_number.c — libFuzzer target for sm__parse_number() (memory.max,
 * memory.limit_in_bytes, cpu.cfs_quota_us, memory.peak, ...) and the
 * decimal scanner sm__scan_u64() every parser is built on.
 */
#include <errno.h>
#include <stdlib.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *buf = (const char *)data, *p = buf;
    uint64_t v = 0;
    int unl = -1;
    int rc = sm__parse_number(buf, size, &v, &unl);

    if (rc == 0 && unl != 0 && unl != 1)
        abort();
    if (rc == 0 && unl == 1 && v != 0) /* "max" / -1 carry no number */
        abort();

    rc = sm__scan_u64(&p, buf + size, &v);
    if (rc == 0 && (p <= buf || p > buf + size)) /* advanced, within bounds */
        abort();
    if (rc < 0 && p != buf) /* on failure *p is untouched */
        abort();
    return 0;
}
