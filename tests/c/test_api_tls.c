/*
 * test_api_tls.c — a native program linked with libscopemeter.so (the C
 * API's shared library, as `meson install` ships it): the library's libcurl
 * has no TLS, and https comes from scopemeter-https.so beside it, loaded at
 * the first https need and not before (src/rest/curl_api.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "scopemeter.h"
#include "scopemeter_mlflow.h"

static int module_mapped(void)
{
    char line[4096];
    int found = 0;
    FILE *f = fopen("/proc/self/maps", "re");

    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        found |= strstr(line, "/scopemeter-https.so") != NULL;
    fclose(f);
    return found;
}

int main(int argc, char **argv)
{
    char out[1024];
    const char *dir = argc > 1 ? argv[1] : "";

    CHECK_EQ_INT(module_mapped(), 0); /* linking the library maps no OpenSSL */
    CHECK_EQ_INT(sm_mlflow_tls(out, sizeof out), 0);
    printf("tls: %s\n", out);
    CHECK(strstr(out, "OpenSSL") != NULL);
    /* the module beside the library (meson's build tree: src/rest/) */
    CHECK(strstr(out, dir) != NULL && strstr(out, "/scopemeter-https.so)") != NULL);
    CHECK_EQ_INT(module_mapped(), 1);
    /* loaded once: the same answer */
    {
        char again[1024];
        CHECK_EQ_INT(sm_mlflow_tls(again, sizeof again), 0);
        CHECK_EQ_STR(again, out);
    }
    return CHECK_DONE();
}
