/*
 * coll_amdgpu.c — gpu_<i>_* series of AMD GPUs from the amdgpu driver's own
 * sysfs files (docs/gpu.md "AMD GPUs"): no library, nothing in the image.
 *
 *   gpu_i_utilization_percentage    device/gpu_busy_percent
 *   gpu_i_memory_usage_megabytes    device/mem_info_vram_used / 10^6
 *   gpu_i_memory_usage_percentage   100 · mem_info_vram_used / mem_info_vram_total
 *   gpu_i_power_usage_watts         device/hwmon/hwmonN/power1_average (else
 *                                   power1_input: newer SMU firmware), µW / 10^6
 *   gpu_i_power_usage_percentage    100 · power / power1_cap, the cap read every
 *                                   sample (rocm-smi --setpoweroverdrive changes it)
 *   gpu_i_temperature_celsius       hwmon temp1_input ("edge"; else temp2_input,
 *                                   "junction", on parts without an edge sensor),
 *                                   millidegrees / 1000
 *   gpu_i_sm_clock_megahertz        device/pp_dpm_sclk, the level marked current
 *   gpu_i_memory_clock_megahertz    device/pp_dpm_mclk, likewise
 *   gpu_i_process_memory_megabytes  per recorded rank: the VRAM of the DRM
 *                                   clients of that rank's processes, from
 *                                   /proc/PID/fdinfo (below), MiB-exact / 10^6
 * (Documentation/gpu/amdgpu/driver-misc.rst, thermal.rst: gpu_busy_percent,
 * mem_info_vram_*, hwmon power1_average/power1_cap in microWatts, temp*_input
 * in millidegrees Celsius, pp_dpm_* "the current level is marked with a *".)
 *
 * Which GPUs (docs/gpu.md):
 *   1. The /dev/dri/renderD<N> nodes that exist (through the sysroot): the
 *      AMD device plugin mounts exactly the container's, while /sys/class/drm
 *      shows every GPU of the node.  Each is mapped to its card through
 *      /sys/class/drm/renderD<N>/device/drm/card<M> (both are children of
 *      the same PCI device) and kept when device/vendor is 0x1002.  No AMD
 *      render node: absent without a line (a CPU worker; the NVIDIA
 *      collector's line speaks for it).
 *   2. Ordered by render minor: the ROCm index k of each (the order the KFD
 *      and ROCr enumerate the devices of a node), then narrowed by
 *      ROCR_VISIBLE_DEVICES and then HIP_VISIBLE_DEVICES (whose indices
 *      count the devices ROCR left), each as a list of indices or "GPU-"
 *      UUIDs (GPU- + device/unique_id), ending at the first entry that names
 *      no device, as CUDA_VISIBLE_DEVICES does.
 *   3. The key index i = base + k, base = one past the NVIDIA collector's
 *      NVML indices (0 without NVIDIA): a node with both vendors records
 *      both, never under the same key.
 *
 * Who holds each card's VRAM (docs/gpu.md, "Who holds the GPU's memory"):
 * every process this pid namespace shows is looked at; its fds that link to
 * /dev/dri/ are read in /proc/PID/fdinfo, whose DRM client usage stats
 * (Documentation/gpu/drm-usage-stats.rst) give drm-driver, drm-pdev (the
 * PCI slot, matched to the card's device/uevent PCI_SLOT_NAME), drm-client-id
 * and the client's VRAM (drm-resident-vram; drm-memory-vram before 6.14,
 * where the document made it its alias; else drm-total-vram).  Several fds
 * share one client (dup, fork, the ROCr runtime's own open): a client is
 * counted once per sample by (card, drm-client-id).  A process counts for
 * the rank pidmap.h gives it (the own rank's: this process's tree, or its
 * RANK is ours; another rank's by its RANK; else none).  Unlike NVML, fdinfo
 * shows only this pid namespace's processes: memory of another container
 * is not seen (no foreign verdict on AMD).  A client without a VRAM key (a
 * kernel before the memory keys, 5.19..6.0's amdgpu) drops the series with
 * one line.
 *
 * Files are kept open and re-read with pread.  A file missing at open drops
 * its metric for that device (one line at open, devices grouped); a read
 * that fails while sampling skips that value, one line per streak.  Values
 * are parsed by sm__parse_number (parse_proc.c, fuzzed by fuzz_number).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "internal.h"
#include "parse.h"
#include "pidmap.h"

#define AMD_MAX 64 /* render nodes considered; keys beyond gpu_63 do not exist */
#define AMD_RANKS_MAX 64       /* ranks recorded (coll_proc's trees) */
#define AMD_PROC_POINTS_MAX 256 /* gpu_*_process_memory_megabytes points a sample */
#define AMD_CLIENTS 1024       /* DRM clients counted a sample */
#define AMD_FD_MAX 4096        /* fds looked at per process */
#define AMD_KEY_PROC 15        /* sm__gpu_keys: gpu_i_process_memory_megabytes */

