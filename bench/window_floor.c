/*
 * window_floor.c — the floor of a whole logging window: what the hardware
 * and the kernel ask for one window of scopemeter's, with nothing in between.
 *
 * One window is one sample and one delivery.  The floor of each:
 *   - the sample: pread of the very descriptors the collectors keep open plus
 *     statvfs("/"), nothing parsed (the floor of table 1, bench/sample_cost.c);
 *     and, with --tree PID, the files the process-tree collector (coll_proc.c)
 *     reads of that tree each sample: /proc/PID/task (getdents64), each
 *     thread's task/TID/children, each process's stat, every file opened and
 *     closed as the collector does, the children lists parsed only as far as
 *     walking needs; smaps_rollup of each process as often as the product's
 *     rule reads it in a steady tree (design.md §9): once before the first
 *     window (the product's baseline read at enable, before its span too),
 *     then every --rollup-every S (the product's MEM_MAX_AGE, 300 s);
 *   - the delivery: the log-batch request scopemeter sent, byte for byte (the
 *     harness captures it: bench/benchlib.py CaptureProxy), written with
 *     send() on a kept-alive TCP socket to the same server, and the reply
 *     read with recv() until its Content-Length is complete.
 * One wake-up per window (clock_nanosleep to an absolute time), one thread.
 *
 * Where the server closed the connection while the process slept (uvicorn
 * closes idle keep-alive connections after 5 s: every window at 10 s), the
 * floor connects again before sending, as any client must: the count is in
 * the result.
 *
 *   window_floor --request FILE --port P [--host 127.0.0.1] --interval S
 *                --warmup W --span T [--tree PID [--rollup-every S]]
 *
 * Runs W s of windows, then T s measured: getrusage(RUSAGE_SELF) over the
 * span (every window's CPU, the wake-ups included), and the thread CPU time
 * of the reads and of the deliveries apart.  One line on stdout:
 * RESULT {json}, as the harness's other children (benchlib.emit).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "internal.h"

#define MAX_FDS 64

static char rbuf[1 << 16];
static char reply[1 << 16];

static double rusage_s(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* ---- the sample's floor: the collectors' kept descriptors (as sample_cost) ---- */
struct floor_fd {
    int fd;
    size_t len; /* bytes per pread; 0: to EOF */
};

static int list_fds(int *fds, int max)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;

    if (!d)
        return -errno;
    while ((e = readdir(d)) && n < max) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] == '.' || fd <= 2 || fd == dirfd(d))
            continue;
        fds[n++] = fd;
    }
    closedir(d);
    return n;
}

static void read_floor(const struct floor_fd *f, int n, const char *root)
{
    struct statvfs sv;

    for (int i = 0; i < n; i++) {
        size_t off = 0;
        ssize_t r;
        do {
            r = pread(f[i].fd, rbuf, f[i].len ? f[i].len : sizeof rbuf, (off_t)off);
            off += r > 0 ? (size_t)r : 0;
        } while (!f[i].len && r > 0);
    }
    statvfs(root, &sv);
}

/* ---- the process tree's floor: coll_proc.c's reads, nothing else ---------------- */
#define TREE_FLOOR_MAX 4096

static int tree_list[TREE_FLOOR_MAX];
static int tree_n;
static long tree_rollups;

/* one file read to its end through a fresh descriptor (coll_proc.c read_at) */
static ssize_t slurp(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n, all = 0;

    if (fd < 0)
        return -errno;
    while ((n = read(fd, rbuf + all, sizeof rbuf - 1 - (size_t)all)) > 0)
        all += n;
    close(fd);
    rbuf[all] = '\0';
    return all;
}

static void tree_add_children(int pid)
{
    char path[320], *p, *end;
    struct dirent *e;
    DIR *d;

    snprintf(path, sizeof path, "/proc/%d/task", pid);
    if (!(d = opendir(path)))
        return;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%d/task/%s/children", pid, e->d_name);
        if (slurp(path) <= 0)
            continue;
        for (p = rbuf;; p = end) {
            long c = strtol(p, &end, 10);
            if (end == p || tree_n >= TREE_FLOOR_MAX)
                break;
            tree_list[tree_n++] = (int)c;
        }
    }
    closedir(d);
}

