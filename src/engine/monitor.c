/*
 * monitor.c — the sampling engine: one pthread per monitor that samples the
 * collectors every `interval` seconds, logs one point per series per window
 * of `samples` samples, and hands the window's records to a sink (docs/design.md
 * §1 aggregation, §4 who collects, §3 tags, §6 failure policy, §7 stop).
 *
 * Life of a monitor:
 *   start   resolve interval/samples (setter > SCOPEMETER_* > MLFLOW_* >
 *           10 s x 1); decide whether this process collects (§4); open the
 *           collectors and take the baseline sample synchronously — its keys
 *           decide which series exist for the whole run (GPU included: by the
 *           keys a sample produced, never by how many collectors attached);
 *           size every table once; push the start tags; start the thread.
 *   thread  absolute schedule on CLOCK_MONOTONIC, waiting on a condvar so a
 *           stop wakes it at once.  Each sample accumulates per series (sum
 *           and count for a window mean, or the latest value for counters).
 *           Every `samples` samples the window is logged: value rounded to
 *           0.1 as Python's round(x, 1) does, wall-clock ms timestamp, the
 *           monitor's step (0, 1, 2, ...; one step for all keys of a window).
 *           After each window the collectors' window tags (those whose
 *           value changed, docs/design.md §9) follow its points into the sink.
 *           When stop is asked the thread takes one final sample, logs the
 *           last partial window (a 3-second run still has points), pushes the
 *           end tags, and exits — so the stop timeout bounds all of it, a
 *           statvfs() stuck on a dead filesystem included.
 *   stop    wake the thread and wait for it up to the stop timeout; past it
 *           the thread is detached (it frees the monitor when it finishes, see
 *           refs) and nothing more is logged from it; then flush the sink
 *           within what is left of the timeout, close the collectors, report
 *           dropped points.
 *
 * Nothing here allocates per sample: the point buffer, the per-series slots
 * and the window's records are sized at start.  push() only enqueues.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "number.h"
#include "sink.h"

/* bounds and defaults: scopemeter.h, one place for every surface */
#define DEFAULT_INTERVAL SM_INTERVAL_DEFAULT
#define DEFAULT_SAMPLES 1
#define DEFAULT_STOP_TIMEOUT SM_STOP_TIMEOUT_DEFAULT
#define MIN_INTERVAL SM_INTERVAL_MIN
#define MAX_INTERVAL SM_INTERVAL_MAX
#define MAX_SAMPLES SM_SAMPLES_MAX
/* Default buffer: one hour of points, at least this many records, and at
 * most the upper bound (the ring's storage is reserved at start; its pages
 * are touched only as records arrive).  See docs/monitor.md. */
#define BUFFER_MIN 4096
#define BUFFER_MAX 131072
#define BUFFER_FLOOR SM_BUFFER_POINTS_MIN /* smallest buffer an explicit setting gets */
/* Tags a monitor pushes at most at once: node + collectors' start/end tags +
 * interval/samples/collectors/write budget + skipped. */
#define TAGS_MAX (SM_TAGS_MAX + 8)
#define WINDOW_TAGS_ROOM 16 /* buffer_records: the window tags' room a window */

enum { ST_NEW = 0, ST_RUNNING, ST_STOPPED, ST_NOT_COLLECTING, ST_FAILED };

struct slot {
    char upstream[96];  /* collector key: looked up in each sample */
    char name[256];     /* full MLflow key from sm_series_name */
    int rank;           /* the point's rank override, SM_RANK_OWN for ours */
    int agg;            /* enum sm_agg */
    unsigned n;         /* samples of this series in the current window */
    double sum, last;
};

struct sm_monitor {
    /* configuration (before start) */
    double cfg_interval;   /* <= 0: environment, then default */
    int cfg_samples;
    double cfg_budget;     /* rows/s; <= 0: SCOPEMETER_WRITE_BUDGET, then none */
    int all_workers;
    int cfg_detail;        /* SM_DETAIL_*; SM_DEFAULT: SCOPEMETER_DETAIL (sm__ctx_init) */
    double stop_timeout;
    size_t buffer_points;  /* 0: one hour */
    int use_queue;
    sm_sink_factory factory;
    char *uri;
    void *sink_settings;   /* the factory's own, opaque here (sink.h); owned */
    void (*free_settings)(void *);
    void (*sink_started)(void *settings, const char *target, int rank); /* sink.h; NULL: none */
    void (*sink_stopped)(void *settings);
    char *rec_key;         /* the recording key (docs/design.md §9); NULL: def_key */
    char *def_key;         /* the key the sink's setter named (the run id), or NULL */
    int lock_fd;           /* the bound @scopemeter/<key>/rank<N> socket, or -1 */
    int has_identity;      /* sm_monitor_set_identity: id replaces the environment's */
    sm_identity id;

    /* resolved at start */
    double interval;
    int samples;
    int collectors;
    double budget;         /* the write budget in force, 0: none (the default rule) */
    pid_t pid;
    sm_ctx ctx;
    sm_collset set;
    int set_open;
    sm_points *pts;        /* one sample's points, reused */
    struct slot *slots;
    size_t nslots;
    sm_record *recs;       /* one window's (or one tag batch's) records, reused */
    size_t nrecs_cap;
    int tags_dropped_said;  /* push_tags said tags that did not fit */

    /* sampling state: the thread's while it runs, start's/stop's otherwise */
    int64_t step;          /* next window's step */
    int window_n;          /* samples in the current window */
    double last_sample;    /* monotonic time of the last sample (baseline included) */
    uint64_t points_logged, tags_logged;
    int late_key_logged, nonfinite_logged;

    /* the sink; its pointer changes only under mu */
    sm_sink *sink;
    uint64_t dropped_final;

    /* thread and stop */
    pthread_t thread;
    pthread_mutex_t mu;    /* guards the flags below and every push */
    pthread_cond_t cv;     /* stop -> thread (wake up), thread -> stop (done) */
    int stop_flag, thread_done, orphaned;
    pthread_mutex_t stop_mu; /* one stop at a time; later callers wait for it */
    int state;
    int stop_rc;
    atomic_int refs;       /* the owner's, plus the thread's while it runs */
};

/* ---- configuration ---------------------------------------------------------- */

