/*
 * fuzz_proc_cgroup.c — libFuzzer target for sm__cgroup_next() over a whole
 * /proc/self/cgroup, and sm__list_has() on every controller list it returns
 * (the controllers cgroup.c looks for).
 *
 * Checks: every field lies inside the buffer, paths are absolute, *pos only
 * moves forward, the walk ends.
 */
#include <errno.h>
#include <stdlib.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static const char *const ctrls[] = {"memory", "cpu", "cpuacct", "cpuset", "name=systemd", "",
                                    "cpu,cpuacct"};

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *buf = (const char *)data, *end = buf + size;
    size_t pos = 0, prev = 0;
    sm_cg_entry e;
    int rc;

    while ((rc = sm__cgroup_next(buf, size, &pos, &e)) == 1) {
        if (pos <= prev || pos > size)
            abort();
        prev = pos;
        if (e.ctrl < buf || e.ctrl + e.ctrl_len > end || e.path < buf ||
            e.path + e.path_len > end || e.path_len == 0 || e.path[0] != '/' ||
            (e.deleted != 0 && e.deleted != 1))
            abort();
        for (size_t i = 0; i < sizeof ctrls / sizeof ctrls[0]; i++) {
            int has = sm__list_has(e.ctrl, e.ctrl_len, ctrls[i]);
            if (has != 0 && has != 1)
                abort();
        }
    }
    if (rc != 0 && rc != -EINVAL)
        abort();
    /* the list matcher on raw input too (commas anywhere, empty items) */
    (void)sm__list_has(buf, size, "cpu");
    return 0;
}