enum { F_BUSY, F_VRAM_USED, F_POWER, F_CAP, F_TEMP, F_SCLK, F_MCLK, F_N };
static const char *const f_label[F_N] = {"utilization_percentage", "memory_usage_*",
                                         "power_usage_*",          "power_usage_percentage",
                                         "temperature_celsius",    "sm_clock_megahertz",
                                         "memory_clock_megahertz"};

struct amd_dev {
    unsigned render;        /* N of renderD<N> */
    unsigned card;          /* M of card<M> */
    unsigned k;             /* ROCm index: position among the container's AMD GPUs */
    unsigned index;         /* i of the keys */
    const char *const *key;
    int fd[F_N];            /* -1: metric dropped at open */
    int failing;            /* a read failed; said once, cleared on success */
    uint64_t vram_total;
    char uid[40];           /* device/unique_id, "" when absent */
    char pdev[32];          /* PCI_SLOT_NAME of device/uevent: drm-pdev; "" unknown */
    const char *power_file; /* "power1_average" or "power1_input" */
    char src[F_N][128];     /* the sources probe shows */
};

/* Who holds the VRAM: the state of the fdinfo scan. */
struct amd_procs {
    sm_ctx ctx;            /* the sysroot, for /proc */
    int on;                /* the series is recorded */
    int own_rank, rank0, nranks;
    int failing;           /* /proc could not be listed: said once */
    size_t nclients;
    struct { unsigned dev; uint64_t id; } client[AMD_CLIENTS];
    double mb[AMD_MAX][AMD_RANKS_MAX];
    char fdinfo[4096];
    sm__pidmap *map;       /* whose process each pid is: the set's, or own_map */
    sm__pidmap own_map;    /* opened alone (tests/c): a map of its own */
};

struct amdgpu {
    size_t n;
    struct amd_dev dev[AMD_MAX];
    char buf[512]; /* a pp_dpm_* file lists every level */
    struct amd_procs pr;
};

/* ---- small helpers ---------------------------------------------------------- */

static int read_small(const sm_ctx *ctx, const char *abs, char *buf, size_t cap)
{
    ssize_t n = sm__read_file(ctx, abs, buf, cap);

    if (n < 0)
        return (int)n;
    while (n > 0 && isspace((unsigned char)buf[n - 1]))
        buf[--n] = '\0';
    return 0;
}

static int read_u64(const sm_ctx *ctx, const char *abs, uint64_t *v)
{
    char buf[64];
    int unl, rc = read_small(ctx, abs, buf, sizeof buf);

    if (rc < 0)
        return rc;
    rc = sm__parse_number(buf, strlen(buf), v, &unl);
    return rc < 0 ? rc : unl ? -EINVAL : 0;
}

/* "<digits>" after prefix, exactly: its value in *out. */
static int name_number(const char *name, const char *prefix, unsigned *out)
{
    size_t pl = strlen(prefix);
    char *end;
    unsigned long v;

    if (strncmp(name, prefix, pl) != 0 || !isdigit((unsigned char)name[pl]))
        return 0;
    v = strtoul(name + pl, &end, 10);
    if (*end || v > 4194304) /* the kernel's PID_MAX_LIMIT on 64 bits: pids too */
        return 0;
    *out = (unsigned)v;
    return 1;
}

static int cmp_render(const void *a, const void *b)
{
    unsigned x = ((const struct amd_dev *)a)->render, y = ((const struct amd_dev *)b)->render;
    return x < y ? -1 : x > y;
}

/* The card<M> beside renderD<N> under its PCI device. */
static int card_of(const sm_ctx *ctx, unsigned render, unsigned *card)
{
    char abs[128], path[SM_PATH_MAX];
    struct dirent *e;
    DIR *d;
    int found = 0;

    snprintf(abs, sizeof abs, "/sys/class/drm/renderD%u/device/drm", render);
    if (sm__path(ctx, abs, path, sizeof path) < 0 || !(d = opendir(path)))
        return 0;
    while ((e = readdir(d)) != NULL)
        if (name_number(e->d_name, "card", card)) {
            found = 1;
            break;
        }
    closedir(d);
    return found;
}

