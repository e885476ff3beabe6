/*
 * scopemeter.h — the core API of libscopemeter: identity, names, probe,
 * monitor, plan.  The MLflow part (REST sink, JSONL sink, REST helpers, run
 * resolution) is in scopemeter_mlflow.h, which includes this one; it exists
 * only in the full library (libscopemeter.so), never in the core.
 *
 * scopemeter records system metrics of a training process into MLflow with
 * names that say what they measure (node_*, rootfs_*, network_*, gpu_i_*,
 * container_*), rank and node in every key.  See docs/design.md.
 *
 * Conventions (as in curl and libuv):
 *   - every public symbol starts with sm_ / SM_ (the library's internal
 *     functions are sm__*, hidden, as libuv's uv__*); handles are opaque;
 *   - functions return 0 on success or a negative errno-style code;
 *   - where a message helps, the caller passes an error buffer (err, errlen)
 *     which receives one human-readable line (never a secret).
 *
 * Growth (docs/design.md §8, "An API that can grow"): a program built
 * against this header keeps working with the libraries that come after it.
 *   - Handles (sm_monitor, sm_probe, sm_identity) are opaque: read them
 *     through functions.
 *   - A struct the CALLER allocates and passes in (sm_plan_input, sm_plan,
 *     sm_run_request, sm_run_result) starts with `size_t size`, set with its
 *     SM_*_INIT macro (sizeof as this header knew it).  The library reads and
 *     writes only the bytes that size covers; a field past it takes its
 *     default on input and is left alone on output.  New fields are only
 *     ever appended.
 *   - A struct the LIBRARY fills and owns (sm_series_info, sm_cgroup_info)
 *     is handed out by const pointer and starts with `size_t size`, the
 *     library's sizeof: SM_HAS_FIELD(p, field) says whether an older library
 *     filled `field`.
 *   - An array of records (sm_monitor_drain_records) takes the caller's
 *     sizeof(sm_record) as an argument: the stride it writes.
 * The entry points of 0.1, which took these structs at their 0.1 sizes
 * (sm_identity_from_env, sm_probe_series, sm_probe_cgroup, sm_plan_compute,
 * sm_monitor_drain, sm_mlflow_resolve_run), stay in the library with their
 * 0.1 layouts for programs built then (tests/c/abi/), and are not declared
 * here any more.
 *
 * Defaults: one convention.  A numeric setting given SM_DEFAULT (-1) takes
 * its default, in every setter and every struct field (SM_*_INIT sets every
 * field that has a default to it).  For programs written against 0.1 the
 * setters sm_monitor_set_interval/_samples/_buffer_points still read 0 as
 * the default too; in sm_plan_input 0 is a value (and out of bounds where
 * it was).
 *
 * Lifetimes: a `const char *` the library returns is owned by it and valid
 * as long as the handle it came from (until sm_probe_free, sm_identity_free,
 * sm_monitor_free), unless its comment says otherwise; strings such as a
 * launcher's name or sm_strerror's are static.  The library keeps no pointer
 * the caller passed in after the call returns (it copies strings), except
 * sm_set_log_handler's function and userdata.
 *
 * Thread safety: a handle is used by one thread at a time, with two
 * exceptions: sm_monitor_stop() may be called from any thread (and from an
 * atexit handler) while another thread is still in sm_monitor_drain_records() or
 * sm_monitor_queued() on the same monitor — the drain then returns what is
 * left and -EPIPE; sm_monitor_free() stops (bounded) and releases the
 * handle, so call it only after every other call on it has returned (join
 * the drain thread first).  Different handles are
 * independent.  The monitor's own threads never call back into user code,
 * except a log handler set with sm_set_log_handler().
 */
#ifndef SCOPEMETER_H
#define SCOPEMETER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SM_EXTERN __attribute__((visibility("default")))
#else
#define SM_EXTERN
#endif

/* SM_VERSION, SM_VERSION_{MAJOR,MINOR,PATCH}, SM_VERSION_HEX (0xMMmmpp):
 * generated from VERSION, the one place the version is written. */
#include "scopemeter_version.h"

/* Whether the struct at p, filled by the library, has `field`: its size
 * (the library's sizeof) covers it.  For the library-owned structs
 * (sm_series_info, sm_cgroup_info), when running on an older library. */
