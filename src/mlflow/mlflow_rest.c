/*
 * mlflow_rest.c — one HTTP request to an MLflow tracking server, the way
 * MLflow's Python client makes it, plus the retry policy.
 *
 * Why libcurl directly: the sink must ship from a thread of a training
 * process without signals (CURLOPT_NOSIGNAL), with connect/total timeouts
 * and a low-speed limit (a server that accepts and never answers must not
 * hold the shipping thread forever), and it must be abortable at stop
 * (CURLOPT_XFERINFOFUNCTION checks a flag and a deadline).
 *
 * Semantics copied from MLflow (mlflow/utils/rest_utils.py,
 * mlflow/utils/credentials.py, mlflow/utils/request_utils.py):
 *   - endpoints are <tracking uri>/api/2.0/mlflow/<name>, so a URI with a path
 *     prefix (http://host/mlflow) works;
 *   - Basic auth when both username and password are known (env, else
 *     ~/.mlflow/credentials), else Bearer MLFLOW_TRACKING_TOKEN;
 *   - verify = not MLFLOW_TRACKING_INSECURE_TLS, or the CA bundle in
 *     MLFLOW_TRACKING_SERVER_CERT_PATH (both set is an error, as in MLflow);
 *     cert = MLFLOW_TRACKING_CLIENT_CERT_PATH (one PEM: libcurl's OpenSSL
 *     backend reads the key from the certificate file when no key file is
 *     set, which is what requests does with a single cert= path);
 *   - transient statuses 408, 429, 500, 502, 503, 504 are retried, and so
 *     are the other 5xx and connection errors; Retry-After is honoured.
 *
 * Proxies: libcurl reads http_proxy, https_proxy/HTTPS_PROXY, all_proxy/
 * ALL_PROXY and no_proxy/NO_PROXY itself.  It ignores upper-case HTTP_PROXY
 * (a CGI safety rule) while Python's requests honours it, so for an http://
 * URI with only HTTP_PROXY set that value is passed as CURLOPT_PROXY;
 * no_proxy still applies to it.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "curl_api.h"
#include "mlflow_rest.h"
#include "sink.h"

#define API_PREFIX "/api/2.0/mlflow/"
#define RESP_MAX (4u << 20) /* responses we read; MLflow's are small */

/* ---- process-wide init ---------------------------------------------------- */
static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

static void global_init(void)
{
    /* never cleaned up: the sink may be in use until process exit; the TLS
     * module's libcurl is initialised when it loads (curl_api.c) */
    global_rc = sm_curl_builtin()->global_init(CURL_GLOBAL_DEFAULT);
}

int sm_rest_global_init(void)
{
    pthread_once(&global_once, global_init);
    return global_rc == CURLE_OK ? 0 : -EIO;
}

/* ---- small helpers ------------------------------------------------------- */
int sm_rest_is_http(const char *uri)
{
    return uri && (strncasecmp(uri, "http://", 7) == 0 || strncasecmp(uri, "https://", 8) == 0);
}

void sm_rest_redact(const char *uri, char *out, size_t outlen)
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

static const char *env_nonempty(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* ~/.mlflow/credentials: an INI file whose [mlflow] section may hold
 * mlflow_tracking_username and mlflow_tracking_password (MLflow reads it
 * with configparser; keys are case-insensitive there). */
static void read_credentials_file(char **user, char **pass)
{
    const char *home = getenv("HOME");
    char path[SM_PATH_MAX], line[1024];
    FILE *f;
    int in_section = 0;

    if (!home || !*home)
        return;
    snprintf(path, sizeof path, "%s/.mlflow/credentials", home);
    f = fopen(path, "re");
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        char *s = line, *e, *eq, *k, *v;

        while (isspace((unsigned char)*s))
            s++;
        e = s + strlen(s);
        while (e > s && isspace((unsigned char)e[-1]))
            *--e = '\0';
        if (*s == '#' || *s == ';' || !*s)
            continue;
        if (*s == '[') {
            in_section = strcmp(s, "[mlflow]") == 0;
            continue;
        }
        if (!in_section)
            continue;
        eq = strpbrk(s, "=:");
        if (!eq)
            continue;
        *eq = '\0';
        k = s;
        v = eq + 1;
        for (e = eq; e > k && isspace((unsigned char)e[-1]);)
            *--e = '\0';
        while (isspace((unsigned char)*v))
            v++;
        if (strcasecmp(k, "mlflow_tracking_username") == 0 && !*user)
            *user = strdup(v);
        else if (strcasecmp(k, "mlflow_tracking_password") == 0 && !*pass)
            *pass = strdup(v);
    }
    explicit_bzero(line, sizeof line);
    fclose(f);
}

