/*
 * curl_api.c — which libcurl a REST handle uses: the one linked in, or, for
 * https in a binary linked without TLS, the one in scopemeter-https.so.
 *
 * Why TLS is a separate module: the Python extension loads into every
 * training process, and most of them ship to an http:// tracking server
 * inside the cluster.  Linked statically, OpenSSL brought ~19000 relocations
 * into the extension; the dynamic loader writes every one at load, so 0.4 MB
 * of private pages and 0.5 MB of relocation table were resident before the
 * first sample, with no https in sight, and the CLI paid the same (bench/
 * README.md, table 5).  So the extension, libscopemeter.so and the CLI link
 * a libcurl without TLS, and the first https handle (or an http server's
 * redirect to https) loads the module: a second copy of libcurl, with
 * OpenSSL (scripts/build-deps builds both from one source).  Only the test
 * programs link the TLS libcurl directly.
 *
 * Where the module is looked for — beside_object() and beside_executable()
 * below: next to the shared object this code is in, as loaded and with
 * symbolic links resolved (the test suite's staged package links the
 * extension from the build directory); for the CLI, next to the executable,
 * in the libdir meson installs it to, and in the Python package of a pip
 * install.  A missing module fails https only, with one line naming where
 * it looked; http never needs it.
 *
 * Which module — system_openssl() below: a training process that imported
 * mlflow has Python's ssl module loaded, and with it the system's
 * libssl.so.3 and libcrypto.so.3.  A second, static OpenSSL (the module's)
 * costs that process ~4 MB more resident memory (its relocations, its own
 * initialisation; bench/README.md table 5).  So where the process holds
 * OpenSSL 3 already, scopemeter-https-sys.so is loaded instead: the same
 * libcurl with OpenSSL's symbols left undefined and no DT_NEEDED on libssl
 * (the wheel stays manylinux: it links nothing outside glibc), resolved
 * against the loaded copy once that is made global (dlopen RTLD_NOLOAD |
 * RTLD_GLOBAL, dlopen(3)).  Elsewhere (the CLI, a process without OpenSSL,
 * SCOPEMETER_OPENSSL=bundled, or the sys module missing or failing) the
 * static module is loaded as before.  Both leave the trust store to
 * OpenSSL's defaults (scripts/build-deps): with the system's OpenSSL that is
 * the image's own directory.
 *
 * The module is loaded once per process and never unloaded: handles made by
 * it may live until exit.  That pthread_once state is the one process-wide
 * thing here, like libcurl's own curl_global_init.
 */
#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "curl_api.h"
#include "scopemeter_mlflow.h"

static const sm_curl_api builtin = SM_CURL_API_TABLE;

const sm_curl_api *sm__curl_builtin(void)
{
    return &builtin;
}

int sm__curl_has_tls(const sm_curl_api *c)
{
    const curl_version_info_data *v = c->version_info(CURLVERSION_NOW);
    return v && (v->features & CURL_VERSION_SSL);
}

/* ---- the module, loaded once ----------------------------------------------- */
#ifndef SM_BIN_TO_LIBDIR
#define SM_BIN_TO_LIBDIR "../lib" /* meson.build passes bindir -> libdir */
#endif

static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static const sm_curl_api *tls_api;
static const char *tls_file = SM_HTTPS_MODULE_FILE; /* the module being looked for */
static char tls_path[PATH_MAX];
static char tls_err[768];

/* Appends the first miss's reason (dlerror names the file and why). */
static void note_miss(void)
{
    size_t n = strlen(tls_err);

    if (n < sizeof tls_err - 1)
        snprintf(tls_err + n, sizeof tls_err - n, "%s%s", n ? "; " : "", dlerror());
}

