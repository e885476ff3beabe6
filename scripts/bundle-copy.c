/*
 * scripts/bundle-copy.c — the one program of the bundle image
 * (scripts/build-bundle): `/bundle-copy SRC DST` copies the tree at SRC into
 * DST, for the init container of docs/kubernetes.md (b), which copies
 * /opt/scopemeter into an emptyDir on clusters without image volumes — the
 * OpenTelemetry operator's pattern, whose images carry busybox's `cp` for it.
 *
 * Why a program of its own: the image is FROM scratch (no shell, no libc:
 * the bundle's CLI links glibc dynamically and cannot run in it), so the copy
 * needs a static executable of each arch; built with zig's cc against musl,
 * statically (scripts/build-bundle), from this one file.
 *
 * Copies directories, regular files (their permission bits) and symbolic
 * links; anything else is an error.  Never follows a link, never writes
 * outside DST, and exits non-zero with one line on the first failure, so a
 * pod never starts with half a bundle.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail(const char *what, const char *path)
{
    fprintf(stderr, "bundle-copy: %s %s: %s\n", what, path, strerror(errno));
    return -1;
}

static int copy_file(const char *src, const char *dst, mode_t mode)
{
    char buf[1 << 16];
    int in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), out = -1, rc = -1;
    ssize_t n;

    if (in < 0)
        return fail("cannot open", src);
    out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode & 07777);
    if (out < 0) {
        fail("cannot create", dst);
        goto done;
    }
    while ((n = read(in, buf, sizeof buf)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fail("cannot read", src);
            goto done;
        }
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                fail("cannot write", dst);
                goto done;
            }
            off += w;
        }
    }
    /* the mode as in the image, whatever the umask took off at creation */
    if (fchmod(out, mode & 07777) < 0) {
        fail("cannot chmod", dst);
        goto done;
    }
    rc = 0;
done:
    if (out >= 0 && close(out) < 0 && rc == 0)
        rc = fail("cannot close", dst);
    close(in);
    return rc;
}

static int copy_tree(const char *src, const char *dst)
{
    struct stat st;
    char s[PATH_MAX], d[PATH_MAX], target[PATH_MAX];
    struct dirent *e;
    DIR *dir;
    ssize_t n;
    int rc = 0;

    if (lstat(src, &st) < 0)
        return fail("cannot stat", src);
    if (S_ISREG(st.st_mode))
        return copy_file(src, dst, st.st_mode);
    if (S_ISLNK(st.st_mode)) {
        n = readlink(src, target, sizeof target - 1);
        if (n < 0)
            return fail("cannot read link", src);
        target[n] = '\0';
        return symlink(target, dst) < 0 ? fail("cannot link", dst) : 0;
    }
    if (!S_ISDIR(st.st_mode)) {
        errno = EINVAL;
        return fail("not a file, link or directory:", src);
    }
    if (mkdir(dst, 0700) < 0 && errno != EEXIST)
        return fail("cannot make", dst);
    dir = opendir(src);
    if (!dir)
        return fail("cannot open", src);
    while (rc == 0 && (errno = 0, e = readdir(dir))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (snprintf(s, sizeof s, "%s/%s", src, e->d_name) >= (int)sizeof s ||
            snprintf(d, sizeof d, "%s/%s", dst, e->d_name) >= (int)sizeof d) {
            errno = ENAMETOOLONG;
            rc = fail("path too long under", src);
        } else {
            rc = copy_tree(s, d);
        }
    }
    if (rc == 0 && errno)
        rc = fail("cannot list", src);
    closedir(dir);
    /* the directory's own mode last: a read-only one still took its entries */
    if (rc == 0 && chmod(dst, st.st_mode & 07777) < 0)
        rc = fail("cannot chmod", dst);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: bundle-copy SRC DST (copies the tree at SRC into DST)\n");
        return 2;
    }
    if (copy_tree(argv[1], argv[2]) < 0)
        return 1;
    printf("bundle-copy: %s copied to %s\n", argv[1], argv[2]);
    return 0;
}
