/*
 * _native.c — the CPython extension scopemeter._native over the public C API
 * (include/scopemeter.h, scopemeter_mlflow.h) and, where no public call can
 * do it, these internals (linked statically, never exported):
 *   the delivery policy, for the front's MlflowClient transport
 *     (mlflow/deliver.h: sm__deliver_new, _unref, _cancel, _next, _done,
 *     _shown, _check_json, sm__monitor_set_delivery, and sm__ring_str for a
 *     batch's strings): the C API has no pluggable transport, and a public
 *     one would freeze a protocol only this file drives;
 *   what an answer means (mlflow/answer.h: sm__rest_answer_http, _none,
 *     sm__rest_result_clear): an MlflowClient answer is read exactly as the
 *     libcurl transport reads it, so both say the same lines;
 *   the one number parser (number.h: sm__num_parse, sm__num_check), shared
 *     with every surface by design (docs/design.md §8), so the front's range
 *     checks say what the CLI says;
 *   the detail level's words (internal.h: sm__detail_of), those of
 *     SCOPEMETER_DETAIL, for detail=.
 * Written against the Python Limited API (3.9), so one abi3 wheel serves
 * every CPython from 3.9 on.
 *
 * What it exposes, and nothing more:
 *   Monitor      a sm_monitor that ships itself through the REST sink
 *                (tracking_uri + run_id given: sm_monitor_set_run, with
 *                sm_monitor_set_headers), through a Delivery (delivery=
 *                given: the front's MlflowClient path), or else feeds the
 *                pull queue of the C API (sm_monitor_use_queue: drain(timeout,
 *                cap), report(...); the front no longer uses it): start(),
 *                stop(timeout), interval / samples / collectors / dropped.
 *                The sampling and shipping threads are the C engine's and
 *                never touch Python; start(), drain() and stop() release the
 *                GIL while they wait, so training threads run meanwhile.
 *   Delivery     the engine's delivery policy (src/mlflow/deliver.c) for the
 *                front's MlflowClient thread to drive: next() (GIL released)
 *                hands out a batch, done() reports what the store answered,
 *                check() judges the run check; Monitor(delivery=...) delivers
 *                through it.  Every rule of delivery stays in C.
 *   plan(...)    sm_plan_estimate (the same figures as `scopemeter plan`).
 *   identity()   sm_identity_read_env (rank, local rank, sizes, node).
 *   series_name(key, rank, node), series_scope(key), series_parse(key), version().
 *   shown(name)  a name as the engine prints and tags it (one escaping).
 *   set_log(fn)  where the engine's lines of the caller's thread go: the
 *                front's logging (see "the engine's lines" below).
 *   parse_number(value, name, ...)  the one number parser (src/util/number.h):
 *                the front's range checks say what the CLI says.
 *
 * Which path (_route.py), the hooks (atexit, SIGTERM, MLflow's run end:
 * _front.py) and the MlflowClient path for other stores (_transport.py,
 * _session.py) are Python: this file only crosses the language boundary.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "number.h"
#include "scopemeter_mlflow.h"
#include "mlflow/deliver.h"

/* Records copied per drain() call at most; MLflow's log_batch takes 1000
 * metrics per request, so one drain is at most one request. */
#define DRAIN_CAP_MAX 1000

typedef struct {
    PyObject_HEAD
    sm_monitor *m;
    sm_record *buf;   /* drain buffer, DRAIN_CAP_MAX records, lazily allocated */
    int draining;     /* one drainer at a time (checked under the GIL) */
    int stopping;     /* stop() calls under way (counted under the GIL) */
    int started;
} MonitorObject;

/* Delivery: the C delivery policy (src/mlflow/deliver.c) that the front's
 * MlflowClient thread drives: next() / done().  The type, for Monitor's
 * delivery= check. */
typedef struct {
    PyObject_HEAD
    sm_deliver *d;
    int in_next;      /* one driver at a time (checked under the GIL) */
} DeliveryObject;
static PyObject *delivery_type;

/* OSError(errno, "what: why"): the front tells a missing run (ENOENT) from
 * other failures by e.errno. */
static PyObject *raise_errno(int rc, const char *what, const char *err)
{
    int e = rc < 0 ? -rc : rc;
    PyObject *args = Py_BuildValue("(is)", e, "");
    PyObject *msg;

    if (!args)
        return NULL;
    if (err && *err)
        msg = PyUnicode_FromFormat("%s: %s", what, err);
    else
        msg = PyUnicode_FromFormat("%s: %s", what, strerror(e));
    if (!msg) {
        Py_DECREF(args);
        return NULL;
    }
    PyTuple_SetItem(args, 1, msg); /* steals msg, replaces "" */
    PyErr_SetObject(PyExc_OSError, args);
    Py_DECREF(args);
    return NULL;
}

/* ---- the engine's lines in the caller's thread -------------------------------
 * A call of this module that runs the engine in its caller's thread (start,
 * stop, the run check: what enable_system_metrics() and
 * disable_system_metrics() do) takes that thread's lines (sm__log_thread_hook)
 * and, once the engine has returned and the GIL is back, hands them in order
 * to the function the front set with set_log(): logging.getLogger("scopemeter")
 * then applies the application's level and handlers (docs/python.md).  Never
 * into Python from inside the engine: it may hold its own locks there, which
 * a thread holding the GIL may be waiting for.  The sampling and shipping
 * threads are not the caller's: their lines stay on stderr. */
static PyObject *log_fn; /* set_log()'s callable; NULL: every line on stderr */

struct taken {
    size_t n, cap;
    struct taken_line {
        int warn;
        char *text;
    } *v;
    int on;
    sm__log_hook prev;
};

/* The hook (GIL released): keeps a copy; out of memory, the line goes to
 * stderr after all (< 0) rather than being lost. */
static int take_line(int level, const char *msg, void *userdata)
{
    struct taken *t = userdata;
    char *text;

    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 8;
        struct taken_line *v = realloc(t->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        t->v = v;
        t->cap = cap;
    }
    text = strdup(msg);
    if (!text)
        return -ENOMEM;
    t->v[t->n].warn = level == SM_LOG_WARNING;
    t->v[t->n++].text = text;
    return 0;
}

/* Before the engine runs (GIL held). */
static void lines_take(struct taken *t)
{
    sm__log_hook h = {take_line, t};

    memset(t, 0, sizeof *t);
    t->on = log_fn != NULL;
    if (t->on)
        sm__log_thread_hook(&h, &t->prev);
}

/* After it returned (GIL held): the hook this thread had before comes back,
 * then every line goes to log_fn(warn, msg); one log_fn refuses (raises) is
 * written to stderr as the engine writes it.  A pending exception is kept. */
