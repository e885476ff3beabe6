/*
 * coll_rdma.c — the interconnect of a rank (docs/series.md "RDMA"): the
 * InfiniBand / RoCE ports this container may use, which the kernel's
 * network stack never sees (RDMA bypasses it: network_* reads almost
 * nothing while a job moves terabytes).
 *
 *   rdma_receive_megabytes    octets received since the monitor started,
 *   rdma_transmit_megabytes   and transmitted, /10^6, summed over the ports
 *                             with byte counters: ports/N/counters/
 *                             port_{rcv,xmit}_data, in units of 4 octets
 *                             (Documentation/ABI/stable/sysfs-class-infiniband:
 *                             "divided by 4 (lanes)")
 *   rdma_receive_packets      packets since the start on the ports that count
 *   rdma_transmit_packets     packets only (no counters/: the kernel adds that
 *                             group only for a driver with process_mad,
 *                             drivers/infiniband/core/sysfs.c setup_port), from
 *                             hw_counters/{rcvd,sent}_pkts (rdma_rxe)
 *
 * Which ports: those of the devices whose /dev/infiniband/uverbsN exists
 * here (the RDMA device plugin's grant), each named by
 * /sys/class/infiniband_verbs/uverbsN/ibdev.  Where /dev is the kernel's
 * own devtmpfs (a bare host: no container runtime made this /dev) every
 * device of /sys/class/infiniband is the host's to use.  No device at all:
 * absent without a word (most machines); devices in sysfs but none granted:
 * absent, one line.
 *
 * Link health since the start (the rdma_events tag and an event line, as the
 * GPU's Xid): the PMA error counters (link_downed, link_error_recovery,
 * symbol_error, port_rcv_errors, port_xmit_discards) and the driver's
 * retransmission and timeout counters where hw_counters has them, read once
 * per window (a PMA read is a MAD to the HCA's firmware: not per sample),
 * and the port's state when it is not ACTIVE.
 *
 * Never: a byte count made up from packets, a counter that stopped at its
 * maximum counted as if it wrapped (IBA 1.8 16.1.3.5: PortCounters "shall
 * stop at all ones"; a 32-bit port_xmit_data stops after 17 GB), or one
 * port's failing file dropping another port's bytes.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "parse.h"

#define RDMA_PORTS_MAX 32
#define RDMA_NAME 64 /* IB_DEVICE_NAME_MAX, linux/include/rdma/ib_verbs.h */

/* The link-health counters: counters/ (drivers/infiniband/core/sysfs.c
 * PORT_PMA_ATTR: their widths in bits, at whose maximum they stop) and
 * hw_counters/ (64-bit values of the driver: mlx5's retrans_q_cnts and
 * roce_accl_cnts, drivers/infiniband/hw/mlx5/counters.c; rxe's
 * rxe_counter_descs, drivers/infiniband/sw/rxe/rxe_hw_counters.c). */
static const struct health_def {
    const char *name;
    int pma;   /* 1: counters/, 0: hw_counters/ */
    int width; /* bits */
} health_defs[] = {
    {"link_downed", 1, 8},
    {"link_error_recovery", 1, 8},
    {"symbol_error", 1, 16},
    {"port_rcv_errors", 1, 16},
    {"port_xmit_discards", 1, 16},
    {"local_ack_timeout_err", 0, 64},
    {"packet_seq_err", 0, 64},
    {"implied_nak_seq_err", 0, 64},
    {"rnr_nak_retry_err", 0, 64},
    {"out_of_sequence", 0, 64},
    {"roce_adp_retrans", 0, 64},
    {"roce_adp_retrans_to", 0, 64},
    {"retry_exceeded_err", 0, 64},
    {"retry_rnr_exceeded_err", 0, 64},
    {"completer_retry_err", 0, 64},
    {"rcvd_seq_err", 0, 64},
    {"link_downed", 0, 64}, /* rxe's own, where counters/ has none */
};
#define HEALTH_N (sizeof health_defs / sizeof health_defs[0])
#define IB_PORT_ACTIVE 4 /* enum ib_port_state, linux/include/rdma/ib_verbs.h */