static void free_secret(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

static int b64(const unsigned char *in, size_t n, char *out, size_t outlen)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;

    if (outlen < 4 * ((n + 2) / 3) + 1)
        return -ENOSPC;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[o++] = t[(v >> 18) & 63];
        out[o++] = t[(v >> 12) & 63];
        out[o++] = i + 1 < n ? t[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? t[v & 63] : '=';
    }
    out[o] = '\0';
    return 0;
}

/* The Authorization header line, or NULL when no credentials are set.
 * Returns -ENOMEM on allocation failure. */
static int auth_header(char **out)
{
    char *user = NULL, *pass = NULL, *plain = NULL, *hdr = NULL, *enc = NULL;
    const char *token = env_nonempty("MLFLOW_TRACKING_TOKEN");
    int rc = 0;

    *out = NULL;
    if (env_nonempty("MLFLOW_TRACKING_USERNAME"))
        user = strdup(getenv("MLFLOW_TRACKING_USERNAME"));
    if (env_nonempty("MLFLOW_TRACKING_PASSWORD"))
        pass = strdup(getenv("MLFLOW_TRACKING_PASSWORD"));
    if (!user || !pass)
        read_credentials_file(&user, &pass);
    if (user && *user && pass && *pass) {
        size_t n = strlen(user) + 1 + strlen(pass);
        size_t elen = 4 * ((n + 2) / 3) + 1;
        plain = malloc(n + 1);
        enc = malloc(elen);
        hdr = malloc(elen + 32);
        if (!plain || !enc || !hdr) {
            rc = -ENOMEM;
            goto out;
        }
        snprintf(plain, n + 1, "%s:%s", user, pass);
        b64((const unsigned char *)plain, n, enc, elen);
        snprintf(hdr, elen + 32, "Authorization: Basic %s", enc);
    } else if (token) {
        size_t n = strlen(token) + 32;
        hdr = malloc(n);
        if (!hdr) {
            rc = -ENOMEM;
            goto out;
        }
        snprintf(hdr, n, "Authorization: Bearer %s", token);
    }
    *out = hdr;
    hdr = NULL;
out:
    free_secret(user);
    free_secret(pass);
    free_secret(plain);
    free_secret(enc);
    free_secret(hdr);
    return rc;
}

/* ---- curl callbacks --------------------------------------------------------- */
static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    sm_rest *r = ud;
    size_t n = size * nmemb;

    if (r->resp_len + n + 1 > r->resp_cap) {
        size_t cap = r->resp_cap ? r->resp_cap : 4096;
        char *p;
        while (cap < r->resp_len + n + 1)
            cap *= 2;
        if (cap > RESP_MAX)
            return 0; /* aborts the transfer (CURLE_WRITE_ERROR) */
        p = realloc(r->resp, cap);
        if (!p)
            return 0;
        r->resp = p;
        r->resp_cap = cap;
    }
    memcpy(r->resp + r->resp_len, data, n);
    r->resp_len += n;
    r->resp[r->resp_len] = '\0';
    return n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *ud)
{
    sm_rest *r = ud;
    size_t n = size * nmemb;
    static const char name[] = "retry-after:";

    if (n > sizeof name - 1 && n < 256 && strncasecmp(data, name, sizeof name - 1) == 0) {
        char v[256];
        size_t vl = n - (sizeof name - 1);
        memcpy(v, data + sizeof name - 1, vl);
        v[vl] = '\0';
        r->retry_after = sm_rest_parse_retry_after(v, (long)time(NULL));
    } else if (n >= 5 && strncmp(data, "HTTP/", 5) == 0) {
        r->retry_after = -1; /* a new response (after a 1xx or a proxy's 200) */
    }
    return n;
}

/* sm_rest_set_cancel: this thread's hook (mlflow_rest.h) */
static _Thread_local int (*cancel_fn)(void *);
static _Thread_local void *cancel_arg;

