/*
 * identity.c — rank, local rank, world sizes and node name from the
 * launcher's environment (docs/design.md §4), in this order of
 * preference: torchrun / Ray Train, Slurm, Open MPI, MPICH/PMI.
 *
 * Node name: SCOPEMETER_NODE_NAME, NODE_NAME (Kubernetes downward API
 * spec.nodeName), SLURMD_NODENAME.  Never a pod IP, a Ray node IP, a hostname
 * inside Kubernetes or LOCAL_RANK: those look like nodes and are not
 * (docs/design.md §2).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* A launcher variable: 1 when set to a whole number 0..INT_MAX (with
 * allow_suffix the leading count of Slurm's "2(x3)" or "2,1" is taken), 0
 * when unset or empty, -1 when set to anything else.  The grammar is the one
 * number parser's (number.h: " 1", "+1", "-0", "0x1" refused); the line is
 * this file's own, which says what the process does about it. */
static int env_int(const char *name, int *out, int allow_suffix)
{
    const sm_num_spec spec = {name, 0, INT_MAX, 1, 0};
    const char *s = getenv(name), *p = s;
    double v;

    if (!s || !*s)
        return 0;
    if (sm__num_scan(&p, &spec, &v) < 0)
        return -1;
    if (*p && !(allow_suffix && (*p == '(' || *p == ',')))
        return -1;
    *out = (int)v;
    return 1;
}

/* One line saying why this identity cannot be trusted (docs/design.md §4):
 * a malformed launcher variable must not pass for rank 0 of 1, which would
 * write another rank's keys. */
static int invalid(sm_identity *id, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int invalid(sm_identity *id, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(id->invalid, sizeof id->invalid, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

struct launcher {
    const char *name;
    const char *rank, *local_rank, *world, *local_world;
    const char *local_world_alt; /* read when local_world is unset */
};

/* Slurm sets SLURM_NTASKS_PER_NODE only with --ntasks-per-node; it always sets
 * SLURM_TASKS_PER_NODE, "8(x4)" or "8,7" (sbatch(1), srun(1)), whose first
 * count is this node's when the nodes are filled evenly. */
static const struct launcher launchers[] = {
    {"torchrun", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", NULL},
    {"slurm", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE",
     "SLURM_TASKS_PER_NODE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_SIZE", NULL},
    {"pmi", "PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE", "MPI_LOCALNRANKS", NULL},
};

/* The launcher's variables that are set, checked before any is used: one
 * rule whatever else is set.  A malformed one (WORLD_SIZE=0, LOCAL_RANK=abc)
 * is refused even when its rank variable is unset, where the loop below
 * would never read it and the process would pass for rank 0 of 1 (issue 46).
 * Well-formed values without a rank stay unread, as before.  0, or -EINVAL
 * with the line. */
static int malformed(sm_identity *id, const struct launcher *l)
{
    const char *vars[4] = {l->rank, l->local_rank, l->world, l->local_world};
    char shown[64]; /* the value escaped (names.c) and cut: one short line */
    int v;

    if (!getenv(l->local_world) || !*getenv(l->local_world))
        vars[3] = l->local_world_alt; /* read only when local_world is unset */
    for (int i = 0; i < 4; i++) {
        int world = i >= 2, r;
        if (!vars[i])
            continue;
        r = env_int(vars[i], &v, i == 3);
        if (r < 0 || (r > 0 && world && v < 1))
            return invalid(id, "%s='%s' is not a %s; this process records nothing (fix the "
                           "launcher's environment)", vars[i],
                           sm__shown(shown, sizeof shown, getenv(vars[i])),
                           world ? "world size (a whole number >= 1)"
                                 : "rank (a whole number >= 0)");
    }
    return 0;
}

int sm__identity_fill(sm_identity *id)
{
    static const char *node_vars[] = {"SCOPEMETER_NODE_NAME", "NODE_NAME", "SLURMD_NODENAME"};
    int rc = 0;

    if (!id)
        return -EINVAL;
    memset(id, 0, sizeof *id);
    id->world_size = 1;
    id->local_world_size = 1;
    id->launcher = "none";

    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0] && !rc; i++)
        if ((rc = malformed(id, &launchers[i])) < 0)
            id->launcher = launchers[i].name;

    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0] && !rc; i++) {
        const struct launcher *l = &launchers[i];
        int rank, r;
        const char *bad = NULL;

        r = env_int(l->rank, &rank, 0);
        if (r == 0)
            continue;
        id->launcher = l->name;
        if (r < 0)
            bad = l->rank;
        else if (env_int(l->local_rank, &id->local_rank, 0) < 0)
            bad = l->local_rank; /* unset counts as 0: at worst a duplicate */
        else if ((r = env_int(l->world, &id->world_size, 0)) < 0 || (r > 0 && id->world_size < 1))
            bad = l->world;
        else if ((r = env_int(l->local_world, &id->local_world_size, 1)) < 0 ||
                 (r == 0 && l->local_world_alt &&
                  env_int(l->local_world_alt, &id->local_world_size, 1) < 0) ||
                 id->local_world_size < 1)
            bad = r < 0 || !l->local_world_alt ? l->local_world : l->local_world_alt;
        if (bad) {
            char shown[64]; /* the value escaped (names.c) and cut: one short line */
            rc = invalid(id, "%s='%s' is not a %s; this process records nothing (fix the "
                         "launcher's environment)", bad, sm__shown(shown, sizeof shown,
                                                                   getenv(bad)),
                         bad == l->world || bad == l->local_world || bad == l->local_world_alt
                             ? "world size (a whole number >= 1)"
                             : "rank (a whole number >= 0)");
        } else {
            id->rank = rank;
            if (id->rank >= id->world_size && getenv(l->world) && *getenv(l->world))
                rc = invalid(id, "%s=%d is not below %s=%d; this process records nothing "
                             "(fix the launcher's environment)", l->rank, id->rank, l->world,
                             id->world_size);
            else if (id->world_size <= id->rank)
                id->world_size = id->rank + 1; /* no world size given: at least rank + 1 */
            if (!rc && id->local_world_size > id->world_size)
                id->local_world_size = id->world_size;
            if (!rc && getenv(l->local_rank) && *getenv(l->local_rank) &&
                /* not against SLURM_TASKS_PER_NODE's first count: "2,3" is uneven */
                getenv(l->local_world) && *getenv(l->local_world) &&
                id->local_rank >= id->local_world_size && id->local_world_size > 1)
                rc = invalid(id, "%s=%d is not below the local world size %d; this process "
                             "records nothing (fix the launcher's environment)", l->local_rank,
                             id->local_rank, id->local_world_size);
        }
        if (rc) {
            /* untrusted: the safe defaults, and the line in id->invalid */
            id->rank = 0;
            id->local_rank = 0;
            id->world_size = 1;
            id->local_world_size = 1;
        }
        break;
    }

    for (size_t i = 0; i < sizeof node_vars / sizeof node_vars[0]; i++) {
        const char *v = getenv(node_vars[i]);
        if (v && *v) {
            snprintf(id->node, sizeof id->node, "%s", v);
            id->node_source = node_vars[i];
            break;
        }
    }
    return rc;
}

