/*
 * gpu_select.c — which GPUs the NVIDIA collector logs (docs/design.md §1,
 * docs/gpu.md), decided at open:
 *   1. Assigned at all: a /dev/nvidia[0-9]* node exists (through the
 *      sysroot).  NVIDIA_VISIBLE_DEVICES is not looked at: base images set
 *      it to "all" on CPU workers too.  No node: absent, informational.
 *   2. Narrowed by CUDA_VISIBLE_DEVICES with CUDA's own rules: indices or
 *      GPU-/MIG- UUIDs (unique prefixes allowed), the list ends at the first
 *      invalid entry, so "", "-1" and Slurm's "NoDevFiles" mean no device.
 *   3. The key index i is the NVML index; a MIG instance is keyed by its
 *      parent's.  Its memory and processes are asked of its own MIG device
 *      handle (NVML answers them per instance); every other field exists
 *      only for the board and is asked of the parent's handle.
 * What narrowed the set is said in the open line.  Only NVML's enumeration
 * calls are made here, never a query of a sample's.
 */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_int.h"
#include "parse.h"

/* /dev/nvidia[0-9]* through the sysroot: the container was given a GPU.
 * nvidiactl, nvidia-uvm and nvidia-caps are not devices of their own. */
int sm__gpu_find_dev_node(const sm_ctx *ctx, char *first, size_t firstlen)
{
    char path[SM_PATH_MAX];
    struct dirent *e;
    DIR *d;
    int found = 0;

    if (sm__path(ctx, "/dev", path, sizeof path) < 0)
        return 0;
    d = opendir(path);
    if (!d)
        return 0;
    while ((e = readdir(d)) != NULL) {
        const char *s = e->d_name;
        if (strncmp(s, "nvidia", 6) != 0 || !isdigit((unsigned char)s[6]))
            continue;
        s += 6;
        while (isdigit((unsigned char)*s))
            s++;
        if (*s || (size_t)(s - e->d_name) >= firstlen)
            continue;
        /* keep the lowest-sorting name for a stable message */
        if (!found || strcmp(e->d_name, first) < 0)
            memcpy(first, e->d_name, (size_t)(s - e->d_name) + 1);
        found = 1;
    }
    closedir(d);
    return found;
}

/* ---- CUDA_VISIBLE_DEVICES ---------------------------------------------------- */

static int all_digits(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return 0;
    return 1;
}

/* Could this entry name a device at all (before NVML is asked)?  Used to
 * tell "this process was given no GPU" without loading NVML. */
int sm__gpu_entry_shape_ok(const char *tok)
{
    return all_digits(tok) || strncmp(tok, "GPU-", 4) == 0 || strncmp(tok, "MIG-", 4) == 0;
}


/* The NVML index whose GPU UUID starts with prefix, when exactly one does. */
static int match_gpu_uuid(struct gpu *g, const char *prefix, size_t plen)
{
    int hit = -1;

    for (unsigned int i = 0; i < g->n_nvml; i++) {
        sm_nvml_device h;
        char uuid[SM_NVML_UUID_BUFFER];
        if (g->f.handle(i, &h) != SM_NVML_SUCCESS ||
            g->f.uuid(h, uuid, sizeof uuid) != SM_NVML_SUCCESS)
            continue;
        uuid[sizeof uuid - 1] = '\0';
        if (strncmp(uuid, prefix, plen) == 0) {
            if (hit >= 0)
                return -2; /* ambiguous: CUDA rejects it too */
            hit = (int)i;
        }
    }
    return hit;
}

/* The parent GPU's NVML index of the MIG instance whose UUID starts with
 * prefix ("MIG-<uuid>", driver >= 470), when exactly one does; *mig its
 * MIG device handle. */
