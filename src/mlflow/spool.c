/*
 * spool.c — the spool past the ring (spool.h; docs/design.md §6, "The
 * spool").  Only the delivering thread (or, at stop, the thread that stops,
 * after the driver is gone) calls in here: the sampling thread never waits
 * on this file's I/O.
 *
 * Files: <dir>/scopemeter-<run>-rank<N>-<pid>-<seq>.spool, segments of at
 * most a quarter of the bound, each self-contained (the strings its records
 * name are in it), each held with flock(LOCK_EX) while this process lives,
 * so `scopemeter sync` skips a live recorder's files.  Past the bound the
 * oldest segment is removed whole, its records counted as dropped.
 *
 * Page cache: each chunk is written, fdatasync'ed, then dropped with
 * posix_fadvise(DONTNEED) (mm/fadvise.c: clean pages of the range are
 * invalidated), and so is each range replay reads: the spool's pages are
 * charged to the container's cgroup (Documentation/admin-guide/cgroup-v1/
 * memory.rst, "page cache") and a page read back is active_file, which the
 * kubelet's working set (usage - inactive_file) counts.
 *
 * Exactly once: the commit (frame offset, record index) is rewritten in the
 * header after each batch the store took.  A crash between the store's 200
 * and that write re-sends one batch: MLflow's metrics table has the primary
 * key (key, timestamp, step, run_uuid, value, is_nan) and its SQL store
 * skips rows already there, so an identical re-send is a no-op
 * (tests/py/test_spool.py checks it on sqlite).  The commit is not synced:
 * a process that dies leaves it in the page cache, the kernel writes it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "body.h"
#include "mlflow_rest.h"
#include "number.h"
#include "parse.h"
#include "spool.h"

#define TMPFS_MAGIC_ 0x01021994 /* TMPFS_MAGIC, the kernel's uapi/linux/magic.h */
#define RECS_PER_FRAME 4096
#define SEGS_MAX (SM_SPOOL_SEGMENTS + 2)

typedef struct segment {
    int fd;
    uint64_t seq;
    uint64_t size;         /* bytes written */
    uint64_t pending;      /* records after the commit */
    uint64_t off;          /* commit: the frame, and records of it done */
    uint32_t idx;
    uint8_t have[SM_RING_STRINGS / 8]; /* strings written into this file */
    char path[PATH_MAX + SM_SPOOL_RUN_MAX + 96];
} segment;

struct sm_spool {
    char dir[PATH_MAX];
    char run_id[SM_SPOOL_RUN_MAX + 1];
    int rank;
    int broken;            /* unusable: said once, nothing more is tried */
    int dir_ok;
    uint64_t max_bytes, seg_bytes, seq;
    int64_t step_base;
    segment *seg[SEGS_MAX]; /* oldest first; the last is written */
    int nseg;
    char *buf;             /* one chunk being written, or one frame read */
    size_t cap;
    size_t read_n;         /* records handed out by the last read */
    uint64_t spooled, replayed, dropped;
};

/* ---- the bound and the directory ------------------------------------------------ */

int sm__spool_new(const char *run_id, int rank, sm_spool **out)
{
    static const sm_num_spec spec = {"SCOPEMETER_SPOOL_MAX_MB", 0, 1048576, 1, 0};
    static atomic_flag once = ATOMIC_FLAG_INIT;
    const char *dir = getenv("SCOPEMETER_SPOOL_DIR");
    double mb = SM_SPOOL_MAX_MB_DEFAULT;
    sm_spool *s;

    *out = NULL;
    if (sm__env_number("SCOPEMETER_SPOOL_MAX_MB", &spec, &mb,
                       "using the default 64 MB", &once) < 0)
        mb = SM_SPOOL_MAX_MB_DEFAULT;
    if (mb == 0)
        return 0;
    s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    snprintf(s->dir, sizeof s->dir, "%s", dir && *dir ? dir : SM_SPOOL_DIR_DEFAULT);
    snprintf(s->run_id, sizeof s->run_id, "%s", run_id);
    s->rank = rank;
    s->max_bytes = (uint64_t)mb * 1000000u;
    s->seg_bytes = s->max_bytes / SM_SPOOL_SEGMENTS;
    *out = s;
    return 0;
}

