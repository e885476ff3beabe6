/* test_parse_cgroup.c — the cgroup parsers (parse_cgroup.c) and the key-value
 * files of cgroups (memory.stat, memory.events, cpu.stat, memory.oom_control,
 * read with parse_proc.c's sm__parse_kv/sm__parse_number): good, malformed and
 * truncated input.  Truncations are cut with a length shorter than the
 * string, so a parser that reads past len would be caught by ASan. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "parse.h"

#define S(x) x, sizeof(x) - 1

/* a heap copy of exactly len bytes, no NUL: over-reads hit the redzone */
static char *exact(const char *s, size_t len)
{
    char *p = malloc(len ? len : 1);
    memcpy(p, s, len);
    return p;
}

static int count_cg(const char *buf, size_t len, int *rc)
{
    size_t pos = 0;
    sm_cg_entry e;
    int n = 0;

    while ((*rc = sm__cgroup_next(buf, len, &pos, &e)) == 1)
        n++;
    return n;
}

static int count_mi(const char *buf, size_t len, int *rc)
{
    size_t pos = 0;
    sm_mount m;
    int n = 0;

    while ((*rc = sm__mountinfo_next(buf, len, &pos, &m)) == 1)
        n++;
    return n;
}

static int eq(const char *s, size_t len, const char *want)
{
    return strlen(want) == len && memcmp(s, want, len) == 0;
}

static void test_proc_cgroup(void)
{
    const char hybrid[] = "12:cpu,cpuacct:/docker/abc\n"
                          "11:name=systemd:/user.slice\n"
                          "4:memory:/docker/abc\n"
                          "0::/user.slice/session-1.scope\n";
    sm_cg_entry e;
    size_t pos = 0;
    int rc;

    CHECK_EQ_INT(sm__cgroup_next(S(hybrid), &pos, &e), 1);
    CHECK_EQ_INT(e.hier, 12);
    CHECK(eq(e.ctrl, e.ctrl_len, "cpu,cpuacct"));
    CHECK(sm__list_has(e.ctrl, e.ctrl_len, "cpu"));
    CHECK(sm__list_has(e.ctrl, e.ctrl_len, "cpuacct"));
    CHECK(!sm__list_has(e.ctrl, e.ctrl_len, "cpuset"));
    CHECK(eq(e.path, e.path_len, "/docker/abc"));
    CHECK_EQ_INT(sm__cgroup_next(S(hybrid), &pos, &e), 1);
    CHECK(eq(e.ctrl, e.ctrl_len, "name=systemd"));
    CHECK(!sm__list_has(e.ctrl, e.ctrl_len, "systemd"));
    CHECK_EQ_INT(sm__cgroup_next(S(hybrid), &pos, &e), 1);
    CHECK(sm__list_has(e.ctrl, e.ctrl_len, "memory"));
    CHECK_EQ_INT(sm__cgroup_next(S(hybrid), &pos, &e), 1);
    CHECK_EQ_INT(e.hier, 0);
    CHECK_EQ_INT(e.ctrl_len, 0);
    CHECK(eq(e.path, e.path_len, "/user.slice/session-1.scope"));
    CHECK_EQ_INT(e.deleted, 0);
    CHECK_EQ_INT(sm__cgroup_next(S(hybrid), &pos, &e), 0);

    /* v2 only, no trailing newline, a path with ':' in it, " (deleted)" */
    pos = 0;
    CHECK_EQ_INT(sm__cgroup_next(S("0::/a:b/c (deleted)"), &pos, &e), 1);
    CHECK(eq(e.path, e.path_len, "/a:b/c"));
    CHECK_EQ_INT(e.deleted, 1);
    pos = 0;
    CHECK_EQ_INT(sm__cgroup_next(S("0::/\n"), &pos, &e), 1);
    CHECK(eq(e.path, e.path_len, "/"));
    /* a path that is only " (deleted)" after the root keeps its slash */
    pos = 0;
    CHECK_EQ_INT(sm__cgroup_next(S("0::/ (deleted)\n"), &pos, &e), 1);
    CHECK(eq(e.path, e.path_len, "/"));
    CHECK_EQ_INT(e.deleted, 1);
    /* empty lines are skipped; an empty file has no entries */
    CHECK_EQ_INT(count_cg(S("\n\n0::/\n\n"), &rc), 1);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(count_cg(S(""), &rc), 0);
    CHECK_EQ_INT(rc, 0);

    /* malformed: every one is one clear error, never a crash */
    CHECK_EQ_INT(count_cg(S("x:memory:/a\n"), &rc), 0);
    CHECK_EQ_INT(rc, -EINVAL);
    CHECK_EQ_INT(count_cg(S("4memory:/a\n"), &rc), 0);
    CHECK_EQ_INT(rc, -EINVAL);
    CHECK_EQ_INT(count_cg(S("4:memory\n"), &rc), 0);
    CHECK_EQ_INT(rc, -EINVAL);
    CHECK_EQ_INT(count_cg(S("4:memory:\n"), &rc), 0);
    CHECK_EQ_INT(rc, -EINVAL);
    CHECK_EQ_INT(count_cg(S("4:memory:relative\n"), &rc), 0);
    CHECK_EQ_INT(rc, -EINVAL);
    CHECK_EQ_INT(count_cg(S("99999999999:memory:/\n"), &rc), 0);
    CHECK_EQ_INT(rc, -EINVAL);
    CHECK_EQ_INT(count_cg(S("0::/\ngarbage\n"), &rc), 1);
    CHECK_EQ_INT(rc, -EINVAL);
    /* truncated at every length: never reads past len */
    for (size_t l = 0; l < sizeof hybrid - 1; l++) {
        char *b = exact(hybrid, l);
        count_cg(b, l, &rc);
        CHECK(rc == 0 || rc == -EINVAL);
        free(b);
    }
    /* cut inside "11:name=systemd" (no second ':') */
    CHECK_EQ_INT(count_cg(hybrid, 34, &rc), 1);
    CHECK_EQ_INT(rc, -EINVAL);

    CHECK(sm__list_has(S("rw,memory"), "memory"));
    CHECK(sm__list_has(S("memory"), "memory"));
    CHECK(!sm__list_has(S("rw,memory_x"), "memory"));
    CHECK(!sm__list_has(S(""), "memory"));
    CHECK(!sm__list_has(S(",,"), "cpu"));
}

