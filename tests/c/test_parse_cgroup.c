/* test_parse_cgroup.c — the cgroup parsers (parse_cgroup.c) and the key-value
 * files of cgroups (memory.stat, memory.events, cpu.stat, memory.oom_control,
 * read with parse_proc.c's sm_parse_kv/sm_parse_number): good, malformed and
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

    while ((*rc = sm_cgroup_next(buf, len, &pos, &e)) == 1)
        n++;
    return n;
}

static int count_mi(const char *buf, size_t len, int *rc)
{
    size_t pos = 0;
    sm_mount m;
    int n = 0;

    while ((*rc = sm_mountinfo_next(buf, len, &pos, &m)) == 1)
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

    CHECK_EQ_INT(sm_cgroup_next(S(hybrid), &pos, &e), 1);
    CHECK_EQ_INT(e.hier, 12);
    CHECK(eq(e.ctrl, e.ctrl_len, "cpu,cpuacct"));
    CHECK(sm_list_has(e.ctrl, e.ctrl_len, "cpu"));
    CHECK(sm_list_has(e.ctrl, e.ctrl_len, "cpuacct"));
    CHECK(!sm_list_has(e.ctrl, e.ctrl_len, "cpuset"));
    CHECK(eq(e.path, e.path_len, "/docker/abc"));
    CHECK_EQ_INT(sm_cgroup_next(S(hybrid), &pos, &e), 1);
    CHECK(eq(e.ctrl, e.ctrl_len, "name=systemd"));
    CHECK(!sm_list_has(e.ctrl, e.ctrl_len, "systemd"));
    CHECK_EQ_INT(sm_cgroup_next(S(hybrid), &pos, &e), 1);
    CHECK(sm_list_has(e.ctrl, e.ctrl_len, "memory"));
    CHECK_EQ_INT(sm_cgroup_next(S(hybrid), &pos, &e), 1);
    CHECK_EQ_INT(e.hier, 0);
    CHECK_EQ_INT(e.ctrl_len, 0);
    CHECK(eq(e.path, e.path_len, "/user.slice/session-1.scope"));
    CHECK_EQ_INT(e.deleted, 0);
    CHECK_EQ_INT(sm_cgroup_next(S(hybrid), &pos, &e), 0);

    /* v2 only, no trailing newline, a path with ':' in it, " (deleted)" */
    pos = 0;
    CHECK_EQ_INT(sm_cgroup_next(S("0::/a:b/c (deleted)"), &pos, &e), 1);
    CHECK(eq(e.path, e.path_len, "/a:b/c"));
    CHECK_EQ_INT(e.deleted, 1);
    pos = 0;
    CHECK_EQ_INT(sm_cgroup_next(S("0::/\n"), &pos, &e), 1);
    CHECK(eq(e.path, e.path_len, "/"));
    /* a path that is only " (deleted)" after the root keeps its slash */
    pos = 0;
    CHECK_EQ_INT(sm_cgroup_next(S("0::/ (deleted)\n"), &pos, &e), 1);
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

    CHECK(sm_list_has(S("rw,memory"), "memory"));
    CHECK(sm_list_has(S("memory"), "memory"));
    CHECK(!sm_list_has(S("rw,memory_x"), "memory"));
    CHECK(!sm_list_has(S(""), "memory"));
    CHECK(!sm_list_has(S(",,"), "cpu"));
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

    CHECK_EQ_INT(sm_mountinfo_next(S(mi), &pos, &m), 1);
    CHECK(eq(m.point, m.point_len, "/sys/fs/cgroup"));
    CHECK(eq(m.fstype, m.fstype_len, "tmpfs"));
    CHECK_EQ_INT(sm_mountinfo_next(S(mi), &pos, &m), 1);
    CHECK(eq(m.root, m.root_len, "/docker/abc"));
    CHECK(eq(m.point, m.point_len, "/sys/fs/cgroup/memory"));
    CHECK(eq(m.fstype, m.fstype_len, "cgroup"));
    CHECK(eq(m.super, m.super_len, "rw,memory"));
    CHECK_EQ_INT(sm_mountinfo_next(S(mi), &pos, &m), 1);
    CHECK(sm_list_has(m.super, m.super_len, "cpuacct"));
    CHECK(eq(m.point, m.point_len, "/sys/fs/cgroup/cpu,cpuacct"));
    CHECK_EQ_INT(sm_mountinfo_next(S(mi), &pos, &m), 1);
    CHECK(eq(m.fstype, m.fstype_len, "cgroup2"));
    CHECK_EQ_INT(sm_unescape_octal(m.point, m.point_len, out, sizeof out), 0);
    CHECK_EQ_STR(out, "/sys/fs/cgroup/my cg\tx\\y");
    /* super options with spaces (WSL): the rest of the line */
    CHECK_EQ_INT(sm_mountinfo_next(S(mi), &pos, &m), 1);
    CHECK(eq(m.super, m.super_len, "rw,aname=drvfs;path=C:\\;symlinkroot=/mnt/ x y"));
    /* a root that is not a path (nsfs) parses; cgroup.c checks its own */
    CHECK_EQ_INT(sm_mountinfo_next(S(mi), &pos, &m), 1);
    CHECK(eq(m.root, m.root_len, "net:[4026532]"));
    CHECK_EQ_INT(sm_mountinfo_next(S(mi), &pos, &m), 0);
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
    CHECK_EQ_INT(sm_unescape_octal(S("/a\\040b"), out, sizeof out), 0);
    CHECK_EQ_STR(out, "/a b");
    CHECK_EQ_INT(sm_unescape_octal(S("/a\\012b"), out, sizeof out), 0);
    CHECK_EQ_STR(out, "/a\nb");
    CHECK_EQ_INT(sm_unescape_octal(S("/a\\04"), out, sizeof out), -EINVAL);   /* truncated */
    CHECK_EQ_INT(sm_unescape_octal(S("/a\\"), out, sizeof out), -EINVAL);
    CHECK_EQ_INT(sm_unescape_octal(S("/a\\089"), out, sizeof out), -EINVAL);  /* not octal */
    CHECK_EQ_INT(sm_unescape_octal(S("/a\\000"), out, sizeof out), -EINVAL);  /* NUL */
    CHECK_EQ_INT(sm_unescape_octal(S("/a\\777"), out, sizeof out), -EINVAL);  /* > 255 */
    CHECK_EQ_INT(sm_unescape_octal(S("/abcdef"), out, 4), -ENAMETOOLONG);
    CHECK_EQ_INT(sm_unescape_octal(S("/abc"), out, 4), -ENAMETOOLONG);
    CHECK_EQ_INT(sm_unescape_octal(S("/ab"), out, 4), 0);
    CHECK_EQ_INT(sm_unescape_octal(S(""), out, sizeof out), 0);
    CHECK_EQ_STR(out, "");
}