void sm_rest_set_cancel(int (*fn)(void *arg), void *arg)
{
    cancel_fn = fn;
    cancel_arg = arg;
}

static int cancel_asked(void)
{
    return cancel_fn && cancel_fn(cancel_arg);
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    sm_rest *r = ud;

    (void)dt;
    (void)dn;
    (void)ut;
    (void)un;
    if (r->abort_flag && atomic_load(r->abort_flag))
        return 1;
    if (cancel_asked())
        return 1;
    if (r->abort_deadline_ms) {
        long long d = atomic_load(r->abort_deadline_ms);
        if (d > 0 && sm_now_mono() * 1000.0 >= (double)d)
            return 1;
    }
    return 0;
}

/* ---- which libcurl -------------------------------------------------------------- */
/* Frees a header list made by c; it holds the Authorization value, so it
 * is wiped first. */
static void free_headers(const sm_curl_api *c, struct curl_slist *headers)
{
    for (struct curl_slist *l = headers; l; l = l->next)
        if (l->data)
            explicit_bzero(l->data, strlen(l->data));
    if (headers)
        c->slist_free_all(headers);
}

static int is_https(const char *url)
{
    return url && strncasecmp(url, "https://", 8) == 0;
}

/* Whether reaching the server needs TLS: an https URI, or an https proxy
 * for an http one.  libcurl picks the proxy of an http URL from http_proxy
 * (never HTTP_PROXY: r->proxy carries that), then all_proxy / ALL_PROXY
 * (curl's lib/url.c, detect_proxy); no_proxy is not weighed, so this may
 * load TLS that is not used, never the reverse. */
static int needs_tls(const sm_rest *r)
{
    const char *p = env_nonempty("http_proxy");

    if (is_https(r->base))
        return 1;
    if (r->proxy)
        p = r->proxy;
    if (!p)
        p = env_nonempty("all_proxy");
    if (!p)
        p = env_nonempty("ALL_PROXY");
    return is_https(p);
}

/* Moves the handle to a libcurl with TLS (a redirect from http to https):
 * a new easy handle, and the header list copied into it.  0 when done;
 * < 0 when TLS was there already or cannot be had (errbuf says why). */
static int use_tls(sm_rest *r)
{
    char err[sizeof r->errbuf];
    const sm_curl_api *c;
    struct curl_slist *copy = NULL;
    CURL *h;

    if (sm_curl_has_tls(r->c))
        return -EALREADY;
    c = sm_curl_tls(err, sizeof err);
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
    free_headers(r->c, r->headers);
    r->c = c;
    r->h = h;
    r->headers = copy;
    r->errbuf[0] = '\0';
    return 0;
nomem:
    free_headers(c, copy);
    if (h)
        c->easy_cleanup(h);
    snprintf(r->errbuf, sizeof r->errbuf, "redirected to https: out of memory");
    return -ENOMEM;
}