static void test_mountinfo(void)
{
    const char mi[] =
        "31 23 0:28 / /sys/fs/cgroup rw,relatime shared:9 - tmpfs tmpfs rw,mode=755\n"
        "35 31 0:32 /docker/abc /sys/fs/cgroup/memory rw,relatime shared:13 master:2 - cgroup "
        "cgroup rw,memory\n"
        "36 31 0:33 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
        "41 31 0:38 / /sys/fs/cgroup/my\\040cg\\011x\\134y rw - cgroup2 cgroup2 rw,nsdelegate\n"
        "50 1 0:40 / /mnt/c rw - 9p drvfs rw,aname=drvfs;path=C:\\;symlinkroot=/mnt/ x y\n"
        "60 1 0:4 net:[4026532] /run/netns/a rw - nsfs nsfs rw\n";
    sm_mount m;
    size_t pos = 0;
    char out[64];
    int rc;

    CHECK_EQ_INT(sm__mountinfo_next(S(mi), &pos, &m), 1);
    CHECK(eq(m.point, m.point_len, "/sys/fs/cgroup"));
    CHECK(eq(m.fstype, m.fstype_len, "tmpfs"));
    CHECK_EQ_INT(sm__mountinfo_next(S(mi), &pos, &m), 1);
    CHECK(eq(m.root, m.root_len, "/docker/abc"));
    CHECK(eq(m.point, m.point_len, "/sys/fs/cgroup/memory"));
    CHECK(eq(m.fstype, m.fstype_len, "cgroup"));
    CHECK(eq(m.super, m.super_len, "rw,memory"));
    CHECK_EQ_INT(sm__mountinfo_next(S(mi), &pos, &m), 1);
    CHECK(sm__list_has(m.super, m.super_len, "cpuacct"));
    CHECK(eq(m.point, m.point_len, "/sys/fs/cgroup/cpu,cpuacct"));
    CHECK_EQ_INT(sm__mountinfo_next(S(mi), &pos, &m), 1);
    CHECK(eq(m.fstype, m.fstype_len, "cgroup2"));
    CHECK_EQ_INT(sm__unescape_octal(m.point, m.point_len, out, sizeof out), 0);
    CHECK_EQ_STR(out, "/sys/fs/cgroup/my cg\tx\\y");
    /* super options with spaces (WSL): the rest of the line */
    CHECK_EQ_INT(sm__mountinfo_next(S(mi), &pos, &m), 1);
    CHECK(eq(m.super, m.super_len, "rw,aname=drvfs;path=C:\\;symlinkroot=/mnt/ x y"));
    /* a root that is not a path (nsfs) parses; cgroup.c checks its own */
    CHECK_EQ_INT(sm__mountinfo_next(S(mi), &pos, &m), 1);
    CHECK(eq(m.root, m.root_len, "net:[4026532]"));
    CHECK_EQ_INT(sm__mountinfo_next(S(mi), &pos, &m), 0);
    CHECK_EQ_INT(count_mi(S(mi), &rc), 6);
    CHECK_EQ_INT(rc, 0);

    /* malformed */
    CHECK_EQ_INT(count_mi(S("35 31 0:32 / /sys/fs/cgroup/memory rw cgroup cgroup rw,memory\n"),
                          &rc),
                 0);
    CHECK_EQ_INT(rc, -EINVAL); /* no "-" separator */
    CHECK_EQ_INT(count_mi(S("35 31 0:32 / /x rw - cgroup\n"), &rc), 0);
    CHECK_EQ_INT(rc, -EINVAL); /* no source */
    CHECK_EQ_INT(count_mi(S("35 31 0:32 /\n"), &rc), 0);
    CHECK_EQ_INT(rc, -EINVAL);
    CHECK_EQ_INT(count_mi(S("35  31 0:32 / /x rw - cgroup cgroup rw\n"), &rc), 0);
    CHECK_EQ_INT(rc, -EINVAL); /* empty field */
    CHECK_EQ_INT(count_mi(S("35 31 0:32 / /x rw -\n"), &rc), 0);
    CHECK_EQ_INT(rc, -EINVAL);
    /* the separator is a lone "-", not a field that starts with one */
    CHECK_EQ_INT(count_mi(S("35 31 0:32 / /x rw -shared - cgroup2 cgroup2 rw\n"), &rc), 1);
    CHECK_EQ_INT(rc, 0);
    for (size_t l = 0; l < sizeof mi - 1; l++) {
        char *b = exact(mi, l);
        count_mi(b, l, &rc);
        CHECK(rc == 0 || rc == -EINVAL);
        free(b);
    }

    /* escapes */
    CHECK_EQ_INT(sm__unescape_octal(S("/a\\040b"), out, sizeof out), 0);
    CHECK_EQ_STR(out, "/a b");
    CHECK_EQ_INT(sm__unescape_octal(S("/a\\012b"), out, sizeof out), 0);
    CHECK_EQ_STR(out, "/a\nb");
    CHECK_EQ_INT(sm__unescape_octal(S("/a\\04"), out, sizeof out), -EINVAL);   /* truncated */
    CHECK_EQ_INT(sm__unescape_octal(S("/a\\"), out, sizeof out), -EINVAL);
    CHECK_EQ_INT(sm__unescape_octal(S("/a\\089"), out, sizeof out), -EINVAL);  /* not octal */
    CHECK_EQ_INT(sm__unescape_octal(S("/a\\000"), out, sizeof out), -EINVAL);  /* NUL */
    CHECK_EQ_INT(sm__unescape_octal(S("/a\\777"), out, sizeof out), -EINVAL);  /* > 255 */
    CHECK_EQ_INT(sm__unescape_octal(S("/abcdef"), out, 4), -ENAMETOOLONG);
    CHECK_EQ_INT(sm__unescape_octal(S("/abc"), out, 4), -ENAMETOOLONG);
    CHECK_EQ_INT(sm__unescape_octal(S("/ab"), out, 4), 0);
    CHECK_EQ_INT(sm__unescape_octal(S(""), out, sizeof out), 0);
    CHECK_EQ_STR(out, "");
}

