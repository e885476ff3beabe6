/*
 * parse_io.c — the block I/O counters of a cgroup (see parse.h).
 *
 * Formats, as the kernel prints them:
 *   v2 io.stat (block/blk-cgroup.c, blkcg_print_one_stat): one line per
 *      device that has seen I/O, "MAJ:MIN rbytes=N wbytes=N rios=N wios=N
 *      dbytes=N dios=N", followed by whatever the active policies add
 *      (iocost "cost.vrate=100.00 ...", iolatency "depth=max avg_lat=...":
 *      not all integers).  Only rbytes and wbytes are read; any other
 *      key=value is skipped whatever its value.
 *   v1 blkio.*io_service_bytes* (block/blk-cgroup-rwstat.c,
 *      __blkg_prfill_rwstat): per device "MAJ:MIN Read N", "Write",
 *      "Sync", "Async", "Discard" (4.19 and later), "MAJ:MIN Total N", and
 *      one last "Total N" over every device.  Read and Write are summed;
 *      Sync/Async split the same bytes again and Total adds them up, so
 *      neither is added.
 * A file with no device line (no I/O yet: io.stat is empty, v1 says only
 * "Total 0") is valid and sums to 0.
 */
#include <errno.h>
#include <string.h>

#include "parse.h"

static const char *eol_of(const char *p, const char *end)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    return nl ? nl : end;
}

static const char *skip_blank(const char *p, const char *eol)
{
    while (p < eol && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

/* One whitespace-separated token at p (p < eol): its end. */
static const char *token_end(const char *p, const char *eol)
{
    while (p < eol && *p != ' ' && *p != '\t')
        p++;
    return p;
}

/* "MAJ:MIN", exactly. */
static int is_devno(const char *p, const char *e)
{
    const char *s = p;
    uint64_t v;

    if (sm__scan_u64(&s, e, &v) < 0 || s >= e || *s != ':')
        return 0;
    s++;
    if (sm__scan_u64(&s, e, &v) < 0)
        return 0;
    return s == e;
}

static int add(uint64_t *sum, uint64_t v)
{
    if (v > UINT64_MAX - *sum)
        return -ERANGE;
    *sum += v;
    return 0;
}

/* The whole token [p, e) is a decimal number. */
static int number_token(const char *p, const char *e, uint64_t *v)
{
    int rc = sm__scan_u64(&p, e, v);

    if (rc < 0)
        return rc;
    return p == e ? 0 : -EINVAL;
}

int sm__parse_io_stat(const char *buf, size_t len, uint64_t *rbytes, uint64_t *wbytes)
{
    const char *p = buf, *end = buf + len;
    uint64_t r = 0, w = 0;

    while (p < end) {
        const char *eol = eol_of(p, end), *t, *te;
        int have_r = 0, have_w = 0;

        t = skip_blank(p, eol);
        if (t == eol) { /* an empty line */
            p = eol + 1;
            continue;
        }
        te = token_end(t, eol);
        if (!is_devno(t, te))
            return -EINVAL;
        for (t = skip_blank(te, eol); t < eol; t = skip_blank(te, eol)) {
            uint64_t v;
            int rc, which;

            te = token_end(t, eol);
            if ((size_t)(te - t) > 7 && memcmp(t, "rbytes=", 7) == 0)
                which = 1;
            else if ((size_t)(te - t) > 7 && memcmp(t, "wbytes=", 7) == 0)
                which = 2;
            else if (memchr(t, '=', (size_t)(te - t)))
                continue; /* another counter or a policy's key: not ours */
            else
                return -EINVAL;
            rc = number_token(t + 7, te, &v);
            if (rc == 0)
                rc = add(which == 1 ? &r : &w, v);
            if (rc < 0)
                return rc;
            if ((which == 1 && have_r++) || (which == 2 && have_w++))
                return -EINVAL; /* a key twice on one line: not the kernel's format */
        }
        if (!have_r || !have_w)
            return -EINVAL;
        p = eol + 1;
    }
    *rbytes = r;
    *wbytes = w;
    return 0;
}

int sm__parse_blkio_bytes(const char *buf, size_t len, uint64_t *read, uint64_t *write)
{
    const char *p = buf, *end = buf + len;
    uint64_t r = 0, w = 0;

    while (p < end) {
        const char *eol = eol_of(p, end), *f[4], *fe[4], *t;
        size_t n = 0;
        uint64_t v;
        int rc;

        for (t = skip_blank(p, eol); t < eol && n < 4; t = skip_blank(fe[n - 1], eol)) {
            f[n] = t;
            fe[n] = token_end(t, eol);
            n++;
        }
        p = eol + 1;
        if (n == 0)
            continue;
        if (n == 4 || t < eol)
            return -EINVAL; /* more than three fields */
        if (n == 2) { /* the last line: "Total N" over every device */
            if ((size_t)(fe[0] - f[0]) != 5 || memcmp(f[0], "Total", 5) != 0)
                return -EINVAL;
            rc = number_token(f[1], fe[1], &v);
            if (rc < 0)
                return rc;
            continue;
        }
        if (n != 3 || !is_devno(f[0], fe[0]))
            return -EINVAL;
        rc = number_token(f[2], fe[2], &v);
        if (rc < 0)
            return rc;
        if ((size_t)(fe[1] - f[1]) == 4 && memcmp(f[1], "Read", 4) == 0)
            rc = add(&r, v);
        else if ((size_t)(fe[1] - f[1]) == 5 && memcmp(f[1], "Write", 5) == 0)
            rc = add(&w, v);
        /* Sync, Async, Discard, Total: the same bytes counted another way */
        if (rc < 0)
            return rc;
    }
    *read = r;
    *write = w;
    return 0;
}
