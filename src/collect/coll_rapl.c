/*
 * coll_rapl.c — the energy the node's CPU packages used during the recording
 * (docs/series.md, the node_cpu_energy tag), from RAPL's counters in
 * powercap (Documentation/power/powercap/powercap.rst):
 *
 *   /sys/class/powercap/intel-rapl:N/energy_uj            uJ, since boot
 *   /sys/class/powercap/intel-rapl:N/max_energy_range_uj  where it wraps to 0
 *   /sys/class/powercap/intel-rapl:N/name                 package-N[-die-M]
 *
 * Which zones: the top-level ones of the intel-rapl control type named
 * package-* (AMD's Zen packages are there too: drivers/powercap/intel_rapl_msr.c
 * drives them; there is no amd-rapl control type).  Left out: the subzones
 * intel-rapl:N:M (core and uncore are parts of the package's own count,
 * dram is memory, not the CPU package), psys (the whole platform: it holds
 * the packages), and intel-rapl-mmio:N (the same package through the
 * processor's MMIO, drivers/thermal/intel/int340x_thermal/processor_thermal_rapl.c:
 * counting it too would count the package twice).
 *
 * A tag at the end, no series: the energy of a run is one number, and a
 * cumulative kWh chart per rank would repeat the node's on every rank.  The
 * counters are read at open, at every sample (so that a wrap, ~11 minutes
 * apart at 400 W, is never missed) and at the end; each step is summed
 * wrap-safe (sm__rapl_delta).  energy_uj is root's alone on kernels with
 * the PLATYPUS fix (CVE-2020-8694: mode 0400): a counter this process cannot
 * read is one line at open and no tag, never a guess.
 *
 * Never: a step above the counter's range (a second wrap) counted, a zone
 * counted twice, or one zone's failed read dropping another's energy.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "parse.h"

#define RAPL_ZONES_MAX 64 /* packages x dies of the largest nodes, with room */
#define RAPL_DIR "/sys/class/powercap"

struct rapl_zone {
    unsigned num;        /* N of intel-rapl:N: the order of the tag */
    char label[24];      /* package0, package1_die0 */
    int fd;              /* energy_uj, kept open: a sample is one pread */
    uint64_t max, last, sum;
    int failing;
};

struct rapl {
    size_t n;
    struct rapl_zone z[RAPL_ZONES_MAX];
};

/* "intel-rapl:N" exactly (not the control type "intel-rapl", a subzone
 * "intel-rapl:N:M", nor "intel-rapl-mmio:N"). */
static int zone_number(const char *name, unsigned *out)
{
    char *end;
    unsigned long v;

    if (strncmp(name, "intel-rapl:", 11) != 0 || name[11] < '0' || name[11] > '9')
        return 0;
    v = strtoul(name + 11, &end, 10);
    if (*end || v > 0xffff)
        return 0;
    *out = (unsigned)v;
    return 1;
}

static int read_uj(int fd, uint64_t *v)
{
    char buf[32];
    ssize_t n = sm__pread_all(fd, buf, sizeof buf);

    return n < 0 ? (int)n : sm__parse_rapl_uj(buf, (size_t)n, v);
}

/* One zone: 1 kept (a package with a readable counter), 0 not a package, or
 * -errno with the reason in why. */
static int zone_open(const sm_ctx *ctx, struct rapl_zone *z, char *why, size_t whylen)
{
    char abs[96], buf[64];
    ssize_t n;
    int rc;

    snprintf(abs, sizeof abs, RAPL_DIR "/intel-rapl:%u/name", z->num);
    n = sm__read_file(ctx, abs, buf, sizeof buf);
    rc = n < 0 ? (int)n : sm__parse_rapl_name(buf, (size_t)n, z->label, sizeof z->label);
    if (rc <= 0) {
        if (rc < 0)
            sm__line(why, whylen, "cannot read %s: %s", abs, strerror(-rc));
        return rc;
    }
    snprintf(abs, sizeof abs, RAPL_DIR "/intel-rapl:%u/max_energy_range_uj", z->num);
    n = sm__read_file(ctx, abs, buf, sizeof buf);
    rc = n < 0 ? (int)n : sm__parse_rapl_uj(buf, (size_t)n, &z->max);
    if (rc == 0 && z->max == 0)
        rc = -EINVAL; /* a counter with no range counts nothing */
    if (rc < 0) {
        sm__line(why, whylen, "cannot read %s: %s", abs, strerror(-rc));
        return rc;
    }
    snprintf(abs, sizeof abs, RAPL_DIR "/intel-rapl:%u/energy_uj", z->num);
    z->fd = sm__open(ctx, abs);
    rc = z->fd < 0 ? z->fd : read_uj(z->fd, &z->last);
    if (rc == 0 && z->last > z->max)
        rc = -ERANGE;
    if (rc < 0) {
        sm__line(why, whylen, "cannot read %s: %s%s", abs, strerror(-rc),
                 rc == -EACCES ? " (root's alone since the PLATYPUS fix, CVE-2020-8694)" : "");
        if (z->fd >= 0)
            close(z->fd);
        z->fd = -1;
        return rc;
    }
    return 1;
}

