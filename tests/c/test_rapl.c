/* test_rapl.c — the RAPL parsers (src/parse/parse_rapl.c) on the kernel's
 * formats and malformed text, the wrap-safe step fed numbers, and the CPU
 * package energy collector (src/collect/coll_rapl.c) on copies of the fixture
 * machines (tests/fixtures/rapl-*, written by tests/fixtures/make-rapl-fixtures)
 * whose energy_uj files the test moves between samples: a wrap counted once,
 * a bad reading that waits for the next good one, only the package zones
 * (no subzone, psys or MMIO twin), and no powercap at all. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"
#include "parse.h"

#define MAX 262143328850ull /* the fixtures' max_energy_range_uj */

static char fixtures[2048], tmp[64];

static void test_parsers(void)
{
    uint64_t v = 7;
    char label[24] = "x";

    CHECK_EQ_INT(sm__parse_rapl_uj("262143328850\n", 13, &v), 0);
    CHECK(v == MAX);
    CHECK_EQ_INT(sm__parse_rapl_uj("0\n", 2, &v), 0);
    CHECK(v == 0);
    CHECK_EQ_INT(sm__parse_rapl_uj("42", 2, &v), 0); /* cut before its newline */
    CHECK(v == 42);
    CHECK_EQ_INT(sm__parse_rapl_uj("18446744073709551616\n", 21, &v), -ERANGE);
    CHECK_EQ_INT(sm__parse_rapl_uj("-1\n", 3, &v), -EINVAL); /* %lld of 2^64 - 1 */
    CHECK_EQ_INT(sm__parse_rapl_uj("", 0, &v), -EINVAL);
    CHECK_EQ_INT(sm__parse_rapl_uj("\n", 1, &v), -EINVAL);
    CHECK_EQ_INT(sm__parse_rapl_uj("12 \n", 4, &v), -EINVAL);
    CHECK_EQ_INT(sm__parse_rapl_uj("007\n", 4, &v), -EINVAL);
    CHECK_EQ_INT(sm__parse_rapl_uj("1\n2\n", 4, &v), -EINVAL);
    CHECK(v == 42); /* untouched by a refusal */

    CHECK_EQ_INT(sm__parse_rapl_name("package-0\n", 10, label, sizeof label), 1);
    CHECK_EQ_STR(label, "package0");
    CHECK_EQ_INT(sm__parse_rapl_name("package-1-die-3\n", 16, label, sizeof label), 1);
    CHECK_EQ_STR(label, "package1_die3");
    CHECK_EQ_INT(sm__parse_rapl_name("package-65535-die-65535\n", 24, label, sizeof label), 1);
    CHECK_EQ_STR(label, "package65535_die65535");
    CHECK_EQ_INT(sm__parse_rapl_name("dram\n", 5, label, sizeof label), 0);
    CHECK_EQ_INT(sm__parse_rapl_name("psys\n", 5, label, sizeof label), 0);
    CHECK_EQ_INT(sm__parse_rapl_name("core\n", 5, label, sizeof label), 0);
    CHECK_EQ_INT(sm__parse_rapl_name("package-\n", 9, label, sizeof label), 0);
    CHECK_EQ_INT(sm__parse_rapl_name("package-01\n", 11, label, sizeof label), 0);
    CHECK_EQ_INT(sm__parse_rapl_name("package-0-die-\n", 15, label, sizeof label), 0);
    CHECK_EQ_INT(sm__parse_rapl_name("package-0x\n", 11, label, sizeof label), 0);
    CHECK_EQ_INT(sm__parse_rapl_name("package-65536\n", 14, label, sizeof label), 0);
    CHECK_EQ_STR(label, "package65535_die65535"); /* untouched by a 0 */
    CHECK_EQ_INT(sm__parse_rapl_name("\n", 1, label, sizeof label), -EINVAL);
    CHECK_EQ_INT(sm__parse_rapl_name("package-0\x01\n", 11, label, sizeof label), -EINVAL);
    CHECK_EQ_INT(sm__parse_rapl_name("package-10\n", 11, label, 9), -ENAMETOOLONG);
}

/* The step between readings, fed numbers: a wrap is counted once, through
 * max_energy_range_uj, and never exceeds it. */
static void test_delta(void)
{
    CHECK(sm__rapl_delta(100, 250, MAX) == 150);
    CHECK(sm__rapl_delta(250, 250, MAX) == 0);
    /* a reading below the last: the counter wrapped once */
    CHECK(sm__rapl_delta(262000000000ull, 1000000000ull, MAX) == 143328850ull + 1000000000ull);
    CHECK(sm__rapl_delta(MAX, 0, MAX) == 0);
    CHECK(sm__rapl_delta(1, 0, MAX) == MAX - 1);
    /* a last reading above the range (never the kernel's): now alone */
    CHECK(sm__rapl_delta(MAX + 5, 7, MAX) == 7);
}

static void copy_fx(const char *name, char *root, size_t cap)
{
    char cmd[6000];

    snprintf(root, cap, "%s/%s", tmp, name);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s/%s' '%s'", root, fixtures, name, root);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot copy %s\n", name);
        exit(2);
    }
}