static int match_mig_uuid(struct gpu *g, const char *prefix, size_t plen, sm_nvml_device *mig)
{
    int hit = -1;

    if (!g->f.mig_count || !g->f.mig_handle)
        return -1;
    for (unsigned int i = 0; i < g->n_nvml; i++) {
        sm_nvml_device h, mh;
        unsigned int max = 0;
        if (g->f.handle(i, &h) != SM_NVML_SUCCESS ||
            g->f.mig_count(h, &max) != SM_NVML_SUCCESS)
            continue; /* MIG disabled or not supported on this GPU */
        for (unsigned int j = 0; j < max && j < 64; j++) {
            char uuid[SM_NVML_UUID_BUFFER];
            if (g->f.mig_handle(h, j, &mh) != SM_NVML_SUCCESS ||
                g->f.uuid(mh, uuid, sizeof uuid) != SM_NVML_SUCCESS)
                continue; /* an empty slot is NOT_FOUND */
            uuid[sizeof uuid - 1] = '\0';
            if (strncmp(uuid, prefix, plen) == 0) {
                if (hit >= 0)
                    return -2; /* two instances share the prefix */
                hit = (int)i;
                *mig = mh;
            }
        }
    }
    return hit;
}

/* The MIG device handle of GPU parent's instance gi/ci (the pre-470 entry
 * MIG-GPU-<uuid>/<gi>/<ci>); 0, or -1 when NVML lists none such (or lacks
 * the id calls). */
static int match_mig_ids(struct gpu *g, unsigned int parent, const char *ids,
                         sm_nvml_device *mig)
{
    unsigned int max = 0, gi, ci;
    char *end;
    sm_nvml_device h;

    if (!g->f.mig_count || !g->f.mig_handle || !g->f.gi_id || !g->f.ci_id || *ids != '/')
        return -1;
    gi = (unsigned int)strtoul(ids + 1, &end, 10);
    if (end == ids + 1 || *end != '/' || !isdigit((unsigned char)end[1]))
        return -1;
    ci = (unsigned int)strtoul(end + 1, &end, 10);
    if (*end || g->f.handle(parent, &h) != SM_NVML_SUCCESS ||
        g->f.mig_count(h, &max) != SM_NVML_SUCCESS)
        return -1;
    for (unsigned int j = 0; j < max && j < 64; j++) {
        sm_nvml_device mh;
        unsigned int a, b;
        if (g->f.mig_handle(h, j, &mh) == SM_NVML_SUCCESS &&
            g->f.gi_id(mh, &a) == SM_NVML_SUCCESS && g->f.ci_id(mh, &b) == SM_NVML_SUCCESS &&
            a == gi && b == ci) {
            *mig = mh;
            return 0;
        }
    }
    return -1;
}

/* Keeps a named instance's handle for its parent (once: a repeated entry
 * names the same instance). */
static void keep_mig(struct gpu *g, unsigned int parent, sm_nvml_device mig)
{
    unsigned int *n = &g->sel_nmig[parent];

    for (unsigned int k = 0; k < *n; k++)
        if (g->sel_mig[parent][k] == mig)
            return;
    if (*n < MIG_MAX)
        g->sel_mig[parent][(*n)++] = mig;
}

/*
 * Parses CUDA_VISIBLE_DEVICES into sel[] (NVML indices, ascending, no
 * duplicates).  CUDA semantics: the list ends at the first entry that names
 * no device.  *mig is set when a MIG entry was mapped to its parent GPU;
 * stop receives the first invalid entry ("" when the list was all valid).
 */
struct cuda_list {
    struct gpu *g;
    int *mig;
};

/* An entry as CUDA reads it: an index, a GPU UUID or its unique prefix, a
 * MIG instance (mapped to its parent GPU). */
static int cuda_match(const char *tok, void *arg)
{
    struct cuda_list *l = arg;
    struct gpu *g = l->g;
    int idx = -1;

    if (all_digits(tok)) {
        unsigned long x = strtoul(tok, NULL, 10);
        if (x < g->n_nvml && x < GPU_MAX)
            idx = (int)x;
    } else if (strncmp(tok, "GPU-", 4) == 0 && g->f.uuid) {
        idx = match_gpu_uuid(g, tok, strlen(tok));
    } else if (strncmp(tok, "MIG-GPU-", 8) == 0 && g->f.uuid) {
        /* the pre-470 form MIG-GPU-<gpu uuid>/<gi>/<ci> names its parent;
         * the instance is the one of those ids, when NVML lists it */
        size_t ul = strcspn(tok + 4, "/");
        sm_nvml_device mig;
        idx = match_gpu_uuid(g, tok + 4, ul);
        if (idx >= 0 && match_mig_ids(g, (unsigned int)idx, tok + 4 + ul, &mig) == 0)
            keep_mig(g, (unsigned int)idx, mig);
        else if (idx >= 0)
            g->mig_whole = 1;
        *l->mig |= idx >= 0;
    } else if (strncmp(tok, "MIG-", 4) == 0 && g->f.uuid) {
        sm_nvml_device mig;
        idx = match_mig_uuid(g, tok, strlen(tok), &mig);
        if (idx >= 0)
            keep_mig(g, (unsigned int)idx, mig);
        *l->mig |= idx >= 0;
    }
    return idx;
}

