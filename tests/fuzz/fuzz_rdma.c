/*
 * fuzz_rdma.c — libFuzzer target for the RDMA sysfs parsers
 * (src/parse/parse_rdma.c): a port counter, a port state, a uverbs node's ibdev.
 *
 * Properties beyond "no crash, no sanitizer report": only the documented
 * codes come back; an accepted counter is what the text says (printed back
 * with its newline it is the input, or the input without one); an accepted
 * state name and device name are NUL-terminated within their room and
 * hold no control byte, a device name no '/'.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *buf = (const char *)data;
    char name[24], dev[64], back[32];
    uint64_t v;
    unsigned num;
    int rc;

    rc = sm__parse_rdma_counter(buf, size, &v);
    if (rc != 0 && rc != -EINVAL && rc != -ERANGE)
        abort();
    if (rc == 0) {
        int n = snprintf(back, sizeof back, "%" PRIu64 "\n", v);
        size_t want = size && buf[size - 1] == '\n' ? size : size + 1;
        if ((size_t)n != want || memcmp(back, buf, size) != 0)
            abort(); /* a leading zero or anything else the kernel never prints */
    }
    rc = sm__parse_rdma_state(buf, size, &num, name, sizeof name);
    if (rc != 0 && rc != -EINVAL && rc != -ERANGE)
        abort();
    if (rc == 0) {
        if (num > 255 || !memchr(name, '\0', sizeof name))
            abort();
        for (const char *c = name; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                abort();
    }
    rc = sm__parse_rdma_ibdev(buf, size, dev, sizeof dev);
    if (rc != 0 && rc != -EINVAL && rc != -ENAMETOOLONG)
        abort();
    if (rc == 0 && (!dev[0] || strchr(dev, '/') || strlen(dev) >= 64))
        abort();
    return 0;
}