#define SM_HAS_FIELD(p, field) \
    ((size_t)((const char *)&(p)->field - (const char *)(p)) + sizeof((p)->field) <= (p)->size)

/* "Take the default" for every numeric setting (see the top comment). */
#define SM_DEFAULT (-1)

/* The library's version at run time ("0.2.0"); compare with SM_VERSION to
 * catch a program built against another header. */
SM_EXTERN const char *sm_version(void);

/* A message for a code this API returned (negative errno-style, or
 * SM_NOT_COLLECTING); never NULL. */
SM_EXTERN const char *sm_strerror(int code);

/* ---------------------------------------------------------------------------
 * Bounds every surface checks, from one place (docs/design.md §4, §7): the
 * CLI, sm_plan_estimate() and the Python front (which reads them from its
 * extension) validate with these values and these words.
 * ------------------------------------------------------------------------- */
#define SM_INTERVAL_MIN 0.01        /* s; below this a monitor is a busy loop */
#define SM_INTERVAL_MAX 86400.0     /* s */
#define SM_INTERVAL_DEFAULT 10.0    /* s, as MLflow's monitor */
#define SM_SAMPLES_MAX 100000
/* an explicit buffer (sm_monitor_set_buffer_points, --buffer-points): below
 * 256 points an outage of a few windows already drops; the top is 2.4 GB of
 * 24-byte entries */
#define SM_BUFFER_POINTS_MIN 256
#define SM_BUFFER_POINTS_MAX 100000000
#define SM_STOP_TIMEOUT_MAX 86400.0 /* s */
#define SM_STOP_TIMEOUT_DEFAULT 30.0 /* s */
#define SM_GPUS_MAX 64              /* GPUs one process may see */
/* The write budget (docs/design.md §5): metric rows per second the tracking
 * server takes from one job, all its collectors together.  Unset: the
 * default rule (the load of four collectors at 10 s).  The period it sets is
 * at most SM_WRITE_BUDGET_PERIOD_MAX (a point an hour); a budget that would
 * need longer is not met, and said. */
#define SM_WRITE_BUDGET_MIN 0.01       /* rows/s */
#define SM_WRITE_BUDGET_MAX 10000000.0 /* rows/s */
#define SM_WRITE_BUDGET_PERIOD_MAX 3600.0 /* s */
/* MLflow's limits (mlflow/utils/validation.py): one log-batch request holds
 * at most this many metrics, tags, and entities in all; a key at most
 * SM_MLFLOW_KEY_MAX characters. */
#define SM_MLFLOW_BATCH_METRICS 1000
#define SM_MLFLOW_BATCH_TAGS 100
#define SM_MLFLOW_BATCH_ENTITIES 1000
#define SM_MLFLOW_KEY_MAX 250

/* ---------------------------------------------------------------------------
 * Lines.  Every line scopemeter prints (docs/design.md §6) goes to stderr as
 * "scopemeter: <msg>" ("scopemeter: warning: <msg>" for warnings), written
 * with one write(2).  An embedding program may route them instead: the
 * handler receives the message without the prefix and the level; it may be
 * called from the monitor's threads, so it must be thread-safe and must not
 * call back into scopemeter.  NULL restores stderr.  Process-wide, like
 * curl_global_init: set it before starting monitors.
 * ------------------------------------------------------------------------- */
enum sm_log_level { SM_LOG_INFO = 0, SM_LOG_WARNING = 1 };
typedef void (*sm_log_fn)(int level, const char *msg, void *userdata);
SM_EXTERN void sm_set_log_handler(sm_log_fn fn, void *userdata);

/* ---------------------------------------------------------------------------
 * Identity: who this process is in a distributed job (docs/design.md §4).
 * Read from the launcher's environment: torchrun / Ray Train (RANK,
 * LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE), Slurm (SLURM_PROCID,
 * SLURM_LOCALID, SLURM_NTASKS, SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE), Open MPI
 * (OMPI_COMM_WORLD_*), MPICH/PMI (PMI_RANK, PMI_SIZE).  Node name from
 * SCOPEMETER_NODE_NAME, NODE_NAME, SLURMD_NODENAME; empty when unknown.
 * ------------------------------------------------------------------------- */