struct rdma_port {
    char dev[RDMA_NAME];
    unsigned num;
    int bytes;             /* counters/port_{rcv,xmit}_data answer; else packets */
    int width32;           /* the PMA's 32-bit PortCounters (no unicast_* files) */
    int fd[2];             /* rx, tx: the data (or packet) counters */
    uint64_t last[2];
    int stopped[2];        /* a 32-bit data counter at all ones: said once */
    int failing;           /* its last read failed: said once per streak */
    int hfd[HEALTH_N];     /* -1: the port has no such file */
    uint64_t hcur[HEALTH_N], hsince[HEALTH_N]; /* last reading; counted since the start */
    int state_fd;
    unsigned state;
    char state_name[24];
    char src[2][160];      /* the files, as a point's source */
};

struct rdma {
    size_t n, nbytes, npkts;
    struct rdma_port p[RDMA_PORTS_MAX];
    uint64_t sum[2][2];    /* [bytes?0:1][rx/tx]: octets, packets */
    char src_bytes[2][200], src_pkts[2][200];
    char shipped[sizeof((sm_tag *)0)->value], shipped_news[sizeof((sm_tag *)0)->value];
    double t_open, t_shipped;
};

static int name_number(const char *name, const char *prefix, unsigned *out)
{
    size_t n = strlen(prefix);
    char *end;
    unsigned long v;

    if (strncmp(name, prefix, n) != 0 || name[n] < '0' || name[n] > '9')
        return 0;
    v = strtoul(name + n, &end, 10);
    if (*end || v > 0xffff)
        return 0;
    *out = (unsigned)v;
    return 1;
}

static int read_counter(int fd, uint64_t *v)
{
    char buf[32];
    ssize_t n = sm__pread_all(fd, buf, sizeof buf);

    return n < 0 ? (int)n : sm__parse_rdma_counter(buf, (size_t)n, v);
}

static int open_counter(const sm_ctx *ctx, const struct rdma_port *p, const char *dir,
                        const char *name, uint64_t *v)
{
    char abs[256];
    int fd, rc;

    snprintf(abs, sizeof abs, "/sys/class/infiniband/%s/ports/%u/%s/%s", p->dev, p->num, dir,
             name);
    fd = sm__open(ctx, abs);
    if (fd < 0)
        return fd;
    rc = read_counter(fd, v);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    return fd;
}

/* Whether this process's /dev is the kernel's devtmpfs: the last mount on
 * /dev in /proc/self/mountinfo is the one seen.  A container runtime mounts
 * a tmpfs there holding only the devices it grants. */
static int dev_is_devtmpfs(const sm_ctx *ctx)
{
    char path[SM_PATH_MAX], *mi = NULL;
    size_t pos = 0;
    sm_mount m;
    int host = 0;
    ssize_t n;

    if (sm__path(ctx, "/proc/self/mountinfo", path, sizeof path) < 0 ||
        (n = sm__read_file_alloc(path, &mi)) < 0)
        return 0;
    while (sm__mountinfo_next(mi, (size_t)n, &pos, &m) == 1)
        if (m.point_len == 4 && memcmp(m.point, "/dev", 4) == 0)
            host = m.fstype_len == 8 && memcmp(m.fstype, "devtmpfs", 8) == 0;
    free(mi);
    return host;
}

static int have_dev(char (*devs)[RDMA_NAME], size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(devs[i], name) == 0)
            return 1;
    return 0;
}

/* The devices this process may use (the file-top comment's rule); *seen:
 * devices in /sys/class/infiniband. */
static size_t devices(const sm_ctx *ctx, char (*devs)[RDMA_NAME], size_t max, int *host,
                      size_t *seen, char *why, size_t whylen)
{
    char path[SM_PATH_MAX];
    struct dirent *e;
    size_t n = 0;
    DIR *d;

    *seen = 0;
    if (sm__path(ctx, "/sys/class/infiniband", path, sizeof path) == 0 && (d = opendir(path))) {
        while ((e = readdir(d)) != NULL)
            if (e->d_name[0] != '.') {
                (*seen)++;
                size_t l = strlen(e->d_name);
                if (*host && n < max && l < RDMA_NAME) {
                    memcpy(devs[n], e->d_name, l + 1);
                    n++;
                }
            }
        closedir(d);
    }
    if (*host)
        return n;
    if (sm__path(ctx, "/dev/infiniband", path, sizeof path) < 0 || !(d = opendir(path)))
        return 0;
    while ((e = readdir(d)) != NULL) {
        char abs[128], buf[128], name[RDMA_NAME];
        unsigned u;
        ssize_t r;
        int rc;

        if (!name_number(e->d_name, "uverbs", &u))
            continue;
        snprintf(abs, sizeof abs, "/sys/class/infiniband_verbs/uverbs%u/ibdev", u);
        r = sm__read_file(ctx, abs, buf, sizeof buf);
        rc = r < 0 ? (int)r : sm__parse_rdma_ibdev(buf, (size_t)r, name, sizeof name);
        if (rc < 0) {
            sm__line_join(why, whylen, "%s: %s", abs, strerror(-rc));
            continue;
        }
        if (n < max && !have_dev(devs, n, name))
            memcpy(devs[n++], name, sizeof name);
    }
    closedir(d);
    return n;
}

