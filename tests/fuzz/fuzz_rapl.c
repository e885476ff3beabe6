/*
 * fuzz_rapl.c — libFuzzer target for the RAPL powercap parsers
 * (src/parse/parse_rapl.c): an energy counter, a zone's name, and the
 * wrap-safe step between two readings.
 *
 * Properties beyond "no crash, no sanitizer report": only the documented
 * codes come back; an accepted counter is what the text says (printed back
 * with its newline it is the input, or the input without one); an accepted
 * package label is NUL-terminated within its room and starts "package"; the
 * step between two accepted readings under a range never exceeds the range.
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
    char label[24], back[32];
    uint64_t v;
    int rc;

    rc = sm__parse_rapl_uj(buf, size, &v);
    if (rc != 0 && rc != -EINVAL && rc != -ERANGE)
        abort();
    if (rc == 0) {
        int n = snprintf(back, sizeof back, "%" PRIu64 "\n", v);
        size_t want = size && buf[size - 1] == '\n' ? size : size + 1;
        if ((size_t)n != want || memcmp(back, buf, size) != 0)
            abort();
    }
    rc = sm__parse_rapl_name(buf, size, label, sizeof label);
    if (rc != 0 && rc != 1 && rc != -EINVAL && rc != -ENAMETOOLONG)
        abort();
    if (rc == 1 && (!memchr(label, '\0', sizeof label) || strncmp(label, "package", 7) != 0))
        abort();
    /* two readings and a range from the bytes: the first 24 bytes */
    if (size >= 24) {
        uint64_t last, now, max;
        memcpy(&last, data, 8);
        memcpy(&now, data + 8, 8);
        memcpy(&max, data + 16, 8);
        if (last <= max && now <= max && sm__rapl_delta(last, now, max) > max)
            abort(); /* more than one wrap's worth: a second wrap counted */
    }
    return 0;
}
