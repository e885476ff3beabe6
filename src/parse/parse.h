/*
 * parse.h — pure parsers of kernel files.  Each takes (buf, len), never reads
 * past len, allocates nothing and returns 0 or a negative errno-style code:
 * -ENOENT for a missing field, -EINVAL for malformed text, -ERANGE for an
 * out-of-range number.  They are fuzzed (tests/fuzz) and unit-tested with
 * malformed and truncated input.
 */
#ifndef SM_PARSE_H
#define SM_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifndef SM_HIDDEN /* as internal.h: the bottom layer includes nothing of the core */
#define SM_HIDDEN __attribute__((visibility("hidden")))
#endif

/* /proc/stat first line, in USER_HZ ticks (proc(5)).  Old kernels have
 * fewer fields; nfields says how many were present (at least 4). */
typedef struct sm_cpu_times {
    uint64_t f[10]; /* user nice system idle iowait irq softirq steal guest guest_nice */
    int nfields;
} sm_cpu_times;
SM_HIDDEN int sm__parse_proc_stat(const char *buf, size_t len, sm_cpu_times *out);
/* psutil's cpu_percent(): 100 * Δbusy / Δtotal, field deltas clamped at 0,
 * total excludes guest and guest_nice (already in user and nice). */
SM_HIDDEN double sm__cpu_percent(const sm_cpu_times *a, const sm_cpu_times *b);

/* /proc/meminfo: MemTotal and MemAvailable in bytes.  Kernels before 3.14
 * have no MemAvailable: psutil's fallback, MemFree + Buffers + Cached, is used
 * and *estimated set to 1. */
SM_HIDDEN int sm__parse_meminfo(const char *buf, size_t len, uint64_t *total, uint64_t *available,
                               int *estimated);

/* /proc/net/dev: rx and tx bytes summed over every interface, lo included
 * (as psutil.net_io_counters()). */
SM_HIDDEN int sm__parse_net_dev(const char *buf, size_t len, uint64_t *rx, uint64_t *tx);

/* "key value" lines (memory.stat, cpu.stat, memory.events, cpu.stat of v1,
 * memory.oom_control).  The key matches exactly: "active_file" is not
 * "inactive_file".  Returns -ENOENT when the key is absent. */
SM_HIDDEN int sm__parse_kv(const char *buf, size_t len, const char *key, uint64_t *out);

/* A file holding one number and a newline.  "max" sets *unlimited (v2);
 * a negative number (v1 cfs_quota_us = -1) sets *unlimited too. */
SM_HIDDEN int sm__parse_number(const char *buf, size_t len, uint64_t *out, int *unlimited);

/* Parse an unsigned decimal at *p (p < end), advancing *p.  -EINVAL when no
 * digit, -ERANGE on overflow. */
SM_HIDDEN int sm__scan_u64(const char **p, const char *end, uint64_t *out);

/* ---- a process (coll_proc.c, docs/design.md §9) ------------------------------ */

/* /proc/PID/stat (proc(5), fs/proc/array.c do_task_stat): "pid (comm) S
 * ppid ...".  comm is what the process chose (prctl, the executable's
 * name) and may hold spaces and parentheses, so the fields are read after
 * the LAST ')'.  Times in clock ticks (sysconf(_SC_CLK_TCK)); cutime and
 * cstime are the waited-for children's, a negative value reads as 0. */
typedef struct sm_pid_stat {
    int pid, ppid;
    char state;
    uint64_t minflt, majflt;               /* fields 10, 12: the page faults it took */
    uint64_t utime, stime, cutime, cstime; /* fields 14-17 */
    uint64_t starttime;                    /* field 22: ticks after boot */
    uint64_t rss_pages;                    /* field 24 (0 when the line stops before it) */
} sm_pid_stat;
SM_HIDDEN int sm__parse_pid_stat(const char *buf, size_t len, sm_pid_stat *out);

/* Field 52 of /proc/PID/stat, exit_code (fs/proc/array.c, kernel >= 3.5): the
 * wait status of a process that has exited and is not yet reaped (a zombie;
 * 0 while it runs, and 0 when the reader may not ptrace it).  0; -ENOENT
 * when the line has fewer fields; -EINVAL, -ERANGE when malformed. */
