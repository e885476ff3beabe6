/*
 * rest_private.h — what the pieces of the REST client share among
 * themselves and with nobody else.
 *
 * The client behind mlflow_rest.h is one file per job, the rest_*.c files
 * (each one's job: the source map, docs/design.md §0, and docs/rest.md).
 * Every caller outside them includes mlflow_rest.h only; this header must
 * never be included by a file outside them (nothing here is an API).
 */
#ifndef SM_REST_PRIVATE_H
#define SM_REST_PRIVATE_H

#include <stddef.h>
#include <stdlib.h>

#include "curl_api.h"
#include "mlflow_rest.h"

/* An environment variable, NULL when unset or empty (MLflow treats an empty
 * one as unset).  Here, not in a file: rest_http.c, rest_auth.c and
 * rest_tls.c all read the environment, and a definition in one of them
 * would make the others call back up into it. */
static inline const char *sm__rest_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}
/* rest_http.c: whether this thread's cancel hook (sm__rest_set_cancel) asks
 * to stop. */
SM_HIDDEN int sm__rest_cancel_asked(void);

/* rest_auth.c: the Authorization header line from the environment's
 * credentials into *out (NULL when there are none; the caller wipes it with
 * sm__rest_free_secret).  0 or -ENOMEM. */
SM_HIDDEN int sm__rest_auth_header(char **out);
/* rest_auth.c: frees a header list made by c, wiped first (it holds the
 * Authorization value). */
SM_HIDDEN void sm__rest_free_headers(const sm_curl_api *c, struct curl_slist *headers);

/* rest_tls.c: TLS and proxy settings from the environment into r
 * (insecure, ca_path, client_cert, proxy).  0; -EINVAL with a line in err
 * (a bad MLFLOW_TRACKING_INSECURE_TLS, or it together with a CA path);
 * -ENOMEM with r holding what was copied so far (sm__rest_free frees it). */
SM_HIDDEN int sm__rest_tls_env(sm_rest *r, char *err, size_t errlen);
/* rest_tls.c: the libcurl r's first request needs: the TLS one for an https
 * URI or proxy (the module, loaded here if need be), else the built-in one.
 * NULL with a line in err when TLS is needed and cannot be had. */
SM_HIDDEN const sm_curl_api *sm__rest_tls_pick(const sm_rest *r, char *err, size_t errlen);
/* rest_tls.c: moves r to a libcurl with TLS (an http server redirected to
 * https).  0 when done; < 0 when TLS was there already or cannot be had
 * (r->errbuf says why). */
SM_HIDDEN int sm__rest_use_tls(sm_rest *r);
/* rest_tls.c: the TLS and proxy options of one request on r->h (after the
 * reset in rest_http.c's set_options). */
SM_HIDDEN void sm__rest_tls_setopt(sm_rest *r);

/* rest_uri.c: is the string an https:// URI (case-insensitive)? */
SM_HIDDEN int sm__rest_is_https(const char *url);
/* rest_uri.c: checks an http(s) tracking URI and sets r->base (without a
 * trailing '/') and r->shown (redacted).  0, or -EINVAL / -ENAMETOOLONG
 * with a line in err naming what is wrong. */
SM_HIDDEN int sm__rest_uri_check(sm_rest *r, const char *uri, char *err, size_t errlen);

#endif
