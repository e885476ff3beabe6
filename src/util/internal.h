/*
 * internal.h — private declarations shared by the library's files.
 *
 * Where each file sits and what it is, the layers and which may include
 * which: the one source map, docs/design.md §0 (not copied here: a copy
 * drifts).
 */
#ifndef SM_INTERNAL_H
#define SM_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "number.h"
#include "scopemeter.h"

#define SM_HIDDEN __attribute__((visibility("hidden")))

/* ---- identity.c: the opaque sm_identity of scopemeter.h -------------------- */
/* Its first fields are 0.1's public struct, frozen: programs built against
 * 0.1 allocate exactly these (sm_identity_from_env), read them from the
 * pointer sm_probe_identity returns, and hand them back (sm_collects,
 * sm_run_request.id of sm_mlflow_resolve_run), so those read only these
 * fields.  A new field goes after `invalid`, never before (tests/c/abi/). */
struct sm_identity {
    int rank;
    int local_rank;
    int world_size;
    int local_world_size;
    char node[256];
    const char *launcher;    /* static */
    const char *node_source; /* static, or NULL */
    char invalid[256];
};
#define SM_IDENTITY_V0_SIZE (offsetof(sm_identity, invalid) + 256)

/* The whole identity from the environment (what sm_identity_read_env
 * allocates); 0 or -EINVAL with id->invalid. */
SM_HIDDEN int sm__identity_fill(sm_identity *id);

/* ---- names.c: a name as the engine prints and tags it ---------------------- */
/* A name from outside (a node name, a launcher variable's value, a job id, an
 * experiment or run id given) as every line, table and tag of the engine
 * shows it (docs/design.md §2): a control character (0x00-0x1f, 0x7f) as
 * \n, \r, \t or \xHH, a backslash as \\, every other byte as it is
 * (UTF-8 stays readable).  So a line stays one line and a table one row, and
 * the text reads back to the name.  Cut at cap - 1 bytes, never inside an
 * escape; returns out.  SM_SHOWN_MAX(n): the room for a whole name of n bytes. */
#define SM_SHOWN_MAX(n) (4 * (n) + 1)
SM_HIDDEN const char *sm__shown(char *out, size_t cap, const char *name);

/* ---- 0.1's entry points (src/api/compat.c, src/identity/identity.c) ---- */
/* Not in scopemeter.h any more; exported for programs built against 0.1,
 * with 0.1's struct layouts (tests/c/abi/0.1/scopemeter.h).  Each converts
 * to the sized API and back; nothing in the library calls them. */
SM_EXTERN int sm_identity_from_env(sm_identity *id); /* SM_IDENTITY_V0_SIZE bytes */

/* Copies what a caller's sized struct holds: the first `size` bytes of src
 * (its size field first) over dst, a full struct already holding the
 * defaults; size beyond dst's sizeof is ignored.  -EINVAL when size is
 * below min (the first sized layout, frozen). */
static inline int sm_sized_in(void *dst, size_t full, const void *src, size_t min)
{
    size_t size = *(const size_t *)src;

    if (size < min)
        return -EINVAL;
    memcpy(dst, src, size < full ? size : full);
    return 0;
}

/* Writes a full struct back to the caller's: only the bytes its size field
 * covers, the size field itself left as the caller set it. */
static inline int sm_sized_out(void *dst, const void *src, size_t full, size_t min)
{
    size_t size = *(const size_t *)dst;

    if (size < min)
        return -EINVAL;
    memcpy((char *)dst + sizeof(size_t), (const char *)src + sizeof(size_t),
           (size < full ? size : full) - sizeof(size_t));
    return 0;
}

#define SM_PATH_MAX 4096
#define SM_ABSENT 1 /* open(): this scope does not exist here (informational) */

