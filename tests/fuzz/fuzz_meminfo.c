/*
 * fuzz_meminfo.c — libFuzzer target for sm__parse_meminfo() (/proc/meminfo).
 * Checks the parser's promises on success: total > 0, available <= total,
 * estimated is 0 or 1.
 */
#include <stdlib.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    uint64_t total = 0, avail = 0;
    int est = -1;

    if (sm__parse_meminfo((const char *)data, size, &total, &avail, &est) == 0) {
        if (total == 0 || avail > total || (est != 0 && est != 1))
            abort();
    }
    return 0;
}
