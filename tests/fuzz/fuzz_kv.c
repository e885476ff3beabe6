/*
 * fuzz_kv.c — libFuzzer target for sm__parse_kv(), the "key value" reader of
 * memory.stat, memory.events, cpu.stat (v1 and v2) and memory.oom_control.
 *
 * Every key the container collector asks for is looked up in the same
 * buffer.  In addition, when the input starts with '#', its first line is
 * taken as the key and the rest as the file, so the fuzzer also explores
 * keys (prefixes of other keys, empty keys, keys with spaces).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static const char *const keys[] = {
    /* memory.stat v2 / v1 */
    "anon", "file", "inactive_file", "active_file", "total_inactive_file",
    "total_active_file", "total_rss", "total_cache", "hierarchical_memory_limit",
    /* memory.events */
    "oom", "oom_kill", "max", "high",
    /* cpu.stat v2 / v1 */
    "usage_usec", "user_usec", "system_usec", "nr_periods", "nr_throttled", "throttled_usec",
    "throttled_time",
    /* memory.oom_control (v1) */
    "under_oom", "oom_kill_disable",
};

static void check(int rc)
{
    if (rc != 0 && rc != -ENOENT && rc != -EINVAL && rc != -ERANGE)
        abort();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *buf = (const char *)data;
    uint64_t v;

    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        check(sm__parse_kv(buf, size, keys[i], &v));

    if (size > 0 && buf[0] == '#') {
        const char *nl = memchr(buf, '\n', size);
        size_t kl = nl ? (size_t)(nl - buf) - 1 : size - 1;
        char key[64];
        if (kl >= sizeof key)
            kl = sizeof key - 1;
        memcpy(key, buf + 1, kl);
        key[kl] = '\0';
        const char *rest = nl ? nl + 1 : buf + size;
        check(sm__parse_kv(rest, size - (size_t)(rest - buf), key, &v));
    }
    return 0;
}