/* Loads DIR/scopemeter-https.so into tls_path; NULL (and a note) if not. */
static void *try_file(const char *dir, size_t dirlen, const char *sub)
{
    void *h;

    if ((size_t)snprintf(tls_path, sizeof tls_path, "%.*s/%s%s", (int)dirlen, dir, sub,
                         tls_file) >= sizeof tls_path)
        return NULL;
    h = dlopen(tls_path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        note_miss();
    return h;
}

/* A shared object (the extension, libscopemeter.so): beside it, then in
 * its scopemeter/ subdirectory (meson installs there from libdir). */
static void *beside_object(const char *obj)
{
    const char *slash = strrchr(obj, '/');
    void *h;

    if (!slash)
        return NULL;
    h = try_file(obj, (size_t)(slash - obj), "");
    return h ? h : try_file(obj, (size_t)(slash - obj), "scopemeter/");
}

/* The executable (the CLI), in BINDIR: BINDIR itself (the build tree, or a
 * directory the two files were copied to), the libdir meson installs the
 * module into, a bundle made by `pip install --target DIR` (DIR/bin and
 * DIR/scopemeter), and the Python package of a pip install into an
 * environment (the CLI in its bin/, the module in lib/pythonX.Y/
 * site-packages/scopemeter/, X.Y any Python >= 3.9; dist-packages on
 * Debian's /usr/local). */
static void *beside_executable(void)
{
    char exe[PATH_MAX], pat[PATH_MAX + 64];
    const char *slash;
    size_t dirlen;
    glob_t g;
    void *h;

    if (!realpath("/proc/self/exe", exe) || !(slash = strrchr(exe, '/')))
        return NULL;
    dirlen = (size_t)(slash - exe);
    if ((h = try_file(exe, dirlen, "")) ||
        (h = try_file(exe, dirlen, SM_BIN_TO_LIBDIR "/scopemeter/")) ||
        (h = try_file(exe, dirlen, "../scopemeter/")))
        return h;
    snprintf(pat, sizeof pat, "%.*s/../lib/python3.*/*-packages/scopemeter/%s", (int)dirlen, exe,
             tls_file);
    if (glob(pat, GLOB_NOSORT, NULL, &g) != 0)
        return NULL;
    for (size_t i = 0; i < g.gl_pathc && !h; i++) {
        const char *d = g.gl_pathv[i];
        h = try_file(d, (size_t)(strrchr(d, '/') - d), "");
    }
    globfree(&g);
    return h;
}

/* 1 when this process holds OpenSSL 3 (libssl.so.3 and libcrypto.so.3,
 * loaded by someone else: RTLD_NOLOAD never loads them) and both are now in
 * the global scope, where the sys module's undefined symbols resolve.  The
 * references are kept: the libraries stay as long as the module. */
static int system_openssl(void)
{
    const char *v = getenv("SCOPEMETER_OPENSSL");
    unsigned long (*num)(void);
    void *crypto, *ssl = NULL;

    if (v && strcmp(v, "bundled") == 0)
        return 0;
    crypto = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_NOLOAD);
    if (!crypto)
        goto no;
    ssl = dlopen("libssl.so.3", RTLD_NOW | RTLD_NOLOAD);
    *(void **)&num = dlsym(crypto, "OpenSSL_version_num");
    /* the module's libcurl was built against OpenSSL 3.0's API, which every
     * 3.x keeps (OpenSSL's ABI promise within a major version) */
    if (!ssl || !num || num() < 0x30000000UL)
        goto no;
    dlclose(ssl);
    dlclose(crypto);
    /* promotes what was loaded RTLD_LOCAL (Python's _ssl) to global */
    crypto = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
    ssl = crypto ? dlopen("libssl.so.3", RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL) : NULL;
    if (!ssl)
        goto no;
    return 1;
no:
    if (ssl)
        dlclose(ssl);
    if (crypto)
        dlclose(crypto);
    dlerror(); /* a miss here is not the module's error */
    return 0;
}

/* Loads tls_file from where this code's file says, checks it; its table or
 * NULL (tls_err says why). */
static const sm_curl_api *load_module(void)
{
    const sm_curl_api *(*entry)(void);
    const sm_curl_api *api;
    char resolved[PATH_MAX];
    struct link_map *lm = NULL;
    Dl_info info;
    void *h = NULL;

    if (!dladdr1((void *)&sm__curl_tls, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm) {
        snprintf(tls_err, sizeof tls_err, "cannot tell which file this code was loaded from");
        return NULL;
    }
    if (!lm->l_name[0]) { /* the main program's link map has no name */
        h = beside_executable();
    } else {
        h = beside_object(info.dli_fname);
        if (!h && realpath(info.dli_fname, resolved) && strcmp(resolved, info.dli_fname) != 0)
            h = beside_object(resolved);
    }
    if (!h) {
        tls_path[0] = '\0';
        return NULL;
    }
    *(void **)&entry = dlsym(h, SM_HTTPS_MODULE_ENTRY);
    api = entry ? entry() : NULL;
    if (!api || api->abi != SM_CURL_API_ABI || !sm__curl_has_tls(api)) {
        snprintf(tls_err, sizeof tls_err, "%.600s is not the TLS module of this build of scopemeter",
                 tls_path);
        goto fail;
    }
    if (api->global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(tls_err, sizeof tls_err, "%.600s: libcurl initialisation failed", tls_path);
        goto fail;
    }
    tls_err[0] = '\0';
    return api;
fail:
    tls_path[0] = '\0';
    dlclose(h);
    return NULL;
}

static void tls_load(void)
{
    if (system_openssl()) {
        tls_file = SM_HTTPS_SYS_MODULE_FILE;
        tls_api = load_module();
        if (tls_api)
            return;
        tls_err[0] = '\0'; /* the static module is the answer now */
    }
    tls_file = SM_HTTPS_MODULE_FILE;
    tls_api = load_module();
}

const sm_curl_api *sm__curl_tls(char *err, size_t errlen)
{
    if (sm__curl_has_tls(&builtin))
        return &builtin;
    pthread_once(&tls_once, tls_load);
    if (!tls_api)
        snprintf(err, errlen, "https needs the TLS module %s, which did not load: %s",
                 SM_HTTPS_MODULE_FILE, tls_err);
    return tls_api;
}

int sm_mlflow_tls(char *out, size_t outlen)
{
    const sm_curl_api *c = sm__curl_tls(out, outlen);

    if (!c)
        return -ENOENT;
    snprintf(out, outlen, "%s (%s)", c->version(), c == &builtin ? "built in" : tls_path);
    return 0;
}
