/*
 * coll_node.c — the node-scope series: node_cpu_* from /proc/stat and
 * node_memory_* from /proc/meminfo.  Both files are not namespaced: inside a
 * container they show the whole node, which is why the keys say "node_".
 * Formulas are psutil's, so node_* equals what MLflow logs as cpu_* and
 * system_memory_* (docs/design.md §1): a formula that drifts from psutil's
 * makes the two charts of one machine disagree, so none may.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "parse.h"

/* ---- node CPU -------------------------------------------------------------- */
struct node_cpu {
    int fd;
    sm_cpu_times prev;
    char buf[1024]; /* the first line only: the rest of /proc/stat (intr, one line
                       per CPU) can be many kilobytes and is not needed */
};

static int read_stat(struct node_cpu *s, sm_cpu_times *t)
{
    ssize_t n = pread(s->fd, s->buf, sizeof s->buf - 1, 0);

    if (n < 0)
        return -errno;
    s->buf[n] = '\0';
    if (!memchr(s->buf, '\n', (size_t)n))
        return -EINVAL; /* first line truncated */
    return sm__parse_proc_stat(s->buf, (size_t)n, t);
}

static int cpu_open(void *state, const sm_ctx *ctx, sm_opened *res)
{
    char *msg = res->msg;
    size_t msglen = sizeof res->msg;
    struct node_cpu *s = state;
    int rc;

    s->fd = sm__open(ctx, "/proc/stat");
    if (s->fd < 0) {
        snprintf(msg, msglen, "cannot open /proc/stat: %s; node_cpu_* dropped", strerror(-s->fd));
        return s->fd;
    }
    rc = read_stat(s, &s->prev); /* baseline: the first sample is a delta from here */
    if (rc < 0) {
        snprintf(msg, msglen, "cannot parse /proc/stat (%s); node_cpu_* dropped", strerror(-rc));
        close(s->fd);
    }
    return rc;
}

static int cpu_sample(void *state, sm_points *out, char *msg, size_t msglen)
{
    struct node_cpu *s = state;
    sm_cpu_times now;
    int rc = read_stat(s, &now);

    if (rc < 0) {
        snprintf(msg, msglen, "cannot read /proc/stat: %s", strerror(-rc));
        return rc;
    }
    sm__emit(out, "cpu_utilization_percentage", sm__cpu_percent(&s->prev, &now), "percent",
            "/proc/stat", SM_AGG_RATE);
    s->prev = now;
    return 0;
}

static void cpu_close(void *state)
{
    close(((struct node_cpu *)state)->fd);
}

const sm_collector_ops sm__coll_node_cpu = {
    .name = "node_cpu",
    .series = 1,
    .node_scope = true,
    .state_size = sizeof(struct node_cpu),
    .open = cpu_open,
    .sample = cpu_sample,
    .close = cpu_close,
};

/* ---- node memory ----------------------------------------------------------- */
struct node_mem {
    int fd;
    char buf[16384];
};

static int read_meminfo(struct node_mem *s, uint64_t *total, uint64_t *avail)
{
    int estimated;
    ssize_t n = sm__pread_all(s->fd, s->buf, sizeof s->buf);

    if (n < 0)
        return (int)n;
    return sm__parse_meminfo(s->buf, (size_t)n, total, avail, &estimated);
}

static int mem_open(void *state, const sm_ctx *ctx, sm_opened *res)
{
    char *msg = res->msg;
    size_t msglen = sizeof res->msg;
    struct node_mem *s = state;
    uint64_t t, a;
    int rc;

    s->fd = sm__open(ctx, "/proc/meminfo");
    if (s->fd < 0) {
        snprintf(msg, msglen, "cannot open /proc/meminfo: %s; node_memory_* dropped",
                 strerror(-s->fd));
        return s->fd;
    }
    rc = read_meminfo(s, &t, &a);
    if (rc < 0) {
        snprintf(msg, msglen, "cannot parse /proc/meminfo (%s); node_memory_* dropped",
                 strerror(-rc));
        close(s->fd);
    }
    return rc;
}

static int mem_sample(void *state, sm_points *out, char *msg, size_t msglen)
{
    struct node_mem *s = state;
    uint64_t total, avail;
    int rc = read_meminfo(s, &total, &avail);

    if (rc < 0) {
        snprintf(msg, msglen, "cannot read /proc/meminfo: %s", strerror(-rc));
        return rc;
    }
    sm__emit(out, "system_memory_usage_megabytes", (double)(total - avail) / 1e6, "MB",
            "/proc/meminfo", SM_AGG_MEAN);
    sm__emit(out, "system_memory_usage_percentage", 100.0 * (double)(total - avail) / (double)total,
            "percent", "/proc/meminfo", SM_AGG_MEAN);
    return 0;
}

static void mem_close(void *state)
{
    close(((struct node_mem *)state)->fd);
}

const sm_collector_ops sm__coll_node_memory = {
    .name = "node_memory",
    .series = 2,
    .node_scope = true,
    .state_size = sizeof(struct node_mem),
    .open = mem_open,
    .sample = mem_sample,
    .close = mem_close,
};
