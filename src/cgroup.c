/* PLACEHOLDER — replaced by the cgroup work (issue 2). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "cgroup.h"

int sm_cgroup_resolve(const sm_ctx *ctx, sm_cgroup *cg)
{
    (void)ctx;
    memset(cg, 0, sizeof *cg);
    snprintf(cg->why, sizeof cg->why, "cgroup resolution not built yet");
    snprintf(cg->tag, sizeof cg->tag, "none: not built");
    return -ENOSYS;
}