/* ---- init / free ------------------------------------------------------------- */
int sm_rest_init(sm_rest *r, const char *uri, char *err, size_t errlen)
{
    char *auth = NULL;
    const char *v;
    int insecure = 0, rc;
    size_t n;
    long t;

    memset(r, 0, sizeof *r);
    r->retry_after = -1;
    if (!sm_rest_is_http(uri)) {
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
    {
        /* "http://" or "http:///x": curl would go looking for a host named
         * by the path ("Could not resolve host: api"); say what is wrong */
        const char *auth = uri + (uri[4] == ':' ? 7 : 8);
        size_t alen = strcspn(auth, "/?#");
        const char *at = memchr(auth, '@', alen);
        if ((at ? (size_t)(auth + alen - at - 1) : alen) == 0 ||
            (at ? at[1] : auth[0]) == ':') {
            sm_rest_redact(uri, r->shown, sizeof r->shown);
            snprintf(err, errlen, "tracking URI '%s' has no host (expected "
                     "http(s)://HOST[:PORT][/PREFIX])", r->shown);
            return -EINVAL;
        }
        /* the port, after the host ("[v6]:port" too): libcurl would say only
         * "URL using bad/illegal format" of 99999 or -1 */
        {
            const char *host = at ? at + 1 : auth, *end = auth + alen;
            const char *br = host[0] == '[' ? memchr(host, ']', (size_t)(end - host)) : NULL;
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
                    sm_rest_redact(uri, r->shown, sizeof r->shown);
                    snprintf(err, errlen, "tracking URI '%s': port %.*s is not a TCP port "
                             "(1-65535)", r->shown, (int)(plen > 20 ? 20 : plen),
                             colon + 1);
                    return -EINVAL;
                }
            }
        }
    }
    if (strpbrk(r->base, "?#")) {
        sm_rest_redact(r->base, r->shown, sizeof r->shown);
        snprintf(err, errlen, "tracking URI %s has a query or fragment; MLflow appends "
                 "/api/2.0/mlflow/... to the URI, so it cannot have one", r->shown);
        return -EINVAL;
    }
    sm_rest_redact(r->base, r->shown, sizeof r->shown);

    rc = env_bool("MLFLOW_TRACKING_INSECURE_TLS", &insecure, err, errlen);
    if (rc < 0)
        return rc;
    r->insecure = insecure;
    if ((v = env_nonempty("MLFLOW_TRACKING_SERVER_CERT_PATH"))) {
        if (insecure) {
            /* MlflowHostCreds refuses the same combination */
            snprintf(err, errlen, "MLFLOW_TRACKING_INSECURE_TLS and "
                     "MLFLOW_TRACKING_SERVER_CERT_PATH are both set; only one of them may be");
            return -EINVAL;
        }
        r->ca_path = strdup(v);
        if (!r->ca_path)
            goto nomem;
    }
    if ((v = env_nonempty("MLFLOW_TRACKING_CLIENT_CERT_PATH")) && !(r->client_cert = strdup(v)))
        goto nomem;
    if (strncasecmp(r->base, "http://", 7) == 0 && !getenv("http_proxy") &&
        (v = env_nonempty("HTTP_PROXY")) && !(r->proxy = strdup(v)))
        goto nomem;

    r->connect_timeout_s = 10;
    r->total_timeout_s = 120; /* MLflow's MLFLOW_HTTP_REQUEST_TIMEOUT default */
    if ((v = env_nonempty("MLFLOW_HTTP_REQUEST_TIMEOUT"))) {
        char *end;
        t = strtol(v, &end, 10);
        if (*end == '\0' && t > 0)
            r->total_timeout_s = t;
    }

    rc = sm_rest_global_init();
    if (rc < 0) {
        snprintf(err, errlen, "libcurl initialisation failed");
        goto fail;
    }
    {
        const sm_curl_api *c = needs_tls(r) ? sm_curl_tls(err, errlen) : sm_curl_builtin();
        if (!c) {
            rc = -ENOENT;
            goto fail;
        }
        r->c = c;
    }
    rc = auth_header(&auth);
    if (rc < 0)
        goto nomem;
    r->h = r->c->easy_init();
    if (!r->h)
        goto nomem;
    {
        const sm_curl_api *c = r->c;
        struct curl_slist *l = c->slist_append(NULL, "Content-Type: application/json");
        struct curl_slist *l2 = l ? c->slist_append(l, "Expect:") : NULL; /* no 100-continue */
        struct curl_slist *l3 = l2 && auth ? c->slist_append(l2, auth) : l2;
        if (!l || !l2 || !l3) {
            c->slist_free_all(l2 ? l2 : l);
            goto nomem;
        }
        r->headers = l3;
        r->has_auth = auth != NULL;
    }
    free_secret(auth);
    auth = NULL;
    return 0;
nomem:
    snprintf(err, errlen, "out of memory");
    rc = -ENOMEM;
fail:
    free_secret(auth);
    sm_rest_free(r);
    return rc;
}

static int header_text_ok(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 && *s != '\t')
            return 0;
    return 1;
}

