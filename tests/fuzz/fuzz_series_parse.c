/*
 * fuzz_series_parse.c — libFuzzer target for sm_series_parse(), which the
 * report runs on every metric key of a run (outside input: any program may
 * log any key).  It must return 0 or -EINVAL, never read past the key, and
 * be exact: every key it accepts with a tier of at most 180 characters is
 * what sm_series_name writes for its parts (a longer tier, written by engines
 * before the length rule, is the one accepted superset: docs/design.md §2).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char key[512], up[512], sc[512], node[512], again[512];
    const char *scope = NULL;
    int rank = -1, rc;

    if (size >= sizeof key)
        return 0;
    memcpy(key, data, size);
    key[size] = '\0';
    rc = sm_series_parse(key, up, sizeof up, sc, sizeof sc, node, sizeof node, &rank, &scope);
    if (rc == -EINVAL)
        return 0;
    if (rc != 0 || rank < 0 || !scope || strcmp(scope, sm_series_scope(up)) != 0)
        abort();
    if (strlen(node) <= 180 &&
        (sm_series_name(up, rank, node, again, sizeof again) != 0 || strcmp(again, key) != 0))
        abort();
    return 0;
}
