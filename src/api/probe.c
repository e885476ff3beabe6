/*
 * probe.c — sm_probe_*: one honest look at what this process would record
 * here.  It opens the same collectors the monitor opens, takes a baseline and
 * one sample `interval` later, and keeps every series under this process's
 * own rank with its scope, unit and source, plus the cgroup found (or why
 * none), the GPU status and the lines a monitor would print.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cgroup.h"
#include "internal.h"

struct probe_series {
    char key[320];
    char upstream[96];
    char unit[16];
    char source[160];
    const char *scope;
    double value;
    sm_series_info info; /* what sm_probe_series_at hands out (points at the above) */
};

struct sm_probe {
    sm_ctx ctx;
    sm_cgroup cg;
    int cg_rc;
    size_t n;
    struct probe_series s[SM_POINTS_MAX];
    sm_notes notes;
    char gpu_status[sizeof ((sm_tag *)0)->value]; /* the whole .gpu tag value */
    sm_tags tags; /* the collectors' start tags (sm_probe_tag) */
    const char *mode;
    sm_cgroup_info cginfo; /* what sm_probe_cgroup_info hands out */
};

static void fill_infos(sm_probe *p);

/* The modes in which this identity collects, from the monitor's own rule. */
static const char *collect_mode(const sm_identity *id)
{
    int by_default = sm_collects(id, 0, NULL, 0), all = sm_collects(id, 1, NULL, 0);

    return by_default && all ? "default,all_workers" : by_default ? "default"
           : all ? "all_workers" : "none";
}

int sm_probe_run(double interval_s, sm_probe **out, char *err, size_t errlen)
{
    sm_probe *p;
    sm_collset set;
    sm_points *pts = NULL;
    sm_tags tags = {0};
    int rc;

    *out = NULL;
    if (!(interval_s >= 0) || interval_s > 3600) {
        snprintf(err, errlen, "probe interval must be between 0 and 3600 s");
        return -EINVAL;
    }
    p = calloc(1, sizeof *p);
    pts = calloc(1, sizeof *pts);
    if (!p || !pts) {
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
        goto out;
    }
    rc = sm__ctx_init(&p->ctx);
    if (rc < 0) {
        snprintf(err, errlen, "SCOPEMETER_SYSROOT: %s", strerror(-rc));
        goto out;
    }
    p->mode = collect_mode(&p->ctx.id);
    p->cg_rc = sm__cgroup_resolve(&p->ctx, &p->cg);

    rc = sm__collset_open(&set, &p->ctx, &p->notes);
    if (rc < 0) {
        snprintf(err, errlen, "cannot open collectors: %s", strerror(-rc));
        goto out;
    }
    sm__sleep(interval_s);
    sm__collset_sample(&set, pts);
    sm__collset_tags(&set, SM_TAGS_START, &tags);
    p->tags = tags;

    for (size_t i = 0; i < tags.n; i++)
        if (strcmp(tags.v[i].key, "gpu") == 0)
            snprintf(p->gpu_status, sizeof p->gpu_status, "%s", tags.v[i].value);

    for (size_t i = 0; i < pts->n; i++) {
        struct probe_series *s = &p->s[p->n];
        const sm_point *pt = &pts->v[i];
        if (sm_series_name(pt->key, p->ctx.id.rank, p->ctx.id.node, s->key, sizeof s->key) < 0) {
            /* a family no rule covers: a bug the tests catch; say it here too */
            sm__note(&p->notes, SM_WARN, "series %s has no naming rule; not recorded", pt->key);
            continue;
        }
        snprintf(s->upstream, sizeof s->upstream, "%s", pt->key);
        snprintf(s->unit, sizeof s->unit, "%s", pt->unit);
        snprintf(s->source, sizeof s->source, "%s", pt->source);
        s->scope = sm_series_scope(pt->key);
        s->value = pt->value;
        p->n++;
    }
    /* only now: a point's key and source may live in its collector's state */
    sm__collset_close(&set);
    if (pts->nonfinite)
        sm__note(&p->notes, SM_WARN, "%zu non-finite values skipped (not JSON)", pts->nonfinite);
    if (!p->ctx.id.node[0])
        sm__note(&p->notes, SM_INFO,
                "no node name (SCOPEMETER_NODE_NAME, NODE_NAME, SLURMD_NODENAME unset): "
                "node tag 'unknown', keys without the node tier");
    fill_infos(p);
    *out = p;
    p = NULL;
    rc = 0;
out:
    free(pts);
    free(p);
    return rc;
}

size_t sm_probe_series_count(const sm_probe *p)
{
    return p ? p->n : 0;
}

/* The library-owned views (scopemeter.h: size first, fields only appended),
 * filled once when the probe is complete. */
static void fill_infos(sm_probe *p)
{
    const sm_cgroup *cg = &p->cg;
    sm_cgroup_info *out = &p->cginfo;

    for (size_t i = 0; i < p->n; i++) {
        struct probe_series *s = &p->s[i];
        s->info = (sm_series_info){.size = sizeof s->info, .key = s->key,
                                   .upstream = s->upstream, .value = s->value,
                                   .logged = sm__round1(s->value), .scope = s->scope,
                                   .unit = s->unit, .source = s->source};
    }
    memset(out, 0, sizeof *out);
    out->size = sizeof *out;
    out->found = p->cg_rc == 0;
    out->version = cg->version;
    out->dir = cg->mem_dir[0] ? cg->mem_dir : (cg->cpu_dir[0] ? cg->cpu_dir : NULL);
    out->limiting_dir = cg->mem_limit_dir[0] ? cg->mem_limit_dir : NULL;
    out->cpu_limiting_dir = cg->cpu_limit_dir[0] ? cg->cpu_limit_dir : NULL;
    out->mem_limit_bytes = (double)cg->mem_limit;
    out->cpu_limit_cores = cg->cpu_cores;
    out->why = cg->why;
    out->tag = cg->tag;
}

const sm_series_info *sm_probe_series_at(const sm_probe *p, size_t i)
{
    return p && i < p->n ? &p->s[i].info : NULL;
}

const sm_cgroup_info *sm_probe_cgroup_info(const sm_probe *p)
{
    return p ? &p->cginfo : NULL;
}

const sm_identity *sm_probe_identity(const sm_probe *p)
{
    return &p->ctx.id;
}

const char *sm_probe_collect_mode(const sm_probe *p)
{
    return p->mode;
}

const char *sm_probe_gpu_status(const sm_probe *p)
{
    return p->gpu_status;
}

const char *sm_probe_tag(const sm_probe *p, const char *key)
{
    for (size_t i = 0; p && key && i < p->tags.n; i++)
        if (strcmp(p->tags.v[i].key, key) == 0)
            return p->tags.v[i].value;
    return NULL;
}

size_t sm_probe_note_count(const sm_probe *p)
{
    return p ? p->notes.n : 0;
}

const char *sm_probe_note(const sm_probe *p, size_t i)
{
    return p && i < p->notes.n ? p->notes.line[i] : NULL;
}

void sm_probe_free(sm_probe *p)
{
    free(p);
}
