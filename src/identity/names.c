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
#include <limits.h>
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
    /* the RDMA ports granted to the pod (coll_rdma.c): the pod's, as its
     * network namespace's interfaces are, never the node's */
    {"rdma_", "rdma_", "pod", 0},
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
    /* a '/' would make "<key>/NODE" ambiguous, and sm_series_parse exact
     * only if the name can be read back */
    if (*rest == '\0' || strchr(rest, '/'))
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

/* The one escaping of names (internal.h): a tag or a line holding a raw
 * newline splits the table that prints it (issue 33 item 8). */
const char *sm__shown(char *out, size_t cap, const char *name)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;

    if (!out || cap == 0)
        return out;
    for (const unsigned char *c = (const unsigned char *)(name ? name : ""); *c; c++) {
        char e[4];
        size_t k = 2;

        e[0] = '\\';
        if (*c == '\n' || *c == '\r' || *c == '\t' || *c == '\\')
            e[1] = *c == '\n' ? 'n' : *c == '\r' ? 'r' : *c == '\t' ? 't' : '\\';
        else if (*c < 0x20 || *c == 0x7f) {
            e[1] = 'x';
            e[2] = hex[*c >> 4];
            e[3] = hex[*c & 15];
            k = 4;
        } else {
            e[0] = (char)*c;
            k = 1;
        }
        if (n + k >= cap)
            break;
        memcpy(out + n, e, k);
        n += k;
    }
    out[n] = '\0';
    return out;
}

/* Copies len bytes of src into out as a string; -ENOSPC when it does not fit. */
static int put(char *out, size_t cap, const char *src, size_t len)
{
    if (!out)
        return 0;
    if (len >= cap)
        return -ENOSPC;
    memcpy(out, src, len);
    out[len] = '\0';
    return 0;
}

/* The inverse of sm_series_name, accepting exactly what it writes (plus the
 * longer tiers of engines before NODE_SEGMENT_MAX): the report reads runs
 * through it instead of a grammar of its own (docs/report.md). */
int sm_series_parse(const char *key, char *upstream, size_t upstream_len, char *scoped,
                    size_t scoped_len, char *node, size_t node_len, int *rank,
                    const char **scope)
{
    const struct family *f = NULL;
    const char *mid, *end, *digits, *slash;
    char up[SM_MLFLOW_KEY_MAX + 1];
    size_t klen, flen;
    long long r = 0;
    int rc;

    if (!key)
        return -EINVAL;
    klen = strlen(key);
    if (klen > SM_MLFLOW_KEY_MAX || strncmp(key, "system/", 7) != 0)
        return -EINVAL;
    mid = key + 7;
    /* "/rankN": N as %d writes a rank >= 0, no sign, no leading zero */
    end = strrchr(mid, '/');
    if (!end || strncmp(end, "/rank", 5) != 0)
        return -EINVAL;
    digits = end + 5;
    if (*digits < '0' || *digits > '9' || (digits[0] == '0' && digits[1]))
        return -EINVAL;
    for (const char *d = digits; *d; d++) {
        if (*d < '0' || *d > '9')
            return -EINVAL;
        r = r * 10 + (*d - '0');
        if (r > INT_MAX)
            return -EINVAL;
    }
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (strncmp(mid, families[i].scoped, strlen(families[i].scoped)) == 0)
            f = &families[i];
    if (!f)
        return -EINVAL;
    flen = strlen(f->scoped);
    slash = memchr(mid, '/', (size_t)(end - mid));
    /* the rest of the key is not empty and holds no '/'; a tier only where
     * the family has one, not empty, and only of the characters it keeps */
    if ((slash ? slash : end) == mid + flen || (slash && !f->node_tier))
        return -EINVAL;
    if (slash) {
        if (slash + 1 == end || memchr(slash + 1, '/', (size_t)(end - slash - 1)))
            return -EINVAL;
        for (const char *c = slash + 1; c < end; c++)
            if (!node_char_ok(*c))
                return -EINVAL;
    }
    snprintf(up, sizeof up, "%s%.*s", f->upstream, (int)((slash ? slash : end) - mid - flen),
             mid + flen);
    if (family_of(up) != f) /* each scoped prefix maps back to its own family */
        return -EINVAL;
    if ((rc = put(upstream, upstream_len, up, strlen(up))) < 0 ||
        (rc = put(scoped, scoped_len, mid, (size_t)((slash ? slash : end) - mid))) < 0 ||
        (rc = put(node, node_len, slash ? slash + 1 : "", slash ? (size_t)(end - slash - 1) : 0)) < 0)
        return rc;
    if (rank)
        *rank = (int)r;
    if (scope)
        *scope = f->scope;
    return 0;
}
