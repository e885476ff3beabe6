/*
 * parse_cgroup.c — pure parsers of the files that locate a cgroup and its
 * limits: /proc/self/cgroup, /proc/self/mountinfo, cpu.max, CPU lists
 * (cpuset.cpus, /sys/devices/system/cpu/online) and the cpuN lines of
 * /proc/stat.  See parse.h; cgroup.c puts them together.
 *
 * Formats:
 *   /proc/self/cgroup   kernel/cgroup/cgroup.c proc_cgroup_show():
 *                       "ID:CONTROLLERS:PATH", v2 line "0::PATH", and for a
 *                       dead v2 cgroup the suffix " (deleted)".
 *   mountinfo           proc(5) / Documentation/filesystems/proc.rst 3.5:
 *                       "ID PARENT MAJ:MIN ROOT POINT OPTS [OPTIONAL...] -
 *                        FSTYPE SOURCE SUPER", ROOT and POINT escaped by
 *                       fs/proc_namespace.c (mangle: space, tab, newline,
 *                       backslash as \ooo).
 *   cpu.max             Documentation/admin-guide/cgroup-v2.rst: "$MAX $PERIOD".
 *   CPU lists           lib/bitmap.c bitmap_print_to_pagebuf(): "0-3,8-11".
 *   memory.stat,        Documentation/admin-guide/cgroup-v2.rst and
 *   memory.events       cgroup-v1/memory.rst: "key value" lines
 *                       (mm/memcontrol.c memory_stat_format(),
 *                       memcg1_stat_format(), memory_events_show()).
 *   memory.pressure,    Documentation/accounting/psi.rst, kernel/sched/psi.c
 *   cpu.pressure        psi_show(): "some avg10=%lu.%02lu avg60=... avg300=...
 *                       total=%llu", then the same for "full".
 */
#include <errno.h>
#include <string.h>

#include "parse.h"

/* The largest CPU number accepted in a list (NR_CPUS tops out at 8192 today). */
#define SM_CPU_ID_MAX (1u << 20)

static const char *eol_of(const char *p, const char *end)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    return nl ? nl : end;
}

/* ---- /proc/self/cgroup ------------------------------------------------------ */

int sm__cgroup_next(const char *buf, size_t len, size_t *pos, sm_cg_entry *out)
{
    static const char deleted[] = " (deleted)";
    const size_t dl = sizeof deleted - 1;
    const char *end = buf + len;

    while (*pos < len) {
        const char *p = buf + *pos, *eol = eol_of(p, end), *c1, *c2, *q;
        uint64_t id;

        if (p == eol) { /* empty line: nothing to say */
            *pos = (size_t)(eol - buf) + 1;
            continue;
        }
        q = p;
        if (sm__scan_u64(&q, eol, &id) < 0 || id > 0xffffffffu || q >= eol || *q != ':')
            return -EINVAL;
        c1 = q;
        c2 = memchr(c1 + 1, ':', (size_t)(eol - c1 - 1));
        if (!c2 || c2 + 1 >= eol || c2[1] != '/')
            return -EINVAL; /* the path is absolute in every namespace */
        memset(out, 0, sizeof *out);
        out->hier = (unsigned)id;
        out->ctrl = c1 + 1;
        out->ctrl_len = (size_t)(c2 - c1 - 1);
        out->path = c2 + 1;
        out->path_len = (size_t)(eol - c2 - 1);
        if (out->path_len > dl && memcmp(out->path + out->path_len - dl, deleted, dl) == 0) {
            out->path_len -= dl;
            out->deleted = 1;
        }
        *pos = eol < end ? (size_t)(eol - buf) + 1 : len;
        return 1;
    }
    return 0;
}

int sm__list_has(const char *list, size_t len, const char *name)
{
    const char *p = list, *end = list + len;
    size_t nl = strlen(name);

    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma ? comma : end;
        if ((size_t)(e - p) == nl && memcmp(p, name, nl) == 0)
            return 1;
        p = e + 1;
    }
    return 0;
}

/* ---- /proc/self/mountinfo --------------------------------------------------- */

/* Next space-separated field of [*p, eol): sets f/flen, advances *p past
 * the one separating space.  0, or -EINVAL when there is no field. */
static int next_field(const char **p, const char *eol, const char **f, size_t *flen)
{
    const char *s = *p, *e;

    if (s >= eol || *s == ' ')
        return -EINVAL;
    e = memchr(s, ' ', (size_t)(eol - s));
    if (!e)
        e = eol;
    *f = s;
    *flen = (size_t)(e - s);
    *p = e < eol ? e + 1 : eol;
    return 0;
}