SM_HIDDEN int sm__parse_exit_code(const char *buf, size_t len, int *status);

/* A "Key:   N kB" line (/proc/PID/smaps_rollup "Pss:", /proc/PID/status
 * "VmRSS:"): N in kB.  key includes its colon, so "Pss:" is neither
 * "SwapPss:" nor "Pss_Anon:".  -ENOENT when absent. */
SM_HIDDEN int sm__parse_kb(const char *buf, size_t len, const char *key, uint64_t *kb);

/* /proc/PID/task/TID/children: pids separated by spaces ("123 456 ").
 * Iterator: *pos starts at 0; 1 with the next pid, 0 at the end, -EINVAL
 * on anything else than digits and white space, -ERANGE for a pid above
 * INT_MAX or 0. */
SM_HIDDEN int sm__pid_list_next(const char *buf, size_t len, size_t *pos, int *pid);

/* /proc/PID/environ (proc(5)): the environment the process was started
 * with, "NAME=value" entries each ending in a NUL (the last one may lack
 * it when the read was cut).  A variable that holds a decimal number (the
 * launchers' RANK): 0 with *out, -ENOENT when absent, -EINVAL when its
 * value is not a plain decimal, -ERANGE above INT_MAX. */
SM_HIDDEN int sm__environ_int(const char *buf, size_t len, const char *name, int *out);

/* The first entry of a comma-separated list (the *_VISIBLE_DEVICES
 * variables), blanks around it trimmed, cut to cap - 1 bytes. */
SM_HIDDEN void sm__list_entry(const char *v, char *out, size_t cap);

/* The rule of every *_VISIBLE_DEVICES list (CUDA's, which ROCm's runtimes
 * follow): its entries in order, each mapped by match(entry, arg) to a
 * device index (< 0 or >= n: it names no device); the list ends at the first
 * entry that names no device, which stop receives ("" when all did).  Sets
 * chosen[i] for every device named; the vendor's collector keeps those. */
typedef int (*sm_visible_match)(const char *entry, void *arg);
SM_HIDDEN void sm__visible_walk(const char *list, sm_visible_match match, void *arg, char *chosen,
                               size_t n, char *stop, size_t stoplen);

/* ---- amdgpu files (parse_gpu.c) ------------------------------------------------ */
/* pp_dpm_sclk, pp_dpm_mclk: the MHz of the level marked current ("*").
 * -ENOENT when no line is marked, -EINVAL on a line of another shape. */
SM_HIDDEN int sm__parse_pp_dpm(const char *buf, size_t len, uint64_t *mhz);

/* /proc/PID/fdinfo/FD of a DRM file (Documentation/gpu/drm-usage-stats.rst):
 * the keys the per-process VRAM needs.  0 with out filled when the file has
 * drm-driver; -ENOENT when it has not (not a DRM file: most fds); -EINVAL
 * when a key it reads has a value of another shape; -ERANGE when the bytes
 * overflow.  vram_key says which key gave vram_bytes: drm-resident-vram
 * first (what is in VRAM now), else the older drm-memory-vram, else
 * drm-total-vram; SM_DRM_VRAM_NONE when none (a kernel before the memory
 * keys, or a driver without a VRAM region). */
enum { SM_DRM_VRAM_NONE, SM_DRM_VRAM_RESIDENT, SM_DRM_VRAM_MEMORY, SM_DRM_VRAM_TOTAL };
typedef struct sm_drm_fdinfo {
    char driver[32];       /* drm-driver, cut to fit */
    char pdev[32];         /* drm-pdev ("0000:0b:00.0"), "" when absent */
    uint64_t client_id;
    int has_client_id;
    uint64_t vram_bytes;
    int vram_key;
} sm_drm_fdinfo;
SM_HIDDEN int sm__parse_drm_fdinfo(const char *buf, size_t len, sm_drm_fdinfo *out);

