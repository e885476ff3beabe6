/*
 * fuzz_drm_fdinfo.c — libFuzzer target for sm__parse_drm_fdinfo, the reader
 * of /proc/PID/fdinfo/FD of DRM files (the AMD collector's per-process VRAM,
 * Documentation/gpu/drm-usage-stats.rst).
 *
 * Properties beyond "no crash, no sanitizer report": only the documented
 * codes come back; on success the strings are terminated within their
 * arrays, the VRAM key is one of the four and no key means no bytes; a
 * file without "drm-driver" is never taken for a DRM file.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    sm_drm_fdinfo fi;
    int rc = sm__parse_drm_fdinfo((const char *)data, size, &fi);

    if (rc != 0 && rc != -ENOENT && rc != -EINVAL && rc != -ERANGE)
        abort();
    if (rc == 0) {
        if (!memchr(fi.driver, '\0', sizeof fi.driver) || !memchr(fi.pdev, '\0', sizeof fi.pdev))
            abort();
        if (fi.vram_key < SM_DRM_VRAM_NONE || fi.vram_key > SM_DRM_VRAM_TOTAL)
            abort();
        if (fi.vram_key == SM_DRM_VRAM_NONE && fi.vram_bytes != 0)
            abort();
        if (size < 11 || !memmem(data, size, "drm-driver:", 11))
            abort();
    }
    return 0;
}
