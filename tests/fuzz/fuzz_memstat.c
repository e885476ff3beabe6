/*
 * fuzz_memstat.c — libFuzzer target for sm__parse_memstat() (memory.stat in one
 * pass: the working set's cache and its parts, v1 and v2) and
 * sm__parse_memory_events() (v2 memory.events), docs/design.md §9.
 *
 * Oracle: both pick "key value" lines as sm__parse_kv() reads one key, so on
 * success every key they report equals sm__parse_kv's answer for it, and
 * every key they do not report is absent for sm__parse_kv too.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static void check(int rc)
{
    if (rc != 0 && rc != -ENOENT && rc != -EINVAL && rc != -ERANGE)
        abort();
}

/* the picked value agrees with sm__parse_kv, or both say it is absent */
static void agree(const char *buf, size_t size, const char *key, int have, uint64_t v)
{
    uint64_t w = 0;
    int rc = sm__parse_kv(buf, size, key, &w);

    if (have ? (rc != 0 || w != v) : rc != -ENOENT)
        abort();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static const char *const k[2][4] = {
        {"inactive_file", "active_file", "anon", "shmem"},
        {"total_inactive_file", "total_active_file", "total_rss", "total_shmem"},
    };
    const char *buf = (const char *)data;
    sm_memstat m;
    sm_memevents e;
    int rc;

    for (int v1 = 0; v1 < 2; v1++) {
        rc = sm__parse_memstat(buf, size, v1, &m);
        check(rc);
        if (rc == 0 || rc == -ENOENT) {
            agree(buf, size, k[v1][0], m.have & SM_MS_INACTIVE_FILE, m.inactive_file);
            agree(buf, size, k[v1][1], m.have & SM_MS_ACTIVE_FILE, m.active_file);
            agree(buf, size, k[v1][2], m.have & SM_MS_ANON, m.anon);
            agree(buf, size, k[v1][3], m.have & SM_MS_SHMEM, m.shmem);
            if ((rc == 0) != !!(m.have & SM_MS_INACTIVE_FILE))
                abort();
        }
        (void)sm__memstat_missing(m.have, v1);
    }
    rc = sm__parse_memory_events(buf, size, &e);
    check(rc);
    if (rc == 0 || rc == -ENOENT) {
        agree(buf, size, "high", e.have & SM_ME_HIGH, e.high);
        agree(buf, size, "max", e.have & SM_ME_MAX, e.max);
        agree(buf, size, "oom", e.have & SM_ME_OOM, e.oom);
        agree(buf, size, "oom_kill", e.have & SM_ME_OOM_KILL, e.oom_kill);
        if ((rc == 0) != (e.have != 0))
            abort();
    }
    return 0;
}
