/*
 * fuzz_container_sample.c — libFuzzer target for the container collector's
 * sample (coll_container.c) with arbitrary usage files: a bad file degrades
 * only the series computed from it (docs/design.md §6, docs/cgroup.md §5).
 *
 * A fake v2 machine (cgroup namespace, memory.max 4 GiB, cpu.max 2 cores)
 * is made once per process in a private sysroot, and the collector opened
 * on it with good files.  Each input is the three files a sample reads,
 * split at lines that are exactly "--\n":
 *     <memory.current>--\n<memory.stat>--\n<cpu.stat>
 * (missing parts are empty files).  One sample is taken.
 *
 * The oracle is the parsers themselves, called here on the same bytes:
 *   - the two memory series are there exactly when memory.current is a
 *     number (not "max") and memory.stat has inactive_file, with the value
 *     max(0, current - inactive_file) / 1e6;
 *   - the CPU series is there exactly when cpu.stat has usage_usec and it
 *     did not go backwards from the last good value (a re-base gives none);
 *   - the sample returns 0 (both parts are attached: the failing one says
 *     its own line), and nothing else is emitted.
 * The failure lines go to a log handler that drops them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "internal.h"
#include "parse.h"
#include "scopemeter.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static sm_ctx ctx;
static char root[64];
static void *state;
static sm_points pts;
static uint64_t cpu_prev_usec;

static void put(const char *rel, const void *d, size_t n)
{
    char path[256];
    int fd;

    snprintf(path, sizeof path, "%s/%s", root, rel);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        abort();
    while (n > 0) {
        ssize_t w = write(fd, d, n);
        if (w <= 0)
            abort();
        d = (const char *)d + w;
        n -= (size_t)w;
    }
    close(fd);
}

static void puts_(const char *rel, const char *text)
{
    put(rel, text, strlen(text));
}

static void mkd(const char *rel)
{
    char path[256];

    snprintf(path, sizeof path, "%s/%s", root, rel);
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        abort();
}

static void quiet(int level, const char *msg, void *userdata)
{
    (void)level;
    (void)msg;
    (void)userdata;
}

static void cleanup(void)
{
    char cmd[128];

    if (state)
        sm__coll_container.close(state);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", root);
}

static void setup(void)
{
    sm_opened res;

    snprintf(root, sizeof root, "%s/sm-fuzz-ctr.XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(root))
        abort();
    atexit(cleanup);
    mkd("proc");
    mkd("proc/self");
    mkd("sys");
    mkd("sys/fs");
    mkd("sys/fs/cgroup");
    puts_("proc/self/cgroup", "0::/\n");
    puts_("proc/self/mountinfo",
          "2 1 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n");
    puts_("proc/stat", "cpu  1 2 3 4\ncpu0 1 2 3 4\ncpu1 1 2 3 4\ncpu2 1 2 3 4\ncpu3 1 2 3 4\n");
    puts_("sys/fs/cgroup/memory.max", "4294967296\n");
    puts_("sys/fs/cgroup/cpu.max", "200000 100000\n");
    puts_("sys/fs/cgroup/memory.current", "3000000000\n");
    puts_("sys/fs/cgroup/memory.stat", "inactive_file 1000000000\n");
    puts_("sys/fs/cgroup/cpu.stat", "usage_usec 1000000\n");
    snprintf(ctx.sysroot, sizeof ctx.sysroot, "%s", root);
    ctx.mem_total = 16ull << 30;
    sm_set_log_handler(quiet, NULL);
    state = calloc(1, sm__coll_container.state_size);
    memset(&res, 0, sizeof res);
    if (!state || sm__coll_container.open(state, &ctx, &res) != 0)
        abort();
    cpu_prev_usec = 1000000;
}

static const sm_point *point(const char *key)
{
    for (size_t i = 0; i < pts.n; i++)
        if (strcmp(pts.v[i].key, key) == 0)
            return &pts.v[i];
    return NULL;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const unsigned char *part[3] = {data, data + size, data + size};
    size_t len[3] = {size, 0, 0}, k = 0;
    uint64_t cur = 0, inactive = 0, usec = 0;
    sm_memstat ms;
    int unl = 0, mem_ok, cpu_ok, rc;
    char msg[300];

    if (!state)
        setup();
    /* the separators: lines "--" */
    for (size_t i = 0; i + 3 <= size && k < 2; i++) {
        if ((i == 0 || data[i - 1] == '\n') && memcmp(data + i, "--\n", 3) == 0 &&
            data + i >= part[k]) {
            len[k] = (size_t)(data + i - part[k]);
            part[k + 1] = data + i + 3;
            len[k + 1] = size - (i + 3);
            k++;
            i += 2;
        }
    }
    put("sys/fs/cgroup/memory.current", part[0], len[0]);
    put("sys/fs/cgroup/memory.stat", part[1], len[1]);
    put("sys/fs/cgroup/cpu.stat", part[2], len[2]);

    /* memory.stat is read once for the working set and its parts
     * (sm__parse_memstat): a malformed anon/shmem/active_file line fails the
     * memory part as a malformed inactive_file does */
    mem_ok = sm__parse_number((const char *)part[0], len[0], &cur, &unl) == 0 && !unl &&
             sm__parse_memstat((const char *)part[1], len[1], 0, &ms) == 0;
    inactive = ms.inactive_file;
    cpu_ok = sm__parse_kv((const char *)part[2], len[2], "usage_usec", &usec) == 0 &&
             usec <= UINT64_MAX / 1000; /* beyond: not a reading (coll_container.c) */

    pts.n = 0;
    msg[0] = '\0';
    rc = sm__coll_container.sample(state, &pts, msg, sizeof msg);
    if (rc != 0)
        abort();
    {
        const sm_point *mb = point("container_memory_usage_megabytes");
        const sm_point *pct = point("container_memory_usage_percentage");
        const sm_point *cpu = point("container_cpu_utilization_percentage");
        size_t want = 0;

        if (!mem_ok != !mb || !mem_ok != !pct)
            abort();
        if (mem_ok) {
            double ws = (double)(cur > inactive ? cur - inactive : 0) / 1e6;
            if (mb->value != ws)
                abort();
            want += 2;
        }
        /* a re-base (counter backwards, in ns as the collector keeps it)
         * gives no point; a NaN/inf value is counted, not emitted */
        if (cpu_ok) {
            int back = usec < cpu_prev_usec;
            if (back ? cpu != NULL : (cpu == NULL && pts.nonfinite == 0))
                abort();
            if (cpu)
                want++;
            cpu_prev_usec = usec;
        } else if (cpu) {
            abort();
        }
        if (pts.n != want)
            abort();
    }
    return 0;
}
