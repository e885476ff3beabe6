/*
 * curl_api.c — which libcurl a REST handle uses: the one linked in, or, for
 * https in an object linked without TLS, the one in scopemeter-https.so.
 *
 * Why TLS is a separate module: the Python extension loads into every
 * training process, most of which ship to an http:// tracking server inside
 * the cluster.  Linked statically, OpenSSL brought ~19000 relocations into
 * the extension; the dynamic loader writes every one at import, so 0.4 MB of
 * private pages and 0.5 MB of relocation table were resident before the
 * first sample, with no https in sight (bench/README.md, table 5).  So the
 * shared objects link a libcurl without TLS, and the first https handle
 * loads the module, a second copy of libcurl with OpenSSL (scripts/build-
 * deps builds both from one source).  The executables link the TLS libcurl:
 * as a PIE they pay the same relocations, but they are separate processes,
 * and one self-contained file matters more for a launcher.
 *
 * Where the module is looked for: beside the object this code is in (the
 * Python package's directory, libscopemeter.so's libdir), then in its
 * scopemeter/ subdirectory (meson installs it to libdir/scopemeter), each
 * both as the object was loaded and with symbolic links resolved (the test
 * suite's staged package links the extension from the build directory).
 *
 * The module is loaded once per process and never unloaded: handles made by
 * it may live until exit.  That pthread_once state is the one process-wide
 * thing here, like libcurl's own curl_global_init.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "curl_api.h"
#include "scopemeter_mlflow.h"

static const sm_curl_api builtin = SM_CURL_API_TABLE;

const sm_curl_api *sm_curl_builtin(void)
{
    return &builtin;
}

static int has_tls(const sm_curl_api *c)
{
    const curl_version_info_data *v = c->version_info(CURLVERSION_NOW);
    return v && (v->features & CURL_VERSION_SSL);
}

int sm_curl_builtin_tls(void)
{
    return has_tls(&builtin);
}

/* ---- the module, loaded once ----------------------------------------------- */
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static const sm_curl_api *tls_api;
static char tls_path[PATH_MAX];
static char tls_err[768];

/* dir/sub/file into out; 0 when it fits */
static int join(char *out, size_t outlen, const char *dir, size_t dirlen, const char *sub)
{
    return (size_t)snprintf(out, outlen, "%.*s/%s%s", (int)dirlen, dir, sub,
                            SM_HTTPS_MODULE_FILE) < outlen ? 0 : -ENAMETOOLONG;
}

/* Tries DIR/scopemeter-https.so and DIR/scopemeter/scopemeter-https.so for
 * the directory of `obj`; the first that loads wins.  Appends each miss to
 * tls_err. */
static void *try_dir(const char *obj, char *path, size_t pathlen)
{
    static const char *const subs[] = {"", "scopemeter/"};
    const char *slash = strrchr(obj, '/');
    size_t dirlen = slash ? (size_t)(slash - obj) : 0;
    const char *dir = slash ? obj : ".";
    void *h;

    if (!slash)
        dirlen = 1;
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        if (join(path, pathlen, dir, dirlen, subs[i]) < 0)
            continue;
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
        if (i == 0 && strlen(tls_err) < sizeof tls_err - 1) {
            /* dlerror() names the file and why ("No such file or directory") */
            size_t n = strlen(tls_err);
            snprintf(tls_err + n, sizeof tls_err - n, "%s%s", n ? "; " : "", dlerror());
        }
    }
    return NULL;
}

static void tls_load(void)
{
    const sm_curl_api *(*entry)(void);
    const sm_curl_api *api;
    char resolved[PATH_MAX];
    Dl_info info;
    void *h = NULL;

    if (!dladdr((void *)&sm_curl_tls, &info) || !info.dli_fname || !*info.dli_fname) {
        snprintf(tls_err, sizeof tls_err, "cannot tell which file this code was loaded from");
        return;
    }
    h = try_dir(info.dli_fname, tls_path, sizeof tls_path);
    if (!h && realpath(info.dli_fname, resolved) && strcmp(resolved, info.dli_fname) != 0)
        h = try_dir(resolved, tls_path, sizeof tls_path);
    if (!h)
        return;
    *(void **)&entry = dlsym(h, SM_HTTPS_MODULE_ENTRY);
    api = entry ? entry() : NULL;
    if (!api || api->abi != SM_CURL_API_ABI || !has_tls(api)) {
        snprintf(tls_err, sizeof tls_err, "%.600s is not the TLS module of this build of scopemeter",
                 tls_path);
        goto fail;
    }
    if (api->global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(tls_err, sizeof tls_err, "%.600s: libcurl initialisation failed", tls_path);
        goto fail;
    }
    tls_err[0] = '\0';
    tls_api = api;
    return;
fail:
    tls_path[0] = '\0';
    dlclose(h);
}

const sm_curl_api *sm_curl_tls(char *err, size_t errlen)
{
    if (has_tls(&builtin))
        return &builtin;
    pthread_once(&tls_once, tls_load);
    if (!tls_api)
        snprintf(err, errlen, "https needs the TLS module %s, which did not load: %s",
                 SM_HTTPS_MODULE_FILE, tls_err);
    return tls_api;
}

const char *sm_curl_tls_path(void)
{
    return tls_api ? tls_path : "";
}

int sm_mlflow_tls(char *out, size_t outlen)
{
    const sm_curl_api *c = sm_curl_tls(out, outlen);

    if (!c)
        return -ENOENT;
    snprintf(out, outlen, "%s (%s)", c->version(), c == &builtin ? "built in" : tls_path);
    return 0;
}
