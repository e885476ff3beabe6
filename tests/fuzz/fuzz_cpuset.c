/*
 * fuzz_cpuset.c — libFuzzer target for sm__parse_cpulist() (cpuset.cpus,
 * cpuset.cpus.effective, /sys/devices/system/cpu/online: "0-3,8-11").
 * On success the count is at most the span of CPU ids the list can name.
 */
#include <errno.h>
#include <stdlib.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    unsigned n = 12345;
    int rc = sm__parse_cpulist((const char *)data, size, &n);

    if (rc == 0 && n > (1u << 20)) /* parse_cgroup.c accepts ids below 2^20 */
        abort();
    if (rc < 0 && (n != 0 || (rc != -EINVAL && rc != -ERANGE)))
        abort();
    return 0;
}