/* one sample of the tree: the walk and each process's stat; smaps_rollup too
 * when rollup is set */
static void read_tree(int root, int rollup)
{
    char path[64];

    tree_n = 0;
    tree_list[tree_n++] = root;
    for (int i = 0; i < tree_n; i++)
        tree_add_children(tree_list[i]);
    for (int i = 0; i < tree_n; i++) {
        snprintf(path, sizeof path, "/proc/%d/stat", tree_list[i]);
        slurp(path);
        if (rollup) {
            snprintf(path, sizeof path, "/proc/%d/smaps_rollup", tree_list[i]);
            slurp(path);
        }
    }
    tree_rollups += rollup;
}

/* ---- the delivery's floor ------------------------------------------------------ */
static int connect_to(const char *host, int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd, one = 1;

    if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return -EINVAL;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    /* libcurl sets TCP_NODELAY too (its default since 7.50.2) */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* 1 when the peer closed (or reset) the connection while we slept. */
static int peer_closed(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    char c;

    if (poll(&p, 1, 0) <= 0)
        return 0;
    return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

/* Reads one HTTP reply (headers, then Content-Length bytes); its status, or
 * < 0 on a closed or broken connection. */
static int read_reply(int fd, int *keep)
{
    size_t got = 0, need = 0;
    char *end = NULL;
    int status = 0;

    for (;;) {
        ssize_t r = recv(fd, reply + got, sizeof reply - 1 - got, 0);
        if (r <= 0)
            return r == 0 ? -EPIPE : -errno;
        got += (size_t)r;
        reply[got] = '\0';
        if (!end && (end = strstr(reply, "\r\n\r\n"))) {
            const char *cl = NULL;
            for (char *l = strstr(reply, "\r\n"); l && l < end; l = strstr(l + 2, "\r\n")) {
                if (strncasecmp(l + 2, "content-length:", 15) == 0)
                    cl = l + 17;
                else if (strncasecmp(l + 2, "connection: close", 17) == 0)
                    *keep = 0;
            }
            status = atoi(reply + 9); /* "HTTP/1.1 200" */
            need = (size_t)(end + 4 - reply) + (cl ? strtoul(cl, NULL, 10) : 0);
        }
        if (end && got >= need)
            return status;
        if (got >= sizeof reply - 1)
            return -EMSGSIZE;
    }
}

int main(int argc, char **argv)
{
    const char *req_path = NULL, *host = "127.0.0.1";
    double interval = 1.0, warmup = 2.0, span = 10.0, rollup_every = 300.0, rollup_at = -1;
    int tree = 0, port = 0, fd = -1, before[MAX_FDS], after[MAX_FDS], nb, na, nf = 0;
    struct floor_fd ff[MAX_FDS];
    char root[SM_PATH_MAX], *req;
    sm_ctx ctx;
    sm_collset set;
    sm_notes notes = {0};
    struct stat st;
    FILE *f;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--request") == 0)
            req_path = argv[i + 1];
        else if (strcmp(argv[i], "--host") == 0)
            host = argv[i + 1];
        else if (strcmp(argv[i], "--port") == 0)
            port = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--interval") == 0)
            interval = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--warmup") == 0)
            warmup = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--span") == 0)
            span = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--tree") == 0)
            tree = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--rollup-every") == 0)
            rollup_every = atof(argv[i + 1]);
    }
    if (!req_path || port <= 0 || interval <= 0 || span <= 0) {
        fprintf(stderr, "usage: window_floor --request FILE --port P [--host H] --interval S "
                        "--warmup W --span T [--tree PID [--rollup-every S]]\n");
        return 2;
    }
    if (stat(req_path, &st) < 0 || !(req = malloc((size_t)st.st_size)) ||
        !(f = fopen(req_path, "rb")) || fread(req, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        fprintf(stderr, "window_floor: cannot read %s\n", req_path);
        return 1;
    }
    fclose(f);

    /* the descriptors the collectors keep, as sample_cost finds them */
    if (sm__ctx_init(&ctx) < 0 || sm__path(&ctx, "/", root, sizeof root) < 0)
        return 1;
    nb = list_fds(before, MAX_FDS);
    if (sm__collset_open(&set, &ctx, &notes) < 0)
        return 1;
    na = list_fds(after, MAX_FDS);
    for (int i = 0; i < na; i++) {
        char link[64], path[256];
        ssize_t l;
        int seen = 0;
        for (int j = 0; j < nb; j++)
            seen |= before[j] == after[i];
        if (seen)
            continue;
        snprintf(link, sizeof link, "/proc/self/fd/%d", after[i]);
        l = readlink(link, path, sizeof path - 1);
        path[l > 0 ? l : 0] = '\0';
        ff[nf].fd = after[i];
        ff[nf].len = strcmp(path, "/proc/stat") == 0 ? 1023 : 0; /* the collector's read */
        nf++;
    }

    double start = now(CLOCK_MONOTONIC), t_read = 0, t_send = 0, c0 = 0, m0 = 0;
    long windows = 0, rollups0 = 0, connects = 0, reconnects = 0, bad = 0, last_status = 0;
    int measuring = 0;
    struct timespec next;

    /* the product's baseline reads the tree's smaps_rollup at enable, before
     * any window: so does the floor (at 10 s the first window is already in
     * the span: the warm-up is shorter than a window) */
    if (tree > 0) {
        read_tree(tree, 1);
        rollup_at = start;
        tree_rollups = 0;
    }
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (long k = 1;; k++) {
        double at = start + (double)k * interval;
        next.tv_sec = (time_t)at;
        next.tv_nsec = (long)((at - (double)next.tv_sec) * 1e9);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
            ;
        if (!measuring && at - start >= warmup) { /* the span starts at this wake */
            measuring = 1;
            c0 = rusage_s();
            m0 = at;
            rollups0 = tree_rollups;
        }
        if (measuring && at - m0 >= span - 1e-6)
            break;
        double a = now(CLOCK_THREAD_CPUTIME_ID);
        read_floor(ff, nf, root);
        if (tree > 0) {
            int rollup = rollup_at < 0 || at - rollup_at >= rollup_every;
            read_tree(tree, rollup);
            if (rollup)
                rollup_at = at;
        }
        double b = now(CLOCK_THREAD_CPUTIME_ID);
        int keep = 1, status = -1;
        for (int attempt = 0; attempt < 2 && status < 0; attempt++) {
            if (fd >= 0 && peer_closed(fd)) {
                close(fd);
                fd = -1;
                reconnects += measuring;
            }
            if (fd < 0) {
                fd = connect_to(host, port);
                connects += measuring;
                if (fd < 0)
                    break;
            }
            size_t off = 0;
            while (off < (size_t)st.st_size) {
                ssize_t w = send(fd, req + off, (size_t)st.st_size - off, MSG_NOSIGNAL);
                if (w <= 0)
                    break;
                off += (size_t)w;
            }
            status = off == (size_t)st.st_size ? read_reply(fd, &keep) : -EPIPE;
            if (status < 0 || !keep) {
                close(fd);
                fd = -1;
            }
        }
        double e = now(CLOCK_THREAD_CPUTIME_ID);
        if (measuring) {
            windows++;
            t_read += b - a;
            t_send += e - b;
            bad += status != 200;
            last_status = status;
        }
    }
    double cpu = rusage_s() - c0;
    printf("RESULT {\"interval\": %g, \"span\": %g, \"windows\": %ld, \"cpu_s\": %.9f, "
           "\"read_cpu_s\": %.9f, \"deliver_cpu_s\": %.9f, \"connects\": %ld, "
           "\"server_closed\": %ld, \"not_200\": %ld, \"last_status\": %ld, "
           "\"request_bytes\": %lld, \"kept_fds\": %d, \"tree_pid\": %d, \"tree_processes\": %d, "
           "\"tree_rollups_in_span\": %ld}\n",
           interval, span, windows, cpu, t_read, t_send, connects, reconnects, bad, last_status,
           (long long)st.st_size, nf, tree, tree_n, tree_rollups - rollups0);
    fflush(stdout);
    if (fd >= 0)
        close(fd);
    sm__collset_close(&set);
    free(req);
    return bad ? 1 : 0;
}