static void test_cpu_max(void)
{
    uint64_t q, p;
    int unl;

    CHECK_EQ_INT(sm__parse_cpu_max(S("250000 100000\n"), &q, &p, &unl), 0);
    CHECK_EQ_INT(q, 250000);
    CHECK_EQ_INT(p, 100000);
    CHECK_EQ_INT(unl, 0);
    CHECK_EQ_INT(sm__parse_cpu_max(S("max 100000\n"), &q, &p, &unl), 0);
    CHECK_EQ_INT(unl, 1);
    CHECK_EQ_INT(p, 100000);
    CHECK_EQ_INT(sm__parse_cpu_max(S("max\n"), &q, &p, &unl), 0);
    CHECK_EQ_INT(unl, 1);
    CHECK_EQ_INT(sm__parse_cpu_max(S("250000\n"), &q, &p, &unl), -EINVAL);
    CHECK_EQ_INT(sm__parse_cpu_max(S("250000 0\n"), &q, &p, &unl), -EINVAL);
    CHECK_EQ_INT(sm__parse_cpu_max(S("0 100000\n"), &q, &p, &unl), -EINVAL);
    CHECK_EQ_INT(sm__parse_cpu_max(S("-1 100000\n"), &q, &p, &unl), -EINVAL);
    CHECK_EQ_INT(sm__parse_cpu_max(S("max x\n"), &q, &p, &unl), -EINVAL);
    CHECK_EQ_INT(sm__parse_cpu_max(S("1 2 3\n"), &q, &p, &unl), -EINVAL);
    CHECK_EQ_INT(sm__parse_cpu_max(S("99999999999999999999 100000\n"), &q, &p, &unl), -ERANGE);
    CHECK_EQ_INT(sm__parse_cpu_max(S(""), &q, &p, &unl), -EINVAL);
    CHECK_EQ_INT(sm__parse_cpu_max(S("maximum 1\n"), &q, &p, &unl), -EINVAL);
    {
        const char good[] = "250000 100000\n";
        for (size_t l = 0; l < sizeof good - 1; l++) {
            char *b = exact(good, l);
            int rc = sm__parse_cpu_max(b, l, &q, &p, &unl);
            /* "250000 1" and friends parse (a short period); the rest fail */
            CHECK(rc == 0 || rc == -EINVAL);
            free(b);
        }
    }
}

