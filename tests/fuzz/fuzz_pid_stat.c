/*
 * fuzz_pid_stat.c — libFuzzer target for the process tree's readers of
 * /proc/PID/stat (sm__parse_pid_stat: fields after the LAST ')', because comm
 * may hold spaces and parentheses) and /proc/PID/task/TID/children
 * (sm__pid_list_next), docs/design.md §9, and its field 52, the exit status
 * the companion reads (sm__parse_exit_code, cli/cmd_companion.c).
 *
 * Properties beyond "no crash, no sanitizer report": only the documented
 * codes come back; a parsed pid and ppid are in the kernel's range; the
 * list iterator always advances and ends.
 */
#include <errno.h>
#include <stdlib.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *buf = (const char *)data;
    sm_pid_stat st;
    size_t pos = 0, last = 0;
    int rc, pid, n = 0;

    rc = sm__parse_pid_stat(buf, size, &st);
    if (rc != 0 && rc != -EINVAL && rc != -ERANGE)
        abort();
    if (rc == 0 && (st.pid <= 0 || st.ppid < 0))
        abort();

    rc = sm__parse_exit_code(buf, size, &pid);
    if (rc != 0 && rc != -EINVAL && rc != -ERANGE && rc != -ENOENT)
        abort();
    if (rc == 0 && (pid < 0 || pid > 0xffff))
        abort();
    pid = 0;

    while ((rc = sm__pid_list_next(buf, size, &pos, &pid)) == 1) {
        if (pid <= 0 || (n > 0 && pos <= last) || pos > size)
            abort();
        last = pos;
        if (++n > (int)size + 1)
            abort(); /* it must end */
    }
    if (rc != 0 && rc != -EINVAL && rc != -ERANGE)
        abort();
    return 0;
}