static void lines_give(struct taken *t)
{
    PyObject *type, *value, *tb, *fn = log_fn;

    if (!t->on)
        return;
    sm__log_thread_hook(&t->prev, NULL);
    PyErr_Fetch(&type, &value, &tb);
    Py_XINCREF(fn); /* a set_log() from inside fn must not free it under us */
    for (size_t i = 0; i < t->n; i++) {
        const char *text = t->v[i].text;
        PyObject *msg = PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
        PyObject *r = msg && fn ? PyObject_CallFunction(fn, "(OO)", t->v[i].warn ? Py_True
                                                                                 : Py_False, msg)
                                : NULL;

        if (!r) {
            PyErr_Clear();
            sm__log(t->v[i].warn ? SM_WARN : SM_INFO, "%s", text);
        }
        Py_XDECREF(msg);
        Py_XDECREF(r);
        free(t->v[i].text);
    }
    Py_XDECREF(fn);
    free(t->v);
    t->v = NULL;
    t->n = t->cap = 0;
    PyErr_Restore(type, value, tb);
}

/* headers: None, or a sequence of (name, value) str pairs -> a NULL-terminated
 * name, value array pointing into the tuple's str objects (*keep holds them). */
static int header_pairs(PyObject *headers, const char ***out, PyObject **keep)
{
    Py_ssize_t n;
    const char **v;

    *out = NULL;
    *keep = NULL;
    if (headers == Py_None)
        return 0;
    *keep = PySequence_Tuple(headers);
    if (!*keep)
        return -1;
    n = PyTuple_Size(*keep);
    v = calloc((size_t)(2 * n + 1), sizeof *v);
    if (!v) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyTuple_GetItem(*keep, i);
        const char *name, *value;

        if (!PyArg_ParseTuple(pair, "ss", &name, &value)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "headers must be (name, value) pairs of str");
            free(v);
            return -1;
        }
        v[2 * i] = name;
        v[2 * i + 1] = value;
    }
    *out = v;
    return 0;
}

/* ---- Monitor ------------------------------------------------------------- */


static int Monitor_init(PyObject *self_, PyObject *args, PyObject *kw)
{
    MonitorObject *self = (MonitorObject *)self_;
    static char *kwlist[] = {"interval", "samples", "all_workers", "stop_timeout",
                             "buffer_points", "tracking_uri", "run_id", "headers",
                             "recording_key", "delivery", "write_budget", "detail", NULL};
    double interval = 0, stop_timeout = 30, write_budget = 0;
    int samples = 0, all_workers = 0, detail = SM_DEFAULT;
    Py_ssize_t buffer_points = 0;
    const char *uri = NULL, *run_id = NULL, *rec_key = NULL;
    PyObject *headers = Py_None, *keep = NULL, *delivery = Py_None;
    const char **pairs = NULL;
    int rc;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "|dipdnzzOzOdi", kwlist, &interval, &samples,
                                     &all_workers, &stop_timeout, &buffer_points, &uri,
                                     &run_id, &headers, &rec_key, &delivery, &write_budget,
                                     &detail))
        return -1;
    if (delivery != Py_None && (!PyObject_TypeCheck(delivery, (PyTypeObject *)delivery_type) ||
                                uri)) {
        PyErr_SetString(PyExc_ValueError, "delivery must be a Delivery, without tracking_uri");
        return -1;
    }
    if ((uri == NULL) != (run_id == NULL)) {
        PyErr_SetString(PyExc_ValueError, "tracking_uri and run_id go together");
        return -1;
    }
    if (self->m) {
        PyErr_SetString(PyExc_RuntimeError, "Monitor already initialised");
        return -1;
    }
    self->m = sm_monitor_new();
    if (!self->m) {
        PyErr_NoMemory();
        return -1;
    }
    /* <= 0 means "the environment's or the default" in the C API. */
    rc = sm_monitor_set_interval(self->m, interval);
    if (rc == 0)
        rc = sm_monitor_set_samples(self->m, samples);
    if (rc == 0)
        rc = sm_monitor_set_all_workers(self->m, all_workers);
    /* Python says "the default" with None, never with the C API's SM_DEFAULT:
     * a negative stop timeout stays an error here */
    if (rc == 0)
        rc = stop_timeout < 0 ? -EINVAL : sm_monitor_set_stop_timeout(self->m, stop_timeout);
    if (rc == 0 && buffer_points > 0)
        rc = sm_monitor_set_buffer_points(self->m, (size_t)buffer_points);
    /* 0: SCOPEMETER_WRITE_BUDGET, else none (the front checked the value) */
    if (rc == 0 && write_budget != 0)
        rc = sm_monitor_set_write_budget(self->m, write_budget);
    /* SM_DEFAULT: SCOPEMETER_DETAIL (parse_detail gave the front's word) */
    if (rc == 0)
        rc = sm_monitor_set_detail(self->m, detail);
    /* one recorder per rank and run (docs/design.md §9): the queue path has
     * no run id of its own */
    if (rc == 0 && rec_key)
        rc = sm_monitor_set_recording_key(self->m, rec_key);
    if (rc == 0 && uri) {
        /* the REST sink: the engine ships itself, no Python per window */
        rc = sm_monitor_set_run(self->m, uri, run_id);
        if (rc == 0 && header_pairs(headers, &pairs, &keep) < 0) {
            sm_monitor_free(self->m);
            self->m = NULL;
            Py_XDECREF(keep);
            return -1;
        }
        if (rc == 0 && pairs)
            rc = sm_monitor_set_headers(self->m, pairs);
        free(pairs);
        Py_XDECREF(keep);
    } else if (rc == 0 && delivery != Py_None) {
        /* the MlflowClient path: the front's thread drives the C policy */
        rc = sm__monitor_set_delivery(self->m, ((DeliveryObject *)delivery)->d);
    } else if (rc == 0) {
        rc = sm_monitor_use_queue(self->m);
    }
    if (rc < 0) {
        if (rc == -EINVAL && run_id && !sm_mlflow_valid_run_id(run_id)) {
            PyErr_Format(PyExc_ValueError, "not an MLflow run id: %.80s", run_id);
        } else if (rc == -EINVAL) {
            /* PyErr_Format has no %g */
            char msg[300];
            snprintf(msg, sizeof msg, "invalid monitor setting: interval must be between %g "
                     "and %g s, samples between 1 and %d, stop_timeout between 0 and %g s; the "
                     "tracking URI http(s) and headers non-empty; write_budget between %g and "
                     "%g", SM_INTERVAL_MIN, SM_INTERVAL_MAX, SM_SAMPLES_MAX, SM_STOP_TIMEOUT_MAX,
                     SM_WRITE_BUDGET_MIN, SM_WRITE_BUDGET_MAX);
            PyErr_SetString(PyExc_ValueError, msg);
        } else
            raise_errno(rc, "monitor setup", NULL);
        sm_monitor_free(self->m);
        self->m = NULL;
        return -1;
    }
    return 0;
}

static void Monitor_dealloc(PyObject *self_)
{
    MonitorObject *self = (MonitorObject *)self_;
    PyTypeObject *tp = Py_TYPE(self_);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);

    if (self->m) {
        sm_monitor *m = self->m;

        self->m = NULL;
        /* stop is idempotent and bounded by the stop timeout; free joins. */
        Py_BEGIN_ALLOW_THREADS
        sm_monitor_stop(m);
        sm_monitor_free(m);
        Py_END_ALLOW_THREADS
    }
    free(self->buf);
    self->buf = NULL;
    tp_free(self_);
    Py_DECREF(tp); /* heap type: instances hold a reference */
}