static void test_cpulist(void)
{
    unsigned n;

    CHECK_EQ_INT(sm__parse_cpulist(S("0-3,8\n"), &n), 0);
    CHECK_EQ_INT(n, 5);
    CHECK_EQ_INT(sm__parse_cpulist(S("0\n"), &n), 0);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(sm__parse_cpulist(S("0-63,128-191\n"), &n), 0);
    CHECK_EQ_INT(n, 128);
    CHECK_EQ_INT(sm__parse_cpulist(S("\n"), &n), 0);
    CHECK_EQ_INT(n, 0);
    CHECK_EQ_INT(sm__parse_cpulist(S(""), &n), 0);
    CHECK_EQ_INT(n, 0);
    CHECK_EQ_INT(sm__parse_cpulist(S("3-1\n"), &n), -EINVAL);
    CHECK_EQ_INT(sm__parse_cpulist(S("0-3,2\n"), &n), -EINVAL);   /* overlap */
    CHECK_EQ_INT(sm__parse_cpulist(S("0-\n"), &n), -EINVAL);
    CHECK_EQ_INT(sm__parse_cpulist(S("0,\n"), &n), -EINVAL);
    CHECK_EQ_INT(sm__parse_cpulist(S(",0\n"), &n), -EINVAL);
    CHECK_EQ_INT(sm__parse_cpulist(S("0-3:1/2\n"), &n), -EINVAL);
    CHECK_EQ_INT(sm__parse_cpulist(S("a\n"), &n), -EINVAL);
    CHECK_EQ_INT(sm__parse_cpulist(S("0-99999999\n"), &n), -ERANGE);
    CHECK_EQ_INT(sm__parse_cpulist(S("0-99999999999999999999\n"), &n), -ERANGE);
    {
        const char good[] = "0-3,8-11\n";
        for (size_t l = 0; l < sizeof good - 1; l++) {
            char *b = exact(good, l);
            int rc = sm__parse_cpulist(b, l, &n);
            CHECK(rc == 0 || rc == -EINVAL);
            free(b);
        }
    }

    CHECK_EQ_INT(sm__count_stat_cpus(S("cpu  1 2 3 4\ncpu0 1 2 3 4\ncpu1 1 2 3 4\nintr 1\n"), &n),
                 0);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(sm__count_stat_cpus(S("cpu  1 2 3 4\nintr 1\n"), &n), -ENOENT);
    CHECK_EQ_INT(sm__count_stat_cpus(S("cpu0 1 2 3 4\n"), &n), -ENOENT);
    CHECK_EQ_INT(sm__count_stat_cpus(S(""), &n), -ENOENT);
    CHECK_EQ_INT(sm__count_stat_cpus("cpu  1\ncpu0 1", 8, &n), -ENOENT); /* cut before cpu0 */
}

