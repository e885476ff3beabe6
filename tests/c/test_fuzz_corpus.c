/*
 * test_fuzz_corpus.c — the parsers of outside input on the inputs that broke
 * (or could break) them and on the fuzzing corpus, kept as tests so they stay
 * fixed (docs/hardening.md: every crash found becomes a regression test).
 *
 * Two parts:
 *   1. named cases: one block per finding, with what went wrong;
 *   2. a replay of every fuzzing seed and saved crash input
 *      (tests/fuzz/corpus/<target>/) through the parser(s) of that target,
 *      at every prefix length, each in a heap buffer of exactly that many
 *      bytes (no NUL): under the ASan build of tests/run a read one byte past
 *      len is a failure, and this needs no clang/libFuzzer.  The inputs of
 *      fuzz_cgroup_resolve (a fake machine's two files) are replayed whole,
 *      each through sm__cgroup_resolve() in a child process.
 *
 * The corpus is found next to the fixtures: $SM_FIXTURES/../fuzz/corpus.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "check.h"
#include "parse.h"

#define S(x) x, sizeof(x) - 1

/* ---- 1. named cases ----------------------------------------------------- */

static void named_cases(void)
{
    uint64_t t, av;
    int est;

    /* meminfo without MemAvailable (kernel < 3.14): MemFree + Buffers +
     * Cached used to wrap around 2^64 and report a small, wrong
     * "available" (found by review while writing fuzz_meminfo's
     * invariants).  Each term fits after kB scaling; the sum does not. */
    CHECK_EQ_INT(sm__parse_meminfo(S("MemTotal: 18014398509481983 kB\n"
                                    "MemFree: 18014398509481983 kB\n"
                                    "Buffers: 18014398509481983 kB\n"
                                    "Cached: 1 kB\n"),
                                  &t, &av, &est),
                 -ERANGE);
    /* just below the edge still parses */
    CHECK_EQ_INT(sm__parse_meminfo(S("MemTotal: 18014398509481983 kB\n"
                                    "MemFree: 9007199254740991 kB\n"
                                    "Buffers: 9007199254740991 kB\n"
                                    "Cached: 1 kB\n"),
                                  &t, &av, &est),
                 0);
    CHECK_EQ_INT(est, 1);
    CHECK(av == (9007199254740991ull * 2 + 1) * 1024);

    /* /proc/stat with every field at UINT64_MAX: the sums in
     * sm__cpu_percent() wrap (unsigned, defined), the result must still be a
     * finite percentage in [0, 100] */
    {
        sm_cpu_times a, b;
        memset(&b, 0, sizeof b);
        CHECK_EQ_INT(sm__parse_proc_stat(S("cpu  18446744073709551615 18446744073709551615 "
                                          "18446744073709551615 18446744073709551615 "
                                          "18446744073709551615 18446744073709551615 "
                                          "18446744073709551615 18446744073709551615 "
                                          "18446744073709551615 18446744073709551615\n"),
                                        &a),
                     0);
        double p = sm__cpu_percent(&b, &a);
        CHECK(isfinite(p) && p >= 0 && p <= 100);
    }
}

/* sm__cgroup_resolve() on a fake machine made of the two files, in a child
 * process: a crash is reported as a failed check, not the end of this test.
 * The files are written with their exact lengths (a fuzz input may hold NUL
 * bytes).  The child checks what fuzz_cgroup_resolve checks: exit 3 when
 * resolve returned a positive value, 4 when why, tag or path is not
 * NUL-terminated in its buffer, 5 when a found cgroup has no version 1 or 2.
 * Returns the child's wait status (0: resolve returned and kept those
 * promises, whatever it said). */