/* ---- RDMA files of sysfs (parse_rdma.c) ----------------------------------------- */
/* A counter of ports/N/counters/ or ports/N/hw_counters/: a decimal and a
 * newline (drivers/infiniband/core/sysfs.c).  -EINVAL for any other text,
 * -ERANGE above 64 bits. */
SM_HIDDEN int sm__parse_rdma_counter(const char *buf, size_t len, uint64_t *out);
/* ports/N/state, ports/N/phys_state: "4: ACTIVE", "5: LinkUp": the number,
 * and the name cut to namecap - 1 bytes (namecap 0: not copied). */
SM_HIDDEN int sm__parse_rdma_state(const char *buf, size_t len, unsigned *num, char *name,
                                   size_t namecap);
/* /sys/class/infiniband_verbs/uverbsN/ibdev: the device name ("mlx5_0"), one
 * path segment; -EINVAL, -ENAMETOOLONG otherwise. */
SM_HIDDEN int sm__parse_rdma_ibdev(const char *buf, size_t len, char *out, size_t cap);

/* ---- RAPL files of powercap (parse_rapl.c) ------------------------------------ */
/* energy_uj, max_energy_range_uj: a decimal and a newline
 * (drivers/powercap/powercap_sys.c).  -EINVAL for any other text, -ERANGE
 * above 64 bits. */
SM_HIDDEN int sm__parse_rapl_uj(const char *buf, size_t len, uint64_t *out);
/* A zone's name: 1 for a CPU package ("package-0" -> "package0",
 * "package-1-die-0" -> "package1_die0" in label), 0 for another domain
 * ("dram", "psys", ...), -EINVAL for empty text or a control byte,
 * -ENAMETOOLONG when cap cannot hold the label. */
SM_HIDDEN int sm__parse_rapl_name(const char *buf, size_t len, char *label, size_t cap);
/* The energy between two readings of a counter that wraps after max: one
 * wrap counted once (now < last), never more than max. */
SM_HIDDEN uint64_t sm__rapl_delta(uint64_t last, uint64_t now, uint64_t max);

/* ---- cgroup files (parse_cgroup.c) -------------------------------------------
 * Iterators: *pos starts at 0; each call returns 1 with the next entry, 0 at
 * the end, -EINVAL on a malformed line (*pos is then left at that line).
 * Entries point into buf; nothing is copied or allocated. */

/* One line of /proc/self/cgroup: "hierarchy-id:controllers:path".  v2 is
 * hier 0 with ctrl_len 0; v1 lists controllers ("cpu,cpuacct") or a named
 * hierarchy ("name=systemd").  A trailing " (deleted)" is cut off the path
 * and sets deleted. */
typedef struct sm_cg_entry {
    unsigned hier;
    const char *ctrl;
    size_t ctrl_len;
    const char *path;
    size_t path_len;
    int deleted;
} sm_cg_entry;
SM_HIDDEN int sm__cgroup_next(const char *buf, size_t len, size_t *pos, sm_cg_entry *out);

/* 1 when the comma-separated list holds name exactly ("cpu" is not "cpuset"). */
SM_HIDDEN int sm__list_has(const char *list, size_t len, const char *name);

/* One line of /proc/self/mountinfo.  root and point are still escaped
 * (sm__unescape_octal); super is everything after the source field. */
typedef struct sm_mount {
    const char *root;
    size_t root_len;
    const char *point;
    size_t point_len;
    const char *fstype;
    size_t fstype_len;
    const char *super;
    size_t super_len;
} sm_mount;
SM_HIDDEN int sm__mountinfo_next(const char *buf, size_t len, size_t *pos, sm_mount *out);

/* Undo mountinfo's \ooo escapes (\040 space, \011 tab, \012 newline, \134
 * backslash) into out (NUL-terminated).  -EINVAL on a bad escape or \000,
 * -ENAMETOOLONG when out is too small. */
SM_HIDDEN int sm__unescape_octal(const char *s, size_t len, char *out, size_t outlen);

/* v2 cpu.max: "QUOTA PERIOD" or "max PERIOD" (*unlimited = 1). */
SM_HIDDEN int sm__parse_cpu_max(const char *buf, size_t len, uint64_t *quota, uint64_t *period,
                               int *unlimited);