/* cgroup key-value files: exact keys, malformed values, truncation */
static void test_kv_files(void)
{
    const char v2stat[] = "anon 1000\nfile 5000\nkernel 10\nactive_file 3000\n"
                          "inactive_file 2000\nslab 7\n";
    const char v1stat[] = "cache 5000\nrss 1000\ninactive_file 1\nactive_file 2\n"
                          "total_cache 5000\ntotal_inactive_file 2500\ntotal_active_file 99\n";
    const char events[] = "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n";
    const char oomctl[] = "oom_kill_disable 0\nunder_oom 0\noom_kill 4\n";
    const char cpustat2[] = "usage_usec 123456\nuser_usec 100000\nsystem_usec 23456\n"
                            "nr_periods 10\nnr_throttled 3\nthrottled_usec 4500\n";
    const char cpustat1[] = "nr_periods 10\nnr_throttled 3\nthrottled_time 4500000\n"
                            "nr_bursts 0\nburst_time 0\n";
    uint64_t v;
    int unl;

    CHECK_EQ_INT(sm__parse_kv(S(v2stat), "inactive_file", &v), 0);
    CHECK_EQ_INT(v, 2000);
    CHECK_EQ_INT(sm__parse_kv(S(v2stat), "active_file", &v), 0);
    CHECK_EQ_INT(v, 3000); /* not inactive_file's value */
    CHECK_EQ_INT(sm__parse_kv(S(v1stat), "total_inactive_file", &v), 0);
    CHECK_EQ_INT(v, 2500);
    CHECK_EQ_INT(sm__parse_kv(S(v1stat), "inactive_file", &v), 0);
    CHECK_EQ_INT(v, 1);
    CHECK_EQ_INT(sm__parse_kv(S(events), "oom_kill", &v), 0);
    CHECK_EQ_INT(v, 2);
    CHECK_EQ_INT(sm__parse_kv(S(events), "oom", &v), 0);
    CHECK_EQ_INT(v, 3);
    CHECK_EQ_INT(sm__parse_kv(S(oomctl), "oom_kill", &v), 0);
    CHECK_EQ_INT(v, 4);
    CHECK_EQ_INT(sm__parse_kv(S("oom_kill_disable 0\nunder_oom 0\n"), "oom_kill", &v), -ENOENT);
    CHECK_EQ_INT(sm__parse_kv(S(cpustat2), "usage_usec", &v), 0);
    CHECK_EQ_INT(v, 123456);
    CHECK_EQ_INT(sm__parse_kv(S(cpustat2), "throttled_usec", &v), 0);
    CHECK_EQ_INT(v, 4500);
    CHECK_EQ_INT(sm__parse_kv(S(cpustat1), "throttled_time", &v), 0);
    CHECK_EQ_INT(v, 4500000);
    CHECK_EQ_INT(sm__parse_kv(S(cpustat1), "usage_usec", &v), -ENOENT);
    /* malformed */
    CHECK_EQ_INT(sm__parse_kv(S("inactive_file -1\n"), "inactive_file", &v), -EINVAL);
    CHECK_EQ_INT(sm__parse_kv(S("inactive_file 12x\n"), "inactive_file", &v), -EINVAL);
    CHECK_EQ_INT(sm__parse_kv(S("inactive_file\n"), "inactive_file", &v), -ENOENT);
    CHECK_EQ_INT(sm__parse_kv(S("inactive_file 99999999999999999999\n"), "inactive_file", &v),
                 -ERANGE);
    CHECK_EQ_INT(sm__parse_kv(S("oom_kill 1 2\n"), "oom_kill", &v), -EINVAL);
    /* truncated in the middle of the value: parses the digits there are,
     * truncated before the key: absent; never past len */
    for (size_t l = 0; l < sizeof v2stat - 1; l++) {
        char *b = exact(v2stat, l);
        int rc = sm__parse_kv(b, l, "inactive_file", &v);
        CHECK(rc == 0 || rc == -ENOENT || rc == -EINVAL);
        free(b);
    }
    /* single-number files: memory.current, memory.max, memory.limit_in_bytes,
     * cpuacct.usage, memory.peak */
    CHECK_EQ_INT(sm__parse_number(S("9223372036854771712\n"), &v, &unl), 0);
    CHECK_EQ_INT(unl, 0);
    CHECK_EQ_INT(sm__parse_number(S("max\n"), &v, &unl), 0);
    CHECK_EQ_INT(unl, 1);
    CHECK_EQ_INT(sm__parse_number(S("-1\n"), &v, &unl), 0);
    CHECK_EQ_INT(unl, 1);
    CHECK_EQ_INT(sm__parse_number(S("12 34\n"), &v, &unl), -EINVAL);
    CHECK_EQ_INT(sm__parse_number(S("\n"), &v, &unl), -EINVAL);
    CHECK_EQ_INT(sm__parse_number(S("ma"), &v, &unl), -EINVAL);
}