int sm__mountinfo_next(const char *buf, size_t len, size_t *pos, sm_mount *out)
{
    const char *end = buf + len;

    while (*pos < len) {
        const char *p = buf + *pos, *eol = eol_of(p, end), *f;
        size_t flen;
        int sep = 0;

        if (p == eol) {
            *pos = (size_t)(eol - buf) + 1;
            continue;
        }
        memset(out, 0, sizeof *out);
        /* id, parent, major:minor */
        for (int i = 0; i < 3; i++)
            if (next_field(&p, eol, &f, &flen) < 0)
                return -EINVAL;
        if (next_field(&p, eol, &out->root, &out->root_len) < 0 ||
            next_field(&p, eol, &out->point, &out->point_len) < 0 ||
            next_field(&p, eol, &f, &flen) < 0) /* per-mount options */
            return -EINVAL;
        /* optional fields, any number, ended by a lone "-" */
        while (next_field(&p, eol, &f, &flen) == 0) {
            if (flen == 1 && f[0] == '-') {
                sep = 1;
                break;
            }
        }
        if (!sep)
            return -EINVAL;
        if (next_field(&p, eol, &out->fstype, &out->fstype_len) < 0 ||
            next_field(&p, eol, &f, &flen) < 0) /* source */
            return -EINVAL;
        /* super options: the rest of the line (they may hold spaces on WSL) */
        out->super = p;
        out->super_len = (size_t)(eol - p);
        *pos = eol < end ? (size_t)(eol - buf) + 1 : len;
        return 1;
    }
    return 0;
}

int sm__unescape_octal(const char *s, size_t len, char *out, size_t outlen)
{
    size_t o = 0;

    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '\\') {
            unsigned v = 0;
            if (len - i < 4)
                return -EINVAL;
            for (int k = 1; k <= 3; k++) {
                if (s[i + k] < '0' || s[i + k] > '7')
                    return -EINVAL;
                v = v * 8 + (unsigned)(s[i + k] - '0');
            }
            if (v == 0 || v > 255)
                return -EINVAL;
            c = (char)v;
            i += 3;
        }
        if (o + 1 >= outlen)
            return -ENAMETOOLONG;
        out[o++] = c;
    }
    if (outlen == 0)
        return -ENAMETOOLONG;
    out[o] = '\0';
    return 0;
}

/* ---- cpu.max ---------------------------------------------------------------- */

int sm__parse_cpu_max(const char *buf, size_t len, uint64_t *quota, uint64_t *period,
                     int *unlimited)
{
    const char *p = buf, *end = buf + len;
    int rc;

    *quota = 0;
    *period = 0;
    *unlimited = 0;
    while (end > p && (end[-1] == '\n' || end[-1] == ' '))
        end--;
    if (end - p >= 3 && memcmp(p, "max", 3) == 0) {
        *unlimited = 1;
        p += 3;
        if (p == end) /* "max" alone: no period printed, none needed */
            return 0;
    } else {
        rc = sm__scan_u64(&p, end, quota);
        if (rc < 0)
            return rc;
    }
    if (p >= end || *p != ' ')
        return -EINVAL;
    p++;
    rc = sm__scan_u64(&p, end, period);
    if (rc < 0)
        return rc;
    if (p != end || *period == 0 || (!*unlimited && *quota == 0))
        return -EINVAL;
    return 0;
}

/* ---- CPU lists -------------------------------------------------------------- */

int sm__parse_cpulist(const char *buf, size_t len, unsigned *count)
{
    const char *p = buf, *end = buf + len;
    uint64_t n = 0, prev_hi = 0;
    int first = 1;

    *count = 0;
    while (end > p && (end[-1] == '\n' || end[-1] == ' '))
        end--;
    if (p == end) /* an empty set (a v1 cpuset not configured yet) */
        return 0;
    while (p < end) {
        uint64_t lo, hi;
        int rc = sm__scan_u64(&p, end, &lo);
        if (rc < 0)
            return rc;
        hi = lo;
        if (p < end && *p == '-') {
            p++;
            rc = sm__scan_u64(&p, end, &hi);
            if (rc < 0)
                return rc;
        }
        if (hi < lo || hi >= SM_CPU_ID_MAX)
            return hi >= SM_CPU_ID_MAX ? -ERANGE : -EINVAL;
        if (!first && lo <= prev_hi)
            return -EINVAL; /* the kernel prints ascending, disjoint ranges */
        n += hi - lo + 1;
        prev_hi = hi;
        first = 0;
        if (p < end) {
            if (*p != ',' || p + 1 == end)
                return -EINVAL;
            p++;
        }
    }
    *count = (unsigned)n;
    return 0;
}

int sm__count_stat_cpus(const char *buf, size_t len, unsigned *count)
{
    const char *p = buf, *end = buf + len;
    unsigned n = 0;
    int have_total = 0;

    *count = 0;
    while (p < end) {
        const char *eol = eol_of(p, end);
        if (eol - p >= 4 && memcmp(p, "cpu", 3) == 0) {
            if (p[3] == ' ')
                have_total = 1;
            else if (p[3] >= '0' && p[3] <= '9')
                n++;
        }
        p = eol < end ? eol + 1 : end;
    }
    if (!have_total || n == 0)
        return -ENOENT;
    *count = n;
    return 0;
}