/* ---- context: what every collector needs, resolved once ------------------ */
typedef struct sm_ctx {
    char sysroot[1024];      /* SCOPEMETER_SYSROOT without trailing '/', or "" */
    sm_identity id;
    uint64_t mem_total;      /* node MemTotal in bytes, 0 when unknown */
    /* set by the monitor after sm__ctx_init (docs/design.md §9): the
     * recording key (the run id; NULL when none) and all_workers, so the
     * process collector finds the pod's other ranks through their locks */
    const char *rec_key;
    int all_workers;
    /* the detail level (docs/series.md "Levels"): SM_DETAIL_FULL adds the
     * diagnosis series; SCOPEMETER_DETAIL, read by sm__ctx_init */
    int detail;
    /* the recording's own collectors (the monitor's, not probe's nor a
     * companion's): the container collector resets the cgroup's v1 kernel
     * peak at open, so that it is the run's (docs/cgroup.md) */
    int owns_peak;
    /* whose process is this (src/collect/pidmap.h): the collector set's one
     * map, fed by the process collector and asked by the GPU collectors;
     * NULL outside a set (a collector opened alone keeps its own) */
    struct sm__pidmap *pids;
} sm_ctx;
/* SM_DETAIL_DEFAULT, SM_DETAIL_FULL: scopemeter.h.  "default" or "full" (NULL or "": default); -EINVAL for another word */
SM_HIDDEN int sm__detail_of(const char *word);

SM_HIDDEN int sm__ctx_init(sm_ctx *ctx);

/* ---- zalloc.c: zeroed, page-granular memory; pages resident once written --- */
SM_HIDDEN void *sm__zalloc(size_t n);
SM_HIDDEN void sm__zfree(void *p); /* NULL is fine */

/* ---- sysroot.c ------------------------------------------------------------- */
/* out = sysroot + abs.  -ENAMETOOLONG when it does not fit. */
SM_HIDDEN int sm__path(const sm_ctx *ctx, const char *abs, char *out, size_t outlen);
/* open(sysroot + abs, O_RDONLY|O_CLOEXEC): fd or -errno */
SM_HIDDEN int sm__open(const sm_ctx *ctx, const char *abs);
/* open a path that already carries the sysroot (e.g. a resolved cgroup dir) */
SM_HIDDEN int sm__open_abs(const char *path);
/* pread from offset 0 until EOF; buf is NUL-terminated.  Returns the length,
 * -EFBIG when the file did not fit in cap-1 bytes, or -errno. */
SM_HIDDEN ssize_t sm__pread_all(int fd, char *buf, size_t cap);
/* open + pread_all + close of sysroot + abs */
SM_HIDDEN ssize_t sm__read_file(const sm_ctx *ctx, const char *abs, char *buf, size_t cap);
/* read a whole file of any size into a malloc'd NUL-terminated buffer
 * (for one-time reads such as mountinfo).  Caller frees *out. */
SM_HIDDEN ssize_t sm__read_file_alloc(const char *path, char **out);

/* ---- clock.c --------------------------------------------------------------- */
/* Monotonic clock in seconds. */
SM_HIDDEN double sm__now_mono(void);
/* Wall clock in milliseconds since the epoch (MLflow timestamps). */
SM_HIDDEN int64_t sm__now_ms(void);
/* A monotonic time (seconds, as sm__now_mono) as an absolute timespec for
 * pthread_cond_timedwait on a condvar made by sm__cond_init_mono. */
SM_HIDDEN void sm__mono_timespec(double t, struct timespec *out);
/* Sleeps s seconds (nothing for s <= 0), resuming after a signal. */
SM_HIDDEN void sm__sleep(double s);
/* pthread_cond_init with CLOCK_MONOTONIC: timed waits ignore wall-clock steps. */
SM_HIDDEN int sm__cond_init_mono(pthread_cond_t *cv);


/* ---- log.c ----------------------------------------------------------------- */
enum sm_level { SM_INFO = 0, SM_WARN = 1 };
/* One line on stderr: "scopemeter: <msg>" or "scopemeter: warning: <msg>". */
SM_HIDDEN void sm__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
SM_HIDDEN void sm__vlog(int level, const char *fmt, va_list ap);
/* The calling thread's own taker of lines, ahead of sm_set_log_handler's and
 * stderr: the Python extension sets one around each call it makes in its
 * caller's thread (enable, disable), so those lines reach the application's
 * logging (docs/python.md); every other thread still writes stderr.  The
 * function gets the line without the prefix and returns 0 when it took it,
 * < 0 to have it written to stderr after all.  A NULL fn clears it; *prev
 * (when not NULL) receives the one it replaces, to put back. */
