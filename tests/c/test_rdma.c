/* test_rdma.c — the RDMA parsers (src/parse/parse_rdma.c) on the kernel's formats
 * and malformed text, and the RDMA collector (src/collect/coll_rdma.c) on copies of
 * the fixture machines (tests/fixtures/rdma-*, written by
 * tests/fixtures/make-rdma-fixtures) whose counter files the test moves
 * between samples: bytes in 4-octet units, only the given devices, packets
 * without a byte count, a 32-bit counter that stopped, a counter reset, one
 * port's bad file leaving the other's bytes, and the rdma_events tag. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_tree.h"
#include "parse.h"

static void test_parsers(void)
{
    uint64_t v = 7;
    unsigned n = 0;
    char name[64];

    CHECK_EQ_INT(sm__parse_rdma_counter("123\n", 4, &v), 0);
    CHECK(v == 123);
    CHECK_EQ_INT(sm__parse_rdma_counter("18446744073709551615\n", 21, &v), 0);
    CHECK(v == UINT64_MAX);
    CHECK_EQ_INT(sm__parse_rdma_counter("18446744073709551616\n", 21, &v), -ERANGE);
    CHECK_EQ_INT(sm__parse_rdma_counter("42", 2, &v), 0); /* cut before its newline */
    CHECK(v == 42);
    CHECK_EQ_INT(sm__parse_rdma_counter("", 0, &v), -EINVAL);
    CHECK_EQ_INT(sm__parse_rdma_counter("\n", 1, &v), -EINVAL);
    CHECK_EQ_INT(sm__parse_rdma_counter("-1\n", 3, &v), -EINVAL);
    CHECK_EQ_INT(sm__parse_rdma_counter("12 \n", 4, &v), -EINVAL);
    CHECK_EQ_INT(sm__parse_rdma_counter("1\n2\n", 4, &v), -EINVAL);
    CHECK_EQ_INT(sm__parse_rdma_counter("0x10\n", 5, &v), -EINVAL);
    CHECK_EQ_INT(sm__parse_rdma_counter("5\n\n", 3, &v), -EINVAL);
    CHECK_EQ_INT(sm__parse_rdma_counter("007\n", 4, &v), -EINVAL);
    CHECK_EQ_INT(sm__parse_rdma_counter("0\n", 2, &v), 0);
    CHECK(v == 0);
    v = 42;
    CHECK(v == 42); /* untouched by a refusal */

    CHECK_EQ_INT(sm__parse_rdma_state("4: ACTIVE\n", 10, &n, name, sizeof name), 0);
    CHECK(n == 4);
    CHECK_EQ_STR(name, "ACTIVE");
    CHECK_EQ_INT(sm__parse_rdma_state("7: Phy Test\n", 12, &n, name, sizeof name), 0);
    CHECK(n == 7);
    CHECK_EQ_STR(name, "Phy Test");
    CHECK_EQ_INT(sm__parse_rdma_state("5: LinkUp\n", 10, &n, name, 4), 0);
    CHECK_EQ_STR(name, "Lin"); /* cut to the room */
    CHECK_EQ_INT(sm__parse_rdma_state("4:ACTIVE\n", 9, &n, name, sizeof name), -EINVAL);
    CHECK_EQ_INT(sm__parse_rdma_state("4: \n", 4, &n, name, sizeof name), -EINVAL);
    CHECK_EQ_INT(sm__parse_rdma_state("300: X\n", 7, &n, name, sizeof name), -ERANGE);
    CHECK_EQ_INT(sm__parse_rdma_state("ACTIVE\n", 7, &n, name, sizeof name), -EINVAL);
    CHECK_EQ_INT(sm__parse_rdma_state("4: AC\x01TIVE\n", 11, &n, name, sizeof name), -EINVAL);

    CHECK_EQ_INT(sm__parse_rdma_ibdev("mlx5_0\n", 7, name, sizeof name), 0);
    CHECK_EQ_STR(name, "mlx5_0");
    CHECK_EQ_INT(sm__parse_rdma_ibdev("\n", 1, name, sizeof name), -EINVAL);
    CHECK_EQ_INT(sm__parse_rdma_ibdev("a/b\n", 4, name, sizeof name), -EINVAL);
    CHECK_EQ_INT(sm__parse_rdma_ibdev("..\n", 3, name, sizeof name), -EINVAL);
    CHECK_EQ_INT(sm__parse_rdma_ibdev("mlx5 0\n", 7, name, sizeof name), -EINVAL);
    CHECK_EQ_INT(sm__parse_rdma_ibdev("mlx5_0\n", 7, name, 6), -ENAMETOOLONG);
    {
        char longname[80];
        memset(longname, 'a', 64);
        longname[64] = '\n';
        CHECK_EQ_INT(sm__parse_rdma_ibdev(longname, 65, name, sizeof name), -ENAMETOOLONG);
    }
}