sm_monitor *sm_monitor_new(void)
{
    sm_monitor *m = calloc(1, sizeof *m);

    if (!m)
        return NULL;
    if (pthread_mutex_init(&m->mu, NULL) != 0) {
        free(m);
        return NULL;
    }
    if (pthread_mutex_init(&m->stop_mu, NULL) != 0) {
        pthread_mutex_destroy(&m->mu);
        free(m);
        return NULL;
    }
    if (sm__cond_init_mono(&m->cv) < 0) {
        pthread_mutex_destroy(&m->stop_mu);
        pthread_mutex_destroy(&m->mu);
        free(m);
        return NULL;
    }
    m->stop_timeout = DEFAULT_STOP_TIMEOUT;
    m->cfg_detail = SM_DEFAULT;
    m->lock_fd = -1;
    atomic_init(&m->refs, 1);
    return m;
}

int sm_monitor_set_interval(sm_monitor *m, double seconds)
{
    if (!m || isnan(seconds))
        return -EINVAL;
    if (m->state != ST_NEW)
        return -EBUSY;
    if (seconds > 0 && (seconds < MIN_INTERVAL || seconds > MAX_INTERVAL))
        return -EINVAL;
    m->cfg_interval = seconds > 0 ? seconds : 0;
    return 0;
}

int sm_monitor_set_samples(sm_monitor *m, int samples)
{
    if (!m)
        return -EINVAL;
    if (m->state != ST_NEW)
        return -EBUSY;
    if (samples > MAX_SAMPLES)
        return -EINVAL;
    m->cfg_samples = samples > 0 ? samples : 0;
    return 0;
}

int sm_monitor_set_write_budget(sm_monitor *m, double rows_per_s)
{
    if (!m)
        return -EINVAL;
    if (m->state != ST_NEW)
        return -EBUSY;
    if (rows_per_s == SM_DEFAULT) {
        m->cfg_budget = 0;
        return 0;
    }
    if (!(rows_per_s >= SM_WRITE_BUDGET_MIN && rows_per_s <= SM_WRITE_BUDGET_MAX))
        return -EINVAL; /* 0, negative, NaN: the surfaces said the line */
    m->cfg_budget = rows_per_s;
    return 0;
}

int sm_monitor_set_identity(sm_monitor *m, int rank, int local_rank, int world_size,
                            int local_world_size, const char *node)
{
    if (!m)
        return -EINVAL;
    if (m->state != ST_NEW)
        return -EBUSY;
    /* the bounds the launcher's environment is held to (identity.c) */
    if (world_size < 1 || world_size > SM_PLAN_WORKERS_MAX || rank < 0 || rank >= world_size ||
        local_world_size < 1 || local_world_size > world_size || local_rank < 0 ||
        local_rank >= local_world_size || (node && strlen(node) >= sizeof m->id.node))
        return -EINVAL;
    memset(&m->id, 0, sizeof m->id);
    m->id.rank = rank;
    m->id.local_rank = local_rank;
    m->id.world_size = world_size;
    m->id.local_world_size = local_world_size;
    snprintf(m->id.node, sizeof m->id.node, "%s", node ? node : "");
    m->id.launcher = "api";
    m->has_identity = 1;
    return 0;
}

int sm_monitor_set_all_workers(sm_monitor *m, int on)
{
    if (!m)
        return -EINVAL;
    if (m->state != ST_NEW)
        return -EBUSY;
    m->all_workers = on != 0;
    return 0;
}

int sm_monitor_set_detail(sm_monitor *m, int detail)
{
    if (!m || (detail != SM_DEFAULT && detail != SM_DETAIL_DEFAULT && detail != SM_DETAIL_FULL))
        return -EINVAL;
    if (m->state != ST_NEW)
        return -EBUSY;
    m->cfg_detail = detail;
    return 0;
}

int sm_monitor_set_stop_timeout(sm_monitor *m, double seconds)
{
    if (seconds == SM_DEFAULT) /* the one default convention (scopemeter.h) */
        seconds = SM_STOP_TIMEOUT_DEFAULT;
    if (!m || !(seconds >= 0) || seconds > SM_STOP_TIMEOUT_MAX)
        return -EINVAL;
    m->stop_timeout = seconds;
    return 0;
}

int sm_monitor_set_buffer_points(sm_monitor *m, size_t points)
{
    if (!m)
        return -EINVAL;
    if (m->state != ST_NEW)
        return -EBUSY;
    if (points == (size_t)SM_DEFAULT)
        points = 0; /* 0: the default */
    if (points && (points < SM_BUFFER_POINTS_MIN || points > SM_BUFFER_POINTS_MAX))
        return -EINVAL; /* the one bound (scopemeter.h), never a silent floor */
    m->buffer_points = points;
    return 0;
}

/* The chosen sink's settings go with it, and the key its setter named. */
static void drop_settings(sm_monitor *m)
{
    if (m->sink_settings && m->free_settings)
        m->free_settings(m->sink_settings);
    m->sink_settings = NULL;
    m->free_settings = NULL;
    m->sink_started = NULL;
    m->sink_stopped = NULL;
    free(m->def_key);
    m->def_key = NULL;
}

int sm_monitor_use_queue(sm_monitor *m)
{
    if (!m)
        return -EINVAL;
    if (m->state != ST_NEW)
        return -EBUSY;
    m->use_queue = 1; /* the sink chosen last wins */
    m->factory = NULL;
    drop_settings(m);
    return 0;
}

int sm__monitor_set_sink_factory(sm_monitor *m, sm_sink_factory f, const char *target,
                                void *settings, void (*free_settings)(void *))
{
    char *u;

    if (!m || !f || !target || m->state != ST_NEW) {
        if (settings && free_settings) /* owned from the call on */
            free_settings(settings);
        return !m || !f || !target ? -EINVAL : -EBUSY;
    }
    u = strdup(target);
    if (!u) {
        if (settings && free_settings)
            free_settings(settings);
        return -ENOMEM;
    }
    drop_settings(m);
    free(m->uri);
    m->uri = u;
    m->sink_settings = settings;
    m->free_settings = free_settings;
    m->factory = f;
    m->use_queue = 0;
    return 0;
}

void *sm__monitor_sink_settings(sm_monitor *m, sm_sink_factory f)
{
    if (!m || m->state != ST_NEW || m->use_queue || !f || m->factory != f)
        return NULL;
    return m->sink_settings;
}

