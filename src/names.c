/*
 * names.c — the naming rule of docs/design.md §2, a pure function of
 * (upstream key, rank, node).
 *
 * MLflow's own monitor logs every key under one "system/" prefix although they
 * measure four scopes.  The rule renames by family, never by a list of keys,
 * so a future key of a known family follows by itself; a key of a family no
 * rule covers is an error (-EINVAL) that the tests catch.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

struct family {
    const char *upstream; /* prefix as MLflow (or our collectors) write it */
    const char *scoped;   /* prefix in the logged key */
    const char *scope;
    int node_tier;        /* node-scope facts get /NODE before the rank */
};

static const struct family families[] = {
    {"cpu_", "node_cpu_", "node", 1},
    {"system_memory_", "node_memory_", "node", 1},
    {"disk_", "rootfs_", "rootfs", 1},
    {"network_", "network_", "pod", 0},
    {"gpu_", "gpu_", "gpu", 0},
    {"container_", "container_", "container", 0},
};

static const struct family *family_of(const char *key)
{
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (strncmp(key, families[i].upstream, strlen(families[i].upstream)) == 0)
            return &families[i];
    return NULL;
}

const char *sm_series_scope(const char *key)
{
    const struct family *f;

    if (!key)
        return NULL;
    if (strncmp(key, "system/", 7) == 0)
        key += 7;
    f = family_of(key);
    if (f)
        return f->scope;
    /* already scoped keys */
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (strncmp(key, families[i].scoped, strlen(families[i].scoped)) == 0)
            return families[i].scope;
    return NULL;
}

/* A key segment may hold what MLflow accepts in a key and must not hold '/',
 * which would make a new UI section: anything else becomes '_'. */
static int node_char_ok(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_';
}

int sm_series_name(const char *upstream_key, int rank, const char *node, char *out, size_t outlen)
{
    const struct family *f;
    const char *rest;
    size_t len = 0;
    int n;

    if (!upstream_key || !out || outlen == 0 || rank < 0)
        return -EINVAL;
    f = family_of(upstream_key);
    if (!f)
        return -EINVAL;
    rest = upstream_key + strlen(f->upstream);
    if (*rest == '\0')
        return -EINVAL;
    n = snprintf(out, outlen, "system/%s%s", f->scoped, rest);
    if (n < 0 || (size_t)n >= outlen)
        return -ENOSPC;
    len = (size_t)n;
    if (f->node_tier && node && *node) {
        size_t nl = strlen(node);
        if (len + 1 + nl >= outlen)
            return -ENOSPC;
        out[len++] = '/';
        for (size_t i = 0; i < nl; i++)
            out[len++] = node_char_ok(node[i]) ? node[i] : '_';
        out[len] = '\0';
    }
    n = snprintf(out + len, outlen - len, "/rank%d", rank);
    if (n < 0 || (size_t)n >= outlen - len)
        return -ENOSPC;
    return 0;
}