int sm_rest_add_headers(sm_rest *r, const char *const *pairs, char *err, size_t errlen)
{
    for (size_t i = 0; pairs && pairs[i] && pairs[i + 1]; i += 2) {
        const char *name = pairs[i], *value = pairs[i + 1];
        struct curl_slist *l;
        char *line;
        size_t n;

        if (!*name || strpbrk(name, ": \t") || !header_text_ok(name) || !header_text_ok(value)) {
            /* the name is not a secret; the value may be */
            snprintf(err, errlen, "HTTP header %.80s: not a valid header name or value", name);
            return -EINVAL;
        }
        if (strcasecmp(name, "Authorization") == 0 && r->has_auth)
            continue; /* the environment's credentials win, as in MLflow */
        n = strlen(name) + strlen(value) + 3;
        line = malloc(n);
        if (!line) {
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
        /* "Name;" is how libcurl sends a header with an empty value */
        if (*value)
            snprintf(line, n, "%s: %s", name, value);
        else
            snprintf(line, n, "%s;", name);
        l = r->c->slist_append(r->headers, line);
        free_secret(line);
        if (!l) {
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
        r->headers = l;
    }
    return 0;
}

void sm_rest_free(sm_rest *r)
{
    if (r->h)
        r->c->easy_cleanup(r->h);
    r->h = NULL;
    free_headers(r->c, r->headers);
    r->headers = NULL;
    free(r->ca_path);
    free(r->client_cert);
    free(r->proxy);
    free(r->resp);
    r->ca_path = r->client_cert = r->proxy = r->resp = NULL;
    r->resp_len = r->resp_cap = 0;
}

int sm_rest_escape(sm_rest *r, const char *in, char *out, size_t outlen)
{
    char *e = r->c->easy_escape(r->h, in, 0);
    int rc = 0;

    if (!e)
        return -ENOMEM;
    if ((size_t)snprintf(out, outlen, "%s", e) >= outlen)
        rc = -ENOSPC;
    r->c->free(e);
    return rc;
}

/* ---- one request ------------------------------------------------------------ */
void sm_rest_result_clear(sm_rest_result *res)
{
    if (res->body)
        json_decref(res->body);
    memset(res, 0, sizeof *res);
    res->retry_after = -1;
}

static int retryable_status(long s)
{
    /* MLflow's _TRANSIENT_FAILURE_RESPONSE_CODES are 408, 429, 500, 502,
     * 503, 504; every 5xx is a server-side condition worth retrying here,
     * because the points wait in the ring anyway. */
    return s == 408 || s == 429 || (s >= 500 && s <= 599);
}

/* One line from MLflow's error body {"error_code": .., "message": ..}, or
 * the start of a non-JSON body. */
static void describe_error(const char *endpoint, const char *body, size_t len,
                           sm_rest_result *res)
{
    const char *code = NULL, *message = NULL;
    char ep[96], snippet[200];
    size_t i, o = 0;

    snprintf(ep, sizeof ep, "%.*s", (int)strcspn(endpoint, "?"), endpoint);
    if (res->body) {
        code = json_string_value(json_object_get(res->body, "error_code"));
        message = json_string_value(json_object_get(res->body, "message"));
    }
    /* MLflow's auth app and most proxies refuse with a text body: the code is
     * the one MLflow's own errors carry for that status (mlflow/exceptions.py),
     * so a refusal is named the same whoever sent it */
    if (!code && res->http == 401)
        code = "UNAUTHENTICATED";
    else if (!code && res->http == 403)
        code = "PERMISSION_DENIED";
    if (code)
        snprintf(res->error_code, sizeof res->error_code, "%s", code);
    if (!code && res->http == 404) {
        /* MLflow answers a missing run or experiment with its JSON error;
         * a bare 404 (an HTML page) means no MLflow API lives there */
        snprintf(res->msg, sizeof res->msg, "%s: HTTP 404 with no MLflow error: no MLflow "
                 "REST API at this tracking URI (a wrong path prefix? MLflow's API is the "
                 "tracking URI + /api/2.0/mlflow/)", ep);
        return;
    }
    if (!message && code && !res->body && body) {
        /* a text body (the auth app's "Permission denied"): its first printable bytes */
        for (i = 0; i < len && o < sizeof snippet - 1 && o < 120; i++) {
            unsigned char c = (unsigned char)body[i];
            snippet[o++] = (c >= 32 && c < 127) ? (char)c : ' ';
        }
        snippet[o] = '\0';
        message = snippet;
    }
    if (code || message) {
        snprintf(res->msg, sizeof res->msg, "%s: HTTP %ld %s: %.300s", ep, res->http,
                 code ? code : "", message ? message : "");
        /* the server's text goes into one log line (docs/design.md §6): MLflow's
         * messages can hold newlines (a database error with its SQL) */
        for (char *c = res->msg; *c; c++)
            if ((unsigned char)*c < 32 || *c == 127)
                *c = ' ';
        return;
    }
    /* not MLflow's JSON (a proxy's HTML page): the first printable bytes */
    for (i = 0; body && i < len && o < sizeof snippet - 1 && o < 120; i++) {
        unsigned char c = (unsigned char)body[i];
        snippet[o++] = (c >= 32 && c < 127) ? (char)c : ' ';
    }
    snippet[o] = '\0';
    snprintf(res->msg, sizeof res->msg, "%s: HTTP %ld%s%s", ep, res->http, o ? ": " : "",
             snippet);
}

/* What the server answered, without the transfer (the fuzz target calls it
 * on arbitrary bytes): http status and body in, outcome, parsed body and
 * error line out. */
void sm_rest_parse_reply(const char *endpoint, long http, const char *body, size_t len,
                         sm_rest_result *res)
{
    res->http = http;
    if (len) {
        json_error_t je;
        res->body = json_loadb(body, len, 0, &je);
    }
    if (http >= 200 && http < 300) {
        res->outcome = SM_REST_OK;
        return;
    }
    describe_error(endpoint, body, len, res);
    res->outcome = retryable_status(http) ? SM_REST_RETRY : SM_REST_REFUSED;
}

/* The options of one request: all set again after a reset, which keeps the
 * live connection and the TLS session cache. */
static void set_options(sm_rest *r, const char *url, int post, const char *body,
                        size_t body_len)
{
    const sm_curl_api *c = r->c;
    /* without TLS, a redirect to https fails as unsupported, and
     * sm_rest_once() goes on with the TLS module */
    const char *protocols = sm_curl_has_tls(c) ? "http,https" : "http";
    CURL *h = r->h;

    c->easy_reset(h);
    c->easy_setopt(h, CURLOPT_URL, url);
    c->easy_setopt(h, CURLOPT_PROTOCOLS_STR, protocols);
    c->easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, protocols);
    c->easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* a thread inside someone's process */
    c->easy_setopt(h, CURLOPT_HTTPHEADER, r->headers);
    c->easy_setopt(h, CURLOPT_USERAGENT, "scopemeter/" SM_VERSION);
    c->easy_setopt(h, CURLOPT_ERRORBUFFER, r->errbuf);
    c->easy_setopt(h, CURLOPT_CONNECTTIMEOUT, r->connect_timeout_s);
    c->easy_setopt(h, CURLOPT_TIMEOUT, r->total_timeout_s);
    if (r->abort_deadline_ms && atomic_load(r->abort_deadline_ms) > 0) {
        /* a deadline known now is libcurl's own timer (exact); one set while
         * the request is in flight is seen by on_progress (within ~1 s) */
        long long left = atomic_load(r->abort_deadline_ms) - (long long)(sm_now_mono() * 1000.0);
        if (left < r->total_timeout_s * 1000LL)
            c->easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(left > 1 ? left : 1));
    }
    /* a server that accepted and stalls: under 1 byte/s for 10 s is an outage
     * (said while the job runs); MLflow answers a log-batch in milliseconds */
    c->easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    c->easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 10L);
    c->easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    c->easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
    c->easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    c->easy_setopt(h, CURLOPT_WRITEDATA, r);
    c->easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    c->easy_setopt(h, CURLOPT_HEADERDATA, r);
    c->easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    c->easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    c->easy_setopt(h, CURLOPT_XFERINFODATA, r);
    /* requests follows redirects, keeping the method for 307/308 only;
     * libcurl's POSTREDIR default matches (301/302/303 become GET). */
    c->easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    c->easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
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
    if (post) {
        c->easy_setopt(h, CURLOPT_POST, 1L);
        c->easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
        c->easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? body_len : 0));
    } else {
        c->easy_setopt(h, CURLOPT_HTTPGET, 1L);
    }
}

