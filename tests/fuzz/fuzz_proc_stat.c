/*
 * fuzz_proc_stat.c — libFuzzer target for sm__parse_proc_stat(), the psutil
 * formula sm__cpu_percent() that consumes its output, and the online-CPU count
 * sm__count_stat_cpus() (/proc/stat is outside input: any kernel, any
 * container runtime's fake /proc such as LXCFS).
 *
 * The input buffer libFuzzer passes is exactly `size` bytes of heap, not
 * NUL-terminated, so ASan catches any read past len.  Besides "no crash, no
 * UB", the target checks the parser's promises and aborts when one breaks.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *buf = (const char *)data;
    sm_cpu_times a, b;
    size_t half = size / 2;
    unsigned ncpu = 7;
    int rc = sm__count_stat_cpus(buf, size, &ncpu);

    if ((rc == 0 && ncpu == 0) || (rc < 0 && (rc != -ENOENT || ncpu != 0)))
        abort();

    if (sm__parse_proc_stat(buf, size, &a) == 0) {
        if (a.nfields < 4 || a.nfields > 10)
            abort();
        for (int i = a.nfields; i < 10; i++)
            if (a.f[i] != 0) /* absent fields read as 0 */
                abort();
        /* two samples: the whole input, and its second half when that parses */
        memset(&b, 0, sizeof b);
        (void)sm__parse_proc_stat(buf + half, size - half, &b);
        double p1 = sm__cpu_percent(&a, &b), p2 = sm__cpu_percent(&b, &a);
        double p3 = sm__cpu_percent(&a, &a);
        if (!isfinite(p1) || p1 < 0 || p1 > 100 || !isfinite(p2) || p2 < 0 || p2 > 100 ||
            p3 != 0.0)
            abort();
    }
    return 0;
}
