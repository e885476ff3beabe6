/*
 * fuzz_smaps_rollup.c — libFuzzer target for sm__parse_kb(), the "Key: N kB"
 * reader of /proc/PID/smaps_rollup (Pss, the process tree's memory) and
 * /proc/PID/status (VmRSS, its fallback before kernel 4.14), docs/design.md
 * §9.  When the input starts with '#', its first line is the key and the
 * rest the file, so keys are explored too (prefixes, empty, no colon).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static const char *const keys[] = {"Pss:", "Rss:", "VmRSS:", "Pss_Anon:", "SwapPss:"};

static void check(int rc, uint64_t kb)
{
    if (rc != 0 && rc != -ENOENT && rc != -EINVAL && rc != -ERANGE)
        abort();
    if (rc == 0 && kb > UINT64_MAX / 1024)
        abort(); /* the caller multiplies by 1024 */
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *buf = (const char *)data;
    uint64_t kb = 0;

    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        check(sm__parse_kb(buf, size, keys[i], &kb), kb);
    if (size > 0 && buf[0] == '#') {
        const char *nl = memchr(buf, '\n', size);
        size_t kl = nl ? (size_t)(nl - buf) - 1 : size - 1;
        char key[64];
        if (kl >= sizeof key)
            kl = sizeof key - 1;
        memcpy(key, buf + 1, kl);
        key[kl] = '\0';
        const char *rest = nl ? nl + 1 : buf + size;
        check(sm__parse_kb(rest, size - (size_t)(rest - buf), key, &kb), kb);
    }
    return 0;
}