int sm_rest_once(sm_rest *r, const char *method, const char *endpoint, const char *body,
                 size_t body_len, sm_rest_result *res)
{
    char url[sizeof r->base + 512], ep[96];
    CURLcode cc;
    long http = 0;
    int post = strcmp(method, "POST") == 0;

    memset(res, 0, sizeof *res);
    res->retry_after = -1;
    snprintf(ep, sizeof ep, "%.*s", (int)strcspn(endpoint, "?"), endpoint);
    if ((size_t)snprintf(url, sizeof url, "%s%s%s", r->base, API_PREFIX, endpoint) >=
        sizeof url) {
        res->outcome = SM_REST_FAILED;
        snprintf(res->msg, sizeof res->msg, "%s: request URL too long", ep);
        return res->outcome;
    }
    r->resp_len = 0;
    if (r->resp)
        r->resp[0] = '\0';
    r->retry_after = -1;
    r->errbuf[0] = '\0';

    set_options(r, url, post, body, body_len);
    cc = r->c->easy_perform(r->h);
    if (cc == CURLE_UNSUPPORTED_PROTOCOL && use_tls(r) == 0) {
        /* an http:// server that redirects to https: again with TLS */
        set_options(r, url, post, body, body_len);
        cc = r->c->easy_perform(r->h);
    }
    if (cc == CURLE_ABORTED_BY_CALLBACK) {
        res->outcome = SM_REST_ABORTED;
        snprintf(res->msg, sizeof res->msg, "%s: aborted at stop", ep);
        return res->outcome;
    }
    if (cc != CURLE_OK) {
        /* curl's messages name host and port, never the userinfo or headers */
        res->outcome = SM_REST_RETRY;
        switch (cc) {
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CIPHER:
        case CURLE_UNSUPPORTED_PROTOCOL:
        case CURLE_URL_MALFORMAT:
        case CURLE_OUT_OF_MEMORY:
        case CURLE_TOO_MANY_REDIRECTS:
            /* configuration problems: retrying cannot fix them */
            res->outcome = SM_REST_REFUSED;
            break;
        case CURLE_SSL_CONNECT_ERROR:
            /* https:// to a plain-http port: OpenSSL reads the HTTP answer
             * as a TLS record ("wrong version number"); no retry fixes it */
            if (strstr(r->errbuf, "wrong version number") || strstr(r->errbuf, "packet length")) {
                res->outcome = SM_REST_REFUSED;
                snprintf(res->msg, sizeof res->msg, "%s on %.200s: TLS handshake failed (%.120s): "
                         "the server answers plain HTTP there? (use http://)", ep, r->shown,
                         r->errbuf);
                return res->outcome;
            }
            break;
        default:
            break;
        }
        if (cc == CURLE_WRITE_ERROR) /* on_body refused it: over RESP_MAX (or no memory) */
            snprintf(res->msg, sizeof res->msg, "%s on %.200s: reply not read: larger than "
                     "%u MiB (or out of memory)", ep, r->shown, RESP_MAX >> 20);
        else {
            /* the system's word for it ("Connection refused", "No route to
             * host"), which libcurl's text ("Couldn't connect to server")
             * leaves out */
            long os_errno = 0;
            char why[80] = "";
            r->c->easy_getinfo(r->h, CURLINFO_OS_ERRNO, &os_errno);
            /* a connection closed without a reply is a reset to the caller */
            res->os_errno = os_errno > 0 ? (int)os_errno : cc == CURLE_GOT_NOTHING ? ECONNRESET : 0;
            if (os_errno > 0 && !strstr(r->errbuf, strerror((int)os_errno)))
                snprintf(why, sizeof why, " (%s)", strerror((int)os_errno));
            snprintf(res->msg, sizeof res->msg, "%s on %.200s: %.200s", ep, r->shown,
                     r->errbuf[0] ? r->errbuf : r->c->easy_strerror(cc));
            if (why[0]) {
                size_t used = strlen(res->msg);
                snprintf(res->msg + used, sizeof res->msg - used, "%s", why);
            }
        }
        return res->outcome;
    }
    r->c->easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &http);
    res->retry_after = r->retry_after;
    sm_rest_parse_reply(endpoint, http, r->resp, r->resp_len, res);
    return res->outcome;
}

