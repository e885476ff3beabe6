/* test_io.c — the container's block I/O: the io.stat and blkio parsers (good,
 * malformed, truncated, overflowing input), which cgroup level is read
 * (fixtures and trees built here), and the disk_io collector: cumulative
 * sums, re-base on a counter going backwards, the legacy blkio fallback, a
 * file that fails and comes back. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "check_tree.h"
#include "parse.h"

#define S(x) x, sizeof(x) - 1
#define GiB (1ull << 30)

static void test_parsers(void)
{
    uint64_t r = 7, w = 7;

    /* v2 io.stat: summed over devices; other keys (iocost's decimals) skipped */
    CHECK_EQ_INT(sm__parse_io_stat(S("259:0 rbytes=1000000 wbytes=2000000 rios=10 wios=20 "
                                    "dbytes=0 dios=0\n8:0 rbytes=300 wbytes=400 rios=1 wios=1 "
                                    "dbytes=0 dios=0 cost.vrate=100.00 cost.usage=12\n"),
                                  &r, &w),
                 0);
    CHECK_EQ_INT(r, 1000300);
    CHECK_EQ_INT(w, 2000400);
    /* no I/O yet: an empty file */
    CHECK_EQ_INT(sm__parse_io_stat(S(""), &r, &w), 0);
    CHECK_EQ_INT(r, 0);
    CHECK_EQ_INT(w, 0);
    CHECK_EQ_INT(sm__parse_io_stat(S("8:0 rbytes=1 wbytes=2"), &r, &w), 0); /* no newline */
    CHECK_EQ_INT(r + w, 3);
    CHECK_EQ_INT(sm__parse_io_stat(S("8:0 wbytes=2 rbytes=1 depth=max\n\n"), &r, &w), 0);
    CHECK_EQ_INT(r, 1);
    /* malformed: device, missing keys, bad numbers, a key twice, a bare word */
    CHECK_EQ_INT(sm__parse_io_stat(S("sda rbytes=1 wbytes=2\n"), &r, &w), -EINVAL);
    CHECK_EQ_INT(sm__parse_io_stat(S("8: rbytes=1 wbytes=2\n"), &r, &w), -EINVAL);
    CHECK_EQ_INT(sm__parse_io_stat(S("8:0 rbytes=1\n"), &r, &w), -EINVAL);
    CHECK_EQ_INT(sm__parse_io_stat(S("8:0\n"), &r, &w), -EINVAL);
    CHECK_EQ_INT(sm__parse_io_stat(S("8:0 rbytes=1x wbytes=2\n"), &r, &w), -EINVAL);
    CHECK_EQ_INT(sm__parse_io_stat(S("8:0 rbytes= wbytes=2\n"), &r, &w), -EINVAL);
    CHECK_EQ_INT(sm__parse_io_stat(S("8:0 rbytes=-1 wbytes=2\n"), &r, &w), -EINVAL);
    CHECK_EQ_INT(sm__parse_io_stat(S("8:0 rbytes=1 rbytes=1 wbytes=2\n"), &r, &w), -EINVAL);
    CHECK_EQ_INT(sm__parse_io_stat(S("8:0 rbytes=1 wbytes=2 junk\n"), &r, &w), -EINVAL);
    /* overflow of a number and of the sum */
    CHECK_EQ_INT(sm__parse_io_stat(S("8:0 rbytes=18446744073709551616 wbytes=0\n"), &r, &w),
                 -ERANGE);
    CHECK_EQ_INT(sm__parse_io_stat(S("8:0 rbytes=18446744073709551615 wbytes=0\n"
                                    "8:1 rbytes=1 wbytes=0\n"),
                                  &r, &w),
                 -ERANGE);
    /* the parser stops at len: a truncated "wbytes=2" is not read past */
    CHECK_EQ_INT(sm__parse_io_stat("8:0 rbytes=1 wbytes=2", 16, &r, &w), -EINVAL);
    CHECK_EQ_INT(sm__parse_io_stat("8:0 rbytes=1 wbytes=25", 21, &r, &w), 0);
    CHECK_EQ_INT(w, 2);

    /* v1: Read + Write per device; Sync/Async/Discard/Total not added again */
    CHECK_EQ_INT(sm__parse_blkio_bytes(S("8:0 Read 40960000\n8:0 Write 81920000\n8:0 Sync 1\n"
                                        "8:0 Async 2\n8:0 Discard 3\n8:0 Total 4\n"
                                        "8:16 Read 4096\n8:16 Write 0\nTotal 122884096\n"),
                                      &r, &w),
                 0);
    CHECK_EQ_INT(r, 40964096);
    CHECK_EQ_INT(w, 81920000);
    CHECK_EQ_INT(sm__parse_blkio_bytes(S("Total 0\n"), &r, &w), 0); /* no device yet */
    CHECK_EQ_INT(r + w, 0);
    CHECK_EQ_INT(sm__parse_blkio_bytes(S(""), &r, &w), 0);
    CHECK_EQ_INT(sm__parse_blkio_bytes(S("8:0 Read 5\n8:0 Write 6"), &r, &w), 0);
    CHECK_EQ_INT(r * 10 + w, 56);
    CHECK_EQ_INT(sm__parse_blkio_bytes(S("8:0 Read\n"), &r, &w), -EINVAL);
    CHECK_EQ_INT(sm__parse_blkio_bytes(S("8:0 Read 5 6\n"), &r, &w), -EINVAL);
    CHECK_EQ_INT(sm__parse_blkio_bytes(S("sda Read 5\n"), &r, &w), -EINVAL);
    CHECK_EQ_INT(sm__parse_blkio_bytes(S("8:0 Read x\n"), &r, &w), -EINVAL);
    CHECK_EQ_INT(sm__parse_blkio_bytes(S("Sum 5\n"), &r, &w), -EINVAL);
    CHECK_EQ_INT(sm__parse_blkio_bytes(S("Total five\n"), &r, &w), -EINVAL);
    CHECK_EQ_INT(sm__parse_blkio_bytes(S("8:0 Write 18446744073709551615\n"
                                        "8:1 Write 1\n"),
                                      &r, &w),
                 -ERANGE);
    CHECK_EQ_INT(sm__parse_blkio_bytes("8:0 Read 5\n8:0 Wri", 17, &r, &w), -EINVAL);
}