static int check_monitor(MonitorObject *self)
{
    if (!self->m) {
        PyErr_SetString(PyExc_RuntimeError, "Monitor not initialised");
        return -1;
    }
    return 0;
}

/* start() -> "collecting"; "not collecting" when the rules of docs/design.md §4 say
 * this process does not collect; "skipped" when nothing could be recorded
 * (the scopemeter.skipped tag waits in the queue: drain it).  The engine
 * printed one line saying why. */
static PyObject *Monitor_start(PyObject *self_, PyObject *Py_UNUSED(ignored))
{
    MonitorObject *self = (MonitorObject *)self_;
    char err[512] = "";
    struct taken taken;
    int rc;

    if (check_monitor(self) < 0)
        return NULL;
    if (self->started) {
        PyErr_SetString(PyExc_RuntimeError, "Monitor already started");
        return NULL;
    }
    /* Opening collectors reads files and starts a thread: no GIL needed. */
    lines_take(&taken);
    Py_BEGIN_ALLOW_THREADS
    rc = sm_monitor_start(self->m, err, sizeof err);
    Py_END_ALLOW_THREADS
    lines_give(&taken);
    self->started = 1;
    if (rc == -ENODATA)
        return PyUnicode_FromString("skipped");
    if (rc < 0)
        return raise_errno(rc, "cannot start monitoring", err);
    return PyUnicode_FromString(rc == SM_NOT_COLLECTING ? "not collecting" : "collecting");
}

/* A C string of the engine as str.  Keys and tag values carry bytes from
 * outside (node names from the environment, cgroup paths, values cut at a
 * byte limit) that need not be UTF-8: an invalid byte becomes U+FFFD rather
 * than an exception, which would lose every record of the drain. */
static PyObject *text_of(const char *s, size_t n)
{
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, "replace");
}

/* One record as a tuple: (kind, key, value, timestamp_ms, step), value a
 * float for metrics and a str for tags. */
static PyObject *record_tuple(const sm_record *r)
{
    PyObject *key = text_of(r->key, strlen(r->key)), *value;

    if (!key)
        return NULL;
    if (r->kind == SM_RECORD_TAG) /* whole, whatever its length (scopemeter.h) */
        value = text_of(r->text ? r->text : "", r->text_len);
    else
        value = PyFloat_FromDouble(r->value);
    if (!value) {
        Py_DECREF(key);
        return NULL;
    }
    /* "N" steals key and value */
    return Py_BuildValue("(iNNLL)", r->kind, key, value, (long long)r->timestamp_ms,
                         (long long)r->step);
}

/* drain(timeout=1.0, cap=1000) -> list of records ([] on timeout), or None
 * once the monitor has stopped and everything was drained. */
static PyObject *Monitor_drain(PyObject *self_, PyObject *args, PyObject *kw)
{
    MonitorObject *self = (MonitorObject *)self_;
    static char *kwlist[] = {"timeout", "cap", NULL};
    double timeout = 1.0;
    int cap = DRAIN_CAP_MAX, n;
    PyObject *list = NULL;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "|di", kwlist, &timeout, &cap))
        return NULL;
    if (check_monitor(self) < 0)
        return NULL;
    if (cap <= 0 || cap > DRAIN_CAP_MAX) {
        PyErr_Format(PyExc_ValueError, "cap must be between 1 and %d", DRAIN_CAP_MAX);
        return NULL;
    }
    if (!(timeout >= 0))
        timeout = 0;
    if (self->draining) {
        PyErr_SetString(PyExc_RuntimeError, "drain() is already running in another thread");
        return NULL;
    }
    if (!self->buf) {
        self->buf = calloc(DRAIN_CAP_MAX, sizeof *self->buf);
        if (!self->buf)
            return PyErr_NoMemory();
    }
    self->draining = 1;
    Py_BEGIN_ALLOW_THREADS
    n = sm_monitor_drain_records(self->m, self->buf, cap, sizeof *self->buf, timeout);
    Py_END_ALLOW_THREADS
    self->draining = 0;

    if (n == -EPIPE)
        Py_RETURN_NONE;
    if (n < 0)
        return raise_errno(n, "drain", NULL);
    list = PyList_New(n);
    if (!list)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *t = record_tuple(&self->buf[i]);

        if (!t) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SetItem(list, i, t); /* steals t */
    }
    return list;
}

/* stop(timeout=None) -> True, or False when the stop timeout was hit (one
 * line said so).  Stop sampling, last partial window, end tags; the records
 * stay queued for drain(), which returns None after the last one.  timeout:
 * this stop's bound in seconds (sm_monitor_set_stop_timeout, which the engine
 * takes after start too); None keeps the one given to Monitor(). */
static PyObject *Monitor_stop(PyObject *self_, PyObject *args, PyObject *kw)
{
    MonitorObject *self = (MonitorObject *)self_;
    static char *kwlist[] = {"timeout", NULL};
    PyObject *timeout = Py_None;
    struct taken taken;
    int rc;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O", kwlist, &timeout))
        return NULL;
    if (check_monitor(self) < 0)
        return NULL;
    /* A stop already under way on another thread keeps its bound: the engine
     * reads the timeout while it stops, so it is not written meanwhile. */
    if (timeout != Py_None && !self->stopping) {
        double t = PyFloat_AsDouble(timeout);

        if (t == -1.0 && PyErr_Occurred())
            return NULL;
        if (t < 0 || sm_monitor_set_stop_timeout(self->m, t) < 0) { /* < 0: not SM_DEFAULT here */
            PyErr_Format(PyExc_ValueError, "stop timeout must be between 0 and 86400 s, not %R",
                         timeout);
            return NULL;
        }
    }
    self->stopping++;
    lines_take(&taken);
    Py_BEGIN_ALLOW_THREADS
    rc = sm_monitor_stop(self->m);
    Py_END_ALLOW_THREADS
    lines_give(&taken);
    self->stopping--;
    if (rc < 0 && rc != -ETIMEDOUT)
        return raise_errno(rc, "stop", NULL);
    return PyBool_FromLong(rc == 0);
}

/* report(delivered, refused, undelivered): the closing line of a queue
 * binding (sm_monitor_report), the same line the REST sink prints. */