/* Step 1: the AMD render nodes this container was given, by render minor.
 * other counts render nodes of another vendor (or unreadable). */
static size_t find_devices(const sm_ctx *ctx, struct amd_dev *dev, size_t max, char *other,
                           size_t otherlen)
{
    char path[SM_PATH_MAX], abs[128], vendor[32];
    struct dirent *e;
    size_t n = 0;
    DIR *d;

    other[0] = '\0';
    if (sm__path(ctx, "/dev/dri", path, sizeof path) < 0 || !(d = opendir(path)))
        return 0;
    while ((e = readdir(d)) != NULL && n < max) {
        unsigned render, card;
        if (!name_number(e->d_name, "renderD", &render))
            continue;
        snprintf(abs, sizeof abs, "/sys/class/drm/renderD%u/device/vendor", render);
        if (read_small(ctx, abs, vendor, sizeof vendor) < 0) {
            sm__line_join(other, otherlen, "renderD%u: no %s", render, abs);
            continue;
        }
        if (strcasecmp(vendor, "0x1002") != 0) {
            sm__line_join(other, otherlen, "renderD%u: vendor %s, not AMD", render, vendor);
            continue;
        }
        if (!card_of(ctx, render, &card)) {
            sm__line_join(other, otherlen, "renderD%u: no card beside it", render);
            continue;
        }
        memset(&dev[n], 0, sizeof dev[n]);
        dev[n].render = render;
        dev[n].card = card;
        n++;
    }
    closedir(d);
    qsort(dev, n, sizeof dev[0], cmp_render);
    for (size_t i = 0; i < n; i++)
        dev[i].k = (unsigned)i;
    return n;
}

/* ---- ROCR_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES ---------------------------- */


/*
 * Keeps of dev[0..n) those the list names, in their order (ascending, no
 * duplicates); indices count the devices as they are now.  stop gets the
 * first entry naming no device ("" when all did).  Returns the new n.
 */
struct amd_list {
    const struct amd_dev *dev;
    size_t n;
};

/* An entry names a device by its index among those present now or by its
 * unique id ("GPU-<uid>", as rocm-smi prints it). */
static int amd_match(const char *tok, void *arg)
{
    const struct amd_list *l = arg;
    int idx = -1;

    if (tok[0] && strspn(tok, "0123456789") == strlen(tok)) {
        unsigned long x = strtoul(tok, NULL, 10);
        if (x < l->n)
            idx = (int)x;
    } else if (strncasecmp(tok, "GPU-", 4) == 0 && tok[4]) {
        for (size_t i = 0; i < l->n; i++)
            if (l->dev[i].uid[0] && strcasecmp(l->dev[i].uid, tok + 4) == 0)
                idx = (int)i;
    }
    return idx;
}

static size_t narrow(struct amd_dev *dev, size_t n, const char *list, char *stop, size_t stoplen)
{
    char chosen[AMD_MAX] = {0};
    struct amd_list l = {dev, n};
    size_t m = 0;

    sm__visible_walk(list, amd_match, &l, chosen, n, stop, stoplen);
    for (size_t i = 0; i < n; i++)
        if (chosen[i])
            dev[m++] = dev[i];
    return m;
}

/* ---- open / sample / close -------------------------------------------------- */

static void close_dev(struct amd_dev *d)
{
    for (int f = 0; f < F_N; f++)
        if (d->fd[f] >= 0)
            close(d->fd[f]);
    for (int f = 0; f < F_N; f++)
        d->fd[f] = -1;
}

static void amd_close(void *state)
{
    struct amdgpu *g = state;

    for (size_t i = 0; i < g->n; i++)
        close_dev(&g->dev[i]);
    g->n = 0;
}

/* The hwmon directory of the card (hwmon/hwmon<K>), as an absolute path. */
static int find_hwmon(const sm_ctx *ctx, const struct amd_dev *d, char *abs, size_t cap)
{
    char rel[96], path[SM_PATH_MAX];
    struct dirent *e;
    DIR *dir;
    unsigned k;
    int found = 0;

    snprintf(rel, sizeof rel, "/sys/class/drm/card%u/device/hwmon", d->card);
    if (sm__path(ctx, rel, path, sizeof path) < 0 || !(dir = opendir(path)))
        return 0;
    while ((e = readdir(dir)) != NULL)
        if (name_number(e->d_name, "hwmon", &k)) {
            snprintf(abs, cap, "%s/hwmon%u", rel, k);
            found = 1;
            break;
        }
    closedir(dir);
    return found;
}

