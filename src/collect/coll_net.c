/*
 * coll_net.c — network_* from /proc/net/dev, which shows the reading
 * process's network namespace: in Kubernetes, the pod's.  All interfaces, lo
 * included, as psutil.net_io_counters() and so MLflow.  Values are cumulative
 * since the monitor started; a counter that goes backwards (an interface
 * removed, a wrap) re-bases: its loss is not subtracted, so the series never
 * decreases and never goes negative.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "parse.h"

struct net {
    int fd;
    uint64_t last_rx, last_tx;
    uint64_t sum_rx, sum_tx;
    char buf[65536]; /* a pod has few interfaces; a host netns may have hundreds */
};

static int net_read(struct net *s, uint64_t *rx, uint64_t *tx)
{
    ssize_t n = sm__pread_all(s->fd, s->buf, sizeof s->buf);

    if (n < 0)
        return (int)n;
    return sm__parse_net_dev(s->buf, (size_t)n, rx, tx);
}

static int net_open(void *state, const sm_ctx *ctx, sm_opened *res)
{
    char *msg = res->msg;
    size_t msglen = sizeof res->msg;
    struct net *s = state;
    int rc;

    s->fd = sm__open(ctx, "/proc/net/dev");
    if (s->fd < 0) {
        snprintf(msg, msglen, "cannot open /proc/net/dev: %s; network_* dropped",
                 strerror(-s->fd));
        return s->fd;
    }
    rc = net_read(s, &s->last_rx, &s->last_tx);
    if (rc < 0) {
        snprintf(msg, msglen, "cannot parse /proc/net/dev (%s); network_* dropped", strerror(-rc));
        close(s->fd);
    }
    return rc;
}

static void advance(uint64_t cur, uint64_t *last, uint64_t *sum)
{
    if (cur >= *last)
        *sum += cur - *last;
    *last = cur; /* backwards: re-base */
}

static int net_sample(void *state, sm_points *out, char *msg, size_t msglen)
{
    struct net *s = state;
    uint64_t rx, tx;
    int rc = net_read(s, &rx, &tx);

    if (rc < 0) {
        snprintf(msg, msglen, "cannot read /proc/net/dev: %s", strerror(-rc));
        return rc;
    }
    advance(rx, &s->last_rx, &s->sum_rx);
    advance(tx, &s->last_tx, &s->sum_tx);
    sm__emit(out, "network_receive_megabytes", (double)s->sum_rx / 1e6, "MB", "/proc/net/dev",
            SM_AGG_LAST);
    sm__emit(out, "network_transmit_megabytes", (double)s->sum_tx / 1e6, "MB", "/proc/net/dev",
            SM_AGG_LAST);
    return 0;
}

static void net_close(void *state)
{
    close(((struct net *)state)->fd);
}

const sm_collector_ops sm__coll_network = {
    .name = "network",
    .series = 2,
    .state_size = sizeof(struct net),
    .open = net_open,
    .sample = net_sample,
    .close = net_close,
};