static int resolve_in_child_n(const char *cgroup, size_t cglen, const char *mountinfo,
                              size_t milen)
{
    char root[] = "/tmp/sm-regress.XXXXXX", path[512];
    int status = -1;
    pid_t pid;

    if (!mkdtemp(root))
        return -1;
    snprintf(path, sizeof path, "%s/proc", root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/proc/self", root);
    mkdir(path, 0755);
    const char *names[2] = {"cgroup", "mountinfo"}, *texts[2] = {cgroup, mountinfo};
    const size_t lens[2] = {cglen, milen};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/proc/self/%s", root, names[i]);
        FILE *f = fopen(path, "wb");
        if (f) {
            if (lens[i] && fwrite(texts[i], 1, lens[i], f) != lens[i])
                fprintf(stderr, "short write to %s\n", path);
            fclose(f);
        }
    }
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        static sm_ctx ctx;
        static sm_cgroup cg;
        snprintf(ctx.sysroot, sizeof ctx.sysroot, "%s", root);
        ctx.mem_total = 16ull << 30;
        int rc = sm__cgroup_resolve(&ctx, &cg);
        if (rc > 0)
            _exit(3);
        if (!memchr(cg.why, '\0', sizeof cg.why) || !memchr(cg.tag, '\0', sizeof cg.tag) ||
            !memchr(cg.path, '\0', sizeof cg.path))
            _exit(4);
        if (rc == 0 && cg.version != 1 && cg.version != 2)
            _exit(5);
        _exit(0);
    }
    if (pid > 0)
        waitpid(pid, &status, 0);
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/proc/self/%s", root, names[i]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/proc/self", root);
    rmdir(path);
    snprintf(path, sizeof path, "%s/proc", root);
    rmdir(path);
    rmdir(root);
    return status;
}

/* resolve_in_child_n, saying on stderr how the child ended when it did not
 * end cleanly (`what` names the input).  Returns the wait status. */
static int resolve_says(const char *cgroup, size_t cglen, const char *mountinfo, size_t milen,
                        const char *what)
{
    int st = resolve_in_child_n(cgroup, cglen, mountinfo, milen);

    if (WIFSIGNALED(st))
        fprintf(stderr, "sm__cgroup_resolve died of signal %d (%s)\n", WTERMSIG(st), what);
    else if (st != 0)
        fprintf(stderr, "sm__cgroup_resolve: status %d (%s)\n", st, what);
    return st;
}

static int resolve_in_child(const char *cgroup, const char *mountinfo, const char *what)
{
    return resolve_says(cgroup, strlen(cgroup), mountinfo, strlen(mountinfo), what);
}

static void cgroup_cases(void)
{
    int st;

    /* fuzz_cgroup_resolve, crash-1c7005a8 (tests/fuzz/corpus/fuzz_cgroup_resolve/,
     * minimised by hand to crash-level-up-null-min): memory and cpu on v1,
     * cpuset on v2; the first cgroup2 mount does not show the v2 path (its
     * root is /zzz: version set, rel left empty), the second has a bad
     * escape in its mount point.  locate() returned -EINVAL without clearing
     * the controller's version, sm__cgroup_resolve() ignores errors of
     * cpuset/cpuacct, walk_cpuset() walked from rel "" and level_up() stored
     * through strrchr()'s NULL: SIGSEGV in `scopemeter probe` and in the
     * monitor (a training process). */
    st = resolve_in_child("2:memory,cpu:/a\n0::/b\n",
                          "1 0 0:1 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory,cpu\n"
                          "2 0 0:2 /zzz /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
                          "3 0 0:2 / /x\\0 rw - cgroup2 cgroup2 rw\n",
                          "bad escape after a hidden cgroup2 mount");
    CHECK_EQ_INT(st, 0);

    /* fuzz_cgroup_resolve, crash-6b09e118 (tests/fuzz/corpus/fuzz_cgroup_resolve/
     * crash-v1-cpuset-hidden-then-bad-root): the same NULL store in
     * level_up() as above, reached on an all-v1 Docker host-namespace
     * layout.  The cpuset line of
     * /proc/self/cgroup names /docker/b, which the first cpuset mount (root
     * /docker/a) does not show (version set, rel left empty); a second cpuset
     * mount line whose root field is not a path made locate() return -EINVAL
     * with the version still set; walk_cpuset() then walked from "".  It
     * crashed the cgroup.c of that day and no longer does; this minimised form
     * keeps the route. */
    st = resolve_in_child(
        "10:memory:/docker/a\n11:cpuset:/docker/b\n",
        "710 706 0:33 /docker/a /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
        "709 706 0:32 /docker/a /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n"
        "711 706 0709 706 0:32 /docker/a /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n",
        "v1 cpuset not visible, then a mount root that is not a path");
    CHECK_EQ_INT(st, 0);
}