/* Opens one metric file; on failure the metric is dropped, why in drop[f]. */
static void open_file(const sm_ctx *ctx, struct amd_dev *d, int f, const char *abs, int *drop)
{
    d->fd[f] = sm__open(ctx, abs);
    if (d->fd[f] < 0) {
        drop[f] = -d->fd[f];
        d->fd[f] = -1;
    }
}

/* Opens a device's files and reads each once; what is missing goes to
 * note, grouped by metric over devices by the caller. */
static void open_dev(const sm_ctx *ctx, struct amd_dev *d, int drop[F_N], int *no_hwmon)
{
    char base[64], abs[256], hw[160];
    uint64_t v;

    for (int f = 0; f < F_N; f++) {
        d->fd[f] = -1;
        drop[f] = 0;
    }
    *no_hwmon = 0;
    snprintf(base, sizeof base, "/sys/class/drm/card%u/device", d->card);
    snprintf(abs, sizeof abs, "%s/gpu_busy_percent", base);
    open_file(ctx, d, F_BUSY, abs, drop);
    snprintf(d->src[F_BUSY], sizeof d->src[F_BUSY], "%s/gpu_busy_percent", base);

    snprintf(abs, sizeof abs, "%s/mem_info_vram_total", base);
    if (read_u64(ctx, abs, &v) < 0 || v == 0) {
        drop[F_VRAM_USED] = ENOENT;
    } else {
        d->vram_total = v;
        snprintf(abs, sizeof abs, "%s/mem_info_vram_used", base);
        open_file(ctx, d, F_VRAM_USED, abs, drop);
    }
    snprintf(d->src[F_VRAM_USED], sizeof d->src[F_VRAM_USED], "%s/mem_info_vram_used, "
             "mem_info_vram_total", base);
    for (int f = F_SCLK; f <= F_MCLK; f++) {
        const char *name = f == F_SCLK ? "pp_dpm_sclk" : "pp_dpm_mclk";
        snprintf(abs, sizeof abs, "%s/%s", base, name);
        open_file(ctx, d, f, abs, drop);
        snprintf(d->src[f], sizeof d->src[f], "%s/%s", base, name);
    }

    if (!find_hwmon(ctx, d, hw, sizeof hw)) {
        *no_hwmon = 1;
        drop[F_POWER] = drop[F_CAP] = drop[F_TEMP] = ENOENT;
    } else {
        snprintf(abs, sizeof abs, "%s/temp1_input", hw);
        open_file(ctx, d, F_TEMP, abs, drop);
        sm__line(d->src[F_TEMP], sizeof d->src[F_TEMP], "%s/temp1_input", hw);
        if (d->fd[F_TEMP] < 0) { /* no edge sensor (MI300): the junction's */
            drop[F_TEMP] = 0;
            snprintf(abs, sizeof abs, "%s/temp2_input", hw);
            open_file(ctx, d, F_TEMP, abs, drop);
            sm__line(d->src[F_TEMP], sizeof d->src[F_TEMP], "%s/temp2_input", hw);
        }
        d->power_file = "power1_average";
        snprintf(abs, sizeof abs, "%s/%s", hw, d->power_file);
        open_file(ctx, d, F_POWER, abs, drop);
        if (d->fd[F_POWER] < 0) { /* SMU 13 (RDNA3, MI300) reports power1_input */
            d->power_file = "power1_input";
            drop[F_POWER] = 0;
            snprintf(abs, sizeof abs, "%s/%s", hw, d->power_file);
            open_file(ctx, d, F_POWER, abs, drop);
        }
        snprintf(abs, sizeof abs, "%s/power1_cap", hw);
        if (d->fd[F_POWER] >= 0)
            open_file(ctx, d, F_CAP, abs, drop);
        else
            drop[F_CAP] = drop[F_POWER];
        sm__line(d->src[F_POWER], sizeof d->src[F_POWER], "%s/%s", hw, d->power_file);
        sm__line(d->src[F_CAP], sizeof d->src[F_CAP], "%s/%s, power1_cap", hw, d->power_file);
    }
    d->key = sm__gpu_keys(d->index);
}

