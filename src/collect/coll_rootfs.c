/*
 * coll_rootfs.c — rootfs_* from statvfs("/"): the container's root
 * filesystem (an overlay backed by the node's disk), which MLflow logs as
 * disk_*.  Formulas are psutil.disk_usage()'s (psutil/_psposix.py):
 * used = (f_blocks - f_bfree) * f_frsize, percent against used + f_bavail
 * (space reserved for root is not available to the user).  statvfs can
 * block (a dead network filesystem at /): a sample stuck in it is bounded by
 * the monitor's stop timeout (monitor.c), so nothing here may hold a lock or
 * a resource another thread waits on while it calls it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#include "internal.h"

struct rootfs {
    char path[SM_PATH_MAX];
};

static int rootfs_read(struct rootfs *s, double *used, double *avail)
{
    struct statvfs v;

    if (statvfs(s->path, &v) < 0)
        return -errno;
    if (v.f_blocks < v.f_bfree)
        return -EINVAL;
    *used = (double)(v.f_blocks - v.f_bfree) * (double)v.f_frsize;
    *avail = (double)v.f_bavail * (double)v.f_frsize;
    return 0;
}

static int rootfs_open(void *state, const sm_ctx *ctx, sm_opened *res)
{
    char *msg = res->msg;
    size_t msglen = sizeof res->msg;
    struct rootfs *s = state;
    double u, a;
    int rc = sm__path(ctx, "/", s->path, sizeof s->path);

    if (rc == 0)
        rc = rootfs_read(s, &u, &a);
    if (rc < 0)
        snprintf(msg, msglen, "statvfs(\"/\") failed: %s; rootfs_* dropped", strerror(-rc));
    return rc;
}

static int rootfs_sample(void *state, sm_points *out, char *msg, size_t msglen)
{
    struct rootfs *s = state;
    double used, avail;
    int rc = rootfs_read(s, &used, &avail);

    if (rc < 0) {
        snprintf(msg, msglen, "statvfs(\"/\") failed: %s", strerror(-rc));
        return rc;
    }
    sm__emit(out, "disk_usage_megabytes", used / 1e6, "MB", "statvfs(/)", SM_AGG_MEAN);
    sm__emit(out, "disk_usage_percentage",
            used + avail > 0 ? 100.0 * used / (used + avail) : 0.0, "percent", "statvfs(/)",
            SM_AGG_MEAN);
    sm__emit(out, "disk_available_megabytes", avail / 1e6, "MB", "statvfs(/)", SM_AGG_MEAN);
    return 0;
}

static void rootfs_close(void *state)
{
    (void)state;
}

const sm_collector_ops sm__coll_rootfs = {
    .name = "rootfs",
    .series = 3,
    .node_scope = true,
    .state_size = sizeof(struct rootfs),
    .open = rootfs_open,
    .sample = rootfs_sample,
    .close = rootfs_close,
};