typedef struct sm_identity sm_identity; /* opaque */

/* Reads the launcher's environment into a new identity (*out; free it with
 * sm_identity_free).  0; or -EINVAL when a launcher variable is malformed
 * (RANK=abc, RANK=-1, WORLD_SIZE=0, RANK >= WORLD_SIZE, ...): *out is set
 * all the same and sm_identity_invalid() says which, one line; such a
 * process does not collect (docs/design.md §4); -ENOMEM (*out NULL). */
SM_EXTERN int sm_identity_read_env(sm_identity **out);
SM_EXTERN void sm_identity_free(sm_identity *id);
SM_EXTERN int sm_identity_rank(const sm_identity *id);        /* 0 when single process */
SM_EXTERN int sm_identity_local_rank(const sm_identity *id);  /* in the pod; missing: 0 */
SM_EXTERN int sm_identity_world_size(const sm_identity *id);  /* >= 1 */
SM_EXTERN int sm_identity_local_world_size(const sm_identity *id); /* >= 1 */
/* "" when unknown (never "unknown" in a key); valid until sm_identity_free
 * (or sm_probe_free for sm_probe_identity's). */
SM_EXTERN const char *sm_identity_node(const sm_identity *id);
/* "torchrun", "slurm", "openmpi", "pmi", "none": static */
SM_EXTERN const char *sm_identity_launcher(const sm_identity *id);
/* the environment variable the node came from, or NULL: static */
SM_EXTERN const char *sm_identity_node_source(const sm_identity *id);
/* "" or why the launcher's variables cannot be trusted; valid as node */
SM_EXTERN const char *sm_identity_invalid(const sm_identity *id);

/* Whether a process of this identity collects (docs/design.md §4): by
 * default rank 0; with all_workers every pod's local rank 0; never with an
 * invalid identity.  1 or 0; why receives the one line that says why not. */
SM_EXTERN int sm_collects(const sm_identity *id, int all_workers, char *why, size_t whylen);

/* ---------------------------------------------------------------------------
 * Names (docs/design.md §2): a pure function of (upstream key, rank, node).
 * Writes "system/<scoped key>[/NODE]/rankN" into out.  An upstream key of a
 * family no rule covers is -EINVAL, as is one holding '/' (it would open a
 * UI section and make the key ambiguous, see sm_series_parse); a too-small
 * buffer is -ENOSPC.  node may be NULL or "" (no node tier).
 * ------------------------------------------------------------------------- */
SM_EXTERN int sm_series_name(const char *upstream_key, int rank, const char *node,
                             char *out, size_t outlen);

/* Scope of an upstream or scoped key: "node", "rootfs", "pod", "gpu",
 * "container", "process", or NULL for a key no rule covers. */
SM_EXTERN const char *sm_series_scope(const char *key);

/* The inverse of sm_series_name (docs/design.md §2): splits a logged key
 * "system/<scoped key>[/NODE]/rankN" into the upstream key (cpu_...), the
 * scoped key (node_cpu_..., the logged name without tier and rank), the node
 * tier as it stands in the key ("" when none: sanitised, perhaps with its
 * FNV-1a suffix; the full name is the tag scopemeter.rankN.node), the rank
 * and the scope (a static string, as sm_series_scope).  Any output may be
 * NULL.  -EINVAL for a key sm_series_name cannot produce (no family, a tier
 * on a family without one, a malformed rank); -ENOSPC when a buffer is too
 * small.  A tier longer than today's 180 characters (written by engines
 * before the length rule, within MLflow's SM_MLFLOW_KEY_MAX) still parses. */
SM_EXTERN int sm_series_parse(const char *key, char *upstream, size_t upstream_len,
                              char *scoped, size_t scoped_len, char *node, size_t node_len,
                              int *rank, const char **scope);

/* ---------------------------------------------------------------------------
 * Probe: one honest look at what this process would record here.
 * Two samples `interval_s` apart; then every series with key, value, scope,
 * unit and source; the cgroup found (or why none); the GPU status; notes.
 * ------------------------------------------------------------------------- */
typedef struct sm_probe sm_probe;