static void test_cpu_max(void)
{
    uint64_t q, p;
    int unl;

    CHECK_EQ_INT(sm_parse_cpu_max(S("250000 100000\n"), &q, &p, &unl), 0);
    CHECK_EQ_INT(q, 250000);
    CHECK_EQ_INT(p, 100000);
    CHECK_EQ_INT(unl, 0);
    CHECK_EQ_INT(sm_parse_cpu_max(S("max 100000\n"), &q, &p, &unl), 0);
    CHECK_EQ_INT(unl, 1);
    CHECK_EQ_INT(p, 100000);
    CHECK_EQ_INT(sm_parse_cpu_max(S("max\n"), &q, &p, &unl), 0);
    CHECK_EQ_INT(unl, 1);
    CHECK_EQ_INT(sm_parse_cpu_max(S("250000\n"), &q, &p, &unl), -EINVAL);
    CHECK_EQ_INT(sm_parse_cpu_max(S("250000 0\n"), &q, &p, &unl), -EINVAL);
    CHECK_EQ_INT(sm_parse_cpu_max(S("0 100000\n"), &q, &p, &unl), -EINVAL);
    CHECK_EQ_INT(sm_parse_cpu_max(S("-1 100000\n"), &q, &p, &unl), -EINVAL);
    CHECK_EQ_INT(sm_parse_cpu_max(S("max x\n"), &q, &p, &unl), -EINVAL);
    CHECK_EQ_INT(sm_parse_cpu_max(S("1 2 3\n"), &q, &p, &unl), -EINVAL);
    CHECK_EQ_INT(sm_parse_cpu_max(S("99999999999999999999 100000\n"), &q, &p, &unl), -ERANGE);
    CHECK_EQ_INT(sm_parse_cpu_max(S(""), &q, &p, &unl), -EINVAL);
    CHECK_EQ_INT(sm_parse_cpu_max(S("maximum 1\n"), &q, &p, &unl), -EINVAL);
    {
        const char good[] = "250000 100000\n";
        for (size_t l = 0; l < sizeof good - 1; l++) {
            char *b = exact(good, l);
            int rc = sm_parse_cpu_max(b, l, &q, &p, &unl);
            /* "250000 1" and friends parse (a short period); the rest fail */
            CHECK(rc == 0 || rc == -EINVAL);
            free(b);
        }
    }
}

