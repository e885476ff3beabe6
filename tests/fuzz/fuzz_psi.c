/*
 * fuzz_psi.c — libFuzzer target for sm__parse_psi_some(), the reader of a PSI
 * file (memory.pressure, cpu.pressure; Documentation/accounting/psi.rst):
 * the "some" line's total=, in µs.
 *
 * Oracle: on success the digits after the some line's "total=" are exactly
 * the value returned (re-scanned here with sm__scan_u64 from the text).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *buf = (const char *)data, *end = buf + size;
    uint64_t t = 0, u = 0;
    int rc = sm__parse_psi_some(buf, size, &t);

    if (rc != 0 && rc != -ENOENT && rc != -EINVAL && rc != -ERANGE)
        abort();
    if (rc == 0) {
        /* the first "some " line holds " total=" (or starts its fields with it) */
        const char *p = buf;
        while (p < end && !(end - p >= 5 && memcmp(p, "some ", 5) == 0 &&
                            (p == buf || p[-1] == '\n'))) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            p = nl ? nl + 1 : end;
        }
        if (p >= end)
            abort();
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        const char *q = p + 4;
        while (q < eol && !(q[0] == ' ' && eol - q > 7 && memcmp(q + 1, "total=", 6) == 0))
            q++;
        if (q >= eol)
            abort();
        q += 7;
        if (sm__scan_u64(&q, eol, &u) != 0 || u != t)
            abort();
    }
    return 0;
}