static int cmp_zone(const void *a, const void *b)
{
    const struct rapl_zone *x = a, *y = b;
    return (x->num > y->num) - (x->num < y->num);
}

static int rapl_open(void *state, const sm_ctx *ctx, sm_opened *res)
{
    struct rapl *s = state;
    char path[SM_PATH_MAX], note[SM_NOTE_LINE] = "";
    struct dirent *e;
    size_t zones = 0;
    DIR *d;

    if (sm__path(ctx, RAPL_DIR, path, sizeof path) == 0 && (d = opendir(path))) {
        while ((e = readdir(d)) != NULL) {
            struct rapl_zone *z = &s->z[s->n];
            char why[400] = "";
            unsigned num;
            int rc;

            if (!zone_number(e->d_name, &num))
                continue;
            zones++;
            if (s->n == RAPL_ZONES_MAX) {
                sm__line_join(note, sizeof note, "intel-rapl:%u: more than %d packages, not "
                              "counted", num, RAPL_ZONES_MAX);
                continue;
            }
            memset(z, 0, sizeof *z);
            z->num = num;
            z->fd = -1;
            rc = zone_open(ctx, z, why, sizeof why);
            if (rc < 0)
                sm__line_join(note, sizeof note, "%s", why);
            else if (rc == 1)
                s->n++;
        }
        closedir(d);
    }
    if (s->n == 0) {
        if (!zones)
            sm__line(res->msg, sizeof res->msg, "no RAPL package zone (no " RAPL_DIR
                     "/intel-rapl:N): node_cpu_energy absent");
        else
            sm__line(res->msg, sizeof res->msg, "RAPL not readable (%s): node_cpu_energy "
                     "absent", note[0] ? note : "no zone named package-N");
        return SM_ABSENT;
    }
    qsort(s->z, s->n, sizeof s->z[0], cmp_zone);
    sm__line(res->msg, sizeof res->msg, "node_cpu_energy from RAPL (" RAPL_DIR
             "/intel-rapl:N/energy_uj):");
    for (size_t i = 0; i < s->n; i++)
        sm__line_add(res->msg, sizeof res->msg, "%s %s", i ? "," : "", s->z[i].label);
    if (note[0])
        sm__line_add(res->msg, sizeof res->msg, "; left out: %s", note);
    return 0;
}

/* Every zone's counter: the step since its last good reading added. */
static void rapl_read(struct rapl *s)
{
    for (size_t i = 0; i < s->n; i++) {
        struct rapl_zone *z = &s->z[i];
        uint64_t v;
        int rc = read_uj(z->fd, &v);

        if (rc == 0 && v > z->max)
            rc = -ERANGE;
        if (rc < 0) {
            /* kept: the next good reading adds this one's step */
            if (!z->failing)
                sm__log(SM_WARN, "rapl: intel-rapl:%u (%s): cannot read energy_uj: %s; its "
                        "energy is added when it reads again", z->num, z->label, strerror(-rc));
            z->failing = 1;
            continue;
        }
        if (z->failing)
            sm__log(SM_INFO, "rapl: intel-rapl:%u (%s): energy_uj read again", z->num, z->label);
        z->failing = 0;
        z->sum += sm__rapl_delta(z->last, v, z->max);
        z->last = v;
    }
}

static int rapl_sample(void *state, sm_points *out, char *msg, size_t msglen)
{
    (void)out;
    (void)msg;
    (void)msglen;
    rapl_read(state);
    return 0;
}

/* scopemeter.rankN.node_cpu_energy at the end (docs/series.md): as
 * gpu_energy, each package's kWh since open and, with two or more, the sum. */
static void rapl_tags(void *state, int phase, sm_tags *out)
{
    struct rapl *s = state;
    char val[sizeof((sm_tag *)0)->value] = "";
    double total = 0;

    if (phase != SM_TAGS_END)
        return;
    rapl_read(s);
    for (size_t i = 0; i < s->n; i++) {
        double kwh = (double)s->z[i].sum / 3.6e12; /* uJ in a kWh */
        sm__line_add(val, sizeof val, "%s%s kwh=%.6f", i ? "; " : "", s->z[i].label, kwh);
        total += kwh;
    }
    if (s->n > 1)
        sm__line_add(val, sizeof val, "; total_kwh=%.6f", total);
    sm__tag_add(out, "node_cpu_energy", "%s", val);
}

static void rapl_close(void *state)
{
    struct rapl *s = state;

    for (size_t i = 0; i < s->n; i++)
        if (s->z[i].fd >= 0)
            close(s->z[i].fd);
    s->n = 0;
}

const sm_collector_ops sm__coll_rapl = {
    .name = "rapl",
    .series = 0, /* a tag, no chart (docs/series.md "Levels") */
    .node_scope = true,
    .state_size = sizeof(struct rapl),
    .open = rapl_open,
    .sample = rapl_sample,
    .tags = rapl_tags,
    .close = rapl_close,
};