/* One series of a probe; owned by the probe, valid (with its strings) until
 * sm_probe_free.  Fields are only appended (SM_HAS_FIELD). */
typedef struct sm_series_info {
    size_t size;          /* the library's sizeof(sm_series_info) */
    const char *key;      /* full MLflow key, e.g. system/container_memory_usage_megabytes/rank0 */
    const char *upstream; /* collector key, e.g. container_memory_usage_megabytes */
    double value;         /* as sampled */
    double logged;        /* as it would be logged: rounded to 0.1 like MLflow */
    const char *scope;    /* node | rootfs | pod | gpu | container | process: static */
    const char *unit;     /* percent | MB | W */
    const char *source;   /* file(s) or call the value came from */
} sm_series_info;

/* The cgroup a probe found; owned by the probe, valid (with its strings)
 * until sm_probe_free.  Fields are only appended (SM_HAS_FIELD). */
typedef struct sm_cgroup_info {
    size_t size;          /* the library's sizeof(sm_cgroup_info) */
    int found;            /* a cgroup directory was resolved */
    int version;          /* 1 or 2, 0 when none */
    const char *dir;      /* the process's own cgroup directory (memory controller), or NULL */
    const char *limiting_dir; /* level holding the lowest memory limit, or NULL */
    double mem_limit_bytes;   /* 0 = no memory limit */
    double cpu_limit_cores;   /* 0 = no CPU limit */
    const char *cpu_limiting_dir; /* level holding the lowest CPU quota, or NULL */
    const char *why;      /* one line: how it was found or why there is none */
    const char *tag;      /* value of scopemeter.rankN.cgroup */
} sm_cgroup_info;

SM_EXTERN int sm_probe_run(double interval_s, sm_probe **out, char *err, size_t errlen);
SM_EXTERN size_t sm_probe_series_count(const sm_probe *p);
/* The i-th series, or NULL when i >= sm_probe_series_count(p). */
SM_EXTERN const sm_series_info *sm_probe_series_at(const sm_probe *p, size_t i);
SM_EXTERN const sm_cgroup_info *sm_probe_cgroup_info(const sm_probe *p);
/* The probe's identity: valid until sm_probe_free (never sm_identity_free it). */
SM_EXTERN const sm_identity *sm_probe_identity(const sm_probe *p);
/* which mode would collect this rank: "default,all_workers" (rank 0), "all_workers" (a
 * pod's local rank 0), "default" (rank 0 with a local rank != 0), "none" */
SM_EXTERN const char *sm_probe_collect_mode(const sm_probe *p);
/* The gpu status and notes are valid until sm_probe_free; the mode is static. */
SM_EXTERN const char *sm_probe_gpu_status(const sm_probe *p); /* the .gpu tag value */
/* A start tag a collector gave, by its key after "scopemeter.rankN." ("rdma",
 * "rdma_events"); NULL when it gave none.  Valid until sm_probe_free. */
SM_EXTERN const char *sm_probe_tag(const sm_probe *p, const char *key);
SM_EXTERN size_t sm_probe_note_count(const sm_probe *p);
SM_EXTERN const char *sm_probe_note(const sm_probe *p, size_t i);
SM_EXTERN void sm_probe_free(sm_probe *p);

/* ---------------------------------------------------------------------------
 * Monitor: one sampling thread that records into one MLflow run.
 *
 *   sm_monitor *m = sm_monitor_new();
 *   sm_monitor_set_run(m, "http://127.0.0.1:5000", run_id);
 *   sm_monitor_start(m, err, sizeof err);
 *   ... training ...
 *   sm_monitor_stop(m);   // stop sampling, last window, end tags, flush
 *   sm_monitor_free(m);
 *
 * Sinks: the MLflow REST sink and a local JSONL file (the full library,
 * libscopemeter.so: scopemeter_mlflow.h, over libcurl and jansson), and a
 * pull queue for language bindings, which drain finished records with
 * sm_monitor_drain_records() and log them through their own client (the Python
 * front's MlflowClient path).  This header is the core: libc, pthreads and
 * libdl only.
 * ------------------------------------------------------------------------- */
typedef struct sm_monitor sm_monitor;

SM_EXTERN sm_monitor *sm_monitor_new(void);

