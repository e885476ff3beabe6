/*
 * test_api_tls.c — a native program linked with libscopemeter.so (the C
 * API's shared library, as `meson install` ships it): the library's libcurl
 * has no TLS, and https comes from scopemeter-https.so beside it, loaded at
 * the first https need and not before (src/mlflow/curl_api.c).
 *
 *   test_api_tls DIR           no OpenSSL in the process: scopemeter-https.so
 *   test_api_tls DIR system    the program holds the system's libssl.so.3
 *                              first (as Python's ssl module does): the
 *                              module that uses it, scopemeter-https-sys.so,
 *                              and no second OpenSSL (skipped, 77, where the
 *                              system has no libssl.so.3)
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "scopemeter.h"
#include "scopemeter_mlflow.h"

static int mapped(const char *what)
{
    char line[4096];
    int found = 0;
    FILE *f = fopen("/proc/self/maps", "re");

    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        found |= strstr(line, what) != NULL;
    fclose(f);
    return found;
}

static int module_mapped(void)
{
    return mapped("/scopemeter-https.so") || mapped("/scopemeter-https-sys.so");
}

int main(int argc, char **argv)
{
    char out[1024];
    const char *dir = argc > 1 ? argv[1] : "";
    int sys = argc > 2 && strcmp(argv[2], "system") == 0;

    CHECK_EQ_INT(module_mapped(), 0); /* linking the library maps no OpenSSL */
    if (sys && !dlopen("libssl.so.3", RTLD_NOW | RTLD_LOCAL)) {
        printf("no libssl.so.3 here: %s\n", dlerror());
        return 77;
    }
    CHECK_EQ_INT(sm_mlflow_tls(out, sizeof out), 0);
    printf("tls: %s\n", out);
    CHECK(strstr(out, "OpenSSL") != NULL);
    /* the module beside the library (meson's build tree: src/mlflow/) */
    CHECK(strstr(out, dir) != NULL &&
          strstr(out, sys ? "/scopemeter-https-sys.so)" : "/scopemeter-https.so)") != NULL);
    CHECK_EQ_INT(mapped(sys ? "/scopemeter-https-sys.so" : "/scopemeter-https.so"), 1);
    CHECK_EQ_INT(mapped(sys ? "/scopemeter-https.so" : "/scopemeter-https-sys.so"), 0);
    /* with the system's: its libssl is the only one (the static module
     * would not map a libssl file); without: none mapped */
    CHECK_EQ_INT(mapped("/libssl.so.3"), sys);
    /* loaded once: the same answer */
    {
        char again[1024];
        CHECK_EQ_INT(sm_mlflow_tls(again, sizeof again), 0);
        CHECK_EQ_STR(again, out);
    }
    return CHECK_DONE();
}
