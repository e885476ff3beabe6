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
#include <stdint.h>
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
    /* the recording process and its descendants (docs/design.md §9): per
     * rank, never per node (ranks of one node are different trees) */
    {"process_", "process_", "process", 0},
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

/* The node tier is at most NODE_SEGMENT_MAX characters, so every key fits
 * MLflow's SM_MLFLOW_KEY_MAX (250) whatever the rank:
 *   250 - 7 ("system/") - 48 (room for the scoped key; the longest today,
 *   node_cpu_utilization_percentage, has 31) - 5 ("/rank") - 10 (digits of
 *   the largest rank) = 180.
 * Kubernetes node names may have 253 characters.  A longer name keeps its
 * first 171 characters and gets "-" + 8 hex digits of its FNV-1a hash: the
 * same for every series and rank of that node (the UI groups them), distinct
 * for names that differ only at their end.  A name that lost characters to
 * '_' gets the same suffix: "東京ノード1" and "大阪ノード1" would both read
 * "_______________1".  The full name is in the run tag
 * scopemeter.rankN.node (docs/design.md §2, §3). */
#define NODE_SEGMENT_MAX 180
#define SCOPED_KEY_ROOM 48

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;

    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 16777619u;
    }
    return h;
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
        size_t nl = strlen(node), keep = nl, lossy = 0;
        for (size_t i = 0; i < nl; i++)
            lossy += !node_char_ok(node[i]);
        if ((nl > NODE_SEGMENT_MAX || lossy) && nl > NODE_SEGMENT_MAX - 9)
            keep = NODE_SEGMENT_MAX - 9; /* the suffix fits in the tier's maximum */
        if (len + 1 + keep + (keep < nl || lossy ? 9 : 0) >= outlen)
            return -ENOSPC;
        out[len++] = '/';
        for (size_t i = 0; i < keep; i++)
            out[len++] = node_char_ok(node[i]) ? node[i] : '_';
        if (keep < nl || lossy)
            len += (size_t)snprintf(out + len, outlen - len, "-%08x", fnv1a(node));
        out[len] = '\0';
    }
    n = snprintf(out + len, outlen - len, "/rank%d", rank);
    if (n < 0 || (size_t)n >= outlen - len)
        return -ENOSPC;
    /* a scoped key longer than the room kept for it: a family's bug, caught
     * by the tests, never a key MLflow refuses at run time */
    if (len + (size_t)n > SM_MLFLOW_KEY_MAX)
        return -ENAMETOOLONG;
    return 0;
}
