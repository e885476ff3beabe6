/*
 * collectors.c — the table of collectors and the set that drives them.
 * Adding a collector is one new file and one row below; the row's ops say
 * what it is (node scope, needs a limit, per rank, GPU, counts devices:
 * internal.h), and nothing here or in the monitor and plan compares rows.
 * The set also owns what its collectors share: the pid map (pidmap.h), fed
 * by the process collector and asked by the GPU collectors, so that no
 * collector learns of another.
 *
 * Failure policy (docs/design.md §6): a collector that cannot open is dropped with
 * one line naming the file; one whose sample fails drops its points for that
 * sample, with one line per failure streak (a file that vanishes and comes
 * back resumes by itself, and says so).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "number.h"
#include "parse.h"
#include "pidmap.h"

static const sm_collector_ops *const table[] = {
    &sm__coll_node_cpu, &sm__coll_node_memory, &sm__coll_rootfs,
    &sm__coll_network,  &sm__coll_container,   &sm__coll_gpu,
    &sm__coll_io,       &sm__coll_amdgpu,   &sm__coll_proc,
    &sm__coll_rdma,     &sm__coll_rapl,
};

int sm__collectors_series(int devices, int container_limits, int *node_scope)
{
    int n = 0, node = 0;

    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const sm_collector_ops *c = table[i];
        int k = c->series + (c->counts_devices ? c->series_per_device * devices : 0);
        if (c->needs_limit && !container_limits)
            continue; /* container_* exist only where a limit does */
        if (c->per_rank)
            continue; /* per recorded rank: sm__process_series */
        if (c->needs_ports)
            continue; /* only where RDMA ports are given: sm__port_series */
        n += k;
        if (c->node_scope)
            node += k;
    }
    if (node_scope)
        *node_scope = node;
    return n;
}

int sm__collectors_series_full(int devices)
{
    int n = 0;

    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i]->counts_devices)
            n += table[i]->series_per_device_full * devices;
    return n;
}

int sm__process_series(void)
{
    int n = 0;

    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i]->per_rank)
            n += table[i]->series;
    return n;
}

int sm__port_series(void)
{
    int n = 0;

    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i]->needs_ports)
            n += table[i]->series;
    return n;
}

int sm__detail_of(const char *word)
{
    if (!word || !*word || strcmp(word, "default") == 0)
        return SM_DETAIL_DEFAULT;
    if (strcmp(word, "full") == 0)
        return SM_DETAIL_FULL;
    return -EINVAL;
}

int sm__ctx_init(sm_ctx *ctx)
{
    const char *root = getenv("SCOPEMETER_SYSROOT");
    char buf[16384];
    uint64_t total, avail;
    int est;
    ssize_t n;

    memset(ctx, 0, sizeof *ctx);
    if (root && *root) {
        size_t len = strlen(root);
        while (len > 1 && root[len - 1] == '/')
            len--;
        if (len == 1 && root[0] == '/')
            len = 0;
        if (len >= sizeof ctx->sysroot)
            return -ENAMETOOLONG;
        memcpy(ctx->sysroot, root, len);
        ctx->sysroot[len] = '\0';
    }
    sm__identity_fill(&ctx->id);
    ctx->detail = sm__detail_of(getenv("SCOPEMETER_DETAIL"));
    if (ctx->detail < 0) {
        sm__log(SM_WARN, "SCOPEMETER_DETAIL='%.32s' is neither default nor full: the default "
                "level", getenv("SCOPEMETER_DETAIL"));
        ctx->detail = SM_DETAIL_DEFAULT;
    }
    /* MemTotal decides whether a memory limit is a limit (cgroup.md); a
     * failure here is reported by the node_memory collector itself. */
    n = sm__read_file(ctx, "/proc/meminfo", buf, sizeof buf);
    if (n >= 0 && sm__parse_meminfo(buf, (size_t)n, &total, &avail, &est) == 0)
        ctx->mem_total = total;
    return 0;
}