/* ---- 2. corpus replay ---------------------------------------------------- */

typedef void (*parse_fn)(const char *buf, size_t len);

static int bad_rc(int rc)
{
    return rc > 1 || (rc < 0 && rc != -EINVAL && rc != -ENOENT && rc != -ERANGE &&
                      rc != -ENAMETOOLONG);
}

static int failures;
#define EXPECT(c) do { if (!(c)) failures++; } while (0)

static void p_proc_stat(const char *b, size_t n)
{
    sm_cpu_times a;
    unsigned c;
    EXPECT(!bad_rc(sm__parse_proc_stat(b, n, &a)));
    EXPECT(!bad_rc(sm__count_stat_cpus(b, n, &c)));
}
static void p_meminfo(const char *b, size_t n)
{
    uint64_t t, a;
    int e;
    EXPECT(!bad_rc(sm__parse_meminfo(b, n, &t, &a, &e)));
}
static void p_net_dev(const char *b, size_t n)
{
    uint64_t r, t;
    EXPECT(!bad_rc(sm__parse_net_dev(b, n, &r, &t)));
}
static void p_kv(const char *b, size_t n)
{
    static const char *const keys[] = {"inactive_file", "total_inactive_file", "oom_kill",
                                       "usage_usec", "nr_throttled", "throttled_time", "max"};
    uint64_t v;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        EXPECT(!bad_rc(sm__parse_kv(b, n, keys[i], &v)));
}
static void p_number(const char *b, size_t n)
{
    uint64_t v;
    int u;
    EXPECT(!bad_rc(sm__parse_number(b, n, &v, &u)));
}
static void p_mountinfo(const char *b, size_t n)
{
    size_t pos = 0;
    sm_mount m;
    char out[SM_PATH_MAX];
    int rc;
    while ((rc = sm__mountinfo_next(b, n, &pos, &m)) == 1) {
        EXPECT(!bad_rc(sm__unescape_octal(m.root, m.root_len, out, sizeof out)));
        EXPECT(!bad_rc(sm__unescape_octal(m.point, m.point_len, out, 8)));
    }
    EXPECT(!bad_rc(rc));
}
static void p_proc_cgroup(const char *b, size_t n)
{
    size_t pos = 0;
    sm_cg_entry e;
    int rc;
    while ((rc = sm__cgroup_next(b, n, &pos, &e)) == 1)
        EXPECT(sm__list_has(e.ctrl, e.ctrl_len, "memory") >= 0);
    EXPECT(!bad_rc(rc));
}
static void p_cpu_max(const char *b, size_t n)
{
    uint64_t q, p;
    int u;
    EXPECT(!bad_rc(sm__parse_cpu_max(b, n, &q, &p, &u)));
}
static void p_cpuset(const char *b, size_t n)
{
    unsigned c;
    EXPECT(!bad_rc(sm__parse_cpulist(b, n, &c)));
}

static void p_drm_fdinfo(const char *b, size_t n)
{
    sm_drm_fdinfo fi;
    EXPECT(!bad_rc(sm__parse_drm_fdinfo(b, n, &fi)));
}