/* "gpu_{1,2}_power_usage_* dropped: no hwmon" style clauses. */
static void say_drops(const struct amdgpu *g, int drop[][F_N], const int *no_hwmon, char *buf,
                      size_t cap)
{
    for (int f = 0; f < F_N; f++) {
        char list[200] = "";
        size_t len = 0, count = 0, hw = 0;
        int why = 0;

        for (size_t i = 0; i < g->n; i++) {
            int w;
            if (!drop[i][f] || (f == F_CAP && drop[i][F_POWER]))
                continue; /* power % goes with power W: said once */
            w = snprintf(list + len, sizeof list - len, "%s%u", count ? "," : "",
                         g->dev[i].index);
            if (w > 0 && (size_t)w < sizeof list - len)
                len += (size_t)w;
            count++;
            hw += no_hwmon[i] != 0;
            why = drop[i][f];
        }
        if (!count)
            continue;
        sm__line_join(buf, cap, count > 1 ? "gpu_{%s}_%s dropped: %s" : "gpu_%s_%s dropped: %s",
                     list, f_label[f],
                     hw == count ? "no hwmon directory"
                     : f == F_VRAM_USED ? "no readable mem_info_vram_total/used"
                                        : strerror(why));
    }
}

/* ---- who holds the VRAM: DRM fdinfo ----------------------------------------- */

/* The rank a process counts for (pidmap.h); -1 when none. */
static int pid_rank(struct amd_procs *pr, int pid)
{
    int rank, cls = sm__pidmap_class(pr->map, pid, &rank, NULL);

    return cls == SM_PID_OWN || cls == SM_PID_RANK ? rank : -1;
}

/* 1 when the client was counted already this sample; else records it. */
static int seen_client(struct amd_procs *pr, unsigned dev, uint64_t id)
{
    for (size_t i = 0; i < pr->nclients; i++)
        if (pr->client[i].dev == dev && pr->client[i].id == id)
            return 1;
    if (pr->nclients < AMD_CLIENTS) {
        pr->client[pr->nclients].dev = dev;
        pr->client[pr->nclients].id = id;
        pr->nclients++;
    }
    return 0;
}

/* One process's DRM clients of the container's cards, added to pr->mb.
 * -ENODATA when a client of ours has no VRAM key. */
static int scan_pid(struct amdgpu *g, int pid)
{
    struct amd_procs *pr = &g->pr;
    char path[80], full[SM_PATH_MAX], link[64];
    int rank = -2, rc = 0; /* -2: not looked up yet (once per process) */
    struct dirent *e;
    DIR *d;

    snprintf(path, sizeof path, "/proc/%d/fd", pid);
    if (sm__path(&pr->ctx, path, full, sizeof full) < 0 || !(d = opendir(full)))
        return 0; /* gone, or not ours to see */
    for (int k = 0; (e = readdir(d)) != NULL && k < AMD_FD_MAX; k++) {
        sm_drm_fdinfo fi;
        unsigned fd;
        ssize_t n;
        size_t i;

        if (!name_number(e->d_name, "", &fd))
            continue;
        snprintf(path, sizeof path, "/proc/%d/fd/%u", pid, fd);
        if (sm__path(&pr->ctx, path, full, sizeof full) < 0 ||
            (n = readlink(full, link, sizeof link - 1)) < 0)
            continue;
        link[n] = '\0';
        if (strncmp(link, "/dev/dri/", 9) != 0)
            continue; /* one readlink first: most fds are files and sockets */
        snprintf(path, sizeof path, "/proc/%d/fdinfo/%u", pid, fd);
        n = sm__read_file(&pr->ctx, path, pr->fdinfo, sizeof pr->fdinfo);
        if (n < 0 || sm__parse_drm_fdinfo(pr->fdinfo, (size_t)n, &fi) != 0 ||
            strcmp(fi.driver, "amdgpu") != 0)
            continue;
        for (i = 0; i < g->n; i++)
            if (g->dev[i].pdev[0] && strcmp(g->dev[i].pdev, fi.pdev) == 0)
                break;
        if (i == g->n)
            continue; /* a card this container was not given, or no drm-pdev */
        if (fi.vram_key == SM_DRM_VRAM_NONE) {
            rc = -ENODATA;
            continue;
        }
        /* no drm-client-id (before 5.19): one client per process and card */
        if (seen_client(pr, (unsigned)i, fi.has_client_id ? fi.client_id
                                                          : (UINT64_C(1) << 63) | (unsigned)pid))
            continue;
        if (rank == -2)
            rank = pid_rank(pr, pid);
        if (rank >= pr->rank0 && rank < pr->rank0 + pr->nranks)
            pr->mb[i][rank - pr->rank0] += (double)fi.vram_bytes / 1e6;
    }
    closedir(d);
    return rc;
}