static PyObject *Monitor_report(PyObject *self_, PyObject *args)
{
    MonitorObject *self = (MonitorObject *)self_;
    unsigned long long delivered, refused, undelivered;
    struct taken taken;
    int rc;

    if (!PyArg_ParseTuple(args, "KKK", &delivered, &refused, &undelivered))
        return NULL;
    if (check_monitor(self) < 0)
        return NULL;
    lines_take(&taken);
    rc = sm_monitor_report(self->m, delivered, refused, undelivered);
    lines_give(&taken);
    if (rc < 0) {
        PyErr_SetString(PyExc_RuntimeError, "report() is for a stopped queue monitor");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *Monitor_get_interval(PyObject *self_, void *Py_UNUSED(closure))
{
    MonitorObject *self = (MonitorObject *)self_;

    if (check_monitor(self) < 0)
        return NULL;
    return PyFloat_FromDouble(sm_monitor_interval(self->m));
}

static PyObject *Monitor_get_samples(PyObject *self_, void *Py_UNUSED(closure))
{
    MonitorObject *self = (MonitorObject *)self_;

    if (check_monitor(self) < 0)
        return NULL;
    return PyLong_FromLong(sm_monitor_samples(self->m));
}

static PyObject *Monitor_get_write_budget(PyObject *self_, void *Py_UNUSED(closure))
{
    MonitorObject *self = (MonitorObject *)self_;

    if (check_monitor(self) < 0)
        return NULL;
    return PyFloat_FromDouble(sm_monitor_write_budget(self->m));
}

static PyObject *Monitor_get_collectors(PyObject *self_, void *Py_UNUSED(closure))
{
    MonitorObject *self = (MonitorObject *)self_;

    if (check_monitor(self) < 0)
        return NULL;
    return PyLong_FromLong(sm_monitor_collectors(self->m));
}

static PyObject *Monitor_get_dropped(PyObject *self_, void *Py_UNUSED(closure))
{
    MonitorObject *self = (MonitorObject *)self_;

    if (check_monitor(self) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong((unsigned long long)sm_monitor_dropped(self->m));
}

static PyMethodDef Monitor_methods[] = {
    {"start", Monitor_start, METH_NOARGS,
     "start() -> 'collecting' | 'not collecting' | 'skipped' (drain the skipped tag)."},
    {"drain", (PyCFunction)(void (*)(void))Monitor_drain, METH_VARARGS | METH_KEYWORDS,
     "drain(timeout=1.0, cap=1000) -> list of (kind, key, value, timestamp_ms, step), "
     "or None once stopped and empty.  Releases the GIL while waiting."},
    {"stop", (PyCFunction)(void (*)(void))Monitor_stop, METH_VARARGS | METH_KEYWORDS,
     "stop(timeout=None) -> bool: stop sampling, log the last window and end tags, within "
     "timeout seconds (None: the Monitor's stop_timeout); False on timeout."},
    {"report", Monitor_report, METH_VARARGS,
     "report(delivered, refused, undelivered): the closing line, after stop and the last "
     "drain (queue monitors)."},
    {NULL, NULL, 0, NULL},
};

static PyObject *Monitor_get_queued(PyObject *self_, void *Py_UNUSED(closure))
{
    MonitorObject *self = (MonitorObject *)self_;

    if (check_monitor(self) < 0)
        return NULL;
    return PyLong_FromSize_t(sm_monitor_queued(self->m));
}

static PyGetSetDef Monitor_getset[] = {
    {"queued", Monitor_get_queued, NULL, "records waiting in the pull queue", NULL},
    {"interval", Monitor_get_interval, NULL, "effective interval (s) after the write-load cap",
     NULL},
    {"samples", Monitor_get_samples, NULL, "effective samples per logging window", NULL},
    {"collectors", Monitor_get_collectors, NULL, "collectors n used by the write budget's rule",
     NULL},
    {"write_budget", Monitor_get_write_budget, NULL, "the write budget in force, rows/s (0: none)",
     NULL},
    {"dropped", Monitor_get_dropped, NULL, "records dropped because the queue overflowed", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Monitor_slots[] = {
    {Py_tp_doc, (void *)"Monitor(interval=0, samples=0, all_workers=False, stop_timeout=30, "
                        "buffer_points=0, tracking_uri=None, run_id=None, headers=None, "
                        "recording_key=None, delivery=None, write_budget=0, detail=-1): a "
                        "scopemeter monitor shipping to an MLflow server over REST (uri and "
                        "run id given) or feeding a pull queue."},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_init, (void *)Monitor_init},
    {Py_tp_dealloc, (void *)Monitor_dealloc},
    {Py_tp_methods, Monitor_methods},
    {Py_tp_getset, Monitor_getset},
    {0, NULL},
};

static PyType_Spec Monitor_spec = {
    .name = "scopemeter._native.Monitor",
    .basicsize = sizeof(MonitorObject),
    .itemsize = 0,
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = Monitor_slots,
};

/* ---- Delivery --------------------------------------------------------------- */

static int Delivery_init(PyObject *self_, PyObject *args, PyObject *kw)
{
    DeliveryObject *self = (DeliveryObject *)self_;
    static char *kwlist[] = {"run_id", "tracking_uri", NULL};
    const char *run_id, *uri;
    char shown[512];
    int rc;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "ss", kwlist, &run_id, &uri))
        return -1;
    if (self->d) {
        PyErr_SetString(PyExc_RuntimeError, "Delivery already initialised");
        return -1;
    }
    sm_mlflow_redact_uri(uri, shown, sizeof shown);
    rc = sm__deliver_new(run_id, shown, &self->d);
    if (rc < 0) {
        raise_errno(rc, "delivery", NULL);
        return -1;
    }
    return 0;
}

static void Delivery_dealloc(PyObject *self_)
{
    DeliveryObject *self = (DeliveryObject *)self_;
    PyTypeObject *tp = Py_TYPE(self_);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);

    if (self->d) {
        sm__deliver_cancel(self->d); /* a driver of ours, if any, ends */
        sm__deliver_unref(self->d);
        self->d = NULL;
    }
    tp_free(self_);
    Py_DECREF(tp);
}

static sm_deliver *delivery_of(PyObject *self_)
{
    DeliveryObject *self = (DeliveryObject *)self_;

    if (!self->d)
        PyErr_SetString(PyExc_RuntimeError, "Delivery not initialised");
    return self->d;
}

/* An entry of a batch as a tuple (kind, key, value or text, timestamp_ms,
 * step), the step after the run's earlier ones (b->step_base). */
static PyObject *entry_tuple(const sm_deliver_batch *b, const sm_entry *e)
{
    const char *k = sm__ring_str(b->ring, e->key);
    PyObject *key = text_of(k, strlen(k)), *value;
    int tag = e->text != 0;

    if (!key)
        return NULL;
    if (tag) {
        const char *t = sm__ring_str(b->ring, e->text);
        value = text_of(t, strlen(t));
    } else {
        value = PyFloat_FromDouble(e->value);
    }
    if (!value) {
        Py_DECREF(key);
        return NULL;
    }
    return Py_BuildValue("(iNNLL)", tag ? SM_RECORD_TAG : SM_RECORD_METRIC, key, value,
                         (long long)e->timestamp_ms, (long long)(b->step_base + e->step));
}

/* next() -> the records of one log_batch, or None once delivery is over.
 * Waits with the GIL released: for records, the spread and the backoff. */
static PyObject *Delivery_next(PyObject *self_, PyObject *Py_UNUSED(ignored))
{
    DeliveryObject *self = (DeliveryObject *)self_;
    sm_deliver *d = delivery_of(self_);
    sm_deliver_batch b;
    PyObject *list;
    int more;

    if (!d)
        return NULL;
    if (self->in_next) {
        PyErr_SetString(PyExc_RuntimeError, "Delivery.next() runs in another thread");
        return NULL;
    }
    self->in_next = 1;
    Py_BEGIN_ALLOW_THREADS
    more = sm__deliver_next(d, &b);
    Py_END_ALLOW_THREADS
    self->in_next = 0;
    if (!more)
        Py_RETURN_NONE;
    list = PyList_New((Py_ssize_t)b.n);
    if (!list)
        return NULL;
    for (size_t i = 0; i < b.n; i++) {
        PyObject *t = entry_tuple(&b, &b.recs[i]);
        if (!t) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SetItem(list, (Py_ssize_t)i, t); /* steals t */
    }
    return list;
}

/* done(taken, http, body, retry_after, errno, why): what became of the
 * last next()'s records: taken of them were sent; http the status (0: no
 * answer: the socket's errno, or 0 and why in the transport's words), body
 * MLflow's error JSON, retry_after the header's value or None.  The C
 * policy classifies and says it. */
static PyObject *Delivery_done(PyObject *self_, PyObject *args)
{
    sm_deliver *d = delivery_of(self_);
    Py_ssize_t taken, blen = 0;
    long http;
    int os_errno;
    const char *body = NULL, *retry_after = NULL, *why = "";
    sm_rest_result a = {.retry_after = -1};

    if (!d)
        return NULL;
    if (!PyArg_ParseTuple(args, "nlz#zis", &taken, &http, &body, &blen, &retry_after,
                          &os_errno, &why))
        return NULL;
    /* read as the libcurl transport reads the same answer (answer.c) */
    if (http > 0)
        sm__rest_answer_http(&a, "runs/log-batch", http, body, (size_t)blen, retry_after);
    else
        sm__rest_answer_none(&a, "runs/log-batch", sm__deliver_shown(d), os_errno, why);
    sm__deliver_done(d, taken < 0 ? 0 : (size_t)taken, &a);
    sm__rest_result_clear(&a);
    Py_RETURN_NONE;
}

/* check(rank, run_json, error_code, why) -> None (record) or the line that
 * fails the start.  The verdict of the run check at start (deliver.c),
 * from the Run the front got through MlflowClient (runs/get's JSON). */
static PyObject *Delivery_check(PyObject *self_, PyObject *args)
{
    sm_deliver *d = delivery_of(self_);
    const char *run_json = NULL, *error_code = NULL, *why = NULL;
    char err[600] = "";
    struct taken taken;
    int rank, rc;

    if (!d)
        return NULL;
    if (!PyArg_ParseTuple(args, "izzz", &rank, &run_json, &error_code, &why))
        return NULL;
    lines_take(&taken);
    rc = sm__deliver_check_json(d, rank, run_json, error_code, why, err, sizeof err);
    lines_give(&taken);
    if (rc == 0)
        Py_RETURN_NONE;
    return PyUnicode_FromString(err);
}

static PyObject *Delivery_cancel(PyObject *self_, PyObject *Py_UNUSED(ignored))
{
    sm_deliver *d = delivery_of(self_);

    if (!d)
        return NULL;
    sm__deliver_cancel(d);
    Py_RETURN_NONE;
}

static PyMethodDef Delivery_methods[] = {
    {"next", Delivery_next, METH_NOARGS,
     "next() -> records of one log_batch (kind, key, value, timestamp_ms, step), or None "
     "when delivery is over; waits with the GIL released"},
    {"done", Delivery_done, METH_VARARGS,
     "done(taken, http, body, retry_after, errno, why): what the store answered"},
    {"check", Delivery_check, METH_VARARGS,
     "check(rank, run_json, error_code, why) -> None, or the line that fails the start"},
    {"cancel", Delivery_cancel, METH_NOARGS, "cancel(): next() returns None from now on"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Delivery_slots[] = {
    {Py_tp_doc, (void *)"Delivery(run_id, tracking_uri): the engine's delivery policy, "
                        "driven by the front's MlflowClient thread."},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_init, (void *)Delivery_init},
    {Py_tp_dealloc, (void *)Delivery_dealloc},
    {Py_tp_methods, Delivery_methods},
    {0, NULL},
};

static PyType_Spec Delivery_spec = {
    .name = "scopemeter._native.Delivery",
    .basicsize = sizeof(DeliveryObject),
    .itemsize = 0,
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = Delivery_slots,
};

/* ---- module functions ------------------------------------------------------ */

static int dict_set(PyObject *d, const char *k, PyObject *v)
{
    int rc;

    if (!v)
        return -1;
    rc = PyDict_SetItemString(d, k, v);
    Py_DECREF(v);
    return rc;
}

static PyObject *budget_or_none(double budget, double v)
{
    if (budget > 0)
        return PyFloat_FromDouble(v);
    Py_INCREF(Py_None);
    return Py_None;
}

static PyObject *mod_plan(PyObject *Py_UNUSED(mod), PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"workers", "workers_per_pod", "nodes", "gpus_per_worker",
                             "all_workers", "interval", "samples", "container_limits",
                             "write_budget", "rdma_ports", "detail", NULL};
    sm_plan_input in = SM_PLAN_INPUT_INIT;
    sm_plan out = SM_PLAN_INIT;
    char err[256] = "";
    PyObject *d;
    int rc;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "|iiiipdipdpi", kwlist, &in.workers,
                                     &in.workers_per_pod, &in.nodes, &in.gpus_per_worker,
                                     &in.all_workers, &in.interval_s, &in.samples,
                                     &in.container_limits, &in.write_budget, &in.rdma_ports,
                                     &in.detail))
        return NULL;
    rc = sm_plan_estimate(&in, &out, err, sizeof err);
    if (rc < 0) {
        PyErr_SetString(PyExc_ValueError, *err ? err : "invalid plan input");
        return NULL;
    }
    d = PyDict_New();
    if (!d)
        return NULL;
    if (dict_set(d, "collectors", PyLong_FromLong(out.collectors)) < 0 ||
        dict_set(d, "interval_s", PyFloat_FromDouble(out.interval_s)) < 0 ||
        dict_set(d, "samples", PyLong_FromLong(out.samples)) < 0 ||
        dict_set(d, "period_s", PyFloat_FromDouble(out.period_s)) < 0 ||
        dict_set(d, "gpus_per_collector", PyLong_FromLong(out.gpus_per_collector)) < 0 ||
        dict_set(d, "series_per_collector", PyLong_FromLong(out.series_per_collector)) < 0 ||
        dict_set(d, "node_series_per_collector",
                 PyLong_FromLong(out.node_series_per_collector)) < 0 ||
        dict_set(d, "gpu_series_per_collector", PyLong_FromLong(out.gpu_series_per_collector)) < 0 ||
        dict_set(d, "container_series_per_collector",
                 PyLong_FromLong(out.container_series_per_collector)) < 0 ||
        dict_set(d, "ranks_recorded", PyLong_FromLong(out.ranks_recorded)) < 0 ||
        dict_set(d, "process_series", PyLong_FromLong(out.process_series)) < 0 ||
        dict_set(d, "series", PyLong_FromLong(out.series)) < 0 ||
        dict_set(d, "charts", PyLong_FromLong(out.charts)) < 0 ||
        dict_set(d, "sections", PyLong_FromLong(out.sections)) < 0 ||
        dict_set(d, "rows_per_hour", PyFloat_FromDouble(out.rows_per_hour)) < 0 ||
        dict_set(d, "bytes_per_row", PyFloat_FromDouble(out.bytes_per_row)) < 0 ||
        dict_set(d, "bytes_per_day", PyFloat_FromDouble(out.bytes_per_day)) < 0 ||
        /* None without a budget, as the CLI's JSON null */
        dict_set(d, "write_budget", budget_or_none(out.write_budget, out.write_budget)) < 0 ||
        dict_set(d, "series_per_collector_recorded",
                 PyLong_FromLong(out.series_per_collector_recorded)) < 0 ||
        dict_set(d, "budget_period_s", budget_or_none(out.write_budget, out.budget_period_s)) < 0 ||
        dict_set(d, "rows_per_s", PyFloat_FromDouble(out.rows_per_s)) < 0 ||
        dict_set(d, "server_cores", PyLong_FromLong(out.server_cores)) < 0 ||
        dict_set(d, "ui_charts_over", PyBool_FromLong(out.ui_charts_over)) < 0 ||
        dict_set(d, "ui_charts_warn", PyLong_FromLong(SM_PLAN_UI_CHARTS_WARN)) < 0 ||
        dict_set(d, "pod_memory_front_mb", PyFloat_FromDouble(out.pod_memory_front_mb)) < 0 ||
        dict_set(d, "pod_memory_companion_mb",
                 PyFloat_FromDouble(out.pod_memory_companion_mb)) < 0 ||
        dict_set(d, "pod_memory_cli_mb", PyFloat_FromDouble(out.pod_memory_cli_mb)) < 0 ||
        dict_set(d, "rdma_series_per_collector",
                 PyLong_FromLong(out.rdma_series_per_collector)) < 0 ||
        /* the level as the CLI's JSON says it */
        dict_set(d, "detail", PyUnicode_FromString(out.detail == SM_PLAN_DETAIL_FULL ? "full"
                                                                                     : "default")) < 0 ||
        dict_set(d, "series_full", PyLong_FromLong(out.series_full)) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* parse_detail(word): SM_DETAIL_DEFAULT or _FULL for "default" or "full"
 * (sm__detail_of, the word SCOPEMETER_DETAIL and --detail take); another
 * word, "" included, is a ValueError in the CLI's words. */
static PyObject *mod_parse_detail(PyObject *Py_UNUSED(mod), PyObject *arg)
{
    const char *word = NULL;
    int level;

    if (!PyArg_Parse(arg, "s", &word)) /* TypeError for a non-str */
        return NULL;
    level = *word ? sm__detail_of(word) : -EINVAL;
    if (level < 0) {
        PyErr_Format(PyExc_ValueError, "detail must be default or full, got %.32R", arg);
        return NULL;
    }
    return PyLong_FromLong(level);
}

static PyObject *mod_identity(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(ignored))
{
    sm_identity *id = NULL;
    const char *src;
    PyObject *d = NULL;
    int rc;

    rc = sm_identity_read_env(&id);
    if (!id)
        return raise_errno(rc, "identity", NULL);
    d = PyDict_New();
    if (!d)
        goto out;
    src = sm_identity_node_source(id);
    if (dict_set(d, "rank", PyLong_FromLong(sm_identity_rank(id))) < 0 ||
        dict_set(d, "local_rank", PyLong_FromLong(sm_identity_local_rank(id))) < 0 ||
        dict_set(d, "world_size", PyLong_FromLong(sm_identity_world_size(id))) < 0 ||
        dict_set(d, "local_world_size", PyLong_FromLong(sm_identity_local_world_size(id))) < 0 ||
        /* the environment's bytes, as os.environ decodes them (a node name
         * that is not UTF-8 must not make identity() raise) */
        dict_set(d, "node", PyUnicode_DecodeFSDefault(sm_identity_node(id))) < 0 ||
        dict_set(d, "launcher", PyUnicode_FromString(sm_identity_launcher(id))) < 0 ||
        dict_set(d, "invalid", sm_identity_invalid(id)[0]
                                   ? PyUnicode_FromString(sm_identity_invalid(id))
                                   : (Py_INCREF(Py_None), Py_None)) < 0 ||
        dict_set(d, "node_source", src ? PyUnicode_FromString(src)
                                       : (Py_INCREF(Py_None), Py_None)) < 0)
        Py_CLEAR(d);
out:
    sm_identity_free(id);
    return d;
}

static PyObject *mod_series_name(PyObject *Py_UNUSED(mod), PyObject *args)
{
    const char *key, *node = NULL;
    int rank, rc;
    char out[512];

    if (!PyArg_ParseTuple(args, "si|z", &key, &rank, &node))
        return NULL;
    if (rank < 0) {
        PyErr_Format(PyExc_ValueError, "rank must be >= 0, not %d", rank);
        return NULL;
    }
    rc = sm_series_name(key, rank, node, out, sizeof out);
    if (rc == -ENOSPC) {
        PyErr_Format(PyExc_ValueError, "the series name of %R for rank %d with a node name of "
                     "%d bytes is longer than %d bytes", PyTuple_GetItem(args, 0), rank,
                     node ? (int)strlen(node) : 0, (int)sizeof out - 1);
        return NULL;
    }
    if (rc < 0) {
        PyErr_Format(PyExc_ValueError, "no naming rule covers %R", PyTuple_GetItem(args, 0));
        return NULL;
    }
    return PyUnicode_FromString(out);
}

static PyObject *mod_series_scope(PyObject *Py_UNUSED(mod), PyObject *args)
{
    const char *key, *scope;

    if (!PyArg_ParseTuple(args, "s", &key))
        return NULL;
    scope = sm_series_scope(key);
    if (!scope)
        Py_RETURN_NONE;
    return PyUnicode_FromString(scope);
}

/* series_parse(key) -> {upstream, scoped, scope, node, rank} of a logged key
 * (sm_series_parse, the inverse of series_name), or None for a key the
 * naming rule cannot have written: the report reads runs through it. */
static PyObject *mod_series_parse(PyObject *Py_UNUSED(mod), PyObject *args)
{
    const char *key, *scope = NULL;
    char upstream[SM_MLFLOW_KEY_MAX + 8], scoped[SM_MLFLOW_KEY_MAX + 1],
        node[SM_MLFLOW_KEY_MAX + 1];
    int rank = 0;

    if (!PyArg_ParseTuple(args, "s", &key))
        return NULL;
    if (sm_series_parse(key, upstream, sizeof upstream, scoped, sizeof scoped, node, sizeof node,
                        &rank, &scope) < 0)
        Py_RETURN_NONE;
    return Py_BuildValue("{s:s,s:s,s:s,s:s,s:i}", "upstream", upstream, "scoped", scoped,
                         "scope", scope, "node", node, "rank", rank);
}

/* valid_run_id(s) -> whether MLflow accepts s as a run id (the engine's rule,
 * sm_mlflow_valid_run_id), so the front says which setting is wrong. */
static PyObject *mod_valid_run_id(PyObject *Py_UNUSED(mod), PyObject *args)
{
    const char *id;

    if (!PyArg_ParseTuple(args, "s", &id))
        return NULL;
    return PyBool_FromLong(sm_mlflow_valid_run_id(id));
}

/* redact_uri(uri) -> the URI as scopemeter prints it (sm_mlflow_redact_uri):
 * userinfo replaced by "***", query dropped.  One redaction for C and Python. */
static PyObject *mod_redact_uri(PyObject *Py_UNUSED(mod), PyObject *args)
{
    const char *uri;
    char out[2048];

    if (!PyArg_ParseTuple(args, "s", &uri))
        return NULL;
    sm_mlflow_redact_uri(uri, out, sizeof out);
    return PyUnicode_FromString(out);
}

/* tls() -> which libcurl does https and from where (sm_mlflow_tls); loads
 * the TLS module when needed.  OSError naming why when https cannot work. */
static PyObject *mod_tls(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(ignored))
{
    char out[1024];

    if (sm_mlflow_tls(out, sizeof out) < 0) {
        PyErr_SetString(PyExc_OSError, out);
        return NULL;
    }
    return PyUnicode_FromString(out);
}

/* A Python str as the NUL-terminated text the parser reads: UTF-8 (the
 * Limited API 3.9 has no PyUnicode_AsUTF8AndSize), an embedded NUL kept
 * visible as \x01 so "1\0" is refused ("got '1?'"), never read as "1". */
static char *number_text(PyObject *str, PyObject **bytes)
{
    char *s, *copy;
    Py_ssize_t n;

    *bytes = PyUnicode_AsUTF8String(str);
    if (!*bytes || PyBytes_AsStringAndSize(*bytes, &s, &n) < 0)
        return NULL;
    if (strlen(s) == (size_t)n)
        return s;
    copy = PyBytes_AsString(*bytes); /* our own new bytes object: may be changed */
    for (Py_ssize_t i = 0; i < n; i++)
        if (!copy[i])
            copy[i] = '\x01';
    return copy;
}

/* parse_number(value, name, min=-inf, max=inf, *, whole=False,
 * seconds=False) -> float: the one number parser (src/util/number.h) for the
 * front.  A str goes through the grammar, as an option or an environment
 * variable does; an int or float (any real: __float__ / __index__) is
 * checked for its bounds and, with whole, for being whole.  ValueError with
 * the one line ("interval must be between 0.01 and 86400 s, got 0"); the
 * TypeError for a wrong type, with the public function's name, is the
 * front's (_checks.py), raised before this is called. */
static PyObject *mod_parse_number(PyObject *Py_UNUSED(mod), PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"value", "name", "min", "max", "whole", "seconds", NULL};
    PyObject *value, *bytes = NULL, *repr = NULL, *res = NULL;
    const char *name, *text;
    double lo = -Py_HUGE_VAL, hi = Py_HUGE_VAL, v = 0;
    int whole = 0, seconds = 0, rc;
    char err[512];

    if (!PyArg_ParseTupleAndKeywords(args, kw, "Os|dd$pp", kwlist, &value, &name, &lo, &hi,
                                     &whole, &seconds))
        return NULL;
    {
        const sm_num_spec spec = {name, lo, hi, whole, seconds};

        if (PyUnicode_Check(value)) {
            if (!(text = number_text(value, &bytes)))
                goto out;
            rc = sm__num_parse(text, &spec, &v, err, sizeof err);
        } else if (PyBool_Check(value)) {
            PyErr_Format(PyExc_TypeError, "%s must be a number, not bool", name);
            goto out;
        } else {
            v = PyFloat_AsDouble(value);
            if (v == -1.0 && PyErr_Occurred()) {
                int neg;
                if (!PyErr_ExceptionMatches(PyExc_OverflowError))
                    goto out; /* not a number: TypeError */
                PyErr_Clear(); /* an int beyond a double: out of any bound */
                {
                    PyObject *zero = PyLong_FromLong(0);
                    neg = zero ? PyObject_RichCompareBool(value, zero, Py_LT) : -1;
                    Py_XDECREF(zero);
                }
                if (neg < 0)
                    goto out;
                v = neg ? -Py_HUGE_VAL : Py_HUGE_VAL;
            }
            if (!(repr = PyObject_Repr(value)) || !(bytes = PyUnicode_AsUTF8String(repr)))
                goto out;
            rc = sm__num_check(v, PyBytes_AsString(bytes), &spec, err, sizeof err);
        }
        if (rc < 0) {
            PyErr_SetString(PyExc_ValueError, err);
            goto out;
        }
        res = PyFloat_FromDouble(v);
    }
out:
    Py_XDECREF(bytes);
    Py_XDECREF(repr);
    return res;
}