void sm__emit(sm_points *p, const char *key, double value, const char *unit, const char *source,
             int agg)
{
    if (!isfinite(value)) {
        p->nonfinite++;
        return;
    }
    if (p->n >= SM_POINTS_MAX)
        return;
    p->v[p->n++] = (sm_point){key, unit, source, value, agg, SM_RANK_OWN};
}

void sm__emit_rank(sm_points *p, int rank, const char *key, double value, const char *unit,
                  const char *source, int agg)
{
    size_t n = p->n;

    sm__emit(p, key, value, unit, source, agg);
    if (p->n > n)
        p->v[n].rank = rank;
}

/* MLflow's monitor logs round(mean, 1) in Python, which rounds the exact
 * binary value to the nearest tenth, ties to even.  glibc's printf converts
 * the exact binary value with the same rule, and strtod returns the double
 * nearest to that decimal — the same double Python's round() returns (both
 * use the current locale's decimal point, so the pair stays consistent).
 *
 * That pair was a window's costliest step (bench/README.md), so below
 * 2^48 the same result is computed: k = the exact a*10 rounded to an
 * integer, ties to even, and k / 10.0 — IEEE division is correctly rounded,
 * so it is the double nearest to the decimal k/10, what strtod returns
 * (k < 2^53 is exact).  a*10 = a*8 + a*2, both exact; Fast2Sum gives their
 * rounded sum y and its exact error e (|a*8| >= |a*2|, round to nearest).
 * With f = floor(y) (sm__floor: no libm), d = (y - f) - 0.5 is exact near
 * the half (a multiple of ulp(y) <= 0.5, or y < 0.25 and far from it), and
 * a non-zero d is at least ulp(y) > |e|: the side of the half is d's sign,
 * or e's when d is 0, an exact tie (e == 0 too) going to the even k.
 * tests/c/test_round1.c holds it to the printf pair on tens of millions of
 * values, ties and their neighbours among them; test_round1.py to Python's
 * round(). */
double sm__round1(double v)
{
    char buf[512];
    double a = fabs(v);

    if (!isfinite(v))
        return v;
    if (a < 0x1p48) {
        double a8 = a * 8.0, a2 = a * 2.0, y = a8 + a2, e = a2 - (y - a8);
        double f = sm__floor(y), d = (y - f) - 0.5;
        int up = d > 0 || (d == 0 && (e > 0 || (e == 0 && ((uint64_t)f & 1))));
        return copysign((f + up) / 10.0, v);
    }
    snprintf(buf, sizeof buf, "%.1f", v);
    return strtod(buf, NULL);
}

/* Two rows with one status tag (gpu: NVIDIA and AMD) make one tag: a
 * "none: ..." gives way to a real value, two real values are joined, two
 * "none:" values too. */
static void status_add(sm_tags *t, const char *key, const char *value)
{
    for (size_t i = 0; i < t->n; i++) {
        char *old = t->v[i].value;
        int old_none = strncmp(old, "none:", 5) == 0, new_none = strncmp(value, "none:", 5) == 0;
        if (strcmp(t->v[i].key, key) != 0)
            continue;
        if (old_none && !new_none)
            snprintf(old, sizeof t->v[i].value, "%s", value);
        else if (old_none == new_none)
            sm__line_join(old, sizeof t->v[i].value, "%s", new_none ? value + 6 : value);
        return;
    }
    sm__tag_add(t, key, "%s", value);
}