/* A CPU list such as "0-3,8" (cpuset.cpus, cpuset.cpus.effective,
 * /sys/devices/system/cpu/online): *count CPUs.  Empty text is an empty set
 * (count 0).  Ranges must be ascending and disjoint, as the kernel prints. */
SM_HIDDEN int sm__parse_cpulist(const char *buf, size_t len, unsigned *count);

/* The number of "cpuN" lines of /proc/stat (online CPUs).  -ENOENT without
 * the "cpu " total line or without any cpuN line. */
SM_HIDDEN int sm__count_stat_cpus(const char *buf, size_t len, unsigned *count);
/* ---- end of cgroup files ---------------------------------------------------- */

/* ---- block I/O of a cgroup (parse_io.c) ---------------------------------------
 * Bytes summed over every device.  -EINVAL on a line not in the kernel's
 * format, -ERANGE when a number or a sum overflows 64 bits. */
/* v2 io.stat: rbytes and wbytes. */
SM_HIDDEN int sm__parse_io_stat(const char *buf, size_t len, uint64_t *rbytes, uint64_t *wbytes);
/* v1 blkio.throttle.io_service_bytes_recursive, blkio.io_service_bytes_recursive
 * (and their non-recursive forms): the "Read" and "Write" lines. */
SM_HIDDEN int sm__parse_blkio_bytes(const char *buf, size_t len, uint64_t *read, uint64_t *write);
/* ---- what fills a cgroup (parse_cgroup.c; docs/design.md §9) -----------------
 * memory.stat in one pass: inactive_file (the working set) and the parts of the
 * working set.  v1 reads the hierarchical keys (total_inactive_file,
 * total_active_file, total_rss, total_shmem), v2 the plain ones
 * (inactive_file, active_file, anon, shmem).  have has a bit per key found;
 * a key that is present but malformed fails the whole parse.  -ENOENT
 * without inactive_file (the working set cannot be had). */
#define SM_MS_INACTIVE_FILE 1u
#define SM_MS_ACTIVE_FILE 2u
#define SM_MS_ANON 4u
#define SM_MS_SHMEM 8u
#define SM_MS_PARTS (SM_MS_ACTIVE_FILE | SM_MS_ANON | SM_MS_SHMEM)
typedef struct sm_memstat {
    uint64_t inactive_file, active_file, anon, shmem;
    unsigned have;
} sm_memstat;
SM_HIDDEN int sm__parse_memstat(const char *buf, size_t len, int v1, sm_memstat *out);
/* The name of the first part key missing from have ("total_shmem", ...), or NULL. */
SM_HIDDEN const char *sm__memstat_missing(unsigned have, int v1);

/* v2 memory.events ("low N", "high N", "max N", "oom N", "oom_kill N",
 * "oom_group_kill N"): the four counters of docs/design.md §9.  have: bits
 * SM_ME_*.  -ENOENT when none of the four is there; a malformed value of one
 * of them is -EINVAL/-ERANGE; other lines are not looked at. */
#define SM_ME_HIGH 1u
#define SM_ME_MAX 2u
#define SM_ME_OOM 4u
#define SM_ME_OOM_KILL 8u
typedef struct sm_memevents {
    uint64_t high, max, oom, oom_kill;
    unsigned have;
} sm_memevents;
SM_HIDDEN int sm__parse_memory_events(const char *buf, size_t len, sm_memevents *out);

/* A PSI file (memory.pressure, cpu.pressure; Documentation/accounting/psi.rst):
 *   some avg10=0.00 avg60=0.00 avg300=0.00 total=0
 *   full avg10=0.00 avg60=0.00 avg300=0.00 total=0
 * *total_us is the "some" line's total (µs of stall since the cgroup was
 * made).  -ENOENT without a some line or its total=; -EINVAL when total= is
 * not a number ending at a space or the line's end; -ERANGE on overflow. */