static void port_close(struct rdma_port *p)
{
    for (int k = 0; k < 2; k++)
        if (p->fd[k] >= 0)
            close(p->fd[k]);
    for (size_t i = 0; i < HEALTH_N; i++)
        if (p->hfd[i] >= 0)
            close(p->hfd[i]);
    if (p->state_fd >= 0)
        close(p->state_fd);
}

static void read_state(struct rdma_port *p)
{
    char buf[64];
    ssize_t n;

    if (p->state_fd < 0)
        return;
    n = sm__pread_all(p->state_fd, buf, sizeof buf);
    if (n < 0 || sm__parse_rdma_state(buf, (size_t)n, &p->state, p->state_name,
                                      sizeof p->state_name) < 0)
        p->state = IB_PORT_ACTIVE; /* unreadable: no claim */
}

/* One port: its counters, or one line saying why it has none. */
static int port_open(const sm_ctx *ctx, struct rdma_port *p, char *note, size_t notecap)
{
    static const char *const data[2] = {"port_rcv_data", "port_xmit_data"};
    static const char *const pkts[2] = {"rcvd_pkts", "sent_pkts"};
    char abs[256];
    uint64_t v;
    int fd, rc = 0;

    p->fd[0] = p->fd[1] = p->state_fd = -1;
    for (size_t i = 0; i < HEALTH_N; i++)
        p->hfd[i] = -1;
    p->bytes = 1;
    for (int k = 0; k < 2 && rc >= 0; k++) {
        rc = p->fd[k] = open_counter(ctx, p, "counters", data[k], &p->last[k]);
        snprintf(p->src[k], sizeof p->src[k], "/sys/class/infiniband/%s/ports/%u/counters/%s",
                 p->dev, p->num, data[k]);
    }
    if (rc < 0) {
        int pma_rc = rc;
        for (int k = 0; k < 2; k++)
            if (p->fd[k] >= 0)
                close(p->fd[k]);
        p->fd[0] = p->fd[1] = -1;
        p->bytes = 0;
        rc = 0;
        for (int k = 0; k < 2 && rc >= 0; k++) {
            rc = p->fd[k] = open_counter(ctx, p, "hw_counters", pkts[k], &p->last[k]);
            snprintf(p->src[k], sizeof p->src[k],
                     "/sys/class/infiniband/%s/ports/%u/hw_counters/%s", p->dev, p->num, pkts[k]);
        }
        if (rc < 0) {
            for (int k = 0; k < 2; k++)
                if (p->fd[k] >= 0)
                    close(p->fd[k]);
            sm__line_join(note, notecap, "%s/%u: no byte counters (counters/port_rcv_data: %s) "
                          "and no packet counters (hw_counters/rcvd_pkts: %s): not recorded",
                          p->dev, p->num, strerror(-pma_rc), strerror(-rc));
            return rc;
        }
        sm__line_join(note, notecap, "%s/%u counts packets only (no PMA counters/: %s): "
                      "rdma_*_packets from hw_counters, no byte count", p->dev, p->num,
                      strerror(-pma_rc));
    } else {
        /* the 32-bit PortCounters group has no unicast_* files, the extended
         * (64-bit) one has: drivers/infiniband/core/sysfs.c, pma_attrs and
         * pma_attrs_ext */
        snprintf(abs, sizeof abs, "/sys/class/infiniband/%s/ports/%u/counters/unicast_rcv_packets",
                 p->dev, p->num);
        fd = sm__open(ctx, abs);
        p->width32 = fd < 0;
        if (fd >= 0)
            close(fd);
    }
    for (size_t i = 0; i < HEALTH_N; i++) {
        const struct health_def *h = &health_defs[i];
        if (!h->pma && i > 0 && strcmp(h->name, "link_downed") == 0 && p->hfd[0] >= 0)
            continue; /* the PMA's link_downed counts the same */
        fd = open_counter(ctx, p, h->pma ? "counters" : "hw_counters", h->name, &v);
        if (fd >= 0) {
            p->hfd[i] = fd;
            p->hcur[i] = v;
        }
    }
    snprintf(abs, sizeof abs, "/sys/class/infiniband/%s/ports/%u/state", p->dev, p->num);
    p->state_fd = sm__open(ctx, abs);
    read_state(p);
    return 0;
}