/* A fresh copy of fixture name under tmp/name: the test writes into it. */
static void copy_fx(const char *name, char *root, size_t cap)
{
    char cmd[6000];

    snprintf(root, cap, "%s/%s", tmp, name);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s/%s' '%s'", root, fixtures, name, root);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot copy %s\n", name);
        exit(2);
    }
}

/* Rewrites the infiniband file rel (sys/class/infiniband/rel) of the copy at root. */
static void put_ib(const char *root, const char *rel, const char *text)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof path, "%s/sys/class/infiniband/%s", root, rel);
    f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
    fputs(text, f);
    fclose(f);
}

static void *open_at(const char *root, struct run *r)
{
    sm_ctx ctx;

    memset(&ctx, 0, sizeof ctx);
    snprintf(ctx.sysroot, sizeof ctx.sysroot, "%s", root);
    return coll_open(&sm__coll_rdma, &ctx, r);
}

static int sample(void *state, struct run *r)
{
    return coll_sample(&sm__coll_rdma, state, r);
}

/* the rdma_events tag of one tags() call, or "" when none was given */
static const char *events(void *state, int phase, struct run *r)
{
    r->tags.n = 0;
    sm__coll_rdma.tags(state, phase, &r->tags);
    for (size_t i = 0; i < r->tags.n; i++)
        if (strcmp(r->tags.v[i].key, "rdma_events") == 0)
            return r->tags.v[i].value;
    return "";
}

static void close_coll(void *state)
{
    coll_close(&sm__coll_rdma, state);
}

