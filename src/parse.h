/*
 * parse.h — pure parsers of kernel files.  Each takes (buf, len), never reads
 * past len, allocates nothing and returns 0 or a negative errno-style code:
 * -ENOENT for a missing field, -EINVAL for malformed text, -ERANGE for an
 * out-of-range number.  They are fuzzed (tests/fuzz) and unit-tested with
 * malformed and truncated input.
 */
#ifndef SM_PARSE_H
#define SM_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* /proc/stat first line, in USER_HZ ticks (proc(5)).  Old kernels have
 * fewer fields; nfields says how many were present (at least 4). */
typedef struct sm_cpu_times {
    uint64_t f[10]; /* user nice system idle iowait irq softirq steal guest guest_nice */
    int nfields;
} sm_cpu_times;
SM_HIDDEN int sm_parse_proc_stat(const char *buf, size_t len, sm_cpu_times *out);
/* psutil's cpu_percent(): 100 * Δbusy / Δtotal, field deltas clamped at 0,
 * total excludes guest and guest_nice (already in user and nice). */
SM_HIDDEN double sm_cpu_percent(const sm_cpu_times *a, const sm_cpu_times *b);

/* /proc/meminfo: MemTotal and MemAvailable in bytes.  Kernels before 3.14
 * have no MemAvailable: psutil's fallback, MemFree + Buffers + Cached, is used
 * and *estimated set to 1. */
SM_HIDDEN int sm_parse_meminfo(const char *buf, size_t len, uint64_t *total, uint64_t *available,
                               int *estimated);

/* /proc/net/dev: rx and tx bytes summed over every interface, lo included
 * (as psutil.net_io_counters()). */
SM_HIDDEN int sm_parse_net_dev(const char *buf, size_t len, uint64_t *rx, uint64_t *tx);

/* "key value" lines (memory.stat, cpu.stat, memory.events, cpu.stat of v1,
 * memory.oom_control).  The key matches exactly: "active_file" is not
 * "inactive_file".  Returns -ENOENT when the key is absent. */
SM_HIDDEN int sm_parse_kv(const char *buf, size_t len, const char *key, uint64_t *out);

/* A file holding one number and a newline.  "max" sets *unlimited (v2);
 * a negative number (v1 cfs_quota_us = -1) sets *unlimited too. */
SM_HIDDEN int sm_parse_number(const char *buf, size_t len, uint64_t *out, int *unlimited);

/* Parse an unsigned decimal at *p (p < end), advancing *p.  -EINVAL when no
 * digit, -ERANGE on overflow. */
SM_HIDDEN int sm_scan_u64(const char **p, const char *end, uint64_t *out);

#endif