static void test_cpulist(void)
{
    unsigned n;

    CHECK_EQ_INT(sm_parse_cpulist(S("0-3,8\n"), &n), 0);
    CHECK_EQ_INT(n, 5);
    CHECK_EQ_INT(sm_parse_cpulist(S("0\n"), &n), 0);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(sm_parse_cpulist(S("0-63,128-191\n"), &n), 0);
    CHECK_EQ_INT(n, 128);
    CHECK_EQ_INT(sm_parse_cpulist(S("\n"), &n), 0);
    CHECK_EQ_INT(n, 0);
    CHECK_EQ_INT(sm_parse_cpulist(S(""), &n), 0);
    CHECK_EQ_INT(n, 0);
    CHECK_EQ_INT(sm_parse_cpulist(S("3-1\n"), &n), -EINVAL);
    CHECK_EQ_INT(sm_parse_cpulist(S("0-3,2\n"), &n), -EINVAL);   /* overlap */
    CHECK_EQ_INT(sm_parse_cpulist(S("0-\n"), &n), -EINVAL);
    CHECK_EQ_INT(sm_parse_cpulist(S("0,\n"), &n), -EINVAL);
    CHECK_EQ_INT(sm_parse_cpulist(S(",0\n"), &n), -EINVAL);
    CHECK_EQ_INT(sm_parse_cpulist(S("0-3:1/2\n"), &n), -EINVAL);
    CHECK_EQ_INT(sm_parse_cpulist(S("a\n"), &n), -EINVAL);
    CHECK_EQ_INT(sm_parse_cpulist(S("0-99999999\n"), &n), -ERANGE);
    CHECK_EQ_INT(sm_parse_cpulist(S("0-99999999999999999999\n"), &n), -ERANGE);
    {
        const char good[] = "0-3,8-11\n";
        for (size_t l = 0; l < sizeof good - 1; l++) {
            char *b = exact(good, l);
            int rc = sm_parse_cpulist(b, l, &n);
            CHECK(rc == 0 || rc == -EINVAL);
            free(b);
        }
    }

    CHECK_EQ_INT(sm_count_stat_cpus(S("cpu  1 2 3 4\ncpu0 1 2 3 4\ncpu1 1 2 3 4\nintr 1\n"), &n),
                 0);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(sm_count_stat_cpus(S("cpu  1 2 3 4\nintr 1\n"), &n), -ENOENT);
    CHECK_EQ_INT(sm_count_stat_cpus(S("cpu0 1 2 3 4\n"), &n), -ENOENT);
    CHECK_EQ_INT(sm_count_stat_cpus(S(""), &n), -ENOENT);
    CHECK_EQ_INT(sm_count_stat_cpus("cpu  1\ncpu0 1", 8, &n), -ENOENT); /* cut before cpu0 */
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

    CHECK_EQ_INT(sm_parse_kv(S(v2stat), "inactive_file", &v), 0);
    CHECK_EQ_INT(v, 2000);
    CHECK_EQ_INT(sm_parse_kv(S(v2stat), "active_file", &v), 0);
    CHECK_EQ_INT(v, 3000); /* not inactive_file's value */
    CHECK_EQ_INT(sm_parse_kv(S(v1stat), "total_inactive_file", &v), 0);
    CHECK_EQ_INT(v, 2500);
    CHECK_EQ_INT(sm_parse_kv(S(v1stat), "inactive_file", &v), 0);
    CHECK_EQ_INT(v, 1);
    CHECK_EQ_INT(sm_parse_kv(S(events), "oom_kill", &v), 0);
    CHECK_EQ_INT(v, 2);
    CHECK_EQ_INT(sm_parse_kv(S(events), "oom", &v), 0);
    CHECK_EQ_INT(v, 3);
    CHECK_EQ_INT(sm_parse_kv(S(oomctl), "oom_kill", &v), 0);
    CHECK_EQ_INT(v, 4);
    CHECK_EQ_INT(sm_parse_kv(S("oom_kill_disable 0\nunder_oom 0\n"), "oom_kill", &v), -ENOENT);
    CHECK_EQ_INT(sm_parse_kv(S(cpustat2), "usage_usec", &v), 0);
    CHECK_EQ_INT(v, 123456);
    CHECK_EQ_INT(sm_parse_kv(S(cpustat2), "throttled_usec", &v), 0);
    CHECK_EQ_INT(v, 4500);
    CHECK_EQ_INT(sm_parse_kv(S(cpustat1), "throttled_time", &v), 0);
    CHECK_EQ_INT(v, 4500000);
    CHECK_EQ_INT(sm_parse_kv(S(cpustat1), "usage_usec", &v), -ENOENT);
    /* malformed */
    CHECK_EQ_INT(sm_parse_kv(S("inactive_file -1\n"), "inactive_file", &v), -EINVAL);
    CHECK_EQ_INT(sm_parse_kv(S("inactive_file 12x\n"), "inactive_file", &v), -EINVAL);
    CHECK_EQ_INT(sm_parse_kv(S("inactive_file\n"), "inactive_file", &v), -ENOENT);
    CHECK_EQ_INT(sm_parse_kv(S("inactive_file 99999999999999999999\n"), "inactive_file", &v),
                 -ERANGE);
    CHECK_EQ_INT(sm_parse_kv(S("oom_kill 1 2\n"), "oom_kill", &v), -EINVAL);
    /* truncated in the middle of the value: parses the digits there are,
     * truncated before the key: absent; never past len */
    for (size_t l = 0; l < sizeof v2stat - 1; l++) {
        char *b = exact(v2stat, l);
        int rc = sm_parse_kv(b, l, "inactive_file", &v);
        CHECK(rc == 0 || rc == -ENOENT || rc == -EINVAL);
        free(b);
    }
    /* single-number files: memory.current, memory.max, memory.limit_in_bytes,
     * cpuacct.usage, memory.peak */
    CHECK_EQ_INT(sm_parse_number(S("9223372036854771712\n"), &v, &unl), 0);
    CHECK_EQ_INT(unl, 0);
    CHECK_EQ_INT(sm_parse_number(S("max\n"), &v, &unl), 0);
    CHECK_EQ_INT(unl, 1);
    CHECK_EQ_INT(sm_parse_number(S("-1\n"), &v, &unl), 0);
    CHECK_EQ_INT(unl, 1);
    CHECK_EQ_INT(sm_parse_number(S("12 34\n"), &v, &unl), -EINVAL);
    CHECK_EQ_INT(sm_parse_number(S("\n"), &v, &unl), -EINVAL);
    CHECK_EQ_INT(sm_parse_number(S("ma"), &v, &unl), -EINVAL);
}

int main(void)
{
    test_proc_cgroup();
    test_mountinfo();
    test_cpu_max();
    test_cpulist();
    test_kv_files();
    return CHECK_DONE();
}
