/*
 * parse_proc.c — /proc/stat, /proc/meminfo, /proc/net/dev and the simple
 * "key value" / single-number formats of cgroup files.  See parse.h.
 *
 * Formats: proc(5) for /proc/stat and /proc/meminfo; /proc/net/dev is
 * net/core/net-procfs.c dev_seq_printf_stats(): "iface: rx_bytes rx_packets
 * rx_errs rx_drop rx_fifo rx_frame rx_compressed rx_multicast tx_bytes ...".
 * A process's files (/proc/PID/stat, smaps_rollup, status, task/TID/children)
 * are fs/proc/array.c, fs/proc/task_mmu.c and Documentation/filesystems/proc.rst.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "parse.h"

static int is_space(char c)
{
    return c == ' ' || c == '\t';
}

int sm__scan_u64(const char **p, const char *end, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;

    if (s >= end || *s < '0' || *s > '9')
        return -EINVAL;
    while (s < end && *s >= '0' && *s <= '9') {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
        s++;
    }
    *p = s;
    *out = v;
    return 0;
}

static const char *skip_spaces(const char *p, const char *end)
{
    while (p < end && is_space(*p))
        p++;
    return p;
}

static const char *line_end(const char *p, const char *end)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    return nl ? nl : end;
}

int sm__parse_proc_stat(const char *buf, size_t len, sm_cpu_times *out)
{
    const char *p = buf, *end = buf + len, *eol;
    int n = 0;

    memset(out, 0, sizeof *out);
    if (len < 4 || memcmp(p, "cpu ", 4) != 0)
        return -EINVAL;
    eol = line_end(p, end);
    p += 4;
    while (n < 10) {
        p = skip_spaces(p, eol);
        if (p >= eol)
            break;
        int rc = sm__scan_u64(&p, eol, &out->f[n]);
        if (rc < 0)
            return rc;
        if (p < eol && !is_space(*p))
            return -EINVAL;
        n++;
    }
    if (n < 4) /* user nice system idle exist on every Linux */
        return -EINVAL;
    out->nfields = n;
    return 0;
}

static uint64_t total_of(const uint64_t *d)
{
    uint64_t t = 0;

    for (int i = 0; i < 10; i++)
        t += d[i];
    return t - d[8] - d[9]; /* guest time is already counted in user/nice */
}

double sm__cpu_percent(const sm_cpu_times *a, const sm_cpu_times *b)
{
    uint64_t d[10], all, busy;
    double pct;

    for (int i = 0; i < 10; i++)
        d[i] = b->f[i] > a->f[i] ? b->f[i] - a->f[i] : 0; /* clamp negative deltas */
    all = total_of(d);
    busy = all - d[3] - d[4]; /* minus idle and iowait */
    if (all == 0)
        return 0.0;
    pct = 100.0 * (double)busy / (double)all;
    return pct < 0 ? 0 : pct > 100 ? 100 : pct;
}

/* "Key:   12345 kB" -> bytes */
static int meminfo_value(const char *p, const char *eol, uint64_t *out)
{
    uint64_t v;
    int rc;

    p = skip_spaces(p, eol);
    rc = sm__scan_u64(&p, eol, &v);
    if (rc < 0)
        return rc;
    p = skip_spaces(p, eol);
    if (eol - p >= 2 && p[0] == 'k' && p[1] == 'B') {
        if (v > UINT64_MAX / 1024)
            return -ERANGE;
        v *= 1024;
    } else if (p != eol) {
        return -EINVAL;
    }
    *out = v;
    return 0;
}

int sm__parse_meminfo(const char *buf, size_t len, uint64_t *total, uint64_t *available,
                     int *estimated)
{
    static const char *const keys[] = {"MemTotal:", "MemAvailable:", "MemFree:", "Buffers:",
                                       "Cached:"};
    uint64_t v[5] = {0};
    int seen[5] = {0};
    const char *p = buf, *end = buf + len;

    while (p < end) {
        const char *eol = line_end(p, end);
        for (int i = 0; i < 5; i++) {
            size_t kl = strlen(keys[i]);
            if ((size_t)(eol - p) >= kl && memcmp(p, keys[i], kl) == 0) {
                int rc = meminfo_value(p + kl, eol, &v[i]);
                if (rc < 0)
                    return rc;
                seen[i] = 1;
                break;
            }
        }
        p = eol < end ? eol + 1 : end;
    }
    if (!seen[0] || v[0] == 0)
        return -ENOENT;
    *total = v[0];
    *estimated = 0;
    if (seen[1]) {
        *available = v[1];
    } else if (seen[2]) {
        /* each term fits u64 after "kB" scaling, their sum need not: a
         * wrapped sum would read as a small, wrong value */
        if (v[3] > UINT64_MAX - v[2] || v[4] > UINT64_MAX - v[2] - v[3])
            return -ERANGE;
        *available = v[2] + v[3] + v[4];
        *estimated = 1;
    } else {
        return -ENOENT;
    }
    if (*available > *total)
        *available = *total;
    return 0;
}