/* ---- the collector ---------------------------------------------------------- */
static void *open_io(const sm_ctx *ctx, struct run *r)
{
    return coll_open(&sm__coll_io, ctx, r);
}

static int sample(void *state, struct run *r)
{
    return coll_sample(&sm__coll_io, state, r);
}

static void close_io(void *state)
{
    coll_close(&sm__coll_io, state);
}

#define RD "container_disk_read_megabytes"
#define WR "container_disk_write_megabytes"

static void test_fixtures(void)
{
    sm_ctx ctx;
    sm_cgroup cg;
    struct run r;
    void *s;

    /* v1 docker: blkio beside memory, same path: the limiting level */
    ctx_fixture(&ctx, "cg-docker-v1-hostns");
    CHECK_EQ_INT(sm__cgroup_resolve(&ctx, &cg), 0);
    CHECK_EQ_INT(cg.io_version, 1);
    CHECK_EQ_STR(cg.io_path, "/docker/3f1e5a9b2c7d");
    CHECK(contains(cg.io_dir, "/sys/fs/cgroup/blkio"));
    CHECK_EQ_STR(cg.io_why, "blkio cgroup /docker/3f1e5a9b2c7d, the memory-limiting level");
    s = open_io(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_STR(r.res.msg, "");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_INT(r.pts.n, 2);
    CHECK_NEAR(value(&r, RD), 0.0, 0);
    CHECK_NEAR(value(&r, WR), 0.0, 0);
    CHECK_EQ_INT(r.pts.v[0].agg, SM_AGG_LAST);
    CHECK_EQ_STR(r.pts.v[0].source,
                 "/sys/fs/cgroup/blkio/blkio.throttle.io_service_bytes_recursive:Read");
    close_io(s);

    /* hybrid: v1 blkio, the limit two levels up; only CFQ's file there */
    ctx_fixture(&ctx, "cg-hybrid");
    CHECK_EQ_INT(sm__cgroup_resolve(&ctx, &cg), 0);
    CHECK_EQ_STR(cg.io_path, "/user.slice/user-1000.slice");
    s = open_io(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_STR(r.pts.v[1].source, "/sys/fs/cgroup/blkio/user.slice/user-1000.slice/"
                                    "blkio.io_service_bytes_recursive:Write");
    close_io(s);

    /* v2 Slurm: io.stat at job_12, where the memory limit is */
    ctx_fixture(&ctx, "cg-slurm-v2");
    CHECK_EQ_INT(sm__cgroup_resolve(&ctx, &cg), 0);
    CHECK_EQ_INT(cg.io_version, 2);
    CHECK_EQ_STR(cg.io_why,
                 "io cgroup /system.slice/slurmstepd.scope/job_12, the memory-limiting level");
    /* CPU limit only: the CPU-limiting level; an empty io.stat is no I/O yet */
    ctx_fixture(&ctx, "cg-cpu-only");
    CHECK_EQ_INT(sm__cgroup_resolve(&ctx, &cg), 0);
    CHECK_EQ_STR(cg.io_why, "io cgroup /, the cpu-limiting level");
    s = open_io(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_EQ_INT(r.pts.n, 2);
    close_io(s);

    /* no limit: absent without a line of its own (the container's says it) */
    ctx_fixture(&ctx, "cg-bare-host");
    s = open_io(&ctx, &r);
    CHECK_EQ_INT(r.rc, SM_ABSENT);
    CHECK_EQ_STR(r.res.msg, "");
    /* the cgroup not found: likewise, the container collector's line */
    ctx_fixture(&ctx, "cg-outside-root");
    s = open_io(&ctx, &r);
    CHECK(r.rc < 0);
    CHECK_EQ_STR(r.res.msg, "");
}

/* a v1 machine: memory limit at /job, blkio mounted beside it */
static void v1_tree(void)
{
    tree_new("sm-test-io");
    put("proc/self/cgroup", "9:blkio:/job/task\n7:memory:/job/task\n0::/\n");
    put("proc/self/mountinfo",
        "1 0 0:1 / / rw - overlay overlay rw\n"
        "2 1 0:30 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
        "3 1 0:31 / /sys/fs/cgroup/blkio rw - cgroup cgroup rw,blkio\n");
    put("sys/fs/cgroup/memory/job/memory.limit_in_bytes", "%llu\n", 2 * GiB);
    put("sys/fs/cgroup/memory/job/task/memory.usage_in_bytes", "1000\n");
    put("sys/fs/cgroup/blkio/job/blkio.throttle.io_service_bytes_recursive",
        "8:0 Read 1000000\n8:0 Write 2000000\nTotal 3000000\n");
}

static void test_tree(void)
{
    const char *f = "sys/fs/cgroup/blkio/job/blkio.throttle.io_service_bytes_recursive";
    sm_ctx ctx;
    sm_cgroup cg;
    struct run r;
    void *s;

    v1_tree();
    ctx_for(&ctx, tmp);
    s = open_io(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    /* cumulative since open: 3 MB read, 5 MB written */
    put(f, "8:0 Read 4000000\n8:0 Write 7000000\nTotal 11000000\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_NEAR(value(&r, RD), 3.0, 1e-12);
    CHECK_NEAR(value(&r, WR), 5.0, 1e-12);
    /* a counter going backwards (the cgroup re-created) re-bases: nothing
     * subtracted, then counting resumes from the new value */
    put(f, "8:0 Read 1000000\n8:0 Write 1000000\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_NEAR(value(&r, RD), 3.0, 1e-12);
    CHECK_NEAR(value(&r, WR), 5.0, 1e-12);
    put(f, "8:0 Read 1500000\n8:0 Write 1000000\n8:16 Read 0\n8:16 Write 250000\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_NEAR(value(&r, RD), 3.5, 1e-12);
    CHECK_NEAR(value(&r, WR), 5.25, 1e-12);
    /* malformed: the sample fails naming the file, then recovers */
    put(f, "8:0 Read lots\n");
    CHECK(sample(s, &r) < 0);
    CHECK_EQ_INT(r.pts.n, 0);
    CHECK(contains(r.msg, "cannot parse /sys/fs/cgroup/blkio/job/"
                          "blkio.throttle.io_service_bytes_recursive: Invalid argument"));
    /* removed: a read failure, and it resumes when the file is back */
    rm(f);
    CHECK(sample(s, &r) < 0);
    CHECK(contains(r.msg, "cannot read /sys/fs/cgroup/blkio/job/"
                          "blkio.throttle.io_service_bytes_recursive"));
    put(f, "8:0 Read 1500000\n8:0 Write 2000000\n");
    CHECK_EQ_INT(sample(s, &r), 0);
    CHECK_NEAR(value(&r, WR), 6.0, 1e-12); /* 5.25 + (2.0 - 1.25) */
    close_io(s);

    /* no throttle file: CFQ's; neither: one line, dropped */
    rm(f);
    put("sys/fs/cgroup/blkio/job/blkio.io_service_bytes_recursive", "8:0 Read 1\n8:0 Write 2\n");
    s = open_io(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    close_io(s);
    rm("sys/fs/cgroup/blkio/job/blkio.io_service_bytes_recursive");
    s = open_io(&ctx, &r);
    CHECK_EQ_INT(r.rc, -ENOENT);
    CHECK_EQ_STR(r.res.msg, "cannot open /sys/fs/cgroup/blkio/job/"
                            "blkio.io_service_bytes_recursive: No such file or directory; "
                            "container_disk_* dropped");
    put(f, "8:0 Read 1\n8:0 Write two\n");
    s = open_io(&ctx, &r);
    CHECK_EQ_INT(r.rc, -EINVAL);
    CHECK(contains(r.res.msg, "cannot parse /sys/fs/cgroup/blkio/job/"
                              "blkio.throttle.io_service_bytes_recursive: Invalid argument; "
                              "container_disk_* dropped"));
    put(f, "8:0 Read 1\n8:0 Write 2\n");

    /* blkio shows the process elsewhere than memory does: its own blkio
     * cgroup is read, and open says so */
    put("proc/self/cgroup", "9:blkio:/other\n7:memory:/job/task\n0::/\n");
    put("sys/fs/cgroup/blkio/other/blkio.throttle.io_service_bytes_recursive", "Total 0\n");
    CHECK_EQ_INT(sm__cgroup_resolve(&ctx, &cg), 0);
    CHECK_EQ_STR(cg.io_path, "/other");
    s = open_io(&ctx, &r);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_STR(r.res.msg, "container_disk_* read at the blkio cgroup /other, the process's "
                            "own (the memory limit is at /job in the memory hierarchy, where "
                            "the process is at /job/task)");
    close_io(s);

    /* no blkio controller at all: absent, informational */
    put("proc/self/cgroup", "7:memory:/job/task\n");
    put("proc/self/mountinfo", "1 0 0:1 / / rw - overlay overlay rw\n"
                               "2 1 0:30 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n");
    s = open_io(&ctx, &r);
    CHECK_EQ_INT(r.rc, SM_ABSENT);
    CHECK_EQ_STR(r.res.msg, "no block I/O cgroup (no cgroup mount for blkio in "
                            "/proc/self/mountinfo): container_disk_* absent");
    rm_tree();
}

int main(void)
{
    const char *f = getenv("SM_FIXTURES");

    snprintf(fixtures, sizeof fixtures, "%s", f ? f : "tests/fixtures");
    test_parsers();
    test_fixtures();
    test_tree();
    return CHECK_DONE();
}