/* shown(name) -> the name as the engine prints and tags it (sm__shown,
 * docs/design.md §2: control characters escaped), for the Python surfaces'
 * tables: one escaping for C and Python.  Through UTF-8 (a lone surrogate
 * of os.environ's bytes becomes "?"); an embedded NUL, where the C string
 * would end, is shown as \x00 and the rest follows. */
static PyObject *mod_shown(PyObject *Py_UNUSED(mod), PyObject *args)
{
    PyObject *name, *bytes, *res = NULL;
    char *s, *out = NULL;
    Py_ssize_t n;
    size_t cap, len = 0;

    if (!PyArg_ParseTuple(args, "U", &name))
        return NULL;
    bytes = PyUnicode_AsEncodedString(name, "utf-8", "replace");
    if (!bytes || PyBytes_AsStringAndSize(bytes, &s, &n) < 0)
        goto out;
    cap = (size_t)SM_SHOWN_MAX(n);
    out = malloc(cap);
    if (!out) {
        PyErr_NoMemory();
        goto out;
    }
    for (const char *seg = s;; seg += strlen(seg) + 1) {
        len += strlen(sm__shown(out + len, cap - len, seg));
        if (seg + strlen(seg) >= s + n)
            break;
        memcpy(out + len, "\\x00", 5); /* 4 bytes and the NUL: room kept by SM_SHOWN_MAX */
        len += 4;
    }
    res = PyUnicode_DecodeUTF8(out, (Py_ssize_t)len, "replace");
out:
    free(out);
    Py_XDECREF(bytes);
    return res;
}