/* Rewrites a zone's energy_uj in place: the collector keeps it open. */
static void put(const char *root, const char *zone, const char *text)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof path, "%s/sys/class/powercap/%s/energy_uj", root, zone);
    f = fopen(path, "r+");
    if (!f || ftruncate(fileno(f), 0) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
    fputs(text, f);
    fclose(f);
}

static void *open_at(const char *root, int *rc, sm_opened *res)
{
    sm_ctx ctx;
    void *state = calloc(1, sm__coll_rapl.state_size);

    memset(&ctx, 0, sizeof ctx);
    snprintf(ctx.sysroot, sizeof ctx.sysroot, "%s", root);
    memset(res, 0, sizeof *res);
    *rc = sm__coll_rapl.open(state, &ctx, res);
    if (*rc != 0) {
        free(state);
        return NULL;
    }
    return state;
}

static void sample(void *state)
{
    sm_points pts;
    char msg[300] = "";

    pts.n = 0;
    CHECK_EQ_INT(sm__coll_rapl.sample(state, &pts, msg, sizeof msg), 0);
    CHECK(pts.n == 0); /* a tag, no series */
}

static const char *end_tag(void *state, sm_tags *t)
{
    memset(t, 0, sizeof *t);
    sm__coll_rapl.tags(state, SM_TAGS_END, t);
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->v[i].key, "node_cpu_energy") == 0)
            return t->v[i].value;
    return "(absent)";
}

static void test_two_packages(void)
{
    char root[256];
    sm_opened res;
    sm_tags t;
    int rc;
    void *s;

    copy_fx("rapl-two-packages", root, sizeof root);
    s = open_at(root, &rc, &res);
    CHECK_EQ_INT(rc, 0);
    if (!s)
        return;
    CHECK(strstr(res.msg, "package0, package1") != NULL);
    CHECK(strstr(res.msg, "psys") == NULL && strstr(res.msg, "dram") == NULL);
    memset(&t, 0, sizeof t);
    sm__coll_rapl.tags(s, SM_TAGS_START, &t);
    sm__coll_rapl.tags(s, SM_TAGS_WINDOW, &t);
    CHECK(t.n == 0); /* an end tag alone */

    /* package0 +3.6e9 uJ = 0.001 kWh; package1 wraps: 262000000000 ->
     * 1000000000 is (MAX - 262000000000) + 1000000000 = 1143328850 uJ */
    put(root, "intel-rapl:0", "123456789012\n");
    sample(s);
    put(root, "intel-rapl:0", "127056789012\n");
    put(root, "intel-rapl:1", "1000000000\n");
    sample(s);
    /* a bad reading waits: its step is added by the next good one */
    put(root, "intel-rapl:1", "garbage\n");
    sample(s);
    put(root, "intel-rapl:1", "1360000000000\n"); /* above the range: refused too */
    sample(s);
    put(root, "intel-rapl:1", "4600000000\n"); /* +3.6e9 uJ since 1000000000 */
    sample(s);
    /* the subzone and psys move: never counted */
    put(root, "intel-rapl:0:0", "9999999999\n");
    put(root, "intel-rapl:2", "1\n");
    CHECK_EQ_STR(end_tag(s, &t), "package0 kwh=0.001000; package1 kwh=0.001318; "
                                 "total_kwh=0.002318");
    sm__coll_rapl.close(s);
    free(s);
}

static void test_client_and_none(void)
{
    char root[256];
    sm_opened res;
    sm_tags t;
    int rc;
    void *s;

    copy_fx("rapl-client", root, sizeof root);
    s = open_at(root, &rc, &res);
    CHECK_EQ_INT(rc, 0);
    if (s) {
        /* the MMIO twin of package-0 would count it twice */
        put(root, "intel-rapl-mmio:0", "9000000000\n");
        put(root, "intel-rapl:0", "8600000000\n"); /* +3.6e9 */
        CHECK_EQ_STR(end_tag(s, &t), "package0 kwh=0.001000"); /* one package: no total */
        sm__coll_rapl.close(s);
        free(s);
    }

    copy_fx("rapl-none", root, sizeof root);
    s = open_at(root, &rc, &res);
    CHECK_EQ_INT(rc, SM_ABSENT);
    CHECK(strstr(res.msg, "no RAPL package zone") != NULL);
    CHECK(strstr(res.msg, "node_cpu_energy absent") != NULL);
    CHECK(s == NULL);
}

int main(void)
{
    const char *fx = getenv("SM_FIXTURES");
    char cmd[200];

    if (!fx) {
        fprintf(stderr, "SM_FIXTURES unset\n");
        return 2;
    }
    snprintf(fixtures, sizeof fixtures, "%s", fx);
    snprintf(tmp, sizeof tmp, "/tmp/test_rapl.XXXXXX");
    if (!mkdtemp(tmp))
        return 2;
    test_parsers();
    test_delta();
    test_two_packages();
    test_client_and_none();
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", tmp);
    return CHECK_DONE();
}