/* Every process of the pid namespace, once a sample; emits the series. */
static void procs_sample(struct amdgpu *g, sm_points *out)
{
    static const char src[] = "/proc/PID/fdinfo (drm-resident-vram)";
    struct amd_procs *pr = &g->pr;
    char full[SM_PATH_MAX];
    struct dirent *e;
    int missing = 0;
    DIR *d;

    if (!pr->on)
        return;
    for (size_t i = 0; i < g->n; i++)
        memset(pr->mb[i], 0, sizeof pr->mb[i]);
    pr->nclients = 0;
    if (sm__path(&pr->ctx, "/proc", full, sizeof full) < 0 || !(d = opendir(full))) {
        if (!pr->failing)
            sm__log(SM_WARN, "amdgpu: cannot list /proc (%s): gpu_*_process_memory_megabytes "
                    "skipped until it can", strerror(errno));
        pr->failing = 1;
        return;
    }
    while ((e = readdir(d)) != NULL) {
        unsigned pid;
        if (name_number(e->d_name, "", &pid) && scan_pid(g, (int)pid) == -ENODATA)
            missing = 1;
    }
    closedir(d);
    if (pr->failing)
        sm__log(SM_INFO, "amdgpu: /proc can be listed again");
    pr->failing = 0;
    if (missing) {
        sm__log(SM_WARN, "amdgpu: gpu_*_process_memory_megabytes dropped: this kernel's DRM "
                "fdinfo has no drm-resident-vram, drm-memory-vram or drm-total-vram "
                "(Documentation/gpu/drm-usage-stats.rst; its other GPU series go on)");
        pr->on = 0;
        return;
    }
    for (size_t i = 0; i < g->n; i++)
        for (int r = 0; r < pr->nranks; r++) {
            int rk = pr->rank0 + r;
            if (rk == pr->own_rank)
                sm__emit(out, g->dev[i].key[AMD_KEY_PROC], pr->mb[i][r], "MB", src,
                         SM_AGG_MEAN);
            else
                sm__emit_rank(out, rk, g->dev[i].key[AMD_KEY_PROC], pr->mb[i][r], "MB", src,
                              SM_AGG_MEAN);
        }
}

/* The card's PCI slot (device/uevent PCI_SLOT_NAME, drivers/pci/pci-driver.c
 * pci_uevent): what drm-pdev names. */
static void read_pdev(const sm_ctx *ctx, struct amd_dev *d)
{
    char abs[96], buf[512];
    const char *p, *q;

    d->pdev[0] = '\0';
    snprintf(abs, sizeof abs, "/sys/class/drm/card%u/device/uevent", d->card);
    if (read_small(ctx, abs, buf, sizeof buf) < 0 || !(p = strstr(buf, "PCI_SLOT_NAME=")))
        return;
    p += 14;
    for (q = p; *q && *q != '\n' && q - p < (int)sizeof d->pdev - 1; q++)
        ;
    memcpy(d->pdev, p, (size_t)(q - p));
    d->pdev[q - p] = '\0';
}

/* The ranks recorded (sm__pid_ranks, as gpu_holders.c's), the cards' PCI
 * slots, the pid map.  What keeps the series away goes to note. */
static void procs_open(struct amdgpu *g, const sm_ctx *ctx, char *note, size_t cap)
{
    struct amd_procs *pr = &g->pr;
    char path[SM_PATH_MAX];
    int slots = 0;
    DIR *d;

    pr->ctx = *ctx;
    pr->ctx.rec_key = NULL; /* not kept beyond open */
    pr->own_rank = pr->rank0 = ctx->id.rank >= 0 ? ctx->id.rank : 0;
    pr->on = 0;
    pr->map = ctx->pids;
    if (!pr->map) {
        sm__pidmap_init(&pr->own_map, ctx);
        pr->map = &pr->own_map;
    }
    for (size_t i = 0; i < g->n; i++) {
        read_pdev(ctx, &g->dev[i]);
        slots += g->dev[i].pdev[0] != '\0';
    }
    if (!slots) {
        sm__line_join(note, cap, "gpu_*_process_memory_megabytes dropped: no PCI_SLOT_NAME in "
                      "device/uevent to match drm-pdev");
        return;
    }
    if (sm__path(ctx, "/proc", path, sizeof path) < 0 || !(d = opendir(path))) {
        sm__line_join(note, cap, "gpu_*_process_memory_megabytes dropped: cannot list /proc");
        return;
    }
    closedir(d);
    pr->nranks = sm__pid_ranks(ctx, AMD_RANKS_MAX, AMD_PROC_POINTS_MAX, (int)g->n, note, cap);
    pr->on = 1;
}

