/*
 * reclock.c — one recorder per rank and run (docs/design.md §9).
 *
 * Every monitor that records into a run binds the abstract unix socket
 * @scopemeter/<recording key>/rank<N> before anything is written to the run
 * and holds it until stop/free.  A second monitor of the same rank and run
 * (a Python front inside `scopemeter run`, two nested `scopemeter run`, two
 * processes of one rank) finds the name taken (EADDRINUSE) and records
 * nothing; the kernel frees the name when the last descriptor of the socket
 * closes, so a process that dies (OOM kill included) never leaves a stale
 * lock behind, unlike a lock file.
 *
 * Kernel facts (unix(7), net/unix/af_unix.c):
 *  - abstract names (sun_path[0] == '\0') live in the network namespace:
 *    the containers of one pod share it, so the ranks of one pod see each
 *    other's names; different pods do not (and hold different ranks);
 *  - a listening stream socket accepts connect() without accept(): the
 *    connection waits in the backlog, and the client's SO_PEERCRED is the
 *    listener's credentials from listen() (unix_listen -> init_peercred),
 *    the pid translated into the caller's pid namespace (0 when the binder
 *    is not visible there);
 *  - connections never accepted stay in the backlog until the listener
 *    closes: the backlog is SOMAXCONN (the kernel caps it at
 *    net.core.somaxconn), and each asker connects once per discovery.
 *
 * The socket is SOCK_CLOEXEC: CMD exec'd by `scopemeter run` does not
 * inherit it.  A child forked without exec (a data-loader worker) does:
 * the name then stays taken until that child exits or execs too, even after
 * the recorder stopped, and a new recorder for that rank and run is refused
 * meanwhile (it names the original binder's pid: SO_PEERCRED is from
 * listen()).  No thread, nothing accepted: the descriptor is the lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"

/* Keys longer than this are replaced by "#" and 16 hex digits of their
 * 64-bit FNV-1a hash, so the name fits the 107 bytes of an abstract name
 * (sizeof sun_path - 1): "scopemeter/" + 64 + "/rank" + 10 digits = 90. */
#define KEY_MAX 64

static uint64_t fnv1a64(const char *s)
{
    uint64_t h = 14695981039346656037ull;

    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

int sm__reclock_name(const char *key, int rank, char *out, size_t outlen)
{
    int n;

    if (!key || !*key || rank < 0)
        return -EINVAL;
    if (strlen(key) > KEY_MAX)
        n = snprintf(out, outlen, "scopemeter/#%016llx/rank%d",
                     (unsigned long long)fnv1a64(key), rank);
    else
        n = snprintf(out, outlen, "scopemeter/%s/rank%d", key, rank);
    return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

static int address(const char *key, int rank, struct sockaddr_un *sa, socklen_t *len)
{
    char name[sizeof sa->sun_path - 1];
    int rc = sm__reclock_name(key, rank, name, sizeof name);

    if (rc < 0)
        return rc;
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path + 1, name, strlen(name)); /* sun_path[0] = 0: abstract */
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
    return 0;
}

int sm__reclock_bind(const char *key, int rank, int *fd_out)
{
    struct sockaddr_un sa;
    socklen_t len;
    int fd, rc = address(key, rank, &sa, &len);

    *fd_out = -1;
    if (rc < 0)
        return rc;
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (bind(fd, (struct sockaddr *)&sa, len) < 0 || listen(fd, SOMAXCONN) < 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    *fd_out = fd;
    return 0;
}

int sm__reclock_peer(const char *key, int rank, pid_t *pid)
{
    struct sockaddr_un sa;
    struct ucred cred;
    socklen_t len, clen = sizeof cred;
    int fd, rc = address(key, rank, &sa, &len);

    *pid = 0;
    if (rc < 0)
        return rc;
    /* nonblocking: a full backlog is EAGAIN at once, never a wait */
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, len) < 0)
        rc = -errno; /* ECONNREFUSED: nobody holds the name */
    else if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0)
        rc = -errno;
    else
        *pid = cred.pid;
    close(fd);
    return rc;
}

void sm__reclock_holder(const char *key, int rank, char *out, size_t outlen)
{
    char path[64], comm[64] = "";
    pid_t pid;
    int rc = sm__reclock_peer(key, rank, &pid);

    if (rc < 0) {
        snprintf(out, outlen, "its pid unknown (%s)", strerror(-rc));
        return;
    }
    if (pid <= 0) {
        snprintf(out, outlen, "a process outside this pid namespace");
        return;
    }
    /* the real /proc, not the sysroot's: the pid is this machine's */
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    int fd = sm__open_abs(path);
    if (fd >= 0) {
        ssize_t n = sm__pread_all(fd, comm, sizeof comm);
        close(fd);
        while (n > 0 && comm[n - 1] == '\n')
            comm[--n] = '\0';
        if (n < 0)
            comm[0] = '\0';
    }
    if (comm[0])
        snprintf(out, outlen, "pid %d (%s)", (int)pid, comm);
    else
        snprintf(out, outlen, "pid %d (exited; a forked child still holds its socket)",
                 (int)pid);
}