int sm__monitor_set_sink_hooks(sm_monitor *m, sm_sink_factory f,
                              void (*started)(void *settings, const char *target, int rank),
                              void (*stopped)(void *settings))
{
    if (!m || !f)
        return -EINVAL;
    if (m->state != ST_NEW)
        return -EBUSY;
    if (m->use_queue || m->factory != f)
        return -EINVAL;
    m->sink_started = started;
    m->sink_stopped = stopped;
    return 0;
}

int sm__monitor_default_recording_key(sm_monitor *m, const char *key)
{
    char *k = NULL;

    if (!m)
        return -EINVAL;
    if (m->state != ST_NEW)
        return -EBUSY;
    if (key && !(k = strdup(key)))
        return -ENOMEM;
    free(m->def_key);
    m->def_key = k;
    return 0;
}

int sm_monitor_set_recording_key(sm_monitor *m, const char *key)
{
    char *k = NULL;

    if (!m || (key && !*key))
        return -EINVAL;
    if (m->state != ST_NEW)
        return -EBUSY;
    if (key && !(k = strdup(key)))
        return -ENOMEM;
    free(m->rec_key);
    m->rec_key = k;
    return 0;
}

/* What a delivering sink is told at start. */
static sm_sink_config sink_config(const sm_monitor *m, size_t cap)
{
    const char *scopes[SM_STEP_KEYS];
    sm_sink_config c = {
        .target = m->uri,
        .cap = cap,
        .collectors = m->collectors,
        .period_s = m->interval * m->samples,
        .rank = m->ctx.id.rank,
        .settings = m->sink_settings,
    };
    _Static_assert(sizeof c.node_tag >= SM_SHOWN_MAX(sizeof m->ctx.id.node), "node tag");
    if (m->ctx.id.node[0])
        sm__shown(c.node_tag, sizeof c.node_tag, m->ctx.id.node);
    else
        snprintf(c.node_tag, sizeof c.node_tag, "unknown");
    /* two passes: node-independent scopes first (a rank moved to another
     * node keeps those keys), then the node tier; one key per scope */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < m->nslots && c.nstep_keys < SM_STEP_KEYS; i++) {
            const struct slot *s = &m->slots[i];
            const char *scope = sm_series_scope(s->upstream);
            int seen = 0, tier;

            if (!scope || (s->rank != SM_RANK_OWN && s->rank != m->ctx.id.rank))
                continue;
            tier = strcmp(scope, "node") == 0 || strcmp(scope, "rootfs") == 0;
            for (size_t j = 0; j < c.nstep_keys; j++)
                seen |= strcmp(scopes[j], scope) == 0;
            if (tier == pass && !seen) {
                scopes[c.nstep_keys] = scope;
                c.step_keys[c.nstep_keys++] = s->name;
            }
        }
    return c;
}

/* A positive number from the environment, or 0 when unset; a value that is
 * set but unusable is said once and ignored (the next source applies).  The
 * grammar and the line are the one number parser's (number.h): plain
 * decimal, so SCOPEMETER_INTERVAL=0x10 is refused as --interval 0x10 is. */
static double env_number(const char *name, double lo, double hi, int integer)
{
    const sm_num_spec spec = {name, lo, hi, integer, !integer};
    double v;

    return sm__env_number(name, &spec, &v, "ignored", NULL) > 0 ? v : 0;
}

static void resolve_config(sm_monitor *m)
{
    double v;

    m->interval = m->cfg_interval;
    if (!(m->interval > 0) && (v = env_number("SCOPEMETER_INTERVAL", MIN_INTERVAL, MAX_INTERVAL, 0)) > 0)
        m->interval = v;
    if (!(m->interval > 0) &&
        (v = env_number("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", MIN_INTERVAL, MAX_INTERVAL, 0)) > 0)
        m->interval = v;
    if (!(m->interval > 0))
        m->interval = DEFAULT_INTERVAL;

    m->samples = m->cfg_samples;
    if (m->samples <= 0 && (v = env_number("SCOPEMETER_SAMPLES", 1, MAX_SAMPLES, 1)) > 0)
        m->samples = (int)v;
    if (m->samples <= 0 &&
        (v = env_number("MLFLOW_SYSTEM_METRICS_SAMPLES_BEFORE_LOGGING", 1, MAX_SAMPLES, 1)) > 0)
        m->samples = (int)v;
    if (m->samples <= 0)
        m->samples = DEFAULT_SAMPLES;

    /* a per-job number: the launcher exports it to every rank alike */
    m->budget = m->cfg_budget;
    if (!(m->budget > 0)) {
        const sm_num_spec spec = {"SCOPEMETER_WRITE_BUDGET", SM_WRITE_BUDGET_MIN,
                                  SM_WRITE_BUDGET_MAX, 0, 0};
        if (sm__env_number(spec.name, &spec, &v, "ignored (no write budget: the default rule)",
                           NULL) <= 0)
            v = 0;
        m->budget = v;
    }
}

/* ---- records ------------------------------------------------------------------ */

/* key and value must outlive the push (the sink copies them). */
static void tag_record(sm_record *r, const char *key, const char *value, int64_t ts)
{
    memset(r, 0, sizeof *r);
    r->kind = SM_RECORD_TAG;
    r->key = key;
    r->text = value;
    r->text_len = strlen(value);
    r->timestamp_ms = ts;
}

/* Pushes rank-keyed tags "scopemeter.rankN.<key>" plus extra[] (already full
 * keys, NULL-terminated pairs).  Caller holds mu while the thread may run. */
static void push_tags(sm_monitor *m, const sm_tags *t, const char *const *extra)
{
    int64_t ts = sm__now_ms();
    size_t n = 0;

    char keys[SM_TAGS_MAX][256]; /* the rank-keyed names, alive until the push */

    for (size_t i = 0; t && i < t->n && i < SM_TAGS_MAX && n < m->nrecs_cap; i++) {
        snprintf(keys[i], sizeof keys[i], "scopemeter.rank%d.%s", m->ctx.id.rank, t->v[i].key);
        tag_record(&m->recs[n++], keys[i], t->v[i].value, ts);
    }
    for (size_t i = 0; extra && extra[i] && extra[i + 1] && n < m->nrecs_cap; i += 2)
        tag_record(&m->recs[n++], extra[i], extra[i + 1], ts);
    if (n && m->sink) {
        m->sink->ops->push(m->sink, m->recs, n);
        m->tags_logged += n;
    }
    if (t && t->dropped && !m->tags_dropped_said) {
        sm__log(SM_WARN, "%zu tags did not fit (%d a phase) and are not recorded, the first "
               "scopemeter.rank%d.%s: a bug, please report it", t->dropped, SM_TAGS_MAX,
               m->ctx.id.rank, t->first_dropped);
        m->tags_dropped_said = 1;
    }
}