/* ---- the public API: an opaque handle over the same fill ------------------------ */

int sm_identity_read_env(sm_identity **out)
{
    sm_identity *id;

    if (!out)
        return -EINVAL;
    *out = id = malloc(sizeof *id);
    if (!id)
        return -ENOMEM;
    return sm__identity_fill(id);
}

void sm_identity_free(sm_identity *id)
{
    free(id);
}

int sm_identity_rank(const sm_identity *id)
{
    return id ? id->rank : 0;
}

int sm_identity_local_rank(const sm_identity *id)
{
    return id ? id->local_rank : 0;
}

int sm_identity_world_size(const sm_identity *id)
{
    return id ? id->world_size : 1;
}

int sm_identity_local_world_size(const sm_identity *id)
{
    return id ? id->local_world_size : 1;
}

const char *sm_identity_node(const sm_identity *id)
{
    return id ? id->node : "";
}

const char *sm_identity_launcher(const sm_identity *id)
{
    return id && id->launcher ? id->launcher : "none";
}

const char *sm_identity_node_source(const sm_identity *id)
{
    return id ? id->node_source : NULL;
}

const char *sm_identity_invalid(const sm_identity *id)
{
    return id ? id->invalid : "";
}

/* 0.1's entry point: the caller's struct is 0.1's, SM_IDENTITY_V0_SIZE bytes
 * (internal.h), whatever fields the library's has grown since. */
int sm_identity_from_env(sm_identity *id)
{
    sm_identity full;
    int rc;

    if (!id)
        return -EINVAL;
    rc = sm__identity_fill(&full);
    memcpy(id, &full, SM_IDENTITY_V0_SIZE);
    return rc;
}