int sm__collset_open(sm_collset *s, const sm_ctx *ctx, sm_notes *notes)
{
    unsigned gpu_next = 0;
    size_t gpu_absent_note = SIZE_MAX; /* "no /dev/nvidia device" when another vendor's GPU
                                          attached after it: dropped below */
    sm_ctx c;

    memset(s, 0, sizeof *s);
    /* one pid map for the set: the process collector feeds it, the GPU
     * collectors ask it (pidmap.h) */
    s->pids = sm__zalloc(sizeof *s->pids);
    if (!s->pids)
        return -ENOMEM;
    sm__pidmap_init(s->pids, ctx);
    c = *ctx;
    c.pids = s->pids;
    ctx = &c;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const sm_collector_ops *ops = table[i];
        sm_opened res;
        void *state = sm__zalloc(ops->state_size ? ops->state_size : 1); /* sparse */
        int rc;

        if (!state) {
            sm__collset_close(s);
            return -ENOMEM;
        }
        memset(&res, 0, sizeof res);
        res.gpu_index_base = gpu_next;
        rc = ops->open(state, ctx, &res);
        if (rc == 0 && res.gpu_index_next > gpu_next)
            gpu_next = res.gpu_index_next;
        if (ops->status_tag && res.status[0])
            status_add(&s->status, ops->status_tag, res.status);
        if (rc != 0) {
            sm__zfree(state);
            /* a failure under a sysroot names it: the file that could not be
             * read is the fake machine's, not this one's */
            if (res.msg[0] && rc < 0 && ctx->sysroot[0] &&
                (strncmp(res.msg, "cannot ", 7) == 0 || strncmp(res.msg, "cgroup: cannot ", 15) == 0))
                sm__note(notes, SM_WARN, "%s (paths under SCOPEMETER_SYSROOT=%s)", res.msg,
                        ctx->sysroot);
            else if (res.msg[0]) {
                if (rc == SM_ABSENT && ops->gpu && gpu_absent_note == SIZE_MAX &&
                    notes->n < SM_NOTES_MAX)
                    gpu_absent_note = notes->n;
                sm__note(notes, rc == SM_ABSENT ? SM_INFO : SM_WARN, "%s", res.msg);
            }
            continue;
        }
        if (res.msg[0]) /* attached, with something worth saying */
            sm__note(notes, SM_INFO, "%s", res.msg);
        s->c[s->n].ops = ops;
        s->c[s->n].state = state;
        s->c[s->n].failing = 0;
        s->n++;
        /* one vendor's GPUs attached: another vendor's "no device: gpu_*
         * series absent" would say the opposite of what is logged */
        if (ops->gpu && gpu_absent_note < notes->n) {
            memmove(&notes->level[gpu_absent_note], &notes->level[gpu_absent_note + 1],
                    (notes->n - gpu_absent_note - 1) * sizeof notes->level[0]);
            memmove(&notes->line[gpu_absent_note], &notes->line[gpu_absent_note + 1],
                    (notes->n - gpu_absent_note - 1) * sizeof notes->line[0]);
            notes->n--;
            gpu_absent_note = SIZE_MAX;
        }
    }
    return (int)s->n;
}

int sm__collset_sample(sm_collset *s, sm_points *out)
{
    int failed = 0;

    for (size_t i = 0; i < s->n; i++) {
        char msg[300] = "";
        size_t mark = out->n;
        int rc = s->c[i].ops->sample(s->c[i].state, out, msg, sizeof msg);

        if (rc < 0) {
            out->n = mark; /* a failed sample contributes nothing */
            failed++;
            if (!s->c[i].failing)
                sm__log(SM_WARN, "%s: %s; its series are skipped until it recovers",
                       s->c[i].ops->name, msg[0] ? msg : strerror(-rc));
            s->c[i].failing = 1;
        } else if (s->c[i].failing) {
            sm__log(SM_INFO, "%s: recovered", s->c[i].ops->name);
            s->c[i].failing = 0;
        }
    }
    return failed;
}

void sm__collset_tags(sm_collset *s, int phase, sm_tags *out)
{
    if (phase == SM_TAGS_START)
        for (size_t i = 0; i < s->status.n; i++)
            sm__tag_add(out, s->status.v[i].key, "%s", s->status.v[i].value);
    for (size_t i = 0; i < s->n; i++)
        if (s->c[i].ops->tags)
            s->c[i].ops->tags(s->c[i].state, phase, out);
}

void sm__collset_close(sm_collset *s)
{
    for (size_t i = 0; i < s->n; i++) {
        s->c[i].ops->close(s->c[i].state);
        sm__zfree(s->c[i].state);
    }
    s->n = 0;
    sm__zfree(s->pids);
    s->pids = NULL;
}