/* ---- what fills a cgroup (docs/design.md §9) -------------------------------- */

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* The value of a "key value" line whose key is exactly key: 1 with *out set,
 * 0 when the line has another key, negative when the value is malformed. */
static int kv_line(const char *p, const char *eol, const char *key, uint64_t *out)
{
    size_t kl = strlen(key);
    const char *q;
    int rc;

    if ((size_t)(eol - p) <= kl || memcmp(p, key, kl) != 0 || !is_blank(p[kl]))
        return 0;
    q = p + kl;
    while (q < eol && is_blank(*q))
        q++;
    rc = sm__scan_u64(&q, eol, out);
    if (rc < 0)
        return rc;
    while (q < eol && is_blank(*q))
        q++;
    return q == eol ? 1 : -EINVAL;
}

struct want {
    const char *key;
    uint64_t *out;
    unsigned bit;
};

/* One pass over "key value" lines picking the wanted keys; the first
 * occurrence of a key counts (the kernel prints each once). */
static int kv_pick(const char *buf, size_t len, const struct want *w, size_t nw, unsigned *have)
{
    const char *p = buf, *end = buf + len;

    *have = 0;
    while (p < end) {
        const char *eol = eol_of(p, end);
        for (size_t i = 0; i < nw; i++) {
            int rc;
            if (*have & w[i].bit)
                continue;
            rc = kv_line(p, eol, w[i].key, w[i].out);
            if (rc < 0)
                return rc;
            if (rc > 0) {
                *have |= w[i].bit;
                break;
            }
        }
        p = eol < end ? eol + 1 : end;
    }
    return 0;
}

static const char *const memstat_keys[2][4] = {
    {"inactive_file", "active_file", "anon", "shmem"},
    /* v1: total_rss is anonymous memory without shmem, which v1 counts in
     * cache (cgroup-v1/memory.rst 5.2) */
    {"total_inactive_file", "total_active_file", "total_rss", "total_shmem"},
};

int sm__parse_memstat(const char *buf, size_t len, int v1, sm_memstat *out)
{
    const char *const *k = memstat_keys[v1 ? 1 : 0];
    struct want w[4] = {
        {k[0], &out->inactive_file, SM_MS_INACTIVE_FILE},
        {k[1], &out->active_file, SM_MS_ACTIVE_FILE},
        {k[2], &out->anon, SM_MS_ANON},
        {k[3], &out->shmem, SM_MS_SHMEM},
    };
    int rc;

    memset(out, 0, sizeof *out);
    rc = kv_pick(buf, len, w, 4, &out->have);
    if (rc < 0)
        return rc;
    return out->have & SM_MS_INACTIVE_FILE ? 0 : -ENOENT;
}

const char *sm__memstat_missing(unsigned have, int v1)
{
    const char *const *k = memstat_keys[v1 ? 1 : 0];

    if (!(have & SM_MS_ANON))
        return k[2];
    if (!(have & SM_MS_SHMEM))
        return k[3];
    if (!(have & SM_MS_ACTIVE_FILE))
        return k[1];
    return NULL;
}

int sm__parse_memory_events(const char *buf, size_t len, sm_memevents *out)
{
    struct want w[4] = {
        {"high", &out->high, SM_ME_HIGH},
        {"max", &out->max, SM_ME_MAX},
        {"oom", &out->oom, SM_ME_OOM},
        {"oom_kill", &out->oom_kill, SM_ME_OOM_KILL},
    };
    int rc;

    memset(out, 0, sizeof *out);
    rc = kv_pick(buf, len, w, 4, &out->have);
    if (rc < 0)
        return rc;
    return out->have ? 0 : -ENOENT;
}

int sm__parse_psi_some(const char *buf, size_t len, uint64_t *total_us)
{
    const char *p = buf, *end = buf + len;

    while (p < end) {
        const char *eol = eol_of(p, end);
        if (eol - p >= 5 && memcmp(p, "some ", 5) == 0) {
            /* the fields are "name=value" separated by single spaces; total
             * is found by name, so a field added later does not matter */
            const char *q = p + 5;
            while (q < eol) {
                const char *f = q, *fe = memchr(q, ' ', (size_t)(eol - q));
                if (!fe)
                    fe = eol;
                if (fe - f > 6 && memcmp(f, "total=", 6) == 0) {
                    const char *v = f + 6;
                    int rc = sm__scan_u64(&v, fe, total_us);
                    if (rc < 0)
                        return rc;
                    return v == fe ? 0 : -EINVAL;
                }
                if (fe - f == 6 && memcmp(f, "total=", 6) == 0)
                    return -EINVAL;
                q = fe < eol ? fe + 1 : eol;
            }
            return -ENOENT;
        }
        p = eol < end ? eol + 1 : end;
    }
    return -ENOENT;
}
