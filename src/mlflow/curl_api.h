/*
 * curl_api.h — the libcurl entry points the REST client uses, as a table.
 *
 * Why a table: what ships (the Python extension, libscopemeter.so, the
 * CLI) links a libcurl without TLS, and reaches a libcurl with TLS through
 * the module scopemeter-https.so, loaded at the first https use (curl_api.c
 * says why).  The test programs link a libcurl with TLS and use it
 * directly.  The REST client (rest_*.c) calls libcurl only through
 * the table of its handle, so an easy handle and its header list are always
 * made and freed by the same libcurl.
 */
#ifndef SM_CURL_API_H
#define SM_CURL_API_H

#include <stddef.h>
#include <time.h>

#include <curl/curl.h>

#include "internal.h"

/* Bumped when the table changes: a module from another build is refused. */
#define SM_CURL_API_ABI 1

typedef struct sm_curl_api {
    unsigned abi; /* SM_CURL_API_ABI */
    CURLcode (*global_init)(long flags);
    curl_version_info_data *(*version_info)(CURLversion);
    char *(*version)(void);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *h, CURLoption opt, ...);
    CURLcode (*easy_perform)(CURL *h);
    CURLcode (*easy_getinfo)(CURL *h, CURLINFO info, ...);
    void (*easy_reset)(CURL *h);
    void (*easy_cleanup)(CURL *h);
    const char *(*easy_strerror)(CURLcode);
    char *(*easy_escape)(CURL *h, const char *s, int len);
    void (*free)(void *p);
    struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
    void (*slist_free_all)(struct curl_slist *l);
    time_t (*getdate)(const char *s, const time_t *unused);
} sm_curl_api;

/* The table of the libcurl this object is linked with, written once where
 * it is needed: curl_api.c (built in) and https_module.c (the module).
 * Function names in parentheses: curl.h may define some as macros. */
#define SM_CURL_API_TABLE                                                        \
    {                                                                            \
        SM_CURL_API_ABI, (curl_global_init), (curl_version_info), (curl_version),\
            (curl_easy_init), (curl_easy_setopt), (curl_easy_perform),           \
            (curl_easy_getinfo), (curl_easy_reset), (curl_easy_cleanup),         \
            (curl_easy_strerror), (curl_easy_escape), (curl_free),               \
            (curl_slist_append), (curl_slist_free_all), (curl_getdate)           \
    }

/* The name of the module's one exported function, which returns its table. */
#define SM_HTTPS_MODULE_FILE "scopemeter-https.so"
/* The same libcurl against the system's libssl.so.3, loaded where the process
 * holds it already (curl_api.c). */
#define SM_HTTPS_SYS_MODULE_FILE "scopemeter-https-sys.so"
#define SM_HTTPS_MODULE_ENTRY "sm_https_curl_api"

/* The libcurl linked into this object (TLS or not). */
SM_HIDDEN const sm_curl_api *sm__curl_builtin(void);
/* 1 when the libcurl of c has TLS. */
SM_HIDDEN int sm__curl_has_tls(const sm_curl_api *c);
/* A libcurl with TLS: the built-in one when it has TLS, else the module's,
 * loaded (and curl_global_init'ed) once per process; on failure NULL and one
 * sentence in err naming where it looked. */
SM_HIDDEN const sm_curl_api *sm__curl_tls(char *err, size_t errlen);
#endif
