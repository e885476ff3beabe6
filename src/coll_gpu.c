/* PLACEHOLDER — replaced by the cgroup work (issue 5). */
#include <stdio.h>
#include "internal.h"

static int gpu_open(void *state, const sm_ctx *ctx, sm_opened *res)
{
    (void)state; (void)ctx;
    snprintf(res->msg, sizeof res->msg, "gpu collector not built yet");
    snprintf(res->status, sizeof res->status, "none: not built");
    return SM_ABSENT;
}
static int gpu_sample(void *s, sm_points *o, char *m, size_t l) { (void)s; (void)o; (void)m; (void)l; return 0; }
static void gpu_close(void *s) { (void)s; }
const sm_collector_ops sm_coll_gpu = {
    .name = "gpu", .status_tag = "gpu", .state_size = 1,
    .open = gpu_open, .sample = gpu_sample, .close = gpu_close,
};