/* ---- retry policy -------------------------------------------------------------- */
uint64_t sm_rest_seed(const void *salt)
{
    struct timespec ts;
    uint64_t s;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)getpid() << 16 ^
        (uint64_t)(uintptr_t)salt;
    return s ? s : 0x9e3779b97f4a7c15ull;
}

static double uniform01(uint64_t *s)
{
    /* xorshift64*: plenty for jitter */
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return (double)((x * 0x2545F4914F6CDD1Dull) >> 11) / (double)(1ull << 53);
}

double sm_rest_backoff(int attempt, double retry_after, double base_s, double cap_s,
                       uint64_t *seed)
{
    double ceil_s;

    if (retry_after >= 0)
        return retry_after > 600 ? 600 : retry_after;
    if (attempt < 0)
        attempt = 0;
    if (attempt > 30)
        attempt = 30;
    ceil_s = base_s * (double)(1u << attempt);
    if (ceil_s > cap_s)
        ceil_s = cap_s;
    /* "full jitter" (AWS architecture blog, Exponential Backoff And Jitter):
     * retries of many ranks spread over the whole window */
    return ceil_s * uniform01(seed);
}

double sm_rest_parse_retry_after(const char *v, long now_epoch)
{
    char buf[128];
    size_t n;
    char *end;
    long secs;
    time_t when;

    while (*v == ' ' || *v == '\t')
        v++;
    n = strcspn(v, "\r\n");
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, v, n);
    buf[n] = '\0';
    if (isdigit((unsigned char)buf[0])) {
        errno = 0;
        secs = strtol(buf, &end, 10);
        if (errno || *end)
            return -1;
        return (double)secs;
    }
    when = sm_curl_builtin()->getdate(buf, NULL); /* RFC 9110 HTTP-date (and the obsolete forms) */
    if (when == (time_t)-1)
        return -1;
    return when > now_epoch ? (double)(when - now_epoch) : 0.0;
}

