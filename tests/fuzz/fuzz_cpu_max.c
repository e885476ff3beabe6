/*
 * fuzz_cpu_max.c — libFuzzer target for sm__parse_cpu_max() (v2 cpu.max:
 * "QUOTA PERIOD" / "max PERIOD").  On success a limited quota comes with a
 * non-zero quota and period; "max" sets unlimited.
 */
#include <errno.h>
#include <stdlib.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    uint64_t quota = 1, period = 1;
    int unl = -1;
    int rc = sm__parse_cpu_max((const char *)data, size, &quota, &period, &unl);

    if (rc == 0) {
        if (unl != 0 && unl != 1)
            abort();
        if (!unl && (quota == 0 || period == 0))
            abort();
    } else if (rc != -EINVAL && rc != -ERANGE) {
        abort();
    }
    return 0;
}