/* SM_DEFAULT (or, as in 0.1, any value <= 0) means: SCOPEMETER_INTERVAL /
 * SCOPEMETER_SAMPLES, else MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL /
 * _SAMPLES_BEFORE_LOGGING, else 10 s x 1. */
SM_EXTERN int sm_monitor_set_interval(sm_monitor *m, double seconds);
SM_EXTERN int sm_monitor_set_samples(sm_monitor *m, int samples);
SM_EXTERN int sm_monitor_set_all_workers(sm_monitor *m, int on);
/* The job identity of this monitor instead of the launcher's environment
 * (sm_identity_read_env): a program that runs many monitors, one per rank of
 * one job, gives each its own (tests/tools/many_collectors.c).  0 <= rank <
 * world_size <= SM_PLAN_WORKERS_MAX, 0 <= local_rank < local_world_size <=
 * world_size, node NULL or "" (no node tier) or shorter than 256 bytes
 * (copied); -EINVAL outside, -EBUSY after start.  Its launcher is "api". */
SM_EXTERN int sm_monitor_set_identity(sm_monitor *m, int rank, int local_rank, int world_size,
                                      int local_world_size, const char *node);
/* The job's write budget in rows/s, SM_WRITE_BUDGET_MIN..MAX (docs/design.md
 * §5); SM_DEFAULT: SCOPEMETER_WRITE_BUDGET, else none (the default rule).
 * Every collector of a job must be given the same budget: each computes its
 * period alone from it, the collectors n and its own series. */
SM_EXTERN int sm_monitor_set_write_budget(sm_monitor *m, double rows_per_s);
/* Stop bound, 0..86400 s (0: do not wait), SM_DEFAULT: 30; unlike the other
 * settings it may also be set after start, from the thread that then stops
 * (not during a stop). */
SM_EXTERN int sm_monitor_set_stop_timeout(sm_monitor *m, double seconds);
/* Points kept while the server is unreachable, SM_BUFFER_POINTS_MIN..
 * SM_BUFFER_POINTS_MAX (-EINVAL outside); (size_t)SM_DEFAULT or 0: one
 * hour's worth. */
SM_EXTERN int sm_monitor_set_buffer_points(sm_monitor *m, size_t points);
/* The detail level (docs/series.md "Levels"): SM_DETAIL_DEFAULT, the series a
 * user reads first; SM_DETAIL_FULL adds the diagnosis series (GPM, NVLink,
 * GPU clocks and ECC counts); SM_DEFAULT: SCOPEMETER_DETAIL, else default.
 * -EINVAL for another value, -EBUSY after start.  Appended in 0.3. */
#define SM_DETAIL_DEFAULT 0
#define SM_DETAIL_FULL 1
SM_EXTERN int sm_monitor_set_detail(sm_monitor *m, int detail);
/* Pull sink for bindings: records wait in the monitor's bounded queue. */
SM_EXTERN int sm_monitor_use_queue(sm_monitor *m);
/* The recording key: an opaque string naming what this monitor records into
 * (the Python front passes the run id for its queue; sm_monitor_set_run's
 * run id is the default; NULL: none, as for a JSONL file of no run).  One
 * monitor per (key, rank) records (docs/design.md §9): start binds the
 * abstract unix socket @scopemeter/<key>/rank<N> and holds it until stop or
 * free; a second one for the same key and rank says one line naming the
 * first (its pid) and returns SM_NOT_COLLECTING.  Under all_workers a local
 * rank other than 0 holds its name too, so the pod's collector records its
 * process tree. */
SM_EXTERN int sm_monitor_set_recording_key(sm_monitor *m, const char *key);

/* Starts the sampling thread.  Returns 0 when collecting, SM_NOT_COLLECTING
 * when this process does not collect under the rules of docs/design.md §4, or
 * when its rank of the run already has a recorder (§9) (one line says why), or a negative error with a line in err.  -ENODATA: nothing to
 * record here (no collector, no value); the monitor printed the line itself
 * (err holds a copy) and pushed the scopemeter.skipped tag, which a queue
 * binding drains before -EPIPE.  A monitor starts once (docs/monitor.md). */
#define SM_NOT_COLLECTING 1
SM_EXTERN int sm_monitor_start(sm_monitor *m, char *err, size_t errlen);