int sm_rest_call(sm_rest *r, const char *method, const char *endpoint, json_t *req,
                 json_t **resp, double deadline, char *err, size_t errlen)
{
    char *body = NULL;
    size_t len = 0;
    sm_rest_result res = {0};
    uint64_t seed = sm_rest_seed(r);
    int attempt = 0, outcome;
    atomic_llong dl = (long long)(deadline * 1000.0);
    atomic_llong *saved = r->abort_deadline_ms;

    if (resp)
        *resp = NULL;
    r->last_http = 0;
    r->last_error_code[0] = '\0';
    if (req) {
        body = json_dumps(req, JSON_COMPACT);
        if (!body) {
            snprintf(err, errlen, "out of memory");
            return SM_REST_FAILED;
        }
        len = strlen(body);
    }
    r->abort_deadline_ms = &dl; /* a request in flight stops at the deadline too */
    for (;;) {
        double wait;

        outcome = sm_rest_once(r, method, endpoint, body, len, &res);
        r->last_http = res.http;
        snprintf(r->last_error_code, sizeof r->last_error_code, "%s", res.error_code);
        if (outcome != SM_REST_RETRY)
            break;
        wait = sm_rest_backoff(attempt++, res.retry_after, 0.5, 8.0, &seed);
        if (sm_now_mono() + wait >= deadline) {
            snprintf(err, errlen, "%s (gave up after %d attempts)", res.msg, attempt);
            goto out;
        }
        sm_rest_result_clear(&res);
        /* in slices, so a cancel (a SIGTERM to scopemeter run) ends it at once */
        for (double end = sm_now_mono() + wait; !cancel_asked() && sm_now_mono() < end;)
            sm_sleep(end - sm_now_mono() < 0.05 ? end - sm_now_mono() : 0.05);
        if (cancel_asked()) {
            outcome = SM_REST_ABORTED;
            snprintf(err, errlen, "%.*s on %s: cancelled", (int)strcspn(endpoint, "?"),
                     endpoint, r->shown);
            goto out;
        }
    }
    if (outcome == SM_REST_OK) {
        if (resp) {
            *resp = res.body ? res.body : json_object();
            res.body = NULL;
        }
    } else if (outcome == SM_REST_ABORTED) {
        snprintf(err, errlen, "%.*s on %s: %s", (int)strcspn(endpoint, "?"), endpoint, r->shown,
                 cancel_asked() ? "cancelled" : "no answer before the deadline");
    } else {
        snprintf(err, errlen, "%s", res.msg);
    }
out:
    r->abort_deadline_ms = saved;
    sm_rest_result_clear(&res);
    free(body);
    return outcome;
}