/* ---- what fills a cgroup: memory.stat parts, memory.events, PSI ---------- */
static void test_memstat(void)
{
    static const char v2[] = "anon 2300000000\nfile 4000000000\nshmem 3100000000\n"
                             "active_anon 5000000000\ninactive_file 500000000\n"
                             "active_file 400000000\n";
    static const char v1[] = "rss 1\nshmem 2\nactive_file 3\ninactive_file 4\n"
                             "total_rss 400\ntotal_shmem 500\ntotal_inactive_file 300\n"
                             "total_active_file 200\n";
    sm_memstat m;
    char *b;

    CHECK_EQ_INT(sm__parse_memstat(S(v2), 0, &m), 0);
    CHECK_EQ_INT(m.have, SM_MS_INACTIVE_FILE | SM_MS_PARTS);
    CHECK(m.anon == 2300000000ull && m.shmem == 3100000000ull);
    CHECK(m.active_file == 400000000ull && m.inactive_file == 500000000ull);
    CHECK(sm__memstat_missing(m.have, 0) == NULL);
    /* v1 reads the hierarchical keys, never the cgroup's own ones */
    CHECK_EQ_INT(sm__parse_memstat(S(v1), 1, &m), 0);
    CHECK(m.anon == 400 && m.shmem == 500 && m.active_file == 200 && m.inactive_file == 300);
    /* and v2 rules on a v1 file: the own keys (rss is not anon) */
    CHECK_EQ_INT(sm__parse_memstat(S(v1), 0, &m), 0);
    CHECK(m.shmem == 2 && m.active_file == 3 && m.inactive_file == 4 && !(m.have & SM_MS_ANON));
    CHECK_EQ_STR(sm__memstat_missing(m.have, 0), "anon");
    /* an old v1 kernel without total_shmem: the working set stays, one part is missing */
    CHECK_EQ_INT(sm__parse_memstat(S("total_rss 1\ntotal_inactive_file 2\ntotal_active_file 3\n"),
                                  1, &m), 0);
    CHECK_EQ_STR(sm__memstat_missing(m.have, 1), "total_shmem");
    /* no inactive_file: the working set cannot be had */
    CHECK_EQ_INT(sm__parse_memstat(S("anon 1\nshmem 2\n"), 0, &m), -ENOENT);
    CHECK_EQ_INT(sm__parse_memstat(S(""), 0, &m), -ENOENT);
    /* a wanted key malformed fails the parse; another key's garbage does not */
    CHECK_EQ_INT(sm__parse_memstat(S("inactive_file 1\nshmem x\n"), 0, &m), -EINVAL);
    CHECK_EQ_INT(sm__parse_memstat(S("inactive_file 1\nshmem 5 6\n"), 0, &m), -EINVAL);
    CHECK_EQ_INT(sm__parse_memstat(S("inactive_file 1\nanon 99999999999999999999\n"), 0, &m),
                 -ERANGE);
    CHECK_EQ_INT(sm__parse_memstat(S("inactive_file 1\npgfault x\n"), 0, &m), 0);
    /* exact keys: "shmem_thp 5" and "inactive_anon" are not shmem and anon */
    CHECK_EQ_INT(sm__parse_memstat(S("shmem_thp 5\ninactive_anon 6\ninactive_file 1\n"), 0, &m),
                 0);
    CHECK_EQ_INT(m.have, SM_MS_INACTIVE_FILE);
    /* truncated at every length: never past len (ASan) */
    for (size_t n = 0; n < sizeof v2 - 1; n++) {
        int rc;
        b = exact(v2, n);
        rc = sm__parse_memstat(b, n, 0, &m);
        CHECK(rc == 0 || rc == -ENOENT || rc == -EINVAL);
        free(b);
    }
}