static int broken(sm_spool *s, const char *fmt, const char *what, int rc)
{
    if (!s->broken)
        sm__log(SM_WARN, fmt, s->dir, what);
    s->broken = 1;
    return rc;
}

/* The directory itself is made (0700), not its parents: a mistyped
 * SCOPEMETER_SPOOL_DIR is one line, not a tree.  Then the tmpfs check: a
 * spool in RAM would take its pages from the very memory limit whose outage
 * it outlives. */
static int dir_ready(sm_spool *s)
{
    struct statfs fs;

    if (s->dir_ok)
        return 0;
    if (mkdir(s->dir, 0700) < 0 && errno != EEXIST)
        return broken(s, "cannot make the spool directory %s (%s): the oldest points are "
                      "dropped when the buffer is full", strerror(errno), -errno);
    if (statfs(s->dir, &fs) < 0)
        return broken(s, "cannot read the spool directory %s (%s): the oldest points are "
                      "dropped when the buffer is full", strerror(errno), -errno);
    if ((unsigned long)fs.f_type == TMPFS_MAGIC_)
        return broken(s, "the spool directory %s is a %s, whose pages count against the "
                      "memory limit: no spool, the oldest points are dropped when the buffer "
                      "is full (set SCOPEMETER_SPOOL_DIR to a disk)", "tmpfs", -EXDEV);
    s->dir_ok = 1;
    return 0;
}

/* ---- segments ------------------------------------------------------------------- */

static void seg_close(sm_spool *s, int i, int remove)
{
    segment *g = s->seg[i];

    if (remove)
        unlink(g->path);
    close(g->fd); /* the lock goes with it */
    free(g);
    memmove(&s->seg[i], &s->seg[i + 1], (size_t)(s->nseg - i - 1) * sizeof s->seg[0]);
    s->nseg--;
}