SM_HIDDEN int sm__parse_psi_some(const char *buf, size_t len, uint64_t *total_us);
/* ---- end of what fills a cgroup --------------------------------------------- */

/* ---- the spool file (parse_spool.c; docs/design.md §6, "The spool") ---------
 * The layout, little-endian, both ways (the writer, src/mlflow/spool.c, and
 * `scopemeter sync` encode and decode only through these):
 *   0   "SMSPOOL\0"   magic
 *   8   u32 version (SM_SPOOL_VERSION)   12  u32 header length
 *   16  commit: u64 frame offset, u32 record index in it, u32 CRC32 of the 12
 *       bytes -- rewritten in place after each delivered batch
 *   32  u32 CRC32 of bytes [0,16) and [36, header length)
 *   36  i32 rank   40 u32 pid   44 i64 step base   52 u16 n   54 run id (n bytes)
 * then frames: u32 payload length, u8 type, payload, u32 CRC32 of type and
 * payload.  'S': u16 string id, the string (a key or a tag text, before the
 * first record that names it in this file); 'R': records of 24 bytes (f64
 * value, i64 timestamp ms, i32 step, u16 key id, u16 text id; text 0: a
 * metric).  Codes: -EBADMSG not a spool file (magic) or a malformed frame,
 * -EPROTO another format version, -ENODATA truncated, -EILSEQ a CRC mismatch. */
#define SM_SPOOL_VERSION 1u
#define SM_SPOOL_HEADER_FIXED 54u
#define SM_SPOOL_RUN_MAX 256u
#define SM_SPOOL_FRAME_OVERHEAD 9u
#define SM_SPOOL_PAYLOAD_MAX (1u << 20)
#define SM_SPOOL_REC_SIZE 24u
typedef struct sm_spool_header {
    uint32_t version, len;
    uint64_t commit_off;     /* the first frame not wholly delivered */
    uint32_t commit_idx;     /* records of that frame delivered */
    int commit_ok;           /* the commit's CRC held (else: from the first frame) */
    int32_t rank;
    uint32_t pid;
    int64_t step_base;
    char run[SM_SPOOL_RUN_MAX + 1];
} sm_spool_header;
typedef struct sm_spool_frame {
    int type;                /* 'S' or 'R' */
    const char *payload;
    size_t len;
    size_t next;             /* offset of the next frame */
} sm_spool_frame;
typedef struct sm_spool_rec {
    double value;
    int64_t timestamp_ms;
    int32_t step;
    uint16_t key, text;
} sm_spool_rec;
SM_HIDDEN uint32_t sm__crc32(uint32_t crc, const void *buf, size_t len);
SM_HIDDEN int sm__spool_header_parse(const char *buf, size_t len, sm_spool_header *h);
/* The frame at off: 1 and *f; 0 at exactly len (the end); < 0 as above.
 * On -EILSEQ (CRC mismatch) f->type, f->len and f->next are still set, as the
 * frame's length field says (payload NULL): `scopemeter sync` skips such a
 * frame when the one at f->next reads. */
SM_HIDDEN int sm__spool_frame_parse(const char *buf, size_t len, size_t off, sm_spool_frame *f);
/* Record i of an 'R' payload (i < len / SM_SPOOL_REC_SIZE). */
SM_HIDDEN void sm__spool_rec_get(const char *payload, size_t i, sm_spool_rec *r);
/* Writers: the header (SM_SPOOL_HEADER_FIXED + run id bytes into out,
 * which has room), the 16 commit bytes, a frame's 5-byte head and 4-byte
 * tail around a payload, one record. */
SM_HIDDEN size_t sm__spool_header_put(char *out, const sm_spool_header *h);
SM_HIDDEN void sm__spool_commit_put(char *out16, uint64_t off, uint32_t idx);
SM_HIDDEN void sm__spool_frame_head(char *out5, int type, size_t payload_len);
SM_HIDDEN void sm__spool_frame_tail(char *out4, int type, const char *payload, size_t len);
SM_HIDDEN void sm__spool_rec_put(char *out24, const sm_spool_rec *r);
/* ---- end of the spool file ---------------------------------------------------- */

#endif