/* Stop in the order of docs/design.md §7: stop sampling, log the last partial window,
 * end tags, flush, detach; bounded by the stop timeout.  Idempotent.
 * Returns 0, or -ETIMEDOUT when the bound was hit (one line said so). */
SM_EXTERN int sm_monitor_stop(sm_monitor *m);
SM_EXTERN void sm_monitor_free(sm_monitor *m);

/* Effective values after the write budget's rule (valid after start). */
SM_EXTERN double sm_monitor_interval(const sm_monitor *m);
SM_EXTERN int sm_monitor_samples(const sm_monitor *m);
SM_EXTERN int sm_monitor_collectors(const sm_monitor *m);
/* The budget in force in rows/s (setter, else SCOPEMETER_WRITE_BUDGET), 0
 * when none (the default rule); valid after start. */
SM_EXTERN double sm_monitor_write_budget(const sm_monitor *m);
/* Points dropped because the buffer overflowed (oldest first). */
SM_EXTERN uint64_t sm_monitor_dropped(const sm_monitor *m);

/* A record handed to a binding: a metric point or a run tag.  The strings
 * are the monitor's (its queue keeps every distinct key and tag value once):
 * valid until sm_monitor_free, whatever is drained after. */
enum sm_record_kind { SM_RECORD_METRIC = 1, SM_RECORD_TAG = 2 };
typedef struct sm_record {
    int kind;
    double value;          /* metric value (SM_RECORD_METRIC) */
    int64_t timestamp_ms;
    int64_t step;
    const char *key;       /* NUL-terminated */
    const char *text;      /* tag value (SM_RECORD_TAG), whole, NUL-terminated; NULL for a metric */
    size_t text_len;       /* strlen(text); 0 for a metric */
} sm_record;

/* Records waiting in the pull queue (0 without one). */
SM_EXTERN size_t sm_monitor_queued(const sm_monitor *m);

/* A binding that delivers the drained records itself prints the closing
 * line with this, after stop and its last drain: what it delivered, what the
 * store refused and what it could not deliver before its stop bound; the
 * monitor adds its own counts (windows, points, tags, buffer overflow).  The
 * REST sink prints the same line itself.  -EINVAL before stop or without the
 * queue. */
SM_EXTERN int sm_monitor_report(sm_monitor *m, uint64_t delivered, uint64_t refused,
                                uint64_t undelivered);

/* Pull sink: waits up to timeout_s for records, takes at most cap of them
 * into out, an array of records record_size bytes each (pass
 * sizeof(sm_record): the library writes the fields that size covers, and
 * zeroes the rest of each).  Returns the number taken (> 0), 0 on timeout,
 * or -EPIPE once the monitor has stopped and the queue is empty (the stream
 * is over); -EINVAL for a record_size below this header's sm_record
 * (the first with pointers). */
SM_EXTERN int sm_monitor_drain_records(sm_monitor *m, sm_record *out, int cap,
                                       size_t record_size, double timeout_s);

/* ---------------------------------------------------------------------------
 * Plan: the preflight of docs/design.md §8 (docs/plan.md) (what turning on every worker costs).
 * ------------------------------------------------------------------------- */
/* A field left at SM_DEFAULT takes its default; any other value outside
 * its bounds is -EINVAL with the bound in err (0 is not "default").
 * SM_PLAN_DEFAULT is 0.1's name for it. */
#define SM_PLAN_DEFAULT SM_DEFAULT
#define SM_PLAN_WORKERS_MAX 1048576
/* Above this many charts `scopemeter plan` warns that MLflow's System metrics
 * tab will not be readable in one pass (docs/plan.md): 216 is the largest tab
 * bench/ui_render.py saw through to its end (8 ranks: one pass in about 5
 * minutes at a chart a second; 64 ranks, 1728 charts: about 40). */