static int seg_open(sm_spool *s)
{
    sm_spool_header h = {0};
    char head[SM_SPOOL_HEADER_FIXED + SM_SPOOL_RUN_MAX];
    segment *g = calloc(1, sizeof *g);
    size_t n;
    int rc;

    if (!g)
        return -ENOMEM;
    g->seq = s->seq++;
    snprintf(g->path, sizeof g->path, "%s/scopemeter-%s-rank%d-%ld-%llu.spool", s->dir,
             s->run_id, s->rank, (long)getpid(), (unsigned long long)g->seq);
    g->fd = open(g->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (g->fd < 0) {
        rc = -errno;
        free(g);
        return rc;
    }
    if (flock(g->fd, LOCK_EX | LOCK_NB) < 0) {
        rc = -errno;
        goto fail;
    }
    snprintf(h.run, sizeof h.run, "%s", s->run_id);
    h.rank = s->rank;
    h.pid = (uint32_t)getpid();
    h.step_base = s->step_base; /* steps as the ring has them; sync adds it */
    n = sm__spool_header_put(head, &h);
    if (pwrite(g->fd, head, n, 0) != (ssize_t)n) {
        rc = errno ? -errno : -EIO;
        goto fail;
    }
    g->size = g->off = n;
    s->seg[s->nseg++] = g;
    return 0;
fail:
    unlink(g->path);
    close(g->fd);
    free(g);
    return rc;
}

static int ensure_cap(sm_spool *s, size_t need)
{
    char *p;

    if (need <= s->cap)
        return 0;
    p = realloc(s->buf, need);
    if (!p)
        return -ENOMEM;
    s->buf = p;
    s->cap = need;
    return 0;
}

static size_t put_string(char *out, uint16_t id, const char *str)
{
    size_t n = strlen(str);

    if (n > SM_SPOOL_PAYLOAD_MAX - 2)
        n = SM_SPOOL_PAYLOAD_MAX - 2;
    sm__spool_frame_head(out, 'S', n + 2);
    out[5] = (char)(id & 0xff);
    out[6] = (char)(id >> 8);
    memcpy(out + 7, str, n);
    sm__spool_frame_tail(out + 7 + n, 'S', out + 5, n + 2);
    return SM_SPOOL_FRAME_OVERHEAD + n + 2;
}

/* 1 when the string id is one to write into this file (marks it in have). */
static int new_string(uint8_t *have, uint16_t id)
{
    if (id == 0 || id >= SM_RING_STRINGS || (have[id / 8] & (1u << (id % 8))))
        return 0;
    have[id / 8] |= (uint8_t)(1u << (id % 8));
    return 1;
}

/* One chunk (at most RECS_PER_FRAME records) into the last segment, with the
 * strings it names first; written, synced, dropped from the page cache. */
static int put_chunk(sm_spool *s, const sm_ring *ring, const sm_entry *e, size_t n)
{
    segment *g = s->seg[s->nseg - 1];
    size_t len = 0, need = SM_SPOOL_FRAME_OVERHEAD + n * SM_SPOOL_REC_SIZE;
    uint8_t have[sizeof g->have];
    char *rec;
    int rc;

    /* the strings this file does not have yet go first: the room they take */
    memcpy(have, g->have, sizeof have);
    for (size_t i = 0; i < n; i++) {
        uint16_t ids[2] = {e[i].key, e[i].text};
        for (int k = 0; k < 2; k++)
            if (new_string(have, ids[k]))
                need += SM_SPOOL_FRAME_OVERHEAD + 2 + strlen(sm__ring_str(ring, ids[k]));
    }
    if ((rc = ensure_cap(s, need)) < 0)
        return rc;
    memcpy(have, g->have, sizeof have);
    for (size_t i = 0; i < n; i++) {
        uint16_t ids[2] = {e[i].key, e[i].text};
        for (int k = 0; k < 2; k++)
            if (new_string(have, ids[k]))
                len += put_string(s->buf + len, ids[k], sm__ring_str(ring, ids[k]));
    }
    sm__spool_frame_head(s->buf + len, 'R', n * SM_SPOOL_REC_SIZE);
    rec = s->buf + len + 5;
    for (size_t i = 0; i < n; i++) {
        sm_spool_rec r = {e[i].value, e[i].timestamp_ms, e[i].step, e[i].key, e[i].text};
        sm__spool_rec_put(rec + i * SM_SPOOL_REC_SIZE, &r);
    }
    sm__spool_frame_tail(rec + n * SM_SPOOL_REC_SIZE, 'R', rec, n * SM_SPOOL_REC_SIZE);
    len += SM_SPOOL_FRAME_OVERHEAD + n * SM_SPOOL_REC_SIZE;
    if (pwrite(g->fd, s->buf, len, (off_t)g->size) != (ssize_t)len || fdatasync(g->fd) < 0) {
        rc = errno ? -errno : -ENOSPC;
        if (ftruncate(g->fd, (off_t)g->size) < 0) { /* the frames stay whole */
        }
        return rc;
    }
    /* the whole file, not the chunk's range: DONTNEED drops only whole pages
     * inside the range (mm/fadvise.c rounds the start up), and a chunk is
     * usually less than a page */
    (void)posix_fadvise(g->fd, 0, 0, POSIX_FADV_DONTNEED);
    memcpy(g->have, have, sizeof have);
    g->size += len;
    g->pending += n;
    s->spooled += n;
    return 0;
}

static uint64_t total_bytes(const sm_spool *s)
{
    uint64_t t = 0;

    for (int i = 0; i < s->nseg; i++)
        t += s->seg[i]->size;
    return t;
}

int sm__spool_put(sm_spool *s, const sm_ring *ring, const sm_entry *e, size_t n,
                  int64_t step_base)
{
    int rc;

    if (s->broken)
        return -EIO;
    s->step_base = step_base; /* fixed once the run check is done */
    if ((rc = dir_ready(s)) < 0)
        return rc;
    while (n > 0) {
        size_t k = n < RECS_PER_FRAME ? n : RECS_PER_FRAME;
        uint64_t chunk = (uint64_t)k * SM_SPOOL_REC_SIZE + 64 * 1024; /* + strings, roughly */

        if (s->nseg == 0 || s->seg[s->nseg - 1]->size + chunk > s->seg_bytes) {
            if (s->nseg == SEGS_MAX) { /* cannot happen within the bound; never overflow */
                s->dropped += s->seg[0]->pending;
                seg_close(s, 0, 1);
            }
            if ((rc = seg_open(s)) < 0)
                return broken(s, "cannot write a spool file in %s (%s): the oldest points "
                              "are dropped when the buffer is full", strerror(-rc), rc);
        }
        /* the bound: the oldest segment goes, whole, before a new chunk
         * would pass it; its records are counted */
        while (s->nseg > 1 && total_bytes(s) + chunk > s->max_bytes) {
            if (s->dropped == 0 && s->seg[0]->pending)
                sm__log(SM_WARN, "the spool in %s reached its bound (SCOPEMETER_SPOOL_MAX_MB, "
                       "%llu MB): its oldest points are dropped (counted at stop)", s->dir,
                       (unsigned long long)(s->max_bytes / 1000000u));
            s->dropped += s->seg[0]->pending;
            seg_close(s, 0, 1);
        }
        if ((rc = put_chunk(s, ring, e, k)) < 0)
            return broken(s, "cannot write the spool in %s (%s): the oldest points are "
                          "dropped when the buffer is full", strerror(-rc), rc);
        e += k;
        n -= k;
    }
    return 0;
}

uint64_t sm__spool_pending(const sm_spool *s)
{
    uint64_t n = 0;

    for (int i = 0; s && i < s->nseg; i++)
        n += s->seg[i]->pending;
    return n;
}

/* Reads the frame at g->off into s->buf: 1 and *f, 0 at the end of what
 * was written, < 0 a frame that does not read back (the rest is lost). */
static int read_frame(sm_spool *s, segment *g, sm_spool_frame *f)
{
    char head[5];
    size_t plen, len;
    int rc;

    if (g->off >= g->size)
        return 0;
    if (pread(g->fd, head, 5, (off_t)g->off) != 5)
        return -EIO;
    plen = (size_t)(unsigned char)head[0] | (size_t)(unsigned char)head[1] << 8 |
           (size_t)(unsigned char)head[2] << 16 | (size_t)(unsigned char)head[3] << 24;
    if (plen > SM_SPOOL_PAYLOAD_MAX)
        return -EBADMSG;
    len = SM_SPOOL_FRAME_OVERHEAD + plen;
    if ((rc = ensure_cap(s, len)) < 0)
        return rc;
    if (pread(g->fd, s->buf, len, (off_t)g->off) != (ssize_t)len)
        return -EIO;
    (void)posix_fadvise(g->fd, 0, 0, POSIX_FADV_DONTNEED); /* as put_chunk, whole pages */
    rc = sm__spool_frame_parse(s->buf, len, 0, f);
    return rc == 0 ? -EBADMSG : rc;
}

size_t sm__spool_read(sm_spool *s, sm_entry *out, size_t cap)
{
    s->read_n = 0;
    while (s && s->nseg > 0) {
        segment *g = s->seg[0];
        sm_spool_frame f;
        int rc = g->pending ? read_frame(s, g, &f) : 0;

        if (rc <= 0) { /* done with it (or it does not read back: counted) */
            if (rc < 0)
                sm__log(SM_WARN, "the spool file %s does not read back (%s): its %llu "
                       "remaining points are dropped", g->path, strerror(-rc),
                       (unsigned long long)g->pending);
            s->dropped += g->pending;
            if (s->nseg == 1 && rc == 0 && !g->pending) {
                /* the file being written, all replayed: removed; the next
                 * put starts a new one */
                seg_close(s, 0, 1);
                return 0;
            }
            seg_close(s, 0, 1);
            continue;
        }
        if (f.type != 'R' || g->idx >= f.len / SM_SPOOL_REC_SIZE) {
            g->off += SM_SPOOL_FRAME_OVERHEAD + f.len; /* strings: the ring has them */
            g->idx = 0;
            continue;
        }
        size_t n = f.len / SM_SPOOL_REC_SIZE - g->idx;
        if (n > cap)
            n = cap;
        for (size_t i = 0; i < n; i++) {
            sm_spool_rec r;
            sm__spool_rec_get(f.payload, g->idx + i, &r);
            out[i] = (sm_entry){r.value, r.timestamp_ms, r.step, r.key, r.text};
        }
        s->read_n = n;
        return n;
    }
    return 0;
}

void sm__spool_commit(sm_spool *s, size_t used)
{
    segment *g;
    char c[16];
    sm_spool_frame f;

    if (!s || s->nseg == 0 || used == 0)
        return;
    g = s->seg[0];
    if (used > s->read_n)
        used = s->read_n;
    s->read_n = 0;
    g->idx += (uint32_t)used;
    g->pending -= used;
    s->replayed += used;
    /* a frame done: the commit names the next one */
    if (read_frame(s, g, &f) == 1 && g->idx >= f.len / SM_SPOOL_REC_SIZE) {
        g->off += SM_SPOOL_FRAME_OVERHEAD + f.len;
        g->idx = 0;
    }
    sm__spool_commit_put(c, g->off, g->idx);
    if (pwrite(g->fd, c, sizeof c, 16) != (ssize_t)sizeof c) {
        /* the next sync re-sends from an older commit: a no-op in the store */
    }
    if (g->pending == 0)
        seg_close(s, 0, 1);
}

void sm__spool_counts(const sm_spool *s, sm_spool_counts *out)
{
    memset(out, 0, sizeof *out);
    if (!s)
        return;
    out->spooled = s->spooled;
    out->replayed = s->replayed;
    out->dropped = s->dropped;
    out->left = sm__spool_pending(s);
}

const char *sm__spool_dir(const sm_spool *s)
{
    return s ? s->dir : "";
}

void sm__spool_free(sm_spool *s)
{
    if (!s)
        return;
    while (s->nseg > 0)
        seg_close(s, 0, s->seg[0]->pending == 0);
    free(s->buf);
    free(s);
}

/* ---- scopemeter sync: one file ---------------------------------------------------- */

static const char *bad_why(int rc)
{
    switch (rc) {
    case -EBADMSG: return "not a scopemeter spool file, or a malformed frame";
    case -EPROTO: return "written by another version of scopemeter (format version differs)";
    case -ENODATA: return "truncated";
    case -EILSEQ: return "corrupt (CRC mismatch)";
    default: return strerror(-rc);
    }
}

typedef struct sync_state {
    sm_ring strings;        /* only its string table: body.c reads keys there */
    char *file;
    size_t len;
    sm_spool_header h;
    int fd;
    uint64_t delivered, metrics, refused, nonfinite;
    /* damage: frames skipped for a CRC mismatch (first at bad_off), the
     * records in them, records naming a string such a frame held, and the
     * code where reading stopped before the end (0: it read to the end) */
    uint64_t bad_frames, bad_recs, orphans, bad_off;
    int stop_rc;
    uint64_t stop_off;
    char aside[PATH_MAX];
} sync_state;

/* The frame at off, for sync: 1 and *f, 0 at the end, < 0 where reading
 * stops.  A frame whose CRC fails is skipped when the frame its length
 * points at reads (or the file ends there): 4 bytes overwritten in a payload
 * lose that frame, not the file's rest.  When the length is the damage, the
 * next frame's own CRC fails too (a false match is 2^-32): reading stops. */
static int sync_frame(sync_state *st, size_t off, sm_spool_frame *f, int count)
{
    for (;;) {
        sm_spool_frame g;
        int rc = sm__spool_frame_parse(st->file, st->len, off, f);

        if (rc != -EILSEQ || sm__spool_frame_parse(st->file, st->len, f->next, &g) < 0) {
            if (rc < 0 && count) {
                st->stop_rc = rc;
                st->stop_off = off;
            }
            return rc;
        }
        if (count) {
            if (!st->bad_frames++)
                st->bad_off = off;
            st->bad_recs += f->type == 'R' ? f->len / SM_SPOOL_REC_SIZE : 0;
        }
        off = f->next;
    }
}

/* The strings of the whole file, first: a record names only strings of its
 * own file, written before it. */
static int load_strings(sync_state *st)
{
    sm_spool_frame f;
    size_t off = st->h.len;
    int rc;

    st->strings.str = calloc(SM_RING_STRINGS, sizeof *st->strings.str);
    if (!st->strings.str)
        return -ENOMEM;
    while ((rc = sync_frame(st, off, &f, 1)) == 1) {
        if (f.type == 'S') {
            uint16_t id = (uint16_t)((unsigned char)f.payload[0] |
                                     (unsigned char)f.payload[1] << 8);
            if (id == 0 || id >= SM_RING_STRINGS) {
                st->stop_rc = -EBADMSG; /* a frame that reads but names no string */
                st->stop_off = off;
                return -EBADMSG;
            }
            free(st->strings.str[id]);
            st->strings.str[id] = strndup(f.payload + 2, f.len - 2);
            if (!st->strings.str[id])
                return -ENOMEM;
        }
        off = f.next;
    }
    return rc;
}

static int has_str(const sync_state *st, uint16_t id)
{
    return id < SM_RING_STRINGS && st->strings.str[id];
}

static int post_batch(sm_rest *r, sync_state *st, const sm_entry *e, size_t n, size_t *taken,
                      double deadline, char *why, size_t cap)
{
    uint64_t seed = sm__rest_seed(st);
    sm_body sb = {0};
    int attempt = 0, out;

    if (sm__body_log_batch(&sb, st->h.run, &st->strings, e, n, st->h.step_base) < 0) {
        sm__body_free(&sb);
        snprintf(why, cap, "out of memory");
        return -ENOMEM;
    }
    *taken = sb.used;
    for (;;) {
        sm_rest_result a = {.retry_after = -1};
        sm__rest_once(r, "POST", "runs/log-batch", sb.buf, sb.len, &a);
        out = a.outcome;
        snprintf(why, cap, "%s", a.msg);
        double w = sm__rest_backoff(attempt++, a.retry_after, 1.0, 10.0, &seed);
        sm__rest_result_clear(&a);
        if (out != SM_REST_RETRY || sm__now_mono() + w > deadline)
            break;
        struct timespec ts = {(time_t)w, (long)((w - (double)(time_t)w) * 1e9)};
        nanosleep(&ts, NULL);
    }
    sm__body_free(&sb);
    return out;
}

/* Delivers from the commit on: 0 all, 1 up to damage (st says it), < 0 stopped
 * by the store or the client (line in why). */
static int sync_records(sync_state *st, const char *uri, double timeout_s, char *why,
                        size_t cap)
{
    sm_entry batch[SM_MLFLOW_MAX_ENTITIES];
    size_t from[SM_MLFLOW_MAX_ENTITIES];
    sm_spool_frame f;
    sm_rest r;
    uint64_t off = st->h.commit_off;
    uint32_t idx = st->h.commit_idx;
    char err[512];
    int rc;

    if ((rc = sm__rest_init(&r, uri, err, sizeof err)) < 0) {
        snprintf(why, cap, "%s", err);
        return rc;
    }
    while ((rc = sync_frame(st, (size_t)off, &f, 0)) == 1) {
        size_t nrec = f.type == 'R' ? f.len / SM_SPOOL_REC_SIZE : 0;

        while (idx < nrec) {
            size_t nm = 0, nt = 0, nb = 0, i, taken = 0, used;
            for (i = idx; i < nrec; i++) {
                sm_spool_rec x;
                sm_entry en;
                sm__spool_rec_get(f.payload, i, &x);
                if (!has_str(st, x.key) || (x.text && !has_str(st, x.text))) {
                    st->orphans++; /* its key was in a frame skipped as damaged */
                    continue;
                }
                en = (sm_entry){x.value, x.timestamp_ms, x.step, x.key, x.text};
                int admit = sm__body_admit(&en, &nm, &nt);
                if (admit < 0)
                    break;
                if (admit == 0) {
                    st->nonfinite++;
                    continue;
                }
                from[nb] = i;
                batch[nb++] = en;
            }
            used = i - idx;
            if (nb > 0) {
                int out = post_batch(&r, st, batch, nb, &taken,
                                     sm__now_mono() + timeout_s, why, cap);
                if (out == SM_REST_RETRY || out == SM_REST_FAILED || out < 0) {
                    rc = -EAGAIN;
                    goto end;
                }
                if (taken < nb)
                    used = from[taken] - idx;
                if (out == SM_REST_OK) {
                    st->delivered += taken;
                    for (size_t k = 0; k < taken; k++)
                        st->metrics += batch[k].text == 0;
                }
                else
                    st->refused += taken; /* why holds the store's line */
            }
            idx += (uint32_t)used;
            if (idx >= nrec)
                break;
            char c[16];
            sm__spool_commit_put(c, off, idx);
            if (pwrite(st->fd, c, sizeof c, 16) != (ssize_t)sizeof c) {
                /* a later sync re-sends from the older commit: a no-op */
            }
        }
        off = f.next;
        idx = 0;
        char c[16];
        sm__spool_commit_put(c, off, idx);
        if (pwrite(st->fd, c, sizeof c, 16) != (ssize_t)sizeof c) {
        }
    }
    if (rc < 0)
        rc = 1; /* damage: load_strings saw it, st says it; why keeps the store's line */
end:
    sm__rest_free(&r);
    return rc;
}

/* path + ".damaged": out of the `*.spool` that sync reads, kept for whoever
 * wants the bytes (never removed: not all of it was delivered). */
static int aside(const char *path, char *out)
{
    if (sm__line(out, PATH_MAX, "%s.damaged", path) < 0)
        return -ENAMETOOLONG;
    return rename(path, out) < 0 ? -errno : 0;
}

/* "; not delivered: 1 frame (4096 records) corrupt (CRC mismatch) at byte 9000,
 * skipped; 12 records whose key was in it; the rest from byte 20000 is truncated" */
static void damage_line(const sync_state *st, char *line, size_t cap)
{
    sm__line_add(line, cap, "; not delivered:");
    if (st->bad_frames)
        sm__line_add(line, cap, " %llu frame%s (%llu records) %s from byte %llu, skipped;",
                     (unsigned long long)st->bad_frames, st->bad_frames == 1 ? "" : "s",
                     (unsigned long long)st->bad_recs, bad_why(-EILSEQ),
                     (unsigned long long)st->bad_off);
    if (st->orphans)
        sm__line_add(line, cap, " %llu records whose key was in a skipped frame;",
                     (unsigned long long)st->orphans);
    if (st->stop_rc < 0)
        sm__line_add(line, cap, " the rest from byte %llu is %s;",
                     (unsigned long long)st->stop_off, bad_why(st->stop_rc));
    line[strlen(line) - 1] = '\0'; /* the last ';' */
}

int sm__spool_sync_file(const char *path, const char *uri, double timeout_s, char *line,
                        size_t cap, sm_spool_header *writer)
{
    sync_state st = {0};
    struct stat sb;
    char why[600] = "";
    int rc, skipped = 1;

    if (writer)
        writer->run[0] = '\0';

    st.fd = open(path, O_RDWR | O_CLOEXEC);
    if (st.fd < 0) {
        snprintf(line, cap, "%s: skipped: cannot open it (%s)", path, strerror(errno));
        return 1;
    }
    if (flock(st.fd, LOCK_EX | LOCK_NB) < 0) {
        snprintf(line, cap, "%s: skipped: held by a live recorder (its own spool; it "
                 "replays it itself)", path);
        goto out;
    }
    if (fstat(st.fd, &sb) < 0 || sb.st_size > (off_t)1 << 32) {
        snprintf(line, cap, "%s: skipped: %s", path, "cannot read it, or larger than 4 GiB");
        goto out;
    }
    st.len = (size_t)sb.st_size;
    st.file = malloc(st.len ? st.len : 1);
    if (!st.file || pread(st.fd, st.file, st.len, 0) != (ssize_t)st.len) {
        snprintf(line, cap, "%s: skipped: cannot read it", path);
        goto out;
    }
    (void)posix_fadvise(st.fd, 0, 0, POSIX_FADV_DONTNEED);
    if ((rc = sm__spool_header_parse(st.file, st.len, &st.h)) < 0) {
        /* a damaged header (truncated, CRC) is set aside: nothing in it can
         * be read, and a sync that says it once is enough.  Another version's
         * file and one that is not a spool file stay as they are; so does an
         * empty one (a recorder opens, then locks: it may be starting now). */
        if (st.len > 0 && (rc == -ENODATA || rc == -EILSEQ) && aside(path, st.aside) == 0)
            snprintf(line, cap, "%s: skipped: %s, nothing in it can be read; kept as %s", path,
                     bad_why(rc), st.aside);
        else
            snprintf(line, cap, "%s: skipped: %s", path, bad_why(rc));
        goto out;
    }
    /* a damaged tail or frame is not a damaged file: the frames that read
     * are delivered, and the file is set aside with a line saying the rest */
    if ((rc = load_strings(&st)) == -ENOMEM) {
        snprintf(line, cap, "%s: skipped: out of memory", path);
        goto out;
    }
    skipped = 0;
    rc = sync_records(&st, uri, timeout_s, why, sizeof why);
    if (writer && rc != -EAGAIN && rc != -EINVAL && rc != -ENOMEM)
        *writer = st.h; /* unlocked, read, the store answered: its recorder is gone */
    if (rc == -EAGAIN || rc == -EINVAL || rc == -ENOMEM) {
        snprintf(line, cap, "%s: run %s rank %d: %llu points delivered, stopped: %s; the rest "
                 "kept for the next sync", path, st.h.run, st.h.rank,
                 (unsigned long long)st.delivered, why);
        skipped = -1;
        goto out;
    }
    snprintf(line, cap, "%s: run %s rank %d: %llu points delivered (%llu metrics, %llu tags)"
             "%s%s", path, st.h.run, st.h.rank, (unsigned long long)st.delivered,
             (unsigned long long)st.metrics, (unsigned long long)(st.delivered - st.metrics),
             st.refused ? ", some refused: " : "", st.refused ? why : "");
    if (st.bad_frames || st.orphans || st.stop_rc < 0) {
        /* never removed: what could not be read was not delivered */
        damage_line(&st, line, cap);
        if (aside(path, st.aside) == 0)
            sm__line_add(line, cap, "; the file is kept as %s", st.aside);
        else
            sm__line_add(line, cap, "; the file is kept as it is (cannot rename it: %s)",
                         strerror(errno));
        skipped = 1;
    } else {
        unlink(path);
    }
    if (st.nonfinite) {
        size_t l = strlen(line);
        snprintf(line + l, cap - l, "; %llu non-finite values skipped",
                 (unsigned long long)st.nonfinite);
    }
out:
    if (st.strings.str) {
        for (size_t i = 0; i < SM_RING_STRINGS; i++)
            free(st.strings.str[i]);
        free(st.strings.str);
    }
    free(st.file);
    close(st.fd);
    return skipped;
}