/* ---- sampling ------------------------------------------------------------------- */

static struct slot *find_slot(sm_monitor *m, size_t hint, const sm_point *p)
{
    if (hint < m->nslots && m->slots[hint].rank == p->rank &&
        strcmp(m->slots[hint].upstream, p->key) == 0)
        return &m->slots[hint]; /* collectors emit in the same order every time */
    for (size_t i = 0; i < m->nslots; i++)
        if (m->slots[i].rank == p->rank && strcmp(m->slots[i].upstream, p->key) == 0)
            return &m->slots[i];
    return NULL;
}

/* One sample into the window's accumulators.  levels_only: the rates
 * (SM_AGG_RATE) of this sample are left out, the levels kept (the final
 * sample, too soon after the last).  May block in a collector (a stuck
 * filesystem); called without mu. */
static void take_sample(sm_monitor *m, int levels_only)
{
    sm_points *p = m->pts;

    p->n = 0;
    p->nonfinite = 0;
    m->last_sample = sm__now_mono();
    sm__collset_sample(&m->set, p);
    for (size_t i = 0; i < p->n; i++) {
        struct slot *s = find_slot(m, i, &p->v[i]);
        if (!s) {
            /* not in the first sample (a collector failing then, or a key a
             * collector emits only sometimes): the first sample decides */
            if (!m->late_key_logged)
                sm__log(SM_WARN, "series %s appeared after the first sample; not recorded "
                       "(the first sample decides which series exist)", p->v[i].key);
            m->late_key_logged = 1;
            continue;
        }
        if (levels_only && p->v[i].agg == SM_AGG_RATE)
            continue;
        s->sum += p->v[i].value;
        s->last = p->v[i].value;
        s->n++;
    }
    if (p->nonfinite && !m->nonfinite_logged) {
        sm__log(SM_WARN, "%zu non-finite sample values skipped (NaN and infinity are not JSON); "
               "said once", p->nonfinite);
        m->nonfinite_logged = 1;
    }
    m->window_n++;
}

/* Logs the current window (complete or partial) and resets it.  Caller
 * holds mu while the thread may run. */
static void emit_window(sm_monitor *m)
{
    int64_t ts = sm__now_ms();
    size_t n = 0;

    for (size_t i = 0; i < m->nslots; i++) {
        struct slot *s = &m->slots[i];
        sm_record *r;
        if (s->n == 0)
            continue; /* every sample of this window failed for it */
        r = &m->recs[n++];
        memset(r, 0, sizeof *r);
        r->kind = SM_RECORD_METRIC;
        r->key = s->name; /* the slot's, alive until free */
        r->value = sm__round1(s->agg == SM_AGG_LAST ? s->last : s->sum / (double)s->n);
        r->timestamp_ms = ts;
        r->step = m->step;
        s->n = 0;
        s->sum = 0;
    }
    m->window_n = 0;
    if (n == 0)
        return;
    m->sink->ops->push(m->sink, m->recs, n);
    m->points_logged += n;
    m->step++;
}

static void release(sm_monitor *m);

static void *sampling_thread(void *arg)
{
    sm_monitor *m = arg;
    double next = sm__now_mono() + m->interval;
    sm_tags end = {0};
    sm_tags window; /* the window tags: reused, nothing allocated per window */
    int orphan;

    pthread_mutex_lock(&m->mu);
    while (!m->stop_flag) {
        double now = sm__now_mono();
        if (now < next) {
            struct timespec ts;
            sm__mono_timespec(next, &ts);
            pthread_cond_timedwait(&m->cv, &m->mu, &ts);
            continue;
        }
        pthread_mutex_unlock(&m->mu);
        take_sample(m, 0);
        /* the tags whose value changed (docs/design.md §9) ride with the
         * window's points, so they reach the store even if the process is
         * killed later; collectors may read a file for them: outside mu */
        window.n = window.dropped = 0;
        if (m->window_n >= m->samples)
            sm__collset_tags(&m->set, SM_TAGS_WINDOW, &window);
        pthread_mutex_lock(&m->mu);
        if (m->window_n >= m->samples && !m->orphaned) {
            emit_window(m);
            push_tags(m, &window, NULL);
        }
        next += m->interval;
        now = sm__now_mono();
        if (next <= now) /* fell behind (suspended, stopped): re-anchor, no burst */
            next = now + m->interval;
    }
    pthread_mutex_unlock(&m->mu);

    /* stop asked: the final sample, the last partial window, the end tags.
     * The final sample is always taken: the state at the end (an OOM kill,
     * a tmpfs the job filled) is the one a run is read for, and the peak
     * tags below must see it.  Only its rates are left out when it comes a
     * few milliseconds after a scheduled one (a rate over no time: 0 % CPU),
     * unless nothing at all has been sampled since the baseline (a run
     * shorter than one interval still has every series). */
    take_sample(m, !(m->window_n == 0 && m->points_logged == 0) &&
                       sm__now_mono() - m->last_sample <
                           (m->interval / 2 < 1.0 ? m->interval / 2 : 1.0));
    /* end tags read cgroup files: outside mu, so that stop's bounded wait
     * (which needs mu back) returns on time even if a read blocks */
    sm__collset_tags(&m->set, SM_TAGS_END, &end);
    pthread_mutex_lock(&m->mu);
    if (!m->orphaned) {
        if (m->window_n > 0)
            emit_window(m);
        if (m->points_logged == 0) {
            char why[200];
            const char *extra[3] = {"scopemeter.skipped", why, NULL};
            snprintf(why, sizeof why, "rank %d: no sample produced a value during the run",
                     m->ctx.id.rank);
            sm__log(SM_WARN, "%s; nothing was recorded", why);
            push_tags(m, &end, extra);
        } else {
            push_tags(m, &end, NULL);
        }
    }
    m->thread_done = 1;
    orphan = m->orphaned;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    if (orphan)
        release(m); /* stop gave up on us: the last one out frees */
    return NULL;
}

/* ---- start ---------------------------------------------------------------------- */