static int amd_open(void *state, const sm_ctx *ctx, sm_opened *res)
{
    struct amdgpu *g = state;
    const char *rocr = getenv("ROCR_VISIBLE_DEVICES"), *hip = getenv("HIP_VISIBLE_DEVICES");
    char other[sizeof res->msg] = "", sel[sizeof res->msg] = "", drops[sizeof res->msg] = "";
    char stop[64], list[200] = "", abs[96];
    int (*drop)[F_N] = NULL, *no_hwmon = NULL;
    size_t all, len = 0;
    unsigned base = res->gpu_index_base;

    g->n = all = find_devices(ctx, g->dev, AMD_MAX, other, sizeof other);
    if (all == 0)
        return SM_ABSENT; /* no AMD render node: nothing to say (an NVIDIA node may have
                             nvidia-drm's render nodes; a CPU worker none) */
    for (size_t i = 0; i < g->n; i++) {
        snprintf(abs, sizeof abs, "/sys/class/drm/card%u/device/unique_id", g->dev[i].card);
        if (read_small(ctx, abs, g->dev[i].uid, sizeof g->dev[i].uid) < 0)
            g->dev[i].uid[0] = '\0';
        g->dev[i].index = base + g->dev[i].k;
    }
    /* ROCr applies ROCR_VISIBLE_DEVICES; HIP then indexes what is left */
    const char *names[2] = {"ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"};
    const char *vals[2] = {rocr, hip};
    for (int v = 0; v < 2; v++) {
        size_t before = g->n;
        if (!vals[v])
            continue;
        g->n = narrow(g->dev, g->n, vals[v], stop, sizeof stop);
        if (g->n == 0) {
            sm__line(res->msg, sizeof res->msg,
                    "%s='%.64s' names none of the %zu AMD GPUs given: amdgpu gpu_* absent",
                    names[v], vals[v], before);
            sm__line(res->status, sizeof res->status, "none: %s selects no AMD device", names[v]);
            return SM_ABSENT;
        }
        if (g->n < before)
            sm__line_join(sel, sizeof sel, "%s='%.64s' narrows them to %zu of %zu", names[v],
                         vals[v], g->n, before);
        if (stop[0])
            sm__line_join(sel, sizeof sel, "%s entry '%s' names no device and ends the list",
                         names[v], stop);
    }
    if (base + all > AMD_MAX) {
        sm__line(res->msg, sizeof res->msg, "amdgpu: GPU indices from %u on exceed gpu_%d: "
                "amdgpu gpu_* absent", base, AMD_MAX - 1);
        sm__line(res->status, sizeof res->status, "unavailable: too many GPUs");
        g->n = 0;
        return -ERANGE;
    }

    drop = calloc(g->n, sizeof *drop);
    no_hwmon = calloc(g->n, sizeof *no_hwmon);
    if (!drop || !no_hwmon) {
        free(drop);
        free(no_hwmon);
        g->n = 0;
        snprintf(res->msg, sizeof res->msg, "amdgpu: out of memory: amdgpu gpu_* absent");
        return -ENOMEM;
    }
    for (size_t i = 0; i < g->n; i++) {
        int w;
        open_dev(ctx, &g->dev[i], drop[i], &no_hwmon[i]);
        w = snprintf(list + len, sizeof list - len, "%srenderD%u=card%u as gpu_%u",
                     i ? ", " : "", g->dev[i].render, g->dev[i].card, g->dev[i].index);
        if (w > 0 && (size_t)w < sizeof list - len)
            len += (size_t)w;
    }
    say_drops(g, drop, no_hwmon, drops, sizeof drops);
    procs_open(g, ctx, drops, sizeof drops);
    free(drop);
    free(no_hwmon);

    sm__line(res->status, sizeof res->status, "amdgpu sysfs, %zu device%s (%s)", g->n,
            g->n == 1 ? "" : "s", list);
    /* one line: which nodes, how they were narrowed, what is missing */
    sm__line(res->msg, sizeof res->msg, "amdgpu: %s", list);
    if (base)
        sm__line_add(res->msg, sizeof res->msg, " (indices after NVIDIA's %u)", base);
    if (sel[0])
        sm__line_join(res->msg, sizeof res->msg, "%s", sel);
    if (other[0])
        sm__line_join(res->msg, sizeof res->msg, "skipped %s", other);
    if (drops[0])
        sm__line_join(res->msg, sizeof res->msg, "%s", drops);
    res->gpu_index_next = base + (unsigned)all;
    return 0;
}

