/*
 * rest_tls.c — how a REST handle (mlflow_rest.h) reaches the server: which
 * libcurl it uses, the TLS options and the proxy, read the way MLflow's
 * Python client reads them (mlflow/utils/rest_utils.py,
 * mlflow/utils/request_utils.py):
 *   - verify = not MLFLOW_TRACKING_INSECURE_TLS, or the CA bundle in
 *     MLFLOW_TRACKING_SERVER_CERT_PATH (both set is an error, as in MLflow);
 *     cert = MLFLOW_TRACKING_CLIENT_CERT_PATH (one PEM: libcurl's OpenSSL
 *     backend reads the key from the certificate file when no key file is
 *     set, which is what requests does with a single cert= path).
 *   - Proxies: libcurl reads http_proxy, https_proxy/HTTPS_PROXY,
 *     all_proxy/ALL_PROXY and no_proxy/NO_PROXY itself.  It ignores
 *     upper-case HTTP_PROXY (a CGI safety rule) while Python's requests
 *     honours it, so for an http:// URI with only HTTP_PROXY set that value
 *     is passed as CURLOPT_PROXY; no_proxy still applies to it.
 *
 * Why apart: a handle starts on the libcurl linked in (no TLS) and moves to
 * the TLS module's (curl_api.c loads it, once per process) only when https
 * is needed: an https URI or proxy, or an http server's redirect to https.
 * That choice, and every option that only matters with TLS, live here.
 * This file must never turn verification off by itself (only
 * MLFLOW_TRACKING_INSECURE_TLS does), never load the module for a plain
 * http server without an https proxy, and never let an easy handle and
 * its header list come from two different libcurls.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rest_private.h"

/* MLflow's boolean environment variables: true/false/1/0, any case. */
static int env_bool(const char *name, int *out, char *err, size_t errlen)
{
    const char *v = getenv(name);

    *out = 0;
    if (!v)
        return 0;
    if (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0) {
        *out = 1;
        return 0;
    }
    if (strcasecmp(v, "false") == 0 || strcmp(v, "0") == 0)
        return 0;
    snprintf(err, errlen, "%s must be true, false, 1 or 0", name);
    return -EINVAL;
}

/* Whether reaching the server needs TLS: an https URI, or an https proxy
 * for an http one.  libcurl picks the proxy of an http URL from http_proxy
 * (never HTTP_PROXY: r->proxy carries that), then all_proxy / ALL_PROXY
 * (curl's lib/url.c, detect_proxy); no_proxy is not weighed, so this may
 * load TLS that is not used, never the reverse. */
static int needs_tls(const sm_rest *r)
{
    const char *p = sm__rest_env("http_proxy");

    if (sm__rest_is_https(r->base))
        return 1;
    if (r->proxy)
        p = r->proxy;
    if (!p)
        p = sm__rest_env("all_proxy");
    if (!p)
        p = sm__rest_env("ALL_PROXY");
    return sm__rest_is_https(p);
}

const sm_curl_api *sm__rest_tls_pick(const sm_rest *r, char *err, size_t errlen)
{
    return needs_tls(r) ? sm__curl_tls(err, errlen) : sm__curl_builtin();
}

/* Moves the handle to a libcurl with TLS (a redirect from http to https):
 * a new easy handle, and the header list copied into it.  0 when done;
 * < 0 when TLS was there already or cannot be had (errbuf says why). */
int sm__rest_use_tls(sm_rest *r)
{
    char err[sizeof r->errbuf];
    const sm_curl_api *c;
    struct curl_slist *copy = NULL;
    CURL *h;

    if (sm__curl_has_tls(r->c))
        return -EALREADY;
    c = sm__curl_tls(err, sizeof err);
    if (!c) {
        snprintf(r->errbuf, sizeof r->errbuf, "redirected to https: %.200s", err);
        return -ENOENT;
    }
    h = c->easy_init();
    for (struct curl_slist *l = r->headers; h && l; l = l->next) {
        struct curl_slist *n = c->slist_append(copy, l->data);
        if (!n)
            goto nomem;
        copy = n;
    }
    if (!h)
        goto nomem;
    r->c->easy_cleanup(r->h);
    sm__rest_free_headers(r->c, r->headers);
    r->c = c;
    r->h = h;
    r->headers = copy;
    r->errbuf[0] = '\0';
    return 0;
nomem:
    sm__rest_free_headers(c, copy);
    if (h)
        c->easy_cleanup(h);
    snprintf(r->errbuf, sizeof r->errbuf, "redirected to https: out of memory");
    return -ENOMEM;
}

int sm__rest_tls_env(sm_rest *r, char *err, size_t errlen)
{
    const char *v;
    int insecure = 0, rc;

    rc = env_bool("MLFLOW_TRACKING_INSECURE_TLS", &insecure, err, errlen);
    if (rc < 0)
        return rc;
    r->insecure = insecure;
    if ((v = sm__rest_env("MLFLOW_TRACKING_SERVER_CERT_PATH"))) {
        if (insecure) {
            /* MlflowHostCreds refuses the same combination */
            snprintf(err, errlen, "MLFLOW_TRACKING_INSECURE_TLS and "
                     "MLFLOW_TRACKING_SERVER_CERT_PATH are both set; only one of them may be");
            return -EINVAL;
        }
        r->ca_path = strdup(v);
        if (!r->ca_path)
            return -ENOMEM;
    }
    if ((v = sm__rest_env("MLFLOW_TRACKING_CLIENT_CERT_PATH")) && !(r->client_cert = strdup(v)))
        return -ENOMEM;
    if (strncasecmp(r->base, "http://", 7) == 0 && !getenv("http_proxy") &&
        (v = sm__rest_env("HTTP_PROXY")) && !(r->proxy = strdup(v)))
        return -ENOMEM;
    return 0;
}

void sm__rest_tls_setopt(sm_rest *r)
{
    const sm_curl_api *c = r->c;
    CURL *h = r->h;

    if (r->insecure) {
        c->easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        c->easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (r->ca_path)
        c->easy_setopt(h, CURLOPT_CAINFO, r->ca_path);
    if (r->client_cert) {
        c->easy_setopt(h, CURLOPT_SSLCERT, r->client_cert);
        c->easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
    }
    if (r->proxy)
        c->easy_setopt(h, CURLOPT_PROXY, r->proxy);
}