/* Releases the rank's recorder lock (docs/design.md §9), if held. */
static void unlock_rank(sm_monitor *m)
{
    if (m->lock_fd >= 0)
        close(m->lock_fd);
    m->lock_fd = -1;
}

/* Closes what start opened when start does not end with a running thread. */
static void start_cleanup(sm_monitor *m)
{
    if (m->set_open)
        sm__collset_close(&m->set);
    m->set_open = 0;
    unlock_rank(m);
}

#define SKIP_FLUSH_S 2.0

/* Start could not produce a single series: one line, and the reason as the
 * scopemeter.skipped tag when a sink can take it (docs/design.md §3, §6). */
static int skip(sm_monitor *m, const char *why, char *err, size_t errlen)
{
    char value[400];
    const char *extra[3] = {"scopemeter.skipped", value, NULL};
    sm_sink_config cfg = sink_config(m, BUFFER_FLOOR);
    char ferr[256] = "";
    int rc = 0;

    snprintf(value, sizeof value, "rank %d: %s", m->ctx.id.rank, why);
    sm__log(SM_WARN, "nothing to record: %s (tag scopemeter.skipped)", why);
    snprintf(err, errlen, "nothing to record: %s", why);
    if (!m->recs) {
        m->recs = calloc(TAGS_MAX, sizeof *m->recs);
        m->nrecs_cap = m->recs ? TAGS_MAX : 0;
    }
    if (m->use_queue)
        rc = sm__sink_queue_new(cfg.cap, &m->sink);
    else
        rc = m->factory(&cfg, ferr, sizeof ferr, &m->sink);
    if (rc == 0 && m->sink) {
        /* start runs before training: never hold it for the whole stop
         * timeout on a tag (a server that is down would cost 30 s) */
        double bound = m->stop_timeout < SKIP_FLUSH_S ? m->stop_timeout : SKIP_FLUSH_S;
        push_tags(m, NULL, extra);
        if (m->sink->ops->flush(m->sink, sm__now_mono() + bound) < 0)
            sm__log(SM_WARN, "could not deliver the scopemeter.skipped tag within %g s", bound);
        if (!m->use_queue) { /* the queue stays for the binding to drain */
            m->sink->ops->close(m->sink);
            m->sink = NULL;
        }
    } else if (ferr[0]) {
        sm__log(SM_WARN, "cannot record the scopemeter.skipped tag: %s", ferr);
    }
    start_cleanup(m);
    m->state = ST_STOPPED;
    return -ENODATA;
}

/* Buffer size in records: one hour of points by default (docs/monitor.md),
 * with room for the window tags that may ride with each window (7 keys
 * have a window phase, docs/series.md; WINDOW_TAGS_ROOM is what the buffer
 * was sized with before SM_TAGS_MAX grew for the end tags): an outage of an
 * hour loses no point to them.  The ring is resident only where written (zalloc.c). */
static size_t buffer_records(const sm_monitor *m)
{
    double per_hour, want;

    if (m->buffer_points)
        return m->buffer_points; /* within the bound: the setter refuses others */
    /* windows an hour, rounded up: ceil(x) as -floor(-x), no libm (number.h) */
    per_hour = (double)(m->nslots + WINDOW_TAGS_ROOM) *
               -sm__floor(-3600.0 / (m->interval * m->samples)) + 2 * (WINDOW_TAGS_ROOM + 8);
    want = per_hour < BUFFER_MIN ? BUFFER_MIN : per_hour > BUFFER_MAX ? BUFFER_MAX : per_hour;
    return (size_t)want;
}

/* Start, step 2: open the collectors and take the baseline sample, whose
 * keys decide the series (its values are not logged: the first window's
 * points cover the time from here on).  0, -ENODATA after skip(), or -errno. */