/* One file's number; -errno or -EINVAL. */
static int sample_file(struct amdgpu *g, int fd, uint64_t *v)
{
    ssize_t n = sm__pread_all(fd, g->buf, sizeof g->buf);
    int unl, rc;

    if (n < 0)
        return (int)n;
    rc = sm__parse_number(g->buf, (size_t)n, v, &unl);
    return rc < 0 ? rc : unl ? -EINVAL : 0;
}

static int amd_sample(void *state, sm_points *out, char *msg, size_t msglen)
{
    struct amdgpu *g = state;

    (void)msg;
    (void)msglen;
    for (size_t i = 0; i < g->n; i++) {
        struct amd_dev *d = &g->dev[i];
        const char *bad = NULL;
        int rc, bad_rc = 0;
        uint64_t v, cap;

        if (d->fd[F_BUSY] >= 0) {
            if ((rc = sample_file(g, d->fd[F_BUSY], &v)) == 0)
                sm__emit(out, d->key[2], (double)v, "percent", d->src[F_BUSY], SM_AGG_MEAN);
            else
                bad = "gpu_busy_percent", bad_rc = rc;
        }
        if (d->fd[F_VRAM_USED] >= 0) {
            if ((rc = sample_file(g, d->fd[F_VRAM_USED], &v)) == 0) {
                sm__emit(out, d->key[0], 100.0 * (double)v / (double)d->vram_total, "percent",
                        d->src[F_VRAM_USED], SM_AGG_MEAN);
                sm__emit(out, d->key[1], (double)v / 1e6, "MB", d->src[F_VRAM_USED],
                        SM_AGG_MEAN);
            } else {
                bad = "mem_info_vram_used", bad_rc = rc;
            }
        }
        if (d->fd[F_POWER] >= 0) {
            if ((rc = sample_file(g, d->fd[F_POWER], &v)) == 0) {
                sm__emit(out, d->key[3], (double)v / 1e6, "W", d->src[F_POWER], SM_AGG_MEAN);
                if (d->fd[F_CAP] >= 0) {
                    if ((rc = sample_file(g, d->fd[F_CAP], &cap)) == 0 && cap > 0)
                        sm__emit(out, d->key[4], 100.0 * (double)v / (double)cap, "percent",
                                d->src[F_CAP], SM_AGG_MEAN);
                    else if (rc < 0)
                        bad = "power1_cap", bad_rc = rc;
                }
            } else {
                bad = d->power_file, bad_rc = rc;
            }
        }
        if (d->fd[F_TEMP] >= 0) {
            if ((rc = sample_file(g, d->fd[F_TEMP], &v)) == 0)
                sm__emit(out, d->key[5], (double)v / 1000.0, "celsius", d->src[F_TEMP],
                        SM_AGG_MEAN);
            else
                bad = "temp*_input", bad_rc = rc;
        }
        for (int f = F_SCLK; f <= F_MCLK; f++) {
            ssize_t n;
            if (d->fd[f] < 0)
                continue;
            n = sm__pread_all(d->fd[f], g->buf, sizeof g->buf);
            rc = n < 0 ? (int)n : sm__parse_pp_dpm(g->buf, (size_t)n, &v);
            if (rc == 0)
                sm__emit(out, d->key[f == F_SCLK ? 6 : 7], (double)v, "MHz", d->src[f],
                        SM_AGG_MEAN);
            else
                bad = f == F_SCLK ? "pp_dpm_sclk" : "pp_dpm_mclk", bad_rc = rc;
        }
        if (bad && !d->failing) {
            sm__log(SM_WARN, "amdgpu: GPU %u (card%u): cannot read %s: %s; its values are "
                   "skipped until it recovers", d->index, d->card, bad, strerror(-bad_rc));
            d->failing = 1;
        } else if (!bad && d->failing) {
            sm__log(SM_INFO, "amdgpu: GPU %u (card%u) recovered", d->index, d->card);
            d->failing = 0;
        }
    }
    procs_sample(g, out);
    return 0; /* a value that failed was said; the others go on */
}

const sm_collector_ops sm__coll_amdgpu = {
    .name = "amdgpu",
    /* 9 per device (the own rank's process memory among them), fewer than
     * NVIDIA's; a GPU is counted once, by the row that counts devices, in
     * sm__collectors_series (plan's gpus_per_worker counts both) */
    .series_per_device = 9,
    .status_tag = "gpu",
    .gpu = true,
    .counts_devices = false,
    .state_size = sizeof(struct amdgpu),
    .open = amd_open,
    .sample = amd_sample,
    .close = amd_close,
};