int sm__parse_net_dev(const char *buf, size_t len, uint64_t *rx, uint64_t *tx)
{
    const char *p = buf, *end = buf + len;
    uint64_t srx = 0, stx = 0;
    int ifaces = 0;

    while (p < end) {
        const char *eol = line_end(p, end);
        const char *colon = memchr(p, ':', (size_t)(eol - p));
        /* the two header lines have '|' and no ':' */
        if (colon) {
            const char *q = colon + 1;
            uint64_t f[9];
            for (int i = 0; i < 9; i++) {
                q = skip_spaces(q, eol);
                int rc = sm__scan_u64(&q, eol, &f[i]);
                if (rc < 0)
                    return rc;
            }
            if (srx > UINT64_MAX - f[0] || stx > UINT64_MAX - f[8])
                return -ERANGE;
            srx += f[0];
            stx += f[8];
            ifaces++;
        }
        p = eol < end ? eol + 1 : end;
    }
    if (ifaces == 0)
        return -ENOENT;
    *rx = srx;
    *tx = stx;
    return 0;
}

int sm__parse_kv(const char *buf, size_t len, const char *key, uint64_t *out)
{
    const char *p = buf, *end = buf + len;
    size_t kl = strlen(key);

    while (p < end) {
        const char *eol = line_end(p, end);
        if ((size_t)(eol - p) > kl && memcmp(p, key, kl) == 0 && is_space(p[kl])) {
            const char *q = skip_spaces(p + kl, eol);
            int rc = sm__scan_u64(&q, eol, out);
            if (rc < 0)
                return rc;
            q = skip_spaces(q, eol);
            return q == eol ? 0 : -EINVAL;
        }
        p = eol < end ? eol + 1 : end;
    }
    return -ENOENT;
}

int sm__parse_number(const char *buf, size_t len, uint64_t *out, int *unlimited)
{
    const char *p = buf, *end = buf + len;
    int rc;

    while (end > p && (end[-1] == '\n' || is_space(end[-1])))
        end--;
    p = skip_spaces(p, end);
    *unlimited = 0;
    *out = 0;
    if (end - p == 3 && memcmp(p, "max", 3) == 0) {
        *unlimited = 1;
        return 0;
    }
    if (p < end && *p == '-') { /* v1 cpu.cfs_quota_us: -1 means no quota */
        const char *q = p + 1;
        uint64_t v;
        rc = sm__scan_u64(&q, end, &v);
        if (rc < 0 || q != end)
            return rc < 0 ? rc : -EINVAL;
        *unlimited = 1;
        return 0;
    }
    rc = sm__scan_u64(&p, end, out);
    if (rc < 0)
        return rc;
    return p == end ? 0 : -EINVAL;
}

/* One signed decimal field (tty_nr, tpgid, priority and nice may be
 * negative): the value, negative numbers as 0 (only the times are used). */
static int scan_field(const char **p, const char *end, uint64_t *out)
{
    int neg = 0, rc;

    if (*p < end && **p == '-') {
        neg = 1;
        (*p)++;
    }
    rc = sm__scan_u64(p, end, out);
    if (rc == 0 && neg)
        *out = 0;
    return rc;
}

int sm__parse_pid_stat(const char *buf, size_t len, sm_pid_stat *out)
{
    const char *p = buf, *end = buf + len, *close = NULL;
    uint64_t v, f[25];
    int rc;

    memset(out, 0, sizeof *out);
    rc = sm__scan_u64(&p, end, &v);
    if (rc < 0)
        return rc;
    if (v == 0 || v > 0x7fffffff)
        return -ERANGE;
    out->pid = (int)v;
    if (end - p < 2 || p[0] != ' ' || p[1] != '(')
        return -EINVAL;
    for (const char *q = p + 2; q < end; q++)
        if (*q == ')')
            close = q; /* the last one: comm may hold ") (" */
    if (!close)
        return -EINVAL;
    p = close + 1;
    if (end - p < 3 || p[0] != ' ' || p[2] != ' ')
        return -EINVAL;
    out->state = p[1];
    p += 2;
    /* fields 4..22, each after one space */
    for (int i = 4; i <= 22; i++) {
        if (p >= end || *p != ' ')
            return -EINVAL;
        p++;
        rc = scan_field(&p, end, &f[i]);
        if (rc < 0)
            return rc;
    }
    /* fields 23 (vsize) and 24 (rss, pages): every kernel writes them; a
     * line that stops before them still has what the tree needs */
    for (int i = 23; i <= 24 && p < end && *p == ' ' && p + 1 < end && p[1] != '\n'; i++) {
        p++;
        rc = scan_field(&p, end, &f[i]);
        if (rc < 0)
            return rc;
        if (i == 24)
            out->rss_pages = f[24];
    }
    if (p < end && *p != ' ' && *p != '\n')
        return -EINVAL;
    if (f[4] > 0x7fffffff)
        return -ERANGE;
    out->ppid = (int)f[4];
    out->minflt = f[10];
    out->majflt = f[12];
    out->utime = f[14];
    out->stime = f[15];
    out->cutime = f[16];
    out->cstime = f[17];
    out->starttime = f[22];
    return 0;
}

