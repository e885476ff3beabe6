/* PLACEHOLDER — replaced by the cgroup work (issue 2). */
#include <stdio.h>
#include "internal.h"

static int ctr_open(void *state, const sm_ctx *ctx, sm_opened *res)
{
    (void)state; (void)ctx;
    snprintf(res->msg, sizeof res->msg, "container collector not built yet");
    snprintf(res->status, sizeof res->status, "none: not built");
    return SM_ABSENT;
}
static int ctr_sample(void *s, sm_points *o, char *m, size_t l) { (void)s; (void)o; (void)m; (void)l; return 0; }
static void ctr_close(void *s) { (void)s; }
const sm_collector_ops sm_coll_container = {
    .name = "container", .status_tag = "cgroup", .state_size = 1,
    .open = ctr_open, .sample = ctr_sample, .close = ctr_close,
};