/* set_log(fn) -> None: fn(warn, msg) receives the engine's lines written in
 * the caller's thread of this module's calls (the front's logging); None:
 * every line on stderr, as before. */
static PyObject *mod_set_log(PyObject *Py_UNUSED(mod), PyObject *fn)
{
    if (fn != Py_None && !PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "set_log() takes a callable or None");
        return NULL;
    }
    Py_XDECREF(log_fn);
    log_fn = NULL;
    if (fn != Py_None) {
        Py_INCREF(fn);
        log_fn = fn;
    }
    Py_RETURN_NONE;
}

static PyObject *mod_version(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(ignored))
{
    return PyUnicode_FromString(sm_version());
}

static PyMethodDef module_methods[] = {
    {"plan", (PyCFunction)(void (*)(void))mod_plan, METH_VARARGS | METH_KEYWORDS,
     "plan(workers=1, workers_per_pod=PLAN_DEFAULT, nodes=PLAN_DEFAULT, gpus_per_worker=0, "
     "all_workers=False, "
     "interval=PLAN_DEFAULT, samples=PLAN_DEFAULT, container_limits=True, write_budget=-1, "
     "rdma_ports=False, detail=-1) -> dict (sm_plan_estimate; PLAN_DEFAULT: the default)"},
    {"parse_detail", mod_parse_detail, METH_O,
     "parse_detail(word) -> int: DETAIL_DEFAULT or DETAIL_FULL for 'default' or 'full'; "
     "ValueError for another word"},
    {"identity", mod_identity, METH_NOARGS,
     "identity() -> dict: rank, local_rank, world_size, local_world_size, node, launcher, "
     "invalid (None, or why the launcher's variables cannot be trusted)"},
    {"series_name", mod_series_name, METH_VARARGS,
     "series_name(upstream_key, rank, node=None) -> the MLflow key"},
    {"series_scope", mod_series_scope, METH_VARARGS,
     "series_scope(key) -> 'node' | 'rootfs' | 'pod' | 'gpu' | 'container' | None"},
    {"series_parse", mod_series_parse, METH_VARARGS,
     "series_parse(key) -> {upstream, scoped, scope, node, rank} of a logged key, or None"},
    {"version", mod_version, METH_NOARGS, "version() -> the C library's version"},
    {"shown", mod_shown, METH_VARARGS,
     "shown(name) -> the name as the engine prints and tags it: control characters escaped "
     "(\\n, \\r, \\t, \\xHH), a backslash as \\\\"},
    {"set_log", mod_set_log, METH_O,
     "set_log(fn) -> None: fn(warn, msg) gets the engine's lines written in the caller's "
     "thread of this module's calls (start, stop, the run check); None: stderr"},
    {"tls", mod_tls, METH_NOARGS,
     "tls() -> the libcurl that does https and where it comes from (loads the TLS module); "
     "OSError when https cannot work"},
    {"valid_run_id", mod_valid_run_id, METH_VARARGS,
     "valid_run_id(s) -> True when MLflow accepts s as a run id"},
    {"parse_number", (PyCFunction)(void (*)(void))mod_parse_number, METH_VARARGS | METH_KEYWORDS,
     "parse_number(value, name, min=-inf, max=inf, *, whole=False, seconds=False) -> float: "
     "the engine's one number parser (a str as the CLI reads it, a number checked); "
     "ValueError with its line"},
    {"redact_uri", mod_redact_uri, METH_VARARGS,
     "redact_uri(uri) -> the URI with userinfo as *** and no query (as the engine prints it)"},
    {NULL, NULL, 0, NULL},
};

