/*
 * parse_gpu.c — pure parsers of the amdgpu driver's text files the AMD GPU
 * collector reads (coll_amdgpu.c).  No I/O here: callers pass what they
 * read, the fuzz target (tests/fuzz/fuzz_pp_dpm.c) passes anything.
 */
#include <errno.h>
#include <strings.h>

#include "parse.h"

/*
 * pp_dpm_sclk / pp_dpm_mclk (Documentation/gpu/amdgpu/thermal.rst, "pp_dpm_*":
 * "the available power levels ... The current level is marked with a *"):
 * one line per level, "<level>: <N>Mhz" with " *" after the current one;
 * the level is a number or, on newer parts, "S" (the deep-sleep level).
 */
int sm__parse_pp_dpm(const char *buf, size_t len, uint64_t *mhz)
{
    const char *p = buf, *end = buf + len;

    while (p < end) {
        const char *eol = p, *q;
        uint64_t v;
        int star = 0;

        while (eol < end && *eol != '\n')
            eol++;
        q = p;
        while (q < eol && *q != ':')
            q++;
        if (q == eol)
            return -EINVAL; /* not "<level>: ..." */
        q++;
        while (q < eol && *q == ' ')
            q++;
        if (sm__scan_u64(&q, eol, &v) < 0)
            return -EINVAL;
        if (eol - q < 3 || strncasecmp(q, "mhz", 3) != 0)
            return -EINVAL;
        for (q += 3; q < eol; q++) {
            if (*q == '*')
                star = 1;
            else if (*q != ' ')
                return -EINVAL;
        }
        if (star) {
            *mhz = v;
            return 0;
        }
        p = eol < end ? eol + 1 : end;
    }
    return -ENOENT; /* no current level (a part that does not say) */
}