#define SM_PLAN_UI_CHARTS_WARN 216
typedef struct sm_plan_input {
    size_t size;            /* SM_PLAN_INPUT_INIT: sizeof(sm_plan_input) */
    int workers;            /* world size, 1..SM_PLAN_WORKERS_MAX; SM_DEFAULT: 1 */
    int workers_per_pod;    /* local world size, 1..workers; default 1 */
    int nodes;              /* 1..pods; default: one node per pod */
    int gpus_per_worker;    /* GPUs per worker, 0..SM_GPUS_MAX (a pod shows workers_per_pod x this); default 0 */
    int all_workers;        /* 0: rank 0 only (default) */
    double interval_s;      /* SM_INTERVAL_MIN..SM_INTERVAL_MAX; default 10 */
    int samples;            /* 1..SM_SAMPLES_MAX; default 1 */
    int container_limits;   /* 1 when pods have a cgroup limit (container_* exist); default 1 */
    /* appended in 0.2 (a caller's older size leaves it at its default) */
    double write_budget;    /* rows/s, SM_WRITE_BUDGET_MIN..MAX; default: none, the default rule */
    /* appended in 0.2.2 */
    int rdma_ports;         /* 1 when pods are given RDMA ports (rdma_* exist); default 0 */
    /* appended in 0.3 */
    int detail;             /* SM_PLAN_DETAIL_DEFAULT or _FULL (docs/series.md "Levels"); default: default */
} sm_plan_input;
#define SM_PLAN_DETAIL_DEFAULT SM_DETAIL_DEFAULT
#define SM_PLAN_DETAIL_FULL SM_DETAIL_FULL
#define SM_PLAN_INPUT_INIT {sizeof(sm_plan_input), SM_DEFAULT, SM_DEFAULT, SM_DEFAULT, \
                            SM_DEFAULT, SM_DEFAULT, SM_DEFAULT, SM_DEFAULT, SM_DEFAULT, SM_DEFAULT, \
                            SM_DEFAULT, SM_DEFAULT}

typedef struct sm_plan {
    size_t size;              /* SM_PLAN_INIT: sizeof(sm_plan) */
    int collectors;
    double interval_s;        /* effective, after the write-load cap */
    int samples;
    double period_s;          /* interval x samples */
    int gpus_per_collector;   /* GPUs one collector logs: the pod's, workers_per_pod x G */
    int series_per_collector;
    /* of which: with the node tier (node_*, rootfs_*), GPU, container */
    int node_series_per_collector;
    int gpu_series_per_collector;
    int container_series_per_collector;
    int series;               /* = charts */
    int charts;
    int sections;
    double rows_per_hour;
    double bytes_per_row;     /* assumption, documented in docs/plan.md */
    double bytes_per_day;
    /* the process trees (docs/design.md §9): ranks whose tree is recorded (1
     * by default, every worker with all_workers) and their series, included
     * in series, charts, sections and rows */
    int ranks_recorded;
    int process_series;
    /* the write budget (docs/design.md §5), appended in 0.2 */
    double write_budget;      /* rows/s in force; 0: none (the default rule) */
    double budget_period_s;   /* the period the budget asks (> period_s: not met); 0: none */
    double rows_per_s;        /* series / period_s: what the server receives */
    int series_per_collector_recorded; /* the rule's series: a collector's own + its ranks' process_* */
    int server_cores;         /* server cores for max(budget, rows/s): docs/rest.md's sizing table */
    /* appended in 0.2.1 */
    int ui_charts_over;       /* 1: charts > SM_PLAN_UI_CHARTS_WARN, the tab too large to read (docs/plan.md) */
    /* resident memory the recorder adds in each collecting pod, counted against its
     * memory limit, by surface (docs/plan.md "Memory"): the Python front's thread in
     * the training process, its companion's own process, scopemeter run's process */
    double pod_memory_front_mb;
    double pod_memory_companion_mb;
    double pod_memory_cli_mb;
    /* appended in 0.2.2: of series_per_collector, the RDMA ports' (rdma_*) */
    int rdma_series_per_collector;
    /* appended in 0.3: the level counted above, and the job's series at level
     * full (= series when detail is full) */
    int detail;
    int series_full;
} sm_plan;
#define SM_PLAN_INIT {sizeof(sm_plan), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, \
                      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/* The preflight: reads in (in->size bytes), writes out (out->size bytes).
 * 0, or -EINVAL with the bound in err (a size below this header's, the
 * first sized one, included). */
SM_EXTERN int sm_plan_estimate(const sm_plan_input *in, sm_plan *out, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* SCOPEMETER_H */