static int module_exec(PyObject *mod)
{
    PyObject *tp = PyType_FromSpec(&Monitor_spec);

    if (!tp)
        return -1;
    if (PyModule_AddObject(mod, "Monitor", tp) < 0) { /* steals tp on success */
        Py_DECREF(tp);
        return -1;
    }
    tp = PyType_FromSpec(&Delivery_spec);
    if (!tp)
        return -1;
    Py_INCREF(tp);
    delivery_type = tp; /* kept for Monitor's check */
    if (PyModule_AddObject(mod, "Delivery", tp) < 0) {
        Py_DECREF(tp);
        return -1;
    }
    if (PyModule_AddIntConstant(mod, "RECORD_METRIC", SM_RECORD_METRIC) < 0 ||
        PyModule_AddIntConstant(mod, "RECORD_TAG", SM_RECORD_TAG) < 0 ||
        PyModule_AddIntConstant(mod, "DRAIN_CAP_MAX", DRAIN_CAP_MAX) < 0)
        return -1;
    /* the bounds and limits of scopemeter.h: the front validates with the
     * C engine's values, never a copy */
    if (PyModule_AddObject(mod, "INTERVAL_MIN", PyFloat_FromDouble(SM_INTERVAL_MIN)) < 0 ||
        PyModule_AddObject(mod, "INTERVAL_MAX", PyFloat_FromDouble(SM_INTERVAL_MAX)) < 0 ||
        PyModule_AddObject(mod, "INTERVAL_DEFAULT", PyFloat_FromDouble(SM_INTERVAL_DEFAULT)) < 0 ||
        PyModule_AddObject(mod, "STOP_TIMEOUT_MAX", PyFloat_FromDouble(SM_STOP_TIMEOUT_MAX)) < 0 ||
        PyModule_AddObject(mod, "STOP_TIMEOUT_DEFAULT",
                           PyFloat_FromDouble(SM_STOP_TIMEOUT_DEFAULT)) < 0 ||
        PyModule_AddObject(mod, "CHECK_TIMEOUT",
                           PyFloat_FromDouble(SM_DELIVER_CHECK_TIMEOUT_S)) < 0 ||
        PyModule_AddIntConstant(mod, "SAMPLES_MAX", SM_SAMPLES_MAX) < 0 ||
        PyModule_AddObject(mod, "WRITE_BUDGET_MIN", PyFloat_FromDouble(SM_WRITE_BUDGET_MIN)) < 0 ||
        PyModule_AddObject(mod, "WRITE_BUDGET_MAX", PyFloat_FromDouble(SM_WRITE_BUDGET_MAX)) < 0 ||
        PyModule_AddIntConstant(mod, "GPUS_MAX", SM_GPUS_MAX) < 0 ||
        PyModule_AddIntConstant(mod, "PLAN_DEFAULT", SM_PLAN_DEFAULT) < 0 ||
        PyModule_AddIntConstant(mod, "PLAN_WORKERS_MAX", SM_PLAN_WORKERS_MAX) < 0 ||
        PyModule_AddIntConstant(mod, "BATCH_METRICS", SM_MLFLOW_BATCH_METRICS) < 0 ||
        PyModule_AddIntConstant(mod, "BATCH_TAGS", SM_MLFLOW_BATCH_TAGS) < 0 ||
        PyModule_AddIntConstant(mod, "BATCH_ENTITIES", SM_MLFLOW_BATCH_ENTITIES) < 0 ||
        PyModule_AddIntConstant(mod, "KEY_MAX", SM_MLFLOW_KEY_MAX) < 0)
        return -1;
    return 0;
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, (void *)module_exec},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "scopemeter._native",
    .m_doc = "scopemeter's C engine (libscopemeter core) for the Python front.",
    .m_size = 0,
    .m_methods = module_methods,
    .m_slots = module_slots,
};

PyMODINIT_FUNC PyInit__native(void)
{
    return PyModuleDef_Init(&module_def);
}
