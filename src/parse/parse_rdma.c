/*
 * parse_rdma.c — pure parsers of the RDMA files of sysfs the interconnect
 * collector reads (coll_rdma.c): a port's counters, its state, and the
 * device name of a uverbs node.  No I/O here: callers pass what they read,
 * the fuzz target (tests/fuzz/fuzz_rdma.c) passes anything.  Never accept
 * a number the kernel would not print: a counter read wrong becomes a
 * made-up byte count in a cumulative series.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "parse.h"

/* The text's end without the one newline sysfs_emit's formats end in. */
static size_t strip_nl(const char *buf, size_t len)
{
    return len > 0 && buf[len - 1] == '\n' ? len - 1 : len;
}

/*
 * One counter: drivers/infiniband/core/sysfs.c prints the PMA counters
 * (show_pma_counter: "%u\n" for widths up to 32 bits, "%llu\n" for 64) and
 * the driver's hw_counters (print_hw_stat: "%llu\n") as a bare decimal and a
 * newline.  Anything else (empty, a sign, spaces, a leading zero, a second
 * line) is -EINVAL; above 64 bits -ERANGE.
 */
int sm__parse_rdma_counter(const char *buf, size_t len, uint64_t *out)
{
    const char *p = buf, *end = buf + strip_nl(buf, len);
    uint64_t v;
    int rc = sm__scan_u64(&p, end, &v);

    if (rc < 0)
        return rc;
    if (p != end || (buf[0] == '0' && p - buf > 1))
        return -EINVAL; /* a leading zero: not the kernel's %u / %llu */
    *out = v;
    return 0;
}

/*
 * ports/N/state and ports/N/phys_state (drivers/infiniband/core/sysfs.c
 * state_show, phys_state_show): "%d: %s\n", the number of enum
 * ib_port_state ("4: ACTIVE") or of enum ib_port_phys_state ("5: LinkUp").  The number and the name, cut to
 * namecap - 1 bytes; the name may hold spaces ("7: Phy Test").
 */
int sm__parse_rdma_state(const char *buf, size_t len, unsigned *num, char *name, size_t namecap)
{
    const char *p = buf, *end = buf + strip_nl(buf, len);
    uint64_t v;
    size_t n;
    int rc = sm__scan_u64(&p, end, &v);

    if (rc < 0)
        return rc;
    if (v > 255)
        return -ERANGE; /* both enums are a u8 of the port attributes */
    if (end - p < 3 || p[0] != ':' || p[1] != ' ')
        return -EINVAL;
    p += 2;
    for (const char *c = p; c < end; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return -EINVAL;
    n = (size_t)(end - p);
    if (namecap) {
        if (n >= namecap)
            n = namecap - 1;
        memcpy(name, p, n);
        name[n] = '\0';
    }
    *num = (unsigned)v;
    return 0;
}

/*
 * /sys/class/infiniband_verbs/uverbsN/ibdev
 * (drivers/infiniband/core/uverbs_main.c, ibdev_show: "%s\n" of dev_name):
 * the device's name, which names its directory in /sys/class/infiniband.
 * A name is one path segment of at most IB_DEVICE_NAME_MAX (64) bytes
 * including its NUL (linux/include/rdma/ib_verbs.h): -EINVAL for an empty
 * one, '/', a control byte, "." or ".."; -ENAMETOOLONG when longer or when
 * cap cannot hold it.
 */
int sm__parse_rdma_ibdev(const char *buf, size_t len, char *out, size_t cap)
{
    size_t n = strip_nl(buf, len);

    if (n == 0)
        return -EINVAL;
    if (n >= 64 || n >= cap)
        return -ENAMETOOLONG;
    for (size_t i = 0; i < n; i++)
        if (buf[i] == '/' || (unsigned char)buf[i] <= 0x20 || buf[i] == 0x7f)
            return -EINVAL;
    if ((n == 1 && buf[0] == '.') || (n == 2 && buf[0] == '.' && buf[1] == '.'))
        return -EINVAL;
    memcpy(out, buf, n);
    out[n] = '\0';
    return 0;
}
