/*
 * rest_uri.c — the tracking URI of the REST client (mlflow_rest.h): whether
 * a string is one, whether it names a host and a port libcurl can use, and
 * its redacted form, the only form any message may show.
 *
 * Why apart: every line that names the server goes through sm__rest_redact
 * (userinfo and the query hold secrets), and the checks say what is wrong
 * with a URI before libcurl would say something vaguer.  Pure string work:
 * it must never do I/O, read the environment, or put an unredacted URI
 * into err.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "rest_private.h"

int sm__rest_is_http(const char *uri)
{
    return uri && (strncasecmp(uri, "http://", 7) == 0 || strncasecmp(uri, "https://", 8) == 0);
}

void sm__rest_redact(const char *uri, char *out, size_t outlen)
{
    const char *p, *auth_end, *at, *q;
    size_t n;

    if (!outlen)
        return;
    out[0] = '\0';
    if (!uri)
        return;
    p = strstr(uri, "://");
    p = p ? p + 3 : uri;
    auth_end = p + strcspn(p, "/?#");
    at = NULL;
    for (q = p; q < auth_end; q++)
        if (*q == '@')
            at = q; /* the last '@' of the authority ends the userinfo */
    n = (size_t)(p - uri);
    if (at) {
        snprintf(out, outlen, "%.*s***%s", (int)n, uri, "");
        n = strlen(out);
        if (n < outlen)
            snprintf(out + n, outlen - n, "%.*s", (int)(auth_end - at), at);
    } else {
        snprintf(out, outlen, "%.*s", (int)(auth_end - uri), uri);
    }
    /* the path, without query or fragment (tokens travel there too) */
    q = auth_end + strcspn(auth_end, "?#");
    n = strlen(out);
    if (n < outlen)
        snprintf(out + n, outlen - n, "%.*s", (int)(q - auth_end), auth_end);
    if (*q) {
        n = strlen(out);
        if (n < outlen)
            snprintf(out + n, outlen - n, "%s", "?***");
    }
}

int sm__rest_is_https(const char *url)
{
    return url && strncasecmp(url, "https://", 8) == 0;
}

/* The authority of an http(s) URI: a host, and a port libcurl can use. */
static int check_authority(sm_rest *r, const char *uri, char *err, size_t errlen)
{
    /* "http://" or "http:///x": curl would go looking for a host named
     * by the path ("Could not resolve host: api"); say what is wrong */
    const char *auth = uri + (uri[4] == ':' ? 7 : 8);
    size_t alen = strcspn(auth, "/?#");
    const char *at = memchr(auth, '@', alen);
    if ((at ? (size_t)(auth + alen - at - 1) : alen) == 0 ||
        (at ? at[1] : auth[0]) == ':') {
        sm__rest_redact(uri, r->shown, sizeof r->shown);
        snprintf(err, errlen, "tracking URI '%s' has no host (expected "
                 "http(s)://HOST[:PORT][/PREFIX])", r->shown);
        return -EINVAL;
    }
    /* the port, after the host ("[v6]:port" too): libcurl would say only
     * "URL using bad/illegal format" of 99999 or -1 */
    {
        const char *host = at ? at + 1 : auth, *end = auth + alen;
        const char *br = host[0] == '[' ? memchr(host, ']', (size_t)(end - host)) : NULL;
        if (host[0] == '[' && !br) { /* "http://[::1": the fault is the bracket */
            sm__rest_redact(uri, r->shown, sizeof r->shown);
            snprintf(err, errlen, "tracking URI '%s': the IPv6 address after '[' has no "
                     "closing ']' (expected http(s)://[ADDRESS]:PORT)", r->shown);
            return -EINVAL;
        }
        const char *colon = memchr(br ? br : host, ':', (size_t)(end - (br ? br : host)));
        if (colon && colon + 1 < end) {
            size_t plen = (size_t)(end - colon - 1);
            long port = 0;
            int ok = plen <= 5;
            for (size_t i = 0; ok && i < plen; i++) {
                ok = colon[1 + i] >= '0' && colon[1 + i] <= '9';
                port = port * 10 + (colon[1 + i] - '0');
            }
            if (!ok || port < 1 || port > 65535) {
                sm__rest_redact(uri, r->shown, sizeof r->shown);
                snprintf(err, errlen, "tracking URI '%s': port %.*s is not a TCP port "
                         "(1-65535)", r->shown, (int)(plen > 20 ? 20 : plen),
                         colon + 1);
                return -EINVAL;
            }
        }
    }
    return 0;
}

/* sm__rest_init's first step: the URI, before anything is allocated. */
int sm__rest_uri_check(sm_rest *r, const char *uri, char *err, size_t errlen)
{
    size_t n;

    if (!sm__rest_is_http(uri)) {
        snprintf(err, errlen, "tracking URI must be http:// or https:// for the REST sink");
        return -EINVAL;
    }
    n = strlen(uri);
    while (n > 0 && uri[n - 1] == '/')
        n--;
    if (n >= sizeof r->base) {
        snprintf(err, errlen, "tracking URI too long");
        return -ENAMETOOLONG;
    }
    memcpy(r->base, uri, n);
    r->base[n] = '\0';
    if (check_authority(r, uri, err, errlen) < 0)
        return -EINVAL;
    if (strpbrk(r->base, "?#")) {
        sm__rest_redact(r->base, r->shown, sizeof r->shown);
        snprintf(err, errlen, "tracking URI %s has a query or fragment; MLflow appends "
                 "/api/2.0/mlflow/... to the URI, so it cannot have one", r->shown);
        return -EINVAL;
    }
    sm__rest_redact(r->base, r->shown, sizeof r->shown);
    return 0;
}