static size_t parse_visible(struct gpu *g, const char *v, unsigned int *sel, int *mig,
                            char *stop, size_t stoplen)
{
    char chosen[GPU_MAX] = {0};
    struct cuda_list l = {g, mig};
    unsigned int lim = g->n_nvml < GPU_MAX ? g->n_nvml : GPU_MAX;
    size_t n = 0;

    *mig = 0;
    sm__visible_walk(v, cuda_match, &l, chosen, lim, stop, stoplen);
    for (unsigned int i = 0; i < lim; i++)
        if (chosen[i])
            sel[n++] = i;
    return n;
}

/*
 * The NVML indices this process logs, ascending: every device, or those
 * CUDA_VISIBLE_DEVICES names.  What narrowed the set goes into note.
 */
size_t sm__gpu_select_devices(struct gpu *g, const char *visible, unsigned int *sel, char *note,
                              size_t notelen)
{
    char stop[64], list[160] = "";
    size_t nsel, len = 0;
    int mig, narrowed;

    memset(g->sel_nmig, 0, sizeof g->sel_nmig); /* no MIG instance named (yet) */
    g->mig_whole = 0;
    if (!visible) {
        nsel = g->n_nvml < GPU_MAX ? g->n_nvml : GPU_MAX;
        for (size_t i = 0; i < nsel; i++)
            sel[i] = (unsigned int)i;
        return nsel;
    }
    nsel = parse_visible(g, visible, sel, &mig, stop, sizeof stop);
    for (size_t i = 0; i < nsel && len < sizeof list; i++) {
        int w = snprintf(list + len, sizeof list - len, "%s%u", i ? ", " : "", sel[i]);
        len += w > 0 ? (size_t)w : 0;
    }
    narrowed = nsel > 0 && nsel < g->n_nvml;
    if (narrowed)
        sm__line_join(note, notelen, "CUDA_VISIBLE_DEVICES='%.64s' narrows the logged GPUs to NVML index %s "
            "(of %u)", visible, list, g->n_nvml);
    if (stop[0] && nsel > 0)
        sm__line_join(note, notelen, "%s entry '%s' names no device%s and ends the list, as in CUDA",
            narrowed ? "its" : "CUDA_VISIBLE_DEVICES", stop,
            (!g->f.uuid && (strncmp(stop, "GPU-", 4) == 0 || strncmp(stop, "MIG-", 4) == 0))
                ? " (NVML lacks nvmlDeviceGetUUID)" : "");
    if (mig) {
        /* which series are the instance's and which the board's: NVML
         * answers memory and processes per instance, nothing else */
        char per[160] = "";
        size_t pl = 0;
        for (size_t i = 0; i < nsel && pl < sizeof per; i++) {
            int w;
            if (!g->sel_nmig[sel[i]])
                continue;
            w = snprintf(per + pl, sizeof per - pl, "%s%u", pl ? "," : "", sel[i]);
            pl += w > 0 ? (size_t)w : 0;
        }
        if (per[0])
            sm__line_join(note, notelen, strchr(per, ',')
                ? "MIG: gpu_{%s}_memory_usage_* and gpu_{%s}_process_memory_megabytes are the "
                  "named instance's (through its MIG device handle); "
                  "utilization, power, temperature, clocks, throttled, PCIe, ECC and "
                  "gpu_events are the whole parent GPU's (every instance on it)"
                : "MIG: gpu_%s_memory_usage_* and gpu_%s_process_memory_megabytes are the "
                  "named instance's (through its MIG device handle); "
                  "utilization, power, temperature, clocks, throttled, PCIe, ECC and "
                  "gpu_events are the whole parent GPU's (every instance on it)", per, per);
        if (g->mig_whole)
            sm__line_join(note, notelen, "a MIG-GPU-<uuid>/<gi>/<ci> entry whose instance NVML "
                "does not list is logged as its whole parent GPU (memory, utilization and power "
                "of every instance on it)");
    }
    return nsel;
}
