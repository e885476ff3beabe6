/*
 * parse_gpu.c — pure parsers of the amdgpu driver's text files the AMD GPU
 * collector reads (coll_amdgpu.c).  No I/O here: callers pass what they
 * read, the fuzz target (tests/fuzz/fuzz_pp_dpm.c) passes anything.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "parse.h"

/*
 * pp_dpm_sclk / pp_dpm_mclk (Documentation/gpu/amdgpu/thermal.rst, "pp_dpm_*":
 * "the available power levels ... The current level is marked with a *"):
 * one line per level, "<level>: <N>Mhz" with " *" after the current one;
 * the level is a number or, on newer parts, "S" (the deep-sleep level).
 */
int sm__parse_pp_dpm(const char *buf, size_t len, uint64_t *mhz)
{
    const char *p = buf, *end = buf + len;

    while (p < end) {
        const char *eol = p, *q;
        uint64_t v;
        int star = 0;

        while (eol < end && *eol != '\n')
            eol++;
        q = p;
        while (q < eol && *q != ':')
            q++;
        if (q == eol)
            return -EINVAL; /* not "<level>: ..." */
        q++;
        while (q < eol && *q == ' ')
            q++;
        if (sm__scan_u64(&q, eol, &v) < 0)
            return -EINVAL;
        if (eol - q < 3 || strncasecmp(q, "mhz", 3) != 0)
            return -EINVAL;
        for (q += 3; q < eol; q++) {
            if (*q == '*')
                star = 1;
            else if (*q != ' ')
                return -EINVAL;
        }
        if (star) {
            *mhz = v;
            return 0;
        }
        p = eol < end ? eol + 1 : end;
    }
    return -ENOENT; /* no current level (a part that does not say) */
}

/* "<uint> [KiB|MiB]" up to eol (drm-usage-stats.rst, "Memory": "Default
 * unit shall be bytes with optional unit specifiers of 'KiB' or 'MiB'"). */
static int drm_bytes(const char *q, const char *eol, uint64_t *out)
{
    uint64_t v, mul = 1;

    if (sm__scan_u64(&q, eol, &v) < 0)
        return -EINVAL;
    while (q < eol && (*q == ' ' || *q == '\t'))
        q++;
    if (eol - q >= 3 && strncmp(q, "KiB", 3) == 0)
        mul = 1024, q += 3;
    else if (eol - q >= 3 && strncmp(q, "MiB", 3) == 0)
        mul = 1024 * 1024, q += 3;
    while (q < eol && (*q == ' ' || *q == '\t' || *q == '\r'))
        q++;
    if (q != eol)
        return -EINVAL;
    if (v > UINT64_MAX / mul)
        return -ERANGE;
    *out = v * mul;
    return 0;
}

/* A <valstr> up to eol, trailing blanks dropped, cut to cap - 1. */
static void drm_str(const char *q, const char *eol, char *dst, size_t cap)
{
    size_t n;

    while (eol > q && (eol[-1] == ' ' || eol[-1] == '\t' || eol[-1] == '\r'))
        eol--;
    n = (size_t)(eol - q) < cap - 1 ? (size_t)(eol - q) : cap - 1;
    memcpy(dst, q, n);
    dst[n] = '\0';
}

/*
 * drm-usage-stats.rst, "File format specification": one "key: value" per
 * line, keys prefixed drm-, whitespace after the colon ignored.  The other
 * lines of fdinfo (pos:, flags:, mnt_id:, ino:, a driver's own keys) are
 * skipped.  drm-client-id "shall be either globally unique, or unique within
 * the scope of each device, in which case drm-pdev shall be present": the
 * caller counts a client once by (drm-pdev, drm-client-id).
 */
int sm__parse_drm_fdinfo(const char *buf, size_t len, sm_drm_fdinfo *out)
{
    static const struct { const char *key; int which; } vram[] = {
        {"drm-resident-vram", SM_DRM_VRAM_RESIDENT},
        {"drm-memory-vram", SM_DRM_VRAM_MEMORY},
        {"drm-total-vram", SM_DRM_VRAM_TOTAL},
    };
    const char *p = buf, *end = buf + len;
    int has_driver = 0;

    memset(out, 0, sizeof *out);
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p)), *colon, *q;
        size_t klen;

        if (!eol)
            eol = end;
        colon = memchr(p, ':', (size_t)(eol - p));
        if (!colon || (size_t)(colon - p) < 4 || strncmp(p, "drm-", 4) != 0)
            goto next;
        klen = (size_t)(colon - p);
        for (q = colon + 1; q < eol && (*q == ' ' || *q == '\t');)
            q++;
#define KEY(k) (klen == sizeof(k) - 1 && memcmp(p, k, klen) == 0) /* k: a literal */
        if (KEY("drm-driver")) {
            drm_str(q, eol, out->driver, sizeof out->driver);
            has_driver = 1;
        } else if (KEY("drm-pdev")) {
            drm_str(q, eol, out->pdev, sizeof out->pdev);
        } else if (KEY("drm-client-id")) {
            const char *r = q;
            if (sm__scan_u64(&r, eol, &out->client_id) < 0)
                return -EINVAL;
            while (r < eol && (*r == ' ' || *r == '\t' || *r == '\r'))
                r++;
            if (r != eol)
                return -EINVAL; /* a <uint>, no unit */
            out->has_client_id = 1;
        } else {
            for (size_t i = 0; i < sizeof vram / sizeof vram[0]; i++) {
                uint64_t v;
                int rc;
                if (klen != strlen(vram[i].key) || memcmp(p, vram[i].key, klen) != 0)
                    continue;
                if ((rc = drm_bytes(q, eol, &v)) < 0)
                    return rc;
                /* the first key of the list present wins, whatever the order of lines */
                if (!out->vram_key || vram[i].which < out->vram_key) {
                    out->vram_bytes = v;
                    out->vram_key = vram[i].which;
                }
            }
        }
#undef KEY
    next:
        p = eol < end ? eol + 1 : end;
    }
    return has_driver ? 0 : -ENOENT;
}
