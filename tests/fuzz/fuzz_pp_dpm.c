/*
 * fuzz_pp_dpm.c — libFuzzer target for sm__parse_pp_dpm, the reader of
 * amdgpu's pp_dpm_sclk / pp_dpm_mclk (the AMD collector's clocks).
 *
 * Properties beyond "no crash, no sanitizer report": only the documented
 * codes come back.
 */
#include <errno.h>
#include <stdlib.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    uint64_t mhz;
    int rc = sm__parse_pp_dpm((const char *)data, size, &mhz);

    if (rc != 0 && rc != -ENOENT && rc != -EINVAL && rc != -ERANGE)
        abort();
    return 0;
}