/* "mlx5_0/1 InfiniBand ACTIVE 200 Gb/sec (4X HDR)" for the start tag. */
static void port_describe(const sm_ctx *ctx, const struct rdma_port *p, char *out, size_t cap)
{
    char abs[256], ll[32] = "", rate[64] = "";
    ssize_t n;

    snprintf(abs, sizeof abs, "/sys/class/infiniband/%s/ports/%u/link_layer", p->dev, p->num);
    if ((n = sm__read_file(ctx, abs, ll, sizeof ll)) > 0 && ll[n - 1] == '\n')
        ll[n - 1] = '\0';
    snprintf(abs, sizeof abs, "/sys/class/infiniband/%s/ports/%u/rate", p->dev, p->num);
    if ((n = sm__read_file(ctx, abs, rate, sizeof rate)) > 0 && rate[n - 1] == '\n')
        rate[n - 1] = '\0';
    for (char *c = ll; *c; c++)
        if ((unsigned char)*c < 0x20)
            *c = '?';
    for (char *c = rate; *c; c++)
        if ((unsigned char)*c < 0x20)
            *c = '?';
    sm__line_join(out, cap, "%s/%u %s %s%s%s%s", p->dev, p->num, ll[0] ? ll : "?",
                  p->state_name[0] ? p->state_name : "?", rate[0] ? " " : "", rate,
                  !p->bytes ? " packets-only" : p->width32 ? " 32-bit" : "");
}

static int cmp_port(const void *a, const void *b)
{
    const struct rdma_port *x = a, *y = b;
    int c = strcmp(x->dev, y->dev);
    return c ? c : (x->num > y->num) - (x->num < y->num);
}

static int rdma_open(void *state, const sm_ctx *ctx, sm_opened *res)
{
    struct rdma *s = state;
    char devs[RDMA_PORTS_MAX][RDMA_NAME], why[400] = "", note[SM_NOTE_LINE] = "";
    int host = dev_is_devtmpfs(ctx);
    size_t seen, nd = devices(ctx, devs, RDMA_PORTS_MAX, &host, &seen, why, sizeof why);

    s->t_open = s->t_shipped = sm__now_mono();
    if (nd == 0) {
        if (!seen && !why[0])
            return SM_ABSENT; /* no RDMA here: nothing to say */
        sm__line(res->msg, sizeof res->msg, "no RDMA device given to this container (no "
                 "/dev/infiniband/uverbs* of the %zu device%s in /sys/class/infiniband%s%s): "
                 "rdma_* absent", seen, seen == 1 ? "" : "s", why[0] ? "; " : "", why);
        snprintf(res->status, sizeof res->status, "none: no /dev/infiniband/uverbs* here");
        return SM_ABSENT;
    }
    for (size_t i = 0; i < nd; i++) {
        char path[SM_PATH_MAX], abs[128];
        struct dirent *e;
        DIR *d;

        snprintf(abs, sizeof abs, "/sys/class/infiniband/%s/ports", devs[i]);
        if (sm__path(ctx, abs, path, sizeof path) < 0 || !(d = opendir(path))) {
            sm__line_join(note, sizeof note, "%s: cannot list %s: %s", devs[i], abs,
                          strerror(errno));
            continue;
        }
        while ((e = readdir(d)) != NULL) {
            struct rdma_port *p = &s->p[s->n];
            unsigned num;
            if (!name_number(e->d_name, "", &num))
                continue;
            if (s->n == RDMA_PORTS_MAX) {
                sm__line_join(note, sizeof note, "more than %d ports: %s/%u and later not "
                              "recorded", RDMA_PORTS_MAX, devs[i], num);
                break;
            }
            memset(p, 0, sizeof *p);
            snprintf(p->dev, sizeof p->dev, "%s", devs[i]);
            p->num = num;
            if (port_open(ctx, p, note, sizeof note) == 0)
                s->n++;
        }
        closedir(d);
    }
    if (s->n == 0) {
        sm__line(res->msg, sizeof res->msg, "no RDMA port with counters (%s): rdma_* absent",
                 note[0] ? note : "no ports");
        snprintf(res->status, sizeof res->status, "none: no port with counters");
        return SM_ABSENT;
    }
    qsort(s->p, s->n, sizeof s->p[0], cmp_port);
    for (size_t i = 0; i < s->n; i++) {
        struct rdma_port *p = &s->p[i];
        size_t *k = p->bytes ? &s->nbytes : &s->npkts;
        char (*src)[200] = p->bytes ? s->src_bytes : s->src_pkts;
        for (int d = 0; d < 2; d++) {
            if (*k == 0)
                snprintf(src[d], sizeof src[d], "%s%s", p->src[d], p->bytes ? " x4 octets" : "");
            else
                sm__line_add(src[d], sizeof src[d], " (+%s/%u)", p->dev, p->num);
        }
        (*k)++;
        port_describe(ctx, p, res->status, sizeof res->status);
        if (p->bytes && p->width32)
            sm__line_join(note, sizeof note, "%s/%u has 32-bit data counters (PortCounters): "
                          "they stop at 17.2 GB, which is said when it happens", p->dev,
                          p->num);
    }
    sm__line(res->msg, sizeof res->msg, "rdma_* from %zu port%s (%s: %s)%s%s", s->n,
             s->n == 1 ? "" : "s", host ? "the host's /dev" : "/dev/infiniband", res->status,
             note[0] ? "; " : "", note);
    return 0;
}

