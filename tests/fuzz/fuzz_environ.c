/*
 * fuzz_environ.c — libFuzzer target for sm__environ_int, the reader of
 * /proc/PID/environ the GPU collector uses to tell which rank a process
 * holding GPU memory belongs to (docs/gpu.md, "Who holds the GPU's memory").
 *
 * Properties beyond "no crash, no sanitizer report": only the documented
 * codes come back, and a value read is in [0, INT_MAX].
 */
#include <errno.h>
#include <stdlib.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *buf = (const char *)data;
    int v = -1, rc = sm__environ_int(buf, size, "RANK", &v);

    if (rc != 0 && rc != -ENOENT && rc != -EINVAL && rc != -ERANGE)
        abort();
    if (rc == 0 && v < 0)
        abort();
    return 0;
}
