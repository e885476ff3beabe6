/*
 * fuzz_mountinfo.c — libFuzzer target for sm__mountinfo_next() over a whole
 * /proc/self/mountinfo, and sm__unescape_octal() on every root and mount point
 * it returns (into a full-size buffer and into a small one, so both the
 * success and the -ENAMETOOLONG paths run).
 *
 * Checks the iterator's promises: every field lies inside the buffer, *pos
 * only moves forward and stays within len, and the walk ends.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "parse.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static void inside(const char *buf, size_t len, const char *f, size_t flen)
{
    if (flen > 0 && (f < buf || f + flen > buf + len))
        abort();
}

static void unescape(const char *s, size_t len)
{
    char big[SM_PATH_MAX], small[8];
    int rc = sm__unescape_octal(s, len, big, sizeof big);

    if (rc == 0 && strlen(big) > len) /* unescaping never lengthens */
        abort();
    if (rc != 0 && rc != -EINVAL && rc != -ENAMETOOLONG)
        abort();
    rc = sm__unescape_octal(s, len, small, sizeof small);
    if (rc == 0 && strlen(small) >= sizeof small)
        abort();
    (void)sm__unescape_octal(s, len, small, 0);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *buf = (const char *)data;
    size_t pos = 0, prev = 0;
    sm_mount m;
    int rc, n = 0;

    while ((rc = sm__mountinfo_next(buf, size, &pos, &m)) == 1) {
        if (pos <= prev || pos > size)
            abort();
        prev = pos;
        inside(buf, size, m.root, m.root_len);
        inside(buf, size, m.point, m.point_len);
        inside(buf, size, m.fstype, m.fstype_len);
        inside(buf, size, m.super, m.super_len);
        unescape(m.root, m.root_len);
        unescape(m.point, m.point_len);
        if (++n > (int)size + 1) /* at most one entry per line */
            abort();
    }
    if (rc != 0 && rc != -EINVAL)
        abort();
    return 0;
}