int sm__parse_exit_code(const char *buf, size_t len, int *status)
{
    const char *p = buf, *end = buf + len, *close = NULL;
    uint64_t v;
    int field = 2, rc;

    *status = 0;
    for (const char *q = buf; q < end; q++)
        if (*q == ')')
            close = q; /* the last one: comm may hold ") (" */
    if (!close || close + 1 >= end || close[1] != ' ')
        return -EINVAL;
    /* fields 3.. are separated by one space each; find where 52 starts */
    for (p = close + 1; p < end && *p != '\n' && field < 52; p++)
        if (*p == ' ')
            field++;
    if (field < 52 || p >= end || *p == '\n')
        return -ENOENT; /* a kernel before 3.5 ends the line earlier */
    rc = sm__scan_u64(&p, end, &v);
    if (rc < 0)
        return rc;
    if (p < end && *p != ' ' && *p != '\n')
        return -EINVAL;
    if (v > 0xffff) /* a wait status: (code << 8) | signal | 0x80 for a core */
        return -ERANGE;
    *status = (int)v;
    return 0;
}

int sm__parse_kb(const char *buf, size_t len, const char *key, uint64_t *kb)
{
    const char *p = buf, *end = buf + len;
    size_t kl = strlen(key);

    while (p < end) {
        const char *eol = line_end(p, end);
        if ((size_t)(eol - p) >= kl && kl > 0 && memcmp(p, key, kl) == 0) {
            const char *q = skip_spaces(p + kl, eol);
            int rc = sm__scan_u64(&q, eol, kb);
            if (rc < 0)
                return rc;
            q = skip_spaces(q, eol);
            if (eol - q < 2 || memcmp(q, "kB", 2) != 0)
                return -EINVAL;
            q = skip_spaces(q + 2, eol);
            if (q != eol)
                return -EINVAL;
            if (*kb > UINT64_MAX / 1024)
                return -ERANGE;
            return 0;
        }
        p = eol < end ? eol + 1 : end;
    }
    return -ENOENT;
}

int sm__environ_int(const char *buf, size_t len, const char *name, int *out)
{
    const char *p = buf, *end = buf + len;
    size_t nl = strlen(name);

    while (p < end) {
        const char *nul = memchr(p, '\0', (size_t)(end - p));
        const char *e = nul ? nul : end;
        if (nl > 0 && (size_t)(e - p) > nl && memcmp(p, name, nl) == 0 && p[nl] == '=') {
            const char *q = p + nl + 1;
            uint64_t v;
            int rc = q < e ? sm__scan_u64(&q, e, &v) : -EINVAL;
            if (rc < 0)
                return rc;
            if (q != e)
                return -EINVAL;
            if (v > INT_MAX)
                return -ERANGE;
            *out = (int)v;
            return 0;
        }
        p = e < end ? e + 1 : end;
    }
    return -ENOENT;
}

int sm__pid_list_next(const char *buf, size_t len, size_t *pos, int *pid)
{
    const char *p = buf + (*pos < len ? *pos : len), *end = buf + len;
    uint64_t v;
    int rc;

    while (p < end && (is_space(*p) || *p == '\n'))
        p++;
    if (p == end) {
        *pos = len;
        return 0;
    }
    rc = sm__scan_u64(&p, end, &v);
    if (rc < 0)
        return rc;
    if (p < end && !is_space(*p) && *p != '\n')
        return -EINVAL;
    if (v == 0 || v > 0x7fffffff)
        return -ERANGE;
    *pid = (int)v;
    *pos = (size_t)(p - buf);
    return 1;
}

/* The first entry of a comma-separated list (CUDA_VISIBLE_DEVICES,
 * ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES), blanks around it trimmed, cut
 * to cap - 1 bytes; always NUL-terminated. */
void sm__list_entry(const char *v, char *out, size_t cap)
{
    size_t len;

    while (*v == ' ' || *v == '\t')
        v++;
    len = strcspn(v, ",");
    while (len && (v[len - 1] == ' ' || v[len - 1] == '\t'))
        len--;
    if (len >= cap)
        len = cap - 1;
    memcpy(out, v, len);
    out[len] = '\0';
}

void sm__visible_walk(const char *list, sm_visible_match match, void *arg, char *chosen,
                     size_t n, char *stop, size_t stoplen)
{
    char tok[256];

    if (stoplen)
        stop[0] = '\0';
    for (const char *v = list;;) {
        int idx;

        sm__list_entry(v, tok, sizeof tok);
        idx = match(tok, arg);
        if (idx < 0 || (size_t)idx >= n) {
            if (stoplen)
                snprintf(stop, stoplen, "%s", tok);
            return;
        }
        chosen[idx] = 1;
        v = strchr(v, ',');
        if (!v)
            return;
        v++;
    }
}