static const struct {
    const char *target;
    parse_fn fn;
} replay[] = {
    {"fuzz_proc_stat", p_proc_stat},     {"fuzz_meminfo", p_meminfo},
    {"fuzz_net_dev", p_net_dev},         {"fuzz_kv", p_kv},
    {"fuzz_number", p_number},           {"fuzz_mountinfo", p_mountinfo},
    {"fuzz_proc_cgroup", p_proc_cgroup}, {"fuzz_cpu_max", p_cpu_max},
    {"fuzz_cpuset", p_cpuset},           {"fuzz_drm_fdinfo", p_drm_fdinfo},
};

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;

    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n + 1);
        if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        }
        *len = (size_t)n;
    }
    fclose(f);
    return buf;
}

/* Every prefix of data in an exact-size heap buffer.  Long files: every
 * prefix up to 512 bytes, then every 61st length, then the whole (enough to
 * cut every line somewhere; the fuzzer covers the rest). */
static void replay_one(parse_fn fn, const char *data, size_t len)
{
    size_t n = 0;

    for (;;) {
        char *b = malloc(n ? n : 1);
        if (!b)
            abort();
        memcpy(b, data, n);
        fn(b, n);
        free(b);
        if (n == len)
            break;
        n = n < 512 ? n + 1 : n + 61 < len ? n + 61 : len;
    }
}

/* fuzz_cgroup_resolve's inputs, split as the target splits them (at the
 * first line that is exactly "--": /proc/self/cgroup before it,
 * /proc/self/mountinfo after it), each resolved once in a child.  A signal
 * or a broken promise of the resolver fails the test and names the file.
 * Returns the number of files replayed. */
static int resolve_replay(const char *fx)
{
    char dir[4096], path[8192];
    int here = 0;
    DIR *d;
    struct dirent *de;

    snprintf(dir, sizeof dir, "%s/../fuzz/corpus/fuzz_cgroup_resolve", fx);
    d = opendir(dir);
    if (!d) {
        fprintf(stderr, "no corpus %s\n", dir);
        CHECK(d != NULL);
        return 0;
    }
    while ((de = readdir(d)) != NULL) {
        size_t len, cglen;
        const char *mi = "";
        size_t milen = 0;
        char *data;
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        data = slurp(path, &len);
        if (!data)
            continue;
        cglen = len;
        for (size_t i = 0; i + 3 <= len; i++) {
            if ((i == 0 || data[i - 1] == '\n') && memcmp(data + i, "--\n", 3) == 0) {
                cglen = i;
                mi = data + i + 3;
                milen = len - i - 3;
                break;
            }
        }
        if (resolve_says(data, cglen, mi, milen, path) != 0)
            failures++;
        free(data);
        here++;
    }
    closedir(d);
    CHECK(here > 0); /* every target has seeds */
    return here;
}

static void corpus_replay(void)
{
    const char *fx = getenv("SM_FIXTURES");
    char dir[4096], path[8192];
    int files = 0;

    CHECK(fx != NULL);
    if (!fx)
        return;
    for (size_t t = 0; t < sizeof replay / sizeof replay[0]; t++) {
        int here = 0;
        snprintf(dir, sizeof dir, "%s/../fuzz/corpus/%s", fx, replay[t].target);
        DIR *d = opendir(dir);
        struct dirent *de;
        if (!d) {
            fprintf(stderr, "no corpus %s\n", dir);
            CHECK(d != NULL);
            continue;
        }
        while ((de = readdir(d)) != NULL) {
            size_t len;
            char *data;
            if (de->d_name[0] == '.')
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            data = slurp(path, &len);
            if (!data)
                continue;
            int before = failures;
            replay_one(replay[t].fn, data, len);
            if (failures != before)
                fprintf(stderr, "%s: unexpected return code on a prefix of %s\n",
                        replay[t].target, path);
            free(data);
            files++;
            here++;
        }
        closedir(d);
        CHECK(here > 0); /* every target has seeds */
    }
    files += resolve_replay(fx);
    CHECK(files > 0);
    CHECK_EQ_INT(failures, 0);
    printf("corpus replay: %d files\n", files);
}

int main(void)
{
    named_cases();
    cgroup_cases();
    corpus_replay();
    return CHECK_DONE();
}
