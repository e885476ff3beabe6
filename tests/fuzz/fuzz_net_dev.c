/*
 * fuzz_net_dev.c — libFuzzer target for sm__parse_net_dev() (/proc/net/dev,
 * summed over interfaces; overflow of the sums must be reported, not wrap).
 */
#include <errno.h>
#include <stdlib.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    uint64_t rx = 0, tx = 0;
    int rc = sm__parse_net_dev((const char *)data, size, &rx, &tx);

    if (rc != 0 && rc != -ENOENT && rc != -EINVAL && rc != -ERANGE)
        abort();
    return 0;
}
