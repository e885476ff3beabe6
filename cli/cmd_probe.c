/*
 * cmd_probe.c — `scopemeter probe [--json] [--interval SECONDS]`: two samples
 * one interval apart, then every series this process would log here with its
 * value, scope, unit and source; the cgroup found and why; the GPU status;
 * one line per missing collector.  --json is one object scripts rely on:
 * {series: [{key, upstream, value, raw, scope, unit, source}], cgroup, rank,
 *  node, collect_mode, gpu, tags, notes, ...}.  A node name is printed and
 * tagged escaped (sm__shown, docs/design.md §2), as the monitor tags it; the
 * JSON's "node" is the name as read (JSON escapes it itself).  A refused
 * identity (RANK=abc: docs/design.md §4) is never shown as rank 0 of its
 * launcher: the text says "rank refused" and why, the JSON's rank fields are
 * null and it has no tags (that process records nothing).
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "internal.h"
#include "scopemeter.h"

static json_t *str_or_null(const char *s)
{
    return s && *s ? json_string(s) : json_null();
}

/* A rank field of the JSON: null for a refused identity, whose numbers are
 * only the safe defaults (rank 0 of 1), not the launcher's. */
static json_t *rank_field(const sm_identity *id, int v)
{
    return sm_identity_invalid(id)[0] ? json_null() : json_integer(v);
}

static int print_json(const sm_probe *p)
{
    const sm_identity *id = sm_probe_identity(p);
    const sm_cgroup_info *cg = sm_probe_cgroup_info(p);
    json_t *root = json_object(), *series = json_array(), *notes = json_array();
    json_t *cgo = json_object(), *tags = json_object();
    char key[300], node[SM_SHOWN_MAX(sizeof id->node)];
    int rc = 1;

    if (!root || !series || !notes || !cgo || !tags)
        goto out;
    for (size_t i = 0; i < sm_probe_series_count(p); i++) {
        const sm_series_info *s = sm_probe_series_at(p, i);
        json_array_append_new(series,
                              json_pack("{s:s, s:s, s:f, s:f, s:s, s:s, s:s}", "key", s->key,
                                        "upstream", s->upstream, "value", s->logged, "raw",
                                        s->value, "scope", s->scope ? s->scope : "unknown", "unit",
                                        s->unit, "source", s->source));
    }
    json_object_set_new(cgo, "found", json_boolean(cg->found));
    json_object_set_new(cgo, "version", cg->version ? json_integer(cg->version) : json_null());
    json_object_set_new(cgo, "dir", str_or_null(cg->dir));
    json_object_set_new(cgo, "limiting_dir", str_or_null(cg->limiting_dir));
    json_object_set_new(cgo, "cpu_limiting_dir", str_or_null(cg->cpu_limiting_dir));
    json_object_set_new(cgo, "memory_limit_bytes",
                        cg->mem_limit_bytes > 0 ? json_real(cg->mem_limit_bytes) : json_null());
    json_object_set_new(cgo, "cpu_limit_cores",
                        cg->cpu_limit_cores > 0 ? json_real(cg->cpu_limit_cores) : json_null());
    json_object_set_new(cgo, "why", str_or_null(cg->why));
    json_object_set_new(cgo, "tag", str_or_null(cg->tag));

    if (!sm_identity_invalid(id)[0]) { /* a refused rank tags nothing */
        snprintf(key, sizeof key, "scopemeter.rank%d.node", sm_identity_rank(id));
        json_object_set_new(tags, key, json_string(sm_identity_node(id)[0]
                                                       ? sm__shown(node, sizeof node, sm_identity_node(id))
                                                       : "unknown"));
        snprintf(key, sizeof key, "scopemeter.rank%d.gpu", sm_identity_rank(id));
        json_object_set_new(tags, key, json_string(sm_probe_gpu_status(p)));
        snprintf(key, sizeof key, "scopemeter.rank%d.cgroup", sm_identity_rank(id));
        json_object_set_new(tags, key, json_string(cg->tag ? cg->tag : ""));
        /* the interconnect's ports and link health, where there are any */
        for (const char *const *t = (const char *const[]){"rdma", "rdma_events", NULL}; *t; t++)
            if (sm_probe_tag(p, *t)) {
                snprintf(key, sizeof key, "scopemeter.rank%d.%s", sm_identity_rank(id), *t);
                json_object_set_new(tags, key, json_string(sm_probe_tag(p, *t)));
            }
    }

    for (size_t i = 0; i < sm_probe_note_count(p); i++)
        json_array_append_new(notes, json_string(sm_probe_note(p, i)));

    json_object_set_new(root, "version", json_string(sm_version()));
    json_object_set_new(root, "rank", rank_field(id, sm_identity_rank(id)));
    json_object_set_new(root, "local_rank", rank_field(id, sm_identity_local_rank(id)));
    json_object_set_new(root, "world_size", rank_field(id, sm_identity_world_size(id)));
    json_object_set_new(root, "local_world_size", rank_field(id, sm_identity_local_world_size(id)));
    json_object_set_new(root, "launcher", json_string(sm_identity_launcher(id)));
    json_object_set_new(root, "node", str_or_null(sm_identity_node(id)));
    json_object_set_new(root, "node_source", str_or_null(sm_identity_node_source(id)));
    json_object_set_new(root, "collect_mode", json_string(sm_probe_collect_mode(p)));
    json_object_set_new(root, "identity_invalid", str_or_null(sm_identity_invalid(id)));
    json_object_set_new(root, "series", series);
    json_object_set_new(root, "cgroup", cgo);
    json_object_set_new(root, "gpu", json_string(sm_probe_gpu_status(p)));
    json_object_set_new(root, "tags", tags);
    json_object_set_new(root, "notes", notes);
    series = cgo = tags = notes = NULL;
    if (json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0) {
        fputc('\n', stdout);
        rc = 0;
    }
out:
    json_decref(root);
    json_decref(series);
    json_decref(notes);
    json_decref(cgo);
    json_decref(tags);
    return rc;
}

