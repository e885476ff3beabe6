/*
 * coll_io.c — the container's block I/O (docs/series.md "Disk I/O"):
 *
 *   container_disk_read_megabytes    bytes read from block devices since the
 *                                    monitor started, /10^6
 *   container_disk_write_megabytes   bytes written, likewise
 *
 * Read from the cgroup, summed over every device:
 *   v2  io.stat rbytes / wbytes
 *   v1  blkio.throttle.io_service_bytes_recursive (Read / Write lines), else
 *       blkio.io_service_bytes_recursive (CFQ's, kernels before 5.0)
 * at the level cgroup.c's io_level() picks: the memory-limiting level (else
 * the CPU-limiting one), the set of processes the memory series describe.
 * Both files are hierarchical: a child cgroup's I/O is in its parent's.
 *
 * Present where the container collector is: only with a container limit
 * (docs/design.md §1).  Without a limit, or when the cgroup cannot be found,
 * open() returns silently: the container collector's line already says
 * "container_* absent/dropped", which covers these series too.
 *
 * Cumulative as the network series (coll_net.c): a counter that goes
 * backwards (the cgroup re-created) re-bases, the loss is not subtracted.
 * The file is kept open and re-read with pread; a reading that fails is
 * retried once on a fresh descriptor (kernfs answers ENODEV once the cgroup
 * is removed), and the next sample opens it again, so the series resume
 * when the file comes back.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "parse.h"

struct io {
    sm_cgroup cg;
    int fd;                 /* -1 when closed (the last read failed) */
    int v2;
    size_t srlen;           /* strlen(sysroot): paths in messages are the machine's */
    char path[SM_PATH_MAX]; /* the file, with sysroot */
    uint64_t last_r, last_w, sum_r, sum_w;
    char src_r[200], src_w[200];
    char buf[65536];        /* one line per device: a host with hundreds of loop devices */
};

static int io_parse(struct io *s, size_t n, uint64_t *r, uint64_t *w)
{
    return s->v2 ? sm__parse_io_stat(s->buf, n, r, w) : sm__parse_blkio_bytes(s->buf, n, r, w);
}

/* One reading from the open descriptor; *parse says whether a failure was
 * the file's content. */
static int io_read_once(struct io *s, uint64_t *r, uint64_t *w, int *parse)
{
    ssize_t n;

    *parse = 0;
    if (s->fd < 0) {
        s->fd = sm__open_abs(s->path); /* it failed before: it may be back */
        if (s->fd < 0)
            return s->fd;
    }
    n = sm__pread_all(s->fd, s->buf, sizeof s->buf);
    if (n < 0)
        return (int)n;
    *parse = 1;
    return io_parse(s, (size_t)n, r, w);
}

/* The same, once more on a fresh descriptor when it fails (the cgroup was
 * re-created, the file replaced); if that fails too the descriptor is
 * dropped and the next sample opens the file again. */
static int io_read(struct io *s, uint64_t *r, uint64_t *w, int *parse)
{
    int had = s->fd >= 0, rc = io_read_once(s, r, w, parse);

    if (rc < 0 && had && s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
        rc = io_read_once(s, r, w, parse);
    }
    if (rc < 0 && s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
    return rc;
}

static int io_open(void *state, const sm_ctx *ctx, sm_opened *res)
{
    struct io *s = state;
    sm_cgroup *cg = &s->cg;
    const char *rel;
    int rc, parse;

    s->fd = -1;
    s->srlen = strlen(ctx->sysroot);
    rc = sm__cgroup_resolve(ctx, cg);
    if (rc < 0)
        return rc; /* the container collector says why: "container_* dropped" */
    if (!cg->mem_limit && !(cg->cpu_cores > 0))
        return SM_ABSENT; /* likewise: "no cgroup limit ...: container_* absent" */
    if (!cg->io_version) {
        sm__line_mid(res->msg, sizeof res->msg, "no block I/O cgroup (", cg->io_why,
                    "): container_disk_* absent");
        return SM_ABSENT;
    }
    s->v2 = cg->io_version == 2;
    if (s->v2) {
        rc = sm__line(s->path, sizeof s->path, "%s/io.stat", cg->io_dir);
        if (rc == 0)
            s->fd = sm__open_abs(s->path);
    } else {
        /* the throttle policy's counters exist on every kernel with
         * CONFIG_BLK_DEV_THROTTLING; CFQ's (removed in 5.0) otherwise */
        rc = sm__line(s->path, sizeof s->path, "%s/blkio.throttle.io_service_bytes_recursive",
                     cg->io_dir);
        if (rc == 0 && (s->fd = sm__open_abs(s->path)) == -ENOENT) {
            rc = sm__line(s->path, sizeof s->path, "%s/blkio.io_service_bytes_recursive",
                         cg->io_dir);
            if (rc == 0)
                s->fd = sm__open_abs(s->path);
        }
    }
    rel = s->path + s->srlen;
    if (rc < 0 || s->fd < 0) {
        rc = rc < 0 ? rc : s->fd;
        snprintf(res->msg, sizeof res->msg, "cannot open %s: %s; container_disk_* dropped", rel,
                 strerror(-rc));
        return rc;
    }
    rc = io_read(s, &s->last_r, &s->last_w, &parse);
    if (rc < 0) { /* io_read closed it */
        snprintf(res->msg, sizeof res->msg, "cannot %s %s: %s; container_disk_* dropped",
                 parse ? "parse" : "read", rel, strerror(-rc));
        return rc;
    }
    snprintf(s->src_r, sizeof s->src_r, "%s:%s", rel, s->v2 ? "rbytes" : "Read");
    snprintf(s->src_w, sizeof s->src_w, "%s:%s", rel, s->v2 ? "wbytes" : "Write");
    /* attached: worth a line only when the level is not the limiting one */
    if (strcmp(cg->io_path, cg->mem_limit ? cg->mem_limit_path : cg->cpu_limit_path) != 0)
        sm__line_mid(res->msg, sizeof res->msg, "container_disk_* read at the ", cg->io_why, "");
    return 0;
}

static void advance(uint64_t cur, uint64_t *last, uint64_t *sum)
{
    if (cur >= *last)
        *sum += cur - *last;
    *last = cur; /* backwards: re-base */
}

static int io_sample(void *state, sm_points *out, char *msg, size_t msglen)
{
    struct io *s = state;
    uint64_t r, w;
    int parse, rc = io_read(s, &r, &w, &parse);

    if (rc < 0) {
        snprintf(msg, msglen, "cannot %s %s: %s", parse ? "parse" : "read", s->path + s->srlen,
                 strerror(-rc));
        return rc;
    }
    advance(r, &s->last_r, &s->sum_r);
    advance(w, &s->last_w, &s->sum_w);
    sm__emit(out, "container_disk_read_megabytes", (double)s->sum_r / 1e6, "MB", s->src_r,
            SM_AGG_LAST);
    sm__emit(out, "container_disk_write_megabytes", (double)s->sum_w / 1e6, "MB", s->src_w,
            SM_AGG_LAST);
    return 0;
}

static void io_close(void *state)
{
    struct io *s = state;

    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
}

const sm_collector_ops sm__coll_io = {
    .name = "disk_io",
    .series = 2,
    .needs_limit = true,
    .state_size = sizeof(struct io),
    .open = io_open,
    .sample = io_sample,
    .close = io_close,
};
