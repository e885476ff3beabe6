/*
 * https_module.c — scopemeter-https.so: a libcurl with TLS (OpenSSL) for the
 * binaries that link a libcurl without it: the Python extension,
 * libscopemeter.so and the CLI (curl_api.c says why).
 *
 * Everything in it is hidden (-fvisibility=hidden, and src/link/https.map
 * for the static libcurl and OpenSSL) except the one entry point, so its
 * OpenSSL never meets the one Python's ssl module loaded.
 */
#include "curl_api.h"

__attribute__((visibility("default"))) const sm_curl_api *sm_https_curl_api(void);

const sm_curl_api *sm_https_curl_api(void)
{
    static const sm_curl_api api = SM_CURL_API_TABLE;
    return &api;
}