static void print_text(const sm_probe *p)
{
    const sm_identity *id = sm_probe_identity(p);
    const char *mode = sm_probe_collect_mode(p);
    const sm_cgroup_info *cg = sm_probe_cgroup_info(p);
    char node[SM_SHOWN_MAX(sizeof id->node)];
    const char *shown = sm_identity_node(id)[0] ? sm__shown(node, sizeof node, sm_identity_node(id))
                                                : "unknown";

    /* a refused identity has no rank: its numbers are the safe defaults */
    if (sm_identity_invalid(id)[0])
        printf("rank refused (launcher %s: the line below says why), node %s\n",
               sm_identity_launcher(id), shown);
    else
        printf("rank %d (local rank %d, world %d, %d per pod, launcher %s), node %s\n", sm_identity_rank(id),
               sm_identity_local_rank(id), sm_identity_world_size(id), sm_identity_local_world_size(id), sm_identity_launcher(id),
               shown);
    if (sm_identity_invalid(id)[0])
        printf("collects: no — %s\n", sm_identity_invalid(id));
    else if (strcmp(mode, "none") == 0)
        printf("collects: no — local rank %d; the pod's local rank 0 reads the same files\n",
               sm_identity_local_rank(id));
    else
        printf("collects in: %s\n", strcmp(mode, "all_workers") == 0
                                        ? "all_workers mode only (rank 0 collects by default)"
                                        : mode);
    if (sm_identity_invalid(id)[0])
        printf("\nnot recorded by this process (its rank is refused); the keys below are named as "
               "rank 0's:");
    printf("\n%-58s %12s  %-7s %-9s %s\n", "SERIES", "VALUE", "UNIT", "SCOPE", "SOURCE");
    for (size_t i = 0; i < sm_probe_series_count(p); i++) {
        const sm_series_info *s = sm_probe_series_at(p, i);
        printf("%-58s %12.1f  %-7s %-9s %s\n", s->key, s->value, s->unit, s->scope, s->source);
    }
    printf("\ncgroup: %s\n", cg->why && *cg->why ? cg->why : "(nothing found)");
    if (cg->found) {
        printf("  version %d, dir %s\n", cg->version, cg->dir ? cg->dir : "-");
        /* the unit of the why line above (cgroup.c): MiB below 1 GiB */
        if (cg->mem_limit_bytes >= 1073741824.0)
            printf("  memory limit %.1f GiB at %s\n", cg->mem_limit_bytes / 1073741824.0,
                   cg->limiting_dir ? cg->limiting_dir : "-");
        else if (cg->mem_limit_bytes > 0)
            printf("  memory limit %.0f MiB at %s\n", cg->mem_limit_bytes / 1048576.0,
                   cg->limiting_dir ? cg->limiting_dir : "-");
        if (cg->cpu_limit_cores > 0)
            printf("  cpu limit %.2f cores at %s\n", cg->cpu_limit_cores,
                   cg->cpu_limiting_dir ? cg->cpu_limiting_dir : "-");
    }
    printf("gpu: %s\n", sm_probe_gpu_status(p));
    if (sm_probe_note_count(p))
        printf("\nnotes:\n");
    for (size_t i = 0; i < sm_probe_note_count(p); i++)
        printf("  %s\n", sm_probe_note(p, i));
}

int cmd_probe(int argc, char **argv)
{
    double interval = 1.0;
    int json = 0, rc;
    sm_probe *p = NULL;
    char err[256] = "";
    const char *detail = NULL;
    struct cli_opt opts[] = {
        {"--interval", CLI_SECONDS, &interval, 0, 3600, 0, NULL, 0},
        {"--json", CLI_FLAG, &json, 0, 0, 1, NULL, 0},
        {"--detail", CLI_STRING, &detail, 0, 0, 0, NULL, 0},
    };

    rc = cli_parse("probe", argc, argv, opts, sizeof opts / sizeof opts[0], 0);
    if (rc == CLI_HELP) {
        printf("usage: scopemeter probe [--json] [--interval SECONDS] [--detail default|full]\n\n"
               "Takes two samples SECONDS apart (default 1, at most 3600) and shows every\n"
               "series this process would record here: key, value, unit, scope and source\n"
               "file; the cgroup found and why; the GPU status; a line for each missing\n"
               "collector.  --detail full: the series of level full too (the GPM, NVLink,\n"
               "clock and ECC series per GPU; as SCOPEMETER_DETAIL=full, docs/series.md\n"
               "\"Levels\").\n");
        return 0;
    }
    if (rc < 0)
        return 2;
    /* the level reaches the collectors as the environment's (sm_ctx) */
    if (detail && (cli_detail("probe", detail) < 0 || setenv("SCOPEMETER_DETAIL", detail, 1) < 0))
        return 2;
    if (sm_probe_run(interval, &p, err, sizeof err) < 0) {
        fprintf(stderr, "scopemeter: probe failed: %s\n", err);
        return 1;
    }
    rc = json ? print_json(p) : (print_text(p), 0);
    sm_probe_free(p);
    return rc;
}