static void test_memory_events(void)
{
    static const char ev[] = "low 0\nhigh 12\nmax 3\noom 1\noom_kill 0\noom_group_kill 7\n";
    sm_memevents e;
    char *b;

    CHECK_EQ_INT(sm__parse_memory_events(S(ev), &e), 0);
    CHECK_EQ_INT(e.have, SM_ME_HIGH | SM_ME_MAX | SM_ME_OOM | SM_ME_OOM_KILL);
    CHECK(e.high == 12 && e.max == 3 && e.oom == 1 && e.oom_kill == 0);
    /* a kernel before oom_kill (4.13): the others */
    CHECK_EQ_INT(sm__parse_memory_events(S("low 0\nhigh 1\nmax 2\noom 3\n"), &e), 0);
    CHECK_EQ_INT(e.have, SM_ME_HIGH | SM_ME_MAX | SM_ME_OOM);
    CHECK_EQ_INT(sm__parse_memory_events(S("low 0\n"), &e), -ENOENT);
    CHECK_EQ_INT(sm__parse_memory_events(S("oom_kill lots\n"), &e), -EINVAL);
    CHECK_EQ_INT(sm__parse_memory_events(S("max\n"), &e), -ENOENT); /* no value: not the key */
    CHECK_EQ_INT(sm__parse_memory_events(S("max -1\n"), &e), -EINVAL);
    for (size_t n = 0; n < sizeof ev - 1; n++) {
        int rc;
        b = exact(ev, n);
        rc = sm__parse_memory_events(b, n, &e);
        CHECK(rc == 0 || rc == -ENOENT || rc == -EINVAL); /* "high " cut before its value */
        free(b);
    }
}

static void test_psi(void)
{
    static const char psi[] = "some avg10=1.50 avg60=0.80 avg300=0.20 total=4520000\n"
                              "full avg10=0.50 avg60=0.30 avg300=0.10 total=1000000\n";
    uint64_t t = 0;
    char *b;

    CHECK_EQ_INT(sm__parse_psi_some(S(psi), &t), 0);
    CHECK(t == 4520000);
    /* cpu.pressure before 5.13 has no full line; field order does not matter */
    CHECK_EQ_INT(sm__parse_psi_some(S("some total=7 avg10=0.00\n"), &t), 0);
    CHECK(t == 7);
    /* the full line's total is not the some line's */
    CHECK_EQ_INT(sm__parse_psi_some(S("full avg10=0.00 total=9\n"), &t), -ENOENT);
    CHECK_EQ_INT(sm__parse_psi_some(S("some avg10=0.00 avg60=0.00\n"), &t), -ENOENT);
    CHECK_EQ_INT(sm__parse_psi_some(S("some total=\n"), &t), -EINVAL);
    CHECK_EQ_INT(sm__parse_psi_some(S("some total=12x\n"), &t), -EINVAL);
    CHECK_EQ_INT(sm__parse_psi_some(S("some total=99999999999999999999\n"), &t), -ERANGE);
    CHECK_EQ_INT(sm__parse_psi_some(S("some_total=1\n"), &t), -ENOENT);
    CHECK_EQ_INT(sm__parse_psi_some(S(""), &t), -ENOENT);
    for (size_t n = 0; n < sizeof psi - 1; n++) {
        int rc;
        b = exact(psi, n);
        rc = sm__parse_psi_some(b, n, &t);
        /* cut inside the total: the digits there are; before them: -EINVAL */
        CHECK(rc == 0 || rc == -ENOENT || rc == -EINVAL);
        free(b);
    }
}

int main(void)
{
    test_proc_cgroup();
    test_mountinfo();
    test_cpu_max();
    test_cpulist();
    test_kv_files();
    test_memstat();
    test_memory_events();
    test_psi();
    return CHECK_DONE();
}