typedef int (*sm__log_hook_fn)(int level, const char *msg, void *userdata);
typedef struct {
    sm__log_hook_fn fn;
    void *userdata;
} sm__log_hook;
SM_HIDDEN void sm__log_thread_hook(const sm__log_hook *hook, sm__log_hook *prev);

/* Building one line (every "why" a collector or the cgroup search gives):
 * sm__line writes (0, or -ENAMETOOLONG when cut: a path built with it is
 * then refused), sm__line_add appends, sm__line_join appends "; " + text
 * when the line is not empty.  A cut line ends in "...". */
SM_HIDDEN int sm__line(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
SM_HIDDEN void sm__line_add(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
SM_HIDDEN void sm__line_join(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* pre + mid + post with mid cut ("...") so that post, what was dropped,
 * always fits. */
SM_HIDDEN void sm__line_mid(char *out, size_t cap, const char *pre, const char *mid,
                           const char *post);

/* ---- env.c ----------------------------------------------------------------- */
/* The number in the environment variable name (spec->name names it too):
 * 1 and *out; 0 when unset or empty; -1 when set to anything the one parser
 * refuses, after one warning "<the parser's line>; <instead>" (instead: what
 * is used, "ignored", "using the default 120 s").  once: said the first time
 * only (a static flag of the caller's; NULL: every time). */
SM_HIDDEN int sm__env_number(const char *name, const sm_num_spec *spec, double *out,
                            const char *instead, atomic_flag *once);

/* Lines gathered while opening (probe shows them, the monitor prints them). */
#define SM_NOTES_MAX 24
/* A note's room: the whole line a collector's open says (an old driver's GPU
 * note names every field it lacks and why, 600+ characters on the minimal
 * fake NVML); the log line adds its prefix (log.c). */
#define SM_NOTE_LINE 2048
typedef struct sm_notes {
    size_t n;
    int level[SM_NOTES_MAX];
    char line[SM_NOTES_MAX][SM_NOTE_LINE];
} sm_notes;
SM_HIDDEN void sm__note(sm_notes *notes, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- plan.c: docs/design.md §4-§5, shared by the monitor and sm_plan_estimate -------- */
SM_HIDDEN int sm__collectors_of(int world_size, int local_world_size, int all_workers);
/* The write budget's rule (docs/design.md §5): the effective interval; budget
 * <= 0 is none (the default rule); *need_s (may be NULL) the period a set
 * budget asks, 0 when none. */
SM_HIDDEN double sm__budget_interval(int collectors, int series, double interval, int samples,
                                     double budget, double *need_s);

/* ---- reclock.c: one recorder per rank and run (docs/design.md §9) -------- */
/* "scopemeter/<key>/rank<N>" (a key over 64 bytes becomes "#" + its hash). */
SM_HIDDEN int sm__reclock_name(const char *key, int rank, char *out, size_t outlen);
/* Binds and listens on the abstract name: 0 with *fd, -EADDRINUSE when
 * another process holds it, or -errno. */
SM_HIDDEN int sm__reclock_bind(const char *key, int rank, int *fd);
/* The pid of the process that holds the name (SO_PEERCRED; 0 when it is
 * outside this pid namespace): 0, -ECONNREFUSED when nobody does, -errno. */
SM_HIDDEN int sm__reclock_peer(const char *key, int rank, pid_t *pid);
/* "pid 4242 (scopemeter)": who holds the name, for the one line. */
SM_HIDDEN void sm__reclock_holder(const char *key, int rank, char *out, size_t outlen);

/* ---- points: what one sample produces (no allocation per sample) ---------- */
/* RATE: a window mean, of a rate over the span since the collector's
 * previous sample (CPU, pressure); a final sample taken too soon after the
 * last leaves it out and keeps the levels (monitor.c, docs/design.md §7). */
enum sm_agg { SM_AGG_MEAN = 0, SM_AGG_LAST = 1, SM_AGG_RATE = 2 };

typedef struct sm_point {
    const char *key;    /* upstream key; storage owned by the collector */
    const char *unit;   /* "percent", "MB", "W" */
    const char *source; /* file(s) or call */
    double value;
    int agg;            /* enum sm_agg: window mean, latest (counters), or a rate's mean */
    int rank;           /* SM_RANK_OWN, or the rank this point is named for (the
                           pod's collector records its siblings' process trees,
                           docs/design.md §9) */
} sm_point;
#define SM_RANK_OWN (-1)

/* every series of one sample: 19 + 15 per GPU, up to 64 GPUs, + at most 512
 * gpu_*_process_memory_megabytes of NVIDIA's (coll_gpu.c asserts it) and 256
 * of AMD's (coll_amdgpu.c), + 3 per process tree, the own and up to 63
 * siblings' (coll_proc.c): 1939 */
#define SM_POINTS_MAX 2304
typedef struct sm_points {
    size_t n;
    size_t nonfinite;   /* values skipped because NaN/inf is not JSON */
    sm_point v[SM_POINTS_MAX];
} sm_points;

/* round(v, 1) as Python (and so MLflow's monitor) computes it: what is logged. */
SM_HIDDEN double sm__round1(double v);

SM_HIDDEN void sm__emit(sm_points *p, const char *key, double value, const char *unit,
                       const char *source, int agg);
/* sm__emit for a point named for another rank (>= 0) than the monitor's own. */
SM_HIDDEN void sm__emit_rank(sm_points *p, int rank, const char *key, double value,
                            const char *unit, const char *source, int agg);

/* ---- tags: run tags a collector contributes -------------------------------- */
/* START: once after open; END: once at stop, every tag with its final value;
 * WINDOW: after each logged window, only the tags whose value changed since
 * the collector last returned them (docs/design.md §9: tags that must reach
 * the store before an OOM kill ends the process).  A collector keeps what it
 * shipped, formats only on a change, and allocates nothing. */
enum sm_phase { SM_TAGS_START = 0, SM_TAGS_END = 1, SM_TAGS_WINDOW = 2 };
typedef struct sm_tag {
    char key[64];       /* suffix after "scopemeter.rankN.", e.g. "cgroup", "oom_kill" */
    char value[512];
} sm_tag;
/* Every collector's tags of one phase together: 15 at the end with GPUs,
 * RDMA and RAPL (2026-12).  One that does not fit is counted in dropped and
 * said by the monitor (push_tags), never lost silently. */
#define SM_TAGS_MAX 32
typedef struct sm_tags {
    size_t n, dropped;
    char first_dropped[64]; /* the key of the first that did not fit */
    sm_tag v[SM_TAGS_MAX];
} sm_tags;
SM_HIDDEN void sm__tag_add(sm_tags *t, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- build.c: the build tag (scopemeter.rankN.build) ------------------------- */
/* "version=0.2.0 install=wheel tls=none-yet nvml=550.54.15 path=..." */
SM_HIDDEN void sm__build_tag(char *out, size_t cap);
/* the NVML driver version, once NVML is loaded (coll_gpu.c) */
SM_HIDDEN void sm__build_note_nvml(const char *driver);

/* ---- collectors ------------------------------------------------------------ */
/*
 * A collector is one row of the table in collectors.c: open / sample / close
 * over a state block of state_size bytes (zeroed before open).
 *   open:   0 attached; SM_ABSENT when the scope does not exist here (a
 *           bare host has no limit, a CPU worker no GPU) — res->msg is an
 *           informational line; negative on failure — res->msg is a warning
 *           line naming the file.  On failure open releases what it took.
 *   sample: append points; negative when this sample failed (msg says why).
 *           Keep descriptors open and pread them; no allocation.
 *   tags:   optional; start and end run tags.
 *   close:  release everything; called only after a successful open.
 */
/* What open() says: msg is the one line (info when absent, warning on
 * failure, optional when attached); status is the value of the run tag
 * scopemeter.rankN.<status_tag> (e.g. "nvml 550.54.15, 1 device",
 * "none: no /dev/nvidia device", "v2 /kubepods/... mem=56.0GiB cpu=16.0"),
 * set whether or not the collector attached. */
typedef struct sm_opened {
    char msg[SM_NOTE_LINE];
    char status[400];
    /* GPU key indices (gpu_<i>_*) across vendors: in, the first index this
     * collector may use (collectors.c passes one past the previous GPU
     * collector's); out, one past the last index it may use (0: none) */
    unsigned gpu_index_base, gpu_index_next;
} sm_opened;

typedef struct sm_collector_ops {
    const char *name;
    const char *status_tag; /* "gpu", "cgroup", or NULL */
    /* Series one sample emits when attached: `series`, plus
     * `series_per_device` for each device (GPU).  sm_plan_estimate counts
     * from these; tests tie them to what the collectors emit.
     * `series_per_device_full`: the ones it adds per device at detail level
     * full (SCOPEMETER_DETAIL=full, docs/series.md "Levels"). */
    int series, series_per_device, series_per_device_full;
    /* What the row is (docs/design.md §0, §4), read by collectors.c for the
     * monitor and the plan, which never compare rows: */
    bool node_scope;     /* its keys carry the node tier (node_*, rootfs_*: §2) */
    bool needs_limit;    /* exists only where the cgroup has a limit (container_*: §1) */
    bool per_rank;       /* one set per recorded rank, not per collector (process_*: §9) */
    bool gpu;            /* a GPU vendor: another vendor's "no device" line gives way
                            when it attached (collset_open) */
    bool counts_devices; /* the plan's GPUs are counted on this row: a GPU is either
                            vendor's, so a second vendor's row sets it false */
    bool needs_ports;    /* exists only where RDMA ports are given (rdma_*): the plan
                            counts it only when told so (sm__port_series) */
    size_t state_size;
    int (*open)(void *state, const sm_ctx *ctx, sm_opened *res);
    int (*sample)(void *state, sm_points *out, char *msg, size_t msglen);
    void (*tags)(void *state, int phase, sm_tags *out);
    void (*close)(void *state);
} sm_collector_ops;

extern const sm_collector_ops sm__coll_node_cpu;
extern const sm_collector_ops sm__coll_node_memory;
extern const sm_collector_ops sm__coll_rootfs;
extern const sm_collector_ops sm__coll_network;
extern const sm_collector_ops sm__coll_container;
extern const sm_collector_ops sm__coll_gpu;
extern const sm_collector_ops sm__coll_io;
extern const sm_collector_ops sm__coll_amdgpu;
/* coll_gpu.c: the gpu_<i>_* keys of index i (< 64), static storage, first
 * MLflow's five in the order memory %, memory MB, utilization, power W,
 * power %, then NVML's health fields (gpu_int.h's enum metric) */
SM_HIDDEN const char *const *sm__gpu_keys(unsigned int i);
extern const sm_collector_ops sm__coll_proc;
extern const sm_collector_ops sm__coll_rdma;
extern const sm_collector_ops sm__coll_rapl;

#define SM_COLLECTORS_MAX 16
typedef struct sm_collset {
    size_t n;
    sm_tags status;         /* start tags from every row with a status_tag */
    struct {
        const sm_collector_ops *ops;
        void *state;
        int failing;        /* last sample failed; its line was printed */
    } c[SM_COLLECTORS_MAX];
    struct sm__pidmap *pids; /* the set's pid map (sm_ctx.pids) */
} sm_collset;

/* Opens every collector of the table; notes receive one line per collector
 * that is absent or failed.  Returns the number attached (>= 0) or -errno. */
SM_HIDDEN int sm__collset_open(sm_collset *s, const sm_ctx *ctx, sm_notes *notes);
/* One sample of every attached collector.  A failing collector drops its
 * points for this sample; its line is logged once per failure streak. */
SM_HIDDEN int sm__collset_sample(sm_collset *s, sm_points *out);
SM_HIDDEN void sm__collset_tags(sm_collset *s, int phase, sm_tags *out);
SM_HIDDEN void sm__collset_close(sm_collset *s);
/* Series one collecting process logs with `devices` GPUs, the container's
 * included only with a limit (docs/design.md §1), and the node-scope ones
 * (node_*, rootfs_*: the keys that carry the node tier), from the table. */
SM_HIDDEN int sm__collectors_series(int devices, int container_limits, int *node_scope);
/* What detail level full adds to sm__collectors_series (docs/series.md "Levels"). */
SM_HIDDEN int sm__collectors_series_full(int devices);
/* Series of one rank's process tree (process_*, docs/design.md §9): counted
 * per recorded rank, not per collector, so not in sm__collectors_series. */
SM_HIDDEN int sm__process_series(void);
/* Series of the RDMA ports (rows with needs_ports), which exist only where a
 * pod is given ports: not in sm__collectors_series, added by the plan when
 * its input says so. */
SM_HIDDEN int sm__port_series(void);

#endif /* SM_INTERNAL_H */
