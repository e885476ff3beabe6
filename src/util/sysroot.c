/*
 * sysroot.c — every absolute path scopemeter reads goes through one prefix,
 * SCOPEMETER_SYSROOT (like node_exporter's --path.procfs or gopsutil's
 * HOST_PROC), so a test can lay out a whole fake machine in a directory.
 *
 * Reads use pread(fd, buf, n, 0) on kept descriptors: procfs seq_files and
 * kernfs (cgroup) files regenerate their content on a read at offset 0, so
 * one open per collector lifetime is enough (cf. Go's internal/runtime/cgroup).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

int sm__path(const sm_ctx *ctx, const char *abs, char *out, size_t outlen)
{
    int n = snprintf(out, outlen, "%s%s", ctx ? ctx->sysroot : "", abs);
    if (n < 0 || (size_t)n >= outlen)
        return -ENAMETOOLONG;
    return 0;
}

int sm__open_abs(const char *path)
{
    int fd;

    do
        fd = open(path, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    return fd < 0 ? -errno : fd;
}

int sm__open(const sm_ctx *ctx, const char *abs)
{
    char path[SM_PATH_MAX];
    int rc = sm__path(ctx, abs, path, sizeof path);

    return rc < 0 ? rc : sm__open_abs(path);
}

ssize_t sm__pread_all(int fd, char *buf, size_t cap)
{
    size_t len = 0;

    if (cap == 0)
        return -EINVAL;
    for (;;) {
        ssize_t r = pread(fd, buf + len, cap - 1 - len, (off_t)len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            break;
        len += (size_t)r;
        if (len == cap - 1) {
            /* Full: the file is larger than the buffer unless EOF is next. */
            char probe;
            ssize_t more = pread(fd, &probe, 1, (off_t)len);
            buf[len] = '\0';
            return more > 0 ? -EFBIG : (ssize_t)len;
        }
    }
    buf[len] = '\0';
    return (ssize_t)len;
}

ssize_t sm__read_file(const sm_ctx *ctx, const char *abs, char *buf, size_t cap)
{
    ssize_t n;
    int fd = sm__open(ctx, abs);

    if (fd < 0)
        return fd;
    n = sm__pread_all(fd, buf, cap);
    close(fd);
    return n;
}

ssize_t sm__read_file_alloc(const char *path, char **out)
{
    size_t cap = 8192, len = 0;
    char *buf = NULL;
    ssize_t rc;
    int fd = sm__open_abs(path);

    *out = NULL;
    if (fd < 0)
        return fd;
    for (;;) {
        if (len + 1 >= cap || !buf) {
            char *nb;
            if (buf)
                cap *= 2;
            if (cap > (64u << 20)) { /* no kernel file we read is this large */
                rc = -EFBIG;
                goto out;
            }
            nb = realloc(buf, cap);
            if (!nb) {
                rc = -ENOMEM;
                goto out;
            }
            buf = nb;
        }
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            goto out;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    buf[len] = '\0';
    *out = buf;
    buf = NULL;
    rc = (ssize_t)len;
out:
    free(buf);
    close(fd);
    return rc;
}