static int open_series(sm_monitor *m, char *err, size_t errlen)
{
    sm_notes notes;
    int attached;

    m->pts = calloc(1, sizeof *m->pts);
    if (!m->pts) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    memset(&notes, 0, sizeof notes);
    attached = sm__collset_open(&m->set, &m->ctx, &notes);
    for (size_t i = 0; i < notes.n; i++)
        sm__log(notes.level[i], "%s", notes.line[i]);
    if (attached < 0) {
        snprintf(err, errlen, "cannot open the collectors: %s", strerror(-attached));
        return attached;
    }
    m->set_open = 1;
    if (attached == 0)
        return skip(m, "no collector could start (see the lines above)", err, errlen);

    m->pts->n = 0;
    m->last_sample = sm__now_mono();
    sm__collset_sample(&m->set, m->pts);
    if (m->pts->n == 0)
        return skip(m, "the first sample produced no value (see the lines above)", err, errlen);
    m->slots = calloc(m->pts->n, sizeof *m->slots);
    if (!m->slots) {
        start_cleanup(m);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    for (size_t i = 0; i < m->pts->n; i++) {
        const sm_point *p = &m->pts->v[i];
        struct slot *s = &m->slots[m->nslots];
        int dup = 0;
        for (size_t j = 0; j < m->nslots; j++)
            dup |= m->slots[j].rank == p->rank && strcmp(m->slots[j].upstream, p->key) == 0;
        if (dup)
            continue;
        if (strlen(p->key) >= sizeof s->upstream ||
            sm_series_name(p->key, p->rank == SM_RANK_OWN ? m->ctx.id.rank : p->rank,
                           m->ctx.id.node, s->name, sizeof s->name) < 0) {
            /* a family no naming rule covers: a bug the tests catch */
            sm__log(SM_WARN, "series %s has no naming rule; not recorded", p->key);
            continue;
        }
        snprintf(s->upstream, sizeof s->upstream, "%s", p->key);
        s->rank = p->rank;
        s->agg = p->agg;
        m->nslots++;
    }
    if (m->nslots == 0)
        return skip(m, "no series of the first sample has a naming rule", err, errlen);

    m->nrecs_cap = m->nslots > TAGS_MAX ? m->nslots : TAGS_MAX;
    m->recs = calloc(m->nrecs_cap, sizeof *m->recs);
    if (!m->recs) {
        start_cleanup(m);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    return 0;
}

/* Start, step 1 (no budget) or 2b (a budget): the write budget's rule on the
 * interval (docs/design.md §5), from n and this collector's own series (the
 * baseline's keys, so after step 2; the default rule needs none). */
static void apply_budget(sm_monitor *m)
{
    double period = m->interval * m->samples;
    double need, iv;

    iv = sm__budget_interval(m->collectors, (int)m->nslots, m->interval, m->samples, m->budget,
                             &need);
    if (m->budget > 0 && need > SM_WRITE_BUDGET_PERIOD_MAX && need > period)
        sm__log(SM_WARN, "write budget %g rows/s cannot be met: %d collector%s x %zu series "
               "need a period of %g s; logging every %g s (at most %g s: a point an hour), "
               "%.4g rows/s; raise the budget (scopemeter plan --write-budget says the server it "
               "needs) or record fewer collectors", m->budget, m->collectors,
               m->collectors == 1 ? "" : "s", m->nslots, need, iv * m->samples,
               SM_WRITE_BUDGET_PERIOD_MAX, m->collectors * (double)m->nslots / (iv * m->samples));
    if (iv != m->interval && m->budget > 0)
        sm__log(SM_INFO, "write budget %g rows/s: %d collector%s x %zu series, logging period "
               "raised from %g s to %g s (interval %g s -> %g s x %d sample%s)", m->budget,
               m->collectors, m->collectors == 1 ? "" : "s", m->nslots, period,
               iv * m->samples, m->interval, iv, m->samples, m->samples == 1 ? "" : "s");
    else if (iv != m->interval)
        sm__log(SM_INFO, "write-load cap: %d collectors > 4, logging period raised from %g s to "
               "%g s (interval %g s -> %g s x %d sample%s)", m->collectors, period,
               iv * m->samples, m->interval, iv, m->samples, m->samples == 1 ? "" : "s");
    m->interval = iv;
}

/* Start, step 3: the sink (the queue, or the factory's: REST, JSONL). */
static int open_sink(sm_monitor *m, char *err, size_t errlen)
{
    int rc;

    if (m->use_queue) {
        rc = sm__sink_queue_new(buffer_records(m), &m->sink);
        if (rc < 0)
            snprintf(err, errlen, "cannot create the queue: %s", strerror(-rc));
    } else {
        sm_sink_config cfg = sink_config(m, buffer_records(m));
        rc = m->factory(&cfg, err, errlen, &m->sink);
        if (rc == 0 && !m->sink)
            rc = -EINVAL;
        if (rc < 0 && !err[0])
            snprintf(err, errlen, "cannot create the sink: %s", strerror(-rc));
    }
    if (rc < 0) {
        m->sink = NULL;
        start_cleanup(m);
    }
    return rc;
}

/* Start, step 4: the start tags (docs/design.md §3). */
static void push_start_tags(sm_monitor *m)
{
    sm_tags start_tags = {0};
    char v_interval[32], v_samples[32], v_collectors[32], v_budget[32], node_key[64];
    char node[SM_SHOWN_MAX(sizeof m->ctx.id.node)];
    char build[sizeof start_tags.v[0].value];
    const char *extra[11];
    int pt = 0;

    sm__collset_tags(&m->set, SM_TAGS_START, &start_tags);
    sm__build_tag(build, sizeof build);
    sm__tag_add(&start_tags, "build", "%s", build);
    snprintf(node_key, sizeof node_key, "scopemeter.rank%d.node", m->ctx.id.rank);
    snprintf(v_interval, sizeof v_interval, "%g", m->interval);
    snprintf(v_samples, sizeof v_samples, "%d", m->samples);
    snprintf(v_collectors, sizeof v_collectors, "%d", m->collectors);
    extra[pt++] = node_key;
    /* the name escaped (names.c): the tag is printed by the report's tables */
    extra[pt++] = m->ctx.id.node[0] ? sm__shown(node, sizeof node, m->ctx.id.node) : "unknown";
    extra[pt++] = "scopemeter.interval_s";
    extra[pt++] = v_interval;
    extra[pt++] = "scopemeter.samples";
    extra[pt++] = v_samples;
    extra[pt++] = "scopemeter.collectors";
    extra[pt++] = v_collectors;
    if (m->budget > 0) { /* unset: the tags of the default rule, as before the budget */
        sm__num_shortest(v_budget, sizeof v_budget, m->budget, false);
        extra[pt++] = "scopemeter.write_budget_rows_per_s";
        extra[pt++] = v_budget;
    }
    extra[pt] = NULL;
    push_tags(m, &start_tags, extra);
    if (!m->ctx.id.node[0] && m->ctx.id.world_size > 1)
        sm__log(SM_INFO, "no node name (SCOPEMETER_NODE_NAME, NODE_NAME, SLURMD_NODENAME unset): "
               "tag scopemeter.rank%d.node=unknown, node_*/rootfs_* keys without the node tier",
               m->ctx.id.rank);
}

/* Start, step 5: the sampling thread.  It takes no signals (the
 * application's threads handle them); it holds a reference beside the
 * owner's. */
static int start_thread(sm_monitor *m, char *err, size_t errlen)
{
    sigset_t all, old;
    int rc;

    m->state = ST_RUNNING;
    atomic_store(&m->refs, 2);
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = pthread_create(&m->thread, NULL, sampling_thread, m);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        atomic_store(&m->refs, 1);
        m->state = ST_FAILED;
        m->sink->ops->flush(m->sink, sm__now_mono() + m->stop_timeout);
        if (!m->use_queue) {
            m->sink->ops->close(m->sink);
            m->sink = NULL;
        }
        start_cleanup(m);
        snprintf(err, errlen, "cannot start the sampling thread: %s", strerror(rc));
        return -rc;
    }
    pthread_setname_np(m->thread, "scopemeter");
    return 0;
}

/* One recorder per rank and run (docs/design.md §9, reclock.c): bind the
 * rank's name before anything is written to the run.  0 when held (or when
 * the lock cannot be taken for another reason: said, and recording goes on,
 * as before the lock existed); SM_NOT_COLLECTING after one line when
 * another process holds it. */
static int lock_rank(sm_monitor *m, char *err, size_t errlen)
{
    char holder[160], line[512];
    int rc = sm__reclock_bind(m->ctx.rec_key, m->ctx.id.rank, &m->lock_fd);

    if (rc == 0)
        return 0;
    if (rc != -EADDRINUSE) {
        sm__log(SM_WARN, "cannot bind the recorder lock of rank %d (%s); a second recorder of "
               "this rank and run would not be detected", m->ctx.id.rank, strerror(-rc));
        return 0;
    }
    sm__reclock_holder(m->ctx.rec_key, m->ctx.id.rank, holder, sizeof holder);
    sm__line(line, sizeof line, "rank %d of run %s already has a recorder: %s; this one records "
            "nothing", m->ctx.id.rank, m->ctx.rec_key, holder);
    sm__log(SM_INFO, "%s", line);
    snprintf(err, errlen, "%s", line);
    m->state = ST_NOT_COLLECTING;
    return SM_NOT_COLLECTING;
}

int sm_monitor_start(sm_monitor *m, char *err, size_t errlen)
{
    char why[320];
    char dummy[1];
    int rc;

    if (!err || errlen == 0) {
        err = dummy;
        errlen = sizeof dummy;
    }
    err[0] = '\0';
    if (!m)
        return -EINVAL;
    if (m->state != ST_NEW) {
        snprintf(err, errlen, "this monitor was already started; a monitor starts once");
        return -EALREADY;
    }
    if (!m->use_queue && !m->factory) {
        snprintf(err, errlen, "no sink: call sm_monitor_set_run() (MLflow tracking server), "
                 "sm_monitor_set_jsonl() (a local file) or sm_monitor_use_queue() (a binding "
                 "drains) before sm_monitor_start()");
        return -EINVAL;
    }
    m->state = ST_FAILED; /* until proven otherwise */
    m->pid = getpid();
    resolve_config(m);

    rc = sm__ctx_init(&m->ctx);
    if (rc < 0) {
        snprintf(err, errlen, "SCOPEMETER_SYSROOT: %s", strerror(-rc));
        return rc;
    }
    if (m->has_identity)
        m->ctx.id = m->id; /* the caller's, not the launcher's environment */
    m->ctx.rec_key = m->rec_key ? m->rec_key : m->def_key;
    m->ctx.all_workers = m->all_workers;
    if (m->cfg_detail != SM_DEFAULT)
        m->ctx.detail = m->cfg_detail; /* the caller's, not SCOPEMETER_DETAIL */
    m->ctx.owns_peak = 1;
    if (!sm_collects(&m->ctx.id, m->all_workers, why, sizeof why)) {
        /* under all_workers a sibling holds its rank's lock: the pod's
         * collector finds its process tree through it (§9) */
        if (m->all_workers && !m->ctx.id.invalid[0] && m->ctx.rec_key &&
            lock_rank(m, err, errlen) != 0)
            return SM_NOT_COLLECTING;
        if (m->lock_fd >= 0)
            sm__line_add(why, sizeof why, ", its process tree included (process_*/rank%d)",
                        m->ctx.id.rank);
        sm__log(m->ctx.id.invalid[0] ? SM_WARN : SM_INFO, "%s", why);
        snprintf(err, errlen, "%s", why);
        m->state = ST_NOT_COLLECTING;
        return SM_NOT_COLLECTING;
    }
    if (m->ctx.rec_key && lock_rank(m, err, errlen) != 0)
        return SM_NOT_COLLECTING;
    m->collectors = sm__collectors_of(m->ctx.id.world_size, m->ctx.id.local_world_size,
                                     m->all_workers);
    /* the default rule needs no series count: applied, and said, before the
     * collectors open, as it always was; a budget needs the baseline's */
    if (!(m->budget > 0))
        apply_budget(m);
    if ((rc = open_series(m, err, errlen)) < 0)
        return rc;
    if (m->budget > 0)
        apply_budget(m);
    if ((rc = open_sink(m, err, errlen)) < 0)
        return rc;
    push_start_tags(m);
    if ((rc = start_thread(m, err, errlen)) < 0)
        return rc;
    if (m->sink_started) /* the companion (sink.h): the run and the rank are known */
        m->sink_started(m->sink_settings, m->uri, m->ctx.id.rank);
    if (m->budget > 0)
        sm__log(SM_INFO, "collecting %zu series every %g s (%d collector%s, write budget %g "
               "rows/s)", m->nslots, m->interval * m->samples, m->collectors,
               m->collectors == 1 ? "" : "s", m->budget);
    else
        sm__log(SM_INFO, "collecting %zu series every %g s (%d collector%s)", m->nslots,
               m->interval * m->samples, m->collectors, m->collectors == 1 ? "" : "s");
    return 0;
}

/* ---- stop, free ---------------------------------------------------------------- */

void sm__log_summary(int64_t windows, uint64_t points, uint64_t tags, const sm_sink_counts *c)
{
    uint64_t lost = c->overflow + c->refused;

    if (lost > 0)
        sm__log(SM_WARN, "%llu points dropped during the run (buffer full or refused; oldest "
               "first)", (unsigned long long)lost);
    /* The process's own account, one line: a reader checks it against the
     * run (tests/soak counts every rank's points against it). */
    sm__log(SM_INFO, "logged %lld window%s (%llu point%s, %llu tag%s): %llu %s, %llu dropped "
           "(buffer full), %llu refused, %llu %s at stop", (long long)windows,
           windows == 1 ? "" : "s", (unsigned long long)points, points == 1 ? "" : "s",
           (unsigned long long)tags, tags == 1 ? "" : "s", (unsigned long long)c->delivered,
           c->to_file ? "written" : "delivered", (unsigned long long)c->overflow,
           (unsigned long long)c->refused, (unsigned long long)c->undelivered,
           c->to_file ? "not written" : "undelivered");
    if (c->spooled)
        sm__log(SM_INFO, "spool: %llu points spooled past the buffer: %llu replayed, %llu "
               "dropped (spool full), %llu left for `scopemeter sync`",
               (unsigned long long)c->spooled, (unsigned long long)c->replayed,
               (unsigned long long)c->spool_dropped, (unsigned long long)c->spool_left);
}

int sm_monitor_stop(sm_monitor *m)
{
    double deadline;
    int rc = 0, joined = 0, frc;
    uint64_t dropped;

    if (!m)
        return -EINVAL;
    if (m->pid && m->pid != getpid())
        return 0; /* a forked child: the thread and the sink are the parent's */
    pthread_mutex_lock(&m->stop_mu);
    if (m->state != ST_RUNNING) {
        unlock_rank(m); /* a sibling's lock (not collecting) goes with its stop */
        rc = m->stop_rc;
        pthread_mutex_unlock(&m->stop_mu);
        return rc;
    }
    deadline = sm__now_mono() + m->stop_timeout;

    /* 1. stop sampling: the thread takes the final sample, logs the last
     * partial window and the end tags, and exits */
    pthread_mutex_lock(&m->mu);
    m->stop_flag = 1;
    pthread_cond_broadcast(&m->cv);
    while (!m->thread_done && sm__now_mono() < deadline) {
        struct timespec ts;
        sm__mono_timespec(deadline, &ts);
        pthread_cond_timedwait(&m->cv, &m->mu, &ts);
    }
    if (m->thread_done) {
        pthread_mutex_unlock(&m->mu);
        pthread_join(m->thread, NULL);
        atomic_fetch_sub(&m->refs, 1); /* the thread's; the owner's remains */
        joined = 1;
    } else {
        m->orphaned = 1; /* from now on it pushes nothing and frees on exit */
        pthread_mutex_unlock(&m->mu);
        pthread_detach(m->thread);
        sm__log(SM_WARN, "the sampling thread did not finish within the stop timeout (%g s); "
               "left behind without its last window and end tags", m->stop_timeout);
        rc = -ETIMEDOUT;
    }

    /* 2. flush, within what is left of the timeout; a sink that gives up
     * says so itself, with what it could not deliver (one line, not two) */
    frc = m->sink->ops->flush(m->sink, deadline);
    if (frc < 0)
        rc = -ETIMEDOUT;
    dropped = m->sink->ops->dropped(m->sink);
    /* The closing line, from whoever delivers: a delivering sink's account
     * here; a queue's binding reports with sm_monitor_report().  Read under
     * mu: a thread left behind may still be finishing. */
    if (m->sink->ops->counts) {
        sm_sink_counts c = {0}; /* a sink sets what it knows (to_file: only the JSONL one) */
        m->sink->ops->counts(m->sink, &c);
        pthread_mutex_lock(&m->mu);
        sm__log_summary(m->step, m->points_logged, m->tags_logged, &c);
        pthread_mutex_unlock(&m->mu);
    }

    /* 3. detach: close the collectors and the REST sink; the queue stays for
     * the binding's last drains until sm_monitor_free() */
    if (joined) {
        sm__collset_close(&m->set);
        m->set_open = 0;
        pthread_mutex_lock(&m->mu);
        m->dropped_final = dropped;
        if (!m->use_queue) {
            m->sink->ops->close(m->sink);
            m->sink = NULL;
        }
        pthread_mutex_unlock(&m->mu);
    }
    /* 4. after the monitor's own end: a kill during the stop is still the
     * companion's to see */
    if (m->sink_stopped)
        m->sink_stopped(m->sink_settings);
    m->stop_rc = rc;
    m->state = ST_STOPPED;
    unlock_rank(m); /* after the flush: the run has everything this recorder wrote */
    pthread_mutex_unlock(&m->stop_mu);
    return rc;
}

/* Frees everything; runs when the last reference goes (the owner's, or a
 * left-behind thread's). */
static void destroy(sm_monitor *m)
{
    if (m->set_open)
        sm__collset_close(&m->set);
    if (m->sink)
        m->sink->ops->close(m->sink);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    pthread_mutex_destroy(&m->stop_mu);
    free(m->pts);
    free(m->slots);
    free(m->recs);
    free(m->uri);
    drop_settings(m);
    free(m->rec_key);
    if (m->lock_fd >= 0)
        close(m->lock_fd);
    free(m);
}

static void release(sm_monitor *m)
{
    if (atomic_fetch_sub(&m->refs, 1) == 1)
        destroy(m);
}

void sm_monitor_free(sm_monitor *m)
{
    if (!m)
        return;
    if (m->pid && m->pid != getpid())
        return; /* a forked child: its copy is left alone (locks may be held) */
    sm_monitor_stop(m);
    release(m);
}

/* ---- accessors, drain ------------------------------------------------------------ */

double sm_monitor_interval(const sm_monitor *m)
{
    return m ? m->interval : 0;
}

int sm_monitor_samples(const sm_monitor *m)
{
    return m ? m->samples : 0;
}

int sm_monitor_collectors(const sm_monitor *m)
{
    return m ? m->collectors : 0;
}

double sm_monitor_write_budget(const sm_monitor *m)
{
    return m ? m->budget : 0;
}

uint64_t sm_monitor_dropped(const sm_monitor *m)
{
    sm_monitor *mm = (sm_monitor *)m; /* the mutex is not part of the value */
    uint64_t n;

    if (!m)
        return 0;
    pthread_mutex_lock(&mm->mu);
    n = mm->sink ? mm->sink->ops->dropped(mm->sink) : mm->dropped_final;
    pthread_mutex_unlock(&mm->mu);
    return n;
}

size_t sm_monitor_queued(const sm_monitor *m)
{
    sm_monitor *mm = (sm_monitor *)m; /* the mutex is not part of the value */
    size_t n = 0;

    if (!m || !m->use_queue)
        return 0;
    pthread_mutex_lock(&mm->mu);
    if (mm->sink)
        n = sm__sink_queue_len(mm->sink);
    pthread_mutex_unlock(&mm->mu);
    return n;
}

int sm_monitor_report(sm_monitor *m, uint64_t delivered, uint64_t refused, uint64_t undelivered)
{
    sm_sink_counts c = {.delivered = delivered, .refused = refused, .undelivered = undelivered};

    if (!m || !m->use_queue || m->state != ST_STOPPED)
        return -EINVAL;
    pthread_mutex_lock(&m->mu);
    c.overflow = m->sink ? m->sink->ops->dropped(m->sink) : m->dropped_final;
    sm__log_summary(m->step, m->points_logged, m->tags_logged, &c);
    pthread_mutex_unlock(&m->mu);
    return 0;
}

int sm_monitor_drain_records(sm_monitor *m, sm_record *out, int cap, size_t record_size,
                             double timeout_s)
{
    if (!m || !out || cap <= 0 || !m->use_queue || record_size < SM_RECORD_SIZE_MIN)
        return -EINVAL;
    /* A queue sink lives from start to free, so a binding's drain thread and
     * a stop on another thread never race on it; the ring ends the stream. */
    if (m->sink)
        return sm__sink_queue_drain(m->sink, out, cap, record_size, timeout_s);
    /* not started yet; or not collecting / start failed: no stream at all */
    return m->state == ST_NEW ? -EINVAL : -EPIPE;
}