/* A data counter's new reading: the delta since the last, a counter that
 * went backwards (reset: perfquery -R, a driver reload) re-based, and a
 * 32-bit one that reached all ones said once (it stays there). */
static void advance(struct rdma *s, struct rdma_port *p, int k, uint64_t v)
{
    static const char *const dir[2] = {"receive", "transmit"};

    if (v >= p->last[k])
        s->sum[p->bytes ? 0 : 1][k] += (v - p->last[k]) * (p->bytes ? 4 : 1);
    else
        p->stopped[k] = 0; /* reset: counting again */
    p->last[k] = v;
    if (p->bytes && p->width32 && v == UINT32_MAX && !p->stopped[k]) {
        p->stopped[k] = 1;
        sm__log(SM_WARN, "rdma: %s port %u: %s stopped at its maximum (4294967295 x 4 octets, "
                "a 32-bit PortCounters counter: it stops, it does not wrap); rdma_%s_megabytes "
                "counts none of this port's %s from here", p->dev, p->num, p->src[k],
                dir[k], k ? "transmitted octets" : "received octets");
    }
}

static int rdma_sample(void *state, sm_points *out, char *msg, size_t msglen)
{
    struct rdma *s = state;

    (void)msg;
    (void)msglen;
    for (size_t i = 0; i < s->n; i++) {
        struct rdma_port *p = &s->p[i];
        uint64_t v[2];
        int rc = read_counter(p->fd[0], &v[0]);

        if (rc == 0)
            rc = read_counter(p->fd[1], &v[1]);
        if (rc < 0) {
            /* only this port's bytes wait: its next good read adds them */
            if (!p->failing)
                sm__log(SM_WARN, "rdma: %s port %u: cannot read its counters: %s; its bytes "
                        "are added when they read again", p->dev, p->num, strerror(-rc));
            p->failing = 1;
            continue;
        }
        if (p->failing)
            sm__log(SM_INFO, "rdma: %s port %u: counters read again", p->dev, p->num);
        p->failing = 0;
        advance(s, p, 0, v[0]);
        advance(s, p, 1, v[1]);
    }
    if (s->nbytes) {
        sm__emit(out, "rdma_receive_megabytes", (double)s->sum[0][0] / 1e6, "MB",
                 s->src_bytes[0], SM_AGG_LAST);
        sm__emit(out, "rdma_transmit_megabytes", (double)s->sum[0][1] / 1e6, "MB",
                 s->src_bytes[1], SM_AGG_LAST);
    }
    if (s->npkts) {
        sm__emit(out, "rdma_receive_packets", (double)s->sum[1][0], "packets", s->src_pkts[0],
                 SM_AGG_LAST);
        sm__emit(out, "rdma_transmit_packets", (double)s->sum[1][1], "packets", s->src_pkts[1],
                 SM_AGG_LAST);
    }
    return 0;
}

