/*
 * build.c — which build of scopemeter recorded a run: the start tag
 * scopemeter.rankN.build (docs/series.md, "Run tags").
 *
 * Why: a run recorded by a wheel, by a platform's bundle or by a CLI copied
 * into an image is read the same way, and when two builds disagree the run
 * must say which one it was.  Everything here is read from this process
 * itself (which file this code was loaded from, which modules the loader
 * holds), never from the sysroot: the fixtures stand in for the kernel's
 * files, not for scopemeter.  It never fails the start: what cannot be told
 * is said as unknown.
 */
#include <dlfcn.h>
#include <glob.h>
#include <link.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* the TLS modules as src/mlflow/curl_api.h names them: the core may not
 * include the MLflow layer's files (tests/py/test_layers.py), it only
 * looks for the files the loader holds */
static const char *const tls_modules[][2] = {
    {"scopemeter-https-sys.so", "system-openssl"},
    {"scopemeter-https.so", "bundled"},
};

static pthread_mutex_t nvml_mu = PTHREAD_MUTEX_INITIALIZER;
static char nvml_driver[96];

void sm__build_note_nvml(const char *driver)
{
    pthread_mutex_lock(&nvml_mu);
    snprintf(nvml_driver, sizeof nvml_driver, "%s", driver);
    pthread_mutex_unlock(&nvml_mu);
}

/* 1 when DIR/../build.ninja exists: the file is in a meson build tree */
static int in_build_tree(const char *file)
{
    char p[PATH_MAX + 32];
    const char *slash = strrchr(file, '/');

    if (!slash)
        return 0;
    snprintf(p, sizeof p, "%.*s/../build.ninja", (int)(slash - file), file);
    return access(p, F_OK) == 0;
}

/* How this code was installed and loaded, and from where (*where: a path).
 * The object is this file's: the CLI's executable, libscopemeter.so, or the
 * extension (symbolic links resolved: the suite's staged package links the
 * extension from the build tree).  The layouts are the ones the TLS module
 * is looked for in (src/mlflow/curl_api.c, beside_executable). */
static const char *install_kind(char *where, size_t len)
{
    struct link_map *lm = NULL;
    char file[PATH_MAX], *slash;
    Dl_info info;
    const char *base;

    snprintf(where, len, "unknown");
    if (!dladdr1((void *)&install_kind, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
        return "unknown";
    if (!lm->l_name[0]) { /* the main program's link map has no name */
        if (!realpath("/proc/self/exe", file))
            return "unknown";
        snprintf(where, len, "%s", file);
        if (in_build_tree(file))
            return "development";
        if ((slash = strrchr(file, '/'))) {
            char pkg[PATH_MAX + 64];
            glob_t g;
            int n = (int)(slash - file);
            /* `pip install --target DIR`: DIR/bin/scopemeter beside DIR/scopemeter/ */
            snprintf(pkg, sizeof pkg, "%.*s/../scopemeter/__init__.py", n, file);
            if (access(pkg, F_OK) == 0)
                return "bundle";
            /* a wheel in an environment: bin/ beside lib/pythonX.Y/site-packages/ */
            snprintf(pkg, sizeof pkg, "%.*s/../lib/python3.*/*-packages/scopemeter/__init__.py",
                     n, file);
            if (glob(pkg, GLOB_NOSORT, NULL, &g) == 0) {
                globfree(&g);
                return "wheel";
            }
        }
        return "cli";
    }
    if (!realpath(info.dli_fname, file))
        snprintf(file, sizeof file, "%s", info.dli_fname);
    base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    if (in_build_tree(file)) {
        snprintf(where, len, "%s", file);
        return "development";
    }
    if (strncmp(base, "libscopemeter", 13) == 0) {
        snprintf(where, len, "%s", file);
        return "library";
    }
    /* the extension: PKG/_native*.so, PKG the package directory */
    if ((slash = strrchr(file, '/')))
        *slash = '\0';
    snprintf(where, len, "%s", file);
    if (strstr(file, "/site-packages/") || strstr(file, "/dist-packages/"))
        return "wheel";
    return "bundle"; /* a package outside any site-packages: pip install --target */
}

/* The TLS module the loader holds (https loads it at the run check, before
 * the start tags), else none-yet (http, or no https request so far). */
struct tls_hit {
    const char *kind;
};

static int find_tls(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct tls_hit *hit = arg;
    const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;

    (void)size;
    for (size_t i = 0; base && i < sizeof tls_modules / sizeof tls_modules[0]; i++)
        if (strcmp(base + 1, tls_modules[i][0]) == 0) {
            hit->kind = tls_modules[i][1];
            return 1;
        }
    return 0;
}

/* Appends TEXT with mountinfo's octal escapes for a space (\040) and a
 * backslash (\134), so a path stays one token of the tag's space-separated
 * fields, and for every control byte (\011 tab, \012 newline, \033, \177
 * ...), so the tag stays one printable line (docs/design.md §2, "Names as
 * shown", says why no name is tagged raw). */
static void add_escaped(char *out, size_t cap, const char *text)
{
    size_t n = strlen(out);

    for (const char *p = text; *p && n + 5 < cap; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == ' ' || c == '\\' || c < 0x20 || c == 0x7f)
            n += (size_t)snprintf(out + n, cap - n, "\\%03o", (unsigned char)*p);
        else
            out[n++] = *p;
    }
    out[n] = '\0';
}

void sm__build_tag(char *out, size_t cap)
{
    char where[PATH_MAX];
    struct tls_hit hit = {"none-yet"};
    const char *kind = install_kind(where, sizeof where);

    dl_iterate_phdr(find_tls, &hit);
    snprintf(out, cap, "version=%s install=%s tls=%s", sm_version(), kind, hit.kind);
    pthread_mutex_lock(&nvml_mu);
    if (nvml_driver[0]) {
        sm__line_add(out, cap, " nvml=");
        add_escaped(out, cap, nvml_driver);
    }
    pthread_mutex_unlock(&nvml_mu);
    sm__line_add(out, cap, " path="); /* last: a path too long is what is cut */
    add_escaped(out, cap, where);
}
