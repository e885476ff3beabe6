/*
 * fuzz_cgroup_resolve.c — libFuzzer target for the whole cgroup location
 * logic, sm__cgroup_resolve() (cgroup.c): mount-root stripping, "/.."
 * detection, level walking, the fixed-size path buffers, the why line and
 * the tag — not just the line parsers under it.
 *
 * The input is a fake machine's two files, split at the first line that is
 * exactly "--\n":
 *     <contents of /proc/self/cgroup>--\n<contents of /proc/self/mountinfo>
 * (without the separator the whole input is /proc/self/cgroup and mountinfo
 * is empty).  They are written into a private SCOPEMETER_SYSROOT-style
 * directory made once per process (in /dev/shm when there is one: a write
 * per execution to a disk-backed /tmp is the slowest part) and removed at
 * exit; limit files below it do not exist, so the walk sees "no limit here"
 * on every level.
 *
 * Checks: resolve returns 0 or a negative errno; why and tag are
 * NUL-terminated within their buffers; a found cgroup has version 1 or 2.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "internal.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static sm_ctx ctx;
static sm_cgroup cg;
static char dirs[2][SM_PATH_MAX], cg_file[SM_PATH_MAX], mi_file[SM_PATH_MAX];

static void put(const char *path, const unsigned char *d, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

    if (fd < 0)
        abort();
    while (n > 0) {
        ssize_t w = write(fd, d, n);
        if (w <= 0)
            abort();
        d += w;
        n -= (size_t)w;
    }
    close(fd);
}

static void cleanup(void)
{
    unlink(cg_file);
    unlink(mi_file);
    rmdir(dirs[1]);
    rmdir(dirs[0]);
    rmdir(ctx.sysroot);
}

static void setup(void)
{
    char tmpl[64];

    snprintf(tmpl, sizeof tmpl, "%s/sm-fuzz-sysroot.XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(tmpl))
        abort();
    snprintf(ctx.sysroot, sizeof ctx.sysroot, "%s", tmpl);
    snprintf(dirs[0], sizeof dirs[0], "%s/proc", tmpl);
    snprintf(dirs[1], sizeof dirs[1], "%s/proc/self", tmpl);
    if (mkdir(dirs[0], 0755) < 0 || mkdir(dirs[1], 0755) < 0)
        abort();
    snprintf(cg_file, sizeof cg_file, "%s/proc/self/cgroup", tmpl);
    snprintf(mi_file, sizeof mi_file, "%s/proc/self/mountinfo", tmpl);
    ctx.mem_total = 16ull << 30;
    atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const unsigned char *sep = NULL;
    size_t cglen = size;
    int rc;

    if (!ctx.sysroot[0])
        setup();
    /* the separator: a line "--" */
    for (size_t i = 0; i + 3 <= size; i++) {
        if ((i == 0 || data[i - 1] == '\n') && memcmp(data + i, "--\n", 3) == 0) {
            sep = data + i;
            cglen = i;
            break;
        }
    }
    put(cg_file, data, cglen);
    put(mi_file, sep ? sep + 3 : data, sep ? size - cglen - 3 : 0);

    rc = sm__cgroup_resolve(&ctx, &cg);
    if (rc > 0)
        abort();
    if (!memchr(cg.why, '\0', sizeof cg.why) || !memchr(cg.tag, '\0', sizeof cg.tag) ||
        !memchr(cg.path, '\0', sizeof cg.path))
        abort();
    if (rc == 0 && cg.version != 1 && cg.version != 2)
        abort();
    return 0;
}