/* The health counters and the state, once per window; an event line for a
 * port whose link went down or whose state changed. */
static void health_read(struct rdma *s)
{
    for (size_t i = 0; i < s->n; i++) {
        struct rdma_port *p = &s->p[i];
        unsigned was = p->state;

        for (size_t h = 0; h < HEALTH_N; h++) {
            uint64_t v;
            if (p->hfd[h] < 0 || read_counter(p->hfd[h], &v) < 0)
                continue; /* kept: the next window reads it again */
            /* a counter reset (perfquery -R) counts again from 0 */
            uint64_t d = v >= p->hcur[h] ? v - p->hcur[h] : v;
            p->hsince[h] += d;
            p->hcur[h] = v;
            if (d && strcmp(health_defs[h].name, "link_downed") == 0)
                sm__log(SM_WARN, "rdma: %s port %u: link_downed +%llu (%llu since start)",
                        p->dev, p->num, (unsigned long long)d,
                        (unsigned long long)p->hsince[h]);
        }
        read_state(p);
        if (p->state != was)
            sm__log(p->state == IB_PORT_ACTIVE ? SM_INFO : SM_WARN,
                    "rdma: %s port %u: state %s", p->dev, p->num, p->state_name);
    }
}

/* scopemeter.rankN.rdma_events (docs/series.md gives the grammar): one
 * clause per port with anything to say, its non-zero counts since the
 * start ("N+" when the counter stopped at its width's maximum: at least N)
 * and its state when not ACTIVE.  news: which items, not their counts. */
static void events_format(const struct rdma *s, int news, char *val, size_t cap)
{
    val[0] = '\0';
    for (size_t i = 0; i < s->n; i++) {
        const struct rdma_port *p = &s->p[i];
        char c[400] = "";

        for (size_t h = 0; h < HEALTH_N; h++) {
            const struct health_def *d = &health_defs[h];
            uint64_t max = d->width == 64 ? UINT64_MAX : (1ull << d->width) - 1;
            if (p->hfd[h] < 0 || !p->hsince[h])
                continue;
            if (news)
                sm__line_add(c, sizeof c, " %s", d->name);
            else
                sm__line_add(c, sizeof c, " %s=%llu%s", d->name,
                             (unsigned long long)p->hsince[h],
                             p->hcur[h] == max ? "+" : "");
        }
        for (int k = 0; k < 2; k++)
            if (p->stopped[k])
                sm__line_add(c, sizeof c, " %s=stopped", k ? "port_xmit_data" : "port_rcv_data");
        if (p->state != IB_PORT_ACTIVE)
            sm__line_add(c, sizeof c, " state=%s", p->state_name);
        if (c[0])
            sm__line_add(val, cap, "%s%s/%u%s", val[0] ? "; " : "", p->dev, p->num, c);
    }
}

static void rdma_tags(void *state, int phase, sm_tags *out)
{
    struct rdma *s = state;
    char val[sizeof s->shipped], news[sizeof s->shipped];
    double now = sm__now_mono();

    if (phase != SM_TAGS_START)
        health_read(s);
    events_format(s, 0, val, sizeof val);
    events_format(s, 1, news, sizeof news);
    if (!val[0] && !s->shipped[0])
        return;
    /* at once when which items changed; a count of known items at most
     * every (time since open)/128, as gpu_events (docs/design.md §9) */
    if (phase == SM_TAGS_WINDOW &&
        (strcmp(val, s->shipped) == 0 ||
         (strcmp(news, s->shipped_news) == 0 && now - s->t_shipped < (now - s->t_open) / 128.0)))
        return;
    sm__tag_add(out, "rdma_events", "%s", val[0] ? val : "none");
    memcpy(s->shipped, val, sizeof val);
    memcpy(s->shipped_news, news, sizeof news);
    s->t_shipped = now;
}

static void rdma_close(void *state)
{
    struct rdma *s = state;

    for (size_t i = 0; i < s->n; i++)
        port_close(&s->p[i]);
    s->n = 0;
}

const sm_collector_ops sm__coll_rdma = {
    .name = "rdma",
    .status_tag = "rdma",
    .series = 2, /* megabytes, or packets where a port counts only those */
    .needs_ports = true,
    .state_size = sizeof(struct rdma),
    .open = rdma_open,
    .sample = rdma_sample,
    .tags = rdma_tags,
    .close = rdma_close,
};