static void test_infiniband(void)
{
    char root[3000];
    struct run r;
    void *s;

    copy_fx("rdma-k8s-mlx5-ib", root, sizeof root);
    s = open_at(root, &r);
    CHECK_EQ_INT(r.rc, 0);
    /* mlx5_1 is the node's, not given: not a port of this container */
    CHECK_EQ_STR(r.res.status, "mlx5_0/1 InfiniBand ACTIVE 200 Gb/sec (4X HDR)");
    CHECK_EQ_STR(r.res.msg, "rdma_* from 1 port (/dev/infiniband: mlx5_0/1 InfiniBand ACTIVE "
                            "200 Gb/sec (4X HDR))");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_INT(r.pts.n, (size_t)sm__coll_rdma.series);
    CHECK(value(&r, "rdma_receive_megabytes") == 0.0);
    CHECK(value(&r, "rdma_transmit_megabytes") == 0.0);
    CHECK_EQ_STR(events(s, SM_TAGS_START, &r), ""); /* link_downed 1 before the start */

    /* 250000 units of 4 octets: 1 MB; the node's other HCA moves nothing here */
    put_ib(root, "mlx5_0/ports/1/counters/port_rcv_data", "123457039012\n");
    put_ib(root, "mlx5_0/ports/1/counters/port_xmit_data", "98767932100\n");
    put_ib(root, "mlx5_1/ports/1/counters/port_rcv_data", "999999999999\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK(value(&r, "rdma_receive_megabytes") == 1.0);
    CHECK(value(&r, "rdma_transmit_megabytes") == 10.0);
    CHECK(r.pts.v[0].agg == SM_AGG_LAST && strcmp(r.pts.v[0].unit, "MB") == 0);
    CHECK_EQ_STR(r.pts.v[0].source,
                 "/sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_data x4 octets");

    /* a reset (perfquery -R) re-bases: the series never goes back */
    put_ib(root, "mlx5_0/ports/1/counters/port_rcv_data", "0\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK(value(&r, "rdma_receive_megabytes") == 1.0);
    put_ib(root, "mlx5_0/ports/1/counters/port_rcv_data", "500000\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK(value(&r, "rdma_receive_megabytes") == 3.0);

    /* link health since the start, at a window */
    put_ib(root, "mlx5_0/ports/1/counters/link_downed", "3\n");
    put_ib(root, "mlx5_0/ports/1/counters/symbol_error", "10\n");
    put_ib(root, "mlx5_1/ports/1/counters/link_downed", "20\n");
    CHECK_EQ_STR(events(s, SM_TAGS_WINDOW, &r), "mlx5_0/1 link_downed=2 symbol_error=7");
    CHECK_EQ_STR(events(s, SM_TAGS_WINDOW, &r), ""); /* nothing new */
    /* the port goes down; the 16-bit symbol_error stops at all ones: "at least" */
    put_ib(root, "mlx5_0/ports/1/state", "1: DOWN\n");
    put_ib(root, "mlx5_0/ports/1/counters/symbol_error", "65535\n");
    CHECK_EQ_STR(events(s, SM_TAGS_WINDOW, &r),
                 "mlx5_0/1 link_downed=2 symbol_error=65532+ state=DOWN");
    CHECK_EQ_STR(events(s, SM_TAGS_END, &r),
                 "mlx5_0/1 link_downed=2 symbol_error=65532+ state=DOWN");
    close_coll(s);
}

static void test_roce(void)
{
    char root[3000];
    struct run r;
    void *s;

    copy_fx("rdma-k8s-mlx5-roce", root, sizeof root);
    s = open_at(root, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_STR(r.res.status, "mlx5_2/1 Ethernet ACTIVE 100 Gb/sec (4X EDR)");
    CHECK_EQ_INT(sample(s, &r), 0);
    put_ib(root, "mlx5_2/ports/1/counters/port_rcv_data", "5000000001\n"); /* 4 octets */
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK(value(&r, "rdma_receive_megabytes") == 4e-6);
    /* RoCE retransmissions and timeouts from mlx5's hw_counters; the
     * congestion counters are not link health */
    put_ib(root, "mlx5_2/ports/1/hw_counters/local_ack_timeout_err", "20\n");
    put_ib(root, "mlx5_2/ports/1/hw_counters/roce_adp_retrans", "45\n");
    put_ib(root, "mlx5_2/ports/1/hw_counters/np_cnp_sent", "5000\n");
    CHECK_EQ_STR(events(s, SM_TAGS_WINDOW, &r),
                 "mlx5_2/1 local_ack_timeout_err=8 roce_adp_retrans=5");
    /* a driver reset of a hw counter counts again from 0 */
    put_ib(root, "mlx5_2/ports/1/hw_counters/local_ack_timeout_err", "3\n");
    CHECK_EQ_STR(events(s, SM_TAGS_END, &r),
                 "mlx5_2/1 local_ack_timeout_err=11 roce_adp_retrans=5");
    close_coll(s);
}

static void test_host_32bit(void)
{
    char root[3000];
    struct run r;
    void *s;

    /* a bare host (devtmpfs /dev) without ib_uverbs: every device */
    copy_fx("rdma-host-mlx4-32bit", root, sizeof root);
    s = open_at(root, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_STR(r.res.status, "mlx4_0/1 InfiniBand ACTIVE 56 Gb/sec (4X FDR) 32-bit; "
                               "mlx4_0/2 Ethernet DOWN 10 Gb/sec (1X QDR) 32-bit");
    CHECK(strstr(r.res.msg, "(the host's /dev: ") != NULL);
    CHECK_EQ_INT(sample(s, &r), 0);
    /* port 1's transmit counter stopped at all ones: said, never wrapped */
    CHECK_EQ_STR(events(s, SM_TAGS_START, &r),
                 "mlx4_0/1 port_xmit_data=stopped; mlx4_0/2 state=DOWN");
    put_ib(root, "mlx4_0/ports/1/counters/port_rcv_data", "1000001000\n");
    put_ib(root, "mlx4_0/ports/2/counters/port_xmit_data", "250\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK(value(&r, "rdma_receive_megabytes") == 0.004);
    CHECK(value(&r, "rdma_transmit_megabytes") == 0.001);
    /* one port's bad file: only its bytes wait, the other's count */
    put_ib(root, "mlx4_0/ports/2/counters/port_rcv_data", "garbage\n");
    put_ib(root, "mlx4_0/ports/1/counters/port_rcv_data", "1000002000\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK(value(&r, "rdma_receive_megabytes") == 0.008);
    put_ib(root, "mlx4_0/ports/2/counters/port_rcv_data", "500\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK(value(&r, "rdma_receive_megabytes") == 0.01);
    /* the stopped counter reset (perfquery -R): counted again, no longer said */
    put_ib(root, "mlx4_0/ports/1/counters/port_xmit_data", "0\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    put_ib(root, "mlx4_0/ports/1/counters/port_xmit_data", "1000\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK(value(&r, "rdma_transmit_megabytes") == 0.005);
    CHECK_EQ_STR(events(s, SM_TAGS_WINDOW, &r), "mlx4_0/2 state=DOWN");
    close_coll(s);
}

static void test_packets_only(void)
{
    char root[3000];
    struct run r;
    void *s;

    copy_fx("rdma-k8s-rxe-packets", root, sizeof root);
    s = open_at(root, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK(strstr(r.res.msg, "rxe0/1 counts packets only (no PMA counters/: No such file or "
                            "directory): rdma_*_packets from hw_counters, no byte count") != NULL);
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_INT(r.pts.n, 2);
    CHECK(value(&r, "rdma_receive_megabytes") == -1); /* never made up */
    put_ib(root, "rxe0/ports/1/hw_counters/sent_pkts", "20010\n");
    put_ib(root, "rxe0/ports/1/hw_counters/rcvd_pkts", "19003\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK(value(&r, "rdma_transmit_packets") == 10.0);
    CHECK(value(&r, "rdma_receive_packets") == 3.0);
    /* rxe's own link_downed (the netdev went down) and its retries */
    put_ib(root, "rxe0/ports/1/hw_counters/link_downed", "1\n");
    put_ib(root, "rxe0/ports/1/hw_counters/retry_exceeded_err", "2\n");
    CHECK_EQ_STR(events(s, SM_TAGS_WINDOW, &r), "rxe0/1 retry_exceeded_err=2 link_downed=1");
    close_coll(s);
}

static void test_absent(void)
{
    char root[3000];
    struct run r;

    copy_fx("rdma-k8s-none-given", root, sizeof root);
    CHECK(open_at(root, &r) == NULL);
    CHECK_EQ_INT(r.rc, SM_ABSENT);
    CHECK_EQ_STR(r.res.msg, "no RDMA device given to this container (no "
                            "/dev/infiniband/uverbs* of the 1 device in /sys/class/infiniband): "
                            "rdma_* absent");
    CHECK_EQ_STR(r.res.status, "none: no /dev/infiniband/uverbs* here");
    /* no RDMA at all (most machines): nothing to say */
    CHECK(open_at(tmp, &r) == NULL);
    CHECK_EQ_INT(r.rc, SM_ABSENT);
    CHECK_EQ_STR(r.res.msg, "");
    CHECK_EQ_STR(r.res.status, "");
}

int main(void)
{
    const char *fx = getenv("SM_FIXTURES");

    if (!fx) {
        fprintf(stderr, "SM_FIXTURES unset\n");
        return 2;
    }
    snprintf(fixtures, sizeof fixtures, "%s", fx);
    tree_new("test_rdma");
    test_parsers();
    test_infiniband();
    test_roce();
    test_host_32bit();
    test_packets_only();
    test_absent();
    rm_tree();
    return CHECK_DONE();
}
