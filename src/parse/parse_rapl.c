/*
 * parse_rapl.c — pure parsers of the powercap files the CPU package energy
 * collector reads (coll_rapl.c): a zone's energy counter and its range, its
 * name, and the wrap-safe step between two readings.  No I/O here: callers
 * pass what they read, the fuzz target (tests/fuzz/fuzz_rapl.c) passes
 * anything.  Never accept a number the kernel would not print, nor count a
 * step larger than the counter's range: either becomes made-up energy in a
 * tag that sums the whole run.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "parse.h"

/*
 * energy_uj and max_energy_range_uj: drivers/powercap/powercap_sys.c
 * (define_power_zone_show) prints the u64 with "%lld\n": a bare decimal and
 * a newline.  A '-' would be a value at or above 2^63 printed signed, which
 * no RAPL counter reaches (a 32-bit MSR times its energy unit,
 * drivers/powercap/intel_rapl_common.c): -EINVAL, as empty text, spaces, a
 * leading zero or a second line; above 64 bits -ERANGE.
 */
int sm__parse_rapl_uj(const char *buf, size_t len, uint64_t *out)
{
    const char *p = buf, *end = buf + (len > 0 && buf[len - 1] == '\n' ? len - 1 : len);
    uint64_t v;
    int rc = sm__scan_u64(&p, end, &v);

    if (rc < 0)
        return rc;
    if (p != end || (buf[0] == '0' && p - buf > 1))
        return -EINVAL;
    *out = v;
    return 0;
}

/* Digits at *p up to end or a '-', as an unsigned below 2^16; 0 or -EINVAL. */
static int small_number(const char **p, const char *end, unsigned *out)
{
    unsigned v = 0;
    const char *s = *p;

    while (*p < end && **p >= '0' && **p <= '9') {
        v = v * 10 + (unsigned)(**p - '0');
        if (v > 0xffff)
            return -EINVAL;
        (*p)++;
    }
    if (*p == s || (s[0] == '0' && *p - s > 1))
        return -EINVAL;
    *out = v;
    return 0;
}

/*
 * A zone's name (drivers/powercap/intel_rapl_common.c rapl_add_package: the
 * package zone is "package-%d", or "package-%d-die-%d" where a package has
 * several dies; its subzones and the platform zone are "core", "uncore",
 * "dram", "psys").  1 for a package, its label "package0" / "package1_die0"
 * in label; 0 for another domain's name (label untouched); -EINVAL for
 * empty text or a control byte; -ENAMETOOLONG when label cannot hold it.
 */
int sm__parse_rapl_name(const char *buf, size_t len, char *label, size_t cap)
{
    const char *p = buf, *end = buf + (len > 0 && buf[len - 1] == '\n' ? len - 1 : len);
    char tmp[24]; /* at most "package65535_die65535" and its NUL */
    unsigned pkg, die = 0;
    int has_die = 0, n;

    if (p == end)
        return -EINVAL;
    for (const char *c = p; c < end; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return -EINVAL;
    if (end - p < 9 || memcmp(p, "package-", 8) != 0)
        return 0;
    p += 8;
    if (small_number(&p, end, &pkg) < 0)
        return 0;
    if (p != end) {
        if (end - p < 6 || memcmp(p, "-die-", 5) != 0)
            return 0;
        p += 5;
        if (small_number(&p, end, &die) < 0 || p != end)
            return 0;
        has_die = 1;
    }
    n = has_die ? snprintf(tmp, sizeof tmp, "package%u_die%u", pkg, die)
                : snprintf(tmp, sizeof tmp, "package%u", pkg);
    if (n < 0 || (size_t)n >= cap)
        return -ENAMETOOLONG;
    memcpy(label, tmp, (size_t)n + 1);
    return 1;
}

/*
 * The energy between two readings of one counter whose values run 0..max
 * (max_energy_range_uj) and then start again at 0: now - last, or across
 * one wrap (max - last) + now.  The counter's last step below the wrap (one
 * energy unit: max is (2^32 - 1) units,
 * drivers/powercap/intel_rapl_common.c get_max_energy_counter) is not counted: 61 uJ on most parts, far below
 * the tag's 3.6 J.  Readings taken every sample are minutes apart from a
 * second wrap (262 kJ at 400 W: 11 minutes).  A last reading above max
 * (never from the kernel) counts now alone.
 */
uint64_t sm__rapl_delta(uint64_t last, uint64_t now, uint64_t max)
{
    if (now >= last)
        return now - last;
    if (last > max)
        return now;
    return (max - last) + now;
}
